//===- MoEAttrs.cpp - moe attributes and enums ---------------------------===//

#include "MoE/Dialect/MoEDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::moe;

#include "MoE/Dialect/MoEEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "MoE/Dialect/MoEAttrs.cpp.inc"

void MoEDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "MoE/Dialect/MoEAttrs.cpp.inc"
      >();
}

double mlir::moe::getMaxFiniteFP8(Type elementType) {
  return isa<Float8E5M2Type>(elementType) ? 57344.0 : 448.0;
}

RankedTensorType
mlir::moe::getBlockScalesType(RankedTensorType values,
                              BlockScaledEncodingAttr encoding) {
  SmallVector<int64_t> shape;
  for (auto [d, size] : llvm::enumerate(values.getShape()))
    shape.push_back(ShapedType::isDynamic(size)
                        ? size
                        : size / encoding.getBlockExtent(d, values.getRank()));
  return RankedTensorType::get(shape, encoding.getScale());
}

LogicalResult
BlockScaledEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                Type element, ArrayRef<int64_t> block,
                                Type scale) {
  if (!isa<Float8E4M3FNType, Float8E5M2Type>(element))
    return emitError() << "block_scaled element type must be f8E4M3FN or "
                          "f8E5M2, got "
                       << element;
  if (!isa<Float8E8M0FNUType, Float32Type>(scale))
    return emitError() << "block_scaled scale type must be f8E8M0FNU (MX) or "
                          "f32, got "
                       << scale;
  if (block.empty())
    return emitError() << "block_scaled block shape must not be empty";
  for (int64_t extent : block)
    if (extent < 1)
      return emitError() << "block_scaled block extents must be positive, got "
                         << extent;
  // OCP MX v1.0 fixes the block at 32 consecutive elements.
  if (isa<Float8E8M0FNUType>(scale)) {
    bool isOneByThirtyTwo =
        block.back() == 32 &&
        llvm::all_of(block.drop_back(), [](int64_t e) { return e == 1; });
    if (!isOneByThirtyTwo)
      return emitError() << "MX (f8E8M0FNU-scaled) encodings need blocks of "
                            "32 along the last dimension ([1, 32]), got ["
                         << block << "]";
  }
  return success();
}

int64_t BlockScaledEncodingAttr::getBlockExtent(int64_t dim,
                                                int64_t rank) const {
  int64_t lead = rank - static_cast<int64_t>(getBlock().size());
  return dim < lead ? 1 : getBlock()[dim - lead];
}

/// Whether `chip` has kernels of ours.
static bool isKnownChip(StringRef chip) {
  return chip == "sm_90a" || chip == "sm_100a";
}

static LogicalResult verifyChip(function_ref<InFlightDiagnostic()> emitError,
                                StringRef chip) {
  if (!isKnownChip(chip))
    return emitError() << "chip must be \"sm_90a\" or \"sm_100a\", got \""
                       << chip << "\"";
  return success();
}

LogicalResult GemmFormAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t rowsMin, int64_t rowsMax,
                                   int64_t tileM, int64_t tileN, int64_t tileK,
                                   int64_t stages, bool swapAB, int64_t splitK,
                                   int64_t cluster, bool warpSpecialized,
                                   bool widen, bool pingpong, bool tmaStore) {
  if (rowsMin < 1 || rowsMax < rowsMin || rowsMax > kMaxLaunchRows)
    return emitError() << "gemm_form rows must satisfy 1 <= rows_min <= "
                          "rows_max <= 2147483647, got ["
                       << rowsMin << ", " << rowsMax << "]";
  if (tileM < 1 || tileN < 1 || tileK < 1)
    return emitError() << "gemm_form tile extents must be positive, got "
                       << tileM << "x" << tileN << "x" << tileK;
  // Every form refills a stage only after the step that read it, so one
  // stage would make the next step wait on a load issued after it. Shared
  // memory bounds any real pipeline long before 64 stages; the bound keeps
  // the size arithmetic of a hand-written form far from overflow.
  if (stages < 2 || stages > 64)
    return emitError() << "gemm_form stages must be in [2, 64] (a pipelined "
                          "K loop needs two stages), got "
                       << stages;
  if (splitK != 1 && splitK != 2)
    return emitError() << "gemm_form split_k must be 1 or 2, got " << splitK;
  if (cluster != 1 && cluster != 2)
    return emitError() << "gemm_form cluster must be 1 or 2, got " << cluster;
  if (swapAB && (cluster != 1 || warpSpecialized || widen))
    return emitError() << "a swap_ab gemm_form has no cluster, producer "
                          "warpgroup or widening";
  if (!swapAB && splitK != 1)
    return emitError() << "split_k needs a swap_ab gemm_form";
  // Each consumer warpgroup holds a whole item: one or two wgmma's 64 rows.
  if (pingpong && ((tileM != 64 && tileM != 128) || swapAB || cluster != 1 ||
                   !warpSpecialized || widen))
    return emitError() << "a pingpong gemm_form has tile_m = 64 or 128 and a "
                          "producer warpgroup (warp_specialized), and no "
                          "swap_ab, cluster or widening";
  // Swap-AB stores out^T from an f32 tile: no staged bf16 rows to hand over.
  if (tmaStore && swapAB)
    return emitError() << "a swap_ab gemm_form has no tma_store";
  return success();
}

