//===- BackwardKernels.cpp - SIMT kernels of the backward ops -------------===//

#include "BackwardKernels.h"
#include "KernelUtils.h"
#include "RoutingKernelUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <limits>

using namespace mlir;
using namespace mlir::moe;

std::string SwiGLUKernelSpec::kernelName() const {
  std::string prefix = gradient ? "moe_swiglu_grad_" : "moe_swiglu_";
  std::string suffix = interleaved ? "_il" : "";
  if (!gptOss)
    return prefix + "silu" + suffix;
  return prefix + "gptoss_a" +
         llvm::utohexstr(llvm::bit_cast<uint32_t>(alpha), true) + "_l" +
         llvm::utohexstr(llvm::bit_cast<uint32_t>(limit), true) + suffix;
}

gpu::GPUFuncOp mlir::moe::buildSwiGLUKernel(OpBuilder &builder, Location loc,
                                            gpu::GPUModuleOp module,
                                            const SwiGLUKernelSpec &spec) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Type f32 = b.getF32Type(), bf16 = b.getBF16Type();
  SmallVector<Type> args(spec.gradient ? 3 : 2, dynamic2D(bf16));
  gpu::GPUFuncOp func =
      createKernel(b, spec.kernelName(), args, kSwiGLUGradThreads);
  Block *entry = &func.getBody().front();
  Value input = entry->getArgument(0),
        grad = spec.gradient ? entry->getArgument(1) : Value(),
        out = entry->getArguments().back();
  IndexMath m{b};
  constexpr int64_t kVector = kSwiGLUGradVector;
  // [M, I]: the gradient's shape, or the activation's.
  Value shaped = spec.gradient ? grad : out;
  Value numRows = memref::DimOp::create(b, shaped, m.c(0));
  Value width = memref::DimOp::create(b, shaped, m.c(1));
  Value vectors = arith::DivUIOp::create(b, width, m.c(kVector));
  Value threads = m.mul(gpu::GridDimOp::create(b, gpu::Dimension::x),
                        m.c(kSwiGLUGradThreads));
  Value first = m.add(m.mul(gpu::BlockIdOp::create(b, gpu::Dimension::x),
                            m.c(kSwiGLUGradThreads)),
                      gpu::ThreadIdOp::create(b, gpu::Dimension::x));
  auto f32Vector = VectorType::get({kVector}, f32);
  auto bf16Vector = VectorType::get({kVector}, bf16);
  scf::ForOp::create(
      b, first, m.mul(numRows, vectors), threads, ValueRange{},
      [&](OpBuilder &nested, Location l, Value i, ValueRange) {
        ImplicitLocOpBuilder nb(l, nested);
        IndexMath n{nb};
        Value row = arith::DivUIOp::create(nb, i, vectors);
        Value col = n.mul(arith::RemUIOp::create(nb, i, vectors), n.c(kVector));
        auto load = [&](Value from, Value c) -> Value {
          Value loaded =
              vector::LoadOp::create(nb, bf16Vector, from, ValueRange{row, c},
                                     /*nontemporal=*/false, llvm::Align(16));
          return arith::ExtFOp::create(nb, f32Vector, loaded);
        };
        auto store = [&](Value v, Value c) {
          vector::StoreOp::create(nb,
                                  arith::TruncFOp::create(nb, bf16Vector, v),
                                  out, ValueRange{row, c},
                                  /*nontemporal=*/false, llvm::Align(16));
        };
        auto at = [&](Value v, int64_t lane) -> Value {
          return vector::ExtractOp::create(nb, v, ArrayRef<int64_t>{lane});
        };
        // Interleaved, the 8 columns' gates and ups are the 16 input
        // columns from 2 * col on, alternating.
        Value gates, ups, pairs[2];
        if (spec.interleaved) {
          Value col2 = n.mul(col, n.c(2));
          pairs[0] = load(input, col2);
          pairs[1] = load(input, n.add(col2, n.c(kVector)));
        } else {
          gates = load(input, col);
          ups = load(input, n.add(col, width));
        }
        auto inputAt = [&](int64_t lane, int64_t up) -> Value {
          if (!spec.interleaved)
            return at(up ? ups : gates, lane);
          int64_t element = 2 * lane + up;
          return at(pairs[element / kVector], element % kVector);
        };
        if (!spec.gradient) {
          // The forward epilogue's activation, on the saved gate-up output.
          SmallVector<Value> acts;
          for (int64_t lane = 0; lane < kVector; ++lane) {
            Value gate = inputAt(lane, 0), up = inputAt(lane, 1);
            acts.push_back(spec.gptOss
                               ? gptOssGlu(nb, gate, up, spec.alpha, spec.limit)
                               : siluTimes(nb, gate, up));
          }
          store(vector::FromElementsOp::create(nb, f32Vector, acts), col);
          scf::YieldOp::create(nb);
          return;
        }
        Value dhs = load(grad, col);
        SmallVector<Value> dGates, dUps;
        for (int64_t lane = 0; lane < kVector; ++lane) {
          auto [dGate, dUp] = gatedActivationGrad(
              nb, spec.gptOss, spec.alpha, spec.limit, inputAt(lane, 0),
              inputAt(lane, 1), at(dhs, lane));
          dGates.push_back(dGate);
          dUps.push_back(dUp);
        }
        if (spec.interleaved) {
          // Back to the input's order: gate and up gradients alternate.
          for (int64_t half = 0; half < 2; ++half) {
            SmallVector<Value> mixed;
            for (int64_t lane = half * kVector / 2;
                 lane < (half + 1) * kVector / 2; ++lane)
              mixed.append({dGates[lane], dUps[lane]});
            store(vector::FromElementsOp::create(nb, f32Vector, mixed),
                  n.add(n.mul(col, n.c(2)), n.c(half * kVector)));
          }
          scf::YieldOp::create(nb);
          return;
        }
        Value dGate = vector::FromElementsOp::create(nb, f32Vector, dGates);
        Value dUp = vector::FromElementsOp::create(nb, f32Vector, dUps);
        store(dGate, col);
        store(dUp, n.add(col, width));
        scf::YieldOp::create(nb);
      });
  gpu::ReturnOp::create(b);
  return func;
}

