// The gradients of the mixtral layer with recompute-gate-up=true.
// RUN: %python %testlib/backward_case.py gen recompute > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward=recompute-gate-up=true -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main recompute %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check recompute %t.out | FileCheck %s
// CHECK: PASS recompute
