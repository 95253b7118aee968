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
- the output against the block in float32 (the transformers block's own
  expert loop on a float32 copy): relative L2 error <= 1e-2, and no worse
  than 1.5x the bf16 block's own error (+1e-3);
- against MoELayer (one layer.v1 call) on the same input: within 1e-2
  (the stage runs the expert MLP unfused: the gate-up output is rounded to
  bfloat16 before the activation);
- the output poisoned (NaN blocks of its size freed first) and finite;
- a second call on the same input gives the same bits;
and the refusals: a block with a shared expert (DeepSeek-V3), a float32
input. Prints `N passed, N failed`; exits non-zero on failure.

    python3 test/device/expert_parallel.py .gpu-artifacts
    python3 test/device/expert_parallel.py --build-cache DIR [--compiler BIN]
        (here: compiles the one-rank layers of MODELS; scripts/build-hf-cache.sh)
"""
import importlib
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_CACHE = "--build-cache" in sys.argv
ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 and not BUILD_CACHE
                            else ".gpu-artifacts")
sys.path.insert(0, os.path.join(REPO, "python") if BUILD_CACHE
                else os.path.join(ARTIFACTS, "site"))
import moe_mlir  # noqa: E402
from tally import Tally, run  # noqa: E402

# name: (transformers model module, config class, block class, config fields)
MODELS = {
    "mixtral-8x7b": ("mixtral", "MixtralConfig", "MixtralSparseMoeBlock", dict(
        model_type="mixtral", hidden_size=4096, intermediate_size=14336,
        num_local_experts=8, num_experts_per_tok=2, hidden_act="silu")),
    "qwen3-30b-a3b": ("qwen3_moe", "Qwen3MoeConfig", "Qwen3MoeSparseMoeBlock", dict(
        model_type="qwen3_moe", hidden_size=2048, moe_intermediate_size=768,
        num_experts=128, num_experts_per_tok=8, hidden_act="silu",
        norm_topk_prob=True)),
    "olmoe-1b-7b": ("olmoe", "OlmoeConfig", "OlmoeSparseMoeBlock", dict(
        model_type="olmoe", hidden_size=2048, intermediate_size=1024,
        num_experts=64, num_experts_per_tok=8, hidden_act="silu",
        norm_topk_prob=False)),
    "gpt-oss-20b": ("gpt_oss", "GptOssConfig", "GptOssMLP", dict(
        model_type="gpt_oss", hidden_size=2880, intermediate_size=2880,
        num_local_experts=32, num_experts_per_tok=4)),
}
SHARED = ("deepseek_v3", "DeepseekV3Config", "DeepseekV3MoE", dict(
    model_type="deepseek_v3", hidden_size=256, moe_intermediate_size=128,
    n_routed_experts=16, num_experts_per_tok=4, hidden_act="silu",
    norm_topk_prob=True, n_group=4, topk_group=2, routed_scaling_factor=2.5,
    n_shared_experts=1))
TOKENS = (1, 7, 300, 4096)
TOLERANCE = 1e-2


def build_cache(argv):
    cache = os.path.abspath(argv[0])
    compiler = argv[argv.index("--compiler") + 1] if "--compiler" in argv else None
    for name, (_, _, _, fields) in MODELS.items():
        spec = moe_mlir.spec_from_config(fields)
        print(name, moe_mlir.compile_layer(spec, cache_dir=cache, compiler=compiler,
                                           expert_parallel=1))
        print(name, moe_mlir.compile_layer(spec, cache_dir=cache, compiler=compiler))
    return 0


def make_block(model, device="cuda"):
    import torch

    module, config_class, block_class, fields = model
    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    configuration = importlib.import_module(f"transformers.models.{module}")
    config = getattr(configuration, config_class)(
        **{k: v for k, v in fields.items() if k != "model_type"})
    config._experts_implementation = "eager"
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            block = getattr(modeling, block_class)(config)
    finally:
        torch.set_default_dtype(default)
    with torch.no_grad():
        for pname, p in block.named_parameters():
            if p.dim() == 1 or pname.endswith("_bias"):
                p.normal_(0, 0.1)
            elif module == "gpt_oss" and pname.startswith("experts."):
                p.normal_(0, (3 if "gate_up" in pname else 1) * p.shape[1] ** -0.5)
            else:
                p.normal_(0, p.shape[-1] ** -0.5)
    return block.eval()


def router_of(block):
    return block.router if hasattr(block, "router") else block.gate


def main():
    import copy

    import torch
    import torch.distributed as dist
    import transformers
    from moe_mlir.parallel import ExpertParallelMoELayer

    dev = "cuda"
    cache = os.path.join(ARTIFACTS, "hf-cache")
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
    for name, model in MODELS.items():
        H = model[3]["hidden_size"]
        try:
            block = make_block(model)
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
                    for g in (gate, ref_gate):
                        g[0] = (8.0 * u).to(g.dtype)
                        g[E - 2:] = (-8.0 * u).to(g.dtype)
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
                    ok = (bool(torch.isfinite(got).all()) and err <= TOLERANCE and
                          err <= 1.5 * hf_err + 1e-3 and vs_single <= TOLERANCE and
                          torch.equal(got, again))
                    report(ok, what, f"error {err:.2e} (bf16 block {hf_err:.2e}), against "
                           f"MoELayer {vs_single:.2e}, repeat bit-equal "
                           f"{torch.equal(got, again)}")
                except Exception as error:
                    report(False, what, f"{type(error).__name__}: {error}")
        del layer, single, reference, block
        torch.cuda.empty_cache()

    # Refusals.
    try:
        ExpertParallelMoELayer.from_hf(make_block(SHARED), ep_group=group, cache_dir=cache)
        report(False, "shared expert refused", "no error")
    except ValueError as error:
        report("shared expert is not supported yet" in str(error),
               "shared expert refused", str(error))
    dist.destroy_process_group()
    return tally.summary()


if __name__ == "__main__":
    if BUILD_CACHE:
        sys.exit(build_cache(sys.argv[sys.argv.index("--build-cache") + 1:]))
    run(main)
