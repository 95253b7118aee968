//===- Emitter.h - tensor building blocks of moe-to-linalg ------*- C++ -*-===//
//
// Shared by the --convert-moe-to-linalg patterns (MoEToLinalg.cpp,
// SharedMLP.cpp, Backward.cpp, Parallel.cpp): linalg.generic, sizes, f32
// conversions and the loops the lowerings have in common.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONVERSION_MOETOLINALG_EMITTER_H
#define MOE_CONVERSION_MOETOLINALG_EMITTER_H

#include "MoE/Conversion/Passes.h"
#include "MoE/Dialect/MoEDialect.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>

namespace mlir::moe::to_linalg {

using BodyFn =
    function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, ValueRange)>;

/// Tensor-level building blocks shared by the lowerings.
struct Emitter {
  ImplicitLocOpBuilder &b;

  Type f32() { return b.getF32Type(); }
  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value f32(double v) {
    return arith::ConstantFloatOp::create(b, b.getF32Type(),
                                          APFloat(static_cast<float>(v)));
  }
  Value intConst(Type type, int64_t v) {
    return arith::ConstantIntOp::create(b, type, v);
  }
  OpFoldResult size(Value tensor, int64_t dim) {
    return tensor::getMixedSize(b, b.getLoc(), tensor, dim);
  }
  Value sizeValue(Value tensor, int64_t dim) {
    return getValueOrCreateConstantIndexOp(b, b.getLoc(), size(tensor, dim));
  }
  Value toIndex(Value v) {
    return arith::IndexCastOp::create(b, b.getIndexType(), v);
  }
  Value fromIndex(Value v, Type type) {
    return arith::IndexCastOp::create(b, type, v);
  }
  Value empty(ArrayRef<OpFoldResult> sizes, Type elementType) {
    return tensor::EmptyOp::create(b, sizes, elementType);
  }
  Value filled(ArrayRef<OpFoldResult> sizes, Type elementType, Value scalar) {
    return linalg::FillOp::create(b, scalar, empty(sizes, elementType))
        .getResult(0);
  }
  Value extract(Value tensor, ValueRange indices) {
    return tensor::ExtractOp::create(b, tensor, indices);
  }
  Value insert(Value scalar, Value tensor, ValueRange indices) {
    return tensor::InsertOp::create(b, scalar, tensor, indices);
  }

  /// Scalar float -> f32 and back.
  Value toF32(Value v) {
    return v.getType() == f32() ? v : arith::ExtFOp::create(b, f32(), v);
  }
  Value fromF32(Value v, Type type) {
    return type == f32() ? v : arith::TruncFOp::create(b, type, v);
  }
  Value sigmoid(Value x) {
    Value e = math::ExpOp::create(b, arith::NegFOp::create(b, x));
    return arith::DivFOp::create(b, f32(1.0),
                                 arith::AddFOp::create(b, f32(1.0), e));
  }

