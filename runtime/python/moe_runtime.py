"""Thin ctypes wrapper of libmoe_runtime (runtime/include/moe_runtime.h).

    from moe_runtime import Bundle
    bundle = Bundle("layer.moebundle")        # parse + validate, no GPU needed
    print(bundle.chip, [entry.name for entry in bundle.entries])
    out = bundle.grouped_matmul("gate_up", rows, weights, offsets)  # torch
    y = bundle.expert_mlp("experts", rows, offsets, w13, w2, row_scale=weights)

The library is found through $MOE_RUNTIME_LIB, else next to this file, else
in <repo>/build*/lib/. torch is imported only by grouped_matmul and
expert_mlp (after the checks that need no tensor), so the module serves
introspection on machines without it.
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
                ("num_kernels", ctypes.c_int32), ("epilogue", ctypes.c_char_p)]


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
                ("row_scale", ctypes.c_uint64)]


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
    name: str
    op: str
    abi: str
    experts: int  # -1: dynamic
    n: int
    k: int
    max_rows: int
    offsets_bits: int  # 32 or 64
    kernels: Tuple[Kernel, ...]
    #: "store", "swiglu" (out has n/2 columns) or "row_scale" (takes the
    #: routing weight of each row).
    epilogue: str


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
                entry.offsets_bits, tuple(kernels), entry.epilogue.decode()))
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
                       row_scale=None):
        """out[r] = rows[r] @ weights[e].T for offsets[e] <= r < offsets[e+1],
        on torch's current stream of the tensors' device, followed by the
        entry's epilogue: "store" as is; "swiglu" (weights [E, N, K] hold N/2
        gate rows, then N/2 up rows) out[r] = silu(gate) * up, N/2 columns;
        "row_scale" out[r] *= row_scale[r]. rows: bf16 [M, K], weights: bf16
        [E, N, K], offsets: int32/int64 (as the entry says) [E + 1], out: bf16
        [M, N] ([M, N/2] for swiglu) or None (a new torch.empty: rows no
        expert owns are left uninitialised), row_scale: float32, M elements,
        for row_scale entries only. All CUDA, contiguous, one device.
        Returns out; raises MoERuntimeError."""
        handle = self._live_handle()
        info = self.entry(entry)
        where = f"grouped_matmul({entry})"
        if info.epilogue == "row_scale" and row_scale is None:
            raise _invalid(f"{where}: the entry's epilogue is row_scale: pass "
                           "row_scale, the float32 routing weight of each "
                           "row")
        if info.epilogue != "row_scale" and row_scale is not None:
            raise _invalid(f"{where}: row_scale is only taken by row_scale "
                           f"entries (this one's epilogue is {info.epilogue})")
        import torch

        tensors = {"rows": rows, "weights": weights, "offsets": offsets}
        if out is not None:
            tensors["out"] = out
        if row_scale is not None:
            tensors["row_scale"] = row_scale
        offsets_dtype = torch.int32 if info.offsets_bits == 32 else torch.int64
        _check_tensors(torch, where, tensors, rows,
                       {"rows": torch.bfloat16, "weights": torch.bfloat16,
                        "offsets": offsets_dtype, "out": torch.bfloat16,
                        "row_scale": torch.float32})
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
        if out is None:
            out = torch.empty((m, columns), dtype=torch.bfloat16,
                              device=rows.device)
        elif tuple(out.shape) != (m, columns):
            raise _invalid(f"{where}: out is {tuple(out.shape)}, expected "
                           f"({m}, {columns})")
        if row_scale is not None and row_scale.numel() != m:
            raise _invalid(f"{where}: row_scale has {row_scale.numel()} "
                           f"elements, expected M = {m}")
        args = _GroupedMatmulArgs(rows.data_ptr(), weights.data_ptr(),
                                  offsets.data_ptr(), out.data_ptr(),
                                  m, n, k, experts,
                                  0 if row_scale is None
                                  else row_scale.data_ptr())
        with torch.cuda.device(rows.device):
            stream = torch.cuda.current_stream(rows.device).cuda_stream
            _check(_library().moeGroupedMatmul(
                handle, entry.encode(), ctypes.byref(args),
                ctypes.c_void_p(stream)))
        return out

    def expert_mlp(self, name: str, rows, offsets, w13, w2, row_scale=None,
                   out=None, workspace=None):
        """The expert MLP compiled from a moe.expert_mlp op called `name`:
        workspace = silu(rows @ gate^T) * (rows @ up^T) by entry
        `<name>_gate_up` (epilogue swiglu; w13: bf16 [E, N13, K], N13/2 gate
        rows then N13/2 up rows per expert), then out = workspace @ w2[e]^T
        by entry `<name>_down` (w2: bf16 [E, N, N13/2]), times row_scale[r]
        (float32, M elements) when given, which that entry must then take
        (epilogue row_scale; else it must be store). workspace: bf16
        [M, N13/2], allocated when None; out: bf16 [M, N] or None. Same
        offsets, stream and requirements as grouped_matmul. Returns out;
        raises MoERuntimeError."""
        self._live_handle()
        where = f"expert_mlp({name})"
        gate_up = self.entry(f"{name}_gate_up")
        down = self.entry(f"{name}_down")
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
        self.grouped_matmul(gate_up.name, rows, w13, offsets, out=workspace)
        return self.grouped_matmul(down.name, workspace, w2, offsets, out=out,
                                   row_scale=row_scale)


def _check_tensors(torch, where: str, tensors, rows, dtypes) -> None:
    """Each of `tensors` is a contiguous torch.Tensor on rows' CUDA device,
    of dtypes[name] where listed."""
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise _invalid(f"{where}: {name} is a {type(tensor).__name__}, "
                           "not a torch.Tensor")
        if not tensor.is_cuda:
            raise _invalid(f"{where}: {name} is on {tensor.device}, not on a "
                           "CUDA device")
        if tensor.device != rows.device:
            raise _invalid(f"{where}: {name} is on {tensor.device} but rows "
                           f"is on {rows.device}")
        if not tensor.is_contiguous():
            raise _invalid(f"{where}: {name} is not contiguous")
    for name, tensor in tensors.items():
        if name in dtypes and tensor.dtype != dtypes[name]:
            raise _invalid(f"{where}: {name} is {tensor.dtype}, expected "
                           f"{dtypes[name]}")
