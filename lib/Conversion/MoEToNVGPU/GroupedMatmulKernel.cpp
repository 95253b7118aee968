//===- GroupedMatmulKernel.cpp - sm_90a grouped GEMM kernel shell ---------===//
//
// The kernel shell of the sm_90a grouped GEMM (docs/hopper-notes.md): its
// signature, set-up (mbarriers, the tile scheduler), the producer and
// consumer roles of warp-specialized forms, and the persistent work loop
// that runs each work item through the mainloop of its operand format and
// its epilogue (the parts in Sm90Gemm/, see Sm90Gemm/GemmKernel.h).
//
//===----------------------------------------------------------------------===//

#include "GroupedMatmulKernel.h"
#include "KernelUtils.h"
#include "MoE/Conversion/Passes.h"
#include "QuantizeKernel.h"
#include "Sm90Gemm/GemmKernel.h"
#include "TileScheduler.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::sm90;

/// Shared memory holds `stages` (rows tile, weights tile) pairs and, for
/// the normal form, a bf16 staging tile per warpgroup, so the next tile's
/// loads can overlap the epilogue. Swap-AB's epilogue reuses the stages for
/// its small f32 tile instead (more resident CTAs for decode).
/// The sizes below come from options and hand-written forms: every product
/// and sum saturates at INT64_MAX, which no shared-memory budget admits,
/// instead of wrapping into one that does.
static int64_t satMul(int64_t a, int64_t b) {
  return llvm::checkedMul(a, b).value_or(std::numeric_limits<int64_t>::max());
}
static int64_t satAdd(int64_t a, int64_t b) {
  return llvm::checkedAdd(a, b).value_or(std::numeric_limits<int64_t>::max());
}

int64_t GroupedMatmulTile::dynamicSharedBytes() const {
  int64_t widenedBytes = widened() ? satMul(2, widenedStageBytes()) : 0;
  int64_t scaleBytes =
      mxfp8() ? satMul(satMul(scaleBuffers(), scaleBlocksPerStep()),
                       satMul(satAdd(tileN, tileM), 4))
              : 0;
  return satAdd(satAdd(tileSharedBytes(), widenedBytes), scaleBytes);
}

/// What dynamicSharedBytes() holds before the MXFP8 scale buffers (last).
int64_t GroupedMatmulTile::tileSharedBytes() const {
  int64_t stageBytes =
      satMul(satMul(satAdd(tileM, tileN), tileK), elementBytes());
  int64_t stagesBytes = satMul(stages, stageBytes);
  // A quantized output keeps the item's bf16 activations (and swap-AB its
  // f32 tile) apart: the next pass's loads are in the stages meanwhile.
  if (quantizeOut)
    return satAdd(
        satAdd(stagesBytes,
               satMul(satMul(warpgroups(), activationRows()), kOutGroup * 2)),
        swapAB ? satMul(64 * 4, accumulatorColumns()) : 0);
  if (swapAB)
    return std::max(stagesBytes,
                    satMul(kSplit(), satMul(64 * 4, accumulatorColumns())));
  return satAdd(stagesBytes, satMul(warpgroups(), kStagingBytes));
}

