//===- abi_reference_kernels.cu - grouped_matmul.v3 kernels for tests -----===//
//
// Simple persistent kernels with exactly the parameters, grid and tile
// scheduling of kernel ABI grouped_matmul.v3 (docs/runtime-contract.md §3.1),
// for each epilogue (store, swiglu, row_scale):
// each CTA takes work items blockIdx.x, blockIdx.x + gridDim.x, ... of the
// exact list (row tile of an eligible expert x column tile), so that the
// runtime can be tested on a GPU without the compiler: they read rows and
// weights only through the two by-value TMA descriptors (a wrong dimension,
// stride, box or swizzle gives wrong numbers or a trap, never a silent pass),
// compute out in fp32 with plain FMAs, and __trap() on any ABI parameter they
// can check (memref offsets, sizes and strides, block size, a TMA load that
// never completes). Like every kernel of a version-5 bundle, each CTA first
// executes griddepcontrol.wait, then griddepcontrol.launch_dependents
// (contract §3.6). A swiglu kernel loads, per k step, a box of tile_n/2 gate
// rows and one of tile_n/2 up rows (N/2 rows further) and writes tile_n/2 of
// the N/2 output columns; a row_scale kernel scales row r by row_scale[r]. Not
// fast: a correctness reference.
//
// Build: nvcc -arch=sm_90a -cubin -O2 abi_reference_kernels.cu
//
//===----------------------------------------------------------------------===//

#include <cuda.h>
#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 128;
constexpr int kTileK = 64; // one 128-byte swizzled row per box row
constexpr int kBoxRowBytes = 128;

__device__ uint32_t sharedAddress(const void *pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

__device__ void waitPhase(uint64_t *barrier, uint32_t phase) {
  long long start = clock64();
  while (true) {
    uint32_t done;
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n"
                 "}\n"
                 : "=r"(done)
                 : "r"(sharedAddress(barrier)), "r"(phase)
                 : "memory");
    if (done)
      return;
    if (clock64() - start > (1ll << 32)) // about 2 s: the load never came
      __trap();
  }
}

/// Element (row, k) of a box of 128-byte rows stored with the 128-byte
/// swizzle: 16-byte chunk c of row r lives at chunk c ^ (r % 8).
__device__ float swizzled(const uint8_t *box, int row, int k) {
  int chunk = (k >> 3) ^ (row & 7);
  const __nv_bfloat16 *element = reinterpret_cast<const __nv_bfloat16 *>(
      box + row * kBoxRowBytes + chunk * 16 + (k & 7) * 2);
  return __bfloat162float(*element);
}

enum class Epilogue { Store, SwiGLU, RowScale };

