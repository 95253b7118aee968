!tmA = !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!tmB = !nvgpu.tensormap.descriptor<tensor = memref<1x128x64xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!bar = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
!acc = !nvgpu.warpgroup.accumulator<fragmented = vector<64x128xf32>>
module attributes {gpu.container_module} {
gpu.module @m {
  gpu.func @k(%pa: !llvm.ptr, %pb: !llvm.ptr) kernel {
    %ta = builtin.unrealized_conversion_cast %pa : !llvm.ptr to !tmA
    %tb = builtin.unrealized_conversion_cast %pb : !llvm.ptr to !tmB
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %smem = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %a = memref.view %smem[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64x64xbf16, #gpu.address_space<workgroup>>
    %b3 = memref.view %smem[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<1x128x64xbf16, #gpu.address_space<workgroup>>
    %b = memref.view %smem[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<128x64xbf16, #gpu.address_space<workgroup>>
    %bar = nvgpu.mbarrier.create -> !bar
    nvgpu.mbarrier.init %bar[%c0], %c1 : !bar
    nvgpu.tma.async.load %ta[%c0, %c0], %bar[%c0] to %a : !tmA, !bar -> memref<64x64xbf16, #gpu.address_space<workgroup>>
    nvgpu.tma.async.load %tb[%c0, %c0, %c1], %bar[%c0] to %b3 : !tmB, !bar -> memref<1x128x64xbf16, #gpu.address_space<workgroup>>
    %acc0 = nvgpu.warpgroup.mma.init.accumulator -> !acc
    %as = memref.subview %a[0, 16][64, 16][1, 1] : memref<64x64xbf16, #gpu.address_space<workgroup>> to memref<64x16xbf16, strided<[64, 1], offset: 16>, #gpu.address_space<workgroup>>
    %bs = memref.subview %b[0, 16][128, 16][1, 1] : memref<128x64xbf16, #gpu.address_space<workgroup>> to memref<128x16xbf16, strided<[64, 1], offset: 16>, #gpu.address_space<workgroup>>
    %da = nvgpu.warpgroup.generate.descriptor %as, %ta : memref<64x16xbf16, strided<[64, 1], offset: 16>, #gpu.address_space<workgroup>>, !tmA -> !nvgpu.warpgroup.descriptor<tensor = memref<64x16xbf16, #gpu.address_space<workgroup>>>
    %db = nvgpu.warpgroup.generate.descriptor %bs, %tb : memref<128x16xbf16, strided<[64, 1], offset: 16>, #gpu.address_space<workgroup>>, !tmB -> !nvgpu.warpgroup.descriptor<tensor = memref<16x128xbf16, #gpu.address_space<workgroup>>>
    %acc1 = nvgpu.warpgroup.mma %da, %db, %acc0 : !nvgpu.warpgroup.descriptor<tensor = memref<64x16xbf16, #gpu.address_space<workgroup>>>, !nvgpu.warpgroup.descriptor<tensor = memref<16x128xbf16, #gpu.address_space<workgroup>>>, !acc -> !acc
    %out = memref.view %smem[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64x128xf32, #gpu.address_space<workgroup>>
    nvgpu.warpgroup.mma.store %acc1, %out : !acc to memref<64x128xf32, #gpu.address_space<workgroup>>
    gpu.return
  }
}
}
