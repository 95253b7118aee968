"""Executable backward tests of --moe-generate-backward.

`gen CASE` prints a module holding only `func.func @layer`, the case's layer
(layer_case.py's chain, f32 or bf16) returning its output y (f32). The pass adds
@layer_train (y and the values it saves) and @layer_backward (the saved
values and dy -> the gradient of every differentiable argument, in argument
order). `main CASE FILE` reads the module the pass printed and splices in a
@main that runs train on the case's inputs, passes its saved values and a
seeded dy to backward, and prints y and every gradient (bf16 ones extended
to f32). `check CASE FILE` compares what mlir-runner printed with
moe_ref.layer and moe_grad_ref.layer_backward (on the same, bf16-rounded in
a bf16 case, inputs), and in f32 each gradient with central differences of
the float64 layer, as the PASS/FAIL line says. A shared expert's weights
(sw13, sw2 and the gate sgate) are differentiable arguments like the
others."""
import re
import sys

import numpy as np

import layer_case
import moe_grad_ref
import moe_ref
from mlir_data import bf16_round, parse_memrefs, rel_l2, tensor_type

# Cases: layer_case.py's configurations (same keys), plus `inputs_of`, the
# case whose inputs to use. f32 but for the bf16 cases at the end.
# hot-expert's boost is 4, not 30: a router that saturates to a weight of
# 1 - 1e-13 has a logit gradient of 1e-13, which f32 cannot resolve
# (p * (1 - p) loses 1 / (1 - p) to cancellation); +4 still sends every
# token to it, with p <= 0.97.
# padded has expert biases, so that padding rows compute nonzero values a
# wrong backward could let through. routeless takes ids and weights as
# arguments (ids with a repeat and two dropped slots, as a model's may).
CASES = {name: layer_case.CASES[name] for name in (
    "mixtral", "qwen3", "olmoe", "deepseek", "gptoss", "empty-expert", "k1", "t1", "fused")}
CASES.update({
    "hot-expert": dict(layer_case.CASES["hot-expert"], hot_boost=4.0),
    "padded": dict(layer_case.CASES["padded"], expert_bias=True),
    "layer": dict(T=6, H=8, I=12, E=4, k=2, routing="softmax_topk", renormalize=True,
                  fused=True, layer=True, cold=[3]),
    "routeless": dict(T=6, H=8, I=8, E=4, k=2, routing="none"),
    # The RUN line passes recompute-gate-up=true; the layer is mixtral's.
    "recompute": dict(layer_case.CASES["mixtral"], inputs_of="mixtral"),
})
# The RUN lines pass recompute-rows=true (and one recompute-gate-up=true
# too): mixtral's layer, the routeless one (its ids an argument), the
# padded one (pad_to) and DeepSeek-V3 with its shared expert.
CASES.update({"rows-" + name: dict(CASES[name], inputs_of=name)
              for name in ("mixtral", "routeless", "padded")})
CASES["rows-shared-deepseek"] = dict(layer_case.CASES["shared-deepseek"],
                                     inputs_of="shared-deepseek")
# Shared experts (moe.shared_mlp added by the combine): DeepSeek-V3's
# ungated one beside sigmoid routing, Qwen2-MoE's gated one of width 4I,
# a single token, the fused moe.expert_mlp form (Is = 20, no multiple of
# I = 12) and the whole layer as one moe.layer.
CASES.update({name: layer_case.CASES[name] for name in (
    "shared-deepseek", "shared-qwen2", "shared-t1", "shared-layer")})
