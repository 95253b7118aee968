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
    For every `moe.grouped_matmul` (bf16 rows and weights, bf16 result, no
    bias or row scale yet) builds a grouped GEMM kernel in
    `gpu.module @moe_kernels`, from upstream gpu/nvgpu/nvvm ops: a device-side
    tile scheduler over the expert offsets, TMA loads with 128-byte swizzle
    into `stages` shared-memory buffers completing on mbarriers,
    `nvgpu.warpgroup.mma` with f32 accumulation, and an epilogue that writes
    only the rows of the tile's own expert. The op is tagged with the kernel
    it runs as (`moe.kernel`) and, when `--moe-swap-ab` asked for it, with
    its swap-AB kernel (`moe.kernel_swap_ab`, tokens as WGMMA's N, sized
    for `moe.swap_ab_max_rows`); `moe.swap_ab_only` drops the normal one.
    Host code is left alone. Forms the kernel
    does not cover are errors, never silently different code. The kernel and
    its ABI are described in docs/hopper-notes.md.
  }];
  let options = [
    Option<"chip", "chip", "std::string", "\"sm_90a\"",
           "Target chip; only sm_90a has kernels so far">,
    Option<"tileM", "tile-m", "int64_t", "64", "Rows per tile (WGMMA M)">,
    Option<"tileN", "tile-n", "int64_t", "256", "Output columns per tile">,
    Option<"tileK", "tile-k", "int64_t", "64", "K per pipeline stage">,
    Option<"stages", "stages", "int64_t", "4",
           "Shared-memory buffers in the TMA pipeline">,
    Option<"swapAB", "swap-ab", "bool", "false",
           "Compute out^T: the weights fill WGMMA's 64-row M operand and "
           "tile-m tokens (8..64) its N (tile-n must be 64)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect",
  ];
}

#endif // MOE_CONVERSION_PASSES_TD
