//===- Mainloop.cpp - the pipelined K loop; the bf16 mainloop -------------===//

#include "Mainloop.h"
#include "../KernelUtils.h"
#include "Fragment.h"
#include "WgmmaDescriptor.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::sm90;

Value PipelinedMainloop::zeroAccumulator(ImplicitLocOpBuilder &b) const {
  // Zero constants would be materialized right before the accumulator's
  // first wgmma, after its fence and while the other accumulator's wgmma
  // run: ptxas then fences them itself and serializes every wgmma (C7520).
  // A side-effecting asm writes them here, before the pass's first fence.
  int64_t regs = k.t.accumulatorColumns() / 2;
  std::string text, constraints;
  for (int64_t r = 0; r < regs; ++r) {
    text += "mov.b32 $" + std::to_string(r) + ", 0;\n";
    constraints += (r ? ",=f" : "=f");
  }
  Value zeros = LLVM::InlineAsmOp::create(
                    b, k.ty.products, ValueRange{}, text, constraints,
                    /*has_side_effects=*/true, /*is_align_stack=*/false,
                    LLVM::tailcallkind::TailCallKind::None,
                    LLVM::AsmDialectAttr(), ArrayAttr())
                    .getResult(0);
  Type regsType = FragmentRegs::structType(b.getContext(), 2 * regs);
  Value accRegs = LLVM::InsertValueOp::create(
      b, LLVM::PoisonOp::create(b, regsType), zeros, ArrayRef<int64_t>{0});
  return UnrealizedConversionCastOp::create(b, k.ty.accumulator, accRegs)
      .getResult(0);
}

SmallVector<Value, 2> PipelinedMainloop::runPass(Value pass) {
  ImplicitLocOpBuilder &b = k.b;
  const GroupedMatmulTile &t = k.t;
  IndexMath m{b};
  // One accumulator per 64 rows this warpgroup multiplies.
  int64_t groups = t.rowGroups();
  SmallVector<Value, 2> acc0;
  for (int64_t g = 0; g < groups; ++g)
    acc0.push_back(groups == 1 ? nvgpu::WarpgroupMmaInitAccumulatorOp::create(
                                     b, k.ty.accumulator)
                               : zeroAccumulator(b));
  Value passBase = m.mul(k.numK, pass);
  Value colBase = m.add(k.current.col0, m.mul(pass, m.c(k.tileCols)));
  beginPass(colBase);
  if (t.pingpong)
    k.waitTurn(b);
  // Split K (swap-AB): trip i runs step i * split + warpgroup.
  int64_t split = t.kSplit();
  auto mainLoop = scf::ForOp::create(
      b, m.c(0), m.ceilDiv(k.numK, split), m.c(1), ValueRange(acc0),
      [&](OpBuilder &nested, Location l, Value trip, ValueRange iter) {
        ImplicitLocOpBuilder lb(l, nested);
        IndexMath o{lb};
        Value kStep =
            split == 1 ? trip : o.add(o.mul(trip, o.c(split)), k.warpgroup);
        Value itemStep = o.add(passBase, kStep);
        // A warpgroup past the last step only meets the others below.
        scf::IfOp active;
        if (split > 1) {
          active = scf::IfOp::create(lb, iter.getTypes(), o.lt(kStep, k.numK),
                                     /*withElseRegion=*/true);
          ImplicitLocOpBuilder eb =
              ImplicitLocOpBuilder::atBlockBegin(l, active.elseBlock());
          scf::YieldOp::create(eb, iter);
        }
        ImplicitLocOpBuilder nb =
            split > 1
                ? ImplicitLocOpBuilder::atBlockBegin(l, active.thenBlock())
                : lb;
        IndexMath n{nb};
        SmallVector<Value> prefetched = prefetch(nb, kStep, colBase);
        Value step = n.add(k.stepBase, itemStep);
        Value stage = k.stageOf(nb, step);
        k.waitLoaded(nb, step);
        Value base = n.mul(stage, n.c(k.stageBytes));
        Value weightsTile;
        SmallVector<Value> accs;
        for (int64_t g = 0; g < groups; ++g) {
          // Warpgroup w multiplies rows [64w, 64w + 64) of the token tile
          // (a 128-row ping-pong item: rows [64g, 64g + 64) into acc g).
          Value rowGroup = g ? n.add(k.rowGroup, n.c(g)) : k.rowGroup;
          Value rowsTile =
              t.swapAB
                  ? n.view(k.smem, base, k.ty.rowsTile)
                  : n.view(k.smem,
                           n.add(base, n.mul(rowGroup, n.c(64 * t.tileK *
                                                           t.elementBytes()))),
                           k.ty.rowsSliceTile);
          // Viewed after the first rows: hoisted, it reorders (and changes)
          // the PTX of every other form.
          if (!weightsTile)
            weightsTile =
                n.view(k.smem, n.add(base, n.c(k.rowsBytes)), k.ty.weightsTile);
          accs.push_back(multiply(
              nb,
              KStep{kStep, stage, colBase, rowsTile, weightsTile, prefetched},
              iter[g]));
        }
        if (split > 1) {
          scf::YieldOp::create(nb, accs);
          accs.assign(active.getResults().begin(), active.getResults().end());
        }
        // The previous trip's stages are free once this thread has seen
        // their wgmma retire. Warp-specialized, the thread releases its
        // step's to the producer.
        // (Each pass's last step is released after its loop.)
        if (k.specialized) {
          ifThen(lb, o.lt(o.c(0), kStep), [&](ImplicitLocOpBuilder &rb) {
            IndexMath r{rb};
            k.releaseStage(rb, r.add(k.stepBase, r.sub(itemStep, r.c(1))));
          });
          scf::YieldOp::create(lb, accs);
          return;
        }
        // Else they are free once every warp has (in both CTAs of a
        // cluster: the rows' multicast refills both); refill them while
        // this trip's wgmma run. The cluster arrival is relaxed: a release
        // would also wait for this step's wgmma.
        // Split K: warpgroup w alone uses the stages of steps 2i + w (an
        // even number of stages), so it frees them with a barrier of its
        // own and its first thread refills its previous step's: the two
        // warpgroups stream apart, as two CTAs would.
        Value refiller = k.leader;
        if (split > 1) {
          k.syncWarpgroup(lb);
          refiller = arith::CmpIOp::create(
              lb, arith::CmpIPredicate::eq,
              arith::RemUIOp::create(lb, k.tid, o.c(128)), o.c(0));
        } else if (k.cluster > 1) {
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
                                  o.lt(refillStep, k.numSteps)));
        ifThen(lb, refill, [&](ImplicitLocOpBuilder &rb) {
          k.issueLoad(rb, k.current,
                      k.stageOf(rb, IndexMath{rb}.add(k.stepBase, previous)),
                      refillStep);
        });
        scf::YieldOp::create(lb, accs);
      });
  if (t.pingpong)
    k.passTurn(b);
  NVVM::WgmmaWaitGroupSyncOp::create(b, b.getI64IntegerAttr(0));
  if (k.specialized)
    k.releaseStage(b,
                   m.add(k.stepBase, m.sub(m.add(passBase, k.numK), m.c(1))));
  return SmallVector<Value, 2>(mainLoop.getResults());
}

