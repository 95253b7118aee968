#!/usr/bin/env python3
"""MXFP8 MoE layers on the H200: the five layers of
test/device/layer_models.mlir quantized by
`--moe-quantize="format=mxfp8 scope=weights+activations"` and compiled by
`--moe-gpu-pipeline` into mxlayer.moebundle: per layer one layer_fp8.v1
entry (route, permute with a bf16 gather, the rows' [1, 32] quantize
kernel, the MXFP8 gate-up GEMM storing act(gate, up) in bf16, the
activation's quantize kernel, the MXFP8 down GEMM, combine) and the prepack
entries that quantize the weights once (e4m3, one E8M0 scale per 32 K).

Tests, for Mixtral-8x7B, Qwen3-30B-A3B, OLMoE-1B-7B, DeepSeek-V3 (random
correction bias) and GPT-OSS-120B (clamped SwiGLU, random bf16 gate-up and
f32 down biases; H = I = 2880, no multiple of 128) at T in {1, 7, 64, 1000,
8192} with random router logits, plus skewed routings (one hot expert; half
the experts never chosen) at T = 64 and 1000:
- the weights prepacked by the bundle's own prepack entries, bit-exact
  with quantize_mx (test/device/fp8_grouped_matmul.py) on the same weights;
- the layer (output and workspace poisoned first) bit-exact with its steps
  run through their own entries;
- each GEMM step against a float32 reference on the dequantized values of
  that step's own inputs: relative L2 error <= 3e-3;
- the layer's output against a float32 reference on the dequantized values
  that follows the IR's types end to end (rows quantized in [1, 32] blocks,
  gate-up in f32, the activation rounded to bf16 and quantized, the down
  GEMM's output rounded to bf16, the combine in f32): <= 1e-2;
- the error against the unquantized bf16 layer reported and bounded by 0.1;
- the layer captured in a CUDA graph, replayed on new inputs;
- bad arguments refused with a message and nothing launched.
The same layers compiled with `gemm=dequantized` (mxlayer-bf16.moebundle:
bf16 GEMMs on the exact dequantized values, a layer.v1 entry whose parts
make the rows' and the activation's round trips in place; prepack entries
returning the dequantized weights in bf16), on the same inputs:
- the prepacked weights bit-exact with the dequantized quantize_mx codes;
- the layer (output and workspace poisoned) against the same float32
  reference on dequantized values: <= 1e-2; its distance to the MXFP8
  layer's output reported; bit-exact with the same layer whose activation's
  round trip is a kernel of its own (mxlayer-bf16-separate.moebundle,
  `fuse-round-trips=0`; the gate-up epilogue makes it by default);
- captured in a CUDA graph, replayed on new inputs.
`--bench`: the MXFP8 layer beside the same layer whose prefill forms widen
e4m3 to bf16 (mxlayer-widen.moebundle, `mxfp8-widen=1`), the layer with
bf16 GEMMs on dequantized values (and the same with the activation's round
trip a kernel of its own, mxlayer-bf16-separate.moebundle, checked against
the fused one), our block-FP8 layer (fp8layer.moebundle)
and bf16 layer (layer.moebundle) on the same inputs, medians of CUDA-graph
replays. Prints `N passed, N failed` (and a table).

    python3 test/device/mxfp8_layer.py .gpu-artifacts .shared-bench [--bench]
"""
import os
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
PEERS = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else ".shared-bench")
BENCH = "--bench" in sys.argv
sys.path[:0] = [os.path.join(ARTIFACTS, "site"), PEERS, os.path.dirname(os.path.abspath(__file__))]
import moe_mlir  # noqa: E402
from tally import Tally, graph_replay_errors, refused_without_launch, run  # noqa: E402
from peers import SHAPES, bench, expert_act, route_model  # noqa: E402
from fp8_grouped_matmul import dequantize_mx, quantize_mx  # noqa: E402
from fp8_layer import Fp8Layer, logits_for, rel_err  # noqa: E402

DEV = "cuda"
MODELS = {"mixtral_8x7b": "mixtral-8x7b", "qwen3_30b_a3b": "qwen3-30b-a3b",
          "olmoe_1b_7b": "olmoe-1b-7b", "deepseek_v3": "deepseek-v3", "gpt_oss_120b": "gpt-oss-120b"}
