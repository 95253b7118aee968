"""Executable layer tests: `gen CASE` writes an MLIR program that runs one
small MoE layer on seeded random inputs and prints its output, routing ids
and weights; `check CASE FILE` compares what mlir-runner printed with the
numpy reference (moe_ref.py) at the case's stated tolerance."""
import re
import sys

import numpy as np

import moe_ref
from mlir_data import run_cli, bf16_round, literal, parse_memrefs, rel_l2, tensor_type

# name: dict(T, H, I, E, k, routing, ...). Tolerances: f32 runs are compared
# at 1e-5 relative L2 (printing keeps 6 digits); bf16 runs at 1e-2, the
# numerics contract of design.md.
CASES = {
    "mixtral": dict(T=5, H=16, I=24, E=8, k=2, routing="softmax_topk", renormalize=True),
    "qwen3": dict(T=9, H=8, I=12, E=16, k=4, routing="softmax_topk", renormalize=True),
    "olmoe": dict(T=6, H=8, I=8, E=8, k=3, routing="softmax_topk"),
    "deepseek": dict(T=7, H=12, I=8, E=16, k=4, routing="sigmoid_topk", bias=True,
                     groups=4, top_groups=2, renormalize=True, scale=2.5),
    "gptoss": dict(T=6, H=12, I=8, E=8, k=2, routing="topk_softmax", activation="gptoss",
                   expert_bias=True, big=True),
    "t1": dict(T=1, H=8, I=16, E=4, k=2, routing="softmax_topk", renormalize=True),
    "k1": dict(T=6, H=8, I=8, E=4, k=1, routing="softmax_topk"),
    "empty-expert": dict(T=8, H=8, I=8, E=6, k=2, routing="softmax_topk", renormalize=True,
                         cold=[1, 4]),
    "hot-expert": dict(T=8, H=8, I=8, E=6, k=1, routing="softmax_topk", hot=3, cold=[0]),
    "padded": dict(T=5, H=8, I=8, E=4, k=2, routing="softmax_topk", renormalize=True,
                   pad_to=4, cold=[2]),
    "fused": dict(T=6, H=8, I=12, E=4, k=2, routing="softmax_topk", renormalize=True,
                  fused=True, cold=[3]),
    "fused-gptoss": dict(T=5, H=12, I=8, E=4, k=2, routing="topk_softmax",
                         activation="gptoss", expert_bias=True, big=True, fused=True),
    "bf16": dict(T=7, H=16, I=16, E=4, k=2, routing="softmax_topk", renormalize=True,
                 dtype="bf16"),
    "large-t": dict(T=300, H=8, I=8, E=8, k=2, routing="softmax_topk", renormalize=True),
    # Quantized layers (the RUN line applies --moe-quantize with this policy):
    # compared at 1e-3 with the reference on dequantized values.
    "quant-fp8-block-wa-layer": dict(T=9, H=128, I=128, E=4, k=2, routing="softmax_topk",
                                     renormalize=True, fused=True, layer=True,
                                     quant=dict(format="fp8-block", scope="weights+activations")),
    "quant-mxfp8-e4m3-wa": dict(T=9, H=64, I=32, E=4, k=2, routing="softmax_topk", renormalize=True,
                                cold=[2], quant=dict(format="mxfp8", scope="weights+activations")),
    # A bf16 layer wide enough for [1, 32] blocks, which a RUN line quantizes
    # twice (gemm=fp8 and gemm=dequantized) to compare the two runs' outputs
    # value for value; its `check` compares with the unquantized reference.
    "bf16-mx": dict(T=9, H=64, I=64, E=4, k=2, routing="softmax_topk", renormalize=True,
                    dtype="bf16", cold=[1]),
    "quant-mxfp8-e5m2-w": dict(T=7, H=64, I=64, E=8, k=2, routing="softmax_topk", renormalize=True,
                               quant=dict(format="mxfp8", element="e5m2", scope="weights")),
    "quant-fp8-block-w-gptoss": dict(T=6, H=128, I=128, E=4, k=2, routing="topk_softmax",
                                     activation="gptoss", expert_bias=True, big=True,
                                     quant=dict(format="fp8-block", scope="weights")),
    # Shared experts: `shared=Is` adds a moe.shared_mlp of width Is to the
    # combine with weight 1 (DeepSeek-V3: Is = I); `gated` scales it per token
    # by sigmoid(x . w_gate) (Qwen2-MoE: Is = 4I, no renormalisation).
    "shared-deepseek": dict(T=7, H=12, I=8, E=16, k=4, routing="sigmoid_topk", bias=True,
                            groups=4, top_groups=2, renormalize=True, scale=2.5, shared=8,
                            cold=[5]),
    "shared-qwen2": dict(T=9, H=16, I=8, E=8, k=4, routing="softmax_topk", shared=32,
                         gated=True, cold=[2, 6]),
    "shared-t1": dict(T=1, H=16, I=8, E=6, k=2, routing="softmax_topk", shared=24, gated=True,
                      cold=[0]),
    "shared-bf16": dict(T=7, H=16, I=16, E=4, k=2, routing="softmax_topk", renormalize=True,
                        dtype="bf16", shared=32, gated=True, cold=[1]),
    "shared-layer": dict(T=6, H=8, I=12, E=4, k=2, routing="softmax_topk", renormalize=True,
                         fused=True, layer=True, shared=16, gated=True, cold=[3]),
    # Is = 20 is no multiple of I = 8: --moe-route-shared-experts pads the
    # third slice with zeros.
    "shared-padded": dict(T=5, H=16, I=8, E=4, k=2, routing="softmax_topk", renormalize=True,
                          shared=20, gated=True, cold=[2]),
}

