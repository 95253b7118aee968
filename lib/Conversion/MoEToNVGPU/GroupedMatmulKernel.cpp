//===- GroupedMatmulKernel.cpp - sm_90a grouped GEMM kernel builder ------===//
//
// Builds the grouped GEMM kernel of docs/hopper-notes.md from upstream ops:
// a device-side tile scheduler over the expert offsets, TMA loads with
// 128-byte swizzle into `stages` shared-memory buffers completing on
// mbarriers, nvgpu.warpgroup.mma (bf16 -> f32) and an epilogue that stores
// only the rows of the tile's own expert.
//
//===----------------------------------------------------------------------===//

#include "GroupedMatmulKernel.h"
#include "KernelUtils.h"
#include "MoE/Conversion/Passes.h"
#include "MoE/Utils/FP8Codec.h"
#include "QuantizeKernel.h"
#include "TileScheduler.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::moe;

/// Columns of the bf16 staging tile each warpgroup's epilogue goes through.
static constexpr int64_t kStagingColumns = 64;
static constexpr int64_t kStagingBytes = 64 * kStagingColumns * 2;

/// Shared memory holds `stages` (rows tile, weights tile) pairs and, for
/// the normal form, a bf16 staging tile per warpgroup, so the next tile's
/// loads can overlap the epilogue. Swap-AB's epilogue reuses the stages for
/// its small f32 tile instead (more resident CTAs for decode).
int64_t GroupedMatmulTile::dynamicSharedBytes() const {
  return tileSharedBytes() + (widened() ? 2 * widenedStageBytes() : 0) +
         scaleStagingBytes();
}

/// What dynamicSharedBytes() holds before the MXFP8 scale buffers (last).
int64_t GroupedMatmulTile::tileSharedBytes() const {
  int64_t stageBytes = (tileM + tileN) * tileK * elementBytes();
  // A quantized output keeps the item's bf16 activations (and swap-AB its
  // f32 tile) apart: the next pass's loads are in the stages meanwhile.
  if (quantizeOut)
    return stages * stageBytes + activationTileBytes() +
           (swapAB ? 64 * accumulatorColumns() * 4 : 0);
  if (swapAB)
    return std::max(stages * stageBytes,
                    kSplit() * 64 * accumulatorColumns() * 4);
  return stages * stageBytes + warpgroups() * kStagingBytes;
}

std::string GroupedMatmulTile::kernelName(Type offsetType) const {
  std::string suffix = epilogue == Epilogue::SwiGLU     ? "_swiglu"
                       : epilogue == Epilogue::RowScale ? "_rowscale"
                                                        : "";
  // GPT-OSS's constants by their bits: kernels differ exactly when they do.
  if (gated() && activation == Activation::GptOss)
    suffix += "_gptoss_a" +
              llvm::utohexstr(llvm::bit_cast<uint32_t>(alpha), true) + "_l" +
              llvm::utohexstr(llvm::bit_cast<uint32_t>(limit), true);
  if (biasType)
    suffix += biasType.isBF16() ? "_biasbf16" : "_biasf32";
  if (quantizeOut)
    suffix += "_e4m3out";
  if (clusterSize() > 1)
    suffix += "_c" + std::to_string(clusterSize());
  if (specialized())
    suffix += "_ws";
  if (kSplit() > 1)
    suffix += "_k" + std::to_string(kSplit());
  return llvm::formatv("grouped_matmul_{7}_{0}x{1}x{2}_s{3}{4}{5}_off{6}",
                       tileM, tileN, tileK, stages, swapAB ? "_swapab" : "",
                       suffix, offsetType.getIntOrFloatBitWidth(),
                       widened() ? "mxfp8wide"
                       : mxfp8() ? "mxfp8"
                       : fp8()   ? "fp8block"
                                 : "bf16")
      .str();
}

/// One f32 output value of the epilogue from its accumulator value `v`
/// (and, gated, its up partner): + bias, the gated activation, * weight.
/// Absent parts are null.
static Value epilogueValue(ImplicitLocOpBuilder &b, const GroupedMatmulTile &t,
                           Value v, Value up, Value bias, Value upBias,
                           Value weight) {
  if (bias)
    v = arith::AddFOp::create(b, v, bias);
  if (t.gated()) {
    if (upBias)
      up = arith::AddFOp::create(b, up, upBias);
    v = t.activation == GroupedMatmulTile::Activation::GptOss
            ? gptOssGlu(b, v, up, t.alpha, t.limit)
            : siluTimes(b, v, up);
  }
  if (weight)
    v = arith::MulFOp::create(b, v, weight);
  return v;
}

/// biases[expert, column] in f32; column is clamped below `columns` (values
/// of columns past N are computed but never stored).
static Value loadBias(ImplicitLocOpBuilder &b, Value biases, Value expert,
                      Value column, Value columns) {
  IndexMath m{b};
  column = arith::MinSIOp::create(b, column, m.sub(columns, m.c(1)));
  Value v = m.load(biases, ValueRange{expert, column});
  return v.getType().isF32()
             ? v
             : arith::ExtFOp::create(b, b.getF32Type(), v).getResult();
}

namespace {

/// Where a thread's accumulator values lie. The wgmma D fragment: lane l of
/// the warpgroup's warp w holds rows l / 4 + 16 w + 8 i, columns
/// 8 j + 2 (l % 4) + {0, 1} as elements 4 j + 2 i + {0, 1} of the struct the
/// accumulator lowers to.
struct Fragment {
  Value quad; // l / 4: the row within 8 (fragment rows are 8 apart)
  Value row;  // l / 4 + 16 w, the row of element 0
  Value col;  // 2 (l % 4), the column of element 0
};

Fragment fragmentOf(ImplicitLocOpBuilder &b, Value tid) {
  IndexMath m{b};
  Value lane = arith::RemUIOp::create(b, tid, m.c(32));
  Value quad = arith::DivUIOp::create(b, lane, m.c(4));
  Value warpInGroup = arith::RemUIOp::create(
      b, arith::DivUIOp::create(b, tid, m.c(32)), m.c(4));
  return {quad, m.add(quad, m.mul(warpInGroup, m.c(16))),
          m.mul(arith::RemUIOp::create(b, lane, m.c(4)), m.c(2))};
}

/// Registers per thread of a warp-specialized kernel's producer and
/// consumer warpgroups after setmaxnreg (2 x 128 x consumer + 128 x producer
/// fit the 168 x 384 ptxas gives the CTA). MXFP8's consumers hold two wgmma
/// results besides the accumulator, block FP8's 192-column ones 2 x 96
/// values: 224 spilled. A 256-thread kernel (one consumer warpgroup) keeps
/// ptxas's count: up to 255 each already.
static std::optional<std::pair<int32_t, int32_t>>
specializedRegisters(const GroupedMatmulTile &t) {
  if (t.warpgroups() == 1)
    return std::nullopt;
  return t.mxfp8() || (t.fp8() && t.tileN > 128) ? std::pair{40, 232}
                                                 : std::pair{56, 224};
}

/// Token tiles per group of the L2-friendly launch order.
constexpr int64_t kSlotGroup = 8;

/// Types and constants of one kernel, derived from its tile shape.
struct KernelTypes {
  gpu::AddressSpaceAttr smem;
  nvgpu::TensorMapDescriptorType rowsMap, weightsMap;
  MemRefType rowsTile, rowsSliceTile, weightsLoadTile, weightsTile, outTile,
      stagingTile, activationTile, sharedBytes;
  nvgpu::MBarrierGroupType barriers;
  nvgpu::WarpgroupAccumulatorType accumulator;
  /// Widened MXFP8: a 64-column bf16 half of the token rows of a warpgroup
  /// and of the weights, their k16 wgmma descriptors, and tensor map types
  /// that only tell the descriptors the 128-byte swizzle.
  MemRefType wideRowsSlice, wideWeights;
  nvgpu::WarpgroupMatrixDescriptorType wideADesc, wideBDesc;
  nvgpu::TensorMapDescriptorType wideRowsMap, wideWeightsMap;
  /// The registers of one wgmma's result, {f32 x accumulator columns / 2}.
  LLVM::LLVMStructType products;
  nvgpu::WarpgroupMatrixDescriptorType mmaADesc, mmaBDesc;

