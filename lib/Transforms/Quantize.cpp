//===- Quantize.cpp - expert GEMMs to block-scaled FP8 --------------------===//
//
// --moe-quantize: weights (and activations) of the expert GEMMs read through
// moe.dequantize; weight arguments become FP8 values and scales produced by a
// sibling prepack function (docs/quantization-design.md).
//
//===----------------------------------------------------------------------===//

#include "MoE/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEQUANTIZE
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// The encodings a policy puts on weights `[E, N, K]` and on GEMM rows
/// `[M, K]` (null with scope=weights).
struct Policy {
  BlockScaledEncodingAttr weights;
  BlockScaledEncodingAttr activations;
  /// gemm=dequantized: the GEMMs read the dequantized values in the
  /// operands' own type (moe.fake_quantize), not FP8 values and scales.
  bool dequantized = false;
};

/// What the pass does to one function, decided before anything changes.
struct FunctionPlan {
  /// Weight arguments (by index) and the operands that read them.
  llvm::MapVector<unsigned, SmallVector<OpOperand *>> weightArgs;
  /// Constant weights and the operands that read them.
  llvm::MapVector<Value, SmallVector<OpOperand *>> constantWeights;
  /// GEMM rows to quantize and dequantize right before the GEMM.
  SmallVector<OpOperand *> rows;
  /// Fused expert MLPs whose activation output takes the policy's encoding.
  SmallVector<ExpertMLPOp> intermediates;
};

} // namespace

/// Whether `a` and `b` describe the same encoding of a rank-`rank` tensor:
/// `[128, 128]` and `[1, 128, 128]` are the same blocks on `[E, N, K]`.
static bool sameEncoding(BlockScaledEncodingAttr a, BlockScaledEncodingAttr b,
                         int64_t rank) {
  if (a.getElement() != b.getElement() || a.getScale() != b.getScale())
    return false;
  for (int64_t d = 0; d < rank; ++d)
    if (a.getBlockExtent(d, rank) != b.getBlockExtent(d, rank))
      return false;
  return true;
}

/// Checks that `encoding`'s blocks tile the static dims of `value`; names
/// the operand (and the dims' meaning, `dimNames`) when they do not.
static LogicalResult checkBlocksDivide(Operation *op, StringRef policy,
                                       StringRef name, Value value,
                                       ArrayRef<StringRef> dimNames,
                                       BlockScaledEncodingAttr encoding) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t rank = type.getRank();
  LogicalResult result = success();
  for (int64_t d = 0; d < rank; ++d) {
    int64_t block = encoding.getBlockExtent(d, rank);
    int64_t size = type.getDimSize(d);
    if (block == 1)
      continue;
    if (ShapedType::isDynamic(size)) {
      op->emitOpError() << "moe-quantize (" << policy << "): dim " << d << " ("
                        << dimNames[d] << ") of '" << name
                        << "' must be static to be quantized in blocks of "
                        << block;
      result = failure();
    } else if (size % block != 0) {
      op->emitOpError() << "moe-quantize (" << policy << "): block extent "
                        << block << " does not divide " << dimNames[d] << " = "
                        << size << " (dim " << d << " of '" << name
                        << "', of type " << type << ")";
      result = failure();
    }
  }
  return result;
}

/// Checks an operand that already comes from `moe.dequantize` or
/// `moe.fake_quantize` (`producer`, of `encoding`): left alone when its
/// encoding is the policy's, refused otherwise.
static LogicalResult checkAlreadyQuantized(Operation *op, StringRef policy,
                                           StringRef name, Operation *producer,
                                           BlockScaledEncodingAttr encoding,
                                           BlockScaledEncodingAttr expected) {
  int64_t rank =
      cast<RankedTensorType>(producer->getResult(0).getType()).getRank();
  if (sameEncoding(encoding, expected, rank))
    return success();
  return op->emitOpError()
         << "moe-quantize (" << policy << "): '" << name
         << "' is already quantized with " << encoding << ", not the policy's "
         << expected
         << "; requantizing FP8 values would compound two roundings";
}

/// The encoding of the quantization `value` comes out of (a
/// `moe.dequantize` or `moe.fake_quantize`), or null.
static BlockScaledEncodingAttr quantizedBy(Value value) {
  if (auto dequantize = value.getDefiningOp<DequantizeOp>())
    return dequantize.getEncoding();
  if (auto fakeQuantize = value.getDefiningOp<FakeQuantizeOp>())
    return fakeQuantize.getEncoding();
  return {};
}

