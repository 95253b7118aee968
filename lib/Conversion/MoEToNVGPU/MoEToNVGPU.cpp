//===- MoEToNVGPU.cpp - moe ops to sm_90a kernels ------------------------===//

#include "GroupedMatmulKernel.h"
#include "MoE/Conversion/Passes.h"
#include "MoE/Dialect/MoEDialect.h"
#include "MoE/Transforms/Passes.h"
#include "QuantizeKernel.h"
#include "RoutingKernels.h"
#include "Tcgen05GroupedMatmulKernel.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/StringSwitch.h"

#include <optional>

namespace mlir::moe {
#define GEN_PASS_DEF_CONVERTMOETONVGPU
#include "MoE/Conversion/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

/// The gpu.module every moe kernel goes into.
static constexpr StringLiteral kKernelModuleName = "moe_kernels";
/// Rows per launch are 32-bit in the kernel ABI (offsets, TMA coordinates).
static constexpr int64_t kMaxLaunchRows = 2147483647;

using Epilogue = GroupedMatmulTile::Epilogue;
using Activation = GroupedMatmulTile::Activation;
using Format = GroupedMatmulTile::Format;

/// Why `k` cannot be a TMA-loaded reduction size, or an empty string.
static std::string unsupportedK(int64_t k) {
  if (!ShapedType::isDynamic(k) && k % 8 != 0)
    return "K must be a multiple of 8 (TMA row pitch is a multiple of 16 "
           "bytes)";
  return "";
}

/// Why the epilogue cannot add `bias` (null: none), or an empty string.
static std::string unsupportedBias(Value bias) {
  if (bias && !isa<Float32Type, BFloat16Type>(
                  cast<RankedTensorType>(bias.getType()).getElementType()))
    return "only f32 and bf16 biases are implemented";
  return "";
}

/// Whether `v` is a moe.dequantize result: a quantized GEMM operand.
static bool isDequantized(Value v) {
  return v.getDefiningOp<DequantizeOp>() != nullptr;
}

/// The FP8 operands of a GEMM a kernel reads quantized: the dequantizes of
/// its rows and of its weights.
struct BlockFP8Operands {
  DequantizeOp rows, weights;
};

/// `rows` and `weights` both dequantized from e4m3 with scales of type
/// `Scale`, blocks `rowBlock` of the rows and `weightBlock` of each expert's
/// weights; nullopt otherwise.
template <typename Scale>
static std::optional<BlockFP8Operands>
getScaledOperands(Value rows, Value weights, ArrayRef<int64_t> rowBlock,
                  ArrayRef<int64_t> weightBlock) {
  auto blocksAre = [](DequantizeOp op, ArrayRef<int64_t> extents) {
    if (!op)
      return false;
    BlockScaledEncodingAttr encoding = op.getEncoding();
    if (!isa<Float8E4M3FNType>(encoding.getElement()) ||
        !isa<Scale>(encoding.getScale()))
      return false;
    int64_t rank = extents.size();
    for (int64_t dim = 0; dim < rank; ++dim)
      if (encoding.getBlockExtent(dim, rank) != extents[dim])
        return false;
    return true;
  };
  auto rowsOp = rows.getDefiningOp<DequantizeOp>();
  auto weightsOp = weights.getDefiningOp<DequantizeOp>();
  if (!blocksAre(rowsOp, rowBlock) || !blocksAre(weightsOp, weightBlock))
    return std::nullopt;
  return BlockFP8Operands{rowsOp, weightsOp};
}

/// `rows` and `weights` as block-FP8 operands (f32 scales, [1, 128] and
/// [1, 128, 128]), or nullopt.
static std::optional<BlockFP8Operands> getBlockFP8Operands(Value rows,
                                                           Value weights) {
  return getScaledOperands<Float32Type>(rows, weights, {1, 128}, {1, 128, 128});
}

/// The MXFP8 operands of a GEMM (OCP MX): rows and weights both dequantized
/// from e4m3 with one f8E8M0FNU scale per 32 K ([1, 32] of the rows,
/// [1, 1, 32] of each expert's weights).
static std::optional<BlockFP8Operands> getMXFP8Operands(Value rows,
                                                        Value weights) {
  return getScaledOperands<Float8E8M0FNUType>(rows, weights, {1, 32},
                                              {1, 1, 32});
}

/// Rows and weights an sm_90a kernel reads quantized (block FP8 or MXFP8),
/// or nullopt.
static std::optional<BlockFP8Operands> getFP8Operands(Value rows,
                                                      Value weights) {
  if (auto blocks = getBlockFP8Operands(rows, weights))
    return blocks;
  return getMXFP8Operands(rows, weights);
}

/// The kernel format of quantized operands (their weights' scale type
/// tells the two apart).
static Format formatOf(BlockFP8Operands operands) {
  return isa<Float32Type>(operands.weights.getEncoding().getScale())
             ? Format::FP8Block
             : Format::MXFP8;
}

/// Whether `encoding` quantizes a GEMM's rows as `format` reads them:
/// e4m3 in [1, 128] groups with f32 scales (block FP8) or in [1, 32]
/// blocks with E8M0 scales (MXFP8).
static bool isRowEncoding(BlockScaledEncodingAttr encoding, Format format) {
  bool mx = format == Format::MXFP8;
  return encoding && isa<Float8E4M3FNType>(encoding.getElement()) &&
         (mx ? isa<Float8E8M0FNUType>(encoding.getScale())
             : isa<Float32Type>(encoding.getScale())) &&
         encoding.getBlockExtent(0, 2) == 1 &&
         encoding.getBlockExtent(1, 2) == (mx ? 32 : 128);
}

/// Why the sm_100a kernel cannot run `op` (any moe op), or an empty string:
/// only the MXFP8 grouped GEMM with the plain bf16 store is implemented.
static std::string unsupportedReasonSm100(Operation *op) {
  auto matmul = dyn_cast<GroupedMatmulOp>(op);
  if (!matmul)
    return "only moe.grouped_matmul of MXFP8 operands has an sm_100a kernel";
  if (!cast<RankedTensorType>(matmul.getType()).getElementType().isBF16())
    return "only a bf16 result is implemented";
  if (matmul.getBias() || matmul.getRowScale())
    return "bias and row_scale epilogues are not implemented (plain store "
           "only)";
  if (!getMXFP8Operands(matmul.getRows(), matmul.getWeights()))
    return "only MXFP8 operands are implemented: rows and weights both "
           "moe.dequantize of f8E4M3FN with f8E8M0FNU scales, blocks [1, 32] "
           "of the rows and [1, 1, 32] of each expert's weights";
  int64_t k = cast<RankedTensorType>(matmul.getRows().getType()).getDimSize(1);
  if (!ShapedType::isDynamic(k) && k % Tcgen05GroupedMatmulTile::tileK != 0)
    return "K must be a multiple of 128 (4 scale bytes per row per stage)";
  return "";
}

/// Why the sm_90a kernels cannot run `op` with quantized operands, or an
/// empty string: both GEMMs in block FP8 or both in MXFP8, the intermediate
/// quantized to their row format between them.
static std::string unsupportedQuantizedReason(ExpertMLPOp op) {
  std::optional<BlockFP8Operands> gateUp =
      getFP8Operands(op.getRows(), op.getGateUpWeights());
  std::optional<BlockFP8Operands> down =
      getFP8Operands(op.getRows(), op.getDownWeights());
  if (!gateUp || !down || formatOf(*gateUp) != formatOf(*down))
    return "quantized operands of a fused expert MLP are implemented as "
           "block FP8 or MXFP8, the same for both GEMMs: rows and both "
           "weights moe.dequantize of f8E4M3FN with f32 scales in blocks "
           "[1, 128] of the rows and [128, 128] of each expert's weights, or "
           "with f8E8M0FNU scales in blocks [1, 32] and [1, 32]";
  if (formatOf(*gateUp) == Format::FP8Block &&
      !isRowEncoding(op.getIntermediateAttr(), formatOf(*gateUp)))
    return "a block-FP8 expert MLP needs 'intermediate <f8E4M3FN, [1, 128], "
           "f32>': its down GEMM reads FP8 rows";
  if (!isRowEncoding(op.getIntermediateAttr(), formatOf(*gateUp)))
    return "an MXFP8 expert MLP needs 'intermediate <f8E4M3FN, [1, 32], "
           "f8E8M0FNU>': its down GEMM reads FP8 rows";
  return "";
}

/// Why the sm_90a kernels cannot run `op`, or an empty string.
static std::string unsupportedReason(ExpertMLPOp op) {
  bool quantized = false;
  for (Value v : {op.getRows(), op.getGateUpWeights(), op.getDownWeights()})
    quantized |= isDequantized(v);
  if (quantized) {
    if (std::string reason = unsupportedQuantizedReason(op); !reason.empty())
      return reason;
  } else if (op.getIntermediateAttr()) {
    return "an FP8 'intermediate' needs block-FP8 or MXFP8 rows and weights "
           "(the down GEMM reads FP8 rows only from an FP8 expert MLP)";
  }
  for (Value v : {op.getRows(), op.getGateUpWeights(), op.getDownWeights(),
                  op.getResult()})
    if (!cast<RankedTensorType>(v.getType()).getElementType().isBF16())
      return "only bf16 rows, weights and result are implemented";
  for (Value bias : {op.getGateUpBias(), op.getDownBias()})
    if (std::string reason = unsupportedBias(bias); !reason.empty())
      return reason;
  int64_t hidden = cast<RankedTensorType>(op.getRows().getType()).getDimSize(1);
  int64_t intermediate =
      cast<RankedTensorType>(op.getDownWeights().getType()).getDimSize(2);
  std::string reason = unsupportedK(hidden);
  return reason.empty() ? unsupportedK(intermediate) : reason;
}

/// Why the routing kernel cannot run `op`, or an empty string.
static std::string unsupportedReason(RouteOp op) {
  auto logits = cast<RankedTensorType>(op.getLogits().getType());
  Type element = logits.getElementType();
  if (!element.isF32() && !element.isBF16())
    return "only f32 and bf16 logits are implemented";
  int64_t experts = logits.getDimSize(1);
  if (ShapedType::isDynamic(experts) || experts > 512)
    return "the expert count must be static and at most 512";
  if (op.getTopK() > 32)
    return "top-k must be at most 32";
  if (op.getNumGroups() && *op.getNumGroups() > 64)
    return "at most 64 expert groups are implemented";
  return "";
}

/// Why the permutation kernels cannot run `op`, or an empty string.
static std::string unsupportedReason(PermuteOp op) {
  auto tokens = cast<RankedTensorType>(op.getTokens().getType());
  auto ids = cast<RankedTensorType>(op.getExpertIds().getType());
  auto offsets = cast<RankedTensorType>(op.getOffsets().getType());
  if (op.getPadTo())
    return "pad_to is not implemented yet";
  if (!tokens.getElementType().isBF16())
    return "only bf16 tokens are implemented";
  if (!ShapedType::isDynamic(tokens.getDimSize(1)) &&
      tokens.getDimSize(1) % 8 != 0)
    return "the hidden size must be a multiple of 8 (16-byte row chunks)";
  if (ShapedType::isDynamic(ids.getDimSize(1)))
    return "top-k (the ids' second dimension) must be static";
  if (offsets.getDimSize(0) - 1 > 256)
    return "at most 256 experts are implemented (the index kernel's "
           "shared-memory table)";
  if (offsets.getElementType() !=
      cast<RankedTensorType>(op.getSlots().getType()).getElementType())
    return "offsets and slots must have the same integer type";
  return "";
}

/// Why the combine kernel cannot run `op`, or an empty string.
static std::string unsupportedReason(UnpermuteOp op) {
  auto rows = cast<RankedTensorType>(op.getRows().getType());
  auto result = cast<RankedTensorType>(op.getType());
  if (!rows.getElementType().isBF16() || !result.getElementType().isBF16())
    return "only bf16 rows and result are implemented";
  int64_t hidden = rows.getDimSize(1);
  if (!ShapedType::isDynamic(hidden) && hidden % 8 != 0)
    return "the hidden size must be a multiple of 8 (16-byte row chunks)";
  auto slots = cast<RankedTensorType>(op.getSlots().getType());
  if (ShapedType::isDynamic(slots.getDimSize(1)) || slots.getDimSize(1) > 64)
    return "top-k (the slots' second dimension) must be static and at most "
           "64";
  return "";
}

/// Why the quantize kernel cannot run `op`, or an empty string.
static std::string unsupportedReason(QuantizeOp op) {
  auto input = cast<RankedTensorType>(op.getInput().getType());
  if (!input.getElementType().isBF16() && !input.getElementType().isF32())
    return "only bf16 and f32 inputs are implemented";
  int64_t rank = input.getRank();
  if (rank != 2 && rank != 3)
    return "only 2-D [R, C] and 3-D [E, R, C] inputs are implemented";
  BlockScaledEncodingAttr encoding = op.getEncoding();
  // The verifier makes MX blocks [1, 32]; a 3-D input's leading extent is 1
  // unless the block spells one: then blocks would span experts.
  if (rank == 3 && encoding.getBlockExtent(0, rank) != 1)
    return "the blocks of a 3-D [E, R, C] input must stay within one [R, C] "
           "(block [1, br, bc] or [br, bc])";
  return unsupportedQuantizeBlock(encoding.getBlockExtent(rank - 2, rank),
                                  encoding.getBlockExtent(rank - 1, rank));
}

/// Why the runtime's layer.v1 (or, with quantized rows, layer_fp8.v1)
/// cannot launch `op`, or an empty string: it runs exactly the chain
/// --moe-fuse-layer builds, with the routing weight in the combine.
static std::string unsupportedReason(LayerOp op) {
  std::optional<LayerChain> chain = getLayerChain(op);
  if (!chain)
    return "the body must be moe.route, moe.permute, (moe.quantize, "
           "moe.dequantize,) moe.expert_mlp and moe.unpermute, in that "
           "order, the route's ids into the permute, its rows (through the "
           "quantize round trip) and offsets into the expert MLP, whose rows "
           "the unpermute combines with the permute's slots and the route's "
           "weights, yielded";
  if (chain->mlp.getRowScale())
    return "the expert MLP must not scale its rows (the combine applies the "
           "routing weight)";
  // Quantized rows: the expert MLP's own check refuses all but block FP8.
  return "";
}

/// Why the sm_90a kernel cannot run `op`, or an empty string.
static std::string unsupportedReason(GroupedMatmulOp op) {
  auto rowsType = cast<RankedTensorType>(op.getRows().getType());
  auto resultType = cast<RankedTensorType>(op.getType());
  if (!rowsType.getElementType().isBF16() ||
      !resultType.getElementType().isBF16())
    return "only bf16 rows, weights and result are implemented";
  if (std::string reason = unsupportedBias(op.getBias()); !reason.empty())
    return reason;
  if (!isDequantized(op.getRows()) && !isDequantized(op.getWeights()))
    return unsupportedK(rowsType.getDimSize(1));
  if (!getFP8Operands(op.getRows(), op.getWeights()))
    return "quantized operands are implemented as block FP8 or MXFP8: rows "
           "and weights both moe.dequantize of f8E4M3FN, with f32 scales in "
           "blocks [1, 128] of the rows and [128, 128] of each expert's "
           "weights, or with f8E8M0FNU scales in blocks [1, 32] and [1, 32]";
  // A static K is a multiple of the block (moe.dequantize verifies its
  // blocks); the runtime checks a dynamic one.
  return "";
}

/// The sm_90 limit of dynamic shared memory per block.
static constexpr int64_t kMaxDynamicSharedBytes = 227 * 1024;

/// The tiles the kernel builder implements: 4 wgmma k16 steps per stage;
/// normally 64 or 128 token rows (one warpgroup per 64) x 128 or 256
/// columns, with swap-AB one warpgroup on 64 columns x 8..64 token rows.
static LogicalResult verifyTile(ModuleOp module,
                                const GroupedMatmulTile &tile) {
  auto fail = [&]() { return mlir::emitError(module.getLoc()); };
  if (tile.tileK != 64 * 2 / tile.elementBytes())
    return fail() << "convert-moe-to-nvgpu: tile-k must be 64, got "
                  << tile.tileK;
  if (!tile.swapAB && ((tile.tileM != 64 && tile.tileM != 128) ||
                       (!tile.fp8() && tile.tileN != 128 && tile.tileN != 256)))
    return fail() << "convert-moe-to-nvgpu: without swap-ab the tile must be "
                     "64 or 128 rows x 128 or 256 columns x 64, got "
                  << tile.tileM << "x" << tile.tileN << "x" << tile.tileK;
  // FP8 tiles are 128 columns wide; block FP8's may be 192, but not where
  // an item is a whole [1, 128] output group (fp8-epilogue-quantize).
  bool wideBlockFP8 = tile.format == Format::FP8Block && !tile.quantizeOut;
  if (!tile.swapAB && tile.fp8() && tile.tileN != 128 &&
      (tile.tileN != 192 || !wideBlockFP8))
    return fail() << "convert-moe-to-nvgpu: an FP8 tile must be 128 columns "
                     "wide, or 192 for block FP8 without a quantized output, "
                     "got "
                  << tile.tileN;
  if (tile.swapAB &&
      (tile.tileN != 64 ||
       !llvm::is_contained(ArrayRef<int64_t>{8, 16, 32, 64}, tile.tileM)))
    return fail() << "convert-moe-to-nvgpu: swap-ab needs tile-n = 64 and "
                     "tile-m in {8, 16, 32, 64}, got tile-m = "
                  << tile.tileM << ", tile-n = " << tile.tileN;
  if (tile.cluster != 1 && tile.cluster != 2)
    return fail() << "convert-moe-to-nvgpu: 'cluster' must be 1 or 2, got "
                  << tile.cluster;
  if (tile.splitK != 1 && tile.splitK != 2)
    return fail() << "convert-moe-to-nvgpu: 'swap-ab-split-k' must be 0 "
                     "(chosen per GEMM), 1 or 2, got "
                  << tile.splitK;
  // Each warpgroup owns every split-th stage and refills its previous
  // step's after its next one: with fewer than two stages of its own, a step
  // would wait on loads issued after it.
  if (tile.kSplit() > 1 &&
      (tile.stages < 2 * tile.kSplit() || tile.stages % tile.kSplit()))
    return fail() << "convert-moe-to-nvgpu: swap-AB forms splitting K "
                     "between "
                  << tile.kSplit()
                  << " warpgroups need a multiple of it of at least "
                  << 2 * tile.kSplit() << " stages, got " << tile.stages;
  if (tile.stages < 1 || tile.dynamicSharedBytes() > kMaxDynamicSharedBytes)
    return fail() << "convert-moe-to-nvgpu: 'stages' (" << tile.stages
                  << ") must be at least 1 and fit 227 KiB of shared memory";
  return success();
}

/// `tile`, its pipeline trimmed to fit shared memory if it keeps more than
/// its stages there: a quantizing swap-AB tile's activation and f32 tiles
/// (after its deep pipeline, swapStagesFor), a widened MXFP8 tile's two
/// bf16 copies of a stage (2 stages at 128 x 128).
static GroupedMatmulTile fitStages(GroupedMatmulTile tile) {
  while ((tile.widened() || (tile.swapAB && tile.quantizeOut)) &&
         tile.stages > 1 && tile.dynamicSharedBytes() > kMaxDynamicSharedBytes)
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
  // Widening is for the normal (prefill) forms only.
  swapped.widen = false;
  swapped.splitK = splitK;
  return fitStages(swapped);
}

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
  }
  llvm_unreachable("unknown epilogue");
}

