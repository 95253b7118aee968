"""Helpers for generated executable tests: exact tensor literals in MLIR and
parsing of what mlir-runner's printMemref prints."""
import re

import numpy as np

_NUM = re.compile(r"[-+]?(?:nan|inf|\d+\.?\d*(?:[eE][-+]?\d+)?)")


def bf16_round(x):
    """float32 -> nearest bfloat16 (ties to even), returned as float32."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(np.float32)


def literal(x, dtype):
    """An exact `dense<"0x...">` literal of numpy array x as MLIR `dtype`."""
    x = np.ascontiguousarray(x)
    if dtype == "f32":
        raw = x.astype("<f4").tobytes()
    elif dtype == "bf16":
        raw = (np.asarray(x, dtype=np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
    elif dtype in ("i32", "i64"):
        raw = x.astype("<i4" if dtype == "i32" else "<i8").tobytes()
    else:
        raise ValueError(dtype)
    return 'dense<"0x%s">' % raw.hex().upper()


def tensor_type(shape, dtype):
    return "tensor<%sx%s>" % ("x".join("?" if d is None else str(d) for d in shape), dtype)


def parse_memrefs(text):
    """Every printed memref's data, as flat float64 arrays, in print order."""
    out = []
    for chunk in text.split("Unranked Memref")[1:]:
        data = chunk.split("data =", 1)[1]
        vals = [float(v) for v in _NUM.findall(data)]
        out.append(np.array(vals, dtype=np.float64))
    return out


def rel_l2(out, ref):
    ref = np.asarray(ref, dtype=np.float64).ravel()
    out = np.asarray(out, dtype=np.float64).ravel()
    if out.shape != ref.shape:
        return np.inf
    denom = np.linalg.norm(ref)
    return np.linalg.norm(out - ref) / (denom if denom > 0 else 1.0)


def run_cli(gen, check, script):
    """`SCRIPT gen CASE` prints the test program; `SCRIPT check CASE FILE`
    compares what the runner printed with the reference."""
    import sys
    if len(sys.argv) == 3 and sys.argv[1] == "gen":
        gen(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: %s gen CASE | check CASE RUNNER_OUTPUT" % script)
