// The gradients of a pad_to 4 layer with expert biases (padding rows must contribute nothing).
// RUN: %python %testlib/backward_case.py gen padded > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main padded %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check padded %t.out | FileCheck %s
// CHECK: PASS padded
