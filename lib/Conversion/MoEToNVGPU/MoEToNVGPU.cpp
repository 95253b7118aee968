//===- MoEToNVGPU.cpp - moe ops to the kernels their config names --------===//
//
// --convert-moe-to-nvgpu: checks each op's `moe.kernels` configuration
// against the op, then one pattern per op builds the kernels it names into
// `gpu.module @moe_kernels` and records their launch in `moe.launch`.
//
//===----------------------------------------------------------------------===//

#include "BackwardKernels.h"
#include "DecodeExpertsKernel.h"
#include "GroupedMatmulKernel.h"
#include "KernelSupport.h"
#include "LaunchPlan.h"
#include "MoE/Conversion/Passes.h"
#include "MoE/Dialect/MoEDialect.h"
#include "MoE/Target/Contract.h"
#include "QuantizeKernel.h"
#include "RoutingKernels.h"
#include "Tcgen05GroupedMatmulKernel.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_CONVERTMOETONVGPU
#include "MoE/Conversion/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

using Epilogue = GroupedMatmulTile::Epilogue;
using Activation = GroupedMatmulTile::Activation;
using Format = GroupedMatmulTile::Format;

/// The kernel for `tile` and `offsetType` in `kernels`, built on first use
/// with the attributes a launcher needs beyond its signature.
static gpu::GPUFuncOp getOrBuildKernel(OpBuilder &builder,
                                       gpu::GPUModuleOp kernels, Location loc,
                                       const GroupedMatmulTile &tile,
                                       Type offsetType) {
  if (auto func = dyn_cast_or_null<gpu::GPUFuncOp>(
          SymbolTable::lookupSymbolIn(kernels, tile.kernelName(offsetType))))
    return func;
  gpu::GPUFuncOp func =
      buildGroupedMatmulKernel(builder, loc, kernels, tile, offsetType);
  func->setAttr("moe.dynamic_shared_bytes",
                builder.getI64IntegerAttr(tile.dynamicSharedBytes()));
  func->setAttr("moe.tile",
                builder.getDenseI64ArrayAttr(
                    {tile.tileM, tile.tileN, tile.tileK, tile.stages}));
  func->setAttr("moe.swap_ab", builder.getBoolAttr(tile.swapAB));
  // Launched as clusters (docs/runtime-contract.md §3.1); absent: single CTAs.
  if (tile.clusterSize() > 1)
    func->setAttr("moe.cluster", builder.getI64IntegerAttr(tile.clusterSize()));
  return func;
}

static StringRef epilogueName(Epilogue epilogue) {
  switch (epilogue) {
  case Epilogue::Store:
    return "store";
  case Epilogue::SwiGLU:
    return "swiglu";
  case Epilogue::RowScale:
    return "row_scale";
  case Epilogue::ActivationGrad:
    return "swiglu_grad";
  }
  llvm_unreachable("unknown epilogue");
}

