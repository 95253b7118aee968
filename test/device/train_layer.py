#!/usr/bin/env python3
"""moe_mlir.TrainableMoELayer against the transformers blocks' autograd on
the H200: forward and backward, each one program.v1 call.

For Mixtral-8x7B, Qwen3-30B-A3B and OLMoE-1B-7B (their real H, I, E and k,
through transformers' config classes), DeepSeek-V3 (its real H, I, k,
groups and shared expert with 32 of its 256 experts: group-limited sigmoid
routing with a correction bias, and the shared expert that the program runs
as grouped ops of one group), GPT-OSS-20B (expert biases, the clamped
SwiGLU, a router bias; its interleaved [E, H, 2I] weights taken as they
lie, and again with native_layout=False: rearranged by torch on each call)
and a tiny Mixtral-style block, builds
the transformers 5.x block on the GPU in bfloat16 with random weights and,
as the reference, the same layer in float64 autograd on the same weights
(`reference`: the model's routing, SwiGLU experts, the weighted combine,
the shared expert's MLP; the transformers blocks route in float32
whatever their dtype, and under the skewed routing the router's gradient
is a difference of nearly equal terms that float32 gets only to about 1%:
a float32 reference would measure rounding order, not error); wraps the bfloat16 block with
`TrainableMoELayer.from_hf` from the precompiled cache; then, for
T in {1, 7, 300, 4096, 16384} tokens (the tiny block: 1, 7, 300 and, with
the random routing, 131072) and two routings (the trained router's random
one, and a skewed one: every token's top choice one hot expert, the last
two experts never chosen), runs forward and backward with the same random
output gradient through the layer and through the bfloat16 block, and
checks:
- the output and every gradient (the tokens', the router weight's, the
  experts' gate-up and down weights', the shared expert's gate, up and
  down projections') against the float64 reference: relative
  L2 error no worse than 1.5x that of the bfloat16 block's own autograd, or
  at most 1e-2 (below 64 tokens a gradient is a few dozen numbers whose
  error is one draw of rounding noise, and under the skewed routing the
  router's gradient is dominated by one token's logit gradient, so that
  its error is the bf16 rounding of that one number, anywhere in [0, 2^-9]
  for either side: there the medians of 15 draws of inputs are
  compared), with no NaN (the caching allocator's free blocks poisoned
  with NaN first, so that an unwritten output shows);
- the gradients land in the block's own parameters (.grad of the block's
  tensors: nothing copied);
- determinism: a second backward on the same inputs gives the same bits;
- forward + backward captured in a CUDA graph and replayed on new inputs
  gives the eager gradients of those inputs, bit for bit, and under
  torch.compile(fullgraph=True) (the layer one opaque custom op each way)
  the eager ones to 1e-3;
- a loss of what the first block returning its router's logits or scores
  returns beside its output, alone: the layer's backward has no output
  gradient (none runs, the experts get none) and the router and the tokens
  get the block's own gradients;
- a 50-step fine-tune of the tiny block (AdamW, synthetic regression data)
  through the layer and through the bfloat16 block from the same start: the
  loss curves agree within bfloat16 noise (every step within 5% of the
  block's loss, the final loss below 0.9x the first);
- the refusal: a block with a gated shared expert (Qwen2-MoE) is a
  ValueError naming what is missing.
Prints `N passed, N failed`; exits non-zero on failure.

    python3 test/device/train_layer.py .gpu-artifacts
    python3 test/device/train_layer.py --build-cache DIR [--compiler BIN]
        (here: compiles the train bundles of MODELS; scripts/build-hf-cache.sh)
"""
import copy
import os
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_CACHE = "--build-cache" in sys.argv
ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 and not BUILD_CACHE
                            else ".gpu-artifacts")
sys.path.insert(0, os.path.join(REPO, "python") if BUILD_CACHE
                else os.path.join(ARTIFACTS, "site"))
import moe_mlir  # noqa: E402
from tally import Tally, run  # noqa: E402

