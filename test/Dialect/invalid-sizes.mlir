// Issue 25, class 6: a static dimension of a moe op's operand or result
// must be in [1, 2^31 - 1] (the kernels and the runtime take 32-bit sizes,
// docs/runtime-contract.md §2), and each tensor's static bytes must fit
// int64. Zero or absurd sizes used to pass moe-opt and moe-translate and
// fail only when the bundle was opened, or inside a generated
// tensor.extract_slice on the CPU; the verifiers now name the operand, the
// dimension and its meaning. The last cases, at the bounds, are accepted.
// RUN: moe-opt %s -split-input-file -verify-diagnostics
// RUN: not moe-opt %s -split-input-file --moe-cpu-reference-pipeline 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: not moe-opt %s -split-input-file --moe-gpu-pipeline="format=isa" 2>&1 | FileCheck %s --check-prefix=GPU

// CPU: error: 'moe.grouped_matmul' op 'rows' dim 1 (K of [M, K]) is 0: a static size must be in [1, 2147483647] (the kernels and the runtime take 32-bit sizes)
// GPU: error: 'moe.grouped_matmul' op 'rows' dim 1 (K of [M, K]) is 0: a static size must be in [1, 2147483647] (the kernels and the runtime take 32-bit sizes)
func.func @k_zero(%rows: tensor<?x0xbf16>, %w: tensor<8x512x0xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{'rows' dim 1 (K of [M, K]) is 0: a static size must be in [1, 2147483647] (the kernels and the runtime take 32-bit sizes)}}
  %y = moe.grouped_matmul %rows, %w, %off : (tensor<?x0xbf16>, tensor<8x512x0xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

func.func @n_zero(%rows: tensor<?x256xbf16>, %w: tensor<8x0x256xbf16>, %off: tensor<9xi32>) -> tensor<?x0xbf16> {
  // expected-error @+1 {{'weights' dim 1 (N of [E, N, K]) is 0}}
  %y = moe.grouped_matmul %rows, %w, %off : (tensor<?x256xbf16>, tensor<8x0x256xbf16>, tensor<9xi32>) -> tensor<?x0xbf16>
  return %y : tensor<?x0xbf16>
}

// -----

func.func @n_huge(%rows: tensor<?x256xbf16>, %w: tensor<8x4611686018427387904x256xbf16>, %off: tensor<9xi32>) -> tensor<?x4611686018427387904xbf16> {
  // expected-error @+1 {{'weights' dim 1 (N of [E, N, K]) is 4611686018427387904: a static size must be in [1, 2147483647]}}
  %y = moe.grouped_matmul %rows, %w, %off : (tensor<?x256xbf16>, tensor<8x4611686018427387904x256xbf16>, tensor<9xi32>) -> tensor<?x4611686018427387904xbf16>
  return %y : tensor<?x4611686018427387904xbf16>
}

// -----

func.func @n_just_over(%rows: tensor<?x256xbf16>, %w: tensor<8x2147483648x256xbf16>, %off: tensor<9xi32>) -> tensor<?x2147483648xbf16> {
  // expected-error @+1 {{'weights' dim 1 (N of [E, N, K]) is 2147483648: a static size must be in [1, 2147483647]}}
  %y = moe.grouped_matmul %rows, %w, %off : (tensor<?x256xbf16>, tensor<8x2147483648x256xbf16>, tensor<9xi32>) -> tensor<?x2147483648xbf16>
  return %y : tensor<?x2147483648xbf16>
}

// -----

func.func @e_zero(%rows: tensor<?x256xbf16>, %w: tensor<0x512x256xbf16>, %off: tensor<1xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{'weights' dim 0 (E of [E, N, K]) is 0}}
  %y = moe.grouped_matmul %rows, %w, %off : (tensor<?x256xbf16>, tensor<0x512x256xbf16>, tensor<1xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

func.func @m_zero(%rows: tensor<0x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<0x512xbf16> {
  // expected-error @+1 {{'rows' dim 0 (M of [M, K]) is 0}}
  %y = moe.grouped_matmul %rows, %w, %off : (tensor<0x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<0x512xbf16>
  return %y : tensor<0x512xbf16>
}

// -----

// Each size is in range, but the weights' bytes pass 2^63.
func.func @bytes(%rows: tensor<?x2147483647xbf16>, %w: tensor<8x2147483647x2147483647xbf16>, %off: tensor<9xi32>) -> tensor<?x2147483647xbf16> {
  // expected-error @+1 {{'weights' ('tensor<8x2147483647x2147483647xbf16>') has more bytes than int64 counts: its static sizes multiply past 2^63}}
  %y = moe.grouped_matmul %rows, %w, %off : (tensor<?x2147483647xbf16>, tensor<8x2147483647x2147483647xbf16>, tensor<9xi32>) -> tensor<?x2147483647xbf16>
  return %y : tensor<?x2147483647xbf16>
}

// -----

func.func @route_tokens(%logits: tensor<0x8xf32>) {
  // expected-error @+1 {{'logits' dim 0 (T of [T, E]) is 0}}
  %ids, %w = moe.route softmax_topk %logits top 2 : (tensor<0x8xf32>) -> (tensor<0x2xi32>, tensor<0x2xf32>)
  return
}

// -----

func.func @permute_hidden(%x: tensor<?x0xbf16>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'tokens' dim 1 (H of [T, H]) is 0}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x0xbf16>, tensor<?x2xi32>) -> (tensor<?x0xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @permute_tokens(%x: tensor<3000000000x16xf32>, %ids: tensor<3000000000x2xi32>) {
  // expected-error @+1 {{'tokens' dim 0 (T of [T, H]) is 3000000000}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<3000000000x16xf32>, tensor<3000000000x2xi32>) -> (tensor<?x16xf32>, tensor<9xi64>, tensor<3000000000x2xi64>)
  return
}

// -----

func.func @mlp_width(%r: tensor<?x64xbf16>, %o: tensor<5xi64>, %a: tensor<4x0x64xbf16>, %b: tensor<4x64x0xbf16>) {
  // expected-error @+1 {{'gate_up_weights' dim 1 (2I of [E, 2I, H]) is 0}}
  %y = moe.expert_mlp silu %r, %o, %a, %b : (tensor<?x64xbf16>, tensor<5xi64>, tensor<4x0x64xbf16>, tensor<4x64x0xbf16>) -> tensor<?x64xbf16>
  return
}

// -----

func.func @swiglu(%x: tensor<?x0xf32>) {
  // expected-error @+1 {{'input' dim 1 (2I of [M, 2I]) is 0}}
  %h = moe.swiglu silu %x : (tensor<?x0xf32>) -> tensor<?x0xf32>
  return
}

// -----

func.func @unpermute(%rows: tensor<?x0xbf16>, %slots: tensor<?x2xi64>) {
  // expected-error @+1 {{'rows' dim 1 (H of [M, H]) is 0}}
  %y = moe.unpermute %rows, %slots : (tensor<?x0xbf16>, tensor<?x2xi64>) -> tensor<?x0xbf16>
  return
}

// -----

func.func @unpermute_topk(%rows: tensor<?x8xbf16>, %slots: tensor<?x0xi64>) {
  // expected-error @+1 {{'slots' dim 1 (k of [T, k]) is 0}}
  %y = moe.unpermute %rows, %slots : (tensor<?x8xbf16>, tensor<?x0xi64>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @shared(%x: tensor<?x64xf32>, %w13: tensor<0x64xf32>, %w2: tensor<64x0xf32>) {
  // expected-error @+1 {{'gate_up_weights' dim 0 (2Is of [2Is, H]) is 0}}
  %y = moe.shared_mlp silu %x, %w13, %w2 : (tensor<?x64xf32>, tensor<0x64xf32>, tensor<64x0xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @quantize(%x: tensor<0x128xf32>) {
  // expected-error @+1 {{'input' dim 0 is 0}}
  %v, %s = moe.quantize %x to <f8E4M3FN, [1, 128], f32> : tensor<0x128xf32> -> tensor<0x128xf8E4M3FN>, tensor<0x1xf32>
  return
}

// -----

func.func @dequantize(%v: tensor<4x4294967296xf8E4M3FN>, %s: tensor<4x33554432xf32>) {
  // expected-error @+1 {{'values' dim 1 is 4294967296}}
  %x = moe.dequantize %v, %s from <f8E4M3FN, [1, 128], f32> : tensor<4x4294967296xf8E4M3FN>, tensor<4x33554432xf32> -> tensor<4x4294967296xf32>
  return
}

// -----

// At the bounds: every size 2^31 - 1, bytes just below 2^63.
func.func @edges(%rows: tensor<?x1073741824xf32>, %w: tensor<1x2147483647x1073741824xf32>, %off: tensor<2xi64>) -> tensor<?x2147483647xf32> {
  %y = moe.grouped_matmul %rows, %w, %off : (tensor<?x1073741824xf32>, tensor<1x2147483647x1073741824xf32>, tensor<2xi64>) -> tensor<?x2147483647xf32>
  return %y : tensor<?x2147483647xf32>
}

// -----

func.func @edges_route(%logits: tensor<2147483647x8xf32>) -> (tensor<2147483647x1xi32>, tensor<2147483647x1xf32>) {
  %ids, %w = moe.route softmax_topk %logits top 1 : (tensor<2147483647x8xf32>) -> (tensor<2147483647x1xi32>, tensor<2147483647x1xf32>)
  return %ids, %w : tensor<2147483647x1xi32>, tensor<2147483647x1xf32>
}
