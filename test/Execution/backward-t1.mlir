// The gradients of a layer of a single token.
// RUN: %python %testlib/backward_case.py gen t1 > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main t1 %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check t1 %t.out | FileCheck %s
// CHECK: PASS t1
