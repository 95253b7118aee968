// RUN: moe-opt %s --moe-swap-ab --split-input-file | FileCheck %s
// RUN: moe-opt %s --moe-swap-ab="max-rows=0" --split-input-file | FileCheck %s --check-prefix=OFF
// RUN: moe-opt %s --moe-swap-ab="max-rows=4" --split-input-file | FileCheck %s --check-prefix=FOUR
// RUN: not moe-opt %s --moe-swap-ab="max-rows=65" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: moe-swap-ab: 'max-rows' must be in [0, 64], got 65
// OFF-NOT: moe.swap_ab

// A dynamic row count could put any number of rows on an expert: both forms.
// CHECK-LABEL: func @dynamic_rows
// CHECK: moe.grouped_matmul {{.*}} {moe.swap_ab_max_rows = 16 : i64}
// FOUR-LABEL: func @dynamic_rows
// FOUR: moe.grouped_matmul {{.*}} {moe.swap_ab_max_rows = 4 : i64}
func.func @dynamic_rows(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi64>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi64>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// 8 rows in all: no expert can get more than the threshold, so only swap-AB.
// CHECK-LABEL: func @decode_batch
// CHECK: moe.grouped_matmul {{.*}} {moe.swap_ab_max_rows = 16 : i64, moe.swap_ab_only}
// FOUR-LABEL: func @decode_batch
// FOUR: moe.grouped_matmul {{.*}} {moe.swap_ab_max_rows = 4 : i64}
func.func @decode_batch(%rows: tensor<8x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi64>) -> tensor<8x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<8x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi64>) -> tensor<8x512xbf16>
  return %y : tensor<8x512xbf16>
}

// -----

// 4096 rows: skewed routing can still leave experts with few rows.
// CHECK-LABEL: func @prefill_batch
// CHECK: moe.grouped_matmul {{.*}} {moe.swap_ab_max_rows = 16 : i64}
// CHECK-NOT: moe.swap_ab_only
func.func @prefill_batch(%rows: tensor<4096x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi64>) -> tensor<4096x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<4096x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi64>) -> tensor<4096x512xbf16>
  return %y : tensor<4096x512xbf16>
}
