//===- moe-fuzz.cpp - libFuzzer target: parse, verify, lower -------------===//
//
// Feeds arbitrary text to the MLIR parser with the dialects a moe program
// uses, verifies it, runs --moe-raise on any module that parses, and, when
// it holds only ops our pipelines are meant to take (moe ops in functions
// with constants and casts), runs the GPU kernel builder (without
// serialization) on it as written and after --moe-quantize (weights and
// activations, block FP8), and --moe-cpu-reference-pipeline.
// Diagnostics are expected; crashes, sanitizer reports and hangs are bugs. See
// docs/fuzzing.md.
//
//===----------------------------------------------------------------------===//

#include "MoE/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cstddef>
#include <cstdint>
#include <string>

using namespace mlir;

/// True when every op is one the CPU pipeline is designed to accept; other
/// upstream ops would only fuzz upstream passes, which we do not own.
static bool onlyPipelineInput(ModuleOp module) {
  bool ok = true;
  module.walk([&](Operation *op) {
    StringRef dialect =
        op->getDialect() ? op->getDialect()->getNamespace() : "";
    if (dialect == "moe" ||
        isa<ModuleOp, func::FuncOp, func::ReturnOp, func::CallOp,
            arith::ConstantOp, tensor::CastOp, tensor::EmptyOp>(op))
      return;
    ok = false;
  });
  return ok;
}

// LLVM's inline allocators poison memory in our instrumented code but not in
// the uninstrumented libMLIR; that mix reports false use-after-poison.
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static DialectRegistry *registry = [] {
    auto *r = new DialectRegistry();
    registerAllDialects(*r);
    registerAllExtensions(*r);
    moe::registerMoEDialect(*r);
    return r;
  }();
  MLIRContext context(*registry, MLIRContext::Threading::DISABLED);
  // torch-mlir's tm_tensor.sort, which --moe-raise reads, is unregistered.
  context.allowUnregisteredDialects(true);
  ScopedDiagnosticHandler quiet(&context,
                                [](Diagnostic &) { return success(); });

  // The MLIR lexer reads up to a terminating NUL, as files from disk have.
  std::string text(reinterpret_cast<const char *>(data), size);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module)
    return 0;
  // --moe-raise takes upstream linalg/tensor/arith: any parsed module.
  {
    OwningOpRef<ModuleOp> raised = module->clone();
    PassManager raisePm(&context);
    raisePm.addPass(moe::createMoERaise());
    (void)raisePm.run(*raised);
  }
  if (!onlyPipelineInput(*module))
    return 0;
  // The GPU kernel builder up to (not including) serialization, which
  // would run ptxas per input; then again on the module's block-FP8 form.
  auto buildKernels = [&](PassManager &pm) {
    pm.addPass(moe::createMoEFuseExperts());
    pm.addPass(moe::createMoEFuseLayer());
    pm.addPass(moe::createMoESelectKernels());
    pm.addPass(moe::createConvertMoEToNVGPU());
    pm.addPass(moe::createMoEExtractDeviceCode());
  };
  {
    OwningOpRef<ModuleOp> gpuModule = module->clone();
    PassManager gpuPm(&context);
    buildKernels(gpuPm);
    (void)gpuPm.run(*gpuModule);
  }
  {
    OwningOpRef<ModuleOp> quantized = module->clone();
    PassManager quantizePm(&context);
    moe::MoEQuantizeOptions policy;
    policy.scope = "weights+activations";
    quantizePm.addPass(moe::createMoEQuantize(policy));
    buildKernels(quantizePm);
    (void)quantizePm.run(*quantized);
  }

  PassManager pm(&context);
  moe::buildCPUReferencePipeline(pm, moe::CPUReferencePipelineOptions());
  (void)pm.run(*module);
  return 0;
}
