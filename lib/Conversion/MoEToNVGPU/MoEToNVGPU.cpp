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
  // Its third parameter is out's tensor map (contract §3.1).
  if (tile.tmaStores())
    func->setAttr("moe.tma_store", builder.getUnitAttr());
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
  // The activation stored as its MXFP8 round trip (contract §3.1).
  if (tile.roundTripOut)
    info.set("round_trip", b.getStringAttr(mxRoundTripName(tile.roundTripOut)));
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
  return plan::finishLaunch(b, loc, info, funcs, chip);
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
  tile.tmaStore = form.getTmaStore();
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
  if (config.getQuantizeOutput() !=
      (part.quantizeOut || bool(part.roundTripOut)))
    return op->emitOpError()
           << "quantize_output needs the gate_up GEMM of a block-FP8 expert "
              "MLP or of a bf16 one with an MXFP8 'intermediate'";
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
    if (tile.tmaStore && !tile.tmaStores())
      return fail(form) << "tma_store is for the normal forms with a bf16 "
                           "output, without an activation's gradient or "
                           "round trip, only";
    if (tile.tmaStore && !part.outRowsAligned())
      return fail(form) << "tma_store needs the output's columns to be a "
                           "static multiple of 8 (a 16-byte row pitch for its "
                           "tensor map)";
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
    Operation *rows = getGatherQuantizedRows(op);
    if (!rows)
      rows = getGatherRoundTripRows(op);
    if (!rows)
      return op->emitOpError()
             << "quantize_rows needs a block-FP8 layer whose permuted rows "
                "are quantized in [1, 128] groups, or a bf16 one whose rows "
                "make an MXFP8 round trip";
    if (permute.getScatterFrom() > 0 && isa<FakeQuantizeOp>(rows))
      return op->emitOpError()
             << "has scatter_from, which a gather of round-tripped rows "
                "does not implement";
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
  // A fused quantize (or round trip) is the one its layer's permute stores.
  Operation *rows = isa<QuantizeOp>(op)       ? getGatherQuantizedRows(op)
                    : isa<FakeQuantizeOp>(op) ? getGatherRoundTripRows(op)
                                              : nullptr;
  auto permuteConfig =
      rows ? getLayerChain(cast<LayerOp>(op->getParentOp()))
                 ->permute->getAttrOfType<PermuteKernelsAttr>(kKernelsAttr)
           : nullptr;
  if (!permuteConfig || !permuteConfig.getQuantizeRows())
    return op->emitOpError()
           << "is 'fused' only as the quantize (or round trip) of a layer's "
              "rows whose permute has quantize_rows";
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
/// quantize kernel between them for FP8 unless the gate-up quantizes, or
/// the round trip of a bf16 MLP's `intermediate`.
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
    // FP8 GEMMs read the activation quantized; bf16 ones read its round
    // trip, made in place.
    bool fp8 = parts[0].format != Format::BF16;
    if ((fp8 && !parts[0].quantizeOut) ||
        (!fp8 && op.getIntermediateAttr() && !parts[0].roundTripOut)) {
      auto rowsType = cast<RankedTensorType>(op.getRows().getType());
      int64_t intermediate =
          cast<RankedTensorType>(op.getDownWeights().getType()).getDimSize(2);
      auto interType = RankedTensorType::get(
          {rowsType.getDimSize(0), intermediate}, rowsType.getElementType());
      FailureOr<DictionaryAttr> quantize =
          (fp8 ? quantizeLaunch
               : fakeQuantizeLaunch)(builder, kernels, op.getLoc(), interType,
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

/// Lowers `moe.fake_quantize` to the quantize kernel's round trip (none
/// when fused into the permute's gather).
struct FakeQuantizeLowering : KernelPattern<FakeQuantizeOp> {
  using KernelPattern::KernelPattern;
  FailureOr<Attribute> build(FakeQuantizeOp op,
                             OpBuilder &builder) const override {
    if (op->getAttrOfType<KernelAttr>(kKernelsAttr).getFused())
      return Attribute();
    return fakeQuantizeLaunch(builder, kernels, op.getLoc(),
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
    if (chain->rowsRoundTrip)
      add("quantize", chain->rowsRoundTrip);
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
  patterns.add<GroupedMatmulLowering, GroupedDgradLowering,
               GroupedWgradLowering, SwiGLUGradLowering, SwiGLULowering,
               UnpermuteGradLowering, RouteGradLowering, ExpertMLPLowering,
               RouteLowering, PermuteLowering, UnpermuteLowering,
               QuantizeLowering, FakeQuantizeLowering, LayerLowering>(
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
