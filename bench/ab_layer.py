#!/usr/bin/env python3
"""A/B of whole-layer bundles on the same data, in one process: each
bundle's layer is first checked against `reference` (float32, output
poisoned), then captured in a CUDA graph; the graphs are timed in
alternating rounds (medians), and one replay of each is profiled per
kernel (CUPTI through torch.profiler, programmatic dependent launch off so
that kernels do not overlap).

    python3 bench/ab_layer.py ARTIFACTS SHARED a.moebundle,b.moebundle model:T ...

e.g. `qwen3_30b_a3b:1 deepseek_v3:128`. The first bundle is the baseline of
the printed ratios. A bundle named `x.moebundle@nopdl` is x timed without
programmatic dependent launch. Block-FP8 layers (layer_fp8.v1 entries) take the
weights quantized by their bundle's prepack entries and are checked against
the same bf16 reference within 0.1 (the e4m3 rounding; test/device/
fp8_layer.py holds their exact checks).
"""
import os
import statistics
import sys
from collections import defaultdict

import torch

ARTIFACTS = os.path.abspath(sys.argv[1])
PEERS = os.path.abspath(sys.argv[2])
sys.path[:0] = [os.path.join(ARTIFACTS, "site"), PEERS]
import moe_mlir  # noqa: E402
from peers import SHAPES, bench, reference  # noqa: E402

NAMES = {"mixtral_8x7b": "mixtral-8x7b", "qwen3_30b_a3b": "qwen3-30b-a3b",
         "olmoe_1b_7b": "olmoe-1b-7b", "deepseek_v3": "deepseek-v3",
         "gpt_oss_120b": "gpt-oss-120b"}
ROUNDS = 5
PROFILED_REPLAYS = 10


def capture(call, pdl=True):
    """`call` captured in a CUDA graph; without programmatic dependent
    launch when not `pdl` (the runtime reads MOE_RUNTIME_PDL at each call,
    so a graph keeps what it was captured with)."""
    if not pdl:
        os.environ["MOE_RUNTIME_PDL"] = "0"
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    os.environ.pop("MOE_RUNTIME_PDL", None)
    return graph


def kernel_times(graph):
    """Median µs per replay of each kernel of `graph` (captured without
    programmatic dependent launch: kernels must not overlap)."""
    times = defaultdict(list)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILED_REPLAYS):
            graph.replay()
        torch.cuda.synchronize()
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            times[event.name].append(event.device_time)
    return {name: statistics.median(v) * len(v) / PROFILED_REPLAYS for name, v in times.items()}


def main():
    names = sys.argv[3].split(",")
    bundles = [moe_mlir.Bundle(os.path.join(ARTIFACTS, n.split("@")[0])) for n in names]
    failed = 0
    for point in sys.argv[4:]:
        name, T = point.split(":")
        T = int(T)
        model = NAMES[name]
        H, I, E, k = SHAPES[model]
        torch.manual_seed(T)
        dev = "cuda"
        x = torch.randn(T, H, device=dev).to(torch.bfloat16)
        logits = torch.randn(T, E, device=dev)
        w13 = (torch.randn(E, 2 * I, H, device=dev) * H ** -0.5).to(torch.bfloat16)
        w2 = (torch.randn(E, H, I, device=dev) * I ** -0.5).to(torch.bfloat16)
        bias = torch.randn(E, device=dev) * 0.1 if model == "deepseek-v3" else None
        gptoss = model == "gpt-oss-120b"
        b13 = torch.randn(E, 2 * I, device=dev).to(torch.bfloat16) * 0.1 if gptoss else None
        b2 = torch.randn(E, H, device=dev) * 0.1 if gptoss else None
        want = reference(model, x.float(), logits, w13.float(), w2.float(), b13=b13,
                         b2=b2, score_bias=bias).float()
        graphs, profiled, buffers = [], [], []  # the graphs read these: keep them alive
        for label, bundle in zip(names, bundles):
            out = torch.full((T, H), float("nan"), device=dev, dtype=torch.bfloat16)
            workspace = torch.full((bundle.layer_workspace_bytes(name, T, H, I),), 0xFF,
                                   device=dev, dtype=torch.uint8)
            fp8 = bundle.entry(name).abi == "layer_fp8.v1"
            weights, scales = (w13, w2), {}
            if fp8:
                (w13q, w13s), (w2q, w2s) = (bundle.quantize(f"{name}_prepack", w13),
                                            bundle.quantize(f"{name}_prepack_0", w2))
                weights = (w13q, w2q)
                scales = dict(gate_up_weights_scale=w13s, down_weights_scale=w2s)

            def call(bundle=bundle, out=out, workspace=workspace, weights=weights, scales=scales):
                bundle.layer(name, x, logits, *weights, score_bias=bias, gate_up_bias=b13,
                             down_bias=b2, out=out, workspace=workspace, **scales)

            buffers.append((out, workspace, weights, scales))
            call()
            torch.cuda.synchronize()
            err = ((out.float() - want).norm() / want.norm()).item()
            ok = err <= (0.1 if fp8 else 1e-2)
            failed += not ok
            print(f"{name} T={T} {label}: rel L2 {err:.2e} {'ok' if ok else 'FAILED'}")
            graphs.append(capture(call, pdl=not label.endswith("@nopdl")))
            profiled.append(capture(call, pdl=False))
        medians = [[] for _ in graphs]
        for _ in range(ROUNDS):
            for i, graph in enumerate(graphs):
                medians[i].append(bench(graph.replay, graphable=False)[0])
        base = statistics.median(medians[0])
        for label, graph, values in zip(names, profiled, medians):
            ms = statistics.median(values)
            kernels = kernel_times(graph)
            gemms = "  ".join(f"{t:.1f}" for n, t in kernels.items() if "grouped_matmul" in n)
            print(f"  {label:28s} {ms * 1000:9.1f} us  {base / ms:.3f}x  "
                  f"kernels {sum(kernels.values()):.1f} us, GEMMs {gemms}")
        del w13, w2, graphs, profiled, buffers
        torch.cuda.empty_cache()
    print(f"{failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
