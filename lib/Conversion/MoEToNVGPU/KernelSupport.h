//===- KernelSupport.h - what the GPU kernels can run ------------*- C++
//-*-===//
//
// Shared by --moe-select-kernels (which chooses kernels) and
// --convert-moe-to-nvgpu (which builds them): which moe ops have kernels,
// which operand formats they read, and the grouped GEMMs an op consists of.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONVERSION_MOETONVGPU_KERNELSUPPORT_H
#define MOE_CONVERSION_MOETONVGPU_KERNELSUPPORT_H

#include "GroupedMatmulKernel.h"
#include "MoE/Dialect/MoEDialect.h"

#include <optional>
#include <string>

namespace mlir::moe {

/// The FP8 operands of a GEMM that a kernel reads quantized: the
/// dequantizes of its rows and of its weights.
struct FP8Operands {
  DequantizeOp rows, weights;
};

/// Rows and weights an sm_90a kernel reads quantized (block FP8: e4m3 with
/// f32 scales in [1, 128] and [1, 128, 128] blocks; MXFP8: e4m3 with E8M0
/// scales in [1, 32] and [1, 1, 32]), or nullopt.
std::optional<FP8Operands> getFP8Operands(Value rows, Value weights);
/// The MXFP8 operands of a GEMM only, or nullopt.
std::optional<FP8Operands> getMXFP8Operands(Value rows, Value weights);
/// The kernel format of quantized operands.
GroupedMatmulTile::Format formatOf(FP8Operands operands);

/// The quantize of the rows of the moe.layer that holds `op` (its permute
/// or that quantize) when the permute's gather can do it (block FP8's
/// [1, 128] groups), or null.
QuantizeOp getGatherQuantizedRows(Operation *op);
/// The MXFP8 round trip of the rows of the bf16 moe.layer that holds `op`
/// (its permute or that moe.fake_quantize), which the gather can make, or
/// null.
FakeQuantizeOp getGatherRoundTripRows(Operation *op);

/// Why `op`, a moe op the GPU path does not implement at all yet
/// (moe.shared_mlp), cannot be compiled for any chip, or an empty string.
std::string missingKernelReason(Operation *op);

/// Whether `op` is a moe op that has kernels (or, moe.layer, launches its
/// body's).
bool hasKernels(Operation *op);

/// Why the kernels for `chip` cannot run `op` (an op with hasKernels), or
/// an empty string.
std::string unsupportedReason(Operation *op, StringRef chip);

/// One grouped GEMM of a moe op: its operands and what it computes (format,
/// epilogue: the op decides them, not the kernel choice).
struct GemmPart : GroupedMatmulSemantics {
  /// The part's name inside a fused op ("" for a moe.grouped_matmul).
  StringRef name;
  Value rows, weights, offsets;

  /// `shape` (tile, stages, forms' knobs) computing this part.
  GroupedMatmulTile apply(GroupedMatmulTile shape) const {
    static_cast<GroupedMatmulSemantics &>(shape) = *this;
    return shape;
  }
  /// The reduction size K (dynamic: ShapedType::kDynamic).
  int64_t k() const;
  /// Whether out's columns are a static multiple of 8: its rows 16-byte
  /// aligned, as an out tensor map (tmaStore) needs.
  bool outRowsAligned() const;
};

/// The grouped GEMMs of a moe.grouped_matmul (one) or a moe.expert_mlp
/// (gate_up, down); `quantizeGateUp` makes a block-FP8 gate-up store its
/// activation as e4m3.
SmallVector<GemmPart, 2> getGemmParts(Operation *op, bool quantizeGateUp);

/// The sm_90 limit of dynamic shared memory per block.
inline constexpr int64_t kMaxDynamicSharedBytes = 227 * 1024;

/// The pipeline depths of the sm_90a GEMM forms: two at least (a stage is
/// refilled only after the step that read it), and no more than any tile
/// could fit in shared memory (the bound also keeps the byte counts exact).
inline constexpr int64_t kMinStages = 2;
inline constexpr int64_t kMaxStages = 64;

/// Checks that the kernel builder implements `tile` (shape, stages, split-K,
/// cluster, shared memory); `fail` starts the diagnostic (it says where) and
/// `stagesName` is what the user calls the tile's stage count (an option or
/// the form's field).
LogicalResult verifyTile(function_ref<InFlightDiagnostic()> fail,
                         const GroupedMatmulTile &tile,
                         StringRef stagesName = "stages");

/// The gpu.module every moe kernel goes into.
inline constexpr llvm::StringLiteral kKernelModuleName = "moe_kernels";

/// Largest T a launch accepts: the static token count, else 2^31 - 1.
int64_t maxTokens(int64_t tokens);

/// A kernel without forms (routing, permutation, combine, the backward's
/// SIMT kernels) as the one form of its op's launch.
DictionaryAttr kernelForm(OpBuilder &builder, gpu::GPUFuncOp func);

/// The kernel `name` of `kernels`, built by `build` on first use (ops with
/// the same parameters share a kernel: its name spells all of them).
gpu::GPUFuncOp lookUpOrBuild(gpu::GPUModuleOp kernels, StringRef name,
                             function_ref<gpu::GPUFuncOp()> build);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_KERNELSUPPORT_H
