//===- GemmArgs.h - arguments of the grouped GEMM launch tests --*- C++ -*-===//
//
// Shared by GroupedMatmulTests.cpp, ClusterTests.cpp, Fp8Tests.cpp (block
// FP8) and Mxfp8Tests.cpp: the same argument struct and device pointers.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_TEST_GEMMARGS_H
#define MOE_RUNTIME_TEST_GEMMARGS_H

#include "moe_runtime.h"

#include <cstdint>
#include <cstring>

namespace moe_test {

/// The device pointers the launch tests pass (any distinct values).
constexpr uint64_t kRows = 0x7f0000010000, kWeights = 0x7f0000020000,
                   kOffsets = 0x7f0000030000, kOut = 0x7f0000040000,
                   kScale = 0x7f0000050000, kBias = 0x7f0000060000,
                   kRowsScale = 0x7f0000070000, kWeightsScale = 0x7f0000080000,
                   kOutScale = 0x7f0000090000;

/// bf16 GEMM arguments: rows, weights, offsets and out set, no row_scale,
/// bias or scales.
inline moeGroupedMatmulArgs gemmArgs(int64_t m, int64_t n, int64_t k,
                                     int64_t experts) {
  moeGroupedMatmulArgs a;
  std::memset(&a, 0, sizeof(a));
  a.rows = kRows;
  a.weights = kWeights;
  a.offsets = kOffsets;
  a.out = kOut;
  a.m = m;
  a.n = n;
  a.k = k;
  a.experts = experts;
  return a;
}

/// FP8 (block or MXFP8) GEMM arguments: gemmArgs and both scales.
inline moeGroupedMatmulArgs scaledArgs(int64_t m, int64_t n, int64_t k,
                                       int64_t experts) {
  moeGroupedMatmulArgs a = gemmArgs(m, n, k, experts);
  a.rows_scale = kRowsScale;
  a.weights_scale = kWeightsScale;
  return a;
}

} // namespace moe_test

#endif // MOE_RUNTIME_TEST_GEMMARGS_H
