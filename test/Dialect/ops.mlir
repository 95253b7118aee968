// Every moe op and attribute parses, verifies and prints back to a form that
// parses again to the same thing.
// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s

// CHECK-LABEL: func @mixtral_layer
func.func @mixtral_layer(%x: tensor<?x64xbf16>, %logits: tensor<?x8xf32>,
                         %w13: tensor<8x256x64xbf16>, %w2: tensor<8x64x128xbf16>)
    -> tensor<?x64xbf16> {
  // CHECK: moe.route softmax_topk %{{.*}} top 2 renormalize : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  // CHECK: moe.permute %{{.*}}, %{{.*}} : (tensor<?x64xbf16>, tensor<?x2xi32>) -> (tensor<?x64xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x64xbf16>, tensor<?x2xi32>)
      -> (tensor<?x64xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  // CHECK: moe.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x64xbf16>, tensor<8x256x64xbf16>, tensor<9xi64>) -> tensor<?x256xbf16>
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x64xbf16>, tensor<8x256x64xbf16>, tensor<9xi64>) -> tensor<?x256xbf16>
  // CHECK: moe.swiglu silu %{{.*}} : (tensor<?x256xbf16>) -> tensor<?x128xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x256xbf16>) -> tensor<?x128xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x128xbf16>, tensor<8x64x128xbf16>, tensor<9xi64>) -> tensor<?x64xbf16>
  // CHECK: moe.unpermute %{{.*}}, %{{.*}} weights %{{.*}} : (tensor<?x64xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x64xbf16>
  %y = moe.unpermute %o, %slots weights %w
      : (tensor<?x64xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// CHECK-LABEL: func @deepseek_route
func.func @deepseek_route(%logits: tensor<?x256xf32>, %bias: tensor<256xf32>)
    -> (tensor<?x8xi32>, tensor<?x8xf32>) {
  // CHECK: moe.route sigmoid_topk %{{.*}} bias %{{.*}} top 8 groups 8 select 4 renormalize scale 2.500000e+00
  %ids, %w = moe.route sigmoid_topk %logits bias %bias top 8 groups 8 select 4
      renormalize scale 2.5
      : (tensor<?x256xf32>, tensor<256xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>)
  return %ids, %w : tensor<?x8xi32>, tensor<?x8xf32>
}

// CHECK-LABEL: func @gptoss_parts
func.func @gptoss_parts(%logits: tensor<3x16xbf16>, %rows: tensor<?x24xf32>,
                        %w13: tensor<16x32x24xf32>, %offsets: tensor<17xi32>,
                        %b13: tensor<16x32xf32>, %scale: tensor<?xf32>)
    -> (tensor<3x4xi32>, tensor<?x16xf32>) {
  // CHECK: moe.route topk_softmax %{{.*}} top 4 :
  %ids, %w = moe.route topk_softmax %logits top 4
      : (tensor<3x16xbf16>) -> (tensor<3x4xi32>, tensor<3x4xf32>)
  // CHECK: moe.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} scale %{{.*}} :
  %gu = moe.grouped_matmul %rows, %w13, %offsets bias %b13 scale %scale
      : (tensor<?x24xf32>, tensor<16x32x24xf32>, tensor<17xi32>, tensor<16x32xf32>,
         tensor<?xf32>) -> tensor<?x32xf32>
  // CHECK: moe.swiglu gptoss %{{.*}} scale %{{.*}} alpha 1.702000e+00 limit 7.000000e+00
  %h = moe.swiglu gptoss %gu scale %scale alpha 1.702 limit 7.0
      : (tensor<?x32xf32>, tensor<?xf32>) -> tensor<?x16xf32>
  // Gate and up alternating, as transformers keeps GPT-OSS's gate-up.
  // CHECK: moe.swiglu gptoss %{{.*}} scale %{{.*}} interleaved alpha 1.702000e+00 :
  %hi = moe.swiglu gptoss %gu scale %scale interleaved alpha 1.702
      : (tensor<?x32xf32>, tensor<?xf32>) -> tensor<?x16xf32>
  return %ids, %h : tensor<3x4xi32>, tensor<?x16xf32>
}

// CHECK-LABEL: func @padded_permute
func.func @padded_permute(%x: tensor<5x8xf32>, %ids: tensor<5x2xi32>)
    -> (tensor<22x8xf32>, tensor<5xi32>, tensor<5x2xi32>) {
  // CHECK: moe.permute %{{.*}}, %{{.*}} pad_to 4 :
  %rows, %offsets, %slots = moe.permute %x, %ids pad_to 4
      : (tensor<5x8xf32>, tensor<5x2xi32>) -> (tensor<22x8xf32>, tensor<5xi32>, tensor<5x2xi32>)
  return %rows, %offsets, %slots : tensor<22x8xf32>, tensor<5xi32>, tensor<5x2xi32>
}

// CHECK-LABEL: func @expert_mlp
func.func @expert_mlp(%rows: tensor<?x12xf32>, %offsets: tensor<5xi64>,
                      %w13: tensor<4x16x12xf32>, %w2: tensor<4x12x8xf32>,
                      %b13: tensor<4x16xf32>, %b2: tensor<4x12xf32>,
                      %s: tensor<?xf32>) -> (tensor<?x12xf32>, tensor<?x12xf32>) {
  // CHECK: moe.expert_mlp silu %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} :
  %a = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x12xf32>, tensor<4x12x8xf32>)
      -> tensor<?x12xf32>
  // CHECK: moe.expert_mlp gptoss %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} gate_up_bias %{{.*}} down_bias %{{.*}} scale %{{.*}} limit 5.000000e+00 :
  %b = moe.expert_mlp gptoss %rows, %offsets, %w13, %w2 gate_up_bias %b13
      down_bias %b2 scale %s limit 5.0
      : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x12xf32>, tensor<4x12x8xf32>,
         tensor<4x16xf32>, tensor<4x12xf32>, tensor<?xf32>) -> tensor<?x12xf32>
  return %a, %b : tensor<?x12xf32>, tensor<?x12xf32>
}

