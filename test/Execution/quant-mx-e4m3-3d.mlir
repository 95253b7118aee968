// Quantizes and dequantizes the mx-e4m3-3d inputs on the CPU; every code, scale and
// dequantized value must be bit-identical to test/lib/moe_ref.py.
// RUN: %python %testlib/quant_case.py gen mx-e4m3-3d > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/quant_case.py check mx-e4m3-3d %t.out | FileCheck %s
// CHECK: PASS mx-e4m3-3d
