#!/usr/bin/env python3
"""Checks moe_mlir.runtime (python/moe_mlir/runtime.py) without a GPU or
torch: where the library is found, introspection, errors, the ctypes mirror
of the C structs, the launch plans' signatures; then, with a stand-in torch
module, Bundle.launch: the checks it makes from an entry's signature, the
outputs and workspace it allocates, and what reaches moeLaunch.

moe_mlir is imported as Python finds it: from the source tree
(check-moe-runtime sets PYTHONPATH=python and MOE_RUNTIME_LIB to the build's
library) or as `pip install ./python` installed it (scripts/test.sh; the
library must then be the package's own). Exits 1 on failure."""
import contextlib
import ctypes
import importlib.util
import os
import shutil
import sys
import tempfile
import types

import moe_mlir  # must import without torch
from moe_mlir import runtime

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(os.path.abspath(moe_mlir.__file__))
SOURCE_TREE = os.path.samefile(PACKAGE, os.path.join(HERE, "..", "..", "python", "moe_mlir"))
print(f"moe_mlir {moe_mlir.__version__} from {PACKAGE} "
      f"({'the source tree' if SOURCE_TREE else 'installed'}), {runtime.library_path()}")

failures = 0


def check(condition, what):
    global failures
    if not condition:
        print(f"FAIL: {what}")
        failures += 1


def expect_error(fn, status, needle):
    try:
        fn()
    except runtime.MoERuntimeError as error:
        check(error.status == status, f"status {error.status} != {status}: {error}")
        check(needle in str(error), f"'{needle}' not in '{error}'")
        return
    check(False, f"no MoERuntimeError ({status}, {needle})")


# Where the library is loaded from: the package's own first (installed, it
# must be there), then $MOE_RUNTIME_LIB, then the checkout's build tree; the
# error when none has it. A copy of runtime.py in a scratch "package" shows
# the order without touching the real one.
if not SOURCE_TREE:
    check(runtime.library_path() == os.path.join(PACKAGE, "libmoe_runtime.so"),
          f"installed: the package's library, not {runtime.library_path()}")
with tempfile.TemporaryDirectory() as scratch:
    package = os.path.join(scratch, "site", "moe_mlir")
    os.makedirs(package)
    shutil.copy(runtime.__file__, package)
    spec = importlib.util.spec_from_file_location("scratch_runtime",
                                                  os.path.join(package, "runtime.py"))
    scratch_runtime = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scratch_runtime)
    saved = os.environ.pop("MOE_RUNTIME_LIB", None)
    try:
        scratch_runtime.library_path()
        check(False, "no library anywhere: no error")
    except scratch_runtime.MoERuntimeError as error:
        check(error.status == "NOT_FOUND" and "libmoe_runtime.so not found: not in the "
              f"moe_mlir package ({package}; `pip install ./python` puts it there), "
              "$MOE_RUNTIME_LIB is not set, and no build tree has it" in str(error),
              f"no library anywhere: {error}")
    os.environ["MOE_RUNTIME_LIB"] = "/elsewhere/libmoe_runtime.so"
    check(scratch_runtime.library_path() == "/elsewhere/libmoe_runtime.so", "$MOE_RUNTIME_LIB")
    open(os.path.join(package, "libmoe_runtime.so"), "w").close()
    check(scratch_runtime.library_path() == os.path.join(package, "libmoe_runtime.so"),
          "the package's library before $MOE_RUNTIME_LIB")
    if saved is None:
        os.environ.pop("MOE_RUNTIME_LIB")
    else:
        os.environ["MOE_RUNTIME_LIB"] = saved

bundle_path = os.path.join(HERE, "Inputs", "two-entries.moebundle")
bundle = runtime.Bundle(bundle_path)
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

expect_error(lambda: runtime.Bundle("/nonexistent.moebundle"), "NOT_FOUND",
             "cannot open '/nonexistent.moebundle'")
check(bundle.version == 6 and gate_up.abi == "grouped_matmul.v3", "version and abi")
check(gate_up.epilogue == "store" and gate_up.op == "moe.grouped_matmul", "epilogue and op")
check((gate_up.bias_bits, gate_up.activation, gate_up.route, gate_up.format)
      == (0, "none", "", ""), "bias, activation, layer and format fields")
with tempfile.NamedTemporaryFile(suffix=".moebundle") as bad:
    bad.write(b"MOEBUNDLE 8\n")
    bad.flush()
    expect_error(lambda: runtime.Bundle(bad.name), "UNSUPPORTED",
                 "bundle version 8 is not supported")
