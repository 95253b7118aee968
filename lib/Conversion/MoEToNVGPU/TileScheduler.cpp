//===- TileScheduler.cpp - device-side expert tile scheduler --------------===//
//
// The persistent grouped GEMM kernels' tile scheduler (see TileScheduler.h):
// the expert offsets clamped as on the CPU, cached in shared memory, turned
// into a table of each expert's token tiles, and looked up per work item.
//
//===----------------------------------------------------------------------===//

#include "TileScheduler.h"
#include "KernelUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::moe;

/// offsets[e] clamped into [0, numRows], as i32 (the ABI limits M to
/// 2^31 - 1).
Value mlir::moe::clampOffset(ImplicitLocOpBuilder &b, Value offset,
                             Value numRows) {
  IndexMath m{b};
  Value v = arith::MinSIOp::create(
      b, arith::MaxSIOp::create(b, m.toIndex(offset), m.c(0)), numRows);
  return arith::IndexCastOp::create(b, b.getI32Type(), v);
}

ScanStep mlir::moe::scanStep(ImplicitLocOpBuilder &nb, Value lane, Value valid,
                             Value end, Value carryEnd, Value carryTiles,
                             Value min32, Value max32, int64_t tileM) {
  Type i32 = nb.getI32Type();
  auto c32 = [&](int32_t v) -> Value {
    return arith::ConstantIntOp::create(nb, i32, v);
  };
  auto cmp = [&](arith::CmpIPredicate p, Value x, Value y) -> Value {
    return arith::CmpIOp::create(nb, p, x, y);
  };
  Value zero = c32(0);
  // Inclusive prefix over the warp's lanes with shuffles.
  auto prefix = [&](Value v, auto combine) {
    for (int32_t d = 1; d < 32; d *= 2) {
      Value up = gpu::ShuffleOp::create(nb, v, d, 32, gpu::ShuffleMode::UP)
                     .getShuffleResult();
      v = arith::SelectOp::create(
          nb, cmp(arith::CmpIPredicate::sge, lane, c32(d)), combine(v, up), v);
    }
    return v;
  };
  auto maxOf = [&](Value x, Value y) -> Value {
    return arith::MaxSIOp::create(nb, x, y);
  };
  auto sumOf = [&](Value x, Value y) -> Value {
    return arith::AddIOp::create(nb, x, y);
  };
  auto fromLast = [&](Value v) -> Value {
    return gpu::ShuffleOp::create(nb, v, c32(31), c32(32),
                                  gpu::ShuffleMode::IDX)
        .getShuffleResult();
  };
  ScanStep step;
  step.hi = maxOf(prefix(end, maxOf), carryEnd);
  Value below = gpu::ShuffleOp::create(nb, step.hi, 1, 32, gpu::ShuffleMode::UP)
                    .getShuffleResult();
  step.lo = arith::SelectOp::create(
      nb, cmp(arith::CmpIPredicate::eq, lane, zero), carryEnd, below);
  Value rows = arith::SubIOp::create(nb, step.hi, step.lo);
  Value eligible = arith::AndIOp::create(
      nb,
      arith::AndIOp::create(nb, valid,
                            cmp(arith::CmpIPredicate::sgt, rows, zero)),
      arith::AndIOp::create(nb, cmp(arith::CmpIPredicate::sge, rows, min32),
                            cmp(arith::CmpIPredicate::sle, rows, max32)));
  step.tiles = arith::SelectOp::create(
      nb, eligible,
      arith::DivSIOp::create(nb, sumOf(rows, c32(tileM - 1)), c32(tileM)),
      zero);
  step.upTo = sumOf(prefix(step.tiles, sumOf), carryTiles);
  step.lastHi = fromLast(step.hi);
  step.lastUpTo = fromLast(step.upTo);
  return step;
}

