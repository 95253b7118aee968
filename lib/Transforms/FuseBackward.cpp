//===- FuseBackward.cpp - the activation's gradient into the down dgrad ---===//
//
// swiglu_grad(act, %gu, grouped_dgrad(%dO, %w2, %offsets)) becomes the
// grouped_dgrad with `act_grad act %gu`: a kernel applies the activation's
// gradient in its epilogue, so the [M, I] product never reaches memory.
//
//===----------------------------------------------------------------------===//

#include "MoE/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFUSEBACKWARD
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// Rooted at the activation's gradient, whose `grad` is a plain dgrad that
/// nothing else reads.
struct FuseActivationGradIntoDgrad : OpRewritePattern<SwiGLUGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SwiGLUGradOp act,
                                PatternRewriter &rewriter) const override {
    auto dgrad = act.getGrad().getDefiningOp<GroupedDgradOp>();
    if (!dgrad || dgrad.getActInput())
      return rewriter.notifyMatchFailure(act, "grad is no plain dgrad");
    if (!dgrad.getResult().hasOneUse())
      return rewriter.notifyMatchFailure(act, "the product has other uses");
    // The fused epilogue reads gate and up N columns apart.
    if (act.getInterleaved())
      return rewriter.notifyMatchFailure(act, "gate and up interleaved");
    // The fused result takes the product's element type, which the kernels
    // and the unfused chain already had: no new type combination.
    if (getElementTypeOrSelf(act.getResult()) !=
            getElementTypeOrSelf(dgrad.getResult()) ||
        getElementTypeOrSelf(act.getInput()) !=
            getElementTypeOrSelf(dgrad.getResult()))
      return rewriter.notifyMatchFailure(act, "element types differ");
    rewriter.setInsertionPoint(act);
    Location loc = rewriter.getFusedLoc({dgrad.getLoc(), act.getLoc()});
    auto fused = GroupedDgradOp::create(
        rewriter, loc, act.getType(), dgrad.getGrad(), dgrad.getWeights(),
        dgrad.getOffsets(), act.getInput(), act.getActivationAttr(),
        act.getAlphaAttr(), act.getLimitAttr());
    rewriter.replaceOp(act, fused.getResult());
    rewriter.eraseOp(dgrad);
    return success();
  }
};

struct MoEFuseBackwardPass
    : moe::impl::MoEFuseBackwardBase<MoEFuseBackwardPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseActivationGradIntoDgrad>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
