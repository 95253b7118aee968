//===- ShapeChecks.cpp - shape checks of the moe verifiers ---------------===//

#include "ShapeChecks.h"

#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace mlir::moe;

namespace mlir::moe::shape_checks {
RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

LogicalResult checkRank(Operation *op, StringRef name, Value v, int64_t rank,
                        StringRef layout) {
  int64_t actual = tensorType(v).getRank();
  if (actual == rank)
    return success();
  return op->emitOpError() << "'" << name << "' must have rank " << rank << " ("
                           << layout << "), got rank " << actual;
}

LogicalResult checkSameExtent(Operation *op, StringRef meaning, Dim a, Dim b) {
  int64_t sa = a.size(), sb = b.size();
  if (ShapedType::isDynamic(sa) || ShapedType::isDynamic(sb) || sa == sb)
    return success();
  return op->emitOpError() << meaning << " of '" << a.name << "' (dim " << a.dim
                           << " = " << sa << ") does not match '" << b.name
                           << "' (dim " << b.dim << " = " << sb << ")";
}

LogicalResult checkExtent(Operation *op, StringRef meaning, Dim a,
                          int64_t expected, StringRef why) {
  int64_t sa = a.size();
  if (ShapedType::isDynamic(sa) || sa == expected)
    return success();
  return op->emitOpError() << meaning << " of '" << a.name << "' (dim " << a.dim
                           << " = " << sa << ") must be " << expected << " ("
                           << why << ")";
}

LogicalResult checkOffsetsFit(Operation *op, int64_t numExperts, Dim weights) {
  int64_t experts = weights.size();
  if (ShapedType::isDynamic(experts) || experts == numExperts)
    return success();
  return op->emitOpError() << "'offsets' has " << numExperts + 1
                           << " entries, but '" << weights.name << "' holds "
                           << experts << " experts (dim " << weights.dim
                           << "): 'offsets' must have " << experts + 1
                           << " (one more than the experts)";
}

LogicalResult checkStatic(Operation *op, StringRef meaning, Dim a) {
  if (!ShapedType::isDynamic(a.size()))
    return success();
  return op->emitOpError() << meaning << " of '" << a.name << "' (dim " << a.dim
                           << ") must be static";
}

LogicalResult checkStaticSizes(Operation *op, ArrayRef<Sized> values) {
  for (const Sized &v : values) {
    if (!v.value)
      continue;
    auto type = dyn_cast<RankedTensorType>(v.value.getType());
    if (!type)
      continue;
    SmallVector<StringRef> letters;
    if (!v.layout.empty())
      v.layout.drop_front().drop_back().split(letters, ", ");
    if (static_cast<int64_t>(letters.size()) != type.getRank())
      letters.clear();
    std::optional<int64_t> elements = 1;
    for (auto [d, size] : llvm::enumerate(type.getShape())) {
      if (ShapedType::isDynamic(size))
        continue;
      if (size < 1 || size > kMaxLaunchRows) {
        InFlightDiagnostic diag = op->emitOpError()
                                  << "'" << v.name << "' dim " << d;
        if (!letters.empty())
          diag << " (" << letters[d] << " of " << v.layout << ")";
        return diag << " is " << size << ": a static size must be in [1, "
                    << kMaxLaunchRows
                    << "] (the kernels and the runtime take 32-bit sizes)";
      }
      elements = elements ? llvm::checkedMul(*elements, size) : std::nullopt;
    }
    Type element = type.getElementType();
    int64_t elementBytes =
        element.isIntOrFloat() ? (element.getIntOrFloatBitWidth() + 7) / 8 : 8;
    if (!elements || !llvm::checkedMul(*elements, elementBytes))
      return op->emitOpError()
             << "'" << v.name << "' (" << type
             << ") has more bytes than int64 counts: its static sizes "
                "multiply past 2^63";
  }
  return success();
}

FailureOr<int64_t> verifyOffsets(Operation *op, Value offsets) {
  if (failed(checkRank(op, "offsets", offsets, 1, "[E+1]")) ||
      failed(checkStatic(op, "expert count", {"offsets", offsets, 0})))
    return failure();
  int64_t size = tensorType(offsets).getDimSize(0);
  if (size < 2)
    return op->emitOpError()
           << "'offsets' must have E+1 >= 2 entries, got " << size;
  return size - 1;
}

LogicalResult verifyActivationParams(Operation *op, GatedActivation activation,
                                     std::optional<APFloat> alpha,
                                     std::optional<APFloat> limit) {
  if (activation != GatedActivation::gptoss && (alpha || limit))
    return op->emitOpError()
           << "'alpha' and 'limit' apply to the gptoss activation only";
  if (alpha && !alpha->isFiniteNonZero())
    return op->emitOpError() << "'alpha' must be finite and non-zero";
  if (limit && (!limit->isFiniteNonZero() || limit->isNegative()))
    return op->emitOpError() << "'limit' must be finite and positive";
  return success();
}

LogicalResult verifyRowScale(Operation *op, Value scale, Value rows) {
  if (!scale)
    return success();
  if (failed(checkRank(op, "row_scale", scale, 1, "[M]")))
    return failure();
  return checkSameExtent(op, "row count", {"row_scale", scale, 0},
                         {"rows", rows, 0});
}

LogicalResult verifyGatedHalves(Operation *op, Dim gateUp, Dim out) {
  int64_t twoI = gateUp.size(), width = out.size();
  if (!ShapedType::isDynamic(twoI) && twoI % 2 != 0)
    return op->emitOpError()
           << "'" << gateUp.name << "' dim " << gateUp.dim << " (" << twoI
           << ") must be even: gate columns, then up columns";
  if (!ShapedType::isDynamic(twoI) && !ShapedType::isDynamic(width) &&
      twoI != 2 * width)
    return op->emitOpError() << "'" << out.name << "' dim " << out.dim << " ("
                             << width << ") must be half of '" << gateUp.name
                             << "' dim " << gateUp.dim << " (" << twoI << ")";
  return success();
}

} // namespace mlir::moe::shape_checks
