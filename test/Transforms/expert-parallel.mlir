// --moe-expert-parallel: the expert MLP of each layer becomes one rank's part
// of an exchange; the ranks together are checked against the one-rank layer
// by test/Execution/ep-*.mlir.
// RUN: moe-opt %s --moe-expert-parallel=ranks=4 --split-input-file | FileCheck %s
// RUN: moe-opt %s --moe-expert-parallel=ranks=1 --split-input-file | FileCheck %s --check-prefix=ONE
// RUN: moe-opt %s --moe-expert-parallel=ranks=4 --moe-split-exchanges --split-input-file | FileCheck %s --check-prefix=STAGES

// The expert weights become the rank's 8 / 4 = 2 experts; the route, the
// permute and the weighted combine stay where the tokens are.
// CHECK-LABEL: func.func @mixtral(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x16xbf16>, %[[L:[^:]+]]: tensor<?x8xf32>, %[[W13:[^:]+]]: tensor<2x48x16xbf16>, %[[W2:[^:]+]]: tensor<2x16x24xbf16>) -> tensor<?x16xbf16>
// CHECK-SAME: moe.expert_parallel_ranks = 4 : i64
// CHECK: %[[IDS:.*]], %[[W:.*]] = moe.route softmax_topk %[[L]] top 2
// CHECK: %[[ROWS:.*]], %[[OFF:.*]], %[[SLOTS:.*]] = moe.permute %[[X]], %[[IDS]]
// CHECK: %[[RECV:.*]], %[[LIDS:.*]], %[[COUNTS:.*]] = moe.dispatch %[[ROWS]], %[[OFF]] ranks 4 : (tensor<?x16xbf16>, tensor<9xi64>) -> (tensor<?x16xbf16>, tensor<?x1xi32>, tensor<4xi64>)
// CHECK: %[[LROWS:.*]], %[[LOFF:.*]], %[[LSLOTS:.*]] = moe.permute %[[RECV]], %[[LIDS]] : (tensor<?x16xbf16>, tensor<?x1xi32>) -> (tensor<?x16xbf16>, tensor<3xi64>, tensor<?x1xi64>)
// CHECK: %[[LO:.*]] = moe.expert_mlp silu %[[LROWS]], %[[LOFF]], %[[W13]], %[[W2]]
// CHECK: %[[BACK:.*]] = moe.unpermute %[[LO]], %[[LSLOTS]] : (tensor<?x16xbf16>, tensor<?x1xi64>) -> tensor<?x16xbf16>
// CHECK: %[[RET:.*]] = moe.undispatch %[[BACK]], %[[COUNTS]], %[[OFF]] ranks 4
// CHECK: %[[Y:.*]] = moe.unpermute %[[RET]], %[[SLOTS]] weights %[[W]]
// CHECK: return %[[Y]]
// ONE-LABEL: func.func @mixtral(
// ONE-SAME: tensor<8x48x16xbf16>, %{{[^:]+}}: tensor<8x16x24xbf16>
// ONE: moe.dispatch %{{.*}}, %{{.*}} ranks 1
// ONE: moe.undispatch %{{.*}}, %{{.*}}, %{{.*}} ranks 1

// Three stages: up to the dispatch, the rank's experts up to the undispatch,
// the combine. Each takes only what its ops read (by name: @mixtral's
// arguments arg<i>, exchange results x<s>_<j>, @mixtral's results result<i>,
// the other values v<k>) and returns what the exchange, a later stage or
// @mixtral's return reads, once each; moe.function_results names
// @mixtral's results.
// STAGES-NOT: func.func @mixtral(
// STAGES-LABEL: func.func @mixtral_stage0(
// STAGES-SAME: %[[X:[^:]+]]: tensor<?x16xbf16> {moe.name = "arg0"}, %[[L:[^:]+]]: tensor<?x8xf32> {moe.name = "arg1"}) -> (tensor<?x2xf32> {moe.name = "v0"}, tensor<?x16xbf16> {moe.name = "v1"}, tensor<9xi64> {moe.name = "v2"}, tensor<?x2xi64> {moe.name = "v3"})
// STAGES-SAME: moe.exchange = "moe.dispatch", moe.exchange_args = ["v1", "v2"], moe.exchange_ranks = 4 : i64, moe.exchange_results = ["x0_0", "x0_1", "x0_2"], moe.expert_parallel_ranks = 4 : i64, moe.function_args = ["arg0", "arg1", "arg2", "arg3"], moe.function_results = ["result0"], moe.program, moe.stage = 0 : i64, moe.stage_args = ["arg0", "arg1"], moe.stage_of = "mixtral", moe.stage_results = ["v0", "v1", "v2", "v3"]
// STAGES: %{{.*}}, %[[W:.*]] = moe.route softmax_topk %[[L]]
// STAGES: %[[ROWS:.*]], %[[OFF:.*]], %[[SLOTS:.*]] = moe.permute %[[X]]
// STAGES: return %[[W]], %[[ROWS]], %[[OFF]], %[[SLOTS]] :
// STAGES-LABEL: func.func @mixtral_stage1(
// STAGES-SAME: %[[W13:[^:]+]]: tensor<2x48x16xbf16> {moe.name = "arg2"}, %[[W2:[^:]+]]: tensor<2x16x24xbf16> {moe.name = "arg3"}, %[[RECV:[^:]+]]: tensor<?x16xbf16> {moe.name = "x0_0"}, %[[LIDS:[^:]+]]: tensor<?x1xi32> {moe.name = "x0_1"}) -> (tensor<?x16xbf16> {moe.name = "v4"})
// STAGES-SAME: moe.exchange = "moe.undispatch", moe.exchange_args = ["v4", "x0_2", "v2"], moe.exchange_ranks = 4 : i64, moe.exchange_results = ["x1_0"]
// STAGES-SAME: moe.function_results = ["result0"], moe.program, moe.stage = 1 : i64, moe.stage_args = ["arg2", "arg3", "x0_0", "x0_1"], moe.stage_of = "mixtral", moe.stage_results = ["v4"]
// STAGES-NOT: moe.dispatch
// STAGES: moe.permute %[[RECV]], %[[LIDS]]
// STAGES: moe.expert_mlp silu %{{.*}}, %{{.*}}, %[[W13]], %[[W2]]
// STAGES: %[[BACK:.*]] = moe.unpermute
// STAGES: return %[[BACK]] :
// STAGES-LABEL: func.func @mixtral_stage2(
// STAGES-SAME: %[[W2:[^:]+]]: tensor<?x2xf32> {moe.name = "v0"}, %[[SLOTS2:[^:]+]]: tensor<?x2xi64> {moe.name = "v3"}, %[[RET:[^:]+]]: tensor<?x16xbf16> {moe.name = "x1_0"}) -> (tensor<?x16xbf16> {moe.name = "result0"})
// STAGES-SAME: moe.function_results = ["result0"], moe.program, moe.stage = 2 : i64, moe.stage_args = ["v0", "v3", "x1_0"], moe.stage_of = "mixtral", moe.stage_results = ["result0"]
// STAGES-NOT: moe.exchange
// STAGES: moe.unpermute %[[RET]], %[[SLOTS2]] weights %[[W2]]
func.func @mixtral(%x: tensor<?x16xbf16>, %logits: tensor<?x8xf32>,
                   %w13: tensor<8x48x16xbf16>, %w2: tensor<8x16x24xbf16>)
    -> tensor<?x16xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xbf16>, tensor<?x2xi32>)
      -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x16xbf16>, tensor<8x48x16xbf16>, tensor<9xi64>) -> tensor<?x48xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x48xbf16>) -> tensor<?x24xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x24xbf16>, tensor<8x16x24xbf16>, tensor<9xi64>) -> tensor<?x16xbf16>
  %y = moe.unpermute %o, %slots weights %w
      : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

