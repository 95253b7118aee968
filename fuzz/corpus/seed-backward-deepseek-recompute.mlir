func.func @deepseek_backward(%arg0: tensor<?x16xf32>, %arg1: tensor<?x4xi32>, %arg2: tensor<?x4xf32>, %arg3: tensor<?x16xf32>, %arg4: tensor<17xi64>, %arg5: tensor<?x4xi64>, %arg6: tensor<?x16xf32>, %arg7: tensor<16x24x16xf32>, %arg8: tensor<16x16x12xf32>, %arg9: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<?x16xf32>, tensor<16x24x16xf32>, tensor<16x16x12xf32>) attributes {moe.gradient_of = array<i64: 0, 1, 3, 4>, moe.saved = ["logits", "ids", "weights", "rows", "offsets", "slots", "expert_out", "gate_up_weights", "down_weights"]} {
  %0 = moe.grouped_matmul %arg3, %arg7, %arg4 : (tensor<?x16xf32>, tensor<16x24x16xf32>, tensor<17xi64>) -> tensor<?x24xf32>
  %rows_grad, %weights_grad = moe.unpermute_grad %arg9, %arg6, %arg5 weights %arg2 : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x4xi64>, tensor<?x4xf32>) -> (tensor<?x16xf32>, tensor<?x4xf32>)
  %1 = moe.swiglu silu %0 : (tensor<?x24xf32>) -> tensor<?x12xf32>
  %2 = moe.grouped_dgrad %rows_grad, %arg8, %arg4 : (tensor<?x16xf32>, tensor<16x16x12xf32>, tensor<17xi64>) -> tensor<?x12xf32>
  %weight_grad = moe.grouped_wgrad %rows_grad, %1, %arg4 : (tensor<?x16xf32>, tensor<?x12xf32>, tensor<17xi64>) -> tensor<16x16x12xf32>
  %3 = moe.swiglu_grad silu %0, %2 : (tensor<?x24xf32>, tensor<?x12xf32>) -> tensor<?x24xf32>
  %4 = moe.grouped_dgrad %3, %arg7, %arg4 : (tensor<?x24xf32>, tensor<16x24x16xf32>, tensor<17xi64>) -> tensor<?x16xf32>
  %weight_grad_0 = moe.grouped_wgrad %3, %arg3, %arg4 : (tensor<?x24xf32>, tensor<?x16xf32>, tensor<17xi64>) -> tensor<16x24x16xf32>
  %5 = moe.unpermute %4, %arg5 : (tensor<?x16xf32>, tensor<?x4xi64>) -> tensor<?x16xf32>
  %6 = moe.route_grad sigmoid_topk %arg0, %arg1, %weights_grad renormalize scale 2.500000e+00 : (tensor<?x16xf32>, tensor<?x4xi32>, tensor<?x4xf32>) -> tensor<?x16xf32>
  return %5, %6, %weight_grad_0, %weight_grad : tensor<?x16xf32>, tensor<?x16xf32>, tensor<16x24x16xf32>, tensor<16x16x12xf32>
}
