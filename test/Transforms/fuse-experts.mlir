// RUN: moe-opt %s --moe-fuse-experts --split-input-file | FileCheck %s
// RUN: moe-opt %s --moe-fuse-experts --moe-expand-fused-ops --split-input-file | FileCheck %s --check-prefix=ROUND

// Mixtral: the routing weight is the down projection's epilogue scale.
// CHECK-LABEL: func @mixtral
// CHECK-SAME: (%[[ROWS:[a-z0-9]+]]: tensor<?x12xbf16>, %[[OFF:[a-z0-9]+]]: tensor<5xi64>, %[[W13:[a-z0-9]+]]: tensor<4x16x12xbf16>, %[[W2:[a-z0-9]+]]: tensor<4x12x8xbf16>, %[[S:[a-z0-9]+]]: tensor<?xf32>)
// CHECK-NOT: moe.grouped_matmul
// CHECK-NOT: moe.swiglu
// CHECK: %[[Y:.*]] = moe.expert_mlp silu %[[ROWS]], %[[OFF]], %[[W13]], %[[W2]] scale %[[S]] : {{.*}} -> tensor<?x12xbf16>
// CHECK-NOT: moe.grouped_matmul
// CHECK: return %[[Y]]
func.func @mixtral(%rows: tensor<?x12xbf16>, %offsets: tensor<5xi64>,
                   %w13: tensor<4x16x12xbf16>, %w2: tensor<4x12x8xbf16>,
                   %s: tensor<?xf32>) -> tensor<?x12xbf16> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x12xbf16>, tensor<4x16x12xbf16>, tensor<5xi64>) -> tensor<?x16xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x16xbf16>) -> tensor<?x8xbf16>
  %y = moe.grouped_matmul %h, %w2, %offsets scale %s
      : (tensor<?x8xbf16>, tensor<4x12x8xbf16>, tensor<5xi64>, tensor<?xf32>) -> tensor<?x12xbf16>
  return %y : tensor<?x12xbf16>
}

// -----

// A per-row scale on the activation commutes with a bias-free down matmul,
// so it becomes the fused op's scale; a gate-up bias does not matter.
// CHECK-LABEL: func @swiglu_scale
// CHECK-SAME: (%[[ROWS:[a-z0-9]+]]: tensor<?x12xf32>, %[[OFF:[a-z0-9]+]]: tensor<5xi32>, %[[W13:[a-z0-9]+]]: tensor<4x16x12xf32>, %[[W2:[a-z0-9]+]]: tensor<4x12x8xf32>, %[[B13:[a-z0-9]+]]: tensor<4x16xf32>, %[[S:[a-z0-9]+]]: tensor<?xf32>)
// CHECK-NOT: moe.swiglu
// CHECK: %[[Y:.*]] = moe.expert_mlp silu %[[ROWS]], %[[OFF]], %[[W13]], %[[W2]] gate_up_bias %[[B13]] scale %[[S]] : {{.*}} -> tensor<?x12xf32>
// CHECK-NOT: moe.grouped_matmul
// CHECK: return %[[Y]]
func.func @swiglu_scale(%rows: tensor<?x12xf32>, %offsets: tensor<5xi32>,
                        %w13: tensor<4x16x12xf32>, %w2: tensor<4x12x8xf32>,
                        %b13: tensor<4x16xf32>, %s: tensor<?xf32>) -> tensor<?x12xf32> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets bias %b13
      : (tensor<?x12xf32>, tensor<4x16x12xf32>, tensor<5xi32>, tensor<4x16xf32>) -> tensor<?x16xf32>
  %h = moe.swiglu silu %gu scale %s : (tensor<?x16xf32>, tensor<?xf32>) -> tensor<?x8xf32>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x8xf32>, tensor<4x12x8xf32>, tensor<5xi32>) -> tensor<?x12xf32>
  return %y : tensor<?x12xf32>
}

// -----

