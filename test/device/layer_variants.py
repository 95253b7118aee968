#!/usr/bin/env python3
"""Kernel variants that must not change a layer's arithmetic, checked bit
for bit against the layer they vary: each pair `base:variant` of layer
bundles (layer.v1 or layer_fp8.v1 entries of the same models) runs on the
same inputs, outputs and workspaces poisoned first, for every model of the
base bundle at T in {1, 7, 300, 4096} and three routings: random logits,
one hot expert (every token's logit +30 on expert 0) and few reachable
experts (all but three logits -30: the others get no rows). The default
pairs are the TMA-store forms (`tma-store=1`), whose epilogue hands whole
staged tiles to the TMA instead of storing them with its threads.

    python3 test/device/layer_variants.py .gpu-artifacts .shared-bench [base:variant,...]

Prints `N passed, N failed`.
"""
import os
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
PEERS = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else ".shared-bench")
PAIRS = [p.split(":") for p in (sys.argv[3] if len(sys.argv) > 3 else
                                "layer.moebundle:layer-tmastore.moebundle,"
                                "fp8layer.moebundle:fp8layer-tmastore.moebundle").split(",")]
sys.path[:0] = [os.path.join(ARTIFACTS, "site"), PEERS]
import moe_mlir  # noqa: E402
from tally import Tally  # noqa: E402
from peers import SHAPES  # noqa: E402

DEV = "cuda"
MODELS = {"mixtral_8x7b": "mixtral-8x7b", "qwen3_30b_a3b": "qwen3-30b-a3b",
          "olmoe_1b_7b": "olmoe-1b-7b", "deepseek_v3": "deepseek-v3",
          "gpt_oss_120b": "gpt-oss-120b"}
TOKENS = [1, 7, 300, 4096]


def routings(T, E):
    logits = torch.randn(T, E, device=DEV)
    hot = logits.clone()
    hot[:, 0] += 30
    few = logits.clone()
    few[:, 3:] -= 30
    return {"random": logits, "hot expert": hot, "three experts": few}


def run(bundle, name, x, logits, weights, scales, bias, b13, b2):
    """The layer's output, its output and workspace poisoned first."""
    T, H = x.shape
    I = weights[1].shape[2]
    out = torch.full((T, H), float("nan"), device=DEV, dtype=torch.bfloat16)
    workspace = torch.full((bundle.layer_workspace_bytes(name, T, H, I),), 0xFF, device=DEV,
                           dtype=torch.uint8)
    bundle.layer(name, x, logits, *weights, score_bias=bias, gate_up_bias=b13, down_bias=b2,
                 out=out, workspace=workspace, **scales)
    torch.cuda.synchronize()
    return out


def main():
    torch.manual_seed(0)
    tally = Tally()
    for base_name, variant_name in PAIRS:
        base = moe_mlir.Bundle(os.path.join(ARTIFACTS, base_name))
        variant = moe_mlir.Bundle(os.path.join(ARTIFACTS, variant_name))
        entries = {e.name for e in base.entries}
        for name, model in MODELS.items():
            if name not in entries:
                continue
            what = f"{variant_name} vs {base_name} {model}"
            try:
                H, I, E, k = SHAPES[model]
                w13 = (torch.randn(E, 2 * I, H, device=DEV) * H ** -0.5).to(torch.bfloat16)
                w2 = (torch.randn(E, H, I, device=DEV) * I ** -0.5).to(torch.bfloat16)
                gptoss = model == "gpt-oss-120b"
                b13 = (torch.randn(E, 2 * I, device=DEV) * 0.1).to(torch.bfloat16) if gptoss else None
                b2 = torch.randn(E, H, device=DEV) * 0.1 if gptoss else None
                weights, scales = (w13, w2), {}
                if base.entry(name).abi == "layer_fp8.v1":
                    (w13q, w13s), (w2q, w2s) = (base.quantize(f"{name}_prepack", w13),
                                                base.quantize(f"{name}_prepack_0", w2))
                    weights = (w13q, w2q)
                    scales = dict(gate_up_weights_scale=w13s, down_weights_scale=w2s)
                for T in TOKENS:
                    x = torch.randn(T, H, device=DEV).to(torch.bfloat16)
                    bias = torch.randn(E, device=DEV) * 0.1 if model == "deepseek-v3" else None
                    for routing, logits in routings(T, E).items():
                        here = f"{what} T={T} {routing}"
                        want = run(base, name, x, logits, weights, scales, bias, b13, b2)
                        got = run(variant, name, x, logits, weights, scales, bias, b13, b2)
                        if torch.isnan(want).any():
                            tally.report(False, here, "the base layer left NaN")
                            continue
                        same = torch.equal(got.view(torch.int16), want.view(torch.int16))
                        differ = int((got.view(torch.int16) != want.view(torch.int16)).any(1).sum())
                        tally.report(same, here, "bit-identical" if same else f"{differ} rows differ")
                del w13, w2, weights, scales
                torch.cuda.empty_cache()
            except Exception as error:  # a failure, never a stop
                tally.report(False, what, f"{type(error).__name__}: {error}")
    sys.exit(tally.summary())


if __name__ == "__main__":
    main()
