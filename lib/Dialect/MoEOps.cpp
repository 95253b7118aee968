//===- MoEOps.cpp - moe op verifiers -------------------------------------===//

#include "MoE/Dialect/MoEDialect.h"
#include "ShapeChecks.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

#include "llvm/Support/CheckedArithmetic.h"

#include <cmath>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::shape_checks;

//===----------------------------------------------------------------------===//
// RouteOp
//===----------------------------------------------------------------------===//

LogicalResult RouteOp::verify() {
  Operation *op = getOperation();
  Value logits = getLogits(), ids = getExpertIds(), weights = getWeights();
  if (failed(checkRank(op, "logits", logits, 2, "[T, E]")) ||
      failed(checkRank(op, "expert_ids", ids, 2, "[T, k]")) ||
      failed(checkRank(op, "weights", weights, 2, "[T, k]")) ||
      failed(checkStatic(op, "expert count", {"logits", logits, 1})) ||
      failed(checkStaticSizes(
          op, {{"logits", logits, "[T, E]"},
               {"expert_ids", ids, "[T, k]"},
               {"weights", weights, "[T, k]"},
               {"correction_bias", getCorrectionBias(), "[E]"}})))
    return failure();
  int64_t numExperts = tensorType(logits).getDimSize(1);
  int64_t k = getTopK();
  if (k < 1 || k > numExperts)
    return emitOpError() << "'top' must be in [1, " << numExperts
                         << "] (the expert count of 'logits'), got " << k;
  // Shared slots: experts E .. E+c-1 after the k routed ones.
  int64_t shared = getSharedSlots();
  if (getSharedExperts() &&
      (shared < 1 || shared > kMaxLaunchRows - numExperts))
    return emitOpError() << "'shared' must be in [1, "
                         << kMaxLaunchRows - numExperts << "], got " << shared;
  int64_t slots = k + shared;
  StringRef what = shared ? "'top' plus 'shared'" : "the 'top' attribute";
  if (failed(checkSameExtent(op, "token count", {"expert_ids", ids, 0},
                             {"logits", logits, 0})) ||
      failed(checkSameExtent(op, "token count", {"weights", weights, 0},
                             {"logits", logits, 0})) ||
      failed(checkExtent(op, "experts per token", {"expert_ids", ids, 1}, slots,
                         what)) ||
      failed(checkExtent(op, "experts per token", {"weights", weights, 1},
                         slots, what)))
    return failure();
  if (Value tokens = getSharedTokens()) {
    Value gate = getSharedGate();
    if (!shared)
      return emitOpError() << "'gate' scales shared slots: it needs 'shared'";
    if (failed(checkRank(op, "gate tokens", tokens, 2, "[T, H]")) ||
        failed(checkRank(op, "gate weights", gate, 2, "[1, H]")) ||
        failed(checkStaticSizes(op, {{"gate tokens", tokens, "[T, H]"},
                                     {"gate weights", gate, "[1, H]"}})) ||
        failed(checkSameExtent(op, "token count", {"gate tokens", tokens, 0},
                               {"logits", logits, 0})) ||
        failed(checkExtent(op, "gate count", {"gate weights", gate, 0}, 1,
                           "one shared gate")) ||
        failed(checkSameExtent(op, "hidden size", {"gate weights", gate, 1},
                               {"gate tokens", tokens, 1})))
      return failure();
  }

  if (Value bias = getCorrectionBias()) {
    if (getRouting() != Routing::sigmoid_topk)
      return emitOpError() << "'correction_bias' is only defined for "
                              "sigmoid_topk routing";
    if (failed(checkRank(op, "correction_bias", bias, 1, "[E]")) ||
        failed(checkExtent(op, "expert count", {"correction_bias", bias, 0},
                           numExperts, "the expert count of 'logits'")))
      return failure();
  }

  if (getNumGroups().has_value() != getTopGroups().has_value())
    return emitOpError() << "'num_groups' and 'top_groups' must be given "
                            "together";
  if (getNumGroups()) {
    if (getRouting() == Routing::topk_softmax)
      return emitOpError() << "group-limited routing needs softmax_topk or "
                              "sigmoid_topk scores";
    int64_t groups = *getNumGroups(), topGroups = *getTopGroups();
    if (groups < 1 || numExperts % groups != 0)
      return emitOpError() << "'groups' (" << groups
                           << ") must divide the expert count " << numExperts;
    if (topGroups < 1 || topGroups > groups)
      return emitOpError() << "'select' must be in [1, " << groups
                           << "] groups, got " << topGroups;
    int64_t reachable = topGroups * (numExperts / groups);
    if (k > reachable)
      return emitOpError() << "'top' (" << k << ") exceeds the " << reachable
                           << " experts in the " << topGroups
                           << " selected groups";
  }

  if (std::optional<APFloat> scale = getScalingFactor())
    if (!scale->isFiniteNonZero() || scale->isNegative())
      return emitOpError() << "'scale' must be finite and positive";
  return success();
}

