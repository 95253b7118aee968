#!/usr/bin/env python3
"""GPU tests of the backward's SIMT kernels (planned.v1 entries), through the
runtime (run on the H200).

backward-ops.moebundle (scripts/build-gpu-artifacts.sh) holds moe.swiglu_grad
for silu (a static and a dynamic width) and GPT-OSS's clamped form (alpha
1.702, limit 7). Each gradient is checked against torch autograd of the
activation in float64 on the same bf16 inputs, fresh random data, the output
poisoned (NaN) first; GPT-OSS's inputs include values exactly at the clamps'
bounds (where the gradient passes, as torch.clamp's does) and beyond them
(where it does not). Prints `N passed, N failed`.

    python3 test/device/backward_ops.py .gpu-artifacts
"""
import os
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
sys.path.insert(0, os.path.join(ARTIFACTS, "site"))
import moe_mlir  # noqa: E402
from tally import Tally, run  # noqa: E402

TOLERANCE = 1e-2  # bf16 output rounding is about 2e-3
DEV = "cuda"
ALPHA, LIMIT = 1.702, 7.0


def activation(kind, gate, up):
    if kind == "silu":
        return torch.nn.functional.silu(gate) * up
    g = gate.clamp(max=LIMIT)
    u = up.clamp(min=-LIMIT, max=LIMIT)
    return (u + 1) * (g * torch.sigmoid(g * ALPHA))


def reference(kind, gu, dh):
    width = dh.shape[1]
    gate = gu[:, :width].double().requires_grad_()
    up = gu[:, width:].double().requires_grad_()
    d_gate, d_up = torch.autograd.grad(activation(kind, gate, up), [gate, up], dh.double())
    return torch.cat([d_gate, d_up], dim=1)


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


def main():
    tally = Tally()
    report = tally.report
    bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "backward-ops.moebundle"))
    for entry in bundle.entries:
        report(entry.abi == "planned.v1" and entry.op == "moe.swiglu_grad",
               f"{entry.name} is op moe.swiglu_grad, abi planned.v1", f"{entry.op} {entry.abi}")
    cases = [("swiglu_grad_silu_i256", "silu", 256)]
    cases += [("swiglu_grad_silu", "silu", w) for w in (768, 1536, 2048)]
    cases += [("swiglu_grad_gptoss", "gptoss", w) for w in (2880, 64)]
    seed = 0
    for entry, kind, width in cases:
        for m in (1, 7, 300, 4096, 16384):
            seed += 1
            what = f"{entry} I={width} M={m}"
            try:
                gu, dh = inputs(kind, m, width, seed)
                out = torch.full((m, 2 * width), float("nan"), device=DEV, dtype=torch.bfloat16)
                bundle.swiglu_grad(entry, gu, dh, out)
                torch.cuda.synchronize()
                want = reference(kind, gu, dh)
                got = out.double()
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
