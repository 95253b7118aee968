#!/usr/bin/env python3
"""Expert parallelism through NCCL on one GPU: the whole path with one rank.

A torch.distributed group of one process (gloo for the unique id's
broadcast), ExpertParallelMoELayer.from_hf(block, ep_group=...) from the
precompiled cache (its stage programs, compile_layer(expert_parallel=1)),
and the exchanges through NCCL (moeDispatchCounts / moeDispatchRows /
moeUndispatch on a one-rank communicator of PyTorch's libnccl.so.2). For
Mixtral-8x7B, Qwen3-30B-A3B, OLMoE-1B-7B and GPT-OSS-20B (real shapes,
random weights of a trained layer's scale, bfloat16), on random and skewed
routings (every token's top choice one hot expert, two experts cold) at
T in {1, 7, 300, 4096}:
- against MoELayer (one layer.v1 call: the same routing of the same bf16
  logits) on the same input: within 1e-2 (the stage runs the expert MLP
  unfused: the gate-up output is rounded to bfloat16 before the
  activation);
- the output against the block in float32 (the transformers block's own
  expert loop on a float32 copy): relative L2 error no worse than
  max(1.5x the bf16 block's own error, 1e-2) (from a few hundred tokens on,
  the float32 router picks other experts than the bf16 one for some
  near-tied tokens, which costs the bf16 block as much: 2-5e-2);
- the output poisoned (NaN blocks of its size freed first) and finite;
- a second call on the same input gives the same bits;
and the refusals: a block with a shared expert (DeepSeek-V3), a float32
input. Then training (from_hf(..., train=True): the train forward's and the
backward's stages, the adjoint exchanges through NCCL), for the same
models, routings and T: the output and every gradient (the tokens', the
router's, the rank's experts' weights and GPT-OSS's biases, mapped to the
block's layout) against the block's float64 autograd
(train_layer.reference), no worse than max(1.5x the bf16 block's own
error, 1e-2) (below 64 tokens the medians of 5 draws, as train_layer.py
explains); a second backward on the same inputs bit-equal; the layer's
parameters its own copies (the block untouched); a second backward of
one forward refused. Prints `N passed, N failed`; exits non-zero on
failure.

    python3 test/device/expert_parallel.py .gpu-artifacts [model ...]
    python3 test/device/expert_parallel.py --build-cache DIR [--compiler BIN]
        (here: compiles the one-rank layers of MODELS; scripts/build-hf-cache.sh)
"""
import os
import sys

import train_layer  # noqa: E402  (the models, blocks and the package path)
from tally import Tally, run  # noqa: E402

moe_mlir = train_layer.moe_mlir
# train_layer's blocks: Mixtral-8x7B, Qwen3-30B-A3B, OLMoE-1B-7B at their
# real shapes, GPT-OSS-20B and DeepSeek-V3 with 32 experts (its shared
# expert replicated); Qwen2-MoE's gated shared expert for the refusal.
MODELS = {name: train_layer.MODELS[name] for name in (
    "mixtral-8x7b", "qwen3-30b-a3b", "olmoe-1b-7b", "gpt-oss-20b", "deepseek-v3-e32")}
GATED = train_layer.REFUSED["qwen1.5-moe-a2.7b"]
TOKENS = (1, 7, 300, 4096)
TOLERANCE = 1e-2
make_block, router_of = train_layer.make_block, train_layer.router_of


def build_cache(argv):
    cache = os.path.abspath(argv[0])
    compiler = argv[argv.index("--compiler") + 1] if "--compiler" in argv else None
    for name, (_, _, _, fields) in MODELS.items():
        spec = moe_mlir.spec_from_config(fields)
        print(name, moe_mlir.compile_layer(spec, cache_dir=cache, compiler=compiler,
                                           expert_parallel=1))
        print(name, moe_mlir.compile_layer(spec, cache_dir=cache, compiler=compiler))
        print(name, moe_mlir.compile_layer(spec, cache_dir=cache, compiler=compiler,
                                           expert_parallel=1, train=True))
    return 0


def _block_layout(own, I):
    """The gradients of the layer's parameters (the runtime's layout) as
    train_layer.reference names them, in the block's layout (GPT-OSS: gate
    and up units interleaved, [E, H, 2I] and [E, I, H]; the other blocks'
    fused experts are the runtime's; the shared expert's gate and up
    projections are halves of one weight)."""
    out = {}
    for name, p in own.items():
        g = p.grad
        if g is None:
            out[name] = None
        elif name == "shared_gate_up_weights":
            half = g.shape[0] // 2
            out["shared_gate"], out["shared_up"] = g[:half], g[half:]
        elif name == "shared_down_weights":
            out["shared_down"] = g
        else:
            out[{"router_weight": "router", "gate_up_weights": "gate_up",
                 "down_weights": "down"}.get(name, name)] = (
                _gpt_oss_layout(name, g, I) if I else g)
    return out


