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
  SmallVector<gpu::GPUFuncOp, 2> funcs = {func};
  // kn_weights: the same kernel over the operands swapped, [E, K, N]; an
  // entry its plan alone describes (grouped_wgrad.v1 has [E, N, K] only).
  bool kn = op.getKnWeights();
  // With a bias gradient, a second kernel: also planned.v1
  // (grouped_wgrad.v1 has one kernel).
  if (Value biasGrad = op.getBiasGrad()) {
    BiasGradKernelSpec bias;
    bias.outF32 =
        cast<RankedTensorType>(biasGrad.getType()).getElementType().isF32();
    bias.offsetBits = offsets.getElementType().getIntOrFloatBitWidth();
    gpu::GPUFuncOp sum = lookUpOrBuild(kernels, bias.kernelName(), [&] {
      return buildBiasGradKernel(builder, op.getLoc(), kernels, bias);
    });
    funcs.push_back(sum);
    info.set("abi", builder.getStringAttr("planned.v1"));
    info.set("op", builder.getStringAttr(op->getName().getStringRef()));
    info.set("bias",
             TypeAttr::get(
                 cast<RankedTensorType>(biasGrad.getType()).getElementType()));
  } else if (kn) {
    info.set("abi", builder.getStringAttr("planned.v1"));
    info.set("op", builder.getStringAttr(op->getName().getStringRef()));
  } else {
    info.set("abi", builder.getStringAttr("grouped_wgrad.v1"));
  }
  // n: the gradient's columns, k: the rows' (whichever way out lies).
  if (kn)
    info.set("weights", builder.getStringAttr("kn"));
  info.set("experts", builder.getI64IntegerAttr(size(result.getDimSize(0))));
  info.set("n", builder.getI64IntegerAttr(size(result.getDimSize(kn ? 2 : 1))));
  info.set("k", builder.getI64IntegerAttr(size(result.getDimSize(kn ? 1 : 2))));
  info.set("max_rows",
           builder.getI64IntegerAttr(maxTokens(grad.getDimSize(0))));
  info.set("offsets", TypeAttr::get(offsets.getElementType()));
  SmallVector<Attribute, 2> forms;
  for (gpu::GPUFuncOp kernel : funcs)
    forms.push_back(kernelForm(builder, kernel));
  info.set("kernels", builder.getArrayAttr(forms));
  func->setAttr("moe.dynamic_shared_bytes",
                builder.getI64IntegerAttr(tile.dynamicSharedBytes()));
  return plan::finishLaunch(builder, op.getLoc(), info, funcs);
}

/// The keys every planned.v1 entry has (contract §3.12): abi, op, and the
/// rows it serves, from the dim `rows` of its token or row dimension.
static NamedAttrList plannedInfo(OpBuilder &builder, Operation *op,
                                 int64_t rows) {
  NamedAttrList info;
  info.set("abi", builder.getStringAttr("planned.v1"));
  info.set("op", builder.getStringAttr(op->getName().getStringRef()));
  info.set("max_rows", builder.getI64IntegerAttr(maxTokens(rows)));
  return info;
}

/// The moe.launch of the swiglu(_grad) kernel of `spec` for `op`, whose
/// `activation` ([M, I]) gives the plan its width (a planned.v1 entry,
/// contract §3.12).
static FailureOr<DictionaryAttr>
swigluKernelLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels, Operation *op,
                   SwiGLUKernelSpec spec, Value activation) {
  gpu::GPUFuncOp func = lookUpOrBuild(kernels, spec.kernelName(), [&] {
    return buildSwiGLUKernel(builder, op->getLoc(), kernels, spec);
  });
  auto type = cast<RankedTensorType>(activation.getType());
  int64_t width = type.getDimSize(1);
  NamedAttrList info = plannedInfo(builder, op, type.getDimSize(0));
  // For the plan only (planned.v1 entries have no shape keys).
  info.set("intermediate", builder.getI64IntegerAttr(
                               ShapedType::isDynamic(width) ? -1 : width));
  info.set("kernels", builder.getArrayAttr(kernelForm(builder, func)));
  return plan::finishLaunch(builder, op->getLoc(), info, func);
}