/// What a runtime needs to launch one grouped GEMM (docs/runtime-contract.md):
/// its shapes, ABI, epilogue, the kernels (`forms`, built as `funcs` for
/// `chip`) that together compute it and its plan; `part` names it inside a
/// fused op.
static FailureOr<DictionaryAttr>
launchInfo(OpBuilder &b, Location loc, Value rows, Value weights, Value offsets,
           const GroupedMatmulTile &tile, ArrayRef<Attribute> forms,
           ArrayRef<gpu::GPUFuncOp> funcs, StringRef chip,
           StringRef part = "") {
  auto rowsType = cast<RankedTensorType>(rows.getType());
  auto weightsType = cast<RankedTensorType>(weights.getType());
  auto offsetsType = cast<RankedTensorType>(offsets.getType());
  auto size = [](int64_t dim) {
    return ShapedType::isDynamic(dim) ? int64_t(-1) : dim;
  };
  int64_t numRows = rowsType.getDimSize(0);
  NamedAttrList info;
  if (tile.fp8()) {
    info.set("abi", b.getStringAttr("grouped_matmul_fp8.v1"));
    info.set("format", b.getStringAttr(tile.mxfp8() ? "mxfp8" : "fp8_block"));
  } else if (tile.activationGrad()) {
    // Not a grouped_matmul.v3 epilogue: an entry its plan alone describes.
    info.set("abi", b.getStringAttr("planned.v1"));
    info.set("op", b.getStringAttr(GroupedDgradOp::getOperationName()));
  } else {
    info.set("abi", b.getStringAttr("grouped_matmul.v3"));
  }
  info.set("epilogue", b.getStringAttr(epilogueName(tile.epilogue)));
  if (tile.quantizeOut)
    info.set("out", b.getStringAttr("f8E4M3FN"));
  info.set("activation",
           b.getStringAttr(!tile.gated() && !tile.activationGrad() ? "none"
                           : tile.activation == Activation::GptOss ? "gptoss"
                                                                   : "silu"));
  info.set("bias", b.getStringAttr(!tile.biasType           ? "none"
                                   : tile.biasType.isBF16() ? "bf16"
                                                            : "f32"));
  // N-major weights are [E, K, N] (contract §3.1, weights=kn).
  bool kn = tile.weightsKN();
  info.set("experts", b.getI64IntegerAttr(size(weightsType.getDimSize(0))));
  info.set("n", b.getI64IntegerAttr(size(weightsType.getDimSize(kn ? 2 : 1))));
  info.set("k", b.getI64IntegerAttr(size(weightsType.getDimSize(kn ? 1 : 2))));
  info.set("max_rows", b.getI64IntegerAttr(maxTokens(numRows)));
  info.set("offsets", TypeAttr::get(offsetsType.getElementType()));
  info.set("kernels", b.getArrayAttr(forms));
  if (kn)
    info.set("weights", b.getStringAttr("kn"));
  if (!part.empty())
    info.set("part", b.getStringAttr(part));
  if (failed(plan::addLaunchPlan(b, loc, info, funcs, chip)))
    return failure();
  return info.getDictionary(b.getContext());
}

/// Builds (or reuses) the routing kernel of `op`; returns its moe.launch.
static FailureOr<DictionaryAttr>
routeLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels, RouteOp op) {
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
  if (failed(plan::addLaunchPlan(builder, op.getLoc(), info, func, "")))
    return failure();
  return info.getDictionary(builder.getContext());
}

/// Builds (or reuses) the three kernels of `op` (count, index, then
/// gather); returns its moe.launch. With `quantize` the gather stores the
/// rows in e4m3 with [1, 128]-group f32 scales (`out`), and with
/// `scatterFrom` > 0 too a fourth kernel, the scatter over the tokens that
/// the runtime launches instead from `scatterFrom` tokens on.
static FailureOr<DictionaryAttr> permuteLaunch(OpBuilder &builder,
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
  spec.quantize = quantize;
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
  if (quantize && scatterFrom > 0)
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
  if (quantize)
    info.set("out", builder.getStringAttr("f8E4M3FN"));
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
  if (failed(plan::addLaunchPlan(builder, op.getLoc(), info, funcs, "")))
    return failure();
  return info.getDictionary(builder.getContext());
}

/// Builds (or reuses) the combine kernel of `op`; returns its moe.launch.
static FailureOr<DictionaryAttr>
unpermuteLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels, UnpermuteOp op) {
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
  if (failed(plan::addLaunchPlan(builder, op.getLoc(), info, func, "")))
    return failure();
  return info.getDictionary(builder.getContext());
}

/// Builds (or reuses) the kernel quantizing `input` with `encoding`;
/// returns its moe.launch (`part` names it inside a fused op).
static FailureOr<DictionaryAttr>
quantizeLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels, Location loc,
               RankedTensorType input, BlockScaledEncodingAttr encoding,
               StringRef part = "") {
  int64_t rank = input.getRank();
  QuantizeKernelSpec spec;
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
  info.set("abi", builder.getStringAttr("quantize.v1"));
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
  if (failed(plan::addLaunchPlan(builder, loc, info, func, "")))
    return failure();
  return info.getDictionary(builder.getContext());
}

/// The gpu.module every moe kernel goes into, created at the end of
/// `module` on first use; `module` becomes a GPU container module.
static gpu::GPUModuleOp getOrCreateKernelModule(OpBuilder &builder,
                                                ModuleOp module) {
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  builder.getUnitAttr());
  if (auto kernels = dyn_cast_or_null<gpu::GPUModuleOp>(
          SymbolTable::lookupSymbolIn(module, kKernelModuleName)))
    return kernels;
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  return gpu::GPUModuleOp::create(builder, module.getLoc(), kKernelModuleName);
}

