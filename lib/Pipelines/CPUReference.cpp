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
  // Only the top-level module's functions are bufferized and lowered.
  MoECheckPlacementOptions placement;
  placement.target = "cpu";
  pm.addPass(createMoECheckPlacement(placement));
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

/// The names of `options`, as a list (from their printed defaults).
static std::string optionNames(const detail::PassOptions &options) {
  std::string printed;
  llvm::raw_string_ostream os(printed);
  options.print(os);
  StringRef list = StringRef(printed).trim().drop_front().drop_back();
  SmallVector<StringRef> words;
  list.split(words, ' ', -1, /*KeepEmpty=*/false);
  std::string names;
  for (StringRef word : words) {
    if (!names.empty())
      names += ", ";
    names += word.split('=').first.str();
  }
  return names;
}

/// Registers pipeline `arg` built by `build` from options of type `Options`,
/// refusing options that `check` finds wrong when they are parsed (so a bad
/// value is an error before any pass runs, with a non-zero exit).
template <typename Options>
static void registerCheckedPipeline(StringRef arg, StringRef description,
                                    void (*build)(OpPassManager &,
                                                  const Options &),
                                    std::string (*check)(const Options &)) {
  registerPassPipeline(
      arg, description,
      [=](OpPassManager &pm, StringRef text,
          function_ref<LogicalResult(const Twine &)> errorHandler) {
        Options options;
        if (failed(options.parseFromString(text))) {
          std::string names = optionNames(Options());
          return errorHandler(arg + ": " +
                              (names.empty() ? "it takes no options"
                                             : "the options are " + names) +
                              " (got '" + text + "')");
        }
        if (std::string error = check(options); !error.empty())
          return errorHandler(arg + ": " + error);
        build(pm, options);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> optHandler) {
        optHandler(Options());
      });
}

void mlir::moe::registerMoEPipelines() {
  registerCheckedPipeline<CPUReferencePipelineOptions>(
      "moe-cpu-reference-pipeline",
      "Lower moe ops through linalg and bufferization to the LLVM dialect, "
      "runnable on the CPU with mlir-runner",
      buildCPUReferencePipeline,
      [](const CPUReferencePipelineOptions &) { return std::string(); });
  registerCheckedPipeline<GPUPipelineOptions>(
      "moe-gpu-pipeline",
      "Build GPU kernels for moe ops and serialize them to a gpu.binary with "
      "a launch manifest (moe.manifest)",
      buildGPUPipeline, [](const GPUPipelineOptions &options) {
        return checkGPUBinaryFormat(options.format);
      });
  registerCheckedPipeline<GPUDevicePipelineOptions>(
      "moe-gpu-device-pipeline",
      "Lower the gpu.modules of moe kernels to NVVM and serialize them (the "
      "device half of moe-gpu-pipeline, after moe-extract-device-code)",
      buildGPUDevicePipeline, [](const GPUDevicePipelineOptions &options) {
        return checkGPUDeviceOptions(options.chip, options.format);
      });
}
