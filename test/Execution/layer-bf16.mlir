// Runs a small MoE layer (bf16) on the CPU and compares it with the numpy
// reference in test/lib/moe_ref.py at the tolerance layer_case.py states.
// RUN: %python %testlib/layer_case.py gen bf16 > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check bf16 %t.out | FileCheck %s
// CHECK: PASS bf16
