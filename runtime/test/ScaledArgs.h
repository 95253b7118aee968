//===- ScaledArgs.h - arguments of the FP8 GEMM launch tests ----*- C++ -*-===//
//
// Shared by Fp8Tests.cpp (block FP8) and Mxfp8Tests.cpp: the same argument
// struct, only the entries' formats differ.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_TEST_SCALEDARGS_H
#define MOE_RUNTIME_TEST_SCALEDARGS_H

#include "moe_runtime.h"

#include <cstdint>
#include <cstring>

namespace moe_test {

/// The device pointers the FP8 launch tests pass (any distinct values).
constexpr uint64_t kRows = 0x7f0000010000, kWeights = 0x7f0000020000,
                   kOffsets = 0x7f0000030000, kOut = 0x7f0000040000,
                   kScale = 0x7f0000050000, kBias = 0x7f0000060000,
                   kRowsScale = 0x7f0000070000, kWeightsScale = 0x7f0000080000,
                   kOutScale = 0x7f0000090000;

/// FP8 (block or MXFP8) GEMM arguments: every pointer set, both scales, no
/// row_scale or bias.
inline moeGroupedMatmulArgs scaledArgs(int64_t m, int64_t n, int64_t k,
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
  a.rows_scale = kRowsScale;
  a.weights_scale = kWeightsScale;
  return a;
}

} // namespace moe_test

#endif // MOE_RUNTIME_TEST_SCALEDARGS_H
