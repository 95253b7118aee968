#!/usr/bin/env python3
"""Whole MoE layers on the H200: route -> permute -> fused expert MLP ->
unpermute as one layer.v1 entry of layer.moebundle (from
test/device/layer_models.mlir, grouped by --moe-fuse-layer), launched by
one runtime call (moeLaunch of the layer entry) with its intermediates in one workspace.

Tests (default): against `reference(model, ...)` of shared/bench/peers.py
(the Hugging Face modules' semantics) computed in float32 for Mixtral-8x7B,
Qwen3-30B-A3B, OLMoE-1B-7B, DeepSeek-V3 (with a random correction bias) and
GPT-OSS-120B (clamped SwiGLU, random bf16 gate-up and f32 down biases) at
T in {1, 7, 64, 128, 1000, 8192}: relative L2 error <= 1e-2, outputs and
workspace poisoned first; the layer captured in a CUDA graph, replayed on
new inputs; bad layer arguments refused with a message.
`--bench`: the layer beside the peers `hf_loop` and `torch_grouped_mm` of
peers.py on the same data in one process (medians; CUDA graphs for every
side that can use them). Prints `N passed, N failed` (and a table).

    python3 test/device/layer.py .gpu-artifacts .shared-bench [--bench]
"""
import os
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
PEERS = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else ".shared-bench")
BENCH = "--bench" in sys.argv
sys.path[:0] = [os.path.join(ARTIFACTS, "site"), PEERS]
import moe_mlir  # noqa: E402
from tally import Tally, graph_replay_errors, refused_without_launch, run  # noqa: E402
from peers import SHAPES, bench, moe_grouped, moe_loop, reference, route_model  # noqa: E402

DEV = "cuda"
MODELS = {"mixtral_8x7b": "mixtral-8x7b", "qwen3_30b_a3b": "qwen3-30b-a3b",
          "olmoe_1b_7b": "olmoe-1b-7b", "deepseek_v3": "deepseek-v3",
          "gpt_oss_120b": "gpt-oss-120b"}
TOKENS = [1, 7, 64, 128, 1000, 8192]
TOLERANCE = 1e-2


class Layer:
    """The compiled layer `name` with its output and workspace for T tokens
    (graph-safe: one runtime call, no allocation)."""

    def __init__(self, bundle, name, T, H, I, bias, b13=None, b2=None):
        self.bundle, self.name, self.bias, self.b13, self.b2 = bundle, name, bias, b13, b2
        self.workspace = torch.empty(bundle.layer_workspace_bytes(name, T, H, I), device=DEV,
                                     dtype=torch.uint8)
        self.out = torch.empty(T, H, device=DEV, dtype=torch.bfloat16)

    def poison(self):
        self.out.fill_(float("nan"))
        self.workspace.fill_(0xFF)  # NaN in every bf16/f32, -1 in every index

    def __call__(self, x, logits, w13, w2):
        return self.bundle.layer(self.name, x, logits, w13, w2, score_bias=self.bias,
                                 gate_up_bias=self.b13, down_bias=self.b2, out=self.out,
                                 workspace=self.workspace)


class FloatExperts:
    """Expert weights [E, ...] that read as float32, one expert at a time."""

    def __init__(self, weights):
        self.weights, self.shape = weights, weights.shape

    def __getitem__(self, expert):
        return self.weights[expert].float()


