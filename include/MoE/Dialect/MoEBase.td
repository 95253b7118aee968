//===- MoEBase.td - moe dialect definition -----------------*- tablegen -*-===//
//
// The `moe` dialect: Mixture-of-Experts layers at tensor level.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_DIALECT_MOEBASE_TD
#define MOE_DIALECT_MOEBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def MoE_Dialect : Dialect {
  let name = "moe";
  let cppNamespace = "::mlir::moe";
  let summary = "Mixture-of-Experts layers: routing, permutation, grouped "
                "expert matmuls, gated activations, combine, block-scaled FP8";
  let description = [{
    The `moe` dialect describes one Mixture-of-Experts layer at tensor level
    with value semantics. Model dimensions (hidden size H, expert width I,
    number of experts E, experts per token k) are static; the token count T
    and the number of routed rows M are data and may be dynamic.

    A layer reads as

    ```mlir
    %ids, %w = moe.route softmax_topk %logits top 2 renormalize
        : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
    %rows, %offsets, %slots = moe.permute %x, %ids
        : (tensor<?x64xf32>, tensor<?x2xi32>)
        -> (tensor<?x64xf32>, tensor<9xi64>, tensor<?x2xi64>)
    %gu = moe.grouped_matmul %rows, %w13, %offsets
        : (tensor<?x64xf32>, tensor<8x256x64xf32>, tensor<9xi64>)
        -> tensor<?x256xf32>
    %h = moe.swiglu silu %gu : (tensor<?x256xf32>) -> tensor<?x128xf32>
    %o = moe.grouped_matmul %h, %w2, %offsets
        : (tensor<?x128xf32>, tensor<8x64x128xf32>, tensor<9xi64>)
        -> tensor<?x64xf32>
    %y = moe.unpermute %o, %slots weights %w
        : (tensor<?x64xf32>, tensor<?x2xi64>, tensor<?x2xf32>)
        -> tensor<?x64xf32>
    ```

    Executable semantics live in `--convert-moe-to-linalg` (run on the CPU by
    `--moe-cpu-reference-pipeline`); they match the Hugging Face modules as
    captured by `reference` in the team's shared `bench/peers.py` (outside
    this repository; the GPU tests read it from `.shared-bench/`).
  }];
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    /// Registers the attributes (defined beside their storage classes).
    void registerAttributes();
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

// Base class of every moe op.
class MoE_Op<string mnemonic, list<Trait> traits = []>
    : Op<MoE_Dialect, mnemonic, traits>;

#endif // MOE_DIALECT_MOEBASE_TD
