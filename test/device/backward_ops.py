#!/usr/bin/env python3
"""GPU tests of the backward's SIMT kernels (planned.v1 entries), through the
runtime (run on the H200).

backward-ops.moebundle (scripts/build-gpu-artifacts.sh) holds moe.swiglu_grad
for silu (a static and a dynamic width) and GPT-OSS's clamped form (alpha
1.702, limit 7), moe.swiglu (the train forward's activation of a saved
gate-up output) for both, each also with `interleaved` (gate and up
alternating: the same inputs interleaved, the gradient put back into halves
before the check), moe.unpermute_grad (weighted with i64 slots at
Mixtral's hidden size, unweighted with i32 slots and k = 8) and
moe.route_grad for the routers of Mixtral (softmax then
top-2, renormalised), OLMoE (softmax then top-8, bf16 logits), DeepSeek-V3
(sigmoid, renormalised, scale 2.5) and GPT-OSS (top-4 then softmax). Each
gradient is checked against torch autograd in float64 of the same function
(docs/semantics.md) on the same inputs, fresh random data, the output
poisoned (NaN) first; GPT-OSS's activation inputs include values exactly at
the clamps' bounds (where the gradient passes, as torch.clamp's does) and
beyond them (where it does not); the routers' ids include a dropped (-1) and
a repeated id. The combine's adjoint runs on permutations with unnamed
(padding) rows, dropped slots (-1 and past M), rows several pairs name
(their sum is in pair order: two runs must be bit-identical), T = 0 and 1.
Prints `N passed, N failed`.

    python3 test/device/backward_ops.py .gpu-artifacts
"""
import os
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
sys.path.insert(0, os.path.join(ARTIFACTS, "site"))
import moe_mlir  # noqa: E402
from tally import Tally, run  # noqa: E402
from gated import LIMIT, activation  # noqa: E402

TOLERANCE = 1e-2  # bf16 output rounding is about 2e-3
DEV = "cuda"


def reference(kind, gu, dh):
    width = dh.shape[1]
    gate = gu[:, :width].double().requires_grad_()
    up = gu[:, width:].double().requires_grad_()
    d_gate, d_up = torch.autograd.grad(activation(kind, gate, up), [gate, up], dh.double())
    return torch.cat([d_gate, d_up], dim=1)


def interleave(gu, width):
    """[gate | up] as alternating columns: gate i at 2i, up i at 2i + 1."""
    return torch.stack([gu[:, :width], gu[:, width:]], dim=2).reshape(gu.shape[0], 2 * width).contiguous()


def halves(gu):
    """Alternating columns back into [gate | up]."""
    return torch.cat([gu[:, 0::2], gu[:, 1::2]], dim=1)


def inputs(kind, m, width, seed):
    g = torch.Generator(device=DEV).manual_seed(seed)
    scale = 4.0 if kind == "gptoss" else 2.0
    gu = (torch.randn(m, 2 * width, device=DEV, generator=g) * scale).to(torch.bfloat16)
    if kind == "gptoss" and m:
        # Exactly at the bounds (bf16 holds 7 exactly) and beyond them.
        gu[:, 0] = LIMIT
        gu[:, width] = LIMIT
        gu[:, width + 1] = -LIMIT
        gu[:, 1] = LIMIT + 1
        gu[:, width + 2] = -LIMIT - 1
    dh = torch.randn(m, width, device=DEV, generator=g).to(torch.bfloat16)
    return gu, dh


ROUTERS = {  # entry: (routing, E, k, renormalize, scale, logits dtype)
    "route_grad_mixtral": ("softmax_topk", 8, 2, True, 1.0, torch.float32),
    "route_grad_olmoe": ("softmax_topk", 64, 8, False, 1.0, torch.bfloat16),
    "route_grad_deepseek": ("sigmoid_topk", 256, 8, True, 2.5, torch.float32),
    "route_grad_gptoss": ("topk_softmax", 128, 4, False, 1.0, torch.float32),
}