/// The tile scheduler's answer for `slot` by one warp scanning 32 experts
/// per step (E / 32 steps, a ballot finds the expert that holds `slot`):
/// the path for experts that do not fit the shared tile table.
TileLookup mlir::moe::lookUpTile(ImplicitLocOpBuilder &b, Value offsets,
                                 Value cachedEnds, Value numExperts,
                                 Value numRows, Value slot, Value rowsMin,
                                 Value rowsMax, int64_t tileM, Value tid) {
  IndexMath m{b};
  Type i32 = b.getI32Type();
  auto c32 = [&](ImplicitLocOpBuilder &nb, int32_t v) -> Value {
    return arith::ConstantIntOp::create(nb, i32, v);
  };
  auto cmp = [&](ImplicitLocOpBuilder &nb, arith::CmpIPredicate p, Value x,
                 Value y) -> Value {
    return arith::CmpIOp::create(nb, p, x, y);
  };
  auto toI32 = [&](ImplicitLocOpBuilder &nb, Value v) -> Value {
    return arith::IndexCastOp::create(nb, i32, v);
  };
  auto clampedEnd = [&](ImplicitLocOpBuilder &nb, Value e) -> Value {
    IndexMath n{nb};
    auto cached = scf::IfOp::create(
        nb, n.lt(e, n.c(kCachedEnds)),
        [&](OpBuilder &thenBuilder, Location tl) {
          ImplicitLocOpBuilder tb(tl, thenBuilder);
          scf::YieldOp::create(tb, IndexMath{tb}.load(cachedEnds, e));
        },
        [&](OpBuilder &elseBuilder, Location el) {
          ImplicitLocOpBuilder eb(el, elseBuilder);
          scf::YieldOp::create(
              eb, clampOffset(eb, IndexMath{eb}.load(offsets, e), numRows));
        });
    return cached.getResult(0);
  };
  Value lane = toI32(b, arith::RemUIOp::create(b, tid, m.c(32)));
  Value slot32 = toI32(b, slot), min32 = toI32(b, rowsMin),
        max32 = toI32(b, rowsMax);
  Value firstBegin = clampedEnd(b, m.c(0));
  Value minusOne = c32(b, -1), zero = c32(b, 0);

  auto scan = scf::ForOp::create(
      b, m.c(0), numExperts, m.c(32),
      ValueRange{firstBegin, zero, minusOne, zero, zero, zero},
      [&](OpBuilder &nested, Location l, Value base, ValueRange iter) {
        ImplicitLocOpBuilder nb(l, nested);
        IndexMath n{nb};
        Value e = n.add(base, n.toIndex(lane));
        Value valid = n.lt(e, numExperts);
        Value end = arith::SelectOp::create(
            nb, valid,
            clampedEnd(
                nb, arith::MinSIOp::create(nb, n.add(e, n.c(1)), numExperts)),
            zero);
        ScanStep step = scanStep(nb, lane, valid, end, iter[0], iter[1], min32,
                                 max32, tileM);
        Value from = arith::SubIOp::create(nb, step.upTo, step.tiles);
        Value hit = arith::AndIOp::create(
            nb, cmp(nb, arith::CmpIPredicate::sge, slot32, from),
            cmp(nb, arith::CmpIPredicate::slt, slot32, step.upTo));
        Value ballot = NVVM::VoteSyncOp::create(nb, i32, c32(nb, -1), hit,
                                                NVVM::VoteSyncKind::ballot);
        Value anyHit = cmp(nb, arith::CmpIPredicate::ne, ballot, zero);
        Value source =
            arith::SelectOp::create(nb, anyHit,
                                    LLVM::CountTrailingZerosOp::create(
                                        nb, ballot, nb.getBoolAttr(false)),
                                    zero);
        auto from_ = [&](Value v, Value srcLane) -> Value {
          return gpu::ShuffleOp::create(nb, v, srcLane, c32(nb, 32),
                                        gpu::ShuffleMode::IDX)
              .getShuffleResult();
        };
        Value fresh = arith::AndIOp::create(
            nb, anyHit, cmp(nb, arith::CmpIPredicate::slt, iter[2], zero));
        auto pick = [&](Value now, Value before) -> Value {
          return arith::SelectOp::create(nb, fresh, now, before);
        };
        scf::YieldOp::create(
            nb, ValueRange{
                    step.lastHi, step.lastUpTo,
                    pick(from_(toI32(nb, e), source), iter[2]),
                    pick(arith::SubIOp::create(nb, slot32, from_(from, source)),
                         iter[3]),
                    pick(from_(step.lo, source), iter[4]),
                    pick(from_(step.hi, source), iter[5])});
      });
  auto index = [&](Value v) { return m.toIndex(v); };
  return {index(scan.getResult(2)), index(scan.getResult(3)),
          index(scan.getResult(4)), index(scan.getResult(5)),
          index(scan.getResult(1))};
}

