#!/usr/bin/env python3
"""GPU tests of the quantize kernel (quantize.v1, docs/runtime-contract.md
section 3.8), through the runtime (run on the H200).

Every entry of quantize.moebundle (scripts/build-gpu-artifacts.sh compiles
test/device/quantize_shapes.mlir: MXFP8 e4m3/e5m2 [1, 32] E8M0, [1, B] f32
groups for B = 8..256, [128, 128] f32 weight blocks of 2-D and per-expert
3-D weights; bf16 and f32 inputs) quantizes

- random inputs: normal values times 2^u per block (u up to +-40), zero
  blocks, outliers, a single row and rows that leave the last warp partial;
- the edge blocks of test/lib/quant_case.py (zeros, f32 subnormals,
  saturation at 448 / 57344, the largest exponents, NaN, infinity, ties
  between neighbouring codes, elements landing subnormal) and blocks whose
  amax sits on or just below a power of two (the E8M0 floor(log2)), from
  2^-133 to 2^127, or is 448 * 2^k (exact f32 scales), and blocks of
  elements that x * (1 / scale) would give another code than x / scale
  (a kernel multiplying by the reciprocal must divide there);

and the codes and scales must equal test/lib/moe_ref.py's `quantize` (numpy,
nearest-value search; run on row slices in parallel processes, which is
the same as whole tensors since blocks are independent) BIT FOR BIT,
f32 NaN scales included (0x7FC00000). Outputs are poisoned before each call
(twice, with different bytes, so an unwritten element cannot match by
chance) inside larger buffers whose tails must stay poisoned; the input
must be unchanged. Also: launches of more than 65535 CTAs (grid-stride,
checked against a tiled pattern), a CUDA-graph replay on new data, and the
runtime's argument errors (nothing written when refused). The
moe.fake_quantize entries (`fq_<name>`, planned.v1, through Bundle.launch)
must give, on each of `<name>`'s inputs, moe_ref's dequantize of its codes
and scales rounded to the input's type, bit for bit, into poisoned outputs
and in place. Prints `N passed, N failed`.

    scripts/build-gpu-artifacts.sh     # here: .gpu-artifacts/quantize.moebundle
    python3 test/device/quantize.py .gpu-artifacts
"""
import ctypes
import functools
import multiprocessing
import os
import sys

import numpy as np
import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ARTIFACTS, "site"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import moe_mlir  # noqa: E402
import moe_ref  # noqa: E402
import quant_case  # noqa: E402
from tally import Tally, run  # noqa: E402

# moe_ref rebuilds the 256-entry code table for every block; it is a pure
# function of the format, so memoizing it only saves time.
moe_ref.fp8_table = functools.lru_cache(maxsize=None)(moe_ref.fp8_table)

DEV = "cuda"
POISONS = (0xA5, 0x5A)
TAIL = 256  # bytes after each output that must stay poisoned
MAX_GRID = 65535


def scale_type(entry):
    return "f8E8M0FNU" if entry.scale == "e8m0" else "f32"


def representable(x, entry):
    """x rounded to the entry's input type (bf16: to nearest even, as torch
    converts), as float32."""
    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    if entry.input_bits == 16:
        t = t.to(torch.bfloat16)
    return t.float().numpy()


def to_device(x, entry):
    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    return t.to(torch.bfloat16 if entry.input_bits == 16 else torch.float32).to(DEV)


# -- the reference, on row slices in parallel ------------------------------

def _reference_rows(job):
    x2d, fmt, block, scales = job
    return moe_ref.quantize(x2d, fmt, block, scales)


