//===- Parallel.cpp - the expert-parallel exchanges on one rank ----------===//
//
// `moe.dispatch` and `moe.undispatch` with `ranks 1`: the exchange is with
// the rank itself. With more ranks an op's result depends on the other
// ranks' operands, which one process does not have: the CPU runs such a
// program a stage at a time (--moe-split-exchanges) and the caller performs
// the exchanges between stages (test/lib/ep_case.py does).
//
//===----------------------------------------------------------------------===//

#include "Emitter.h"

#include "MoE/Dialect/MoEDialect.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::to_linalg;

namespace {

/// Refuses a collective over more than one rank, naming the way to run it.
static LogicalResult requireOneRank(Operation *op, int64_t ranks) {
  if (ranks == 1)
    return success();
  return op->emitOpError()
         << "exchanges rows among " << ranks
         << " ranks, which one CPU process cannot run: split the program at "
            "its exchanges (--moe-split-exchanges) and perform them between "
            "the stages";
}

/// Lowers a one-rank `moe.dispatch`: the rows of every expert's range, each
/// with its expert, and their count.
struct DispatchLowering : OpConversionPattern<DispatchOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(DispatchOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (failed(requireOneRank(op, op.getRanks())))
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    Value rows = adaptor.getRows();
    Type i32 = b.getI32Type();
    Value ids = em.filled({em.size(rows, 0), b.getIndexAttr(1)}, i32,
                          em.intConst(i32, -1));
    SmallVector<Value> loop = em.expertLoop(
        adaptor.getOffsets(), em.sizeValue(rows, 0), ids,
        [&](Emitter &e, Value expert, Value start, Value count,
            ValueRange acc) {
          Value mine = e.filled({count, e.b.getIndexAttr(1)}, i32,
                                e.fromIndex(expert, i32));
          auto one = e.b.getIndexAttr(1), zero = e.b.getIndexAttr(0);
          return SmallVector<Value>{tensor::InsertSliceOp::create(
              e.b, mine, acc[0], ArrayRef<OpFoldResult>{start, zero},
              ArrayRef<OpFoldResult>{count, one},
              ArrayRef<OpFoldResult>{one, one})};
        });
    Value end = loop[1];
    Value received = em.rowSlice(rows, b.getIndexAttr(0), end);
    Value localIds = em.rowSlice(loop[0], b.getIndexAttr(0), end);
    Type countType = getElementTypeOrSelf(op.getCounts().getType());
    Value counts = tensor::FromElementsOp::create(
        b, RankedTensorType::get({1}, countType),
        ValueRange{em.fromIndex(end, countType)});
    rewriter.replaceOp(op, {em.castTo(received, op.getReceived().getType()),
                            em.castTo(localIds, op.getLocalIds().getType()),
                            em.castTo(counts, op.getCounts().getType())});
    return success();
  }
};

/// Lowers a one-rank `moe.undispatch`: `offsets[E]` rows (clamped to the
/// rows), the returned rows first and zeros after them.
struct UndispatchLowering : OpConversionPattern<UndispatchOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(UndispatchOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (failed(requireOneRank(op, op.getRanks())))
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter em{b};
    Value rows = adaptor.getRows(), offsets = adaptor.getOffsets();
    int64_t numExperts =
        cast<RankedTensorType>(offsets.getType()).getDimSize(0) - 1;
    // The dispatch sent rows [0, clamp(offsets[E], 0, M)); M is not known
    // here, so the end is clamped to be at least 0 only.
    Value end = arith::MaxSIOp::create(
        b, em.toIndex(em.extract(offsets, {em.index(numExperts)})),
        em.index(0));
    Type elementType = getElementTypeOrSelf(op.getType());
    Value result = em.filled(
        {end, em.size(rows, 1)}, elementType,
        arith::ConstantOp::create(b, elementType, b.getZeroAttr(elementType)));
    Value copied = arith::MinSIOp::create(b, end, em.sizeValue(rows, 0));
    auto one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
    result = tensor::InsertSliceOp::create(
        b, em.rowSlice(rows, zero, copied), result,
        ArrayRef<OpFoldResult>{zero, zero},
        ArrayRef<OpFoldResult>{copied, em.size(rows, 1)},
        ArrayRef<OpFoldResult>{one, one});
    rewriter.replaceOp(op, em.castTo(result, op.getType()));
    return success();
  }
};

} // namespace

void mlir::moe::to_linalg::populateParallelLoweringPatterns(
    RewritePatternSet &patterns) {
  patterns.add<DispatchLowering, UndispatchLowering>(patterns.getContext());
}
