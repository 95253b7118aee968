// Every verifier error of the moe dialect, each naming what it rejects.
// RUN: moe-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{block_scaled element type must be f8E4M3FN or f8E5M2, got 'bf16'}}
func.func @f() attributes {e = #moe.block_scaled<bf16, [1, 32], f32>} { return }

// -----

// expected-error @+1 {{block_scaled scale type must be f8E8M0FNU (MX) or f32, got 'f16'}}
func.func @f() attributes {e = #moe.block_scaled<f8E4M3FN, [1, 32], f16>} { return }

// -----

// expected-error @+2 {{expected integer value}}
// expected-error @+1 {{failed to parse MoE_BlockScaledEncodingAttr parameter 'block'}}
func.func @f() attributes {e = #moe.block_scaled<f8E4M3FN, [], f32>} { return }

// -----

// expected-error @+1 {{block_scaled block extents must be positive, got 0}}
func.func @f() attributes {e = #moe.block_scaled<f8E4M3FN, [0, 128], f32>} { return }

// -----

// expected-error @+1 {{MX (f8E8M0FNU-scaled) encodings need blocks of 32 along the last dimension ([1, 32]), got [128, 128]}}
func.func @f() attributes {e = #moe.block_scaled<f8E4M3FN, [128, 128], f8E8M0FNU>} { return }

// -----

// Shared slots: the results hold k + c columns, the gate needs them and
// [T, H] tokens with [1, H] gate weights.
func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{experts per token of 'expert_ids' (dim 1 = 2) must be 4 ('top' plus 'shared')}}
  %i, %w = moe.route softmax_topk %l top 2 shared 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x4xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'shared' must be in [1, 2147483639], got 0}}
  %i, %w = moe.route softmax_topk %l top 2 shared 0 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %x: tensor<?x16xbf16>, %g: tensor<1x16xbf16>) {
  // expected-error @+1 {{'gate' scales shared slots: it needs 'shared'}}
  %i, %w = moe.route softmax_topk %l top 2 gate %x, %g : (tensor<?x8xf32>, tensor<?x16xbf16>, tensor<1x16xbf16>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %x: tensor<?x16xbf16>, %g: tensor<1x12xbf16>) {
  // expected-error @+1 {{hidden size of 'gate weights' (dim 1 = 12) does not match 'gate tokens' (dim 1 = 16)}}
  %i, %w = moe.route softmax_topk %l top 2 shared 1 gate %x, %g : (tensor<?x8xf32>, tensor<?x16xbf16>, tensor<1x12xbf16>) -> (tensor<?x3xi32>, tensor<?x3xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %x: tensor<?x16xbf16>, %g: tensor<2x16xbf16>) {
  // expected-error @+1 {{gate count of 'gate weights' (dim 0 = 2) must be 1 (one shared gate)}}
  %i, %w = moe.route softmax_topk %l top 2 shared 1 gate %x, %g : (tensor<?x8xf32>, tensor<?x16xbf16>, tensor<2x16xbf16>) -> (tensor<?x3xi32>, tensor<?x3xf32>)
  return
}

// -----

func.func @f(%l: tensor<5x8xf32>, %x: tensor<4x16xbf16>, %g: tensor<1x16xbf16>) {
  // expected-error @+1 {{token count of 'gate tokens' (dim 0 = 4) does not match 'logits' (dim 0 = 5)}}
  %i, %w = moe.route softmax_topk %l top 2 shared 1 gate %x, %g : (tensor<5x8xf32>, tensor<4x16xbf16>, tensor<1x16xbf16>) -> (tensor<5x3xi32>, tensor<5x3xf32>)
  return
}

// -----

func.func @f(%l: tensor<8xf32>) {
  // expected-error @+1 {{'logits' must have rank 2 ([T, E]), got rank 1}}
  %i, %w = moe.route softmax_topk %l top 2 : (tensor<8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'expert_ids' must have rank 2 ([T, k]), got rank 1}}
  %i, %w = moe.route softmax_topk %l top 2 : (tensor<?x8xf32>) -> (tensor<2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'weights' must have rank 2 ([T, k]), got rank 3}}
  %i, %w = moe.route softmax_topk %l top 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2x1xf32>)
  return
}

// -----

func.func @f(%l: tensor<4x?xf32>) {
  // expected-error @+1 {{expert count of 'logits' (dim 1) must be static}}
  %i, %w = moe.route softmax_topk %l top 2 : (tensor<4x?xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'top' must be in [1, 8] (the expert count of 'logits'), got 0}}
  %i, %w = moe.route softmax_topk %l top 0 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'top' must be in [1, 8] (the expert count of 'logits'), got 9}}
  %i, %w = moe.route softmax_topk %l top 9 : (tensor<?x8xf32>) -> (tensor<?x9xi32>, tensor<?x9xf32>)
  return
}

// -----

func.func @f(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{token count of 'expert_ids' (dim 0 = 5) does not match 'logits' (dim 0 = 4)}}
  %i, %w = moe.route softmax_topk %l top 2 : (tensor<4x8xf32>) -> (tensor<5x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{token count of 'weights' (dim 0 = 3) does not match 'logits' (dim 0 = 4)}}
  %i, %w = moe.route softmax_topk %l top 2 : (tensor<4x8xf32>) -> (tensor<?x2xi32>, tensor<3x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{experts per token of 'expert_ids' (dim 1 = 3) must be 2 (the 'top' attribute)}}
  %i, %w = moe.route softmax_topk %l top 2 : (tensor<?x8xf32>) -> (tensor<?x3xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{experts per token of 'weights' (dim 1 = 1) must be 2 (the 'top' attribute)}}
  %i, %w = moe.route softmax_topk %l top 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x1xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'correction_bias' is only defined for sigmoid_topk routing}}
  %i, %w = moe.route softmax_topk %l bias %b top 2 : (tensor<?x8xf32>, tensor<8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %b: tensor<1x8xf32>) {
  // expected-error @+1 {{'correction_bias' must have rank 1 ([E]), got rank 2}}
  %i, %w = moe.route sigmoid_topk %l bias %b top 2 : (tensor<?x8xf32>, tensor<1x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %b: tensor<7xf32>) {
  // expected-error @+1 {{expert count of 'correction_bias' (dim 0 = 7) must be 8 (the expert count of 'logits')}}
  %i, %w = moe.route sigmoid_topk %l bias %b top 2 : (tensor<?x8xf32>, tensor<7xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'num_groups' and 'top_groups' must be given together}}
  %i, %w = "moe.route"(%l) {routing = 2 : i32, top_k = 2 : i64, num_groups = 4 : i64, operandSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{group-limited routing needs softmax_topk or sigmoid_topk scores}}
  %i, %w = moe.route topk_softmax %l top 2 groups 4 select 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'groups' (3) must divide the expert count 8}}
  %i, %w = moe.route sigmoid_topk %l top 2 groups 3 select 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'groups' (0) must divide the expert count 8}}
  %i, %w = moe.route sigmoid_topk %l top 2 groups 0 select 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'select' must be in [1, 4] groups, got 5}}
  %i, %w = moe.route sigmoid_topk %l top 2 groups 4 select 5 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'top' (5) exceeds the 4 experts in the 2 selected groups}}
  %i, %w = moe.route sigmoid_topk %l top 5 groups 4 select 2 : (tensor<?x8xf32>) -> (tensor<?x5xi32>, tensor<?x5xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'scale' must be finite and positive}}
  %i, %w = moe.route sigmoid_topk %l top 2 scale -1.0 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'scale' must be finite and positive}}
  %i, %w = moe.route sigmoid_topk %l top 2 scale 0x7F800000 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%l: tensor<?x8xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values without encoding}}
  %i, %w = moe.route softmax_topk %l top 2 : (tensor<?x8xi32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%x: tensor<16xf32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'tokens' must have rank 2 ([T, H]), got rank 1}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<9xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>, %ids: tensor<?xi32>) {
  // expected-error @+1 {{'expert_ids' must have rank 2 ([T, k]), got rank 1}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x16xf32>, tensor<?xi32>) -> (tensor<?x16xf32>, tensor<9xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'rows' must have rank 2 ([M, H]), got rank 1}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?xf32>, tensor<9xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'slots' must have rank 2 ([T, k]), got rank 1}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<9xi64>, tensor<?xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'offsets' must have rank 1 ([E+1]), got rank 2}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<9x1xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{expert count of 'offsets' (dim 0) must be static}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<?xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'offsets' must have E+1 >= 2 entries, got 1}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<1xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<3x16xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{token count of 'expert_ids' (dim 0 = 4) does not match 'tokens' (dim 0 = 3)}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<3x16xf32>, tensor<4x2xi32>) -> (tensor<?x16xf32>, tensor<9xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{experts per token of 'slots' (dim 1 = 3) does not match 'expert_ids' (dim 1 = 2)}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<9xi64>, tensor<?x3xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{hidden size of 'rows' (dim 1 = 15) does not match 'tokens' (dim 1 = 16)}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x15xf32>, tensor<9xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'rows' element type must match 'tokens'}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'pad_to' must be in [1, 65536], got 0}}
  %r, %o, %s = moe.permute %x, %ids pad_to 0 : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<9xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{row count of 'rows' must be dynamic when the token count or k is dynamic}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<10x16xf32>, tensor<9xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<5x16xf32>, %ids: tensor<5x2xi32>) {
  // expected-error @+1 {{row count of 'rows' (dim 0 = 10) must be 34 (T*k + E*(pad_to-1))}}
  %r, %o, %s = moe.permute %x, %ids pad_to 4 : (tensor<5x16xf32>, tensor<5x2xi32>) -> (tensor<10x16xf32>, tensor<9xi64>, tensor<5x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>, %ids: tensor<?x2xi64>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer values without encoding}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<?x16xf32>, tensor<?x2xi64>) -> (tensor<?x16xf32>, tensor<9xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %w: tensor<32x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'weights' must have rank 3 ([E, N, K]), got rank 2}}
  %y = moe.grouped_matmul %r, %w, %o : (tensor<?x16xf32>, tensor<32x16xf32>, tensor<5xi64>) -> tensor<?x32xf32>
  return
}