/// What a runtime needs to launch one grouped GEMM (docs/runtime-contract.md):
/// its shapes, ABI, epilogue and the kernels (`forms`) that together
/// compute it; `part` names it inside a fused op.
static DictionaryAttr launchInfo(Builder &b, Value rows, Value weights,
                                 Value offsets, const GroupedMatmulTile &tile,
                                 ArrayRef<Attribute> forms,
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
  } else {
    info.set("abi", b.getStringAttr("grouped_matmul.v3"));
  }
  info.set("epilogue", b.getStringAttr(epilogueName(tile.epilogue)));
  if (tile.quantizeOut)
    info.set("out", b.getStringAttr("f8E4M3FN"));
  info.set("activation",
           b.getStringAttr(!tile.gated()                           ? "none"
                           : tile.activation == Activation::GptOss ? "gptoss"
                                                                   : "silu"));
  info.set("bias", b.getStringAttr(!tile.biasType           ? "none"
                                   : tile.biasType.isBF16() ? "bf16"
                                                            : "f32"));
  info.set("experts", b.getI64IntegerAttr(size(weightsType.getDimSize(0))));
  info.set("n", b.getI64IntegerAttr(size(weightsType.getDimSize(1))));
  info.set("k", b.getI64IntegerAttr(size(weightsType.getDimSize(2))));
  info.set("max_rows",
           b.getI64IntegerAttr(ShapedType::isDynamic(numRows)
                                   ? kMaxLaunchRows
                                   : std::min(numRows, kMaxLaunchRows)));
  info.set("offsets", TypeAttr::get(offsetsType.getElementType()));
  info.set("kernels", b.getArrayAttr(forms));
  if (!part.empty())
    info.set("part", b.getStringAttr(part));
  return info.getDictionary(b.getContext());
}

