"""Thin ctypes wrapper of libmoe_runtime (runtime/include/moe_runtime.h).

    from moe_runtime import Bundle
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

The library is found through $MOE_RUNTIME_LIB, else next to this file, else
in <repo>/build*/lib/. torch is imported only by the launching methods
(after the checks that need no tensor), so the module serves introspection
on machines without it.

Kernels are launched with programmatic dependent launch (the contract's
section 3.6) unless os.environ["MOE_RUNTIME_PDL"] == "0"; the library reads
it at each launching call, so both settings can be compared in one process
(a captured CUDA graph keeps what was captured).
"""

import ctypes
import glob
import os
from dataclasses import dataclass
from typing import Dict, Tuple

__all__ = ["Bundle", "Entry", "Kernel", "MoERuntimeError", "library_path"]

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


class _GroupedMatmulArgs(ctypes.Structure):
    _fields_ = [("rows", ctypes.c_uint64), ("weights", ctypes.c_uint64),
                ("offsets", ctypes.c_uint64), ("out", ctypes.c_uint64),
                ("m", ctypes.c_int64), ("n", ctypes.c_int64),
                ("k", ctypes.c_int64), ("experts", ctypes.c_int64),
                ("row_scale", ctypes.c_uint64), ("bias", ctypes.c_uint64),
                # Version 6.
                ("rows_scale", ctypes.c_uint64),
                ("weights_scale", ctypes.c_uint64),
                # out=f8E4M3FN.
                ("out_scale", ctypes.c_uint64)]


class _RouteArgs(ctypes.Structure):
    _fields_ = [("logits", ctypes.c_uint64), ("bias", ctypes.c_uint64),
                ("ids", ctypes.c_uint64), ("weights", ctypes.c_uint64),
                ("tokens", ctypes.c_int64), ("experts", ctypes.c_int64)]


class _PermuteArgs(ctypes.Structure):
    _fields_ = [("tokens", ctypes.c_uint64), ("ids", ctypes.c_uint64),
                ("rows", ctypes.c_uint64), ("offsets", ctypes.c_uint64),
                ("slots", ctypes.c_uint64), ("workspace", ctypes.c_uint64),
                ("tokens_count", ctypes.c_int64), ("hidden", ctypes.c_int64),
                # out=f8E4M3FN.
                ("rows_scale", ctypes.c_uint64)]


class _LayerArgs(ctypes.Structure):
    _fields_ = [("tokens", ctypes.c_uint64), ("logits", ctypes.c_uint64),
                ("score_bias", ctypes.c_uint64),
                ("gate_up_weights", ctypes.c_uint64),
                ("down_weights", ctypes.c_uint64),
                ("gate_up_bias", ctypes.c_uint64),
                ("down_bias", ctypes.c_uint64), ("out", ctypes.c_uint64),
                ("workspace", ctypes.c_uint64),
                ("workspace_bytes", ctypes.c_uint64),
                ("tokens_count", ctypes.c_int64), ("hidden", ctypes.c_int64),
                ("intermediate", ctypes.c_int64), ("experts", ctypes.c_int64),
                # layer_fp8.v1.
                ("gate_up_weights_scale", ctypes.c_uint64),
                ("down_weights_scale", ctypes.c_uint64)]


class _QuantizeArgs(ctypes.Structure):
    _fields_ = [("input", ctypes.c_uint64), ("values", ctypes.c_uint64),
                ("scales", ctypes.c_uint64), ("batch", ctypes.c_int64),
                ("rows", ctypes.c_int64), ("cols", ctypes.c_int64)]


