// RUN: moe-opt %s --moe-fuse-layer --split-input-file | FileCheck %s
// RUN: moe-opt %s --moe-fuse-layer --moe-expand-fused-ops --split-input-file | FileCheck %s --check-prefix=ROUND
// The CPU reference pipeline runs layers too (it inlines them first).
// RUN: moe-opt %s --moe-fuse-layer --moe-cpu-reference-pipeline --split-input-file | FileCheck %s --check-prefix=CPU

// The whole chain becomes one moe.layer in the combine's place, the ops
// unchanged inside it; expanding inlines them back.
// CHECK-LABEL: func @mixtral
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<?x16xbf16>, %[[L:[a-z0-9]+]]: tensor<?x8xf32>, %[[W13:[a-z0-9]+]]: tensor<8x48x16xbf16>, %[[W2:[a-z0-9]+]]: tensor<8x16x24xbf16>)
// CHECK-NEXT: %[[Y:.*]] = moe.layer : tensor<?x16xbf16> {
// CHECK-NEXT: %[[IDS:.*]], %[[W:.*]] = moe.route softmax_topk %[[L]] top 2 renormalize
// CHECK-NEXT: %[[ROWS:.*]], %[[OFF:.*]], %[[SLOTS:.*]] = moe.permute %[[X]], %[[IDS]]
// CHECK-NEXT: %[[H:.*]] = moe.expert_mlp silu %[[ROWS]], %[[OFF]], %[[W13]], %[[W2]] :
// CHECK-NEXT: %[[O:.*]] = moe.unpermute %[[H]], %[[SLOTS]] weights %[[W]]
// CHECK-NEXT: moe.yield %[[O]] : tensor<?x16xbf16>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[Y]]
// ROUND-LABEL: func @mixtral
// ROUND-NOT: moe.layer
// ROUND: moe.route
// ROUND-NEXT: moe.permute
// ROUND-NEXT: moe.grouped_matmul
// ROUND-NEXT: moe.swiglu
// ROUND-NEXT: moe.grouped_matmul
// ROUND-NEXT: %[[O:.*]] = moe.unpermute
// ROUND-NEXT: return %[[O]]
// CPU-LABEL: func @mixtral
// CPU-NOT: moe.
// CPU: return
func.func @mixtral(%x: tensor<?x16xbf16>, %logits: tensor<?x8xf32>,
                   %w13: tensor<8x48x16xbf16>, %w2: tensor<8x16x24xbf16>) -> tensor<?x16xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xbf16>, tensor<?x2xi32>) -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x16xbf16>, tensor<9xi64>, tensor<8x48x16xbf16>, tensor<8x16x24xbf16>) -> tensor<?x16xbf16>
  %y = moe.unpermute %h, %slots weights %w
      : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

