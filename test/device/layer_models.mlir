// Whole MoE layers of the team's five reference models, each compiled by
// --moe-gpu-pipeline (--moe-fuse-layer) to one layer.v1 entry named after
// its function, for test/device/layer.py.
func.func @mixtral_8x7b(%x: tensor<?x4096xbf16>, %logits: tensor<?x8xf32>,
    %w13: tensor<8x28672x4096xbf16>, %w2: tensor<8x4096x14336xbf16>) -> tensor<?x4096xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x4096xbf16>, tensor<?x2xi32>) -> (tensor<?x4096xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x4096xbf16>, tensor<9xi64>, tensor<8x28672x4096xbf16>, tensor<8x4096x14336xbf16>) -> tensor<?x4096xbf16>
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x4096xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x4096xbf16>
  return %out : tensor<?x4096xbf16>
}
func.func @qwen3_30b_a3b(%x: tensor<?x2048xbf16>, %logits: tensor<?x128xf32>,
    %w13: tensor<128x1536x2048xbf16>, %w2: tensor<128x2048x768xbf16>) -> tensor<?x2048xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 8 renormalize
      : (tensor<?x128xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x2048xbf16>, tensor<?x8xi32>) -> (tensor<?x2048xbf16>, tensor<129xi64>, tensor<?x8xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x2048xbf16>, tensor<129xi64>, tensor<128x1536x2048xbf16>, tensor<128x2048x768xbf16>) -> tensor<?x2048xbf16>
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x2048xbf16>, tensor<?x8xi64>, tensor<?x8xf32>) -> tensor<?x2048xbf16>
  return %out : tensor<?x2048xbf16>
}
func.func @olmoe_1b_7b(%x: tensor<?x2048xbf16>, %logits: tensor<?x64xf32>,
    %w13: tensor<64x2048x2048xbf16>, %w2: tensor<64x2048x1024xbf16>) -> tensor<?x2048xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 8
      : (tensor<?x64xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x2048xbf16>, tensor<?x8xi32>) -> (tensor<?x2048xbf16>, tensor<65xi64>, tensor<?x8xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x2048xbf16>, tensor<65xi64>, tensor<64x2048x2048xbf16>, tensor<64x2048x1024xbf16>) -> tensor<?x2048xbf16>
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x2048xbf16>, tensor<?x8xi64>, tensor<?x8xf32>) -> tensor<?x2048xbf16>
  return %out : tensor<?x2048xbf16>
}
func.func @deepseek_v3(%x: tensor<?x7168xbf16>, %logits: tensor<?x256xf32>, %bias: tensor<256xf32>,
    %w13: tensor<256x4096x7168xbf16>, %w2: tensor<256x7168x2048xbf16>) -> tensor<?x7168xbf16> {
  %ids, %w = moe.route sigmoid_topk %logits bias %bias top 8 groups 8 select 4 renormalize scale 2.5
      : (tensor<?x256xf32>, tensor<256xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x7168xbf16>, tensor<?x8xi32>) -> (tensor<?x7168xbf16>, tensor<257xi64>, tensor<?x8xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x7168xbf16>, tensor<257xi64>, tensor<256x4096x7168xbf16>, tensor<256x7168x2048xbf16>) -> tensor<?x7168xbf16>
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x7168xbf16>, tensor<?x8xi64>, tensor<?x8xf32>) -> tensor<?x7168xbf16>
  return %out : tensor<?x7168xbf16>
}
func.func @gpt_oss_120b(%x: tensor<?x2880xbf16>, %logits: tensor<?x128xf32>,
    %w13: tensor<128x5760x2880xbf16>, %b13: tensor<128x5760xbf16>,
    %w2: tensor<128x2880x2880xbf16>, %b2: tensor<128x2880xf32>) -> tensor<?x2880xbf16> {
  %ids, %w = moe.route topk_softmax %logits top 4
      : (tensor<?x128xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x2880xbf16>, tensor<?x4xi32>) -> (tensor<?x2880xbf16>, tensor<129xi64>, tensor<?x4xi64>)
  %y = moe.expert_mlp gptoss %rows, %offsets, %w13, %w2 gate_up_bias %b13 down_bias %b2 alpha 1.702 limit 7.0
      : (tensor<?x2880xbf16>, tensor<129xi64>, tensor<128x5760x2880xbf16>, tensor<128x2880x2880xbf16>, tensor<128x5760xbf16>, tensor<128x2880xf32>) -> tensor<?x2880xbf16>
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x2880xbf16>, tensor<?x4xi64>, tensor<?x4xf32>) -> tensor<?x2880xbf16>
  return %out : tensor<?x2880xbf16>
}