def rel_err(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def main():
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "layer.moebundle"))
    tally = Tally()
    report = tally.report
    table = []

    for name, model in MODELS.items():
        H, I, E, k = SHAPES[model]
        w13 = (torch.randn(E, 2 * I, H, device=DEV) * H ** -0.5).to(torch.bfloat16)
        w2 = (torch.randn(E, H, I, device=DEV) * I ** -0.5).to(torch.bfloat16)
        deepseek, gptoss = model == "deepseek-v3", model == "gpt-oss-120b"
        # GPT-OSS's expert biases, in the element types the layer declares.
        b13 = (torch.randn(E, 2 * I, device=DEV) * 0.1).to(torch.bfloat16) if gptoss else None
        b2 = torch.randn(E, H, device=DEV) * 0.1 if gptoss else None
        # The reference in float32, each expert's weights converted when the
        # reference reads them (all of DeepSeek-V3's at once would be 45 GB).
        w13f, w2f = FloatExperts(w13), FloatExperts(w2)

        def want(x, logits, bias):
            return reference(model, x.float(), logits, w13f, w2f, score_bias=bias,
                             b13=b13.float() if gptoss else None, b2=b2)

        for T in TOKENS:
            what = f"layer {model} T={T}"
            try:
                x = torch.randn(T, H, device=DEV).to(torch.bfloat16)
                logits = torch.randn(T, E, device=DEV)
                bias = torch.randn(E, device=DEV) * 0.1 if deepseek else None
                layer = Layer(bundle, name, T, H, I, bias, b13, b2)
                layer.poison()
                out = layer(x, logits, w13, w2)
                torch.cuda.synchronize()
                err = rel_err(out, want(x, logits, bias))
                ok = err <= TOLERANCE and not torch.isnan(out).any()
                report(ok, what, f"relative L2 error {err:.2e}")
                if BENCH:
                    zero_bias = torch.zeros(E, device=DEV) if deepseek else None
                    bench_layer = Layer(bundle, name, T, H, I, zero_bias, b13, b2)
                    ours = min(v for v in bench(lambda: bench_layer(x, logits, w13, w2)) if v)
                    grouped = min(v for v in bench(lambda: moe_grouped(x, logits, w13, w2, k, model)) if v)
                    loop = bench(lambda: moe_loop(x, logits, w13, w2, k, model), graphable=False)[0]
                    # Roofline: the hit experts' weights at 4.4 TB/s or the
                    # useful FLOPs at 689 TFLOP/s, whichever takes longer.
                    hit = route_model(model, logits, score_bias=zero_bias)[1].unique().numel()
                    weight_bytes = hit * 3 * I * H * 2
                    flops = 2 * T * k * 3 * I * H
                    floor = max(weight_bytes / 4.4e9, flops / 689e9)  # ms
                    table.append((model, T, ours, grouped, loop, floor))
                    print(f"  {model} T={T}: ours {ours:.4f} ms, torch_grouped_mm {grouped:.4f}, hf_loop {loop:.4f}",
                          flush=True)
                del layer
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")
        # The layer captured in a CUDA graph, replayed on new inputs.
        what = f"layer {model} CUDA graph replay on new inputs"
        try:
            T = 64
            bias = torch.randn(E, device=DEV) * 0.1 if deepseek else None
            layer = Layer(bundle, name, T, H, I, bias, b13, b2)
            x = torch.randn(T, H, device=DEV).to(torch.bfloat16)
            logits = torch.randn(T, E, device=DEV)
            def refresh():
                x.copy_(torch.randn(T, H, device=DEV).to(torch.bfloat16))
                logits.copy_(torch.randn(T, E, device=DEV))

            errs = graph_replay_errors(lambda: layer(x, logits, w13, w2), refresh, layer.poison,
                                       lambda: rel_err(layer.out, want(x, logits, bias)))
            report(all(e <= TOLERANCE for e in errs), what, ", ".join(f"{e:.2e}" for e in errs))
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")
        # Bad arguments: a message, no launch, the output untouched.
        what = f"layer {model} argument errors"
        try:
            T = 7
            layer = Layer(bundle, name, T, H, I, torch.zeros(E, device=DEV) if deepseek else None, b13, b2)
            x = torch.randn(T, H, device=DEV).to(torch.bfloat16)
            logits = torch.randn(T, E, device=DEV)
            bad = {
                "workspace too small": dict(workspace=layer.workspace[:-256]),
                "tokens of another hidden size": dict(x=torch.zeros(T, H + 8, device=DEV, dtype=torch.bfloat16)),
                "gate-up weights of another expert count":
                    dict(w13=torch.empty(E - 1, 2 * I, H, device=DEV, dtype=torch.bfloat16)),
                ("a gate-up bias the layer does not take" if not gptoss else "no gate-up bias"):
                    dict(b13=None if gptoss else torch.zeros(E, 2 * I, device=DEV)),
            }
            def attempt(change):
                args = dict(x=x, w13=w13, b13=b13, workspace=layer.workspace)
                args.update(change)
                bundle.layer(name, args["x"], logits, args["w13"], w2, score_bias=layer.bias,
                             gate_up_bias=args["b13"], down_bias=b2, out=layer.out,
                             workspace=args["workspace"])

            refused = refused_without_launch(bad, attempt, layer.out, moe_mlir.MoERuntimeError)
            report(len(refused) == len(bad), what, f"{len(refused)} of {len(bad)} refused without launching")
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")
        del w13, w2, w13f, w2f
        torch.cuda.empty_cache()

    if table:
        print()
        print("| model | T | ours ms | torch_grouped_mm ms | hf_loop ms | vs grouped_mm | vs hf_loop "
              "| roofline ms | of roofline |")
        print("|---|---|---|---|---|---|---|---|---|")
        for model, T, ours, grouped, loop, floor in table:
            print(f"| {model} | {T} | {ours:.4f} | {grouped:.4f} | {loop:.4f} | {grouped / ours:.2f} "
                  f"| {loop / ours:.2f} | {floor:.4f} | {floor / ours:.2f} |")
    return tally.summary()


if __name__ == "__main__":
    run(main)
