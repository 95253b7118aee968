//===- GroupedMatmulKernel.h - sm_90a grouped GEMM kernel builder -*- C++
//-*-===//

#ifndef MOE_CONVERSION_MOETONVGPU_GROUPEDMATMULKERNEL_H
#define MOE_CONVERSION_MOETONVGPU_GROUPEDMATMULKERNEL_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::moe {

/// Tile shape of the sm_90a grouped GEMM kernel. tileM / 64 warpgroups
/// compute tileM token rows x tileN output columns in K steps of tileK with
/// `stages` TMA buffers, sharing each weights tile. WGMMA fixes its M operand
/// at 64 rows: normally the tokens fill it (tileM = 64); with `swapAB` the
/// weights do (tileN = 64) and the tokens are WGMMA's N (tileM = 8..64),
/// computing out^T so that an expert with few rows wastes less of each
/// instruction.
struct GroupedMatmulTile {
  int64_t tileM = 64;
  int64_t tileN = 128;
  int64_t tileK = 64;
  int64_t stages = 2;
  bool swapAB = false;

  /// Columns of the WGMMA accumulator (its rows are always 64).
  int64_t accumulatorColumns() const { return swapAB ? tileM : tileN; }
  /// Warpgroups of the block: each computes 64 token rows of the tile (one
  /// with swap-AB, where the tokens are WGMMA's N).
  int64_t warpgroups() const { return swapAB ? 1 : tileM / 64; }

  /// Bytes of dynamic shared memory the kernel needs.
  int64_t dynamicSharedBytes() const;
  /// A name that says what the kernel was built for.
  std::string kernelName(Type offsetType) const;
};

/// Builds `gpu.func` computing out[rows of e] = rows[rows of e] @ weights[e]^T
/// for bf16 operands with f32 accumulation, inside `module`. Its arguments:
/// (rows tensor map ptr, weights tensor map ptr, offsets memref<?xT>,
/// out memref<?x?xbf16>, K as i32). See docs/hopper-notes.md.
gpu::GPUFuncOp buildGroupedMatmulKernel(OpBuilder &builder, Location loc,
                                        gpu::GPUModuleOp module,
                                        const GroupedMatmulTile &tile,
                                        Type offsetType);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_GROUPEDMATMULKERNEL_H
