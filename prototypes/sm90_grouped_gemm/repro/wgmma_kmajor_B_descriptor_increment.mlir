#smem = #gpu.address_space<workgroup>
!tmapA = !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, #smem>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!tmapB = !nvgpu.tensormap.descriptor<tensor = memref<128x64xbf16, #smem>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!accT = !nvgpu.warpgroup.accumulator<fragmented = vector<64x128xf32>>
module attributes {gpu.container_module} {
gpu.module @m {
  memref.global @sm : memref<0xi8, #smem> {alignment = 1024 : i64}
  gpu.func @k(%pa: !llvm.ptr, %pb: !llvm.ptr, %o: memref<64x128xf32, #smem>) kernel {
    %ta = builtin.unrealized_conversion_cast %pa : !llvm.ptr to !tmapA
    %tb = builtin.unrealized_conversion_cast %pb : !llvm.ptr to !tmapB
    %g = memref.get_global @sm : memref<0xi8, #smem>
    %s = memref.reinterpret_cast %g to offset: [0], sizes: [24576], strides: [1] : memref<0xi8, #smem> to memref<24576xi8, #smem>
    %c0 = arith.constant 0 : index
    %c8192 = arith.constant 8192 : index
    %a = memref.view %s[%c0][] : memref<24576xi8, #smem> to memref<64x64xbf16, #smem>
    %b = memref.view %s[%c8192][] : memref<24576xi8, #smem> to memref<128x64xbf16, #smem>
    %da = nvgpu.warpgroup.generate.descriptor %a, %ta : memref<64x64xbf16, #smem>, !tmapA -> !nvgpu.warpgroup.descriptor<tensor = memref<64x64xbf16, #smem>>
    %db = nvgpu.warpgroup.generate.descriptor %b, %tb : memref<128x64xbf16, #smem>, !tmapB -> !nvgpu.warpgroup.descriptor<tensor = memref<64x128xbf16, #smem>>
    %acc0 = nvgpu.warpgroup.mma.init.accumulator -> !accT
    %acc1 = nvgpu.warpgroup.mma %da, %db, %acc0 : !nvgpu.warpgroup.descriptor<tensor = memref<64x64xbf16, #smem>>, !nvgpu.warpgroup.descriptor<tensor = memref<64x128xbf16, #smem>>, !accT -> !accT
    nvgpu.warpgroup.mma.store %acc1, %o : !accT to memref<64x128xf32, #smem>
    gpu.return
  }
}
}
