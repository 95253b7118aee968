// The routers of the five models the team's reference covers
// (shared/bench/peers.py MODELS), and combines, for test/device/routing.py.
func.func @mixtral_8x7b(%l: tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>) {
  %i, %w = moe.route softmax_topk %l top 2 renormalize : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return %i, %w : tensor<?x2xi32>, tensor<?x2xf32>
}
func.func @qwen3_30b_a3b(%l: tensor<?x128xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>) {
  %i, %w = moe.route softmax_topk %l top 8 renormalize : (tensor<?x128xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>)
  return %i, %w : tensor<?x8xi32>, tensor<?x8xf32>
}
func.func @olmoe_1b_7b(%l: tensor<?x64xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>) {
  %i, %w = moe.route softmax_topk %l top 8 : (tensor<?x64xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>)
  return %i, %w : tensor<?x8xi32>, tensor<?x8xf32>
}
func.func @deepseek_v3(%l: tensor<?x256xf32>, %b: tensor<256xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>) {
  %i, %w = moe.route sigmoid_topk %l bias %b top 8 groups 8 select 4 renormalize scale 2.5
      : (tensor<?x256xf32>, tensor<256xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>)
  return %i, %w : tensor<?x8xi32>, tensor<?x8xf32>
}
func.func @gpt_oss_120b(%l: tensor<?x128xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>) {
  %i, %w = moe.route topk_softmax %l top 4 : (tensor<?x128xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
  return %i, %w : tensor<?x4xi32>, tensor<?x4xf32>
}
func.func @qwen3_30b_a3b_bf16(%l: tensor<?x128xbf16>) -> (tensor<?x8xi32>, tensor<?x8xf32>) {
  %i, %w = moe.route softmax_topk %l top 8 renormalize : (tensor<?x128xbf16>) -> (tensor<?x8xi32>, tensor<?x8xf32>)
  return %i, %w : tensor<?x8xi32>, tensor<?x8xf32>
}
// Routers beyond the five models, for the kernel's expert layout (lane l
// holds experts lP to lP + P - 1): 60 experts leave the last lanes empty;
// 48 experts in 4 groups of 12 spread a group over 6 lanes (not a power of
// two: the whole-warp merge per group).
func.func @softmax_e60_k6(%l: tensor<?x60xf32>) -> (tensor<?x6xi32>, tensor<?x6xf32>) {
  %i, %w = moe.route softmax_topk %l top 6 renormalize : (tensor<?x60xf32>) -> (tensor<?x6xi32>, tensor<?x6xf32>)
  return %i, %w : tensor<?x6xi32>, tensor<?x6xf32>
}
func.func @sigmoid_e48_g4s2_k4(%l: tensor<?x48xf32>, %b: tensor<48xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>) {
  %i, %w = moe.route sigmoid_topk %l bias %b top 4 groups 4 select 2 renormalize scale 1.5
      : (tensor<?x48xf32>, tensor<48xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
  return %i, %w : tensor<?x4xi32>, tensor<?x4xf32>
}
func.func @combine_k2_i64_weighted(%rows: tensor<?x4096xbf16>, %s: tensor<?x2xi64>, %w: tensor<?x2xf32>) -> tensor<?x4096xbf16> {
  %y = moe.unpermute %rows, %s weights %w : (tensor<?x4096xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x4096xbf16>
  return %y : tensor<?x4096xbf16>
}
func.func @combine_k8_i32(%rows: tensor<?x?xbf16>, %s: tensor<?x8xi32>) -> tensor<?x?xbf16> {
  %y = moe.unpermute %rows, %s : (tensor<?x?xbf16>, tensor<?x8xi32>) -> tensor<?x?xbf16>
  return %y : tensor<?x?xbf16>
}
func.func @combine_k4_i32_weighted(%rows: tensor<?x2880xbf16>, %s: tensor<?x4xi32>, %w: tensor<?x4xf32>) -> tensor<?x2880xbf16> {
  %y = moe.unpermute %rows, %s weights %w : (tensor<?x2880xbf16>, tensor<?x4xi32>, tensor<?x4xf32>) -> tensor<?x2880xbf16>
  return %y : tensor<?x2880xbf16>
}
func.func @permute_e128_k8(%x: tensor<?x2048xbf16>, %ids: tensor<?x8xi32>) -> (tensor<?x2048xbf16>, tensor<129xi64>, tensor<?x8xi64>) {
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x2048xbf16>, tensor<?x8xi32>) -> (tensor<?x2048xbf16>, tensor<129xi64>, tensor<?x8xi64>)
  return %r, %o, %s : tensor<?x2048xbf16>, tensor<129xi64>, tensor<?x8xi64>
}
func.func @permute_e256_k8_i32(%x: tensor<?x7168xbf16>, %ids: tensor<?x8xi32>) -> (tensor<?x7168xbf16>, tensor<257xi32>, tensor<?x8xi32>) {
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x7168xbf16>, tensor<?x8xi32>) -> (tensor<?x7168xbf16>, tensor<257xi32>, tensor<?x8xi32>)
  return %r, %o, %s : tensor<?x7168xbf16>, tensor<257xi32>, tensor<?x8xi32>
}
func.func @permute_e8_k2(%x: tensor<?x4096xbf16>, %ids: tensor<?x2xi32>) -> (tensor<?x4096xbf16>, tensor<9xi64>, tensor<?x2xi64>) {
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x4096xbf16>, tensor<?x2xi32>) -> (tensor<?x4096xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  return %r, %o, %s : tensor<?x4096xbf16>, tensor<9xi64>, tensor<?x2xi64>
}
