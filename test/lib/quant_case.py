"""Executable quantization tests: `gen CASE` writes an MLIR program that runs
moe.quantize and moe.dequantize on edge-case inputs and prints every code,
scale and dequantized value as raw bits; `check CASE FILE` requires them to
be bit-identical to the numpy reference (moe_ref.py), NaN payloads aside."""
import sys

import numpy as np

import moe_ref
from mlir_data import run_cli, bf16_round, literal, parse_memrefs, tensor_type


def edge_rows(fmt, n=32):
    """Blocks of 32 that each hit one OCP MX rule."""
    rng = np.random.default_rng(7)
    mx = moe_ref.fp8_max(fmt)
    rows = []
    rows.append(np.zeros(n))                                   # all-zero block
    rows.append(rng.standard_normal(n))                        # ordinary
    rows.append(rng.standard_normal(n) * 1e-40)                # f32 subnormals
    r = rng.standard_normal(n) * 100; r[3] = 500.0; r[4] = -470.0
    rows.append(r)                                             # saturates at 448
    r = rng.standard_normal(n) * 1e37; r[0] = 3.0e38; r[1] = -3.4028235e38
    rows.append(r)                                             # largest exponents
    r = rng.standard_normal(n); r[5] = np.nan
    rows.append(r)                                             # NaN
    r = rng.standard_normal(n); r[6] = -np.inf
    rows.append(r)                                             # infinity
    # Ties between neighbouring codes (scale 1 once amax sits in [256, 512)
    # for e4m3): 1.0625 sits halfway between 1 and 1.125, and so on; -0.0.
    table = moe_ref.fp8_table(fmt)
    pos = np.sort(table[:128][np.isfinite(table[:128])])
    mids = (pos[:-1] + pos[1:]) / 2
    # Pairs of neighbouring midpoints: one rounds up to its even code, the
    # next down, so rounding half up or half down cannot pass.
    step = max(2, 2 * (len(mids) // (n - 2)))
    pick = [j for b in range(0, len(mids) - 1, step) for j in (b, b + 1)][: n - 2]
    r = np.concatenate([mids[pick], [-0.0, mx]])
    rows.append(r)                                             # ties to even
    r = rng.standard_normal(n) * 2.0 ** -12                   # elements land subnormal
    r[0] = 1.0
    rows.append(r)
    return np.array(rows, dtype=np.float32)


CASES = {
    "mx-e4m3-edges": dict(fmt="f8E4M3FN", block=[1, 32], scale="f8E8M0FNU",
                          data=lambda: edge_rows("f8E4M3FN")),
    "mx-e5m2-edges": dict(fmt="f8E5M2", block=[1, 32], scale="f8E8M0FNU",
                          data=lambda: edge_rows("f8E5M2")),
    "mx-e4m3-3d": dict(fmt="f8E4M3FN", block=[1, 32], scale="f8E8M0FNU",
                       data=lambda: (np.random.default_rng(1).standard_normal((2, 4, 64))
                                     * 2.0 ** np.random.default_rng(2).integers(-20, 20, (2, 4, 1))
                                     ).astype(np.float32)),
    "mx-e4m3-bf16": dict(fmt="f8E4M3FN", block=[1, 32], scale="f8E8M0FNU", dtype="bf16",
                         data=lambda: bf16_round(np.random.default_rng(3).standard_normal((3, 64)) * 40)),
    "block-e4m3-edges": dict(fmt="f8E4M3FN", block=[1, 32], scale="f32",
                             data=lambda: edge_rows("f8E4M3FN")),
    "block-e5m2-edges": dict(fmt="f8E5M2", block=[1, 32], scale="f32",
                             data=lambda: edge_rows("f8E5M2")),
    "block-weights-128x128": dict(fmt="f8E4M3FN", block=[128, 128], scale="f32",
                                  data=lambda: _weights()),
    "block-act-dynamic": dict(fmt="f8E4M3FN", block=[1, 128], scale="f32", dynamic=True,
                              data=lambda: (np.random.default_rng(5).standard_normal((3, 256)) * 3
                                            ).astype(np.float32)),
}


def _weights():
    w = np.random.default_rng(4).standard_normal((2, 256, 128)).astype(np.float32) * 0.02
    w[1, :128, :] = 0.0          # one all-zero block
    w[0, 200, 17] = 9.0          # one outlier dominating its block
    return w


def _map(rank):
    d = ", ".join("d%d" % i for i in range(rank))
    return "affine_map<(%s) -> (%s)>" % (d, d)


def _to_bits(L, name, ty_in, elem_in, shape, kind):
    """Emit a generic turning tensor %name into i32 bits (codes or f32 bits)."""
    rank = len(shape)
    out_t = tensor_type(shape, "i32")
    dyn = [i for i, s in enumerate(shape) if s is None]
    sizes = []
    for i in dyn:
        L.append("  %%%s_d%d = tensor.dim %%%s, %%c%d : %s" % (name, i, name, i, ty_in))
        sizes.append("%%%s_d%d" % (name, i))
    L.append("  %%%s_e = tensor.empty(%s) : %s" % (name, ", ".join(sizes), out_t))
    L.append("  %%%s_bits = linalg.generic {indexing_maps = [%s, %s], iterator_types = [%s]}"
             " ins(%%%s : %s) outs(%%%s_e : %s) {" % (name, _map(rank), _map(rank),
                                                     ", ".join(['"parallel"'] * rank), name, ty_in, name, out_t))
    L.append("  ^bb0(%%a: %s, %%o: i32):" % elem_in)
    if kind == "code":
        L.append("    %%b = arith.bitcast %%a : %s to i8" % elem_in)
        L.append("    %z = arith.extui %b : i8 to i32")
    else:
        L.append("    %z = arith.bitcast %a : f32 to i32")
    L.append("    linalg.yield %z : i32")
    L.append("  } -> %s" % out_t)
    L.append("  %%%s_u = tensor.cast %%%s_bits : %s to tensor<*xi32>" % (name, name, out_t))
    L.append("  call @printMemrefI32(%%%s_u) : (tensor<*xi32>) -> ()" % name)


def gen(name):
    c = CASES[name]
    x = c["data"]()
    dt = c.get("dtype", "f32")
    enc = "<%s, [%s], %s>" % (c["fmt"], ", ".join(map(str, c["block"])), c["scale"])
    shape = list(x.shape)
    block = [1] * (len(shape) - len(c["block"])) + c["block"]
    sshape = [s // b for s, b in zip(shape, block)]
    if c.get("dynamic"):
        shape[0] = sshape[0] = None
    in_t, q_t = tensor_type(shape, dt), tensor_type(shape, c["fmt"])
    s_t, r_t = tensor_type(sshape, c["scale"]), tensor_type(shape, "f32")
    L = ["func.func private @printMemrefI32(tensor<*xi32>)", "func.func @main() {",
         "  %c0 = arith.constant 0 : index"]
    static = tensor_type(x.shape, dt)
    L.append("  %%x_c = arith.constant %s : %s" % (literal(x, dt), static))
    L.append("  %%x = tensor.cast %%x_c : %s to %s" % (static, in_t))
    L.append("  %%q, %%s = moe.quantize %%x to %s : %s -> %s, %s" % (enc, in_t, q_t, s_t))
    L.append("  %%r = moe.dequantize %%q, %%s from %s : %s, %s -> %s" % (enc, q_t, s_t, r_t))
    _to_bits(L, "q", q_t, c["fmt"], shape, "code")
    if c["scale"] == "f32":
        _to_bits(L, "s", s_t, "f32", sshape, "f32")
    else:
        _to_bits(L, "s", s_t, c["scale"], sshape, "code")
    _to_bits(L, "r", r_t, "f32", shape, "f32")
    L += ["  return", "}"]
    print("\n".join(L))


def _bits_equal(got, want_f32):
    """Exact f32 bit equality, any NaN matching any NaN."""
    want = np.asarray(want_f32, dtype=np.float32).ravel()
    got_f = got.astype(np.int64).astype(np.uint32).view(np.float32)
    both_nan = np.isnan(got_f) & np.isnan(want)
    same = got.astype(np.int64).astype(np.uint32) == want.view(np.uint32)
    return np.all(same | both_nan)


def check(name, path):
    c = CASES[name]
    x = c["data"]()
    codes, scales = moe_ref.quantize(x, c["fmt"], c["block"], c["scale"])
    deq = moe_ref.dequantize(codes, scales, c["fmt"], c["block"], c["scale"])
    printed = parse_memrefs(open(path).read())
    if len(printed) != 3:
        sys.exit("FAIL %s: expected 3 printed tensors, got %d" % (name, len(printed)))
    q, s, r = printed
    failures = []
    bad = np.flatnonzero(q.astype(np.int64) != codes.ravel())
    if bad.size:
        i = bad[0]
        failures.append("%d codes differ, first at flat index %d: %#x vs reference %#x (input %r)"
                        % (bad.size, i, int(q[i]), codes.ravel()[i], x.ravel()[i]))
    if c["scale"] == "f32":
        if not _bits_equal(s, scales):
            failures.append("f32 scales differ: %s vs %s" % (s.astype(np.int64).astype(np.uint32).view(np.float32), scales.ravel()))
    elif not np.array_equal(s.astype(np.int64), scales.ravel().astype(np.int64)):
        failures.append("E8M0 scale codes differ: %s vs %s" % (s.astype(np.int64), scales.ravel()))
    if not _bits_equal(r, deq):
        failures.append("dequantized values differ")
    if failures:
        sys.exit("FAIL %s: %s" % (name, "; ".join(failures)))
    print("PASS %s: %d codes, %d scales bit-exact" % (name, q.size, s.size))


if __name__ == "__main__":
    run_cli(gen, check, "quant_case.py")
