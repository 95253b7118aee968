// --moe-quantize refusals specific to MX blocks and to activations.
// RUN: moe-opt %s --moe-quantize="format=mxfp8 element=e5m2 scope=weights+activations" -split-input-file -verify-diagnostics

// [1, 1, 32] blocks along K: K = 48 is no multiple of 32 (N is free).
func.func @k_48(%rows: tensor<?x48xf32>, %offsets: tensor<5xi64>,
                %w: tensor<4x40x48xf32>) -> tensor<?x40xf32> {
  // expected-error @+2 {{'moe.grouped_matmul' op moe-quantize (format=mxfp8 element=e5m2 scope=weights+activations): block extent 32 does not divide K = 48 (dim 2 of 'weights', of type 'tensor<4x40x48xf32>')}}
  // expected-error @+1 {{block extent 32 does not divide K = 48 (dim 1 of 'rows', of type 'tensor<?x48xf32>')}}
  %y = moe.grouped_matmul %rows, %w, %offsets
      : (tensor<?x48xf32>, tensor<4x40x48xf32>, tensor<5xi64>) -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}

// -----

// The fused op's intermediate [M, I] with I = 48 cannot take [1, 32] blocks
// (nor can its down weights [E, H, I]).
func.func @intermediate_48(%rows: tensor<?x64xf32>, %offsets: tensor<5xi64>,
                           %w13: tensor<4x96x64xf32>, %w2: tensor<4x64x48xf32>) -> tensor<?x64xf32> {
  // expected-error @+2 {{block extent 32 does not divide K = 48 (dim 2 of 'down_weights', of type 'tensor<4x64x48xf32>')}}
  // expected-error @+1 {{block extent 32 does not divide the expert width I = 48 of the intermediate}}
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x64xf32>, tensor<5xi64>, tensor<4x96x64xf32>, tensor<4x64x48xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Rows already quantized with DeepSeek-style groups.
func.func @rows_already_fp8_block(%rq: tensor<?x128xf8E4M3FN>, %rs: tensor<?x1xf32>, %offsets: tensor<5xi64>,
                                  %w: tensor<4x64x128xf32>) -> tensor<?x64xf32> {
  %rows = moe.dequantize %rq, %rs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x128xf8E4M3FN>, tensor<?x1xf32> -> tensor<?x128xf32>
  // expected-error @+1 {{'rows' is already quantized with #moe.block_scaled<f8E4M3FN, [1, 128], f32>, not the policy's #moe.block_scaled<f8E5M2, [1, 32], f8E8M0FNU>}}
  %y = moe.grouped_matmul %rows, %w, %offsets
      : (tensor<?x128xf32>, tensor<4x64x128xf32>, tensor<5xi64>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @intermediate_e4m3(%rows: tensor<?x64xf32>, %offsets: tensor<5xi64>,
                             %w13: tensor<4x128x64xf32>, %w2: tensor<4x64x64xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{the intermediate is already quantized with #moe.block_scaled<f8E4M3FN, [1, 32], f8E8M0FNU>, not the policy's #moe.block_scaled<f8E5M2, [1, 32], f8E8M0FNU>}}
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2 intermediate <f8E4M3FN, [1, 32], f8E8M0FNU>
      : (tensor<?x64xf32>, tensor<5xi64>, tensor<4x128x64xf32>, tensor<4x64x64xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
