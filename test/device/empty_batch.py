#!/usr/bin/env python3
"""Empty batches on the GPU: T = 0 (and M = 0 rows, R = 0 rows) is a call
like any other for every entry of the test bundles whose rows depend on the
tokens (serving and expert-parallel ranks routinely get none): each entry
of routing, layer, layer-shared, fp8layer, mxlayer, default (grouped GEMMs)
and quantize-*.moebundle is called through Bundle.launch with empty token
inputs (NULL pointers where torch has none) and must succeed with outputs
of the declared, empty shapes. It is a no-op: an output that does not
depend on the tokens (a permute's offsets) is poisoned first and comes
back untouched, and the workspace is not written. A CUDA graph of an empty
layer call replays. MoELayer (from the
hf-cache of test/device/hf_module.py, Mixtral) takes hidden states of zero
tokens. Prints `N passed, N failed`.

    python3 test/device/empty_batch.py .gpu-artifacts .shared-bench
"""
import os
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
sys.path.insert(0, os.path.join(ARTIFACTS, "site"))
import moe_mlir  # noqa: E402
from tally import Tally, run  # noqa: E402

DEV = "cuda"
TOKENS = ("T", "M", "R")  # the sizes that count tokens or their rows
# Other dynamic sizes: valid for every entry here (multiples of 8, 32, 128).
OTHER = {"H": 256, "N": 256, "K": 256, "E": 8, "C": 256, "I": 256}
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32, "i32": torch.int32,
          "i64": torch.int64, "e4m3": torch.uint8, "e5m2": torch.uint8, "e8m0": torch.uint8}


def empty_call(bundle, name):
    """Calls entry `name` with zero tokens; returns (outputs, poisoned
    outputs given, unchanged checks)."""
    signature = bundle.signature(name)
    sizes = {s: (0 if s in TOKENS else OTHER.get(s, 8)) for s, _, _ in signature.sizes}
    tensors, poisoned = {}, {}
    for arg in signature.args:
        shape = bundle.shape(name, arg.name, sizes)
        dtype = DTYPES[arg.dtype]
        if arg.role == "in":
            tensors[arg.name] = torch.zeros(shape, dtype=dtype, device=DEV)
        elif arg.role == "out" and 0 not in shape:
            # An output of no token dimension: poisoned, then checked.
            t = torch.full(shape, -1, dtype=dtype, device=DEV) if not dtype.is_floating_point \
                else torch.full(shape, float("nan"), dtype=dtype, device=DEV)
            tensors[arg.name] = poisoned[arg.name] = t
    workspace = torch.full((max(bundle.workspace_bytes(name, sizes), 1),), 0xAB,
                           dtype=torch.uint8, device=DEV)
    outputs = bundle.launch(name, sizes, workspace=workspace, **tensors)
    torch.cuda.synchronize()
    if not bool((workspace == 0xAB).all()):
        raise AssertionError("the workspace was written")
    return signature, sizes, outputs, poisoned


def main():
    tally = Tally()
    report = tally.report
    names = sorted(f for f in os.listdir(ARTIFACTS) if f.endswith(".moebundle") and (
        f in ("routing.moebundle", "layer.moebundle", "layer-shared.moebundle",
              "layer-shared-fp8.moebundle", "fp8layer.moebundle", "mxlayer.moebundle",
              "default.moebundle") or f.startswith("quantize")))
    for file in names:
        bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, file))
        tried = ok_count = 0
        failures = []
        for entry in bundle.entries:
            signature = bundle.signature(entry.name)
            if not any(s in TOKENS for s, _, _ in signature.sizes):
                continue  # no token count (prepacks of static weights)
            tried += 1
            try:
                _, sizes, outputs, poisoned = empty_call(bundle, entry.name)
                shapes_ok = all(tuple(t.shape) == bundle.shape(entry.name, n, sizes)
                                for n, t in outputs.items())
                untouched = all(bool(torch.isnan(t).all()) if t.dtype.is_floating_point
                                else bool((t == -1).all()) for t in poisoned.values())
                if shapes_ok and untouched:
                    ok_count += 1
                else:
                    failures.append(f"{entry.name}: shapes {shapes_ok}, untouched {untouched}")
            except Exception as error:
                failures.append(f"{entry.name}: {type(error).__name__}: {error}")
        report(tried > 0 and ok_count == tried, f"{file}: every entry with a token count at T = 0",
               f"{ok_count} of {tried}" + (f"; {failures[:3]}" if failures else ""))

    what = "a CUDA graph of an empty layer call replays"
    try:
        bundle = moe_mlir.Bundle(os.path.join(ARTIFACTS, "layer.moebundle"))
        name = "mixtral_8x7b"
        sizes = {"T": 0}
        args = {a.name: torch.zeros(bundle.shape(name, a.name, sizes), dtype=DTYPES[a.dtype],
                                    device=DEV)
                for a in bundle.signature(name).args}
        workspace = torch.empty(max(bundle.workspace_bytes(name, sizes), 1), dtype=torch.uint8,
                                device=DEV)
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            bundle.launch(name, sizes, workspace=workspace, **args)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            bundle.launch(name, sizes, workspace=workspace, **args)
        graph.replay()
        torch.cuda.synchronize()
        report(True, what, f"out {tuple(args['out'].shape)}")
    except Exception as error:
        report(False, what, f"{type(error).__name__}: {error}")

    what = "MoELayer (Mixtral, from the hf-cache) on hidden states of zero tokens"
    cache = os.path.join(ARTIFACTS, "hf-cache")
    if not os.path.isdir(cache):
        # As scripts/gpu-tests.sh says for the hf tests: not run, and not counted.
        print(f"{what}: not run: no {cache} (run scripts/build-hf-cache.sh here, then carry "
              ".gpu-artifacts)")
        return tally.summary()
    try:
        from transformers.models.mixtral import modeling_mixtral as mixtral
        config = mixtral.MixtralConfig(hidden_size=4096, intermediate_size=14336,
                                       num_local_experts=8, num_experts_per_tok=2)
        torch.manual_seed(0)
        block = mixtral.MixtralSparseMoeBlock(config).to(DEV, torch.bfloat16)
        layer = moe_mlir.MoELayer.from_hf(block, cache_dir=cache)
        with torch.no_grad():
            x = torch.randn(2, 0, 4096, device=DEV, dtype=torch.bfloat16)
            got = layer(x)
            got = got[0] if isinstance(got, tuple) else got
            want = block(x)
            want = want[0] if isinstance(want, tuple) else want
        torch.cuda.synchronize()
        report(tuple(got.shape) == tuple(want.shape) == (2, 0, 4096), what,
               f"out {tuple(got.shape)}, the block's {tuple(want.shape)}")
    except Exception as error:
        report(False, what, f"{type(error).__name__}: {error}")
    return tally.summary()


if __name__ == "__main__":
    run(main)
