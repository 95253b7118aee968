"""Executable expert-parallel tests: N ranks simulated on the CPU.

`run CASE N --moe-opt PATH --runner 'CMD'` builds the case's layer
(layer_case.py's chain, f32, returning y only) and its seeded inputs, gives
each of N ranks its own tokens (unequal counts: one rank has 1 token and,
from N = 4 on, one has none) and its experts' slices of the expert weights
and biases, then

- runs the one-rank layer (--moe-cpu-reference-pipeline) on all tokens,
  prints y exactly (f32 bits as i32) and checks it against moe_ref.layer;
- rewrites the layer with --moe-expert-parallel=ranks=N
  --moe-split-exchanges and runs it stage by stage: one mlir-runner run per
  stage whose @main calls @layer_stage<s> once per rank with that rank's
  inputs as exact constants and prints every result exactly; between stages
  it performs the exchange in numpy as moe.dispatch / moe.undispatch define
  it and feeds its results and the carried values to the next stage;
- requires each rank's final y to equal the one-rank y's rows of its tokens
  bit for bit, and prints `PASS CASE N=...` with the rows each rank sent and
  received, or `FAIL ...` (exit status 1).

With N = 1 the unsplit ranks-1 program (moe.dispatch / moe.undispatch
lowered with one rank) is also run on all tokens and must match bit for bit.

Guards against a test that cannot fail: for N > 1 some rank sends rows to
every other rank (the skewed case instead: every row goes to rank 0 and the
other ranks receive nothing), ranks get unequal token counts, cold experts
get no rows, the features a case is named for change the reference."""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

import numpy as np

import layer_case
import moe_ref
from backward_case import signature
from mlir_data import literal, rel_l2, tensor_type

BASE = layer_case.CASES
# layer_case configurations with more tokens (so that every rank gets a
# share and sends to every other rank), and Ns: the rank counts the lit
# tests run. `hot_experts`: experts every token prefers by +30 on its logit.
CASES = {
    "mixtral": dict(BASE["mixtral"], T=40, Ns=(1, 2, 4, 8)),
    "qwen3": dict(BASE["qwen3"], T=40, Ns=(1, 2, 4, 8)),
    # layer_case's correction bias (standard deviation 0.5) outweighs the
    # sigmoid scores so that a third of the experts never get a token;
    # scaled by 0.2 it still changes choices and every rank gets rows.
    "deepseek": dict(BASE["deepseek"], T=40, bias_scale=0.2, Ns=(1, 2, 4, 8)),
    # A shared expert (DeepSeek-V3: weight 1, width I) on the combine: it
    # stays replicated, each rank computing it for its own tokens.
    "shared-deepseek": dict(BASE["deepseek"], T=40, bias_scale=0.2, shared=8, Ns=(1, 2, 4, 8)),
    "gptoss": dict(BASE["gptoss"], T=40, Ns=(1, 2, 4, 8)),
    "k1": dict(BASE["k1"], T=16, Ns=(1, 2, 4)),
    # Every token takes experts 0 and 1, which rank 0 owns for every N.
    "skewed": dict(T=16, H=8, I=8, E=16, k=2, routing="softmax_topk", renormalize=True,
                   hot_experts=[0, 1], Ns=(1, 2, 4, 8)),
    # Experts 4 and 5 get no rows: with N = 4 rank 2 owns only cold experts,
    # with N = 8 ranks 4 and 5 do.
    "cold": dict(T=40, H=8, I=8, E=8, k=2, routing="softmax_topk", renormalize=True,
                 cold=[4, 5], Ns=(1, 2, 4, 8)),
    # The fused expert MLP inside a moe.layer.
    "fused-layer": dict(T=16, H=8, I=12, E=4, k=2, routing="softmax_topk", renormalize=True,
                        fused=True, layer=True, Ns=(1, 2, 4)),
}

# Arguments of @layer holding one slice per expert (leading dimension E).
EXPERT_ARGS = ("w13", "w2", "b13", "b2")
TOL = 1e-5


def inputs(name):
    c = CASES[name]
    d = layer_case.inputs(name, c)
    for e in c.get("hot_experts", []):
        d["logits"][:, e] += 30.0
    if "bias_scale" in c:
        d["bias"] = (d["bias"] * c["bias_scale"]).astype(np.float32)
    return d


