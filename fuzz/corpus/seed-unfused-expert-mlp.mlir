func.func @mlp(%rows: tensor<?x512xbf16>, %off: tensor<9xi32>, %w13: tensor<8x512x512xbf16>, %w2: tensor<8x512x256xbf16>, %s: tensor<?xf32>) -> tensor<?x512xbf16> {
  %gu = moe.grouped_matmul %rows, %w13, %off : (tensor<?x512xbf16>, tensor<8x512x512xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  %hh = moe.swiglu silu %gu : (tensor<?x512xbf16>) -> tensor<?x256xbf16>
  %y = moe.grouped_matmul %hh, %w2, %off scale %s : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>, tensor<?xf32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
