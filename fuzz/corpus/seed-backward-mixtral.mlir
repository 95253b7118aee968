func.func @mixtral_backward(%arg0: tensor<?x8xf32>, %arg1: tensor<?x2xi32>, %arg2: tensor<?x2xf32>, %arg3: tensor<?x16xbf16>, %arg4: tensor<9xi64>, %arg5: tensor<?x2xi64>, %arg6: tensor<?x32xbf16>, %arg7: tensor<?x16xbf16>, %arg8: tensor<8x32x16xbf16>, %arg9: tensor<8x16x16xbf16>, %arg10: tensor<?x16xbf16>) -> (tensor<?x16xbf16>, tensor<?x8xf32>, tensor<8x32x16xbf16>, tensor<8x16x16xbf16>) attributes {moe.gradient_of = array<i64: 0, 1, 2, 3>, moe.saved = ["logits", "ids", "weights", "rows", "offsets", "slots", "gate_up", "expert_out", "gate_up_weights", "down_weights"]} {
  %rows_grad, %weights_grad = moe.unpermute_grad %arg10, %arg7, %arg5 weights %arg2 : (tensor<?x16xbf16>, tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> (tensor<?x16xbf16>, tensor<?x2xf32>)
  %0 = moe.swiglu silu %arg6 : (tensor<?x32xbf16>) -> tensor<?x16xbf16>
  %1 = moe.grouped_dgrad %rows_grad, %arg9, %arg4 : (tensor<?x16xbf16>, tensor<8x16x16xbf16>, tensor<9xi64>) -> tensor<?x16xbf16>
  %weight_grad = moe.grouped_wgrad %rows_grad, %0, %arg4 : (tensor<?x16xbf16>, tensor<?x16xbf16>, tensor<9xi64>) -> tensor<8x16x16xbf16>
  %2 = moe.swiglu_grad silu %arg6, %1 : (tensor<?x32xbf16>, tensor<?x16xbf16>) -> tensor<?x32xbf16>
  %3 = moe.grouped_dgrad %2, %arg8, %arg4 : (tensor<?x32xbf16>, tensor<8x32x16xbf16>, tensor<9xi64>) -> tensor<?x16xbf16>
  %weight_grad_0 = moe.grouped_wgrad %2, %arg3, %arg4 : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<9xi64>) -> tensor<8x32x16xbf16>
  %4 = moe.unpermute %3, %arg5 : (tensor<?x16xbf16>, tensor<?x2xi64>) -> tensor<?x16xbf16>
  %5 = moe.route_grad softmax_topk %arg0, %arg1, %weights_grad renormalize : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x8xf32>
  return %4, %5, %weight_grad_0, %weight_grad : tensor<?x16xbf16>, tensor<?x8xf32>, tensor<8x32x16xbf16>, tensor<8x16x16xbf16>
}
