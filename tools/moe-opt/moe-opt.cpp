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

#include "llvm/ADT/STLExtras.h"

#include <vector>

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::moe::registerMoEPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates gpu.module bodies to LLVM IR.
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::moe::registerMoEDialect(registry);

  // A diagnostic names its op; the op itself (a whole module, for a
  // pipeline's errors) is printed only when asked for with
  // --mlir-print-op-on-diagnostic.
  std::vector<char *> args(argv, argv + argc);
  bool asked = llvm::any_of(args, [](const char *arg) {
    return llvm::StringRef(arg).contains("mlir-print-op-on-diagnostic");
  });
  static char quiet[] = "--mlir-print-op-on-diagnostic=false";
  if (!asked)
    args.insert(args.begin() + 1, quiet);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      int(args.size()), args.data(), "moe-mlir optimizer driver\n", registry));
}
