//===- BackwardKernels.h - SIMT kernels of the backward ops -----*- C++ -*-===//
//
// The elementwise and gather kernels of the layer's backward beside its two
// GEMMs (GroupedWgradKernel.h, N-major dgrad forms): each a planned.v1
// entry whose launch plan alone says how to call it (contract §3.12).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONVERSION_MOETONVGPU_BACKWARDKERNELS_H
#define MOE_CONVERSION_MOETONVGPU_BACKWARDKERNELS_H

#include "MoE/Dialect/MoEDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <string>

namespace mlir::moe {

/// moe.swiglu (the train forward's, on a saved gate-up output) or
/// moe.swiglu_grad over bf16 rows: the activation and, for GPT-OSS, its
/// constants (by their bits in the name: kernels differ exactly when they
/// do).
struct SwiGLUKernelSpec {
  bool gradient = true;
  bool gptOss = false;
  /// Gate and up alternate (columns 2i and 2i + 1) instead of halves.
  bool interleaved = false;
  float alpha = 0, limit = 0;
  std::string kernelName() const;
};

/// Threads of a swiglu(_grad) CTA; each thread takes 8 columns (16 bytes).
inline constexpr int64_t kSwiGLUGradThreads = 256;
inline constexpr int64_t kSwiGLUGradVector = 8;

/// Builds, for the gradient, (input memref<?x?xbf16> [M, 2I], grad
/// memref<?x?xbf16> [M, I], out memref<?x?xbf16> [M, 2I]), else (input
/// [M, 2I], out [M, I]): a grid-stride loop over the [M, I / 8] vectors of
/// the activation, each giving 8 gate and 8 up gradients or 8 activations.
gpu::GPUFuncOp buildSwiGLUKernel(OpBuilder &builder, Location loc,
                                 gpu::GPUModuleOp module,
                                 const SwiGLUKernelSpec &spec);

/// moe.unpermute_grad over bf16 rows: with or without routing weights, and
/// the slots' width. Three kernels (docs/training.md): the zeroing and the
/// counting of the pairs that name each row, then the gather.
struct UnpermuteGradKernelSpec {
  bool weighted = true;
  int64_t slotBits = 64;
  std::string kernelName(StringRef step) const;
};

/// Threads of the unpermute_grad kernels; the gather takes a warp per item.
inline constexpr int64_t kUnpermuteGradThreads = 128;

/// The kernels of `spec`, by step (launched in this order):
/// - init (counts memref<?xi32> [M]): counts[r] = 0, a thread per row;
/// - count (slots memref<?x?xiS> [T, k], counts): an integer atomic add per
///   pair into its row's count (a slot outside [0, M) counts nowhere);
/// - gather (grad [T, H], rows [M, H], slots, weights [T, k] f32, counts,
///   rows_grad [M, H], weights_grad [T, k] f32; no weights without
///   `weighted`): a warp per pair, then a warp per row. A pair's warp
///   writes its weight gradient <grad[t], rows[slot]> and, when it is the
///   first pair of its row, the row's gradient: its own weighted gradient
///   row plus, where the count says that more pairs name the row, theirs in
///   pair order (deterministic, no float atomics). A row that no pair names
///   is zeroed.
enum class UnpermuteGradStep { Init, Count, Gather };
gpu::GPUFuncOp buildUnpermuteGradKernel(OpBuilder &builder, Location loc,
                                        gpu::GPUModuleOp module,
                                        const UnpermuteGradKernelSpec &spec,
                                        UnpermuteGradStep step);

/// moe.route_grad: the routing, its expert count and k (static), the
/// renormalisation and scale the route applied, the logits' width (f32 or
/// bf16, also the result's).
struct RouteGradKernelSpec {
  Routing routing = Routing::softmax_topk;
  int64_t experts = 0, topK = 0;
  bool renormalize = false;
  double scale = 1.0;
  int64_t logitBits = 32;
  std::string kernelName() const;
};

/// Builds (logits memref<?x?xT> [T, E], ids memref<?x?xi32> [T, k], grad
/// memref<?x?xf32> [T, k], out memref<?x?xT> [T, E]): one warp per token
/// (kRoutingThreads per CTA, grid-stride), lane j holding pair j (k <= 32),
/// every lane E / 32 logits.
gpu::GPUFuncOp buildRouteGradKernel(OpBuilder &builder, Location loc,
                                    gpu::GPUModuleOp module,
                                    const RouteGradKernelSpec &spec);

/// The bias gradient of moe.grouped_wgrad: the sum of each expert's rows
/// of the bf16 gradient, as bf16 or f32, and the offsets' width.
struct BiasGradKernelSpec {
  bool outF32 = false;
  int64_t offsetBits = 64;
  std::string kernelName() const;
};

/// Threads of a bias-gradient CTA: 8 warps.
inline constexpr int64_t kBiasGradThreads = 256;

/// Builds (grad memref<?x?xbf16> [M, N], offsets memref<?xiS> [E + 1], out
/// memref<?x?xT> [E, N]): a CTA per (expert, 256 columns), grid-stride; a
/// lane takes 8 columns, the warps the expert's clamped rows strided by 8,
/// each summing its rows in order, then the warps' sums added in warp order
/// (deterministic, no atomics; an expert without rows gets zeros). N a
/// multiple of 8.
gpu::GPUFuncOp buildBiasGradKernel(OpBuilder &builder, Location loc,
                                   gpu::GPUModuleOp module,
                                   const BiasGradKernelSpec &spec);

/// The moe.launch of each backward op with a kernel of its own
/// (BackwardLaunches.cpp), its kernel built into `kernels` on first use.
FailureOr<DictionaryAttr>
wgradLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels, GroupedWgradOp op);
FailureOr<DictionaryAttr>
swigluGradLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels, SwiGLUGradOp op);
FailureOr<DictionaryAttr> swigluLaunch(OpBuilder &builder,
                                       gpu::GPUModuleOp kernels, SwiGLUOp op);
FailureOr<DictionaryAttr> unpermuteGradLaunch(OpBuilder &builder,
                                              gpu::GPUModuleOp kernels,
                                              UnpermuteGradOp op);
FailureOr<DictionaryAttr>
routeGradLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels, RouteGradOp op);

/// Gives each tensor constant of the program `func` its moe.launch: a
/// kernel writing its values (planned.v1, ConstantKernel.cpp); an error at
/// a constant it cannot write.
LogicalResult addConstantLaunches(OpBuilder &builder, func::FuncOp func,
                                  gpu::GPUModuleOp kernels);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_BACKWARDKERNELS_H
