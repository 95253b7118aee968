// The gradients of a layer with experts that get no rows (their weight gradients exactly zero).
// RUN: %python %testlib/backward_case.py gen empty-expert > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main empty-expert %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check empty-expert %t.out | FileCheck %s
// CHECK: PASS empty-expert
