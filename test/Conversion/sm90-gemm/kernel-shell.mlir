// The sm_90a grouped GEMM's kernel shell (GroupedMatmulKernel.cpp): its
// signature, the once-per-CTA set-up, the roles of a warp-specialized form
// and the persistent work loop.
// RUN: moe-opt %s --convert-moe-to-nvgpu --split-input-file | FileCheck %s

// Unspecialized: every thread consumes; the set-up (mbarriers, offsets
// cache, tile table) overlaps the previous kernel until the grid
// dependency wait; the first item's loads go out before the work loop,
// which carries (work item, pipeline steps, expert, row0, rowEnd, col0).
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_64x128x64_s3_off32(
// CHECK-SAME: %{{.*}}: !llvm.ptr {llvm.align = 64 : i64}, %{{.*}}: !llvm.ptr {llvm.align = 64 : i64}, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?x?xbf16>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32)
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK: gpu.thread_id  x
// CHECK: nvgpu.mbarrier.create
// CHECK: nvvm.griddepcontrol  wait
// CHECK: gpu.block_id  x
// CHECK-NOT: nvvm.setmaxregister
// CHECK: nvgpu.tma.async.load
// CHECK: scf.while ({{.*}}) : (index, index, index, index, index, index)
// CHECK: nvgpu.warpgroup.mma.init.accumulator
// CHECK: scf.yield {{.*}} : index, index, index, index, index, index
// CHECK: gpu.return
func.func @normal(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 3>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// Warp-specialized: a third warpgroup (tid 256..383) is the producer. It
// gives registers away, then its own loop over the CTA's items (work item,
// pipeline steps) loads every step once the consumers released its stage;
// the consumers take the registers and run the work loop.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_128x128x64_s4_ws_off32(
// CHECK-SAME: known_block_size = array<i32: 384, 1, 1>
// CHECK: %[[WG:.*]] = arith.divui %{{.*}}, %c128 : index
// CHECK: nvvm.griddepcontrol  wait
// CHECK: %[[PRODUCER:.*]] = arith.cmpi eq, %[[WG]], %c2{{.*}} : index
// CHECK: scf.if %[[PRODUCER]] {
// CHECK-NEXT: nvvm.setmaxregister  decrease 56
// CHECK: scf.while ({{.*}}) : (index, index) -> (index, index)
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: nvgpu.tma.async.load
// CHECK: } else {
// CHECK-NEXT: nvvm.setmaxregister  increase 224
// CHECK: scf.while ({{.*}}) : (index, index, index, index, index, index)
// CHECK: nvgpu.mbarrier.arrive
// CHECK: gpu.return
func.func @specialized(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 64, stages = 4, warp_specialized = true>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// Clustered: the CTA's rank in its cluster picks its half of each item,
// and a cluster barrier keeps both CTAs until the peer's multicast is done.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_128x128x64_s4_c2_off32(
// CHECK-SAME: known_cluster_size = array<i32: 2, 1, 1>
// CHECK: nvvm.read.ptx.sreg.cluster.ctarank
// CHECK: scf.while
// CHECK: scf.yield {{.*}} : index, index, index, index, index, index
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK-NEXT: gpu.return
func.func @clustered(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 64, stages = 4, cluster = 2>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// Ping-pong: two consumer warpgroups and a producer; each stage has one
// reader (128 arrivals) and each consumer a turn mbarrier (8 and 9, after
// the 4 full and 4 empty ones). Consumer warpgroup w starts at item
// blockIdx + w * gridDim and pipeline step w * numSteps and steps by two
// items. Its mainloop waits for its turn (the other warpgroup's last stage
// wait), and passes the turn once its own K loop is issued.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_64x256x64_s4_pp_off32(
// CHECK-SAME: known_block_size = array<i32: 384, 1, 1>
// CHECK: %[[WG:.*]] = arith.divui %{{.*}}, %c128 : index
// CHECK: nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 10>
// CHECK-COUNT-4: nvgpu.mbarrier.init %{{.*}}, %c1
// CHECK-COUNT-6: nvgpu.mbarrier.init %{{.*}}, %c128
// CHECK: nvvm.setmaxregister  decrease 56
// CHECK: nvvm.setmaxregister  increase 224
// CHECK-NEXT: %[[SKIP:.*]] = arith.muli %[[WG]], %[[CTAS:.*]] : index
// CHECK-NEXT: %[[FIRST:.*]] = arith.addi %{{.*}}, %[[SKIP]] : index
// CHECK-NEXT: %[[STEP0:.*]] = arith.muli %[[WG]], %[[STEPS:.*]] : index
// CHECK: %[[ITEMSTRIDE:.*]] = arith.muli %[[CTAS]], %c2
// CHECK: %[[STEPSTRIDE:.*]] = arith.muli %[[STEPS]], %c2
// CHECK: scf.while (%{{.*}} = %[[FIRST]], %{{.*}} = %[[STEP0]], {{.*}}) : (index, index, index, index, index, index)
// CHECK: arith.addi %{{.*}}, %[[ITEMSTRIDE]] : index
// CHECK: arith.addi %{{.*}}, %[[STEPSTRIDE]] : index
// CHECK: nvgpu.warpgroup.mma.init.accumulator
// CHECK: %[[TURN:.*]] = arith.addi %[[WG]], %c8{{.*}} : index
// CHECK-NEXT: nvgpu.mbarrier.try_wait.parity %{{.*}}[%[[TURN]]]
// CHECK: scf.for
// CHECK: nvgpu.warpgroup.mma
// CHECK: %[[OTHER:.*]] = arith.subi %c1{{.*}}, %[[WG]] : index
// CHECK: %[[PASS:.*]] = arith.addi %[[OTHER]], %c8{{.*}} : index
// CHECK-NEXT: nvgpu.mbarrier.arrive %{{.*}}[%[[PASS]]]
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: gpu.return
func.func @pingpong(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 256, tile_k = 64, stages = 4, warp_specialized = true, pingpong = true>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