def split_tokens(T, N):
    """Unequal token counts of N ranks summing to T: rank N-1 has 1 token,
    rank 1 none from N = 4 on, the others T-1 in proportion 1 : 2 : ..."""
    if N == 1:
        return [T]
    sizes = [0] * N
    sizes[N - 1] = 1
    busy = [r for r in range(N - 1) if not (N >= 4 and r == 1)]
    share = np.arange(1, len(busy) + 1, dtype=np.float64)
    share = share / share.sum() * (T - 1)
    counts = np.floor(share).astype(int)
    for i in np.argsort(-(share - counts), kind="stable")[: T - 1 - counts.sum()]:
        counts[i] += 1
    for r, n in zip(busy, counts):
        sizes[r] = int(n)
    return sizes


def rank_inputs(c, d, sizes, N):
    """Each rank's @layer arguments: its tokens' rows of x and logits, its
    experts' slices of the expert weights and biases, the rest as is."""
    L = c["E"] // N
    starts = np.concatenate([[0], np.cumsum(sizes)])
    out = []
    for r in range(N):
        a = {}
        for key, v in d.items():
            if key in ("x", "logits"):
                a[key] = v[starts[r]:starts[r + 1]]
            elif key in EXPERT_ARGS:
                a[key] = v[r * L:(r + 1) * L]
            else:
                a[key] = v
        out.append(a)
    return out

# ------------------------------------------------------------ MLIR text


def dims(t):
    m = re.fullmatch(r"tensor<((?:[0-9?]+x)*)(\w+)>", t)
    if not m:
        raise ValueError("not a ranked tensor type: %s" % t)
    return [None if s == "?" else int(s) for s in m.group(1).split("x")[:-1]], m.group(2)


NP = {"f32": np.float32, "i32": np.int32, "i64": np.int64}


def const_lines(name, value, t):
    """Lines defining %name of type t as an exact constant of value."""
    shape, elt = dims(t)
    if elt not in NP:
        raise ValueError("unsupported element type in %s" % t)
    value = np.asarray(value)
    if len(shape) != value.ndim or any(s is not None and s != n for s, n in zip(shape, value.shape)):
        raise ValueError("%%%s: value of shape %s for %s" % (name, value.shape, t))
    static = tensor_type(value.shape, elt)
    L = ["  %%%s_c = arith.constant %s : %s" % (name, literal(value.astype(NP[elt]), elt), static)]
    if static == t:
        return L, "%%%s_c" % name
    L.append("  %%%s = tensor.cast %%%s_c : %s to %s" % (name, name, static, t))
    return L, "%%%s" % name


def print_lines(v, t, tag):
    """Lines printing value v of type t exactly: integers as they are, f32
    as its bits (i32)."""
    shape, elt = dims(t)
    L = []
    if elt == "f32":
        ids = ["d%d" % i for i in range(len(shape))]
        dyn = []
        for i, s in enumerate(shape):
            if s is None:
                L.append("  %%%s_i%d = arith.constant %d : index" % (tag, i, i))
                L.append("  %%%s_n%d = tensor.dim %s, %%%s_i%d : %s" % (tag, i, v, tag, i, t))
                dyn.append("%%%s_n%d" % (tag, i))
        it = t.replace("xf32>", "xi32>")
        amap = "affine_map<(%s) -> (%s)>" % (", ".join(ids), ", ".join(ids))
        L.append("  %%%s_e = tensor.empty(%s) : %s" % (tag, ", ".join(dyn), it))
        L.append("  %%%s_b = linalg.generic {indexing_maps = [%s, %s], iterator_types = [%s]} "
                 "ins(%s : %s) outs(%%%s_e : %s) {" % (tag, amap, amap,
                                                      ", ".join(['"parallel"'] * len(shape)),
                                                      v, t, tag, it))
        L.append("  ^bb0(%%%s_a: f32, %%%s_o: i32):" % (tag, tag))
        L.append("    %%%s_r = arith.bitcast %%%s_a : f32 to i32" % (tag, tag))
        L.append("    linalg.yield %%%s_r : i32" % tag)
        L.append("  } -> %s" % it)
        v, t, elt = "%%%s_b" % tag, it, "i32"
    fn = {"i32": "I32", "i64": "I64"}[elt]
    L.append("  %%%s_u = tensor.cast %s : %s to tensor<*x%s>" % (tag, v, t, elt))
    L.append("  func.call @printMemref%s(%%%s_u) : (tensor<*x%s>) -> ()" % (fn, tag, elt))
    return L


