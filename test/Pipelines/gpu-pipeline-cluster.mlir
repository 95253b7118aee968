// --moe-gpu-pipeline="cluster=2": the normal (prefill) forms run as 2-CTA
// clusters sharing each row tile; the swap-AB form stays single.
// RUN: moe-opt %s --moe-gpu-pipeline="cluster=2 format=isa" -o %t.isa.mlir
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file %t.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.isa.mlir %t.ptx
// RUN: awk '/[.]entry /{f = /grouped_matmul_bf16_128x256x64_s4_c2_off64[(]/} f' %t.ptx > %t.c2.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file %t.c2.ptx
// RUN: awk '/[.]entry /{f = /grouped_matmul_bf16_16x64x64_s4_swapab_off64[(]/} f' %t.ptx | FileCheck %s --check-prefix=SWAP
// RUN: %ptxas -arch=sm_90a %t.ptx -o %t.cubin
// RUN: %cuobjdump -sass -fun grouped_matmul_bf16_128x256x64_s4_c2_off64 %t.cubin | FileCheck %s --check-prefix=SASS
// The block-FP8 forms take the option too.
// RUN: moe-opt %s --moe-gpu-pipeline="cluster=2 format=isa" -o - | FileCheck %s --check-prefix=FP8
// Without the option (the default) nothing is clustered.
// RUN: moe-opt %s --moe-gpu-pipeline="format=isa" -o - | FileCheck %s --check-prefix=SINGLE
// RUN: not moe-opt %s --moe-gpu-pipeline="cluster=3" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 cluster=0" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=ZERO

// MANIFEST: name = "grouped_matmul_bf16_16x64x64_s4_swapab_off64", rows_max = 16 : i64, rows_min = 1 : i64, swap_ab = true
// MANIFEST-SAME: {cluster = 2 : i64, {{.*}}name = "grouped_matmul_bf16_64x256x64_s4_c2_off64", rows_max = 64 : i64, rows_min = 17
// MANIFEST-SAME: {cluster = 2 : i64, {{.*}}name = "grouped_matmul_bf16_128x256x64_s4_c2_off64", {{.*}}rows_min = 65 : i64, {{.*}}threads = 256

// The kernel declares its cluster; the even CTA multicasts each stage's row
// tile into both, and stages are freed by a cluster barrier (in the K loop
// with a relaxed arrival, after it, at start-up and before leaving).
// PTX: .visible .entry grouped_matmul_bf16_128x256x64_s4_c2_off64(
// PTX: .explicitcluster
// PTX: .reqnctapercluster 2, 1, 1
// PTX: mov.u32 {{.*}}%cluster_ctarank;
// PTX: barrier.cluster.arrive.aligned;
// PTX-NEXT: barrier.cluster.wait.aligned;
// PTX: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
// PTX: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [
// PTX: wgmma.mma_async
// PTX: barrier.cluster.arrive.relaxed.aligned;
// PTX-NEXT: barrier.cluster.wait.aligned;
// PTX: barrier.cluster.arrive.aligned;
// PTX-NEXT: barrier.cluster.wait.aligned;
// PTX-NOT: .entry
// PTX: ret;

// SWAP: .entry grouped_matmul_bf16_16x64x64_s4_swapab_off64(
// SWAP-NOT: reqnctapercluster
// SWAP-NOT: barrier.cluster
// SWAP-NOT: multicast
// SWAP: ret;

// SASS: Function : grouped_matmul_bf16_128x256x64_s4_c2_off64
// SASS: UTMALDG.2D.MULTICAST
// SASS: HGMMA.64x256x16.F32.BF16
// SASS: UCGABAR_ARV

// FP8: name = "grouped_matmul_fp8block_128x128x128_s4_c2_off32"
// FP8-SAME: rows_min = 65

// SINGLE-NOT: cluster
// SINGLE: gpu.binary

// BAD: error: moe-select-kernels: 'cluster' must be 1 or 2, got 3
// ZERO: error: moe-select-kernels: 'cluster' must be 1 or 2, got 0

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