// -----

// kn_weights: the weights are [E, K, N], so K is their dim 1, N their dim 2.
func.func @f(%r: tensor<?x16xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{contraction size of 'rows' (dim 1 = 16) does not match 'weights' (dim 1 = 32)}}
  %y = moe.grouped_matmul %r, %w, %o kn_weights : (tensor<?x16xf32>, tensor<4x32x16xf32>, tensor<5xi64>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %w: tensor<4x16x32xf32>, %o: tensor<5xi64>, %b: tensor<4x16xf32>) {
  // expected-error @+1 {{output size of 'bias' (dim 1 = 16) does not match 'weights' (dim 2 = 32)}}
  %y = moe.grouped_matmul %r, %w, %o bias %b kn_weights : (tensor<?x16xf32>, tensor<4x16x32xf32>, tensor<5xi64>, tensor<4x16xf32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %w: tensor<16x32xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'weights' must have rank 3 ([E, K, N]), got rank 2}}
  %y = moe.grouped_matmul %r, %w, %o kn_weights : (tensor<?x16xf32>, tensor<16x32xf32>, tensor<5xi64>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'result' must have rank 2 ([M, N]), got rank 1}}
  %y = moe.grouped_matmul %r, %w, %o : (tensor<?x16xf32>, tensor<4x32x16xf32>, tensor<5xi64>) -> tensor<?xf32>
  return
}

// -----

