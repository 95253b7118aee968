// A bad rank count, and an exchange among several ranks given to the CPU
// pipeline (one process): each is an error that says what to do.
// RUN: not moe-opt %s --moe-expert-parallel=ranks=0 2>&1 | FileCheck %s --check-prefix=RANKS
// RUN: not moe-opt %s --moe-cpu-reference-pipeline 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: moe-opt %s --moe-split-exchanges --moe-cpu-reference-pipeline | FileCheck %s --check-prefix=SPLIT

// RANKS: error: --moe-expert-parallel: 'ranks' must be at least 1, got 0
// CPU: error: 'moe.dispatch' op exchanges rows among 2 ranks, which one CPU process cannot run: split the program at its exchanges (--moe-split-exchanges) and perform them between the stages
// SPLIT-LABEL: llvm.func @f_stage0(
// SPLIT-LABEL: llvm.func @f_stage1(
func.func @f(%rows: tensor<?x4xbf16>, %offsets: tensor<9xi64>) -> tensor<?x4xbf16> {
  %r, %i, %n = moe.dispatch %rows, %offsets ranks 2 : (tensor<?x4xbf16>, tensor<9xi64>) -> (tensor<?x4xbf16>, tensor<?x1xi32>, tensor<2xi64>)
  return %r : tensor<?x4xbf16>
}
