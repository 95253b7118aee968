// The sm_90a grouped GEMM's quantizing epilogue (Sm90Gemm/EpilogueQuantize.cpp):
// a block-FP8 gate-up whose SwiGLU output is stored as e4m3 with one f32
// scale per row and 128 columns. The forms are those that
// --moe-select-kernels="fp8-epilogue-quantize=1" chooses for this MLP.
// RUN: moe-opt %s --convert-moe-to-nvgpu --split-input-file | FileCheck %s

// Swap-AB (16 tokens): 4 passes of 32 output columns, each through the f32
// tile (nvgpu.warpgroup.mma.store between CTA barriers), gate and up rows
// 32 apart, scalar bf16 stores into the 16 x 128 activation tile.
// CHECK-LABEL: gpu.func @grouped_matmul_fp8block_16x64x128_s8_swapab_swiglu_e4m3out_off32(
// CHECK: %[[ACT:.*]] = memref.view %{{.*}} to memref<16x128xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[T:.*]] = memref.view %{{.*}} to memref<64x16xf32, #gpu.address_space<workgroup>>
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c4{{.*}} step %c1{{.*}} {
// CHECK: nvgpu.warpgroup.mma.store %{{.*}}, %[[T]]
// CHECK-NEXT: gpu.barrier
// CHECK: %[[GATE:.*]] = memref.load %[[T]][%[[COL:[a-z0-9_]+]], %[[R:[a-z0-9_]+]]]
// CHECK: %[[UPROW:.*]] = arith.addi %[[COL]], %c32{{.*}} : index
// CHECK-NEXT: memref.load %[[T]][%[[UPROW]], %[[R]]]
// CHECK: arith.negf %[[GATE]] : f32
// CHECK: %[[H:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK: memref.store %[[H]], %[[ACT]][%[[R]], %{{.*}}] : memref<16x128xbf16, #gpu.address_space<workgroup>>
// CHECK: vector.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : memref<?x?xi8>, vector<8xi8>
// A work item is a whole 128-column group: 2 passes of 64 output columns
// (an scf.for, not unrolled), each storing its 16 pairs of activations,
// rounded to bf16, into the warpgroup's 64 x 128 bf16 activation tile.
// Then the next item's loads go out and, after a barrier of the warpgroup,
// 16 threads per row quantize it in 64 / 8 = 8 rounds: a 16-byte load of
// 8 values, the row's amax over 16 lanes (4 xor shuffles), 4 f32x2 -> e4m3
// conversions, an 8-byte vector<8xi8> store of the codes and, by the
// leading lane of the row only, the f32 scale at (row, col0 / 128).
// CHECK-LABEL: gpu.func @grouped_matmul_fp8block_64x128x128_s4_swiglu_e4m3out_off32(
// CHECK-SAME: %[[OUT:[a-z0-9_]+]]: memref<?x?xi8>
// CHECK-SAME: %{{.*}}: memref<?x?x?xf32>, %[[OSCALES:[a-z0-9_]+]]: memref<?x?xf32>) workgroup(
// CHECK: %[[ACT:.*]] = memref.view %{{.*}} to memref<64x128xbf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: arith.constant 0 : index
// CHECK-NEXT: arith.constant 2 : index
// CHECK-NEXT: arith.constant 1 : index
// CHECK-NEXT: scf.for %{{.*}} = %c0{{.*}} to %c2{{.*}} step %c1{{.*}} {
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK-COUNT-16: vector.store %{{.*}}, %[[ACT]][%{{.*}}, %{{.*}}] {alignment = 4 : i64} : memref<64x128xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.tma.async.load
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK-NEXT: arith.constant 128 : index
// CHECK-NEXT: %[[GTID:.*]] = arith.remui %thread_id_x, %c128{{.*}} : index
// CHECK: %[[CHUNK:.*]] = arith.remui %[[GTID]], %c16{{.*}} : index
// CHECK: %[[LEADS:.*]] = arith.cmpi eq, %[[CHUNK]], %c0{{.*}} : index
// CHECK: %[[GROUP:.*]] = arith.divui %{{.*}}, %c128{{.*}} : index
// CHECK: vector.load %[[ACT]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<64x128xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// CHECK-COUNT-4: gpu.shuffle  xor
// CHECK-NOT: gpu.shuffle
// CHECK-COUNT-4: nvvm.convert.f32x2.to.f8x2 {{.*}} : i16(f8E4M3FN)
// CHECK: %[[CODES:.*]] = vector.bitcast %{{.*}} : vector<2xi32> to vector<8xi8>
// CHECK: vector.store %[[CODES]], %[[OUT]][%[[ROW:[a-z0-9_]+]], %{{.*}}] {alignment = 8 : i64} : memref<?x?xi8>, vector<8xi8>
// CHECK-NEXT: scf.if %[[LEADS]] {
// CHECK-NEXT: memref.store %{{.*}}, %[[OSCALES]][%[[ROW]], %[[GROUP]]] : memref<?x?xf32>
// CHECK-COUNT-7: vector.store %{{.*}}, %[[OUT]]{{.*}} vector<8xi8>
// CHECK-NOT: vector.store
// CHECK: nvvm.barrier id
#gate_up = #moe.gemm_kernels<chip = "sm_90a", forms = [
    #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 128, stages = 8, swap_ab = true>,
    #moe.gemm_form<rows_min = 17, rows_max = 64, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4>,
    #moe.gemm_form<rows_min = 65, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 128, stages = 4, warp_specialized = true>],
    quantize_output = true>
#down = #moe.gemm_kernels<chip = "sm_90a", forms = [
    #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 128, stages = 4, swap_ab = true>,
    #moe.gemm_form<rows_min = 17, rows_max = 64, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4>,
    #moe.gemm_form<rows_min = 65, rows_max = 2147483647, tile_m = 128, tile_n = 192, tile_k = 128, stages = 4, warp_specialized = true>]>
func.func @fused_mlp_fp8(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x4xf32>,
    %w13q: tensor<8x512x512xf8E4M3FN>, %w13s: tensor<8x4x4xf32>, %w2q: tensor<8x512x256xf8E4M3FN>, %w2s: tensor<8x4x2xf32>,
    %off: tensor<9xi32>, %scale: tensor<?xf32>) -> tensor<?x512xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32> : tensor<?x512xf8E4M3FN>, tensor<?x4xf32> -> tensor<?x512xbf16>
  %w13 = moe.dequantize %w13q, %w13s from <f8E4M3FN, [1, 128, 128], f32> : tensor<8x512x512xf8E4M3FN>, tensor<8x4x4xf32> -> tensor<8x512x512xbf16>
  %w2 = moe.dequantize %w2q, %w2s from <f8E4M3FN, [1, 128, 128], f32> : tensor<8x512x256xf8E4M3FN>, tensor<8x4x2xf32> -> tensor<8x512x256xbf16>
  %y = moe.expert_mlp silu %x, %off, %w13, %w2 scale %scale intermediate <f8E4M3FN, [1, 128], f32>
      {moe.kernels = #moe.expert_mlp_kernels<gate_up = #gate_up, down = #down>}
      : (tensor<?x512xbf16>, tensor<9xi32>, tensor<8x512x512xbf16>, tensor<8x512x256xbf16>, tensor<?xf32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
