#!/usr/bin/env python3
"""Launch build/grouped_gemm_sm90.cubin (from grouped_gemm_sm90.mlir) on an sm_90 GPU
and check it against a float32 torch reference, expert by expert.

Needs: an H100/H200, torch with CUDA, cuda-python (cuda.bindings.driver).
    python3 launch.py                 # run all routings
    python3 launch.py --ptx           # JIT the PTX instead of loading the cubin
    python3 launch.py --dry-run       # no GPU/torch: print cases, grids, ABI, and
                                      # simulate the device tile scheduler in Python

Kernel ABI (see NOTES.md), 15 parameters, all 8 bytes except the last:
    0  CUtensorMap* for A (device memory, 64-byte aligned)
    1  CUtensorMap* for B
    2..6   offsets memref<?xi32>: allocated ptr, aligned ptr, offset, size (=E+1), stride (=1)
    7..13  out memref<?x?xbf16>:  allocated ptr, aligned ptr, offset, size0 (=M),
                                  size1 (=N), stride0 (=N), stride1 (=1)
    14 K (u32)
grid = (ceil(M/64) + E, ceil(N/128), 1), block = (128, 1, 1), dynamic smem = 49152 B.
"""
import argparse
import ctypes
import math
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL_NAME = b"grouped_gemm_bf16_sm90"
BM, BN, BK = 64, 128, 64
DYN_SMEM = 49152  # 2 stages x (64x64 + 128x64) bf16


# ----------------------------------------------------------------------------
# Test cases (pure Python)
# ----------------------------------------------------------------------------
def make_cases(seed=0):
    rng = random.Random(seed)
    cases = []
    # name, rows per expert, N, K
    cases.append(("uniform", [96] * 8, 256, 512))                 # tiles start at unaligned rows
    cases.append(("all-rows-to-one-expert", [0, 0, 0, 300, 0, 0, 0, 0], 256, 256))
    cases.append(("empty-experts", [0, 70, 0, 0, 1, 129, 0, 64], 128, 128))
    cases.append(("one-row-total", [0, 0, 1, 0], 128, 64))
    cases.append(("last-expert-empty", [64, 64, 0], 128, 192))
    # skewed random routing, N not a multiple of 128, K not a multiple of 64 (TMA zero fill)
    E = 16
    counts = [0] * E
    for _ in range(1000):
        counts[min(int(rng.expovariate(0.35)), E - 1)] += 1
    cases.append(("skewed-random/N=192/K=200", counts, 192, 200))
    cases.append(("long-K", [65, 3], 384, 4096))
    # 131072 rows with M*N > 2^31 output elements: 32-bit row*N offsets
    # would wrap (the class of illegal-memory-access bugs vLLM and SGLang
    # shipped).
    cases.append(("131072-rows/M*N>2^31", [16384] * 8, 16640, 64))
    return cases


def offsets_of(counts):
    offs = [0]
    for c in counts:
        offs.append(offs[-1] + c)
    return offs


