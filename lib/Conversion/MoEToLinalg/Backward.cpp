//===- Backward.cpp - the moe backward ops to linalg/tensor/scf ----------===//
//
// The executable reference semantics of the adjoint ops that
// --moe-generate-backward writes (MoEGradOps.td). f32 arithmetic, dynamic
// token count, as the forward lowerings in MoEToLinalg.cpp.
//
//===----------------------------------------------------------------------===//

#include "Emitter.h"

#include "MoE/Dialect/MoEDialect.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::to_linalg;

namespace {

/// Writes `slice` (rank one less) into expert `expert` of `dest` `[E, ...]`.
static Value insertExpert(Emitter &e, Value slice, Value dest, Value expert) {
  ImplicitLocOpBuilder &b = e.b;
  auto type = cast<RankedTensorType>(dest.getType());
  SmallVector<OpFoldResult> offsets{expert}, sizes{b.getIndexAttr(1)},
      strides(type.getRank(), b.getIndexAttr(1));
  for (int64_t d = 1; d < type.getRank(); ++d) {
    offsets.push_back(b.getIndexAttr(0));
    sizes.push_back(e.size(dest, d));
  }
  return tensor::InsertSliceOp::create(b, slice, dest, offsets, sizes, strides);
}

/// Products of two scalars as f32.
static Value mulF32(Emitter &e, Value a, Value b) {
  return arith::MulFOp::create(e.b, e.toF32(a), e.toF32(b));
}

//===----------------------------------------------------------------------===//
// moe.unpermute_grad
//===----------------------------------------------------------------------===//

/// Lowers `moe.unpermute_grad`: the row gradients by a loop over the
/// (token, slot) pairs that adds each weighted output-gradient row into its
/// slot's row; the weight gradients by one gather-and-reduce generic.
struct UnpermuteGradLowering : OpConversionPattern<UnpermuteGradOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(UnpermuteGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    Value grad = adaptor.getGrad(), rows = adaptor.getRows();
    Value slots = adaptor.getSlots(), weights = adaptor.getWeights();
    Value numRows = em.sizeValue(rows, 0);
    OpFoldResult k = em.size(slots, 1), hidden = em.size(rows, 1);
    Value kValue = em.sizeValue(slots, 1);
    Value acc = em.filled({em.size(rows, 0), hidden}, em.f32(), em.f32(0.0));
    Value pairs = arith::MulIOp::create(b, em.sizeValue(slots, 0), kValue);
    auto loop = scf::ForOp::create(
        b, em.index(0), pairs, em.index(1), ValueRange{acc},
        [&](OpBuilder &nested, Location loc, Value pair, ValueRange iter) {
          ImplicitLocOpBuilder nb(loc, nested);
          Emitter e{nb};
          Value token = arith::DivUIOp::create(nb, pair, kValue);
          Value slot = arith::RemUIOp::create(nb, pair, kValue);
          Value row = e.toIndex(e.extract(slots, {token, slot}));
          Value inRange = arith::AndIOp::create(
              nb,
              arith::CmpIOp::create(nb, arith::CmpIPredicate::sge, row,
                                    e.index(0)),
              arith::CmpIOp::create(nb, arith::CmpIPredicate::slt, row,
                                    numRows));
          auto ifOp = scf::IfOp::create(
              nb, inRange,
              [&](OpBuilder &thenBuilder, Location thenLoc) {
                ImplicitLocOpBuilder tb(thenLoc, thenBuilder);
                Emitter t{tb};
                Value weight =
                    weights ? t.extract(weights, {token, slot}) : t.f32(1.0);
                Value target = t.rowSlice(iter[0], row, tb.getIndexAttr(1));
                Value source = t.rowSlice(grad, token, tb.getIndexAttr(1));
                Value sum = t.generic(
                    2, {}, source, t.identity(2), target, t.identity(2),
                    [&](ImplicitLocOpBuilder &bb, ValueRange args) {
                      Emitter s{bb};
                      Value v = mulF32(s, args[0], weight);
                      return SmallVector<Value>{
                          arith::AddFOp::create(bb, args[1], v)};
                    })[0];
                auto one = tb.getIndexAttr(1), zero = tb.getIndexAttr(0);
                scf::YieldOp::create(
                    tb, tensor::InsertSliceOp::create(
                            tb, sum, iter[0], ArrayRef<OpFoldResult>{row, zero},
                            ArrayRef<OpFoldResult>{one, hidden},
                            ArrayRef<OpFoldResult>{one, one})
                            .getResult());
              },
              [&](OpBuilder &elseBuilder, Location elseLoc) {
                scf::YieldOp::create(elseBuilder, elseLoc, iter[0]);
              });
          scf::YieldOp::create(nb, ifOp.getResult(0));
        });
    Type rowsGradType = op.getRowsGrad().getType();
    SmallVector<Value> results{
        em.castTo(em.convertElements(loop.getResult(0),
                                     getElementTypeOrSelf(rowsGradType)),
                  rowsGradType)};

    if (weights) {
      // weights_grad[t, j] = grad[t, :] . rows[slots[t, j], :] over (t, j, h).
      Value dot = em.generic(
          3, {2}, {slots, grad}, {em.map(3, {0, 1}), em.map(3, {0, 2})},
          em.filled({em.size(slots, 0), k}, em.f32(), em.f32(0.0)),
          em.map(3, {0, 1}), [&](ImplicitLocOpBuilder &nb, ValueRange args) {
            Emitter e{nb};
            Value col = linalg::IndexOp::create(nb, 2);
            Value v = e.gatherOrZero(rows, e.toIndex(args[0]), col, numRows);
            return SmallVector<Value>{
                arith::AddFOp::create(nb, args[2], mulF32(e, v, args[1]))};
          })[0];
      results.push_back(em.castTo(dot, op.getWeightsGrad().getType()));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.grouped_dgrad / moe.grouped_wgrad
//===----------------------------------------------------------------------===//

/// Lowers `moe.grouped_dgrad` to one matmul-like generic per expert over its
/// rows: `[count, N] x [N, K] -> [count, K]`.
struct GroupedDgradLowering : OpConversionPattern<GroupedDgradOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(GroupedDgradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    // The activation's gradient is expanded first (ExpandFusedOps).
    if (op.getActInput())
      return rewriter.notifyMatchFailure(op, "fused activation gradient");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    Value grad = adaptor.getGrad(), weights = adaptor.getWeights();
    OpFoldResult kSize = em.size(weights, 2);
    Value acc = em.filled({em.size(grad, 0), kSize}, em.f32(), em.f32(0.0));
    Value result = em.forEachExpert(
        adaptor.getOffsets(), em.sizeValue(grad, 0), acc,
        [&](Emitter &e, Value expert, Value start, Value count,
            ValueRange iter) {
          Value lhs = e.rowSlice(grad, start, count);
          Value rhs = e.expertSlice(weights, expert);
          // (m, k, n): sum over n of grad[m, n] * weights[e][n, k].
          Value tile = e.contract(lhs, {0, 2}, rhs, {2, 1}, {count, kSize});
          auto one = e.b.getIndexAttr(1), zero = e.b.getIndexAttr(0);
          return SmallVector<Value>{tensor::InsertSliceOp::create(
              e.b, tile, iter[0], ArrayRef<OpFoldResult>{start, zero},
              ArrayRef<OpFoldResult>{count, kSize},
              ArrayRef<OpFoldResult>{one, one})};
        })[0];
    auto resultType = cast<RankedTensorType>(op.getType());
    result = em.convertElements(result, resultType.getElementType());
    rewriter.replaceOp(op, em.castTo(result, resultType));
    return success();
  }
};

/// Lowers `moe.grouped_wgrad` to, per expert, a generic reducing over its
/// rows: `[count, N]^T x [count, K] -> [N, K]` (and the column sums `[N]`).
struct GroupedWgradLowering : OpConversionPattern<GroupedWgradOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(GroupedWgradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    Value grad = adaptor.getGrad(), rows = adaptor.getRows();
    auto weightType = cast<RankedTensorType>(op.getWeightGrad().getType());
    int64_t numExperts = weightType.getDimSize(0);
    OpFoldResult n = em.size(grad, 1), kSize = em.size(rows, 1);
    bool withBias = static_cast<bool>(op.getBiasGrad());
    // kn_weights: [E, K, N], the same sums transposed.
    bool kn = op.getKnWeights();
    SmallVector<OpFoldResult> tileSizes{n, kSize};
    if (kn)
      std::swap(tileSizes[0], tileSizes[1]);
    SmallVector<Value> init{
        em.filled({b.getIndexAttr(numExperts), tileSizes[0], tileSizes[1]},
                  em.f32(), em.f32(0.0))};
    if (withBias)
      init.push_back(
          em.filled({b.getIndexAttr(numExperts), n}, em.f32(), em.f32(0.0)));
    SmallVector<Value> sums = em.forEachExpert(
        adaptor.getOffsets(), em.sizeValue(grad, 0), init,
        [&](Emitter &e, Value expert, Value start, Value count,
            ValueRange iter) {
          Value g = e.rowSlice(grad, start, count);
          Value r = e.rowSlice(rows, start, count);
          // (n, k, m): sum over the expert's rows m of grad[m, n] * rows[m, k]
          // (kn_weights: (k, n, m)).
          Value tile = kn ? e.contract(r, {2, 0}, g, {2, 1}, tileSizes)
                          : e.contract(g, {2, 0}, r, {2, 1}, tileSizes);
          SmallVector<Value> next{insertExpert(e, tile, iter[0], expert)};
          if (withBias) {
            Value column = e.generic(
                2, {1}, g, e.map(2, {1, 0}), e.filled({n}, e.f32(), e.f32(0.0)),
                e.map(2, {0}), [](ImplicitLocOpBuilder &bb, ValueRange args) {
                  return SmallVector<Value>{arith::AddFOp::create(
                      bb, args[1], Emitter{bb}.toF32(args[0]))};
                })[0];
            next.push_back(insertExpert(e, column, iter[1], expert));
          }
          return next;
        });
    SmallVector<Value> results;
    for (auto [sum, result] : llvm::zip(sums, op.getResults())) {
      auto type = cast<RankedTensorType>(result.getType());
      results.push_back(
          em.castTo(em.convertElements(sum, type.getElementType()), type));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.swiglu_grad
//===----------------------------------------------------------------------===//

} // namespace

std::pair<Value, Value> mlir::moe::to_linalg::gatedActivationGrad(
    Emitter &e, GatedActivation activation, Value gate, Value up, Value grad,
    float alpha, float limit) {
  ImplicitLocOpBuilder &b = e.b;
  auto mul = [&](Value x, Value y) {
    return arith::MulFOp::create(b, x, y).getResult();
  };
  auto oneMinus = [&](Value x) {
    return arith::SubFOp::create(b, e.f32(1.0), x).getResult();
  };
  auto onePlus = [&](Value x) {
    return arith::AddFOp::create(b, e.f32(1.0), x).getResult();
  };
  if (activation == GatedActivation::silu) {
    // silu'(g) = s(g) * (1 + g * (1 - s(g))).
    Value s = e.sigmoid(gate);
    Value dSilu = mul(s, onePlus(mul(gate, oneMinus(s))));
    return {mul(grad, mul(up, dSilu)), mul(grad, mul(gate, s))};
  }
  Value lim = e.f32(limit);
  Value g = arith::MinimumFOp::create(b, gate, lim);
  Value u = arith::MaximumFOp::create(b, arith::MinimumFOp::create(b, up, lim),
                                      arith::NegFOp::create(b, lim));
  Value s = e.sigmoid(mul(g, e.f32(alpha)));
  // d/dg [g * s(alpha g)] = s * (1 + alpha * g * (1 - s)).
  Value dGlu = mul(s, onePlus(mul(mul(e.f32(alpha), g), oneMinus(s))));
  Value dGate = mul(grad, mul(onePlus(u), dGlu));
  Value dUp = mul(grad, mul(g, s));
  // The clamps pass the gradient inside their bounds, bounds included.
  Value gateIn = arith::CmpFOp::create(b, arith::CmpFPredicate::OLE, gate, lim);
  Value upIn = arith::AndIOp::create(
      b, arith::CmpFOp::create(b, arith::CmpFPredicate::OLE, up, lim),
      arith::CmpFOp::create(b, arith::CmpFPredicate::OGE, up,
                            arith::NegFOp::create(b, lim)));
  return {arith::SelectOp::create(b, gateIn, dGate, e.f32(0.0)),
          arith::SelectOp::create(b, upIn, dUp, e.f32(0.0))};
}

namespace {

/// Lowers `moe.swiglu_grad` to one elementwise generic over the halves,
/// whose two results are written side by side.
struct SwiGLUGradLowering : OpConversionPattern<SwiGLUGradOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(SwiGLUGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    Value input = adaptor.getInput(), grad = adaptor.getGrad();
    OpFoldResult m = em.size(input, 0), width = em.size(grad, 1);
    auto one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
    bool interleaved = op.getInterleaved();
    auto resultType = cast<RankedTensorType>(op.getType());
    Type elementType = resultType.getElementType();
    GatedActivation activation = op.getActivation();
    float alpha = op.getAlphaOrDefault(), limit = op.getLimitOrDefault();
    SmallVector<Value> halves = em.generic(
        2, {},
        {em.gatedSlice(input, width, interleaved, 0),
         em.gatedSlice(input, width, interleaved, 1), grad},
        SmallVector<AffineMap>(3, em.identity(2)),
        {em.empty({m, width}, elementType), em.empty({m, width}, elementType)},
        {em.identity(2), em.identity(2)},
        [&](ImplicitLocOpBuilder &nb, ValueRange args) {
          Emitter e{nb};
          auto [dGate, dUp] = gatedActivationGrad(
              e, activation, e.toF32(args[0]), e.toF32(args[1]),
              e.toF32(args[2]), alpha, limit);
          return SmallVector<Value>{e.fromF32(dGate, elementType),
                                    e.fromF32(dUp, elementType)};
        });
    Value result = em.empty({m, em.size(input, 1)}, elementType);
    for (auto [i, part] : llvm::enumerate(halves)) {
      auto [col, stride] = em.gatedPart(width, interleaved, i);
      result = tensor::InsertSliceOp::create(
          b, part, result, ArrayRef<OpFoldResult>{zero, col},
          ArrayRef<OpFoldResult>{m, width},
          ArrayRef<OpFoldResult>{one, stride});
    }
    rewriter.replaceOp(op, em.castTo(result, resultType));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.route_grad
//===----------------------------------------------------------------------===//

/// Lowers `moe.route_grad`: recomputes the chosen scores from the logits,
/// goes back through scale and renormalisation, then through the score
/// function, and scatters to the chosen (or, for softmax_topk, all) logits.
struct RouteGradLowering : OpConversionPattern<RouteGradOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(RouteGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    Value logits = em.convertElements(adaptor.getLogits(), em.f32());
    Value ids = adaptor.getExpertIds(), grad = adaptor.getGrad();
    int64_t numExperts = cast<RankedTensorType>(logits.getType()).getDimSize(1);
    int64_t k = cast<RankedTensorType>(ids.getType()).getDimSize(1);
    OpFoldResult tokens = em.size(logits, 0);
    Routing routing = op.getRouting();
    auto pairs = [&](Type type) {
      return em.empty({tokens, b.getIndexAttr(k)}, type);
    };
    auto elementwise = [&](ValueRange ins, BodyFn body) {
      return em.generic(2, {}, ins,
                        SmallVector<AffineMap>(ins.size(), em.identity(2)),
                        pairs(em.f32()), em.identity(2), body)[0];
    };
    // Σ_j a[t, j] * b[t, j].
    auto rowDot = [&](Value a, Value c) {
      return em.sumRows(elementwise({a, c}, [](ImplicitLocOpBuilder &nb,
                                               ValueRange args) {
        return SmallVector<Value>{arith::MulFOp::create(nb, args[0], args[1])};
      }));
    };
    auto valid = [&](ImplicitLocOpBuilder &nb, Value id) {
      Emitter e{nb};
      Type i32 = nb.getI32Type();
      return arith::AndIOp::create(
                 nb,
                 arith::CmpIOp::create(nb, arith::CmpIPredicate::sge, id,
                                       e.intConst(i32, 0)),
                 arith::CmpIOp::create(nb, arith::CmpIPredicate::slt, id,
                                       e.intConst(i32, numExperts)))
          .getResult();
    };

    // v[t, j]: the chosen scores; 0 where the id is outside [0, E).
    Value probs =
        routing == Routing::softmax_topk ? em.softmaxRows(logits) : logits;
    Value chosen =
        em.generic(2, {}, ids, em.identity(2), pairs(em.f32()), em.identity(2),
                   [&](ImplicitLocOpBuilder &nb, ValueRange args) {
                     Emitter e{nb};
                     Value ok = valid(nb, args[0]);
                     Value col = arith::SelectOp::create(
                         nb, ok, args[0], e.intConst(nb.getI32Type(), 0));
                     Value token = linalg::IndexOp::create(nb, 0);
                     Value v = e.extract(probs, {token, e.toIndex(col)});
                     if (routing == Routing::sigmoid_topk)
                       v = e.sigmoid(v);
                     return SmallVector<Value>{
                         arith::SelectOp::create(nb, ok, v, e.f32(0.0))};
                   })[0];
    if (routing == Routing::topk_softmax)
      chosen = em.softmaxRows(chosen);

    // Back through `scale` and renormalisation: w = v / S,
    // dv = (dw - Σ_l dw_l w_l) / S.
    Value dv = grad;
    if (std::optional<APFloat> scale = op.getScalingFactor()) {
      double factor = scale->convertToDouble();
      dv = elementwise(dv, [&](ImplicitLocOpBuilder &nb, ValueRange args) {
        return SmallVector<Value>{
            arith::MulFOp::create(nb, args[0], Emitter{nb}.f32(factor))};
      });
    }
    if (op.getRenormalize()) {
      double epsilon = routing == Routing::sigmoid_topk ? 1e-20 : 0.0;
      Value sums = em.sumRows(chosen);
      Value normalized = em.divideRows(chosen, sums, epsilon);
      Value dot = rowDot(dv, normalized);
      dv = em.generic(2, {}, {dv, dot}, {em.identity(2), em.map(2, {0})},
                      pairs(em.f32()), em.identity(2),
                      [](ImplicitLocOpBuilder &nb, ValueRange args) {
                        return SmallVector<Value>{
                            arith::SubFOp::create(nb, args[0], args[1])};
                      })[0];
      dv = em.divideRows(dv, sums, epsilon);
    }

    // Back through the score function to the chosen logits (softmax over
    // the k chosen, sigmoid), or to every logit (softmax over all E).
    Value dotV = rowDot(dv, chosen);
    Value dChosen = dv;
    if (routing == Routing::sigmoid_topk)
      dChosen = elementwise(
          {dv, chosen}, [](ImplicitLocOpBuilder &nb, ValueRange args) {
            Emitter e{nb};
            Value ds = arith::MulFOp::create(
                nb, args[1], arith::SubFOp::create(nb, e.f32(1.0), args[1]));
            return SmallVector<Value>{arith::MulFOp::create(nb, args[0], ds)};
          });
    if (routing == Routing::topk_softmax)
      dChosen = em.generic(
          2, {}, {dv, chosen, dotV},
          {em.identity(2), em.identity(2), em.map(2, {0})}, pairs(em.f32()),
          em.identity(2), [](ImplicitLocOpBuilder &nb, ValueRange args) {
            Value d = arith::SubFOp::create(nb, args[0], args[2]);
            return SmallVector<Value>{arith::MulFOp::create(nb, args[1], d)};
          })[0];
    // scattered[t, e] = Σ_j [ids[t, j] == e] dChosen[t, j], over (t, e, j).
    Value scattered = em.generic(
        3, {2}, {ids, dChosen}, {em.map(3, {0, 2}), em.map(3, {0, 2})},
        em.filled({tokens, b.getIndexAttr(numExperts)}, em.f32(), em.f32(0.0)),
        em.map(3, {0, 1}), [](ImplicitLocOpBuilder &nb, ValueRange args) {
          Emitter e{nb};
          Value col =
              e.fromIndex(linalg::IndexOp::create(nb, 1), nb.getI32Type());
          Value hit =
              arith::CmpIOp::create(nb, arith::CmpIPredicate::eq, col, args[0]);
          Value v = arith::SelectOp::create(nb, hit, args[1], e.f32(0.0));
          return SmallVector<Value>{arith::AddFOp::create(nb, args[2], v)};
        })[0];
    Value result = scattered;
    if (routing == Routing::softmax_topk)
      // dx = p * (dp - Σ_j dv_j v_j): the softmax's adjoint over all E.
      result = em.generic(
          2, {}, {scattered, probs, dotV},
          {em.identity(2), em.identity(2), em.map(2, {0})},
          em.empty({tokens, b.getIndexAttr(numExperts)}, em.f32()),
          em.identity(2), [](ImplicitLocOpBuilder &nb, ValueRange args) {
            Value d = arith::SubFOp::create(nb, args[0], args[2]);
            return SmallVector<Value>{arith::MulFOp::create(nb, args[1], d)};
          })[0];
    auto resultType = cast<RankedTensorType>(op.getType());
    result = em.convertElements(result, resultType.getElementType());
    rewriter.replaceOp(op, em.castTo(result, resultType));
    return success();
  }
};

} // namespace

void mlir::moe::to_linalg::populateBackwardLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<UnpermuteGradLowering, GroupedDgradLowering,
               GroupedWgradLowering, SwiGLUGradLowering, RouteGradLowering>(
      patterns.getContext());
}
