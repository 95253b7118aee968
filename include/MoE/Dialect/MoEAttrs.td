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

#endif // MOE_DIALECT_MOEATTRS_TD
