"""Independent numpy (float64) backward of the moe dialect's forward ops.

Each forward op of moe_ref.py gets its adjoint here, written from the math
op by op (no autodiff, nothing shared with the compiler's backward pass);
`layer_backward` chains them into the gradients of a whole layer for the
loss L = sum(dy * y). `finite_differences` and `fd_errors` check any set of
gradients (this file's, or what a compiled backward printed) against central
differences of moe_ref.layer in float64; `python3 moe_grad_ref.py` checks
layer_backward that way over many configurations.

Parameters travel as a dict p keyed by the layer's argument names (those of
layer_case.layer_args): x [T,H], w13 [E,2I,H], w2 [E,H,I], optionally b13
[E,2I] and b2 [E,H], and either logits [T,E] (routed by route_kw, the
keywords of moe_ref.route) or, route-less (route_kw None), ids [T,k] and the
routing weights w [T,k]; optionally a shared expert added to the combine
(moe.shared_mlp of x): sw13 [2Is,H], sw2 [H,Is] and, gated, sgate [1,H].
Gradients come back as a dict with the same keys.

What has a gradient: the routing choice is piecewise constant, so ids, the
correction bias of sigmoid_topk (it only biases the choice) and group
selection get none; the logits get theirs only through the chosen experts'
weights. Where GPT-OSS's clamp is active the gradient is zero. Padding rows
and dropped ids (outside [0, E)) contribute nothing.
"""
import itertools
import sys

import numpy as np

import moe_ref

# Arguments with a gradient, in the order the layer takes them.
DIFFERENTIABLE = ("x", "logits", "w", "w13", "w2", "b13", "b2", "sw13", "sw2", "sgate")

# --------------------------------------------------------- op adjoints


def unpermute_backward(dy, rows, slots, weights):
    """Adjoint of y[t] = sum_j weights[t,j] * rows[slots[t,j]].

    Returns (drows [M,H], dweights [T,k]): a slot's row gets its token's dy
    scaled by the weight, and the weight gets dy[t] . rows[slot]. A slot
    outside [0, M) (a dropped id) takes part in neither."""
    drows = np.zeros_like(rows)
    dweights = np.zeros(slots.shape)
    for (t, j), s in np.ndenumerate(slots):
        if 0 <= s < rows.shape[0]:
            drows[s] += weights[t, j] * dy[t]
            dweights[t, j] = dy[t] @ rows[s]
    return drows, dweights


def grouped_matmul_backward(dout, rows, w, offsets, with_bias):
    """Adjoint of out[r] = rows[r] @ w[e].T + bias[e] over expert e's rows
    offsets[e] <= r < offsets[e+1].

    Returns (drows, dw, dbias or None): the data gradient dout @ w[e] per
    row, the weight gradient dout[rows].T @ rows[rows] summed over the
    expert's rows (zero for an expert without rows) and the bias gradient,
    the column sums of dout over them. Rows outside every range get zero."""
    drows = np.zeros_like(rows)
    dw = np.zeros_like(w)
    dbias = np.zeros(w.shape[:2]) if with_bias else None
    for e in range(w.shape[0]):
        lo, hi = offsets[e], offsets[e + 1]
        drows[lo:hi] = dout[lo:hi] @ w[e]
        dw[e] = dout[lo:hi].T @ rows[lo:hi]
        if with_bias:
            dbias[e] = dout[lo:hi].sum(axis=0)
    return drows, dw, dbias


