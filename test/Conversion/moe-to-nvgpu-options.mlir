// Bad options of convert-moe-to-nvgpu end with a diagnostic.
// RUN: not moe-opt %s --convert-moe-to-nvgpu="chip=sm_100a" 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not moe-opt %s --convert-moe-to-nvgpu="tile-n=192" 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not moe-opt %s --convert-moe-to-nvgpu="stages=0" 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not moe-opt %s --convert-moe-to-nvgpu="stages=x" 2>&1 | FileCheck %s --check-prefix=PARSE
// RUN: not moe-opt %s --convert-moe-to-nvgpu="stages=10" 2>&1 | FileCheck %s --check-prefix=SMEM
// RUN: not moe-opt %s --convert-moe-to-nvgpu="swap-ab=1 tile-m=12 tile-n=64" 2>&1 | FileCheck %s --check-prefix=SWAP
// RUN: not moe-opt %s --convert-moe-to-nvgpu="tile-k=32" 2>&1 | FileCheck %s --check-prefix=TILEK
// RUN: moe-opt %s --convert-moe-to-nvgpu="stages=4" | FileCheck %s --check-prefix=FOUR

// CHIP: error: convert-moe-to-nvgpu: no kernels for chip 'sm_100a' yet (sm_90a only)
// TILE: error: convert-moe-to-nvgpu: without swap-ab the tile must be 64x128x64 or 64x256x64, got 64x192x64
// STAGES: error: convert-moe-to-nvgpu: 'stages' (0) must be at least 1 and fit 227 KiB of shared memory
// SMEM: error: convert-moe-to-nvgpu: 'stages' (10) must be at least 1 and fit 227 KiB of shared memory
// SWAP: error: convert-moe-to-nvgpu: swap-ab needs tile-n = 64 and tile-m in {8, 16, 32, 64}, got tile-m = 12, tile-n = 64
// TILEK: error: convert-moe-to-nvgpu: tile-k must be 64, got 32
// PARSE: for the --stages option: 'x' value invalid for long argument!
// FOUR: moe.dynamic_shared_bytes = 163840
// FOUR-COUNT-4: nvgpu.mbarrier.init
func.func @gm(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
