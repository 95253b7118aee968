#!/usr/bin/env python3
"""The runtime on a real GPU, with the reference kernels of
abi_reference_kernels.cu (compiled to a cubin by run.sh) in a bundle written
here: the driver loaded with dlopen, the primary context retained when none
is current, TMA descriptors encoded by the runtime and read by the kernels,
the 17 parameters (22 with row_scale), the swiglu and row_scale epilogues
and Bundle.expert_mlp, persistent grids (one wave of resident CTAs looping over
the work items), rows_min/rows_max selection, dynamic shared memory
above 48 KiB, i32 and i64 offsets, torch's current stream, a CUDA-graph
replay, and errors. Every result is checked against a float32 torch
reference, with the output poisoned (NaN) first: owned rows must match,
unowned rows must stay NaN. Prints `N passed, N failed`.

    python3 gpu_test.py <reference.cubin>
"""
import os
import random
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))
import moe_mlir  # noqa: E402  (the source tree's; the library: $MOE_RUNTIME_LIB)

MAX = 2147483647


def kernel_line(entry, symbol, rows_min, rows_max, tile_m, smem):
    return (f"kernel {entry} {symbol} image=reference rows_min={rows_min} "
            f"rows_max={rows_max} threads=128 smem={smem} tile_m={tile_m} "
            f"tile_n=64 tile_k=64 stages=1 swap_ab=0\n")


def write_bundle(cubin, path):
    entry = ("entry {} op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store experts={} "
             "n={} k={} max_rows={} offsets={} bias=none activation=none\n")

    def mlp_entry(name, epilogue, kind):
        activation = "silu" if epilogue == "swiglu" else "none"
        return (f"entry {name} op=moe.expert_mlp abi=grouped_matmul.v3 epilogue={epilogue} "
                f"experts=-1 n=-1 k=-1 max_rows={MAX} offsets=i32 bias=none "
                f"activation={activation}\n"
                + kernel_line(name, f"reference{kind}_16x64x64_off32", 1, 16, 16, 11264)
                + kernel_line(name, f"reference{kind}_64x64x64_off32", 17, MAX, 64, 20480))

    text = ("MOEBUNDLE 6\nchip sm_90a\n" + f"image reference {len(cubin)}\n").encode() + cubin + b"\n"
    text += (
        # Dynamic sizes; the 16-row form for experts of 1..16 rows (only
        # 11264 bytes of shared memory are used; 100000 tests the attribute).
        entry.format("dyn32", -1, -1, -1, MAX, "i32")
        + kernel_line("dyn32", "reference_16x64x64_off32", 1, 16, 16, 11264)
        + kernel_line("dyn32", "reference_64x64x64_off32", 17, MAX, 64, 100000)
        + entry.format("dyn64", -1, -1, -1, MAX, "i64")
        + kernel_line("dyn64", "reference_64x64x64_off64", 1, MAX, 64, 20480)
        # Static sizes, sharing dyn32's functions with other shared memory.
        + entry.format("e8_n256_k512", 8, 256, 512, 4096, "i32")
        + kernel_line("e8_n256_k512", "reference_16x64x64_off32", 1, 16, 16, 60000)
        + kernel_line("e8_n256_k512", "reference_64x64x64_off32", 17, MAX, 64, 20480)
        # Two expert MLPs: with the routing scale, and without.
        + mlp_entry("mlp_gate_up", "swiglu", "_swiglu")
        + mlp_entry("mlp_down", "row_scale", "_rowscale")
        + mlp_entry("plain_gate_up", "swiglu", "_swiglu")
        + mlp_entry("plain_down", "store", "")
        + "end\n").encode()
    with open(path, "wb") as f:
        f.write(text)


def clamped_ranges(offsets, rows):
    ranges, end = [], min(max(offsets[0], 0), rows)
    for e in range(len(offsets) - 1):
        start = end
        end = min(max(offsets[e + 1], start), rows)
        ranges.append((start, end))
    return ranges


