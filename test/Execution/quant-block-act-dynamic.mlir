// Quantizes and dequantizes the block-act-dynamic inputs on the CPU; every code, scale and
// dequantized value must be bit-identical to test/lib/moe_ref.py.
// RUN: %python %testlib/quant_case.py gen block-act-dynamic > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/quant_case.py check block-act-dynamic %t.out | FileCheck %s
// CHECK: PASS block-act-dynamic