  KernelTypes(MLIRContext *ctx, const GroupedMatmulTile &t) {
    Type bf16 = BFloat16Type::get(ctx), f32 = Float32Type::get(ctx);
    Type element = t.fp8() ? Type(Float8E4M3FNType::get(ctx)) : bf16;
    smem = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
    auto shared = [&](ArrayRef<int64_t> shape, Type element) {
      return MemRefType::get(shape, element, MemRefLayoutAttrInterface(), smem);
    };
    rowsTile = shared({t.tileM, t.tileK}, element);
    // Gated tiles load their gate and up halves as two boxes.
    weightsLoadTile =
        shared({1, t.gated() ? t.tileN / 2 : t.tileN, t.tileK}, element);
    weightsTile = shared({t.tileN, t.tileK}, element);
    int64_t accColumns = t.accumulatorColumns();
    outTile = shared({64, accColumns}, f32);
    stagingTile = shared({64, kStagingColumns}, bf16);
    activationTile =
        shared({t.activationRows(), GroupedMatmulTile::kOutGroup}, bf16);
    rowsSliceTile = shared({64, t.tileK}, element);
    sharedBytes = shared({t.dynamicSharedBytes()}, IntegerType::get(ctx, 8));
    auto tensorMap = [&](MemRefType box) {
      return nvgpu::TensorMapDescriptorType::get(
          ctx, box, nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
          nvgpu::TensorMapL2PromoKind::L2PROMO_NONE,
          nvgpu::TensorMapOOBKind::OOB_ZERO,
          nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
    };
    rowsMap = tensorMap(rowsTile);
    weightsMap = tensorMap(weightsLoadTile);
    // Warp-specialized: the stages' "full" mbarriers, then their "empty"
    // ones.
    barriers = nvgpu::MBarrierGroupType::get(
        ctx, smem, t.stages * (t.specialized() ? 2 : 1));
    accumulator = nvgpu::WarpgroupAccumulatorType::get(
        ctx, VectorType::get({64, accColumns}, f32));
    products = LLVM::LLVMStructType::getLiteral(
        ctx, SmallVector<Type>(accColumns / 2, f32));
    wideRowsSlice = shared({64, 64}, bf16);
    wideWeights = shared({t.tileN, 64}, bf16);
    wideRowsMap = tensorMap(wideRowsSlice);
    wideWeightsMap = tensorMap(wideWeights);
    wideADesc =
        nvgpu::WarpgroupMatrixDescriptorType::get(ctx, shared({64, 16}, bf16));
    wideBDesc = nvgpu::WarpgroupMatrixDescriptorType::get(
        ctx, shared({16, accColumns}, bf16));
    // One wgmma covers 32 bytes of K; its B slice is spelled [K][N] as the
    // verifier wants, though shared memory holds it K-major ([N][K]).
    mmaADesc = nvgpu::WarpgroupMatrixDescriptorType::get(
        ctx, shared({64, t.mmaK()}, element));
    mmaBDesc = nvgpu::WarpgroupMatrixDescriptorType::get(
        ctx, shared({t.mmaK(), accColumns}, element));
  }
};

} // namespace

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

gpu::GPUFuncOp mlir::moe::buildGroupedMatmulKernel(OpBuilder &builder,
                                                   Location loc,
                                                   gpu::GPUModuleOp module,
                                                   const GroupedMatmulTile &t,
                                                   Type offsetType) {
  MLIRContext *ctx = builder.getContext();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  KernelTypes ty(ctx, t);

  // A public, uninitialized global becomes `.extern .shared` dynamic shared
  // memory; gpu.dynamic_shared_memory would overlap the mbarriers in MLIR 22.
  StringRef smemName = "moe_dynamic_smem";
  auto smemGlobalType =
      MemRefType::get({0}, b.getI8Type(), MemRefLayoutAttrInterface(), ty.smem);
  if (!SymbolTable::lookupSymbolIn(module, smemName))
    memref::GlobalOp::create(b, b.getStringAttr(smemName), StringAttr(),
                             TypeAttr::get(smemGlobalType), Attribute(),
                             UnitAttr(), b.getI64IntegerAttr(1024));

  auto ptrType = LLVM::LLVMPointerType::get(ctx);
  auto offsetsType = MemRefType::get({ShapedType::kDynamic}, offsetType);
  auto outType = MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                                 t.quantizeOut ? Type(b.getI8Type())
                                               : Type(b.getBF16Type()));
  Type i32 = b.getI32Type();
  SmallVector<Type> argTypes{ptrType, ptrType, offsetsType, outType,
                             i32,     i32,     i32};
  bool rowScale = t.epilogue == GroupedMatmulTile::Epilogue::RowScale;
  if (t.fp8()) {
    // MXFP8 scales are UE8M0 bytes.
    Type scale = t.mxfp8() ? Type(b.getI8Type()) : Type(b.getF32Type());
    argTypes.push_back(
        MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, scale));
    argTypes.push_back(MemRefType::get(
        {ShapedType::kDynamic, ShapedType::kDynamic, ShapedType::kDynamic},
        scale));
  }
  if (t.quantizeOut)
    argTypes.push_back(MemRefType::get(
        {ShapedType::kDynamic, ShapedType::kDynamic}, b.getF32Type()));
  if (rowScale)
    argTypes.push_back(MemRefType::get({ShapedType::kDynamic}, b.getF32Type()));
  if (t.biasType)
    argTypes.push_back(MemRefType::get(
        {ShapedType::kDynamic, ShapedType::kDynamic}, t.biasType));
  auto funcType = b.getFunctionType(argTypes, {});
  auto func = gpu::GPUFuncOp::create(
      b, t.kernelName(offsetType), funcType,
      TypeRange{MemRefType::get({kCachedEnds}, i32, MemRefLayoutAttrInterface(),
                                ty.smem),
                MemRefType::get({kCachedEnds}, i32, MemRefLayoutAttrInterface(),
                                ty.smem)});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  int64_t threads = t.threads();
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({int32_t(threads), 1, 1}));
  int64_t cluster = t.clusterSize();
  if (cluster > 1)
    func.setKnownClusterSizeAttr(
        b.getDenseI32ArrayAttr({int32_t(cluster), 1, 1}));
  // The tensor maps travel by value in parameter space (see
  // docs/runtime-contract.md); moe-finalize-kernel-abi marks them so once
  // the function is an llvm.func, since gpu.func drops llvm.byval.
  func->setAttr(kTensorMapArgsAttr, b.getDenseI64ArrayAttr({0, 1}));
  for (unsigned arg : {0u, 1u})
    func.setArgAttr(arg, LLVM::LLVMDialect::getAlignAttrName(),
                    b.getI64IntegerAttr(64));

  Block *entry = &func.getBody().front();
  Value rowsMapPtr = entry->getArgument(0),
        weightsMapPtr = entry->getArgument(1);
  Value offsets = entry->getArgument(2), out = entry->getArgument(3);
  Value kArg = entry->getArgument(4);
  b.setInsertionPointToStart(entry);
  IndexMath m{b};
  Value rowsMin = m.toIndex(entry->getArgument(5));
  Value rowsMax = m.toIndex(entry->getArgument(6));
  unsigned nextArg = 7;
  Value rowsScales = t.fp8() ? entry->getArgument(nextArg++) : Value();
  Value weightsScales = t.fp8() ? entry->getArgument(nextArg++) : Value();
  Value outScales = t.quantizeOut ? entry->getArgument(nextArg++) : Value();
  Value rowScales = rowScale ? entry->getArgument(nextArg++) : Value();
  Value biases = t.biasType ? entry->getArgument(nextArg++) : Value();

  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value warpgroup = arith::DivUIOp::create(b, tid, m.c(128));
  // Clustered: this CTA's half of each work item; rank 0 loads the rows.
  Value rank = m.c(0);
  if (cluster > 1)
    rank = arith::IndexCastOp::create(
        b, b.getIndexType(),
        NVVM::ClusterId::create(b, b.getI32Type()).getResult());
  // Frees stages for refills: a CTA barrier, or a cluster barrier when the
  // peer's multicast refills this CTA's stages too.
  auto syncStages = [&](ImplicitLocOpBuilder &nb) {
    if (cluster == 1) {
      gpu::BarrierOp::create(nb);
      return;
    }
    NVVM::ClusterArriveOp::create(nb, nb.getUnitAttr());
    NVVM::ClusterWaitOp::create(nb, nb.getUnitAttr());
  };
  Value numExperts =
      m.sub(memref::DimOp::create(b, offsets, m.c(0)).getResult(), m.c(1));
  Value numRows = memref::DimOp::create(b, out, m.c(0));
  Value numCols = memref::DimOp::create(b, out, m.c(1));
  int64_t tileCols = t.outputColumns();
  // Clustered: a work item's columns are split between the cluster's CTAs.
  Value numColTiles = m.ceilDiv(numCols, t.itemColumns() * cluster);
  Value numK = m.ceilDiv(m.toIndex(kArg), t.tileK);
  // A work item's K steps: those of each of its passes, back to back.
  Value numSteps = m.mul(numK, m.c(t.passes()));

  Value rowsMap = UnrealizedConversionCastOp::create(b, ty.rowsMap, rowsMapPtr)
                      .getResult(0);
  Value weightsMap =
      UnrealizedConversionCastOp::create(b, ty.weightsMap, weightsMapPtr)
          .getResult(0);
  Value smemRaw = memref::GetGlobalOp::create(b, smemGlobalType, smemName);
  Value smem = memref::ReinterpretCastOp::create(b, ty.sharedBytes, smemRaw, 0,
                                                 {t.dynamicSharedBytes()}, {1});

  int64_t rowsBytes = t.tileM * t.tileK * t.elementBytes();
  int64_t stageBytes = rowsBytes + t.tileN * t.tileK * t.elementBytes();
  Value barriers = nvgpu::MBarrierCreateOp::create(b, ty.barriers);
  Value leader =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tid, m.c(0));
  ifThen(b, leader, [&](ImplicitLocOpBuilder &nb) {
    IndexMath n{nb};
    // The issuer's expect-tx arrival; warp-specialized MXFP8, also every
    // producer thread's once it stored the step's scales.
    int64_t fullArrivals = t.specialized() && t.mxfp8() ? 1 + 128 : 1;
    for (int64_t s = 0; s < t.stages; ++s)
      nvgpu::MBarrierInitOp::create(nb, barriers, n.c(fullArrivals), n.c(s),
                                    Value());
    // Every consumer thread arrives on an empty mbarrier.
    for (int64_t s = 0; s < t.stages && t.specialized(); ++s)
      nvgpu::MBarrierInitOp::create(nb, barriers, n.c(128 * t.warpgroups()),
                                    n.c(t.stages + s), Value());
    NVVM::FenceMbarrierInitOp::create(nb);
    nvgpu::TmaPrefetchOp::create(nb, rowsMap, Value());
    nvgpu::TmaPrefetchOp::create(nb, weightsMap, Value());
  });
  // The set-up above, and the tile table, overlap the previous kernel: the
  // offsets are complete when this kernel can launch (contract §3.6: in a
  // layer they are written two kernels back, and every kernel of ours lets
  // the next launch only after its own wait), the rows are the previous
  // kernel's output. Decode layers 1-5 % faster. A GEMM lets the next
  // kernel launch only when it ends: launched early, the next kernel's
  // CTAs would wait on the SMs beside this one's for all of its run (3.5 %
  // slower layers at T = 8192; from each CTA's last work item still 2-3 %).
  TileScheduler scheduler =
      makeTileScheduler(b, offsets, func.getWorkgroupAttributions()[0],
                        func.getWorkgroupAttributions()[1], numExperts, numRows,
                        rowsMin, rowsMax, tid, t.tileM);
  scheduler.cacheOffsets(b, threads);
  // Clustered, also: the peer's mbarriers are initialized before the first
  // multicast lands on them.
  syncStages(b);
  scheduler.buildTable(b, threads);
  waitForPreviousKernel(b, /*launchDependents=*/false);

  // Persistent CTAs: the token tiles of the eligible experts (counted on
  // the device) times the column tiles are the work items; CTA c takes
  // items c, c + gridDim.x, ... A kernel with no eligible expert costs one
  // lookup per CTA.
  Value numTiles = scheduler.countTiles(b);
  Value numWork = m.mul(numTiles, numColTiles);
  // The work takers: CTAs, or clusters.
  Value numCTAs = arith::DivUIOp::create(
      b, gpu::GridDimOp::create(b, gpu::Dimension::x), m.c(cluster));

  // Where a work item lies. L2-friendly order: work items run in groups of
  // kSlotGroup token tiles, all column tiles of a group before the next,
  // token tiles fastest inside it. A group's token rows stay in L2 across
  // the column tiles, and the token tiles of one expert meet each weights
  // tile back to back. Items past the last describe the last (never run).
  auto describe = [&](ImplicitLocOpBuilder &nb, Value work) -> WorkItem {
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
            n.add(found.rowBegin, n.mul(found.mTile, n.c(t.tileM))),
            found.rowEnd,
            n.add(n.mul(nTile, n.c(t.itemColumns() * cluster)),
                  n.mul(rank, n.c(t.itemColumns())))};
  };

  // The leader loads step `itemStep` of `w` (K step itemStep % numK of
  // pass itemStep / numK) into `stage` (coordinates innermost first: rows
  // (k, row), weights (k, n, expert)).
  auto issueLoad = [&](ImplicitLocOpBuilder &nb, const WorkItem &w, Value stage,
                       Value itemStep) {
    IndexMath n{nb};
    Value kStep = itemStep, col = w.col0;
    if (t.passes() > 1) {
      kStep = arith::RemUIOp::create(nb, itemStep, numK);
      col = n.add(col, n.mul(arith::DivUIOp::create(nb, itemStep, numK),
                             n.c(tileCols)));
    }
    Value base = n.mul(stage, n.c(stageBytes));
    Value rowsDst = n.view(smem, base, ty.rowsTile);
    Value weightsDst =
        n.view(smem, n.add(base, n.c(rowsBytes)), ty.weightsLoadTile);
    Value k0 = n.mul(kStep, n.c(t.tileK));
    nvgpu::MBarrierArriveExpectTxOp::create(nb, barriers, n.c(stageBytes),
                                            stage, Value());
    if (cluster == 1) {
      nvgpu::TmaAsyncLoadOp::create(nb, rowsDst, barriers, rowsMap,
                                    ValueRange{k0, w.row0}, stage, Value(),
                                    Value());
    } else {
      // Into the same stage of every CTA of the cluster, completing on each
      // one's mbarrier (each expects the whole stage).
      Value loadsRows =
          arith::CmpIOp::create(nb, arith::CmpIPredicate::eq, rank, n.c(0));
      ifThen(nb, loadsRows, [&](ImplicitLocOpBuilder &rb) {
        Value everyCTA = arith::ConstantIntOp::create(
            rb, rb.getI16Type(), (int64_t(1) << cluster) - 1);
        nvgpu::TmaAsyncLoadOp::create(rb, rowsDst, barriers, rowsMap,
                                      ValueRange{k0, w.row0}, stage, everyCTA,
                                      Value());
      });
    }
    nvgpu::TmaAsyncLoadOp::create(nb, weightsDst, barriers, weightsMap,
                                  ValueRange{k0, col, w.expert}, stage, Value(),
                                  Value());
    // Gated: the up rows of the same columns lie N / 2 = numCols further;
    // they fill the tile's second half, so accumulator column c + tileN / 2
    // is the up partner of gate column c.
    if (t.gated()) {
      Value upDst = n.view(
          smem,
          n.add(base, n.c(rowsBytes + tileCols * t.tileK * t.elementBytes())),
          ty.weightsLoadTile);
      nvgpu::TmaAsyncLoadOp::create(
          nb, upDst, barriers, weightsMap,
          ValueRange{k0, n.add(col, numCols), w.expert}, stage, Value(),
          Value());
    }
  };
  // A pipeline step's stage (step % stages) or round (step / stages). For a
  // stage count that is not a power of two in 32 bits: the 64-bit division
  // by a constant spilled the MXFP8 consumers (~13x slower at 3 or 5).
  auto stageDiv = [&](ImplicitLocOpBuilder &nb, Value step,
                      bool round) -> Value {
    IndexMath n{nb};
    if (llvm::isPowerOf2_64(t.stages))
      return round
                 ? arith::DivUIOp::create(nb, step, n.c(t.stages)).getResult()
                 : arith::RemUIOp::create(nb, step, n.c(t.stages)).getResult();
    Type i32 = nb.getI32Type();
    Value narrow = arith::IndexCastUIOp::create(nb, i32, step);
    Value stages = arith::ConstantIntOp::create(nb, i32, t.stages);
    Value v = round ? arith::DivUIOp::create(nb, narrow, stages).getResult()
                    : arith::RemUIOp::create(nb, narrow, stages).getResult();
    return arith::IndexCastUIOp::create(nb, nb.getIndexType(), v);
  };
  auto stageOf = [&](ImplicitLocOpBuilder &nb, Value step) -> Value {
    return stageDiv(nb, step, /*round=*/false);
  };
  // Waits until pipeline step `step`'s loads have landed in its stage.
  auto waitLoaded = [&](ImplicitLocOpBuilder &nb, Value step) {
    IndexMath n{nb};
    Value round = stageDiv(nb, step, /*round=*/true);
    Value parity = arith::IndexCastOp::create(
        nb, nb.getI1Type(), arith::RemSIOp::create(nb, round, n.c(2)));
    nvgpu::MBarrierTryWaitParityOp::create(nb, barriers, parity, n.c(10000000),
                                           stageOf(nb, step));
  };
  // Warp-specialized: this consumer thread is done with pipeline step
  // `step`'s stage (its wgmma retired).
  auto releaseStage = [&](ImplicitLocOpBuilder &nb, Value step) {
    IndexMath n{nb};
    nvgpu::MBarrierArriveOp::create(nb, barriers,
                                    n.add(stageOf(nb, step), n.c(t.stages)));
  };
  // Columns [kk, kk + width) of the first `rows` rows of a K-major tile: a
  // wgmma operand.
  auto kSlice = [](ImplicitLocOpBuilder &nb, Value tile, int64_t rows,
                   int64_t kk, int64_t width) -> Value {
    return memref::SubViewOp::create(
        nb, tile,
        ArrayRef<OpFoldResult>{nb.getIndexAttr(0), nb.getIndexAttr(kk)},
        ArrayRef<OpFoldResult>{nb.getIndexAttr(rows), nb.getIndexAttr(width)},
        ArrayRef<OpFoldResult>{nb.getIndexAttr(1), nb.getIndexAttr(1)});
  };
  // The first `stages` steps of `w`, pipeline steps from `stepBase` on.
  auto issuePrologue = [&](ImplicitLocOpBuilder &nb, const WorkItem &w,
                           Value stepBase, Value active) {
    for (int64_t s = 0; s < t.stages; ++s) {
      IndexMath n{nb};
      Value issue =
          arith::AndIOp::create(nb, arith::AndIOp::create(nb, leader, active),
                                n.lt(n.c(s), numSteps));
      ifThen(nb, issue, [&](ImplicitLocOpBuilder &ib) {
        IndexMath i{ib};
        issueLoad(ib, w, stageOf(ib, i.add(stepBase, i.c(s))), i.c(s));
      });
    }
  };

  // MXFP8: the f32 scales of one K step in shared memory: buffer (step % 2)
  // x staging row (the tile's tileN weight rows, then its tileM token rows)
  // x block; warp-specialized, the step's stage x block x staging row (a
  // fragment's two adjacent columns are one 8-byte load). Unspecialized,
  // the consumers load the next step's codes while this step multiplies,
  // then decode and store them into the other buffer before the step's
  // barrier; specialized, the producer stages them with the step's loads.
  int64_t scaleBlocks = t.scaleBlocksPerStep();
  int64_t scaleRows = t.tileN + t.tileM;
  int64_t widenedOffset = t.tileSharedBytes();
  int64_t scaleBuffersOffset =
      widenedOffset + (t.widened() ? 2 * t.widenedStageBytes() : 0);
  bool blockMajorScales = t.specialized();
  Value scaleBuffers;
  if (t.mxfp8()) {
    SmallVector<int64_t, 3> shape{t.scaleBuffers(), scaleRows, scaleBlocks};
    if (blockMajorScales)
      std::swap(shape[1], shape[2]);
    scaleBuffers =
        m.view(smem, m.c(scaleBuffersOffset),
               MemRefType::get(shape, b.getF32Type(),
                               MemRefLayoutAttrInterface(), ty.smem));
  }
  // MXFP8: the code tensors' addresses, and whether every row of both
  // starts on a scaleBlocks-byte boundary (strides and bases; checked once).
  struct CodeTensor {
    Value base;
    SmallVector<Value> strides;
  };
  DenseMap<Value, CodeTensor> codeTensors;
  Value scaleWordsAligned;
  if (t.mxfp8()) {
    Value aligned = arith::ConstantIntOp::create(b, b.getI1Type(), 1);
    auto divides = [&](Value v) {
      return arith::CmpIOp::create(
          b, arith::CmpIPredicate::eq,
          arith::RemUIOp::create(b, v, m.c(scaleBlocks)), m.c(0));
    };
    for (Value scales : {rowsScales, weightsScales}) {
      auto meta = memref::ExtractStridedMetadataOp::create(b, scales);
      Value base = m.add(
          memref::ExtractAlignedPointerAsIndexOp::create(b, scales).getResult(),
          meta.getOffset());
      aligned = arith::AndIOp::create(b, aligned, divides(base));
      for (Value stride : meta.getStrides().drop_back())
        aligned = arith::AndIOp::create(b, aligned, divides(stride));
      codeTensors[scales] =
          CodeTensor{base, SmallVector<Value>(meta.getStrides())};
    }
    scaleWordsAligned = aligned;
  }
  // The codes of K step kStep of item `w` (weight rows from colBase) that
  // loader `loader` of `loaders` stages: [round][block], staging row
  // loader + round * loaders (rounds past the last row load a clamped one
  // and store none).
  auto loadScaleCodes = [&](ImplicitLocOpBuilder &nb, const WorkItem &w,
                            Value kStep, Value colBase, Value loader,
                            int64_t loaders) {
    IndexMath n{nb};
    Value lastBlock = n.sub(
        memref::DimOp::create(nb, rowsScales, n.c(1)).getResult(), n.c(1));
    Value lastToken = n.sub(
        memref::DimOp::create(nb, rowsScales, n.c(0)).getResult(), n.c(1));
    Value lastWeight = n.sub(
        memref::DimOp::create(nb, weightsScales, n.c(1)).getResult(), n.c(1));
    // K past the end is zero-filled by the TMA: any finite scale will do.
    auto block = [&](ImplicitLocOpBuilder &lb, int64_t j) {
      IndexMath l{lb};
      return arith::MinSIOp::create(
          lb, l.add(l.mul(kStep, l.c(scaleBlocks)), l.c(j)), lastBlock);
    };
    auto byteCodes = [&](ImplicitLocOpBuilder &lb, Value scales,
                         ArrayRef<Value> rowIndices) {
      IndexMath v{lb};
      SmallVector<Value> loaded;
      for (int64_t j = 0; j < scaleBlocks; ++j) {
        SmallVector<Value> at(rowIndices);
        at.push_back(block(lb, j));
        loaded.push_back(v.load(scales, at));
      }
      return loaded;
    };
    // The 128-row form's producer loads a row's codes of the step as one
    // word when the word is aligned (every row stride and base a multiple
    // of scaleBlocks bytes, the step's blocks all inside the row): a sector
    // per row instead of per byte (layers 1.05-1.23x at T = 8192). The
    // other forms keep byte loads: words measured 0.98-1.01x there (faster
    // gate-ups, slower downs).
    bool words = t.specialized() && t.warpgroups() == 2;
    Value lastOfStep =
        n.add(n.mul(kStep, n.c(scaleBlocks)), n.c(scaleBlocks - 1));
    Value wordLoads = words ? arith::AndIOp::create(nb, scaleWordsAligned,
                                                    n.le(lastOfStep, lastBlock))
                                  .getResult()
                            : Value();
    auto rowCodes = [&](ImplicitLocOpBuilder &lb, Value scales,
                        SmallVector<Value> rowIndices) {
      if (!words)
        return byteCodes(lb, scales, rowIndices);
      auto ifOp = scf::IfOp::create(
          lb, SmallVector<Type>(scaleBlocks, lb.getI8Type()), wordLoads,
          /*withElseRegion=*/true);
      {
        ImplicitLocOpBuilder tb =
            ImplicitLocOpBuilder::atBlockBegin(lb.getLoc(), ifOp.thenBlock());
        IndexMath v{tb};
        // An integer load through the address: LLVM would sink a vector of
        // bytes and the else branch's bytes into one set of byte loads.
        const CodeTensor &codes = codeTensors.at(scales);
        Value address =
            v.add(codes.base, v.mul(kStep, v.c(scaleBlocks))); // inner stride 1
        for (auto [index, stride] : llvm::zip(rowIndices, codes.strides))
          address = v.add(address, v.mul(index, stride));
        Value pointer = LLVM::IntToPtrOp::create(
            tb, LLVM::LLVMPointerType::get(ctx, /*global=*/1),
            arith::IndexCastOp::create(tb, tb.getI64Type(), address)
                .getResult());
        Type wordType = tb.getIntegerType(8 * scaleBlocks);
        Value word = LLVM::LoadOp::create(tb, wordType, pointer, scaleBlocks);
        SmallVector<Value> loaded;
        for (int64_t j = 0; j < scaleBlocks; ++j)
          loaded.push_back(arith::TruncIOp::create(
              tb, tb.getI8Type(),
              arith::ShRUIOp::create(
                  tb, word,
                  arith::ConstantIntOp::create(tb, wordType, 8 * j))));
        scf::YieldOp::create(tb, loaded);
      }
      ImplicitLocOpBuilder eb =
          ImplicitLocOpBuilder::atBlockBegin(lb.getLoc(), ifOp.elseBlock());
      scf::YieldOp::create(eb, byteCodes(eb, scales, rowIndices));
      return SmallVector<Value>(ifOp.getResults());
    };
    SmallVector<Value> codes;
    SmallVector<Type> i8s(scaleBlocks, nb.getI8Type());
    for (int64_t r0 = 0; r0 < scaleRows; r0 += loaders) {
      Value i = arith::MinSIOp::create(nb, n.add(loader, n.c(r0)),
                                       n.c(scaleRows - 1));
      auto ifOp = scf::IfOp::create(nb, i8s, n.lt(i, n.c(t.tileN)),
                                    /*withElseRegion=*/true);
      {
        ImplicitLocOpBuilder tb =
            ImplicitLocOpBuilder::atBlockBegin(nb.getLoc(), ifOp.thenBlock());
        IndexMath v{tb};
        // Gated: the second half of the tile are the up rows, N / 2 further.
        Value row = v.add(colBase, i);
        if (t.gated()) {
          Value half = v.c(t.tileN / 2);
          row = arith::SelectOp::create(tb, v.lt(i, half), row,
                                        v.add(v.sub(row, half), numCols));
        }
        row = arith::MinSIOp::create(tb, row, lastWeight);
        scf::YieldOp::create(tb, rowCodes(tb, weightsScales, {w.expert, row}));
      }
      {
        ImplicitLocOpBuilder eb =
            ImplicitLocOpBuilder::atBlockBegin(nb.getLoc(), ifOp.elseBlock());
        IndexMath v{eb};
        Value token = arith::MinSIOp::create(
            eb, v.add(w.row0, v.sub(i, v.c(t.tileN))), lastToken);
        scf::YieldOp::create(eb, rowCodes(eb, rowsScales, {token}));
      }
      llvm::append_range(codes, ifOp.getResults());
    }
    return codes;
  };
  auto storeScaleCodes = [&](ImplicitLocOpBuilder &nb, ArrayRef<Value> codes,
                             Value buffer, Value loader, int64_t loaders) {
    IndexMath n{nb};
    for (int64_t r0 = 0, round = 0; r0 < scaleRows; r0 += loaders, ++round) {
      Value i = n.add(loader, n.c(r0));
      ifThen(nb, n.lt(i, n.c(scaleRows)), [&](ImplicitLocOpBuilder &sb) {
        IndexMath v{sb};
        SmallVector<Value> decoded;
        for (int64_t j = 0; j < scaleBlocks; ++j)
          decoded.push_back(decodeE8M0(sb, codes[round * scaleBlocks + j]));
        // Block-major: consecutive loaders store consecutive words.
        if (blockMajorScales) {
          for (int64_t j = 0; j < scaleBlocks; ++j)
            memref::StoreOp::create(sb, decoded[j], scaleBuffers,
                                    ValueRange{buffer, v.c(j), i});
          return;
        }
        // A row's blocks side by side: one 16-byte store, one load.
        vector::StoreOp::create(
            sb,
            vector::FromElementsOp::create(
                sb, VectorType::get({scaleBlocks}, sb.getF32Type()), decoded),
            scaleBuffers, ValueRange{buffer, i, v.c(0)},
            /*nontemporal=*/false, llvm::Align(16));
      });
    }
  };

  Value firstWork = arith::DivUIOp::create(
      b, gpu::BlockIdOp::create(b, gpu::Dimension::x), m.c(cluster));
  // Warp-specialized: the last warpgroup loads every step of the CTA's
  // items (pipeline step p into stage p % stages once its previous contents
  // were released), the others consume them below.
  bool specialized = t.specialized();
  Operation *roles = nullptr;
  if (specialized) {
    Value isProducer = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                             warpgroup, m.c(t.warpgroups()));
    auto ifOp = scf::IfOp::create(b, TypeRange{}, isProducer,
                                  /*withElseRegion=*/true);
    roles = ifOp;
    ImplicitLocOpBuilder pb =
        ImplicitLocOpBuilder::atBlockTerminator(b.getLoc(), ifOp.thenBlock());
    IndexMath p{pb};
    if (auto registers = specializedRegisters(t))
      NVVM::SetMaxRegisterOp::create(pb, registers->first,
                                     NVVM::SetMaxRegisterAction::decrease);
    Value issuer = arith::CmpIOp::create(pb, arith::CmpIPredicate::eq, tid,
                                         p.c(128 * t.warpgroups()));
    SmallVector<Type> carried(2, pb.getIndexType());
    auto items =
        scf::WhileOp::create(pb, carried, ValueRange{firstWork, p.c(0)});
    Location l = pb.getLoc();
    Block *cond = pb.createBlock(&items.getBefore(), {}, carried, {l, l});
    scf::ConditionOp::create(pb, p.lt(cond->getArgument(0), numWork),
                             cond->getArguments());
    Block *body = pb.createBlock(&items.getAfter(), {}, carried, {l, l});
    Value work = body->getArgument(0);
    // All its threads look the item up: the scan past the tile table needs
    // whole warps.
    WorkItem w = describe(pb, work);
    auto steps = scf::ForOp::create(
        pb, p.c(0), numSteps, p.c(1), ValueRange{body->getArgument(1)},
        [&](OpBuilder &nested, Location nl, Value itemStep, ValueRange iter) {
          ImplicitLocOpBuilder sb(nl, nested);
          IndexMath n{sb};
          Value step = iter[0];
          Value stage = stageOf(sb, step);
          // MXFP8: the step's scale codes, loaded while the stage drains.
          Value loader = n.sub(tid, n.c(128 * t.warpgroups()));
          SmallVector<Value> codes;
          if (t.mxfp8()) {
            Value kStep = arith::RemUIOp::create(sb, itemStep, numK);
            Value colBase =
                n.add(w.col0, n.mul(arith::DivUIOp::create(sb, itemStep, numK),
                                    n.c(tileCols)));
            codes = loadScaleCodes(sb, w, kStep, colBase, loader, 128);
          }
          Value use = stageDiv(sb, step, /*round=*/true);
          ifThen(sb, n.lt(n.c(0), use), [&](ImplicitLocOpBuilder &wb) {
            IndexMath v{wb};
            Value parity = arith::IndexCastOp::create(
                wb, wb.getI1Type(),
                arith::RemUIOp::create(wb, v.sub(use, v.c(1)), v.c(2)));
            nvgpu::MBarrierTryWaitParityOp::create(wb, barriers, parity,
                                                   v.c(10000000),
                                                   v.add(stage, v.c(t.stages)));
          });
          ifThen(sb, issuer, [&](ImplicitLocOpBuilder &ib) {
            issueLoad(ib, w, stage, itemStep);
          });
          // The arrival releases the scales to the consumers' wait.
          if (t.mxfp8()) {
            storeScaleCodes(sb, codes, stage, loader, 128);
            nvgpu::MBarrierArriveOp::create(sb, barriers, stage);
          }
          scf::YieldOp::create(sb, ValueRange{n.add(step, n.c(1))});
        });
    pb.setInsertionPointToEnd(body);
    scf::YieldOp::create(pb,
                         ValueRange{p.add(work, numCTAs), steps.getResult(0)});
    b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    if (auto registers = specializedRegisters(t))
      NVVM::SetMaxRegisterOp::create(b, registers->second,
                                     NVVM::SetMaxRegisterAction::increase);
  }
  WorkItem first = describe(b, firstWork);
  if (!specialized)
    issuePrologue(b, first, m.c(0), m.lt(firstWork, numWork));

  Type indexType = b.getIndexType();
  SmallVector<Type> carried(6, indexType);
  SmallVector<Value> initial{firstWork,  m.c(0),       first.expert,
                             first.row0, first.rowEnd, first.col0};
  auto loop = scf::WhileOp::create(b, carried, initial);
  Location loc0 = b.getLoc();
  SmallVector<Location> locs(carried.size(), loc0);
  Block *before = b.createBlock(&loop.getBefore(), {}, carried, locs);
  scf::ConditionOp::create(b, m.lt(before->getArgument(0), numWork),
                           before->getArguments());
  Block *after = b.createBlock(&loop.getAfter(), {}, carried, locs);
  Value work = after->getArgument(0);
  // Pipeline steps of the tiles this CTA did before: stage and mbarrier
  // phase continue across tiles.
  Value stepBase = after->getArgument(1);
  WorkItem current{after->getArgument(2), after->getArgument(3),
                   after->getArgument(4), after->getArgument(5)};
  // The next item is looked up while this one's first loads are in flight.
  Value nextWork = m.add(work, numCTAs);
  WorkItem next = describe(b, nextWork);
  Value row0 = current.row0, col0 = current.col0;

  // acc + part * scales, element by element of the thread's fragment.
  auto addScaled = [&](ImplicitLocOpBuilder &nb, Value acc, Value part,
                       int64_t count,
                       function_ref<Value(int64_t)> scaleOf) -> Value {
    auto regsType = LLVM::LLVMStructType::getLiteral(
        ctx, {LLVM::LLVMStructType::getLiteral(
                 ctx, SmallVector<Type>(count, nb.getF32Type()))});
    auto regs = [&](Value v) {
      return UnrealizedConversionCastOp::create(nb, regsType, v).getResult(0);
    };
    // `part` is an accumulator, or (MXFP8) a wgmma's own register struct.
    bool bare = part.getType() == ty.products;
    Value sum = regs(acc), products = bare ? part : regs(part);
    for (int64_t e = 0; e < count; ++e) {
      int64_t at[] = {0, e};
      Value product = bare ? LLVM::ExtractValueOp::create(nb, products, e)
                           : LLVM::ExtractValueOp::create(nb, products, at);
      Value v = LLVM::FMAOp::create(nb, product, scaleOf(e),
                                    LLVM::ExtractValueOp::create(nb, sum, at));
      sum = LLVM::InsertValueOp::create(nb, sum, v, at);
    }
    return UnrealizedConversionCastOp::create(nb, ty.accumulator, sum)
        .getResult(0);
  };

  // Block FP8: adds a K step's products `part` to `acc` times the scales of
  // their rows and weights (see Fragment for which values a thread holds).
  // The scale loads are issued before the wait, so they overlap the step's
  // wgmma.
  auto promote = [&](ImplicitLocOpBuilder &nb, Value acc, Value part,
                     Value kStep, Value colBase) -> Value {
    IndexMath n{nb};
    Fragment frag = fragmentOf(nb, tid);
    Value fragRow = frag.row, fragCol = frag.col;
    Value lastRow = n.sub(numRows, n.c(1));
    Value lastBlock = n.sub(
        memref::DimOp::create(nb, weightsScales, n.c(1)).getResult(), n.c(1));
    // Rows and blocks past the end are clamped: their values are computed
    // but never stored.
    auto rowsScale = [&](Value row) {
      row = arith::MinSIOp::create(nb, row, lastRow);
      return n.load(rowsScales, ValueRange{row, kStep});
    };
    // The weights' scale of weight row `local` of the tile; gated, its
    // second half are the up rows N / 2 = numCols further.
    auto weightsScale = [&](Value local) {
      Value row = n.add(colBase, local);
      if (t.gated()) {
        Value half = n.c(t.tileN / 2);
        Value up =
            arith::CmpIOp::create(nb, arith::CmpIPredicate::sge, local, half);
        row = arith::SelectOp::create(nb, up, n.add(n.sub(row, half), numCols),
                                      row);
      }
      Value block = arith::MinSIOp::create(
          nb, arith::DivUIOp::create(nb, row, n.c(128)), lastBlock);
      return n.load(weightsScales, ValueRange{current.expert, block, kStep});
    };
    int64_t accColumns = t.accumulatorColumns();
    SmallVector<Value> scales(accColumns / 2);
    if (!t.swapAB) {
      // Tokens are rows. A chunk of weight rows lies in one block: 64, or
      // 32 where a tile's output columns are not a multiple of 64 (192
      // columns gated: item starts and the up half at multiples of 96).
      Value rowScale[2];
      for (int64_t i = 0; i < 2; ++i)
        rowScale[i] = rowsScale(n.add(n.add(row0, n.mul(warpgroup, n.c(64))),
                                      n.add(fragRow, n.c(8 * i))));
      int64_t chunk = t.outputColumns() % 64 ? 32 : 64;
      SmallVector<Value> chunkScale;
      for (int64_t c = 0; c < accColumns; c += chunk)
        chunkScale.push_back(weightsScale(n.c(c)));
      for (int64_t e = 0; e < accColumns / 2; ++e)
        scales[e] = arith::MulFOp::create(nb, rowScale[(e / 2) % 2],
                                          chunkScale[(e / 4) / (chunk / 8)]);
    } else {
      // Weight rows are rows: a warp's 16 lie in one block; tokens columns.
      Value weightScale = weightsScale(n.sub(fragRow, frag.quad));
      for (int64_t e = 0; e < accColumns / 2; ++e) {
        Value token = n.add(row0, n.add(fragCol, n.c(8 * (e / 4) + e % 2)));
        scales[e] = arith::MulFOp::create(nb, weightScale, rowsScale(token));
      }
    }
    NVVM::WgmmaWaitGroupSyncOp::create(nb, nb.getI64IntegerAttr(0));
    return addScaled(nb, acc, part, scales.size(),
                     [&](int64_t e) { return scales[e]; });
  };

  // MXFP8: the staging rows of a thread's fragment rows (2) and columns
  // (accumulator columns / 4): weights [0, tileN), tokens [tileN, ..).
  auto scaleRowsOf = [&](ImplicitLocOpBuilder &nb) {
    IndexMath n{nb};
    Fragment frag = fragmentOf(nb, tid);
    Value aBase =
        t.swapAB ? n.c(0) : n.add(n.c(t.tileN), n.mul(warpgroup, n.c(64)));
    Value bBase = t.swapAB ? n.c(t.tileN) : n.c(0);
    std::pair<SmallVector<Value>, SmallVector<Value>> rows;
    for (int64_t i = 0; i < 2; ++i)
      rows.first.push_back(n.add(aBase, n.add(frag.row, n.c(8 * i))));
    for (int64_t c = 0; c < t.accumulatorColumns(); c += 8)
      for (int64_t d = 0; d < 2; ++d)
        rows.second.push_back(n.add(bBase, n.add(frag.col, n.c(c + d))));
    return rows;
  };
  // Swap-AB (few columns per thread) loads all four blocks of each staging
  // row once per step (vectors, rows then columns); the normal forms, whose
  // 32 column scales would take 128 registers so, load a block at a time.
  auto loadStepScales = [&](ImplicitLocOpBuilder &nb, Value buffer) {
    IndexMath n{nb};
    SmallVector<Value> vectors;
    if (!t.swapAB)
      return vectors;
    auto [aRows, bRows] = scaleRowsOf(nb);
    for (Value row : llvm::concat<Value>(aRows, bRows))
      vectors.push_back(vector::LoadOp::create(
          nb, VectorType::get({scaleBlocks}, nb.getF32Type()), scaleBuffers,
          ValueRange{buffer, row, n.c(0)}, /*nontemporal=*/false,
          llvm::Align(16)));
    return vectors;
  };
  // MXFP8: adds the products `part` of block j of the step to `acc` times
  // their rows' and columns' scales from `buffer` (or `stepScales`, see
  // loadStepScales); the wgmma has retired.
  auto promoteBlock = [&](ImplicitLocOpBuilder &nb, Value acc, Value part,
                          Value buffer, int64_t j,
                          ArrayRef<Value> stepScales) -> Value {
    IndexMath n{nb};
    auto [aRows, bRows] = scaleRowsOf(nb);
    auto scaleAt = [&](Value row, int64_t k) -> Value {
      if (!stepScales.empty())
        return vector::ExtractOp::create(nb, stepScales[k], j);
      if (blockMajorScales)
        return n.load(scaleBuffers, ValueRange{buffer, n.c(j), row});
      return n.load(scaleBuffers, ValueRange{buffer, row, n.c(j)});
    };
    int64_t accColumns = t.accumulatorColumns();
    Value aScale[2];
    for (int64_t i = 0; i < 2; ++i)
      aScale[i] = scaleAt(aRows[i], i);
    SmallVector<Value> bScale;
    for (int64_t k = 0, end = bRows.size(); k < end; k += 2) {
      if (!blockMajorScales) {
        bScale.push_back(scaleAt(bRows[k], 2 + k));
        bScale.push_back(scaleAt(bRows[k + 1], 3 + k));
        continue;
      }
      // Block-major: a fragment's two adjacent columns, one 8-byte load.
      Value pair = vector::LoadOp::create(
          nb, VectorType::get({2}, nb.getF32Type()), scaleBuffers,
          ValueRange{buffer, n.c(j), bRows[k]}, /*nontemporal=*/false,
          llvm::Align(8));
      for (int64_t d = 0; d < 2; ++d)
        bScale.push_back(vector::ExtractOp::create(nb, pair, d));
    }
    // Each product right before its FMA: fewer live registers.
    return addScaled(nb, acc, part, accColumns / 2, [&](int64_t e) -> Value {
      return arith::MulFOp::create(nb, aScale[(e / 2) % 2],
                                   bScale[(e / 4) * 2 + e % 2]);
    });
  };

  // A barrier of this thread's warpgroup only (named barrier 1 + its index;
  // 0 is the CTA's).
  auto syncWarpgroupAt = [&](ImplicitLocOpBuilder &nb) {
    NVVM::BarrierOp::create(
        nb, Type(),
        arith::IndexCastOp::create(
            nb, nb.getI32Type(),
            IndexMath{nb}.add(warpgroup, IndexMath{nb}.c(1))),
        arith::ConstantIntOp::create(nb, nb.getI32Type(), 128),
        NVVM::BarrierReductionAttr(), Value());
  };
  // Pass `pass` of the item: its K loop over the tile of output columns
  // col0 + pass * tileCols; returns the accumulator.
  std::function<Value(Value)> runWidenedPass;
  auto runPass = [&](Value pass) -> Value {
    if (t.widened())
      return runWidenedPass(m.add(col0, m.mul(pass, m.c(tileCols))));
    Value acc0 =
        nvgpu::WarpgroupMmaInitAccumulatorOp::create(b, ty.accumulator);
    Value passBase = m.mul(numK, pass);
    Value colBase = m.add(col0, m.mul(pass, m.c(tileCols)));
    // MXFP8: step 0's scales into buffer 0 (the last item's promotions are
    // behind its final barrier); warp-specialized, the producer stages them.
    if (t.mxfp8() && !specialized) {
      storeScaleCodes(b,
                      loadScaleCodes(b, current, m.c(0), colBase, tid, threads),
                      m.c(0), tid, threads);
      gpu::BarrierOp::create(b);
    }
    // Split K (swap-AB): trip i runs step i * split + warpgroup.
    int64_t split = t.kSplit();
    auto mainLoop = scf::ForOp::create(
        b, m.c(0), m.ceilDiv(numK, split), m.c(1), ValueRange{acc0},
        [&](OpBuilder &nested, Location l, Value trip, ValueRange iter) {
          ImplicitLocOpBuilder lb(l, nested);
          IndexMath o{lb};
          Value kStep =
              split == 1 ? trip : o.add(o.mul(trip, o.c(split)), warpgroup);
          Value itemStep = o.add(passBase, kStep);
          // A warpgroup past the last step only meets the others below.
          scf::IfOp active;
          if (split > 1) {
            active = scf::IfOp::create(lb, TypeRange{ty.accumulator},
                                       o.lt(kStep, numK),
                                       /*withElseRegion=*/true);
            ImplicitLocOpBuilder eb =
                ImplicitLocOpBuilder::atBlockBegin(l, active.elseBlock());
            scf::YieldOp::create(eb, iter[0]);
          }
          ImplicitLocOpBuilder nb =
              split > 1
                  ? ImplicitLocOpBuilder::atBlockBegin(l, active.thenBlock())
                  : lb;
          IndexMath n{nb};
          SmallVector<Value> nextCodes;
          if (t.mxfp8() && !specialized)
            nextCodes =
                loadScaleCodes(nb, current,
                               arith::MinSIOp::create(nb, n.add(kStep, n.c(1)),
                                                      n.sub(numK, n.c(1))),
                               colBase, tid, threads);
          Value step = n.add(stepBase, itemStep);
          Value stage = stageOf(nb, step);
          waitLoaded(nb, step);
          Value base = n.mul(stage, n.c(stageBytes));
          // Warpgroup w multiplies rows [64w, 64w + 64) of the token tile.
          Value rowsTile =
              t.swapAB
                  ? n.view(smem, base, ty.rowsTile)
                  : n.view(smem,
                           n.add(base, n.mul(warpgroup, n.c(64 * t.tileK *
                                                            t.elementBytes()))),
                           ty.rowsSliceTile);
          Value weightsTile =
              n.view(smem, n.add(base, n.c(rowsBytes)), ty.weightsTile);
          // One wgmma per 32 bytes of K inside the 128-byte swizzle atom
          // (nvgpu.warpgroup.mma over a longer K steps K-major B wrongly).
          // Each op may leave one K step of wgmma (tileK / mmaK groups) in
          // flight: after this step's last op, the previous step has retired.
          int64_t groupsPerStep = t.tileK / t.mmaK();
          // The wgmma descriptors of the 32 bytes of K at kk.
          auto descriptorsAt = [&](int64_t kk) -> std::pair<Value, Value> {
            Value rowsSlice =
                kSlice(nb, rowsTile, t.swapAB ? t.tileM : 64, kk, t.mmaK());
            Value weightsSlice = kSlice(nb, weightsTile, t.tileN, kk, t.mmaK());
            // Swap-AB: the weights are WGMMA's 64-row A operand.
            Value descA = nvgpu::WarpgroupGenerateDescriptorOp::create(
                nb, ty.mmaADesc, t.swapAB ? weightsSlice : rowsSlice,
                t.swapAB ? weightsMap : rowsMap);
            Value descB = nvgpu::WarpgroupGenerateDescriptorOp::create(
                nb, ty.mmaBDesc, t.swapAB ? rowsSlice : weightsSlice,
                t.swapAB ? rowsMap : weightsMap);
            return {descA, descB};
          };
          auto mmaAt = [&](int64_t kk, Value accIn, int64_t waitGroup) {
            auto [descA, descB] = descriptorsAt(kk);
            return nvgpu::WarpgroupMmaOp::create(
                       nb, ty.accumulator, descA, descB,
                       nb.getI64IntegerAttr(waitGroup), UnitAttr(), UnitAttr(),
                       accIn)
                .getResult();
          };
          // MXFP8: the products of the 32 K at kk alone (scale-d 0: no
          // accumulator to zero first, which nvgpu.warpgroup.mma cannot
          // say), as the wgmma's register struct; returns with at most
          // `inFlight` wgmma groups pending.
          auto productsAt = [&](int64_t kk, int64_t inFlight) -> Value {
            auto [descA, descB] = descriptorsAt(kk);
            auto asI64 = [&](Value desc) {
              return UnrealizedConversionCastOp::create(nb, nb.getI64Type(),
                                                        desc)
                  .getResult(0);
            };
            NVVM::WgmmaFenceAlignedOp::create(nb);
            Value products = NVVM::WgmmaMmaAsyncOp::create(
                nb, ty.products, LLVM::PoisonOp::create(nb, ty.products),
                asI64(descA), asI64(descB),
                NVVM::MMAShapeAttr::get(ctx, 64, t.accumulatorColumns(),
                                        t.mmaK()),
                NVVM::WGMMATypes::e4m3, NVVM::WGMMATypes::e4m3,
                NVVM::WGMMATypes::f32, NVVM::WGMMAScaleOut::zero,
                NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
                NVVM::MMALayout::row, NVVM::MMALayout::col,
                NVVM::MMAIntOverflowAttr());
            NVVM::WgmmaGroupSyncAlignedOp::create(nb);
            NVVM::WgmmaWaitGroupSyncOp::create(nb,
                                               nb.getI64IntegerAttr(inFlight));
            return products;
          };
          auto freshAccumulator = [&]() -> Value {
            return nvgpu::WarpgroupMmaInitAccumulatorOp::create(nb,
                                                                ty.accumulator);
          };
          Value acc = iter[0];
          if (t.mxfp8()) {
            // Each wgmma's products need their own scales. `live` sets of
            // registers take turns: after issuing wgmma j, j - live + 1 has
            // retired and is scaled while the newer ones multiply. Swap-AB's
            // small accumulators take a set per block: one wait per step, as
            // block FP8 (two sets: 1.1-1.9x block FP8's decode layers).
            Value buffer =
                specialized ? stage : arith::RemUIOp::create(nb, kStep, n.c(2));
            SmallVector<Value> stepScales = loadStepScales(nb, buffer);
            int64_t blocks = t.scaleBlocksPerStep();
            int64_t live = t.swapAB ? blocks : 2;
            SmallVector<Value> parts(blocks);
            int64_t promoted = 0;
            for (int64_t j = 0; j < blocks; ++j) {
              parts[j] = productsAt(j * t.mmaK(), live - 1);
              for (; promoted <= j - (live - 1); ++promoted)
                acc = promoteBlock(nb, acc, parts[promoted], buffer, promoted,
                                   stepScales);
            }
            NVVM::WgmmaWaitGroupSyncOp::create(nb, nb.getI64IntegerAttr(0));
            for (; promoted < blocks; ++promoted)
              acc = promoteBlock(nb, acc, parts[promoted], buffer, promoted,
                                 stepScales);
            if (!specialized)
              storeScaleCodes(nb, nextCodes,
                              arith::SubIOp::create(nb, n.c(1), buffer), tid,
                              threads);
          } else {
            // Block FP8: this K step's products accumulate apart, to be
            // scaled.
            Value part = t.fp8() ? freshAccumulator() : acc;
            for (int64_t kk = 0; kk < t.tileK; kk += t.mmaK())
              part = mmaAt(kk, part, groupsPerStep);
            acc = t.fp8() ? promote(nb, acc, part, kStep, colBase) : part;
          }
          if (split > 1) {
            scf::YieldOp::create(nb, acc);
            acc = active.getResult(0);
          }
          // The previous trip's stages are free once this thread has seen
          // their wgmma retire. Warp-specialized, the thread releases its
          // step's to the producer.
          // (Each pass's last step is released after its loop.)
          if (specialized) {
            ifThen(lb, o.lt(o.c(0), kStep), [&](ImplicitLocOpBuilder &rb) {
              IndexMath r{rb};
              releaseStage(rb, r.add(stepBase, r.sub(itemStep, r.c(1))));
            });
            scf::YieldOp::create(lb, acc);
            return;
          }
          // Else they are free once every warp has (in both CTAs of a
          // cluster: the rows' multicast refills both); refill them while
          // this trip's wgmma run. The cluster arrival is relaxed: a release
          // would also wait for this step's wgmma (1.3-1.7x slower kernels).
          // Split K: warpgroup w alone uses the stages of steps 2i + w (an
          // even number of stages), so it frees them with a barrier of its
          // own and its first thread refills its previous step's: the two
          // warpgroups stream apart, as two CTAs would.
          Value refiller = leader;
          if (split > 1) {
            syncWarpgroupAt(lb);
            refiller = arith::CmpIOp::create(
                lb, arith::CmpIPredicate::eq,
                arith::RemUIOp::create(lb, tid, o.c(128)), o.c(0));
          } else if (cluster > 1) {
            NVVM::ClusterArriveRelaxedOp::create(lb, lb.getUnitAttr());
            NVVM::ClusterWaitOp::create(lb, lb.getUnitAttr());
          } else {
            gpu::BarrierOp::create(lb);
          }
          // This warpgroup's previous step, `split` back.
          Value previous = o.sub(itemStep, o.c(split));
          Value refillStep = o.add(previous, o.c(t.stages));
          Value refill = arith::AndIOp::create(
              lb, refiller,
              arith::AndIOp::create(lb, o.lt(o.c(split - 1), itemStep),
                                    o.lt(refillStep, numSteps)));
          ifThen(lb, refill, [&](ImplicitLocOpBuilder &rb) {
            issueLoad(rb, current,
                      stageOf(rb, IndexMath{rb}.add(stepBase, previous)),
                      refillStep);
          });
          scf::YieldOp::create(lb, acc);
        });
    NVVM::WgmmaWaitGroupSyncOp::create(b, b.getI64IntegerAttr(0));
    if (specialized)
      releaseStage(b, m.add(stepBase, m.sub(m.add(passBase, numK), m.c(1))));
    return mainLoop.getResult(0);
  };
  // Widened MXFP8 (GroupedMatmulTile::widen): the K loop over the output
  // columns from colBase; returns the accumulator. Step s: its bf16 copy
  // (buffer s % 2) feeds eight k16 wgmma while the threads widen step s + 1
  // into the other buffer; its scales were staged two steps before.
  runWidenedPass = [&](Value colBase) -> Value {
    int64_t rows = t.tileM + t.tileN;  // a stage: token rows, weight rows
    int64_t halfBytes = rows * 64 * 2; // one 64-column bf16 half of a copy
    int64_t chunks = rows * (t.tileK / 16);
    Value wideRowsMap =
        UnrealizedConversionCastOp::create(b, ty.wideRowsMap, rowsMapPtr)
            .getResult(0);
    Value wideWeightsMap =
        UnrealizedConversionCastOp::create(b, ty.wideWeightsMap, weightsMapPtr)
            .getResult(0);
    auto wideBase = [&](ImplicitLocOpBuilder &nb, Value kStep) {
      IndexMath n{nb};
      return n.add(n.c(widenedOffset),
                   n.mul(arith::RemUIOp::create(nb, kStep, n.c(2)),
                         n.c(t.widenedStageBytes())));
    };
    // Widens K step kStep from its stage: 16-byte chunks of 16 e4m3 (chunk
    // c of a row at c ^ (row % 8), the TMA's 128-byte swizzle) become two
    // chunks of 8 bf16 in the same swizzle, times the row's block scale.
    auto widenStep = [&](ImplicitLocOpBuilder &nb, Value kStep) {
      IndexMath n{nb};
      Value stageBase =
          n.mul(stageOf(nb, n.add(stepBase, kStep)), n.c(stageBytes));
      Value dstBase = wideBase(nb, kStep);
      Value buffer = arith::RemUIOp::create(nb, kStep, n.c(2));
      auto i16x8 = VectorType::get({8}, nb.getI16Type());
      auto bf16x8 = VectorType::get({8}, nb.getBF16Type());
      auto i8x16 = VectorType::get({16}, nb.getI8Type());
      for (int64_t i0 = 0; i0 < chunks; i0 += threads) {
        Value i = n.add(tid, n.c(i0));
        Value row = arith::DivUIOp::create(nb, i, n.c(8));
        Value c = arith::RemUIOp::create(nb, i, n.c(8));
        Value swizzle = arith::RemUIOp::create(nb, row, n.c(8));
        Value src =
            n.add(stageBase,
                  n.add(n.mul(row, n.c(128)),
                        n.mul(arith::XOrIOp::create(nb, c, swizzle), n.c(16))));
        Value bytes =
            vector::LoadOp::create(nb, i8x16, smem, ValueRange{src},
                                   /*nontemporal=*/false, llvm::Align(16));
        // Staging rows: weights [0, tileN), tokens [tileN, tileN + tileM).
        Value isToken = n.lt(row, n.c(t.tileM));
        Value scaleRow = arith::SelectOp::create(
            nb, isToken, n.add(row, n.c(t.tileN)), n.sub(row, n.c(t.tileM)));
        Value scale = n.load(scaleBuffers,
                             ValueRange{buffer, scaleRow,
                                        arith::DivUIOp::create(nb, c, n.c(2))});
        Value scales = vector::BroadcastOp::create(
            nb, VectorType::get({2}, nb.getF32Type()), scale);
        Value pairs = vector::BitCastOp::create(nb, i16x8, bytes);
        Value halves[2];
        for (int64_t h = 0; h < 2; ++h) {
          SmallVector<Value> wide;
          for (int64_t p = 0; p < 4; ++p) {
            Value pair = vector::BitCastOp::create(
                nb, VectorType::get({2}, nb.getI8Type()),
                vector::FromElementsOp::create(
                    nb, VectorType::get({1}, nb.getI16Type()),
                    ValueRange{
                        vector::ExtractOp::create(nb, pairs, 4 * h + p)}));
            // e4m3 -> f16 is exact, and so is the product by 2^k in f32.
            Value f16s = NVVM::ConvertF8x2ToF16x2Op::create(
                nb, VectorType::get({2}, nb.getF16Type()), pair,
                nb.getBoolAttr(false),
                TypeAttr::get(Float8E4M3FNType::get(ctx)));
            Value bf16s = arith::TruncFOp::create(
                nb, VectorType::get({2}, nb.getBF16Type()),
                arith::MulFOp::create(
                    nb,
                    arith::ExtFOp::create(
                        nb, VectorType::get({2}, nb.getF32Type()), f16s),
                    scales));
            for (int64_t e = 0; e < 2; ++e)
              wide.push_back(vector::ExtractOp::create(nb, bf16s, e));
          }
          halves[h] = vector::BitCastOp::create(
              nb, i8x16, vector::FromElementsOp::create(nb, bf16x8, wide));
        }
        // Elements 16c.. lie in half c / 4, bf16 chunks 2 (c % 4) and + 1.
        Value half = arith::DivUIOp::create(nb, c, n.c(4));
        Value rowBase = n.add(
            dstBase, n.add(n.mul(half, n.c(halfBytes)), n.mul(row, n.c(128))));
        Value first = n.mul(arith::RemUIOp::create(nb, c, n.c(4)), n.c(2));
        for (int64_t h = 0; h < 2; ++h) {
          Value chunk =
              arith::XOrIOp::create(nb, n.add(first, n.c(h)), swizzle);
          vector::StoreOp::create(
              nb, halves[h], smem,
              ValueRange{n.add(rowBase, n.mul(chunk, n.c(16)))},
              /*nontemporal=*/false, llvm::Align(16));
        }
      }
      // The wgmma read the copy through the async proxy.
      NVVM::FenceProxyOp::create(
          nb, NVVM::ProxyKind::async_shared,
          NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
    };
    // The eight k16 wgmma of step kStep (its bf16 copy) into acc; after
    // them only this step's are in flight.
    auto multiply = [&](ImplicitLocOpBuilder &nb, Value kStep, Value acc) {
      IndexMath n{nb};
      Value base = wideBase(nb, kStep);
      int64_t perStep = 2 * 64 / 16;
      for (int64_t h = 0; h < 2; ++h) {
        Value halfBase = n.add(base, n.c(h * halfBytes));
        Value rowsHalf =
            n.view(smem, n.add(halfBase, n.mul(warpgroup, n.c(64 * 128))),
                   ty.wideRowsSlice);
        Value weightsHalf =
            n.view(smem, n.add(halfBase, n.c(t.tileM * 128)), ty.wideWeights);
        for (int64_t kk = 0; kk < 64; kk += 16) {
          Value descA = nvgpu::WarpgroupGenerateDescriptorOp::create(
              nb, ty.wideADesc, kSlice(nb, rowsHalf, 64, kk, 16), wideRowsMap);
          Value descB = nvgpu::WarpgroupGenerateDescriptorOp::create(
              nb, ty.wideBDesc, kSlice(nb, weightsHalf, t.tileN, kk, 16),
              wideWeightsMap);
          acc = nvgpu::WarpgroupMmaOp::create(nb, ty.accumulator, descA, descB,
                                              nb.getI64IntegerAttr(perStep),
                                              UnitAttr(), UnitAttr(), acc);
        }
      }
      return acc;
    };

    // Steps 0 and 1's scales, then step 0's copy.
    storeScaleCodes(b,
                    loadScaleCodes(b, current, m.c(0), colBase, tid, threads),
                    m.c(0), tid, threads);
    storeScaleCodes(
        b,
        loadScaleCodes(b, current,
                       arith::MinSIOp::create(b, m.c(1), m.sub(numK, m.c(1))),
                       colBase, tid, threads),
        m.c(1), tid, threads);
    gpu::BarrierOp::create(b);
    waitLoaded(b, stepBase);
    widenStep(b, m.c(0));
    gpu::BarrierOp::create(b);
    Value acc0 =
        nvgpu::WarpgroupMmaInitAccumulatorOp::create(b, ty.accumulator);
    auto loop = scf::ForOp::create(
        b, m.c(0), numK, m.c(1), ValueRange{acc0},
        [&](OpBuilder &nested, Location l, Value kStep, ValueRange iter) {
          ImplicitLocOpBuilder nb(l, nested);
          IndexMath n{nb};
          SmallVector<Value> codes =
              loadScaleCodes(nb, current,
                             arith::MinSIOp::create(nb, n.add(kStep, n.c(2)),
                                                    n.sub(numK, n.c(1))),
                             colBase, tid, threads);
          // This step's stage was widened (behind the last barrier): refill.
          Value refillStep = n.add(kStep, n.c(t.stages));
          ifThen(nb,
                 arith::AndIOp::create(nb, leader, n.lt(refillStep, numSteps)),
                 [&](ImplicitLocOpBuilder &lb) {
                   issueLoad(lb, current,
                             stageOf(lb, IndexMath{lb}.add(stepBase, kStep)),
                             refillStep);
                 });
          Value acc = multiply(nb, kStep, iter[0]);
          // Every warpgroup's previous step has retired: its copy is free.
          gpu::BarrierOp::create(nb);
          Value nextStep = n.add(kStep, n.c(1));
          ifThen(nb, n.lt(nextStep, numK), [&](ImplicitLocOpBuilder &wb) {
            waitLoaded(wb, IndexMath{wb}.add(stepBase, nextStep));
            widenStep(wb, nextStep);
          });
          // Step s + 2's scales into the buffer step s's widening read.
          storeScaleCodes(nb, codes, arith::RemUIOp::create(nb, kStep, n.c(2)),
                          tid, threads);
          gpu::BarrierOp::create(nb);
          scf::YieldOp::create(nb, acc);
        });
    NVVM::WgmmaWaitGroupSyncOp::create(b, b.getI64IntegerAttr(0));
    return loop.getResult(0);
  };

  Value nextStepBase = m.add(stepBase, numSteps);
  Value nextActive = m.lt(nextWork, numWork);
  Value rowsHere =
      arith::MinSIOp::create(b, m.sub(current.rowEnd, row0), m.c(t.tileM));

  // Stores 8 bf16 values at out[row, col ..): one 16-byte store when rows
  // are 16-byte aligned (N % 8 == 0; the runtime aligns `out`) and all 8
  // columns exist, else column by column below N. Rows are `index`
  // (64-bit): no 2^31 overflow for big M * N.
  constexpr int64_t kVector = 8;
  Value rowsAligned = arith::CmpIOp::create(
      b, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b, numCols, m.c(kVector)), m.c(0));
  auto storeVector = [&](ImplicitLocOpBuilder &nb, Value values, Value row,
                         Value col) {
    IndexMath n{nb};
    Value whole = arith::AndIOp::create(
        nb, rowsAligned, n.le(n.add(col, n.c(kVector)), numCols));
    scf::IfOp::create(
        nb, whole,
        [&](OpBuilder &thenBuilder, Location tl) {
          ImplicitLocOpBuilder tb(tl, thenBuilder);
          vector::StoreOp::create(tb, values, out, ValueRange{row, col},
                                  /*nontemporal=*/false, llvm::Align(16));
          scf::YieldOp::create(tb);
        },
        [&](OpBuilder &elseBuilder, Location el) {
          ImplicitLocOpBuilder eb(el, elseBuilder);
          for (int64_t j = 0; j < kVector; ++j) {
            IndexMath e{eb};
            Value c = e.add(col, e.c(j));
            ifThen(eb, e.lt(c, numCols), [&](ImplicitLocOpBuilder &sb) {
              Value v = vector::ExtractOp::create(sb, values, j);
              memref::StoreOp::create(sb, v, out, ValueRange{row, c});
            });
          }
          scf::YieldOp::create(eb);
        });
  };

  // quantizeOut: every pass stores its activations, rounded to bf16, into
  // the item's activation tile (64 or tileM rows x 128 columns, 16-byte
  // chunks XOR-swizzled by row); then 16 threads per row quantize each
  // row's 128 values, as moe.quantize does, and store e4m3 codes and the
  // row's scale. Swap-AB goes through an f32 tile of its own (gate and up
  // of a column are in different warps).
  auto buildQuantizedEpilogue = [&]() {
    Type bf16 = b.getBF16Type();
    // Emits `body(pass)` inside `scf.for pass in [0, passes)`.
    auto forEachPass = [&](function_ref<void(Value)> body) {
      auto loop = scf::ForOp::create(b, m.c(0), m.c(t.passes()), m.c(1));
      OpBuilder::InsertionGuard passGuard(b);
      b.setInsertionPoint(loop.getBody()->getTerminator());
      body(loop.getInductionVar());
    };
    Value activationBase = m.c(t.stages * stageBytes);
    auto storeActivation = [&](ImplicitLocOpBuilder &nb, Value tile,
                               Value value, Value row, Value col) {
      IndexMath n{nb};
      Value chunk =
          arith::XOrIOp::create(nb, arith::DivUIOp::create(nb, col, n.c(8)),
                                arith::RemUIOp::create(nb, row, n.c(8)));
      Value physical =
          n.add(n.mul(chunk, n.c(8)), arith::RemUIOp::create(nb, col, n.c(8)));
      Type type = value.getType();
      if (isa<VectorType>(type))
        vector::StoreOp::create(nb, value, tile, ValueRange{row, physical},
                                /*nontemporal=*/false, llvm::Align(4));
      else
        memref::StoreOp::create(nb, value, tile, ValueRange{row, physical});
    };
    // Rows [0, rowsValid) of `tile` go to out rows outRow0.. (threads of one
    // warpgroup; all of them reach every shuffle).
    auto quantizeTile = [&](Value tile, Value groupTid, Value rowsValid,
                            Value outRow0) {
      constexpr int64_t kLanesPerRow = GroupedMatmulTile::kOutGroup / 8;
      Value chunk = arith::RemUIOp::create(b, groupTid, m.c(kLanesPerRow));
      Value rowInRound = arith::DivUIOp::create(b, groupTid, m.c(kLanesPerRow));
      Value leads =
          arith::CmpIOp::create(b, arith::CmpIPredicate::eq, chunk, m.c(0));
      Value groupCol =
          arith::DivUIOp::create(b, col0, m.c(GroupedMatmulTile::kOutGroup));
      for (int64_t r0 = 0; r0 < t.activationRows(); r0 += 128 / kLanesPerRow) {
        // r % 8 is rowInRound: the swizzle keeps the chunk within its row.
        Value r = m.add(m.c(r0), rowInRound);
        Value physical =
            m.mul(arith::XOrIOp::create(b, chunk, rowInRound), m.c(8));
        QuantizedChunk q = quantizeChunkE4M3(
            b, loadChunkBits(b, tile, ValueRange{r, physical}, /*bf16=*/true),
            kLanesPerRow);
        ifThen(b, m.lt(r, rowsValid), [&](ImplicitLocOpBuilder &sb) {
          IndexMath n{sb};
          Value row = n.add(outRow0, r);
          Value codes = vector::BitCastOp::create(
              sb, VectorType::get({8}, sb.getI8Type()), q.codes);
          vector::StoreOp::create(
              sb, codes, out,
              ValueRange{row, n.add(col0, n.mul(chunk, n.c(8)))},
              /*nontemporal=*/false, llvm::Align(8));
          ifThen(sb, leads, [&](ImplicitLocOpBuilder &lb) {
            memref::StoreOp::create(lb, q.scale, outScales,
                                    ValueRange{row, groupCol});
          });
        });
      }
    };
    if (!t.swapAB) {
      Fragment frag = fragmentOf(b, tid);
      Value groupRow0 = m.mul(warpgroup, m.c(64));
      Value tile = m.view(
          smem,
          m.add(activationBase, m.mul(warpgroup, m.c(t.activationTileBytes() /
                                                     t.warpgroups()))),
          ty.activationTile);
      auto fragmentType = LLVM::LLVMStructType::getLiteral(
          ctx, SmallVector<Type>(t.accumulatorColumns() / 2, b.getF32Type()));
      // Up column c + tileN / 2 is fragment element + 4 * (tileN / 16).
      int64_t upDistance = 4 * (t.accumulatorColumns() / 16);
      // A loop, not unrolled: ptxas spilled the unrolled passes (255
      // registers against 216 for one).
      forEachPass([&](Value pass) {
        Value accumulator = runPass(pass);
        Value regs =
            UnrealizedConversionCastOp::create(
                b, LLVM::LLVMStructType::getLiteral(ctx, {fragmentType}),
                accumulator)
                .getResult(0);
        auto element = [&](int64_t at) -> Value {
          return LLVM::ExtractValueOp::create(b, regs,
                                              ArrayRef<int64_t>{0, at});
        };
        for (int64_t j = 0; j < tileCols / 8; ++j) {
          Value col =
              m.add(m.add(m.mul(pass, m.c(tileCols)), m.c(8 * j)), frag.col);
          Value bias[2], upBias[2];
          for (int64_t p = 0; p < 2 && biases; ++p) {
            Value outCol = m.add(col0, m.add(col, m.c(p)));
            bias[p] = loadBias(b, biases, current.expert, outCol, numCols);
            upBias[p] =
                loadBias(b, biases, current.expert, m.add(outCol, numCols),
                         m.mul(numCols, m.c(2)));
          }
          for (int64_t i = 0; i < 2; ++i) {
            int64_t e = 4 * j + 2 * i;
            SmallVector<Value, 2> pair;
            for (int64_t p = 0; p < 2; ++p)
              pair.push_back(arith::TruncFOp::create(
                  b, bf16,
                  epilogueValue(b, t, element(e + p),
                                element(e + p + upDistance), bias[p], upBias[p],
                                Value())));
            storeActivation(b, tile,
                            vector::FromElementsOp::create(
                                b, VectorType::get({2}, bf16), pair),
                            m.add(frag.row, m.c(8 * i)), col);
          }
        }
      });
      // Warp-specialized, the producer is loading the next item already.
      if (!specialized) {
        syncStages(b);
        issuePrologue(b, next, nextStepBase, nextActive);
      }
      syncWarpgroupAt(b);
      quantizeTile(tile, arith::RemUIOp::create(b, tid, m.c(128)),
                   m.sub(rowsHere, groupRow0), m.add(row0, groupRow0));
      // The next item's activations overwrite the tile just read.
      syncWarpgroupAt(b);
      return;
    }
    // Swap-AB: out^T in the f32 tile, weight rows [0, 32) gate and
    // [32, 64) their up partners; 32 consecutive threads take a row's 32
    // columns, 4 rows at a time.
    Value tile = m.view(smem, activationBase, ty.activationTile);
    Value outTile = m.view(
        smem, m.add(activationBase, m.c(t.activationTileBytes())), ty.outTile);
    Value lane = arith::RemUIOp::create(b, tid, m.c(tileCols));
    Value firstRow = arith::DivUIOp::create(b, tid, m.c(tileCols));
    forEachPass([&](Value pass) {
      Value accumulator = runPass(pass);
      gpu::BarrierOp::create(b);
      nvgpu::WarpgroupMmaStoreOp::create(b, accumulator, outTile);
      gpu::BarrierOp::create(b);
      Value col = m.add(m.mul(pass, m.c(tileCols)), lane);
      Value bias, upBias;
      if (biases) {
        Value outCol = m.add(col0, col);
        bias = loadBias(b, biases, current.expert, outCol, numCols);
        upBias = loadBias(b, biases, current.expert, m.add(outCol, numCols),
                          m.mul(numCols, m.c(2)));
      }
      scf::ForOp::create(
          b, firstRow, m.c(t.tileM), m.c(threads / tileCols), ValueRange{},
          [&](OpBuilder &inner, Location l, Value r, ValueRange) {
            ImplicitLocOpBuilder ib(l, inner);
            IndexMath i{ib};
            Value v = i.load(outTile, ValueRange{lane, r});
            Value up =
                i.load(outTile, ValueRange{i.add(lane, i.c(tileCols)), r});
            v = epilogueValue(ib, t, v, up, bias, upBias, Value());
            storeActivation(ib, tile, arith::TruncFOp::create(ib, bf16, v), r,
                            col);
            scf::YieldOp::create(ib);
          });
      // The next pass's accumulator overwrites the f32 tile just read.
      gpu::BarrierOp::create(b);
    });
    issuePrologue(b, next, nextStepBase, nextActive);
    quantizeTile(tile, tid, rowsHere, row0);
    // The next item's activations overwrite the tile just read.
    gpu::BarrierOp::create(b);
  };

  if (t.quantizeOut) {
    buildQuantizedEpilogue();
  } else if (!t.swapAB) {
    Value accumulator = runPass(m.c(0));
    // The stage buffers are free: the next item's first loads overlap this
    // epilogue (warp-specialized, the producer is at it already).
    if (!specialized) {
      syncStages(b);
      issuePrologue(b, next, nextStepBase, nextActive);
    }
    // Epilogue: accumulator registers (see Fragment) -> a 64 x 64 bf16
    // staging tile per warpgroup -> 16-byte stores of the rows of this
    // expert. Its 16-byte chunks are XOR-swizzled by row so that neither
    // side conflicts on banks.
    int64_t accColumns = t.accumulatorColumns();
    Type f32 = b.getF32Type(), bf16 = b.getBF16Type();
    auto fragment = LLVM::LLVMStructType::getLiteral(
        ctx, SmallVector<Type>(accColumns / 2, f32));
    Value regs =
        UnrealizedConversionCastOp::create(
            b, LLVM::LLVMStructType::getLiteral(ctx, {fragment}), accumulator)
            .getResult(0);
    Fragment frag = fragmentOf(b, tid);
    Value quad = frag.quad, fragRow = frag.row, fragCol = frag.col;
    Value groupTid = arith::RemUIOp::create(b, tid, m.c(128));
    Value staging = m.view(
        smem,
        m.add(m.c(t.stages * stageBytes), m.mul(warpgroup, m.c(kStagingBytes))),
        ty.stagingTile);
    // Readers: 8 threads per 128-byte row, 16 rows per pass.
    Value readRow = arith::DivUIOp::create(b, groupTid, m.c(8));
    Value readChunk = arith::RemUIOp::create(b, groupTid, m.c(8));
    Value readPhysical = arith::XOrIOp::create(
        b, readChunk, arith::RemUIOp::create(b, readRow, m.c(8)));
    Value groupRow0 = m.mul(warpgroup, m.c(64));
    // The routing weights of this thread's two fragment rows (clamped: rows
    // past the expert are computed but never stored).
    Value weightOfRow[2] = {};
    if (rowScale)
      for (int64_t i = 0; i < 2; ++i) {
        Value row = m.add(m.add(row0, groupRow0), m.add(fragRow, m.c(8 * i)));
        row = arith::MinSIOp::create(b, row, m.sub(numRows, m.c(1)));
        weightOfRow[i] = m.load(rowScales, row);
      }
    auto pairType = VectorType::get({2}, bf16);
    auto chunkType = VectorType::get({kVector}, bf16);
    auto element = [&](int64_t at) -> Value {
      return LLVM::ExtractValueOp::create(b, regs, ArrayRef<int64_t>{0, at});
    };
    // Gated: gate column c pairs with up column c + tileN / 2, which is
    // fragment element + 4 * (tileN / 16) of the same thread.
    int64_t upDistance = 4 * (accColumns / 16);
    // Chunks of kStagingColumns; the last may be narrower (96 columns of a
    // gated 192-column tile: 64 + 32).
    for (int64_t c = 0; c * kStagingColumns < tileCols; ++c) {
      int64_t width = std::min(kStagingColumns, tileCols - c * kStagingColumns);
      for (int64_t j = 0; j < width / 8; ++j) {
        // Row % 8 is quad for both i: one swizzled chunk per j.
        Value chunk = arith::XOrIOp::create(b, quad, m.c(j));
        Value col = m.add(m.mul(chunk, m.c(8)), fragCol);
        int64_t group = c * (kStagingColumns / 8) + j;
        // Both rows i share the biases of output columns
        // col0 + 8 * group + fragCol + {0, 1} (and their up partners).
        Value bias[2], upBias[2];
        for (int64_t p = 0; p < 2 && biases; ++p) {
          Value outCol = m.add(col0, m.add(m.c(8 * group + p), fragCol));
          bias[p] = loadBias(b, biases, current.expert, outCol, numCols);
          if (t.gated())
            upBias[p] =
                loadBias(b, biases, current.expert, m.add(outCol, numCols),
                         m.mul(numCols, m.c(2)));
        }
        for (int64_t i = 0; i < 2; ++i) {
          int64_t e = 4 * group + 2 * i;
          auto narrow = [&](int64_t p) -> Value {
            Value up = t.gated() ? element(e + p + upDistance) : Value();
            Value v = epilogueValue(b, t, element(e + p), up, bias[p],
                                    upBias[p], weightOfRow[i]);
            return arith::TruncFOp::create(b, bf16, v);
          };
          Value pair = vector::FromElementsOp::create(
              b, pairType, ValueRange{narrow(0), narrow(1)});
          vector::StoreOp::create(b, pair, staging,
                                  ValueRange{m.add(fragRow, m.c(8 * i)), col},
                                  /*nontemporal=*/false, llvm::Align(4));
        }
      }
      syncWarpgroupAt(b);
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
      syncWarpgroupAt(b);
    }
  } else {
    // Epilogue through the stage buffers: accumulators -> shared f32 tile
    // (out^T: weight row i is output column col0 + i) -> bf16 rows of this
    // expert. Threads t and t + 64 share column t % 64 and take alternate
    // token rows, so each row's 64 columns are stored by 64 consecutive
    // threads.
    // Split K: warpgroup w's partial sums are rows [64w, 64w + 64) of the
    // f32 tile, stored element by element (see Fragment: the upstream store
    // takes a warp's rows from its index in the block, not its warpgroup);
    // the values are their sum.
    int64_t split = t.kSplit();
    int64_t accColumns = t.accumulatorColumns();
    Value sums =
        m.view(smem, m.c(0),
               MemRefType::get({64 * split, accColumns}, b.getF32Type(),
                               MemRefLayoutAttrInterface(), ty.smem));
    Value accumulator = runPass(m.c(0));
    gpu::BarrierOp::create(b);
    if (split == 1) {
      nvgpu::WarpgroupMmaStoreOp::create(b, accumulator, sums);
    } else {
      auto regsType = LLVM::LLVMStructType::getLiteral(
          ctx, {LLVM::LLVMStructType::getLiteral(
                   ctx, SmallVector<Type>(accColumns / 2, b.getF32Type()))});
      Value regs = UnrealizedConversionCastOp::create(b, regsType, accumulator)
                       .getResult(0);
      Fragment frag = fragmentOf(b, tid);
      Value firstRow = m.add(m.mul(warpgroup, m.c(64)), frag.row);
      auto pairType = VectorType::get({2}, b.getF32Type());
      for (int64_t e = 0; e < accColumns / 2; e += 2) {
        int64_t first[] = {0, e}, second[] = {0, e + 1};
        Value pair = vector::FromElementsOp::create(
            b, pairType,
            ValueRange{LLVM::ExtractValueOp::create(b, regs, first),
                       LLVM::ExtractValueOp::create(b, regs, second)});
        vector::StoreOp::create(
            b, pair, sums,
            ValueRange{m.add(firstRow, m.c(8 * ((e / 2) % 2))),
                       m.add(frag.col, m.c(8 * (e / 4)))});
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
    Value lane = arith::RemUIOp::create(b, tid, m.c(tileCols));
    Value firstRow = arith::DivUIOp::create(b, tid, m.c(tileCols));
    Value col = m.add(col0, lane);
    ifThen(b, m.lt(col, numCols), [&](ImplicitLocOpBuilder &nb) {
      // This thread's column: its biases serve every row.
      Value bias, upBias;
      if (biases) {
        bias = loadBias(nb, biases, current.expert, col, numCols);
        if (t.gated())
          upBias = loadBias(nb, biases, current.expert,
                            IndexMath{nb}.add(col, numCols),
                            IndexMath{nb}.mul(numCols, IndexMath{nb}.c(2)));
      }
      scf::ForOp::create(
          nb, firstRow, rowsHere, IndexMath{nb}.c(threads / tileCols),
          ValueRange{}, [&](OpBuilder &inner, Location l, Value r, ValueRange) {
            ImplicitLocOpBuilder ib(l, inner);
            IndexMath i{ib};
            Value v = loadSum(ib, lane, r);
            Value up = t.gated() ? loadSum(ib, i.add(lane, i.c(tileCols)), r)
                                 : Value();
            Value weight =
                rowScale ? i.load(rowScales, i.add(row0, r)) : Value();
            v = epilogueValue(ib, t, v, up, bias, upBias, weight);
            Value narrowed = arith::TruncFOp::create(ib, ib.getBF16Type(), v);
            memref::StoreOp::create(ib, narrowed, out,
                                    ValueRange{i.add(row0, r), col});
            scf::YieldOp::create(ib);
          });
    });
    // The next item's loads overwrite the shared memory just read.
    gpu::BarrierOp::create(b);
    issuePrologue(b, next, nextStepBase, nextActive);
  }
  scf::YieldOp::create(b, ValueRange{nextWork, nextStepBase, next.expert,
                                     next.row0, next.rowEnd, next.col0});
  b.setInsertionPointAfter(loop);
  // No CTA leaves while its peer may still multicast into it.
  if (cluster > 1)
    syncStages(b);
  if (roles)
    b.setInsertionPointAfter(roles);
  gpu::ReturnOp::create(b);
  return func;
}