// GPT-OSS: both biases, alpha and limit, the routing weight after the down bias.
// CHECK-LABEL: func @gptoss
// CHECK-SAME: (%[[ROWS:[a-z0-9]+]]: tensor<?x12xf32>, %[[OFF:[a-z0-9]+]]: tensor<5xi64>, %[[W13:[a-z0-9]+]]: tensor<4x16x12xf32>, %[[W2:[a-z0-9]+]]: tensor<4x12x8xf32>, %[[B13:[a-z0-9]+]]: tensor<4x16xf32>, %[[B2:[a-z0-9]+]]: tensor<4x12xf32>, %[[S:[a-z0-9]+]]: tensor<?xf32>)
// CHECK-NOT: moe.grouped_matmul
// CHECK-NOT: moe.swiglu
// CHECK: %[[Y:.*]] = moe.expert_mlp gptoss %[[ROWS]], %[[OFF]], %[[W13]], %[[W2]] gate_up_bias %[[B13]] down_bias %[[B2]] scale %[[S]] alpha 1.500000e+00 limit 5.000000e+00 : {{.*}} -> tensor<?x12xf32>
// CHECK-NOT: moe.grouped_matmul
// CHECK: return %[[Y]]

// Fusing and expanding again gives back the chain.
// ROUND-LABEL: func @gptoss
// ROUND-SAME: (%[[ROWS:[a-z0-9]+]]: tensor<?x12xf32>, %[[OFF:[a-z0-9]+]]: tensor<5xi64>, %[[W13:[a-z0-9]+]]: tensor<4x16x12xf32>, %[[W2:[a-z0-9]+]]: tensor<4x12x8xf32>, %[[B13:[a-z0-9]+]]: tensor<4x16xf32>, %[[B2:[a-z0-9]+]]: tensor<4x12xf32>, %[[S:[a-z0-9]+]]: tensor<?xf32>)
// ROUND: %[[GU:.*]] = moe.grouped_matmul %[[ROWS]], %[[W13]], %[[OFF]] bias %[[B13]] : {{.*}} -> tensor<?x16xf32>
// ROUND: %[[H:.*]] = moe.swiglu gptoss %[[GU]] alpha 1.500000e+00 limit 5.000000e+00 : (tensor<?x16xf32>) -> tensor<?x8xf32>
// ROUND: %[[Y:.*]] = moe.grouped_matmul %[[H]], %[[W2]], %[[OFF]] bias %[[B2]] scale %[[S]] : {{.*}} -> tensor<?x12xf32>
// ROUND-NOT: moe.expert_mlp
// ROUND: return %[[Y]]
func.func @gptoss(%rows: tensor<?x12xf32>, %offsets: tensor<5xi64>,
                  %w13: tensor<4x16x12xf32>, %w2: tensor<4x12x8xf32>,
                  %b13: tensor<4x16xf32>, %b2: tensor<4x12xf32>, %s: tensor<?xf32>)
    -> tensor<?x12xf32> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets bias %b13
      : (tensor<?x12xf32>, tensor<4x16x12xf32>, tensor<5xi64>, tensor<4x16xf32>) -> tensor<?x16xf32>
  %h = moe.swiglu gptoss %gu alpha 1.5 limit 5.0 : (tensor<?x16xf32>) -> tensor<?x8xf32>
  %y = moe.grouped_matmul %h, %w2, %offsets bias %b2 scale %s
      : (tensor<?x8xf32>, tensor<4x12x8xf32>, tensor<5xi64>, tensor<4x12xf32>, tensor<?xf32>)
      -> tensor<?x12xf32>
  return %y : tensor<?x12xf32>
}

// -----

// The two matmuls must use the same offsets value.
// CHECK-LABEL: func @different_offsets
// CHECK: moe.grouped_matmul
// CHECK: moe.swiglu
// CHECK: moe.grouped_matmul
// CHECK-NOT: moe.expert_mlp
func.func @different_offsets(%rows: tensor<?x12xf32>, %off1: tensor<5xi64>, %off2: tensor<5xi64>,
                             %w13: tensor<4x16x12xf32>, %w2: tensor<4x12x8xf32>) -> tensor<?x12xf32> {
  %gu = moe.grouped_matmul %rows, %w13, %off1
      : (tensor<?x12xf32>, tensor<4x16x12xf32>, tensor<5xi64>) -> tensor<?x16xf32>
  %h = moe.swiglu silu %gu : (tensor<?x16xf32>) -> tensor<?x8xf32>
  %y = moe.grouped_matmul %h, %w2, %off2
      : (tensor<?x8xf32>, tensor<4x12x8xf32>, tensor<5xi64>) -> tensor<?x12xf32>
  return %y : tensor<?x12xf32>
}

// -----

