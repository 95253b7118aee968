// Quantizes and dequantizes the block-weights-128x128 inputs on the CPU; every code, scale and
// dequantized value must be bit-identical to test/lib/moe_ref.py.
// RUN: %python %testlib/quant_case.py gen block-weights-128x128 > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/quant_case.py check block-weights-128x128 %t.out | FileCheck %s
// CHECK: PASS block-weights-128x128
