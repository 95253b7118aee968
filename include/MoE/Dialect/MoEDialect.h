//===- MoEDialect.h - moe dialect -------------------------------*- C++ -*-===//

#ifndef MOE_DIALECT_MOEDIALECT_H
#define MOE_DIALECT_MOEDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "MoE/Dialect/MoEOpsDialect.h.inc"

#include "MoE/Dialect/MoEEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "MoE/Dialect/MoEAttrs.h.inc"

namespace mlir::moe {
/// GPT-OSS's activation constants, the defaults of `alpha` and `limit`.
inline constexpr float kGptOssAlpha = 1.702f;
inline constexpr float kGptOssLimit = 7.0f;
/// Rows per launch are 32-bit in the kernel ABI (offsets, TMA coordinates):
/// the last kernel form of an op serves up to this many rows.
inline constexpr int64_t kMaxLaunchRows = 2147483647;
/// The attribute holding an op's kernel configuration (`#moe.gemm_kernels`,
/// `#moe.expert_mlp_kernels`, `#moe.permute_kernels` or `#moe.kernel`).
inline constexpr llvm::StringLiteral kKernelsAttr = "moe.kernels";
} // namespace mlir::moe

#define GET_OP_CLASSES
#include "MoE/Dialect/MoEOps.h.inc"

namespace mlir::moe {
/// Largest finite value of an FP8 element type (448 for e4m3, 57344 for e5m2).
double getMaxFiniteFP8(Type elementType);

/// The scales tensor type of `values` quantized with `encoding`: one scale
/// of `encoding`'s scale type per block (a dynamic dim stays dynamic; its
/// block extent is 1).
RankedTensorType getBlockScalesType(RankedTensorType values,
                                    BlockScaledEncodingAttr encoding);

/// The ops of a layer whose body is the chain --moe-fuse-layer builds (and
/// the runtime's layer.v1 or layer_fp8.v1 launches): route -> permute ->
/// expert_mlp -> unpermute, the route's ids into the permute, its rows and
/// offsets into the expert MLP, whose result the unpermute combines with the
/// permute's slots and the route's weights (no shared expert added), yielded.
/// With quantized activations (--moe-quantize), the permuted rows reach the
/// expert MLP through moe.quantize then moe.dequantize. Without a route the
/// model routes: the ids and the combine's weights come from outside.
struct LayerChain {
  RouteOp route; // null when the ids and weights are the layer's inputs
  PermuteOp permute;
  QuantizeOp rowsQuantize;     // null unless the rows are quantized
  DequantizeOp rowsDequantize; // null unless the rows are quantized
  /// null unless the bf16 rows make a round trip (bf16 GEMMs of MXFP8 values)
  FakeQuantizeOp rowsRoundTrip;
  ExpertMLPOp mlp;
  UnpermuteOp combine;
};
/// The moe.quantize -> moe.dequantize round trip (as --moe-quantize writes
/// it for activations) that yields `dequantized`, each of its results used
/// once, or nullopt.
std::optional<std::pair<QuantizeOp, DequantizeOp>>
getRowsRoundTrip(Value dequantized);
/// `layer`'s chain, or std::nullopt when its body is anything else.
std::optional<LayerChain> getLayerChain(LayerOp layer);

/// The pipeline that compiles a module's moe ops (verifyMoEPlacement).
enum class MoEPipelineKind { CPU, GPU };
/// Checks that every moe op of `module` is where `kind`'s pipeline compiles
/// it from: in a func.func of `module` itself (not in a nested
/// builtin.module or a gpu.module), and for the GPU at the top level of its
/// function or of a moe.layer there (no loop or branch around it: its entry
/// is launched once per call). Emits an error naming each misplaced op and
/// what encloses it.
LogicalResult verifyMoEPlacement(ModuleOp module, MoEPipelineKind kind);
} // namespace mlir::moe

#endif // MOE_DIALECT_MOEDIALECT_H
