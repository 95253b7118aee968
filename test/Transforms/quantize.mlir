// --moe-quantize, one policy per prefix: the rewritten signature, the
// prepack function, the quantize/dequantize pairs. Running the pass twice
// changes nothing (operands already read through the policy's encoding are
// left alone).
// RUN: moe-opt %s -split-input-file --moe-quantize | FileCheck %s --check-prefix=FP8W
// RUN: moe-opt %s -split-input-file --moe-quantize --moe-quantize | FileCheck %s --check-prefix=FP8W
// RUN: moe-opt %s -split-input-file --moe-quantize="format=fp8-block scope=weights+activations" | FileCheck %s --check-prefix=FP8WA
// RUN: moe-opt %s -split-input-file --moe-quantize="format=fp8-block scope=weights+activations" --moe-quantize="format=fp8-block scope=weights+activations" | FileCheck %s --check-prefix=FP8WA
// RUN: moe-opt %s -split-input-file --moe-quantize="format=mxfp8 scope=weights+activations" | FileCheck %s --check-prefix=MXA
// RUN: moe-opt %s -split-input-file --moe-quantize="format=mxfp8 element=e5m2 scope=weights" | FileCheck %s --check-prefix=MX52

// The unfused expert MLP of a bf16 layer. Each weight argument becomes FP8
// values and scales in its place; the bias stays. With activations, both
// GEMMs' rows get a pair, the down projection's being the swiglu output.
// FP8W-LABEL: func.func @chain(
// FP8W-SAME: %[[ROWS:[a-z0-9_]+]]: tensor<?x128xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<5xi64>, %[[W13Q:[a-z0-9_]+]]: tensor<4x256x128xf8E4M3FN>, %[[W13S:[a-z0-9_]+]]: tensor<4x2x1xf32>, %[[W2Q:[a-z0-9_]+]]: tensor<4x128x128xf8E4M3FN>, %[[W2S:[a-z0-9_]+]]: tensor<4x1x1xf32>, %[[B2:[a-z0-9_]+]]: tensor<4x128xf32>) -> tensor<?x128xbf16>
// FP8W-NOT: moe.quantize
// FP8W: %[[W13:[a-z0-9_]+]] = moe.dequantize %[[W13Q]], %[[W13S]] from <f8E4M3FN, [1, 128, 128], f32> : tensor<4x256x128xf8E4M3FN>, tensor<4x2x1xf32> -> tensor<4x256x128xbf16>
// FP8W: %[[GU:[a-z0-9_]+]] = moe.grouped_matmul %[[ROWS]], %[[W13]], %[[OFF]] :
// FP8W: %[[H:[a-z0-9_]+]] = moe.swiglu silu %[[GU]]
// FP8W-NOT: moe.quantize
// FP8W: %[[W2:[a-z0-9_]+]] = moe.dequantize %[[W2Q]], %[[W2S]] from <f8E4M3FN, [1, 128, 128], f32> : tensor<4x128x128xf8E4M3FN>, tensor<4x1x1xf32> -> tensor<4x128x128xbf16>
// FP8W: %[[Y:[a-z0-9_]+]] = moe.grouped_matmul %[[H]], %[[W2]], %[[OFF]] bias %[[B2]] :
// FP8W: return %[[Y]]
// FP8W-LABEL: func.func @chain_prepack(
// FP8W-SAME: %[[W13:[a-z0-9_]+]]: tensor<4x256x128xbf16>, %[[W2:[a-z0-9_]+]]: tensor<4x128x128xbf16>) -> (tensor<4x256x128xf8E4M3FN>, tensor<4x2x1xf32>, tensor<4x128x128xf8E4M3FN>, tensor<4x1x1xf32>) attributes {moe.prepack_of = @chain}
// FP8W: %[[Q13:[a-z0-9_]+]], %[[S13:[a-z0-9_]+]] = moe.quantize %[[W13]] to <f8E4M3FN, [1, 128, 128], f32> : tensor<4x256x128xbf16> -> tensor<4x256x128xf8E4M3FN>, tensor<4x2x1xf32>
// FP8W: %[[Q2:[a-z0-9_]+]], %[[S2:[a-z0-9_]+]] = moe.quantize %[[W2]] to <f8E4M3FN, [1, 128, 128], f32> : tensor<4x128x128xbf16> -> tensor<4x128x128xf8E4M3FN>, tensor<4x1x1xf32>
// FP8W: return %[[Q13]], %[[S13]], %[[Q2]], %[[S2]] :
// FP8W-LABEL: func.func @caller(
// FP8W-SAME: %[[ROWS:[a-z0-9_]+]]: tensor<?x128xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<5xi64>, %[[W13:[a-z0-9_]+]]: tensor<4x256x128xbf16>, %[[W2:[a-z0-9_]+]]: tensor<4x128x128xbf16>, %[[B2:[a-z0-9_]+]]: tensor<4x128xf32>)
// FP8W: %[[P:[a-z0-9_]+]]:4 = call @chain_prepack(%[[W13]], %[[W2]])
// FP8W: %[[Y:[a-z0-9_]+]] = call @chain(%[[ROWS]], %[[OFF]], %[[P]]#0, %[[P]]#1, %[[P]]#2, %[[P]]#3, %[[B2]])
// FP8W: return %[[Y]]