// Rows that make a round trip through MXFP8 (moe.fake_quantize) on their way
// to the expert MLP bring it into the layer; the CPU reference expands it
// into the quantize -> dequantize pair it stands for.
// CHECK-LABEL: func @round_trip
// CHECK-NEXT: moe.layer : tensor<?x64xbf16> {
// CHECK-NEXT: moe.route
// CHECK-NEXT: %[[ROWS:.*]], %[[OFF:.*]], %{{.*}} = moe.permute
// CHECK-NEXT: %[[RQ:.*]] = moe.fake_quantize %[[ROWS]] to <f8E4M3FN, [1, 32], f8E8M0FNU>
// CHECK-NEXT: moe.expert_mlp silu %[[RQ]], %[[OFF]], {{.*}} intermediate <f8E4M3FN, [1, 32], f8E8M0FNU>
// CHECK-NEXT: moe.unpermute
// CHECK-NEXT: moe.yield
// ROUND-LABEL: func @round_trip
// ROUND: moe.permute
// ROUND-NEXT: moe.quantize
// ROUND-NEXT: moe.dequantize
// ROUND-NEXT: moe.grouped_matmul
// CPU-LABEL: func @round_trip
// CPU-NOT: moe.
// CPU: return
func.func @round_trip(%x: tensor<?x64xbf16>, %logits: tensor<?x8xf32>,
                      %w13: tensor<8x64x64xbf16>, %w2: tensor<8x64x32xbf16>) -> tensor<?x64xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x64xbf16>, tensor<?x2xi32>) -> (tensor<?x64xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %rq = moe.fake_quantize %rows to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x64xbf16>
  %h = moe.expert_mlp silu %rq, %offsets, %w13, %w2 intermediate <f8E4M3FN, [1, 32], f8E8M0FNU>
      : (tensor<?x64xbf16>, tensor<9xi64>, tensor<8x64x64xbf16>, tensor<8x64x32xbf16>) -> tensor<?x64xbf16>
  %y = moe.unpermute %h, %slots weights %w
      : (tensor<?x64xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// -----

// DeepSeek-V3's biased group-limited routing and GPT-OSS's biased experts
// stay what they are inside the layer; unrelated ops in between stay out.
// CHECK-LABEL: func @biases
// CHECK: %[[C:.*]] = arith.constant
// CHECK-NEXT: moe.layer : tensor<?x16xf32> {
// CHECK-NEXT: moe.route sigmoid_topk %{{.*}} bias %{{.*}} top 2 groups 4 select 2 renormalize scale 2.5
// CHECK: moe.expert_mlp gptoss {{.*}} gate_up_bias {{.*}} down_bias
// CHECK: moe.yield
func.func @biases(%x: tensor<?x16xf32>, %logits: tensor<?x8xf32>, %bias: tensor<8xf32>,
                  %w13: tensor<8x48x16xf32>, %b13: tensor<8x48xf32>,
                  %w2: tensor<8x16x24xf32>, %b2: tensor<8x16xf32>) -> (tensor<?x16xf32>, f32) {
  %ids, %w = moe.route sigmoid_topk %logits bias %bias top 2 groups 4 select 2 renormalize scale 2.5
      : (tensor<?x8xf32>, tensor<8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %c = arith.constant 1.0 : f32
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<9xi32>, tensor<?x2xi32>)
  %h = moe.expert_mlp gptoss %rows, %offsets, %w13, %w2 gate_up_bias %b13 down_bias %b2
      : (tensor<?x16xf32>, tensor<9xi32>, tensor<8x48x16xf32>, tensor<8x16x24xf32>, tensor<8x48xf32>, tensor<8x16xf32>) -> tensor<?x16xf32>
  %y = moe.unpermute %h, %slots weights %w
      : (tensor<?x16xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x16xf32>
  return %y, %c : tensor<?x16xf32>, f32
}

// -----

// Not grouped: an intermediate (here the ids) used outside the layer.
// CHECK-LABEL: func @ids_escape
// CHECK-NOT: moe.layer
func.func @ids_escape(%x: tensor<?x16xbf16>, %logits: tensor<?x8xf32>,
                      %w13: tensor<8x48x16xbf16>, %w2: tensor<8x16x24xbf16>) -> (tensor<?x16xbf16>, tensor<?x2xi32>) {
  %ids, %w = moe.route softmax_topk %logits top 2
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xbf16>, tensor<?x2xi32>) -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x16xbf16>, tensor<9xi64>, tensor<8x48x16xbf16>, tensor<8x16x24xbf16>) -> tensor<?x16xbf16>
  %y = moe.unpermute %h, %slots weights %w
      : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xbf16>
  return %y, %ids : tensor<?x16xbf16>, tensor<?x2xi32>
}

// -----

// Not grouped: the routing weight scales the permuted rows in the expert
// MLP and the combine is unweighted.
// CHECK-LABEL: func @row_scale
// CHECK-NOT: moe.layer
func.func @row_scale(%x: tensor<?x16xbf16>, %logits: tensor<?x8xf32>, %s: tensor<?xf32>,
                     %w13: tensor<8x48x16xbf16>, %w2: tensor<8x16x24xbf16>) -> tensor<?x16xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xbf16>, tensor<?x2xi32>) -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2 scale %s
      : (tensor<?x16xbf16>, tensor<9xi64>, tensor<8x48x16xbf16>, tensor<8x16x24xbf16>, tensor<?xf32>) -> tensor<?x16xbf16>
  %y = moe.unpermute %h, %slots
      : (tensor<?x16xbf16>, tensor<?x2xi64>) -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

