#!/usr/bin/env python3
"""moe_mlir.MoELayer against the real transformers blocks on the H200.

For each of Mixtral-8x7B, Qwen3-30B-A3B, OLMoE-1B-7B, Qwen1.5-MoE-A2.7B,
DeepSeek-V3 and GPT-OSS-120B (the real H, I, E and k, and the shared
experts' widths, through transformers' config classes), builds the
transformers 5.x block on the GPU in bfloat16 with random weights (fixed
seed; GPT-OSS's expert and router biases and DeepSeek-V3's float32
e_score_correction_bias random too, GPT-OSS's gate-up weights large enough
that its clamps bite), converts it with `MoELayer.from_hf(block)` from the
precompiled cache (no compiler on the GPU machine), and checks:
- the layer's spec is the one spec_from_config gives for the config (the
  cache's key); a shared expert (Qwen2-MoE's gated one, DeepSeek-V3's) is
  in the compiled layer: its c = ceil(Is / I) slices are experts after the
  E routed ones in the packed weights, and the entry takes Qwen2-MoE's
  shared_expert_gate;
- forward against block(x) for x [B, S, H] with T = B*S in {1, 7, 64, 1000}:
  the same structure (a tensor, or GPT-OSS's (out, router_scores)),
  relative L2 error of the output <= 1e-2 in float32, no NaN, the output
  memory and the layer's workspace poisoned first (best effort for the
  output: freed NaN blocks of its size); GPT-OSS's router scores equal the
  block's to bf16 precision; where there is a shared expert, the block's
  output without it, and Qwen2-MoE's with it ungated (from 7 tokens on: one
  token's gate may be near 1), are more than 10x the tolerance away, so that
  the check could not pass without them;
- a CUDA graph of the layer (T = 64) replayed on new inputs copied into its
  static input, its static output poisoned before each replay, with an
  eager call of a larger T (which regrows the eager workspace) between
  replays;
- the errors: hidden_states of the wrong H, float32, on the CPU, requiring
  grad; from_hf of a float32 block, a block on the CPU, an unsupported
  module, a gelu block, and a layer missing from the cache with no
  compiler.
Prints `N passed, N failed`; exits non-zero on failure.

    python3 test/device/hf_module.py .gpu-artifacts [.shared-bench]
        (.gpu-artifacts: hf-cache/, and site/ with the moe_mlir package)
    python3 test/device/hf_module.py --build-cache DIR [--compiler BIN]
        (here: compiles the layers of MODELS into DIR; no torch needed;
        scripts/build-hf-cache.sh)
"""
import os
import sys
import tempfile
import traceback
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_CACHE = "--build-cache" in sys.argv
ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 and not BUILD_CACHE
                            else ".gpu-artifacts")
# Here the package of the source tree (compiling needs no library); on the
# GPU machine the one scripts/build-gpu-artifacts.sh installed.
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
    # Is = 5632 = 4 I: four shared slices.
    "qwen1.5-moe-a2.7b": ("qwen2_moe", "Qwen2MoeConfig", "Qwen2MoeSparseMoeBlock", dict(
        model_type="qwen2_moe", hidden_size=2048, moe_intermediate_size=1408,
        shared_expert_intermediate_size=5632, num_experts=60, num_experts_per_tok=4,
        hidden_act="silu", norm_topk_prob=False)),
    "deepseek-v3": ("deepseek_v3", "DeepseekV3Config", "DeepseekV3MoE", dict(
        model_type="deepseek_v3", hidden_size=7168, moe_intermediate_size=2048,
        n_routed_experts=256, num_experts_per_tok=8, hidden_act="silu",
        norm_topk_prob=True, n_group=8, topk_group=4,
        routed_scaling_factor=2.5, n_shared_experts=1)),
    "gpt-oss-120b": ("gpt_oss", "GptOssConfig", "GptOssMLP", dict(
        model_type="gpt_oss", hidden_size=2880, intermediate_size=2880,
        num_local_experts=128, num_experts_per_tok=4)),
}
# (B, S): T = B*S tokens.
SHAPES = [(1, 1), (1, 7), (2, 32), (4, 250)]
TOLERANCE = 1e-2


