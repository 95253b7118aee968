//===- ExpandFusedOps.cpp - fused moe ops into their parts ---------------===//

#include "MoE/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEEXPANDFUSEDOPS
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

Value mlir::moe::quantizeDequantize(OpBuilder &builder, Location loc,
                                    Value tensor,
                                    BlockScaledEncodingAttr encoding) {
  auto type = cast<RankedTensorType>(tensor.getType());
  auto quantize =
      QuantizeOp::create(builder, loc, type.clone(encoding.getElement()),
                         getBlockScalesType(type, encoding), tensor, encoding);
  return DequantizeOp::create(builder, loc, type, quantize.getValues(),
                              quantize.getScales(), encoding);
}

namespace {

/// Expands `moe.expert_mlp` into grouped_matmul -> swiglu -> grouped_matmul,
/// with the quantize -> dequantize pair of its `intermediate` encoding between
/// the swiglu and the down matmul.
struct ExpandExpertMLP : OpRewritePattern<ExpertMLPOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ExpertMLPOp op,
                                PatternRewriter &rewriter) const override {
    auto rowsType = cast<RankedTensorType>(op.getRows().getType());
    auto gateUpType = cast<RankedTensorType>(op.getGateUpWeights().getType());
    auto downType = cast<RankedTensorType>(op.getDownWeights().getType());
    Type elementType = rowsType.getElementType();
    int64_t numRows = rowsType.getDimSize(0);
    auto gateUpResultType =
        RankedTensorType::get({numRows, gateUpType.getDimSize(1)}, elementType);
    auto activationType =
        RankedTensorType::get({numRows, downType.getDimSize(2)}, elementType);

    Location loc = op.getLoc();
    Value gateUp = GroupedMatmulOp::create(
        rewriter, loc, gateUpResultType, op.getRows(), op.getGateUpWeights(),
        op.getOffsets(), op.getGateUpBias(), /*row_scale=*/Value());
    Value activated = SwiGLUOp::create(
        rewriter, loc, activationType, gateUp, /*scale=*/Value(),
        op.getActivationAttr(), op.getAlphaAttr(), op.getLimitAttr());
    if (BlockScaledEncodingAttr encoding = op.getIntermediateAttr())
      activated = quantizeDequantize(rewriter, loc, activated, encoding);
    rewriter.replaceOpWithNewOp<GroupedMatmulOp>(
        op, op.getType(), activated, op.getDownWeights(), op.getOffsets(),
        op.getDownBias(), op.getRowScale());
    return success();
  }
};

/// Expands a `moe.grouped_dgrad` with `act_grad` into the plain dgrad (its
/// product kept in f32, as the fused op keeps it) and `moe.swiglu_grad`.
struct ExpandActivationDgrad : OpRewritePattern<GroupedDgradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GroupedDgradOp op,
                                PatternRewriter &rewriter) const override {
    Value input = op.getActInput();
    if (!input)
      return rewriter.notifyMatchFailure(op, "no activation gradient");
    auto inputType = cast<RankedTensorType>(input.getType());
    auto weightsType = cast<RankedTensorType>(op.getWeights().getType());
    auto productType = RankedTensorType::get(
        {inputType.getDimSize(0), weightsType.getDimSize(2)},
        rewriter.getF32Type());
    Value product =
        GroupedDgradOp::create(rewriter, op.getLoc(), productType, op.getGrad(),
                               op.getWeights(), op.getOffsets());
    rewriter.replaceOpWithNewOp<SwiGLUGradOp>(
        op, op.getType(), input, product, op.getActivationAttr(),
        op.getAlphaAttr(), op.getLimitAttr());
    return success();
  }
};

/// Inlines the body of `moe.layer` in its place.
struct InlineLayer : OpRewritePattern<LayerOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LayerOp op,
                                PatternRewriter &rewriter) const override {
    Block &body = op.getBody().front();
    auto yield = cast<YieldOp>(body.getTerminator());
    Value result = yield.getValue();
    rewriter.eraseOp(yield);
    rewriter.inlineBlockBefore(&body, op);
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Expands `moe.fake_quantize` into the moe.quantize -> moe.dequantize pair
/// it stands for.
struct ExpandFakeQuantize : OpRewritePattern<FakeQuantizeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(FakeQuantizeOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, quantizeDequantize(rewriter, op.getLoc(),
                                              op.getInput(), op.getEncoding()));
    return success();
  }
};

struct MoEExpandFusedOpsPass
    : moe::impl::MoEExpandFusedOpsBase<MoEExpandFusedOpsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateExpandFusedOpsPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::moe::populateExpandExpertMLPPatterns(RewritePatternSet &patterns) {
  patterns.add<ExpandExpertMLP>(patterns.getContext());
}

void mlir::moe::populateExpandFusedOpsPatterns(RewritePatternSet &patterns) {
  patterns.add<InlineLayer, ExpandExpertMLP, ExpandActivationDgrad,
               ExpandFakeQuantize>(patterns.getContext());
}
