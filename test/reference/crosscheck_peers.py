"""Cross-checks the numpy reference (test/lib/moe_ref.py) against the team's
torch reference, `reference` in shared/bench/peers.py (itself checked against
the Hugging Face modules), on the same float64 inputs for every model it
knows, including T = 1, k = 1 and an expert that gets no tokens.

Needs torch (the lent H200 machine has it; CPU torch works too):
    python3 test/reference/crosscheck_peers.py [path/to/peers.py]
Prints one line per case and `N passed, N failed`; exits non-zero on failure.
"""
import importlib.util
import os
import sys

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "lib"))
import moe_ref  # noqa: E402

root = os.path.join(here, "..", "..")
default = [os.path.join(root, ".shared-bench", "peers.py"),
           os.path.join(root, "..", "shared", "bench", "peers.py")]
path = sys.argv[1] if len(sys.argv) > 1 else next(p for p in default if os.path.exists(p))
spec = importlib.util.spec_from_file_location("peers", path)
peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peers)

# (model, T, H, I, E, k override or None, experts forced cold)
CASES = [
    ("mixtral-8x7b", 17, 32, 48, 8, None, []),
    ("qwen3-30b-a3b", 9, 16, 24, 32, None, [5]),
    ("olmoe-1b-7b", 11, 16, 16, 16, None, []),
    ("deepseek-v3", 13, 24, 16, 64, None, [3]),
    ("gpt-oss-120b", 7, 24, 16, 16, None, []),   # H != I catches a missing transpose
    ("mixtral-8x7b", 1, 32, 48, 8, None, []),
    ("qwen3-30b-a3b", 6, 16, 24, 32, 1, []),
]


def numpy_route_kw(model, k, E):
    m = peers.MODELS[model]
    kw = dict(k=k, renormalize=m.get("renorm", False), scale=m.get("scale"))
    if m["routing"] == "softmax":
        kw["routing"] = "softmax_topk"
    elif m["routing"] == "topk_softmax":
        kw["routing"] = "topk_softmax"
    else:
        kw.update(routing="sigmoid_topk", groups=m["n_group"], top_groups=m["topk_group"])
    return kw


passed = failed = 0
for i, (model, T, H, I, E, k, cold) in enumerate(CASES):
    g = torch.Generator().manual_seed(1000 + i)
    x = torch.randn(T, H, generator=g, dtype=torch.float64)
    logits = torch.randn(T, E, generator=g, dtype=torch.float64)
    for e in cold:
        logits[:, e] = -30.0
    w13 = torch.randn(E, 2 * I, H, generator=g, dtype=torch.float64) * H ** -0.5 * 3
    w2 = torch.randn(E, H, I, generator=g, dtype=torch.float64) * I ** -0.5
    has_bias = peers.MODELS[model].get("bias")
    b13 = torch.randn(E, 2 * I, generator=g, dtype=torch.float64) if has_bias else None
    b2 = torch.randn(E, H, generator=g, dtype=torch.float64) if has_bias else None
    sbias = torch.randn(E, generator=g, dtype=torch.float64) * 0.3 if model == "deepseek-v3" else None
    kk = k or peers.SHAPES[model][3]
    want = peers.reference(model, x, logits, w13, w2, b13, b2, score_bias=sbias, k=kk).numpy()
    kw = numpy_route_kw(model, kk, E)
    kw["bias"] = sbias.numpy() if sbias is not None else None
    act = "gptoss" if peers.MODELS[model].get("act") == "gptoss" else "silu"
    got, ids, _ = moe_ref.layer(x.numpy(), logits.numpy(), w13.numpy(), w2.numpy(), kw, act,
                                None if b13 is None else b13.numpy(), None if b2 is None else b2.numpy())
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    _, want_ids = peers.route_model(model, logits, kk, sbias)
    same_ids = np.array_equal(np.sort(ids, 1), np.sort(want_ids.numpy(), 1))
    # `reference` routes in f32 (logits.float()), the rest in f64: agreement
    # is to f32 rounding of the routing weights.
    ok = err <= 1e-6 and same_ids and not any((ids == e).any() for e in cold)
    passed += ok
    failed += not ok
    print("%s %-14s T=%-3d k=%d rel L2 %.2e, expert ids %s" % ("PASS" if ok else "FAIL", model, T, kk, err,
                                                          "equal" if same_ids else "DIFFER"))
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
