//===- RoutingKernels.cpp - moe.route and moe.unpermute kernels ----------===//
//
// The small kernels around the expert GEMMs, built from gpu/arith/scf/
// memref ops: routing (one warp per token: scores, group limiting and top-k
// by warp shuffles) and combine (one CTA per token: a weighted sum of its
// expert rows, 8 columns per thread). docs/runtime-contract.md has their
// ABIs, docs/semantics.md what they compute.
//
//===----------------------------------------------------------------------===//

#include "RoutingKernels.h"
#include "KernelUtils.h"
#include "MoE/Conversion/Passes.h"
#include "QuantizeKernel.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/FormatVariadic.h"

#include "llvm/ADT/bit.h"

#include <limits>

using namespace mlir;
using namespace mlir::moe;

std::string RouteKernelSpec::kernelName() const {
  std::string name = llvm::formatv("moe_route_{0}_e{1}_k{2}",
                                   stringifyRouting(routing), experts, topK);
  if (groups)
    name += llvm::formatv("_g{0}s{1}", groups, topGroups).str();
  if (renormalize)
    name += "_renorm";
  // The scale's f32 bits, so that every parameter is in the name.
  if (scale != 1.0)
    name += llvm::formatv("_x{0:x-}",
                          llvm::bit_cast<uint32_t>(static_cast<float>(scale)))
                .str();
  name += logitBits == 16 ? "_bf16" : "_f32";
  return bias ? name + "_bias" : name;
}

std::string UnpermuteKernelSpec::kernelName() const {
  return llvm::formatv("moe_unpermute_k{0}_slots{1}{2}", topK, slotBits,
                       weighted ? "_weighted" : "")
      .str();
}

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
                       quantize ? "_e4m3" : "")
      .str();
}

std::string PermuteKernelSpec::scatterKernelName() const {
  return llvm::formatv("moe_permute_scatter_k{0}_off{1}_e4m3", topK, offsetBits)
      .str();
}

namespace {

/// One warp's candidate in a top-k round: a score (NaN: none), its expert
/// and the value its weight derives from.
struct Candidate {
  Value score, expert, source;
};

Value isNaN(ImplicitLocOpBuilder &b, Value x) {
  return arith::CmpFOp::create(b, arith::CmpFPredicate::UNO, x, x);
}

/// `challenger` beats `holder` when it has a score and the holder has none,
/// a higher score, or the same score and a lower expert (docs/semantics.md).
Value beats(ImplicitLocOpBuilder &b, const Candidate &challenger,
            const Candidate &holder) {
  Value some =
      arith::XOrIOp::create(b, isNaN(b, challenger.score),
                            arith::ConstantIntOp::create(b, b.getI1Type(), 1));
  Value higher = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT,
                                       challenger.score, holder.score);
  Value tie = arith::AndIOp::create(
      b,
      arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, challenger.score,
                            holder.score),
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, challenger.expert,
                            holder.expert));
  Value better = arith::OrIOp::create(
      b, arith::OrIOp::create(b, isNaN(b, holder.score), higher), tie);
  return arith::AndIOp::create(b, some, better);
}

/// A score as an i32 whose unsigned order is `beats`' order of scores: the
/// score's bits mapped to an unsigned order (-0 as +0), and a NaN (no
/// candidate) to 0, below every score (-inf maps to 0x007fffff).
Value scoreOrder(ImplicitLocOpBuilder &b, Value score) {
  Type i32 = b.getI32Type();
  Value canonical = arith::AddFOp::create(b, score, f32Constant(b, 0.0));
  Value bits = arith::BitcastOp::create(b, i32, canonical);
  Value negative = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, bits,
                                         i32Constant(b, 0));
  Value ordered = arith::SelectOp::create(
      b, negative, arith::XOrIOp::create(b, bits, i32Constant(b, -1)),
      arith::XOrIOp::create(b, bits, i32Constant(b, INT32_MIN)));
  return arith::SelectOp::create(b, isNaN(b, score), i32Constant(b, 0),
                                 ordered);
}

/// Lane `lane`'s value of the 32-bit `v`.
Value shuffleFrom(ImplicitLocOpBuilder &b, Value v, Value lane) {
  return gpu::ShuffleOp::create(b, v, lane, i32Constant(b, 32),
                                gpu::ShuffleMode::IDX)
      .getShuffleResult();
}

