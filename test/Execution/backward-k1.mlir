// The gradients of a top-1 layer without renormalisation.
// RUN: %python %testlib/backward_case.py gen k1 > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main k1 %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check k1 %t.out | FileCheck %s
// CHECK: PASS k1
