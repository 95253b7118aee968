// The gradients of a top-1 layer whose tokens all go to one expert.
// RUN: %python %testlib/backward_case.py gen hot-expert > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main hot-expert %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check hot-expert %t.out | FileCheck %s
// CHECK: PASS hot-expert