namespace {

struct MoEQuantizePass : moe::impl::MoEQuantizeBase<MoEQuantizePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<Policy> policy = parsePolicy();
    if (failed(policy))
      return signalPassFailure();
    policyName = "format=" + format + " element=" + element + " scope=" + scope;
    if (policy->dequantized)
      policyName += " gemm=dequantized";

    // Decide everything first: a refused op leaves the module untouched.
    SmallVector<std::pair<func::FuncOp, FunctionPlan>> plans;
    bool refused = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      FunctionPlan plan;
      if (failed(planFunction(func, *policy, plan)))
        refused = true;
      plans.emplace_back(func, std::move(plan));
    }
    if (refused)
      return signalPassFailure();

    for (auto &[func, plan] : plans)
      rewriteFunction(func, *policy, plan);
  }

private:
  /// "format=... element=... scope=...", for diagnostics.
  std::string policyName;

  /// The encodings the options ask for, or a diagnostic naming the option.
  FailureOr<Policy> parsePolicy() {
    MLIRContext *context = &getContext();
    Location loc = getOperation().getLoc();
    Type elementType;
    if (element == "e4m3")
      elementType = Float8E4M3FNType::get(context);
    else if (element == "e5m2")
      elementType = Float8E5M2Type::get(context);
    else
      return emitError(loc) << "moe-quantize: unknown 'element' value '"
                            << element << "' (expected e4m3 or e5m2)";
    if (scope != "weights" && scope != "weights+activations")
      return emitError(loc) << "moe-quantize: unknown 'scope' value '" << scope
                            << "' (expected weights or weights+activations)";
    if (gemm != "fp8" && gemm != "dequantized")
      return emitError(loc) << "moe-quantize: unknown 'gemm' value '" << gemm
                            << "' (expected fp8 or dequantized)";
    Policy policy;
    policy.dequantized = gemm == "dequantized";
    Type scaleType;
    SmallVector<int64_t> weightBlock, activationBlock;
    if (format == "fp8-block") {
      // DeepSeek-style f32 block scales are defined for e4m3 values only.
      if (element != "e4m3")
        return emitError(loc) << "moe-quantize: 'element=" << element
                              << "' is not available with 'format=fp8-block' "
                                 "(e4m3 only; use format=mxfp8 for e5m2)";
      scaleType = Float32Type::get(context);
      weightBlock = {1, 128, 128};
      activationBlock = {1, 128};
    } else if (format == "mxfp8") {
      scaleType = Float8E8M0FNUType::get(context);
      weightBlock = {1, 1, 32};
      activationBlock = {1, 32};
    } else {
      return emitError(loc) << "moe-quantize: unknown 'format' value '"
                            << format << "' (expected fp8-block or mxfp8)";
    }
    policy.weights = BlockScaledEncodingAttr::get(context, elementType,
                                                  weightBlock, scaleType);
    if (scope == "weights+activations")
      policy.activations = BlockScaledEncodingAttr::get(
          context, elementType, activationBlock, scaleType);
    return policy;
  }

  /// Records what to do with one GEMM weight operand.
  LogicalResult planWeights(Operation *op, OpOperand &operand, StringRef name,
                            const Policy &policy, func::FuncOp func,
                            FunctionPlan &plan) {
    Value weights = operand.get();
    if (BlockScaledEncodingAttr encoding = quantizedBy(weights))
      return checkAlreadyQuantized(op, policyName, name,
                                   weights.getDefiningOp(), encoding,
                                   policy.weights);
    static constexpr StringRef kDims[] = {"E", "N", "K"};
    if (failed(checkBlocksDivide(op, policyName, name, weights, kDims,
                                 policy.weights)))
      return failure();
    if (auto arg = dyn_cast<BlockArgument>(weights)) {
      if (arg.getOwner() == &func.getBody().front()) {
        plan.weightArgs[arg.getArgNumber()].push_back(&operand);
        return success();
      }
    } else if (matchPattern(weights, m_Constant())) {
      plan.constantWeights[weights].push_back(&operand);
      return success();
    }
    InFlightDiagnostic diag = op->emitOpError()
                              << "moe-quantize: '" << name
                              << "' must be a function argument (quantized by "
                                 "the prepack function) or a constant, got ";
    if (Operation *producer = weights.getDefiningOp())
      diag << "the result of '" << producer->getName() << "'";
    else
      diag << "a block argument of '"
           << cast<BlockArgument>(weights).getOwner()->getParentOp()->getName()
           << "'";
    return diag;
  }

  /// Records the quantization of a GEMM's rows (scope=weights+activations).
  LogicalResult planRows(Operation *op, OpOperand &operand,
                         const Policy &policy, FunctionPlan &plan) {
    if (BlockScaledEncodingAttr encoding = quantizedBy(operand.get()))
      return checkAlreadyQuantized(op, policyName, "rows",
                                   operand.get().getDefiningOp(), encoding,
                                   policy.activations);
    static constexpr StringRef kDims[] = {"M", "K"};
    if (failed(checkBlocksDivide(op, policyName, "rows", operand.get(), kDims,
                                 policy.activations)))
      return failure();
    plan.rows.push_back(&operand);
    return success();
  }

  /// Records the FP8 intermediate of a fused expert MLP.
  LogicalResult planIntermediate(ExpertMLPOp mlp, const Policy &policy,
                                 FunctionPlan &plan) {
    if (BlockScaledEncodingAttr existing = mlp.getIntermediateAttr()) {
      if (sameEncoding(existing, policy.activations, 2))
        return success();
      return mlp.emitOpError()
             << "moe-quantize (" << policyName
             << "): the intermediate is already quantized with " << existing
             << ", not the policy's " << policy.activations;
    }
    int64_t width =
        cast<RankedTensorType>(mlp.getDownWeights().getType()).getDimSize(2);
    int64_t block = policy.activations.getBlock().back();
    if (ShapedType::isDynamic(width) || width % block != 0)
      return mlp.emitOpError()
             << "moe-quantize (" << policyName << "): block extent " << block
             << " does not divide the expert width I = "
             << (ShapedType::isDynamic(width) ? std::string("?")
                                              : std::to_string(width))
             << " of the intermediate";
    plan.intermediates.push_back(mlp);
    return success();
  }

  /// Plans the rewrite of `func`; emits every refusal it finds.
  LogicalResult planFunction(func::FuncOp func, const Policy &policy,
                             FunctionPlan &plan) {
    bool refused = false;
    auto note = [&](LogicalResult result) { refused |= failed(result); };
    func.walk([&](Operation *op) {
      if (auto matmul = dyn_cast<GroupedMatmulOp>(op)) {
        if (matmul.getKnWeights()) {
          note(op->emitOpError()
               << "moe-quantize: weights that lie [E, K, N] (kn_weights) "
                  "have no FP8 block layout yet");
          return;
        }
        note(planWeights(op, matmul.getWeightsMutable(), "weights", policy,
                         func, plan));
        if (policy.activations)
          note(planRows(op, matmul.getRowsMutable(), policy, plan));
      } else if (auto mlp = dyn_cast<ExpertMLPOp>(op)) {
        note(planWeights(op, mlp.getGateUpWeightsMutable(), "gate_up_weights",
                         policy, func, plan));
        note(planWeights(op, mlp.getDownWeightsMutable(), "down_weights",
                         policy, func, plan));
        if (policy.activations) {
          note(planRows(op, mlp.getRowsMutable(), policy, plan));
          note(planIntermediate(mlp, policy, plan));
        }
      } else if (isa<SharedMLPOp>(op)) {
        // Quantizing the routed experts only would leave it in its type.
        note(op->emitOpError()
             << "moe-quantize (" << policyName
             << "): a shared expert is quantized as the routed experts it "
                "becomes: run --moe-route-shared-experts first");
      }
    });
    if (refused || plan.weightArgs.empty())
      return failure(refused);

    // The original argument disappears: nothing else may still need it.
    for (auto &[index, uses] : plan.weightArgs) {
      for (OpOperand &use : func.getArgument(index).getUses()) {
        if (llvm::is_contained(uses, &use))
          continue;
        func.emitOpError() << "moe-quantize: argument #" << index << " of @"
                           << func.getSymName()
                           << " is quantized as expert weights but is also "
                              "used by '"
                           << use.getOwner()->getName()
                           << "', which would still need it unquantized";
        refused = true;
        break;
      }
    }
    auto module = cast<ModuleOp>(func->getParentOp());
    std::string prepackName = (func.getSymName() + "_prepack").str();
    if (SymbolTable::lookupSymbolIn(module, prepackName)) {
      func.emitOpError() << "moe-quantize: cannot add the prepack function: @"
                         << prepackName << " already exists";
      refused = true;
    }
    if (std::optional<SymbolTable::UseRange> uses =
            SymbolTable::getSymbolUses(func, module)) {
      for (const SymbolTable::SymbolUse &use : *uses) {
        if (isa<func::CallOp>(use.getUser()))
          continue;
        func.emitOpError() << "moe-quantize: its signature changes, but '"
                           << use.getUser()->getName()
                           << "' refers to it (only func.call sites are "
                              "rewritten)";
        refused = true;
        break;
      }
    }
    return failure(refused);
  }

  /// Applies `plan` to `func`.
  void rewriteFunction(func::FuncOp func, const Policy &policy,
                       FunctionPlan &plan) {
    OpBuilder builder(&getContext());
    for (OpOperand *operand : plan.rows) {
      builder.setInsertionPoint(operand->getOwner());
      Location loc = operand->getOwner()->getLoc();
      operand->set(
          policy.dequantized
              ? FakeQuantizeOp::create(builder, loc, operand->get().getType(),
                                       operand->get(), policy.activations)
                    .getResult()
              : quantizeDequantize(builder, loc, operand->get(),
                                   policy.activations));
    }
    for (ExpertMLPOp mlp : plan.intermediates)
      mlp.setIntermediateAttr(policy.activations);

    // Constants: one quantize after the constant, a dequantize per use (or
    // one round trip that the uses read).
    for (auto &[constant, uses] : plan.constantWeights) {
      builder.setInsertionPointAfterValue(constant);
      auto type = cast<RankedTensorType>(constant.getType());
      if (policy.dequantized) {
        Value values = FakeQuantizeOp::create(builder, constant.getLoc(), type,
                                              constant, policy.weights);
        for (OpOperand *use : uses)
          use->set(values);
        continue;
      }
      auto quantize = QuantizeOp::create(
          builder, constant.getLoc(), type.clone(policy.weights.getElement()),
          getBlockScalesType(type, policy.weights), constant, policy.weights);
      for (OpOperand *use : uses)
        dequantizeBefore(builder, *use, quantize.getValues(),
                         quantize.getScales(), policy.weights);
    }

    if (!plan.weightArgs.empty())
      rewriteSignature(func, policy, plan);
  }

  /// Sets `use` to `moe.dequantize` of `values` and `scales`, built right
  /// before its owner.
  static void dequantizeBefore(OpBuilder &builder, OpOperand &use, Value values,
                               Value scales, BlockScaledEncodingAttr encoding) {
    Operation *user = use.getOwner();
    builder.setInsertionPoint(user);
    use.set(DequantizeOp::create(builder, user->getLoc(), use.get().getType(),
                                 values, scales, encoding));
  }

  /// Replaces each weight argument of `func` by its values and scales (or,
  /// gemm=dequantized, keeps it: it then holds the dequantized values), adds
  /// `@<name>_prepack` and makes every call site call it first.
  void rewriteSignature(func::FuncOp func, const Policy &policy,
                        FunctionPlan &plan) {
    MLIRContext *context = &getContext();
    auto module = cast<ModuleOp>(func->getParentOp());
    // Ascending order: the prepack's parameters and results, the new
    // arguments and the call sites all list the weights in this order.
    SmallVector<unsigned> indices(llvm::make_first_range(plan.weightArgs));
    llvm::sort(indices);

    SmallVector<Type> weightTypes, packedTypes;
    SmallVector<DictionaryAttr> weightAttrs;
    SmallVector<Location> weightLocs;
    for (unsigned index : indices) {
      BlockArgument arg = func.getArgument(index);
      auto type = cast<RankedTensorType>(arg.getType());
      weightTypes.push_back(type);
      weightAttrs.push_back(func.getArgAttrDict(index));
      weightLocs.push_back(arg.getLoc());
      if (policy.dequantized) {
        packedTypes.push_back(type);
        continue;
      }
      packedTypes.push_back(type.clone(policy.weights.getElement()));
      packedTypes.push_back(getBlockScalesType(type, policy.weights));
    }
    // Results per weight of the prepack function: the dequantized values,
    // or the values and scales that replace the argument.
    unsigned packed = policy.dequantized ? 1 : 2;

    // FP8 values and scales replace each weight argument; dequantized
    // weights keep their argument.
    if (!policy.dequantized)
      replaceWeightArguments(func, policy, plan, indices, packedTypes,
                             weightAttrs, weightLocs);
    OpBuilder builder(context);

    // Calls in the module will quantize their weights first (planFunction
    // made sure that calls are the only references); collected before the
    // prepack function refers to `func` too.
    SmallVector<func::CallOp> calls;
    if (std::optional<SymbolTable::UseRange> uses =
            SymbolTable::getSymbolUses(func, module))
      for (const SymbolTable::SymbolUse &use : *uses)
        calls.push_back(cast<func::CallOp>(use.getUser()));

    // The prepack function quantizes the weights once per weight set.
    builder.setInsertionPointAfter(func);
    std::string prepackName = (func.getSymName() + "_prepack").str();
    auto prepack = func::FuncOp::create(
        builder, func.getLoc(), prepackName,
        FunctionType::get(context, weightTypes, packedTypes));
    prepack.setVisibility(func.getVisibility());
    prepack->setAttr("moe.prepack_of", FlatSymbolRefAttr::get(func));
    for (auto [i, attrs] : llvm::enumerate(weightAttrs))
      if (attrs)
        prepack.setArgAttrs(i, attrs);
    Block *body = prepack.addEntryBlock();
    builder.setInsertionPointToStart(body);
    SmallVector<Value> results;
    for (BlockArgument weights : body->getArguments()) {
      auto type = cast<RankedTensorType>(weights.getType());
      if (policy.dequantized) {
        results.push_back(FakeQuantizeOp::create(
            builder, weights.getLoc(), type, weights, policy.weights));
        continue;
      }
      auto quantize = QuantizeOp::create(
          builder, weights.getLoc(), type.clone(policy.weights.getElement()),
          getBlockScalesType(type, policy.weights), weights, policy.weights);
      results.append({quantize.getValues(), quantize.getScales()});
    }
    func::ReturnOp::create(builder, func.getLoc(), results);

    for (func::CallOp call : calls) {
      builder.setInsertionPoint(call);
      SmallVector<Value> weights;
      for (unsigned index : indices)
        weights.push_back(call.getOperand(index));
      auto prepackCall =
          func::CallOp::create(builder, call.getLoc(), prepack, weights);
      SmallVector<Value> operands;
      unsigned next = 0;
      for (auto [index, operand] : llvm::enumerate(call.getOperands())) {
        if (next < indices.size() && indices[next] == index) {
          for (unsigned r = 0; r < packed; ++r)
            operands.push_back(prepackCall.getResult(packed * next + r));
          ++next;
          continue;
        }
        operands.push_back(operand);
      }
      call.getOperandsMutable().assign(operands);
      // Per-argument attributes of the call no longer line up.
      if (!policy.dequantized)
        call.removeArgAttrsAttr();
    }
  }

  /// Replaces the weight arguments `indices` of `func` by their FP8 values
  /// and scales (`packedTypes`), each GEMM reading them through
  /// `moe.dequantize`.
  void replaceWeightArguments(func::FuncOp func, const Policy &policy,
                              FunctionPlan &plan, ArrayRef<unsigned> indices,
                              ArrayRef<Type> packedTypes,
                              ArrayRef<DictionaryAttr> weightAttrs,
                              ArrayRef<Location> weightLocs) {
    // The values and scales go right after each weight argument, which is
    // erased once its uses read them.
    SmallVector<unsigned> insertAt;
    SmallVector<DictionaryAttr> insertAttrs;
    SmallVector<Location> insertLocs;
    for (auto [i, index] : llvm::enumerate(indices)) {
      insertAt.append(2, index + 1);
      insertAttrs.append({weightAttrs[i], DictionaryAttr()});
      insertLocs.append(2, weightLocs[i]);
    }
    (void)func.insertArguments(insertAt, packedTypes, insertAttrs, insertLocs);
    llvm::BitVector erase(func.getNumArguments());
    OpBuilder builder(&getContext());
    for (auto [i, index] : llvm::enumerate(indices)) {
      // Each earlier weight added two arguments before this one.
      unsigned shifted = index + 2 * i;
      Value values = func.getArgument(shifted + 1);
      Value scales = func.getArgument(shifted + 2);
      for (OpOperand *use : plan.weightArgs[index])
        dequantizeBefore(builder, *use, values, scales, policy.weights);
      erase.set(shifted);
    }
    (void)func.eraseArguments(erase);
  }
};

} // namespace
