// The kernel choice per shape and per chip, pinned: what --moe-select-kernels
// writes into `moe.kernels` (--convert-moe-to-nvgpu only reads it).
// RUN: moe-opt %s --split-input-file --moe-select-kernels | FileCheck %s
// RUN: moe-opt %s --split-input-file --moe-select-kernels="swap-ab-max-rows=0 tile-m=64 cluster=2" | FileCheck %s --check-prefix=SMALL
// RUN: moe-opt %s --split-input-file --moe-select-kernels="warp-specialize=none fp8-tile-n=128 mxfp8-widen=1" | FileCheck %s --check-prefix=KNOBS
// The output parses back and selects the same again (hand-writable).
// RUN: moe-opt %s --split-input-file --moe-select-kernels | moe-opt --split-input-file | FileCheck %s

// Mixtral-8x7B's expert MLP (bf16, any T): the down projection reduces over
// K = 14336 >= 8192, so its swap-AB form keeps 8 stages in flight and splits
// K between two warpgroups; the gate-up (K = 4096) keeps 4 and one.
// CHECK-LABEL: func @mixtral_mlp
// CHECK: moe.kernels = #moe.expert_mlp_kernels<gate_up = <chip = "sm_90a", forms = [
// CHECK-SAME: #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>,
// CHECK-SAME: #moe.gemm_form<rows_min = 17, rows_max = 64, tile_m = 64, tile_n = 256, tile_k = 64, stages = 4>,
// CHECK-SAME: #moe.gemm_form<rows_min = 65, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>]>,
// CHECK-SAME: down = <chip = "sm_90a", forms = [
// CHECK-SAME: #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 8, swap_ab = true, split_k = 2>,
// CHECK-SAME: #moe.gemm_form<rows_min = 17, rows_max = 64, tile_m = 64, tile_n = 256, tile_k = 64, stages = 4>,
// CHECK-SAME: #moe.gemm_form<rows_min = 65, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>]>>
// Without swap-AB and with 64-row tiles there is one form per GEMM; a
// cluster of two CTAs shares each row tile.
// SMALL-LABEL: func @mixtral_mlp
// SMALL: gate_up = <chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 256, tile_k = 64, stages = 4, cluster = 2>]>
func.func @mixtral_mlp(%rows: tensor<?x4096xbf16>, %off: tensor<9xi64>, %w13: tensor<8x28672x4096xbf16>, %w2: tensor<8x4096x14336xbf16>, %s: tensor<?xf32>) -> tensor<?x4096xbf16> {
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2 scale %s : (tensor<?x4096xbf16>, tensor<9xi64>, tensor<8x28672x4096xbf16>, tensor<8x4096x14336xbf16>, tensor<?xf32>) -> tensor<?x4096xbf16>
  return %y : tensor<?x4096xbf16>
}

// -----

// Decode of a static 8 rows (Qwen3-30B-A3B's gate-up): no expert can have
// more than the swap-AB threshold, so the swap-AB form alone.
// CHECK-LABEL: func @decode_gemm
// CHECK: moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>]>
func.func @decode_gemm(%rows: tensor<8x2048xbf16>, %w: tensor<128x1536x2048xbf16>, %off: tensor<129xi32>) -> tensor<8x1536xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off : (tensor<8x2048xbf16>, tensor<128x1536x2048xbf16>, tensor<129xi32>) -> tensor<8x1536xbf16>
  return %y : tensor<8x1536xbf16>
}

// -----

// Block FP8 (DeepSeek-V3's gate-up): 128 K per stage; the 128-row form is
// 192 columns wide with a producer warpgroup, the 64-row form 128.
// CHECK-LABEL: func @fp8_block
// CHECK: moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
// CHECK-SAME: #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 128, stages = 4, swap_ab = true>,
// CHECK-SAME: #moe.gemm_form<rows_min = 17, rows_max = 64, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4>,
// CHECK-SAME: #moe.gemm_form<rows_min = 65, rows_max = 2147483647, tile_m = 128, tile_n = 192, tile_k = 128, stages = 4, warp_specialized = true>]>
// KNOBS-LABEL: func @fp8_block
// KNOBS: #moe.gemm_form<rows_min = 65, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 128, stages = 4>]>
// The dequantizes get no configuration: the GEMM reads their operands.
// CHECK-NOT: moe.dequantize {{.*}}moe.kernels
func.func @fp8_block(%xq: tensor<?x7168xf8E4M3FN>, %xs: tensor<?x56xf32>, %wq: tensor<256x4096x7168xf8E4M3FN>, %ws: tensor<256x32x56xf32>, %off: tensor<257xi32>) -> tensor<?x4096xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32> : tensor<?x7168xf8E4M3FN>, tensor<?x56xf32> -> tensor<?x7168xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [128, 128], f32> : tensor<256x4096x7168xf8E4M3FN>, tensor<256x32x56xf32> -> tensor<256x4096x7168xbf16>
  %y = moe.grouped_matmul %x, %w, %off : (tensor<?x7168xbf16>, tensor<256x4096x7168xbf16>, tensor<257xi32>) -> tensor<?x4096xbf16>
  return %y : tensor<?x4096xbf16>
}