# Encodings of each --moe-quantize format: (weight block, activation block,
# scale type).
QUANT_FORMATS = {"fp8-block": ([1, 128, 128], [1, 128], "f32"),
                 "mxfp8": ([1, 1, 32], [1, 32], "f8E8M0FNU")}


def inputs(name, c=None):
    """Seeded random inputs of case `name` (its configuration c defaults to
    CASES[name]; other scripts pass their own), as float32 arrays."""
    c = CASES[name] if c is None else c
    rng = np.random.default_rng(sum(map(ord, name)))
    T, H, I, E = c["T"], c["H"], c["I"], c["E"]
    # "big" inputs push GPT-OSS pre-activations past its clamp limit of 7.
    amp = 3.0 if c.get("big") else 1.0
    x = (rng.standard_normal((T, H)) * amp).astype(np.float32)
    logits = rng.standard_normal((T, E)).astype(np.float32)
    for e in c.get("cold", []):
        logits[:, e] = -30.0
    if "hot" in c:
        logits[:, c["hot"]] += c.get("hot_boost", 30.0)
    w13 = (rng.standard_normal((E, 2 * I, H)) * amp / np.sqrt(H)).astype(np.float32)
    w2 = (rng.standard_normal((E, H, I)) / np.sqrt(I)).astype(np.float32)
    d = dict(x=x, logits=logits, w13=w13, w2=w2)
    if c.get("expert_bias"):
        d["b13"] = rng.standard_normal((E, 2 * I)).astype(np.float32)
        d["b2"] = rng.standard_normal((E, H)).astype(np.float32)
    if c.get("bias"):
        d["bias"] = (rng.standard_normal(E) * 0.5).astype(np.float32)
    if c.get("shared"):
        Is = c["shared"]
        d["sw13"] = (rng.standard_normal((2 * Is, H)) / np.sqrt(H)).astype(np.float32)
        d["sw2"] = (rng.standard_normal((H, Is)) / np.sqrt(Is)).astype(np.float32)
        if c.get("gated"):
            d["sgate"] = (rng.standard_normal((1, H)) / np.sqrt(H)).astype(np.float32)
    if c.get("dtype") == "bf16":
        for key in ("x", "w13", "w2", "sw13", "sw2", "sgate"):
            if key in d:
                d[key] = bf16_round(d[key])
    return d


def shared_weights(d):
    """The shared expert of moe_ref.layer, or None."""
    if "sw13" not in d:
        return None
    return dict(w13=d["sw13"], w2=d["sw2"], gate=d.get("sgate"))


