// Issue 25, class 8: moe ops are compiled from host functions; the GPU
// pipeline builds their kernels itself. A moe op inside a user's gpu.module
// used to end in "failed to legalize operation 'gpu.func'" at an unknown
// location (GPU) or be dropped with exit 0 (CPU); now the pipelines,
// --moe-check-placement and the GPU passes run alone refuse it, naming the
// op and the gpu.module. A user's gpu.module without moe ops beside the
// host functions is accepted (last case).
//
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-gpu-pipeline="format=isa" -o /dev/null 2>&1 | FileCheck %s --check-prefixes=GPU,ACCEPT
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-select-kernels -o /dev/null 2>&1 | FileCheck %s --check-prefixes=GPU,ACCEPT
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-select-kernels --convert-moe-to-nvgpu -o /dev/null 2>&1 | FileCheck %s --check-prefixes=GPU,ACCEPT
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-check-placement -o /dev/null 2>&1 | FileCheck %s --check-prefixes=GPU,ACCEPT
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --moe-cpu-reference-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=CPU
// Hand-written configurations reach --convert-moe-to-nvgpu's own check.
// RUN: not moe-opt %s --split-input-file --mlir-print-op-on-diagnostic=false --convert-moe-to-nvgpu -o /dev/null 2>&1 | FileCheck %s --check-prefix=CONVERT

// GPU: refusals-gpu-module.mlir:[[# @LINE + 7]]:12: error: 'moe.grouped_matmul' op is inside gpu.module @user: the GPU pipeline compiles the moe ops of the host functions (func.func) of the top-level module, and builds their kernels itself; move it into a host function
// GPU: refusals-gpu-module.mlir:[[# @LINE + 4]]:3: note: the enclosing gpu.module
// CPU: refusals-gpu-module.mlir:[[# @LINE + 5]]:12: error: 'moe.grouped_matmul' op is inside gpu.module @user: the CPU reference pipeline compiles the moe ops of the host functions (func.func) of the top-level module (a gpu.module's would be left unlowered); move it into a host function
// CONVERT: refusals-gpu-module.mlir:[[# @LINE + 4]]:12: error: 'moe.grouped_matmul' op is inside gpu.module @user
module attributes {gpu.container_module} {
  gpu.module @user {
    gpu.func @k(%rows: tensor<?x256xbf16>, %w: tensor<8x256x256xbf16>, %off: tensor<9xi32>) kernel {
      %y = moe.grouped_matmul %rows, %w, %off {moe.kernels = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 4>]>}
          : (tensor<?x256xbf16>, tensor<8x256x256xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
      gpu.return
    }
  }
}

// -----

// A func.func inside the gpu.module, beside a host function.
// GPU: error: 'moe.route' op is inside gpu.module @device_funcs
// CPU: error: 'moe.route' op is inside gpu.module @device_funcs
// CONVERT: error: 'moe.route' op is inside gpu.module @device_funcs
gpu.module @device_funcs {
  func.func @router(%logits: tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>) {
    %ids, %w = moe.route softmax_topk %logits top 2 {moe.kernels = #moe.kernel<chip = "sm_90a">} : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
    return %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
  }
}
func.func @host(%logits: tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>) {
  %ids, %w = moe.route softmax_topk %logits top 2 {moe.kernels = #moe.kernel<chip = "sm_90a">} : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// A layer in a gpu.module is refused as one op.
// GPU: error: 'moe.layer' op is inside gpu.module @layers
// GPU-NOT: error: 'moe.route' op is inside
// CPU: error: 'moe.layer' op is inside gpu.module @layers
module attributes {gpu.container_module} {
  gpu.module @layers {
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
}

// -----

// Accepted: a user's gpu.module without moe ops beside a host function's.
// ACCEPT-NOT: error
module attributes {gpu.container_module} {
  gpu.module @user {
    gpu.func @nothing() kernel {
      gpu.return
    }
  }
  func.func @router(%logits: tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>) {
    %ids, %w = moe.route softmax_topk %logits top 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
    return %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
  }
}
