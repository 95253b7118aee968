//===- DecodeExpertsKernel.cpp - a decode layer's experts in one kernel ---===//
//
// The persistent decode kernel of docs/decode-kernel.md: a layer's gate-up
// GEMM (with its SwiGLU), its down GEMM and its combine as one launch. Its
// work items are the gate-up items, then the down items, each the swap-AB
// item of the grouped GEMM kernel (Sm90Gemm's bf16 mainloop and transposed
// epilogue, unchanged); the two GEMMs share the stages, the mbarriers and
// the pipeline's step count. Counters in global memory, zeroed by the zero
// kernel launched just before it, order them: a down item waits for every
// gate-up item of its token tile, and the CTA that completes a column tile
// of the experts' output combines it for every token.
//
//===----------------------------------------------------------------------===//

#include "DecodeExpertsKernel.h"
#include "KernelSupport.h"
#include "KernelUtils.h"
#include "LaunchPlan.h"
#include "MoE/Conversion/Passes.h"
#include "MoE/Target/Contract.h"
#include "RoutingKernelUtils.h"
#include "Sm90Gemm/GemmKernel.h"
#include "TileScheduler.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::sm90;

GroupedMatmulTile DecodeExpertsSpec::tile(bool gateUp) const {
  GroupedMatmulTile t;
  t.tileM = tileM;
  t.tileN = 64;
  t.tileK = 64;
  t.stages = stages;
  t.swapAB = true;
  t.epilogue = gateUp ? GroupedMatmulTile::Epilogue::SwiGLU
                      : GroupedMatmulTile::Epilogue::Store;
  return t;
}

std::string DecodeExpertsSpec::kernelName() const {
  return llvm::formatv("moe_decode_experts_bf16_{0}x64x64_s{1}_k{2}_off{3}_"
                       "slots{4}",
                       tileM, stages, topK, offsetBits, slotBits)
      .str();
}

int64_t DecodeExpertsSpec::sharedBytes() const {
  return std::max(tile(true).dynamicSharedBytes(),
                  tile(false).dynamicSharedBytes());
}

gpu::GPUFuncOp mlir::moe::buildDecodeZeroKernel(OpBuilder &builder,
                                                Location loc,
                                                gpu::GPUModuleOp module) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  auto counters = MemRefType::get({ShapedType::kDynamic}, b.getI32Type());
  // Nothing of the call's is read: it may run beside the kernel before it.
  gpu::GPUFuncOp func = createKernel(b, kDecodeZeroKernel, {counters});
  IndexMath m{b};
  Value memref = func.getBody().front().getArgument(0);
  Value first = m.add(
      m.mul(gpu::BlockIdOp::create(b, gpu::Dimension::x), m.c(kRoutingThreads)),
      gpu::ThreadIdOp::create(b, gpu::Dimension::x));
  Value stride =
      m.mul(gpu::GridDimOp::create(b, gpu::Dimension::x), m.c(kRoutingThreads));
  scf::ForOp::create(
      b, first, memref::DimOp::create(b, memref, m.c(0)), stride, ValueRange{},
      [&](OpBuilder &nested, Location l, Value i, ValueRange) {
        ImplicitLocOpBuilder nb(l, nested);
        memref::StoreOp::create(nb, i32Constant(nb, 0), memref, ValueRange{i});
        scf::YieldOp::create(nb);
      });
  gpu::ReturnOp::create(b);
  return func;
}