PRINTERS = ["func.func private @printMemrefI32(tensor<*xi32>)",
            "func.func private @printMemrefI64(tensor<*xi64>)"]


def with_main(module, main):
    """module (printed MLIR) with the lines `main` added before its closing
    brace, and the print functions declared."""
    resources = module.find("\n{-#")
    body, tail = (module, "") if resources < 0 else (module[:resources], module[resources:])
    body = body.rstrip()
    if not body.startswith("module"):
        body = "module {\n" + body + "\n}"
    end = body.rfind("}")
    decls = [p for p in PRINTERS if not re.search(r"@%s\b" % p.split("@")[1].split("(")[0], body)]
    return body[:end] + "\n".join("  " + line for line in decls + main) + "\n}" + tail


def parse_printed(text, types):
    """The memrefs printMemref printed, as numpy arrays of the given types
    (f32 from its bits); sizes come from each header (printMemref prints
    garbage for an empty memref)."""
    chunks = text.split("Unranked Memref")[1:]
    if len(chunks) != len(types):
        raise RuntimeError("expected %d printed tensors, got %d" % (len(types), len(chunks)))
    out = []
    for chunk, t in zip(chunks, types):
        sizes = [int(s) for s in re.search(r"sizes = \[([^\]]*)\]", chunk).group(1).split(",")
                 if s.strip()]
        n = int(np.prod(sizes)) if sizes else 1
        vals = re.findall(r"-?\d+", chunk.split("data =", 1)[1]) if n else []
        if len(vals) != n:
            raise RuntimeError("printed %d values for sizes %s" % (len(vals), sizes))
        elt = dims(t)[1]
        if elt == "f32":
            a = np.array([int(v) for v in vals], dtype=np.int64).astype(np.int32).view(np.float32)
        else:
            a = np.array([int(v) for v in vals], dtype=NP[elt])
        out.append(a.reshape(sizes))
    return out


