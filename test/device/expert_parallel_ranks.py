#!/usr/bin/env python3
"""Expert parallelism over N GPUs of one host: one process per GPU, NCCL
between them (a multi-GPU machine: nvidia-h100-x2/x4/x8 or nvidia-h200-x*).

Every rank builds the same transformers block (one seed: the same random
weights of a trained layer's scale, bfloat16) and its layer
ExpertParallelMoELayer.from_hf(block, ep_group=WORLD) from the precompiled
cache (compile_layer(expert_parallel=N)), and runs its own tokens: unequal
counts (rank r gets T, T // 3 + 1 or, from N = 4 on, one rank none), for
Mixtral-8x7B, Qwen3-30B-A3B, OLMoE-1B-7B, GPT-OSS-20B and DeepSeek-V3 with
32 experts (its shared expert replicated), over two routings: the trained
router's random one and a skewed one (every token's top choices the last
rank's experts: that rank receives nearly every row, the others few or
none), T per rank in {1, 7, 300, 4096, 65536} (65536: Qwen3 and OLMoE, the
float32 reference of the others' 65536 tokens would not fit beside them).
Each rank checks:
- its output against MoELayer (the single-GPU layer, one layer.v1 call)
  on its own tokens: relative L2 <= 1e-2 (the stage runs the expert MLP
  unfused); against the block in float32: <= max(1.5x the bf16 block's
  error, 1e-2); finite after the caching allocator's free blocks were
  poisoned with NaN; a second call bit-equal;
- training (from_hf(..., train=True), T per rank up to 4096): the tokens'
  gradient against train_layer.reference (float64 autograd) of its own
  tokens, the rank's experts' gradients against the reference's over every
  rank's tokens (all-gathered) sliced to the rank's experts, the router's
  and the shared expert's summed over the ranks (all-reduce) against the
  reference's; each within max(1.5x the bf16 block's own error, 1e-2);
- a CUDA-graph capture is refused with the reason.
The parent prints each rank's PASS/FAIL lines and `N passed, N failed`
over all ranks; exits non-zero on a failure.

    python3 test/device/expert_parallel_ranks.py .gpu-artifacts [--ranks N] [model ...]
        (N: default every visible GPU; N must divide each model's experts)
    python3 test/device/expert_parallel_ranks.py --build-cache DIR --ranks 2,4,8 [--compiler BIN]
        (here: compiles the N-rank layers and train layers into the cache)
"""
import os
import sys

import train_layer  # noqa: E402  (the models, blocks and the package path)
from expert_parallel import MODELS, _block_layout  # noqa: E402
from tally import Tally  # noqa: E402

moe_mlir = train_layer.moe_mlir
make_block, router_of = train_layer.make_block, train_layer.router_of
TOKENS = (1, 7, 300, 4096, 65536)
LARGEST = {"qwen3-30b-a3b", "olmoe-1b-7b"}  # run at T = 65536 per rank
TRAIN_TOKENS = (1, 300, 4096)
TOLERANCE = 1e-2


def option(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def build_cache(cache, ranks, compiler, models=MODELS, train=(False, True)):
    """Compiles each model's one-GPU layer and its N-rank layers (and train
    layers) for each N of `ranks` into `cache`."""
    for name, (_, _, _, fields) in models.items():
        spec = moe_mlir.spec_from_config(fields)
        print(name, moe_mlir.compile_layer(spec, cache_dir=cache, compiler=compiler))
        for n in ranks:
            for trained in train:
                print(name, moe_mlir.compile_layer(spec, cache_dir=cache, compiler=compiler,
                                                   expert_parallel=n, train=trained))
    return 0


def tokens_of(rank, ranks, T):
    """Rank r's token count: unequal on purpose, one rank empty from N = 4."""
    if ranks >= 4 and rank == ranks - 2:
        return 0
    return T if rank % 2 == 0 else T // 3 + 1


def rel(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-30)).item()


def first(out):
    return out[0] if isinstance(out, tuple) else out


