//===- ExpertParallel.cpp - a layer as one expert-parallel rank runs it --===//
//
// --moe-expert-parallel: the expert MLP between permute and unpermute
// becomes dispatch -> local permute -> the rank's experts -> local
// unpermute -> undispatch.
//
//===----------------------------------------------------------------------===//

#include "MoE/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEEXPERTPARALLEL
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// `type` with a dynamic first dimension.
static RankedTensorType dynamicRows(Type type) {
  auto ranked = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(ranked.getShape());
  shape[0] = ShapedType::kDynamic;
  return ranked.clone(shape);
}

struct MoEExpertParallelPass
    : moe::impl::MoEExpertParallelBase<MoEExpertParallelPass> {
  using MoEExpertParallelBase::MoEExpertParallelBase;

  void runOnOperation() override {
    if (ranks < 1) {
      emitError(getOperation().getLoc())
          << "--moe-expert-parallel: 'ranks' must be at least 1, got "
          << static_cast<int64_t>(ranks);
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> functions;
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      bool layer = false;
      fn.walk([&](Operation *op) { layer |= isa<UnpermuteOp, LayerOp>(op); });
      if (layer)
        functions.push_back(fn);
    }
    for (func::FuncOp fn : functions)
      if (failed(rewrite(fn)))
        return signalPassFailure();
  }

  LogicalResult rewrite(func::FuncOp fn) {
    // A layer in a loop or branch has no stage boundary to exchange at.
    WalkResult nested = fn.walk([&](Operation *op) {
      if (!isa<UnpermuteOp, ExpertMLPOp, LayerOp>(op) ||
          op->getParentOp() == fn.getOperation() ||
          (op->getParentOfType<LayerOp>() &&
           op->getParentOfType<LayerOp>()->getParentOp() == fn.getOperation()))
        return WalkResult::advance();
      op->emitError() << "--moe-expert-parallel: a layer inside a loop, "
                         "branch or other region has no expert-parallel form";
      return WalkResult::interrupt();
    });
    if (nested.wasInterrupted())
      return failure();
    // Layers inlined, then each expert MLP fused into one op.
    RewritePatternSet expand(&getContext());
    populateExpandFusedOpsPatterns(expand);
    RewritePatternSet fuse(&getContext());
    populateFuseExpertsPatterns(fuse);
    if (failed(applyPatternsGreedily(fn, std::move(expand))) ||
        failed(applyPatternsGreedily(fn, std::move(fuse))))
      return fn.emitError() << "--moe-expert-parallel: the layers of @"
                            << fn.getSymName() << " could not be unfolded";
    for (UnpermuteOp combine :
         llvm::to_vector(fn.getFunctionBody().getOps<UnpermuteOp>()))
      if (failed(rewriteLayer(fn, combine)))
        return failure();
    fn->setAttr("moe.expert_parallel_ranks",
                IntegerAttr::get(IntegerType::get(&getContext(), 64), ranks));
    return success();
  }

  LogicalResult rewriteLayer(func::FuncOp fn, UnpermuteOp combine) {
    auto fail = [&](Operation *op, const Twine &why) {
      return op->emitError() << "--moe-expert-parallel: " << why;
    };
    auto mlp = combine.getRows().getDefiningOp<ExpertMLPOp>();
    if (!mlp)
      return fail(combine, "the combined rows are not a moe.expert_mlp's "
                           "(an expert MLP that --moe-fuse-experts cannot "
                           "fuse has no expert-parallel form)");
    auto permute = mlp.getRows().getDefiningOp<PermuteOp>();
    if (!permute || mlp.getOffsets() != permute.getOffsets() ||
        combine.getSlots() != permute.getSlots())
      return fail(mlp, "the expert MLP's rows and offsets, and the combine's "
                       "slots, must be one moe.permute's (quantized rows "
                       "have no expert-parallel form yet)");
    if (permute.getPadTo())
      return fail(permute, "a padded permute (pad_to) has no expert-parallel "
                           "form");
    if (mlp.getRowScale())
      return fail(mlp, "a per-row scale on the expert MLP has no "
                       "expert-parallel form (the routing weight belongs on "
                       "the combine)");
    if (auto route = permute.getExpertIds().getDefiningOp<RouteOp>())
      if (route.getSharedSlots())
        return fail(route, "shared-expert routing slots have no "
                           "expert-parallel form (keep the shared expert "
                           "as a moe.shared_mlp on the combine)");
    auto offsetsType = cast<RankedTensorType>(permute.getOffsets().getType());
    int64_t numExperts = offsetsType.getDimSize(0) - 1;
    if (numExperts % ranks != 0)
      return fail(mlp, Twine(static_cast<int64_t>(ranks)) +
                           " ranks do not divide the " + Twine(numExperts) +
                           " experts evenly");
    int64_t local = numExperts / ranks;

    // The rank's experts: each weight tensor an argument used here only.
    for (Value weights : {mlp.getGateUpWeights(), mlp.getDownWeights(),
                          mlp.getGateUpBias(), mlp.getDownBias()}) {
      if (!weights)
        continue;
      auto arg = dyn_cast<BlockArgument>(weights);
      if (!arg || arg.getOwner() != &fn.getBody().front())
        return fail(mlp, "the expert weights and biases must be arguments "
                         "of the function (quantized weights have no "
                         "expert-parallel form yet)");
      if (!arg.hasOneUse())
        return fail(mlp, "argument #" + Twine(arg.getArgNumber()) +
                             " (expert weights) has uses outside the layer: "
                             "it cannot become the rank's slice");
      auto type = cast<RankedTensorType>(arg.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[0] = local;
      arg.setType(type.clone(shape));
    }
    fn.setType(FunctionType::get(&getContext(),
                                 fn.getBody().front().getArgumentTypes(),
                                 fn.getResultTypes()));

    OpBuilder b(mlp);
    Location loc = mlp.getLoc();
    auto rowsType = dynamicRows(permute.getRows().getType());
    auto slotsType = cast<RankedTensorType>(permute.getSlots().getType());
    Type i32 = b.getI32Type();
    auto dispatch = DispatchOp::create(
        b, loc, rowsType, RankedTensorType::get({ShapedType::kDynamic, 1}, i32),
        RankedTensorType::get({ranks}, b.getI64Type()), permute.getRows(),
        permute.getOffsets(), ranks);
    auto localPermute = PermuteOp::create(
        b, loc, rowsType, offsetsType.clone({local + 1}),
        RankedTensorType::get({ShapedType::kDynamic, 1},
                              slotsType.getElementType()),
        dispatch.getReceived(), dispatch.getLocalIds(), IntegerAttr());
    auto outType = dynamicRows(mlp.getType());
    auto localMlp = cast<ExpertMLPOp>(b.clone(*mlp));
    localMlp.getRowsMutable().assign(localPermute.getRows());
    localMlp.getOffsetsMutable().assign(localPermute.getOffsets());
    localMlp.getResult().setType(outType);
    Value back = UnpermuteOp::create(b, loc, outType, localMlp.getResult(),
                                     localPermute.getSlots(),
                                     /*weights=*/Value(), /*shared=*/Value());
    Value returned =
        UndispatchOp::create(b, loc, outType, back, dispatch.getCounts(),
                             permute.getOffsets(), ranks);
    combine.getRowsMutable().assign(returned);
    mlp.erase();
    return success();
  }
};

} // namespace
