//===- moe-translate.cpp - moe modules to files --------------------------===//
//
// mlir-translate with the translations out of MLIR that moe-mlir adds:
// `--moe-to-bundle` writes a compiled module for the runtime.
//
//===----------------------------------------------------------------------===//

#include "MoE/Target/Bundle.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  mlir::moe::registerToBundleTranslation();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "moe-mlir translation driver\n"));
}
