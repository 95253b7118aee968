// The gradients of a Qwen3 layer (softmax, top 4 of 16, renormalised).
// RUN: %python %testlib/backward_case.py gen qwen3 > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main qwen3 %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check qwen3 %t.out | FileCheck %s
// CHECK: PASS qwen3
