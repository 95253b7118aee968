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