def route_kw(c, d):
    return dict(routing=c["routing"], k=c["k"], bias=d.get("bias"), groups=c.get("groups"),
                top_groups=c.get("top_groups"), renormalize=c.get("renormalize", False),
                scale=c.get("scale"))


def layer_args(c, d):
    """@layer's arguments as (name, type): tokens, then the logits (a
    route-less case, routing "none", takes the ids and routing weights
    instead), the expert weights and whichever optional inputs d holds."""
    H, I, E, k = c["H"], c["I"], c["E"], c["k"]
    dt = c.get("dtype", "f32")
    ty = lambda shape, t=dt: tensor_type(shape, t)
    args = [("x", ty([None, H]))]
    if c["routing"] == "none":
        args += [("ids", ty([None, k], "i32")), ("w", ty([None, k], "f32"))]
    else:
        args += [("logits", ty([None, E], "f32"))]
    if c.get("native"):
        # As transformers keeps GPT-OSS's experts: [E, K, N], gate and up
        # alternating (native_layout).
        args += [("w13", ty([E, H, 2 * I])), ("w2", ty([E, I, H]))]
    else:
        args += [("w13", ty([E, 2 * I, H])), ("w2", ty([E, H, I]))]
    if "b13" in d:
        args += [("b13", ty([E, 2 * I], "f32")), ("b2", ty([E, H], "f32"))]
    if "bias" in d:
        args += [("bias", ty([E], "f32"))]
    if "sw13" in d:
        Is = c["shared"]
        args += [("sw13", ty([2 * Is, H])), ("sw2", ty([H, Is]))]
        if "sgate" in d:
            args += [("sgate", ty([1, H]))]
    return args


