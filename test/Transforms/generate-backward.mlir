// --moe-generate-backward adds @F_train and @F_backward beside @F; the
// gradients' values are checked by test/Execution/backward-*.mlir.
// RUN: moe-opt %s --moe-generate-backward --split-input-file | FileCheck %s
// RUN: moe-opt %s --moe-generate-backward=recompute-gate-up=true --split-input-file | FileCheck %s --check-prefix=RECOMPUTE

// The unfused chain: @F stays, @F_train returns y and the saved values,
// @F_backward runs the adjoints from the combine back to the router. Both
// are programs (one runtime entry each on the GPU) whose arguments and
// results are named: @F_train's inputs and saved values by the names the
// backward's arguments have, the gradients grad_<input>.
// CHECK-LABEL: func.func @mixtral(
// CHECK-NOT: moe.train
// CHECK: moe.unpermute
// CHECK-NEXT: return
// CHECK-LABEL: func.func @mixtral_train(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x16xbf16> {moe.name = "tokens"}, %[[L:[^:]+]]: tensor<?x8xf32> {moe.name = "logits"}, %[[W13:[^:]+]]: tensor<8x48x16xbf16> {moe.name = "gate_up_weights"}, %[[W2:[^:]+]]: tensor<8x16x24xbf16> {moe.name = "down_weights"})
// CHECK-SAME: -> (tensor<?x16xbf16> {moe.name = "out"}, tensor<?x8xf32> {moe.name = "logits"}, tensor<?x2xi32> {moe.name = "ids"}, tensor<?x2xf32> {moe.name = "weights"}, tensor<?x16xbf16> {moe.name = "rows"}, tensor<9xi64> {moe.name = "offsets"}, tensor<?x2xi64> {moe.name = "slots"}, tensor<?x48xbf16> {moe.name = "gate_up"}, tensor<?x16xbf16> {moe.name = "expert_out"}, tensor<8x48x16xbf16> {moe.name = "gate_up_weights"}, tensor<8x16x24xbf16> {moe.name = "down_weights"})
// CHECK-SAME: attributes {moe.program, moe.train}
// CHECK: %[[IDS:.*]], %[[W:.*]] = moe.route softmax_topk %[[L]] top 2 renormalize
// CHECK: %[[ROWS:.*]], %[[OFF:.*]], %[[SLOTS:.*]] = moe.permute %[[X]], %[[IDS]]
// CHECK: %[[GU:.*]] = moe.grouped_matmul %[[ROWS]], %[[W13]], %[[OFF]]
// CHECK: %[[H:.*]] = moe.swiglu silu %[[GU]]
// CHECK: %[[O:.*]] = moe.grouped_matmul %[[H]], %[[W2]], %[[OFF]]
// CHECK: %[[Y:.*]] = moe.unpermute %[[O]], %[[SLOTS]] weights %[[W]]
// CHECK: return %[[Y]], %[[L]], %[[IDS]], %[[W]], %[[ROWS]], %[[OFF]], %[[SLOTS]], %[[GU]], %[[O]], %[[W13]], %[[W2]] :
// CHECK-LABEL: func.func @mixtral_backward(
// CHECK-SAME: %[[BL:[^:]+]]: tensor<?x8xf32> {moe.name = "logits"}, %[[BIDS:[^:]+]]: tensor<?x2xi32> {moe.donated, moe.name = "ids"}, %[[BW:[^:]+]]: tensor<?x2xf32> {moe.donated, moe.name = "weights"}, %[[BROWS:[^:]+]]: tensor<?x16xbf16> {moe.donated, moe.name = "rows"}, %[[BOFF:[^:]+]]: tensor<9xi64> {moe.donated, moe.name = "offsets"}, %[[BSLOTS:[^:]+]]: tensor<?x2xi64> {moe.donated, moe.name = "slots"}, %[[BGU:[^:]+]]: tensor<?x48xbf16> {moe.donated, moe.name = "gate_up"}, %[[BO:[^:]+]]: tensor<?x16xbf16> {moe.donated, moe.name = "expert_out"}, %[[BW13:[^:]+]]: tensor<8x48x16xbf16> {moe.name = "gate_up_weights"}, %[[BW2:[^:]+]]: tensor<8x16x24xbf16> {moe.name = "down_weights"}, %[[DY:[^:]+]]: tensor<?x16xbf16> {moe.name = "grad_out"})
// CHECK-SAME: -> (tensor<?x16xbf16> {moe.name = "grad_tokens"}, tensor<?x8xf32> {moe.name = "grad_logits"}, tensor<8x48x16xbf16> {moe.name = "grad_gate_up_weights"}, tensor<8x16x24xbf16> {moe.name = "grad_down_weights"})
// CHECK-SAME: moe.gradient_of = array<i64: 0, 1, 2, 3>
// CHECK-SAME: moe.program
// CHECK-SAME: moe.saved = ["logits", "ids", "weights", "rows", "offsets", "slots", "gate_up", "expert_out", "gate_up_weights", "down_weights"]
// CHECK: %[[DO:.*]], %[[DW:.*]] = moe.unpermute_grad %[[DY]], %[[BO]], %[[BSLOTS]] weights %[[BW]]
// CHECK: %[[BH:.*]] = moe.swiglu silu %[[BGU]]
// CHECK: %[[DW2:.*]] = moe.grouped_wgrad %[[DO]], %[[BH]], %[[BOFF]] : {{.*}} -> tensor<8x16x24xbf16>
// CHECK: %[[DH:.*]] = moe.grouped_dgrad %[[DO]], %[[BW2]], %[[BOFF]]
// CHECK: %[[DGU:.*]] = moe.swiglu_grad silu %[[BGU]], %[[DH]]
// CHECK: %[[DROWS:.*]] = moe.grouped_dgrad %[[DGU]], %[[BW13]], %[[BOFF]]
// CHECK: %[[DW13:.*]] = moe.grouped_wgrad %[[DGU]], %[[BROWS]], %[[BOFF]] : {{.*}} -> tensor<8x48x16xbf16>
// CHECK: %[[DX:.*]] = moe.unpermute %[[DROWS]], %[[BSLOTS]] : (tensor<?x16xbf16>, tensor<?x2xi64>) -> tensor<?x16xbf16>
// CHECK: %[[DL:.*]] = moe.route_grad softmax_topk %[[BL]], %[[BIDS]], %[[DW]] renormalize
// CHECK: return %[[DX]], %[[DL]], %[[DW13]], %[[DW2]] :

