#!/usr/bin/env python3
"""Checks runtime/python/moe_runtime.py without a GPU or torch: introspection,
errors, and the argument checks it makes before touching torch; then, with a
stand-in torch module, the tensor checks of route and unpermute and what
reaches the C API. Needs MOE_RUNTIME_LIB (or a build next to the sources).
Exits 1 on failure."""
import contextlib
import ctypes
import os
import sys
import tempfile
import types

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
check(bundle.version == 6 and gate_up.abi == "grouped_matmul.v3", "version and abi")
check(gate_up.epilogue == "store" and gate_up.op == "moe.grouped_matmul", "epilogue and op")
check((gate_up.bias_bits, gate_up.activation, gate_up.route, gate_up.format)
      == (0, "none", "", ""), "bias, activation, layer and format fields")
with tempfile.NamedTemporaryFile(suffix=".moebundle") as bad:
    bad.write(b"MOEBUNDLE 7\n")
    bad.flush()
    expect_error(lambda: moe_runtime.Bundle(bad.name), "UNSUPPORTED",
                 "bundle version 7 is not supported")
expect_error(lambda: moe_runtime.Bundle.from_bytes(b"MOEBUNDLE 1\nchip sm_90a\nend\n"),
             "UNSUPPORTED", "bundle version 1 predates persistent kernels")
expect_error(lambda: moe_runtime.Bundle.from_bytes(b"MOEBUNDLE 2\nchip sm_90a\nend\n"),
             "UNSUPPORTED", "bundle version 2 predates kernel epilogues (this runtime "
             "reads version 6): recompile it")
expect_error(lambda: moe_runtime.Bundle.from_bytes(b"MOEBUNDLE 3\nchip sm_90a\nend\n"),
             "UNSUPPORTED", "bundle version 3 predates the route and unpermute kernels "
             "(this runtime reads version 6): recompile it")
expect_error(lambda: moe_runtime.Bundle.from_bytes(b"MOEBUNDLE 4\nchip sm_90a\nend\n"),
             "UNSUPPORTED", "bundle version 4 predates expert biases and layer entries "
             "(this runtime reads version 6): recompile it")
expect_error(lambda: moe_runtime.Bundle.from_bytes(b"MOEBUNDLE 5\nchip sm_90a\nend\n"),
             "UNSUPPORTED", "bundle version 5 predates block-FP8 grouped matmuls "
             "(this runtime reads version 6): recompile it")
expect_error(lambda: moe_runtime.Bundle.from_bytes(b"MOEBUNDLE 6\nchip sm_90a\nend\nx"),
             "INVALID_BUNDLE", "bundle line 3: 1 bytes of trailing data after 'end'")
empty = moe_runtime.Bundle.from_bytes(b"MOEBUNDLE 6\nchip sm_90a\nend\n")
check(empty.entries == (), "no entries")
expect_error(lambda: empty.entry("x"), "NOT_FOUND", "no entry 'x' in the bundle (entries: none)")

with moe_runtime.Bundle(bundle_path) as bundle:
    # Unknown entries are refused before torch is needed.
    expect_error(lambda: bundle.grouped_matmul("nope", None, None, None),
                 "NOT_FOUND", "no entry 'nope' in the bundle (entries: gate_up, down)")
expect_error(lambda: bundle.grouped_matmul("gate_up", None, None, None),
             "INVALID_ARGUMENT", "the bundle is closed")

# The ctypes structs are the C ones (LP64): moeEntryInfo gained `epilogue` in
# version 3, the route/unpermute fields in version 4 and the bias, activation
# and layer fields in version 5, then permute.v2's `chunk`, then `format` in
# version 6, moeGroupedMatmulArgs `row_scale`, then `bias`, then `rows_scale`
# and `weights_scale`, then `out_scale` (moeEntryInfo `out`), moePermuteArgs
# `rows_scale`, all last (c_api_test.c checks the same offsets).
check(ctypes.sizeof(moe_runtime._EntryInfo) == 248, "sizeof(moeEntryInfo)")
check(moe_runtime._EntryInfo.out.offset == 240, "moeEntryInfo.out")
check(moe_runtime._EntryInfo.quantize.offset == 224, "moeEntryInfo.quantize")
check(moe_runtime._EntryInfo.intermediate.offset == 232, "moeEntryInfo.intermediate")
check(moe_runtime._EntryInfo.element.offset == 168, "moeEntryInfo.element")
check(moe_runtime._EntryInfo.input_bits.offset == 184, "moeEntryInfo.input_bits")
check(moe_runtime._EntryInfo.batch.offset == 200, "moeEntryInfo.batch")
check(moe_runtime._EntryInfo.cols.offset == 216, "moeEntryInfo.cols")
check(ctypes.sizeof(moe_runtime._QuantizeArgs) == 48, "sizeof(moeQuantizeArgs)")
check(moe_runtime._QuantizeArgs.batch.offset == 24, "moeQuantizeArgs.batch")
check(moe_runtime._EntryInfo.chunk.offset == 152, "moeEntryInfo.chunk")
check(moe_runtime._EntryInfo.format.offset == 160, "moeEntryInfo.format")
check(moe_runtime._EntryInfo.bias_bits.offset == 100, "moeEntryInfo.bias_bits")
check(moe_runtime._EntryInfo.activation.offset == 104, "moeEntryInfo.activation")
check(moe_runtime._EntryInfo.route.offset == 112, "moeEntryInfo.route")
check(moe_runtime._EntryInfo.unpermute.offset == 144, "moeEntryInfo.unpermute")
check(ctypes.sizeof(moe_runtime._LayerArgs) == 128, "sizeof(moeLayerArgs)")
check(moe_runtime._LayerArgs.gate_up_weights_scale.offset == 112,
      "moeLayerArgs.gate_up_weights_scale")
check(moe_runtime._LayerArgs.down_weights_scale.offset == 120,
      "moeLayerArgs.down_weights_scale")
check(moe_runtime._LayerArgs.workspace_bytes.offset == 72, "moeLayerArgs.workspace_bytes")
check(moe_runtime._EntryInfo.epilogue.offset == 64, "moeEntryInfo.epilogue")
check(moe_runtime._EntryInfo.top_k.offset == 72, "moeEntryInfo.top_k")
check(moe_runtime._EntryInfo.hidden.offset == 88, "moeEntryInfo.hidden")
check(moe_runtime._EntryInfo.weighted.offset == 96, "moeEntryInfo.weighted")
check(ctypes.sizeof(moe_runtime._RouteArgs) == 48, "sizeof(moeRouteArgs)")
check(ctypes.sizeof(moe_runtime._UnpermuteArgs) == 56, "sizeof(moeUnpermuteArgs)")
check(ctypes.sizeof(moe_runtime._PermuteArgs) == 72, "sizeof(moePermuteArgs)")
check(moe_runtime._PermuteArgs.rows_scale.offset == 64, "moePermuteArgs.rows_scale")
check(ctypes.sizeof(moe_runtime._GroupedMatmulArgs) == 104, "sizeof(moeGroupedMatmulArgs)")
check(moe_runtime._GroupedMatmulArgs.out_scale.offset == 96,
      "moeGroupedMatmulArgs.out_scale")
check(moe_runtime._GroupedMatmulArgs.rows_scale.offset == 80,
      "moeGroupedMatmulArgs.rows_scale")
check(moe_runtime._GroupedMatmulArgs.weights_scale.offset == 88,
      "moeGroupedMatmulArgs.weights_scale")
check(moe_runtime._GroupedMatmulArgs.row_scale.offset == 64, "moeGroupedMatmulArgs.row_scale")
check(moe_runtime._GroupedMatmulArgs.bias.offset == 72, "moeGroupedMatmulArgs.bias")

# Expert-MLP entries: the epilogue checks come before torch is needed.
MAX = 2147483647


def entry_lines(name, op, epilogue, bias="none"):
    activation = "silu" if epilogue == "swiglu" else "none"
    return (f"entry {name} op={op} abi=grouped_matmul.v3 epilogue={epilogue} experts=-1 "
            f"n=-1 k=-1 max_rows={MAX} offsets=i32 bias={bias} activation={activation}\n"
            f"kernel {name} k image=img rows_min=1 rows_max={MAX} threads=128 smem=0 "
            f"tile_m=64 tile_n=128 tile_k=64 stages=1 swap_ab=0\n")


mlp_bytes = (b"MOEBUNDLE 6\nchip sm_90a\nimage img 32\n\x7fELF" + b"\0" * 28 + b"\n" + (
    entry_lines("scaled_gate_up", "moe.expert_mlp", "swiglu")
    + entry_lines("scaled_down", "moe.expert_mlp", "row_scale")
    + entry_lines("plain_gate_up", "moe.expert_mlp", "swiglu")
    + entry_lines("plain_down", "moe.expert_mlp", "store")
    + entry_lines("odd_gate_up", "moe.grouped_matmul", "store")
    + entry_lines("odd_down", "moe.grouped_matmul", "store")
    + entry_lines("biased_gate_up", "moe.expert_mlp", "swiglu", "f32")
    + entry_lines("biased_down", "moe.expert_mlp", "store", "bf16")
    + "end\n").encode())
with moe_runtime.Bundle.from_bytes(mlp_bytes) as mlp:
    check([e.epilogue for e in mlp.entries] ==
          ["swiglu", "row_scale", "swiglu", "store", "store", "store", "swiglu", "store"],
          "epilogues")
    check([(e.bias_bits, e.activation) for e in mlp.entries[-3:]] ==
          [(0, "none"), (32, "silu"), (16, "none")], "biases and activations")
    expect_error(lambda: mlp.grouped_matmul("biased_gate_up", None, None, None),
                 "INVALID_ARGUMENT", "grouped_matmul(biased_gate_up): entry "
                 "'biased_gate_up' has bias=f32: pass bias, its float32 expert bias [E, N]")
    expect_error(lambda: mlp.grouped_matmul("plain_down", None, None, None, bias=object()),
                 "INVALID_ARGUMENT", "grouped_matmul(plain_down): entry 'plain_down' has "
                 "bias=none: it takes no bias")
    expect_error(lambda: mlp.expert_mlp("biased", None, None, None, None),
                 "INVALID_ARGUMENT", "expert_mlp(biased): entry 'biased_gate_up' has "
                 "bias=f32: pass gate_up_bias, its float32 expert bias [E, N13]")
    expect_error(lambda: mlp.expert_mlp("biased", None, None, None, None,
                                        gate_up_bias=object()),
                 "INVALID_ARGUMENT", "expert_mlp(biased): entry 'biased_down' has "
                 "bias=bf16: pass down_bias, its bfloat16 expert bias [E, N]")
    expect_error(lambda: mlp.expert_mlp("plain", None, None, None, None,
                                        down_bias=object()),
                 "INVALID_ARGUMENT", "expert_mlp(plain): entry 'plain_down' has "
                 "bias=none: it takes no down_bias")
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

# Route and unpermute entries (contract version 4): fields, and the checks
# made before torch is needed.
route_path = os.path.join(HERE, "Inputs", "route-unpermute.moebundle")
routes = moe_runtime.Bundle(route_path)
router = routes.entry("router")
check((router.abi, router.op, router.experts, router.top_k, router.logits_bits,
       router.bias, router.epilogue, router.max_rows)
      == ("route.v1", "moe.route", 256, 8, 32, True, "", MAX), f"router {router}")
check(routes.entry("softmax").logits_bits == 16 and not routes.entry("softmax").bias,
      "softmax entry")
combine = routes.entry("combine")
check((combine.abi, combine.op, combine.hidden, combine.top_k, combine.slots_bits,
       combine.weighted, combine.experts, combine.epilogue)
      == ("unpermute.v2", "moe.unpermute", 4096, 2, 64, True, 0, ""), f"combine {combine}")
check(combine.chunk == 0 and router.chunk == 0, "chunk of other ABIs")
gather = routes.entry("gather")
check((gather.hidden, gather.top_k, gather.slots_bits, gather.weighted, gather.max_rows)
      == (-1, 8, 32, False, 4096), f"gather {gather}")
check(routes.entry("gate_up").top_k == 0 and routes.entry("gate_up").epilogue == "swiglu",
      "a GEMM entry's new fields")
check(len(router.kernels) == 1 and router.kernels[0].threads == 128
      and router.kernels[0].rows_min == 0, "route kernel")
expect_error(lambda: routes.route("gate_up", None), "INVALID_ARGUMENT",
             "route(gate_up): entry 'gate_up' has abi grouped_matmul.v3 (op "
             "moe.grouped_matmul), not route.v1")
expect_error(lambda: routes.route("router", None), "INVALID_ARGUMENT",
             "route(router): the entry has bias=1: pass bias, the float32 correction "
             "bias [256]")
