//===- InitAll.h - register everything moe provides -------------*- C++ -*-===//

#ifndef MOE_INITALL_H
#define MOE_INITALL_H

#include "MoE/Conversion/Passes.h"
#include "MoE/Dialect/MoEDialect.h"
#include "MoE/Pipelines/Pipelines.h"
#include "MoE/Target/Passes.h"
#include "MoE/Transforms/Passes.h"
#include "mlir/IR/DialectRegistry.h"

namespace mlir::moe {

/// Adds the moe dialect to `registry`.
inline void registerMoEDialect(DialectRegistry &registry) {
  registry.insert<MoEDialect>();
}

/// Registers moe passes and named pipelines with the global registry.
inline void registerMoEPasses() {
  registerMoETransformsPasses();
  registerMoEConversionPasses();
  registerMoETargetPasses();
  registerMoEPipelines();
}

} // namespace mlir::moe

#endif // MOE_INITALL_H