/// The shared tile table, built once per CTA by warp 0 when E < kCachedEnds:
/// rowEnds (the offsets cache, rewritten in place) becomes the running
/// maximum, so expert e's rows are [rowEnds[e], rowEnds[e + 1]), and
/// tileEnds[e] the slots of experts 0..e. Every lookup is then a binary
/// search in shared memory instead of an E / 32-step warp scan.
void mlir::moe::buildTileTable(ImplicitLocOpBuilder &b, Value rowEnds,
                               Value tileEnds, Value numExperts, Value rowsMin,
                               Value rowsMax, int64_t tileM, Value tid) {
  IndexMath m{b};
  Type i32 = b.getI32Type();
  auto toI32 = [&](Value v) -> Value {
    return arith::IndexCastOp::create(b, i32, v);
  };
  Value lane = toI32(arith::RemUIOp::create(b, tid, m.c(32)));
  Value min32 = toI32(rowsMin), max32 = toI32(rowsMax);
  Value zero = arith::ConstantIntOp::create(b, i32, 0);
  scf::ForOp::create(
      b, m.c(0), numExperts, m.c(32), ValueRange{m.load(rowEnds, m.c(0)), zero},
      [&](OpBuilder &nested, Location l, Value base, ValueRange iter) {
        ImplicitLocOpBuilder nb(l, nested);
        IndexMath n{nb};
        Value e = n.add(base, n.toIndex(lane));
        Value valid = n.lt(e, numExperts);
        // Lanes past the last expert read entry 0, which no lane rewrites
        // (the last one is another lane's to rewrite).
        Value next =
            arith::SelectOp::create(nb, valid, n.add(e, n.c(1)), n.c(0));
        Value end =
            arith::SelectOp::create(nb, valid, n.load(rowEnds, next), iter[0]);
        ScanStep step = scanStep(nb, lane, valid, end, iter[0], iter[1], min32,
                                 max32, tileM);
        ifThen(nb, valid, [&](ImplicitLocOpBuilder &vb) {
          IndexMath v{vb};
          memref::StoreOp::create(vb, step.hi, rowEnds, v.add(e, v.c(1)));
          memref::StoreOp::create(vb, step.upTo, tileEnds, e);
        });
        scf::YieldOp::create(nb, ValueRange{step.lastHi, step.lastUpTo});
      });
}

