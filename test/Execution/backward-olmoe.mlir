// The gradients of an OLMoE layer (softmax, top 3, no renormalisation: every logit has a gradient).
// RUN: %python %testlib/backward_case.py gen olmoe > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main olmoe %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check olmoe %t.out | FileCheck %s
// CHECK: PASS olmoe
