//===- PermuteKernels.cpp - the moe.permute kernels -----------------------===//
//
// The permutation: a count kernel (per-chunk expert counts), an index
// kernel (offsets, stable slots, the rows' source tokens), a gather of the
// rows (optionally quantized to e4m3 in [1, 128] groups) and the quantizing
// scatter over the tokens. docs/runtime-contract.md §3.4 has their ABI.
//
//===----------------------------------------------------------------------===//

#include "KernelUtils.h"
#include "MoE/Conversion/Passes.h"
#include "QuantizeKernel.h"
#include "RoutingKernelUtils.h"
#include "RoutingKernels.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::moe;

std::string PermuteKernelSpec::countKernelName() const {
  return llvm::formatv("moe_permute_count_e{0}_k{1}", experts, topK).str();
}

std::string PermuteKernelSpec::indexKernelName() const {
  return llvm::formatv("moe_permute_index_e{0}_k{1}_off{2}", experts, topK,
                       offsetBits)
      .str();
}

std::string PermuteKernelSpec::gatherKernelName() const {
  return llvm::formatv("moe_permute_gather_off{0}{1}", offsetBits,
                       quantize    ? "_e4m3"
                       : roundTrip ? mxRoundTripSuffix(roundTrip)
                                   : "")
      .str();
}

std::string PermuteKernelSpec::scatterKernelName() const {
  return llvm::formatv("moe_permute_scatter_k{0}_off{1}_e4m3", topK, offsetBits)
      .str();
}

namespace {

/// The permute's gather and scatter loop: grid-stride over the pairs of a
/// group (of rows or tokens) and a column block of `columns` (pair p: group
/// p / blocks, block p mod blocks); `body` gets the group and this thread's
/// first column, 8 per thread.
void forEachGroupAndBlock(
    ImplicitLocOpBuilder &b, Value groups, Value blocks, int64_t columns,
    Value tid,
    function_ref<void(ImplicitLocOpBuilder &, Value group, Value col)> body) {
  IndexMath m{b};
  scf::ForOp::create(
      b, gpu::BlockIdOp::create(b, gpu::Dimension::x), m.mul(groups, blocks),
      gpu::GridDimOp::create(b, gpu::Dimension::x), ValueRange{},
      [&](OpBuilder &nested, Location l, Value pair, ValueRange) {
        ImplicitLocOpBuilder ib(l, nested);
        IndexMath c{ib};
        Value group = arith::DivUIOp::create(ib, pair, blocks);
        Value col =
            c.add(c.mul(arith::RemUIOp::create(ib, pair, blocks), c.c(columns)),
                  c.mul(tid, c.c(8)));
        body(ib, group, col);
        scf::YieldOp::create(ib);
      });
}

/// Stores a quantized chunk's 8 codes at (row, col) of `rows` and, from the
/// first of the 16 lanes of its [1, 128] group (`lane16` 0), the group's
/// scale at (row, col / 128) of `rowsScale`.
void storeQuantizedChunk(ImplicitLocOpBuilder &b, Value codes, Value scale,
                         Value rows, Value rowsScale, Value row, Value col,
                         Value lane16) {
  vector::StoreOp::create(b, codes, rows, ValueRange{row, col},
                          /*nontemporal=*/false, llvm::Align(8));
  ifThen(b, IndexMath{b}.lt(lane16, IndexMath{b}.c(1)),
         [&](ImplicitLocOpBuilder &lb) {
           memref::StoreOp::create(
               lb, scale, rowsScale,
               ValueRange{
                   row, arith::DivUIOp::create(lb, col, IndexMath{lb}.c(128))});
         });
}

} // namespace

namespace {
/// What the count and index kernels share: the chunk this CTA owns and the
/// expert of each flattened id.
struct PermuteChunk {
  ImplicitLocOpBuilder &b;
  const PermuteKernelSpec &spec;
  Value ids, total, base, end;

  PermuteChunk(ImplicitLocOpBuilder &b, const PermuteKernelSpec &spec,
               Value ids)
      : b(b), spec(spec), ids(ids) {
    IndexMath m{b};
    total = m.mul(memref::DimOp::create(b, ids, m.c(0)), m.c(spec.topK));
    base =
        m.mul(gpu::BlockIdOp::create(b, gpu::Dimension::x), m.c(kPermuteChunk));
    end = arith::MinUIOp::create(b, m.add(base, m.c(kPermuteChunk)), total);
  }