expect_error(lambda: routes.route("softmax", None, bias=object()), "INVALID_ARGUMENT",
             "route(softmax): the entry has bias=0: its kernel takes no bias")
expect_error(lambda: routes.unpermute("router", None, None), "INVALID_ARGUMENT",
             "unpermute(router): entry 'router' has abi route.v1 (op moe.route), not "
             "unpermute.v2")
expect_error(lambda: routes.unpermute("combine", None, None), "INVALID_ARGUMENT",
             "unpermute(combine): the entry has weighted=1: pass weights")
expect_error(lambda: routes.unpermute("gather", None, None, weights=object()),
             "INVALID_ARGUMENT", "unpermute(gather): the entry has weighted=0: its "
             "kernel takes no weights")
expect_error(lambda: routes.grouped_matmul("combine", None, None, None), "INVALID_ARGUMENT",
             "grouped_matmul(combine): entry 'combine' has abi unpermute.v2")
expect_error(lambda: routes.route("missing", None), "NOT_FOUND", "no entry 'missing'")

# Block-FP8 entries (contract version 6): fields, and the checks made before
# torch is needed.
fp8_path = os.path.join(HERE, "Inputs", "fp8.moebundle")
fp8 = moe_runtime.Bundle(fp8_path)
gemm = fp8.entry("gemm")
check((gemm.abi, gemm.op, gemm.format, gemm.epilogue, gemm.activation, gemm.experts, gemm.n,
       gemm.k, gemm.offsets_bits, gemm.bias_bits, len(gemm.kernels), gemm.kernels[0].tile_k)
      == ("grouped_matmul_fp8.v1", "moe.grouped_matmul", "fp8_block", "store", "none", 8, 256,
          512, 32, 0, 3, 128), f"gemm {gemm}")
check((fp8.entry("down").format, fp8.entry("down").bias_bits, fp8.entry("plain").format,
       router.format, combine.format) == ("fp8_block", 32, "", "", ""), "formats")
# out: "f8E4M3FN" for a gate-up that quantizes its output, "bf16" for the
# other grouped matmuls, "" for the other ABIs.
fp8_gate_up = fp8.entry("gate_up")
check((fp8_gate_up.op, fp8_gate_up.abi, fp8_gate_up.out, fp8_gate_up.epilogue, fp8_gate_up.n,
       len(fp8_gate_up.kernels))
      == ("moe.expert_mlp", "grouped_matmul_fp8.v1", "f8E4M3FN", "swiglu", 512, 2),
      f"gate_up {fp8_gate_up}")
check((gemm.out, fp8.entry("down").out, fp8.entry("plain").out, router.out, combine.out)
      == ("bf16", "bf16", "bf16", "", ""), "outs")
for call, needle in [
        (lambda: fp8.grouped_matmul("gemm", None, None, None),
         "grouped_matmul(gemm): the entry is block-FP8 (abi grouped_matmul_fp8.v1, format "
         "fp8_block): pass rows_scale, the float32 scales [M, ceil(K/128)] of the rows"),
        (lambda: fp8.grouped_matmul("gemm", None, None, None, rows_scale=object()),
         "grouped_matmul(gemm): the entry is block-FP8 (abi grouped_matmul_fp8.v1, format "
         "fp8_block): pass weights_scale, the float32 scales [E, ceil(N/128), ceil(K/128)] of "
         "the weights"),
        (lambda: fp8.grouped_matmul("down", None, None, None, rows_scale=object(),
                                    weights_scale=object()),
         "grouped_matmul(down): the entry's epilogue is row_scale: pass row_scale"),
        (lambda: fp8.grouped_matmul("down", None, None, None, row_scale=object(),
                                    rows_scale=object(), weights_scale=object()),
         "grouped_matmul(down): entry 'down' has bias=f32: pass bias"),
        (lambda: fp8.grouped_matmul("plain", None, None, None, rows_scale=object()),
         "grouped_matmul(plain): rows_scale is only taken by block-FP8 entries (abi "
         "grouped_matmul_fp8.v1); this one's abi is grouped_matmul.v3"),
        (lambda: fp8.grouped_matmul("plain", None, None, None, weights_scale=object()),
         "grouped_matmul(plain): weights_scale is only taken by block-FP8 entries"),
        (lambda: fp8.grouped_matmul("gemm", None, None, None, rows_scale=object(),
                                    weights_scale=object(), out_scale=object()),
         "grouped_matmul(gemm): out_scale is only taken by entries with out f8E4M3FN (this "
         "one's out is bf16)"),
        (lambda: fp8.grouped_matmul("plain", None, None, None, out_scale=object()),
         "grouped_matmul(plain): out_scale is only taken by entries with out f8E4M3FN"),
        (lambda: fp8.grouped_matmul("gate_up", None, None, None, weights_scale=object(),
                                    out_scale=object()),
         "grouped_matmul(gate_up): the entry is block-FP8 (abi grouped_matmul_fp8.v1, format "
         "fp8_block): pass rows_scale"),
        (lambda: fp8.layer("gemm", None, None, None, None),
         "layer(gemm): entry 'gemm' has abi grouped_matmul_fp8.v1 (op moe.grouped_matmul), "
         "not layer.v1 or layer_fp8.v1"),
        (lambda: fp8.layer_workspace_bytes("gemm", 1, 8, 8),
         "layer(gemm): entry 'gemm' has abi grouped_matmul_fp8.v1"),
        (lambda: fp8.route("gemm", None),
         "route(gemm): entry 'gemm' has abi grouped_matmul_fp8.v1 (op moe.grouped_matmul), "
         "not route.v1")]:
    expect_error(call, "INVALID_ARGUMENT", needle)
fp8_bytes = open(fp8_path, "rb").read()
# An expert MLP's halves named as by a moe.expert_mlp op, but block-FP8.
fp8_mlp = moe_runtime.Bundle.from_bytes(
    fp8_bytes.replace(b"entry gemm ", b"entry q_gate_up ").replace(b"kernel gemm ", b"kernel q_gate_up ")
    .replace(b"entry down ", b"entry q_down ").replace(b"kernel down ", b"kernel q_down "))
expect_error(lambda: fp8_mlp.expert_mlp("q", None, None, None, None), "INVALID_ARGUMENT",
             "expert_mlp(q): entry 'q_gate_up' is block-FP8 (abi grouped_matmul_fp8.v1, format "
             "fp8_block): expert_mlp runs bf16 grouped_matmul.v3 entries only; call "
             "grouped_matmul, quantize (of <name>_intermediate; none when <name>_gate_up has "
             "out f8E4M3FN) and grouped_matmul with their scales")
fp8_mlp.close()
for data, status, needle in [
        (fp8_bytes.replace(b"MOEBUNDLE 6", b"MOEBUNDLE 5", 1), "UNSUPPORTED",
         "bundle line 1: bundle version 5 predates block-FP8 grouped matmuls"),
        (fp8_bytes.replace(b"format=fp8_block", b"format=mxfp4", 1), "INVALID_BUNDLE",
         "bundle line 4: entry 'gemm': format='mxfp4' is neither fp8_block nor mxfp8 (the "
         "formats of abi grouped_matmul_fp8.v1)"),
        (fp8_bytes.replace(b"format=fp8_block out=f8E4M3FN", b"format=mxfp8 out=f8E4M3FN", 1),
         "INVALID_BUNDLE", "entry 'gate_up': out=f8E4M3FN with format=mxfp8 (only fp8_block "
         "entries quantize their output"),
        (fp8_bytes.replace(b" format=fp8_block", b"", 1), "INVALID_BUNDLE",
         "bundle line 4: entry 'gemm': missing key 'format'"),
        (fp8_bytes.replace(b"entry down op=moe.grouped_matmul", b"entry down op=moe.route"),
         "INVALID_BUNDLE", "bundle line 8: entry 'down': op=moe.route with abi "
         "grouped_matmul_fp8.v1 (its entries are op=moe.grouped_matmul or moe.expert_mlp)")]:
    expect_error(lambda: moe_runtime.Bundle.from_bytes(data), status, needle)

# MXFP8 entries (format mxfp8, added within version 6): gemm and down of
# fp8.moebundle with UE8M0 scales per 32 elements along K.
mx_bytes = fp8_bytes
for name in (b"gemm", b"down"):
    mx_bytes = mx_bytes.replace(b"entry " + name + b" op=moe.grouped_matmul "
                                b"abi=grouped_matmul_fp8.v1 format=fp8_block",
                                b"entry " + name + b" op=moe.grouped_matmul "
                                b"abi=grouped_matmul_fp8.v1 format=mxfp8")
mx = moe_runtime.Bundle.from_bytes(mx_bytes)
check((mx.entry("gemm").format, mx.entry("down").format, mx.entry("gate_up").format,
       mx.entry("plain").format, mx.entry("gemm").out) == ("mxfp8", "mxfp8", "fp8_block", "",
                                                           "bf16"), "mxfp8 formats")
for call, needle in [
        (lambda: mx.grouped_matmul("gemm", None, None, None),
         "grouped_matmul(gemm): the entry is MXFP8 (abi grouped_matmul_fp8.v1, format mxfp8): "
         "pass rows_scale, the UE8M0 scales [M, K/32] of the rows"),
        (lambda: mx.grouped_matmul("gemm", None, None, None, rows_scale=object()),
         "grouped_matmul(gemm): the entry is MXFP8 (abi grouped_matmul_fp8.v1, format mxfp8): "
         "pass weights_scale, the UE8M0 scales [E, N, K/32] of the weights"),
        (lambda: mx.grouped_matmul("gemm", None, None, None, rows_scale=object(),
                                   weights_scale=object(), out_scale=object()),
         "grouped_matmul(gemm): out_scale is only taken by entries with out f8E4M3FN")]:
    expect_error(call, "INVALID_ARGUMENT", needle)
mx_layer_bytes = open(os.path.join(HERE, "Inputs", "layer-fp8.moebundle"), "rb").read()
# Its dsv3 layer with MXFP8 GEMMs and quantizes (dsq and dsf, which have no
# quantize parts, cut).
mx_layer_bytes = (mx_layer_bytes[:mx_layer_bytes.index(b"entry dsq_gate_up ")] + b"end\n") \
    .replace(b"format=fp8_block", b"format=mxfp8") \
    .replace(b"scale=f32 input=bf16 block_rows=1 block_cols=128",
             b"scale=e8m0 input=bf16 block_rows=1 block_cols=32")
mx_layers = moe_runtime.Bundle.from_bytes(mx_layer_bytes)
check((mx_layers.entry("dsv3_gate_up").format, mx_layers.entry("dsv3_down").format,
       mx_layers.entry("dsv3_quantize").scale, mx_layers.entry("dsv3_intermediate").block_cols)
      == ("mxfp8", "mxfp8", "e8m0", 32), "mxfp8 layer parts")
# The same workspace bytes as with fp8_block GEMMs.
check(mx_layers.layer_workspace_bytes("dsv3", 1, 7168, 2048) == 226816,
      "mxfp8 layer workspace bytes")
for call, needle in [
        (lambda: mx_layers.layer("dsv3", None, None, None, None, score_bias=object()),
         "layer(dsv3): the entry is MXFP8 (abi layer_fp8.v1): pass gate_up_weights_scale, "
         "the UE8M0 scales [E, 2I, H/32] of the gate_up_weights"),
        (lambda: mx_layers.layer("dsv3", None, None, None, None, score_bias=object(),
                                 gate_up_weights_scale=object()),
         "layer(dsv3): the entry is MXFP8 (abi layer_fp8.v1): pass down_weights_scale, "
         "the UE8M0 scales [E, H, I/32] of the down_weights")]:
    expect_error(call, "INVALID_ARGUMENT", needle)
expect_error(lambda: moe_runtime.Bundle.from_bytes(mx_layer_bytes.replace(
    b" quantize=dsv3_quantize", b"")), "INVALID_BUNDLE",
    "entry 'dsv3': the layer has no quantize part, but its GEMMs have format=mxfp8")

# Layer entries (contract version 5): fields, and the checks made before torch
# is needed.
layers = moe_runtime.Bundle(os.path.join(HERE, "Inputs", "layer.moebundle"))
mixtral = layers.entry("mixtral")
check((mixtral.abi, mixtral.op, mixtral.max_rows, mixtral.kernels, mixtral.route,
       mixtral.permute, mixtral.gate_up, mixtral.down, mixtral.unpermute, mixtral.epilogue,
       mixtral.activation)
      == ("layer.v1", "moe.layer", MAX, (), "mixtral_route", "mixtral_permute",
          "mixtral_gate_up", "mixtral_down", "mixtral_unpermute", "", ""), f"mixtral {mixtral}")