CASES.update({
    "shared-fused": dict(T=6, H=8, I=12, E=4, k=2, routing="softmax_topk", renormalize=True,
                         fused=True, shared=20, gated=True, cold=[3]),
})
# bf16, the dtype the GPU trains in: tokens and expert (and shared) weights
# bf16 and bf16-rounded, logits, routing weights, expert biases, y and dy
# f32 (y is the f32 combine's, so dy is f32 too, holding bf16 values). The
# backward's intermediates and the gradients of bf16 arguments are bf16.
# Mixtral-style (layer_case's bf16), GPT-OSS with its clamps reached and
# f32 expert biases (gptoss's inputs, rounded), a gated shared expert
# (layer_case's shared-bf16) and DeepSeek-V3's ungated one (shared-deepseek's
# inputs, rounded).
# GPT-OSS's experts as transformers keeps them (layer_case.native_layout):
# kn_weights matmuls and the interleaved activation, on gptoss's inputs,
# gradients put back into the reference's layout before the checks.
CASES["gptoss-native"] = dict(layer_case.CASES["gptoss"], native=True, inputs_of="gptoss")
CASES.update({
    "bf16": layer_case.CASES["bf16"],
    "gptoss-bf16": dict(layer_case.CASES["gptoss"], dtype="bf16", inputs_of="gptoss"),
    "gptoss-native-bf16": dict(layer_case.CASES["gptoss"], dtype="bf16", native=True,
                               inputs_of="gptoss"),
    "shared-bf16": layer_case.CASES["shared-bf16"],
    "shared-deepseek-bf16": dict(layer_case.CASES["shared-deepseek"], dtype="bf16",
                                 inputs_of="shared-deepseek"),
})

# f32 results against the float64 reference (printing keeps 6 digits), and
# against central differences (along unit directions and coordinates, see
# moe_grad_ref.fd_errors). The reference itself must meet FD_REF.
TOL, FD_TOL, FD_REF = 1e-5, 1e-4, 1e-6
# bf16 results (y and every gradient) against the float64 reference on the
# same bf16-rounded inputs: the bf16 tolerance of layer_case.py. No
# finite differences of bf16 gradients (bf16 noise is 1e3 times FD_TOL);
# the reference they are compared with still meets FD_REF.
BF16_TOL = 1e-2


def is_bf16(c):
    return c.get("dtype") == "bf16"


def inputs(name):
    """The case's f32 inputs keyed by argument name (layer_case.inputs). A
    route-less case routes its logits with softmax_topk to get ids and
    weights, then repeats token 0's first expert in its second slot and
    drops token 1's second slot (-1) and token 3's first (E)."""
    c = CASES[name]
    d = layer_case.inputs(c.get("inputs_of", name), c)
    if c["routing"] == "none":
        ids, w = moe_ref.route(d.pop("logits"), "softmax_topk", c["k"])
        ids[0, 1] = ids[0, 0]
        ids[1, 1] = -1
        ids[3, 0] = c["E"]
        d["ids"], d["w"] = ids.astype(np.int32), w.astype(np.float32)
    return d


def upstream(name):
    """dy, the seeded f32 gradient of the loss with respect to y (of y's
    type, f32); bf16-rounded in a bf16 case, as a bf16 model's would be."""
    c = CASES[name]
    rng = np.random.default_rng(sum(map(ord, "dy " + name)))
    dy = rng.standard_normal((c["T"], c["H"])).astype(np.float32)
    return bf16_round(dy) if is_bf16(c) else dy


def gradient_args(c, d):
    """(name, type) of @layer's differentiable arguments, in order: the
    gradients @layer_backward returns."""
    return [a for a in layer_case.layer_args(c, d) if a[0] in moe_grad_ref.DIFFERENTIABLE]


def gen(name):
    c, d = CASES[name], inputs(name)
    print("\n".join(layer_case.layer_func(c, d, routing_results=False)))

# ------------------------------------------------------------------ main


