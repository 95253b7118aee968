// --moe-quantize with what a module may already hold: operands quantized
// with the policy's encoding (however its block is spelled) stay, a weight
// shared by two GEMMs is packed once, declarations and functions without
// expert GEMMs are untouched.
// RUN: moe-opt %s -split-input-file --moe-quantize | FileCheck %s

// The down weights already come as FP8 (blocks written [128, 128], the same
// as [1, 128, 128] on [E, N, K]): only the gate-up weights are packed.
// CHECK-LABEL: func.func private @half_quantized(
// CHECK-SAME: %[[ROWS:[a-z0-9_]+]]: tensor<?x128xf32>, %[[OFF:[a-z0-9_]+]]: tensor<5xi64>, %[[W13Q:[a-z0-9_]+]]: tensor<4x256x128xf8E4M3FN> {moe.name = "w13"}, %[[W13S:[a-z0-9_]+]]: tensor<4x2x1xf32>, %[[W2Q:[a-z0-9_]+]]: tensor<4x128x128xf8E4M3FN>, %[[W2S:[a-z0-9_]+]]: tensor<4x1x1xf32>)
// CHECK: %[[W2:[a-z0-9_]+]] = moe.dequantize %[[W2Q]], %[[W2S]] from <f8E4M3FN, [128, 128], f32>
// CHECK: %[[W13:[a-z0-9_]+]] = moe.dequantize %[[W13Q]], %[[W13S]] from <f8E4M3FN, [1, 128, 128], f32>
// CHECK: moe.expert_mlp silu %[[ROWS]], %[[OFF]], %[[W13]], %[[W2]] :
// CHECK-NOT: moe.dequantize
// CHECK-LABEL: func.func private @half_quantized_prepack(
// CHECK-SAME: %[[W:[a-z0-9_]+]]: tensor<4x256x128xf32> {moe.name = "w13"}) -> (tensor<4x256x128xf8E4M3FN>, tensor<4x2x1xf32>) attributes {moe.prepack_of = @half_quantized}
// CHECK: moe.quantize %[[W]] to <f8E4M3FN, [1, 128, 128], f32>
// CHECK-NOT: moe.quantize
func.func private @half_quantized(%rows: tensor<?x128xf32>, %offsets: tensor<5xi64>,
                                  %w13: tensor<4x256x128xf32> {moe.name = "w13"},
                                  %w2q: tensor<4x128x128xf8E4M3FN>, %w2s: tensor<4x1x1xf32>)
    -> tensor<?x128xf32> {
  %w2 = moe.dequantize %w2q, %w2s from <f8E4M3FN, [128, 128], f32>
      : tensor<4x128x128xf8E4M3FN>, tensor<4x1x1xf32> -> tensor<4x128x128xf32>
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x128xf32>, tensor<5xi64>, tensor<4x256x128xf32>, tensor<4x128x128xf32>) -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

// One weight read by two GEMMs: one pair of arguments, one quantize in the
// prepack function, a dequantize before each GEMM.
// CHECK-LABEL: func.func @shared(
// CHECK-SAME: %[[ROWS:[a-z0-9_]+]]: tensor<?x128xf32>, %[[OFF:[a-z0-9_]+]]: tensor<3xi64>, %[[WQ:[a-z0-9_]+]]: tensor<2x128x128xf8E4M3FN>, %[[WS:[a-z0-9_]+]]: tensor<2x1x1xf32>) -> tensor<?x128xf32>
// CHECK: %[[W0:[a-z0-9_]+]] = moe.dequantize %[[WQ]], %[[WS]]
// CHECK: %[[Y:[a-z0-9_]+]] = moe.grouped_matmul %[[ROWS]], %[[W0]], %[[OFF]]
// CHECK: %[[W1:[a-z0-9_]+]] = moe.dequantize %[[WQ]], %[[WS]]
// CHECK: moe.grouped_matmul %[[Y]], %[[W1]], %[[OFF]]
// CHECK-LABEL: func.func @shared_prepack(
// CHECK-SAME: tensor<2x128x128xf32>) -> (tensor<2x128x128xf8E4M3FN>, tensor<2x1x1xf32>)
// CHECK-COUNT-1: moe.quantize
// CHECK-NOT: moe.quantize
func.func @shared(%rows: tensor<?x128xf32>, %offsets: tensor<3xi64>,
                  %w: tensor<2x128x128xf32>) -> tensor<?x128xf32> {
  %y = moe.grouped_matmul %rows, %w, %offsets
      : (tensor<?x128xf32>, tensor<2x128x128xf32>, tensor<3xi64>) -> tensor<?x128xf32>
  %z = moe.grouped_matmul %y, %w, %offsets
      : (tensor<?x128xf32>, tensor<2x128x128xf32>, tensor<3xi64>) -> tensor<?x128xf32>
  return %z : tensor<?x128xf32>
}

// -----

// Nothing to quantize: a declaration, a function without expert GEMMs, and
// one whose weights are all already quantized (no prepack function).
// CHECK-LABEL: func.func private @declared(tensor<4x128x128xf32>)
// CHECK-LABEL: func.func @no_gemm(
// CHECK-SAME: tensor<4x128x128xf32>
// CHECK-LABEL: func.func @done(
// CHECK-SAME: %{{.*}}: tensor<?x128xf32>, %{{.*}}: tensor<3xi64>, %{{.*}}: tensor<2x128x128xf8E4M3FN>, %{{.*}}: tensor<2x1x1xf32>)
// CHECK-COUNT-1: moe.dequantize
// CHECK-NOT: moe.dequantize
// CHECK-NOT: _prepack
func.func private @declared(tensor<4x128x128xf32>)
func.func @no_gemm(%w: tensor<4x128x128xf32>) -> tensor<4x128x128xf32> {
  return %w : tensor<4x128x128xf32>
}
func.func @done(%rows: tensor<?x128xf32>, %offsets: tensor<3xi64>,
                %wq: tensor<2x128x128xf8E4M3FN>, %ws: tensor<2x1x1xf32>) -> tensor<?x128xf32> {
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [1, 128, 128], f32>
      : tensor<2x128x128xf8E4M3FN>, tensor<2x1x1xf32> -> tensor<2x128x128xf32>
  %y = moe.grouped_matmul %rows, %w, %offsets
      : (tensor<?x128xf32>, tensor<2x128x128xf32>, tensor<3xi64>) -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}