/// The kernels that together compute one grouped GEMM of `op` with the
/// epilogue of `tile`: the forms --moe-swap-ab chose (its attributes on
/// `op`), each for the experts whose row count falls in its range (decided
/// on the device at run time).
static SmallVector<Attribute>
buildForms(OpBuilder &builder, gpu::GPUModuleOp kernels, Operation *op,
           const GroupedMatmulTile &tile, int64_t swapStages, int64_t swapSplit,
           Type offsetType) {
  SmallVector<Attribute> forms;
  auto addForm = [&](const GroupedMatmulTile &formTile, int64_t rowsMin,
                     int64_t rowsMax) {
    gpu::GPUFuncOp func = getOrBuildKernel(builder, kernels, op->getLoc(),
                                           fitStages(formTile), offsetType);
    forms.push_back(builder.getDictionaryAttr(
        {builder.getNamedAttr(
             "kernel",
             SymbolRefAttr::get(builder.getStringAttr(kKernelModuleName),
                                {FlatSymbolRefAttr::get(func)})),
         builder.getNamedAttr("rows_min", builder.getI64IntegerAttr(rowsMin)),
         builder.getNamedAttr("rows_max",
                              builder.getI64IntegerAttr(rowsMax))}));
  };
  auto maxRows = op->getAttrOfType<IntegerAttr>(kSwapABMaxRowsAttr);
  if (tile.swapAB) {
    GroupedMatmulTile swapped = tile;
    swapped.splitK = swapSplit;
    addForm(swapped, 1, kMaxLaunchRows);
  } else if (maxRows && op->hasAttr(kSwapABOnlyAttr)) {
    addForm(swapABTile(tile, maxRows.getInt(), swapStages, swapSplit), 1,
            kMaxLaunchRows);
  } else {
    int64_t swapRows = maxRows ? maxRows.getInt() : 0;
    if (swapRows > 0) {
      addForm(swapABTile(tile, swapRows, swapStages, swapSplit), 1, swapRows);
    }
    // A 128-row tile would be mostly padding for experts of at most 64
    // rows: they take one warpgroup's 64-row tile instead.
    int64_t firstRows = swapRows + 1;
    if (tile.tileM == 128 && swapRows < 64) {
      // FP8's 64-row form keeps 128 columns: one warpgroup holds them and
      // their products (bench/RESULTS.md, fp8-tile-n).
      int64_t columns = tile.fp8() ? 128 : tile.tileN;
      addForm(tile.withShape(64, columns, tile.stages, false), firstRows, 64);
      firstRows = 65;
    }
    addForm(tile, firstRows, kMaxLaunchRows);
  }
  return forms;
}

