//===- MainloopMXFP8Widened.cpp - MXFP8 widened to bf16 in shared memory --===//
//
// GroupedMatmulTile::widen: instead of a promotion per 32 K, each K step's
// e4m3 rows and weights are widened to bf16 in shared memory times their
// scales (exact: an e4m3 value times a power of two) and multiplied by bf16
// wgmma into the accumulator directly. Step s: its bf16 copy (buffer s % 2)
// feeds eight k16 wgmma while the threads widen step s + 1 into the other
// buffer; its scales were staged two steps before. Normal form only.
//
//===----------------------------------------------------------------------===//

#include "../KernelUtils.h"
#include "MXFP8Scales.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::sm90;

namespace {

class WidenedMXFP8Mainloop final : public GemmMainloop {
public:
  explicit WidenedMXFP8Mainloop(GemmKernel &k) : GemmMainloop(k), scales(k) {}

  void setUp() override { scales.setUp(); }
  SmallVector<Value, 2> runPass(Value pass) override;

private:
  /// Where K step kStep's bf16 copy lies in shared memory.
  Value wideBase(ImplicitLocOpBuilder &nb, Value kStep) const;
  /// Widens K step kStep from its stage: 16-byte chunks of 16 e4m3 (chunk
  /// c of a row at c ^ (row % 8), the TMA's 128-byte swizzle) become two
  /// chunks of 8 bf16 in the same swizzle, times the row's block scale.
  void widenStep(ImplicitLocOpBuilder &nb, Value kStep) const;
  /// The eight k16 wgmma of step kStep (its bf16 copy) into acc; after
  /// them only this step's are in flight.
  Value multiply(ImplicitLocOpBuilder &nb, Value kStep, Value acc,
                 Value wideRowsMap, Value wideWeightsMap) const;

  MXFP8ScaleStaging scales;
};

} // namespace

Value WidenedMXFP8Mainloop::wideBase(ImplicitLocOpBuilder &nb,
                                     Value kStep) const {
  IndexMath n{nb};
  return n.add(n.c(k.t.tileSharedBytes()),
               n.mul(arith::RemUIOp::create(nb, kStep, n.c(2)),
                     n.c(k.t.widenedStageBytes())));
}

void WidenedMXFP8Mainloop::widenStep(ImplicitLocOpBuilder &nb,
                                     Value kStep) const {
  const GroupedMatmulTile &t = k.t;
  int64_t rows = t.tileM + t.tileN;  // a stage: token rows, weight rows
  int64_t halfBytes = rows * 64 * 2; // one 64-column bf16 half of a copy
  int64_t chunks = rows * (t.tileK / 16);
  IndexMath n{nb};
  Value stageBase =
      n.mul(k.stageOf(nb, n.add(k.stepBase, kStep)), n.c(k.stageBytes));
  Value dstBase = wideBase(nb, kStep);
  Value buffer = arith::RemUIOp::create(nb, kStep, n.c(2));
  auto i16x8 = VectorType::get({8}, nb.getI16Type());
  auto bf16x8 = VectorType::get({8}, nb.getBF16Type());
  auto i8x16 = VectorType::get({16}, nb.getI8Type());
  for (int64_t i0 = 0; i0 < chunks; i0 += k.threads) {
    Value i = n.add(k.tid, n.c(i0));
    Value row = arith::DivUIOp::create(nb, i, n.c(8));
    Value c = arith::RemUIOp::create(nb, i, n.c(8));
    Value swizzle = arith::RemUIOp::create(nb, row, n.c(8));
    Value src =
        n.add(stageBase,
              n.add(n.mul(row, n.c(128)),
                    n.mul(arith::XOrIOp::create(nb, c, swizzle), n.c(16))));
    Value bytes =
        vector::LoadOp::create(nb, i8x16, k.smem, ValueRange{src},
                               /*nontemporal=*/false, llvm::Align(16));
    // Staging rows: weights [0, tileN), tokens [tileN, tileN + tileM).
    Value isToken = n.lt(row, n.c(t.tileM));
    Value scaleRow = arith::SelectOp::create(
        nb, isToken, n.add(row, n.c(t.tileN)), n.sub(row, n.c(t.tileM)));
    Value scale = n.load(
        scales.buffers,
        ValueRange{buffer, scaleRow, arith::DivUIOp::create(nb, c, n.c(2))});
    Value scalePair = vector::BroadcastOp::create(
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
                ValueRange{vector::ExtractOp::create(nb, pairs, 4 * h + p)}));
        // e4m3 -> f16 is exact, and so is the product by 2^k in f32.
        Value f16s = NVVM::ConvertF8x2ToF16x2Op::create(
            nb, VectorType::get({2}, nb.getF16Type()), pair,
            nb.getBoolAttr(false), TypeAttr::get(Float8E4M3FNType::get(k.ctx)));
        Value bf16s = arith::TruncFOp::create(
            nb, VectorType::get({2}, nb.getBF16Type()),
            arith::MulFOp::create(
                nb,
                arith::ExtFOp::create(nb, VectorType::get({2}, nb.getF32Type()),
                                      f16s),
                scalePair));
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
      Value chunk = arith::XOrIOp::create(nb, n.add(first, n.c(h)), swizzle);
      vector::StoreOp::create(nb, halves[h], k.smem,
                              ValueRange{n.add(rowBase, n.mul(chunk, n.c(16)))},
                              /*nontemporal=*/false, llvm::Align(16));
    }
  }
  // The wgmma read the copy through the async proxy.
  NVVM::FenceProxyOp::create(
      nb, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(k.ctx, NVVM::SharedSpace::shared_cta));
}

