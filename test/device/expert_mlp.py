#!/usr/bin/env python3
"""GPU tests of the fused expert MLP (moe.expert_mlp), through the runtime.

Every mlp-*.moebundle of the artifacts folder (scripts/build-gpu-artifacts.sh,
shapes in test/device/mlp_shapes.txt) runs every routing below: the gate-up
kernels (SwiGLU in the epilogue) write the [M, I] intermediate, the down
kernels apply the routing weight. Each result is checked against a float32
torch reference of silu(x W_gate^T) * (x W_up^T) W_down^T * weight computed
from the same bf16 inputs on fresh random data, with the output and the
intermediate poisoned (NaN) first: rows an expert owns must match, rows
nobody owns must stay poisoned. Also a CUDA-graph replay with a new routing.
Prints `N passed, N failed`.

    python3 test/device/expert_mlp.py .gpu-artifacts
"""
import os
import random
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
sys.path.insert(0, os.path.join(ARTIFACTS, "site"))
import moe_mlir  # noqa: E402
from tally import Tally, run, warm_up_on_side_stream  # noqa: E402

# Two bf16 roundings (the intermediate and the output): about 3e-3.
TOLERANCE = 1e-2
DEV = "cuda"
SHAPES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlp_shapes.txt")


def shapes():
    out = {}
    for line in open(SHAPES):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        name, e, h, i, off, scale = fields
        out[name] = dict(experts=int(e), hidden=int(h), inter=int(i),
                         offsets=torch.int64 if off == "i64" else torch.int32, scale=scale == "scale")
    return out


def routings(experts, rng):
    """(name, rows per expert) for one shape."""
    yield "uniform", [96] * experts
    yield "all rows to one expert", [0] * (experts - 1) + [300]
    yield "several empty experts", [(70, 0, 1, 129, 0, 64)[e % 6] for e in range(experts)]
    yield "1 row total (T=1)", [1 if e == experts // 2 else 0 for e in range(experts)]
    yield "decode mix 0..17 rows", [(1, 3, 0, 16, 17, 5, 8, 2)[e % 8] for e in range(experts)]
    yield "skewed random", [min(int(rng.expovariate(0.01)), 2000) for _ in range(experts)]
    yield "8192 rows", [8192 // experts] * experts


class Case:
    def __init__(self, shape, counts, seed):
        e, h, i = shape["experts"], shape["hidden"], shape["inter"]
        offsets = [0]
        for c in counts:
            offsets.append(offsets[-1] + c)
        self.m = max(offsets[-1], 1)
        g = torch.Generator(device=DEV).manual_seed(seed)
        self.rows = torch.randn(self.m, h, device=DEV, generator=g).to(torch.bfloat16)
        self.w13 = (torch.randn(e, 2 * i, h, device=DEV, generator=g) * h ** -0.5).to(torch.bfloat16)
        self.w2 = (torch.randn(e, h, i, device=DEV, generator=g) * i ** -0.5).to(torch.bfloat16)
        self.scale = (torch.rand(self.m, device=DEV, generator=g) + 0.5) if shape["scale"] else None
        self.offsets = torch.tensor(offsets, device=DEV, dtype=shape["offsets"])
        self.reference = torch.full((self.m, h), float("nan"), device=DEV)
        for x in range(e):
            lo, hi = offsets[x], offsets[x + 1]
            if hi > lo:
                gu = self.rows[lo:hi].float() @ self.w13[x].float().t()
                act = torch.nn.functional.silu(gu[:, :i]) * gu[:, i:]
                y = act @ self.w2[x].float().t()
                if self.scale is not None:
                    y = y * self.scale[lo:hi, None]
                self.reference[lo:hi] = y
        self.inter = i

    def run(self, bundle, name, out, workspace):
        bundle.expert_mlp(name, self.rows, self.offsets, self.w13, self.w2,
                          row_scale=self.scale, out=out, workspace=workspace)

    def check(self, out):
        owned = ~torch.isnan(self.reference[:, 0])
        got, want = out[owned].float(), self.reference[owned]
        if torch.isnan(got).any():
            return f"{int(torch.isnan(got).any(1).sum())} owned rows not written or NaN"
        err = ((got - want).norm() / want.norm().clamp_min(1e-30)).item() if owned.any() else 0.0
        if not err <= TOLERANCE:
            return f"relative L2 error {err:.3e} > {TOLERANCE}"
        if (~owned).any() and not torch.isnan(out[~owned].float()).all():
            return "rows no expert owns were written"
        return None


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    bundles = sorted(f for f in os.listdir(ARTIFACTS) if f.startswith("mlp-") and f.endswith(".moebundle"))
    tally = Tally()
    report = tally.report

    if not bundles:
        report(False, "mlp bundles", f"no mlp-*.moebundle in {ARTIFACTS}")
    loaded = {name: moe_mlir.Bundle(os.path.join(ARTIFACTS, name)) for name in bundles}
    rng = random.Random(4321)
    seed = 0
    for name, shape in shapes().items():
        for routing, counts in routings(shape["experts"], rng):
            seed += 1
            case = Case(shape, counts, seed)
            for bundle_name, bundle in loaded.items():
                what = f"{bundle_name} {name} M={case.m}: {routing}"
                try:
                    out = torch.full((case.m, shape["hidden"]), float("nan"), device=DEV, dtype=torch.bfloat16)
                    workspace = torch.full((case.m, case.inter), float("nan"), device=DEV, dtype=torch.bfloat16)
                    case.run(bundle, name, out, workspace)
                    torch.cuda.synchronize()
                    problem = case.check(out)
                    report(problem is None, what, problem or "")
                except Exception as error:  # a failure, never a stop
                    report(False, what, f"{type(error).__name__}: {error}")
            del case
            torch.cuda.empty_cache()

    # One graph capture, replayed on new data and a new routing.
    name = "mlp_e16_h2048_i768"
    for bundle_name in ("mlp-default.moebundle", "mlp-unfused.moebundle"):
        what = f"{bundle_name} {name} CUDA graph replay with a new routing"
        try:
            bundle, shape = loaded[bundle_name], shapes()[name]
            first = Case(shape, [900, 1, 3, 0, 16, 17, 5, 64, 0, 0, 2, 40, 100, 9, 0, 8], 901)
            second = Case(shape, [3, 500, 0, 9, 9, 9, 300, 76, 50, 0, 70, 20, 100, 0, 1, 18], 902)
            assert first.m == second.m
            out = torch.empty(first.m, shape["hidden"], device=DEV, dtype=torch.bfloat16)
            workspace = torch.empty(first.m, first.inter, device=DEV, dtype=torch.bfloat16)
            warm_up_on_side_stream(lambda: first.run(bundle, name, out, workspace))
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                first.run(bundle, name, out, workspace)
            problems = []
            for data in (first, second):
                for t in ("rows", "w13", "w2", "scale", "offsets"):
                    getattr(first, t).copy_(getattr(data, t))
                out.fill_(float("nan"))
                workspace.fill_(float("nan"))
                graph.replay()
                torch.cuda.synchronize()
                problems.append(data.check(out))
            report(problems == [None, None], what, "; ".join(p for p in problems if p))
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")

    return tally.summary()


if __name__ == "__main__":
    run(main)
