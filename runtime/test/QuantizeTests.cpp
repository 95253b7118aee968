//===- QuantizeTests.cpp - moeQuantize ------------------------------------===//
//
// Contract §3.8 (quantize.v1): the entries' fields, every argument check of
// moeQuantize (each refused without a driver call), then what a valid call
// hands the (fake) driver: the grid ([1, B] blocks: 32 elements per thread,
// [128, 128] blocks: a CTA per block, both capped at 65535), block, shared
// memory, stream, the exact 21 parameters, and that nothing else is called.
// The entries are those of quantizeBundle() (TestBundles.h).
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "LaunchChecks.h"
#include "TestBundles.h"
#include "TestHarness.h"

#include <cstdlib>

using namespace moe_test;

namespace {

constexpr uint64_t kInput = 0x7f0000210000, kValues = 0x7f0000220000,
                   kScales = 0x7f0000230000;
constexpr int64_t kMax = 2147483647;

FakeGpu &install() {
  FakeGpu &gpu = installFakeDriver();
  for (const char *symbol : {kQuantMx, kQuantAct, kQuantWeights, kQuantAny})
    gpu.wordParams[symbol] = 21;
  return gpu;
}

moeQuantizeArgs args(int64_t batch, int64_t rows, int64_t cols) {
  moeQuantizeArgs a;
  a.input = kInput;
  a.values = kValues;
  a.scales = kScales;
  a.batch = batch;
  a.rows = rows;
  a.cols = cols;
  return a;
}

moeStatus quantize(moeBundle *bundle, const char *entry,
                   const moeQuantizeArgs &a, void *stream = nullptr) {
  return moeQuantize(bundle, entry, &a, stream);
}

/// The 21 parameters: input and values [batch*R, C], scales [batch*R/br,
/// C/bc], each a rank-2 memref descriptor.
std::vector<uint64_t> params(const moeQuantizeArgs &a, int64_t blockRows,
                             int64_t blockCols) {
  std::vector<uint64_t> words;
  pushMemref2D(words, a.input, a.batch * a.rows, a.cols);
  pushMemref2D(words, a.values, a.batch * a.rows, a.cols);
  pushMemref2D(words, a.scales, a.batch * a.rows / blockRows,
               a.cols / blockCols);
  return words;
}

/// After loading, runs moeQuantize(entry, a) and checks that it made exactly
/// one launch, of `symbol` on grid (gridX, 1, 1), block (threads, 1, 1), no
/// shared memory, the stream, with programmatic dependent launch and exactly
/// the 21 parameters; and no driver call but the context lookup.
void checkLaunch(moeBundle *bundle, const char *entry, const moeQuantizeArgs &a,
                 const char *symbol, unsigned gridX, unsigned threads,
                 int64_t blockRows, int64_t blockCols) {
  long first = runAfterLoad(
      bundle, [&](void *stream) { return quantize(bundle, entry, a, stream); },
      "cuCtxGetCurrent cuCtxGetId cuLaunchKernelEx", 1);
  if (first < 0)
    return;
  const FakeLaunch &got = fakeGpu().launches[first];
  checkLaunchShape(got, symbol, gridX, threads, 0, testStream());
  checkWordParams(got, entry, params(a, blockRows, blockCols));
}

} // namespace

