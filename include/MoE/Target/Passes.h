//===- Passes.h - moe target steps ------------------------------*- C++ -*-===//

#ifndef MOE_TARGET_PASSES_H
#define MOE_TARGET_PASSES_H

#include "MoE/Target/Contract.h"

#include "mlir/Pass/Pass.h"

namespace mlir::moe {

#define GEN_PASS_DECL
#include "MoE/Target/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "MoE/Target/Passes.h.inc"

} // namespace mlir::moe

#endif // MOE_TARGET_PASSES_H