class Tools:
    def __init__(self, moe_opt, runner, work):
        self.moe_opt, self.runner, self.work = moe_opt, shlex.split(runner), work

    def opt(self, text, flags, tag):
        path = os.path.join(self.work, tag + ".mlir")
        with open(path, "w") as f:
            f.write(text)
        p = subprocess.run([self.moe_opt, path] + flags, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError("moe-opt %s %s failed:\n%s" % (path, " ".join(flags), p.stderr))
        return p.stdout

    def execute(self, text, tag):
        """What mlir-runner prints for the module text after the CPU
        reference pipeline."""
        lowered = self.opt(text, ["--moe-cpu-reference-pipeline"], tag)
        path = os.path.join(self.work, tag + ".ll.mlir")
        with open(path, "w") as f:
            f.write(lowered)
        p = subprocess.run(self.runner + [path], capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError("%s %s failed:\n%s" % (" ".join(self.runner), path, p.stderr))
        with open(os.path.join(self.work, tag + ".out"), "w") as f:
            f.write(p.stdout)
        return p.stdout


def call_and_print(fn, arg_types, result_types, ranks_args, prefix="r"):
    """@main lines calling @fn once per rank on that rank's argument values
    (constants) and printing every result."""
    L = ["func.func @main() {"]
    for r, values in enumerate(ranks_args):
        names = []
        for i, (v, t) in enumerate(zip(values, arg_types)):
            lines, name = const_lines("%s%d_a%d" % (prefix, r, i), v, t)
            L += lines
            names.append(name)
        n = len(result_types)
        res = "%%%s%d_res" % (prefix, r)
        L.append("  %s%s = func.call @%s(%s) : (%s) -> (%s)"
                 % (res, ":%d" % n if n > 1 else "", fn, ", ".join(names), ", ".join(arg_types),
                    ", ".join(result_types)))
        for j, t in enumerate(result_types):
            v = "%s#%d" % (res, j) if n > 1 else res
            L += print_lines(v, t, "%s%d_p%d" % (prefix, r, j))
    L.append("  return")
    L.append("}")
    return L

# ------------------------------------------------------------ exchanges


def clamped_ranges(offsets, M):
    """[lo, hi) of each expert as moe.grouped_matmul reads offsets: ranges
    never overlap or leave [0, M)."""
    out, end = [], 0
    for e in range(len(offsets) - 1):
        lo = min(max(int(offsets[e]), end), M)
        hi = min(max(int(offsets[e + 1]), lo), M)
        out.append((lo, hi))
        end = hi
    return out


def dispatch(operands, N):
    """moe.dispatch on every rank: operands[r] = (rows, offsets); returns
    each rank's (received, local_ids, counts) and sent[s][d], the rows s
    sent to d."""
    E = len(operands[0][1]) - 1
    L = E // N
    parts = [[None] * N for _ in range(N)]
    for s, (rows, offsets) in enumerate(operands):
        ranges = clamped_ranges(offsets, rows.shape[0])
        for d in range(N):
            chunk = [rows[lo:hi] for lo, hi in ranges[d * L:(d + 1) * L]]
            ids = [np.full(hi - lo, e - d * L, dtype=np.int32)
                   for e, (lo, hi) in enumerate(ranges[d * L:(d + 1) * L], start=d * L)]
            parts[s][d] = (np.concatenate(chunk).reshape(-1, rows.shape[1]), np.concatenate(ids))
    results = []
    for d in range(N):
        recv = np.concatenate([parts[s][d][0] for s in range(N)]).astype(np.float32)
        ids = np.concatenate([parts[s][d][1] for s in range(N)]).reshape(-1, 1).astype(np.int32)
        counts = np.array([len(parts[s][d][1]) for s in range(N)], dtype=np.int64)
        results.append((recv, ids, counts))
    sent = [[len(parts[s][d][1]) for d in range(N)] for s in range(N)]
    return results, sent


def undispatch(operands, N):
    """moe.undispatch on every rank: operands[d] = (rows, counts, offsets);
    returns each rank's result and sent[d][r], the rows d returned to r."""
    E = len(operands[0][2]) - 1
    L = E // N
    H = operands[0][0].shape[1]
    pieces = []
    for d, (rows, counts, _) in enumerate(operands):
        if len(counts) != N or counts.min() < 0 or counts.sum() != rows.shape[0]:
            raise RuntimeError("undispatch on rank %d: counts %s for %d rows"
                               % (d, counts.tolist(), rows.shape[0]))
        cut = np.concatenate([[0], np.cumsum(counts)])
        pieces.append([rows[cut[r]:cut[r + 1]] for r in range(N)])
    results = []
    for r, (_, _, offsets) in enumerate(operands):
        total = max(int(offsets[E]), 0)
        out = np.zeros((total, H), dtype=np.float32)
        ranges = clamped_ranges(offsets, total)
        for d in range(N):
            lo, hi = ranges[d * L][0], ranges[(d + 1) * L - 1][1]
            back = pieces[d][r]
            if back.shape[0] != hi - lo:
                raise RuntimeError("undispatch: rank %d returns %d rows to rank %d, which sent "
                                   "it %d" % (d, back.shape[0], r, hi - lo))
            out[lo:hi] = back
        results.append((out,))
    sent = [[pieces[d][r].shape[0] for r in range(N)] for d in range(N)]
    return results, sent


EXCHANGES = {"moe.dispatch": (dispatch, 2, 3), "moe.undispatch": (undispatch, 3, 1)}

# ------------------------------------------------------------------ run


def stage_functions(module):
    """[(arg types, result types, attributes text)] of @layer_stage0.. in
    order; checks that @layer is gone."""
    if re.search(r"func\.func\s+(?:\w+\s+)*@layer\s*\(", module):
        raise RuntimeError("--moe-split-exchanges left @layer in the module")
    stages = []
    while True:
        fn = "layer_stage%d" % len(stages)
        m = re.search(r"func\.func\s+(?:\w+\s+)*@%s\s*\(.*" % fn, module)
        if not m:
            break
        args, results = signature(module, fn)
        attrs = re.search(r"\battributes\s*(\{.*)$", m.group(0))
        stages.append((args, results, attrs.group(1) if attrs else ""))
    return stages


def attr(attrs, key, kind):
    m = re.search(r"\b%s\s*=\s*%s" % (re.escape(key), {"str": r'"([^"]*)"', "int": r"(-?\d+)"}[kind]),
                  attrs)
    if m is None:
        return None
    return m.group(1) if kind == "str" else int(m.group(1))


def reference(c, d):
    p = {key: v.astype(np.float64) for key, v in d.items()}
    kw = layer_case.route_kw(c, p)
    act = c.get("activation", "silu")
    y, ids, _ = moe_ref.layer(p["x"], p["logits"], p["w13"], p["w2"], kw, act, p.get("b13"),
                              p.get("b2"), shared=layer_case.shared_weights(p))
    return p, kw, act, y, ids


def case_guards(name, c, d, N, sizes):
    """Reasons the case cannot fail or does not exercise what it is named
    for, before anything runs."""
    p, kw, act, y_ref, ids = reference(c, d)
    out = []
    if N > 1 and len(set(sizes)) == 1:
        out.append("every rank has %d tokens" % sizes[0])
    if N > 1 and 1 not in sizes:
        out.append("no rank has a single token")
    for e in c.get("cold", []):
        if (ids == e).any():
            out.append("cold expert %d got tokens" % e)
    if c.get("hot_experts") and not np.isin(ids, c["hot_experts"]).all():
        out.append("a token chose an expert that is not hot")
    if c.get("groups"):
        free, _ = moe_ref.route(p["logits"], **dict(kw, groups=None, top_groups=None))
        if np.array_equal(np.sort(free, 1), np.sort(ids, 1)):
            out.append("group limiting changes no token's choice")
    if kw.get("bias") is not None:
        unbiased, _ = moe_ref.route(p["logits"], **dict(kw, bias=None))
        if np.array_equal(np.sort(unbiased, 1), np.sort(ids, 1)):
            out.append("the correction bias changes no token's choice")
    if act == "gptoss":
        rows, offsets, _ = moe_ref.permute(p["x"], ids, c["E"])
        gu = moe_ref.grouped_matmul(rows, p["w13"], offsets, p["b13"])
        if not ((gu[:, :c["I"]] > 7).any() and (np.abs(gu[:, c["I"]:]) > 7).any()):
            out.append("inputs never reach the GPT-OSS clamp")
    if "sw13" in d:
        routed, _, _ = moe_ref.layer(p["x"], p["logits"], p["w13"], p["w2"], kw, act)
        if not rel_l2(routed, y_ref) > 0.1:
            out.append("the shared expert changes the layer by only %.3g" % rel_l2(routed, y_ref))
    return out, y_ref, np.bincount(ids.ravel(), minlength=c["E"])


def exchange_guards(name, c, N, sent, sizes, counts):
    """Reasons the dispatch's traffic (sent[s][d]) shows the case moves no
    data across ranks, or not in the way the case is named for."""
    sent = np.array(sent)
    if sent.sum(1).tolist() != [n * c["k"] for n in sizes]:
        return ["ranks sent %s rows, not k times their tokens" % sent.sum(1).tolist()]
    if N == 1:
        return []
    L = c["E"] // N
    off = sent - np.diag(np.diag(sent))
    if name == "skewed":
        out = []
        if off[:, 1:].any() or sent[:, 1:].any():
            out.append("rows went to ranks other than 0: %s" % sent.tolist())
        if not all(off[s, 0] == sizes[s] * c["k"] for s in range(1, N)):
            out.append("a rank kept rows or sent rank 0 fewer than all: %s" % sent.tolist())
        return out
    # Ranks owning only experts without rows (cold) receive nothing; some
    # rank must send rows to every other rank.
    live = [d for d in range(N) if (counts[d * L:(d + 1) * L] > 0).any()]
    idle = [d for d in range(N) if d not in live]
    out = []
    if c.get("cold") and N >= 4 and not idle:
        out.append("no rank owns only cold experts")
    if not c.get("cold") and idle:
        out.append("ranks %s get no rows" % idle)
    if sent[:, idle].any():
        out.append("ranks %s own only experts without rows but received some: %s"
                   % (idle, sent.tolist()))
    if not any(all(off[s, d] > 0 for d in live if d != s) for s in range(N)):
        out.append("no rank sends rows to every other rank owning an expert with rows: %s"
                   % sent.tolist())
    return out


def run(name, N, moe_opt, runner, work):
    c, d = CASES[name], inputs(name)
    E, H = c["E"], c["H"]
    if E % N:
        sys.exit("FAIL %s N=%d: N does not divide E = %d" % (name, N, E))
    tools = Tools(moe_opt, runner, work)
    sizes = split_tokens(c["T"], N)
    reasons, y_ref, counts = case_guards(name, c, d, N, sizes)
    if reasons:
        sys.exit("FAIL %s N=%d: the case cannot fail as it stands: %s"
                 % (name, N, "; ".join(reasons)))
    args = layer_case.layer_args(c, d)
    arg_types = [t for _, t in args]
    y_t = tensor_type([None, H], "f32")
    layer = "\n".join(layer_case.layer_func(c, d, routing_results=False)) + "\n"

    # The one-rank layer on all tokens.
    base_main = call_and_print("layer", arg_types, [y_t], [[d[a] for a, _ in args]])
    out = tools.execute(with_main(layer, base_main), "one-rank")
    y1 = parse_printed(out, [y_t])[0]
    err = rel_l2(y1, y_ref)
    if not err <= TOL:
        sys.exit("FAIL %s N=%d: the one-rank layer is %.3g from moe_ref.layer (tolerance %.g)"
                 % (name, N, err, TOL))

    failures = []
    notes = []
    if N == 1:
        # The unsplit ranks-1 program, its exchanges lowered with one rank.
        ep1 = tools.opt(layer, ["--moe-expert-parallel=ranks=1"], "ep1")
        out = tools.execute(with_main(ep1, base_main), "ep1-unsplit")
        y = parse_printed(out, [y_t])[0]
        if y.shape != y1.shape or y.view(np.int32).tolist() != y1.view(np.int32).tolist():
            failures.append("the unsplit ranks-1 program's y differs from the one-rank layer's "
                            "(%s)" % mismatch(y, y1))
        else:
            notes.append("unsplit ranks-1 program bit-equal")

    # The EP program, stage by stage.
    split = tools.opt(layer, ["--moe-expert-parallel=ranks=%d" % N, "--moe-split-exchanges"],
                      "ep-split")
    stages = stage_functions(split)
    per_rank = rank_inputs(c, d, sizes, N)
    L = E // N
    expected = [t if a not in EXPERT_ARGS else
                re.sub(r"tensor<%d(x|>)" % E, r"tensor<%d\1" % L, t) for a, t in args]
    problems = []
    if len(stages) < 2:
        problems.append("%d stage functions" % len(stages))
    values = [[] for _ in range(N)]  # exchange results and carried values
    traffic = []
    for s, (s_args, s_results, attrs) in enumerate(stages):
        if attr(attrs, "moe.stage", "int") != s:
            problems.append("@layer_stage%d has moe.stage %s" % (s, attr(attrs, "moe.stage", "int")))
        if s_args[:len(args)] != expected:
            problems.append("@layer_stage%d takes (%s) first, not the rank's @layer arguments (%s)"
                            % (s, ", ".join(s_args[:len(args)]), ", ".join(expected)))
        if problems:
            break
        ranks_args = []
        for r in range(N):
            ranks_args.append([per_rank[r][a] for a, _ in args] + values[r])
        if len(s_args) != len(ranks_args[0]):
            problems.append("@layer_stage%d takes %d arguments; the contract gives it %d"
                            % (s, len(s_args), len(ranks_args[0])))
            break
        main = call_and_print("layer_stage%d" % s, s_args, s_results, ranks_args)
        out = tools.execute(with_main(split, main), "stage%d" % s)
        printed = parse_printed(out, s_results * N)
        results = [printed[r * len(s_results):(r + 1) * len(s_results)] for r in range(N)]
        if s == len(stages) - 1:
            if s_results != [y_t] or attr(attrs, "moe.exchange", "str") is not None:
                problems.append("the last stage returns (%s) and names exchange %s, not @layer's "
                                "result (%s) alone" % (", ".join(s_results),
                                                        attr(attrs, "moe.exchange", "str"), y_t))
            final = [res[0] for res in results]
            break
        op = attr(attrs, "moe.exchange", "str")
        n_ops = attr(attrs, "moe.exchange_operands", "int")
        ranks = attr(attrs, "moe.exchange_ranks", "int")
        if op not in EXCHANGES or ranks != N or n_ops != EXCHANGES[op][1]:
            problems.append("@layer_stage%d names exchange %s ranks %s operands %s"
                            % (s, op, ranks, n_ops))
            break
        fn, _, n_res = EXCHANGES[op]
        try:
            exch, sent = fn([tuple(res[:n_ops]) for res in results], N)
        except RuntimeError as e:
            problems.append("exchange %d (%s): %s" % (s, op, e))
            break
        traffic.append((op, sent))
        values = [list(exch[r]) + results[r][n_ops:] for r in range(N)]
        want = s_results[n_ops:]
        nxt = stages[s + 1][0][len(args):]
        if nxt[n_res:] != want:
            problems.append("@layer_stage%d takes carried values (%s), stage %d carries (%s)"
                            % (s + 1, ", ".join(nxt[n_res:]), s, ", ".join(want)))
            break
    if problems:
        sys.exit("FAIL %s N=%d: %s" % (name, N, "; ".join(problems)))

    starts = np.concatenate([[0], np.cumsum(sizes)])
    for r in range(N):
        want = y1[starts[r]:starts[r + 1]]
        got = final[r]
        if got.shape != want.shape:
            failures.append("rank %d: y of shape %s, not %s" % (r, got.shape, want.shape))
        elif got.view(np.int32).tolist() != want.view(np.int32).tolist():
            failures.append("rank %d: y differs from the one-rank rows %d..%d (%s)"
                            % (r, starts[r], starts[r + 1], mismatch(got, want)))
        elif want.size and not np.abs(want).max() > 0:
            failures.append("rank %d: y is all zeros" % r)
    dispatches = [sent for op, sent in traffic if op == "moe.dispatch"]
    if not dispatches:
        failures.append("no moe.dispatch among the exchanges")
    else:
        failures += exchange_guards(name, c, N, dispatches[0], sizes, counts)
    for op, sent in traffic:
        if op == "moe.undispatch" and dispatches and np.array(sent).T.tolist() != dispatches[0]:
            failures.append("undispatch returned %s rows, not what dispatch sent (%s)"
                            % (np.array(sent).T.tolist(), dispatches[0]))
    if failures:
        sys.exit("FAIL %s N=%d: %s" % (name, N, "; ".join(failures)))
    sent = np.array(dispatches[0])
    cross = int(sent.sum() - np.trace(sent))
    print("PASS %s N=%d: y bit-equal to the one-rank layer on every rank (T_r = %s; one-rank "
          "y %.3g from moe_ref.layer); dispatch rows sent per rank %s, received %s, %d across "
          "ranks; %d stages%s"
          % (name, N, sizes, err, sent.sum(1).tolist(), sent.sum(0).tolist(), cross,
             len(stages), "; " + "; ".join(notes) if notes else ""))


def mismatch(got, want):
    if got.shape != want.shape:
        return "shapes %s vs %s" % (got.shape, want.shape)
    bad = np.argwhere(got.view(np.int32) != want.view(np.int32))
    i = tuple(int(v) for v in bad[0])
    return "%d elements differ, first at %s: %r (0x%08x) vs %r (0x%08x)" % (
        len(bad), list(i), float(got[i]), got.view(np.uint32)[i], float(want[i]),
        want.view(np.uint32)[i])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("case", choices=sorted(CASES))
    r.add_argument("N", type=int)
    r.add_argument("--moe-opt", required=True)
    r.add_argument("--runner", required=True, help="mlir-runner command line, one string")
    r.add_argument("--work", help="keep the intermediate files in this directory")
    a = ap.parse_args()
    if a.work:
        os.makedirs(a.work, exist_ok=True)
        work = a.work
    else:
        tmp = tempfile.TemporaryDirectory(prefix="ep_case.")
        work = tmp.name
    try:
        run(a.case, a.N, a.moe_opt, a.runner, work)
    except (RuntimeError, ValueError) as e:
        sys.exit("FAIL %s N=%d: %s" % (a.case, a.N, e))


if __name__ == "__main__":
    main()
