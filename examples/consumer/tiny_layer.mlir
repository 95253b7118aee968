// A tiny Mixtral-style layer in bf16 (H = I = 128, E = 4 experts, top-2),
// for any token count: what --moe-gpu-pipeline compiles to one runtime entry
// (the f32 examples/mixtral_tiny.mlir is for the CPU reference pipeline).
func.func @tiny_layer(%x: tensor<?x128xbf16>, %logits: tensor<?x4xf32>,
    %w13: tensor<4x256x128xbf16>, %w2: tensor<4x128x128xbf16>) -> tensor<?x128xbf16> {
  %ids, %weights = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x128xbf16>, tensor<?x2xi32>) -> (tensor<?x128xbf16>, tensor<5xi64>, tensor<?x2xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x128xbf16>, tensor<5xi64>, tensor<4x256x128xbf16>, tensor<4x128x128xbf16>) -> tensor<?x128xbf16>
  %out = moe.unpermute %y, %slots weights %weights
      : (tensor<?x128xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x128xbf16>
  return %out : tensor<?x128xbf16>
}
