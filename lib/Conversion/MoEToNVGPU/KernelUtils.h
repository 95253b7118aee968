//===- KernelUtils.h - shorthands shared by the kernel builders -*- C++ -*-===//
//
// Small helpers the sm_90a kernel builders of this directory share: index
// arithmetic, `scf.if` without results, warp shuffles, and f32 math that
// lowers to single PTX instructions.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONVERSION_MOETONVGPU_KERNELUTILS_H
#define MOE_CONVERSION_MOETONVGPU_KERNELUTILS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <utility>

namespace mlir::moe {

/// Index-typed arithmetic shorthands.
struct IndexMath {
  ImplicitLocOpBuilder &b;
  Value c(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, x, y); }
  Value ceilDiv(Value x, int64_t d) {
    return arith::DivSIOp::create(b, add(x, c(d - 1)), c(d));
  }
  Value lt(Value x, Value y) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::slt, x, y);
  }
  Value le(Value x, Value y) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::sle, x, y);
  }
  Value toIndex(Value v) {
    return arith::IndexCastOp::create(b, b.getIndexType(), v);
  }
  Value load(Value memref, ValueRange indices) {
    return memref::LoadOp::create(b, memref, indices);
  }
  Value view(Value bytes, Value byteOffset, MemRefType type) {
    return memref::ViewOp::create(b, type, bytes, byteOffset, ValueRange{});
  }
};

/// An i32 constant.
inline Value i32Constant(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantIntOp::create(b, b.getI32Type(), v);
}

/// An f32 constant.
inline Value f32Constant(ImplicitLocOpBuilder &b, double v) {
  return arith::ConstantOp::create(b, b.getFloatAttr(b.getF32Type(), v));
}

/// Lane `lane ^ offset`'s value of the 32-bit `v`.
inline Value shuffleXor(ImplicitLocOpBuilder &b, Value v, int32_t offset) {
  return gpu::ShuffleOp::create(b, v, offset, 32, gpu::ShuffleMode::XOR)
      .getShuffleResult();
}

/// `combine` over the warp's 32 values of `v`, in every lane (xor shuffles).
inline Value warpReduce(ImplicitLocOpBuilder &b, Value v,
                        function_ref<Value(Value, Value)> combine) {
  for (int32_t d = 16; d >= 1; d /= 2)
    v = combine(v, shuffleXor(b, v, d));
  return v;
}

/// The kernels' dynamic shared memory: a public, uninitialized i8 global of
/// the module, which becomes `.extern .shared` (gpu.dynamic_shared_memory
/// next to static shared memory would overlap the mbarriers in MLIR 22).
struct DynamicSharedMemory {
  MemRefType type;
  StringRef name = "moe_dynamic_smem";

  /// Declares the global at `b` (the module's body) unless it exists.
  DynamicSharedMemory(ImplicitLocOpBuilder &b, Operation *module) {
    type = MemRefType::get({0}, b.getI8Type(), MemRefLayoutAttrInterface(),
                           gpu::AddressSpaceAttr::get(
                               b.getContext(), gpu::AddressSpace::Workgroup));
    if (!SymbolTable::lookupSymbolIn(module, name))
      memref::GlobalOp::create(b, b.getStringAttr(name), StringAttr(),
                               TypeAttr::get(type), Attribute(), UnitAttr(),
                               b.getI64IntegerAttr(1024));
  }
  /// Its bytes, in a kernel's body at `b`.
  Value get(ImplicitLocOpBuilder &b) const {
    return memref::GetGlobalOp::create(b, type, name);
  }
};

/// Emits `scf.if cond { body }` without results.
inline void ifThen(ImplicitLocOpBuilder &b, Value cond,
                   function_ref<void(ImplicitLocOpBuilder &)> body) {
  scf::IfOp::create(b, cond, [&](OpBuilder &nested, Location loc) {
    ImplicitLocOpBuilder nb(loc, nested);
    body(nb);
    scf::YieldOp::create(nb);
  });
}

/// Programmatic dependent launch (docs/runtime-contract.md §3.6): waits
/// until the kernel before this one on the stream has completed and its
/// writes are visible; then, with `launchDependents`, lets the kernel after
/// this one launch (else it launches when this one ends), whose CTAs wait in
/// turn before reading what this one writes. A kernel calls it before its
/// first read of another kernel's output, in every CTA (completion is then
/// transitive); launched without the attribute, both are no-ops.
inline void waitForPreviousKernel(ImplicitLocOpBuilder &b,
                                  bool launchDependents = true) {
  NVVM::GriddepcontrolOp::create(b, NVVM::GridDepActionKind::wait);
  if (launchDependents)
    NVVM::GriddepcontrolOp::create(b,
                                   NVVM::GridDepActionKind::launch_dependents);
}

