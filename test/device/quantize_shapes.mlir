// The moe.quantize ops of test/device/quantize.py (scripts/build-gpu-artifacts.sh
// compiles them into quantize.moebundle): every encoding the sm_90a kernel
// implements, MXFP8 ([1, 32] E8M0, e4m3 and e5m2), activation groups
// ([1, B] f32, B = 8..256) and weight blocks ([128, 128] f32, 2-D and per
// expert), from bf16 and f32, with static and dynamic sizes. One op per
// function: the entry is named after it.
func.func @mx_e4m3_bf16(%x: tensor<?x4096xbf16>) -> (tensor<?x4096xf8E4M3FN>, tensor<?x128xf8E8M0FNU>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x128xf8E8M0FNU>
  return %q, %s : tensor<?x4096xf8E4M3FN>, tensor<?x128xf8E8M0FNU>
}
func.func @mx_e5m2_bf16(%x: tensor<?x4096xbf16>) -> (tensor<?x4096xf8E5M2>, tensor<?x128xf8E8M0FNU>) {
  %q, %s = moe.quantize %x to <f8E5M2, [1, 32], f8E8M0FNU> : tensor<?x4096xbf16> -> tensor<?x4096xf8E5M2>, tensor<?x128xf8E8M0FNU>
  return %q, %s : tensor<?x4096xf8E5M2>, tensor<?x128xf8E8M0FNU>
}
func.func @mx_e4m3_f32(%x: tensor<?x256xf32>) -> (tensor<?x256xf8E4M3FN>, tensor<?x8xf8E8M0FNU>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x256xf32> -> tensor<?x256xf8E4M3FN>, tensor<?x8xf8E8M0FNU>
  return %q, %s : tensor<?x256xf8E4M3FN>, tensor<?x8xf8E8M0FNU>
}
func.func @mx_e5m2_f32(%x: tensor<?x256xf32>) -> (tensor<?x256xf8E5M2>, tensor<?x8xf8E8M0FNU>) {
  %q, %s = moe.quantize %x to <f8E5M2, [1, 32], f8E8M0FNU> : tensor<?x256xf32> -> tensor<?x256xf8E5M2>, tensor<?x8xf8E8M0FNU>
  return %q, %s : tensor<?x256xf8E5M2>, tensor<?x8xf8E8M0FNU>
}
func.func @mx_experts_bf16(%x: tensor<?x64x256xbf16>) -> (tensor<?x64x256xf8E4M3FN>, tensor<?x64x8xf8E8M0FNU>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x64x256xbf16> -> tensor<?x64x256xf8E4M3FN>, tensor<?x64x8xf8E8M0FNU>
  return %q, %s : tensor<?x64x256xf8E4M3FN>, tensor<?x64x8xf8E8M0FNU>
}
func.func @act_e4m3_bf16(%x: tensor<?x7168xbf16>) -> (tensor<?x7168xf8E4M3FN>, tensor<?x56xf32>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 128], f32> : tensor<?x7168xbf16> -> tensor<?x7168xf8E4M3FN>, tensor<?x56xf32>
  return %q, %s : tensor<?x7168xf8E4M3FN>, tensor<?x56xf32>
}
func.func @act_e4m3_f32(%x: tensor<?x512xf32>) -> (tensor<?x512xf8E4M3FN>, tensor<?x4xf32>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 128], f32> : tensor<?x512xf32> -> tensor<?x512xf8E4M3FN>, tensor<?x4xf32>
  return %q, %s : tensor<?x512xf8E4M3FN>, tensor<?x4xf32>
}
func.func @act_e5m2_bf16(%x: tensor<?x512xbf16>) -> (tensor<?x512xf8E5M2>, tensor<?x4xf32>) {
  %q, %s = moe.quantize %x to <f8E5M2, [1, 128], f32> : tensor<?x512xbf16> -> tensor<?x512xf8E5M2>, tensor<?x4xf32>
  return %q, %s : tensor<?x512xf8E5M2>, tensor<?x4xf32>
}
func.func @group8_bf16(%x: tensor<?x256xbf16>) -> (tensor<?x256xf8E4M3FN>, tensor<?x32xf32>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 8], f32> : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x32xf32>
  return %q, %s : tensor<?x256xf8E4M3FN>, tensor<?x32xf32>
}
func.func @group16_f32(%x: tensor<?x256xf32>) -> (tensor<?x256xf8E5M2>, tensor<?x16xf32>) {
  %q, %s = moe.quantize %x to <f8E5M2, [1, 16], f32> : tensor<?x256xf32> -> tensor<?x256xf8E5M2>, tensor<?x16xf32>
  return %q, %s : tensor<?x256xf8E5M2>, tensor<?x16xf32>
}
func.func @group64_bf16(%x: tensor<?x256xbf16>) -> (tensor<?x256xf8E4M3FN>, tensor<?x4xf32>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 64], f32> : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x4xf32>
  return %q, %s : tensor<?x256xf8E4M3FN>, tensor<?x4xf32>
}
func.func @group256_bf16(%x: tensor<?x512xbf16>) -> (tensor<?x512xf8E4M3FN>, tensor<?x2xf32>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 256], f32> : tensor<?x512xbf16> -> tensor<?x512xf8E4M3FN>, tensor<?x2xf32>
  return %q, %s : tensor<?x512xf8E4M3FN>, tensor<?x2xf32>
}
func.func @w_e4m3_bf16(%x: tensor<8x256x512xbf16>) -> (tensor<8x256x512xf8E4M3FN>, tensor<8x2x4xf32>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [128, 128], f32> : tensor<8x256x512xbf16> -> tensor<8x256x512xf8E4M3FN>, tensor<8x2x4xf32>
  return %q, %s : tensor<8x256x512xf8E4M3FN>, tensor<8x2x4xf32>
}
func.func @w_experts_bf16(%x: tensor<?x256x512xbf16>) -> (tensor<?x256x512xf8E4M3FN>, tensor<?x2x4xf32>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 128, 128], f32> : tensor<?x256x512xbf16> -> tensor<?x256x512xf8E4M3FN>, tensor<?x2x4xf32>
  return %q, %s : tensor<?x256x512xf8E4M3FN>, tensor<?x2x4xf32>
}
func.func @w_e5m2_f32(%x: tensor<4x256x256xf32>) -> (tensor<4x256x256xf8E5M2>, tensor<4x2x2xf32>) {
  %q, %s = moe.quantize %x to <f8E5M2, [128, 128], f32> : tensor<4x256x256xf32> -> tensor<4x256x256xf8E5M2>, tensor<4x2x2xf32>
  return %q, %s : tensor<4x256x256xf8E5M2>, tensor<4x2x2xf32>
}
func.func @w2d_e4m3_bf16(%x: tensor<512x384xbf16>) -> (tensor<512x384xf8E4M3FN>, tensor<4x3xf32>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [128, 128], f32> : tensor<512x384xbf16> -> tensor<512x384xf8E4M3FN>, tensor<4x3xf32>
  return %q, %s : tensor<512x384xf8E4M3FN>, tensor<4x3xf32>
}
// moe.fake_quantize (planned.v1): the quantize kernel's round trip, of some
// of the encodings above; quantize.py checks `fq_<name>` against the
// dequantized reference of `<name>`.
func.func @fq_mx_e4m3_bf16(%x: tensor<?x4096xbf16>) -> tensor<?x4096xbf16> {
  %y = moe.fake_quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x4096xbf16>
  return %y : tensor<?x4096xbf16>
}
func.func @fq_mx_e5m2_f32(%x: tensor<?x256xf32>) -> tensor<?x256xf32> {
  %y = moe.fake_quantize %x to <f8E5M2, [1, 32], f8E8M0FNU> : tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}
func.func @fq_act_e4m3_bf16(%x: tensor<?x7168xbf16>) -> tensor<?x7168xbf16> {
  %y = moe.fake_quantize %x to <f8E4M3FN, [1, 128], f32> : tensor<?x7168xbf16>
  return %y : tensor<?x7168xbf16>
}
func.func @fq_group8_bf16(%x: tensor<?x256xbf16>) -> tensor<?x256xbf16> {
  %y = moe.fake_quantize %x to <f8E4M3FN, [1, 8], f32> : tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
func.func @fq_w_e4m3_bf16(%x: tensor<8x256x512xbf16>) -> tensor<8x256x512xbf16> {
  %y = moe.fake_quantize %x to <f8E4M3FN, [128, 128], f32> : tensor<8x256x512xbf16>
  return %y : tensor<8x256x512xbf16>
}
func.func @fq_w_e5m2_f32(%x: tensor<4x256x256xf32>) -> tensor<4x256x256xf32> {
  %y = moe.fake_quantize %x to <f8E5M2, [128, 128], f32> : tensor<4x256x256xf32>
  return %y : tensor<4x256x256xf32>
}