  /// Expert of flattened id f, or -1 when it is outside [0, E) or `valid`
  /// is false; and whether it is in range.
  std::pair<Value, Value> expertOf(ImplicitLocOpBuilder &nb, Value f,
                                   Value valid) const {
    IndexMath n{nb};
    int64_t k = spec.topK;
    Value at = arith::SelectOp::create(nb, valid, f, n.c(0));
    Value e = n.load(ids, ValueRange{arith::DivUIOp::create(nb, at, n.c(k)),
                                     arith::RemUIOp::create(nb, at, n.c(k))});
    Value inRange = arith::AndIOp::create(
        nb, valid,
        arith::AndIOp::create(
            nb,
            arith::CmpIOp::create(nb, arith::CmpIPredicate::sge, e,
                                  i32Constant(nb, 0)),
            arith::CmpIOp::create(nb, arith::CmpIPredicate::slt, e,
                                  i32Constant(nb, spec.experts))));
    return {arith::SelectOp::create(nb, inRange, e, i32Constant(nb, -1)),
            inRange};
  }

  /// Counts per expert of this chunk's ids into `counts` (shared memory,
  /// zeroed here; atomics: order does not matter). Ends synchronised.
  void count(Value counts, Value tid) const {
    IndexMath m{b};
    ifThen(b, m.lt(tid, m.c(spec.experts)), [&](ImplicitLocOpBuilder &nb) {
      memref::StoreOp::create(nb, i32Constant(nb, 0), counts, ValueRange{tid});
    });
    gpu::BarrierOp::create(b);
    scf::ForOp::create(
        b, m.add(base, tid), end, m.c(kPermuteIndexThreads), ValueRange{},
        [&](OpBuilder &nested, Location l, Value f, ValueRange) {
          ImplicitLocOpBuilder nb(l, nested);
          // (expert, in range), not a structured binding: the lambda below
          // captures the expert.
          std::pair<Value, Value> id = expertOf(
              nb, f, arith::ConstantIntOp::create(nb, nb.getI1Type(), 1));
          Value e = id.first;
          ifThen(nb, id.second, [&](ImplicitLocOpBuilder &ib) {
            memref::AtomicRMWOp::create(ib, arith::AtomicRMWKind::addi,
                                        i32Constant(ib, 1), counts,
                                        ValueRange{IndexMath{ib}.toIndex(e)});
          });
          scf::YieldOp::create(nb);
        });
    gpu::BarrierOp::create(b);
  }
};

} // namespace

gpu::GPUFuncOp
mlir::moe::buildPermuteCountKernel(OpBuilder &builder, Location loc,
                                   gpu::GPUModuleOp module,
                                   const PermuteKernelSpec &spec) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Type i32 = b.getI32Type();
  auto func = createKernel(
      b, spec.countKernelName(),
      {dynamic2D(i32), MemRefType::get({ShapedType::kDynamic}, i32)},
      kPermuteIndexThreads, {spec.experts});
  Value counts = func.getWorkgroupAttributions()[0];
  IndexMath m{b};
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  PermuteChunk chunk(b, spec, func.getArgument(0));
  chunk.count(counts, tid);
  // This chunk's row of the [chunks, E] counts.
  ifThen(b, m.lt(tid, m.c(spec.experts)), [&](ImplicitLocOpBuilder &nb) {
    IndexMath n{nb};
    Value row =
        n.mul(gpu::BlockIdOp::create(nb, gpu::Dimension::x), n.c(spec.experts));
    memref::StoreOp::create(nb, n.load(counts, ValueRange{tid}),
                            func.getArgument(1), ValueRange{n.add(row, tid)});
  });
  gpu::ReturnOp::create(b);
  return func;
}

