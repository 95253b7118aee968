#!/usr/bin/env python3
"""Input-gradient (dgrad) grouped GEMM benchmark on the H200: our
moe.grouped_dgrad kernels (the forward's weights read as WGMMA's N-major B,
through the runtime) beside torch._grouped_mm on the same tensors, in one
process.

Times with `bench` from shared/bench/peers.py (triton's do_bench median,
eager and CUDA-graph replay; the faster counts for each side) and prints one
JSON line per point, then a markdown table.

    python3 bench/grouped_dgrad.py [.gpu-artifacts] [.shared-bench]

Shapes: the down (dO [M, H] . W2 [E, H, I] -> [M, I]) and gate-up
(dGU [M, 2I] . W13 [E, 2I, H] -> [M, H]) input gradients of Mixtral-8x7B
and Qwen3-30B-A3B at T = 4096 and 16384 tokens routed top-k by random
logits (M = T * k rows).
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

SHAPES = {  # entry: (label, E, N_fwd, K_fwd, top-k); out = grad [M, N_fwd] . W [E, N_fwd, K_fwd]
    "mixtral_down": ("Mixtral-8x7B down dgrad", 8, 4096, 14336, 2),
    "mixtral_gate_up": ("Mixtral-8x7B gate-up dgrad", 8, 28672, 4096, 2),
    "qwen3_down": ("Qwen3-30B-A3B down dgrad", 128, 2048, 768, 8),
    "qwen3_gate_up": ("Qwen3-30B-A3B gate-up dgrad", 128, 1536, 2048, 8),
}
TOKENS = [4096, 16384]


def run_point(bundle, entry, weights, counts, T):
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
    peer_ms = min(x for x in bench(peer) if x)
    ours_eager, ours_graph = bench(ours)
    ours_ms = min(ours_eager, ours_graph or ours_eager)
    flops = 2.0 * M * N * K
    point = dict(shape=label, T=T, M=M, ours_ms=round(ours_ms, 4), ours_graph_ms=ours_graph and round(ours_graph, 4),
                 peer_ms=round(peer_ms, 4), speedup=round(peer_ms / ours_ms, 3),
                 ours_tflops=round(flops / ours_ms / 1e9, 1), peer_tflops=round(flops / peer_ms / 1e9, 1),
                 ours_compute_roofline=round(flops / ours_ms / 1e9 / DENSE_BF16_TFLOPS, 3),
                 rel_err_vs_peer=float(f"{err:.2e}"))
    print(json.dumps(point), flush=True)
    return point


def main():
    torch.manual_seed(0)
    bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "dgradbench.moebundle"))
    print(f"device: {torch.cuda.get_device_name()}", flush=True)
    points = []
    for entry, (label, E, N, K, topk) in SHAPES.items():
        weights = (torch.randn(E, N, K, device="cuda") * N ** -0.5).to(torch.bfloat16)
        for T in TOKENS:
            _, ids = route(torch.randn(T, E, device="cuda"), topk)
            counts = torch.bincount(ids.flatten(), minlength=E).tolist()
            points.append(run_point(bundle, entry, weights, counts, T))
        del weights
        torch.cuda.empty_cache()
    print()
    print("| shape | T | M | ours ms | torch._grouped_mm ms | speed-up | ours TFLOP/s | peer TFLOP/s | "
          "of 689 | rel. err vs peer |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for p in points:
        print(f"| {p['shape']} | {p['T']} | {p['M']} | {p['ours_ms']:.4f} | {p['peer_ms']:.4f} | {p['speedup']:.2f} | "
              f"{p['ours_tflops']:.1f} | {p['peer_tflops']:.1f} | {p['ours_compute_roofline']:.2f} | "
              f"{p['rel_err_vs_peer']:.1e} |")


if __name__ == "__main__":
    main()
