//===- Pipelines.h - C API of the moe passes and pipelines --------*- C -*-===//
//
// The pipelines build GPU kernels and LLVM IR: the context needs the
// upstream dialects and LLVM IR translations as well
// (mlirRegisterAllDialects, mlirRegisterAllLLVMTranslations).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_C_PIPELINES_H
#define MOE_C_PIPELINES_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Registers the moe passes and named pipelines (moe-gpu-pipeline,
/// moe-cpu-reference-pipeline, ...) with the global pass registry, so that
/// mlirParsePassPipeline and mlirOpPassManagerAddPipeline know them. Safe to
/// call more than once.
MLIR_CAPI_EXPORTED void mlirMoERegisterPasses(void);

/// Runs the registered pass pipeline `name` (e.g. "moe-gpu-pipeline") with
/// `options` (e.g. "chip=sm_90a format=isa"; empty for the defaults) on
/// `module`, in place. Registers the moe passes first. An unknown name, a bad
/// option or a failing pass is reported through the context's diagnostic
/// handlers and gives a failure.
MLIR_CAPI_EXPORTED MlirLogicalResult mlirMoERunPipeline(MlirModule module,
                                                        MlirStringRef name,
                                                        MlirStringRef options);

#ifdef __cplusplus
}
#endif

#endif // MOE_C_PIPELINES_H