/// Reduction sizes from which the swap-AB forms take a deeper pipeline and
/// split K between two warpgroups.
static constexpr int64_t kLongK = 8192;

/// Warpgroups the swap-AB forms reducing over `k` (dynamic: -1 or
/// ShapedType::kDynamic) split K between: `fixed` when the user chose it
/// (not 0), else the cost model: two from kLongK, where decode runs few, long
/// work items (Mixtral's down projection at T = 1: 128 items of 14336 K for
/// 132 SMs, one CTA each) and one warpgroup's step rate bounds the stream
/// (bench/RESULTS.md); with shorter K there are more items than SMs.
static int64_t swapSplitFor(int64_t k, int64_t fixed) {
  // Any other choice than 0 is the user's; verifyTile refuses all but 1, 2.
  if (fixed != 0)
    return fixed;
  return !ShapedType::isDynamic(k) && k >= kLongK ? 2 : 1;
}

/// Pipeline stages of a swap-AB form reducing over `k` (dynamic: -1 or
/// ShapedType::kDynamic): `fixed` when the user chose it (> 0), else the
/// cost model: decode on a long K runs few, long work items (Mixtral's down
/// projection at T = 1: 128 items of 14336 K for 132 SMs), where 8 stages
/// keep more bytes in flight per CTA (-7 % for Mixtral's expert MLP at
/// T = 1); with shorter K there are more items than SMs, and 4 stages'
/// higher occupancy wins or ties (DeepSeek-V3's gate-up, K = 7168: +2.5 %
/// at T = 128 with 8; bench/RESULTS.md).
static int64_t swapStagesFor(int64_t k, int64_t stages, int64_t fixed,
                             bool quantizeOut) {
  if (fixed > 0)
    return fixed;
  // A quantizing gate-up's swap-AB item is a whole [1, 128] group (four
  // weight tiles back to back): a quarter of the plain form's CTAs, each
  // with a deeper pipeline. 8 stages measured best (bench/RESULTS.md): 16
  // leave one CTA per SM (Mixtral's 224 items at T = 1 then take two
  // waves); swapABTile trims what does not fit.
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

/// `tile` with `epilogue` and the element type of `bias` (null: none).
static GroupedMatmulTile epilogueTile(GroupedMatmulTile tile, Epilogue epilogue,
                                      Value bias) {
  tile.epilogue = epilogue;
  if (bias)
    tile.biasType = cast<RankedTensorType>(bias.getType()).getElementType();
  return tile;
}

/// Largest T a launch accepts: the static token count, else 2^31 - 1.
static int64_t maxTokens(int64_t tokens) {
  return ShapedType::isDynamic(tokens) ? kMaxLaunchRows
                                       : std::min(tokens, kMaxLaunchRows);
}

/// A routing, permutation or combine kernel as a form of its op's launch.
static DictionaryAttr kernelForm(OpBuilder &builder, gpu::GPUFuncOp func) {
  func->setAttr("moe.dynamic_shared_bytes", builder.getI64IntegerAttr(0));
  return builder.getDictionaryAttr(builder.getNamedAttr(
      "kernel", SymbolRefAttr::get(builder.getStringAttr(kKernelModuleName),
                                   {FlatSymbolRefAttr::get(func)})));
}

/// The kernel `name` of `kernels`, built by `build` on first use (ops with
/// the same parameters share a kernel: its name spells all of them).
static gpu::GPUFuncOp lookUpOrBuild(gpu::GPUModuleOp kernels, StringRef name,
                                    function_ref<gpu::GPUFuncOp()> build) {
  if (auto func = dyn_cast_or_null<gpu::GPUFuncOp>(
          SymbolTable::lookupSymbolIn(kernels, name)))
    return func;
  return build();
}

/// Builds (or reuses) the routing kernel of `op`; returns its moe.launch.
static DictionaryAttr routeLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels,
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
  info.set("kernels", builder.getArrayAttr(kernelForm(builder, func)));
  return info.getDictionary(builder.getContext());
}