/// The swiglu(_grad) kernel spec of `op`'s activation.
template <typename Op>
static SwiGLUKernelSpec swigluSpec(Op op, bool gradient) {
  SwiGLUKernelSpec spec;
  spec.gradient = gradient;
  spec.gptOss = op.getActivation() == GatedActivation::gptoss;
  spec.interleaved = op.getInterleaved();
  if (spec.gptOss) {
    spec.alpha = op.getAlphaOrDefault();
    spec.limit = op.getLimitOrDefault();
  }
  return spec;
}

FailureOr<DictionaryAttr> mlir::moe::swigluGradLaunch(OpBuilder &builder,
                                                      gpu::GPUModuleOp kernels,
                                                      SwiGLUGradOp op) {
  return swigluKernelLaunch(builder, kernels, op, swigluSpec(op, true),
                            op.getGrad());
}

FailureOr<DictionaryAttr> mlir::moe::swigluLaunch(OpBuilder &builder,
                                                  gpu::GPUModuleOp kernels,
                                                  SwiGLUOp op) {
  return swigluKernelLaunch(builder, kernels, op, swigluSpec(op, false),
                            op.getResult());
}

/// Builds (or reuses) the three kernels of `op`; returns its moe.launch (a
/// planned.v1 entry, contract §3.12).
FailureOr<DictionaryAttr>
mlir::moe::unpermuteGradLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels,
                               UnpermuteGradOp op) {
  auto grad = cast<RankedTensorType>(op.getGrad().getType());
  auto slots = cast<RankedTensorType>(op.getSlots().getType());
  UnpermuteGradKernelSpec spec;
  spec.weighted = bool(op.getWeights());
  spec.slotBits = slots.getElementType().getIntOrFloatBitWidth();
  SmallVector<gpu::GPUFuncOp, 3> funcs;
  SmallVector<Attribute, 3> forms;
  for (auto [kind, name] : {std::pair{UnpermuteGradStep::Init, "init"},
                            {UnpermuteGradStep::Count, "count"},
                            {UnpermuteGradStep::Gather, "gather"}}) {
    UnpermuteGradStep step = kind;
    funcs.push_back(lookUpOrBuild(kernels, spec.kernelName(name), [&] {
      return buildUnpermuteGradKernel(builder, op.getLoc(), kernels, spec,
                                      step);
    }));
    forms.push_back(kernelForm(builder, funcs.back()));
  }
  int64_t hidden = grad.getDimSize(1);
  NamedAttrList info = plannedInfo(builder, op, grad.getDimSize(0));
  // For the plan only (planned.v1 entries have no shape keys).
  info.set("hidden", builder.getI64IntegerAttr(
                         ShapedType::isDynamic(hidden) ? -1 : hidden));
  info.set("top_k", builder.getI64IntegerAttr(slots.getDimSize(1)));
  info.set("slots", TypeAttr::get(slots.getElementType()));
  info.set("weighted", builder.getBoolAttr(spec.weighted));
  info.set("kernels", builder.getArrayAttr(forms));
  return plan::finishLaunch(builder, op.getLoc(), info, funcs);
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
  NamedAttrList info = plannedInfo(builder, op, logits.getDimSize(0));
  // For the plan only (planned.v1 entries have no shape keys).
  info.set("experts", builder.getI64IntegerAttr(spec.experts));
  info.set("top_k", builder.getI64IntegerAttr(spec.topK));
  info.set("logits", TypeAttr::get(logits.getElementType()));
  info.set("kernels", builder.getArrayAttr(kernelForm(builder, func)));
  return plan::finishLaunch(builder, op.getLoc(), info, func);
}