void mlir::moe::buildTileTableByWarps(ImplicitLocOpBuilder &b, Value rowEnds,
                                      Value tileEnds, Value numExperts,
                                      Value rowsMin, Value rowsMax,
                                      int64_t tileM, Value tid, int64_t warps) {
  IndexMath m{b};
  Type i32 = b.getI32Type();
  auto toI32 = [&](ImplicitLocOpBuilder &nb, Value v) -> Value {
    return arith::IndexCastOp::create(nb, i32, v);
  };
  Value laneIndex = arith::RemUIOp::create(b, tid, m.c(32));
  Value lane = toI32(b, laneIndex);
  Value warp = arith::DivUIOp::create(b, tid, m.c(32));
  Value min32 = toI32(b, rowsMin), max32 = toI32(b, rowsMax);
  Value zero = arith::ConstantIntOp::create(b, i32, 0);
  Value segments = m.ceilDiv(numExperts, 32);
  Value first = m.load(rowEnds, m.c(0));
  auto maxOf = [&](ImplicitLocOpBuilder &nb) {
    return [&nb](Value x, Value y) -> Value {
      return arith::MaxSIOp::create(nb, x, y);
    };
  };
  // Warp w takes segments w, w + warps, ...: experts [32 s, 32 s + 32).
  auto forSegments =
      [&](function_ref<void(ImplicitLocOpBuilder &, Value, Value, Value)>
              body) {
        scf::ForOp::create(
            b, warp, segments, m.c(warps), ValueRange{},
            [&](OpBuilder &nested, Location l, Value s, ValueRange) {
              ImplicitLocOpBuilder nb(l, nested);
              IndexMath n{nb};
              Value e = n.add(n.mul(s, n.c(32)), laneIndex);
              body(nb, s, e, n.lt(e, numExperts));
              scf::YieldOp::create(nb);
            });
      };
  // Expert e's end (entry e + 1; entry 0, never rewritten, past the last).
  auto endOf = [&](ImplicitLocOpBuilder &nb, Value e, Value valid) {
    IndexMath n{nb};
    Value entry = arith::SelectOp::create(nb, valid, n.add(e, n.c(1)), n.c(0));
    return n.load(rowEnds, entry);
  };
  // The carry of segment s: `combine` over the per-segment totals at `at`
  // of the segments before it (at most kTableSegments, one per lane).
  auto carryOf = [&](ImplicitLocOpBuilder &nb, Value s, int64_t at,
                     Value identity,
                     function_ref<Value(Value, Value)> combine) {
    IndexMath n{nb};
    Value before = n.lt(laneIndex, s);
    Value v = n.load(
        tileEnds,
        n.add(n.c(at), arith::SelectOp::create(nb, before, laneIndex, n.c(0))));
    return warpReduce(nb, arith::SelectOp::create(nb, before, v, identity),
                      combine);
  };
  auto ifLane0 = [&](ImplicitLocOpBuilder &nb,
                     function_ref<void(ImplicitLocOpBuilder &)> body) {
    ifThen(nb, IndexMath{nb}.lt(laneIndex, IndexMath{nb}.c(1)), body);
  };
  int64_t maxAt = kCachedEnds - 2 * kTableSegments;
  int64_t tilesAt = kCachedEnds - kTableSegments;
  // 1. Each segment's largest end, into the table's unused tail.
  forSegments([&](ImplicitLocOpBuilder &nb, Value s, Value e, Value valid) {
    Value end = arith::SelectOp::create(nb, valid, endOf(nb, e, valid), first);
    Value largest = warpReduce(nb, end, maxOf(nb));
    ifLane0(nb, [&](ImplicitLocOpBuilder &lb) {
      memref::StoreOp::create(lb, largest, tileEnds,
                              IndexMath{lb}.add(IndexMath{lb}.c(maxAt), s));
    });
  });
  gpu::BarrierOp::create(b);
  // 2. Each segment scanned after the ends before it (its tiles counted from
  // zero); each warp rewrites only its segments' entries.
  forSegments([&](ImplicitLocOpBuilder &nb, Value s, Value e, Value valid) {
    Value carryEnd = carryOf(nb, s, maxAt, first, maxOf(nb));
    Value end =
        arith::SelectOp::create(nb, valid, endOf(nb, e, valid), carryEnd);
    ScanStep step =
        scanStep(nb, lane, valid, end, carryEnd, zero, min32, max32, tileM);
    ifThen(nb, valid, [&](ImplicitLocOpBuilder &vb) {
      IndexMath v{vb};
      memref::StoreOp::create(vb, step.hi, rowEnds, v.add(e, v.c(1)));
      memref::StoreOp::create(vb, step.upTo, tileEnds, e);
    });
    ifLane0(nb, [&](ImplicitLocOpBuilder &lb) {
      memref::StoreOp::create(lb, step.lastUpTo, tileEnds,
                              IndexMath{lb}.add(IndexMath{lb}.c(tilesAt), s));
    });
  });
  gpu::BarrierOp::create(b);
  // 3. The tiles of the segments before each one added to its entries.
  forSegments([&](ImplicitLocOpBuilder &nb, Value s, Value e, Value valid) {
    Value carryTiles =
        carryOf(nb, s, tilesAt, zero, [&nb](Value x, Value y) -> Value {
          return arith::AddIOp::create(nb, x, y);
        });
    ifThen(nb, valid, [&](ImplicitLocOpBuilder &vb) {
      IndexMath v{vb};
      memref::StoreOp::create(
          vb, arith::AddIOp::create(vb, v.load(tileEnds, e), carryTiles),
          tileEnds, e);
    });
  });
}

