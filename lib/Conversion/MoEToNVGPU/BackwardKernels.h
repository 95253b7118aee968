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

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <string>

namespace mlir::moe {

/// moe.swiglu_grad over bf16 rows: the activation and, for GPT-OSS, its
/// constants (by their bits in the name: kernels differ exactly when they
/// do).
struct SwiGLUGradKernelSpec {
  bool gptOss = false;
  float alpha = 0, limit = 0;
  std::string kernelName() const;
};

/// Threads of a swiglu_grad CTA; each thread takes 8 columns (16 bytes).
inline constexpr int64_t kSwiGLUGradThreads = 256;
inline constexpr int64_t kSwiGLUGradVector = 8;

/// Builds (input memref<?x?xbf16> [M, 2I], grad memref<?x?xbf16> [M, I],
/// out memref<?x?xbf16> [M, 2I]): a grid-stride loop over the [M, I / 8]
/// vectors of the gradient, each giving 8 gate and 8 up gradients.
gpu::GPUFuncOp buildSwiGLUGradKernel(OpBuilder &builder, Location loc,
                                     gpu::GPUModuleOp module,
                                     const SwiGLUGradKernelSpec &spec);

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

/// The moe.launch of each backward op with a kernel of its own
/// (BackwardLaunches.cpp), its kernel built into `kernels` on first use.
FailureOr<DictionaryAttr>
wgradLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels, GroupedWgradOp op);
FailureOr<DictionaryAttr>
swigluGradLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels, SwiGLUGradOp op);
FailureOr<DictionaryAttr>
routeGradLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels, RouteGradOp op);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_BACKWARDKERNELS_H