expect_error(lambda: runtime.Bundle.from_bytes(b"MOEBUNDLE 1\nchip sm_90a\nend\n"),
             "UNSUPPORTED", "bundle version 1 predates persistent kernels")
expect_error(lambda: runtime.Bundle.from_bytes(b"MOEBUNDLE 2\nchip sm_90a\nend\n"),
             "UNSUPPORTED", "bundle version 2 predates kernel epilogues (this runtime "
             "reads version 7): recompile it")
expect_error(lambda: runtime.Bundle.from_bytes(b"MOEBUNDLE 3\nchip sm_90a\nend\n"),
             "UNSUPPORTED", "bundle version 3 predates the route and unpermute kernels "
             "(this runtime reads version 7): recompile it")
expect_error(lambda: runtime.Bundle.from_bytes(b"MOEBUNDLE 4\nchip sm_90a\nend\n"),
             "UNSUPPORTED", "bundle version 4 predates expert biases and layer entries "
             "(this runtime reads version 7): recompile it")
expect_error(lambda: runtime.Bundle.from_bytes(b"MOEBUNDLE 5\nchip sm_90a\nend\n"),
             "UNSUPPORTED", "bundle version 5 predates block-FP8 grouped matmuls "
             "(this runtime reads version 7): recompile it")
expect_error(lambda: runtime.Bundle.from_bytes(b"MOEBUNDLE 6\nchip sm_90a\nend\nx"),
             "INVALID_BUNDLE", "bundle line 3: 1 bytes of trailing data after 'end'")
empty = runtime.Bundle.from_bytes(b"MOEBUNDLE 6\nchip sm_90a\nend\n")
check(empty.entries == (), "no entries")
expect_error(lambda: empty.entry("x"), "NOT_FOUND", "no entry 'x' in the bundle (entries: none)")

with runtime.Bundle(bundle_path) as bundle:
    # Unknown entries are refused before torch is needed.
    expect_error(lambda: bundle.grouped_matmul("nope", None, None, None),
                 "NOT_FOUND", "no entry 'nope' in the bundle (entries: gate_up, down)")
expect_error(lambda: bundle.grouped_matmul("gate_up", None, None, None),
             "INVALID_ARGUMENT", "the bundle is closed")

# The entries' plans are what Bundle.launch reads; a version-6 bundle's
# entries have none.
with runtime.Bundle(bundle_path) as old:
    expect_error(lambda: old.signature("gate_up"), "INVALID_ARGUMENT",
                 "moeEntryGetSignature(gate_up): the entry has no launch plan "
                 "(a version-6 bundle: recompile it with moe-translate)")

# The ctypes structs are the C ones (LP64; c_api_test.c checks the same
# offsets): moeEntryInfo's fields in the order the versions added them.
check(ctypes.sizeof(runtime._EntryInfo) == 248, "sizeof(moeEntryInfo)")
check(runtime._EntryInfo.out.offset == 240, "moeEntryInfo.out")
check(runtime._EntryInfo.quantize.offset == 224, "moeEntryInfo.quantize")
check(runtime._EntryInfo.intermediate.offset == 232, "moeEntryInfo.intermediate")
check(runtime._EntryInfo.element.offset == 168, "moeEntryInfo.element")
check(runtime._EntryInfo.input_bits.offset == 184, "moeEntryInfo.input_bits")
check(runtime._EntryInfo.batch.offset == 200, "moeEntryInfo.batch")
check(runtime._EntryInfo.cols.offset == 216, "moeEntryInfo.cols")
check(runtime._EntryInfo.chunk.offset == 152, "moeEntryInfo.chunk")
check(runtime._EntryInfo.format.offset == 160, "moeEntryInfo.format")
check(runtime._EntryInfo.bias_bits.offset == 100, "moeEntryInfo.bias_bits")
check(runtime._EntryInfo.activation.offset == 104, "moeEntryInfo.activation")
check(runtime._EntryInfo.route.offset == 112, "moeEntryInfo.route")
check(runtime._EntryInfo.unpermute.offset == 144, "moeEntryInfo.unpermute")
check(runtime._EntryInfo.epilogue.offset == 64, "moeEntryInfo.epilogue")
check(runtime._EntryInfo.top_k.offset == 72, "moeEntryInfo.top_k")
check(runtime._EntryInfo.hidden.offset == 88, "moeEntryInfo.hidden")
check(runtime._EntryInfo.weighted.offset == 96, "moeEntryInfo.weighted")
check(ctypes.sizeof(runtime._Signature) == 20, "sizeof(moeSignature)")
check(ctypes.sizeof(runtime._SizeInfo) == 24, "sizeof(moeSizeInfo)")
check(ctypes.sizeof(runtime._ArgInfo) == 40, "sizeof(moeArgInfo)")
check(runtime._ArgInfo.align.offset == 16 and runtime._ArgInfo.dims.offset == 32,
      "moeArgInfo.align, dims")