def layer_func(c, d, routing_results=True):
    """Lines of `func.func @layer`, the case's layer as moe ops on
    layer_args(c, d). It returns the output y [T, H] f32 and, with
    routing_results, the route's ids and weights as well (a route-less case
    returns y alone)."""
    H, I, E, k = c["H"], c["I"], c["E"], c["k"]
    dt = c.get("dtype", "f32")
    act = c.get("activation", "silu")
    ty = lambda shape, t=dt: tensor_type(shape, t)
    routed = c["routing"] != "none"
    routing_results = routing_results and routed
    y_t, ids_t, w_t = ty([None, H], "f32"), ty([None, k], "i32"), ty([None, k], "f32")
    L = []
    sig = ", ".join("%%%s: %s" % a for a in layer_args(c, d))
    if routing_results:
        L.append("func.func @layer(%s) -> (%s, %s, %s) {" % (sig, y_t, ids_t, w_t))
    else:
        L.append("func.func @layer(%s) -> %s {" % (sig, y_t))
    chain = len(L)
    if routed:
        route = "moe.route %s %%logits" % c["routing"]
        route_types = [ty([None, E], "f32")]
        if "bias" in d:
            route += " bias %bias"
            route_types.append(ty([E], "f32"))
        route += " top %d" % k
        if c.get("groups"):
            route += " groups %d select %d" % (c["groups"], c["top_groups"])
        if c.get("renormalize"):
            route += " renormalize"
        if c.get("scale"):
            route += " scale %s" % c["scale"]
        L.append("  %%ids, %%w = %s : (%s) -> (%s, %s)"
                 % (route, ", ".join(route_types), ids_t, w_t))
    pad = c.get("pad_to", 1)
    pad_s = " pad_to %d" % pad if pad > 1 else ""
    off_t, slot_t = ty([E + 1], "i64"), ty([None, k], "i64")
    L.append("  %%rows, %%offsets, %%slots = moe.permute %%x, %%ids%s : (%s, %s) -> (%s, %s, %s)"
             % (pad_s, ty([None, H]), ids_t, ty([None, H]), off_t, slot_t))
    b13 = " bias %b13" if "b13" in d else ""
    b2 = " bias %b2" if "b2" in d else ""
    if c.get("fused"):
        ops = "%rows, %offsets, %w13, %w2"
        tys = [ty([None, H]), off_t, ty([E, 2 * I, H]), ty([E, H, I])]
        if "b13" in d:
            ops += " gate_up_bias %b13 down_bias %b2"
            tys += [ty([E, 2 * I], "f32"), ty([E, H], "f32")]
        L.append("  %%o = moe.expert_mlp %s %s : (%s) -> %s" % (act, ops, ", ".join(tys), ty([None, H])))
    else:
        native = c.get("native")
        kn, il = (" kn_weights", " interleaved") if native else ("", "")
        w13_t = ty([E, H, 2 * I]) if native else ty([E, 2 * I, H])
        w2_t = ty([E, I, H]) if native else ty([E, H, I])
        tys = [ty([None, H]), w13_t, off_t] + ([ty([E, 2 * I], "f32")] if b13 else [])
        L.append("  %%gu = moe.grouped_matmul %%rows, %%w13, %%offsets%s%s : (%s) -> %s"
                 % (b13, kn, ", ".join(tys), ty([None, 2 * I])))
        L.append("  %%h = moe.swiglu %s %%gu%s : (%s) -> %s" % (act, il, ty([None, 2 * I]), ty([None, I])))
        tys = [ty([None, I]), w2_t, off_t] + ([ty([E, H], "f32")] if b2 else [])
        L.append("  %%o = moe.grouped_matmul %%h, %%w2, %%offsets%s%s : (%s) -> %s"
                 % (b2, kn, ", ".join(tys), ty([None, H])))
    shared, shared_t = "", ""
    if "sw13" in d:
        # The shared expert's f32 result is the combine's addend.
        Is = c["shared"]
        gate = " gate %sgate" if "sgate" in d else ""
        tys = [ty([None, H]), ty([2 * Is, H]), ty([H, Is])] + ([ty([1, H])] if gate else [])
        L.append("  %%sh = moe.shared_mlp silu %%x, %%sw13, %%sw2%s : (%s) -> %s"
                 % (gate, ", ".join(tys), ty([None, H], "f32")))
        shared, shared_t = " shared %sh", ", " + ty([None, H], "f32")
    L.append("  %%y = moe.unpermute %%o, %%slots weights %%w%s : (%s, %s, %s%s) -> %s"
             % (shared, ty([None, H]), slot_t, w_t, shared_t, y_t))
    if c.get("layer"):
        # The chain as one moe.layer, which yields only its output: the ids
        # and weights returned beside it come from the same route, kept
        # outside, and the layer's own copy of the route is renamed.
        renamed = "ids|w|y" if routing_results else "y"
        body = [re.sub(r"%%(%s)(?![0-9a-z_])" % renamed, r"%l\1", line) for line in L[chain:]]
        L[chain + routing_results:] = ["  %%y = moe.layer : %s {" % y_t]
        L += ["  " + line for line in body]
        L.append("    moe.yield %%ly : %s" % y_t)
        L.append("  }")
    if routing_results:
        L.append("  return %%y, %%ids, %%w : %s, %s, %s" % (y_t, ids_t, w_t))
    else:
        L.append("  return %%y : %s" % y_t)
    L.append("}")
    return L


def _interleave(a, axis):
    """[gate | up] along `axis` as alternating gate, up."""
    gate, up = np.split(a, 2, axis=axis)
    return np.stack([gate, up], axis=axis + 1).reshape(a.shape)


def native_layout(d):
    """d's expert weights as a `native` case takes them (transformers'
    GPT-OSS layout): w13 [E, H, 2I] with gate and up columns alternating,
    b13 alternating, w2 [E, I, H]."""
    d = dict(d)
    d["w13"] = np.ascontiguousarray(_interleave(d["w13"], 1).transpose(0, 2, 1))
    d["w2"] = np.ascontiguousarray(d["w2"].transpose(0, 2, 1))
    if "b13" in d:
        d["b13"] = np.ascontiguousarray(_interleave(d["b13"], 1))
    return d


def from_native(arg, flat, c):
    """A native case's gradient of `arg` (flat, as printed) in the layout
    the reference computes: [E, 2I, H] halves, [2I] halves, [E, H, I]."""
    E, H, I = c["E"], c["H"], c["I"]
    if arg == "w13":
        v = flat.reshape(E, H, 2 * I).transpose(0, 2, 1)
        return np.concatenate([v[:, 0::2], v[:, 1::2]], axis=1)
    if arg == "b13":
        v = flat.reshape(E, 2 * I)
        return np.concatenate([v[:, 0::2], v[:, 1::2]], axis=1)
    if arg == "w2":
        return flat.reshape(E, I, H).transpose(0, 2, 1)
    return flat


