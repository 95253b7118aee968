// The sm_90a grouped GEMM's pipeline (Sm90Gemm/Pipeline.cpp): `stages`
// buffers filled by TMA behind mbarriers, their refills, and the
// warp-specialized form's "empty" mbarriers.
// RUN: moe-opt %s --convert-moe-to-nvgpu --split-input-file | FileCheck %s

// Unspecialized, 3 stages: 3 full mbarriers of one arrival (the issuer's
// expect-tx), no empty ones. A stage expects (64 + 128) x 64 bf16 = 24576
// bytes from 2 TMA loads (rows, weights); the prologue fills 3 stages. The
// leader refills the previous step's stage (step + 3 - 1) after the CTA
// barrier, no arrival on empty barriers.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_64x128x64_s3_off32(
// CHECK: %[[BAR:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 3>
// CHECK-COUNT-3: nvgpu.mbarrier.init %[[BAR]][%{{.*}}], %c1{{(_[0-9]+)?}} :
// CHECK-NEXT: nvvm.fence.mbarrier.init
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BAR]][%[[S:[a-z0-9_#]+]]], %c24576{{(_[0-9]+)?}} :
// CHECK-NEXT: nvgpu.tma.async.load %{{.*}}[%[[K:[a-z0-9_#]+]], %{{.*}}], %[[BAR]][%[[S]]] to %{{.*}} : <tensor = memref<64x64xbf16,
// CHECK-NEXT: nvgpu.tma.async.load %{{.*}}[%[[K]], %{{.*}}, %{{.*}}], %[[BAR]][%[[S]]] to %{{.*}} : <tensor = memref<1x128x64xbf16,
// CHECK-NEXT: }
// CHECK-COUNT-2: nvgpu.mbarrier.arrive.expect_tx %[[BAR]][%{{.*}}], %c24576
// CHECK-NOT: nvgpu.mbarrier.arrive.expect_tx
// CHECK: scf.for %{{.*}} = {{.*}} -> (!nvgpu.warpgroup.accumulator<fragmented = vector<64x128xf32>>) {
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BAR]]
// CHECK-NOT: nvgpu.mbarrier.arrive {{%}}
// CHECK: gpu.barrier
// CHECK: %[[PREV:.*]] = arith.subi %[[ITEMSTEP:[a-z0-9_]+]], %c1{{.*}} : index
// CHECK: %[[REFILL:.*]] = arith.addi %[[PREV]], %c3{{.*}} : index
// CHECK: arith.cmpi slt, %c0{{.*}}, %[[ITEMSTEP]] : index
// CHECK-NEXT: arith.cmpi slt, %[[REFILL]], %{{.*}} : index
// CHECK: scf.if
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BAR]]
// CHECK-NEXT: nvgpu.tma.async.load
// CHECK-NEXT: nvgpu.tma.async.load
// CHECK-NEXT: }
func.func @normal(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 3>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// Warp-specialized, 4 stages: 4 full mbarriers, then 4 empty ones for the
// 2 x 128 consumer threads. The producer waits on stage s's empty barrier
// s + 4, then loads 256 x 64 bf16 = 32768 bytes into it.
// A consumer releases its previous step's stage after the step's wgmma (no
// CTA barrier), and the pass's last one after the wgmma wait.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_128x128x64_s4_ws_off32(
// CHECK: %[[BAR:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 8>
// CHECK-COUNT-4: nvgpu.mbarrier.init %[[BAR]][%{{.*}}], %c1{{(_[0-9]+)?}} :
// CHECK-COUNT-4: nvgpu.mbarrier.init %[[BAR]][%{{.*}}], %c256{{(_[0-9]+)?}} :
// CHECK-NEXT: nvvm.fence.mbarrier.init
// CHECK: scf.for %{{.*}} iter_args(%[[STEP:[a-z0-9_#]+]] = %{{.*}}) -> (index) {
// CHECK: %[[STAGE:.*]] = arith.remui %[[STEP]], %c4 : index
// CHECK: %[[EMPTY:.*]] = arith.addi %[[STAGE]], %c4{{.*}} : index
// CHECK-NEXT: nvgpu.mbarrier.try_wait.parity %[[BAR]][%[[EMPTY]]]
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BAR]][%[[STAGE]]], %c32768{{.*}} :
// CHECK-NEXT: nvgpu.tma.async.load
// CHECK-NEXT: nvgpu.tma.async.load
// CHECK-NEXT: }
// CHECK: scf.for %[[KSTEP:[a-z0-9_]+]] = {{.*}} -> (!nvgpu.warpgroup.accumulator<fragmented = vector<64x128xf32>>) {
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BAR]]
// CHECK-NOT: gpu.barrier
// CHECK: %[[LATER:.*]] = arith.cmpi slt, %c0{{.*}}, %[[KSTEP]] : index
// CHECK-NEXT: scf.if %[[LATER]] {
// CHECK: %[[PSTAGE:.*]] = arith.remui %{{.*}}, %c4{{.*}} : index
// CHECK: %[[PEMPTY:.*]] = arith.addi %[[PSTAGE]], %c4{{.*}} : index
// CHECK-NEXT: nvgpu.mbarrier.arrive %[[BAR]][%[[PEMPTY]]]
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvgpu.mbarrier.arrive %[[BAR]]
func.func @specialized(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 64, stages = 4, warp_specialized = true>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// Cluster of 2: rank 0 loads the rows into both CTAs' stage (multicast mask
// 0b11), each CTA its own weights; each expects the whole stage.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_128x128x64_s2_c2_off32(
// CHECK: %[[RANKI:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
// CHECK-NEXT: %[[RANK:.*]] = arith.index_cast %[[RANKI]] : i32 to index
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BAR:[a-z0-9_]+]][%[[S:[a-z0-9_#]+]]], %c32768{{.*}} :
// CHECK: %[[ROWS:.*]] = arith.cmpi eq, %[[RANK]], %c0{{.*}} : index
// CHECK-NEXT: scf.if %[[ROWS]] {
// CHECK-NEXT: %[[MASK:.*]] = arith.constant 3 : i16
// CHECK-NEXT: nvgpu.tma.async.load %{{.*}}, %[[BAR]][%[[S]]] to %{{.*}} multicast_mask = %[[MASK]] : <tensor = memref<128x64xbf16,
// CHECK-NEXT: }
// CHECK-NEXT: nvgpu.tma.async.load %{{.*}}, %[[BAR]][%[[S]]] to %{{[a-z0-9_]+}} : <tensor = memref<1x128x64xbf16,
func.func @clustered(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 64, stages = 2, cluster = 2>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// Gated (the expert MLP's gate-up): 3 loads of 24576 bytes per stage: 64
// gate rows at the item's column into the weights tile's first half, their
// up rows N / 2 (out's N) further into its second half (16384 bytes on).
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_64x128x64_s2_swiglu_off32(
// CHECK: %[[N:.*]] = memref.dim %{{.*}}, %c1{{.*}} : memref<?x?xbf16>
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BAR:[a-z0-9_]+]][%[[S:[a-z0-9_#]+]]], %c24576{{.*}} :
// CHECK-NEXT: nvgpu.tma.async.load %{{.*}} : <tensor = memref<64x64xbf16,
// CHECK-NEXT: nvgpu.tma.async.load %[[W:[a-z0-9_#]+]][%[[K:[a-z0-9_#]+]], %[[COL:[a-z0-9_#]+]], %[[EXPERT:[a-z0-9_#]+]]], %[[BAR]][%[[S]]] to %{{.*}} : <tensor = memref<1x64x64xbf16,
// CHECK: %[[AT:.*]] = arith.addi %{{.*}}, %c16384{{.*}} : index
// CHECK-NEXT: %[[UP:.*]] = memref.view %{{.*}}[%[[AT]]][]
// CHECK-NEXT: %[[UPCOL:.*]] = arith.addi %[[COL]], %[[N]] : index
// CHECK-NEXT: nvgpu.tma.async.load %[[W]][%[[K]], %[[UPCOL]], %[[EXPERT]]], %[[BAR]][%[[S]]] to %[[UP]] : <tensor = memref<1x64x64xbf16,
// CHECK-NEXT: }
#gemm = #moe.gemm_kernels<chip = "sm_90a", forms = [
    #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 2>]>
func.func @gated(%rows: tensor<?x256xbf16>, %off: tensor<9xi32>, %w13: tensor<8x1024x256xbf16>, %w2: tensor<8x256x512xbf16>) -> tensor<?x256xbf16> {
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2 {moe.kernels = #moe.expert_mlp_kernels<gate_up = #gemm, down = #gemm>}
      : (tensor<?x256xbf16>, tensor<9xi32>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