def _split_top(s):
    """s split at its top-level commas (none inside <>, (), [] or {}; the
    `>` of an arrow closes nothing)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch in "<([{":
            depth += 1
        elif ch in ")]}" or (ch == ">" and s[i - 1] != "-"):
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(s[start:i].strip())
            start = i + 1
    parts.append(s[start:].strip())
    return [p for p in parts if p]


def _closing(s, i):
    """Index of the parenthesis closing the one at s[i]."""
    depth = 0
    for j in range(i, len(s)):
        depth += {"(": 1, ")": -1}.get(s[j], 0)
        if depth == 0:
            return j
    raise ValueError("unbalanced parentheses")


def _first_word(s):
    """s up to its first top-level whitespace: a type without the attribute
    dictionary or location that may follow it."""
    depth = 0
    for i, ch in enumerate(s):
        if ch in "<([{":
            depth += 1
        elif ch in ")]}" or (ch == ">" and s[i - 1] != "-"):
            depth -= 1
        elif ch.isspace() and depth == 0:
            return s[:i]
    return s


def signature(text, fn):
    """(argument types, result types) of `func.func @fn` in printed MLIR."""
    m = re.search(r"func\.func\s+(?:\w+\s+)*@%s\s*\(" % re.escape(fn), text)
    if not m:
        sys.exit("main: no func.func @%s in the module" % fn)
    close = _closing(text, m.end() - 1)
    args = [_first_word(a.split(":", 1)[1].strip()) for a in _split_top(text[m.end():close])]
    rest = text[close + 1:].lstrip()
    if not rest.startswith("->"):
        return args, []
    rest = rest[2:].lstrip()
    if rest.startswith("("):
        results = _split_top(rest[1:_closing(rest, 0)])
    else:
        results = [rest]
    return args, [_first_word(r) for r in results]


def _to_f32(L, out, v, t, T):
    """(value, type) of tensor v of type t as f32, for printMemrefF32: v
    itself if f32, else the exact arith.extf of each element (a
    linalg.generic over v cast to its static shape, T rows where t says ?),
    appending the lines that compute it to L."""
    m = re.fullmatch(r"tensor<((?:[0-9?]+x)*)(\w+)>", t)
    dims, elem = m.group(1).split("x")[:-1], m.group(2)
    if elem == "f32":
        return v, t
    static = "tensor<%sx%s>" % ("x".join(str(T) if n == "?" else n for n in dims), elem)
    wide = static[: -len(elem) - 1] + "f32>"
    if static != t:
        L.append("  %s_s = tensor.cast %s : %s to %s" % (out, v, t, static))
        v = out + "_s"
    ids = ", ".join("d%d" % j for j in range(len(dims)))
    m = "affine_map<(%s) -> (%s)>" % (ids, ids)
    L.append("  %s_e = tensor.empty() : %s" % (out, wide))
    L.append("  %s = linalg.generic {indexing_maps = [%s, %s], iterator_types = [%s]} "
             "ins(%s : %s) outs(%s_e : %s) {" % (out, m, m, ", ".join(['"parallel"'] * len(dims)),
                                                 v, static, out, wide))
    L.append("  ^bb0(%%in: %s, %%unused: f32):" % elem)
    L.append("    %%ext = arith.extf %%in : %s to f32" % elem)
    L.append("    linalg.yield %ext : f32")
    L.append("  } -> %s" % wide)
    return out, wide


def main(name, path):
    """Print the module in `path` with a @main that calls @layer_train on
    the case's inputs and @layer_backward on train's saved values and dy,
    then prints y and each gradient, after checking the two functions'
    signatures against the pass's contract."""
    c, d = CASES[name], inputs(name)
    text = open(path).read()
    args = layer_case.layer_args(c, d)
    grads = gradient_args(c, d)
    y_t = tensor_type([None, c["H"]], "f32")
    train_args, train_results = signature(text, "layer_train")
    bwd_args, bwd_results = signature(text, "layer_backward")
    problems = []
    if train_args != [t for _, t in args]:
        problems.append("@layer_train takes (%s), not @layer's (%s)"
                        % (", ".join(train_args), ", ".join(t for _, t in args)))
    if train_results[:1] != [y_t]:
        problems.append("@layer_train's first result is not y (%s)" % y_t)
    if bwd_args != train_results[1:] + [y_t]:
        problems.append("@layer_backward takes (%s), not train's saved values and dy (%s)"
                        % (", ".join(bwd_args), ", ".join(train_results[1:] + [y_t])))
    if bwd_results != [t for _, t in grads]:
        problems.append("@layer_backward returns (%s), not the gradients of %s (%s)"
                        % (", ".join(bwd_results), ", ".join(n for n, _ in grads),
                           ", ".join(t for _, t in grads)))
    if problems:
        sys.exit("main %s: %s" % (name, "; ".join(problems)))
    L = ["func.func @main() {"]
    lines, names = layer_case.constants(c, layer_case.native_layout(d) if c.get("native") else d,
                                        args)
    L += lines
    # dy has y's type, f32 in every case (bf16 cases hold bf16 values in it).
    lines, dy_name = layer_case.constants(dict(c, dtype="f32"), dict(dy=upstream(name)),
                                          [("dy", y_t)])
    L += lines
    names += dy_name
    n, m = len(train_results), len(bwd_results)
    L.append("  %%train:%d = func.call @layer_train(%s) : (%s) -> (%s)"
             % (n, ", ".join(names[:-1]), ", ".join(train_args), ", ".join(train_results)))
    saved = ["%%train#%d" % i for i in range(1, n)]
    L.append("  %%grad:%d = func.call @layer_backward(%s) : (%s) -> (%s)"
             % (m, ", ".join(saved + names[-1:]), ", ".join(bwd_args), ", ".join(bwd_results)))
    printed = [("%train#0", y_t)] + [("%%grad#%d" % i, t) for i, t in enumerate(bwd_results)]
    for i, (v, t) in enumerate(printed):
        v, t = _to_f32(L, "%%wide%d" % i, v, t, c["T"])
        L.append("  %%print%d = tensor.cast %s : %s to tensor<*xf32>" % (i, v, t))
        L.append("  func.call @printMemrefF32(%%print%d) : (tensor<*xf32>) -> ()" % i)
    L.append("  return")
    L.append("}")
    if not re.search(r"@printMemrefF32\b", text):
        L.insert(0, "func.func private @printMemrefF32(tensor<*xf32>)")
    # Before the module's closing brace, which comes before any resource
    # section (`{-# ... #-}`) the printer appends.
    resources = text.find("\n{-#")
    module, tail = (text, "") if resources < 0 else (text[:resources], text[resources:])
    end = module.rstrip().rfind("}")
    print(module[:end] + "\n".join("  " + line for line in L) + "\n}" + tail)

