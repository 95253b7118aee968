// MoE layers with a shared expert, for test/device/shared_layer.py: each
// compiled by --moe-gpu-pipeline, which runs the shared expert as routed
// experts (--moe-route-shared-experts) inside one layer.v1 entry named after
// its function.
// DeepSeek-V3: one ungated shared expert as wide as a routed one.
func.func @deepseek_v3(%x: tensor<?x7168xbf16>, %logits: tensor<?x256xf32>, %bias: tensor<256xf32>,
    %w13: tensor<256x4096x7168xbf16>, %w2: tensor<256x7168x2048xbf16>,
    %s13: tensor<4096x7168xbf16>, %s2: tensor<7168x2048xbf16>) -> tensor<?x7168xbf16> {
  %ids, %w = moe.route sigmoid_topk %logits bias %bias top 8 groups 8 select 4 renormalize scale 2.5
      : (tensor<?x256xf32>, tensor<256xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x7168xbf16>, tensor<?x8xi32>) -> (tensor<?x7168xbf16>, tensor<257xi64>, tensor<?x8xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x7168xbf16>, tensor<257xi64>, tensor<256x4096x7168xbf16>, tensor<256x7168x2048xbf16>) -> tensor<?x7168xbf16>
  %s = moe.shared_mlp silu %x, %s13, %s2
      : (tensor<?x7168xbf16>, tensor<4096x7168xbf16>, tensor<7168x2048xbf16>) -> tensor<?x7168xbf16>
  %out = moe.unpermute %y, %slots weights %w shared %s
      : (tensor<?x7168xbf16>, tensor<?x8xi64>, tensor<?x8xf32>, tensor<?x7168xbf16>) -> tensor<?x7168xbf16>
  return %out : tensor<?x7168xbf16>
}
// Qwen1.5-MoE-A2.7B (Qwen2-MoE): softmax top-4 without renormalisation and
// a shared expert four routed experts wide, scaled by sigmoid(x . gate).
func.func @qwen1_5_moe_a2_7b(%x: tensor<?x2048xbf16>, %logits: tensor<?x60xbf16>,
    %w13: tensor<60x2816x2048xbf16>, %w2: tensor<60x2048x1408xbf16>,
    %s13: tensor<11264x2048xbf16>, %s2: tensor<2048x5632xbf16>, %g: tensor<1x2048xbf16>) -> tensor<?x2048xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 4
      : (tensor<?x60xbf16>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x2048xbf16>, tensor<?x4xi32>) -> (tensor<?x2048xbf16>, tensor<61xi64>, tensor<?x4xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x2048xbf16>, tensor<61xi64>, tensor<60x2816x2048xbf16>, tensor<60x2048x1408xbf16>) -> tensor<?x2048xbf16>
  %s = moe.shared_mlp silu %x, %s13, %s2 gate %g
      : (tensor<?x2048xbf16>, tensor<11264x2048xbf16>, tensor<2048x5632xbf16>, tensor<1x2048xbf16>) -> tensor<?x2048xbf16>
  %out = moe.unpermute %y, %slots weights %w shared %s
      : (tensor<?x2048xbf16>, tensor<?x4xi64>, tensor<?x4xf32>, tensor<?x2048xbf16>) -> tensor<?x2048xbf16>
  return %out : tensor<?x2048xbf16>
}
// A gated shared expert 2.5 routed experts wide: three slices, the last half
// zero rows and columns.
func.func @padded(%x: tensor<?x1024xbf16>, %logits: tensor<?x16xf32>,
    %w13: tensor<16x1024x1024xbf16>, %w2: tensor<16x1024x512xbf16>,
    %s13: tensor<2560x1024xbf16>, %s2: tensor<1024x1280xbf16>, %g: tensor<1x1024xbf16>) -> tensor<?x1024xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x16xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x1024xbf16>, tensor<?x2xi32>) -> (tensor<?x1024xbf16>, tensor<17xi64>, tensor<?x2xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x1024xbf16>, tensor<17xi64>, tensor<16x1024x1024xbf16>, tensor<16x1024x512xbf16>) -> tensor<?x1024xbf16>
  %s = moe.shared_mlp silu %x, %s13, %s2 gate %g
      : (tensor<?x1024xbf16>, tensor<2560x1024xbf16>, tensor<1024x1280xbf16>, tensor<1x1024xbf16>) -> tensor<?x1024xbf16>
  %out = moe.unpermute %y, %slots weights %w shared %s
      : (tensor<?x1024xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x1024xbf16>) -> tensor<?x1024xbf16>
  return %out : tensor<?x1024xbf16>
}