check(ctypes.sizeof(runtime._LaunchArgs) == 40, "sizeof(moeLaunchArgs)")
check(runtime._LaunchArgs.args.offset == 16
      and runtime._LaunchArgs.workspace_bytes.offset == 32, "moeLaunchArgs.args")

# A version-7 bundle: a router (static E, T dynamic) and a grouped matmul
# with every size dynamic and a workspace slice.
MAX = 2147483647
CUBIN = b"\x7fELF" + b"\0" * 28
# The image's checksum: 64-bit FNV-1a of its 32 bytes.
plan_bytes = (b"MOEBUNDLE 7\nchip sm_90a\nimage img 32 fnv1a64=a08969802f85d1c3\n"
              + CUBIN + b"\n" + (
    "entry router op=moe.route abi=route.v1 max_rows=4096 experts=8 top_k=2 "
    "logits=f32 bias=1\n"
    "kernel router route_k image=img threads=128 smem=0\n"
    "size router T min=1 max=4096\n"
    "arg router logits f32 in align=4 dims=T,8\n"
    "arg router bias f32 in align=4 dims=8\n"
    "arg router ids i32 out align=4 dims=T,2\n"
    "arg router weights f32 out align=4 dims=T,2\n"
    "launch router 0 grid=min(ceildiv(T,4),65535) when=1 "
    "params=mem:logits[T,8];mem:bias[8];mem:ids[T,2];mem:weights[T,2]\n"
    "entry gemm op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store "
    f"experts=-1 n=-1 k=-1 max_rows={MAX} offsets=i32 bias=none activation=none\n"
    f"kernel gemm gemm_k image=img rows_min=1 rows_max={MAX} threads=128 smem=0 "
    "tile_m=64 tile_n=128 tile_k=64 stages=2 swap_ab=0\n"
    f"size gemm M min=1 max={MAX}\n"
    "size gemm N min=1 max=65536\n"
    "size gemm K min=8 max=65536\n"
    "size gemm E min=1 max=1024\n"
    "arg gemm rows bf16 in align=16 dims=M,K\n"
    "arg gemm weights bf16 in align=16 dims=E,N,K\n"
    "arg gemm offsets i32 in align=4 dims=E+1\n"
    "arg gemm row_scale f32 opt align=4 dims=M\n"
    "arg gemm out bf16 out align=16 dims=M,N\n"
    "check gemm K==floordiv(K,8)*8 K must be a multiple of 8\n"
    "work gemm scratch bytes=M*4 align=256\n"
    "launch gemm 0 grid=ceildiv(M,64) when=1 params=mem:rows[M,K];"
    "mem:weights[E,N,K];mem:offsets[E+1];mem:row_scale[M];mem:out[M,N];"
    "mem:@scratch[M]\n"
    "end\n").encode())
plans = runtime.Bundle.from_bytes(plan_bytes)
check(plans.version == 7, "version 7")
sig = plans.signature("router")
check(sig.sizes == (("T", "1", "4096"),), f"router sizes {sig.sizes}")
check([(a.name, a.dtype, a.role, a.align, a.dims) for a in sig.args] ==
      [("logits", "f32", "in", 4, ("T", "8")), ("bias", "f32", "in", 4, ("8",)),
       ("ids", "i32", "out", 4, ("T", "2")), ("weights", "f32", "out", 4, ("T", "2"))],
      f"router args {sig.args}")
check(plans.signature("router") is sig, "signatures are cached")
gsig = plans.signature("gemm")
check([s[0] for s in gsig.sizes] == ["M", "N", "K", "E"], "gemm sizes")
check(gsig.args[2].dims == ("E+1",) and gsig.args[3].role == "opt", "gemm args")
check(plans.shape("gemm", "offsets", {"M": 5, "N": 3, "K": 8, "E": 7}) == (8,), "shape")
check(plans.workspace_bytes("gemm", {"M": 5, "N": 3, "K": 8, "E": 7}) == 20,
      "workspace bytes")
check(plans.workspace_bytes("router", {"T": 3}) == 0, "no workspace")
expect_error(lambda: plans.workspace_bytes("router", {"T": 4097}), "INVALID_ARGUMENT",
             "T = 4097 is outside [1, 4096]")
expect_error(lambda: plans.workspace_bytes("router", {}), "INVALID_ARGUMENT",
             "size T is neither given nor read from a tensor's shape")
