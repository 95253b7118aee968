// --moe-gpu-pipeline="tma-store=1": the prefill forms with a bf16 output
// hand each staged 64 x 64 tile whose rows are all the expert's to one TMA
// store through an out tensor map, their third parameter; the swap-AB forms,
// a quantizing gate-up and outputs whose columns are not a multiple of 8
// keep their stores.
// RUN: moe-opt %s --moe-gpu-pipeline="tma-store=1 format=isa" -o %t.isa.mlir
// RUN: FileCheck %s --check-prefix=FORMS --input-file %t.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.isa.mlir %t.ptx
// RUN: awk '/[.]entry /{f = /grouped_matmul_bf16_128x256x64_s4_tmastore_off64[(]/} f' %t.ptx | FileCheck %s --check-prefix=PTX
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=C75
// RUN: %cuobjdump --dump-resource-usage %t.cubin | FileCheck %s --check-prefix=REGS
// RUN: moe-opt %s --moe-gpu-pipeline="tma-store=1 format=isa" --mlir-print-ir-after=convert-moe-to-nvgpu -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLAN
// RUN: moe-opt %s --moe-gpu-pipeline="format=isa" -o - | FileCheck %s --check-prefix=OFF
// RUN: not moe-opt %s --moe-gpu-pipeline="tma-store=1 chip=sm_100a" 2>&1 | FileCheck %s --check-prefix=SM100

// FORMS: name = "grouped_matmul_bf16_16x64x64_s4_swapab_off64", rows_max = 16 : i64, rows_min = 1 : i64, swap_ab = true, tensor_map_args = array<i64: 0, 1>
// FORMS-SAME: name = "grouped_matmul_bf16_64x256x64_s4_tmastore_off64", rows_max = 64 : i64, rows_min = 17 : i64, swap_ab = false, tensor_map_args = array<i64: 0, 1, 2>
// FORMS-SAME: name = "grouped_matmul_bf16_128x256x64_s4_tmastore_off64", rows_max = 2147483647 : i64, rows_min = 65 : i64, swap_ab = false, tensor_map_args = array<i64: 0, 1, 2>
// 1004 output columns: rows of 2008 bytes, no tensor map.
// FORMS: name = "grouped_matmul_bf16_128x256x64_s4_off64", rows_max = 2147483647 : i64, rows_min = 65 : i64, swap_ab = false, tensor_map_args = array<i64: 0, 1>
// FORMS: name = "grouped_matmul_bf16_128x256x64_s4_wkn_tmastore_off32", rows_max = 2147483647 : i64, rows_min = 65 : i64
// Block FP8 with a bf16 output stores by TMA too.
// FORMS: name = "grouped_matmul_fp8block_128x192x128_s4_ws_tmastore_off32"

// The out tensor map is the launch's third parameter: out [M, 28672] as
// boxes of 64 x 64.
// PLAN: params = "tmap:rows:bf16:[4096,M]:[8192]:[64,64];tmap:weights:bf16:[4096,28672,8]:[8192,234881024]:[64,256,1];tmap:out:bf16:[28672,M]:[57344]:[64,64];mem:offsets[9];mem:out[M,28672];
// PLAN-SAME: params = "tmap:rows:bf16:[4096,M]:[8192]:[64,128];tmap:weights:bf16:[4096,28672,8]:[8192,234881024]:[64,256,1];tmap:out:bf16:[28672,M]:[57344]:[64,64];mem:offsets[9];mem:out[M,28672];

// The kernel takes three tensor maps by value. Per 64-column chunk each
// thread's staging stores are fenced for the async proxy before its
// warpgroup's barrier; one thread issues the TMA store and commits it; the
// staging tile is rewritten after wait_group.read (the last chunk's wait is
// the next item's first step), and the CTA exits after one more.
// PTX: .visible .entry grouped_matmul_bf16_128x256x64_s4_tmastore_off64(
// PTX-COUNT-3: .param .align 64 .b8 grouped_matmul_bf16_128x256x64_s4_tmastore_off64_param_{{[0-2]}}[128],
// PTX: prefetch.param.tensormap
// PTX: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// PTX: cp.async.bulk.wait_group.read 0;
// PTX-NEXT: $L__
// PTX: bar.sync {{%r[0-9]+}}, 128;
// PTX: st.shared
// PTX: fence.proxy.async.shared::cta;
// PTX-NEXT: bar.sync {{%r[0-9]+}}, 128;
// PTX: cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [{{%rd[0-9]+}}, {{{%r[0-9]+}}, {{%r[0-9]+}}}], [{{%rd[0-9]+}}];
// PTX-NEXT: cp.async.bulk.commit_group;
// PTX: cp.async.bulk.wait_group.read 0;
// PTX: ret;
// PTXAS: Compiling entry function 'grouped_matmul_bf16_128x256x64_s4_tmastore_off64' for 'sm_90a'
// REGS-NOT: LOCAL:{{[1-9]}}
// REGS-NOT: STACK:{{[1-9]}}

// OFF-NOT: tmastore
// OFF-NOT: cp.async.bulk.tensor.2d.global.shared::cta

// SM100: error: moe-select-kernels: chip=sm_100a has one kernel form (the tcgen05 MXFP8 GEMM's 128x128x128 tile, 4 stages), so these options would be ignored: tma-store

func.func @gate_up(%rows: tensor<?x4096xbf16>, %w: tensor<8x28672x4096xbf16>, %off: tensor<9xi64>) -> tensor<?x28672xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x4096xbf16>, tensor<8x28672x4096xbf16>, tensor<9xi64>) -> tensor<?x28672xbf16>
  return %y : tensor<?x28672xbf16>
}

func.func @odd_columns(%rows: tensor<?x512xbf16>, %w: tensor<8x1004x512xbf16>, %off: tensor<9xi64>) -> tensor<?x1004xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x512xbf16>, tensor<8x1004x512xbf16>, tensor<9xi64>) -> tensor<?x1004xbf16>
  return %y : tensor<?x1004xbf16>
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