// CHECK-LABEL: func @quantization
func.func @quantization(%x: tensor<?x64xbf16>, %w: tensor<2x256x128xf32>)
    -> (tensor<?x64xf32>, tensor<2x256x128xbf16>) {
  // CHECK: moe.quantize %{{.*}} to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU>
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU>
  // CHECK: moe.dequantize %{{.*}}, %{{.*}} from <f8E4M3FN, [1, 32], f8E8M0FNU>
  %d = moe.dequantize %q, %s from <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU> -> tensor<?x64xf32>
  // CHECK: moe.quantize %{{.*}} to <f8E5M2, [128, 128], f32>
  %wq, %ws = moe.quantize %w to <f8E5M2, [128, 128], f32>
      : tensor<2x256x128xf32> -> tensor<2x256x128xf8E5M2>, tensor<2x2x1xf32>
  %wd = moe.dequantize %wq, %ws from <f8E5M2, [128, 128], f32>
      : tensor<2x256x128xf8E5M2>, tensor<2x2x1xf32> -> tensor<2x256x128xbf16>
  return %d, %wd : tensor<?x64xf32>, tensor<2x256x128xbf16>
}

// CHECK-LABEL: func @fake_quantization
func.func @fake_quantization(%x: tensor<?x64xbf16>, %w: tensor<2x256x128xf32>)
    -> (tensor<?x64xbf16>, tensor<2x256x128xf32>) {
  // CHECK: moe.fake_quantize %{{.*}} to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x64xbf16>
  %x2 = moe.fake_quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x64xbf16>
  // CHECK: moe.fake_quantize %{{.*}} to <f8E5M2, [128, 128], f32> : tensor<2x256x128xf32>
  %w2 = moe.fake_quantize %w to <f8E5M2, [128, 128], f32> : tensor<2x256x128xf32>
  return %x2, %w2 : tensor<?x64xbf16>, tensor<2x256x128xf32>
}

