//===- MoEOps.td - moe dialect operations ------------------*- tablegen -*-===//

#ifndef MOE_DIALECT_MOEOPS_TD
#define MOE_DIALECT_MOEOPS_TD

include "MoE/Dialect/MoEBase.td"
include "MoE/Dialect/MoEAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/CommonTypeConstraints.td"

// moe ops take plain ranked tensors: an encoding (sparse, ...) would reach
// bufferization and the lowerings, which do not handle it.
class MoE_Tensor<list<Type> elementTypes>
    : Type<And<[RankedTensorOf<elementTypes>.predicate,
                CPred<"!::llvm::cast<::mlir::RankedTensorType>($_self)"
                      ".getEncoding()">]>,
           RankedTensorOf<elementTypes>.summary # " without encoding",
           "::mlir::RankedTensorType">;

// Element types the expert compute accepts (f32 is the reference precision).
def MoE_FloatTensor : MoE_Tensor<[F32, BF16, F16]>;
def MoE_F32Tensor : MoE_Tensor<[F32]>;
def MoE_I32Tensor : MoE_Tensor<[I32]>;
// Offsets and slot indices: i32 suffices for rows < 2^31, i64 is always safe.
def MoE_IndexTensor : MoE_Tensor<[I32, I64]>;
def MoE_FP8Tensor : MoE_Tensor<[F8E4M3FN, F8E5M2]>;
def MoE_ScaleTensor : MoE_Tensor<[F8E8M0FNU, F32]>;

//===----------------------------------------------------------------------===//
// moe.route
//===----------------------------------------------------------------------===//

