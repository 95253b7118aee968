//===- MainloopMXFP8.cpp - the OCP MXFP8 mainloop -------------------------===//
//
// e4m3 rows and weights with one UE8M0 scale per 32 K: each wgmma (32 K)
// accumulates apart and is added to the f32 accumulator times its two
// scales (staged as f32 in shared memory, MXFP8Scales.h) while the next one
// runs.
//
//===----------------------------------------------------------------------===//

#include "../KernelUtils.h"
#include "Fragment.h"
#include "MXFP8Scales.h"
#include "Mainloop.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::sm90;

namespace {

class MXFP8Mainloop final : public PipelinedMainloop {
public:
  explicit MXFP8Mainloop(GemmKernel &k) : PipelinedMainloop(k), scales(k) {}

  void setUp() override { scales.setUp(); }

  SmallVector<Value> producerLoad(ImplicitLocOpBuilder &nb, const WorkItem &w,
                                  Value itemStep, Value loader) override {
    IndexMath n{nb};
    Value kStep = arith::RemUIOp::create(nb, itemStep, k.numK);
    Value colBase =
        n.add(w.col0, n.mul(arith::DivUIOp::create(nb, itemStep, k.numK),
                            n.c(k.tileCols)));
    return scales.load(nb, w, kStep, colBase, loader, 128);
  }
  // The arrival releases the scales to the consumers' wait.
  void producerPublish(ImplicitLocOpBuilder &nb, ArrayRef<Value> loaded,
                       Value stage, Value loader) override {
    scales.store(nb, loaded, stage, loader, 128);
    nvgpu::MBarrierArriveOp::create(nb, k.barriers, stage);
  }

private:
  // Step 0's scales into buffer 0 (the last item's promotions are behind
  // its final barrier); warp-specialized, the producer stages them.
  void beginPass(Value colBase) override {
    if (k.specialized)
      return;
    IndexMath m{k.b};
    SmallVector<Value> codes =
        scales.load(k.b, k.current, m.c(0), colBase, k.tid, k.threads);
    scales.store(k.b, codes, m.c(0), k.tid, k.threads);
    gpu::BarrierOp::create(k.b);
  }
  // Unspecialized: the next step's codes, loaded while this one multiplies.
  SmallVector<Value> prefetch(ImplicitLocOpBuilder &nb, Value kStep,
                              Value colBase) override {
    if (k.specialized)
      return {};
    IndexMath n{nb};
    return scales.load(
        nb, k.current,
        arith::MinSIOp::create(nb, n.add(kStep, n.c(1)), n.sub(k.numK, n.c(1))),
        colBase, k.tid, k.threads);
  }
  Value multiply(ImplicitLocOpBuilder &nb, const KStep &step,
                 Value acc) override;

  /// The products of the 32 K at kk alone (scale-d 0: no accumulator to
  /// zero first, which nvgpu.warpgroup.mma cannot say), as the wgmma's
  /// register struct; returns with at most `inFlight` wgmma groups pending.
  Value productsAt(ImplicitLocOpBuilder &nb, const KStep &step, int64_t kk,
                   int64_t inFlight) const;
  /// The staging rows of a thread's fragment rows (2) and columns
  /// (accumulator columns / 4): weights [0, tileN), tokens [tileN, ..).
  std::pair<SmallVector<Value>, SmallVector<Value>>
  scaleRowsOf(ImplicitLocOpBuilder &nb) const;
  /// Swap-AB (few columns per thread) loads all blocks of each staging
  /// row once per step (vectors, rows then columns); the normal forms,
  /// whose column scales would take too many registers so, load a block at
  /// a time (none here).
  SmallVector<Value> loadStepScales(ImplicitLocOpBuilder &nb,
                                    Value buffer) const;
  /// Adds the products `part` of block j of the step to `acc` times their
  /// rows' and columns' scales from `buffer` (or `stepScales`); the wgmma
  /// has retired.
  Value promoteBlock(ImplicitLocOpBuilder &nb, Value acc, Value part,
                     Value buffer, int64_t j, ArrayRef<Value> stepScales) const;

  MXFP8ScaleStaging scales;
};

} // namespace

// Each wgmma's products need their own scales. `live` sets of registers
// take turns: after issuing wgmma j, j - live + 1 has retired and is scaled
// while the newer ones multiply. Swap-AB's small accumulators take a set
// per block: one wait per step, as block FP8.
Value MXFP8Mainloop::multiply(ImplicitLocOpBuilder &nb, const KStep &step,
                              Value acc) {
  const GroupedMatmulTile &t = k.t;
  IndexMath n{nb};
  Value buffer =
      k.specialized
          ? step.stage
          : arith::RemUIOp::create(nb, step.kStep, n.c(2)).getResult();
  SmallVector<Value> stepScales = loadStepScales(nb, buffer);
  int64_t blocks = t.scaleBlocksPerStep();
  int64_t live = t.swapAB ? blocks : 2;
  SmallVector<Value> parts(blocks);
  int64_t promoted = 0;
  for (int64_t j = 0; j < blocks; ++j) {
    parts[j] = productsAt(nb, step, j * t.mmaK(), live - 1);
    for (; promoted <= j - (live - 1); ++promoted)
      acc =
          promoteBlock(nb, acc, parts[promoted], buffer, promoted, stepScales);
  }
  NVVM::WgmmaWaitGroupSyncOp::create(nb, nb.getI64IntegerAttr(0));
  for (; promoted < blocks; ++promoted)
    acc = promoteBlock(nb, acc, parts[promoted], buffer, promoted, stepScales);
  if (!k.specialized)
    scales.store(nb, step.prefetched, arith::SubIOp::create(nb, n.c(1), buffer),
                 k.tid, k.threads);
  return acc;
}

