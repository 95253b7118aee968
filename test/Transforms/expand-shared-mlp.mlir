// --moe-expand-shared-mlp: a shared expert and its adjoint as grouped ops of
// one group over its weights viewed as one expert's.
// RUN: moe-opt %s --split-input-file --moe-expand-shared-mlp | FileCheck %s

// CHECK-LABEL: func.func @forward(
// CHECK: %[[OFF:.*]] = arith.constant dense<[0, 2147483647]> : tensor<2xi64>
// CHECK: %[[W13:.*]] = tensor.expand_shape %arg1 {{\[\[}}0, 1], [2]] output_shape [1, 64, 16] : tensor<64x16xbf16> into tensor<1x64x16xbf16>
// CHECK: %[[GU:.*]] = moe.grouped_matmul %arg0, %[[W13]], %[[OFF]] : (tensor<?x16xbf16>, tensor<1x64x16xbf16>, tensor<2xi64>) -> tensor<?x64xbf16>
// CHECK: %[[W2:.*]] = tensor.expand_shape %arg2 {{\[\[}}0, 1], [2]] output_shape [1, 16, 32]
// CHECK: %[[H:.*]] = moe.swiglu silu %[[GU]] : (tensor<?x64xbf16>) -> tensor<?x32xbf16>
// CHECK: %[[S:.*]] = moe.grouped_matmul %[[H]], %[[W2]], %[[OFF]] : (tensor<?x32xbf16>, tensor<1x16x32xbf16>, tensor<2xi64>) -> tensor<?x16xbf16>
// CHECK: return %[[S]]
func.func @forward(%x: tensor<?x16xbf16>, %sw13: tensor<64x16xbf16>,
                   %sw2: tensor<16x32xbf16>) -> tensor<?x16xbf16> {
  %s = moe.shared_mlp silu %x, %sw13, %sw2
      : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>) -> tensor<?x16xbf16>
  return %s : tensor<?x16xbf16>
}

// -----

// The forward recomputed; then the routed experts' backward of one group,
// its weight gradients collapsed to the weights' shapes.
// CHECK-LABEL: func.func @backward(
// CHECK: %[[OFF:.*]] = arith.constant dense<[0, 2147483647]> : tensor<2xi64>
// CHECK: %[[W13:.*]] = tensor.expand_shape %arg2
// CHECK: %[[W2:.*]] = tensor.expand_shape %arg3
// CHECK: %[[GU:.*]] = moe.grouped_matmul %arg1, %[[W13]], %[[OFF]]
// CHECK: %[[H:.*]] = moe.swiglu silu %[[GU]]
// CHECK: %[[DW2:.*]] = moe.grouped_wgrad %arg0, %[[H]], %[[OFF]] : (tensor<?x16xbf16>, tensor<?x32xbf16>, tensor<2xi64>) -> tensor<1x16x32xbf16>
// CHECK: %[[DW2D:.*]] = tensor.collapse_shape %[[DW2]] {{\[\[}}0, 1], [2]] : tensor<1x16x32xbf16> into tensor<16x32xbf16>
// CHECK: %[[DH:.*]] = moe.grouped_dgrad %arg0, %[[W2]], %[[OFF]] : (tensor<?x16xbf16>, tensor<1x16x32xbf16>, tensor<2xi64>) -> tensor<?x32xbf16>
// CHECK: %[[DGU:.*]] = moe.swiglu_grad silu %[[GU]], %[[DH]]
// CHECK: %[[DX:.*]] = moe.grouped_dgrad %[[DGU]], %[[W13]], %[[OFF]] : (tensor<?x64xbf16>, tensor<1x64x16xbf16>, tensor<2xi64>) -> tensor<?x16xbf16>
// CHECK: %[[DW13:.*]] = moe.grouped_wgrad %[[DGU]], %arg1, %[[OFF]]
// CHECK: %[[DW13D:.*]] = tensor.collapse_shape %[[DW13]]
// CHECK: return %[[DX]], %[[DW13D]], %[[DW2D]]
func.func @backward(%dy: tensor<?x16xbf16>, %x: tensor<?x16xbf16>,
                    %sw13: tensor<64x16xbf16>, %sw2: tensor<16x32xbf16>)
    -> (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>) {
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %dy, %x, %sw13, %sw2
      : (tensor<?x16xbf16>, tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>)
      -> (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>)
  return %dx, %dw13, %dw2 : tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>
}