oss_gate_up = layers.entry("gptoss_gate_up")
check((oss_gate_up.bias_bits, oss_gate_up.activation, oss_gate_up.route)
      == (32, "gptoss", ""), f"gptoss_gate_up {oss_gate_up}")
check(layers.entry("gptoss_down").bias_bits == 16, "gptoss_down bias")
mixtral_permute = layers.entry("mixtral_permute")
check((mixtral_permute.abi, mixtral_permute.chunk, len(mixtral_permute.kernels))
      == ("permute.v2", 4096, 3), f"mixtral_permute {mixtral_permute}")
# mixtral, T = 1: 2 rows; H = 4096, I = 14336; four buffers below 256 bytes,
# the permute's 288 (the sources, then at 256 the counts of one chunk).
check(layers.layer_workspace_bytes("mixtral", 1, 4096, 14336)
      == 6 * 256 + 2 * 4096 * 2 + 2 * 14336 * 2, "layer workspace bytes")
check(layers.permute_workspace_bytes("mixtral_permute", 1) == 256 + 8 * 4,
      "permute workspace bytes of a layer's part")
expect_error(lambda: layers.layer_workspace_bytes("mixtral", 1, 4096, 1024), "INVALID_ARGUMENT",
             "moeLayerWorkspaceBytes(mixtral): intermediate = 1024 does not match entry "
             "mixtral_gate_up's n = 28672 (2I)")
expect_error(lambda: layers.layer_workspace_bytes("gptoss", 4097, 64, 64), "INVALID_ARGUMENT",
             "moeLayerWorkspaceBytes(gptoss): T = 4097 exceeds the entry's max_rows = 4096")
expect_error(lambda: layers.layer("mixtral_route", None, None, None, None), "INVALID_ARGUMENT",
             "layer(mixtral_route): entry 'mixtral_route' has abi route.v1 (op moe.route), not "
             "layer.v1")
expect_error(lambda: layers.layer_workspace_bytes("mixtral_down", 1, 8, 8), "INVALID_ARGUMENT",
             "layer(mixtral_down): entry 'mixtral_down' has abi grouped_matmul.v3")
expect_error(lambda: layers.layer("mixtral", None, None, None, None, score_bias=object()),
             "INVALID_ARGUMENT", "layer(mixtral): entry 'mixtral_route' has bias=0: it takes "
             "no score_bias")
expect_error(lambda: layers.layer("mixtral", None, None, None, None, gate_up_bias=object()),
             "INVALID_ARGUMENT", "layer(mixtral): entry 'mixtral_gate_up' has bias=none: it "
             "takes no gate_up_bias")
expect_error(lambda: layers.layer("gptoss", None, None, None, None), "INVALID_ARGUMENT",
             "layer(gptoss): entry 'gptoss_route' has bias=1: pass score_bias, the float32 "
             "correction bias [32]")
expect_error(lambda: layers.layer("gptoss", None, None, None, None, score_bias=object()),
             "INVALID_ARGUMENT", "layer(gptoss): entry 'gptoss_gate_up' has bias=f32: pass "
             "gate_up_bias, its float32 expert bias [E, 2I]")
expect_error(lambda: layers.layer("gptoss", None, None, None, None, score_bias=object(),
                                  gate_up_bias=object()),
             "INVALID_ARGUMENT", "layer(gptoss): entry 'gptoss_down' has bias=bf16: pass "
             "down_bias, its bfloat16 expert bias [E, H]")
expect_error(lambda: layers.layer("nope", None, None, None, None), "NOT_FOUND",
             "no entry 'nope'")

# Block-FP8 layer entries (layer_fp8.v1): fields, and the checks made before
# torch is needed.
fp8_layers = moe_runtime.Bundle(os.path.join(HERE, "Inputs", "layer-fp8.moebundle"))
dsv3 = fp8_layers.entry("dsv3")
check((dsv3.abi, dsv3.op, dsv3.max_rows, dsv3.kernels, dsv3.route, dsv3.permute,
       dsv3.quantize, dsv3.gate_up, dsv3.intermediate, dsv3.down, dsv3.unpermute,
       dsv3.epilogue, dsv3.format)
      == ("layer_fp8.v1", "moe.layer", MAX, (), "dsv3_route", "dsv3_permute",
          "dsv3_quantize", "dsv3_gate_up", "dsv3_intermediate", "dsv3_down",
          "dsv3_unpermute", "", ""), f"dsv3 {dsv3}")
check((mixtral.quantize, mixtral.intermediate) == ("", ""), "a layer.v1 has no quantizes")
dsv3_inter = fp8_layers.entry("dsv3_intermediate")
check((dsv3_inter.op, dsv3_inter.abi, dsv3_inter.element, dsv3_inter.block_cols,
       dsv3_inter.cols, dsv3_inter.quantize)
      == ("moe.expert_mlp", "quantize.v1", "f8E4M3FN", 128, 2048, ""), f"{dsv3_inter}")
dsv3_gate_up = fp8_layers.entry("dsv3_gate_up")
check((dsv3_gate_up.op, dsv3_gate_up.abi, dsv3_gate_up.format, len(dsv3_gate_up.kernels))
      == ("moe.expert_mlp", "grouped_matmul_fp8.v1", "fp8_block", 2), f"{dsv3_gate_up}")
# T = 1: 8 rows; the layer.v1 buffers end at 150784, then the values and
# scales of the rows and of inter.
check(fp8_layers.layer_workspace_bytes("dsv3", 1, 7168, 2048) == 226816,
      "fp8 layer workspace bytes")
# dsq: the six-step form (its gate_up quantizes its output, no intermediate
# part), the same workspace.
dsq = fp8_layers.entry("dsq")
check((dsq.abi, dsq.gate_up, dsq.intermediate, dsq.down, fp8_layers.entry("dsq_gate_up").out,
       dsv3_gate_up.out)
      == ("layer_fp8.v1", "dsq_gate_up", "", "dsv3_down", "f8E4M3FN", "bf16"), f"dsq {dsq}")
check(fp8_layers.layer_workspace_bytes("dsq", 1, 7168, 2048) == 226816,
      "six-step fp8 layer workspace bytes")
# dsf: the five-step form (its permute's gather quantizes the rows, no
# quantize part; no intermediate either), the same workspace.
dsf = fp8_layers.entry("dsf")
check((dsf.abi, dsf.permute, dsf.quantize, dsf.gate_up, dsf.intermediate,
       fp8_layers.entry("dsf_permute").out, fp8_layers.entry("dsv3_permute").out,
       fp8_layers.entry("dsv3_route").out, dsf.out)
      == ("layer_fp8.v1", "dsf_permute", "", "dsq_gate_up", "", "f8E4M3FN", "bf16", "",
          ""), f"dsf {dsf}")
check(fp8_layers.layer_workspace_bytes("dsf", 1, 7168, 2048) == 226816,
      "five-step fp8 layer workspace bytes")
for call, needle in [
        (lambda: fp8_layers.layer_workspace_bytes("dsv3", 1, 7168, 2000),
         "moeLayerWorkspaceBytes(dsv3): intermediate = 2000 does not match entry "
         "dsv3_gate_up's n = 4096 (2I)"),
        (lambda: fp8_layers.layer_workspace_bytes("dsv3_quantize", 1, 7168, 2048),
         "layer(dsv3_quantize): entry 'dsv3_quantize' has abi quantize.v1 (op moe.quantize), "
         "not layer.v1 or layer_fp8.v1"),
        (lambda: fp8_layers.layer("dsv3", None, None, None, None, score_bias=object()),
         "layer(dsv3): the entry is block-FP8 (abi layer_fp8.v1): pass gate_up_weights_scale, "
         "the float32 scales [E, 2I/128, H/128] of the gate_up_weights"),
        (lambda: fp8_layers.layer("dsv3", None, None, None, None, score_bias=object(),
                                  gate_up_weights_scale=object()),
         "layer(dsv3): the entry is block-FP8 (abi layer_fp8.v1): pass down_weights_scale, "
         "the float32 scales [E, H/128, I/128] of the down_weights"),
        (lambda: layers.layer("mixtral", None, None, None, None, gate_up_weights_scale=object()),
         "layer(mixtral): gate_up_weights_scale is only taken by block-FP8 entries (abi "
         "layer_fp8.v1); this one's abi is layer.v1"),
        (lambda: layers.layer("mixtral", None, None, None, None, down_weights_scale=object()),
         "layer(mixtral): down_weights_scale is only taken by block-FP8 entries"),
        (lambda: fp8_layers.expert_mlp("mlp", None, None, None, None),
         "expert_mlp(mlp): entry 'mlp_gate_up' is block-FP8 (abi grouped_matmul_fp8.v1, "
         "format fp8_block): expert_mlp runs bf16 grouped_matmul.v3 entries only")]:
    expect_error(call, "INVALID_ARGUMENT", needle)

# Quantize entries (quantize.v1): fields, and the checks made before torch is
# needed.
quant_path = os.path.join(HERE, "Inputs", "quantize.moebundle")
quants = moe_runtime.Bundle(quant_path)
check([e.name for e in quants.entries] == ["act", "mx", "mx5", "weights"],
      f"quantize entries {quants.entries}")
act = quants.entry("act")
check((act.abi, act.op, act.element, act.scale, act.input_bits, act.block_rows,
       act.block_cols, act.rank, act.batch, act.rows, act.cols, act.max_rows)
      == ("quantize.v1", "moe.quantize", "f8E4M3FN", "f32", 16, 1, 128, 2, 1, -1,
          7168, MAX), f"act {act}")
check((act.epilogue, act.activation, act.format, act.experts, act.top_k)
      == ("", "", "", 0, 0), "other ABIs' fields of a quantize entry")
check(act.kernels[0].symbol == "moe_quantize_bf16_e4m3_f32_1x128"
      and act.kernels[0].threads == 256 and act.kernels[0].rows_max == 0,
      "quantize kernel")
weights_entry = quants.entry("weights")
check((weights_entry.element, weights_entry.scale, weights_entry.block_rows,
       weights_entry.block_cols, weights_entry.rank, weights_entry.batch,
       weights_entry.rows, weights_entry.cols)
      == ("f8E4M3FN", "f32", 128, 128, 3, 8, 256, 512), f"weights {weights_entry}")
mx5 = quants.entry("mx5")
check((mx5.element, mx5.scale, mx5.input_bits) == ("f8E5M2", "e8m0", 32), f"mx5 {mx5}")
expect_error(lambda: quants.quantize("missing", None), "NOT_FOUND",
             "no entry 'missing' in the bundle (entries: act, mx, mx5, weights)")
expect_error(lambda: quants.grouped_matmul("act", None, None, None), "INVALID_ARGUMENT",
             "grouped_matmul(act): entry 'act' has abi quantize.v1 (op moe.quantize), "
             "not grouped_matmul.v3")
with moe_runtime.Bundle(bundle_path) as gemms:
    check(gemms.entry("gate_up").element == "" and gemms.entry("gate_up").rank == 0,
          "a grouped matmul has no quantize fields")
    expect_error(lambda: gemms.quantize("gate_up", None), "INVALID_ARGUMENT",
                 "quantize(gate_up): entry 'gate_up' has abi grouped_matmul.v3 (op "
                 "moe.grouped_matmul), not quantize.v1")

# A stand-in torch: tensors are shapes, dtypes, devices and addresses, so the
# wrapper's checks run, and what passes them reaches the C API, whose own
# checks (or the missing GPU) answer.
fake_torch = types.ModuleType("torch")
for dtype_name in ("float32", "bfloat16", "int32", "int64", "uint8", "float8_e4m3fn",
                   "float8_e5m2"):
    setattr(fake_torch, dtype_name, type(dtype_name, (), {"__repr__":
                                                         lambda self, n=dtype_name: f"torch.{n}"})())


class FakeTensor:
    def __init__(self, shape, dtype, ptr=0x7f0000100000, device="cuda:0", contiguous=True):
        self.shape, self.dtype, self.ptr, self.device = tuple(shape), dtype, ptr, device
        self.is_cuda = device.startswith("cuda")
        self.contiguous = contiguous

    def dim(self):
        return len(self.shape)

    def numel(self):
        count = 1
        for size in self.shape:
            count *= size
        return count

    def is_contiguous(self):
        return self.contiguous

    def data_ptr(self):
        return self.ptr

    def element_size(self):
        return {"float32": 4, "bfloat16": 2, "int32": 4, "int64": 8, "uint8": 1, "int8": 1,
                "float8_e4m3fn": 1, "float8_e5m2": 1,
                "float8_e8m0fnu": 1}[repr(self.dtype)[len("torch."):]]


