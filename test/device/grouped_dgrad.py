#!/usr/bin/env python3
"""GPU tests of moe.grouped_dgrad's kernels, through the runtime (run on the H200).

Every dgrad-*.moebundle of the artifacts folder (scripts/build-gpu-artifacts.sh:
one entry per shape of test/device/shapes.txt whose N is a multiple of 8,
weights [E, N, K] as the forward has them) computes

    out[r] = grad[r] @ weights[e]      for offsets[e] <= r < offsets[e + 1]

with the weights read untransposed (WGMMA's N-major B). Each result is checked
against a float32 torch reference from the same bf16 inputs, on fresh random
data, the output poisoned (NaN) first: rows an expert owns must match (relative
L2 error), rows nobody owns must stay poisoned (contract §3.1). Two runs of one
call must be bit-identical (no atomics). Also a CUDA-graph replay with a new
routing, and the runtime's argument errors.

The dgradact-*.moebundle entries (planned.v1) are the down projection's dgrad
with the activation's gradient in its epilogue (`act_grad`): out [M, 2I] is
the gate and up gradient of the saved gate-up output act_input [M, 2I] for
the product grad @ weights[e] kept in f32, checked against float64 autograd
of the activation on the float64 product (GPT-OSS's clamps reached: exactly
zero where they clamp).

knfwd.moebundle holds moe.grouped_matmul with kn_weights, the forward over
weights [E, K, N] as GPT-OSS's experts lie (the same N-major kernels), with
an f32 or bf16 bias or none: out[r] = rows[r] @ weights[e] + bias[e], checked
as the dgrads are (poisoned output, unowned rows untouched, two runs
bit-identical), at GPT-OSS-20B's gate-up and down shapes too. Prints
`N passed, N failed`.

    python3 test/device/grouped_dgrad.py .gpu-artifacts
"""
import os
import random
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
sys.path.insert(0, os.path.join(ARTIFACTS, "site"))
import moe_mlir  # noqa: E402
from routings import clamped_ranges, offsets_from, skewed_counts  # noqa: E402
from tally import Tally, run, warm_up_on_side_stream  # noqa: E402
from gated import LIMIT, activation  # noqa: E402

# bf16 output rounding alone gives a relative error of about 2e-3.
TOLERANCE = 1e-2
DEV = "cuda"


def cases():
    """(name, entry, counts or explicit offsets, M)."""
    rng = random.Random(4321)
    yield "uniform (tiles start mid-expert)", "e8_n256_k512", [96] * 8, None
    yield "all rows to one expert", "e8_n256_k256", [0, 0, 0, 300, 0, 0, 0, 0], None
    yield "several empty experts", "e8_n128_k128", [0, 70, 0, 0, 1, 129, 0, 64], None
    yield "1 row total (T=1, k=1)", "e4_n128_k64", [0, 0, 1, 0], None
    yield "last expert empty", "e3_n128_k192", [64, 64, 0], None
    yield "skewed random, K and N tails", "e16_n192_k200", skewed_counts(rng, 16, 1000, 0.35), None
    yield "long reduction (K = 16640)", "e8_n16640_k64", [300, 0, 1, 64, 65, 0, 7, 128], None
    yield "wide output (4096 columns)", "e2_n384_k4096", [65, 3], None
    yield "decode mix: 1000 rows + experts of 0..17 rows", "e8_n4096_k1024", [1000, 1, 3, 0, 16, 17, 5, 64], None
    yield "i64 offsets", "e8_n256_k256_i64", [10, 0, 50, 17, 16, 1, 0, 200], None
    yield "64 experts, skewed, mostly empty", "e64_n512_k256", skewed_counts(rng, 64, 700, 0.2), None
    yield "1023 experts", "e1023_n128_k64", [rng.choice([0, 1, 2, 17, 64, 70]) for _ in range(1023)], None
    yield "malformed offsets (clamped)", "e8_n256_k256", [5, 3, 40, 40, 1000, 20, -7, 60, 2000], 100
    yield "rows past offsets[E] unowned", "e8_n128_k128", [0, 10, 30, 30, 64, 90, 100, 120, 150], 200


