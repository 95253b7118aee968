//===- Pipeline.cpp - TMA loads into stages behind mbarriers --------------===//
//
// The load side of the sm_90a grouped GEMM: `stages` shared-memory buffers
// of a (token rows, weights) tile pair, filled by TMA (multicast to a
// cluster's CTAs where it has two) and completing on a "full" mbarrier per
// stage; warp-specialized kernels also have an "empty" mbarrier per stage
// that the consumers arrive on once their wgmma retired.
//
//===----------------------------------------------------------------------===//

#include "../KernelUtils.h"
#include "GemmKernel.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::sm90;

KernelTypes::KernelTypes(MLIRContext *ctx, const GroupedMatmulTile &t) {
  Type bf16 = BFloat16Type::get(ctx), f32 = Float32Type::get(ctx);
  Type element = t.fp8() ? Type(Float8E4M3FNType::get(ctx)) : bf16;
  smem = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto shared = [&](ArrayRef<int64_t> shape, Type element) {
    return MemRefType::get(shape, element, MemRefLayoutAttrInterface(), smem);
  };
  rowsTile = shared({t.tileM, t.tileK}, element);
  // Gated tiles load their gate and up halves as two boxes; N-major
  // weights ([K, N]) a box of tileK rows x 64 columns per 128 bytes of N.
  weightsLoadTile =
      t.weightsKN()
          ? shared({1, t.tileK, kNMajorChunk}, element)
          : shared({1, t.gated() ? t.tileN / 2 : t.tileN, t.tileK}, element);
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
  outMap = tensorMap(stagingTile);
  // Warp-specialized: the stages' "full" mbarriers, then their "empty"
  // ones; ping-pong, then each consumer warpgroup's mainloop turn.
  barriers = nvgpu::MBarrierGroupType::get(
      ctx, smem, t.stages * (t.specialized() ? 2 : 1) + (t.pingpong ? 2 : 0));
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

void GemmKernel::syncStages(ImplicitLocOpBuilder &nb) const {
  if (cluster == 1) {
    gpu::BarrierOp::create(nb);
    return;
  }
  NVVM::ClusterArriveOp::create(nb, nb.getUnitAttr());
  NVVM::ClusterWaitOp::create(nb, nb.getUnitAttr());
}

void GemmKernel::syncWarpgroup(ImplicitLocOpBuilder &nb) const {
  NVVM::BarrierOp::create(
      nb, Type(),
      arith::IndexCastOp::create(
          nb, nb.getI32Type(),
          IndexMath{nb}.add(warpgroup, IndexMath{nb}.c(1))),
      arith::ConstantIntOp::create(nb, nb.getI32Type(), 128),
      NVVM::BarrierReductionAttr(), Value());
}

// For a stage count that is not a power of two in 32 bits: the 64-bit
// division by a constant spilled the MXFP8 consumers.
Value GemmKernel::stageDiv(ImplicitLocOpBuilder &nb, Value step,
                           bool round) const {
  IndexMath n{nb};
  if (llvm::isPowerOf2_64(t.stages))
    return round ? arith::DivUIOp::create(nb, step, n.c(t.stages)).getResult()
                 : arith::RemUIOp::create(nb, step, n.c(t.stages)).getResult();
  Type i32 = nb.getI32Type();
  Value narrow = arith::IndexCastUIOp::create(nb, i32, step);
  Value stages = arith::ConstantIntOp::create(nb, i32, t.stages);
  Value v = round ? arith::DivUIOp::create(nb, narrow, stages).getResult()
                  : arith::RemUIOp::create(nb, narrow, stages).getResult();
  return arith::IndexCastUIOp::create(nb, nb.getIndexType(), v);
}

void GemmKernel::waitLoaded(ImplicitLocOpBuilder &nb, Value step) const {
  IndexMath n{nb};
  Value round = stageDiv(nb, step, /*round=*/true);
  Value parity = arith::IndexCastOp::create(
      nb, nb.getI1Type(), arith::RemSIOp::create(nb, round, n.c(2)));
  nvgpu::MBarrierTryWaitParityOp::create(nb, barriers, parity, n.c(10000000),
                                         stageOf(nb, step));
}

// Item i of the CTA (i = stepBase / numSteps) is warpgroup i % 2's; its
// mainloop waits until item i - 1's has passed its last stage wait
// (completion (i - 1) / 2 of this warpgroup's turn barrier). Without it a
// warpgroup an item ahead would wait on a stage's parity rounds early.
void GemmKernel::waitTurn(ImplicitLocOpBuilder &nb) const {
  IndexMath n{nb};
  Value item = arith::DivUIOp::create(nb, stepBase, numSteps);
  ifThen(nb, n.lt(n.c(0), item), [&](ImplicitLocOpBuilder &wb) {
    IndexMath w{wb};
    Value parity = arith::IndexCastOp::create(
        wb, wb.getI1Type(),
        arith::RemUIOp::create(
            wb, arith::DivUIOp::create(wb, w.sub(item, w.c(1)), w.c(2)),
            w.c(2)));
    nvgpu::MBarrierTryWaitParityOp::create(wb, barriers, parity, w.c(10000000),
                                           w.add(warpgroup, w.c(2 * t.stages)));
  });
}

void GemmKernel::passTurn(ImplicitLocOpBuilder &nb) const {
  IndexMath n{nb};
  nvgpu::MBarrierArriveOp::create(
      nb, barriers, n.add(n.sub(n.c(1), warpgroup), n.c(2 * t.stages)));
}

void GemmKernel::releaseStage(ImplicitLocOpBuilder &nb, Value step) const {
  IndexMath n{nb};
  nvgpu::MBarrierArriveOp::create(nb, barriers,
                                  n.add(stageOf(nb, step), n.c(t.stages)));
}

// Coordinates innermost first: rows (k, row), weights (k, n, expert);
// N-major weights (n, k, expert).
void GemmKernel::issueLoad(ImplicitLocOpBuilder &nb, const WorkItem &w,
                           Value stage, Value itemStep) const {
  IndexMath n{nb};
  Value kStep = itemStep, col = w.col0;
  if (t.passes() > 1) {
    kStep = arith::RemUIOp::create(nb, itemStep, numK);
    col = n.add(
        col, n.mul(arith::DivUIOp::create(nb, itemStep, numK), n.c(tileCols)));
  }
  Value base = n.mul(stage, n.c(stageBytes));
  Value rowsDst = n.view(smem, base, ty.rowsTile);
  Value weightsDst =
      n.view(smem, n.add(base, n.c(rowsBytes)), ty.weightsLoadTile);
  Value k0 = n.mul(kStep, n.c(t.tileK));
  nvgpu::MBarrierArriveExpectTxOp::create(nb, barriers, n.c(stageBytes), stage,
                                          Value());
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
  if (t.weightsKN()) {
    // Chunk j (columns col + 64j..) lands tileK x 128 bytes after chunk
    // j - 1: the layout the N-major descriptor's leading offset steps over.
    int64_t chunkBytes = t.tileK * kNMajorChunk * t.elementBytes();
    for (int64_t j = 0; j < t.tileN / kNMajorChunk; ++j) {
      Value dst = n.view(smem, n.add(base, n.c(rowsBytes + j * chunkBytes)),
                         ty.weightsLoadTile);
      nvgpu::TmaAsyncLoadOp::create(
          nb, dst, barriers, weightsMap,
          ValueRange{n.add(col, n.c(j * kNMajorChunk)), k0, w.expert}, stage,
          Value(), Value());
    }
    return;
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
    nvgpu::TmaAsyncLoadOp::create(nb, upDst, barriers, weightsMap,
                                  ValueRange{k0, n.add(col, numCols), w.expert},
                                  stage, Value(), Value());
  }
}

void GemmKernel::issuePrologue(ImplicitLocOpBuilder &nb, const WorkItem &w,
                               Value base, Value active) const {
  for (int64_t s = 0; s < t.stages; ++s) {
    IndexMath n{nb};
    Value issue = arith::AndIOp::create(
        nb, arith::AndIOp::create(nb, leader, active), n.lt(n.c(s), numSteps));
    ifThen(nb, issue, [&](ImplicitLocOpBuilder &ib) {
      IndexMath i{ib};
      issueLoad(ib, w, stageOf(ib, i.add(base, i.c(s))), i.c(s));
    });
  }
}

Value sm90::kSlice(ImplicitLocOpBuilder &nb, Value tile, int64_t rows,
                   int64_t kk, int64_t width) {
  return memref::SubViewOp::create(
      nb, tile, ArrayRef<OpFoldResult>{nb.getIndexAttr(0), nb.getIndexAttr(kk)},
      ArrayRef<OpFoldResult>{nb.getIndexAttr(rows), nb.getIndexAttr(width)},
      ArrayRef<OpFoldResult>{nb.getIndexAttr(1), nb.getIndexAttr(1)});
}