allocated = []


def fake_empty(shape, dtype, device):
    allocated.append((tuple(shape), dtype, device))
    return FakeTensor(shape, dtype, 0x7f0000800000 + 0x100000 * len(allocated), device)


fake_torch.Tensor = FakeTensor
fake_torch.empty = fake_empty
fake_torch.cuda = types.SimpleNamespace(
    device=lambda device: contextlib.nullcontext(),
    current_stream=lambda device: types.SimpleNamespace(cuda_stream=0))
sys.modules["torch"] = fake_torch
f32, bf16, i32, i64 = (fake_torch.float32, fake_torch.bfloat16, fake_torch.int32,
                       fake_torch.int64)
T = FakeTensor
# Past every check, the call needs a GPU (or finds the fake cubin invalid).
NO_LAUNCH = ("NO_GPU", "CUDA_ERROR", "UNSUPPORTED")


def expect_launch_attempt(fn, what):
    try:
        fn()
    except moe_runtime.MoERuntimeError as error:
        check(error.status in NO_LAUNCH, f"{what}: {error}")
        return
    check(False, f"{what}: no error without a GPU")


logits = T((16, 256), f32, 0x7f0000010000)
bias = T((256,), f32, 0x7f0000020000)
expect_launch_attempt(lambda: routes.route("router", logits, bias), "route")
check(allocated == [((16, 8), i32, "cuda:0"), ((16, 8), f32, "cuda:0")],
      f"route allocates ids and weights: {allocated}")
ids, weights = T((16, 8), i32, 0x7f0000030000), T((16, 8), f32, 0x7f0000040000)
expect_launch_attempt(lambda: routes.route("router", logits, bias, ids, weights),
                      "route with ids and weights")
expect_launch_attempt(lambda: routes.route("softmax", T((4096, 8), bf16, 0x7f0000010002)),
                      "route with bf16 logits")
for call, needle in [
        (lambda: routes.route("router", T((16, 256), bf16), bias),
         "route(router): logits is torch.bfloat16, expected torch.float32"),
        (lambda: routes.route("softmax", T((16, 8), f32)),
         "route(softmax): logits is torch.float32, expected torch.bfloat16"),
        (lambda: routes.route("router", logits, T((256,), bf16)),
         "route(router): bias is torch.bfloat16, expected torch.float32"),
        (lambda: routes.route("router", logits, bias, T((16, 8), i64)),
         "route(router): ids is torch.int64, expected torch.int32"),
        (lambda: routes.route("router", T((16, 255), f32), bias),
         "route(router): logits (16, 255) have E = 255 columns, the entry has "
         "experts = 256"),
        (lambda: routes.route("router", T((16 * 256,), f32), bias),
         "route(router): expected logits [T, E], got (4096,)"),
        (lambda: routes.route("router", logits, T((255,), f32)),
         "route(router): bias is (255,), expected (256,)"),
        (lambda: routes.route("router", logits, bias, T((16, 2), i32)),
         "route(router): ids is (16, 2), expected (16, 8) = (T, top_k)"),
        (lambda: routes.route("router", logits, bias, ids, T((8, 16), f32)),
         "route(router): weights is (8, 16), expected (16, 8) = (T, top_k)"),
        (lambda: routes.route("router", T((16, 256), f32, contiguous=False), bias),
         "route(router): logits is not contiguous"),
        (lambda: routes.route("router", T((16, 256), f32, device="cpu"), bias),
         "route(router): logits is on cpu, not on a CUDA device"),
        (lambda: routes.route("router", logits, T((256,), f32, device="cuda:1")),
         "route(router): bias is on cuda:1 but logits is on cuda:0"),
        (lambda: routes.route("router", [[0.0] * 256], bias),
         "route(router): logits is a list, not a torch.Tensor"),
        # The C API's checks: each pointer lands in its field, T in tokens.
        (lambda: routes.route("router", T((16, 256), f32, 0x7f0000010002), bias),
         "moeRoute(router): logits pointer 0x7f0000010002 is not 4-byte aligned"),
        (lambda: routes.route("router", logits, T((256,), f32, 0x7f0000020001)),
         "moeRoute(router): bias pointer 0x7f0000020001 is not 4-byte aligned"),
        (lambda: routes.route("router", logits, bias, T((16, 8), i32, 0x7f0000030002)),
         "moeRoute(router): ids pointer 0x7f0000030002 is not 4-byte aligned"),
        (lambda: routes.route("router", logits, bias, ids, T((16, 8), f32, 0x7f0000040001)),
         "moeRoute(router): weights pointer 0x7f0000040001 is not 4-byte aligned"),
        (lambda: routes.route("softmax", T((4097, 8), bf16)),
         "moeRoute(softmax): T = 4097 exceeds the entry's max_rows = 4096"),
        (lambda: routes.route("router", T((0, 256), f32), bias),
         "moeRoute(router): T = 0 must be at least 1")]:
    expect_error(call, "INVALID_ARGUMENT", needle)

rows = T((64, 4096), bf16, 0x7f0000050000)
slots64 = T((16, 2), i64, 0x7f0000060000)
slot_weights = T((16, 2), f32, 0x7f0000070000)
allocated.clear()
expect_launch_attempt(lambda: routes.unpermute("combine", rows, slots64, slot_weights),
                      "unpermute")
check(allocated == [((16, 4096), bf16, "cuda:0")], f"unpermute allocates out: {allocated}")
expect_launch_attempt(lambda: routes.unpermute("gather", T((64, 7168), bf16),
                                               T((4096, 8), i32)), "unpermute, dynamic H")
out = T((16, 4096), bf16, 0x7f0000080000)
expect_launch_attempt(lambda: routes.unpermute("combine", rows, slots64, slot_weights, out),
                      "unpermute with out")
for call, needle in [
        (lambda: routes.unpermute("combine", T((64, 4096), f32), slots64, slot_weights),
         "unpermute(combine): rows is torch.float32, expected torch.bfloat16"),
        (lambda: routes.unpermute("combine", rows, T((16, 2), i32), slot_weights),
         "unpermute(combine): slots is torch.int32, expected torch.int64"),
        (lambda: routes.unpermute("gather", rows, T((16, 8), i64)),
         "unpermute(gather): slots is torch.int64, expected torch.int32"),
        (lambda: routes.unpermute("combine", rows, slots64, T((16, 2), bf16)),
         "unpermute(combine): weights is torch.bfloat16, expected torch.float32"),
        (lambda: routes.unpermute("combine", rows, slots64, slot_weights, T((16, 4096), f32)),
         "unpermute(combine): out is torch.float32, expected torch.bfloat16"),
        (lambda: routes.unpermute("combine", rows, T((16, 3), i64), slot_weights),
         "unpermute(combine): slots (16, 3) have 3 columns, the entry has top_k = 2"),
        (lambda: routes.unpermute("combine", T((64, 2048), bf16), slots64, slot_weights),
         "unpermute(combine): rows (64, 2048) have H = 2048 columns, the entry has "
         "hidden = 4096"),
        (lambda: routes.unpermute("combine", rows, slots64, T((2, 16), f32)),
         "unpermute(combine): weights is (2, 16), expected (16, 2) like slots"),
        (lambda: routes.unpermute("combine", rows, slots64, slot_weights, T((16, 2048), bf16)),
         "unpermute(combine): out is (16, 2048), expected (16, 4096) = (T, H)"),
        (lambda: routes.unpermute("combine", rows, T((32,), i64), slot_weights),
         "unpermute(combine): expected rows [M, H] and slots [T, top_k], got (64, 4096), "
         "(32,)"),
        (lambda: routes.unpermute("combine", rows, T((16, 2), i64, device="cuda:1"),
                                  slot_weights),
         "unpermute(combine): slots is on cuda:1 but rows is on cuda:0"),
        # The C API's checks.
        (lambda: routes.unpermute("combine", T((64, 4096), bf16, 0x7f0000050008), slots64,
                                  slot_weights),
         "moeUnpermute(combine): rows pointer 0x7f0000050008 is not 16-byte aligned"),
        (lambda: routes.unpermute("combine", rows, T((16, 2), i64, 0x7f0000060004),
                                  slot_weights),
         "moeUnpermute(combine): slots pointer 0x7f0000060004 is not 8-byte aligned"),
        (lambda: routes.unpermute("combine", rows, slots64, T((16, 2), f32, 0x7f0000070002)),
         "moeUnpermute(combine): weights pointer 0x7f0000070002 is not 4-byte aligned"),
        (lambda: routes.unpermute("combine", rows, slots64, slot_weights,
                                  T((16, 4096), bf16, 0x7f0000080004)),
         "moeUnpermute(combine): out pointer 0x7f0000080004 is not 16-byte aligned"),
        (lambda: routes.unpermute("gather", T((64, 100), bf16), T((16, 8), i32)),
         "moeUnpermute(gather): H = 100 is not a multiple of 8"),
        (lambda: routes.unpermute("gather", T((0, 64), bf16), T((16, 8), i32)),
         "moeUnpermute(gather): M = 0 (rows_count) must be at least 1"),
        (lambda: routes.unpermute("gather", T((64, 64), bf16), T((4097, 8), i32)),
         "moeUnpermute(gather): T = 4097 exceeds the entry's max_rows = 4096")]:
    expect_error(call, "INVALID_ARGUMENT", needle)
routes.close()

# Permute entries (permute.v2): fields, then the checks.
permute_bytes = (b"MOEBUNDLE 6\nchip sm_90a\nimage img 32\n\x7fELF" + b"\0" * 28 + b"\n" + (
    f"entry perm op=moe.permute abi=permute.v2 max_rows={MAX} experts=128 top_k=8 "
    "hidden=2048 offsets=i64 chunk=4096\n"
    "kernel perm moe_permute_count_e128_k8 image=img threads=1024 smem=0\n"
    "kernel perm moe_permute_index_e128_k8_off64 image=img threads=1024 smem=17408\n"
    "kernel perm moe_permute_gather_off64 image=img threads=128 smem=0\n"
    "entry perm32 op=moe.permute abi=permute.v2 max_rows=4096 experts=4 top_k=2 "
    "hidden=-1 offsets=i32 chunk=64\n"
    "kernel perm32 moe_permute_count_e4_k2 image=img threads=256 smem=0\n"
    "kernel perm32 moe_permute_index_e4_k2_off32 image=img threads=256 smem=0\n"
    "kernel perm32 moe_permute_gather_off32 image=img threads=256 smem=0\n"
    f"entry router op=moe.route abi=route.v1 max_rows={MAX} experts=4 top_k=2 "
    "logits=f32 bias=0\n"
    "kernel router r image=img threads=128 smem=0\n"
    f"entry qperm op=moe.permute abi=permute.v2 max_rows={MAX} experts=4 top_k=2 "
    "hidden=-1 offsets=i64 chunk=64 out=f8E4M3FN\n"
    "kernel qperm moe_permute_count_e4_k2 image=img threads=256 smem=0\n"
    "kernel qperm moe_permute_index_e4_k2_off64 image=img threads=256 smem=0\n"
    "kernel qperm moe_permute_gather_off64_e4m3 image=img threads=256 smem=0\n"
    "end\n").encode())
perms = moe_runtime.Bundle.from_bytes(permute_bytes)
perm = perms.entry("perm")
check((perm.abi, perm.op, perm.experts, perm.top_k, perm.hidden, perm.offsets_bits,
       perm.max_rows, perm.epilogue, perm.slots_bits, perm.chunk)
      == ("permute.v2", "moe.permute", 128, 8, 2048, 64, MAX, "", 0, 4096), f"perm {perm}")
check([k.symbol for k in perm.kernels] == ["moe_permute_count_e128_k8",
                                           "moe_permute_index_e128_k8_off64",
                                           "moe_permute_gather_off64"]
      and perm.kernels[1].smem == 17408, "permute kernels")
check(perms.entry("perm32").hidden == -1 and perms.entry("perm32").offsets_bits == 32
      and perms.entry("perm32").chunk == 64, "perm32")
# out: the rows' element of a permute ("" for the other non-GEMM ABIs).
check((perm.out, perms.entry("qperm").out, perms.entry("router").out)
      == ("bf16", "f8E4M3FN", ""), "permute out")
# The sources (T*top_k*4 bytes, rounded up to 256), then an int32 count per
# chunk and expert.
check(perms.permute_workspace_bytes("perm", 3) == 256 + 128 * 4, "workspace bytes")
check(perms.permute_workspace_bytes("perm", 16) == 512 + 128 * 4, "workspace bytes, T = 16")
check(perms.permute_workspace_bytes("perm32", 4096) == 32768 + 128 * 4 * 4,
      "workspace bytes i32, 128 chunks")