class _UnpermuteArgs(ctypes.Structure):
    _fields_ = [("rows", ctypes.c_uint64), ("slots", ctypes.c_uint64),
                ("weights", ctypes.c_uint64), ("out", ctypes.c_uint64),
                ("rows_count", ctypes.c_int64), ("tokens", ctypes.c_int64),
                ("hidden", ctypes.c_int64)]


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
    explicit = os.environ.get("MOE_RUNTIME_LIB")
    if explicit:
        return explicit
    here = os.path.dirname(os.path.abspath(__file__))
    beside = os.path.join(here, "libmoe_runtime.so")
    if os.path.exists(beside):
        return beside
    root = os.path.dirname(os.path.dirname(here))
    built = glob.glob(os.path.join(root, "build*", "lib", "libmoe_runtime.so"))
    if built:
        return max(built, key=os.path.getmtime)  # the most recent build
    raise MoERuntimeError(
        "NOT_FOUND", "libmoe_runtime.so not found: set MOE_RUNTIME_LIB, or "
        f"build it into {root}/build*/lib")


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
    lib.moeBundleGetKernel.restype = status
    lib.moeBundleGetKernel.argtypes = [handle, ctypes.c_int32, ctypes.c_int32,
                                       ctypes.POINTER(_KernelInfo)]
    lib.moeBundleLoad.restype = status
    lib.moeBundleLoad.argtypes = [handle]
    lib.moeGroupedMatmul.restype = status
    lib.moeGroupedMatmul.argtypes = [handle, ctypes.c_char_p,
                                     ctypes.POINTER(_GroupedMatmulArgs),
                                     ctypes.c_void_p]
    lib.moeRoute.restype = status
    lib.moeRoute.argtypes = [handle, ctypes.c_char_p,
                             ctypes.POINTER(_RouteArgs), ctypes.c_void_p]
    lib.moeUnpermute.restype = status
    lib.moeUnpermute.argtypes = [handle, ctypes.c_char_p,
                                 ctypes.POINTER(_UnpermuteArgs),
                                 ctypes.c_void_p]
    lib.moePermute.restype = status
    lib.moePermute.argtypes = [handle, ctypes.c_char_p,
                               ctypes.POINTER(_PermuteArgs), ctypes.c_void_p]
    lib.moePermuteWorkspaceBytes.restype = status
    lib.moePermuteWorkspaceBytes.argtypes = [handle, ctypes.c_char_p,
                                             ctypes.c_int64,
                                             ctypes.POINTER(ctypes.c_int64)]
    lib.moeLayer.restype = status
    lib.moeLayer.argtypes = [handle, ctypes.c_char_p,
                             ctypes.POINTER(_LayerArgs), ctypes.c_void_p]
    lib.moeQuantize.restype = status
    lib.moeQuantize.argtypes = [handle, ctypes.c_char_p,
                                ctypes.POINTER(_QuantizeArgs), ctypes.c_void_p]
    lib.moeLayerWorkspaceBytes.restype = status
    lib.moeLayerWorkspaceBytes.argtypes = [handle, ctypes.c_char_p,
                                           ctypes.c_int64, ctypes.c_int64,
                                           ctypes.c_int64,
                                           ctypes.POINTER(ctypes.c_uint64)]
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

    def entry(self, name: str) -> Entry:
        """The entry called `name`; MoERuntimeError NOT_FOUND if none."""
        found = self._by_name.get(name)
        if found is None:
            names = ", ".join(e.name for e in self.entries) or "none"
            raise MoERuntimeError(
                "NOT_FOUND", f"no entry {name!r} in the bundle (entries: "
                f"{names})")
        return found

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
        handle = self._live_handle()
        info = self.entry(entry)
        where = f"grouped_matmul({entry})"
        _check_abi(where, info, "grouped_matmul.v3", "grouped_matmul_fp8.v1")
        fp8 = info.abi == "grouped_matmul_fp8.v1"
        mx = info.format == "mxfp8"
        _check_scales(
            where, info, "grouped_matmul_fp8.v1",
            {"rows_scale": (rows_scale,
                            "[M, K/32]" if mx else "[M, ceil(K/128)]"),
             "weights_scale": (weights_scale, "[E, N, K/32]" if mx
                               else "[E, ceil(N/128), ceil(K/128)]")},
            mx)
        fp8_out = info.out == "f8E4M3FN"
        if not fp8_out and out_scale is not None:
            raise _invalid(f"{where}: out_scale is only taken by entries "
                           f"with out f8E4M3FN (this one's out is "
                           f"{info.out})")
        if info.epilogue == "row_scale" and row_scale is None:
            raise _invalid(f"{where}: the entry's epilogue is row_scale: pass "
                           "row_scale, the float32 routing weight of each "
                           "row")
        if info.epilogue != "row_scale" and row_scale is not None:
            raise _invalid(f"{where}: row_scale is only taken by row_scale "
                           f"entries (this one's epilogue is {info.epilogue})")
        _check_bias(where, info, bias, "bias", "[E, N]")
        import torch

        tensors = {"rows": rows, "weights": weights, "offsets": offsets}
        for name, tensor in (("out", out), ("row_scale", row_scale),
                             ("bias", bias), ("rows_scale", rows_scale),
                             ("weights_scale", weights_scale),
                             ("out_scale", out_scale)):
            if tensor is not None:
                tensors[name] = tensor
        offsets_dtype = torch.int32 if info.offsets_bits == 32 else torch.int64
        element = _float8_e4m3(torch, where) if fp8 else torch.bfloat16
        dtypes = {"rows": element, "weights": element,
                  "offsets": offsets_dtype, "out": torch.bfloat16,
                  "row_scale": torch.float32,
                  "bias": _bias_dtype(torch, info),
                  "rows_scale": torch.float32,
                  "weights_scale": torch.float32,
                  "out_scale": torch.float32}
        if fp8_out:  # e4m3 codes, as float8_e4m3fn or their uint8 bytes
            del dtypes["out"]
        if mx:  # UE8M0 codes: any 1-byte dtype
            del dtypes["rows_scale"], dtypes["weights_scale"]
        _check_tensors(torch, where, tensors, rows, dtypes)
        if mx:
            _check_bytes(torch, where, {"rows_scale": rows_scale,
                                        "weights_scale": weights_scale})
        if fp8_out and out is not None and out.dtype not in (element,
                                                             torch.uint8):
            raise _invalid(f"{where}: out is {out.dtype}, expected {element} "
                           f"or {torch.uint8} (the entry's out is "
                           "f8E4M3FN)")
        if rows.dim() != 2 or weights.dim() != 3 or offsets.dim() != 1:
            raise _invalid(f"{where}: expected rows [M, K], weights [E, N, K] "
                           f"and offsets [E + 1], got {tuple(rows.shape)}, "
                           f"{tuple(weights.shape)}, {tuple(offsets.shape)}")
        m, k = rows.shape
        experts, n, weights_k = weights.shape
        if weights_k != k:
            raise _invalid(f"{where}: weights {tuple(weights.shape)} do not "
                           f"match rows {tuple(rows.shape)} in K")
        if offsets.shape[0] != experts + 1:
            raise _invalid(f"{where}: offsets has {offsets.shape[0]} elements, "
                           f"expected E + 1 = {experts + 1}")
        columns = n
        if info.epilogue == "swiglu":
            if n % 2:
                raise _invalid(f"{where}: weights {tuple(weights.shape)} have "
                               f"N = {n} rows per expert, but a swiglu entry "
                               "needs an even N (N/2 gate rows, then N/2 up "
                               "rows)")
            columns = n // 2
        if fp8_out and n % 256:
            raise _invalid(f"{where}: weights {tuple(weights.shape)} have "
                           f"N = {n} rows per expert, but an out f8E4M3FN "
                           "entry writes whole [1, 128] groups of its N/2 "
                           "output columns: N must be a multiple of 256")
        if out is None:
            out = torch.empty((m, columns), dtype=element if fp8_out
                              else torch.bfloat16, device=rows.device)
        elif tuple(out.shape) != (m, columns):
            raise _invalid(f"{where}: out is {tuple(out.shape)}, expected "
                           f"({m}, {columns})")
        if fp8_out and out_scale is None:
            out_scale = torch.empty((m, columns // 128), dtype=torch.float32,
                                    device=rows.device)
        elif fp8_out and tuple(out_scale.shape) != (m, columns // 128):
            raise _invalid(f"{where}: out_scale is {tuple(out_scale.shape)}, "
                           f"expected {(m, columns // 128)} = (M, N/256)")
        if row_scale is not None and row_scale.numel() != m:
            raise _invalid(f"{where}: row_scale has {row_scale.numel()} "
                           f"elements, expected M = {m}")
        if bias is not None and tuple(bias.shape) != (experts, n):
            raise _invalid(f"{where}: bias is {tuple(bias.shape)}, expected "
                           f"{(experts, n)} = (E, N)")
        if fp8:
            # fp8_block: per 128 x 128 block; mxfp8: per 32 of a row (K a
            # multiple of 32, which moeGroupedMatmul checks).
            k_blocks = -(-k // 32) if mx else -(-k // 128)
            n_blocks = n if mx else -(-n // 128)
            k_meaning = "K/32" if mx else "ceil(K/128)"
            for name, tensor, shape, meaning in (
                    ("rows_scale", rows_scale, (m, k_blocks),
                     f"(M, {k_meaning})"),
                    ("weights_scale", weights_scale,
                     (experts, n_blocks, k_blocks),
                     f"(E, N, {k_meaning})" if mx
                     else "(E, ceil(N/128), ceil(K/128))")):
                if tuple(tensor.shape) != shape:
                    raise _invalid(f"{where}: {name} is "
                                   f"{tuple(tensor.shape)}, expected {shape} "
                                   f"= {meaning}")

        def pointer(tensor):
            return 0 if tensor is None else tensor.data_ptr()

        args = _GroupedMatmulArgs(rows.data_ptr(), weights.data_ptr(),
                                  offsets.data_ptr(), out.data_ptr(),
                                  m, n, k, experts, pointer(row_scale),
                                  pointer(bias), pointer(rows_scale),
                                  pointer(weights_scale), pointer(out_scale))
        with torch.cuda.device(rows.device):
            stream = torch.cuda.current_stream(rows.device).cuda_stream
            _check(_library().moeGroupedMatmul(
                handle, entry.encode(), ctypes.byref(args),
                ctypes.c_void_p(stream)))
        return (out, out_scale) if fp8_out else out

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
        handle = self._live_handle()
        info = self.entry(entry)
        where = f"quantize({entry})"
        _check_abi(where, info, "quantize.v1")
        import torch

        element_name = ("float8_e4m3fn" if info.element == "f8E4M3FN"
                        else "float8_e5m2")
        element = getattr(torch, element_name, None)
        if element is None:
            raise _invalid(f"{where}: this torch has no {element_name}, the "
                           "element type of the entry")
        e8m0 = info.scale == "e8m0"
        scale_dtype = (getattr(torch, "float8_e8m0fnu", torch.uint8) if e8m0
                       else torch.float32)
        input_dtype = torch.bfloat16 if info.input_bits == 16 else torch.float32
        tensors = {"x": x}
        for name, tensor in (("values", values), ("scales", scales)):
            if tensor is not None:
                tensors[name] = tensor
        _check_tensors(torch, where, tensors, x, {"x": input_dtype},
                       first="x")
        for name, tensor, dtypes in (
                ("values", values, (element, torch.uint8)),
                ("scales", scales, (scale_dtype, torch.uint8) if e8m0
                 else (torch.float32,))):
            if tensor is not None and tensor.dtype not in dtypes:
                expected = " or ".join(str(d) for d in dtypes)
                raise _invalid(f"{where}: {name} is {tensor.dtype}, expected "
                               f"{expected}")
        if x.dim() != info.rank:
            shape = "[R, C]" if info.rank == 2 else "[E, R, C]"
            raise _invalid(f"{where}: expected x {shape} (the entry's rank "
                           f"is {info.rank}), got {tuple(x.shape)}")
        shape = tuple(x.shape)
        batch, rows, cols = (1,) + shape if info.rank == 2 else shape
        scale_shape = shape[:-2] + (rows // info.block_rows,
                                    cols // info.block_cols)
        if values is None:
            values = torch.empty(shape, dtype=element, device=x.device)
        elif tuple(values.shape) != shape:
            raise _invalid(f"{where}: values is {tuple(values.shape)}, "
                           f"expected {shape} (x's shape)")
        if scales is None:
            scales = torch.empty(scale_shape, dtype=scale_dtype,
                                 device=x.device)
        elif tuple(scales.shape) != scale_shape:
            raise _invalid(f"{where}: scales is {tuple(scales.shape)}, "
                           f"expected {scale_shape} (one per "
                           f"[{info.block_rows}, {info.block_cols}] block)")
        args = _QuantizeArgs(x.data_ptr(), values.data_ptr(),
                             scales.data_ptr(), batch, rows, cols)
        with torch.cuda.device(x.device):
            stream = torch.cuda.current_stream(x.device).cuda_stream
            _check(_library().moeQuantize(handle, entry.encode(),
                                          ctypes.byref(args),
                                          ctypes.c_void_p(stream)))
        return values, scales

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
        self._live_handle()
        where = f"expert_mlp({name})"
        gate_up = self.entry(f"{name}_gate_up")
        down = self.entry(f"{name}_down")
        for part in (gate_up, down):
            _refuse_fp8(where, part)
        if gate_up.epilogue != "swiglu":
            raise _invalid(f"{where}: entry {gate_up.name!r} has epilogue "
                           f"{gate_up.epilogue}, expected swiglu")
        if row_scale is not None and down.epilogue != "row_scale":
            raise _invalid(f"{where}: row_scale was given, but entry "
                           f"{down.name!r} has epilogue {down.epilogue}, not "
                           "row_scale (its op has no routing scale)")
        if row_scale is None and down.epilogue == "row_scale":
            raise _invalid(f"{where}: entry {down.name!r} has epilogue "
                           "row_scale: pass row_scale, the float32 routing "
                           "weight of each row")
        if row_scale is None and down.epilogue != "store":
            raise _invalid(f"{where}: entry {down.name!r} has epilogue "
                           f"{down.epilogue}, expected store or row_scale")
        _check_bias(where, gate_up, gate_up_bias, "gate_up_bias", "[E, N13]")
        _check_bias(where, down, down_bias, "down_bias", "[E, N]")
        import torch

        _check_tensors(torch, where, {"rows": rows, "w13": w13, "w2": w2},
                       rows, {})
        if rows.dim() != 2 or w13.dim() != 3 or w2.dim() != 3:
            raise _invalid(f"{where}: expected rows [M, K], w13 [E, N13, K] "
                           f"and w2 [E, N, N13/2], got {tuple(rows.shape)}, "
                           f"{tuple(w13.shape)}, {tuple(w2.shape)}")
        experts, n13, _ = w13.shape
        if n13 % 2:
            raise _invalid(f"{where}: w13 {tuple(w13.shape)} has N13 = {n13} "
                           "rows per expert, which must be even (N13/2 gate "
                           "rows, then N13/2 up rows)")
        inner = n13 // 2
        if w2.shape[0] != experts or w2.shape[2] != inner:
            raise _invalid(f"{where}: w2 is {tuple(w2.shape)}, expected "
                           f"({experts}, N, {inner}) for w13 "
                           f"{tuple(w13.shape)}")
        m = rows.shape[0]
        if workspace is None:
            workspace = torch.empty((m, inner), dtype=torch.bfloat16,
                                    device=rows.device)
        else:
            _check_tensors(torch, where, {"workspace": workspace}, rows,
                           {"workspace": torch.bfloat16})
            if tuple(workspace.shape) != (m, inner):
                raise _invalid(f"{where}: workspace is "
                               f"{tuple(workspace.shape)}, expected "
                               f"({m}, {inner}) = (M, N13/2)")
        self.grouped_matmul(gate_up.name, rows, w13, offsets, out=workspace,
                            bias=gate_up_bias)
        return self.grouped_matmul(down.name, workspace, w2, offsets, out=out,
                                   row_scale=row_scale, bias=down_bias)

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
        handle = self._live_handle()
        info = self.entry(entry)
        where = f"route({entry})"
        _check_abi(where, info, "route.v1")
        if info.bias and bias is None:
            raise _invalid(f"{where}: the entry has bias=1: pass bias, the "
                           f"float32 correction bias [{info.experts}]")
        if not info.bias and bias is not None:
            raise _invalid(f"{where}: the entry has bias=0: its kernel takes "
                           "no bias")
        import torch

        logits_dtype = torch.float32 if info.logits_bits == 32 \
            else torch.bfloat16
        tensors = {"logits": logits}
        for name, tensor in (("bias", bias), ("ids", ids),
                             ("weights", weights)):
            if tensor is not None:
                tensors[name] = tensor
        _check_tensors(torch, where, tensors, logits,
                       {"logits": logits_dtype, "bias": torch.float32,
                        "ids": torch.int32, "weights": torch.float32},
                       first="logits")
        if logits.dim() != 2:
            raise _invalid(f"{where}: expected logits [T, E], got "
                           f"{tuple(logits.shape)}")
        tokens, experts = logits.shape
        if experts != info.experts:
            raise _invalid(f"{where}: logits {tuple(logits.shape)} have E = "
                           f"{experts} columns, the entry has experts = "
                           f"{info.experts}")
        if bias is not None and tuple(bias.shape) != (experts,):
            raise _invalid(f"{where}: bias is {tuple(bias.shape)}, expected "
                           f"({experts},)")
        shape = (tokens, info.top_k)
        if ids is None:
            ids = torch.empty(shape, dtype=torch.int32, device=logits.device)
        elif tuple(ids.shape) != shape:
            raise _invalid(f"{where}: ids is {tuple(ids.shape)}, expected "
                           f"{shape} = (T, top_k)")
        if weights is None:
            weights = torch.empty(shape, dtype=torch.float32,
                                  device=logits.device)
        elif tuple(weights.shape) != shape:
            raise _invalid(f"{where}: weights is {tuple(weights.shape)}, "
                           f"expected {shape} = (T, top_k)")
        args = _RouteArgs(logits.data_ptr(),
                          0 if bias is None else bias.data_ptr(),
                          ids.data_ptr(), weights.data_ptr(), tokens, experts)
        with torch.cuda.device(logits.device):
            stream = torch.cuda.current_stream(logits.device).cuda_stream
            _check(_library().moeRoute(handle, entry.encode(),
                                       ctypes.byref(args),
                                       ctypes.c_void_p(stream)))
        return ids, weights

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
        handle = self._live_handle()
        info = self.entry(entry)
        where = f"unpermute({entry})"
        _check_abi(where, info, "unpermute.v2")
        if info.weighted and weights is None:
            raise _invalid(f"{where}: the entry has weighted=1: pass weights, "
                           "the float32 routing weights [T, top_k]")
        if not info.weighted and weights is not None:
            raise _invalid(f"{where}: the entry has weighted=0: its kernel "
                           "takes no weights")
        import torch

        slots_dtype = torch.int32 if info.slots_bits == 32 else torch.int64
        tensors = {"rows": rows, "slots": slots}
        if weights is not None:
            tensors["weights"] = weights
        if out is not None:
            tensors["out"] = out
        _check_tensors(torch, where, tensors, rows,
                       {"rows": torch.bfloat16, "slots": slots_dtype,
                        "weights": torch.float32, "out": torch.bfloat16})
        if rows.dim() != 2 or slots.dim() != 2:
            raise _invalid(f"{where}: expected rows [M, H] and slots [T, "
                           f"top_k], got {tuple(rows.shape)}, "
                           f"{tuple(slots.shape)}")
        rows_count, hidden = rows.shape
        tokens, top_k = slots.shape
        if top_k != info.top_k:
            raise _invalid(f"{where}: slots {tuple(slots.shape)} have "
                           f"{top_k} columns, the entry has top_k = "
                           f"{info.top_k}")
        if info.hidden != -1 and hidden != info.hidden:
            raise _invalid(f"{where}: rows {tuple(rows.shape)} have H = "
                           f"{hidden} columns, the entry has hidden = "
                           f"{info.hidden}")
        if weights is not None and tuple(weights.shape) != (tokens, top_k):
            raise _invalid(f"{where}: weights is {tuple(weights.shape)}, "
                           f"expected {(tokens, top_k)} like slots")
        if out is None:
            out = torch.empty((tokens, hidden), dtype=torch.bfloat16,
                              device=rows.device)
        elif tuple(out.shape) != (tokens, hidden):
            raise _invalid(f"{where}: out is {tuple(out.shape)}, expected "
                           f"{(tokens, hidden)} = (T, H)")
        args = _UnpermuteArgs(rows.data_ptr(), slots.data_ptr(),
                              0 if weights is None else weights.data_ptr(),
                              out.data_ptr(), rows_count, tokens, hidden)
        with torch.cuda.device(rows.device):
            stream = torch.cuda.current_stream(rows.device).cuda_stream
            _check(_library().moeUnpermute(handle, entry.encode(),
                                           ctypes.byref(args),
                                           ctypes.c_void_p(stream)))
        return out

    def permute_workspace_bytes(self, entry: str, tokens: int) -> int:
        """Bytes of the workspace permute needs for `tokens` tokens: with
        N = T*top_k, the int32 sources [N], then from the next multiple of 256
        bytes the int32 counts [ceil(N / chunk) * E]; raises MoERuntimeError
        (entry, T) as permute would."""
        handle = self._live_handle()
        _check_abi(f"permute({entry})", self.entry(entry), "permute.v2")
        size = ctypes.c_int64()
        _check(_library().moePermuteWorkspaceBytes(
            handle, entry.encode(), tokens, ctypes.byref(size)))
        return size.value

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
        workspace: int32 [bytes / 4] or uint8 [bytes] with bytes =
        permute_workspace_bytes(entry, T), 256-byte aligned, scratch (its
        contents on entry do not matter). Each of rows, offsets, slots,
        workspace and rows_scale is allocated when None.
        All CUDA, contiguous, one device. Returns (rows, offsets, slots), or
        ((rows, rows_scale), offsets, slots) for an out "f8E4M3FN" entry;
        raises MoERuntimeError."""
        handle = self._live_handle()
        info = self.entry(entry)
        where = f"permute({entry})"
        _check_abi(where, info, "permute.v2")
        fp8_out = info.out == "f8E4M3FN"
        if not fp8_out and rows_scale is not None:
            raise _invalid(f"{where}: rows_scale is only taken by entries "
                           f"with out f8E4M3FN (this one's out is "
                           f"{info.out})")
        import torch

        index_dtype = torch.int32 if info.offsets_bits == 32 else torch.int64
        tensors = {"tokens": tokens, "ids": ids}
        for name, tensor in (("rows", rows), ("offsets", offsets),
                             ("slots", slots), ("workspace", workspace),
                             ("rows_scale", rows_scale)):
            if tensor is not None:
                tensors[name] = tensor
        dtypes = {"tokens": torch.bfloat16, "ids": torch.int32,
                  "rows": torch.bfloat16, "offsets": index_dtype,
                  "slots": index_dtype, "rows_scale": torch.float32}
        element = torch.bfloat16
        if fp8_out:  # e4m3 codes, as float8_e4m3fn or their uint8 bytes
            element = _float8_e4m3(torch, where)
            del dtypes["rows"]
        _check_tensors(torch, where, tensors, tokens, dtypes, first="tokens")
        if fp8_out and rows is not None and rows.dtype not in (element,
                                                               torch.uint8):
            raise _invalid(f"{where}: rows is {rows.dtype}, expected "
                           f"{element} or {torch.uint8} (the entry's out is "
                           "f8E4M3FN)")
        if tokens.dim() != 2 or ids.dim() != 2:
            raise _invalid(f"{where}: expected tokens [T, H] and ids [T, "
                           f"top_k], got {tuple(tokens.shape)}, "
                           f"{tuple(ids.shape)}")
        count, hidden = tokens.shape
        if ids.shape[0] != count or ids.shape[1] != info.top_k:
            raise _invalid(f"{where}: ids is {tuple(ids.shape)}, expected "
                           f"{(count, info.top_k)} = (T, top_k)")
        if info.hidden != -1 and hidden != info.hidden:
            raise _invalid(f"{where}: tokens {tuple(tokens.shape)} have H = "
                           f"{hidden} columns, the entry has hidden = "
                           f"{info.hidden}")
        if fp8_out and hidden % 128:
            raise _invalid(f"{where}: tokens {tuple(tokens.shape)} have H = "
                           f"{hidden} columns, but an out f8E4M3FN entry "
                           "writes whole [1, 128] groups of a row: H must be "
                           "a multiple of 128")
        # Checks T (and T*top_k) before anything is allocated.
        workspace_bytes = self.permute_workspace_bytes(entry, count)
        n = count * info.top_k
        shapes = {"rows": (n, hidden), "offsets": (info.experts + 1,),
                  "slots": (count, info.top_k)}
        given = {"rows": rows, "offsets": offsets, "slots": slots}
        for name, shape in shapes.items():
            tensor = given[name]
            if tensor is not None and tuple(tensor.shape) != shape:
                raise _invalid(f"{where}: {name} is {tuple(tensor.shape)}, "
                               f"expected {shape}")
        if rows_scale is not None and tuple(rows_scale.shape) != (
                n, hidden // 128):
            raise _invalid(f"{where}: rows_scale is "
                           f"{tuple(rows_scale.shape)}, expected "
                           f"{(n, hidden // 128)} = (T*top_k, H/128)")
        if workspace is not None:
            uint8 = getattr(torch, "uint8", None)
            if workspace.dtype == torch.int32:
                if workspace.numel() * 4 != workspace_bytes:
                    raise _invalid(f"{where}: workspace has "
                                   f"{workspace.numel()} int32 elements, "
                                   f"expected {workspace_bytes // 4} "
                                   f"({workspace_bytes} bytes)")
            elif uint8 is not None and workspace.dtype == uint8:
                if workspace.numel() != workspace_bytes:
                    raise _invalid(f"{where}: workspace has "
                                   f"{workspace.numel()} bytes, expected "
                                   f"{workspace_bytes}")
            else:
                raise _invalid(f"{where}: workspace is {workspace.dtype}, "
                               "expected torch.int32 or torch.uint8")
        device = tokens.device
        if rows is None:
            rows = torch.empty(shapes["rows"], dtype=element, device=device)
        if offsets is None:
            offsets = torch.empty(shapes["offsets"], dtype=index_dtype,
                                  device=device)
        if slots is None:
            slots = torch.empty(shapes["slots"], dtype=index_dtype,
                                device=device)
        if workspace is None:
            workspace = torch.empty((workspace_bytes // 4,), dtype=torch.int32,
                                    device=device)
        if fp8_out and rows_scale is None:
            rows_scale = torch.empty((n, hidden // 128), dtype=torch.float32,
                                     device=device)
        args = _PermuteArgs(tokens.data_ptr(), ids.data_ptr(), rows.data_ptr(),
                            offsets.data_ptr(), slots.data_ptr(),
                            workspace.data_ptr(), count, hidden,
                            rows_scale.data_ptr() if fp8_out else 0)
        with torch.cuda.device(device):
            stream = torch.cuda.current_stream(device).cuda_stream
            _check(_library().moePermute(handle, entry.encode(),
                                         ctypes.byref(args),
                                         ctypes.c_void_p(stream)))
        return ((rows, rows_scale) if fp8_out else rows), offsets, slots


    def layer_workspace_bytes(self, entry: str, tokens: int, hidden: int,
                              intermediate: int) -> int:
        """Bytes of the workspace layer needs for `tokens` tokens of size
        `hidden` and the intermediate size `intermediate`; raises
        MoERuntimeError (entry, T, H, I) as layer would."""
        handle = self._live_handle()
        _check_abi(f"layer({entry})", self.entry(entry), *_LAYER_ABIS)
        size = ctypes.c_uint64()
        _check(_library().moeLayerWorkspaceBytes(
            handle, entry.encode(), tokens, hidden, intermediate,
            ctypes.byref(size)))
        return size.value

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
        handle = self._live_handle()
        info = self.entry(entry)
        where = f"layer({entry})"
        _check_abi(where, info, *_LAYER_ABIS)
        fp8 = info.abi == "layer_fp8.v1"
        route = self.entry(info.route)
        gate_up = self.entry(info.gate_up)
        down = self.entry(info.down)
        if route.bias and score_bias is None:
            raise _invalid(f"{where}: entry {route.name!r} has bias=1: pass "
                           "score_bias, the float32 correction bias "
                           f"[{route.experts}]")
        if not route.bias and score_bias is not None:
            raise _invalid(f"{where}: entry {route.name!r} has bias=0: it "
                           "takes no score_bias")
        _check_bias(where, gate_up, gate_up_bias, "gate_up_bias", "[E, 2I]")
        _check_bias(where, down, down_bias, "down_bias", "[E, H]")
        mx = gate_up.format == "mxfp8"  # down's too (the reader checks it)
        _check_scales(where, info, "layer_fp8.v1",
                      {"gate_up_weights_scale": (gate_up_weights_scale,
                                                 "[E, 2I, H/32]" if mx
                                                 else "[E, 2I/128, H/128]"),
                       "down_weights_scale": (down_weights_scale,
                                              "[E, H, I/32]" if mx
                                              else "[E, H/128, I/128]")},
                      mx)
        import torch

        tensors = {"tokens": tokens, "logits": logits,
                   "gate_up_weights": gate_up_weights,
                   "down_weights": down_weights}
        for name, tensor in (("score_bias", score_bias),
                             ("gate_up_bias", gate_up_bias),
                             ("down_bias", down_bias), ("out", out),
                             ("workspace", workspace),
                             ("gate_up_weights_scale", gate_up_weights_scale),
                             ("down_weights_scale", down_weights_scale)):
            if tensor is not None:
                tensors[name] = tensor
        bf16 = torch.bfloat16
        weights_dtype = _float8_e4m3(torch, where) if fp8 else bf16
        scale_dtypes = {} if mx else {"gate_up_weights_scale": torch.float32,
                                      "down_weights_scale": torch.float32}
        _check_tensors(torch, where, tensors, tokens,
                       {"tokens": bf16,
                        "logits": torch.float32 if route.logits_bits == 32
                        else bf16,
                        "score_bias": torch.float32,
                        "gate_up_weights": weights_dtype,
                        "down_weights": weights_dtype,
                        "gate_up_bias": _bias_dtype(torch, gate_up),
                        "down_bias": _bias_dtype(torch, down), "out": bf16,
                        "workspace": getattr(torch, "uint8", None),
                        **scale_dtypes},
                       first="tokens")
        if mx:  # UE8M0 codes: any 1-byte dtype
            _check_bytes(torch, where,
                         {"gate_up_weights_scale": gate_up_weights_scale,
                          "down_weights_scale": down_weights_scale})
        if (tokens.dim() != 2 or logits.dim() != 2
                or gate_up_weights.dim() != 3 or down_weights.dim() != 3):
            raise _invalid(f"{where}: expected tokens [T, H], logits [T, E], "
                           "gate_up_weights [E, 2I, H] and down_weights "
                           f"[E, H, I], got {tuple(tokens.shape)}, "
                           f"{tuple(logits.shape)}, "
                           f"{tuple(gate_up_weights.shape)}, "
                           f"{tuple(down_weights.shape)}")
        count, hidden = tokens.shape
        experts = route.experts
        two_i = gate_up_weights.shape[1]
        inter = two_i // 2
        shapes = {"logits": (logits, (count, experts), "(T, E)"),
                  "gate_up_weights": (gate_up_weights,
                                      (experts, 2 * inter, hidden),
                                      "(E, 2I, H)"),
                  "down_weights": (down_weights, (experts, hidden, inter),
                                   "(E, H, I)"),
                  "score_bias": (score_bias, (experts,), "(E,)"),
                  "gate_up_bias": (gate_up_bias, (experts, 2 * inter),
                                   "(E, 2I)"),
                  "down_bias": (down_bias, (experts, hidden), "(E, H)"),
                  "out": (out, (count, hidden), "(T, H)"),
                  # One per [128, 128] block (H and I are multiples of 128);
                  # mxfp8: per 32 of a row (multiples of 32).
                  "gate_up_weights_scale": (
                      gate_up_weights_scale,
                      (experts, 2 * inter, -(-hidden // 32)) if mx else
                      (experts, -(-2 * inter // 128), -(-hidden // 128)),
                      "(E, 2I, H/32)" if mx else "(E, 2I/128, H/128)"),
                  "down_weights_scale": (
                      down_weights_scale,
                      (experts, hidden, -(-inter // 32)) if mx else
                      (experts, -(-hidden // 128), -(-inter // 128)),
                      "(E, H, I/32)" if mx else "(E, H/128, I/128)")}
        for name, (tensor, shape, meaning) in shapes.items():
            if tensor is not None and tuple(tensor.shape) != shape:
                raise _invalid(f"{where}: {name} is {tuple(tensor.shape)}, "
                               f"expected {shape} = {meaning}")
        # Checks T, H and I before anything is allocated.
        workspace_bytes = self.layer_workspace_bytes(entry, count, hidden,
                                                     inter)
        if workspace is not None and workspace.numel() < workspace_bytes:
            raise _invalid(f"{where}: workspace has {workspace.numel()} "
                           f"bytes, expected at least {workspace_bytes}")
        if out is None:
            out = torch.empty((count, hidden), dtype=bf16,
                              device=tokens.device)
        if workspace is None:
            workspace = torch.empty((workspace_bytes,), dtype=torch.uint8,
                                    device=tokens.device)

        def pointer(tensor):
            return 0 if tensor is None else tensor.data_ptr()

        args = _LayerArgs(tokens.data_ptr(), logits.data_ptr(),
                          pointer(score_bias), gate_up_weights.data_ptr(),
                          down_weights.data_ptr(), pointer(gate_up_bias),
                          pointer(down_bias), out.data_ptr(),
                          workspace.data_ptr(), workspace.numel(), count,
                          hidden, inter, experts,
                          pointer(gate_up_weights_scale),
                          pointer(down_weights_scale))
        with torch.cuda.device(tokens.device):
            stream = torch.cuda.current_stream(tokens.device).cuda_stream
            _check(_library().moeLayer(handle, entry.encode(),
                                       ctypes.byref(args),
                                       ctypes.c_void_p(stream)))
        return out


def _bias_dtype(torch, info: Entry):
    """The torch dtype of a grouped_matmul.v3 entry's expert bias."""
    return torch.float32 if info.bias_bits == 32 else torch.bfloat16


def _check_bias(where: str, info: Entry, bias, name: str, shape: str) -> None:
    """`bias` is given exactly when the grouped_matmul.v3 entry takes one."""
    if info.bias_bits and bias is None:
        kind = "float32" if info.bias_bits == 32 else "bfloat16"
        raise _invalid(f"{where}: entry {info.name!r} has "
                       f"bias={'f32' if info.bias_bits == 32 else 'bf16'}: "
                       f"pass {name}, its {kind} expert bias {shape}")
    if not info.bias_bits and bias is not None:
        raise _invalid(f"{where}: entry {info.name!r} has bias=none: it "
                       f"takes no {name}")


def _refuse_fp8(where: str, info: Entry) -> None:
    """expert_mlp runs grouped_matmul.v3 entries only."""
    if info.abi == "grouped_matmul_fp8.v1":
        raise _invalid(f"{where}: entry {info.name!r} is block-FP8 (abi "
                       f"{info.abi}, format {info.format}): expert_mlp runs "
                       "bf16 grouped_matmul.v3 entries only; call "
                       "grouped_matmul, quantize (of <name>_intermediate; "
                       "none when <name>_gate_up has out f8E4M3FN) and "
                       "grouped_matmul with their scales")


#: The ABIs of the entries that layer and layer_workspace_bytes take.
_LAYER_ABIS = ("layer.v1", "layer_fp8.v1")


def _check_abi(where: str, info: Entry, *abis: str) -> None:
    """The entry has one of `abis`."""
    if info.abi not in abis:
        raise _invalid(f"{where}: entry {info.name!r} has abi {info.abi} "
                       f"(op {info.op}), not {' or '.join(abis)}")


def _check_scales(where: str, info: Entry, fp8_abi: str, scales,
                  mx: bool = False) -> None:
    """Block scales: each of `scales` (name: (tensor, shape)) is given exactly
    when the entry has the block-FP8 ABI `fp8_abi`; float32, or with `mx`
    (MXFP8 GEMMs) UE8M0 bytes."""
    fp8 = info.abi == fp8_abi
    for name, (tensor, shape) in scales.items():
        if fp8 and tensor is None:
            format_ = f", format {info.format}" if info.format else ""
            what, kind = ("MXFP8", "UE8M0") if mx else ("block-FP8",
                                                         "float32")
            raise _invalid(f"{where}: the entry is {what} (abi {info.abi}"
                           f"{format_}): pass {name}, the {kind} scales "
                           f"{shape} of the {name[:-len('_scale')]}")
        if not fp8 and tensor is not None:
            raise _invalid(f"{where}: {name} is only taken by block-FP8 "
                           f"entries (abi {fp8_abi}); this one's abi is "
                           f"{info.abi}")


def _check_bytes(torch, where: str, tensors) -> None:
    """Each of `tensors` (UE8M0 scale codes) has a 1-byte dtype: torch.uint8,
    torch.float8_e8m0fnu where torch has it, or another (the same bytes)."""
    for name, tensor in tensors.items():
        if tensor.element_size() != 1:
            e8m0 = getattr(torch, "float8_e8m0fnu", None)
            names = f"{torch.uint8}" + (f" or {e8m0}" if e8m0 is not None
                                        else "")
            raise _invalid(f"{where}: {name} is {tensor.dtype}, expected a "
                           f"1-byte dtype ({names}: the UE8M0 scale codes "
                           "of an mxfp8 entry)")


def _float8_e4m3(torch, where: str):
    """torch.float8_e4m3fn, the element of block-FP8 rows and weights."""
    element = getattr(torch, "float8_e4m3fn", None)
    if element is None:
        raise _invalid(f"{where}: this torch has no float8_e4m3fn, the "
                       "element type of a block-FP8 entry")
    return element


def _check_tensors(torch, where: str, tensors, rows, dtypes,
                   first: str = "rows") -> None:
    """Each of `tensors` is a contiguous torch.Tensor on the CUDA device of
    `rows` (called `first`), of dtypes[name] where listed."""
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise _invalid(f"{where}: {name} is a {type(tensor).__name__}, "
                           "not a torch.Tensor")
        if not tensor.is_cuda:
            raise _invalid(f"{where}: {name} is on {tensor.device}, not on a "
                           "CUDA device")
        if tensor.device != rows.device:
            raise _invalid(f"{where}: {name} is on {tensor.device} but "
                           f"{first} is on {rows.device}")
        if not tensor.is_contiguous():
            raise _invalid(f"{where}: {name} is not contiguous")
    for name, tensor in tensors.items():
        if name in dtypes and tensor.dtype != dtypes[name]:
            raise _invalid(f"{where}: {name} is {tensor.dtype}, expected "
                           f"{dtypes[name]}")
