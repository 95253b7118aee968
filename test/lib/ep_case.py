"""Executable expert-parallel tests: N ranks simulated on the CPU.

(Over 800 lines on purpose: the forward and the backward simulations share
one stage runner, one exchange implementation and one set of contract
checks, which a split would have to pass back and forth.)

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
  values its moe.stage_args name (exact constants) and prints every result
  exactly; between stages it performs the exchange in numpy as moe.dispatch
  / moe.undispatch define it on the values its moe.exchange_args name;
- requires each rank's final y to equal the one-rank y's rows of its tokens
  bit for bit, and prints `PASS CASE N=...` with the rows each rank sent and
  received, or `FAIL ...` (exit status 1).

With N = 1 the unsplit ranks-1 program (moe.dispatch / moe.undispatch
lowered with one rank) is also run on all tokens and must match bit for bit.

`run CASE N --backward ...` checks the training pair instead
(--moe-generate-backward, docs/training.md), with a seeded dy [T, H] (f32):

- the one-rank layer's @layer_train then @layer_backward on all tokens give
  y and every gradient exactly; they must be within TOL (relative L2) of
  moe_ref.layer and moe_grad_ref.layer_backward;
- --moe-expert-parallel=ranks=N --moe-generate-backward --moe-split-exchanges
  gives @layer_train_stage0.. and @layer_backward_stage0..; each runs stage
  by stage as above (the exchanges as each stage's attributes name them),
  the train stages on each rank's @layer arguments, the backward stages on
  that rank's final train results after y (its saved values) and its rows
  of dy;
- each rank's y, dx and dlogits must equal the one-rank rows of its tokens
  bit for bit, its expert gradients (dw13, dw2, db13, db2) the one-rank
  gradients' slice [r*L, (r+1)*L). The replicated shared expert's weight
  gradients (dsw13, dsw2, dsgate) are each rank's own tokens' part: their
  sum over the ranks must be within TOL of the one-rank gradient (the sum
  over tokens restarts on each rank, so it need not be bit-equal); with
  N = 1 they must be bit-equal too;
- the backward's dispatch must send as many rows as the train dispatch,
  with the same local ids and counts, and its undispatch return them.
`--recompute-gate-up` passes recompute-gate-up=true to both backwards.

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

import backward_case
import layer_case
import moe_grad_ref
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


def stage_functions(module, fn="layer"):
    """[(arg types, result types, attributes text)] of @<fn>_stage0.. in
    order; checks that @fn is gone."""
    if re.search(r"func\.func\s+(?:\w+\s+)*@%s\s*\(" % re.escape(fn), module):
        raise RuntimeError("--moe-split-exchanges left @%s in the module" % fn)
    stages = []
    while True:
        name = "%s_stage%d" % (fn, len(stages))
        m = re.search(r"func\.func\s+(?:\w+\s+)*@%s\s*\(.*" % name, module)
        if not m:
            break
        args, results = signature(module, name)
        attrs = re.search(r"\battributes\s*(\{.*)$", m.group(0))
        stages.append((args, results, attrs.group(1) if attrs else ""))
    return stages


def attr(attrs, key, kind):
    m = re.search(r"\b%s\s*=\s*%s" % (re.escape(key), {"str": r'"([^"]*)"', "int": r"(-?\d+)",
                                                     "names": r"\[([^\]]*)\]"}[kind]),
                  attrs)
    if m is None:
        return None
    if kind == "names":
        return re.findall(r'"([^"]*)"', m.group(1))
    return m.group(1) if kind == "str" else int(m.group(1))


def rank_types(c, args, N):
    """The types of @layer's arguments [(name, type)] on one of N ranks: the
    expert arguments' leading dimension E becomes L = E / N."""
    E, L = c["E"], c["E"] // N
    return [t if a not in EXPERT_ARGS else re.sub(r"tensor<%d(x|>)" % E, r"tensor<%d\1" % L, t)
            for a, t in args]


