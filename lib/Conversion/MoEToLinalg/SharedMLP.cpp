//===- SharedMLP.cpp - moe.shared_mlp to linalg ---------------------------===//
//
// The executable semantics of the shared expert: a dense gated MLP over every
// token, products accumulated in f32, its intermediates rounded to the
// tokens' element type as moe.expert_mlp's expansion rounds them; and of its
// adjoint, moe.shared_mlp_grad.
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

/// The `[T, W]` halves of a `[T, 2W]` tensor of `rows` rows.
static std::pair<Value, Value> halves(Emitter &em, Value gateUp,
                                      OpFoldResult rows) {
  ImplicitLocOpBuilder &b = em.b;
  Value width = arith::DivUIOp::create(b, em.sizeValue(gateUp, 1), em.index(2));
  auto one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
  auto half = [&](OpFoldResult col) {
    return tensor::ExtractSliceOp::create(b, gateUp,
                                          ArrayRef<OpFoldResult>{zero, col},
                                          ArrayRef<OpFoldResult>{rows, width},
                                          ArrayRef<OpFoldResult>{one, one})
        .getResult();
  };
  return {half(zero), half(width)};
}

/// silu(gate) * up of a `[T, 2W]` gate-up tensor of `rows` rows, rounded to
/// `elementType`.
static Value siluHalves(Emitter &em, Value gateUp, OpFoldResult rows,
                        Type elementType) {
  auto [gate, up] = halves(em, gateUp, rows);
  return em.generic(
      2, {}, {gate, up}, {em.map(2, {0, 1}), em.map(2, {0, 1})},
      em.empty({rows, em.size(gate, 1)}, elementType), em.map(2, {0, 1}),
      [&](ImplicitLocOpBuilder &nb, ValueRange args) {
        Emitter e{nb};
        Value g = e.toF32(args[0]);
        Value silu = arith::MulFOp::create(nb, g, e.sigmoid(g));
        Value h = arith::MulFOp::create(nb, silu, e.toF32(args[1]));
        return SmallVector<Value>{e.fromF32(h, elementType)};
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

/// Lowers `moe.shared_mlp_grad`: the forward again, then its adjoint as
/// contractions in f32.
struct SharedMLPGradLowering : OpConversionPattern<SharedMLPGradOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(SharedMLPGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    Value tokens = adaptor.getTokens(), grad = adaptor.getGrad();
    Value w13 = adaptor.getGateUpWeights(), w2 = adaptor.getDownWeights();
    Value gate = adaptor.getGateWeights();
    Type elementType = getElementTypeOrSelf(tokens);
    OpFoldResult t = em.size(tokens, 0), h = em.size(tokens, 1);
    OpFoldResult twoW = em.size(w13, 0), w = em.size(w2, 1);

    Value gateUp =
        em.convertElements(matmulTransposedB(em, tokens, w13), elementType);
    Value activated = siluHalves(em, gateUp, t, elementType);
    // d out = grad * sigma; d logit = (grad . out) * sigma * (1 - sigma).
    Value dOut = em.convertElements(grad, em.f32()), dLogit;
    if (gate) {
      Value out = matmulTransposedB(em, activated, w2);
      Value logits = em.gateLogits(tokens, gate);
      Value dot = em.sumRows(
          em.generic(2, {}, {dOut, out}, {em.identity(2), em.identity(2)},
                     em.empty({t, h}, em.f32()), em.identity(2),
                     [](ImplicitLocOpBuilder &nb, ValueRange args) {
                       return SmallVector<Value>{
                           arith::MulFOp::create(nb, args[0], args[1])};
                     })[0]);
      dLogit = em.generic(
          1, {}, {dot, logits}, {em.map(1, {0}), em.map(1, {0})},
          em.empty({t}, em.f32()), em.map(1, {0}),
          [](ImplicitLocOpBuilder &nb, ValueRange args) {
            Emitter e{nb};
            Value s = e.sigmoid(args[1]);
            Value ds = arith::MulFOp::create(
                nb, s, arith::SubFOp::create(nb, e.f32(1.0), s));
            return SmallVector<Value>{arith::MulFOp::create(nb, args[0], ds)};
          })[0];
      dOut = em.generic(2, {}, logits, em.map(2, {0}), dOut, em.identity(2),
                        [](ImplicitLocOpBuilder &nb, ValueRange args) {
                          return SmallVector<Value>{arith::MulFOp::create(
                              nb, args[1], Emitter{nb}.sigmoid(args[0]))};
                        })[0];
    }

    // Down: dh = dout . w2 (t, i, h); dw2 = dout^T . act (h, i, t).
    Value dAct = em.contract(dOut, {0, 2}, w2, {2, 1}, {t, w});
    Value dW2 = em.contract(dOut, {2, 0}, activated, {2, 1}, {h, w});
    // The activation, then gate-up: dx = dgu . w13 (t, h, j); dw13 = dgu^T
    // . tokens (j, h, t).
    auto [gateHalf, upHalf] = halves(em, gateUp, t);
    SmallVector<Value> dHalves =
        em.generic(2, {}, {gateHalf, upHalf, dAct},
                   SmallVector<AffineMap>(3, em.identity(2)),
                   {em.empty({t, w}, em.f32()), em.empty({t, w}, em.f32())},
                   {em.identity(2), em.identity(2)},
                   [](ImplicitLocOpBuilder &nb, ValueRange args) {
                     Emitter e{nb};
                     auto [dGate, dUp] = gatedActivationGrad(
                         e, GatedActivation::silu, e.toF32(args[0]),
                         e.toF32(args[1]), args[2], kGptOssAlpha, kGptOssLimit);
                     return SmallVector<Value>{dGate, dUp};
                   });
    auto one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
    Value dGateUp = em.empty({t, twoW}, em.f32());
    for (auto [i, part] : llvm::enumerate(dHalves))
      dGateUp = tensor::InsertSliceOp::create(
          b, part, dGateUp,
          ArrayRef<OpFoldResult>{zero, i == 0 ? OpFoldResult(zero) : w},
          ArrayRef<OpFoldResult>{t, w}, ArrayRef<OpFoldResult>{one, one});
    Value dTokens = em.contract(dGateUp, {0, 2}, w13, {2, 1}, {t, h});
    Value dW13 = em.contract(dGateUp, {2, 0}, tokens, {2, 1}, {twoW, h});

    if (gate) {
      // dx += dlogit * g[0]; dg[0, h] = sum_t dlogit[t] * tokens[t, h].
      AffineMap gateRow = AffineMap::get(
          2, 0, {b.getAffineConstantExpr(0), b.getAffineDimExpr(1)},
          b.getContext());
      dTokens = em.generic(
          2, {}, {dLogit, gate}, {em.map(2, {0}), gateRow}, dTokens,
          em.identity(2), [](ImplicitLocOpBuilder &nb, ValueRange args) {
            Emitter e{nb};
            Value p = arith::MulFOp::create(nb, args[0], e.toF32(args[1]));
            return SmallVector<Value>{arith::AddFOp::create(nb, args[2], p)};
          })[0];
    }
    SmallVector<Value> results{dTokens, dW13, dW2};
    if (gate) {
      Value dGate = em.generic(
          3, {2}, {dLogit, tokens}, {em.map(3, {2}), em.map(3, {2, 1})},
          em.filled({b.getIndexAttr(1), h}, em.f32(), em.f32(0.0)),
          em.map(3, {0, 1}), [](ImplicitLocOpBuilder &nb, ValueRange args) {
            Emitter e{nb};
            Value p = arith::MulFOp::create(nb, args[0], e.toF32(args[1]));
            return SmallVector<Value>{arith::AddFOp::create(nb, args[2], p)};
          })[0];
      results.push_back(dGate);
    }
    for (size_t i = 0; i < results.size(); ++i) {
      auto type = cast<RankedTensorType>(op->getResult(i).getType());
      results[i] = em.castTo(
          em.convertElements(results[i], type.getElementType()), type);
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

} // namespace

void mlir::moe::to_linalg::populateSharedMLPLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<SharedMLPLowering, SharedMLPGradLowering>(patterns.getContext());
}