/// 2^x in f32 by `ex2.approx.ftz` (one instruction; the NVVM lowering
/// refuses llvm.intr.exp2).
inline Value exp2Approx(ImplicitLocOpBuilder &b, Value x) {
  return LLVM::CallIntrinsicOp::create(
             b, b.getF32Type(), b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f"),
             ValueRange{x})
      .getResult(0);
}

/// e^x in f32 through exp2Approx.
inline Value expApprox(ImplicitLocOpBuilder &b, Value x) {
  Value log2e = arith::ConstantOp::create(
      b, b.getFloatAttr(b.getF32Type(), 1.4426950408889634));
  return exp2Approx(b, arith::MulFOp::create(b, x, log2e));
}

/// sigmoid(x) = 1 / (1 + e^-x) in f32; an overflow of e^-x to inf gives 0.
inline Value sigmoidApprox(ImplicitLocOpBuilder &b, Value x) {
  Type f32 = b.getF32Type();
  Value one = arith::ConstantOp::create(b, b.getFloatAttr(f32, 1.0));
  Value minusX = arith::NegFOp::create(b, x);
  return arith::DivFOp::create(
      b, one, arith::AddFOp::create(b, one, expApprox(b, minusX)));
}

/// silu(gate) * up in f32, as gate * sigmoid(gate) * up.
inline Value siluTimes(ImplicitLocOpBuilder &b, Value gate, Value up) {
  return arith::MulFOp::create(
      b, arith::MulFOp::create(b, gate, sigmoidApprox(b, gate)), up);
}

/// GPT-OSS's clamped SwiGLU in f32: with g = min(gate, limit) and
/// u = clamp(up, -limit, limit), (u + 1) * g * sigmoid(alpha * g). NaN
/// propagates through the clamps (arith.minimumf/maximumf), as in torch.
inline Value gptOssGlu(ImplicitLocOpBuilder &b, Value gate, Value up,
                       float alpha, float limit) {
  Type f32 = b.getF32Type();
  auto constant = [&](double v) -> Value {
    return arith::ConstantOp::create(b, b.getFloatAttr(f32, v));
  };
  Value g = arith::MinimumFOp::create(b, gate, constant(limit));
  Value u = arith::MaximumFOp::create(
      b, arith::MinimumFOp::create(b, up, constant(limit)), constant(-limit));
  Value glu = arith::MulFOp::create(
      b, g, sigmoidApprox(b, arith::MulFOp::create(b, g, constant(alpha))));
  return arith::MulFOp::create(b, arith::AddFOp::create(b, u, constant(1.0)),
                               glu);
}

/// The gate and up gradients (f32) of one output gradient `dh` of
/// act(gate, up), silu or (`gptOss`) GPT-OSS's clamped form, as
/// moe.swiglu_grad defines them (sigmoid as the forward epilogue's,
/// ex2.approx).
inline std::pair<Value, Value> gatedActivationGrad(ImplicitLocOpBuilder &b,
                                                   bool gptOss, float alpha,
                                                   float limit, Value gate,
                                                   Value up, Value dh) {
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
  if (!gptOss) {
    // d gate = dh * up * s (1 + gate (1 - s)), d up = dh * gate * s.
    Value s = sigmoidApprox(b, gate);
    return {mul(mul(dh, up), mul(s, slope(gate, s))), mul(dh, mul(gate, s))};
  }
  // g = min(gate, limit), u = clamp(up, -limit, limit); a clamp passes the
  // gradient where it does not clamp, its bounds included (as torch.clamp).
  Value limitC = c(limit), alphaC = c(alpha), zero = c(0.0);
  Value minusLimit = c(-limit);
  Value g = arith::MinimumFOp::create(b, gate, limitC);
  Value u = arith::MaximumFOp::create(
      b, arith::MinimumFOp::create(b, up, limitC), minusLimit);
  Value ag = mul(alphaC, g);
  Value s = sigmoidApprox(b, ag);
  Value gatePasses =
      arith::CmpFOp::create(b, arith::CmpFPredicate::OLE, gate, limitC);
  Value upPasses = arith::AndIOp::create(
      b, arith::CmpFOp::create(b, arith::CmpFPredicate::OGE, up, minusLimit),
      arith::CmpFOp::create(b, arith::CmpFPredicate::OLE, up, limitC));
  Value dGate =
      mul(mul(dh, arith::AddFOp::create(b, u, one)), mul(s, slope(ag, s)));
  Value dUp = mul(dh, mul(g, s));
  return {arith::SelectOp::create(b, gatePasses, dGate, zero),
          arith::SelectOp::create(b, upPasses, dUp, zero)};
}

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_KERNELUTILS_H
