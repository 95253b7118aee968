//===- Tcgen05GroupedMatmulKernel.h - sm_100a MXFP8 grouped GEMM -*- C++
//-*-===//

#ifndef MOE_CONVERSION_MOETONVGPU_TCGEN05GROUPEDMATMULKERNEL_H
#define MOE_CONVERSION_MOETONVGPU_TCGEN05GROUPEDMATMULKERNEL_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

#include <string>

namespace mlir::moe {

/// The fixed shape of the sm_100a block-scaled (MXFP8) grouped GEMM: one
/// warpgroup per CTA, a 128 x 128 f32 accumulator in tensor memory (the
/// largest M of `tcgen05.mma.cta_group::1`; N = 128 keeps one 128-byte
/// swizzled box per operand and leaves room for 4 stages), K 128 per stage
/// (128 e4m3 bytes = one 128-byte swizzle row, and 4 UE8M0 scales per row =
/// one 32-bit tensor-memory word, one byte per K = 32 MMA).
struct Tcgen05GroupedMatmulTile {
  static constexpr int64_t tileM = 128, tileN = 128, tileK = 128;
  static constexpr int64_t mmaK = 32;
  int64_t stages = 4;

  /// Bytes of one stage: the A and B tiles (16 KiB each) then A's and B's
  /// scale tiles (512 bytes each): a multiple of 1024, so every stage's
  /// tiles start on a 128-byte swizzle pattern (matrix base offset 0).
  static constexpr int64_t tileBytes = tileM * tileK;
  static constexpr int64_t scaleTileBytes = 512;
  static constexpr int64_t stageBytes = 2 * tileBytes + 2 * scaleTileBytes;
  /// Tensor memory: the accumulator in columns [0, 128), A's scales in
  /// [128, 132), B's in [136, 140); allocations are powers of two >= 32.
  static constexpr int64_t tmemColumns = 256;
  static constexpr int64_t scaleAColumn = 128, scaleBColumn = 136;

  /// Dynamic shared memory: the stages, one MMA-done mbarrier per stage
  /// (8 bytes each), and the 4-byte slot tcgen05.alloc writes.
  int64_t dynamicSharedBytes() const { return stages * stageBytes + 64; }
  std::string kernelName(Type offsetType) const;
};

/// Builds `gpu.func` computing out[rows of e] = rows[rows of e] @ weights[e]^T
/// from MXFP8 operands (e4m3 values, one UE8M0 scale per 32 K) with f32
/// accumulation in tensor memory, storing bf16, inside `module`. Arguments:
/// (rows tensor map ptr, weights tensor map ptr, offsets memref<?xT>, out
/// memref<?x?xbf16>, K, rows_min, rows_max as i32, rows' scales
/// memref<?x?xi8> [M, K/32], weights' scales memref<?x?x?xi8> [E, N, K/32]).
/// See docs/runtime-contract.md §3.9.
gpu::GPUFuncOp buildTcgen05GroupedMatmulKernel(
    OpBuilder &builder, Location loc, gpu::GPUModuleOp module,
    const Tcgen05GroupedMatmulTile &tile, Type offsetType);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_TCGEN05GROUPEDMATMULKERNEL_H
