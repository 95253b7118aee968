// Configurations the kernel builder cannot honour for their op are refused
// at the op, naming the form and what would be valid.
// RUN: moe-opt %s --split-input-file --convert-moe-to-nvgpu --mlir-print-op-on-diagnostic=false -verify-diagnostics

func.func @missing(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{needs 'moe.kernels' = #moe.gemm_kernels<...> (run --moe-select-kernels first, or write it)}}
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

func.func @wrong_kind(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{needs 'moe.kernels' = #moe.gemm_kernels<...>}}
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.kernel<chip = "sm_90a">}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// bf16 GEMMs step 64 K per stage.
func.func @bf16_tile_k(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{kernel form for rows [1, 2147483647]: tile-k must be 64, got 128}}
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// Shared memory bounds the pipeline.
func.func @too_deep(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{kernel form for rows [1, 2147483647]: 'stages' (8): the bf16 128x256x64 form needs 409600 bytes of shared memory, more than the 227 KiB (232448) of a block; it fits 2..4 stages}}
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 8>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// A producer warpgroup where the builder has none (a 64-row bf16 form).
func.func @no_producer(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{kernel form for rows [1, 2147483647]: a producer warpgroup is built for the 128-row prefill forms}}
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 4, warp_specialized = true>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

func.func @widen_bf16(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{widen is for MXFP8 operands only}}
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 2, widen = true>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

func.func @quantize_output(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{quantize_output needs the gate_up GEMM of a block-FP8 expert MLP}}
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 2>], quantize_output = true>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// One gpu.module holds every kernel: its ops target one chip.
func.func @two_chips(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>, %rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %ids, %wts = moe.route softmax_topk %logits top 2 {moe.kernels = #moe.kernel<chip = "sm_90a">}
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  // expected-error @+1 {{is configured for sm_100a but moe.route for sm_90a: one module's kernels target one chip}}
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_100a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 128, stages = 4>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// A quantize is fused only into its layer's quantizing gather.
func.func @fused_alone(%x: tensor<?x256xbf16>) -> (tensor<?x256xf8E4M3FN>, tensor<?x2xf32>) {
  // expected-error @+1 {{is 'fused' only as the quantize (or round trip) of a layer's rows whose permute has quantize_rows}}
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 128], f32> {moe.kernels = #moe.kernel<chip = "sm_90a", fused = true>}
      : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x2xf32>
  return %q, %s : tensor<?x256xf8E4M3FN>, tensor<?x2xf32>
}

// -----

// So is a round trip, into its bf16 layer's gather.
func.func @fused_round_trip_alone(%x: tensor<?x256xbf16>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{is 'fused' only as the quantize (or round trip) of a layer's rows whose permute has quantize_rows}}
  %y = moe.fake_quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU> {moe.kernels = #moe.kernel<chip = "sm_90a", fused = true>}
      : tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// A hand-written swap-AB form: N-major weights have none.
func.func @swap_ab(%g: tensor<?x256xbf16>, %w: tensor<8x256x512xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{kernel form for rows [1, 2147483647]: N-major weights (moe.grouped_dgrad, kn_weights) are implemented for the bf16 normal form with a plain store (and a bias) or an activation's gradient only}}
  %dx = moe.grouped_dgrad %g, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>]>}
      : (tensor<?x256xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %dx : tensor<?x512xbf16>
}

// -----

// A hand-written cluster form of the dgrad with the activation's gradient:
// its planned.v1 entry has no cluster kernels.
func.func @act_grad_cluster(%g: tensor<?x256xbf16>, %w: tensor<8x256x512xbf16>, %off: tensor<9xi32>, %gu: tensor<?x1024xbf16>) -> tensor<?x1024xbf16> {
  // expected-error @+1 {{kernel form for rows [1, 2147483647]: an activation's gradient epilogue runs on one CTA: its entry (planned.v1) has no cluster kernels}}
  %d = moe.grouped_dgrad %g, %w, %off act_grad silu %gu {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 64, stages = 4, swap_ab = false, cluster = 2>]>}
      : (tensor<?x256xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>, tensor<?x1024xbf16>) -> tensor<?x1024xbf16>
  return %d : tensor<?x1024xbf16>
}

// -----

// A hand-written 256-column form of the dgrad with the activation's
// gradient: its inputs would not fit in registers beside the accumulator.
func.func @act_grad_wide(%g: tensor<?x256xbf16>, %w: tensor<8x256x512xbf16>, %off: tensor<9xi32>, %gu: tensor<?x1024xbf16>) -> tensor<?x1024xbf16> {
  // expected-error @+1 {{kernel form for rows [1, 2147483647]: an activation's gradient epilogue needs tile-n = 128 (the tile's inputs are held in registers), got 256}}
  %d = moe.grouped_dgrad %g, %w, %off act_grad silu %gu {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4, swap_ab = false>]>}
      : (tensor<?x256xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>, tensor<?x1024xbf16>) -> tensor<?x1024xbf16>
  return %d : tensor<?x1024xbf16>
}

// -----

// A ping-pong form over block-FP8 operands: the builder has it for bf16 only.
func.func @pingpong_fp8(%xq: tensor<?x256xf8E4M3FN>, %xs: tensor<?x2xf32>,
                        %wq: tensor<8x512x256xf8E4M3FN>, %ws: tensor<8x4x2xf32>,
                        %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x256xf8E4M3FN>, tensor<?x2xf32> -> tensor<?x256xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [128, 128], f32>
      : tensor<8x512x256xf8E4M3FN>, tensor<8x4x2xf32> -> tensor<8x512x256xbf16>
  // expected-error @+1 {{kernel form for rows [1, 2147483647]: a ping-pong form is a bf16 64- or 128-row tile without swap-AB, cluster or quantized output}}
  %y = moe.grouped_matmul %x, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4, warp_specialized = true, pingpong = true>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// A 128-row ping-pong item of 256 columns: two 64 x 256 accumulators would
// take 256 registers a thread.
func.func @pingpong_128x256(%x: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>,
                            %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{kernel form for rows [1, 2147483647]: a 128-row ping-pong form has at most 128 columns and no activation's gradient, got 256 columns}}
  %y = moe.grouped_matmul %x, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4, warp_specialized = true, pingpong = true>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// A TMA-storing form of the activation's gradient: its epilogue writes the
// gate and up gradients N columns apart, column by column pairs.
func.func @act_grad_tma_store(%g: tensor<?x256xbf16>, %w: tensor<8x256x512xbf16>, %off: tensor<9xi32>, %gu: tensor<?x1024xbf16>) -> tensor<?x1024xbf16> {
  // expected-error @+1 {{kernel form for rows [1, 2147483647]: tma_store is for the normal forms with a bf16 output, without an activation's gradient or round trip, only}}
  %d = moe.grouped_dgrad %g, %w, %off act_grad silu %gu {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 64, stages = 4, tma_store = true>]>}
      : (tensor<?x256xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>, tensor<?x1024xbf16>) -> tensor<?x1024xbf16>
  return %d : tensor<?x1024xbf16>
}

// -----

// Out's rows of 1004 columns are 2008 bytes: no tensor map can describe them.
func.func @tma_store_pitch(%x: tensor<?x256xbf16>, %w: tensor<8x1004x256xbf16>,
                           %off: tensor<9xi32>) -> tensor<?x1004xbf16> {
  // expected-error @+1 {{kernel form for rows [1, 2147483647]: tma_store needs the output's columns to be a static multiple of 8 (a 16-byte row pitch for its tensor map)}}
  %y = moe.grouped_matmul %x, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4, tma_store = true>]>}
      : (tensor<?x256xbf16>, tensor<8x1004x256xbf16>, tensor<9xi32>) -> tensor<?x1004xbf16>
  return %y : tensor<?x1004xbf16>
}
