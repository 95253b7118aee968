//===- Dialects.h - C API of the moe dialect ----------------------*- C -*-===//

#ifndef MOE_C_DIALECTS_H
#define MOE_C_DIALECTS_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

/// mlirGetDialectHandle__moe__(), for mlirDialectHandleInsertDialect,
/// mlirDialectHandleRegisterDialect and mlirDialectHandleLoadDialect.
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(MoE, moe);

#ifdef __cplusplus
}
#endif

#endif // MOE_C_DIALECTS_H
