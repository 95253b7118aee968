#!/usr/bin/env python3
"""Block-FP8 MoE layers on the H200: the layers of test/device/layer_models.mlir
(GPT-OSS left out: H = 2880 is no multiple of 128) quantized by
`--moe-quantize="scope=weights+activations"` and compiled by
`--moe-gpu-pipeline` into fp8layer.moebundle: per layer one layer_fp8.v1
entry (route, permute whose gather stores the rows as e4m3 and [1, 128]-
group scales, the FP8 gate-up GEMM storing silu(gate) * up in bf16, its
quantize kernel, the FP8 down GEMM, combine) and the prepack entries that
quantize the weights once. fp8layer-epilogue.moebundle
(`fp8-epilogue-quantize=1`): the gate-up's epilogue quantizes the
activation itself. fp8layer-separate.moebundle (`fp8-gather-quantize=0`):
a bf16 gather and a quantize kernel; with it, the reference form every
fused quantization is compared with bit for bit. The permutes of
fp8layer.moebundle launch their scatter kernel (over the tokens, quantizing
each once and storing it to its k slots) instead of the quantizing gather
from T = 128 on; fp8layer-scatter.moebundle (`fp8-scatter-min-tokens=1`) at
every T, fp8layer-gather.moebundle (`=0`) never.

Tests (default), for Mixtral-8x7B, Qwen3-30B-A3B, OLMoE-1B-7B and
DeepSeek-V3 (random correction bias) at T in {1, 7, 64, 128, 1000, 8192}
with random router logits, plus skewed routings (one hot expert; half the
experts never chosen) at T = 64 and 1000:
- the weights prepacked on the GPU by the bundle's own prepack entries;
- for fp8layer, fp8layer-epilogue and fp8layer-scatter: the layer (output and workspace
  poisoned first) bit-exact with its steps run through their own entries
  and with the separate form's layer; the rows' and the activation's e4m3
  codes and scales bit-exact with the separate form's bf16 gather and
  gate-up, each then quantized by its quantize kernel, on the same inputs;
  each GEMM step with a bf16
  output (the reference form's gate-up, the down) against a float32
  reference on the dequantized values of that step's own inputs: relative
  L2 error <= 3e-3;
- the layer's output against a float32 reference on the dequantized values
  that follows the IR's types end to end (rows quantized in [1, 128]
  groups, gate-up in f32, the activation rounded to bf16 and quantized in
  [1, 128] groups, the down GEMM's rows rounded to bf16, the combine in
  f32): relative L2 error <= 1e-2. Not 3e-3: Hopper's e4m3 wgmma adds
  within each 128-K step at reduced precision (about 1e-4 relative, the
  reason for the per-128 promotion), which moves about 10 % of the
  activation's bf16 roundings and 1 % of its e4m3 codes to the neighbour,
  each 6-12 % of its value: about 5e-3 end to end;
- the error against the unquantized bf16 layer (the same reference without
  the quantization steps) reported and bounded by 0.1 (the FP8 rounding);
- the reference's row quantizer bit-exact with the layer's quantize entry
  on the same rows;
- each quantizing permute entry (default, scatter, gather) called alone on ids
  with dropped ones (-1 and >= E: no row, slot -1, zero rows at the end),
  all ids dropped, one hot expert, T = 1, and T = 70000 for DeepSeek-V3
  (beyond 65535 CTAs: grid-stride), its outputs poisoned first: codes,
  scales, offsets and slots bit-exact with the separate form's bf16 permute
  then its quantize kernel; the same for the k = 20 layer of
  test/device/fp8_permutes.mlir (fp8permute-*.moebundle), whose scatter
  reads each slot where it stores it;
- the layer captured in a CUDA graph, replayed on new inputs;
- at decode (T = 1 and 7) 20 graph replays on new routings, each bit for bit
  equal to an eager call without programmatic dependent launch (the GEMMs
  read their offsets before waiting on the previous kernel, contract §3.6);
- bad arguments (no weight scales, bf16 weights, a short workspace) refused
  with a message and nothing launched.
`--bench`: the FP8 layer beside our bf16 layer (layer.moebundle), the FP8
peer (route, sort, rowwise e4m3 quantization and torch._scaled_grouped_mm
for both GEMMs, combine) and `torch_grouped_mm` (bf16) of peers.py on the
same data in one process: medians of CUDA-graph replays. Prints
`N passed, N failed` (and a table).

    python3 test/device/fp8_layer.py .gpu-artifacts .shared-bench [--bench]
"""
import os
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
PEERS = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else ".shared-bench")
BENCH = "--bench" in sys.argv
sys.path[:0] = [os.path.join(ARTIFACTS, "site"), PEERS, os.path.dirname(os.path.abspath(__file__))]
import moe_mlir  # noqa: E402
from tally import (Tally, graph_replay_errors, refused_without_launch, run,  # noqa: E402
                   warm_up_on_side_stream)