def route_weights(routing, logits, ids, renormalize, scale):
    """The routing weights of moe.route_grad's definition, differentiable."""
    experts = logits.shape[1]
    valid = (ids >= 0) & (ids < experts)
    col = ids.clamp(0, experts - 1).long()
    if routing == "softmax_topk":
        v = torch.softmax(logits, -1).gather(1, col)
    elif routing == "sigmoid_topk":
        v = torch.sigmoid(logits.gather(1, col))
    else:
        v = logits.gather(1, col)
    v = torch.where(valid, v, torch.zeros_like(v))
    if routing == "topk_softmax":
        v = torch.softmax(v, -1)
    if renormalize:
        v = v / (v.sum(-1, keepdim=True) + (1e-20 if routing == "sigmoid_topk" else 0.0))
    return v * scale


def check_swiglu(bundle, report):
    seed = 100
    for entry, kind in (("swiglu_silu", "silu"), ("swiglu_gptoss", "gptoss"),
                        ("swiglu_silu_il", "silu"), ("swiglu_gptoss_il", "gptoss")):
        for width in (256, 768, 2880):
            for m in (1, 7, 300, 16384):
                seed += 1
                what = f"{entry} I={width} M={m}"
                try:
                    gu, _ = inputs(kind, m, width, seed)
                    out = torch.full((m, width), float("nan"), device=DEV, dtype=torch.bfloat16)
                    given = interleave(gu, width) if entry.endswith("_il") else gu
                    bundle.launch(entry, input=given, out=out)
                    torch.cuda.synchronize()
                    g = gu.double()
                    want = activation(kind, g[:, :width], g[:, width:])
                    got = out.double()
                    if not torch.isfinite(got).all():
                        problem = "values not finite (poison left?)"
                    else:
                        err = ((got - want).norm() / want.norm()).item()
                        problem = None if err <= TOLERANCE else f"relative L2 error {err:.3e} > {TOLERANCE}"
                    report(problem is None, what, problem or "")
                except Exception as error:
                    report(False, what, f"{type(error).__name__}: {error}")


def unpermute_grad_reference(dy, rows, slots, weights):
    """moe.unpermute_grad in float64: a slot's row gets w * dy[t] (summed
    over the pairs that name it), each pair <dy[t], rows[slot]>."""
    t_count, k = slots.shape
    m = rows.shape[0]
    flat = slots.reshape(-1).long()
    valid = (flat >= 0) & (flat < m)
    w = weights.double().reshape(-1) if weights is not None else torch.ones(t_count * k, device=DEV, dtype=torch.float64)
    tokens = torch.arange(t_count * k, device=DEV) // k
    d_rows = torch.zeros(m, rows.shape[1], device=DEV, dtype=torch.float64)
    d_rows.index_add_(0, flat[valid], dy.double()[tokens[valid]] * w[valid, None])
    d_w = torch.zeros(t_count * k, device=DEV, dtype=torch.float64)
    d_w[valid] = (dy.double()[tokens[valid]] * rows.double()[flat[valid]]).sum(-1)
    return d_rows, d_w.reshape(t_count, k)


