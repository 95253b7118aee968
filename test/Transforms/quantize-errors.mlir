// --moe-quantize refusals: each names the option or the op and fails the
// pass (the module is left as it was).
// RUN: moe-opt %s --moe-quantize -split-input-file -verify-diagnostics
// RUN: not moe-opt %s --moe-quantize="format=fp8 " 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not moe-opt %s --moe-quantize="element=e5m2" 2>&1 | FileCheck %s --check-prefix=E5M2
// RUN: not moe-opt %s --moe-quantize="format=mxfp8 element=e3m4" 2>&1 | FileCheck %s --check-prefix=ELEMENT
// RUN: not moe-opt %s --moe-quantize="scope=activations" 2>&1 | FileCheck %s --check-prefix=SCOPE
// RUN: not moe-opt %s --moe-quantize="gemm=bf16" 2>&1 | FileCheck %s --check-prefix=GEMM

// FORMAT: error: moe-quantize: unknown 'format' value 'fp8' (expected fp8-block or mxfp8)
// E5M2: error: moe-quantize: 'element=e5m2' is not available with 'format=fp8-block' (e4m3 only; use format=mxfp8 for e5m2)
// ELEMENT: error: moe-quantize: unknown 'element' value 'e3m4' (expected e4m3 or e5m2)
// SCOPE: error: moe-quantize: unknown 'scope' value 'activations' (expected weights or weights+activations)
// GEMM: error: moe-quantize: unknown 'gemm' value 'bf16' (expected fp8 or dequantized)