namespace {

/// The kernel's arguments, in order (docs/decode-kernel.md).
enum Arg : unsigned {
  kRowsMap,
  kGateUpMap,
  kInterMap,
  kDownMap,
  kOffsets,
  kInter,
  kExpertsOut,
  kCounters,
  kSlots,
  kWeights,
  kOut,
  kHidden,
  kNumArgs
};

/// One GEMM of the kernel: its GemmKernel (sharing the kernel's launch-wide
/// values), mainloop, epilogue and work order.
struct Gemm {
  Gemm(ImplicitLocOpBuilder &b, const GroupedMatmulTile &tile)
      : t(tile), k(b, t) {}
  GroupedMatmulTile t;
  GemmKernel k;
  std::unique_ptr<GemmMainloop> mainloop;
  std::unique_ptr<GemmEpilogue> epilogue;
  Value numColTiles;
};

/// An atomic add of `v` to counters[i] by this thread; the value before.
Value atomicAdd(ImplicitLocOpBuilder &b, Value counters, Value i, int64_t v) {
  return memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::addi,
                                     i32Constant(b, v), counters, ValueRange{i})
      .getResult();
}

} // namespace

gpu::GPUFuncOp
mlir::moe::buildDecodeExpertsKernel(OpBuilder &builder, Location loc,
                                    gpu::GPUModuleOp module,
                                    const DecodeExpertsSpec &spec) {
  MLIRContext *ctx = builder.getContext();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Gemm up(b, spec.tile(/*gateUp=*/true)), down(b, spec.tile(/*gateUp=*/false));
  auto smemSpace =
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);

  DynamicSharedMemory dynamicSmem(b, module);

  Type ptrType = LLVM::LLVMPointerType::get(ctx), i32 = b.getI32Type(),
       bf16 = b.getBF16Type();
  Type offsetType = b.getIntegerType(spec.offsetBits),
       slotType = b.getIntegerType(spec.slotBits);
  SmallVector<Type> argTypes{
      ptrType,
      ptrType,
      ptrType,
      ptrType,
      MemRefType::get({ShapedType::kDynamic}, offsetType),
      dynamic2D(bf16),
      dynamic2D(bf16),
      MemRefType::get({ShapedType::kDynamic}, i32),
      dynamic2D(slotType),
      dynamic2D(b.getF32Type()),
      dynamic2D(bf16),
      i32};
  auto shared = [&](int64_t n) {
    return MemRefType::get({n}, i32, MemRefLayoutAttrInterface(), smemSpace);
  };
  auto func = gpu::GPUFuncOp::create(
      b, spec.kernelName(), b.getFunctionType(argTypes, {}),
      TypeRange{shared(kCachedEnds), shared(kCachedEnds), shared(1)});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  const int64_t threads = 128;
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({int32_t(threads), 1, 1}));
  func->setAttr(kTensorMapArgsAttr, b.getDenseI64ArrayAttr({0, 1, 2, 3}));
  for (unsigned arg : {0u, 1u, 2u, 3u})
    func.setArgAttr(arg, LLVM::LLVMDialect::getAlignAttrName(),
                    b.getI64IntegerAttr(64));
  Block *entry = &func.getBody().front();
  auto arg = [&](Arg a) { return entry->getArgument(a); };
  b.setInsertionPointToStart(entry);
  IndexMath m{b};

  // Launch-wide values, shared by both GEMMs.
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value smemRaw = dynamicSmem.get(b);
  Value smem = memref::ReinterpretCastOp::create(
      b,
      MemRefType::get({spec.sharedBytes()}, b.getI8Type(),
                      MemRefLayoutAttrInterface(), smemSpace),
      smemRaw, 0, {spec.sharedBytes()}, {1});
  Value barriers = nvgpu::MBarrierCreateOp::create(b, up.k.ty.barriers);
  Value leader =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tid, m.c(0));
  Value inter = arg(kInter), expertsOut = arg(kExpertsOut);
  Value numRows = memref::DimOp::create(b, inter, m.c(0));
  Value hidden = m.toIndex(arg(kHidden));
  Value intermediate = memref::DimOp::create(b, inter, m.c(1));
  for (Gemm *g : {&up, &down}) {
    GemmKernel &k = g->k;
    k.tid = tid;
    k.warpgroup = m.c(0);
    k.rowGroup = m.c(0);
    k.rank = m.c(0);
    k.leader = leader;
    k.smem = smem;
    k.barriers = barriers;
    k.offsets = arg(kOffsets);
    k.numRows = numRows;
    k.threads = threads;
    k.cluster = 1;
    k.tileCols = g->t.outputColumns();
    k.rowsBytes = g->t.tileM * g->t.tileK * 2;
    k.stageBytes = k.rowsBytes + g->t.tileN * g->t.tileK * 2;
  }
  // Gate-up: rows [N, H] x gate_up_weights [E, 2I, H] -> inter [N, I];
  // down: inter x down_weights [E, H, I] -> the experts' output [N, H].
  up.k.rowsMapPtr = arg(kRowsMap);
  up.k.weightsMapPtr = arg(kGateUpMap);
  up.k.out = inter;
  up.k.numCols = intermediate;
  up.k.numK = m.ceilDiv(hidden, up.t.tileK);
  down.k.rowsMapPtr = arg(kInterMap);
  down.k.weightsMapPtr = arg(kDownMap);
  down.k.out = expertsOut;
  down.k.numCols = hidden;
  down.k.numK = m.ceilDiv(intermediate, down.t.tileK);
  for (Gemm *g : {&up, &down}) {
    GemmKernel &k = g->k;
    k.numSteps = k.numK;
    k.rowsMap =
        UnrealizedConversionCastOp::create(b, k.ty.rowsMap, k.rowsMapPtr)
            .getResult(0);
    k.weightsMap =
        UnrealizedConversionCastOp::create(b, k.ty.weightsMap, k.weightsMapPtr)
            .getResult(0);
    g->numColTiles = m.ceilDiv(k.numCols, g->t.itemColumns());
  }

  ifThen(b, leader, [&](ImplicitLocOpBuilder &nb) {
    IndexMath n{nb};
    for (int64_t s = 0; s < spec.stages; ++s)
      nvgpu::MBarrierInitOp::create(nb, barriers, n.c(1), n.c(s), Value());
    NVVM::FenceMbarrierInitOp::create(nb);
    for (Gemm *g : {&up, &down}) {
      nvgpu::TmaPrefetchOp::create(nb, g->k.rowsMap, Value());
      nvgpu::TmaPrefetchOp::create(nb, g->k.weightsMap, Value());
    }
  });
  // Every expert's rows, one token tile per tileM rows: the grouped GEMM's
  // scheduler with one form for all row counts.
  Value numExperts = m.sub(
      memref::DimOp::create(b, arg(kOffsets), m.c(0)).getResult(), m.c(1));
  TileScheduler scheduler = makeTileScheduler(
      b, arg(kOffsets), func.getWorkgroupAttributions()[0],
      func.getWorkgroupAttributions()[1], numExperts, numRows, m.c(1),
      m.c(std::numeric_limits<int32_t>::max()), tid, spec.tileM);
  scheduler.cacheOffsets(b, threads);
  gpu::BarrierOp::create(b);
  scheduler.buildTable(b, threads);
  // The offsets and rows are the route's, index's and gather's; the
  // counters the zero kernel's, which ran before them.
  waitForPreviousKernel(b, /*launchDependents=*/false);

  Value numTiles = scheduler.countTiles(b);
  Value upWork = m.mul(numTiles, up.numColTiles);
  Value downWork = m.mul(numTiles, down.numColTiles);
  Value numWork = m.add(upWork, downWork);
  L2WorkOrder upOrder{scheduler,          numTiles, up.numColTiles, upWork,
                      up.t.itemColumns(), 1,        m.c(0)};
  L2WorkOrder downOrder{
      scheduler, numTiles, down.numColTiles, downWork, down.t.itemColumns(),
      1,         m.c(0)};
  for (Gemm *g : {&up, &down}) {
    g->mainloop = makeBF16Mainloop(g->k);
    g->epilogue = makeTransposedStoreEpilogue(g->k);
    g->mainloop->setUp();
  }
  // The counters: one per token tile (slot), then one per column tile of
  // the experts' output.
  Value counters = arg(kCounters);
  Value columnCounters =
      m.sub(memref::DimOp::create(b, counters, m.c(0)), down.numColTiles);
  Value broadcast = func.getWorkgroupAttributions()[2];
  Value noNext = arith::ConstantIntOp::create(b, b.getI1Type(), 0);

  // Runs item `item` of `g` from pipeline step `stepBase` at `nb` (which
  // is `b`, where the parts emit); its prologue here, as the item before
  // may have been the other GEMM's.
  auto runItem = [&](ImplicitLocOpBuilder &nb, Gemm &g, const WorkItem &item,
                     Value stepBase) {
    IndexMath n{nb};
    g.k.current = item;
    g.k.stepBase = stepBase;
    g.k.issuePrologue(nb, item, stepBase,
                      arith::ConstantIntOp::create(nb, nb.getI1Type(), 1));
    Value rowsHere = arith::MinSIOp::create(nb, n.sub(item.rowEnd, item.row0),
                                            n.c(g.t.tileM));
    // The epilogue ends in a CTA barrier after its stores.
    g.epilogue->emit(*g.mainloop, NextItem{item, stepBase, noNext}, rowsHere);
  };
  // After the CTA barrier that ends an item, its first thread's fence and
  // add publish the CTA's stores; the value before the add.
  auto signal = [&](ImplicitLocOpBuilder &nb, Value index) {
    NVVM::MembarOp::create(nb, NVVM::MemScopeKind::GPU);
    return atomicAdd(nb, counters, index, 1);
  };

  auto loop = scf::WhileOp::create(
      b, TypeRange{b.getIndexType(), b.getIndexType()},
      ValueRange{gpu::BlockIdOp::create(b, gpu::Dimension::x), m.c(0)});
  Location l0 = b.getLoc();
  Block *before =
      b.createBlock(&loop.getBefore(), {}, loop.getResultTypes(), {l0, l0});
  scf::ConditionOp::create(b, m.lt(before->getArgument(0), numWork),
                           before->getArguments());
  Block *after =
      b.createBlock(&loop.getAfter(), {}, loop.getResultTypes(), {l0, l0});
  Value work = after->getArgument(0), stepBase = after->getArgument(1);
  auto phase = scf::IfOp::create(b, TypeRange{b.getIndexType()},
                                 m.lt(work, upWork), /*withElseRegion=*/true);
  {
    // A gate-up item; then its token tile's counter.
    // The GEMM parts emit at `b`: it moves into each branch.
    b.setInsertionPointToStart(phase.thenBlock());
    ImplicitLocOpBuilder &nb = b;
    IndexMath n{nb};
    WorkItem item = upOrder.describe(nb, work);
    runItem(nb, up, item, stepBase);
    ifThen(nb, leader,
           [&](ImplicitLocOpBuilder &ib) { signal(ib, item.slot); });
    scf::YieldOp::create(nb, n.add(stepBase, up.k.numSteps));
  }
  {
    // A down item, once its token tile's activations are complete.
    b.setInsertionPointToStart(phase.elseBlock());
    ImplicitLocOpBuilder &nb = b;
    IndexMath n{nb};
    WorkItem item = downOrder.describe(nb, n.sub(work, upWork));
    ifThen(nb, leader, [&](ImplicitLocOpBuilder &ib) {
      Value target = arith::IndexCastOp::create(ib, i32, up.numColTiles);
      auto spin = scf::WhileOp::create(ib, TypeRange{}, ValueRange{});
      ib.createBlock(&spin.getBefore());
      Value seen = atomicAdd(ib, counters, item.slot, 0);
      scf::ConditionOp::create(
          ib,
          arith::CmpIOp::create(ib, arith::CmpIPredicate::slt, seen, target),
          ValueRange{});
      ib.createBlock(&spin.getAfter());
      NVVM::NanosleepOp::create(ib, i32Constant(ib, 32));
      scf::YieldOp::create(ib);
      ib.setInsertionPointAfter(spin);
      NVVM::MembarOp::create(ib, NVVM::MemScopeKind::GPU);
      // TMA (the async proxy) reads what other CTAs stored.
      NVVM::FenceProxyOp::create(ib, NVVM::ProxyKind::async_global,
                                 NVVM::SharedSpaceAttr());
    });
    gpu::BarrierOp::create(nb);
    runItem(nb, down, item, stepBase);
    // Count the column tile; the CTA that completes it combines it.
    ifThen(nb, leader, [&](ImplicitLocOpBuilder &ib) {
      IndexMath i{ib};
      Value column = arith::DivUIOp::create(ib, item.col0, i.c(64));
      Value seen = signal(ib, i.add(columnCounters, column));
      memref::StoreOp::create(ib, seen, broadcast, ValueRange{i.c(0)});
      NVVM::MembarOp::create(ib, NVVM::MemScopeKind::GPU);
    });
    gpu::BarrierOp::create(nb);
    Value seen = n.toIndex(n.load(broadcast, ValueRange{n.c(0)}));
    ifThen(nb,
           arith::CmpIOp::create(nb, arith::CmpIPredicate::eq, seen,
                                 n.sub(numTiles, n.c(1))),
           [&](ImplicitLocOpBuilder &cb) {
             emitDecodeCombine(cb, spec, tid, item.col0, expertsOut,
                               arg(kSlots), arg(kWeights), arg(kOut), hidden);
           });
    // The combine's reads of shared memory (none) and the next item's
    // prologue: the broadcast is rewritten only after this barrier.
    gpu::BarrierOp::create(nb);
    scf::YieldOp::create(nb, n.add(stepBase, down.k.numSteps));
  }
  b.setInsertionPointAfter(phase);
  Value nextWork = m.add(work, gpu::GridDimOp::create(b, gpu::Dimension::x));
  scf::YieldOp::create(b, ValueRange{nextWork, phase.getResult(0)});
  b.setInsertionPointAfter(loop);
  gpu::ReturnOp::create(b);
  return func;
}