MODELS = {
    "mixtral-8x7b": ("mixtral", "MixtralConfig", "MixtralSparseMoeBlock", dict(
        model_type="mixtral", hidden_size=4096, intermediate_size=14336,
        num_local_experts=8, num_experts_per_tok=2, hidden_act="silu")),
    "qwen3-30b-a3b": ("qwen3_moe", "Qwen3MoeConfig", "Qwen3MoeSparseMoeBlock", dict(
        model_type="qwen3_moe", hidden_size=2048, moe_intermediate_size=768,
        num_experts=128, num_experts_per_tok=8, hidden_act="silu",
        norm_topk_prob=True)),
    "olmoe-1b-7b": ("olmoe", "OlmoeConfig", "OlmoeSparseMoeBlock", dict(
        model_type="olmoe", hidden_size=2048, intermediate_size=1024,
        num_experts=64, num_experts_per_tok=8, hidden_act="silu",
        norm_topk_prob=False)),
    # DeepSeek-V3's expert, shared expert and router shapes with 32 of its
    # 256 experts (8 groups of 4, 4 groups chosen, top 8): the float64
    # reference of all 256 would not fit beside the blocks.
    "deepseek-v3-e32": ("deepseek_v3", "DeepseekV3Config", "DeepseekV3MoE", dict(
        model_type="deepseek_v3", hidden_size=7168, moe_intermediate_size=2048,
        n_routed_experts=32, num_experts_per_tok=8, hidden_act="silu",
        norm_topk_prob=True, n_group=8, topk_group=4, routed_scaling_factor=2.5,
        n_shared_experts=1)),
    # GPT-OSS-20B: expert biases, the clamped SwiGLU, top-k then softmax,
    # a router bias, gate and up units interleaved in [E, H, 2I].
    "gpt-oss-20b": ("gpt_oss", "GptOssConfig", "GptOssMLP", dict(
        model_type="gpt_oss", hidden_size=2880, intermediate_size=2880,
        num_local_experts=32, num_experts_per_tok=4)),
    "tiny-mixtral": ("mixtral", "MixtralConfig", "MixtralSparseMoeBlock", dict(
        model_type="mixtral", hidden_size=256, intermediate_size=512,
        num_local_experts=8, num_experts_per_tok=2, hidden_act="silu")),
}
TOKENS = (1, 7, 300, 4096, 16384)
# Compiled into the cache for bench/train_layer.py only (too large for the
# float64 reference beside it).
BENCH_MODELS = {
    "deepseek-v3": ("deepseek_v3", "DeepseekV3Config", "DeepseekV3MoE", dict(
        MODELS["deepseek-v3-e32"][3], n_routed_experts=256)),
    "gpt-oss-120b": ("gpt_oss", "GptOssConfig", "GptOssMLP", dict(
        MODELS["gpt-oss-20b"][3], num_local_experts=128)),
}
REFUSED = {
    "qwen1.5-moe-a2.7b": ("qwen2_moe", "Qwen2MoeConfig", "Qwen2MoeSparseMoeBlock", dict(
        model_type="qwen2_moe", hidden_size=256, moe_intermediate_size=128,
        shared_expert_intermediate_size=512, num_experts=8, num_experts_per_tok=2,
        hidden_act="silu", norm_topk_prob=False), "gated shared expert"),
}


def build_cache(argv):
    cache = os.path.abspath(argv[0])
    compiler = argv[argv.index("--compiler") + 1] if "--compiler" in argv else None
    for name, (_, _, _, fields) in dict(MODELS, **BENCH_MODELS).items():
        spec = moe_mlir.spec_from_config(fields)
        for recompute_rows in (False, True):
            # GPT-OSS also over its weights as transformers keeps them.
            for native in (False, True) if spec.activation == "gptoss" else (False,):
                path = moe_mlir.compile_layer(spec, cache_dir=cache, compiler=compiler,
                                              train=True, recompute_rows=recompute_rows,
                                              native_layout=native)
                print(f"{name}: {path}")
    return 0


def make_block(spec, implementation="eager", device="cuda"):
    """The transformers block of a MODELS entry in bfloat16 on `device`,
    its experts run by `implementation`, with random weights of a trained
    layer's scale (fixed by torch's seed)."""
    import importlib

    import torch

    module, config_class, block_class, fields = spec[:4]
    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    configuration = importlib.import_module(f"transformers.models.{module}")
    config = getattr(configuration, config_class)(
        **{k: v for k, v in fields.items() if k != "model_type"})
    config._experts_implementation = implementation
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            block = getattr(modeling, block_class)(config)
    finally:
        torch.set_default_dtype(default)
    with torch.no_grad():
        for p in block.parameters():
            if p.dim() == 1:
                p.normal_(0, 0.1)
            else:
                p.normal_(0, p.shape[-1] ** -0.5)
    if module == "deepseek_v3":  # float32, as checkpoints keep it
        E = block.gate.weight.shape[0]
        block.gate.e_score_correction_bias = torch.randn(E, device=device) * 0.1
    return block