/// The quantize of the rows of the moe.layer that holds `op` (its permute
/// or that quantize) when the permute's gather can do it (block FP8's
/// [1, 128] groups), or null.
static QuantizeOp getGatherQuantizedRows(Operation *op) {
  auto layer = dyn_cast_or_null<LayerOp>(op->getParentOp());
  std::optional<LayerChain> chain = layer ? getLayerChain(layer) : std::nullopt;
  if (!chain || !chain->rowsQuantize ||
      (op != chain->permute && op != chain->rowsQuantize) ||
      !isRowEncoding(chain->rowsQuantize.getEncoding(), Format::FP8Block))
    return {};
  return chain->rowsQuantize;
}

/// Builds (or reuses) the three kernels of `op` (count, index, then
/// gather); returns its moe.launch. With `quantize` the gather stores the
/// rows in e4m3 with [1, 128]-group f32 scales (`out`), and with
/// `scatterFrom` > 0 too a fourth kernel, the scatter over the tokens that
/// the runtime launches instead from `scatterFrom` tokens on.
static DictionaryAttr permuteLaunch(OpBuilder &builder,
                                    gpu::GPUModuleOp kernels, PermuteOp op,
                                    bool quantize, int64_t scatterFrom) {
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
  SmallVector<Attribute> kernelForms{kernelForm(builder, count),
                                     kernelForm(builder, index),
                                     kernelForm(builder, gather)};
  if (quantize && scatterFrom > 0)
    kernelForms.push_back(kernelForm(
        builder, lookUpOrBuild(kernels, spec.scatterKernelName(), [&] {
          return buildPermuteScatterKernel(builder, op.getLoc(), kernels, spec);
        })));
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
  return info.getDictionary(builder.getContext());
}

