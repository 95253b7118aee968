// Pins the shape of the CPU reference lowering; the numbers it computes are
// checked by the tests in test/Execution.
// RUN: moe-opt %s --convert-moe-to-linalg --split-input-file | FileCheck %s

// Softmax over experts, then k arg-max steps, each marking its choice taken.
// CHECK-LABEL: func @route_softmax
// CHECK-NOT: moe.
// CHECK: math.exp
// CHECK-COUNT-2: arith.cmpf ogt
// CHECK: tensor.insert_slice {{.*}}[0, 1] [%{{.*}}, 1]
// CHECK: arith.divf
// CHECK: return
func.func @route_softmax(%l: tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>) {
  %i, %w = moe.route softmax_topk %l top 2 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return %i, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// Group scores come from a [T, G, E/G] view of the biased sigmoid scores.
// CHECK-LABEL: func @route_groups
// CHECK: tensor.expand_shape {{.*}} into tensor<?x4x4xf32>
// CHECK: tensor.collapse_shape {{.*}} into tensor<?x16xi1>
// CHECK-NOT: moe.route
func.func @route_groups(%l: tensor<?x16xf32>, %b: tensor<16xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>) {
  %i, %w = moe.route sigmoid_topk %l bias %b top 4 groups 4 select 2 renormalize scale 2.5
      : (tensor<?x16xf32>, tensor<16xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
  return %i, %w : tensor<?x4xi32>, tensor<?x4xf32>
}

// -----

// Counting sort: count, scan, hand out rows; then gather token rows.
// CHECK-LABEL: func @permute
// CHECK: scf.for
// CHECK: scf.for
// CHECK: arith.ceildivui
// CHECK: scf.for
// CHECK: linalg.generic
// CHECK-NOT: moe.permute
func.func @permute(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>)
    -> (tensor<?x16xf32>, tensor<9xi64>, tensor<?x2xi32>) {
  %r, %o, %s = moe.permute %x, %ids pad_to 4
      : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<9xi64>, tensor<?x2xi32>)
  return %r, %o, %s : tensor<?x16xf32>, tensor<9xi64>, tensor<?x2xi32>
}

// -----

// One matmul per expert on its clamped row range, accumulated in f32.
// CHECK-LABEL: func @grouped_matmul
// CHECK: scf.for %[[E:.*]] = %{{.*}} to %c4
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: tensor.extract_slice %{{.*}}[%[[E]], 0, 0] [1, 32, 16] [1, 1, 1] : tensor<4x32x16xbf16> to tensor<32x16xbf16>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.extf
// CHECK: tensor.insert_slice
// CHECK: arith.truncf {{.*}} : f32 to bf16
func.func @grouped_matmul(%r: tensor<?x16xbf16>, %w: tensor<4x32x16xbf16>, %o: tensor<5xi32>,
                          %b: tensor<4x32xf32>) -> tensor<?x32xbf16> {
  %y = moe.grouped_matmul %r, %w, %o bias %b
      : (tensor<?x16xbf16>, tensor<4x32x16xbf16>, tensor<5xi32>, tensor<4x32xf32>) -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// CHECK-LABEL: func @swiglu_gptoss
// CHECK: arith.minimumf
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK-NOT: moe.swiglu
func.func @swiglu_gptoss(%g: tensor<?x32xf32>) -> tensor<?x16xf32> {
  %h = moe.swiglu gptoss %g : (tensor<?x32xf32>) -> tensor<?x16xf32>
  return %h : tensor<?x16xf32>
}

// -----

// CHECK-LABEL: func @unpermute
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: scf.if
// CHECK: tensor.extract
func.func @unpermute(%r: tensor<?x16xf32>, %s: tensor<?x2xi64>, %w: tensor<?x2xf32>) -> tensor<?x16xf32> {
  %y = moe.unpermute %r, %s weights %w
      : (tensor<?x16xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Blocks become loops of a [d0/b0, b0, d1/b1, b1] view.
// CHECK-LABEL: func @quantize_mx
// CHECK: tensor.expand_shape {{.*}} output_shape [%{{.*}}, 1, 2, 32] : tensor<?x64xf32> into tensor<?x1x2x32xf32>
// CHECK: math.absf
// CHECK: arith.bitcast {{.*}} : i8 to f8E8M0FNU
// CHECK: math.roundeven
// CHECK: arith.bitcast {{.*}} : i8 to f8E4M3FN
// CHECK: tensor.collapse_shape
func.func @quantize_mx(%x: tensor<?x64xf32>) -> (tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x64xf32> -> tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU>
  return %q, %s : tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU>
}

// -----

// CHECK-LABEL: func @dequantize_blocks
// CHECK: tensor.expand_shape {{.*}} into tensor<2x128x2x128xf8E4M3FN>
// CHECK: arith.bitcast {{.*}} : f8E4M3FN to i8
// CHECK: arith.mulf
// CHECK-NOT: moe.dequantize
func.func @dequantize_blocks(%q: tensor<256x256xf8E4M3FN>, %s: tensor<2x2xf32>) -> tensor<256x256xbf16> {
  %d = moe.dequantize %q, %s from <f8E4M3FN, [128, 128], f32>
      : tensor<256x256xf8E4M3FN>, tensor<2x2xf32> -> tensor<256x256xbf16>
  return %d : tensor<256x256xbf16>
}

// -----

// Fused ops are expanded and lowered in the same pass.
// CHECK-LABEL: func @expert_mlp
// CHECK-NOT: moe.
// CHECK-COUNT-2: scf.for
func.func @expert_mlp(%rows: tensor<?x12xf32>, %offsets: tensor<5xi64>,
                      %w13: tensor<4x16x12xf32>, %w2: tensor<4x12x8xf32>) -> tensor<?x12xf32> {
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x12xf32>, tensor<4x12x8xf32>) -> tensor<?x12xf32>
  return %y : tensor<?x12xf32>
}

// -----

// The shared expert: gate-up matmul accumulated in f32 and rounded to bf16,
// silu(gate) * up, the down matmul, then the per-token sigmoid gate (its
// logit a [T, H] . [1, H] reduction in f32) before the one rounding.
// CHECK-LABEL: func @shared_mlp_gated
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x16xbf16>, %[[W13:[a-z0-9]+]]: tensor<48x16xbf16>, %[[W2:[a-z0-9]+]]: tensor<16x24xbf16>, %[[G:[a-z0-9]+]]: tensor<1x16xbf16>
// CHECK: %[[GU:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]], %[[W13]] : tensor<?x16xbf16>, tensor<48x16xbf16>) outs(%{{.*}} : tensor<?x48xf32>)
// CHECK: %[[GU16:.*]] = linalg.generic {{.*}} ins(%[[GU]] : tensor<?x48xf32>) outs(%{{.*}} : tensor<?x48xbf16>)
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: %[[WIDTH:.*]] = arith.divui %{{.*}}, %{{.*}} : index
// CHECK: %[[GATE:.*]] = tensor.extract_slice %[[GU16]][0, 0] [%{{.*}}, %[[WIDTH]]] [1, 1]
// CHECK: %[[UP:.*]] = tensor.extract_slice %[[GU16]][0, %[[WIDTH]]] [%{{.*}}, %[[WIDTH]]] [1, 1]
// CHECK: %[[H:.*]] = linalg.generic {{.*}} ins(%[[GATE]], %[[UP]] : tensor<?x?xbf16>, tensor<?x?xbf16>) outs(%{{.*}} : tensor<?x?xbf16>)
// CHECK: math.exp
// CHECK: %[[DOWN:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[H]], %[[W2]] : tensor<?x?xbf16>, tensor<16x24xbf16>) outs(%{{.*}} : tensor<?x16xf32>)
// CHECK: %[[LOGIT:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[X]], %[[G]] : tensor<?x16xbf16>, tensor<1x16xbf16>) outs(%{{.*}} : tensor<?xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[LOGIT]] : tensor<?xf32>) outs(%[[DOWN]] : tensor<?x16xf32>)
// CHECK: math.exp
// CHECK: arith.mulf
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK-NOT: moe.
func.func @shared_mlp_gated(%x: tensor<?x16xbf16>, %w13: tensor<48x16xbf16>, %w2: tensor<16x24xbf16>,
                            %g: tensor<1x16xbf16>) -> tensor<?x16xbf16> {
  %s = moe.shared_mlp silu %x, %w13, %w2 gate %g
      : (tensor<?x16xbf16>, tensor<48x16xbf16>, tensor<16x24xbf16>, tensor<1x16xbf16>) -> tensor<?x16xbf16>
  return %s : tensor<?x16xbf16>
}

// -----

// Without a gate the f32 down projection is the result (f32: no rounding).
// CHECK-LABEL: func @shared_mlp_f32
// CHECK-COUNT-2: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-NOT: ["parallel", "reduction"]
// CHECK-NOT: arith.truncf
// CHECK: return
func.func @shared_mlp_f32(%x: tensor<?x16xf32>, %w13: tensor<48x16xf32>, %w2: tensor<16x24xf32>) -> tensor<?x16xf32> {
  %s = moe.shared_mlp silu %x, %w13, %w2
      : (tensor<?x16xf32>, tensor<48x16xf32>, tensor<16x24xf32>) -> tensor<?x16xf32>
  return %s : tensor<?x16xf32>
}

// -----

// The shared addend joins the f32 weighted sum, which is then rounded once.
// CHECK-LABEL: func @unpermute_shared
// CHECK-SAME: %[[S:[a-z0-9]+]]: tensor<?x16xbf16>) -> tensor<?x16xbf16>
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: %[[ADDED:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<?x16xbf16>) outs(%[[SUM]] : tensor<?x16xf32>)
// CHECK: arith.extf
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} ins(%[[ADDED]] : tensor<?x16xf32>) outs(%{{.*}} : tensor<?x16xbf16>)
// CHECK: arith.truncf
func.func @unpermute_shared(%r: tensor<?x16xbf16>, %s: tensor<?x2xi64>, %w: tensor<?x2xf32>,
                            %shared: tensor<?x16xbf16>) -> tensor<?x16xbf16> {
  %y = moe.unpermute %r, %s weights %w shared %shared
      : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x16xbf16>) -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

// The row gradients: a loop over the T*k (token, slot) pairs that adds each
// weighted output-gradient row into its slot's row (ids outside [0, M)
// skipped), in f32, rounded once after the loop; the weight gradients: one
// generic reducing grad[t, :] . rows[slots[t, j], :] over H.
// CHECK-LABEL: func @unpermute_grad
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<?x16xbf16>, %[[R:[a-z0-9]+]]: tensor<?x16xbf16>, %[[S:[a-z0-9]+]]: tensor<?x2xi64>, %[[W:[a-z0-9]+]]: tensor<?x2xf32>
// CHECK-NOT: moe.
// CHECK: %[[PAIRS:.*]] = arith.muli %{{.*}}, %c2 : index
// CHECK: scf.for %[[P:[a-z0-9_]+]] = %{{.*}} to %[[PAIRS]] {{.*}} -> (tensor<?x16xf32>)
// CHECK: %[[T:.*]] = arith.divui %[[P]]
// CHECK: %[[J:.*]] = arith.remui %[[P]]
// CHECK: tensor.extract %[[S]][%[[T]], %[[J]]]
// CHECK: %[[ROW:.*]] = arith.index_cast
// CHECK: arith.cmpi slt, %[[ROW]]
// CHECK: scf.if
// CHECK: tensor.extract %[[W]][%[[T]], %[[J]]]
// CHECK: tensor.extract_slice %[[G]][%[[T]], 0] [1, 16]
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[%[[ROW]], 0] [1, 16]
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[S]], %[[G]] : tensor<?x2xi64>, tensor<?x16xbf16>) outs(%{{.*}} : tensor<?x2xf32>)
// CHECK: tensor.extract %[[R]]
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: return
func.func @unpermute_grad(%g: tensor<?x16xbf16>, %r: tensor<?x16xbf16>, %s: tensor<?x2xi64>, %w: tensor<?x2xf32>)
    -> (tensor<?x16xbf16>, tensor<?x2xf32>) {
  %dr, %dw = moe.unpermute_grad %g, %r, %s weights %w
      : (tensor<?x16xbf16>, tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> (tensor<?x16xbf16>, tensor<?x2xf32>)
  return %dr, %dw : tensor<?x16xbf16>, tensor<?x2xf32>
}

// -----

// One matmul per expert on its clamped row range against the untransposed
// weights: grad [count, N=32] x weights[e] [N=32, K=16] -> [count, K];
// rows outside every range stay zero; rounded once after the loop.
// CHECK-LABEL: func @grouped_dgrad
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<?x32xbf16>, %[[W:[a-z0-9]+]]: tensor<4x32x16xbf16>
// CHECK-NOT: moe.
// CHECK: %[[ZERO:.*]] = linalg.fill {{.*}} -> tensor<?x16xf32>
// CHECK: scf.for %[[E:[a-z0-9_]+]] = %{{.*}} to %c4 {{.*}} iter_args(%{{.*}} = %[[ZERO]]
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: %[[LHS:.*]] = tensor.extract_slice %[[G]][%[[START:[a-z0-9_]+]], 0] [%[[COUNT:[a-z0-9_]+]], 32]
// CHECK: %[[RHS:.*]] = tensor.extract_slice %[[W]][%[[E]], 0, 0] [1, 32, 16] [1, 1, 1] : tensor<4x32x16xbf16> to tensor<32x16xbf16>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[LHS]], %[[RHS]] : tensor<?x32xbf16>, tensor<32x16xbf16>) outs(%{{.*}} : tensor<?x16xf32>)
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[%[[START]], 0] [%[[COUNT]], 16]
// CHECK: arith.truncf {{.*}} : f32 to bf16
func.func @grouped_dgrad(%g: tensor<?x32xbf16>, %w: tensor<4x32x16xbf16>, %o: tensor<5xi32>) -> tensor<?x16xbf16> {
  %d = moe.grouped_dgrad %g, %w, %o
      : (tensor<?x32xbf16>, tensor<4x32x16xbf16>, tensor<5xi32>) -> tensor<?x16xbf16>
  return %d : tensor<?x16xbf16>
}

// -----

// Per expert, a generic reducing over its own rows: grad^T [32, count] x
// rows [count, 16] -> [32, 16], and the column sums of grad for the bias;
// each written into expert e's slice. The f32 bias gradient is returned as
// summed, the bf16 weight gradient rounded once.
// CHECK-LABEL: func @grouped_wgrad
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<?x32xbf16>, %[[R:[a-z0-9]+]]: tensor<?x16xbf16>
// CHECK-NOT: moe.
// CHECK: %[[SUMS:.*]]:3 = scf.for %[[E:[a-z0-9_]+]] = %{{.*}} to %c4 {{.*}} -> (tensor<4x32x16xf32>, tensor<4x32xf32>, index)
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: %[[GS:.*]] = tensor.extract_slice %[[G]][%[[START:[a-z0-9_]+]], 0] [%[[COUNT:[a-z0-9_]+]], 32]
// CHECK: %[[RS:.*]] = tensor.extract_slice %[[R]][%[[START]], 0] [%[[COUNT]], 16]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[GS]], %[[RS]] : tensor<?x32xbf16>, tensor<?x16xbf16>) outs(%{{.*}} : tensor<32x16xf32>)
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[%[[E]], 0, 0] [1, 32, 16]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[GS]] : tensor<?x32xbf16>) outs(%{{.*}} : tensor<32xf32>)
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[%[[E]], 0] [1, 32]
// CHECK: %[[DW:.*]] = linalg.generic {{.*}} ins(%[[SUMS]]#0 : tensor<4x32x16xf32>) outs(%{{.*}} : tensor<4x32x16xbf16>)
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: return %[[DW]], %[[SUMS]]#1
func.func @grouped_wgrad(%g: tensor<?x32xbf16>, %r: tensor<?x16xbf16>, %o: tensor<5xi64>)
    -> (tensor<4x32x16xbf16>, tensor<4x32xf32>) {
  %dw, %db = moe.grouped_wgrad %g, %r, %o
      : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<5xi64>) -> (tensor<4x32x16xbf16>, tensor<4x32xf32>)
  return %dw, %db : tensor<4x32x16xbf16>, tensor<4x32xf32>
}

