//===- Pipelines.cpp - C API of the moe passes and pipelines -------------===//

#include "MoE-c/Pipelines.h"

#include "MoE/InitAll.h"
#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <mutex>

using namespace mlir;

void mlirMoERegisterPasses(void) {
  // MLIR built with assertions aborts on a pipeline registered twice.
  static std::once_flag registered;
  std::call_once(registered, moe::registerMoEPasses);
}

MlirLogicalResult mlirMoERunPipeline(MlirModule module, MlirStringRef name,
                                     MlirStringRef options) {
  mlirMoERegisterPasses();
  ModuleOp moduleOp = unwrap(module);
  std::string pipeline = unwrap(name).str();
  if (options.length != 0)
    pipeline += "{" + unwrap(options).str() + "}";

  auto pm = PassManager::on<ModuleOp>(moduleOp.getContext());
  std::string error;
  llvm::raw_string_ostream errorStream(error);
  if (failed(parsePassPipeline(pipeline, pm, errorStream))) {
    // The parser's first line says what is wrong; the rest points into the
    // text built here.
    emitError(moduleOp.getLoc()) << "cannot build pass pipeline '" << pipeline
                                 << "': " << StringRef(error).split('\n').first;
    return mlirLogicalResultFailure();
  }
  return wrap(pm.run(moduleOp));
}
