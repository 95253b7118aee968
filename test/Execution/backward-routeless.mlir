// The gradients of a layer without moe.route (ids, with a repeat and drops, and weights given).
// RUN: %python %testlib/backward_case.py gen routeless > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main routeless %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check routeless %t.out | FileCheck %s
// CHECK: PASS routeless