//===----------------------------------------------------------------------===//
// PermuteOp
//===----------------------------------------------------------------------===//

LogicalResult PermuteOp::verify() {
  Operation *op = getOperation();
  Value tokens = getTokens(), ids = getExpertIds(), rows = getRows(),
        slots = getSlots();
  if (failed(checkRank(op, "tokens", tokens, 2, "[T, H]")) ||
      failed(checkRank(op, "expert_ids", ids, 2, "[T, k]")) ||
      failed(checkRank(op, "rows", rows, 2, "[M, H]")) ||
      failed(checkRank(op, "slots", slots, 2, "[T, k]")) ||
      failed(checkStaticSizes(op, {{"tokens", tokens, "[T, H]"},
                                   {"expert_ids", ids, "[T, k]"},
                                   {"rows", rows, "[M, H]"},
                                   {"offsets", getOffsets(), "[E+1]"},
                                   {"slots", slots, "[T, k]"}})))
    return failure();
  FailureOr<int64_t> numExperts = verifyOffsets(op, getOffsets());
  if (failed(numExperts))
    return failure();
  if (failed(checkSameExtent(op, "token count", {"expert_ids", ids, 0},
                             {"tokens", tokens, 0})) ||
      failed(checkSameExtent(op, "token count", {"slots", slots, 0},
                             {"expert_ids", ids, 0})) ||
      failed(checkSameExtent(op, "experts per token", {"slots", slots, 1},
                             {"expert_ids", ids, 1})) ||
      failed(checkSameExtent(op, "hidden size", {"rows", rows, 1},
                             {"tokens", tokens, 1})))
    return failure();
  if (getElementTypeOrSelf(rows) != getElementTypeOrSelf(tokens))
    return emitOpError() << "'rows' element type must match 'tokens'";

  int64_t padTo = getPadTo().value_or(1);
  if (padTo < 1 || padTo > kMaxPadTo)
    return emitOpError() << "'pad_to' must be in [1, " << kMaxPadTo << "], got "
                         << padTo;
  // Shapes come from untrusted IR: compute the row count without overflow.
  std::optional<int64_t> padding = llvm::checkedMul(*numExperts, padTo - 1);
  if (!padding)
    return emitOpError() << "padding E*(pad_to-1) overflows int64";
  int64_t numTokens = tensorType(tokens).getDimSize(0);
  int64_t k = tensorType(ids).getDimSize(1);
  int64_t numRows = tensorType(rows).getDimSize(0);
  if (ShapedType::isDynamic(numTokens) || ShapedType::isDynamic(k)) {
    if (!ShapedType::isDynamic(numRows))
      return emitOpError() << "row count of 'rows' must be dynamic when the "
                              "token count or k is dynamic";
    return success();
  }
  std::optional<int64_t> pairs = llvm::checkedMul(numTokens, k);
  std::optional<int64_t> expected =
      pairs ? llvm::checkedAdd(*pairs, *padding) : std::nullopt;
  if (!expected)
    return emitOpError() << "row count T*k + E*(pad_to-1) overflows int64";
  return checkExtent(op, "row count", {"rows", rows, 0}, *expected,
                     "T*k + E*(pad_to-1)");
}

//===----------------------------------------------------------------------===//
// GroupedMatmulOp
//===----------------------------------------------------------------------===//