// -----

// One elementwise generic over the gate and up halves with the limit and
// alpha given; the clamps pass no gradient where they clamp, bounds
// included in the pass-through (ole/oge); the halves written side by side.
// CHECK-LABEL: func @swiglu_grad_gptoss
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x32xbf16>, %[[G:[a-z0-9]+]]: tensor<?x16xbf16>
// CHECK-NOT: moe.
// CHECK: %[[GATE:.*]] = tensor.extract_slice %[[X]][0, 0] [%{{.*}}, 16]
// CHECK: %[[UP:.*]] = tensor.extract_slice %[[X]][0, 16] [%{{.*}}, 16]
// CHECK: %[[D:.*]]:2 = linalg.generic {{.*}} ins(%[[GATE]], %[[UP]], %[[G]] :
// CHECK: %[[GF:.*]] = arith.extf
// CHECK: %[[UF:.*]] = arith.extf
// CHECK: %[[LIM:.*]] = arith.constant 6.000000e+00 : f32
// CHECK: arith.minimumf %[[GF]], %[[LIM]]
// CHECK: arith.constant 1.500000e+00 : f32
// CHECK: math.exp
// CHECK: %[[GIN:.*]] = arith.cmpf ole, %[[GF]], %[[LIM]]
// CHECK: arith.cmpf ole, %[[UF]], %[[LIM]]
// CHECK: arith.cmpf oge, %[[UF]]
// CHECK: %[[UIN:.*]] = arith.andi
// CHECK: arith.select %[[GIN]]
// CHECK: arith.select %[[UIN]]
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: tensor.insert_slice %[[D]]#0 into %{{.*}}[0, 0] [%{{.*}}, 16]
// CHECK: tensor.insert_slice %[[D]]#1 into %{{.*}}[0, 16] [%{{.*}}, 16]
func.func @swiglu_grad_gptoss(%x: tensor<?x32xbf16>, %g: tensor<?x16xbf16>) -> tensor<?x32xbf16> {
  %d = moe.swiglu_grad gptoss %x, %g alpha 1.5 limit 6.0
      : (tensor<?x32xbf16>, tensor<?x16xbf16>) -> tensor<?x32xbf16>
  return %d : tensor<?x32xbf16>
}

