#!/usr/bin/env python3
"""Checks runtime/python/moe_runtime.py without a GPU or torch: introspection,
errors, and the argument checks it makes before touching torch. Needs
MOE_RUNTIME_LIB (or a build next to the sources). Exits 1 on failure."""
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
check(bundle.version == 2 and gate_up.abi == "grouped_matmul.v2", "version and abi")
with tempfile.NamedTemporaryFile(suffix=".moebundle") as bad:
    bad.write(b"MOEBUNDLE 3\n")
    bad.flush()
    expect_error(lambda: moe_runtime.Bundle(bad.name), "UNSUPPORTED",
                 "bundle version 3 is not supported")
expect_error(lambda: moe_runtime.Bundle.from_bytes(b"MOEBUNDLE 1\nchip sm_90a\nend\n"),
             "UNSUPPORTED", "bundle version 1 predates persistent kernels")
expect_error(lambda: moe_runtime.Bundle.from_bytes(b"MOEBUNDLE 2\nchip sm_90a\nend\nx"),
             "INVALID_BUNDLE", "bundle line 3: 1 bytes of trailing data after 'end'")
empty = moe_runtime.Bundle.from_bytes(b"MOEBUNDLE 2\nchip sm_90a\nend\n")
check(empty.entries == (), "no entries")
expect_error(lambda: empty.entry("x"), "NOT_FOUND", "no entry 'x' in the bundle (entries: none)")

with moe_runtime.Bundle(bundle_path) as bundle:
    # Unknown entries are refused before torch is needed.
    expect_error(lambda: bundle.grouped_matmul("nope", None, None, None),
                 "NOT_FOUND", "no entry 'nope' in the bundle (entries: gate_up, down)")
expect_error(lambda: bundle.grouped_matmul("gate_up", None, None, None),
             "INVALID_ARGUMENT", "the bundle is closed")

print("python test " + ("FAILED" if failures else "passed"))
sys.exit(1 if failures else 0)
