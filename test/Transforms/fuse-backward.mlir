// RUN: moe-opt %s --moe-fuse-backward --split-input-file | FileCheck %s
// The inverse: fused, then expanded, the f32 chain comes back.
// RUN: moe-opt %s --moe-fuse-backward --moe-expand-fused-ops --split-input-file | FileCheck %s --check-prefix=ROUND

// CHECK-LABEL: func @silu
// CHECK-SAME: (%[[DO:.*]]: tensor<?x12xbf16>, %[[W2:.*]]: tensor<4x12x8xbf16>, %[[OFF:.*]]: tensor<5xi64>, %[[GU:.*]]: tensor<?x16xbf16>)
// CHECK-NEXT: %[[DGU:.*]] = moe.grouped_dgrad %[[DO]], %[[W2]], %[[OFF]] act_grad silu %[[GU]] : (tensor<?x12xbf16>, tensor<4x12x8xbf16>, tensor<5xi64>, tensor<?x16xbf16>) -> tensor<?x16xbf16>
// CHECK-NEXT: return %[[DGU]]
func.func @silu(%do: tensor<?x12xbf16>, %w2: tensor<4x12x8xbf16>,
                %offsets: tensor<5xi64>, %gu: tensor<?x16xbf16>) -> tensor<?x16xbf16> {
  %dh = moe.grouped_dgrad %do, %w2, %offsets
      : (tensor<?x12xbf16>, tensor<4x12x8xbf16>, tensor<5xi64>) -> tensor<?x8xbf16>
  %dgu = moe.swiglu_grad silu %gu, %dh
      : (tensor<?x16xbf16>, tensor<?x8xbf16>) -> tensor<?x16xbf16>
  return %dgu : tensor<?x16xbf16>
}

// -----

// GPT-OSS's constants go with it.
// CHECK-LABEL: func @gptoss
// CHECK: moe.grouped_dgrad %{{.*}}, %{{.*}}, %{{.*}} act_grad gptoss %{{.*}} alpha 1.702000e+00 limit 7.000000e+00 : (tensor<?x12xf32>, tensor<4x12x8xf32>, tensor<5xi64>, tensor<?x16xf32>) -> tensor<?x16xf32>
// CHECK-NOT: moe.swiglu_grad
// ROUND-LABEL: func @gptoss
// ROUND: %[[DH:.*]] = moe.grouped_dgrad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x12xf32>, tensor<4x12x8xf32>, tensor<5xi64>) -> tensor<?x8xf32>
// ROUND: moe.swiglu_grad gptoss %{{.*}}, %[[DH]] alpha 1.702000e+00 limit 7.000000e+00
func.func @gptoss(%do: tensor<?x12xf32>, %w2: tensor<4x12x8xf32>,
                  %offsets: tensor<5xi64>, %gu: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %dh = moe.grouped_dgrad %do, %w2, %offsets
      : (tensor<?x12xf32>, tensor<4x12x8xf32>, tensor<5xi64>) -> tensor<?x8xf32>
  %dgu = moe.swiglu_grad gptoss %gu, %dh alpha 1.702 limit 7.0
      : (tensor<?x16xf32>, tensor<?x8xf32>) -> tensor<?x16xf32>
  return %dgu : tensor<?x16xf32>
}

// -----

// The product is read elsewhere too: it must stay a value.
// CHECK-LABEL: func @other_use
// CHECK: %[[DH:.*]] = moe.grouped_dgrad
// CHECK-NOT: act_grad
// CHECK: moe.swiglu_grad silu %{{.*}}, %[[DH]]
func.func @other_use(%do: tensor<?x12xbf16>, %w2: tensor<4x12x8xbf16>,
                     %offsets: tensor<5xi64>, %gu: tensor<?x16xbf16>)
    -> (tensor<?x16xbf16>, tensor<?x8xbf16>) {
  %dh = moe.grouped_dgrad %do, %w2, %offsets
      : (tensor<?x12xbf16>, tensor<4x12x8xbf16>, tensor<5xi64>) -> tensor<?x8xbf16>
  %dgu = moe.swiglu_grad silu %gu, %dh
      : (tensor<?x16xbf16>, tensor<?x8xbf16>) -> tensor<?x16xbf16>
  return %dgu, %dh : tensor<?x16xbf16>, tensor<?x8xbf16>
}

// -----

// An f32 product of bf16 operands: the fused op would round its result to
// a type no kernel of the chain had.
// CHECK-LABEL: func @mixed_types
// CHECK: moe.grouped_dgrad %{{.*}}, %{{.*}}, %{{.*}} : {{.*}} -> tensor<?x8xf32>
// CHECK: moe.swiglu_grad
func.func @mixed_types(%do: tensor<?x12xbf16>, %w2: tensor<4x12x8xbf16>,
                       %offsets: tensor<5xi64>, %gu: tensor<?x16xbf16>) -> tensor<?x16xbf16> {
  %dh = moe.grouped_dgrad %do, %w2, %offsets
      : (tensor<?x12xbf16>, tensor<4x12x8xbf16>, tensor<5xi64>) -> tensor<?x8xf32>
  %dgu = moe.swiglu_grad silu %gu, %dh
      : (tensor<?x16xbf16>, tensor<?x8xf32>) -> tensor<?x16xbf16>
  return %dgu : tensor<?x16xbf16>
}

// -----

// The activation's gradient of something else than a dgrad stays.
// CHECK-LABEL: func @not_dgrad
// CHECK: moe.swiglu_grad silu
func.func @not_dgrad(%gu: tensor<?x16xbf16>, %dh: tensor<?x8xbf16>) -> tensor<?x16xbf16> {
  %dgu = moe.swiglu_grad silu %gu, %dh
      : (tensor<?x16xbf16>, tensor<?x8xbf16>) -> tensor<?x16xbf16>
  return %dgu : tensor<?x16xbf16>
}

// -----

// Gate and up interleaved: the fused epilogue reads them N columns apart.
// CHECK-LABEL: func @interleaved
// CHECK: %[[DH:.*]] = moe.grouped_dgrad
// CHECK-NOT: act_grad
// CHECK: moe.swiglu_grad silu %{{.*}}, %[[DH]] interleaved
func.func @interleaved(%do: tensor<?x12xbf16>, %w2: tensor<4x12x8xbf16>,
                       %offsets: tensor<5xi64>, %gu: tensor<?x16xbf16>) -> tensor<?x16xbf16> {
  %dh = moe.grouped_dgrad %do, %w2, %offsets
      : (tensor<?x12xbf16>, tensor<4x12x8xbf16>, tensor<5xi64>) -> tensor<?x8xbf16>
  %dgu = moe.swiglu_grad silu %gu, %dh interleaved
      : (tensor<?x16xbf16>, tensor<?x8xbf16>) -> tensor<?x16xbf16>
  return %dgu : tensor<?x16xbf16>
}
