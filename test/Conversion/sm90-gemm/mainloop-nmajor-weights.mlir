// moe.grouped_dgrad's GEMM (grad [M, N] . weights[e] [N, K], the forward's
// weights untransposed): the bf16 mainloop with the weights as WGMMA's
// N-major B (Sm90Gemm/Pipeline.cpp, Mainloop.cpp, WgmmaDescriptor.h).
// RUN: moe-opt %s --convert-moe-to-nvgpu | FileCheck %s

// The weights' tensor map boxes 64 columns x 64 K rows of one expert; a
// 128-column tile is two boxes per stage, at columns col and col + 64, the
// second 64 x 128 bytes after the first (the descriptor's leading offset).
// The stage still expects its 8192 + 16384 bytes.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_64x128x64_s2_wkn_off32(
// CHECK: %[[WMAP:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<1x64x64xbf16,
// CHECK: %[[PTR:.*]] = memref.extract_aligned_pointer_as_index
// CHECK: %[[BASE:.*]] = arith.index_cast %[[PTR]] : index to i64
// CHECK: nvgpu.mbarrier.arrive.expect_tx %{{.*}}, %c24576
// CHECK: %[[C0:.*]] = arith.addi %[[STAGE:[a-z0-9_]+]], %c8192{{.*}} : index
// CHECK-NEXT: %[[V0:.*]] = memref.view %{{.*}}[%[[C0]]][] {{.*}} to memref<1x64x64xbf16,
// CHECK: %[[N0:.*]] = arith.addi %[[COL:[a-z0-9_]+]], %c0{{.*}} : index
// CHECK-NEXT: nvgpu.tma.async.load %[[WMAP]][%[[N0]], %[[K:[a-z0-9_]+]], %{{.*}}], %{{.*}} to %[[V0]] :
// CHECK: %[[C1:.*]] = arith.addi %[[STAGE]], %c16384{{.*}} : index
// CHECK-NEXT: %[[V1:.*]] = memref.view %{{.*}}[%[[C1]]][] {{.*}} to memref<1x64x64xbf16,
// CHECK: %[[N1:.*]] = arith.addi %[[COL]], %c64{{.*}} : index
// CHECK-NEXT: nvgpu.tma.async.load %[[WMAP]][%[[N1]], %[[K]], %{{.*}}], %{{.*}} to %[[V1]] :

// Each k16 wgmma reads B through a descriptor built here: the stage's
// weights address (& 0x3FFFF) >> 4 or-ed with LBO 8192 (bits 16-29: 512),
// SBO 1024 (bits 32-45: 64) and the 128-byte swizzle (bit 62), i.e.
// 0x4000004002000000; the mma transposes B (imm-trans-b). K rows 16 apart
// are 2048 bytes apart.
// CHECK: scf.for
// CHECK: nvgpu.warpgroup.generate.descriptor %{{.*}} : memref<64x16xbf16
// CHECK-NEXT: %{{.*}} = arith.constant 24576 : index
// CHECK-NEXT: %[[STAGEOFF:.*]] = arith.muli %{{.*}} : index
// CHECK-NEXT: %{{.*}} = arith.constant 8192 : index
// CHECK-NEXT: %[[OFF0:.*]] = arith.addi %[[STAGEOFF]], %{{.*}} : index
// CHECK-NEXT: %[[OFF0I:.*]] = arith.index_cast %[[OFF0]] : index to i64
// CHECK-NEXT: %[[ADDR0:.*]] = arith.addi %[[BASE]], %[[OFF0I]] : i64
// CHECK-NEXT: %[[MASK:.*]] = arith.constant 262143 : i64
// CHECK-NEXT: %[[AND0:.*]] = arith.andi %[[ADDR0]], %[[MASK]] : i64
// CHECK-NEXT: %[[FOUR:.*]] = arith.constant 4 : i64
// CHECK-NEXT: %[[START0:.*]] = arith.shrui %[[AND0]], %[[FOUR]] : i64
// CHECK-NEXT: %[[BITS:.*]] = arith.constant 4611686293338849280 : i64
// CHECK-NEXT: %[[WORD0:.*]] = arith.ori %[[START0]], %[[BITS]] : i64
// CHECK-NEXT: %[[DESC0:.*]] = builtin.unrealized_conversion_cast %[[WORD0]] : i64 to !nvgpu.warpgroup.descriptor<tensor = memref<16x128xbf16,
// CHECK-NEXT: nvgpu.warpgroup.mma %{{.*}}, %[[DESC0]], %{{.*}} {transposeB, waitGroup = 4 : i64}
// CHECK: arith.constant 10240 : index
// CHECK: nvgpu.warpgroup.mma {{.*}} {transposeB, waitGroup = 4 : i64}
// CHECK: arith.constant 12288 : index
// CHECK: nvgpu.warpgroup.mma {{.*}} {transposeB, waitGroup = 4 : i64}
// CHECK: arith.constant 14336 : index
// CHECK: nvgpu.warpgroup.mma {{.*}} {transposeB, waitGroup = 4 : i64}
// CHECK-NOT: nvgpu.warpgroup.mma
// CHECK: scf.yield
func.func @dgrad(%g: tensor<?x256xbf16>, %w: tensor<8x256x512xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %dx = moe.grouped_dgrad %g, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 2>]>}
      : (tensor<?x256xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %dx : tensor<?x512xbf16>
}
