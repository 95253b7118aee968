//===- DecodeExpertsKernel.h - a decode layer's experts in one kernel -*- C++
//-*-===//
//
// docs/decode-kernel.md: the persistent kernel that runs a bf16 layer's
// gate-up GEMM (SwiGLU), down GEMM and combine for few tokens, and the
// kernel that zeroes its counters.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONVERSION_MOETONVGPU_DECODEEXPERTSKERNEL_H
#define MOE_CONVERSION_MOETONVGPU_DECODEEXPERTSKERNEL_H

#include "GroupedMatmulKernel.h"

#include "MoE/Dialect/MoEDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <string>

namespace mlir::moe {

/// The zero kernel's name (one per module: it takes only the counters).
inline constexpr llvm::StringLiteral kDecodeZeroKernel = "moe_decode_zero";

/// What a decode experts kernel is built for: bf16 rows and weights, silu
/// SwiGLU without biases, a weighted combine of `topK` slots per token.
struct DecodeExpertsSpec {
  int64_t tileM = 16; // token rows of a swap-AB tile
  int64_t stages = 4;
  int64_t topK = 1;
  int64_t offsetBits = 64, slotBits = 64;

  /// The swap-AB tile of the gate-up (SwiGLU) or down (store) GEMM.
  GroupedMatmulTile tile(bool gateUp) const;
  int64_t sharedBytes() const;
  std::string kernelName() const;
};

/// The decode experts kernel (arguments: docs/decode-kernel.md).
gpu::GPUFuncOp buildDecodeExpertsKernel(OpBuilder &builder, Location loc,
                                        gpu::GPUModuleOp module,
                                        const DecodeExpertsSpec &spec);

/// The kernel that zeroes the decode kernel's counters (i32 [n]).
gpu::GPUFuncOp buildDecodeZeroKernel(OpBuilder &builder, Location loc,
                                     gpu::GPUModuleOp module);

/// Where the expert MLP of the layer `chain` has `decode`, appends its
/// `decode` part to the MLP's moe.launch: a planned.v1 entry (op
/// moe.expert_mlp) of the zero and decode kernels, with its own plan.
LogicalResult addDecodePart(OpBuilder &builder, gpu::GPUModuleOp kernels,
                            LayerChain chain, int64_t maxTokens);

/// The combine of columns [col0, col0 + 64) of every token by the CTA's
/// 128 threads: out[t] = sum_j weights[t, j] * rows[slots[t, j]] in f32,
/// as the combine kernel sums them.
void emitDecodeCombine(ImplicitLocOpBuilder &b, const DecodeExpertsSpec &spec,
                       Value tid, Value col0, Value rows, Value slots,
                       Value weights, Value out, Value hidden);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_DECODEEXPERTSKERNEL_H