// An FP8 intermediate, with rows and weights read through moe.dequantize.
// CHECK-LABEL: func @expert_mlp_intermediate
// CHECK: moe.expert_mlp silu %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale %{{.*}} intermediate <f8E4M3FN, [1, 128], f32> : (tensor<?x128xbf16>, tensor<5xi64>, tensor<4x512x128xbf16>, tensor<4x128x256xbf16>, tensor<?xf32>) -> tensor<?x128xbf16>
// CHECK: moe.expert_mlp gptoss %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} alpha 1.500000e+00 intermediate <f8E5M2, [1, 32], f8E8M0FNU> :
func.func @expert_mlp_intermediate(
    %rq: tensor<?x128xf8E4M3FN>, %rs: tensor<?x1xf32>, %offsets: tensor<5xi64>,
    %w13q: tensor<4x512x128xf8E4M3FN>, %w13s: tensor<4x4x1xf32>,
    %w2q: tensor<4x128x256xf8E4M3FN>, %w2s: tensor<4x1x2xf32>, %s: tensor<?xf32>)
    -> (tensor<?x128xbf16>, tensor<?x128xbf16>) {
  %rows = moe.dequantize %rq, %rs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x128xf8E4M3FN>, tensor<?x1xf32> -> tensor<?x128xbf16>
  %w13 = moe.dequantize %w13q, %w13s from <f8E4M3FN, [1, 128, 128], f32>
      : tensor<4x512x128xf8E4M3FN>, tensor<4x4x1xf32> -> tensor<4x512x128xbf16>
  %w2 = moe.dequantize %w2q, %w2s from <f8E4M3FN, [1, 128, 128], f32>
      : tensor<4x128x256xf8E4M3FN>, tensor<4x1x2xf32> -> tensor<4x128x256xbf16>
  %a = moe.expert_mlp silu %rows, %offsets, %w13, %w2 scale %s
      intermediate <f8E4M3FN, [1, 128], f32>
      : (tensor<?x128xbf16>, tensor<5xi64>, tensor<4x512x128xbf16>, tensor<4x128x256xbf16>, tensor<?xf32>)
      -> tensor<?x128xbf16>
  %b = moe.expert_mlp gptoss %rows, %offsets, %w13, %w2 alpha 1.5
      intermediate <f8E5M2, [1, 32], f8E8M0FNU>
      : (tensor<?x128xbf16>, tensor<5xi64>, tensor<4x512x128xbf16>, tensor<4x128x256xbf16>)
      -> tensor<?x128xbf16>
  return %a, %b : tensor<?x128xbf16>, tensor<?x128xbf16>
}

// CHECK-LABEL: func @encoding_attribute
// CHECK-SAME: moe.encoding = #moe.block_scaled<f8E4M3FN, [128, 128], f32>
func.func @encoding_attribute() attributes {
    moe.encoding = #moe.block_scaled<f8E4M3FN, [128, 128], f32>} {
  return
}

// CHECK-LABEL: func @layer
// CHECK: %[[Y:.*]] = moe.layer : tensor<?x12xf32> {
// CHECK: moe.route softmax_topk
// CHECK: moe.permute
// CHECK: moe.expert_mlp silu
// CHECK: %[[O:.*]] = moe.unpermute
// CHECK: moe.yield %[[O]] : tensor<?x12xf32>
// CHECK: return %[[Y]]
func.func @layer(%x: tensor<?x12xf32>, %logits: tensor<?x4xf32>,
                 %w13: tensor<4x16x12xf32>, %w2: tensor<4x12x8xf32>) -> tensor<?x12xf32> {
  %y = moe.layer : tensor<?x12xf32> {
    %ids, %w = moe.route softmax_topk %logits top 2
        : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
    %rows, %offsets, %slots = moe.permute %x, %ids
        : (tensor<?x12xf32>, tensor<?x2xi32>) -> (tensor<?x12xf32>, tensor<5xi64>, tensor<?x2xi64>)
    %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2
        : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x12xf32>, tensor<4x12x8xf32>) -> tensor<?x12xf32>
    %o = moe.unpermute %h, %slots weights %w
        : (tensor<?x12xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x12xf32>
    moe.yield %o : tensor<?x12xf32>
  }
  return %y : tensor<?x12xf32>
}

