#!/usr/bin/env python3
"""GPU tests of the routing (moe.route), permutation (moe.permute) and combine
(moe.unpermute) kernels.

routing.moebundle (scripts/build-gpu-artifacts.sh, from
test/device/routing_shapes.mlir) holds the routers of the five models of the
team's reference and three combines. Routers run on fresh random logits
(and DeepSeek-V3's correction bias) at T in {1, 7, 64, 1000, 8192}, outputs
poisoned first, against `route_model` of shared/bench/peers.py (checked
against the Hugging Face modules): the same experts per token (as sets:
torch.topk with sorted=False has no order) and the same weights per expert
(relative 1e-5: exp runs as ex2.approx). Ids must come out best first.
Permutations are compared bit for bit with a stable torch argsort (rows,
offsets, slots; dropped ids, one hot expert). Combines are checked against a
float32 torch sum on random slots, some out of range. Also NaN logits (no crash, ids valid or -1) and a CUDA graph.
Prints `N passed, N failed`.

    python3 test/device/routing.py .gpu-artifacts .shared-bench
"""
import os
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
PEERS = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else ".shared-bench")
sys.path[:0] = [os.path.join(ARTIFACTS, "site"), PEERS]
import moe_mlir  # noqa: E402
from tally import Tally, run, warm_up_on_side_stream  # noqa: E402
from peers import SHAPES, route_model  # noqa: E402

DEV = "cuda"
TOKENS = [1, 7, 64, 1000, 8192]
ROUTERS = {  # entry: (model, logits dtype)
    "mixtral_8x7b": ("mixtral-8x7b", torch.float32),
    "qwen3_30b_a3b": ("qwen3-30b-a3b", torch.float32),
    "olmoe_1b_7b": ("olmoe-1b-7b", torch.float32),
    "deepseek_v3": ("deepseek-v3", torch.float32),
    "gpt_oss_120b": ("gpt-oss-120b", torch.float32),
    "qwen3_30b_a3b_bf16": ("qwen3-30b-a3b", torch.bfloat16),
}


def check_route(model, logits, bias, ids, weights):
    """None, or what is wrong with (ids, weights) for these logits."""
    k = ids.shape[1]
    want_w, want_ids = route_model(model, logits, k, bias)
    want_ids = want_ids.to(torch.int64)
    got_ids = ids.to(torch.int64)
    if (got_ids < 0).any():
        return f"{int((got_ids < 0).any(1).sum())} tokens with a missing expert"
    same = (got_ids.sort(1)[0] == want_ids.sort(1)[0]).all(1)
    if not same.all():
        bad = int((~same).sum())
        t = int((~same).nonzero()[0])
        return (f"{bad} of {len(same)} tokens chose other experts, e.g. token {t}: "
                f"{sorted(got_ids[t].tolist())} vs {sorted(want_ids[t].tolist())}")
    # Weights per expert: align the reference to our order.
    order = (got_ids[:, :, None] == want_ids[:, None, :]).float().argmax(2)
    aligned = want_w.gather(1, order)
    err = ((weights - aligned).abs() / aligned.abs().clamp_min(1e-30)).max().item()
    if not err <= 1e-5:
        return f"weights differ by up to {err:.2e} (relative)"
    # Best first: the choice score falls along k (weights do for softmax).
    if model != "deepseek-v3" and (weights[:, 1:] > weights[:, :-1] * (1 + 1e-6)).any():
        return "ids are not best first"
    return None


