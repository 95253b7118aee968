
func.func @qwen(%x: tensor<?x16xbf16>, %logits: tensor<?x8xbf16>,
    %w13: tensor<8x16x16xbf16>, %w2: tensor<8x16x8xbf16>,
    %s13: tensor<64x16xbf16>, %s2: tensor<16x32xbf16>, %g: tensor<1x16xbf16>) -> tensor<?x16xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 : (tensor<?x8xbf16>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x16xbf16>, tensor<?x2xi32>) -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2 : (tensor<?x16xbf16>, tensor<9xi64>, tensor<8x16x16xbf16>, tensor<8x16x8xbf16>) -> tensor<?x16xbf16>
  %s = moe.shared_mlp silu %x, %s13, %s2 gate %g : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>) -> tensor<?x16xbf16>
  %out = moe.unpermute %y, %slots weights %w shared %s : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x16xbf16>) -> tensor<?x16xbf16>
  return %out : tensor<?x16xbf16>
}
func.func @caller(%x: tensor<?x16xbf16>, %logits: tensor<?x8xbf16>,
    %w13: tensor<8x16x16xbf16>, %w2: tensor<8x16x8xbf16>,
    %s13: tensor<64x16xbf16>, %s2: tensor<16x32xbf16>, %g: tensor<1x16xbf16>) -> tensor<?x16xbf16> {
  %y = call @qwen(%x, %logits, %w13, %w2, %s13, %s2, %g) : (tensor<?x16xbf16>, tensor<?x8xbf16>, tensor<8x16x16xbf16>, tensor<8x16x8xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>) -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

