//===- GroupedWgradKernel.cpp - sm_90a grouped weight-gradient GEMM -------===//
//
// The kernel of GroupedWgradKernel.h. A CTA finds its expert's clamped row
// range, streams the range in steps of tileK rows through `stages` TMA
// buffers (thread 0 loads, an mbarrier per stage), multiplies each step by
// k16 wgmma with both operands transposed (the activations lie [rows, cols]:
// M-major A, N-major B), and stores its f32 tile as bf16 through a staging
// tile in the drained stage buffers (whole rows, 16 bytes a lane). The last
// step's rows past the expert belong to the next one: each warpgroup zeroes
// them in its A buffer before its wgmma read it.
//
//===----------------------------------------------------------------------===//

#include "GroupedWgradKernel.h"
#include "KernelUtils.h"
#include "MoE/Conversion/Passes.h"
#include "Sm90Gemm/Fragment.h"
#include "Sm90Gemm/GemmKernel.h"

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

/// Columns of one TMA box (128 bytes of bf16: one row of the swizzle).
static constexpr int64_t kBox = 64;
/// Bytes of one box of tileK = 64 rows.
static constexpr int64_t kBoxBytes = 64 * kBox * 2;

std::string GroupedWgradTile::kernelName(Type offsetType) const {
  return llvm::formatv("grouped_wgrad_bf16_{0}x{1}x{2}_s{3}_off{4}", tileM,
                       tileN, tileK, stages, offsetType.getIntOrFloatBitWidth())
      .str();
}

