// Issue 25, class 1: pass options whose size arithmetic would overflow (huge
// stages, tile sizes, split-K, thresholds) are refused before any arithmetic
// on them, naming the option and its valid range; values at the edge of each
// range are still accepted.
//
// Stages: [2, 64] by option, then what fits 227 KiB for the tile.
// RUN: not moe-opt %s --moe-select-kernels="stages=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=STAGES-HUGE
// RUN: not moe-opt %s --moe-select-kernels="stages=9223372036854775807" 2>&1 | FileCheck %s --check-prefix=STAGES-MAX
// RUN: not moe-opt %s --moe-select-kernels="stages=65" 2>&1 | FileCheck %s --check-prefix=STAGES-65
// RUN: not moe-opt %s --moe-select-kernels="stages=-4" 2>&1 | FileCheck %s --check-prefix=STAGES-NEG
// RUN: not moe-opt %s --moe-select-kernels="stages=64" 2>&1 | FileCheck %s --check-prefix=STAGES-64
// RUN: not moe-opt %s --moe-select-kernels="stages=5" 2>&1 | FileCheck %s --check-prefix=STAGES-5
// RUN: not moe-opt %s --moe-select-kernels="stages=99999999999999999999" 2>&1 | FileCheck %s --check-prefix=STAGES-PARSE
// RUN: moe-opt %s --moe-select-kernels="stages=4" | FileCheck %s --check-prefix=STAGES-4
// RUN: moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 swap-ab-split-k=1 tile-m=64 tile-n=128 stages=8" | FileCheck %s --check-prefix=STAGES-8
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 swap-ab-split-k=1 tile-m=64 tile-n=128 stages=9" 2>&1 | FileCheck %s --check-prefix=STAGES-9-MX
//
// swap-ab-stages: 0 (per GEMM) or [2, 64], then what fits.
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-stages=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=SWAP-HUGE
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-stages=1099511627776" 2>&1 | FileCheck %s --check-prefix=SWAP-2POW40
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-stages=14" 2>&1 | FileCheck %s --check-prefix=SWAP-14
// RUN: moe-opt %s --moe-select-kernels="swap-ab-split-k=1 swap-ab-stages=13" | FileCheck %s --check-prefix=SWAP-13
// A quantizing gate-up's swap-AB forms trim a deep pipeline to what fits;
// the option is still bounded before that.
// RUN: not moe-opt %s --moe-select-kernels="fp8-epilogue-quantize=1 swap-ab-stages=1099511627776" 2>&1 | FileCheck %s --check-prefix=SWAP-2POW40
//
// Tiles, split-K, cluster, thresholds.
// RUN: not moe-opt %s --moe-select-kernels="tile-m=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=TILE-M
// RUN: not moe-opt %s --moe-select-kernels="tile-n=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=TILE-N
// RUN: not moe-opt %s --moe-select-kernels="tile-k=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=TILE-K
// RUN: not moe-opt %s --moe-select-kernels="swap-ab=1 tile-m=4611686018427387904 tile-n=64" 2>&1 | FileCheck %s --check-prefix=SWAP-TILE
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-split-k=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=SPLIT
// RUN: not moe-opt %s --moe-select-kernels="cluster=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=CLUSTER
// RUN: not moe-opt %s --moe-select-kernels="fp8-tile-n=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=FP8-TILE
// RUN: not moe-opt %s --moe-select-kernels="fp8-stages=1" 2>&1 | FileCheck %s --check-prefix=FP8-STAGES
// RUN: not moe-opt %s --moe-select-kernels="swap-ab-max-rows=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=MAX-ROWS
// RUN: not moe-opt %s --moe-select-kernels="fp8-scatter-min-tokens=2147483648" 2>&1 | FileCheck %s --check-prefix=SCATTER
// RUN: not moe-opt %s --moe-select-kernels="fp8-scatter-min-tokens=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=SCATTER-HUGE
// RUN: moe-opt %s --moe-select-kernels="fp8-scatter-min-tokens=2147483647 swap-ab-max-rows=64" | FileCheck %s --check-prefix=EDGES
//
// sm_100a has one form: options that shape sm_90a forms would be ignored.
// RUN: not moe-opt %s --moe-select-kernels="chip=sm_100a stages=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=SM100-HUGE
// RUN: not moe-opt %s --moe-select-kernels="chip=sm_100a stages=3 tile-m=64 fp8-stages=5" 2>&1 | FileCheck %s --check-prefix=SM100-IGNORED
//
// The same through --moe-gpu-pipeline (its options are --moe-select-kernels').
// RUN: not moe-opt %s --moe-gpu-pipeline="stages=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=STAGES-HUGE
// RUN: not moe-opt %s --moe-gpu-pipeline="swap-ab-stages=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=SWAP-HUGE
// RUN: not moe-opt %s --moe-gpu-pipeline="fp8-scatter-min-tokens=2147483648" 2>&1 | FileCheck %s --check-prefix=SCATTER
//
// Hand-written forms for --convert-moe-to-nvgpu are bounded by the
// attributes' verifiers (test/Dialect/invalid-kernels.mlir).

