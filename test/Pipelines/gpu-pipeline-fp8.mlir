// The block-FP8 grouped GEMM through the whole GPU pipeline: a cubin whose
// kernels run e4m3 WGMMA (QGMMA, K = 32 per instruction, 4 per 128-wide K
// step) on TMA-loaded tiles, and a manifest entry of its own ABI.
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-gpu-pipeline -o %t.mlir
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file %t.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.mlir %t.cubin
// RUN: %cuobjdump -sass -fun grouped_matmul_fp8block_128x192x128_s4_ws_off32 %t.cubin | FileCheck %s --check-prefix=SASS
// RUN: %cuobjdump -sass -fun grouped_matmul_fp8block_16x64x128_s4_swapab_off32 %t.cubin | FileCheck %s --check-prefix=SWAP-SASS
// RUN: %cuobjdump --dump-resource-usage %t.cubin | FileCheck %s --check-prefix=REGS
// RUN: moe-opt %s --moe-gpu-pipeline="fp8-tile-n=128" -o - | FileCheck %s --check-prefix=NARROW
// RUN: not moe-opt %s --moe-gpu-pipeline="fp8-tile-n=256" 2>&1 | FileCheck %s --check-prefix=BAD-N
// RUN: moe-opt %s --moe-gpu-pipeline="fp8-stages=5" -o - | FileCheck %s --check-prefix=FIVE
// RUN: not moe-opt %s --moe-gpu-pipeline="fp8-stages=6" 2>&1 | FileCheck %s --check-prefix=SIX

// MANIFEST: moe.manifest = {entries = [{abi = "grouped_matmul_fp8.v1", {{.*}}format = "fp8_block", k = 7168 : i64,
// MANIFEST-SAME: name = "grouped_matmul_fp8block_16x64x128_s4_swapab_off32", rows_max = 16 : i64, rows_min = 1 : i64, swap_ab = true
// MANIFEST-SAME: name = "grouped_matmul_fp8block_64x128x128_s4_off32", rows_max = 64 : i64, rows_min = 17 : i64
// MANIFEST-SAME: name = "grouped_matmul_fp8block_128x192x128_s4_ws_off32", rows_max = 2147483647 : i64, rows_min = 65 : i64, {{.*}}threads = 384
// MANIFEST-SAME: n = 4096 : i64, name = "gate_up"
// MANIFEST: gpu.binary @moe_kernels
// MANIFEST-NOT: moe.dequantize

// The 128-row form is warp-specialized (warp-specialize=auto): the producer
// warpgroup gives registers back and issues the TMA loads, the consumers
// take registers and multiply, releasing stages by mbarrier arrivals. Its
// tile is 192 columns wide (fp8-tile-n), the 64-row form's 128.
// SASS: Function : grouped_matmul_fp8block_128x192x128_s4_ws_off32
// SASS: USETMAXREG.DEALLOC.CTAPOOL
// SASS: UTMALDG.3D
// SASS: USETMAXREG.TRY
// SASS-COUNT-4: QGMMA.64x192x32.F32.E4M3.E4M3
// SASS: SYNCS.ARRIVE.TRANS64.A1T0
// SWAP-SASS: Function : grouped_matmul_fp8block_16x64x128_s4_swapab_off32
// SWAP-SASS-COUNT-4: QGMMA.64x16x32.F32.E4M3.E4M3
// SWAP-SASS: UTMALDG.2D

// fp8-tile-n=128: the 128-row form as wide as the others.
// NARROW: name = "grouped_matmul_fp8block_64x128x128_s4_off32"
// NARROW-SAME: name = "grouped_matmul_fp8block_128x128x128_s4_ws_off32"
// BAD-N: error: moe-select-kernels: 'fp8-tile-n' must be 128 or 192, got 256

// fp8-stages=5: the FP8 prefill forms' pipelines alone (the bf16 128 x 256
// tile fits 4); the swap-AB form keeps its own.
// FIVE: name = "grouped_matmul_fp8block_16x64x128_s4_swapab_off32"
// FIVE-SAME: name = "grouped_matmul_fp8block_64x128x128_s5_off32"
// FIVE-SAME: name = "grouped_matmul_fp8block_128x192x128_s5_ws_off32"
// SIX: error: moe-select-kernels: 'fp8-stages' (6): the block-FP8 128x192x128 form needs 262144 bytes of shared memory, more than the 227 KiB (232448) of a block; it fits 2..5 stages

// No kernel spills: the K step's products and the f32 accumulator both stay
// in registers.
// REGS-NOT: LOCAL:{{[1-9]}}
// REGS-NOT: STACK:{{[1-9]}}
func.func @gate_up(%xq: tensor<?x7168xf8E4M3FN>, %xs: tensor<?x56xf32>,
                   %wq: tensor<256x4096x7168xf8E4M3FN>, %ws: tensor<256x32x56xf32>,
                   %off: tensor<257xi32>) -> tensor<?x4096xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x7168xf8E4M3FN>, tensor<?x56xf32> -> tensor<?x7168xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [128, 128], f32>
      : tensor<256x4096x7168xf8E4M3FN>, tensor<256x32x56xf32> -> tensor<256x4096x7168xbf16>
  %y = moe.grouped_matmul %x, %w, %off
      : (tensor<?x7168xbf16>, tensor<256x4096x7168xbf16>, tensor<257xi32>) -> tensor<?x4096xbf16>
  return %y : tensor<?x4096xbf16>
}
