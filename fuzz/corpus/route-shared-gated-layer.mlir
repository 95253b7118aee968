


func.func @qwen(%x: tensor<?x256xbf16>, %logits: tensor<?x8xbf16>,
    %w13: tensor<8x256x256xbf16>, %w2: tensor<8x256x128xbf16>,
    %s13: tensor<640x256xbf16>, %s2: tensor<256x320xbf16>, %g: tensor<1x256xbf16>) -> tensor<?x256xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2
      : (tensor<?x8xbf16>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x256x256xbf16>, tensor<8x256x128xbf16>) -> tensor<?x256xbf16>
  %s = moe.shared_mlp silu %x, %s13, %s2 gate %g
      : (tensor<?x256xbf16>, tensor<640x256xbf16>, tensor<256x320xbf16>, tensor<1x256xbf16>) -> tensor<?x256xbf16>
  %out = moe.unpermute %y, %slots weights %w shared %s
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  return %out : tensor<?x256xbf16>
}