expect_error(lambda: perms.permute_workspace_bytes("perm32", 4097), "INVALID_ARGUMENT",
             "moePermuteWorkspaceBytes(perm32): T = 4097 exceeds the entry's max_rows")
expect_error(lambda: perms.permute("router", None, None), "INVALID_ARGUMENT",
             "permute(router): entry 'router' has abi route.v1 (op moe.route), not "
             "permute.v2")
expect_error(lambda: perms.route("perm", None), "INVALID_ARGUMENT",
             "route(perm): entry 'perm' has abi permute.v2")
expect_error(lambda: moe_runtime.Bundle.from_bytes(permute_bytes.replace(
    b"abi=permute.v2 max_rows=4096", b"abi=permute.v1 max_rows=4096")), "UNSUPPORTED",
    "bundle line 8: entry 'perm32': abi 'permute.v1' is not supported (this runtime "
    "implements bundle version 6 with abis grouped_matmul.v3, grouped_matmul_fp8.v1, "
    "route.v1, unpermute.v2, "
    "permute.v2, layer.v1, quantize.v1 and layer_fp8.v1): it predates the multi-CTA count and index kernels, "
    "recompile it")
expect_error(lambda: perms.permute("nope", None, None), "NOT_FOUND", "no entry 'nope'")
expect_error(lambda: perms.permute("perm", None, None, rows_scale=object()),
             "INVALID_ARGUMENT", "permute(perm): rows_scale is only taken by entries with "
             "out f8E4M3FN (this one's out is bf16)")

tokens = T((16, 2048), bf16, 0x7f0000110000)
perm_ids = T((16, 8), i32, 0x7f0000120000)
allocated.clear()
expect_launch_attempt(lambda: perms.permute("perm", tokens, perm_ids), "permute")
check(allocated == [((128, 2048), bf16, "cuda:0"), ((129,), i64, "cuda:0"),
                    ((16, 8), i64, "cuda:0"), ((256,), i32, "cuda:0")],
      f"permute allocates rows, offsets, slots and workspace: {allocated}")
allocated.clear()
perm_rows = T((128, 2048), bf16, 0x7f0000130000)
perm_offsets = T((129,), i64, 0x7f0000140000)
perm_slots = T((16, 8), i64, 0x7f0000150000)
expect_launch_attempt(lambda: perms.permute("perm", tokens, perm_ids, perm_rows, perm_offsets,
                                            perm_slots, T((1024,), fake_torch.uint8,
                                                          0x7f0000160000)),
                      "permute with everything given, a uint8 workspace")
expect_launch_attempt(lambda: perms.permute("perm32", T((4096, 7168), bf16),
                                            T((4096, 2), i32), workspace=T((8704,), i32)),
                      "permute, dynamic H, an int32 workspace")
check(allocated == [((8192, 7168), bf16, "cuda:0"), ((5,), i32, "cuda:0"),
                    ((4096, 2), i32, "cuda:0")], f"permute32 allocations: {allocated}")
for call, needle in [
        (lambda: perms.permute("perm", T((16, 2048), f32), perm_ids),
         "permute(perm): tokens is torch.float32, expected torch.bfloat16"),
        (lambda: perms.permute("perm", tokens, T((16, 8), i64)),
         "permute(perm): ids is torch.int64, expected torch.int32"),
        (lambda: perms.permute("perm", tokens, perm_ids, offsets=T((129,), i32)),
         "permute(perm): offsets is torch.int32, expected torch.int64"),
        (lambda: perms.permute("perm32", T((16, 64), bf16), T((16, 2), i32),
                               slots=T((16, 2), i64)),
         "permute(perm32): slots is torch.int64, expected torch.int32"),
        (lambda: perms.permute("perm", tokens, perm_ids, rows=T((128, 2048), f32)),
         "permute(perm): rows is torch.float32, expected torch.bfloat16"),
        (lambda: perms.permute("perm", tokens, perm_ids, workspace=T((128,), i64)),
         "permute(perm): workspace is torch.int64, expected torch.int32 or torch.uint8"),
        (lambda: perms.permute("perm", tokens, perm_ids, workspace=T((128,), i32)),
         "permute(perm): workspace has 128 int32 elements, expected 256 (1024 bytes)"),
        (lambda: perms.permute("perm", tokens, perm_ids,
                               workspace=T((512,), fake_torch.uint8)),
         "permute(perm): workspace has 512 bytes, expected 1024"),
        (lambda: perms.permute("perm", tokens, T((16, 2), i32)),
         "permute(perm): ids is (16, 2), expected (16, 8) = (T, top_k)"),
        (lambda: perms.permute("perm", tokens, T((15, 8), i32)),
         "permute(perm): ids is (15, 8), expected (16, 8) = (T, top_k)"),
        (lambda: perms.permute("perm", T((16, 1024), bf16), perm_ids),
         "permute(perm): tokens (16, 1024) have H = 1024 columns, the entry has "
         "hidden = 2048"),
        (lambda: perms.permute("perm", T((16 * 2048,), bf16), perm_ids),
         "permute(perm): expected tokens [T, H] and ids [T, top_k], got (32768,), "
         "(16, 8)"),
        (lambda: perms.permute("perm", tokens, perm_ids, rows=T((16, 2048), bf16)),
         "permute(perm): rows is (16, 2048), expected (128, 2048)"),
        (lambda: perms.permute("perm", tokens, perm_ids, offsets=T((128,), i64)),
         "permute(perm): offsets is (128,), expected (129,)"),
        (lambda: perms.permute("perm", tokens, perm_ids, slots=T((8, 16), i64)),
         "permute(perm): slots is (8, 16), expected (16, 8)"),
        (lambda: perms.permute("perm", tokens, T((16, 8), i32, device="cuda:1")),
         "permute(perm): ids is on cuda:1 but tokens is on cuda:0"),
        (lambda: perms.permute("perm", T((16, 2048), bf16, contiguous=False), perm_ids),
         "permute(perm): tokens is not contiguous"),
        (lambda: perms.permute("perm32", T((4097, 64), bf16), T((4097, 2), i32)),
         "moePermuteWorkspaceBytes(perm32): T = 4097 exceeds the entry's max_rows = 4096"),
        # The C API's checks: each pointer lands in its field.
        (lambda: perms.permute("perm", T((16, 2048), bf16, 0x7f0000110008), perm_ids),
         "moePermute(perm): tokens pointer 0x7f0000110008 is not 16-byte aligned"),
        (lambda: perms.permute("perm", tokens, T((16, 8), i32, 0x7f0000120002)),
         "moePermute(perm): ids pointer 0x7f0000120002 is not 4-byte aligned"),
        (lambda: perms.permute("perm", tokens, perm_ids, T((128, 2048), bf16, 0x7f0000130004)),
         "moePermute(perm): rows pointer 0x7f0000130004 is not 16-byte aligned"),
        (lambda: perms.permute("perm", tokens, perm_ids, offsets=T((129,), i64, 0x7f0000140004)),
         "moePermute(perm): offsets pointer 0x7f0000140004 is not 8-byte aligned"),
        (lambda: perms.permute("perm", tokens, perm_ids, slots=T((16, 8), i64, 0x7f0000150004)),
         "moePermute(perm): slots pointer 0x7f0000150004 is not 8-byte aligned"),
        (lambda: perms.permute("perm", tokens, perm_ids,
                               workspace=T((256,), i32, 0x7f0000160004)),
         "moePermute(perm): workspace pointer 0x7f0000160004 is not 256-byte aligned"),
        (lambda: perms.permute("perm", tokens, perm_ids,
                               workspace=T((1024,), fake_torch.uint8, 0x7f0000160080)),
         "moePermute(perm): workspace pointer 0x7f0000160080 is not 256-byte aligned"),
        (lambda: perms.permute("perm32", T((16, 100), bf16), T((16, 2), i32)),
         "moePermute(perm32): H = 100 is not a multiple of 8")]:
    expect_error(call, "INVALID_ARGUMENT", needle)
# out=f8E4M3FN (qperm: E = 4, k = 2, H dynamic): rows is e4m3 codes
# [T*k, H] and rows_scale float32 [T*k, H/128], both allocated when not
# given, and both returned; rows_scale reaches its field of moePermuteArgs.
f8, u8 = fake_torch.float8_e4m3fn, fake_torch.uint8
q_tokens, q_ids = T((16, 256), bf16, 0x7f0000110000), T((16, 2), i32, 0x7f0000120000)
allocated.clear()
expect_launch_attempt(lambda: perms.permute("qperm", q_tokens, q_ids), "fp8 permute")
check(allocated == [((32, 256), f8, "cuda:0"), ((5,), i64, "cuda:0"),
                    ((16, 2), i64, "cuda:0"), ((68,), i32, "cuda:0"),
                    ((32, 2), f32, "cuda:0")],
      f"fp8 permute allocates rows, offsets, slots, workspace and rows_scale: {allocated}")
allocated.clear()
expect_launch_attempt(lambda: perms.permute("qperm", q_tokens, q_ids,
                                            rows=T((32, 256), u8, 0x7f0000130000),
                                            rows_scale=T((32, 2), f32, 0x7f0000170000)),
                      "fp8 permute into uint8 rows and a given rows_scale")
check(allocated == [((5,), i64, "cuda:0"), ((16, 2), i64, "cuda:0"), ((68,), i32, "cuda:0")],
      f"fp8 permute with rows and rows_scale allocates neither: {allocated}")
qperm_call = (lambda **changes: lambda: perms.permute(
    "qperm", changes.get("tokens", q_tokens), q_ids, rows=changes.get("rows"),
    rows_scale=changes.get("rows_scale")))
for call, needle in [
        (qperm_call(rows=T((32, 256), bf16)),
         "permute(qperm): rows is torch.bfloat16, expected torch.float8_e4m3fn or "
         "torch.uint8 (the entry's out is f8E4M3FN)"),
        (qperm_call(rows=T((32, 128), f8)),
         "permute(qperm): rows is (32, 128), expected (32, 256)"),
        (qperm_call(rows_scale=T((32, 2), bf16)),
         "permute(qperm): rows_scale is torch.bfloat16, expected torch.float32"),
        (qperm_call(rows_scale=T((32, 4), f32)),
         "permute(qperm): rows_scale is (32, 4), expected (32, 2) = (T*top_k, H/128)"),
        (qperm_call(rows_scale=T((16, 2), f32)),
         "permute(qperm): rows_scale is (16, 2), expected (32, 2)"),
        (qperm_call(rows_scale=T((32, 2), f32, device="cuda:1")),
         "permute(qperm): rows_scale is on cuda:1 but tokens is on cuda:0"),
        (qperm_call(rows_scale=T((32, 2), f32, contiguous=False)),
         "permute(qperm): rows_scale is not contiguous"),
        (qperm_call(tokens=T((16, 192), bf16)),
         "permute(qperm): tokens (16, 192) have H = 192 columns, but an out f8E4M3FN entry "
         "writes whole [1, 128] groups of a row: H must be a multiple of 128"),
        # The C API's checks: rows_scale lands in its field, after rows.
        (qperm_call(rows_scale=T((32, 2), f32, 0x7f0000170002)),
         "moePermute(qperm): rows_scale pointer 0x7f0000170002 is not 4-byte aligned"),
        (qperm_call(rows=T((32, 256), u8, 0x7f0000130008),
                    rows_scale=T((32, 2), f32, 0x7f0000170002)),
         "moePermute(qperm): rows pointer 0x7f0000130008 is not 16-byte aligned")]:
    expect_error(call, "INVALID_ARGUMENT", needle)
# A torch without float8 cannot feed an FP8 permute.
delattr(fake_torch, "float8_e4m3fn")
expect_error(qperm_call(), "INVALID_ARGUMENT",
             "permute(qperm): this torch has no float8_e4m3fn, the element type of a "
             "block-FP8 entry")
fake_torch.float8_e4m3fn = f8
perms.close()
expect_error(lambda: perms.permute("perm", None, None), "INVALID_ARGUMENT",
             "the bundle is closed")

# Biases of grouped matmuls and expert MLPs reach the C API.
mlp = moe_runtime.Bundle.from_bytes(mlp_bytes)
g_rows, g_offs = T((64, 128), bf16, 0x7f0000210000), T((9,), i32, 0x7f0000220000)
w13, w2 = T((8, 512, 128), bf16, 0x7f0000230000), T((8, 128, 256), bf16, 0x7f0000240000)
b13, b2 = T((8, 512), f32, 0x7f0000250000), T((8, 128), bf16, 0x7f0000260000)
expect_launch_attempt(lambda: mlp.grouped_matmul("biased_gate_up", g_rows, w13, g_offs,
                                                 bias=b13), "grouped_matmul with a bias")