LogicalResult
GemmKernelsAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        StringRef chip, ArrayAttr forms, bool quantizeOutput) {
  if (failed(verifyChip(emitError, chip)))
    return failure();
  if (forms.empty())
    return emitError() << "gemm_kernels needs at least one form";
  int64_t next = 1;
  for (Attribute attr : forms) {
    auto form = dyn_cast<GemmFormAttr>(attr);
    if (!form)
      return emitError() << "gemm_kernels forms must be #moe.gemm_form, got "
                         << attr;
    if (form.getRowsMin() != next)
      return emitError() << "gemm_kernels forms must cover the row counts "
                            "in order without gaps: expected a form from "
                         << next << " rows, got one from " << form.getRowsMin();
    next = form.getRowsMax() + 1;
    bool sm100 = chip == "sm_100a";
    int64_t m = form.getTileM(), n = form.getTileN(), k = form.getTileK();
    if (sm100 && (m != 128 || n != 128 || k != 128 || form.getSwapAb() ||
                  form.getCluster() != 1 || form.getWarpSpecialized() ||
                  form.getWiden()))
      return emitError() << "the sm_100a grouped GEMM has one form: a "
                            "128x128x128 tile, no swap_ab, cluster, producer "
                            "warpgroup or widening";
    if (sm100)
      continue;
    if (k != 64 && k != 128)
      return emitError() << "sm_90a gemm_form tile_k must be 64 (bf16) or "
                            "128 (FP8), got "
                         << k;
    if (form.getSwapAb() &&
        (n != 64 || !llvm::is_contained({8, 16, 32, 64}, m)))
      return emitError() << "a swap_ab gemm_form needs tile_n = 64 and "
                            "tile_m in {8, 16, 32, 64}, got "
                         << m << "x" << n;
    if (!form.getSwapAb() && (!llvm::is_contained({64, 128}, m) ||
                              !llvm::is_contained({128, 192, 256}, n)))
      return emitError() << "a gemm_form without swap_ab needs tile_m in "
                            "{64, 128} and tile_n in {128, 192, 256}, got "
                         << m << "x" << n;
  }
  if (next != kMaxLaunchRows + 1)
    return emitError() << "gemm_kernels forms must reach 2147483647 rows, "
                          "the last ends at "
                       << next - 1;
  if (quantizeOutput && chip != "sm_90a")
    return emitError() << "quantize_output is implemented on sm_90a only";
  return success();
}

LogicalResult
ExpertMLPKernelsAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                             GemmKernelsAttr gateUp, GemmKernelsAttr down,
                             int64_t decode) {
  if (gateUp.getChip() != down.getChip())
    return emitError() << "expert_mlp_kernels parts must target one chip, got "
                       << gateUp.getChip() << " and " << down.getChip();
  if (down.getQuantizeOutput())
    return emitError() << "only the gate_up GEMM can quantize its output";
  if (decode < 0 || decode > 64)
    return emitError() << "expert_mlp_kernels decode must be in [0, 64] "
                          "(token rows of a swap-AB tile), got "
                       << decode;
  if (decode == 0)
    return success();
  if (gateUp.getChip() != "sm_90a" || gateUp.getQuantizeOutput())
    return emitError() << "expert_mlp_kernels decode needs sm_90a bf16 "
                          "GEMMs without a quantized output";
  // The decode kernel runs the first (swap-AB) forms' tiles for every
  // expert: they must take experts of up to `decode` rows.
  for (GemmKernelsAttr gemm : {gateUp, down}) {
    GemmFormAttr first = *gemm.getFormList().begin();
    if (!first.getSwapAb() || first.getRowsMax() < decode ||
        first.getTileM() < decode || first.getSplitK() != 1 ||
        first.getStages() != (*gateUp.getFormList().begin()).getStages() ||
        first.getTileM() != (*gateUp.getFormList().begin()).getTileM())
      return emitError()
             << "expert_mlp_kernels decode = " << decode
             << " needs both GEMMs' first forms swap-AB, of the same tile and "
                "stages, without split K, taking experts of up to "
             << decode << " rows in one tile";
  }
  return success();
}

LogicalResult
PermuteKernelsAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           StringRef chip, bool quantizeRows,
                           int64_t scatterFrom) {
  if (failed(verifyChip(emitError, chip)))
    return failure();
  if (scatterFrom < 0 || scatterFrom > kMaxLaunchRows)
    return emitError() << "permute_kernels scatter_from must be 0 (no "
                          "scatter kernel) or a token count in [1, "
                       << kMaxLaunchRows << "], got " << scatterFrom;
  if (scatterFrom > 0 && !quantizeRows)
    return emitError() << "the scatter kernel is a quantizing one: "
                          "scatter_from needs quantize_rows";
  return success();
}

LogicalResult KernelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef chip, bool fused) {
  return verifyChip(emitError, chip);
}
