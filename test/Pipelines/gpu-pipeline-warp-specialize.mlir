// --moe-gpu-pipeline="warp-specialize=...": which 128-row GEMM forms get a
// producer warpgroup (auto: block FP8 only; all: bf16 too; none).
// RUN: moe-opt %s --moe-gpu-pipeline="warp-specialize=all format=isa" -o %t.isa.mlir
// RUN: FileCheck %s --check-prefix=ALL --input-file %t.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.isa.mlir %t.ptx
// RUN: awk '/[.]entry /{f = /grouped_matmul_bf16_128x256x64_s4_ws_off64[(]/} f' %t.ptx | FileCheck %s --check-prefix=PTX
// RUN: %ptxas -arch=sm_90a %t.ptx -o %t.cubin
// RUN: %cuobjdump --dump-resource-usage %t.cubin | FileCheck %s --check-prefix=REGS
// RUN: moe-opt %s --moe-gpu-pipeline="format=isa" -o - | FileCheck %s --check-prefix=AUTO
// RUN: moe-opt %s --moe-gpu-pipeline="warp-specialize=none format=isa" -o - | FileCheck %s --check-prefix=NONE
// RUN: not moe-opt %s --moe-gpu-pipeline="warp-specialize=yes" 2>&1 | FileCheck %s --check-prefix=BAD

// ALL: name = "grouped_matmul_bf16_64x256x64_s4_off64", rows_max = 64 : i64, rows_min = 17 : i64, swap_ab = false, tensor_map_args = array<i64: 0, 1>, threads = 128
// ALL-SAME: name = "grouped_matmul_bf16_128x256x64_s4_ws_off64", rows_max = 2147483647 : i64, rows_min = 65 : i64, swap_ab = false, tensor_map_args = array<i64: 0, 1>, threads = 384
// ALL-SAME: name = "grouped_matmul_fp8block_128x192x128_s4_ws_off32", rows_max = 2147483647 : i64, rows_min = 65 : i64, swap_ab = false, tensor_map_args = array<i64: 0, 1>, threads = 384

// The producer (the third warpgroup) gives registers back and loads each
// stage once the consumers' 256 arrivals on its empty mbarrier released it;
// the consumers take registers, wait for full stages and arrive.
// PTX: .visible .entry grouped_matmul_bf16_128x256x64_s4_ws_off64(
// PTX: .maxntid 384, 1, 1
// PTX: mov.b32 {{.*}}, 256;
// PTX: mbarrier.init.shared.b64
// PTX: setmaxnreg.dec.sync.aligned.u32 56;
// PTX: mbarrier.try_wait.parity
// PTX: cp.async.bulk.tensor.2d
// PTX: setmaxnreg.inc.sync.aligned.u32 224;
// PTX: wgmma.mma_async
// PTX: mbarrier.arrive.shared.b64
// PTX-NOT: bar.sync 0;
// PTX: ret;

// No kernel spills within the consumers' 224 registers.
// REGS-NOT: LOCAL:{{[1-9]}}
// REGS-NOT: STACK:{{[1-9]}}

// AUTO-NOT: bf16_128x256x64_s4_ws
// AUTO: name = "grouped_matmul_fp8block_128x192x128_s4_ws_off32"
// NONE-NOT: _ws_
// NONE: gpu.binary
// BAD: error: moe-select-kernels: 'warp-specialize' must be auto, all or none, got 'yes'

func.func @gate_up(%rows: tensor<?x4096xbf16>, %w: tensor<8x28672x4096xbf16>, %off: tensor<9xi64>) -> tensor<?x28672xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x4096xbf16>, tensor<8x28672x4096xbf16>, tensor<9xi64>) -> tensor<?x28672xbf16>
  return %y : tensor<?x28672xbf16>
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
