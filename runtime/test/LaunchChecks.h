//===- LaunchChecks.h - checks of fake-driver launches ----------*- C++ -*-===//
//
// Shared by the launch tests: refusals that must not touch the driver, the
// words of memref descriptor parameters, and the fields every launch has.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_TEST_LAUNCHCHECKS_H
#define MOE_RUNTIME_TEST_LAUNCHCHECKS_H

#include "FakeDriver.h"
#include "TestHarness.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

/// Expects `call` to fail with `status` and `message`, without having called
/// the driver at all.
#define CHECK_REJECTED(call, status, message)                                  \
  do {                                                                         \
    size_t callsBefore = moe_test::fakeGpu().calls.size();                     \
    CHECK_STATUS(call, status, message);                                       \
    CHECK_EQ(moe_test::callsSince(callsBefore), std::string());                \
  } while (0)

namespace moe_test {

/// Sets MOE_RUNTIME_PDL (unsets it for null) for its lifetime, then puts
/// back what was there.
class PdlEnvironment {
public:
  explicit PdlEnvironment(const char *value) {
    if (const char *old = std::getenv("MOE_RUNTIME_PDL")) {
      hadValue = true;
      oldValue = old;
    }
    set(value);
  }
  ~PdlEnvironment() { set(hadValue ? oldValue.c_str() : nullptr); }
  void set(const char *value) {
    if (value)
      setenv("MOE_RUNTIME_PDL", value, 1);
    else
      unsetenv("MOE_RUNTIME_PDL");
  }

private:
  bool hadValue = false;
  std::string oldValue;
};

/// The stream the launch tests pass: any non-null value, recorded as is.
inline void *testStream() {
  return reinterpret_cast<void *>(uintptr_t(0x5712ea));
}

/// Appends the 5 words of a rank-1 memref descriptor [size].
inline void pushMemref1D(std::vector<uint64_t> &words, uint64_t pointer,
                         int64_t size) {
  for (uint64_t word :
       {pointer, pointer, uint64_t(0), uint64_t(size), uint64_t(1)})
    words.push_back(word);
}

/// Appends the 7 words of a rank-2 memref descriptor [rows, columns].
inline void pushMemref2D(std::vector<uint64_t> &words, uint64_t pointer,
                         int64_t rows, int64_t columns) {
  for (uint64_t word : {pointer, pointer, uint64_t(0), uint64_t(rows),
                        uint64_t(columns), uint64_t(columns), uint64_t(1)})
    words.push_back(word);
}

/// Checks `got`'s symbol, grid (gridX, 1, 1), block (threads, 1, 1), shared
/// memory and stream, that `extra` is NULL and that it is a PDL launch.
inline void checkLaunchShape(const FakeLaunch &got, const char *symbol,
                             unsigned gridX, unsigned threads, unsigned smem,
                             void *stream) {
  CHECK_EQ(got.function, std::string(symbol));
  CHECK_EQ(got.grid[0], gridX);
  CHECK_EQ(got.grid[1], 1u);
  CHECK_EQ(got.grid[2], 1u);
  CHECK_EQ(got.block[0], threads);
  CHECK_EQ(got.block[1], 1u);
  CHECK_EQ(got.block[2], 1u);
  CHECK_EQ(got.smem, smem);
  CHECK_EQ(got.stream, stream);
  CHECK(got.extraIsNull);
  CHECK(isPdlLaunch(got));
}

/// Checks that `got` (a kernel of 8-byte parameters only) took exactly
/// `params`; one check for the count, a failure naming `what` per mismatch.
inline void checkWordParams(const FakeLaunch &got, const std::string &what,
                            const std::vector<uint64_t> &params) {
  CHECK_EQ(got.params.size(), params.size());
  for (size_t i = 0; i < params.size() && i < got.params.size(); ++i)
    if (got.params[i] != params[i])
      fail(__FILE__, __LINE__,
           what + ": parameter " + std::to_string(i) + " is " +
               std::to_string(got.params[i]) + ", expected " +
               std::to_string(params[i]));
}

/// After loading `bundle`, runs `call(testStream())` and checks that it
/// succeeds with exactly the driver calls `calls`, `launches` of them
/// launches. Returns the index in fakeGpu().launches of its first launch, or
/// -1 when their number is off (the launches are then not worth checking).
template <typename Call>
long runAfterLoad(moeBundle *bundle, Call call, const std::string &calls,
                  size_t launches) {
  FakeGpu &gpu = fakeGpu();
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  size_t callsBefore = gpu.calls.size();
  size_t launchesBefore = gpu.launches.size();
  CHECK_EQ(call(testStream()), MOE_STATUS_SUCCESS);
  CHECK_EQ(callsSince(callsBefore), calls);
  CHECK_EQ(gpu.launches.size(), launchesBefore + launches);
  return gpu.launches.size() == launchesBefore + launches ? long(launchesBefore)
                                                          : -1;
}

/// A launch a grouped GEMM call should make.
struct ExpectedGemmLaunch {
  const char *symbol;
  unsigned gridX; // grid (gridX, 1, 1)
  unsigned smem;
  int32_t rowsMin, rowsMax;
  uint32_t tileM, tileN;
  unsigned block = 128; // threads
};

/// The rows and weights of a grouped GEMM as its tensor maps see them.
struct GemmElement {
  int dataType;   // CU_TENSOR_MAP_DATA_TYPE_*
  uint64_t bytes; // per element
  uint32_t boxK;  // elements of a box row: 128 bytes
};
inline constexpr GemmElement kBf16Element = {9, 2, 64};
inline constexpr GemmElement kFp8Element = {0, 1, 128}; // UINT8

/// The parameters after 16 that a grouped GEMM's epilogue adds: the
/// row_scale memref [M], then the bias memref [E, N] (N the weights', also
/// for swiglu).
inline std::vector<uint64_t> epilogueParams(const moeGroupedMatmulArgs &a,
                                            bool rowScale, bool bias) {
  std::vector<uint64_t> words;
  if (rowScale)
    pushMemref1D(words, a.row_scale, a.m);
  if (bias)
    pushMemref2D(words, a.bias, a.experts, a.n);
  return words;
}

/// Runs `entry` with `a` after loading, and checks that exactly the
/// `expected` launches (and their tensor maps) reached the driver, in order,
/// each taking parameters 2..16 of contract §3 (offsets, out, K, rows_min,
/// rows_max) and then exactly `tail`. Returns the index in
/// fakeGpu().launches of the first, or -1 if they were not all made.
inline long checkGemmLaunches(moeBundle *bundle, const char *entry,
                              const moeGroupedMatmulArgs &a,
                              const std::vector<ExpectedGemmLaunch> &expected,
                              bool swiglu, const GemmElement &element,
                              const std::vector<uint64_t> &tail) {
  FakeGpu &gpu = fakeGpu();
  // Only host-side descriptor encoding and launches: no sync, no copies, no
  // allocations, no occupancy or attribute queries (the grids use what the
  // load cached).
  std::string calls = "cuCtxGetCurrent cuCtxGetId";
  for (size_t i = 0; i < expected.size(); ++i)
    calls += " cuTensorMapEncodeTiled cuTensorMapEncodeTiled";
  for (size_t i = 0; i < expected.size(); ++i)
    calls += " cuLaunchKernelEx";
  size_t encodesBefore = 0;
  long first = runAfterLoad(
      bundle,
      [&](void *stream) {
        encodesBefore = gpu.encodes.size();
        return moeGroupedMatmul(bundle, entry, &a, stream);
      },
      calls, expected.size());
  CHECK_EQ(gpu.encodes.size() - encodesBefore, 2 * expected.size());
  if (first < 0 || gpu.encodes.size() - encodesBefore != 2 * expected.size())
    return -1;
  // out has N/2 columns after a swiglu.
  const uint64_t outColumns = uint64_t(swiglu ? a.n / 2 : a.n);
  for (size_t i = 0; i < expected.size(); ++i) {
    const ExpectedGemmLaunch &want = expected[i];
    const FakeLaunch &got = gpu.launches[first + i];
    checkLaunchShape(got, want.symbol, want.gridX, want.block, want.smem,
                     testStream());
    CHECK(got.mapsAligned);
    // Parameters 2-6: the offsets memref; 7-13: the out memref; 14-16.
    const uint64_t words[12] = {
        a.offsets,  a.offsets, 0, uint64_t(a.experts + 1), 1,
        a.out,      a.out,     0, uint64_t(a.m),           outColumns,
        outColumns, 1};
    for (int w = 0; w < 12; ++w)
      CHECK_EQ(got.words[w], words[w]);
    CHECK_EQ(got.ints[0], int32_t(a.k));
    CHECK_EQ(got.ints[1], want.rowsMin);
    CHECK_EQ(got.ints[2], want.rowsMax);
    CHECK_EQ(got.numParams, int(17 + tail.size()));
    CHECK_EQ(got.tail.size(), tail.size());
    for (size_t w = 0; w < tail.size() && w < got.tail.size(); ++w)
      CHECK_EQ(got.tail[w], tail[w]);

    // Its tensor maps: the pair encoded for it (maps before launches).
    int rowsIndex = int(encodesBefore + 2 * i);
    CHECK_EQ(got.mapEncode[0], rowsIndex);
    CHECK_EQ(got.mapEncode[1], rowsIndex + 1);
    const FakeEncode &rows = gpu.encodes[rowsIndex];
    const FakeEncode &weights = gpu.encodes[rowsIndex + 1];
    for (const FakeEncode *map : {&rows, &weights}) {
      CHECK_EQ(map->dataType, element.dataType);
      CHECK_EQ(map->interleave, 0);
      CHECK_EQ(map->swizzle, 3);     // 128 B
      CHECK_EQ(map->oobFill, 0);     // zeros
      CHECK_EQ(map->l2Promotion, 2); // 128 B
      for (unsigned d = 0; d < map->rank; ++d)
        CHECK_EQ(map->elementStrides[d], 1u);
    }
    CHECK_EQ(rows.address, a.rows);
    CHECK_EQ(rows.rank, 2u);
    CHECK_EQ(rows.dims[0], uint64_t(a.k));
    CHECK_EQ(rows.dims[1], uint64_t(a.m));
    CHECK_EQ(rows.strides[0], element.bytes * uint64_t(a.k));
    CHECK_EQ(rows.box[0], element.boxK);
    CHECK_EQ(rows.box[1], want.tileM);
    CHECK_EQ(weights.address, a.weights);
    CHECK_EQ(weights.rank, 3u);
    CHECK_EQ(weights.dims[0], uint64_t(a.k));
    CHECK_EQ(weights.dims[1], uint64_t(a.n));
    CHECK_EQ(weights.dims[2], uint64_t(a.experts));
    CHECK_EQ(weights.strides[0], element.bytes * uint64_t(a.k));
    CHECK_EQ(weights.strides[1], element.bytes * uint64_t(a.n * a.k));
    CHECK_EQ(weights.box[0], element.boxK);
    // A swiglu kernel loads tile_n/2 gate rows, then as many up rows.
    CHECK_EQ(weights.box[1], swiglu ? want.tileN / 2 : want.tileN);
    CHECK_EQ(weights.box[2], 1u);
  }
  return first;
}

} // namespace moe_test

#endif // MOE_RUNTIME_TEST_LAUNCHCHECKS_H
