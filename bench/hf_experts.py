#!/usr/bin/env python3
"""experts_implementation="moe_mlir" beside "grouped_mm", in one process.

For the six reference models of test/device/hf_module.py (their real H, I,
E and k through transformers' config classes, everything else the config
class's default), a causal LM of 2 decoder layers (DeepSeek-V3: both MoE)
with random bfloat16 weights on the GPU, the same model switched between
the two backends (set_experts_implementation), timed with CUDA events,
medians:
- prefill: the forward of 2,048 tokens (batch 1, no cache);
- decode: one token after a 128-token prompt with its KV cache (a fresh
  cache of the prompt before each timed step);
- the experts call alone (the model's first experts module) on T = 1 and
  T = 2048 random routings: what the backend replaces.
The whole steps include the attention, norms and routers the two share.
Output: one table, times in ms and moe_mlir / grouped_mm ratios.

    python3 bench/hf_experts.py .gpu-artifacts [model ...]
    python3 bench/hf_experts.py --build-cache DIR [--compiler BIN]
"""
import os
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "test", "device"))
import hf_module  # noqa: E402  (MODELS, and the package's path)
import moe_mlir  # noqa: E402

PREFILL, PROMPT = 2048, 128


def fields(name):
    changes = dict(num_hidden_layers=2, vocab_size=32000)
    if name == "deepseek-v3":
        changes["first_k_dense_replace"] = 0
    return {**hf_module.MODELS[name][3], **changes}


def build_cache(argv):
    cache = os.path.abspath(argv[0])
    compiler = argv[argv.index("--compiler") + 1] if "--compiler" in argv else None
    for name in hf_module.MODELS:
        spec = moe_mlir.spec_from_config(fields(name)).experts_only()
        print(f"{name}: {moe_mlir.compile_layer(spec, cache_dir=cache, compiler=compiler)}")
    return 0


def main(argv):
    import torch
    import transformers
    from moe_mlir import experts as backend
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    artifacts = os.path.abspath(argv[0])
    os.environ["MOE_CACHE_DIR"] = os.path.join(artifacts, "hf-cache")
    names = argv[1:] or list(hf_module.MODELS)
    dev = "cuda"
    print(f"{torch.cuda.get_device_name()}, transformers {transformers.__version__}, "
          f"torch {torch.__version__}")

    def median_ms(call, reps, before=None):
        times = []
        for _ in range(reps):
            state = before() if before else None
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call(state) if before else call()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    rows = []
    for name in names:
        torch.manual_seed(0)
        config = transformers.AutoConfig.for_model(**fields(name))
        with torch.device(dev):
            model = transformers.AutoModelForCausalLM.from_config(
                config, dtype=torch.bfloat16, experts_implementation="grouped_mm").eval()
        experts = next(m for m in model.modules() if hasattr(m, "gate_up_proj"))
        E, k, H = experts.gate_up_proj.shape[0], config.num_experts_per_tok, config.hidden_size
        ids = torch.randint(0, config.vocab_size, (1, PREFILL), device=dev)
        row = {"model": name}
        for impl in ("grouped_mm", "moe_mlir"):
            model.set_experts_implementation(impl)
            fn = ALL_EXPERTS_FUNCTIONS[impl]
            with torch.no_grad():
                model(ids[:, :64], use_cache=False)  # compile, load, warm up
                row[f"prefill {impl}"] = median_ms(
                    lambda: model(ids, use_cache=False), 10)
                step = ids[:, PROMPT:PROMPT + 1]

                def prompt():  # a fresh cache of the prompt, not timed
                    cache = transformers.DynamicCache(config=config)
                    model(ids[:, :PROMPT], past_key_values=cache, use_cache=True)
                    return cache

                row[f"decode {impl}"] = median_ms(
                    lambda cache: model(step, past_key_values=cache, use_cache=True), 30,
                    before=prompt)
                for T in (1, PREFILL):
                    x = torch.randn(T, H, device=dev, dtype=torch.bfloat16)
                    top = torch.argsort(torch.rand(T, E, device=dev), -1)[:, :k]
                    w = torch.softmax(torch.rand(T, k, device=dev), -1)
                    fn(experts, x, top, w)
                    row[f"experts T={T} {impl}"] = median_ms(
                        lambda: fn(experts, x, top, w), 50)
        del model, experts
        torch.cuda.empty_cache()
        rows.append(row)
        print(row, flush=True)

    cols = ["prefill", "decode", "experts T=1", f"experts T={PREFILL}"]
    print()
    print("| model | " + " | ".join(f"{c}: grouped_mm / moe_mlir ms (ratio)" for c in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for row in rows:
        cells = []
        for c in cols:
            mm, ours = row[f"{c} grouped_mm"], row[f"{c} moe_mlir"]
            cells.append(f"{mm:.3f} / {ours:.3f} ({ours / mm:.2f}x)")
        print(f"| {row['model']} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    if "--build-cache" in sys.argv:
        sys.exit(build_cache(sys.argv[sys.argv.index("--build-cache") + 1:]))
    sys.exit(main(sys.argv[1:]))