def worker(rank, ranks, models, results):
    import copy

    import torch
    import torch.distributed as dist
    from moe_mlir.parallel import ExpertParallelMoELayer

    torch.cuda.set_device(rank)
    dev = f"cuda:{rank}"
    dist.init_process_group("cpu:gloo,cuda:nccl", init_method="tcp://127.0.0.1:29531",
                            rank=rank, world_size=ranks, device_id=torch.device(dev))
    group = dist.group.WORLD
    cache = os.path.join(train_layer.ARTIFACTS, "hf-cache")
    tally = Tally()

    def report(ok, what, detail=""):
        tally.report(ok, f"rank {rank}/{ranks} {what}", detail)

    def gather(x):
        """Every rank's tensor (first dims may differ), in rank order."""
        shapes = [None] * ranks
        dist.all_gather_object(shapes, tuple(x.shape))
        biggest = max(s[0] for s in shapes)
        padded = x.new_zeros((biggest,) + tuple(x.shape[1:]))
        padded[:x.shape[0]] = x
        parts = [torch.empty_like(padded) for _ in range(ranks)]
        dist.all_gather(parts, padded.contiguous())
        return [p[:s[0]] for p, s in zip(parts, shapes)]

    for name in models:
        model = MODELS[name]
        fields = model[3]
        H = fields["hidden_size"]
        gptoss = fields["model_type"] == "gpt_oss"
        I = fields.get("moe_intermediate_size") or fields["intermediate_size"]
        torch.manual_seed(0)  # the same block on every rank
        try:
            block = make_block(model, device=dev).eval()
            layer = ExpertParallelMoELayer.from_hf(block, ep_group=group, cache_dir=cache)
            single = moe_mlir.MoELayer.from_hf(block, cache_dir=cache)
            reference = copy.deepcopy(block).float()
        except Exception as error:
            report(False, f"{name} from_hf", f"{type(error).__name__}: {error}")
            continue
        E = router_of(block).weight.shape[0]
        L = E // ranks
        gate, ref_gate = router_of(block).weight, router_of(reference).weight
        saved_gate = gate.detach().clone()
        torch.manual_seed(1)
        u = torch.randn(H, device=dev)
        u /= u.norm()
        for routing in ("random", "skewed"):
            if routing == "skewed":  # the last rank's experts hot
                with torch.no_grad():
                    skew = (8.0 * u).to(torch.bfloat16)  # one value in every dtype
                    for g in (gate, ref_gate):
                        g[E - L:] = skew.to(g.dtype)
                # The layers hold copies of the router (DeepSeek-V3's in
                # float32): built again from the skewed block.
                layer.close()
                layer = ExpertParallelMoELayer.from_hf(block, ep_group=group, cache_dir=cache)
                single = moe_mlir.MoELayer.from_hf(block, cache_dir=cache)
            for T in (t for t in TOKENS if t < 65536 or name in LARGEST):
                Tr = tokens_of(rank, ranks, T)
                what = f"{name} {routing} T={T} (this rank {Tr})"
                try:
                    torch.manual_seed(100 + rank)
                    x = torch.randn(1, Tr, H, device=dev)
                    if routing == "skewed":
                        x += 2.0 * u
                    x = x.to(torch.bfloat16)
                    with torch.no_grad():
                        want = first(reference(x.float())) if Tr else None
                        hf = first(block(x)) if Tr else None
                        one = first(single(x))
                        blocks = [torch.full((1 << 26,), float("nan"), device=dev)
                                  for _ in range(4)]
                        del blocks
                        got = first(layer(x))
                        again = first(layer(x))
                    torch.cuda.synchronize()
                    if Tr == 0:
                        ok = got.shape == x.shape and torch.equal(got, again)
                        report(ok, what, f"empty output {tuple(got.shape)}")
                        continue
                    err, hf_err, vs_one = rel(got, want), rel(hf, want), rel(got, one)
                    ok = (bool(torch.isfinite(got).all()) and vs_one <= TOLERANCE and
                          err <= max(1.5 * hf_err, TOLERANCE) and torch.equal(got, again))
                    report(ok, what, f"against MoELayer {vs_one:.2e}, float32 block {err:.2e} "
                           f"(bf16 block {hf_err:.2e}), repeat bit-equal "
                           f"{torch.equal(got, again)}")
                    del want, hf, one, got, again
                except Exception as error:
                    report(False, what, f"{type(error).__name__}: {error}")
            with torch.no_grad():
                for g in (gate, ref_gate):
                    g.copy_(saved_gate.to(g.dtype))
        # A CUDA graph is refused, with the reason.
        try:
            x = torch.randn(1, 8, H, device=dev).to(torch.bfloat16)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                layer(x)
            report(False, f"{name}: CUDA-graph capture refused", "captured")
        except Exception as error:
            report("cannot be captured in a CUDA graph" in str(error),
                   f"{name}: CUDA-graph capture refused", str(error)[:200])
        dist.barrier()
        layer.close()
        del layer, single, reference
        torch.cuda.empty_cache()

        # Training: the gradients of the N ranks together against one
        # float64 layer over every rank's tokens.
        try:
            trained = ExpertParallelMoELayer.from_hf(block, ep_group=group, cache_dir=cache,
                                                     train=True)
        except Exception as error:
            report(False, f"{name} train from_hf", f"{type(error).__name__}: {error}")
            continue
        own = dict(trained.named_parameters())
        sliced = {"gate_up", "down", "gate_up_bias", "down_bias"}
        for T in TRAIN_TOKENS:
            Tr = tokens_of(rank, ranks, T)
            what = f"{name} train T={T} (this rank {Tr})"
            try:
                torch.manual_seed(200 + rank)
                x = torch.randn(1, Tr, H, device=dev).to(torch.bfloat16)
                dy = torch.randn(1, Tr, H, device=dev).to(torch.bfloat16)
                for p in list(own.values()) + list(block.parameters()):
                    p.grad = None
                xr = x.detach().clone().requires_grad_()
                first(trained(xr)).backward(dy)
                torch.cuda.synchronize()
                ours = _block_layout(own, I if gptoss else 0)
                for k in ("router", "router_bias", "shared_gate", "shared_up", "shared_down"):
                    if ours.get(k) is not None:
                        ours[k] = ours[k].float().contiguous()
                        dist.all_reduce(ours[k])
                # Every rank's tokens, and the references over all of them.
                xs = torch.cat(gather(x.reshape(-1, H))).view(1, -1, H)
                dys = torch.cat(gather(dy.reshape(-1, H))).view(1, -1, H)
                xa = xs.detach().clone().requires_grad_()
                first(block(xa)).backward(dys)
                hf = train_layer.block_grads(block)
                y_ref, dx_ref, ref = train_layer.reference(block, fields, xs, dys)
                start = sum(tokens_of(r, ranks, T) for r in range(rank))
                problems, worst = [], []
                pairs = [("tokens", xr.grad, xa.grad[:, start:start + Tr],
                          dx_ref[:, start:start + Tr])] if Tr else []
                for k, got in ours.items():
                    base, want = hf[k], ref[k]
                    if k in sliced:
                        base, want = base[rank * L:(rank + 1) * L], want[rank * L:(rank + 1) * L]
                    pairs.append((k, got, base, want))
                for k, got, base, want in pairs:
                    if got is None or not torch.isfinite(got).all():
                        problems.append(f"{k}: missing or not finite")
                        continue
                    err, base_err = rel(got, want), rel(base, want)
                    worst.append(f"{k} {err:.1e} (hf {base_err:.1e})")
                    if not err <= max(1.5 * base_err, TOLERANCE):
                        problems.append(f"{k}: {err:.3e} > max(1.5 x {base_err:.3e}, 1e-2)")
                report(not problems, what, "; ".join(problems) or ", ".join(worst))
                del ref, hf, ours, pairs
                torch.cuda.empty_cache()
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")
        dist.barrier()
        trained.close()
        del trained, block
        torch.cuda.empty_cache()
    results.put((rank, tally.passed, tally.failed))
    dist.destroy_process_group()