// Offsets of the wrong length are the offsets' fault: the weights hold the
// experts.
func.func @f(%r: tensor<?x16xf32>, %o: tensor<10xi64>, %w13: tensor<8x64x16xf32>, %w2: tensor<8x16x32xf32>) {
  // expected-error @+1 {{'offsets' has 10 entries, but 'gate_up_weights' holds 8 experts (dim 0): 'offsets' must have 9 (one more than the experts)}}
  %y = moe.expert_mlp silu %r, %o, %w13, %w2 : (tensor<?x16xf32>, tensor<10xi64>, tensor<8x64x16xf32>, tensor<8x16x32xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %w: tensor<4x32x16xf32>, %o: tensor<6xi64>) {
  // expected-error @+1 {{'offsets' has 6 entries, but 'weights' holds 4 experts (dim 0): 'offsets' must have 5 (one more than the experts)}}
  %y = moe.grouped_matmul %r, %w, %o : (tensor<?x16xf32>, tensor<4x32x16xf32>, tensor<6xi64>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%r: tensor<?x8xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{contraction size of 'rows' (dim 1 = 8) does not match 'weights' (dim 2 = 16)}}
  %y = moe.grouped_matmul %r, %w, %o : (tensor<?x8xf32>, tensor<4x32x16xf32>, tensor<5xi64>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%r: tensor<7x16xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{row count of 'result' (dim 0 = 6) does not match 'rows' (dim 0 = 7)}}
  %y = moe.grouped_matmul %r, %w, %o : (tensor<7x16xf32>, tensor<4x32x16xf32>, tensor<5xi64>) -> tensor<6x32xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{output size of 'result' (dim 1 = 31) does not match 'weights' (dim 1 = 32)}}
  %y = moe.grouped_matmul %r, %w, %o : (tensor<?x16xf32>, tensor<4x32x16xf32>, tensor<5xi64>) -> tensor<?x31xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xbf16>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'rows' and 'weights' must have the same element type}}
  %y = moe.grouped_matmul %r, %w, %o : (tensor<?x16xbf16>, tensor<4x32x16xf32>, tensor<5xi64>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>, %b: tensor<32xf32>) {
  // expected-error @+1 {{'bias' must have rank 2 ([E, N]), got rank 1}}
  %y = moe.grouped_matmul %r, %w, %o bias %b : (tensor<?x16xf32>, tensor<4x32x16xf32>, tensor<5xi64>, tensor<32xf32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>, %b: tensor<3x32xf32>) {
  // expected-error @+1 {{expert count of 'bias' (dim 0 = 3) must be 4 (the size of 'offsets' minus one)}}
  %y = moe.grouped_matmul %r, %w, %o bias %b : (tensor<?x16xf32>, tensor<4x32x16xf32>, tensor<5xi64>, tensor<3x32xf32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>, %b: tensor<4x16xf32>) {
  // expected-error @+1 {{output size of 'bias' (dim 1 = 16) does not match 'weights' (dim 1 = 32)}}
  %y = moe.grouped_matmul %r, %w, %o bias %b : (tensor<?x16xf32>, tensor<4x32x16xf32>, tensor<5xi64>, tensor<4x16xf32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%r: tensor<7x16xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>, %s: tensor<6xf32>) {
  // expected-error @+1 {{row count of 'row_scale' (dim 0 = 6) does not match 'rows' (dim 0 = 7)}}
  %y = moe.grouped_matmul %r, %w, %o scale %s : (tensor<7x16xf32>, tensor<4x32x16xf32>, tensor<5xi64>, tensor<6xf32>) -> tensor<7x32xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>, %s: tensor<?x1xf32>) {
  // expected-error @+1 {{'row_scale' must have rank 1 ([M]), got rank 2}}
  %y = moe.grouped_matmul %r, %w, %o scale %s : (tensor<?x16xf32>, tensor<4x32x16xf32>, tensor<5xi64>, tensor<?x1xf32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%g: tensor<?x31xf32>) {
  // expected-error @+1 {{'input' dim 1 (31) must be even: gate columns, then up columns}}
  %h = moe.swiglu silu %g : (tensor<?x31xf32>) -> tensor<?x15xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>) {
  // expected-error @+1 {{'result' dim 1 (32) must be half of 'input' dim 1 (32)}}
  %h = moe.swiglu silu %g : (tensor<?x32xf32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>) {
  // expected-error @+1 {{'result' must have rank 2 ([M, I]), got rank 1}}
  %h = moe.swiglu silu %g : (tensor<?x32xf32>) -> tensor<?xf32>
  return
}

// -----

func.func @f(%g: tensor<4x32xf32>) {
  // expected-error @+1 {{row count of 'result' (dim 0 = 5) does not match 'input' (dim 0 = 4)}}
  %h = moe.swiglu silu %g : (tensor<4x32xf32>) -> tensor<5x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>) {
  // expected-error @+1 {{'alpha' and 'limit' apply to the gptoss activation only}}
  %h = moe.swiglu silu %g alpha 1.0 : (tensor<?x32xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>) {
  // expected-error @+1 {{'limit' must be finite and positive}}
  %h = moe.swiglu gptoss %g limit -7.0 : (tensor<?x32xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>) {
  // expected-error @+1 {{'alpha' must be finite and non-zero}}
  %h = moe.swiglu gptoss %g alpha 0.0 : (tensor<?x32xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%g: tensor<4x32xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{row count of 'scale' (dim 0 = 3) does not match 'input' (dim 0 = 4)}}
  %h = moe.swiglu silu %g scale %s : (tensor<4x32xf32>, tensor<3xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%g: tensor<4x32xf32>, %s: tensor<4x1xf32>) {
  // expected-error @+1 {{'scale' must have rank 1 ([M]), got rank 2}}
  %h = moe.swiglu silu %g scale %s : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %s: tensor<?xi64>) {
  // expected-error @+1 {{'slots' must have rank 2 ([T, k]), got rank 1}}
  %y = moe.unpermute %r, %s : (tensor<?x16xf32>, tensor<?xi64>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%r: tensor<16xf32>, %s: tensor<?x2xi64>) {
  // expected-error @+1 {{'rows' must have rank 2 ([M, H]), got rank 1}}
  %y = moe.unpermute %r, %s : (tensor<16xf32>, tensor<?x2xi64>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %s: tensor<4x2xi64>) {
  // expected-error @+1 {{token count of 'result' (dim 0 = 5) does not match 'slots' (dim 0 = 4)}}
  %y = moe.unpermute %r, %s : (tensor<?x16xf32>, tensor<4x2xi64>) -> tensor<5x16xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %s: tensor<?x2xi64>) {
  // expected-error @+1 {{hidden size of 'result' (dim 1 = 8) does not match 'rows' (dim 1 = 16)}}
  %y = moe.unpermute %r, %s : (tensor<?x16xf32>, tensor<?x2xi64>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %s: tensor<?x2xi64>, %w: tensor<?x3xf32>) {
  // expected-error @+1 {{experts per token of 'weights' (dim 1 = 3) does not match 'slots' (dim 1 = 2)}}
  %y = moe.unpermute %r, %s weights %w : (tensor<?x16xf32>, tensor<?x2xi64>, tensor<?x3xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %s: tensor<4x2xi64>, %w: tensor<3x2xf32>) {
  // expected-error @+1 {{token count of 'weights' (dim 0 = 3) does not match 'slots' (dim 0 = 4)}}
  %y = moe.unpermute %r, %s weights %w : (tensor<?x16xf32>, tensor<4x2xi64>, tensor<3x2xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %s: tensor<?x2xi64>, %w: tensor<?xf32>) {
  // expected-error @+1 {{'weights' must have rank 2 ([T, k]), got rank 1}}
  %y = moe.unpermute %r, %s weights %w : (tensor<?x16xf32>, tensor<?x2xi64>, tensor<?xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'values' must have the shape of 'input'}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<4x64xf32> -> tensor<4x32xf8E4M3FN>, tensor<4x2xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'values' element type 'f8E5M2' does not match the encoding's 'f8E4M3FN'}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<4x64xf32> -> tensor<4x64xf8E5M2>, tensor<4x2xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'scales' element type 'f32' does not match the encoding's 'f8E8M0FNU'}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<4x64xf32> -> tensor<4x64xf8E4M3FN>, tensor<4x2xf32>
  return
}

// -----

func.func @f(%x: tensor<64xf32>) {
  // expected-error @+1 {{block shape of rank 2 does not fit 'values' of rank 1}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 128], f32> : tensor<64xf32> -> tensor<64xf8E4M3FN>, tensor<1xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'scales' must have rank 2 (one scale per block), got rank 1}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<4x64xf32> -> tensor<4x64xf8E4M3FN>, tensor<8xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<4x?xf32>) {
  // expected-error @+1 {{dim 1 of 'values' is dynamic, so its block extent must be 1, got 32}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<4x?xf32> -> tensor<4x?xf8E4M3FN>, tensor<4x?xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{dim 0 of 'scales' must be dynamic like 'values'}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x64xf32> -> tensor<?x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<4x48xf32>) {
  // expected-error @+1 {{block extent 32 does not divide dim 1 of 'values' (48)}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<4x48xf32> -> tensor<4x48xf8E4M3FN>, tensor<4x1xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{dim 1 of 'scales' (3) must be 2 (one scale per block of 32)}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<4x64xf32> -> tensor<4x64xf8E4M3FN>, tensor<4x3xf8E8M0FNU>
  return
}

// -----

func.func @f(%x: tensor<200x256xf32>) {
  // expected-error @+1 {{block extent 128 does not divide dim 0 of 'values' (200)}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [128, 128], f32> : tensor<200x256xf32> -> tensor<200x256xf8E4M3FN>, tensor<1x2xf32>
  return
}

// -----

func.func @f(%q: tensor<4x64xf8E4M3FN>, %s: tensor<4x2xf8E8M0FNU>) {
  // expected-error @+1 {{'result' must have the shape of 'values'}}
  %d = moe.dequantize %q, %s from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU> -> tensor<4x32xf32>
  return
}

// -----

func.func @f(%q: tensor<4x64xf8E4M3FN>, %s: tensor<4x2xf8E8M0FNU>) {
  // expected-error @+1 {{'values' element type 'f8E4M3FN' does not match the encoding's 'f8E5M2'}}
  %d = moe.dequantize %q, %s from <f8E5M2, [1, 32], f8E8M0FNU> : tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU> -> tensor<4x64xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{result #0 must be ranked tensor of f8E4M3FN type or f8E5M2 type values without encoding}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<4x64xf32> -> tensor<4x64xi8>, tensor<4x2xf8E8M0FNU>
  return
}

// -----

func.func @f(%r: tensor<?x12xf32>, %o: tensor<5xi64>, %a: tensor<16x12xf32>, %b: tensor<4x12x8xf32>) {
  // expected-error @+1 {{'gate_up_weights' must have rank 3 ([E, 2I, H]), got rank 2}}
  %y = moe.expert_mlp silu %r, %o, %a, %b : (tensor<?x12xf32>, tensor<5xi64>, tensor<16x12xf32>, tensor<4x12x8xf32>) -> tensor<?x12xf32>
  return
}

// -----

func.func @f(%r: tensor<?x12xf32>, %o: tensor<5xi64>, %a: tensor<4x16x12xf32>, %b: tensor<3x12x8xf32>) {
  // expected-error @+1 {{expert count of 'down_weights' (dim 0 = 3) must be 4 (the size of 'offsets' minus one)}}
  %y = moe.expert_mlp silu %r, %o, %a, %b : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x12xf32>, tensor<3x12x8xf32>) -> tensor<?x12xf32>
  return
}

// -----

func.func @f(%r: tensor<?x12xf32>, %o: tensor<5xi64>, %a: tensor<4x16x10xf32>, %b: tensor<4x12x8xf32>) {
  // expected-error @+1 {{hidden size of 'gate_up_weights' (dim 2 = 10) does not match 'rows' (dim 1 = 12)}}
  %y = moe.expert_mlp silu %r, %o, %a, %b : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x10xf32>, tensor<4x12x8xf32>) -> tensor<?x12xf32>
  return
}

// -----

func.func @f(%r: tensor<?x12xf32>, %o: tensor<5xi64>, %a: tensor<4x16x12xf32>, %b: tensor<4x10x8xf32>) {
  // expected-error @+1 {{hidden size of 'down_weights' (dim 1 = 10) does not match 'rows' (dim 1 = 12)}}
  %y = moe.expert_mlp silu %r, %o, %a, %b : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x12xf32>, tensor<4x10x8xf32>) -> tensor<?x12xf32>
  return
}

// -----

func.func @f(%r: tensor<?x12xf32>, %o: tensor<5xi64>, %a: tensor<4x16x12xf32>, %b: tensor<4x12x6xf32>) {
  // expected-error @+1 {{'down_weights' dim 2 (6) must be half of 'gate_up_weights' dim 1 (16)}}
  %y = moe.expert_mlp silu %r, %o, %a, %b : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x12xf32>, tensor<4x12x6xf32>) -> tensor<?x12xf32>
  return
}

// -----

func.func @f(%r: tensor<?x12xf32>, %o: tensor<5xi64>, %a: tensor<4x16x12xf32>, %b: tensor<4x12x8xbf16>) {
  // expected-error @+1 {{'gate_up_weights' and 'down_weights' must have the element type of 'rows'}}
  %y = moe.expert_mlp silu %r, %o, %a, %b : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x12xf32>, tensor<4x12x8xbf16>) -> tensor<?x12xf32>
  return
}

// -----

func.func @f(%r: tensor<?x12xf32>, %o: tensor<5xi64>, %a: tensor<4x16x12xf32>, %b: tensor<4x12x8xf32>, %c: tensor<4x12xf32>) {
  // expected-error @+1 {{gate-up width of 'gate_up_bias' (dim 1 = 12) does not match 'gate_up_weights' (dim 1 = 16)}}
  %y = moe.expert_mlp silu %r, %o, %a, %b gate_up_bias %c : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x12xf32>, tensor<4x12x8xf32>, tensor<4x12xf32>) -> tensor<?x12xf32>
  return
}

// -----

func.func @f(%r: tensor<?x12xf32>, %o: tensor<5xi64>, %a: tensor<4x16x12xf32>, %b: tensor<4x12x8xf32>, %c: tensor<4x8xf32>) {
  // expected-error @+1 {{hidden size of 'down_bias' (dim 1 = 8) does not match 'rows' (dim 1 = 12)}}
  %y = moe.expert_mlp silu %r, %o, %a, %b down_bias %c : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x12xf32>, tensor<4x12x8xf32>, tensor<4x8xf32>) -> tensor<?x12xf32>
  return
}

// -----

func.func @f(%r: tensor<?x12xf32>, %o: tensor<5xi64>, %a: tensor<4x16x12xf32>, %b: tensor<4x12x8xf32>) {
  // expected-error @+1 {{hidden size of 'result' (dim 1 = 8) does not match 'rows' (dim 1 = 12)}}
  %y = moe.expert_mlp silu %r, %o, %a, %b : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x12xf32>, tensor<4x12x8xf32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%r: tensor<?x12xf32>, %o: tensor<5xi64>, %a: tensor<4x16x12xf32>, %b: tensor<4x12x8xf32>) {
  // expected-error @+1 {{'alpha' and 'limit' apply to the gptoss activation only}}
  %y = moe.expert_mlp silu %r, %o, %a, %b limit 3.0 : (tensor<?x12xf32>, tensor<5xi64>, tensor<4x16x12xf32>, tensor<4x12x8xf32>) -> tensor<?x12xf32>
  return
}

// -----

func.func @f(%r: tensor<?x64xf32>, %o: tensor<5xi64>, %a: tensor<4x128x64xf32>, %b: tensor<4x64x64xf32>) {
  // expected-error @+1 {{'intermediate' must have a [1, B] block (groups along I of the [M, I] activation), got [32]}}
  %y = moe.expert_mlp silu %r, %o, %a, %b intermediate <f8E4M3FN, [32], f32> : (tensor<?x64xf32>, tensor<5xi64>, tensor<4x128x64xf32>, tensor<4x64x64xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @f(%r: tensor<?x64xf32>, %o: tensor<5xi64>, %a: tensor<4x128x64xf32>, %b: tensor<4x64x64xf32>) {
  // expected-error @+1 {{'intermediate' must have a [1, B] block (groups along I of the [M, I] activation), got [1, 1, 32]}}
  %y = moe.expert_mlp silu %r, %o, %a, %b intermediate <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : (tensor<?x64xf32>, tensor<5xi64>, tensor<4x128x64xf32>, tensor<4x64x64xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @f(%r: tensor<?x64xf32>, %o: tensor<5xi64>, %a: tensor<4x128x64xf32>, %b: tensor<4x64x64xf32>) {
  // expected-error @+1 {{'intermediate' must have a [1, B] block (groups along I of the [M, I] activation), got [2, 32]}}
  %y = moe.expert_mlp silu %r, %o, %a, %b intermediate <f8E4M3FN, [2, 32], f32> : (tensor<?x64xf32>, tensor<5xi64>, tensor<4x128x64xf32>, tensor<4x64x64xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @f(%r: tensor<?x64xf32>, %o: tensor<5xi64>, %a: tensor<4x96x64xf32>, %b: tensor<4x64x48xf32>) {
  // expected-error @+1 {{'intermediate' block 32 does not divide the expert width I = 48 ('down_weights' dim 2)}}
  %y = moe.expert_mlp silu %r, %o, %a, %b intermediate <f8E4M3FN, [1, 32], f8E8M0FNU> : (tensor<?x64xf32>, tensor<5xi64>, tensor<4x96x64xf32>, tensor<4x64x48xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @f(%x: tensor<4611686018427387904x16xf32>, %ids: tensor<4611686018427387904x2xi32>) {
  // expected-error @+1 {{'tokens' dim 0 (T of [T, H]) is 4611686018427387904: a static size must be in [1, 2147483647]}}
  %r, %o, %s = moe.permute %x, %ids : (tensor<4611686018427387904x16xf32>, tensor<4611686018427387904x2xi32>) -> (tensor<?x16xf32>, tensor<9xi64>, tensor<4611686018427387904x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'pad_to' must be in [1, 65536], got 4611686018427387904}}
  %r, %o, %s = moe.permute %x, %ids pad_to 4611686018427387904 : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<9xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>) {
  // expected-error @+1 {{'offsets' dim 0 (E+1 of [E+1]) is 4611686018427387904: a static size must be in [1, 2147483647]}}
  %r, %o, %s = moe.permute %x, %ids pad_to 4 : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<4611686018427387904xi64>, tensor<?x2xi64>)
  return
}

// -----

func.func @f(%x: tensor<?x16xf32, "rows">) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values without encoding}}
  %h = moe.swiglu silu %x : (tensor<?x16xf32, "rows">) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>) -> tensor<?x2xf32> {
  // expected-error @+1 {{yields 'tensor<?x2xi32>' but its result is 'tensor<?x2xf32>'}}
  %y = moe.layer : tensor<?x2xf32> {
    %ids, %w = moe.route softmax_topk %l top 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
    moe.yield %ids : tensor<?x2xi32>
  }
  return %y : tensor<?x2xf32>
}

// -----

func.func @f(%l: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %y = moe.layer : tensor<?x8xf32> {
    // expected-error @+1 {{cannot be part of a moe.layer: its body holds moe ops other than moe.layer only}}
    %e = math.exp %l : tensor<?x8xf32>
    moe.yield %e : tensor<?x8xf32>
  }
  return %y : tensor<?x8xf32>
}

// -----

func.func @f(%l: tensor<?x8xf32>) {
  // expected-error @+1 {{'moe.yield' op expects parent op 'moe.layer'}}
  moe.yield %l : tensor<?x8xf32>
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>) {
  // expected-error @+1 {{supports the silu activation only, got 'gptoss' (no model has a shared expert of another form)}}
  %s = moe.shared_mlp gptoss %x, %a, %b : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>) {
  // expected-error @+1 {{'tokens' must have rank 2 ([T, H]), got rank 1}}
  %s = moe.shared_mlp silu %x, %a, %b : (tensor<16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<2x64x16xbf16>, %b: tensor<16x32xbf16>) {
  // expected-error @+1 {{'gate_up_weights' must have rank 2 ([2Is, H]), got rank 3}}
  %s = moe.shared_mlp silu %x, %a, %b : (tensor<?x16xbf16>, tensor<2x64x16xbf16>, tensor<16x32xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<1x16x32xbf16>) {
  // expected-error @+1 {{'down_weights' must have rank 2 ([H, Is]), got rank 3}}
  %s = moe.shared_mlp silu %x, %a, %b : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<1x16x32xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>) {
  // expected-error @+1 {{'result' must have rank 2 ([T, H]), got rank 3}}
  %s = moe.shared_mlp silu %x, %a, %b : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>) -> tensor<?x16x1xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<64x8xbf16>, %b: tensor<16x32xbf16>) {
  // expected-error @+1 {{hidden size of 'gate_up_weights' (dim 1 = 8) does not match 'tokens' (dim 1 = 16)}}
  %s = moe.shared_mlp silu %x, %a, %b : (tensor<?x16xbf16>, tensor<64x8xbf16>, tensor<16x32xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<8x32xbf16>) {
  // expected-error @+1 {{hidden size of 'down_weights' (dim 0 = 8) does not match 'tokens' (dim 1 = 16)}}
  %s = moe.shared_mlp silu %x, %a, %b : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<8x32xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<63x16xbf16>, %b: tensor<16x32xbf16>) {
  // expected-error @+1 {{'gate_up_weights' dim 0 (63) must be even: gate columns, then up columns}}
  %s = moe.shared_mlp silu %x, %a, %b : (tensor<?x16xbf16>, tensor<63x16xbf16>, tensor<16x32xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x24xbf16>) {
  // expected-error @+1 {{'down_weights' dim 1 (24) must be half of 'gate_up_weights' dim 0 (64)}}
  %s = moe.shared_mlp silu %x, %a, %b : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x24xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<4x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>) {
  // expected-error @+1 {{token count of 'result' (dim 0 = 5) does not match 'tokens' (dim 0 = 4)}}
  %s = moe.shared_mlp silu %x, %a, %b : (tensor<4x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>) -> tensor<5x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>) {
  // expected-error @+1 {{hidden size of 'result' (dim 1 = 8) does not match 'tokens' (dim 1 = 16)}}
  %s = moe.shared_mlp silu %x, %a, %b : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<64x16xf32>, %b: tensor<16x32xbf16>) {
  // expected-error @+1 {{'gate_up_weights' element type 'f32' must be the element type of 'tokens' ('bf16')}}
  %s = moe.shared_mlp silu %x, %a, %b : (tensor<?x16xbf16>, tensor<64x16xf32>, tensor<16x32xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xf16>) {
  // expected-error @+1 {{'down_weights' element type 'f16' must be the element type of 'tokens' ('bf16')}}
  %s = moe.shared_mlp silu %x, %a, %b : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>, %g: tensor<1x16xf32>) {
  // expected-error @+1 {{'gate_weights' element type 'f32' must be the element type of 'tokens' ('bf16')}}
  %s = moe.shared_mlp silu %x, %a, %b gate %g : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xf32>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>, %g: tensor<16xbf16>) {
  // expected-error @+1 {{'gate_weights' must have rank 2 ([1, H]), got rank 1}}
  %s = moe.shared_mlp silu %x, %a, %b gate %g : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<16xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>, %g: tensor<?x16xbf16>) {
  // expected-error @+1 {{gate count of 'gate_weights' (dim 0) must be static}}
  %s = moe.shared_mlp silu %x, %a, %b gate %g : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<?x16xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>, %g: tensor<2x16xbf16>) {
  // expected-error @+1 {{gate count of 'gate_weights' (dim 0 = 2) must be 1 (one gate logit per token)}}
  %s = moe.shared_mlp silu %x, %a, %b gate %g : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<2x16xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>, %g: tensor<1x8xbf16>) {
  // expected-error @+1 {{hidden size of 'gate_weights' (dim 1 = 8) does not match 'tokens' (dim 1 = 16)}}
  %s = moe.shared_mlp silu %x, %a, %b gate %g : (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x8xbf16>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %s: tensor<4x2xi64>, %w: tensor<4x2xf32>, %x: tensor<4x16x1xf32>) {
  // expected-error @+1 {{'shared' must have rank 2 ([T, H]), got rank 3}}
  %y = moe.unpermute %r, %s weights %w shared %x : (tensor<?x16xf32>, tensor<4x2xi64>, tensor<4x2xf32>, tensor<4x16x1xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %s: tensor<4x2xi64>, %w: tensor<4x2xf32>, %x: tensor<3x16xf32>) {
  // expected-error @+1 {{token count of 'shared' (dim 0 = 3) does not match 'result' (dim 0 = 4)}}
  %y = moe.unpermute %r, %s weights %w shared %x : (tensor<?x16xf32>, tensor<4x2xi64>, tensor<4x2xf32>, tensor<3x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %s: tensor<4x2xi64>, %w: tensor<4x2xf32>, %x: tensor<?x8xf32>) {
  // expected-error @+1 {{hidden size of 'shared' (dim 1 = 8) does not match 'result' (dim 1 = 16)}}
  %y = moe.unpermute %r, %s weights %w shared %x : (tensor<?x16xf32>, tensor<4x2xi64>, tensor<4x2xf32>, tensor<?x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%r: tensor<?x16xf32>, %s: tensor<4x2xi64>, %w: tensor<4x2xf32>, %x: tensor<4x16xbf16>) {
  // expected-error @+1 {{'shared' element type 'bf16' must be the result's ('f32')}}
  %y = moe.unpermute %r, %s weights %w shared %x : (tensor<?x16xf32>, tensor<4x2xi64>, tensor<4x2xf32>, tensor<4x16xbf16>) -> tensor<4x16xf32>
  return
}

// -----

// moe.unpermute_grad: [T, H] output gradient, [M, H] rows, [T, k] slots,
// optional [T, k] weights; the gradients are shaped like their primals.
func.func @f(%g: tensor<16xf32>, %r: tensor<?x16xf32>, %s: tensor<?x2xi64>) {
  // expected-error @+1 {{'grad' must have rank 2 ([T, H]), got rank 1}}
  %d = moe.unpermute_grad %g, %r, %s : (tensor<16xf32>, tensor<?x16xf32>, tensor<?x2xi64>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<?x16x1xf32>, %s: tensor<?x2xi64>) {
  // expected-error @+1 {{'rows' must have rank 2 ([M, H]), got rank 3}}
  %d = moe.unpermute_grad %g, %r, %s : (tensor<?x16xf32>, tensor<?x16x1xf32>, tensor<?x2xi64>) -> tensor<?x16x1xf32>
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<?x16xf32>, %s: tensor<?xi64>) {
  // expected-error @+1 {{'slots' must have rank 2 ([T, k]), got rank 1}}
  %d = moe.unpermute_grad %g, %r, %s : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<?x16xf32>, %s: tensor<?x0xi64>) {
  // expected-error @+1 {{'slots' dim 1 (k of [T, k]) is 0: a static size must be in [1, 2147483647] (the kernels and the runtime take 32-bit sizes)}}
  %d = moe.unpermute_grad %g, %r, %s : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x0xi64>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%g: tensor<4x16xf32>, %r: tensor<?x16xf32>, %s: tensor<3x2xi64>) {
  // expected-error @+1 {{token count of 'slots' (dim 0 = 3) does not match 'grad' (dim 0 = 4)}}
  %d = moe.unpermute_grad %g, %r, %s : (tensor<4x16xf32>, tensor<?x16xf32>, tensor<3x2xi64>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<?x8xf32>, %s: tensor<?x2xi64>) {
  // expected-error @+1 {{hidden size of 'rows' (dim 1 = 8) does not match 'grad' (dim 1 = 16)}}
  %d = moe.unpermute_grad %g, %r, %s : (tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x2xi64>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<?x16xf32>, %s: tensor<?x2xi64>) {
  // expected-error @+1 {{'rows_grad' must have the rank of 'rows' (2), got rank 1}}
  %d = moe.unpermute_grad %g, %r, %s : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x2xi64>) -> tensor<?xf32>
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<6x16xf32>, %s: tensor<?x2xi64>) {
  // expected-error @+1 {{size of 'rows_grad' (dim 0 = 5) does not match 'rows' (dim 0 = 6)}}
  %d = moe.unpermute_grad %g, %r, %s : (tensor<?x16xf32>, tensor<6x16xf32>, tensor<?x2xi64>) -> tensor<5x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<?x16xf32>, %s: tensor<?x2xi64>) {
  // expected-error @+1 {{'rows_grad' element type 'bf16' must be the element type of 'rows' ('f32')}}
  %d = moe.unpermute_grad %g, %r, %s : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x2xi64>) -> tensor<?x16xbf16>
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<?x16xf32>, %s: tensor<?x2xi64>, %w: tensor<?x2xf32>) {
  // expected-error @+1 {{with 'weights' the op has a second result, 'weights_grad'}}
  %d = moe.unpermute_grad %g, %r, %s weights %w : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<?x16xf32>, %s: tensor<?x2xi64>) {
  // expected-error @+1 {{'weights_grad' needs 'weights' (without them every weight is 1 and has no gradient)}}
  %d, %dw = moe.unpermute_grad %g, %r, %s : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x2xi64>) -> (tensor<?x16xf32>, tensor<?x2xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<?x16xf32>, %s: tensor<?x2xi64>, %w: tensor<?xf32>) {
  // expected-error @+1 {{'weights' must have rank 2 ([T, k]), got rank 1}}
  %d, %dw = moe.unpermute_grad %g, %r, %s weights %w : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x2xi64>, tensor<?xf32>) -> (tensor<?x16xf32>, tensor<?xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<?x16xf32>, %s: tensor<4x2xi64>, %w: tensor<3x2xf32>) {
  // expected-error @+1 {{token count of 'weights' (dim 0 = 3) does not match 'slots' (dim 0 = 4)}}
  %d, %dw = moe.unpermute_grad %g, %r, %s weights %w : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<4x2xi64>, tensor<3x2xf32>) -> (tensor<?x16xf32>, tensor<3x2xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<?x16xf32>, %s: tensor<?x2xi64>, %w: tensor<?x3xf32>) {
  // expected-error @+1 {{experts per token of 'weights' (dim 1 = 3) does not match 'slots' (dim 1 = 2)}}
  %d, %dw = moe.unpermute_grad %g, %r, %s weights %w : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x2xi64>, tensor<?x3xf32>) -> (tensor<?x16xf32>, tensor<?x3xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<?x16xf32>, %s: tensor<?x2xi64>, %w: tensor<?x2xf32>) {
  // expected-error @+1 {{'weights_grad' must have the rank of 'weights' (2), got rank 1}}
  %d, %dw = moe.unpermute_grad %g, %r, %s weights %w : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> (tensor<?x16xf32>, tensor<?xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<?x16xf32>, %s: tensor<?x2xi64>, %w: tensor<?x2xf32>) {
  // expected-error @+1 {{size of 'weights_grad' (dim 1 = 3) does not match 'weights' (dim 1 = 2)}}
  %d, %dw = moe.unpermute_grad %g, %r, %s weights %w : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> (tensor<?x16xf32>, tensor<?x3xf32>)
  return
}

// -----

// Routing weights and their gradients are f32 whatever the rows are.
func.func @f(%g: tensor<?x16xbf16>, %r: tensor<?x16xbf16>, %s: tensor<?x2xi64>, %w: tensor<?x2xf32>) {
  // expected-error @+1 {{result #1 must be ranked tensor of 32-bit float values without encoding, but got 'tensor<?x2xbf16>'}}
  %d, %dw = moe.unpermute_grad %g, %r, %s weights %w : (tensor<?x16xbf16>, tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> (tensor<?x16xbf16>, tensor<?x2xbf16>)
  return
}

// -----

// moe.grouped_dgrad: [M, N] gradient x [E, N, K] weights -> [M, K].
func.func @f(%g: tensor<32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'grad' must have rank 2 ([M, N]), got rank 1}}
  %d = moe.grouped_dgrad %g, %w, %o : (tensor<32xf32>, tensor<4x32x16xf32>, tensor<5xi64>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %w: tensor<32x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'weights' must have rank 3 ([E, N, K]), got rank 2}}
  %d = moe.grouped_dgrad %g, %w, %o : (tensor<?x32xf32>, tensor<32x16xf32>, tensor<5xi64>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'result' must have rank 2 ([M, K]), got rank 3}}
  %d = moe.grouped_dgrad %g, %w, %o : (tensor<?x32xf32>, tensor<4x32x16xf32>, tensor<5xi64>) -> tensor<?x16x1xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %w: tensor<4x32x0xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'weights' dim 2 (K of [E, N, K]) is 0: a static size must be in [1, 2147483647] (the kernels and the runtime take 32-bit sizes)}}
  %d = moe.grouped_dgrad %g, %w, %o : (tensor<?x32xf32>, tensor<4x32x0xf32>, tensor<5xi64>) -> tensor<?x0xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5x1xi64>) {
  // expected-error @+1 {{'offsets' must have rank 1 ([E+1]), got rank 2}}
  %d = moe.grouped_dgrad %g, %w, %o : (tensor<?x32xf32>, tensor<4x32x16xf32>, tensor<5x1xi64>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<?xi64>) {
  // expected-error @+1 {{expert count of 'offsets' (dim 0) must be static}}
  %d = moe.grouped_dgrad %g, %w, %o : (tensor<?x32xf32>, tensor<4x32x16xf32>, tensor<?xi64>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %w: tensor<?x32x16xf32>, %o: tensor<1xi64>) {
  // expected-error @+1 {{'offsets' must have E+1 >= 2 entries, got 1}}
  %d = moe.grouped_dgrad %g, %w, %o : (tensor<?x32xf32>, tensor<?x32x16xf32>, tensor<1xi64>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<4xi32>) {
  // expected-error @+1 {{'offsets' has 4 entries, but 'weights' holds 4 experts (dim 0): 'offsets' must have 5 (one more than the experts)}}
  %d = moe.grouped_dgrad %g, %w, %o : (tensor<?x32xf32>, tensor<4x32x16xf32>, tensor<4xi32>) -> tensor<?x16xf32>
  return
}

// -----

// The forward's weights are [E, N, K] for a [M, K] -> [M, N] matmul: the
// gradient has N columns.
func.func @f(%g: tensor<?x16xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{contraction size of 'grad' (dim 1 = 16) does not match 'weights' (dim 1 = 32)}}
  %d = moe.grouped_dgrad %g, %w, %o : (tensor<?x16xf32>, tensor<4x32x16xf32>, tensor<5xi64>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%g: tensor<6x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{row count of 'result' (dim 0 = 5) does not match 'grad' (dim 0 = 6)}}
  %d = moe.grouped_dgrad %g, %w, %o : (tensor<6x32xf32>, tensor<4x32x16xf32>, tensor<5xi64>) -> tensor<5x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{output size of 'result' (dim 1 = 8) does not match 'weights' (dim 2 = 16)}}
  %d = moe.grouped_dgrad %g, %w, %o : (tensor<?x32xf32>, tensor<4x32x16xf32>, tensor<5xi64>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xf32>) {
  // expected-error @+1 {{operand #2 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values without encoding, but got 'tensor<5xf32>'}}
  %d = moe.grouped_dgrad %g, %w, %o : (tensor<?x32xf32>, tensor<4x32x16xf32>, tensor<5xf32>) -> tensor<?x16xf32>
  return
}

// -----

// moe.grouped_wgrad: [M, N] gradient and [M, K] rows -> [E, N, K], and
// optionally [E, N] bias gradients.
func.func @f(%g: tensor<32xf32>, %r: tensor<?x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'grad' must have rank 2 ([M, N]), got rank 1}}
  %d = moe.grouped_wgrad %g, %r, %o : (tensor<32xf32>, tensor<?x16xf32>, tensor<5xi64>) -> tensor<4x32x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %r: tensor<?x16x1xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'rows' must have rank 2 ([M, K]), got rank 3}}
  %d = moe.grouped_wgrad %g, %r, %o : (tensor<?x32xf32>, tensor<?x16x1xf32>, tensor<5xi64>) -> tensor<4x32x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %r: tensor<?x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'weight_grad' must have rank 3 ([E, N, K]), got rank 2}}
  %d = moe.grouped_wgrad %g, %r, %o : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<5xi64>) -> tensor<32x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x2147483647xf32>, %r: tensor<?x2147483647xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'weight_grad' ('tensor<4x2147483647x2147483647xf32>') has more bytes than int64 counts: its static sizes multiply past 2^63}}
  %d = moe.grouped_wgrad %g, %r, %o : (tensor<?x2147483647xf32>, tensor<?x2147483647xf32>, tensor<5xi64>) -> tensor<4x2147483647x2147483647xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %r: tensor<?x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'bias_grad' dim 0 (E of [E, N]) is 0: a static size must be in [1, 2147483647] (the kernels and the runtime take 32-bit sizes)}}
  %d, %b = moe.grouped_wgrad %g, %r, %o : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<5xi64>) -> (tensor<4x32x16xf32>, tensor<0x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %r: tensor<?x16xf32>, %o: tensor<9xi32>) {
  // expected-error @+1 {{'offsets' has 9 entries, but 'weight_grad' holds 4 experts (dim 0): 'offsets' must have 5 (one more than the experts)}}
  %d = moe.grouped_wgrad %g, %r, %o : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<9xi32>) -> tensor<4x32x16xf32>
  return
}

// -----

func.func @f(%g: tensor<6x32xf32>, %r: tensor<5x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{row count of 'rows' (dim 0 = 5) does not match 'grad' (dim 0 = 6)}}
  %d = moe.grouped_wgrad %g, %r, %o : (tensor<6x32xf32>, tensor<5x16xf32>, tensor<5xi64>) -> tensor<4x32x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %r: tensor<?x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{output size of 'weight_grad' (dim 1 = 16) does not match 'grad' (dim 1 = 32)}}
  %d = moe.grouped_wgrad %g, %r, %o : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<5xi64>) -> tensor<4x16x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %r: tensor<?x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{contraction size of 'weight_grad' (dim 2 = 8) does not match 'rows' (dim 1 = 16)}}
  %d = moe.grouped_wgrad %g, %r, %o : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<5xi64>) -> tensor<4x32x8xf32>
  return
}

