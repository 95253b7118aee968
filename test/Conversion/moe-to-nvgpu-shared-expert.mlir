// A shared expert runs on the GPU as routed experts of its layer
// (--moe-route-shared-experts) or, in a moe.program, as grouped ops of one
// group (--moe-expand-shared-mlp); --moe-gpu-pipeline runs both first. Given
// one anyway, --moe-select-kernels and --convert-moe-to-nvgpu refuse
// moe.shared_mlp and a layer holding one, naming the op, rather than compile
// the routed experts and drop the shared one. (The CPU reference pipeline
// runs them: test/Execution/layer-shared-*.mlir.) The combine adds a
// 'shared' addend: an entry its plan alone describes (planned.v1).
// RUN: not moe-opt %s --split-input-file --moe-select-kernels --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=SELECT
// RUN: not moe-opt %s --split-input-file --convert-moe-to-nvgpu --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=CONVERT
// RUN: not moe-opt %s --split-input-file --convert-moe-to-nvgpu --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=SHARED

// SELECT: error: 'moe.shared_mlp' op cannot be lowered to sm_90a yet: the shared expert runs on the GPU as routed experts of its layer (--moe-route-shared-experts) or, in a moe.program, as grouped ops of one group (--moe-expand-shared-mlp); --moe-gpu-pipeline runs both
// CONVERT: error: 'moe.shared_mlp' op cannot be lowered to the GPU yet: the shared expert runs on the GPU as routed experts of its layer (--moe-route-shared-experts) or, in a moe.program, as grouped ops of one group (--moe-expand-shared-mlp); --moe-gpu-pipeline runs both
func.func @shared_mlp(%x: tensor<?x256xbf16>, %w13: tensor<512x256xbf16>, %w2: tensor<256x256xbf16>) -> tensor<?x256xbf16> {
  %s = moe.shared_mlp silu %x, %w13, %w2
      : (tensor<?x256xbf16>, tensor<512x256xbf16>, tensor<256x256xbf16>) -> tensor<?x256xbf16>
  return %s : tensor<?x256xbf16>
}

// -----

// A layer as --moe-fuse-layer forms it with a DeepSeek-style shared expert,
// its routed parts configured as --moe-select-kernels would: the shared
// expert and the layer itself are refused (the layer no longer reaches its
// lowering, which assumed the layer.v1 chain).
// SELECT: error: 'moe.shared_mlp' op cannot be lowered to sm_90a yet
// SELECT: error: 'moe.layer' op cannot be lowered to sm_90a yet: a shared expert (moe.shared_mlp, or an unpermute with a 'shared' addend) runs in layer.v1 as routed experts: run --moe-route-shared-experts first
// CONVERT: error: 'moe.shared_mlp' op cannot be lowered to the GPU yet
// CONVERT: error: 'moe.layer' op cannot be lowered to the GPU yet: a shared expert (moe.shared_mlp, or an unpermute with a 'shared' addend) runs in layer.v1 as routed experts: run --moe-route-shared-experts first
func.func @layer(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>,
                 %w13: tensor<8x1024x256xbf16>, %w2: tensor<8x256x512xbf16>,
                 %sw13: tensor<512x256xbf16>, %sw2: tensor<256x256xbf16>) -> tensor<?x256xbf16> {
  %y = moe.layer : tensor<?x256xbf16> {
    %ids, %w = moe.route softmax_topk %logits top 2 renormalize {moe.kernels = #moe.kernel<chip = "sm_90a">}
        : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
    %rows, %offsets, %slots = moe.permute %x, %ids {moe.kernels = #moe.permute_kernels<chip = "sm_90a">}
        : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x2xi64>)
    %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2 {moe.kernels = #moe.expert_mlp_kernels<
        gate_up = <chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>]>,
        down = <chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>]>>}
        : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>) -> tensor<?x256xbf16>
    %s = moe.shared_mlp silu %x, %sw13, %sw2
        : (tensor<?x256xbf16>, tensor<512x256xbf16>, tensor<256x256xbf16>) -> tensor<?x256xbf16>
    %o = moe.unpermute %h, %slots weights %w shared %s {moe.kernels = #moe.kernel<chip = "sm_90a">}
        : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
    moe.yield %o : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}

// -----

// A layer's body that is not the layer.v1 chain (here: no expert MLP) is
// refused by convert-moe-to-nvgpu too, not lowered as if it were (it
// crashed there before).
// SELECT: error: 'moe.layer' op cannot be lowered to sm_90a yet: the body must be (moe.route,) moe.permute, (moe.quantize, moe.dequantize, or moe.fake_quantize,) moe.expert_mlp and moe.unpermute
// CONVERT: error: 'moe.layer' op cannot be lowered to the GPU yet: the body must be (moe.route,) moe.permute, (moe.quantize, moe.dequantize, or moe.fake_quantize,) moe.expert_mlp and moe.unpermute
func.func @not_a_chain(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>) -> tensor<?x256xbf16> {
  %y = moe.layer : tensor<?x256xbf16> {
    %ids, %w = moe.route softmax_topk %logits top 2 renormalize {moe.kernels = #moe.kernel<chip = "sm_90a">}
        : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
    %rows, %offsets, %slots = moe.permute %x, %ids {moe.kernels = #moe.permute_kernels<chip = "sm_90a">}
        : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x2xi64>)
    %o = moe.unpermute %rows, %slots weights %w {moe.kernels = #moe.kernel<chip = "sm_90a">}
        : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x256xbf16>
    moe.yield %o : tensor<?x256xbf16>
  }
  return %y : tensor<?x256xbf16>
}

// -----

// The combine with an addend from anywhere: the kernel adds it to the f32
// sum before the rounding; unpermute.v2's arguments are fixed, so the entry
// is planned.v1 with the addend as the argument 'shared'.
// SHARED-LABEL: func.func @unpermute_shared(
// SHARED: moe.unpermute
// SHARED-SAME: abi = "planned.v1"
// SHARED-SAME: op = "moe.unpermute"
// SHARED-SAME: {align = 16 : i64, dims = "T,H", dtype = "bf16", name = "shared", role = "in"}
// SHARED-SAME: params = "mem:rows[M,H];mem:slots[T,2];mem:weights[T,2];mem:shared[T,H];mem:out[T,H]"
// SHARED-SAME: shared = true
// SHARED: gpu.func @moe_unpermute_k2_slots64_weighted_shared(
func.func @unpermute_shared(%rows: tensor<?x?xbf16>, %slots: tensor<?x2xi64>, %w: tensor<?x2xf32>,
                            %s: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %y = moe.unpermute %rows, %slots weights %w shared %s {moe.kernels = #moe.kernel<chip = "sm_90a">}
      : (tensor<?x?xbf16>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %y : tensor<?x?xbf16>
}