// The gate-up result has another user.
// CHECK-LABEL: func @gate_up_used_twice
// CHECK: %[[GU:.*]] = moe.grouped_matmul
// CHECK: moe.swiglu silu %[[GU]]
// CHECK: %[[Y:.*]] = moe.grouped_matmul
// CHECK-NOT: moe.expert_mlp
// CHECK: return %[[Y]], %[[GU]]
func.func @gate_up_used_twice(%rows: tensor<?x12xf32>, %offsets: tensor<5xi64>,
                              %w13: tensor<4x16x12xf32>, %w2: tensor<4x12x8xf32>)
    -> (tensor<?x12xf32>, tensor<?x16xf32>) {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x12xf32>, tensor<4x16x12xf32>, tensor<5xi64>) -> tensor<?x16xf32>
  %h = moe.swiglu silu %gu : (tensor<?x16xf32>) -> tensor<?x8xf32>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x8xf32>, tensor<4x12x8xf32>, tensor<5xi64>) -> tensor<?x12xf32>
  return %y, %gu : tensor<?x12xf32>, tensor<?x16xf32>
}

// -----

// The activation has another user.
// CHECK-LABEL: func @act_used_twice
// CHECK: moe.grouped_matmul
// CHECK: %[[H:.*]] = moe.swiglu
// CHECK: %[[Y:.*]] = moe.grouped_matmul %[[H]]
// CHECK-NOT: moe.expert_mlp
// CHECK: return %[[Y]], %[[H]]
func.func @act_used_twice(%rows: tensor<?x12xf32>, %offsets: tensor<5xi64>,
                          %w13: tensor<4x16x12xf32>, %w2: tensor<4x12x8xf32>)
    -> (tensor<?x12xf32>, tensor<?x8xf32>) {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x12xf32>, tensor<4x16x12xf32>, tensor<5xi64>) -> tensor<?x16xf32>
  %h = moe.swiglu silu %gu : (tensor<?x16xf32>) -> tensor<?x8xf32>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x8xf32>, tensor<4x12x8xf32>, tensor<5xi64>) -> tensor<?x12xf32>
  return %y, %h : tensor<?x12xf32>, tensor<?x8xf32>
}

// -----

// (s * h) @ w2^T + b2 is not (h @ w2^T + b2) * s: the scale cannot move past
// the down bias.
// CHECK-LABEL: func @swiglu_scale_before_down_bias
// CHECK: moe.grouped_matmul
// CHECK: moe.swiglu silu %{{.*}} scale
// CHECK: moe.grouped_matmul %{{.*}} bias
// CHECK-NOT: moe.expert_mlp
func.func @swiglu_scale_before_down_bias(%rows: tensor<?x12xf32>, %offsets: tensor<5xi64>,
                                         %w13: tensor<4x16x12xf32>, %w2: tensor<4x12x8xf32>,
                                         %b2: tensor<4x12xf32>, %s: tensor<?xf32>) -> tensor<?x12xf32> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x12xf32>, tensor<4x16x12xf32>, tensor<5xi64>) -> tensor<?x16xf32>
  %h = moe.swiglu silu %gu scale %s : (tensor<?x16xf32>, tensor<?xf32>) -> tensor<?x8xf32>
  %y = moe.grouped_matmul %h, %w2, %offsets bias %b2
      : (tensor<?x8xf32>, tensor<4x12x8xf32>, tensor<5xi64>, tensor<4x12xf32>) -> tensor<?x12xf32>
  return %y : tensor<?x12xf32>
}

// -----

// expert_mlp has no scale on the gate-up matmul.
// CHECK-LABEL: func @gate_up_scale
// CHECK: moe.grouped_matmul %{{.*}} scale
// CHECK: moe.swiglu
// CHECK: moe.grouped_matmul
// CHECK-NOT: moe.expert_mlp
func.func @gate_up_scale(%rows: tensor<?x12xf32>, %offsets: tensor<5xi64>,
                         %w13: tensor<4x16x12xf32>, %w2: tensor<4x12x8xf32>,
                         %s: tensor<?xf32>) -> tensor<?x12xf32> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets scale %s
      : (tensor<?x12xf32>, tensor<4x16x12xf32>, tensor<5xi64>, tensor<?xf32>) -> tensor<?x16xf32>
  %h = moe.swiglu silu %gu : (tensor<?x16xf32>) -> tensor<?x8xf32>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x8xf32>, tensor<4x12x8xf32>, tensor<5xi64>) -> tensor<?x12xf32>
  return %y : tensor<?x12xf32>
}