// GPT-OSS's biases and a shared expert on the combine: both biases are
// sliced with the weights, the shared expert stays replicated.
// CHECK-LABEL: func.func @biased(
// CHECK-SAME: tensor<2x16x12xbf16>, %{{[^:]+}}: tensor<2x12x8xbf16>, %{{[^:]+}}: tensor<2x16xf32>, %{{[^:]+}}: tensor<2x12xf32>, %{{[^:]+}}: tensor<16x12xbf16>, %{{[^:]+}}: tensor<12x8xbf16>)
// CHECK: %[[S:.*]] = moe.shared_mlp
// CHECK: moe.dispatch
// CHECK: moe.expert_mlp gptoss %{{.*}} gate_up_bias %{{.*}} down_bias %{{.*}} :
// CHECK: moe.undispatch
// CHECK: moe.unpermute %{{.*}}, %{{.*}} weights %{{.*}} shared %[[S]] :
func.func @biased(%x: tensor<?x12xbf16>, %logits: tensor<?x8xf32>,
                  %w13: tensor<8x16x12xbf16>, %w2: tensor<8x12x8xbf16>,
                  %b13: tensor<8x16xf32>, %b2: tensor<8x12xf32>,
                  %sw13: tensor<16x12xbf16>, %sw2: tensor<12x8xbf16>)
    -> tensor<?x12xbf16> {
  %s = moe.shared_mlp silu %x, %sw13, %sw2
      : (tensor<?x12xbf16>, tensor<16x12xbf16>, tensor<12x8xbf16>) -> tensor<?x12xbf16>
  %ids, %w = moe.route topk_softmax %logits top 2
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x12xbf16>, tensor<?x2xi32>)
      -> (tensor<?x12xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %o = moe.expert_mlp gptoss %rows, %offsets, %w13, %w2 gate_up_bias %b13
      down_bias %b2
      : (tensor<?x12xbf16>, tensor<9xi64>, tensor<8x16x12xbf16>,
         tensor<8x12x8xbf16>, tensor<8x16xf32>, tensor<8x12xf32>)
      -> tensor<?x12xbf16>
  %y = moe.unpermute %o, %slots weights %w shared %s
      : (tensor<?x12xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x12xbf16>)
      -> tensor<?x12xbf16>
  return %y : tensor<?x12xbf16>
}

// -----

// A moe.layer is unfolded: the exchange cannot be inside one runtime call.
// CHECK-LABEL: func.func @layered(
// CHECK-NOT: moe.layer
// CHECK: moe.dispatch
func.func @layered(%x: tensor<?x16xbf16>, %logits: tensor<?x8xf32>,
                   %w13: tensor<8x48x16xbf16>, %w2: tensor<8x16x24xbf16>)
    -> tensor<?x16xbf16> {
  %y = moe.layer : tensor<?x16xbf16> {
    %ids, %w = moe.route softmax_topk %logits top 2 renormalize
        : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
    %rows, %offsets, %slots = moe.permute %x, %ids
        : (tensor<?x16xbf16>, tensor<?x2xi32>)
        -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
    %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2
        : (tensor<?x16xbf16>, tensor<9xi64>, tensor<8x48x16xbf16>,
           tensor<8x16x24xbf16>) -> tensor<?x16xbf16>
    %y0 = moe.unpermute %o, %slots weights %w
        : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xbf16>
    moe.yield %y0 : tensor<?x16xbf16>
  }
  return %y : tensor<?x16xbf16>
}