// Not grouped: the combine's weights are not the route's.
// CHECK-LABEL: func @other_weights
// CHECK-NOT: moe.layer
func.func @other_weights(%x: tensor<?x16xbf16>, %logits: tensor<?x8xf32>, %w: tensor<?x2xf32>,
                         %w13: tensor<8x48x16xbf16>, %w2: tensor<8x16x24xbf16>) -> (tensor<?x16xbf16>, tensor<?x2xf32>) {
  %ids, %rw = moe.route softmax_topk %logits top 2
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xbf16>, tensor<?x2xi32>) -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x16xbf16>, tensor<9xi64>, tensor<8x48x16xbf16>, tensor<8x16x24xbf16>) -> tensor<?x16xbf16>
  %y = moe.unpermute %h, %slots weights %w
      : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xbf16>
  return %y, %rw : tensor<?x16xbf16>, tensor<?x2xf32>
}

// -----

// Not grouped: the chain spans two blocks.
// CHECK-LABEL: func @two_blocks
// CHECK-NOT: moe.layer
func.func @two_blocks(%x: tensor<?x16xbf16>, %logits: tensor<?x8xf32>,
                      %w13: tensor<8x48x16xbf16>, %w2: tensor<8x16x24xbf16>) -> tensor<?x16xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xbf16>, tensor<?x2xi32>) -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x16xbf16>, tensor<9xi64>, tensor<8x48x16xbf16>, tensor<8x16x24xbf16>) -> tensor<?x16xbf16>
  cf.br ^next
^next:
  %y = moe.unpermute %h, %slots weights %w
      : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

// Quantized activations (--moe-quantize): the gathered rows' quantize ->
// dequantize round trip joins the layer between the permute and the expert
// MLP; the weights' dequantizes stay outside (values from above).
// CHECK-LABEL: func @quantized_rows
// CHECK: %[[W13:.*]] = moe.dequantize %{{.*}} from <f8E4M3FN, [1, 128, 128], f32>
// CHECK: %[[W2:.*]] = moe.dequantize %{{.*}} from <f8E4M3FN, [1, 128, 128], f32>
// CHECK-NEXT: moe.layer
// CHECK-NEXT: moe.route
// CHECK-NEXT: %[[ROWS:.*]], %[[OFF:.*]], %{{.*}} = moe.permute
// CHECK-NEXT: %[[Q:.*]], %[[S:.*]] = moe.quantize %[[ROWS]] to <f8E4M3FN, [1, 128], f32>
// CHECK-NEXT: %[[D:.*]] = moe.dequantize %[[Q]], %[[S]]
// CHECK-NEXT: moe.expert_mlp silu %[[D]], %[[OFF]], %[[W13]], %[[W2]] intermediate <f8E4M3FN, [1, 128], f32>
// CHECK-NEXT: moe.unpermute
// CHECK-NEXT: moe.yield
// CPU-LABEL: func @quantized_rows
// CPU-NOT: moe.
func.func @quantized_rows(%x: tensor<?x128xbf16>, %logits: tensor<?x4xf32>,
                          %w13q: tensor<4x256x128xf8E4M3FN>, %w13s: tensor<4x2x1xf32>,
                          %w2q: tensor<4x128x128xf8E4M3FN>, %w2s: tensor<4x1x1xf32>) -> tensor<?x128xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x128xbf16>, tensor<?x2xi32>) -> (tensor<?x128xbf16>, tensor<5xi64>, tensor<?x2xi64>)
  %q, %s = moe.quantize %rows to <f8E4M3FN, [1, 128], f32>
      : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>, tensor<?x1xf32>
  %d = moe.dequantize %q, %s from <f8E4M3FN, [1, 128], f32>
      : tensor<?x128xf8E4M3FN>, tensor<?x1xf32> -> tensor<?x128xbf16>
  %w13 = moe.dequantize %w13q, %w13s from <f8E4M3FN, [1, 128, 128], f32>
      : tensor<4x256x128xf8E4M3FN>, tensor<4x2x1xf32> -> tensor<4x256x128xbf16>
  %w2 = moe.dequantize %w2q, %w2s from <f8E4M3FN, [1, 128, 128], f32>
      : tensor<4x128x128xf8E4M3FN>, tensor<4x1x1xf32> -> tensor<4x128x128xbf16>
  %y = moe.expert_mlp silu %d, %offsets, %w13, %w2 intermediate <f8E4M3FN, [1, 128], f32>
      : (tensor<?x128xbf16>, tensor<5xi64>, tensor<4x256x128xbf16>, tensor<4x128x128xbf16>) -> tensor<?x128xbf16>
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x128xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x128xbf16>
  return %out : tensor<?x128xbf16>
}

