"""Thin ctypes wrapper of libmoe_runtime (runtime/include/moe_runtime.h).

    from moe_mlir.runtime import Bundle
    bundle = Bundle("layer.moebundle")        # parse + validate, no GPU needed
    print(bundle.chip, [entry.name for entry in bundle.entries])
    ids, weights = bundle.route("router", logits, bias)             # torch
    out = bundle.grouped_matmul("gate_up", rows, weights, offsets)
    out = bundle.grouped_matmul("fp8", q_rows, q_weights, offsets,   # FP8
                                rows_scale=rs, weights_scale=ws)  # or MXFP8
    q, qs = bundle.grouped_matmul("gate_up_q", q_rows, q_w13, offsets,  # FP8
                                  rows_scale=rs, weights_scale=ws)  # out
    y = bundle.expert_mlp("experts", rows, offsets, w13, w2, row_scale=w)
    out = bundle.unpermute("combine", y, slots, weights)
    rows, offsets, slots = bundle.permute("perm", tokens, ids)
    (q, qs), offsets, slots = bundle.permute("perm_q", tokens, ids)  # FP8
    out = bundle.layer("mixtral", tokens, logits, w13, w2)   # all five steps
    out = bundle.layer("dsv3", tokens, logits, q13, q2,      # FP8: 5 to 7
                       gate_up_weights_scale=s13, down_weights_scale=s2)
    q, s = bundle.quantize("act", x)          # block-scaled FP8, bit-exact

The library is found, in this order: next to this file (the moe_mlir
package as `pip install ./python` installs it, with its own
libmoe_runtime.so); $MOE_RUNTIME_LIB; the build tree of the moe-mlir
checkout holding this file (<checkout>/build*/lib/, the most recently
built). torch is imported only by the launching methods (after the checks
that need no tensor), so the module serves introspection on machines
without it. This file imports only the standard library: the contract's
drift check (tools/tblgen/contract.py) loads it alone.

Kernels are launched with programmatic dependent launch (the contract's
section 3.6) unless os.environ["MOE_RUNTIME_PDL"] == "0"; the library reads
it at each launching call, so both settings can be compared in one process
(a captured CUDA graph keeps what was captured).

Over 800 lines on purpose: the ctypes mirror of moe_runtime.h (checked for
drift against Contract.td by test/Contract/drift.test) and the calls built
from each entry's signature belong in one module that imports only the
standard library, which that check loads on its own.
"""

import ctypes
import glob
import os
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

__all__ = ["Arg", "Bundle", "Entry", "Kernel", "MoERuntimeError", "Signature",
           "library_path"]

_STATUS_NAMES = {
    0: "SUCCESS",
    1: "INVALID_ARGUMENT",
    2: "INVALID_BUNDLE",
    3: "UNSUPPORTED",
    4: "NO_GPU",
    5: "CUDA_ERROR",
    6: "OUT_OF_MEMORY",
    7: "NOT_FOUND",
}


class MoERuntimeError(RuntimeError):
    """A call failed. `status` is the moeStatus name ("INVALID_BUNDLE", ...),
    `message` the runtime's explanation."""

    def __init__(self, status: str, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class _BundleInfo(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int32), ("chip", ctypes.c_char_p),
                ("num_images", ctypes.c_int32), ("num_entries", ctypes.c_int32)]


class _EntryInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("op", ctypes.c_char_p),
                ("abi", ctypes.c_char_p), ("experts", ctypes.c_int64),
                ("n", ctypes.c_int64), ("k", ctypes.c_int64),
                ("max_rows", ctypes.c_int64), ("offsets_bits", ctypes.c_int32),
                ("num_kernels", ctypes.c_int32), ("epilogue", ctypes.c_char_p),
                # Version 4.
                ("top_k", ctypes.c_int32), ("logits_bits", ctypes.c_int32),
                ("bias", ctypes.c_int32), ("slots_bits", ctypes.c_int32),
                ("hidden", ctypes.c_int64), ("weighted", ctypes.c_int32),
                # Version 5.
                ("bias_bits", ctypes.c_int32), ("activation", ctypes.c_char_p),
                ("route", ctypes.c_char_p), ("permute", ctypes.c_char_p),
                ("gate_up", ctypes.c_char_p), ("down", ctypes.c_char_p),
                ("unpermute", ctypes.c_char_p),
                # permute.v2.
                ("chunk", ctypes.c_int32),
                # Version 6.
                ("format", ctypes.c_char_p),
                # quantize.v1.
                ("element", ctypes.c_char_p), ("scale", ctypes.c_char_p),
                ("input_bits", ctypes.c_int32), ("block_rows", ctypes.c_int32),
                ("block_cols", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("batch", ctypes.c_int64), ("rows", ctypes.c_int64),
                ("cols", ctypes.c_int64),
                # layer_fp8.v1.
                ("quantize", ctypes.c_char_p),
                ("intermediate", ctypes.c_char_p),
                # Grouped matmuls' output, permutes' rows (out=f8E4M3FN).
                ("out", ctypes.c_char_p)]


class _KernelInfo(ctypes.Structure):
    _fields_ = [("symbol", ctypes.c_char_p), ("image", ctypes.c_char_p),
                ("image_size", ctypes.c_uint64), ("rows_min", ctypes.c_int64),
                ("rows_max", ctypes.c_int64), ("threads", ctypes.c_int32),
                ("smem", ctypes.c_int32), ("tile_m", ctypes.c_int32),
                ("tile_n", ctypes.c_int32), ("tile_k", ctypes.c_int32),
                ("stages", ctypes.c_int32), ("swap_ab", ctypes.c_int32)]


class _StageInfo(ctypes.Structure):
    _fields_ = [("function", ctypes.c_char_p), ("stage", ctypes.c_int32),
                ("exchange", ctypes.c_char_p), ("ranks", ctypes.c_int32),
                ("exchange_args", ctypes.c_char_p),
                ("exchange_results", ctypes.c_char_p),
                ("function_args", ctypes.c_char_p),
                ("function_results", ctypes.c_char_p)]


class _Signature(ctypes.Structure):
    _fields_ = [("num_sizes", ctypes.c_int32), ("num_args", ctypes.c_int32),
                ("num_checks", ctypes.c_int32), ("num_slices", ctypes.c_int32),
                ("num_steps", ctypes.c_int32)]