LogicalResult GroupedMatmulOp::verify() {
  Operation *op = getOperation();
  Value rows = getRows(), weights = getWeights(), result = getResult();
  StringRef weightsShape = getKnWeights() ? "[E, K, N]" : "[E, N, K]";
  unsigned nDim = getWeightsNDim(), kDim = getWeightsKDim();
  if (failed(checkRank(op, "rows", rows, 2, "[M, K]")) ||
      failed(checkRank(op, "weights", weights, 3, weightsShape)) ||
      failed(checkRank(op, "result", result, 2, "[M, N]")) ||
      failed(checkStaticSizes(op, {{"rows", rows, "[M, K]"},
                                   {"weights", weights, weightsShape},
                                   {"offsets", getOffsets(), "[E+1]"},
                                   {"bias", getBias(), "[E, N]"},
                                   {"row_scale", getRowScale(), "[M]"},
                                   {"result", result, "[M, N]"}})))
    return failure();
  FailureOr<int64_t> numExperts = verifyOffsets(op, getOffsets());
  if (failed(numExperts) ||
      failed(checkOffsetsFit(op, *numExperts, {"weights", weights, 0})) ||
      failed(checkSameExtent(op, "contraction size", {"rows", rows, 1},
                             {"weights", weights, kDim})) ||
      failed(checkSameExtent(op, "row count", {"result", result, 0},
                             {"rows", rows, 0})) ||
      failed(checkSameExtent(op, "output size", {"result", result, 1},
                             {"weights", weights, nDim})))
    return failure();
  if (getElementTypeOrSelf(rows) != getElementTypeOrSelf(weights))
    return emitOpError() << "'rows' and 'weights' must have the same element "
                            "type";
  if (Value bias = getBias())
    if (failed(checkRank(op, "bias", bias, 2, "[E, N]")) ||
        failed(checkExtent(op, "expert count", {"bias", bias, 0}, *numExperts,
                           "the size of 'offsets' minus one")) ||
        failed(checkSameExtent(op, "output size", {"bias", bias, 1},
                               {"weights", weights, nDim})))
      return failure();
  return verifyRowScale(op, getRowScale(), rows);
}

//===----------------------------------------------------------------------===//
// SwiGLUOp
//===----------------------------------------------------------------------===//

