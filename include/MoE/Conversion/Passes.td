//===- Passes.td - moe to other dialects -------------------*- tablegen -*-===//

#ifndef MOE_CONVERSION_PASSES_TD
#define MOE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMoEToLinalg : Pass<"convert-moe-to-linalg"> {
  let summary = "Lower moe ops to linalg, tensor, scf, arith and math on "
                "tensors: the executable reference semantics";
  let description = [{
    Gives every moe op its meaning in upstream dialects, on tensors, so that
    one-shot bufferization and the LLVM lowering make it runnable on the CPU
    (`--moe-cpu-reference-pipeline`). Written for clarity, not speed:
    routing is an iterative arg-max per token, permutation a counting sort
    in `scf.for` loops, each expert's matmul a `linalg.generic` on its
    dynamic row range, FP8 encoding and decoding bit manipulation on i32.
    Fused ops are expanded first. Any moe op left afterwards is an error.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def ConvertMoEToNVGPU : Pass<"convert-moe-to-nvgpu", "::mlir::ModuleOp"> {
  let summary = "Build sm_90a kernels (TMA, mbarrier, WGMMA) for moe ops";
  let description = [{
    For every `moe.grouped_matmul` (bf16 rows and weights, bf16 result, an
    optional row scale, no bias yet) builds a grouped GEMM kernel in
    `gpu.module @moe_kernels`, from upstream gpu/nvgpu/nvvm ops: a device-side
    tile scheduler over the expert offsets (clamped as on the CPU), TMA loads
    with 128-byte swizzle into `stages` shared-memory buffers completing on
    mbarriers, `nvgpu.warpgroup.mma` with f32 accumulation (one warpgroup
    per 64 token rows of the tile, sharing the weights tile), and an
    epilogue that writes only the rows of the tile's own expert.

    A `moe.expert_mlp` (silu, no biases yet) becomes two such GEMMs: the
    gate-up kernel loads each tile's gate rows and their up rows (N / 2
    further) side by side and stores silu(gate) * up from its registers, so
    the [M, 2I] intermediate is never written; the down kernel multiplies
    each row by its routing weight (the row scale) in its epilogue. Its
    `moe.launch` is an array of the two parts, `gate_up` and `down`.

    `moe.route` (f32 or bf16 logits, at most 512 experts, top-k at most 32)
    becomes a routing kernel, one warp per token: scores, the correction
    bias, group-limited selection and top-k by warp shuffles, ties to the
    lower expert. `moe.unpermute` (bf16) becomes a combine kernel, one CTA
    per token summing its rows in f32, 16 bytes per thread. `moe.permute`
    (bf16 tokens, at most 256 experts, no `pad_to` yet) becomes two
    kernels: an index kernel (one CTA: counts, offsets, stable slots by
    warp match.any ranks) and a gather kernel (one CTA per row).

    Each op gets `moe.launch`: its ABI, static shapes and the kernels that
    together compute it, each for the experts whose row count lies in its
    `[rows_min, rows_max]`. When `--moe-swap-ab` asked for it
    (`moe.swap_ab_max_rows`), a swap-AB kernel (tokens as WGMMA's N) takes
    the experts with at most that many rows and the normal kernel the rest,
    so the form is chosen per expert on the device; `moe.swap_ab_only`
    keeps only the swap-AB kernel. With 128-row tiles, experts of at most
    64 rows take a 64-row kernel (one warpgroup) instead. Host code is left
    alone. Forms the kernel
    does not cover are errors, never silently different code. The ABI is
    docs/runtime-contract.md; the kernel is described in
    docs/hopper-notes.md.
  }];
  let options = [
    Option<"chip", "chip", "std::string", "\"sm_90a\"",
           "Target chip: sm_90a, or sm_100a for the MXFP8 grouped_matmul only">,
    Option<"tileM", "tile-m", "int64_t", "128",
           "Token rows per tile: 64 or 128 (one warpgroup per 64 rows); "
           "8..64 with swap-ab">,
    Option<"tileN", "tile-n", "int64_t", "256", "Output columns per tile">,
    Option<"tileK", "tile-k", "int64_t", "64", "K per pipeline stage">,
    Option<"stages", "stages", "int64_t", "4",
           "Shared-memory buffers in the TMA pipeline">,
    Option<"swapABStages", "swap-ab-stages", "int64_t", "0",
           "Pipeline stages of the swap-AB forms --moe-swap-ab asked for "
           "(0: chosen per GEMM, 8 for K >= 8192, else `stages`); their "
           "tiles are small, so decode can keep more bytes in flight">,
    Option<"swapABSplitK", "swap-ab-split-k", "int64_t", "0",
           "Warpgroups the bf16 and block-FP8 swap-AB forms split each "
           "work item's K steps between (0: chosen per GEMM, 2 for K >= "
           "8192, else 1; 1 or 2): decode over a long K has few work "
           "items">,
    Option<"fp8GatherQuantize", "fp8-gather-quantize", "bool", "true",
           "A block-FP8 layer's gather stores its rows as e4m3 and scales "
           "(else bf16, then a quantize kernel)">,
    Option<"fp8ScatterMinTokens", "fp8-scatter-min-tokens", "int64_t",
           "128",
           "That quantizing permute also gets a scatter kernel, which the "
           "runtime launches instead of the gather from this many tokens on: "
           "it runs over the tokens, quantizing each once and storing it to "
           "its k slots, where the gather quantizes each of the T*k rows "
           "(0: no scatter kernel; 2.7-3.2x faster at T = 8192, slower at "
           "decode, bench/RESULTS.md)">,
    Option<"fp8EpilogueQuantize", "fp8-epilogue-quantize", "bool", "false",
           "A block-FP8 expert MLP's gate-up epilogue stores the activation "
           "as e4m3 and scales (else bf16, then a quantize kernel; off by "
           "default: slower until the GEMM overlaps its epilogue, "
           "bench/RESULTS.md)">,
    Option<"fp8TileN", "fp8-tile-n", "int64_t", "192",
           "Output columns per tile of the block-FP8 128-row forms: 192 "
           "(each row tile feeds 1.5x the columns: layers 1.02-1.05x at "
           "T = 8192, bench/RESULTS.md) or 128. The 64-row, clustered and "
           "quantizing (fp8-epilogue-quantize) forms and MXFP8 keep 128">,
    Option<"mxfp8Widen", "mxfp8-widen", "bool", "false",
           "MXFP8 GEMMs of more rows than the swap-AB forms take widen e4m3 "
           "to bf16 in shared memory and run bf16 wgmma (else e4m3 wgmma "
           "with a promotion per 32 K, as the swap-AB forms always do; off "
           "by default: slower, bound by shared-memory bandwidth, "
           "bench/RESULTS.md)">,
    Option<"cluster", "cluster", "int64_t", "1",
           "CTAs per thread-block cluster of the normal (not swap-AB, not "
           "widened) forms: 1, or 2 to share each row tile between two "
           "CTAs of adjacent column tiles (TMA multicast; measured neutral "
           "on the H200, so off by default)">,
    Option<"warpSpecialize", "warp-specialize", "std::string", "\"auto\"",
           "Which 128-row GEMM forms (and MXFP8's 64-row one) get a "
           "producer warpgroup issuing the TMA loads (MXFP8: and staging "
           "the scales) behind per-stage empty mbarriers instead of a CTA "
           "barrier per K step: auto (block FP8 and MXFP8: measured 4-23 % "
           "faster layers at T = 8192; bf16 measured neutral), all (bf16 "
           "too), none">,
    Option<"swapAB", "swap-ab", "bool", "false",
           "Compute out^T: the weights fill WGMMA's 64-row M operand and "
           "tile-m tokens (8..64) its N (tile-n must be 64)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def MoEFinalizeKernelABI : Pass<"moe-finalize-kernel-abi", "::mlir::ModuleOp"> {
  let summary = "Pass the TMA descriptors of moe kernels by value";
  let description = [{
    Runs after the gpu.modules are lowered to NVVM, before serialization.
    The kernel builders list in `moe.tensor_map_args` the parameters that
    are 128-byte `CUtensorMap`s; this marks them `llvm.byval` (128 bytes,
    64-byte aligned) and `nvvm.grid_constant`, so PTX declares them
    `.param .align 64 .b8 [128]` and TMA reads them in parameter space,
    the way `__grid_constant__` does in CUDA C++. The runtime then passes
    descriptors with the launch, with no device memory to write first, and
    the launch can be captured in a CUDA graph. (gpu.func cannot carry
    `llvm.byval` through `convert-gpu-to-nvvm`, hence a separate step.)
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect",
  ];
}

#endif // MOE_CONVERSION_PASSES_TD
