//===- Tcgen05GroupedMatmulKernel.cpp - sm_100a MXFP8 grouped GEMM -------===//
//
// Builds the Blackwell (sm_100a) block-scaled grouped GEMM from upstream
// NVVM tcgen05 ops: the sm_90a kernel's device-side tile scheduler
// (TileScheduler.h), TMA loads of the e4m3 A (rows) and B (weights) tiles
// into `stages` 128-byte swizzled shared-memory buffers completing on
// mbarriers, the UE8M0 scales written to shared memory in the layout
// `tcgen05.cp .32x128b.warpx4` spreads over the 128 lanes, and
// `tcgen05.mma.block_scale` (kind::mxf8f6f4, block32) accumulating in
// tensor memory, committed to a per-stage mbarrier; the epilogue reads the
// accumulator with `tcgen05.ld` and stores bf16 rows of the tile's expert.
//
// Compiled and assembled only: no Blackwell GPU has run it (see
// docs/quantization-design.md, Status).
//
//===----------------------------------------------------------------------===//

#include "Tcgen05GroupedMatmulKernel.h"
#include "KernelUtils.h"
#include "MoE/Conversion/Passes.h"
#include "Tcgen05Descriptors.h"
#include "TileScheduler.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::moe;
using T = Tcgen05GroupedMatmulTile;

std::string Tcgen05GroupedMatmulTile::kernelName(Type offsetType) const {
  return llvm::formatv("grouped_matmul_mxfp8_tcgen05_{0}x{1}x{2}_s{3}_off{4}",
                       tileM, tileN, tileK, stages,
                       offsetType.getIntOrFloatBitWidth())
      .str();
}

namespace {
/// The descriptor words, start address 0 (the run-time address is or-ed in).
struct Descriptors {
  uint64_t operand, scales;
  uint32_t instr[T::tileK / T::mmaK];
};
} // namespace

/// A and B: K-major rows of 128 bytes, 128-byte swizzle, SBO 1024 (8 rows),
/// LBO 16 (unused for swizzled K-major). The scale tiles for tcgen05.cp
/// .32x128b: 32 rows of 16 bytes, unswizzled, 8-row core matrices of 128
/// bytes (LBO = SBO = 128). MMA k of a stage reads byte k of every scale
/// word (scale factor IDs): that byte holds K block 4 s + k.
static Descriptors encodeDescriptors() {
  using namespace tcgen05;
  Descriptors d;
  SmemDescriptor operand;
  operand.leadingDimByteOffset = 16;
  operand.strideDimByteOffset = 1024;
  operand.swizzle = SmemSwizzle::Swizzle128B;
  SmemDescriptor scales;
  scales.leadingDimByteOffset = 128;
  scales.strideDimByteOffset = 128;
  std::string why;
  for (int64_t k = 0; k < T::tileK / T::mmaK; ++k) {
    BlockScaledInstrDescriptor instr;
    instr.n = T::tileN;
    instr.m = T::tileM;
    instr.scaleFactorAByte = k;
    instr.scaleFactorBByte = k;
    if (!validOperands(instr, operand, operand, why) || !scales.valid(why))
      llvm::report_fatal_error(llvm::Twine("tcgen05 kernel: ") + why);
    d.instr[k] = instr.encode();
  }
  d.operand = operand.encode();
  d.scales = scales.encode();
  return d;
}