def swiglu_backward(dh, gu, activation="silu", alpha=1.702, limit=7.0):
    """Adjoint of moe_ref.swiglu on gu = [gate | up] -> dgu [M, 2I].

    silu: h = gate * s * up with s = sigmoid(gate), so
      dh/dgate = up * (s + gate * s * (1 - s)),  dh/dup = gate * s.
    gptoss: g = min(gate, limit), u = clip(up, -limit, limit),
      h = (u + 1) * g * s with s = sigmoid(alpha * g), so
      dh/dg = (u + 1) * (s + alpha * g * s * (1 - s)),  dh/du = g * s,
    times the clamps' derivatives: 1 where gate < limit (resp. |up| <
    limit), 0 where the clamp is active."""
    I = gu.shape[1] // 2
    gate, up = gu[:, :I], gu[:, I:]
    if activation == "silu":
        s = moe_ref._sigmoid(gate)
        dgate = dh * up * (s + gate * s * (1.0 - s))
        dup = dh * gate * s
    else:
        g = np.minimum(gate, limit)
        u = np.clip(up, -limit, limit)
        s = moe_ref._sigmoid(alpha * g)
        dgate = dh * (u + 1.0) * (s + alpha * g * s * (1.0 - s)) * (gate < limit)
        dup = dh * g * s * (np.abs(up) < limit)
    return np.concatenate([dgate, dup], axis=1)


def permute_backward(drows, slots, T):
    """Adjoint of moe.permute's row copy: token t's gradient is the sum of
    its k rows' gradients (padding rows and dropped slots belong to no
    token)."""
    dx = np.zeros((T, drows.shape[1]))
    for (t, _), s in np.ndenumerate(slots):
        if 0 <= s < drows.shape[0]:
            dx[t] += drows[s]
    return dx


def route_backward(dweights, logits, ids, routing, renormalize=False, scale=None, **choice):
    """Adjoint of moe.route's weights for a fixed choice ids -> dlogits [T,E].

    The weights are w = scale * r(a) where a gathers the chosen experts'
    scores (softmax over all E logits for softmax_topk, sigmoid for
    sigmoid_topk, the logits themselves for topk_softmax, which then takes a
    softmax over its k), and r divides by the sum of the k (plus 1e-20 for
    sigmoid_topk) when renormalize is set. The choice itself has no
    gradient: `choice` takes moe_ref.route's other keywords (k, bias, groups,
    top_groups), which only shape ids, so that route's keywords can be passed
    as they are."""
    x = np.asarray(logits, dtype=np.float64)
    if routing == "softmax_topk":
        scores = moe_ref._softmax(x)
    elif routing == "sigmoid_topk":
        scores = moe_ref._sigmoid(x)
    elif routing == "topk_softmax":
        scores = x
    else:
        raise ValueError(routing)
    valid = (ids >= 0) & (ids < x.shape[1])
    a = np.where(valid, np.take_along_axis(scores, np.where(valid, ids, 0), axis=1), 0.0)
    p = moe_ref._softmax(a) if routing == "topk_softmax" else a
    dq = dweights * (1.0 if scale is None else scale)
    if renormalize:
        # q = p / S with S = sum(p) + delta: dp = (dq - sum(dq * q)) / S.
        S = p.sum(-1, keepdims=True) + (1e-20 if routing == "sigmoid_topk" else 0.0)
        q = p / S
        dp = (dq - (dq * q).sum(-1, keepdims=True)) / S
    else:
        dp = dq
    if routing == "topk_softmax":
        # Softmax over the k: da = p * (dp - sum(dp * p)).
        da = p * (dp - (dp * p).sum(-1, keepdims=True))
    else:
        da = dp
    dscores = np.zeros_like(x)
    rows = np.nonzero(valid)
    np.add.at(dscores, (rows[0], ids[rows]), da[rows])
    if routing == "softmax_topk":
        return scores * (dscores - (dscores * scores).sum(-1, keepdims=True))
    if routing == "sigmoid_topk":
        return dscores * scores * (1.0 - scores)
    return dscores