// CHECK-LABEL: func @shared_experts
// CHECK: moe.shared_mlp silu %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x64xbf16>, tensor<256x64xbf16>, tensor<64x128xbf16>) -> tensor<?x64xbf16>
// CHECK: moe.shared_mlp silu %{{.*}}, %{{.*}}, %{{.*}} gate %{{.*}} : (tensor<?x64xbf16>, tensor<96x64xbf16>, tensor<64x48xbf16>, tensor<1x64xbf16>) -> tensor<?x64xf32>
// CHECK: moe.unpermute %{{.*}}, %{{.*}} weights %{{.*}} shared %{{.*}} : (tensor<?x64xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
// CHECK: moe.unpermute %{{.*}}, %{{.*}} shared %{{.*}} : (tensor<?x64xbf16>, tensor<?x2xi64>, tensor<?x64xf32>) -> tensor<?x64xf32>
func.func @shared_experts(%x: tensor<?x64xbf16>, %o: tensor<?x64xbf16>,
                          %slots: tensor<?x2xi64>, %w: tensor<?x2xf32>,
                          %sw13: tensor<256x64xbf16>, %sw2: tensor<64x128xbf16>,
                          %gw13: tensor<96x64xbf16>, %gw2: tensor<64x48xbf16>,
                          %gate: tensor<1x64xbf16>)
    -> (tensor<?x64xbf16>, tensor<?x64xf32>) {
  // DeepSeek-V3: one shared expert, weight 1.
  %s = moe.shared_mlp silu %x, %sw13, %sw2
      : (tensor<?x64xbf16>, tensor<256x64xbf16>, tensor<64x128xbf16>) -> tensor<?x64xbf16>
  // Qwen2-MoE: a gated shared expert of its own width, f32 result.
  %g = moe.shared_mlp silu %x, %gw13, %gw2 gate %gate
      : (tensor<?x64xbf16>, tensor<96x64xbf16>, tensor<64x48xbf16>, tensor<1x64xbf16>) -> tensor<?x64xf32>
  %y = moe.unpermute %o, %slots weights %w shared %s
      : (tensor<?x64xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
  %z = moe.unpermute %o, %slots shared %g
      : (tensor<?x64xbf16>, tensor<?x2xi64>, tensor<?x64xf32>) -> tensor<?x64xf32>
  return %y, %z : tensor<?x64xbf16>, tensor<?x64xf32>
}

// CHECK-LABEL: func @layer_with_shared_expert
// CHECK: %[[Y:.*]] = moe.layer : tensor<?x12xf32> {
// CHECK: moe.expert_mlp silu
// CHECK: %[[S:.*]] = moe.shared_mlp silu
// CHECK: %[[O:.*]] = moe.unpermute %{{.*}}, %{{.*}} weights %{{.*}} shared %[[S]]
// CHECK: moe.yield %[[O]] : tensor<?x12xf32>
func.func @layer_with_shared_expert(%x: tensor<?x12xf32>, %logits: tensor<?x4xf32>,
                                    %w13: tensor<4x16x12xf32>, %w2: tensor<4x12x8xf32>,
                                    %sw13: tensor<20x12xf32>, %sw2: tensor<12x10xf32>)
    -> tensor<?x12xf32> {
  %y = moe.layer : tensor<?x12xf32> {
    %ids, %w = moe.route softmax_topk %logits top 2
        : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
    %rows, %offsets, %slots = moe.permute %x, %ids
        : (tensor<?x12xf32>, tensor<?x2xi32>) -> (tensor<?x12xf32>, tensor<5xi64>, tensor<?x2xi64>)
    %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2
        : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x12xf32>, tensor<4x12x8xf32>) -> tensor<?x12xf32>
    %s = moe.shared_mlp silu %x, %sw13, %sw2
        : (tensor<?x12xf32>, tensor<20x12xf32>, tensor<12x10xf32>) -> tensor<?x12xf32>
    %o = moe.unpermute %h, %slots weights %w shared %s
        : (tensor<?x12xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x12xf32>) -> tensor<?x12xf32>
    moe.yield %o : tensor<?x12xf32>
  }
  return %y : tensor<?x12xf32>
}