// -----

// kn_weights: the weight gradient lies [E, K, N], as the weights do.
func.func @f(%g: tensor<?x32xf32>, %r: tensor<?x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{output size of 'weight_grad' (dim 2 = 16) does not match 'grad' (dim 1 = 32)}}
  %d = moe.grouped_wgrad %g, %r, %o kn_weights : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<5xi64>) -> tensor<4x32x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %r: tensor<?x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'bias_grad' must have rank 2 ([E, N]), got rank 1}}
  %d, %b = moe.grouped_wgrad %g, %r, %o : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<5xi64>) -> (tensor<4x32x16xf32>, tensor<32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %r: tensor<?x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{expert count of 'bias_grad' (dim 0 = 3) must be 4 (the size of 'offsets' minus one)}}
  %d, %b = moe.grouped_wgrad %g, %r, %o : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<5xi64>) -> (tensor<4x32x16xf32>, tensor<3x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %r: tensor<?x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{output size of 'bias_grad' (dim 1 = 16) does not match 'grad' (dim 1 = 32)}}
  %d, %b = moe.grouped_wgrad %g, %r, %o : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<5xi64>) -> (tensor<4x32x16xf32>, tensor<4x16xf32>)
  return
}

// -----

// moe.swiglu_grad: [M, 2I] input and [M, I] gradient -> [M, 2I].
func.func @f(%x: tensor<32xf32>, %g: tensor<?x16xf32>) {
  // expected-error @+1 {{'input' must have rank 2 ([M, 2I]), got rank 1}}
  %d = moe.swiglu_grad silu %x, %g : (tensor<32xf32>, tensor<?x16xf32>) -> tensor<32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x32xf32>, %g: tensor<?x16x1xf32>) {
  // expected-error @+1 {{'grad' must have rank 2 ([M, I]), got rank 3}}
  %d = moe.swiglu_grad silu %x, %g : (tensor<?x32xf32>, tensor<?x16x1xf32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x32xf32>, %g: tensor<?x16xf32>) {
  // expected-error @+1 {{'result' dim 0 (M of [M, 2I]) is 0: a static size must be in [1, 2147483647] (the kernels and the runtime take 32-bit sizes)}}
  %d = moe.swiglu_grad silu %x, %g : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<0x32xf32>
  return
}

// -----

func.func @f(%x: tensor<4x32xf32>, %g: tensor<3x16xf32>) {
  // expected-error @+1 {{row count of 'grad' (dim 0 = 3) does not match 'input' (dim 0 = 4)}}
  %d = moe.swiglu_grad silu %x, %g : (tensor<4x32xf32>, tensor<3x16xf32>) -> tensor<4x32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x31xf32>, %g: tensor<?x16xf32>) {
  // expected-error @+1 {{'input' dim 1 (31) must be even: gate columns, then up columns}}
  %d = moe.swiglu_grad silu %x, %g : (tensor<?x31xf32>, tensor<?x16xf32>) -> tensor<?x31xf32>
  return
}

// -----

func.func @f(%x: tensor<?x32xf32>, %g: tensor<?x8xf32>) {
  // expected-error @+1 {{'grad' dim 1 (8) must be half of 'input' dim 1 (32)}}
  %d = moe.swiglu_grad silu %x, %g : (tensor<?x32xf32>, tensor<?x8xf32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x32xf32>, %g: tensor<?x16xf32>) {
  // expected-error @+1 {{'result' must have the rank of 'input' (2), got rank 1}}
  %d = moe.swiglu_grad silu %x, %g : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?xf32>
  return
}

// -----

// The result is the input's gradient, not the output's: [M, 2I].
func.func @f(%x: tensor<?x32xf32>, %g: tensor<?x16xf32>) {
  // expected-error @+1 {{size of 'result' (dim 1 = 16) does not match 'input' (dim 1 = 32)}}
  %d = moe.swiglu_grad silu %x, %g : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%x: tensor<?x32xbf16>, %g: tensor<?x16xbf16>) {
  // expected-error @+1 {{'result' element type 'f32' must be the element type of 'input' ('bf16')}}
  %d = moe.swiglu_grad silu %x, %g : (tensor<?x32xbf16>, tensor<?x16xbf16>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x32xf32>, %g: tensor<?x16xf32>) {
  // expected-error @+1 {{'alpha' and 'limit' apply to the gptoss activation only}}
  %d = moe.swiglu_grad silu %x, %g alpha 1.702 : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x32xf32>, %g: tensor<?x16xf32>) {
  // expected-error @+1 {{'alpha' must be finite and non-zero}}
  %d = moe.swiglu_grad gptoss %x, %g alpha 0.0 : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x32xf32>, %g: tensor<?x16xf32>) {
  // expected-error @+1 {{'limit' must be finite and positive}}
  %d = moe.swiglu_grad gptoss %x, %g limit -7.0 : (tensor<?x32xf32>, tensor<?x16xf32>) -> tensor<?x32xf32>
  return
}

// -----

// moe.route_grad: [T, E] logits, [T, k] ids and [T, k] f32 weight
// gradients -> [T, E].
func.func @f(%l: tensor<8xf32>, %i: tensor<?x2xi32>, %g: tensor<?x2xf32>) {
  // expected-error @+1 {{'logits' must have rank 2 ([T, E]), got rank 1}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<8xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %i: tensor<?xi32>, %g: tensor<?x2xf32>) {
  // expected-error @+1 {{'expert_ids' must have rank 2 ([T, k]), got rank 1}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<?x8xf32>, tensor<?xi32>, tensor<?x2xf32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %i: tensor<?x2xi32>, %g: tensor<?x2x1xf32>) {
  // expected-error @+1 {{'grad' must have rank 2 ([T, k]), got rank 3}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2x1xf32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%l: tensor<4x?xf32>, %i: tensor<4x2xi32>, %g: tensor<4x2xf32>) {
  // expected-error @+1 {{expert count of 'logits' (dim 1) must be static}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<4x?xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x?xf32>
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %i: tensor<?x0xi32>, %g: tensor<?x0xf32>) {
  // expected-error @+1 {{'expert_ids' dim 1 (k of [T, k]) is 0: a static size must be in [1, 2147483647] (the kernels and the runtime take 32-bit sizes)}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<?x8xf32>, tensor<?x0xi32>, tensor<?x0xf32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%l: tensor<4x8xf32>, %i: tensor<5x2xi32>, %g: tensor<?x2xf32>) {
  // expected-error @+1 {{token count of 'expert_ids' (dim 0 = 5) does not match 'logits' (dim 0 = 4)}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<4x8xf32>, tensor<5x2xi32>, tensor<?x2xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%l: tensor<4x8xf32>, %i: tensor<?x2xi32>, %g: tensor<5x2xf32>) {
  // expected-error @+1 {{token count of 'grad' (dim 0 = 5) does not match 'logits' (dim 0 = 4)}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<4x8xf32>, tensor<?x2xi32>, tensor<5x2xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %i: tensor<?x2xi32>, %g: tensor<?x3xf32>) {
  // expected-error @+1 {{experts per token of 'grad' (dim 1 = 3) does not match 'expert_ids' (dim 1 = 2)}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x3xf32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %i: tensor<?x2xi32>, %g: tensor<?x2xf32>) {
  // expected-error @+1 {{'result' must have the rank of 'logits' (2), got rank 1}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?xf32>
  return
}

// -----

// The gradient is the logits', [T, E], not the weights', [T, k].
func.func @f(%l: tensor<?x8xf32>, %i: tensor<?x2xi32>, %g: tensor<?x2xf32>) {
  // expected-error @+1 {{size of 'result' (dim 1 = 2) does not match 'logits' (dim 1 = 8)}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  return
}

// -----

func.func @f(%l: tensor<?x8xbf16>, %i: tensor<?x2xi32>, %g: tensor<?x2xf32>) {
  // expected-error @+1 {{'result' element type 'f32' must be the element type of 'logits' ('bf16')}}
  %d = moe.route_grad topk_softmax %l, %i, %g : (tensor<?x8xbf16>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %i: tensor<?x9xi32>, %g: tensor<?x9xf32>) {
  // expected-error @+1 {{experts per token of 'expert_ids' (dim 1 = 9) exceeds the expert count of 'logits' (dim 1 = 8)}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<?x8xf32>, tensor<?x9xi32>, tensor<?x9xf32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %i: tensor<?x2xi32>, %g: tensor<?x2xf32>) {
  // expected-error @+1 {{'scale' must be finite and positive}}
  %d = moe.route_grad sigmoid_topk %l, %i, %g renormalize scale 0.0 : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %i: tensor<?x2xi32>, %g: tensor<?x2xf32>) {
  // expected-error @+1 {{'scale' must be finite and positive}}
  %d = moe.route_grad sigmoid_topk %l, %i, %g scale -2.5 : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x8xf32>
  return
}

// -----

// The weights' gradient is f32, as moe.route's weights are.
func.func @f(%l: tensor<?x8xbf16>, %i: tensor<?x2xi32>, %g: tensor<?x2xbf16>) {
  // expected-error @+1 {{operand #2 must be ranked tensor of 32-bit float values without encoding, but got 'tensor<?x2xbf16>'}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<?x8xbf16>, tensor<?x2xi32>, tensor<?x2xbf16>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %i: tensor<?x2xi64>, %g: tensor<?x2xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer values without encoding, but got 'tensor<?x2xi64>'}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<?x8xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %i: tensor<?x?xi32>, %g: tensor<?x?xf32>) {
  // expected-error @+1 {{experts per token of 'expert_ids' (dim 1) must be static}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<?x8xf32>, tensor<?x?xi32>, tensor<?x?xf32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %r: tensor<?x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{expert count of 'weight_grad' (dim 0) must be static}}
  %d = moe.grouped_wgrad %g, %r, %o : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<5xi64>) -> tensor<?x32x16xf32>
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %r: tensor<?x16xf32>, %s: tensor<?x2xi64>) {
  // expected-error @+1 {{'rows_grad' dim 0 (M of [M, H]) is 0: a static size must be in [1, 2147483647]}}
  %d = moe.unpermute_grad %g, %r, %s : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x2xi64>) -> tensor<0x16xf32>
  return
}

// -----

func.func @f(%l: tensor<?x8xf32>, %i: tensor<?x2xi32>, %g: tensor<?x2xf32>) {
  // expected-error @+1 {{'result' dim 0 (T of [T, E]) is 4611686018427387904: a static size must be in [1, 2147483647]}}
  %d = moe.route_grad softmax_topk %l, %i, %g : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<4611686018427387904x8xf32>
  return
}

// -----

func.func @f(%rows: tensor<?x4xbf16>, %flat: tensor<?xbf16>, %off: tensor<9xi64>, %off2: tensor<3x3xi64>, %cnt: tensor<2xi64>) {
  // expected-error @+1 {{'ranks' (3) must divide the expert count 8 (each rank owns E / ranks experts)}}
  %r, %i, %n = moe.dispatch %rows, %off ranks 3 : (tensor<?x4xbf16>, tensor<9xi64>) -> (tensor<?x4xbf16>, tensor<?x1xi32>, tensor<3xi64>)
  return
}

// -----

func.func @f(%rows: tensor<?x4xbf16>, %flat: tensor<?xbf16>, %off: tensor<9xi64>, %off2: tensor<3x3xi64>, %cnt: tensor<2xi64>) {
  // expected-error @+1 {{'ranks' (0) must divide the expert count 8 (each rank owns E / ranks experts)}}
  %r, %i, %n = moe.dispatch %rows, %off ranks 0 : (tensor<?x4xbf16>, tensor<9xi64>) -> (tensor<?x4xbf16>, tensor<?x1xi32>, tensor<3xi64>)
  return
}

// -----

func.func @f(%rows: tensor<?x4xbf16>, %flat: tensor<?xbf16>, %off: tensor<9xi64>, %off2: tensor<3x3xi64>, %cnt: tensor<2xi64>) {
  // expected-error @+1 {{rank count of 'counts' (dim 0 = 4) must be 2 (the 'ranks' attribute)}}
  %r, %i, %n = moe.dispatch %rows, %off ranks 2 : (tensor<?x4xbf16>, tensor<9xi64>) -> (tensor<?x4xbf16>, tensor<?x1xi32>, tensor<4xi64>)
  return
}

// -----

func.func @f(%rows: tensor<?x4xbf16>, %flat: tensor<?xbf16>, %off: tensor<9xi64>, %off2: tensor<3x3xi64>, %cnt: tensor<2xi64>) {
  // expected-error @+1 {{rank count of 'counts' (dim 0) must be static}}
  %r, %i, %n = moe.dispatch %rows, %off ranks 2 : (tensor<?x4xbf16>, tensor<9xi64>) -> (tensor<?x4xbf16>, tensor<?x1xi32>, tensor<?xi64>)
  return
}

// -----

func.func @f(%rows: tensor<?x4xbf16>, %flat: tensor<?xbf16>, %off: tensor<9xi64>, %off2: tensor<3x3xi64>, %cnt: tensor<2xi64>) {
  // expected-error @+1 {{ids per row of 'local_ids' (dim 1 = 2) must be 1 (one expert per received row)}}
  %r, %i, %n = moe.dispatch %rows, %off ranks 2 : (tensor<?x4xbf16>, tensor<9xi64>) -> (tensor<?x4xbf16>, tensor<?x2xi32>, tensor<2xi64>)
  return
}

// -----

func.func @f(%rows: tensor<?x4xbf16>, %flat: tensor<?xbf16>, %off: tensor<9xi64>, %off2: tensor<3x3xi64>, %cnt: tensor<2xi64>) {
  // expected-error @+1 {{hidden size of 'received' (dim 1 = 8) does not match 'rows' (dim 1 = 4)}}
  %r, %i, %n = moe.dispatch %rows, %off ranks 2 : (tensor<?x4xbf16>, tensor<9xi64>) -> (tensor<?x8xbf16>, tensor<?x1xi32>, tensor<2xi64>)
  return
}

// -----

func.func @f(%rows: tensor<?x4xbf16>, %flat: tensor<?xbf16>, %off: tensor<9xi64>, %off2: tensor<3x3xi64>, %cnt: tensor<2xi64>) {
  // expected-error @+1 {{row count of 'local_ids' (dim 0 = 3) does not match 'received' (dim 0 = 5)}}
  %r, %i, %n = moe.dispatch %rows, %off ranks 2 : (tensor<?x4xbf16>, tensor<9xi64>) -> (tensor<5x4xbf16>, tensor<3x1xi32>, tensor<2xi64>)
  return
}

// -----

func.func @f(%rows: tensor<?x4xbf16>, %flat: tensor<?xbf16>, %off: tensor<9xi64>, %off2: tensor<3x3xi64>, %cnt: tensor<2xi64>) {
  // expected-error @+1 {{'received' element type must match 'rows'}}
  %r, %i, %n = moe.dispatch %rows, %off ranks 2 : (tensor<?x4xbf16>, tensor<9xi64>) -> (tensor<?x4xf32>, tensor<?x1xi32>, tensor<2xi64>)
  return
}

// -----

func.func @f(%rows: tensor<?x4xbf16>, %flat: tensor<?xbf16>, %off: tensor<9xi64>, %off2: tensor<3x3xi64>, %cnt: tensor<2xi64>) {
  // expected-error @+1 {{'rows' must have rank 2 ([M, H]), got rank 1}}
  %r, %i, %n = moe.dispatch %flat, %off ranks 2 : (tensor<?xbf16>, tensor<9xi64>) -> (tensor<?x4xbf16>, tensor<?x1xi32>, tensor<2xi64>)
  return
}

// -----

func.func @f(%rows: tensor<?x4xbf16>, %flat: tensor<?xbf16>, %off: tensor<9xi64>, %off2: tensor<3x3xi64>, %cnt: tensor<2xi64>) {
  // expected-error @+1 {{'received' dim 0 (R of [R, H]) is 0: a static size must be in [1, 2147483647]}}
  %r, %i, %n = moe.dispatch %rows, %off ranks 2 : (tensor<?x4xbf16>, tensor<9xi64>) -> (tensor<0x4xbf16>, tensor<0x1xi32>, tensor<2xi64>)
  return
}

// -----

func.func @f(%rows: tensor<?x4xbf16>, %flat: tensor<?xbf16>, %off: tensor<9xi64>, %off2: tensor<3x3xi64>, %cnt: tensor<2xi64>) {
  // expected-error @+1 {{hidden size of 'result' (dim 1 = 8) does not match 'rows' (dim 1 = 4)}}
  %b = moe.undispatch %rows, %cnt, %off ranks 2 : (tensor<?x4xbf16>, tensor<2xi64>, tensor<9xi64>) -> tensor<?x8xbf16>
  return
}

// -----

func.func @f(%rows: tensor<?x4xbf16>, %flat: tensor<?xbf16>, %off: tensor<9xi64>, %off2: tensor<3x3xi64>, %cnt: tensor<2xi64>) {
  // expected-error @+1 {{result element type must match 'rows'}}
  %b = moe.undispatch %rows, %cnt, %off ranks 2 : (tensor<?x4xbf16>, tensor<2xi64>, tensor<9xi64>) -> tensor<?x4xf32>
  return
}

// -----

func.func @f(%rows: tensor<?x4xbf16>, %flat: tensor<?xbf16>, %off: tensor<9xi64>, %off2: tensor<3x3xi64>, %cnt: tensor<2xi64>) {
  // expected-error @+1 {{'ranks' (16) must divide the expert count 8 (each rank owns E / ranks experts)}}
  %b = moe.undispatch %rows, %cnt, %off ranks 16 : (tensor<?x4xbf16>, tensor<2xi64>, tensor<9xi64>) -> tensor<?x4xbf16>
  return
}

// -----

func.func @f(%rows: tensor<?x4xbf16>, %flat: tensor<?xbf16>, %off: tensor<9xi64>, %off2: tensor<3x3xi64>, %cnt: tensor<2xi64>) {
  // expected-error @+1 {{'offsets' must have rank 1 ([E+1]), got rank 2}}
  %b = moe.undispatch %rows, %cnt, %off2 ranks 2 : (tensor<?x4xbf16>, tensor<2xi64>, tensor<3x3xi64>) -> tensor<?x4xbf16>
  return
}

// -----

// moe.shared_mlp_grad: [T, H] output gradient, [T, H] tokens, [2Is, H]
// and [H, Is] weights, an optional [1, H] gate; each gradient shaped like
// its primal, gate_grad exactly when there is a gate.
func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{supports the silu activation only, as moe.shared_mlp does}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad gptoss %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{'grad' must have rank 2 ([T, H]), got rank 1}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16x1xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{'tokens' must have rank 2 ([T, H]), got rank 3}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16x1xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> (tensor<?x16x1xf32>, tensor<64x16xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<2x64x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{'gate_up_weights' must have rank 2 ([2Is, H]), got rank 3}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<2x64x16xf32>, tensor<16x32xf32>) -> (tensor<?x16xf32>, tensor<2x64x16xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<512xf32>) {
  // expected-error @+1 {{'down_weights' must have rank 2 ([H, Is]), got rank 1}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<512xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<512xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{'tokens_grad' dim 0 (T of [T, H]) is 0: a static size must be in [1, 2147483647] (the kernels and the runtime take 32-bit sizes)}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> (tensor<0x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<2147483646x2147483647xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{'gate_up_weights' ('tensor<2147483646x2147483647xf32>') has more bytes than int64 counts: its static sizes multiply past 2^63}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<2147483646x2147483647xf32>, tensor<16x32xf32>) -> (tensor<?x16xf32>, tensor<2147483646x2147483647xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<4x16xf32>, %x: tensor<5x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{token count of 'grad' (dim 0 = 4) does not match 'tokens' (dim 0 = 5)}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<4x16xf32>, tensor<5x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> (tensor<5x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x8xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{hidden size of 'grad' (dim 1 = 8) does not match 'tokens' (dim 1 = 16)}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x8xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x8xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{hidden size of 'gate_up_weights' (dim 1 = 8) does not match 'tokens' (dim 1 = 16)}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x8xf32>, tensor<16x32xf32>) -> (tensor<?x16xf32>, tensor<64x8xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<8x32xf32>) {
  // expected-error @+1 {{hidden size of 'down_weights' (dim 0 = 8) does not match 'tokens' (dim 1 = 16)}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<8x32xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<8x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<63x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{'gate_up_weights' dim 0 (63) must be even: gate columns, then up columns}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<63x16xf32>, tensor<16x32xf32>) -> (tensor<?x16xf32>, tensor<63x16xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x24xf32>) {
  // expected-error @+1 {{'down_weights' dim 1 (24) must be half of 'gate_up_weights' dim 0 (64)}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x24xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x24xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{'tokens_grad' must have the rank of 'tokens' (2), got rank 3}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> (tensor<?x16x1xf32>, tensor<64x16xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{size of 'tokens_grad' (dim 1 = 8) does not match 'tokens' (dim 1 = 16)}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> (tensor<?x8xf32>, tensor<64x16xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>) {
  // expected-error @+1 {{'tokens_grad' element type 'f32' must be the element type of 'tokens' ('bf16')}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>) -> (tensor<?x16xf32>, tensor<64x16xbf16>, tensor<16x32xbf16>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{'gate_up_grad' must have the rank of 'gate_up_weights' (2), got rank 3}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> (tensor<?x16xf32>, tensor<1x64x16xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{size of 'gate_up_grad' (dim 0 = 32) does not match 'gate_up_weights' (dim 0 = 64)}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> (tensor<?x16xf32>, tensor<32x16xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>) {
  // expected-error @+1 {{'gate_up_grad' element type 'f32' must be the element type of 'gate_up_weights' ('bf16')}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>) -> (tensor<?x16xbf16>, tensor<64x16xf32>, tensor<16x32xbf16>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{'down_grad' must have the rank of 'down_weights' (2), got rank 1}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<512xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{size of 'down_grad' (dim 1 = 16) does not match 'down_weights' (dim 1 = 32)}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x16xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>) {
  // expected-error @+1 {{'down_grad' element type 'f32' must be the element type of 'down_weights' ('bf16')}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>) -> (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>, %c: tensor<1x16xf32>) {
  // expected-error @+1 {{with 'gate' the op has a fourth result, 'gate_grad'}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b gate %c : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<1x16xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{'gate_grad' needs 'gate'}}
  %dx, %dw13, %dw2, %dg = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<1x16xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>, %c: tensor<16xf32>) {
  // expected-error @+1 {{'gate_weights' must have rank 2 ([1, H]), got rank 1}}
  %dx, %dw13, %dw2, %dg = moe.shared_mlp_grad silu %g, %x, %a, %b gate %c : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<16xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<16xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>, %c: tensor<2x16xf32>) {
  // expected-error @+1 {{gate count of 'gate_weights' (dim 0 = 2) must be 1 (one gate logit per token)}}
  %dx, %dw13, %dw2, %dg = moe.shared_mlp_grad silu %g, %x, %a, %b gate %c : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<2x16xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<2x16xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>, %c: tensor<1x8xf32>) {
  // expected-error @+1 {{hidden size of 'gate_weights' (dim 1 = 8) does not match 'tokens' (dim 1 = 16)}}
  %dx, %dw13, %dw2, %dg = moe.shared_mlp_grad silu %g, %x, %a, %b gate %c : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<1x8xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<1x8xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>, %c: tensor<1x16xf32>) {
  // expected-error @+1 {{'gate_grad' must have the rank of 'gate_weights' (2), got rank 1}}
  %dx, %dw13, %dw2, %dg = moe.shared_mlp_grad silu %g, %x, %a, %b gate %c : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<1x16xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<16xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xf32>, %a: tensor<64x16xf32>, %b: tensor<16x32xf32>, %c: tensor<1x16xf32>) {
  // expected-error @+1 {{size of 'gate_grad' (dim 1 = 8) does not match 'gate_weights' (dim 1 = 16)}}
  %dx, %dw13, %dw2, %dg = moe.shared_mlp_grad silu %g, %x, %a, %b gate %c : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<1x16xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<1x8xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>, %c: tensor<1x16xbf16>) {
  // expected-error @+1 {{'gate_grad' element type 'f32' must be the element type of 'gate_weights' ('bf16')}}
  %dx, %dw13, %dw2, %dg = moe.shared_mlp_grad silu %g, %x, %a, %b gate %c : (tensor<?x16xf32>, tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xbf16>) -> (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xf32>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xbf16>, %a: tensor<64x16xf32>, %b: tensor<16x32xbf16>) {
  // expected-error @+1 {{'gate_up_weights' element type 'f32' must be the element type of 'tokens' ('bf16')}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xbf16>, tensor<64x16xf32>, tensor<16x32xbf16>) -> (tensor<?x16xbf16>, tensor<64x16xf32>, tensor<16x32xbf16>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xf16>) {
  // expected-error @+1 {{'down_weights' element type 'f16' must be the element type of 'tokens' ('bf16')}}
  %dx, %dw13, %dw2 = moe.shared_mlp_grad silu %g, %x, %a, %b : (tensor<?x16xf32>, tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xf16>) -> (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xf16>)
  return
}

// -----

func.func @f(%g: tensor<?x16xf32>, %x: tensor<?x16xbf16>, %a: tensor<64x16xbf16>, %b: tensor<16x32xbf16>, %c: tensor<1x16xf32>) {
  // expected-error @+1 {{'gate_weights' element type 'f32' must be the element type of 'tokens' ('bf16')}}
  %dx, %dw13, %dw2, %dg = moe.shared_mlp_grad silu %g, %x, %a, %b gate %c : (tensor<?x16xf32>, tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xf32>) -> (tensor<?x16xbf16>, tensor<64x16xbf16>, tensor<16x32xbf16>, tensor<1x16xf32>)
  return
}

// -----

func.func @f(%ds: tensor<?x16xf32>, %x: tensor<?x16xf32>, %w13: tensor<64x16xf32>, %w2: tensor<16x32xf32>, %g: tensor<?x16xf32>) {
  // expected-error @+1 {{gate count of 'gate_weights' (dim 0) must be static}}
  %a, %b, %c, %d = moe.shared_mlp_grad silu %ds, %x, %w13, %w2 gate %g : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<?x16xf32>)
  return
}

// -----

// moe.grouped_dgrad with act_grad: the result is the [M, 2K] gradient of
// the activation's input.
func.func @f(%g: tensor<?x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>, %gu: tensor<?x33xf32>) {
  // expected-error @+1 {{'act_input' dim 1 (33) must be even: gate columns, then up columns}}
  %d = moe.grouped_dgrad %g, %w, %o act_grad silu %gu : (tensor<?x32xf32>, tensor<4x32x16xf32>, tensor<5xi64>, tensor<?x33xf32>) -> tensor<?x33xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>, %gu: tensor<?x48xf32>) {
  // expected-error @+1 {{'weights' dim 2 (16) must be half of 'act_input' dim 1 (48)}}
  %d = moe.grouped_dgrad %g, %w, %o act_grad silu %gu : (tensor<?x32xf32>, tensor<4x32x16xf32>, tensor<5xi64>, tensor<?x48xf32>) -> tensor<?x48xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>, %gu: tensor<?x32xf32>) {
  // expected-error @+1 {{size of 'result' (dim 1 = 16) does not match 'act_input' (dim 1 = 32)}}
  %d = moe.grouped_dgrad %g, %w, %o act_grad silu %gu : (tensor<?x32xf32>, tensor<4x32x16xf32>, tensor<5xi64>, tensor<?x32xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%g: tensor<7x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>, %gu: tensor<8x32xf32>) {
  // expected-error @+1 {{row count}}
  %d = moe.grouped_dgrad %g, %w, %o act_grad silu %gu : (tensor<7x32xf32>, tensor<4x32x16xf32>, tensor<5xi64>, tensor<8x32xf32>) -> tensor<8x32xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>, %gu: tensor<?x32xbf16>) {
  // expected-error @+1 {{'result' element type 'f32' must be the element type of 'act_input' ('bf16')}}
  %d = moe.grouped_dgrad %g, %w, %o act_grad silu %gu : (tensor<?x32xf32>, tensor<4x32x16xf32>, tensor<5xi64>, tensor<?x32xbf16>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>, %gu: tensor<?x32xf32>) {
  // expected-error @+1 {{'alpha' and 'limit' apply to the gptoss activation only}}
  %d = moe.grouped_dgrad %g, %w, %o act_grad silu %gu alpha 1.0 : (tensor<?x32xf32>, tensor<4x32x16xf32>, tensor<5xi64>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%g: tensor<?x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{'alpha' and 'limit' need act_grad gptoss}}
  %d = moe.grouped_dgrad %g, %w, %o limit 7.0 : (tensor<?x32xf32>, tensor<4x32x16xf32>, tensor<5xi64>) -> tensor<?x16xf32>
  return
}

// -----

// The generic form can give the input without the activation.
func.func @f(%g: tensor<?x32xf32>, %w: tensor<4x32x16xf32>, %o: tensor<5xi64>, %gu: tensor<?x32xf32>) {
  // expected-error @+1 {{'act_input' and 'activation' come together (act_grad <activation> %input)}}
  %d = "moe.grouped_dgrad"(%g, %w, %o, %gu) : (tensor<?x32xf32>, tensor<4x32x16xf32>, tensor<5xi64>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%x: tensor<64xbf16>) {
  // expected-error @+1 {{block shape of rank 2 does not fit 'input' of rank 1}}
  %y = moe.fake_quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<64xbf16>
  return
}

// -----

func.func @f(%x: tensor<4x48xbf16>) {
  // expected-error @+1 {{block extent 32 does not divide dim 1 of 'input' (48)}}
  %y = moe.fake_quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<4x48xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x256xbf16>) {
  // expected-error @+1 {{dim 0 of 'input' is dynamic, so its block extent must be 1, got 128}}
  %y = moe.fake_quantize %x to <f8E4M3FN, [128, 128], f32> : tensor<?x256xbf16>
  return
}

// -----

func.func @f(%x: tensor<4x64xi32>) {
  // expected-error @+1 {{operand #0 must be}}
  %y = moe.fake_quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<4x64xi32>
  return
}
