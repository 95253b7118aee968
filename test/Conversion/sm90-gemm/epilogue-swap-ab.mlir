// The sm_90a grouped GEMM's swap-AB epilogue (Sm90Gemm/EpilogueSwapAB.cpp):
// the accumulator is out^T (weight row i is output column col0 + i); it goes
// through an f32 tile in the stage buffers, and thread t stores column
// t % 64 of every (threads / 64)-th token row of out as bf16.
// RUN: moe-opt %s --convert-moe-to-nvgpu --split-input-file | FileCheck %s

// split_k = 1: the f32 tile [64 weight rows, 16 tokens] at byte 0 is written
// by nvgpu.warpgroup.mma.store between two CTA barriers; 128 threads take
// alternate token rows of their column (below N) and store bf16 element by
// element. A barrier frees the tile before the next item's loads.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_16x64x64_s4_swapab_off32(
// CHECK-SAME: %[[OUT:[a-z0-9_]+]]: memref<?x?xbf16>
// CHECK: %[[N:.*]] = memref.dim %[[OUT]], %c1{{.*}} : memref<?x?xbf16>
// CHECK: %[[SUMS:.*]] = memref.view %{{.*}}[%c0{{.*}}][] : {{.*}} to memref<64x16xf32, #gpu.address_space<workgroup>>
// CHECK: %[[ACC:.*]] = scf.for {{.*}} -> (!nvgpu.warpgroup.accumulator<fragmented = vector<64x16xf32>>) {
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: nvgpu.warpgroup.mma.store %[[ACC]], %[[SUMS]] : <fragmented = vector<64x16xf32>> to memref<64x16xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.barrier
// CHECK: %[[LANE:.*]] = arith.remui %thread_id_x, %c64{{.*}} : index
// CHECK: %[[FIRST:.*]] = arith.divui %thread_id_x, %c64{{.*}} : index
// CHECK-NEXT: %[[COL:.*]] = arith.addi %{{.*}}, %[[LANE]] : index
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi slt, %[[COL]], %[[N]] : index
// CHECK-NEXT: scf.if %[[IN]] {
// CHECK: scf.for %[[R:.*]] = %[[FIRST]] to %{{.*}} step %c2{{.*}} {
// CHECK-NEXT: %[[V:.*]] = memref.load %[[SUMS]][%[[LANE]], %[[R]]] : memref<64x16xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: %[[B:.*]] = arith.truncf %[[V]] : f32 to bf16
// CHECK-NEXT: %[[ROW:.*]] = arith.addi %{{.*}}, %[[R]] : index
// CHECK-NEXT: memref.store %[[B]], %[[OUT]][%[[ROW]], %[[COL]]] : memref<?x?xbf16>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: vector.store
// CHECK: scf.yield
func.func @split_1(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// split_k = 2: warpgroup w's partial sums are rows [64 w, 64 w + 64) of a
// [128, 16] f32 tile, stored element pair by element pair (16 / 2 / 2 = 4
// vector<2xf32> per thread; no nvgpu.warpgroup.mma.store, which places a
// warp's rows by its index in the block); each stored value is the sum of
// row c and row c + 64, by 256 threads taking every 4th token row.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_16x64x64_s8_swapab_k2_off32(
// CHECK-SAME: %[[OUT:[a-z0-9_]+]]: memref<?x?xbf16>
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: %[[WG:.*]] = arith.divui %thread_id_x, %c128 : index
// CHECK: %[[SUMS:.*]] = memref.view %{{.*}}[%c0{{.*}}][] : {{.*}} to memref<128x16xf32, #gpu.address_space<workgroup>>
// CHECK: %[[ACC:.*]] = scf.for {{.*}} -> (!nvgpu.warpgroup.accumulator<fragmented = vector<64x16xf32>>) {
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[REGS:.*]] = builtin.unrealized_conversion_cast %[[ACC]]
// CHECK-NOT: nvgpu.warpgroup.mma.store
// CHECK: %[[WGROW:.*]] = arith.muli %[[WG]], %c64{{.*}} : index
// CHECK-NEXT: arith.addi %[[WGROW]], %{{.*}} : index
// CHECK-NEXT: %[[E0:.*]] = llvm.extractvalue %[[REGS]][0, 0]
// CHECK-NEXT: %[[E1:.*]] = llvm.extractvalue %[[REGS]][0, 1]
// CHECK-NEXT: %[[PAIR:.*]] = vector.from_elements %[[E0]], %[[E1]] : vector<2xf32>
// CHECK: vector.store %[[PAIR]], %[[SUMS]][%{{.*}}, %{{.*}}] : memref<128x16xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK-COUNT-3: vector.store %{{.*}}, %[[SUMS]]{{.*}} vector<2xf32>
// CHECK-NEXT: gpu.barrier
// CHECK: scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step %c4{{.*}} {
// CHECK-NEXT: %[[P0:.*]] = memref.load %[[SUMS]][%[[LANE:[a-z0-9_]+]], %[[R]]] : memref<128x16xf32, #gpu.address_space<workgroup>>
// CHECK: %[[LANE64:.*]] = arith.addi %[[LANE]], %c64{{.*}} : index
// CHECK-NEXT: %[[P1:.*]] = memref.load %[[SUMS]][%[[LANE64]], %[[R]]]
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[P0]], %[[P1]] : f32
// CHECK-NEXT: %[[B:.*]] = arith.truncf %[[SUM]] : f32 to bf16
// CHECK: memref.store %[[B]], %[[OUT]][%{{.*}}, %{{.*}}] : memref<?x?xbf16>
func.func @split_2(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 16, tile_n = 64, tile_k = 64, stages = 8, swap_ab = true, split_k = 2>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