def constants(c, d, args):
    """Lines defining each of args [(name, type)] as an exact constant of
    d[name] (T rows where the type says ?), and the values to pass for them."""
    L, names = [], []
    for a, t in args:
        static = t.replace("?", str(c["T"]))
        src = {"logits": "f32", "b13": "f32", "b2": "f32", "bias": "f32", "w": "f32",
               "ids": "i32"}.get(a, c.get("dtype", "f32"))
        L.append("  %%%s_c = arith.constant %s : %s" % (a, literal(d[a], src), static))
        if static != t:
            L.append("  %%%s_d = tensor.cast %%%s_c : %s to %s" % (a, a, static, t))
            names.append("%%%s_d" % a)
        else:
            names.append("%%%s_c" % a)
    return L, names


def gen(name):
    c, d = CASES[name], inputs(name)
    H, k = c["H"], c["k"]
    y_t = tensor_type([None, H], "f32")
    ids_t, w_t = tensor_type([None, k], "i32"), tensor_type([None, k], "f32")
    args = layer_args(c, d)
    L = []
    L.append("func.func private @printMemrefF32(tensor<*xf32>)")
    L.append("func.func private @printMemrefI32(tensor<*xi32>)")
    L += layer_func(c, d)
    L.append("func.func @main() {")
    lines, names = constants(c, d, args)
    L += lines
    L.append("  %%y, %%ids, %%w = func.call @layer(%s) : (%s) -> (%s, %s, %s)"
             % (", ".join(names), ", ".join(t for _, t in args), y_t, ids_t, w_t))
    for v, t, fn in (("y", "f32", "F32"), ("ids", "i32", "I32"), ("w", "f32", "F32")):
        src = {"y": y_t, "ids": ids_t, "w": w_t}[v]
        L.append("  %%%s_u = tensor.cast %%%s : %s to tensor<*x%s>" % (v, v, src, t))
        L.append("  call @printMemref%s(%%%s_u) : (tensor<*x%s>) -> ()" % (fn, v, t))
    L.append("  return")
    L.append("}")
    print("\n".join(L))


def quantized_layer(c, f64, kw, act):
    """The layer as --moe-quantize rewrites it, on dequantized values: the
    weights (and, with activations, each GEMM's rows) go through
    moe_ref.quantize and moe_ref.dequantize; quantize inputs are f32, as the
    compiled layer's are."""
    q = c["quant"]
    fmt = {"e4m3": "f8E4M3FN", "e5m2": "f8E5M2"}[q.get("element", "e4m3")]
    wblock, ablock, scale = QUANT_FORMATS[q["format"]]

    def qdq(x, block):
        codes, scales = moe_ref.quantize(np.asarray(x, dtype=np.float32), fmt, block, scale)
        return moe_ref.dequantize(codes, scales, fmt, block, scale)

    acts = q["scope"] == "weights+activations"
    w13, w2 = qdq(f64["w13"], wblock), qdq(f64["w2"], wblock)
    ids, w = moe_ref.route(f64["logits"], **kw)
    rows, offsets, slots = moe_ref.permute(f64["x"], ids, c["E"])
    if acts:
        rows = qdq(rows, ablock)
    h = moe_ref.swiglu(moe_ref.grouped_matmul(rows, w13, offsets, f64.get("b13")), act)
    if acts:
        h = qdq(h, ablock)
    return moe_ref.unpermute(moe_ref.grouped_matmul(h, w2, offsets, f64.get("b2")), slots, w)


