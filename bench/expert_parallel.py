#!/usr/bin/env python3
"""Expert parallelism over the GPUs of one host: the exchanges' bandwidth
beside NCCL's own all-to-all, and the layer's time from 1 to N GPUs.

One process per GPU (NCCL between them, NVLink multicast off as the
workplace requires), for DeepSeek-V3 (its 256 experts and shared expert,
the shared expert replicated) and Qwen3-30B-A3B at T = 128 and 8192 tokens
per rank, the trained router's random routing, for each N in --ranks
(default 1, 2, 4, 8 up to the GPUs there):
- layer: ExpertParallelMoELayer's forward on the rank's T tokens (router
  linear, the three stages, the two exchanges), median ms over 20 runs
  (device events around each, after a barrier; the slowest rank's
  median), and the token throughput N * T / ms against the one-GPU
  MoELayer's T / ms on the same GPU (the issue's target: EP8 >= 0.8 x 8);
- exchange: moeDispatchRows + moeUndispatch alone (Exchange.dispatch and
  .undispatch on the rows the layer's first stage grouped), median ms, and
  their bus bandwidth as nccl-tests counts an all-to-all's: the bytes each
  rank sends (its T k rows of H bf16), divided by the time, times
  (N - 1) / N;
- nccl: torch.distributed.all_to_all_single of the same bytes per rank split
  evenly, measured the same way in the same process: the bus bandwidth the
  exchange is held to (target: >= 80 % at T = 8192, DeepSeek-V3, EP8).
  DeepEP's published intranode figures (153 / 158 GB/s dispatch / combine,
  H800, EP8) are a reference, not a measurement here.
Not capturable in CUDA graphs (the exchanges read their sizes on the host):
every time is eager. Output: one markdown table.

    python3 bench/expert_parallel.py .gpu-artifacts [--ranks 1,2,4,8] [model ...]
    python3 bench/expert_parallel.py --build-cache DIR [--ranks 1,2,4,8] [--compiler BIN]
"""
import os
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "test", "device"))
import train_layer  # noqa: E402  (the blocks, and the package's path)
from expert_parallel_ranks import build_cache, option  # noqa: E402

moe_mlir = train_layer.moe_mlir
MODELS = {"deepseek-v3": train_layer.BENCH_MODELS["deepseek-v3"],
          "qwen3-30b-a3b": train_layer.MODELS["qwen3-30b-a3b"]}
TOKENS = (128, 8192)
RUNS = 20


