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

def MoESelectKernels : Pass<"moe-select-kernels", "::mlir::ModuleOp"> {
  let summary = "Choose the GPU kernels of every moe op and write the choice "
                "into the IR (`moe.kernels`)";
  let description = [{
    The cost model of the GPU lowering, apart from code generation (as
    IREE's kernel configuration is): for each moe op that has kernels it
    writes a typed, verified attribute `moe.kernels`, which
    `--convert-moe-to-nvgpu` only reads, and which a user may also write by
    hand:
    - `moe.grouped_matmul`: `#moe.gemm_kernels`, its kernel forms, each for
      the experts whose row count lies in its range (decided per expert on
      the device): a swap-AB form (tokens as WGMMA's N, 8..64 wide, with
      its own pipeline depth and a K split between two warpgroups on a
      long K) for experts of at most `swap-ab-max-rows` rows, a 64-row form
      (one warpgroup) up to 64 rows when the tile has 128, and the prefill
      form above (FP8: 128 K per stage, block FP8 `fp8-tile-n` columns,
      MXFP8 128; a producer warpgroup as `warp-specialize` says; `cluster`
      CTAs sharing a row tile). A static row count of at most
      `swap-ab-max-rows` keeps the swap-AB form alone.
    - `moe.expert_mlp`: `#moe.expert_mlp_kernels`, the forms of its gate-up
      and down GEMMs (block FP8 with `fp8-epilogue-quantize`: the gate-up
      quantizes its activation; bf16 with an MXFP8 `intermediate` and
      `fuse-round-trips`: the gate-up stores the activation's round
      trip).
    - `moe.permute`'s gather, in a bf16 layer whose rows make an MXFP8
      round trip (`moe.fake_quantize`), stores the rows' round trip with
      `fuse-round-trips` (`quantize_rows`; the round trip is `fused`).
    - `moe.permute`: `#moe.permute_kernels` (in a block-FP8 layer with
      `fp8-gather-quantize`, the gather quantizes the rows; and from
      `fp8-scatter-min-tokens` tokens on a scatter kernel runs instead).
    - `moe.route`, `moe.unpermute`, `moe.quantize`: `#moe.kernel` (one form
      each; a quantize the gather does is `fused`).
    On `chip=sm_100a` only the MXFP8 grouped GEMM has a kernel (tcgen05).
    Ops no kernel covers are errors that say why. The measurements behind
    the defaults are in bench/RESULTS.md; the forms in docs/hopper-notes.md.
  }];
  let options = [
    Option<"chip", "chip", "std::string", "\"sm_90a\"",
           "Target chip: sm_90a, or sm_100a for the MXFP8 grouped_matmul only">,
    Option<"tileM", "tile-m", "int64_t", "128",
           "Token rows per prefill tile: 64 or 128 (one warpgroup per 64 "
           "rows; with 128, experts of at most 64 rows take a 64-row tile); "
           "8..64 with swap-ab">,
    Option<"tileN", "tile-n", "int64_t", "256",
           "Output columns per bf16 tile: 128 or 256 (64 with swap-ab)">,
    Option<"tileK", "tile-k", "int64_t", "64", "K per pipeline stage (bf16)">,
    Option<"stages", "stages", "int64_t", "4",
           "Shared-memory buffers in the TMA pipeline: 2..64, and no more "
           "than the tile fits in 227 KiB (a stage is refilled after the "
           "step that read it, so one would deadlock)">,
    Option<"swapABMaxRows", "swap-ab-max-rows", "int64_t", "16",
           "Experts with at most this many rows take the swap-AB form "
           "(0: never; at most 64)">,
    Option<"swapABStages", "swap-ab-stages", "int64_t", "0",
           "Pipeline stages of the swap-AB forms (0: chosen per GEMM, 8 for "
           "K >= 8192, else `stages`; else 2..64 as `stages`): their tiles "
           "are small, so decode can keep more bytes in flight">,
    Option<"swapABSplitK", "swap-ab-split-k", "int64_t", "0",
           "Warpgroups the bf16 and block-FP8 swap-AB forms split each "
           "work item's K steps between (0: chosen per GEMM, 2 for K >= "
           "8192, else 1; 1 or 2): decode over a long K has few work items">,
    Option<"fp8GatherQuantize", "fp8-gather-quantize", "bool", "true",
           "A block-FP8 layer's gather stores its rows as e4m3 and scales "
           "(else bf16, then a quantize kernel)">,
    Option<"fp8ScatterMinTokens", "fp8-scatter-min-tokens", "int64_t",
           "128",
           "That quantizing permute also gets a scatter kernel, which the "
           "runtime launches instead of the gather from this many tokens on: "
           "it quantizes each token once and stores it to its k slots, where "
           "the gather quantizes each of the T*k rows (0: no scatter kernel; "
           "at most 2^31 - 1)">,
    Option<"fp8EpilogueQuantize", "fp8-epilogue-quantize", "bool", "false",
           "A block-FP8 expert MLP's gate-up epilogue stores the activation "
           "as e4m3 and scales (else bf16, then a quantize kernel; off by "
           "default: slower until the GEMM overlaps its epilogue)">,
    Option<"fuseRoundTrips", "fuse-round-trips", "bool", "true",
           "MXFP8 as bf16 GEMMs: a bf16 expert MLP with an MXFP8 "
           "'intermediate' stores the activation's round trip from its "
           "gate-up epilogue, and a layer's gather the rows' round trip "
           "(else round-trip kernels of their own, in place)">,
    Option<"fp8Stages", "fp8-stages", "int64_t", "0",
           "Pipeline stages of the FP8 (block FP8 and MXFP8) prefill forms; "
           "0 (the default) takes `stages` (5 for block FP8 measured "
           "neutral: its mainloop does not wait on loads)">,
    Option<"fp8TileN", "fp8-tile-n", "int64_t", "192",
           "Output columns per tile of the block-FP8 128-row forms: 192 "
           "(each row tile feeds 1.5x the columns) or 128. The 64-row, "
           "clustered and quantizing forms and MXFP8 keep 128">,
    Option<"mxfp8Widen", "mxfp8-widen", "bool", "false",
           "MXFP8 GEMMs of more rows than the swap-AB forms take widen e4m3 "
           "to bf16 in shared memory and run bf16 wgmma (else e4m3 wgmma "
           "with a promotion per 32 K; off by default: slower, bound by "
           "shared-memory bandwidth)">,
    Option<"cluster", "cluster", "int64_t", "1",
           "CTAs per thread-block cluster of the prefill (not swap-AB, not "
           "widened) forms: 1, or 2 to share each row tile between two CTAs "
           "of adjacent column tiles (TMA multicast; measured neutral, so "
           "off by default)">,
    Option<"pingpong", "pingpong", "bool", "false",
           "bf16 prefill forms (grouped_matmul and grouped_dgrad): two "
           "consumer warpgroups take alternate work items behind a "
           "producer warpgroup, so one's epilogue overlaps the other's "
           "wgmma, instead of sharing each 128-row item. The items are "
           "128-row tiles where tile-n is at most 128 (two accumulators a "
           "warpgroup), else 64-row ones (one form for every expert past "
           "swap-AB's); `cluster` does not apply; measured slower, so off "
           "by default">,
    Option<"tmaStore", "tma-store", "bool", "false",
           "Prefill forms with a bf16 output (grouped_matmul, the expert "
           "MLP's down GEMM and its gate-up without a round trip, "
           "grouped_dgrad without an activation's gradient) whose output "
           "columns are a multiple of 8: each warpgroup hands every staged "
           "64 x 64 tile whose rows are all its expert's to one TMA store "
           "(an out tensor map) instead of storing it with its threads; "
           "rows at an expert's end are stored as before. Off by default">,
    Option<"warpSpecialize", "warp-specialize", "std::string", "\"auto\"",
           "Which 128-row GEMM forms (and MXFP8's 64-row one) get a producer "
           "warpgroup issuing the TMA loads behind per-stage empty mbarriers "
           "instead of a CTA barrier per K step: auto (block FP8 and MXFP8; "
           "bf16 measured neutral), all (bf16 too), none">,
    Option<"decodeMaxTokens", "decode-max-tokens", "int64_t", "0",
           "A bf16 moe.layer (silu, no biases) runs calls of at most this "
           "many tokens through one persistent kernel for its expert MLP "
           "and combine (docs/decode-kernel.md) where its swap-AB forms "
           "take every expert of that many rows (0: never; at most "
           "swap-ab-max-rows)">,
    Option<"swapAB", "swap-ab", "bool", "false",
           "One swap-AB form for every expert: the weights fill WGMMA's "
           "64-row M operand and tile-m tokens (8..64) its N (tile-n must be "
           "64)">,
  ];
}

def ConvertMoEToNVGPU : Pass<"convert-moe-to-nvgpu", "::mlir::ModuleOp"> {
  let summary = "Build the GPU kernels of moe ops as their `moe.kernels` "
                "configuration says";
  let description = [{
    Reads the `moe.kernels` attribute of each moe op (written by
    `--moe-select-kernels` or by hand), checks it against the op, builds
    the kernels it names into `gpu.module @moe_kernels` from upstream
    gpu/nvgpu/nvvm ops, and records in `moe.launch` what a runtime needs to
    launch them: the op's ABI, static shapes and the kernels that together
    compute it, each for the experts whose row count lies in its
    `[rows_min, rows_max]`. One small pattern per op
    (`populateMoEToNVGPUPatterns`); kernels of equal parameters are shared.

    A grouped GEMM kernel: a device-side tile scheduler over the expert
    offsets (clamped as on the CPU), TMA loads with 128-byte swizzle into
    `stages` shared-memory buffers completing on mbarriers,
    `nvgpu.warpgroup.mma` with f32 accumulation, and an epilogue that
    writes only the rows of the tile's own expert. A `moe.expert_mlp`
    becomes two: the gate-up kernel stores act(gate, up) from its registers
    (the [M, 2I] intermediate is never written); the down kernel applies
    the row scale (the routing weight). `moe.route` becomes a routing
    kernel (one warp per token), `moe.unpermute` a combine kernel (one CTA
    per token), `moe.permute` count, index and gather kernels (and a
    scatter), `moe.quantize` a quantize kernel. Host code is left alone. An
    op without a configuration, or one its op cannot run, is an error,
    never silently different code. The ABI is docs/runtime-contract.md; the
    kernels are described in docs/hopper-notes.md.
  }];
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
