// A small f32 GPT-OSS layer (clamped activation, expert biases) with its
// weights quantized by the default policy (format=fp8-block scope=weights);
// the biases stay f32. Compared with the numpy reference on dequantized
// values (rel. L2 <= 1e-3); the error against the unquantized layer is
// printed.
// RUN: %python %testlib/layer_case.py gen quant-fp8-block-w-gptoss > %t.mlir
// RUN: moe-opt %t.mlir --moe-quantize --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check quant-fp8-block-w-gptoss %t.out | FileCheck %s
// CHECK: PASS quant-fp8-block-w-gptoss
