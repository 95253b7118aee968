//===- UnpermuteKernel.cpp - the moe.unpermute (combine) kernel ----------===//
//
// Combine, one CTA per token: a weighted sum of its expert rows (plus a
// shared expert's row), 8 columns per thread. docs/runtime-contract.md has
// its ABI.
//
//===----------------------------------------------------------------------===//

#include "KernelUtils.h"
#include "RoutingKernelUtils.h"
#include "RoutingKernels.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::moe;

std::string UnpermuteKernelSpec::kernelName() const {
  return llvm::formatv("moe_unpermute_k{0}_slots{1}{2}{3}", topK, slotBits,
                       weighted ? "_weighted" : "", shared ? "_shared" : "")
      .str();
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
  if (spec.shared)
    args.push_back(dynamic2D(bf16));
  args.push_back(dynamic2D(bf16));
  gpu::GPUFuncOp func = createKernel(b, spec.kernelName(), args);
  Block *entry = &func.getBody().front();
  unsigned next = 0;
  Value rows = entry->getArgument(next++);
  Value slots = entry->getArgument(next++);
  Value weights = spec.weighted ? entry->getArgument(next++) : Value();
  Value shared = spec.shared ? entry->getArgument(next++) : Value();
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
        CombineSlots pairs =
            loadCombineSlots(nb, slots, weights, t, numRows, spec.topK);
        Value col = n.add(firstColumn, n.mul(tid, n.c(kVector)));
        ifThen(nb, n.lt(col, hidden), [&](ImplicitLocOpBuilder &ib) {
          // A dropped slot reads row 0 and counts as zero.
          Value acc = combineColumns(ib, rows, pairs, col);
          // The shared expert's row joins the f32 sum before the rounding.
          if (shared) {
            Value row = vector::LoadOp::create(
                ib, bf16Vector, shared, ValueRange{t, col},
                /*nontemporal=*/false, llvm::Align(16));
            acc = arith::AddFOp::create(
                ib, acc, arith::ExtFOp::create(ib, f32Vector, row));
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

CombineSlots mlir::moe::loadCombineSlots(ImplicitLocOpBuilder &b, Value slots,
                                         Value weights, Value token,
                                         Value numRows, int64_t topK) {
  IndexMath n{b};
  CombineSlots out;
  for (int64_t j = 0; j < topK; ++j) {
    Value slot = n.toIndex(n.load(slots, ValueRange{token, n.c(j)}));
    // Slots outside [0, M) contribute nothing (docs/semantics.md).
    out.take.push_back(
        arith::AndIOp::create(b, n.le(n.c(0), slot), n.lt(slot, numRows)));
    out.row.push_back(
        arith::SelectOp::create(b, out.take.back(), slot, n.c(0)));
    out.weight.push_back(weights ? n.load(weights, ValueRange{token, n.c(j)})
                                 : f32Constant(b, 1.0));
  }
  return out;
}

Value mlir::moe::combineColumns(ImplicitLocOpBuilder &b, Value rows,
                                const CombineSlots &slots, Value col) {
  constexpr int64_t kVector = 8;
  auto f32Vector = VectorType::get({kVector}, b.getF32Type());
  auto bf16Vector = VectorType::get({kVector}, b.getBF16Type());
  SmallVector<Value> loaded;
  for (Value row : slots.row)
    loaded.push_back(
        vector::LoadOp::create(b, bf16Vector, rows, ValueRange{row, col},
                               /*nontemporal=*/false, llvm::Align(16)));
  Value zero =
      arith::ConstantOp::create(b, DenseElementsAttr::get(f32Vector, 0.0f));
  Value acc = zero;
  for (auto [value, take, weight] :
       llvm::zip_equal(loaded, slots.take, slots.weight)) {
    Value scaled = arith::MulFOp::create(
        b, arith::ExtFOp::create(b, f32Vector, value),
        vector::BroadcastOp::create(b, f32Vector, weight));
    acc = arith::AddFOp::create(b, acc,
                                arith::SelectOp::create(b, take, scaled, zero));
  }
  return acc;
}