// -----

// Two row scales: expert_mlp has room for one.
// CHECK-LABEL: func @two_scales
// CHECK: moe.grouped_matmul
// CHECK: moe.swiglu silu %{{.*}} scale
// CHECK: moe.grouped_matmul %{{.*}} scale
// CHECK-NOT: moe.expert_mlp
func.func @two_scales(%rows: tensor<?x12xf32>, %offsets: tensor<5xi64>,
                      %w13: tensor<4x16x12xf32>, %w2: tensor<4x12x8xf32>,
                      %s1: tensor<?xf32>, %s2: tensor<?xf32>) -> tensor<?x12xf32> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x12xf32>, tensor<4x16x12xf32>, tensor<5xi64>) -> tensor<?x16xf32>
  %h = moe.swiglu silu %gu scale %s1 : (tensor<?x16xf32>, tensor<?xf32>) -> tensor<?x8xf32>
  %y = moe.grouped_matmul %h, %w2, %offsets scale %s2
      : (tensor<?x8xf32>, tensor<4x12x8xf32>, tensor<5xi64>, tensor<?xf32>) -> tensor<?x12xf32>
  return %y : tensor<?x12xf32>
}

// -----

// An f32 gate-up result from bf16 rows: expert_mlp's intermediate would be
// bf16, so fusing would round it.
// CHECK-LABEL: func @f32_intermediate
// CHECK: moe.grouped_matmul
// CHECK: moe.swiglu
// CHECK: moe.grouped_matmul
// CHECK-NOT: moe.expert_mlp
func.func @f32_intermediate(%rows: tensor<?x12xbf16>, %offsets: tensor<5xi64>,
                            %w13: tensor<4x16x12xbf16>, %w2: tensor<4x12x8xbf16>)
    -> tensor<?x12xbf16> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x12xbf16>, tensor<4x16x12xbf16>, tensor<5xi64>) -> tensor<?x16xf32>
  %h = moe.swiglu silu %gu : (tensor<?x16xf32>) -> tensor<?x8xbf16>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x8xbf16>, tensor<4x12x8xbf16>, tensor<5xi64>) -> tensor<?x12xbf16>
  return %y : tensor<?x12xbf16>
}

// -----

// The down matmul maps to 10 columns, not back to H = 12: a valid chain, but
// not an expert_mlp (its verifier would reject it).
// CHECK-LABEL: func @not_hidden_size
// CHECK: moe.grouped_matmul
// CHECK: moe.swiglu
// CHECK: moe.grouped_matmul
// CHECK-NOT: moe.expert_mlp
func.func @not_hidden_size(%rows: tensor<?x12xf32>, %offsets: tensor<5xi64>,
                           %w13: tensor<4x16x12xf32>, %w2: tensor<4x10x8xf32>) -> tensor<?x10xf32> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x12xf32>, tensor<4x16x12xf32>, tensor<5xi64>) -> tensor<?x16xf32>
  %h = moe.swiglu silu %gu : (tensor<?x16xf32>) -> tensor<?x8xf32>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x8xf32>, tensor<4x10x8xf32>, tensor<5xi64>) -> tensor<?x10xf32>
  return %y : tensor<?x10xf32>
}

// -----

// An FP8 intermediate (--moe-quantize scope=weights+activations): the
// swiglu -> quantize -> dequantize pair becomes the fused op's intermediate
// encoding; rows and weights read through moe.dequantize stay operands.
// CHECK-LABEL: func @fp8_intermediate
// CHECK-SAME: (%[[RQ:[a-z0-9]+]]: tensor<?x64xf8E4M3FN>, %[[RS:[a-z0-9]+]]: tensor<?x2xf8E8M0FNU>, %[[OFF:[a-z0-9]+]]: tensor<5xi64>, %[[W13Q:[a-z0-9]+]]: tensor<4x128x64xf8E4M3FN>, %[[W13S:[a-z0-9]+]]: tensor<4x128x2xf8E8M0FNU>, %[[W2Q:[a-z0-9]+]]: tensor<4x64x64xf8E4M3FN>, %[[W2S:[a-z0-9]+]]: tensor<4x64x2xf8E8M0FNU>)
// CHECK: %[[ROWS:.*]] = moe.dequantize %[[RQ]], %[[RS]] from <f8E4M3FN, [1, 32], f8E8M0FNU>
// CHECK: %[[W13:.*]] = moe.dequantize %[[W13Q]], %[[W13S]] from <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
// CHECK: %[[W2:.*]] = moe.dequantize %[[W2Q]], %[[W2S]] from <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
// CHECK-NOT: moe.quantize
// CHECK: %[[Y:.*]] = moe.expert_mlp silu %[[ROWS]], %[[OFF]], %[[W13]], %[[W2]] intermediate <f8E4M3FN, [1, 32], f8E8M0FNU> : (tensor<?x64xf32>, tensor<5xi64>, tensor<4x128x64xf32>, tensor<4x64x64xf32>) -> tensor<?x64xf32>
// CHECK-NOT: moe.grouped_matmul
// CHECK-NOT: moe.quantize
// CHECK: return %[[Y]]

