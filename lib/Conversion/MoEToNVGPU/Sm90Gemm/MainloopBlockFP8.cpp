//===- MainloopBlockFP8.cpp - the DeepSeek-style block-FP8 mainloop -------===//
//
// e4m3 rows with one f32 scale per row and 128 K, e4m3 weights with one per
// 128 x 128 block: each K step's wgmma accumulate into registers of their
// own, then are added to the f32 accumulator times both scales (the
// promotion), the scale loads overlapping the step's wgmma.
//
//===----------------------------------------------------------------------===//

#include "../KernelUtils.h"
#include "Fragment.h"
#include "Mainloop.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::sm90;

namespace {

class BlockFP8Mainloop final : public PipelinedMainloop {
public:
  using PipelinedMainloop::PipelinedMainloop;

private:
  Value multiply(ImplicitLocOpBuilder &nb, const KStep &step,
                 Value acc) override {
    Value part = multiplyInto(
        nb, step,
        nvgpu::WarpgroupMmaInitAccumulatorOp::create(nb, k.ty.accumulator));
    return promote(nb, acc, part, step.kStep, step.colBase);
  }

  /// Adds a K step's products `part` to `acc` times the scales of their
  /// rows and weights (see Fragment for which values a thread holds).
  Value promote(ImplicitLocOpBuilder &nb, Value acc, Value part, Value kStep,
                Value colBase) const;
};

} // namespace

Value BlockFP8Mainloop::promote(ImplicitLocOpBuilder &nb, Value acc, Value part,
                                Value kStep, Value colBase) const {
  const GroupedMatmulTile &t = k.t;
  IndexMath n{nb};
  Fragment frag = fragmentOf(nb, k.tid);
  Value lastRow = n.sub(k.numRows, n.c(1));
  Value lastBlock = n.sub(
      memref::DimOp::create(nb, k.weightsScales, n.c(1)).getResult(), n.c(1));
  // Rows and blocks past the end are clamped: their values are computed
  // but never stored.
  auto rowsScale = [&](Value row) {
    row = arith::MinSIOp::create(nb, row, lastRow);
    return n.load(k.rowsScales, ValueRange{row, kStep});
  };
  // The weights' scale of weight row `local` of the tile; gated, its
  // second half are the up rows N / 2 = numCols further.
  auto weightsScale = [&](Value local) {
    Value row = n.add(colBase, local);
    if (t.gated()) {
      Value half = n.c(t.tileN / 2);
      Value up =
          arith::CmpIOp::create(nb, arith::CmpIPredicate::sge, local, half);
      row = arith::SelectOp::create(nb, up, n.add(n.sub(row, half), k.numCols),
                                    row);
    }
    Value block = arith::MinSIOp::create(
        nb, arith::DivUIOp::create(nb, row, n.c(128)), lastBlock);
    return n.load(k.weightsScales, ValueRange{k.current.expert, block, kStep});
  };
  int64_t accColumns = t.accumulatorColumns();
  SmallVector<Value> scales(accColumns / 2);
  if (!t.swapAB) {
    // Tokens are rows. A chunk of weight rows lies in one block: 64, or
    // 32 where a tile's output columns are not a multiple of 64 (192
    // columns gated: item starts and the up half at multiples of 96).
    Value rowScale[2];
    for (int64_t i = 0; i < 2; ++i)
      rowScale[i] =
          rowsScale(n.add(n.add(k.current.row0, n.mul(k.warpgroup, n.c(64))),
                          n.add(frag.row, n.c(Fragment::rowOffset(2 * i)))));
    int64_t chunk = t.outputColumns() % 64 ? 32 : 64;
    SmallVector<Value> chunkScale;
    for (int64_t c = 0; c < accColumns; c += chunk)
      chunkScale.push_back(weightsScale(n.c(c)));
    for (int64_t e = 0; e < accColumns / 2; ++e)
      scales[e] = arith::MulFOp::create(
          nb, rowScale[Fragment::rowOffset(e) / 8],
          chunkScale[(Fragment::colOffset(e) / 8) / (chunk / 8)]);
  } else {
    // Weight rows are rows: a warp's 16 lie in one block; tokens columns.
    Value weightScale = weightsScale(n.sub(frag.row, frag.quad));
    for (int64_t e = 0; e < accColumns / 2; ++e) {
      Value token =
          n.add(k.current.row0, n.add(frag.col, n.c(Fragment::colOffset(e))));
      scales[e] = arith::MulFOp::create(nb, weightScale, rowsScale(token));
    }
  }
  NVVM::WgmmaWaitGroupSyncOp::create(nb, nb.getI64IntegerAttr(0));
  return addScaled(nb, acc, part, scales.size(), k.ty.products,
                   k.ty.accumulator, [&](int64_t e) { return scales[e]; });
}

std::unique_ptr<GemmMainloop> sm90::makeBlockFP8Mainloop(GemmKernel &k) {
  return std::make_unique<BlockFP8Mainloop>(k);
}