class Case:
    def __init__(self, entry, spec, rows, experts, n, k, offsets_dtype, seed):
        # The entry's GEMM: out [M, n] = grad [M, k] @ weights[e] [k, n].
        offsets, m = offsets_from(spec, experts, rows)
        self.m, self.n, self.k = max(m, 1), n, k
        g = torch.Generator(device=DEV).manual_seed(seed)
        self.grad = torch.randn(self.m, k, device=DEV, generator=g).to(torch.bfloat16)
        self.weights = (torch.randn(experts, k, n, device=DEV, generator=g) * k ** -0.5).to(torch.bfloat16)
        self.offsets = torch.tensor(offsets, device=DEV, dtype=offsets_dtype)
        self.reference = torch.full((self.m, n), float("nan"), device=DEV)
        for e, (lo, hi) in enumerate(clamped_ranges(offsets, self.m)):
            if hi > lo:
                self.reference[lo:hi] = self.grad[lo:hi].float() @ self.weights[e].float()

    def check(self, out):
        owned = ~torch.isnan(self.reference[:, 0])
        got, want = out[owned].float(), self.reference[owned]
        if torch.isnan(got).any():
            return f"{int(torch.isnan(got).any(1).sum())} owned rows not written (poison left)"
        err = ((got - want).norm() / want.norm().clamp_min(1e-30)).item() if owned.any() else 0.0
        if not err <= TOLERANCE:
            return f"relative L2 error {err:.3e} > {TOLERANCE}"
        if (~owned).any() and not torch.isnan(out[~owned].float()).all():
            return "rows no expert owns were written"
        return None


def call(bundle, entry, case, out):
    return bundle.grouped_dgrad(entry, case.grad, case.weights, case.offsets, out)




def check_act_grad(report):
    """The dgradact-* bundles: dgrad + the activation's gradient, one kernel."""
    bundles = sorted(f for f in os.listdir(ARTIFACTS)
                     if f.startswith("dgradact-") and f.endswith(".moebundle"))
    report(len(bundles) >= 3, f"{len(bundles)} dgradact bundles built", ", ".join(bundles))
    rng = random.Random(77)
    cases = [  # entry, counts
        ("silu_e8_h256_i512", [96] * 8),
        ("silu_e8_h256_i512", [0, 0, 0, 300, 0, 0, 0, 0]),
        ("silu_e16_h192_i200", skewed_counts(rng, 16, 1000, 0.35)),
        ("silu_e16_h192_i200", [0] * 15 + [1]),
        ("silu_e128_h2048_i768", skewed_counts(rng, 128, 16384, 0.5)),
        ("silu_e8_h256_i256_i64", [10, 0, 50, 17, 16, 1, 0, 200]),
        ("gptoss_e4_h512_i2880", [65, 3, 0, 200]),
        ("gptoss_e4_h512_i2880", [0, 1, 0, 0]),
    ]
    for bundle_name in bundles:
        bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, bundle_name))
        for seed, (entry, counts) in enumerate(cases):
            what = f"{bundle_name} {entry} M={sum(counts)}"
            try:
                kind = entry.split("_")[0]
                sig = {a.name: a for a in bundle.signature(entry).args}
                experts, h, i = (int(d) for d in sig["weights"].dims)
                offsets = [0]
                for c in counts:
                    offsets.append(offsets[-1] + c)
                m = offsets[-1]
                g = torch.Generator(device=DEV).manual_seed(1000 + seed)
                grad = torch.randn(m, h, device=DEV, generator=g).to(torch.bfloat16)
                weights = (torch.randn(experts, h, i, device=DEV, generator=g) * h ** -0.5).to(torch.bfloat16)
                gu = (torch.randn(m, 2 * i, device=DEV, generator=g) * (4.0 if kind == "gptoss" else 2.0)).to(torch.bfloat16)
                if kind == "gptoss":
                    gu[:, 0] = LIMIT        # at the bounds: passes
                    gu[:, i] = LIMIT
                    gu[:, i + 1] = -LIMIT
                    gu[:, 1] = LIMIT + 1    # beyond them: zero
                    gu[:, i + 2] = -LIMIT - 1
                dtype = torch.int64 if sig["offsets"].dtype == "i64" else torch.int32
                off = torch.tensor(offsets, device=DEV, dtype=dtype)
                product = torch.empty(m, i, device=DEV, dtype=torch.float64)
                for e in range(experts):
                    lo, hi = offsets[e], offsets[e + 1]
                    product[lo:hi] = grad[lo:hi].double() @ weights[e].double()
                gate = gu[:, :i].double().requires_grad_()
                up = gu[:, i:].double().requires_grad_()
                want = torch.cat(torch.autograd.grad(activation(kind, gate, up), [gate, up], product), 1)

                def once():
                    out = torch.full((m, 2 * i), float("nan"), device=DEV, dtype=torch.bfloat16)
                    bundle.launch(entry, rows=grad, weights=weights, offsets=off, out=out, act_input=gu)
                    torch.cuda.synchronize()
                    return out
                out = once()
                got = out.double()
                problem = None
                if not torch.isfinite(got).all():
                    problem = f"{int((~torch.isfinite(got)).sum())} values not finite (poison left?)"
                else:
                    err = ((got - want).norm() / want.norm().clamp_min(1e-30)).item()
                    if not err <= TOLERANCE:
                        problem = f"relative L2 error {err:.3e} > {TOLERANCE}"
                    elif kind == "gptoss" and got[:, [1, i + 2]].abs().max() != 0:
                        problem = "a clamped value passed a gradient"
                    elif kind == "gptoss" and (got[:, [0, i, i + 1]] == 0).float().mean() > 0.5:
                        problem = "values at the clamps' bounds passed no gradient"
                    elif not torch.equal(out.view(torch.int16), once().view(torch.int16)):
                        problem = "two runs differ (not deterministic)"
                report(problem is None, what, problem or "")
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")
    # A wrong act_input width is refused by the runtime with a message.
    bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, bundles[0]))
    grad = torch.randn(8, 256, device=DEV).to(torch.bfloat16)
    weights = torch.randn(8, 256, 512, device=DEV).to(torch.bfloat16)
    off = torch.tensor([0, 8] + [8] * 7, device=DEV, dtype=torch.int32)
    try:
        bundle.launch("silu_e8_h256_i512", rows=grad, weights=weights, offsets=off,
                      out=torch.empty(8, 1024, device=DEV, dtype=torch.bfloat16),
                      act_input=torch.empty(8, 512, device=DEV, dtype=torch.bfloat16))
        torch.cuda.synchronize()
        report(False, "runtime rejects an act_input of the wrong width", "no error raised")
    except moe_mlir.MoERuntimeError as error:
        report(True, "runtime rejects an act_input of the wrong width", str(error).splitlines()[0][:120])