def grid_of(M, E, N):
    return (max(1, (M + BM - 1) // BM + E), (N + BN - 1) // BN, 1)


def simulate_scheduler(offs, grid_x):
    """Mirror of the device code: returns {slot: (expert, row0, rows_here)}."""
    E = len(offs) - 1
    out = {}
    for slot in range(grid_x):
        before, found_e, found_t = 0, -1, 0
        for e in range(E):
            tiles = (offs[e + 1] - offs[e] + 63) // 64
            if found_e < 0 and slot < before + tiles:
                found_e, found_t = e, slot - before
            before += tiles
        if found_e >= 0:
            row0 = offs[found_e] + 64 * found_t
            out[slot] = (found_e, row0, min(offs[found_e + 1] - row0, 64))
    return out


def check_scheduler(counts):
    offs = offsets_of(counts)
    M, E = offs[-1], len(counts)
    gx = grid_of(M, E, BN)[0]
    tiles = simulate_scheduler(offs, gx)
    written = [0] * M
    for e, row0, n in tiles.values():
        assert n >= 1 and offs[e] <= row0 and row0 + n <= offs[e + 1], (e, row0, n)
        for r in range(row0, row0 + n):
            written[r] += 1
    assert all(w == 1 for w in written), "a row is written 0 or >1 times"
    return len(tiles), gx


def kernel_arg_values(tmapA_ptr, tmapB_ptr, off_ptr, E, out_ptr, M, N, ldo, K):
    """(value, ctype) in .entry parameter order."""
    u64 = ctypes.c_uint64
    return [
        (tmapA_ptr, u64), (tmapB_ptr, u64),
        (off_ptr, u64), (off_ptr, u64), (0, u64), (E + 1, u64), (1, u64),
        (out_ptr, u64), (out_ptr, u64), (0, u64), (M, u64), (N, u64), (ldo, u64), (1, u64),
        (K, ctypes.c_uint32),
    ]


def dry_run():
    for name, counts, N, K in make_cases():
        offs = offsets_of(counts)
        M, E = offs[-1], len(counts)
        used, gx = check_scheduler(counts)
        g = grid_of(M, E, N)
        print(f"{name:28s} E={E:2d} M={M:5d} N={N:4d} K={K:5d} grid={g} tiles-used={used}/{gx} offsets={offs}")
    args = kernel_arg_values(0xA000, 0xB000, 0xC000, 8, 0xD000, 768, 256, 256, 512)
    print("param order:", [f"{v:#x}:{t.__name__}" for v, t in args])
    print("scheduler simulation OK")


# ----------------------------------------------------------------------------
# GPU path
# ----------------------------------------------------------------------------
def main_gpu(opts):
    import torch
    try:
        from cuda.bindings import driver as cu
    except ImportError:  # older cuda-python
        from cuda import cuda as cu

    def ok(res, what):
        if isinstance(res, tuple):
            err, rest = res[0], res[1:]
        else:
            err, rest = res, ()
        if err != cu.CUresult.CUDA_SUCCESS:
            name = cu.cuGetErrorName(err)[1]
            raise RuntimeError(f"{what} failed: {err} ({name})")
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else rest

    dev = torch.device("cuda")
    cap = torch.cuda.get_device_capability()
    print(f"device: {torch.cuda.get_device_name()} sm_{cap[0]}{cap[1]}")
    if cap != (9, 0):
        print("WARNING: the cubin is sm_90a; it only runs on compute capability 9.0")
    torch.zeros(1, device=dev)                      # make torch create + bind the primary context
    ok(cu.cuInit(0), "cuInit")
    ctx = ok(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is None or int(ctx) == 0:
        cudev = ok(cu.cuDeviceGet(torch.cuda.current_device()), "cuDeviceGet")
        ctx = ok(cu.cuDevicePrimaryCtxRetain(cudev), "cuDevicePrimaryCtxRetain")
        ok(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    # --- module ---
    module = None
    if not opts.ptx:
        try:
            with open(opts.cubin, "rb") as f:
                module = ok(cu.cuModuleLoadData(f.read()), "cuModuleLoadData(cubin)")
            print(f"loaded cubin {opts.cubin}")
        except (OSError, RuntimeError) as e:
            print(f"cubin not usable ({e}); falling back to PTX JIT")
    if module is None:
        with open(opts.ptx_file, "rb") as f:
            module = ok(cu.cuModuleLoadData(f.read() + b"\0"), "cuModuleLoadData(ptx)")
        print(f"JIT-compiled {opts.ptx_file}")
    fn = ok(cu.cuModuleGetFunction(module, opts.kernel.encode()), "cuModuleGetFunction")
    FA = cu.CUfunction_attribute
    ok(cu.cuFuncSetAttribute(fn, FA.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, opts.dynamic_smem),
       "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
    static_smem = ok(cu.cuFuncGetAttribute(FA.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn), "cuFuncGetAttribute")
    nregs = ok(cu.cuFuncGetAttribute(FA.CU_FUNC_ATTRIBUTE_NUM_REGS, fn), "cuFuncGetAttribute")
    print(f"kernel: {nregs} regs, static smem {static_smem} B, dynamic smem {opts.dynamic_smem} B")

    def encode_bf16(ptr, dims, strides_bytes, box):
        """dims/box innermost-first; strides_bytes has rank-1 entries (dims 1..rank-1)."""
        rank = len(dims)
        tmap = ok(cu.cuTensorMapEncodeTiled(
            cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, ptr,
            [cu.cuuint64_t(d) for d in dims], [cu.cuuint64_t(s) for s in strides_bytes],
            [cu.cuuint32_t(b) for b in box], [cu.cuuint32_t(1)] * rank,
            cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),   # NONE = fill zeros
            f"cuTensorMapEncodeTiled(dims={dims}, box={box})")
        return ctypes.string_at(int(tmap.getPtr()), 128)

    stream_t = torch.cuda.current_stream()
    stream = cu.CUstream(stream_t.cuda_stream)
    torch.manual_seed(0)
    passed = failed = 0

    for name, counts, N, K in make_cases():
        offs = offsets_of(counts)
        M, E = offs[-1], len(counts)
        assert K % 8 == 0, "TMA needs 16-byte aligned row strides"
        A = torch.randn(M, K, device=dev).to(torch.bfloat16).contiguous()
        B = (torch.randn(E, N, K, device=dev) / math.sqrt(K)).to(torch.bfloat16).contiguous()
        off_t = torch.tensor(offs, dtype=torch.int32, device=dev)
        PAD = 64                                    # guard rows after out[M-1]: must stay NaN
        out_buf = torch.full((M + PAD, N), float("nan"), dtype=torch.bfloat16, device=dev)
        out = out_buf[:M]

        # TMA descriptors, stored in device memory (the kernel takes pointers to them)
        dA = encode_bf16(A.data_ptr(), [K, M], [K * 2], [BK, BM])
        dB = encode_bf16(B.data_ptr(), [K, N, E], [K * 2, N * K * 2], [BK, BN, 1])
        desc = torch.empty(256, dtype=torch.uint8, device=dev)
        desc.copy_(torch.frombuffer(bytearray(dA + dB), dtype=torch.uint8))
        assert desc.data_ptr() % 64 == 0

        vals = kernel_arg_values(desc.data_ptr(), desc.data_ptr() + 128, off_t.data_ptr(), E,
                                 out.data_ptr(), M, N, out.stride(0), K)
        cvals = [t(v) for v, t in vals]
        argv = (ctypes.c_void_p * len(cvals))(*[ctypes.addressof(c) for c in cvals])
        gx, gy, gz = grid_of(M, E, N)

        ok(cu.cuLaunchKernel(fn, gx, gy, gz, 128, 1, 1, opts.dynamic_smem, stream, ctypes.addressof(argv), 0),
           "cuLaunchKernel")
        ev = torch.cuda.Event()
        ev.record(stream_t)
        t0 = time.time()
        while not ev.query():                      # watchdog: a wrong mbarrier phase hangs forever
            if time.time() - t0 > opts.timeout:
                print(f"FAIL {name}: kernel did not finish in {opts.timeout}s (mbarrier hang?)")
                print(f"{passed} passed, {failed + 1} failed")
                sys.stdout.flush()
                os._exit(2)
            time.sleep(0.001)
        try:
            ok(cu.cuCtxSynchronize(), "kernel execution")
        except RuntimeError as e:                  # sticky error: context is dead, stop here
            print(f"FAIL {name}: {e}")
            print(f"{passed} passed, {failed + 1} failed")
            sys.exit(1)

        problems = []
        if not torch.isnan(out_buf[M:].float()).all():
            problems.append("wrote past row M")
        for e in range(E):
            lo, hi = offs[e], offs[e + 1]
            if hi == lo:
                continue
            ref = A[lo:hi].float() @ B[e].float().t()
            g = out[lo:hi].float()
            if not torch.isfinite(g).all():
                problems.append(f"expert {e}: {int((~torch.isfinite(g)).sum())} unwritten/NaN values")
                continue
            err = (g - ref).abs()
            tol = 2e-2 + 1e-2 * ref.abs()
            if (err > tol).any():
                problems.append(f"expert {e}: max|err|={err.max().item():.4g} "
                                f"({int((err > tol).sum())} bad of {err.numel()})")
        tag = f"{name} (E={E} M={M} N={N} K={K} grid={gx}x{gy})"
        if problems:
            failed += 1
            print(f"FAIL {tag}: " + "; ".join(problems[:6]))
        else:
            passed += 1
            print(f"PASS {tag}")

    print(f"{passed} passed, {failed} failed")
    if opts.bench and failed == 0:
        bench(fn, encode_bf16, stream, stream_t, dev, opts)
    return 0 if failed == 0 else 1


def bench(fn, encode_bf16, stream, stream_t, dev, opts):
    """Median time of the kernel and of torch._grouped_mm on the same data."""
    import torch
    from cuda.bindings import driver as cu

    def median_ms(launch, reps=30):
        for _ in range(3):
            launch()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(stream_t); launch(); b.record(stream_t)
            b.synchronize()
            times.append(a.elapsed_time(b))
        return sorted(times)[len(times) // 2]

    shapes = [("mixtral gate-up", 8, 28672, 4096, 2048), ("deepseek-v3 gate-up", 256, 4096, 7168, 256),
              ("mixtral gate-up decode", 8, 28672, 4096, 8), ("deepseek-v3 gate-up decode", 256, 4096, 7168, 4)]
    print("\nshape                      rows/expert   ours ms  TFLOP/s  GB/s(w) | grouped_mm ms  TFLOP/s | ratio")
    for name, E, N, K, rows in shapes:
        M = E * rows
        A = torch.randn(M, K, device=dev).to(torch.bfloat16)
        B = (torch.randn(E, N, K, device=dev) / math.sqrt(K)).to(torch.bfloat16)
        offs = [rows * e for e in range(E + 1)]
        off_t = torch.tensor(offs, dtype=torch.int32, device=dev)
        ends = off_t[1:].contiguous()
        out = torch.empty(M, N, dtype=torch.bfloat16, device=dev)
        dA = encode_bf16(A.data_ptr(), [K, M], [K * 2], [BK, BM])
        dB = encode_bf16(B.data_ptr(), [K, N, E], [K * 2, N * K * 2], [BK, BN, 1])
        desc = torch.empty(256, dtype=torch.uint8, device=dev)
        desc.copy_(torch.frombuffer(bytearray(dA + dB), dtype=torch.uint8))
        vals = kernel_arg_values(desc.data_ptr(), desc.data_ptr() + 128, off_t.data_ptr(), E,
                                 out.data_ptr(), M, N, out.stride(0), K)
        cvals = [t(v) for v, t in vals]
        argv = (ctypes.c_void_p * len(cvals))(*[ctypes.addressof(c) for c in cvals])
        gx, gy, gz = grid_of(M, E, N)
        ours = median_ms(lambda: cu.cuLaunchKernel(fn, gx, gy, gz, 128, 1, 1, opts.dynamic_smem, stream,
                                                   ctypes.addressof(argv), 0))
        Bt = B.transpose(1, 2)
        peer = median_ms(lambda: torch._grouped_mm(A, Bt, offs=ends))
        ref = torch._grouped_mm(A, Bt, offs=ends)
        err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
        flops = 2.0 * M * N * K
        wbytes = E * N * K * 2
        print(f"{name:26s} {rows:6d}   {ours:9.3f} {flops / ours / 1e9:8.1f} {wbytes / ours / 1e6:8.0f} |"
              f" {peer:9.3f} {flops / peer / 1e9:8.1f} | {peer / ours:5.2f}  (rel err vs grouped_mm {err:.1e})")
        del A, B, out
        torch.cuda.empty_cache()


def set_tile(tile_m, tile_n):
    """Token rows and output columns per tile (swap-AB kernels: 8..64 x 64)."""
    global BM, BN
    BM, BN = tile_m, tile_n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cubin", default=os.path.join(HERE, "build", "grouped_gemm_sm90.cubin"))
    ap.add_argument("--ptx-file", default=os.path.join(HERE, "build", "grouped_gemm_sm90.ptx"))
    ap.add_argument("--ptx", action="store_true", help="load the PTX (driver JIT) instead of the cubin")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per launch before declaring a hang")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: print cases and simulate the scheduler")
    ap.add_argument("--kernel", default=KERNEL_NAME.decode(), help="kernel symbol in the cubin")
    ap.add_argument("--dynamic-smem", type=int, default=DYN_SMEM, help="bytes of dynamic shared memory")
    ap.add_argument("--tile-m", type=int, default=64, help="token rows per tile (the kernel's tile-m)")
    ap.add_argument("--tile-n", type=int, default=128, help="output columns per tile (the kernel's tile-n)")
    ap.add_argument("--bench", action="store_true", help="after the checks, time it beside torch._grouped_mm")
    opts = ap.parse_args()
    set_tile(opts.tile_m, opts.tile_n)
    if opts.dry_run:
        dry_run()
        return 0
    return main_gpu(opts)


if __name__ == "__main__":
    sys.exit(main())
