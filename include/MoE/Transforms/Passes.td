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

def MoEExtractDeviceCode : Pass<"moe-extract-device-code", "::mlir::ModuleOp"> {
  let summary = "Keep only the device code and its launch manifest";
  let description = [{
    After `--convert-moe-to-nvgpu`, removes everything but the gpu.modules
    and records, as the module attribute `moe.manifest`, what a launcher
    needs to know of each kernel that serialization to a binary would
    otherwise lose: its name, the moe op it implements, its tile
    (`[tile_m, tile_n, tile_k, stages]`), threads per block and dynamic
    shared memory. The host side is the runtime's (see docs/hopper-notes.md);
    `--moe-gpu-pipeline` runs this before serializing the kernels.
  }];
}

#endif // MOE_TRANSFORMS_PASSES_TD