expect_launch_attempt(lambda: mlp.expert_mlp("biased", g_rows, g_offs, w13, w2,
                                             gate_up_bias=b13, down_bias=b2),
                      "expert_mlp with biases")
for call, needle in [
        (lambda: mlp.grouped_matmul("biased_gate_up", g_rows, w13, g_offs,
                                    bias=T((8, 512), bf16)),
         "grouped_matmul(biased_gate_up): bias is torch.bfloat16, expected torch.float32"),
        (lambda: mlp.grouped_matmul("biased_gate_up", g_rows, w13, g_offs,
                                    bias=T((8, 256), f32)),
         "grouped_matmul(biased_gate_up): bias is (8, 256), expected (8, 512) = (E, N)"),
        (lambda: mlp.grouped_matmul("biased_gate_up", g_rows, w13, g_offs,
                                    bias=T((8, 512), f32, device="cuda:1")),
         "grouped_matmul(biased_gate_up): bias is on cuda:1 but rows is on cuda:0"),
        (lambda: mlp.expert_mlp("biased", g_rows, g_offs, w13, w2,
                                gate_up_bias=T((8, 512), bf16), down_bias=b2),
         "grouped_matmul(biased_gate_up): bias is torch.bfloat16, expected torch.float32"),
        # The C API's checks: the bias pointer lands in its field.
        (lambda: mlp.grouped_matmul("biased_gate_up", g_rows, w13, g_offs,
                                    bias=T((8, 512), f32, 0x7f0000250002)),
         "moeGroupedMatmul(biased_gate_up): bias pointer 0x7f0000250002 is not 4-byte "
         "aligned (the entry's bias is f32)")]:
    expect_error(call, "INVALID_ARGUMENT", needle)
mlp.close()

# Block-FP8 grouped matmuls: the tensor checks, allocations, and what reaches
# moeGroupedMatmul (rows_scale and weights_scale in their fields).
f8 = fake_torch.float8_e4m3fn
q_rows, q_weights = T((64, 512), f8, 0x7f0000610000), T((8, 256, 512), f8, 0x7f0000620000)
q_offs = T((9,), i32, 0x7f0000630000)
q_rs, q_ws = T((64, 4), f32, 0x7f0000640000), T((8, 2, 4), f32, 0x7f0000650000)
allocated.clear()
expect_launch_attempt(lambda: fp8.grouped_matmul("gemm", q_rows, q_weights, q_offs,
                                                 rows_scale=q_rs, weights_scale=q_ws),
                      "fp8 grouped_matmul")
check(allocated == [((64, 256), bf16, "cuda:0")], f"fp8 grouped_matmul allocates out: {allocated}")
# down: row_scale, an f32 bias, dynamic K = 1040 (KB = 9), N = 7168 (NB = 56).
d_rows, d_weights = T((16, 1040), f8, 0x7f0000660000), T((256, 7168, 1040), f8, 0x7f0000670000)
d_offs, d_scale, d_bias = (T((257,), i64, 0x7f0000680000), T((16,), f32, 0x7f0000690000),
                           T((256, 7168), f32, 0x7f00006a0000))
d_rs, d_ws = T((16, 9), f32, 0x7f00006b0000), T((256, 56, 9), f32, 0x7f00006c0000)


def down_call(**changes):
    given = dict(rows=d_rows, weights=d_weights, offsets=d_offs, out=None, row_scale=d_scale,
                 bias=d_bias, rows_scale=d_rs, weights_scale=d_ws)
    given.update(changes)
    return lambda: fp8.grouped_matmul("down", **given)


expect_launch_attempt(down_call(out=T((16, 7168), bf16, 0x7f00006d0000)),
                      "fp8 grouped_matmul with row_scale and bias")
gemm_call = (lambda **changes: lambda: fp8.grouped_matmul(
    "gemm", changes.get("rows", q_rows), changes.get("weights", q_weights), q_offs,
    rows_scale=changes.get("rows_scale", q_rs), weights_scale=changes.get("weights_scale", q_ws)))
for call, needle in [
        (gemm_call(rows=T((64, 512), bf16)),
         "grouped_matmul(gemm): rows is torch.bfloat16, expected torch.float8_e4m3fn"),
        (gemm_call(weights=T((8, 256, 512), bf16)),
         "grouped_matmul(gemm): weights is torch.bfloat16, expected torch.float8_e4m3fn"),
        (gemm_call(rows_scale=T((64, 4), bf16)),
         "grouped_matmul(gemm): rows_scale is torch.bfloat16, expected torch.float32"),
        (gemm_call(weights_scale=T((8, 2, 4), i32)),
         "grouped_matmul(gemm): weights_scale is torch.int32, expected torch.float32"),
        (gemm_call(rows_scale=T((64, 5), f32)),
         "grouped_matmul(gemm): rows_scale is (64, 5), expected (64, 4) = (M, ceil(K/128))"),
        (gemm_call(rows_scale=T((256,), f32)),
         "grouped_matmul(gemm): rows_scale is (256,), expected (64, 4)"),
        (gemm_call(weights_scale=T((8, 4, 2), f32)),
         "grouped_matmul(gemm): weights_scale is (8, 4, 2), expected (8, 2, 4) = "
         "(E, ceil(N/128), ceil(K/128))"),
        (down_call(weights_scale=T((256, 56, 8), f32)),
         "grouped_matmul(down): weights_scale is (256, 56, 8), expected (256, 56, 9)"),
        (gemm_call(rows_scale=T((64, 4), f32, device="cuda:1")),
         "grouped_matmul(gemm): rows_scale is on cuda:1 but rows is on cuda:0"),
        (gemm_call(weights_scale=T((8, 2, 4), f32, contiguous=False)),
         "grouped_matmul(gemm): weights_scale is not contiguous"),
        (gemm_call(rows_scale=T((64, 4), f32, device="cpu")),
         "grouped_matmul(gemm): rows_scale is on cpu, not on a CUDA device"),
        (lambda: fp8.grouped_matmul("plain", q_rows, T((8, 256, 512), f8), q_offs),
         "grouped_matmul(plain): rows is torch.float8_e4m3fn, expected torch.bfloat16"),
        # The C API's checks: each scale lands in its field; K % 16.
        (gemm_call(rows_scale=T((64, 4), f32, 0x7f0000640002)),
         "moeGroupedMatmul(gemm): rows_scale pointer 0x7f0000640002 is not 4-byte aligned"),
        (gemm_call(weights_scale=T((8, 2, 4), f32, 0x7f0000650001)),
         "moeGroupedMatmul(gemm): weights_scale pointer 0x7f0000650001 is not 4-byte aligned"),
        (down_call(rows=T((16, 24), f8), weights=T((256, 7168, 24), f8),
                   rows_scale=T((16, 1), f32), weights_scale=T((256, 56, 1), f32)),
         "moeGroupedMatmul(down): K = 24 is not a multiple of 16 (TMA row pitch of 1-byte "
         "float8 elements must be a multiple of 16 bytes)"),
        (down_call(rows=T((16, 8), f8), weights=T((256, 7168, 8), f8),
                   rows_scale=T((16, 1), f32), weights_scale=T((256, 56, 1), f32)),
         "moeGroupedMatmul(down): K = 8 is less than 16"),
        (down_call(row_scale=T((16,), f32, 0x7f0000690002)),
         "moeGroupedMatmul(down): row_scale pointer 0x7f0000690002 is not 4-byte aligned")]:
    expect_error(call, "INVALID_ARGUMENT", needle)
# out=f8E4M3FN (gate_up: E = 8, N = 512, K = 256): out is e4m3 codes
# [M, N/2] and out_scale float32 [M, N/256], both allocated when not given,
# and both returned; out_scale reaches its field of moeGroupedMatmulArgs.
u8 = fake_torch.uint8
g_rows, g_w = T((64, 256), f8, 0x7f0000910000), T((8, 512, 256), f8, 0x7f0000920000)
g_rs, g_ws = T((64, 2), f32, 0x7f0000930000), T((8, 4, 2), f32, 0x7f0000940000)
allocated.clear()
expect_launch_attempt(lambda: fp8.grouped_matmul("gate_up", g_rows, g_w, q_offs, rows_scale=g_rs,
                                                 weights_scale=g_ws), "fp8-out grouped_matmul")
check(allocated == [((64, 256), f8, "cuda:0"), ((64, 2), f32, "cuda:0")],
      f"fp8-out grouped_matmul allocates out and out_scale: {allocated}")
allocated.clear()
expect_launch_attempt(lambda: fp8.grouped_matmul("gate_up", g_rows, g_w, q_offs,
                                                 out=T((64, 256), u8, 0x7f0000950000),
                                                 rows_scale=g_rs, weights_scale=g_ws,
                                                 out_scale=T((64, 2), f32, 0x7f0000960000)),
                      "fp8-out grouped_matmul into uint8 out and a given out_scale")
check(allocated == [], f"fp8-out grouped_matmul with outputs allocates nothing: {allocated}")
gate_up_call = (lambda **changes: lambda: fp8.grouped_matmul(
    "gate_up", changes.get("rows", g_rows), changes.get("weights", g_w), q_offs,
    out=changes.get("out"), rows_scale=g_rs, weights_scale=g_ws,
    out_scale=changes.get("out_scale")))
for call, needle in [
        (gate_up_call(out=T((64, 256), bf16)),
         "grouped_matmul(gate_up): out is torch.bfloat16, expected torch.float8_e4m3fn or "
         "torch.uint8 (the entry's out is f8E4M3FN)"),
        (gate_up_call(out=T((64, 512), f8)),
         "grouped_matmul(gate_up): out is (64, 512), expected (64, 256)"),
        (gate_up_call(out_scale=T((64, 2), bf16)),
         "grouped_matmul(gate_up): out_scale is torch.bfloat16, expected torch.float32"),
        (gate_up_call(out_scale=T((64, 4), f32)),
         "grouped_matmul(gate_up): out_scale is (64, 4), expected (64, 2) = (M, N/256)"),
        (gate_up_call(out_scale=T((64, 2), f32, device="cuda:1")),
         "grouped_matmul(gate_up): out_scale is on cuda:1 but rows is on cuda:0"),
        (gate_up_call(out_scale=T((64, 2), f32, contiguous=False)),
         "grouped_matmul(gate_up): out_scale is not contiguous"),
        (gate_up_call(weights=T((8, 384, 256), f8)),
         "grouped_matmul(gate_up): weights (8, 384, 256) have N = 384 rows per expert, but an "
         "out f8E4M3FN entry writes whole [1, 128] groups of its N/2 output columns: N must "
         "be a multiple of 256"),
        # The C API's checks: out_scale lands in its field.
        (gate_up_call(out_scale=T((64, 2), f32, 0x7f0000960002)),
         "moeGroupedMatmul(gate_up): out_scale pointer 0x7f0000960002 is not 4-byte aligned")]:
    expect_error(call, "INVALID_ARGUMENT", needle)
# A torch without float8 cannot feed an FP8 entry.
delattr(fake_torch, "float8_e4m3fn")
expect_error(gemm_call(), "INVALID_ARGUMENT",
             "grouped_matmul(gemm): this torch has no float8_e4m3fn, the element type of a "
             "block-FP8 entry")
fake_torch.float8_e4m3fn = f8
fp8.close()

# MXFP8 grouped matmuls (mx: gemm E = 8, N = 256, K = 512; down row_scale,
# f32 bias, E = 256, N = 7168, K dynamic): UE8M0 scales rows_scale [M, K/32]
# and weights_scale [E, N, K/32] of any 1-byte dtype, any alignment.
m_rows, m_weights = T((64, 512), f8, 0x7f0000a10000), T((8, 256, 512), f8, 0x7f0000a20000)
m_rs, m_ws = T((64, 16), u8, 0x7f0000a30001), T((8, 256, 16), u8, 0x7f0000a40003)
allocated.clear()
expect_launch_attempt(lambda: mx.grouped_matmul("gemm", m_rows, m_weights, q_offs,
                                                rows_scale=m_rs, weights_scale=m_ws),
                      "mxfp8 grouped_matmul with odd uint8 scales")
check(allocated == [((64, 256), bf16, "cuda:0")], f"mxfp8 grouped_matmul allocates out: {allocated}")
i8 = type("int8", (), {"__repr__": lambda self: "torch.int8"})()
expect_launch_attempt(lambda: mx.grouped_matmul("gemm", m_rows, m_weights, q_offs,
                                                rows_scale=T((64, 16), i8),
                                                weights_scale=T((8, 256, 16), f8)),
                      "mxfp8 grouped_matmul with other 1-byte scales")