/// Where `slot` (below the table's slot count) lies, by binary search for
/// the first expert whose tileEnds exceeds it (numTiles is left null).
TileLookup mlir::moe::lookUpTableTile(ImplicitLocOpBuilder &b, Value rowEnds,
                                      Value tileEnds, Value numExperts,
                                      Value slot) {
  IndexMath m{b};
  Type i32 = b.getI32Type();
  Value slot32 = arith::IndexCastOp::create(b, i32, slot);
  Value lo = m.c(0), hi = m.sub(numExperts, m.c(1));
  for (int64_t i = 1; i < kCachedEnds; i *= 2) {
    Value mid = arith::DivUIOp::create(b, m.add(lo, hi), m.c(2));
    Value above = arith::CmpIOp::create(b, arith::CmpIPredicate::sgt,
                                        m.load(tileEnds, mid), slot32);
    Value afterMid = arith::MinSIOp::create(b, m.add(mid, m.c(1)), hi);
    lo = arith::SelectOp::create(b, above, lo, afterMid);
    hi = arith::SelectOp::create(b, above, mid, hi);
  }
  Value expert = lo;
  Value before = arith::MaxSIOp::create(b, m.sub(expert, m.c(1)), m.c(0));
  Value previous =
      arith::SelectOp::create(b, m.lt(m.c(0), expert), m.load(tileEnds, before),
                              arith::ConstantIntOp::create(b, i32, 0));
  return {expert, m.toIndex(arith::SubIOp::create(b, slot32, previous)),
          m.toIndex(m.load(rowEnds, expert)),
          m.toIndex(m.load(rowEnds, m.add(expert, m.c(1)))), Value()};
}

TileScheduler mlir::moe::makeTileScheduler(ImplicitLocOpBuilder &b,
                                           Value offsets, Value cachedEnds,
                                           Value tileEnds, Value numExperts,
                                           Value numRows, Value rowsMin,
                                           Value rowsMax, Value tid,
                                           int64_t tileM) {
  IndexMath m{b};
  return {offsets,  cachedEnds,
          tileEnds, numExperts,
          numRows,  rowsMin,
          rowsMax,  tid,
          tileM,    m.lt(numExperts, m.c(kCachedEnds))};
}

void TileScheduler::cacheOffsets(ImplicitLocOpBuilder &b,
                                 int64_t threads) const {
  IndexMath m{b};
  scf::ForOp::create(
      b, tid,
      arith::MinSIOp::create(b, m.add(numExperts, m.c(1)), m.c(kCachedEnds)),
      m.c(threads), ValueRange{},
      [&](OpBuilder &nested, Location l, Value e, ValueRange) {
        ImplicitLocOpBuilder nb(l, nested);
        memref::StoreOp::create(
            nb, clampOffset(nb, IndexMath{nb}.load(offsets, e), numRows),
            cachedEnds, e);
        scf::YieldOp::create(nb);
      });
}

void TileScheduler::buildTable(ImplicitLocOpBuilder &b, int64_t threads) const {
  IndexMath m{b};
  // Many experts: every warp scans segments of them (three passes instead of
  // E / 32 steps of one warp), while the table's tail holds their totals.
  Value byWarps = arith::AndIOp::create(
      b, tableFits,
      arith::AndIOp::create(
          b, m.lt(m.c(kTableByWarpsFrom - 1), numExperts),
          m.le(numExperts, m.c(kCachedEnds - 2 * kTableSegments))));
  scf::IfOp::create(
      b, byWarps,
      [&](OpBuilder &thenBuilder, Location tl) {
        ImplicitLocOpBuilder tb(tl, thenBuilder);
        buildTileTableByWarps(tb, cachedEnds, tileEnds, numExperts, rowsMin,
                              rowsMax, tileM, tid, threads / 32);
        scf::YieldOp::create(tb);
      },
      [&](OpBuilder &elseBuilder, Location el) {
        ImplicitLocOpBuilder eb(el, elseBuilder);
        IndexMath n{eb};
        ifThen(eb, arith::AndIOp::create(eb, tableFits, n.lt(tid, n.c(32))),
               [&](ImplicitLocOpBuilder &nb) {
                 buildTileTable(nb, cachedEnds, tileEnds, numExperts, rowsMin,
                                rowsMax, tileM, tid);
               });
        scf::YieldOp::create(eb);
      });
  gpu::BarrierOp::create(b);
}

