// RUN: moe-opt %s --convert-moe-to-nvgpu --moe-extract-device-code | FileCheck %s

// Host code goes; the gpu.module stays; the manifest keeps what a launcher
// needs once the kernels are serialized.
// CHECK: module attributes {gpu.container_module, moe.manifest = {kernels = [{dynamic_shared_bytes = 163840 : i64, module = "moe_kernels", name = "grouped_matmul_bf16_64x256x64_s4_off32", op = "moe.grouped_matmul", threads = array<i32: 128, 1, 1>, tile = array<i64: 64, 256, 64, 4>}], version = 0 : i64}}
// CHECK-NOT: func.func
// CHECK: gpu.module @moe_kernels
// CHECK-NOT: func.func
func.func @gm(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
