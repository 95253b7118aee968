//===- Passes.td - moe to moe rewrites ---------------------*- tablegen -*-===//
//
// Passes that rewrite moe ops into other moe ops, in pipeline order.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TRANSFORMS_PASSES_TD
#define MOE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoEExpandFusedOps : Pass<"moe-expand-fused-ops"> {
  let summary = "Expand fused moe ops into their unfused parts";
  let description = [{
    Rewrites `moe.expert_mlp` into `moe.grouped_matmul` (gate-up, with its
    bias), `moe.swiglu` and `moe.grouped_matmul` (down, with its bias and the
    per-row scale in its epilogue). The fusion passes go the other way; this
    one gives every fused op an executable meaning in terms of the basic ops
    and is the first step of the CPU reference pipeline. The gate-up
    intermediate takes the element type of the rows.
  }];
  let dependentDialects = ["::mlir::moe::MoEDialect"];
}

#endif // MOE_TRANSFORMS_PASSES_TD