# ----------------------------------------------------------------- check


def _guards(name, c, p, f, g, route_kw):
    """Reasons the case could not fail, or does not exercise what it is
    named for (an empty list when it does): a zero dy or gradient, a cold
    expert that got rows, a GPT-OSS clamp never reached or too weak or
    close for the tolerance (_clamp_guards), group limiting or
    a correction bias that changes no choice, a hot expert some token
    missed, pad_to without padding rows, a route-less case without a
    repeated or dropped id, logits of a softmax over all E that get no
    gradient. (A weak shared expert: moe_grad_ref.shared_guards, in check.)"""
    ids, E, I, k = f["ids"], c["E"], c["I"], c["k"]
    out = []
    if not (upstream(name) != 0).all():
        out.append("dy has zeros")
    for arg, grad in g.items():
        if not np.linalg.norm(grad) > 0:
            out.append("the reference's d%s is zero" % arg)
    for cold in c.get("cold", []):
        if (ids == cold).any():
            out.append("cold expert %d got tokens" % cold)
    if c.get("activation") == "gptoss":
        live = f["gu"][: f["offsets"][-1]]
        if not ((live[:, :I] > 7).any() and (np.abs(live[:, I:]) > 7).any()):
            out.append("inputs never reach the GPT-OSS clamp")
        out += _clamp_guards(c, p, f, g, upstream(name).astype(np.float64))
    if c.get("groups"):
        free, _ = moe_ref.route(p["logits"], **dict(route_kw, groups=None, top_groups=None))
        if np.array_equal(np.sort(free, 1), np.sort(ids, 1)):
            out.append("group limiting changes no token's choice")
    if route_kw is not None and route_kw.get("bias") is not None:
        unbiased, _ = moe_ref.route(p["logits"], **dict(route_kw, bias=None))
        if np.array_equal(np.sort(unbiased, 1), np.sort(ids, 1)):
            out.append("the correction bias changes no token's choice")
    if "hot" in c and not (ids == c["hot"]).any(axis=1).all():
        out.append("a token missed the hot expert")
    counts = np.array([(ids == e).sum() for e in range(E)])
    if c.get("pad_to", 1) > 1 and not (counts % c["pad_to"]).any():
        out.append("no expert has padding rows")
    if c["routing"] == "none":
        valid = (ids >= 0) & (ids < E)
        repeats = any(len(set(row[ok])) < ok.sum() for row, ok in zip(ids, valid))
        if not repeats or valid.all():
            out.append("the ids repeat no expert within a token or drop none")
    elif c["routing"] == "softmax_topk" and not c.get("renormalize") and k < E:
        if not (g["logits"] != 0).all():
            out.append("a logit of the softmax over all E gets no gradient")
    return out


