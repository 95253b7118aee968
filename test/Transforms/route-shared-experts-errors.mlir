// RUN: moe-opt %s --moe-route-shared-experts --split-input-file -verify-diagnostics

// A shared expert whose weights are not arguments cannot be arranged once.
func.func @constant_weights(%x: tensor<?x8xbf16>, %logits: tensor<?x4xf32>,
    %w13: tensor<4x16x8xbf16>, %w2: tensor<4x8x8xbf16>, %s2: tensor<8x8xbf16>) -> tensor<?x8xbf16> {
  %s13 = arith.constant dense<1.0> : tensor<16x8xbf16>
  %ids, %w = moe.route softmax_topk %logits top 2 : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x8xbf16>, tensor<?x2xi32>) -> (tensor<?x8xbf16>, tensor<5xi64>, tensor<?x2xi64>)
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2 : (tensor<?x8xbf16>, tensor<5xi64>, tensor<4x16x8xbf16>, tensor<4x8x8xbf16>) -> tensor<?x8xbf16>
  // expected-error @below {{the shared gate-up weights must be an argument of @constant_weights}}
  %s = moe.shared_mlp silu %x, %s13, %s2 : (tensor<?x8xbf16>, tensor<16x8xbf16>, tensor<8x8xbf16>) -> tensor<?x8xbf16>
  %out = moe.unpermute %y, %slots weights %w shared %s : (tensor<?x8xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return %out : tensor<?x8xbf16>
}

// -----

// Weights something else reads would still be needed unarranged.
func.func @weights_reused(%x: tensor<?x8xbf16>, %logits: tensor<?x4xf32>,
    %w13: tensor<4x16x8xbf16>, %w2: tensor<4x8x8xbf16>,
    %s13: tensor<16x8xbf16>, %s2: tensor<8x8xbf16>) -> (tensor<?x8xbf16>, tensor<4x8x8xbf16>) {
  %ids, %w = moe.route softmax_topk %logits top 2 : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x8xbf16>, tensor<?x2xi32>) -> (tensor<?x8xbf16>, tensor<5xi64>, tensor<?x2xi64>)
  // expected-error @below {{the down weights (argument #3) is also used by 'func.return'}}
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2 : (tensor<?x8xbf16>, tensor<5xi64>, tensor<4x16x8xbf16>, tensor<4x8x8xbf16>) -> tensor<?x8xbf16>
  %s = moe.shared_mlp silu %x, %s13, %s2 : (tensor<?x8xbf16>, tensor<16x8xbf16>, tensor<8x8xbf16>) -> tensor<?x8xbf16>
  %out = moe.unpermute %y, %slots weights %w shared %s : (tensor<?x8xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return %out, %w2 : tensor<?x8xbf16>, tensor<4x8x8xbf16>
}

// -----

// The routed experts must be a fused expert MLP (--moe-fuse-experts first).
func.func @unfused(%x: tensor<?x8xbf16>, %logits: tensor<?x4xf32>,
    %w13: tensor<4x16x8xbf16>, %w2: tensor<4x8x8xbf16>,
    %s13: tensor<16x8xbf16>, %s2: tensor<8x8xbf16>) -> tensor<?x8xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x8xbf16>, tensor<?x2xi32>) -> (tensor<?x8xbf16>, tensor<5xi64>, tensor<?x2xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x8xbf16>, tensor<4x16x8xbf16>, tensor<5xi64>) -> tensor<?x16xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x16xbf16>) -> tensor<?x8xbf16>
  %y = moe.grouped_matmul %h, %w2, %offsets : (tensor<?x8xbf16>, tensor<4x8x8xbf16>, tensor<5xi64>) -> tensor<?x8xbf16>
  // expected-error @below {{the unpermute's rows must be a moe.expert_mlp's (run --moe-fuse-experts first)}}
  %s = moe.shared_mlp silu %x, %s13, %s2 : (tensor<?x8xbf16>, tensor<16x8xbf16>, tensor<8x8xbf16>) -> tensor<?x8xbf16>
  %out = moe.unpermute %y, %slots weights %w shared %s : (tensor<?x8xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return %out : tensor<?x8xbf16>
}

// -----

// A shared expert used by anything but one combine's addend.
func.func @returned(%x: tensor<?x8xbf16>, %s13: tensor<16x8xbf16>, %s2: tensor<8x8xbf16>) -> tensor<?x8xbf16> {
  // expected-error @below {{its result must be only the 'shared' addend of one moe.unpermute}}
  %s = moe.shared_mlp silu %x, %s13, %s2 : (tensor<?x8xbf16>, tensor<16x8xbf16>, tensor<8x8xbf16>) -> tensor<?x8xbf16>
  return %s : tensor<?x8xbf16>
}
