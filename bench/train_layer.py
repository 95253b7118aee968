#!/usr/bin/env python3
"""Forward + backward of one MoE layer: moe_mlir.TrainableMoELayer beside the
transformers 5.x block trained with experts_implementation="grouped_mm" and
beside a torch._grouped_mm autograd peer (shared/bench/peers.py's
moe_grouped), in one process, on the same weights and data.

For Mixtral-8x7B, Qwen3-30B-A3B, OLMoE-1B-7B, DeepSeek-V3 and GPT-OSS-120B
(their real H, I, E, k; DeepSeek-V3 with its 256 experts and shared expert;
GPT-OSS without the torch._grouped_mm peer, which has no expert biases or
interleaved weights) at T = 4096
and 16384 tokens: each side's step is the router linear, the layer and the
backward of a random output gradient into the tokens, the router weight,
the expert weights and the shared expert's (their .grad set to None first,
so no side accumulates); all three sides on the one block's parameters;
median ms of triton's do_bench (eager; CUDA-graph replays where the side
can be captured), the device time of the layer's dgrad and wgrad kernels in
one profiled step (as TFLOP/s of their 6 M H I + 6 T H Is each), TFLOP/s of
the useful work (forward 6 M H I + 6 T H Is,
backward twice that, M = T k, Is the shared expert's width) and the peak
memory the step allocates above what it holds before. Output: one table,
and ratios to grouped_mm.

    python3 bench/train_layer.py .gpu-artifacts .shared-bench [model ...]

With --recompute-rows, another side runs the layer compiled with
recompute_rows (the backward permutes the tokens again instead of saving
the permuted rows), and a table gives its time and peak memory beside the
default's.

GPT-OSS's layer trains on its experts' weights as transformers keeps them
(the default). With --copy-layout, it also runs with native_layout=False
(the weights copied into the runtime's layout each step), and a table gives
its time and peak memory beside the default's.

With --breakdown, a third table gives our step's device time by kind of
kernel (one profiled step): where the time goes.

With --baseline=DIR, a fourth side runs TrainableMoELayer on the bundles of
another hf-cache folder (an earlier compiler's, scripts/build-hf-cache.sh) in
the same process, and a second table gives the A/B: time and peak memory.
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "test", "device"))
import train_layer  # noqa: E402  (MODELS, and the package's path)
import moe_mlir  # noqa: E402

TOKENS = (4096, 16384)


#: The kernels of a step by what they do, first match of the name wins:
#: the dgrads read the weights N-major (`_wkn_`), the fused one with the
#: activation's gradient (`actgrad`).
KERNEL_CLASSES = (
    ("wgrad", ("grouped_wgrad", "moe_bias_grad")),
    ("dgrad", ("_wkn_",)),
    ("forward GEMMs", ("grouped_matmul",)),
    ("activation", ("moe_swiglu",)),
    ("route", ("moe_route",)),
    ("permute / combine", ("moe_permute", "moe_unpermute", "moe_constant")),
)


def step_kernels(fn):
    """{class: ms} of one step of `fn` under the CUDA profiler: the device
    time of its kernels by KERNEL_CLASSES, the rest (torch's router linear
    and its gradient, copies, fills) as "torch"."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    times = {}
    for event in prof.key_averages():
        us = getattr(event, "device_time_total", None)
        if us is None:
            us = event.cuda_time_total
        if not us:
            continue
        kind = next((k for k, names in KERNEL_CLASSES
                     if any(n in event.key for n in names)), "torch")
        times[kind] = times.get(kind, 0.0) + us / 1e3
    return times


