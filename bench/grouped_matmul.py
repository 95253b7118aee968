#!/usr/bin/env python3
"""Grouped GEMM benchmark on the H200: our compiled kernels (through the
runtime) beside torch._grouped_mm on the same tensors, in one process.

Times with `bench` from shared/bench/peers.py (triton's do_bench median,
eager and CUDA-graph replay; the faster counts for each side) and prints one
JSON line per point, then a markdown table for bench/RESULTS.md.

    python3 bench/grouped_matmul.py [.gpu-artifacts] [.shared-bench]

Shapes are the gate-up projections the targets name: Mixtral-8x7B
(E=8, N=28672, K=4096) and DeepSeek-V3 (E=256, N=4096, K=7168).
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
HBM_TBS = 4.4

SHAPES = {  # entry: (label, E, N, K, top-k of the model)
    "mixtral_gate_up": ("Mixtral-8x7B gate-up", 8, 28672, 4096, 2),
    "deepseek_gate_up": ("DeepSeek-V3 gate-up", 256, 4096, 7168, 8),
}
# Rows per expert with every expert active (decode through prefill), then
# routed decode batches (T tokens, random router logits, the model's top-k).
UNIFORM_ROWS = {
    "mixtral_gate_up": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048],
    "deepseek_gate_up": [1, 2, 4, 8, 16, 32, 64, 128, 256],
}
ROUTED_T = [1, 4, 16, 64]


def counts_of(ids, experts):
    return torch.bincount(ids.flatten(), minlength=experts).tolist()


def run_point(bundles, entry, weights, counts, label, workload):
    _, E, N, K, _ = SHAPES[entry]
    M = sum(counts)
    rows = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    ends = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    offsets = torch.cat([torch.zeros(1, device="cuda", dtype=torch.int32), ends])
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

    def peer():
        return torch._grouped_mm(rows, weights.transpose(1, 2), offs=ends)

    expected = peer()
    peer_eager, peer_graph = bench(peer)
    peer_ms = min(peer_eager, peer_graph or peer_eager)
    active = sum(1 for c in counts if c)
    flops = 2.0 * M * N * K
    weight_bytes = active * N * K * 2
    moved = weight_bytes + M * K * 2 + M * N * 2
    points = []
    for variant, bundle in bundles.items():
        def ours():
            bundle.grouped_matmul(entry, rows, weights, offsets, out)

        out.fill_(float("nan"))
        ours()
        torch.cuda.synchronize()
        err = ((out.float() - expected.float()).norm() / expected.float().norm()).item()
        ours_eager, ours_graph = bench(ours)
        ours_ms = min(ours_eager, ours_graph or ours_eager)
        point = dict(
            shape=label, workload=workload, variant=variant, M=M, active_experts=active,
            ours_ms=round(ours_ms, 4), ours_eager_ms=round(ours_eager, 4),
            ours_graph_ms=ours_graph and round(ours_graph, 4),
            peer_ms=round(peer_ms, 4), speedup=round(peer_ms / ours_ms, 3),
            ours_tflops=round(flops / ours_ms / 1e9, 1), peer_tflops=round(flops / peer_ms / 1e9, 1),
            ours_weight_tbs=round(weight_bytes / ours_ms / 1e9, 2),
            peer_weight_tbs=round(weight_bytes / peer_ms / 1e9, 2),
            ours_compute_roofline=round(flops / ours_ms / 1e9 / DENSE_BF16_TFLOPS, 3),
            ours_memory_roofline=round(moved / ours_ms / 1e9 / HBM_TBS, 3),
            rel_err_vs_peer=float(f"{err:.2e}"))
        print(json.dumps(point), flush=True)
        points.append(point)
    return points


def main():
    torch.manual_seed(0)
    # Every bench-<variant>.moebundle runs beside the same peer call
    # (MOE_BENCH_BUNDLES="a,b" picks some).
    picked = os.environ.get("MOE_BENCH_BUNDLES")
    bundles = {f[len("bench-"):-len(".moebundle")]: moe_mlir.Bundle(os.path.join(ARTIFACTS, f))
               for f in sorted(os.listdir(ARTIFACTS)) if f.startswith("bench-") and f.endswith(".moebundle")
               and (not picked or f[len("bench-"):-len(".moebundle")] in picked.split(","))}
    only = os.environ.get("MOE_BENCH_ONLY")  # e.g. "mixtral_gate_up"
    max_rows = int(os.environ.get("MOE_BENCH_MAX_ROWS", "1000000"))  # e.g. 16 for decode only
    points = []
    for entry, (label, E, N, K, topk) in SHAPES.items():
        if only and entry not in only.split(","):
            continue
        weights = (torch.randn(E, N, K, device="cuda") * K ** -0.5).to(torch.bfloat16)
        for r in (r for r in UNIFORM_ROWS[entry] if r <= max_rows):
            points += run_point(bundles, entry, weights, [r] * E, label, f"{r} rows x {E} experts")
        for T in ROUTED_T:
            logits = torch.randn(T, E, device="cuda")
            _, ids = route(logits, topk)
            points += run_point(bundles, entry, weights, counts_of(ids, E), label, f"routed T={T}, top-{topk}")
        del weights
        torch.cuda.empty_cache()
    print()
    print("| shape | workload | kernels | M | active | ours ms | torch._grouped_mm ms | speed-up | ours TFLOP/s | "
          "of 689 | ours weights TB/s | of 4.4 TB/s (all bytes) | rel. err vs peer |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in points:
        print(f"| {p['shape']} | {p['workload']} | {p['variant']} | {p['M']} | {p['active_experts']} | {p['ours_ms']:.4f} | "
              f"{p['peer_ms']:.4f} | {p['speedup']:.2f} | {p['ours_tflops']:.1f} | "
              f"{p['ours_compute_roofline']:.2f} | {p['ours_weight_tbs']:.2f} | {p['ours_memory_roofline']:.2f} | "
              f"{p['rel_err_vs_peer']:.1e} |")


if __name__ == "__main__":
    main()
