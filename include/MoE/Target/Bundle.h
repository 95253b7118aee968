//===- Bundle.h - compiled moe modules as runtime bundles -------*- C++ -*-===//

#ifndef MOE_TARGET_BUNDLE_H
#define MOE_TARGET_BUNDLE_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::moe {

/// Writes `module`, the output of `--moe-gpu-pipeline` (gpu.binary ops with
/// cubins plus the `moe.manifest`), as a `.moebundle` in the layout of
/// docs/runtime-contract.md. Emits an error and fails on anything the
/// runtime could not load.
LogicalResult writeBundle(ModuleOp module, llvm::raw_ostream &os);

/// Registers `--moe-to-bundle` with mlir-translate style tools.
void registerToBundleTranslation();

} // namespace mlir::moe

#endif // MOE_TARGET_BUNDLE_H