// FP8WA-LABEL: func.func @chain(
// FP8WA-SAME: %[[ROWS:[a-z0-9_]+]]: tensor<?x128xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<5xi64>, %[[W13Q:[a-z0-9_]+]]: tensor<4x256x128xf8E4M3FN>, %[[W13S:[a-z0-9_]+]]: tensor<4x2x1xf32>, %[[W2Q:[a-z0-9_]+]]: tensor<4x128x128xf8E4M3FN>, %[[W2S:[a-z0-9_]+]]: tensor<4x1x1xf32>, %[[B2:[a-z0-9_]+]]: tensor<4x128xf32>) -> tensor<?x128xbf16>
// FP8WA: %[[RQ:[a-z0-9_]+]], %[[RS:[a-z0-9_]+]] = moe.quantize %[[ROWS]] to <f8E4M3FN, [1, 128], f32> : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>, tensor<?x1xf32>
// FP8WA: %[[R:[a-z0-9_]+]] = moe.dequantize %[[RQ]], %[[RS]] from <f8E4M3FN, [1, 128], f32> : tensor<?x128xf8E4M3FN>, tensor<?x1xf32> -> tensor<?x128xbf16>
// FP8WA: %[[W13:[a-z0-9_]+]] = moe.dequantize %[[W13Q]], %[[W13S]] from <f8E4M3FN, [1, 128, 128], f32> : tensor<4x256x128xf8E4M3FN>, tensor<4x2x1xf32> -> tensor<4x256x128xbf16>
// FP8WA: %[[GU:[a-z0-9_]+]] = moe.grouped_matmul %[[R]], %[[W13]], %[[OFF]] :
// FP8WA: %[[H:[a-z0-9_]+]] = moe.swiglu silu %[[GU]]
// FP8WA: %[[HQ:[a-z0-9_]+]], %[[HS:[a-z0-9_]+]] = moe.quantize %[[H]] to <f8E4M3FN, [1, 128], f32> : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>, tensor<?x1xf32>
// FP8WA: %[[HD:[a-z0-9_]+]] = moe.dequantize %[[HQ]], %[[HS]] from <f8E4M3FN, [1, 128], f32>
// FP8WA: %[[W2:[a-z0-9_]+]] = moe.dequantize %[[W2Q]], %[[W2S]] from <f8E4M3FN, [1, 128, 128], f32> : tensor<4x128x128xf8E4M3FN>, tensor<4x1x1xf32> -> tensor<4x128x128xbf16>
// FP8WA: %[[Y:[a-z0-9_]+]] = moe.grouped_matmul %[[HD]], %[[W2]], %[[OFF]] bias %[[B2]] :
// FP8WA: return %[[Y]]
// FP8WA-LABEL: func.func @chain_prepack(
// FP8WA-SAME: %[[W13:[a-z0-9_]+]]: tensor<4x256x128xbf16>, %[[W2:[a-z0-9_]+]]: tensor<4x128x128xbf16>) -> (tensor<4x256x128xf8E4M3FN>, tensor<4x2x1xf32>, tensor<4x128x128xf8E4M3FN>, tensor<4x1x1xf32>) attributes {moe.prepack_of = @chain}
// FP8WA: %[[Q13:[a-z0-9_]+]], %[[S13:[a-z0-9_]+]] = moe.quantize %[[W13]] to <f8E4M3FN, [1, 128, 128], f32> : tensor<4x256x128xbf16> -> tensor<4x256x128xf8E4M3FN>, tensor<4x2x1xf32>
// FP8WA: %[[Q2:[a-z0-9_]+]], %[[S2:[a-z0-9_]+]] = moe.quantize %[[W2]] to <f8E4M3FN, [1, 128, 128], f32> : tensor<4x128x128xbf16> -> tensor<4x128x128xf8E4M3FN>, tensor<4x1x1xf32>
// FP8WA: return %[[Q13]], %[[S13]], %[[Q2]], %[[S2]] :
// FP8WA-LABEL: func.func @caller(
// FP8WA-SAME: %[[ROWS:[a-z0-9_]+]]: tensor<?x128xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<5xi64>, %[[W13:[a-z0-9_]+]]: tensor<4x256x128xbf16>, %[[W2:[a-z0-9_]+]]: tensor<4x128x128xbf16>, %[[B2:[a-z0-9_]+]]: tensor<4x128xf32>)
// FP8WA: %[[P:[a-z0-9_]+]]:4 = call @chain_prepack(%[[W13]], %[[W2]])
// FP8WA: %[[Y:[a-z0-9_]+]] = call @chain(%[[ROWS]], %[[OFF]], %[[P]]#0, %[[P]]#1, %[[P]]#2, %[[P]]#3, %[[B2]])
// FP8WA: return %[[Y]]