/// The kernel tile of `form` for the GEMM `part`.
static GroupedMatmulTile formTile(const GemmPart &part, GemmFormAttr form) {
  GroupedMatmulTile tile;
  tile.tileM = form.getTileM();
  tile.tileN = form.getTileN();
  tile.tileK = form.getTileK();
  tile.stages = form.getStages();
  tile.swapAB = form.getSwapAb();
  tile.splitK = form.getSplitK();
  tile.cluster = form.getCluster();
  tile.widen = form.getWiden();
  tile.pingpong = form.getPingpong();
  tile.warpSpecialize = form.getWarpSpecialized()
                            ? GroupedMatmulTile::WarpSpecialize::All
                            : GroupedMatmulTile::WarpSpecialize::None;
  return part.apply(tile);
}

/// Checks that the kernel builder has every form of `config` for `part` of
/// `op`: the tile, and each knob taking effect as written.
static LogicalResult verifyGemmKernels(Operation *op, const GemmPart &part,
                                       GemmKernelsAttr config) {
  auto fail = [&](GemmFormAttr form) {
    InFlightDiagnostic diag = op->emitOpError();
    if (!part.name.empty())
      diag << part.name << " ";
    diag << "kernel form for rows [" << form.getRowsMin() << ", "
         << form.getRowsMax() << "]: ";
    return diag;
  };
  if (config.getQuantizeOutput() != part.quantizeOut)
    return op->emitOpError()
           << "quantize_output needs the gate_up GEMM of a block-FP8 expert "
              "MLP";
  for (GemmFormAttr form : config.getFormList()) {
    if (config.getChip() == "sm_100a") {
      if (form.getStages() != Tcgen05GroupedMatmulTile().stages)
        return fail(form) << "the sm_100a kernel is built with "
                          << Tcgen05GroupedMatmulTile().stages
                          << " stages only";
      continue;
    }
    GroupedMatmulTile tile = formTile(part, form);
    if (failed(verifyTile([&] { return fail(form); }, tile)))
      return failure();
    if (tile.widen && !tile.widened())
      return fail(form) << "widen is for MXFP8 operands only";
    if (tile.splitK != tile.kSplit())
      return fail(form) << "split_k is for the bf16 and block-FP8 swap-AB "
                           "forms without a quantized output only";
    if (tile.cluster != tile.clusterSize())
      return fail(form) << "a widened form has no cluster";
    if (form.getWarpSpecialized() != tile.specialized())
      return fail(form) << "a producer warpgroup is built for the 128-row "
                           "prefill forms (and MXFP8's 64-row one) of one "
                           "CTA without widening only";
  }
  return success();
}

/// Checks `op`'s configuration (`moe.kernels`) against the op.
static LogicalResult verifyKernelConfig(Operation *op) {
  Attribute config = op->getAttr(kKernelsAttr);
  if (isa<LayerOp>(op)) {
    if (config)
      return op->emitOpError() << "takes no '" << kKernelsAttr
                               << "': it launches its body's kernels";
    return success();
  }
  auto expect = [&](StringRef what) {
    return op->emitOpError()
           << "needs '" << kKernelsAttr << "' = #moe." << what
           << " (run --moe-select-kernels first, or write it), got "
           << (config ? config : Attribute());
  };
  if (isa<GroupedMatmulOp, GroupedDgradOp>(op)) {
    auto gemm = dyn_cast_or_null<GemmKernelsAttr>(config);
    if (!gemm)
      return expect("gemm_kernels<...>");
    return verifyGemmKernels(op, getGemmParts(op, false).front(), gemm);
  }
  if (isa<ExpertMLPOp>(op)) {
    auto mlp = dyn_cast_or_null<ExpertMLPKernelsAttr>(config);
    if (!mlp)
      return expect("expert_mlp_kernels<...>");
    SmallVector<GemmPart, 2> parts =
        getGemmParts(op, mlp.getGateUp().getQuantizeOutput());
    if (failed(verifyGemmKernels(op, parts[0], mlp.getGateUp())))
      return failure();
    return verifyGemmKernels(op, parts[1], mlp.getDown());
  }
  if (isa<PermuteOp>(op)) {
    auto permute = dyn_cast_or_null<PermuteKernelsAttr>(config);
    if (!permute)
      return expect("permute_kernels<...>");
    if (!permute.getQuantizeRows())
      return success();
    QuantizeOp rows = getGatherQuantizedRows(op);
    if (!rows)
      return op->emitOpError()
             << "quantize_rows needs a block-FP8 layer whose permuted rows "
                "are quantized in [1, 128] groups";
    // Else the rows would be quantized twice, by the gather and a kernel.
    auto rowsConfig = rows->getAttrOfType<KernelAttr>(kKernelsAttr);
    if (!rowsConfig || !rowsConfig.getFused())
      return op->emitOpError()
             << "has quantize_rows, so its layer's rows quantize must be "
                "#moe.kernel<..., fused = true>";
    return success();
  }
  auto kernel = dyn_cast_or_null<KernelAttr>(config);
  if (!kernel)
    return expect("kernel<...>");
  if (!kernel.getFused())
    return success();
  // A fused quantize is the one its layer's permute stores.
  QuantizeOp rows = isa<QuantizeOp>(op) ? getGatherQuantizedRows(op) : nullptr;
  auto permuteConfig =
      rows ? getLayerChain(cast<LayerOp>(op->getParentOp()))
                 ->permute->getAttrOfType<PermuteKernelsAttr>(kKernelsAttr)
           : nullptr;
  if (!permuteConfig || !permuteConfig.getQuantizeRows())
    return op->emitOpError()
           << "is 'fused' only as the quantize of a layer's rows whose "
              "permute has quantize_rows";
  return success();
}

