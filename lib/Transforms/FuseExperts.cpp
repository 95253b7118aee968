//===- FuseExperts.cpp - expert MLP chains into moe.expert_mlp ------------===//

#include "MoE/Transforms/Passes.h"

#include "MoE/Target/Contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFUSEEXPERTS
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// Fuses grouped_matmul -> swiglu (-> quantize -> dequantize, or
/// fake_quantize) -> grouped_matmul, rooted at the down matmul, into
/// `moe.expert_mlp` (the round trip as its `intermediate` encoding) where
/// that computes the same thing.
struct FuseExpertMLP : OpRewritePattern<GroupedMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GroupedMatmulOp down,
                                PatternRewriter &rewriter) const override {
    // An FP8 intermediate: swiglu -> quantize -> dequantize -> down.
    Value activation = down.getRows();
    QuantizeOp quantize;
    BlockScaledEncodingAttr encoding;
    auto dequantize = activation.getDefiningOp<DequantizeOp>();
    // Or its round trip in one op, of the activation's type.
    auto fakeQuantize = activation.getDefiningOp<FakeQuantizeOp>();
    if (fakeQuantize) {
      if (!fakeQuantize.getResult().hasOneUse())
        return rewriter.notifyMatchFailure(down, "quantized intermediate has "
                                                 "other uses");
      encoding = fakeQuantize.getEncodingAttr();
      activation = fakeQuantize.getInput();
    }
    if (dequantize) {
      quantize = dequantize.getValues().getDefiningOp<QuantizeOp>();
      if (!quantize || dequantize.getScales() != quantize.getScales() ||
          dequantize.getEncoding() != quantize.getEncoding())
        return rewriter.notifyMatchFailure(down,
                                           "dequantized rows are not one "
                                           "quantize's values and scales");
      // The pair disappears into the fused op: nothing else may read it.
      if (!dequantize.getResult().hasOneUse() ||
          !quantize.getValues().hasOneUse() ||
          !quantize.getScales().hasOneUse())
        return rewriter.notifyMatchFailure(down, "quantized intermediate has "
                                                 "other uses");
      // The fused op rounds h' to the rows' type, as its expansion does.
      if (dequantize.getType() != quantize.getInput().getType())
        return rewriter.notifyMatchFailure(down, "dequantize changes the "
                                                 "intermediate's type");
      activation = quantize.getInput();
      encoding = quantize.getEncodingAttr();
    }
    auto act = activation.getDefiningOp<SwiGLUOp>();
    if (!act)
      return rewriter.notifyMatchFailure(down, "rows are not a swiglu");
    // moe.expert_mlp's gate and up halves are N / 2 columns apart.
    if (act.getInterleaved())
      return rewriter.notifyMatchFailure(down, "gate and up interleaved");
    auto gateUp = act.getInput().getDefiningOp<GroupedMatmulOp>();
    if (!gateUp)
      return rewriter.notifyMatchFailure(down, "swiglu input is no matmul");
    // moe.expert_mlp's weights are [E, N, K].
    if (gateUp.getKnWeights() || down.getKnWeights())
      return rewriter.notifyMatchFailure(down, "weights lie [E, K, N]");
    // Both matmuls must see the same expert ranges.
    if (gateUp.getOffsets() != down.getOffsets())
      return rewriter.notifyMatchFailure(down, "different offsets");
    // Other users would still need the intermediates.
    if (!gateUp.getResult().hasOneUse() || !act.getResult().hasOneUse())
      return rewriter.notifyMatchFailure(down, "intermediate has other uses");
    // expert_mlp has no scale between the gate-up matmul and the activation.
    if (gateUp.getRowScale())
      return rewriter.notifyMatchFailure(down, "gate-up matmul has a scale");
    Value actScale = act.getScale(), downScale = down.getRowScale();
    // expert_mlp has a single routing scale.
    if (actScale && downScale)
      return rewriter.notifyMatchFailure(down, "two row scales");
    // (s * h) @ w2^T + b2 != (h @ w2^T + b2) * s: only linear without b2.
    if (actScale && down.getBias())
      return rewriter.notifyMatchFailure(down, "swiglu scale before a bias");
    // Quantization is not linear: quantize(s * h) != s * quantize(h).
    if (actScale && encoding)
      return rewriter.notifyMatchFailure(down,
                                         "swiglu scale before a quantize");
    // The fused intermediates take the rows' element type (see expansion).
    Type elementType = getElementTypeOrSelf(gateUp.getRows());
    if (getElementTypeOrSelf(gateUp.getResult()) != elementType ||
        getElementTypeOrSelf(act.getResult()) != elementType)
      return rewriter.notifyMatchFailure(down, "intermediate element type");

    // Build the fused op detached and keep it only if it verifies: the chain
    // can be valid where expert_mlp is not (e.g. w2 not mapping back to H).
    OpBuilder detached(rewriter.getContext());
    Location loc =
        rewriter.getFusedLoc({gateUp.getLoc(), act.getLoc(), down.getLoc()});
    auto fused = ExpertMLPOp::create(
        detached, loc, down.getType(), gateUp.getRows(), down.getOffsets(),
        gateUp.getWeights(), down.getWeights(), gateUp.getBias(),
        down.getBias(), actScale ? actScale : downScale,
        act.getActivationAttr(), act.getAlphaAttr(), act.getLimitAttr(),
        encoding);
    LogicalResult verified = success();
    {
      // A refused fusion is not an error: keep its diagnostics quiet.
      ScopedDiagnosticHandler quiet(rewriter.getContext(),
                                    [](Diagnostic &) { return success(); });
      verified = verify(fused, /*verifyRecursively=*/false);
    }
    if (failed(verified)) {
      fused->erase();
      return rewriter.notifyMatchFailure(down, "expert_mlp would not verify");
    }

    rewriter.setInsertionPoint(down);
    rewriter.insert(fused);
    rewriter.replaceOp(down, fused.getResult());
    if (fakeQuantize)
      rewriter.eraseOp(fakeQuantize);
    if (dequantize) {
      rewriter.eraseOp(dequantize);
      rewriter.eraseOp(quantize);
    }
    rewriter.eraseOp(act);
    rewriter.eraseOp(gateUp);
    return success();
  }
};

struct MoEFuseExpertsPass : moe::impl::MoEFuseExpertsBase<MoEFuseExpertsPass> {
  void runOnOperation() override {
    // A program's steps are one entry each, and a fused expert MLP is two:
    // there the chain stays (or becomes) unfused.
    SmallVector<Operation *> programs, others;
    getOperation()->walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<func::FuncOp>(op)) {
        (op->hasAttr(kProgramAttr) ? programs : others).push_back(op);
        return WalkResult::skip();
      }
      return WalkResult::advance();
    });
    if (others.empty() && programs.empty())
      others.push_back(getOperation());
    FrozenRewritePatternSet fuse = [&] {
      RewritePatternSet patterns(&getContext());
      populateFuseExpertsPatterns(patterns);
      return FrozenRewritePatternSet(std::move(patterns));
    }();
    FrozenRewritePatternSet expand = [&] {
      RewritePatternSet patterns(&getContext());
      populateExpandExpertMLPPatterns(patterns);
      return FrozenRewritePatternSet(std::move(patterns));
    }();
    for (Operation *op : others)
      if (failed(applyPatternsGreedily(op, fuse)))
        return signalPassFailure();
    for (Operation *op : programs)
      if (failed(applyPatternsGreedily(op, expand)))
        return signalPassFailure();
  }
};

} // namespace

void mlir::moe::populateFuseExpertsPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseExpertMLP>(patterns.getContext());
}
