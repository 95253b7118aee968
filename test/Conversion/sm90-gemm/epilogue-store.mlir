// The sm_90a grouped GEMM's staged store epilogue (Sm90Gemm/EpilogueStore.cpp):
// accumulator registers -> a 64 x 64 bf16 staging tile per warpgroup ->
// 16-byte rows of out.
// RUN: moe-opt %s --convert-moe-to-nvgpu --split-input-file | FileCheck %s

// The staging tile of warpgroup w lies after the 3 stages, at 3 x 24576 +
// w x 8192 bytes. 128 output columns are two 64-column chunks; per chunk,
// each thread stores its 8 column groups x 2 fragment rows as 16
// vector<2xbf16>, a barrier of its warpgroup only (named barrier 1 + w, 128
// threads) follows, then 4 passes of 16 rows read 8 bf16 each and store
// them as one 16-byte vector<8xbf16> when N % 8 == 0 and all 8 columns are
// below N, else column by column (8 guarded scalar stores); a second named
// barrier frees the staging tile for the next chunk.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_64x128x64_s3_off32(
// CHECK-SAME: %[[OUT:[a-z0-9_]+]]: memref<?x?xbf16>
// CHECK: %[[WG:.*]] = arith.divui %thread_id_x, %c128 : index
// CHECK: %[[N:.*]] = memref.dim %[[OUT]], %c1{{.*}} : memref<?x?xbf16>
// CHECK: scf.while
// CHECK: %[[NREM:.*]] = arith.remui %[[N]], %c8{{.*}} : index
// CHECK: %[[ALIGNED:.*]] = arith.cmpi eq, %[[NREM]], %c0{{.*}} : index
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: %[[WGAT:.*]] = arith.muli %[[WG]], %c8192{{.*}} : index
// CHECK-NEXT: %[[AT:.*]] = arith.addi %c73728{{.*}}, %[[WGAT]] : index
// CHECK-NEXT: %[[STAGING:.*]] = memref.view %{{.*}}[%[[AT]]][] : {{.*}} to memref<64x64xbf16, #gpu.address_space<workgroup>>
// CHECK-COUNT-16: vector.store %{{.*}}, %[[STAGING]][%{{.*}}, %{{.*}}] {alignment = 4 : i64} : memref<64x64xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK-NOT: vector.store
// CHECK: %[[WG1:.*]] = arith.addi %[[WG]], %c1{{.*}} : index
// CHECK-NEXT: %[[ID:.*]] = arith.index_cast %[[WG1]] : index to i32
// CHECK-NEXT: %[[THREADS:.*]] = arith.constant 128 : i32
// CHECK-NEXT: nvvm.barrier id = %[[ID]] number_of_threads = %[[THREADS]]
// CHECK-NOT: gpu.barrier
// CHECK: %[[V:.*]] = vector.load %[[STAGING]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<64x64xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// CHECK: %[[END:.*]] = arith.addi %[[COL:[a-z0-9_]+]], %c8{{.*}} : index
// CHECK-NEXT: %[[FITS:.*]] = arith.cmpi sle, %[[END]], %[[N]] : index
// CHECK-NEXT: %[[WHOLE:.*]] = arith.andi %[[ALIGNED]], %[[FITS]] : i1
// CHECK-NEXT: scf.if %[[WHOLE]] {
// CHECK-NEXT: vector.store %[[V]], %[[OUT]][%[[ROW:[a-z0-9_]+]], %[[COL]]] {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
// CHECK-NEXT: } else {
// CHECK: %[[C0:.*]] = arith.addi %[[COL]], %c0{{.*}} : index
// CHECK-NEXT: %[[IN0:.*]] = arith.cmpi slt, %[[C0]], %[[N]] : index
// CHECK-NEXT: scf.if %[[IN0]] {
// CHECK-NEXT: %[[E0:.*]] = vector.extract %[[V]][0] : bf16 from vector<8xbf16>
// CHECK-NEXT: memref.store %[[E0]], %[[OUT]][%[[ROW]], %[[C0]]] : memref<?x?xbf16>
// CHECK-COUNT-7: memref.store %{{.*}}, %[[OUT]][%[[ROW]], %{{.*}}] : memref<?x?xbf16>
// CHECK-NOT: memref.store
// CHECK-COUNT-3: vector.load %[[STAGING]]{{.*}} vector<8xbf16>
// CHECK-NOT: vector.store %{{.*}}, %[[STAGING]]
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// CHECK-COUNT-16: vector.store %{{.*}}, %[[STAGING]]{{.*}} vector<2xbf16>
// CHECK-NEXT: arith.constant 1 : index
// CHECK: nvvm.barrier id
// CHECK-COUNT-4: vector.load %[[STAGING]]{{.*}} vector<8xbf16>
// CHECK-NOT: vector.load
// CHECK: nvvm.barrier id
// CHECK-NOT: nvvm.barrier
// CHECK: scf.yield
func.func @normal(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 3>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// tma_store: out's tensor map is the third parameter. Each item's first
// chunk waits (its warpgroup's thread 0) until the TMA has read the staging
// tile, then the warpgroup syncs; the staged values are fenced for the async
// proxy before the barrier. A chunk whose 64 rows are all the expert's goes
// out as one TMA store at (col0 + 64 c, row0 + 64 w) from thread 0, else
// the threads store it as without tma_store. After the last item: one more
// wait, so that the CTA outlives the TMA's reads.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_64x128x64_s3_tmastore_off32(
// CHECK-SAME: %arg1: !llvm.ptr {llvm.align = 64 : i64}, %[[MAPPTR:arg2]]: !llvm.ptr {llvm.align = 64 : i64}, %arg3: memref<?xi32>, %arg4: memref<?x?xbf16>
// CHECK-SAME: moe.tensor_map_args = array<i64: 0, 1, 2>
// CHECK-SAME: moe.tma_store
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[MAP:.*]] = builtin.unrealized_conversion_cast %[[MAPPTR]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK: nvgpu.tma.prefetch.descriptor %[[MAP]]
// CHECK: scf.while
// CHECK: %[[ROWSHERE:.*]] = arith.minsi %{{.*}}, %c64{{.*}} : index
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: %[[AT:.*]] = arith.addi %c73728{{.*}}, %{{.*}} : index
// CHECK-NEXT: %[[STAGING:.*]] = memref.view %{{.*}}[%[[AT]]][] : {{.*}} to memref<64x64xbf16, #gpu.address_space<workgroup>>
// CHECK: arith.remui %[[TID]], %c128{{.*}} : index
// CHECK: scf.if %{{.*}} {
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK-NEXT: }
// CHECK: nvvm.barrier id
// CHECK-COUNT-16: vector.store %{{.*}}, %[[STAGING]]{{.*}} vector<2xbf16>
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.barrier id
// CHECK: %[[END:.*]] = arith.addi %{{.*}}, %c64{{.*}} : index
// CHECK-NEXT: %[[WHOLE:.*]] = arith.cmpi sle, %[[END]], %[[ROWSHERE]] : index
// CHECK-NEXT: scf.if %[[WHOLE]] {
// CHECK-NEXT: scf.if %{{.*}} {
// CHECK: nvgpu.tma.async.store %[[STAGING]] to %[[MAP]][%{{.*}}, %{{.*}}]
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK-NEXT: }
// CHECK-NEXT: } else {
// CHECK-COUNT-4: vector.load %[[STAGING]]{{.*}} vector<8xbf16>
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: nvvm.barrier id
// CHECK-COUNT-16: vector.store %{{.*}}, %[[STAGING]]{{.*}} vector<2xbf16>
// CHECK: nvgpu.tma.async.store %[[STAGING]] to %[[MAP]]
// CHECK-NOT: nvgpu.tma.async.store
// CHECK: scf.yield
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: nvvm.barrier id
// CHECK-NEXT: gpu.return
func.func @tma_store(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 3, tma_store = true>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