// -----

// FP8 values the layer would hide (returned as well): no layer.
// CHECK-LABEL: func @quantized_rows_escape
// CHECK-NOT: moe.layer
func.func @quantized_rows_escape(%x: tensor<?x128xbf16>, %logits: tensor<?x4xf32>,
                                 %w13: tensor<4x256x128xbf16>, %w2: tensor<4x128x128xbf16>)
    -> (tensor<?x128xbf16>, tensor<?x128xf8E4M3FN>) {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x128xbf16>, tensor<?x2xi32>) -> (tensor<?x128xbf16>, tensor<5xi64>, tensor<?x2xi64>)
  %q, %s = moe.quantize %rows to <f8E4M3FN, [1, 128], f32>
      : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>, tensor<?x1xf32>
  %d = moe.dequantize %q, %s from <f8E4M3FN, [1, 128], f32>
      : tensor<?x128xf8E4M3FN>, tensor<?x1xf32> -> tensor<?x128xbf16>
  %y = moe.expert_mlp silu %d, %offsets, %w13, %w2
      : (tensor<?x128xbf16>, tensor<5xi64>, tensor<4x256x128xbf16>, tensor<4x128x128xbf16>) -> tensor<?x128xbf16>
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x128xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x128xbf16>
  return %out, %q : tensor<?x128xbf16>, tensor<?x128xf8E4M3FN>
}

// -----

// A shared expert whose output only the combine adds comes into the layer,
// right before the combine; its operands (tokens, weights) come from above.
// Expanding inlines it back unchanged.
// CHECK-LABEL: func @shared_expert
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<?x16xbf16>, %{{.*}}: tensor<?x8xf32>, %{{.*}}: tensor<8x48x16xbf16>, %{{.*}}: tensor<8x16x24xbf16>, %[[SW13:[a-z0-9]+]]: tensor<40x16xbf16>, %[[SW2:[a-z0-9]+]]: tensor<16x20xbf16>, %[[G:[a-z0-9]+]]: tensor<1x16xbf16>)
// CHECK-NEXT: %[[Y:.*]] = moe.layer : tensor<?x16xbf16> {
// CHECK-NEXT: moe.route
// CHECK-NEXT: moe.permute
// CHECK-NEXT: %[[H:.*]] = moe.expert_mlp
// CHECK-NEXT: %[[S:.*]] = moe.shared_mlp silu %[[X]], %[[SW13]], %[[SW2]] gate %[[G]] :
// CHECK-NEXT: %[[O:.*]] = moe.unpermute %[[H]], %{{.*}} weights %{{.*}} shared %[[S]]
// CHECK-NEXT: moe.yield %[[O]] : tensor<?x16xbf16>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[Y]]
// ROUND-LABEL: func @shared_expert
// ROUND-NOT: moe.layer
// ROUND: moe.shared_mlp
// ROUND-NEXT: %[[O:.*]] = moe.unpermute {{.*}} shared
// ROUND-NEXT: return %[[O]]
// CPU-LABEL: func @shared_expert
// CPU-NOT: moe.
// CPU: return
func.func @shared_expert(%x: tensor<?x16xbf16>, %logits: tensor<?x8xf32>,
                         %w13: tensor<8x48x16xbf16>, %w2: tensor<8x16x24xbf16>,
                         %sw13: tensor<40x16xbf16>, %sw2: tensor<16x20xbf16>,
                         %gate: tensor<1x16xbf16>) -> tensor<?x16xbf16> {
  %s = moe.shared_mlp silu %x, %sw13, %sw2 gate %gate
      : (tensor<?x16xbf16>, tensor<40x16xbf16>, tensor<16x20xbf16>, tensor<1x16xbf16>) -> tensor<?x16xbf16>
  %ids, %w = moe.route softmax_topk %logits top 2
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xbf16>, tensor<?x2xi32>) -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x16xbf16>, tensor<9xi64>, tensor<8x48x16xbf16>, tensor<8x16x24xbf16>) -> tensor<?x16xbf16>
  %y = moe.unpermute %h, %slots weights %w shared %s
      : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x16xbf16>) -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