def main():
    cubin = open(sys.argv[1], "rb").read()
    path = os.path.join(tempfile.mkdtemp(), "reference.moebundle")
    write_bundle(cubin, path)
    bundle = moe_mlir.Bundle(path)
    # No context is current yet: the runtime retains device 0's primary
    # context, the one torch uses too.
    bundle.load()

    import torch
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    passed = failed = 0

    def report(ok, what, detail=""):
        nonlocal passed, failed
        passed += bool(ok)
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}", flush=True)

    def make(entry, experts, n, k, spec, m=None, seed=0, dtype=torch.int32):
        if len(spec) == experts + 1:
            offsets = list(spec)
        else:
            offsets = [0]
            for c in spec:
                offsets.append(offsets[-1] + c)
        m = m if m is not None else offsets[-1]
        g = torch.Generator(device=dev).manual_seed(seed)
        rows = torch.randn(m, k, device=dev, generator=g).to(torch.bfloat16)
        weights = (torch.randn(experts, n, k, device=dev, generator=g) * k ** -0.5).to(torch.bfloat16)
        offs = torch.tensor(offsets, device=dev, dtype=dtype)
        ref = torch.full((m, n), float("nan"), device=dev)
        for e, (lo, hi) in enumerate(clamped_ranges(offsets, m)):
            if hi > lo:
                ref[lo:hi] = rows[lo:hi].float() @ weights[e].float().t()
        return rows, weights, offs, ref

    def problem(out, ref):
        owned = ~torch.isnan(ref[:, 0])
        got = out[owned].float()
        if torch.isnan(got).any():
            return f"{int(torch.isnan(got).any(1).sum())} owned rows not written"
        if owned.any():
            err = ((got - ref[owned]).norm() / ref[owned].norm().clamp_min(1e-30)).item()
            if not err <= 1e-2:
                return f"relative L2 error {err:.3e}"
        if (~owned).any() and not torch.isnan(out[~owned].float()).all():
            return "rows no expert owns were written"
        return None

    rng = random.Random(7)
    skew = [0] * 16
    for _ in range(1000):
        skew[min(int(rng.expovariate(0.35)), 15)] += 1
    cases = [
        ("uniform", "dyn32", 8, 256, 512, [96] * 8, None),
        ("all rows to one expert", "dyn32", 8, 256, 256, [0, 0, 0, 300, 0, 0, 0, 0], None),
        ("empty experts", "dyn32", 8, 128, 128, [0, 70, 0, 0, 1, 129, 0, 64], None),
        ("one row in all", "dyn32", 4, 128, 64, [0, 0, 1, 0], None),
        ("skewed, N and K tails", "dyn32", 16, 200, 200, skew, None),
        ("decode mix around 16 rows", "dyn32", 8, 1024, 1024, [1000, 1, 3, 0, 16, 17, 5, 64], None),
        ("only small experts", "dyn32", 8, 512, 256, [1, 2, 4, 8, 16, 0, 3, 7], None),
        ("64 experts, 8 rows", "dyn32", 64, 256, 128, [0, 8] * 32, None),
        ("malformed offsets (clamped)", "dyn32", 8, 256, 256, [5, 3, 40, 40, 1000, 20, -7, 60, 2000], 100),
        ("rows past offsets[E] unowned", "dyn32", 8, 128, 128, [0, 10, 30, 30, 64, 90, 100, 120, 150], 200),
        ("i64 offsets", "dyn64", 8, 256, 256, [10, 0, 50, 17, 16, 1, 0, 200], None),
        ("static entry", "e8_n256_k512", 8, 256, 512, [3, 40, 0, 16, 17, 100, 1, 2], None),
        ("131072 rows, M*N > 2^31", "dyn32", 8, 16640, 64, [16384] * 8, None),
    ]
    for seed, (name, entry, experts, n, k, spec, m) in enumerate(cases):
        dtype = torch.int64 if entry == "dyn64" else torch.int32
        try:
            rows, weights, offs, ref = make(entry, experts, n, k, spec, m, seed, dtype)
            out = torch.full((rows.shape[0], n), float("nan"), device=dev, dtype=torch.bfloat16)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # the runtime must use this stream
                bundle.grouped_matmul(entry, rows, weights, offs, out)
            side.synchronize()
            p = problem(out, ref)
            report(p is None, f"{name} ({entry} E={experts} M={rows.shape[0]} N={n} K={k})", p or "")
        except Exception as error:
            report(False, name, f"{type(error).__name__}: {error}")
        torch.cuda.empty_cache()

    # The epilogues, and expert_mlp: references in float32 from the bf16
    # inputs (the workspace rounded to bf16 like the kernel's).
    def mlp_case(experts, n, k, n2, spec, seed, scaled):
        rows, w13, offs, _ = make("mlp_gate_up", experts, n, k, spec, seed=seed)
        g = torch.Generator(device=dev).manual_seed(seed + 1000)
        w2 = (torch.randn(experts, n2, n // 2, device=dev, generator=g) * (n // 2) ** -0.5).to(torch.bfloat16)
        scale = torch.rand(rows.shape[0], device=dev, generator=g) + 0.5 if scaled else None
        m = rows.shape[0]
        h = torch.full((m, n // 2), float("nan"), device=dev)
        ref = torch.full((m, n2), float("nan"), device=dev)
        for e, (lo, hi) in enumerate(clamped_ranges(offs.tolist(), m)):
            if hi > lo:
                both = rows[lo:hi].float() @ w13[e].float().t()
                h[lo:hi] = torch.nn.functional.silu(both[:, :n // 2]) * both[:, n // 2:]
                ref[lo:hi] = h[lo:hi].to(torch.bfloat16).float() @ w2[e].float().t()
                if scaled:
                    ref[lo:hi] *= scale[lo:hi, None]
        return rows, w13, w2, offs, scale, h, ref

    mlp_cases = [
        ("uniform", 8, 256, 512, 192, [96] * 8),
        ("decode mix around 16 rows", 8, 512, 256, 256, [100, 1, 3, 0, 16, 17, 5, 64]),
        ("N tails (N13/2 = 104, N = 72)", 4, 208, 128, 72, [0, 30, 1, 65]),
        ("one row in all", 4, 128, 64, 64, [0, 0, 1, 0]),
    ]
    for seed, (name, experts, n, k, n2, spec) in enumerate(mlp_cases):
        for scaled in (True, False):
            what = f"{name} (E={experts} N13={n} K={k} N={n2}, {'scaled' if scaled else 'no scale'})"
            try:
                rows, w13, w2, offs, scale, h, ref = mlp_case(experts, n, k, n2, spec, 200 + seed, scaled)
                # Each entry on its own: swiglu, then row_scale (or store).
                hidden = torch.full((rows.shape[0], n // 2), float("nan"), device=dev, dtype=torch.bfloat16)
                bundle.grouped_matmul("mlp_gate_up", rows, w13, offs, hidden)
                p = problem(hidden, h)
                if scaled:
                    alone = bundle.grouped_matmul("mlp_down", h.nan_to_num().to(torch.bfloat16), w2, offs,
                                                  row_scale=scale)
                    owned = ~torch.isnan(ref[:, 0])
                    p = p or problem(torch.where(owned[:, None], alone.float(), float("nan")), ref)
                # The pair, on a side stream.
                out = torch.full((rows.shape[0], n2), float("nan"), device=dev, dtype=torch.bfloat16)
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    got = bundle.expert_mlp("mlp" if scaled else "plain", rows, offs, w13, w2,
                                            row_scale=scale, out=out)
                side.synchronize()
                p = p or (None if got is out else "out not returned") or problem(out, ref)
                report(p is None, f"expert_mlp {what}", p or "")
            except Exception as error:
                report(False, f"expert_mlp {what}", f"{type(error).__name__}: {error}")
            torch.cuda.empty_cache()

    # A captured expert MLP replays on new data and routing weights.
    try:
        first = mlp_case(8, 256, 256, 128, [100, 1, 3, 0, 16, 17, 5, 64], 300, True)
        second = mlp_case(8, 256, 256, 128, [3, 150, 0, 9, 9, 9, 20, 6], 301, True)
        rows, w13, w2, offs, scale = (t.clone() for t in first[:5])
        out = torch.full((rows.shape[0], 128), float("nan"), device=dev, dtype=torch.bfloat16)
        workspace = torch.empty(rows.shape[0], 128, device=dev, dtype=torch.bfloat16)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            bundle.expert_mlp("mlp", rows, offs, w13, w2, row_scale=scale, out=out, workspace=workspace)
        problems = []
        for data in (first, second):
            for dst, src in zip((rows, w13, w2, offs, scale), data[:5]):
                dst.copy_(src)
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            problems.append(problem(out, data[6]))
        report(problems == [None, None], "CUDA graph replay of expert_mlp",
               "; ".join(p for p in problems if p))
    except Exception as error:
        report(False, "CUDA graph replay of expert_mlp", f"{type(error).__name__}: {error}")

    # A captured call replays on new data in the same buffers.
    try:
        first = make("dyn32", 8, 1024, 512, [1000, 1, 3, 0, 16, 17, 5, 64], seed=99)
        second = make("dyn32", 8, 1024, 512, [3, 500, 0, 9, 9, 9, 500, 76], seed=100)
        rows, weights, offs, _ = first
        out = torch.full((rows.shape[0], 1024), float("nan"), device=dev, dtype=torch.bfloat16)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            bundle.grouped_matmul("dyn32", rows, weights, offs, out)
        problems = []
        for data in (first, second):
            rows.copy_(data[0])
            weights.copy_(data[1])
            offs.copy_(data[2])
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            problems.append(problem(out, data[3]))
        report(problems == [None, None], "CUDA graph replay with a new routing",
               "; ".join(p for p in problems if p))
    except Exception as error:
        report(False, "CUDA graph replay", f"{type(error).__name__}: {error}")

    rows, weights, offs, _ = make("dyn32", 8, 256, 512, [4] * 8, seed=5)
    out = torch.empty(32, 256, device=dev, dtype=torch.bfloat16)
    flat = torch.zeros(32 * 512 + 8, device=dev, dtype=torch.bfloat16)
    bad = {
        "M = 0": (lambda: bundle.grouped_matmul("dyn32", rows[:0], weights, offs, out[:0]),
                  "M = 0 must be at least 1"),
        "misaligned rows": (lambda: bundle.grouped_matmul(
            "dyn32", flat[1:1 + 32 * 512].view(32, 512), weights, offs, out), "not 16-byte aligned"),
        "i64 offsets for an i32 entry": (lambda: bundle.grouped_matmul(
            "dyn32", rows, weights, offs.long(), out), "expected torch.int32"),
        "static N mismatch": (lambda: bundle.grouped_matmul(
            "e8_n256_k512", rows, weights[:, :128].contiguous(), offs, out[:, :128].contiguous()),
            "N = 128 does not match the entry's n = 256"),
        "swiglu with odd N": (lambda: bundle.grouped_matmul(
            "mlp_gate_up", rows, weights[:, :255].contiguous(), offs),
            "needs an even N"),
        "swiglu out of N columns": (lambda: bundle.grouped_matmul("mlp_gate_up", rows, weights, offs, out),
                                    "out is (32, 256), expected (32, 128)"),
        "row_scale missing": (lambda: bundle.grouped_matmul("mlp_down", rows, weights, offs),
                              "the entry's epilogue is row_scale: pass row_scale"),
        "row_scale for a store entry": (lambda: bundle.grouped_matmul(
            "dyn32", rows, weights, offs, out, row_scale=torch.ones(32, device=dev)),
            "row_scale is only taken by row_scale entries"),
        "row_scale of bf16": (lambda: bundle.grouped_matmul(
            "mlp_down", rows, weights, offs, out, row_scale=torch.ones(32, device=dev, dtype=torch.bfloat16)),
            "row_scale is torch.bfloat16, expected torch.float32"),
        "row_scale of M - 1 elements": (lambda: bundle.grouped_matmul(
            "mlp_down", rows, weights, offs, out, row_scale=torch.ones(31, device=dev)),
            "row_scale has 31 elements, expected M = 32"),
        "row_scale on the CPU": (lambda: bundle.grouped_matmul(
            "mlp_down", rows, weights, offs, out, row_scale=torch.ones(32)),
            "row_scale is on cpu"),
        "row_scale not contiguous": (lambda: bundle.grouped_matmul(
            "mlp_down", rows, weights, offs, out, row_scale=torch.ones(64, device=dev)[::2]),
            "row_scale is not contiguous"),
        "expert_mlp without its row_scale": (lambda: bundle.expert_mlp("mlp", rows, offs, weights, weights),
                                             "entry 'mlp_down' has epilogue row_scale: pass row_scale"),
        "expert_mlp with a row_scale its op lacks": (lambda: bundle.expert_mlp(
            "plain", rows, offs, weights, weights, row_scale=torch.ones(32, device=dev)),
            "entry 'plain_down' has epilogue store, not row_scale"),
        "expert_mlp with a bad workspace": (lambda: bundle.expert_mlp(
            "plain", rows, offs, weights, weights[:, :, :128].contiguous(), workspace=out),
            "workspace is (32, 256), expected (32, 128)"),
        "expert_mlp with a float workspace": (lambda: bundle.expert_mlp(
            "plain", rows, offs, weights, weights[:, :, :128].contiguous(),
            workspace=torch.empty(32, 128, device=dev)),
            "workspace is torch.float32, expected torch.bfloat16"),
        "expert_mlp with w2 of another K": (lambda: bundle.expert_mlp("plain", rows, offs, weights, weights),
                                            "w2 is (8, 256, 512), expected (8, N, 128)"),
    }
    for what, (call, needle) in bad.items():
        try:
            call()
            report(False, f"rejects {what}", "no error")
        except moe_mlir.MoERuntimeError as error:
            report(needle in str(error), f"rejects {what}", str(error))
    torch.cuda.synchronize()
    bundle.close()
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
