// Every op lowers through the whole CPU pipeline with static, dynamic and
// mixed shapes, including dims the model usually fixes (found by review
// while fuzzing: permute once indexed past its size list when H was dynamic).
// RUN: moe-opt %s --moe-cpu-reference-pipeline --split-input-file | FileCheck %s

// CHECK: llvm.func @permute_dynamic_hidden
func.func @permute_dynamic_hidden(%x: tensor<3x?xf32>, %ids: tensor<3x?xi32>)
    -> (tensor<?x?xf32>, tensor<5xi32>, tensor<3x?xi32>) {
  %r, %o, %s = moe.permute %x, %ids
      : (tensor<3x?xf32>, tensor<3x?xi32>) -> (tensor<?x?xf32>, tensor<5xi32>, tensor<3x?xi32>)
  return %r, %o, %s : tensor<?x?xf32>, tensor<5xi32>, tensor<3x?xi32>
}

// -----

// CHECK: llvm.func @permute_static_padded
func.func @permute_static_padded(%x: tensor<4x8xbf16>, %ids: tensor<4x2xi32>)
    -> (tensor<11x8xbf16>, tensor<2xi64>, tensor<4x2xi64>) {
  %r, %o, %s = moe.permute %x, %ids pad_to 4
      : (tensor<4x8xbf16>, tensor<4x2xi32>) -> (tensor<11x8xbf16>, tensor<2xi64>, tensor<4x2xi64>)
  return %r, %o, %s : tensor<11x8xbf16>, tensor<2xi64>, tensor<4x2xi64>
}

// -----

// CHECK: llvm.func @grouped_matmul_dynamic
func.func @grouped_matmul_dynamic(%r: tensor<?x?xf16>, %w: tensor<3x?x?xf16>, %o: tensor<4xi32>,
                                  %b: tensor<3x?xf16>, %s: tensor<?xf32>) -> tensor<?x?xf16> {
  %y = moe.grouped_matmul %r, %w, %o bias %b scale %s
      : (tensor<?x?xf16>, tensor<3x?x?xf16>, tensor<4xi32>, tensor<3x?xf16>, tensor<?xf32>) -> tensor<?x?xf16>
  return %y : tensor<?x?xf16>
}

// -----

// The bias may be more static than the weights.
// CHECK: llvm.func @grouped_matmul_static_bias
func.func @grouped_matmul_static_bias(%r: tensor<?x16xf32>, %w: tensor<3x?x16xf32>, %o: tensor<4xi32>,
                                      %b: tensor<3x8xf32>) -> tensor<?x?xf32> {
  %y = moe.grouped_matmul %r, %w, %o bias %b
      : (tensor<?x16xf32>, tensor<3x?x16xf32>, tensor<4xi32>, tensor<3x8xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

// CHECK: llvm.func @grouped_matmul_static
func.func @grouped_matmul_static(%r: tensor<6x4xf32>, %w: tensor<2x5x4xf32>, %o: tensor<3xi64>) -> tensor<6x5xf32> {
  %y = moe.grouped_matmul %r, %w, %o
      : (tensor<6x4xf32>, tensor<2x5x4xf32>, tensor<3xi64>) -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// -----

// CHECK: llvm.func @swiglu_dynamic
func.func @swiglu_dynamic(%g: tensor<?x?xbf16>, %s: tensor<?xf32>) -> tensor<?x?xf32> {
  %h = moe.swiglu gptoss %g scale %s : (tensor<?x?xbf16>, tensor<?xf32>) -> tensor<?x?xf32>
  return %h : tensor<?x?xf32>
}

// -----

// CHECK: llvm.func @unpermute_static
func.func @unpermute_static(%r: tensor<6x4xbf16>, %s: tensor<3x2xi32>) -> tensor<3x4xbf16> {
  %y = moe.unpermute %r, %s : (tensor<6x4xbf16>, tensor<3x2xi32>) -> tensor<3x4xbf16>
  return %y : tensor<3x4xbf16>
}

// -----

// CHECK: llvm.func @route_static_groups
func.func @route_static_groups(%l: tensor<5x6xbf16>) -> (tensor<5x3xi32>, tensor<5x3xf32>) {
  %i, %w = moe.route softmax_topk %l top 3 groups 3 select 2
      : (tensor<5x6xbf16>) -> (tensor<5x3xi32>, tensor<5x3xf32>)
  return %i, %w : tensor<5x3xi32>, tensor<5x3xf32>
}

// -----

// One expert per group: the group score is that expert's score alone.
// CHECK: llvm.func @route_singleton_groups
func.func @route_singleton_groups(%l: tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>) {
  %i, %w = moe.route sigmoid_topk %l top 2 groups 4 select 2
      : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return %i, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// CHECK: llvm.func @quantize_rank1_and_3d
func.func @quantize_rank1_and_3d(%v: tensor<64xf16>, %w: tensor<?x4x64xf32>)
    -> (tensor<64xf8E5M2>, tensor<2xf8E8M0FNU>, tensor<?x4x64xf32>) {
  %q, %s = moe.quantize %v to <f8E5M2, [32], f8E8M0FNU>
      : tensor<64xf16> -> tensor<64xf8E5M2>, tensor<2xf8E8M0FNU>
  %wq, %ws = moe.quantize %w to <f8E4M3FN, [2, 32], f32>
      : tensor<?x4x64xf32> -> tensor<?x4x64xf8E4M3FN>, tensor<?x2x2xf32>
  %wd = moe.dequantize %wq, %ws from <f8E4M3FN, [2, 32], f32>
      : tensor<?x4x64xf8E4M3FN>, tensor<?x2x2xf32> -> tensor<?x4x64xf32>
  return %q, %s, %wd : tensor<64xf8E5M2>, tensor<2xf8E8M0FNU>, tensor<?x4x64xf32>
}

// -----

// CHECK: llvm.func @shared_mlp_dynamic
func.func @shared_mlp_dynamic(%x: tensor<?x?xf16>, %w13: tensor<?x?xf16>, %w2: tensor<?x?xf16>,
                              %g: tensor<1x?xf16>) -> tensor<?x?xf32> {
  %s = moe.shared_mlp silu %x, %w13, %w2 gate %g
      : (tensor<?x?xf16>, tensor<?x?xf16>, tensor<?x?xf16>, tensor<1x?xf16>) -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

// CHECK: llvm.func @shared_mlp_static
func.func @shared_mlp_static(%x: tensor<3x8xbf16>, %w13: tensor<12x8xbf16>, %w2: tensor<8x6xbf16>)
    -> tensor<3x8xbf16> {
  %s = moe.shared_mlp silu %x, %w13, %w2
      : (tensor<3x8xbf16>, tensor<12x8xbf16>, tensor<8x6xbf16>) -> tensor<3x8xbf16>
  return %s : tensor<3x8xbf16>
}

// -----

// CHECK: llvm.func @unpermute_shared_mixed
func.func @unpermute_shared_mixed(%r: tensor<?x?xbf16>, %slots: tensor<3x?xi32>, %s: tensor<?x8xf16>)
    -> tensor<3x8xf16> {
  %y = moe.unpermute %r, %slots shared %s
      : (tensor<?x?xbf16>, tensor<3x?xi32>, tensor<?x8xf16>) -> tensor<3x8xf16>
  return %y : tensor<3x8xf16>
}