MemRefType dynamic2D(Type element) {
  return MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, element);
}

/// A kernel of `threads` threads taking `args`, with `shared` i32 arrays of
/// static shared memory; the builder is left in its body after its wait for
/// the previous kernel.
gpu::GPUFuncOp createKernel(ImplicitLocOpBuilder &b, StringRef name,
                            ArrayRef<Type> args,
                            int64_t threads = kRoutingThreads,
                            ArrayRef<int64_t> shared = {}) {
  auto smem =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  SmallVector<Type> attributions;
  for (int64_t size : shared)
    attributions.push_back(MemRefType::get({size}, b.getI32Type(),
                                           MemRefLayoutAttrInterface(), smem));
  auto func = gpu::GPUFuncOp::create(b, name, b.getFunctionType(args, {}),
                                     attributions);
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({int32_t(threads), 1, 1}));
  b.setInsertionPointToStart(&func.getBody().front());
  waitForPreviousKernel(b);
  return func;
}

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

gpu::GPUFuncOp mlir::moe::buildRouteKernel(OpBuilder &builder, Location loc,
                                           gpu::GPUModuleOp module,
                                           const RouteKernelSpec &spec) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  Type logitType = spec.logitBits == 16 ? Type(b.getBF16Type()) : f32;
  SmallVector<Type> args{dynamic2D(logitType)};
  if (spec.bias)
    args.push_back(MemRefType::get({ShapedType::kDynamic}, f32));
  args.push_back(dynamic2D(i32));
  args.push_back(dynamic2D(f32));
  gpu::GPUFuncOp func = createKernel(b, spec.kernelName(), args);
  Block *entry = &func.getBody().front();
  unsigned next = 0;
  Value logits = entry->getArgument(next++);
  Value bias = spec.bias ? entry->getArgument(next++) : Value();
  Value ids = entry->getArgument(next++);
  Value weights = entry->getArgument(next++);

  IndexMath m{b};
  int64_t warps = kRoutingThreads / 32, experts = spec.experts;
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value lane = arith::RemUIOp::create(b, tid, m.c(32));
  Value warp = arith::DivUIOp::create(b, tid, m.c(32));
  Value tokens = memref::DimOp::create(b, logits, m.c(0));
  Value first = m.add(
      m.mul(gpu::BlockIdOp::create(b, gpu::Dimension::x), m.c(warps)), warp);
  Value stride =
      m.mul(gpu::GridDimOp::create(b, gpu::Dimension::x), m.c(warps));
  Value nan = f32Constant(b, std::numeric_limits<double>::quiet_NaN());

  // One warp per token; lane l holds the experts lP, ..., lP + P - 1, so a
  // group's experts sit in adjacent lanes and a tie between lanes goes to
  // the lower lane.
  int64_t perLane = (experts + 31) / 32;
  Value lane32 = arith::IndexCastOp::create(b, i32, lane);
  Value full = i32Constant(b, -1);
  scf::ForOp::create(
      b, first, tokens, stride, ValueRange{},
      [&](OpBuilder &nested, Location l, Value t, ValueRange) {
        ImplicitLocOpBuilder nb(l, nested);
        IndexMath n{nb};
        SmallVector<Value> expert, score, source;
        for (int64_t i = 0; i < perLane; ++i) {
          Value e = n.add(n.mul(lane, n.c(perLane)), n.c(i));
          Value inRange = n.lt(e, n.c(experts));
          Value clamped = arith::MinUIOp::create(nb, e, n.c(experts - 1));
          Value x = n.load(logits, ValueRange{t, clamped});
          if (x.getType() != f32)
            x = arith::ExtFOp::create(nb, f32, x);
          // Out-of-range lanes hold no candidate.
          x = arith::SelectOp::create(nb, inRange, x, nan);
          Value choice = x, from = x;
          if (spec.routing == Routing::sigmoid_topk) {
            from = sigmoidApprox(nb, x);
            choice = from;
            if (bias)
              choice = arith::AddFOp::create(nb, choice,
                                             n.load(bias, ValueRange{clamped}));
          }
          expert.push_back(arith::IndexCastOp::create(nb, i32, e));
          score.push_back(choice);
          source.push_back(from);
        }

        // Group limiting: a group's score is the sum of its two best
        // choice scores (the best alone for one-expert groups); only the
        // top groups' experts stay candidates.
        if (spec.groups > 0) {
          int64_t groupSize = experts / spec.groups;
          Value minusInf =
              f32Constant(nb, -std::numeric_limits<double>::infinity());
          Value yes = arith::ConstantIntOp::create(nb, nb.getI1Type(), 1);
          // The lane's best and second best scores of its experts in
          // `inGroup` (all of them when null), then merged over the lanes
          // of xor distances `from`, `from / 2`, ..., 1.
          auto groupTop2 = [&](function_ref<Value(int64_t)> inGroup,
                               int32_t from) -> Value {
            Value best = minusInf, second = minusInf;
            for (int64_t i = 0; i < perLane; ++i) {
              Value take = arith::XOrIOp::create(nb, isNaN(nb, score[i]), yes);
              if (inGroup)
                take = arith::AndIOp::create(nb, take, inGroup(i));
              Value c = arith::SelectOp::create(nb, take, score[i], minusInf);
              second = arith::MaximumFOp::create(
                  nb, second, arith::MinimumFOp::create(nb, best, c));
              best = arith::MaximumFOp::create(nb, best, c);
            }
            for (int32_t d = from; d >= 1; d /= 2) {
              Value otherBest = shuffleXor(nb, best, d);
              Value otherSecond = shuffleXor(nb, second, d);
              second = arith::MaximumFOp::create(
                  nb, arith::MinimumFOp::create(nb, best, otherBest),
                  arith::MaximumFOp::create(nb, second, otherSecond));
              best = arith::MaximumFOp::create(nb, best, otherBest);
            }
            return groupSize == 1 ? best
                                  : arith::AddFOp::create(nb, best, second);
          };
          SmallVector<Value> groupScore;
          int64_t groupLanes = groupSize / perLane;
          if (groupSize % perLane == 0 && llvm::isPowerOf2_64(groupLanes)) {
            // Each lane's experts lie in one group, whose lanes are an
            // aligned block of groupLanes: one merge within the blocks,
            // then group g's score from its first lane.
            Value own = groupTop2(nullptr, int32_t(groupLanes / 2));
            for (int64_t g = 0; g < spec.groups; ++g)
              groupScore.push_back(
                  shuffleFrom(nb, own, i32Constant(nb, g * groupLanes)));
          } else {
            // A lane may hold experts of several groups: a merge over the
            // whole warp per group.
            for (int64_t g = 0; g < spec.groups; ++g)
              groupScore.push_back(groupTop2(
                  [&](int64_t i) -> Value {
                    Value e = arith::IndexCastOp::create(nb, nb.getIndexType(),
                                                         expert[i]);
                    return arith::AndIOp::create(
                        nb, n.le(n.c(g * groupSize), e),
                        n.lt(e, n.c((g + 1) * groupSize)));
                  },
                  16));
          }
          // The top groups, ties to the lower group (uniform in the warp).
          SmallVector<Value> chosen(
              spec.groups, arith::ConstantIntOp::create(nb, nb.getI1Type(), 0));
          for (int64_t round = 0; round < spec.topGroups; ++round) {
            Value bestScore = nan, bestGroup = i32Constant(nb, -1);
            for (int64_t g = 0; g < spec.groups; ++g) {
              Candidate c{
                  arith::SelectOp::create(nb, chosen[g], nan, groupScore[g]),
                  i32Constant(nb, g), nan};
              Value take = beats(nb, c, {bestScore, bestGroup, nan});
              bestScore = arith::SelectOp::create(nb, take, c.score, bestScore);
              bestGroup =
                  arith::SelectOp::create(nb, take, c.expert, bestGroup);
            }
            for (int64_t g = 0; g < spec.groups; ++g)
              chosen[g] = arith::OrIOp::create(
                  nb, chosen[g],
                  arith::CmpIOp::create(nb, arith::CmpIPredicate::eq, bestGroup,
                                        i32Constant(nb, g)));
          }
          for (int64_t i = 0; i < perLane; ++i) {
            Value group = arith::DivUIOp::create(nb, expert[i],
                                                 i32Constant(nb, groupSize));
            Value keep = arith::ConstantIntOp::create(nb, nb.getI1Type(), 0);
            for (int64_t g = 0; g < spec.groups; ++g)
              keep = arith::OrIOp::create(
                  nb, keep,
                  arith::AndIOp::create(
                      nb, chosen[g],
                      arith::CmpIOp::create(nb, arith::CmpIPredicate::eq, group,
                                            i32Constant(nb, g))));
            score[i] = arith::SelectOp::create(nb, keep, score[i], nan);
          }
        }

        // Top-k: k rounds. Each lane's best remaining key (scoreOrder; the
        // lower of its experts on a tie), the warp's largest by one
        // redux.sync, the lowest lane holding it by a ballot (its experts
        // are below the later lanes'), whose pick and source are fetched;
        // that lane retires the pick. A largest key of 0 is no candidate.
        SmallVector<Candidate> picked;
        SmallVector<Value> keys;
        for (int64_t i = 0; i < perLane; ++i)
          keys.push_back(scoreOrder(nb, score[i]));
        for (int64_t j = 0; j < spec.topK; ++j) {
          // The lane's best as a tree of pairs (the left one lower).
          struct Held {
            Value key, at, source;
          };
          SmallVector<Held> held;
          for (int64_t i = 0; i < perLane; ++i)
            held.push_back({keys[i], i32Constant(nb, i), source[i]});
          while (held.size() > 1) {
            SmallVector<Held> next;
            for (size_t i = 0; i + 1 < held.size(); i += 2) {
              const Held &left = held[i], &right = held[i + 1];
              Value take = arith::CmpIOp::create(nb, arith::CmpIPredicate::ugt,
                                                 right.key, left.key);
              next.push_back(
                  {arith::SelectOp::create(nb, take, right.key, left.key),
                   arith::SelectOp::create(nb, take, right.at, left.at),
                   arith::SelectOp::create(nb, take, right.source,
                                           left.source)});
            }
            if (held.size() % 2)
              next.push_back(held.back());
            held = std::move(next);
          }
          Value bestKey = held[0].key, bestAt = held[0].at,
                bestSource = held[0].source;
          Value top = NVVM::ReduxOp::create(nb, i32, bestKey,
                                            NVVM::ReduxKind::UMAX, full);
          Value holders = NVVM::VoteSyncOp::create(
              nb, i32, full,
              arith::CmpIOp::create(nb, arith::CmpIPredicate::eq, bestKey, top),
              NVVM::VoteSyncKind::ballot);
          Value winner = LLVM::CountTrailingZerosOp::create(
              nb, i32, holders, nb.getBoolAttr(false));
          Value at = shuffleFrom(nb, bestAt, winner);
          Value none = arith::CmpIOp::create(nb, arith::CmpIPredicate::eq, top,
                                             i32Constant(nb, 0));
          // A pick needs its expert (-1: none) and source, not its score.
          Candidate chosen;
          chosen.expert = arith::SelectOp::create(
              nb, none, i32Constant(nb, -1),
              arith::AddIOp::create(
                  nb,
                  arith::MulIOp::create(nb, winner, i32Constant(nb, perLane)),
                  at));
          chosen.source = arith::SelectOp::create(
              nb, none, nan, shuffleFrom(nb, bestSource, winner));
          Value mine = arith::CmpIOp::create(nb, arith::CmpIPredicate::eq,
                                             lane32, winner);
          for (int64_t i = 0; i < perLane; ++i)
            keys[i] = arith::SelectOp::create(
                nb,
                arith::AndIOp::create(
                    nb, mine,
                    arith::CmpIOp::create(nb, arith::CmpIPredicate::eq, bestAt,
                                          i32Constant(nb, i))),
                i32Constant(nb, 0), keys[i]);
          picked.push_back(chosen);
        }

        // Weights, in f32 (a missing pick weighs 0).
        Value zero = f32Constant(nb, 0.0);
        auto present = [&](const Candidate &c) {
          return arith::CmpIOp::create(nb, arith::CmpIPredicate::sge, c.expert,
                                       i32Constant(nb, 0));
        };
        SmallVector<Value> weight;
        if (spec.routing == Routing::sigmoid_topk) {
          for (const Candidate &c : picked)
            weight.push_back(
                arith::SelectOp::create(nb, present(c), c.source, zero));
        } else {
          // Softmax over all experts (softmax_topk) or over the picks
          // (topk_softmax), relative to the largest logit for range.
          Value top = picked[0].source;
          Value denominator = zero;
          if (spec.routing == Routing::softmax_topk) {
            Value localMax = nan;
            for (int64_t i = 0; i < perLane; ++i)
              localMax = arith::MaxNumFOp::create(nb, localMax, source[i]);
            top = warpReduce(nb, localMax, [&](Value x, Value y) -> Value {
              return arith::MaxNumFOp::create(nb, x, y);
            });
            Value localSum = zero;
            for (int64_t i = 0; i < perLane; ++i) {
              Value term =
                  expApprox(nb, arith::SubFOp::create(nb, source[i], top));
              localSum = arith::AddFOp::create(
                  nb, localSum,
                  arith::SelectOp::create(nb, isNaN(nb, source[i]), zero,
                                          term));
            }
            denominator =
                warpReduce(nb, localSum, [&](Value x, Value y) -> Value {
                  return arith::AddFOp::create(nb, x, y);
                });
          }
          for (const Candidate &c : picked) {
            Value term =
                expApprox(nb, arith::SubFOp::create(nb, c.source, top));
            weight.push_back(
                arith::SelectOp::create(nb, present(c), term, zero));
            if (spec.routing == Routing::topk_softmax)
              denominator =
                  arith::AddFOp::create(nb, denominator, weight.back());
          }
          for (Value &w : weight)
            w = arith::DivFOp::create(nb, w, denominator);
        }
        if (spec.renormalize && spec.routing != Routing::topk_softmax) {
          Value sum = zero;
          for (Value w : weight)
            sum = arith::AddFOp::create(nb, sum, w);
          if (spec.routing == Routing::sigmoid_topk)
            sum = arith::AddFOp::create(nb, sum, f32Constant(nb, 1e-20));
          for (Value &w : weight)
            w = arith::DivFOp::create(nb, w, sum);
        }
        if (spec.scale != 1.0)
          for (Value &w : weight)
            w = arith::MulFOp::create(nb, w, f32Constant(nb, spec.scale));

        // Lane j stores pick j (coalesced).
        for (int64_t j = 0; j < spec.topK; ++j)
          ifThen(nb,
                 arith::CmpIOp::create(nb, arith::CmpIPredicate::eq, lane,
                                       n.c(j % 32)),
                 [&](ImplicitLocOpBuilder &sb) {
                   memref::StoreOp::create(sb, picked[j].expert, ids,
                                           ValueRange{t, IndexMath{sb}.c(j)});
                   memref::StoreOp::create(sb, weight[j], weights,
                                           ValueRange{t, IndexMath{sb}.c(j)});
                 });
        scf::YieldOp::create(nb);
      });
  gpu::ReturnOp::create(b);
  return func;
}