/// N is out's number of columns: the weights' N, or half of it for SwiGLU.
template <int TileM, int TileN, typename Offset, Epilogue Kind>
__device__ void
groupedMatmul(const CUtensorMap *rowsMap, const CUtensorMap *weightsMap,
              const Offset *offsetsAllocated, const Offset *offsets,
              int64_t offsetsOffset, int64_t offsetsSize, int64_t offsetsStride,
              __nv_bfloat16 *outAllocated, __nv_bfloat16 *out,
              int64_t outOffset, int64_t M, int64_t N, int64_t outStride0,
              int64_t outStride1, int32_t K, int32_t rowsMin, int32_t rowsMax,
              const float *scaleAllocated, const float *scale,
              int64_t scaleOffset, int64_t scaleSize, int64_t scaleStride) {
  static_assert(TileN == 64, "one column per thread of 64 (32 for SwiGLU)");
  // Contract §3.6: the runtime launches with programmatic dependent launch,
  // so wait for the previous kernel on the stream (whose output may be our
  // rows, offsets or row_scale) before reading anything, then let the next
  // one start.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  // Output columns of a tile, and threads per row of the tile.
  constexpr int kColumns = Kind == Epilogue::SwiGLU ? TileN / 2 : TileN;
  constexpr int kLanes = kThreads / kColumns;
  static_assert(TileM % kLanes == 0, "rows split over the lanes");
  // The memref expansion of the contract.
  if (offsetsAllocated != offsets || offsetsOffset != 0 || offsetsStride != 1 ||
      outAllocated != out || outOffset != 0 || outStride0 != N ||
      outStride1 != 1 || blockDim.x != kThreads || blockDim.y != 1 ||
      gridDim.y != 1 || gridDim.z != 1 || offsetsSize < 2 || M < 1 || K < 8 ||
      rowsMin < 1 || rowsMin > rowsMax)
    __trap();
  if (Kind == Epilogue::RowScale &&
      (scaleAllocated != scale || scaleOffset != 0 || scaleSize != M ||
       scaleStride != 1))
    __trap();
  const int64_t experts = offsetsSize - 1;

  __shared__ uint64_t barrier;
  __shared__ int64_t tileExpert, tileRow0, tileRowEnd;
  extern __shared__ uint8_t dynamicShared[];
  // The 128-byte swizzle needs 1024-byte aligned boxes.
  uint8_t *boxes = reinterpret_cast<uint8_t *>(
      (reinterpret_cast<uintptr_t>(dynamicShared) + 1023) & ~uintptr_t(1023));
  uint8_t *rowsBox = boxes;
  uint8_t *weightsBox = boxes + TileM * kBoxRowBytes;

  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(
        sharedAddress(&barrier)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  const int64_t columnTiles = (N + kColumns - 1) / kColumns;
  const int column = threadIdx.x % kColumns;
  const int rowLane = threadIdx.x / kColumns; // 0..kLanes-1
  uint32_t phase = 0;
  for (int64_t item = blockIdx.x;; item += gridDim.x) {
    // Which tile of which eligible expert this work item is: the row tiles
    // of the experts whose (clamped) row count lies in [rowsMin, rowsMax], in
    // expert order, each with every column tile.
    if (threadIdx.x == 0) {
      tileExpert = -1;
      const int64_t wanted = item / columnTiles;
      int64_t before = 0;
      int64_t end = min(max(int64_t(offsets[0]), int64_t(0)), M);
      for (int64_t e = 0; e < experts; ++e) {
        int64_t start = end;
        end = min(max(int64_t(offsets[e + 1]), start), M);
        int64_t rows = end - start;
        if (rows < rowsMin || rows > rowsMax)
          continue;
        int64_t tiles = (rows + TileM - 1) / TileM;
        if (wanted < before + tiles) {
          tileExpert = e;
          tileRow0 = start + (wanted - before) * TileM;
          tileRowEnd = end;
          break;
        }
        before += tiles;
      }
    }
    __syncthreads();
    if (tileExpert < 0)
      return; // past the last work item (the grid is one wave at most)
    const int64_t expert = tileExpert, row0 = tileRow0, rowEnd = tileRowEnd;
    const int64_t n0 = (item % columnTiles) * kColumns;

    float accumulators[TileM / kLanes] = {}, up[TileM / kLanes] = {};
    for (int32_t k0 = 0; k0 < K; k0 += kTileK) {
      if (threadIdx.x == 0) {
        uint32_t bytes = (TileM + TileN) * kBoxRowBytes;
        asm volatile(
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                sharedAddress(&barrier)),
            "r"(bytes)
            : "memory");
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile."
            "mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
                sharedAddress(rowsBox)),
            "l"(reinterpret_cast<uint64_t>(rowsMap)), "r"(k0),
            "r"(int32_t(row0)), "r"(sharedAddress(&barrier))
            : "memory");
        // SwiGLU: the gate rows n0.., then the up rows N + n0.. (N is half
        // the weights' rows), each a box of TileN/2 rows.
        for (int half = 0; half < (Kind == Epilogue::SwiGLU ? 2 : 1); ++half)
          asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile."
                       "mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
                       "[%5];" ::"r"(sharedAddress(
                           weightsBox + half * kColumns * kBoxRowBytes)),
                       "l"(reinterpret_cast<uint64_t>(weightsMap)), "r"(k0),
                       "r"(int32_t(n0 + half * N)), "r"(int32_t(expert)),
                       "r"(sharedAddress(&barrier))
                       : "memory");
      }
      waitPhase(&barrier, phase);
      phase ^= 1;
      for (int k = 0; k < kTileK; ++k) {
        float w = swizzled(weightsBox, column, k);
        float u = Kind == Epilogue::SwiGLU
                      ? swizzled(weightsBox, kColumns + column, k)
                      : 0.0f;
        for (int i = 0; i < TileM / kLanes; ++i) {
          float x = swizzled(rowsBox, rowLane + kLanes * i, k);
          accumulators[i] += x * w;
          if (Kind == Epilogue::SwiGLU)
            up[i] += x * u;
        }
      }
      __syncthreads(); // everyone has read the boxes before they are refilled
    }
    int64_t n = n0 + column;
    if (n < N)
      for (int i = 0; i < TileM / kLanes; ++i) {
        int64_t row = row0 + rowLane + kLanes * i;
        if (row >= rowEnd)
          continue;
        float value = accumulators[i];
        if (Kind == Epilogue::SwiGLU)
          value = value / (1.0f + __expf(-value)) * up[i];
        if (Kind == Epilogue::RowScale)
          value *= scale[row];
        out[row * N + n] = __float2bfloat16(value);
      }
  }
}

} // namespace

