//===- Passes.h - moe to moe rewrites ---------------------------*- C++ -*-===//

#ifndef MOE_TRANSFORMS_PASSES_H
#define MOE_TRANSFORMS_PASSES_H

#include "MoE/Dialect/MoEDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace moe {

#define GEN_PASS_DECL
#include "MoE/Transforms/Passes.h.inc"

/// Dictionary that a kernel builder (convert-moe-to-nvgpu) puts on each op it
/// built kernels for: ABI, shapes and kernels with their row ranges; it becomes
/// an entry of the `moe.manifest` (docs/runtime-contract.md).
inline constexpr llvm::StringLiteral kLaunchAttr = "moe.launch";
/// Unit attribute convert-moe-to-nvgpu puts on a moe.dequantize whose every
/// user's kernels read the FP8 values and scales themselves: it needs no
/// kernel of its own.
inline constexpr llvm::StringLiteral kFusedIntoLaunchAttr =
    "moe.fused_into_launch";
/// Version of docs/runtime-contract.md that `moe.manifest` and the
/// `.moebundle` written from it follow.
inline constexpr int64_t kRuntimeContractVersion = 6;

/// Builds `moe.quantize` then `moe.dequantize` of `tensor` with `encoding`
/// (the scales shaped one per block) and returns the dequantized tensor, of
/// the type of `tensor`.
Value quantizeDequantize(OpBuilder &builder, Location loc, Value tensor,
                         BlockScaledEncodingAttr encoding);

/// Patterns that rewrite fused moe ops (`moe.layer`, `moe.expert_mlp`) into
/// basic ones.
void populateExpandFusedOpsPatterns(RewritePatternSet &patterns);

/// Patterns that fuse grouped_matmul -> swiglu -> grouped_matmul chains into
/// `moe.expert_mlp` where that computes the same thing.
void populateFuseExpertsPatterns(RewritePatternSet &patterns);

/// Patterns that group route -> permute -> expert_mlp -> unpermute chains
/// into `moe.layer`.
void populateFuseLayerPatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "MoE/Transforms/Passes.h.inc"

} // namespace moe
} // namespace mlir

#endif // MOE_TRANSFORMS_PASSES_H