TOKENS = [1, 7, 64, 1000, 8192]
SKEWED_TOKENS = [64, 1000]
STEP_TOLERANCE = 3e-3
TOLERANCE = 1e-2
QUANTIZATION_BOUND = 0.1


def round_trip(x):
    """x [N, K] through [1, 32]-block MXFP8 quantization, as float32."""
    return dequantize_mx(*quantize_mx(x)).float()


def layer_reference(model, x, logits, bias, w13, w2, b13, b2, quantized):
    """The layer in float32 on weights w13(e) [2I, H], w2(e) [H, I],
    following the IR's types; `quantized` adds the MXFP8 round trips of the
    rows and of the activation."""
    I = w2(0).shape[1]
    w, ids = route_model(model, logits, score_bias=bias)
    rows = round_trip(x.float()) if quantized else x.float()
    y = torch.zeros(x.shape, device=DEV, dtype=torch.float32)
    for e in ids.unique().tolist():
        tok, slot = torch.where(ids == e)
        gu = rows[tok] @ w13(e).t()
        if b13 is not None:
            gu = gu + b13[e].float()
        h = expert_act(model, gu, I).to(torch.bfloat16).float()
        if quantized:
            h = round_trip(h)
        o = h @ w2(e).t()
        if b2 is not None:
            o = o + b2[e].float()
        y.index_add_(0, tok, o.to(torch.bfloat16).float() * w[tok, slot, None])
    return y


def run_steps(bundle, name, x, logits, bias, weights, b13, b2):
    """What the layer entry launches, through the parts' own entries, keeping every
    intermediate (poisoned first)."""
    w13q, w13s, w2q, w2s = weights
    ids, route_weights = bundle.route(f"{name}_route", logits, bias=bias)
    rows, offsets, slots = bundle.permute(f"{name}_permute", x, ids)
    rows_q, rows_s = bundle.quantize(f"{name}_quantize", rows)
    h = torch.full((rows.shape[0], w2q.shape[2]), float("nan"), device=DEV, dtype=torch.bfloat16)
    bundle.grouped_matmul(f"{name}_gate_up", rows_q, w13q, offsets, h, rows_scale=rows_s,
                          weights_scale=w13s, bias=b13)
    h_q, h_s = bundle.quantize(f"{name}_intermediate", h)
    y = torch.full((rows.shape[0], x.shape[1]), float("nan"), device=DEV, dtype=torch.bfloat16)
    bundle.grouped_matmul(f"{name}_down", h_q, w2q, offsets, y, rows_scale=h_s, weights_scale=w2s, bias=b2)
    out = bundle.unpermute(f"{name}_unpermute", y, slots, route_weights)
    return dict(offsets=offsets, rows=(rows_q, rows_s), h=h, h_fp8=(h_q, h_s), y=y, out=out)


def step_errors(model, steps, w13, w2, b13, b2):
    """Relative L2 errors of the gate-up and down steps against float32 on
    the dequantized values of their own inputs."""
    offsets = steps["offsets"].tolist()
    h, y = steps["h"], steps["y"]
    I = h.shape[1]
    rows, h_fp8 = dequantize_mx(*steps["rows"]).float(), dequantize_mx(*steps["h_fp8"]).float()
    want_h, want_y = torch.zeros_like(h, dtype=torch.float32), torch.zeros_like(y, dtype=torch.float32)
    for e in range(len(offsets) - 1):
        lo, hi = offsets[e], offsets[e + 1]
        if hi > lo:
            gu = rows[lo:hi] @ w13(e).t() + (b13[e].float() if b13 is not None else 0)
            want_h[lo:hi] = expert_act(model, gu, I)
            want_y[lo:hi] = h_fp8[lo:hi] @ w2(e).t() + (b2[e].float() if b2 is not None else 0)
    return rel_err(h, want_h), rel_err(y, want_y)


