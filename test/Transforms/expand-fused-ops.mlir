// RUN: moe-opt %s --moe-expand-fused-ops --split-input-file | FileCheck %s

// CHECK-LABEL: func @silu
// CHECK-SAME: (%[[ROWS:.*]]: tensor<?x12xbf16>, %[[OFF:.*]]: tensor<5xi64>, %[[W13:.*]]: tensor<4x16x12xbf16>, %[[W2:.*]]: tensor<4x12x8xbf16>)
// CHECK: %[[GU:.*]] = moe.grouped_matmul %[[ROWS]], %[[W13]], %[[OFF]] : {{.*}} -> tensor<?x16xbf16>
// CHECK: %[[H:.*]] = moe.swiglu silu %[[GU]] : (tensor<?x16xbf16>) -> tensor<?x8xbf16>
// CHECK: %[[Y:.*]] = moe.grouped_matmul %[[H]], %[[W2]], %[[OFF]] : {{.*}} -> tensor<?x12xbf16>
// CHECK-NOT: moe.expert_mlp
// CHECK: return %[[Y]]
func.func @silu(%rows: tensor<?x12xbf16>, %offsets: tensor<5xi64>,
                %w13: tensor<4x16x12xbf16>, %w2: tensor<4x12x8xbf16>) -> tensor<?x12xbf16> {
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x12xbf16>, tensor<5xi64>, tensor<4x16x12xbf16>, tensor<4x12x8xbf16>)
      -> tensor<?x12xbf16>
  return %y : tensor<?x12xbf16>
}

// -----

// The routing scale goes to the down projection's epilogue, after its bias.
// CHECK-LABEL: func @gptoss
// CHECK-SAME: %[[B13:[a-z0-9]+]]: tensor<4x16xf32>, %[[B2:[a-z0-9]+]]: tensor<4x12xf32>, %[[S:[a-z0-9]+]]: tensor<?xf32>
// CHECK: %[[GU:.*]] = moe.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} bias %[[B13]] :
// CHECK: %[[H:.*]] = moe.swiglu gptoss %[[GU]] alpha 1.500000e+00 limit 5.000000e+00 :
// CHECK: moe.grouped_matmul %[[H]], %{{.*}}, %{{.*}} bias %[[B2]] scale %[[S]] :
func.func @gptoss(%rows: tensor<?x12xf32>, %offsets: tensor<5xi64>,
                  %w13: tensor<4x16x12xf32>, %w2: tensor<4x12x8xf32>,
                  %b13: tensor<4x16xf32>, %b2: tensor<4x12xf32>, %s: tensor<?xf32>)
    -> tensor<?x12xf32> {
  %y = moe.expert_mlp gptoss %rows, %offsets, %w13, %w2 gate_up_bias %b13
      down_bias %b2 scale %s alpha 1.5 limit 5.0
      : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x12xf32>, tensor<4x12x8xf32>,
         tensor<4x16xf32>, tensor<4x12xf32>, tensor<?xf32>) -> tensor<?x12xf32>
  return %y : tensor<?x12xf32>
}

// -----

// An FP8 intermediate: quantize -> dequantize of the activation output, its
// scales one per [1, 128] group, between the swiglu and the down matmul.
// CHECK-LABEL: func @fp8_intermediate
// CHECK-SAME: (%[[ROWS:[a-z0-9]+]]: tensor<?x128xbf16>, %[[OFF:[a-z0-9]+]]: tensor<5xi64>, %[[W13:[a-z0-9]+]]: tensor<4x512x128xbf16>, %[[W2:[a-z0-9]+]]: tensor<4x128x256xbf16>, %[[S:[a-z0-9]+]]: tensor<?xf32>)
// CHECK: %[[GU:.*]] = moe.grouped_matmul %[[ROWS]], %[[W13]], %[[OFF]] : {{.*}} -> tensor<?x512xbf16>
// CHECK: %[[H:.*]] = moe.swiglu silu %[[GU]] : (tensor<?x512xbf16>) -> tensor<?x256xbf16>
// CHECK: %[[HQ:.*]], %[[HS:.*]] = moe.quantize %[[H]] to <f8E4M3FN, [1, 128], f32> : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x2xf32>
// CHECK: %[[HD:.*]] = moe.dequantize %[[HQ]], %[[HS]] from <f8E4M3FN, [1, 128], f32> : tensor<?x256xf8E4M3FN>, tensor<?x2xf32> -> tensor<?x256xbf16>
// CHECK: %[[Y:.*]] = moe.grouped_matmul %[[HD]], %[[W2]], %[[OFF]] scale %[[S]] : {{.*}} -> tensor<?x128xbf16>
// CHECK-NOT: moe.expert_mlp
// CHECK: return %[[Y]]
func.func @fp8_intermediate(%rows: tensor<?x128xbf16>, %offsets: tensor<5xi64>,
                            %w13: tensor<4x512x128xbf16>, %w2: tensor<4x128x256xbf16>,
                            %s: tensor<?xf32>) -> tensor<?x128xbf16> {
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2 scale %s
      intermediate <f8E4M3FN, [1, 128], f32>
      : (tensor<?x128xbf16>, tensor<5xi64>, tensor<4x512x128xbf16>, tensor<4x128x256xbf16>, tensor<?xf32>)
      -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// -----

// The down dgrad with the activation's gradient: the plain dgrad, its
// product kept in f32, then moe.swiglu_grad with the same constants.
// CHECK-LABEL: func @act_grad
// CHECK-SAME: (%[[DO:.*]]: tensor<?x12xbf16>, %[[W2:.*]]: tensor<4x12x8xbf16>, %[[OFF:.*]]: tensor<5xi64>, %[[GU:.*]]: tensor<?x16xbf16>)
// CHECK: %[[DH:.*]] = moe.grouped_dgrad %[[DO]], %[[W2]], %[[OFF]] : (tensor<?x12xbf16>, tensor<4x12x8xbf16>, tensor<5xi64>) -> tensor<?x8xf32>
// CHECK: %[[DGU:.*]] = moe.swiglu_grad gptoss %[[GU]], %[[DH]] alpha 1.500000e+00 limit 5.000000e+00 : (tensor<?x16xbf16>, tensor<?x8xf32>) -> tensor<?x16xbf16>
// CHECK: return %[[DGU]]
func.func @act_grad(%do: tensor<?x12xbf16>, %w2: tensor<4x12x8xbf16>,
                    %offsets: tensor<5xi64>, %gu: tensor<?x16xbf16>) -> tensor<?x16xbf16> {
  %dgu = moe.grouped_dgrad %do, %w2, %offsets act_grad gptoss %gu alpha 1.5 limit 5.0
      : (tensor<?x12xbf16>, tensor<4x12x8xbf16>, tensor<5xi64>, tensor<?x16xbf16>)
      -> tensor<?x16xbf16>
  return %dgu : tensor<?x16xbf16>
}

// -----

// A fake quantize is the quantize -> dequantize pair, in the input's type.
// CHECK-LABEL: func @fake_quantize
// CHECK-SAME: (%[[X:.*]]: tensor<?x64xbf16>)
// CHECK: %[[Q:.*]], %[[S:.*]] = moe.quantize %[[X]] to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU>
// CHECK: %[[D:.*]] = moe.dequantize %[[Q]], %[[S]] from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU> -> tensor<?x64xbf16>
// CHECK-NOT: moe.fake_quantize
// CHECK: return %[[D]]
func.func @fake_quantize(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.fake_quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}
