// The backward of an expert-parallel rank program (--moe-expert-parallel
// first): the adjoint exchanges run the other way. Values are checked by
// test/Execution/ep-backward-*.mlir.
// RUN: moe-opt %s --moe-expert-parallel=ranks=2 --moe-generate-backward | FileCheck %s
// The rows of a rank are what other ranks sent: recompute-rows refuses.
// RUN: not moe-opt %s --moe-expert-parallel=ranks=2 --moe-generate-backward=recompute-rows=true -o /dev/null 2>&1 | FileCheck %s --check-prefix=REFUSED
// REFUSED: error: --moe-generate-backward: cannot derive the backward of @mixtral: recompute-rows cannot recompute the expert-parallel rows (they are the rows other ranks sent)

// CHECK-LABEL: func.func @mixtral_backward(
// CHECK-SAME: %[[L:[^:]+]]: tensor<?x8xf32> {moe.name = "logits"}, %[[IDS:[^:]+]]: tensor<?x2xi32> {moe.donated, moe.name = "ids"}, %[[W:[^:]+]]: tensor<?x2xf32> {moe.donated, moe.name = "weights"}, %[[ROWS:[^:]+]]: tensor<?x16xbf16> {moe.donated, moe.name = "rows"}, %[[OFF:[^:]+]]: tensor<5xi64> {moe.donated, moe.name = "offsets"}, %[[SLOTS:[^:]+]]: tensor<?x2xi64> {moe.donated, moe.name = "slots"}, %[[LSLOTS:[^:]+]]: tensor<?x1xi64> {moe.donated, moe.name = "local_slots"}, %[[DOFF:[^:]+]]: tensor<9xi64> {moe.donated, moe.name = "dispatch_offsets"}, %[[COUNTS:[^:]+]]: tensor<2xi64> {moe.donated, moe.name = "counts"}, %[[COMB:[^:]+]]: tensor<?x16xbf16> {moe.donated, moe.name = "combined"}, %[[GU:[^:]+]]: tensor<?x48xbf16> {moe.donated, moe.name = "gate_up"}, %[[W13:[^:]+]]: tensor<4x48x16xbf16> {moe.name = "gate_up_weights"}, %[[W2:[^:]+]]: tensor<4x16x24xbf16> {moe.name = "down_weights"}, %[[DY:[^:]+]]: tensor<?x16xbf16> {moe.name = "grad_out"})
// CHECK-SAME: -> (tensor<?x16xbf16> {moe.name = "grad_tokens"}, tensor<?x8xf32> {moe.name = "grad_logits"}, tensor<4x48x16xbf16> {moe.name = "grad_gate_up_weights"}, tensor<4x16x24xbf16> {moe.name = "grad_down_weights"})
// CHECK-SAME: moe.expert_parallel_ranks = 2 : i64
// CHECK-SAME: moe.saved = ["logits", "ids", "weights", "rows", "offsets", "slots", "local_slots", "dispatch_offsets", "counts", "combined", "gate_up", "gate_up_weights", "down_weights"]
// The combine's adjoint on the tokens' rank, then the row gradients go to
// the ranks that computed the rows (a dispatch of the same layout).
// CHECK: %[[DCOMB:.*]], %[[DW:.*]] = moe.unpermute_grad %[[DY]], %[[COMB]], %[[SLOTS]] weights %[[W]]
// CHECK: %[[RECV:.*]], %{{.*}}, %{{.*}} = moe.dispatch %[[DCOMB]], %[[DOFF]] ranks 2
// The experts' output is not saved: the received gradients only need the
// shape of the expert rows, which the saved rows have.
// CHECK: %[[DO:.*]] = moe.unpermute_grad %[[RECV]], %[[ROWS]], %[[LSLOTS]] : (tensor<?x16xbf16>, tensor<?x16xbf16>, tensor<?x1xi64>) -> tensor<?x16xbf16>
// CHECK: moe.grouped_dgrad %[[DO]], %[[W2]], %[[OFF]]
// CHECK: %[[DGU:.*]] = moe.swiglu_grad silu %[[GU]]
// CHECK: %[[DLROWS:.*]] = moe.grouped_dgrad %[[DGU]], %[[W13]], %[[OFF]]
// The local permute's adjoint, then back to the tokens' ranks.
// CHECK: %[[DRECV:.*]] = moe.unpermute %[[DLROWS]], %[[LSLOTS]] : (tensor<?x16xbf16>, tensor<?x1xi64>) -> tensor<?x16xbf16>
// CHECK: %[[DROWS:.*]] = moe.undispatch %[[DRECV]], %[[COUNTS]], %[[DOFF]] ranks 2
// CHECK: moe.grouped_wgrad %[[DGU]], %[[ROWS]], %[[OFF]]
// CHECK: %[[DX:.*]] = moe.unpermute %[[DROWS]], %[[SLOTS]] : (tensor<?x16xbf16>, tensor<?x2xi64>) -> tensor<?x16xbf16>
// CHECK: moe.route_grad softmax_topk %[[L]], %[[IDS]], %[[DW]] renormalize
func.func @mixtral(%x: tensor<?x16xbf16>, %logits: tensor<?x8xf32>,
                   %w13: tensor<8x48x16xbf16>, %w2: tensor<8x16x24xbf16>)
    -> tensor<?x16xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
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
