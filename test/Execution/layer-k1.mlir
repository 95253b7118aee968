// Runs a small MoE layer (k1) on the CPU and compares it with the numpy
// reference in test/lib/moe_ref.py at the tolerance layer_case.py states.
// RUN: %python %testlib/layer_case.py gen k1 > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check k1 %t.out | FileCheck %s
// CHECK: PASS k1