class _SizeInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("min", ctypes.c_char_p),
                ("max", ctypes.c_char_p)]


class _ArgInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int32),
                ("role", ctypes.c_int32), ("align", ctypes.c_int64),
                ("rank", ctypes.c_int32), ("dims", ctypes.c_char_p)]


class _LaunchArgs(ctypes.Structure):
    _fields_ = [("sizes", ctypes.POINTER(ctypes.c_int64)),
                ("num_sizes", ctypes.c_int32), ("num_args", ctypes.c_int32),
                ("args", ctypes.POINTER(ctypes.c_uint64)),
                ("workspace", ctypes.c_uint64),
                ("workspace_bytes", ctypes.c_uint64)]


#: moeDtype and moeArgRole of moe_runtime.h.
_DTYPES = ("bf16", "f32", "i32", "i64", "e4m3", "e5m2", "e8m0")
_ROLES = ("in", "out", "opt", "donated")
_MAX_RANK = 8


@dataclass(frozen=True)
class Arg:
    """An argument of an entry's launch plan: a dense row-major buffer."""
    name: str
    dtype: str  # "bf16", "f32", "i32", "i64", "e4m3", "e5m2" or "e8m0"
    # "in", "out", "opt" (an input that may be None) or "donated" (an
    # input the call overwrites once read: its contents are lost)
    role: str
    align: int  # bytes
    dims: Tuple[str, ...]  # expressions of the sizes, e.g. ("T", "4096")


@dataclass(frozen=True)
class Signature:
    """What a call of an entry takes: its dynamic sizes (name, min, max)
    and its arguments, in call order."""
    sizes: Tuple[Tuple[str, str, str], ...]
    args: Tuple[Arg, ...]


@dataclass(frozen=True)
class StageInfo:
    """A program.v1 entry that is stage `index` of the split function
    `function` (moeStageInfo, contract §3.14): the exchange its caller
    runs after it (None after the last stage) on the named values
    `exchange_args`, naming what it gives `exchange_results`, and the
    split function's arguments and results by name."""
    function: str
    index: int
    exchange: Optional[str]
    ranks: int
    exchange_args: Tuple[str, ...]
    exchange_results: Tuple[str, ...]
    function_args: Tuple[str, ...]
    function_results: Tuple[str, ...]


@dataclass(frozen=True)
class Kernel:
    symbol: str
    image: str
    image_size: int
    rows_min: int
    rows_max: int
    threads: int
    smem: int
    tile_m: int
    tile_n: int
    tile_k: int
    stages: int
    swap_ab: bool


@dataclass(frozen=True)
class Entry:
    """One entry. The fields that do not apply to its ABI are 0 ("" for
    the strings, False for bias and weighted); see moeEntryInfo."""
    name: str
    op: str
    #: "grouped_matmul.v3", "grouped_matmul_fp8.v1", "route.v1",
    #: "unpermute.v2", "permute.v2", "layer.v1", "quantize.v1" or
    #: "layer_fp8.v1".
    abi: str
    experts: int  # -1: dynamic (grouped_matmul.v3); route.v1, permute.v2:
    # static E
    n: int
    k: int
    max_rows: int  # largest M, or T for route.v1, unpermute.v2, permute.v2
    offsets_bits: int  # 32 or 64 (permute.v2: offsets and slots)
    kernels: Tuple[Kernel, ...]
    #: "store", "swiglu" (out has n/2 columns) or "row_scale" (takes the
    #: routing weight of each row).
    epilogue: str
    #: route.v1, unpermute.v2, permute.v2: experts per token.
    top_k: int = 0
    #: route.v1: 32 (float32 logits) or 16 (bfloat16); whether it takes a
    #: float32 correction bias [E].
    logits_bits: int = 0
    bias: bool = False
    #: unpermute.v2: 32 (int32 slots) or 64 (int64); H, or -1 (dynamic;
    #: permute.v2 too); whether it takes float32 weights [T, top_k].
    slots_bits: int = 0
    hidden: int = 0
    weighted: bool = False
    #: grouped_matmul.v3: the expert bias [E, N]: 0 (none), 32 (float32) or
    #: 16 (bfloat16); "none" (store, row_scale), "silu" or "gptoss" (swiglu).
    bias_bits: int = 0
    activation: str = ""
    #: layer.v1 and layer_fp8.v1: the names of its part entries.
    route: str = ""
    permute: str = ""
    gate_up: str = ""
    down: str = ""
    unpermute: str = ""
    #: permute.v2: the ids per CTA of its count and index kernels.
    chunk: int = 0
    #: grouped_matmul_fp8.v1: "fp8_block" (float8_e4m3fn rows and weights
    #: with float32 scales per 128 elements of a row, per 128 x 128 weights)
    #: or "mxfp8" (float8_e4m3fn rows and weights with a UE8M0 scale byte
    #: per 32 elements along K of a row of either).
    format: str = ""
    #: quantize.v1: the FP8 element ("f8E4M3FN" or "f8E5M2"), the scales
    #: ("f32" or "e8m0"), the input's bits (16: bfloat16, 32: float32), the
    #: block [block_rows, block_cols], the input's rank (2: [R, C], 3:
    #: [E, R, C]) and sizes (-1: dynamic; batch is 1 for rank 2).
    element: str = ""
    scale: str = ""
    input_bits: int = 0
    block_rows: int = 0
    block_cols: int = 0
    rank: int = 0
    batch: int = 0
    rows: int = 0
    cols: int = 0
    #: layer_fp8.v1: its quantize.v1 parts, of the gathered rows (op
    #: moe.quantize; "" when its permute's gather quantizes them itself, out
    #: "f8E4M3FN") and of the gate-up GEMM's output (op moe.expert_mlp; ""
    #: when its gate_up quantizes its output itself, out "f8E4M3FN").
    quantize: str = ""
    intermediate: str = ""
    #: grouped_matmul.v3 and grouped_matmul_fp8.v1: the output's element,
    #: "bf16", or "f8E4M3FN" (a block-FP8 swiglu entry writing float8_e4m3fn
    #: codes [M, N/2] and float32 scales [M, N/256], one per [1, 128] group);
    #: permute.v2: the rows' element, "bf16", or "f8E4M3FN" (its gather
    #: writes float8_e4m3fn codes [N, H] and float32 scales [N, H/128]).
    out: str = ""


