#!/usr/bin/env python3
"""Where a whole layer's time goes: each kernel of one layer.v1 call, timed
by the CUDA profiler (CUPTI, through torch.profiler) inside CUDA-graph
replays, beside the replay's own median.

    python3 bench/profile_layer.py .gpu-artifacts .shared-bench model:T ...

e.g. `qwen3_30b_a3b:1 mixtral_8x7b:1`; MOE_LAYER_BUNDLE names another
bundle of .gpu-artifacts (fp8layer.moebundle: its layer_fp8.v1 layers, the
weights quantized first by their prepack entries). Per kernel: the median device time
over the replays, launched without programmatic dependent launch (so
kernels do not overlap); `gaps` is the replay time minus the kernels' sum
(launch latency between kernels). Each point's graph replay is also timed
with programmatic dependent launch, on the same data.
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
from peers import SHAPES, bench  # noqa: E402

NAMES = {"mixtral_8x7b": "mixtral-8x7b", "qwen3_30b_a3b": "qwen3-30b-a3b",
         "olmoe_1b_7b": "olmoe-1b-7b", "deepseek_v3": "deepseek-v3",
         "gpt_oss_120b": "gpt-oss-120b"}
REPLAYS = 20


def main():
    torch.manual_seed(0)  # the same routing in every run
    bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, os.environ.get("MOE_LAYER_BUNDLE", "layer.moebundle")))
    for point in sys.argv[3:]:
        name, T = point.split(":")
        T = int(T)
        model = NAMES[name]
        H, I, E, k = SHAPES[model]
        dev = "cuda"
        x = torch.randn(T, H, device=dev).to(torch.bfloat16)
        logits = torch.randn(T, E, device=dev)
        w13 = (torch.randn(E, 2 * I, H, device=dev) * H ** -0.5).to(torch.bfloat16)
        w2 = (torch.randn(E, H, I, device=dev) * I ** -0.5).to(torch.bfloat16)
        bias = torch.zeros(E, device=dev) if model == "deepseek-v3" else None
        gptoss = model == "gpt-oss-120b"
        b13 = torch.zeros(E, 2 * I, device=dev, dtype=torch.bfloat16) if gptoss else None
        b2 = torch.zeros(E, H, device=dev) if gptoss else None
        scales = {}
        if bundle.entry(name).abi == "layer_fp8.v1":
            w13, w13s = bundle.quantize(f"{name}_prepack", w13)
            w2, w2s = bundle.quantize(f"{name}_prepack_0", w2)
            scales = dict(gate_up_weights_scale=w13s, down_weights_scale=w2s)
        out = torch.empty(T, H, device=dev, dtype=torch.bfloat16)
        workspace = torch.empty(bundle.layer_workspace_bytes(name, T, H, I), device=dev,
                                dtype=torch.uint8)

        def call():
            bundle.layer(name, x, logits, w13, w2, score_bias=bias, gate_up_bias=b13,
                         down_bias=b2, out=out, workspace=workspace, **scales)

        # The same layer captured with and without programmatic dependent
        # launch (the runtime reads MOE_RUNTIME_PDL at each call), timed
        # alternately on the same data.
        graphs = {}
        for pdl in ("1", "0"):
            os.environ["MOE_RUNTIME_PDL"] = pdl
            call()
            torch.cuda.synchronize()
            graphs[pdl] = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graphs[pdl]):
                call()
        os.environ.pop("MOE_RUNTIME_PDL")
        replays = {"1": [], "0": []}
        for _ in range(3):
            for pdl, graph in graphs.items():
                replays[pdl].append(bench(graph.replay, graphable=False)[0])
        replay = statistics.median(replays["0"])
        graph = graphs["0"]
        times = defaultdict(list)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(REPLAYS):
                graph.replay()
            torch.cuda.synchronize()
        for event in prof.events():
            if event.device_type == torch.autograd.DeviceType.CUDA:
                times[event.name].append(event.device_time)
        with_pdl = statistics.median(replays["1"])
        print(f"{name} T={T}: graph replay {replay * 1000:.1f} us, with programmatic dependent "
              f"launch {with_pdl * 1000:.1f} us ({replay / with_pdl:.3f}x); kernels without:")
        total = 0.0
        for kernel, values in times.items():
            per_call = statistics.median(values) * len(values) / REPLAYS
            total += per_call
            print(f"  {per_call:8.1f} us  x{len(values) // REPLAYS}  {kernel[:90]}")
        print(f"  {replay * 1000 - total:8.1f} us  gaps (replay minus kernels)")
        del w13, w2
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
