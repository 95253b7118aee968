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

/// Builds `moe.quantize` then `moe.dequantize` of `tensor` with `encoding`
/// (the scales shaped one per block) and returns the dequantized tensor, of
/// the type of `tensor`.
Value quantizeDequantize(OpBuilder &builder, Location loc, Value tensor,
                         BlockScaledEncodingAttr encoding);

/// Patterns that rewrite fused moe ops (`moe.layer`, `moe.expert_mlp`) into
/// basic ones.
void populateExpandFusedOpsPatterns(RewritePatternSet &patterns);
/// moe.expert_mlp into its parts only.
void populateExpandExpertMLPPatterns(RewritePatternSet &patterns);

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
