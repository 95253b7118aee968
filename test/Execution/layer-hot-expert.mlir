// Runs a small MoE layer (hot-expert) on the CPU and compares it with the numpy
// reference in test/lib/moe_ref.py at the tolerance layer_case.py states.
// RUN: %python %testlib/layer_case.py gen hot-expert > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check hot-expert %t.out | FileCheck %s
// CHECK: PASS hot-expert
