//===- EpilogueSwapAB.cpp - swap-AB's out^T through an f32 tile -----------===//
//
// The swap-AB form computes out^T (weight row i is output column col0 + i):
// accumulators -> an f32 tile in the stage buffers -> bf16 rows of the
// tile's expert. Threads t and t + 64 share column t % 64 and take
// alternate token rows, so each row's 64 columns are stored by 64
// consecutive threads. Split K: warpgroup w's partial sums are rows
// [64w, 64w + 64) of the f32 tile, and the values are their sum. A bf16
// activation's MXFP8 round trip (roundTripOut): a warp holds 32 columns of
// a row, one [1, 32] block.
//
//===----------------------------------------------------------------------===//

#include "../KernelUtils.h"
#include "../QuantizeKernel.h"
#include "Fragment.h"
#include "GemmKernel.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::sm90;

namespace {

class TransposedStoreEpilogue final : public GemmEpilogue {
public:
  using GemmEpilogue::GemmEpilogue;
  void emit(GemmMainloop &mainloop, const NextItem &next,
            Value rowsHere) override;
};

} // namespace

void TransposedStoreEpilogue::emit(GemmMainloop &mainloop, const NextItem &next,
                                   Value rowsHere) {
  ImplicitLocOpBuilder &b = k.b;
  const GroupedMatmulTile &t = k.t;
  IndexMath m{b};
  int64_t split = t.kSplit();
  int64_t accColumns = t.accumulatorColumns();
  int64_t tileCols = k.tileCols;
  Value sums = m.view(k.smem, m.c(0),
                      MemRefType::get({64 * split, accColumns}, b.getF32Type(),
                                      MemRefLayoutAttrInterface(), k.ty.smem));
  Value accumulator = mainloop.runPass(m.c(0)).front();
  gpu::BarrierOp::create(b);
  if (split == 1) {
    nvgpu::WarpgroupMmaStoreOp::create(b, accumulator, sums);
  } else {
    // Element by element: the upstream store takes a warp's rows from its
    // index in the block, not its warpgroup.
    FragmentRegs regs(b, accumulator, accColumns);
    Fragment frag = fragmentOf(b, k.tid);
    Value firstRow = m.add(m.mul(k.warpgroup, m.c(64)), frag.row);
    auto pairType = VectorType::get({2}, b.getF32Type());
    for (int64_t e = 0; e < accColumns / 2; e += 2) {
      Value pair = vector::FromElementsOp::create(
          b, pairType, ValueRange{regs.element(b, e), regs.element(b, e + 1)});
      vector::StoreOp::create(
          b, pair, sums,
          ValueRange{m.add(firstRow, m.c(Fragment::rowOffset(e))),
                     m.add(frag.col, m.c(Fragment::colOffset(e)))});
    }
  }
  gpu::BarrierOp::create(b);
  // Gated: weight rows [0, 32) are gate, [32, 64) their up partners, and
  // 32 consecutive threads store a row's 32 columns, 4 rows at a time.
  auto loadSum = [&](ImplicitLocOpBuilder &ib, Value row, Value col) {
    IndexMath i{ib};
    Value sum = i.load(sums, ValueRange{row, col});
    for (int64_t w = 1; w < split; ++w)
      sum = arith::AddFOp::create(
          ib, sum, i.load(sums, ValueRange{i.add(row, i.c(64 * w)), col}));
    return sum;
  };
  Value row0 = k.current.row0;
  Value lane = arith::RemUIOp::create(b, k.tid, m.c(tileCols));
  Value firstRow = arith::DivUIOp::create(b, k.tid, m.c(tileCols));
  Value col = m.add(k.current.col0, lane);
  ifThen(b, m.lt(col, k.numCols), [&](ImplicitLocOpBuilder &nb) {
    // This thread's column: its biases serve every row.
    std::pair<Value, Value> bias;
    if (k.biases)
      bias = loadBiasPair(nb, k, col);
    scf::ForOp::create(
        nb, firstRow, rowsHere, IndexMath{nb}.c(k.threads / tileCols),
        ValueRange{}, [&](OpBuilder &inner, Location l, Value r, ValueRange) {
          ImplicitLocOpBuilder ib(l, inner);
          IndexMath i{ib};
          Value v = loadSum(ib, lane, r);
          Value up =
              t.gated() ? loadSum(ib, i.add(lane, i.c(tileCols)), r) : Value();
          Value weight =
              k.rowScales ? i.load(k.rowScales, i.add(row0, r)) : Value();
          v = fuseEpilogueValue(ib, t, v, up, bias.first, bias.second, weight);
          Value narrowed = arith::TruncFOp::create(ib, ib.getBF16Type(), v);
          // A warp's lanes are one row's block: all in the loop or none.
          if (t.roundTripOut)
            narrowed = roundTripValueMX(ib, narrowed, 32, t.roundTripOut);
          memref::StoreOp::create(ib, narrowed, k.out,
                                  ValueRange{i.add(row0, r), col});
          scf::YieldOp::create(ib);
        });
  });
  // The next item's loads overwrite the shared memory just read.
  gpu::BarrierOp::create(b);
  k.issuePrologue(b, next.item, next.stepBase, next.active);
}

std::unique_ptr<GemmEpilogue> sm90::makeTransposedStoreEpilogue(GemmKernel &k) {
  return std::make_unique<TransposedStoreEpilogue>(k);
}
