// Runs a small MoE layer (shared-qwen2) on the CPU and compares it with the
// numpy reference in test/lib/moe_ref.py at the tolerance layer_case.py states:
// Qwen2-MoE style: softmax top-4 without renormalisation plus a shared expert
// four times the routed width, gated per token by sigmoid(x . w_gate), with two
// empty experts.
// RUN: %python %testlib/layer_case.py gen shared-qwen2 > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check shared-qwen2 %t.out | FileCheck %s
// CHECK: PASS shared-qwen2