def run_stages(tools, module, fn, fixed, fixed_types, final_types, N, tag):
    """Runs @<fn>_stage0.. of the split module on N ranks as the
    split-exchanges contract says: each rank keeps its named values (its
    @fn arguments fixed[r], of types fixed_types, under the names
    moe.function_args gives them); stage s runs
    on every rank (one mlir-runner run) with the values its moe.stage_args
    name and adds its results under its moe.stage_results; then the
    exchange it names (moe.exchange on the values moe.exchange_args name,
    done in numpy) adds its results under moe.exchange_results. The last
    stage names no exchange, and @fn's results (of final_types) are the
    values its moe.function_results names. Returns (each
    rank's last-stage results, [(exchange op, rows sent, each rank's
    exchange results)], the number of stages, problems: how the program
    breaks the contract, if it does)."""
    stages = stage_functions(module, fn)
    problems = []
    if len(stages) < 2:
        problems.append("%d stage functions of @%s" % (len(stages), fn))
    inputs = attr(stages[0][2], "moe.function_args", "names") if stages else None
    if inputs is None or len(inputs) != len(fixed_types):
        problems.append("@%s_stage0 names @%s's arguments %s, not %d of them"
                        % (fn, fn, inputs, len(fixed_types)))
        return None, [], len(stages), problems
    values = [dict(zip(inputs, fixed[r])) for r in range(N)]
    types = dict(zip(inputs, fixed_types))
    traffic = []
    final = None
    for s, (s_args, s_results, attrs) in enumerate(stages):
        stage = "@%s_stage%d" % (fn, s)
        last = s == len(stages) - 1
        if attr(attrs, "moe.stage", "int") != s:
            problems.append("%s has moe.stage %s" % (stage, attr(attrs, "moe.stage", "int")))
        names = attr(attrs, "moe.stage_args", "names")
        outs = attr(attrs, "moe.stage_results", "names")
        if names is None or len(names) != len(s_args) or outs is None or \
                len(outs) != len(s_results):
            problems.append("%s names %s arguments and %s results for its %d and %d"
                            % (stage, names, outs, len(s_args), len(s_results)))
        elif any(n not in types for n in names):
            problems.append("%s takes %s, which no earlier stage or exchange gave"
                            % (stage, [n for n in names if n not in types]))
        elif any(types[n] not in (t, None) for n, t in zip(names, s_args)):
            problems.append("%s takes (%s) as (%s), which are (%s)"
                            % (stage, ", ".join(names), ", ".join(s_args),
                               ", ".join(types[n] for n in names)))
        if problems:
            break
        main = call_and_print("%s_stage%d" % (fn, s), s_args, s_results,
                              [[values[r][n] for n in names] for r in range(N)])
        out = tools.execute(with_main(module, main), "%s%d" % (tag, s))
        printed = parse_printed(out, s_results * N)
        results = [printed[r * len(s_results):(r + 1) * len(s_results)] for r in range(N)]
        for r in range(N):
            values[r].update(zip(outs, results[r]))
        types.update(zip(outs, s_results))
        if last:
            # @fn's results: the named values moe.function_results lists.
            fres = attr(attrs, "moe.function_results", "names")
            if attr(attrs, "moe.exchange", "str") is not None or fres is None or \
                    len(fres) != len(final_types) or any(n not in types for n in fres) or \
                    any(types[n] not in (t, None) for n, t in zip(fres, final_types)):
                problems.append("the last stage names exchange %s and @%s's results %s, "
                                "not (%s)" % (attr(attrs, "moe.exchange", "str"), fn, fres,
                                              ", ".join(final_types)))
            else:
                final = [[values[r][n] for n in fres] for r in range(N)]
            break
        op = attr(attrs, "moe.exchange", "str")
        ins = attr(attrs, "moe.exchange_args", "names")
        res = attr(attrs, "moe.exchange_results", "names")
        ranks = attr(attrs, "moe.exchange_ranks", "int")
        if op not in EXCHANGES or ranks != N or ins is None or res is None or \
                len(ins) != EXCHANGES[op][1] or len(res) != EXCHANGES[op][2] or \
                any(n not in types for n in ins):
            problems.append("%s names exchange %s ranks %s of %s giving %s"
                            % (stage, op, ranks, ins, res))
            break
        exchange = EXCHANGES[op][0]
        try:
            exch, sent = exchange([tuple(values[r][n] for n in ins) for r in range(N)], N)
        except RuntimeError as e:
            problems.append("exchange %d of @%s (%s): %s" % (s, fn, op, e))
            break
        traffic.append((op, sent, exch))
        for r in range(N):
            values[r].update(zip(res, exch[r]))
        # An exchange's results are typed as the stages that take them say.
        types.update((n, None) for n in res)
    return final, traffic, len(stages), problems


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
    per_rank = rank_inputs(c, d, sizes, N)
    expected = rank_types(c, args, N)
    results, traffic, n_stages, problems = run_stages(
        tools, split, "layer", [[per_rank[r][a] for a, _ in args] for r in range(N)], expected,
        [y_t], N, "stage")
    if problems:
        sys.exit("FAIL %s N=%d: %s" % (name, N, "; ".join(problems)))
    final = [res[0] for res in results]
    traffic = [(op, sent) for op, sent, _ in traffic]

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
             n_stages, "; " + "; ".join(notes) if notes else ""))