gpu::GPUFuncOp
mlir::moe::buildPermuteIndexKernel(OpBuilder &builder, Location loc,
                                   gpu::GPUModuleOp module,
                                   const PermuteKernelSpec &spec) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Type i32 = b.getI32Type(), offsetType = b.getIntegerType(spec.offsetBits);
  int64_t experts = spec.experts, threads = kPermuteIndexThreads,
          warps = threads / 32;
  // Static shared memory: per-expert totals, starts, and a [warp][expert]
  // table of the chunk's counts, then starts. Past 256 experts the i32
  // table would outgrow 48 KiB: it holds i16 counts, then starts relative
  // to the expert's start (both at most a chunk's ids).
  const bool narrow = experts > kPermuteWideExperts;
  Type cellType = narrow ? Type(b.getI16Type()) : i32;
  auto func = createKernel(
      b, spec.indexKernelName(),
      {dynamic2D(i32), MemRefType::get({ShapedType::kDynamic}, i32),
       MemRefType::get({ShapedType::kDynamic}, offsetType),
       dynamic2D(offsetType), MemRefType::get({ShapedType::kDynamic}, i32)},
      threads, {experts, experts, warps * experts},
      narrow ? SmallVector<Type>{i32, i32, cellType} : SmallVector<Type>{});
  // Table cells read as i32 and stored from i32.
  auto loadCell = [&](ImplicitLocOpBuilder &lb, Value table, Value at) {
    Value v = memref::LoadOp::create(lb, table, ValueRange{at});
    return narrow ? Value(arith::ExtUIOp::create(lb, i32, v)) : v;
  };
  auto storeCell = [&](ImplicitLocOpBuilder &sb, Value v, Value table,
                       Value at) {
    if (narrow)
      v = arith::TruncIOp::create(sb, cellType, v);
    memref::StoreOp::create(sb, v, table, ValueRange{at});
  };
  Value ids = func.getArgument(0), chunkCounts = func.getArgument(1),
        offsets = func.getArgument(2), slots = func.getArgument(3),
        sources = func.getArgument(4);
  Value counts = func.getWorkgroupAttributions()[0];
  Value starts = func.getWorkgroupAttributions()[1];
  Value table = func.getWorkgroupAttributions()[2];

  IndexMath m{b};
  int64_t k = spec.topK;
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value lane = arith::RemUIOp::create(b, tid, m.c(32));
  Value warp = arith::DivUIOp::create(b, tid, m.c(32));
  Value chunkIndex = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value numChunks = gpu::GridDimOp::create(b, gpu::Dimension::x);
  PermuteChunk chunk(b, spec, ids);
  Value total = chunk.total;
  Value zero32 = i32Constant(b, 0);
  Value firstCTA =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, chunkIndex, m.c(0));
  auto sync = [&](ImplicitLocOpBuilder &sb) { gpu::BarrierOp::create(sb); };
  // i32 counts as the offsets' type.
  auto widen = [&](ImplicitLocOpBuilder &wb, Value v) -> Value {
    return offsetType == i32 ? v : arith::ExtSIOp::create(wb, offsetType, v);
  };

  // 1. Stable ranks within this chunk. Warp w takes the chunk's ids
  // [w 32 R, (w + 1) 32 R) in R rounds of 32, ranking each round by
  // match.any on top of its running counts in table row w; the scan over
  // the table's rows (step 4) then orders the warps of the chunk.
  constexpr int64_t kRounds = kPermuteChunk / kPermuteIndexThreads;
  for (int64_t i = 0; i < warps * experts; i += threads) {
    Value at = m.add(tid, m.c(i));
    ifThen(b, m.lt(at, m.c(warps * experts)),
           [&](ImplicitLocOpBuilder &sb) { storeCell(sb, zero32, table, at); });
  }
  sync(b);
  Value full = i32Constant(b, -1);
  Value lower = NVVM::LaneMaskLtOp::create(b, i32);
  Value lane32 = arith::IndexCastOp::create(b, i32, lane);
  Value warpBase = m.add(chunk.base, m.mul(warp, m.c(32 * kRounds)));
  SmallVector<Value> flat, valid, inRange, cell, local;
  for (int64_t r = 0; r < kRounds; ++r) {
    Value f = m.add(warpBase, m.add(m.c(32 * r), lane));
    Value ok = m.lt(f, total);
    auto [e, in] = chunk.expertOf(b, f, ok);
    Value mask =
        NVVM::MatchSyncOp::create(b, i32, full, e, NVVM::MatchSyncKind::any);
    Value rank =
        LLVM::CtPopOp::create(b, arith::AndIOp::create(b, mask, lower));
    Value leader = arith::CmpIOp::create(
        b, arith::CmpIPredicate::eq,
        LLVM::CountTrailingZerosOp::create(b, mask, b.getBoolAttr(false)),
        lane32);
    Value at = m.add(m.mul(warp, m.c(experts)),
                     m.toIndex(arith::MaxSIOp::create(b, e, zero32)));
    // Every lane reads its expert's running count before the round's
    // leader adds the round's ids to it.
    Value prior = loadCell(b, table, at);
    NVVM::SyncWarpOp::create(b, full);
    ifThen(b, arith::AndIOp::create(b, leader, in),
           [&](ImplicitLocOpBuilder &sb) {
             storeCell(sb,
                       arith::AddIOp::create(sb, prior,
                                             LLVM::CtPopOp::create(sb, mask)),
                       table, at);
           });
    NVVM::SyncWarpOp::create(b, full);
    flat.push_back(f);
    valid.push_back(ok);
    inRange.push_back(in);
    cell.push_back(at);
    local.push_back(arith::AddIOp::create(b, prior, rank));
  }
  sync(b);

  // 2. Thread e sums expert e's counts over all chunks (its total) and over
  // the chunks before this one (where this chunk's ids of e start), 8
  // chunks' loads in flight at a time; of a single chunk, its warps' counts
  // in the table (the runtime launches no count kernel then).
  constexpr int64_t kUnroll = 8;
  Value oneChunk = m.lt(numChunks, m.c(2));
  ifThen(b, m.lt(tid, m.c(experts)), [&](ImplicitLocOpBuilder &nb) {
    auto single = scf::IfOp::create(nb, TypeRange{i32, i32}, oneChunk,
                                    /*withElseRegion=*/true);
    {
      ImplicitLocOpBuilder tb = ImplicitLocOpBuilder::atBlockBegin(
          nb.getLoc(), &single.getThenRegion().front(), nb.getListener());
      IndexMath o{tb};
      Value all = zero32;
      for (int64_t w = 0; w < warps; ++w)
        all = arith::AddIOp::create(
            tb, all, loadCell(tb, table, o.add(o.c(w * experts), tid)));
      scf::YieldOp::create(tb, ValueRange{all, zero32});
    }
    ImplicitLocOpBuilder eb = ImplicitLocOpBuilder::atBlockBegin(
        nb.getLoc(), &single.getElseRegion().front(), nb.getListener());
    auto sums = scf::ForOp::create(
        eb, IndexMath{eb}.c(0), numChunks, IndexMath{eb}.c(kUnroll),
        ValueRange{zero32, zero32},
        [&](OpBuilder &nested, Location l, Value c0, ValueRange iter) {
          ImplicitLocOpBuilder lb(l, nested);
          IndexMath o{lb};
          SmallVector<Value> loaded, in;
          for (int64_t u = 0; u < kUnroll; ++u) {
            Value c = o.add(c0, o.c(u));
            in.push_back(o.lt(c, numChunks));
            Value at = arith::SelectOp::create(lb, in.back(), c, o.c(0));
            loaded.push_back(o.load(
                chunkCounts, ValueRange{o.add(o.mul(at, o.c(experts)), tid)}));
          }
          Value all = iter[0], earlier = iter[1];
          for (int64_t u = 0; u < kUnroll; ++u) {
            Value c = o.add(c0, o.c(u));
            Value v = arith::SelectOp::create(lb, in[u], loaded[u], zero32);
            all = arith::AddIOp::create(lb, all, v);
            earlier = arith::AddIOp::create(
                lb, earlier,
                arith::SelectOp::create(lb, o.lt(c, chunkIndex), v, zero32));
          }
          scf::YieldOp::create(lb, ValueRange{all, earlier});
        });
    scf::YieldOp::create(eb, sums.getResults());
    memref::StoreOp::create(nb, single.getResult(0), counts, ValueRange{tid});
    memref::StoreOp::create(nb, single.getResult(1), starts, ValueRange{tid});
  });
  sync(b);

  // 3. Exclusive scan of the totals by warp 0 (lane l sums experts
  // [l P, l P + P)): each expert's first row, plus this chunk's place after
  // the earlier chunks' ids (in starts). CTA 0 writes the offsets.
  int64_t perLane = (experts + 31) / 32;
  ifThen(b, m.lt(tid, m.c(32)), [&](ImplicitLocOpBuilder &nb) {
    IndexMath n{nb};
    SmallVector<Value> own;
    Value local = zero32;
    for (int64_t i = 0; i < perLane; ++i) {
      Value e = n.add(n.mul(lane, n.c(perLane)), n.c(i));
      Value in = n.lt(e, n.c(experts));
      Value c = arith::SelectOp::create(
          nb, in,
          n.load(counts,
                 ValueRange{arith::MinUIOp::create(nb, e, n.c(experts - 1))}),
          zero32);
      own.push_back(c);
      local = arith::AddIOp::create(nb, local, c);
    }
    Value inclusive = local;
    for (int32_t d = 1; d < 32; d *= 2) {
      Value up =
          gpu::ShuffleOp::create(nb, inclusive, d, 32, gpu::ShuffleMode::UP)
              .getShuffleResult();
      inclusive = arith::SelectOp::create(
          nb,
          arith::CmpIOp::create(nb, arith::CmpIPredicate::sge, lane32,
                                i32Constant(nb, d)),
          arith::AddIOp::create(nb, inclusive, up), inclusive);
    }
    Value running = arith::SubIOp::create(nb, inclusive, local);
    for (int64_t i = 0; i < perLane; ++i) {
      Value e = n.add(n.mul(lane, n.c(perLane)), n.c(i));
      Value start = running;
      ifThen(nb, n.lt(e, n.c(experts)), [&](ImplicitLocOpBuilder &sb) {
        IndexMath s{sb};
        memref::StoreOp::create(
            sb, arith::AddIOp::create(sb, start, s.load(starts, ValueRange{e})),
            starts, ValueRange{e});
        ifThen(sb, firstCTA, [&](ImplicitLocOpBuilder &ob) {
          memref::StoreOp::create(ob, widen(ob, start), offsets, ValueRange{e});
        });
      });
      running = arith::AddIOp::create(nb, running, own[i]);
    }
    ifThen(nb,
           arith::AndIOp::create(
               nb, firstCTA,
               arith::CmpIOp::create(nb, arith::CmpIPredicate::eq, lane32,
                                     i32Constant(nb, 31))),
           [&](ImplicitLocOpBuilder &sb) {
             memref::StoreOp::create(sb, widen(sb, running), offsets,
                                     ValueRange{IndexMath{sb}.c(experts)});
           });
  });
  sync(b);

  // 4. Each expert's running start over the table's rows, then each id's
  // slot: its warp's start plus its rank.
  ifThen(b, m.lt(tid, m.c(experts)), [&](ImplicitLocOpBuilder &sb) {
    IndexMath s{sb};
    Value running = narrow ? zero32 : s.load(starts, ValueRange{tid});
    for (int64_t w = 0; w < warps; ++w) {
      Value at = s.add(s.c(w * experts), tid);
      Value c = loadCell(sb, table, at);
      storeCell(sb, running, table, at);
      running = arith::AddIOp::create(sb, running, c);
    }
  });
  sync(b);
  for (int64_t r = 0; r < kRounds; ++r) {
    ifThen(b, valid[r], [&](ImplicitLocOpBuilder &sb) {
      IndexMath s{sb};
      Value start = loadCell(sb, table, cell[r]);
      if (narrow) {
        Value expert = s.sub(cell[r], s.mul(warp, s.c(experts)));
        start = arith::AddIOp::create(sb, start,
                                      s.load(starts, ValueRange{expert}));
      }
      Value slot = arith::SelectOp::create(
          sb, inRange[r], arith::AddIOp::create(sb, start, local[r]),
          i32Constant(sb, -1));
      Value t = arith::DivUIOp::create(sb, flat[r], s.c(k));
      memref::StoreOp::create(
          sb, widen(sb, slot), slots,
          ValueRange{t, arith::RemUIOp::create(sb, flat[r], s.c(k))});
      ifThen(sb, inRange[r], [&](ImplicitLocOpBuilder &ib) {
        memref::StoreOp::create(ib, arith::IndexCastOp::create(ib, i32, t),
                                sources,
                                ValueRange{IndexMath{ib}.toIndex(slot)});
      });
    });
  }
  gpu::ReturnOp::create(b);
  return func;
}