// -----

// MXFP8: 128 columns; the 64-row form has a producer warpgroup too. With
// mxfp8-widen the prefill forms widen to bf16 (single CTA, no producer).
// CHECK-LABEL: func @mxfp8
// CHECK: moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
// CHECK-SAME: #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 128, stages = 4, swap_ab = true>,
// CHECK-SAME: #moe.gemm_form<rows_min = 17, rows_max = 64, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4, warp_specialized = true>,
// CHECK-SAME: #moe.gemm_form<rows_min = 65, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 128, stages = 4, warp_specialized = true>]>
// KNOBS-LABEL: func @mxfp8
// KNOBS: #moe.gemm_form<rows_min = 17, rows_max = 64, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4, widen = true>,
// KNOBS-SAME: #moe.gemm_form<rows_min = 65, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 128, stages = 2, widen = true>]>
func.func @mxfp8(%xq: tensor<?x2048xf8E4M3FN>, %xs: tensor<?x64xf8E8M0FNU>, %wq: tensor<128x1536x2048xf8E4M3FN>, %ws: tensor<128x1536x64xf8E8M0FNU>, %off: tensor<129xi32>) -> tensor<?x1536xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x2048xf8E4M3FN>, tensor<?x64xf8E8M0FNU> -> tensor<?x2048xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : tensor<128x1536x2048xf8E4M3FN>, tensor<128x1536x64xf8E8M0FNU> -> tensor<128x1536x2048xbf16>
  %y = moe.grouped_matmul %x, %w, %off : (tensor<?x2048xbf16>, tensor<128x1536x2048xbf16>, tensor<129xi32>) -> tensor<?x1536xbf16>
  return %y : tensor<?x1536xbf16>
}

// -----

// The routing, permutation and combine ops of a bf16 layer: one kernel form
// each; the permute's gather does not quantize.
// CHECK-LABEL: func @layer_ops
// CHECK: moe.route {{.*}} {moe.kernels = #moe.kernel<chip = "sm_90a">}
// CHECK: moe.permute {{.*}} {moe.kernels = #moe.permute_kernels<chip = "sm_90a">}
// CHECK: moe.unpermute {{.*}} {moe.kernels = #moe.kernel<chip = "sm_90a">}
func.func @layer_ops(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>, %y: tensor<?x256xbf16>) -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x256xbf16>) {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x256xbf16>
  return %rows, %offsets, %out : tensor<?x256xbf16>, tensor<9xi64>, tensor<?x256xbf16>
}

// -----

// moe.grouped_dgrad (Mixtral's down input gradient, dO . W2): the normal
// forms only (its N-major weights have no swap-AB form), 64 rows up to 64
// rows per expert, 128 above; with 64-row tiles one form.
// CHECK-LABEL: func @mixtral_down_dgrad
// CHECK: moe.grouped_dgrad {{.*}}moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
// CHECK-SAME: #moe.gemm_form<rows_min = 1, rows_max = 64, tile_m = 64, tile_n = 256, tile_k = 64, stages = 4>,
// CHECK-SAME: #moe.gemm_form<rows_min = 65, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>]>
// SMALL-LABEL: func @mixtral_down_dgrad
// SMALL: forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 256, tile_k = 64, stages = 4, cluster = 2>]>
func.func @mixtral_down_dgrad(%do: tensor<?x4096xbf16>, %w2: tensor<8x4096x14336xbf16>, %off: tensor<9xi64>) -> tensor<?x14336xbf16> {
  %dh = moe.grouped_dgrad %do, %w2, %off : (tensor<?x4096xbf16>, tensor<8x4096x14336xbf16>, tensor<9xi64>) -> tensor<?x14336xbf16>
  return %dh : tensor<?x14336xbf16>
}
