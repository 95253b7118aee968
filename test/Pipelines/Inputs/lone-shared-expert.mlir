// A shared expert outside any layer (test/Pipelines/diagnostics.mlir).
func.func @shared(%x: tensor<?x256xbf16>, %s13: tensor<512x256xbf16>, %s2: tensor<256x256xbf16>) -> tensor<?x256xbf16> {
  %s = moe.shared_mlp silu %x, %s13, %s2 : (tensor<?x256xbf16>, tensor<512x256xbf16>, tensor<256x256xbf16>) -> tensor<?x256xbf16>
  return %s : tensor<?x256xbf16>
}