# ------------------------------------------------------------- backward

# Gradients with one row per token (each rank's tokens' rows) and those of
# the replicated shared expert (each rank's own tokens' part: summed over
# the ranks, they are the one-rank gradient).
TOKEN_ARGS = ("x", "logits", "w")
SHARED_ARGS = ("sw13", "sw2", "sgate")


def upstream(name, c):
    """dy, the seeded f32 gradient of the loss with respect to y [T, H]."""
    rng = np.random.default_rng(sum(map(ord, "ep dy " + name)))
    return rng.standard_normal((c["T"], c["H"])).astype(np.float32)


def gradient_of(module, fn):
    """The argument numbers of @fn's moe.gradient_of attribute, or None."""
    m = re.search(r"func\.func\s+(?:\w+\s+)*@%s\s*\(.*" % re.escape(fn), module)
    g = m and re.search(r"moe\.gradient_of\s*=\s*array<i64(?::([-\d,\s]*))?>", m.group(0))
    if not g:
        return None
    return [int(v) for v in g.group(1).split(",")] if g.group(1) else []


def train_backward_main(arg_types, train_results, bwd_results, values, dy):
    """@main lines calling @layer_train on values (constants), then
    @layer_backward on train's saved values and dy, printing y and every
    gradient exactly."""
    L = ["func.func @main() {"]
    names = []
    for i, (v, t) in enumerate(zip(values, arg_types)):
        lines, name = const_lines("a%d" % i, v, t)
        L += lines
        names.append(name)
    lines, dy_name = const_lines("dy", dy, train_results[0])
    L += lines
    n, m = len(train_results), len(bwd_results)
    L.append("  %%train:%d = func.call @layer_train(%s) : (%s) -> (%s)"
             % (n, ", ".join(names), ", ".join(arg_types), ", ".join(train_results)))
    saved = ["%%train#%d" % i for i in range(1, n)]
    L.append("  %%grad:%d = func.call @layer_backward(%s) : (%s) -> (%s)"
             % (m, ", ".join(saved + [dy_name]), ", ".join(train_results[1:] + train_results[:1]),
                ", ".join(bwd_results)))
    L += print_lines("%train#0", train_results[0], "py")
    for j, t in enumerate(bwd_results):
        L += print_lines("%%grad#%d" % j, t, "pg%d" % j)
    L.append("  return")
    L.append("}")
    return L


def backward_contract(module, args, y_t, rank_arg_types=None):
    """(train results, backward arguments, backward results, the argument
    names of the gradients, problems) of @layer_train and @layer_backward
    in module against --moe-generate-backward's contract: train takes
    @layer's arguments (rank_arg_types: a rank's, default args' own types)
    and returns y first; backward takes train's other results and dy and
    returns one gradient per argument of moe.gradient_of, of its type."""
    arg_types = rank_arg_types or [t for _, t in args]
    train_args, train_results = signature(module, "layer_train")
    bwd_args, bwd_results = signature(module, "layer_backward")
    grads = gradient_of(module, "layer_backward")
    problems = []
    if train_args != arg_types:
        problems.append("@layer_train takes (%s), not @layer's (%s)"
                        % (", ".join(train_args), ", ".join(arg_types)))
    if train_results[:1] != [y_t]:
        problems.append("@layer_train's first result is not y (%s)" % y_t)
    if bwd_args != train_results[1:] + [y_t]:
        problems.append("@layer_backward takes (%s), not train's saved values and dy (%s)"
                        % (", ".join(bwd_args), ", ".join(train_results[1:] + [y_t])))
    if grads is None or any(not 0 <= i < len(args) for i in grads):
        problems.append("@layer_backward's moe.gradient_of is %s" % grads)
        grads = []
    elif bwd_results != [arg_types[i] for i in grads]:
        problems.append("@layer_backward returns (%s), not the gradients of %s (%s)"
                        % (", ".join(bwd_results), ", ".join(args[i][0] for i in grads),
                           ", ".join(arg_types[i] for i in grads)))
    return train_results, bwd_args, bwd_results, [args[i][0] for i in grads], problems