// The 17 parameters of every kernel.
#define MOE_REFERENCE_PARAMS(OFFSET)                                           \
  const __grid_constant__ CUtensorMap rowsMap,                                 \
      const __grid_constant__ CUtensorMap weightsMap,                          \
      const OFFSET *offsetsAllocated, const OFFSET *offsets,                   \
      int64_t offsetsOffset, int64_t offsetsSize, int64_t offsetsStride,       \
      __nv_bfloat16 *outAllocated, __nv_bfloat16 *out, int64_t outOffset,      \
      int64_t M, int64_t N, int64_t outStride0, int64_t outStride1, int32_t K, \
      int32_t rowsMin, int32_t rowsMax
#define MOE_REFERENCE_ARGS                                                     \
  &rowsMap, &weightsMap, offsetsAllocated, offsets, offsetsOffset,             \
      offsetsSize, offsetsStride, outAllocated, out, outOffset, M, N,          \
      outStride0, outStride1, K, rowsMin, rowsMax

#define MOE_REFERENCE_KERNEL(NAME, TILE_M, OFFSET, KIND)                       \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      NAME(MOE_REFERENCE_PARAMS(OFFSET)) {                                     \
    groupedMatmul<TILE_M, 64, OFFSET, Epilogue::KIND>(                         \
        MOE_REFERENCE_ARGS, nullptr, nullptr, 0, M, 1);                        \
  }

// row_scale kernels take the 5 parameters of a memref<?xf32> more.
#define MOE_REFERENCE_ROW_SCALE_KERNEL(NAME, TILE_M, OFFSET)                   \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      NAME(MOE_REFERENCE_PARAMS(OFFSET), const float *scaleAllocated,          \
           const float *scale, int64_t scaleOffset, int64_t scaleSize,         \
           int64_t scaleStride) {                                              \
    groupedMatmul<TILE_M, 64, OFFSET, Epilogue::RowScale>(                     \
        MOE_REFERENCE_ARGS, scaleAllocated, scale, scaleOffset, scaleSize,     \
        scaleStride);                                                          \
  }

MOE_REFERENCE_KERNEL(reference_16x64x64_off32, 16, int32_t, Store)
MOE_REFERENCE_KERNEL(reference_64x64x64_off32, 64, int32_t, Store)
MOE_REFERENCE_KERNEL(reference_64x64x64_off64, 64, int64_t, Store)
MOE_REFERENCE_KERNEL(reference_swiglu_16x64x64_off32, 16, int32_t, SwiGLU)
MOE_REFERENCE_KERNEL(reference_swiglu_64x64x64_off32, 64, int32_t, SwiGLU)
MOE_REFERENCE_ROW_SCALE_KERNEL(reference_rowscale_16x64x64_off32, 16, int32_t)
MOE_REFERENCE_ROW_SCALE_KERNEL(reference_rowscale_64x64x64_off32, 64, int32_t)
