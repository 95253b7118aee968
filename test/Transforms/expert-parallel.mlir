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
// the combine. Each takes @mixtral's arguments, the exchange's results and
// what the stage before carried.
// STAGES-NOT: func.func @mixtral(
// STAGES-LABEL: func.func @mixtral_stage0(
// STAGES-SAME: -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xf32>, tensor<9xi64>, tensor<?x2xi64>)
// STAGES-SAME: moe.exchange = "moe.dispatch", moe.exchange_operands = 2 : i64, moe.exchange_ranks = 4 : i64, moe.expert_parallel_ranks = 4 : i64, moe.stage = 0 : i64
// STAGES: moe.route
// STAGES: %[[ROWS:.*]], %[[OFF:.*]], %[[SLOTS:.*]] = moe.permute
// STAGES: return %[[ROWS]], %[[OFF]], %{{.*}}, %[[OFF]], %[[SLOTS]] :
// STAGES-LABEL: func.func @mixtral_stage1(
// STAGES-SAME: %[[RECV:arg4]]: tensor<?x16xbf16>, %[[LIDS:arg5]]: tensor<?x1xi32>, %[[COUNTS:arg6]]: tensor<4xi64>, %[[W:arg7]]: tensor<?x2xf32>, %[[OFF1:arg8]]: tensor<9xi64>, %[[SLOTS1:arg9]]: tensor<?x2xi64>)
// STAGES-SAME: moe.exchange = "moe.undispatch", moe.exchange_operands = 3 : i64
// STAGES-NOT: moe.dispatch
// STAGES: moe.permute %[[RECV]], %[[LIDS]]
// STAGES: moe.expert_mlp
// STAGES: %[[BACK:.*]] = moe.unpermute
// STAGES: return %[[BACK]], %[[COUNTS]], %[[OFF1]], %[[W]], %[[SLOTS1]] :
// STAGES-LABEL: func.func @mixtral_stage2(
// STAGES-SAME: %[[RET:arg4]]: tensor<?x16xbf16>, %[[W2:arg5]]: tensor<?x2xf32>, %[[SLOTS2:arg6]]: tensor<?x2xi64>) -> tensor<?x16xbf16>
// STAGES-SAME: moe.stage = 2 : i64
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
