//===- MoEDialect.cpp - moe dialect registration -------------------------===//

#include "MoE/Dialect/MoEDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::moe;

#include "MoE/Dialect/MoEOpsDialect.cpp.inc"

void MoEDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "MoE/Dialect/MoEOps.cpp.inc"
      >();
}
