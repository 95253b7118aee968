// The sm_90a grouped GEMM's block-FP8 mainloop (Sm90Gemm/MainloopBlockFP8.cpp):
// rows and weights both moe.dequantize of e4m3, with f32 scales per row and
// 128 K ([1, 128]) and per 128 x 128 block; each K step's products are
// promoted into the accumulator times both scales.
// RUN: moe-opt %s --convert-moe-to-nvgpu --split-input-file | FileCheck %s

// A K step (128 e4m3) starts a fresh accumulator for its 128 / 32 = 4 e4m3
// wgmma, loads the scales of the thread's two fragment rows and of the two
// 64-row chunks of weights (each inside one 128-row block) at this K step,
// multiplies them per value, waits for the wgmma (wait 0), and adds each of
// the 128 / 2 = 64 values times its scale into the carried accumulator
// with llvm.intr.fma.
// CHECK-LABEL: gpu.func @grouped_matmul_fp8block_64x128x128_s4_off32(
// CHECK-SAME: %[[RS:[a-z0-9_]+]]: memref<?x?xf32>, %[[WS:[a-z0-9_]+]]: memref<?x?x?xf32>)
// CHECK: %[[ACC0:.*]] = nvgpu.warpgroup.mma.init.accumulator -> <fragmented = vector<64x128xf32>>
// CHECK: scf.for %[[KS:[a-z0-9_]+]] = {{.*}} iter_args(%[[ACC:[a-z0-9_]+]] = %[[ACC0]]) -> (!nvgpu.warpgroup.accumulator<fragmented = vector<64x128xf32>>) {
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: %[[FRESH:.*]] = nvgpu.warpgroup.mma.init.accumulator -> <fragmented = vector<64x128xf32>>
// CHECK: %[[P0:.*]] = nvgpu.warpgroup.mma %{{.*}}, %{{.*}}, %[[FRESH]] {waitGroup = 4 : i64} : <tensor = memref<64x32xf8E4M3FN, #gpu.address_space<workgroup>>>, <tensor = memref<32x128xf8E4M3FN, #gpu.address_space<workgroup>>>
// CHECK: %[[P1:.*]] = nvgpu.warpgroup.mma %{{.*}}, %{{.*}}, %[[P0]] {{.*}}f8E4M3FN
// CHECK: %[[P2:.*]] = nvgpu.warpgroup.mma %{{.*}}, %{{.*}}, %[[P1]] {{.*}}f8E4M3FN
// CHECK: %[[PART:.*]] = nvgpu.warpgroup.mma %{{.*}}, %{{.*}}, %[[P2]] {{.*}}f8E4M3FN
// CHECK-NOT: nvgpu.warpgroup.mma
// CHECK: %[[R0:.*]] = memref.load %[[RS]][%{{.*}}, %[[KS]]] : memref<?x?xf32>
// CHECK: %[[R1:.*]] = memref.load %[[RS]][%{{.*}}, %[[KS]]] : memref<?x?xf32>
// CHECK: %[[B0:.*]] = memref.load %[[WS]][%{{.*}}, %{{.*}}, %[[KS]]] : memref<?x?x?xf32>
// CHECK: %[[B1:.*]] = memref.load %[[WS]][%{{.*}}, %{{.*}}, %[[KS]]] : memref<?x?x?xf32>
// CHECK-NEXT: %[[S0:.*]] = arith.mulf %[[R0]], %[[B0]] : f32
// CHECK-COUNT-62: arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: arith.mulf %[[R1]], %[[B1]] : f32
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: %[[SUM:.*]] = builtin.unrealized_conversion_cast %[[ACC]] :
// CHECK-NEXT: %[[PARTS:.*]] = builtin.unrealized_conversion_cast %[[PART]] :
// CHECK-NEXT: %[[X:.*]] = llvm.extractvalue %[[PARTS]][0, 0]
// CHECK-NEXT: %[[Y:.*]] = llvm.extractvalue %[[SUM]][0, 0]
// CHECK-NEXT: llvm.intr.fma(%[[X]], %[[S0]], %[[Y]]) : (f32, f32, f32) -> f32
// CHECK-COUNT-63: llvm.intr.fma
// CHECK-NOT: llvm.intr.fma
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
func.func @block_fp8(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x4xf32>,
                     %wq: tensor<8x256x512xf8E4M3FN>, %ws: tensor<8x2x4xf32>,
                     %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x512xf8E4M3FN>, tensor<?x4xf32> -> tensor<?x512xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [128, 128], f32>
      : tensor<8x256x512xf8E4M3FN>, tensor<8x2x4xf32> -> tensor<8x256x512xbf16>
  %y = moe.grouped_matmul %x, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4>]>}
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// Gated 192-column tile (96 gate, 96 up columns): the weight scales are
// loaded per 32-row chunk (6), as 96 is no multiple of 64; chunks of the up
// half (local row >= 96) lie N / 2 (out's N) further. 192 / 2 = 96 FMAs.
// CHECK-LABEL: gpu.func @grouped_matmul_fp8block_64x192x128_s4_swiglu_off32(
// CHECK-SAME: %[[WS:[a-z0-9_]+]]: memref<?x?x?xf32>)
// CHECK: %[[N:.*]] = memref.dim %{{.*}}, %c1{{.*}} : memref<?x?xbf16>
// CHECK: scf.for {{.*}} -> (!nvgpu.warpgroup.accumulator<fragmented = vector<64x192xf32>>) {
// CHECK-COUNT-3: memref.load %[[WS]]
// CHECK: %[[UP:.*]] = arith.cmpi sge, %c96{{.*}}, %c96{{.*}} : index
// CHECK-NEXT: %[[BACK:.*]] = arith.subi %[[ROW:[a-z0-9_]+]], %c96{{.*}} : index
// CHECK-NEXT: %[[FAR:.*]] = arith.addi %[[BACK]], %[[N]] : index
// CHECK-NEXT: %[[SEL:.*]] = arith.select %[[UP]], %[[FAR]], %[[ROW]] : index
// CHECK: arith.divui %[[SEL]], %c128{{.*}} : index
// CHECK-COUNT-3: memref.load %[[WS]]
// CHECK-NOT: memref.load %[[WS]]
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-96: llvm.intr.fma
// CHECK-NOT: llvm.intr.fma
// CHECK: scf.yield
#gate_up = #moe.gemm_kernels<chip = "sm_90a", forms = [
    #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 192, tile_k = 128, stages = 4>]>
