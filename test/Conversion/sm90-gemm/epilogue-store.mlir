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
