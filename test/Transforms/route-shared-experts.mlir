// RUN: moe-opt %s --moe-route-shared-experts --split-input-file | FileCheck %s
// RUN: moe-opt %s --moe-route-shared-experts --moe-fuse-layer --split-input-file | FileCheck %s --check-prefix=LAYER

// Qwen1.5-MoE-like: a gated shared expert four times the routed width
// becomes experts 8 .. 11 that every token takes after its 2, gated; the
// function takes the arranged weights, which @qwen_pack_shared makes.
// CHECK-LABEL: func.func @qwen
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<?x16xbf16>, %[[L:[a-z0-9]+]]: tensor<?x8xbf16>, %[[W13:[a-z0-9]+]]: tensor<12x16x16xbf16>, %[[W2:[a-z0-9]+]]: tensor<12x16x8xbf16>, %[[G:[a-z0-9]+]]: tensor<1x16xbf16>)
// CHECK-NEXT: %[[IDS:.*]], %[[W:.*]] = moe.route softmax_topk %[[L]] top 2 shared 4 gate %[[X]], %[[G]] : (tensor<?x8xbf16>, tensor<?x16xbf16>, tensor<1x16xbf16>) -> (tensor<?x6xi32>, tensor<?x6xf32>)
// CHECK-NEXT: %[[ROWS:.*]], %[[OFF:.*]], %[[SLOTS:.*]] = moe.permute %[[X]], %[[IDS]] : (tensor<?x16xbf16>, tensor<?x6xi32>) -> (tensor<?x16xbf16>, tensor<13xi64>, tensor<?x6xi64>)
// CHECK-NEXT: %[[Y:.*]] = moe.expert_mlp silu %[[ROWS]], %[[OFF]], %[[W13]], %[[W2]]
// CHECK-NEXT: %[[OUT:.*]] = moe.unpermute %[[Y]], %[[SLOTS]] weights %[[W]] : (tensor<?x16xbf16>, tensor<?x6xi64>, tensor<?x6xf32>) -> tensor<?x16xbf16>
// CHECK-NEXT: return %[[OUT]]
// Slice j: gate rows [8j, 8j+8) and up rows 32 + [8j, 8j+8) of the shared
// gate-up weights, columns [8j, 8j+8) of its down weights.
// CHECK-LABEL: func.func @qwen_pack_shared
// CHECK-SAME: (%[[RW13:.*]]: tensor<8x16x16xbf16>, %[[RW2:.*]]: tensor<8x16x8xbf16>, %[[S13:.*]]: tensor<64x16xbf16>, %[[S2:.*]]: tensor<16x32xbf16>) -> (tensor<12x16x16xbf16>, tensor<12x16x8xbf16>)
// CHECK: tensor.insert_slice %[[RW13]] into %{{.*}}[0, 0, 0] [8, 16, 16]
// CHECK: %[[GATE:.*]] = tensor.extract_slice %[[S13]][0, 0] [32, 16]
// CHECK: %[[GATES:.*]] = tensor.expand_shape %[[GATE]] {{\[}}[0, 1], [2]] output_shape [4, 8, 16]
// CHECK: tensor.insert_slice %[[GATES]] into %{{.*}}[8, 0, 0] [4, 8, 16]
// CHECK: %[[UP:.*]] = tensor.extract_slice %[[S13]][32, 0] [32, 16]
// CHECK: %[[UPS:.*]] = tensor.expand_shape %[[UP]]
// CHECK: tensor.insert_slice %[[UPS]] into %{{.*}}[8, 8, 0] [4, 8, 16]
// CHECK: tensor.insert_slice %[[RW2]] into %{{.*}}[0, 0, 0] [8, 16, 8]
// CHECK: %[[COLS:.*]] = tensor.expand_shape %[[S2]] {{\[}}[0], [1, 2]] output_shape [16, 4, 8]
// CHECK: %[[T:.*]] = linalg.transpose ins(%[[COLS]] : tensor<16x4x8xbf16>) {{.*}} permutation = [1, 0, 2]
// CHECK: tensor.insert_slice %[[T]] into %{{.*}}[8, 0, 0] [4, 16, 8]
// A caller arranges the weights first.
// CHECK-LABEL: func.func @caller
// CHECK: %[[P:.*]]:2 = call @qwen_pack_shared(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: call @qwen(%{{.*}}, %{{.*}}, %[[P]]#0, %[[P]]#1, %{{.*}})
// The layer then fuses as any routed layer.
// LAYER-LABEL: func.func @qwen
// LAYER: moe.layer
// LAYER: moe.route softmax_topk %{{.*}} top 2 shared 4 gate
func.func @qwen(%x: tensor<?x16xbf16>, %logits: tensor<?x8xbf16>,
    %w13: tensor<8x16x16xbf16>, %w2: tensor<8x16x8xbf16>,
    %s13: tensor<64x16xbf16>, %s2: tensor<16x32xbf16>, %g: tensor<1x16xbf16>) -> tensor<?x16xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 : (tensor<?x8xbf16>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x16xbf16>, tensor<?x2xi32>) -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2 : (tensor<?x16xbf16>, tensor<9xi64>, tensor<8x16x16xbf16>, tensor<8x16x8xbf16>) -> tensor<?x16xbf16>
  %s = moe.shared_mlp silu %x, %s13, %s2 gate %g : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>) -> tensor<?x16xbf16>
  %out = moe.unpermute %y, %slots weights %w shared %s : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x16xbf16>) -> tensor<?x16xbf16>
  return %out : tensor<?x16xbf16>
}
func.func @caller(%x: tensor<?x16xbf16>, %logits: tensor<?x8xbf16>,
    %w13: tensor<8x16x16xbf16>, %w2: tensor<8x16x8xbf16>,
    %s13: tensor<64x16xbf16>, %s2: tensor<16x32xbf16>, %g: tensor<1x16xbf16>) -> tensor<?x16xbf16> {
  %y = call @qwen(%x, %logits, %w13, %w2, %s13, %s2, %g) : (tensor<?x16xbf16>, tensor<?x8xbf16>, tensor<8x16x16xbf16>, tensor<8x16x8xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>) -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

// DeepSeek-V3-like: an ungated shared expert of the routed width is one
// more expert of weight 1; a width that is no multiple of I is padded with
// zero rows and columns; the route's own outputs stay for their other user.
// CHECK-LABEL: func.func @deepseek
// CHECK-SAME: tensor<5x16x8xbf16>, %{{.*}}: tensor<5x8x8xbf16>) -> (tensor<?x8xbf16>, tensor<?x2xf32>)
// CHECK: %[[IDS:.*]], %[[W:.*]] = moe.route sigmoid_topk %{{.*}} bias %{{.*}} top 2 renormalize scale 2.5{{.*}} : (tensor<?x4xf32>, tensor<4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
// CHECK: moe.route sigmoid_topk %{{.*}} bias %{{.*}} top 2 renormalize scale 2.5{{.*}} shared 1 : (tensor<?x4xf32>, tensor<4xf32>) -> (tensor<?x3xi32>, tensor<?x3xf32>)
// CHECK: return %{{.*}}, %[[W]]
// CHECK-LABEL: func.func @deepseek_pack_shared
// CHECK: tensor.pad
// CHECK: tensor.pad
// CHECK: tensor.pad
func.func @deepseek(%x: tensor<?x8xbf16>, %logits: tensor<?x4xf32>, %bias: tensor<4xf32>,
    %w13: tensor<4x16x8xbf16>, %w2: tensor<4x8x8xbf16>,
    %s13: tensor<12x8xbf16>, %s2: tensor<8x6xbf16>) -> (tensor<?x8xbf16>, tensor<?x2xf32>) {
  %ids, %w = moe.route sigmoid_topk %logits bias %bias top 2 renormalize scale 2.5 : (tensor<?x4xf32>, tensor<4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x8xbf16>, tensor<?x2xi32>) -> (tensor<?x8xbf16>, tensor<5xi64>, tensor<?x2xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2 : (tensor<?x8xbf16>, tensor<5xi64>, tensor<4x16x8xbf16>, tensor<4x8x8xbf16>) -> tensor<?x8xbf16>
  %s = moe.shared_mlp silu %x, %s13, %s2 : (tensor<?x8xbf16>, tensor<12x8xbf16>, tensor<8x6xbf16>) -> tensor<?x8xbf16>
  %out = moe.unpermute %y, %slots weights %w shared %s : (tensor<?x8xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return %out, %w : tensor<?x8xbf16>, tensor<?x2xf32>
}