def MoE_RouteOp : MoE_Op<"route", [Pure, AttrSizedOperandSegments]> {
  let summary = "top-k gating: router logits to expert ids and weights";
  let description = [{
    Chooses `top` experts per token from router logits `[T, E]` and returns
    their ids `[T, k]` (i32, best first) and routing weights `[T, k]` (f32).

    - `routing` picks how scores and weights are formed (see `Routing`).
    - `bias %b` (`sigmoid_topk` only): a per-expert correction `[E]` added to
      the scores for the choice only; the weights stay the unbiased scores.
    - `groups G select Gk`: group-limited top-k. The experts form G equal
      groups; a group's score is the sum of its two best (biased) scores;
      only experts in the Gk best groups may be chosen (DeepSeek-V3: G = 8,
      Gk = 4).
    - `renormalize`: the k weights are divided by their sum (plus 1e-20 for
      `sigmoid_topk`, as DeepSeek-V3 does).
    - `scale s`: the weights are multiplied by s (DeepSeek-V3: 2.5).

    - `shared c`: c shared-expert slices every token takes (see
      `--moe-route-shared-experts`): columns k .. k+c-1 of the results hold
      experts E .. E+c-1 with weight 1, or with `gate %x, %g` the weight
      `sigmoid(x[t, :] . g[0, :])` (tokens `[T, H]`, gate weights `[1, H]`,
      Qwen2-MoE's `shared_expert_gate`). `renormalize` and `scale` apply to
      the k routed weights only.

    Ties go to the lower expert id. All arithmetic is f32.

    ```mlir
    // Mixtral-8x7B
    %ids, %w = moe.route softmax_topk %logits top 2 renormalize
        : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
    // DeepSeek-V3
    %ids, %w = moe.route sigmoid_topk %logits bias %b top 8 groups 8 select 4
        renormalize scale 2.5
        : (tensor<?x256xf32>, tensor<256xf32>)
        -> (tensor<?x8xi32>, tensor<?x8xf32>)
    // Qwen1.5-MoE-A2.7B: 4 routed experts and the shared expert as 4 gated
    // slices (experts 60 .. 63)
    %ids, %w = moe.route softmax_topk %logits top 4 shared 4 gate %x, %g
        : (tensor<?x60xbf16>, tensor<?x2048xbf16>, tensor<1x2048xbf16>)
        -> (tensor<?x8xi32>, tensor<?x8xf32>)
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$logits,
                       Optional<MoE_F32Tensor>:$correction_bias,
                       Optional<MoE_FloatTensor>:$shared_tokens,
                       Optional<MoE_FloatTensor>:$shared_gate,
                       MoE_RoutingAttr:$routing,
                       I64Attr:$top_k,
                       OptionalAttr<I64Attr>:$num_groups,
                       OptionalAttr<I64Attr>:$top_groups,
                       UnitAttr:$renormalize,
                       OptionalAttr<F32Attr>:$scaling_factor,
                       OptionalAttr<I64Attr>:$shared_experts);
  let results = (outs MoE_I32Tensor:$expert_ids, MoE_F32Tensor:$weights);
  let assemblyFormat = [{
    $routing $logits (`bias` $correction_bias^)? `top` $top_k
    (`groups` $num_groups^ `select` $top_groups)? (`renormalize` $renormalize^)?
    (`scale` $scaling_factor^)? (`shared` $shared_experts^)?
    (`gate` $shared_tokens^ `,` $shared_gate)?
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// c, the shared-expert slots after the k routed ones (0: none).
    int64_t getSharedSlots() { return getSharedExperts().value_or(0); }
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.permute
//===----------------------------------------------------------------------===//

def MoE_PermuteOp : MoE_Op<"permute", [Pure]> {
  let summary = "sort token copies by expert";
  let description = [{
    Makes one row per (token, slot) pair, grouped by expert: expert e owns
    rows `[offsets[e], offsets[e+1])`. Within an expert, rows keep the order
    of the flattened `[T, k]` ids (stable). `slots[t, j]` is the row that
    holds token t's copy for its j-th expert; `moe.unpermute` uses it to undo
    the permutation. E is the static size of `offsets` minus one.

    With `pad_to B` every expert's row range starts at a multiple of B and
    its length is rounded up to a multiple of B; padding rows are zero. The
    result then has `T*k + E*(B-1)` rows; rows past `offsets[E]` are zero.
    Without padding it has `T*k` rows.

    Ids outside `[0, E)` are dropped: their slot is -1 and they own no row.
    `pad_to` is at most 65536 (a tile, not a size).

    ```mlir
    %rows, %offsets, %slots = moe.permute %x, %ids
        : (tensor<?x4096xbf16>, tensor<?x2xi32>)
        -> (tensor<?x4096xbf16>, tensor<9xi64>, tensor<?x2xi64>)
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$tokens, MoE_I32Tensor:$expert_ids,
                       OptionalAttr<I64Attr>:$pad_to);
  let results = (outs MoE_FloatTensor:$rows, MoE_IndexTensor:$offsets,
                      MoE_IndexTensor:$slots);
  let assemblyFormat = [{
    $tokens `,` $expert_ids (`pad_to` $pad_to^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    static constexpr int64_t kMaxPadTo = 65536;
  }];
}

//===----------------------------------------------------------------------===//
// moe.grouped_matmul
//===----------------------------------------------------------------------===//

def MoE_GroupedMatmulOp : MoE_Op<"grouped_matmul",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "ragged per-expert matmul: rows [M,K] x weights [E,N,K]";
  let description = [{
    `result[m, :] = (rows[m, :] @ weights[e]^T (+ bias[e])) (* scale[m])` for
    every row m in expert e's range `[offsets[e], offsets[e+1])`; rows outside
    every range are zero. Offsets are data (a tensor), never attributes, so
    one compiled op serves every routing. Offsets are clamped so that ranges
    never overlap or leave `[0, M)` (expert e starts no earlier than expert
    e-1 ends): bad offsets give wrong rows, never out-of-bounds accesses. Products
    accumulate in f32. The optional per-row `scale` (a routing weight) is the
    GEMM epilogue the fused expert MLP needs after its down projection.

    With `kn_weights` the weights lie `[E, K, N]` (GPT-OSS's experts, as
    transformers keeps them) and `result[m, :] = rows[m, :] @ weights[e]`:
    the same product without a transposed copy of the weights. The expert
    MLP fusion leaves such a matmul alone; `--moe-quantize` and
    `--moe-generate-backward` refuse it for now.

    ```mlir
    %gu = moe.grouped_matmul %rows, %w13, %offsets
        : (tensor<?x4096xbf16>, tensor<8x28672x4096xbf16>, tensor<9xi64>)
        -> tensor<?x28672xbf16>
    // GPT-OSS: per-expert bias
    %gu = moe.grouped_matmul %rows, %w13, %offsets bias %b13
        : (tensor<?x2880xbf16>, tensor<128x5760x2880xbf16>, tensor<129xi32>,
           tensor<128x5760xf32>) -> tensor<?x5760xf32>
    // the same with the weights as they lie, [E, K, N]
    %gu = moe.grouped_matmul %rows, %w13, %offsets bias %b13 kn_weights
        : (tensor<?x2880xbf16>, tensor<128x2880x5760xbf16>, tensor<129xi32>,
           tensor<128x5760xf32>) -> tensor<?x5760xf32>
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$rows, MoE_FloatTensor:$weights,
                       MoE_IndexTensor:$offsets,
                       Optional<MoE_FloatTensor>:$bias,
                       Optional<MoE_F32Tensor>:$row_scale,
                       UnitAttr:$kn_weights);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `,` $weights `,` $offsets (`bias` $bias^)? (`scale` $row_scale^)?
    (`kn_weights` $kn_weights^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// The weights' dims of N (the output columns) and K (the reduction).
    unsigned getWeightsNDim() { return getKnWeights() ? 2 : 1; }
    unsigned getWeightsKDim() { return getKnWeights() ? 1 : 2; }
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.swiglu
//===----------------------------------------------------------------------===//

def MoE_SwiGLUOp : MoE_Op<"swiglu", [Pure]> {
  let summary = "gated activation [M, 2I] -> [M, I], optional per-row scale";
  let description = [{
    Splits each row into gate (first I columns) and up (last I columns) and
    returns `act(gate, up) * scale[m]` (see `GatedActivation`; `alpha` and
    `limit` apply to `gptoss` only and default to 1.702 and 7). With
    `interleaved` gate and up alternate instead: gate column i is input
    column 2i, up column i is 2i + 1 (GPT-OSS's fused gate-up projection, as
    transformers keeps it). Computes in f32.

    ```mlir
    %h = moe.swiglu silu %gu : (tensor<?x28672xbf16>) -> tensor<?x14336xbf16>
    %h = moe.swiglu gptoss %gu scale %row_weights alpha 1.702 limit 7.0
        : (tensor<?x5760xf32>, tensor<?xf32>) -> tensor<?x2880xf32>
    %h = moe.swiglu gptoss %gu interleaved
        : (tensor<?x5760xbf16>) -> tensor<?x2880xbf16>
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$input, Optional<MoE_F32Tensor>:$scale,
                       MoE_GatedActivationAttr:$activation,
                       OptionalAttr<F32Attr>:$alpha,
                       OptionalAttr<F32Attr>:$limit,
                       UnitAttr:$interleaved);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $activation $input (`scale` $scale^)? (`interleaved` $interleaved^)?
    (`alpha` $alpha^)? (`limit` $limit^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    float getAlphaOrDefault() { return getAlpha() ? getAlpha()->convertToFloat() : kGptOssAlpha; }
    float getLimitOrDefault() { return getLimit() ? getLimit()->convertToFloat() : kGptOssLimit; }
  }];
}

//===----------------------------------------------------------------------===//
// moe.unpermute
//===----------------------------------------------------------------------===//

def MoE_UnpermuteOp : MoE_Op<"unpermute", [Pure, AttrSizedOperandSegments]> {
  let summary = "combine expert rows back into tokens: weighted sum over k";
  let description = [{
    `result[t, :] = sum_j weights[t, j] * rows[slots[t, j], :] (+ shared[t, :])`,
    accumulated in f32 and rounded once to the result type; without `weights`
    every weight is 1. Slots outside `[0, M)` (a dropped id) contribute
    nothing.

    `shared %s` adds `s` (`[T, H]`, the result's element type) to the
    weighted sum of every token: the output of a shared expert
    (`moe.shared_mlp`), which every token passes through with weight 1.

    ```mlir
    %y = moe.unpermute %expert_out, %slots weights %w
        : (tensor<?x4096xbf16>, tensor<?x2xi64>, tensor<?x2xf32>)
        -> tensor<?x4096xbf16>
    // DeepSeek-V3: routed experts plus the shared expert
    %y = moe.unpermute %expert_out, %slots weights %w shared %s
        : (tensor<?x7168xbf16>, tensor<?x8xi64>, tensor<?x8xf32>,
           tensor<?x7168xbf16>) -> tensor<?x7168xbf16>
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$rows, MoE_IndexTensor:$slots,
                       Optional<MoE_F32Tensor>:$weights,
                       Optional<MoE_FloatTensor>:$shared);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `,` $slots (`weights` $weights^)? (`shared` $shared^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.quantize / moe.dequantize
//===----------------------------------------------------------------------===//

def MoE_QuantizeOp : MoE_Op<"quantize", [Pure]> {
  let summary = "block-scaled quantization to FP8 values and per-block scales";
  let description = [{
    Quantizes `input` with `encoding`, a `#moe.block_scaled` attribute
    written in the op without its prefix: `to <element, [block], scale>`.
    For a block
    with largest magnitude `amax`:

    - MX (E8M0 scales), OCP MX v1.0 section 6.3: `scale = 2^clamp(
      floor(log2(amax)) - emax_elem, -127, 127)` (emax_elem = 8 for e4m3,
      15 for e5m2); an all-zero block gets the smallest scale 2^-127.
    - f32 scales (DeepSeek style): `scale = amax / max_elem` (448 for e4m3,
      57344 for e5m2); an all-zero block, or one whose scale underflows to
      zero, gets scale 1.
    - Values: `input / scale` rounded to nearest, ties to even, saturated to
      the largest finite element value.
    - NaN or infinity anywhere in a block: its scale is NaN (E8M0 0xFF) and
      all its values are NaN (0x7F).

    ```mlir
    %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU>
        : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x128xf8E8M0FNU>
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$input,
                       MoE_BlockScaledEncodingAttr:$encoding);
  let results = (outs MoE_FP8Tensor:$values, MoE_ScaleTensor:$scales);
  let assemblyFormat = [{
    $input `to` $encoding attr-dict `:` type($input) `->` type($values) `,` type($scales)
  }];
  let hasVerifier = 1;
}

def MoE_DequantizeOp : MoE_Op<"dequantize", [Pure]> {
  let summary = "block-scaled FP8 values and scales back to floats";
  let description = [{
    `result = value * scale` per element, in f32, then rounded to the result
    element type. A NaN scale makes its whole block NaN (OCP MX v1.0).

    ```mlir
    %x = moe.dequantize %q, %s from <f8E4M3FN, [128, 128], f32>
        : tensor<8x256x512xf8E4M3FN>, tensor<8x2x4xf32> -> tensor<8x256x512xf32>
    ```
  }];
  let arguments = (ins MoE_FP8Tensor:$values, MoE_ScaleTensor:$scales,
                       MoE_BlockScaledEncodingAttr:$encoding);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $values `,` $scales `from` $encoding attr-dict `:` type($values) `,` type($scales)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def MoE_FakeQuantizeOp : MoE_Op<"fake_quantize", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "block-scaled FP8 quantization and back, in the input's type";
  let description = [{
    `moe.quantize` of `input` with `encoding`, then `moe.dequantize` to the
    input's type: every element becomes the nearest value the encoding can
    hold, its block's scale included. Computes with quantized numerics where
    only the values matter: on a GPU without block-scaled matrix
    instructions (Hopper and MXFP8), a bf16 GEMM of such values equals the
    block-scaled one. `--moe-expand-fused-ops` turns it into the pair.

    ```mlir
    %y = moe.fake_quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU>
        : tensor<?x4096xbf16>
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$input,
                       MoE_BlockScaledEncodingAttr:$encoding);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $input `to` $encoding attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.expert_mlp (fused)
//===----------------------------------------------------------------------===//

def MoE_ExpertMLPOp : MoE_Op<"expert_mlp", [Pure, AttrSizedOperandSegments]> {
  let summary = "fused expert MLP: gate-up matmul, gated activation, down "
                "matmul, routing scale";
  let description = [{
    For rows grouped by expert (as `moe.permute` makes them):

    ```
    gu  = grouped_matmul(rows, gate_up_weights, offsets) (+ gate_up_bias)
    h   = act(gu[:, :I], gu[:, I:])
    out = (grouped_matmul(h, down_weights, offsets) (+ down_bias)) * row_scale
    ```

    `gate_up_weights` is `[E, 2I, H]` (gate rows, then up rows),
    `down_weights` is `[E, H, I]`. The fusion passes produce this op so that
    the `[M, 2I]` intermediate need not make a round trip through memory;
    `--moe-expand-fused-ops` turns it back into its parts.

    `intermediate <encoding>` (a `#moe.block_scaled` encoding with a `[1, B]`
    block, B dividing I) quantizes the activation output `h` with that
    encoding and dequantizes it before the down projection, exactly as
    `moe.quantize` then `moe.dequantize` of `h` would:
    `h' = dequantize(quantize(h))`, rounded to the rows' element type. A
    kernel of FP8 GEMMs keeps the FP8 values and their scales in memory
    instead of `h`; one of bf16 GEMMs (bf16 rows and weights: MXFP8
    computed on exact dequantized values) keeps `h'` itself.

    ```mlir
    %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2 scale %row_weights
        : (tensor<?x4096xbf16>, tensor<9xi64>, tensor<8x28672x4096xbf16>,
           tensor<8x4096x14336xbf16>, tensor<?xf32>) -> tensor<?x4096xbf16>
    // DeepSeek-V3 style FP8 intermediate, [1, 128] groups along I
    %o = moe.expert_mlp silu %rows, %offsets, %w13, %w2
        intermediate <f8E4M3FN, [1, 128], f32>
        : (tensor<?x7168xbf16>, tensor<257xi64>, tensor<256x4096x7168xbf16>,
           tensor<256x7168x2048xbf16>) -> tensor<?x7168xbf16>
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$rows, MoE_IndexTensor:$offsets,
                       MoE_FloatTensor:$gate_up_weights,
                       MoE_FloatTensor:$down_weights,
                       Optional<MoE_FloatTensor>:$gate_up_bias,
                       Optional<MoE_FloatTensor>:$down_bias,
                       Optional<MoE_F32Tensor>:$row_scale,
                       MoE_GatedActivationAttr:$activation,
                       OptionalAttr<F32Attr>:$alpha,
                       OptionalAttr<F32Attr>:$limit,
                       OptionalAttr<MoE_BlockScaledEncodingAttr>:$intermediate);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $activation $rows `,` $offsets `,` $gate_up_weights `,` $down_weights
    (`gate_up_bias` $gate_up_bias^)? (`down_bias` $down_bias^)?
    (`scale` $row_scale^)? (`alpha` $alpha^)? (`limit` $limit^)?
    (`intermediate` $intermediate^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    float getAlphaOrDefault() { return getAlpha() ? getAlpha()->convertToFloat() : kGptOssAlpha; }
    float getLimitOrDefault() { return getLimit() ? getLimit()->convertToFloat() : kGptOssLimit; }
  }];
}

//===----------------------------------------------------------------------===//
// moe.shared_mlp
//===----------------------------------------------------------------------===//

def MoE_SharedMLPOp : MoE_Op<"shared_mlp", [Pure]> {
  let summary = "shared expert: a dense gated MLP every token passes through";
  let description = [{
    For every token row of `tokens` (`[T, H]`):

    ```
    gu  = tokens @ gate_up_weights^T           // [T, 2Is]
    h   = act(gu[:, :Is], gu[:, Is:])          // [T, Is]
    out = h @ down_weights^T                   // [T, H]
    out = out * sigmoid(tokens @ gate_weights^T)   (with `gate`)
    ```

    `gate_up_weights` is `[2Is, H]` (gate rows, then up rows: one expert of
    `moe.expert_mlp`'s `[E, 2I, H]`), `down_weights` is `[H, Is]`; the
    shared expert's width Is need not be the routed experts' I. Products
    accumulate in f32; `gu` and `h` are rounded to the element type of
    `tokens`, as `moe.expert_mlp`'s are; the optional per-token gate
    (`gate_weights` `[1, H]`, Qwen2-MoE's `shared_expert_gate`) is computed
    in f32 and scales the f32 down projection, which is then rounded once to
    the result type. Only the `silu` activation is defined.

    Its result is what `moe.unpermute`'s `shared` operand adds to the routed
    experts' combined output.

    ```mlir
    // DeepSeek-V3: one shared expert, weight 1
    %s = moe.shared_mlp silu %x, %shared_w13, %shared_w2
        : (tensor<?x7168xbf16>, tensor<4096x7168xbf16>,
           tensor<7168x2048xbf16>) -> tensor<?x7168xbf16>
    // Qwen1.5-MoE-A2.7B: Is = 5632 (routed experts: I = 1408), gated
    %s = moe.shared_mlp silu %x, %shared_w13, %shared_w2 gate %shared_gate
        : (tensor<?x2048xbf16>, tensor<11264x2048xbf16>,
           tensor<2048x5632xbf16>, tensor<1x2048xbf16>) -> tensor<?x2048xbf16>
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$tokens,
                       MoE_FloatTensor:$gate_up_weights,
                       MoE_FloatTensor:$down_weights,
                       Optional<MoE_FloatTensor>:$gate_weights,
                       MoE_GatedActivationAttr:$activation);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $activation $tokens `,` $gate_up_weights `,` $down_weights
    (`gate` $gate_weights^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.layer / moe.yield
//===----------------------------------------------------------------------===//

def MoE_LayerOp : MoE_Op<"layer", [SingleBlock, RecursiveMemoryEffects]> {
  let summary = "a whole MoE layer, compiled and launched as one unit";
  let description = [{
    Groups the ops of one MoE layer so that they compile to one unit: the
    result is the value its body yields, computed by the body's ops in order
    (values from above are visible inside). `--moe-fuse-layer` forms it from
    the chain route -> permute -> expert_mlp -> unpermute, with the
    `moe.shared_mlp` whose result the unpermute adds (`shared`); the GPU
    pipeline compiles a layer without a shared expert to one runtime entry
    (ABI `layer.v1`) that launches the whole layer in one call with no host
    round trip, and `--moe-expand-fused-ops` inlines the body again.

    ```mlir
    %y = moe.layer : tensor<?x4096xbf16> {
      %ids, %w = moe.route softmax_topk %logits top 2 renormalize : ...
      %rows, %offsets, %slots = moe.permute %x, %ids : ...
      %h = moe.expert_mlp silu %rows, %offsets, %w13, %w2 : ...
      %o = moe.unpermute %h, %slots weights %w : ...
      moe.yield %o : tensor<?x4096xbf16>
    }
    ```
  }];
  let results = (outs AnyRankedTensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "attr-dict `:` type($result) $body";
  let hasRegionVerifier = 1;
}

def MoE_YieldOp : MoE_Op<"yield", [Pure, Terminator,
                                  HasParent<"LayerOp">]> {
  let summary = "the value a moe.layer computes";
  let arguments = (ins AnyRankedTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

include "MoE/Dialect/MoEGradOps.td"
include "MoE/Dialect/MoEParallelOps.td"

#endif // MOE_DIALECT_MOEOPS_TD
