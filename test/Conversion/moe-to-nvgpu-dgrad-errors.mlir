// moe.grouped_dgrad shapes and forms the sm_90a kernels do not implement are
// refused at the op, with the reason.
// RUN: moe-opt %s --split-input-file --moe-gpu-pipeline --mlir-print-op-on-diagnostic=false -verify-diagnostics -o /dev/null

func.func @f32(%g: tensor<?x256xf32>, %w: tensor<8x256x512xf32>, %off: tensor<9xi32>) -> tensor<?x512xf32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: only bf16 gradients, weights and result are implemented}}
  %dx = moe.grouped_dgrad %g, %w, %off : (tensor<?x256xf32>, tensor<8x256x512xf32>, tensor<9xi32>) -> tensor<?x512xf32>
  return %dx : tensor<?x512xf32>
}

// -----

func.func @reduction_pitch(%g: tensor<?x100xbf16>, %w: tensor<8x100x512xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: the gradient's columns (the reduction) must be a multiple of 8}}
  %dx = moe.grouped_dgrad %g, %w, %off : (tensor<?x100xbf16>, tensor<8x100x512xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %dx : tensor<?x512xbf16>
}

// -----

func.func @result_pitch(%g: tensor<?x256xbf16>, %w: tensor<8x256x100xbf16>, %off: tensor<9xi32>) -> tensor<?x100xbf16> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: the result's columns must be a multiple of 8}}
  %dx = moe.grouped_dgrad %g, %w, %off : (tensor<?x256xbf16>, tensor<8x256x100xbf16>, tensor<9xi32>) -> tensor<?x100xbf16>
  return %dx : tensor<?x100xbf16>
}
