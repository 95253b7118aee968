#!/usr/bin/env python3
"""GPU tests of the FP8 grouped GEMMs (grouped_matmul_fp8.v1, block FP8 and
MXFP8), through the runtime (run on the H200).

Every fp8-*.moebundle (block FP8) and mx-*.moebundle (MXFP8) of the
artifacts folder (scripts/build-gpu-artifacts.sh, shapes in
test/device/fp8_shapes.txt) runs every routing below. Inputs are fresh
random data whose magnitude changes by up to 2^8 from block to block,
quantized here to e4m3 with DeepSeek-V3's f32 block scales ([1, 128] of the
rows, [128, 128] of the weights) or OCP MX's E8M0 scales (one per 32 K of
every row of the rows and of the weights), so a scale applied to the wrong
block shows. Each result is checked against a float64 reference computed on the
dequantized values (relative L2 error <= 3e-3; the bf16 output rounding
alone gives about 1.7e-3), with the output poisoned (NaN) first: rows an
expert owns must match, rows nobody owns must stay poisoned. The error of
the FP8 result against the bf16 GEMM of the unquantized inputs is printed
for information. Also: a CUDA-graph replay on new data with a new routing,
and the runtime's argument errors. Prints `N passed, N failed`.

    python3 test/device/fp8_grouped_matmul.py .gpu-artifacts
"""
import math
import os
import random
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
sys.path.insert(0, os.path.join(ARTIFACTS, "site"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moe_mlir  # noqa: E402
from routings import clamped_ranges, offsets_from, skewed_counts  # noqa: E402
from tally import Tally, run, warm_up_on_side_stream  # noqa: E402

TOLERANCE = 3e-3
DEV = "cuda"
E4M3_MAX = 448.0
BLOCK = 128


def quantize_blocks(x, block_rows):
    """e4m3 values and f32 scales of x [..., R, K] in [block_rows, 128]
    blocks: scale = amax / 448 (1 for an all-zero block), values = x / scale
    rounded to nearest even (torch's conversion): bit-exact with moe.quantize
    for finite x. Both divisions are tensor / tensor: torch divides a CUDA
    tensor by a Python number as a multiplication by its reciprocal, one
    ulp off amax / 448 for about half of the blocks."""
    *lead, r, k = x.shape
    rb, kb = math.ceil(r / block_rows), math.ceil(k / BLOCK)
    padded = torch.zeros(*lead, rb * block_rows, kb * BLOCK, device=x.device, dtype=torch.float32)
    padded[..., :r, :k] = x.float()
    blocks = padded.view(*lead, rb, block_rows, kb, BLOCK)
    amax = blocks.abs().amax(dim=(-3, -1))  # [..., rb, kb]
    scale = torch.where(amax > 0, amax / torch.full_like(amax, E4M3_MAX), torch.ones_like(amax))
    values = (blocks / scale[..., :, None, :, None]).clamp(-E4M3_MAX, E4M3_MAX)
    values = values.view(*lead, rb * block_rows, kb * BLOCK)[..., :r, :k]
    return values.to(torch.float8_e4m3fn).contiguous(), scale.contiguous()


def dequantize_blocks(q, scale, block_rows):
    expanded = scale.repeat_interleave(block_rows, dim=-2).repeat_interleave(BLOCK, dim=-1)
    return q.double() * expanded[..., :q.shape[-2], :q.shape[-1]].double()


def block_varied(shape, generator, block_rows, block_cols=BLOCK):
    """Normal values times 2^u per [block_rows, block_cols] block, u in
    [-4, 4]."""
    *lead, r, k = shape
    x = torch.randn(*shape, device=DEV, generator=generator)
    rb, kb = math.ceil(r / block_rows), math.ceil(k / block_cols)
    u = torch.randint(-4, 5, (*lead, rb, kb), device=DEV, generator=generator).float()
    factor = torch.exp2(u).repeat_interleave(block_rows, dim=-2).repeat_interleave(block_cols, dim=-1)
    return x * factor[..., :r, :k]


MX_BLOCK = 32


def quantize_mx(x):
    """e4m3 values and E8M0 codes (uint8) of x [..., K] in [1, 32] blocks
    along K, as moe.quantize (OCP MX): code = clamp(exponent field of amax
    - 8, 0, 254), divisor 2^(code - 127), values = x / divisor rounded to
    nearest even and saturated (finite x)."""
    *lead, k = x.shape
    blocks = x.float().reshape(*lead, k // MX_BLOCK, MX_BLOCK)
    amax = blocks.abs().amax(-1)
    code = ((amax.view(torch.int32) >> 23) - 8).clamp(0, 254)
    divisor = torch.ldexp(torch.ones_like(amax), code - 127)
    values = (blocks / divisor[..., None]).clamp(-E4M3_MAX, E4M3_MAX).reshape(x.shape)
    return values.to(torch.float8_e4m3fn).contiguous(), code.to(torch.uint8).contiguous()


def dequantize_mx(q, code):
    code = code.view(torch.uint8)  # float8_e8m0fnu or uint8: the codes
    scale = torch.ldexp(torch.ones_like(code, dtype=torch.float64), code.long() - 127)
    return q.double() * scale.repeat_interleave(MX_BLOCK, dim=-1)


class BlockFP8:
    """DeepSeek-V3's block FP8: [1, 128] row groups, [128, 128] weight
    blocks, f32 scales."""
    format, prefix = "fp8_block", "fp8-"
    quantize_rows = staticmethod(lambda x: quantize_blocks(x, 1))
    quantize_weights = staticmethod(lambda w: quantize_blocks(w, BLOCK))
    dequantize_rows = staticmethod(lambda q, s: dequantize_blocks(q, s, 1))
    dequantize_weights = staticmethod(lambda q, s: dequantize_blocks(q, s, BLOCK))
    varied_rows = staticmethod(lambda shape, g: block_varied(shape, g, 1))
    varied_weights = staticmethod(lambda shape, g: block_varied(shape, g, BLOCK))


class MXFP8:
    """OCP MXFP8: [1, 32] blocks along K of every row, E8M0 scales."""
    format, prefix = "mxfp8", "mx-"
    quantize_rows = quantize_weights = staticmethod(quantize_mx)
    dequantize_rows = dequantize_weights = staticmethod(dequantize_mx)
    varied_rows = varied_weights = staticmethod(lambda shape, g: block_varied(shape, g, 1, MX_BLOCK))


FORMATS = (BlockFP8, MXFP8)


def cases():
    """(name, entry, counts or explicit offsets, M)."""
    rng = random.Random(4321)
    yield "uniform (tiles start mid-expert)", "f8_e8_n256_k512", [96] * 8, None
    yield "all rows to one expert", "f8_e8_n128_k128", [0, 0, 0, 300, 0, 0, 0, 0], None
    yield "1 row total (T=1)", "f8_e4_n128_k256", [0, 0, 1, 0], None
    yield "several empty experts, row scale", "f8_e4_n128_k256", [0, 70, 129, 1], None
    yield "skewed random", "f8_e16_n384_k640", skewed_counts(rng, 16, 1000, 0.35), None
    yield "long K", "f8_e2_n512_k4096", [65, 3], None
    yield "decode mix: 1000 rows + experts of 0..17 rows", "f8_e8_n4096_k1024", [1000, 1, 3, 0, 16, 17, 5, 64], None
    yield "decode: 1..16 rows per expert", "f8_e8_n4096_k1024", [1, 2, 4, 8, 16, 0, 3, 7], None
    yield "i64 offsets", "f8_e8_n256_k256_i64", [10, 0, 50, 17, 16, 1, 0, 200], None
    yield "64 experts, skewed, mostly empty", "f8_e64_n512_k256", skewed_counts(rng, 64, 700, 0.2), None
    yield "large M (16384 rows)", "f8_e8_n256_k512", [2048] * 8, None
    yield "malformed offsets (clamped)", "f8_e8_n256_k512", [5, 3, 40, 40, 1000, 20, -7, 60, 2000], 100
    # MXFP8 only (K a multiple of 32 but not of 128: a partial last K step).
    yield "K = 2880 (GPT-OSS), decode and prefill mix", "mx_e4_n320_k2880", [1, 0, 300, 17], None


class Case:
    def __init__(self, spec, rows, info, seed, fmt=BlockFP8):
        offsets, m = offsets_from(spec, info.experts, rows)
        self.m, self.n, self.k, self.experts = max(m, 1), info.n, info.k, info.experts
        g = torch.Generator(device=DEV).manual_seed(seed)
        x = fmt.varied_rows((self.m, self.k), g)
        w = fmt.varied_weights((self.experts, self.n, self.k), g) * self.k ** -0.5
        self.rows, self.rows_scale = fmt.quantize_rows(x)
        self.weights, self.weights_scale = fmt.quantize_weights(w)
        offsets_dtype = torch.int64 if info.offsets_bits == 64 else torch.int32
        self.offsets = torch.tensor(offsets, device=DEV, dtype=offsets_dtype)
        self.row_scale = (torch.rand(self.m, device=DEV, generator=g) + 0.5
                          if info.epilogue == "row_scale" else None)
        self.ranges = clamped_ranges(offsets, self.m)
        xd = fmt.dequantize_rows(self.rows, self.rows_scale)
        wd = fmt.dequantize_weights(self.weights, self.weights_scale)
        self.reference = torch.full((self.m, self.n), float("nan"), device=DEV, dtype=torch.float64)
        self.unquantized = torch.full((self.m, self.n), float("nan"), device=DEV, dtype=torch.float64)
        xb, wb = x.to(torch.bfloat16).double(), w.to(torch.bfloat16).double()
        for e, (lo, hi) in enumerate(self.ranges):
            if hi > lo:
                self.reference[lo:hi] = xd[lo:hi] @ wd[e].t()
                self.unquantized[lo:hi] = xb[lo:hi] @ wb[e].t()
        if self.row_scale is not None:
            self.reference *= self.row_scale.double()[:, None]
            self.unquantized *= self.row_scale.double()[:, None]

    def run(self, bundle, entry, out):
        bundle.grouped_matmul(entry, self.rows, self.weights, self.offsets, out,
                              row_scale=self.row_scale, rows_scale=self.rows_scale,
                              weights_scale=self.weights_scale)

    def check(self, out):
        owned = ~torch.isnan(self.reference[:, 0])
        got, want = out[owned].double(), self.reference[owned]
        if torch.isnan(got).any():
            return f"{int(torch.isnan(got).any(1).sum())} owned rows not written (poison left)", None
        err = ((got - want).norm() / want.norm().clamp_min(1e-30)).item() if owned.any() else 0.0
        if not err <= TOLERANCE:
            return f"relative L2 error {err:.3e} > {TOLERANCE}", err
        if (~owned).any() and not torch.isnan(out[~owned].float()).all():
            return "rows no expert owns were written", err
        return None, err

    def error_vs_bf16(self, out):
        owned = ~torch.isnan(self.reference[:, 0])
        if not owned.any():
            return 0.0
        want = self.unquantized[owned]
        return ((out[owned].double() - want).norm() / want.norm()).item()


def replay_failure_detail(graph, first, bundle, info, data, out):
    """What a failed replay of `graph` (inputs: `first`'s buffers holding
    `data`) tells: the rows that differ, whether a second replay and an
    eager call on the same buffers fail too (a wrong reference would make
    all three fail; a bad capture only the replays)."""
    got = out.float()
    owned = ~torch.isnan(data.reference[:, 0])
    diff = (got.double() - data.reference).abs().amax(dim=1)
    bad_rows = ((diff > 0.05 * data.reference.abs().amax()) & owned).nonzero().flatten().tolist()
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    again = data.check(out)[0]
    out.fill_(float("nan"))
    first.run(bundle, info.name, out)
    torch.cuda.synchronize()
    eager = data.check(out)[0]
    return (f"{len(bad_rows)} wrong rows, first {bad_rows[:6]}; replayed again: {again or 'right'}; "
            f"eager: {eager or 'right'}")


def gptoss_act(gu, I, alpha=1.702, limit=7.0):
    """GPT-OSS's clamped SwiGLU of [M, 2I] gate-up rows (gate first)."""
    gate, up = gu[:, :I].clamp(max=limit), gu[:, I:].clamp(-limit, limit)
    return (up + 1) * (gate * torch.sigmoid(gate * alpha))


def fp8_mlp_case(fused, separate, counts, seed):
    """One routing of fp8_chain.mlir's @mlp through both bundles: (ok,
    details)."""
    gate_up, down = fused.entry("mlp_0_gate_up"), fused.entry("mlp_0_down")
    E, H, I = gate_up.experts, gate_up.k, down.k
    g = torch.Generator(device=DEV).manual_seed(seed)
    w13 = (block_varied((E, 2 * I, H), g, BLOCK) * H ** -0.5).to(torch.bfloat16)
    w2 = (block_varied((E, H, I), g, BLOCK) * I ** -0.5).to(torch.bfloat16)
    b13 = (torch.randn(E, 2 * I, device=DEV, generator=g) * 0.5).to(torch.bfloat16)
    b2 = torch.randn(E, H, device=DEV, generator=g) * 0.1
    offsets_list, m = offsets_from(counts, E, None)
    x = block_varied((m, H), g, 1).to(torch.bfloat16)
    offsets = torch.tensor(offsets_list, device=DEV, dtype=torch.int32)
    w13q, w13s = fused.quantize("mlp_prepack", w13)
    w2q, w2s = fused.quantize("mlp_prepack_0", w2)
    xq, xs = fused.quantize("mlp", x)
    hq = torch.full((m, I), 0x7F, device=DEV, dtype=torch.uint8).view(torch.float8_e4m3fn)
    hs = torch.full((m, I // BLOCK), float("nan"), device=DEV)
    fused.grouped_matmul("mlp_0_gate_up", xq, w13q, offsets, hq, rows_scale=xs, weights_scale=w13s, bias=b13,
                         out_scale=hs)
    y = torch.full((m, H), float("nan"), device=DEV, dtype=torch.bfloat16)
    fused.grouped_matmul("mlp_0_down", hq, w2q, offsets, y, rows_scale=hs, weights_scale=w2s, bias=b2)
    h = torch.full((m, I), float("nan"), device=DEV, dtype=torch.bfloat16)
    separate.grouped_matmul("mlp_0_gate_up", xq, w13q, offsets, h, rows_scale=xs, weights_scale=w13s, bias=b13)
    ref_q, ref_s = separate.quantize("mlp_0_intermediate", h)
    torch.cuda.synchronize()
    exact = (torch.equal(hq.view(torch.uint8), ref_q.view(torch.uint8))
             and torch.equal(hs.view(torch.int32), ref_s.view(torch.int32)))
    xd, w13d, w2d = (dequantize_blocks(xq, xs, 1), dequantize_blocks(w13q, w13s, BLOCK),
                     dequantize_blocks(w2q, w2s, BLOCK))
    hd = dequantize_blocks(hq, hs, 1)
    ranges = [(e, lo, hi) for e, (lo, hi) in enumerate(clamped_ranges(offsets_list, m)) if hi > lo]
    want_h = torch.cat([gptoss_act(xd[lo:hi] @ w13d[e].t() + b13[e].double(), I) for e, lo, hi in ranges])
    want_y = torch.cat([hd[lo:hi] @ w2d[e].t() + b2[e].double() for e, lo, hi in ranges])
    rel = lambda got, want: ((got.double() - want).norm() / want.norm()).item()  # noqa: E731
    h_err, y_err = rel(h, want_h), rel(y, want_y)
    ok = exact and h_err <= TOLERANCE and y_err <= TOLERANCE
    return ok, (f"gate-up e4m3 {'bit-exact' if exact else 'DIFFER'} with bf16 gate-up + quantize, "
                f"gate-up {h_err:.2e}, down {y_err:.2e}")


def mx_mlp_case(bundle, counts, seed):
    """fp8_chain.mlir's @mlp in MXFP8 through its three entries: (ok,
    details)."""
    gate_up, down = bundle.entry("mlp_0_gate_up"), bundle.entry("mlp_0_down")
    E, H, I = gate_up.experts, gate_up.k, down.k
    g = torch.Generator(device=DEV).manual_seed(seed)
    w13 = (MXFP8.varied_weights((E, 2 * I, H), g) * H ** -0.5).to(torch.bfloat16)
    w2 = (MXFP8.varied_weights((E, H, I), g) * I ** -0.5).to(torch.bfloat16)
    b13 = (torch.randn(E, 2 * I, device=DEV, generator=g) * 0.5).to(torch.bfloat16)
    b2 = torch.randn(E, H, device=DEV, generator=g) * 0.1
    offsets_list, m = offsets_from(counts, E, None)
    x = MXFP8.varied_rows((m, H), g).to(torch.bfloat16)
    offsets = torch.tensor(offsets_list, device=DEV, dtype=torch.int32)
    w13q, w13s = bundle.quantize("mlp_prepack", w13)
    w2q, w2s = bundle.quantize("mlp_prepack_0", w2)
    xq, xs = bundle.quantize("mlp", x)
    h = torch.full((m, I), float("nan"), device=DEV, dtype=torch.bfloat16)
    bundle.grouped_matmul("mlp_0_gate_up", xq, w13q, offsets, h, rows_scale=xs, weights_scale=w13s, bias=b13)
    hq, hs = bundle.quantize("mlp_0_intermediate", h)
    y = torch.full((m, H), float("nan"), device=DEV, dtype=torch.bfloat16)
    bundle.grouped_matmul("mlp_0_down", hq, w2q, offsets, y, rows_scale=hs, weights_scale=w2s, bias=b2)
    torch.cuda.synchronize()
    want_q, want_s = quantize_mx(h)
    exact = (torch.equal(hq.view(torch.uint8), want_q.view(torch.uint8))
             and torch.equal(hs.view(torch.uint8), want_s))
    xd, w13d, w2d, hd = (dequantize_mx(xq, xs), dequantize_mx(w13q, w13s), dequantize_mx(w2q, w2s),
                         dequantize_mx(hq, hs))
    ranges = [(e, lo, hi) for e, (lo, hi) in enumerate(clamped_ranges(offsets_list, m)) if hi > lo]
    want_h = torch.cat([gptoss_act(xd[lo:hi] @ w13d[e].t() + b13[e].double(), I) for e, lo, hi in ranges])
    want_y = torch.cat([hd[lo:hi] @ w2d[e].t() + b2[e].double() for e, lo, hi in ranges])
    rel = lambda got, want: ((got.double() - want).norm() / want.norm()).item()  # noqa: E731
    h_err, y_err = rel(h, want_h), rel(y, want_y)
    ok = exact and h_err <= TOLERANCE and y_err <= TOLERANCE
    return ok, (f"activation quantize {'bit-exact' if exact else 'DIFFERS'} with quantize_mx, "
                f"gate-up {h_err:.2e}, down {y_err:.2e}")


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    tally = Tally()
    report = tally.report
    loaded, shapes, fmt_of = {}, {}, {}
    for fmt in FORMATS:
        bundles = sorted(f for f in os.listdir(ARTIFACTS)
                         if f.startswith(fmt.prefix) and f.endswith(".moebundle"))
        if not bundles:
            report(False, f"{fmt.format} bundles", f"no {fmt.prefix}*.moebundle in {ARTIFACTS}")
            continue
        for name in bundles:
            loaded[name], fmt_of[name] = moe_mlir.Bundle(os.path.join(ARTIFACTS, name)), fmt
        shapes[fmt] = {entry.name: entry for entry in loaded[bundles[0]].entries}
        for entry in shapes[fmt].values():
            report(entry.abi == "grouped_matmul_fp8.v1" and entry.format == fmt.format,
                   f"{bundles[0]} {entry.name} is a grouped_matmul_fp8.v1 {fmt.format} entry",
                   f"{entry.abi} {entry.format}")

    runs = [(*c, fmt) for c in cases() for fmt in shapes if c[1] in shapes[fmt]]
    for seed, (name, entry, spec, rows, fmt) in enumerate(runs):
        case = Case(spec, rows, shapes[fmt][entry], seed, fmt)
        for bundle_name, bundle in loaded.items():
            if fmt_of[bundle_name] is not fmt:
                continue
            what = f"{bundle_name} {entry} M={case.m}: {name}"
            try:
                out = torch.full((case.m, case.n), float("nan"), device=DEV, dtype=torch.bfloat16)
                case.run(bundle, entry, out)
                torch.cuda.synchronize()
                problem, err = case.check(out)
                detail = problem or (f"rel. L2 {err:.2e} vs dequantized reference, "
                                     f"{case.error_vs_bf16(out):.2e} vs the bf16 GEMM")
                report(problem is None, what, detail)
            except Exception as error:  # a failure, never a stop
                report(False, what, f"{type(error).__name__}: {error}")
        del case
        torch.cuda.empty_cache()

    # MXFP8 codes at odd addresses: the kernels load a row's codes of a K step
    # as one word only when every row starts on a word boundary, else byte by
    # byte (the same results; the word loads were checked above).
    info = shapes.get(MXFP8, {}).get("f8_e8_n256_k512")
    for bundle_name in ("mx-default.moebundle", "mx-normal-64.moebundle", "mx-unspecialized.moebundle"):
        what = f"{bundle_name} MXFP8 scales one byte off word alignment"
        try:
            case = Case([96, 0, 1, 300, 17, 64, 65, 5], None, info, 77, MXFP8)
            for name in ("rows_scale", "weights_scale"):
                codes = getattr(case, name)
                shifted = torch.empty(codes.numel() + 1, device=DEV, dtype=codes.dtype)[1:].view(codes.shape)
                shifted.copy_(codes)
                setattr(case, name, shifted)
            out = torch.full((case.m, case.n), float("nan"), device=DEV, dtype=torch.bfloat16)
            case.run(loaded[bundle_name], info.name, out)
            torch.cuda.synchronize()
            problem, err = case.check(out)
            report(problem is None, what, problem or f"rel. L2 {err:.2e} vs dequantized reference")
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")

    # A captured call replays on new data and a new routing in the same buffers.
    for bundle_name in ("fp8-default.moebundle", "fp8-swap8-split.moebundle", "mx-default.moebundle"):
        what = f"{bundle_name} CUDA graph replay with a new routing"
        try:
            bundle = loaded[bundle_name]
            info = shapes[fmt_of[bundle_name]]["f8_e8_n4096_k1024"]
            fmt = fmt_of[bundle_name]
            first = Case([1000, 1, 3, 0, 16, 17, 5, 64], None, info, 99, fmt)
            second = Case([3, 500, 0, 9, 9, 9, 500, 76], None, info, 100, fmt)
            out = torch.full((first.m, first.n), float("nan"), device=DEV, dtype=torch.bfloat16)
            warm_up_on_side_stream(lambda: first.run(bundle, info.name, out))
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                first.run(bundle, info.name, out)
            problems = []
            for which, data in (("first", first), ("second", second)):
                for name in ("rows", "rows_scale", "weights", "weights_scale", "offsets", "row_scale"):
                    getattr(first, name).copy_(getattr(data, name))
                out.fill_(float("nan"))
                graph.replay()
                torch.cuda.synchronize()
                problem = data.check(out)[0]
                if problem:
                    problem += f" ({which} replay: {replay_failure_detail(graph, first, bundle, info, data, out)})"
                problems.append(problem)
            report(problems == [None, None], what, "; ".join(p for p in problems if p))
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")

    # The chain --moe-quantize compiles from a bf16 GEMM
    # (test/device/fp8_chain.mlir): the weights quantized once by the prepack
    # entry, the rows per call, then the block-FP8 GEMM on both.
    chain_path = os.path.join(ARTIFACTS, "fp8chain.moebundle")
    chains = [(counts, "fp8chain", BlockFP8) for counts in ([40, 0, 1, 300, 7, 0, 64, 5], [0, 0, 0, 1, 0, 0, 0, 0])]
    chains.append(([40, 0, 1, 300, 7, 0, 64, 5], "mxchain", MXFP8))
    for seed, (counts, chain_name, fmt) in enumerate(chains):
        what = f"{chain_name}.moebundle prepack -> quantize -> FP8 GEMM, counts {counts}"
        try:
            chain = moe_mlir.Bundle(os.path.join(ARTIFACTS, f"{chain_name}.moebundle"))
            info = chain.entry("gate_up_0")
            g = torch.Generator(device=DEV).manual_seed(500 + seed)
            w = (fmt.varied_weights((info.experts, info.n, info.k), g) * info.k ** -0.5).to(torch.bfloat16)
            offsets_list, m = offsets_from(counts, info.experts, None)
            x = fmt.varied_rows((m, info.k), g).to(torch.bfloat16)
            offsets = torch.tensor(offsets_list, device=DEV, dtype=torch.int32)
            wq, ws = chain.quantize("gate_up_prepack", w)
            xq, xs = chain.quantize("gate_up", x)
            out = torch.full((m, info.n), float("nan"), device=DEV, dtype=torch.bfloat16)
            chain.grouped_matmul("gate_up_0", xq, wq, offsets, out, rows_scale=xs, weights_scale=ws)
            torch.cuda.synchronize()
            xd, wd = fmt.dequantize_rows(xq, xs), fmt.dequantize_weights(wq, ws)
            want = torch.cat([xd[lo:hi] @ wd[e].t() for e, (lo, hi) in
                              enumerate(clamped_ranges(offsets_list, m)) if hi > lo])
            bf16 = torch.cat([x[lo:hi].double() @ w[e].double().t() for e, (lo, hi) in
                              enumerate(clamped_ranges(offsets_list, m)) if hi > lo])
            got = out.double()
            err = ((got - want).norm() / want.norm()).item()
            report(err <= TOLERANCE, what, f"rel. L2 {err:.2e} vs dequantized reference, "
                   f"{((got - bf16).norm() / bf16.norm()).item():.2e} vs the bf16 GEMM")
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")

    # The GPT-OSS-style expert MLP of fp8_chain.mlir (clamped SwiGLU, bf16
    # gate-up and f32 down biases): fp8chain-epilogue's gate-up epilogue's
    # e4m3 codes and scales bit-exact with fp8chain's bf16 gate-up then
    # quantize; that bf16 gate-up and the down GEMM each within 3e-3 of
    # float64 on the dequantized values of their own inputs.
    epilogue_path = os.path.join(ARTIFACTS, "fp8chain-epilogue.moebundle")
    for seed, counts in enumerate(([40, 0, 1, 300, 7, 0, 64, 5], [0, 0, 0, 1, 0, 0, 0, 0], [0] * 7 + [700])):
        what = f"fp8chain.moebundle GPT-OSS-style FP8 expert MLP with biases, counts {counts}"
        try:
            fused, separate = moe_mlir.Bundle(epilogue_path), moe_mlir.Bundle(chain_path)
            ok, detail = fp8_mlp_case(fused, separate, counts, 600 + seed)
            report(ok, what, detail)
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")

    # The same MLP in MXFP8 (mxchain.moebundle): bf16 gate-up, the
    # activation's [1, 32] quantize kernel (bit-exact with quantize_mx), the
    # down GEMM.
    for seed, counts in enumerate(([40, 0, 1, 300, 7, 0, 64, 5], [0] * 7 + [700])):
        what = f"mxchain.moebundle GPT-OSS-style MXFP8 expert MLP with biases, counts {counts}"
        try:
            ok, detail = mx_mlp_case(moe_mlir.Bundle(os.path.join(ARTIFACTS, "mxchain.moebundle")),
                                     counts, 700 + seed)
            report(ok, what, detail)
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")

    # Argument errors come back as exceptions with a message, never a crash.
    bundle, info = loaded["fp8-default.moebundle"], shapes[BlockFP8]["f8_e8_n256_k512"]
    good = Case([4] * 8, None, info, 7)
    out = torch.empty(good.m, good.n, device=DEV, dtype=torch.bfloat16)
    gm = bundle.grouped_matmul
    bad_calls = {
        "missing rows_scale": lambda: gm(info.name, good.rows, good.weights, good.offsets, out,
                                         weights_scale=good.weights_scale),
        "missing weights_scale": lambda: gm(info.name, good.rows, good.weights, good.offsets, out,
                                            rows_scale=good.rows_scale),
        "bf16 rows for an fp8 entry": lambda: gm(info.name, good.rows.to(torch.bfloat16), good.weights,
                                                 good.offsets, out, rows_scale=good.rows_scale,
                                                 weights_scale=good.weights_scale),
        "rows_scale of the wrong shape": lambda: gm(info.name, good.rows, good.weights, good.offsets, out,
                                                    rows_scale=good.rows_scale[:, :2].contiguous(),
                                                    weights_scale=good.weights_scale),
        "weights_scale of the wrong dtype": lambda: gm(info.name, good.rows, good.weights, good.offsets, out,
                                                       rows_scale=good.rows_scale,
                                                       weights_scale=good.weights_scale.half()),
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
    return tally.summary()


if __name__ == "__main__":
    run(main)
