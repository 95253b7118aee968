// The swap-AB forms' pipeline depth, chosen per GEMM by default: 8 stages
// where K is long (few, long decode work items: Mixtral's down projection),
// `stages` elsewhere; a swap-ab-stages value overrides it everywhere.
// RUN: moe-opt %s --moe-swap-ab --convert-moe-to-nvgpu | FileCheck %s
// RUN: moe-opt %s --moe-swap-ab --convert-moe-to-nvgpu="swap-ab-stages=4" | FileCheck %s --check-prefix=FIXED

// CHECK-DAG: gpu.func @grouped_matmul_bf16_16x64x64_s4_swapab_swiglu_off64(
// CHECK-DAG: gpu.func @grouped_matmul_bf16_16x64x64_s8_swapab_off64(
// CHECK-DAG: gpu.func @grouped_matmul_bf16_128x256x64_s4_off64(
// FIXED-NOT: _s8_
func.func @mixtral_mlp(%rows: tensor<?x4096xbf16>, %off: tensor<9xi64>,
    %w13: tensor<8x28672x4096xbf16>, %w2: tensor<8x4096x14336xbf16>) -> tensor<?x4096xbf16> {
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2
      : (tensor<?x4096xbf16>, tensor<9xi64>, tensor<8x28672x4096xbf16>, tensor<8x4096x14336xbf16>) -> tensor<?x4096xbf16>
  return %y : tensor<?x4096xbf16>
}
