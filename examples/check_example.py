"""Recomputes examples/mixtral_tiny.mlir with the numpy reference and compares
it with what mlir-runner printed (relative L2 tolerance 1e-5; the runner
prints 6 significant digits).  Usage: check_example.py RUNNER_OUTPUT"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "lib"))
import moe_ref  # noqa: E402
from mlir_data import parse_memrefs, rel_l2  # noqa: E402


def wave(rows, cols, amp, a, b, c):
    """The example's @wave2d, in f32 like the MLIR code."""
    f = np.float32
    i = np.arange(rows, dtype=f)[:, None]
    j = np.arange(cols, dtype=f)[None, :]
    return (f(amp) * np.sin((f(a) * i + f(b) * j) + f(c))).astype(np.float64)


x = wave(3, 8, 1.0, 0.7, 1.3, 0.1)
logits = wave(3, 4, 2.0, 1.3, 2.3, 0.5)
w13 = wave(64, 8, 0.35, 0.53, 0.71, 0.1).reshape(4, 16, 8)
w2 = wave(32, 8, 0.35, 0.29, 0.5, 0.5).reshape(4, 8, 8)
route = dict(routing="softmax_topk", k=2, renormalize=True)
ref, ids, _ = moe_ref.layer(x, logits, w13, w2, route)

printed = parse_memrefs(open(sys.argv[1]).read())
if len(printed) != 1:
    sys.exit("FAIL: expected one printed tensor, got %d" % len(printed))
err = rel_l2(printed[0], ref)
print("experts chosen per token: %s" % ids.tolist())
print("numpy reference:\n%s" % np.array2string(ref, precision=6, max_line_width=120))
if not err <= 1e-5:
    sys.exit("FAIL: example output differs from the numpy reference: rel L2 %.3g > 1e-5" % err)
print("example output matches the numpy reference: rel L2 %.2g (tolerance 1e-5)" % err)
