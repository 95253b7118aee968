// The gradients of a DeepSeek-V3 layer with its ungated shared expert (sigmoid,
// correction bias, groups, renormalised, scale 2.5): dsw13, dsw2, and dx's shared part.
// RUN: %python %testlib/backward_case.py gen shared-deepseek > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main shared-deepseek %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check shared-deepseek %t.out | FileCheck %s
// CHECK: PASS shared-deepseek