// With recompute-gate-up the gate-up output is not saved: the backward
// computes it again from the saved rows.
// RECOMPUTE-LABEL: func.func @mixtral_backward(
// RECOMPUTE-SAME: %[[ROWS:[^:]+]]: tensor<?x16xbf16> {moe.donated, moe.name = "rows"}, %[[OFF:[^:]+]]: tensor<9xi64> {moe.donated, moe.name = "offsets"}, %{{[^:]+}}: tensor<?x2xi64> {moe.donated, moe.name = "slots"}, %{{[^:]+}}: tensor<?x16xbf16> {moe.donated, moe.name = "expert_out"}, %[[W13:[^:]+]]: tensor<8x48x16xbf16> {moe.name = "gate_up_weights"}
// RECOMPUTE-SAME: moe.saved = ["logits", "ids", "weights", "rows", "offsets", "slots", "expert_out", "gate_up_weights", "down_weights"]
// RECOMPUTE: %[[GU:.*]] = moe.grouped_matmul %[[ROWS]], %[[W13]], %[[OFF]]
// RECOMPUTE: moe.swiglu silu %[[GU]]
// RECOMPUTE: moe.swiglu_grad silu %[[GU]],
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

// A fused layer (moe.layer around moe.expert_mlp) with GPT-OSS's biases and
// DeepSeek-style routing options: the train function is unfused; the
// arguments come in another order, and the gradients follow it (the
// correction bias, argument 1, gets none); with recompute-gate-up the
// gate-up bias is saved for the recomputation.
// CHECK-LABEL: func.func @fused(
// CHECK: moe.layer
// CHECK-LABEL: func.func @fused_train(
// CHECK-NOT: moe.layer
// CHECK-NOT: moe.expert_mlp
// CHECK: moe.swiglu gptoss %{{.*}} alpha 1.500000e+00 limit 6.000000e+00
// CHECK: return
// CHECK-LABEL: func.func @fused_backward(
// CHECK-SAME: -> (tensor<8x16x12xbf16> {moe.name = "grad_gate_up_weights"}, tensor<?x8xf32> {moe.name = "grad_logits"}, tensor<8x12xf32> {moe.name = "grad_down_bias"}, tensor<?x12xbf16> {moe.name = "grad_tokens"}, tensor<8x12x8xbf16> {moe.name = "grad_down_weights"}, tensor<8x16xf32> {moe.name = "grad_gate_up_bias"})
// CHECK-SAME: moe.gradient_of = array<i64: 0, 2, 3, 4, 5, 6>
// CHECK: moe.swiglu_grad gptoss %{{.*}}, %{{.*}} alpha 1.500000e+00 limit 6.000000e+00
// CHECK: %[[DW13:.*]], %[[DB13:.*]] = moe.grouped_wgrad {{.*}} -> (tensor<8x16x12xbf16>, tensor<8x16xf32>)
// CHECK: %[[DL:.*]] = moe.route_grad sigmoid_topk %{{.*}}, %{{.*}}, %{{.*}} renormalize scale 2.500000e+00
// CHECK: return %[[DW13]], %[[DL]], %{{.*}}, %{{.*}}, %{{.*}}, %[[DB13]] :
// RECOMPUTE-LABEL: func.func @fused_backward(
// RECOMPUTE-SAME: moe.saved = ["logits", "ids", "weights", "rows", "offsets", "slots", "gate_up_bias", "expert_out", "gate_up_weights", "down_weights"]
// RECOMPUTE: moe.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} :
func.func @fused(%w13: tensor<8x16x12xbf16>, %bias: tensor<8xf32>,
                 %logits: tensor<?x8xf32>, %b2: tensor<8x12xf32>,
                 %x: tensor<?x12xbf16>, %w2: tensor<8x12x8xbf16>,
                 %b13: tensor<8x16xf32>) -> tensor<?x12xbf16> {
  %y = moe.layer : tensor<?x12xbf16> {
    %ids, %w = moe.route sigmoid_topk %logits bias %bias top 2 groups 4 select 2
        renormalize scale 2.5
        : (tensor<?x8xf32>, tensor<8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
    %rows, %offsets, %slots = moe.permute %x, %ids
        : (tensor<?x12xbf16>, tensor<?x2xi32>)
        -> (tensor<?x12xbf16>, tensor<9xi64>, tensor<?x2xi64>)
    %o = moe.expert_mlp gptoss %rows, %offsets, %w13, %w2 gate_up_bias %b13
        down_bias %b2 alpha 1.5 limit 6.0
        : (tensor<?x12xbf16>, tensor<9xi64>, tensor<8x16x12xbf16>,
           tensor<8x12x8xbf16>, tensor<8x16xf32>, tensor<8x12xf32>)
        -> tensor<?x12xbf16>
    %y0 = moe.unpermute %o, %slots weights %w
        : (tensor<?x12xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x12xbf16>
    moe.yield %y0 : tensor<?x12xbf16>
  }
  return %y : tensor<?x12xbf16>
}

// -----

// Without a route the ids and weights are arguments: the weights get a
// gradient (the combine's), the ids none, and no route_grad is built. The
// weights, the caller's, are not the backward's to overwrite (moe.donated):
// what the train forward made is.
// CHECK-LABEL: func.func @routeless_backward(
// CHECK-SAME: tensor<?x2xf32> {moe.name = "weights"}, %{{[^:]+}}: tensor<?x16xbf16> {moe.donated, moe.name = "rows"}
// CHECK-SAME: -> (tensor<?x16xbf16> {moe.name = "grad_tokens"}, tensor<?x2xf32> {moe.name = "grad_weights"}, tensor<8x48x16xbf16> {moe.name = "grad_gate_up_weights"}, tensor<8x16x24xbf16> {moe.name = "grad_down_weights"})
// CHECK-SAME: moe.gradient_of = array<i64: 0, 2, 3, 4>
// CHECK-SAME: moe.saved = ["weights", "rows", "offsets", "slots", "gate_up", "expert_out", "gate_up_weights", "down_weights"]
// CHECK: %{{.*}}, %[[DW:.*]] = moe.unpermute_grad
// CHECK-NOT: moe.route_grad
// CHECK: return %{{.*}}, %[[DW]], %{{.*}}, %{{.*}} :
func.func @routeless(%x: tensor<?x16xbf16>, %ids: tensor<?x2xi32>,
                     %w: tensor<?x2xf32>, %w13: tensor<8x48x16xbf16>,
                     %w2: tensor<8x16x24xbf16>) -> tensor<?x16xbf16> {
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xbf16>, tensor<?x2xi32>)
      -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x16xbf16>, tensor<9xi64>, tensor<8x48x16xbf16>,
         tensor<8x16x24xbf16>) -> tensor<?x16xbf16>
  %y = moe.unpermute %o, %slots weights %w
      : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

// Functions without moe ops, and declarations, are left alone.
// CHECK-LABEL: func.func private @declared(
// CHECK-LABEL: func.func @plain(
// CHECK-NOT: func.func @plain_train
// CHECK-NOT: func.func @plain_backward
func.func private @declared(tensor<4xf32>) -> tensor<4xf32>
func.func @plain(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

// A gated shared expert (Qwen2-MoE) on the combine: moe.shared_mlp_grad gives
// its weights' and gate's gradients, and its tokens' gradient joins dX as the
// final unpermute's shared term; the tokens and its weights are saved.
// CHECK-LABEL: func.func @shared_backward(
// CHECK-SAME: -> (tensor<?x16xbf16> {moe.name = "grad_tokens"}, tensor<?x8xf32> {moe.name = "grad_logits"}, tensor<8x16x16xbf16> {moe.name = "grad_gate_up_weights"}, tensor<8x16x8xbf16> {moe.name = "grad_down_weights"}, tensor<64x16xbf16> {moe.name = "grad_shared_gate_up_weights"}, tensor<16x32xbf16> {moe.name = "grad_shared_down_weights"}, tensor<1x16xbf16> {moe.name = "grad_shared_gate_weights"})
// CHECK-SAME: moe.gradient_of = array<i64: 0, 1, 2, 3, 4, 5, 6>
// CHECK-SAME: moe.saved = ["logits", "ids", "weights", "rows", "offsets", "slots", "gate_up", "expert_out", "gate_up_weights", "down_weights", "tokens", "shared_gate_up_weights", "shared_down_weights", "shared_gate_weights"]
// CHECK: %[[DXS:.*]], %[[DSW13:.*]], %[[DSW2:.*]], %[[DG:.*]] = moe.shared_mlp_grad silu %[[DY:arg14]], %arg10, %arg11, %arg12 gate %arg13
// CHECK: %[[DX:.*]] = moe.unpermute %{{.*}}, %arg5 shared %[[DXS]]
// CHECK: return %[[DX]], %{{.*}}, %{{.*}}, %{{.*}}, %[[DSW13]], %[[DSW2]], %[[DG]] :
func.func @shared(%x: tensor<?x16xbf16>, %logits: tensor<?x8xf32>,
                  %w13: tensor<8x16x16xbf16>, %w2: tensor<8x16x8xbf16>,
                  %sw13: tensor<64x16xbf16>, %sw2: tensor<16x32xbf16>,
                  %sgate: tensor<1x16xbf16>) -> tensor<?x16xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 4
      : (tensor<?x8xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xbf16>, tensor<?x4xi32>)
      -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x4xi64>)
  %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x16xbf16>, tensor<9xi64>, tensor<8x16x16xbf16>,
         tensor<8x16x8xbf16>) -> tensor<?x16xbf16>
  %sh = moe.shared_mlp silu %x, %sw13, %sw2 gate %sgate
      : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>,
         tensor<1x16xbf16>) -> tensor<?x16xbf16>
  %y = moe.unpermute %o, %slots weights %w shared %sh
      : (tensor<?x16xbf16>, tensor<?x4xi64>, tensor<?x4xf32>, tensor<?x16xbf16>)
      -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}