def shared_mlp_backward(ds, x, w13, w2, gate=None):
    """Adjoint of moe_ref.shared_mlp, s = sigma * (h @ w2.T) with h =
    silu(gu[:, :Is]) * gu[:, Is:], gu = x @ w13.T and, with a gate,
    sigma[t] = sigmoid(x[t] . gate[0]) (1 without one).

    With do = ds * sigma, the down projection gives dw2 = do.T @ h and dh =
    do @ w2; the activation gives dgu (swiglu_backward), and the gate-up
    projection dw13 = dgu.T @ x and dx = dgu @ w13. The gate scales every
    output of token t by sigma[t], so dsigma[t] = ds[t] . o[t] with o = h @
    w2.T the ungated output, and the logit l[t] = x[t] . gate[0] gets
    dl[t] = dsigma[t] * sigma[t] * (1 - sigma[t]): dgate[0] = sum_t dl[t] *
    x[t], and dx[t] gains dl[t] * gate[0].

    Returns dict(x, w13, w2, and with a gate, gate [1,H] and logit [T], the
    gate logit's gradient, so that callers can size the term it adds to
    dx)."""
    gu = x @ w13.T
    h = moe_ref.swiglu(gu, "silu")
    o = h @ w2.T
    if gate is None:
        do = ds
    else:
        sigma = moe_ref._sigmoid(x @ gate[0])
        do = ds * sigma[:, None]
        dlogit = np.sum(ds * o, axis=1) * sigma * (1.0 - sigma)
    dw2 = do.T @ h
    dgu = swiglu_backward(do @ w2, gu, "silu")
    g = dict(x=dgu @ w13, w13=dgu.T @ x, w2=dw2)
    if gate is not None:
        g["x"] = g["x"] + dlogit[:, None] * gate[0][None, :]
        g["gate"] = (dlogit @ x)[None, :]
        g["logit"] = dlogit
    return g

# --------------------------------------------------------------- layer


def shared_of(p):
    """The shared expert of p as moe_ref.layer takes it, or None."""
    if "sw13" not in p:
        return None
    return dict(w13=p["sw13"], w2=p["sw2"], gate=p.get("sgate"))


def forward_parts(p, route_kw, activation="silu", pad_to=1, alpha=1.702, limit=7.0):
    """Every intermediate of the layer on p, through moe_ref's op functions:
    dict(ids, w, rows, offsets, slots, gu, h, o, s, y), s the shared
    expert's output (None without one)."""
    E = p["w13"].shape[0]
    if route_kw is None:
        ids, w = p["ids"], p["w"]
    else:
        ids, w = moe_ref.route(p["logits"], **route_kw)
    rows, offsets, slots = moe_ref.permute(p["x"], ids, E, pad_to)
    gu = moe_ref.grouped_matmul(rows, p["w13"], offsets, p.get("b13"))
    h = moe_ref.swiglu(gu, activation, alpha, limit)
    o = moe_ref.grouped_matmul(h, p["w2"], offsets, p.get("b2"))
    sh = shared_of(p)
    s = None if sh is None else moe_ref.shared_mlp(p["x"], sh["w13"], sh["w2"], sh["gate"])
    y = moe_ref.unpermute(o, slots, w, s)
    return dict(ids=ids, w=w, rows=rows, offsets=offsets, slots=slots, gu=gu, h=h, o=o, s=s, y=y)


def layer_backward(p, dy, route_kw, activation="silu", pad_to=1, alpha=1.702, limit=7.0):
    """Gradients of L = sum(dy * y) for the layer on p (see the module's
    docstring), keyed like p: x, logits (routed) or w (route-less), w13, w2,
    and b13, b2, sw13, sw2, sgate where p has them. The shared expert sees
    dy whole (the combine adds it with weight 1); its part of dx joins the
    routed experts'."""
    f = forward_parts(p, route_kw, activation, pad_to, alpha, limit)
    T = p["x"].shape[0]
    do, dw = unpermute_backward(dy, f["o"], f["slots"], f["w"])
    dh, dw2, db2 = grouped_matmul_backward(do, f["h"], p["w2"], f["offsets"], "b2" in p)
    dgu = swiglu_backward(dh, f["gu"], activation, alpha, limit)
    drows, dw13, db13 = grouped_matmul_backward(dgu, f["rows"], p["w13"], f["offsets"], "b13" in p)
    g = dict(x=permute_backward(drows, f["slots"], T), w13=dw13, w2=dw2)
    if route_kw is None:
        g["w"] = dw
    else:
        g["logits"] = route_backward(dw, p["logits"], f["ids"], **route_kw)
    if "b13" in p:
        g["b13"], g["b2"] = db13, db2
    if "sw13" in p:
        gs = shared_mlp_backward(dy, p["x"], p["sw13"], p["sw2"], p.get("sgate"))
        g["x"] = g["x"] + gs["x"]
        g["sw13"], g["sw2"] = gs["w13"], gs["w2"]
        if "sgate" in p:
            g["sgate"] = gs["gate"]
    return g


