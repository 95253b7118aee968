// A bf16 grouped GEMM that scripts/build-gpu-artifacts.sh compiles with
// --moe-quantize="scope=weights+activations" --moe-gpu-pipeline into
// fp8chain.moebundle: `gate_up_prepack` quantizes the weights once
// (quantize.v1, [128, 128] blocks), `gate_up` the rows per call ([1, 128]
// groups), `gate_up_0` is the block-FP8 GEMM reading both
// (grouped_matmul_fp8.v1). test/device/fp8_grouped_matmul.py runs the chain.
func.func @gate_up(%rows: tensor<?x1024xbf16>, %w: tensor<8x512x1024xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x1024xbf16>, tensor<8x512x1024xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// A GPT-OSS-style expert MLP with biases (clamped SwiGLU, bf16 gate-up
// bias, f32 down bias) at H = 1024, I = 512: --moe-quantize makes its rows
// and activation block FP8: `mlp_0_gate_up` (bf16), `mlp_0_intermediate`,
// `mlp_0_down`; in fp8chain-epilogue.moebundle (fp8-epilogue-quantize=1) the
// gate-up quantizes its biased, clamped activation in its epilogue.
func.func @mlp(%rows: tensor<?x1024xbf16>, %off: tensor<9xi32>, %w13: tensor<8x1024x1024xbf16>,
               %w2: tensor<8x1024x512xbf16>, %b13: tensor<8x1024xbf16>, %b2: tensor<8x1024xf32>) -> tensor<?x1024xbf16> {
  %y = moe.expert_mlp gptoss %rows, %off, %w13, %w2 gate_up_bias %b13 down_bias %b2 alpha 1.702 limit 7.0
      : (tensor<?x1024xbf16>, tensor<9xi32>, tensor<8x1024x1024xbf16>, tensor<8x1024x512xbf16>, tensor<8x1024xbf16>, tensor<8x1024xf32>) -> tensor<?x1024xbf16>
  return %y : tensor<?x1024xbf16>
}