void mlir::moe::emitDecodeCombine(ImplicitLocOpBuilder &b,
                                  const DecodeExpertsSpec &spec, Value tid,
                                  Value col0, Value rows, Value slots,
                                  Value weights, Value out, Value hidden) {
  // Thread t: columns col0 + 8 (t % 8) .. + 8 of tokens t / 8, t / 8 + 16,
  // ...: the combine kernel's sum (docs/runtime-contract.md §3.3) of 8
  // columns, in slot order in f32, rounded once.
  IndexMath m{b};
  constexpr int64_t kVector = 8;
  auto bf16Vector = VectorType::get({kVector}, b.getBF16Type());
  Value numRows = memref::DimOp::create(b, rows, m.c(0));
  Value tokens = memref::DimOp::create(b, out, m.c(0));
  Value col =
      m.add(col0, m.mul(arith::RemUIOp::create(b, tid, m.c(8)), m.c(kVector)));
  Value firstToken = arith::DivUIOp::create(b, tid, m.c(8));
  ifThen(b, m.lt(col, hidden), [&](ImplicitLocOpBuilder &nb) {
    scf::ForOp::create(
        nb, firstToken, tokens, IndexMath{nb}.c(16), ValueRange{},
        [&](OpBuilder &nested, Location l, Value t, ValueRange) {
          ImplicitLocOpBuilder ib(l, nested);
          CombineSlots pairs =
              loadCombineSlots(ib, slots, weights, t, numRows, spec.topK);
          Value acc = combineColumns(ib, rows, pairs, col);
          vector::StoreOp::create(
              ib, arith::TruncFOp::create(ib, bf16Vector, acc), out,
              ValueRange{t, col}, /*nontemporal=*/false, llvm::Align(16));
          scf::YieldOp::create(ib);
        });
  });
}

