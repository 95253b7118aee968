//===- EpilogueStore.cpp - bf16 rows through a staging tile ---------------===//
//
// The normal form's epilogue: accumulator registers (see Fragment) -> a
// 64 x 64 bf16 staging tile per warpgroup -> 16-byte stores of the rows of
// the tile's expert. Its 16-byte chunks are XOR-swizzled by row so that
// neither side conflicts on banks. The next item's first loads overlap it.
//
//===----------------------------------------------------------------------===//

#include "../KernelUtils.h"
#include "Fragment.h"
#include "GemmKernel.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::sm90;

namespace {

/// Elements of one 16-byte store.
constexpr int64_t kVector = 8;

class StagedStoreEpilogue final : public GemmEpilogue {
public:
  using GemmEpilogue::GemmEpilogue;
  void emit(GemmMainloop &mainloop, const NextItem &next,
            Value rowsHere) override;

private:
  /// Stores 8 bf16 values at out[row, col ..): one 16-byte store when rows
  /// are 16-byte aligned (N % 8 == 0; the runtime aligns `out`) and all 8
  /// columns exist, else column by column below N. Rows are `index`
  /// (64-bit): no 2^31 overflow for big M * N.
  void storeVector(ImplicitLocOpBuilder &nb, Value values, Value row,
                   Value col) const;

  Value rowsAligned;
};

} // namespace

void StagedStoreEpilogue::storeVector(ImplicitLocOpBuilder &nb, Value values,
                                      Value row, Value col) const {
  IndexMath n{nb};
  Value whole = arith::AndIOp::create(
      nb, rowsAligned, n.le(n.add(col, n.c(kVector)), k.numCols));
  scf::IfOp::create(
      nb, whole,
      [&](OpBuilder &thenBuilder, Location tl) {
        ImplicitLocOpBuilder tb(tl, thenBuilder);
        vector::StoreOp::create(tb, values, k.out, ValueRange{row, col},
                                /*nontemporal=*/false, llvm::Align(16));
        scf::YieldOp::create(tb);
      },
      [&](OpBuilder &elseBuilder, Location el) {
        ImplicitLocOpBuilder eb(el, elseBuilder);
        for (int64_t j = 0; j < kVector; ++j) {
          IndexMath e{eb};
          Value c = e.add(col, e.c(j));
          ifThen(eb, e.lt(c, k.numCols), [&](ImplicitLocOpBuilder &sb) {
            Value v = vector::ExtractOp::create(sb, values, j);
            memref::StoreOp::create(sb, v, k.out, ValueRange{row, c});
          });
        }
        scf::YieldOp::create(eb);
      });
}

