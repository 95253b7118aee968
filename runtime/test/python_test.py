#!/usr/bin/env python3
"""Checks runtime/python/moe_runtime.py without a GPU or torch: introspection,
errors, and the argument checks it makes before touching torch. Needs
MOE_RUNTIME_LIB (or a build next to the sources). Exits 1 on failure."""
import ctypes
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import moe_runtime  # noqa: E402  (must import without torch)

failures = 0


def check(condition, what):
    global failures
    if not condition:
        print(f"FAIL: {what}")
        failures += 1


def expect_error(fn, status, needle):
    try:
        fn()
    except moe_runtime.MoERuntimeError as error:
        check(error.status == status, f"status {error.status} != {status}: {error}")
        check(needle in str(error), f"'{needle}' not in '{error}'")
        return
    check(False, f"no MoERuntimeError ({status}, {needle})")


bundle_path = os.path.join(HERE, "Inputs", "two-entries.moebundle")
bundle = moe_runtime.Bundle(bundle_path)
check(bundle.chip == "sm_90a", "chip")
check([e.name for e in bundle.entries] == ["gate_up", "down"], f"entries {bundle.entries}")
gate_up = bundle.entry("gate_up")
check(bundle.entries[0] is gate_up, "entries in file order")
check(gate_up.experts == 8 and gate_up.n == 28672 and gate_up.k == 4096, "sizes")
check(gate_up.offsets_bits == 32 and bundle.entry("down").offsets_bits == 64, "offsets")
check(len(gate_up.kernels) == 2, "kernels")
check(gate_up.kernels[1].swap_ab and gate_up.kernels[1].rows_max == 16, "swap-AB kernel")
check(gate_up.kernels[0].image == "moe_kernels" and gate_up.kernels[0].image_size == 48, "image")
bundle.close()
bundle.close()  # idempotent

expect_error(lambda: moe_runtime.Bundle("/nonexistent.moebundle"), "NOT_FOUND",
             "cannot open '/nonexistent.moebundle'")
check(bundle.version == 3 and gate_up.abi == "grouped_matmul.v3", "version and abi")
check(gate_up.epilogue == "store" and gate_up.op == "moe.grouped_matmul", "epilogue and op")
with tempfile.NamedTemporaryFile(suffix=".moebundle") as bad:
    bad.write(b"MOEBUNDLE 4\n")
    bad.flush()
    expect_error(lambda: moe_runtime.Bundle(bad.name), "UNSUPPORTED",
                 "bundle version 4 is not supported")
expect_error(lambda: moe_runtime.Bundle.from_bytes(b"MOEBUNDLE 1\nchip sm_90a\nend\n"),
             "UNSUPPORTED", "bundle version 1 predates persistent kernels")
expect_error(lambda: moe_runtime.Bundle.from_bytes(b"MOEBUNDLE 2\nchip sm_90a\nend\n"),
             "UNSUPPORTED", "bundle version 2 predates kernel epilogues (this runtime "
             "reads version 3): recompile it")
expect_error(lambda: moe_runtime.Bundle.from_bytes(b"MOEBUNDLE 3\nchip sm_90a\nend\nx"),
             "INVALID_BUNDLE", "bundle line 3: 1 bytes of trailing data after 'end'")
empty = moe_runtime.Bundle.from_bytes(b"MOEBUNDLE 3\nchip sm_90a\nend\n")
check(empty.entries == (), "no entries")
expect_error(lambda: empty.entry("x"), "NOT_FOUND", "no entry 'x' in the bundle (entries: none)")

with moe_runtime.Bundle(bundle_path) as bundle:
    # Unknown entries are refused before torch is needed.
    expect_error(lambda: bundle.grouped_matmul("nope", None, None, None),
                 "NOT_FOUND", "no entry 'nope' in the bundle (entries: gate_up, down)")
expect_error(lambda: bundle.grouped_matmul("gate_up", None, None, None),
             "INVALID_ARGUMENT", "the bundle is closed")

