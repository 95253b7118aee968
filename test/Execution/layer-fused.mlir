// Runs a small MoE layer (fused) on the CPU and compares it with the numpy
// reference in test/lib/moe_ref.py at the tolerance layer_case.py states.
// RUN: %python %testlib/layer_case.py gen fused > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check fused %t.out | FileCheck %s
// CHECK: PASS fused