def library_path() -> str:
    """Where libmoe_runtime.so is loaded from (see the module docstring)."""
    here = os.path.dirname(os.path.abspath(__file__))
    packaged = os.path.join(here, "libmoe_runtime.so")
    if os.path.exists(packaged):
        return packaged
    explicit = os.environ.get("MOE_RUNTIME_LIB")
    if explicit:
        return explicit
    # python/moe_mlir/ of a checkout: its build trees.
    root = os.path.dirname(os.path.dirname(here))
    built = glob.glob(os.path.join(root, "build*", "lib", "libmoe_runtime.so"))
    if built:
        return max(built, key=os.path.getmtime)  # the most recent build
    raise MoERuntimeError(
        "NOT_FOUND", f"libmoe_runtime.so not found: not in the moe_mlir "
        f"package ({here}; `pip install ./python` puts it there), "
        "$MOE_RUNTIME_LIB is not set, and no build tree has it "
        f"({root}/build*/lib): install the package, set MOE_RUNTIME_LIB to "
        "the library's path, or build the runtime (cmake --build build "
        "--target moe_runtime)")


_lib = None


def _library():
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(library_path())
    status = ctypes.c_int
    handle = ctypes.c_void_p
    lib.moeStatusName.restype = ctypes.c_char_p
    lib.moeStatusName.argtypes = [status]
    lib.moeLastErrorMessage.restype = ctypes.c_char_p
    lib.moeLastErrorMessage.argtypes = []
    lib.moeBundleOpenFile.restype = status
    lib.moeBundleOpenFile.argtypes = [ctypes.c_char_p, ctypes.POINTER(handle)]
    lib.moeBundleOpenMemory.restype = status
    lib.moeBundleOpenMemory.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                        ctypes.POINTER(handle)]
    lib.moeBundleClose.restype = None
    lib.moeBundleClose.argtypes = [handle]
    lib.moeBundleGetInfo.restype = status
    lib.moeBundleGetInfo.argtypes = [handle, ctypes.POINTER(_BundleInfo)]
    lib.moeBundleGetEntry.restype = status
    lib.moeBundleGetEntry.argtypes = [handle, ctypes.c_int32,
                                      ctypes.POINTER(_EntryInfo)]
    lib.moeBundleGetStage.restype = status
    lib.moeBundleGetStage.argtypes = [handle, ctypes.c_int32,
                                      ctypes.POINTER(_StageInfo)]
    lib.moeBundleGetKernel.restype = status
    lib.moeBundleGetKernel.argtypes = [handle, ctypes.c_int32, ctypes.c_int32,
                                       ctypes.POINTER(_KernelInfo)]
    lib.moeBundleLoad.restype = status
    lib.moeBundleLoad.argtypes = [handle]
    lib.moeEntryGetSignature.restype = status
    lib.moeEntryGetSignature.argtypes = [handle, ctypes.c_char_p,
                                         ctypes.POINTER(_Signature)]
    lib.moeEntryGetSize.restype = status
    lib.moeEntryGetSize.argtypes = [handle, ctypes.c_char_p, ctypes.c_int32,
                                    ctypes.POINTER(_SizeInfo)]
    lib.moeEntryGetArg.restype = status
    lib.moeEntryGetArg.argtypes = [handle, ctypes.c_char_p, ctypes.c_int32,
                                   ctypes.POINTER(_ArgInfo)]
    lib.moeEntryArgShape.restype = status
    lib.moeEntryArgShape.argtypes = [handle, ctypes.c_char_p, ctypes.c_int32,
                                     ctypes.POINTER(ctypes.c_int64),
                                     ctypes.c_int32,
                                     ctypes.POINTER(ctypes.c_int64)]
    lib.moeLaunch.restype = status
    lib.moeLaunch.argtypes = [handle, ctypes.c_char_p,
                              ctypes.POINTER(_LaunchArgs), ctypes.c_void_p]
    lib.moeWorkspaceBytes.restype = status
    lib.moeWorkspaceBytes.argtypes = [handle, ctypes.c_char_p,
                                      ctypes.POINTER(ctypes.c_int64),
                                      ctypes.c_int32,
                                      ctypes.POINTER(ctypes.c_uint64)]
    # The expert-parallel exchanges (moe_runtime.h; parallel.py).
    u64, i64, i32 = ctypes.c_uint64, ctypes.c_int64, ctypes.c_int32
    stream = ctypes.c_void_p
    for name, args in (
            ("moeExchangeCreate", [handle, i64, ctypes.POINTER(handle)]),
            ("moeExchangeGetRanks", [handle, ctypes.POINTER(i32),
                                     ctypes.POINTER(i32)]),
            ("moeExchangeWorkspaceBytes", [handle, ctypes.POINTER(u64)]),
            ("moeDispatchCounts", [handle, u64, i32, i64, u64, u64,
                                   ctypes.POINTER(i64), ctypes.POINTER(i64),
                                   stream]),
            ("moeDispatchRows", [handle, u64, i64, u64, u64, stream]),
            ("moeUndispatch", [handle, u64, i64, i64, u64, u64, i32, i64, u64,
                               i64, stream]),
            ("moeNcclGetUniqueId", [ctypes.c_char_p]),
            ("moeNcclCommInitRank", [i32, ctypes.c_char_p, i32,
                                     ctypes.POINTER(handle)]),
            ("moeNcclCommDestroy", [handle])):
        function = getattr(lib, name)
        function.restype = status
        function.argtypes = args
    lib.moeExchangeDestroy.restype = None
    lib.moeExchangeDestroy.argtypes = [handle]
    _lib = lib
    return lib


def _check(status: int) -> None:
    if status != 0:
        message = _library().moeLastErrorMessage().decode("utf-8", "replace")
        raise MoERuntimeError(_STATUS_NAMES.get(status, f"status {status}"),
                              message)


def _invalid(message: str) -> MoERuntimeError:
    return MoERuntimeError("INVALID_ARGUMENT", message)