def references(pool, cases):
    """moe_ref.quantize of each (entry, x): x viewed as [M, C] (a 3-D input
    with [1, br, bc] blocks is [E*R, C] with [br, bc] blocks: the same
    blocks) and cut into slices of whole block rows, one job each."""
    jobs, owners = [], []
    for index, (entry, x) in enumerate(cases):
        x2d = x.reshape(-1, x.shape[-1])
        step = max(entry.block_rows, (1 << 16) // x2d.shape[1] // entry.block_rows
                   * entry.block_rows)
        for start in range(0, x2d.shape[0], step):
            jobs.append((x2d[start:start + step], entry.element,
                         [entry.block_rows, entry.block_cols], scale_type(entry)))
            owners.append(index)
    results = pool.map(_reference_rows, jobs, chunksize=1)
    out = []
    for index, (entry, x) in enumerate(cases):
        parts = [r for r, o in zip(results, owners) if o == index]
        codes = np.concatenate([p[0] for p in parts]).reshape(x.shape)
        scales = np.concatenate([p[1] for p in parts])
        lead = x.shape[:-2]
        scales = scales.reshape(lead + (x.shape[-2] // entry.block_rows,
                                        x.shape[-1] // entry.block_cols))
        out.append((codes, scales))
    return out


# -- inputs ----------------------------------------------------------------

def random_blocks(rng, count, size, spread=40):
    """`count` blocks of `size`: normal values times 2^u per block, u in
    [-spread, spread]; 3 % zero blocks; an outlier (x 100) in 5 %."""
    x = rng.standard_normal((count, size))
    x *= 2.0 ** rng.integers(-spread, spread + 1, (count, 1))
    x[rng.random(count) < 0.03] = 0.0
    outliers = np.flatnonzero(rng.random(count) < 0.05)
    x[outliers, rng.integers(0, size, outliers.size)] *= 100.0
    return x.astype(np.float32)


def boundary_rows(rng, n=32):
    """Blocks of n whose amax is 2^k, the largest bf16 below 2^k, or
    448 * 2^k, for k across the f32 range (subnormal amax included)."""
    rows = []
    for k in (-133, -130, -127, -126, -125, -120, -64, -8, -1, 0, 1, 7, 8, 9,
              15, 16, 17, 64, 120, 125, 126, 127):
        for top in (2.0 ** k, 1.9921875 * 2.0 ** (k - 1)):
            r = (rng.random(n) - 0.5) * top
            r[rng.integers(0, n)] = -top if k % 2 else top
            rows.append(r)
    for k in (-100, -10, 0, 10, 100):
        r = rng.standard_normal(n) * 100 * 2.0 ** k
        r = np.clip(r, -448 * 2.0 ** k, 448 * 2.0 ** k)
        r[3] = 448 * 2.0 ** k
        rows.append(r)
    return np.array(rows, dtype=np.float32)


def reciprocal_rows(fmt, rng, count=16, n=32):
    """Blocks of n whose elements x (bf16, like their amax) round to another
    code as x * (1 / s) than as x / s, s = amax / fp8 max in f32 (about
    1 in 10^4 near a code's rounding midpoint): a kernel that multiplies
    by the reciprocal must divide there. Found by search here (amax and
    x bf16 in 2^-12..2^12)."""
    mantissa = int(moe_ref.FP8[fmt][1])
    drop = 23 - mantissa
    top = np.float32(moe_ref.fp8_max(fmt))
    grid = (np.arange(0x3980, 0x4580, dtype=np.uint32) << 16).view(np.float32)  # bf16 2^-12..2^12

    # x >= amax / 32 keeps every quotient among the normal codes (>= 14,
    # <= the format's max), where rounding is to `mantissa` bits: a
    # vectorized stand-in for moe_ref.encode_fp8 (a loop per element) that
    # only picks inputs; the test still compares with moe_ref.quantize.
    def rounded(q):  # to `mantissa` bits, ties to even
        b = q.view(np.uint32).astype(np.int64)
        low, base = b & ((1 << drop) - 1), b >> drop
        return base + ((low > 1 << (drop - 1)) | ((low == 1 << (drop - 1)) & (base & 1 == 1)))

    rows = []
    for _ in range(100 * count):
        if len(rows) == count:
            break
        amax = grid[rng.integers(0, grid.size)]
        s = np.float32(amax / top)
        x = grid[(grid >= amax * np.float32(2.0 ** -5)) & (grid <= amax)]
        traps = x[rounded((x * (np.float32(1) / s)).astype(np.float32)) != rounded(x / s)]
        if traps.size:
            r = (rng.random(n) - 0.5) * amax
            r[0] = amax
            picked = rng.permutation(traps)[: n - 1]
            r[1:1 + picked.size] = picked * np.where(rng.random(picked.size) < 0.5, -1, 1)
            rows.append(r)
    assert len(rows) == count, f"{fmt}: only {len(rows)} reciprocal-trap blocks found"
    return np.array(rows, dtype=np.float32)


def edge_rows(entry, rng):
    """quant_case's edge blocks of 32 for the entry's format, then the
    boundary blocks and the reciprocal traps."""
    return np.concatenate([quant_case.edge_rows(entry.element), boundary_rows(rng),
                           reciprocal_rows(entry.element, rng)])


def row_blocks(rows32, size):
    """Blocks of 32 as blocks of `size`: tiled (the same amax) or split."""
    if size >= 32:
        return np.tile(rows32, (1, size // 32))
    return rows32.reshape(-1, size)


def lay_out(entry, blocks, rng, batch=None, rows=None):
    """An input of the entry's shape holding `blocks` ([n, br*bc], in block
    order) first, random blocks after; its sizes from the entry where
    static, else as small as fits (or the given batch / rows)."""
    br, bc = entry.block_rows, entry.block_cols
    cols = entry.cols
    per_row = cols // bc
    need = max(1, -(-len(blocks) // per_row))  # block rows
    if entry.rank == 2:
        r = entry.rows if entry.rows != -1 else (rows or need * br)
        shape, m = (r, cols), r
    else:
        r = entry.rows if entry.rows != -1 else (rows or br)
        e = entry.batch if entry.batch != -1 else (batch or -(-need * br // r))
        shape, m = (e, r, cols), e * r
    total = (m // br) * per_row
    if len(blocks) > total:
        raise ValueError(f"{entry.name}: {len(blocks)} blocks do not fit {shape}")
    fill = random_blocks(rng, total - len(blocks), br * bc)
    allb = np.concatenate([blocks.reshape(-1, br * bc), fill]).reshape(m // br, per_row, br, bc)
    return allb.transpose(0, 2, 1, 3).reshape(shape)


def cases_of(entry, seed):
    """(name, x) cases of an entry, x representable in its input type."""
    rng = np.random.default_rng(seed)
    br, bc = entry.block_rows, entry.block_cols
    out = []
    edges = edge_rows(entry, rng)
    if br == 1:
        out.append(("edge blocks", lay_out(entry, row_blocks(edges, bc), rng)))
        per_row = entry.cols // bc
        # One row; rows that leave the last warp partial; for 3-D inputs,
        # experts.
        for rows in ((1, 3, 37) if entry.rank == 2 else (1, 2, 5)):
            n = rows * per_row if entry.rank == 2 else 0
            out.append((f"random, {rows} row(s)" if entry.rank == 2 else f"random, {rows} expert(s)",
                        lay_out(entry, random_blocks(rng, n, bc), rng,
                                batch=rows, rows=rows)))
        # Narrow spreads: every block's codes span the whole grid.
        out.append(("random, moderate magnitudes",
                    lay_out(entry, random_blocks(rng, 8 * per_row, bc, spread=3), rng)))
    else:
        # Each edge block of 32 tiled over a 128 x 128 block (the same
        # amax), as many tensors as they need, then random blocks.
        tiles = np.tile(edges[:, None, :], (1, br, bc // 32))
        if entry.batch == -1:
            out.append(("edge blocks", lay_out(entry, tiles, rng)))
            out.append(("random, 2 experts", lay_out(entry, tiles[:0], rng, batch=2)))
        else:
            capacity = lay_out(entry, tiles[:0], rng).size // (br * bc)
            for first in range(0, len(tiles), capacity):
                out.append((f"edge blocks {first}..{min(first + capacity, len(tiles)) - 1}",
                            lay_out(entry, tiles[first:first + capacity], rng)))
            out.append(("random", lay_out(entry, tiles[:0], rng)))
    return [(name, representable(x, entry)) for name, x in out]


# -- running and comparing ---------------------------------------------------

def first_difference(got, want, x, what):
    bad = np.flatnonzero(got.ravel() != want.ravel())
    if not bad.size:
        return ""
    i = bad[0]
    detail = (f"{bad.size} {what} differ, first at flat index {i}: {int(got.ravel()[i]):#x} "
              f"vs reference {int(want.ravel()[i]):#x}")
    if x is not None:
        v = x.ravel()[i]
        detail += f" (input {v!r} = {np.float32(v).view(np.uint32):#010x})"
    return detail


def scale_bits(scales, entry):
    return scales.astype(np.uint8) if entry.scale == "e8m0" else scales.astype(np.float32).view(np.uint32)


def compare(entry, x, ref, values, scales):
    """'' when values and scales (torch, on the GPU) are the reference's
    bits, else what differs."""
    codes, want_scales = ref
    got = values.view(torch.uint8).cpu().numpy()
    problems = []
    d = first_difference(got, codes, x, "codes")
    if d:
        problems.append(d)
    if entry.scale == "e8m0":
        got_s = scales.view(torch.uint8).cpu().numpy()
    else:
        got_s = scales.view(torch.int32).cpu().numpy().view(np.uint32)
    d = first_difference(got_s, scale_bits(want_scales, entry), None, "scales")
    if d:
        problems.append(d)
    return "; ".join(problems)


def poisoned(shape, dtype, byte):
    """A tensor of `shape` and `dtype` at the start of a larger uint8 buffer
    filled with `byte`; returns (tensor, buffer, its bytes)."""
    count = int(np.prod(shape)) * torch.empty((), dtype=dtype).element_size()
    buffer = torch.full((count + TAIL,), byte, dtype=torch.uint8, device=DEV)
    return buffer[:count].view(dtype).view(shape), buffer, count


def check_case(tally, bundle, entry, name, x, ref):
    codes, want_scales = ref
    scale_dtype = torch.uint8 if entry.scale == "e8m0" else torch.float32
    xt = to_device(x, entry)
    before = xt.clone()
    problems = []
    for byte in POISONS:
        values, vbuf, vcount = poisoned(x.shape, torch.uint8, byte)
        scales, sbuf, scount = poisoned(want_scales.shape, scale_dtype, byte ^ 0xFF)
        got_v, got_s = bundle.quantize(entry.name, xt, values, scales)
        torch.cuda.synchronize()
        if got_v.data_ptr() != values.data_ptr() or got_s.data_ptr() != scales.data_ptr():
            problems.append("did not return the given outputs")
        d = compare(entry, x, ref, values, scales)
        if d:
            problems.append(f"poison {byte:#x}: {d}")
        if not bool((vbuf[vcount:] == byte).all()) or not bool((sbuf[scount:] == (byte ^ 0xFF)).all()):
            problems.append(f"poison {byte:#x}: wrote past the end of values or scales")
    # Allocated outputs: the element and scale dtypes of the entry.
    got_v, got_s = bundle.quantize(entry.name, xt)
    torch.cuda.synchronize()
    want_v = torch.float8_e4m3fn if entry.element == "f8E4M3FN" else torch.float8_e5m2
    want_s = (getattr(torch, "float8_e8m0fnu", torch.uint8) if entry.scale == "e8m0"
              else torch.float32)
    if got_v.dtype != want_v or got_s.dtype != want_s:
        problems.append(f"returned {got_v.dtype}, {got_s.dtype}; expected {want_v}, {want_s}")
    d = compare(entry, x, ref, got_v, got_s)
    if d:
        problems.append(f"allocated outputs: {d}")
    if before.view(torch.int16 if entry.input_bits == 16 else torch.int32).ne(
            xt.view(torch.int16 if entry.input_bits == 16 else torch.int32)).any():
        problems.append("the input's bits changed")
    tally.report(not problems, f"{entry.name}: {name} {tuple(x.shape)}, bit-exact",
                 "; ".join(problems))


def dequantized(entry, ref):
    """moe.dequantize of the reference codes and scales in the entry's input
    type: exact in float64, rounded once to f32 (as the f32 product), then
    to bf16 (round to nearest even)."""
    codes, scales = ref
    lead = codes.shape[:-2]
    block = [1] * len(lead) + [entry.block_rows, entry.block_cols]
    values = moe_ref.dequantize(codes, scales, entry.element, block, scale_type(entry))
    t = torch.from_numpy(np.asarray(values, dtype=np.float64).astype(np.float32))
    return t.to(torch.bfloat16) if entry.input_bits == 16 else t


def check_fake_case(tally, bundle, entry, name, x, ref):
    """fq_<entry> (moe.fake_quantize, planned.v1) on x: the dequantized
    reference bit for bit (NaN where it is NaN), into poisoned outputs; out
    aliasing the input is refused."""
    fq = "fq_" + entry.name
    want = dequantized(entry, ref).to(DEV)
    bits = torch.int16 if entry.input_bits == 16 else torch.int32
    xt = to_device(x, entry)
    before = xt.clone()
    problems = []

    def differs(got):
        nan = torch.isnan(want)
        same = (got.view(bits) == want.view(bits)) | (nan & torch.isnan(got))
        if bool(same.all()):
            return ""
        bad = (~same).nonzero()
        i = tuple(bad[0].tolist())
        return (f"{bad.shape[0]} values differ, first at {i}: {got[i].item()!r} vs "
                f"reference {want[i].item()!r} (input {x[i]!r})")

    for byte in POISONS:
        out, buf, count = poisoned(x.shape, xt.dtype, byte)
        bundle.launch(fq, input=xt, out=out)
        torch.cuda.synchronize()
        d = differs(out)
        if d:
            problems.append(f"poison {byte:#x}: {d}")
        if not bool((buf[count:] == byte).all()):
            problems.append(f"poison {byte:#x}: wrote past the end of out")
    if before.view(bits).ne(xt.view(bits)).any():
        problems.append("the input's bits changed")
    # The entry's out may not alias its input (the runtime's rule for every
    # entry); a layer's plan runs the round trip in place, which
    # mxfp8_layer.py checks against the fused layer bit for bit.
    inplace = xt.clone()
    try:
        bundle.launch(fq, input=inplace, out=inplace)
        problems.append("out aliasing input was accepted")
    except moe_mlir.runtime.MoERuntimeError as e:
        if "out overlaps input" not in str(e):
            problems.append(f"aliasing refused with {e}")
    if before.view(bits).ne(inplace.view(bits)).any():
        problems.append("a refused launch changed the input")
    tally.report(not problems, f"{fq}: {name} {tuple(x.shape)}, bit-exact with the dequantized "
                 "reference, aliasing refused", "; ".join(problems))


def check_grid_stride(tally, bundle, entry, pattern, ref, repeats):
    """The pattern [m, C] (or [1, R, C]) repeated `repeats` times along its
    first dimension: more than 65535 CTAs, so every CTA loops; each copy's
    codes and scales must be the pattern's."""
    codes, want_scales = ref
    xt = to_device(pattern, entry)
    big = xt.repeat((repeats,) + (1,) * (xt.dim() - 1))
    elements = big.numel()
    ctas = (-(-elements // (32 * entry.kernels[0].threads)) if entry.block_rows == 1
            else elements // (entry.block_rows * entry.block_cols))
    values, scales = bundle.quantize(entry.name, big)
    torch.cuda.synchronize()
    want_v = torch.from_numpy(codes).to(DEV).repeat((repeats,) + (1,) * (xt.dim() - 1))
    want_s = torch.from_numpy(scale_bits(want_scales, entry).view(
        np.uint8 if entry.scale == "e8m0" else np.int32)).to(DEV)
    want_s = want_s.repeat((repeats,) + (1,) * (want_s.dim() - 1))
    got_s = scales.view(torch.uint8 if entry.scale == "e8m0" else torch.int32)
    ok_v = bool((values.view(torch.uint8) == want_v).all())
    ok_s = bool((got_s == want_s).all())
    detail = "" if ctas > MAX_GRID else f"only {ctas} CTAs of work"
    if not ok_v:
        bad = (values.view(torch.uint8) != want_v).nonzero()
        detail += f"{bad.shape[0]} codes differ, first at {tuple(bad[0].tolist())}"
    if not ok_s:
        bad = (got_s != want_s).nonzero()
        detail += f" {bad.shape[0]} scales differ, first at {tuple(bad[0].tolist())}"
    tally.report(ok_v and ok_s and ctas > MAX_GRID,
                 f"{entry.name}: grid-stride, {tuple(big.shape)} ({ctas} CTAs of work > {MAX_GRID})",
                 detail)
    del big, values, scales, want_v, want_s
    torch.cuda.empty_cache()


def check_graph(tally, bundle, entry, first, second):
    """A captured quantize replays on new input data."""
    (x1, ref1), (x2, ref2) = first, second
    bundle.load()
    xt = to_device(x1, entry)
    values = torch.empty(x1.shape, dtype=torch.uint8, device=DEV)
    scales = torch.empty(ref1[1].shape, dtype=torch.uint8 if entry.scale == "e8m0"
                         else torch.float32, device=DEV)
    stream = torch.cuda.Stream()
    # After the inputs and outputs above are ready (see tally.warm_up_on_side_stream).
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        bundle.quantize(entry.name, xt, values, scales)  # warm up
        stream.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            bundle.quantize(entry.name, xt, values, scales)
    problems = []
    for x, ref in ((x1, ref1), (x2, ref2)):
        xt.copy_(to_device(x, entry))
        values.fill_(0xA5)
        graph.replay()
        torch.cuda.synchronize()
        d = compare(entry, x, ref, values, scales)
        if d:
            problems.append(d)
    tally.report(not problems, f"{entry.name}: CUDA-graph replay on new data", "; ".join(problems))


def expect_error(tally, what, call, status, needle):
    try:
        call()
    except moe_mlir.MoERuntimeError as error:
        ok = error.status == status and needle in error.message
        tally.report(ok, f"error: {what}", "" if ok else f"got {error.status}: {error.message}")
        return
    tally.report(False, f"error: {what}", "no error")


def check_errors(tally, bundle):
    """Refusals through Bundle.launch (the entry's plan signature) and
    moeLaunch (the plan's pointer checks): each names the argument and
    writes nothing."""
    mx = bundle.entry("mx_e4m3_bf16")
    act = bundle.entry("act_e4m3_bf16")
    w = bundle.entry("w_e4m3_bf16")
    bad = "INVALID_ARGUMENT"
    x = torch.randn(4, 4096, device=DEV).to(torch.bfloat16)
    values = torch.full((4, 4096), 0xA5, dtype=torch.uint8, device=DEV)
    scales = torch.full((4, 128), 0xA5, dtype=torch.uint8, device=DEV)
    expect_error(tally, "unknown entry", lambda: bundle.quantize("mx", x), "NOT_FOUND",
                 "no entry 'mx'")
    expect_error(tally, "f32 input for a bf16 entry", lambda: bundle.quantize(mx.name, x.float()),
                 bad, "input is torch.float32, expected torch.bfloat16")
    expect_error(tally, "f16 input", lambda: bundle.quantize(act.name, torch.zeros(
        2, 7168, dtype=torch.float16, device=DEV)), bad, "expected torch.bfloat16")
    expect_error(tally, "values of another element type",
                 lambda: bundle.quantize(mx.name, x, values.view(torch.float8_e5m2)), bad,
                 "values is torch.float8_e5m2, expected torch.float8_e4m3fn or torch.uint8")
    expect_error(tally, "columns other than the entry's",
                 lambda: bundle.quantize(act.name, torch.zeros(4, 7040, dtype=torch.bfloat16,
                                                               device=DEV)),
                 bad, "input is (4, 7040), expected (4, 7168)")
    expect_error(tally, "rows other than the entry's",
                 lambda: bundle.quantize("w2d_e4m3_bf16", torch.zeros(384, 384, dtype=torch.bfloat16,
                                                                     device=DEV)),
                 bad, "input is (384, 384), expected (512, 384)")
    expect_error(tally, "experts other than the entry's",
                 lambda: bundle.quantize(w.name, torch.zeros(7, 256, 512, dtype=torch.bfloat16,
                                                             device=DEV)),
                 bad, "input is (7, 256, 512), expected (8, 256, 512)")
    expect_error(tally, "a 2-D input for a 3-D entry",
                 lambda: bundle.quantize(w.name, torch.zeros(256, 512, dtype=torch.bfloat16,
                                                             device=DEV)),
                 bad, "input is (256, 512), expected 3 dims")
    # No rows (R = 0, an empty batch): a no-op with empty outputs.
    try:
        empty_values, empty_scales = bundle.quantize(mx.name, x[:0])
        torch.cuda.synchronize()
        tally.report(empty_values.shape[0] == 0 and empty_scales.shape[0] == 0,
                     "no rows: a no-op with empty outputs",
                     f"{tuple(empty_values.shape)}, {tuple(empty_scales.shape)}")
    except Exception as error:
        tally.report(False, "no rows: a no-op with empty outputs",
                     f"{type(error).__name__}: {error}")
    # Pointers through the C API (torch cannot make misaligned f32 tensors).
    lib, handle = moe_mlir.runtime._library(), bundle._live_handle()

    def launch(entry, pointers, rows):
        sizes = (ctypes.c_int64 * 1)(rows)
        ptrs = (ctypes.c_uint64 * 3)(*pointers)
        args = moe_mlir.runtime._LaunchArgs(sizes, len(bundle.signature(entry).sizes), 3, ptrs, 0, 0)
        status = lib.moeLaunch(handle, entry.encode(), ctypes.byref(args), None)
        return status, lib.moeLastErrorMessage().decode()

    base_x, base_v, base_s = x.data_ptr(), values.data_ptr(), scales.data_ptr()
    for what, pointers, needle in [
            ("NULL input", (0, base_v, base_s), "input pointer is NULL"),
            ("NULL values", (base_x, 0, base_s), "values pointer is NULL"),
            ("NULL scales", (base_x, base_v, 0), "scales pointer is NULL"),
            ("misaligned input", (base_x + 8, base_v, base_s),
             f"input pointer {base_x + 8:#x} is not 16-byte aligned"),
            ("misaligned values", (base_x, base_v + 8, base_s),
             f"values pointer {base_v + 8:#x} is not 16-byte aligned"),
            ("values overlapping the input", (base_x, base_x + 16, base_s),
             "values overlaps input")]:
        status, message = launch(mx.name, pointers, 4)
        tally.report(status == 1 and needle in message, f"error: {what}", message)
    act_scales = torch.full((4, 56), 7, dtype=torch.float32, device=DEV)
    act_x = torch.zeros(4, 7168, dtype=torch.bfloat16, device=DEV)
    act_values = torch.zeros(4, 7168, dtype=torch.uint8, device=DEV)
    status, message = launch(act.name, (act_x.data_ptr(), act_values.data_ptr(),
                                        act_scales.data_ptr() + 2), 4)
    tally.report(status == 1 and f"scales pointer {act_scales.data_ptr() + 2:#x} is not "
                 "4-byte aligned" in message, "error: misaligned f32 scales", message)
    torch.cuda.synchronize()
    untouched = bool((values == 0xA5).all()) and bool((scales == 0xA5).all()) and bool(
        (act_scales == 7).all())
    tally.report(untouched, "refused calls wrote nothing")


def main():
    tally = Tally()
    path = os.path.join(ARTIFACTS, "quantize.moebundle")
    bundle = moe_mlir.Bundle(path)
    entries = [e for e in bundle.entries if e.abi == "quantize.v1"]
    tally.report(len(entries) >= 16, f"{len(entries)} quantize.v1 entries in {path}")
    # Inputs first, then every reference in parallel (numpy only: forked
    # before CUDA is initialised), then the GPU.
    cases = []
    for seed, entry in enumerate(entries):
        for name, x in cases_of(entry, 1000 + seed):
            cases.append((entry, name, x))
    big = {}
    rng = np.random.default_rng(7)
    mx = bundle.entry("mx_e4m3_bf16")
    big[mx.name] = (representable(lay_out(mx, row_blocks(edge_rows(mx, rng), 32), rng, rows=64),
                                  mx), 2200)
    wx = bundle.entry("w_experts_bf16")
    big[wx.name] = (representable(lay_out(wx, np.zeros((0, 128 * 128)), rng, batch=1), wx), 8200)
    graph_entry = bundle.entry("act_e4m3_bf16")
    graph_inputs = [representable(lay_out(graph_entry, np.zeros((0, 128)), np.random.default_rng(s),
                                          rows=5), graph_entry) for s in (11, 12)]
    jobs = [(entry, x) for entry, _, x in cases]
    jobs += [(bundle.entry(name), x) for name, (x, _) in big.items()]
    jobs += [(graph_entry, x) for x in graph_inputs]
    processes = min(16, os.cpu_count() or 1)
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        refs = references(pool, jobs)
    print(f"references of {len(jobs)} inputs ({sum(x.size for _, x in jobs)} elements) "
          f"computed on {processes} processes", flush=True)

    fakes = {e.name for e in bundle.entries if e.op == "moe.fake_quantize"}
    tally.report(len(fakes) >= 6, f"{len(fakes)} moe.fake_quantize entries in {path}")
    for (entry, name, x), ref in zip(cases, refs):
        check_case(tally, bundle, entry, name, x, ref)
        if "fq_" + entry.name in fakes:
            check_fake_case(tally, bundle, entry, name, x, ref)
    offset = len(cases)
    for i, (name, (x, repeats)) in enumerate(big.items()):
        check_grid_stride(tally, bundle, bundle.entry(name), x, refs[offset + i], repeats)
    offset += len(big)
    check_graph(tally, bundle, graph_entry, (graph_inputs[0], refs[offset]),
                (graph_inputs[1], refs[offset + 1]))
    check_errors(tally, bundle)
    bundle.close()
    return tally.summary()


if __name__ == "__main__":
    run(main)
