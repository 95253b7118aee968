!tmA = !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
module attributes {gpu.container_module} {
gpu.module @m {
  gpu.func @k(%ta: !tmA) kernel {
    nvgpu.tma.prefetch.descriptor %ta : !tmA
    gpu.return
  }
}
}