TEST(quantizeEntriesParse) {
  moeBundle *bundle = OPEN_VALID(quantizeBundle());
  if (!bundle)
    return;
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.num_entries, 5);
  struct {
    const char *name, *element, *scale;
    int inputBits, blockRows, blockCols, rank;
    int64_t batch, rows, cols, maxRows;
    const char *symbol;
    int threads;
  } expected[] = {
      {"mx", "f8E4M3FN", "e8m0", 16, 1, 32, 2, 1, -1, 4096, kMax, kQuantMx,
       256},
      {"act", "f8E5M2", "f32", 32, 1, 128, 2, 1, -1, -1, 4096, kQuantAct, 128},
      {"weights", "f8E4M3FN", "f32", 16, 128, 128, 3, 8, 256, 512, 256,
       kQuantWeights, 256},
      {"anyw", "f8E4M3FN", "f32", 32, 128, 128, 3, -1, -1, -1, kMax, kQuantAny,
       256}};
  for (int32_t e = 0; e < 4; ++e) {
    moeEntryInfo entry;
    CHECK_EQ(moeBundleGetEntry(bundle, e, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(entry.name), expected[e].name);
    CHECK_EQ(std::string(entry.op), "moe.quantize");
    CHECK_EQ(std::string(entry.abi), "quantize.v1");
    CHECK_EQ(std::string(entry.element), expected[e].element);
    CHECK_EQ(std::string(entry.scale), expected[e].scale);
    CHECK_EQ(entry.input_bits, expected[e].inputBits);
    CHECK_EQ(entry.block_rows, expected[e].blockRows);
    CHECK_EQ(entry.block_cols, expected[e].blockCols);
    CHECK_EQ(entry.rank, expected[e].rank);
    CHECK_EQ(entry.batch, expected[e].batch);
    CHECK_EQ(entry.rows, expected[e].rows);
    CHECK_EQ(entry.cols, expected[e].cols);
    CHECK_EQ(entry.max_rows, expected[e].maxRows);
    CHECK_EQ(entry.num_kernels, 1);
    // The other ABIs' fields are 0 or "".
    CHECK_EQ(std::string(entry.epilogue), "");
    CHECK_EQ(std::string(entry.activation), "");
    CHECK_EQ(std::string(entry.format), "");
    CHECK_EQ(std::string(entry.route), "");
    CHECK_EQ(entry.experts, 0);
    CHECK_EQ(entry.n, 0);
    CHECK_EQ(entry.k, 0);
    CHECK_EQ(entry.top_k, 0);
    CHECK_EQ(entry.hidden, 0);
    CHECK_EQ(entry.offsets_bits, 0);
    moeKernelInfo kernel;
    CHECK_EQ(moeBundleGetKernel(bundle, e, 0, &kernel), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(kernel.symbol), expected[e].symbol);
    CHECK_EQ(kernel.threads, expected[e].threads);
    CHECK_EQ(kernel.smem, 0);
    CHECK_EQ(kernel.rows_min, 0);
    CHECK_EQ(kernel.tile_m, 0);
  }
  // A grouped matmul has no quantize fields.
  moeEntryInfo gemm;
  CHECK_EQ(moeBundleGetEntry(bundle, 4, &gemm), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(gemm.element), "");
  CHECK_EQ(std::string(gemm.scale), "");
  CHECK_EQ(gemm.input_bits, 0);
  CHECK_EQ(gemm.block_rows, 0);
  CHECK_EQ(gemm.block_cols, 0);
  CHECK_EQ(gemm.rank, 0);
  CHECK_EQ(gemm.batch, 0);
  CHECK_EQ(gemm.rows, 0);
  CHECK_EQ(gemm.cols, 0);
  moeBundleClose(bundle);
}

