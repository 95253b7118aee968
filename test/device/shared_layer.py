#!/usr/bin/env python3
"""MoE layers with a shared expert on the GPU: test/device/layer_shared_models.mlir
compiled by --moe-gpu-pipeline, which runs the shared expert (width Is) as
c = ceil(Is / I) routed experts every token takes, weighted 1 (DeepSeek-V3)
or by sigmoid(x . gate) (Qwen1.5-MoE-A2.7B, and a width of 2.5 I whose last
slice is half zeros), inside the layer's own grouped GEMM launches.

The weights are arranged here as --moe-route-shared-experts documents (its
@<f>_pack_shared): expert E+j holds the shared gate rows [jI, (j+1)I), up
rows Is + [jI, (j+1)I) and down columns [jI, (j+1)I), zero past Is.

Tests: the bf16 layers (layer-shared.moebundle) and the same layers in block
FP8 (layer-shared-fp8.moebundle: --moe-quantize after the rewrite, weights
prepacked by the bundle's own prepack entries from the arranged ones)
against a float32 reference of the Hugging Face semantics (routed experts by
peers.reference, plus the dense shared MLP and its gate; for FP8 on the
dequantized weights with the rows' and activations' [1, 128] round trips),
relative L2 error <= 1e-2, T in {1, 7, 128,
4096} and a large T, one hot expert, outputs and workspace poisoned first;
the shared expert must change the output well past the tolerance; a CUDA
graph replay on new inputs; unarranged weights and a missing or misshapen
gate refused without a launch. Prints `N passed, N failed`.

    python3 test/device/shared_layer.py .gpu-artifacts .shared-bench
"""
import os
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
PEERS = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else ".shared-bench")
sys.path[:0] = [os.path.join(ARTIFACTS, "site"), PEERS, os.path.dirname(os.path.abspath(__file__))]
import moe_mlir  # noqa: E402
from tally import Tally, graph_replay_errors, refused_without_launch, run  # noqa: E402
from peers import expert_act, reference, route_model  # noqa: E402
from fp8_grouped_matmul import dequantize_blocks, quantize_blocks  # noqa: E402
from layer import FloatExperts, rel_err  # noqa: E402

DEV = "cuda"
# name: (H, I, E, k, Is, gated, peers' routing model, logits dtype, large T)
MODELS = {
    "deepseek_v3": (7168, 2048, 256, 8, 2048, False, "deepseek-v3", torch.float32, 8192),
    "qwen1_5_moe_a2_7b": (2048, 1408, 60, 4, 5632, True, "olmoe-1b-7b", torch.bfloat16, 16384),
    "padded": (1024, 512, 16, 2, 1280, True, "mixtral-8x7b", torch.float32, 16384),
}
TOLERANCE = 1e-2
# The shared expert (and its gate) must change the output by more than this.
MATTERS = 0.1


def random_weights(H, I, E, Is, gated):
    """bf16 routed (w13 [E, 2I, H], w2 [E, H, I]) and shared (s13 [2Is, H],
    s2 [H, Is], the gate [1, H] or None) weights of unit-scale outputs."""
    def normal(*shape, fan_in):
        return (torch.randn(*shape, device=DEV) * fan_in ** -0.5).to(torch.bfloat16)
    return (normal(E, 2 * I, H, fan_in=H), normal(E, H, I, fan_in=I),
            normal(2 * Is, H, fan_in=H), normal(H, Is, fan_in=Is),
            normal(1, H, fan_in=H) if gated else None)


