//===- SelectKernels.cpp - the GPU cost model, written into the IR -------===//
//
// --moe-select-kernels: decides every kernel knob of the GPU lowering (forms,
// tiles, stages, swap-AB rows and split-K, warp specialization, clusters,
// FP8 tile width, the permute's gather quantization and scatter threshold)
// and writes it as `moe.kernels` on each op. --convert-moe-to-nvgpu only
// reads it, so the choice is tested apart from the code it produces.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"
#include "MoE/Conversion/Passes.h"
#include "Tcgen05GroupedMatmulKernel.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOESELECTKERNELS
#include "MoE/Conversion/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

using Format = GroupedMatmulTile::Format;

/// `tile`, its pipeline trimmed to fit shared memory if it keeps more than
/// its stages there: a quantizing swap-AB tile's activation and f32 tiles
/// (after its deep pipeline, swapStagesFor), a widened MXFP8 tile's two
/// bf16 copies of a stage (2 stages at 128 x 128).
static GroupedMatmulTile fitStages(GroupedMatmulTile tile) {
  while ((tile.widened() || (tile.swapAB && tile.quantizeOut)) &&
         tile.stages > kMinStages &&
         tile.dynamicSharedBytes() > kMaxDynamicSharedBytes)
    --tile.stages;
  return tile;
}

/// The swap-AB tile for experts of at most `maxRows` rows: the narrowest
/// WGMMA N in {8, 16, 32, 64} that holds them; a quantizing tile's deep
/// pipeline (swapStagesFor) is trimmed to fit shared memory.
static GroupedMatmulTile swapABTile(const GroupedMatmulTile &tile,
                                    int64_t maxRows, int64_t stages,
                                    int64_t splitK) {
  int64_t tokens = 8;
  while (tokens < maxRows && tokens < 64)
    tokens *= 2;
  GroupedMatmulTile swapped =
      tile.withShape(tokens, 64, stages, /*swapAB=*/true);
  // Widening and ping-pong are for the normal (prefill) forms only.
  swapped.widen = false;
  swapped.pingpong = false;
  swapped.splitK = splitK;
  return fitStages(swapped);
}

/// Reduction sizes from which the swap-AB forms take a deeper pipeline and
/// split K between two warpgroups.
static constexpr int64_t kLongK = 8192;

/// Warpgroups the swap-AB forms reducing over `k` (dynamic: -1 or
/// ShapedType::kDynamic) split K between: `fixed` when the user chose it
/// (not 0), else the cost model: two from kLongK, where decode runs few, long
/// work items (Mixtral's down projection at T = 1: 128 items of 14336 K for
/// 132 SMs, one CTA each) and one warpgroup's step rate bounds the stream
/// (bench/RESULTS.md); with shorter K there are more items than SMs. The
/// cost model splits only `stages` that two warpgroups can share (an even
/// number, two each).
static int64_t swapSplitFor(int64_t k, int64_t fixed, int64_t stages) {
  // Any other choice than 0 is the user's; verifyTile refuses all but 1, 2.
  if (fixed != 0)
    return fixed;
  bool splittable = stages >= 2 * kMinStages && stages % 2 == 0;
  return !ShapedType::isDynamic(k) && k >= kLongK && splittable ? 2 : 1;
}

/// Pipeline stages of a swap-AB form reducing over `k` (dynamic: -1 or
/// ShapedType::kDynamic): `fixed` when the user chose it (> 0), else the
/// cost model: decode on a long K runs few, long work items, where 8 stages
/// keep more bytes in flight per CTA; with shorter K there are more items
/// than SMs, and 4 stages' higher occupancy wins or ties (bench/RESULTS.md).
static int64_t swapStagesFor(int64_t k, int64_t stages, int64_t fixed,
                             bool quantizeOut) {
  if (fixed > 0)
    return fixed;
  // A quantizing gate-up's swap-AB item is a whole [1, 128] group (four
  // weight tiles back to back): a quarter of the plain form's CTAs, each
  // with a deeper pipeline; 8 stages measured best (16 leave one CTA per SM;
  // bench/RESULTS.md); swapABTile trims what does not fit.
  if (quantizeOut)
    return 2 * std::max<int64_t>(stages, 4);
  return !ShapedType::isDynamic(k) && k >= kLongK ? std::max<int64_t>(stages, 8)
                                                  : stages;
}