from peers import SHAPES, bench, expert_act, moe_grouped, route_model  # noqa: E402
from fp8_grouped_matmul import dequantize_blocks, quantize_blocks  # noqa: E402

DEV = "cuda"
MODELS = {"mixtral_8x7b": "mixtral-8x7b", "qwen3_30b_a3b": "qwen3-30b-a3b",
          "olmoe_1b_7b": "olmoe-1b-7b", "deepseek_v3": "deepseek-v3"}
TOKENS = [1, 7, 64, 128, 1000, 8192]
SKEWED_TOKENS = [64, 1000]
STEP_TOLERANCE = 3e-3
TOLERANCE = 1e-2
QUANTIZATION_BOUND = 0.1


def round_trip_rows(x):
    """x [N, K] through [1, 128]-group e4m3 quantization, as float32."""
    q, s = quantize_blocks(x, 1)
    return dequantize_blocks(q, s, 1).float()


def layer_reference(model, x, logits, bias, w13, w2, quantized):
    """The layer in float32 on dequantized weights (w13(e), w2(e) give an
    expert's [2I, H] and [H, I]), following the IR's types; `quantized`
    adds the FP8 round trips of the rows and of the activation."""
    I = w2(0).shape[1]
    w, ids = route_model(model, logits, score_bias=bias)
    rows = x.float()
    if quantized:  # per row: quantizing before the gather is the same
        rows = round_trip_rows(rows)
    y = torch.zeros(x.shape, device=DEV, dtype=torch.float32)
    for e in ids.unique().tolist():
        tok, slot = torch.where(ids == e)
        h = expert_act(model, rows[tok] @ w13(e).t(), I).to(torch.bfloat16).float()
        if quantized:
            h = round_trip_rows(h)
        o = (h @ w2(e).t()).to(torch.bfloat16).float()
        y.index_add_(0, tok, o * w[tok, slot, None])
    return y


