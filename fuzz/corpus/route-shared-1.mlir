
func.func @deepseek(%x: tensor<?x8xbf16>, %logits: tensor<?x4xf32>, %bias: tensor<4xf32>,
    %w13: tensor<4x16x8xbf16>, %w2: tensor<4x8x8xbf16>,
    %s13: tensor<12x8xbf16>, %s2: tensor<8x6xbf16>) -> (tensor<?x8xbf16>, tensor<?x2xf32>) {
  %ids, %w = moe.route sigmoid_topk %logits bias %bias top 2 renormalize scale 2.5 : (tensor<?x4xf32>, tensor<4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x8xbf16>, tensor<?x2xi32>) -> (tensor<?x8xbf16>, tensor<5xi64>, tensor<?x2xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2 : (tensor<?x8xbf16>, tensor<5xi64>, tensor<4x16x8xbf16>, tensor<4x8x8xbf16>) -> tensor<?x8xbf16>
  %s = moe.shared_mlp silu %x, %s13, %s2 : (tensor<?x8xbf16>, tensor<12x8xbf16>, tensor<8x6xbf16>) -> tensor<?x8xbf16>
  %out = moe.unpermute %y, %slots weights %w shared %s : (tensor<?x8xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return %out, %w : tensor<?x8xbf16>, tensor<?x2xf32>
}
