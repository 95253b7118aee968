// Bad options of --moe-select-kernels end with a diagnostic; good ones pin the forms they give.
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 chip=sm_80" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 chip=sm_100a" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=SM100
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 tile-m=64 tile-n=192" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 stages=0" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 stages=x" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=PARSE
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 tile-m=64 stages=10" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=SMEM
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 swap-ab-stages=-1" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=SWAP-STAGES
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 fp8-scatter-min-tokens=-1" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=SCATTER
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 swap-ab-stages=40" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=SWAP-SMEM
// RUN: moe-opt %s --moe-select-kernels="swap-ab-stages=8" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=SWAP-EIGHT
// RUN: not moe-opt %s --moe-select-kernels="decode-max-tokens=17" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=DECODE
// RUN: not moe-opt %s --moe-select-kernels="decode-max-tokens=-1" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=DECODE-NEG
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 swap-ab=1 tile-m=12 tile-n=64" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=SWAP
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 tile-k=32" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=TILEK
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 tile-m=96" --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 tile-m=64 stages=4" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=FOUR
// RUN: moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 tile-m=128" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=TWO-WG

// CHIP: error: moe-select-kernels: no kernels for chip 'sm_80' yet (sm_90a, and sm_100a for the MXFP8 grouped_matmul)
// SM100: error: 'moe.grouped_matmul' op cannot be lowered to sm_100a yet: only MXFP8 operands are implemented
// TILE: error: moe-select-kernels: without swap-ab the tile must be 64 or 128 rows x 128 or 256 columns x 64, got 64x192x64
// STAGES: error: moe-select-kernels: 'stages' must be in [2, 64] (a pipelined K loop refills a stage after the step that read it, so it needs two; more never fit 227 KiB of shared memory), got 0
// SMEM: error: moe-select-kernels: 'stages' (10): the bf16 64x256x64 form needs 417792 bytes of shared memory, more than the 227 KiB (232448) of a block; it fits 2..5 stages
// DECODE: error: moe-select-kernels: 'decode-max-tokens' must be in [0, swap-ab-max-rows = 16] (the decode kernel runs the swap-AB tiles), got 17
// DECODE-NEG: error: moe-select-kernels: 'decode-max-tokens' must be in [0, swap-ab-max-rows = 16] (the decode kernel runs the swap-AB tiles), got -1
// SCATTER: error: moe-select-kernels: 'fp8-scatter-min-tokens' must be 0 (no scatter kernel) or a token count in [1, 2147483647], got -1
// SWAP-STAGES: error: moe-select-kernels: 'swap-ab-stages' must be in [2, 64] (0 chooses per GEMM; else the swap-AB forms' pipeline, which needs two stages), got -1
// SWAP-SMEM: error: moe-select-kernels: 'swap-ab-stages' (40): the bf16 64x64x64 swap-AB form needs 655360 bytes of shared memory, more than the 227 KiB (232448) of a block; it fits 2..14 stages
// The swap-AB form gets its own pipeline depth; the others keep `stages`.
// SWAP-EIGHT: gpu.func @grouped_matmul_bf16_16x64x64_s8_swapab_off32(
// SWAP-EIGHT: gpu.func @grouped_matmul_bf16_64x256x64_s4_off32(
// SWAP: error: moe-select-kernels: swap-ab needs tile-n = 64 and tile-m in {8, 16, 32, 64}, got tile-m = 12, tile-n = 64
// TILEK: error: moe-select-kernels: tile-k must be 64, got 32
// PARSE: for the --stages option: 'x' value invalid for long argument!
// ROWS: error: moe-select-kernels: without swap-ab the tile must be 64 or 128 rows x 128 or 256 columns x 64, got 96x256x64
// FOUR: moe.dynamic_shared_bytes = 172032
// FOUR-COUNT-4: nvgpu.mbarrier.init
// A 128-row tile: two warpgroups (256 threads) share each weights tile and
// multiply 64 token rows each; 4 stages of (128 + 256) x 64 bf16.
// TWO-WG: gpu.func @grouped_matmul_bf16_128x256x64_s4_off32
// TWO-WG-SAME: known_block_size = array<i32: 256, 1, 1>
// TWO-WG-SAME: moe.dynamic_shared_bytes = 212992
// TWO-WG: nvgpu.tma.async.load {{.*}} : <tensor = memref<128x64xbf16, #gpu.address_space<workgroup>>
// TWO-WG: arith.muli %{{.*}}, %c8192
// TWO-WG-COUNT-4: nvgpu.warpgroup.mma {{.*}} : <tensor = memref<64x16xbf16, #gpu.address_space<workgroup>>>, <tensor = memref<16x256xbf16, #gpu.address_space<workgroup>>>, <fragmented = vector<64x256xf32>>
// The epilogue leaves the stage buffers to the next tile's loads: each
// warpgroup stages its accumulator fragment as bf16 in a 64x64 tile of its
// own past the 4 stages, four column chunks, synchronised on named barriers.
// TWO-WG: builtin.unrealized_conversion_cast %{{.*}} : !nvgpu.warpgroup.accumulator<fragmented = vector<64x256xf32>> to !llvm.struct<(struct<(f32,
// TWO-WG: memref.view %{{.*}} : memref<212992xi8, #gpu.address_space<workgroup>> to memref<64x64xbf16, #gpu.address_space<workgroup>>
// TWO-WG-COUNT-16: vector.store %{{.*}} {alignment = 4 : i64} : memref<64x64xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// TWO-WG: nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// TWO-WG-NOT: nvgpu.warpgroup.mma.store
func.func @gm(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
