//===- GPU.cpp - --moe-gpu-pipeline --------------------------------------===//

#include "MoE/Conversion/Passes.h"
#include "MoE/Pipelines/Pipelines.h"
#include "MoE/Transforms/Passes.h"

#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;

void mlir::moe::buildGPUPipeline(OpPassManager &pm,
                                 const GPUPipelineOptions &options) {
  MoESwapABOptions swapAB;
  swapAB.maxRows = options.swapABMaxRows;
  pm.addPass(createMoESwapAB(swapAB));
  ConvertMoEToNVGPUOptions kernels;
  kernels.chip = options.chip;
  kernels.tileM = options.tileM;
  kernels.tileN = options.tileN;
  kernels.tileK = options.tileK;
  kernels.stages = options.stages;
  pm.addPass(createConvertMoEToNVGPU(kernels));
  pm.addPass(createMoEExtractDeviceCode());

  gpu::GPUToNVVMPipelineOptions nvvm;
  nvvm.cubinChip = options.chip;
  // PTX 8.0 is the first with sm_90a's wgmma and TMA.
  nvvm.cubinFeatures = "+ptx80";
  nvvm.cubinFormat = options.format;
  nvvm.optLevel = 3;
  gpu::buildLowerToNVVMPassPipeline(pm, nvvm);
}
