//===- FP8Codec.cpp - scalar FP8 / E8M0 encode and decode ----------------===//

#include "MoE/Utils/FP8Codec.h"

#include "MoE/Dialect/MoEDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>

using namespace mlir;

namespace {
/// The parameters of an OCP FP8 element format.
struct FP8Format {
  int mantissaBits;
  int exponentBias;
  int64_t maxFiniteCode; // largest finite magnitude code
  double maxFinite;
  int maxExponent; // emax_elem of OCP MX v1.0
  bool hasInfinity;
};

FP8Format getFormat(Type fp8Type) {
  if (isa<Float8E5M2Type>(fp8Type))
    return {2, 15, 0x7B, 57344.0, 15, true};
  return {3, 7, 0x7E, 448.0, 8, false};
}

/// Small arith emitters on i32 / f32 scalars.
struct Scalar {
  ImplicitLocOpBuilder &b;

  Value i32(int64_t v) {
    return arith::ConstantIntOp::create(b, b.getI32Type(), v);
  }
  Value f32(double v) {
    return arith::ConstantFloatOp::create(b, b.getF32Type(),
                                          APFloat(static_cast<float>(v)));
  }
  Value bitsOf(Value f) {
    return arith::BitcastOp::create(b, b.getI32Type(), f);
  }
  Value floatOf(Value i) {
    return arith::BitcastOp::create(b, b.getF32Type(), i);
  }
  Value band(Value x, int64_t m) { return arith::AndIOp::create(b, x, i32(m)); }
  Value shr(Value x, int64_t s) { return arith::ShRUIOp::create(b, x, i32(s)); }
  Value shl(Value x, int64_t s) { return arith::ShLIOp::create(b, x, i32(s)); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, x, y); }
  Value eq(Value x, int64_t v) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::eq, x, i32(v));
  }
  Value select(Value c, Value t, Value f) {
    return arith::SelectOp::create(b, c, t, f);
  }
};
} // namespace

Value mlir::moe::encodeFP8(ImplicitLocOpBuilder &b, Value x, Type fp8Type,
                           bool llvmRoundEven) {
  FP8Format fmt = getFormat(fp8Type);
  Scalar s{b};
  Value bits = s.bitsOf(x);
  Value magnitudeBits = s.band(bits, 0x7FFFFFFF);
  Value magnitude = s.floatOf(magnitudeBits);
  Value signByte = s.select(s.eq(s.shr(bits, 31), 1), s.i32(0x80), s.i32(0));
  Value isNaN = arith::CmpIOp::create(b, arith::CmpIPredicate::ugt,
                                      magnitudeBits, s.i32(0x7F800000));

  // Below the smallest normal the grid is uniform: round |x| / ulp to even.
  double minNormal = std::ldexp(1.0, 1 - fmt.exponentBias);
  double inverseUlp = std::ldexp(1.0, fmt.exponentBias - 1 + fmt.mantissaBits);
  Value isSubnormal = arith::CmpFOp::create(b, arith::CmpFPredicate::OLT,
                                            magnitude, s.f32(minNormal));
  Value scaled = arith::MulFOp::create(b, magnitude, s.f32(inverseUlp));
  // The GPU form names the intrinsic (cvt.rni.f32.f32): convert-gpu-to-nvvm
  // refuses llvm.intr.roundeven and would turn math.roundeven into a call
  // of libdevice's __nv_rintf.
  Value roundedScaled =
      llvmRoundEven
          ? LLVM::CallIntrinsicOp::create(b, b.getF32Type(),
                                          b.getStringAttr("llvm.roundeven.f32"),
                                          ValueRange{scaled})
                .getResult(0)
          : Value(math::RoundEvenOp::create(b, scaled));
  Value subnormalCode =
      arith::FPToUIOp::create(b, b.getI32Type(), roundedScaled);

  // Normal: drop the low f32 mantissa bits with round-to-nearest-even; a
  // carry moves into the exponent by itself. Then rebias the exponent.
  int shift = 23 - fmt.mantissaBits;
  Value lsb = s.band(s.shr(magnitudeBits, shift), 1);
  Value rounded = s.shr(
      s.add(s.add(magnitudeBits, s.i32((1 << (shift - 1)) - 1)), lsb), shift);
  Value normalCode =
      s.sub(rounded, s.i32(static_cast<int64_t>(127 - fmt.exponentBias)
                           << fmt.mantissaBits));

  Value saturates = arith::CmpFOp::create(b, arith::CmpFPredicate::OGE,
                                          magnitude, s.f32(fmt.maxFinite));
  Value code =
      s.select(isSubnormal, subnormalCode,
               s.select(saturates, s.i32(fmt.maxFiniteCode), normalCode));
  code = arith::OrIOp::create(b, code, signByte);
  code = s.select(isNaN, s.i32(0x7F), code);
  return arith::TruncIOp::create(b, b.getI8Type(), code);
}

