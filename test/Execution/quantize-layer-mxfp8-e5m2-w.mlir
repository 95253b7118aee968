// A small f32 layer (unfused chain) with its weights quantized to MX e5m2
// ([1, 1, 32] blocks, E8M0 scales), activations left in f32. Compared with
// the numpy reference on dequantized values (rel. L2 <= 1e-3); the error
// against the unquantized layer is printed.
// RUN: %python %testlib/layer_case.py gen quant-mxfp8-e5m2-w > %t.mlir
// RUN: moe-opt %t.mlir --moe-quantize="format=mxfp8 element=e5m2" --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check quant-mxfp8-e5m2-w %t.out | FileCheck %s
// CHECK: PASS quant-mxfp8-e5m2-w
