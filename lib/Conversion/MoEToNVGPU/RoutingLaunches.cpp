//===- RoutingLaunches.cpp - the routing, permute and quantize launches --===//
//
// moe.launch of moe.route, moe.permute, moe.unpermute and moe.quantize,
// each built from its kernel spec; their builders are RouteKernel.cpp,
// PermuteKernels.cpp, UnpermuteKernel.cpp and QuantizeKernel.cpp. The
// GEMMs' launches are MoEToNVGPU.cpp's, the backward ops'
// BackwardLaunches.cpp.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"
#include "LaunchPlan.h"
#include "QuantizeKernel.h"
#include "RoutingKernels.h"

using namespace mlir;
using namespace mlir::moe;

/// Builds (or reuses) the routing kernel of `op`; returns its moe.launch.
FailureOr<DictionaryAttr> mlir::moe::routeLaunch(OpBuilder &builder,
                                                 gpu::GPUModuleOp kernels,
                                                 RouteOp op) {
  auto logits = cast<RankedTensorType>(op.getLogits().getType());
  RouteKernelSpec spec;
  spec.routing = op.getRouting();
  spec.experts = logits.getDimSize(1);
  spec.topK = op.getTopK();
  spec.groups = op.getNumGroups().value_or(0);
  spec.topGroups = op.getTopGroups().value_or(0);
  spec.renormalize = op.getRenormalize();
  spec.scale =
      op.getScalingFactor() ? op.getScalingFactor()->convertToDouble() : 1.0;
  spec.bias = op.getCorrectionBias() != nullptr;
  spec.logitBits = logits.getElementType().getIntOrFloatBitWidth();
  spec.shared = op.getSharedSlots();
  spec.sharedGate = op.getSharedGate() != nullptr;
  gpu::GPUFuncOp func = lookUpOrBuild(kernels, spec.kernelName(), [&] {
    return buildRouteKernel(builder, op.getLoc(), kernels, spec);
  });
  NamedAttrList info;
  info.set("abi", builder.getStringAttr("route.v1"));
  info.set("experts", builder.getI64IntegerAttr(spec.experts));
  info.set("top_k", builder.getI64IntegerAttr(spec.topK));
  info.set("logits", TypeAttr::get(logits.getElementType()));
  info.set("bias", builder.getBoolAttr(spec.bias));
  info.set("max_rows",
           builder.getI64IntegerAttr(maxTokens(logits.getDimSize(0))));
  if (spec.shared) {
    info.set("shared", builder.getI64IntegerAttr(spec.shared));
    info.set("shared_gate", builder.getBoolAttr(spec.sharedGate));
    if (spec.sharedGate)
      info.set("hidden",
               builder.getI64IntegerAttr(
                   cast<RankedTensorType>(op.getSharedGate().getType())
                       .getDimSize(1)));
  }
  info.set("kernels", builder.getArrayAttr(kernelForm(builder, func)));
  return plan::finishLaunch(builder, op.getLoc(), info, func);
}

