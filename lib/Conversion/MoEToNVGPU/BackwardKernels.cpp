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

using namespace mlir;
using namespace mlir::moe;

std::string SwiGLUGradKernelSpec::kernelName() const {
  if (!gptOss)
    return "moe_swiglu_grad_silu";
  return "moe_swiglu_grad_gptoss_a" +
         llvm::utohexstr(llvm::bit_cast<uint32_t>(alpha), true) + "_l" +
         llvm::utohexstr(llvm::bit_cast<uint32_t>(limit), true);
}

/// The gate and up gradients (f32) of one output gradient `dh` of
/// act(gate, up), as moe.swiglu_grad defines them (sigmoid as the forward
/// epilogue's, ex2.approx).
static std::pair<Value, Value> swigluGrad(ImplicitLocOpBuilder &b,
                                          const SwiGLUGradKernelSpec &spec,
                                          Value gate, Value up, Value dh) {
  Type f32 = b.getF32Type();
  auto c = [&](double v) -> Value {
    return arith::ConstantOp::create(b, b.getFloatAttr(f32, v));
  };
  auto mul = [&](Value x, Value y) -> Value {
    return arith::MulFOp::create(b, x, y);
  };
  Value one = c(1.0);
  // x s(x) (1 + x (1 - s(x))) / x: the slope of x s(x), as s (1 + x (1 - s)).
  auto slope = [&](Value x, Value s) -> Value {
    return arith::AddFOp::create(b, one,
                                 mul(x, arith::SubFOp::create(b, one, s)));
  };
  if (!spec.gptOss) {
    // d gate = dh * up * s (1 + gate (1 - s)), d up = dh * gate * s.
    Value s = sigmoidApprox(b, gate);
    return {mul(mul(dh, up), mul(s, slope(gate, s))), mul(dh, mul(gate, s))};
  }
  // g = min(gate, limit), u = clamp(up, -limit, limit); a clamp passes the
  // gradient where it does not clamp, its bounds included (as torch.clamp).
  Value limit = c(spec.limit), alpha = c(spec.alpha), zero = c(0.0);
  Value minusLimit = c(-spec.limit);
  Value g = arith::MinimumFOp::create(b, gate, limit);
  Value u = arith::MaximumFOp::create(
      b, arith::MinimumFOp::create(b, up, limit), minusLimit);
  Value ag = mul(alpha, g);
  Value s = sigmoidApprox(b, ag);
  Value gatePasses =
      arith::CmpFOp::create(b, arith::CmpFPredicate::OLE, gate, limit);
  Value upPasses = arith::AndIOp::create(
      b, arith::CmpFOp::create(b, arith::CmpFPredicate::OGE, up, minusLimit),
      arith::CmpFOp::create(b, arith::CmpFPredicate::OLE, up, limit));
  Value dGate =
      mul(mul(dh, arith::AddFOp::create(b, u, one)), mul(s, slope(ag, s)));
  Value dUp = mul(dh, mul(g, s));
  return {arith::SelectOp::create(b, gatePasses, dGate, zero),
          arith::SelectOp::create(b, upPasses, dUp, zero)};
}

gpu::GPUFuncOp
mlir::moe::buildSwiGLUGradKernel(OpBuilder &builder, Location loc,
                                 gpu::GPUModuleOp module,
                                 const SwiGLUGradKernelSpec &spec) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Type f32 = b.getF32Type(), bf16 = b.getBF16Type();
  gpu::GPUFuncOp func = createKernel(
      b, spec.kernelName(), {dynamic2D(bf16), dynamic2D(bf16), dynamic2D(bf16)},
      kSwiGLUGradThreads);
  Block *entry = &func.getBody().front();
  Value input = entry->getArgument(0), grad = entry->getArgument(1),
        out = entry->getArgument(2);
  IndexMath m{b};
  constexpr int64_t kVector = kSwiGLUGradVector;
  Value numRows = memref::DimOp::create(b, grad, m.c(0));
  Value width = memref::DimOp::create(b, grad, m.c(1));
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
        Value gates = load(input, col), ups = load(input, n.add(col, width));
        Value dhs = load(grad, col);
        SmallVector<Value> dGates, dUps;
        for (int64_t lane = 0; lane < kVector; ++lane) {
          auto at = [&](Value v) -> Value {
            return vector::ExtractOp::create(nb, v, ArrayRef<int64_t>{lane});
          };
          auto [dGate, dUp] = swigluGrad(nb, spec, at(gates), at(ups), at(dhs));
          dGates.push_back(dGate);
          dUps.push_back(dUp);
        }
        Value dGate = vector::FromElementsOp::create(nb, f32Vector, dGates);
        Value dUp = vector::FromElementsOp::create(nb, f32Vector, dUps);
        auto store = [&](Value v, Value c) {
          vector::StoreOp::create(nb,
                                  arith::TruncFOp::create(nb, bf16Vector, v),
                                  out, ValueRange{row, c},
                                  /*nontemporal=*/false, llvm::Align(16));
        };
        store(dGate, col);
        store(dUp, n.add(col, width));
        scf::YieldOp::create(nb);
      });
  gpu::ReturnOp::create(b);
  return func;
}