class Bundle:
    """A parsed .moebundle. Close it (or use `with`) to unload its modules."""

    def __init__(self, path: str):
        handle = ctypes.c_void_p()
        _check(_library().moeBundleOpenFile(os.fsencode(path),
                                            ctypes.byref(handle)))
        self._init(handle)

    @classmethod
    def from_bytes(cls, data: bytes) -> "Bundle":
        self = cls.__new__(cls)
        handle = ctypes.c_void_p()
        _check(_library().moeBundleOpenMemory(data, len(data),
                                              ctypes.byref(handle)))
        self._init(handle)
        return self

    def _init(self, handle: ctypes.c_void_p) -> None:
        self._handle = handle
        lib = _library()
        info = _BundleInfo()
        _check(lib.moeBundleGetInfo(handle, ctypes.byref(info)))
        self.version: int = info.version
        self.chip: str = info.chip.decode()
        entries = []
        for e in range(info.num_entries):
            entry = _EntryInfo()
            _check(lib.moeBundleGetEntry(handle, e, ctypes.byref(entry)))
            kernels = []
            for k in range(entry.num_kernels):
                kernel = _KernelInfo()
                _check(lib.moeBundleGetKernel(handle, e, k, ctypes.byref(kernel)))
                kernels.append(Kernel(
                    kernel.symbol.decode(), kernel.image.decode(),
                    kernel.image_size, kernel.rows_min, kernel.rows_max,
                    kernel.threads, kernel.smem, kernel.tile_m, kernel.tile_n,
                    kernel.tile_k, kernel.stages, bool(kernel.swap_ab)))
            entries.append(Entry(
                entry.name.decode(), entry.op.decode(), entry.abi.decode(),
                entry.experts, entry.n, entry.k, entry.max_rows,
                entry.offsets_bits, tuple(kernels),
                (entry.epilogue or b"").decode(), entry.top_k,
                entry.logits_bits, bool(entry.bias), entry.slots_bits,
                entry.hidden, bool(entry.weighted), entry.bias_bits,
                *((getattr(entry, name) or b"").decode() for name in (
                    "activation", "route", "permute", "gate_up", "down",
                    "unpermute")), entry.chunk,
                (entry.format or b"").decode(),
                (entry.element or b"").decode(), (entry.scale or b"").decode(),
                entry.input_bits, entry.block_rows, entry.block_cols,
                entry.rank, entry.batch, entry.rows, entry.cols,
                (entry.quantize or b"").decode(),
                (entry.intermediate or b"").decode(),
                (entry.out or b"").decode()))
        #: The entries in file order.
        self.entries: Tuple[Entry, ...] = tuple(entries)
        self._by_name: Dict[str, Entry] = {e.name: e for e in entries}
        self._signatures: Dict[str, Signature] = {}
        self._layouts: Dict[tuple, tuple] = {}

    def entry(self, name: str) -> Entry:
        """The entry called `name`; MoERuntimeError NOT_FOUND if none."""
        found = self._by_name.get(name)
        if found is None:
            names = ", ".join(e.name for e in self.entries) or "none"
            raise MoERuntimeError(
                "NOT_FOUND", f"no entry {name!r} in the bundle (entries: "
                f"{names})")
        return found

    def stage(self, name: str) -> Optional[StageInfo]:
        """What the bundle says of entry `name` as a stage of a split
        function, or None if it is none (MoERuntimeError NOT_FOUND if the
        bundle has no such entry)."""
        self.entry(name)  # NOT_FOUND with the entries listed
        index = next(i for i, e in enumerate(self.entries) if e.name == name)
        info = _StageInfo()
        status = _library().moeBundleGetStage(self._live_handle(), index,
                                              ctypes.byref(info))
        if _STATUS_NAMES.get(status) == "NOT_FOUND":
            return None
        _check(status)

        def names(raw):
            return tuple(n for n in raw.decode().split(",") if n)

        return StageInfo(info.function.decode(), info.stage,
                         info.exchange.decode() or None, info.ranks,
                         names(info.exchange_args), names(info.exchange_results),
                         names(info.function_args), names(info.function_results))

    def close(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value:
            _library().moeBundleClose(handle)
        self._handle = None

    def __enter__(self) -> "Bundle":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _live_handle(self) -> ctypes.c_void_p:
        if self._handle is None:
            raise _invalid("the bundle is closed")
        return self._handle

    def load(self) -> None:
        """Loads the kernels into the current CUDA context now (otherwise the
        first grouped_matmul does); needed before capturing a CUDA graph."""
        _check(_library().moeBundleLoad(self._live_handle()))

    def signature(self, name: str) -> Signature:
        """The launch plan's signature of entry `name`: its sizes and
        arguments in call order (moeEntryGetSignature, moeEntryGetSize,
        moeEntryGetArg). MoERuntimeError for an entry without a plan."""
        cached = self._signatures.get(name)
        if cached is not None:
            return cached
        handle = self._live_handle()
        self.entry(name)  # NOT_FOUND with the entries listed
        lib = _library()
        key = name.encode()
        counts = _Signature()
        _check(lib.moeEntryGetSignature(handle, key, ctypes.byref(counts)))
        sizes = []
        for i in range(counts.num_sizes):
            size = _SizeInfo()
            _check(lib.moeEntryGetSize(handle, key, i, ctypes.byref(size)))
            sizes.append((size.name.decode(), size.min.decode(),
                          size.max.decode()))
        args = []
        for i in range(counts.num_args):
            arg = _ArgInfo()
            _check(lib.moeEntryGetArg(handle, key, i, ctypes.byref(arg)))
            dims = arg.dims.decode()
            args.append(Arg(arg.name.decode(), _DTYPES[arg.dtype],
                            _ROLES[arg.role], arg.align,
                            tuple(dims.split(",")) if dims else ()))
        signature = Signature(tuple(sizes), tuple(args))
        self._signatures[name] = signature
        return signature

    def shape(self, name: str, arg: str, sizes: Dict[str, int]):
        """The shape argument `arg` of entry `name` has in a call with
        `sizes` (every size of the signature by name)."""
        signature = self.signature(name)
        values = self._size_values(name, signature, sizes)
        index = self._arg_index(name, signature, arg)
        return self._layout(name, signature, values)[0][index]

    def workspace_bytes(self, name: str, sizes: Dict[str, int]) -> int:
        """The workspace bytes a call of entry `name` with `sizes` needs
        (moeWorkspaceBytes; 0 when its plan has no workspace slices)."""
        signature = self.signature(name)
        values = self._size_values(name, signature, sizes)
        return self._layout(name, signature, values)[1]

    def launch(self, name: str, sizes: Dict[str, int] = None, *,
               workspace=None, **tensors):
        """Runs entry `name` by its launch plan (moeLaunch) on torch's
        current stream of the tensors' device. `tensors` are the plan's
        arguments by name (Bundle.signature); an output not given is
        allocated (torch.empty), an optional input not given is None. The
        sizes are read from the tensors' shapes where an argument's dim is
        the size itself (T from tokens [T, H], ...), else taken from
        `sizes`. Every given tensor must be a contiguous CUDA tensor on one
        device of the argument's dtype (float8 codes also as torch.uint8,
        UE8M0 codes as any 1-byte dtype) and exactly the shape the plan
        gives it. workspace: device memory of at least workspace_bytes
        bytes (any dtype; allocated when None). Returns {name: tensor} of
        the outputs. Raises MoERuntimeError naming the argument."""
        handle = self._live_handle()
        signature = self.signature(name)
        where = f"{name}"
        known = {a.name for a in signature.args}
        for given, tensor in tensors.items():
            if tensor is not None and given not in known:
                raise _invalid(f"{where}: the entry takes no {given} (its "
                               f"arguments: {', '.join(a.name for a in signature.args)})")
        import torch

        present = {k: v for k, v in tensors.items() if v is not None}
        first = None
        for arg in signature.args:
            tensor = present.get(arg.name)
            if tensor is None:
                continue
            if not isinstance(tensor, torch.Tensor):
                raise _invalid(f"{where}: {arg.name} is a "
                               f"{type(tensor).__name__}, not a torch.Tensor")
            if not tensor.is_cuda:
                raise _invalid(f"{where}: {arg.name} is on {tensor.device}, "
                               "not on a CUDA device")
            if first is None:
                first = (arg.name, tensor)
            elif tensor.device != first[1].device:
                raise _invalid(f"{where}: {arg.name} is on {tensor.device} "
                               f"but {first[0]} is on {first[1].device}")
            if not tensor.is_contiguous():
                raise _invalid(f"{where}: {arg.name} is not contiguous")
            if tensor.dim() != len(arg.dims):
                raise _invalid(f"{where}: {arg.name} is "
                               f"{tuple(tensor.shape)}, expected "
                               f"{len(arg.dims)} dims ({', '.join(arg.dims)})")
            allowed = _torch_dtypes(torch, arg.dtype)
            if tensor.dtype not in allowed and not (
                    arg.dtype == "e8m0" and tensor.element_size() == 1):
                raise _invalid(f"{where}: {arg.name} is {tensor.dtype}, "
                               "expected "
                               f"{' or '.join(str(d) for d in allowed)}")
        if first is None:
            raise _invalid(f"{where}: no tensor given")
        device = first[1].device
        # Sizes: from the tensors where a dim is the size itself.
        given_sizes = dict(sizes or {})
        for size_name, _, _ in signature.sizes:
            if size_name in given_sizes:
                continue
            for arg in signature.args:
                tensor = present.get(arg.name)
                if tensor is not None and size_name in arg.dims and \
                        tensor.dim() == len(arg.dims):
                    given_sizes[size_name] = int(
                        tensor.shape[arg.dims.index(size_name)])
                    break
        values = self._size_values(name, signature, given_sizes)
        shapes, needed = self._layout(name, signature, values)
        pointers = []
        outputs = {}
        for arg, shape in zip(signature.args, shapes):
            tensor = present.get(arg.name)
            if tensor is None:
                if arg.role in ("in", "donated"):
                    raise _invalid(f"{where}: {arg.name} is required "
                                   f"({arg.dtype} {list(shape)})")
                if arg.role == "out":
                    tensor = torch.empty(shape, dtype=_torch_dtypes(
                        torch, arg.dtype)[0], device=device)
            elif tuple(tensor.shape) != shape:
                raise _invalid(f"{where}: {arg.name} is "
                               f"{tuple(tensor.shape)}, expected {shape} = "
                               f"({', '.join(arg.dims)})")
            if arg.role == "out":
                outputs[arg.name] = tensor
            pointers.append(0 if tensor is None else tensor.data_ptr())
        if workspace is None and needed:
            workspace = torch.empty((needed,), dtype=torch.uint8,
                                    device=device)
        space = 0
        if workspace is not None:
            if not isinstance(workspace, torch.Tensor) or \
                    workspace.device != device:
                raise _invalid(f"{where}: workspace must be a torch.Tensor "
                               f"on {device}")
            space = workspace.numel() * workspace.element_size()
            if space < needed:
                raise _invalid(f"{where}: workspace has {space} bytes, "
                               f"expected at least {needed}")
        args = _LaunchArgs(values, len(signature.sizes), len(pointers),
                           (ctypes.c_uint64 * max(len(pointers), 1))(
                               *pointers),
                           0 if workspace is None else workspace.data_ptr(),
                           space)
        with torch.cuda.device(device):
            stream = torch.cuda.current_stream(device).cuda_stream
            _check(_library().moeLaunch(handle, name.encode(),
                                        ctypes.byref(args),
                                        ctypes.c_void_p(stream)))
        return outputs

    def _size_values(self, name, signature, sizes):
        """The sizes in signature order as a ctypes array."""
        missing = [s for s, _, _ in signature.sizes if s not in sizes]
        if missing:
            raise _invalid(f"{name}: size {missing[0]} is neither given nor "
                           "read from a tensor's shape")
        return (ctypes.c_int64 * max(len(signature.sizes), 1))(
            *[int(sizes[s]) for s, _, _ in signature.sizes])

    def _arg_index(self, name, signature, arg):
        for index, a in enumerate(signature.args):
            if a.name == arg:
                return index
        raise _invalid(f"{name}: the entry takes no {arg}")

    def _layout(self, name, signature, values):
        """The arguments' shapes and the workspace bytes of a call of `name`
        with the sizes `values`, as the runtime evaluates the plan's
        expressions (moeEntryArgShape, moeWorkspaceBytes). Memoised: a
        layer sees few distinct sizes, and this is on every call's path."""
        count = len(signature.sizes)
        key = (name, tuple(values[i] for i in range(count)))
        layout = self._layouts.get(key)
        if layout is not None:
            return layout
        lib, handle = _library(), self._live_handle()
        shapes = []
        for index, arg in enumerate(signature.args):
            dims = (ctypes.c_int64 * _MAX_RANK)()
            _check(lib.moeEntryArgShape(handle, name.encode(), index, values,
                                        count, dims))
            shapes.append(tuple(dims[i] for i in range(len(arg.dims))))
        workspace = ctypes.c_uint64()
        _check(lib.moeWorkspaceBytes(handle, name.encode(), values, count,
                                     ctypes.byref(workspace)))
        if len(self._layouts) >= 4096:  # bounded: sizes may vary per call
            self._layouts.clear()
        layout = self._layouts[key] = (tuple(shapes), workspace.value)
        return layout

    def grouped_matmul(self, entry: str, rows, weights, offsets, out=None,
                       row_scale=None, bias=None, rows_scale=None,
                       weights_scale=None, out_scale=None):
        """out[r] = rows[r] @ weights[e].T + bias[e] for offsets[e] <= r <
        offsets[e+1], on torch's current stream of the tensors' device,
        followed by the entry's epilogue: "store" as is; "swiglu" (weights
        [E, N, K] hold N/2 gate rows, then N/2 up rows) out[r] =
        act(gate, up), N/2 columns, act the entry's activation (silu:
        silu(gate) * up; gptoss: GPT-OSS's clamped SwiGLU); "row_scale"
        out[r] *= row_scale[r]. rows: bf16 [M, K], weights: bf16 [E, N, K],
        offsets: int32/int64 (as the entry says) [E + 1], out: bf16 [M, N]
        ([M, N/2] for swiglu) or None (a new torch.empty: rows no expert owns
        are left uninitialised), row_scale: float32, M elements, for
        row_scale entries only, bias: float32/bfloat16 (as the entry says)
        [E, N], for entries with a bias only. A grouped_matmul_fp8.v1 entry
        (format fp8_block) takes rows and weights of torch.float8_e4m3fn and
        their float32 block scales, required: rows_scale [M, ceil(K/128)]
        (one per 128 elements of a row) and weights_scale [E, ceil(N/128),
        ceil(K/128)] (one per 128 x 128 block; N the weights' N); the
        products are of rows[r, k] * rows_scale[r, k // 128] and
        weights[e, n, k] * weights_scale[e, n // 128, k // 128]. One of
        format mxfp8 takes their UE8M0 scale bytes (2^(s - 127); K a
        multiple of 32): rows_scale [M, K/32] and weights_scale [E, N, K/32]
        (one per 32 elements of a row), as torch.uint8,
        torch.float8_e8m0fnu (where torch has it) or any other 1-byte dtype
        (the same bytes); its products are of rows[r, k] *
        2^(rows_scale[r, k // 32] - 127) and weights[e, n, k] *
        2^(weights_scale[e, n, k // 32] - 127). Other
        entries take no scales. A grouped_matmul_fp8.v1 swiglu entry whose
        out is "f8E4M3FN" writes the activation quantized as quantize does
        with [1, 128] blocks and float32 scales: out is then
        torch.float8_e4m3fn (or torch.uint8, the same bytes) [M, N/2] and
        out_scale float32 [M, N/256], one per [1, 128] group (N a multiple
        of 256), each allocated when None; other entries take no out_scale.
        All CUDA, contiguous, one device. Returns out, or (out, out_scale)
        for an out "f8E4M3FN" entry; raises MoERuntimeError."""
        outputs = self.launch(entry, rows=rows, weights=weights,
                              offsets=offsets, out=out, row_scale=row_scale,
                              bias=bias, rows_scale=rows_scale,
                              weights_scale=weights_scale,
                              out_scale=out_scale)
        if "out_scale" in outputs:
            return outputs["out"], outputs["out_scale"]
        return outputs["out"]

    def grouped_dgrad(self, entry: str, grad, weights, offsets, out=None):
        """The input gradient of a grouped matmul (an entry of op
        moe.grouped_dgrad): out[r] = grad[r] @ weights[e] for offsets[e] <=
        r < offsets[e+1], the weights as the forward has them, read
        untransposed. grad: bf16 [M, K], weights: bf16 [E, K, N] (the
        forward's [E, N_fwd, K_fwd]: K = N_fwd), offsets: int32/int64 (as the
        entry says) [E + 1], out: bf16 [M, N] or None (a new torch.empty:
        rows no expert owns are left uninitialised). All CUDA, contiguous,
        one device, on torch's current stream. Returns out; raises
        MoERuntimeError."""
        info = self.entry(entry)
        if info.op != "moe.grouped_dgrad":
            raise _invalid(f"{entry}: is op {info.op}, not moe.grouped_dgrad")
        return self.launch(entry, rows=grad, weights=weights,
                           offsets=offsets, out=out)["out"]

    def grouped_wgrad(self, entry: str, grad, rows, offsets, out=None):
        """The weight gradient of a grouped matmul (an entry of op
        moe.grouped_wgrad): out[e] = grad[r0:r1].T @ rows[r0:r1] over the
        rows r0 <= r < r1 of expert e (offsets clamped as the forward's),
        zeros for an expert without rows. grad: bf16 [M, N], rows: bf16
        [M, K], offsets: int32/int64 (as the entry says) [E + 1], out: bf16
        [E, N, K] or None (allocated). Deterministic: each output tile sums
        its expert's rows in one CTA, no atomics. All CUDA, contiguous, one
        device, on torch's current stream. Returns out; raises
        MoERuntimeError."""
        info = self.entry(entry)
        if info.op != "moe.grouped_wgrad":
            raise _invalid(f"{entry}: is op {info.op}, not moe.grouped_wgrad")
        return self.launch(entry, grad=grad, rows=rows, offsets=offsets,
                           out=out)["out"]

    def swiglu_grad(self, entry: str, input, grad, out=None):
        """The gradient of a gated activation (an entry of op
        moe.swiglu_grad, abi planned.v1): input bf16 [M, 2I] (gate columns,
        then up columns, as the forward's gate-up output; alternating for an
        op compiled `interleaved`), grad bf16 [M, I]
        (the activation's gradient), out bf16 [M, 2I] or None (allocated):
        the gate and up gradients of the entry's activation (silu, or
        GPT-OSS's clamped form with its compiled constants). All CUDA,
        contiguous, one device, on torch's current stream. Returns out;
        raises MoERuntimeError."""
        info = self.entry(entry)
        if info.op != "moe.swiglu_grad":
            raise _invalid(f"{entry}: is op {info.op}, not moe.swiglu_grad")
        return self.launch(entry, input=input, grad=grad, out=out)["out"]

    def route_grad(self, entry: str, logits, ids, grad, out=None):
        """The router's gradient (an entry of op moe.route_grad, abi
        planned.v1): logits f32 or bf16 (as the entry says) [T, E], ids
        int32 [T, k] (the experts the route chose), grad float32 [T, k]
        (the routing weights' gradient), out [T, E] of the logits' dtype or
        None (allocated): the logits' gradient through the entry's scores,
        renormalisation and scale, recomputed from the logits (docs/
        semantics.md). All CUDA, contiguous, one device, on torch's current
        stream. Returns out; raises MoERuntimeError."""
        info = self.entry(entry)
        if info.op != "moe.route_grad":
            raise _invalid(f"{entry}: is op {info.op}, not moe.route_grad")
        return self.launch(entry, logits=logits, ids=ids, grad=grad,
                           out=out)["out"]

    def quantize(self, entry: str, x, values=None, scales=None):
        """moe.quantize on the GPU (abi quantize.v1), bit-exact with the CPU
        lowering, on torch's current stream of x's device. x: the entry's
        input type (bfloat16 or float32), [R, C] for a rank-2 entry or
        [E, R, C] for a rank-3 one (blocks within each [R, C]), R and C
        whole blocks of [block_rows, block_cols]. Per block with largest
        magnitude amax: f32 scales amax / max (448 e4m3, 57344 e5m2; 1 when
        that is 0), e8m0 scales 2^clamp(floor(log2(amax)) - emax, -127, 127)
        (emax 8 e4m3, 15 e5m2); values x / scale rounded to nearest even and
        saturated; a block with a NaN or infinity has a NaN scale and NaN
        values. Returns (values, scales): values of x's shape as
        torch.float8_e4m3fn or torch.float8_e5m2 (the entry's element);
        scales [..., R/block_rows, C/block_cols] as float32, or for e8m0
        entries the E8M0 codes as torch.float8_e8m0fnu (torch.uint8 where
        torch lacks it). values and scales may be given, contiguous, of those
        dtypes or torch.uint8 (the same bytes), to be written in place. All
        CUDA, one device. Raises MoERuntimeError."""
        outputs = self.launch(entry, input=x, values=values, scales=scales)
        return outputs["values"], outputs["scales"]

    def expert_mlp(self, name: str, rows, offsets, w13, w2, row_scale=None,
                   out=None, workspace=None, gate_up_bias=None,
                   down_bias=None):
        """The expert MLP compiled from a moe.expert_mlp op called `name`:
        workspace = act(rows @ gate^T + b13[:N13/2], rows @ up^T +
        b13[N13/2:]) by entry `<name>_gate_up` (epilogue swiglu, act its
        activation; w13: bf16 [E, N13, K], N13/2 gate rows then N13/2 up
        rows per expert; b13 = gate_up_bias [E, N13], given exactly when the
        entry has a bias), then out = workspace @ w2[e]^T + down_bias[e] by
        entry `<name>_down` (w2: bf16 [E, N, N13/2]; down_bias [E, N] exactly
        when it has a bias), times row_scale[r] (float32, M elements) when
        given, which that entry must then take (epilogue row_scale; else it
        must be store). workspace: bf16 [M, N13/2], allocated when None; out:
        bf16 [M, N] or None. Same offsets, stream and requirements as
        grouped_matmul. Returns out; raises MoERuntimeError."""
        inter = self.grouped_matmul(f"{name}_gate_up", rows, w13, offsets,
                                    out=workspace, bias=gate_up_bias)
        return self.grouped_matmul(f"{name}_down", inter, w2, offsets,
                                   out=out, row_scale=row_scale,
                                   bias=down_bias)

    def route(self, entry: str, logits, bias=None, ids=None, weights=None):
        """Top-k routing by a route.v1 entry, on torch's current stream of
        the tensors' device: for each token t, the entry's top_k experts of
        logits[t] (float32 or bfloat16 [T, E], as the entry says; E must be
        the entry's), chosen with bias (float32 [E]: given exactly when the
        entry has bias) added, as ids (int32 [T, top_k]; ties go to the lower
        expert id, -1 where a token has no valid candidate) and their routing
        weights (float32 [T, top_k]). ids and weights are allocated when
        None. All CUDA, contiguous, one device. Returns (ids, weights);
        raises MoERuntimeError."""
        outputs = self.launch(entry, logits=logits, bias=bias, ids=ids,
                              weights=weights)
        return outputs["ids"], outputs["weights"]

    def unpermute(self, entry: str, rows, slots, weights=None, out=None):
        """The combine of an unpermute.v2 entry, on torch's current stream of
        the tensors' device: out[t] = sum over j of weights[t, j] *
        rows[slots[t, j]], slots outside [0, M) skipped, f32 accumulation.
        rows: bfloat16 [M, H] (H the entry's hidden unless that is -1; a
        multiple of 8), slots: int32/int64 (as the entry says) [T, top_k],
        weights: float32 [T, top_k], given exactly when the entry is
        weighted (else every weight is 1), out: bfloat16 [T, H] or None (a
        new tensor). All CUDA, contiguous, one device. Returns out; raises
        MoERuntimeError."""
        return self.launch(entry, rows=rows, slots=slots, weights=weights,
                           out=out)["out"]

    def permute_workspace_bytes(self, entry: str, tokens: int) -> int:
        """Bytes of the workspace permute needs for `tokens` tokens."""
        return self.workspace_bytes(entry, {"T": tokens})

    def permute(self, entry: str, tokens, ids, rows=None, offsets=None,
                slots=None, workspace=None, rows_scale=None):
        """The permute of a permute.v2 entry, on torch's current stream of the
        tensors' device: the rows of tokens (bfloat16 [T, H], H the entry's
        hidden unless that is -1; a multiple of 8) grouped by the expert ids
        (int32 [T, top_k]), stably (within an expert, in the order of the
        flattened ids): rows (bfloat16 [T*top_k, H]; rows from offsets[E] on
        are zero), offsets (int32/int64, as the entry says, [E + 1]: expert
        e's rows are offsets[e]..offsets[e+1]) and slots (same type,
        [T, top_k]: the row of each (t, j), -1 for ids outside [0, E)).
        An entry whose out is "f8E4M3FN" writes the rows quantized as
        quantize does with [1, 128] blocks and float32 scales (zero rows:
        codes 0, scales 1): rows is then torch.float8_e4m3fn (or torch.uint8,
        the same bytes) [T*top_k, H] and rows_scale float32 [T*top_k, H/128]
        (H a multiple of 128); other entries take no rows_scale.
        workspace: at least bytes =
        permute_workspace_bytes(entry, T) (any dtype: its bytes count), 256-byte aligned, scratch (its
        contents on entry do not matter). Each of rows, offsets, slots,
        workspace and rows_scale is allocated when None.
        All CUDA, contiguous, one device. Returns (rows, offsets, slots), or
        ((rows, rows_scale), offsets, slots) for an out "f8E4M3FN" entry;
        raises MoERuntimeError."""
        outputs = self.launch(entry, tokens=tokens, ids=ids, rows=rows,
                              offsets=offsets, slots=slots,
                              rows_scale=rows_scale, workspace=workspace)
        rows = outputs["rows"]
        if "rows_scale" in outputs:
            rows = (rows, outputs["rows_scale"])
        return rows, outputs["offsets"], outputs["slots"]

    def layer_workspace_bytes(self, entry: str, tokens: int, hidden: int,
                              intermediate: int) -> int:
        """Bytes of the workspace layer needs for `tokens` tokens of size
        `hidden` and the intermediate size `intermediate` (both must be the
        layer's); raises MoERuntimeError."""
        sizes = {"T": tokens, "H": hidden, "I": intermediate}
        names = {s for s, _, _ in self.signature(entry).sizes}
        down = self.shape(entry, "down_weights",
                          {k: v for k, v in sizes.items() if k in names})
        for what, value, expected in (("hidden", hidden, down[1]),
                                      ("intermediate", intermediate, down[2])):
            if value != expected:
                raise _invalid(f"{entry}: {what} = {value} does not match the "
                               f"layer's {expected}")
        return self.workspace_bytes(
            entry, {k: v for k, v in sizes.items() if k in names})

    def layer(self, entry: str, tokens, logits, gate_up_weights,
              down_weights, *, score_bias=None, gate_up_bias=None,
              down_bias=None, out=None, workspace=None,
              gate_up_weights_scale=None, down_weights_scale=None):
        """A whole MoE layer by a layer.v1 entry, on torch's current stream
        of the tensors' device, in one call: its route (logits: float32 or
        bfloat16 [T, E], as the route entry says; score_bias: float32 [E],
        given exactly when it has bias=1), permute of tokens (bfloat16
        [T, H]), gate-up GEMM with its SwiGLU (gate_up_weights: bfloat16
        [E, 2I, H], I gate rows then I up rows; gate_up_bias [E, 2I]), down
        GEMM (down_weights: bfloat16 [E, H, I]; down_bias [E, H]) and the
        combine weighted by the route. Each bias is float32 or bfloat16 as
        its entry says, given exactly when the entry has one. A layer_fp8.v1
        entry (block-FP8; H and I multiples of 128) quantizes the gathered
        rows and the gate-up output to e4m3 with a scale per [1, 128] group
        before each GEMM (the rows by its quantize part, or, in a layer
        without one, by its permute's gather; the gate-up output by its
        intermediate part, or, in a layer without one, by the gate-up GEMM's
        epilogue): its weights
        are torch.float8_e4m3fn and take their
        float32 scales per [128, 128] block, required, gate_up_weights_scale
        [E, 2I/128, H/128] and down_weights_scale [E, H/128, I/128]. One of
        GEMMs of format mxfp8 (H and I multiples of 32) quantizes both with
        a UE8M0 scale per [1, 32] group, by its quantize and intermediate
        parts, and its weights' scales are UE8M0 bytes per 32 elements of a
        row, gate_up_weights_scale [E, 2I, H/32] and down_weights_scale
        [E, H, I/32], as torch.uint8, torch.float8_e8m0fnu or any other
        1-byte dtype. Other entries take no scales. out: bfloat16 [T, H];
        workspace: uint8, at least layer_workspace_bytes bytes (256-byte
        aligned); each allocated when None. All CUDA, contiguous, one
        device. Returns out; raises MoERuntimeError."""
        return self.launch(
            entry, tokens=tokens, logits=logits,
            gate_up_weights=gate_up_weights, down_weights=down_weights,
            score_bias=score_bias, gate_up_bias=gate_up_bias,
            down_bias=down_bias, out=out,
            gate_up_weights_scale=gate_up_weights_scale,
            down_weights_scale=down_weights_scale,
            workspace=workspace)["out"]


def _torch_dtypes(torch, dtype: str):
    """The torch dtypes an argument of plan type `dtype` may have, the one
    allocated first."""
    e8m0 = getattr(torch, "float8_e8m0fnu", None)
    return {"bf16": (torch.bfloat16,), "f32": (torch.float32,),
            "i32": (torch.int32,), "i64": (torch.int64,),
            "e4m3": (torch.float8_e4m3fn, torch.uint8),
            "e5m2": (torch.float8_e5m2, torch.uint8),
            "e8m0": ((e8m0,) if e8m0 is not None else ()) + (torch.uint8,),
            }[dtype]