def build_cache(argv):
    """Compiles the layers of MODELS into the cache directory argv[0]
    (optionally --compiler DIR), in parallel; prints the bundles."""
    cache = os.path.abspath(argv[0])
    compiler = argv[argv.index("--compiler") + 1] if "--compiler" in argv else None
    specs = [moe_mlir.spec_from_config(fields) for _, _, _, fields in MODELS.values()]
    with ThreadPoolExecutor(max_workers=len(specs)) as pool:
        for name, path in zip(MODELS, pool.map(lambda spec: moe_mlir.compile_layer(
                spec, cache_dir=cache, compiler=compiler), specs)):
            print(f"{name}: {path}")
    return 0


def main():
    import importlib

    import torch

    dev = "cuda"
    cache = os.path.join(ARTIFACTS, "hf-cache")
    tally = Tally()
    report = tally.report

    def rel_err(got, want):
        return ((got.float() - want.float()).norm() / want.float().norm()).item()

    def poison(layer, T, H):
        """NaN in the layer's workspace and in freed blocks of the output's
        size, which the next allocation of that size reuses."""
        if layer._workspace is not None:
            layer._workspace.fill_(0xFF)
        blocks = [torch.full((T, H), float("nan"), dtype=torch.bfloat16, device=dev)
                  for _ in range(4)]
        del blocks

    def expect(what, fn, error_type, *needles):
        try:
            fn()
        except error_type as error:
            missing = [n for n in needles if n not in str(error)]
            report(not missing, what, f"{type(error).__name__}: {error}"
                   + (f" (missing {missing})" if missing else ""))
            return
        except Exception as error:
            report(False, what, f"expected {error_type.__name__}, got "
                   f"{type(error).__name__}: {error}")
            return
        report(False, what, f"no {error_type.__name__}")

    def make_block(name, dtype=torch.bfloat16, device=dev, **changes):
        module, config_class, block_class, fields = MODELS[name]
        modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
        configuration = importlib.import_module(f"transformers.models.{module}")
        fields = dict(fields, **changes)
        config = getattr(configuration, config_class)(
            **{k: v for k, v in fields.items() if k != "model_type"})
        config._experts_implementation = "eager"  # the blocks' own expert loop
        default = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            with torch.device(device):
                block = getattr(modeling, block_class)(config)
        finally:
            torch.set_default_dtype(default)
        return config, block.eval()

    def randomise(name, block):
        """Random weights of the scale of a trained layer (the experts are
        torch.empty in transformers 5.x, the routers zeros)."""
        with torch.no_grad():
            for pname, p in block.named_parameters():
                if p.dim() == 1 or pname.endswith("_bias"):
                    p.normal_(0, 0.1)
                elif name == "gpt-oss-120b" and pname.startswith("experts."):
                    # [E, H, 2I] and [E, I, H]: x @ w. Gate-up 3x larger so
                    # that the clamps at +-7 bite.
                    p.normal_(0, (3 if "gate_up" in pname else 1) * p.shape[1] ** -0.5)
                else:  # [.., out, in]: x @ w.T
                    p.normal_(0, p.shape[-1] ** -0.5)
            if name == "deepseek-v3":  # float32, as checkpoints keep it
                E = block.gate.weight.shape[0]
                block.gate.e_score_correction_bias = torch.randn(E, device=dev) * 0.1

    def shared_addend(block, x):
        """The block's shared-expert addend for x and, where it is gated,
        the same ungated; (None, None) for a block without one."""
        if hasattr(block, "shared_expert"):  # Qwen2-MoE: sigmoid-gated
            ungated = block.shared_expert(x)
            return torch.sigmoid(block.shared_expert_gate(x)) * ungated, ungated
        if hasattr(block, "shared_experts"):  # DeepSeek-V3
            return block.shared_experts(x), None
        return None, None

    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.cuda.get_device_name()}; compiler here: {moe_mlir.find_compiler()}",
          flush=True)
    torch.manual_seed(0)
    errors_checked = False
    for name in MODELS:
        fields = MODELS[name][3]
        H = fields["hidden_size"]
        what = f"{name} from_hf"
        try:
            config, block = make_block(name)
            randomise(name, block)
            layer = moe_mlir.MoELayer.from_hf(block, cache_dir=cache)
            want_spec = moe_mlir.spec_from_config(config)
            # The shared expert's slices follow the routed experts; the
            # entry takes the gate where the block has one.
            spec = layer.spec
            rows = spec.experts + spec.shared_slices
            args = [a.name for a in layer._bundle.signature(moe_mlir.ENTRY).args]
            shared_mlp = getattr(block, "shared_expert", getattr(block, "shared_experts", None))
            shared_ok = (layer.gate_up_weights.shape[0] == rows
                         and layer.down_weights.shape[0] == rows
                         and spec.shared_intermediate == (0 if shared_mlp is None
                                                          else shared_mlp.down_proj.in_features)
                         and ("shared_gate" in args) == hasattr(block, "shared_expert_gate"))
            report(spec == want_spec and layer.bundle_path.startswith(cache) and shared_ok,
                   what, (f"{layer.bundle_path}, entry ({', '.join(args)}), "
                          f"E + c = {spec.experts} + {spec.shared_slices}")
                   if spec == want_spec else f"{spec} != {want_spec}")
        except Exception as error:
            report(False, what, f"{type(error).__name__}: {error}")
            traceback.print_exc()
            continue
        with torch.no_grad():
            for B, S in SHAPES:
                what = f"{name} forward x [{B}, {S}, {H}]"
                try:
                    x = torch.randn(B, S, H, device=dev).to(torch.bfloat16)
                    want = block(x)
                    poison(layer, B * S, H)
                    got = layer(x)
                    same = (isinstance(got, tuple) == isinstance(want, tuple)
                            and (not isinstance(got, tuple) or len(got) == len(want)))
                    got_out = got[0] if isinstance(got, tuple) else got
                    want_out = want[0] if isinstance(want, tuple) else want
                    torch.cuda.synchronize()
                    err = rel_err(got_out, want_out)
                    ok = (same and got_out.shape == want_out.shape
                          and got_out.dtype == want_out.dtype and err <= TOLERANCE
                          and not torch.isnan(got_out).any())
                    detail = f"relative L2 error {err:.2e}"
                    shared, ungated = shared_addend(block, x)
                    if shared is not None:
                        # Without the shared expert, or its gate, the
                        # reference is far off: the check has teeth.
                        routed = want_out.float() - shared.float()
                        without = rel_err(routed, want_out)
                        ok = ok and without > 10 * TOLERANCE
                        detail += f"; without the shared expert {without:.2e}"
                        if ungated is not None:
                            # One token's gate may be near 1 by chance: the
                            # gate must matter from 7 tokens on.
                            gateless = rel_err(routed + ungated.float(), want_out)
                            ok = ok and (gateless > 10 * TOLERANCE or x[..., 0].numel() < 7)
                            detail += f", ungated {gateless:.2e}"
                    if isinstance(want, tuple):  # GPT-OSS: router scores [T, k]
                        scores_ok = (got[1].shape == want[1].shape and got[1].dtype == want[1].dtype
                                     and torch.allclose(got[1].float().sort(-1).values,
                                                        want[1].float().sort(-1).values,
                                                        atol=1e-2, rtol=1e-2))
                        ok = ok and scores_ok
                        detail += f", router scores {'match' if scores_ok else 'DIFFER'}"
                    report(ok, what, detail)
                except Exception as error:
                    report(False, what, f"{type(error).__name__}: {error}")
                    traceback.print_exc()

            what = f"{name} CUDA graph replay on new inputs"
            try:
                x = torch.randn(2, 32, H, device=dev).to(torch.bfloat16)
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    for _ in range(2):
                        layer(x)
                torch.cuda.current_stream().wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    static = layer(x)
                out = static[0] if isinstance(static, tuple) else static
                errs = []
                for replay in range(3):
                    fresh = torch.randn(2, 32, H, device=dev).to(torch.bfloat16)
                    x.copy_(fresh)
                    out.fill_(float("nan"))
                    graph.replay()
                    want = block(fresh)
                    want = want[0] if isinstance(want, tuple) else want
                    torch.cuda.synchronize()
                    errs.append(rel_err(out, want))
                    if replay == 0:  # a larger eager call regrows the workspace
                        layer(torch.randn(4, 250, H, device=dev).to(torch.bfloat16))
                report(all(e <= TOLERANCE for e in errs), what,
                       ", ".join(f"{e:.2e}" for e in errs))
                del graph, static, out
            except Exception as error:
                report(False, what, f"{type(error).__name__}: {error}")
                traceback.print_exc()

        if not errors_checked:
            errors_checked = True
            x = torch.randn(1, 3, H, device=dev).to(torch.bfloat16)
            expect("forward: hidden_states of another H",
                   lambda: layer(torch.zeros(1, 3, H + 8, device=dev, dtype=torch.bfloat16)),
                   ValueError, f"expected [..., H] with H = {H}")
            expect("forward: float32 hidden_states (refused, not converted)",
                   lambda: layer(x.float()), TypeError,
                   "hidden_states is torch.float32", "does not convert")
            expect("forward: hidden_states on the CPU", lambda: layer(x.cpu()), ValueError,
                   "hidden_states is on cpu, the layer's weights on cuda:0")
            expect("forward: hidden_states requiring grad",
                   lambda: layer(x.clone().requires_grad_()), RuntimeError,
                   "no backward", "torch.no_grad()")
            small = dict(hidden_size=64, intermediate_size=32, num_local_experts=4)
            expect("from_hf: a float32 block",
                   lambda: moe_mlir.MoELayer.from_hf(
                       make_block("mixtral-8x7b", torch.float32, **small)[1], cache_dir=cache),
                   TypeError, "is torch.float32", "block.to(torch.bfloat16)")
            expect("from_hf: a block on the CPU",
                   lambda: moe_mlir.MoELayer.from_hf(
                       make_block("mixtral-8x7b", device="cpu", **small)[1], cache_dir=cache),
                   ValueError, "weights are on cpu", "move the block")
            expect("from_hf: not a MoE block",
                   lambda: moe_mlir.MoELayer.from_hf(torch.nn.Linear(8, 8)), TypeError,
                   "Linear is not a supported MoE block")
            expect("from_hf: a gelu block",
                   lambda: moe_mlir.MoELayer.from_hf(
                       make_block("mixtral-8x7b", hidden_act="gelu", **small)[1],
                       cache_dir=cache), ValueError, "activation is 'GELUActivation'")

            def biased_shared_gate():
                block = make_block("qwen1.5-moe-a2.7b", hidden_size=64, moe_intermediate_size=32,
                                   shared_expert_intermediate_size=48, num_experts=4,
                                   num_experts_per_tok=2)[1]
                block.shared_expert_gate = torch.nn.Linear(64, 1, device=dev, dtype=torch.bfloat16)
                return moe_mlir.MoELayer.from_hf(block, cache_dir=cache)
            expect("from_hf: a Qwen2-MoE shared_expert_gate with a bias", biased_shared_gate,
                   ValueError, "shared_expert_gate has a bias")
            if moe_mlir.find_compiler() is None:
                with tempfile.TemporaryDirectory() as empty:
                    expect("from_hf: a layer not in the cache, no compiler",
                           lambda: moe_mlir.MoELayer.from_hf(
                               make_block("mixtral-8x7b", **small)[1], cache_dir=empty),
                           moe_mlir.MoERuntimeError, "no compiled bundle for this layer",
                           "$MOE_MLIR_BIN")
        layer = block = None  # frees the weights before the next model
        torch.cuda.empty_cache()

    return tally.summary()


if __name__ == "__main__":
    if BUILD_CACHE:
        sys.exit(build_cache(sys.argv[sys.argv.index("--build-cache") + 1:]))
    run(main)