// DeepSeek-style [128, 128] blocks need K to be a multiple of 128.
func.func @k_100(%rows: tensor<?x100xbf16>, %offsets: tensor<5xi64>,
                 %w: tensor<4x256x100xbf16>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{'moe.grouped_matmul' op moe-quantize (format=fp8-block element=e4m3 scope=weights): block extent 128 does not divide K = 100 (dim 2 of 'weights', of type 'tensor<4x256x100xbf16>')}}
  %y = moe.grouped_matmul %rows, %w, %offsets
      : (tensor<?x100xbf16>, tensor<4x256x100xbf16>, tensor<5xi64>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// I = 96: the fused op names each weight it refuses (2I = 192 is no
// multiple of 128 either).
func.func @i_96(%rows: tensor<?x128xbf16>, %offsets: tensor<5xi64>,
                %w13: tensor<4x192x128xbf16>, %w2: tensor<4x128x96xbf16>) -> tensor<?x128xbf16> {
  // expected-error @+2 {{block extent 128 does not divide N = 192 (dim 1 of 'gate_up_weights', of type 'tensor<4x192x128xbf16>')}}
  // expected-error @+1 {{block extent 128 does not divide K = 96 (dim 2 of 'down_weights', of type 'tensor<4x128x96xbf16>')}}
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x128xbf16>, tensor<5xi64>, tensor<4x192x128xbf16>, tensor<4x128x96xbf16>) -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// -----

// ... and N too.
func.func @n_96(%rows: tensor<?x128xbf16>, %offsets: tensor<5xi64>,
                %w: tensor<4x96x128xbf16>) -> tensor<?x96xbf16> {
  // expected-error @+1 {{block extent 128 does not divide N = 96 (dim 1 of 'weights', of type 'tensor<4x96x128xbf16>')}}
  %y = moe.grouped_matmul %rows, %w, %offsets
      : (tensor<?x128xbf16>, tensor<4x96x128xbf16>, tensor<5xi64>) -> tensor<?x96xbf16>
  return %y : tensor<?x96xbf16>
}

// -----

func.func @dynamic_n(%rows: tensor<?x128xf32>, %offsets: tensor<5xi64>,
                     %w: tensor<4x?x128xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{dim 1 (N) of 'weights' must be static to be quantized in blocks of 128}}
  %y = moe.grouped_matmul %rows, %w, %offsets
      : (tensor<?x128xf32>, tensor<4x?x128xf32>, tensor<5xi64>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

// Weights computed in the function: no prepack function can take them.
func.func @computed_weights(%rows: tensor<?x128xf32>, %offsets: tensor<5xi64>,
                            %w: tensor<4x128x128xf32>) -> tensor<?x128xf32> {
  %e = math.exp %w : tensor<4x128x128xf32>
  // expected-error @+1 {{'weights' must be a function argument (quantized by the prepack function) or a constant, got the result of 'math.exp'}}
  %y = moe.grouped_matmul %rows, %e, %offsets
      : (tensor<?x128xf32>, tensor<4x128x128xf32>, tensor<5xi64>) -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

func.func @loop_weights(%rows: tensor<?x128xf32>, %offsets: tensor<5xi64>,
                        %w: tensor<4x128x128xf32>, %n: index) -> tensor<4x128x128xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %w) -> (tensor<4x128x128xf32>) {
    // expected-error @+1 {{'weights' must be a function argument (quantized by the prepack function) or a constant, got a block argument of 'scf.for'}}
    %y = moe.grouped_matmul %rows, %acc, %offsets
        : (tensor<?x128xf32>, tensor<4x128x128xf32>, tensor<5xi64>) -> tensor<?x128xf32>
    scf.yield %acc : tensor<4x128x128xf32>
  }
  return %r : tensor<4x128x128xf32>
}

// -----

// The function would still need the bf16 weights for its other user.
// expected-error @+1 {{'func.func' op moe-quantize: argument #2 of @returned_weights is quantized as expert weights but is also used by 'func.return', which would still need it unquantized}}
func.func @returned_weights(%rows: tensor<?x128xf32>, %offsets: tensor<5xi64>,
                            %w: tensor<4x128x128xf32>) -> (tensor<?x128xf32>, tensor<4x128x128xf32>) {
  %y = moe.grouped_matmul %rows, %w, %offsets
      : (tensor<?x128xf32>, tensor<4x128x128xf32>, tensor<5xi64>) -> tensor<?x128xf32>
  return %y, %w : tensor<?x128xf32>, tensor<4x128x128xf32>
}

// -----

// Already quantized, but not with the policy's encoding: requantizing FP8
// values would add a second rounding (the same encoding is left alone, see
// quantize.mlir).
func.func @already_mx(%rows: tensor<?x128xf32>, %offsets: tensor<5xi64>,
                      %wq: tensor<4x128x128xf8E4M3FN>, %ws: tensor<4x128x4xf8E8M0FNU>) -> tensor<?x128xf32> {
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
      : tensor<4x128x128xf8E4M3FN>, tensor<4x128x4xf8E8M0FNU> -> tensor<4x128x128xf32>
  // expected-error @+1 {{'weights' is already quantized with #moe.block_scaled<f8E4M3FN, [1, 1, 32], f8E8M0FNU>, not the policy's #moe.block_scaled<f8E4M3FN, [1, 128, 128], f32>; requantizing FP8 values would compound two roundings}}
  %y = moe.grouped_matmul %rows, %w, %offsets
      : (tensor<?x128xf32>, tensor<4x128x128xf32>, tensor<5xi64>) -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

// expected-error @+1 {{'func.func' op moe-quantize: cannot add the prepack function: @taken_prepack already exists}}
func.func @taken(%rows: tensor<?x128xf32>, %offsets: tensor<5xi64>,
                 %w: tensor<4x128x128xf32>) -> tensor<?x128xf32> {
  %y = moe.grouped_matmul %rows, %w, %offsets
      : (tensor<?x128xf32>, tensor<4x128x128xf32>, tensor<5xi64>) -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}
func.func @taken_prepack() {
  return
}

// -----

// Only func.call sites can be rewritten to pass the quantized weights.
// expected-error @+1 {{'func.func' op moe-quantize: its signature changes, but 'func.constant' refers to it (only func.call sites are rewritten)}}
func.func @referenced(%rows: tensor<?x128xf32>, %offsets: tensor<5xi64>,
                      %w: tensor<4x128x128xf32>) -> tensor<?x128xf32> {
  %y = moe.grouped_matmul %rows, %w, %offsets
      : (tensor<?x128xf32>, tensor<4x128x128xf32>, tensor<5xi64>) -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}
func.func @take_address() {
  %f = func.constant @referenced : (tensor<?x128xf32>, tensor<5xi64>, tensor<4x128x128xf32>) -> tensor<?x128xf32>
  return
}

// -----

// The shared expert's GEMMs have no quantized form yet: quantizing only the
// routed experts beside it would be a silent half of the policy.
func.func @shared_expert(%x: tensor<?x128xbf16>, %rows: tensor<?x128xbf16>, %offsets: tensor<5xi64>,
                         %w13: tensor<4x256x128xbf16>, %w2: tensor<4x128x128xbf16>,
                         %sw13: tensor<256x128xbf16>, %sw2: tensor<128x128xbf16>)
    -> (tensor<?x128xbf16>, tensor<?x128xbf16>) {
  %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      : (tensor<?x128xbf16>, tensor<5xi64>, tensor<4x256x128xbf16>, tensor<4x128x128xbf16>) -> tensor<?x128xbf16>
  // expected-error @+1 {{'moe.shared_mlp' op moe-quantize (format=fp8-block element=e4m3 scope=weights): a shared expert is quantized as the routed experts it becomes: run --moe-route-shared-experts first}}
  %s = moe.shared_mlp silu %x, %sw13, %sw2
      : (tensor<?x128xbf16>, tensor<256x128xbf16>, tensor<128x128xbf16>) -> tensor<?x128xbf16>
  return %y, %s : tensor<?x128xbf16>, tensor<?x128xbf16>
}

// -----

// Weights that lie [E, K, N] (kn_weights) have no FP8 block layout yet.
func.func @kn_weights(%rows: tensor<?x128xbf16>, %w: tensor<4x128x256xbf16>, %offsets: tensor<5xi64>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{'moe.grouped_matmul' op moe-quantize: weights that lie [E, K, N] (kn_weights) have no FP8 block layout yet}}
  %y = moe.grouped_matmul %rows, %w, %offsets kn_weights
      : (tensor<?x128xbf16>, tensor<4x128x256xbf16>, tensor<5xi64>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