def _clamp_guards(c, p, f, g, dy):
    """Reasons a GPT-OSS case's clamps are not checked at its tolerance: the
    clamps' zeroing of the activation's gradient must change dx, dw13 and
    db13 by 10 times the tolerance (a backward passing the gradient where
    they clamp must fail), and in bf16 no gate value may lie within 2 bf16
    ulps (2 * 2^-5) of the limit 7, nor an up value of -7 or 7, where
    rounding the rows' GEMM to bf16 could clamp a value the float64
    reference does not (or the reverse)."""
    out, I, tol = [], c["I"], BF16_TOL if is_bf16(c) else TOL
    gu = f["gu"]
    do, _ = moe_grad_ref.unpermute_backward(dy, f["o"], f["slots"], f["w"])
    dh, _, _ = moe_grad_ref.grouped_matmul_backward(do, f["h"], p["w2"], f["offsets"], False)
    # The activation's derivative at the clamped values, without the masks.
    clamped = np.concatenate([np.minimum(gu[:, :I], 7.0), np.clip(gu[:, I:], -7.0, 7.0)], 1)
    unmasked = moe_grad_ref.swiglu_backward(dh, clamped, "gptoss", limit=np.inf)
    masked = moe_grad_ref.swiglu_backward(dh, gu, "gptoss")
    drows, dw13, db13 = moe_grad_ref.grouped_matmul_backward(unmasked - masked, f["rows"],
                                                             p["w13"], f["offsets"], True)
    change = dict(x=moe_grad_ref.permute_backward(drows, f["slots"], c["T"]), w13=dw13, b13=db13)
    for arg, delta in change.items():
        if arg in g and not np.linalg.norm(delta) >= 10 * tol * np.linalg.norm(g[arg]):
            out.append("the clamps change d%s by only %.3g" % (
                arg, np.linalg.norm(delta) / np.linalg.norm(g[arg])))
    if is_bf16(c):
        live = gu[: f["offsets"][-1]]
        near = min(np.abs(live[:, :I] - 7.0).min(), np.abs(np.abs(live[:, I:]) - 7.0).min())
        if not near > 2 * 2.0 ** -5:
            out.append("a gate-up value is %.3g from the clamp, within bf16 rounding" % near)
    return out


def _exact_zeros(c, f, got):
    """What the compiled gradients hold where they must be exactly zero:
    the weight and bias rows of experts without rows, the routing weight of
    a dropped slot."""
    out = []
    for e in range(c["E"]):
        if not (f["ids"] == e).any():
            for arg in ("w13", "w2", "b13", "b2"):
                if arg in got and got[arg][e].any():
                    out.append("d%s[%d] of an expert without rows is not zero" % (arg, e))
    if "w" in got:
        dropped = (f["ids"] < 0) | (f["ids"] >= c["E"])
        if got["w"][dropped].any():
            out.append("dw of a dropped slot is not zero")
    return out