def route(fields, block, logits):
    """(weights, ids) of the block's router from float64 logits: softmax
    over the experts and top-k, renormalised unless the config says not;
    DeepSeek-V3's sigmoid, the correction bias steering the choice only,
    the top groups by their two best biased scores (the others' scores
    zeroed, as transformers does), renormalised and scaled."""
    import torch

    k = fields["num_experts_per_tok"]
    renormalize = fields.get("norm_topk_prob", True)
    if fields["model_type"] == "gpt_oss":  # top-k logits, softmax over k
        top, ids = torch.topk(logits, k, dim=-1)
        return torch.softmax(top, dim=-1), ids
    if fields["model_type"] != "deepseek_v3":
        w, ids = torch.topk(torch.softmax(logits, dim=-1), k, dim=-1)
        return (w / w.sum(-1, keepdim=True) if renormalize else w), ids
    T, E = logits.shape
    groups = fields["n_group"]
    scores = torch.sigmoid(logits)
    choice = scores.detach() + block.gate.e_score_correction_bias.double()
    best = choice.view(T, groups, E // groups).topk(2, dim=-1)[0].sum(-1)
    chosen = torch.topk(best, fields["topk_group"], dim=-1)[1]
    mask = torch.zeros_like(best).scatter_(1, chosen, 1).bool()
    mask = mask[:, :, None].expand(T, groups, E // groups).reshape(T, E)
    ids = torch.topk(choice.masked_fill(~mask, 0.0), k, dim=-1)[1]
    w = scores.gather(1, ids)
    if renormalize:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return w * fields["routed_scaling_factor"], ids


def router_of(block):
    """The block's router module (GPT-OSS: `router`, else `gate`)."""
    return getattr(block, "router", None) or block.gate


def gpt_oss_experts(block, tokens, w, ids, leaves):
    """GPT-OSS's experts in float64 on `leaves` (its expert parameters):
    gate unit i in column 2i of x . gate_up_proj[e] + bias, up unit i in
    2i + 1, clamped, (up + 1) * gate * sigmoid(1.702 gate), then down."""
    import torch

    def expert(x, w13, b13, w2, b2):
        gu = x @ w13 + b13
        gate = gu[:, 0::2].clamp(max=7.0)
        up = gu[:, 1::2].clamp(-7.0, 7.0)
        return ((up + 1) * gate * torch.sigmoid(gate * 1.702)) @ w2 + b2

    y = torch.zeros_like(tokens)
    for e in ids.unique().tolist():
        tok, slot = torch.where(ids == e)
        out = checkpoint(expert, tokens[tok], leaves["gate_up"][e],
                         leaves["gate_up_bias"][e], leaves["down"][e],
                         leaves["down_bias"][e])
        y = y.index_add(0, tok, out * w[tok, slot, None])
    return y


def checkpoint(fn, *args):
    """fn(*args), its intermediates recomputed in the backward (one
    expert's at a time: the float64 layer at T = 16384 fits beside the
    blocks)."""
    import torch.utils.checkpoint

    return torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)


def reduced(y, dx, grads):
    """The reference's results with its weight gradients in float32 (far
    below the bf16 errors measured; half the memory)."""
    return y, dx, {k: g.float() for k, g in grads.items()}


def block_grads(block):
    """The block's parameters' gradients as `reference` names them."""
    found = {"router": router_of(block).weight.grad,
             "gate_up": block.experts.gate_up_proj.grad,
             "down": block.experts.down_proj.grad}
    if hasattr(block.experts, "gate_up_proj_bias"):
        found.update(router_bias=router_of(block).bias.grad,
                     gate_up_bias=block.experts.gate_up_proj_bias.grad,
                     down_bias=block.experts.down_proj_bias.grad)
    if hasattr(block, "shared_experts"):
        found.update({"shared_" + n: getattr(block.shared_experts, n + "_proj").weight.grad
                      for n in ("gate", "up", "down")})
    return found


def reference(block, fields, x, dy):
    """(y, dx, gradients as grads() names them) of the block's layer in
    float64 autograd: its router linear, the routing (`route`), SwiGLU
    experts (GPT-OSS's own), the weighted combine, and the shared expert's
    MLP added."""
    import torch

    H = fields["hidden_size"]
    leaf = lambda t: t.detach().double().requires_grad_()  # noqa: E731
    tokens = x.detach().double().reshape(-1, H).requires_grad_()
    router_module = router_of(block)
    router = leaf(router_module.weight)
    logits = tokens @ router.t()
    if fields["model_type"] == "gpt_oss":
        router_bias = leaf(router_module.bias)
        w, ids = route(fields, block, logits + router_bias)
        experts = block.experts
        leaves = {n: leaf(getattr(experts, p)) for n, p in (
            ("gate_up", "gate_up_proj"), ("gate_up_bias", "gate_up_proj_bias"),
            ("down", "down_proj"), ("down_bias", "down_proj_bias"))}
        y = gpt_oss_experts(block, tokens, w, ids, leaves)
        y.backward(dy.double().reshape(-1, H))
        grads = {"router": router.grad, "router_bias": router_bias.grad}
        grads.update({n: t.grad for n, t in leaves.items()})
        return reduced(y.detach().view(x.shape), tokens.grad.view(x.shape), grads)
    w13 = leaf(block.experts.gate_up_proj)
    w2 = leaf(block.experts.down_proj)
    I = w2.shape[2]
    w, ids = route(fields, block, logits)
    y = torch.zeros_like(tokens)
    shared = {}
    if hasattr(block, "shared_experts"):
        mlp = block.shared_experts
        shared = {n: getattr(mlp, n + "_proj").weight.detach().double().requires_grad_()
                  for n in ("gate", "up", "down")}
        y = y + (torch.nn.functional.silu(tokens @ shared["gate"].t())
                 * (tokens @ shared["up"].t())) @ shared["down"].t()
    def expert(x, gate_up, down):
        gu = x @ gate_up.t()
        return (torch.nn.functional.silu(gu[:, :I]) * gu[:, I:]) @ down.t()

    for e in ids.unique().tolist():
        tok, slot = torch.where(ids == e)
        out = checkpoint(expert, tokens[tok], w13[e], w2[e])
        y = y.index_add(0, tok, out * w[tok, slot, None])
    y.backward(dy.double().reshape(-1, H))
    grads = {"router": router.grad, "gate_up": w13.grad, "down": w2.grad}
    grads.update({"shared_" + n: t.grad for n, t in shared.items()})
    return reduced(y.detach().view(x.shape), tokens.grad.view(x.shape), grads)


def main():
    import torch

    dev = "cuda"
    cache = os.path.join(ARTIFACTS, "hf-cache")
    tally = Tally()
    report = tally.report
    torch.manual_seed(0)

    def rel_err(got, want):
        # float32: the errors measured are bf16's, 1e-3 and up.
        return ((got.float() - want.float()).norm() / want.float().norm()).item()

    def first(out):
        return out[0] if isinstance(out, tuple) else out

    def zero(block):
        for p in block.parameters():
            p.grad = None

    def tiny_layer():
        """(H, the tiny Mixtral block, its TrainableMoELayer)."""
        spec = MODELS["tiny-mixtral"]
        block = make_block(spec)
        return (spec[3]["hidden_size"], block,
                moe_mlir.TrainableMoELayer.from_hf(block, cache_dir=cache))

    def poison():
        blocks = [torch.full((1 << 26,), float("nan"), device=dev) for _ in range(8)]
        del blocks

    def run_once(module, block, x, dy):
        zero(block)
        x = x.detach().clone().requires_grad_()
        y = first(module(x))
        y.backward(dy)
        torch.cuda.synchronize()
        return y.detach(), x.grad, block_grads(block)

    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.cuda.get_device_name()}", flush=True)
    # GPT-OSS twice: by default over its weights as they lie, and with
    # native_layout=False over a per-step copy in the runtime's layout.
    variants = [(name, spec, None) for name, spec in MODELS.items()]
    variants += [(name + " copy-layout", spec, False) for name, spec in MODELS.items()
                 if spec[0] == "gpt_oss"]
    for name, spec, native in variants:
        H = spec[3]["hidden_size"]
        try:
            block = make_block(spec)
            layer = moe_mlir.TrainableMoELayer.from_hf(block, cache_dir=cache,
                                                       native_layout=native)
        except Exception as error:
            report(False, f"{name} from_hf", f"{type(error).__name__}: {error}")
            continue
        report(layer.block is block and all(
            a is b for a, b in zip(layer.parameters(), block.parameters())),
            f"{name}: the layer's parameters are the block's")
        gate = router_of(block).weight
        E = gate.shape[0]
        for routing in ("random", "skewed"):
            saved = gate.detach().clone()
            if routing == "skewed":
                u = torch.randn(H, device=dev)
                u /= u.norm()
                with torch.no_grad():
                    gate[0] = (8.0 * u).to(gate.dtype)
                    gate[E - 2:] = (-8.0 * u).to(gate.dtype)
            # The tiny block also at T = 131072 (2^18 rows), the largest T
            # the issue asks of one compiled program (random routing).
            sizes = TOKENS if name != "tiny-mixtral" else (
                (1, 7, 300, 131072) if routing == "random" else (1, 7, 300))
            for T in sizes:
                what = f"{name} {routing} T={T}"
                try:
                    errors, problems = {}, []
                    for draw in range(15 if T < 64 else 1):
                        x = torch.randn(1, T, H, device=dev)
                        if routing == "skewed":
                            x += 2.0 * u
                        x = x.to(torch.bfloat16)
                        dy = torch.randn(1, T, H, device=dev).to(torch.bfloat16)
                        poison()
                        ours = run_once(layer, block, x, dy)
                        again = run_once(layer, block, x, dy)
                        same = torch.equal(ours[1], again[1]) and all(
                            torch.equal(ours[2][k], again[2][k]) for k in ours[2])
                        del again
                        hf = run_once(block, block, x, dy)
                        ref = reference(block, spec[3], x, dy)
                        torch.cuda.empty_cache()
                        pairs = [("out", ours[0], hf[0], ref[0]),
                                 ("tokens", ours[1], hf[1], ref[1])]
                        pairs += [(k, ours[2][k], hf[2][k], ref[2][k]) for k in ours[2]]
                        for k, got, base, want in pairs:
                            if got is None or not torch.isfinite(got).all():
                                problems.append(f"{k}: missing or not finite")
                                continue
                            errors.setdefault(k, []).append(
                                (rel_err(got, want), rel_err(base, want)))
                        if not same:
                            problems.append("two backward passes differ")
                        del ours, hf, ref, pairs
                    worst = []
                    for k, pairs_of_k in errors.items():
                        err = statistics.median(e for e, _ in pairs_of_k)
                        base_err = statistics.median(b for _, b in pairs_of_k)
                        worst.append(f"{k} {err:.1e} (hf {base_err:.1e})")
                        if not err <= max(1.5 * base_err, 1e-2):
                            problems.append(f"{k}: relative L2 {err:.3e} > "
                                            f"max(1.5 x {base_err:.3e}, 1e-2)")
                    report(not problems, what, "; ".join(problems) or ", ".join(worst))
                except Exception as error:
                    report(False, what, f"{type(error).__name__}: {error}")
            with torch.no_grad():
                gate.copy_(saved)
        del layer, block
        torch.cuda.empty_cache()

    # Forward + backward captured in a CUDA graph, replayed on new inputs
    # copied into its static ones: the gradients the replay leaves are the
    # eager ones of those inputs, bit for bit.
    what = "tiny-mixtral forward+backward in a CUDA graph"
    try:
        H, block, layer = tiny_layer()
        static_x = torch.randn(1, 300, H, device=dev).to(torch.bfloat16).requires_grad_()
        static_dy = torch.randn(1, 300, H, device=dev).to(torch.bfloat16)

        def step():
            for p in block.parameters():
                p.grad = None
            static_x.grad = None
            first(layer(static_x)).backward(static_dy)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step()
            step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        for p in block.parameters():
            p.grad = None
        static_x.grad = None
        with torch.cuda.graph(graph):
            first(layer(static_x)).backward(static_dy)
        captured = [static_x.grad] + [p.grad for p in block.parameters()]
        problems = []
        for replay in range(2):
            with torch.no_grad():
                static_x.copy_(torch.randn_like(static_x, dtype=torch.float32).to(torch.bfloat16))
                static_dy.copy_(torch.randn_like(static_dy, dtype=torch.float32).to(torch.bfloat16))
            for t in captured:
                t.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            replayed = [t.clone() for t in captured]
            eager = run_once(layer, block, static_x, static_dy)
            want = [eager[1]] + [p.grad for p in block.parameters()]
            if not all(torch.equal(a, b) for a, b in zip(replayed, want)):
                problems.append(f"replay {replay}: gradients differ from eager")
        report(not problems, what, "; ".join(problems))
        del graph, layer, block
    except Exception as error:
        report(False, what, f"{type(error).__name__}: {error}")

    # torch.compile: the layer is one opaque op each way (fullgraph: no
    # graph break), and the gradients are the eager ones.
    what = "tiny-mixtral under torch.compile(fullgraph=True)"
    try:
        H, block, layer = tiny_layer()
        compiled = torch.compile(layer, fullgraph=True)
        problems = []
        for T in (300, 1000):
            x = torch.randn(1, T, H, device=dev).to(torch.bfloat16)
            dy = torch.randn(1, T, H, device=dev).to(torch.bfloat16)
            got = run_once(compiled, block, x, dy)
            want = run_once(layer, block, x, dy)
            errs = [rel_err(got[0], want[0]), rel_err(got[1], want[1])]
            errs += [rel_err(got[2][k], want[2][k]) for k in got[2]]
            if not max(errs) <= 1e-3:
                problems.append(f"T={T}: largest relative L2 difference {max(errs):.2e}")
        report(not problems, what, "; ".join(problems))
        del compiled, layer, block
    except Exception as error:
        report(False, what, f"{type(error).__name__}: {error}")

    # A loss of the router logits alone (a block that returns them): the
    # layer's output gets no gradient, so its backward has none to run;
    # the router and the tokens get the block's own gradients.
    what = "router-logits-only loss"
    try:
        problems, tried = [], None
        for name, spec in MODELS.items():
            H = spec[3]["hidden_size"]
            block = make_block(spec)
            layer = moe_mlir.TrainableMoELayer.from_hf(block, cache_dir=cache)
            x0 = torch.randn(1, 64, H, device=dev).to(torch.bfloat16)
            probe = layer(x0)
            if not isinstance(probe, tuple):
                del layer, block
                continue
            tried = name
            # What the block returns beside its output (its router's
            # logits or scores), weighted at random.
            r = torch.randn(probe[1].shape, device=dev)

            def logits_only(module):
                zero(block)
                x = x0.detach().clone().requires_grad_()
                (module(x)[1].float() * r).sum().backward()
                torch.cuda.synchronize()
                return x.grad, router_of(block).weight.grad, block.experts.gate_up_proj.grad

            got, want = logits_only(layer), logits_only(block)
            if got[2] is not None and got[2].abs().max() != 0:
                problems.append("expert weights got a nonzero gradient")
            for label, g, w in (("tokens", got[0], want[0]), ("router", got[1], want[1])):
                if g is None or rel_err(g, w) > 1e-2:
                    problems.append(f"{label}: " + ("no gradient" if g is None
                                                     else f"relative L2 {rel_err(g, w):.2e}"))
            del layer, block
            break
        report(tried is not None and not problems, f"{what} ({tried})",
               "; ".join(problems) or ("" if tried else "no block returns its logits"))
    except Exception as error:
        report(False, what, f"{type(error).__name__}: {error}")

    # The backward writes its own values over the tensors the forward made
    # for it (donated): a second backward of one forward is refused with a
    # message, and a fresh forward's backward gives the same bits again.
    what = "second backward of one forward refused"
    try:
        H, block, layer = tiny_layer()
        x = torch.randn(1, 300, H, device=dev).to(torch.bfloat16).requires_grad_()
        dy = torch.randn(1, 300, H, device=dev).to(torch.bfloat16)
        zero(block)
        first(layer(x)).backward(dy, retain_graph=True)
        once = (x.grad.clone(), block.experts.gate_up_proj.grad.clone())
        y = first(layer(x))
        zero(block)
        x.grad = None
        y.backward(dy, retain_graph=True)
        again = (x.grad.clone(), block.experts.gate_up_proj.grad.clone())
        message = ""
        try:
            y.backward(dy)
        except RuntimeError as error:
            message = str(error)
        same = all(torch.equal(a, b) for a, b in zip(once, again))
        # Ours, or autograd's own refusal of the donated tensors, whose
        # versions the backward bumped, should it unpack them first.
        refused = "runs once" in message or "inplace operation" in message
        report(same and refused, what,
               f"fresh forward bit-identical: {same}; second backward: "
               f"{message[:90] or 'not refused'}")
        del layer, block
    except Exception as error:
        report(False, what, f"{type(error).__name__}: {error}")

    # recompute_rows: the backward permutes the tokens again (a stable
    # permute) instead of reading saved rows: the same kernels on the same
    # values, so the same bits, on a random and a skewed routing.
    for name in ("tiny-mixtral", "deepseek-v3-e32"):
        what = f"{name}: recompute_rows gives the saved rows' gradients bit for bit"
        try:
            spec = MODELS[name]
            H = spec[3]["hidden_size"]
            block = make_block(spec)
            layers = [moe_mlir.TrainableMoELayer.from_hf(block, cache_dir=cache,
                                                         recompute_rows=r)
                      for r in (False, True)]
            problems = []
            gate = router_of(block).weight
            saved_gate = gate.detach().clone()
            for T, skewed in ((300, False), (4096, True)):
                x0 = torch.randn(1, T, H, device=dev)
                if skewed:  # every token's top choice expert 0, as above
                    u = torch.randn(H, device=dev)
                    u /= u.norm()
                    with torch.no_grad():
                        gate[0] = (8.0 * u).to(gate.dtype)
                    x0 += 2.0 * u
                x0 = x0.to(torch.bfloat16)
                dy = torch.randn(1, T, H, device=dev).to(torch.bfloat16)
                runs = []
                for layer in layers:
                    zero(block)
                    x = x0.detach().clone().requires_grad_()
                    first(layer(x)).backward(dy)
                    runs.append([x.grad] + [p.grad.clone() for p in block.parameters()
                                            if p.grad is not None])
                if len(runs[0]) != len(runs[1]) or not all(
                        torch.equal(a, b) for a, b in zip(*runs)):
                    problems.append(f"T={T} {'skewed' if skewed else 'random'}")
            with torch.no_grad():
                gate.copy_(saved_gate)
            report(not problems, what, "differs at " + ", ".join(problems) if problems
                   else f"{len(runs[0])} gradients, T = 300 and 4096 (skewed)")
            del layers, block
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")

    # A 50-step fine-tune of the tiny block through the layer and through
    # the block itself, from the same start on the same data.
    what = "tiny-mixtral 50-step fine-tune"
    try:
        spec = MODELS["tiny-mixtral"]
        H = spec[3]["hidden_size"]
        start = make_block(spec)
        g = torch.Generator(device=dev).manual_seed(7)
        target = torch.randn(H, H, device=dev, generator=g) / H ** 0.5
        data = [torch.randn(1, 512, H, device=dev, generator=g).to(torch.bfloat16)
                for _ in range(50)]
        curves = {}
        for how in ("layer", "block"):
            block = copy.deepcopy(start)
            module = moe_mlir.TrainableMoELayer.from_hf(block, cache_dir=cache) \
                if how == "layer" else block
            optimizer = torch.optim.AdamW(block.parameters(), lr=1e-3)
            losses = []
            for x in data:
                optimizer.zero_grad()
                y = first(module(x))
                loss = ((y.float() - x.float() @ target) ** 2).mean()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            curves[how] = losses
        a, b = curves["layer"], curves["block"]
        off = max(abs(x - y) / y for x, y in zip(a, b))
        ok = off <= 0.05 and a[-1] < 0.9 * a[0]
        report(ok, what, f"loss {a[0]:.4f} -> {a[-1]:.4f} (block {b[0]:.4f} -> "
               f"{b[-1]:.4f}), largest relative difference {off:.3e}")
    except Exception as error:
        report(False, what, f"{type(error).__name__}: {error}")

    for name, spec in REFUSED.items():
        what = f"{name}: training refused ({spec[4]})"
        try:
            block = make_block(spec)
            moe_mlir.TrainableMoELayer.from_hf(block, cache_dir=cache)
            report(False, what, "no error")
        except ValueError as error:
            report(spec[4] in str(error), what, str(error))
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")
    return tally.summary()


if __name__ == "__main__":
    if BUILD_CACHE:
        sys.exit(build_cache(sys.argv[sys.argv.index("--build-cache") + 1:]))
    run(main)
