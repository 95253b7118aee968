//===- KernelSupport.cpp - what the GPU kernels can run ------------------===//

#include "KernelSupport.h"
#include "QuantizeKernel.h"
#include "RoutingKernels.h"
#include "Tcgen05GroupedMatmulKernel.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::moe;

using Epilogue = GroupedMatmulTile::Epilogue;
using Activation = GroupedMatmulTile::Activation;
using Format = GroupedMatmulTile::Format;
using WeightsLayout = GroupedMatmulTile::WeightsLayout;

/// Why `k` cannot be a TMA-loaded reduction size, or an empty string.
static std::string unsupportedK(int64_t k) {
  if (!ShapedType::isDynamic(k) && k % 8 != 0)
    return "K must be a multiple of 8 (TMA row pitch is a multiple of 16 "
           "bytes)";
  return "";
}

/// Why weights [E, K, N] read N-major (their rows are N long, the TMA row
/// pitch) cannot be loaded, or an empty string.
static std::string unsupportedKnWeights(Value weights) {
  int64_t n = cast<RankedTensorType>(weights.getType()).getDimSize(2);
  if (!ShapedType::isDynamic(n) && n % 8 != 0)
    return "the weights' columns must be a multiple of 8 (their TMA row "
           "pitch is a multiple of 16 bytes)";
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

/// `rows` and `weights` both dequantized from e4m3 with scales of type
/// `Scale`, blocks `rowBlock` of the rows and `weightBlock` of each expert's
/// weights; nullopt otherwise.
template <typename Scale>
static std::optional<FP8Operands>
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
  return FP8Operands{rowsOp, weightsOp};
}

/// `rows` and `weights` as block-FP8 operands (f32 scales, [1, 128] and
/// [1, 128, 128]), or nullopt.
static std::optional<FP8Operands> getBlockFP8Operands(Value rows,
                                                      Value weights) {
  return getScaledOperands<Float32Type>(rows, weights, {1, 128}, {1, 128, 128});
}

/// The MXFP8 operands of a GEMM (OCP MX): rows and weights both dequantized
/// from e4m3 with one f8E8M0FNU scale per 32 K ([1, 32] of the rows,
/// [1, 1, 32] of each expert's weights).
std::optional<FP8Operands> mlir::moe::getMXFP8Operands(Value rows,
                                                       Value weights) {
  return getScaledOperands<Float8E8M0FNUType>(rows, weights, {1, 32},
                                              {1, 1, 32});
}

/// Rows and weights an sm_90a kernel reads quantized (block FP8 or MXFP8),
/// or nullopt.
std::optional<FP8Operands> mlir::moe::getFP8Operands(Value rows,
                                                     Value weights) {
  if (auto blocks = getBlockFP8Operands(rows, weights))
    return blocks;
  return getMXFP8Operands(rows, weights);
}