def run_steps(bundle, name, x, logits, bias, weights, k):
    """The layer's steps through their own entries (the quantize kernels
    where the bundle's gather or gate-up store bf16): what the layer entry launches,
    with every intermediate kept (poisoned first)."""
    w13q, w13s, w2q, w2s = weights
    T, I = x.shape[0], w2q.shape[2]
    ids, route_weights = bundle.route(f"{name}_route", logits, bias=bias)
    if bundle.entry(f"{name}_permute").out == "f8E4M3FN":
        (rows_q, rows_s), offsets, slots = bundle.permute(f"{name}_permute", x, ids)
    else:
        rows, offsets, slots = bundle.permute(f"{name}_permute", x, ids)
        rows_q, rows_s = bundle.quantize(f"{name}_quantize", rows)
    if bundle.entry(f"{name}_gate_up").out == "f8E4M3FN":
        h_q = torch.full((T * k, I), 0x7F, device=DEV, dtype=torch.uint8).view(torch.float8_e4m3fn)
        h_s = torch.full((T * k, I // 128), float("nan"), device=DEV)
        bundle.grouped_matmul(f"{name}_gate_up", rows_q, w13q, offsets, h_q, rows_scale=rows_s,
                              weights_scale=w13s, out_scale=h_s)
    else:
        h = torch.full((T * k, I), float("nan"), device=DEV, dtype=torch.bfloat16)
        bundle.grouped_matmul(f"{name}_gate_up", rows_q, w13q, offsets, h, rows_scale=rows_s, weights_scale=w13s)
        h_q, h_s = bundle.quantize(f"{name}_intermediate", h)
    y = torch.empty(T * k, x.shape[1], device=DEV, dtype=torch.bfloat16)
    bundle.grouped_matmul(f"{name}_down", h_q, w2q, offsets, y, rows_scale=h_s, weights_scale=w2s)
    out = bundle.unpermute(f"{name}_unpermute", y, slots, route_weights)
    return dict(ids=ids, offsets=offsets, rows=(rows_q, rows_s), h_fp8=(h_q, h_s), y=y, out=out)


def reference_quantizes(ref_bundle, name, x, steps, weights):
    """The reference form's gather (bf16) and gate-up (bf16 out), each
    followed by its quantize kernel, on the fused layer's own inputs: the
    rows' and the activation's codes and scales, and the bf16 activation."""
    w13q, w13s, w2q, _ = weights
    rows, _, _ = ref_bundle.permute(f"{name}_permute", x, steps["ids"])
    rows_fp8 = ref_bundle.quantize(f"{name}_quantize", rows)
    rows_q, rows_s = steps["rows"]
    h = torch.full((rows_q.shape[0], w2q.shape[2]), float("nan"), device=DEV, dtype=torch.bfloat16)
    ref_bundle.grouped_matmul(f"{name}_gate_up", rows_q, w13q, steps["offsets"], h, rows_scale=rows_s,
                              weights_scale=w13s)
    return rows_fp8, h, ref_bundle.quantize(f"{name}_intermediate", h)


def same_fp8(a, b):
    """Codes and scales equal bit for bit."""
    return (torch.equal(a[0].view(torch.uint8), b[0].view(torch.uint8))
            and torch.equal(a[1].view(torch.int32), b[1].view(torch.int32)))


def step_errors(model, steps, h, w13, w2):
    """Relative L2 errors of the gate-up (the reference form's bf16 `h`) and
    down steps against float32 on the dequantized values of their own
    inputs."""
    offsets = steps["offsets"].tolist()
    I = h.shape[1]
    rows = dequantize_blocks(*steps["rows"], 1).float()
    h_fp8 = dequantize_blocks(*steps["h_fp8"], 1).float()
    want_h, want_y = torch.zeros_like(h, dtype=torch.float32), torch.zeros_like(steps["y"], dtype=torch.float32)
    for e in range(len(offsets) - 1):
        lo, hi = offsets[e], offsets[e + 1]
        if hi > lo:
            want_h[lo:hi] = expert_act(model, rows[lo:hi] @ w13(e).t(), I)
            want_y[lo:hi] = h_fp8[lo:hi] @ w2(e).t()
    return rel_err(h, want_h), rel_err(steps["y"], want_y)


def rel_err(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def logits_for(T, E, routing, generator):
    logits = torch.randn(T, E, device=DEV, generator=generator)
    if routing == "hot":  # every token's top choice is expert 0
        logits[:, 0] += 8.0
    elif routing == "half":  # experts E/2.. never chosen
        logits[:, E // 2:] -= 30.0
    return logits


class Fp8Layer:
    """The compiled FP8 layer `name` with its output and workspace for T
    tokens (graph-safe: one runtime call, no allocation); GPT-OSS's expert
    biases b13, b2 where the layer takes them."""

    def __init__(self, bundle, name, T, H, I, weights, bias, b13=None, b2=None):
        self.bundle, self.name, self.weights, self.bias = bundle, name, weights, bias
        self.b13, self.b2 = b13, b2
        self.workspace = torch.empty(bundle.layer_workspace_bytes(name, T, H, I), device=DEV,
                                     dtype=torch.uint8)
        self.out = torch.empty(T, H, device=DEV, dtype=torch.bfloat16)

    def poison(self):
        self.out.fill_(float("nan"))
        self.workspace.fill_(0xFF)  # NaN in bf16, f32 and e4m3; -1 in every index

    def __call__(self, x, logits, **change):
        w13q, w13s, w2q, w2s = self.weights
        args = dict(x=x, w13=w13q, w2=w2q, w13s=w13s, w2s=w2s, workspace=self.workspace)
        args.update(change)
        return self.bundle.layer(self.name, args["x"], logits, args["w13"], args["w2"],
                                 score_bias=self.bias, gate_up_bias=self.b13, down_bias=self.b2,
                                 gate_up_weights_scale=args["w13s"],
                                 down_weights_scale=args["w2s"], out=self.out,
                                 workspace=args["workspace"])


def scaled_grouped_peer(model, x, logits, peer_weights, k):
    """The FP8 peer: routing, sort by expert, rowwise e4m3 quantization of
    the rows and of the activation, torch._scaled_grouped_mm for both
    GEMMs (rowwise weight scales), weighted index_add combine."""
    w13q, w13s, w2q, w2s = peer_weights
    T, H = x.shape
    I = w2q.shape[2]
    w, ids = route_model(model, logits)
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    tok = order // k
    ends = torch.bincount(flat, minlength=w13q.shape[0]).cumsum(0).to(torch.int32)

    def rowwise(a):
        scale = (a.abs().amax(-1).float() / 448.0).clamp_min(1e-12)
        return (a.float() / scale[:, None]).to(torch.float8_e4m3fn), scale

    xq, xs = rowwise(x[tok])
    gu = torch._scaled_grouped_mm(xq, w13q.transpose(1, 2), xs, w13s, offs=ends, out_dtype=torch.bfloat16)
    hq, hs = rowwise(expert_act(model, gu, I))
    o = torch._scaled_grouped_mm(hq, w2q.transpose(1, 2), hs, w2s, offs=ends, out_dtype=torch.bfloat16)
    y = torch.zeros(T, H, device=x.device, dtype=torch.float32)
    y.index_add_(0, tok, o.float() * w.flatten()[order, None])
    return y.to(x.dtype)


def rowwise_weights(w):
    # One expert at a time: a float32 copy of DeepSeek-V3's gate-up weights alone is 28 GiB.
    q = torch.empty(w.shape, device=w.device, dtype=torch.float8_e4m3fn)
    scale = torch.empty(w.shape[:-1], device=w.device, dtype=torch.float32)
    for e in range(w.shape[0]):
        scale[e] = (w[e].abs().amax(-1).float() / 448.0).clamp_min(1e-12)
        q[e] = (w[e].float() / scale[e][..., None]).to(torch.float8_e4m3fn)
    return q, scale


def main():
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    generator = torch.Generator(device=DEV).manual_seed(1)
    bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "fp8layer.moebundle"))
    epilogue_bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "fp8layer-epilogue.moebundle"))
    ref_bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "fp8layer-separate.moebundle"))
    scatter_bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "fp8layer-scatter.moebundle"))
    gather_bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "fp8layer-gather.moebundle"))
    bf16_bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "layer.moebundle")) if BENCH else None
    tally = Tally()
    report = tally.report
    table = []

    for name, model in MODELS.items():
        H, I, E, k = SHAPES[model]
        deepseek = model == "deepseek-v3"
        w13 = (torch.randn(E, 2 * I, H, device=DEV, generator=generator) * H ** -0.5).to(torch.bfloat16)
        w2 = (torch.randn(E, H, I, device=DEV, generator=generator) * I ** -0.5).to(torch.bfloat16)
        # The weights quantized once by the bundle's prepack entries.
        w13q, w13s = bundle.quantize(f"{name}_prepack", w13)
        w2q, w2s = bundle.quantize(f"{name}_prepack_0", w2)
        weights = (w13q, w13s, w2q, w2s)
        fp8_w13 = lambda e: dequantize_blocks(w13q[e], w13s[e], 128).float()  # noqa: E731
        fp8_w2 = lambda e: dequantize_blocks(w2q[e], w2s[e], 128).float()  # noqa: E731
        bf16_w13 = lambda e: w13[e].float()  # noqa: E731
        bf16_w2 = lambda e: w2[e].float()  # noqa: E731

        cases = [(T, "random") for T in TOKENS] + [(T, r) for r in ("hot", "half") for T in SKEWED_TOKENS]
        for T, routing in cases:
            what = f"fp8 layer {model} T={T} {routing} routing"
            try:
                x = torch.randn(T, H, device=DEV, generator=generator).to(torch.bfloat16)
                logits = logits_for(T, E, routing, generator)
                bias = torch.randn(E, device=DEV, generator=generator) * 0.1 if deepseek else None
                ref_layer = Fp8Layer(ref_bundle, name, T, H, I, weights, bias)
                ref_layer.poison()
                ref_out = ref_layer(x, logits)
                exact = {}
                for form, form_bundle in (("default", bundle), ("epilogue", epilogue_bundle),
                                          ("scatter", scatter_bundle)):
                    layer = Fp8Layer(form_bundle, name, T, H, I, weights, bias)
                    layer.poison()
                    out = layer(x, logits)
                    steps = run_steps(form_bundle, name, x, logits, bias, weights, k)
                    rows_fp8, h, h_fp8 = reference_quantizes(ref_bundle, name, x, steps, weights)
                    torch.cuda.synchronize()
                    exact.update({f"{form} steps": torch.equal(out, steps["out"]),
                                  f"{form} = separate": torch.equal(out, ref_out),
                                  f"{form} rows e4m3": same_fp8(steps["rows"], rows_fp8),
                                  f"{form} activation e4m3": same_fp8(steps["h_fp8"], h_fp8)})
                gate_up_err, down_err = step_errors(model, steps, h, fp8_w13, fp8_w2)
                err = rel_err(out, layer_reference(model, x, logits, bias, fp8_w13, fp8_w2, True))
                vs_bf16 = rel_err(out, layer_reference(model, x, logits, bias, bf16_w13, bf16_w2, False))
                ok = (all(exact.values()) and max(gate_up_err, down_err) <= STEP_TOLERANCE
                      and err <= TOLERANCE and vs_bf16 <= QUANTIZATION_BOUND and not torch.isnan(out).any())
                differ = [key for key, v in exact.items() if not v]
                report(ok, what, (f"DIFFER: {', '.join(differ)}" if differ else f"{len(exact)} bit-exact checks")
                       + f", gate-up step {gate_up_err:.2e}, down step {down_err:.2e}, layer {err:.2e} "
                       f"(vs the bf16 layer {vs_bf16:.2e})")
                del steps, rows_fp8, h, h_fp8, ref_layer
                if BENCH and routing == "random":
                    table.append(bench_point(model, name, T, x, logits, weights, w13, w2,
                                             (bundle, epilogue_bundle, ref_bundle, bf16_bundle), k))
                del layer
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")

        # The reference's quantizer is the layer's: bit-exact on the same rows.
        what = f"fp8 layer {model} reference quantizer bit-exact with {name}_quantize"
        try:
            rows = torch.randn(1000, H, device=DEV, generator=generator).to(torch.bfloat16)
            rows[:3] *= 1e-30  # tiny blocks (subnormal values)
            rows[3, :128] = 0  # an all-zero group
            q, s = ref_bundle.quantize(f"{name}_quantize", rows)
            want_q, want_s = quantize_blocks(rows.float(), 1)
            same = torch.equal(q.view(torch.uint8), want_q.view(torch.uint8)) and torch.equal(s, want_s)
            report(same, what)
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")

        check_quantizing_permutes(report, (("default", bundle), ("scatter", scatter_bundle),
                                           ("gather", gather_bundle)),
                                  ref_bundle, name, model, generator)

        # The layer captured in a CUDA graph, replayed on new inputs.
        what = f"fp8 layer {model} CUDA graph replay on new inputs"
        try:
            T = 64
            bias = torch.randn(E, device=DEV, generator=generator) * 0.1 if deepseek else None
            layer = Fp8Layer(bundle, name, T, H, I, weights, bias)
            x = torch.randn(T, H, device=DEV, generator=generator).to(torch.bfloat16)
            logits = torch.randn(T, E, device=DEV, generator=generator)
            def refresh():
                x.copy_(torch.randn(T, H, device=DEV, generator=generator).to(torch.bfloat16))
                logits.copy_(torch.randn(T, E, device=DEV, generator=generator))

            errs = graph_replay_errors(
                lambda: layer(x, logits), refresh, layer.poison,
                lambda: rel_err(layer.out, layer_reference(model, x, logits, bias, fp8_w13, fp8_w2, True)))
            report(all(e <= TOLERANCE for e in errs), what, ", ".join(f"{e:.2e}" for e in errs))
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")

        # Decode replays on new routings against eager calls without PDL:
        # the GEMMs read the offsets before their wait, so a replay must see
        # this routing's, never a stale one (bit for bit: same kernels).
        # (Its own generator: the other cases keep their data.)
        replay_generator = torch.Generator(device=DEV).manual_seed(2)
        for T in (1, 7):
            what = f"fp8 layer {model} T={T} 20 replays equal eager calls without PDL"
            try:
                bias = torch.randn(E, device=DEV, generator=replay_generator) * 0.1 if deepseek else None
                layer = Fp8Layer(bundle, name, T, H, I, weights, bias)
                eager = Fp8Layer(bundle, name, T, H, I, weights, bias)
                x = torch.randn(T, H, device=DEV, generator=replay_generator).to(torch.bfloat16)
                logits = torch.randn(T, E, device=DEV, generator=replay_generator)
                warm_up_on_side_stream(lambda: layer(x, logits))
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    layer(x, logits)
                differ = []
                for r in range(20):
                    x.copy_(torch.randn(T, H, device=DEV, generator=replay_generator).to(torch.bfloat16))
                    logits.copy_(torch.randn(T, E, device=DEV, generator=replay_generator) * (1 + r % 3))
                    layer.poison()
                    graph.replay()
                    eager.poison()
                    os.environ["MOE_RUNTIME_PDL"] = "0"
                    try:
                        eager(x, logits)
                    finally:
                        os.environ.pop("MOE_RUNTIME_PDL")
                    torch.cuda.synchronize()
                    if not torch.equal(layer.out.view(torch.int16), eager.out.view(torch.int16)):
                        differ.append(r)
                report(not differ, what, f"replays {differ} differ" if differ else "")
                del graph
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")

        # Bad arguments: a message, no launch, the output untouched.
        what = f"fp8 layer {model} argument errors"
        try:
            T = 7
            layer = Fp8Layer(bundle, name, T, H, I, weights, torch.zeros(E, device=DEV) if deepseek else None)
            x = torch.randn(T, H, device=DEV, generator=generator).to(torch.bfloat16)
            logits = torch.randn(T, E, device=DEV, generator=generator)
            bad = {
                "no gate-up weight scales": dict(w13s=None),
                "no down weight scales": dict(w2s=None),
                "bf16 gate-up weights": dict(w13=w13),
                "gate-up scales of another shape": dict(w13s=w13s[:, :1].contiguous()),
                "workspace too small": dict(workspace=layer.workspace[:-256]),
            }
            refused = refused_without_launch(bad, lambda change: layer(x, logits, **change), layer.out,
                                             moe_mlir.MoERuntimeError)
            report(len(refused) == len(bad), what, f"{len(refused)} of {len(bad)} refused without launching")
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")
        del w13, w2, weights, w13q, w13s, w2q, w2s
        torch.cuda.empty_cache()

    # k = 20 (test/device/fp8_permutes.mlir): the scatter reading each slot
    # where it stores it.
    check_quantizing_permutes(
        report, (("scatter", moe_mlir.Bundle(os.path.join(ARTIFACTS, "fp8permute-scatter.moebundle"))),),
        moe_mlir.Bundle(os.path.join(ARTIFACTS, "fp8permute-separate.moebundle")), "k20", "k=20 layer",
        generator, shape=(256, 32, 20))

    if table:
        print()
        print("| model | T | ours fp8 ms | epilogue-quantize ms | separate ms | ours bf16 ms "
              "| scaled_grouped_mm fp8 ms | torch_grouped_mm bf16 ms | vs scaled_grouped_mm | vs our bf16 "
              "| fp8 roofline ms | of roofline |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for model, T, ours, epilogue, separate, ours_bf16, peer, grouped, floor in table:
            fmt = lambda v: f"{v:.4f}" if v else "—"  # noqa: E731
            ratio = f"{peer / ours:.2f}" if peer else "—"
            print(f"| {model} | {T} | {ours:.4f} | {epilogue:.4f} | {separate:.4f} | {fmt(ours_bf16)} | {fmt(peer)} "
                  f"| {grouped:.4f} | {ratio} | {ours_bf16 / ours:.2f} | {floor:.4f} | {floor / ours:.2f} |")
    return tally.summary()


def check_quantizing_permutes(report, forms, ref_bundle, name, model, generator, shape=None):
    """Each form's quantizing permute entry alone, outputs poisoned, against
    the separate form's bf16 permute then its quantize kernel, bit for bit,
    on ids with dropped ones (-1 and >= E), all dropped, one hot expert.
    `shape`: (H, E, k) when `model` is no model of peers.py."""
    H, E, k = shape or (SHAPES[model][0], *SHAPES[model][2:])
    cases = [(1, "random"), (7, "dropped"), (1000, "dropped"), (1000, "hot"), (3, "all dropped"),
             (8192, "random")]
    if model == "deepseek-v3":
        cases.append((70000, "dropped"))  # ceil(T / 4) * 4 blocks > 65535 CTAs
    for T, ids_kind in cases:
        what = f"fp8 layer {model} quantizing permutes T={T} {ids_kind} ids"
        try:
            x = torch.randn(T, H, device=DEV, generator=generator).to(torch.bfloat16)
            ids = torch.randint(0, E, (T, k), device=DEV, generator=generator, dtype=torch.int32)
            if ids_kind == "hot":
                ids[:, 0] = 0
            dropped = torch.rand(T, k, device=DEV, generator=generator)
            if ids_kind == "dropped":
                ids[dropped < 0.1] = -1
                ids[dropped > 0.9] = E + 3
            if ids_kind == "all dropped":
                ids.fill_(-1)
            rows, want_offsets, want_slots = ref_bundle.permute(f"{name}_permute", x, ids)
            want = ref_bundle.quantize(f"{name}_quantize", rows)
            del rows
            differ = []
            for form, form_bundle in forms:
                info = form_bundle.entry(f"{name}_permute")
                index = torch.int32 if info.offsets_bits == 32 else torch.int64
                codes = torch.full((T * k, H), 0x7F, device=DEV, dtype=torch.uint8)
                scales = torch.full((T * k, H // 128), float("nan"), device=DEV)
                offsets = torch.full((E + 1,), -7, device=DEV, dtype=index)
                slots = torch.full((T, k), -7, device=DEV, dtype=index)
                (got_codes, got_scales), got_offsets, got_slots = form_bundle.permute(
                    f"{name}_permute", x, ids, rows=codes, offsets=offsets, slots=slots, rows_scale=scales)
                if not (same_fp8((got_codes, got_scales), want) and torch.equal(got_offsets, want_offsets)
                        and torch.equal(got_slots, want_slots)):
                    differ.append(form)
                del codes, scales, got_codes, got_scales
            zero_rows = T * k - int(want_offsets[-1])
            report(not differ, what, f"DIFFER: {', '.join(differ)}" if differ else
                   f"{' and '.join(f for f, _ in forms)} bit-exact ({zero_rows} zero rows)")
            del want, x
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")


def bench_point(model, name, T, x, logits, weights, w13, w2, bundles, k):
    """Medians (ms) of CUDA-graph replays of ours (the FP8 forms: default,
    epilogue-quantize, separate; bf16) and the peers on the same data;
    DeepSeek-V3 with a zero correction bias."""
    H, I, E, _ = SHAPES[model]
    fp8_bundle, epilogue_bundle, ref_bundle, bf16_bundle = bundles
    zero_bias = torch.zeros(E, device=DEV) if model == "deepseek-v3" else None
    timed = lambda fn: min(v for v in bench(fn) if v)  # noqa: E731
    ours, epilogue, separate = (
        timed(lambda layer=Fp8Layer(b, name, T, H, I, weights, zero_bias): layer(x, logits))
        for b in (fp8_bundle, epilogue_bundle, ref_bundle))
    bf16_ws = torch.empty(bf16_bundle.layer_workspace_bytes(name, T, H, I), device=DEV, dtype=torch.uint8)
    bf16_out = torch.empty(T, H, device=DEV, dtype=torch.bfloat16)
    ours_bf16 = timed(lambda: bf16_bundle.layer(name, x, logits, w13, w2, score_bias=zero_bias,
                                                out=bf16_out, workspace=bf16_ws))
    peer_weights = (*rowwise_weights(w13), *rowwise_weights(w2))
    try:
        peer = timed(lambda: scaled_grouped_peer(model, x, logits, peer_weights, k))
    except Exception as error:  # report, do not stop
        peer = None
        print(f"# torch._scaled_grouped_mm: {type(error).__name__}: {error}"[:200])
    del peer_weights
    grouped = timed(lambda: moe_grouped(x, logits, w13, w2, k, model))
    # Roofline: the hit experts' FP8 weights at 4.4 TB/s or the useful FLOPs
    # at twice the dense bf16 rate, whichever takes longer.
    hit = route_model(model, logits, score_bias=zero_bias)[1].unique().numel()
    floor = max(hit * 3 * I * H / 4.4e9, 2 * T * k * 3 * I * H / (2 * 689e9))
    print(f"  {model} T={T}: ours fp8 {ours:.4f} ms (epilogue-quantize {epilogue:.4f}, separate "
          f"{separate:.4f}), ours bf16 {ours_bf16:.4f}, scaled_grouped_mm "
          f"{peer if peer is None else round(peer, 4)}, torch_grouped_mm {grouped:.4f}", flush=True)
    return model, T, ours, epilogue, separate, ours_bf16, peer, grouped, floor


if __name__ == "__main__":
    run(main)