// MXA-LABEL: func.func @chain(
// MXA-SAME: %[[ROWS:[a-z0-9_]+]]: tensor<?x128xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<5xi64>, %[[W13Q:[a-z0-9_]+]]: tensor<4x256x128xf8E4M3FN>, %[[W13S:[a-z0-9_]+]]: tensor<4x256x4xf8E8M0FNU>, %[[W2Q:[a-z0-9_]+]]: tensor<4x128x128xf8E4M3FN>, %[[W2S:[a-z0-9_]+]]: tensor<4x128x4xf8E8M0FNU>, %[[B2:[a-z0-9_]+]]: tensor<4x128xf32>) -> tensor<?x128xbf16>
// MXA: %[[RQ:[a-z0-9_]+]], %[[RS:[a-z0-9_]+]] = moe.quantize %[[ROWS]] to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>, tensor<?x4xf8E8M0FNU>
// MXA: %[[R:[a-z0-9_]+]] = moe.dequantize %[[RQ]], %[[RS]] from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x128xf8E4M3FN>, tensor<?x4xf8E8M0FNU> -> tensor<?x128xbf16>
// MXA: %[[W13:[a-z0-9_]+]] = moe.dequantize %[[W13Q]], %[[W13S]] from <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : tensor<4x256x128xf8E4M3FN>, tensor<4x256x4xf8E8M0FNU> -> tensor<4x256x128xbf16>
// MXA: %[[GU:[a-z0-9_]+]] = moe.grouped_matmul %[[R]], %[[W13]], %[[OFF]] :
// MXA: %[[H:[a-z0-9_]+]] = moe.swiglu silu %[[GU]]
// MXA: %[[HQ:[a-z0-9_]+]], %[[HS:[a-z0-9_]+]] = moe.quantize %[[H]] to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>, tensor<?x4xf8E8M0FNU>
// MXA: %[[HD:[a-z0-9_]+]] = moe.dequantize %[[HQ]], %[[HS]] from <f8E4M3FN, [1, 32], f8E8M0FNU>
// MXA: %[[W2:[a-z0-9_]+]] = moe.dequantize %[[W2Q]], %[[W2S]] from <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : tensor<4x128x128xf8E4M3FN>, tensor<4x128x4xf8E8M0FNU> -> tensor<4x128x128xbf16>
// MXA: %[[Y:[a-z0-9_]+]] = moe.grouped_matmul %[[HD]], %[[W2]], %[[OFF]] bias %[[B2]] :
// MXA: return %[[Y]]
// MXA-LABEL: func.func @chain_prepack(
// MXA-SAME: %[[W13:[a-z0-9_]+]]: tensor<4x256x128xbf16>, %[[W2:[a-z0-9_]+]]: tensor<4x128x128xbf16>) -> (tensor<4x256x128xf8E4M3FN>, tensor<4x256x4xf8E8M0FNU>, tensor<4x128x128xf8E4M3FN>, tensor<4x128x4xf8E8M0FNU>) attributes {moe.prepack_of = @chain}
// MXA: %[[Q13:[a-z0-9_]+]], %[[S13:[a-z0-9_]+]] = moe.quantize %[[W13]] to <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : tensor<4x256x128xbf16> -> tensor<4x256x128xf8E4M3FN>, tensor<4x256x4xf8E8M0FNU>
// MXA: %[[Q2:[a-z0-9_]+]], %[[S2:[a-z0-9_]+]] = moe.quantize %[[W2]] to <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : tensor<4x128x128xbf16> -> tensor<4x128x128xf8E4M3FN>, tensor<4x128x4xf8E8M0FNU>
// MXA: return %[[Q13]], %[[S13]], %[[Q2]], %[[S2]] :
// MXA-LABEL: func.func @caller(
// MXA-SAME: %[[ROWS:[a-z0-9_]+]]: tensor<?x128xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<5xi64>, %[[W13:[a-z0-9_]+]]: tensor<4x256x128xbf16>, %[[W2:[a-z0-9_]+]]: tensor<4x128x128xbf16>, %[[B2:[a-z0-9_]+]]: tensor<4x128xf32>)
// MXA: %[[P:[a-z0-9_]+]]:4 = call @chain_prepack(%[[W13]], %[[W2]])
// MXA: %[[Y:[a-z0-9_]+]] = call @chain(%[[ROWS]], %[[OFF]], %[[P]]#0, %[[P]]#1, %[[P]]#2, %[[P]]#3, %[[B2]])
// MXA: return %[[Y]]

