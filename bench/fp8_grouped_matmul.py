#!/usr/bin/env python3
"""Block-FP8 grouped GEMM benchmark on the H200: our grouped_matmul_fp8.v1
kernels (through the runtime) beside torch._scaled_grouped_mm (rowwise e4m3,
the FP8 peer), torch._grouped_mm (bf16) and our bf16 kernels, on the same
routed rows, in one process.

DeepSeek-V3's expert GEMMs (gate-up: E=256, N=4096, K=7168; down: N=7168,
K=2048 with the routing weight), M = 8T rows routed by random router logits
(top-8 of 256). Each of our results is checked first against a float32
reference on the dequantized values. Times are medians of CUDA-graph
replays (shared/bench/peers.py `bench`). Prints one JSON line per point and
a markdown table for bench/RESULTS.md.

    python3 bench/fp8_grouped_matmul.py [.gpu-artifacts] [.shared-bench] [T,...] [bundle,...]

The last argument names the fp8 bundles to time side by side (default
fp8bench-default); the first is checked and reported as ours. With more
than one, each is checked, captured in a CUDA graph, and the graphs are
timed in alternating rounds (median of the rounds' medians), since timing
one variant after the other drifts by up to 8 % at these sizes.
"""
import json
import math
import os
import statistics
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
PEERS = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else ".shared-bench")
TOKENS = [int(t) for t in sys.argv[3].split(",")] if len(sys.argv) > 3 else [1, 16, 128, 1024, 8192]
VARIANTS = sys.argv[4].split(",") if len(sys.argv) > 4 else ["fp8bench-default"]
sys.path[:0] = [os.path.join(ARTIFACTS, "site"), PEERS, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "device")]
import moe_mlir  # noqa: E402
from peers import bench, route  # noqa: E402
from fp8_grouped_matmul import dequantize_blocks, quantize_blocks  # noqa: E402

HBM_TBS = 4.4
DENSE_FP8_TFLOPS = 2 * 689.0  # twice the measured dense bf16 rate
SHAPES = {  # entry: (label, E, N, K, row_scale)
    "deepseek_gate_up": ("DeepSeek-V3 gate-up", 256, 4096, 7168, False),
    "deepseek_down": ("DeepSeek-V3 down", 256, 7168, 2048, True),
}
TOP_K = 8
ROUNDS = 7


def timed(fn):
    """Median ms of CUDA-graph replays (eager when capture fails)."""
    eager, graph = bench(fn)
    return graph if graph is not None else eager


