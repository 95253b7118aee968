#!/usr/bin/env python3
"""One grouped GEMM call through the runtime, for a profiler to look at.

    ncu -k regex:grouped_matmul -c 1 --section SpeedOfLight \\
        python3 bench/profile_grouped_matmul.py [.gpu-artifacts] [entry] [rows per expert]

Runs the entry of bench-default.moebundle (mixtral_gate_up or
deepseek_gate_up) twice on uniform routing, the first time to load. With
a fourth argument, a block-FP8 bundle (e.g. fp8bench-default), runs its
entry (deepseek_gate_up or deepseek_down) on e4m3 rows and weights with f32
block scales instead.
"""
import os
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
ENTRY = sys.argv[2] if len(sys.argv) > 2 else "mixtral_gate_up"
ROWS = int(sys.argv[3]) if len(sys.argv) > 3 else 2048
sys.path.insert(0, os.path.join(ARTIFACTS, "site"))
import moe_mlir  # noqa: E402

FP8 = sys.argv[4] if len(sys.argv) > 4 else None
bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, (FP8 or "bench-default") + ".moebundle"))
info = bundle.entry(ENTRY)
E, N, K = info.experts, info.n, info.k
rows = torch.randn(ROWS * E, K, device="cuda").to(torch.bfloat16)
weights = (torch.randn(E, N, K, device="cuda") * K ** -0.5).to(torch.bfloat16)
offsets = torch.arange(E + 1, device="cuda", dtype=torch.int32) * ROWS
out = torch.empty(ROWS * E, N, device="cuda", dtype=torch.bfloat16)
extra = {}
if FP8:
    kb, nb = -(-K // 128), -(-N // 128)
    rows = rows.to(torch.float8_e4m3fn)
    weights = weights.to(torch.float8_e4m3fn)
    extra = {"rows_scale": torch.rand(ROWS * E, kb, device="cuda") + 0.5,
             "weights_scale": torch.rand(E, nb, kb, device="cuda") + 0.5}
    if info.epilogue == "row_scale":
        extra["row_scale"] = torch.rand(ROWS * E, device="cuda")
for _ in range(2):
    bundle.grouped_matmul(ENTRY, rows, weights, offsets, out, **extra)
torch.cuda.synchronize()
print(f"{ENTRY}: {ROWS} rows x {E} experts done")
