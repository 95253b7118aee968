// Runs a small MoE layer (shared-bf16) on the CPU and compares it with the
// numpy reference in test/lib/moe_ref.py at the tolerance layer_case.py states:
// bf16 tokens and weights with a gated shared expert (Is = 2I): f32
// accumulation, intermediates rounded to bf16, checked at the bf16 tolerance.
// RUN: %python %testlib/layer_case.py gen shared-bf16 > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check shared-bf16 %t.out | FileCheck %s
// The same layer with the shared expert run as routed experts
// (--moe-route-shared-experts: its slices appended to the experts, arranged
// by @layer_pack_shared, which the rewritten call runs first).
// RUN: moe-opt %t.mlir --moe-fuse-experts --moe-route-shared-experts | FileCheck %s --check-prefix=ROUTED
// RUN: moe-opt %t.mlir --moe-fuse-experts --moe-route-shared-experts --moe-cpu-reference-pipeline | %mlir-runner > %t.routed
// RUN: %python %testlib/layer_case.py check shared-bf16 %t.routed | FileCheck %s
// CHECK: PASS shared-bf16
// ROUTED: moe.route {{.*}} shared
// ROUTED-NOT: moe.shared_mlp
// ROUTED: call @layer_pack_shared
