// Runs a small MoE layer (shared-padded) on the CPU and compares it with the
// numpy reference in test/lib/moe_ref.py at the tolerance layer_case.py
// states: a gated shared expert of width 20 next to routed experts of width 8,
// so --moe-route-shared-experts makes three slices, the last padded with zeros.
// RUN: %python %testlib/layer_case.py gen shared-padded > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check shared-padded %t.out | FileCheck %s
// The same layer with the shared expert run as routed experts
// (--moe-route-shared-experts: its slices appended to the experts, arranged
// by @layer_pack_shared, which the rewritten call runs first).
// RUN: moe-opt %t.mlir --moe-fuse-experts --moe-route-shared-experts | FileCheck %s --check-prefix=ROUTED
// RUN: moe-opt %t.mlir --moe-fuse-experts --moe-route-shared-experts --moe-cpu-reference-pipeline | %mlir-runner > %t.routed
// RUN: %python %testlib/layer_case.py check shared-padded %t.routed | FileCheck %s
// CHECK: PASS shared-padded
// ROUTED: moe.route {{.*}} shared 3
// ROUTED-NOT: moe.shared_mlp
// ROUTED: call @layer_pack_shared
