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

/// Registers the named pipelines with the global pass registry.
void registerMoEPipelines();

} // namespace moe
} // namespace mlir

#endif // MOE_PIPELINES_PIPELINES_H