  /// `linalg.generic` over `numDims` loops; dims in `reductions` reduce.
  SmallVector<Value> generic(int64_t numDims, ArrayRef<int64_t> reductions,
                             ValueRange ins, ArrayRef<AffineMap> inMaps,
                             ValueRange outs, ArrayRef<AffineMap> outMaps,
                             BodyFn body) {
    SmallVector<utils::IteratorType> iterators(numDims,
                                               utils::IteratorType::parallel);
    for (int64_t d : reductions)
      iterators[d] = utils::IteratorType::reduction;
    SmallVector<AffineMap> maps(inMaps);
    llvm::append_range(maps, outMaps);
    auto op = linalg::GenericOp::create(
        b, ValueRange(outs).getTypes(), ins, outs, maps, iterators,
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          ImplicitLocOpBuilder nb(loc, nested);
          linalg::YieldOp::create(nb, body(nb, args));
        });
    return SmallVector<Value>(op.getResults());
  }

  /// An f32 `[sizes]` contraction over loops (i, j, r), r reduced: the sum
  /// of products of `a` and `b`, indexed by `aDims` and `bDims`.
  Value contract(Value a, ArrayRef<int64_t> aDims, Value c,
                 ArrayRef<int64_t> cDims, ArrayRef<OpFoldResult> sizes) {
    return generic(
        3, {2}, {a, c}, {map(3, aDims), map(3, cDims)},
        filled(sizes, f32(), f32(0.0)), map(3, {0, 1}),
        [](ImplicitLocOpBuilder &nb, ValueRange args) {
          Emitter e{nb};
          Value p =
              arith::MulFOp::create(nb, e.toF32(args[0]), e.toF32(args[1]));
          return SmallVector<Value>{arith::AddFOp::create(nb, args[2], p)};
        })[0];
  }

  /// Affine map over `numDims` loops selecting `dims`.
  AffineMap map(int64_t numDims, ArrayRef<int64_t> dims) {
    SmallVector<AffineExpr> exprs;
    for (int64_t d : dims)
      exprs.push_back(b.getAffineDimExpr(d));
    return AffineMap::get(numDims, 0, exprs, b.getContext());
  }
  AffineMap identity(int64_t numDims) {
    return AffineMap::getMultiDimIdentityMap(numDims, b.getContext());
  }

  /// Elementwise conversion of a float tensor to `elementType`.
  Value convertElements(Value tensor, Type elementType) {
    auto type = cast<RankedTensorType>(tensor.getType());
    if (type.getElementType() == elementType)
      return tensor;
    int64_t rank = type.getRank();
    SmallVector<OpFoldResult> sizes;
    for (int64_t d = 0; d < rank; ++d)
      sizes.push_back(size(tensor, d));
    return generic(
        rank, {}, tensor, identity(rank), empty(sizes, elementType),
        identity(rank), [&](ImplicitLocOpBuilder &nb, ValueRange args) {
          Emitter e{nb};
          return SmallVector<Value>{e.fromF32(e.toF32(args[0]), elementType)};
        })[0];
  }

  /// Casts `tensor` to the (possibly more static) type the op declared.
  Value castTo(Value tensor, Type type) {
    return tensor.getType() == type ? tensor
                                    : tensor::CastOp::create(b, type, tensor);
  }

  /// Reduces a [R, C] f32 tensor along C into [R].
  Value reduceRows(
      Value x, Value init,
      function_ref<Value(ImplicitLocOpBuilder &, Value, Value)> combine) {
    Value acc = filled({size(x, 0)}, f32(), init);
    return generic(2, {1}, x, map(2, {0, 1}), acc, map(2, {0}),
                   [&](ImplicitLocOpBuilder &nb, ValueRange args) {
                     return SmallVector<Value>{combine(nb, args[1], args[0])};
                   })[0];
  }

  /// Row sums of a [R, C] f32 tensor.
  Value sumRows(Value x) {
    return reduceRows(x, f32(0.0),
                      [](ImplicitLocOpBuilder &nb, Value acc, Value v) {
                        return arith::AddFOp::create(nb, acc, v).getResult();
                      });
  }

  /// One f32 logit per token: tokens [T, H] . gate[0, :] (a shared
  /// expert's gate), products and sum in f32.
  Value gateLogits(Value tokens, Value gate) {
    AffineMap gateRow = AffineMap::get(
        2, 0, {b.getAffineConstantExpr(0), b.getAffineDimExpr(1)},
        b.getContext());
    return generic(
        2, {1}, {tokens, gate}, {map(2, {0, 1}), gateRow},
        filled({size(tokens, 0)}, f32(), f32(0.0)), map(2, {0}),
        [](ImplicitLocOpBuilder &nb, ValueRange args) {
          Emitter e{nb};
          Value p =
              arith::MulFOp::create(nb, e.toF32(args[0]), e.toF32(args[1]));
          return SmallVector<Value>{arith::AddFOp::create(nb, args[2], p)};
        })[0];
  }

  /// Row-wise softmax of a [R, C] f32 tensor.
  Value softmaxRows(Value x) {
    Value rowMax = reduceRows(
        x, f32(-INFINITY), [](ImplicitLocOpBuilder &nb, Value acc, Value v) {
          return arith::MaximumFOp::create(nb, acc, v).getResult();
        });
    Value exps =
        generic(2, {}, {x, rowMax}, {map(2, {0, 1}), map(2, {0})},
                empty({size(x, 0), size(x, 1)}, f32()), map(2, {0, 1}),
                [](ImplicitLocOpBuilder &nb, ValueRange args) {
                  Value d = arith::SubFOp::create(nb, args[0], args[1]);
                  return SmallVector<Value>{math::ExpOp::create(nb, d)};
                })[0];
    Value sums = sumRows(exps);
    return divideRows(exps, sums, 0.0);
  }

  /// x[r, c] / (denominator[r] + epsilon).
  Value divideRows(Value x, Value denominator, double epsilon) {
    return generic(2, {}, {x, denominator}, {map(2, {0, 1}), map(2, {0})},
                   empty({size(x, 0), size(x, 1)}, f32()), map(2, {0, 1}),
                   [&](ImplicitLocOpBuilder &nb, ValueRange args) {
                     Emitter e{nb};
                     Value d = args[1];
                     if (epsilon != 0.0)
                       d = arith::AddFOp::create(nb, d, e.f32(epsilon));
                     return SmallVector<Value>{
                         arith::DivFOp::create(nb, args[0], d)};
                   })[0];
  }

  /// The row range [start, start + count) of expert `e`: its offsets
  /// clamped to [previousEnd, numRows], so ranges never overlap or leave
  /// the rows whatever the offsets hold.
  std::pair<Value, Value> expertRange(Value offsets, Value e, Value previousEnd,
                                      Value numRows) {
    auto clamp = [&](Value v, Value lo) {
      return arith::MinSIOp::create(b, arith::MaxSIOp::create(b, v, lo),
                                    numRows)
          .getResult();
    };
    Value start = clamp(toIndex(extract(offsets, e)), previousEnd);
    Value next = arith::AddIOp::create(b, e, index(1));
    Value end = clamp(toIndex(extract(offsets, next)), start);
    return {start, arith::SubIOp::create(b, end, start)};
  }

  /// `[count, C]` slice of a 2-D tensor at rows [start, start + count).
  Value rowSlice(Value tensor, OpFoldResult start, OpFoldResult count) {
    auto one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
    return tensor::ExtractSliceOp::create(
        b, tensor, ArrayRef<OpFoldResult>{start, zero},
        ArrayRef<OpFoldResult>{count, size(tensor, 1)},
        ArrayRef<OpFoldResult>{one, one});
  }

  /// Where part `part` (0: gate, 1: up) of a gated activation's `[M, 2I]`
  /// columns lies, for I = `width`: (first column, stride) of its halves,
  /// or `interleaved`, of its even and odd columns. Their gradients go back
  /// to the same places.
  std::pair<OpFoldResult, OpFoldResult>
  gatedPart(OpFoldResult width, bool interleaved, int64_t part) {
    if (interleaved)
      return {b.getIndexAttr(part), b.getIndexAttr(2)};
    return {part ? width : OpFoldResult(b.getIndexAttr(0)), b.getIndexAttr(1)};
  }

  /// Part `part` of `tensor`'s gated columns (gatedPart): `[M, I]`.
  Value gatedSlice(Value tensor, OpFoldResult width, bool interleaved,
                   int64_t part) {
    auto [col, stride] = gatedPart(width, interleaved, part);
    return tensor::ExtractSliceOp::create(
        b, tensor, ArrayRef<OpFoldResult>{b.getIndexAttr(0), col},
        ArrayRef<OpFoldResult>{size(tensor, 0), width},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), stride});
  }

  /// Expert `expert`'s `[N, K]` (or `[N]`) slice of a `[E, N, K]` (`[E, N]`)
  /// tensor, rank-reduced.
  Value expertSlice(Value tensor, Value expert) {
    auto type = cast<RankedTensorType>(tensor.getType());
    SmallVector<OpFoldResult> offsets{expert}, sizes{b.getIndexAttr(1)},
        strides(type.getRank(), b.getIndexAttr(1));
    for (int64_t d = 1; d < type.getRank(); ++d) {
      offsets.push_back(b.getIndexAttr(0));
      sizes.push_back(size(tensor, d));
    }
    auto sliceType = RankedTensorType::get(type.getShape().drop_front(),
                                           type.getElementType());
    return tensor::ExtractSliceOp::create(b, sliceType, tensor, offsets, sizes,
                                          strides);
  }

  using ExpertBody = function_ref<SmallVector<Value>(
      Emitter &, Value expert, Value start, Value count, ValueRange acc)>;
  /// Runs `body` for each expert's clamped row range (expertRange) with
  /// accumulators `init`; returns the final accumulators, then the end of
  /// the last range.
  SmallVector<Value> expertLoop(Value offsets, Value numRows, ValueRange init,
                                ExpertBody body) {
    int64_t numExperts =
        cast<RankedTensorType>(offsets.getType()).getDimSize(0) - 1;
    Value lower = index(0), upper = index(numExperts), step = index(1);
    SmallVector<Value> iters(init);
    iters.push_back(index(0));
    auto loop = scf::ForOp::create(
        b, lower, upper, step, iters,
        [&](OpBuilder &nested, Location loc, Value expert, ValueRange iter) {
          ImplicitLocOpBuilder nb(loc, nested);
          Emitter e{nb};
          auto [start, count] =
              e.expertRange(offsets, expert, iter.back(), numRows);
          SmallVector<Value> next =
              body(e, expert, start, count, iter.drop_back());
          next.push_back(arith::AddIOp::create(nb, start, count));
          scf::YieldOp::create(nb, next);
        });
    return SmallVector<Value>(loop.getResults());
  }
  /// expertLoop's accumulators, without the end.
  SmallVector<Value> forEachExpert(Value offsets, Value numRows,
                                   ValueRange init, ExpertBody body) {
    SmallVector<Value> results = expertLoop(offsets, numRows, init, body);
    results.pop_back();
    return results;
  }

  /// `source[row, col]` as f32, or 0 where `row` is outside [0, numRows).
  Value gatherOrZero(Value source, Value row, Value col, Value numRows) {
    Value inRange = arith::AndIOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::sge, row, index(0)),
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, row, numRows));
    auto ifOp = scf::IfOp::create(
        b, inRange,
        [&](OpBuilder &nested, Location loc) {
          ImplicitLocOpBuilder nb(loc, nested);
          Emitter e{nb};
          scf::YieldOp::create(nb, e.toF32(e.extract(source, {row, col})));
        },
        [&](OpBuilder &nested, Location loc) {
          ImplicitLocOpBuilder nb(loc, nested);
          scf::YieldOp::create(nb, Emitter{nb}.f32(0.0));
        });
    return ifOp.getResult(0);
  }

  /// One step of iterative top-k over [R, C] scores: the best column per row
  /// among those `allowed` (may be null) and not yet `taken`, lowest column
  /// on ties; -1 where none is left. Returns [R] i32.
  Value argmaxStep(Value scores, Value allowed, Value taken) {
    OpFoldResult rows = size(scores, 0);
    Value best = filled({rows}, f32(), f32(-INFINITY));
    Value bestIdx =
        filled({rows}, b.getI32Type(), intConst(b.getI32Type(), -1));
    SmallVector<Value> ins{scores, taken};
    SmallVector<AffineMap> inMaps{map(2, {0, 1}), map(2, {0, 1})};
    if (allowed) {
      ins.push_back(allowed);
      inMaps.push_back(map(2, {0, 1}));
    }
    return generic(
        2, {1}, ins, inMaps, {best, bestIdx}, {map(2, {0}), map(2, {0})},
        [&](ImplicitLocOpBuilder &nb, ValueRange args) {
          Emitter e{nb};
          Value v = args[0], isTaken = args[1];
          Value cur = args[ins.size()], curIdx = args[ins.size() + 1];
          Value candidate =
              arith::XOrIOp::create(nb, isTaken, e.intConst(nb.getI1Type(), 1));
          if (allowed)
            candidate = arith::AndIOp::create(nb, candidate, args[2]);
          Value none =
              arith::CmpIOp::create(nb, arith::CmpIPredicate::eq, curIdx,
                                    e.intConst(nb.getI32Type(), -1));
          Value better =
              arith::CmpFOp::create(nb, arith::CmpFPredicate::OGT, v, cur);
          Value take = arith::AndIOp::create(
              nb, candidate, arith::OrIOp::create(nb, none, better));
          Value col =
              e.fromIndex(linalg::IndexOp::create(nb, 1), nb.getI32Type());
          return SmallVector<Value>{
              arith::SelectOp::create(nb, take, v, cur),
              arith::SelectOp::create(nb, take, col, curIdx)};
        })[1];
  }

  /// taken[r, c] |= (c == chosen[r]).
  Value markTaken(Value taken, Value chosen) {
    return generic(
        2, {}, chosen, map(2, {0}), taken, map(2, {0, 1}),
        [](ImplicitLocOpBuilder &nb, ValueRange args) {
          Emitter e{nb};
          Value col =
              e.fromIndex(linalg::IndexOp::create(nb, 1), nb.getI32Type());
          Value hit =
              arith::CmpIOp::create(nb, arith::CmpIPredicate::eq, col, args[0]);
          return SmallVector<Value>{arith::OrIOp::create(nb, args[1], hit)};
        })[0];
  }

  /// Iterative top-`k` over [R, C] scores: returns the [R] i32 column picked
  /// at each step through `onPick(step, picked)` and the final taken mask.
  Value topK(Value scores, Value allowed, int64_t k,
             function_ref<void(int64_t, Value)> onPick) {
    Value taken = filled({size(scores, 0), size(scores, 1)}, b.getI1Type(),
                         intConst(b.getI1Type(), 0));
    for (int64_t step = 0; step < k; ++step) {
      Value picked = argmaxStep(scores, allowed, taken);
      taken = markTaken(taken, picked);
      if (onPick)
        onPick(step, picked);
    }
    return taken;
  }
};

/// d gate and d up of a gated activation from its f32 inputs and the f32
/// gradient of its output (Backward.cpp), as moe.swiglu_grad defines them.
std::pair<Value, Value> gatedActivationGrad(Emitter &e,
                                            GatedActivation activation,
                                            Value gate, Value up, Value grad,
                                            float alpha, float limit);

/// Adds the lowerings of `moe.shared_mlp` and its adjoint (SharedMLP.cpp).
void populateSharedMLPLoweringPatterns(RewritePatternSet &patterns);

/// Adds the lowerings of the backward ops (Backward.cpp).
void populateBackwardLoweringPatterns(RewritePatternSet &patterns);

/// Adds the one-rank lowerings of the expert-parallel exchanges
/// (Parallel.cpp).
void populateParallelLoweringPatterns(RewritePatternSet &patterns);

} // namespace mlir::moe::to_linalg

#endif // MOE_CONVERSION_MOETOLINALG_EMITTER_H
