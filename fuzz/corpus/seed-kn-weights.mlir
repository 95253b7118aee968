// moe.grouped_matmul over weights [E, K, N] (kn_weights), with and without a bias.
func.func @kn_e8_k256_n512(%x: tensor<?x256xbf16>, %w: tensor<8x256x512xbf16>, %off: tensor<9xi32>, %b: tensor<8x512xf32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %x, %w, %off bias %b kn_weights
      : (tensor<?x256xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>, tensor<8x512xf32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
func.func @kn_e16_k200_n192_i64(%x: tensor<?x200xbf16>, %w: tensor<16x200x192xbf16>, %off: tensor<17xi64>, %b: tensor<16x192xf32>) -> tensor<?x192xbf16> {
  %y = moe.grouped_matmul %x, %w, %off bias %b kn_weights
      : (tensor<?x200xbf16>, tensor<16x200x192xbf16>, tensor<17xi64>, tensor<16x192xf32>) -> tensor<?x192xbf16>
  return %y : tensor<?x192xbf16>
}
func.func @kn_e4_k512_n256_plain(%x: tensor<?x512xbf16>, %w: tensor<4x512x256xbf16>, %off: tensor<5xi32>) -> tensor<?x256xbf16> {
  %y = moe.grouped_matmul %x, %w, %off kn_weights
      : (tensor<?x512xbf16>, tensor<4x512x256xbf16>, tensor<5xi32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
func.func @gptoss_gate_up_e32_k2880_n5760(%x: tensor<?x2880xbf16>, %w: tensor<32x2880x5760xbf16>, %off: tensor<33xi32>, %b: tensor<32x5760xbf16>) -> tensor<?x5760xbf16> {
  %y = moe.grouped_matmul %x, %w, %off bias %b kn_weights
      : (tensor<?x2880xbf16>, tensor<32x2880x5760xbf16>, tensor<33xi32>, tensor<32x5760xbf16>) -> tensor<?x5760xbf16>
  return %y : tensor<?x5760xbf16>
}
func.func @gptoss_down_e32_k2880_n2880(%x: tensor<?x2880xbf16>, %w: tensor<32x2880x2880xbf16>, %off: tensor<33xi32>, %b: tensor<32x2880xf32>) -> tensor<?x2880xbf16> {
  %y = moe.grouped_matmul %x, %w, %off bias %b kn_weights
      : (tensor<?x2880xbf16>, tensor<32x2880x2880xbf16>, tensor<33xi32>, tensor<32x2880xf32>) -> tensor<?x2880xbf16>
  return %y : tensor<?x2880xbf16>
}
