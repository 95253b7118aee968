//===- moe-fuzz.cpp - libFuzzer target: parse, verify, lower -------------===//
//
// Feeds arbitrary text to the MLIR parser with the dialects a moe program
// uses, verifies it, runs --moe-raise on any module that parses, and, when
// it holds only ops our pipelines are meant to take (moe ops in functions
// with constants and casts), runs the GPU kernel builder (without
// serialization) on it as written and after --moe-quantize (weights and
// activations, block FP8), and --moe-cpu-reference-pipeline. The GPU
// passes run with options drawn for the input (docs/fuzzing.md): a first
// line `// moe-fuzz-options: <text>` gives them as --moe-gpu-pipeline would
// take them, else they are drawn from the input's hash, valid and invalid
// (tile sizes, stages, formats, thresholds, chips). Modules that also hold
// loops, branches or gpu.modules around moe ops go through the placement
// check and the kernel selection and builder, which must refuse them.
// Diagnostics are expected; crashes, sanitizer reports and hangs are bugs. See
// docs/fuzzing.md.
//
//===----------------------------------------------------------------------===//

#include "MoE/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

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

/// True when the module is pipeline input but for loops, branches and
/// gpu.modules (and what they hold) around its ops: where our placement
/// check must refuse moe ops before any lowering.
static bool onlyPlacementInput(ModuleOp module) {
  bool ok = true;
  module.walk([&](Operation *op) {
    StringRef dialect =
        op->getDialect() ? op->getDialect()->getNamespace() : "";
    if (dialect == "moe" || dialect == "scf" || dialect == "gpu" ||
        dialect == "arith" ||
        isa<ModuleOp, func::FuncOp, func::ReturnOp, func::CallOp,
            tensor::CastOp, tensor::EmptyOp>(op))
      return;
    ok = false;
  });
  return ok;
}