/// `tile` for FP8 operands in `format`: the same 128 bytes of K per stage,
/// and 128 columns, since each warpgroup holds more accumulators for
/// unscaled products (one for block FP8, two for MXFP8). Block FP8's
/// 128-row single-CTA form takes `blockTileN` (see fp8-tile-n), unless its
/// items are whole [1, 128] output groups (`quantizeOut`).
static GroupedMatmulTile fp8Tile(GroupedMatmulTile tile, Format format,
                                 bool widen, int64_t blockTileN,
                                 bool quantizeOut = false) {
  tile.format = format;
  tile.widen = widen && format == Format::MXFP8 && !tile.swapAB;
  tile.quantizeOut = quantizeOut;
  tile.tileK = 128;
  if (!tile.swapAB)
    tile.tileN = format == Format::FP8Block && tile.tileM == 128 &&
                         tile.cluster == 1 && !quantizeOut
                     ? blockTileN
                     : 128;
  return tile;
}

/// `tile` as the form of the experts with [rowsMin, rowsMax] rows: every
/// knob the kernel's own (what the builder derives, not what was asked).
static GemmFormAttr formAttr(MLIRContext *context,
                             const GroupedMatmulTile &tile, int64_t rowsMin,
                             int64_t rowsMax) {
  return GemmFormAttr::get(context, rowsMin, rowsMax, tile.tileM, tile.tileN,
                           tile.tileK, tile.stages, tile.swapAB, tile.kSplit(),
                           tile.clusterSize(), tile.specialized(),
                           tile.widened(), tile.pingpong, tile.tmaStores());
}