def backward_guards(c, p, kw, act, dy, g_ref, N, sizes):
    """Reasons the backward case cannot fail as it stands: zeros in dy, a
    gradient that is zero, GPT-OSS clamps that do not change the
    gradients, a shared expert too weak to matter, shared-expert gradients
    that one rank alone computes."""
    dy64 = dy.astype(np.float64)
    out = []
    if not (dy != 0).all():
        out.append("dy has zeros")
    for a, g in g_ref.items():
        if not np.linalg.norm(g) > 0:
            out.append("the reference's d%s is zero" % a)
    if act == "gptoss":
        f = moe_grad_ref.forward_parts(p, kw, activation=act)
        out += backward_case._clamp_guards(c, p, f, g_ref, dy64)
    out += moe_grad_ref.shared_guards(p, dy64, kw, activation=act)
    if "sw13" in p and N > 1 and sum(1 for n in sizes if n) < 2:
        out.append("one rank has every token: the shared gradients are not a sum over ranks")
    return out


def bits_equal(got, want):
    return got.shape == want.shape and got.view(np.int32).tolist() == want.view(np.int32).tolist()


def run_backward(name, N, moe_opt, runner, work, recompute=False):
    c, d = CASES[name], inputs(name)
    E, H = c["E"], c["H"]
    if E % N:
        sys.exit("FAIL %s N=%d backward: N does not divide E = %d" % (name, N, E))
    fail = lambda why: sys.exit("FAIL %s N=%d backward: %s" % (name, N, why))
    tools = Tools(moe_opt, runner, work)
    sizes = split_tokens(c["T"], N)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    L = E // N
    dy = upstream(name, c)
    reasons, y_ref, counts = case_guards(name, c, d, N, sizes)
    p, kw, act, _, _ = reference(c, d)
    g_ref = moe_grad_ref.layer_backward(p, dy.astype(np.float64), kw, activation=act)
    reasons += backward_guards(c, p, kw, act, dy, g_ref, N, sizes)
    if reasons:
        fail("the case cannot fail as it stands: %s" % "; ".join(reasons))
    args = layer_case.layer_args(c, d)
    arg_types = [t for _, t in args]
    y_t = tensor_type([None, H], "f32")
    layer = "\n".join(layer_case.layer_func(c, d, routing_results=False)) + "\n"
    generate = "--moe-generate-backward" + ("=recompute-gate-up=true" if recompute else "")

    # The one-rank layer's train and backward on all tokens.
    one = tools.opt(layer, [generate], "one-rank-bwd")
    train_results, _, bwd_results, grads, problems = backward_contract(one, args, y_t)
    if problems:
        fail("one-rank: " + "; ".join(problems))
    if sorted(grads) != sorted(g_ref):
        fail("the one-rank backward returns the gradients of %s, the reference those of %s"
             % (grads, sorted(g_ref)))
    main = train_backward_main(arg_types, train_results, bwd_results, [d[a] for a, _ in args], dy)
    out = tools.execute(with_main(one, main), "one-rank-bwd")
    printed = parse_printed(out, [y_t] + bwd_results)
    y1, g1 = printed[0], dict(zip(grads, printed[1:]))
    errs = {"y": rel_l2(y1, y_ref)}
    errs.update({"d" + a: rel_l2(g1[a], g_ref[a]) for a in grads})
    bad = ["%s %.3g" % kv for kv in errs.items() if not kv[1] <= TOL]
    if bad:
        fail("the one-rank train and backward are this far from moe_ref.layer and "
             "moe_grad_ref.layer_backward (relative L2, tolerance %.g): %s" % (TOL, ", ".join(bad)))
    worst = max((v, k) for k, v in errs.items())

    failures, notes = [], []
    if N == 1:
        # The unsplit ranks-1 program, its exchanges lowered with one rank.
        ep1 = tools.opt(layer, ["--moe-expert-parallel=ranks=1", generate], "ep1-bwd")
        t1, _, b1, grads1, problems = backward_contract(ep1, args, y_t)
        if problems or grads1 != grads:
            fail("unsplit ranks-1 program: %s" % "; ".join(problems or ["gradients of %s, not %s"
                                                                        % (grads1, grads)]))
        out = tools.execute(with_main(ep1, train_backward_main(arg_types, t1, b1,
                                                               [d[a] for a, _ in args], dy)),
                            "ep1-unsplit-bwd")
        printed = parse_printed(out, [y_t] + b1)
        for label, got, want in zip(["y"] + ["d" + a for a in grads], printed,
                                    [y1] + [g1[a] for a in grads]):
            if not bits_equal(got, want):
                failures.append("the unsplit ranks-1 program's %s differs from the one-rank "
                                "backward's (%s)" % (label, mismatch(got, want)))
        if not failures:
            notes.append("unsplit ranks-1 train and backward bit-equal")

    # The EP program: its train and backward as written (their signatures
    # and gradient_of), then split and run stage by stage.
    ranks_flag = "--moe-expert-parallel=ranks=%d" % N
    ep = tools.opt(layer, [ranks_flag, generate], "ep-bwd")
    expected = rank_types(c, args, N)
    ep_train, ep_bwd_args, ep_bwd, ep_grads, problems = backward_contract(ep, args, y_t, expected)
    if not problems and ep_grads != grads:
        problems.append("@layer_backward returns the gradients of %s, the one-rank one those of %s"
                        % (ep_grads, grads))
    if problems:
        fail("the EP program: " + "; ".join(problems))
    split = tools.opt(layer, [ranks_flag, generate, "--moe-split-exchanges"],
                      "ep-bwd-split")
    per_rank = rank_inputs(c, d, sizes, N)
    trained, t_traffic, t_stages, problems = run_stages(
        tools, split, "layer_train", [[per_rank[r][a] for a, _ in args] for r in range(N)],
        expected, ep_train, N, "train")
    if problems:
        fail("; ".join(problems))
    dys = [dy[starts[r]:starts[r + 1]] for r in range(N)]
    grad_r, b_traffic, b_stages, problems = run_stages(
        tools, split, "layer_backward", [trained[r][1:] + [dys[r]] for r in range(N)],
        ep_bwd_args, ep_bwd, N, "backward")
    if problems:
        fail("; ".join(problems))

    # Bit for bit: y and the token gradients on each rank's tokens, the
    # expert gradients on each rank's experts' slices.
    for r in range(N):
        rows = slice(starts[r], starts[r + 1])
        pairs = [("y", trained[r][0], y1[rows])]
        for a, got in zip(grads, grad_r[r]):
            if a in TOKEN_ARGS:
                pairs.append(("d" + a, got, g1[a][rows]))
            elif a in EXPERT_ARGS:
                pairs.append(("d" + a, got, g1[a][r * L:(r + 1) * L]))
            elif a in SHARED_ARGS and N == 1:
                pairs.append(("d" + a, got, g1[a]))
            elif a not in SHARED_ARGS:
                failures.append("no rule to compare d%s" % a)
        for label, got, want in pairs:
            if not bits_equal(got, want):
                failures.append("rank %d: %s differs from the one-rank %s (%s)"
                                % (r, label, "rows %d..%d" % (starts[r], starts[r + 1])
                                   if label in ["y"] + ["d" + a for a in TOKEN_ARGS]
                                   else "experts %d..%d" % (r * L, (r + 1) * L)
                                   if label[1:] in EXPERT_ARGS else "value",
                                   mismatch(got, want)))
    # The replicated shared expert: each rank's weight gradients come from
    # its own tokens; their sum over the ranks is the one-rank gradient up
    # to the order of the sum over tokens.
    shared = []
    for j, a in enumerate(grads):
        if a not in SHARED_ARGS or N == 1:
            continue
        parts = [grad_r[r][j] for r in range(N)]
        if any(part.shape != g1[a].shape for part in parts):
            failures.append("d%s of shapes %s, not %s" % (a, [q.shape for q in parts],
                                                           g1[a].shape))
            continue
        total = np.sum([q.astype(np.float64) for q in parts], axis=0)
        err = rel_l2(total, g1[a])
        nonzero = [r for r in range(N) if np.abs(parts[r]).max() > 0]
        if not err <= TOL:
            failures.append("the sum over ranks of d%s is %.3g from the one-rank gradient "
                            "(relative L2, tolerance %.g)" % (a, err, TOL))
        if len(nonzero) < 2:
            failures.append("only ranks %s have a nonzero d%s" % (nonzero, a))
        f32 = parts[0].copy()
        for q in parts[1:]:
            f32 = f32 + q
        shared.append("d%s %.3g (%d of %d f32 sums bit-equal)"
                      % (a, err, int((f32.view(np.int32) == g1[a].view(np.int32)).sum()),
                         f32.size))

    # The exchanges: the forward's dispatch moves rows across ranks (as the
    # forward test requires), its undispatch returns them; the backward's
    # dispatch sends the row gradients in that layout (same counts, same
    # local expert ids) and its undispatch returns the received rows'
    # gradients to the ranks that sent the rows.
    def of(traffic, op):
        return [(sent, exch) for o, sent, exch in traffic if o == op]

    t_disp, t_undisp = of(t_traffic, "moe.dispatch"), of(t_traffic, "moe.undispatch")
    b_disp, b_undisp = of(b_traffic, "moe.dispatch"), of(b_traffic, "moe.undispatch")
    if [len(t_disp), len(t_undisp), len(b_disp), len(b_undisp)] != [1, 1, 1, 1]:
        failures.append("the train exchanges are %s and the backward's %s, not one moe.dispatch "
                        "and one moe.undispatch each" % ([o for o, _, _ in t_traffic],
                                                         [o for o, _, _ in b_traffic]))
    else:
        sent = t_disp[0][0]
        failures += exchange_guards(name, c, N, sent, sizes, counts)
        if np.array(t_undisp[0][0]).T.tolist() != sent:
            failures.append("the train undispatch returned %s rows, not what its dispatch sent "
                            "(%s)" % (np.array(t_undisp[0][0]).T.tolist(), sent))
        if b_disp[0][0] != sent:
            failures.append("the backward dispatch sent %s rows, the train dispatch %s"
                            % (b_disp[0][0], sent))
        for r in range(N):
            (_, ids_t, counts_t), (_, ids_b, counts_b) = t_disp[0][1][r], b_disp[0][1][r]
            if ids_b.tolist() != ids_t.tolist() or counts_b.tolist() != counts_t.tolist():
                failures.append("rank %d: the backward dispatch's local ids or counts differ "
                                "from the train dispatch's" % r)
        if np.array(b_undisp[0][0]).T.tolist() != sent:
            failures.append("the backward undispatch returned %s rows, not what the dispatch "
                            "sent (%s)" % (np.array(b_undisp[0][0]).T.tolist(), sent))
    if failures:
        fail("; ".join(failures))
    sent = np.array(t_disp[0][0])
    exact = ["y"] + ["d" + a for a in grads if a not in SHARED_ARGS or N == 1]
    print("PASS %s N=%d backward%s: %s bit-equal to the one-rank train and backward on every rank "
          "(its tokens' rows, its experts' slices; T_r = %s)%s; one-rank y and gradients <= %.3g "
          "from the float64 reference (%s); dispatch rows sent per rank %s, received %s, %d "
          "across ranks, the backward's dispatch and undispatch the same layout; %d train and "
          "%d backward stages%s"
          % (name, N, " (recompute-gate-up)" if recompute else "", ", ".join(exact), sizes,
             "; shared-expert gradients summed over the ranks, relative L2 to the one-rank: "
             + ", ".join(shared) if shared else "", worst[0], worst[1], sent.sum(1).tolist(),
             sent.sum(0).tolist(), int(sent.sum() - np.trace(sent)), t_stages, b_stages,
             "; " + "; ".join(notes) if notes else ""))


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
    r.add_argument("--backward", action="store_true",
                   help="run the layer's train and backward (--moe-generate-backward)")
    r.add_argument("--recompute-gate-up", action="store_true",
                   help="with --backward: --moe-generate-backward=recompute-gate-up=true")
    a = ap.parse_args()
    if a.work:
        os.makedirs(a.work, exist_ok=True)
        work = a.work
    else:
        tmp = tempfile.TemporaryDirectory(prefix="ep_case.")
        work = tmp.name
    try:
        if a.backward:
            run_backward(a.case, a.N, a.moe_opt, a.runner, work, a.recompute_gate_up)
        elif a.recompute_gate_up:
            sys.exit("--recompute-gate-up needs --backward")
        else:
            run(a.case, a.N, a.moe_opt, a.runner, work)
    except (RuntimeError, ValueError) as e:
        sys.exit("FAIL %s N=%d%s: %s" % (a.case, a.N, " backward" if a.backward else "", e))


if __name__ == "__main__":
    main()