std::string RouteGradKernelSpec::kernelName() const {
  std::string name = llvm::formatv("moe_route_grad_{0}_e{1}_k{2}",
                                   stringifyRouting(routing), experts, topK);
  if (renormalize)
    name += "_renorm";
  // The scale's f32 bits, so that every parameter is in the name.
  if (scale != 1.0)
    name += llvm::formatv("_x{0:x-}",
                          llvm::bit_cast<uint32_t>(static_cast<float>(scale)))
                .str();
  return name + (logitBits == 16 ? "_bf16" : "_f32");
}

gpu::GPUFuncOp
mlir::moe::buildRouteGradKernel(OpBuilder &builder, Location loc,
                                gpu::GPUModuleOp module,
                                const RouteGradKernelSpec &spec) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  Type logitType = spec.logitBits == 16 ? Type(b.getBF16Type()) : f32;
  gpu::GPUFuncOp func = createKernel(b, spec.kernelName(),
                                     {dynamic2D(logitType), dynamic2D(i32),
                                      dynamic2D(f32), dynamic2D(logitType)});
  Block *entry = &func.getBody().front();
  Value logits = entry->getArgument(0), ids = entry->getArgument(1),
        grad = entry->getArgument(2), out = entry->getArgument(3);
  IndexMath m{b};
  constexpr int64_t kWarps = kRoutingThreads / 32;
  const int64_t experts = spec.experts, k = spec.topK;
  const int64_t perLane = (experts + 31) / 32;
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value lane = arith::RemUIOp::create(b, tid, m.c(32));
  Value laneI32 = arith::IndexCastOp::create(b, i32, lane);
  Value tokens = memref::DimOp::create(b, logits, m.c(0));
  Value first =
      m.add(m.mul(gpu::BlockIdOp::create(b, gpu::Dimension::x), m.c(kWarps)),
            arith::DivUIOp::create(b, tid, m.c(32)));
  Value step = m.mul(gpu::GridDimOp::create(b, gpu::Dimension::x), m.c(kWarps));
  scf::ForOp::create(
      b, first, tokens, step, ValueRange{},
      [&](OpBuilder &nested, Location l, Value t, ValueRange) {
        ImplicitLocOpBuilder nb(l, nested);
        IndexMath n{nb};
        auto c = [&](double v) -> Value { return f32Constant(nb, v); };
        auto add = [&](Value x, Value y) -> Value {
          return arith::AddFOp::create(nb, x, y);
        };
        auto mul = [&](Value x, Value y) -> Value {
          return arith::MulFOp::create(nb, x, y);
        };
        auto sub = [&](Value x, Value y) -> Value {
          return arith::SubFOp::create(nb, x, y);
        };
        auto sum = [&](Value v) {
          return warpReduce(nb, v, [&](Value x, Value y) { return add(x, y); });
        };
        auto maxOf = [&](Value v) {
          return warpReduce(nb, v, [&](Value x, Value y) -> Value {
            return arith::MaximumFOp::create(nb, x, y);
          });
        };
        auto logitAt = [&](Value col) -> Value {
          Value x = n.load(logits, ValueRange{t, col});
          return spec.logitBits == 16 ? arith::ExtFOp::create(nb, f32, x) : x;
        };
        // Lane j holds pair j: its id (valid in [0, E)), gradient, logit.
        Value isPair = n.lt(lane, n.c(k));
        Value pairCol = arith::SelectOp::create(nb, isPair, lane, n.c(0));
        Value rawId = n.load(ids, ValueRange{t, pairCol});
        Value valid = arith::AndIOp::create(
            nb, isPair,
            arith::AndIOp::create(
                nb,
                arith::CmpIOp::create(nb, arith::CmpIPredicate::sge, rawId,
                                      i32Constant(nb, 0)),
                arith::CmpIOp::create(nb, arith::CmpIPredicate::slt, rawId,
                                      i32Constant(nb, experts))));
        Value id =
            arith::SelectOp::create(nb, valid, rawId, i32Constant(nb, -1));
        Value g = arith::SelectOp::create(
            nb, isPair, n.load(grad, ValueRange{t, pairCol}), c(0.0));
        Value xId = logitAt(
            arith::SelectOp::create(nb, valid, n.toIndex(rawId), n.c(0)));
        // softmax_topk: the softmax over all E (max and sum across lanes).
        Value rowMax, rowSum;
        SmallVector<Value> rowLogits;
        if (spec.routing == Routing::softmax_topk) {
          Value mx = c(-std::numeric_limits<float>::infinity());
          for (int64_t i = 0; i < perLane; ++i) {
            Value col = n.add(lane, n.c(32 * i));
            Value inside = n.lt(col, n.c(experts));
            Value x = arith::SelectOp::create(
                nb, inside,
                logitAt(arith::SelectOp::create(nb, inside, col, n.c(0))),
                c(-std::numeric_limits<float>::infinity()));
            rowLogits.push_back(x);
            mx = arith::MaximumFOp::create(nb, mx, x);
          }
          rowMax = maxOf(mx);
          Value part = c(0.0);
          for (Value x : rowLogits)
            part = add(part, expApprox(nb, sub(x, rowMax)));
          rowSum = sum(part);
        }
        // v: the chosen pair's score (0 for an invalid pair; topk_softmax:
        // the softmax over the k pairs, an invalid one counting as logit 0).
        Value v;
        switch (spec.routing) {
        case Routing::softmax_topk:
          v = arith::SelectOp::create(
              nb, valid,
              arith::DivFOp::create(nb, expApprox(nb, sub(xId, rowMax)),
                                    rowSum),
              c(0.0));
          break;
        case Routing::sigmoid_topk:
          v = arith::SelectOp::create(nb, valid, sigmoidApprox(nb, xId),
                                      c(0.0));
          break;
        case Routing::topk_softmax: {
          Value chosen = arith::SelectOp::create(nb, valid, xId, c(0.0));
          Value pairMax = maxOf(arith::SelectOp::create(
              nb, isPair, chosen, c(-std::numeric_limits<float>::infinity())));
          Value e = arith::SelectOp::create(
              nb, isPair, expApprox(nb, sub(chosen, pairMax)), c(0.0));
          v = arith::DivFOp::create(nb, e, sum(e));
          break;
        }
        }
        // Back through the scale and the renormalisation w = v / (S + eps):
        // dv = (dw - Σ_l dw_l w_l) / (S + eps).
        Value dv = spec.scale != 1.0 ? mul(g, c(spec.scale)) : g;
        if (spec.renormalize) {
          double epsilon = spec.routing == Routing::sigmoid_topk ? 1e-20 : 0.0;
          Value denominator = add(sum(v), c(epsilon));
          Value normalized = arith::DivFOp::create(nb, v, denominator);
          dv = arith::DivFOp::create(nb, sub(dv, sum(mul(dv, normalized))),
                                     denominator);
        }
        Value dotV = sum(mul(dv, v));
        Value dChosen = dv;
        if (spec.routing == Routing::sigmoid_topk)
          dChosen = mul(dv, mul(v, sub(c(1.0), v)));
        if (spec.routing == Routing::topk_softmax)
          dChosen = mul(v, sub(dv, dotV));
        // Every lane learns every pair's (id, gradient), then writes its
        // logits' gradients: Σ_j [ids_j == e] dChosen_j, through the
        // softmax over all E for softmax_topk.
        SmallVector<Value> pairIds, pairGrads;
        for (int64_t j = 0; j < k; ++j) {
          auto broadcast = [&](Value x) -> Value {
            return gpu::ShuffleOp::create(nb, x, int32_t(j), 32,
                                          gpu::ShuffleMode::IDX)
                .getShuffleResult();
          };
          pairIds.push_back(broadcast(id));
          pairGrads.push_back(broadcast(dChosen));
        }
        for (int64_t i = 0; i < perLane; ++i) {
          Value col = n.add(lane, n.c(32 * i));
          Value colI32 =
              arith::AddIOp::create(nb, laneI32, i32Constant(nb, 32 * i));
          Value scattered = c(0.0);
          for (int64_t j = 0; j < k; ++j)
            scattered =
                add(scattered,
                    arith::SelectOp::create(
                        nb,
                        arith::CmpIOp::create(nb, arith::CmpIPredicate::eq,
                                              pairIds[j], colI32),
                        pairGrads[j], c(0.0)));
          Value result = scattered;
          if (spec.routing == Routing::softmax_topk)
            result =
                mul(arith::DivFOp::create(
                        nb, expApprox(nb, sub(rowLogits[i], rowMax)), rowSum),
                    sub(scattered, dotV));
          if (spec.logitBits == 16)
            result = arith::TruncFOp::create(nb, logitType, result);
          ifThen(nb, n.lt(col, n.c(experts)), [&](ImplicitLocOpBuilder &sb) {
            memref::StoreOp::create(sb, result, out, ValueRange{t, col});
          });
        }
        scf::YieldOp::create(nb);
      });
  gpu::ReturnOp::create(b);
  return func;
}