/// Builds (or reuses) the three kernels of `op` (count, index, then
/// gather); returns its moe.launch. With `quantize` the gather stores the
/// rows in e4m3 with [1, 128]-group f32 scales (`out`), and with
/// `scatterFrom` > 0 too a fourth kernel, the scatter over the tokens that
/// the runtime launches instead from `scatterFrom` tokens on.
FailureOr<DictionaryAttr> mlir::moe::permuteLaunch(OpBuilder &builder,
                                                   gpu::GPUModuleOp kernels,
                                                   PermuteOp op, bool quantize,
                                                   int64_t scatterFrom) {
  auto tokens = cast<RankedTensorType>(op.getTokens().getType());
  auto ids = cast<RankedTensorType>(op.getExpertIds().getType());
  auto offsets = cast<RankedTensorType>(op.getOffsets().getType());
  PermuteKernelSpec spec;
  spec.experts = offsets.getDimSize(0) - 1;
  spec.topK = ids.getDimSize(1);
  spec.offsetBits = offsets.getElementType().getIntOrFloatBitWidth();
  // In a bf16 layer of MXFP8 values the gather makes the rows' round trip.
  FakeQuantizeOp roundTrip = quantize ? getGatherRoundTripRows(op) : nullptr;
  spec.quantize = quantize && !roundTrip;
  if (roundTrip)
    spec.roundTrip = roundTrip.getEncoding().getElement();
  gpu::GPUFuncOp count = lookUpOrBuild(kernels, spec.countKernelName(), [&] {
    return buildPermuteCountKernel(builder, op.getLoc(), kernels, spec);
  });
  gpu::GPUFuncOp index = lookUpOrBuild(kernels, spec.indexKernelName(), [&] {
    return buildPermuteIndexKernel(builder, op.getLoc(), kernels, spec);
  });
  gpu::GPUFuncOp gather = lookUpOrBuild(kernels, spec.gatherKernelName(), [&] {
    return buildPermuteGatherKernel(builder, op.getLoc(), kernels, spec);
  });
  SmallVector<gpu::GPUFuncOp, 4> funcs{count, index, gather};
  if (spec.quantize && scatterFrom > 0)
    funcs.push_back(lookUpOrBuild(kernels, spec.scatterKernelName(), [&] {
      return buildPermuteScatterKernel(builder, op.getLoc(), kernels, spec);
    }));
  SmallVector<Attribute> kernelForms;
  for (gpu::GPUFuncOp func : funcs)
    kernelForms.push_back(kernelForm(builder, func));
  int64_t hidden = tokens.getDimSize(1);
  NamedAttrList info;
  info.set("abi", builder.getStringAttr("permute.v2"));
  info.set("chunk", builder.getI64IntegerAttr(kPermuteChunk));
  // Its index kernel counts a single chunk itself: no count launch then.
  info.set("index_counts", builder.getBoolAttr(true));
  if (spec.quantize)
    info.set("out", builder.getStringAttr("f8E4M3FN"));
  // The rows stored as their MXFP8 round trip (contract §3.4).
  if (spec.roundTrip)
    info.set("round_trip",
             builder.getStringAttr(mxRoundTripName(spec.roundTrip)));
  // From this many tokens on, the runtime launches the scatter (§3.4).
  if (kernelForms.size() == 4)
    info.set("scatter_from", builder.getI64IntegerAttr(scatterFrom));
  info.set("experts", builder.getI64IntegerAttr(spec.experts));
  info.set("top_k", builder.getI64IntegerAttr(spec.topK));
  info.set("hidden", builder.getI64IntegerAttr(
                         ShapedType::isDynamic(hidden) ? -1 : hidden));
  info.set("offsets", TypeAttr::get(offsets.getElementType()));
  info.set("max_rows",
           builder.getI64IntegerAttr(maxTokens(tokens.getDimSize(0))));
  info.set("kernels", builder.getArrayAttr(kernelForms));
  return plan::finishLaunch(builder, op.getLoc(), info, funcs);
}

/// Builds (or reuses) the combine kernel of `op`; returns its moe.launch.
FailureOr<DictionaryAttr> mlir::moe::unpermuteLaunch(OpBuilder &builder,
                                                     gpu::GPUModuleOp kernels,
                                                     UnpermuteOp op) {
  auto rows = cast<RankedTensorType>(op.getRows().getType());
  auto slots = cast<RankedTensorType>(op.getSlots().getType());
  UnpermuteKernelSpec spec;
  spec.topK = slots.getDimSize(1);
  spec.slotBits = slots.getElementType().getIntOrFloatBitWidth();
  spec.weighted = op.getWeights() != nullptr;
  spec.shared = op.getShared() != nullptr;
  gpu::GPUFuncOp func = lookUpOrBuild(kernels, spec.kernelName(), [&] {
    return buildUnpermuteKernel(builder, op.getLoc(), kernels, spec);
  });
  int64_t hidden = rows.getDimSize(1);
  NamedAttrList info;
  // With a shared addend, an entry its plan alone describes (unpermute.v2's
  // arguments are fixed).
  info.set("abi",
           builder.getStringAttr(spec.shared ? "planned.v1" : "unpermute.v2"));
  if (spec.shared) {
    info.set("op", builder.getStringAttr(op->getName().getStringRef()));
    info.set("shared", builder.getBoolAttr(true));
  }
  info.set("hidden", builder.getI64IntegerAttr(
                         ShapedType::isDynamic(hidden) ? -1 : hidden));
  info.set("top_k", builder.getI64IntegerAttr(spec.topK));
  info.set("slots", TypeAttr::get(slots.getElementType()));
  info.set("weighted", builder.getBoolAttr(spec.weighted));
  info.set("max_rows",
           builder.getI64IntegerAttr(maxTokens(slots.getDimSize(0))));
  info.set("kernels", builder.getArrayAttr(kernelForm(builder, func)));
  return plan::finishLaunch(builder, op.getLoc(), info, func);
}