/// Builds (or reuses) the combine kernel of `op`; returns its moe.launch.
static DictionaryAttr
unpermuteLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels, UnpermuteOp op) {
  auto rows = cast<RankedTensorType>(op.getRows().getType());
  auto slots = cast<RankedTensorType>(op.getSlots().getType());
  UnpermuteKernelSpec spec;
  spec.topK = slots.getDimSize(1);
  spec.slotBits = slots.getElementType().getIntOrFloatBitWidth();
  spec.weighted = op.getWeights() != nullptr;
  gpu::GPUFuncOp func = lookUpOrBuild(kernels, spec.kernelName(), [&] {
    return buildUnpermuteKernel(builder, op.getLoc(), kernels, spec);
  });
  int64_t hidden = rows.getDimSize(1);
  NamedAttrList info;
  info.set("abi", builder.getStringAttr("unpermute.v2"));
  info.set("hidden", builder.getI64IntegerAttr(
                         ShapedType::isDynamic(hidden) ? -1 : hidden));
  info.set("top_k", builder.getI64IntegerAttr(spec.topK));
  info.set("slots", TypeAttr::get(slots.getElementType()));
  info.set("weighted", builder.getBoolAttr(spec.weighted));
  info.set("max_rows",
           builder.getI64IntegerAttr(maxTokens(slots.getDimSize(0))));
  info.set("kernels", builder.getArrayAttr(kernelForm(builder, func)));
  return info.getDictionary(builder.getContext());
}

