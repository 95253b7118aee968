#!/usr/bin/env python3
"""experts_implementation="moe_mlir" against "grouped_mm" on the H200.

For each MoE family the installed transformers routes through its
ExpertsInterface (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, DeepSeek-V3 and
GPT-OSS), builds a small causal LM from its config (2 layers, random
weights, fixed seed, bfloat16, on the GPU; DeepSeek-V3 with every layer
MoE), precompiled here into the cache (no compiler on the GPU machine), and
checks:
- `import moe_mlir` registered the backend, and the model switches to it
  (set_experts_implementation) with its own weights;
- the experts call alone, on the model's first experts module, against the
  module's eager forward in float32 (a float32 copy), for T in {1, 7, 300,
  4096} with random routings and skewed ones (one hot expert, every token
  on experts 0 and 1 so the others are empty, ids outside [0, E) which
  transformers uses to mask experts and which must add nothing): relative
  L2 error <= 1e-2, no NaN, freed NaN blocks of the output's size first;
- every experts call of the model on 2 x 64 tokens, each backend against
  the float32 eager experts on the same inputs: moe_mlir's worst error at
  most 1.5x grouped_mm's, or <= 1e-2;
- the logits of the whole model on those tokens against the float32 model
  (eager experts): moe_mlir's error at most 2x grouped_mm's, or <= 2e-2
  (the bf16 model's noise, attention and routers included, amplified
  through the layers);
- model.generate, greedy, 32 new tokens from an 8-token prompt: the same
  tokens as grouped_mm; where the two runs part, they must part at a bf16
  tie (grouped_mm's top-2 logits within 2 ulps, where only bit-identical
  arithmetic breaks the tie the same way), and fed grouped_mm's tokens
  moe_mlir must pick each of them but for such ties;
- a CUDA graph of the experts call (T = 64) replayed on new inputs, its
  output poisoned before each replay, equal to the eager call;
- the errors: a call needing gradients, float32 hidden states.
Prints `N passed, N failed`; exits non-zero on failure.

    python3 test/device/hf_experts.py .gpu-artifacts
        (.gpu-artifacts: hf-cache/, and site/ with the moe_mlir package)
    python3 test/device/hf_experts.py --build-cache DIR [--compiler BIN]
        (here: compiles the layers of FAMILIES into DIR; no torch needed)
"""
import os
import sys
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_CACHE = "--build-cache" in sys.argv
ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 and not BUILD_CACHE
                            else ".gpu-artifacts")
sys.path.insert(0, os.path.join(REPO, "python") if BUILD_CACHE
                else os.path.join(ARTIFACTS, "site"))
import moe_mlir  # noqa: E402
from tally import Tally, run  # noqa: E402

# Small models: H = 256, 2 layers, 4 heads of 64, vocabulary 256.
COMMON = dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=64, vocab_size=256,
              max_position_embeddings=512, hidden_act="silu",
              initializer_range=0.05, tie_word_embeddings=False)
FAMILIES = {
    "mixtral": dict(model_type="mixtral", intermediate_size=128,
                    num_local_experts=8, num_experts_per_tok=2),
    "qwen2_moe": dict(model_type="qwen2_moe", intermediate_size=512,
                      moe_intermediate_size=128,
                      shared_expert_intermediate_size=256, num_experts=8,
                      num_experts_per_tok=4, norm_topk_prob=False),
    "qwen3_moe": dict(model_type="qwen3_moe", intermediate_size=512,
                      moe_intermediate_size=128, num_experts=16,
                      num_experts_per_tok=4, norm_topk_prob=True),
    "olmoe": dict(model_type="olmoe", intermediate_size=128, num_experts=16,
                  num_experts_per_tok=4, norm_topk_prob=False),
    "deepseek_v3": dict(model_type="deepseek_v3", intermediate_size=512,
                        num_key_value_heads=4,
                        moe_intermediate_size=128, n_routed_experts=16,
                        num_experts_per_tok=4, n_group=4, topk_group=2,
                        n_shared_experts=1, first_k_dense_replace=0,
                        routed_scaling_factor=2.5, norm_topk_prob=True,
                        q_lora_rank=128, kv_lora_rank=64, qk_rope_head_dim=64,
                        qk_nope_head_dim=64, v_head_dim=64),
    "gpt_oss": dict(model_type="gpt_oss", intermediate_size=128,
                    num_local_experts=8, num_experts_per_tok=2,
                    sliding_window=128,
                    layer_types=["sliding_attention", "full_attention"]),
}
TOLERANCE = 1e-2
TOKENS = [1, 7, 300, 4096]


def config_fields(family):
    return {**COMMON, **FAMILIES[family]}


def build_cache(argv):
    """Compiles the experts layers of FAMILIES (the specs the backend
    derives from the modules: spec_from_config(...).experts_only()) into
    argv[0]; prints the bundles."""
    cache = os.path.abspath(argv[0])
    compiler = argv[argv.index("--compiler") + 1] if "--compiler" in argv else None
    for family in FAMILIES:
        spec = moe_mlir.spec_from_config(config_fields(family)).experts_only()
        print(f"{family}: {moe_mlir.compile_layer(spec, cache_dir=cache, compiler=compiler)}")
    return 0


