//===- EpilogueStore.cpp - bf16 rows through a staging tile ---------------===//
//
// The normal form's epilogue: accumulator registers (see Fragment) -> a
// 64 x 64 bf16 staging tile per warpgroup -> 16-byte stores of the rows of
// the tile's expert. Its 16-byte chunks are XOR-swizzled by row so that
// neither side conflicts on banks. The next item's first loads overlap it.
// An activation's gradient (moe.grouped_dgrad's act_grad, 128-column tiles)
// goes 32 columns at a time: the chunk's gate and up inputs (columns c and
// N + c of act_input), loaded into registers while the mainloop runs, come
// into the staging tile as the stores read it, each thread turns its
// fragment's inputs into their gradients in place, and the rows go to the
// same columns of out. A bf16 activation's MXFP8 round trip
// (GroupedMatmulSemantics::roundTripOut) is made by the readers: each holds
// 8 columns of a row, four consecutive ones a [1, 32] block. With
// `tmaStore` a staged 64-column chunk whose 64 rows are all the expert's
// goes out as one TMA store (the staging tile's swizzle is the tensor map's
// 128-byte one); the tile is rewritten only after the TMA has read it.
//
//===----------------------------------------------------------------------===//

#include "../KernelUtils.h"
#include "../QuantizeKernel.h"
#include "Fragment.h"
#include "GemmKernel.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::sm90;

namespace {

/// Elements of one 16-byte store.
constexpr int64_t kVector = 8;
/// Readers of one [1, 32] MXFP8 block (8 columns each).
constexpr int64_t kMxLanes = 32 / kVector;

class StagedStoreEpilogue final : public GemmEpilogue {
public:
  using GemmEpilogue::GemmEpilogue;
  void emit(GemmMainloop &mainloop, const NextItem &next,
            Value rowsHere) override;
  void finish() override;

private:
  /// Stores the accumulator of the tile's 64 rows from (k.rowGroup + g) *
  /// 64; `inputs` are an activation's gradient inputs (loadInputChunk).
  void storeRowGroup(Value accumulator, int64_t g, Value rowsHere,
                     ArrayRef<SmallVector<Value, 4>> inputs);
  /// Stores 8 bf16 values at out[row, base + col ..): one 16-byte store
  /// when rows are 16-byte aligned (N % 8 == 0; the runtime aligns `out`)
  /// and all 8 columns exist, else column by column below N. Rows are
  /// `index` (64-bit): no 2^31 overflow for big M * N. `base` (the up half
  /// of an activation's gradient) may be null: 0.
  void storeVector(ImplicitLocOpBuilder &nb, Value values, Value row, Value col,
                   Value base) const;
  /// This thread's share of chunk `c` of the activation's input (32 gate
  /// and 32 up columns of the warpgroup's 64 rows): 8 values of its row
  /// readRow + 16 pass and logical 16-byte chunk readChunk (0-3 gate, 4-7
  /// up), for the 4 passes. Rows past the expert and columns past N are
  /// clamped: computed, never stored.
  SmallVector<Value, 4> loadInputChunk(ImplicitLocOpBuilder &nb, int64_t c,
                                       Value readRow, Value readChunk) const;
  /// 8 values of act_input[row, base + col ..]: one 16-byte load where the
  /// rows are aligned and all 8 columns exist, else column by column, each
  /// clamped below N.
  Value loadVector(ImplicitLocOpBuilder &nb, Value row, Value col,
                   Value base) const;

  /// TMA stores: the warpgroup's elected thread waits until the TMA has
  /// read its staging tile, then the warpgroup syncs.
  void waitStagingFree(ImplicitLocOpBuilder &nb) const;
  /// Whether this thread is its warpgroup's first (the TMA stores' issuer).
  Value warpgroupLeader(ImplicitLocOpBuilder &nb) const;

  Value rowsAligned;
};

} // namespace