// STAGES-HUGE: error: moe-select-kernels: 'stages' must be in [2, 64] (a pipelined K loop refills a stage after the step that read it, so it needs two; more never fit 227 KiB of shared memory), got 4611686018427387904
// STAGES-MAX: error: moe-select-kernels: 'stages' must be in [2, 64] {{.*}}, got 9223372036854775807
// STAGES-65: error: moe-select-kernels: 'stages' must be in [2, 64] {{.*}}, got 65
// STAGES-NEG: error: moe-select-kernels: 'stages' must be in [2, 64] {{.*}}, got -4
// STAGES-64: error: moe-select-kernels: 'stages' (64): the bf16 128x256x64 form needs 3162112 bytes of shared memory, more than the 227 KiB (232448) of a block; it fits 2..4 stages
// STAGES-5: error: moe-select-kernels: 'stages' (5): the bf16 128x256x64 form needs 262144 bytes of shared memory, more than the 227 KiB (232448) of a block; it fits 2..4 stages
// STAGES-PARSE: for the --stages option: '99999999999999999999' value invalid for long argument!
// STAGES-4: #moe.gemm_form<rows_min = 17, rows_max = 64, tile_m = 64, tile_n = 256, tile_k = 64, stages = 4>
// The MXFP8 form of that tile (its scales staged too) bounds the option.
// STAGES-8: #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 8>
// STAGES-9-MX: error: moe-select-kernels: 'stages' (9): the MXFP8 64x128x128 form needs 257024 bytes of shared memory, more than the 227 KiB (232448) of a block; it fits 2..8 stages
// SWAP-HUGE: error: moe-select-kernels: 'swap-ab-stages' must be in [2, 64] (0 chooses per GEMM; else the swap-AB forms' pipeline, which needs two stages), got 4611686018427387904
// SWAP-2POW40: error: moe-select-kernels: 'swap-ab-stages' must be in [2, 64] {{.*}}, got 1099511627776
// SWAP-14: error: moe-select-kernels: 'swap-ab-stages' (14): the MXFP8 64x64x128 swap-AB form needs 233472 bytes of shared memory, more than the 227 KiB (232448) of a block; it fits 2..13 stages
// SWAP-13: #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 13, swap_ab = true>
// TILE-M: error: moe-select-kernels: without swap-ab the tile must be 64 or 128 rows x 128 or 256 columns x 64, got 4611686018427387904x256x64
// TILE-N: error: moe-select-kernels: without swap-ab the tile must be 64 or 128 rows x 128 or 256 columns x 64, got 128x4611686018427387904x64
// TILE-K: error: moe-select-kernels: tile-k must be 64, got 4611686018427387904
// SWAP-TILE: error: moe-select-kernels: swap-ab needs tile-n = 64 and tile-m in {8, 16, 32, 64}, got tile-m = 4611686018427387904, tile-n = 64
// SPLIT: error: moe-select-kernels: 'swap-ab-split-k' must be 0 (chosen per GEMM), 1 or 2, got 4611686018427387904
// CLUSTER: error: moe-select-kernels: 'cluster' must be 1 or 2, got 4611686018427387904
// FP8-TILE: error: moe-select-kernels: 'fp8-tile-n' must be 128 or 192, got 4611686018427387904
// FP8-STAGES: error: moe-select-kernels: 'fp8-stages' must be in [2, 64] (a pipelined K loop refills a stage after the step that read it, so it needs two; more never fit 227 KiB of shared memory), got 1
// MAX-ROWS: error: moe-select-kernels: 'swap-ab-max-rows' must be in [0, 64] (WGMMA's N holds at most 64 tokens), got 4611686018427387904
// SCATTER: error: moe-select-kernels: 'fp8-scatter-min-tokens' must be 0 (no scatter kernel) or a token count in [1, 2147483647], got 2147483648
// SCATTER-HUGE: error: moe-select-kernels: 'fp8-scatter-min-tokens' must be 0 (no scatter kernel) or a token count in [1, 2147483647], got 4611686018427387904
// EDGES: #moe.gemm_form<rows_min = 1, rows_max = 64, tile_m = 64, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>
// SM100-HUGE: error: moe-select-kernels: 'stages' must be in [2, 64] {{.*}}, got 4611686018427387904
// SM100-IGNORED: error: moe-select-kernels: chip=sm_100a has one kernel form (the tcgen05 MXFP8 GEMM's 128x128x128 tile, 4 stages), so these options would be ignored: tile-m, stages, fp8-stages
func.func @gm(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

