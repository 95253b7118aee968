//===- MoEAttrs.td - moe enums and attributes --------------*- tablegen -*-===//

#ifndef MOE_DIALECT_MOEATTRS_TD
#define MOE_DIALECT_MOEATTRS_TD

include "MoE/Dialect/MoEBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def MoE_RoutingSoftmaxTopK : I32EnumAttrCase<"softmax_topk", 0>;
def MoE_RoutingTopKSoftmax : I32EnumAttrCase<"topk_softmax", 1>;
def MoE_RoutingSigmoidTopK : I32EnumAttrCase<"sigmoid_topk", 2>;

def MoE_RoutingAttr : I32EnumAttr<"Routing",
    "how router logits become expert choices and weights",
    [MoE_RoutingSoftmaxTopK, MoE_RoutingTopKSoftmax, MoE_RoutingSigmoidTopK]> {
  let cppNamespace = "::mlir::moe";
  let description = [{
    - `softmax_topk`: scores = softmax(logits) over all experts; the k best
      scores are chosen and are the weights (Mixtral, Qwen3-MoE, OLMoE).
    - `topk_softmax`: the k largest logits are chosen; the weights are the
      softmax over those k logits (GPT-OSS).
    - `sigmoid_topk`: scores = sigmoid(logits); a correction bias may steer
      the choice but never the weights (DeepSeek-V3).
  }];
}

def MoE_GatedActSilu : I32EnumAttrCase<"silu", 0>;
def MoE_GatedActGptOss : I32EnumAttrCase<"gptoss", 1>;

def MoE_GatedActivationAttr : I32EnumAttr<"GatedActivation",
    "the gated activation of an expert MLP",
    [MoE_GatedActSilu, MoE_GatedActGptOss]> {
  let cppNamespace = "::mlir::moe";
  let description = [{
    - `silu`: silu(gate) * up.
    - `gptoss`: (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha * g) with
      g = min(gate, limit) (GPT-OSS: alpha = 1.702, limit = 7).
  }];
}

def MoE_BlockScaledEncodingAttr
    : AttrDef<MoE_Dialect, "BlockScaledEncoding"> {
  let mnemonic = "block_scaled";
  let summary = "a block-scaled low-precision encoding: element type, block "
                "shape and scale type";
  let description = [{
    One scale per block of elements: the tensor is tiled by `block` over its
    trailing dimensions (leading dimensions use blocks of 1), every block has
    one scale of type `scale`, and the stored values have type `element`.
    The real value of an element is `element_value * scale`.

    Two families are accepted:
    - MXFP8 (OCP Microscaling Formats v1.0): element `f8E4M3FN` or `f8E5M2`,
      block `[1, 32]` (32 consecutive values along the contraction dim),
      scale `f8E8M0FNU` (a power of two).
    - DeepSeek-style FP8 blocks: element `f8E4M3FN` or `f8E5M2`, any block
      shape (`[128, 128]` for weights, `[1, 128]` for activations), scale
      `f32`.

    ```mlir
    #mxfp8 = #moe.block_scaled<f8E4M3FN, [1, 32], f8E8M0FNU>
    #fp8_weights = #moe.block_scaled<f8E4M3FN, [128, 128], f32>
    ```
  }];
  let parameters = (ins "Type":$element,
                        ArrayRefParameter<"int64_t">:$block,
                        "Type":$scale);
  let assemblyFormat = "`<` $element `,` `[` $block `]` `,` $scale `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// True for the OCP MX family (power-of-two E8M0 scales).
    bool isMX() const { return ::llvm::isa<::mlir::Float8E8M0FNUType>(getScale()); }
    /// The block extent for dimension `dim` of a tensor of rank `rank`.
    int64_t getBlockExtent(int64_t dim, int64_t rank) const;
  }];
}

//===----------------------------------------------------------------------===//
// Kernel configurations: what --moe-select-kernels chose (or a user wrote)
// and --convert-moe-to-nvgpu builds. Attached to an op as `moe.kernels`.
//===----------------------------------------------------------------------===//

