// The backward with the activation's gradient in the down projection's dgrad
// (--moe-fuse-backward, as --moe-gpu-pipeline runs it), expanded back on the
// CPU into the dgrad's f32 product and moe.swiglu_grad: the same gradients as
// the unfused backward's, checked against the float64 backward and central
// differences (f32: GPT-OSS with its clamps reached; a DeepSeek-V3 shared
// expert expanded into grouped ops first, its adjoint fused too) and at the
// bf16 tolerance (bf16: the fused op keeps the product in f32 where the
// chain rounded it).
// RUN: %python %testlib/backward_case.py gen gptoss > %t.gptoss.mlir
// RUN: moe-opt %t.gptoss.mlir --moe-generate-backward --moe-fuse-backward -o %t.gptoss.bwd.mlir
// RUN: FileCheck %s --check-prefix=GPTOSS < %t.gptoss.bwd.mlir
// RUN: %python %testlib/backward_case.py main gptoss %t.gptoss.bwd.mlir > %t.gptoss.run.mlir
// RUN: moe-opt %t.gptoss.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.gptoss.out
// RUN: %python %testlib/backward_case.py check gptoss %t.gptoss.out | FileCheck %s --check-prefix=PASS-GPTOSS
// RUN: %python %testlib/backward_case.py gen shared-deepseek > %t.shared.mlir
// RUN: moe-opt %t.shared.mlir --moe-generate-backward --moe-expand-shared-mlp --moe-fuse-backward -o %t.shared.bwd.mlir
// RUN: FileCheck %s --check-prefix=SHARED < %t.shared.bwd.mlir
// RUN: %python %testlib/backward_case.py main shared-deepseek %t.shared.bwd.mlir > %t.shared.run.mlir
// RUN: moe-opt %t.shared.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.shared.out
// RUN: %python %testlib/backward_case.py check shared-deepseek %t.shared.out | FileCheck %s --check-prefix=PASS-SHARED
// RUN: %python %testlib/backward_case.py gen bf16 > %t.bf16.mlir
// RUN: moe-opt %t.bf16.mlir --moe-generate-backward --moe-fuse-backward -o %t.bf16.bwd.mlir
// RUN: FileCheck %s --check-prefix=BF16 < %t.bf16.bwd.mlir
// RUN: %python %testlib/backward_case.py main bf16 %t.bf16.bwd.mlir > %t.bf16.run.mlir
// RUN: moe-opt %t.bf16.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.bf16.out
// RUN: %python %testlib/backward_case.py check bf16 %t.bf16.out | FileCheck %s --check-prefix=PASS-BF16

// GPTOSS-LABEL: func.func @layer_backward(
// GPTOSS-NOT: moe.swiglu_grad
// GPTOSS: moe.grouped_dgrad {{.*}} act_grad gptoss %
// GPTOSS-NOT: moe.swiglu_grad
// PASS-GPTOSS: PASS gptoss

// Both the routed experts' and the shared expert's.
// SHARED-LABEL: func.func @layer_backward(
// SHARED-NOT: moe.swiglu_grad
// SHARED-COUNT-2: act_grad silu
// SHARED-NOT: moe.swiglu_grad
// PASS-SHARED: PASS shared-deepseek

// BF16-LABEL: func.func @layer_backward(
// BF16: moe.grouped_dgrad {{.*}} act_grad silu {{.*}} -> tensor<{{.*}}bf16>
// PASS-BF16: PASS bf16
