// The sm_90a grouped GEMM's MXFP8 mainloop (Sm90Gemm/MainloopMXFP8.cpp) and
// its scale staging (Sm90Gemm/MXFP8Scales.cpp): e4m3 rows and weights with
// an f8E8M0FNU scale per 32 K ([1, 32]), each wgmma's products promoted
// apart times the scales, staged in shared memory as f32.
// RUN: moe-opt %s --convert-moe-to-nvgpu --split-input-file | FileCheck %s
// RUN: moe-opt %s --convert-moe-to-nvgpu --split-input-file | FileCheck %s --check-prefix=WORDS

// Unspecialized: the staging is [2 buffers, 128 weight + 64 token rows, 4
// blocks], a row's 4 scales one 16-byte vector<4xf32> store (192 rows over
// 128 threads: 2 rounds). A K step's 4 nvvm.wgmma.mma_async (e4m3,
// scale-out zero: products apart) leave one in flight; block j is promoted
// (128 / 2 = 64 FMAs with the scales of buffer kStep % 2) once wgmma j + 1
// is issued, the last after wait 0. The next step's codes go to the other
// buffer before the barrier. No word loads.
// CHECK-LABEL: gpu.func @grouped_matmul_mxfp8_64x128x128_s4_off32(
// CHECK-SAME: %{{.*}}: memref<?x?xi8>, %{{.*}}: memref<?x?x?xi8>)
// CHECK: %[[STAGING:.*]] = memref.view %{{.*}} to memref<2x192x4xf32, #gpu.address_space<workgroup>>
// CHECK-COUNT-2: vector.store %{{.*}}, %[[STAGING]][%c0{{.*}}, %{{.*}}, %c0{{.*}}] {alignment = 16 : i64} : memref<2x192x4xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: scf.for %[[KS:[a-z0-9_]+]] = {{.*}} -> (!nvgpu.warpgroup.accumulator<fragmented = vector<64x128xf32>>) {
// CHECK: %[[BUF:.*]] = arith.remui %[[KS]], %c2{{.*}} : index
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: %[[P0:.*]] = nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 32>, D[<f32>, <zero>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: memref.load %[[STAGING]][%[[BUF]], %{{.*}}, %c0{{.*}}] : memref<2x192x4xf32, #gpu.address_space<workgroup>>
// CHECK: llvm.extractvalue %[[P0]][0] :
// CHECK-COUNT-64: llvm.intr.fma
// CHECK-NOT: llvm.intr.fma
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK-COUNT-64: llvm.intr.fma
// CHECK-NOT: llvm.intr.fma
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK-COUNT-64: llvm.intr.fma
// CHECK-NOT: {{llvm.intr.fma|nvvm.wgmma.mma_async}}
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: memref.load %[[STAGING]][%[[BUF]], %{{.*}}, %c3{{.*}}] : memref<2x192x4xf32, #gpu.address_space<workgroup>>
// CHECK-COUNT-64: llvm.intr.fma
// CHECK-NOT: llvm.intr.fma
// CHECK: %[[OTHER:.*]] = arith.subi %c1{{.*}}, %[[BUF]] : index
// CHECK-COUNT-2: vector.store %{{.*}}, %[[STAGING]][%[[OTHER]], %{{.*}}, %c0{{.*}}] {alignment = 16 : i64} : memref<2x192x4xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// WORDS-LABEL: gpu.func @grouped_matmul_mxfp8_64x128x128_s4_off32(
// WORDS-NOT: llvm.load
func.func @unspecialized(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x16xf8E8M0FNU>, %wq: tensor<8x256x512xf8E4M3FN>,
                         %ws: tensor<8x256x16xf8E8M0FNU>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x512xf8E4M3FN>, tensor<?x16xf8E8M0FNU> -> tensor<?x512xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<8x256x512xf8E4M3FN>, tensor<8x256x16xf8E8M0FNU> -> tensor<8x256x512xbf16>
  %y = moe.grouped_matmul %x, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4>]>}
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// Warp-specialized, 128 rows: the producer stages scales block-major, a
// stage's own [4 blocks, 256 rows] buffer, 4 scalar stores per row, then
// arrives on the stage's full barrier (1 + 128 arrivals). A row's 4 codes
// are one 32-bit load where both code tensors' rows are word-aligned, else
// 4 byte loads. The consumers read a fragment's two columns' scales as one
// vector<2xf32>, with no CTA barrier per K step.
// CHECK-LABEL: gpu.func @grouped_matmul_mxfp8_128x128x128_s4_ws_off32(
// CHECK: %[[BAR:.*]] = nvgpu.mbarrier.create
// CHECK-COUNT-4: nvgpu.mbarrier.init %[[BAR]][%{{.*}}], %c129
// CHECK: %[[STAGING:.*]] = memref.view %{{.*}} to memref<4x4x256xf32, #gpu.address_space<workgroup>>
// CHECK: nvvm.setmaxregister  decrease 40
// CHECK-NOT: vector.store
// CHECK: memref.store %{{.*}}, %[[STAGING]][%[[STAGE:[a-z0-9_]+]], %c0{{[_0-9]*}}, %[[ROW:[a-z0-9_]+]]] : memref<4x4x256xf32
// CHECK: memref.store %{{.*}}, %[[STAGING]][%[[STAGE]], %c1{{[_0-9]*}}, %[[ROW]]]
// CHECK: memref.store %{{.*}}, %[[STAGING]][%[[STAGE]], %c2{{[_0-9]*}}, %[[ROW]]]
// CHECK: memref.store %{{.*}}, %[[STAGING]][%[[STAGE]], %c3{{[_0-9]*}}, %[[ROW]]]
// CHECK: nvgpu.mbarrier.arrive %[[BAR]][%[[STAGE]]]
// CHECK: nvvm.setmaxregister  increase 232
// CHECK: scf.for {{.*}} -> (!nvgpu.warpgroup.accumulator<fragmented = vector<64x128xf32>>) {
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 32>, D[<f32>, <zero>], A[<e4m3>, <one>, <row>], B[<e4m3>, <one>, <col>]
// CHECK: vector.load %[[STAGING]][%{{.*}}, %c0{{.*}}, %{{.*}}] {alignment = 8 : i64} : memref<4x4x256xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: llvm.intr.fma
// WORDS-LABEL: gpu.func @grouped_matmul_mxfp8_128x128x128_s4_ws_off32(
// WORDS: scf.if %{{.*}} -> (i8, i8, i8, i8) {
// WORDS: %[[WORD:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// WORDS-COUNT-4: arith.shrui %[[WORD]], %c{{[0-9]+}}_i32{{.*}} : i32
// WORDS: } else {
// WORDS-COUNT-4: memref.load %{{.*}} : memref<?x?x?xi8>
func.func @specialized(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x16xf8E8M0FNU>, %wq: tensor<8x256x512xf8E4M3FN>,
                       %ws: tensor<8x256x16xf8E8M0FNU>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x512xf8E4M3FN>, tensor<?x16xf8E8M0FNU> -> tensor<?x512xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<8x256x512xf8E4M3FN>, tensor<8x256x16xf8E8M0FNU> -> tensor<8x256x512xbf16>
  %y = moe.grouped_matmul %x, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 128, stages = 4, warp_specialized = true>]>}
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// Warp-specialized, 64 rows: block-major staging too, but byte loads only.
// CHECK-LABEL: gpu.func @grouped_matmul_mxfp8_64x128x128_s4_ws_off32(
// CHECK: %[[STAGING:.*]] = memref.view %{{.*}} to memref<4x4x192xf32, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}}, %[[STAGING]][%{{.*}}, %c0{{[_0-9]*}}, %{{.*}}] : memref<4x4x192xf32
// WORDS-LABEL: gpu.func @grouped_matmul_mxfp8_64x128x128_s4_ws_off32(
// WORDS-NOT: llvm.load
func.func @specialized_64(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x16xf8E8M0FNU>, %wq: tensor<8x256x512xf8E4M3FN>,
                          %ws: tensor<8x256x16xf8E8M0FNU>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x512xf8E4M3FN>, tensor<?x16xf8E8M0FNU> -> tensor<?x512xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<8x256x512xf8E4M3FN>, tensor<8x256x16xf8E8M0FNU> -> tensor<8x256x512xbf16>
  %y = moe.grouped_matmul %x, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4, warp_specialized = true>]>}
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