def _gpt_oss_layout(name, tensor, I):
    """A GPT-OSS expert gradient from the runtime's layout to the block's."""
    import torch

    if tensor is None:
        return None
    if name == "gate_up_weights":
        out = torch.empty(tensor.shape[0], tensor.shape[2], 2 * I, dtype=tensor.dtype,
                          device=tensor.device)
        out[..., 0::2], out[..., 1::2] = tensor[:, :I].transpose(1, 2), tensor[:, I:].transpose(1, 2)
        return out
    if name == "gate_up_bias":
        out = torch.empty_like(tensor)
        out[:, 0::2], out[:, 1::2] = tensor[:, :I], tensor[:, I:]
        return out
    if name == "down_weights":
        return tensor.transpose(1, 2)
    return tensor


def check_training(name, model, group, cache, report):
    """The trainable layer of one rank against the block's float64 autograd."""
    import statistics

    import torch
    from moe_mlir.parallel import ExpertParallelMoELayer

    dev = "cuda"
    fields = model[3]
    H = fields["hidden_size"]
    gptoss = fields["model_type"] == "gpt_oss"
    I = fields.get("moe_intermediate_size") or fields["intermediate_size"]
    names = {"router_weight", "gate_up_weights", "down_weights"}
    if gptoss:
        names |= {"router_bias", "gate_up_bias", "down_bias"}
    if "n_shared_experts" in fields:
        names |= {"shared_gate_up_weights", "shared_down_weights"}
    try:
        block = make_block(model)
        before = {k: v.detach().clone() for k, v in block.state_dict().items()}
        layer = ExpertParallelMoELayer.from_hf(block, ep_group=group, cache_dir=cache,
                                               train=True)
    except Exception as error:
        report(False, f"{name} train from_hf", f"{type(error).__name__}: {error}")
        return
    own = dict(layer.named_parameters())
    report(set(own) == set(names) and not any(
        p.data_ptr() == q.data_ptr() for p in own.values() for q in block.parameters()),
        f"{name} train: the layer's parameters are its own copies", str(sorted(own)))

    def rel(got, want):
        return ((got.float() - want.float()).norm() / want.float().norm()).item()

    def run_once(module, x, dy):
        for p in list(module.parameters()) + list(block.parameters()):
            p.grad = None
        x = x.detach().clone().requires_grad_()
        out = module(x)
        y = out[0] if isinstance(out, tuple) else out
        y.backward(dy)
        torch.cuda.synchronize()
        return y.detach(), x.grad

    gate = router_of(block).weight
    E = gate.shape[0]
    for routing in ("random", "skewed"):
        if routing == "skewed":
            u = torch.randn(H, device=dev)
            u /= u.norm()
            with torch.no_grad():
                skew = (8.0 * u).to(torch.bfloat16)  # one value in every dtype
                for g in (gate, layer.router_weight):
                    g[0] = skew.to(g.dtype)
                    g[E - 2:] = (-skew).to(g.dtype)
        for T in TOKENS:
            what = f"{name} train {routing} T={T}"
            try:
                errors, problems = {}, []
                for draw in range(5 if T < 64 else 1):
                    x = torch.randn(1, T, H, device=dev)
                    if routing == "skewed":
                        x += 2.0 * u
                    x = x.to(torch.bfloat16)
                    dy = torch.randn(1, T, H, device=dev).to(torch.bfloat16)
                    blocks = [torch.full((1 << 26,), float("nan"), device=dev)
                              for _ in range(4)]
                    del blocks
                    y, dx = run_once(layer, x, dy)
                    ours = _block_layout(own, I if gptoss else 0)
                    y2, dx2 = run_once(layer, x, dy)
                    again = _block_layout(own, I if gptoss else 0)
                    same = torch.equal(dx, dx2) and all(
                        torch.equal(again[k], ours[k]) for k in ours)
                    hf_y, hf_dx = run_once(block, x, dy)
                    hf = train_layer.block_grads(block)
                    ref = train_layer.reference(block, fields, x, dy)
                    pairs = [("out", y, hf_y, ref[0]), ("tokens", dx, hf_dx, ref[1])]
                    pairs += [(k, ours[k], hf[k], ref[2][k]) for k in ours]
                    for k, got, base, want in pairs:
                        if got is None or not torch.isfinite(got).all():
                            problems.append(f"{k}: missing or not finite")
                            continue
                        errors.setdefault(k, []).append((rel(got, want), rel(base, want)))
                    if not same:
                        problems.append("two backward passes differ")
                    del ours, hf, ref, pairs
                    torch.cuda.empty_cache()
                worst = []
                for k, of_k in errors.items():
                    err = statistics.median(e for e, _ in of_k)
                    base = statistics.median(b for _, b in of_k)
                    worst.append(f"{k} {err:.1e} (hf {base:.1e})")
                    if not err <= max(1.5 * base, 1e-2):
                        problems.append(f"{k}: relative L2 {err:.3e} > max(1.5 x {base:.3e}, 1e-2)")
                report(not problems, what, "; ".join(problems) or ", ".join(worst))
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")
    # One backward per forward; the block's weights untouched by training.
    try:
        x = torch.randn(1, 8, H, device=dev).to(torch.bfloat16)
        out = layer(x)
        y = out[0] if isinstance(out, tuple) else out
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        report(False, f"{name} train: a second backward of one forward refused", "no error")
    except RuntimeError as error:
        report("runs once" in str(error),
               f"{name} train: a second backward of one forward refused", str(error))
    after = block.state_dict()
    changed = [k for k, v in before.items() if k in after and not torch.equal(
        v, after[k]) and "router" not in k and "gate.weight" not in k]
    report(not changed, f"{name} train: the block's expert weights untouched", str(changed))
    del layer, block
    torch.cuda.empty_cache()


