// Runs a small MoE layer (gptoss) on the CPU and compares it with the numpy
// reference in test/lib/moe_ref.py at the tolerance layer_case.py states.
// RUN: %python %testlib/layer_case.py gen gptoss > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check gptoss %t.out | FileCheck %s
// CHECK: PASS gptoss
