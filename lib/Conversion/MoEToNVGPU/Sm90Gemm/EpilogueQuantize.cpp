//===- EpilogueQuantize.cpp - e4m3 rows and their group scales ------------===//
//
// GroupedMatmulTile::quantizeOut: a work item covers a whole [1, 128]
// output group. Every pass stores its activations, rounded to bf16, into
// the item's activation tile (64 or tileM rows x 128 columns, 16-byte
// chunks XOR-swizzled by row); then 16 threads per row quantize each row's
// 128 values, as moe.quantize does, and store e4m3 codes and the row's
// scale. Swap-AB goes through an f32 tile of its own (gate and up of a
// column are in different warps).
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

class QuantizeEpilogue final : public GemmEpilogue {
public:
  using GemmEpilogue::GemmEpilogue;
  void emit(GemmMainloop &mainloop, const NextItem &next,
            Value rowsHere) override;

private:
  /// Emits `body(pass)` inside `scf.for pass in [0, passes)`.
  void forEachPass(function_ref<void(Value)> body) const;
  /// Stores a bf16 value (or a vector of them) at (row, col) of `tile`.
  void storeActivation(ImplicitLocOpBuilder &nb, Value tile, Value value,
                       Value row, Value col) const;
  /// Rows [0, rowsValid) of `tile` go to out rows outRow0.. (threads of one
  /// warpgroup; all of them reach every shuffle).
  void quantizeTile(Value tile, Value groupTid, Value rowsValid,
                    Value outRow0) const;
};

} // namespace

void QuantizeEpilogue::forEachPass(function_ref<void(Value)> body) const {
  IndexMath m{k.b};
  auto loop = scf::ForOp::create(k.b, m.c(0), m.c(k.t.passes()), m.c(1));
  OpBuilder::InsertionGuard passGuard(k.b);
  k.b.setInsertionPoint(loop.getBody()->getTerminator());
  body(loop.getInductionVar());
}

void QuantizeEpilogue::storeActivation(ImplicitLocOpBuilder &nb, Value tile,
                                       Value value, Value row,
                                       Value col) const {
  IndexMath n{nb};
  Value chunk =
      arith::XOrIOp::create(nb, arith::DivUIOp::create(nb, col, n.c(8)),
                            arith::RemUIOp::create(nb, row, n.c(8)));
  Value physical =
      n.add(n.mul(chunk, n.c(8)), arith::RemUIOp::create(nb, col, n.c(8)));
  if (isa<VectorType>(value.getType()))
    vector::StoreOp::create(nb, value, tile, ValueRange{row, physical},
                            /*nontemporal=*/false, llvm::Align(4));
  else
    memref::StoreOp::create(nb, value, tile, ValueRange{row, physical});
}

void QuantizeEpilogue::quantizeTile(Value tile, Value groupTid, Value rowsValid,
                                    Value outRow0) const {
  ImplicitLocOpBuilder &b = k.b;
  IndexMath m{b};
  constexpr int64_t kLanesPerRow = GroupedMatmulTile::kOutGroup / 8;
  Value col0 = k.current.col0;
  Value chunk = arith::RemUIOp::create(b, groupTid, m.c(kLanesPerRow));
  Value rowInRound = arith::DivUIOp::create(b, groupTid, m.c(kLanesPerRow));
  Value leads =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, chunk, m.c(0));
  Value groupCol =
      arith::DivUIOp::create(b, col0, m.c(GroupedMatmulTile::kOutGroup));
  for (int64_t r0 = 0; r0 < k.t.activationRows(); r0 += 128 / kLanesPerRow) {
    // r % 8 is rowInRound: the swizzle keeps the chunk within its row.
    Value r = m.add(m.c(r0), rowInRound);
    Value physical = m.mul(arith::XOrIOp::create(b, chunk, rowInRound), m.c(8));
    QuantizedChunk q = quantizeChunkE4M3(
        b, loadChunkBits(b, tile, ValueRange{r, physical}, /*bf16=*/true),
        kLanesPerRow);
    ifThen(b, m.lt(r, rowsValid), [&](ImplicitLocOpBuilder &sb) {
      IndexMath n{sb};
      Value row = n.add(outRow0, r);
      Value codes = vector::BitCastOp::create(
          sb, VectorType::get({8}, sb.getI8Type()), q.codes);
      vector::StoreOp::create(
          sb, codes, k.out, ValueRange{row, n.add(col0, n.mul(chunk, n.c(8)))},
          /*nontemporal=*/false, llvm::Align(8));
      ifThen(sb, leads, [&](ImplicitLocOpBuilder &lb) {
        memref::StoreOp::create(lb, q.scale, k.outScales,
                                ValueRange{row, groupCol});
      });
    });
  }
}