/// Builds (or reuses) the kernel quantizing `input` with `encoding`;
/// returns its moe.launch (`part` names it inside a fused op).
static DictionaryAttr quantizeLaunch(OpBuilder &builder,
                                     gpu::GPUModuleOp kernels, Location loc,
                                     RankedTensorType input,
                                     BlockScaledEncodingAttr encoding,
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

namespace {
struct ConvertMoEToNVGPUPass
    : moe::impl::ConvertMoEToNVGPUBase<ConvertMoEToNVGPUPass> {
  using Base::Base;

  /// chip=sm_100a: the MXFP8 grouped GEMM on tcgen05, and nothing else.
  void runOnSm100(ModuleOp module) {
    SmallVector<GroupedMatmulOp> matmuls;
    bool failedAny = false;
    module.walk([&](Operation *op) {
      if (!isa<GroupedMatmulOp, ExpertMLPOp, RouteOp, UnpermuteOp, PermuteOp,
               LayerOp, QuantizeOp>(op))
        return;
      if (std::string reason = unsupportedReasonSm100(op); !reason.empty()) {
        op->emitOpError() << "cannot be lowered to sm_100a yet: " << reason;
        failedAny = true;
        return;
      }
      matmuls.push_back(cast<GroupedMatmulOp>(op));
    });
    if (failedAny)
      return signalPassFailure();
    if (matmuls.empty())
      return;
    OpBuilder builder(module.getBodyRegion());
    gpu::GPUModuleOp kernels = getOrCreateKernelModule(builder, module);
    Tcgen05GroupedMatmulTile tile;
    llvm::SmallPtrSet<Operation *, 8> fusedDequantizes;
    for (GroupedMatmulOp matmul : matmuls) {
      auto offsetsType = cast<RankedTensorType>(matmul.getOffsets().getType());
      Type offsetType = offsetsType.getElementType();
      gpu::GPUFuncOp func = lookUpOrBuild(
          kernels, tile.kernelName(offsetType), [&]() -> gpu::GPUFuncOp {
            gpu::GPUFuncOp built = buildTcgen05GroupedMatmulKernel(
                builder, matmul.getLoc(), kernels, tile, offsetType);
            built->setAttr(
                "moe.dynamic_shared_bytes",
                builder.getI64IntegerAttr(tile.dynamicSharedBytes()));
            built->setAttr("moe.tile", builder.getDenseI64ArrayAttr(
                                           {tile.tileM, tile.tileN, tile.tileK,
                                            tile.stages}));
            built->setAttr("moe.swap_ab", builder.getBoolAttr(false));
            return built;
          });
      auto rowsType = cast<RankedTensorType>(matmul.getRows().getType());
      auto weightsType = cast<RankedTensorType>(matmul.getWeights().getType());
      auto size = [](int64_t dim) {
        return ShapedType::isDynamic(dim) ? int64_t(-1) : dim;
      };
      int64_t numRows = rowsType.getDimSize(0);
      NamedAttrList info;
      info.set("abi", builder.getStringAttr("grouped_matmul_fp8.v1"));
      info.set("format", builder.getStringAttr("mxfp8"));
      info.set("epilogue", builder.getStringAttr("store"));
      info.set("activation", builder.getStringAttr("none"));
      info.set("bias", builder.getStringAttr("none"));
      info.set("experts",
               builder.getI64IntegerAttr(size(weightsType.getDimSize(0))));
      info.set("n", builder.getI64IntegerAttr(size(weightsType.getDimSize(1))));
      info.set("k", builder.getI64IntegerAttr(size(weightsType.getDimSize(2))));
      info.set("max_rows", builder.getI64IntegerAttr(
                               ShapedType::isDynamic(numRows)
                                   ? kMaxLaunchRows
                                   : std::min(numRows, kMaxLaunchRows)));
      info.set("offsets", TypeAttr::get(offsetType));
      info.set(
          "kernels",
          builder.getArrayAttr(builder.getDictionaryAttr(
              {builder.getNamedAttr(
                   "kernel",
                   SymbolRefAttr::get(builder.getStringAttr(kKernelModuleName),
                                      {FlatSymbolRefAttr::get(func)})),
               builder.getNamedAttr("rows_min", builder.getI64IntegerAttr(1)),
               builder.getNamedAttr(
                   "rows_max", builder.getI64IntegerAttr(kMaxLaunchRows))})));
      matmul->setAttr(kLaunchAttr, info.getDictionary(builder.getContext()));
      std::optional<BlockFP8Operands> mx =
          getMXFP8Operands(matmul.getRows(), matmul.getWeights());
      fusedDequantizes.insert(
          {mx->rows.getOperation(), mx->weights.getOperation()});
    }
    markFused(fusedDequantizes, builder);
  }

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
  static void markFused(const llvm::SmallPtrSetImpl<Operation *> &dequantizes,
                        OpBuilder &builder) {
    for (Operation *dequantize : dequantizes)
      if (llvm::all_of(dequantize->getUsers(), [](Operation *user) {
            return readsFP8(user->getAttr(kLaunchAttr));
          }))
        dequantize->setAttr(kFusedIntoLaunchAttr, builder.getUnitAttr());
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (chip == "sm_100a")
      return runOnSm100(module);
    if (chip != "sm_90a") {
      mlir::emitError(module.getLoc())
          << "convert-moe-to-nvgpu: no kernels for chip '" << chip
          << "' yet (sm_90a, and sm_100a for the MXFP8 grouped_matmul)";
      return signalPassFailure();
    }
    GroupedMatmulTile tile;
    tile.tileM = tileM;
    tile.tileN = tileN;
    tile.tileK = tileK;
    tile.stages = stages;
    tile.swapAB = swapAB;
    tile.cluster = cluster;
    using WarpSpecialize = GroupedMatmulTile::WarpSpecialize;
    std::optional<WarpSpecialize> specialize =
        llvm::StringSwitch<std::optional<WarpSpecialize>>(warpSpecialize)
            .Case("auto", WarpSpecialize::FP8)
            .Case("all", WarpSpecialize::All)
            .Case("none", WarpSpecialize::None)
            .Default(std::nullopt);
    if (!specialize) {
      mlir::emitError(module.getLoc())
          << "convert-moe-to-nvgpu: 'warp-specialize' must be auto, all or "
             "none, got '"
          << warpSpecialize << "'";
      return signalPassFailure();
    }
    tile.warpSpecialize = *specialize;
    if (failed(verifyTile(module, tile)))
      return signalPassFailure();
    if (swapABStages < 0) {
      mlir::emitError(module.getLoc())
          << "convert-moe-to-nvgpu: 'swap-ab-stages' must be 0 (chosen per "
             "GEMM) or positive, got "
          << static_cast<int64_t>(swapABStages);
      return signalPassFailure();
    }
    int64_t fixedSwapStages = swapABStages;
    if (fp8TileN != 128 && fp8TileN != 192) {
      mlir::emitError(module.getLoc())
          << "convert-moe-to-nvgpu: 'fp8-tile-n' must be 128 or 192, got "
          << static_cast<int64_t>(fp8TileN);
      return signalPassFailure();
    }
    if (fp8ScatterMinTokens < 0) {
      mlir::emitError(module.getLoc())
          << "convert-moe-to-nvgpu: 'fp8-scatter-min-tokens' must be 0 (no "
             "scatter kernel) or positive, got "
          << static_cast<int64_t>(fp8ScatterMinTokens);
      return signalPassFailure();
    }
    GroupedMatmulTile blockFP8 =
        fp8Tile(tile, Format::FP8Block, false, fp8TileN);
    GroupedMatmulTile quantizedGateUp =
        fp8Tile(tile, Format::FP8Block, false, fp8TileN, /*quantizeOut=*/true);
    quantizedGateUp.epilogue = Epilogue::SwiGLU;
    for (const GroupedMatmulTile &base :
         {tile, blockFP8,
          fitStages(fp8Tile(tile, Format::MXFP8, mxfp8Widen, fp8TileN)),
          quantizedGateUp}) {
      if (failed(verifyTile(module, base)))
        return signalPassFailure();
      for (int64_t k : {int64_t(1), kLongK})
        if (failed(verifyTile(
                module,
                swapABTile(base, 64,
                           swapStagesFor(k, tile.stages, fixedSwapStages,
                                         base.quantizeOut),
                           swapSplitFor(k, swapABSplitK)))))
          return signalPassFailure();
    }

    SmallVector<Operation *> ops;
    bool failedAny = false;
    module.walk([&](Operation *op) {
      std::string reason;
      if (auto matmul = dyn_cast<GroupedMatmulOp>(op))
        reason = unsupportedReason(matmul);
      else if (auto mlp = dyn_cast<ExpertMLPOp>(op))
        reason = unsupportedReason(mlp);
      else if (auto route = dyn_cast<RouteOp>(op))
        reason = unsupportedReason(route);
      else if (auto unpermute = dyn_cast<UnpermuteOp>(op))
        reason = unsupportedReason(unpermute);
      else if (auto permute = dyn_cast<PermuteOp>(op))
        reason = unsupportedReason(permute);
      else if (auto layer = dyn_cast<LayerOp>(op))
        reason = unsupportedReason(layer);
      else if (auto quantize = dyn_cast<QuantizeOp>(op))
        reason = unsupportedReason(quantize);
      else
        return;
      ops.push_back(op);
      if (!reason.empty()) {
        op->emitOpError() << "cannot be lowered to sm_90a yet: " << reason;
        failedAny = true;
      }
    });
    if (failedAny)
      return signalPassFailure();
    if (ops.empty())
      return;

    OpBuilder builder(module.getBodyRegion());
    gpu::GPUModuleOp kernels = getOrCreateKernelModule(builder, module);
    // Dequantizes the GEMM kernels read as FP8 values and scales.
    llvm::SmallPtrSet<Operation *, 8> fusedDequantizes;
    for (Operation *op : ops) {
      // The kernels of one GEMM of `op` and its moe.launch.
      auto gemmLaunch = [&](Value rows, Value weights, Value offsets,
                            const GroupedMatmulTile &withEpilogue,
                            StringRef part = "") {
        Type offsetType =
            cast<RankedTensorType>(offsets.getType()).getElementType();
        int64_t k = cast<RankedTensorType>(weights.getType()).getDimSize(2);
        auto forms = buildForms(builder, kernels, op, withEpilogue,
                                swapStagesFor(k, tile.stages, fixedSwapStages,
                                              withEpilogue.quantizeOut),
                                swapSplitFor(k, swapABSplitK), offsetType);
        return launchInfo(builder, rows, weights, offsets, withEpilogue, forms,
                          part);
      };
      if (auto matmul = dyn_cast<GroupedMatmulOp>(op)) {
        std::optional<BlockFP8Operands> fp8 =
            getFP8Operands(matmul.getRows(), matmul.getWeights());
        op->setAttr(
            kLaunchAttr,
            gemmLaunch(
                matmul.getRows(), matmul.getWeights(), matmul.getOffsets(),
                epilogueTile(
                    fp8 ? fp8Tile(tile, formatOf(*fp8), mxfp8Widen, fp8TileN)
                        : tile,
                    matmul.getRowScale() ? Epilogue::RowScale : Epilogue::Store,
                    matmul.getBias())));
        if (fp8)
          fusedDequantizes.insert(
              {fp8->rows.getOperation(), fp8->weights.getOperation()});
        continue;
      }
      if (auto route = dyn_cast<RouteOp>(op)) {
        op->setAttr(kLaunchAttr, routeLaunch(builder, kernels, route));
        continue;
      }
      // In an FP8 layer the gather stores the rows quantized: the quantize
      // between the permute and the expert MLP has no kernel of its own.
      if (auto permute = dyn_cast<PermuteOp>(op)) {
        op->setAttr(kLaunchAttr, permuteLaunch(builder, kernels, permute,
                                               fp8GatherQuantize &&
                                                   getGatherQuantizedRows(op),
                                               fp8ScatterMinTokens));
        continue;
      }
      if (auto unpermute = dyn_cast<UnpermuteOp>(op)) {
        op->setAttr(kLaunchAttr, unpermuteLaunch(builder, kernels, unpermute));
        continue;
      }
      if (auto quantize = dyn_cast<QuantizeOp>(op)) {
        if (fp8GatherQuantize && getGatherQuantizedRows(op) == quantize) {
          op->setAttr(kFusedIntoLaunchAttr, builder.getUnitAttr());
          continue;
        }
        op->setAttr(kLaunchAttr,
                    quantizeLaunch(builder, kernels, quantize.getLoc(),
                                   quantize.getInput().getType(),
                                   quantize.getEncoding()));
        continue;
      }
      // A layer launches its parts' kernels; --moe-extract-device-code
      // names the parts in its entry.
      if (auto layer = dyn_cast<LayerOp>(op)) {
        std::optional<LayerChain> chain = getLayerChain(layer);
        auto logits =
            cast<RankedTensorType>(chain->route.getLogits().getType());
        op->setAttr(kLaunchAttr,
                    builder.getDictionaryAttr(
                        {builder.getNamedAttr(
                             "abi", builder.getStringAttr(chain->rowsQuantize
                                                              ? "layer_fp8.v1"
                                                              : "layer.v1")),
                         builder.getNamedAttr(
                             "max_rows", builder.getI64IntegerAttr(maxTokens(
                                             logits.getDimSize(0))))}));
        continue;
      }
      // The fused expert MLP: the gate-up GEMM stores act(gate, up) (the
      // [M, 2I] intermediate never leaves registers), then the down GEMM
      // adds its bias and applies the routing weight in its epilogue.
      auto mlp = cast<ExpertMLPOp>(op);
      // FP8: the gate-up GEMM stores act(gate, up) in bf16 and a quantize
      // kernel makes it the down GEMM's FP8 rows, or in block FP8 with
      // fp8-epilogue-quantize its epilogue does (no bf16 round trip, but the
      // quantization is not overlapped with the MMAs yet: slower, RESULTS).
      std::optional<BlockFP8Operands> fp8 =
          getFP8Operands(mlp.getRows(), mlp.getGateUpWeights());
      const GroupedMatmulTile &base =
          fp8 ? fp8Tile(tile, formatOf(*fp8), mxfp8Widen, fp8TileN) : tile;
      bool quantizeOut =
          fp8 && formatOf(*fp8) == Format::FP8Block && fp8EpilogueQuantize;
      GroupedMatmulTile gateUp = epilogueTile(
          quantizeOut ? fp8Tile(tile, Format::FP8Block, false, fp8TileN,
                                /*quantizeOut=*/true)
                      : base,
          Epilogue::SwiGLU, mlp.getGateUpBias());
      if (mlp.getActivation() == GatedActivation::gptoss) {
        gateUp.activation = Activation::GptOss;
        gateUp.alpha = mlp.getAlphaOrDefault();
        gateUp.limit = mlp.getLimitOrDefault();
      }
      GroupedMatmulTile down = epilogueTile(
          base, mlp.getRowScale() ? Epilogue::RowScale : Epilogue::Store,
          mlp.getDownBias());
      SmallVector<Attribute, 3> parts = {
          gemmLaunch(mlp.getRows(), mlp.getGateUpWeights(), mlp.getOffsets(),
                     gateUp, "gate_up")};
      if (fp8 && !gateUp.quantizeOut) {
        auto rowsType = cast<RankedTensorType>(mlp.getRows().getType());
        int64_t intermediate =
            cast<RankedTensorType>(mlp.getDownWeights().getType())
                .getDimSize(2);
        parts.push_back(quantizeLaunch(
            builder, kernels, mlp.getLoc(),
            RankedTensorType::get({rowsType.getDimSize(0), intermediate},
                                  rowsType.getElementType()),
            mlp.getIntermediateAttr(), "intermediate"));
      }
      if (fp8) {
        auto downWeights = mlp.getDownWeights().getDefiningOp<DequantizeOp>();
        fusedDequantizes.insert({fp8->rows.getOperation(),
                                 fp8->weights.getOperation(), downWeights});
      }
      parts.push_back(gemmLaunch(mlp.getRows(), mlp.getDownWeights(),
                                 mlp.getOffsets(), down, "down"));
      op->setAttr(kLaunchAttr, builder.getArrayAttr(parts));
    }
    markFused(fusedDequantizes, builder);
  }
};
} // namespace