#down = #moe.gemm_kernels<chip = "sm_90a", forms = [
    #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4>]>
func.func @gated(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x4xf32>,
    %w13q: tensor<8x512x512xf8E4M3FN>, %w13s: tensor<8x4x4xf32>,
    %w2q: tensor<8x512x256xf8E4M3FN>, %w2s: tensor<8x4x2xf32>,
    %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x512xf8E4M3FN>, tensor<?x4xf32> -> tensor<?x512xbf16>
  %w13 = moe.dequantize %w13q, %w13s from <f8E4M3FN, [1, 128, 128], f32>
      : tensor<8x512x512xf8E4M3FN>, tensor<8x4x4xf32> -> tensor<8x512x512xbf16>
  %w2 = moe.dequantize %w2q, %w2s from <f8E4M3FN, [1, 128, 128], f32>
      : tensor<8x512x256xf8E4M3FN>, tensor<8x4x2xf32> -> tensor<8x512x256xbf16>
  %y = moe.expert_mlp silu %x, %off, %w13, %w2 intermediate <f8E4M3FN, [1, 128], f32>
      {moe.kernels = #moe.expert_mlp_kernels<gate_up = #gate_up, down = #down>}
      : (tensor<?x512xbf16>, tensor<9xi32>, tensor<8x512x512xbf16>, tensor<8x512x256xbf16>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
