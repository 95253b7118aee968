#!/usr/bin/env python3
"""GPU tests of moe.grouped_wgrad's kernel, through the runtime (run on the H200).

Every wgrad-*.moebundle of the artifacts folder (scripts/build-gpu-artifacts.sh:
one entry per shape of test/device/shapes.txt whose N and K are multiples of
8) computes, for every expert e with rows r0 <= r < r1 (offsets clamped),

    out[e] = grad[r0:r1]^T @ rows[r0:r1]        (zeros without rows)

with the reduction over the expert's own, data-dependent rows. Each result is
checked against a float32 torch reference from the same bf16 inputs, on fresh
random data, the output poisoned (NaN) first: every expert's gradient must
match (relative L2 error per expert), an expert without rows must be exactly
zero, and two runs must be bit-identical (no atomics). Also: an infinity in
the next expert's rows must not reach an expert whose last rows share a
pipeline step with them; M = 0; a CUDA-graph replay with a new routing; the
runtime's argument errors. wgradkn.moebundle holds kn_weights gradients
(out[e] = rows^T @ grad, [K, N], and the gradient's column sums as the bias
gradient), checked the same way on skewed routings. Prints `N passed, N
failed`.

    python3 test/device/grouped_wgrad.py .gpu-artifacts
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

# bf16 output rounding alone gives a relative error of about 2e-3.
TOLERANCE = 1e-2
DEV = "cuda"


def cases():
    """(name, entry, counts or explicit offsets, M)."""
    rng = random.Random(2468)
    yield "uniform (a partial last step per expert)", "e8_n256_k512", [96] * 8, None
    yield "all rows to one expert (many steps)", "e8_n256_k256", [0, 0, 0, 5000, 0, 0, 0, 0], None
    yield "several empty experts", "e8_n128_k128", [0, 70, 0, 0, 1, 129, 0, 64], None
    yield "1 row total (T=1, k=1)", "e4_n128_k64", [0, 0, 1, 0], None
    yield "last expert empty", "e3_n128_k192", [64, 64, 0], None
    yield "skewed random, N and K tails", "e16_n192_k200", skewed_counts(rng, 16, 1000, 0.35), None
    yield "wide K (4096 columns)", "e2_n384_k4096", [65, 3], None
    yield "tall N (16640 rows of dW)", "e8_n16640_k64", [300, 0, 1, 64, 65, 0, 7, 128], None
    yield "decode mix", "e8_n4096_k1024", [1000, 1, 3, 0, 16, 17, 5, 64], None
    yield "i64 offsets", "e8_n256_k256_i64", [10, 0, 50, 17, 16, 1, 0, 200], None
    yield "64 experts, skewed, mostly empty", "e64_n512_k256", skewed_counts(rng, 64, 700, 0.2), None
    yield "1023 experts", "e1023_n128_k64", [rng.choice([0, 1, 2, 17, 64, 70]) for _ in range(1023)], None
    yield "malformed offsets (clamped)", "e8_n256_k256", [5, 3, 40, 40, 1000, 20, -7, 60, 2000], 100
    yield "rows past offsets[E] unowned", "e8_n128_k128", [0, 10, 30, 30, 64, 90, 100, 120, 150], 200


class Case:
    def __init__(self, spec, rows, experts, n, k, offsets_dtype, seed):
        offsets, m = offsets_from(spec, experts, rows)
        self.m, self.n, self.k, self.experts = m, n, k, experts
        g = torch.Generator(device=DEV).manual_seed(seed)
        self.grad = torch.randn(m, n, device=DEV, generator=g).to(torch.bfloat16)
        self.rows = torch.randn(m, k, device=DEV, generator=g).to(torch.bfloat16)
        self.offsets = torch.tensor(offsets, device=DEV, dtype=offsets_dtype)
        self.ranges = clamped_ranges(offsets, m)

    def reference(self, e):
        lo, hi = self.ranges[e]
        return self.grad[lo:hi].float().t() @ self.rows[lo:hi].float()

    def check(self, out, skip=()):
        for e, (lo, hi) in enumerate(self.ranges):
            if e in skip:
                continue
            got = out[e].float()
            if hi == lo:
                if not torch.equal(got, torch.zeros_like(got)):
                    return f"expert {e} has no rows but a nonzero (or unwritten) gradient"
                continue
            want = self.reference(e)
            if not torch.isfinite(got).all():
                return f"expert {e}: {int((~torch.isfinite(got)).sum())} values not finite (poison or leak)"
            err = ((got - want).norm() / want.norm().clamp_min(1e-30)).item()
            if not err <= TOLERANCE:
                return f"expert {e} ({hi - lo} rows): relative L2 error {err:.3e} > {TOLERANCE}"
        return None


def call(bundle, entry, case, out):
    return bundle.grouped_wgrad(entry, case.grad, case.rows, case.offsets, out)


def poisoned(case):
    return torch.full((case.experts, case.n, case.k), float("nan"), device=DEV, dtype=torch.bfloat16)


def check_kn(report):
    """wgradkn.moebundle: weight gradients lying [E, K, N], and bias
    gradients, on skewed routings (one hot expert, empty ones, one row)."""
    bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "wgradkn.moebundle"))
    rng = random.Random(1357)
    for seed, info in enumerate(bundle.entries):
        # A planned.v1 entry: its shapes are its signature's.
        args_of = {a.name: a for a in bundle.signature(info.name).args}
        e, k, n = (int(d) for d in args_of["out"].dims)
        for counts in (skewed_counts(rng, e, 900, 0.3), [0] * (e - 1) + [700], [1] + [0] * (e - 1)):
            what = f"wgradkn {info.name} M={sum(counts)}"
            try:
                dtype = torch.int64 if args_of["offsets"].dtype == "i64" else torch.int32
                case = Case(counts, None, e, n, k, dtype, 500 + seed)
                out = torch.full((e, k, n), float("nan"), device=DEV, dtype=torch.bfloat16)
                args = dict(grad=case.grad, rows=case.rows, offsets=case.offsets, out=out)
                bias = None
                if "bias_grad" in args_of:
                    bias = torch.full((e, n), float("nan"), device=DEV,
                                      dtype=torch.float32 if args_of["bias_grad"].dtype == "f32"
                                      else torch.bfloat16)
                    args["bias_grad"] = bias
                bundle.launch(info.name, **args)
                torch.cuda.synchronize()
                # [K, N] per expert: the [N, K] reference transposed.
                problem = case.check(out.transpose(1, 2))
                for x, (lo, hi) in enumerate(case.ranges):
                    if problem is None and bias is not None:
                        want = case.grad[lo:hi].float().sum(0)
                        err = ((bias[x].float() - want).norm() / want.norm().clamp_min(1e-30)).item()
                        if not (err <= TOLERANCE or (hi == lo and torch.equal(bias[x].float(), want))):
                            problem = f"expert {x}: bias gradient relative L2 error {err:.3e}"
                report(problem is None, what, problem or "")
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    bundles = sorted(f for f in os.listdir(ARTIFACTS)
                     if f.startswith("wgrad-") and f.endswith(".moebundle"))
    tally = Tally()
    report = tally.report
    report(len(bundles) >= 1, f"{len(bundles)} wgrad bundles built", ", ".join(bundles))
    check_kn(report)
    loaded = {name: moe_mlir.Bundle(os.path.join(ARTIFACTS, name)) for name in bundles}
    shapes = {entry.name: entry for entry in loaded[bundles[0]].entries}
    for name, entry in shapes.items():
        report(entry.op == "moe.grouped_wgrad" and entry.abi == "grouped_wgrad.v1",
               f"{name} is op moe.grouped_wgrad, abi grouped_wgrad.v1", f"{entry.op} {entry.abi}")

    for seed, (name, entry, spec, rows) in enumerate(cases()):
        info = shapes[entry]
        offsets_dtype = torch.int64 if info.offsets_bits == 64 else torch.int32
        case = Case(spec, rows, info.experts, info.n, info.k, offsets_dtype, seed)
        for bundle_name, bundle in loaded.items():
            what = f"{bundle_name} {entry} M={case.m}: {name}"
            try:
                out = poisoned(case)
                call(bundle, entry, case, out)
                torch.cuda.synchronize()
                problem = case.check(out)
                if problem is None:
                    again = poisoned(case)
                    call(bundle, entry, case, again)
                    torch.cuda.synchronize()
                    if not torch.equal(out.view(torch.int16), again.view(torch.int16)):
                        problem = "two runs differ (not deterministic)"
                report(problem is None, what, problem or "")
            except Exception as error:  # a failure, never a stop
                report(False, what, f"{type(error).__name__}: {error}")
        del case
        torch.cuda.empty_cache()

    bundle_name, bundle = bundles[0], loaded[bundles[0]]
    info = shapes["e8_n256_k256"]

    # Expert 0 ends mid-step (70 rows: the second step holds 6 of its rows
    # and 58 of expert 1's); expert 1's rows hold infinities in both
    # operands. Expert 0's gradient must not see them.
    what = f"{bundle_name}: the next expert's infinities stay out of a partial step"
    try:
        case = Case([70, 90, 0, 0, 0, 0, 0, 0], None, 8, info.n, info.k, torch.int32, 11)
        case.grad[70:160:7] = float("inf")
        case.rows[71:160:5] = float("-inf")
        out = poisoned(case)
        call(bundle, info.name, case, out)
        torch.cuda.synchronize()
        problem = case.check(out, skip=(1,))
        report(problem is None, what, problem or "")
    except Exception as error:
        report(False, what, f"{type(error).__name__}: {error}")

    # M = 0: every expert's gradient is zero (the kernel still runs).
    what = f"{bundle_name}: M = 0 writes zeros"
    try:
        case = Case([0] * 8, None, 8, info.n, info.k, torch.int32, 12)
        out = poisoned(case)
        call(bundle, info.name, case, out)
        torch.cuda.synchronize()
        report(torch.equal(out.float(), torch.zeros_like(out.float())), what, "")
    except Exception as error:
        report(False, what, f"{type(error).__name__}: {error}")

    # A captured call replays on new data and a new routing in the same buffers.
    what = f"{bundle_name} CUDA graph replay with a new routing"
    try:
        big = shapes["e8_n4096_k1024"]
        first = Case([1000, 1, 3, 0, 16, 17, 5, 64], None, 8, big.n, big.k, torch.int32, 99)
        second = Case([3, 500, 0, 9, 9, 9, 500, 76], None, 8, big.n, big.k, torch.int32, 100)
        out = poisoned(first)
        warm_up_on_side_stream(lambda: call(bundle, big.name, first, out))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call(bundle, big.name, first, out)
        problems = []
        for data in (first, second):
            first.grad.copy_(data.grad)
            first.rows.copy_(data.rows)
            first.offsets.copy_(data.offsets)
            first.ranges = data.ranges
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            problems.append(first.check(out))
        report(problems == [None, None], what, "; ".join(p for p in problems if p))
    except Exception as error:
        report(False, what, f"{type(error).__name__}: {error}")

    # Argument errors come back as exceptions with a message.
    good = Case([4] * 8, None, 8, info.n, info.k, torch.int32, 7)
    out = torch.empty(8, info.n, info.k, device=DEV, dtype=torch.bfloat16)
    bad_calls = {
        "rows with the wrong K": lambda: bundle.grouped_wgrad(
            info.name, good.grad, good.rows[:, :128].contiguous(), good.offsets, out),
        "grad and rows of different M": lambda: bundle.grouped_wgrad(
            info.name, good.grad[:16].contiguous(), good.rows, good.offsets, out),
        "f32 grad": lambda: bundle.grouped_wgrad(info.name, good.grad.float(), good.rows, good.offsets, out),
        "out of the wrong shape": lambda: bundle.grouped_wgrad(
            info.name, good.grad, good.rows, good.offsets, out[:4].contiguous()),
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
    return tally.summary()


if __name__ == "__main__":
    run(main)