def route_reference(logits, bias, routing, k, groups=0, select=0,
                    renormalize=False, scale=1.0):
    """(ids, weights) by docs/semantics.md, in float64: ties to the lower
    expert (and group) by stable descending sorts; best first."""
    x = logits.double()
    T, E = x.shape
    if routing == "sigmoid_topk":
        source = torch.sigmoid(x)
        choice = source + (bias.double() if bias is not None else 0)
    else:
        source, choice = x, x
    if groups:
        g = choice.view(T, groups, E // groups)
        top2 = g.topk(min(2, E // groups), dim=2).values.sum(2)
        chosen = torch.sort(top2, dim=1, descending=True, stable=True)[1][:, :select]
        keep = torch.zeros(T, groups, dtype=torch.bool, device=x.device)
        keep.scatter_(1, chosen, True)
        choice = torch.where(keep.repeat_interleave(E // groups, 1), choice,
                             torch.full_like(choice, float("-inf")))
    ids = torch.sort(choice, dim=1, descending=True, stable=True)[1][:, :k]
    picked = source.gather(1, ids)
    if routing == "softmax_topk":
        weights = torch.softmax(x, 1).gather(1, ids)
    elif routing == "topk_softmax":
        weights = torch.softmax(picked, 1)
    else:
        weights = picked
    if renormalize and routing != "topk_softmax":
        weights = weights / (weights.sum(1, keepdim=True)
                             + (1e-20 if routing == "sigmoid_topk" else 0))
    return ids, (weights * scale).float()


def check_exact(want, ids, weights):
    """None, or how (ids, weights) differ from `want`, ids in order."""
    want_ids, want_w = want
    if not torch.equal(ids.long(), want_ids):
        t = int((ids.long() != want_ids).any(1).nonzero()[0])
        return (f"{int((ids.long() != want_ids).any(1).sum())} tokens differ, e.g. "
                f"token {t}: {ids[t].tolist()} vs {want_ids[t].tolist()}")
    err = ((weights - want_w).abs() / want_w.abs().clamp_min(1e-30)).max().item()
    if not err <= 1e-5:
        return f"weights differ by up to {err:.2e} (relative)"
    return None


# route_reference's arguments per entry (the models' are cross-checked
# against peers.route_model first).
SPECS = {
    "mixtral_8x7b": ("softmax_topk", 2, 0, 0, True, 1.0),
    "qwen3_30b_a3b": ("softmax_topk", 8, 0, 0, True, 1.0),
    "olmoe_1b_7b": ("softmax_topk", 8, 0, 0, False, 1.0),
    "deepseek_v3": ("sigmoid_topk", 8, 8, 4, True, 2.5),
    "gpt_oss_120b": ("topk_softmax", 4, 0, 0, False, 1.0),
    "softmax_e60_k6": ("softmax_topk", 6, 0, 0, True, 1.0),
    "sigmoid_e48_g4s2_k4": ("sigmoid_topk", 4, 4, 2, True, 1.5),
}
EXPERTS = {"softmax_e60_k6": 60, "sigmoid_e48_g4s2_k4": 48}


def main():
    torch.manual_seed(0)
    bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "routing.moebundle"))
    tally = Tally()
    report = tally.report

    for entry, (model, dtype) in ROUTERS.items():
        _, _, E, k = SHAPES[model]
        for T in TOKENS:
            what = f"route {entry} T={T}"
            try:
                logits = (torch.randn(T, E, device=DEV) * 2).to(dtype)
                bias = (torch.randn(E, device=DEV) * 0.1) if model == "deepseek-v3" else None
                ids = torch.full((T, k), -7, device=DEV, dtype=torch.int32)
                weights = torch.full((T, k), float("nan"), device=DEV)
                bundle.route(entry, logits, bias=bias, ids=ids, weights=weights)
                torch.cuda.synchronize()
                problem = check_route(model, logits.float(), bias, ids, weights)
                report(problem is None, what, problem or "")
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")

    # The reference itself, on the models' random (tie-free) logits: it
    # must agree with peers.route_model before it judges anything else.
    for entry, spec in SPECS.items():
        if entry not in ROUTERS:
            continue
        model = ROUTERS[entry][0]
        E = SHAPES[model][2]
        logits = torch.randn(257, E, device=DEV) * 2
        bias = torch.randn(E, device=DEV) * 0.1 if spec[0] == "sigmoid_topk" else None
        ids, weights = route_reference(logits, bias, *spec)
        report(check_route(model, logits, bias, ids.to(torch.int32), weights) is None,
               f"route_reference agrees with route_model ({model})")

    # Ties (logits 0..4: no sigmoid(a) + sigmoid(-a) = 1 coincidences that
    # rounding could order either way; biases from 3 values): the lower
    # expert and the lower group win, ids in order. Also the routers beyond
    # the models.
    for entry, spec in SPECS.items():
        E = EXPERTS.get(entry) or SHAPES[ROUTERS[entry][0]][2]
        for T, tied in [(1, True), (64, True), (1000, True), (7, False), (1000, False)]:
            what = f"route {entry} T={T}{' tied scores' if tied else ''}"
            try:
                if tied:
                    logits = torch.randint(0, 5, (T, E), device=DEV).float()
                    bias = torch.randint(-1, 2, (E,), device=DEV).float() * 0.25
                else:
                    logits = torch.randn(T, E, device=DEV) * 2
                    bias = torch.randn(E, device=DEV) * 0.1
                if spec[0] != "sigmoid_topk":
                    bias = None
                k = spec[1]
                ids = torch.full((T, k), -7, device=DEV, dtype=torch.int32)
                weights = torch.full((T, k), float("nan"), device=DEV)
                bundle.route(entry, logits, bias=bias, ids=ids, weights=weights)
                torch.cuda.synchronize()
                problem = check_exact(route_reference(logits, bias, *spec), ids, weights)
                report(problem is None, what, problem or "")
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")

    # NaN logits: no crash; every id is a valid expert or -1.
    try:
        logits = torch.randn(64, 256, device=DEV)
        logits[3] = float("nan")
        logits[5, ::2] = float("nan")
        ids, weights = bundle.route("deepseek_v3", logits, bias=torch.zeros(256, device=DEV))
        torch.cuda.synchronize()
        ok = bool(((ids >= -1) & (ids < 256)).all()) and bool((ids[3] == -1).all())
        report(ok, "route with NaN logits: ids valid or -1, an all-NaN token gets -1",
               "" if ok else f"ids[3] = {ids[3].tolist()}")
    except Exception as error:
        report(False, "route with NaN logits", f"{type(error).__name__}: {error}")

    combines = {  # entry: (hidden, k, slot dtype, weighted)
        "combine_k2_i64_weighted": (4096, 2, torch.int64, True),
        "combine_k8_i32": (2048, 8, torch.int32, False),
        "combine_k4_i32_weighted": (2880, 4, torch.int32, True),
    }
    for entry, (H, k, slot_dtype, weighted) in combines.items():
        for T in TOKENS:
            what = f"unpermute {entry} T={T}"
            try:
                M = T * k
                rows = torch.randn(M, H, device=DEV).to(torch.bfloat16)
                slots = torch.randperm(M, device=DEV).view(T, k).to(slot_dtype)
                # Some slots out of range (dropped ids): they contribute nothing.
                drop = torch.rand(T, k, device=DEV) < 0.05
                slots[drop] = -1
                slots[torch.rand(T, k, device=DEV) < 0.02] = M + 5
                w = torch.rand(T, k, device=DEV) if weighted else None
                out = torch.full((T, H), float("nan"), device=DEV, dtype=torch.bfloat16)
                bundle.unpermute(entry, rows, slots, weights=w, out=out)
                torch.cuda.synchronize()
                s = slots.long()
                valid = (s >= 0) & (s < M)
                gathered = rows.float()[s.clamp(0, M - 1)] * valid[:, :, None]
                if w is not None:
                    gathered = gathered * w[:, :, None]
                want = gathered.sum(1)
                err = ((out.float() - want).norm() / want.norm()).item()
                ok = err <= 4e-3 and not torch.isnan(out).any()
                report(ok, what, "" if ok else f"relative L2 error {err:.3e}")
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")

    # Permutation: rows grouped by expert, stable within an expert, dropped
    # ids get slot -1 and rows past offsets[E] are zero; bit-exact copies.
    permutes = {  # entry: (experts, k, hidden, offsets dtype)
        "permute_e128_k8": (128, 8, 2048, torch.int64),
        "permute_e256_k8_i32": (256, 8, 7168, torch.int32),
        "permute_e8_k2": (8, 2, 4096, torch.int64),
    }
    for entry, (E, k, H, off_dtype) in permutes.items():
        # Chunk boundaries (4096 ids per CTA) and many chunks too.
        for T in TOKENS + [512, 513, 2048, 2049, 40000, "one hot expert", "dropped ids"]:
            what = f"permute {entry} T={T}"
            try:
                n = 5000 if isinstance(T, str) else T
                tokens = torch.randn(n, H, device=DEV).to(torch.bfloat16)
                ids = torch.randint(0, E, (n, k), device=DEV, dtype=torch.int32)
                if T == "one hot expert":
                    ids[:, 0] = E - 1
                if T == "dropped ids":
                    ids[torch.rand(n, k, device=DEV) < 0.1] = -3
                    ids[torch.rand(n, k, device=DEV) < 0.1] = E + 4
                rows = torch.full((n * k, H), float("nan"), device=DEV, dtype=torch.bfloat16)
                offsets = torch.full((E + 1,), -9, device=DEV, dtype=off_dtype)
                slots = torch.full((n, k), -9, device=DEV, dtype=off_dtype)
                bundle.permute(entry, tokens, ids, rows=rows, offsets=offsets, slots=slots)
                torch.cuda.synchronize()
                flat = ids.flatten().long()
                valid = (flat >= 0) & (flat < E)
                key = torch.where(valid, flat, torch.full_like(flat, E))
                order = torch.sort(key, stable=True)[1]
                want_slots = torch.full_like(flat, -1)
                want_slots[order] = torch.arange(n * k, device=DEV)
                want_slots[~valid] = -1
                counts = torch.bincount(flat[valid], minlength=E)
                want_offsets = torch.cat([torch.zeros(1, device=DEV, dtype=torch.long), counts.cumsum(0)])
                total = int(want_offsets[-1])
                want_rows = torch.zeros(n * k, H, device=DEV, dtype=torch.bfloat16)
                src = order[:total] // k
                want_rows[:total] = tokens[src]
                problems = []
                if not torch.equal(offsets.long(), want_offsets):
                    problems.append("offsets differ")
                if not torch.equal(slots.long().flatten(), want_slots):
                    problems.append(f"{int((slots.long().flatten() != want_slots).sum())} slots differ")
                if not torch.equal(rows.view(torch.int16), want_rows.view(torch.int16)):
                    problems.append(f"{int((rows.view(torch.int16) != want_rows.view(torch.int16)).any(1).sum())} rows differ")
                report(not problems, what, "; ".join(problems))
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")

    # Route then combine captured in a CUDA graph, replayed on new logits.
    what = "CUDA graph of route + unpermute replayed on new data"
    try:
        T, E, k, H = 64, 128, 8, 2048
        logits = torch.randn(T, E, device=DEV)
        ids = torch.empty(T, k, device=DEV, dtype=torch.int32)
        weights = torch.empty(T, k, device=DEV)
        rows = torch.randn(T * k, H, device=DEV).to(torch.bfloat16)
        slots = torch.randperm(T * k, device=DEV).view(T, k).to(torch.int32)
        out = torch.empty(T, H, device=DEV, dtype=torch.bfloat16)
        warm_up_on_side_stream(lambda: bundle.route("qwen3_30b_a3b", logits, ids=ids, weights=weights))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            bundle.route("qwen3_30b_a3b", logits, ids=ids, weights=weights)
            bundle.unpermute("combine_k8_i32", rows, slots, out=out)
        problems = []
        for _ in range(2):
            logits.copy_(torch.randn(T, E, device=DEV))
            rows.copy_(torch.randn(T * k, H, device=DEV).to(torch.bfloat16))
            ids.fill_(-7)
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            problems.append(check_route("qwen3-30b-a3b", logits, None, ids, weights))
            want = rows.float()[slots.long()].sum(1)
            err = ((out.float() - want).norm() / want.norm()).item()
            if not err <= 4e-3:
                problems.append(f"combine error {err:.2e}")
        problems = [p for p in problems if p]
        report(not problems, what, "; ".join(problems))
    except Exception as error:
        report(False, what, f"{type(error).__name__}: {error}")

    return tally.summary()


if __name__ == "__main__":
    run(main)