namespace {
struct MoESelectKernelsPass
    : moe::impl::MoESelectKernelsBase<MoESelectKernelsPass> {
  using Base::Base;

  /// The prefill tile the options ask for (bf16; FP8 via fp8Tile).
  GroupedMatmulTile baseTile;

  InFlightDiagnostic fail() {
    return mlir::emitError(getOperation().getLoc()) << "moe-select-kernels: ";
  }

  /// The prefill tile of an FP8 `format` (fp8Tile), with `fp8-stages`
  /// stages where it is set.
  GroupedMatmulTile fp8Base(Format format, bool quantizeOut = false) const {
    GroupedMatmulTile tile =
        fp8Tile(baseTile, format, mxfp8Widen, fp8TileN, quantizeOut);
    if (fp8Stages > 0 && !tile.swapAB)
      tile.stages = fp8Stages;
    return tile;
  }

  /// The option that sets the swap-AB forms' stage count.
  StringRef swapStagesName() const {
    return swapABStages > 0 ? "swap-ab-stages" : "stages";
  }

  /// Checks the ranges of the numeric options before any arithmetic on
  /// them, whatever the chip: each is refused with the values it can take.
  LogicalResult checkRanges() {
    auto range = [&](StringRef name, int64_t value, int64_t lo, int64_t hi,
                     StringRef why) -> LogicalResult {
      if (value >= lo && value <= hi)
        return success();
      return fail() << "'" << name << "' must be in [" << lo << ", " << hi
                    << "] (" << why << "), got " << value;
    };
    StringRef stagesWhy = "a pipelined K loop refills a stage after the step "
                          "that read it, so it needs two; more never fit "
                          "227 KiB of shared memory";
    if (failed(range("stages", stages, kMinStages, kMaxStages, stagesWhy)))
      return failure();
    if (fp8Stages != 0 && failed(range("fp8-stages", fp8Stages, kMinStages,
                                       kMaxStages, stagesWhy)))
      return failure();
    if (swapABStages != 0 &&
        failed(range("swap-ab-stages", swapABStages, kMinStages, kMaxStages,
                     "0 chooses per GEMM; else the swap-AB forms' "
                     "pipeline, which needs two stages")))
      return failure();
    if (swapABMaxRows < 0 || swapABMaxRows > 64)
      return fail() << "'swap-ab-max-rows' must be in [0, 64] (WGMMA's N "
                       "holds at most 64 tokens), got "
                    << static_cast<int64_t>(swapABMaxRows);
    if (decodeMaxTokens < 0 || decodeMaxTokens > swapABMaxRows)
      return fail() << "'decode-max-tokens' must be in [0, swap-ab-max-rows "
                       "= "
                    << static_cast<int64_t>(swapABMaxRows)
                    << "] (the decode kernel runs the swap-AB tiles), got "
                    << static_cast<int64_t>(decodeMaxTokens);
    if (fp8ScatterMinTokens < 0 || fp8ScatterMinTokens > kMaxLaunchRows)
      return fail() << "'fp8-scatter-min-tokens' must be 0 (no scatter "
                       "kernel) or a token count in [1, "
                    << kMaxLaunchRows << "], got "
                    << static_cast<int64_t>(fp8ScatterMinTokens);
    return success();
  }

  /// Options that shape the sm_90a forms: on sm_100a (one fixed tcgen05
  /// form) any other value than their default would be ignored, so it is an
  /// error naming them.
  LogicalResult checkSm100Options() {
    MoESelectKernelsOptions defaults;
    SmallVector<StringRef> set;
    auto check = [&](StringRef name, bool differs) {
      if (differs)
        set.push_back(name);
    };
    check("tile-m", tileM != defaults.tileM);
    check("tile-n", tileN != defaults.tileN);
    check("tile-k", tileK != defaults.tileK);
    check("stages", stages != defaults.stages);
    check("fp8-stages", fp8Stages != defaults.fp8Stages);
    check("swap-ab-stages", swapABStages != defaults.swapABStages);
    check("swap-ab-split-k", swapABSplitK != defaults.swapABSplitK);
    check("fp8-tile-n", fp8TileN != defaults.fp8TileN);
    check("mxfp8-widen", mxfp8Widen != defaults.mxfp8Widen);
    check("cluster", cluster != defaults.cluster);
    check("warp-specialize", warpSpecialize != defaults.warpSpecialize);
    check("swap-ab", swapAB != defaults.swapAB);
    check("pingpong", pingpong != defaults.pingpong);
    check("tma-store", tmaStore != defaults.tmaStore);
    if (set.empty())
      return success();
    return fail() << "chip=sm_100a has one kernel form (the tcgen05 MXFP8 "
                     "GEMM's 128x128x128 tile, 4 stages), so these options "
                     "would be ignored: "
                  << llvm::join(set, ", ");
  }

  /// Checks the options once, whatever ops there are.
  LogicalResult checkOptions() {
    if (chip != "sm_90a" && chip != "sm_100a")
      return fail() << "no kernels for chip '" << chip
                    << "' yet (sm_90a, and sm_100a for the MXFP8 "
                       "grouped_matmul)";
    if (failed(checkRanges()))
      return failure();
    if (chip == "sm_100a")
      return checkSm100Options();
    baseTile.tileM = tileM;
    baseTile.tileN = tileN;
    baseTile.tileK = tileK;
    baseTile.stages = stages;
    baseTile.swapAB = swapAB;
    baseTile.cluster = cluster;
    using WarpSpecialize = GroupedMatmulTile::WarpSpecialize;
    std::optional<WarpSpecialize> specialize =
        llvm::StringSwitch<std::optional<WarpSpecialize>>(warpSpecialize)
            .Case("auto", WarpSpecialize::FP8)
            .Case("all", WarpSpecialize::All)
            .Case("none", WarpSpecialize::None)
            .Default(std::nullopt);
    if (!specialize)
      return fail() << "'warp-specialize' must be auto, all or none, got '"
                    << warpSpecialize << "'";
    baseTile.warpSpecialize = *specialize;
    auto failHere = [&] { return fail(); };
    // With pingpong the bf16 prefill forms are its 64-row tile instead.
    GroupedMatmulTile bf16Tile = pingpongTile(baseTile).value_or(baseTile);
    if (failed(verifyTile(failHere, bf16Tile)))
      return failure();
    if (fp8TileN != 128 && fp8TileN != 192)
      return fail() << "'fp8-tile-n' must be 128 or 192, got "
                    << static_cast<int64_t>(fp8TileN);
    GroupedMatmulTile blockFP8 = fp8Base(Format::FP8Block);
    GroupedMatmulTile quantizedGateUp =
        fp8Base(Format::FP8Block, /*quantizeOut=*/true);
    quantizedGateUp.epilogue = GroupedMatmulTile::Epilogue::SwiGLU;
    for (const GroupedMatmulTile &base :
         {bf16Tile, blockFP8, fitStages(fp8Base(Format::MXFP8)),
          quantizedGateUp}) {
      bool fp8 = base.format != Format::BF16;
      if (failed(verifyTile(failHere, base,
                            fp8 && fp8Stages > 0 ? "fp8-stages" : "stages")))
        return failure();
      for (int64_t k : {int64_t(1), kLongK}) {
        // With swap-ab the base tile is the one form, split as on its K.
        if (base.swapAB) {
          GroupedMatmulTile split = base;
          split.splitK = swapSplitFor(k, swapABSplitK, base.stages);
          if (failed(verifyTile(failHere, split)))
            return failure();
          continue;
        }
        int64_t swapStages =
            swapStagesFor(k, baseTile.stages, swapABStages, base.quantizeOut);
        if (failed(verifyTile(
                failHere,
                swapABTile(base, 64, swapStages,
                           swapSplitFor(k, swapABSplitK, swapStages)),
                swapStagesName())))
          return failure();
      }
    }
    return success();
  }

  /// The forms of one grouped GEMM of `op` (rows `rows`), as the options
  /// and the cost model choose them.
  GemmKernelsAttr selectGemm(const GemmPart &part, Value rows) {
    GroupedMatmulTile tile = part.apply(
        part.format == Format::BF16 ? baseTile
                                    : fp8Base(part.format, part.quantizeOut));
    tile.tmaStore = tmaStore && part.outRowsAligned();
    int64_t swapStages = swapStagesFor(part.k(), baseTile.stages, swapABStages,
                                       part.quantizeOut);
    int64_t swapSplit = swapSplitFor(part.k(), swapABSplitK, swapStages);
    int64_t rowCount = cast<RankedTensorType>(rows.getType()).getDimSize(0);
    // A static row count within the swap-AB range needs no other form.
    bool swapOnly = swapABMaxRows > 0 && !ShapedType::isDynamic(rowCount) &&
                    rowCount <= swapABMaxRows;
    MLIRContext *context = &getContext();
    SmallVector<Attribute> forms;
    auto addForm = [&](const GroupedMatmulTile &form, int64_t rowsMin,
                       int64_t rowsMax) {
      forms.push_back(formAttr(context, fitStages(form), rowsMin, rowsMax));
    };
    if (tile.swapAB) {
      GroupedMatmulTile swapped = tile;
      swapped.splitK = swapSplitFor(part.k(), swapABSplitK, tile.stages);
      addForm(swapped, 1, kMaxLaunchRows);
    } else if (swapOnly) {
      addForm(swapABTile(tile, swapABMaxRows, swapStages, swapSplit), 1,
              kMaxLaunchRows);
    } else {
      int64_t swapRows = swapABMaxRows;
      if (swapRows > 0)
        addForm(swapABTile(tile, swapRows, swapStages, swapSplit), 1, swapRows);
      // A 128-row tile would be mostly padding for experts of at most 64
      // rows: they take one warpgroup's 64-row tile instead.
      int64_t firstRows = swapRows + 1;
      if (auto pp = pingpongTile(tile))
        tile = *pp;
      if (tile.tileM == 128 && swapRows < 64) {
        // FP8's 64-row form keeps 128 columns: one warpgroup holds them and
        // their products (bench/RESULTS.md, fp8-tile-n).
        int64_t columns = tile.fp8() ? 128 : tile.tileN;
        addForm(tile.withShape(64, columns, tile.stages, false), firstRows, 64);
        firstRows = 65;
      }
      addForm(tile, firstRows, kMaxLaunchRows);
    }
    return GemmKernelsAttr::get(context, chip, ArrayAttr::get(context, forms),
                                part.quantizeOut || bool(part.roundTripOut));
  }

  /// With `pingpong`, the ping-pong form of a bf16 normal `tile` (its
  /// columns, one CTA): 128-row items where a warpgroup holds two 64-row
  /// accumulators (at most 128 columns, no activation's gradient), else
  /// 64-row ones, which then take every expert past swap-AB's.
  std::optional<GroupedMatmulTile>
  pingpongTile(const GroupedMatmulTile &tile) const {
    if (!pingpong || tile.fp8() || tile.swapAB || tile.quantizeOut)
      return std::nullopt;
    bool twoGroups = tile.tileM == 128 && tile.twoRowGroupsFit();
    GroupedMatmulTile pp =
        tile.withShape(twoGroups ? 128 : 64, tile.tileN, tile.stages, false);
    pp.pingpong = true;
    pp.cluster = 1;
    return pp;
  }

  /// The forms of a moe.grouped_dgrad and of a moe.grouped_matmul with
  /// kn_weights: the normal forms of the options' bf16 tile (N-major weights
  /// have no swap-AB form yet), its 64-row form for experts of at most 64
  /// rows where the tile has 128.
  GemmKernelsAttr selectDgrad(const GemmPart &part) {
    GroupedMatmulTile tile = part.apply(baseTile);
    tile.tmaStore = tmaStore && part.outRowsAligned();
    if (tile.swapAB)
      tile = tile.withShape(128, 128, tile.stages, /*swapAB=*/false);
    // With the activation's gradient, 128 columns: the tile's inputs then
    // stay in registers through the mainloop (EpilogueStore.cpp). One CTA:
    // its entry is planned.v1, whose kernels are not clusters (contract §2).
    if (tile.activationGrad()) {
      tile = tile.withShape(tile.tileM, 128, tile.stages, /*swapAB=*/false);
      tile.cluster = 1;
    }
    tile.splitK = 1;
    MLIRContext *context = &getContext();
    SmallVector<Attribute> forms;
    int64_t firstRows = 1;
    if (auto pp = pingpongTile(tile))
      tile = *pp;
    if (tile.tileM == 128) {
      forms.push_back(formAttr(
          context, tile.withShape(64, tile.tileN, tile.stages, false), 1, 64));
      firstRows = 65;
    }
    forms.push_back(formAttr(context, tile, firstRows, kMaxLaunchRows));
    return GemmKernelsAttr::get(context, chip, ArrayAttr::get(context, forms),
                                false);
  }

  /// The one sm_100a form: the tcgen05 MXFP8 GEMM's fixed tile.
  GemmKernelsAttr selectSm100Gemm() {
    MLIRContext *context = &getContext();
    Tcgen05GroupedMatmulTile tile;
    return GemmKernelsAttr::get(
        context, chip,
        ArrayAttr::get(
            context, GemmFormAttr::get(context, 1, kMaxLaunchRows, tile.tileM,
                                       tile.tileN, tile.tileK, tile.stages,
                                       /*swapAB=*/false, /*splitK=*/1,
                                       /*cluster=*/1, /*warpSpecialized=*/false,
                                       /*widen=*/false, /*pingpong=*/false,
                                       /*tmaStore=*/false)),
        false);
  }

  /// `decode-max-tokens` for the expert MLP of a bf16 layer whose kernel
  /// the decode kernel is built for (silu, no biases) and whose first forms
  /// it can run (the attribute's verifier says which); else 0.
  int64_t selectDecode(ExpertMLPOp mlp, ArrayRef<GemmPart> parts,
                       GemmKernelsAttr gateUp, GemmKernelsAttr down) {
    // The decode kernel keeps the activation in registers: no round trip.
    if (decodeMaxTokens == 0 || !isa<LayerOp>(mlp->getParentOp()) ||
        mlp.getIntermediateAttr())
      return 0;
    for (const GemmPart &part : parts)
      if (part.format != GemmPart::Format::BF16 || part.biasType ||
          part.activation != GemmPart::Activation::Silu || part.quantizeOut ||
          part.weightsKN())
        return 0;
    auto fits = [&](GemmKernelsAttr gemm) {
      GemmFormAttr first = *gemm.getFormList().begin(),
                   gateUpFirst = *gateUp.getFormList().begin();
      return first.getSwapAb() && first.getRowsMax() >= decodeMaxTokens &&
             first.getTileM() >= decodeMaxTokens && first.getSplitK() == 1 &&
             first.getStages() == gateUpFirst.getStages() &&
             first.getTileM() == gateUpFirst.getTileM();
    };
    return fits(gateUp) && fits(down) ? static_cast<int64_t>(decodeMaxTokens)
                                      : 0;
  }

  /// The configuration of `op`, or null for moe.layer (it launches its
  /// body's kernels).
  Attribute select(Operation *op) {
    MLIRContext *context = &getContext();
    if (chip == "sm_100a")
      return selectSm100Gemm();
    if (auto matmul = dyn_cast<GroupedMatmulOp>(op))
      return matmul.getKnWeights()
                 ? selectDgrad(getGemmParts(op, false).front())
                 : selectGemm(getGemmParts(op, false).front(),
                              matmul.getRows());
    if (isa<GroupedDgradOp>(op))
      return selectDgrad(getGemmParts(op, false).front());
    if (auto mlp = dyn_cast<ExpertMLPOp>(op)) {
      // The gate-up epilogue quantizes FP8 activations, or makes a bf16
      // one's round trip, as the options say.
      bool bf16 = getGemmParts(op, false).front().format == Format::BF16;
      SmallVector<GemmPart, 2> parts =
          getGemmParts(op, bf16 ? fuseRoundTrips : fp8EpilogueQuantize);
      GemmKernelsAttr gateUp = selectGemm(parts[0], mlp.getRows()),
                      down = selectGemm(parts[1], mlp.getRows());
      return ExpertMLPKernelsAttr::get(context, gateUp, down,
                                       selectDecode(mlp, parts, gateUp, down));
    }
    // In a block-FP8 layer the gather can store the rows quantized: the
    // quantize between the permute and the expert MLP then has no kernel.
    bool gatherQuantizes = fp8GatherQuantize && getGatherQuantizedRows(op);
    // In a bf16 layer of MXFP8 values it can store the rows' round trip.
    bool gatherRoundTrips = fuseRoundTrips && getGatherRoundTripRows(op);
    if (isa<PermuteOp>(op))
      return PermuteKernelsAttr::get(
          context, chip, gatherQuantizes || gatherRoundTrips,
          gatherQuantizes ? static_cast<int64_t>(fp8ScatterMinTokens) : 0);
    if (isa<LayerOp>(op))
      return {};
    return KernelAttr::get(context, chip,
                           /*fused=*/(isa<QuantizeOp>(op) && gatherQuantizes) ||
                               (isa<FakeQuantizeOp>(op) && gatherRoundTrips));
  }

  void runOnOperation() override {
    if (failed(checkOptions()) ||
        failed(verifyMoEPlacement(getOperation(), MoEPipelineKind::GPU)))
      return signalPassFailure();
    SmallVector<Operation *> ops;
    bool failedAny = false;
    getOperation().walk([&](Operation *op) {
      if (std::string reason = missingKernelReason(op); !reason.empty()) {
        op->emitOpError() << "cannot be lowered to " << chip
                          << " yet: " << reason;
        failedAny = true;
        return;
      }
      if (!hasKernels(op))
        return;
      if (std::string reason = unsupportedReason(op, chip); !reason.empty()) {
        op->emitOpError() << "cannot be lowered to " << chip
                          << " yet: " << reason;
        failedAny = true;
      }
      ops.push_back(op);
    });
    if (failedAny)
      return signalPassFailure();
    for (Operation *op : ops)
      if (Attribute config = select(op))
        op->setAttr(kKernelsAttr, config);
  }
};
} // namespace