std::string GroupedMatmulTile::kernelName(Type offsetType) const {
  std::string suffix = epilogue == Epilogue::SwiGLU           ? "_swiglu"
                       : epilogue == Epilogue::RowScale       ? "_rowscale"
                       : epilogue == Epilogue::ActivationGrad ? "_actgrad"
                                                              : "";
  // GPT-OSS's constants by their bits: kernels differ exactly when they do.
  if ((gated() || activationGrad()) && activation == Activation::GptOss)
    suffix += "_gptoss_a" +
              llvm::utohexstr(llvm::bit_cast<uint32_t>(alpha), true) + "_l" +
              llvm::utohexstr(llvm::bit_cast<uint32_t>(limit), true);
  if (biasType)
    suffix += biasType.isBF16() ? "_biasbf16" : "_biasf32";
  if (weightsKN())
    suffix += "_wkn";
  if (quantizeOut)
    suffix += "_e4m3out";
  if (roundTripOut)
    suffix += mxRoundTripSuffix(roundTripOut);
  if (clusterSize() > 1)
    suffix += "_c" + std::to_string(clusterSize());
  if (pingpong)
    suffix += "_pp";
  else if (specialized())
    suffix += "_ws";
  if (kSplit() > 1)
    suffix += "_k" + std::to_string(kSplit());
  if (tmaStores())
    suffix += "_tmastore";
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

/// The mainloop of the tile's operand format.
static std::unique_ptr<GemmMainloop> makeMainloop(GemmKernel &k) {
  switch (k.t.format) {
  case GroupedMatmulTile::Format::BF16:
    return makeBF16Mainloop(k);
  case GroupedMatmulTile::Format::FP8Block:
    return makeBlockFP8Mainloop(k);
  case GroupedMatmulTile::Format::MXFP8:
    return k.t.widened() ? makeWidenedMXFP8Mainloop(k) : makeMXFP8Mainloop(k);
  }
  llvm_unreachable("unknown operand format");
}

/// The epilogue of the tile's output and form.
static std::unique_ptr<GemmEpilogue> makeEpilogue(GemmKernel &k) {
  if (k.t.quantizeOut)
    return makeQuantizeEpilogue(k);
  return k.t.swapAB ? makeTransposedStoreEpilogue(k)
                    : makeStagedStoreEpilogue(k);
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
  GemmKernel k(b, t);
  const KernelTypes &ty = k.ty;

  DynamicSharedMemory dynamicSmem(b, module);

  auto ptrType = LLVM::LLVMPointerType::get(ctx);
  auto offsetsType = MemRefType::get({ShapedType::kDynamic}, offsetType);
  auto outType = MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                                 t.quantizeOut ? Type(b.getI8Type())
                                               : Type(b.getBF16Type()));
  Type i32 = b.getI32Type();
  // A TMA-storing kernel's out tensor map comes third: tensor maps lead,
  // where memref expansion keeps their parameter index.
  bool outMap = t.tmaStores();
  SmallVector<Type> argTypes{ptrType, ptrType};
  if (outMap)
    argTypes.push_back(ptrType);
  argTypes.append({offsetsType, outType, i32, i32, i32});
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
  if (t.activationGrad())
    argTypes.push_back(MemRefType::get(
        {ShapedType::kDynamic, ShapedType::kDynamic}, b.getBF16Type()));
  auto funcType = b.getFunctionType(argTypes, {});
  auto func = gpu::GPUFuncOp::create(
      b, t.kernelName(offsetType), funcType,
      TypeRange{MemRefType::get({kCachedEnds}, i32, MemRefLayoutAttrInterface(),
                                ty.smem),
                MemRefType::get({kCachedEnds}, i32, MemRefLayoutAttrInterface(),
                                ty.smem)});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  int64_t threads = k.threads = t.threads();
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({int32_t(threads), 1, 1}));
  int64_t cluster = k.cluster = t.clusterSize();
  if (cluster > 1)
    func.setKnownClusterSizeAttr(
        b.getDenseI32ArrayAttr({int32_t(cluster), 1, 1}));
  // The tensor maps travel by value in parameter space (see
  // docs/runtime-contract.md); moe-finalize-kernel-abi marks them so once
  // the function is an llvm.func, since gpu.func drops llvm.byval.
  SmallVector<int64_t, 3> mapArgs{0, 1};
  if (outMap)
    mapArgs.push_back(2);
  func->setAttr(kTensorMapArgsAttr, b.getDenseI64ArrayAttr(mapArgs));
  for (int64_t arg : mapArgs)
    func.setArgAttr(arg, LLVM::LLVMDialect::getAlignAttrName(),
                    b.getI64IntegerAttr(64));

  Block *entry = &func.getBody().front();
  k.rowsMapPtr = entry->getArgument(0);
  k.weightsMapPtr = entry->getArgument(1);
  unsigned nextArg = 2;
  k.outMapPtr = outMap ? entry->getArgument(nextArg++) : Value();
  Value offsets = k.offsets = entry->getArgument(nextArg++);
  Value out = k.out = entry->getArgument(nextArg++);
  Value kArg = entry->getArgument(nextArg++);
  b.setInsertionPointToStart(entry);
  IndexMath m{b};
  Value rowsMin = m.toIndex(entry->getArgument(nextArg++));
  Value rowsMax = m.toIndex(entry->getArgument(nextArg++));
  k.rowsScales = t.fp8() ? entry->getArgument(nextArg++) : Value();
  k.weightsScales = t.fp8() ? entry->getArgument(nextArg++) : Value();
  k.outScales = t.quantizeOut ? entry->getArgument(nextArg++) : Value();
  k.rowScales = rowScale ? entry->getArgument(nextArg++) : Value();
  k.biases = t.biasType ? entry->getArgument(nextArg++) : Value();
  k.actInput = t.activationGrad() ? entry->getArgument(nextArg++) : Value();

  Value tid = k.tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  k.warpgroup = arith::DivUIOp::create(b, tid, m.c(128));
  // Ping-pong: each consumer warpgroup holds all rows of its own item.
  k.rowGroup = t.pingpong ? m.c(0) : k.warpgroup;
  // Clustered: this CTA's half of each work item; rank 0 loads the rows.
  k.rank = m.c(0);
  if (cluster > 1)
    k.rank = arith::IndexCastOp::create(
        b, b.getIndexType(),
        NVVM::ClusterId::create(b, b.getI32Type()).getResult());
  Value numExperts =
      m.sub(memref::DimOp::create(b, offsets, m.c(0)).getResult(), m.c(1));
  Value numRows = k.numRows = memref::DimOp::create(b, out, m.c(0));
  k.numCols = memref::DimOp::create(b, out, m.c(1));
  // An activation's gradient: N gate then N up columns of out per column.
  if (t.activationGrad())
    k.numCols = arith::DivUIOp::create(b, k.numCols, m.c(2));
  k.tileCols = t.outputColumns();
  // Clustered: a work item's columns are split between the cluster's CTAs.
  Value numColTiles = m.ceilDiv(k.numCols, t.itemColumns() * cluster);
  k.numK = m.ceilDiv(m.toIndex(kArg), t.tileK);
  // A work item's K steps: those of each of its passes, back to back.
  k.numSteps = m.mul(k.numK, m.c(t.passes()));

  k.rowsMap = UnrealizedConversionCastOp::create(b, ty.rowsMap, k.rowsMapPtr)
                  .getResult(0);
  k.weightsMap =
      UnrealizedConversionCastOp::create(b, ty.weightsMap, k.weightsMapPtr)
          .getResult(0);
  if (k.outMapPtr)
    k.outMap = UnrealizedConversionCastOp::create(b, ty.outMap, k.outMapPtr)
                   .getResult(0);
  Value smemRaw = dynamicSmem.get(b);
  k.smem = memref::ReinterpretCastOp::create(b, ty.sharedBytes, smemRaw, 0,
                                             {t.dynamicSharedBytes()}, {1});
  if (t.weightsKN())
    k.smemAddress = arith::IndexCastOp::create(
        b, b.getI64Type(),
        memref::ExtractAlignedPointerAsIndexOp::create(b, smemRaw).getResult());

  k.rowsBytes = t.tileM * t.tileK * t.elementBytes();
  k.stageBytes = k.rowsBytes + t.tileN * t.tileK * t.elementBytes();
  k.specialized = t.specialized();
  Value barriers = k.barriers = nvgpu::MBarrierCreateOp::create(b, ty.barriers);
  k.leader = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tid, m.c(0));
  ifThen(b, k.leader, [&](ImplicitLocOpBuilder &nb) {
    IndexMath n{nb};
    // The issuer's expect-tx arrival; warp-specialized MXFP8, also every
    // producer thread's once it stored the step's scales.
    int64_t fullArrivals = t.specialized() && t.mxfp8() ? 1 + 128 : 1;
    for (int64_t s = 0; s < t.stages; ++s)
      nvgpu::MBarrierInitOp::create(nb, barriers, n.c(fullArrivals), n.c(s),
                                    Value());
    // Every thread of the stage's readers arrives on its empty mbarrier.
    for (int64_t s = 0; s < t.stages && t.specialized(); ++s)
      nvgpu::MBarrierInitOp::create(nb, barriers, n.c(128 * t.stageReaders()),
                                    n.c(t.stages + s), Value());
    // Ping-pong: every thread of the other consumer warpgroup passes the
    // turn.
    for (int64_t w = 0; w < 2 && t.pingpong; ++w)
      nvgpu::MBarrierInitOp::create(nb, barriers, n.c(128),
                                    n.c(2 * t.stages + w), Value());
    NVVM::FenceMbarrierInitOp::create(nb);
    nvgpu::TmaPrefetchOp::create(nb, k.rowsMap, Value());
    nvgpu::TmaPrefetchOp::create(nb, k.weightsMap, Value());
    if (k.outMap)
      nvgpu::TmaPrefetchOp::create(nb, k.outMap, Value());
  });
  // The set-up above, and the tile table, overlap the previous kernel: the
  // offsets are complete when this kernel can launch (contract §3.6: in a
  // layer they are written two kernels back, and every kernel of ours lets
  // the next launch only after its own wait), the rows are the previous
  // kernel's output. A GEMM lets the next kernel launch only when it ends:
  // launched early, the next kernel's CTAs would wait on the SMs beside
  // this one's for all of its run.
  TileScheduler scheduler =
      makeTileScheduler(b, offsets, func.getWorkgroupAttributions()[0],
                        func.getWorkgroupAttributions()[1], numExperts, numRows,
                        rowsMin, rowsMax, tid, t.tileM);
  scheduler.cacheOffsets(b, threads);
  // Clustered, also: the peer's mbarriers are initialized before the first
  // multicast lands on them.
  k.syncStages(b);
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
  L2WorkOrder order{scheduler,       numTiles, numColTiles, numWork,
                    t.itemColumns(), cluster,  k.rank};

  std::unique_ptr<GemmMainloop> mainloop = makeMainloop(k);
  std::unique_ptr<GemmEpilogue> epilogue = makeEpilogue(k);
  mainloop->setUp();

  Value firstWork = arith::DivUIOp::create(
      b, gpu::BlockIdOp::create(b, gpu::Dimension::x), m.c(cluster));
  // Warp-specialized: the last warpgroup loads every step of the CTA's
  // items (pipeline step p into stage p % stages once its previous contents
  // were released), the others consume them below.
  bool specialized = k.specialized;
  Operation *roles = nullptr;
  if (specialized) {
    Value isProducer = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                             k.warpgroup, m.c(t.warpgroups()));
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
    WorkItem w = order.describe(pb, work);
    auto steps = scf::ForOp::create(
        pb, p.c(0), k.numSteps, p.c(1), ValueRange{body->getArgument(1)},
        [&](OpBuilder &nested, Location nl, Value itemStep, ValueRange iter) {
          ImplicitLocOpBuilder sb(nl, nested);
          IndexMath n{sb};
          Value step = iter[0];
          Value stage = k.stageOf(sb, step);
          // What the mainloop stages besides the TMA loads, loaded while
          // the stage drains.
          Value loader = n.sub(tid, n.c(128 * t.warpgroups()));
          SmallVector<Value> loaded =
              mainloop->producerLoad(sb, w, itemStep, loader);
          Value use = k.stageDiv(sb, step, /*round=*/true);
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
            k.issueLoad(ib, w, stage, itemStep);
          });
          mainloop->producerPublish(sb, loaded, stage, loader);
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
  // Ping-pong: consumer warpgroup w takes the CTA's items w, w + 2, ...
  // (item i's steps are the producer's i * numSteps ..).
  Value itemStride = numCTAs, stepStride = k.numSteps, firstStep;
  if (t.pingpong) {
    firstWork = m.add(firstWork, m.mul(k.warpgroup, numCTAs));
    firstStep = m.mul(k.warpgroup, k.numSteps);
    itemStride = m.mul(numCTAs, m.c(2));
    stepStride = m.mul(k.numSteps, m.c(2));
  }
  WorkItem first = order.describe(b, firstWork);
  if (!specialized)
    k.issuePrologue(b, first, m.c(0), m.lt(firstWork, numWork));

  Type indexType = b.getIndexType();
  SmallVector<Type> carried(6, indexType);
  SmallVector<Value> initial{firstWork,    firstStep ? firstStep : m.c(0),
                             first.expert, first.row0,
                             first.rowEnd, first.col0};
  auto loop = scf::WhileOp::create(b, carried, initial);
  Location loc0 = b.getLoc();
  SmallVector<Location> locs(carried.size(), loc0);
  Block *before = b.createBlock(&loop.getBefore(), {}, carried, locs);
  scf::ConditionOp::create(b, m.lt(before->getArgument(0), numWork),
                           before->getArguments());
  Block *after = b.createBlock(&loop.getAfter(), {}, carried, locs);
  Value work = after->getArgument(0);
  k.stepBase = after->getArgument(1);
  k.current = WorkItem{after->getArgument(2), after->getArgument(3),
                       after->getArgument(4), after->getArgument(5)};
  // The next item is looked up while this one's first loads are in flight.
  Value nextWork = m.add(work, itemStride);
  NextItem next{order.describe(b, nextWork), m.add(k.stepBase, stepStride),
                m.lt(nextWork, numWork)};
  Value rowsHere = arith::MinSIOp::create(
      b, m.sub(k.current.rowEnd, k.current.row0), m.c(t.tileM));
  epilogue->emit(*mainloop, next, rowsHere);
  scf::YieldOp::create(b, ValueRange{nextWork, next.stepBase, next.item.expert,
                                     next.item.row0, next.item.rowEnd,
                                     next.item.col0});
  b.setInsertionPointAfter(loop);
  epilogue->finish();
  // No CTA leaves while its peer may still multicast into it.
  if (cluster > 1)
    k.syncStages(b);
  if (roles)
    b.setInsertionPointAfter(roles);
  gpu::ReturnOp::create(b);
  return func;
}