/// The launch of moe.quantize (quantize.v1) or, a round trip, of
/// moe.fake_quantize (planned.v1 with quantize.v1's keys, contract §3.12).
static FailureOr<DictionaryAttr>
quantizeKernelLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels, Location loc,
                     RankedTensorType input, BlockScaledEncodingAttr encoding,
                     StringRef part, bool roundTrip) {
  int64_t rank = input.getRank();
  QuantizeKernelSpec spec;
  spec.roundTrip = roundTrip;
  spec.bf16Input = input.getElementType().isBF16();
  spec.e5m2 = isa<Float8E5M2Type>(encoding.getElement());
  spec.mx = encoding.isMX();
  spec.blockRows = encoding.getBlockExtent(rank - 2, rank);
  spec.blockCols = encoding.getBlockExtent(rank - 1, rank);
  gpu::GPUFuncOp func = lookUpOrBuild(kernels, spec.kernelName(), [&] {
    return buildQuantizeKernel(builder, loc, kernels, spec);
  });
  auto size = [&](int64_t dim) {
    int64_t extent = input.getDimSize(dim);
    return builder.getI64IntegerAttr(ShapedType::isDynamic(extent) ? -1
                                                                   : extent);
  };
  NamedAttrList info;
  info.set("abi",
           builder.getStringAttr(roundTrip ? "planned.v1" : "quantize.v1"));
  if (roundTrip)
    info.set("op", builder.getStringAttr(FakeQuantizeOp::getOperationName()));
  // Bundle names ([A-Za-z0-9_.$]): the MLIR spelling of the element type,
  // `e8m0` or `f32` for the scales.
  info.set("element", builder.getStringAttr(spec.e5m2 ? "f8E5M2" : "f8E4M3FN"));
  info.set("scale", builder.getStringAttr(spec.mx ? "e8m0" : "f32"));
  info.set("input", TypeAttr::get(input.getElementType()));
  info.set("block_rows", builder.getI64IntegerAttr(spec.blockRows));
  info.set("block_cols", builder.getI64IntegerAttr(spec.blockCols));
  info.set("rank", builder.getI64IntegerAttr(rank));
  info.set("batch", rank == 3 ? size(0) : builder.getI64IntegerAttr(1));
  info.set("rows", size(rank - 2));
  info.set("cols", size(rank - 1));
  info.set("max_rows",
           builder.getI64IntegerAttr(maxTokens(input.getDimSize(rank - 2))));
  info.set("kernels", builder.getArrayAttr(kernelForm(builder, func)));
  if (!part.empty())
    info.set("part", builder.getStringAttr(part));
  return plan::finishLaunch(builder, loc, info, func);
}

/// Builds (or reuses) the kernel quantizing `input` with `encoding`;
/// returns its moe.launch (`part` names it inside a fused op).
FailureOr<DictionaryAttr>
mlir::moe::quantizeLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels,
                          Location loc, RankedTensorType input,
                          BlockScaledEncodingAttr encoding, StringRef part) {
  return quantizeKernelLaunch(builder, kernels, loc, input, encoding, part,
                              /*roundTrip=*/false);
}

FailureOr<DictionaryAttr> mlir::moe::fakeQuantizeLaunch(
    OpBuilder &builder, gpu::GPUModuleOp kernels, Location loc,
    RankedTensorType input, BlockScaledEncodingAttr encoding, StringRef part) {
  return quantizeKernelLaunch(builder, kernels, loc, input, encoding, part,
                              /*roundTrip=*/true);
}