void QuantizeEpilogue::emit(GemmMainloop &mainloop, const NextItem &next,
                            Value rowsHere) {
  ImplicitLocOpBuilder &b = k.b;
  const GroupedMatmulTile &t = k.t;
  IndexMath m{b};
  Type bf16 = b.getBF16Type();
  int64_t tileCols = k.tileCols;
  Value row0 = k.current.row0, col0 = k.current.col0;
  Value activationBase = m.c(t.stages * k.stageBytes);
  if (!t.swapAB) {
    Fragment frag = fragmentOf(b, k.tid);
    Value groupRow0 = m.mul(k.warpgroup, m.c(64));
    Value tile = m.view(
        k.smem,
        m.add(activationBase, m.mul(k.warpgroup, m.c(t.activationTileBytes() /
                                                     t.warpgroups()))),
        k.ty.activationTile);
    int64_t upDistance = Fragment::upDistance(t.accumulatorColumns());
    // A loop, not unrolled: ptxas spilled the unrolled passes.
    forEachPass([&](Value pass) {
      FragmentRegs regs(b, mainloop.runPass(pass).front(),
                        t.accumulatorColumns());
      for (int64_t j = 0; j < tileCols / 8; ++j) {
        Value col =
            m.add(m.add(m.mul(pass, m.c(tileCols)), m.c(8 * j)), frag.col);
        std::pair<Value, Value> bias[2];
        for (int64_t p = 0; p < 2 && k.biases; ++p)
          bias[p] = loadBiasPair(b, k, m.add(col0, m.add(col, m.c(p))));
        for (int64_t i = 0; i < 2; ++i) {
          SmallVector<Value, 2> pair;
          for (int64_t p = 0; p < 2; ++p) {
            int64_t e = Fragment::element(i, j, p);
            Value v = regs.element(b, e);
            Value up = regs.element(b, e + upDistance);
            pair.push_back(arith::TruncFOp::create(
                b, bf16,
                fuseEpilogueValue(b, t, v, up, bias[p].first, bias[p].second,
                                  Value())));
          }
          storeActivation(b, tile,
                          vector::FromElementsOp::create(
                              b, VectorType::get({2}, bf16), pair),
                          m.add(frag.row, m.c(Fragment::rowOffset(2 * i))),
                          col);
        }
      }
    });
    // Warp-specialized, the producer is loading the next item already.
    if (!k.specialized) {
      k.syncStages(b);
      k.issuePrologue(b, next.item, next.stepBase, next.active);
    }
    k.syncWarpgroup(b);
    Value groupTid = arith::RemUIOp::create(b, k.tid, m.c(128));
    Value rowsValid = m.sub(rowsHere, groupRow0);
    quantizeTile(tile, groupTid, rowsValid, m.add(row0, groupRow0));
    // The next item's activations overwrite the tile just read.
    k.syncWarpgroup(b);
    return;
  }
  // Swap-AB: out^T in the f32 tile, weight rows [0, 32) gate and [32, 64)
  // their up partners; 32 consecutive threads take a row's 32 columns, 4
  // rows at a time.
  Value tile = m.view(k.smem, activationBase, k.ty.activationTile);
  Value outTile =
      m.view(k.smem, m.add(activationBase, m.c(t.activationTileBytes())),
             k.ty.outTile);
  Value lane = arith::RemUIOp::create(b, k.tid, m.c(tileCols));
  Value firstRow = arith::DivUIOp::create(b, k.tid, m.c(tileCols));
  forEachPass([&](Value pass) {
    Value accumulator = mainloop.runPass(pass).front();
    gpu::BarrierOp::create(b);
    nvgpu::WarpgroupMmaStoreOp::create(b, accumulator, outTile);
    gpu::BarrierOp::create(b);
    Value col = m.add(m.mul(pass, m.c(tileCols)), lane);
    std::pair<Value, Value> bias;
    if (k.biases)
      bias = loadBiasPair(b, k, m.add(col0, col));
    scf::ForOp::create(
        b, firstRow, m.c(t.tileM), m.c(k.threads / tileCols), ValueRange{},
        [&](OpBuilder &inner, Location l, Value r, ValueRange) {
          ImplicitLocOpBuilder ib(l, inner);
          IndexMath i{ib};
          Value v = i.load(outTile, ValueRange{lane, r});
          Value up = i.load(outTile, ValueRange{i.add(lane, i.c(tileCols)), r});
          v = fuseEpilogueValue(ib, t, v, up, bias.first, bias.second, Value());
          storeActivation(ib, tile, arith::TruncFOp::create(ib, bf16, v), r,
                          col);
          scf::YieldOp::create(ib);
        });
    // The next pass's accumulator overwrites the f32 tile just read.
    gpu::BarrierOp::create(b);
  });
  k.issuePrologue(b, next.item, next.stepBase, next.active);
  quantizeTile(tile, k.tid, rowsHere, row0);
  // The next item's activations overwrite the tile just read.
  gpu::BarrierOp::create(b);
}

std::unique_ptr<GemmEpilogue> sm90::makeQuantizeEpilogue(GemmKernel &k) {
  return std::make_unique<QuantizeEpilogue>(k);
}
