// The gradients of a layer with the fused moe.expert_mlp.
// RUN: %python %testlib/backward_case.py gen fused > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main fused %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check fused %t.out | FileCheck %s
// CHECK: PASS fused