def MoE_GemmFormAttr : AttrDef<MoE_Dialect, "GemmForm"> {
  let mnemonic = "gemm_form";
  let summary = "one grouped GEMM kernel form and the experts it serves";
  let description = [{
    A kernel of a grouped GEMM, run for the experts whose row count lies in
    `[rows_min, rows_max]` (decided per expert on the device). The tile is
    `tile_m` token rows x `tile_n` output columns x `tile_k` K per stage,
    with `stages` TMA buffers. With `swap_ab` the weights fill WGMMA's
    64-row M operand and `tile_m` tokens (8..64) its N; `split_k`
    warpgroups then share each work item's K steps. `cluster` CTAs share a
    row tile by TMA multicast; `warp_specialized` adds a producer
    warpgroup issuing the loads; `pingpong` (bf16, 64-row tiles, or 128-row ones
    of at most 128 columns held as two accumulators, with a producer) has
    two consumer warpgroups take alternate work items, so that one's
    epilogue overlaps the other's mainloop; `tma_store` (a bf16 output of
    a normal form without an activation's gradient or round trip, its
    columns a multiple of 8) stores each staged 64 x 64 tile whose rows are
    all its expert's with one TMA store; `widen` (MXFP8)
    widens e4m3 to bf16 in shared memory and runs bf16 WGMMA. Every value
    is the kernel's own (no "auto"): the form describes exactly one kernel.

    ```mlir
    #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64,
                   tile_k = 64, stages = 4, swap_ab = true>
    ```
  }];
  let parameters = (ins "int64_t":$rows_min, "int64_t":$rows_max,
                        "int64_t":$tile_m, "int64_t":$tile_n,
                        "int64_t":$tile_k, "int64_t":$stages,
                        DefaultValuedParameter<"bool", "false">:$swap_ab,
                        DefaultValuedParameter<"int64_t", "1">:$split_k,
                        DefaultValuedParameter<"int64_t", "1">:$cluster,
                        DefaultValuedParameter<"bool", "false">:$warp_specialized,
                        DefaultValuedParameter<"bool", "false">:$widen,
                        DefaultValuedParameter<"bool", "false">:$pingpong,
                        DefaultValuedParameter<"bool", "false">:$tma_store);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def MoE_GemmKernelsAttr : AttrDef<MoE_Dialect, "GemmKernels"> {
  let mnemonic = "gemm_kernels";
  let summary = "the kernel forms that together compute one grouped GEMM";
  let description = [{
    The kernels of one grouped GEMM for `chip`: `forms` (`#moe.gemm_form`)
    whose row ranges follow each other from 1 to the largest row count a
    launch takes (2^31 - 1), so that every expert has exactly one form.
    With `quantize_output` the gated epilogue stores the activation as e4m3
    with one f32 scale per row and 128 columns (block FP8), or, for bf16
    GEMMs of an expert MLP with an MXFP8 `intermediate`, as its round trip
    in bf16.

    ```mlir
    #moe.gemm_kernels<chip = "sm_90a", forms = [
        #moe.gemm_form<rows_min = 1, rows_max = 64, tile_m = 64, tile_n = 256,
                       tile_k = 64, stages = 4>,
        #moe.gemm_form<rows_min = 65, rows_max = 2147483647, tile_m = 128,
                       tile_n = 256, tile_k = 64, stages = 4>]>
    ```
  }];
  let parameters = (ins StringRefParameter<"the target chip">:$chip,
                        "::mlir::ArrayAttr":$forms,
                        DefaultValuedParameter<"bool", "false">:$quantize_output);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The forms, in row order.
    auto getFormList() const {
      return getForms().getAsRange<::mlir::moe::GemmFormAttr>();
    }
  }];
}

def MoE_ExpertMLPKernelsAttr : AttrDef<MoE_Dialect, "ExpertMLPKernels"> {
  let mnemonic = "expert_mlp_kernels";
  let summary = "the kernels of a fused expert MLP: its two grouped GEMMs";
  let description = [{
    `gate_up` computes act(gate, up) in its epilogue (the [M, 2I]
    intermediate stays in registers); `down` applies the row scale. With
    FP8 operands a quantize kernel between them makes the activation the
    down GEMM's FP8 rows, unless `gate_up` has `quantize_output`; with bf16
    operands and an `intermediate`, a round-trip kernel between them makes
    its values, unless `gate_up` has `quantize_output`.

    `decode` (0: none): in a bf16 `moe.layer`, calls of at most this many
    tokens run the expert MLP and the combine as one persistent kernel
    (docs/decode-kernel.md) instead of the two GEMMs and the combine
    kernel; the swap-AB form must then take every expert of up to that
    many rows.
  }];
  let parameters = (ins "GemmKernelsAttr":$gate_up, "GemmKernelsAttr":$down,
                        DefaultValuedParameter<"int64_t", "0">:$decode);
  let builders = [AttrBuilder<(ins "GemmKernelsAttr":$gate_up,
                                   "GemmKernelsAttr":$down), [{
      return $_get($_ctxt, gate_up, down, 0);
    }]>];
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def MoE_PermuteKernelsAttr : AttrDef<MoE_Dialect, "PermuteKernels"> {
  let mnemonic = "permute_kernels";
  let summary = "the kernels of a moe.permute";
  let description = [{
    Count, index and gather kernels for `chip`. With `quantize_rows` (a
    block-FP8 layer whose rows are quantized right after the permute) the
    gather stores e4m3 rows and their [1, 128] f32 scales, and the quantize
    has no kernel of its own; `scatter_from` > 0 adds a scatter kernel over
    the tokens that the runtime launches instead from that many tokens on.
  }];
  let parameters = (ins StringRefParameter<"the target chip">:$chip,
                        DefaultValuedParameter<"bool", "false">:$quantize_rows,
                        DefaultValuedParameter<"int64_t", "0">:$scatter_from);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def MoE_KernelAttr : AttrDef<MoE_Dialect, "Kernel"> {
  let mnemonic = "kernel";
  let summary = "the one kernel of a route, unpermute or quantize";
  let description = [{
    These ops have one kernel form for `chip`, with nothing to choose. A
    quantize with `fused` has none of its own: the permute's gather
    (`quantize_rows`) stores its result.
  }];
  let parameters = (ins StringRefParameter<"the target chip">:$chip,
                        DefaultValuedParameter<"bool", "false">:$fused);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // MOE_DIALECT_MOEATTRS_TD