gpu::GPUFuncOp mlir::moe::buildGroupedWgradKernel(OpBuilder &builder,
                                                  Location loc,
                                                  gpu::GPUModuleOp module,
                                                  const GroupedWgradTile &t,
                                                  Type offsetType) {
  MLIRContext *ctx = builder.getContext();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Type bf16 = b.getBF16Type(), f32 = b.getF32Type(), i32 = b.getI32Type(),
       i64 = b.getI64Type();
  auto smemSpace =
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto shared = [&](ArrayRef<int64_t> shape, Type element) {
    return MemRefType::get(shape, element, MemRefLayoutAttrInterface(),
                           smemSpace);
  };
  MemRefType boxType = shared({t.tileK, kBox}, bf16);
  auto mapType = nvgpu::TensorMapDescriptorType::get(
      ctx, boxType, nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
      nvgpu::TensorMapL2PromoKind::L2PROMO_NONE,
      nvgpu::TensorMapOOBKind::OOB_ZERO,
      nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
  auto barriersType = nvgpu::MBarrierGroupType::get(ctx, smemSpace, t.stages);
  auto accType = nvgpu::WarpgroupAccumulatorType::get(
      ctx, VectorType::get({64, t.tileN}, f32));
  // The descriptors' operand shapes, as nvgpu.warpgroup.mma verifies them
  // (A [64, k16], B [k16, tileN]); the words are built here.
  auto descAType =
      nvgpu::WarpgroupMatrixDescriptorType::get(ctx, shared({64, 16}, bf16));
  auto descBType = nvgpu::WarpgroupMatrixDescriptorType::get(
      ctx, shared({16, t.tileN}, bf16));

  DynamicSharedMemory dynamicSmem(b, module);

  auto ptrType = LLVM::LLVMPointerType::get(ctx);
  auto offsetsType = MemRefType::get({ShapedType::kDynamic}, offsetType);
  auto outType = MemRefType::get(
      {ShapedType::kDynamic, ShapedType::kDynamic, ShapedType::kDynamic}, bf16);
  auto func = gpu::GPUFuncOp::create(
      b, t.kernelName(offsetType),
      b.getFunctionType({ptrType, ptrType, offsetsType, outType, i32}, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({int32_t(t.threads()), 1, 1}));
  func->setAttr(kTensorMapArgsAttr, b.getDenseI64ArrayAttr({0, 1}));
  for (unsigned arg : {0u, 1u})
    func.setArgAttr(arg, LLVM::LLVMDialect::getAlignAttrName(),
                    b.getI64IntegerAttr(64));

  Block *entry = &func.getBody().front();
  b.setInsertionPointToStart(entry);
  IndexMath m{b};
  Value offsets = entry->getArgument(2), out = entry->getArgument(3);
  Value numRows = arith::ExtUIOp::create(b, i64, entry->getArgument(4));
  Value gradMap =
      UnrealizedConversionCastOp::create(b, mapType, entry->getArgument(0))
          .getResult(0);
  Value rowsMap =
      UnrealizedConversionCastOp::create(b, mapType, entry->getArgument(1))
          .getResult(0);
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value warpgroup = arith::DivUIOp::create(b, tid, m.c(128));
  Value leader =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tid, m.c(0));

  // The CTA's expert and output tile, expert-major.
  Value numCols = memref::DimOp::create(b, out, m.c(1));
  Value numK = memref::DimOp::create(b, out, m.c(2));
  Value colTiles = m.ceilDiv(numK, t.tileN);
  Value tiles = m.mul(m.ceilDiv(numCols, t.tileM), colTiles);
  Value block = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value expert = arith::DivUIOp::create(b, block, tiles);
  Value tile = arith::RemUIOp::create(b, block, tiles);
  Value m0 = m.mul(arith::DivUIOp::create(b, tile, colTiles), m.c(t.tileM));
  Value n0 = m.mul(arith::RemUIOp::create(b, tile, colTiles), m.c(t.tileN));

  Value smemRaw = dynamicSmem.get(b);
  Value smem = memref::ReinterpretCastOp::create(
      b, shared({t.dynamicSharedBytes()}, b.getI8Type()), smemRaw, 0,
      {t.dynamicSharedBytes()}, {1});
  Value smemAddress = arith::IndexCastOp::create(
      b, i64,
      memref::ExtractAlignedPointerAsIndexOp::create(b, smemRaw).getResult());
  Value barriers = nvgpu::MBarrierCreateOp::create(b, barriersType);
  ifThen(b, leader, [&](ImplicitLocOpBuilder &nb) {
    IndexMath n{nb};
    for (int64_t s = 0; s < t.stages; ++s)
      nvgpu::MBarrierInitOp::create(nb, barriers, n.c(1), n.c(s), Value());
    NVVM::FenceMbarrierInitOp::create(nb);
    nvgpu::TmaPrefetchOp::create(nb, gradMap, Value());
    nvgpu::TmaPrefetchOp::create(nb, rowsMap, Value());
  });
  gpu::BarrierOp::create(b);
  // The offsets and both operands are the previous kernels' outputs.
  waitForPreviousKernel(b, /*launchDependents=*/false);

  // The expert's rows after the clamp (docs/semantics.md): from the running
  // maximum of offsets[0..e] to that of offsets[0..e+1], within [0, M].
  // Each warp reduces the offsets lane-strided, then across its lanes.
  Value lane = arith::RemUIOp::create(b, tid, m.c(32));
  Value zero64 = arith::ConstantIntOp::create(b, i64, 0);
  auto scan = scf::ForOp::create(
      b, lane, m.add(expert, m.c(2)), m.c(32), ValueRange{zero64, zero64},
      [&](OpBuilder &nested, Location l, Value j, ValueRange iter) {
        ImplicitLocOpBuilder lb(l, nested);
        IndexMath o{lb};
        Value v = o.load(offsets, j);
        if (!v.getType().isInteger(64))
          v = arith::ExtSIOp::create(lb, i64, v);
        Value lo = arith::SelectOp::create(
            lb, o.le(j, expert), arith::MaxSIOp::create(lb, iter[0], v),
            iter[0]);
        Value hi = arith::MaxSIOp::create(lb, iter[1], v);
        scf::YieldOp::create(lb, ValueRange{lo, hi});
      });
  auto maxOf = [&](Value v) {
    return warpReduce(b, v, [&](Value x, Value y) -> Value {
      return arith::MaxSIOp::create(b, x, y);
    });
  };
  Value start = arith::MinSIOp::create(b, maxOf(scan.getResult(0)), numRows);
  Value end = arith::MinSIOp::create(b, maxOf(scan.getResult(1)), numRows);
  Value row0 = arith::IndexCastOp::create(b, b.getIndexType(), start);
  Value rowsHere = arith::IndexCastOp::create(
      b, b.getIndexType(), arith::SubIOp::create(b, end, start));
  Value numSteps = m.ceilDiv(rowsHere, t.tileK);

  // Step s of the expert's rows into `stage`: the gradient's columns
  // [m0, m0 + tileM) then the rows' [n0, n0 + tileN), a box per 64.
  int64_t aBytes = t.tileM * t.tileK * 2;
  auto issueLoad = [&](ImplicitLocOpBuilder &nb, Value step, Value stage) {
    IndexMath n{nb};
    Value base = n.mul(stage, n.c(t.stageBytes()));
    Value row = n.add(row0, n.mul(step, n.c(t.tileK)));
    nvgpu::MBarrierArriveExpectTxOp::create(nb, barriers, n.c(t.stageBytes()),
                                            stage, Value());
    auto load = [&](Value map, int64_t at, Value col) {
      nvgpu::TmaAsyncLoadOp::create(
          nb, n.view(smem, n.add(base, n.c(at)), boxType), barriers, map,
          ValueRange{col, row}, stage, Value(), Value());
    };
    for (int64_t j = 0; j < t.tileM / kBox; ++j)
      load(gradMap, j * kBoxBytes, n.add(m0, n.c(j * kBox)));
    for (int64_t j = 0; j < t.tileN / kBox; ++j)
      load(rowsMap, aBytes + j * kBoxBytes, n.add(n0, n.c(j * kBox)));
  };
  for (int64_t s = 0; s < t.stages; ++s)
    ifThen(b, arith::AndIOp::create(b, leader, m.lt(m.c(s), numSteps)),
           [&](ImplicitLocOpBuilder &nb) {
             issueLoad(nb, IndexMath{nb}.c(s), IndexMath{nb}.c(s));
           });

  // Both operands lie in boxes of 64 columns x tileK rows (M- and N-major).
  auto descriptor = [&](ImplicitLocOpBuilder &nb, Value offset,
                        Type type) -> Value {
    return nMajorDescriptor(nb, smemAddress, offset, t.tileK, type);
  };

  Value acc0 = nvgpu::WarpgroupMmaInitAccumulatorOp::create(b, accType);
  int64_t groupsPerStep = t.tileK / 16;
  auto loop = scf::ForOp::create(
      b, m.c(0), numSteps, m.c(1), ValueRange{acc0},
      [&](OpBuilder &nested, Location l, Value step, ValueRange iter) {
        ImplicitLocOpBuilder lb(l, nested);
        IndexMath o{lb};
        Value stage = arith::RemUIOp::create(lb, step, o.c(t.stages));
        Value parity = arith::IndexCastOp::create(
            lb, lb.getI1Type(),
            arith::RemUIOp::create(
                lb, arith::DivUIOp::create(lb, step, o.c(t.stages)), o.c(2)));
        nvgpu::MBarrierTryWaitParityOp::create(lb, barriers, parity,
                                               o.c(10000000), stage);
        Value base = o.mul(stage, o.c(t.stageBytes()));
        // This warpgroup's A box: gradient columns [m0 + 64w, + 64).
        Value aBase = o.add(base, o.mul(warpgroup, o.c(kBoxBytes)));
        // Rows of the step past the expert (the next expert's) are zeroed
        // in every box of the stage, 16 bytes a thread, before the wgmma
        // read them through the async proxy (zeros times a non-finite value
        // of the next expert's rows would not vanish).
        Value valid = o.sub(rowsHere, o.mul(step, o.c(t.tileK)));
        ifThen(lb, o.lt(valid, o.c(t.tileK)), [&](ImplicitLocOpBuilder &zb) {
          IndexMath z{zb};
          int64_t boxes = (t.tileM + t.tileN) / kBox;
          Value perBox = z.mul(z.sub(z.c(t.tileK), valid), z.c(kBox * 2 / 16));
          Value zeros = arith::ConstantOp::create(
              zb, DenseElementsAttr::get(VectorType::get({16}, zb.getI8Type()),
                                         zb.getI8IntegerAttr(0)));
          scf::ForOp::create(
              zb, tid, z.mul(perBox, z.c(boxes)), z.c(t.threads()),
              ValueRange{},
              [&](OpBuilder &n2, Location l2, Value i, ValueRange) {
                ImplicitLocOpBuilder sb(l2, n2);
                IndexMath s{sb};
                Value box = arith::DivUIOp::create(sb, i, perBox);
                Value within = arith::RemUIOp::create(sb, i, perBox);
                Value at = s.add(
                    s.add(base, s.mul(box, s.c(kBoxBytes))),
                    s.add(s.mul(valid, s.c(kBox * 2)), s.mul(within, s.c(16))));
                vector::StoreOp::create(sb, zeros, smem, ValueRange{at},
                                        /*nontemporal=*/false, llvm::Align(16));
                scf::YieldOp::create(sb);
              });
          NVVM::FenceProxyOp::create(
              zb, NVVM::ProxyKind::async_shared,
              NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
          gpu::BarrierOp::create(zb);
        });
        Value acc = iter[0];
        for (int64_t kk = 0; kk < t.tileK; kk += 16) {
          // K rows kk.. of each box: 128 bytes a row.
          Value descA =
              descriptor(lb, o.add(aBase, o.c(kk * kBox * 2)), descAType);
          Value descB = descriptor(lb, o.add(base, o.c(aBytes + kk * kBox * 2)),
                                   descBType);
          acc = nvgpu::WarpgroupMmaOp::create(
                    lb, accType, descA, descB,
                    lb.getI64IntegerAttr(groupsPerStep), lb.getUnitAttr(),
                    lb.getUnitAttr(), acc)
                    .getResult();
        }
        // Both warpgroups' previous step retired (at most this step's
        // wgmma are in flight): its stage takes the step `stages` later.
        gpu::BarrierOp::create(lb);
        Value previous = o.sub(step, o.c(1));
        Value refillStep = o.add(previous, o.c(t.stages));
        Value refill = arith::AndIOp::create(
            lb, leader,
            arith::AndIOp::create(lb, o.lt(o.c(0), step),
                                  o.lt(refillStep, numSteps)));
        ifThen(lb, refill, [&](ImplicitLocOpBuilder &rb) {
          issueLoad(
              rb, refillStep,
              arith::RemUIOp::create(rb, previous, IndexMath{rb}.c(t.stages)));
        });
        scf::YieldOp::create(lb, acc);
      });
  NVVM::WgmmaWaitGroupSyncOp::create(b, b.getI64IntegerAttr(0));

  // The tile to out[expert, m0 + 64w + r, n0 + c] as bf16, within [N, K],
  // through a [64, tileN] bf16 staging tile per warpgroup in the drained
  // stage buffers: each thread writes its fragment's column pairs, 16-byte
  // chunks XOR-swizzled by row % 8 (the 8 rows of a store hit 8 chunks),
  // then each warp stores whole rows in 16-byte chunks, coalesced.
  gpu::BarrierOp::create(b); // every warpgroup's wgmma read its last stage
  assert(t.tileN % 256 == 0 && "a warp stores 32 chunks of a row at once");
  int64_t rowBytes = t.tileN * 2;
  MemRefType stagingType = shared({64, t.tileN}, bf16);
  Value staging =
      m.view(smem, m.mul(warpgroup, m.c(64 * rowBytes)), stagingType);
  FragmentRegs regs(b, loop.getResult(0), t.tileN);
  Fragment frag = fragmentOf(b, tid);
  auto pairType = VectorType::get({2}, bf16);
  auto chunkType = VectorType::get({8}, bf16);
  for (int64_t e = 0; e < t.tileN / 2; e += 2) {
    // Elements e and e + 1 (e even): adjacent columns of one row.
    Value row = m.add(frag.row, m.c(Fragment::rowOffset(e)));
    Value col = m.add(frag.col, m.c(Fragment::colOffset(e)));
    Value chunk =
        arith::XOrIOp::create(b, arith::DivUIOp::create(b, col, m.c(8)),
                              arith::RemUIOp::create(b, row, m.c(8)));
    Value at =
        m.add(m.mul(chunk, m.c(8)), arith::RemUIOp::create(b, col, m.c(8)));
    Value pair = vector::FromElementsOp::create(
        b, pairType,
        ValueRange{arith::TruncFOp::create(b, bf16, regs.element(b, e)),
                   arith::TruncFOp::create(b, bf16, regs.element(b, e + 1))});
    vector::StoreOp::create(b, pair, staging, ValueRange{row, at},
                            /*nontemporal=*/false, llvm::Align(4));
  }
  gpu::BarrierOp::create(b);
  // Warp v of the warpgroup stores rows v, v + 4, ...; lane c chunk c of
  // each 32 (K and n0 multiples of 8: a chunk is all inside or outside).
  Value groupTid = arith::RemUIOp::create(b, tid, m.c(128));
  Value warpInGroup = arith::DivUIOp::create(b, groupTid, m.c(32));
  Value rowBase = m.add(m0, m.mul(warpgroup, m.c(64)));
  for (int64_t r = 0; r < 64; r += 4) {
    Value row = m.add(warpInGroup, m.c(r));
    Value outRow = m.add(rowBase, row);
    for (int64_t c = 0; c < t.tileN / 8; c += 32) {
      Value chunk = m.add(lane, m.c(c));
      Value physical = arith::XOrIOp::create(
          b, chunk, arith::RemUIOp::create(b, row, m.c(8)));
      Value outCol = m.add(n0, m.mul(chunk, m.c(8)));
      Value inside =
          arith::AndIOp::create(b, m.lt(outRow, numCols), m.lt(outCol, numK));
      ifThen(b, inside, [&](ImplicitLocOpBuilder &sb) {
        IndexMath o{sb};
        Value values = vector::LoadOp::create(
            sb, chunkType, staging, ValueRange{row, o.mul(physical, o.c(8))},
            /*nontemporal=*/false, llvm::Align(16));
        vector::StoreOp::create(sb, values, out,
                                ValueRange{expert, outRow, outCol},
                                /*nontemporal=*/false, llvm::Align(16));
      });
    }
  }
  gpu::ReturnOp::create(b);
  // The plan's grid is the tile count (EntryPlans.cpp reads the tile).
  func->setAttr("moe.tile",
                b.getDenseI64ArrayAttr({t.tileM, t.tileN, t.tileK, t.stages}));
  return func;
}
