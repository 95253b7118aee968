#!/usr/bin/env python3
"""Layers with a shared expert (test/device/layer_shared_models.mlir, bf16):
ours, the shared expert inside the layer's grouped GEMMs (one call,
layer-shared.moebundle), beside the peer torch_grouped_mm of peers.py plus
the shared expert as three dense torch matmuls (and its gate), and, for
DeepSeek-V3, our routed-only layer (layer.moebundle) plus the same torch
shared expert. Same data, one process, medians of CUDA-graph replays;
fractions of the roofline (the weights read once at 4.5 TB/s or the useful
FLOPs at 790 TFLOP/s, whichever takes longer). Prints a markdown table.

    python3 bench/shared_layer.py .gpu-artifacts .shared-bench
"""
import os
import sys

import torch
import torch.nn.functional as F

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
PEERS = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else ".shared-bench")
sys.path[:0] = [os.path.join(ARTIFACTS, "site"), PEERS, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                               "..", "test", "device")]
import moe_mlir  # noqa: E402
from peers import bench, moe_grouped, route_model  # noqa: E402
from shared_layer import MODELS, arrange, random_weights  # noqa: E402

DEV = "cuda"
TOKENS = [1, 128, 8192]


def torch_shared(x, s13, s2, gate):
    """The shared expert as dense torch ops (bf16, as the HF modules)."""
    Is = s2.shape[1]
    gu = F.linear(x, s13)
    y = F.linear(F.silu(gu[:, :Is]) * gu[:, Is:], s2)
    return y * torch.sigmoid(F.linear(x, gate)) if gate is not None else y


def main():
    torch.manual_seed(0)
    shared = moe_mlir.Bundle(os.path.join(ARTIFACTS, "layer-shared.moebundle"))
    routed = moe_mlir.Bundle(os.path.join(ARTIFACTS, "layer.moebundle"))
    rows = []
    for name, (H, I, E, k, Is, gated, model, logit_type, _) in MODELS.items():
        w13, w2, s13, s2, gate = random_weights(H, I, E, Is, gated)
        gate_up, down = arrange(w13, w2, s13, s2)
        deepseek = model == "deepseek-v3"
        for T in TOKENS:
            x = torch.randn(T, H, device=DEV).to(torch.bfloat16)
            logits = torch.randn(T, E, device=DEV).to(logit_type)
            bias = torch.zeros(E, device=DEV) if deepseek else None
            out = torch.empty(T, H, device=DEV, dtype=torch.bfloat16)
            workspace = torch.empty(shared.workspace_bytes(name, {"T": T}), device=DEV,
                                    dtype=torch.uint8)

            def ours():
                shared.launch(name, tokens=x, logits=logits, score_bias=bias,
                              gate_up_weights=gate_up, down_weights=down, shared_gate=gate,
                              out=out, workspace=workspace)

            def peer():
                return moe_grouped(x, logits, w13, w2, k, model) + torch_shared(x, s13, s2, gate)

            times = {"ours": bench(ours)[1], "torch_grouped_mm + torch shared": bench(peer)[1]}
            if deepseek:
                routed_ws = torch.empty(routed.workspace_bytes(name, {"T": T}), device=DEV,
                                        dtype=torch.uint8)

                def split():
                    routed.launch(name, tokens=x, logits=logits, score_bias=bias,
                                  gate_up_weights=w13, down_weights=w2, out=out,
                                  workspace=routed_ws)
                    return out + torch_shared(x, s13, s2, gate)

                times["our routed layer + torch shared"] = bench(split)[1]
            hit = route_model(model, logits.float(), k, bias)[1].unique().numel()
            weight_bytes = (hit * 3 * I * H + 3 * Is * H) * 2
            flops = 2 * T * 3 * H * (k * I + Is)
            floor = max(weight_bytes / 4.5e9, flops / 790e9)  # ms
            rows.append((name, T, times, floor))
            print(f"  {name} T={T}: " + ", ".join(f"{key} {v:.4f} ms" for key, v in times.items()),
                  flush=True)
        del w13, w2, gate_up, down
        torch.cuda.empty_cache()

    print()
    print("| layer | T | ours ms | torch_grouped_mm + torch shared ms | our routed layer + torch "
          "shared ms | vs peer | roofline ms | of roofline |")
    print("|---|---|---|---|---|---|---|---|")
    for name, T, times, floor in rows:
        ours = times["ours"]
        peer = times["torch_grouped_mm + torch shared"]
        split = times.get("our routed layer + torch shared")
        print(f"| {name} | {T} | {ours:.4f} | {peer:.4f} | "
              f"{f'{split:.4f}' if split else '—'} | {peer / ours:.2f} | {floor:.4f} | "
              f"{floor / ours:.2f} |")


if __name__ == "__main__":
    main()