std::string UnpermuteGradKernelSpec::kernelName(StringRef step) const {
  if (step == "init")
    return "moe_unpermute_grad_init";
  std::string name =
      llvm::formatv("moe_unpermute_grad_{0}_s{1}", step, slotBits);
  return step == "gather" && !weighted ? name + "_unweighted" : name;
}

gpu::GPUFuncOp mlir::moe::buildUnpermuteGradKernel(
    OpBuilder &builder, Location loc, gpu::GPUModuleOp module,
    const UnpermuteGradKernelSpec &spec, UnpermuteGradStep step) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Type f32 = b.getF32Type(), bf16 = b.getBF16Type(), i32 = b.getI32Type();
  Type slotType = b.getIntegerType(spec.slotBits);
  auto counts1D = MemRefType::get({ShapedType::kDynamic}, i32);
  constexpr int64_t kThreads = kUnpermuteGradThreads, kVector = 8;
  StringRef stepName = step == UnpermuteGradStep::Init    ? "init"
                       : step == UnpermuteGradStep::Count ? "count"
                                                          : "gather";
  SmallVector<Type> args;
  if (step == UnpermuteGradStep::Init)
    args = {counts1D};
  else if (step == UnpermuteGradStep::Count)
    args = {dynamic2D(slotType), counts1D};
  else if (spec.weighted)
    args = {dynamic2D(bf16), dynamic2D(bf16), dynamic2D(slotType),
            dynamic2D(f32),  counts1D,        dynamic2D(bf16),
            dynamic2D(f32)};
  else
    args = {dynamic2D(bf16), dynamic2D(bf16), dynamic2D(slotType), counts1D,
            dynamic2D(bf16)};
  gpu::GPUFuncOp func =
      createKernel(b, spec.kernelName(stepName), args, kThreads);
  Block *entry = &func.getBody().front();
  auto arg = [&](unsigned i) { return entry->getArgument(i); };
  IndexMath m{b};
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value block = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value grid = gpu::GridDimOp::create(b, gpu::Dimension::x);
  // A grid-stride loop of `body` over [0, count) by thread or by warp.
  auto gridStride =
      [&](Value count, bool byWarp,
          function_ref<void(ImplicitLocOpBuilder &, Value)> body) {
        int64_t perCTA = byWarp ? kThreads / 32 : kThreads;
        Value first =
            m.add(m.mul(block, m.c(perCTA)),
                  byWarp ? arith::DivUIOp::create(b, tid, m.c(32)) : tid);
        scf::ForOp::create(
            b, first, count, m.mul(grid, m.c(perCTA)), ValueRange{},
            [&](OpBuilder &nested, Location l, Value i, ValueRange) {
              ImplicitLocOpBuilder nb(l, nested);
              body(nb, i);
              scf::YieldOp::create(nb);
            });
      };

  if (step == UnpermuteGradStep::Init) {
    Value counts = arg(0);
    gridStride(memref::DimOp::create(b, counts, m.c(0)), false,
               [&](ImplicitLocOpBuilder &nb, Value r) {
                 memref::StoreOp::create(nb, i32Constant(nb, 0), counts, r);
               });
    gpu::ReturnOp::create(b);
    return func;
  }

  Value slots = arg(step == UnpermuteGradStep::Count ? 0 : 2);
  Value counts =
      step == UnpermuteGradStep::Count ? arg(1) : arg(spec.weighted ? 4 : 3);
  Value numRows = memref::DimOp::create(b, counts, m.c(0));
  Value k = memref::DimOp::create(b, slots, m.c(1));
  Value pairs = m.mul(memref::DimOp::create(b, slots, m.c(0)), k);
  // The row of pair `p` as an index, and whether it is one of [0, M).
  auto rowOf = [&](ImplicitLocOpBuilder &nb,
                   Value p) -> std::pair<Value, Value> {
    IndexMath n{nb};
    Value slot =
        memref::LoadOp::create(nb, slots,
                               ValueRange{arith::DivUIOp::create(nb, p, k),
                                          arith::RemUIOp::create(nb, p, k)});
    Value row = n.toIndex(slot);
    Value inRange = arith::AndIOp::create(
        nb, arith::CmpIOp::create(nb, arith::CmpIPredicate::sge, row, n.c(0)),
        n.lt(row, numRows));
    return {row, inRange};
  };

  // Whether pair `q` names row `row`.
  auto namesRow = [&](ImplicitLocOpBuilder &nb, Value q, Value row) -> Value {
    std::pair<Value, Value> otherAndValid = rowOf(nb, q);
    Value other = otherAndValid.first, valid = otherAndValid.second;
    return arith::AndIOp::create(
        nb, valid,
        arith::CmpIOp::create(nb, arith::CmpIPredicate::eq, other, row));
  };

  if (step == UnpermuteGradStep::Count) {
    gridStride(pairs, false, [&](ImplicitLocOpBuilder &nb, Value p) {
      std::pair<Value, Value> rowAndInRange = rowOf(nb, p);
      Value row = rowAndInRange.first, inRange = rowAndInRange.second;
      ifThen(nb, inRange, [&](ImplicitLocOpBuilder &tb) {
        memref::AtomicRMWOp::create(tb, arith::AtomicRMWKind::addi,
                                    i32Constant(tb, 1), counts, row);
      });
    });
    gpu::ReturnOp::create(b);
    return func;
  }

  Value grad = arg(0), rows = arg(1);
  Value weights = spec.weighted ? arg(3) : Value();
  Value rowsGrad = arg(spec.weighted ? 5 : 4);
  Value weightsGrad = spec.weighted ? arg(6) : Value();
  Value hidden = memref::DimOp::create(b, grad, m.c(1));
  Value lane = arith::RemUIOp::create(b, tid, m.c(32));
  auto f32Vector = VectorType::get({kVector}, f32);
  auto bf16Vector = VectorType::get({kVector}, bf16);
  auto loadRow = [&](ImplicitLocOpBuilder &nb, Value from, Value row,
                     Value col) -> Value {
    Value loaded =
        vector::LoadOp::create(nb, bf16Vector, from, ValueRange{row, col},
                               /*nontemporal=*/false, llvm::Align(16));
    return arith::ExtFOp::create(nb, f32Vector, loaded);
  };
  auto storeRow = [&](ImplicitLocOpBuilder &nb, Value v, Value row, Value col) {
    vector::StoreOp::create(nb, v, rowsGrad, ValueRange{row, col},
                            /*nontemporal=*/false, llvm::Align(16));
  };
  // The lane's 16-byte column vectors, a warp's 256 columns apart, with a
  // loop-carried value.
  auto columns = [&](ImplicitLocOpBuilder &nb, Value end, ValueRange init,
                     function_ref<SmallVector<Value>(ImplicitLocOpBuilder &,
                                                     Value, ValueRange)>
                         body) {
    IndexMath n{nb};
    return scf::ForOp::create(
               nb, n.mul(lane, n.c(kVector)), end, n.c(32 * kVector), init,
               [&](OpBuilder &nested, Location l, Value col, ValueRange iter) {
                 ImplicitLocOpBuilder cb(l, nested);
                 scf::YieldOp::create(cb, body(cb, col, iter));
               })
        .getResults();
  };
  auto weightOf = [&](ImplicitLocOpBuilder &nb, Value p) -> Value {
    if (!weights)
      return f32Constant(nb, 1.0);
    return memref::LoadOp::create(nb, weights,
                                  ValueRange{arith::DivUIOp::create(nb, p, k),
                                             arith::RemUIOp::create(nb, p, k)});
  };
  auto splat = [&](ImplicitLocOpBuilder &nb, Value scalar) -> Value {
    return vector::BroadcastOp::create(nb, f32Vector, scalar);
  };

  gridStride(
      m.add(pairs, numRows), true, [&](ImplicitLocOpBuilder &nb, Value item) {
        IndexMath n{nb};
        auto isPair = scf::IfOp::create(nb, n.lt(item, pairs), /*else=*/true);
        {
          // A pair: if it is its row's first, the weight gradients of the
          // row's pairs and the row's gradient; without a row, a zero
          // weight gradient.
          ImplicitLocOpBuilder tb(loc, isPair.getThenBodyBuilder());
          Value p = item, token = arith::DivUIOp::create(tb, p, k);
          std::pair<Value, Value> rowAndInRange = rowOf(tb, p);
          Value row = rowAndInRange.first, inRange = rowAndInRange.second;
          // Pair q's weight gradient <grad[q's token], rows[row]>: the
          // lane's columns in order, then the warp's butterfly (a fixed
          // order).
          auto storeDot = [&](ImplicitLocOpBuilder &db, Value q) {
            Value qToken = arith::DivUIOp::create(db, q, k);
            Value partial = columns(
                db, hidden, {f32Constant(db, 0.0)},
                [&](ImplicitLocOpBuilder &cb, Value col, ValueRange iter) {
                  Value g = loadRow(cb, grad, qToken, col);
                  Value r = loadRow(cb, rows, row, col);
                  Value acc = iter[0];
                  for (int64_t e = 0; e < kVector; ++e) {
                    auto at = [&](Value v) -> Value {
                      return vector::ExtractOp::create(cb, v,
                                                       ArrayRef<int64_t>{e});
                    };
                    acc = arith::AddFOp::create(
                        cb, acc, arith::MulFOp::create(cb, at(g), at(r)));
                  }
                  return SmallVector<Value>{acc};
                })[0];
            Value dot = warpReduce(db, partial, [&](Value x, Value y) -> Value {
              return arith::AddFOp::create(db, x, y);
            });
            ifThen(db,
                   arith::CmpIOp::create(db, arith::CmpIPredicate::eq, lane,
                                         IndexMath{db}.c(0)),
                   [&](ImplicitLocOpBuilder &lb) {
                     memref::StoreOp::create(
                         lb, dot, weightsGrad,
                         ValueRange{qToken, arith::RemUIOp::create(lb, q, k)});
                   });
          };
          // A pair without a row has a zero weight gradient.
          if (weightsGrad)
            ifThen(tb,
                   arith::XOrIOp::create(
                       tb, inRange, arith::ConstantIntOp::create(tb, 1, 1)),
                   [&](ImplicitLocOpBuilder &zb) {
                     ifThen(zb,
                            arith::CmpIOp::create(zb, arith::CmpIPredicate::eq,
                                                  lane, IndexMath{zb}.c(0)),
                            [&](ImplicitLocOpBuilder &lb) {
                              memref::StoreOp::create(
                                  lb, f32Constant(lb, 0.0), weightsGrad,
                                  ValueRange{token,
                                             arith::RemUIOp::create(lb, p, k)});
                            });
                   });
          ifThen(tb, inRange, [&](ImplicitLocOpBuilder &vb) {
            Value count = memref::LoadOp::create(vb, counts, row);
            Value shared = arith::CmpIOp::create(vb, arith::CmpIPredicate::sgt,
                                                 count, i32Constant(vb, 1));
            // A row named by more pairs: is an earlier pair its first? (the
            // lanes look at every 32nd pair, then the warp's max).
            auto earlier = scf::IfOp::create(
                vb, shared,
                [&](OpBuilder &nested, Location l) {
                  ImplicitLocOpBuilder sb(l, nested);
                  IndexMath s{sb};
                  Value found =
                      scf::ForOp::create(
                          sb, lane, p, s.c(32), ValueRange{i32Constant(sb, 0)},
                          [&](OpBuilder &inner, Location il, Value q,
                              ValueRange iter) {
                            ImplicitLocOpBuilder qb(il, inner);
                            Value one = arith::ExtUIOp::create(
                                qb, qb.getI32Type(), namesRow(qb, q, row));
                            scf::YieldOp::create(
                                qb, ValueRange{arith::MaxUIOp::create(
                                        qb, iter[0], one)});
                          })
                          .getResult(0);
                  Value any =
                      warpReduce(sb, found, [&](Value x, Value y) -> Value {
                        return arith::MaxUIOp::create(sb, x, y);
                      });
                  scf::YieldOp::create(sb, ValueRange{arith::CmpIOp::create(
                                               sb, arith::CmpIPredicate::ne,
                                               any, i32Constant(sb, 0))});
                },
                [&](OpBuilder &nested, Location l) {
                  ImplicitLocOpBuilder sb(l, nested);
                  scf::YieldOp::create(
                      sb, ValueRange{arith::ConstantIntOp::create(sb, 0, 1)});
                });
            Value first =
                arith::XOrIOp::create(vb, earlier.getResult(0),
                                      arith::ConstantIntOp::create(vb, 1, 1));
            // The row's first pair reads rows[row] for the weight gradients
            // of all its pairs, then writes rows_grad[row]: no other warp
            // touches the row, so rows_grad may be rows (in place).
            ifThen(vb, first, [&](ImplicitLocOpBuilder &fb) {
              if (weightsGrad) {
                storeDot(fb, p);
                ifThen(fb, shared, [&](ImplicitLocOpBuilder &sb) {
                  IndexMath s{sb};
                  scf::ForOp::create(
                      sb, s.add(p, s.c(1)), pairs, s.c(1), ValueRange{},
                      [&](OpBuilder &inner, Location il, Value q, ValueRange) {
                        ImplicitLocOpBuilder qb(il, inner);
                        ifThen(
                            qb, namesRow(qb, q, row),
                            [&](ImplicitLocOpBuilder &db) { storeDot(db, q); });
                        scf::YieldOp::create(qb);
                      });
                });
              }
              Value weight = weightOf(fb, p);
              columns(
                  fb, hidden, {},
                  [&](ImplicitLocOpBuilder &cb, Value col, ValueRange) {
                    Value own = arith::MulFOp::create(
                        cb, loadRow(cb, grad, token, col), splat(cb, weight));
                    // The later pairs of the row, in pair order.
                    auto later = scf::IfOp::create(
                        cb, shared,
                        [&](OpBuilder &nested, Location l) {
                          ImplicitLocOpBuilder sb(l, nested);
                          IndexMath s{sb};
                          Value sum =
                              scf::ForOp::create(
                                  sb, s.add(p, s.c(1)), pairs, s.c(1),
                                  ValueRange{own},
                                  [&](OpBuilder &inner, Location il, Value q,
                                      ValueRange iter) {
                                    ImplicitLocOpBuilder qb(il, inner);
                                    Value same = namesRow(qb, q, row);
                                    auto add = scf::IfOp::create(
                                        qb, same,
                                        [&](OpBuilder &n2, Location l2) {
                                          ImplicitLocOpBuilder ab(l2, n2);
                                          Value term = arith::MulFOp::create(
                                              ab,
                                              loadRow(ab, grad,
                                                      arith::DivUIOp::create(
                                                          ab, q, k),
                                                      col),
                                              splat(ab, weightOf(ab, q)));
                                          scf::YieldOp::create(
                                              ab,
                                              ValueRange{arith::AddFOp::create(
                                                  ab, iter[0], term)});
                                        },
                                        [&](OpBuilder &n2, Location l2) {
                                          scf::YieldOp::create(n2, l2, iter[0]);
                                        });
                                    scf::YieldOp::create(qb, add.getResults());
                                  })
                                  .getResult(0);
                          scf::YieldOp::create(sb, ValueRange{sum});
                        },
                        [&](OpBuilder &nested, Location l) {
                          scf::YieldOp::create(nested, l, own);
                        });
                    storeRow(cb,
                             arith::TruncFOp::create(cb, bf16Vector,
                                                     later.getResult(0)),
                             row, col);
                    return SmallVector<Value>{};
                  });
            });
          });
        }
        {
          // A row: zero when no pair names it.
          ImplicitLocOpBuilder eb(loc, isPair.getElseBodyBuilder());
          Value row = IndexMath{eb}.sub(item, pairs);
          Value count = memref::LoadOp::create(eb, counts, row);
          ifThen(eb,
                 arith::CmpIOp::create(eb, arith::CmpIPredicate::eq, count,
                                       i32Constant(eb, 0)),
                 [&](ImplicitLocOpBuilder &zb) {
                   Value zero = arith::ConstantOp::create(
                       zb, bf16Vector,
                       DenseElementsAttr::get(bf16Vector,
                                              zb.getFloatAttr(bf16, 0.0)));
                   columns(
                       zb, hidden, {},
                       [&](ImplicitLocOpBuilder &cb, Value col, ValueRange) {
                         storeRow(cb, zero, row, col);
                         return SmallVector<Value>{};
                       });
                 });
        }
      });
  gpu::ReturnOp::create(b);
  return func;
}