def check(name, path):
    c, d = CASES[name], inputs(name)
    T, k = c["T"], c["k"]
    f64 = {key: v.astype(np.float64) for key, v in d.items()}
    kw = route_kw(c, f64)
    act = c.get("activation", "silu")
    shared = shared_weights(f64)
    y_ref, ids_ref, w_ref = moe_ref.layer(f64["x"], f64["logits"], f64["w13"], f64["w2"], kw, act,
                                          f64.get("b13"), f64.get("b2"), c.get("pad_to", 1),
                                          shared=shared)
    y_loop = moe_ref.layer_loop(f64["x"], f64["logits"], f64["w13"], f64["w2"], kw, act,
                                f64.get("b13"), f64.get("b2"), shared=shared)
    assert rel_l2(y_loop, y_ref) < 1e-12, "the two numpy references disagree"
    if shared is not None:
        # The shared expert, and its gate, must change the output well past
        # the tolerance, or the case could not fail without them.
        routed, _, _ = moe_ref.layer(f64["x"], f64["logits"], f64["w13"], f64["w2"], kw, act)
        assert rel_l2(routed, y_ref) > 0.1, "the shared expert changes the layer by only %.3g" \
            % rel_l2(routed, y_ref)
        if shared["gate"] is not None:
            ungated, _, _ = moe_ref.layer(f64["x"], f64["logits"], f64["w13"], f64["w2"], kw, act,
                                          shared=dict(shared, gate=None))
            assert rel_l2(ungated, y_ref) > 0.1, "the shared gate changes the layer by only %.3g" \
                % rel_l2(ungated, y_ref)
    # The case must exercise what it is named for, or it could not fail.
    if c.get("groups"):
        ungrouped, _ = moe_ref.route(f64["logits"], **dict(kw, groups=None, top_groups=None))
        assert not np.array_equal(np.sort(ungrouped, 1), np.sort(ids_ref, 1)), \
            "group limiting changes no token's choice"
    if act == "gptoss":
        rows, offsets, _ = moe_ref.permute(f64["x"], ids_ref, c["E"])
        gu = moe_ref.grouped_matmul(rows, f64["w13"], offsets, f64["b13"])
        assert (gu[:, :c["I"]] > 7).any() and (np.abs(gu[:, c["I"]:]) > 7).any(), \
            "inputs never reach the GPT-OSS clamp"
    printed = parse_memrefs(open(path).read())
    if len(printed) != 3:
        sys.exit("FAIL %s: expected 3 printed tensors, got %d" % (name, len(printed)))
    y, ids, w = printed[0], printed[1].reshape(T, k).astype(np.int64), printed[2].reshape(T, k)
    tol = 1e-2 if c.get("dtype") == "bf16" else 1e-5
    failures = []
    unquantized = None
    if "quant" in c:
        # The quantized layer is checked against the reference on dequantized
        # values; its distance to the unquantized layer is what FP8 costs,
        # and must be well above the tolerance or the case could not fail.
        tol, unquantized = 1e-3, y_ref
        y_ref = quantized_layer(c, f64, kw, act)
        assert rel_l2(y_ref, unquantized) > 10 * tol, \
            "quantization changes the layer by only %.3g" % rel_l2(y_ref, unquantized)
    err = rel_l2(y, y_ref)
    if not err <= tol:
        failures.append("layer output rel L2 %.3g > %.g" % (err, tol))
    # Ids as sets per token (order among equals is not part of the contract).
    if not np.array_equal(np.sort(ids, 1), np.sort(ids_ref, 1)):
        failures.append("expert ids differ:\n%s\nvs reference\n%s" % (ids, ids_ref))
    else:
        werr = rel_l2(np.take_along_axis(w, np.argsort(ids, 1), 1),
                      np.take_along_axis(w_ref, np.argsort(ids_ref, 1), 1))
        if not werr <= 1e-5:
            failures.append("routing weights rel L2 %.3g" % werr)
    for cold in c.get("cold", []):
        if (ids == cold).any():
            failures.append("cold expert %d got tokens" % cold)
    if failures:
        sys.exit("FAIL %s: %s" % (name, "; ".join(failures)))
    if unquantized is not None:
        print("PASS %s: rel L2 %.3g against the reference on dequantized values "
              "(tolerance %.g); %.3g against the unquantized f32 layer"
              % (name, err, tol, rel_l2(y, unquantized)))
        return
    print("PASS %s: rel L2 %.3g (tolerance %.g)" % (name, err, tol))


if __name__ == "__main__":
    run_cli(gen, check, "layer_case.py")
