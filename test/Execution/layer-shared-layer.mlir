// Runs a small MoE layer (shared-layer) on the CPU and compares it with the
// numpy reference in test/lib/moe_ref.py at the tolerance layer_case.py states:
// a moe.layer (fused expert MLP) whose body holds a gated shared expert that
// the combine adds, with an empty expert.
// RUN: %python %testlib/layer_case.py gen shared-layer > %t.mlir
// RUN: FileCheck %s --check-prefix=IR < %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check shared-layer %t.out | FileCheck %s
// IR: moe.layer
// IR: moe.expert_mlp silu
// IR: %[[S:.*]] = moe.shared_mlp silu %x, %sw13, %sw2 gate %sgate
// IR: moe.unpermute {{.*}} shared %[[S]]
// IR: moe.yield
// The same layer with the shared expert run as routed experts
// (--moe-route-shared-experts: its slices appended to the experts, arranged
// by @layer_pack_shared, which the rewritten call runs first).
// RUN: moe-opt %t.mlir --moe-fuse-experts --moe-route-shared-experts | FileCheck %s --check-prefix=ROUTED
// RUN: moe-opt %t.mlir --moe-fuse-experts --moe-route-shared-experts --moe-cpu-reference-pipeline | %mlir-runner > %t.routed
// RUN: %python %testlib/layer_case.py check shared-layer %t.routed | FileCheck %s
// CHECK: PASS shared-layer
// ROUTED: moe.route {{.*}} shared
// ROUTED-NOT: moe.shared_mlp
// ROUTED: call @layer_pack_shared
