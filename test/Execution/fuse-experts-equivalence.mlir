// Runs small MoE layers (unfused) on the CPU as they are and after
// --moe-fuse-experts: the pass must fuse their expert MLPs, and the fused
// layers must print exactly what the unfused ones do (the addresses aside)
// and match the numpy reference in test/lib/moe_ref.py.
// RUN: %python %testlib/layer_case.py gen mixtral > %t.mixtral.mlir
// RUN: moe-opt %t.mixtral.mlir --moe-fuse-experts | FileCheck %s --check-prefix=FUSED
// RUN: moe-opt %t.mixtral.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.mixtral.unfused.out
// RUN: moe-opt %t.mixtral.mlir --moe-fuse-experts --moe-cpu-reference-pipeline | %mlir-runner > %t.mixtral.fused.out
// RUN: %python %testlib/layer_case.py check mixtral %t.mixtral.fused.out | FileCheck %s --check-prefix=MIXTRAL
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.mixtral.unfused.out > %t.mixtral.unfused.txt
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.mixtral.fused.out > %t.mixtral.fused.txt
// RUN: diff %t.mixtral.unfused.txt %t.mixtral.fused.txt
// RUN: %python %testlib/layer_case.py gen gptoss > %t.gptoss.mlir
// RUN: moe-opt %t.gptoss.mlir --moe-fuse-experts | FileCheck %s --check-prefix=FUSED-GPTOSS
// RUN: moe-opt %t.gptoss.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.gptoss.unfused.out
// RUN: moe-opt %t.gptoss.mlir --moe-fuse-experts --moe-cpu-reference-pipeline | %mlir-runner > %t.gptoss.fused.out
// RUN: %python %testlib/layer_case.py check gptoss %t.gptoss.fused.out | FileCheck %s --check-prefix=GPTOSS
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.gptoss.unfused.out > %t.gptoss.unfused.txt
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.gptoss.fused.out > %t.gptoss.fused.txt
// RUN: diff %t.gptoss.unfused.txt %t.gptoss.fused.txt

// FUSED-LABEL: func.func @layer
// FUSED-NOT: moe.grouped_matmul
// FUSED-NOT: moe.swiglu
// FUSED: moe.expert_mlp silu
// FUSED-NOT: moe.grouped_matmul
// FUSED: moe.unpermute
// FUSED-GPTOSS-LABEL: func.func @layer
// FUSED-GPTOSS-NOT: moe.grouped_matmul
// FUSED-GPTOSS: moe.expert_mlp gptoss {{.*}} gate_up_bias {{.*}} down_bias
// FUSED-GPTOSS-NOT: moe.grouped_matmul
// FUSED-GPTOSS: moe.unpermute
// MIXTRAL: PASS mixtral
// GPTOSS: PASS gptoss