Value WidenedMXFP8Mainloop::multiply(ImplicitLocOpBuilder &nb, Value kStep,
                                     Value acc, Value wideRowsMap,
                                     Value wideWeightsMap) const {
  const GroupedMatmulTile &t = k.t;
  int64_t halfBytes = (t.tileM + t.tileN) * 64 * 2;
  IndexMath n{nb};
  Value base = wideBase(nb, kStep);
  int64_t perStep = 2 * 64 / 16;
  for (int64_t h = 0; h < 2; ++h) {
    Value halfBase = n.add(base, n.c(h * halfBytes));
    Value rowsHalf =
        n.view(k.smem, n.add(halfBase, n.mul(k.warpgroup, n.c(64 * 128))),
               k.ty.wideRowsSlice);
    Value weightsHalf =
        n.view(k.smem, n.add(halfBase, n.c(t.tileM * 128)), k.ty.wideWeights);
    for (int64_t kk = 0; kk < 64; kk += 16) {
      Value descA = nvgpu::WarpgroupGenerateDescriptorOp::create(
          nb, k.ty.wideADesc, kSlice(nb, rowsHalf, 64, kk, 16), wideRowsMap);
      Value descB = nvgpu::WarpgroupGenerateDescriptorOp::create(
          nb, k.ty.wideBDesc, kSlice(nb, weightsHalf, t.tileN, kk, 16),
          wideWeightsMap);
      acc = nvgpu::WarpgroupMmaOp::create(nb, k.ty.accumulator, descA, descB,
                                          nb.getI64IntegerAttr(perStep),
                                          UnitAttr(), UnitAttr(), acc);
    }
  }
  return acc;
}

SmallVector<Value, 2> WidenedMXFP8Mainloop::runPass(Value pass) {
  ImplicitLocOpBuilder &b = k.b;
  IndexMath m{b};
  Value colBase = m.add(k.current.col0, m.mul(pass, m.c(k.tileCols)));
  Value wideRowsMap =
      UnrealizedConversionCastOp::create(b, k.ty.wideRowsMap, k.rowsMapPtr)
          .getResult(0);
  Value wideWeightsMap = UnrealizedConversionCastOp::create(
                             b, k.ty.wideWeightsMap, k.weightsMapPtr)
                             .getResult(0);
  // Steps 0 and 1's scales, then step 0's copy.
  SmallVector<Value> codes =
      scales.load(b, k.current, m.c(0), colBase, k.tid, k.threads);
  scales.store(b, codes, m.c(0), k.tid, k.threads);
  codes = scales.load(b, k.current,
                      arith::MinSIOp::create(b, m.c(1), m.sub(k.numK, m.c(1))),
                      colBase, k.tid, k.threads);
  scales.store(b, codes, m.c(1), k.tid, k.threads);
  gpu::BarrierOp::create(b);
  k.waitLoaded(b, k.stepBase);
  widenStep(b, m.c(0));
  gpu::BarrierOp::create(b);
  Value acc0 =
      nvgpu::WarpgroupMmaInitAccumulatorOp::create(b, k.ty.accumulator);
  auto loop = scf::ForOp::create(
      b, m.c(0), k.numK, m.c(1), ValueRange{acc0},
      [&](OpBuilder &nested, Location l, Value kStep, ValueRange iter) {
        ImplicitLocOpBuilder nb(l, nested);
        IndexMath n{nb};
        SmallVector<Value> next =
            scales.load(nb, k.current,
                        arith::MinSIOp::create(nb, n.add(kStep, n.c(2)),
                                               n.sub(k.numK, n.c(1))),
                        colBase, k.tid, k.threads);
        // This step's stage was widened (behind the last barrier): refill.
        Value refillStep = n.add(kStep, n.c(k.t.stages));
        ifThen(
            nb,
            arith::AndIOp::create(nb, k.leader, n.lt(refillStep, k.numSteps)),
            [&](ImplicitLocOpBuilder &lb) {
              k.issueLoad(lb, k.current,
                          k.stageOf(lb, IndexMath{lb}.add(k.stepBase, kStep)),
                          refillStep);
            });
        Value acc = multiply(nb, kStep, iter[0], wideRowsMap, wideWeightsMap);
        // Every warpgroup's previous step has retired: its copy is free.
        gpu::BarrierOp::create(nb);
        Value nextStep = n.add(kStep, n.c(1));
        ifThen(nb, n.lt(nextStep, k.numK), [&](ImplicitLocOpBuilder &wb) {
          k.waitLoaded(wb, IndexMath{wb}.add(k.stepBase, nextStep));
          widenStep(wb, nextStep);
        });
        // Step s + 2's scales into the buffer step s's widening read.
        scales.store(nb, next, arith::RemUIOp::create(nb, kStep, n.c(2)), k.tid,
                     k.threads);
        gpu::BarrierOp::create(nb);
        scf::YieldOp::create(nb, acc);
      });
  NVVM::WgmmaWaitGroupSyncOp::create(b, b.getI64IntegerAttr(0));
  return {loop.getResult(0)};
}

std::unique_ptr<GemmMainloop> sm90::makeWidenedMXFP8Mainloop(GemmKernel &k) {
  return std::make_unique<WidenedMXFP8Mainloop>(k);
}
