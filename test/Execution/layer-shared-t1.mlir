// Runs a small MoE layer (shared-t1) on the CPU and compares it with the numpy
// reference in test/lib/moe_ref.py at the tolerance layer_case.py states: one
// token (T = 1; most experts empty) through a gated shared expert whose width
// (24) differs from the routed experts' (8).
// RUN: %python %testlib/layer_case.py gen shared-t1 > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check shared-t1 %t.out | FileCheck %s
// CHECK: PASS shared-t1
