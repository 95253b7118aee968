//===- GPU.cpp - --moe-gpu-pipeline --------------------------------------===//

#include "MoE/Conversion/Passes.h"
#include "MoE/Pipelines/Pipelines.h"
#include "MoE/Target/Passes.h"
#include "MoE/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Utils.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

using namespace mlir;

std::string mlir::moe::checkGPUBinaryFormat(StringRef format) {
  // What gpu-module-to-binary makes of the NVVM target: a cubin (the only
  // object moe-translate bundles), PTX text, or a fatbin. (Upstream reports
  // another value but does not fail.)
  if (format != "bin" && format != "isa" && format != "fatbin")
    return ("'format' must be bin (a cubin: what moe-translate bundles), isa "
            "(PTX text) or fatbin, got '" +
            format + "'")
        .str();
  if (format == "isa")
    return "";
  // Where gpu-module-to-binary will look for ptxas, checked before any pass
  // runs rather than after every kernel is built.
  if (llvm::sys::findProgramByName("ptxas"))
    return "";
  StringRef toolkit = NVVM::getCUDAToolkitPath();
  SmallString<128> ptxas(toolkit);
  llvm::sys::path::append(ptxas, "bin", "ptxas");
  if (!toolkit.empty() && llvm::sys::fs::can_execute(ptxas))
    return "";
  return ("format=" + format +
          " runs ptxas, which is neither on $PATH nor in the CUDA toolkit '" +
          toolkit +
          "' ($CUDA_ROOT, $CUDA_HOME or $CUDA_PATH, else the one found at "
          "build time): install CUDA 12.3 or later, set CUDA_ROOT, or ask "
          "for PTX text with format=isa")
      .str();
}

std::string mlir::moe::checkGPUDeviceOptions(StringRef chip, StringRef format) {
  if (std::string error = checkGPUBinaryFormat(format); !error.empty())
    return error;
  if (chip != "sm_90a" && chip != "sm_100a")
    return ("'chip' must be sm_90a, or sm_100a (the MXFP8 grouped_matmul "
            "only), got '" +
            chip + "'")
        .str();
  return "";
}

// The device half of upstream's gpu-lower-to-nvvm-pipeline (after
// --moe-extract-device-code there is no host code), with the kernel ABI
// finalized between the NVVM lowering and serialization.
void mlir::moe::buildGPUDevicePipeline(
    OpPassManager &pm, const GPUDevicePipelineOptions &options) {
  pm.addPass(createConvertNVGPUToNVVMPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertNVVMToLLVMPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  // PTX 8.0 is the first with sm_90a's wgmma and TMA; sm_100a's tcgen05
  // needs PTX 8.6, and the NVPTX backend of LLVM 22 emits its block-scaled
  // MMA from PTX 8.8 on (as test/GPU/sm100-tcgen05-block-scale.mlir).
  target.features = options.chip == "sm_100a" ? "+ptx88" : "+ptx80";
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  pm.addPass(createLowerAffinePass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createStripDebugInfoPass());
  device.addPass(createConvertGpuOpsToNVVMOps());
  device.addPass(LLVM::createNVVMOptimizeForTargetPass());
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  device.addPass(createReconcileUnrealizedCastsPass());

  pm.addPass(moe::createMoEFinalizeKernelABI());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void mlir::moe::buildGPUPipeline(OpPassManager &pm,
                                 const GPUPipelineOptions &options) {
  // Each moe op of the top-level module's functions becomes a runtime entry
  // launched once per call: refuse any other before fusing names them anew.
  MoECheckPlacementOptions placement;
  placement.target = "gpu";
  pm.addPass(createMoECheckPlacement(placement));
  // Fuse first: the fused expert MLP's kernels keep the [M, 2I]
  // intermediate in registers.
  pm.addPass(createMoEFuseExperts());
  // A shared expert joins its layer's routed experts; the caller arranges
  // the weights (the bundle holds moe ops only).
  MoERouteSharedExpertsOptions shared;
  shared.packFunction = false;
  pm.addPass(createMoERouteSharedExperts(shared));
  // A program's (a training step's) on the weights as they are: grouped ops
  // of one group, after the fusion (a program's ops are one entry each).
  pm.addPass(createMoEExpandSharedMLP());
  // A backward's activation gradient goes into the down dgrad's epilogue.
  if (options.fuseBackward)
    pm.addPass(createMoEFuseBackward());
  // Then a whole layer becomes one runtime entry.
  pm.addPass(createMoEFuseLayer());
  pm.addPass(createMoESelectKernels(options.getMoESelectKernelsOptions()));
  pm.addPass(createConvertMoEToNVGPU());
  pm.addPass(createMoEExtractDeviceCode());
  GPUDevicePipelineOptions device;
  device.chip = options.chip;
  device.format = options.format;
  buildGPUDevicePipeline(pm, device);
}