LogicalResult mlir::moe::addDecodePart(OpBuilder &builder,
                                       gpu::GPUModuleOp kernels,
                                       LayerChain chain, int64_t maxTokens) {
  auto config = chain.mlp->getAttrOfType<ExpertMLPKernelsAttr>(kKernelsAttr);
  int64_t decode = config ? config.getDecode() : 0;
  // The combine must be the weighted sum of the slots alone, the rows the
  // gather's bf16 ones, one per slot, and the activation not rounded.
  if (decode == 0 || chain.rowsQuantize || chain.mlp.getIntermediateAttr() ||
      !chain.combine.getWeights() || chain.combine.getShared() ||
      chain.permute.getPadTo())
    return success();
  auto mlpLaunch = chain.mlp->getAttrOfType<ArrayAttr>(kLaunchAttr);
  if (!mlpLaunch)
    return success();
  Location loc = chain.mlp.getLoc();
  auto slots = cast<RankedTensorType>(chain.permute.getSlots().getType());
  auto offsets = cast<RankedTensorType>(chain.permute.getOffsets().getType());
  auto down = cast<RankedTensorType>(chain.mlp.getDownWeights().getType());
  GemmFormAttr first = *config.getGateUp().getFormList().begin();
  DecodeExpertsSpec spec;
  spec.tileM = first.getTileM();
  spec.stages = first.getStages();
  spec.topK = slots.getDimSize(1);
  spec.offsetBits = offsets.getElementType().getIntOrFloatBitWidth();
  spec.slotBits = slots.getElementType().getIntOrFloatBitWidth();
  gpu::GPUFuncOp zero = lookUpOrBuild(kernels, kDecodeZeroKernel, [&] {
    return buildDecodeZeroKernel(builder, loc, kernels);
  });
  gpu::GPUFuncOp experts = lookUpOrBuild(kernels, spec.kernelName(), [&] {
    return buildDecodeExpertsKernel(builder, loc, kernels, spec);
  });
  DictionaryAttr zeroForm = kernelForm(builder, zero),
                 expertsForm = kernelForm(builder, experts);
  experts->setAttr("moe.dynamic_shared_bytes",
                   builder.getI64IntegerAttr(spec.sharedBytes()));
  auto dynamic = [](int64_t size) {
    return ShapedType::isDynamic(size) ? int64_t(-1) : size;
  };
  NamedAttrList info;
  info.set("part", builder.getStringAttr("decode"));
  info.set("abi", builder.getStringAttr("planned.v1"));
  info.set("op", builder.getStringAttr("moe.decode_experts"));
  info.set("max_rows", builder.getI64IntegerAttr(maxTokens));
  // For the plan only (planned.v1 entries have no shape keys).
  info.set("decode_max_tokens", builder.getI64IntegerAttr(decode));
  info.set("tile_m", builder.getI64IntegerAttr(spec.tileM));
  info.set("top_k", builder.getI64IntegerAttr(spec.topK));
  info.set("experts", builder.getI64IntegerAttr(offsets.getDimSize(0) - 1));
  info.set("hidden", builder.getI64IntegerAttr(dynamic(down.getDimSize(1))));
  info.set("intermediate",
           builder.getI64IntegerAttr(dynamic(down.getDimSize(2))));
  info.set("offsets", TypeAttr::get(offsets.getElementType()));
  info.set("slots", TypeAttr::get(slots.getElementType()));
  info.set("kernels", builder.getArrayAttr({zeroForm, expertsForm}));
  if (failed(plan::addLaunchPlan(builder, loc, info, {zero, experts}, "")))
    return failure();
  SmallVector<Attribute> parts(mlpLaunch.getValue());
  parts.push_back(info.getDictionary(builder.getContext()));
  chain.mlp->setAttr(kLaunchAttr, builder.getArrayAttr(parts));
  return success();
}
