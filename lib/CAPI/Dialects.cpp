//===- Dialects.cpp - C API of the moe dialect ----------------------------===//

#include "MoE-c/Dialects.h"

#include "MoE/Dialect/MoEDialect.h"
#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(MoE, moe, mlir::moe::MoEDialect)
