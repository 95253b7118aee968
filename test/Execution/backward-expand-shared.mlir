// A DeepSeek-V3 layer's ungated shared expert and its adjoint as grouped ops
// of one group (--moe-expand-shared-mlp, as --moe-gpu-pipeline runs it on a
// moe.program): in f32 the expansion is exact (the one-group offsets
// [0, 2^31 - 1] are clamped to the tokens, the [1, R, C] weight gradients
// are the weights' [R, C]), checked against the float64 backward and central
// differences; in bf16 it rounds the activation's and the gate-up output's
// gradients between ops, within the bf16 tolerance.
// RUN: %python %testlib/backward_case.py gen shared-deepseek > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward --moe-expand-shared-mlp -o %t.bwd.mlir
// RUN: FileCheck %s --check-prefix=EXPANDED < %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main shared-deepseek %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check shared-deepseek %t.out | FileCheck %s
// RUN: %python %testlib/backward_case.py gen shared-deepseek-bf16 > %t.bf16.mlir
// RUN: moe-opt %t.bf16.mlir --moe-generate-backward --moe-expand-shared-mlp -o %t.bf16.bwd.mlir
// RUN: %python %testlib/backward_case.py main shared-deepseek-bf16 %t.bf16.bwd.mlir > %t.bf16.run.mlir
// RUN: moe-opt %t.bf16.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.bf16.out
// RUN: %python %testlib/backward_case.py check shared-deepseek-bf16 %t.bf16.out | FileCheck %s --check-prefix=BF16
// EXPANDED-NOT: moe.shared_mlp
// CHECK: PASS shared-deepseek
// BF16: PASS shared-deepseek-bf16
