//===- Passes.td - moe to moe rewrites ---------------------*- tablegen -*-===//
//
// Passes that rewrite moe ops into other moe ops, in pipeline order.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TRANSFORMS_PASSES_TD
#define MOE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoERaise : Pass<"moe-raise"> {
  let summary = "Raise a sparse MoE layer written in linalg/tensor/arith to "
                "moe ops";
  let description = [{
    Recognises the MoE layer that a frontend emits for a Hugging Face-style
    sparse MoE block (torch-mlir's linalg-on-tensors output for Mixtral and
    Qwen3 blocks, test/Transforms/raise/fixtures) and rewrites it to

    ```mlir
    %ids, %w = moe.route softmax_topk %logits top k (renormalize)?
    %rows, %offsets, %slots = moe.permute %tokens, %ids
    %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
    %out = moe.unpermute %y, %slots weights %w
    ```

    so that the moe pipelines apply. Matching is by meaning, not op order:
    each value is read as the expression of one of its elements, with the
    producing linalg ops (generic and named: matmul, batch_matmul,
    transpose, fill, ...), tensor.expand_shape/collapse_shape and static
    tensor.extract_slice inlined, and that expression must be exactly:

    - top-k: a `tm_tensor.sort` (torch-mlir's dialect, unregistered here:
      parse with `--allow-unregistered-dialect`) along dim 1 with the `oge`
      comparator (descending, stable: ties keep the lower expert id first,
      as moe.route) of the router scores and an iota over experts, whose
      first k columns both uses read (extract_slice at [0, 0], every token);
    - router scores: `exp(l - max) / sum(exp(l - max))` over the expert
      dimension of logits `[T, E]` (max over the same row, from -inf; the
      max may be absent);
    - routing weights: the top-k scores, or (`renormalize`) the top-k
      scores divided by their sum over the same k;
    - each expert: `down(silu(gate(x)) * up(x))` where every projection is
      a sum over the full hidden (or intermediate) dimension of the tokens
      `x[T, H]` (or the activation) times a weight element, starting from
      zero, and `silu(z) = z * 1 / (1 + exp(-z))` (or `z / (1 + exp(-z))`);
    - the combine, either dense-masked: `sum_e expert_e(x) * d_e` over all
      E experts exactly once each (plus zeros), with `d_e = sum_j w[t, j] *
      (ids[t, j] == e)` over the k slots (a one-hot mask); or gathered:
      `sum_j w[t, j] * expert_{ids[t, j]}(x)[t]` over the k slots, where the
      expert's weights are read with `tensor.extract` at the routed id
      (possibly wrapped for negative indices, as torch's indexing does).

    Expert weights are leaves: per-expert `[N, K]` or `[K, N]` tensors, or
    stacked `[E, ...]` tensors indexed by the expert. A stacked gate-up
    tensor `[E, 2I, H]` (gate rows, then up) and down tensor `[E, H, I]` are
    used as they are; anything else is copied into them with
    tensor.extract_slice, linalg.transpose and tensor.insert_slice.

    Precision: `arith.truncf`/`arith.extf` between f32 and bf16 (tensor to
    tensor in a linalg.generic, or inside any body) and ops computed in bf16
    instead of f32 only round, so the matcher looks through them: a bf16
    program rounds intermediates (router logits, routing weights, gate/up
    products, expert outputs, the weighted sum) where the moe ops, which
    compute in f32 and round at op boundaries, do not, and in exact
    arithmetic the values are the same. Everything else is compared
    exactly: a conversion to or from another type (f16, f64, an integer)
    is an opaque op that matches nothing (the remark names it). The layer
    output must be f32 or bf16, the tokens and every expert weight of the
    output's element type; the route reads the logits tensor the softmax
    reads (through roundings: an f32 `extf` of bf16 logits stays f32), f32
    or bf16, without a conversion. The raised layer computes the same
    values in exact arithmetic;
    the sums are taken in another order (the dense form's zero-weighted
    experts are skipped) and a bf16 layer is rounded at other points, so
    results differ by rounding (near-equal router scores may pick another
    expert), and where an
    unselected expert's output is Inf/NaN (0 * Inf) or a router logit is
    NaN the original gives NaN where the moe ops need not. Anything that
    does not match is left untouched and a remark `moe-raise: not raised:
    <why>` is emitted on the top-k sort. After a rewrite the replaced
    computation is erased where nothing else uses it (see docs/raise.md).
  }];
  let dependentDialects = ["::mlir::moe::MoEDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def MoEQuantize : Pass<"moe-quantize", "::mlir::ModuleOp"> {
  let summary = "Quantize expert weights (and activations) to block-scaled "
                "FP8: quantize/dequantize pairs and a prepack function";
  let description = [{
    Rewrites the expert GEMMs of each `func.func` (`moe.grouped_matmul`,
    `moe.expert_mlp`, also inside `moe.layer` bodies) to read their weights
    through `moe.dequantize` (docs/quantization-design.md):

    ```mlir
    func.func @layer(%x: ..., %w13: tensor<8x256x128xbf16>, ...)
    // becomes
    func.func @layer(%x: ..., %w13_q: tensor<8x256x128xf8E4M3FN>,
                     %w13_s: tensor<8x2x1xf32>, ...) {
      %w13 = moe.dequantize %w13_q, %w13_s from <f8E4M3FN, [1, 128, 128], f32>
      ...
    func.func @layer_prepack(%w13: tensor<8x256x128xbf16>, ...)
        -> (tensor<8x256x128xf8E4M3FN>, tensor<8x2x1xf32>, ...) {
      %q, %s = moe.quantize %w13 to <f8E4M3FN, [1, 128, 128], f32>
      ...
    ```

    Policies (options):

    - `format=fp8-block` (default): weights `[E, N, K]` in `[1, 128, 128]`
      blocks with f32 scales `[E, N/128, K/128]`; activations in `[1, 128]`
      groups along K with f32 scales (DeepSeek-V3).
    - `format=mxfp8`: weights in `[1, 1, 32]` blocks along K with
      `f8E8M0FNU` scales `[E, N, K/32]`; activations in `[1, 32]` blocks
      (OCP MX v1.0).
    - `element=e4m3` (default) or `e5m2` (mxfp8 only: DeepSeek-style
      blocks are e4m3).
    - `scope=weights` (default): weights only. `scope=weights+activations`:
      also every GEMM's rows: `moe.quantize` -> `moe.dequantize` right before
      each `moe.grouped_matmul` (in the unfused chain that includes the down
      projection's input, the swiglu output) and before each
      `moe.expert_mlp`, whose activation output gets the `intermediate`
      encoding instead.
    - `gemm=fp8` (default): the GEMMs read FP8 values and scales, as above.
      `gemm=dequantized`: they read the exact dequantized values in the
      operands' own type, for chips without block-scaled matrix
      instructions (MXFP8 on Hopper: bf16 GEMMs of these values equal the
      block-scaled ones, docs/quantization-design.md). A weight argument
      keeps its type and then holds the dequantized weights, which
      `@<name>_prepack` makes once (`moe.fake_quantize` of each weight, one
      result per weight): the same bytes as unquantized weights, twice the
      FP8 ones. Rows go through `moe.fake_quantize` instead of the pair;
      an expert MLP's `intermediate` is set as with `gemm=fp8`.

    Weights:

    - A function argument becomes two arguments in its place, the FP8
      values and the scales, and is dequantized right before each use (one
      `moe.dequantize` per use, so that each GEMM sees its own pair). The
      sibling `@<name>_prepack(weights...) -> (values, scales, ...)`
      (marked `moe.prepack_of = @<name>`, the visibility of `@<name>`)
      quantizes the original arguments in their order, which is the order
      of the new arguments. Each `func.call` of `@<name>` in the module
      calls `@<name>_prepack` on its weight operands first, so the module
      stays valid; a runtime calls the prepack entry once per weight set.
    - A constant (any constant-like op, `arith.constant dense<...>`) is
      quantized in place: one `moe.quantize` after the constant, one
      `moe.dequantize` before each use. The quantize is not folded (the
      CPU reference runs it on every call).
    - Biases, routing weights and router logits stay as they are.

    Operands already read through `moe.dequantize` (or an `expert_mlp`
    that already has an `intermediate`) are left alone when their encoding
    is the policy's (running the pass twice changes nothing) and refused
    otherwise: requantizing values that are already FP8 would compound two
    roundings behind the user's back.

    Refused, with a diagnostic naming the option or the op, and a pass
    failure (nothing is rewritten then):

    - an unknown `format`, `element`, `scope` or `gemm`, and `element=e5m2` with
      `format=fp8-block`;
    - a block that does not divide a weight's N or K (fp8-block: 128 for
      both; mxfp8: 32 for K), or the activation's I (expert_mlp), or a
      dynamic weight dimension;
    - weights that are neither function arguments nor constants;
    - a weight argument with another use than as a GEMM's weights (the
      function would still need the unquantized tensor), or a function
      referenced other than by `func.call`, or an existing `@<name>_prepack`.
  }];
  let options = [
    Option<"format", "format", "std::string", "\"fp8-block\"",
           "Block format: fp8-block ([128, 128] weight blocks, [1, 128] "
           "activation groups, f32 scales) or mxfp8 ([1, 32] blocks, E8M0 "
           "scales)">,
    Option<"element", "element", "std::string", "\"e4m3\"",
           "FP8 element type: e4m3 (f8E4M3FN) or e5m2 (f8E5M2, mxfp8 only)">,
    Option<"scope", "scope", "std::string", "\"weights\"",
           "What is quantized: weights, or weights+activations (every "
           "GEMM's rows too)">,
    Option<"gemm", "gemm", "std::string", "\"fp8\"",
           "What the GEMMs read: fp8 (values and scales) or dequantized "
           "(the exact dequantized values in the operands' type; weights "
           "dequantized once by the prepack function)">,
  ];
  let dependentDialects = ["::mlir::moe::MoEDialect",
                           "::mlir::func::FuncDialect"];
}