void StagedStoreEpilogue::emit(GemmMainloop &mainloop, const NextItem &next,
                               Value rowsHere) {
  ImplicitLocOpBuilder &b = k.b;
  const GroupedMatmulTile &t = k.t;
  IndexMath m{b};
  rowsAligned = arith::CmpIOp::create(
      b, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b, k.numCols, m.c(kVector)), m.c(0));
  Value accumulator = mainloop.runPass(m.c(0));
  // The stage buffers are free: the next item's first loads overlap this
  // epilogue (warp-specialized, the producer is at it already).
  if (!k.specialized) {
    k.syncStages(b);
    k.issuePrologue(b, next.item, next.stepBase, next.active);
  }
  int64_t accColumns = t.accumulatorColumns();
  Type bf16 = b.getBF16Type();
  FragmentRegs regs(b, accumulator, accColumns);
  Fragment frag = fragmentOf(b, k.tid);
  Value groupTid = arith::RemUIOp::create(b, k.tid, m.c(128));
  Value staging = m.view(k.smem,
                         m.add(m.c(t.stages * k.stageBytes),
                               m.mul(k.warpgroup, m.c(kStagingBytes))),
                         k.ty.stagingTile);
  // Readers: 8 threads per 128-byte row, 16 rows per pass.
  Value readRow = arith::DivUIOp::create(b, groupTid, m.c(8));
  Value readChunk = arith::RemUIOp::create(b, groupTid, m.c(8));
  Value readPhysical = arith::XOrIOp::create(
      b, readChunk, arith::RemUIOp::create(b, readRow, m.c(8)));
  Value groupRow0 = m.mul(k.warpgroup, m.c(64));
  Value row0 = k.current.row0, col0 = k.current.col0;
  // The routing weights of this thread's two fragment rows (clamped: rows
  // past the expert are computed but never stored).
  Value weightOfRow[2] = {};
  if (k.rowScales)
    for (int64_t i = 0; i < 2; ++i) {
      Value row = m.add(m.add(row0, groupRow0),
                        m.add(frag.row, m.c(Fragment::rowOffset(2 * i))));
      row = arith::MinSIOp::create(b, row, m.sub(k.numRows, m.c(1)));
      weightOfRow[i] = m.load(k.rowScales, row);
    }
  auto pairType = VectorType::get({2}, bf16);
  auto chunkType = VectorType::get({kVector}, bf16);
  int64_t upDistance = Fragment::upDistance(accColumns);
  // Chunks of kStagingColumns; the last may be narrower (96 columns of a
  // gated 192-column tile: 64 + 32).
  int64_t tileCols = k.tileCols;
  for (int64_t c = 0; c * kStagingColumns < tileCols; ++c) {
    int64_t width = std::min(kStagingColumns, tileCols - c * kStagingColumns);
    for (int64_t j = 0; j < width / 8; ++j) {
      // Row % 8 is quad for both i: one swizzled chunk per j.
      Value chunk = arith::XOrIOp::create(b, frag.quad, m.c(j));
      Value col = m.add(m.mul(chunk, m.c(8)), frag.col);
      int64_t group = c * (kStagingColumns / 8) + j;
      // Both rows i share the biases of output columns
      // col0 + 8 * group + fragCol + {0, 1} (and their up partners).
      std::pair<Value, Value> bias[2];
      for (int64_t p = 0; p < 2 && k.biases; ++p)
        bias[p] = loadBiasPair(
            b, k,
            m.add(col0,
                  m.add(m.c(Fragment::colOffset(4 * group + p)), frag.col)));
      for (int64_t i = 0; i < 2; ++i) {
        auto narrow = [&](int64_t p) -> Value {
          int64_t e = Fragment::element(i, group, p);
          Value up = t.gated() ? regs.element(b, e + upDistance) : Value();
          Value v =
              fuseEpilogueValue(b, t, regs.element(b, e), up, bias[p].first,
                                bias[p].second, weightOfRow[i]);
          return arith::TruncFOp::create(b, bf16, v);
        };
        Value pair = vector::FromElementsOp::create(
            b, pairType, ValueRange{narrow(0), narrow(1)});
        vector::StoreOp::create(
            b, pair, staging,
            ValueRange{m.add(frag.row, m.c(Fragment::rowOffset(2 * i))), col},
            /*nontemporal=*/false, llvm::Align(4));
      }
    }
    k.syncWarpgroup(b);
    for (int64_t pass = 0; pass < 64 / 16; ++pass) {
      Value r = m.add(readRow, m.c(16 * pass));
      Value values = vector::LoadOp::create(
          b, chunkType, staging, ValueRange{r, m.mul(readPhysical, m.c(8))},
          /*nontemporal=*/false, llvm::Align(16));
      Value tileRow = m.add(groupRow0, r);
      Value stores = m.lt(tileRow, rowsHere);
      if (width < kStagingColumns)
        stores =
            arith::AndIOp::create(b, stores, m.lt(readChunk, m.c(width / 8)));
      ifThen(b, stores, [&](ImplicitLocOpBuilder &nb) {
        IndexMath n{nb};
        storeVector(nb, values, n.add(row0, tileRow),
                    n.add(col0, n.add(n.c(c * kStagingColumns),
                                      n.mul(readChunk, n.c(8)))));
      });
    }
    // The next chunk overwrites the staging tile just read.
    k.syncWarpgroup(b);
  }
}

std::unique_ptr<GemmEpilogue> sm90::makeStagedStoreEpilogue(GemmKernel &k) {
  return std::make_unique<StagedStoreEpilogue>(k);
}