gpu::GPUFuncOp
mlir::moe::buildPermuteGatherKernel(OpBuilder &builder, Location loc,
                                    gpu::GPUModuleOp module,
                                    const PermuteKernelSpec &spec) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Type bf16 = b.getBF16Type(), i32 = b.getI32Type();
  Type offsetType = b.getIntegerType(spec.offsetBits);
  SmallVector<Type> args{dynamic2D(bf16),
                         MemRefType::get({ShapedType::kDynamic}, i32),
                         MemRefType::get({ShapedType::kDynamic}, offsetType),
                         dynamic2D(spec.quantize ? Type(b.getI8Type()) : bf16)};
  if (spec.quantize)
    args.push_back(dynamic2D(b.getF32Type()));
  // The quantizing gather has twice the threads: each row's columns are
  // fewer steps (every step a load, a division per element and a store),
  // which is its latency at decode (DeepSeek-V3, H = 7168, T = 1: 8 µs
  // slower than the gather and the quantize kernel with 128).
  int64_t threads = spec.quantize ? 2 * kRoutingThreads : kRoutingThreads;
  gpu::GPUFuncOp func = createKernel(b, spec.gatherKernelName(), args, threads);
  Value tokens = func.getArgument(0), sources = func.getArgument(1),
        offsets = func.getArgument(2), rows = func.getArgument(3);
  Value rowsScale = spec.quantize ? func.getArgument(4) : Value();
  IndexMath m{b};
  constexpr int64_t kVector = 8;
  auto chunkType = VectorType::get({kVector}, bf16);
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value numRows = memref::DimOp::create(b, rows, m.c(0));
  Value hidden = memref::DimOp::create(b, rows, m.c(1));
  Value numExperts =
      m.sub(memref::DimOp::create(b, offsets, m.c(0)).getResult(), m.c(1));
  Value filled = m.toIndex(m.load(offsets, ValueRange{numExperts}));
  Value zeros = arith::ConstantOp::create(
      b, DenseElementsAttr::get(chunkType, b.getZeroAttr(bf16)));
  // One CTA per kGatherRows rows and column block of threads * 8 columns
  // (grid-stride over the pairs; decode has few rows and long ones): each
  // row is its token's row, or zeros past the filled rows (dropped ids);
  // 16 bytes per thread, the rows' loads issued before their stores.
  // Quantized, the 16 lanes of a [1, 128] group combine their maxima by
  // shuffles: every lane runs them (those past H read column 0 and store
  // nothing), and zero rows get what quantizing zeros gives (codes 0,
  // scale 1).
  constexpr int64_t kGroupLanes = 128 / kVector;
  Value lane16 = arith::RemUIOp::create(b, tid, m.c(kGroupLanes));
  Value groups = m.ceilDiv(numRows, kGatherRows);
  Value blocks = m.ceilDiv(hidden, threads * kVector);
  forEachGroupAndBlock(
      b, groups, blocks, threads * kVector, tid,
      [&](ImplicitLocOpBuilder &ib, Value group, Value col) {
        IndexMath c{ib};
        SmallVector<Value> row, exists, has, source;
        for (int64_t i = 0; i < kGatherRows; ++i) {
          row.push_back(c.add(c.mul(group, c.c(kGatherRows)), c.c(i)));
          exists.push_back(c.lt(row[i], numRows));
          has.push_back(c.lt(row[i], filled));
          // A row without a token reads token 0 (T >= 1) and stores zeros.
          source.push_back(arith::SelectOp::create(
              ib, has[i],
              c.toIndex(c.load(sources, ValueRange{arith::SelectOp::create(
                                            ib, has[i], row[i], c.c(0))})),
              c.c(0)));
        }
        Value inside = c.lt(col, hidden);
        Value loadCol =
            arith::SelectOp::create(ib, inside, col, c.c(0)).getResult();
        SmallVector<Value> store;
        for (int64_t i = 0; i < kGatherRows; ++i)
          store.push_back(arith::AndIOp::create(ib, exists[i], inside));
        SmallVector<Value> values;
        for (int64_t i = 0; i < kGatherRows; ++i)
          values.push_back(vector::LoadOp::create(
              ib, chunkType, tokens, ValueRange{source[i], loadCol},
              /*nontemporal=*/false, llvm::Align(16)));
        for (int64_t i = 0; i < kGatherRows; ++i) {
          Value v = arith::SelectOp::create(ib, has[i], values[i], zeros);
          // A [1, 32] block is 4 lanes' chunks (threads * 8 columns a CTA
          // from a multiple of 32; H a multiple of 32): all in or all out.
          if (spec.roundTrip)
            v = roundTripChunkMX(ib, v, 32 / kVector, spec.roundTrip);
          if (spec.quantize) {
            QuantizedChunk q =
                quantizeChunkE4M3(ib, bf16ChunkBits(ib, v), kGroupLanes);
            ifThen(ib, store[i], [&](ImplicitLocOpBuilder &sb) {
              Value codes = vector::BitCastOp::create(
                  sb, VectorType::get({kVector}, sb.getI8Type()), q.codes);
              storeQuantizedChunk(sb, codes, q.scale, rows, rowsScale, row[i],
                                  col, lane16);
            });
            continue;
          }
          ifThen(ib, store[i], [&](ImplicitLocOpBuilder &sb) {
            vector::StoreOp::create(sb, v, rows, ValueRange{row[i], col},
                                    /*nontemporal=*/false, llvm::Align(16));
          });
        }
      });
  gpu::ReturnOp::create(b);
  return func;
}

