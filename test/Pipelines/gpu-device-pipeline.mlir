// --moe-gpu-device-pipeline lowers kernels chosen by hand (here: one
// swap-AB kernel for every expert) to a gpu.binary, keeping the manifest
// and the by-value tensor maps; a chip without kernels of ours is refused
// when the options are parsed, not compiled to a silently different binary.
// RUN: moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 swap-ab=1 tile-m=8 tile-n=64" --convert-moe-to-nvgpu --moe-extract-device-code --moe-gpu-device-pipeline="format=isa" -o %t.mlir
// RUN: FileCheck %s --input-file %t.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file %t.ptx
// RUN: %ptxas -arch=sm_90a %t.ptx -o %t.cubin
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 swap-ab=1 tile-m=8 tile-n=64" --convert-moe-to-nvgpu --moe-extract-device-code --moe-gpu-device-pipeline="chip=sm_80" 2>&1 | FileCheck %s --check-prefix=OLD-CHIP

// CHECK: moe.manifest = {entries = [{abi = "grouped_matmul.v3", {{.*}}name = "grouped_matmul_bf16_8x64x64_s4_swapab_off32", {{.*}}rows_max = 2147483647 : i64, rows_min = 1 : i64, swap_ab = true
// CHECK: gpu.binary @moe_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">
// PTX: .visible .entry grouped_matmul_bf16_8x64x64_s4_swapab_off32(
// PTX-NEXT: .param .align 64 .b8 grouped_matmul_bf16_8x64x64_s4_swapab_off32_param_0[128],
// PTX: wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16
// OLD-CHIP: error: moe-gpu-device-pipeline: 'chip' must be sm_90a, or sm_100a (the MXFP8 grouped_matmul only), got 'sm_80'
func.func @decode(%rows: tensor<?x512xbf16>, %w: tensor<8x256x512xbf16>, %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