Value TileScheduler::countTiles(ImplicitLocOpBuilder &b) const {
  auto count = scf::IfOp::create(
      b, tableFits,
      [&](OpBuilder &thenBuilder, Location tl) {
        ImplicitLocOpBuilder tb(tl, thenBuilder);
        IndexMath n{tb};
        scf::YieldOp::create(
            tb, n.toIndex(n.load(tileEnds, n.sub(numExperts, n.c(1)))));
      },
      [&](OpBuilder &elseBuilder, Location el) {
        ImplicitLocOpBuilder eb(el, elseBuilder);
        scf::YieldOp::create(eb, lookUpTile(eb, offsets, cachedEnds, numExperts,
                                            numRows, IndexMath{eb}.c(-1),
                                            rowsMin, rowsMax, tileM, tid)
                                     .numTiles);
      });
  return count.getResult(0);
}

TileLookup TileScheduler::lookUp(ImplicitLocOpBuilder &b, Value slot) const {
  auto yieldOf = [](ImplicitLocOpBuilder &yb, const TileLookup &found) {
    scf::YieldOp::create(yb, ValueRange{found.expert, found.mTile,
                                        found.rowBegin, found.rowEnd});
  };
  auto found = scf::IfOp::create(
      b, tableFits,
      [&](OpBuilder &thenBuilder, Location tl) {
        ImplicitLocOpBuilder tb(tl, thenBuilder);
        yieldOf(tb,
                lookUpTableTile(tb, cachedEnds, tileEnds, numExperts, slot));
      },
      [&](OpBuilder &elseBuilder, Location el) {
        ImplicitLocOpBuilder eb(el, elseBuilder);
        yieldOf(eb, lookUpTile(eb, offsets, cachedEnds, numExperts, numRows,
                               slot, rowsMin, rowsMax, tileM, tid));
      });
  return {found.getResult(0), found.getResult(1), found.getResult(2),
          found.getResult(3), Value()};
}

WorkItem L2WorkOrder::describe(ImplicitLocOpBuilder &nb, Value work) const {
  IndexMath n{nb};
  work = arith::MinSIOp::create(nb, work, n.sub(numWork, n.c(1)));
  work = arith::MaxSIOp::create(nb, work, n.c(0));
  Value groupSize = n.mul(n.c(kSlotGroup), numColTiles);
  Value group = arith::DivUIOp::create(nb, work, groupSize);
  Value inGroup = arith::RemUIOp::create(nb, work, groupSize);
  Value firstSlot = n.mul(group, n.c(kSlotGroup));
  // At least 1: no division by zero when there is no work at all.
  Value slotsInGroup = arith::MaxSIOp::create(
      nb,
      arith::MinSIOp::create(nb, n.c(kSlotGroup), n.sub(numTiles, firstSlot)),
      n.c(1));
  Value slot =
      n.add(firstSlot, arith::RemUIOp::create(nb, inGroup, slotsInGroup));
  Value nTile = arith::DivUIOp::create(nb, inGroup, slotsInGroup);
  TileLookup found = scheduler.lookUp(nb, slot);
  return {found.expert,
          n.add(found.rowBegin, n.mul(found.mTile, n.c(scheduler.tileM))),
          found.rowEnd,
          n.add(n.mul(nTile, n.c(itemColumns * clusterSize)),
                n.mul(rank, n.c(itemColumns))),
          slot};
}