def MoECheckPlacement : Pass<"moe-check-placement", "::mlir::ModuleOp"> {
  let summary = "Refuse moe ops that a pipeline would not compile where they "
                "are";
  let description = [{
    The first step of `--moe-cpu-reference-pipeline` (`target=cpu`) and
    `--moe-gpu-pipeline` (`target=gpu`; `--moe-select-kernels` and
    `--convert-moe-to-nvgpu` check the same). The pipelines compile the moe
    ops of the top-level module's functions, so a moe op in a nested
    `builtin.module` (left unlowered, or without a manifest entry) or in a
    user's `gpu.module` is an error naming the op and the module. For the
    GPU each moe op becomes a runtime entry launched once per call from its
    function's top level: a moe op in a loop (`scf.for` carrying tensors,
    `scf.while`, ...) or any other region but a `moe.layer`'s is an error
    naming the op and the loop or region. The IR is left unchanged.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"gpu\"",
           "The pipeline whose rules apply: cpu or gpu">,
  ];
}

def MoEExpandFusedOps : Pass<"moe-expand-fused-ops"> {
  let summary = "Expand fused moe ops into their unfused parts";
  let description = [{
    Inlines the body of each `moe.layer` and rewrites `moe.expert_mlp` into `moe.grouped_matmul` (gate-up, with its
    bias), `moe.swiglu` and `moe.grouped_matmul` (down, with its bias and the
    per-row scale in its epilogue), and a `moe.grouped_dgrad` with
    `act_grad` into the plain dgrad (an f32 product) and `moe.swiglu_grad`.
    The fusion passes go the other way; this
    one gives every fused op an executable meaning in terms of the basic ops
    and is the first step of the CPU reference pipeline. The gate-up
    intermediate takes the element type of the rows. An `intermediate`
    encoding becomes `moe.quantize` -> `moe.dequantize` of the activation
    output (scales one per `[1, B]` group), between the swiglu and the down
    matmul, and so does each `moe.fake_quantize`.
  }];
  let dependentDialects = ["::mlir::moe::MoEDialect"];
}