// The backward ops: Mixtral-style in bf16 with i64 offsets and slots
// (weighted unpermute, no biases, silu, softmax_topk).
// CHECK-LABEL: func @backward_bf16
func.func @backward_bf16(%dy: tensor<?x64xbf16>, %o: tensor<?x64xbf16>, %slots: tensor<?x2xi64>,
                         %w: tensor<?x2xf32>, %h: tensor<?x128xbf16>, %gu: tensor<?x256xbf16>,
                         %rows: tensor<?x64xbf16>, %offsets: tensor<9xi64>,
                         %w2: tensor<8x64x128xbf16>, %w13: tensor<8x256x64xbf16>,
                         %logits: tensor<?x8xf32>, %ids: tensor<?x2xi32>)
    -> (tensor<?x64xbf16>, tensor<8x64x128xbf16>, tensor<8x256x64xbf16>, tensor<?x8xf32>) {
  // CHECK: moe.unpermute_grad %{{.*}}, %{{.*}}, %{{.*}} weights %{{.*}} : (tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> (tensor<?x64xbf16>, tensor<?x2xf32>)
  %do, %dw = moe.unpermute_grad %dy, %o, %slots weights %w
      : (tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x2xi64>, tensor<?x2xf32>)
      -> (tensor<?x64xbf16>, tensor<?x2xf32>)
  // CHECK: moe.grouped_dgrad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x64xbf16>, tensor<8x64x128xbf16>, tensor<9xi64>) -> tensor<?x128xbf16>
  %dh = moe.grouped_dgrad %do, %w2, %offsets
      : (tensor<?x64xbf16>, tensor<8x64x128xbf16>, tensor<9xi64>) -> tensor<?x128xbf16>
  // CHECK: moe.grouped_wgrad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x64xbf16>, tensor<?x128xbf16>, tensor<9xi64>) -> tensor<8x64x128xbf16>
  %dw2 = moe.grouped_wgrad %do, %h, %offsets
      : (tensor<?x64xbf16>, tensor<?x128xbf16>, tensor<9xi64>) -> tensor<8x64x128xbf16>
  // CHECK: moe.swiglu_grad silu %{{.*}}, %{{.*}} : (tensor<?x256xbf16>, tensor<?x128xbf16>) -> tensor<?x256xbf16>
  %dgu = moe.swiglu_grad silu %gu, %dh
      : (tensor<?x256xbf16>, tensor<?x128xbf16>) -> tensor<?x256xbf16>
  %drows = moe.grouped_dgrad %dgu, %w13, %offsets
      : (tensor<?x256xbf16>, tensor<8x256x64xbf16>, tensor<9xi64>) -> tensor<?x64xbf16>
  // The down dgrad with the activation's gradient in its epilogue.
  // CHECK: moe.grouped_dgrad %{{.*}}, %{{.*}}, %{{.*}} act_grad silu %{{.*}} : (tensor<?x64xbf16>, tensor<8x64x128xbf16>, tensor<9xi64>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  %dgu2 = moe.grouped_dgrad %do, %w2, %offsets act_grad silu %gu
      : (tensor<?x64xbf16>, tensor<8x64x128xbf16>, tensor<9xi64>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  // CHECK: moe.grouped_dgrad %{{.*}}, %{{.*}}, %{{.*}} act_grad gptoss %{{.*}} alpha 1.500000e+00 limit 5.000000e+00 : (
  %dgu3 = moe.grouped_dgrad %do, %w2, %offsets act_grad gptoss %gu alpha 1.5 limit 5.0
      : (tensor<?x64xbf16>, tensor<8x64x128xbf16>, tensor<9xi64>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  %dw13 = moe.grouped_wgrad %dgu, %rows, %offsets
      : (tensor<?x256xbf16>, tensor<?x64xbf16>, tensor<9xi64>) -> tensor<8x256x64xbf16>
  // CHECK: moe.route_grad softmax_topk %{{.*}}, %{{.*}}, %{{.*}} renormalize : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x8xf32>
  %dl = moe.route_grad softmax_topk %logits, %ids, %dw renormalize
      : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x8xf32>
  return %drows, %dw2, %dw13, %dl
      : tensor<?x64xbf16>, tensor<8x64x128xbf16>, tensor<8x256x64xbf16>, tensor<?x8xf32>
}

// GPT-OSS-style in f32 with i32 offsets and slots: unweighted unpermute,
// bias gradients, gptoss with alpha and limit, with one of them and with neither.
// CHECK-LABEL: func @backward_f32
func.func @backward_f32(%dy: tensor<3x24xf32>, %o: tensor<?x24xf32>, %slots: tensor<3x4xi32>,
                        %h: tensor<?x16xf32>, %gu: tensor<?x32xf32>,
                        %offsets: tensor<17xi32>, %w2: tensor<16x24x16xf32>)
    -> (tensor<?x24xf32>, tensor<16x24x16xf32>, tensor<16x24xf32>, tensor<?x32xf32>,
        tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  // CHECK: moe.unpermute_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<3x24xf32>, tensor<?x24xf32>, tensor<3x4xi32>) -> tensor<?x24xf32>
  %do = moe.unpermute_grad %dy, %o, %slots
      : (tensor<3x24xf32>, tensor<?x24xf32>, tensor<3x4xi32>) -> tensor<?x24xf32>
  // CHECK: moe.grouped_dgrad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x24xf32>, tensor<16x24x16xf32>, tensor<17xi32>) -> tensor<?x16xf32>
  %dh = moe.grouped_dgrad %do, %w2, %offsets
      : (tensor<?x24xf32>, tensor<16x24x16xf32>, tensor<17xi32>) -> tensor<?x16xf32>
  // CHECK: moe.grouped_wgrad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x24xf32>, tensor<?x16xf32>, tensor<17xi32>) -> (tensor<16x24x16xf32>, tensor<16x24xf32>)
  %dw2, %db2 = moe.grouped_wgrad %do, %h, %offsets
      : (tensor<?x24xf32>, tensor<?x16xf32>, tensor<17xi32>) -> (tensor<16x24x16xf32>, tensor<16x24xf32>)
  // CHECK: moe.grouped_wgrad %{{.*}}, %{{.*}}, %{{.*}} kn_weights : (tensor<?x24xf32>, tensor<?x16xf32>, tensor<17xi32>) -> (tensor<16x16x24xf32>, tensor<16x24xf32>)
  %dw2kn, %db2kn = moe.grouped_wgrad %do, %h, %offsets kn_weights
      : (tensor<?x24xf32>, tensor<?x16xf32>, tensor<17xi32>) -> (tensor<16x16x24xf32>, tensor<16x24xf32>)
  // CHECK: moe.swiglu_grad gptoss %{{.*}}, %{{.*}} alpha 1.702000e+00 limit 7.000000e+00 : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
  %a = moe.swiglu_grad gptoss %gu, %dh alpha 1.702 limit 7.0
      : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
  // CHECK: moe.swiglu_grad gptoss %{{.*}}, %{{.*}} : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
  %b = moe.swiglu_grad gptoss %gu, %dh
      : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
  // CHECK: moe.swiglu_grad gptoss %{{.*}}, %{{.*}} interleaved limit 7.000000e+00 : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
  %bi = moe.swiglu_grad gptoss %gu, %dh interleaved limit 7.0
      : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
  // CHECK: moe.swiglu_grad gptoss %{{.*}}, %{{.*}} limit 5.000000e+00 : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
  %c = moe.swiglu_grad gptoss %gu, %dh limit 5.0
      : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
  // CHECK: moe.swiglu_grad gptoss %{{.*}}, %{{.*}} alpha 1.500000e+00 : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
  %d = moe.swiglu_grad gptoss %gu, %dh alpha 1.5
      : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
  return %do, %dw2, %db2, %a, %b, %c, %d
      : tensor<?x24xf32>, tensor<16x24x16xf32>, tensor<16x24xf32>, tensor<?x32xf32>,
        tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}

// A bf16 weight gradient beside its f32 bias gradient, as GPT-OSS keeps
// its biases.
// CHECK-LABEL: func @wgrad_bias_f32
// CHECK: moe.grouped_wgrad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<5xi64>) -> (tensor<4x32x16xbf16>, tensor<4x32xf32>)
func.func @wgrad_bias_f32(%g: tensor<?x32xbf16>, %r: tensor<?x16xbf16>, %o: tensor<5xi64>)
    -> (tensor<4x32x16xbf16>, tensor<4x32xf32>) {
  %dw, %db = moe.grouped_wgrad %g, %r, %o
      : (tensor<?x32xbf16>, tensor<?x16xbf16>, tensor<5xi64>) -> (tensor<4x32x16xbf16>, tensor<4x32xf32>)
  return %dw, %db : tensor<4x32x16xbf16>, tensor<4x32xf32>
}

// Each routing, plain and with renormalize and scale; bf16 logits get a
// bf16 gradient.
// CHECK-LABEL: func @route_grads
func.func @route_grads(%l: tensor<?x16xf32>, %lb: tensor<3x16xbf16>, %ids: tensor<?x4xi32>,
                       %idsb: tensor<3x4xi32>, %dw: tensor<?x4xf32>, %dwb: tensor<3x4xf32>)
    -> (tensor<?x16xf32>, tensor<?x16xf32>, tensor<3x16xbf16>, tensor<3x16xbf16>,
        tensor<?x16xf32>, tensor<?x16xf32>) {
  // CHECK: moe.route_grad softmax_topk %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x16xf32>, tensor<?x4xi32>, tensor<?x4xf32>) -> tensor<?x16xf32>
  %a = moe.route_grad softmax_topk %l, %ids, %dw
      : (tensor<?x16xf32>, tensor<?x4xi32>, tensor<?x4xf32>) -> tensor<?x16xf32>
  // CHECK: moe.route_grad softmax_topk %{{.*}}, %{{.*}}, %{{.*}} renormalize scale 2.500000e+00 : (tensor<?x16xf32>, tensor<?x4xi32>, tensor<?x4xf32>) -> tensor<?x16xf32>
  %b = moe.route_grad softmax_topk %l, %ids, %dw renormalize scale 2.5
      : (tensor<?x16xf32>, tensor<?x4xi32>, tensor<?x4xf32>) -> tensor<?x16xf32>
  // CHECK: moe.route_grad topk_softmax %{{.*}}, %{{.*}}, %{{.*}} : (tensor<3x16xbf16>, tensor<3x4xi32>, tensor<3x4xf32>) -> tensor<3x16xbf16>
  %c = moe.route_grad topk_softmax %lb, %idsb, %dwb
      : (tensor<3x16xbf16>, tensor<3x4xi32>, tensor<3x4xf32>) -> tensor<3x16xbf16>
  // CHECK: moe.route_grad topk_softmax %{{.*}}, %{{.*}}, %{{.*}} renormalize scale 5.000000e-01 : (tensor<3x16xbf16>, tensor<3x4xi32>, tensor<3x4xf32>) -> tensor<3x16xbf16>
  %d = moe.route_grad topk_softmax %lb, %idsb, %dwb renormalize scale 0.5
      : (tensor<3x16xbf16>, tensor<3x4xi32>, tensor<3x4xf32>) -> tensor<3x16xbf16>
  // CHECK: moe.route_grad sigmoid_topk %{{.*}}, %{{.*}}, %{{.*}} renormalize scale 2.500000e+00 :
  %e = moe.route_grad sigmoid_topk %l, %ids, %dw renormalize scale 2.5
      : (tensor<?x16xf32>, tensor<?x4xi32>, tensor<?x4xf32>) -> tensor<?x16xf32>
  // CHECK: moe.route_grad sigmoid_topk %{{.*}}, %{{.*}}, %{{.*}} scale 1.000000e+00 :
  %f = moe.route_grad sigmoid_topk %l, %ids, %dw scale 1.0
      : (tensor<?x16xf32>, tensor<?x4xi32>, tensor<?x4xf32>) -> tensor<?x16xf32>
  return %a, %b, %c, %d, %e, %f
      : tensor<?x16xf32>, tensor<?x16xf32>, tensor<3x16xbf16>, tensor<3x16xbf16>,
        tensor<?x16xf32>, tensor<?x16xf32>
}

// CHECK-LABEL: func @exchanges
func.func @exchanges(%rows: tensor<?x64xbf16>, %offsets: tensor<9xi64>,
                     %rows32: tensor<?x64xf32>, %offsets32: tensor<9xi32>)
    -> (tensor<?x64xbf16>, tensor<?x64xf32>) {
  // CHECK: moe.dispatch %{{.*}}, %{{.*}} ranks 4 : (tensor<?x64xbf16>, tensor<9xi64>) -> (tensor<?x64xbf16>, tensor<?x1xi32>, tensor<4xi64>)
  %recv, %ids, %counts = moe.dispatch %rows, %offsets ranks 4
      : (tensor<?x64xbf16>, tensor<9xi64>)
      -> (tensor<?x64xbf16>, tensor<?x1xi32>, tensor<4xi64>)
  // CHECK: moe.undispatch %{{.*}}, %{{.*}}, %{{.*}} ranks 4 : (tensor<?x64xbf16>, tensor<4xi64>, tensor<9xi64>) -> tensor<?x64xbf16>
  %back = moe.undispatch %recv, %counts, %offsets ranks 4
      : (tensor<?x64xbf16>, tensor<4xi64>, tensor<9xi64>) -> tensor<?x64xbf16>
  // CHECK: moe.dispatch %{{.*}}, %{{.*}} ranks 8 : (tensor<?x64xf32>, tensor<9xi32>) -> (tensor<?x64xf32>, tensor<?x1xi32>, tensor<8xi32>)
  %r2, %i2, %c2 = moe.dispatch %rows32, %offsets32 ranks 8
      : (tensor<?x64xf32>, tensor<9xi32>)
      -> (tensor<?x64xf32>, tensor<?x1xi32>, tensor<8xi32>)
  // CHECK: moe.undispatch %{{.*}}, %{{.*}}, %{{.*}} ranks 8 : (tensor<?x64xf32>, tensor<8xi32>, tensor<9xi32>) -> tensor<?x64xf32>
  %b2 = moe.undispatch %r2, %c2, %offsets32 ranks 8
      : (tensor<?x64xf32>, tensor<8xi32>, tensor<9xi32>) -> tensor<?x64xf32>
  return %back, %b2 : tensor<?x64xbf16>, tensor<?x64xf32>
}

// The shared expert's adjoint, gated and not: bf16 tokens and weights with a
// bf16 or an f32 output gradient (the f32 shared addend's), f32 throughout
// with dynamic and static token counts.
// CHECK-LABEL: func @shared_mlp_grads
func.func @shared_mlp_grads(%ds: tensor<?x16xbf16>, %ds32: tensor<?x16xf32>, %x: tensor<?x16xbf16>,
                            %w13: tensor<64x16xbf16>, %w2: tensor<16x32xbf16>, %g: tensor<1x16xbf16>,
                            %dsf: tensor<5x8xf32>, %xf: tensor<5x8xf32>, %xd: tensor<?x8xf32>,
                            %w13f: tensor<24x8xf32>, %w2f: tensor<8x12xf32>, %gf: tensor<1x8xf32>)
    -> (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>,
        tensor<?x16xbf16>, tensor<5x8xf32>, tensor<1x8xf32>, tensor<?x8xf32>, tensor<8x12xf32>) {
  // CHECK: moe.shared_mlp_grad silu %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} gate %{{.*}} : (tensor<?x16xbf16>, tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>) -> (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>)
  %dx, %dw13, %dw2, %dg = moe.shared_mlp_grad silu %ds, %x, %w13, %w2 gate %g
      : (tensor<?x16xbf16>, tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>)
      -> (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>)
  // CHECK: moe.shared_mlp_grad silu %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x16xf32>, tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>) -> (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>)
  %dx2, %dw13b, %dw2b = moe.shared_mlp_grad silu %ds32, %x, %w13, %w2
      : (tensor<?x16xf32>, tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>)
      -> (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>)
  // CHECK: moe.shared_mlp_grad silu %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} gate %{{.*}} : (tensor<5x8xf32>, tensor<5x8xf32>, tensor<24x8xf32>, tensor<8x12xf32>, tensor<1x8xf32>) -> (tensor<5x8xf32>, tensor<24x8xf32>, tensor<8x12xf32>, tensor<1x8xf32>)
  %dxf, %dw13f, %dw2f, %dgf = moe.shared_mlp_grad silu %dsf, %xf, %w13f, %w2f gate %gf
      : (tensor<5x8xf32>, tensor<5x8xf32>, tensor<24x8xf32>, tensor<8x12xf32>, tensor<1x8xf32>)
      -> (tensor<5x8xf32>, tensor<24x8xf32>, tensor<8x12xf32>, tensor<1x8xf32>)
  // CHECK: moe.shared_mlp_grad silu %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<5x8xf32>, tensor<?x8xf32>, tensor<24x8xf32>, tensor<8x12xf32>) -> (tensor<?x8xf32>, tensor<24x8xf32>, tensor<8x12xf32>)
  %dxd, %dw13d, %dw2d = moe.shared_mlp_grad silu %dsf, %xd, %w13f, %w2f
      : (tensor<5x8xf32>, tensor<?x8xf32>, tensor<24x8xf32>, tensor<8x12xf32>)
      -> (tensor<?x8xf32>, tensor<24x8xf32>, tensor<8x12xf32>)
  return %dx, %dw13, %dw2, %dg, %dx2, %dxf, %dgf, %dxd, %dw2d
      : tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>,
        tensor<?x16xbf16>, tensor<5x8xf32>, tensor<1x8xf32>, tensor<?x8xf32>, tensor<8x12xf32>
}

// Weights as GPT-OSS's experts lie, [E, K, N] (kn_weights), with a bias.
// CHECK-LABEL: func @kn_weights
// CHECK: moe.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} kn_weights : (tensor<?x64xbf16>, tensor<8x64x256xbf16>, tensor<9xi64>, tensor<8x256xf32>) -> tensor<?x256xbf16>
func.func @kn_weights(%rows: tensor<?x64xbf16>, %w13: tensor<8x64x256xbf16>,
                      %offsets: tensor<9xi64>, %b: tensor<8x256xf32>) -> tensor<?x256xbf16> {
  %gu = moe.grouped_matmul %rows, %w13, %offsets bias %b kn_weights
      : (tensor<?x64xbf16>, tensor<8x64x256xbf16>, tensor<9xi64>, tensor<8x256xf32>) -> tensor<?x256xbf16>
  return %gu : tensor<?x256xbf16>
}