def main(argv):
    import torch
    import transformers

    baseline = None
    breakdown = "--breakdown" in argv
    recompute_rows = "--recompute-rows" in argv
    copy_layout = "--copy-layout" in argv
    for arg in list(argv):
        if arg.startswith("--baseline="):
            baseline = os.path.abspath(arg.split("=", 1)[1])
            argv.remove(arg)
        elif arg in ("--breakdown", "--recompute-rows", "--copy-layout"):
            argv.remove(arg)
    artifacts = os.path.abspath(argv[0])
    sys.path.insert(0, os.path.abspath(argv[1]))
    import peers

    cache = os.path.join(artifacts, "hf-cache")
    models = dict(train_layer.MODELS, **train_layer.BENCH_MODELS)
    names = argv[2:] or [n for n in models if n not in (
        "tiny-mixtral", "deepseek-v3-e32", "gpt-oss-20b")]
    dev = "cuda"
    print(f"{torch.cuda.get_device_name()}, transformers {transformers.__version__}, "
          f"torch {torch.__version__}")

    rows, gemms = [], {}
    for name in names:
        block = train_layer.make_block(models[name], "grouped_mm")
        layer = moe_mlir.TrainableMoELayer.from_hf(block, cache_dir=cache)
        base_layer = (moe_mlir.TrainableMoELayer.from_hf(block, cache_dir=baseline)
                      if baseline else None)
        rows_layer = (moe_mlir.TrainableMoELayer.from_hf(block, cache_dir=cache,
                                                         recompute_rows=True)
                      if recompute_rows else None)
        copy_layer = (moe_mlir.TrainableMoELayer.from_hf(block, cache_dir=cache,
                                                         native_layout=False)
                      if copy_layout and layer.spec.activation == "gptoss" else None)
        E, H, I, k = (layer.spec.experts, layer.spec.hidden,
                      layer.spec.intermediate, layer.spec.top_k)
        w_router = train_layer.router_of(block).weight
        w13, w2 = block.experts.gate_up_proj, block.experts.down_proj
        shared = getattr(block, "shared_experts", None)
        shared_weights = ([getattr(shared, n + "_proj").weight
                           for n in ("gate", "up", "down")] if shared else [])
        Is = shared_weights[2].shape[1] if shared else 0
        model = name if name in peers.MODELS else None
        for T in TOKENS:
            x = torch.randn(1, T, H, device=dev).to(torch.bfloat16).requires_grad_()
            dy = torch.randn(1, T, H, device=dev).to(torch.bfloat16)

            def step(module, params):
                def fn():
                    for p in params:
                        p.grad = None
                    x.grad = None
                    out = module(x)
                    (out[0] if isinstance(out, tuple) else out).backward(dy)
                return fn

            def peer(x2):
                logits = torch.nn.functional.linear(x2.view(T, H), w_router)
                y = peers.moe_grouped(x2.view(T, H), logits, w13, w2, k, model)
                if shared:
                    sg, su, sd = shared_weights
                    t = x2.view(T, H)
                    y = y + (torch.nn.functional.silu(t @ sg.t()) * (t @ su.t())) @ sd.t()
                return y.view(1, T, H)

            params = list(block.parameters())
            sides = {
                "moe_mlir": step(layer, params),
                "grouped_mm": step(block, params),
            }
            if baseline:
                sides["baseline"] = step(base_layer, params)
            if rows_layer:
                sides["recompute_rows"] = step(rows_layer, params)
            if copy_layer:
                sides["copy_layout"] = step(copy_layer, params)
            # The peer runs the [E, 2I, H] layout without expert biases:
            # not GPT-OSS's layer.
            if not layer.spec.expert_bias:
                sides["torch._grouped_mm"] = step(peer, params)
            flops = 18 * T * k * H * I + 18 * T * H * Is
            # Each of the backward's dgrad and wgrad GEMMs: 6 M H I (and
            # 6 T H Is for a shared expert).
            gemm_flops = 6 * T * k * H * I + 6 * T * H * Is
            result = {}
            for side, fn in sides.items():
                try:
                    fn()
                    torch.cuda.synchronize()
                    base = torch.cuda.memory_allocated()
                    torch.cuda.reset_peak_memory_stats()
                    fn()
                    torch.cuda.synchronize()
                    peak = (torch.cuda.max_memory_allocated() - base) / 2**30
                    eager, graph = peers.bench(fn, graphable=True)
                    best = min(t for t in (eager, graph) if t is not None)
                    result[side] = (eager, graph, best, peak)
                    if side == "moe_mlir":
                        gemms[(name, T)] = step_kernels(fn)
                except Exception as error:
                    print(f"{name} T={T} {side}: {type(error).__name__}: {error}")
                    torch.cuda.synchronize()
                for p in params:  # the next side starts from no gradients
                    p.grad = None
                x.grad = None
            rows.append((name, T, flops, result, gemm_flops))
            for side, (eager, graph, best, peak) in result.items():
                print(f"{name:14s} T={T:6d} {side:18s} eager {eager:8.3f} ms  graph "
                      f"{graph if graph is None else round(graph, 3)!s:>8} ms  "
                      f"{flops / best / 1e9:6.0f} TFLOP/s  peak +{peak:.2f} GiB", flush=True)
        del layer, base_layer, rows_layer, block, w13, w2, w_router, shared, shared_weights, params
        torch.cuda.empty_cache()

    print("\n| model | T | moe_mlir ms | grouped_mm ms | torch._grouped_mm ms | "
          "moe_mlir / grouped_mm | moe_mlir TFLOP/s | dgrad TFLOP/s | "
          "wgrad TFLOP/s | peak GiB (ours / grouped_mm) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, T, flops, result, gemm_flops in rows:
        kinds = gemms.get((name, T), {})
        dgrad_ms, wgrad_ms = kinds.get("dgrad", 0.0), kinds.get("wgrad", 0.0)
        dgrad = f"{gemm_flops / dgrad_ms / 1e9:.0f}" if dgrad_ms else "-"
        wgrad = f"{gemm_flops / wgrad_ms / 1e9:.0f}" if wgrad_ms else "-"
        def ms(side):
            return f"{result[side][2]:.2f}" if side in result else "-"
        ratio = (f"{result['moe_mlir'][2] / result['grouped_mm'][2]:.2f}"
                 if "moe_mlir" in result and "grouped_mm" in result else "-")
        tflops = (f"{flops / result['moe_mlir'][2] / 1e9:.0f}"
                  if "moe_mlir" in result else "-")
        peak = " / ".join(f"{result[s][3]:.2f}" if s in result else "-"
                          for s in ("moe_mlir", "grouped_mm"))
        print(f"| {name} | {T} | {ms('moe_mlir')} | {ms('grouped_mm')} | "
              f"{ms('torch._grouped_mm')} | {ratio} | {tflops} | {dgrad} | "
              f"{wgrad} | {peak} |")
    if breakdown:
        kinds = [k for k, _ in KERNEL_CLASSES] + ["torch"]
        print("\nOur step's device time by kernel (ms, one profiled eager "
              "step; the wgrad includes the bias gradients):\n")
        print("| model | T | step ms | " + " | ".join(kinds) + " |")
        print("|---|---|---|" + "---|" * len(kinds))
        for name, T, flops, result, gemm_flops in rows:
            times = gemms.get((name, T))
            if times and "moe_mlir" in result:
                print(f"| {name} | {T} | {result['moe_mlir'][2]:.2f} | " +
                      " | ".join(f"{times.get(k, 0.0):.2f}" for k in kinds) + " |")
    # Two sides of ours in one process: times, first / second, peak memory
    # (and the block's).
    def pair_table(title, first, second, ratio):
        print(f"\n{title} (same process):\n")
        print(f"| model | T | {first} ms | {second} ms | {ratio} | "
              f"peak GiB ({first} / {second} / grouped_mm) |")
        print("|---|---|---|---|---|---|")
        for name, T, flops, result, gemm_flops in rows:
            if first in result and second in result:
                a, b = result[first], result[second]
                block_peak = (f"{result['grouped_mm'][3]:.2f}"
                              if "grouped_mm" in result else "-")
                print(f"| {name} | {T} | {a[2]:.2f} | {b[2]:.2f} | "
                      f"{a[2] / b[2]:.3f} | {a[3]:.2f} / {b[3]:.2f} / {block_peak} |")

    if recompute_rows:
        pair_table("recompute_rows against the default", "recompute_rows",
                   "moe_mlir", "time ratio")
    if copy_layout:
        pair_table("GPT-OSS copy_layout (native_layout=False) against the default",
                   "copy_layout", "moe_mlir", "time ratio")
    if baseline:
        pair_table(f"A/B against {baseline}", "baseline", "moe_mlir", "speed-up")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