def main():
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    variants = {name: moe_mlir.Bundle(os.path.join(ARTIFACTS, name + ".moebundle")) for name in VARIANTS}
    fp8 = variants[VARIANTS[0]]
    bf16 = moe_mlir.Bundle(os.path.join(ARTIFACTS, "bench-default.moebundle"))
    rows_out = []
    for entry, (label, E, N, K, has_scale) in SHAPES.items():
        w = torch.randn(E, N, K, device="cuda") * K ** -0.5
        wq, ws = quantize_blocks(w, 128)
        wb = w.to(torch.bfloat16)
        # The peer's rowwise scales: one per output column of each expert.
        wq_row_scale = (w.abs().amax(-1) / 448.0).clamp_min(1e-12)
        wq_row = (w / wq_row_scale[..., None]).to(torch.float8_e4m3fn)
        del w
        for T in TOKENS:
            logits = torch.randn(T, E, device="cuda")
            _, ids = route(logits, TOP_K)
            counts = torch.bincount(ids.flatten(), minlength=E)
            M = T * TOP_K
            ends = counts.cumsum(0).to(torch.int32)
            offsets = torch.cat([torch.zeros(1, device="cuda", dtype=torch.int32), ends])
            x = torch.randn(M, K, device="cuda")
            xq, xs = quantize_blocks(x, 1)
            xb = x.to(torch.bfloat16)
            x_row_scale = (x.abs().amax(-1) / 448.0).clamp_min(1e-12)
            xq_row = (x / x_row_scale[:, None]).to(torch.float8_e4m3fn)
            scale = torch.rand(M, device="cuda") + 0.5 if has_scale else None
            out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

            def ours():
                fp8.grouped_matmul(entry, xq, wq, offsets, out, row_scale=scale,
                                   rows_scale=xs, weights_scale=ws)

            # Correctness first: float32 reference on the dequantized values.
            ours()
            torch.cuda.synchronize()
            active = [e for e in range(E) if counts[e] > 0]
            check = active[:16]
            starts = offsets.tolist()
            num = den = 0.0
            for e in check:
                lo, hi = starts[e], starts[e + 1]
                ref = (dequantize_blocks(xq[lo:hi], xs[lo:hi], 1).float()
                       @ dequantize_blocks(wq[e], ws[e], 128).float().t())
                if scale is not None:
                    ref = ref * scale[lo:hi, None]
                num += (out[lo:hi].float() - ref).norm().item() ** 2
                den += ref.norm().item() ** 2
            err = math.sqrt(num / den)
            assert err <= 3e-3, f"{entry} T={T}: relative L2 error {err:.3e}"

            def peer_fp8():
                return torch._scaled_grouped_mm(xq_row, wq_row.transpose(1, 2), x_row_scale,
                                                wq_row_scale, offs=ends, out_dtype=torch.bfloat16)

            def peer_bf16():
                return torch._grouped_mm(xb, wb.transpose(1, 2), offs=ends)

            times = {"ours_fp8": timed(ours)}
            if len(variants) > 1:
                graphs = {}
                for name, bundle in variants.items():
                    vout = torch.full_like(out, float("nan"))

                    def variant(bundle=bundle, vout=vout):
                        bundle.grouped_matmul(entry, xq, wq, offsets, vout, row_scale=scale,
                                              rows_scale=xs, weights_scale=ws)
                    variant()
                    torch.cuda.synchronize()
                    assert torch.equal(vout[~torch.isnan(out[:, 0])], out[~torch.isnan(out[:, 0])]) or \
                        ((vout.float() - out.float()).norm() / out.float().norm()).item() < 1e-2, name
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        variant()
                    graphs[name] = graph
                rounds = {name: [] for name in graphs}
                for _ in range(ROUNDS):
                    for name, graph in graphs.items():
                        rounds[name].append(bench(graph.replay, graphable=False)[0])
                for name, values in rounds.items():
                    times[f"{name} (rounds)"] = statistics.median(values)
            try:
                peer_fp8()
                times["scaled_grouped_mm"] = timed(peer_fp8)
            except Exception as error:  # report, do not stop
                times["scaled_grouped_mm"] = None
                print(f"# torch._scaled_grouped_mm: {type(error).__name__}: {error}"[:200])
            times["torch_grouped_mm_bf16"] = timed(peer_bf16)
            if entry in {e.name for e in bf16.entries}:
                bout = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
                times["ours_bf16"] = timed(lambda: bf16.grouped_matmul(entry, xb, wb, offsets, bout))
            experts_hit = len(active)
            weight_bytes = experts_hit * N * K
            flops = 2.0 * M * N * K
            ms = times["ours_fp8"]
            point = {"entry": entry, "T": T, "M": M, "experts_hit": experts_hit, "err": err,
                     **{k: v for k, v in times.items()},
                     "ours_fp8_TBs": weight_bytes / ms / 1e9, "ours_fp8_TFLOPs": flops / ms / 1e9}
            print(json.dumps(point), flush=True)
            rows_out.append((label, T, times, weight_bytes, flops))
            del xq, xs, xb, xq_row, out, x
            torch.cuda.empty_cache()
        del wq, ws, wb, wq_row, wq_row_scale
        torch.cuda.empty_cache()
    print("\n| GEMM | T | ours fp8 ms | scaled_grouped_mm ms | ratio | ours bf16 ms | "
          "grouped_mm bf16 ms | fp8 weights TB/s | TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, T, t, wbytes, flops in rows_out:
        ours = t["ours_fp8"]
        peer = t.get("scaled_grouped_mm")
        fmt = lambda v: f"{v:.4f}" if v else "—"  # noqa: E731
        ratio = f"{peer / ours:.2f}x" if peer else "—"
        print(f"| {label} | {T} | {ours:.4f} | {fmt(peer)} | {ratio} | {fmt(t.get('ours_bf16'))} | "
              f"{fmt(t['torch_grouped_mm_bf16'])} | {wbytes / ours / 1e9:.2f} | {flops / ours / 1e9:.0f} |")


if __name__ == "__main__":
    main()
