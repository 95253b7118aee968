// Every layer --moe-generate-backward cannot differentiate is an error that
// says why, on the function.
// RUN: moe-opt %s --moe-generate-backward -split-input-file -verify-diagnostics

// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: it must return exactly one value, the layer output (it returns 2)}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %w13: tensor<2x8x4xbf16>, %w2: tensor<2x4x4xbf16>) -> (tensor<?x4xbf16>, tensor<?x1xi32>) {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x2xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x1xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x4xbf16>, tensor<2x8x4xbf16>, tensor<3xi64>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x8xbf16>) -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets : (tensor<?x4xbf16>, tensor<2x4x4xbf16>, tensor<3xi64>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y, %ids : tensor<?x4xbf16>, tensor<?x1xi32>
}

// -----

// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: its result is not a moe.unpermute's (the layer output)}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %w13: tensor<2x8x4xbf16>, %w2: tensor<2x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x2xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x1xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x4xbf16>, tensor<2x8x4xbf16>, tensor<3xi64>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x8xbf16>) -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets : (tensor<?x4xbf16>, tensor<2x4x4xbf16>, tensor<3xi64>) -> tensor<?x4xbf16>
  return %rows : tensor<?x4xbf16>
}

// -----

// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: the combine adds a shared term that is not a moe.shared_mlp of the layer's tokens}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %w13: tensor<2x8x4xbf16>, %w2: tensor<2x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x2xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x1xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x4xbf16>, tensor<2x8x4xbf16>, tensor<3xi64>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x8xbf16>) -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets : (tensor<?x4xbf16>, tensor<2x4x4xbf16>, tensor<3xi64>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w shared %x : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>, tensor<?x4xbf16>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: the combine has no routing weights}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %w13: tensor<2x8x4xbf16>, %w2: tensor<2x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x2xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x1xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x4xbf16>, tensor<2x8x4xbf16>, tensor<3xi64>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x8xbf16>) -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets : (tensor<?x4xbf16>, tensor<2x4x4xbf16>, tensor<3xi64>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots : (tensor<?x4xbf16>, tensor<?x1xi64>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: the down projection's rows are not a moe.swiglu's (an FP8 intermediate has no backward yet)}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %w13: tensor<2x8x4xbf16>, %w2: tensor<2x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x2xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x1xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x4xbf16>, tensor<2x8x4xbf16>, tensor<3xi64>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x8xbf16>) -> tensor<?x4xbf16>
  %hq, %hs = moe.quantize %h to <f8E4M3FN, [1, 4], f32> : tensor<?x4xbf16> -> tensor<?x4xf8E4M3FN>, tensor<?x1xf32>
  %h2 = moe.dequantize %hq, %hs from <f8E4M3FN, [1, 4], f32> : tensor<?x4xf8E4M3FN>, tensor<?x1xf32> -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h2, %w2, %offsets : (tensor<?x4xbf16>, tensor<2x4x4xbf16>, tensor<3xi64>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: a per-row scale on the expert MLP has no backward (the routing weight belongs on the combine)}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %w13: tensor<2x8x4xbf16>, %w2: tensor<2x4x4xbf16>, %n: index) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x2xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x1xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x4xbf16>, tensor<2x8x4xbf16>, tensor<3xi64>) -> tensor<?x8xbf16>
  %s = tensor.empty(%n) : tensor<?xf32>
  %h = moe.swiglu silu %gu scale %s : (tensor<?x8xbf16>, tensor<?xf32>) -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets : (tensor<?x4xbf16>, tensor<2x4x4xbf16>, tensor<3xi64>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: the gate-up projection's rows are not a moe.permute's (quantized rows have no backward yet)}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %w13: tensor<2x8x4xbf16>, %w2: tensor<2x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x2xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x1xi64>)
  %rq, %rs = moe.quantize %rows to <f8E4M3FN, [1, 4], f32> : tensor<?x4xbf16> -> tensor<?x4xf8E4M3FN>, tensor<?x1xf32>
  %r2 = moe.dequantize %rq, %rs from <f8E4M3FN, [1, 4], f32> : tensor<?x4xf8E4M3FN>, tensor<?x1xf32> -> tensor<?x4xbf16>
  %gu = moe.grouped_matmul %r2, %w13, %offsets : (tensor<?x4xbf16>, tensor<2x8x4xbf16>, tensor<3xi64>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x8xbf16>) -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets : (tensor<?x4xbf16>, tensor<2x4x4xbf16>, tensor<3xi64>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: the projections and the combine do not use the permute's offsets and slots}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %w13: tensor<2x8x4xbf16>, %w2: tensor<2x4x4xbf16>, %off2: tensor<3xi64>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x2xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x1xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x4xbf16>, tensor<2x8x4xbf16>, tensor<3xi64>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x8xbf16>) -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h, %w2, %off2 : (tensor<?x4xbf16>, tensor<2x4x4xbf16>, tensor<3xi64>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: the combine's weights are not the route's}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %w13: tensor<2x8x4xbf16>, %w2: tensor<2x4x4xbf16>, %w0: tensor<?x1xf32>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x2xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x1xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x4xbf16>, tensor<2x8x4xbf16>, tensor<3xi64>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x8xbf16>) -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets : (tensor<?x4xbf16>, tensor<2x4x4xbf16>, tensor<3xi64>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w0 : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: the route has shared-expert slots, which have no backward yet}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %w13: tensor<2x8x4xbf16>, %w2: tensor<2x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 shared 1 : (tensor<?x2xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x2xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x2xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x4xbf16>, tensor<2x8x4xbf16>, tensor<3xi64>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x8xbf16>) -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets : (tensor<?x4xbf16>, tensor<2x4x4xbf16>, tensor<3xi64>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: the gate-up weights must be an argument of the function (the gradient would have nowhere to go; quantized weights have no backward yet)}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %q13: tensor<2x8x4xf8E4M3FN>, %s13: tensor<2x2x1xf32>, %w2: tensor<2x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x2xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x1xi64>)
  %w13 = moe.dequantize %q13, %s13 from <f8E4M3FN, [1, 4, 4], f32> : tensor<2x8x4xf8E4M3FN>, tensor<2x2x1xf32> -> tensor<2x8x4xbf16>
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x4xbf16>, tensor<2x8x4xbf16>, tensor<3xi64>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x8xbf16>) -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets : (tensor<?x4xbf16>, tensor<2x4x4xbf16>, tensor<3xi64>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: argument #0 is two of the layer's inputs}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %w13: tensor<2x8x4xbf16>, %w2: tensor<2x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %x top 1 : (tensor<?x4xbf16>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x1xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x4xbf16>, tensor<2x8x4xbf16>, tensor<3xi64>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x8xbf16>) -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets : (tensor<?x4xbf16>, tensor<2x4x4xbf16>, tensor<3xi64>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: the expert ids are neither a moe.route's nor an argument of the function}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %w13: tensor<2x8x4xbf16>, %w2: tensor<2x4x4xbf16>, %ids0: tensor<2x1xi32>, %w: tensor<?x1xf32>) -> tensor<?x4xbf16> {
  %ids = tensor.cast %ids0 : tensor<2x1xi32> to tensor<?x1xi32>
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x1xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x4xbf16>, tensor<2x8x4xbf16>, tensor<3xi64>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x8xbf16>) -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets : (tensor<?x4xbf16>, tensor<2x4x4xbf16>, tensor<3xi64>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

func.func @f_backward() { return }
// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: a symbol named @f_backward already exists}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %w13: tensor<2x8x4xbf16>, %w2: tensor<2x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x2xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x1xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets : (tensor<?x4xbf16>, tensor<2x8x4xbf16>, tensor<3xi64>) -> tensor<?x8xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x8xbf16>) -> tensor<?x4xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets : (tensor<?x4xbf16>, tensor<2x4x4xbf16>, tensor<3xi64>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// -----

// expected-error @+1 {{--moe-generate-backward: cannot derive the backward of @f: it has more than one block (the layer must be straight-line code)}}
func.func @f(%x: tensor<?x4xbf16>, %logits: tensor<?x2xf32>, %w13: tensor<2x8x4xbf16>, %w2: tensor<2x4x4xbf16>) -> tensor<?x4xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<?x2xf32>) -> (tensor<?x1xi32>, tensor<?x1xf32>)
  cf.br ^next
^next:
  %rows, %offsets, %slots = moe.permute %x, %ids : (tensor<?x4xbf16>, tensor<?x1xi32>) -> (tensor<?x4xbf16>, tensor<3xi64>, tensor<?x1xi64>)
  %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2 : (tensor<?x4xbf16>, tensor<3xi64>, tensor<2x8x4xbf16>, tensor<2x4x4xbf16>) -> tensor<?x4xbf16>
  %y = moe.unpermute %o, %slots weights %w : (tensor<?x4xbf16>, tensor<?x1xi64>, tensor<?x1xf32>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}