void StagedStoreEpilogue::storeVector(ImplicitLocOpBuilder &nb, Value values,
                                      Value row, Value col, Value base) const {
  IndexMath n{nb};
  Value whole = arith::AndIOp::create(
      nb, rowsAligned, n.le(n.add(col, n.c(kVector)), k.numCols));
  auto at = [&](IndexMath &e, Value c) { return base ? e.add(base, c) : c; };
  scf::IfOp::create(
      nb, whole,
      [&](OpBuilder &thenBuilder, Location tl) {
        ImplicitLocOpBuilder tb(tl, thenBuilder);
        IndexMath e{tb};
        vector::StoreOp::create(tb, values, k.out, ValueRange{row, at(e, col)},
                                /*nontemporal=*/false, llvm::Align(16));
        scf::YieldOp::create(tb);
      },
      [&](OpBuilder &elseBuilder, Location el) {
        ImplicitLocOpBuilder eb(el, elseBuilder);
        for (int64_t j = 0; j < kVector; ++j) {
          IndexMath e{eb};
          Value c = e.add(col, e.c(j));
          ifThen(eb, e.lt(c, k.numCols), [&](ImplicitLocOpBuilder &sb) {
            IndexMath s{sb};
            Value v = vector::ExtractOp::create(sb, values, j);
            memref::StoreOp::create(sb, v, k.out, ValueRange{row, at(s, c)});
          });
        }
        scf::YieldOp::create(eb);
      });
}

Value StagedStoreEpilogue::loadVector(ImplicitLocOpBuilder &nb, Value row,
                                      Value col, Value base) const {
  IndexMath n{nb};
  auto vectorType = VectorType::get({kVector}, nb.getBF16Type());
  Value whole = arith::AndIOp::create(
      nb, rowsAligned, n.le(n.add(col, n.c(kVector)), k.numCols));
  auto ifOp = scf::IfOp::create(
      nb, whole,
      [&](OpBuilder &thenBuilder, Location tl) {
        ImplicitLocOpBuilder tb(tl, thenBuilder);
        IndexMath e{tb};
        Value v = vector::LoadOp::create(
            tb, vectorType, k.actInput, ValueRange{row, e.add(base, col)},
            /*nontemporal=*/false, llvm::Align(16));
        scf::YieldOp::create(tb, v);
      },
      [&](OpBuilder &elseBuilder, Location el) {
        ImplicitLocOpBuilder eb(el, elseBuilder);
        IndexMath e{eb};
        Value last = e.sub(k.numCols, e.c(1));
        SmallVector<Value> values;
        for (int64_t j = 0; j < kVector; ++j) {
          Value c = arith::MinSIOp::create(eb, e.add(col, e.c(j)), last);
          values.push_back(e.load(k.actInput, ValueRange{row, e.add(base, c)}));
        }
        scf::YieldOp::create(
            eb,
            vector::FromElementsOp::create(eb, vectorType, values).getResult());
      });
  return ifOp.getResult(0);
}

SmallVector<Value, 4>
StagedStoreEpilogue::loadInputChunk(ImplicitLocOpBuilder &nb, int64_t c,
                                    Value readRow, Value readChunk) const {
  IndexMath n{nb};
  constexpr int64_t chunkCols = kStagingColumns / 2;
  Value groupRow0 = n.add(k.current.row0, n.mul(k.rowGroup, n.c(64)));
  Value half = arith::DivUIOp::create(nb, readChunk, n.c(4));
  Value col = n.add(
      k.current.col0,
      n.add(n.c(c * chunkCols),
            n.mul(arith::RemUIOp::create(nb, readChunk, n.c(4)), n.c(8))));
  Value base = n.mul(half, k.numCols);
  Value lastRow = n.sub(k.numRows, n.c(1));
  SmallVector<Value, 4> vectors;
  for (int64_t pass = 0; pass < 64 / 16; ++pass) {
    Value row = arith::MinSIOp::create(
        nb, n.add(groupRow0, n.add(readRow, n.c(16 * pass))), lastRow);
    vectors.push_back(loadVector(nb, row, col, base));
  }
  return vectors;
}

void StagedStoreEpilogue::emit(GemmMainloop &mainloop, const NextItem &next,
                               Value rowsHere) {
  ImplicitLocOpBuilder &b = k.b;
  const GroupedMatmulTile &t = k.t;
  IndexMath m{b};
  rowsAligned = arith::CmpIOp::create(
      b, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b, k.numCols, m.c(kVector)), m.c(0));
  // An activation's gradient: the tile's inputs (64 registers a thread)
  // are loaded while the mainloop runs.
  bool actGrad = t.activationGrad();
  SmallVector<SmallVector<Value, 4>> inputs;
  if (actGrad) {
    Value loaderTid = arith::RemUIOp::create(b, k.tid, m.c(128));
    Value loaderRow = arith::DivUIOp::create(b, loaderTid, m.c(8));
    Value loaderChunk = arith::RemUIOp::create(b, loaderTid, m.c(8));
    for (int64_t c = 0; c * kStagingColumns / 2 < k.tileCols; ++c)
      inputs.push_back(loadInputChunk(b, c, loaderRow, loaderChunk));
  }
  SmallVector<Value, 2> accumulators = mainloop.runPass(m.c(0));
  // The stage buffers are free: the next item's first loads overlap this
  // epilogue (warp-specialized, the producer is at it already).
  if (!k.specialized) {
    k.syncStages(b);
    k.issuePrologue(b, next.item, next.stepBase, next.active);
  }
  // A 128-row ping-pong item's two accumulators go through the staging tile
  // one after the other.
  for (auto [g, accumulator] : llvm::enumerate(accumulators))
    storeRowGroup(accumulator, g, rowsHere, inputs);
}

