func.func @mlp(%rows: tensor<?x512xbf16>, %off: tensor<9xi64>, %w13: tensor<8x512x512xbf16>, %w2: tensor<8x512x256xbf16>) -> tensor<?x512xbf16> {
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2 : (tensor<?x512xbf16>, tensor<9xi64>, tensor<8x512x512xbf16>, tensor<8x512x256xbf16>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