// Expanding gives back the pair, between the swiglu and the down matmul.
// ROUND-LABEL: func @fp8_intermediate
// ROUND: %[[ROWS:.*]] = moe.dequantize
// ROUND: %[[W13:.*]] = moe.dequantize
// ROUND: %[[W2:.*]] = moe.dequantize
// ROUND: %[[GU:.*]] = moe.grouped_matmul %[[ROWS]], %[[W13]], %{{.*}} :
// ROUND: %[[H:.*]] = moe.swiglu silu %[[GU]] : (tensor<?x128xf32>) -> tensor<?x64xf32>
// ROUND: %[[HQ:.*]], %[[HS:.*]] = moe.quantize %[[H]] to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x64xf32> -> tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU>
// ROUND: %[[HD:.*]] = moe.dequantize %[[HQ]], %[[HS]] from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU> -> tensor<?x64xf32>
// ROUND: %[[Y:.*]] = moe.grouped_matmul %[[HD]], %[[W2]], %{{.*}} :
// ROUND: return %[[Y]]
func.func @fp8_intermediate(%rq: tensor<?x64xf8E4M3FN>, %rs: tensor<?x2xf8E8M0FNU>, %offsets: tensor<5xi64>,
                            %w13q: tensor<4x128x64xf8E4M3FN>, %w13s: tensor<4x128x2xf8E8M0FNU>,
                            %w2q: tensor<4x64x64xf8E4M3FN>, %w2s: tensor<4x64x2xf8E8M0FNU>) -> tensor<?x64xf32> {
  %rows = moe.dequantize %rq, %rs from <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU> -> tensor<?x64xf32>
  %w13 = moe.dequantize %w13q, %w13s from <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
      : tensor<4x128x64xf8E4M3FN>, tensor<4x128x2xf8E8M0FNU> -> tensor<4x128x64xf32>
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x64xf32>, tensor<4x128x64xf32>, tensor<5xi64>) -> tensor<?x128xf32>
  %h = moe.swiglu silu %gu : (tensor<?x128xf32>) -> tensor<?x64xf32>
  %hq, %hs = moe.quantize %h to <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x64xf32> -> tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU>
  %hd = moe.dequantize %hq, %hs from <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU> -> tensor<?x64xf32>
  %w2 = moe.dequantize %w2q, %w2s from <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
      : tensor<4x64x64xf8E4M3FN>, tensor<4x64x2xf8E8M0FNU> -> tensor<4x64x64xf32>
  %y = moe.grouped_matmul %hd, %w2, %offsets
      : (tensor<?x64xf32>, tensor<4x64x64xf32>, tensor<5xi64>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// The scales of the quantized intermediate have another user: the pair must
// stay, so nothing is fused.
// CHECK-LABEL: func @intermediate_scales_used_twice
// CHECK: moe.swiglu
// CHECK: moe.quantize
// CHECK: moe.dequantize
// CHECK: moe.grouped_matmul
// CHECK-NOT: moe.expert_mlp
func.func @intermediate_scales_used_twice(%rows: tensor<?x64xf32>, %offsets: tensor<5xi64>,
                                          %w13: tensor<4x128x64xf32>, %w2: tensor<4x64x64xf32>)
    -> (tensor<?x64xf32>, tensor<?x2xf32>) {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x64xf32>, tensor<4x128x64xf32>, tensor<5xi64>) -> tensor<?x128xf32>
  %h = moe.swiglu silu %gu : (tensor<?x128xf32>) -> tensor<?x64xf32>
  %hq, %hs = moe.quantize %h to <f8E4M3FN, [1, 32], f32>
      : tensor<?x64xf32> -> tensor<?x64xf8E4M3FN>, tensor<?x2xf32>
  %hd = moe.dequantize %hq, %hs from <f8E4M3FN, [1, 32], f32>
      : tensor<?x64xf8E4M3FN>, tensor<?x2xf32> -> tensor<?x64xf32>
  %y = moe.grouped_matmul %hd, %w2, %offsets
      : (tensor<?x64xf32>, tensor<4x64x64xf32>, tensor<5xi64>) -> tensor<?x64xf32>
  return %y, %hs : tensor<?x64xf32>, tensor<?x2xf32>
}

