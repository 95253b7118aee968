//===- MoEGradOps.td - moe backward operations -------------*- tablegen -*-===//
//
// The adjoints of the forward ops, as --moe-generate-backward writes a
// layer's backward: combine, down and gate-up dgrad and wgrad, the gated
// activation, the router and the shared expert. Included by MoEOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_DIALECT_MOEGRADOPS_TD
#define MOE_DIALECT_MOEGRADOPS_TD

//===----------------------------------------------------------------------===//
// moe.unpermute_grad
//===----------------------------------------------------------------------===//

def MoE_UnpermuteGradOp : MoE_Op<"unpermute_grad", [Pure]> {
  let summary = "adjoint of moe.unpermute: output gradient to expert-row and "
                "routing-weight gradients";
  let description = [{
    For `y = moe.unpermute %rows, %slots weights %w` and the gradient `grad`
    of `y` (`[T, H]`):

    ```
    rows_grad[slots[t, j], :] = w[t, j] * grad[t, :]     (w = 1 without weights)
    weights_grad[t, j]        = grad[t, :] . rows[slots[t, j], :]
    ```

    `rows_grad` has the shape of `rows` (`[M, H]`); a row that no slot names
    (padding, rows past the last expert) is zero, and where several pairs
    name one row their contributions add. A slot outside `[0, M)` (a
    dropped id) contributes nothing and gets a zero weight gradient.
    `weights_grad` (f32) is a result exactly when `weights` is given; `rows`
    is read only for it and for its shape. Products and sums are f32, each
    result rounded once. `moe.permute`'s adjoint needs no op of its own: it
    is `moe.unpermute` of the row gradients without weights.

    ```mlir
    %drows, %dw = moe.unpermute_grad %dy, %o, %slots weights %w
        : (tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x2xi64>,
           tensor<?x2xf32>) -> (tensor<?x4096xbf16>, tensor<?x2xf32>)
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$grad, MoE_FloatTensor:$rows,
                       MoE_IndexTensor:$slots,
                       Optional<MoE_F32Tensor>:$weights);
  let results = (outs MoE_FloatTensor:$rows_grad,
                      Optional<MoE_F32Tensor>:$weights_grad);
  let assemblyFormat = [{
    $grad `,` $rows `,` $slots (`weights` $weights^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.grouped_dgrad / moe.grouped_wgrad
//===----------------------------------------------------------------------===//

def MoE_GroupedDgradOp : MoE_Op<"grouped_dgrad", [Pure]> {
  let summary = "ragged per-expert matmul against untransposed weights: "
                "grad [M,N] x weights [E,N,K] -> [M,K]";
  let description = [{
    The input gradient of `moe.grouped_matmul`: where the forward computed
    `result[m, :] = rows[m, :] @ weights[e]^T`,

    ```
    rows_grad[m, :] = grad[m, :] @ weights[e]        (weights[e] is [N, K])
    ```

    for every row m in expert e's range `[offsets[e], offsets[e+1])`; rows
    outside every range are zero. Offsets are clamped as
    `moe.grouped_matmul`'s are. Products accumulate in f32 and are rounded
    once to the result type. A kernel reads the weights as the transposed B
    operand of the forward's GEMM.

    With `act_grad act %input` (the down projection's dgrad, fused by
    `--moe-fuse-backward`), the product is the gradient of a gated
    activation's output and the result that of its `[M, 2K]` input:

    ```
    result = moe.swiglu_grad act %input, (grad @ weights[e])   // [M, 2K]
    ```

    with the product kept in f32 (not rounded between the two), `alpha` and
    `limit` as `moe.swiglu_grad`'s. A kernel applies the activation's
    gradient in its epilogue, so that `[M, K]` never reaches memory.

    ```mlir
    %dh = moe.grouped_dgrad %do, %w2, %offsets
        : (tensor<?x4096xbf16>, tensor<8x4096x14336xbf16>, tensor<9xi64>)
        -> tensor<?x14336xbf16>
    %dgu = moe.grouped_dgrad %do, %w2, %offsets act_grad silu %gu
        : (tensor<?x4096xbf16>, tensor<8x4096x14336xbf16>, tensor<9xi64>,
           tensor<?x28672xbf16>) -> tensor<?x28672xbf16>
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$grad, MoE_FloatTensor:$weights,
                       MoE_IndexTensor:$offsets,
                       Optional<MoE_FloatTensor>:$act_input,
                       OptionalAttr<MoE_GatedActivationAttr>:$activation,
                       OptionalAttr<F32Attr>:$alpha,
                       OptionalAttr<F32Attr>:$limit);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $weights `,` $offsets
    (`act_grad` $activation^ $act_input)? (`alpha` $alpha^)?
    (`limit` $limit^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let builders = [
    // The plain dgrad.
    OpBuilder<(ins "Type":$result, "Value":$grad, "Value":$weights,
                   "Value":$offsets), [{
      build($_builder, $_state, result, grad, weights, offsets, Value(),
            GatedActivationAttr(), FloatAttr(), FloatAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    float getAlphaOrDefault() { return getAlpha() ? getAlpha()->convertToFloat() : kGptOssAlpha; }
    float getLimitOrDefault() { return getLimit() ? getLimit()->convertToFloat() : kGptOssLimit; }
  }];
}

def MoE_GroupedWgradOp : MoE_Op<"grouped_wgrad", [Pure]> {
  let summary = "per-expert weight gradient: a matmul reducing over each "
                "expert's own rows, [E, N, K]";
  let description = [{
    The weight (and bias) gradient of `moe.grouped_matmul`: where the
    forward computed `result[m, :] = rows[m, :] @ weights[e]^T (+ bias[e])`,

    ```
    weight_grad[e] = grad[o_e : o_e+1, :]^T @ rows[o_e : o_e+1, :]   // [N, K]
    bias_grad[e]   = sum over m in [o_e, o_e+1) of grad[m, :]         // [N]
    ```

    with `o_e = offsets[e]`: the reduction runs over a ragged, data-dependent
    number of rows per expert (an expert with no rows gets zeros). Offsets
    are clamped as `moe.grouped_matmul`'s are. `bias_grad` is a result when
    the forward had a bias. Sums are f32, each result rounded once; the
    order of the reduction is fixed (rows in order), so the result is
    deterministic.

    With `kn_weights` (the gradient of a `moe.grouped_matmul ... kn_weights`,
    whose weights lie `[E, K, N]`) the weight gradient lies as those weights
    do: `weight_grad[e] = rows[o_e : o_e+1, :]^T @ grad[o_e : o_e+1, :]`,
    `[K, N]`, the same sums transposed; `bias_grad` is unchanged.

    ```mlir
    %dw2 = moe.grouped_wgrad %do, %h, %offsets
        : (tensor<?x4096xbf16>, tensor<?x14336xbf16>, tensor<9xi64>)
        -> tensor<8x4096x14336xbf16>
    // GPT-OSS: with the bias gradient
    %dw2, %db2 = moe.grouped_wgrad %do, %h, %offsets
        : (tensor<?x2880xbf16>, tensor<?x2880xbf16>, tensor<129xi32>)
        -> (tensor<128x2880x2880xbf16>, tensor<128x2880xf32>)
    // GPT-OSS's gate-up as transformers keeps it: [E, H, 2I]
    %dw13, %db13 = moe.grouped_wgrad %dgu, %rows, %offsets kn_weights
        : (tensor<?x5760xbf16>, tensor<?x2880xbf16>, tensor<129xi32>)
        -> (tensor<128x2880x5760xbf16>, tensor<128x5760xf32>)
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$grad, MoE_FloatTensor:$rows,
                       MoE_IndexTensor:$offsets, UnitAttr:$kn_weights);
  let results = (outs MoE_FloatTensor:$weight_grad,
                      Optional<MoE_FloatTensor>:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $rows `,` $offsets (`kn_weights` $kn_weights^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.swiglu_grad
//===----------------------------------------------------------------------===//

def MoE_SwiGLUGradOp : MoE_Op<"swiglu_grad", [Pure]> {
  let summary = "gradient of a gated activation: [M, 2I] input and [M, I] "
                "output gradient -> [M, 2I]";
  let description = [{
    For `h = moe.swiglu act %input` (no scale) and the gradient `grad` of
    `h`, the gradient of `input`: gate columns first, then up columns, as
    the input holds them (with `interleaved`, alternating: gate column i at
    2i, up at 2i + 1, as `moe.swiglu ... interleaved` reads them). With
    `s = sigmoid`:

    - `silu`: `d gate = grad * up * s(gate) * (1 + gate * (1 - s(gate)))`,
      `d up = grad * gate * s(gate)`.
    - `gptoss` (`g = min(gate, limit)`, `u = clamp(up, -limit, limit)`,
      `h = (u + 1) * g * s(alpha * g)`):
      `d gate = grad * (u + 1) * s(alpha g) * (1 + alpha * g * (1 - s(alpha g)))`
      where `gate <= limit`, else 0; `d up = grad * g * s(alpha g)` where
      `-limit <= up <= limit`, else 0 (the clamp passes no gradient where it
      clamps; at its bounds it passes it, as PyTorch's clamp does).

    Computes in f32 and rounds once to the result type.

    ```mlir
    %dgu = moe.swiglu_grad silu %gu, %dh
        : (tensor<?x28672xbf16>, tensor<?x14336xbf16>) -> tensor<?x28672xbf16>
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$input, MoE_FloatTensor:$grad,
                       MoE_GatedActivationAttr:$activation,
                       OptionalAttr<F32Attr>:$alpha,
                       OptionalAttr<F32Attr>:$limit,
                       UnitAttr:$interleaved);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $activation $input `,` $grad (`interleaved` $interleaved^)?
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
// moe.route_grad
//===----------------------------------------------------------------------===//

def MoE_RouteGradOp : MoE_Op<"route_grad", [Pure]> {
  let summary = "adjoint of moe.route: routing-weight gradients to router "
                "logit gradients";
  let description = [{
    Given the router logits `[T, E]` and the ids `[T, k]` a `moe.route`
    chose from them, and the gradient `grad` (`[T, k]`, f32) of its
    weights, the gradient of the logits. The choice itself is piecewise
    constant and passes no gradient: a correction bias or a group limit
    (which only steer the choice) need not be given, and get none. The
    weights are recomputed from the logits as the route formed them:

    ```
    v[t, j] = score(logits)[t, ids[t, j]]
              softmax_topk: softmax over all E; sigmoid_topk: sigmoid;
              topk_softmax: softmax over the k chosen logits
    w = v / (sum_j v + eps) (with `renormalize`; eps = 1e-20 for
        sigmoid_topk, else 0), then * s (with `scale s`)
    ```

    and the result is the gradient of `sum(grad * w)` with respect to the
    logits: every logit of a token for `softmax_topk`, only the chosen ones
    otherwise. Pairs whose id is outside `[0, E)` contribute nothing.
    Shared-expert slots (`moe.route ... shared c`) are not part of `ids`.
    Computes in f32 and rounds once to the result type (the logits').

    ```mlir
    %dlogits = moe.route_grad softmax_topk %logits, %ids, %dw renormalize
        : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>)
        -> tensor<?x8xf32>
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$logits, MoE_I32Tensor:$expert_ids,
                       MoE_F32Tensor:$grad,
                       MoE_RoutingAttr:$routing,
                       UnitAttr:$renormalize,
                       OptionalAttr<F32Attr>:$scaling_factor);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $routing $logits `,` $expert_ids `,` $grad
    (`renormalize` $renormalize^)? (`scale` $scaling_factor^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.shared_mlp_grad
//===----------------------------------------------------------------------===//

def MoE_SharedMLPGradOp : MoE_Op<"shared_mlp_grad", [Pure]> {
  let summary = "adjoint of moe.shared_mlp: its output gradient to the "
                "gradients of the tokens, weights and gate";
  let description = [{
    For `s = moe.shared_mlp act %tokens, %w13, %w2 (gate %g)?` and the
    gradient `grad` of `s` (`[T, H]`), recomputes the forward (`gu =
    tokens @ w13^T` and `h = act(gu)`, each rounded to the tokens' element
    type as the forward rounds them; `o = h @ w2^T` and, with a gate,
    `sigma = sigmoid(tokens @ g[0]^T)`, in f32) and returns

    ```
    do            = grad * sigma                   (grad without a gate)
    tokens_grad   = act'(gu, do @ w2) @ w13 + dlogit * g[0]
    gate_up_grad  = act'(gu, do @ w2)^T @ tokens   // [2Is, H]
    down_grad     = do^T @ h                       // [H, Is]
    gate_grad     = dlogit^T @ tokens              // [1, H], with a gate
    dlogit[t]     = (grad[t] . o[t]) * sigma[t] * (1 - sigma[t])
    ```

    with `act'` the gradient `moe.swiglu_grad` defines. Sums are f32 in a
    fixed order, each result rounded once to its type (the primal's).
    `tokens_grad` is this path's part of the tokens' gradient only: the
    routed experts' part is added by the caller (`--moe-generate-backward`
    passes it as `moe.unpermute`'s `shared` operand).

    ```mlir
    %dx, %dw13, %dw2, %dg = moe.shared_mlp_grad silu %ds, %x, %sw13, %sw2
        gate %g
        : (tensor<?x2048xbf16>, tensor<?x2048xbf16>, tensor<11264x2048xbf16>,
           tensor<2048x5632xbf16>, tensor<1x2048xbf16>)
        -> (tensor<?x2048xbf16>, tensor<11264x2048xbf16>,
            tensor<2048x5632xbf16>, tensor<1x2048xbf16>)
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$grad, MoE_FloatTensor:$tokens,
                       MoE_FloatTensor:$gate_up_weights,
                       MoE_FloatTensor:$down_weights,
                       Optional<MoE_FloatTensor>:$gate_weights,
                       MoE_GatedActivationAttr:$activation);
  let results = (outs MoE_FloatTensor:$tokens_grad,
                      MoE_FloatTensor:$gate_up_grad,
                      MoE_FloatTensor:$down_grad,
                      Optional<MoE_FloatTensor>:$gate_grad);
  let assemblyFormat = [{
    $activation $grad `,` $tokens `,` $gate_up_weights `,` $down_weights
    (`gate` $gate_weights^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // MOE_DIALECT_MOEGRADOPS_TD
