//===- GroupedWgradKernel.h - sm_90a grouped weight-gradient GEMM -*- C++
//-*-===//
//
// moe.grouped_wgrad on sm_90a: dW[e] = grad[rows of e]^T . rows[rows of e],
// a GEMM whose reduction runs over each expert's own, data-dependent rows.
// One CTA per (expert, output tile) loops over the expert's rows in order:
// deterministic without atomics (docs/training.md).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONVERSION_MOETONVGPU_GROUPEDWGRADKERNEL_H
#define MOE_CONVERSION_MOETONVGPU_GROUPEDWGRADKERNEL_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <string>

namespace mlir::moe {

/// The tile of the sm_90a weight-gradient kernel: tileM rows of dW (the
/// gradient's columns; 64 per consumer warpgroup) x tileN columns (the rows'
/// columns), tileK of the expert's rows per pipeline stage. Both operands
/// are the row-major [M, *] activations as they lie: WGMMA's M-major A and
/// N-major B (imm-trans-a, imm-trans-b), loaded as TMA boxes of 64 columns.
struct GroupedWgradTile {
  int64_t tileM = 128;
  int64_t tileN = 256;
  int64_t tileK = 64;
  int64_t stages = 4;

  int64_t warpgroups() const { return tileM / 64; }
  int64_t threads() const { return 128 * warpgroups(); }
  /// Bytes of one stage: tileK rows of tileM gradient columns, then of tileN
  /// row columns, each as boxes of 64 columns (128 bytes a row).
  int64_t stageBytes() const { return (tileM + tileN) * tileK * 2; }
  int64_t dynamicSharedBytes() const { return stages * stageBytes(); }
  std::string kernelName(Type offsetType) const;
};

/// Builds, inside `module`, the `gpu.func` computing for every expert e
/// out[e] = grad[r0:r1]^T @ rows[r0:r1] (bf16 in and out, f32 accumulation;
/// zeros for an expert without rows), r0:r1 e's rows after the offsets'
/// clamp. Arguments: the gradient's and the rows' tensor maps (by value),
/// offsets memref<?xT>, out memref<?x?x?xbf16> [E, N, K], M as i32. One CTA
/// per (expert, tileM x tileN output tile): grid E * ceil(N / tileM) *
/// ceil(K / tileN), expert-major.
gpu::GPUFuncOp buildGroupedWgradKernel(OpBuilder &builder, Location loc,
                                       gpu::GPUModuleOp module,
                                       const GroupedWgradTile &tile,
                                       Type offsetType);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_GROUPEDWGRADKERNEL_H