/// The chip of `op`'s configuration ("" for moe.layer).
static StringRef configChip(Operation *op) {
  Attribute config = op->getAttr(kKernelsAttr);
  if (auto gemm = dyn_cast_or_null<GemmKernelsAttr>(config))
    return gemm.getChip();
  if (auto mlp = dyn_cast_or_null<ExpertMLPKernelsAttr>(config))
    return mlp.getGateUp().getChip();
  if (auto permute = dyn_cast_or_null<PermuteKernelsAttr>(config))
    return permute.getChip();
  if (auto kernel = dyn_cast_or_null<KernelAttr>(config))
    return kernel.getChip();
  return "";
}

/// Builds (or reuses) the kernels of `config`'s forms for `part`; returns
/// its moe.launch.
static FailureOr<DictionaryAttr> gemmLaunch(OpBuilder &builder,
                                            gpu::GPUModuleOp kernels,
                                            Location loc, const GemmPart &part,
                                            GemmKernelsAttr config) {
  Type offsetType =
      cast<RankedTensorType>(part.offsets.getType()).getElementType();
  SmallVector<Attribute> forms;
  SmallVector<gpu::GPUFuncOp> funcs;
  for (GemmFormAttr form : config.getFormList()) {
    gpu::GPUFuncOp func;
    if (config.getChip() == "sm_100a") {
      Tcgen05GroupedMatmulTile tile;
      func = lookUpOrBuild(kernels, tile.kernelName(offsetType), [&] {
        gpu::GPUFuncOp built = buildTcgen05GroupedMatmulKernel(
            builder, loc, kernels, tile, offsetType);
        built->setAttr("moe.dynamic_shared_bytes",
                       builder.getI64IntegerAttr(tile.dynamicSharedBytes()));
        built->setAttr("moe.tile",
                       builder.getDenseI64ArrayAttr(
                           {tile.tileM, tile.tileN, tile.tileK, tile.stages}));
        built->setAttr("moe.swap_ab", builder.getBoolAttr(false));
        return built;
      });
    } else {
      func = getOrBuildKernel(builder, kernels, loc, formTile(part, form),
                              offsetType);
    }
    funcs.push_back(func);
    forms.push_back(builder.getDictionaryAttr(
        {builder.getNamedAttr(
             "kernel",
             SymbolRefAttr::get(builder.getStringAttr(kKernelModuleName),
                                {FlatSymbolRefAttr::get(func)})),
         builder.getNamedAttr("rows_min",
                              builder.getI64IntegerAttr(form.getRowsMin())),
         builder.getNamedAttr("rows_max",
                              builder.getI64IntegerAttr(form.getRowsMax()))}));
  }
  return launchInfo(builder, loc, part.rows, part.weights, part.offsets,
                    part.apply(GroupedMatmulTile()), forms, funcs,
                    config.getChip(), part.name);
}