LogicalResult SwiGLUOp::verify() {
  Operation *op = getOperation();
  Value input = getInput(), result = getResult();
  if (failed(checkRank(op, "input", input, 2, "[M, 2I]")) ||
      failed(checkRank(op, "result", result, 2, "[M, I]")) ||
      failed(checkStaticSizes(op, {{"input", input, "[M, 2I]"},
                                   {"result", result, "[M, I]"},
                                   {"scale", getScale(), "[M]"}})) ||
      failed(checkSameExtent(op, "row count", {"result", result, 0},
                             {"input", input, 0})) ||
      failed(
          verifyGatedHalves(op, {"input", input, 1}, {"result", result, 1})) ||
      failed(
          verifyActivationParams(op, getActivation(), getAlpha(), getLimit())))
    return failure();
  if (Value scale = getScale())
    if (failed(checkRank(op, "scale", scale, 1, "[M]")) ||
        failed(checkSameExtent(op, "row count", {"scale", scale, 0},
                               {"input", input, 0})))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// UnpermuteOp
//===----------------------------------------------------------------------===//

LogicalResult UnpermuteOp::verify() {
  Operation *op = getOperation();
  Value rows = getRows(), slots = getSlots(), result = getResult();
  if (failed(checkRank(op, "rows", rows, 2, "[M, H]")) ||
      failed(checkRank(op, "slots", slots, 2, "[T, k]")) ||
      failed(checkRank(op, "result", result, 2, "[T, H]")) ||
      failed(checkStaticSizes(op, {{"rows", rows, "[M, H]"},
                                   {"slots", slots, "[T, k]"},
                                   {"weights", getWeights(), "[T, k]"},
                                   {"shared", getShared(), "[T, H]"},
                                   {"result", result, "[T, H]"}})) ||
      failed(checkSameExtent(op, "token count", {"result", result, 0},
                             {"slots", slots, 0})) ||
      failed(checkSameExtent(op, "hidden size", {"result", result, 1},
                             {"rows", rows, 1})))
    return failure();
  if (Value weights = getWeights())
    if (failed(checkRank(op, "weights", weights, 2, "[T, k]")) ||
        failed(checkSameExtent(op, "token count", {"weights", weights, 0},
                               {"slots", slots, 0})) ||
        failed(checkSameExtent(op, "experts per token", {"weights", weights, 1},
                               {"slots", slots, 1})))
      return failure();
  if (Value shared = getShared()) {
    if (failed(checkRank(op, "shared", shared, 2, "[T, H]")) ||
        failed(checkSameExtent(op, "token count", {"shared", shared, 0},
                               {"result", result, 0})) ||
        failed(checkSameExtent(op, "hidden size", {"shared", shared, 1},
                               {"result", result, 1})))
      return failure();
    if (getElementTypeOrSelf(shared) != getElementTypeOrSelf(result))
      return emitOpError() << "'shared' element type "
                           << getElementTypeOrSelf(shared)
                           << " must be the result's ("
                           << getElementTypeOrSelf(result) << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// SharedMLPOp
//===----------------------------------------------------------------------===//

LogicalResult SharedMLPOp::verify() {
  Operation *op = getOperation();
  Value tokens = getTokens(), w13 = getGateUpWeights(), w2 = getDownWeights(),
        result = getResult();
  if (getActivation() != GatedActivation::silu)
    return emitOpError() << "supports the silu activation only, got '"
                         << stringifyGatedActivation(getActivation())
                         << "' (no model has a shared expert of another form)";
  if (failed(checkRank(op, "tokens", tokens, 2, "[T, H]")) ||
      failed(checkRank(op, "gate_up_weights", w13, 2, "[2Is, H]")) ||
      failed(checkRank(op, "down_weights", w2, 2, "[H, Is]")) ||
      failed(checkRank(op, "result", result, 2, "[T, H]")) ||
      failed(checkStaticSizes(op, {{"tokens", tokens, "[T, H]"},
                                   {"gate_up_weights", w13, "[2Is, H]"},
                                   {"down_weights", w2, "[H, Is]"},
                                   {"gate_weights", getGateWeights(), "[1, H]"},
                                   {"result", result, "[T, H]"}})) ||
      failed(checkSameExtent(op, "hidden size", {"gate_up_weights", w13, 1},
                             {"tokens", tokens, 1})) ||
      failed(checkSameExtent(op, "hidden size", {"down_weights", w2, 0},
                             {"tokens", tokens, 1})) ||
      failed(verifyGatedHalves(op, {"gate_up_weights", w13, 0},
                               {"down_weights", w2, 1})) ||
      failed(checkSameExtent(op, "token count", {"result", result, 0},
                             {"tokens", tokens, 0})) ||
      failed(checkSameExtent(op, "hidden size", {"result", result, 1},
                             {"tokens", tokens, 1})))
    return failure();
  Type elementType = getElementTypeOrSelf(tokens);
  for (auto [name, value] :
       {std::pair<StringRef, Value>{"gate_up_weights", w13},
        {"down_weights", w2},
        {"gate_weights", getGateWeights()}})
    if (value && getElementTypeOrSelf(value) != elementType)
      return emitOpError() << "'" << name << "' element type "
                           << getElementTypeOrSelf(value)
                           << " must be the element type of 'tokens' ("
                           << elementType << ")";
  if (Value gate = getGateWeights())
    if (failed(checkRank(op, "gate_weights", gate, 2, "[1, H]")) ||
        failed(checkStatic(op, "gate count", {"gate_weights", gate, 0})) ||
        failed(checkExtent(op, "gate count", {"gate_weights", gate, 0}, 1,
                           "one gate logit per token")) ||
        failed(checkSameExtent(op, "hidden size", {"gate_weights", gate, 1},
                               {"tokens", tokens, 1})))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// QuantizeOp / DequantizeOp
//===----------------------------------------------------------------------===//

/// Checks that the blocks of `encoding` tile `data` (named `name`): a block
/// of at most its rank, dividing each static dim, 1 along dynamic ones.
static LogicalResult verifyBlocks(Operation *op,
                                  BlockScaledEncodingAttr encoding, Value data,
                                  StringRef name) {
  RankedTensorType type = tensorType(data);
  int64_t rank = type.getRank();
  if (static_cast<int64_t>(encoding.getBlock().size()) > rank)
    return op->emitOpError()
           << "block shape of rank " << encoding.getBlock().size()
           << " does not fit '" << name << "' of rank " << rank;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = type.getDimSize(d);
    int64_t block = encoding.getBlockExtent(d, rank);
    if (ShapedType::isDynamic(size) && block != 1)
      return op->emitOpError()
             << "dim " << d << " of '" << name
             << "' is dynamic, so its block extent must be 1, got " << block;
    if (!ShapedType::isDynamic(size) && size % block != 0)
      return op->emitOpError()
             << "block extent " << block << " does not divide dim " << d
             << " of '" << name << "' (" << size << ")";
  }
  return success();
}

/// Checks that `values` and `scales` fit `encoding` for data of shape
/// `values`: element and scale types, and one scale per block.
static LogicalResult verifyBlockScaled(Operation *op,
                                       BlockScaledEncodingAttr encoding,
                                       Value values, Value scales) {
  RankedTensorType valuesType = tensorType(values);
  RankedTensorType scalesType = tensorType(scales);
  int64_t rank = valuesType.getRank();
  if (valuesType.getElementType() != encoding.getElement())
    return op->emitOpError()
           << "'values' element type " << valuesType.getElementType()
           << " does not match the encoding's " << encoding.getElement();
  if (scalesType.getElementType() != encoding.getScale())
    return op->emitOpError()
           << "'scales' element type " << scalesType.getElementType()
           << " does not match the encoding's " << encoding.getScale();
  if (failed(verifyBlocks(op, encoding, values, "values")))
    return failure();
  if (scalesType.getRank() != rank)
    return op->emitOpError()
           << "'scales' must have rank " << rank
           << " (one scale per block), got rank " << scalesType.getRank();
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = valuesType.getDimSize(d);
    int64_t block = encoding.getBlockExtent(d, rank);
    int64_t scaleSize = scalesType.getDimSize(d);
    if (ShapedType::isDynamic(size)) {
      if (!ShapedType::isDynamic(scaleSize))
        return op->emitOpError() << "dim " << d
                                 << " of 'scales' must be dynamic like "
                                    "'values'";
      continue;
    }
    if (!ShapedType::isDynamic(scaleSize) && scaleSize != size / block)
      return op->emitOpError()
             << "dim " << d << " of 'scales' (" << scaleSize << ") must be "
             << size / block << " (one scale per block of " << block << ")";
  }
  return success();
}

LogicalResult QuantizeOp::verify() {
  if (failed(checkStaticSizes(getOperation(), {{"input", getInput()},
                                               {"values", getValues()},
                                               {"scales", getScales()}})))
    return failure();
  if (tensorType(getInput()).getShape() != tensorType(getValues()).getShape())
    return emitOpError() << "'values' must have the shape of 'input'";
  return verifyBlockScaled(getOperation(), getEncoding(), getValues(),
                           getScales());
}

LogicalResult DequantizeOp::verify() {
  if (failed(checkStaticSizes(getOperation(), {{"values", getValues()},
                                               {"scales", getScales()},
                                               {"result", getResult()}})))
    return failure();
  if (tensorType(getResult()).getShape() != tensorType(getValues()).getShape())
    return emitOpError() << "'result' must have the shape of 'values'";
  return verifyBlockScaled(getOperation(), getEncoding(), getValues(),
                           getScales());
}

LogicalResult FakeQuantizeOp::verify() {
  if (failed(checkStaticSizes(getOperation(), {{"input", getInput()}})))
    return failure();
  // The blocks as moe.quantize checks them (the pair's scales are implied).
  return verifyBlocks(getOperation(), getEncoding(), getInput(), "input");
}

//===----------------------------------------------------------------------===//
// ExpertMLPOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertMLPOp::verify() {
  Operation *op = getOperation();
  Value rows = getRows(), w13 = getGateUpWeights(), w2 = getDownWeights(),
        result = getResult();
  if (failed(checkRank(op, "rows", rows, 2, "[M, H]")) ||
      failed(checkRank(op, "gate_up_weights", w13, 3, "[E, 2I, H]")) ||
      failed(checkRank(op, "down_weights", w2, 3, "[E, H, I]")) ||
      failed(checkRank(op, "result", result, 2, "[M, H]")) ||
      failed(checkStaticSizes(op, {{"rows", rows, "[M, H]"},
                                   {"offsets", getOffsets(), "[E+1]"},
                                   {"gate_up_weights", w13, "[E, 2I, H]"},
                                   {"down_weights", w2, "[E, H, I]"},
                                   {"gate_up_bias", getGateUpBias(), "[E, 2I]"},
                                   {"down_bias", getDownBias(), "[E, H]"},
                                   {"row_scale", getRowScale(), "[M]"},
                                   {"result", result, "[M, H]"}})))
    return failure();
  FailureOr<int64_t> numExperts = verifyOffsets(op, getOffsets());
  if (failed(numExperts))
    return failure();
  StringRef why = "the size of 'offsets' minus one";
  if (failed(checkOffsetsFit(op, *numExperts, {"gate_up_weights", w13, 0})) ||
      failed(checkExtent(op, "expert count", {"down_weights", w2, 0},
                         *numExperts, why)) ||
      failed(checkSameExtent(op, "hidden size", {"gate_up_weights", w13, 2},
                             {"rows", rows, 1})) ||
      failed(checkSameExtent(op, "hidden size", {"down_weights", w2, 1},
                             {"rows", rows, 1})) ||
      failed(verifyGatedHalves(op, {"gate_up_weights", w13, 1},
                               {"down_weights", w2, 2})) ||
      failed(checkSameExtent(op, "row count", {"result", result, 0},
                             {"rows", rows, 0})) ||
      failed(checkSameExtent(op, "hidden size", {"result", result, 1},
                             {"rows", rows, 1})) ||
      failed(
          verifyActivationParams(op, getActivation(), getAlpha(), getLimit())))
    return failure();
  Type elementType = getElementTypeOrSelf(rows);
  if (getElementTypeOrSelf(w13) != elementType ||
      getElementTypeOrSelf(w2) != elementType)
    return emitOpError() << "'gate_up_weights' and 'down_weights' must have "
                            "the element type of 'rows'";
  if (Value bias = getGateUpBias())
    if (failed(checkRank(op, "gate_up_bias", bias, 2, "[E, 2I]")) ||
        failed(checkExtent(op, "expert count", {"gate_up_bias", bias, 0},
                           *numExperts, why)) ||
        failed(checkSameExtent(op, "gate-up width", {"gate_up_bias", bias, 1},
                               {"gate_up_weights", w13, 1})))
      return failure();
  if (Value bias = getDownBias())
    if (failed(checkRank(op, "down_bias", bias, 2, "[E, H]")) ||
        failed(checkExtent(op, "expert count", {"down_bias", bias, 0},
                           *numExperts, why)) ||
        failed(checkSameExtent(op, "hidden size", {"down_bias", bias, 1},
                               {"rows", rows, 1})))
      return failure();
  if (BlockScaledEncodingAttr encoding = getIntermediateAttr()) {
    // The activation [M, I] is quantized in groups along I, one row at a time.
    ArrayRef<int64_t> block = encoding.getBlock();
    if (block.size() != 2 || block[0] != 1)
      return emitOpError() << "'intermediate' must have a [1, B] block (groups "
                              "along I of the [M, I] activation), got ["
                           << block << "]";
    int64_t width = tensorType(w2).getDimSize(2);
    if (!ShapedType::isDynamic(width) && width % block[1] != 0)
      return emitOpError() << "'intermediate' block " << block[1]
                           << " does not divide the expert width I = " << width
                           << " ('down_weights' dim 2)";
  }
  return verifyRowScale(op, getRowScale(), rows);
}

LogicalResult LayerOp::verifyRegions() {
  Block &body = getBody().front();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError() << "body must end with 'moe.yield'";
  if (yield.getValue().getType() != getType())
    return emitOpError() << "yields " << yield.getValue().getType()
                         << " but its result is " << getType();
  // The body is the layer's moe ops only: what compiles to one unit.
  for (Operation &op : body.without_terminator())
    if (!isa<MoEDialect>(op.getDialect()) || isa<LayerOp>(op))
      return op.emitOpError() << "cannot be part of a moe.layer: its body "
                                 "holds moe ops other than moe.layer only";
  return success();
}

std::optional<std::pair<QuantizeOp, DequantizeOp>>
mlir::moe::getRowsRoundTrip(Value dequantized) {
  auto dequantize = dequantized.getDefiningOp<DequantizeOp>();
  if (!dequantize || !dequantize->hasOneUse())
    return std::nullopt;
  auto quantize = dequantize.getValues().getDefiningOp<QuantizeOp>();
  if (!quantize || dequantize.getScales() != quantize.getScales() ||
      dequantize.getEncoding() != quantize.getEncoding() ||
      !quantize.getValues().hasOneUse() || !quantize.getScales().hasOneUse())
    return std::nullopt;
  return std::make_pair(quantize, dequantize);
}

std::optional<LayerChain> mlir::moe::getLayerChain(LayerOp layer) {
  Block &body = layer.getBody().front();
  auto ops =
      llvm::to_vector(llvm::make_pointer_range(body.without_terminator()));
  // A leading route (else the ids and weights come from outside), then the
  // permute, the rows' quantize -> dequantize pair when quantized or their
  // moe.fake_quantize, the expert MLP and the combine.
  LayerChain chain{};
  ArrayRef<Operation *> rest = ops;
  if (!rest.empty() && (chain.route = dyn_cast<RouteOp>(rest.front())))
    rest = rest.drop_front();
  bool quantized = rest.size() == 5, roundTrip = rest.size() == 4;
  if (rest.size() != 3 && !quantized && !roundTrip)
    return std::nullopt;
  chain.permute = dyn_cast<PermuteOp>(rest[0]);
  if (quantized) {
    chain.rowsQuantize = dyn_cast<QuantizeOp>(rest[1]);
    chain.rowsDequantize = dyn_cast<DequantizeOp>(rest[2]);
  }
  if (roundTrip && !(chain.rowsRoundTrip = dyn_cast<FakeQuantizeOp>(rest[1])))
    return std::nullopt;
  chain.mlp = dyn_cast<ExpertMLPOp>(rest[rest.size() - 2]);
  chain.combine = dyn_cast<UnpermuteOp>(rest.back());
  if (!chain.permute || !chain.mlp || !chain.combine)
    return std::nullopt;
  Value mlpRows = chain.permute.getRows();
  if (quantized) {
    auto roundTrip = getRowsRoundTrip(chain.mlp.getRows());
    if (!roundTrip || roundTrip->first != chain.rowsQuantize ||
        roundTrip->second != chain.rowsDequantize ||
        chain.rowsQuantize.getInput() != chain.permute.getRows())
      return std::nullopt;
    mlpRows = chain.rowsDequantize.getResult();
  }
  if (roundTrip) {
    if (chain.rowsRoundTrip.getInput() != mlpRows || !mlpRows.hasOneUse())
      return std::nullopt;
    mlpRows = chain.rowsRoundTrip.getResult();
  }
  // layer.v1 has no shared expert: its combine adds nothing.
  if (chain.combine.getShared())
    return std::nullopt;
  // The combine is weighted: by the route's weights, or by weights from
  // outside the layer (as the ids then are).
  Value ids = chain.permute.getExpertIds(),
        weights = chain.combine.getWeights();
  auto inside = [&](Value value) {
    return layer.getBody().isAncestor(value.getParentRegion());
  };
  if (!weights || (chain.route ? ids != chain.route.getExpertIds() ||
                                     weights != chain.route.getWeights()
                               : inside(ids) || inside(weights)))
    return std::nullopt;
  if (chain.mlp.getRows() != mlpRows ||
      chain.mlp.getOffsets() != chain.permute.getOffsets() ||
      chain.combine.getRows() != chain.mlp.getResult() ||
      chain.combine.getSlots() != chain.permute.getSlots() ||
      cast<YieldOp>(body.getTerminator()).getValue() !=
          chain.combine.getResult())
    return std::nullopt;
  return chain;
}

#define GET_OP_CLASSES
#include "MoE/Dialect/MoEOps.cpp.inc"