std::pair<Value, Value>
PipelinedMainloop::descriptorsAt(ImplicitLocOpBuilder &nb, const KStep &step,
                                 int64_t kk) const {
  const GroupedMatmulTile &t = k.t;
  Value rowsSlice =
      kSlice(nb, step.rowsTile, t.swapAB ? t.tileM : 64, kk, t.mmaK());
  Value weightsSlice = kSlice(nb, step.weightsTile, t.tileN, kk, t.mmaK());
  Value descA = nvgpu::WarpgroupGenerateDescriptorOp::create(
      nb, k.ty.mmaADesc, t.swapAB ? weightsSlice : rowsSlice,
      t.swapAB ? k.weightsMap : k.rowsMap);
  if (t.weightsKN())
    return {descA, nMajorWeightsDescriptor(nb, step, kk)};
  Value descB = nvgpu::WarpgroupGenerateDescriptorOp::create(
      nb, k.ty.mmaBDesc, t.swapAB ? rowsSlice : weightsSlice,
      t.swapAB ? k.rowsMap : k.weightsMap);
  return {descA, descB};
}

Value PipelinedMainloop::nMajorWeightsDescriptor(ImplicitLocOpBuilder &nb,
                                                 const KStep &step,
                                                 int64_t kk) const {
  const GroupedMatmulTile &t = k.t;
  IndexMath n{nb};
  // K rows kk.. of the stage's first chunk: each K row is 128 bytes there.
  Value offset = n.add(n.mul(step.stage, n.c(k.stageBytes)),
                       n.c(k.rowsBytes + kk * kNMajorChunk * t.elementBytes()));
  return nMajorDescriptor(nb, k.smemAddress, offset, t.tileK, k.ty.mmaBDesc);
}

Value sm90::nMajorDescriptor(ImplicitLocOpBuilder &nb, Value smemAddress,
                             Value offset, int64_t rows, Type type) {
  Type i64 = nb.getI64Type();
  Value address = arith::AddIOp::create(
      nb, smemAddress, arith::IndexCastOp::create(nb, i64, offset));
  Value start = arith::ShRUIOp::create(
      nb,
      arith::AndIOp::create(nb, address,
                            arith::ConstantIntOp::create(nb, i64, 0x3FFFF)),
      arith::ConstantIntOp::create(nb, i64, 4));
  Value word = arith::OrIOp::create(
      nb, start,
      arith::ConstantIntOp::create(
          nb, i64, int64_t(wgmmaNMajorDescriptor(uint32_t(rows)))));
  return UnrealizedConversionCastOp::create(nb, type, word).getResult(0);
}

Value PipelinedMainloop::multiplyInto(ImplicitLocOpBuilder &nb,
                                      const KStep &step, Value acc) const {
  const GroupedMatmulTile &t = k.t;
  // Every row group's wgmma of the step may stay in flight.
  int64_t groupsPerStep = t.tileK / t.mmaK() * t.rowGroups();
  for (int64_t kk = 0; kk < t.tileK; kk += t.mmaK()) {
    auto [descA, descB] = descriptorsAt(nb, step, kk);
    // N-major weights are WGMMA's transposed B (imm-trans-b).
    acc = nvgpu::WarpgroupMmaOp::create(
              nb, k.ty.accumulator, descA, descB,
              nb.getI64IntegerAttr(groupsPerStep), UnitAttr(),
              t.weightsKN() ? nb.getUnitAttr() : UnitAttr(), acc)
              .getResult();
  }
  return acc;
}

namespace {

/// bf16 rows and weights: the wgmma accumulate straight into the
/// accumulator.
class BF16Mainloop final : public PipelinedMainloop {
public:
  using PipelinedMainloop::PipelinedMainloop;

private:
  Value multiply(ImplicitLocOpBuilder &nb, const KStep &step,
                 Value acc) override {
    return multiplyInto(nb, step, acc);
  }
};

} // namespace

std::unique_ptr<GemmMainloop> sm90::makeBF16Mainloop(GemmKernel &k) {
  return std::make_unique<BF16Mainloop>(k);
}
