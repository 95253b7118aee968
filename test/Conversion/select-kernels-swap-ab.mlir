// The swap-AB forms --moe-select-kernels chooses from the row count.
// RUN: moe-opt %s --moe-select-kernels --split-input-file | FileCheck %s
// RUN: moe-opt %s --moe-select-kernels="swap-ab-max-rows=0" --split-input-file | FileCheck %s --check-prefix=OFF
// RUN: moe-opt %s --moe-select-kernels="swap-ab-max-rows=4" --split-input-file | FileCheck %s --check-prefix=FOUR
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=65" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: moe-select-kernels: 'swap-ab-max-rows' must be in [0, 64] (WGMMA's N holds at most 64 tokens), got 65
// OFF-NOT: swap_ab = true

// A dynamic row count could put any number of rows on an expert: a swap-AB
// form (the narrowest WGMMA N holding the threshold), a 64-row and a
// 128-row form.
// CHECK-LABEL: func @dynamic_rows
// CHECK: moe.grouped_matmul {{.*}} {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
// CHECK-SAME: #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>,
// CHECK-SAME: #moe.gemm_form<rows_min = 17, rows_max = 64, tile_m = 64, tile_n = 256, tile_k = 64, stages = 4>,
// CHECK-SAME: #moe.gemm_form<rows_min = 65, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>]>}
// FOUR-LABEL: func @dynamic_rows
// FOUR: #moe.gemm_form<rows_min = 1, rows_max = 4, tile_m = 8, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>, #moe.gemm_form<rows_min = 5, rows_max = 64,
// OFF-LABEL: func @dynamic_rows
// OFF: forms = [#moe.gemm_form<rows_min = 1, rows_max = 64, tile_m = 64,
func.func @dynamic_rows(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi64>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi64>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// 8 rows in all: no expert can get more than the threshold, so only swap-AB.
// CHECK-LABEL: func @decode_batch
// CHECK: forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>]>
// FOUR-LABEL: func @decode_batch
// FOUR: forms = [#moe.gemm_form<rows_min = 1, rows_max = 4, tile_m = 8,
func.func @decode_batch(%rows: tensor<8x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi64>) -> tensor<8x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<8x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi64>) -> tensor<8x512xbf16>
  return %y : tensor<8x512xbf16>
}

// -----

// 4096 rows: skewed routing can still leave experts with few rows.
// CHECK-LABEL: func @prefill_batch
// CHECK: forms = [#moe.gemm_form<rows_min = 1, rows_max = 16, {{.*}} swap_ab = true>, #moe.gemm_form<rows_min = 17,
func.func @prefill_batch(%rows: tensor<4096x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi64>) -> tensor<4096x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<4096x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi64>) -> tensor<4096x512xbf16>
  return %y : tensor<4096x512xbf16>
}
