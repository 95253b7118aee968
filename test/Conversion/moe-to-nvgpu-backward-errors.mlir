// moe.grouped_dgrad and moe.grouped_wgrad shapes the sm_90a kernels do not
// implement are refused at the op, with the reason; the other backward ops
// refuse what their kernels do not implement.
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
  // expected-error @+1 {{cannot be lowered to sm_90a yet: the weights' columns must be a multiple of 8}}
  %dx = moe.grouped_dgrad %g, %w, %off : (tensor<?x256xbf16>, tensor<8x256x100xbf16>, tensor<9xi32>) -> tensor<?x100xbf16>
  return %dx : tensor<?x100xbf16>
}

// -----

// The same N-major weights in a forward grouped matmul (kn_weights).
func.func @kn_pitch(%x: tensor<?x256xbf16>, %w: tensor<8x256x100xbf16>, %off: tensor<9xi32>) -> tensor<?x100xbf16> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: the weights' columns must be a multiple of 8}}
  %y = moe.grouped_matmul %x, %w, %off kn_weights : (tensor<?x256xbf16>, tensor<8x256x100xbf16>, tensor<9xi32>) -> tensor<?x100xbf16>
  return %y : tensor<?x100xbf16>
}

// -----

// With the activation's gradient the result is [M, 2K]: the weights' K
// columns are the TMA row pitch, not the result's.
func.func @act_grad_pitch(%g: tensor<?x256xbf16>, %w: tensor<8x256x100xbf16>, %off: tensor<9xi32>, %gu: tensor<?x200xbf16>) -> tensor<?x200xbf16> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: the weights' columns must be a multiple of 8}}
  %dgu = moe.grouped_dgrad %g, %w, %off act_grad silu %gu : (tensor<?x256xbf16>, tensor<8x256x100xbf16>, tensor<9xi32>, tensor<?x200xbf16>) -> tensor<?x200xbf16>
  return %dgu : tensor<?x200xbf16>
}

// -----

func.func @act_grad_f32(%g: tensor<?x256xf32>, %w: tensor<8x256x128xf32>, %off: tensor<9xi32>, %gu: tensor<?x256xf32>) -> tensor<?x256xf32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: only bf16 gradients, weights and result are implemented}}
  %dgu = moe.grouped_dgrad %g, %w, %off act_grad silu %gu : (tensor<?x256xf32>, tensor<8x256x128xf32>, tensor<9xi32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  return %dgu : tensor<?x256xf32>
}

// -----

func.func @wgrad_f32(%g: tensor<?x256xf32>, %x: tensor<?x512xf32>, %off: tensor<9xi32>) -> tensor<8x256x512xf32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: only bf16 gradients, rows and weight gradient are implemented}}
  %dw = moe.grouped_wgrad %g, %x, %off : (tensor<?x256xf32>, tensor<?x512xf32>, tensor<9xi32>) -> tensor<8x256x512xf32>
  return %dw : tensor<8x256x512xf32>
}

// -----

func.func @wgrad_pitch(%g: tensor<?x256xbf16>, %x: tensor<?x100xbf16>, %off: tensor<9xi32>) -> tensor<8x256x100xbf16> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: the gradient's and the rows' columns must be multiples of 8}}
  %dw = moe.grouped_wgrad %g, %x, %off : (tensor<?x256xbf16>, tensor<?x100xbf16>, tensor<9xi32>) -> tensor<8x256x100xbf16>
  return %dw : tensor<8x256x100xbf16>
}

// -----

func.func @swiglu_grad_f32(%gu: tensor<?x512xf32>, %dh: tensor<?x256xf32>) -> tensor<?x512xf32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: only bf16 inputs, gradients and result are implemented}}
  %dgu = moe.swiglu_grad silu %gu, %dh : (tensor<?x512xf32>, tensor<?x256xf32>) -> tensor<?x512xf32>
  return %dgu : tensor<?x512xf32>
}

// -----

func.func @swiglu_grad_width(%gu: tensor<?x200xbf16>, %dh: tensor<?x100xbf16>) -> tensor<?x200xbf16> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: the gradient's columns must be a multiple of 8 (16-byte vectors)}}
  %dgu = moe.swiglu_grad silu %gu, %dh : (tensor<?x200xbf16>, tensor<?x100xbf16>) -> tensor<?x200xbf16>
  return %dgu : tensor<?x200xbf16>
}

// -----

func.func @route_grad_experts(%l: tensor<?x1024xf32>, %ids: tensor<?x2xi32>, %dw: tensor<?x2xf32>) -> tensor<?x1024xf32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: the expert count must be static and at most 512}}
  %d = moe.route_grad softmax_topk %l, %ids, %dw : (tensor<?x1024xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x1024xf32>
  return %d : tensor<?x1024xf32>
}

// -----

func.func @route_grad_k(%l: tensor<?x64xf32>, %ids: tensor<?x40xi32>, %dw: tensor<?x40xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: top-k must be static and at most 32 (a lane per pair)}}
  %d = moe.route_grad softmax_topk %l, %ids, %dw : (tensor<?x64xf32>, tensor<?x40xi32>, tensor<?x40xf32>) -> tensor<?x64xf32>
  return %d : tensor<?x64xf32>
}

// -----

func.func @unpermute_grad_f32(%g: tensor<?x256xf32>, %r: tensor<?x256xf32>, %s: tensor<?x2xi64>) -> tensor<?x256xf32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: only bf16 gradients, rows and row gradients are implemented}}
  %d = moe.unpermute_grad %g, %r, %s : (tensor<?x256xf32>, tensor<?x256xf32>, tensor<?x2xi64>) -> tensor<?x256xf32>
  return %d : tensor<?x256xf32>
}

// -----

func.func @unpermute_grad_width(%g: tensor<?x100xbf16>, %r: tensor<?x100xbf16>, %s: tensor<?x2xi64>) -> tensor<?x100xbf16> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: the hidden size must be a multiple of 8 (16-byte vectors)}}
  %d = moe.unpermute_grad %g, %r, %s : (tensor<?x100xbf16>, tensor<?x100xbf16>, tensor<?x2xi64>) -> tensor<?x100xbf16>
  return %d : tensor<?x100xbf16>
}

// -----

func.func @swiglu_scale(%gu: tensor<?x512xbf16>, %s: tensor<?xf32>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: a per-row scale has no kernel (the expert MLP's epilogue applies it)}}
  %h = moe.swiglu silu %gu scale %s : (tensor<?x512xbf16>, tensor<?xf32>) -> tensor<?x256xbf16>
  return %h : tensor<?x256xbf16>
}

// -----

func.func @swiglu_f32(%gu: tensor<?x512xf32>) -> tensor<?x256xf32> {
  // expected-error @+1 {{cannot be lowered to sm_90a yet: only bf16 inputs and result are implemented}}
  %h = moe.swiglu silu %gu : (tensor<?x512xf32>) -> tensor<?x256xf32>
  return %h : tensor<?x256xf32>
}