md_rows, md_weights = T((16, 96), f8, 0x7f0000a50000), T((256, 7168, 96), f8, 0x7f0000a60000)
md_rs, md_ws = T((16, 3), u8, 0x7f0000a70000), T((256, 7168, 3), u8, 0x7f0000a80000)


def mx_down_call(**changes):
    given = dict(rows=md_rows, weights=md_weights, offsets=d_offs, out=None, row_scale=d_scale,
                 bias=d_bias, rows_scale=md_rs, weights_scale=md_ws)
    given.update(changes)
    return lambda: mx.grouped_matmul("down", **given)


expect_launch_attempt(mx_down_call(), "mxfp8 grouped_matmul with row_scale and bias")
mx_gemm_call = (lambda **changes: lambda: mx.grouped_matmul(
    "gemm", changes.get("rows", m_rows), m_weights, q_offs,
    rows_scale=changes.get("rows_scale", m_rs), weights_scale=changes.get("weights_scale", m_ws)))
for call, needle in [
        (mx_gemm_call(rows_scale=T((64, 16), f32)),
         "grouped_matmul(gemm): rows_scale is torch.float32, expected a 1-byte dtype "
         "(torch.uint8: the UE8M0 scale codes of an mxfp8 entry)"),
        (mx_gemm_call(weights_scale=T((8, 256, 16), bf16)),
         "grouped_matmul(gemm): weights_scale is torch.bfloat16, expected a 1-byte dtype"),
        (mx_gemm_call(rows_scale=T((64, 4), u8)),
         "grouped_matmul(gemm): rows_scale is (64, 4), expected (64, 16) = (M, K/32)"),
        (mx_gemm_call(weights_scale=T((8, 2, 4), u8)),
         "grouped_matmul(gemm): weights_scale is (8, 2, 4), expected (8, 256, 16) = "
         "(E, N, K/32)"),
        (mx_down_call(weights_scale=T((256, 56, 3), u8)),
         "grouped_matmul(down): weights_scale is (256, 56, 3), expected (256, 7168, 3)"),
        (mx_gemm_call(rows_scale=T((64, 16), u8, device="cuda:1")),
         "grouped_matmul(gemm): rows_scale is on cuda:1 but rows is on cuda:0"),
        (mx_gemm_call(weights_scale=T((8, 256, 16), u8, contiguous=False)),
         "grouped_matmul(gemm): weights_scale is not contiguous"),
        (mx_gemm_call(rows=T((64, 512), bf16)),
         "grouped_matmul(gemm): rows is torch.bfloat16, expected torch.float8_e4m3fn"),
        # The C API's checks: K a multiple of 32 (the scales' shape rounds up).
        (mx_down_call(rows=T((16, 48), f8), weights=T((256, 7168, 48), f8),
                      rows_scale=T((16, 2), u8), weights_scale=T((256, 7168, 2), u8)),
         "moeGroupedMatmul(down): K = 48 is not a multiple of 32 (format=mxfp8 takes a scale "
         "per 32 elements of a row)"),
        (mx_down_call(rows=T((16, 16), f8), weights=T((256, 7168, 16), f8),
                      rows_scale=T((16, 1), u8), weights_scale=T((256, 7168, 1), u8)),
         "moeGroupedMatmul(down): K = 16 is less than 32")]:
    expect_error(call, "INVALID_ARGUMENT", needle)
# Where torch has float8_e8m0fnu, the error names it too, and it is taken.
e8m0 = type("float8_e8m0fnu", (), {"__repr__": lambda self: "torch.float8_e8m0fnu"})()
fake_torch.float8_e8m0fnu = e8m0
expect_error(mx_gemm_call(rows_scale=T((64, 16), f32)), "INVALID_ARGUMENT",
             "grouped_matmul(gemm): rows_scale is torch.float32, expected a 1-byte dtype "
             "(torch.uint8 or torch.float8_e8m0fnu: the UE8M0 scale codes of an mxfp8 entry)")
expect_launch_attempt(mx_gemm_call(rows_scale=T((64, 16), e8m0),
                                   weights_scale=T((8, 256, 16), e8m0)),
                      "mxfp8 grouped_matmul with float8_e8m0fnu scales")
delattr(fake_torch, "float8_e8m0fnu")
mx.close()

# Layers: the tensor checks, allocations, and what reaches moeLayer.
l_tokens = T((16, 64), bf16, 0x7f0000410000)
l_logits = T((16, 32), bf16, 0x7f0000420000)
l_score = T((32,), f32, 0x7f0000430000)
l_w13, l_w2 = T((32, 128, 64), bf16, 0x7f0000440000), T((32, 64, 64), bf16, 0x7f0000450000)
l_b13, l_b2 = T((32, 128), f32, 0x7f0000460000), T((32, 64), bf16, 0x7f0000470000)
oss_bytes = layers.layer_workspace_bytes("gptoss", 16, 64, 64)


def gptoss(**changes):
    kwargs = dict(score_bias=l_score, gate_up_bias=l_b13, down_bias=l_b2)
    positional = dict(tokens=l_tokens, logits=l_logits, gate_up_weights=l_w13,
                      down_weights=l_w2)
    for name, value in changes.items():
        (positional if name in positional else kwargs)[name] = value
    return lambda: layers.layer("gptoss", *positional.values(), **kwargs)


allocated.clear()
expect_launch_attempt(gptoss(), "layer")
check(allocated == [((16, 64), bf16, "cuda:0"), ((oss_bytes,), fake_torch.uint8, "cuda:0")],
      f"layer allocates out and the workspace: {allocated}")
allocated.clear()
expect_launch_attempt(gptoss(out=T((16, 64), bf16, 0x7f0000480000),
                             workspace=T((oss_bytes + 100,), fake_torch.uint8, 0x7f0000500000)),
                      "layer with out and a larger workspace")
check(allocated == [], f"layer allocates nothing more: {allocated}")
expect_launch_attempt(lambda: layers.layer("mixtral", T((4, 4096), bf16), T((4, 8), f32),
                                           T((8, 28672, 4096), bf16),
                                           T((8, 4096, 14336), bf16)), "layer, no biases")
for call, needle in [
        (gptoss(tokens=T((16, 64), f32)),
         "layer(gptoss): tokens is torch.float32, expected torch.bfloat16"),
        (gptoss(logits=T((16, 32), f32)),
         "layer(gptoss): logits is torch.float32, expected torch.bfloat16"),
        (gptoss(score_bias=T((32,), bf16)),
         "layer(gptoss): score_bias is torch.bfloat16, expected torch.float32"),
        (gptoss(gate_up_bias=T((32, 128), bf16)),
         "layer(gptoss): gate_up_bias is torch.bfloat16, expected torch.float32"),
        (gptoss(down_bias=T((32, 64), f32)),
         "layer(gptoss): down_bias is torch.float32, expected torch.bfloat16"),
        (gptoss(gate_up_weights=T((32, 128, 64), f32)),
         "layer(gptoss): gate_up_weights is torch.float32, expected torch.bfloat16"),
        (gptoss(out=T((16, 64), f32)), "layer(gptoss): out is torch.float32"),
        (gptoss(workspace=T((oss_bytes,), i32)),
         "layer(gptoss): workspace is torch.int32, expected torch.uint8"),
        (gptoss(workspace=T((oss_bytes - 1,), fake_torch.uint8)),
         f"layer(gptoss): workspace has {oss_bytes - 1} bytes, expected at least {oss_bytes}"),
        (gptoss(tokens=T((16 * 64,), bf16)),
         "layer(gptoss): expected tokens [T, H], logits [T, E], gate_up_weights [E, 2I, H] "
         "and down_weights [E, H, I], got (1024,)"),
        (gptoss(logits=T((15, 32), bf16)),
         "layer(gptoss): logits is (15, 32), expected (16, 32) = (T, E)"),
        (gptoss(gate_up_weights=T((32, 128, 32), bf16)),
         "layer(gptoss): gate_up_weights is (32, 128, 32), expected (32, 128, 64) = (E, 2I, H)"),
        (gptoss(gate_up_weights=T((32, 127, 64), bf16)),
         "layer(gptoss): gate_up_weights is (32, 127, 64), expected (32, 126, 64)"),
        (gptoss(down_weights=T((32, 64, 32), bf16)),
         "layer(gptoss): down_weights is (32, 64, 32), expected (32, 64, 64) = (E, H, I)"),
        (gptoss(score_bias=T((31,), f32)),
         "layer(gptoss): score_bias is (31,), expected (32,) = (E,)"),
        (gptoss(gate_up_bias=T((32, 64), f32)),
         "layer(gptoss): gate_up_bias is (32, 64), expected (32, 128) = (E, 2I)"),
        (gptoss(down_bias=T((32, 128), bf16)),
         "layer(gptoss): down_bias is (32, 128), expected (32, 64) = (E, H)"),
        (gptoss(out=T((16, 128), bf16)),
         "layer(gptoss): out is (16, 128), expected (16, 64) = (T, H)"),
        (gptoss(down_bias=T((32, 64), bf16, device="cuda:1")),
         "layer(gptoss): down_bias is on cuda:1 but tokens is on cuda:0"),
        (gptoss(tokens=T((16, 64), bf16, contiguous=False)),
         "layer(gptoss): tokens is not contiguous"),
        # The C API's checks: T, H and I, and each pointer in its field.
        (gptoss(tokens=T((4097, 64), bf16), logits=T((4097, 32), bf16)),
         "moeLayerWorkspaceBytes(gptoss): T = 4097 exceeds the entry's max_rows = 4096"),
        (gptoss(tokens=T((16, 60), bf16), gate_up_weights=T((32, 128, 60), bf16),
                down_weights=T((32, 60, 64), bf16), down_bias=T((32, 60), bf16)),
         "moeLayerWorkspaceBytes(gptoss): hidden = 60 is not a positive multiple of 8"),
        (gptoss(tokens=T((16, 64), bf16, 0x7f0000410008)),
         "moeLayer(gptoss): tokens pointer 0x7f0000410008 is not 16-byte aligned"),
        (gptoss(logits=T((16, 32), bf16, 0x7f0000420001)),
         "moeLayer(gptoss): logits pointer 0x7f0000420001 is not 2-byte aligned"),
        (gptoss(score_bias=T((32,), f32, 0x7f0000430002)),
         "moeLayer(gptoss): score_bias pointer 0x7f0000430002 is not 4-byte aligned"),
        (gptoss(gate_up_weights=T((32, 128, 64), bf16, 0x7f0000440008)),
         "moeLayer(gptoss): gate_up_weights pointer 0x7f0000440008 is not 16-byte aligned"),
        (gptoss(down_weights=T((32, 64, 64), bf16, 0x7f0000450008)),
         "moeLayer(gptoss): down_weights pointer 0x7f0000450008 is not 16-byte aligned"),
        (gptoss(gate_up_bias=T((32, 128), f32, 0x7f0000460002)),
         "moeLayer(gptoss): gate_up_bias pointer 0x7f0000460002 is not 4-byte aligned"),
        (gptoss(down_bias=T((32, 64), bf16, 0x7f0000470001)),
         "moeLayer(gptoss): down_bias pointer 0x7f0000470001 is not 2-byte aligned"),
        (gptoss(out=T((16, 64), bf16, 0x7f0000480004)),
         "moeLayer(gptoss): out pointer 0x7f0000480004 is not 16-byte aligned"),
        (gptoss(workspace=T((oss_bytes,), fake_torch.uint8, 0x7f0000500080)),
         "moeLayer(gptoss): workspace pointer 0x7f0000500080 is not 256-byte aligned")]:
    expect_error(call, "INVALID_ARGUMENT", needle)
# A layer.v1 layer's weights are bf16.
expect_error(lambda: layers.layer("mixtral", T((4, 4096), bf16), T((4, 8), f32),
                                  T((8, 28672, 4096), fake_torch.float8_e4m3fn),
                                  T((8, 4096, 14336), bf16)), "INVALID_ARGUMENT",
             "layer(mixtral): gate_up_weights is torch.float8_e4m3fn, expected torch.bfloat16")
layers.close()

# Block-FP8 layers: the tensor checks, allocations, and what reaches moeLayer
# (the weights' scales in their fields).
f8 = fake_torch.float8_e4m3fn
q_tokens, q_logits = T((16, 7168), bf16, 0x7f0000710000), T((16, 256), f32, 0x7f0000720000)
q_score = T((256,), f32, 0x7f0000730000)
q13, q2 = T((256, 4096, 7168), f8, 0x7f0000740000), T((256, 7168, 2048), f8, 0x7f0000750000)
s13, s2 = T((256, 32, 56), f32, 0x7f0000760000), T((256, 56, 16), f32, 0x7f0000770000)
dsv3_bytes = fp8_layers.layer_workspace_bytes("dsv3", 16, 7168, 2048)