namespace {
/// Base of the patterns: each builds kernels into `kernels` and rewrites
/// its op in place (it gains `moe.launch`); an op that has one is done.
template <typename Op> struct KernelPattern : OpRewritePattern<Op> {
  KernelPattern(MLIRContext *context, gpu::GPUModuleOp kernels)
      : OpRewritePattern<Op>(context), kernels(kernels) {}

  LogicalResult matchAndRewrite(Op op,
                                PatternRewriter &rewriter) const override {
    if (op->hasAttr(kLaunchAttr) || op->hasAttr(kFusedIntoLaunchAttr))
      return failure();
    OpBuilder::InsertionGuard guard(rewriter);
    // On an internal error (reported) the op stays without moe.launch: the
    // pass fails.
    FailureOr<Attribute> built = build(op, rewriter);
    if (failed(built))
      return failure();
    Attribute launch = *built;
    rewriter.modifyOpInPlace(op, [&] {
      op->setAttr(launch ? kLaunchAttr : kFusedIntoLaunchAttr,
                  launch ? launch : rewriter.getUnitAttr());
    });
    return success();
  }
  /// The op's moe.launch, or null when another op's kernel computes it.
  virtual FailureOr<Attribute> build(Op op, OpBuilder &builder) const = 0;

  gpu::GPUModuleOp kernels;
};

/// Lowers `moe.grouped_matmul` to its forms' grouped GEMM kernels.
struct GroupedMatmulLowering : KernelPattern<GroupedMatmulOp> {
  using KernelPattern::KernelPattern;
  FailureOr<Attribute> build(GroupedMatmulOp op,
                             OpBuilder &builder) const override {
    return gemmLaunch(builder, kernels, op.getLoc(),
                      getGemmParts(op, false).front(),
                      op->getAttrOfType<GemmKernelsAttr>(kKernelsAttr));
  }
};

/// Lowers `moe.grouped_dgrad` to the grouped GEMM kernels of its forms,
/// built for N-major weights.
struct GroupedDgradLowering : KernelPattern<GroupedDgradOp> {
  using KernelPattern::KernelPattern;
  FailureOr<Attribute> build(GroupedDgradOp op,
                             OpBuilder &builder) const override {
    return gemmLaunch(builder, kernels, op.getLoc(),
                      getGemmParts(op, false).front(),
                      op->getAttrOfType<GemmKernelsAttr>(kKernelsAttr));
  }
};

/// Lowers `moe.expert_mlp` to its gate-up and down GEMM kernels, with a
/// quantize kernel between them for FP8 unless the gate-up quantizes.
struct ExpertMLPLowering : KernelPattern<ExpertMLPOp> {
  using KernelPattern::KernelPattern;
  FailureOr<Attribute> build(ExpertMLPOp op,
                             OpBuilder &builder) const override {
    auto config = op->getAttrOfType<ExpertMLPKernelsAttr>(kKernelsAttr);
    SmallVector<GemmPart, 2> parts =
        getGemmParts(op, config.getGateUp().getQuantizeOutput());
    FailureOr<DictionaryAttr> gateUp =
        gemmLaunch(builder, kernels, op.getLoc(), parts[0], config.getGateUp());
    if (failed(gateUp))
      return failure();
    SmallVector<Attribute, 3> launches = {*gateUp};
    if (parts[0].format != Format::BF16 && !parts[0].quantizeOut) {
      auto rowsType = cast<RankedTensorType>(op.getRows().getType());
      int64_t intermediate =
          cast<RankedTensorType>(op.getDownWeights().getType()).getDimSize(2);
      FailureOr<DictionaryAttr> quantize = quantizeLaunch(
          builder, kernels, op.getLoc(),
          RankedTensorType::get({rowsType.getDimSize(0), intermediate},
                                rowsType.getElementType()),
          op.getIntermediateAttr(), "intermediate");
      if (failed(quantize))
        return failure();
      launches.push_back(*quantize);
    }
    FailureOr<DictionaryAttr> down =
        gemmLaunch(builder, kernels, op.getLoc(), parts[1], config.getDown());
    if (failed(down))
      return failure();
    launches.push_back(*down);
    return Attribute(builder.getArrayAttr(launches));
  }
};

/// Lowers an op of one kernel through `launch`: `moe.route` to the routing
/// kernel, `moe.unpermute` to the combine kernel.
template <typename Op, FailureOr<DictionaryAttr> (*launch)(
                           OpBuilder &, gpu::GPUModuleOp, Op)>
struct OneKernelLowering : KernelPattern<Op> {
  using KernelPattern<Op>::KernelPattern;
  FailureOr<Attribute> build(Op op, OpBuilder &builder) const override {
    return launch(builder, this->kernels, op);
  }
};
using RouteLowering = OneKernelLowering<RouteOp, routeLaunch>;
using UnpermuteLowering = OneKernelLowering<UnpermuteOp, unpermuteLaunch>;
using GroupedWgradLowering = OneKernelLowering<GroupedWgradOp, wgradLaunch>;
using SwiGLUGradLowering = OneKernelLowering<SwiGLUGradOp, swigluGradLaunch>;
using RouteGradLowering = OneKernelLowering<RouteGradOp, routeGradLaunch>;
using SwiGLULowering = OneKernelLowering<SwiGLUOp, swigluLaunch>;
using UnpermuteGradLowering =
    OneKernelLowering<UnpermuteGradOp, unpermuteGradLaunch>;

/// Lowers `moe.permute` to its count, index and gather (and scatter)
/// kernels.
struct PermuteLowering : KernelPattern<PermuteOp> {
  using KernelPattern::KernelPattern;
  FailureOr<Attribute> build(PermuteOp op, OpBuilder &builder) const override {
    auto config = op->getAttrOfType<PermuteKernelsAttr>(kKernelsAttr);
    return permuteLaunch(builder, kernels, op, config.getQuantizeRows(),
                         config.getScatterFrom());
  }
};

/// Lowers `moe.quantize` to the quantize kernel (none when fused into the
/// permute's gather).
struct QuantizeLowering : KernelPattern<QuantizeOp> {
  using KernelPattern::KernelPattern;
  FailureOr<Attribute> build(QuantizeOp op, OpBuilder &builder) const override {
    if (op->getAttrOfType<KernelAttr>(kKernelsAttr).getFused())
      return Attribute();
    return quantizeLaunch(builder, kernels, op.getLoc(),
                          op.getInput().getType(), op.getEncoding());
  }
};

/// Lowers `moe.layer` to one entry launching its parts' kernels
/// (--moe-extract-device-code names the parts).
struct LayerLowering : KernelPattern<LayerOp> {
  using KernelPattern::KernelPattern;
  FailureOr<Attribute> build(LayerOp op, OpBuilder &builder) const override {
    std::optional<LayerChain> chain = getLayerChain(op);
    // T: the logits' rows, or the tokens' when the model routes.
    auto tokens = cast<RankedTensorType>(
        (chain->route ? chain->route.getLogits() : chain->permute.getTokens())
            .getType());
    NamedAttrList info;
    info.set("abi", builder.getStringAttr(chain->rowsQuantize ? "layer_fp8.v1"
                                                              : "layer.v1"));
    info.set("max_rows",
             builder.getI64IntegerAttr(maxTokens(tokens.getDimSize(0))));
    // The parts' launches (lowered before their layer), in step order.
    SmallVector<plan::LayerPart, 7> parts;
    auto add = [&](StringRef role, Operation *part) {
      if (auto launch = part->getAttrOfType<DictionaryAttr>(kLaunchAttr))
        parts.push_back({role, launch});
    };
    if (chain->route)
      add("route", chain->route);
    add("permute", chain->permute);
    if (chain->rowsQuantize)
      add("quantize", chain->rowsQuantize);
    // A decode part joins the expert MLP's (`<layer>_decode`).
    if (failed(addDecodePart(builder, kernels, *chain,
                             maxTokens(tokens.getDimSize(0)))))
      return failure();
    if (auto mlp = chain->mlp->getAttrOfType<ArrayAttr>(kLaunchAttr))
      for (auto part : mlp.getAsRange<DictionaryAttr>())
        parts.push_back({part.getAs<StringAttr>("part").getValue(), part});
    add("unpermute", chain->combine);
    if (failed(plan::addLayerPlan(builder, op.getLoc(), info, parts, kernels,
                                  configChip(chain->mlp))))
      return failure();
    return Attribute(info.getDictionary(builder.getContext()));
  }
};
} // namespace

