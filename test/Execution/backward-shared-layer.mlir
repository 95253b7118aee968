// The gradients of a layer with a gated shared expert written as one moe.layer.
// RUN: %python %testlib/backward_case.py gen shared-layer > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main shared-layer %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check shared-layer %t.out | FileCheck %s
// CHECK: PASS shared-layer