def arrange(w13, w2, s13, s2):
    """The routed weights with the shared expert's c slices appended."""
    E, two_i, H = w13.shape
    I, Is = two_i // 2, s2.shape[1]
    c = -(-Is // I)
    gate_up = torch.zeros(E + c, two_i, H, device=DEV, dtype=w13.dtype)
    down = torch.zeros(E + c, H, I, device=DEV, dtype=w2.dtype)
    gate_up[:E], down[:E] = w13, w2
    for j in range(c):
        rows = min(I, Is - j * I)
        gate_up[E + j, :rows] = s13[j * I:j * I + rows]
        gate_up[E + j, I:I + rows] = s13[Is + j * I:Is + j * I + rows]
        down[E + j, :, :rows] = s2[:, j * I:j * I + rows]
    return gate_up, down


class DequantizedExperts:
    """[E, R, C] e4m3 codes with f32 scales per [128, 128] block that read
    as float32, one expert at a time."""

    def __init__(self, codes, scales, block=128):
        self.codes, self.scales, self.block, self.shape = codes, scales, block, codes.shape

    def __getitem__(self, expert):
        s = self.scales[expert].repeat_interleave(self.block, 0).repeat_interleave(self.block, 1)
        return self.codes[expert].float() * s[:self.shape[1], :self.shape[2]]


def round_trip(x):
    """x [N, K] through [1, 128]-group e4m3 quantization, as float32."""
    q, s = quantize_blocks(x, 1)
    return dequantize_blocks(q, s, 1).float()


def shared_mlp(x, s13, s2, gate, quantized=False):
    """The dense shared expert in float32, scaled by its gate (of the bf16
    tokens) if any; `quantized`: the FP8 layer's round trips of the rows and
    of the activation, whose [1, 128] groups along Is are the slices' own
    (I is a multiple of 128)."""
    Is = s2.shape[1]
    rows = round_trip(x) if quantized else x
    gu = rows @ s13.t()
    h = torch.nn.functional.silu(gu[:, :Is]) * gu[:, Is:]
    if quantized:
        h = round_trip(h.to(torch.bfloat16).float())
    y = h @ s2.t()
    return y * torch.sigmoid(x @ gate.t()) if gate is not None else y


def routed_fp8(model, x, logits, bias, k, w13, w2):
    """The routed experts of the block-FP8 layer in float32 on dequantized
    weights, with its round trips of the rows and of the activation."""
    I = w2.shape[2]
    w, ids = route_model(model, logits, k, bias)
    rows = round_trip(x)
    y = torch.zeros(x.shape, device=DEV, dtype=torch.float32)
    for e in ids.unique().tolist():
        tok, slot = torch.where(ids == e)
        h = round_trip(expert_act(model, rows[tok] @ w13[e].t(), I).to(torch.bfloat16).float())
        y.index_add_(0, tok, (h @ w2[e].t()).to(torch.bfloat16).float() * w[tok, slot, None])
    return y


def main():
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    bundles = {"bf16": moe_mlir.Bundle(os.path.join(ARTIFACTS, "layer-shared.moebundle")),
               "fp8": moe_mlir.Bundle(os.path.join(ARTIFACTS, "layer-shared-fp8.moebundle"))}
    tally = Tally()
    report = tally.report

    for name, (H, I, E, k, Is, gated, model, logit_type, large) in MODELS.items():
        w13, w2, s13, s2, gate = random_weights(H, I, E, Is, gated)
        gate_up, down = arrange(w13, w2, s13, s2)
        del w13, w2
        deepseek = model == "deepseek-v3"
        for fmt, bundle in bundles.items():
            weights = dict(gate_up_weights=gate_up, down_weights=down)
            routed13, routed2 = FloatExperts(gate_up[:E]), FloatExperts(down[:E])
            shared13, shared2 = s13.float(), s2.float()
            if fmt == "fp8":
                # Prepacked by the bundle from the arranged weights; the
                # reference reads the dequantized values.
                q13, sc13 = bundle.quantize(f"{name}_prepack", gate_up)
                q2, sc2 = bundle.quantize(f"{name}_prepack_0", down)
                weights = dict(gate_up_weights=q13, gate_up_weights_scale=sc13,
                               down_weights=q2, down_weights_scale=sc2)
                routed13, routed2 = DequantizedExperts(q13, sc13), DequantizedExperts(q2, sc2)
                # The shared expert back from its slices (zeros past Is).
                c = -(-Is // I)
                d13 = torch.stack([routed13[E + j] for j in range(c)])
                d2 = torch.stack([routed2[E + j] for j in range(c)])
                shared13 = torch.cat([d13[:, :I].reshape(c * I, H)[:Is],
                                      d13[:, I:].reshape(c * I, H)[:Is]])
                shared2 = d2.permute(1, 0, 2).reshape(H, c * I)[:, :Is]
                del d13, d2

            def want(x, logits, bias, with_shared=True, with_gate=True):
                xf = x.float()
                if fmt == "fp8":
                    y = routed_fp8(model, xf, logits, bias, k, routed13, routed2)
                else:
                    y = reference(model, xf, logits, routed13, routed2, score_bias=bias, k=k)
                if with_shared:
                    y = y + shared_mlp(xf, shared13, shared2,
                                       gate.float() if gated and with_gate else None,
                                       quantized=fmt == "fp8")
                return y

            def call(x, logits, bias, out, workspace, **change):
                args = dict(tokens=x, logits=logits, score_bias=bias, shared_gate=gate,
                            out=out, workspace=workspace, **weights)
                args.update(change)
                return bundle.launch(name, **args)["out"]

            def buffers(T):
                """The output and workspace for T tokens, poisoned: NaN in
                every bf16/f32, -1 in every index."""
                return (torch.full((T, H), float("nan"), device=DEV, dtype=torch.bfloat16),
                        torch.full((bundle.workspace_bytes(name, {"T": T}),), 0xFF, device=DEV,
                                   dtype=torch.uint8))

            def inputs(T, hot=False):
                x = torch.randn(T, H, device=DEV).to(torch.bfloat16)
                logits = torch.randn(T, E, device=DEV)
                if hot:  # every token's best expert is expert 3
                    logits[:, 3] += 20.0
                bias = torch.randn(E, device=DEV) * 0.1 if deepseek else None
                return x, logits.to(logit_type), bias

            for T, hot in [(1, False), (7, False), (128, False), (4096, False), (large, False),
                           (512, True)]:
                what = f"{fmt} shared layer {name} T={T}{' hot expert' if hot else ''}"
                try:
                    x, logits, bias = inputs(T, hot)
                    out, workspace = buffers(T)
                    got = call(x, logits, bias, out, workspace)
                    torch.cuda.synchronize()
                    ref = want(x, logits, bias)
                    err = rel_err(got, ref)
                    # The shared expert, and its gate, must matter.
                    matters = rel_err(want(x, logits, bias, with_shared=False), ref)
                    if gated:
                        matters = min(matters, rel_err(want(x, logits, bias, with_gate=False), ref))
                    ok = err <= TOLERANCE and matters > MATTERS and not torch.isnan(got).any()
                    report(ok, what, f"relative L2 error {err:.2e} (the shared expert "
                                     f"{'and its gate ' if gated else ''}change it by >= {matters:.2f})")
                    del out, workspace
                except Exception as error:
                    report(False, what, f"{type(error).__name__}: {error}")

            what = f"{fmt} shared layer {name} CUDA graph replay on new inputs"
            try:
                T = 64
                x, logits, bias = inputs(T)
                out, workspace = buffers(T)

                def refresh():
                    fresh_x, fresh_logits, _ = inputs(T)
                    x.copy_(fresh_x)
                    logits.copy_(fresh_logits)

                def poison():
                    out.fill_(float("nan"))
                    workspace.fill_(0xFF)

                errs = graph_replay_errors(lambda: call(x, logits, bias, out, workspace), refresh,
                                           poison, lambda: rel_err(out, want(x, logits, bias)))
                report(all(e <= TOLERANCE for e in errs), what, ", ".join(f"{e:.2e}" for e in errs))
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")

            what = f"{fmt} shared layer {name} argument errors"
            try:
                T = 7
                x, logits, bias = inputs(T)
                out, workspace = buffers(T)
                unarranged = torch.empty((E,) + tuple(weights["gate_up_weights"].shape[1:]),
                                         device=DEV, dtype=weights["gate_up_weights"].dtype)
                bad = {"gate-up weights without the shared slices": dict(gate_up_weights=unarranged)}
                if gated:
                    bad["no shared gate"] = dict(shared_gate=None)
                    bad["a shared gate of another width"] = dict(
                        shared_gate=torch.zeros(1, H + 8, device=DEV, dtype=torch.bfloat16))
                else:
                    bad["a shared gate the layer does not take"] = dict(
                        shared_gate=torch.zeros(1, H, device=DEV, dtype=torch.bfloat16))

                def attempt(change):
                    call(x, logits, bias, out, workspace, **change)

                refused = refused_without_launch(bad, attempt, out, moe_mlir.MoERuntimeError)
                report(len(refused) == len(bad), what,
                       f"{len(refused)} of {len(bad)} refused without launching")
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")
            del weights, routed13, routed2, shared13, shared2
            torch.cuda.empty_cache()
        del gate_up, down, s13, s2
        torch.cuda.empty_cache()
    return tally.summary()


if __name__ == "__main__":
    run(main)