# The ctypes structs are the C ones (LP64): moeEntryInfo gained `epilogue`,
# moeGroupedMatmulArgs `row_scale`, both last.
check(ctypes.sizeof(moe_runtime._EntryInfo) == 72, "sizeof(moeEntryInfo)")
check(moe_runtime._EntryInfo.epilogue.offset == 64, "moeEntryInfo.epilogue")
check(ctypes.sizeof(moe_runtime._GroupedMatmulArgs) == 72, "sizeof(moeGroupedMatmulArgs)")
check(moe_runtime._GroupedMatmulArgs.row_scale.offset == 64, "moeGroupedMatmulArgs.row_scale")

# Expert-MLP entries: the epilogue checks come before torch is needed.
MAX = 2147483647


def entry_lines(name, op, epilogue):
    return (f"entry {name} op={op} abi=grouped_matmul.v3 epilogue={epilogue} experts=-1 "
            f"n=-1 k=-1 max_rows={MAX} offsets=i32\n"
            f"kernel {name} k image=img rows_min=1 rows_max={MAX} threads=128 smem=0 "
            f"tile_m=64 tile_n=128 tile_k=64 stages=1 swap_ab=0\n")


mlp_bytes = (b"MOEBUNDLE 3\nchip sm_90a\nimage img 32\n\x7fELF" + b"\0" * 28 + b"\n" + (
    entry_lines("scaled_gate_up", "moe.expert_mlp", "swiglu")
    + entry_lines("scaled_down", "moe.expert_mlp", "row_scale")
    + entry_lines("plain_gate_up", "moe.expert_mlp", "swiglu")
    + entry_lines("plain_down", "moe.expert_mlp", "store")
    + entry_lines("odd_gate_up", "moe.grouped_matmul", "store")
    + entry_lines("odd_down", "moe.grouped_matmul", "store")
    + "end\n").encode())
with moe_runtime.Bundle.from_bytes(mlp_bytes) as mlp:
    check([e.epilogue for e in mlp.entries] ==
          ["swiglu", "row_scale", "swiglu", "store", "store", "store"], "epilogues")
    check(mlp.entry("scaled_down").op == "moe.expert_mlp", "expert_mlp op")
    expect_error(lambda: mlp.grouped_matmul("scaled_down", None, None, None),
                 "INVALID_ARGUMENT", "grouped_matmul(scaled_down): the entry's epilogue "
                 "is row_scale: pass row_scale")
    expect_error(lambda: mlp.grouped_matmul("plain_gate_up", None, None, None,
                                            row_scale=object()),
                 "INVALID_ARGUMENT", "grouped_matmul(plain_gate_up): row_scale is only "
                 "taken by row_scale entries (this one's epilogue is swiglu)")
    expect_error(lambda: mlp.expert_mlp("scaled", None, None, None, None),
                 "INVALID_ARGUMENT", "expert_mlp(scaled): entry 'scaled_down' has "
                 "epilogue row_scale: pass row_scale")
    expect_error(lambda: mlp.expert_mlp("plain", None, None, None, None,
                                        row_scale=object()),
                 "INVALID_ARGUMENT", "expert_mlp(plain): row_scale was given, but entry "
                 "'plain_down' has epilogue store, not row_scale")
    expect_error(lambda: mlp.expert_mlp("odd", None, None, None, None),
                 "INVALID_ARGUMENT", "expert_mlp(odd): entry 'odd_gate_up' has epilogue "
                 "store, expected swiglu")
    expect_error(lambda: mlp.expert_mlp("missing", None, None, None, None),
                 "NOT_FOUND", "no entry 'missing_gate_up'")
expect_error(lambda: mlp.expert_mlp("plain", None, None, None, None),
             "INVALID_ARGUMENT", "the bundle is closed")

print("python test " + ("FAILED" if failures else "passed"))
sys.exit(1 if failures else 0)