gpu::GPUFuncOp
mlir::moe::buildUnpermuteKernel(OpBuilder &builder, Location loc,
                                gpu::GPUModuleOp module,
                                const UnpermuteKernelSpec &spec) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Type f32 = b.getF32Type(), bf16 = b.getBF16Type();
  Type slotType = b.getIntegerType(spec.slotBits);
  SmallVector<Type> args{dynamic2D(bf16), dynamic2D(slotType)};
  if (spec.weighted)
    args.push_back(dynamic2D(f32));
  args.push_back(dynamic2D(bf16));
  gpu::GPUFuncOp func = createKernel(b, spec.kernelName(), args);
  Block *entry = &func.getBody().front();
  unsigned next = 0;
  Value rows = entry->getArgument(next++);
  Value slots = entry->getArgument(next++);
  Value weights = spec.weighted ? entry->getArgument(next++) : Value();
  Value out = entry->getArgument(next++);

  IndexMath m{b};
  constexpr int64_t kVector = 8;
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value numRows = memref::DimOp::create(b, rows, m.c(0));
  Value hidden = memref::DimOp::create(b, rows, m.c(1));
  Value tokens = memref::DimOp::create(b, out, m.c(0));
  auto f32Vector = VectorType::get({kVector}, f32);
  auto bf16Vector = VectorType::get({kVector}, bf16);
  // One CTA per (token, block of 8 * threads columns), grid-stride, so a
  // few tokens still spread over many CTAs; 8 columns (16 bytes) per
  // thread.
  int64_t blockColumns = kRoutingThreads * kVector;
  Value blocks = m.ceilDiv(hidden, blockColumns);
  scf::ForOp::create(
      b, gpu::BlockIdOp::create(b, gpu::Dimension::x), m.mul(tokens, blocks),
      gpu::GridDimOp::create(b, gpu::Dimension::x), ValueRange{},
      [&](OpBuilder &nested, Location l, Value pair, ValueRange) {
        ImplicitLocOpBuilder nb(l, nested);
        IndexMath n{nb};
        Value t = arith::DivUIOp::create(nb, pair, blocks);
        Value firstColumn =
            n.mul(arith::RemUIOp::create(nb, pair, blocks), n.c(blockColumns));
        // The token's rows and weights, read once per thread.
        SmallVector<Value> row, take, weight;
        for (int64_t j = 0; j < spec.topK; ++j) {
          Value slot = n.toIndex(n.load(slots, ValueRange{t, n.c(j)}));
          // Slots outside [0, M) contribute nothing (docs/semantics.md).
          take.push_back(arith::AndIOp::create(nb, n.le(n.c(0), slot),
                                               n.lt(slot, numRows)));
          row.push_back(arith::SelectOp::create(nb, take.back(), slot, n.c(0)));
          weight.push_back(weights ? n.load(weights, ValueRange{t, n.c(j)})
                                   : f32Constant(nb, 1.0));
        }
        Value col = n.add(firstColumn, n.mul(tid, n.c(kVector)));
        ifThen(nb, n.lt(col, hidden), [&](ImplicitLocOpBuilder &ib) {
          // All k loads first, so they are in flight together (a
          // dropped slot reads row 0 and counts as zero); then the sum
          // in slot order.
          Value zero = arith::ConstantOp::create(
              ib, DenseElementsAttr::get(f32Vector, 0.0f));
          SmallVector<Value> loaded;
          for (int64_t j = 0; j < spec.topK; ++j)
            loaded.push_back(vector::LoadOp::create(
                ib, bf16Vector, rows, ValueRange{row[j], col},
                /*nontemporal=*/false, llvm::Align(16)));
          Value acc = zero;
          for (int64_t j = 0; j < spec.topK; ++j) {
            Value scaled = arith::MulFOp::create(
                ib, arith::ExtFOp::create(ib, f32Vector, loaded[j]),
                vector::BroadcastOp::create(ib, f32Vector, weight[j]));
            acc = arith::AddFOp::create(
                ib, acc, arith::SelectOp::create(ib, take[j], scaled, zero));
          }
          vector::StoreOp::create(
              ib, arith::TruncFOp::create(ib, bf16Vector, acc), out,
              ValueRange{t, col}, /*nontemporal=*/false, llvm::Align(16));
        });
        scf::YieldOp::create(nb);
      });
  gpu::ReturnOp::create(b);
  return func;
}

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
  // table of the chunk's counts, then starts.
  auto func = createKernel(
      b, spec.indexKernelName(),
      {dynamic2D(i32), MemRefType::get({ShapedType::kDynamic}, i32),
       MemRefType::get({ShapedType::kDynamic}, offsetType),
       dynamic2D(offsetType), MemRefType::get({ShapedType::kDynamic}, i32)},
      threads, {experts, experts, warps * experts});
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
    ifThen(b, m.lt(at, m.c(warps * experts)), [&](ImplicitLocOpBuilder &sb) {
      memref::StoreOp::create(sb, zero32, table, ValueRange{at});
    });
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
    Value prior = m.load(table, ValueRange{at});
    NVVM::SyncWarpOp::create(b, full);
    ifThen(
        b, arith::AndIOp::create(b, leader, in), [&](ImplicitLocOpBuilder &sb) {
          memref::StoreOp::create(
              sb,
              arith::AddIOp::create(sb, prior, LLVM::CtPopOp::create(sb, mask)),
              table, ValueRange{at});
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
            tb, all, o.load(table, ValueRange{o.add(o.c(w * experts), tid)}));
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
    Value running = s.load(starts, ValueRange{tid});
    for (int64_t w = 0; w < warps; ++w) {
      Value at = s.add(s.c(w * experts), tid);
      Value c = s.load(table, ValueRange{at});
      memref::StoreOp::create(sb, running, table, ValueRange{at});
      running = arith::AddIOp::create(sb, running, c);
    }
  });
  sync(b);
  for (int64_t r = 0; r < kRounds; ++r) {
    ifThen(b, valid[r], [&](ImplicitLocOpBuilder &sb) {
      IndexMath s{sb};
      Value slot = arith::SelectOp::create(
          sb, inRange[r],
          arith::AddIOp::create(sb, s.load(table, ValueRange{cell[r]}),
                                local[r]),
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
