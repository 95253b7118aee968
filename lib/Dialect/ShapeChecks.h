//===- ShapeChecks.h - shape checks of the moe verifiers -------*- C++ -*-===//
//
// Shared by the verifiers of the forward ops (MoEOps.cpp) and of their
// adjoints (MoEGradOps.cpp). Each check names the operand it rejects.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_DIALECT_SHAPECHECKS_H
#define MOE_DIALECT_SHAPECHECKS_H

#include "MoE/Dialect/MoEDialect.h"

namespace mlir::moe::shape_checks {

/// One dimension of a named operand or result, for shape diagnostics.
struct Dim {
  StringRef name;
  Value value;
  int64_t dim;

  int64_t size() const {
    return cast<RankedTensorType>(value.getType()).getDimSize(dim);
  }
};

/// A named operand or result and its layout (`[E, N, K]`; empty where the
/// rank is free), for the static size checks.
struct Sized {
  StringRef name;
  Value value;
  StringRef layout = "";
};

RankedTensorType tensorType(Value v);

/// Requires `v` to have rank `rank`; `layout` says what its dims mean.
LogicalResult checkRank(Operation *op, StringRef name, Value v, int64_t rank,
                        StringRef layout);

/// Requires `a` and `b` to agree where both are static.
LogicalResult checkSameExtent(Operation *op, StringRef meaning, Dim a, Dim b);

/// Requires a dimension to have exactly `expected` entries where static.
LogicalResult checkExtent(Operation *op, StringRef meaning, Dim a,
                          int64_t expected, StringRef why);

/// Requires `offsets` ([E+1], `numExperts` = E) to fit the experts that
/// `weights` holds: the weights define E, so a mismatch is the offsets'.
LogicalResult checkOffsetsFit(Operation *op, int64_t numExperts, Dim weights);

/// Requires a dimension to be static.
LogicalResult checkStatic(Operation *op, StringRef meaning, Dim a);

/// Requires every static dimension of `values` (null ones skipped) to be in
/// [1, kMaxLaunchRows], and each tensor's static bytes to fit int64: the
/// kernels and the runtime take 32-bit sizes (docs/runtime-contract.md §2),
/// and the lowerings compute offsets and byte counts from them. Names the
/// operand, the dimension and its meaning in the layout.
LogicalResult checkStaticSizes(Operation *op, ArrayRef<Sized> values);

/// Offsets are `[E + 1]`, statically sized: E is a model dimension. Returns E.
FailureOr<int64_t> verifyOffsets(Operation *op, Value offsets);

/// `alpha` and `limit` belong to gptoss only, and must be usable numbers.
LogicalResult verifyActivationParams(Operation *op, GatedActivation activation,
                                     std::optional<APFloat> alpha,
                                     std::optional<APFloat> limit);

/// An optional per-row scale `[M]` (a routing weight per expert row).
LogicalResult verifyRowScale(Operation *op, Value scale, Value rows);

/// Checks `[M, 2I] -> [M, I]` for a gated activation's input and output.
LogicalResult verifyGatedHalves(Operation *op, Dim gateUp, Dim out);

} // namespace mlir::moe::shape_checks

#endif // MOE_DIALECT_SHAPECHECKS_H
