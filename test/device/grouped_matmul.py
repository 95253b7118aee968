#!/usr/bin/env python3
"""GPU tests of the compiled grouped GEMM, through the runtime (run on the H200).

Every bundle in the artifacts folder (scripts/build-gpu-artifacts.sh) runs
every routing below through moe_mlir.runtime; each result is
checked against a float32 torch reference computed from the same bf16
inputs, on fresh random data, with the output poisoned (NaN) first:
rows an expert owns must match, rows nobody owns must stay poisoned.
Also: a CUDA-graph capture replayed on new data with a different routing,
and the runtime's argument errors. Prints `N passed, N failed`.

    python3 test/device/grouped_matmul.py .gpu-artifacts
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
    rng = random.Random(1234)
    yield "uniform (tiles start mid-expert)", "e8_n256_k512", [96] * 8, None
    yield "all rows to one expert", "e8_n256_k256", [0, 0, 0, 300, 0, 0, 0, 0], None
    yield "several empty experts", "e8_n128_k128", [0, 70, 0, 0, 1, 129, 0, 64], None
    yield "1 row total (T=1, k=1)", "e4_n128_k64", [0, 0, 1, 0], None
    yield "last expert empty", "e3_n128_k192", [64, 64, 0], None
    yield "skewed random, N and K tails", "e16_n192_k200", skewed_counts(rng, 16, 1000, 0.35), None
    yield "long K", "e2_n384_k4096", [65, 3], None
    yield "131072 rows, M*N > 2^31", "e8_n16640_k64", [16384] * 8, None
    yield "decode mix: 1000 rows + experts of 0..17 rows", "e8_n4096_k1024", [1000, 1, 3, 0, 16, 17, 5, 64], None
    yield "decode: 1..16 rows per expert", "e8_n4096_k1024", [1, 2, 4, 8, 16, 0, 3, 7], None
    yield "i64 offsets", "e8_n256_k256_i64", [10, 0, 50, 17, 16, 1, 0, 200], None
    yield "64 experts, skewed, mostly empty", "e64_n512_k256", skewed_counts(rng, 64, 700, 0.2), None
    yield "N % 8 != 0 (rows not 16-byte aligned)", "e4_n100_k64", [30, 0, 70, 5], None
    # Many experts: the GEMMs' shared tile table holds up to 1023; past
    # that they scan the offsets per warp. Rows of 0..70 per expert reach
    # all three kernel forms.
    mix = [0, 0, 0, 1, 2, 5, 16, 17, 64, 70]
    # From 65 experts to 960 every warp builds the table (segments of 32, the
    # last partial here); malformed offsets carry a running maximum across
    # the segments.
    yield "200 experts (the table built by all warps)", "e200_n128_k64", [rng.choice(mix) for _ in range(200)], None
    jumbled = sorted(rng.randrange(-50, 3000) for _ in range(201))
    jumbled[20:100] = reversed(jumbled[20:100])  # down across segment borders
    yield "200 experts, malformed offsets (clamped)", "e200_n128_k64", jumbled, 2500
    yield "1023 experts (the largest tile table)", "e1023_n128_k64", [rng.choice(mix) for _ in range(1023)], None
    yield "1500 experts (past the tile table)", "e1500_n128_k64_i64", [rng.choice(mix) for _ in range(1500)], None
    wild = sorted(rng.randrange(-50, 20000) for _ in range(1501))
    stretch = wild[700:760]
    rng.shuffle(stretch)  # offsets that go down and up again
    wild[700:760] = stretch
    yield "1500 experts, malformed offsets (clamped)", "e1500_n128_k64_i64", wild, 18000
    # Offsets the caller got wrong: decreasing, negative, past M. The kernel
    # clamps them like the CPU semantics; unowned rows stay untouched.
    yield "malformed offsets (clamped)", "e8_n256_k256", [5, 3, 40, 40, 1000, 20, -7, 60, 2000], 100
    yield "rows past offsets[E] unowned", "e8_n128_k128", [0, 10, 30, 30, 64, 90, 100, 120, 150], 200


class Case:
    def __init__(self, name, entry, spec, rows, experts, n, k, offsets_dtype, seed):
        self.name, self.entry = name, entry
        offsets, m = offsets_from(spec, experts, rows)
        self.m, self.n, self.k, self.experts = max(m, 1), n, k, experts
        g = torch.Generator(device=DEV).manual_seed(seed)
        self.rows = torch.randn(self.m, k, device=DEV, generator=g).to(torch.bfloat16)
        self.weights = (torch.randn(experts, n, k, device=DEV, generator=g) * k ** -0.5).to(torch.bfloat16)
        self.offsets = torch.tensor(offsets, device=DEV, dtype=offsets_dtype)
        self.ranges = clamped_ranges(offsets, self.m)
        self.reference = torch.full((self.m, n), float("nan"), device=DEV)
        for e, (lo, hi) in enumerate(self.ranges):
            if hi > lo:
                self.reference[lo:hi] = self.rows[lo:hi].float() @ self.weights[e].float().t()

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


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    bundles = sorted(f for f in os.listdir(ARTIFACTS)
                     if f.endswith(".moebundle") and not f.startswith(("bench-", "mlp-", "dgrad-", "dgradact-", "knfwd", "dgradbench", "wgrad", "backward-", "mlpbench-", "routing", "layer", "fp8", "mx", "quantize")))
    tally = Tally()
    report = tally.report

    loaded = {name: moe_mlir.Bundle(os.path.join(ARTIFACTS, name)) for name in bundles}
    shapes = {}
    for entry in loaded[bundles[0]].entries:
        shapes[entry.name] = entry
    for seed, (name, entry, spec, rows) in enumerate(cases()):
        info = shapes[entry]
        offsets_dtype = torch.int64 if info.offsets_bits == 64 else torch.int32
        case = Case(name, entry, spec, rows, info.experts, info.n, info.k, offsets_dtype, seed)
        for bundle_name, bundle in loaded.items():
            what = f"{bundle_name} {entry} M={case.m}: {name}"
            try:
                out = torch.full((case.m, case.n), float("nan"), device=DEV, dtype=torch.bfloat16)
                bundle.grouped_matmul(entry, case.rows, case.weights, case.offsets, out)
                torch.cuda.synchronize()
                problem = case.check(out)
                report(problem is None, what, problem or "")
            except Exception as error:  # a failure, never a stop
                report(False, what, f"{type(error).__name__}: {error}")
        del case
        torch.cuda.empty_cache()

    # A call captured in a CUDA graph replays on new data in the same
    # buffers, with a different routing: the tensor maps travel by value and
    # depend only on pointers and shapes, the forms are chosen on the device.
    for bundle_name in ("default.moebundle", "swap8-split.moebundle"):
        what = f"{bundle_name} CUDA graph replay with a new routing"
        try:
            bundle, info = loaded[bundle_name], shapes["e8_n4096_k1024"]
            first = Case("graph", info.name, [1000, 1, 3, 0, 16, 17, 5, 64], None, 8, info.n, info.k, torch.int32, 99)
            second = Case("graph", info.name, [3, 500, 0, 9, 9, 9, 500, 76], None, 8, info.n, info.k, torch.int32, 100)
            assert first.m == second.m
            out = torch.full((first.m, first.n), float("nan"), device=DEV, dtype=torch.bfloat16)
            warm_up_on_side_stream(
                lambda: bundle.grouped_matmul(info.name, first.rows, first.weights, first.offsets, out))
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                bundle.grouped_matmul(info.name, first.rows, first.weights, first.offsets, out)
            problems = []
            for data in (first, second):
                first.rows.copy_(data.rows)
                first.weights.copy_(data.weights)
                first.offsets.copy_(data.offsets)
                out.fill_(float("nan"))
                graph.replay()
                torch.cuda.synchronize()
                problems.append(data.check(out))
            report(problems == [None, None], what, "; ".join(p for p in problems if p))
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")

    # Argument errors come back as exceptions with a message, never a crash.
    bundle, info = loaded["default.moebundle"], shapes["e8_n256_k512"]
    good = Case("errors", info.name, [4] * 8, None, 8, info.n, info.k, torch.int32, 7)
    out = torch.empty(good.m, good.n, device=DEV, dtype=torch.bfloat16)
    bad_calls = {
        "unknown entry": lambda: bundle.grouped_matmul("nope", good.rows, good.weights, good.offsets, out),
        "K mismatch": lambda: bundle.grouped_matmul(info.name, good.rows[:, :256].contiguous(), good.weights, good.offsets, out),
        "wrong dtype": lambda: bundle.grouped_matmul(info.name, good.rows.float(), good.weights, good.offsets, out),
        "wrong offsets dtype": lambda: bundle.grouped_matmul(info.name, good.rows, good.weights, good.offsets.long(), out),
        "wrong expert count": lambda: bundle.grouped_matmul(info.name, good.rows, good.weights[:4].contiguous(), good.offsets[:5].contiguous(), out),
        "misaligned rows": lambda: bundle.grouped_matmul(
            info.name, torch.empty(good.m * good.k + 8, device=DEV, dtype=torch.bfloat16)[1:1 + good.m * good.k]
            .view(good.m, good.k), good.weights, good.offsets, out),
    }
    for what, call in bad_calls.items():
        try:
            call()
            torch.cuda.synchronize()
            report(False, f"runtime rejects {what}", "no error raised")
        except moe_mlir.MoERuntimeError as error:
            report(True, f"runtime rejects {what}", str(error).splitlines()[0][:120])
        except Exception as error:
            report(False, f"runtime rejects {what}", f"unexpected {type(error).__name__}: {error}")

    # M = 0 (an empty batch) is a no-op, not an error: nothing launched, the
    # empty output returned.
    what = "M = 0 is a no-op"
    try:
        empty = bundle.grouped_matmul(info.name, good.rows[:0], good.weights, good.offsets, out[:0])
        torch.cuda.synchronize()
        report(tuple(empty.shape) == (0, good.n), what, f"out {tuple(empty.shape)}")
    except Exception as error:
        report(False, what, f"{type(error).__name__}: {error}")

    return tally.summary()


if __name__ == "__main__":
    run(main)