expect_error(lambda: plans.shape("router", "nothing", {"T": 1}), "INVALID_ARGUMENT",
             "the entry takes no nothing")
expect_error(lambda: plans.launch("missing"), "NOT_FOUND", "no entry 'missing'")

# A stand-in torch: tensors are shapes, dtypes, devices and addresses, so
# Bundle.launch's checks run; moeLaunch is replaced by a recorder of what
# would reach the C API.
fake_torch = types.ModuleType("torch")
for dtype_name in ("float32", "bfloat16", "int32", "int64", "uint8", "float8_e4m3fn",
                   "float8_e5m2", "float16"):
    setattr(fake_torch, dtype_name, type(dtype_name, (), {"__repr__":
                                                         lambda self, n=dtype_name: f"torch.{n}"})())
SIZES = {"float32": 4, "bfloat16": 2, "int32": 4, "int64": 8, "uint8": 1,
         "float8_e4m3fn": 1, "float8_e5m2": 1, "float16": 2}


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
        return SIZES[repr(self.dtype)[len("torch."):]]


allocated = []


def fake_empty(shape, dtype, device):
    allocated.append((tuple(shape), dtype, device))
    return FakeTensor(shape, dtype, (0x7f1000000000 + (len(allocated) << 32)), device)


fake_torch.Tensor = FakeTensor
fake_torch.empty = fake_empty
fake_torch.cuda = types.SimpleNamespace(
    device=lambda device: contextlib.nullcontext(),
    current_stream=lambda device: types.SimpleNamespace(cuda_stream=0x5eed))
sys.modules["torch"] = fake_torch
f32, bf16, i32, i64, u8, f16 = (fake_torch.float32, fake_torch.bfloat16, fake_torch.int32,
                                fake_torch.int64, fake_torch.uint8, fake_torch.float16)
T = FakeTensor

calls = []
lib = runtime._library()
real_launch = lib.moeLaunch


def record_launch(handle, name, args, stream):
    a = args._obj
    calls.append((name.decode(), [a.sizes[i] for i in range(a.num_sizes)],
                  [a.args[i] for i in range(a.num_args)], a.workspace, a.workspace_bytes,
                  stream.value))
    return 0


lib.moeLaunch = record_launch
logits = T((3, 8), f32, 0x7f0000010000)
bias = T((8,), f32, 0x7f0000020000)
# Outputs allocated from the signature, T read from logits.
ids, weights = plans.route("router", logits, bias)
check(allocated == [((3, 2), i32, "cuda:0"), ((3, 2), f32, "cuda:0")], f"allocated {allocated}")
check(calls == [("router", [3], [0x7f0000010000, 0x7f0000020000, ids.ptr, weights.ptr], 0, 0,
                 0x5eed)], f"router call {calls}")
# Given outputs are used as they are.
calls.clear()
mine = T((3, 2), i32, 0x7f0000030000)
out = plans.launch("router", logits=logits, bias=bias, ids=mine)
check(out["ids"] is mine and calls[0][2][2] == 0x7f0000030000, "a given output")
# Each argument checked against the signature, naming it.
expect_error(lambda: plans.route("router", logits), "INVALID_ARGUMENT",
             "router: bias is required (f32 [8])")
expect_error(lambda: plans.route("router", T((3, 8), bf16), bias), "INVALID_ARGUMENT",
             "router: logits is torch.bfloat16, expected torch.float32")
expect_error(lambda: plans.route("router", T((3, 9), f32), bias), "INVALID_ARGUMENT",
             "router: logits is (3, 9), expected (3, 8) = (T, 8)")
expect_error(lambda: plans.route("router", T((3, 8, 1), f32), bias), "INVALID_ARGUMENT",
             "router: logits is (3, 8, 1), expected 2 dims (T, 8)")
expect_error(lambda: plans.route("router", logits, T((8,), f32, device="cpu")),
             "INVALID_ARGUMENT", "router: bias is on cpu, not on a CUDA device")
expect_error(lambda: plans.route("router", logits, T((8,), f32, device="cuda:1")),
             "INVALID_ARGUMENT", "router: bias is on cuda:1 but logits is on cuda:0")
expect_error(lambda: plans.route("router", logits, T((8,), f32, contiguous=False)),
             "INVALID_ARGUMENT", "router: bias is not contiguous")
expect_error(lambda: plans.route("router", logits, object()), "INVALID_ARGUMENT",
             "router: bias is a object, not a torch.Tensor")
expect_error(lambda: plans.route("router", logits, bias, weights=T((3, 3), f32)),
             "INVALID_ARGUMENT", "router: weights is (3, 3), expected (3, 2)")
