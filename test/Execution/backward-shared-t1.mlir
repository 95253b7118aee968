// The gradients of a one-token layer with a gated shared expert.
// RUN: %python %testlib/backward_case.py gen shared-t1 > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main shared-t1 %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check shared-t1 %t.out | FileCheck %s
// CHECK: PASS shared-t1