// -----

// A pair whose block is written [32] instead of [1, 32]: expert_mlp's
// intermediate takes [1, B] blocks only, so the chain stays.
// CHECK-LABEL: func @intermediate_rank1_block
// CHECK: moe.quantize %{{.*}} to <f8E4M3FN, [32], f32>
// CHECK: moe.grouped_matmul
// CHECK-NOT: moe.expert_mlp
func.func @intermediate_rank1_block(%rows: tensor<?x64xf32>, %offsets: tensor<5xi64>,
                                    %w13: tensor<4x128x64xf32>, %w2: tensor<4x64x64xf32>) -> tensor<?x64xf32> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x64xf32>, tensor<4x128x64xf32>, tensor<5xi64>) -> tensor<?x128xf32>
  %h = moe.swiglu silu %gu : (tensor<?x128xf32>) -> tensor<?x64xf32>
  %hq, %hs = moe.quantize %h to <f8E4M3FN, [32], f32>
      : tensor<?x64xf32> -> tensor<?x64xf8E4M3FN>, tensor<?x2xf32>
  %hd = moe.dequantize %hq, %hs from <f8E4M3FN, [32], f32>
      : tensor<?x64xf8E4M3FN>, tensor<?x2xf32> -> tensor<?x64xf32>
  %y = moe.grouped_matmul %hd, %w2, %offsets
      : (tensor<?x64xf32>, tensor<4x64x64xf32>, tensor<5xi64>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// A swiglu scale before a quantized intermediate: quantize(s * h) is not
// s * quantize(h), so the scale cannot move to the down matmul's epilogue.
// CHECK-LABEL: func @swiglu_scale_before_quantize
// CHECK: moe.swiglu silu %{{.*}} scale
// CHECK: moe.quantize
// CHECK: moe.grouped_matmul
// CHECK-NOT: moe.expert_mlp
func.func @swiglu_scale_before_quantize(%rows: tensor<?x64xf32>, %offsets: tensor<5xi64>,
                                        %w13: tensor<4x128x64xf32>, %w2: tensor<4x64x64xf32>,
                                        %s: tensor<?xf32>) -> tensor<?x64xf32> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x64xf32>, tensor<4x128x64xf32>, tensor<5xi64>) -> tensor<?x128xf32>
  %h = moe.swiglu silu %gu scale %s : (tensor<?x128xf32>, tensor<?xf32>) -> tensor<?x64xf32>
  %hq, %hs = moe.quantize %h to <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x64xf32> -> tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU>
  %hd = moe.dequantize %hq, %hs from <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU> -> tensor<?x64xf32>
  %y = moe.grouped_matmul %hd, %w2, %offsets
      : (tensor<?x64xf32>, tensor<4x64x64xf32>, tensor<5xi64>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// The routed experts' chain fuses whatever the combine adds; the shared
// expert and the addend stay as they are.
// CHECK-LABEL: func @beside_shared_expert
// CHECK: %[[S:.*]] = moe.shared_mlp silu
// CHECK: %[[H:.*]] = moe.expert_mlp silu
// CHECK: moe.unpermute %[[H]], %{{.*}} weights %{{.*}} shared %[[S]]
// ROUND-LABEL: func @beside_shared_expert
// ROUND: moe.shared_mlp silu
// ROUND: moe.unpermute {{.*}} shared
func.func @beside_shared_expert(%x: tensor<?x64xf32>, %rows: tensor<?x64xf32>, %offsets: tensor<5xi64>,
                                %slots: tensor<?x2xi64>, %w: tensor<?x2xf32>,
                                %w13: tensor<4x128x64xf32>, %w2: tensor<4x64x64xf32>,
                                %sw13: tensor<96x64xf32>, %sw2: tensor<64x48xf32>) -> tensor<?x64xf32> {
  %s = moe.shared_mlp silu %x, %sw13, %sw2
      : (tensor<?x64xf32>, tensor<96x64xf32>, tensor<64x48xf32>) -> tensor<?x64xf32>
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x64xf32>, tensor<4x128x64xf32>, tensor<5xi64>) -> tensor<?x128xf32>
  %h = moe.swiglu silu %gu : (tensor<?x128xf32>) -> tensor<?x64xf32>
  %o = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x64xf32>, tensor<4x64x64xf32>, tensor<5xi64>) -> tensor<?x64xf32>
  %y = moe.unpermute %o, %slots weights %w shared %s
      : (tensor<?x64xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Weights that lie [E, K, N] (kn_weights): moe.expert_mlp's are [E, N, K],
// so the chain stays as it is.
// CHECK-LABEL: func @kn_weights
// CHECK-NOT: moe.expert_mlp
// CHECK: moe.grouped_matmul {{.*}} kn_weights
// CHECK: moe.swiglu
// CHECK: moe.grouped_matmul {{.*}} kn_weights
func.func @kn_weights(%rows: tensor<?x64xbf16>, %w13: tensor<8x64x256xbf16>,
                      %w2: tensor<8x128x64xbf16>, %offsets: tensor<9xi64>) -> tensor<?x64xbf16> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets kn_weights
      : (tensor<?x64xbf16>, tensor<8x64x256xbf16>, tensor<9xi64>) -> tensor<?x256xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x256xbf16>) -> tensor<?x128xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets kn_weights
      : (tensor<?x128xbf16>, tensor<8x128x64xbf16>, tensor<9xi64>) -> tensor<?x64xbf16>
  return %o : tensor<?x64xbf16>
}

