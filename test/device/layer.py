#!/usr/bin/env python3
"""Whole MoE layers on the H200: route -> permute -> fused expert MLP ->
unpermute, each op a compiled entry of layer.moebundle (from
test/device/layer_models.mlir), chained through the runtime on one stream.

Tests (default): against `reference(model, ...)` of shared/bench/peers.py
(the Hugging Face modules' semantics) computed in float32 for Mixtral-8x7B,
Qwen3-30B-A3B, OLMoE-1B-7B and DeepSeek-V3 (with a random correction bias)
at T in {1, 7, 64, 1000, 8192}: relative L2 error <= 1e-2, outputs poisoned
first; and the layer captured in a CUDA graph, replayed on new inputs.
GPT-OSS is not compiled yet (clamped activation, expert biases).
`--bench`: the layer beside the peers `hf_loop` and `torch_grouped_mm` of
peers.py on the same data in one process (medians; CUDA graphs for every
side that can use them). Prints `N passed, N failed` (and a table).

    python3 test/device/layer.py .gpu-artifacts .shared-bench [--bench]
"""
import os
import sys
import traceback

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
PEERS = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else ".shared-bench")
BENCH = "--bench" in sys.argv
sys.path[:0] = [ARTIFACTS, PEERS]
os.environ.setdefault("MOE_RUNTIME_LIB", os.path.join(ARTIFACTS, "libmoe_runtime.so"))
import moe_runtime  # noqa: E402
from peers import SHAPES, bench, moe_grouped, moe_loop, reference  # noqa: E402

DEV = "cuda"
MODELS = {"mixtral_8x7b": "mixtral-8x7b", "qwen3_30b_a3b": "qwen3-30b-a3b",
          "olmoe_1b_7b": "olmoe-1b-7b", "deepseek_v3": "deepseek-v3"}
TOKENS = [1, 7, 64, 1000, 8192]
TOLERANCE = 1e-2


class Layer:
    """The compiled layer `name` with buffers for T tokens (graph-safe)."""

    def __init__(self, bundle, name, T, H, I, E, k, bias):
        self.bundle, self.name, self.bias = bundle, name, bias
        self.ids = torch.empty(T, k, device=DEV, dtype=torch.int32)
        self.weights = torch.empty(T, k, device=DEV)
        self.rows = torch.empty(T * k, H, device=DEV, dtype=torch.bfloat16)
        self.offsets = torch.empty(E + 1, device=DEV, dtype=torch.int64)
        self.slots = torch.empty(T, k, device=DEV, dtype=torch.int64)
        self.workspace = torch.empty(bundle.permute_workspace_bytes(f"{name}_0", T), device=DEV,
                                     dtype=torch.uint8)
        self.inter = torch.empty(T * k, I, device=DEV, dtype=torch.bfloat16)
        self.expert_out = torch.empty(T * k, H, device=DEV, dtype=torch.bfloat16)
        self.out = torch.empty(T, H, device=DEV, dtype=torch.bfloat16)

    def __call__(self, x, logits, w13, w2):
        b, n = self.bundle, self.name
        b.route(n, logits, bias=self.bias, ids=self.ids, weights=self.weights)
        b.permute(f"{n}_0", x, self.ids, rows=self.rows, offsets=self.offsets, slots=self.slots,
                  workspace=self.workspace)
        b.expert_mlp(f"{n}_1", self.rows, self.offsets, w13, w2, out=self.expert_out, workspace=self.inter)
        b.unpermute(f"{n}_2", self.expert_out, self.slots, weights=self.weights, out=self.out)
        return self.out


def rel_err(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def main():
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    bundle = moe_runtime.Bundle(os.path.join(ARTIFACTS, "layer.moebundle"))
    passed = failed = 0
    table = []

    def report(ok, what, detail=""):
        nonlocal passed, failed
        passed += ok
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}", flush=True)

    for name, model in MODELS.items():
        H, I, E, k = SHAPES[model]
        w13 = (torch.randn(E, 2 * I, H, device=DEV) * H ** -0.5).to(torch.bfloat16)
        w2 = (torch.randn(E, H, I, device=DEV) * I ** -0.5).to(torch.bfloat16)
        deepseek = model == "deepseek-v3"
        # The reference in float32 (DeepSeek-V3: 45 GB of float32 weights).
        w13f, w2f = w13.float(), w2.float()

        def want(x, logits, bias):
            return reference(model, x.float(), logits, w13f, w2f, score_bias=bias)

        for T in TOKENS:
            what = f"layer {model} T={T}"
            try:
                x = torch.randn(T, H, device=DEV).to(torch.bfloat16)
                logits = torch.randn(T, E, device=DEV)
                bias = torch.randn(E, device=DEV) * 0.1 if deepseek else None
                layer = Layer(bundle, name, T, H, I, E, k, bias)
                layer.out.fill_(float("nan"))
                out = layer(x, logits, w13, w2)
                torch.cuda.synchronize()
                err = rel_err(out, want(x, logits, bias))
                ok = err <= TOLERANCE and not torch.isnan(out).any()
                report(ok, what, f"relative L2 error {err:.2e}")
                if BENCH:
                    zero_bias = torch.zeros(E, device=DEV) if deepseek else None
                    bench_layer = Layer(bundle, name, T, H, I, E, k, zero_bias)
                    ours = min(v for v in bench(lambda: bench_layer(x, logits, w13, w2)) if v)
                    grouped = min(v for v in bench(lambda: moe_grouped(x, logits, w13, w2, k, model)) if v)
                    loop = bench(lambda: moe_loop(x, logits, w13, w2, k, model), graphable=False)[0]
                    table.append((model, T, ours, grouped, loop))
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
            layer = Layer(bundle, name, T, H, I, E, k, bias)
            x = torch.randn(T, H, device=DEV).to(torch.bfloat16)
            logits = torch.randn(T, E, device=DEV)
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                layer(x, logits, w13, w2)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                layer(x, logits, w13, w2)
            errs = []
            for _ in range(2):
                x.copy_(torch.randn(T, H, device=DEV).to(torch.bfloat16))
                logits.copy_(torch.randn(T, E, device=DEV))
                layer.out.fill_(float("nan"))
                graph.replay()
                torch.cuda.synchronize()
                errs.append(rel_err(layer.out, want(x, logits, bias)))
            report(all(e <= TOLERANCE for e in errs), what, ", ".join(f"{e:.2e}" for e in errs))
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")
        del w13, w2, w13f, w2f
        torch.cuda.empty_cache()

    if table:
        print()
        print("| model | T | ours ms | torch_grouped_mm ms | hf_loop ms | vs grouped_mm | vs hf_loop |")
        print("|---|---|---|---|---|---|---|")
        for model, T, ours, grouped, loop in table:
            print(f"| {model} | {T} | {ours:.4f} | {grouped:.4f} | {loop:.4f} | {grouped / ours:.2f} | {loop / ours:.2f} |")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        print("0 passed, 1 failed")
        sys.exit(1)
