//===- Placement.cpp - where the pipelines compile moe ops from ----------===//
//
// The moe pipelines compile the moe ops of the top-level module's functions:
// the CPU reference pipeline bufferizes and lowers those functions, the GPU
// pipeline makes one runtime entry per op, launched once per call from its
// function's top level. A moe op anywhere else (a nested builtin.module, a
// user's gpu.module, and for the GPU a loop or branch) would be left
// unlowered, dropped from the manifest or launched a different number of
// times than the IR says; verifyMoEPlacement refuses it, naming the op and
// what encloses it.
//
//===----------------------------------------------------------------------===//

#include "MoE/Dialect/MoEDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

using namespace mlir;
using namespace mlir::moe;

/// `op`'s symbol name for a message: ` @name`, or nothing.
static std::string symbolSuffix(Operation *op) {
  auto name = op->getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName());
  return name ? (" @" + name.getValue()).str() : std::string();
}

/// Whether `loop` passes tensors from one iteration to the next.
static bool carriesTensors(LoopLikeOpInterface loop) {
  return llvm::any_of(loop.getRegionIterArgs(), [](BlockArgument arg) {
    return isa<TensorType>(arg.getType());
  });
}

/// Reports `op` if `kind`'s pipeline cannot compile it where it is.
static LogicalResult verifyOne(Operation *op, ModuleOp module,
                               MoEPipelineKind kind) {
  bool gpu = kind == MoEPipelineKind::GPU;
  StringRef pipeline = gpu ? "the GPU pipeline" : "the CPU reference pipeline";
  Operation *func = nullptr;
  // Below the function: the innermost loop, and the outermost op other
  // than moe.layer (a layer's body is compiled with the layer).
  Operation *loop = nullptr, *region = nullptr;
  for (Operation *parent = op->getParentOp(); parent;
       parent = parent->getParentOp()) {
    if (isa<gpu::GPUModuleOp>(parent)) {
      InFlightDiagnostic diag =
          op->emitOpError()
          << "is inside gpu.module" << symbolSuffix(parent) << ": " << pipeline
          << " compiles the moe ops of the host functions (func.func) of the "
             "top-level module"
          << (gpu ? ", and builds their kernels itself"
                  : " (a gpu.module's would be left unlowered)")
          << "; move it into a host function";
      diag.attachNote(parent->getLoc()) << "the enclosing gpu.module";
      return diag;
    }
    if (auto nested = dyn_cast<ModuleOp>(parent); nested && nested != module) {
      InFlightDiagnostic diag =
          op->emitOpError()
          << "is in the nested module" << symbolSuffix(parent) << ": "
          << pipeline
          << " compiles the moe ops of the top-level module's functions only "
             "(a nested module's would be left "
          << (gpu ? "without a manifest entry" : "unlowered")
          << "); move the function into the top-level module";
      diag.attachNote(parent->getLoc()) << "the nested module";
      return diag;
    }
    if (func)
      continue;
    if (isa<func::FuncOp>(parent)) {
      func = parent;
      continue;
    }
    if (!loop && isa<LoopLikeOpInterface>(parent))
      loop = parent;
    if (!isa<LayerOp>(parent))
      region = parent;
  }
  if (!func)
    return op->emitOpError()
           << "is not inside a func.func: " << pipeline
           << " compiles the moe ops of the top-level module's functions";
  if (!gpu || !region)
    return success();
  if (loop) {
    InFlightDiagnostic diag = op->emitOpError() << "is inside the loop '"
                                                << loop->getName() << "'";
    if (carriesTensors(cast<LoopLikeOpInterface>(loop)))
      diag << ", which carries tensors from one iteration to the next";
    diag << ": the GPU pipeline compiles each moe op to a runtime entry "
            "launched once per call of @"
         << cast<func::FuncOp>(func).getSymName()
         << " from its top level; unroll the loop, or call the function "
            "from a loop on the host";
    diag.attachNote(loop->getLoc()) << "the enclosing loop";
    return diag;
  }
  InFlightDiagnostic diag =
      op->emitOpError() << "is inside '" << region->getName()
                        << "': the GPU pipeline compiles moe ops at the top "
                           "level of a function (or of a moe.layer there), "
                           "each launched once per call of @"
                        << cast<func::FuncOp>(func).getSymName()
                        << "; move it out of the region";
  diag.attachNote(region->getLoc()) << "the enclosing op";
  return diag;
}

LogicalResult mlir::moe::verifyMoEPlacement(ModuleOp module,
                                            MoEPipelineKind kind) {
  bool failedAny = false;
  module.walk([&](Operation *op) {
    // A layer's body goes where the layer goes: the layer is checked.
    if (isa_and_nonnull<MoEDialect>(op->getDialect()) &&
        !isa_and_nonnull<LayerOp>(op->getParentOp()) && !isa<YieldOp>(op))
      failedAny |= failed(verifyOne(op, module, kind));
  });
  return failure(failedAny);
}
