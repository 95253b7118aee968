// MXFP8 computed as GEMMs in the operands' type on the exact dequantized
// values (--moe-quantize gemm=dequantized): the prepack function makes each
// weight's round trip (moe.fake_quantize, one result per weight), the rows
// of each GEMM make theirs, the expert MLP's intermediate is set as for FP8
// GEMMs. On the CPU it must print exactly the values the same layer with
// FP8 GEMMs (gemm=fp8: FP8 values and scales, dequantized in the function)
// prints, in bf16 and in f32, and the f32 layer must match the numpy
// reference on dequantized values.
// RUN: %python %testlib/layer_case.py gen bf16-mx > %t.mlir
// RUN: moe-opt %t.mlir --moe-quantize="format=mxfp8 scope=weights+activations gemm=dequantized" --moe-fuse-experts > %t.d.mlir
// RUN: FileCheck %s --check-prefix=IR < %t.d.mlir
// RUN: moe-opt %t.d.mlir --moe-cpu-reference-pipeline | %mlir-runner | grep -v "base@" > %t.d.values
// RUN: moe-opt %t.mlir --moe-quantize="format=mxfp8 scope=weights+activations" --moe-fuse-experts --moe-cpu-reference-pipeline | %mlir-runner | grep -v "base@" > %t.f.values
// RUN: diff %t.f.values %t.d.values
// RUN: %python %testlib/layer_case.py gen quant-mxfp8-e4m3-wa > %t.32.mlir
// RUN: moe-opt %t.32.mlir --moe-quantize="format=mxfp8 scope=weights+activations gemm=dequantized" --moe-fuse-experts --moe-cpu-reference-pipeline | %mlir-runner > %t.32.d.out
// RUN: %python %testlib/layer_case.py check quant-mxfp8-e4m3-wa %t.32.d.out | FileCheck %s
// RUN: moe-opt %t.32.mlir --moe-quantize="format=mxfp8 scope=weights+activations" --moe-fuse-experts --moe-cpu-reference-pipeline | %mlir-runner | grep -v "base@" > %t.32.f.values
// RUN: grep -v "base@" %t.32.d.out | diff %t.32.f.values -
// IR-LABEL: func.func @layer(
// IR-SAME: %{{.*}}: tensor<4x128x64xbf16>, %{{.*}}: tensor<4x64x64xbf16>)
// IR-NOT: moe.dequantize
// IR: %[[ROWS:.*]] = moe.fake_quantize %rows to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x64xbf16>
// IR-NEXT: moe.expert_mlp silu %[[ROWS]], {{.*}} intermediate <f8E4M3FN, [1, 32], f8E8M0FNU>
// IR-LABEL: func.func @layer_prepack(
// IR-SAME: -> (tensor<4x128x64xbf16>, tensor<4x64x64xbf16>)
// IR: moe.fake_quantize %{{.*}} to <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : tensor<4x128x64xbf16>
// IR: moe.fake_quantize %{{.*}} to <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : tensor<4x64x64xbf16>
// IR: func.func @main
// IR: %[[W:.*]]:2 = call @layer_prepack
// IR: call @layer(%{{.*}}, %{{.*}}, %[[W]]#0, %[[W]]#1)
// CHECK: PASS quant-mxfp8-e4m3-wa