Value mlir::moe::decodeFP8(ImplicitLocOpBuilder &b, Value code8, Type fp8Type) {
  FP8Format fmt = getFormat(fp8Type);
  Scalar s{b};
  int exponentBits = 7 - fmt.mantissaBits;
  Value code = arith::ExtUIOp::create(b, b.getI32Type(), code8);
  Value exponent =
      s.band(s.shr(code, fmt.mantissaBits), (1 << exponentBits) - 1);
  Value mantissa = s.band(code, (1 << fmt.mantissaBits) - 1);

  Value subnormal = arith::MulFOp::create(
      b, arith::UIToFPOp::create(b, b.getF32Type(), mantissa),
      s.f32(std::ldexp(1.0, 1 - fmt.exponentBias - fmt.mantissaBits)));
  Value normalBits = arith::OrIOp::create(
      b, s.shl(s.add(exponent, s.i32(127 - fmt.exponentBias)), 23),
      s.shl(mantissa, 23 - fmt.mantissaBits));
  Value magnitude =
      s.select(s.eq(exponent, 0), subnormal, s.floatOf(normalBits));

  Value nan = s.f32(std::nan(""));
  if (fmt.hasInfinity) {
    Value special = s.eq(exponent, (1 << exponentBits) - 1);
    Value inf = s.f32(INFINITY);
    magnitude =
        s.select(special, s.select(s.eq(mantissa, 0), inf, nan), magnitude);
  } else {
    magnitude = s.select(s.eq(s.band(code, 0x7F), 0x7F), nan, magnitude);
  }
  Value negative = s.eq(s.shr(code, 7), 1);
  return s.select(negative, arith::NegFOp::create(b, magnitude), magnitude);
}

Value mlir::moe::mxScaleCode(ImplicitLocOpBuilder &b, Value amax,
                             Type fp8Type) {
  FP8Format fmt = getFormat(fp8Type);
  Scalar s{b};
  // floor(log2(amax)) is the f32 exponent field minus 127; zero and f32
  // subnormals land below -127 - emax and clamp to the smallest scale.
  Value exponentField = s.band(s.shr(s.bitsOf(amax), 23), 0xFF);
  Value shared = s.sub(exponentField, s.i32(127 + fmt.maxExponent));
  shared = arith::MaxSIOp::create(b, shared, s.i32(-127));
  shared = arith::MinSIOp::create(b, shared, s.i32(127));
  Value code = s.add(shared, s.i32(127));
  code = s.select(s.eq(exponentField, 0xFF), s.i32(0xFF), code);
  return arith::TruncIOp::create(b, b.getI8Type(), code);
}

Value mlir::moe::decodeE8M0(ImplicitLocOpBuilder &b, Value code8) {
  Scalar s{b};
  Value code = arith::ExtUIOp::create(b, b.getI32Type(), code8);
  // 2^-127 is an f32 subnormal: only its mantissa bit 22 is set.
  Value bits = s.select(s.eq(code, 0), s.i32(0x00400000), s.shl(code, 23));
  bits = s.select(s.eq(code, 0xFF), s.i32(0x7FC00000), bits);
  return s.floatOf(bits);
}

Value mlir::moe::blockScaleF32(ImplicitLocOpBuilder &b, Value amax,
                               Type fp8Type) {
  Scalar s{b};
  Value scale = arith::DivFOp::create(b, amax, s.f32(getMaxFiniteFP8(fp8Type)));
  Value isZero =
      arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, scale, s.f32(0.0));
  scale = s.select(isZero, s.f32(1.0), scale);
  Value finite = arith::CmpFOp::create(b, arith::CmpFPredicate::OLT, amax,
                                       s.f32(INFINITY));
  return s.select(finite, scale, s.f32(std::nan("")));
}
