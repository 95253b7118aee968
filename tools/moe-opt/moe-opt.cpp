//===- moe-opt.cpp - the moe optimizer driver ----------------------------===//
//
// mlir-opt with every upstream dialect, pass and extension, plus the moe
// dialect, its passes and its named pipelines.
//
//===----------------------------------------------------------------------===//

#include "MoE/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::moe::registerMoEPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates gpu.module bodies to LLVM IR.
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::moe::registerMoEDialect(registry);

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "moe-mlir optimizer driver\n", registry));
}
