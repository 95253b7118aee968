// Swap-AB: the weights fill WGMMA's 64-row M operand and 8..64 tokens its
// N, so an expert with a few rows wastes little of each instruction; the
// epilogue writes the transposed tile.
// RUN: moe-opt %s --split-input-file --moe-select-kernels="swap-ab-max-rows=0 swap-ab=1 tile-m=8 tile-n=64 stages=4" --convert-moe-to-nvgpu | FileCheck %s

// CHECK: moe.grouped_matmul {{.*}} moe.launch = {{{.*}}kernels = [{kernel = @moe_kernels::@grouped_matmul_bf16_8x64x64_s4_swapab_off64, rows_max = 2147483647 : i64, rows_min = 1 : i64}]
// CHECK: gpu.func @grouped_matmul_bf16_8x64x64_s4_swapab_off64
// CHECK-SAME: moe.dynamic_shared_bytes = 36864
// CHECK-SAME: moe.swap_ab = true
// CHECK-SAME: moe.tile = array<i64: 8, 64, 64, 4>
// Tokens come in 8-row boxes, weights in 64-row boxes.
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<8x64xbf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.tma.async.load {{.*}} : <tensor = memref<1x64x64xbf16, #gpu.address_space<workgroup>>
// The weights' descriptor is WGMMA's A, the tokens' its B: acc is 64 x 8.
// CHECK-COUNT-4: nvgpu.warpgroup.mma {{.*}} : <tensor = memref<64x16xbf16, #gpu.address_space<workgroup>>>, <tensor = memref<16x8xbf16, #gpu.address_space<workgroup>>>, <fragmented = vector<64x8xf32>>
// CHECK: nvgpu.warpgroup.mma.store {{.*}} to memref<64x8xf32, #gpu.address_space<workgroup>>
// Threads t and t + 64 share an output column and take alternate rows.
// CHECK: arith.remui %{{.*}}, %c64
// CHECK: arith.divui %{{.*}}, %c64
// CHECK: memref.store
func.func @decode(%rows: tensor<?x4096xbf16>, %w: tensor<8x28672x4096xbf16>, %off: tensor<9xi64>) -> tensor<?x28672xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x4096xbf16>, tensor<8x28672x4096xbf16>, tensor<9xi64>) -> tensor<?x28672xbf16>
  return %y : tensor<?x28672xbf16>
}

// -----

// After --moe-swap-ab both forms are built and the op names both, with the
// row counts each takes (the choice is made per expert, on the device); the
// swap-AB tile is the narrowest WGMMA N that holds max-rows. With at most
// max-rows rows in all, the swap-AB kernel takes every expert.
// RUN: moe-opt %s --split-input-file --moe-select-kernels="swap-ab-max-rows=12 tile-m=64" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=BOTH
// With 128-row tiles (the default), experts of 13..64 rows take a 64-row
// tile: three kernels, three disjoint row ranges.
// RUN: moe-opt %s --split-input-file --moe-select-kernels="swap-ab-max-rows=12" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=THREE
// BOTH: moe.grouped_matmul {{.*}} kernels = [{kernel = @moe_kernels::@grouped_matmul_bf16_16x64x64_s4_swapab_off32, rows_max = 12 : i64, rows_min = 1 : i64}, {kernel = @moe_kernels::@grouped_matmul_bf16_64x256x64_s4_off32, rows_max = 2147483647 : i64, rows_min = 13 : i64}], max_rows = 2147483647 : i64
// BOTH: moe.grouped_matmul {{.*}} kernels = [{kernel = @moe_kernels::@grouped_matmul_bf16_16x64x64_s4_swapab_off32, rows_max = 2147483647 : i64, rows_min = 1 : i64}], max_rows = 4 : i64
// THREE: moe.grouped_matmul {{.*}} kernels = [{kernel = @moe_kernels::@grouped_matmul_bf16_16x64x64_s4_swapab_off32, rows_max = 12 : i64, rows_min = 1 : i64}, {kernel = @moe_kernels::@grouped_matmul_bf16_64x256x64_s4_off32, rows_max = 64 : i64, rows_min = 13 : i64}, {kernel = @moe_kernels::@grouped_matmul_bf16_128x256x64_s4_off32, rows_max = 2147483647 : i64, rows_min = 65 : i64}]
// BOTH-COUNT-2: gpu.func
// BOTH-NOT: gpu.func
func.func @both(%rows: tensor<?x4096xbf16>, %w: tensor<8x28672x4096xbf16>, %off: tensor<9xi32>,
                %few: tensor<4x4096xbf16>) -> (tensor<?x28672xbf16>, tensor<4x28672xbf16>) {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x4096xbf16>, tensor<8x28672x4096xbf16>, tensor<9xi32>) -> tensor<?x28672xbf16>
  %z = moe.grouped_matmul %few, %w, %off
      : (tensor<4x4096xbf16>, tensor<8x28672x4096xbf16>, tensor<9xi32>) -> tensor<4x28672xbf16>
  return %y, %z : tensor<?x28672xbf16>, tensor<4x28672xbf16>
}
