// A kernel configuration written by hand: --convert-moe-to-nvgpu builds
// exactly the forms it names, with no --moe-select-kernels.
// RUN: moe-opt %s --convert-moe-to-nvgpu | FileCheck %s

// A 32-token swap-AB form up to 32 rows, then one 64-row form of 128 columns
// with 3 stages: the launch names both kernels with their row ranges.
// CHECK-LABEL: func @hand_written
// CHECK: moe.launch = {{.*}}kernels = [{kernel = @moe_kernels::@grouped_matmul_bf16_32x64x64_s6_swapab_off32, rows_max = 32 : i64, rows_min = 1 : i64}, {kernel = @moe_kernels::@grouped_matmul_bf16_64x128x64_s3_off32, rows_max = 2147483647 : i64, rows_min = 33 : i64}]
// CHECK: gpu.module @moe_kernels
// CHECK: gpu.func @grouped_matmul_bf16_32x64x64_s6_swapab_off32
// CHECK: gpu.func @grouped_matmul_bf16_64x128x64_s3_off32
// CHECK-NOT: gpu.func
func.func @hand_written(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [
      #moe.gemm_form<rows_min = 1, rows_max = 32, tile_m = 32, tile_n = 64, tile_k = 64, stages = 6, swap_ab = true>,
      #moe.gemm_form<rows_min = 33, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 3>]>}
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