// -----

// softmax_topk: the softmax over all E recomputed from the logits, the
// chosen probabilities gathered (ids outside [0, 8) read as 0), back
// through scale and renormalisation, scattered onto the E columns, then
// the softmax's adjoint over all E; rounded once to the logits' type.
// CHECK-LABEL: func @route_grad_softmax
// CHECK-SAME: %[[L:[a-z0-9]+]]: tensor<?x8xbf16>, %[[IDS:[a-z0-9]+]]: tensor<?x2xi32>, %[[DW:[a-z0-9]+]]: tensor<?x2xf32>
// CHECK-NOT: moe.
// CHECK: math.exp
// CHECK: %[[PROBS:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<?x8xf32>)
// CHECK: arith.divf
// CHECK: linalg.generic {{.*}} ins(%[[IDS]] : tensor<?x2xi32>) outs(%{{.*}} : tensor<?x2xf32>)
// CHECK: arith.cmpi slt, %{{.*}}, %c8_i32
// CHECK: tensor.extract %[[PROBS]]
// CHECK: linalg.generic {{.*}} ins(%[[DW]] : tensor<?x2xf32>)
// CHECK: arith.constant 2.500000e+00 : f32
// CHECK: arith.divf
// CHECK: %[[SC:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[IDS]], %{{.*}} : tensor<?x2xi32>, tensor<?x2xf32>) outs(%{{.*}} : tensor<?x8xf32>)
// CHECK: arith.cmpi eq
// CHECK: arith.select
// CHECK: linalg.generic {{.*}} ins(%[[SC]], %[[PROBS]], %{{.*}} : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?xf32>)
// CHECK: arith.subf
// CHECK: arith.mulf
// CHECK: arith.truncf {{.*}} : f32 to bf16
func.func @route_grad_softmax(%l: tensor<?x8xbf16>, %i: tensor<?x2xi32>, %g: tensor<?x2xf32>) -> tensor<?x8xbf16> {
  %d = moe.route_grad softmax_topk %l, %i, %g renormalize scale 2.5
      : (tensor<?x8xbf16>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x8xbf16>
  return %d : tensor<?x8xbf16>
}

// -----

// The shared expert's adjoint: the forward again (gate-up rounded to bf16,
// silu(gate) * up, the f32 down projection, the gate logit); dlogit =
// (grad . out) * sigma * (1 - sigma) and dout = grad * sigma; the down
// projection's data and weight gradients, silu's adjoint on the halves
// written side by side, the gate-up projection's data and weight
// gradients; dlogit * g[0] added to dx and dlogit^T . tokens for the gate;
// each gradient rounded once to bf16.
// CHECK-LABEL: func @shared_mlp_grad_gated
// CHECK-SAME: %[[DS:[a-z0-9]+]]: tensor<?x16xf32>, %[[X:[a-z0-9]+]]: tensor<?x16xbf16>, %[[W13:[a-z0-9]+]]: tensor<48x16xbf16>, %[[W2:[a-z0-9]+]]: tensor<16x24xbf16>, %[[G:[a-z0-9]+]]: tensor<1x16xbf16>
// CHECK-NOT: moe.
// CHECK: %[[GU:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]], %[[W13]] : tensor<?x16xbf16>, tensor<48x16xbf16>) outs(%{{.*}} : tensor<?x48xf32>)
// CHECK: %[[GU16:.*]] = linalg.generic {{.*}} ins(%[[GU]] : tensor<?x48xf32>) outs(%{{.*}} : tensor<?x48xbf16>)
// CHECK: %[[H:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<?x?xbf16>, tensor<?x?xbf16>) outs(%{{.*}} : tensor<?x?xbf16>)
// CHECK: %[[OUT:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[H]], %[[W2]] : tensor<?x?xbf16>, tensor<16x24xbf16>) outs(%{{.*}} : tensor<?x16xf32>)
// CHECK: %[[LOGIT:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[X]], %[[G]] : tensor<?x16xbf16>, tensor<1x16xbf16>) outs(%{{.*}} : tensor<?xf32>)
// CHECK: %[[PROD:.*]] = linalg.generic {{.*}} ins(%[[DS]], %[[OUT]] : tensor<?x16xf32>, tensor<?x16xf32>)
// CHECK: %[[DOT:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[PROD]] : tensor<?x16xf32>) outs(%{{.*}} : tensor<?xf32>)
// CHECK: %[[DL:.*]] = linalg.generic {{.*}} ins(%[[DOT]], %[[LOGIT]] : tensor<?xf32>, tensor<?xf32>)
// CHECK: math.exp
// CHECK: arith.subf
// CHECK: %[[DOUT:.*]] = linalg.generic {{.*}} ins(%[[LOGIT]] : tensor<?xf32>) outs(%[[DS]] : tensor<?x16xf32>)
// CHECK: %[[DH:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[DOUT]], %[[W2]] : tensor<?x16xf32>, tensor<16x24xbf16>) outs(%{{.*}} : tensor<?x24xf32>)
// CHECK: %[[DW2:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[DOUT]], %[[H]] : tensor<?x16xf32>, tensor<?x?xbf16>) outs(%{{.*}} : tensor<16x24xf32>)
// CHECK: %[[DHALVES:.*]]:2 = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %[[DH]] : tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x24xf32>)
// CHECK: %[[DGU0:.*]] = tensor.insert_slice %[[DHALVES]]#0 into %{{.*}}[0, 0] [%{{.*}}, 24]
// CHECK: %[[DGU:.*]] = tensor.insert_slice %[[DHALVES]]#1 into %[[DGU0]][0, 24] [%{{.*}}, 24]
// CHECK: %[[DX:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[DGU]], %[[W13]] : tensor<?x48xf32>, tensor<48x16xbf16>) outs(%{{.*}} : tensor<?x16xf32>)
// CHECK: %[[DW13:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[DGU]], %[[X]] : tensor<?x48xf32>, tensor<?x16xbf16>) outs(%{{.*}} : tensor<48x16xf32>)
// CHECK: %[[DXG:.*]] = linalg.generic {{.*}} ins(%[[DL]], %[[G]] : tensor<?xf32>, tensor<1x16xbf16>) outs(%[[DX]] : tensor<?x16xf32>)
// CHECK: %[[DG:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[DL]], %[[X]] : tensor<?xf32>, tensor<?x16xbf16>) outs(%{{.*}} : tensor<1x16xf32>)
// CHECK: %[[RX:.*]] = linalg.generic {{.*}} ins(%[[DXG]] : tensor<?x16xf32>) outs(%{{.*}} : tensor<?x16xbf16>)
// CHECK: %[[RW13:.*]] = linalg.generic {{.*}} ins(%[[DW13]] : tensor<48x16xf32>) outs(%{{.*}} : tensor<48x16xbf16>)
// CHECK: %[[RW2:.*]] = linalg.generic {{.*}} ins(%[[DW2]] : tensor<16x24xf32>) outs(%{{.*}} : tensor<16x24xbf16>)
// CHECK: %[[RG:.*]] = linalg.generic {{.*}} ins(%[[DG]] : tensor<1x16xf32>) outs(%{{.*}} : tensor<1x16xbf16>)
// CHECK: return %[[RX]], %[[RW13]], %[[RW2]], %[[RG]]
func.func @shared_mlp_grad_gated(%ds: tensor<?x16xf32>, %x: tensor<?x16xbf16>, %w13: tensor<48x16xbf16>,
                                 %w2: tensor<16x24xbf16>, %g: tensor<1x16xbf16>)
    -> (tensor<?x16xbf16>, tensor<48x16xbf16>, tensor<16x24xbf16>, tensor<1x16xbf16>) {
  %dx, %dw13, %dw2, %dg = moe.shared_mlp_grad silu %ds, %x, %w13, %w2 gate %g
      : (tensor<?x16xf32>, tensor<?x16xbf16>, tensor<48x16xbf16>, tensor<16x24xbf16>, tensor<1x16xbf16>)
      -> (tensor<?x16xbf16>, tensor<48x16xbf16>, tensor<16x24xbf16>, tensor<1x16xbf16>)
  return %dx, %dw13, %dw2, %dg : tensor<?x16xbf16>, tensor<48x16xbf16>, tensor<16x24xbf16>, tensor<1x16xbf16>
}
