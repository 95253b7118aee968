//===- RouteKernel.cpp - the moe.route kernel
//------------------------------===//
//
// Routing, one warp per token: scores, group limiting and top-k by warp
// shuffles. docs/runtime-contract.md has its ABI, docs/semantics.md what it
// computes.
//
//===----------------------------------------------------------------------===//

#include "KernelUtils.h"
#include "RoutingKernelUtils.h"
#include "RoutingKernels.h"

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
  if (bias)
    name += "_bias";
  if (shared)
    name += llvm::formatv("_shared{0}{1}", shared, sharedGate ? "g" : "").str();
  return name;
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
  if (spec.sharedGate)
    args.append({dynamic2D(b.getBF16Type()), dynamic2D(b.getBF16Type())});
  args.push_back(dynamic2D(i32));
  args.push_back(dynamic2D(f32));
  gpu::GPUFuncOp func = createKernel(b, spec.kernelName(), args);
  Block *entry = &func.getBody().front();
  unsigned next = 0;
  Value logits = entry->getArgument(next++);
  Value bias = spec.bias ? entry->getArgument(next++) : Value();
  Value tokensIn = spec.sharedGate ? entry->getArgument(next++) : Value();
  Value gate = spec.sharedGate ? entry->getArgument(next++) : Value();
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

        // The shared slots: experts E .. E+c-1, weighing 1 or the gate's
        // sigmoid (a dot product over H, strided by lane, summed by the warp).
        SmallVector<Value> expertOut;
        for (const Candidate &c : picked)
          expertOut.push_back(c.expert);
        if (spec.shared) {
          Value sharedWeight = f32Constant(nb, 1.0);
          if (gate) {
            Value hidden = memref::DimOp::create(nb, tokensIn, n.c(1));
            auto partial = scf::ForOp::create(
                nb, lane, hidden, n.c(32), ValueRange{zero},
                [&](OpBuilder &lb, Location ll, Value h, ValueRange acc) {
                  ImplicitLocOpBuilder db(ll, lb);
                  IndexMath d{db};
                  Value x = arith::ExtFOp::create(
                      db, f32, d.load(tokensIn, ValueRange{t, h}));
                  Value g = arith::ExtFOp::create(
                      db, f32, d.load(gate, ValueRange{d.c(0), h}));
                  scf::YieldOp::create(
                      db, ValueRange{arith::AddFOp::create(
                              db, acc[0], arith::MulFOp::create(db, x, g))});
                });
            Value logit = warpReduce(nb, partial.getResult(0),
                                     [&](Value x, Value y) -> Value {
                                       return arith::AddFOp::create(nb, x, y);
                                     });
            sharedWeight = sigmoidApprox(nb, logit);
          }
          for (int64_t j = 0; j < spec.shared; ++j) {
            expertOut.push_back(i32Constant(nb, experts + j));
            weight.push_back(sharedWeight);
          }
        }

        // Lane j stores slot j (coalesced).
        for (int64_t j = 0; j < int64_t(expertOut.size()); ++j)
          ifThen(nb,
                 arith::CmpIOp::create(nb, arith::CmpIPredicate::eq, lane,
                                       n.c(j % 32)),
                 [&](ImplicitLocOpBuilder &sb) {
                   memref::StoreOp::create(sb, expertOut[j], ids,
                                           ValueRange{t, IndexMath{sb}.c(j)});
                   memref::StoreOp::create(sb, weight[j], weights,
                                           ValueRange{t, IndexMath{sb}.c(j)});
                 });
        scf::YieldOp::create(nb);
      });
  gpu::ReturnOp::create(b);
  return func;
}