def check(name, path):
    c, d = CASES[name], inputs(name)
    p = {key: (v if key == "ids" else v.astype(np.float64)) for key, v in d.items()}
    route_kw = None if c["routing"] == "none" else layer_case.route_kw(c, p)
    kw = dict(activation=c.get("activation", "silu"), pad_to=c.get("pad_to", 1))
    dy = upstream(name).astype(np.float64)
    f = moe_grad_ref.forward_parts(p, route_kw, **kw)
    if route_kw is not None:
        y_ref, _, _ = moe_ref.layer(p["x"], p["logits"], p["w13"], p["w2"], route_kw,
                                    kw["activation"], p.get("b13"), p.get("b2"), kw["pad_to"],
                                    shared=moe_grad_ref.shared_of(p))
        assert rel_l2(f["y"], y_ref) < 1e-12, "forward_parts and moe_ref.layer disagree"
    g_ref = moe_grad_ref.layer_backward(p, dy, route_kw, **kw)
    reasons = _guards(name, c, p, f, g_ref, route_kw)
    # A shared expert, and its gate, must change y by 10%, and the shared
    # path's part of dx (and the gate logit's term in it) be 1% of dx (10%
    # in bf16), far past the tolerance: else a backward that dropped them
    # could pass.
    reasons += moe_grad_ref.shared_guards(p, dy, route_kw, dx_min=0.1 if is_bf16(c) else 1e-2,
                                          **kw)
    assert not reasons, "%s cannot fail as it stands: %s" % (name, "; ".join(reasons))
    probes = moe_grad_ref.finite_differences(p, dy, route_kw, seed=sum(map(ord, name)), **kw)
    for arg, errs in moe_grad_ref.fd_errors(probes, g_ref).items():
        assert max(errs) <= FD_REF, "the reference's d%s is %.3g from FD" % (arg, max(errs))

    bf16 = is_bf16(c)
    tol = BF16_TOL if bf16 else TOL
    grads = [a for a, _ in gradient_args(c, d)]
    printed = parse_memrefs(open(path).read())
    if len(printed) != 1 + len(grads):
        sys.exit("FAIL %s: expected %d printed tensors (y, d%s), got %d"
                 % (name, 1 + len(grads), ", d".join(grads), len(printed)))
    failures = []
    y_err = rel_l2(printed[0], f["y"])
    if not y_err <= tol:
        failures.append("y rel L2 %.3g > %.g" % (y_err, tol))
    got, errs, worst, fd_worst = {}, {}, (0.0, None), (0.0, None)
    for arg, flat in zip(grads, printed[1:]):
        if flat.size != g_ref[arg].size:
            failures.append("d%s has %d elements, not %d" % (arg, flat.size, g_ref[arg].size))
            continue
        if c.get("native"):
            flat = layer_case.from_native(arg, flat, c)
        got[arg] = flat.reshape(g_ref[arg].shape)
        errs[arg] = rel_l2(got[arg], g_ref[arg])
        worst = max(worst, (errs[arg], arg))
        if not errs[arg] <= tol:
            failures.append("d%s rel L2 %.3g > %.g" % (arg, errs[arg], tol))
    if not bf16:
        for arg, fd in moe_grad_ref.fd_errors({a: probes[a] for a in got}, got).items():
            fd_worst = max(fd_worst, (max(fd), arg))
            if not max(fd) <= FD_TOL:
                failures.append("d%s is %.3g from finite differences > %.g"
                                % (arg, max(fd), FD_TOL))
    failures += _exact_zeros(c, f, got)
    if failures:
        sys.exit("FAIL %s: %s" % (name, "; ".join(failures)))
    if bf16:
        print("PASS %s: y rel L2 %.3g; gradients rel L2 %s (tolerance %.g)"
              % (name, y_err, ", ".join("d%s %.3g" % a for a in errs.items()), tol))
        return
    print("PASS %s: y rel L2 %.3g; gradients rel L2 <= %.3g (d%s); finite differences <= %.3g "
          "(d%s) (tolerances %.g, %.g)"
          % (name, y_err, worst[0], worst[1], fd_worst[0], fd_worst[1], TOL, FD_TOL))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "gen":
        gen(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] in ("main", "check"):
        {"main": main, "check": check}[sys.argv[1]](sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: backward_case.py gen CASE | main CASE PASS_OUTPUT "
                 "| check CASE RUNNER_OUTPUT")
