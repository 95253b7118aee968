// The gradients of a GPT-OSS layer in the layout transformers keeps its
// experts in (layer_case.native_layout): gate-up weights [E, H, 2I] with gate
// and up columns alternating, down weights [E, I, H], both kn_weights, the
// activation interleaved. --moe-generate-backward differentiates the chain
// as it lies: the input gradients are plain grouped matmuls over the same
// weights (K-major, no transpose), the weight gradients kn_weights wgrads
// lying as the weights do, the activation's gradient interleaved. f32
// against float64 and central differences, bf16 against float64; the
// printed gradients are put back into the reference's layout first.
// RUN: %python %testlib/backward_case.py gen gptoss-native > %t.mlir
// RUN: moe-opt %t.mlir --moe-generate-backward -o %t.bwd.mlir
// RUN: FileCheck %s --check-prefix=IR < %t.bwd.mlir
// RUN: %python %testlib/backward_case.py main gptoss-native %t.bwd.mlir > %t.run.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.out
// RUN: %python %testlib/backward_case.py check gptoss-native %t.out | FileCheck %s
// RUN: moe-opt %t.mlir --moe-generate-backward=recompute-gate-up=true -o %t.rec.mlir
// RUN: %python %testlib/backward_case.py main gptoss-native %t.rec.mlir > %t.rec.run.mlir
// RUN: moe-opt %t.rec.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.rec.out
// RUN: %python %testlib/backward_case.py check gptoss-native %t.rec.out | FileCheck %s
// RUN: %python %testlib/backward_case.py gen gptoss-native-bf16 > %t.bf16.mlir
// RUN: moe-opt %t.bf16.mlir --moe-generate-backward -o %t.bf16.bwd.mlir
// RUN: %python %testlib/backward_case.py main gptoss-native-bf16 %t.bf16.bwd.mlir > %t.bf16.run.mlir
// RUN: moe-opt %t.bf16.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.bf16.out
// RUN: %python %testlib/backward_case.py check gptoss-native-bf16 %t.bf16.out | FileCheck %s --check-prefix=BF16
// CHECK: PASS gptoss-native
// BF16: PASS gptoss-native-bf16

// IR-LABEL: func.func @layer_backward(
// IR: moe.swiglu gptoss %{{.*}} interleaved
// IR: moe.grouped_wgrad {{.*}} kn_weights : ({{.*}}) -> (tensor<8x8x12xf32>, tensor<8x12xf32>)
// IR: moe.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x12xf32>, tensor<8x8x12xf32>, tensor<9xi64>) -> tensor<?x8xf32>
// IR: moe.swiglu_grad gptoss {{.*}} interleaved
// IR: moe.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x16xf32>, tensor<8x12x16xf32>, tensor<9xi64>) -> tensor<?x12xf32>
// IR: moe.grouped_wgrad {{.*}} kn_weights : ({{.*}}) -> (tensor<8x12x16xf32>, tensor<8x16xf32>)
// IR-NOT: moe.grouped_dgrad
