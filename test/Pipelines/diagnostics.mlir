// Diagnostics a user meets first, each short and pointing at the fix.
// A misspelt pipeline option lists the valid ones; a pipeline without
// options says so.
// RUN: not moe-opt %s --moe-gpu-pipeline="tile-mm=64" 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not moe-opt %s --moe-cpu-reference-pipeline="tile-m=64" 2>&1 | FileCheck %s --check-prefix=NO-OPTIONS
// OPTION: error: moe-gpu-pipeline: the options are chip, cluster, decode-max-tokens, format, {{.*}}, tile-m, tile-n, tma-store, warp-specialize (got 'tile-mm=64')
// NO-OPTIONS: error: moe-cpu-reference-pipeline: it takes no options (got 'tile-m=64')

// The GPU pipeline finds the ptxas it will run before it runs anything; PTX
// text needs none.
// RUN: env CUDA_ROOT=%t.no-cuda PATH=%t.no-path not moe-opt %s --moe-gpu-pipeline 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: env CUDA_ROOT=%t.no-cuda PATH=%t.no-path moe-opt %s --moe-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=ISA
// PTXAS: error: moe-gpu-pipeline: format=bin runs ptxas, which is neither on $PATH nor in the CUDA toolkit '{{.*}}no-cuda' ($CUDA_ROOT, $CUDA_HOME or $CUDA_PATH, else the one found at build time): install CUDA 12.3 or later, set CUDA_ROOT, or ask for PTX text with format=isa
// ISA: gpu.binary @moe_kernels

// A diagnostic names the op; the op itself (here the function, whose
// printout could be a whole layer) is printed only when asked for.
// RUN: not moe-opt %S/Inputs/lone-shared-expert.mlir --moe-route-shared-experts 2>&1 | FileCheck %s --check-prefix=QUIET
// RUN: not moe-opt %S/Inputs/lone-shared-expert.mlir --moe-route-shared-experts --mlir-print-op-on-diagnostic 2>&1 | FileCheck %s --check-prefix=LOUD
// QUIET: error: 'moe.shared_mlp' op --moe-route-shared-experts: its result must be only the 'shared' addend of one moe.unpermute
// QUIET-NOT: see current operation
// LOUD: see current operation

func.func @gemm(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi64>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi64>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

