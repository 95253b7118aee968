// The pipeline ends in the LLVM dialect with nothing of moe, tensor or
// linalg left, so mlir-runner can execute it.
// RUN: moe-opt %s --moe-cpu-reference-pipeline | FileCheck %s
// RUN: not moe-opt %s --moe-cpu-reference-pipeline="bogus=1" 2>&1 | FileCheck %s --check-prefix=BADOPT

// CHECK: llvm.func @layer
// CHECK-NOT: moe.
// CHECK-NOT: linalg.
// CHECK-NOT: tensor.
// BADOPT: no such option bogus
func.func @layer(%x: tensor<?x16xf32>, %logits: tensor<?x4xf32>,
                 %w13: tensor<4x32x16xf32>, %w2: tensor<4x16x16xf32>) -> tensor<?x16xf32> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<5xi64>, tensor<?x2xi64>)
  %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x16xf32>, tensor<5xi64>, tensor<4x32x16xf32>, tensor<4x16x16xf32>) -> tensor<?x16xf32>
  %y = moe.unpermute %o, %slots weights %w
      : (tensor<?x16xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
