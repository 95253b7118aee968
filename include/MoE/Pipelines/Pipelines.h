//===- Pipelines.h - named moe pass pipelines -------------------*- C++ -*-===//

#ifndef MOE_PIPELINES_PIPELINES_H
#define MOE_PIPELINES_PIPELINES_H

#include "MoE/Conversion/Passes.h"

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
namespace moe {

#include "MoE/Conversion/SelectKernelsOptions.h.inc"

/// Options of `--moe-cpu-reference-pipeline`.
struct CPUReferencePipelineOptions
    : public PassPipelineOptions<CPUReferencePipelineOptions> {};

/// moe -> linalg -> bufferized loops -> LLVM dialect, runnable by mlir-runner.
void buildCPUReferencePipeline(OpPassManager &pm,
                               const CPUReferencePipelineOptions &options);

/// Options of `--moe-gpu-pipeline`: those of --moe-select-kernels (declared
/// once, in its Passes.td) and what the binary holds.
struct GPUPipelineOptions
    : public MoESelectKernelsPipelineOptions<GPUPipelineOptions> {
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What gpu.binary holds: bin (cubin), isa (PTX), fatbin"),
      llvm::cl::init("bin")};
  Option<bool> fuseBackward{
      *this, "fuse-backward",
      llvm::cl::desc("Apply a backward's activation gradient in the down "
                     "projection's dgrad epilogue (--moe-fuse-backward)"),
      llvm::cl::init(true)};
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

/// Why the device pipeline cannot compile for `chip` into `format` (an
/// error message naming the option and the values it takes), or an empty
/// string. The registered pipelines refuse such options when they are
/// parsed; a caller building the pipelines itself checks them first.
std::string checkGPUDeviceOptions(StringRef chip, StringRef format);
/// The part of checkGPUDeviceOptions about `format` (--moe-gpu-pipeline's
/// chip is --moe-select-kernels', which checks it).
std::string checkGPUBinaryFormat(StringRef format);

/// gpu.modules of moe kernels (after --moe-extract-device-code) -> NVVM ->
/// by-value tensor-map parameters -> gpu.binary. For modules whose kernels
/// were chosen by hand (`--convert-moe-to-nvgpu` options) rather than by
/// --moe-gpu-pipeline.
void buildGPUDevicePipeline(OpPassManager &pm,
                            const GPUDevicePipelineOptions &options);

/// moe -> fused ops -> kernel choice (--moe-select-kernels) -> sm_90a
/// kernels -> gpu.binary, plus the
/// `moe.manifest` a launcher reads. ptxas is found as gpu-module-to-binary
/// finds it ($PATH, $CUDA_ROOT, $CUDA_HOME, $CUDA_PATH).
void buildGPUPipeline(OpPassManager &pm, const GPUPipelineOptions &options);

/// Registers the named pipelines with the global pass registry.
void registerMoEPipelines();

} // namespace moe
} // namespace mlir

#endif // MOE_PIPELINES_PIPELINES_H
