// What --moe-expert-parallel refuses, each with the
// reason (test.use: a use outside the layer).
// RUN: moe-opt %s --moe-expert-parallel=ranks=4 -split-input-file -verify-diagnostics --allow-unregistered-dialect

func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x8xf32>, %w13: tensor<8x8x4xbf16>, %w2: tensor<8x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x8xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<9xi64>, tensor<?x1xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x4xbf16>, tensor<8x8x4xbf16>, tensor<9xi64>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x8xbf16>) -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets : (tensor<?x4xbf16>, tensor<8x4x4xbf16>, tensor<9xi64>) -> tensor<?x4xbf16>
// expected-error @+1 {{--moe-expert-parallel: the combined rows are not a moe.expert_mlp's (an expert MLP that --moe-fuse-experts cannot fuse has no expert-parallel form)}}
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  "test.use"(%gu) : (tensor<?x8xbf16>) -> ()
  return %y : tensor<?x4xbf16>
}

// -----

func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x8xf32>, %w13: tensor<8x8x4xbf16>, %w2: tensor<8x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x8xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
// expected-error @+1 {{--moe-expert-parallel: a padded permute (pad_to) has no expert-parallel form}}
  %rows, %offsets, %slots = moe.permute %x, %ids pad_to 4 : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<9xi64>, tensor<?x1xi64>)
  %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2 : (tensor<?x4xbf16>, tensor<9xi64>, tensor<8x8x4xbf16>, tensor<8x4x4xbf16>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x8xf32>, %w13: tensor<8x8x4xbf16>, %w2: tensor<8x4x4xbf16>, %rs: tensor<?xf32>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x8xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<9xi64>, tensor<?x1xi64>)
// expected-error @+1 {{--moe-expert-parallel: a per-row scale on the expert MLP has no expert-parallel form (the routing weight belongs on the combine)}}
  %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2 scale %rs : (tensor<?x4xbf16>, tensor<9xi64>, tensor<8x8x4xbf16>, tensor<8x4x4xbf16>, tensor<?xf32>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x8xf32>, %w13: tensor<8x8x4xbf16>, %w2: tensor<8x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x8xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<9xi64>, tensor<?x1xi64>)
// expected-error @+1 {{--moe-expert-parallel: argument #2 (expert weights) has uses outside the layer: it cannot become the rank's slice}}
  %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2 : (tensor<?x4xbf16>, tensor<9xi64>, tensor<8x8x4xbf16>, tensor<8x4x4xbf16>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  "test.use"(%w13) : (tensor<8x8x4xbf16>) -> ()
  return %y : tensor<?x4xbf16>
}

// -----

func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x8xf32>, %q13: tensor<8x8x4xf8E4M3FN>, %s13: tensor<8x2x1xf32>, %w2: tensor<8x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x8xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<9xi64>, tensor<?x1xi64>)
  %w13 = moe.dequantize %q13, %s13 from <f8E4M3FN, [1, 4, 4], f32> : tensor<8x8x4xf8E4M3FN>, tensor<8x2x1xf32> -> tensor<8x8x4xbf16>
// expected-error @+1 {{--moe-expert-parallel: the expert weights and biases must be arguments of the function (quantized weights have no expert-parallel form yet)}}
  %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2 : (tensor<?x4xbf16>, tensor<9xi64>, tensor<8x8x4xbf16>, tensor<8x4x4xbf16>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x8xf32>, %w13: tensor<9x8x4xbf16>, %w2: tensor<9x4x4xbf16>) -> tensor<?x4xbf16> {
// expected-error @+1 {{--moe-expert-parallel: shared-expert routing slots have no expert-parallel form (keep the shared expert as a moe.shared_mlp on the combine)}}
  %ids, %w = moe.route softmax_topk %logits top 1 shared 1 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x2xi32>) -> (tensor<?x4xbf16>, tensor<10xi64>, tensor<?x2xi64>)
  %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2 : (tensor<?x4xbf16>, tensor<10xi64>, tensor<9x8x4xbf16>, tensor<9x4x4xbf16>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

// 4 ranks cannot share 6 experts evenly.
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x6xf32>, %w13: tensor<6x8x4xbf16>, %w2: tensor<6x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x6xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<7xi64>, tensor<?x1xi64>)
  // expected-error @+1 {{--moe-expert-parallel: 4 ranks do not divide the 6 experts evenly}}
  %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2 : (tensor<?x4xbf16>, tensor<7xi64>, tensor<6x8x4xbf16>, tensor<6x4x4xbf16>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

// A layer in a branch: no place for a stage boundary.
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x8xf32>, %w13: tensor<8x8x4xbf16>, %w2: tensor<8x4x4xbf16>, %c: i1) -> tensor<?x4xbf16> {
  %y = scf.if %c -> tensor<?x4xbf16> {
    %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x8xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
    %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<9xi64>, tensor<?x1xi64>)
    // expected-error @+1 {{--moe-expert-parallel: a layer inside a loop, branch or other region has no expert-parallel form}}
    %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2 : (tensor<?x4xbf16>, tensor<9xi64>, tensor<8x8x4xbf16>, tensor<8x4x4xbf16>) -> tensor<?x4xbf16>
    %y0 = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
    scf.yield %y0 : tensor<?x4xbf16>
  } else {
    scf.yield %x : tensor<?x4xbf16>
  }
  return %y : tensor<?x4xbf16>
}
