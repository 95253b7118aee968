// The gradients of a bf16 GPT-OSS layer (topk_softmax, the activation's clamps reached, no
// gate-up value within bf16 rounding of them): bf16 tokens and weights, f32 expert biases and
// their gradients; compared with the float64 backward at the bf16 tolerance.
// RUN: %python %testlib/backward_case.py gen gptoss-bf16 > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main gptoss-bf16 %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check gptoss-bf16 %t.out | FileCheck %s
// CHECK: PASS gptoss-bf16
