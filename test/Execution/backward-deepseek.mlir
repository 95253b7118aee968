// The gradients of a DeepSeek-V3 layer (sigmoid, correction bias, groups, renormalised, scale 2.5).
// RUN: %python %testlib/backward_case.py gen deepseek > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main deepseek %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check deepseek %t.out | FileCheck %s
// CHECK: PASS deepseek
