// Until the sm_90a kernels handle block-scaled FP8 (docs/quantization-design.md),
// the GPU pipeline refuses a quantized layer rather than compiling part of it:
// the dequantize/quantize pairs have no kernels, and a fused MLP's FP8
// intermediate is not computed by the bf16 kernels.
// RUN: not moe-opt %s --moe-quantize --moe-gpu-pipeline 2>&1 | FileCheck %s --check-prefix=WEIGHTS
// RUN: not moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline 2>&1 | FileCheck %s --check-prefix=ACTS

// WEIGHTS: error: 'moe.dequantize' op has no GPU kernel yet
// ACTS-DAG: error: 'moe.expert_mlp' op has an FP8 'intermediate' that its GPU kernels do not compute
// ACTS-DAG: error: 'moe.quantize' op has no GPU kernel yet
func.func @mlp(%rows: tensor<?x128xbf16>, %offsets: tensor<5xi64>,
               %w13: tensor<4x256x128xbf16>, %w2: tensor<4x128x128xbf16>) -> tensor<?x128xbf16> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x128xbf16>, tensor<4x256x128xbf16>, tensor<5xi64>) -> tensor<?x256xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x256xbf16>) -> tensor<?x128xbf16>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x128xbf16>, tensor<4x128x128xbf16>, tensor<5xi64>) -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}
