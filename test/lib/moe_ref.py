"""Independent numpy (float64) reference for the moe dialect's semantics.

A second implementation, written from the op descriptions and the team's
`reference` in bench/peers.py (checked against the Hugging Face modules);
`crosscheck_peers.py` compares the two on the same inputs. FP8 codes are
found by nearest-value search over all 256 codes (ties to the even code), a
different method from the bit manipulation the compiler emits.
"""
import numpy as np

# ---------------------------------------------------------------- routing


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _topk_desc(scores, k, allowed=None):
    """Indices of the k largest per row, best first, lower index on ties."""
    s = np.where(allowed, scores, -np.inf) if allowed is not None else scores
    # lexsort: primary key -score, secondary key index (stable).
    order = np.argsort(-s, axis=-1, kind="stable")
    return order[:, :k]


def route(logits, routing, k, bias=None, groups=None, top_groups=None,
          renormalize=False, scale=None):
    """moe.route: returns (ids [T,k] int, weights [T,k] float64)."""
    x = np.asarray(logits, dtype=np.float64)
    T, E = x.shape
    if routing == "softmax_topk":
        scores = _softmax(x)
    elif routing == "sigmoid_topk":
        scores = _sigmoid(x)
    elif routing == "topk_softmax":
        scores = x
    else:
        raise ValueError(routing)
    choice = scores + (bias if bias is not None else 0.0)
    allowed = None
    if groups:
        g = choice.reshape(T, groups, E // groups)
        best = -np.sort(-g, axis=-1)
        gscore = best[..., :2].sum(-1)
        chosen = _topk_desc(gscore, top_groups)
        gmask = np.zeros((T, groups), dtype=bool)
        np.put_along_axis(gmask, chosen, True, axis=1)
        allowed = np.repeat(gmask, E // groups, axis=1)
    ids = _topk_desc(choice, k, allowed)
    w = np.take_along_axis(scores, ids, axis=1)
    if routing == "topk_softmax":
        w = _softmax(w)
    if renormalize:
        w = w / (w.sum(-1, keepdims=True) + (1e-20 if routing == "sigmoid_topk" else 0.0))
    if scale is not None:
        w = w * scale
    return ids, w

# ------------------------------------------------------- expert compute


def permute(x, ids, E, pad_to=1):
    """moe.permute: (rows [M,H], offsets [E+1], slots [T,k])."""
    T, k = ids.shape
    flat = ids.reshape(-1)
    counts = np.array([(flat == e).sum() for e in range(E)])
    padded = -(-counts // pad_to) * pad_to
    offsets = np.concatenate([[0], np.cumsum(padded)])
    M = T * k + E * (pad_to - 1)
    rows = np.zeros((M, x.shape[1]))
    slots = np.full((T, k), -1)
    cursor = offsets[:-1].copy()
    for i, e in enumerate(flat):
        if 0 <= e < E:
            t, j = divmod(i, k)
            rows[cursor[e]] = x[t]
            slots[t, j] = cursor[e]
            cursor[e] += 1
    return rows, offsets, slots


def grouped_matmul(rows, w, offsets, bias=None, row_scale=None):
    out = np.zeros((rows.shape[0], w.shape[1]))
    for e in range(w.shape[0]):
        lo, hi = offsets[e], offsets[e + 1]
        out[lo:hi] = rows[lo:hi] @ w[e].T + (bias[e] if bias is not None else 0.0)
    if row_scale is not None:
        out = out * row_scale[:, None]
    return out


def swiglu(gu, activation="silu", alpha=1.702, limit=7.0, scale=None):
    I = gu.shape[1] // 2
    gate, up = gu[:, :I], gu[:, I:]
    if activation == "silu":
        h = gate * _sigmoid(gate) * up
    else:
        g = np.minimum(gate, limit)
        u = np.clip(up, -limit, limit)
        h = (u + 1.0) * g * _sigmoid(alpha * g)
    return h if scale is None else h * scale[:, None]


def unpermute(rows, slots, weights=None, shared=None):
    T, k = slots.shape
    y = np.zeros((T, rows.shape[1]))
    for t in range(T):
        for j in range(k):
            s = slots[t, j]
            if 0 <= s < rows.shape[0]:
                y[t] += (1.0 if weights is None else weights[t, j]) * rows[s]
    return y if shared is None else y + shared


def shared_mlp(x, w13, w2, gate=None):
    """moe.shared_mlp: a dense SwiGLU MLP of every token (w13 [2Is, H], w2
    [H, Is]), scaled per token by sigmoid(x . gate[0]) with gate [1, H]."""
    out = swiglu(x @ w13.T) @ w2.T
    if gate is not None:
        out = out * _sigmoid(x @ gate[0])[:, None]
    return out


def layer(x, logits, w13, w2, route_kw, activation="silu", b13=None, b2=None,
          pad_to=1, alpha=1.702, limit=7.0, shared=None):
    """The whole layer through the op-level functions above; `shared` is
    dict(w13=, w2=, gate=None), a shared expert added to the combine."""
    ids, w = route(logits, **route_kw)
    rows, offsets, slots = permute(x, ids, w13.shape[0], pad_to)
    gu = grouped_matmul(rows, w13, offsets, b13)
    h = swiglu(gu, activation, alpha, limit)
    o = grouped_matmul(h, w2, offsets, b2)
    s = None if shared is None else shared_mlp(x, shared["w13"], shared["w2"], shared.get("gate"))
    return unpermute(o, slots, w, s), ids, w


def layer_loop(x, logits, w13, w2, route_kw, activation="silu", b13=None,
               b2=None, alpha=1.702, limit=7.0, shared=None):
    """The same layer as a per-token loop over chosen experts (no permute),
    the shared expert (as in `layer`) one token at a time."""
    ids, w = route(logits, **route_kw)
    I = w2.shape[2]
    y = np.zeros((x.shape[0], w2.shape[1]))
    for t in range(x.shape[0]):
        for j, e in enumerate(ids[t]):
            gu = w13[e] @ x[t] + (b13[e] if b13 is not None else 0.0)
            h = swiglu(gu[None, :], activation, alpha, limit)[0]
            y[t] += w[t, j] * (w2[e] @ h + (b2[e] if b2 is not None else 0.0))
        if shared is not None:
            Is = shared["w2"].shape[1]
            gate_up = shared["w13"] @ x[t]
            g, u = gate_up[:Is], gate_up[Is:]
            o = shared["w2"] @ (g / (1.0 + np.exp(-g)) * u)
            if shared.get("gate") is not None:
                o = o / (1.0 + np.exp(-np.dot(shared["gate"][0], x[t])))
            y[t] += o
    return y

# ----------------------------------------------------------------- FP8

FP8 = {  # name: (exponent bits, mantissa bits, bias, has_inf)
    "f8E4M3FN": (4, 3, 7, False),
    "f8E5M2": (5, 2, 15, True),
}
EMAX = {"f8E4M3FN": 8, "f8E5M2": 15}


def fp8_table(fmt):
    """Value of every code 0..255 (NaN where the code is NaN)."""
    eb, mb, bias, has_inf = FP8[fmt]
    vals = np.empty(256)
    for c in range(256):
        s, e, m = c >> 7, (c >> mb) & ((1 << eb) - 1), c & ((1 << mb) - 1)
        if has_inf and e == (1 << eb) - 1:
            v = np.inf if m == 0 else np.nan
        elif not has_inf and (c & 0x7F) == 0x7F:
            v = np.nan
        elif e == 0:
            v = m * 2.0 ** (1 - bias - mb)
        else:
            v = (1 + m / (1 << mb)) * 2.0 ** (e - bias)
        vals[c] = -v if s else v
    return vals


def fp8_max(fmt):
    t = fp8_table(fmt)
    return np.nanmax(t[np.isfinite(t)])


def encode_fp8(x, fmt):
    """Round to nearest, ties to even code, saturating; NaN -> 0x7F."""
    table = fp8_table(fmt)
    pos = [c for c in range(128) if np.isfinite(table[c])]
    pvals = table[pos]
    out = np.empty(np.shape(x), dtype=np.uint8)
    for idx, v in np.ndenumerate(np.asarray(x, dtype=np.float64)):
        if np.isnan(v):
            out[idx] = 0x7F
            continue
        a = min(abs(v), pvals.max())
        d = np.abs(pvals - a)
        best = np.flatnonzero(d == d.min())
        code = pos[best[0]] if len(best) == 1 else [pos[b] for b in best if pos[b] % 2 == 0][0]
        out[idx] = code | (0x80 if np.signbit(v) else 0)
    return out


def decode_fp8(codes, fmt):
    return fp8_table(fmt)[np.asarray(codes, dtype=np.int64)]


def _blocks(shape, block):
    block = (1,) * (len(shape) - len(block)) + tuple(block)
    return block, tuple(s // b for s, b in zip(shape, block))


def _block_view(x, block):
    """[..., d, ...] -> [d0/b0, d1/b1, ..., b0, b1, ...] (blocks last)."""
    r = x.ndim
    v = x.reshape([n for s, b in zip(x.shape, block) for n in (s // b, b)])
    return v.transpose(list(range(0, 2 * r, 2)) + list(range(1, 2 * r, 2)))


def quantize(x, fmt, block, scale_type):
    """moe.quantize: (codes uint8, scales) with scales as E8M0 codes (uint8)
    for MX or float32 values for f32 scales. x is float32."""
    x = np.asarray(x, dtype=np.float32)
    block, sshape = _blocks(x.shape, block)
    r = x.ndim
    blocks = _block_view(x.astype(np.float64), block).reshape(sshape + (-1,))
    codes_b = np.empty(blocks.shape, dtype=np.uint8)
    scales = np.empty(sshape, dtype=np.uint8 if scale_type == "f8E8M0FNU" else np.float32)
    for idx in np.ndindex(*sshape):
        v = blocks[idx]
        finite = np.all(np.isfinite(v))
        amax = np.abs(v).max() if finite else np.nan
        if scale_type == "f8E8M0FNU":
            if not finite:
                scales[idx], s = 0xFF, np.nan
            else:
                e = int(np.floor(np.log2(amax))) - EMAX[fmt] if amax > 0 else -127
                e = max(-127, min(127, e))
                scales[idx], s = e + 127, 2.0 ** e
        else:
            if not finite:
                s = np.float32(np.nan)
            else:
                s = np.float32(np.float32(amax) / np.float32(fp8_max(fmt)))
                if s == 0:
                    s = np.float32(1.0)
            scales[idx] = s
        # Division in f32, as the op specifies (exact for powers of two).
        q = (v.astype(np.float32) / np.float32(s)) if np.isfinite(s) else np.full(v.shape, np.nan)
        codes_b[idx] = encode_fp8(q, fmt)
    # Undo the block view.
    codes = codes_b.reshape(sshape + block)
    inv = np.argsort(list(range(0, 2 * r, 2)) + list(range(1, 2 * r, 2)))
    codes = codes.transpose(inv).reshape(x.shape)
    return codes, scales


def dequantize(codes, scales, fmt, block, scale_type):
    vals = decode_fp8(codes, fmt)
    block, _ = _blocks(vals.shape, block)
    if scale_type == "f8E8M0FNU":
        sc = np.where(scales == 0xFF, np.nan, 2.0 ** (scales.astype(np.float64) - 127))
    else:
        sc = scales.astype(np.float64)
    for d, b in enumerate(block):
        sc = np.repeat(sc, b, axis=d)
    return vals * sc