void mlir::moe::populateMoEToNVGPUPatterns(RewritePatternSet &patterns,
                                           gpu::GPUModuleOp kernels) {
  patterns
      .add<GroupedMatmulLowering, GroupedDgradLowering, GroupedWgradLowering,
           SwiGLUGradLowering, SwiGLULowering, UnpermuteGradLowering,
           RouteGradLowering, ExpertMLPLowering, RouteLowering, PermuteLowering,
           UnpermuteLowering, QuantizeLowering, LayerLowering>(
          patterns.getContext(), kernels);
}

namespace {
struct ConvertMoEToNVGPUPass
    : moe::impl::ConvertMoEToNVGPUBase<ConvertMoEToNVGPUPass> {
  using Base::Base;

  /// Whether `launch` (a dictionary, or an array of parts) has a GEMM that
  /// reads FP8 operands.
  static bool readsFP8(Attribute launch) {
    if (auto parts = dyn_cast_or_null<ArrayAttr>(launch))
      return llvm::any_of(parts, readsFP8);
    auto dict = dyn_cast_or_null<DictionaryAttr>(launch);
    return dict && dict.get("format");
  }

  /// A dequantize is part of the launches only when every user reads it so;
  /// one that something else needs stays, and has no kernel.
  static void markFused(ModuleOp module, OpBuilder &builder) {
    llvm::SetVector<Operation *> dequantizes;
    module.walk([&](Operation *op) {
      if (!isa<GroupedMatmulOp, ExpertMLPOp>(op) ||
          !readsFP8(op->getAttr(kLaunchAttr)))
        return;
      for (const GemmPart &part : getGemmParts(op, false))
        for (Value operand : {part.rows, part.weights})
          dequantizes.insert(operand.getDefiningOp<DequantizeOp>());
    });
    for (Operation *dequantize : dequantizes)
      if (llvm::all_of(dequantize->getUsers(), [](Operation *user) {
            return readsFP8(user->getAttr(kLaunchAttr));
          }))
        dequantize->setAttr(kFusedIntoLaunchAttr, builder.getUnitAttr());
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(verifyMoEPlacement(module, MoEPipelineKind::GPU)))
      return signalPassFailure();
    bool any = false, failedAny = false;
    Operation *first = nullptr;
    module.walk([&](Operation *op) {
      if (std::string reason = missingKernelReason(op); !reason.empty()) {
        op->emitOpError() << "cannot be lowered to the GPU yet: " << reason;
        failedAny = true;
        return;
      }
      if (!hasKernels(op))
        return;
      any = true;
      if (failed(verifyKernelConfig(op))) {
        failedAny = true;
        return;
      }
      StringRef chip = configChip(op);
      // A moe.layer has no configuration; its entry launches the chain of
      // layer.v1, which its body must be.
      if (chip.empty()) {
        if (std::string reason = unsupportedReason(op, "sm_90a");
            !reason.empty()) {
          op->emitOpError() << "cannot be lowered to the GPU yet: " << reason;
          failedAny = true;
        }
        return;
      }
      // One gpu.module holds every kernel: one target.
      if (first && configChip(first) != chip) {
        op->emitOpError() << "is configured for " << chip << " but "
                          << first->getName() << " for " << configChip(first)
                          << ": one module's kernels target one chip";
        failedAny = true;
        return;
      }
      first = first ? first : op;
      if (std::string reason = unsupportedReason(op, chip); !reason.empty()) {
        op->emitOpError() << "cannot be lowered to " << chip
                          << " yet: " << reason;
        failedAny = true;
      }
    });
    if (failedAny)
      return signalPassFailure();
    if (!any)
      return;
    OpBuilder builder(module.getBodyRegion());
    gpu::GPUModuleOp kernels = getOrCreateKernelModule(builder, module);
    RewritePatternSet patterns(&getContext());
    populateMoEToNVGPUPatterns(patterns, kernels);
    walkAndApplyPatterns(module, std::move(patterns));
    // An op whose launch could not be built has neither attribute: never
    // fail without saying which op.
    WalkResult incomplete = module.walk([](Operation *op) {
      if (!hasKernels(op) || op->hasAttr(kLaunchAttr) ||
          op->hasAttr(kFusedIntoLaunchAttr))
        return WalkResult::advance();
      op->emitOpError("internal error: no kernel launch was built for it");
      return WalkResult::interrupt();
    });
    if (incomplete.wasInterrupted())
      return signalPassFailure();
    markFused(module, builder);
    // A program's constants are written into its workspace by kernels.
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(kProgramAttr) &&
          failed(addConstantLaunches(builder, func, kernels)))
        return signalPassFailure();
    // A function marked moe.program becomes one entry over its ops' entries.
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(kProgramAttr) &&
          failed(plan::addProgramPlan(builder, func, kernels,
                                      first ? configChip(first) : "sm_90a")))
        return signalPassFailure();
  }
};
} // namespace
