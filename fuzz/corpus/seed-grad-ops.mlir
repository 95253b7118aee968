func.func @grads(%dy: tensor<3x16xf32>, %o: tensor<?x16xf32>, %slots: tensor<3x2xi32>,
                 %gu: tensor<?x32xf32>, %dh: tensor<?x16xf32>, %offsets: tensor<5xi32>,
                 %w13: tensor<4x32x16xf32>, %rows: tensor<?x16xf32>,
                 %l: tensor<3x4xbf16>, %ids: tensor<3x2xi32>, %dw: tensor<3x2xf32>)
    -> (tensor<?x16xf32>, tensor<?x32xf32>, tensor<?x16xf32>, tensor<4x32x16xf32>, tensor<4x32xf32>, tensor<3x4xbf16>, tensor<3x4xbf16>) {
  %do = moe.unpermute_grad %dy, %o, %slots : (tensor<3x16xf32>, tensor<?x16xf32>, tensor<3x2xi32>) -> tensor<?x16xf32>
  %dgu = moe.swiglu_grad gptoss %gu, %dh : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
  %dr = moe.grouped_dgrad %dgu, %w13, %offsets : (tensor<?x32xf32>, tensor<4x32x16xf32>, tensor<5xi32>) -> tensor<?x16xf32>
  %dw13, %db13 = moe.grouped_wgrad %dgu, %rows, %offsets : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<5xi32>) -> (tensor<4x32x16xf32>, tensor<4x32xf32>)
  %a = moe.route_grad softmax_topk %l, %ids, %dw scale 2.0 : (tensor<3x4xbf16>, tensor<3x2xi32>, tensor<3x2xf32>) -> tensor<3x4xbf16>
  %b = moe.route_grad sigmoid_topk %l, %ids, %dw : (tensor<3x4xbf16>, tensor<3x2xi32>, tensor<3x2xf32>) -> tensor<3x4xbf16>
  return %do, %dgu, %dr, %dw13, %db13, %a, %b : tensor<?x16xf32>, tensor<?x32xf32>, tensor<?x16xf32>, tensor<4x32x16xf32>, tensor<4x32xf32>, tensor<3x4xbf16>, tensor<3x4xbf16>
}