def check_kn_forward(report):
    """knfwd.moebundle: the forward over [E, K, N] weights with a bias."""
    path = os.path.join(ARTIFACTS, "knfwd.moebundle")
    report(os.path.exists(path), "knfwd bundle built", path)
    if not os.path.exists(path):
        return
    bundle = moe_mlir.Bundle(path)
    rng = random.Random(91)
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16}
    for seed, entry in enumerate(e.name for e in bundle.entries):
        sig = {a.name: a for a in bundle.signature(entry).args}
        experts, k, n = (int(d) for d in sig["weights"].dims)
        for routing, counts in (("skewed", skewed_counts(rng, experts, 700, 0.3)),
                                ("one hot expert, the rest empty",
                                 [0] * (experts - 1) + [257]),
                                ("one row", [1] + [0] * (experts - 1))):
            what = f"knfwd {entry} M={sum(counts)}: {routing}"
            try:
                offsets = [0]
                for c in counts:
                    offsets.append(offsets[-1] + c)
                m = offsets[-1]
                g = torch.Generator(device=DEV).manual_seed(500 + seed)
                rows = torch.randn(m + 5, k, device=DEV, generator=g).to(torch.bfloat16)
                weights = (torch.randn(experts, k, n, device=DEV, generator=g)
                           * k ** -0.5).to(torch.bfloat16)
                given = dict(rows=rows, weights=weights, offsets=torch.tensor(
                    offsets, device=DEV,
                    dtype=torch.int64 if sig["offsets"].dtype == "i64" else torch.int32))
                want = torch.full((m + 5, n), float("nan"), device=DEV)
                bias = None
                if "bias" in sig:
                    bias = torch.randn(experts, n, device=DEV, generator=g).to(
                        dtypes[sig["bias"].dtype])
                    given["bias"] = bias
                for e in range(experts):
                    lo, hi = offsets[e], offsets[e + 1]
                    if hi > lo:
                        want[lo:hi] = rows[lo:hi].float() @ weights[e].float() + (
                            bias[e].float() if bias is not None else 0.0)

                def once():
                    out = torch.full((m + 5, n), float("nan"), device=DEV,
                                     dtype=torch.bfloat16)
                    bundle.launch(entry, out=out, **given)
                    torch.cuda.synchronize()
                    return out
                out = once()
                owned = ~torch.isnan(want[:, 0])
                got = out[owned].float()
                problem = None
                if not torch.isfinite(got).all():
                    problem = "owned rows not written (poison left)"
                else:
                    err = ((got - want[owned]).norm() / want[owned].norm()).item()
                    if not err <= TOLERANCE:
                        problem = f"relative L2 error {err:.3e} > {TOLERANCE}"
                    elif not torch.isnan(out[~owned].float()).all():
                        problem = "rows no expert owns were written"
                    elif not torch.equal(out.view(torch.int16), once().view(torch.int16)):
                        problem = "two runs differ (not deterministic)"
                report(problem is None, what, problem or f"relative L2 {err:.1e}")
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    bundles = sorted(f for f in os.listdir(ARTIFACTS)
                     if f.startswith("dgrad-") and f.endswith(".moebundle"))
    tally = Tally()
    report = tally.report
    report(len(bundles) >= 4, f"{len(bundles)} dgrad bundles built", ", ".join(bundles))
    loaded = {name: moe_mlir.Bundle(os.path.join(ARTIFACTS, name)) for name in bundles}
    shapes = {entry.name: entry for entry in loaded[bundles[0]].entries}
    for name, entry in shapes.items():
        report(entry.op == "moe.grouped_dgrad", f"{name} is op moe.grouped_dgrad", entry.op)

    for seed, (name, entry, spec, rows) in enumerate(cases()):
        info = shapes[entry]
        offsets_dtype = torch.int64 if info.offsets_bits == 64 else torch.int32
        case = Case(entry, spec, rows, info.experts, info.n, info.k, offsets_dtype, seed)
        for bundle_name, bundle in loaded.items():
            what = f"{bundle_name} {entry} M={case.m}: {name}"
            try:
                out = torch.full((case.m, case.n), float("nan"), device=DEV, dtype=torch.bfloat16)
                call(bundle, entry, case, out)
                torch.cuda.synchronize()
                problem = case.check(out)
                if problem is None:
                    again = torch.full_like(out, float("nan"))
                    call(bundle, entry, case, again)
                    torch.cuda.synchronize()
                    if not torch.equal(out.view(torch.int16), again.view(torch.int16)):
                        problem = "two runs differ (not deterministic)"
                report(problem is None, what, problem or "")
            except Exception as error:  # a failure, never a stop
                report(False, what, f"{type(error).__name__}: {error}")
        del case
        torch.cuda.empty_cache()

    # A captured call replays on new data and a new routing in the same buffers.
    for bundle_name in bundles[:2]:
        what = f"{bundle_name} CUDA graph replay with a new routing"
        try:
            bundle, info = loaded[bundle_name], shapes["e8_n4096_k1024"]
            first = Case(info.name, [1000, 1, 3, 0, 16, 17, 5, 64], None, 8, info.n, info.k, torch.int32, 99)
            second = Case(info.name, [3, 500, 0, 9, 9, 9, 500, 76], None, 8, info.n, info.k, torch.int32, 100)
            out = torch.full((first.m, first.n), float("nan"), device=DEV, dtype=torch.bfloat16)
            warm_up_on_side_stream(lambda: call(bundle, info.name, first, out))
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                call(bundle, info.name, first, out)
            problems = []
            for data in (first, second):
                first.grad.copy_(data.grad)
                first.weights.copy_(data.weights)
                first.offsets.copy_(data.offsets)
                out.fill_(float("nan"))
                graph.replay()
                torch.cuda.synchronize()
                problems.append(data.check(out))
            report(problems == [None, None], what, "; ".join(p for p in problems if p))
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")

    # Argument errors come back as exceptions with a message.
    bundle, info = loaded[bundles[0]], shapes["e8_n256_k512"]
    good = Case(info.name, [4] * 8, None, 8, info.n, info.k, torch.int32, 7)
    out = torch.empty(good.m, good.n, device=DEV, dtype=torch.bfloat16)
    bad_calls = {
        "the forward's [E, N, K] weights (transposed)": lambda: bundle.grouped_dgrad(
            info.name, good.grad, good.weights.transpose(1, 2).contiguous(), good.offsets, out),
        "grad with the wrong K": lambda: bundle.grouped_dgrad(
            info.name, good.grad[:, :128].contiguous(), good.weights, good.offsets, out),
        "f32 grad": lambda: bundle.grouped_dgrad(info.name, good.grad.float(), good.weights, good.offsets, out),
        "an entry that is not a dgrad": lambda: bundle.grouped_dgrad("nope", good.grad, good.weights, good.offsets, out),
    }
    for what, bad in bad_calls.items():
        try:
            bad()
            torch.cuda.synchronize()
            report(False, f"runtime rejects {what}", "no error raised")
        except moe_mlir.MoERuntimeError as error:
            report(True, f"runtime rejects {what}", str(error).splitlines()[0][:120])
        except Exception as error:
            report(False, f"runtime rejects {what}", f"unexpected {type(error).__name__}: {error}")
    check_act_grad(report)
    check_kn_forward(report)
    return tally.summary()


if __name__ == "__main__":
    run(main)