TEST(quantizeLaunchesPerContract) {
  install();
  moeBundle *bundle = OPEN_VALID(quantizeBundle());
  if (!bundle)
    return;
  // mx: [1, 32] blocks, 256 threads: 8192 elements per CTA.
  struct {
    int64_t rows;
    unsigned grid;
  } mxGrids[] = {{1, 1},       {2, 1},          {3, 2},
                 {1000, 500},  {262140, 65535}, // 131070 CTAs, capped
                 {kMax, 65535}};
  for (const auto &g : mxGrids)
    checkLaunch(bundle, "mx", args(1, g.rows, 4096), kQuantMx, g.grid, 256, 1,
                32);
  // E8M0 scales are bytes: any address.
  moeQuantizeArgs a = args(1, 7, 4096);
  a.scales = kScales + 1;
  checkLaunch(bundle, "mx", a, kQuantMx, 4, 256, 1, 32);
  // act: f32 input, 128 threads: 4096 elements per CTA; R up to max_rows.
  checkLaunch(bundle, "act", args(1, 4096, 256), kQuantAct, 256, 128, 1, 128);
  checkLaunch(bundle, "act", args(1, 1, 128), kQuantAct, 1, 128, 1, 128);
  checkLaunch(bundle, "act", args(1, 3, 384), kQuantAct, 1, 128, 1, 128);
  checkLaunch(bundle, "act", args(1, 33, 128), kQuantAct, 2, 128, 1, 128);
  a = args(1, 2, 128);
  a.scales = kScales + 4;
  checkLaunch(bundle, "act", a, kQuantAct, 1, 128, 1, 128);
  // weights: [8, 256, 512] in [128, 128] blocks: 8 * 2 * 4 CTAs; the
  // parameters see [2048, 512], [2048, 512] and [16, 4].
  checkLaunch(bundle, "weights", args(8, 256, 512), kQuantWeights, 64, 256, 128,
              128);
  // anyw: every size dynamic.
  checkLaunch(bundle, "anyw", args(3, 128, 256), kQuantAny, 6, 256, 128, 128);
  checkLaunch(bundle, "anyw", args(1, 384, 128), kQuantAny, 3, 256, 128, 128);
  checkLaunch(bundle, "anyw", args(70000, 128, 128), kQuantAny, 65535, 256, 128,
              128);
  moeBundleClose(bundle);
}

TEST(quantizeWithoutPdl) {
  FakeGpu &gpu = install();
  moeBundle *bundle = openBundle(quantizeBundle());
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  setenv("MOE_RUNTIME_PDL", "0", 1);
  size_t callsBefore = gpu.calls.size();
  CHECK_EQ(quantize(bundle, "weights", args(8, 256, 512)), MOE_STATUS_SUCCESS);
  unsetenv("MOE_RUNTIME_PDL");
  CHECK_EQ(callsSince(callsBefore),
           "cuCtxGetCurrent cuCtxGetId cuLaunchKernel");
  CHECK(!gpu.launches.empty() && !gpu.launches.back().ex);
  // Launch failures name the launch.
  gpu.failLaunchNumber = int(gpu.launches.size());
  CHECK_STATUS(quantize(bundle, "mx", args(1, 2, 4096)), MOE_STATUS_CUDA_ERROR,
               "moeQuantize: cuLaunchKernelEx('moe_quantize_bf16_e4m3_e8m0_"
               "1x32' of entry 'mx', grid (1, 1, 1), block (256, 1, 1), smem "
               "0, programmatic stream serialization) failed");
  moeBundleClose(bundle);
}

