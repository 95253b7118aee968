//===- FP8Codec.h - scalar FP8 / E8M0 encode and decode ---------*- C++ -*-===//
//
// Emits scalar arith ops that convert between f32 and the 8-bit codes of
// f8E4M3FN, f8E5M2 and f8E8M0FNU with exactly the rounding the moe dialect
// specifies (round to nearest even, saturate, NaN -> 0x7F). Built from
// integer ops so the result is bit-exact on every backend. The CPU lowering
// (MoEToLinalg) and the sm_90a quantize kernel (MoEToNVGPU) both emit these,
// so the GPU codes and scales are those of the CPU reference, bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_UTILS_FP8CODEC_H
#define MOE_UTILS_FP8CODEC_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::moe {

/// f32 -> 8-bit code (i8) of `fp8Type` (f8E4M3FN or f8E5M2). The subnormal
/// range rounds with math.roundeven, or, when `llvmRoundEven` (GPU kernels),
/// with a call of the `llvm.roundeven.f32` intrinsic (one cvt.rni.f32.f32,
/// without libdevice); both round to the nearest integer, ties to even, so
/// the codes are the same.
Value encodeFP8(ImplicitLocOpBuilder &b, Value f32Value, Type fp8Type,
                bool llvmRoundEven = false);

/// 8-bit code (i8) of `fp8Type` -> f32, exact.
Value decodeFP8(ImplicitLocOpBuilder &b, Value code, Type fp8Type);

/// Shared MX exponent for a block's largest magnitude `amax` (f32):
/// returns the E8M0 code (i8), 0xFF when amax is NaN or infinite.
Value mxScaleCode(ImplicitLocOpBuilder &b, Value amax, Type fp8Type);

/// E8M0 code (i8) -> f32 power of two (NaN for 0xFF).
Value decodeE8M0(ImplicitLocOpBuilder &b, Value code);

/// The f32 scale of a block (DeepSeek style) with largest magnitude `amax`
/// (f32): amax / max_elem, by IEEE division; 1 when that is zero (an
/// all-zero block, or one whose scale underflows); NaN (0x7FC00000) when
/// amax is NaN or infinite.
Value blockScaleF32(ImplicitLocOpBuilder &b, Value amax, Type fp8Type);

} // namespace mlir::moe

#endif // MOE_UTILS_FP8CODEC_H
