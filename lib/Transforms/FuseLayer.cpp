//===- FuseLayer.cpp - a whole MoE layer into moe.layer -------------------===//

#include "MoE/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFUSELAYER
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// Groups route -> permute -> expert_mlp -> unpermute, rooted at the
/// unpermute, into `moe.layer` (without the route when the ids and weights
/// come from elsewhere); quantized activations bring the rows'
/// quantize -> dequantize pair (or their `moe.fake_quantize`) along, and the
/// `moe.shared_mlp` whose
/// result only the unpermute adds comes along too (any other addend is read
/// from above).
struct FuseLayer : OpRewritePattern<UnpermuteOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(UnpermuteOp combine,
                                PatternRewriter &rewriter) const override {
    if (isa<LayerOp>(combine->getParentOp()))
      return rewriter.notifyMatchFailure(combine, "already in a layer");
    auto mlp = combine.getRows().getDefiningOp<ExpertMLPOp>();
    if (!mlp)
      return rewriter.notifyMatchFailure(combine, "rows are no expert_mlp");
    auto roundTrip = getRowsRoundTrip(mlp.getRows());
    auto fakeQuantize = mlp.getRows().getDefiningOp<FakeQuantizeOp>();
    Value rows = roundTrip      ? roundTrip->first.getInput()
                 : fakeQuantize ? fakeQuantize.getInput()
                                : mlp.getRows();
    auto permute = rows.getDefiningOp<PermuteOp>();
    if (!permute || rows != permute.getRows() ||
        mlp.getOffsets() != permute.getOffsets() ||
        combine.getSlots() != permute.getSlots())
      return rewriter.notifyMatchFailure(combine,
                                         "rows, offsets and slots are not one "
                                         "permute's");
    // Ids from a route take it (and its weights) into the layer; other ids
    // and weights are the layer's inputs (the model routes).
    auto route = permute.getExpertIds().getDefiningOp<RouteOp>();
    if (route ? combine.getWeights() != route.getWeights()
              : !combine.getWeights())
      return rewriter.notifyMatchFailure(
          combine, route ? "combine weights are not the route's"
                         : "an unweighted combine");
    // The layer applies the routing weight per token in the combine.
    if (mlp.getRowScale())
      return rewriter.notifyMatchFailure(combine, "expert_mlp has a scale");
    // The intermediates live in the layer's workspace only.
    SmallVector<Operation *, 7> chain;
    if (route)
      chain.push_back(route);
    chain.push_back(permute);
    if (roundTrip)
      chain.append({roundTrip->first, roundTrip->second});
    if (fakeQuantize)
      chain.push_back(fakeQuantize);
    chain.push_back(mlp);
    Value shared = combine.getShared();
    if (auto sharedMLP = shared ? shared.getDefiningOp<SharedMLPOp>() : nullptr;
        sharedMLP && shared.hasOneUse() &&
        sharedMLP->getBlock() == combine->getBlock())
      chain.push_back(sharedMLP);
    chain.push_back(combine);
    for (Operation *op : ArrayRef(chain).drop_back())
      for (Operation *user : op->getUsers())
        if (!llvm::is_contained(chain, user))
          return rewriter.notifyMatchFailure(
              combine, "an intermediate has a user outside the layer");
    // All in one block, so the layer can take the combine's place: every
    // value they read from outside is defined before it.
    Block *block = combine->getBlock();
    for (Operation *op : chain)
      if (op->getBlock() != block)
        return rewriter.notifyMatchFailure(combine, "not in one block");

    rewriter.setInsertionPoint(combine);
    Location loc = rewriter.getFusedLoc(
        llvm::map_to_vector(chain, [](Operation *op) { return op->getLoc(); }));
    auto layer = LayerOp::create(rewriter, loc, combine.getType());
    Block *body = rewriter.createBlock(&layer.getBody());
    for (Operation *op : chain)
      rewriter.moveOpBefore(op, body, body->end());
    rewriter.setInsertionPointToEnd(body);
    YieldOp::create(rewriter, combine.getLoc(), combine.getResult());
    rewriter.replaceUsesWithIf(
        combine.getResult(), layer.getResult(),
        [&](OpOperand &use) { return !isa<YieldOp>(use.getOwner()); });
    return success();
  }
};

struct MoEFuseLayerPass : moe::impl::MoEFuseLayerBase<MoEFuseLayerPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseLayerPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::moe::populateFuseLayerPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseLayer>(patterns.getContext());
}