TEST(quantizeRejectsNullsAndOtherEntries) {
  install();
  moeBundle *bundle = openBundle(quantizeBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  moeQuantizeArgs a = args(1, 4, 4096);
  CHECK_REJECTED(moeQuantize(nullptr, "mx", &a, nullptr), bad,
                 "moeQuantize: bundle is NULL");
  CHECK_REJECTED(moeQuantize(bundle, nullptr, &a, nullptr), bad,
                 "moeQuantize: entry name is NULL");
  CHECK_REJECTED(moeQuantize(bundle, "mx", nullptr, nullptr), bad,
                 "moeQuantize: args is NULL");
  CHECK_REJECTED(quantize(bundle, "mxfp8", a), MOE_STATUS_NOT_FOUND,
                 "moeQuantize: no entry 'mxfp8' in the bundle (entries: mx, "
                 "act, weights, anyw, experts)");
  CHECK_REJECTED(quantize(bundle, "experts", a), bad,
                 "moeQuantize(experts): the entry is op=moe.grouped_matmul "
                 "abi=grouped_matmul.v3, not op=moe.quantize or "
                 "moe.expert_mlp with abi=quantize.v1");
  // The other calls refuse quantize entries.
  moeGroupedMatmulArgs gemm = {};
  CHECK_REJECTED(moeGroupedMatmul(bundle, "mx", &gemm, nullptr), bad,
                 "moeGroupedMatmul(mx): the entry is op=moe.quantize "
                 "abi=quantize.v1, not op=moe.grouped_matmul or "
                 "moe.expert_mlp");
  moeRouteArgs route = {};
  route.tokens = 1;
  CHECK_REJECTED(moeRoute(bundle, "act", &route, nullptr), bad,
                 "moeRoute(act): the entry is op=moe.quantize "
                 "abi=quantize.v1, not op=moe.route with abi=route.v1");
  moeBundleClose(bundle);
}

TEST(quantizeRejectsBadSizes) {
  install();
  moeBundle *bundle = openBundle(quantizeBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  // batch: 1 for a 2-D input; else at least 1 and the entry's unless -1.
  CHECK_REJECTED(quantize(bundle, "mx", args(0, 4, 4096)), bad,
                 "moeQuantize(mx): batch = 0, but the entry's input is 2-D "
                 "[R, C]: batch must be 1");
  CHECK_REJECTED(quantize(bundle, "act", args(2, 4, 128)), bad,
                 "moeQuantize(act): batch = 2, but the entry's input is 2-D");
  CHECK_REJECTED(quantize(bundle, "weights", args(0, 256, 512)), bad,
                 "moeQuantize(weights): batch = 0 must be at least 1");
  CHECK_REJECTED(quantize(bundle, "anyw", args(-1, 128, 128)), bad,
                 "moeQuantize(anyw): batch = -1 must be at least 1");
  CHECK_REJECTED(quantize(bundle, "weights", args(7, 256, 512)), bad,
                 "moeQuantize(weights): batch = 7 does not match the entry's "
                 "batch = 8");
  // R: 1..max_rows, the entry's unless -1, whole blocks.
  CHECK_REJECTED(quantize(bundle, "mx", args(1, 0, 4096)), bad,
                 "moeQuantize(mx): R = 0 (rows) must be at least 1");
  CHECK_REJECTED(quantize(bundle, "mx", args(1, -3, 4096)), bad,
                 "R = -3 (rows) must be at least 1");
  CHECK_REJECTED(quantize(bundle, "act", args(1, 4097, 128)), bad,
                 "moeQuantize(act): R = 4097 (rows) exceeds the entry's "
                 "max_rows = 4096");
  CHECK_REJECTED(quantize(bundle, "mx", args(1, kMax + 1, 4096)), bad,
                 "R = 2147483648 (rows) exceeds the entry's max_rows = "
                 "2147483647");
  CHECK_REJECTED(quantize(bundle, "weights", args(8, 128, 512)), bad,
                 "moeQuantize(weights): R = 128 (rows) does not match the "
                 "entry's rows = 256");
  CHECK_REJECTED(quantize(bundle, "anyw", args(2, 200, 128)), bad,
                 "moeQuantize(anyw): R = 200 (rows) is not a multiple of the "
                 "block's 128 rows (block [128, 128])");
  CHECK_REJECTED(quantize(bundle, "anyw", args(2, 64, 128)), bad,
                 "R = 64 (rows) is not a multiple of the block's 128 rows");
  // C: at least 1, the entry's unless -1, whole blocks.
  CHECK_REJECTED(quantize(bundle, "act", args(1, 4, 0)), bad,
                 "moeQuantize(act): C = 0 (cols) must be at least 1");
  CHECK_REJECTED(quantize(bundle, "act", args(1, 4, -128)), bad,
                 "C = -128 (cols) must be at least 1");
  CHECK_REJECTED(quantize(bundle, "mx", args(1, 4, 2048)), bad,
                 "moeQuantize(mx): C = 2048 (cols) does not match the entry's "
                 "cols = 4096");
  CHECK_REJECTED(quantize(bundle, "act", args(1, 4, 100)), bad,
                 "moeQuantize(act): C = 100 (cols) is not a multiple of the "
                 "block's 128 columns (block [1, 128])");
  CHECK_REJECTED(quantize(bundle, "act", args(1, 4, 4160)), bad,
                 "C = 4160 (cols) is not a multiple of the block's 128");
  CHECK_REJECTED(quantize(bundle, "anyw", args(1, 128, 192)), bad,
                 "moeQuantize(anyw): C = 192 (cols) is not a multiple of the "
                 "block's 128 columns (block [128, 128])");
  // The input's bytes within int64.
  CHECK_REJECTED(
      quantize(bundle, "anyw", args(int64_t(1) << 40, 128, int64_t(1) << 27)),
      bad,
      "moeQuantize(anyw): batch*R*C*4 (bytes of input) overflows "
      "int64 (batch = 1099511627776, R = 128, C = 134217728)");
  CHECK_REJECTED(
      quantize(bundle, "act", args(1, 4096, int64_t(1) << 51)), bad,
      "moeQuantize(act): batch*R*C*4 (bytes of input) overflows int64");
  CHECK_REJECTED(quantize(bundle, "anyw", args(int64_t(1) << 62, 128, 128)),
                 bad,
                 "batch*R*C*4 (bytes of input) overflows int64 (batch = "
                 "4611686018427387904, R = 128, C = 128)");
  // Sizes are checked before pointers.
  moeQuantizeArgs a = args(1, 0, 4096);
  a.input = 0;
  CHECK_REJECTED(quantize(bundle, "mx", a), bad, "R = 0 (rows)");
  moeBundleClose(bundle);
}

TEST(quantizeRejectsBadPointers) {
  install();
  moeBundle *bundle = openBundle(quantizeBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  moeQuantizeArgs a = args(1, 4, 4096);
  a.input = 0;
  CHECK_REJECTED(quantize(bundle, "mx", a), bad,
                 "moeQuantize(mx): input pointer is NULL");
  a = args(1, 4, 4096);
  a.values = 0;
  CHECK_REJECTED(quantize(bundle, "mx", a), bad,
                 "moeQuantize(mx): values pointer is NULL");
  a = args(1, 4, 4096);
  a.scales = 0;
  CHECK_REJECTED(quantize(bundle, "mx", a), bad,
                 "moeQuantize(mx): scales pointer is NULL");
  // Nulls before alignments.
  a = args(1, 4, 4096);
  a.input = kInput + 8;
  a.scales = 0;
  CHECK_REJECTED(quantize(bundle, "mx", a), bad, "scales pointer is NULL");
  a = args(1, 4, 4096);
  a.input = kInput + 8;
  CHECK_REJECTED(quantize(bundle, "mx", a), bad,
                 "moeQuantize(mx): input pointer 0x7f0000210008 is not "
                 "16-byte aligned (the kernel reads 16-byte vectors)");
  a = args(8, 256, 512);
  a.input = kInput + 2;
  CHECK_REJECTED(quantize(bundle, "weights", a), bad,
                 "input pointer 0x7f0000210002 is not 16-byte aligned");
  a = args(1, 4, 4096);
  a.values = kValues + 8;
  CHECK_REJECTED(quantize(bundle, "mx", a), bad,
                 "moeQuantize(mx): values pointer 0x7f0000220008 is not "
                 "16-byte aligned");
  a = args(1, 4, 128);
  a.values = kValues + 1;
  CHECK_REJECTED(quantize(bundle, "act", a), bad,
                 "values pointer 0x7f0000220001 is not 16-byte aligned");
  a = args(1, 4, 128);
  a.scales = kScales + 2;
  CHECK_REJECTED(quantize(bundle, "act", a), bad,
                 "moeQuantize(act): scales pointer 0x7f0000230002 is not "
                 "4-byte aligned (the entry's scales are f32)");
  a = args(2, 128, 128);
  a.scales = kScales + 1;
  CHECK_REJECTED(quantize(bundle, "anyw", a), bad,
                 "scales pointer 0x7f0000230001 is not 4-byte aligned");
  moeBundleClose(bundle);
}
