// The gradients of a bf16 Mixtral-style layer (layer_case's bf16: softmax over all E, top 2,
// renormalised): bf16 tokens, weights, intermediates and their gradients, f32 logits, routing
// weights, y and dy; compared with the float64 backward at the bf16 tolerance.
// RUN: %python %testlib/backward_case.py gen bf16 > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main bf16 %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check bf16 %t.out | FileCheck %s
// CHECK: PASS bf16
