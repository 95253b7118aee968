// The sm_90a grouped GEMM's widened MXFP8 mainloop
// (Sm90Gemm/MainloopMXFP8Widened.cpp): widen = true turns each K step's
// e4m3 tiles into bf16 in shared memory times their scales and multiplies
// them with bf16 wgmma straight into the accumulator.
// RUN: moe-opt %s --convert-moe-to-nvgpu --split-input-file | FileCheck %s

// Steps 0 and 1's scales go to buffers 0 and 1 (16-byte stores, 192 rows),
// then step 0 is widened: (64 + 128) rows x 8 chunks of 16 e4m3 over 128
// threads, 12 chunks a thread, each a 16-byte load, 8 x
// nvvm.convert.f8x2.to.f16x2 times the row's scale rounded to bf16 and two
// 16-byte stores; a proxy fence makes the copy visible to wgmma. A K step
// is then 2 halves x 64 / 16 = 8 bf16 k16 nvgpu.warpgroup.mma through the
// bf16 tensor maps, the next step widened behind a barrier: no e4m3 wgmma,
// no FMA promotion.
// CHECK-LABEL: gpu.func @grouped_matmul_mxfp8wide_64x128x128_s4_off32(
// CHECK: %[[STAGING:.*]] = memref.view %{{.*}} to memref<2x192x4xf32, #gpu.address_space<workgroup>>
// CHECK: %[[ROWSMAP:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16,
// CHECK-NEXT: %[[WMAP:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<128x64xbf16,
// CHECK-COUNT-2: vector.store %{{.*}}, %[[STAGING]][%c0{{[_0-9]*}}, %{{.*}}, %c0{{.*}}] {alignment = 16 : i64} : memref<2x192x4xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-COUNT-2: vector.store %{{.*}}, %[[STAGING]][%c1{{[_0-9]*}}, %{{.*}}, %c0{{.*}}] {alignment = 16 : i64} : memref<2x192x4xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: vector.load %[[SMEM:[a-z0-9_]+]][%{{.*}}] {alignment = 16 : i64} : memref<{{[0-9]+}}xi8, #gpu.address_space<workgroup>>, vector<16xi8>
// CHECK: %[[SCALE:.*]] = memref.load %[[STAGING]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x192x4xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: %[[PAIR:.*]] = vector.broadcast %[[SCALE]] : f32 to vector<2xf32>
// CHECK: %[[H:.*]] = nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// CHECK-NEXT: %[[F:.*]] = arith.extf %[[H]] : vector<2xf16> to vector<2xf32>
// CHECK-NEXT: %[[S:.*]] = arith.mulf %[[F]], %[[PAIR]] : vector<2xf32>
// CHECK-NEXT: arith.truncf %[[S]] : vector<2xf32> to vector<2xbf16>
// CHECK-COUNT-7: nvvm.convert.f8x2.to.f16x2
// CHECK-COUNT-2: vector.store %{{.*}}, %[[SMEM]][%{{.*}}] {alignment = 16 : i64} : memref<{{[0-9]+}}xi8, #gpu.address_space<workgroup>>, vector<16xi8>
// CHECK-COUNT-88: nvvm.convert.f8x2.to.f16x2
// CHECK-NOT: nvvm.convert.f8x2.to.f16x2
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK: scf.for {{.*}} -> (!nvgpu.warpgroup.accumulator<fragmented = vector<64x128xf32>>) {
// CHECK: nvgpu.warpgroup.generate.descriptor %{{.*}}, %[[ROWSMAP]] : memref<64x16xbf16,
// CHECK-NEXT: memref.subview
// CHECK-NEXT: nvgpu.warpgroup.generate.descriptor %{{.*}}, %[[WMAP]] : memref<128x16xbf16,
// CHECK-COUNT-8: nvgpu.warpgroup.mma {{.*}} {waitGroup = 8 : i64} : <tensor = memref<64x16xbf16, #gpu.address_space<workgroup>>>, <tensor = memref<16x128xbf16, #gpu.address_space<workgroup>>>, <fragmented = vector<64x128xf32>>
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: {{nvgpu.warpgroup.mma|nvvm.wgmma.mma_async|llvm.intr.fma}}
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK-COUNT-96: nvvm.convert.f8x2.to.f16x2
// CHECK-NEXT: arith.extf
// CHECK-NOT: nvvm.convert.f8x2.to.f16x2
// CHECK: nvvm.fence.proxy
// CHECK-NOT: {{nvgpu.warpgroup.mma|nvvm.wgmma.mma_async|llvm.intr.fma}}
// CHECK: gpu.barrier
// CHECK-NEXT: scf.yield
func.func @widened(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x16xf8E8M0FNU>, %wq: tensor<8x256x512xf8E4M3FN>,
                   %ws: tensor<8x256x16xf8E8M0FNU>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x512xf8E4M3FN>, tensor<?x16xf8E8M0FNU> -> tensor<?x512xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<8x256x512xf8E4M3FN>, tensor<8x256x16xf8E8M0FNU> -> tensor<8x256x512xbf16>
  %y = moe.grouped_matmul %x, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4, widen = true>]>}
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