Value MXFP8Mainloop::productsAt(ImplicitLocOpBuilder &nb, const KStep &step,
                                int64_t kk, int64_t inFlight) const {
  auto [descA, descB] = descriptorsAt(nb, step, kk);
  auto asI64 = [&](Value desc) {
    return UnrealizedConversionCastOp::create(nb, nb.getI64Type(), desc)
        .getResult(0);
  };
  NVVM::WgmmaFenceAlignedOp::create(nb);
  Value products = NVVM::WgmmaMmaAsyncOp::create(
      nb, k.ty.products, LLVM::PoisonOp::create(nb, k.ty.products),
      asI64(descA), asI64(descB),
      NVVM::MMAShapeAttr::get(k.ctx, 64, k.t.accumulatorColumns(), k.t.mmaK()),
      NVVM::WGMMATypes::e4m3, NVVM::WGMMATypes::e4m3, NVVM::WGMMATypes::f32,
      NVVM::WGMMAScaleOut::zero, NVVM::WGMMAScaleIn::one,
      NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row, NVVM::MMALayout::col,
      NVVM::MMAIntOverflowAttr());
  NVVM::WgmmaGroupSyncAlignedOp::create(nb);
  NVVM::WgmmaWaitGroupSyncOp::create(nb, nb.getI64IntegerAttr(inFlight));
  return products;
}

std::pair<SmallVector<Value>, SmallVector<Value>>
MXFP8Mainloop::scaleRowsOf(ImplicitLocOpBuilder &nb) const {
  const GroupedMatmulTile &t = k.t;
  IndexMath n{nb};
  Fragment frag = fragmentOf(nb, k.tid);
  Value aBase =
      t.swapAB ? n.c(0) : n.add(n.c(t.tileN), n.mul(k.warpgroup, n.c(64)));
  Value bBase = t.swapAB ? n.c(t.tileN) : n.c(0);
  std::pair<SmallVector<Value>, SmallVector<Value>> rows;
  for (int64_t i = 0; i < 2; ++i)
    rows.first.push_back(
        n.add(aBase, n.add(frag.row, n.c(Fragment::rowOffset(2 * i)))));
  for (int64_t e = 0; e < t.accumulatorColumns() / 2; e += 4)
    for (int64_t d = 0; d < 2; ++d)
      rows.second.push_back(
          n.add(bBase, n.add(frag.col, n.c(Fragment::colOffset(e + d)))));
  return rows;
}

SmallVector<Value> MXFP8Mainloop::loadStepScales(ImplicitLocOpBuilder &nb,
                                                 Value buffer) const {
  IndexMath n{nb};
  SmallVector<Value> vectors;
  if (!k.t.swapAB)
    return vectors;
  auto [aRows, bRows] = scaleRowsOf(nb);
  for (Value row : llvm::concat<Value>(aRows, bRows))
    vectors.push_back(vector::LoadOp::create(
        nb, VectorType::get({k.t.scaleBlocksPerStep()}, nb.getF32Type()),
        scales.buffers, ValueRange{buffer, row, n.c(0)},
        /*nontemporal=*/false, llvm::Align(16)));
  return vectors;
}

Value MXFP8Mainloop::promoteBlock(ImplicitLocOpBuilder &nb, Value acc,
                                  Value part, Value buffer, int64_t j,
                                  ArrayRef<Value> stepScales) const {
  IndexMath n{nb};
  auto [aRows, bRows] = scaleRowsOf(nb);
  bool blockMajor = scales.blockMajor;
  auto scaleAt = [&](Value row, int64_t at) -> Value {
    if (!stepScales.empty())
      return vector::ExtractOp::create(nb, stepScales[at], j);
    if (blockMajor)
      return n.load(scales.buffers, ValueRange{buffer, n.c(j), row});
    return n.load(scales.buffers, ValueRange{buffer, row, n.c(j)});
  };
  int64_t accColumns = k.t.accumulatorColumns();
  Value aScale[2];
  for (int64_t i = 0; i < 2; ++i)
    aScale[i] = scaleAt(aRows[i], i);
  SmallVector<Value> bScale;
  for (int64_t c = 0, end = bRows.size(); c < end; c += 2) {
    if (!blockMajor) {
      bScale.push_back(scaleAt(bRows[c], 2 + c));
      bScale.push_back(scaleAt(bRows[c + 1], 3 + c));
      continue;
    }
    // Block-major: a fragment's two adjacent columns, one 8-byte load.
    Value pair = vector::LoadOp::create(
        nb, VectorType::get({2}, nb.getF32Type()), scales.buffers,
        ValueRange{buffer, n.c(j), bRows[c]}, /*nontemporal=*/false,
        llvm::Align(8));
    for (int64_t d = 0; d < 2; ++d)
      bScale.push_back(vector::ExtractOp::create(nb, pair, d));
  }
  // Each product right before its FMA: fewer live registers. bScale holds
  // the thread's columns in fragment order (colOffset(4 g + d) is 2 g + d).
  return addScaled(nb, acc, part, accColumns / 2, k.ty.products,
                   k.ty.accumulator, [&](int64_t e) -> Value {
                     return arith::MulFOp::create(
                         nb, aScale[Fragment::rowOffset(e) / 8],
                         bScale[(e / 4) * 2 + e % 2]);
                   });
}

std::unique_ptr<GemmMainloop> sm90::makeMXFP8Mainloop(GemmKernel &k) {
  return std::make_unique<MXFP8Mainloop>(k);
}
