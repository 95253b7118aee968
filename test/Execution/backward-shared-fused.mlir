// The gradients of a layer with the fused moe.expert_mlp and a gated shared
// expert (Is = 20, no multiple of I = 12).
// RUN: %python %testlib/backward_case.py gen shared-fused > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main shared-fused %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check shared-fused %t.out | FileCheck %s
// CHECK: PASS shared-fused
