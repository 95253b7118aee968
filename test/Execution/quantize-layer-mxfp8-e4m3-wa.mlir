// A small f32 layer (unfused chain) quantized with format=mxfp8
// scope=weights+activations, then fused: --moe-fuse-experts absorbs the
// swiglu's quantize/dequantize pair into expert_mlp's intermediate, which
// the CPU pipeline expands back. Compared with the numpy reference on
// dequantized values (rel. L2 <= 1e-3); the error against the unquantized
// layer is printed.
// RUN: %python %testlib/layer_case.py gen quant-mxfp8-e4m3-wa > %t.mlir
// RUN: moe-opt %t.mlir --moe-quantize="format=mxfp8 scope=weights+activations" --moe-fuse-experts > %t.q.mlir
// RUN: FileCheck %s --check-prefix=IR < %t.q.mlir
// RUN: moe-opt %t.q.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check quant-mxfp8-e4m3-wa %t.out | FileCheck %s
// IR-LABEL: func.func @layer(
// IR-NOT: moe.grouped_matmul
// IR: moe.expert_mlp silu {{.*}} intermediate <f8E4M3FN, [1, 32], f8E8M0FNU>
// IR-LABEL: func.func @layer_prepack(
// IR-SAME: -> (tensor<4x64x64xf8E4M3FN>, tensor<4x64x2xf8E8M0FNU>, tensor<4x64x32xf8E4M3FN>, tensor<4x64x1xf8E8M0FNU>)
// CHECK: PASS quant-mxfp8-e4m3-wa
