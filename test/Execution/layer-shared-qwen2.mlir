// Runs a small MoE layer (shared-qwen2) on the CPU and compares it with the
// numpy reference in test/lib/moe_ref.py at the tolerance layer_case.py states:
// Qwen2-MoE style: softmax top-4 without renormalisation plus a shared expert
// four times the routed width, gated per token by sigmoid(x . w_gate), with two
// empty experts.
// RUN: %python %testlib/layer_case.py gen shared-qwen2 > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check shared-qwen2 %t.out | FileCheck %s
// The same layer with the shared expert run as routed experts
// (--moe-route-shared-experts: its slices appended to the experts, arranged
// by @layer_pack_shared, which the rewritten call runs first).
// RUN: moe-opt %t.mlir --moe-fuse-experts --moe-route-shared-experts | FileCheck %s --check-prefix=ROUTED
// RUN: moe-opt %t.mlir --moe-fuse-experts --moe-route-shared-experts --moe-cpu-reference-pipeline | %mlir-runner > %t.routed
// RUN: %python %testlib/layer_case.py check shared-qwen2 %t.routed | FileCheck %s
// CHECK: PASS shared-qwen2
// ROUTED: moe.route {{.*}} shared
// ROUTED-NOT: moe.shared_mlp
// ROUTED: call @layer_pack_shared
