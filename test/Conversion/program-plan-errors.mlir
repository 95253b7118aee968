// A function marked moe.program that cannot be one entry is refused with
// the reason, at the op or the function.
// RUN: moe-opt %s --split-input-file --moe-select-kernels --convert-moe-to-nvgpu --mlir-print-op-on-diagnostic=false -verify-diagnostics -o /dev/null

// An argument no step reads has no shape the program could check.
// expected-error @+1 {{cannot be a program (moe.program): no step reads argument #1 ('unused'), so its shape is unknown}}
func.func @unused(%gu: tensor<?x512xbf16>, %x: tensor<?x8xbf16> {moe.name = "unused"}) -> tensor<?x256xbf16> attributes {moe.program} {
  %h = moe.swiglu silu %gu : (tensor<?x512xbf16>) -> tensor<?x256xbf16>
  return %h : tensor<?x256xbf16>
}

// -----

// expected-error @+1 {{cannot be a program (moe.program): it returns one value twice (result #1)}}
func.func @twice(%gu: tensor<?x512xbf16>) -> (tensor<?x256xbf16>, tensor<?x256xbf16>) attributes {moe.program} {
  %h = moe.swiglu silu %gu : (tensor<?x512xbf16>) -> tensor<?x256xbf16>
  return %h, %h : tensor<?x256xbf16>, tensor<?x256xbf16>
}

// -----

// expected-error @+1 {{cannot be a program (moe.program): two of its arguments and results are named 'x' (moe.name)}}
func.func @names(%gu: tensor<?x512xbf16> {moe.name = "x"}) -> (tensor<?x256xbf16> {moe.name = "x"}) attributes {moe.program} {
  %h = moe.swiglu silu %gu : (tensor<?x512xbf16>) -> tensor<?x256xbf16>
  return %h : tensor<?x256xbf16>
}

// -----

// A fused op is several entries: a program's parts are single entries.
func.func @fused(%rows: tensor<?x256xbf16>, %w13: tensor<8x512x256xbf16>, %w2: tensor<8x256x256xbf16>, %off: tensor<9xi64>) -> tensor<?x256xbf16> attributes {moe.program} {
  // expected-error @+1 {{cannot be a step of the program @fused (moe.program): it is several entries (a fused op's parts)}}
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2
      : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x512x256xbf16>, tensor<8x256x256xbf16>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// A reshape is a view of its source only between static shapes.
func.func @dynamic_view(%gu: tensor<?x512xbf16>) -> tensor<?x256xbf16> attributes {moe.program} {
  %h = moe.swiglu silu %gu : (tensor<?x512xbf16>) -> tensor<?x256xbf16>
  %c0 = arith.constant 0 : index
  %c = tensor.dim %h, %c0 : tensor<?x256xbf16>
  // expected-error @+1 {{cannot be a step of the program @dynamic_view (moe.program): a reshape is a view of its source only between static shapes}}
  %v = tensor.expand_shape %h [[0, 1], [2]] output_shape [1, %c, 256] : tensor<?x256xbf16> into tensor<1x?x256xbf16>
  %w = tensor.collapse_shape %v [[0, 1], [2]] : tensor<1x?x256xbf16> into tensor<?x256xbf16>
  return %w : tensor<?x256xbf16>
}

// -----

// A constant is written by a kernel holding its values: a few integers.
func.func @big_constant(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>) -> tensor<?x512xbf16> attributes {moe.program} {
  // expected-error @+1 {{cannot be a value of the program @big_constant: a constant of more than 8 elements has no kernel (its values are the kernel's)}}
  %off = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 2147483647]> : tensor<9xi64>
  %gu = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi64>) -> tensor<?x512xbf16>
  return %gu : tensor<?x512xbf16>
}
