//===- PlanRecords.h - an entry's launch plan as bundle records -*- C++ -*-===//

#ifndef MOE_TARGET_BUNDLE_PLANRECORDS_H
#define MOE_TARGET_BUNDLE_PLANRECORDS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Support/LLVM.h"

namespace mlir::moe {

/// Writes the launch plan of manifest entry `entry` (named `name`) as its
/// size, arg, check, work and launch records (docs/launch-plans.md);
/// nothing when it has none.
LogicalResult writePlanRecords(Location loc, StringRef name,
                               DictionaryAttr entry, llvm::raw_ostream &os);

} // namespace mlir::moe

#endif // MOE_TARGET_BUNDLE_PLANRECORDS_H
