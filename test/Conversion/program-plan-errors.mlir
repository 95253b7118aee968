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