/// The kernel format of quantized operands (their weights' scale type
/// tells the two apart).
Format mlir::moe::formatOf(FP8Operands operands) {
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

static std::string unsupportedQuantize(RankedTensorType input,
                                       BlockScaledEncodingAttr encoding);

/// Why the sm_90a kernels cannot run `op` with quantized operands, or an
/// empty string: both GEMMs in block FP8 or both in MXFP8, the intermediate
/// quantized to their row format between them.
static std::string unsupportedQuantizedReason(ExpertMLPOp op) {
  std::optional<FP8Operands> gateUp =
      getFP8Operands(op.getRows(), op.getGateUpWeights());
  std::optional<FP8Operands> down =
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
  } else if (BlockScaledEncodingAttr inter = op.getIntermediateAttr()) {
    // bf16 GEMMs: the activation's round trip (the quantize kernel's) runs
    // in place between them.
    auto rows = cast<RankedTensorType>(op.getRows().getType());
    std::string reason = unsupportedQuantize(
        RankedTensorType::get({rows.getDimSize(0), ShapedType::kDynamic},
                              rows.getElementType()),
        inter);
    if (!reason.empty())
      return "the round trip of the 'intermediate' between the bf16 GEMMs: " +
             reason;
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
  if (op.getTopK() + op.getSharedSlots() > 64)
    return "top-k plus the shared slots must be at most 64";
  if (Value gate = op.getSharedGate())
    if (!cast<RankedTensorType>(gate.getType()).getElementType().isBF16() ||
        !cast<RankedTensorType>(op.getSharedTokens().getType())
             .getElementType()
             .isBF16())
      return "only bf16 shared gate tokens and weights are implemented";
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
  if (offsets.getDimSize(0) - 1 > kPermuteMaxExperts)
    return "at most 512 experts are implemented (the index kernel's "
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

/// Why the quantize kernel cannot quantize `input` with `encoding`, or an
/// empty string.
static std::string unsupportedQuantize(RankedTensorType input,
                                       BlockScaledEncodingAttr encoding) {
  if (!input.getElementType().isBF16() && !input.getElementType().isF32())
    return "only bf16 and f32 inputs are implemented";
  int64_t rank = input.getRank();
  if (rank != 2 && rank != 3)
    return "only 2-D [R, C] and 3-D [E, R, C] inputs are implemented";
  // The verifier makes MX blocks [1, 32]; a 3-D input's leading extent is 1
  // unless the block spells one: then blocks would span experts.
  if (rank == 3 && encoding.getBlockExtent(0, rank) != 1)
    return "the blocks of a 3-D [E, R, C] input must stay within one [R, C] "
           "(block [1, br, bc] or [br, bc])";
  return unsupportedQuantizeBlock(encoding.getBlockExtent(rank - 2, rank),
                                  encoding.getBlockExtent(rank - 1, rank));
}

static std::string unsupportedReason(QuantizeOp op) {
  return unsupportedQuantize(op.getInput().getType(), op.getEncoding());
}

/// The round trip is the quantize kernel's: the same inputs and blocks.
static std::string unsupportedReason(FakeQuantizeOp op) {
  return unsupportedQuantize(op.getInput().getType(), op.getEncoding());
}

/// Why the runtime's layer.v1 (or, with quantized rows, layer_fp8.v1)
/// cannot launch `op`, or an empty string: it runs exactly the chain
/// --moe-fuse-layer builds, with the routing weight in the combine.
static std::string unsupportedReason(LayerOp op) {
  for (Operation &inner : op.getBody().front())
    if (isa<SharedMLPOp>(inner) ||
        (isa<UnpermuteOp>(inner) && cast<UnpermuteOp>(inner).getShared()))
      return "a shared expert (moe.shared_mlp, or an unpermute with a "
             "'shared' addend) runs in layer.v1 as routed experts: run "
             "--moe-route-shared-experts first";
  std::optional<LayerChain> chain = getLayerChain(op);
  if (!chain)
    return "the body must be (moe.route,) moe.permute, (moe.quantize, "
           "moe.dequantize, or moe.fake_quantize,) moe.expert_mlp and "
           "moe.unpermute, in that order, the route's ids (or ids from "
           "outside) into the permute, its rows (through the quantize round "
           "trip) and offsets into the "
           "expert MLP, whose rows the unpermute combines with the permute's "
           "slots and the route's weights (or weights from outside), "
           "yielded";
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
  if (op.getKnWeights()) {
    if (isDequantized(op.getRows()) || isDequantized(op.getWeights()))
      return "weights that lie [E, K, N] (kn_weights) are implemented for "
             "bf16 only";
    if (std::string reason = unsupportedKnWeights(op.getWeights());
        !reason.empty())
      return reason;
  }
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

/// Why the sm_90a kernel cannot run `op`, or an empty string: the forward's
/// bf16 GEMM with the weights read N-major.
static std::string unsupportedReason(GroupedDgradOp op) {
  // (An act_grad input has the result's element type: the op verifies it.)
  for (Value v : {op.getGrad(), op.getWeights(), op.getResult()})
    if (!cast<RankedTensorType>(v.getType()).getElementType().isBF16())
      return "only bf16 gradients, weights and result are implemented";
  // Both are TMA row pitches: the gradient's rows and the weights' rows.
  int64_t reduction =
      cast<RankedTensorType>(op.getGrad().getType()).getDimSize(1);
  if (!ShapedType::isDynamic(reduction) && reduction % 8 != 0)
    return "the gradient's columns (the reduction) must be a multiple of 8 "
           "(TMA row pitch is a multiple of 16 bytes)";
  return unsupportedKnWeights(op.getWeights());
}

/// Why the sm_90a weight-gradient kernel cannot run `op`, or an empty string.
static std::string unsupportedReason(GroupedWgradOp op) {
  for (Value v : {op.getGrad(), op.getRows(), op.getWeightGrad()})
    if (!cast<RankedTensorType>(v.getType()).getElementType().isBF16())
      return "only bf16 gradients, rows and weight gradient are implemented";
  if (Value bias = op.getBiasGrad();
      bias && !isa<Float32Type, BFloat16Type>(
                  cast<RankedTensorType>(bias.getType()).getElementType()))
    return "only f32 and bf16 bias gradients are implemented";
  // Both are TMA row pitches.
  for (Value v : {op.getGrad(), op.getRows()}) {
    int64_t columns = cast<RankedTensorType>(v.getType()).getDimSize(1);
    if (!ShapedType::isDynamic(columns) && columns % 8 != 0)
      return "the gradient's and the rows' columns must be multiples of 8 "
             "(TMA row pitch is a multiple of 16 bytes)";
  }
  return "";
}

/// Why the swiglu_grad kernel cannot run `op`, or an empty string.
static std::string unsupportedReason(SwiGLUGradOp op) {
  for (Value v : {op.getInput(), op.getGrad(), op.getResult()})
    if (!cast<RankedTensorType>(v.getType()).getElementType().isBF16())
      return "only bf16 inputs, gradients and result are implemented";
  int64_t width = cast<RankedTensorType>(op.getGrad().getType()).getDimSize(1);
  if (!ShapedType::isDynamic(width) && width % 8 != 0)
    return "the gradient's columns must be a multiple of 8 (16-byte vectors)";
  return "";
}

/// Why the swiglu kernel (the train forward's activation of a saved gate-up
/// output) cannot run `op`, or an empty string.
static std::string unsupportedReason(SwiGLUOp op) {
  for (Value v : {op.getInput(), op.getResult()})
    if (!cast<RankedTensorType>(v.getType()).getElementType().isBF16())
      return "only bf16 inputs and result are implemented";
  if (op.getScale())
    return "a per-row scale has no kernel (the expert MLP's epilogue applies "
           "it)";
  int64_t width = cast<RankedTensorType>(op.getType()).getDimSize(1);
  if (!ShapedType::isDynamic(width) && width % 8 != 0)
    return "the result's columns must be a multiple of 8 (16-byte vectors)";
  return "";
}

/// Why the unpermute_grad kernels cannot run `op`, or an empty string.
static std::string unsupportedReason(UnpermuteGradOp op) {
  for (Value v : {op.getGrad(), op.getRows(), op.getRowsGrad()})
    if (!cast<RankedTensorType>(v.getType()).getElementType().isBF16())
      return "only bf16 gradients, rows and row gradients are implemented";
  int64_t hidden = cast<RankedTensorType>(op.getGrad().getType()).getDimSize(1);
  if (!ShapedType::isDynamic(hidden) && hidden % 8 != 0)
    return "the hidden size must be a multiple of 8 (16-byte vectors)";
  if (ShapedType::isDynamic(
          cast<RankedTensorType>(op.getSlots().getType()).getDimSize(1)))
    return "top-k (the slots' columns) must be static";
  return "";
}

/// Why the route_grad kernel cannot run `op`, or an empty string: one warp
/// per token, a lane per pair.
static std::string unsupportedReason(RouteGradOp op) {
  auto logits = cast<RankedTensorType>(op.getLogits().getType());
  if (!logits.getElementType().isF32() && !logits.getElementType().isBF16())
    return "only f32 and bf16 logits are implemented";
  if (cast<RankedTensorType>(op.getType()).getElementType() !=
      logits.getElementType())
    return "the result must have the logits' element type";
  int64_t experts = logits.getDimSize(1);
  if (ShapedType::isDynamic(experts) || experts > 512)
    return "the expert count must be static and at most 512";
  int64_t k = cast<RankedTensorType>(op.getExpertIds().getType()).getDimSize(1);
  if (ShapedType::isDynamic(k) || k > 32)
    return "top-k must be static and at most 32 (a lane per pair)";
  return "";
}

QuantizeOp mlir::moe::getGatherQuantizedRows(Operation *op) {
  auto layer = dyn_cast_or_null<LayerOp>(op->getParentOp());
  std::optional<LayerChain> chain = layer ? getLayerChain(layer) : std::nullopt;
  if (!chain || !chain->rowsQuantize ||
      (op != chain->permute && op != chain->rowsQuantize) ||
      !isRowEncoding(chain->rowsQuantize.getEncoding(), Format::FP8Block))
    return {};
  return chain->rowsQuantize;
}

FakeQuantizeOp mlir::moe::getGatherRoundTripRows(Operation *op) {
  auto layer = dyn_cast_or_null<LayerOp>(op->getParentOp());
  std::optional<LayerChain> chain = layer ? getLayerChain(layer) : std::nullopt;
  if (!chain || !chain->rowsRoundTrip ||
      (op != chain->permute && op != chain->rowsRoundTrip) ||
      !chain->rowsRoundTrip.getEncoding().isMX())
    return {};
  return chain->rowsRoundTrip;
}

std::string mlir::moe::missingKernelReason(Operation *op) {
  if (isa<SharedMLPOp, SharedMLPGradOp>(op))
    return "the shared expert runs on the GPU as routed experts of its "
           "layer (--moe-route-shared-experts) or, in a moe.program, as "
           "grouped ops of one group (--moe-expand-shared-mlp); "
           "--moe-gpu-pipeline runs both";
  return "";
}

bool mlir::moe::hasKernels(Operation *op) {
  return isa<GroupedMatmulOp, GroupedDgradOp, GroupedWgradOp, SwiGLUGradOp,
             SwiGLUOp, UnpermuteGradOp, RouteGradOp, ExpertMLPOp, RouteOp,
             UnpermuteOp, PermuteOp, LayerOp, QuantizeOp, FakeQuantizeOp>(op);
}

std::string mlir::moe::unsupportedReason(Operation *op, StringRef chip) {
  if (chip == "sm_100a")
    return unsupportedReasonSm100(op);
  return llvm::TypeSwitch<Operation *, std::string>(op)
      .Case<GroupedMatmulOp, GroupedDgradOp, GroupedWgradOp, SwiGLUGradOp,
            SwiGLUOp, UnpermuteGradOp, RouteGradOp, ExpertMLPOp, RouteOp,
            UnpermuteOp, PermuteOp, LayerOp, QuantizeOp, FakeQuantizeOp>(
          [](auto concrete) { return ::unsupportedReason(concrete); })
      .Default([](Operation *) { return std::string("no kernels"); });
}

int64_t GemmPart::k() const {
  return cast<RankedTensorType>(weights.getType())
      .getDimSize(weightsKN() ? 1 : 2);
}

bool GemmPart::outRowsAligned() const {
  int64_t n =
      cast<RankedTensorType>(weights.getType()).getDimSize(weightsKN() ? 2 : 1);
  if (ShapedType::isDynamic(n))
    return false;
  int64_t columns = epilogue == Epilogue::SwiGLU           ? n / 2
                    : epilogue == Epilogue::ActivationGrad ? 2 * n
                                                           : n;
  return columns % 8 == 0;
}

/// The element type of `bias`, or null.
static Type biasElementType(Value bias) {
  return bias ? cast<RankedTensorType>(bias.getType()).getElementType()
              : Type();
}

SmallVector<GemmPart, 2> mlir::moe::getGemmParts(Operation *op,
                                                 bool quantizeGateUp) {
  if (auto dgrad = dyn_cast<GroupedDgradOp>(op)) {
    // grad [M, N] . weights[e] [N, K]: the gradients are the K-major rows,
    // the forward's weights the N-major B.
    GemmPart part;
    part.rows = dgrad.getGrad();
    part.weights = dgrad.getWeights();
    part.offsets = dgrad.getOffsets();
    part.weightsLayout = WeightsLayout::KN;
    if (dgrad.getActInput()) {
      part.epilogue = Epilogue::ActivationGrad;
      if (dgrad.getActivation() == GatedActivation::gptoss) {
        part.activation = Activation::GptOss;
        part.alpha = dgrad.getAlphaOrDefault();
        part.limit = dgrad.getLimitOrDefault();
      }
    }
    return {part};
  }
  if (auto matmul = dyn_cast<GroupedMatmulOp>(op)) {
    GemmPart part;
    part.rows = matmul.getRows();
    part.weights = matmul.getWeights();
    part.offsets = matmul.getOffsets();
    if (matmul.getKnWeights())
      part.weightsLayout = WeightsLayout::KN;
    if (std::optional<FP8Operands> fp8 =
            getFP8Operands(part.rows, part.weights))
      part.format = formatOf(*fp8);
    part.epilogue = matmul.getRowScale() ? Epilogue::RowScale : Epilogue::Store;
    part.biasType = biasElementType(matmul.getBias());
    return {part};
  }
  auto mlp = cast<ExpertMLPOp>(op);
  // The gate-up GEMM stores act(gate, up) (the [M, 2I] intermediate never
  // leaves registers), then the down GEMM adds its bias and applies the
  // routing weight in its epilogue.
  GemmPart gateUp;
  gateUp.name = "gate_up";
  gateUp.rows = mlp.getRows();
  gateUp.weights = mlp.getGateUpWeights();
  gateUp.offsets = mlp.getOffsets();
  if (std::optional<FP8Operands> fp8 =
          getFP8Operands(mlp.getRows(), mlp.getGateUpWeights()))
    gateUp.format = formatOf(*fp8);
  GemmPart down = gateUp;
  down.name = "down";
  down.weights = mlp.getDownWeights();
  gateUp.epilogue = Epilogue::SwiGLU;
  gateUp.biasType = biasElementType(mlp.getGateUpBias());
  gateUp.quantizeOut = quantizeGateUp && gateUp.format == Format::FP8Block;
  // bf16 GEMMs of an MXFP8 intermediate ([1, 32] blocks, as the verifier
  // makes MX blocks): the epilogue makes its round trip.
  BlockScaledEncodingAttr inter = mlp.getIntermediateAttr();
  if (quantizeGateUp && gateUp.format == Format::BF16 && inter && inter.isMX())
    gateUp.roundTripOut = inter.getElement();
  if (mlp.getActivation() == GatedActivation::gptoss) {
    gateUp.activation = Activation::GptOss;
    gateUp.alpha = mlp.getAlphaOrDefault();
    gateUp.limit = mlp.getLimitOrDefault();
  }
  down.epilogue = mlp.getRowScale() ? Epilogue::RowScale : Epilogue::Store;
  down.biasType = biasElementType(mlp.getDownBias());
  return {gateUp, down};
}

/// The tiles the kernel builder implements: 4 wgmma k16 steps per stage;
/// normally 64 or 128 token rows (one warpgroup per 64) x 128 or 256
/// columns, with swap-AB one warpgroup on 64 columns x 8..64 token rows.
LogicalResult mlir::moe::verifyTile(function_ref<InFlightDiagnostic()> fail,
                                    const GroupedMatmulTile &tile,
                                    StringRef stagesName) {
  if (tile.tileK != 64 * 2 / tile.elementBytes())
    return fail() << "tile-k must be 64, got " << tile.tileK;
  if (!tile.swapAB && ((tile.tileM != 64 && tile.tileM != 128) ||
                       (!tile.fp8() && tile.tileN != 128 && tile.tileN != 256)))
    return fail() << "without swap-ab the tile must be "
                     "64 or 128 rows x 128 or 256 columns x 64, got "
                  << tile.tileM << "x" << tile.tileN << "x" << tile.tileK;
  // FP8 tiles are 128 columns wide; block FP8's may be 192, but not where
  // an item is a whole [1, 128] output group (fp8-epilogue-quantize).
  bool wideBlockFP8 = tile.format == Format::FP8Block && !tile.quantizeOut;
  if (!tile.swapAB && tile.fp8() && tile.tileN != 128 &&
      (tile.tileN != 192 || !wideBlockFP8))
    return fail() << "an FP8 tile must be 128 columns "
                     "wide, or 192 for block FP8 without a quantized output, "
                     "got "
                  << tile.tileN;
  if (tile.swapAB &&
      (tile.tileN != 64 ||
       !llvm::is_contained(ArrayRef<int64_t>{8, 16, 32, 64}, tile.tileM)))
    return fail() << "swap-ab needs tile-n = 64 and "
                     "tile-m in {8, 16, 32, 64}, got tile-m = "
                  << tile.tileM << ", tile-n = " << tile.tileN;
  // Ping-pong items are whole tiles through the staging epilogue.
  if (tile.pingpong &&
      (tile.fp8() || tile.swapAB || (tile.tileM != 64 && tile.tileM != 128) ||
       tile.quantizeOut || tile.clusterSize() > 1))
    return fail() << "a ping-pong form is a bf16 64- or 128-row tile without "
                     "swap-AB, cluster or quantized output";
  if (tile.pingpong && tile.tileM == 128 && !tile.twoRowGroupsFit())
    return fail() << "a 128-row ping-pong form has at most 128 columns and no "
                     "activation's gradient, got "
                  << tile.tileN << " columns"
                  << (tile.activationGrad() ? " with an activation's gradient"
                                            : "");
  // The bias is added per output column in the epilogue, whatever the
  // weights' layout (moe.grouped_matmul with kn_weights: GPT-OSS's).
  if (tile.weightsKN() &&
      (tile.fp8() || tile.swapAB ||
       (tile.epilogue != Epilogue::Store &&
        tile.epilogue != Epilogue::ActivationGrad) ||
       (tile.biasType && tile.activationGrad()) || tile.quantizeOut))
    return fail() << "N-major weights (moe.grouped_dgrad, kn_weights) are "
                     "implemented for the bf16 normal form with a plain store "
                     "(and a bias) or an activation's gradient only";
  if (tile.activationGrad() && !tile.weightsKN())
    return fail() << "an activation's gradient epilogue is moe.grouped_dgrad's "
                     "(N-major weights) only";
  if (tile.activationGrad() && tile.clusterSize() > 1)
    return fail() << "an activation's gradient epilogue runs on one CTA: its "
                     "entry (planned.v1) has no cluster kernels";
  // Its inputs stay in registers through the mainloop, beside the
  // accumulator: 64 a thread at 128 columns.
  if (tile.activationGrad() && tile.tileN != 128)
    return fail() << "an activation's gradient epilogue needs tile-n = 128 "
                     "(the tile's inputs are held in registers), got "
                  << tile.tileN;
  if (tile.cluster != 1 && tile.cluster != 2)
    return fail() << "'cluster' must be 1 or 2, got " << tile.cluster;
  if (tile.splitK != 1 && tile.splitK != 2)
    return fail() << "'swap-ab-split-k' must be 0 "
                     "(chosen per GEMM), 1 or 2, got "
                  << tile.splitK;
  // Every form refills a stage only after the step that used it: with one
  // stage the next step would wait on a load issued after it (the refill
  // of the normal form, the producer's wait for an empty stage of the
  // warp-specialized ones). Beyond kMaxStages nothing fits; checking the
  // bound first keeps the byte count below exact.
  if (tile.stages < kMinStages || tile.stages > kMaxStages)
    return fail() << "'" << stagesName << "' must be in [" << kMinStages << ", "
                  << kMaxStages << "], got " << tile.stages
                  << " (a pipelined K loop refills a stage after the step "
                     "that read it, so it needs two; more never fit "
                     "227 KiB of shared memory)";
  // Each warpgroup owns every split-th stage and refills its previous
  // step's after its next one: with fewer than two stages of its own, a step
  // would wait on loads issued after it.
  if (tile.kSplit() > 1 &&
      (tile.stages < 2 * tile.kSplit() || tile.stages % tile.kSplit()))
    return fail() << "swap-AB forms splitting K between " << tile.kSplit()
                  << " warpgroups need '" << stagesName
                  << "' to be a multiple of " << tile.kSplit()
                  << " of at least " << 2 * tile.kSplit() << ", got "
                  << tile.stages;
  if (tile.dynamicSharedBytes() > kMaxDynamicSharedBytes) {
    GroupedMatmulTile fewer = tile;
    int64_t fits = 0;
    for (fewer.stages = kMinStages; fewer.stages < tile.stages; ++fewer.stages)
      if (fewer.dynamicSharedBytes() <= kMaxDynamicSharedBytes)
        fits = fewer.stages;
    StringRef format = tile.format == Format::BF16       ? "bf16"
                       : tile.format == Format::FP8Block ? "block-FP8"
                                                         : "MXFP8";
    InFlightDiagnostic diag = fail();
    diag << "'" << stagesName << "' (" << tile.stages << "): the " << format
         << " " << tile.tileM << "x" << tile.tileN << "x" << tile.tileK
         << (tile.swapAB ? " swap-AB" : "") << " form needs "
         << tile.dynamicSharedBytes() << " bytes of shared memory, more than "
         << "the 227 KiB (" << kMaxDynamicSharedBytes << ") of a block; ";
    if (fits == 0)
      return diag << "it does not fit with any stage count";
    return diag << "it fits " << kMinStages << ".." << fits << " stages";
  }
  return success();
}

/// Largest T a launch accepts: the static token count, else 2^31 - 1.
int64_t mlir::moe::maxTokens(int64_t tokens) {
  return ShapedType::isDynamic(tokens) ? kMaxLaunchRows
                                       : std::min(tokens, kMaxLaunchRows);
}

/// A routing, permutation or combine kernel as a form of its op's launch.
DictionaryAttr mlir::moe::kernelForm(OpBuilder &builder, gpu::GPUFuncOp func) {
  func->setAttr("moe.dynamic_shared_bytes", builder.getI64IntegerAttr(0));
  return builder.getDictionaryAttr(builder.getNamedAttr(
      "kernel", SymbolRefAttr::get(builder.getStringAttr(kKernelModuleName),
                                   {FlatSymbolRefAttr::get(func)})));
}

/// The kernel `name` of `kernels`, built by `build` on first use (ops with
/// the same parameters share a kernel: its name spells all of them).
gpu::GPUFuncOp mlir::moe::lookUpOrBuild(gpu::GPUModuleOp kernels,
                                        StringRef name,
                                        function_ref<gpu::GPUFuncOp()> build) {
  if (auto func = dyn_cast_or_null<gpu::GPUFuncOp>(
          SymbolTable::lookupSymbolIn(kernels, name)))
    return func;
  return build();
}
