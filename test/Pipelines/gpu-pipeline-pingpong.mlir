// --moe-gpu-pipeline="pingpong=1": the bf16 prefill GEMMs (forward and
// input gradient) as one ping-pong form past swap-AB's: two consumer
// warpgroups take alternate 64-row items behind a producer warpgroup
// (128-row items with tile-n=128).
// Block FP8 keeps its forms.
// RUN: moe-opt %s --moe-gpu-pipeline="pingpong=1 format=isa" -o %t.isa.mlir
// RUN: FileCheck %s --check-prefix=FORMS --input-file %t.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.isa.mlir %t.ptx
// RUN: awk '/[.]entry /{f = /grouped_matmul_bf16_64x256x64_s4_pp_off64[(]/} f' %t.ptx | FileCheck %s --check-prefix=PTX
// RUN: %ptxas -arch=sm_90a %t.ptx -o %t.cubin
// RUN: %cuobjdump --dump-resource-usage %t.cubin | FileCheck %s --check-prefix=REGS
// RUN: moe-opt %s --moe-gpu-pipeline="pingpong=1 stages=5 format=isa" -o - | FileCheck %s --check-prefix=FIVE
// RUN: moe-opt %s --moe-gpu-pipeline="pingpong=1 tile-n=128 format=isa" -o %t.128.isa.mlir
// RUN: FileCheck %s --check-prefix=FORMS128 --input-file %t.128.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.128.isa.mlir %t.128.ptx
// RUN: awk '/[.]entry /{f = /grouped_matmul_bf16_128x128x64_s4_pp_off64[(]/} f' %t.128.ptx | FileCheck %s --check-prefix=PTX128
// RUN: %ptxas -arch=sm_90a -v %t.128.ptx -o %t.128.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS128 --implicit-check-not=C75
// RUN: %cuobjdump --dump-resource-usage %t.128.cubin | FileCheck %s --check-prefix=REGS
// RUN: moe-opt %s --moe-gpu-pipeline="format=isa" -o - | FileCheck %s --check-prefix=OFF
// RUN: not moe-opt %s --moe-gpu-pipeline="pingpong=1 chip=sm_100a" 2>&1 | FileCheck %s --check-prefix=SM100

// FORMS: name = "grouped_matmul_bf16_16x64x64_s4_swapab_off64", rows_max = 16 : i64, rows_min = 1 : i64
// FORMS-SAME: name = "grouped_matmul_bf16_64x256x64_s4_pp_off64", rows_max = 2147483647 : i64, rows_min = 17 : i64, swap_ab = false, tensor_map_args = array<i64: 0, 1>, threads = 384
// FORMS: name = "grouped_matmul_bf16_64x256x64_s4_wkn_pp_off32", rows_max = 2147483647 : i64, rows_min = 1 : i64, swap_ab = false, tensor_map_args = array<i64: 0, 1>, threads = 384
// FORMS: name = "grouped_matmul_fp8block_128x192x128_s4_ws_off32"

// Each stage has one reader: its empty mbarrier counts 128 arrivals. The
// producer (tid 256..383) gives registers back; consumer warpgroup w starts
// at item blockIdx + w * gridDim and steps by 2 * gridDim, its first
// pipeline step w * numSteps; named barriers keep each epilogue to its own
// warpgroup (no CTA barrier after the set-up).
// PTX: .visible .entry grouped_matmul_bf16_64x256x64_s4_pp_off64(
// PTX: .maxntid 384, 1, 1
// PTX: mov.b32 [[READERS:%r[0-9]+]], 128;
// PTX: mbarrier.init.shared.b64 [{{.*}}], [[READERS]];
// PTX: setmaxnreg.dec.sync.aligned.u32 56;
// PTX: cp.async.bulk.tensor.2d
// PTX: setmaxnreg.inc.sync.aligned.u32 224;
// PTX: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// PTX: mbarrier.arrive.shared.b64
// PTX: bar.sync {{%r[0-9]+}}, 128;
// PTX-NOT: bar.sync 0;
// PTX: ret;

// No kernel spills within the consumers' 224 registers.
// REGS-NOT: LOCAL:{{[1-9]}}
// REGS-NOT: STACK:{{[1-9]}}

// With tile-n=128, 128 x 128 items: each consumer warpgroup holds two
// 64 x 128 accumulators (rows 0-63 and 64-127 of the stage's token tile),
// 8 wgmma per K step of which a whole step stays in flight; its 64-row
// form takes the experts of 17-64 rows. The dgrad (N-major weights) has
// the same two forms.
// FORMS128: name = "grouped_matmul_bf16_16x64x64_s4_swapab_off64", rows_max = 16 : i64, rows_min = 1 : i64
// FORMS128-SAME: name = "grouped_matmul_bf16_64x128x64_s4_pp_off64", rows_max = 64 : i64, rows_min = 17 : i64
// FORMS128-SAME: name = "grouped_matmul_bf16_128x128x64_s4_pp_off64", rows_max = 2147483647 : i64, rows_min = 65 : i64, swap_ab = false, tensor_map_args = array<i64: 0, 1>, threads = 384
// FORMS128: name = "grouped_matmul_bf16_64x128x64_s4_wkn_pp_off32", rows_max = 64 : i64, rows_min = 1 : i64
// FORMS128-SAME: name = "grouped_matmul_bf16_128x128x64_s4_wkn_pp_off32", rows_max = 2147483647 : i64, rows_min = 65 : i64
// The second accumulator's zeros are written before the pass's first
// wgmma fence, so ptxas serializes none of them (C7520).
// PTX128: .visible .entry grouped_matmul_bf16_128x128x64_s4_pp_off64(
// PTX128: mov.b32 {{.*}}, 0;
// PTX128: wgmma.fence.sync.aligned;
// PTX128-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// PTX128: wgmma.wait_group.sync.aligned 8;
// PTX128: wgmma.wait_group.sync.aligned 0;
// PTX128: ret;
// PTXAS128: Compiling entry function 'grouped_matmul_bf16_128x128x64_s4_pp_off64'

// Five stages of (64 + 256) x 64 bf16 and two staging tiles fit.
// FIVE: name = "grouped_matmul_bf16_64x256x64_s5_pp_off64"
// OFF-NOT: _pp_
// OFF: gpu.binary
// SM100: error: moe-select-kernels: chip=sm_100a has one kernel form (the tcgen05 MXFP8 GEMM's 128x128x128 tile, 4 stages), so these options would be ignored: pingpong

func.func @gate_up(%rows: tensor<?x4096xbf16>, %w: tensor<8x28672x4096xbf16>, %off: tensor<9xi64>) -> tensor<?x28672xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x4096xbf16>, tensor<8x28672x4096xbf16>, tensor<9xi64>) -> tensor<?x28672xbf16>
  return %y : tensor<?x28672xbf16>
}

func.func @dgrad(%g: tensor<?x2048xbf16>, %w: tensor<128x2048x768xbf16>, %off: tensor<129xi32>) -> tensor<?x768xbf16> {
  %dx = moe.grouped_dgrad %g, %w, %off
      : (tensor<?x2048xbf16>, tensor<128x2048x768xbf16>, tensor<129xi32>) -> tensor<?x768xbf16>
  return %dx : tensor<?x768xbf16>
}

func.func @fp8_gate_up(%xq: tensor<?x7168xf8E4M3FN>, %xs: tensor<?x56xf32>,
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
