// The gradients of a Mixtral layer (softmax over all E, top 2, renormalised).
// RUN: %python %testlib/backward_case.py gen mixtral > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main mixtral %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check mixtral %t.out | FileCheck %s
// CHECK: PASS mixtral
