// How fast HBM serves the swap-AB GEMM's weight reads at decode, without
// the GEMM (docs/decode-kernel.md, "What is next"): each of `ctas` CTAs
// reads one work item's weights, 64 rows of K bf16 values, either as the
// GEMM's TMA boxes do (per K step, 128 bytes of each of the 64 rows, rows
// K * 2 bytes apart) or as one contiguous run of the same bytes; `inflight`
// steps of loads are issued before their sum is used, as the GEMM's
// stages keep them in flight. Prints GB/s of each pattern (CUDA-event
// medians of 20 runs, the L2 flushed before each).
//
//   nvcc -O3 -arch=sm_90 bench/stream_pattern.cu -o /tmp/stream_pattern
//   /tmp/stream_pattern [K=2048] [ctas=448]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <vector>

constexpr int kRows = 64, kThreads = 128, kInflight = 4;

// Step s of CTA c: 16 bytes per thread, 8 threads per row, 16 rows per
// pass, 4 passes: the box of 64 rows x 128 bytes at column s * 128 bytes.
__global__ void boxes(const int4 *weights, int k, int4 *sink) {
  const char *base = reinterpret_cast<const char *>(weights) +
                     size_t(blockIdx.x) * kRows * k * 2;
  int steps = k / 64, lane = threadIdx.x % 8, row = threadIdx.x / 8;
  int4 acc = {0, 0, 0, 0};
  for (int s0 = 0; s0 < steps; s0 += kInflight) {
    int4 v[kInflight][4];
#pragma unroll
    for (int i = 0; i < kInflight; ++i)
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        int s = min(s0 + i, steps - 1), r = row + 16 * p;
        v[i][p] = *reinterpret_cast<const int4 *>(base + size_t(r) * k * 2 +
                                                  s * 128 + lane * 16);
      }
#pragma unroll
    for (int i = 0; i < kInflight; ++i)
#pragma unroll
      for (int p = 0; p < 4; ++p)
        acc.x ^= v[i][p].x, acc.y ^= v[i][p].y, acc.z ^= v[i][p].z,
            acc.w ^= v[i][p].w;
  }
  if (acc.x == 0x12345678)
    sink[threadIdx.x] = acc;
}

// The same bytes of CTA c as one contiguous run, 8 KB per step.
__global__ void contiguous(const int4 *weights, int k, int4 *sink) {
  const int4 *base = weights + size_t(blockIdx.x) * kRows * k * 2 / 16;
  int steps = k / 64;
  int4 acc = {0, 0, 0, 0};
  for (int s0 = 0; s0 < steps; s0 += kInflight) {
    int4 v[kInflight][4];
#pragma unroll
    for (int i = 0; i < kInflight; ++i)
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        int s = min(s0 + i, steps - 1);
        v[i][p] = base[size_t(s) * 512 + p * 128 + threadIdx.x];
      }
#pragma unroll
    for (int i = 0; i < kInflight; ++i)
#pragma unroll
      for (int p = 0; p < 4; ++p)
        acc.x ^= v[i][p].x, acc.y ^= v[i][p].y, acc.z ^= v[i][p].z,
            acc.w ^= v[i][p].w;
  }
  if (acc.x == 0x12345678)
    sink[threadIdx.x] = acc;
}

int main(int argc, char **argv) {
  int k = argc > 1 ? atoi(argv[1]) : 2048,
      ctas = argc > 2 ? atoi(argv[2]) : 448;
  size_t bytes = size_t(ctas) * kRows * k * 2, flushBytes = size_t(256) << 20;
  int4 *weights, *sink;
  char *flush;
  cudaMalloc(&weights, bytes);
  cudaMalloc(&sink, 4096);
  cudaMalloc(&flush, flushBytes);
  cudaMemset(weights, 1, bytes);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int pattern = 0; pattern < 2; ++pattern) {
    std::vector<float> ms;
    for (int run = 0; run < 21; ++run) {
      cudaMemsetAsync(flush, run, flushBytes);
      cudaEventRecord(start);
      if (pattern == 0)
        boxes<<<ctas, kThreads>>>(weights, k, sink);
      else
        contiguous<<<ctas, kThreads>>>(weights, k, sink);
      cudaEventRecord(stop);
      cudaEventSynchronize(stop);
      float t;
      cudaEventElapsedTime(&t, start, stop);
      if (run > 0)
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    float median = ms[ms.size() / 2];
    printf("%s K=%d ctas=%d: %.1f MB in %.1f us, %.0f GB/s\n",
           pattern == 0 ? "boxes     " : "contiguous", k, ctas, bytes / 1e6,
           median * 1e3, bytes / (median * 1e6));
  }
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    printf("CUDA error: %s\n", cudaGetErrorString(error));
    return 1;
  }
  return 0;
}