def unpermute_grad_slots(kind, tokens, k, g):
    """[T, k] slots of `kind` and the row count M: a permutation of the T*k
    pairs onto rows with unnamed padding rows between them, the same with
    dropped slots (-1 and M), or rows that several pairs name."""
    pairs = tokens * k
    if kind == "duplicates":
        m = max(1, pairs // 3)
        slots = torch.randint(0, m, (pairs,), device=DEV, generator=g)
        if pairs >= 4:
            slots[: pairs // 4] = 0  # one hot row
        return slots.reshape(tokens, k), m
    m = pairs + pairs // 5 + 3  # padding rows that no pair names
    slots = torch.randperm(m, device=DEV, generator=g)[:pairs]
    if kind == "dropped" and pairs >= 3:
        slots[0] = -1
        slots[pairs // 2] = m
    return slots.reshape(tokens, k), m


def check_unpermute_grad(bundle, report):
    seed = 200
    for entry, hidden, k, weighted, dtype in (
            ("unpermute_grad_mixtral", 4096, 2, True, torch.int64),
            ("unpermute_grad_k8", 2048, 8, False, torch.int32),
            ("unpermute_grad_k8", 264, 8, False, torch.int32)):
        for kind in ("permutation", "dropped", "duplicates"):
            for tokens in (0, 1, 7, 300, 16384):
                seed += 1
                what = f"{entry} H={hidden} {kind} T={tokens}"
                try:
                    g = torch.Generator(device=DEV).manual_seed(seed)
                    slots, m = unpermute_grad_slots(kind, tokens, k, g)
                    slots = slots.to(dtype)
                    dy = torch.randn(tokens, hidden, device=DEV, generator=g).to(torch.bfloat16)
                    rows = torch.randn(m, hidden, device=DEV, generator=g).to(torch.bfloat16)
                    weights = torch.rand(tokens, k, device=DEV, generator=g) if weighted else None
                    args = dict(grad=dy, rows=rows, slots=slots)
                    if weighted:
                        args["weights"] = weights

                    def run_once():
                        out = {"rows_grad": torch.full((m, hidden), float("nan"), device=DEV, dtype=torch.bfloat16)}
                        if weighted:
                            out["weights_grad"] = torch.full((tokens, k), float("nan"), device=DEV)
                        bundle.launch(entry, **args, **out)
                        torch.cuda.synchronize()
                        return out

                    first, second = run_once(), run_once()
                    want_rows, want_w = unpermute_grad_reference(dy, rows, slots, weights)
                    problem = None
                    for name, want in (("rows_grad", want_rows), ("weights_grad", want_w)):
                        if name not in first:
                            continue
                        got = first[name].double()
                        if not torch.isfinite(got).all():
                            problem = f"{name}: values not finite (poison left?)"
                        elif want.numel() and want.norm() > 0:
                            err = ((got - want).norm() / want.norm()).item()
                            if not err <= TOLERANCE:
                                problem = f"{name}: relative L2 error {err:.3e} > {TOLERANCE}"
                        elif got.numel() and got.abs().max() != 0:
                            problem = f"{name}: not zero"
                        if not torch.equal(first[name], second[name]):
                            problem = f"{name}: two runs differ (not deterministic)"
                    # Rows no pair names are exactly zero.
                    named = torch.zeros(m, dtype=torch.bool, device=DEV)
                    flat = slots.reshape(-1).long()
                    named[flat[(flat >= 0) & (flat < m)]] = True
                    unnamed = first["rows_grad"][~named]
                    if problem is None and unnamed.numel() and unnamed.abs().max() != 0:
                        problem = "an unnamed row is not zero"
                    report(problem is None, what, problem or "")
                except Exception as error:
                    report(False, what, f"{type(error).__name__}: {error}")


def check_route_grad(bundle, report):
    for entry, (routing, experts, k, renormalize, scale, dtype) in ROUTERS.items():
        for tokens in (1, 7, 300, 4096, 300000 if entry == "route_grad_mixtral" else 16384):
            what = f"{entry} T={tokens}"
            try:
                g = torch.Generator(device=DEV).manual_seed(tokens + experts)
                logits = torch.randn(tokens, experts, device=DEV, generator=g).to(dtype)
                ids = logits.float().topk(k, dim=-1).indices.to(torch.int32)
                if tokens >= 7:
                    ids[3, 0] = -1           # a dropped slot
                    ids[5, k - 1] = ids[5, 0]  # a repeated id
                grad = torch.randn(tokens, k, device=DEV, generator=g)
                out = torch.full((tokens, experts), float("nan"), device=DEV, dtype=dtype)
                bundle.route_grad(entry, logits, ids, grad, out)
                torch.cuda.synchronize()
                x = logits.double().requires_grad_()
                weights = route_weights(routing, x, ids, renormalize, scale)
                (want,) = torch.autograd.grad(weights, [x], grad.double())
                got = out.double()
                tolerance = 1e-2 if dtype == torch.bfloat16 else 1e-4
                if not torch.isfinite(got).all():
                    problem = "values not finite (poison left?)"
                else:
                    err = ((got - want).norm() / want.norm()).item()
                    problem = None if err <= tolerance else f"relative L2 error {err:.3e} > {tolerance}"
                report(problem is None, what, problem or "")
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")


def main():
    tally = Tally()
    report = tally.report
    bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "backward-ops.moebundle"))
    for entry in bundle.entries:
        op = "moe." + ("swiglu" if entry.name.startswith("swiglu_") and
                       not entry.name.startswith("swiglu_grad")
                       else entry.name.split("_grad")[0] + "_grad")
        report(entry.abi == "planned.v1" and entry.op == op,
               f"{entry.name} is op {op}, abi planned.v1", f"{entry.op} {entry.abi}")
    cases = [("swiglu_grad_silu_i256", "silu", 256)]
    cases += [("swiglu_grad_silu", "silu", w) for w in (768, 1536, 2048)]
    cases += [("swiglu_grad_gptoss", "gptoss", w) for w in (2880, 64)]
    cases += [("swiglu_grad_silu_il", "silu", w) for w in (768, 2048)]
    cases += [("swiglu_grad_gptoss_il", "gptoss", w) for w in (2880, 64)]
    seed = 0
    for entry, kind, width in cases:
        for m in (1, 7, 300, 4096, 16384):
            seed += 1
            what = f"{entry} I={width} M={m}"
            try:
                gu, dh = inputs(kind, m, width, seed)
                out = torch.full((m, 2 * width), float("nan"), device=DEV, dtype=torch.bfloat16)
                mixed = entry.endswith("_il")
                bundle.swiglu_grad(entry, interleave(gu, width) if mixed else gu, dh, out)
                torch.cuda.synchronize()
                want = reference(kind, gu, dh)
                got = halves(out).double() if mixed else out.double()
                problem = None
                if not torch.isfinite(got).all():
                    problem = f"{int((~torch.isfinite(got)).sum())} values not finite (poison left?)"
                else:
                    err = ((got - want).norm() / want.norm()).item()
                    if not err <= TOLERANCE:
                        problem = f"relative L2 error {err:.3e} > {TOLERANCE}"
                    elif kind == "gptoss":
                        # Where a clamp clamps, exactly zero; at its bounds, not.
                        beyond = torch.stack([got[:, 1], got[:, width + 2]])
                        at = torch.stack([got[:, 0], got[:, width], got[:, width + 1]])
                        if beyond.abs().max() != 0:
                            problem = "a clamped value passed a gradient"
                        elif (at == 0).float().mean() > 0.5:
                            problem = "values at the clamps' bounds passed no gradient"
                report(problem is None, what, problem or "")
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")
    check_route_grad(bundle, report)
    check_swiglu(bundle, report)
    check_unpermute_grad(bundle, report)
    # M = 0 launches nothing and is no error.
    try:
        gu, dh = inputs("silu", 0, 256, 99)
        out = bundle.swiglu_grad("swiglu_grad_silu_i256", gu, dh)
        torch.cuda.synchronize()
        report(tuple(out.shape) == (0, 512), "swiglu_grad M = 0 is a no-op", str(tuple(out.shape)))
    except Exception as error:
        report(False, "swiglu_grad M = 0 is a no-op", f"{type(error).__name__}: {error}")
    # Argument errors come back as exceptions with a message.
    gu, dh = inputs("silu", 8, 768, 5)
    for what, call in {
        "input not twice the gradient's width": lambda: bundle.swiglu_grad(
            "swiglu_grad_silu", gu[:, :1000].contiguous(), dh),
        "a width not a multiple of 8": lambda: bundle.swiglu_grad(
            "swiglu_grad_silu", gu[:, :20].contiguous(), dh[:, :10].contiguous()),
        "f32 gradient": lambda: bundle.swiglu_grad("swiglu_grad_silu", gu, dh.float()),
    }.items():
        try:
            call()
            torch.cuda.synchronize()
            report(False, f"runtime rejects {what}", "no error raised")
        except moe_mlir.MoERuntimeError as error:
            report(True, f"runtime rejects {what}", str(error).splitlines()[0][:120])
        except Exception as error:
            report(False, f"runtime rejects {what}", f"unexpected {type(error).__name__}: {error}")
    return tally.summary()


if __name__ == "__main__":
    run(main)