void StagedStoreEpilogue::storeRowGroup(
    Value accumulator, int64_t g, Value rowsHere,
    ArrayRef<SmallVector<Value, 4>> inputs) {
  ImplicitLocOpBuilder &b = k.b;
  const GroupedMatmulTile &t = k.t;
  IndexMath m{b};
  bool actGrad = t.activationGrad();
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
  Value groupRow0 = m.mul(g ? m.add(k.rowGroup, m.c(g)) : k.rowGroup, m.c(64));
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
  // Chunks of kStagingColumns accumulator columns (half as many for an
  // activation's gradient); the last may be narrower (96 columns of a
  // gated 192-column tile: 64 + 32).
  int64_t chunkCols = actGrad ? kStagingColumns / 2 : kStagingColumns;
  int64_t tileCols = k.tileCols;
  // TMA stores: this warpgroup's elected thread issues them; the previous
  // item's last one must have read the staging tile before it is rewritten.
  bool tma = t.tmaStores();
  Value elected = tma ? warpgroupLeader(b) : Value();
  if (tma)
    waitStagingFree(b);
  for (int64_t c = 0; c * chunkCols < tileCols; ++c) {
    int64_t width = std::min(chunkCols, tileCols - c * chunkCols);
    if (actGrad) {
      // The chunk's inputs into the staging tile, swizzled as the stores
      // read it.
      for (int64_t pass = 0; pass < 64 / 16; ++pass)
        vector::StoreOp::create(b, inputs[c][pass], staging,
                                ValueRange{m.add(readRow, m.c(16 * pass)),
                                           m.mul(readPhysical, m.c(8))},
                                /*nontemporal=*/false, llvm::Align(16));
      k.syncWarpgroup(b);
    }
    for (int64_t j = 0; j < width / 8; ++j) {
      // Row % 8 is quad for both i: one swizzled chunk per j.
      Value chunk = arith::XOrIOp::create(b, frag.quad, m.c(j));
      Value col = m.add(m.mul(chunk, m.c(8)), frag.col);
      int64_t group = c * (chunkCols / 8) + j;
      if (actGrad) {
        // The gate gradients in chunk j, the up gradients in chunk j + 4.
        Value upChunk = arith::XOrIOp::create(b, frag.quad, m.c(j + 4));
        Value upCol = m.add(m.mul(upChunk, m.c(8)), frag.col);
        for (int64_t i = 0; i < 2; ++i) {
          // This thread's gate and up inputs, replaced by their gradients.
          Value row = m.add(frag.row, m.c(Fragment::rowOffset(2 * i)));
          Value in[2];
          for (int64_t h = 0; h < 2; ++h)
            in[h] = vector::LoadOp::create(
                b, pairType, staging, ValueRange{row, h ? upCol : col},
                /*nontemporal=*/false, llvm::Align(4));
          Value grads[2][2];
          for (int64_t p = 0; p < 2; ++p) {
            auto input = [&](int64_t h) -> Value {
              return arith::ExtFOp::create(
                  b, b.getF32Type(),
                  vector::ExtractOp::create(b, in[h], ArrayRef<int64_t>{p})
                      .getResult());
            };
            auto [dGate, dUp] = gatedActivationGrad(
                b, t.activation == GroupedMatmulTile::Activation::GptOss,
                t.alpha, t.limit, input(0), input(1),
                regs.element(b, Fragment::element(i, group, p)));
            grads[0][p] = arith::TruncFOp::create(b, bf16, dGate);
            grads[1][p] = arith::TruncFOp::create(b, bf16, dUp);
          }
          for (int64_t h = 0; h < 2; ++h)
            vector::StoreOp::create(
                b,
                vector::FromElementsOp::create(
                    b, pairType, ValueRange{grads[h][0], grads[h][1]}),
                staging, ValueRange{row, h ? upCol : col},
                /*nontemporal=*/false, llvm::Align(4));
        }
        continue;
      }
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
    // The TMA (async proxy) reads what these threads wrote: whole 64-column
    // chunks only, since its box would store a narrower one's neighbours.
    bool tmaChunk = tma && width == chunkCols;
    if (tmaChunk)
      NVVM::FenceProxyOp::create(
          b, NVVM::ProxyKind::async_shared,
          NVVM::SharedSpaceAttr::get(k.ctx, NVVM::SharedSpace::shared_cta));
    k.syncWarpgroup(b);
    // The threads store the staged rows, 8 columns each.
    auto storeStaged = [&](ImplicitLocOpBuilder &sb) {
      IndexMath s{sb};
      for (int64_t pass = 0; pass < 64 / 16; ++pass) {
        Value r = s.add(readRow, s.c(16 * pass));
        Value values = vector::LoadOp::create(
            sb, chunkType, staging, ValueRange{r, s.mul(readPhysical, s.c(8))},
            /*nontemporal=*/false, llvm::Align(16));
        // Every lane, stored or not, takes part in its block's shuffles.
        if (t.roundTripOut)
          values = roundTripChunkMX(sb, values, kMxLanes, t.roundTripOut);
        Value tileRow = s.add(groupRow0, r);
        Value stores = s.lt(tileRow, rowsHere);
        // Gradients: chunks 0-3 are gate columns, 4-7 up columns N further.
        Value chunkInHalf =
            actGrad ? arith::RemUIOp::create(sb, readChunk, s.c(4)) : readChunk;
        if (width < chunkCols)
          stores = arith::AndIOp::create(sb, stores,
                                         s.lt(chunkInHalf, s.c(width / 8)));
        ifThen(sb, stores, [&](ImplicitLocOpBuilder &nb) {
          IndexMath n{nb};
          Value base =
              actGrad ? n.mul(arith::DivUIOp::create(nb, readChunk, n.c(4)),
                              k.numCols)
                      : Value();
          storeVector(nb, values, n.add(row0, tileRow),
                      n.add(col0, n.add(n.c(c * chunkCols),
                                        n.mul(chunkInHalf, n.c(8)))),
                      base);
        });
      }
    };
    if (!tmaChunk) {
      storeStaged(b);
    } else {
      // All 64 rows the expert's: one thread hands the tile to the TMA,
      // which drops the columns past N; else the threads store the
      // expert's rows.
      Value whole = m.le(m.add(groupRow0, m.c(64)), rowsHere);
      scf::IfOp::create(
          b, whole,
          [&](OpBuilder &thenBuilder, Location tl) {
            ImplicitLocOpBuilder tb(tl, thenBuilder);
            ifThen(tb, elected, [&](ImplicitLocOpBuilder &eb) {
              IndexMath e{eb};
              nvgpu::TmaAsyncStoreOp::create(
                  eb, staging, k.outMap,
                  ValueRange{e.add(col0, e.c(c * chunkCols)),
                             e.add(row0, groupRow0)},
                  Value());
              NVVM::CpAsyncBulkCommitGroupOp::create(eb);
            });
            scf::YieldOp::create(tb);
          },
          [&](OpBuilder &elseBuilder, Location el) {
            ImplicitLocOpBuilder eb(el, elseBuilder);
            storeStaged(eb);
            scf::YieldOp::create(eb);
          });
    }
    // The next chunk overwrites the staging tile just read (with TMA
    // stores, once the TMA has read it; after the last chunk the next
    // item's first one waits, and finish() before the exit).
    if (!tma)
      k.syncWarpgroup(b);
    else if ((c + 1) * chunkCols < tileCols)
      waitStagingFree(b);
  }
}

Value StagedStoreEpilogue::warpgroupLeader(ImplicitLocOpBuilder &nb) const {
  IndexMath m{nb};
  return arith::CmpIOp::create(nb, arith::CmpIPredicate::eq,
                               arith::RemUIOp::create(nb, k.tid, m.c(128)),
                               m.c(0));
}

void StagedStoreEpilogue::waitStagingFree(ImplicitLocOpBuilder &nb) const {
  ifThen(nb, warpgroupLeader(nb), [&](ImplicitLocOpBuilder &eb) {
    NVVM::CpAsyncBulkWaitGroupOp::create(eb, eb.getI32IntegerAttr(0),
                                         eb.getUnitAttr());
  });
  k.syncWarpgroup(nb);
}

void StagedStoreEpilogue::finish() {
  // The TMA may still read a staging tile: the CTA's shared memory must
  // outlive that.
  if (k.t.tmaStores())
    waitStagingFree(k.b);
}

std::unique_ptr<GemmEpilogue> sm90::makeStagedStoreEpilogue(GemmKernel &k) {
  return std::make_unique<StagedStoreEpilogue>(k);
}