/// The options of the GPU passes for `text` (the input): its first line's
/// `// moe-fuzz-options: ...` when it has one, else values drawn from its
/// hash, most often the defaults, else valid and invalid ones of each
/// option.
static std::string drawOptions(StringRef text) {
  StringRef prefix = "// moe-fuzz-options:";
  if (text.starts_with(prefix))
    return text.drop_front(prefix.size()).split('\n').first.trim().str();
  uint64_t state = 14695981039346656037ull; // FNV-1a, then splitmix64
  for (unsigned char c : text)
    state = (state ^ c) * 1099511628211ull;
  auto next = [&] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  // A quarter of the inputs keep every default.
  if (next() % 4 == 0)
    return "";
  static const std::vector<std::pair<const char *, std::vector<const char *>>>
      kChoices = {
          {"chip", {"sm_90a", "sm_100a", "sm_80", "sm_90"}},
          {"tile-m",
           {"64", "128", "8", "16", "32", "0", "-1", "96",
            "4611686018427387904"}},
          {"tile-n", {"128", "256", "64", "192", "0", "4611686018427387904"}},
          {"tile-k", {"64", "128", "32", "0", "4611686018427387904"}},
          {"stages",
           {"2", "3", "4", "5", "6", "8", "1", "0", "-1", "64", "65",
            "2147483648", "4611686018427387904", "9223372036854775807"}},
          {"swap-ab", {"0", "1"}},
          {"swap-ab-max-rows",
           {"16", "0", "8", "64", "65", "-1", "4611686018427387904"}},
          {"swap-ab-stages",
           {"0", "2", "4", "8", "16", "1", "-1", "64", "65",
            "4611686018427387904"}},
          {"swap-ab-split-k",
           {"0", "1", "2", "3", "-1", "4611686018427387904"}},
          {"fp8-gather-quantize", {"0", "1"}},
          {"fp8-scatter-min-tokens",
           {"128", "0", "1", "2147483647", "2147483648", "-1",
            "4611686018427387904"}},
          {"fp8-epilogue-quantize", {"0", "1"}},
          {"fp8-tile-n", {"192", "128", "64", "0", "4611686018427387904"}},
          {"fp8-stages",
           {"0", "2", "5", "6", "1", "-1", "65", "4611686018427387904"}},
          {"mxfp8-widen", {"0", "1"}},
          {"cluster", {"1", "2", "0", "3", "4611686018427387904"}},
          {"warp-specialize", {"auto", "all", "none", "some"}},
          {"format", {"bin", "isa", "fatbin", "elf", "llvm"}},
          {"pingpong", {"0", "1"}},
          {"tma-store", {"0", "1"}},
      };
  std::string options;
  for (const auto &[name, values] : kChoices) {
    if (next() % 4 != 0)
      continue;
    options += std::string(options.empty() ? "" : " ") + name + "=" +
               values[next() % values.size()];
  }
  return options;
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
  bool pipelineInput = onlyPipelineInput(*module);
  if (!pipelineInput && !onlyPlacementInput(*module))
    return 0;
  // The GPU passes' options, parsed as --moe-gpu-pipeline parses them (a
  // malformed text is its own refusal); a format the pipeline refuses is
  // refused here too, and the passes run regardless: serialization, the
  // only step that reads it, is not run.
  moe::GPUPipelineOptions options;
  if (failed(options.parseFromString(drawOptions(text))))
    return 0;
  (void)moe::checkGPUBinaryFormat(options.format);
  moe::MoESelectKernelsOptions selectOptions =
      options.getMoESelectKernelsOptions();
  moe::MoECheckPlacementOptions gpuPlacement;
  gpuPlacement.target = "gpu";
  if (!pipelineInput) {
    // Loops, branches or gpu.modules: the placement check and the passes
    // that check it again, each alone (no upstream rewriting on such IR).
    for (int step = 0; step < 3; ++step) {
      OwningOpRef<ModuleOp> copy = module->clone();
      PassManager pm(&context);
      if (step == 0)
        pm.addPass(moe::createMoECheckPlacement(gpuPlacement));
      if (step == 1)
        pm.addPass(moe::createMoESelectKernels(selectOptions));
      if (step == 2) {
        pm.addPass(moe::createMoESelectKernels(selectOptions));
        pm.addPass(moe::createConvertMoEToNVGPU());
      }
      (void)pm.run(*copy);
    }
    return 0;
  }
  // The GPU kernel builder up to (not including) serialization, which
  // would run ptxas per input; then again on the module's block-FP8 form.
  // A shared expert joins its routed experts as --moe-gpu-pipeline has it.
  moe::MoERouteSharedExpertsOptions callerPacks;
  callerPacks.packFunction = false;
  auto buildKernels = [&](PassManager &pm) {
    pm.addPass(moe::createMoECheckPlacement(gpuPlacement));
    pm.addPass(moe::createMoEFuseExperts());
    pm.addPass(moe::createMoERouteSharedExperts(callerPacks));
    pm.addPass(moe::createMoEExpandSharedMLP());
    pm.addPass(moe::createMoEFuseBackward());
    pm.addPass(moe::createMoEFuseLayer());
    pm.addPass(moe::createMoESelectKernels(selectOptions));
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
    // The train forward and the backward as programs (moe.program): their
    // plans, views, constants and one-group shared experts.
    OwningOpRef<ModuleOp> trained = module->clone();
    PassManager trainPm(&context);
    trainPm.addPass(moe::createMoEGenerateBackward());
    buildKernels(trainPm);
    (void)trainPm.run(*trained);
  }
  {
    OwningOpRef<ModuleOp> quantized = module->clone();
    PassManager quantizePm(&context);
    moe::MoEQuantizeOptions policy;
    policy.scope = "weights+activations";
    // Quantized after the shared expert became routed experts.
    quantizePm.addPass(moe::createMoEFuseExperts());
    quantizePm.addPass(moe::createMoERouteSharedExperts(callerPacks));
    quantizePm.addPass(moe::createMoEQuantize(policy));
    buildKernels(quantizePm);
    (void)quantizePm.run(*quantized);
  }

  // On the CPU as written and, with a shared expert, as routed experts with
  // the packing function.
  bool shared = false;
  module->walk([&](moe::SharedMLPOp) { shared = true; });
  if (shared) {
    OwningOpRef<ModuleOp> routed = module->clone();
    PassManager routedPm(&context);
    routedPm.addPass(moe::createMoEFuseExperts());
    routedPm.addPass(moe::createMoERouteSharedExperts());
    moe::buildCPUReferencePipeline(routedPm,
                                   moe::CPUReferencePipelineOptions());
    (void)routedPm.run(*routed);
  }
  // The backward, and the program of one of two expert-parallel ranks in
  // stages, each then on the CPU.
  for (bool expertParallel : {false, true}) {
    OwningOpRef<ModuleOp> derived = module->clone();
    PassManager derivedPm(&context);
    if (expertParallel) {
      moe::MoEExpertParallelOptions ranks;
      ranks.ranks = 2;
      derivedPm.addPass(moe::createMoEExpertParallel(ranks));
      derivedPm.addPass(moe::createMoESplitExchanges());
    } else {
      // Fused as the GPU pipeline has it, then expanded back on the CPU.
      derivedPm.addPass(moe::createMoEGenerateBackward());
      derivedPm.addPass(moe::createMoEFuseBackward());
    }
    moe::buildCPUReferencePipeline(derivedPm,
                                   moe::CPUReferencePipelineOptions());
    (void)derivedPm.run(*derived);
  }
  PassManager pm(&context);
  moe::buildCPUReferencePipeline(pm, moe::CPUReferencePipelineOptions());
  (void)pm.run(*module);
  return 0;
}