// MX52-LABEL: func.func @chain(
// MX52-SAME: %[[ROWS:[a-z0-9_]+]]: tensor<?x128xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<5xi64>, %[[W13Q:[a-z0-9_]+]]: tensor<4x256x128xf8E5M2>, %[[W13S:[a-z0-9_]+]]: tensor<4x256x4xf8E8M0FNU>, %[[W2Q:[a-z0-9_]+]]: tensor<4x128x128xf8E5M2>, %[[W2S:[a-z0-9_]+]]: tensor<4x128x4xf8E8M0FNU>, %[[B2:[a-z0-9_]+]]: tensor<4x128xf32>) -> tensor<?x128xbf16>
// MX52-NOT: moe.quantize
// MX52: %[[W13:[a-z0-9_]+]] = moe.dequantize %[[W13Q]], %[[W13S]] from <f8E5M2, [1, 1, 32], f8E8M0FNU> : tensor<4x256x128xf8E5M2>, tensor<4x256x4xf8E8M0FNU> -> tensor<4x256x128xbf16>
// MX52: %[[GU:[a-z0-9_]+]] = moe.grouped_matmul %[[ROWS]], %[[W13]], %[[OFF]] :
// MX52: %[[H:[a-z0-9_]+]] = moe.swiglu silu %[[GU]]
// MX52-NOT: moe.quantize
// MX52: %[[W2:[a-z0-9_]+]] = moe.dequantize %[[W2Q]], %[[W2S]] from <f8E5M2, [1, 1, 32], f8E8M0FNU> : tensor<4x128x128xf8E5M2>, tensor<4x128x4xf8E8M0FNU> -> tensor<4x128x128xbf16>
// MX52: %[[Y:[a-z0-9_]+]] = moe.grouped_matmul %[[H]], %[[W2]], %[[OFF]] bias %[[B2]] :
// MX52: return %[[Y]]
// MX52-LABEL: func.func @chain_prepack(
// MX52-SAME: %[[W13:[a-z0-9_]+]]: tensor<4x256x128xbf16>, %[[W2:[a-z0-9_]+]]: tensor<4x128x128xbf16>) -> (tensor<4x256x128xf8E5M2>, tensor<4x256x4xf8E8M0FNU>, tensor<4x128x128xf8E5M2>, tensor<4x128x4xf8E8M0FNU>) attributes {moe.prepack_of = @chain}
// MX52: %[[Q13:[a-z0-9_]+]], %[[S13:[a-z0-9_]+]] = moe.quantize %[[W13]] to <f8E5M2, [1, 1, 32], f8E8M0FNU> : tensor<4x256x128xbf16> -> tensor<4x256x128xf8E5M2>, tensor<4x256x4xf8E8M0FNU>
// MX52: %[[Q2:[a-z0-9_]+]], %[[S2:[a-z0-9_]+]] = moe.quantize %[[W2]] to <f8E5M2, [1, 1, 32], f8E8M0FNU> : tensor<4x128x128xbf16> -> tensor<4x128x128xf8E5M2>, tensor<4x128x4xf8E8M0FNU>
// MX52: return %[[Q13]], %[[S13]], %[[Q2]], %[[S2]] :
// MX52-LABEL: func.func @caller(
// MX52-SAME: %[[ROWS:[a-z0-9_]+]]: tensor<?x128xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<5xi64>, %[[W13:[a-z0-9_]+]]: tensor<4x256x128xbf16>, %[[W2:[a-z0-9_]+]]: tensor<4x128x128xbf16>, %[[B2:[a-z0-9_]+]]: tensor<4x128xf32>)
// MX52: %[[P:[a-z0-9_]+]]:4 = call @chain_prepack(%[[W13]], %[[W2]])
// MX52: %[[Y:[a-z0-9_]+]] = call @chain(%[[ROWS]], %[[OFF]], %[[P]]#0, %[[P]]#1, %[[P]]#2, %[[P]]#3, %[[B2]])
// MX52: return %[[Y]]
func.func @chain(%rows: tensor<?x128xbf16>, %offsets: tensor<5xi64>,
                 %w13: tensor<4x256x128xbf16>, %w2: tensor<4x128x128xbf16>,
                 %b2: tensor<4x128xf32>) -> tensor<?x128xbf16> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x128xbf16>, tensor<4x256x128xbf16>, tensor<5xi64>) -> tensor<?x256xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x256xbf16>) -> tensor<?x128xbf16>
  %y = moe.grouped_matmul %h, %w2, %offsets bias %b2
      : (tensor<?x128xbf16>, tensor<4x128x128xbf16>, tensor<5xi64>, tensor<4x128xf32>) -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// A caller in the module quantizes the weights through the prepack function
