#!/usr/bin/env python3
"""The backward grouped GEMMs on the H200: our moe.grouped_dgrad kernels (the
forward's weights read as WGMMA's N-major B) and moe.grouped_wgrad kernel
(per-expert weight gradients over ragged rows), through the runtime, beside
torch._grouped_mm on the same tensors, in one process.

Times with `bench` from shared/bench/peers.py (triton's do_bench median,
eager and CUDA-graph replay; the faster counts for each side) and prints one
JSON line per point, then a markdown table.

    python3 bench/backward_gemms.py [.gpu-artifacts] [.shared-bench]

Shapes: the down (dO [M, H] . W2 [E, H, I] -> [M, I]) and gate-up
(dGU [M, 2I] . W13 [E, 2I, H] -> [M, H]) input gradients, and the weight
gradients dW2 = dO^T . H ([E, H, I]) and dW13 = dGU^T . X ([E, 2I, H]) of
Mixtral-8x7B and Qwen3-30B-A3B at T = 4096 and 16384 tokens routed top-k by
random logits (M = T * k rows).
"""
import json
import os
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
PEERS = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else ".shared-bench")
sys.path[:0] = [os.path.join(ARTIFACTS, "site"), PEERS]
import moe_mlir  # noqa: E402
from peers import bench, route  # noqa: E402

# Ceilings measured on this card (shared/toolchain.md).
DENSE_BF16_TFLOPS = 689.0

# entry: (label, E, N, K, top-k). dgrad: grad [M, N] . W [E, N, K] -> [M, K];
# wgrad: grad [M, N]^T . rows [M, K] per expert -> [E, N, K] (the same W's).
SHAPES = {
    "mixtral_down": ("Mixtral-8x7B down dgrad", 8, 4096, 14336, 2),
    "mixtral_gate_up": ("Mixtral-8x7B gate-up dgrad", 8, 28672, 4096, 2),
    "qwen3_down": ("Qwen3-30B-A3B down dgrad", 128, 2048, 768, 8),
    "qwen3_gate_up": ("Qwen3-30B-A3B gate-up dgrad", 128, 1536, 2048, 8),
}
TOKENS = [4096, 16384]


def timed(ours, peer):
    """(ours ms, ours graph ms, peer ms): the faster of eager and graph."""
    peer_ms = min(x for x in bench(peer) if x)
    ours_eager, ours_graph = bench(ours)
    return min(ours_eager, ours_graph or ours_eager), ours_graph, peer_ms


def point(kind, label, T, M, flops, ours_ms, ours_graph, peer_ms, peer_name, err):
    p = dict(gemm=kind, shape=label, T=T, M=M, ours_ms=round(ours_ms, 4),
             ours_graph_ms=ours_graph and round(ours_graph, 4), peer=peer_name,
             peer_ms=round(peer_ms, 4), speedup=round(peer_ms / ours_ms, 3),
             ours_tflops=round(flops / ours_ms / 1e9, 1), peer_tflops=round(flops / peer_ms / 1e9, 1),
             ours_compute_roofline=round(flops / ours_ms / 1e9 / DENSE_BF16_TFLOPS, 3),
             rel_err_vs_peer=float(f"{err:.2e}"))
    print(json.dumps(p), flush=True)
    return p


def dgrad_point(bundle, entry, weights, counts, T):
    label, E, N, K, _ = SHAPES[entry]
    M = sum(counts)
    grad = torch.randn(M, N, device="cuda").to(torch.bfloat16)
    ends = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    offsets = torch.cat([torch.zeros(1, device="cuda", dtype=torch.int32), ends])
    out = torch.empty(M, K, device="cuda", dtype=torch.bfloat16)

    def peer():
        return torch._grouped_mm(grad, weights, offs=ends)

    def ours():
        bundle.grouped_dgrad(entry, grad, weights, offsets, out)

    expected = peer().float()
    out.fill_(float("nan"))
    ours()
    torch.cuda.synchronize()
    err = ((out.float() - expected).norm() / expected.norm()).item()
    return point("dgrad", label, T, M, 2.0 * M * N * K, *timed(ours, peer), "torch._grouped_mm", err)


def wgrad_point(bundle, entry, counts, T):
    label, E, N, K, _ = SHAPES[entry]
    M = sum(counts)
    grad = torch.randn(M, N, device="cuda").to(torch.bfloat16)
    rows = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    ends = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    offsets = torch.cat([torch.zeros(1, device="cuda", dtype=torch.int32), ends])
    out = torch.empty(E, N, K, device="cuda", dtype=torch.bfloat16)
    starts = [0] + ends.tolist()[:-1]

    def grouped():  # ragged K: [N, M] x [M, K] per expert
        return torch._grouped_mm(grad.t(), rows, offs=ends)

    def loop():
        return torch.stack([grad[a:b].t() @ rows[a:b] for a, b in zip(starts, ends.tolist())])

    try:
        expected, peer, peer_name = grouped().float(), grouped, "torch._grouped_mm"
    except RuntimeError as error:  # older torch: no 2-D x 2-D groups
        print(f"torch._grouped_mm refused the weight gradient ({error}); peer is a per-expert loop", flush=True)
        expected, peer, peer_name = loop().float(), loop, "per-expert torch.mm"

    def ours():
        bundle.grouped_wgrad(entry, grad, rows, offsets, out)

    out.fill_(float("nan"))
    ours()
    torch.cuda.synchronize()
    err = ((out.float() - expected).norm() / expected.norm()).item()
    return point("wgrad", label.replace("dgrad", "wgrad"), T, M, 2.0 * M * N * K, *timed(ours, peer), peer_name, err)


def main():
    torch.manual_seed(0)
    dgrad = moe_mlir.Bundle(os.path.join(ARTIFACTS, "dgradbench.moebundle"))
    wgrad = moe_mlir.Bundle(os.path.join(ARTIFACTS, "wgradbench.moebundle"))
    print(f"device: {torch.cuda.get_device_name()}", flush=True)
    points = []
    for entry, (label, E, N, K, topk) in SHAPES.items():
        weights = (torch.randn(E, N, K, device="cuda") * N ** -0.5).to(torch.bfloat16)
        for T in TOKENS:
            _, ids = route(torch.randn(T, E, device="cuda"), topk)
            counts = torch.bincount(ids.flatten(), minlength=E).tolist()
            points.append(dgrad_point(dgrad, entry, weights, counts, T))
            points.append(wgrad_point(wgrad, entry, counts, T))
        del weights
        torch.cuda.empty_cache()
    print()
    print("| GEMM | shape | T | M | ours ms | peer | peer ms | speed-up | ours TFLOP/s | peer TFLOP/s | "
          "of 689 | rel. err vs peer |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in points:
        print(f"| {p['gemm']} | {p['shape']} | {p['T']} | {p['M']} | {p['ours_ms']:.4f} | {p['peer']} | "
              f"{p['peer_ms']:.4f} | {p['speedup']:.2f} | {p['ours_tflops']:.1f} | {p['peer_tflops']:.1f} | "
              f"{p['ours_compute_roofline']:.2f} | {p['rel_err_vs_peer']:.1e} |")


if __name__ == "__main__":
    main()