gpu::GPUFuncOp mlir::moe::buildTcgen05GroupedMatmulKernel(
    OpBuilder &builder, Location loc, gpu::GPUModuleOp module,
    const Tcgen05GroupedMatmulTile &t, Type offsetType) {
  MLIRContext *ctx = builder.getContext();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Descriptors desc = encodeDescriptors();

  Type i8 = b.getI8Type(), i32 = b.getI32Type(), i64 = b.getI64Type();
  auto smemSpace =
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto shared = [&](ArrayRef<int64_t> shape, Type element) {
    return MemRefType::get(shape, element, MemRefLayoutAttrInterface(),
                           smemSpace);
  };
  Type e4m3 = Float8E4M3FNType::get(ctx);
  MemRefType rowsTile = shared({T::tileM, T::tileK}, e4m3);
  MemRefType weightsTile = shared({1, T::tileN, T::tileK}, e4m3);
  MemRefType scaleWords = shared({2 * T::scaleTileBytes / 4}, i32);
  int64_t sharedBytes = t.dynamicSharedBytes();
  MemRefType sharedBytesType = shared({sharedBytes}, i8);
  auto tensorMap = [&](MemRefType box) {
    return nvgpu::TensorMapDescriptorType::get(
        ctx, box, nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
        nvgpu::TensorMapL2PromoKind::L2PROMO_NONE,
        nvgpu::TensorMapOOBKind::OOB_ZERO,
        nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
  };
  auto barriersType = nvgpu::MBarrierGroupType::get(ctx, smemSpace, t.stages);

  DynamicSharedMemory dynamicSmem(b, module);

  auto ptrType = LLVM::LLVMPointerType::get(ctx);
  auto sharedPtr = LLVM::LLVMPointerType::get(ctx, 3);
  auto tmemPtr = LLVM::LLVMPointerType::get(ctx, 6);
  int64_t dyn = ShapedType::kDynamic;
  SmallVector<Type> argTypes{ptrType,
                             ptrType,
                             MemRefType::get({dyn}, offsetType),
                             MemRefType::get({dyn, dyn}, b.getBF16Type()),
                             i32,
                             i32,
                             i32,
                             MemRefType::get({dyn, dyn}, i8),
                             MemRefType::get({dyn, dyn, dyn}, i8)};
  auto func = gpu::GPUFuncOp::create(
      b, t.kernelName(offsetType), b.getFunctionType(argTypes, {}),
      TypeRange{shared({kCachedEnds}, i32), shared({kCachedEnds}, i32)});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({128, 1, 1}));
  func->setAttr(kTensorMapArgsAttr, b.getDenseI64ArrayAttr({0, 1}));
  for (unsigned arg : {0u, 1u})
    func.setArgAttr(arg, LLVM::LLVMDialect::getAlignAttrName(),
                    b.getI64IntegerAttr(64));

  Block *entry = &func.getBody().front();
  b.setInsertionPointToStart(entry);
  IndexMath m{b};
  Value offsets = entry->getArgument(2), out = entry->getArgument(3);
  Value rowsMin = m.toIndex(entry->getArgument(5));
  Value rowsMax = m.toIndex(entry->getArgument(6));
  Value rowsScales = entry->getArgument(7);
  Value weightsScales = entry->getArgument(8);
  Value rowsMap = UnrealizedConversionCastOp::create(b, tensorMap(rowsTile),
                                                     entry->getArgument(0))
                      .getResult(0);
  Value weightsMap = UnrealizedConversionCastOp::create(
                         b, tensorMap(weightsTile), entry->getArgument(1))
                         .getResult(0);

  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value warp = arith::DivUIOp::create(b, tid, m.c(32));
  Value lane = arith::RemUIOp::create(b, tid, m.c(32));
  Value leader =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tid, m.c(0));
  Value warp0 =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, warp, m.c(0));
  Value numExperts =
      m.sub(memref::DimOp::create(b, offsets, m.c(0)).getResult(), m.c(1));
  Value numRows = memref::DimOp::create(b, out, m.c(0));
  Value numCols = memref::DimOp::create(b, out, m.c(1));
  Value numColTiles = m.ceilDiv(numCols, T::tileN);
  Value numK = m.ceilDiv(m.toIndex(entry->getArgument(4)), T::tileK);
  Value lastRow = m.sub(numRows, m.c(1));
  Value lastWeightRow = m.sub(
      memref::DimOp::create(b, weightsScales, m.c(1)).getResult(), m.c(1));

  Value smemRaw = dynamicSmem.get(b);
  Value smem = memref::ReinterpretCastOp::create(b, sharedBytesType, smemRaw, 0,
                                                 {sharedBytes}, {1});
  // The same bytes as an `.shared::cta` address (i64) for the descriptors
  // and the tcgen05 ops' pointers.
  Value smemBase = arith::IndexCastOp::create(
      b, i64,
      memref::ExtractAlignedPointerAsIndexOp::create(b, smemRaw).getResult());
  auto i64c = [&](ImplicitLocOpBuilder &nb, int64_t v) -> Value {
    return arith::ConstantIntOp::create(nb, i64, v);
  };
  auto i32c = [&](ImplicitLocOpBuilder &nb, int64_t v) -> Value {
    return arith::ConstantIntOp::create(nb, i32, v);
  };
  // The shared-memory byte address (i64) of `byteOffset` (index).
  auto sharedAddr = [&](ImplicitLocOpBuilder &nb, Value byteOffset) -> Value {
    return arith::AddIOp::create(
        nb, smemBase, arith::IndexCastOp::create(nb, i64, byteOffset));
  };
  auto toSharedPtr = [&](ImplicitLocOpBuilder &nb, Value addr) -> Value {
    return LLVM::IntToPtrOp::create(nb, sharedPtr, addr);
  };
  // A descriptor word with the address of `addr` in bits 0-13.
  auto withAddress = [&](ImplicitLocOpBuilder &nb, uint64_t word,
                         Value addr) -> Value {
    Value encoded = arith::ShRUIOp::create(
        nb, arith::AndIOp::create(nb, addr, i64c(nb, 0x3FFFF)), i64c(nb, 4));
    return arith::OrIOp::create(nb, i64c(nb, int64_t(word)), encoded);
  };
  int64_t mmaDoneBase = t.stages * T::stageBytes;
  auto mmaDone = [&](ImplicitLocOpBuilder &nb, Value stage) -> Value {
    IndexMath n{nb};
    return toSharedPtr(
        nb, sharedAddr(nb, n.add(n.c(mmaDoneBase), n.mul(stage, n.c(8)))));
  };
  Value tmemSlot =
      toSharedPtr(b, sharedAddr(b, m.c(mmaDoneBase + 8 * t.stages)));

  // Set-up: the TMA mbarriers (nvgpu), the MMA-done mbarriers (one arrival:
  // tcgen05.commit), tensor memory (warp 0 allocates, then gives up the
  // permit: one allocation per CTA).
  Value full = nvgpu::MBarrierCreateOp::create(b, barriersType);
  ifThen(b, leader, [&](ImplicitLocOpBuilder &nb) {
    IndexMath n{nb};
    for (int64_t s = 0; s < t.stages; ++s) {
      nvgpu::MBarrierInitOp::create(nb, full, n.c(1), n.c(s), Value());
      NVVM::MBarrierInitOp::create(nb, mmaDone(nb, n.c(s)), i32c(nb, 1),
                                   Value());
    }
    NVVM::FenceMbarrierInitOp::create(nb);
    nvgpu::TmaPrefetchOp::create(nb, rowsMap, Value());
    nvgpu::TmaPrefetchOp::create(nb, weightsMap, Value());
  });
  ifThen(b, warp0, [&](ImplicitLocOpBuilder &nb) {
    NVVM::Tcgen05AllocOp::create(nb, tmemSlot, i32c(nb, T::tmemColumns));
    NVVM::Tcgen05RelinquishAllocPermitOp::create(nb);
  });
  waitForPreviousKernel(b, /*launchDependents=*/false);

  // The tile table, as in the sm_90a kernel.
  TileScheduler scheduler =
      makeTileScheduler(b, offsets, func.getWorkgroupAttributions()[0],
                        func.getWorkgroupAttributions()[1], numExperts, numRows,
                        rowsMin, rowsMax, tid, T::tileM);
  scheduler.cacheOffsets(b, 128);
  NVVM::Tcgen05FenceOp::create(b, NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
  gpu::BarrierOp::create(b);
  NVVM::Tcgen05FenceOp::create(b, NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
  Value tmemBase = LLVM::LoadOp::create(b, i32, tmemSlot);
  scheduler.buildTable(b, 128);
  Value numTiles = scheduler.countTiles(b);
  Value numWork = m.mul(numTiles, numColTiles);
  Value firstWork = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value numCTAs = gpu::GridDimOp::create(b, gpu::Dimension::x);

  // K step `kStep` of `w` into `stage`: every thread writes the 4 scales
  // (K blocks 4 kStep .. 4 kStep + 3, one byte each) of tile row `tid` of
  // A and of B as one 32-bit word at byte 16 (tid % 32) + 4 (tid / 32) of
  // its scale tile: CUTLASS's sm100 scale-factor atom (32 x 16 bytes), which
  // tcgen05.cp .32x128b.warpx4 copies into 4 columns of every lane quarter
  // (lane l, column c: the scales of row l % 32 + 32 c). Rows past the end
  // read the last row's scales (computed, never stored). Then the leader
  // starts the TMA loads of the A and B tiles.
  auto fill = [&](ImplicitLocOpBuilder &nb, const WorkItem &w, Value stage,
                  Value kStep) {
    IndexMath n{nb};
    Value base = n.mul(stage, n.c(T::stageBytes));
    Value words = n.view(smem, n.add(base, n.c(2 * T::tileBytes)), scaleWords);
    Value slot = n.add(n.mul(lane, n.c(4)), warp);
    Value block0 = n.mul(kStep, n.c(4));
    auto word = [&](auto load) -> Value {
      Value v = i32c(nb, 0);
      for (int64_t j = 0; j < 4; ++j) {
        Value byte =
            arith::ExtUIOp::create(nb, i32, load(n.add(block0, n.c(j))));
        v = arith::OrIOp::create(
            nb, v, arith::ShLIOp::create(nb, byte, i32c(nb, 8 * j)));
      }
      return v;
    };
    Value row = arith::MinSIOp::create(nb, n.add(w.row0, tid), lastRow);
    Value weightRow =
        arith::MinSIOp::create(nb, n.add(w.col0, tid), lastWeightRow);
    memref::StoreOp::create(nb, word([&](Value block) {
                              return n.load(rowsScales, ValueRange{row, block});
                            }),
                            words, slot);
    memref::StoreOp::create(
        nb, word([&](Value block) {
          return n.load(weightsScales, ValueRange{w.expert, weightRow, block});
        }),
        words, n.add(slot, n.c(T::scaleTileBytes / 4)));
    // The scales are read by tcgen05.cp (the async proxy).
    NVVM::FenceProxyOp::create(
        nb, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
    ifThen(nb, leader, [&](ImplicitLocOpBuilder &lb) {
      IndexMath l{lb};
      Value k0 = l.mul(kStep, l.c(T::tileK));
      nvgpu::MBarrierArriveExpectTxOp::create(lb, full, l.c(2 * T::tileBytes),
                                              stage, Value());
      nvgpu::TmaAsyncLoadOp::create(lb, l.view(smem, base, rowsTile), full,
                                    rowsMap, ValueRange{k0, w.row0}, stage,
                                    Value(), Value());
      nvgpu::TmaAsyncLoadOp::create(
          lb, l.view(smem, l.add(base, l.c(T::tileBytes)), weightsTile), full,
          weightsMap, ValueRange{k0, w.col0, w.expert}, stage, Value(),
          Value());
    });
  };
  auto stageOf = [&](ImplicitLocOpBuilder &nb, Value step) -> Value {
    return arith::RemUIOp::create(nb, step, IndexMath{nb}.c(t.stages));
  };

  // Persistent CTAs over the work items (token tile, column tile); the
  // pipeline step count carries on across items (stages and phases).
  auto items = scf::ForOp::create(
      b, firstWork, numWork, numCTAs, ValueRange{m.c(0)},
      [&](OpBuilder &nested, Location l, Value work, ValueRange iter) {
        ImplicitLocOpBuilder nb(l, nested);
        IndexMath n{nb};
        Value stepBase = iter[0];
        Value slot = arith::DivUIOp::create(nb, work, numColTiles);
        Value colTile = arith::RemUIOp::create(nb, work, numColTiles);
        TileLookup found = scheduler.lookUp(nb, slot);
        WorkItem w{found.expert,
                   n.add(found.rowBegin, n.mul(found.mTile, n.c(T::tileM))),
                   found.rowEnd, n.mul(colTile, n.c(T::tileN))};
        // Every stage is free here: the last item waited for its MMAs.
        for (int64_t s = 0; s < t.stages; ++s)
          ifThen(nb, n.lt(n.c(s), numK), [&](ImplicitLocOpBuilder &pb) {
            IndexMath p{pb};
            fill(pb, w, stageOf(pb, p.add(stepBase, p.c(s))), p.c(s));
          });
        NVVM::Tcgen05FenceOp::create(
            nb, NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
        gpu::BarrierOp::create(nb);
        NVVM::Tcgen05FenceOp::create(nb,
                                     NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
        Value accum = LLVM::IntToPtrOp::create(nb, tmemPtr, tmemBase);
        Value scalesA = LLVM::IntToPtrOp::create(
            nb, tmemPtr,
            arith::AddIOp::create(nb, tmemBase, i32c(nb, T::scaleAColumn))
                .getResult());
        Value scalesB = LLVM::IntToPtrOp::create(
            nb, tmemPtr,
            arith::AddIOp::create(nb, tmemBase, i32c(nb, T::scaleBColumn))
                .getResult());

        scf::ForOp::create(
            nb, n.c(0), numK, n.c(1), ValueRange{},
            [&](OpBuilder &kNested, Location kl, Value kStep, ValueRange) {
              ImplicitLocOpBuilder kb(kl, kNested);
              IndexMath k{kb};
              Value step = k.add(stepBase, kStep);
              Value stage = stageOf(kb, step);
              Value round = arith::DivUIOp::create(kb, step, k.c(t.stages));
              Value parity = arith::RemUIOp::create(kb, round, k.c(2));
              Value base = k.mul(stage, k.c(T::stageBytes));
              // One thread issues the copies and MMAs (they run in its
              // order, so the MMAs see the scales) and the commit.
              ifThen(kb, leader, [&](ImplicitLocOpBuilder &ib) {
                IndexMath i{ib};
                nvgpu::MBarrierTryWaitParityOp::create(
                    ib, full,
                    arith::IndexCastOp::create(ib, ib.getI1Type(), parity),
                    i.c(10000000), stage);
                Value aAddr = sharedAddr(ib, base);
                Value bAddr = sharedAddr(ib, i.add(base, i.c(T::tileBytes)));
                Value sfAddr =
                    sharedAddr(ib, i.add(base, i.c(2 * T::tileBytes)));
                for (auto [dst, offset] :
                     {std::pair{scalesA, int64_t(0)},
                      std::pair{scalesB, T::scaleTileBytes}})
                  NVVM::Tcgen05CpOp::create(
                      ib, NVVM::Tcgen05CpShape::SHAPE_32x128b,
                      NVVM::CTAGroupKind::CTA_1,
                      NVVM::Tcgen05CpMulticast::WARPX4,
                      NVVM::Tcgen05CpSrcFormatAttr(), dst,
                      withAddress(
                          ib, desc.scales,
                          arith::AddIOp::create(ib, sfAddr, i64c(ib, offset))));
                Value notFirst = arith::CmpIOp::create(
                    ib, arith::CmpIPredicate::ne, kStep, i.c(0));
                for (int64_t kk = 0; kk < T::tileK / T::mmaK; ++kk) {
                  Value kBytes = i64c(ib, kk * T::mmaK);
                  Value aDesc =
                      withAddress(ib, desc.operand,
                                  arith::AddIOp::create(ib, aAddr, kBytes));
                  Value bDesc =
                      withAddress(ib, desc.operand,
                                  arith::AddIOp::create(ib, bAddr, kBytes));
                  Value accumulate =
                      kk == 0
                          ? notFirst
                          : arith::ConstantIntOp::create(ib, ib.getI1Type(), 1)
                                .getResult();
                  NVVM::Tcgen05MMABlockScaleOp::create(
                      ib, NVVM::MMABlockScaleKind::MXF8F6F4,
                      NVVM::CTAGroupKind::CTA_1,
                      NVVM::Tcgen05MMABlockScale::BLOCK32,
                      NVVM::Tcgen05MMACollectorOp::DISCARD, accum, aDesc, bDesc,
                      i32c(ib, int32_t(desc.instr[kk])), accumulate, scalesA,
                      scalesB);
                }
                NVVM::Tcgen05CommitOp::create(ib, mmaDone(ib, stage), Value());
              });
              // The stage (tiles, scale tiles, scale columns) is free once
              // its MMAs are done; refill it for K step kStep + stages.
              NVVM::MBarrierTryWaitParityOp::create(
                  kb, mmaDone(kb, stage),
                  arith::IndexCastOp::create(kb, i32, parity),
                  i32c(kb, 10000000));
              Value refill = k.add(kStep, k.c(t.stages));
              ifThen(kb, k.lt(refill, numK), [&](ImplicitLocOpBuilder &rb) {
                fill(rb, w, stage, refill);
              });
              NVVM::Tcgen05FenceOp::create(
                  kb, NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
              gpu::BarrierOp::create(kb);
              NVVM::Tcgen05FenceOp::create(
                  kb, NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
              scf::YieldOp::create(kb);
            });

        // Epilogue: warp w reads accumulator lanes 32 w .. 32 w + 31 (tile
        // rows), 16 f32 columns per tcgen05.ld, and stores bf16 of the rows
        // of the tile's own expert and the columns below N.
        Value row = n.add(w.row0, tid);
        Value rowEnd = arith::MinSIOp::create(nb, w.rowEnd, numRows);
        Value laneField = arith::ShLIOp::create(
            nb, arith::IndexCastOp::create(nb, i32, n.mul(warp, n.c(32))),
            i32c(nb, 16));
        Value rowsAddr = arith::AddIOp::create(nb, tmemBase, laneField);
        scf::ForOp::create(
            nb, n.c(0), n.c(T::tileN / 16), n.c(1), ValueRange{},
            [&](OpBuilder &cNested, Location cl, Value chunk, ValueRange) {
              ImplicitLocOpBuilder cb(cl, cNested);
              IndexMath c{cb};
              Value addr = arith::AddIOp::create(
                  cb, rowsAddr,
                  arith::IndexCastOp::create(cb, i32, c.mul(chunk, c.c(16))));
              Value fragment = NVVM::Tcgen05LdOp::create(
                  cb, VectorType::get({16}, i32), false,
                  NVVM::Tcgen05LdStShape::SHAPE_32X32B,
                  LLVM::IntToPtrOp::create(cb, tmemPtr, addr), Value());
              NVVM::Tcgen05WaitOp::create(cb, NVVM::Tcgen05WaitKind::LOAD);
              ifThen(cb, c.lt(row, rowEnd), [&](ImplicitLocOpBuilder &sb) {
                IndexMath s{sb};
                Value col0 = s.add(w.col0, s.mul(chunk, s.c(16)));
                for (int64_t j = 0; j < 16; ++j) {
                  Value col = s.add(col0, s.c(j));
                  ifThen(sb, s.lt(col, numCols), [&](ImplicitLocOpBuilder &eb) {
                    Value bits = vector::ExtractOp::create(
                        eb, fragment, ArrayRef<int64_t>{j});
                    Value v =
                        arith::BitcastOp::create(eb, eb.getF32Type(), bits);
                    memref::StoreOp::create(
                        eb, arith::TruncFOp::create(eb, eb.getBF16Type(), v),
                        out, ValueRange{row, col});
                  });
                }
              });
              scf::YieldOp::create(cb);
            });
        scf::YieldOp::create(nb, n.add(stepBase, numK));
      });
  (void)items;

  // Tensor memory back (warp 0 allocated it).
  NVVM::Tcgen05FenceOp::create(b, NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
  gpu::BarrierOp::create(b);
  NVVM::Tcgen05FenceOp::create(b, NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
  ifThen(b, warp0, [&](ImplicitLocOpBuilder &nb) {
    NVVM::Tcgen05DeallocOp::create(
        nb, LLVM::IntToPtrOp::create(nb, tmemPtr, tmemBase),
        i32c(nb, T::tmemColumns));
  });
  gpu::ReturnOp::create(b);
  return func;
}