# A keyword the entry does not take is fine when None (the wrappers pass
# every argument a layer may take), refused otherwise.
calls.clear()
plans.launch("router", logits=logits, bias=bias, scores=None)
check(len(calls) == 1, "an absent argument the entry does not take")
expect_error(lambda: plans.launch("router", logits=logits, bias=bias, scores=logits),
             "INVALID_ARGUMENT", "router: the entry takes no scores (its arguments: "
             "logits, bias, ids, weights)")
expect_error(lambda: plans.route("router", T((4097, 8), f32), bias), "INVALID_ARGUMENT",
             "T = 4097 is outside [1, 4096]")
# Every size read from the shapes; an optional argument left out is 0; the
# workspace allocated at its bytes.
calls.clear()
allocated.clear()
rows, w, off = T((5, 16), bf16, 0x7f0000100000), T((7, 3, 16), bf16, 0x7f0000200000), \
    T((8,), i32, 0x7f0000300000)
out = plans.launch("gemm", rows=rows, weights=w, offsets=off)
check(allocated == [((5, 3), bf16, "cuda:0"), ((20,), u8, "cuda:0")], f"gemm allocated {allocated}")
check(calls[0][1] == [5, 3, 16, 7] and calls[0][2][3] == 0 and calls[0][4] == 20,
      f"gemm call {calls}")
check(calls[0][3] != 0 and list(out) == ["out"], "workspace passed, out returned")
expect_error(lambda: plans.launch("gemm", rows=rows, weights=w, offsets=T((7,), i32)),
             "INVALID_ARGUMENT", "gemm: offsets is (7,), expected (8,) = (E+1)")
expect_error(lambda: plans.launch("gemm", rows=rows, weights=w, offsets=off,
                                  workspace=T((19,), u8)),
             "INVALID_ARGUMENT", "gemm: workspace has 19 bytes, expected at least 20")
# The shapes and workspace of sizes already seen are not evaluated again.
real_shape, evaluated = lib.moeEntryArgShape, []
lib.moeEntryArgShape = lambda *a: evaluated.append(a) or real_shape(*a)
plans.launch("gemm", rows=rows, weights=w, offsets=off)
check(evaluated == [], "a call of known sizes is not evaluated again")
plans.launch("gemm", rows=T((6, 16), bf16), weights=w, offsets=off)
check(len(evaluated) == 5, f"new sizes: the 5 arguments' shapes, got {len(evaluated)}")
lib.moeEntryArgShape = real_shape
# A caller's workspace of another dtype counts in bytes.
calls.clear()
plans.launch("gemm", rows=rows, weights=w, offsets=off, workspace=T((5,), f32, 0x7f0000400000))
check(calls[0][3:5] == (0x7f0000400000, 20), f"workspace {calls}")
# The plan's checks and the C API's own come from moeLaunch itself.
lib.moeLaunch = real_launch
expect_error(lambda: plans.launch("gemm", rows=T((5, 12), bf16), weights=T((7, 3, 12), bf16),
                                  offsets=off),
             "INVALID_ARGUMENT", "moeLaunch(gemm): K must be a multiple of 8")
expect_error(lambda: plans.launch("gemm", rows=T((5, 16), bf16, 0x7f0000100008), weights=w,
                                  offsets=off),
             "INVALID_ARGUMENT", "moeLaunch(gemm): rows pointer 0x7f0000100008 is not "
             "16-byte aligned")
try:
    plans.launch("gemm", rows=rows, weights=w, offsets=off)
    check(False, "no GPU here: the launch cannot succeed")
except runtime.MoERuntimeError as error:
    check(error.status in ("NO_GPU", "CUDA_ERROR", "UNSUPPORTED"), f"past the checks: {error}")
plans.close()

# A donated argument (a backward's saved value that the call overwrites):
# its role, required like an input, and overlapping nothing else.
donated = runtime.Bundle.from_bytes(plan_bytes.replace(
    b"arg router logits f32 in align=4", b"arg router logits f32 donated align=4"))
check(donated.signature("router").args[0].role == "donated", "donated role")
expect_error(lambda: donated.launch("router", {"T": 3}, bias=bias),
             "INVALID_ARGUMENT", "router: logits is required (f32 [")
expect_error(lambda: donated.launch("router", logits=logits, bias=bias,
                                    ids=T((3, 2), i32, logits.data_ptr())),
             "INVALID_ARGUMENT", "moeLaunch(router): logits overlaps ids")
donated.close()
del sys.modules["torch"]

if failures:
    print(f"{failures} check(s) failed")
    sys.exit(1)
print("python_test: all checks passed")
