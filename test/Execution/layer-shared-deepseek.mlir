// Runs a small MoE layer (shared-deepseek) on the CPU and compares it with the
// numpy reference in test/lib/moe_ref.py at the tolerance layer_case.py states:
// DeepSeek-V3 style: biased group-limited routing plus one shared expert of the
// routed width (weight 1), with a cold (empty) expert.
// RUN: %python %testlib/layer_case.py gen shared-deepseek > %t.mlir
// RUN: moe-opt %t.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/layer_case.py check shared-deepseek %t.out | FileCheck %s
// CHECK: PASS shared-deepseek