def dsv3_call(**changes):
    kwargs = dict(score_bias=q_score, gate_up_weights_scale=s13, down_weights_scale=s2)
    positional = dict(tokens=q_tokens, logits=q_logits, gate_up_weights=q13, down_weights=q2)
    for name, value in changes.items():
        (positional if name in positional else kwargs)[name] = value
    return lambda: fp8_layers.layer("dsv3", *positional.values(), **kwargs)


allocated.clear()
expect_launch_attempt(dsv3_call(), "fp8 layer")
check(allocated == [((16, 7168), bf16, "cuda:0"), ((dsv3_bytes,), fake_torch.uint8, "cuda:0")],
      f"fp8 layer allocates out and the workspace: {allocated}")
allocated.clear()
expect_launch_attempt(lambda: fp8_layers.layer("dsq", q_tokens, q_logits, q13, q2,
                                               score_bias=q_score, gate_up_weights_scale=s13,
                                               down_weights_scale=s2), "six-step fp8 layer")
check(allocated == [((16, 7168), bf16, "cuda:0"), ((dsv3_bytes,), fake_torch.uint8, "cuda:0")],
      f"the six-step fp8 layer allocates out and the same workspace: {allocated}")
allocated.clear()
# The intermediate of a block-FP8 expert MLP is an ordinary quantize.
expect_launch_attempt(lambda: fp8_layers.quantize("mlp_intermediate", T((64, 2048), bf16)),
                      "quantize of an expert MLP's intermediate")
check(allocated == [((64, 2048), f8, "cuda:0"), ((64, 16), f32, "cuda:0")],
      f"the intermediate's values and scales: {allocated}")
for call, needle in [
        (dsv3_call(gate_up_weights=T((256, 4096, 7168), bf16)),
         "layer(dsv3): gate_up_weights is torch.bfloat16, expected torch.float8_e4m3fn"),
        (dsv3_call(down_weights=T((256, 7168, 2048), bf16)),
         "layer(dsv3): down_weights is torch.bfloat16, expected torch.float8_e4m3fn"),
        (dsv3_call(gate_up_weights_scale=T((256, 32, 56), bf16)),
         "layer(dsv3): gate_up_weights_scale is torch.bfloat16, expected torch.float32"),
        (dsv3_call(down_weights_scale=T((256, 56, 16), i32)),
         "layer(dsv3): down_weights_scale is torch.int32, expected torch.float32"),
        (dsv3_call(gate_up_weights_scale=T((256, 56, 32), f32)),
         "layer(dsv3): gate_up_weights_scale is (256, 56, 32), expected (256, 32, 56) = "
         "(E, 2I/128, H/128)"),
        (dsv3_call(down_weights_scale=T((256, 16, 56), f32)),
         "layer(dsv3): down_weights_scale is (256, 16, 56), expected (256, 56, 16) = "
         "(E, H/128, I/128)"),
        (dsv3_call(down_weights_scale=T((256, 56, 16), f32, device="cuda:1")),
         "layer(dsv3): down_weights_scale is on cuda:1 but tokens is on cuda:0"),
        (dsv3_call(gate_up_weights_scale=T((256, 32, 56), f32, contiguous=False)),
         "layer(dsv3): gate_up_weights_scale is not contiguous"),
        # The C API's checks: each scale in its field.
        (dsv3_call(gate_up_weights_scale=T((256, 32, 56), f32, 0x7f0000760002)),
         "moeLayer(dsv3): gate_up_weights_scale pointer 0x7f0000760002 is not 4-byte aligned "
         "(f32 scales)"),
        (dsv3_call(down_weights_scale=T((256, 56, 16), f32, 0x7f0000770001)),
         "moeLayer(dsv3): down_weights_scale pointer 0x7f0000770001 is not 4-byte aligned"),
        (dsv3_call(gate_up_weights=T((256, 4096, 7168), f8, 0x7f0000740008)),
         "moeLayer(dsv3): gate_up_weights pointer 0x7f0000740008 is not 16-byte aligned")]:
    expect_error(call, "INVALID_ARGUMENT", needle)
delattr(fake_torch, "float8_e4m3fn")
expect_error(dsv3_call(), "INVALID_ARGUMENT",
             "layer(dsv3): this torch has no float8_e4m3fn, the element type of a block-FP8 entry")
fake_torch.float8_e4m3fn = f8
fp8_layers.close()

# MXFP8 layers (mx_layers: dsv3 with mxfp8 GEMMs): the weights' scales are
# UE8M0 bytes [E, 2I, H/32] and [E, H, I/32], of any 1-byte dtype and
# alignment.
m13, m2 = T((256, 4096, 224), u8, 0x7f0000b10001), T((256, 7168, 64), u8, 0x7f0000b20003)


def mx_layer_call(**changes):
    kwargs = dict(score_bias=q_score, gate_up_weights_scale=m13, down_weights_scale=m2)
    positional = dict(tokens=q_tokens, logits=q_logits, gate_up_weights=q13, down_weights=q2)
    for name, value in changes.items():
        (positional if name in positional else kwargs)[name] = value
    return lambda: mx_layers.layer("dsv3", *positional.values(), **kwargs)


allocated.clear()
expect_launch_attempt(mx_layer_call(), "mxfp8 layer")
check(allocated == [((16, 7168), bf16, "cuda:0"), ((dsv3_bytes,), fake_torch.uint8, "cuda:0")],
      f"the mxfp8 layer allocates out and the same workspace: {allocated}")
expect_launch_attempt(mx_layer_call(gate_up_weights_scale=T((256, 4096, 224), f8)),
                      "mxfp8 layer with float8 scale bytes")
for call, needle in [
        (mx_layer_call(gate_up_weights_scale=T((256, 4096, 224), f32)),
         "layer(dsv3): gate_up_weights_scale is torch.float32, expected a 1-byte dtype "
         "(torch.uint8: the UE8M0 scale codes of an mxfp8 entry)"),
        (mx_layer_call(down_weights_scale=T((256, 7168, 64), i32)),
         "layer(dsv3): down_weights_scale is torch.int32, expected a 1-byte dtype"),
        (mx_layer_call(gate_up_weights_scale=T((256, 32, 56), u8)),
         "layer(dsv3): gate_up_weights_scale is (256, 32, 56), expected (256, 4096, 224) = "
         "(E, 2I, H/32)"),
        (mx_layer_call(down_weights_scale=T((256, 56, 16), u8)),
         "layer(dsv3): down_weights_scale is (256, 56, 16), expected (256, 7168, 64) = "
         "(E, H, I/32)"),
        (mx_layer_call(down_weights_scale=T((256, 7168, 64), u8, device="cuda:1")),
         "layer(dsv3): down_weights_scale is on cuda:1 but tokens is on cuda:0"),
        (mx_layer_call(gate_up_weights=T((256, 4096, 7168), f8, 0x7f0000740008)),
         "moeLayer(dsv3): gate_up_weights pointer 0x7f0000740008 is not 16-byte aligned")]:
    expect_error(call, "INVALID_ARGUMENT", needle)
mx_layers.close()

# quantize: what it allocates, its tensor checks, and the C API's.
e4m3, e5m2, u8 = fake_torch.float8_e4m3fn, fake_torch.float8_e5m2, fake_torch.uint8
xq = T((16, 7168), bf16, 0x7f0000600000)
allocated.clear()
expect_launch_attempt(lambda: quants.quantize("act", xq), "quantize")
check(allocated == [((16, 7168), e4m3, "cuda:0"), ((16, 56), f32, "cuda:0")],
      f"quantize allocates values and f32 scales: {allocated}")
allocated.clear()
# E8M0 codes as torch.uint8 where torch has no float8_e8m0fnu.
expect_launch_attempt(lambda: quants.quantize("mx5", T((64, 256), f32)), "quantize mx5")
check(allocated == [((64, 256), e5m2, "cuda:0"), ((64, 8), u8, "cuda:0")],
      f"quantize allocates e5m2 values and E8M0 codes: {allocated}")
allocated.clear()
expect_launch_attempt(lambda: quants.quantize("weights", T((8, 256, 512), bf16)),
                      "quantize weights")
check(allocated == [((8, 256, 512), e4m3, "cuda:0"), ((8, 2, 4), f32, "cuda:0")],
      f"quantize allocates per-expert scales: {allocated}")
allocated.clear()
expect_launch_attempt(lambda: quants.quantize("mx", T((4, 4096), bf16),
                                              T((4, 4096), u8), T((4, 128), u8)),
                      "quantize into uint8 values and scales")
check(allocated == [], f"quantize with outputs allocates nothing: {allocated}")
for call, needle in [
        (lambda: quants.quantize("act", T((16, 7168), f32)),
         "quantize(act): x is torch.float32, expected torch.bfloat16"),
        (lambda: quants.quantize("mx5", T((64, 256), bf16)),
         "quantize(mx5): x is torch.bfloat16, expected torch.float32"),
        (lambda: quants.quantize("weights", T((256, 512), bf16)),
         "quantize(weights): expected x [E, R, C] (the entry's rank is 3), got "
         "(256, 512)"),
        (lambda: quants.quantize("act", T((7168,), bf16)),
         "quantize(act): expected x [R, C] (the entry's rank is 2), got (7168,)"),
        (lambda: quants.quantize("act", xq, values=T((16, 7168), bf16)),
         "quantize(act): values is torch.bfloat16, expected torch.float8_e4m3fn or "
         "torch.uint8"),
        (lambda: quants.quantize("mx5", T((64, 256), f32), values=T((64, 256), e4m3)),
         "quantize(mx5): values is torch.float8_e4m3fn, expected torch.float8_e5m2 "
         "or torch.uint8"),
        (lambda: quants.quantize("act", xq, scales=T((16, 56), u8)),
         "quantize(act): scales is torch.uint8, expected torch.float32"),
        (lambda: quants.quantize("mx", T((4, 4096), bf16), scales=T((4, 128), f32)),
         "quantize(mx): scales is torch.float32, expected torch.uint8"),
        (lambda: quants.quantize("act", xq, values=T((16, 7167), e4m3)),
         "quantize(act): values is (16, 7167), expected (16, 7168) (x's shape)"),
        (lambda: quants.quantize("act", xq, scales=T((16, 57), f32)),
         "quantize(act): scales is (16, 57), expected (16, 56) (one per [1, 128] "
         "block)"),
        (lambda: quants.quantize("weights", T((8, 256, 512), bf16),
                                 scales=T((8, 4, 2), f32)),
         "quantize(weights): scales is (8, 4, 2), expected (8, 2, 4) (one per "
         "[128, 128] block)"),
        (lambda: quants.quantize("act", T((16, 7168), bf16, device="cpu")),
         "quantize(act): x is on cpu, not on a CUDA device"),
        (lambda: quants.quantize("act", xq, values=T((16, 7168), e4m3, device="cuda:1")),
         "quantize(act): values is on cuda:1 but x is on cuda:0"),
        (lambda: quants.quantize("act", T((16, 7168), bf16, contiguous=False)),
         "quantize(act): x is not contiguous"),
        # The C API's checks: sizes, then each pointer in its field.
        (lambda: quants.quantize("act", T((16, 7040), bf16)),
         "moeQuantize(act): C = 7040 (cols) does not match the entry's cols = 7168"),
        (lambda: quants.quantize("act", T((0, 7168), bf16)),
         "moeQuantize(act): R = 0 (rows) must be at least 1"),
        (lambda: quants.quantize("mx5", T((65, 256), f32)),
         "moeQuantize(mx5): R = 65 (rows) exceeds the entry's max_rows = 64"),
        (lambda: quants.quantize("weights", T((7, 256, 512), bf16)),
         "moeQuantize(weights): batch = 7 does not match the entry's batch = 8"),
        (lambda: quants.quantize("act", T((16, 7168), bf16, 0x7f0000600008)),
         "moeQuantize(act): input pointer 0x7f0000600008 is not 16-byte aligned"),
        (lambda: quants.quantize("act", xq, values=T((16, 7168), u8, 0x7f0000610008)),
         "moeQuantize(act): values pointer 0x7f0000610008 is not 16-byte aligned"),
        (lambda: quants.quantize("act", xq, scales=T((16, 56), f32, 0x7f0000620002)),
         "moeQuantize(act): scales pointer 0x7f0000620002 is not 4-byte aligned")]:
    expect_error(call, "INVALID_ARGUMENT", needle)
quants.close()
del sys.modules["torch"]

print("python test " + ("FAILED" if failures else "passed"))
sys.exit(1 if failures else 0)
