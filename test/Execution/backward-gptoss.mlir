// The gradients of a GPT-OSS layer (topk_softmax, expert biases, the activation's clamp reached).
// RUN: %python %testlib/backward_case.py gen gptoss > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main gptoss %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check gptoss %t.out | FileCheck %s
// CHECK: PASS gptoss
