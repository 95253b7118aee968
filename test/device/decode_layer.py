#!/usr/bin/env python3
"""The decode kernel (docs/decode-kernel.md) of layer-decode.moebundle
(test/device/layer_models.mlir with --moe-gpu-pipeline="decode-max-tokens=16")
against the default layer.moebundle, on the same data in one process:

- at T in {1, 2, 7, 16} (the decode kernel) and 17, 64 (past the threshold:
  the default steps) for Qwen3-30B-A3B, OLMoE-1B-7B and DeepSeek-V3 (whose
  layers get a decode part) and Mixtral-8x7B (none: split-K down forms),
  random and skewed routings (every token to the same k experts: one hot
  token tile per expert, the other experts empty), outputs and workspace
  poisoned first (the counters too: the zero kernel must clear them): the
  output bit-equal to the default layer's (the same GEMM tiles and the
  combine's sum in the same order) and within 1e-2 of the float32
  reference;
- two runs bit-equal; the layer captured in a CUDA graph and replayed on
  new inputs, each replay bit-equal to the default layer.

Prints `N passed, N failed`. With `--quick`, Qwen3 alone at T = 1, 7 and
17 (for compute-sanitizer).

    python3 test/device/decode_layer.py .gpu-artifacts .shared-bench [--quick]
"""
import os
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
PEERS = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("--")
                        else ".shared-bench")
sys.path[:0] = [os.path.join(ARTIFACTS, "site"), PEERS, os.path.dirname(__file__)]
import moe_mlir  # noqa: E402
from peers import SHAPES, reference  # noqa: E402
from layer import FloatExperts, Layer, rel_err  # noqa: E402
from tally import Tally, run  # noqa: E402

DEV = "cuda"
MODELS = {"qwen3_30b_a3b": "qwen3-30b-a3b", "olmoe_1b_7b": "olmoe-1b-7b",
          "deepseek_v3": "deepseek-v3", "mixtral_8x7b": "mixtral-8x7b"}
TOKENS = [1, 2, 7, 16, 17, 64]
if "--quick" in sys.argv:
    MODELS = {"qwen3_30b_a3b": "qwen3-30b-a3b"}
    TOKENS = [1, 7, 17]
TOLERANCE = 1e-2


def main():
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    default = moe_mlir.Bundle(os.path.join(ARTIFACTS, "layer.moebundle"))
    decode = moe_mlir.Bundle(os.path.join(ARTIFACTS, "layer-decode.moebundle"))
    tally = Tally()
    report = tally.report
    for name, model in MODELS.items():
        H, I, E, k = SHAPES[model]
        has_decode = any(e.name == f"{name}_decode" for e in decode.entries)
        report(has_decode == (model != "mixtral-8x7b"), f"{model} decode part",
               f"present: {has_decode}")
        w13 = (torch.randn(E, 2 * I, H, device=DEV) * H ** -0.5).to(torch.bfloat16)
        w2 = (torch.randn(E, H, I, device=DEV) * I ** -0.5).to(torch.bfloat16)
        w13f, w2f = FloatExperts(w13), FloatExperts(w2)
        deepseek = model == "deepseek-v3"
        for T in TOKENS:
            for routing in ("random", "skewed"):
                what = f"{model} T={T} {routing}"
                try:
                    x = torch.randn(T, H, device=DEV).to(torch.bfloat16)
                    logits = torch.randn(T, E, device=DEV)
                    bias = torch.randn(E, device=DEV) * 0.1 if deepseek else None
                    if routing == "skewed":
                        # Every token's top experts the same: one token tile
                        # of T rows per hit expert, the others empty.
                        logits[:, : 2 * k] += 20.0
                        if deepseek:
                            bias = torch.zeros(E, device=DEV)
                    a = Layer(default, name, T, H, I, bias)
                    b = Layer(decode, name, T, H, I, bias)
                    a.poison()
                    b.poison()
                    want_a = a(x, logits, w13, w2).clone()
                    got = b(x, logits, w13, w2).clone()
                    b.poison()
                    again = b(x, logits, w13, w2)
                    torch.cuda.synchronize()
                    err = rel_err(got, reference(model, x.float(), logits, w13f, w2f,
                                                 score_bias=bias))
                    same = torch.equal(got, want_a)
                    stable = torch.equal(got, again)
                    ok = same and stable and err <= TOLERANCE and not torch.isnan(got).any()
                    report(ok, what, f"bit-equal to the default layer {same}, two runs bit-equal "
                           f"{stable}, relative L2 error {err:.2e}")
                except Exception as error:
                    report(False, what, f"{type(error).__name__}: {error}")
        what = f"{model} CUDA graph replay on new inputs, T=7"
        try:
            T = 7
            bias = torch.randn(E, device=DEV) * 0.1 if deepseek else None
            a = Layer(default, name, T, H, I, bias)
            b = Layer(decode, name, T, H, I, bias)
            x = torch.randn(T, H, device=DEV).to(torch.bfloat16)
            logits = torch.randn(T, E, device=DEV)
            b(x, logits, w13, w2)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                b(x, logits, w13, w2)
            equal = []
            for _ in range(3):
                x.copy_(torch.randn(T, H, device=DEV).to(torch.bfloat16))
                logits.copy_(torch.randn(T, E, device=DEV))
                b.poison()
                graph.replay()
                want = a(x, logits, w13, w2)
                torch.cuda.synchronize()
                equal.append(torch.equal(b.out, want))
            report(all(equal), what, f"replays bit-equal to the default layer: {equal}")
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")
        del w13, w2, w13f, w2f
        torch.cuda.empty_cache()
    return tally.summary()


if __name__ == "__main__":
    run(main)
