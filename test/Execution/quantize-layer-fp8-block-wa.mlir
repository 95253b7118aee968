// A small f32 moe.layer (fused expert MLP) quantized with format=fp8-block
// scope=weights+activations: the prepack function quantizes the weights
// ([1, 128, 128] blocks), the layer's body dequantizes them and quantizes the
// MLP's rows and its intermediate ([1, 128] groups). Run on the CPU and
// compared with the numpy reference on dequantized values (layer_case.py,
// rel. L2 <= 1e-3); the error against the unquantized layer is printed.
// RUN: %python %testlib/layer_case.py gen quant-fp8-block-wa-layer > %t.mlir
// RUN: moe-opt %t.mlir --moe-quantize="format=fp8-block scope=weights+activations" > %t.q.mlir
// RUN: FileCheck %s --check-prefix=IR < %t.q.mlir
// RUN: moe-opt %t.q.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check quant-fp8-block-wa-layer %t.out | FileCheck %s
// IR-LABEL: func.func @layer(
// IR-SAME: tensor<4x256x128xf8E4M3FN>, %{{.*}}: tensor<4x2x1xf32>, %{{.*}}: tensor<4x128x128xf8E4M3FN>, %{{.*}}: tensor<4x1x1xf32>)
// IR: moe.layer
// IR: moe.quantize %rows to <f8E4M3FN, [1, 128], f32>
// IR: moe.expert_mlp silu {{.*}} intermediate <f8E4M3FN, [1, 128], f32>
// IR: func.func @layer_prepack(
// IR: func.func @main
// IR: call @layer_prepack
// CHECK: PASS quant-fp8-block-wa-layer
