//===- Pipelines.h - named moe pass pipelines -------------------*- C++ -*-===//

#ifndef MOE_PIPELINES_PIPELINES_H
#define MOE_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
namespace moe {

/// Options of `--moe-cpu-reference-pipeline`.
struct CPUReferencePipelineOptions
    : public PassPipelineOptions<CPUReferencePipelineOptions> {};

/// moe -> linalg -> bufferized loops -> LLVM dialect, runnable by mlir-runner.
void buildCPUReferencePipeline(OpPassManager &pm,
                               const CPUReferencePipelineOptions &options);

/// Options of `--moe-gpu-pipeline`.
struct GPUPipelineOptions : public PassPipelineOptions<GPUPipelineOptions> {
  Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc(
          "Target chip (sm_90a; sm_100a: MXFP8 grouped_matmul only)"),
      llvm::cl::init("sm_90a")};
  Option<int64_t> tileM{
      *this, "tile-m",
      llvm::cl::desc("Token rows per tile (64 or 128; with 128, experts of at "
                     "most 64 rows take a 64-row tile)"),
      llvm::cl::init(128)};
  Option<int64_t> tileN{*this, "tile-n",
                        llvm::cl::desc("Output columns per tile"),
                        llvm::cl::init(256)};
  Option<int64_t> tileK{*this, "tile-k", llvm::cl::desc("K per stage"),
                        llvm::cl::init(64)};
  Option<int64_t> stages{*this, "stages",
                         llvm::cl::desc("TMA pipeline buffers"),
                         llvm::cl::init(4)};
  Option<int64_t> swapABStages{
      *this, "swap-ab-stages",
      llvm::cl::desc("TMA pipeline buffers of the swap-AB kernels (0: "
                     "chosen per GEMM, 8 for K >= 8192, else `stages`)"),
      llvm::cl::init(0)};
  Option<int64_t> swapABSplitK{
      *this, "swap-ab-split-k",
      llvm::cl::desc("Warpgroups the bf16 and block-FP8 swap-AB kernels "
                     "split K between (0: chosen per GEMM, 2 for K >= 8192, "
                     "else 1; 1 or 2)"),
      llvm::cl::init(0)};
  Option<int64_t> swapABMaxRows{
      *this, "swap-ab-max-rows",
      llvm::cl::desc("Experts with at most this many rows run the swap-AB "
                     "kernel (0: never); see --moe-swap-ab"),
      llvm::cl::init(16)};
  Option<bool> fp8GatherQuantize{
      *this, "fp8-gather-quantize",
      llvm::cl::desc("A block-FP8 layer's gather stores e4m3 rows and scales "
                     "(else bf16 and a quantize kernel)"),
      llvm::cl::init(true)};
  Option<int64_t> fp8ScatterMinTokens{
      *this, "fp8-scatter-min-tokens",
      llvm::cl::desc("From this many tokens on, that permute runs a scatter "
                     "kernel quantizing each token once instead of the "
                     "gather (0: never)"),
      llvm::cl::init(128)};
  Option<bool> fp8EpilogueQuantize{
      *this, "fp8-epilogue-quantize",
      llvm::cl::desc("A block-FP8 expert MLP's gate-up epilogue stores the "
                     "activation as e4m3 and scales (else bf16 and a "
                     "quantize kernel)"),
      llvm::cl::init(false)};
  Option<int64_t> cluster{
      *this, "cluster",
      llvm::cl::desc("CTAs per cluster of the prefill GEMM forms: 1, or 2 "
                     "to share each row tile between two CTAs (TMA "
                     "multicast; measured neutral, so off by default)"),
      llvm::cl::init(1)};
  Option<std::string> warpSpecialize{
      *this, "warp-specialize",
      llvm::cl::desc("Which 128-row GEMM forms (and MXFP8's 64-row one) "
                     "get a producer warpgroup for the TMA loads: auto "
                     "(block FP8 and MXFP8), all (bf16 too), none"),
      llvm::cl::init("auto")};
  Option<int64_t> fp8TileN{
      *this, "fp8-tile-n",
      llvm::cl::desc("Output columns per tile of the block-FP8 128-row "
                     "forms: 192 or 128; see convert-moe-to-nvgpu"),
      llvm::cl::init(192)};
  Option<bool> mxfp8Widen{
      *this, "mxfp8-widen",
      llvm::cl::desc("MXFP8 GEMMs of more rows than the swap-AB forms take "
                     "widen e4m3 to bf16 in shared memory and run bf16 "
                     "wgmma (else a promotion per 32 K; off by default: "
                     "slower)"),
      llvm::cl::init(false)};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What gpu.binary holds: bin (cubin), isa (PTX), fatbin"),
      llvm::cl::init("bin")};
};

/// Options of the device half of --moe-gpu-pipeline.
struct GPUDevicePipelineOptions
    : public PassPipelineOptions<GPUDevicePipelineOptions> {
  Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc(
          "Target chip (sm_90a; sm_100a: MXFP8 grouped_matmul only)"),
      llvm::cl::init("sm_90a")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What gpu.binary holds: bin (cubin), isa (PTX), fatbin"),
      llvm::cl::init("bin")};
};

/// gpu.modules of moe kernels (after --moe-extract-device-code) -> NVVM ->
/// by-value tensor-map parameters -> gpu.binary. For modules whose kernels
/// were chosen by hand (`--convert-moe-to-nvgpu` options) rather than by
/// --moe-gpu-pipeline.
void buildGPUDevicePipeline(OpPassManager &pm,
                            const GPUDevicePipelineOptions &options);

/// moe -> swap-AB choice -> sm_90a kernels -> gpu.binary, plus the
/// `moe.manifest` a launcher reads. ptxas is found as gpu-module-to-binary
/// finds it ($PATH, $CUDA_ROOT, $CUDA_HOME, $CUDA_PATH).
void buildGPUPipeline(OpPassManager &pm, const GPUPipelineOptions &options);

/// Registers the named pipelines with the global pass registry.
void registerMoEPipelines();

} // namespace moe
} // namespace mlir

#endif // MOE_PIPELINES_PIPELINES_H