// and passes the FP8 values and scales.
func.func @caller(%rows: tensor<?x128xbf16>, %offsets: tensor<5xi64>,
                  %w13: tensor<4x256x128xbf16>, %w2: tensor<4x128x128xbf16>,
                  %b2: tensor<4x128xf32>) -> tensor<?x128xbf16> {
  %y = func.call @chain(%rows, %offsets, %w13, %w2, %b2)
      : (tensor<?x128xbf16>, tensor<5xi64>, tensor<4x256x128xbf16>, tensor<4x128x128xbf16>, tensor<4x128xf32>) -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// -----

// A whole f32 layer: its body reads the weight arguments, so the dequantize
// ops go inside it, right before the fused MLP; with activations the MLP's
// rows get a pair and its activation output the intermediate encoding.
// FP8W-LABEL: func.func @layer(
// FP8W-SAME: %[[X:[a-z0-9_]+]]: tensor<?x128xf32>, %[[LOGITS:[a-z0-9_]+]]: tensor<?x4xf32>, %[[W13Q:[a-z0-9_]+]]: tensor<4x256x128xf8E4M3FN>, %[[W13S:[a-z0-9_]+]]: tensor<4x2x1xf32>, %[[W2Q:[a-z0-9_]+]]: tensor<4x128x128xf8E4M3FN>, %[[W2S:[a-z0-9_]+]]: tensor<4x1x1xf32>) -> tensor<?x128xf32>
// FP8W: moe.layer : tensor<?x128xf32> {
// FP8W: moe.route softmax_topk %[[LOGITS]]
// FP8W: %[[ROWS:[a-z0-9_]+]], %[[OFF:[a-z0-9_]+]], %{{.*}} = moe.permute %[[X]]
// FP8W: %[[W13:[a-z0-9_]+]] = moe.dequantize %[[W13Q]], %[[W13S]] from <f8E4M3FN, [1, 128, 128], f32> : {{.*}} -> tensor<4x256x128xf32>
// FP8W: %[[W2:[a-z0-9_]+]] = moe.dequantize %[[W2Q]], %[[W2S]] from <f8E4M3FN, [1, 128, 128], f32> : {{.*}} -> tensor<4x128x128xf32>
// FP8W: %[[O:[a-z0-9_]+]] = moe.expert_mlp silu %[[ROWS]], %[[OFF]], %[[W13]], %[[W2]] : (
// FP8W: moe.unpermute %[[O]]
// FP8W: moe.yield
// FP8W-LABEL: func.func @layer_prepack(
// FP8W-SAME: %[[W13:[a-z0-9_]+]]: tensor<4x256x128xf32>, %[[W2:[a-z0-9_]+]]: tensor<4x128x128xf32>) -> (tensor<4x256x128xf8E4M3FN>, tensor<4x2x1xf32>, tensor<4x128x128xf8E4M3FN>, tensor<4x1x1xf32>) attributes {moe.prepack_of = @layer}
// FP8W: moe.quantize %[[W13]] to <f8E4M3FN, [1, 128, 128], f32>
// FP8W: moe.quantize %[[W2]] to <f8E4M3FN, [1, 128, 128], f32>

// FP8WA-LABEL: func.func @layer(
// FP8WA-SAME: %[[X:[a-z0-9_]+]]: tensor<?x128xf32>, %[[LOGITS:[a-z0-9_]+]]: tensor<?x4xf32>, %[[W13Q:[a-z0-9_]+]]: tensor<4x256x128xf8E4M3FN>, %[[W13S:[a-z0-9_]+]]: tensor<4x2x1xf32>, %[[W2Q:[a-z0-9_]+]]: tensor<4x128x128xf8E4M3FN>, %[[W2S:[a-z0-9_]+]]: tensor<4x1x1xf32>) -> tensor<?x128xf32>
// FP8WA: moe.layer : tensor<?x128xf32> {
// FP8WA: moe.route softmax_topk %[[LOGITS]]
// FP8WA: %[[ROWS:[a-z0-9_]+]], %[[OFF:[a-z0-9_]+]], %{{.*}} = moe.permute %[[X]]
// FP8WA: %[[RQ:[a-z0-9_]+]], %[[RS:[a-z0-9_]+]] = moe.quantize %[[ROWS]] to <f8E4M3FN, [1, 128], f32> : tensor<?x128xf32> -> tensor<?x128xf8E4M3FN>, tensor<?x1xf32>
// FP8WA: %[[R:[a-z0-9_]+]] = moe.dequantize %[[RQ]], %[[RS]] from <f8E4M3FN, [1, 128], f32>
// FP8WA: %[[W13:[a-z0-9_]+]] = moe.dequantize %[[W13Q]], %[[W13S]] from <f8E4M3FN, [1, 128, 128], f32> : {{.*}} -> tensor<4x256x128xf32>
// FP8WA: %[[W2:[a-z0-9_]+]] = moe.dequantize %[[W2Q]], %[[W2S]] from <f8E4M3FN, [1, 128, 128], f32> : {{.*}} -> tensor<4x128x128xf32>
// FP8WA: %[[O:[a-z0-9_]+]] = moe.expert_mlp silu %[[R]], %[[OFF]], %[[W13]], %[[W2]] intermediate <f8E4M3FN, [1, 128], f32> : (
// FP8WA: moe.unpermute %[[O]]
// FP8WA: moe.yield
// FP8WA-LABEL: func.func @layer_prepack(
// FP8WA-SAME: %[[W13:[a-z0-9_]+]]: tensor<4x256x128xf32>, %[[W2:[a-z0-9_]+]]: tensor<4x128x128xf32>) -> (tensor<4x256x128xf8E4M3FN>, tensor<4x2x1xf32>, tensor<4x128x128xf8E4M3FN>, tensor<4x1x1xf32>) attributes {moe.prepack_of = @layer}
// FP8WA: moe.quantize %[[W13]] to <f8E4M3FN, [1, 128, 128], f32>
// FP8WA: moe.quantize %[[W2]] to <f8E4M3FN, [1, 128, 128], f32>

// MXA-LABEL: func.func @layer(
// MXA-SAME: %[[X:[a-z0-9_]+]]: tensor<?x128xf32>, %[[LOGITS:[a-z0-9_]+]]: tensor<?x4xf32>, %[[W13Q:[a-z0-9_]+]]: tensor<4x256x128xf8E4M3FN>, %[[W13S:[a-z0-9_]+]]: tensor<4x256x4xf8E8M0FNU>, %[[W2Q:[a-z0-9_]+]]: tensor<4x128x128xf8E4M3FN>, %[[W2S:[a-z0-9_]+]]: tensor<4x128x4xf8E8M0FNU>) -> tensor<?x128xf32>
// MXA: moe.layer : tensor<?x128xf32> {
// MXA: moe.route softmax_topk %[[LOGITS]]
// MXA: %[[ROWS:[a-z0-9_]+]], %[[OFF:[a-z0-9_]+]], %{{.*}} = moe.permute %[[X]]
// MXA: %[[RQ:[a-z0-9_]+]], %[[RS:[a-z0-9_]+]] = moe.quantize %[[ROWS]] to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x128xf32> -> tensor<?x128xf8E4M3FN>, tensor<?x4xf8E8M0FNU>
// MXA: %[[R:[a-z0-9_]+]] = moe.dequantize %[[RQ]], %[[RS]] from <f8E4M3FN, [1, 32], f8E8M0FNU>
// MXA: %[[W13:[a-z0-9_]+]] = moe.dequantize %[[W13Q]], %[[W13S]] from <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : {{.*}} -> tensor<4x256x128xf32>
// MXA: %[[W2:[a-z0-9_]+]] = moe.dequantize %[[W2Q]], %[[W2S]] from <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : {{.*}} -> tensor<4x128x128xf32>
// MXA: %[[O:[a-z0-9_]+]] = moe.expert_mlp silu %[[R]], %[[OFF]], %[[W13]], %[[W2]] intermediate <f8E4M3FN, [1, 32], f8E8M0FNU> : (
// MXA: moe.unpermute %[[O]]
// MXA: moe.yield
// MXA-LABEL: func.func @layer_prepack(
// MXA-SAME: %[[W13:[a-z0-9_]+]]: tensor<4x256x128xf32>, %[[W2:[a-z0-9_]+]]: tensor<4x128x128xf32>) -> (tensor<4x256x128xf8E4M3FN>, tensor<4x256x4xf8E8M0FNU>, tensor<4x128x128xf8E4M3FN>, tensor<4x128x4xf8E8M0FNU>) attributes {moe.prepack_of = @layer}
// MXA: moe.quantize %[[W13]] to <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
// MXA: moe.quantize %[[W2]] to <f8E4M3FN, [1, 1, 32], f8E8M0FNU>

// MX52-LABEL: func.func @layer(
// MX52-SAME: %[[X:[a-z0-9_]+]]: tensor<?x128xf32>, %[[LOGITS:[a-z0-9_]+]]: tensor<?x4xf32>, %[[W13Q:[a-z0-9_]+]]: tensor<4x256x128xf8E5M2>, %[[W13S:[a-z0-9_]+]]: tensor<4x256x4xf8E8M0FNU>, %[[W2Q:[a-z0-9_]+]]: tensor<4x128x128xf8E5M2>, %[[W2S:[a-z0-9_]+]]: tensor<4x128x4xf8E8M0FNU>) -> tensor<?x128xf32>
// MX52: moe.layer : tensor<?x128xf32> {
// MX52: moe.route softmax_topk %[[LOGITS]]
// MX52: %[[ROWS:[a-z0-9_]+]], %[[OFF:[a-z0-9_]+]], %{{.*}} = moe.permute %[[X]]
// MX52: %[[W13:[a-z0-9_]+]] = moe.dequantize %[[W13Q]], %[[W13S]] from <f8E5M2, [1, 1, 32], f8E8M0FNU> : {{.*}} -> tensor<4x256x128xf32>
// MX52: %[[W2:[a-z0-9_]+]] = moe.dequantize %[[W2Q]], %[[W2S]] from <f8E5M2, [1, 1, 32], f8E8M0FNU> : {{.*}} -> tensor<4x128x128xf32>
// MX52: %[[O:[a-z0-9_]+]] = moe.expert_mlp silu %[[ROWS]], %[[OFF]], %[[W13]], %[[W2]] : (
// MX52: moe.unpermute %[[O]]
// MX52: moe.yield
// MX52-LABEL: func.func @layer_prepack(
// MX52-SAME: %[[W13:[a-z0-9_]+]]: tensor<4x256x128xf32>, %[[W2:[a-z0-9_]+]]: tensor<4x128x128xf32>) -> (tensor<4x256x128xf8E5M2>, tensor<4x256x4xf8E8M0FNU>, tensor<4x128x128xf8E5M2>, tensor<4x128x4xf8E8M0FNU>) attributes {moe.prepack_of = @layer}
// MX52: moe.quantize %[[W13]] to <f8E5M2, [1, 1, 32], f8E8M0FNU>
// MX52: moe.quantize %[[W2]] to <f8E5M2, [1, 1, 32], f8E8M0FNU>
func.func @layer(%x: tensor<?x128xf32>, %logits: tensor<?x4xf32>,
                 %w13: tensor<4x256x128xf32>, %w2: tensor<4x128x128xf32>) -> tensor<?x128xf32> {
  %y = moe.layer : tensor<?x128xf32> {
    %ids, %w = moe.route softmax_topk %logits top 2 renormalize
        : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
    %rows, %offsets, %slots = moe.permute %x, %ids
        : (tensor<?x128xf32>, tensor<?x2xi32>) -> (tensor<?x128xf32>, tensor<5xi64>, tensor<?x2xi64>)
    %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2
        : (tensor<?x128xf32>, tensor<5xi64>, tensor<4x256x128xf32>, tensor<4x128x128xf32>) -> tensor<?x128xf32>
    %c = moe.unpermute %o, %slots weights %w
        : (tensor<?x128xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x128xf32>
    moe.yield %c : tensor<?x128xf32>
  }
  return %y : tensor<?x128xf32>
}

// -----

// Constant weights are quantized in place: one quantize after the constant,
// one dequantize per use; the signature stays and there is no prepack.
// FP8W-LABEL: func.func @constant_weights(
// FP8W-SAME: %[[ROWS:[a-z0-9_]+]]: tensor<?x128xf32>, %[[OFF:[a-z0-9_]+]]: tensor<3xi32>) -> tensor<?x128xf32>
// FP8W: %[[C:[a-z0-9_]+]] = arith.constant dense<5.000000e-01> : tensor<2x128x128xf32>
// FP8W: %[[Q:[a-z0-9_]+]], %[[S:[a-z0-9_]+]] = moe.quantize %[[C]] to <f8E4M3FN, [1, 128, 128], f32> : tensor<2x128x128xf32> -> tensor<2x128x128xf8E4M3FN>, tensor<2x1x1xf32>
// FP8W: %[[D0:[a-z0-9_]+]] = moe.dequantize %[[Q]], %[[S]] from <f8E4M3FN, [1, 128, 128], f32> : tensor<2x128x128xf8E4M3FN>, tensor<2x1x1xf32> -> tensor<2x128x128xf32>
// FP8W: %[[Y:[a-z0-9_]+]] = moe.grouped_matmul %{{.*}}, %[[D0]], %[[OFF]]
// FP8W: %[[D1:[a-z0-9_]+]] = moe.dequantize %[[Q]], %[[S]] from <f8E4M3FN, [1, 128, 128], f32>
// FP8W: moe.grouped_matmul %{{.*}}, %[[D1]], %[[OFF]]
// FP8W-NOT: moe.quantize
// FP8W-NOT: func.func @constant_weights_prepack

// FP8WA-LABEL: func.func @constant_weights(
// FP8WA-SAME: %[[ROWS:[a-z0-9_]+]]: tensor<?x128xf32>, %[[OFF:[a-z0-9_]+]]: tensor<3xi32>) -> tensor<?x128xf32>
// FP8WA: %[[C:[a-z0-9_]+]] = arith.constant dense<5.000000e-01> : tensor<2x128x128xf32>
// FP8WA: %[[Q:[a-z0-9_]+]], %[[S:[a-z0-9_]+]] = moe.quantize %[[C]] to <f8E4M3FN, [1, 128, 128], f32> : tensor<2x128x128xf32> -> tensor<2x128x128xf8E4M3FN>, tensor<2x1x1xf32>
// FP8WA: moe.quantize %[[ROWS]] to <f8E4M3FN, [1, 128], f32>
// FP8WA: %[[D0:[a-z0-9_]+]] = moe.dequantize %[[Q]], %[[S]] from <f8E4M3FN, [1, 128, 128], f32> : tensor<2x128x128xf8E4M3FN>, tensor<2x1x1xf32> -> tensor<2x128x128xf32>
// FP8WA: %[[Y:[a-z0-9_]+]] = moe.grouped_matmul %{{.*}}, %[[D0]], %[[OFF]]
// FP8WA: moe.quantize %[[Y]] to <f8E4M3FN, [1, 128], f32>
// FP8WA: %[[D1:[a-z0-9_]+]] = moe.dequantize %[[Q]], %[[S]] from <f8E4M3FN, [1, 128, 128], f32>
// FP8WA: moe.grouped_matmul %{{.*}}, %[[D1]], %[[OFF]]
// FP8WA-NOT: moe.quantize
// FP8WA-NOT: func.func @constant_weights_prepack

// MXA-LABEL: func.func @constant_weights(
// MXA-SAME: %[[ROWS:[a-z0-9_]+]]: tensor<?x128xf32>, %[[OFF:[a-z0-9_]+]]: tensor<3xi32>) -> tensor<?x128xf32>
// MXA: %[[C:[a-z0-9_]+]] = arith.constant dense<5.000000e-01> : tensor<2x128x128xf32>
// MXA: %[[Q:[a-z0-9_]+]], %[[S:[a-z0-9_]+]] = moe.quantize %[[C]] to <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : tensor<2x128x128xf32> -> tensor<2x128x128xf8E4M3FN>, tensor<2x128x4xf8E8M0FNU>
// MXA: moe.quantize %[[ROWS]] to <f8E4M3FN, [1, 32], f8E8M0FNU>
// MXA: %[[D0:[a-z0-9_]+]] = moe.dequantize %[[Q]], %[[S]] from <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : tensor<2x128x128xf8E4M3FN>, tensor<2x128x4xf8E8M0FNU> -> tensor<2x128x128xf32>
// MXA: %[[Y:[a-z0-9_]+]] = moe.grouped_matmul %{{.*}}, %[[D0]], %[[OFF]]
// MXA: moe.quantize %[[Y]] to <f8E4M3FN, [1, 32], f8E8M0FNU>
// MXA: %[[D1:[a-z0-9_]+]] = moe.dequantize %[[Q]], %[[S]] from <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
// MXA: moe.grouped_matmul %{{.*}}, %[[D1]], %[[OFF]]
// MXA-NOT: moe.quantize
// MXA-NOT: func.func @constant_weights_prepack

// MX52-LABEL: func.func @constant_weights(
// MX52-SAME: %[[ROWS:[a-z0-9_]+]]: tensor<?x128xf32>, %[[OFF:[a-z0-9_]+]]: tensor<3xi32>) -> tensor<?x128xf32>
// MX52: %[[C:[a-z0-9_]+]] = arith.constant dense<5.000000e-01> : tensor<2x128x128xf32>
// MX52: %[[Q:[a-z0-9_]+]], %[[S:[a-z0-9_]+]] = moe.quantize %[[C]] to <f8E5M2, [1, 1, 32], f8E8M0FNU> : tensor<2x128x128xf32> -> tensor<2x128x128xf8E5M2>, tensor<2x128x4xf8E8M0FNU>
// MX52: %[[D0:[a-z0-9_]+]] = moe.dequantize %[[Q]], %[[S]] from <f8E5M2, [1, 1, 32], f8E8M0FNU> : tensor<2x128x128xf8E5M2>, tensor<2x128x4xf8E8M0FNU> -> tensor<2x128x128xf32>
// MX52: %[[Y:[a-z0-9_]+]] = moe.grouped_matmul %{{.*}}, %[[D0]], %[[OFF]]
// MX52: %[[D1:[a-z0-9_]+]] = moe.dequantize %[[Q]], %[[S]] from <f8E5M2, [1, 1, 32], f8E8M0FNU>
// MX52: moe.grouped_matmul %{{.*}}, %[[D1]], %[[OFF]]
// MX52-NOT: moe.quantize
// MX52-NOT: func.func @constant_weights_prepack
func.func @constant_weights(%rows: tensor<?x128xf32>, %offsets: tensor<3xi32>) -> tensor<?x128xf32> {
  %w = arith.constant dense<0.5> : tensor<2x128x128xf32>
  %y = moe.grouped_matmul %rows, %w, %offsets
      : (tensor<?x128xf32>, tensor<2x128x128xf32>, tensor<3xi32>) -> tensor<?x128xf32>
  %z = moe.grouped_matmul %y, %w, %offsets
      : (tensor<?x128xf32>, tensor<2x128x128xf32>, tensor<3xi32>) -> tensor<?x128xf32>
  return %z : tensor<?x128xf32>
}
