// The gradients of a layer written as one moe.layer.
// RUN: %python %testlib/backward_case.py gen layer > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main layer %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check layer %t.out | FileCheck %s
// CHECK: PASS layer