def _rel(a, b):
    """|a - b| / |b| (Frobenius); where b is zero, 0 if a is too, else 1."""
    nb = np.linalg.norm(b)
    return np.linalg.norm(a - b) / nb if nb > 0 else float(np.linalg.norm(a) > 0)


def shared_guards(p, dy, route_kw, activation="silu", pad_to=1, alpha=1.702, limit=7.0,
                  y_min=0.1, dx_min=1e-2):
    """Reasons a layer's shared expert is too weak for a test of its
    gradients to fail (an empty list when it is not, or when p has none):
    the shared expert, and its gate, must change y by at least y_min
    (relative L2); its part of dx, and within it the gate logit's term
    dl[t] * gate[0], must be at least dx_min of dx."""
    if "sw13" not in p:
        return []
    kw = dict(activation=activation, pad_to=pad_to, alpha=alpha, limit=limit)
    routed = {a: v for a, v in p.items() if a not in ("sw13", "sw2", "sgate")}
    y = forward_parts(p, route_kw, **kw)["y"]
    dx = layer_backward(p, dy, route_kw, **kw)["x"]
    out = []
    change = _rel(forward_parts(routed, route_kw, **kw)["y"], y)
    if not change >= y_min:
        out.append("the shared expert changes y by only %.3g" % change)
    part = _rel(layer_backward(routed, dy, route_kw, **kw)["x"], dx)
    if not part >= dx_min:
        out.append("the shared expert's part of dx is only %.3g of it" % part)
    if "sgate" in p:
        ungated = {a: v for a, v in p.items() if a != "sgate"}
        change = _rel(forward_parts(ungated, route_kw, **kw)["y"], y)
        if not change >= y_min:
            out.append("the shared gate changes y by only %.3g" % change)
        dl = shared_mlp_backward(dy, p["x"], p["sw13"], p["sw2"], p["sgate"])["logit"]
        term = np.linalg.norm(np.outer(dl, p["sgate"][0])) / max(np.linalg.norm(dx), 1e-300)
        if not term >= dx_min:
            out.append("the gate logit's term is only %.3g of dx" % term)
    return out

# -------------------------------------------------- finite differences


class Straddle(AssertionError):
    """A finite difference whose two points make different discrete choices
    (top-k ids, GPT-OSS clamps), so it measures a jump, not a derivative."""


def _loss_and_state(p, dy, route_kw, activation, pad_to, alpha, limit):
    """L = sum(dy * y) through moe_ref.layer (route-less: the same op chain
    on p's ids and weights, moe_ref.layer having no route-less form), and
    the discrete state a derivative must not cross: the ids and, for
    gptoss, where each clamp is active."""
    if route_kw is None:
        f = forward_parts(p, None, activation, pad_to, alpha, limit)
        y, ids = f["y"], f["ids"]
    else:
        y, ids, _ = moe_ref.layer(p["x"], p["logits"], p["w13"], p["w2"], route_kw, activation,
                                  p.get("b13"), p.get("b2"), pad_to, alpha, limit,
                                  shared=shared_of(p))
    state = [np.asarray(ids)]
    if activation == "gptoss":
        gu = forward_parts(p, route_kw, activation, pad_to, alpha, limit)["gu"]
        I = gu.shape[1] // 2
        state += [gu[:, :I] < limit, np.abs(gu[:, I:]) < limit]
    return float(np.sum(dy * y)), state


