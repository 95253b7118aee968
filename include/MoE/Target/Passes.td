//===- Passes.td - moe target steps ------------------------*- tablegen -*-===//
//
// Steps from compiled moe modules toward what the runtime loads.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TARGET_PASSES_TD
#define MOE_TARGET_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoEExtractDeviceCode : Pass<"moe-extract-device-code", "::mlir::ModuleOp"> {
  let summary = "Keep only the device code and its launch manifest";
  let description = [{
    After `--convert-moe-to-nvgpu`, removes everything but the gpu.modules
    and records, as the module attribute `moe.manifest` (with the contract's
    version, docs/runtime-contract.md), what a runtime needs to launch each compiled op that
    serialization to a binary would otherwise lose: one entry per op carrying `moe.launch` (named
    after its function), with its ABI, static shapes, row limit, offsets
    type, and every kernel that computes part of it (the experts whose row
    count lies in `[rows_min, rows_max]`) with its tile, threads per block,
    dynamic shared memory and by-value tensor-map parameters. A
    `moe.layer` gives the entries of its parts (`<name>_route`,
    `<name>_permute`, `<name>_gate_up`, `<name>_down`, `<name>_unpermute`)
    and then its own `layer.v1` entry naming them. The layout is
    versioned in docs/runtime-contract.md; `--moe-gpu-pipeline` runs this
    before serializing the kernels and `moe-translate --moe-to-bundle`
    writes the result for the runtime.
  }];
}

#endif // MOE_TARGET_PASSES_TD