def main():
    import copy

    import torch
    import torch.distributed as dist
    import transformers
    from moe_mlir.parallel import ExpertParallelMoELayer

    dev = "cuda"
    cache = os.path.join(train_layer.ARTIFACTS, "hf-cache")
    tally = Tally()
    report = tally.report
    print(f"torch {torch.__version__} (NCCL {torch.cuda.nccl.version()}), transformers "
          f"{transformers.__version__}, {torch.cuda.get_device_name()}", flush=True)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29517", rank=0,
                            world_size=1)
    group = dist.group.WORLD

    def first(out):
        return out[0] if isinstance(out, tuple) else out

    def rel(got, want):
        return ((got.float() - want.float()).norm() / want.float().norm()).item()

    torch.manual_seed(0)
    chosen = [a for a in sys.argv[2:] if a in MODELS] or list(MODELS)
    for name, model in ((n, MODELS[n]) for n in chosen):
        H = model[3]["hidden_size"]
        try:
            block = make_block(model).eval()
            layer = ExpertParallelMoELayer.from_hf(block, ep_group=group, cache_dir=cache)
            single = moe_mlir.MoELayer.from_hf(block, cache_dir=cache)
            reference = copy.deepcopy(block).float()
        except Exception as error:
            report(False, f"{name} from_hf", f"{type(error).__name__}: {error}")
            continue
        try:
            layer(torch.randn(2, H, device=dev))
            report(False, f"{name}: float32 input refused", "no error")
        except ValueError as error:
            report("expected torch.bfloat16" in str(error), f"{name}: float32 input refused",
                   str(error))
        report(layer.ranks == 1 and layer.rank == 0 and len(layer._plan) == 3,
               f"{name}: one rank, three stages", f"{layer.ranks} ranks, "
               f"{[s.entry for s in layer._plan]}")
        gate, ref_gate = router_of(block).weight, router_of(reference).weight
        E = gate.shape[0]
        u = torch.randn(H, device=dev)
        u /= u.norm()
        for routing in ("random", "skewed"):
            if routing == "skewed":
                with torch.no_grad():
                    skew = (8.0 * u).to(torch.bfloat16)  # one value in every dtype
                    for g in (gate, ref_gate):
                        g[0] = skew.to(g.dtype)
                        g[E - 2:] = (-skew).to(g.dtype)
                # The layers hold copies of the router (DeepSeek-V3's in
                # float32): built again from the skewed block.
                layer.close()
                layer = ExpertParallelMoELayer.from_hf(block, ep_group=group, cache_dir=cache)
                single = moe_mlir.MoELayer.from_hf(block, cache_dir=cache)
            for T in TOKENS:
                what = f"{name} {routing} T={T}"
                try:
                    x = torch.randn(1, T, H, device=dev)
                    if routing == "skewed":
                        x += 2.0 * u
                    x = x.to(torch.bfloat16)
                    with torch.no_grad():
                        want = first(reference(x.float()))
                        hf = first(block(x))
                        blocks = [torch.full((T, H), float("nan"), dtype=torch.bfloat16,
                                             device=dev) for _ in range(4)]
                        del blocks
                        got = first(layer(x))
                        again = first(layer(x))
                        one = first(single(x))
                    torch.cuda.synchronize()
                    err, hf_err = rel(got, want), rel(hf, want)
                    vs_single = rel(got, one)
                    ok = (bool(torch.isfinite(got).all()) and vs_single <= TOLERANCE and
                          err <= max(1.5 * hf_err, TOLERANCE) and torch.equal(got, again))
                    report(ok, what, f"error {err:.2e} (bf16 block {hf_err:.2e}), against "
                           f"MoELayer {vs_single:.2e}, repeat bit-equal "
                           f"{torch.equal(got, again)}")
                except Exception as error:
                    report(False, what, f"{type(error).__name__}: {error}")
        layer.close()
        del layer, single, reference, block
        torch.cuda.empty_cache()

    for name in chosen:
        check_training(name, MODELS[name], group, cache, report)

    # Refusals.
    try:
        ExpertParallelMoELayer.from_hf(make_block(GATED), ep_group=group, cache_dir=cache)
        report(False, "gated shared expert refused", "no error")
    except ValueError as error:
        report("gated shared expert (Qwen2-MoE) is not supported yet" in str(error),
               "gated shared expert refused", str(error))
    dist.destroy_process_group()
    return tally.summary()


if __name__ == "__main__":
    if train_layer.BUILD_CACHE:
        sys.exit(build_cache(sys.argv[sys.argv.index("--build-cache") + 1:]))
    run(main)