def finite_differences(p, dy, route_kw, activation="silu", pad_to=1, alpha=1.702, limit=7.0,
                       directions=4, coords=6, step=1e-5, seed=0):
    """Central differences (L(p + step*v) - L(p - step*v)) / (2*step) of
    L = sum(dy * y) along unit vectors v of each differentiable argument:
    `directions` random ones (full-vector directional derivatives) and
    `coords` random coordinates. Raises Straddle if the two points route a
    token differently or move a GPT-OSS clamp. In float64 a step of 1e-5
    gives derivatives good to about 1e-7 of the gradient's scale at worst
    (rounding of L where a gradient is tiny beside it: saturated sigmoids),
    1e-9 typically.

    Returns {name: [(v, derivative, is_coordinate), ...]}."""
    rng = np.random.default_rng(seed)
    args = (route_kw, activation, pad_to, alpha, limit)
    _, state0 = _loss_and_state(p, dy, *args)
    probes = {}
    for name in (n for n in DIFFERENTIABLE if n in p):
        base = p[name]
        vs = [rng.standard_normal(base.shape) for _ in range(directions)]
        vs = [(v / np.linalg.norm(v), False) for v in vs]
        for i in rng.choice(base.size, size=min(coords, base.size), replace=False):
            e = np.zeros(base.size)
            e[i] = 1.0
            vs.append((e.reshape(base.shape), True))
        probes[name] = []
        for v, is_coord in vs:
            values = []
            for sign in (1.0, -1.0):
                q = dict(p, **{name: base + sign * step * v})
                loss, state = _loss_and_state(q, dy, *args)
                if not all(np.array_equal(a, b) for a, b in zip(state, state0)):
                    raise Straddle("a step of %g along %s changes the routing or a clamp"
                                   % (step, name))
                values.append(loss)
            probes[name].append((v, (values[0] - values[1]) / (2.0 * step), is_coord))
    return probes


def fd_errors(probes, grads):
    """Worst error of grads against the finite differences, per argument:
    {name: (worst over directions, worst over coordinates)}.

    A probe's error is |<g, v> - D_v| relative to the larger of |D_v| and
    the gradient's RMS coordinate, estimated as the RMS of the derivatives
    along the random unit directions (E[<g, v>^2] = |g|^2 / n); a probe
    along which the derivative is small is held to that absolute scale, not
    to its own."""
    out = {}
    for name, plist in probes.items():
        g = np.asarray(grads[name], dtype=np.float64).reshape(plist[0][0].shape)
        rms = np.sqrt(np.mean([d * d for _, d, c in plist if not c]))
        worst = [0.0, 0.0]
        for v, d, is_coord in plist:
            err = abs(np.sum(g * v) - d) / max(abs(d), rms, np.finfo(float).tiny)
            worst[is_coord] = max(worst[is_coord], err)
        out[name] = tuple(worst)
    return out

# ------------------------------------------------------------ self-test


def _random_layer(rng, T, H, I, E, k, routing, activation, expert_bias, pad_to, cold=(),
                  hot=None, shared=None, gated=False, **route_opts):
    """A random layer configuration: (p, route_kw) with p as in the
    module's docstring. routing "none" gives a route-less layer whose ids
    (when T > 2 and k > 1) repeat an expert within token 0 and drop a slot of
    token 1 (-1) and one of token 2 (E), as ids from outside may. shared=Is
    adds a shared expert of width Is, gated with a gate."""
    amp = 3.0 if activation == "gptoss" else 1.0  # reach the clamp
    p = dict(x=rng.standard_normal((T, H)) * amp,
             w13=rng.standard_normal((E, 2 * I, H)) * amp / np.sqrt(H),
             w2=rng.standard_normal((E, H, I)) / np.sqrt(I))
    if expert_bias:
        p["b13"] = rng.standard_normal((E, 2 * I))
        p["b2"] = rng.standard_normal((E, H))
    if shared:
        p["sw13"] = rng.standard_normal((2 * shared, H)) / np.sqrt(H)
        # amp^2: as large as GPT-OSS's amplified routed outputs, not drowned.
        p["sw2"] = rng.standard_normal((H, shared)) * amp * amp / np.sqrt(shared)
        if gated:
            # Gate logits of order 1 (x is amp times larger for gptoss), so
            # that sigma and its derivative are both far from 0.
            p["sgate"] = rng.standard_normal((1, H)) / (np.sqrt(H) * amp)
    logits = rng.standard_normal((T, E))
    logits[:, list(cold)] = -30.0
    if hot is not None:
        logits[:, hot] += 6.0
    if routing == "none":
        ids, _ = moe_ref.route(logits, "softmax_topk", k)
        if T > 2 and k > 1:
            ids[0, 1] = ids[0, 0]
            ids[1, 1] = -1
            ids[2, 0] = E
        p["ids"] = ids
        p["w"] = rng.uniform(0.1, 1.0, (T, k))
        return p, None
    p["logits"] = logits
    route_kw = dict(routing=routing, k=k, **route_opts)
    if route_kw.get("bias") is not None:
        route_kw["bias"] = rng.standard_normal(E) * 0.5
    return p, route_kw


