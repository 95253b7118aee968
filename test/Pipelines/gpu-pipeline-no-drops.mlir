// --moe-gpu-pipeline compiles every computation of a function or fails,
// naming the first op it cannot take: never exit 0 with part of the program
// gone from the bundle.
// RUN: not moe-opt %s --split-input-file --moe-gpu-pipeline 2>&1 | FileCheck %s

// A shared expert written in linalg beside the moe ops, added to the routed
// experts' output.
// CHECK: error: 'arith.constant' op has no GPU kernel: the GPU pipeline compiles moe ops only, and the bundle would silently drop this part of @shared_expert (ops without a kernel in all: 5)
func.func @shared_expert(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>,
    %w13: tensor<8x1024x256xbf16>, %w2: tensor<8x256x512xbf16>,
    %shared: tensor<256x256xbf16>) -> tensor<?x256xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>) -> tensor<?x256xbf16>
  %y = moe.unpermute %h, %slots weights %w
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x256xbf16>
  %c0 = arith.constant 0 : index
  %t = tensor.dim %x, %c0 : tensor<?x256xbf16>
  %init = tensor.empty(%t) : tensor<?x256xbf16>
  %s = linalg.matmul ins(%x, %shared : tensor<?x256xbf16>, tensor<256x256xbf16>)
      outs(%init : tensor<?x256xbf16>) -> tensor<?x256xbf16>
  %sum = arith.addf %y, %s : tensor<?x256xbf16>
  return %sum : tensor<?x256xbf16>
}

// -----

// A tensor add of a moe result.
// CHECK: error: 'arith.addf' op has no GPU kernel: the GPU pipeline compiles moe ops only, and the bundle would silently drop this part of @residual (ops without a kernel in all: 1)
func.func @residual(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi64>, %r: tensor<?x512xbf16>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi64>) -> tensor<?x512xbf16>
  %z = arith.addf %y, %r : tensor<?x512xbf16>
  return %z : tensor<?x512xbf16>
}

// -----

// Code outside the module's own functions.
// CHECK: error: 'memref.global' op is neither a function nor a gpu.module: the GPU pipeline compiles the moe ops of the module's own functions, and the bundle would silently drop it
memref.global "private" @table : memref<4xf32> = dense<1.0>
func.func @gemm(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi64>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi64>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// A shared expert written as moe ops (DeepSeek-V3 style) runs as routed
// experts of its layer (test/device/layer_shared_models.mlir), its weights
// arranged once by the caller; weights the function makes itself cannot be,
// and the pipeline says so rather than compile the routed experts alone.
// CHECK: error: 'moe.shared_mlp' op --moe-route-shared-experts: the shared down weights must be an argument of @shared_mlp
func.func @shared_mlp(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>,
    %w13: tensor<8x1024x256xbf16>, %w2: tensor<8x256x512xbf16>,
    %sw13: tensor<512x256xbf16>) -> tensor<?x256xbf16> {
  %sw2 = arith.constant dense<1.0> : tensor<256x256xbf16>
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>) -> tensor<?x256xbf16>
  %s = moe.shared_mlp silu %x, %sw13, %sw2
      : (tensor<?x256xbf16>, tensor<512x256xbf16>, tensor<256x256xbf16>) -> tensor<?x256xbf16>
  %y = moe.unpermute %h, %slots weights %w shared %s
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// A Qwen2-MoE-style gated shared expert whose output is also returned is no
// part of one layer: refused.
// CHECK: error: 'moe.shared_mlp' op --moe-route-shared-experts: its result must be only the 'shared' addend of one moe.unpermute
func.func @gated_shared_mlp(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>,
    %w13: tensor<8x1024x256xbf16>, %w2: tensor<8x256x512xbf16>,
    %sw13: tensor<1024x256xbf16>, %sw2: tensor<256x512xbf16>, %g: tensor<1x256xbf16>)
    -> (tensor<?x256xbf16>, tensor<?x256xbf16>) {
  %s = moe.shared_mlp silu %x, %sw13, %sw2 gate %g
      : (tensor<?x256xbf16>, tensor<1024x256xbf16>, tensor<256x512xbf16>, tensor<1x256xbf16>) -> tensor<?x256xbf16>
  %ids, %w = moe.route softmax_topk %logits top 2
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>) -> tensor<?x256xbf16>
  %y = moe.unpermute %h, %slots weights %w shared %s
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  return %y, %s : tensor<?x256xbf16>, tensor<?x256xbf16>
}
