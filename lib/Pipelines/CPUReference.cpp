//===- CPUReference.cpp - --moe-cpu-reference-pipeline -------------------===//

#include "MoE/Conversion/Passes.h"
#include "MoE/Pipelines/Pipelines.h"
#include "MoE/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::moe::buildCPUReferencePipeline(OpPassManager &pm,
                                          const CPUReferencePipelineOptions &) {
  pm.addPass(createMoEExpandFusedOps());
  pm.addPass(createConvertMoEToLinalg());
  pm.addPass(createCanonicalizerPass());

  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferDeallocationPipelineOptions deallocation;
  bufferization::buildBufferDeallocationPipeline(pm, deallocation);
  // Deallocation may leave bufferization.clone behind for returned buffers.
  pm.addPass(createConvertBufferizationToMemRefPass());

  pm.addPass(createConvertLinalgToLoopsPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // bf16 and f16 conversions become integer ops: no soft-float libcalls.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::moe::registerMoEPipelines() {
  PassPipelineRegistration<CPUReferencePipelineOptions>(
      "moe-cpu-reference-pipeline",
      "Lower moe ops through linalg and bufferization to the LLVM dialect, "
      "runnable on the CPU with mlir-runner",
      buildCPUReferencePipeline);
  PassPipelineRegistration<GPUPipelineOptions>(
      "moe-gpu-pipeline",
      "Build GPU kernels for moe ops and serialize them to a gpu.binary with "
      "a launch manifest (moe.manifest)",
      buildGPUPipeline);
  PassPipelineRegistration<GPUDevicePipelineOptions>(
      "moe-gpu-device-pipeline",
      "Lower the gpu.modules of moe kernels to NVVM and serialize them (the "
      "device half of moe-gpu-pipeline, after moe-extract-device-code)",
      buildGPUDevicePipeline);
}