// A shared expert whose output is used elsewhere too stays outside; the
// layer reads it from above (so does any other addend).
// CHECK-LABEL: func @shared_expert_escapes
// CHECK: %[[S:.*]] = moe.shared_mlp
// CHECK-NEXT: %[[Y:.*]] = moe.layer : tensor<?x16xf32> {
// CHECK-NOT: moe.shared_mlp
// CHECK: moe.unpermute {{.*}} shared %[[S]]
// CHECK: return %[[Y]], %[[S]]
// ROUND-LABEL: func @shared_expert_escapes
// ROUND-NOT: moe.layer
// ROUND: return
// CPU-LABEL: func @shared_expert_escapes
// CPU-NOT: moe.
// CPU: return
func.func @shared_expert_escapes(%x: tensor<?x16xf32>, %logits: tensor<?x8xf32>,
                                 %w13: tensor<8x48x16xf32>, %w2: tensor<8x16x24xf32>,
                                 %sw13: tensor<40x16xf32>, %sw2: tensor<16x20xf32>)
    -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  %ids, %w = moe.route softmax_topk %logits top 2
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<9xi64>, tensor<?x2xi64>)
  %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x16xf32>, tensor<9xi64>, tensor<8x48x16xf32>, tensor<8x16x24xf32>) -> tensor<?x16xf32>
  %s = moe.shared_mlp silu %x, %sw13, %sw2
      : (tensor<?x16xf32>, tensor<40x16xf32>, tensor<16x20xf32>) -> tensor<?x16xf32>
  %y = moe.unpermute %h, %slots weights %w shared %s
      : (tensor<?x16xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
  return %y, %s : tensor<?x16xf32>, tensor<?x16xf32>
}

// -----

// The model routes: ids and weights are arguments, and the layer is the
// chain from the permute on, taking them from above.
// CHECK-LABEL: func @model_routes
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<?x16xbf16>, %[[IDS:[a-z0-9]+]]: tensor<?x2xi32>, %[[W:[a-z0-9]+]]: tensor<?x2xf32>,
// CHECK-NEXT: %[[Y:.*]] = moe.layer : tensor<?x16xbf16> {
// CHECK-NEXT: %[[ROWS:.*]], %[[OFF:.*]], %[[SLOTS:.*]] = moe.permute %[[X]], %[[IDS]]
// CHECK-NEXT: %[[H:.*]] = moe.expert_mlp silu %[[ROWS]], %[[OFF]]
// CHECK-NEXT: %[[O:.*]] = moe.unpermute %[[H]], %[[SLOTS]] weights %[[W]]
// CHECK-NEXT: moe.yield %[[O]] : tensor<?x16xbf16>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[Y]]
// ROUND-LABEL: func @model_routes
// ROUND-NOT: moe.layer
// ROUND: moe.permute
// ROUND: moe.unpermute
// CPU-LABEL: func @model_routes
// CPU-NOT: moe.
// CPU: return
func.func @model_routes(%x: tensor<?x16xbf16>, %ids: tensor<?x2xi32>, %w: tensor<?x2xf32>,
                        %w13: tensor<8x48x16xbf16>, %w2: tensor<8x16x24xbf16>) -> tensor<?x16xbf16> {
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xbf16>, tensor<?x2xi32>) -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x16xbf16>, tensor<9xi64>, tensor<8x48x16xbf16>, tensor<8x16x24xbf16>) -> tensor<?x16xbf16>
  %y = moe.unpermute %h, %slots weights %w
      : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

// Not grouped: without a route the combine must be weighted (a layer
// applies the routing weights in its combine).
// CHECK-LABEL: func @model_routes_unweighted
// CHECK-NOT: moe.layer
func.func @model_routes_unweighted(%x: tensor<?x16xbf16>, %ids: tensor<?x2xi32>,
                                   %w13: tensor<8x48x16xbf16>, %w2: tensor<8x16x24xbf16>) -> tensor<?x16xbf16> {
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x16xbf16>, tensor<?x2xi32>) -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x16xbf16>, tensor<9xi64>, tensor<8x48x16xbf16>, tensor<8x16x24xbf16>) -> tensor<?x16xbf16>
  %y = moe.unpermute %h, %slots
      : (tensor<?x16xbf16>, tensor<?x2xi64>) -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}