def _self_test_configs():
    """(name, kwargs of _random_layer) covering every routing form and
    option, both activations with and without expert biases, padding, k = 1
    and T = 1, cold and hot experts and the route-less form; then a shared
    expert, ungated and gated (of a width other than I), beside every
    routing form, both activations and the shapes that change what the
    routed part leaves to it (padding, T = 1, k = 1, a hot expert)."""
    base = dict(T=7, H=6, I=5, E=8, k=2, routing="softmax_topk", activation="silu",
                expert_bias=False, pad_to=1)
    routings = {
        "softmax": dict(),
        "softmax-renorm": dict(renormalize=True),
        "softmax-renorm-scale": dict(renormalize=True, scale=1.7),
        "topk_softmax": dict(routing="topk_softmax"),
        "topk_softmax-renorm": dict(routing="topk_softmax", renormalize=True),
        "sigmoid": dict(routing="sigmoid_topk"),
        "sigmoid-deepseek": dict(routing="sigmoid_topk", bias=True, groups=4, top_groups=2,
                                 renormalize=True, scale=2.5, E=16, k=4),
        "softmax-groups": dict(groups=2, top_groups=1, renormalize=True),
        "none": dict(routing="none"),
    }
    experts = {
        "silu": dict(),
        "silu-bias": dict(expert_bias=True),
        "gptoss": dict(activation="gptoss", expert_bias=True),
        "gptoss-nobias": dict(activation="gptoss"),
    }
    shapes = {
        "": dict(),
        "pad3": dict(pad_to=3),
        "k1": dict(k=1),
        "t1": dict(T=1),
        "k3-cold": dict(k=3, cold=(2, 5)),
        "hot": dict(k=1, hot=3, cold=(0,)),
    }
    for (rn, r), (en, e), (sn, s) in itertools.product(routings.items(), experts.items(),
                                                       shapes.items()):
        cfg = {**base, **r, **e, **s}
        if cfg["routing"] == "none" and (cfg.get("hot") is not None or cfg.get("cold")):
            continue  # ids are given: hot and cold logits mean nothing
        if cfg["k"] > cfg["E"] // (cfg.get("groups") or 1) * (cfg.get("top_groups") or 1):
            continue
        yield "%s/%s/%s" % (rn, en, sn or "base"), cfg
    shared = {
        "shared": dict(shared=9),
        "shared-gated": dict(shared=9, gated=True),
    }
    for (rn, r), (en, e), (sn, s), (hn, h) in itertools.product(
            routings.items(), {k: experts[k] for k in ("silu", "gptoss")}.items(),
            {k: shapes[k] for k in ("", "pad3", "t1", "k1", "hot")}.items(), shared.items()):
        cfg = {**base, **r, **e, **s, **h}
        if cfg["routing"] == "none" and (cfg.get("hot") is not None or cfg.get("cold")):
            continue
        if cfg["k"] > cfg["E"] // (cfg.get("groups") or 1) * (cfg.get("top_groups") or 1):
            continue
        yield "%s/%s/%s/%s" % (rn, en, sn or "base", hn), cfg


