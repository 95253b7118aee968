// RUN: moe-opt %s --split-input-file --moe-extract-device-code --verify-diagnostics --mlir-print-op-on-diagnostic=false -o /dev/null

// A launch description that names no kernel of the module is an error.
func.func @dangling(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{moe.launch names a kernel that is not a gpu.func of this module}}
  %y = moe.grouped_matmul %rows, %w, %off {moe.launch = {kernels = [{kernel = @moe_kernels::@missing}]}}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

func.func @no_kernels(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{moe.launch has no 'kernels' array}}
  %y = moe.grouped_matmul %rows, %w, %off {moe.launch = {abi = "grouped_matmul.v3"}}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// Dropping the host code must not drop part of the computation: a moe op
// that was not compiled (here a swiglu the fusion did not absorb) is an
// error, not a bundle that silently skips it.
func.func @uncompiled(%gu: tensor<?x512xbf16>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{has no GPU kernel yet, and the bundle would silently skip it}}
  %h = moe.swiglu silu %gu : (tensor<?x512xbf16>) -> tensor<?x256xbf16>
  return %h : tensor<?x256xbf16>
}

// -----

// A fused op's launch parts must be named.
func.func @unnamed_part(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{moe.launch must be a dictionary or an array of dictionaries with a 'part' name}}
  %y = moe.grouped_matmul %rows, %w, %off {moe.launch = [{kernels = []}]}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// An expert MLP with an FP8 intermediate whose kernels do not say they
// quantize it (no 'intermediate' part, no gate_up part with an FP8 'out')
// would run with a bf16 intermediate: an error, not a silently different
// MLP.
func.func @fp8_intermediate(%rows: tensor<?x128xbf16>, %off: tensor<5xi64>,
                            %w13: tensor<4x256x128xbf16>, %w2: tensor<4x128x128xbf16>) -> tensor<?x128xbf16> {
  // expected-error @+1 {{has an FP8 'intermediate' that its GPU kernels do not compute (its moe.launch has neither a part 'intermediate' nor a gate_up part with an FP8 'out'); the bundle would run it with a bf16 intermediate}}
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2 intermediate <f8E4M3FN, [1, 128], f32>
      {moe.launch = [{part = "gate_up", kernels = []}, {part = "down", kernels = []}]}
      : (tensor<?x128xbf16>, tensor<5xi64>, tensor<4x256x128xbf16>, tensor<4x128x128xbf16>) -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// -----

// The last guard: an unpermute with a 'shared' addend that somehow carries a
// launch (the combine kernel adds no shared expert) is refused, and so is a
// moe.shared_mlp, which has no kernel at all.
func.func @shared(%rows: tensor<?x256xbf16>, %slots: tensor<?x2xi64>, %w: tensor<?x2xf32>,
                  %x: tensor<?x256xbf16>, %w13: tensor<512x256xbf16>, %w2: tensor<256x256xbf16>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{has no GPU kernel yet, and the bundle would silently skip it}}
  %s = moe.shared_mlp silu %x, %w13, %w2
      : (tensor<?x256xbf16>, tensor<512x256xbf16>, tensor<256x256xbf16>) -> tensor<?x256xbf16>
  // expected-error @+1 {{has a 'shared' addend (a shared expert's output) that its GPU kernel does not add; the bundle would silently drop the shared expert}}
  %y = moe.unpermute %rows, %slots weights %w shared %s {moe.launch = {kernels = []}}
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
