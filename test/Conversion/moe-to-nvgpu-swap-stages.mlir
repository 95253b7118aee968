// The swap-AB forms' pipeline depth and K split, chosen per GEMM by
// default: 8 stages and two warpgroups sharing the K steps where K is long
// (few, long decode work items: Mixtral's down projection), `stages` and one
// warpgroup elsewhere; swap-ab-stages and swap-ab-split-k override them
// everywhere (test/Pipelines/gpu-pipeline-split-k.mlir).
// RUN: moe-opt %s --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s
// RUN: moe-opt %s --moe-select-kernels="swap-ab-stages=4" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=FIXED

// CHECK-DAG: gpu.func @grouped_matmul_bf16_16x64x64_s4_swapab_swiglu_off64(
// CHECK-DAG: gpu.func @grouped_matmul_bf16_16x64x64_s8_swapab_k2_off64(
// CHECK-DAG: gpu.func @grouped_matmul_bf16_128x256x64_s4_off64(
// FIXED-NOT: _s8_
func.func @mixtral_mlp(%rows: tensor<?x4096xbf16>, %off: tensor<9xi64>,
    %w13: tensor<8x28672x4096xbf16>, %w2: tensor<8x4096x14336xbf16>) -> tensor<?x4096xbf16> {
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2
      : (tensor<?x4096xbf16>, tensor<9xi64>, tensor<8x28672x4096xbf16>, tensor<8x4096x14336xbf16>) -> tensor<?x4096xbf16>
  return %y : tensor<?x4096xbf16>
}
