//===- MoEGradOps.cpp - verifiers of the moe backward ops ----------------===//

#include "MoE/Dialect/MoEDialect.h"
#include "ShapeChecks.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::shape_checks;

/// Requires `grad` to have `primal`'s static dims and element type: the
/// gradient of a tensor is shaped like it.
static LogicalResult checkShapedLike(Operation *op, StringRef gradName,
                                     Value grad, StringRef primalName,
                                     Value primal) {
  auto gradType = tensorType(grad), primalType = tensorType(primal);
  if (gradType.getRank() != primalType.getRank())
    return op->emitOpError() << "'" << gradName << "' must have the rank of '"
                             << primalName << "' (" << primalType.getRank()
                             << "), got rank " << gradType.getRank();
  for (int64_t d = 0; d < gradType.getRank(); ++d)
    if (failed(checkSameExtent(op, "size", {gradName, grad, d},
                               {primalName, primal, d})))
      return failure();
  if (gradType.getElementType() != primalType.getElementType())
    return op->emitOpError()
           << "'" << gradName << "' element type " << gradType.getElementType()
           << " must be the element type of '" << primalName << "' ("
           << primalType.getElementType() << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// UnpermuteGradOp
//===----------------------------------------------------------------------===//

LogicalResult UnpermuteGradOp::verify() {
  Operation *op = getOperation();
  Value grad = getGrad(), rows = getRows(), slots = getSlots(),
        weights = getWeights(), weightsGrad = getWeightsGrad();
  if (failed(checkRank(op, "grad", grad, 2, "[T, H]")) ||
      failed(checkRank(op, "rows", rows, 2, "[M, H]")) ||
      failed(checkRank(op, "slots", slots, 2, "[T, k]")) ||
      failed(checkStaticSizes(op, {{"grad", grad, "[T, H]"},
                                   {"rows", rows, "[M, H]"},
                                   {"slots", slots, "[T, k]"},
                                   {"weights", weights, "[T, k]"},
                                   {"rows_grad", getRowsGrad(), "[M, H]"},
                                   {"weights_grad", weightsGrad, "[T, k]"}})) ||
      failed(checkSameExtent(op, "token count", {"slots", slots, 0},
                             {"grad", grad, 0})) ||
      failed(checkSameExtent(op, "hidden size", {"rows", rows, 1},
                             {"grad", grad, 1})) ||
      failed(checkShapedLike(op, "rows_grad", getRowsGrad(), "rows", rows)))
    return failure();
  if (weights && !weightsGrad)
    return emitOpError() << "with 'weights' the op has a second result, "
                            "'weights_grad'";
  if (!weights && weightsGrad)
    return emitOpError() << "'weights_grad' needs 'weights' (without them "
                            "every weight is 1 and has no gradient)";
  if (!weights)
    return success();
  if (failed(checkRank(op, "weights", weights, 2, "[T, k]")) ||
      failed(checkSameExtent(op, "token count", {"weights", weights, 0},
                             {"slots", slots, 0})) ||
      failed(checkSameExtent(op, "experts per token", {"weights", weights, 1},
                             {"slots", slots, 1})))
    return failure();
  return checkShapedLike(op, "weights_grad", weightsGrad, "weights", weights);
}

//===----------------------------------------------------------------------===//
// GroupedDgradOp / GroupedWgradOp
//===----------------------------------------------------------------------===//

LogicalResult GroupedDgradOp::verify() {
  Operation *op = getOperation();
  Value grad = getGrad(), weights = getWeights(), result = getResult(),
        actInput = getActInput();
  // Fused: the result is the [M, 2K] gradient of the activation's input.
  bool fused = static_cast<bool>(actInput);
  if (fused != getActivation().has_value())
    return emitOpError() << "'act_input' and 'activation' come together "
                            "(act_grad <activation> %input)";
  if (!fused && (getAlpha() || getLimit()))
    return emitOpError() << "'alpha' and 'limit' need act_grad gptoss";
  StringRef resultShape = fused ? "[M, 2K]" : "[M, K]";
  if (failed(checkRank(op, "grad", grad, 2, "[M, N]")) ||
      failed(checkRank(op, "weights", weights, 3, "[E, N, K]")) ||
      failed(checkRank(op, "result", result, 2, resultShape)) ||
      (fused && failed(checkRank(op, "act_input", actInput, 2, "[M, 2K]"))) ||
      failed(checkStaticSizes(op, {{"grad", grad, "[M, N]"},
                                   {"weights", weights, "[E, N, K]"},
                                   {"offsets", getOffsets(), "[E+1]"},
                                   {"act_input", actInput, "[M, 2K]"},
                                   {"result", result, resultShape}})))
    return failure();
  if (fused &&
      (failed(checkSameExtent(op, "row count", {"act_input", actInput, 0},
                              {"grad", grad, 0})) ||
       failed(verifyGatedHalves(op, {"act_input", actInput, 1},
                                {"weights", weights, 2})) ||
       failed(checkShapedLike(op, "result", result, "act_input", actInput)) ||
       failed(verifyActivationParams(op, *getActivation(), getAlpha(),
                                     getLimit()))))
    return failure();
  FailureOr<int64_t> numExperts = verifyOffsets(op, getOffsets());
  if (failed(numExperts) ||
      failed(checkOffsetsFit(op, *numExperts, {"weights", weights, 0})) ||
      failed(checkSameExtent(op, "contraction size", {"grad", grad, 1},
                             {"weights", weights, 1})) ||
      failed(checkSameExtent(op, "row count", {"result", result, 0},
                             {"grad", grad, 0})) ||
      (!fused &&
       failed(checkSameExtent(op, "output size", {"result", result, 1},
                              {"weights", weights, 2}))))
    return failure();
  return success();
}

LogicalResult GroupedWgradOp::verify() {
  Operation *op = getOperation();
  Value grad = getGrad(), rows = getRows(), weightGrad = getWeightGrad(),
        biasGrad = getBiasGrad();
  // kn_weights: the weight gradient lies [E, K, N], as the weights do.
  bool kn = getKnWeights();
  StringRef weightShape = kn ? "[E, K, N]" : "[E, N, K]";
  unsigned nDim = kn ? 2 : 1, kDim = kn ? 1 : 2;
  if (failed(checkRank(op, "grad", grad, 2, "[M, N]")) ||
      failed(checkRank(op, "rows", rows, 2, "[M, K]")) ||
      failed(checkRank(op, "weight_grad", weightGrad, 3, weightShape)) ||
      failed(checkStaticSizes(op, {{"grad", grad, "[M, N]"},
                                   {"rows", rows, "[M, K]"},
                                   {"offsets", getOffsets(), "[E+1]"},
                                   {"weight_grad", weightGrad, weightShape},
                                   {"bias_grad", biasGrad, "[E, N]"}})))
    return failure();
  FailureOr<int64_t> numExperts = verifyOffsets(op, getOffsets());
  if (failed(numExperts) ||
      failed(checkStatic(op, "expert count", {"weight_grad", weightGrad, 0})) ||
      failed(
          checkOffsetsFit(op, *numExperts, {"weight_grad", weightGrad, 0})) ||
      failed(checkSameExtent(op, "row count", {"rows", rows, 0},
                             {"grad", grad, 0})) ||
      failed(checkSameExtent(op, "output size",
                             {"weight_grad", weightGrad, nDim},
                             {"grad", grad, 1})) ||
      failed(checkSameExtent(op, "contraction size",
                             {"weight_grad", weightGrad, kDim},
                             {"rows", rows, 1})))
    return failure();
  if (biasGrad &&
      (failed(checkRank(op, "bias_grad", biasGrad, 2, "[E, N]")) ||
       failed(checkExtent(op, "expert count", {"bias_grad", biasGrad, 0},
                          *numExperts, "the size of 'offsets' minus one")) ||
       failed(checkSameExtent(op, "output size", {"bias_grad", biasGrad, 1},
                              {"grad", grad, 1}))))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// SwiGLUGradOp
//===----------------------------------------------------------------------===//

LogicalResult SwiGLUGradOp::verify() {
  Operation *op = getOperation();
  Value input = getInput(), grad = getGrad(), result = getResult();
  if (failed(checkRank(op, "input", input, 2, "[M, 2I]")) ||
      failed(checkRank(op, "grad", grad, 2, "[M, I]")) ||
      failed(checkStaticSizes(op, {{"input", input, "[M, 2I]"},
                                   {"grad", grad, "[M, I]"},
                                   {"result", result, "[M, 2I]"}})) ||
      failed(checkSameExtent(op, "row count", {"grad", grad, 0},
                             {"input", input, 0})) ||
      failed(verifyGatedHalves(op, {"input", input, 1}, {"grad", grad, 1})) ||
      failed(checkShapedLike(op, "result", result, "input", input)))
    return failure();
  return verifyActivationParams(op, getActivation(), getAlpha(), getLimit());
}

//===----------------------------------------------------------------------===//
// RouteGradOp
//===----------------------------------------------------------------------===//

LogicalResult RouteGradOp::verify() {
  Operation *op = getOperation();
  Value logits = getLogits(), ids = getExpertIds(), grad = getGrad(),
        result = getResult();
  if (failed(checkRank(op, "logits", logits, 2, "[T, E]")) ||
      failed(checkRank(op, "expert_ids", ids, 2, "[T, k]")) ||
      failed(checkRank(op, "grad", grad, 2, "[T, k]")) ||
      failed(checkStatic(op, "expert count", {"logits", logits, 1})) ||
      failed(checkStatic(op, "experts per token", {"expert_ids", ids, 1})) ||
      failed(checkStaticSizes(op, {{"logits", logits, "[T, E]"},
                                   {"expert_ids", ids, "[T, k]"},
                                   {"grad", grad, "[T, k]"},
                                   {"result", result, "[T, E]"}})) ||
      failed(checkSameExtent(op, "token count", {"expert_ids", ids, 0},
                             {"logits", logits, 0})) ||
      failed(checkSameExtent(op, "token count", {"grad", grad, 0},
                             {"logits", logits, 0})) ||
      failed(checkSameExtent(op, "experts per token", {"grad", grad, 1},
                             {"expert_ids", ids, 1})) ||
      failed(checkShapedLike(op, "result", result, "logits", logits)))
    return failure();
  int64_t numExperts = tensorType(logits).getDimSize(1);
  int64_t k = tensorType(ids).getDimSize(1);
  if (k > numExperts)
    return emitOpError() << "experts per token of 'expert_ids' (dim 1 = " << k
                         << ") exceeds the expert count of 'logits' (dim 1 = "
                         << numExperts << ")";
  if (std::optional<APFloat> scale = getScalingFactor())
    if (!scale->isFiniteNonZero() || scale->isNegative())
      return emitOpError() << "'scale' must be finite and positive";
  return success();
}

//===----------------------------------------------------------------------===//
// SharedMLPGradOp
//===----------------------------------------------------------------------===//

LogicalResult SharedMLPGradOp::verify() {
  Operation *op = getOperation();
  Value grad = getGrad(), tokens = getTokens(), w13 = getGateUpWeights(),
        w2 = getDownWeights(), gate = getGateWeights(),
        gateGrad = getGateGrad();
  if (getActivation() != GatedActivation::silu)
    return emitOpError() << "supports the silu activation only, as "
                            "moe.shared_mlp does";
  if (failed(checkRank(op, "grad", grad, 2, "[T, H]")) ||
      failed(checkRank(op, "tokens", tokens, 2, "[T, H]")) ||
      failed(checkRank(op, "gate_up_weights", w13, 2, "[2Is, H]")) ||
      failed(checkRank(op, "down_weights", w2, 2, "[H, Is]")) ||
      failed(
          checkStaticSizes(op, {{"grad", grad, "[T, H]"},
                                {"tokens", tokens, "[T, H]"},
                                {"gate_up_weights", w13, "[2Is, H]"},
                                {"down_weights", w2, "[H, Is]"},
                                {"gate_weights", gate, "[1, H]"},
                                {"tokens_grad", getTokensGrad(), "[T, H]"},
                                {"gate_up_grad", getGateUpGrad(), "[2Is, H]"},
                                {"down_grad", getDownGrad(), "[H, Is]"},
                                {"gate_grad", gateGrad, "[1, H]"}})) ||
      failed(checkSameExtent(op, "token count", {"grad", grad, 0},
                             {"tokens", tokens, 0})) ||
      failed(checkSameExtent(op, "hidden size", {"grad", grad, 1},
                             {"tokens", tokens, 1})) ||
      failed(checkSameExtent(op, "hidden size", {"gate_up_weights", w13, 1},
                             {"tokens", tokens, 1})) ||
      failed(checkSameExtent(op, "hidden size", {"down_weights", w2, 0},
                             {"tokens", tokens, 1})) ||
      failed(verifyGatedHalves(op, {"gate_up_weights", w13, 0},
                               {"down_weights", w2, 1})) ||
      failed(checkShapedLike(op, "tokens_grad", getTokensGrad(), "tokens",
                             tokens)) ||
      failed(checkShapedLike(op, "gate_up_grad", getGateUpGrad(),
                             "gate_up_weights", w13)) ||
      failed(
          checkShapedLike(op, "down_grad", getDownGrad(), "down_weights", w2)))
    return failure();
  if (gate && !gateGrad)
    return emitOpError() << "with 'gate' the op has a fourth result, "
                            "'gate_grad'";
  if (!gate && gateGrad)
    return emitOpError() << "'gate_grad' needs 'gate'";
  if (gate &&
      (failed(checkRank(op, "gate_weights", gate, 2, "[1, H]")) ||
       failed(checkStatic(op, "gate count", {"gate_weights", gate, 0})) ||
       failed(checkExtent(op, "gate count", {"gate_weights", gate, 0}, 1,
                          "one gate logit per token")) ||
       failed(checkSameExtent(op, "hidden size", {"gate_weights", gate, 1},
                              {"tokens", tokens, 1})) ||
       failed(
           checkShapedLike(op, "gate_grad", gateGrad, "gate_weights", gate))))
    return failure();
  Type elementType = getElementTypeOrSelf(tokens);
  for (auto [name, value] :
       {std::pair<StringRef, Value>{"gate_up_weights", w13},
        {"down_weights", w2},
        {"gate_weights", gate}})
    if (value && getElementTypeOrSelf(value) != elementType)
      return emitOpError() << "'" << name << "' element type "
                           << getElementTypeOrSelf(value)
                           << " must be the element type of 'tokens' ("
                           << elementType << ")";
  return success();
}
