// Runs a small MoE layer (shared-bf16) on the CPU and compares it with the
// numpy reference in test/lib/moe_ref.py at the tolerance layer_case.py states:
// bf16 tokens and weights with a gated shared expert (Is = 2I): f32
// accumulation, intermediates rounded to bf16, checked at the bf16 tolerance.
// RUN: %python %testlib/layer_case.py gen shared-bf16 > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check shared-bf16 %t.out | FileCheck %s
// CHECK: PASS shared-bf16
