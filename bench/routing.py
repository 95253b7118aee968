#!/usr/bin/env python3
"""Routing, permutation and combine kernels on the H200: our moe.route /
moe.permute / moe.unpermute kernels (routing.moebundle, through the runtime)
beside the team's torch routing (`route_model` of shared/bench/peers.py), a
torch stable-sort permutation and a torch gather-sum combine, on the same data in one process. Medians of the faster of eager
and CUDA-graph replay (`bench` of peers.py). Prints a markdown table.

    python3 bench/routing.py [.gpu-artifacts] [.shared-bench]
"""
import os
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
PEERS = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else ".shared-bench")
sys.path[:0] = [os.path.join(ARTIFACTS, "site"), PEERS]
import moe_mlir  # noqa: E402
from peers import SHAPES, bench, route_model  # noqa: E402

ROUTERS = {"mixtral_8x7b": "mixtral-8x7b", "qwen3_30b_a3b": "qwen3-30b-a3b",
           "deepseek_v3": "deepseek-v3", "gpt_oss_120b": "gpt-oss-120b"}
COMBINES = {"combine_k2_i64_weighted": (4096, 2, torch.int64, True),
            "combine_k8_i32": (2048, 8, torch.int32, False)}
PERMUTES = {"permute_e128_k8": (128, 8, 2048), "permute_e8_k2": (8, 2, 4096)}
TOKENS = [1, 64, 1024, 8192]


def best(fn):
    return min(x for x in bench(fn) if x)


def main():
    bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "routing.moebundle"))
    print("| kernel | T | ours us | torch us | speed-up |")
    print("|---|---|---|---|---|")
    for entry, model in ROUTERS.items():
        _, _, E, k = SHAPES[model]
        for T in TOKENS:
            logits = torch.randn(T, E, device="cuda")
            bias = torch.randn(E, device="cuda") * 0.1 if model == "deepseek-v3" else None
            ids = torch.empty(T, k, device="cuda", dtype=torch.int32)
            weights = torch.empty(T, k, device="cuda")
            ours = best(lambda: bundle.route(entry, logits, bias=bias, ids=ids, weights=weights))
            peer = best(lambda: route_model(model, logits, k, bias))
            print(f"| route {model} | {T} | {ours * 1e3:.1f} | {peer * 1e3:.1f} | {peer / ours:.2f} |", flush=True)
    for entry, (E, k, H) in PERMUTES.items():
        for T in TOKENS:
            tokens = torch.randn(T, H, device="cuda").to(torch.bfloat16)
            ids = torch.randint(0, E, (T, k), device="cuda", dtype=torch.int32)
            rows = torch.empty(T * k, H, device="cuda", dtype=torch.bfloat16)
            offsets = torch.empty(E + 1, device="cuda", dtype=torch.int64)
            slots = torch.empty(T, k, device="cuda", dtype=torch.int64)
            ours = best(lambda: bundle.permute(entry, tokens, ids, rows=rows, offsets=offsets, slots=slots))

            def peer():
                flat = ids.flatten()
                order = torch.sort(flat, stable=True)[1]
                counts = torch.bincount(flat, minlength=E)
                return tokens[order // k], torch.cat([counts.new_zeros(1), counts.cumsum(0)]), order

            ms = best(peer)
            print(f"| permute E={E} k={k} H={H} | {T} | {ours * 1e3:.1f} | {ms * 1e3:.1f} | {ms / ours:.2f} |",
                  flush=True)
    for entry, (H, k, dtype, weighted) in COMBINES.items():
        for T in TOKENS:
            rows = torch.randn(T * k, H, device="cuda").to(torch.bfloat16)
            slots = torch.randperm(T * k, device="cuda").view(T, k).to(dtype)
            w = torch.rand(T, k, device="cuda") if weighted else None
            out = torch.empty(T, H, device="cuda", dtype=torch.bfloat16)
            ours = best(lambda: bundle.unpermute(entry, rows, slots, weights=w, out=out))

            def peer():
                g = rows[slots.long()].float()
                return (g * w[:, :, None] if w is not None else g).sum(1).to(torch.bfloat16)

            ms = best(peer)
            moved = (T * k * H + T * H) * 2
            print(f"| unpermute H={H} k={k} | {T} | {ours * 1e3:.1f} ({moved / ours / 1e9:.2f} TB/s) | "
                  f"{ms * 1e3:.1f} | {ms / ours:.2f} |", flush=True)


if __name__ == "__main__":
    main()
