// The gradients of a bf16 layer with a gated shared expert of width 2I (layer_case's
// shared-bf16): dsw13, dsw2, dsgate and dx's shared part in bf16; compared with the float64
// backward at the bf16 tolerance.
// RUN: %python %testlib/backward_case.py gen shared-bf16 > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main shared-bf16 %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check shared-bf16 %t.out | FileCheck %s
// CHECK: PASS shared-bf16
