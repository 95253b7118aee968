// The sm_90a kernels run block-FP8 grouped matmuls (test/Pipelines/
// gpu-pipeline-fp8.mlir) but not yet a quantized fused expert MLP
// (docs/quantization-design.md): the GPU pipeline fuses the quantized chain
// and refuses it with a diagnostic rather than compiling part of it.
// RUN: not moe-opt %s --moe-quantize --moe-gpu-pipeline 2>&1 | FileCheck %s --check-prefix=WEIGHTS
// RUN: not moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline 2>&1 | FileCheck %s --check-prefix=ACTS

// WEIGHTS: error: 'moe.expert_mlp' op cannot be lowered to sm_90a yet: quantized (moe.dequantize) operands of a fused expert MLP are not implemented yet
// ACTS: error: 'moe.expert_mlp' op cannot be lowered to sm_90a yet: quantized (moe.dequantize) operands of a fused expert MLP are not implemented yet
func.func @mlp(%rows: tensor<?x128xbf16>, %offsets: tensor<5xi64>,
               %w13: tensor<4x256x128xbf16>, %w2: tensor<4x128x128xbf16>) -> tensor<?x128xbf16> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x128xbf16>, tensor<4x256x128xbf16>, tensor<5xi64>) -> tensor<?x256xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x256xbf16>) -> tensor<?x128xbf16>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x128xbf16>, tensor<4x128x128xbf16>, tensor<5xi64>) -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}
