#!/usr/bin/env python3
"""The README's GPU snippets as written, on the H200.

scripts/build-gpu-artifacts.sh makes readme/tiny.moebundle with the
README's own commands ("From a .mlir file to a GPU call"). This runs that
section's Python lines verbatim (the tensors they name defined first:
T = 5 random tokens, logits and weights) and the quick start's
`moe_mlir.Bundle(...).layer(...)`, each output checked against a float32
reference of examples/consumer/tiny_layer.mlir (softmax -> top-2,
renormalized; SwiGLU experts; the intermediate rounded to bf16 as the
layer stores it): relative L2 error <= 1e-2, output poisoned first. Then
the quick start's experts_implementation="moe_mlir" on a model built from
a config (from_config: the GPU machine has no network for
from_pretrained), generating 8 tokens. Prints `N passed, N failed`.

    python3 test/device/readme.py .gpu-artifacts
"""
import os
import sys

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
sys.path.insert(0, os.path.join(ARTIFACTS, "site"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tally import Tally, run  # noqa: E402


def main():
    import torch
    import transformers

    import moe_mlir
    import hf_experts

    tally = Tally()
    os.chdir(os.path.join(ARTIFACTS, "readme"))
    T = 5
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(T, 128, generator=g, device="cuda").to(torch.bfloat16)
    logits = torch.randn(T, 4, generator=g, device="cuda")
    w13 = (torch.randn(4, 256, 128, generator=g, device="cuda") * 0.1).to(torch.bfloat16)
    w2 = (torch.randn(4, 128, 128, generator=g, device="cuda") * 0.1).to(torch.bfloat16)

    p = torch.softmax(logits, -1)
    w, ids = p.topk(2, -1)
    w = w / w.sum(-1, keepdim=True)
    ref = torch.zeros(T, 128, device="cuda")
    for t in range(T):
        for j in range(2):
            e = ids[t, j]
            h = w13[e].float() @ x[t].float()
            a = (torch.nn.functional.silu(h[:128]) * h[128:]).to(torch.bfloat16).float()
            ref[t] += w[t, j] * (w2[e].float() @ a)

    def check(what, out):
        err = ((out.float() - ref).norm() / ref.norm()).item()
        tally.report(err <= 1e-2 and not torch.isnan(out).any().item(), what,
                     f"rel err {err:.2e}")

    # "From a .mlir file to a GPU call", verbatim:
    b = moe_mlir.Bundle("tiny.moebundle")
    out = b.layer("tiny_layer", x, logits, w13, w2)   # bf16 [T,128], f32 [T,4], [4,256,128], [4,128,128]
    torch.cuda.synchronize()
    check("README: b.layer(...) allocating its output", out)
    out.fill_(float("nan"))
    ws = torch.empty(b.layer_workspace_bytes("tiny_layer", T, 128, 128), dtype=torch.uint8, device="cuda")
    b.layer("tiny_layer", x, logits, w13, w2, out=out, workspace=ws)   # no allocation: CUDA-graph safe
    torch.cuda.synchronize()
    check("README: b.layer(..., out=, workspace=)", out)
    # The quick start's call:
    check("README quick start: moe_mlir.Bundle(...).layer(...)",
          moe_mlir.Bundle("tiny.moebundle").layer("tiny_layer", x, logits, w13, w2))
    # The quick start's transformers line, from a config.
    os.environ["MOE_CACHE_DIR"] = os.path.join(ARTIFACTS, "hf-cache")
    config = transformers.AutoConfig.for_model(**hf_experts.config_fields("qwen3_moe"))
    model = transformers.AutoModelForCausalLM.from_config(
        config, dtype=torch.bfloat16, experts_implementation="moe_mlir").cuda()
    prompt = torch.randint(0, config.vocab_size, (1, 8), generator=g, device="cuda")
    with torch.no_grad():
        tokens = model.generate(prompt, max_new_tokens=8, min_new_tokens=8, do_sample=False)
    tally.report(tokens.shape == (1, 16) and model.config._experts_implementation == "moe_mlir",
                 "README quick start: experts_implementation=\"moe_mlir\" generates",
                 f"{tuple(tokens.shape)}")
    return tally.summary()


if __name__ == "__main__":
    run(main)