std::string BiasGradKernelSpec::kernelName() const {
  return llvm::formatv("moe_bias_grad_off{0}_{1}", offsetBits,
                       outF32 ? "f32" : "bf16")
      .str();
}

gpu::GPUFuncOp mlir::moe::buildBiasGradKernel(OpBuilder &builder, Location loc,
                                              gpu::GPUModuleOp module,
                                              const BiasGradKernelSpec &spec) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Type f32 = b.getF32Type(), bf16 = b.getBF16Type();
  Type outType = spec.outF32 ? f32 : bf16;
  constexpr int64_t kVector = 8, kWarps = kBiasGradThreads / 32;
  auto offsetsType = MemRefType::get({ShapedType::kDynamic},
                                     b.getIntegerType(spec.offsetBits));
  gpu::GPUFuncOp func = createKernel(
      b, spec.kernelName(), {dynamic2D(bf16), offsetsType, dynamic2D(outType)},
      kBiasGradThreads, {kBiasGradThreads * kVector}, {f32});
  Block *entry = &func.getBody().front();
  Value grad = entry->getArgument(0), offsets = entry->getArgument(1),
        out = entry->getArgument(2);
  Value partial = func.getWorkgroupAttributions().front();
  IndexMath m{b};
  Value numRows = memref::DimOp::create(b, grad, m.c(0));
  Value width = memref::DimOp::create(b, out, m.c(1));
  Value experts = memref::DimOp::create(b, out, m.c(0));
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value warp = arith::DivUIOp::create(b, tid, m.c(32));
  Value lane = arith::RemUIOp::create(b, tid, m.c(32));
  // A CTA per (expert, 256 columns): 8 columns a lane, the expert's rows
  // strided over the warps, the warps' sums added in warp order.
  Value blocks = m.ceilDiv(width, 32 * kVector);
  auto f32Vector = VectorType::get({kVector}, f32);
  auto bf16Vector = VectorType::get({kVector}, bf16);
  scf::ForOp::create(
      b, gpu::BlockIdOp::create(b, gpu::Dimension::x), m.mul(experts, blocks),
      gpu::GridDimOp::create(b, gpu::Dimension::x), ValueRange{},
      [&](OpBuilder &nested, Location l, Value item, ValueRange) {
        ImplicitLocOpBuilder nb(l, nested);
        IndexMath n{nb};
        Value e = arith::DivUIOp::create(nb, item, blocks);
        Value col = n.add(
            n.mul(arith::RemUIOp::create(nb, item, blocks), n.c(32 * kVector)),
            n.mul(lane, n.c(kVector)));
        // The expert's rows after the clamp (docs/semantics.md): from the
        // running maximum of offsets[0..e] to that of offsets[0..e+1],
        // within [0, M].
        auto scan = scf::ForOp::create(
            nb, n.c(0), n.add(e, n.c(2)), n.c(1), ValueRange{n.c(0), n.c(0)},
            [&](OpBuilder &inner, Location il, Value j, ValueRange iter) {
              ImplicitLocOpBuilder ib(il, inner);
              IndexMath o{ib};
              Value v = o.toIndex(o.load(offsets, j));
              Value hi = arith::MaxSIOp::create(ib, iter[1], v);
              Value lo = arith::SelectOp::create(ib, o.le(j, e), hi, iter[0]);
              scf::YieldOp::create(ib, ValueRange{lo, hi});
            });
        Value start = arith::MinSIOp::create(nb, scan.getResult(0), numRows);
        Value end = arith::MinSIOp::create(nb, scan.getResult(1), numRows);
        Value inside = n.lt(col, width);
        Value zero = arith::ConstantOp::create(
            nb, DenseElementsAttr::get(f32Vector, 0.0f));
        auto sum = scf::ForOp::create(
            nb, n.add(start, warp),
            arith::SelectOp::create(nb, inside, end, start), n.c(kWarps),
            ValueRange{zero},
            [&](OpBuilder &inner, Location il, Value r, ValueRange acc) {
              ImplicitLocOpBuilder ib(il, inner);
              Value row = vector::LoadOp::create(
                  ib, bf16Vector, grad, ValueRange{r, col},
                  /*nontemporal=*/false, llvm::Align(16));
              scf::YieldOp::create(
                  ib,
                  ValueRange{arith::AddFOp::create(
                      ib, acc[0], arith::ExtFOp::create(ib, f32Vector, row))});
            });
        vector::StoreOp::create(nb, sum.getResult(0), partial,
                                ValueRange{n.mul(tid, n.c(kVector))});
        gpu::BarrierOp::create(nb);
        ifThen(nb, arith::AndIOp::create(nb, inside, n.lt(warp, n.c(1))),
               [&](ImplicitLocOpBuilder &ib) {
                 IndexMath o{ib};
                 Value total = zero;
                 for (int64_t w = 0; w < kWarps; ++w)
                   total = arith::AddFOp::create(
                       ib, total,
                       vector::LoadOp::create(
                           ib, f32Vector, partial,
                           ValueRange{
                               o.mul(o.add(lane, o.c(32 * w)), o.c(kVector))}));
                 if (!spec.outF32)
                   total = arith::TruncFOp::create(ib, bf16Vector, total);
                 vector::StoreOp::create(ib, total, out, ValueRange{e, col});
               });
        gpu::BarrierOp::create(nb);
        scf::YieldOp::create(nb);
      });
  gpu::ReturnOp::create(b);
  return func;
}
