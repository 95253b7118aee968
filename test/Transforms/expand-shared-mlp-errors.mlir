// --moe-expand-shared-mlp refuses a gated shared expert (Qwen2-MoE), forward
// or adjoint, with the reason.
// RUN: moe-opt %s --split-input-file --moe-expand-shared-mlp --verify-diagnostics

func.func @gated(%x: tensor<?x16xbf16>, %sw13: tensor<64x16xbf16>,
                 %sw2: tensor<16x32xbf16>, %g: tensor<1x16xbf16>) -> tensor<?x16xbf16> {
  // expected-error @+1 {{--moe-expand-shared-mlp: a gated shared expert (Qwen2-MoE) is not expanded yet}}
  %s = moe.shared_mlp silu %x, %sw13, %sw2 gate %g
      : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>) -> tensor<?x16xbf16>
  return %s : tensor<?x16xbf16>
}

// -----

func.func @gated_grad(%dy: tensor<?x16xbf16>, %x: tensor<?x16xbf16>, %sw13: tensor<64x16xbf16>,
                      %sw2: tensor<16x32xbf16>, %g: tensor<1x16xbf16>)
    -> (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>) {
  // expected-error @+1 {{gated shared expert (Qwen2-MoE) is not expanded yet (its gate's sigmoid and gradient have no grouped op)}}
  %dx, %dw13, %dw2, %dg = moe.shared_mlp_grad silu %dy, %x, %sw13, %sw2 gate %g
      : (tensor<?x16xbf16>, tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>)
      -> (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>)
  return %dx, %dw13, %dw2, %dg : tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>
}
