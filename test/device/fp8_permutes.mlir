// A block-FP8 layer with k = 20 of E = 32 experts (H = 256): its quantizing
// scatter (at every T: fp8-scatter-min-tokens=1) reads each slot where it
// stores it
// (4 tokens * 20 slots are too many to read up front), the form no model
// layer has. scripts/build-gpu-artifacts.sh compiles it into
// fp8permute-scatter.moebundle and, as the reference (bf16 gather, then the
// quantize kernel), fp8permute-separate.moebundle; test/device/fp8_layer.py
// compares their k20_permute entries bit for bit.
func.func @k20(%x: tensor<?x256xbf16>, %logits: tensor<?x32xf32>,
               %w13: tensor<32x256x256xbf16>, %w2: tensor<32x256x128xbf16>) -> tensor<?x256xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 20 renormalize
      : (tensor<?x32xf32>) -> (tensor<?x20xi32>, tensor<?x20xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x20xi32>) -> (tensor<?x256xbf16>, tensor<33xi64>, tensor<?x20xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x256xbf16>, tensor<32x256x256xbf16>, tensor<33xi64>) -> tensor<?x256xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x256xbf16>) -> tensor<?x128xbf16>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x128xbf16>, tensor<32x256x128xbf16>, tensor<33xi64>) -> tensor<?x256xbf16>
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x256xbf16>, tensor<?x20xi64>, tensor<?x20xf32>) -> tensor<?x256xbf16>
  return %out : tensor<?x256xbf16>
}
