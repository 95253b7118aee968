// The sm_90a grouped GEMM's tile scheduler (TileScheduler.cpp): the expert
// offsets cached clamped in shared memory, the tile table built from them,
// the lookups of a work item's expert tile, and the L2-friendly work order.
// The expert count is the offsets' length, known on the device only: every
// kernel holds all paths, chosen by E at run time.
// RUN: moe-opt %s --convert-moe-to-nvgpu --split-input-file | FileCheck %s

// The offsets are clamped into [0, M] and cached as i32 by all 128 threads.
// The table is built by all 4 warps (three passes over 32-expert segments,
// a CTA barrier between them) for 65 <= E <= 1024 - 2 x 32, else by warp 0
// alone (E < 65, or up to 1023), not at all from 1024 experts. The work
// count is the table's last entry, or for E >= 1024 a warp scan. An item is
// looked up in the order: groups of 8 token tiles, all column tiles of a
// group before the next, token tiles fastest; in the table by a 10-step
// binary search, past it by the warp scan whose ballot finds the lane
// holding the slot.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_64x128x64_s2_off32(
// CHECK-SAME: %[[OFF:[a-z0-9_]+]]: memref<?xi32>, %[[OUT:[a-z0-9_]+]]: memref<?x?xbf16>
// CHECK-SAME: workgroup(%[[ENDS:[a-z0-9_]+]] : memref<1024xi32, #gpu.address_space<workgroup>>, %[[TILES:[a-z0-9_]+]] : memref<1024xi32, #gpu.address_space<workgroup>>)
// CHECK: %[[TID:.*]] = gpu.thread_id  x
// CHECK: %[[NOFF:.*]] = memref.dim %[[OFF]], %{{.*}} : memref<?xi32>
// CHECK: %[[E:.*]] = arith.subi %[[NOFF]], %c1 : index
// CHECK: %[[M:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?xbf16>
// CHECK: %[[COLTILES:.*]] = arith.divsi %{{.*}}, %c128{{.*}} : index
// CHECK: %[[FITS:.*]] = arith.cmpi slt, %[[E]], %c1024 : index
// CHECK: %[[CACHED:.*]] = arith.minsi %{{.*}}, %c1024{{.*}} : index
// CHECK: scf.for %[[I:.*]] = %[[TID]] to %[[CACHED]] step %c128{{.*}} {
// CHECK-NEXT: %[[O:.*]] = memref.load %[[OFF]][%[[I]]] : memref<?xi32>
// CHECK-NEXT: %[[OI:.*]] = arith.index_cast %[[O]] : i32 to index
// CHECK-NEXT: arith.constant 0 : index
// CHECK-NEXT: %[[LO:.*]] = arith.maxsi %[[OI]], %c0{{.*}} : index
// CHECK-NEXT: %[[HI:.*]] = arith.minsi %[[LO]], %[[M]] : index
// CHECK-NEXT: %[[O32:.*]] = arith.index_cast %[[HI]] : index to i32
// CHECK-NEXT: memref.store %[[O32]], %[[ENDS]][%[[I]]]
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK: %[[MANY:.*]] = arith.cmpi slt, %c64{{.*}}, %[[E]] : index
// CHECK: %[[TAIL:.*]] = arith.cmpi sle, %[[E]], %c960 : index
// CHECK: %[[RANGE:.*]] = arith.andi %[[MANY]], %[[TAIL]] : i1
// CHECK: %[[BYWARPS:.*]] = arith.andi %[[FITS]], %[[RANGE]] : i1
// CHECK: scf.if %[[BYWARPS]] {
// CHECK: %[[WARP:.*]] = arith.divui %[[TID]], %c32{{.*}} : index
// CHECK: scf.for %{{.*}} = %[[WARP]] to %[[SEGS:[%a-z0-9_]+]] step %c4{{.*}} {
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %[[WARP]] to %[[SEGS]] step %c4{{.*}} {
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %[[WARP]] to %[[SEGS]] step %c4{{.*}} {
// CHECK: } else {
// CHECK: %[[LANES:.*]] = arith.cmpi slt, %[[TID]], %c32{{.*}} : index
// CHECK: %[[ONEWARP:.*]] = arith.andi %[[FITS]], %[[LANES]] : i1
// CHECK: scf.if %[[ONEWARP]] {
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %[[E]] step %c32{{.*}} iter_args
// CHECK: gpu.barrier
// CHECK-NEXT: nvvm.griddepcontrol  wait
// CHECK-NEXT: %[[NTILES:.*]] = scf.if %[[FITS]] -> (index) {
// CHECK: } else {
// CHECK: nvvm.vote.sync  ballot
// CHECK: %[[NWORK:.*]] = arith.muli %[[NTILES]], %[[COLTILES]] : index
// CHECK: %[[GROUP:.*]] = arith.muli %c8{{.*}}, %[[COLTILES]] : index
// CHECK-NEXT: %[[G:.*]] = arith.divui %[[W:.*]], %[[GROUP]] : index
// CHECK-NEXT: %[[IN:.*]] = arith.remui %[[W]], %[[GROUP]] : index
// CHECK: %[[SLOT0:.*]] = arith.muli %[[G]], %c8{{.*}} : index
// CHECK: %[[LEFT:.*]] = arith.subi %[[NTILES]], %[[SLOT0]] : index
// CHECK-NEXT: %[[FEW:.*]] = arith.minsi %c8{{.*}}, %[[LEFT]] : index
// CHECK: %[[SLOTS:.*]] = arith.maxsi %[[FEW]], %c1{{.*}} : index
// CHECK-NEXT: %[[R:.*]] = arith.remui %[[IN]], %[[SLOTS]] : index
// CHECK-NEXT: %[[SLOT:.*]] = arith.addi %[[SLOT0]], %[[R]] : index
// CHECK-NEXT: %[[NTILE:.*]] = arith.divui %[[IN]], %[[SLOTS]] : index
// CHECK-NEXT: %[[ITEM:.*]]:4 = scf.if %[[FITS]] -> (index, index, index, index) {
// CHECK-NEXT: %[[S32:.*]] = arith.index_cast %[[SLOT]] : index to i32
// CHECK-COUNT-10: arith.cmpi sgt, %{{.*}}, %[[S32]] : i32
// CHECK-NOT: arith.cmpi sgt
// CHECK: arith.subi %[[S32]], %{{.*}} : i32
// CHECK: } else {
// E >= 1024: the scan reads ends past the cache from the offsets, clamped.
// CHECK: scf.for
// CHECK: %[[INCACHE:.*]] = arith.cmpi slt, %{{.*}}, %c1024{{.*}} : index
// CHECK-NEXT: scf.if %[[INCACHE]] -> (i32) {
// CHECK-NEXT: memref.load %[[ENDS]]
// CHECK: } else {
// CHECK-NEXT: memref.load %[[OFF]]
// CHECK: arith.minsi %{{.*}}, %[[M]] : index
// CHECK: %[[BALLOT:.*]] = nvvm.vote.sync  ballot %c-1_i32{{.*}}, %{{.*}} -> i32
// CHECK: "llvm.intr.cttz"(%[[BALLOT]])
// CHECK: arith.muli %[[NTILE]], %c128{{.*}} : index
func.func @normal(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 2>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// Clustered: a work item's column tile is the cluster's 2 x 128 columns;
// CTA rank r takes the 128 from r x 128.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_128x128x64_s2_c2_off32(
// CHECK: %[[RANKI:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
// CHECK-NEXT: %[[RANK:.*]] = arith.index_cast %[[RANKI]] : i32 to index
// CHECK: arith.divsi %{{.*}}, %c256 : index
// CHECK: arith.muli %c8{{.*}}, %{{.*}} : index
// CHECK: %[[SLOTS:.*]] = arith.maxsi %{{.*}}, %c1{{.*}} : index
// CHECK-NEXT: arith.remui
// CHECK-NEXT: arith.addi
// CHECK-NEXT: %[[NTILE:.*]] = arith.divui %{{.*}}, %[[SLOTS]] : index
// CHECK-NEXT: scf.if %{{.*}} -> (index, index, index, index) {
// CHECK: %[[FROM:.*]] = arith.muli %[[NTILE]], %c256{{.*}} : index
// CHECK: %[[SHARE:.*]] = arith.muli %[[RANK]], %c128{{.*}} : index
// CHECK-NEXT: arith.addi %[[FROM]], %[[SHARE]] : index
func.func @clustered(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 64, stages = 2, cluster = 2>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