def main():
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    generator = torch.Generator(device=DEV).manual_seed(3)
    bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "mxlayer.moebundle"))
    as_bf16 = moe_mlir.Bundle(os.path.join(ARTIFACTS, "mxlayer-bf16.moebundle"))
    as_bf16_separate = moe_mlir.Bundle(os.path.join(ARTIFACTS, "mxlayer-bf16-separate.moebundle"))
    others = {"separate": as_bf16_separate}
    if BENCH:
        others.update({"widen": moe_mlir.Bundle(os.path.join(ARTIFACTS, "mxlayer-widen.moebundle")),
                       "block fp8": moe_mlir.Bundle(os.path.join(ARTIFACTS, "fp8layer.moebundle")),
                       "bf16": moe_mlir.Bundle(os.path.join(ARTIFACTS, "layer.moebundle"))})
    tally = Tally()
    report = tally.report
    table = []

    for name, model in MODELS.items():
        H, I, E, k = SHAPES[model]
        deepseek, gptoss = model == "deepseek-v3", model == "gpt-oss-120b"
        w13 = (torch.randn(E, 2 * I, H, device=DEV, generator=generator) * H ** -0.5).to(torch.bfloat16)
        w2 = (torch.randn(E, H, I, device=DEV, generator=generator) * I ** -0.5).to(torch.bfloat16)
        b13 = (torch.randn(E, 2 * I, device=DEV, generator=generator) * 0.1).to(torch.bfloat16) if gptoss else None
        b2 = torch.randn(E, H, device=DEV, generator=generator) * 0.1 if gptoss else None
        what = f"mxfp8 layer {model} weights prepacked bit-exact with quantize_mx"
        w13q, w13s = bundle.quantize(f"{name}_prepack", w13)
        w2q, w2s = bundle.quantize(f"{name}_prepack_0", w2)
        try:
            # A few experts at a time: DeepSeek-V3's weights in f32 would not fit.
            same = all(torch.equal(q[e:e + 8].view(torch.uint8), want[0].view(torch.uint8))
                       and torch.equal(s[e:e + 8].view(torch.uint8), want[1])
                       for q, s, w in ((w13q, w13s, w13), (w2q, w2s, w2)) for e in range(0, E, 8)
                       for want in (quantize_mx(w[e:e + 8]),))
            report(same, what)
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")
        weights = (w13q, w13s, w2q, w2s)
        what = f"mxfp8-as-bf16 layer {model} weights prepacked: the dequantized MXFP8 codes, bit-exact"
        try:
            w13d = as_bf16.launch(f"{name}_prepack", input=w13)["out"]
            w2d = as_bf16.launch(f"{name}_prepack_0", input=w2)["out"]
            same = all(torch.equal(d[e:e + 8].double(), dequantize_mx(q[e:e + 8], s[e:e + 8]))
                       for d, q, s in ((w13d, w13q, w13s), (w2d, w2q, w2s)) for e in range(0, E, 8))
            report(same and w13d.dtype == torch.bfloat16, what)
        except Exception as error:
            w13d = w2d = None
            report(False, what, f"{type(error).__name__}: {error}")
        dequantized = (w13d, None, w2d, None)
        mx_w13 = lambda e: dequantize_mx(w13q[e], w13s[e]).float()  # noqa: E731
        mx_w2 = lambda e: dequantize_mx(w2q[e], w2s[e]).float()  # noqa: E731
        bf16_w13 = lambda e: w13[e].float()  # noqa: E731
        bf16_w2 = lambda e: w2[e].float()  # noqa: E731

        cases = [(T, "random") for T in TOKENS] + [(T, r) for r in ("hot", "half") for T in SKEWED_TOKENS]
        for T, routing in cases:
            what = f"mxfp8 layer {model} T={T} {routing} routing"
            try:
                x = torch.randn(T, H, device=DEV, generator=generator).to(torch.bfloat16)
                logits = logits_for(T, E, routing, generator)
                bias = torch.randn(E, device=DEV, generator=generator) * 0.1 if deepseek else None
                layer = Fp8Layer(bundle, name, T, H, I, weights, bias, b13, b2)
                layer.poison()
                out = layer(x, logits)
                steps = run_steps(bundle, name, x, logits, bias, weights, b13, b2)
                torch.cuda.synchronize()
                exact = torch.equal(out, steps["out"])
                gate_up_err, down_err = step_errors(model, steps, mx_w13, mx_w2, b13, b2)
                err = rel_err(out, layer_reference(model, x, logits, bias, mx_w13, mx_w2, b13, b2, True))
                vs_bf16 = rel_err(out, layer_reference(model, x, logits, bias, bf16_w13, bf16_w2, b13, b2, False))
                ok = (exact and max(gate_up_err, down_err) <= STEP_TOLERANCE and err <= TOLERANCE
                      and vs_bf16 <= QUANTIZATION_BOUND and not torch.isnan(out).any())
                report(ok, what, f"layer {'=' if exact else 'DIFFERS FROM'} its steps, gate-up step "
                       f"{gate_up_err:.2e}, down step {down_err:.2e}, layer {err:.2e} (vs the bf16 layer "
                       f"{vs_bf16:.2e})")
                del steps
                what = f"mxfp8-as-bf16 layer {model} T={T} {routing} routing"
                bf16_layer = Fp8Layer(as_bf16, name, T, H, I, dequantized, bias, b13, b2)
                bf16_layer.poison()
                out_d = bf16_layer(x, logits).clone()
                err_d = rel_err(out_d, layer_reference(model, x, logits, bias, mx_w13, mx_w2, b13, b2, True))
                # The round trip in the gate-up epilogue is its kernel's, bit for bit.
                separate = Fp8Layer(as_bf16_separate, name, T, H, I, dequantized, bias, b13, b2)
                separate.poison()
                same = torch.equal(separate(x, logits), out_d)
                del separate
                report(err_d <= TOLERANCE and same and not torch.isnan(out_d).any(), what,
                       f"layer {err_d:.2e} (vs the MXFP8 layer {rel_err(out_d, out):.2e}), "
                       f"{'=' if same else 'DIFFERS FROM'} the layer with a round-trip kernel")
                if BENCH and routing == "random":
                    table.append(bench_point(model, name, T, x, logits, layer, bf16_layer, others, w13, w2,
                                             b13, b2))
                del layer, bf16_layer
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")

        what = f"mxfp8 layer {model} CUDA graph replay on new inputs"
        try:
            T = 64
            bias = torch.randn(E, device=DEV, generator=generator) * 0.1 if deepseek else None
            layer = Fp8Layer(bundle, name, T, H, I, weights, bias, b13, b2)
            x = torch.randn(T, H, device=DEV, generator=generator).to(torch.bfloat16)
            logits = torch.randn(T, E, device=DEV, generator=generator)

            def refresh():
                x.copy_(torch.randn(T, H, device=DEV, generator=generator).to(torch.bfloat16))
                logits.copy_(torch.randn(T, E, device=DEV, generator=generator))

            errs = graph_replay_errors(
                lambda: layer(x, logits), refresh, layer.poison,
                lambda: rel_err(layer.out, layer_reference(model, x, logits, bias, mx_w13, mx_w2, b13, b2, True)))
            report(all(e <= TOLERANCE for e in errs), what, ", ".join(f"{e:.2e}" for e in errs))
            what = f"mxfp8-as-bf16 layer {model} CUDA graph replay on new inputs"
            bf16_layer = Fp8Layer(as_bf16, name, T, H, I, dequantized, bias, b13, b2)
            errs = graph_replay_errors(
                lambda: bf16_layer(x, logits), refresh, bf16_layer.poison,
                lambda: rel_err(bf16_layer.out, layer_reference(model, x, logits, bias, mx_w13, mx_w2, b13, b2,
                                                                True)))
            report(all(e <= TOLERANCE for e in errs), what, ", ".join(f"{e:.2e}" for e in errs))
            del bf16_layer
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")

        what = f"mxfp8 layer {model} argument errors"
        try:
            T = 7
            layer = Fp8Layer(bundle, name, T, H, I, weights, torch.zeros(E, device=DEV) if deepseek else None,
                            b13, b2)
            x = torch.randn(T, H, device=DEV, generator=generator).to(torch.bfloat16)
            logits = torch.randn(T, E, device=DEV, generator=generator)
            bad = {
                "no gate-up weight scales": dict(w13s=None),
                "no down weight scales": dict(w2s=None),
                "bf16 gate-up weights": dict(w13=w13),
                "gate-up scales of another shape": dict(w13s=w13s[:, :1].contiguous()),
                "f32 gate-up scales (block FP8's)": dict(w13s=torch.ones(E, 2 * I // 128, H // 128,
                                                                          device=DEV)),
                "workspace too small": dict(workspace=layer.workspace[:-256]),
            }
            refused = refused_without_launch(bad, lambda change: layer(x, logits, **change), layer.out,
                                             moe_mlir.MoERuntimeError)
            report(len(refused) == len(bad), what, f"{len(refused)} of {len(bad)} refused without launching")
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")
        del w13, w2, weights, w13q, w13s, w2q, w2s, dequantized, w13d, w2d
        torch.cuda.empty_cache()

    if table:
        print()
        print("| model | T | ours MXFP8 ms | widening at prefill ms | as bf16 GEMMs ms | same, round-trip "
              "kernel ms | ours block FP8 ms | ours bf16 ms | MXFP8 / bf16 | as bf16 GEMMs / bf16 |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for model, T, mx, widen, dq, dq_separate, block, bf16 in table:
            fmt = lambda v: f"{v:.4f}" if v else "—"  # noqa: E731
            ratio = lambda a, b: f"{a / b:.2f}" if a and b else "—"  # noqa: E731
            print(f"| {model} | {T} | {mx:.4f} | {widen:.4f} | {dq:.4f} | {dq_separate:.4f} | {fmt(block)} "
                  f"| {fmt(bf16)} | {ratio(mx, bf16)} | {ratio(dq, bf16)} |")
    return tally.summary()


def bench_point(model, name, T, x, logits, layer, bf16_layer, others, w13, w2, b13, b2):
    """Medians (ms) of CUDA-graph replays of the MXFP8 layer, of the same
    as bf16 GEMMs on dequantized values (`bf16_layer`), and of our block-FP8
    (its own prepacked weights; none for GPT-OSS) and bf16 layers on the
    same inputs; DeepSeek-V3 with a zero correction bias."""
    H, I, E, _ = SHAPES[model]
    zero_bias = torch.zeros(E, device=DEV) if model == "deepseek-v3" else None
    timed = lambda fn: min(v for v in bench(fn) if v)  # noqa: E731
    layer.bias = zero_bias
    mx = timed(lambda: layer(x, logits))
    bf16_layer.bias = zero_bias
    dq = timed(lambda: bf16_layer(x, logits))
    separate = Fp8Layer(others["separate"], name, T, H, I, bf16_layer.weights, zero_bias, b13, b2)
    dq_separate = timed(lambda: separate(x, logits))
    del separate
    widening = Fp8Layer(others["widen"], name, T, H, I, layer.weights, zero_bias, b13, b2)
    widen = timed(lambda: widening(x, logits))
    del widening
    block = None
    if model != "gpt-oss-120b":
        fp8 = others["block fp8"]
        w13q, w13s = fp8.quantize(f"{name}_prepack", w13)
        w2q, w2s = fp8.quantize(f"{name}_prepack_0", w2)
        ws = torch.empty(fp8.layer_workspace_bytes(name, T, H, I), device=DEV, dtype=torch.uint8)
        out = torch.empty(T, H, device=DEV, dtype=torch.bfloat16)
        block = timed(lambda: fp8.layer(name, x, logits, w13q, w2q, score_bias=zero_bias,
                                        gate_up_weights_scale=w13s, down_weights_scale=w2s, out=out,
                                        workspace=ws))
        del w13q, w13s, w2q, w2s, ws
    bf16 = others["bf16"]
    ws = torch.empty(bf16.layer_workspace_bytes(name, T, H, I), device=DEV, dtype=torch.uint8)
    out = torch.empty(T, H, device=DEV, dtype=torch.bfloat16)
    ours_bf16 = timed(lambda: bf16.layer(name, x, logits, w13, w2, score_bias=zero_bias, gate_up_bias=b13,
                                         down_bias=b2, out=out, workspace=ws))
    print(f"  {model} T={T}: MXFP8 {mx:.4f} ms (widening at prefill {widen:.4f}, as bf16 GEMMs {dq:.4f}, "
          f"with a round-trip kernel {dq_separate:.4f}), block FP8 {block if block is None else round(block, 4)}, "
          f"bf16 {ours_bf16:.4f}", flush=True)
    return model, T, mx, widen, dq, dq_separate, block, ours_bf16


if __name__ == "__main__":
    run(main)