def main():
    import torch
    import torch.multiprocessing as mp

    ranks = int(option("--ranks", torch.cuda.device_count()))
    chosen = [a for a in sys.argv[2:] if a in MODELS] or list(MODELS)
    chosen = [m for m in chosen if MODELS[m][3].get("num_local_experts", MODELS[m][3].get(
        "num_experts", MODELS[m][3].get("n_routed_experts"))) % ranks == 0]
    print(f"torch {torch.__version__} (NCCL {torch.cuda.nccl.version()}), {ranks} ranks on "
          f"{torch.cuda.device_count()} x {torch.cuda.get_device_name()}: {chosen}", flush=True)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # the workplace's rule (KINDS.md)
    context = mp.get_context("spawn")
    results = context.SimpleQueue()
    mp.start_processes(worker, args=(ranks, chosen, results), nprocs=ranks, join=True,
                       start_method="spawn")
    passed = failed = 0
    seen = set()
    while not results.empty():
        rank, p, f = results.get()
        seen.add(rank)
        passed, failed = passed + p, failed + f
    failed += ranks - len(seen)  # a rank that died reported nothing
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    if train_layer.BUILD_CACHE:
        cache = os.path.abspath(sys.argv[sys.argv.index("--build-cache") + 1])
        sys.exit(build_cache(cache, [int(n) for n in option("--ranks", "2,4,8").split(",")],
                             option("--compiler")))
    sys.exit(main())