def worker(rank, ranks, models, results):
    import torch
    import torch.distributed as dist
    from moe_mlir.parallel import ExpertParallelMoELayer

    torch.cuda.set_device(rank)
    dev = f"cuda:{rank}"
    dist.init_process_group("cpu:gloo,cuda:nccl", init_method="tcp://127.0.0.1:29541",
                            rank=rank, world_size=ranks, device_id=torch.device(dev))
    cache = os.path.join(train_layer.ARTIFACTS, "hf-cache")

    def slowest(fn):
        """The slowest rank's median ms of fn() over RUNS runs."""
        times = []
        for i in range(RUNS + 3):
            dist.barrier()
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            if i >= 3:
                times.append(start.elapsed_time(end))
        median = torch.tensor([statistics.median(times)], device=dev)
        dist.all_reduce(median, op=dist.ReduceOp.MAX)
        return median.item()

    for name in models:
        fields = MODELS[name][3]
        torch.manual_seed(0)
        block = train_layer.make_block(MODELS[name], device=dev).eval()
        layer = ExpertParallelMoELayer.from_hf(block, ep_group=dist.group.WORLD,
                                               cache_dir=cache)
        single = moe_mlir.MoELayer.from_hf(block, cache_dir=cache) if rank == 0 else None
        H, k = fields["hidden_size"], fields["num_experts_per_tok"]
        for T in TOKENS:
            torch.manual_seed(10 + rank)
            x = torch.randn(1, T, H, device=dev).to(torch.bfloat16)
            with torch.no_grad():
                layer_ms = slowest(lambda: layer(x))
                one_ms = torch.tensor([0.0], device=dev)
                if single is not None:
                    times = []
                    for i in range(RUNS + 3):
                        start = torch.cuda.Event(enable_timing=True)
                        end = torch.cuda.Event(enable_timing=True)
                        start.record()
                        single(x)
                        end.record()
                        torch.cuda.synchronize()
                        if i >= 3:
                            times.append(start.elapsed_time(end))
                    one_ms.fill_(statistics.median(times))
                dist.broadcast(one_ms, 0)
                # The exchanges alone, on the rows the first stage grouped.
                tokens = x.reshape(-1, H).contiguous()
                logits = torch.nn.functional.linear(
                    tokens.float() if layer.spec.logits == "f32" else tokens,
                    layer.router_weight.float() if layer.spec.logits == "f32"
                    else layer.router_weight, None if layer.spec.logits == "f32"
                    else layer.router_bias).contiguous()
                plan = layer._plan
                given = {"tokens": tokens, "logits": logits, "score_bias": layer.score_bias}
                first = layer._bundle.launch(plan[0].entry, **{
                    n: given[n] for n in plan[0].args})
                rows, offsets = (first[n] for n in plan[0].exchange_args)
                exchange = layer._exchange

                def both():
                    (received, _, counts), sent = exchange.dispatch(rows, offsets)
                    exchange.undispatch(received, counts, offsets, rows.shape[0], sent)

                exchange_ms = slowest(both)
                sent_bytes = rows.shape[0] * H * 2  # each direction
                total = torch.tensor([sent_bytes], device=dev, dtype=torch.float64)
                dist.all_reduce(total, op=dist.ReduceOp.MAX)
                n_bytes = int(total.item()) // ranks * ranks
                send = torch.empty(n_bytes, dtype=torch.uint8, device=dev)
                receive = torch.empty_like(send)
                nccl_ms = slowest(lambda: dist.all_to_all_single(receive, send))
            factor = (ranks - 1) / ranks if ranks > 1 else 1.0
            exchange_bus = 2 * sent_bytes / (exchange_ms * 1e-3) * factor / 1e9
            nccl_bus = n_bytes / (nccl_ms * 1e-3) * factor / 1e9
            if rank == 0:
                results.put((name, T, ranks, layer_ms, one_ms.item(), exchange_ms,
                             exchange_bus, nccl_ms, nccl_bus))
            del x
        layer.close()
        del layer, single, block
        torch.cuda.empty_cache()
    dist.destroy_process_group()


def main():
    import torch
    import torch.multiprocessing as mp

    gpus = torch.cuda.device_count()
    counts = [int(n) for n in option("--ranks", "1,2,4,8").split(",") if int(n) <= gpus]
    chosen = [a for a in sys.argv[2:] if a in MODELS] or list(MODELS)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # the workplace's rule (KINDS.md)
    print(f"{gpus} x {torch.cuda.get_device_name()}, torch {torch.__version__} "
          f"(NCCL {torch.cuda.nccl.version()}); ranks {counts}, models {chosen}", flush=True)
    rows = []
    for ranks in counts:
        results = mp.get_context("spawn").SimpleQueue()
        mp.start_processes(worker, args=(ranks, chosen, results), nprocs=ranks,
                           join=True, start_method="spawn")
        while not results.empty():
            rows.append(results.get())
    print("| model | T / rank | GPUs | layer ms | throughput vs 1 GPU (x N ideal) | "
          "exchange ms | exchange bus GB/s | NCCL all-to-all bus GB/s | exchange / NCCL |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, T, ranks, layer_ms, one_ms, ex_ms, ex_bus, nccl_ms, nccl_bus in sorted(rows):
        speedup = ranks * one_ms / layer_ms
        print(f"| {name} | {T} | {ranks} | {layer_ms:.3f} | {speedup:.2f} ({speedup / ranks:.2f}) "
              f"| {ex_ms:.3f} | {ex_bus:.1f} | {nccl_bus:.1f} | "
              f"{ex_bus / nccl_bus if nccl_bus else 0:.2f} |")
    return 0


if __name__ == "__main__":
    if train_layer.BUILD_CACHE:
        cache = os.path.abspath(sys.argv[sys.argv.index("--build-cache") + 1])
        sys.exit(build_cache(cache, [int(n) for n in option("--ranks", "1,2,4,8").split(",")],
                             option("--compiler"), MODELS, train=(False,)))
    sys.exit(main())