// -----

// Gate and up interleaved: moe.expert_mlp's epilogue reads them N / 2
// columns apart, so the chain stays as it is.
// CHECK-LABEL: func @interleaved
// CHECK-NOT: moe.expert_mlp
// CHECK: moe.swiglu silu %{{.*}} interleaved
func.func @interleaved(%rows: tensor<?x64xbf16>, %w13: tensor<8x256x64xbf16>,
                       %w2: tensor<8x64x128xbf16>, %offsets: tensor<9xi64>) -> tensor<?x64xbf16> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x64xbf16>, tensor<8x256x64xbf16>, tensor<9xi64>) -> tensor<?x256xbf16>
  %h = moe.swiglu silu %gu interleaved : (tensor<?x256xbf16>) -> tensor<?x128xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x128xbf16>, tensor<8x64x128xbf16>, tensor<9xi64>) -> tensor<?x64xbf16>
  return %o : tensor<?x64xbf16>
}

// -----

// In a program (moe.program: one GPU entry whose steps are one entry each)
// the chain stays unfused, and an expert MLP written fused is expanded.
// CHECK-LABEL: func @program_chain
// CHECK-NOT: moe.expert_mlp
// CHECK: moe.swiglu silu
// CHECK-LABEL: func @program_fused
// CHECK-NOT: moe.expert_mlp
// CHECK: moe.grouped_matmul
// CHECK: moe.swiglu silu
// CHECK: moe.grouped_matmul
func.func @program_chain(%rows: tensor<?x64xbf16>, %w13: tensor<8x256x64xbf16>,
                         %w2: tensor<8x64x128xbf16>, %offsets: tensor<9xi64>) -> tensor<?x64xbf16>
    attributes {moe.program} {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x64xbf16>, tensor<8x256x64xbf16>, tensor<9xi64>) -> tensor<?x256xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x256xbf16>) -> tensor<?x128xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x128xbf16>, tensor<8x64x128xbf16>, tensor<9xi64>) -> tensor<?x64xbf16>
  return %o : tensor<?x64xbf16>
}
func.func @program_fused(%rows: tensor<?x64xbf16>, %w13: tensor<8x256x64xbf16>,
                         %w2: tensor<8x64x128xbf16>, %offsets: tensor<9xi64>) -> tensor<?x64xbf16>
    attributes {moe.program} {
  %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x64xbf16>, tensor<9xi64>, tensor<8x256x64xbf16>, tensor<8x64x128xbf16>) -> tensor<?x64xbf16>
  return %o : tensor<?x64xbf16>
}
