// Runs a small MoE layer (shared-deepseek) on the CPU and compares it with the
// numpy reference in test/lib/moe_ref.py at the tolerance layer_case.py states:
// DeepSeek-V3 style: biased group-limited routing plus one shared expert of the
// routed width (weight 1), with a cold (empty) expert.
// RUN: %python %testlib/layer_case.py gen shared-deepseek > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check shared-deepseek %t.out | FileCheck %s
// The same layer with the shared expert run as routed experts
// (--moe-route-shared-experts: its slices appended to the experts, arranged
// by @layer_pack_shared, which the rewritten call runs first).
// RUN: moe-opt %t.mlir --moe-fuse-experts --moe-route-shared-experts | FileCheck %s --check-prefix=ROUTED
// RUN: moe-opt %t.mlir --moe-fuse-experts --moe-route-shared-experts --moe-cpu-reference-pipeline | %mlir-runner > %t.routed
// RUN: %python %testlib/layer_case.py check shared-deepseek %t.routed | FileCheck %s
// CHECK: PASS shared-deepseek
// ROUTED: moe.route {{.*}} shared
// ROUTED-NOT: moe.shared_mlp
// ROUTED: call @layer_pack_shared
