//===- BackwardLaunches.cpp - the backward ops' launches ------------------===//
//
// moe.launch of the backward ops with kernels of their own: the weight
// gradient (grouped_wgrad.v1) and the planned.v1 SIMT kernels. Their builders
// are GroupedWgradKernel.cpp and BackwardKernels.cpp; the dgrad is a
// grouped_matmul.v3 launch (MoEToNVGPU.cpp).
//
//===----------------------------------------------------------------------===//

#include "BackwardKernels.h"
#include "GroupedWgradKernel.h"
#include "KernelSupport.h"
#include "LaunchPlan.h"

using namespace mlir;
using namespace mlir::moe;

/// Builds (or reuses) the weight-gradient kernel of `op`; returns its
/// moe.launch (grouped_wgrad.v1, contract §3.11).
FailureOr<DictionaryAttr> mlir::moe::wgradLaunch(OpBuilder &builder,
                                                 gpu::GPUModuleOp kernels,
                                                 GroupedWgradOp op) {
  auto grad = cast<RankedTensorType>(op.getGrad().getType());
  auto result = cast<RankedTensorType>(op.getWeightGrad().getType());
  auto offsets = cast<RankedTensorType>(op.getOffsets().getType());
  GroupedWgradTile tile;
  gpu::GPUFuncOp func =
      lookUpOrBuild(kernels, tile.kernelName(offsets.getElementType()), [&] {
        return buildGroupedWgradKernel(builder, op.getLoc(), kernels, tile,
                                       offsets.getElementType());
      });
  auto size = [](int64_t dim) {
    return ShapedType::isDynamic(dim) ? int64_t(-1) : dim;
  };
  NamedAttrList info;
  info.set("abi", builder.getStringAttr("grouped_wgrad.v1"));
  info.set("experts", builder.getI64IntegerAttr(size(result.getDimSize(0))));
  info.set("n", builder.getI64IntegerAttr(size(result.getDimSize(1))));
  info.set("k", builder.getI64IntegerAttr(size(result.getDimSize(2))));
  info.set("max_rows",
           builder.getI64IntegerAttr(maxTokens(grad.getDimSize(0))));
  info.set("offsets", TypeAttr::get(offsets.getElementType()));
  info.set("kernels", builder.getArrayAttr(kernelForm(builder, func)));
  func->setAttr("moe.dynamic_shared_bytes",
                builder.getI64IntegerAttr(tile.dynamicSharedBytes()));
  if (failed(plan::addLaunchPlan(builder, op.getLoc(), info, func, "")))
    return failure();
  return info.getDictionary(builder.getContext());
}

/// Builds (or reuses) the kernel of `op`; returns its moe.launch (a
/// planned.v1 entry, contract §3.12).
FailureOr<DictionaryAttr> mlir::moe::swigluGradLaunch(OpBuilder &builder,
                                                      gpu::GPUModuleOp kernels,
                                                      SwiGLUGradOp op) {
  SwiGLUGradKernelSpec spec;
  spec.gptOss = op.getActivation() == GatedActivation::gptoss;
  if (spec.gptOss) {
    spec.alpha = op.getAlphaOrDefault();
    spec.limit = op.getLimitOrDefault();
  }
  gpu::GPUFuncOp func = lookUpOrBuild(kernels, spec.kernelName(), [&] {
    return buildSwiGLUGradKernel(builder, op.getLoc(), kernels, spec);
  });
  auto grad = cast<RankedTensorType>(op.getGrad().getType());
  int64_t width = grad.getDimSize(1);
  NamedAttrList info;
  info.set("abi", builder.getStringAttr("planned.v1"));
  info.set("op", builder.getStringAttr(op->getName().getStringRef()));
  info.set("max_rows",
           builder.getI64IntegerAttr(maxTokens(grad.getDimSize(0))));
  // For the plan only (planned.v1 entries have no shape keys).
  info.set("intermediate", builder.getI64IntegerAttr(
                               ShapedType::isDynamic(width) ? -1 : width));
  info.set("kernels", builder.getArrayAttr(kernelForm(builder, func)));
  if (failed(plan::addLaunchPlan(builder, op.getLoc(), info, func, "")))
    return failure();
  return info.getDictionary(builder.getContext());
}

/// Builds (or reuses) the kernel of `op`; returns its moe.launch (a
/// planned.v1 entry, contract §3.12).
FailureOr<DictionaryAttr> mlir::moe::routeGradLaunch(OpBuilder &builder,
                                                     gpu::GPUModuleOp kernels,
                                                     RouteGradOp op) {
  auto logits = cast<RankedTensorType>(op.getLogits().getType());
  RouteGradKernelSpec spec;
  spec.routing = op.getRouting();
  spec.experts = logits.getDimSize(1);
  spec.topK = cast<RankedTensorType>(op.getExpertIds().getType()).getDimSize(1);
  spec.renormalize = op.getRenormalize();
  spec.scale =
      op.getScalingFactor() ? op.getScalingFactor()->convertToDouble() : 1.0;
  spec.logitBits = logits.getElementType().getIntOrFloatBitWidth();
  gpu::GPUFuncOp func = lookUpOrBuild(kernels, spec.kernelName(), [&] {
    return buildRouteGradKernel(builder, op.getLoc(), kernels, spec);
  });
  NamedAttrList info;
  info.set("abi", builder.getStringAttr("planned.v1"));
  info.set("op", builder.getStringAttr(op->getName().getStringRef()));
  info.set("max_rows",
           builder.getI64IntegerAttr(maxTokens(logits.getDimSize(0))));
  // For the plan only (planned.v1 entries have no shape keys).
  info.set("experts", builder.getI64IntegerAttr(spec.experts));
  info.set("top_k", builder.getI64IntegerAttr(spec.topK));
  info.set("logits", TypeAttr::get(logits.getElementType()));
  info.set("kernels", builder.getArrayAttr(kernelForm(builder, func)));
  if (failed(plan::addLaunchPlan(builder, op.getLoc(), info, func, "")))
    return failure();
  return info.getDictionary(builder.getContext());
}
