// Issue 25, class 4: the pipelines compile the moe ops of the top-level
// module's functions. A moe op in a nested builtin.module used to be
// compiled to kernels with no manifest entry (GPU) or left unlowered (CPU),
// with exit 0; now each pipeline, --moe-check-placement and the GPU passes
// run alone refuse it, naming the op and the module. A nested module without
// moe ops is not theirs to refuse (last case).
//
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-gpu-pipeline="format=isa" -o /dev/null 2>&1 | FileCheck %s --check-prefixes=GPU,GPU-PIPE
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-select-kernels -o /dev/null 2>&1 | FileCheck %s --check-prefixes=GPU,GPU-PASS
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --convert-moe-to-nvgpu -o /dev/null 2>&1 | FileCheck %s --check-prefixes=GPU,GPU-PASS
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-check-placement -o /dev/null 2>&1 | FileCheck %s --check-prefixes=GPU,GPU-PASS
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-cpu-reference-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-check-placement=target=cpu -o /dev/null 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: not moe-opt %s --moe-check-placement=target=tpu -o /dev/null 2>&1 | FileCheck %s --check-prefix=TARGET

// GPU: refusals-nested-module.mlir:[[# @LINE + 5]]:10: error: 'moe.grouped_matmul' op is in the nested module @inner: the GPU pipeline compiles the moe ops of the top-level module's functions only (a nested module's would be left without a manifest entry); move the function into the top-level module
// GPU: refusals-nested-module.mlir:[[# @LINE + 2]]:1: note: the nested module
// CPU: refusals-nested-module.mlir:[[# @LINE + 3]]:10: error: 'moe.grouped_matmul' op is in the nested module @inner: the CPU reference pipeline compiles the moe ops of the top-level module's functions only (a nested module's would be left unlowered); move the function into the top-level module
module @inner {
  func.func @gm(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
    %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 4>]>}
        : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
    return %y : tensor<?x512xbf16>
  }
}
func.func @top(%logits: tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>) {
  %ids, %w = moe.route softmax_topk %logits top 2 {moe.kernels = #moe.kernel<chip = "sm_90a">}
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// An unnamed nested module, two levels down.
// GPU: error: 'moe.route' op is in the nested module: the GPU pipeline
// CPU: error: 'moe.route' op is in the nested module: the CPU reference pipeline
module {
  module {
    module {
      func.func @router(%logits: tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>) {
        %ids, %w = moe.route softmax_topk %logits top 2 {moe.kernels = #moe.kernel<chip = "sm_90a">}
            : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
        return %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
      }
    }
  }
}

// -----

// A layer is refused as a whole (its body goes where it goes).
// GPU: error: 'moe.layer' op is in the nested module @layers: the GPU pipeline
// GPU-NOT: error: 'moe.route'
// CPU: error: 'moe.layer' op is in the nested module @layers: the CPU reference pipeline
module @layers {
  func.func @layer(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>, %w13: tensor<8x1024x256xbf16>, %w2: tensor<8x256x512xbf16>) -> tensor<?x256xbf16> {
    %y = moe.layer : tensor<?x256xbf16> {
      %ids, %w = moe.route softmax_topk %logits top 2 renormalize : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
      %rows, %off, %slots = moe.permute %x, %ids : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi32>, tensor<?x2xi32>)
      %h = moe.expert_mlp silu %rows, %off, %w13, %w2 : (tensor<?x256xbf16>, tensor<9xi32>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>) -> tensor<?x256xbf16>
      %out = moe.unpermute %h, %slots weights %w : (tensor<?x256xbf16>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x256xbf16>
      moe.yield %out : tensor<?x256xbf16>
    }
    return %y : tensor<?x256xbf16>
  }
}
func.func private @host()

// -----

// A nested module without moe ops: no moe refusal (the GPU pipeline's
// extraction still refuses any module-level op but functions and kernels).
// GPU-PASS-NOT: error
// GPU-PIPE: error: 'builtin.module' op is neither a function nor a gpu.module
// GPU-PIPE-NOT: error
// CPU-NOT: error
module @plain {
  func.func @add(%a: tensor<4xf32>) -> tensor<4xf32> {
    return %a : tensor<4xf32>
  }
}
func.func @router(%logits: tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>) {
  %ids, %w = moe.route softmax_topk %logits top 2 {moe.kernels = #moe.kernel<chip = "sm_90a">}
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// TARGET: error: moe-check-placement: 'target' must be cpu or gpu, got 'tpu'
