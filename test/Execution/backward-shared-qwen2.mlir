// The gradients of a Qwen2-MoE layer with its gated shared expert of width 4I:
// dsw13, dsw2, dsgate, and dx's shared part.
// RUN: %python %testlib/backward_case.py gen shared-qwen2 > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main shared-qwen2 %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check shared-qwen2 %t.out | FileCheck %s
// CHECK: PASS shared-qwen2
