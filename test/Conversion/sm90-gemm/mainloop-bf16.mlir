// The sm_90a grouped GEMM's bf16 mainloop (Sm90Gemm/Mainloop.cpp): each K
// step's wgmma accumulate straight into the pass's one accumulator.
// RUN: moe-opt %s --convert-moe-to-nvgpu --split-input-file | FileCheck %s

// A K step of 64 is 64 / 16 = 4 nvgpu.warpgroup.mma of k16 on bf16
// descriptors (rows through the rows' tensor map as A, the 256 weight rows
// as B), 16 columns of the stage's tiles apart, each accumulating into the
// previous one's result: the loop carries one accumulator, no wgmma of
// products apart, no FMA promotion, and one wgmma wait after the loop.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_64x256x64_s2_off32(
// CHECK: %[[ROWSMAP:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16,
// CHECK-NEXT: %[[WMAP:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<1x256x64xbf16,
// CHECK: %[[ACC0:.*]] = nvgpu.warpgroup.mma.init.accumulator -> <fragmented = vector<64x256xf32>>
// CHECK: scf.for {{.*}} iter_args(%[[IN:[a-z0-9_]+]] = %[[ACC0]]) -> (!nvgpu.warpgroup.accumulator<fragmented = vector<64x256xf32>>) {
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: %[[ROWS:.*]] = memref.view {{.*}} to memref<64x64xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[WEIGHTS:.*]] = memref.view {{.*}} to memref<256x64xbf16, #gpu.address_space<workgroup>>
// CHECK-NOT: nvgpu.warpgroup.mma.init.accumulator
// CHECK: %[[A0S:.*]] = memref.subview %[[ROWS]][0, 0] [64, 16] [1, 1]
// CHECK-NEXT: %[[B0S:.*]] = memref.subview %[[WEIGHTS]][0, 0] [256, 16] [1, 1]
// CHECK-NEXT: %[[A0:.*]] = nvgpu.warpgroup.generate.descriptor %[[A0S]], %[[ROWSMAP]]
// CHECK-NEXT: %[[B0:.*]] = nvgpu.warpgroup.generate.descriptor %[[B0S]], %[[WMAP]]
// CHECK-NEXT: %[[P0:.*]] = nvgpu.warpgroup.mma %[[A0]], %[[B0]], %[[IN]] {waitGroup = 4 : i64} : <tensor = memref<64x16xbf16, #gpu.address_space<workgroup>>>, <tensor = memref<16x256xbf16, #gpu.address_space<workgroup>>>, <fragmented = vector<64x256xf32>>
// CHECK: memref.subview %[[ROWS]][0, 16] [64, 16]
// CHECK: %[[P1:.*]] = nvgpu.warpgroup.mma %{{.*}}, %{{.*}}, %[[P0]] {waitGroup = 4 : i64} : <tensor = memref<64x16xbf16,
// CHECK: memref.subview %[[ROWS]][0, 32] [64, 16]
// CHECK: %[[P2:.*]] = nvgpu.warpgroup.mma %{{.*}}, %{{.*}}, %[[P1]] {waitGroup = 4 : i64} : <tensor = memref<64x16xbf16,
// CHECK: memref.subview %[[ROWS]][0, 48] [64, 16]
// CHECK: %[[P3:.*]] = nvgpu.warpgroup.mma %{{.*}}, %{{.*}}, %[[P2]] {waitGroup = 4 : i64} : <tensor = memref<64x16xbf16,
// CHECK-NOT: nvgpu.warpgroup.mma
// CHECK-NOT: nvvm.wgmma
// CHECK-NOT: llvm.intr.fma
// CHECK: scf.yield %[[P3]] : !nvgpu.warpgroup.accumulator<fragmented = vector<64x256xf32>>
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT: llvm.intr.fma
// CHECK: gpu.return
func.func @normal(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 256, tile_k = 64, stages = 2>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// Swap-AB: the same 4 wgmma per K step, the weights (64 rows) as A through
// the weights' tensor map and the 16 token rows as B: 64 x 16 accumulator.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_16x64x64_s4_swapab_off32(
// CHECK: %[[ROWSMAP:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<16x64xbf16,
// CHECK-NEXT: %[[WMAP:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<1x64x64xbf16,
// CHECK: scf.for {{.*}} -> (!nvgpu.warpgroup.accumulator<fragmented = vector<64x16xf32>>) {
// CHECK: nvgpu.warpgroup.generate.descriptor %{{.*}}, %[[WMAP]] : memref<64x16xbf16,
// CHECK-NEXT: nvgpu.warpgroup.generate.descriptor %{{.*}}, %[[ROWSMAP]] : memref<16x16xbf16,
// CHECK-COUNT-4: nvgpu.warpgroup.mma {{.*}} : <tensor = memref<64x16xbf16, #gpu.address_space<workgroup>>>, <tensor = memref<16x16xbf16, #gpu.address_space<workgroup>>>, <fragmented = vector<64x16xf32>>
// CHECK-NOT: nvgpu.warpgroup.mma
// CHECK-NOT: llvm.intr.fma
// CHECK: scf.yield %{{.*}} : !nvgpu.warpgroup.accumulator<fragmented = vector<64x16xf32>>
func.func @swap_ab(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