gpu::GPUFuncOp
mlir::moe::buildPermuteScatterKernel(OpBuilder &builder, Location loc,
                                     gpu::GPUModuleOp module,
                                     const PermuteKernelSpec &spec) {
  assert(spec.quantize && "the scatter stores e4m3 rows");
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Type bf16 = b.getBF16Type(), i8 = b.getI8Type(), f32 = b.getF32Type();
  Type offsetType = b.getIntegerType(spec.offsetBits);
  SmallVector<Type> args{dynamic2D(bf16), dynamic2D(offsetType),
                         MemRefType::get({ShapedType::kDynamic}, offsetType),
                         dynamic2D(i8), dynamic2D(f32)};
  // As many threads as the quantizing gather: the same column blocks.
  int64_t threads = 2 * kRoutingThreads;
  gpu::GPUFuncOp func =
      createKernel(b, spec.scatterKernelName(), args, threads);
  Value tokens = func.getArgument(0), slots = func.getArgument(1),
        offsets = func.getArgument(2), rows = func.getArgument(3),
        rowsScale = func.getArgument(4);
  IndexMath m{b};
  constexpr int64_t kVector = 8;
  constexpr int64_t kGroupLanes = 128 / kVector;
  auto chunkType = VectorType::get({kVector}, bf16);
  auto codesType = VectorType::get({kVector}, i8);
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value lane16 = arith::RemUIOp::create(b, tid, m.c(kGroupLanes));
  Value numTokens = memref::DimOp::create(b, tokens, m.c(0));
  Value hidden = memref::DimOp::create(b, tokens, m.c(1));
  Value numRows = memref::DimOp::create(b, rows, m.c(0));
  Value numExperts =
      m.sub(memref::DimOp::create(b, offsets, m.c(0)).getResult(), m.c(1));
  Value filled = m.toIndex(m.load(offsets, ValueRange{numExperts}));
  Value zeroCodes = arith::ConstantOp::create(
      b, DenseElementsAttr::get(codesType, b.getZeroAttr(i8)));
  Value one = arith::ConstantOp::create(b, b.getFloatAttr(f32, 1.0));
  // The loop over a token's k slots is unrolled (k is in the kernel's
  // name); the slots are read up front, their loads in flight together,
  // unless a CTA's kGatherRows * k of them would take too many registers.
  constexpr int64_t kMaxPreloadedSlots = 64;
  bool preloadSlots = kGatherRows * spec.topK <= kMaxPreloadedSlots;
  // One CTA per kGatherRows tokens and column block of threads * 8 columns
  // (grid-stride over the pairs): each token's 16-byte chunk is loaded and
  // quantized once (the 16 lanes of a [1, 128] group combine their maxima
  // by shuffles: every lane runs them), then stored to the rows its k slots
  // name (a dropped id's slot, -1, names none). The rows from offsets[E] on
  // (one per dropped id) are zero rows, codes 0 and scale 1, as quantizing
  // zeros gives: the pair's group zeroes its kGatherRows * k of them.
  Value groups = m.ceilDiv(numTokens, kGatherRows);
  Value blocks = m.ceilDiv(hidden, threads * kVector);
  forEachGroupAndBlock(
      b, groups, blocks, threads * kVector, tid,
      [&](ImplicitLocOpBuilder &ib, Value group, Value col) {
        IndexMath c{ib};
        Value inside = c.lt(col, hidden);
        Value loadCol =
            arith::SelectOp::create(ib, inside, col, c.c(0)).getResult();
        SmallVector<Value> token, has;
        for (int64_t i = 0; i < kGatherRows; ++i) {
          token.push_back(c.add(c.mul(group, c.c(kGatherRows)), c.c(i)));
          has.push_back(c.lt(token[i], numTokens));
        }
        // A missing token (past T) reads token 0 (T >= 1), stores nothing.
        auto tokenOrZero = [&](int64_t i) {
          return arith::SelectOp::create(ib, has[i], token[i], c.c(0))
              .getResult();
        };
        SmallVector<SmallVector<Value>> slot(kGatherRows);
        auto loadSlot = [&](ImplicitLocOpBuilder &lb, Value t, int64_t j) {
          IndexMath l{lb};
          return l.toIndex(l.load(slots, ValueRange{t, l.c(j)}));
        };
        if (preloadSlots)
          for (int64_t i = 0; i < kGatherRows; ++i) {
            Value t = tokenOrZero(i);
            for (int64_t j = 0; j < spec.topK; ++j)
              slot[i].push_back(loadSlot(ib, t, j));
          }
        SmallVector<Value> values;
        for (int64_t i = 0; i < kGatherRows; ++i)
          values.push_back(vector::LoadOp::create(
              ib, chunkType, tokens, ValueRange{tokenOrZero(i), loadCol},
              /*nontemporal=*/false, llvm::Align(16)));
        for (int64_t i = 0; i < kGatherRows; ++i) {
          QuantizedChunk q =
              quantizeChunkE4M3(ib, bf16ChunkBits(ib, values[i]), kGroupLanes);
          Value codes = vector::BitCastOp::create(ib, codesType, q.codes);
          ifThen(ib, arith::AndIOp::create(ib, has[i], inside),
                 [&](ImplicitLocOpBuilder &sb) {
                   IndexMath s{sb};
                   for (int64_t j = 0; j < spec.topK; ++j) {
                     Value row =
                         preloadSlots ? slot[i][j] : loadSlot(sb, token[i], j);
                     Value valid = arith::AndIOp::create(sb, s.le(s.c(0), row),
                                                         s.lt(row, numRows));
                     ifThen(sb, valid, [&](ImplicitLocOpBuilder &vb) {
                       storeQuantizedChunk(vb, codes, q.scale, rows, rowsScale,
                                           row, col, lane16);
                     });
                   }
                 });
        }
        Value perGroup = c.c(kGatherRows * spec.topK);
        Value zeroBegin = c.add(filled, c.mul(group, perGroup));
        Value zeroEnd =
            arith::MinSIOp::create(ib, c.add(zeroBegin, perGroup), numRows);
        ifThen(ib, inside, [&](ImplicitLocOpBuilder &sb) {
          scf::ForOp::create(
              sb, zeroBegin, zeroEnd, IndexMath{sb}.c(1), ValueRange{},
              [&](OpBuilder &rb, Location rl, Value row, ValueRange) {
                ImplicitLocOpBuilder lb(rl, rb);
                storeQuantizedChunk(lb, zeroCodes, one, rows, rowsScale, row,
                                    col, lane16);
                scf::YieldOp::create(lb);
              });
        });
      });
  gpu::ReturnOp::create(b);
  return func;
}
