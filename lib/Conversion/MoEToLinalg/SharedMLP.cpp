//===- SharedMLP.cpp - moe.shared_mlp to linalg ---------------------------===//
//
// The executable semantics of the shared expert: a dense gated MLP over every
// token, products accumulated in f32, its intermediates rounded to the
// tokens' element type as moe.expert_mlp's expansion rounds them.
//
//===----------------------------------------------------------------------===//

#include "Emitter.h"

#include "MoE/Dialect/MoEDialect.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::to_linalg;

namespace {

/// `lhs [M, K] @ rhs [N, K]^T` as an f32 [M, N] tensor.
static Value matmulTransposedB(Emitter &em, Value lhs, Value rhs) {
  Value acc =
      em.filled({em.size(lhs, 0), em.size(rhs, 0)}, em.f32(), em.f32(0.0));
  return em.generic(
      3, {2}, {lhs, rhs}, {em.map(3, {0, 2}), em.map(3, {1, 2})}, acc,
      em.map(3, {0, 1}), [](ImplicitLocOpBuilder &nb, ValueRange args) {
        Emitter e{nb};
        Value p = arith::MulFOp::create(nb, e.toF32(args[0]), e.toF32(args[1]));
        return SmallVector<Value>{arith::AddFOp::create(nb, args[2], p)};
      })[0];
}

/// Lowers `moe.shared_mlp` to the gate-up matmul, silu(gate) * up, the down
/// matmul and, with `gate`, the per-token sigmoid scale.
struct SharedMLPLowering : OpConversionPattern<SharedMLPOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(SharedMLPOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    Value tokens = adaptor.getTokens();
    Type elementType = getElementTypeOrSelf(tokens);
    OpFoldResult numTokens = em.size(tokens, 0);

    Value gateUp = em.convertElements(
        matmulTransposedB(em, tokens, adaptor.getGateUpWeights()), elementType);
    Value width =
        arith::DivUIOp::create(b, em.sizeValue(gateUp, 1), em.index(2));
    auto one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
    auto half = [&](OpFoldResult col) {
      return tensor::ExtractSliceOp::create(
                 b, gateUp, ArrayRef<OpFoldResult>{zero, col},
                 ArrayRef<OpFoldResult>{numTokens, width},
                 ArrayRef<OpFoldResult>{one, one})
          .getResult();
    };
    Value activated = em.generic(
        2, {}, {half(zero), half(width)},
        {em.map(2, {0, 1}), em.map(2, {0, 1})},
        em.empty({numTokens, width}, elementType), em.map(2, {0, 1}),
        [&](ImplicitLocOpBuilder &nb, ValueRange args) {
          Emitter e{nb};
          Value gate = e.toF32(args[0]);
          Value silu = arith::MulFOp::create(nb, gate, e.sigmoid(gate));
          Value h = arith::MulFOp::create(nb, silu, e.toF32(args[1]));
          return SmallVector<Value>{e.fromF32(h, elementType)};
        })[0];
    Value result = matmulTransposedB(em, activated, adaptor.getDownWeights());

    if (Value gateWeights = adaptor.getGateWeights()) {
      Value logits = em.gateLogits(tokens, gateWeights);
      result =
          em.generic(2, {}, logits, em.map(2, {0}), result, em.map(2, {0, 1}),
                     [](ImplicitLocOpBuilder &nb, ValueRange args) {
                       return SmallVector<Value>{arith::MulFOp::create(
                           nb, args[1], Emitter{nb}.sigmoid(args[0]))};
                     })[0];
    }

    auto resultType = cast<RankedTensorType>(op.getType());
    result = em.convertElements(result, resultType.getElementType());
    rewriter.replaceOp(op, em.castTo(result, resultType));
    return success();
  }
};

} // namespace

void mlir::moe::to_linalg::populateSharedMLPLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<SharedMLPLowering>(patterns.getContext());
}
