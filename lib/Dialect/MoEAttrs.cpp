//===- MoEAttrs.cpp - moe attributes and enums ---------------------------===//

#include "MoE/Dialect/MoEDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::moe;

#include "MoE/Dialect/MoEEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "MoE/Dialect/MoEAttrs.cpp.inc"

void MoEDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "MoE/Dialect/MoEAttrs.cpp.inc"
      >();
}

double mlir::moe::getMaxFiniteFP8(Type elementType) {
  return isa<Float8E5M2Type>(elementType) ? 57344.0 : 448.0;
}

RankedTensorType
mlir::moe::getBlockScalesType(RankedTensorType values,
                              BlockScaledEncodingAttr encoding) {
  SmallVector<int64_t> shape;
  for (auto [d, size] : llvm::enumerate(values.getShape()))
    shape.push_back(ShapedType::isDynamic(size)
                        ? size
                        : size / encoding.getBlockExtent(d, values.getRank()));
  return RankedTensorType::get(shape, encoding.getScale());
}

LogicalResult
BlockScaledEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                Type element, ArrayRef<int64_t> block,
                                Type scale) {
  if (!isa<Float8E4M3FNType, Float8E5M2Type>(element))
    return emitError() << "block_scaled element type must be f8E4M3FN or "
                          "f8E5M2, got "
                       << element;
  if (!isa<Float8E8M0FNUType, Float32Type>(scale))
    return emitError() << "block_scaled scale type must be f8E8M0FNU (MX) or "
                          "f32, got "
                       << scale;
  if (block.empty())
    return emitError() << "block_scaled block shape must not be empty";
  for (int64_t extent : block)
    if (extent < 1)
      return emitError() << "block_scaled block extents must be positive, got "
                         << extent;
  // OCP MX v1.0 fixes the block at 32 consecutive elements.
  if (isa<Float8E8M0FNUType>(scale)) {
    bool isOneByThirtyTwo =
        block.back() == 32 &&
        llvm::all_of(block.drop_back(), [](int64_t e) { return e == 1; });
    if (!isOneByThirtyTwo)
      return emitError() << "MX (f8E8M0FNU-scaled) encodings need blocks of "
                            "32 along the last dimension ([1, 32]), got ["
                         << block << "]";
  }
  return success();
}

int64_t BlockScaledEncodingAttr::getBlockExtent(int64_t dim,
                                                int64_t rank) const {
  int64_t lead = rank - static_cast<int64_t>(getBlock().size());
  return dim < lead ? 1 : getBlock()[dim - lead];
}