def MoEFuseExperts : Pass<"moe-fuse-experts"> {
  let summary = "Fuse grouped_matmul -> swiglu -> grouped_matmul into "
                "moe.expert_mlp";
  let description = [{
    Rewrites the expert MLP chain

    ```mlir
    %gu = moe.grouped_matmul %rows, %w13, %offsets (bias %b13)?
    %h  = moe.swiglu act %gu (scale %s1)? (alpha a)? (limit l)?
    %y  = moe.grouped_matmul %h, %w2, %offsets (bias %b2)? (scale %s2)?
    ```

    into `moe.expert_mlp act %rows, %offsets, %w13, %w2` with
    `gate_up_bias %b13`, `down_bias %b2`, the routing weight as `scale` and
    the activation's `alpha`/`limit`, so that the `[M, 2I]` intermediate need
    not make a round trip through memory. It is the inverse of
    `--moe-expand-fused-ops`.

    A quantized intermediate (`--moe-quantize` with
    `scope=weights+activations` writes it) is absorbed too:

    ```mlir
    %h  = moe.swiglu act %gu
    %hq, %hs = moe.quantize %h to <enc>
    %h2 = moe.dequantize %hq, %hs from <enc>
    %y  = moe.grouped_matmul %h2, %w2, %offsets
    ```

    becomes `moe.expert_mlp ... intermediate <enc>`, when the dequantize
    reads exactly that quantize's values and scales with the same encoding,
    none of the three values has another user, the dequantized type is the
    swiglu's, the swiglu has no scale (quantization is not linear, so the
    scale cannot move past it), and `<enc>` has the `[1, B]` block the fused
    op accepts. The pair's one-op form, `%h2 = moe.fake_quantize %h to
    <enc>` (`gemm=dequantized`), is absorbed the same way.
    Rows and weights that come from `moe.dequantize` are operands like any
    other (the fused op reads them as they are).

    The chain is fused only when the result computes the same thing:

    - both matmuls take the same offsets value, `%gu` is used only by the
      swiglu and `%h` only by the down matmul;
    - the gate-up matmul has no row scale, and at most one of `%s1`, `%s2`
      is present (the routing weight);
    - a swiglu scale `%s1` moves past the down matmul only when it has no
      bias: `expert_mlp` computes `(h @ w2^T + b2) * s`, which differs from
      `(s1 * h) @ w2^T + b2`;
    - `%gu` and `%h` have the element type of `%rows` (the type the fused
      op's intermediates take), and the fused op passes its verifier (for
      example the down matmul must map back to the hidden size of `%rows`).

    Anything else is left as it is.

    In a function marked `moe.program` (one GPU entry whose steps are one
    entry each, where the fused op would be two) the chain stays unfused,
    and a `moe.expert_mlp` written there is expanded into it.
  }];
  let dependentDialects = ["::mlir::moe::MoEDialect"];
}

def MoEFuseLayer : Pass<"moe-fuse-layer"> {
  let summary = "Group route -> permute -> expert_mlp -> unpermute into "
                "moe.layer";
  let description = [{
    Wraps the chain of one MoE layer

    ```mlir
    %ids, %w = moe.route ... %logits ...
    %rows, %offsets, %slots = moe.permute %x, %ids
    %h = moe.expert_mlp act %rows, %offsets, %w13, %w2 ...
    %y = moe.unpermute %h, %slots weights %w
    ```

    into `%y = moe.layer { ...; moe.yield %y }`, which the GPU pipeline
    compiles to one runtime entry (`layer.v1`): the whole layer in one call,
    its intermediates in one workspace, no host round trip. Run it after
    `--moe-fuse-experts`. When the ids do not come from a `moe.route` (the
    model routes: they and the combine's weights are function arguments or
    any other values), the layer is the chain from the permute on and takes
    them as inputs. The permuted rows may pass through a
    `moe.quantize` -> `moe.dequantize` pair (`layer_fp8.v1`) or a
    `moe.fake_quantize` (bf16 GEMMs on quantized values, `layer.v1` with a
    round trip part) on their way to the expert MLP; the pair or the op
    comes into the layer.

    The chain is grouped only when it is exactly that dataflow and nothing
    outside it uses an intermediate (ids, weights, rows, offsets, slots or
    the experts' rows), and the routing weight is applied in the combine
    (`weights %w` on the unpermute, no row scale on the expert MLP): a
    row scale would be per permuted row, which the layer does not compute.
    Anything else is left as it is.
  }];
  let dependentDialects = ["::mlir::moe::MoEDialect"];
}

def MoEGenerateBackward : Pass<"moe-generate-backward", "::mlir::ModuleOp"> {
  let summary = "Derive the backward of each function holding a MoE layer, "
                "as moe ops";
  let description = [{
    For every `func.func @F` whose one result is a MoE layer's output
    (`moe.layer`, or its chain route -> permute -> expert MLP -> weighted
    unpermute with the MLP fused or not, or the same chain without a route:
    ids and routing weights are then arguments of @F), adds two functions
    and leaves @F as it is:

    - `@F_train`: @F with its fused ops expanded, returning the layer output
      and then the values the backward needs (the saved values);
    - `@F_backward`: takes the saved values, in that order, then the
      output's gradient dY, and returns the gradient of each differentiable
      argument of @F in argument order: the tokens, the router logits (or,
      without a route, the routing weights), the gate-up and down weights
      and, where the layer has them, the experts' biases. The correction
      bias of `sigmoid_topk` steers only the choice and gets no gradient;
      ids get none.

    The backward, in moe ops:

    ```
    dO, dW   = moe.unpermute_grad dY, O, slots weights W   // combine
    H        = moe.swiglu act GU                            // recomputed
    dH       = moe.grouped_dgrad dO, W2, offsets            // down
    dW2 (dB2)= moe.grouped_wgrad dO, H, offsets
    dGU      = moe.swiglu_grad act GU, dH
    dRows    = moe.grouped_dgrad dGU, W13, offsets          // gate-up
    dW13 (dB13) = moe.grouped_wgrad dGU, rows, offsets
    dX       = moe.unpermute dRows, slots                   // permute
    dLogits  = moe.route_grad routing logits, ids, dW ...   // router
    ```

    Saved: the router logits and ids (with a route), the routing weights,
    the permuted rows, offsets and slots, the gate-up output GU (or, with
    `recompute-gate-up`, nothing: the backward recomputes it from the rows,
    trading a grouped GEMM for `[M, 2I]` of memory; the gate-up bias is
    saved instead where there is one), the experts' output O, and the
    gate-up and down weights. With `recompute-rows` the permuted rows are
    not saved but the tokens (and ids): the backward runs the forward's
    permute again where it first needs the rows (a stable permute: the same
    rows in the same order), after dX, trading a gather for `[M, H]` of
    memory. `@F_backward` names them in its `moe.saved`
    attribute and lists the @F argument each gradient is for in
    `moe.gradient_of`.

    A shared expert (`moe.shared_mlp` of the layer's tokens, added by the
    combine) gets `moe.shared_mlp_grad`: its weights' (and gate's) gradients
    are returned with the others, its tokens' gradient joins dX through the
    final unpermute's `shared` operand; the tokens and its weights are saved
    too.

    An expert-parallel rank program (`--moe-expert-parallel` first) gets
    the adjoint exchanges: the combine's row gradients go to the ranks that
    computed the rows by a `moe.dispatch` of the same layout, and the
    received rows' gradients come back by a `moe.undispatch`; the local
    permute and unpermute swap roles as on one rank.

    A function whose layer this cannot differentiate is an error that says
    why: another shared term, shared-expert routing slots, an FP8-quantized
    layer, a per-row scale, or a layer input that is not an argument of @F
    (its gradient would have nowhere to go). Functions without moe ops are
    left alone.
  }];
  let options = [
    Option<"recomputeGateUp", "recompute-gate-up", "bool", "false",
           "recompute the gate-up GEMM in the backward instead of saving "
           "its [M, 2I] output">,
    Option<"recomputeRows", "recompute-rows", "bool", "false",
           "permute the tokens again in the backward instead of saving the "
           "permuted [M, H] rows (not with expert parallelism)">,
  ];
  let dependentDialects = ["::mlir::moe::MoEDialect",
                           "::mlir::func::FuncDialect"];
}

def MoEExpertParallel : Pass<"moe-expert-parallel", "::mlir::ModuleOp"> {
  let summary = "Rewrite each MoE layer into what one of N expert-parallel "
                "ranks runs";
  let description = [{
    Every rank runs the same program on its own tokens; rank r holds experts
    `[r*L, (r+1)*L)`, L = E / `ranks`. For each layer (the chain permute ->
    expert MLP -> unpermute, fused or not, in a `moe.layer` or not, with its
    route or without one), the expert MLP over all E experts

    ```mlir
    %rows, %offsets, %slots = moe.permute %x, %ids
    %o = moe.expert_mlp act %rows, %offsets, %w13, %w2
    %y = moe.unpermute %o, %slots weights %w
    ```

    becomes the rank's part of an exchange:

    ```mlir
    %rows, %offsets, %slots = moe.permute %x, %ids
    %recv, %local_ids, %counts = moe.dispatch %rows, %offsets ranks N
    %lrows, %loffsets, %lslots = moe.permute %recv, %local_ids
    %lo = moe.expert_mlp act %lrows, %loffsets, %w13, %w2   // L experts
    %lback = moe.unpermute %lo, %lslots
    %back = moe.undispatch %lback, %counts, %offsets ranks N
    %y = moe.unpermute %back, %slots weights %w
    ```

    The routing (and a shared expert) stays replicated: each rank routes its
    own tokens. The expert weights and biases must be arguments of the
    function, used by the layer only: their types become the rank's `[L,
    ...]` slices (the caller passes its experts only). The function gets
    `moe.expert_parallel_ranks = N`. Each row's expert MLP is computed as
    in the one-rank layer and each token's rows are summed in the same
    order, so the ranks together compute the same output as the layer did
    (bit for bit in f32, test/Execution/ep-*.mlir).

    Refused with a diagnostic: `ranks` not dividing E, padded permutes
    (`pad_to`), quantized rows or weights, a per-row scale on the expert
    MLP, shared-expert routing slots, weights that are not arguments of the
    function or that something else also uses.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", "0",
           "N, the expert-parallel ranks (must divide the expert count)">,
  ];
  let dependentDialects = ["::mlir::moe::MoEDialect",
                           "::mlir::func::FuncDialect"];
}

def MoESplitExchanges : Pass<"moe-split-exchanges", "::mlir::ModuleOp"> {
  let summary = "Split a function at its exchanges into stage functions a "
                "caller runs with the exchanges between them";
  let description = [{
    `moe.dispatch` and `moe.undispatch` are collectives: one process cannot
    compute their results alone. For each function holding n of them (at
    its top level), this pass writes the stages between them as n + 1
    functions `@F_stage0 .. @F_stage<n>` and removes @F:

    - `@F_stage<s>` takes the values its ops read and do not define, in
      definition order: @F's arguments (with their attributes), the
      results of earlier exchanges, the values earlier stages returned;
    - it returns what it defines that exchange s, a later stage or @F's
      return reads, once each (a result of @F with @F's attributes for it).

    Each value crossing a stage boundary has a name: @F's argument i its
    `moe.name` or `arg<i>`, a value @F returns (first at position i) @F's
    result `moe.name` or `result<i>` where no argument has that name (an
    exchange's result too: a train forward's saved `counts` keep the name
    its backward takes), result j of exchange s otherwise `x<s>_<j>` (a
    value of @F already named so is an error), the rest `v<k>`. Every stage lists
    @F's arguments' names in `moe.function_args` (how a caller binds its
    inputs) and its results' in `moe.function_results` (where the caller
    finds them: an argument, an exchange result or a value some stage
    returned), its own arguments' in `moe.stage_args` and results' in
    `moe.stage_results`, and gives each its name as `moe.name` (a program
    entry's argument names); stage s < n names its exchange in
    `moe.exchange` (the op), `moe.exchange_ranks`, `moe.exchange_args` (its
    operands' names) and `moe.exchange_results`. A caller (the CPU
    simulation of N ranks, test/lib/ep_case.py; the runtime with NCCL,
    moe_mlir.parallel) keeps the named values of each rank, runs stage s on
    them, performs exchange s as the op defines it, and goes on with stage
    s+1. No stage takes an argument it does not read or returns a value
    twice or one it did not make: each stage is a `moe.program` (one call;
    on the GPU one entry whose bundle keys carry these attributes, contract
    §3.14), a train forward's and a backward's too. Every stage keeps @F's
    attributes, but `moe.donated` only on the last stage that reads the
    argument and only where no exchange from that stage on reads it, and
    has `moe.stage` and `moe.stage_of` (@F's name).
    An exchange nested in a region is an error.
  }];
  let dependentDialects = ["::mlir::moe::MoEDialect",
                           "::mlir::func::FuncDialect"];
}

def MoERouteSharedExperts : Pass<"moe-route-shared-experts",
                                  "::mlir::ModuleOp"> {
  let summary = "Run a shared expert as c experts every token is routed to";
  let description = [{
    A shared expert of width Is (`moe.shared_mlp`) next to routed experts of
    width I is the sum of c = ceil(Is / I) gated MLPs of width I: the
    activation is elementwise over the intermediate, the down projection
    sums over it, and zero rows past Is add zero. This pass rewrites

    ```mlir
    func.func @f(..., %w13: tensor<Ex2IxH>, %w2: tensor<ExHxI>,
                 %s13: tensor<2IsxH>, %s2: tensor<HxIs>, [%g: tensor<1xH>]) {
      %ids, %w = moe.route ... top k
      %rows, %offsets, %slots = moe.permute %x, %ids
      %y = moe.expert_mlp silu %rows, %offsets, %w13, %w2
      %s = moe.shared_mlp silu %x, %s13, %s2 [gate %g]
      %out = moe.unpermute %y, %slots weights %w shared %s
    ```

    into the routed layer over E + c experts, each token taking experts
    E .. E+c-1 after its k (weight 1, or the gate's sigmoid):

    ```mlir
    func.func @f(..., %w13p: tensor<(E+c)x2IxH>, %w2p: tensor<(E+c)xHxI>,
                 [%g: tensor<1xH>]) {
      %ids, %w = moe.route ... top k shared c [gate %x, %g]
      %rows, %offsets, %slots = moe.permute %x, %ids
      %y = moe.expert_mlp silu %rows, %offsets, %w13p, %w2p
      %out = moe.unpermute %y, %slots weights %w
    ```

    so that on the GPU the shared expert runs inside the routed experts'
    grouped GEMM launches. The weights are arranged once by the sibling
    `@f_pack_shared(%w13, %w2, %s13, %s2) -> (%w13p, %w2p)` (tensor ops:
    slice j of the shared expert is expert E+j: gate rows [jI, (j+1)I) and
    up rows Is + [jI, (j+1)I) of %s13, columns [jI, (j+1)I) of %s2, zero
    past Is); calls of @f in the module call it first.

    In real arithmetic the result is the same. The rounding differs: the
    shared expert's down projection is summed per slice, and each slice's
    output is rounded to the expert MLP's result type before the combine
    adds it, gate applied, with the routed ones.

    A function marked `moe.program` (a training step, whose caller passes
    the weights as they are on each call) is left to
    `--moe-expand-shared-mlp`. A shared expert is taken only where it is the
    `shared` addend of such a layer (silu, no biases or row scale, one element type, static widths)
    and its four weights are arguments of the function used by these ops
    alone; any other shared expert is an error that says why. Run it after
    `--moe-fuse-experts` and before `--moe-quantize` (which then quantizes
    the arranged weights); `--moe-gpu-pipeline` runs it with
    `pack-function=false`: its bundle compiles moe ops only, so the caller
    arranges the weights (as `@f_pack_shared` would; `moe_mlir.layer` does it
    once with torch when it loads a block).
  }];
  let options = [
    Option<"packFunction", "pack-function", "bool", "true",
           "Add @<f>_pack_shared and call it before each call of @f in the "
           "module (false: callers arrange the weights; a call of @f in the "
           "module is then an error)">,
  ];
  let dependentDialects = ["::mlir::moe::MoEDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def MoEExpandSharedMLP : Pass<"moe-expand-shared-mlp"> {
  let summary = "Write a shared expert and its adjoint as grouped ops of one "
                "group";
  let description = [{
    A shared expert is a dense MLP over every token, which is a grouped
    matmul whose one group holds every row: this pass rewrites

    ```mlir
    %s = moe.shared_mlp silu %x, %s13, %s2
    ```

    into

    ```mlir
    %off = arith.constant dense<[0, 2147483647]> : tensor<2xi64>
    %w13 = tensor.expand_shape %s13 [[0, 1], [2]] : [2Is, H] -> [1, 2Is, H]
    %gu  = moe.grouped_matmul %x, %w13, %off
    %h   = moe.swiglu silu %gu
    %w2  = tensor.expand_shape %s2 [[0, 1], [2]] : [H, Is] -> [1, H, Is]
    %s   = moe.grouped_matmul %h, %w2, %off
    ```

    (offsets are clamped to the rows: the group is all of them), and
    `moe.shared_mlp_grad` into the same recomputed forward and the routed
    experts' backward of one group (`moe.grouped_dgrad`, `moe.swiglu_grad`,
    `moe.grouped_wgrad`, its `[1, R, C]` gradients collapsed to the
    weights' `[R, C]`), so that the shared expert of a `moe.program` runs
    on the routed experts' kernels with the weights as they lie. The
    forward computes what `moe.shared_mlp` defines; the adjoint rounds the
    activation's gradient and the gate-up output's gradient to the tokens'
    element type between its ops, as the routed experts' backward does
    (`moe.shared_mlp_grad` keeps them in f32): the same gradients within
    that rounding. `--moe-gpu-pipeline` runs it on the shared experts that
    `--moe-route-shared-experts` leaves (those of `moe.program` functions).
    A gated shared expert (Qwen2-MoE) is refused with the reason.
  }];
  let dependentDialects = ["::mlir::moe::MoEDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def MoEFuseBackward : Pass<"moe-fuse-backward"> {
  let summary = "Fuse the activation's gradient into the down projection's "
                "dgrad";
  let description = [{
    Rewrites the backward's

    ```mlir
    %dh  = moe.grouped_dgrad %do, %w2, %offsets
    %dgu = moe.swiglu_grad act %gu, %dh (alpha a)? (limit l)?
    ```

    into `moe.grouped_dgrad %do, %w2, %offsets act_grad act %gu`, whose
    kernel applies the activation's gradient in its epilogue: `%dh` never
    reaches memory, and one kernel and a `[M, I]` round trip less run.
    The fused op keeps the product in f32 where the chain rounded it to
    `%dh`'s element type: the same gradient within that one rounding (exact
    where `%dh` is f32). Fused only where `%dh` has no other user and `%gu`,
    `%dh` and `%dgu` have one element type. `--moe-gpu-pipeline` runs it
    after `--moe-expand-shared-mlp`, so a shared expert's adjoint is fused
    too; `--moe-expand-fused-ops` is its inverse.
  }];
  let dependentDialects = ["::mlir::moe::MoEDialect"];
}

def MoEBuildLayer : Pass<"moe-build-layer", "::mlir::ModuleOp"> {
  let summary = "Add a MoE layer function described by its sizes, routing "
                "and activation";
  let description = [{
    A frontend's way in: instead of printing MLIR, it names the layer's
    parameters as options and this pass adds to the module the function

    ```mlir
    func.func @<name>(%x: tensor<?xHxbf16>, %logits: tensor<?xExL>,
        [%bias: tensor<Exf32>,] %w13: tensor<Ex2IxHxbf16>,
        [%b13: tensor<Ex2Ixbf16>,] %w2: tensor<ExHxIxbf16>,
        [%b2: tensor<ExHxf32>,] [%s13: tensor<2IsxHxbf16>,
        %s2: tensor<HxIsxbf16>, [%sg: tensor<1xHxbf16>]]) -> tensor<?xHxbf16> {
      %ids, %w = moe.route <routing> %logits [bias %bias] top k
          [groups G select Gk] [renormalize] [scale s]
      %rows, %offsets, %slots = moe.permute %x, %ids
      %y = moe.expert_mlp <activation> %rows, %offsets, %w13, %w2
          [gate_up_bias %b13 down_bias %b2] [alpha a limit l]
      [%s = moe.shared_mlp silu %x, %s13, %s2 [gate %sg]]
      %out = moe.unpermute %y, %slots weights %w [shared %s]
      return %out
    }
    ```

    for any token count (L is the logits' element type). With
    `routing=none` the model routes: the function takes
    `%ids: tensor<?xkxi32>, %w: tensor<?xkxf32>` in the logits' place, has
    no moe.route, and takes no routing option (renormalize, groups, scale,
    score-bias) and no shared expert. With `native-layout` the experts'
    weights lie as transformers keeps GPT-OSS's: `%w13: tensor<ExHx2Ixbf16>`
    with gate and up columns alternating (and `%b13` too), `%w2:
    tensor<ExIxHxbf16>`; the experts are then the chain
    `moe.grouped_matmul ... kn_weights`, `moe.swiglu ... interleaved`,
    `moe.grouped_matmul ... kn_weights`, which --moe-generate-backward
    differentiates as it lies (no copy of the weights per step). The built ops are
    verified: options no layer can have (k above E, groups that do not
    divide E, ...) are errors naming the op's rule. The Python package's
    `moe_mlir.layer` compiles Hugging Face blocks this way.
  }];
  let options = [
    Option<"name", "name", "std::string", "\"moe_layer\"",
           "The function's name">,
    Option<"hidden", "hidden", "int64_t", "0", "H, the tokens' width">,
    Option<"intermediate", "intermediate", "int64_t", "0",
           "I, each expert's width">,
    Option<"experts", "experts", "int64_t", "0", "E, the routed experts">,
    Option<"topK", "top-k", "int64_t", "0", "k, the experts per token">,
    Option<"routing", "routing", "std::string", "\"softmax_topk\"",
           "softmax_topk, topk_softmax or sigmoid_topk (moe.route), or "
           "none (the function takes the top-k ids and weights)">,
    Option<"renormalize", "renormalize", "bool", "false",
           "Divide the k weights by their sum">,
    Option<"groups", "groups", "int64_t", "0",
           "Group-limited top-k: the groups of experts (0: none)">,
    Option<"selectGroups", "select-groups", "int64_t", "0",
           "Group-limited top-k: the groups chosen">,
    Option<"scale", "scale", "double", "1.0",
           "The routing weights' factor">,
    Option<"scoreBias", "score-bias", "bool", "false",
           "A float32 correction bias [E] steers the choice (sigmoid_topk)">,
    Option<"logits", "logits", "std::string", "\"bf16\"",
           "The router logits' element type: bf16 or f32">,
    Option<"activation", "activation", "std::string", "\"silu\"",
           "silu or gptoss (moe.expert_mlp)">,
    Option<"alpha", "alpha", "double", "0.0", "gptoss's alpha">,
    Option<"limit", "limit", "double", "0.0", "gptoss's limit">,
    Option<"expertBias", "expert-bias", "bool", "false",
           "Expert biases: gate-up [E, 2I] bf16 and down [E, H] f32">,
    Option<"sharedIntermediate", "shared-intermediate", "int64_t", "0",
           "Is, the shared expert's width (0: no shared expert)">,
    Option<"sharedGate", "shared-gate", "bool", "false",
           "The shared expert is scaled by sigmoid(x . gate) (Qwen2-MoE)">,
    Option<"nativeLayout", "native-layout", "bool", "false",
           "Expert weights as transformers keeps GPT-OSS's: gate-up "
           "[E, H, 2I] with gate and up alternating, down [E, I, H] "
           "(kn_weights matmuls around an interleaved activation)">,
  ];
  let dependentDialects = ["::mlir::moe::MoEDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // MOE_TRANSFORMS_PASSES_TD
