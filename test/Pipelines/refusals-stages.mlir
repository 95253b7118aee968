// Issue 25, class 2: every sm_90a GEMM form pipelines its K loop and refills
// a stage only after the step that read it (the normal form after a CTA
// barrier, the warp-specialized producer after the consumers release it,
// each split-K warpgroup after its own previous step): with one stage the
// next step would wait on a load issued after it. One stage is refused for
// every form, by option and in a hand-written form
// (test/Dialect/invalid-kernels.mlir); two are accepted for every form.
//
// RUN: not moe-opt %s --moe-select-kernels="stages=1" 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-stages=1" 2>&1 | FileCheck %s --check-prefix=SWAP-ONE
// RUN: not moe-opt %s --moe-select-kernels="swap-ab=1 tile-m=16 tile-n=64 stages=1" 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: not moe-opt %s --moe-gpu-pipeline="stages=1" 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: not moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="stages=1 warp-specialize=all" 2>&1 | FileCheck %s --check-prefix=ONE
// Split K needs two stages per warpgroup.
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-stages=2 swap-ab-split-k=2" 2>&1 | FileCheck %s --check-prefix=SPLIT-TWO
//
// Two stages: every form builds, with two stage buffers and mbarriers.
// RUN: moe-opt %s --moe-select-kernels="stages=2 swap-ab-stages=2 swap-ab-split-k=1 warp-specialize=all" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=BF16
// RUN: moe-opt %s --moe-select-kernels="stages=2 swap-ab=1 tile-m=16 tile-n=64" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=SWAP
// RUN: moe-opt %s --moe-select-kernels="stages=2 swap-ab-stages=4 swap-ab-split-k=2" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=SPLIT
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-select-kernels="stages=2 swap-ab-stages=2 swap-ab-split-k=1" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=FP8
// RUN: moe-opt %s --moe-quantize="format=mxfp8 scope=weights+activations" --moe-select-kernels="stages=2 swap-ab-stages=2" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=MX

// ONE: error: moe-select-kernels: 'stages' must be in [2, 64] (a pipelined K loop refills a stage after the step that read it, so it needs two; more never fit 227 KiB of shared memory), got 1
// SWAP-ONE: error: moe-select-kernels: 'swap-ab-stages' must be in [2, 64] (0 chooses per GEMM; else the swap-AB forms' pipeline, which needs two stages), got 1
// SPLIT-TWO: error: moe-select-kernels: swap-AB forms splitting K between 2 warpgroups need 'swap-ab-stages' to be a multiple of 2 of at least 4, got 2

// The swap-AB, 64-row and 128-row (producer warpgroup) forms.
// BF16-DAG: gpu.func @grouped_matmul_bf16_16x64x64_s2_swapab_off32({{.*}} moe.tile = array<i64: 16, 64, 64, 2>
// BF16-DAG: gpu.func @grouped_matmul_bf16_64x256x64_s2_off32({{.*}} moe.tile = array<i64: 64, 256, 64, 2>
// BF16-DAG: gpu.func @grouped_matmul_bf16_128x256x64_s2_ws_off32({{.*}} moe.tile = array<i64: 128, 256, 64, 2>
// SWAP: gpu.func @grouped_matmul_bf16_16x64x64_s2_swapab_off32(
// SWAP-COUNT-2: nvgpu.mbarrier.init
// SWAP-NOT: nvgpu.mbarrier.init
// SWAP: gpu.return
// SPLIT-DAG: gpu.func @grouped_matmul_bf16_16x64x64_s4_swapab_k2_off32(
// FP8-DAG: gpu.func @grouped_matmul_fp8block_16x64x128_s2_swapab_off32(
// FP8-DAG: gpu.func @grouped_matmul_fp8block_64x128x128_s2_off32(
// FP8-DAG: gpu.func @grouped_matmul_fp8block_128x192x128_s2_ws_off32(
// MX-DAG: gpu.func @grouped_matmul_mxfp8_16x64x128_s2_swapab_off32(
// MX-DAG: gpu.func @grouped_matmul_mxfp8_64x128x128_s2_ws_off32(
// MX-DAG: gpu.func @grouped_matmul_mxfp8_128x128x128_s2_ws_off32(
func.func @gm(%rows: tensor<?x8192xbf16>, %w: tensor<8x512x8192xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x8192xbf16>, tensor<8x512x8192xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