def self_test():
    """layer_backward against finite differences for every configuration of
    _self_test_configs; also checks that the gradients vanish exactly where
    the math says (experts without rows) and nearly (rounding) where an
    identity makes them (non-chosen logits under renormalisation), and that
    a shared expert and its gate matter (shared_guards)."""
    worst = dict(direction=0.0, coordinate=0.0)
    n = n_shared = n_gated = 0
    for i, (name, cfg) in enumerate(_self_test_configs()):
        kw = dict(activation=cfg["activation"], pad_to=cfg["pad_to"])
        for attempt in itertools.count():
            # Draw again until a GPT-OSS layer reaches its clamp on both
            # halves (a token or two may not), so that its zero gradient is
            # checked too, and until a shared expert and its gate matter
            # well past the FD tolerance of 1e-6 (a single token's gate
            # logit may sit where sigma is flat).
            assert attempt < 50, "%s: no draw meets the configuration's conditions" % name
            rng = np.random.default_rng(1000 * i + attempt)
            p, route_kw = _random_layer(rng, **cfg)
            dy = rng.standard_normal((cfg["T"], cfg["H"]))
            f = forward_parts(p, route_kw, **kw)
            live, I = f["gu"][: f["offsets"][-1]], cfg["I"]
            if (cfg["activation"] != "gptoss" or
                    ((live[:, :I] > 7).any() and (np.abs(live[:, I:]) > 7).any())) and \
                    not shared_guards(p, dy, route_kw, y_min=1e-2, dx_min=1e-3, **kw):
                break
        g = layer_backward(p, dy, route_kw, **kw)
        probes = finite_differences(p, dy, route_kw, seed=i, **kw)
        for arg, (d, c) in fd_errors(probes, g).items():
            assert d < 1e-6 and c < 1e-6, \
                "%s: d%s disagrees with FD (%.3g, %.3g)" % (name, arg, d, c)
            worst["direction"] = max(worst["direction"], d)
            worst["coordinate"] = max(worst["coordinate"], c)
        # The comparison can fail: gradients 1e-5 off in scale are caught.
        for arg, errs in fd_errors(probes, {a: v * (1 + 1e-5) for a, v in g.items()}).items():
            assert max(errs) > 1e-6 or not g[arg].any(), "%s: FD misses a wrong d%s" % (name, arg)
        ids = f["ids"]
        constant_weights = cfg["k"] == 1 and (cfg.get("renormalize")
                                              or cfg["routing"] == "topk_softmax")
        for e in range(cfg["E"]):
            if not (ids == e).any():
                for arg in ("w13", "w2", "b13", "b2"):
                    assert arg not in g or not g[arg][e].any(), \
                        "%s: expert %d has no rows but d%s[%d] != 0" % (name, e, arg, e)
        for arg in g:
            # A single weight normalised to 1 is constant: no logit gradient.
            assert np.linalg.norm(g[arg]) > 0 or (arg == "logits" and constant_weights), \
                "%s: d%s is zero" % (name, arg)
        if route_kw is not None:
            chosen = np.zeros(p["logits"].shape, dtype=bool)
            np.put_along_axis(chosen, ids, True, axis=1)
            dl = g["logits"]
            if constant_weights:
                assert not dl.any(), "%s: constant weights give logit gradients" % name
            elif cfg["routing"] == "softmax_topk" and not cfg.get("renormalize"):
                # The softmax over all E reaches every logit.
                assert (dl != 0).all(), "%s: some logit gets no gradient" % name
            else:
                # Renormalised softmax_topk weights are the softmax over the
                # chosen logits; sigmoid and topk_softmax see only the k.
                leak = np.abs(dl[~chosen]).max(initial=0.0)
                assert leak <= 1e-12 * np.abs(dl).max(), \
                    "%s: non-chosen logits get gradient %.3g" % (name, leak)
        n += 1
        n_shared += "sw13" in p
        n_gated += "sgate" in p
    print("PASS moe_grad_ref self-test: %d configurations (%d with a shared expert, %d of them "
          "gated); worst FD error %.2g along random directions, %.2g on single coordinates"
          % (n, n_shared, n_gated, worst["direction"], worst["coordinate"]))


if __name__ == "__main__":
    if len(sys.argv) != 1:
        sys.exit("usage: moe_grad_ref.py (runs the self-test)")
    self_test()
