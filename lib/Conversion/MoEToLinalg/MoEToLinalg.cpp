//===- MoEToLinalg.cpp - moe ops to linalg/tensor/scf/arith --------------===//
//
// The executable reference semantics of the moe dialect. Every pattern works
// on tensors with f32 arithmetic and supports a dynamic token count.
//
//===----------------------------------------------------------------------===//

#include "Emitter.h"

#include "MoE/Conversion/Passes.h"
#include "MoE/Dialect/MoEDialect.h"
#include "MoE/Transforms/Passes.h"
#include "MoE/Utils/FP8Codec.h"

namespace mlir::moe {
#define GEN_PASS_DEF_CONVERTMOETOLINALG
#include "MoE/Conversion/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::to_linalg;

namespace {

//===----------------------------------------------------------------------===//
// moe.route
//===----------------------------------------------------------------------===//

/// Group-limited routing: which experts lie in each token's best groups.
static Value groupMask(Emitter &em, Value choice, int64_t numGroups,
                       int64_t topGroups) {
  ImplicitLocOpBuilder &b = em.b;
  auto choiceType = cast<RankedTensorType>(choice.getType());
  int64_t numExperts = choiceType.getDimSize(1);
  int64_t groupSize = numExperts / numGroups;
  OpFoldResult tokens = em.size(choice, 0);
  SmallVector<ReassociationIndices> reassoc{{0}, {1, 2}};
  auto groupedType = RankedTensorType::get(
      {choiceType.getDimSize(0), numGroups, groupSize}, em.f32());
  Value grouped = tensor::ExpandShapeOp::create(
      b, groupedType, choice, reassoc,
      ArrayRef<OpFoldResult>{tokens, b.getIndexAttr(numGroups),
                             b.getIndexAttr(groupSize)});

  // A group's score is the sum of its two best scores (DeepSeek-V3).
  Value minusInf = em.f32(-INFINITY);
  Value best1 =
      em.filled({tokens, b.getIndexAttr(numGroups)}, em.f32(), minusInf);
  Value best2 =
      em.filled({tokens, b.getIndexAttr(numGroups)}, em.f32(), minusInf);
  SmallVector<Value> bests = em.generic(
      3, {2}, grouped, em.map(3, {0, 1, 2}), {best1, best2},
      {em.map(3, {0, 1}), em.map(3, {0, 1})},
      [](ImplicitLocOpBuilder &nb, ValueRange args) {
        Value v = args[0], b1 = args[1], b2 = args[2];
        Value gt1 = arith::CmpFOp::create(nb, arith::CmpFPredicate::OGT, v, b1);
        Value gt2 = arith::CmpFOp::create(nb, arith::CmpFPredicate::OGT, v, b2);
        Value newB2 = arith::SelectOp::create(
            nb, gt1, b1, arith::SelectOp::create(nb, gt2, v, b2));
        return SmallVector<Value>{arith::SelectOp::create(nb, gt1, v, b1),
                                  newB2};
      });
  Value groupScores = bests[0];
  if (groupSize >= 2)
    groupScores = em.generic(
        2, {}, {bests[0], bests[1]}, {em.map(2, {0, 1}), em.map(2, {0, 1})},
        em.empty({tokens, b.getIndexAttr(numGroups)}, em.f32()),
        em.map(2, {0, 1}), [](ImplicitLocOpBuilder &nb, ValueRange args) {
          return SmallVector<Value>{
              arith::AddFOp::create(nb, args[0], args[1])};
        })[0];

  Value chosenGroups = em.topK(groupScores, Value(), topGroups, {});
  Value expertAllowed = em.generic(
      3, {}, chosenGroups, em.map(3, {0, 1}),
      em.empty({tokens, b.getIndexAttr(numGroups), b.getIndexAttr(groupSize)},
               b.getI1Type()),
      em.map(3, {0, 1, 2}), [](ImplicitLocOpBuilder &, ValueRange args) {
        return SmallVector<Value>{args[0]};
      })[0];
  return tensor::CollapseShapeOp::create(b, expertAllowed, reassoc);
}

/// Lowers `moe.route` to per-token softmax/sigmoid and an iterative top-k.
struct RouteLowering : OpConversionPattern<RouteOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(RouteOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    Value logits = em.convertElements(adaptor.getLogits(), em.f32());
    OpFoldResult tokens = em.size(logits, 0);
    int64_t k = op.getTopK();
    Routing routing = op.getRouting();

    // Scores that become weights, and (possibly biased) scores that choose.
    Value scores = logits;
    if (routing == Routing::softmax_topk)
      scores = em.softmaxRows(logits);
    if (routing == Routing::sigmoid_topk)
      scores = em.generic(
          2, {}, logits, em.map(2, {0, 1}),
          em.empty({tokens, em.size(logits, 1)}, em.f32()), em.map(2, {0, 1}),
          [](ImplicitLocOpBuilder &nb, ValueRange args) {
            return SmallVector<Value>{Emitter{nb}.sigmoid(args[0])};
          })[0];
    Value choice = scores;
    if (Value bias = adaptor.getCorrectionBias())
      choice = em.generic(
          2, {}, {scores, bias}, {em.map(2, {0, 1}), em.map(2, {1})},
          em.empty({tokens, em.size(logits, 1)}, em.f32()), em.map(2, {0, 1}),
          [](ImplicitLocOpBuilder &nb, ValueRange args) {
            return SmallVector<Value>{
                arith::AddFOp::create(nb, args[0], args[1])};
          })[0];
    Value allowed;
    if (op.getNumGroups())
      allowed = groupMask(em, choice, *op.getNumGroups(), *op.getTopGroups());

    Value ids = em.empty({tokens, b.getIndexAttr(k)}, b.getI32Type());
    em.topK(choice, allowed, k, [&](int64_t step, Value picked) {
      ids = tensor::InsertSliceOp::create(
          b, picked, ids,
          ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(step)},
          ArrayRef<OpFoldResult>{tokens, b.getIndexAttr(1)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
    });

    // Weights come from the unbiased scores of the chosen experts. An id of
    // -1 (no candidate left, only with NaN scores) reads expert 0.
    Value weights = em.generic(
        2, {}, ids, em.map(2, {0, 1}),
        em.empty({tokens, b.getIndexAttr(k)}, em.f32()), em.map(2, {0, 1}),
        [&](ImplicitLocOpBuilder &nb, ValueRange args) {
          Emitter e{nb};
          Value expert = arith::MaxSIOp::create(nb, args[0],
                                                e.intConst(nb.getI32Type(), 0));
          Value token = linalg::IndexOp::create(nb, 0);
          return SmallVector<Value>{
              e.extract(scores, {token, e.toIndex(expert)})};
        })[0];
    if (routing == Routing::topk_softmax)
      weights = em.softmaxRows(weights);
    if (op.getRenormalize())
      weights = em.divideRows(weights, em.sumRows(weights),
                              routing == Routing::sigmoid_topk ? 1e-20 : 0.0);
    if (std::optional<APFloat> scale = op.getScalingFactor()) {
      double factor = scale->convertToDouble();
      weights = em.generic(2, {}, ValueRange{}, {}, weights, em.map(2, {0, 1}),
                           [&](ImplicitLocOpBuilder &nb, ValueRange args) {
                             return SmallVector<Value>{arith::MulFOp::create(
                                 nb, args[0], Emitter{nb}.f32(factor))};
                           })[0];
    }
    if (int64_t shared = op.getSharedSlots())
      std::tie(ids, weights) =
          appendSharedSlots(em, ids, weights, shared, em.size(logits, 1),
                            adaptor.getSharedTokens(), adaptor.getSharedGate());
    rewriter.replaceOp(op, {em.castTo(ids, op.getExpertIds().getType()),
                            em.castTo(weights, op.getWeights().getType())});
    return success();
  }

  /// Columns k .. k+c-1: experts E .. E+c-1, weighing 1 or, with a gate,
  /// sigmoid(tokens[t, :] . gate[0, :]) in f32.
  static std::pair<Value, Value>
  appendSharedSlots(Emitter &em, Value ids, Value weights, int64_t shared,
                    OpFoldResult experts, Value tokens, Value gate) {
    ImplicitLocOpBuilder &b = em.b;
    OpFoldResult numTokens = em.size(ids, 0);
    int64_t k = cast<RankedTensorType>(ids.getType()).getDimSize(1);
    int64_t base = *getConstantIntValue(experts);
    Value sharedIds = em.generic(
        2, {}, ValueRange{}, {},
        em.empty({numTokens, b.getIndexAttr(shared)}, b.getI32Type()),
        em.map(2, {0, 1}), [&](ImplicitLocOpBuilder &nb, ValueRange) {
          Value column = arith::IndexCastOp::create(
              nb, nb.getI32Type(), linalg::IndexOp::create(nb, 1));
          return SmallVector<Value>{arith::AddIOp::create(
              nb, column, Emitter{nb}.intConst(nb.getI32Type(), base))};
        })[0];
    Value sharedWeights;
    if (tokens) {
      Value logit = em.gateLogits(tokens, gate);
      sharedWeights = em.generic(
          2, {}, logit, em.map(2, {0}),
          em.empty({numTokens, b.getIndexAttr(shared)}, em.f32()),
          em.map(2, {0, 1}), [](ImplicitLocOpBuilder &nb, ValueRange args) {
            return SmallVector<Value>{Emitter{nb}.sigmoid(args[0])};
          })[0];
    } else {
      sharedWeights =
          em.filled({numTokens, b.getIndexAttr(shared)}, em.f32(), em.f32(1.0));
    }
    auto append = [&](Value routed, Value tail, Type element) {
      Value all = em.empty({numTokens, b.getIndexAttr(k + shared)}, element);
      auto one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
      all = tensor::InsertSliceOp::create(
          b, routed, all, ArrayRef<OpFoldResult>{zero, zero},
          ArrayRef<OpFoldResult>{numTokens, b.getIndexAttr(k)},
          ArrayRef<OpFoldResult>{one, one});
      return tensor::InsertSliceOp::create(
                 b, tail, all, ArrayRef<OpFoldResult>{zero, b.getIndexAttr(k)},
                 ArrayRef<OpFoldResult>{numTokens, b.getIndexAttr(shared)},
                 ArrayRef<OpFoldResult>{one, one})
          .getResult();
    };
    return {append(ids, sharedIds, b.getI32Type()),
            append(weights, sharedWeights, em.f32())};
  }
};

//===----------------------------------------------------------------------===//
// moe.permute
//===----------------------------------------------------------------------===//

/// Sizes of `type`: its static dims, else the matching entry of `values`.
static SmallVector<OpFoldResult> mixedSizes(Builder &b, RankedTensorType type,
                                            ArrayRef<OpFoldResult> values) {
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    sizes.push_back(type.isDynamicDim(d) ? values[d]
                                         : b.getIndexAttr(type.getDimSize(d)));
  return sizes;
}

/// One (token, slot) pair of the flattened expert ids.
struct RoutedPair {
  Value token, slot, expert;
  Value valid; // expert id in [0, E)
};

/// Lowers `moe.permute` to a counting sort in `scf.for` loops over the
/// flattened (token, slot) pairs, then a gather of the token rows.
struct PermuteLowering : OpConversionPattern<PermuteOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(PermuteOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    Value tokens = adaptor.getTokens(), ids = adaptor.getExpertIds();
    auto offsetsType = cast<RankedTensorType>(op.getOffsets().getType());
    auto slotsType = cast<RankedTensorType>(op.getSlots().getType());
    auto rowsType = cast<RankedTensorType>(op.getRows().getType());
    Type offsetType = offsetsType.getElementType();
    Type slotType = slotsType.getElementType();
    int64_t numExperts = offsetsType.getDimSize(0) - 1;
    int64_t padTo = op.getPadTo().value_or(1);

    Value numTokens = em.sizeValue(tokens, 0);
    Value k = em.sizeValue(ids, 1);
    Value numPairs = arith::MulIOp::create(b, numTokens, k);
    Value numRows =
        arith::AddIOp::create(b, numPairs, em.index(numExperts * (padTo - 1)));
    Value zero = em.index(0), one = em.index(1);
    Value expertCount = em.index(numExperts);
    Type i64 = b.getI64Type();

    // Decodes pair i into (token, slot, expert, valid expert id).
    auto decodePair = [&](Emitter &e, Value i) {
      Value token = arith::DivUIOp::create(e.b, i, k);
      Value slot = arith::RemUIOp::create(e.b, i, k);
      Value expert = e.toIndex(e.extract(ids, {token, slot}));
      Value valid = arith::AndIOp::create(
          e.b,
          arith::CmpIOp::create(e.b, arith::CmpIPredicate::sge, expert,
                                e.index(0)),
          arith::CmpIOp::create(e.b, arith::CmpIPredicate::slt, expert,
                                expertCount));
      return RoutedPair{token, slot, expert, valid};
    };
    // Emits `scf.if cond` yielding `thenFn()` or `elseValues`.
    auto ifElse = [](ImplicitLocOpBuilder &ib, Value cond,
                     function_ref<SmallVector<Value>(Emitter &)> thenFn,
                     ValueRange elseValues) {
      auto ifOp = scf::IfOp::create(
          ib, cond,
          [&](OpBuilder &nested, Location loc) {
            ImplicitLocOpBuilder nb(loc, nested);
            Emitter e{nb};
            scf::YieldOp::create(nb, thenFn(e));
          },
          [&](OpBuilder &nested, Location loc) {
            scf::YieldOp::create(nested, loc, elseValues);
          });
      return SmallVector<Value>(ifOp.getResults());
    };

    // 1. Rows per expert.
    Value counts =
        em.filled({b.getIndexAttr(numExperts)}, i64, em.intConst(i64, 0));
    counts =
        scf::ForOp::create(
            b, zero, numPairs, one, ValueRange{counts},
            [&](OpBuilder &nested, Location loc, Value i, ValueRange iter) {
              ImplicitLocOpBuilder nb(loc, nested);
              Emitter e{nb};
              RoutedPair pair = decodePair(e, i);
              SmallVector<Value> next = ifElse(
                  nb, pair.valid,
                  [&](Emitter &t) {
                    Value c = t.extract(iter[0], pair.expert);
                    c = arith::AddIOp::create(t.b, c, t.intConst(i64, 1));
                    return SmallVector<Value>{
                        t.insert(c, iter[0], pair.expert)};
                  },
                  iter);
              scf::YieldOp::create(nb, next);
            })
            .getResult(0);

    // 2. Exclusive scan of the (padded) counts.
    Value offsets = em.filled({b.getIndexAttr(numExperts + 1)}, offsetType,
                              em.intConst(offsetType, 0));
    offsets = scf::ForOp::create(
                  b, zero, expertCount, one, ValueRange{offsets, zero},
                  [&](OpBuilder &nested, Location loc, Value expert,
                      ValueRange iter) {
                    ImplicitLocOpBuilder nb(loc, nested);
                    Emitter e{nb};
                    Value count = e.toIndex(e.extract(counts, expert));
                    if (padTo > 1) {
                      Value pad = e.index(padTo);
                      count = arith::MulIOp::create(
                          nb, arith::CeilDivUIOp::create(nb, count, pad), pad);
                    }
                    Value end = arith::AddIOp::create(nb, iter[1], count);
                    Value next = arith::AddIOp::create(nb, expert, e.index(1));
                    Value updated =
                        e.insert(e.fromIndex(end, offsetType), iter[0], next);
                    scf::YieldOp::create(nb, ValueRange{updated, end});
                  })
                  .getResult(0);

    // 3. Hand out rows in pair order: the slot map and its inverse.
    SmallVector<OpFoldResult> rowSizes =
        mixedSizes(b, rowsType, {numRows, em.size(tokens, 1)});
    Value rowToken = em.filled({rowSizes[0]}, i64, em.intConst(i64, -1));
    Value cursor = tensor::ExtractSliceOp::create(
        b, offsets, ArrayRef<OpFoldResult>{b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(numExperts)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
    Value slots = em.empty(mixedSizes(b, slotsType, {numTokens, k}), slotType);
    auto assign = scf::ForOp::create(
        b, zero, numPairs, one, ValueRange{cursor, rowToken, slots},
        [&](OpBuilder &nested, Location loc, Value i, ValueRange iter) {
          ImplicitLocOpBuilder nb(loc, nested);
          Emitter e{nb};
          RoutedPair pair = decodePair(e, i);
          // The if yields the slot as a scalar so slots is updated once.
          SmallVector<Value> next = ifElse(
              nb, pair.valid,
              [&](Emitter &t) {
                Value row = t.toIndex(t.extract(iter[0], pair.expert));
                Value bumped = arith::AddIOp::create(t.b, row, t.index(1));
                return SmallVector<Value>{
                    t.insert(t.fromIndex(bumped, offsetType), iter[0],
                             pair.expert),
                    t.insert(t.fromIndex(pair.token, i64), iter[1], row),
                    t.fromIndex(row, slotType)};
              },
              ValueRange{iter[0], iter[1], e.intConst(slotType, -1)});
          Value updatedSlots =
              e.insert(next[2], iter[2], {pair.token, pair.slot});
          scf::YieldOp::create(nb, ValueRange{next[0], next[1], updatedSlots});
        });
    rowToken = assign.getResult(1);
    slots = assign.getResult(2);

    // 4. Gather token rows; padding rows are zero.
    Type elementType = rowsType.getElementType();
    Value rows = em.generic(
        2, {}, rowToken, em.map(2, {0}), em.empty(rowSizes, elementType),
        em.map(2, {0, 1}), [&](ImplicitLocOpBuilder &nb, ValueRange args) {
          Emitter e{nb};
          Value token = e.toIndex(args[0]);
          Value col = linalg::IndexOp::create(nb, 1);
          Value v = e.gatherOrZero(tokens, token, col, numTokens);
          return SmallVector<Value>{e.fromF32(v, elementType)};
        })[0];

    rewriter.replaceOp(
        op, {em.castTo(rows, rowsType), offsets, em.castTo(slots, slotsType)});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.grouped_matmul
//===----------------------------------------------------------------------===//

/// Lowers `moe.grouped_matmul` to a loop over experts, each a matmul on its
/// dynamic row range inserted into an f32 accumulator.
struct GroupedMatmulLowering : OpConversionPattern<GroupedMatmulOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(GroupedMatmulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    Value rows = adaptor.getRows(), weights = adaptor.getWeights();
    Value offsets = adaptor.getOffsets(), bias = adaptor.getBias();
    auto weightsType = cast<RankedTensorType>(weights.getType());
    int64_t numExperts =
        cast<RankedTensorType>(offsets.getType()).getDimSize(0) - 1;
    // kn_weights: each expert's weights are [K, N], not [N, K].
    bool kn = op.getKnWeights();
    OpFoldResult m = em.size(rows, 0), kSize = em.size(rows, 1),
                 n = em.size(weights, op.getWeightsNDim());
    Value numRows = em.sizeValue(rows, 0);
    Value acc = em.filled({m, n}, em.f32(), em.f32(0.0));
    auto one = b.getIndexAttr(1), zero = b.getIndexAttr(0);

    auto loop = scf::ForOp::create(
        b, em.index(0), em.index(numExperts), em.index(1),
        ValueRange{acc, em.index(0)},
        [&](OpBuilder &nested, Location loc, Value expert, ValueRange iter) {
          ImplicitLocOpBuilder nb(loc, nested);
          Emitter e{nb};
          auto [start, count] =
              e.expertRange(offsets, expert, iter[1], numRows);
          Value lhs = tensor::ExtractSliceOp::create(
              nb, rows, ArrayRef<OpFoldResult>{start, zero},
              ArrayRef<OpFoldResult>{count, kSize},
              ArrayRef<OpFoldResult>{one, one});
          auto expertWeightsType =
              RankedTensorType::get(weightsType.getShape().drop_front(),
                                    weightsType.getElementType());
          Value rhs = tensor::ExtractSliceOp::create(
              nb, expertWeightsType, weights,
              ArrayRef<OpFoldResult>{expert, zero, zero},
              kn ? ArrayRef<OpFoldResult>{one, kSize, n}
                 : ArrayRef<OpFoldResult>{one, n, kSize},
              ArrayRef<OpFoldResult>{one, one, one});
          Value tile = e.filled({count, n}, e.f32(), e.f32(0.0));
          tile = e.generic(
              3, {2}, {lhs, rhs},
              {e.map(3, {0, 2}), kn ? e.map(3, {2, 1}) : e.map(3, {1, 2})},
              tile, e.map(3, {0, 1}),
              [](ImplicitLocOpBuilder &bb, ValueRange args) {
                Emitter s{bb};
                Value p = arith::MulFOp::create(bb, s.toF32(args[0]),
                                                s.toF32(args[1]));
                return SmallVector<Value>{
                    arith::AddFOp::create(bb, args[2], p)};
              })[0];
          if (bias) {
            auto biasType = cast<RankedTensorType>(bias.getType());
            Value expertBias = tensor::ExtractSliceOp::create(
                nb,
                RankedTensorType::get({biasType.getDimSize(1)},
                                      biasType.getElementType()),
                bias, ArrayRef<OpFoldResult>{expert, zero},
                ArrayRef<OpFoldResult>{one, e.size(bias, 1)},
                ArrayRef<OpFoldResult>{one, one});
            tile = e.generic(2, {}, expertBias, e.map(2, {1}), tile,
                             e.map(2, {0, 1}),
                             [](ImplicitLocOpBuilder &bb, ValueRange args) {
                               return SmallVector<Value>{arith::AddFOp::create(
                                   bb, args[1], Emitter{bb}.toF32(args[0]))};
                             })[0];
          }
          Value updated = tensor::InsertSliceOp::create(
              nb, tile, iter[0], ArrayRef<OpFoldResult>{start, zero},
              ArrayRef<OpFoldResult>{count, n},
              ArrayRef<OpFoldResult>{one, one});
          Value end = arith::AddIOp::create(nb, start, count);
          scf::YieldOp::create(nb, ValueRange{updated, end});
        });
    Value result = loop.getResult(0);
    if (Value scale = adaptor.getRowScale())
      result =
          em.generic(2, {}, scale, em.map(2, {0}), result, em.map(2, {0, 1}),
                     [](ImplicitLocOpBuilder &bb, ValueRange args) {
                       return SmallVector<Value>{
                           arith::MulFOp::create(bb, args[1], args[0])};
                     })[0];
    auto resultType = cast<RankedTensorType>(op.getType());
    result = em.convertElements(result, resultType.getElementType());
    rewriter.replaceOp(op, em.castTo(result, resultType));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.swiglu
//===----------------------------------------------------------------------===//

/// The gated activation on f32 scalars.
static Value gatedActivation(Emitter &e, GatedActivation activation, Value gate,
                             Value up, float alpha, float limit) {
  ImplicitLocOpBuilder &b = e.b;
  if (activation == GatedActivation::silu)
    return arith::MulFOp::create(
        b, arith::MulFOp::create(b, gate, e.sigmoid(gate)), up);
  // GPT-OSS: gate clamped from above, up on both sides (NaN propagates).
  Value g = arith::MinimumFOp::create(b, gate, e.f32(limit));
  Value u = arith::MaximumFOp::create(
      b, arith::MinimumFOp::create(b, up, e.f32(limit)), e.f32(-limit));
  Value glu = arith::MulFOp::create(
      b, g, e.sigmoid(arith::MulFOp::create(b, g, e.f32(alpha))));
  return arith::MulFOp::create(b, arith::AddFOp::create(b, u, e.f32(1.0)), glu);
}

/// Lowers `moe.swiglu` to one elementwise `linalg.generic` over the halves.
struct SwiGLULowering : OpConversionPattern<SwiGLUOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(SwiGLUOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    Value input = adaptor.getInput();
    OpFoldResult m = em.size(input, 0);
    Value width =
        arith::DivUIOp::create(b, em.sizeValue(input, 1), em.index(2));
    bool interleaved = op.getInterleaved();
    SmallVector<Value> ins{em.gatedSlice(input, width, interleaved, 0),
                           em.gatedSlice(input, width, interleaved, 1)};
    SmallVector<AffineMap> maps{em.map(2, {0, 1}), em.map(2, {0, 1})};
    if (Value scale = adaptor.getScale()) {
      ins.push_back(scale);
      maps.push_back(em.map(2, {0}));
    }
    auto resultType = cast<RankedTensorType>(op.getType());
    Type elementType = resultType.getElementType();
    GatedActivation activation = op.getActivation();
    float alpha = op.getAlphaOrDefault(), limit = op.getLimitOrDefault();
    Value result = em.generic(
        2, {}, ins, maps, em.empty({m, width}, elementType), em.map(2, {0, 1}),
        [&](ImplicitLocOpBuilder &nb, ValueRange args) {
          Emitter e{nb};
          Value v = gatedActivation(e, activation, e.toF32(args[0]),
                                    e.toF32(args[1]), alpha, limit);
          if (ins.size() == 3)
            v = arith::MulFOp::create(nb, v, args[2]);
          return SmallVector<Value>{e.fromF32(v, elementType)};
        })[0];
    rewriter.replaceOp(op, em.castTo(result, resultType));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.unpermute
//===----------------------------------------------------------------------===//

/// Lowers `moe.unpermute` to a gather-and-reduce `linalg.generic` over
/// (token, hidden, slot), then the elementwise add of a `shared` addend.
struct UnpermuteLowering : OpConversionPattern<UnpermuteOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(UnpermuteOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    Value rows = adaptor.getRows(), slots = adaptor.getSlots();
    Value weights = adaptor.getWeights();
    Value numRows = em.sizeValue(rows, 0);
    SmallVector<Value> ins{slots};
    SmallVector<AffineMap> maps{em.map(3, {0, 2})};
    if (weights) {
      ins.push_back(weights);
      maps.push_back(em.map(3, {0, 2}));
    }
    Value acc =
        em.filled({em.size(slots, 0), em.size(rows, 1)}, em.f32(), em.f32(0.0));
    Value result = em.generic(
        3, {2}, ins, maps, acc, em.map(3, {0, 1}),
        [&](ImplicitLocOpBuilder &nb, ValueRange args) {
          Emitter e{nb};
          Value row = e.toIndex(args[0]);
          Value col = linalg::IndexOp::create(nb, 1);
          Value v = e.gatherOrZero(rows, row, col, numRows);
          if (weights)
            v = arith::MulFOp::create(nb, v, args[1]);
          return SmallVector<Value>{arith::AddFOp::create(nb, args.back(), v)};
        })[0];
    // The shared expert's output joins the f32 sum before the one rounding.
    if (Value shared = adaptor.getShared())
      result = em.generic(2, {}, shared, em.identity(2), result, em.identity(2),
                          [](ImplicitLocOpBuilder &nb, ValueRange args) {
                            return SmallVector<Value>{arith::AddFOp::create(
                                nb, args[1], Emitter{nb}.toF32(args[0]))};
                          })[0];
    auto resultType = cast<RankedTensorType>(op.getType());
    result = em.convertElements(result, resultType.getElementType());
    rewriter.replaceOp(op, em.castTo(result, resultType));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.quantize / moe.dequantize
//===----------------------------------------------------------------------===//

/// A tensor viewed as [d0/b0, b0, d1/b1, b1, ...] so that blocks are loops.
struct BlockedView {
  SmallVector<ReassociationIndices> reassociation;
  int64_t rank; // of the original tensor
  /// Map from the 2*rank loops to the per-block (scale) indices.
  AffineMap blockMap(Emitter &e) const {
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < rank; ++d)
      dims.push_back(2 * d);
    return e.map(2 * rank, dims);
  }
};

static std::pair<Value, BlockedView>
expandToBlocks(Emitter &e, Value tensor, BlockScaledEncodingAttr encoding) {
  auto type = cast<RankedTensorType>(tensor.getType());
  BlockedView view{{}, type.getRank()};
  SmallVector<int64_t> shape;
  SmallVector<OpFoldResult> outputShape;
  for (int64_t d = 0; d < view.rank; ++d) {
    int64_t block = encoding.getBlockExtent(d, view.rank);
    int64_t size = type.getDimSize(d);
    view.reassociation.push_back({2 * d, 2 * d + 1});
    if (ShapedType::isDynamic(size)) {
      shape.append({ShapedType::kDynamic, 1});
      outputShape.push_back(e.size(tensor, d));
    } else {
      shape.append({size / block, block});
      outputShape.push_back(e.b.getIndexAttr(size / block));
    }
    outputShape.push_back(e.b.getIndexAttr(block));
  }
  auto expandedType = RankedTensorType::get(shape, type.getElementType());
  Value expanded = tensor::ExpandShapeOp::create(
      e.b, expandedType, tensor, view.reassociation, outputShape);
  return {expanded, view};
}

static SmallVector<OpFoldResult> allSizes(Emitter &e, Value tensor) {
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0, r = cast<RankedTensorType>(tensor.getType()).getRank();
       d < r; ++d)
    sizes.push_back(e.size(tensor, d));
  return sizes;
}

/// Lowers `moe.quantize`: per-block amax, the scale, then the encoded values.
struct QuantizeLowering : OpConversionPattern<QuantizeOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(QuantizeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    BlockScaledEncodingAttr encoding = op.getEncoding();
    Type fp8Type = encoding.getElement();
    auto [blocked, view] = expandToBlocks(em, adaptor.getInput(), encoding);
    int64_t loops = 2 * view.rank;
    SmallVector<int64_t> blockDims;
    for (int64_t d = 0; d < view.rank; ++d)
      blockDims.push_back(2 * d + 1);

    // Largest magnitude per block; NaN and infinity propagate into it.
    SmallVector<OpFoldResult> scaleSizes;
    for (int64_t d = 0; d < view.rank; ++d)
      scaleSizes.push_back(em.size(blocked, 2 * d));
    Value amax = em.filled(scaleSizes, em.f32(), em.f32(0.0));
    amax = em.generic(
        loops, blockDims, blocked, em.identity(loops), amax, view.blockMap(em),
        [](ImplicitLocOpBuilder &nb, ValueRange args) {
          Value v = math::AbsFOp::create(nb, Emitter{nb}.toF32(args[0]));
          return SmallVector<Value>{arith::MaximumFOp::create(nb, args[1], v)};
        })[0];

    // The stored scale and the f32 divisor it stands for.
    Type scaleType = encoding.getScale();
    int64_t rank = view.rank;
    SmallVector<Value> scales = em.generic(
        rank, {}, amax, em.identity(rank),
        {em.empty(scaleSizes, scaleType), em.empty(scaleSizes, em.f32())},
        {em.identity(rank), em.identity(rank)},
        [&](ImplicitLocOpBuilder &nb, ValueRange args) {
          Value a = args[0];
          if (encoding.isMX()) {
            Value code = mxScaleCode(nb, a, fp8Type);
            return SmallVector<Value>{
                arith::BitcastOp::create(nb, scaleType, code),
                decodeE8M0(nb, code)};
          }
          Value s = blockScaleF32(nb, a, fp8Type);
          return SmallVector<Value>{s, s};
        });

    Value values = em.generic(
        loops, {}, {blocked, scales[1]},
        {em.identity(loops), view.blockMap(em)},
        em.empty(allSizes(em, blocked), fp8Type), em.identity(loops),
        [&](ImplicitLocOpBuilder &nb, ValueRange args) {
          Emitter e{nb};
          Value x = arith::DivFOp::create(nb, e.toF32(args[0]), args[1]);
          return SmallVector<Value>{
              arith::BitcastOp::create(nb, fp8Type, encodeFP8(nb, x, fp8Type))};
        })[0];
    values = tensor::CollapseShapeOp::create(b, values, view.reassociation);
    rewriter.replaceOp(op, {em.castTo(values, op.getValues().getType()),
                            em.castTo(scales[0], op.getScales().getType())});
    return success();
  }
};

/// Lowers `moe.dequantize` to one elementwise decode-and-scale.
struct DequantizeLowering : OpConversionPattern<DequantizeOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(DequantizeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    BlockScaledEncodingAttr encoding = op.getEncoding();
    Type fp8Type = encoding.getElement();
    auto [blocked, view] = expandToBlocks(em, adaptor.getValues(), encoding);
    int64_t loops = 2 * view.rank;
    auto resultType = cast<RankedTensorType>(op.getType());
    Type elementType = resultType.getElementType();
    Value result = em.generic(
        loops, {}, {blocked, adaptor.getScales()},
        {em.identity(loops), view.blockMap(em)},
        em.empty(allSizes(em, blocked), elementType), em.identity(loops),
        [&](ImplicitLocOpBuilder &nb, ValueRange args) {
          Emitter e{nb};
          Value code = arith::BitcastOp::create(nb, nb.getI8Type(), args[0]);
          Value scale = args[1];
          if (encoding.isMX())
            scale = decodeE8M0(
                nb, arith::BitcastOp::create(nb, nb.getI8Type(), scale));
          Value v =
              arith::MulFOp::create(nb, decodeFP8(nb, code, fp8Type), scale);
          return SmallVector<Value>{e.fromF32(v, elementType)};
        })[0];
    result = tensor::CollapseShapeOp::create(b, result, view.reassociation);
    rewriter.replaceOp(op, em.castTo(result, resultType));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

struct ConvertMoEToLinalgPass
    : moe::impl::ConvertMoEToLinalgBase<ConvertMoEToLinalgPass> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    ConversionTarget target(*context);
    target.addIllegalDialect<MoEDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(context);
    populateExpandFusedOpsPatterns(patterns);
    populateMoEToLinalgPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::moe::populateMoEToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<RouteLowering, PermuteLowering, GroupedMatmulLowering,
               SwiGLULowering, UnpermuteLowering, QuantizeLowering,
               DequantizeLowering>(patterns.getContext());
  populateSharedMLPLoweringPatterns(patterns);
  populateBackwardLoweringPatterns(patterns);
  populateParallelLoweringPatterns(patterns);
}
