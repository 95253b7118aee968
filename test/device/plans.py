#!/usr/bin/env python3
"""Launch plans on the GPU (docs/launch-plans.md): every layer of
layer.moebundle (the five models, bf16) run through moeLayer and through
moeLaunch (the plan interpreter: argument checks, workspace slices, tensor
maps encoded by the real driver, persistent grids from the real residency)
on the same fresh random inputs, T in {1, 7, 64, 1000, 8192}: the two
outputs must be bit-identical (the same kernels on the same parameters),
outputs and workspaces poisoned first. Prints `N passed, N failed`.

    python3 test/device/plans.py .gpu-artifacts
"""
import ctypes
import os
import sys

import torch

ARTIFACTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu-artifacts")
sys.path[:0] = [ARTIFACTS, os.path.dirname(os.path.abspath(__file__))]
os.environ.setdefault("MOE_RUNTIME_LIB", os.path.join(ARTIFACTS, "libmoe_runtime.so"))
import moe_runtime  # noqa: E402
from tally import Tally  # noqa: E402

DEV = "cuda"


class LaunchArgs(ctypes.Structure):
    _fields_ = [("sizes", ctypes.POINTER(ctypes.c_int64)), ("num_sizes", ctypes.c_int32),
                ("num_args", ctypes.c_int32), ("args", ctypes.POINTER(ctypes.c_uint64)),
                ("workspace", ctypes.c_uint64), ("workspace_bytes", ctypes.c_uint64)]


def plan_records(path):
    """{entry: {"sizes": [names], "args": [names]}} from the bundle's text."""
    plans = {}
    with open(path, "rb") as f:
        for line in f.read().split(b"\n"):
            fields = line.split(b" ")
            if fields[0] in (b"size", b"arg") and len(fields) > 2:
                entry = plans.setdefault(fields[1].decode(), {"sizes": [], "args": []})
                entry["sizes" if fields[0] == b"size" else "args"].append(fields[2].decode())
    return plans


def main():
    lib = moe_runtime._library()
    lib.moeLaunch.restype = ctypes.c_int
    lib.moeLaunch.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(LaunchArgs),
                              ctypes.c_void_p]
    lib.moeWorkspaceBytes.restype = ctypes.c_int
    lib.moeWorkspaceBytes.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                      ctypes.POINTER(ctypes.c_int64), ctypes.c_int32,
                                      ctypes.POINTER(ctypes.c_uint64)]
    tally = Tally()
    torch.manual_seed(0)

    def launch(bundle, name, plan, sizes, tensors, workspace):
        stream = torch.cuda.current_stream().cuda_stream
        size_values = (ctypes.c_int64 * len(sizes))(*sizes)
        pointers = [tensors[a].data_ptr() if tensors.get(a) is not None else 0
                    for a in plan["args"]]
        arg_values = (ctypes.c_uint64 * len(pointers))(*pointers)
        args = LaunchArgs(size_values, len(sizes), len(pointers), arg_values,
                          workspace.data_ptr() if workspace is not None else 0,
                          workspace.numel() if workspace is not None else 0)
        status = lib.moeLaunch(bundle._live_handle(), name.encode(), ctypes.byref(args),
                               ctypes.c_void_p(stream))
        if status:
            raise RuntimeError(lib.moeLastErrorMessage().decode())

    def workspace_for(bundle, name, sizes):
        values = (ctypes.c_int64 * len(sizes))(*sizes)
        n = ctypes.c_uint64()
        if lib.moeWorkspaceBytes(bundle._live_handle(), name.encode(), values, len(sizes),
                                 ctypes.byref(n)):
            raise RuntimeError(lib.moeLastErrorMessage().decode())
        return torch.full((max(n.value, 1),), 0xFF, device=DEV, dtype=torch.uint8)

    # Whole layers.
    path = os.path.join(ARTIFACTS, "layer.moebundle")
    plans = plan_records(path)
    bundle = moe_runtime.Bundle(path)
    for entry in bundle.entries:
        if entry.abi != "layer.v1" or entry.name not in plans:
            continue
        route, gate_up, down = (bundle.entry(entry.route), bundle.entry(entry.gate_up),
                                bundle.entry(entry.down))
        E, H, I = route.experts, gate_up.k, gate_up.n // 2
        # The weights once per model, drawn in bf16 (DeepSeek-V3's are 23 GB).
        g = torch.Generator(device=DEV).manual_seed(E * 7 + H)
        w13 = torch.randn(E, 2 * I, H, device=DEV, generator=g, dtype=torch.bfloat16)
        w13 /= H ** 0.5
        w2 = torch.randn(E, H, I, device=DEV, generator=g, dtype=torch.bfloat16)
        w2 /= I ** 0.5
        b13 = b2 = None
        if gate_up.bias_bits:
            b13 = torch.randn(E, 2 * I, device=DEV, generator=g).to(
                torch.float32 if gate_up.bias_bits == 32 else torch.bfloat16)
        if down.bias_bits:
            b2 = torch.randn(E, H, device=DEV, generator=g).to(
                torch.float32 if down.bias_bits == 32 else torch.bfloat16)
        for T in [1, 7, 64, 1000, 8192]:
            try:
                x = torch.randn(T, H, device=DEV, generator=g).bfloat16()
                logits = torch.randn(T, E, device=DEV, generator=g)
                if route.logits_bits == 16:
                    logits = logits.bfloat16()
                score_bias = (torch.randn(E, device=DEV, generator=g) * 0.1
                              if route.bias else None)
                out_abi = torch.full((T, H), float("nan"), device=DEV, dtype=torch.bfloat16)
                ws = torch.full((bundle.layer_workspace_bytes(entry.name, T, H, I),), 0xFF,
                                device=DEV, dtype=torch.uint8)
                bundle.layer(entry.name, x, logits, w13, w2, score_bias=score_bias,
                             gate_up_bias=b13, down_bias=b2, out=out_abi, workspace=ws)
                out_plan = torch.full((T, H), float("nan"), device=DEV, dtype=torch.bfloat16)
                plan = plans[entry.name]
                sizes = [T for _ in plan["sizes"]]
                tensors = {"tokens": x, "logits": logits, "score_bias": score_bias,
                           "gate_up_weights": w13, "down_weights": w2,
                           "gate_up_bias": b13, "down_bias": b2, "out": out_plan}
                missing = [a for a in plan["args"] if a not in tensors]
                if missing:
                    raise RuntimeError(f"plan arguments without a tensor: {missing}")
                launch(bundle, entry.name, plan, sizes, tensors,
                       workspace_for(bundle, entry.name, sizes))
                torch.cuda.synchronize()
                same = torch.equal(out_abi.view(torch.int16), out_plan.view(torch.int16))
                finite = bool(torch.isfinite(out_plan.float()).all())
                tally.report(same and finite, f"plan layer {entry.name} T={T}",
                             "bit-identical to moeLayer" if same and finite else
                             f"differs: max |d| {(out_abi.float() - out_plan.float()).abs().max()}")
            except Exception as error:  # noqa: BLE001
                tally.report(False, f"plan layer {entry.name} T={T}", str(error))
        del w13, w2, b13, b2
        torch.cuda.empty_cache()
    bundle.close()
    return tally.summary()


if __name__ == "__main__":
    sys.exit(main())