def main():
    import copy

    import torch
    import transformers
    from moe_mlir import experts as backend

    dev = "cuda"
    os.environ["MOE_CACHE_DIR"] = os.path.join(ARTIFACTS, "hf-cache")
    tally = Tally()
    report = tally.report
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")

    def rel_err(got, want):
        return ((got.float() - want.float()).norm() / want.float().norm()).item()

    def poison(shape):
        blocks = [torch.full(shape, float("nan"), dtype=torch.bfloat16, device=dev)
                  for _ in range(4)]
        del blocks

    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    def moe_forward(impl):
        return ALL_EXPERTS_FUNCTIONS[impl]

    report("moe_mlir" in ALL_EXPERTS_FUNCTIONS, "import moe_mlir registers the backend",
           f"{sorted(ALL_EXPERTS_FUNCTIONS.keys())}")

    def build(family):
        torch.manual_seed(0)
        config = transformers.AutoConfig.for_model(**config_fields(family))
        with torch.device(dev):
            model = transformers.AutoModelForCausalLM.from_config(
                config, dtype=torch.bfloat16, experts_implementation="grouped_mm")
        return model.eval()

    def first_experts(model):
        for module in model.modules():
            if hasattr(module, "gate_up_proj") and hasattr(module, "down_proj"):
                return module
        raise AssertionError("no experts module")

    def routings(T, E, k, gen):
        """name -> (ids [T, k] int64, weights [T, k] float)."""
        weights = torch.rand(T, k, generator=gen, device=dev) + 0.1
        weights = weights / weights.sum(-1, keepdim=True)
        cases = {"random": torch.stack([torch.randperm(E, generator=gen, device=dev)[:k]
                                        for _ in range(T)]) if T <= 300 else
                 torch.argsort(torch.rand(T, E, generator=gen, device=dev), -1)[:, :k]}
        hot = cases["random"].clone()
        hot[:, 0] = 0  # expert 0 takes every token
        hot[:, 1:] = torch.where(hot[:, 1:] == 0, 1 + (hot[:, 1:] % (E - 1)), hot[:, 1:])
        cases["hot expert"] = hot
        two = torch.randint(0, 2, (T, k), generator=gen, device=dev)
        cases["experts 0, 1 only"] = two
        masked = cases["random"].clone()
        masked[::2, -1] = E  # transformers' masked expert (expert parallel)
        cases["ids outside [0, E)"] = masked
        return {name: (ids, weights) for name, ids in cases.items()}

    def experts_checks(family, model):
        experts = first_experts(model)
        experts32 = copy.deepcopy(experts).float()
        experts32.config = copy.copy(experts.config)
        experts32.config._experts_implementation_internal = "eager"
        E = experts.gate_up_proj.shape[0]
        k = model.config.num_experts_per_tok
        H = model.config.hidden_size
        gen = torch.Generator(device=dev).manual_seed(1)
        for T in TOKENS:
            x = torch.randn(T, H, generator=gen, device=dev).to(torch.bfloat16)
            for name, (ids, w) in routings(T, E, k, gen).items():
                # The eager loop takes ids in [0, E) only: a masked slot is
                # one of weight 0 in the reference.
                masked = ids >= E
                ref_ids = torch.where(masked, 0, ids)
                ref_w = torch.where(masked, 0.0, w)
                with torch.no_grad():
                    want = experts32(x.float(), ref_ids, ref_w)
                    poison((T, H))
                    got = backend.forward(experts, x, ids, w.to(torch.bfloat16))
                    torch.cuda.synchronize()
                err = rel_err(got, want)
                report(err <= TOLERANCE and not torch.isnan(got).any().item(),
                       f"{family} experts T={T} {name}", f"rel err {err:.2e}")
        # A CUDA graph of the call, replayed on new inputs.
        T = 64
        x = torch.randn(T, H, generator=gen, device=dev).to(torch.bfloat16)
        ids, w = routings(T, E, k, gen)["random"]
        with torch.no_grad():
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                backend.forward(experts, x, ids, w)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = backend.forward(experts, x, ids, w)
            worst = 0.0
            for _ in range(3):
                x.copy_(torch.randn(T, H, generator=gen, device=dev))
                new_ids, new_w = routings(T, E, k, gen)["random"]
                ids.copy_(new_ids)
                w.copy_(new_w)
                out.fill_(float("nan"))
                graph.replay()
                want = backend.forward(experts, x.clone(), ids.clone(), w.clone())
                torch.cuda.synchronize()
                worst = max(worst, (out.float() - want.float()).abs().max().item())
        report(worst == 0.0, f"{family} experts CUDA graph replays equal the eager call",
               f"max |diff| {worst}")
        # Errors.
        def needs_grad():
            backend.forward(experts, x.requires_grad_(), ids, w)
        def float32():
            with torch.no_grad():
                backend.forward(experts, x.detach().float(), ids, w)
        for what, fn, error, needle in (
                ("a call needing gradients", needs_grad, RuntimeError, "inference only"),
                ("float32 hidden states", float32, TypeError, "bfloat16")):
            try:
                fn()
                report(False, f"{family} refuses {what}", "no error")
            except error as e:
                report(needle in str(e), f"{family} refuses {what}", str(e))

    def model_checks(family, model):
        gen = torch.Generator(device=dev).manual_seed(2)
        ids = torch.randint(0, model.config.vocab_size, (2, 64), generator=gen, device=dev)
        model32 = copy.deepcopy(model).float()
        model32.set_experts_implementation("eager")
        # Every experts call of the bf16 model (grouped_mm), each backend
        # against the float32 eager experts on the same inputs.
        calls = []
        hooks = [m.register_forward_pre_hook(
                     lambda mod, args, name=name: calls.append((name, mod, args)))
                 for name, m in model.named_modules() if hasattr(m, "gate_up_proj")]
        model.set_experts_implementation("grouped_mm")
        with torch.no_grad():
            model(ids)
        for hook in hooks:
            hook.remove()
        worst = {"grouped_mm": 0.0, "moe_mlir": 0.0}
        experts32 = dict(model32.named_modules())
        for name, mod, (x, top, w) in calls:
            with torch.no_grad():
                want = experts32[name](x.float(), top, w.float())
                for impl in worst:
                    got = moe_forward(impl)(mod, x, top, w)
                    worst[impl] = max(worst[impl], rel_err(got, want))
        report(worst["moe_mlir"] <= max(1.5 * worst["grouped_mm"], TOLERANCE),
               f"{family} experts calls in the model ({len(calls)}) against float32",
               f"worst rel err {worst['moe_mlir']:.2e}, grouped_mm's {worst['grouped_mm']:.2e}")
        with torch.no_grad():
            want = model32(ids).logits
            del model32
            model.set_experts_implementation("grouped_mm")
            peer = model(ids).logits
            model.set_experts_implementation("moe_mlir")
            got = model(ids).logits
        err, peer_err = rel_err(got, want), rel_err(peer, want)
        # The logits' error is the bf16 model's (attention, norms and
        # routers in bf16 too), amplified through the layers: within 2x the
        # peer's, or 2e-2.
        report(err <= max(2 * peer_err, 2 * TOLERANCE),
               f"{family} logits (2 x 64 tokens) within bf16 noise",
               f"rel err {err:.2e}, grouped_mm's {peer_err:.2e}")
        prompt = ids[:1, :8]
        runs = {}
        for impl in ("grouped_mm", "moe_mlir"):
            model.set_experts_implementation(impl)
            with torch.no_grad():
                runs[impl] = model.generate(prompt, max_new_tokens=32, min_new_tokens=32,
                                            do_sample=False)[0, 8:]
        same = torch.equal(runs["grouped_mm"], runs["moe_mlir"])
        # Where they differ: teacher-forced on grouped_mm's tokens, every
        # step must pick grouped_mm's token unless its top-2 logits are
        # within 2 bf16 ulps (a tie that only bit-identical arithmetic
        # would break the same way).
        full = torch.cat((prompt[0], runs["grouped_mm"]))[None]
        picks = {}
        with torch.no_grad():
            for impl in ("grouped_mm", "moe_mlir"):
                model.set_experts_implementation(impl)
                picks[impl] = model(full[:, :-1]).logits[0, 7:].float()
        top2 = picks["grouped_mm"].topk(2, dim=-1).values
        ulp = torch.exp2(torch.floor(torch.log2(top2[:, 0].abs().clamp_min(1e-30))) - 7)
        tie = (top2[:, 0] - top2[:, 1]) <= 2 * ulp
        agree = picks["moe_mlir"].argmax(-1) == runs["grouped_mm"]
        forced_ok = bool((agree | tie).all())
        if same:
            detail = "equal"
        else:
            first = int((runs["grouped_mm"] != runs["moe_mlir"]).nonzero()[0])
            detail = (f"free-running: equal up to new token {first}, where "
                      f"grouped_mm's top-2 logits are {'a tie' if tie[first] else 'not a tie'}"
                      f" (margin {float(top2[first, 0] - top2[first, 1]):.3g}); "
                      f"teacher-forced: {int(agree.sum())} of 32 equal, "
                      f"{int((~agree & tie).sum())} ties, {int((~agree & ~tie).sum())} "
                      "different")
            same = forced_ok and bool(tie[first])
        report(same and runs["moe_mlir"].numel() == 32,
               f"{family} generate: 32 greedy tokens equal grouped_mm's "
               "(but for bf16 ties)", detail)

    for family in FAMILIES:
        def one(family=family):
            model = build(family)
            model.set_experts_implementation("moe_mlir")
            report(model.config._experts_implementation == "moe_mlir",
                   f"{family} switches to moe_mlir")
            experts_checks(family, model)
            model_checks(family, model)
        try:
            one()
        except Exception:
            traceback.print_exc()
            report(False, family, "an exception (above)")
        torch.cuda.empty_cache()
    return tally.summary()


if __name__ == "__main__":
    if BUILD_CACHE:
        sys.exit(build_cache(sys.argv[sys.argv.index("--build-cache") + 1:]))
    run(main)
