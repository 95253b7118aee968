#!/usr/bin/env python3
"""Fused expert MLP benchmark on the H200: our moe.expert_mlp (gate-up GEMM
with SwiGLU in its epilogue, then the down GEMM with the routing weight in
its epilogue, through the runtime) beside torch._grouped_mm + torch SwiGLU +
torch._grouped_mm + scale on the same tensors, in one process.

Rows are already permuted (routing, permutation and combine are not part of
this op). Times with `bench` from shared/bench/peers.py (triton's do_bench
median; the faster of eager and CUDA-graph replay for each side). Prints one
JSON line per point, then a markdown table.

    python3 bench/expert_mlp.py [.gpu-artifacts] [.shared-bench]
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

DENSE_BF16_TFLOPS = 689.0
HBM_TBS = 4.4
SHAPES = {  # entry: (label, E, H, I, top-k)
    "mixtral_mlp": ("Mixtral-8x7B experts", 8, 4096, 14336, 2),
    "qwen3_mlp": ("Qwen3-30B-A3B experts", 128, 2048, 768, 8),
    "deepseek_mlp": ("DeepSeek-V3 routed experts", 256, 7168, 2048, 8),
}
TOKENS = [1, 16, 128, 1024, 8192]


def main():
    torch.manual_seed(0)
    # Every mlpbench-<variant>.moebundle runs beside the same peer call
    # (MOE_BENCH_BUNDLES="a,b" picks some).
    picked = os.environ.get("MOE_BENCH_BUNDLES")
    bundles = {f[len("mlpbench-"):-len(".moebundle")]: moe_mlir.Bundle(os.path.join(ARTIFACTS, f))
               for f in sorted(os.listdir(ARTIFACTS)) if f.startswith("mlpbench-") and f.endswith(".moebundle")
               and (not picked or f[len("mlpbench-"):-len(".moebundle")] in picked.split(","))}
    only = os.environ.get("MOE_BENCH_ONLY")
    tokens = [int(t) for t in os.environ.get("MOE_BENCH_TOKENS", ",".join(map(str, TOKENS))).split(",")]
    points = []
    for entry, (label, E, H, I, topk) in SHAPES.items():
        if only and entry not in only.split(","):
            continue
        w13 = (torch.randn(E, 2 * I, H, device="cuda") * H ** -0.5).to(torch.bfloat16)
        w2 = (torch.randn(E, H, I, device="cuda") * I ** -0.5).to(torch.bfloat16)
        for T in tokens:
            _, ids = route(torch.randn(T, E, device="cuda"), topk)
            counts = torch.bincount(ids.flatten(), minlength=E)
            M = int(counts.sum())
            ends = counts.cumsum(0).to(torch.int32)
            offsets = torch.cat([torch.zeros(1, device="cuda", dtype=torch.int32), ends])
            rows = torch.randn(M, H, device="cuda").to(torch.bfloat16)
            scale = torch.rand(M, device="cuda") + 0.5
            out = torch.empty(M, H, device="cuda", dtype=torch.bfloat16)
            workspace = torch.empty(M, I, device="cuda", dtype=torch.bfloat16)

            def peer():
                gu = torch._grouped_mm(rows, w13.transpose(1, 2), offs=ends)
                h = torch.nn.functional.silu(gu[:, :I]) * gu[:, I:]
                return (torch._grouped_mm(h, w2.transpose(1, 2), offs=ends).float() * scale[:, None]).to(torch.bfloat16)

            expected = peer()
            peer_ms = min(x for x in bench(peer) if x)
            active = int((counts > 0).sum())
            flops = 2.0 * M * H * 3 * I
            weight_bytes = active * 3 * I * H * 2
            for variant, bundle in bundles.items():
                def ours():
                    bundle.expert_mlp(entry, rows, offsets, w13, w2, row_scale=scale, out=out, workspace=workspace)

                out.fill_(float("nan"))
                ours()
                torch.cuda.synchronize()
                err = ((out.float() - expected.float()).norm() / expected.float().norm()).item()
                ours_ms = min(x for x in bench(ours) if x)
                point = dict(shape=label, T=T, M=M, variant=variant, active_experts=active,
                             ours_ms=round(ours_ms, 4), peer_ms=round(peer_ms, 4),
                             speedup=round(peer_ms / ours_ms, 3),
                             ours_tflops=round(flops / ours_ms / 1e9, 1),
                             ours_weight_tbs=round(weight_bytes / ours_ms / 1e9, 2),
                             peer_weight_tbs=round(weight_bytes / peer_ms / 1e9, 2),
                             rel_err_vs_peer=float(f"{err:.2e}"))
                print(json.dumps(point), flush=True)
                points.append(point)
        del w13, w2
        torch.cuda.empty_cache()
    print()
    print("| experts | T | M | active | kernels | ours ms | grouped_mm+SwiGLU ms | speed-up | ours TFLOP/s (of 689) | "
          "ours weights TB/s (of 4.4) | peer weights TB/s | rel. err vs peer |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in points:
        print(f"| {p['shape']} | {p['T']} | {p['M']} | {p['active_experts']} | {p['variant']} | {p['ours_ms']:.4f} | "
              f"{p['peer_ms']:.4f} | {p['speedup']:.2f} | {p['ours_tflops']:.1f} ({p['ours_tflops'] / DENSE_BF16_TFLOPS:.2f}) | "
              f"{p['ours_weight_tbs']:.2f} ({p['ours_weight_tbs'] / HBM_TBS:.2f}) | {p['peer_weight_tbs']:.2f} | "
              f"{p['rel_err_vs_peer']:.1e} |")


if __name__ == "__main__":
    main()
