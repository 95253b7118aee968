func.func @gptoss_backward(%arg0: tensor<?x8xbf16>, %arg1: tensor<?x4xi32>, %arg2: tensor<?x4xf32>, %arg3: tensor<?x16xbf16>, %arg4: tensor<9xi32>, %arg5: tensor<?x4xi32>, %arg6: tensor<?x32xbf16>, %arg7: tensor<?x16xbf16>, %arg8: tensor<8x32x16xbf16>, %arg9: tensor<8x16x16xbf16>, %arg10: tensor<?x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x8xbf16>, tensor<8x32x16xbf16>, tensor<8x16x16xbf16>, tensor<8x32xf32>, tensor<8x16xf32>) attributes {moe.gradient_of = array<i64: 0, 1, 2, 3, 4, 5>, moe.saved = ["logits", "ids", "weights", "rows", "offsets", "slots", "gate_up", "expert_out", "gate_up_weights", "down_weights"]} {
  %rows_grad, %weights_grad = moe.unpermute_grad %arg10, %arg7, %arg5 weights %arg2 : (tensor<?x16xbf16>, tensor<?x16xbf16>, tensor<?x4xi32>, tensor<?x4xf32>) -> (tensor<?x16xbf16>, tensor<?x4xf32>)
  %0 = moe.swiglu gptoss %arg6 alpha 1.702000e+00 limit 7.000000e+00 : (tensor<?x32xbf16>) -> tensor<?x16xbf16>
  %1 = moe.grouped_dgrad %rows_grad, %arg9, %arg4 : (tensor<?x16xbf16>, tensor<8x16x16xbf16>, tensor<9xi32>) -> tensor<?x16xbf16>
  %weight_grad, %bias_grad = moe.grouped_wgrad %rows_grad, %0, %arg4 : (tensor<?x16xbf16>, tensor<?x16xbf16>, tensor<9xi32>) -> (tensor<8x16x16xbf16>, tensor<8x16xf32>)
  %2 = moe.swiglu_grad gptoss %arg6, %1 alpha 1.702000e+00 limit 7.000000e+00 : (tensor<?x32xbf16>, tensor<?x16xbf16>) -> tensor<?x32xbf16>
  %3 = moe.grouped_dgrad %2, %arg8, %arg4 : (tensor<?x32xbf16>, tensor<8x32x16xbf16>, tensor<9xi32>) -> tensor<?x16xbf16>
  %weight_grad_0, %bias_grad_1 = moe.grouped_wgrad %2, %arg3, %arg4 : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<9xi32>) -> (tensor<8x32x16xbf16>, tensor<8x32xf32>)
  %4 = moe.unpermute %3, %arg5 : (tensor<?x16xbf16>, tensor<?x4xi32>) -> tensor<?x16xbf16>
  %5 = moe.route_grad topk_softmax %arg0, %arg1, %weights_grad : (tensor<?x8xbf16>, tensor<?x4xi32>, tensor<?x4xf32>) -> tensor<?x8xbf16>
  return %4, %5, %weight_grad_0, %weight_grad, %bias_grad_1, %bias_grad : tensor<?x16xbf16>, tensor<?x8xbf16>, tensor<8x32x16xbf16>, tensor<8x16x16xbf16>, tensor<8x32xf32>, tensor<8x16xf32>
}
