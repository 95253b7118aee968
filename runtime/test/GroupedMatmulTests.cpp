//===- GroupedMatmulTests.cpp - moeGroupedMatmul checks and launches ------===//
//
// Every argument check of contract §3, then what a valid call hands the
// (fake) driver: tensor maps, persistent grids, blocks, shared memory, the 17
// parameters (22 for row_scale entries) and the stream, and that nothing else
// is called; the same for the swiglu and row_scale epilogues. The fake device
// has 132 multiprocessors holding 1 CTA of a kernel with more than 114 KiB of
// shared memory, else 4: 132 or 528 resident CTAs.
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "GemmArgs.h"
#include "LaunchChecks.h"
#include "TestBundles.h"
#include "TestHarness.h"

using namespace moe_test;

namespace {

constexpr int64_t kMax = 2147483647;

moeGroupedMatmulArgs args(int64_t m, int64_t n, int64_t k, int64_t experts) {
  return gemmArgs(m, n, k, experts);
}

/// Arguments matching entry gate_up (E=8, N=28672, K=4096).
moeGroupedMatmulArgs gateUp(int64_t m) { return args(m, 28672, 4096, 8); }

moeStatus run(moeBundle *bundle, const char *entry,
              const moeGroupedMatmulArgs &a, void *stream = nullptr) {
  return moeGroupedMatmul(bundle, entry, &a, stream);
}

} // namespace

TEST(groupedMatmulRejectsNullsAndUnknownEntries) {
  installFakeDriver();
  moeBundle *bundle = openBundle(validBundle());
  moeGroupedMatmulArgs a = gateUp(64);
  CHECK_REJECTED(moeGroupedMatmul(nullptr, "gate_up", &a, nullptr),
                 MOE_STATUS_INVALID_ARGUMENT,
                 "moeGroupedMatmul: bundle is NULL");
  CHECK_REJECTED(moeGroupedMatmul(bundle, nullptr, &a, nullptr),
                 MOE_STATUS_INVALID_ARGUMENT,
                 "moeGroupedMatmul: entry name is NULL");
  CHECK_REJECTED(moeGroupedMatmul(bundle, "gate_up", nullptr, nullptr),
                 MOE_STATUS_INVALID_ARGUMENT, "moeGroupedMatmul: args is NULL");
  CHECK_REJECTED(run(bundle, "gate", a), MOE_STATUS_NOT_FOUND,
                 "moeGroupedMatmul: no entry 'gate' in the bundle (entries: "
                 "gate_up, down, any)");
  CHECK_REJECTED(run(bundle, "", a), MOE_STATUS_NOT_FOUND, "no entry ''");
  moeBundleClose(bundle);

  // An entry of another op (same ABI) is not a grouped matmul.
  std::string other = validBundle();
  other.replace(other.find("entry down op=moe.grouped_matmul"), 32,
                "entry down op=moe.grouped_swiglu");
  bundle = openBundle(other);
  CHECK(bundle != nullptr);
  CHECK_REJECTED(run(bundle, "down", args(64, 4096, 14336, 8)),
                 MOE_STATUS_INVALID_ARGUMENT,
                 "moeGroupedMatmul(down): the entry is op=moe.grouped_swiglu "
                 "abi=grouped_matmul.v3, not op=moe.grouped_matmul or "
                 "moe.expert_mlp with abi=grouped_matmul.v3");
  moeBundleClose(bundle);
}

TEST(groupedMatmulRejectsBadPointers) {
  installFakeDriver();
  moeBundle *bundle = openBundle(validBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  moeGroupedMatmulArgs a = gateUp(64);
  a.rows = 0;
  CHECK_REJECTED(run(bundle, "gate_up", a), bad,
                 "moeGroupedMatmul(gate_up): rows pointer is NULL");
  a = gateUp(64);
  a.weights = 0;
  CHECK_REJECTED(run(bundle, "gate_up", a), bad, "weights pointer is NULL");
  a = gateUp(64);
  a.offsets = 0;
  CHECK_REJECTED(run(bundle, "gate_up", a), bad, "offsets pointer is NULL");
  a = gateUp(64);
  a.out = 0;
  CHECK_REJECTED(run(bundle, "gate_up", a), bad, "out pointer is NULL");

  a = gateUp(64);
  a.rows = kRows + 8;
  CHECK_REJECTED(run(bundle, "gate_up", a), bad,
                 "moeGroupedMatmul(gate_up): rows pointer 0x7f0000010008 is "
                 "not 16-byte aligned");
  a = gateUp(64);
  a.weights = kWeights + 2;
  CHECK_REJECTED(run(bundle, "gate_up", a), bad,
                 "weights pointer 0x7f0000020002 is not 16-byte aligned");
  a = gateUp(64);
  a.out = kOut + 1;
  CHECK_REJECTED(run(bundle, "gate_up", a), bad,
                 "out pointer 0x7f0000040001 is not 16-byte aligned");
  // The offsets type of the entry decides their alignment.
  a = gateUp(64);
  a.offsets = kOffsets + 2;
  CHECK_REJECTED(run(bundle, "gate_up", a), bad,
                 "offsets pointer 0x7f0000030002 is not 4-byte aligned (the "
                 "entry's offsets are i32)");
  moeGroupedMatmulArgs down = args(64, 4096, 14336, 8);
  down.offsets = kOffsets + 4;
  CHECK_REJECTED(run(bundle, "down", down), bad,
                 "moeGroupedMatmul(down): offsets pointer 0x7f0000030004 is "
                 "not 8-byte aligned (the entry's offsets are i64)");
  // ... which allows 4-byte-aligned i32 offsets.
  a = gateUp(64);
  a.offsets = kOffsets + 4;
  CHECK_EQ(run(bundle, "gate_up", a), MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);
}

TEST(groupedMatmulRejectsBadSizes) {
  installFakeDriver();
  moeBundle *bundle = openBundle(validBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  // Rows.
  CHECK_REJECTED(run(bundle, "gate_up", gateUp(0)), bad,
                 "moeGroupedMatmul(gate_up): M = 0 must be at least 1");
  CHECK_REJECTED(run(bundle, "gate_up", gateUp(-3)), bad,
                 "M = -3 must be at least 1");
  CHECK_REJECTED(run(bundle, "down", args(4097, 4096, 14336, 8)), bad,
                 "moeGroupedMatmul(down): M = 4097 exceeds the entry's "
                 "max_rows = 4096");
  CHECK_REJECTED(run(bundle, "gate_up", gateUp(kMax + 1)), bad,
                 "M = 2147483648 exceeds the entry's max_rows = 2147483647");
  // Static sizes must match the manifest.
  CHECK_REJECTED(run(bundle, "gate_up", args(64, 28673, 4096, 8)), bad,
                 "moeGroupedMatmul(gate_up): N = 28673 does not match the "
                 "entry's n = 28672");
  CHECK_REJECTED(run(bundle, "gate_up", args(64, -1, 4096, 8)), bad,
                 "N = -1 does not match the entry's n = 28672");
  CHECK_REJECTED(run(bundle, "gate_up", args(64, 28672, 4104, 8)), bad,
                 "K = 4104 does not match the entry's k = 4096");
  CHECK_REJECTED(run(bundle, "gate_up", args(64, 28672, 4096, 9)), bad,
                 "E = 9 does not match the entry's experts = 8");
  CHECK_REJECTED(run(bundle, "gate_up", args(64, 28672, 4096, 0)), bad,
                 "E = 0 does not match the entry's experts = 8");
  // Dynamic sizes are checked on their own.
  CHECK_REJECTED(run(bundle, "any", args(64, 0, 64, 4)), bad,
                 "moeGroupedMatmul(any): N = 0 must be at least 1");
  CHECK_REJECTED(run(bundle, "any", args(64, -5, 64, 4)), bad,
                 "N = -5 must be at least 1");
  CHECK_REJECTED(run(bundle, "any", args(64, 64, 100, 4)), bad,
                 "moeGroupedMatmul(any): K = 100 is not a multiple of 8 (TMA "
                 "row pitch must be a multiple of 16 bytes)");
  CHECK_REJECTED(run(bundle, "any", args(64, 64, 4, 4)), bad,
                 "K = 4 is less than 8");
  CHECK_REJECTED(run(bundle, "any", args(64, 64, 0, 4)), bad,
                 "K = 0 is less than 8");
  CHECK_REJECTED(run(bundle, "any", args(64, 64, -8, 4)), bad,
                 "K = -8 is less than 8");
  CHECK_REJECTED(run(bundle, "any", args(64, 64, 64, 0)), bad,
                 "E = 0 must be at least 1");
  CHECK_REJECTED(run(bundle, "any", args(64, 64, 64, -2)), bad,
                 "E = -2 must be at least 1");
  CHECK_REJECTED(run(bundle, "any", args(64, kMax + 1, 64, 4)), bad,
                 "N = 2147483648 exceeds 2147483647");
  CHECK_REJECTED(run(bundle, "any", args(64, 64, kMax + 9, 4)), bad,
                 "K = 2147483656 exceeds 2147483647 (the kernel takes K as "
                 "i32)");
  CHECK_REJECTED(run(bundle, "any", args(64, 64, 64, kMax + 1)), bad,
                 "E = 2147483648 exceeds 2147483647");
  // Byte sizes that overflow int64 (with M, N, K, E < 2^31 only the
  // weights can), and the TMA stride limit.
  CHECK_REJECTED(run(bundle, "any", args(64, 1 << 20, 1 << 20, kMax)), bad,
                 "E*N*K*2 (bytes of weights) overflows int64 (E = "
                 "2147483647, N = 1048576, K = 1048576)");
  CHECK_REJECTED(run(bundle, "any", args(64, 1 << 20, 1 << 19, 1)), bad,
                 "N*K*2 = 1099511627776 bytes per expert reaches the TMA "
                 "stride limit of 2^40");
  moeBundleClose(bundle);
}

namespace {

/// Runs `entry` with `a` after loading, and checks that exactly the expected
/// launches (and their tensor maps) reached the driver, in order. `bias`:
/// the entry takes an expert bias (its kernels must be declared to the fake
/// with 24 or 29 parameters).
void checkLaunches(moeBundle *bundle, const char *entry,
                   const moeGroupedMatmulArgs &a,
                   const std::vector<ExpectedGemmLaunch> &expected,
                   int64_t offsetsBits, const char *epilogue = "store",
                   bool bias = false) {
  const bool swiglu = std::string(epilogue) == "swiglu";
  const bool rowScale = std::string(epilogue) == "row_scale";
  (void)offsetsBits;
  long first =
      checkGemmLaunches(bundle, entry, a, expected, swiglu, kBf16Element,
                        epilogueParams(a, rowScale, bias));
  if (first < 0 || !rowScale || bias)
    return;
  // A 22-parameter kernel's 17..21 (the row_scale memref) are recorded in
  // `scale` too.
  for (size_t i = 0; i < expected.size(); ++i) {
    const FakeLaunch &got = fakeGpu().launches[first + i];
    CHECK_EQ(got.numParams, 22);
    const uint64_t scale[5] = {a.row_scale, a.row_scale, 0, uint64_t(a.m), 1};
    for (int w = 0; w < 5; ++w)
      CHECK_EQ(got.scale[w], scale[w]);
  }
}

} // namespace

TEST(groupedMatmulLaunchesPerContract) {
  installFakeDriver();
  moeBundle *bundle = openBundle(validBundle());
  CHECK(bundle != nullptr);
  const int32_t big = int32_t(kMax);
  // grid.x = min(work, resident), work = slots * ceil(N / tile_n),
  // slots = min(ceil(M / tile_m) + min(E, floor(M / rows_min)),
  //             E * ceil(rows_max / tile_m)).
  // One row in all: no expert can reach rows_min = 17, so only the swap-AB
  // kernel runs: slots = min(1 + 1, 8 * 1) = 2, work = 2 * 448 = 896 > 528.
  checkLaunches(bundle, "gate_up", gateUp(1),
                {{kSwapAB32, 528, 81920, 1, 16, 16, 64}}, 32);
  // Decode, 8 rows over 8 experts: slots = min(1 + 8, 8) = 8, work 3584.
  checkLaunches(bundle, "gate_up", gateUp(8),
                {{kSwapAB32, 528, 81920, 1, 16, 16, 64}}, 32);
  // 64 rows: the normal kernel may see at most floor(64/17) = 3 experts
  // (slots 1 + 3 = 4, work 4 * 112 = 448 > 132); the swap-AB kernel gets
  // most of the work (min(4 + 8, 8 * 1) = 8 slots, 3584 items).
  checkLaunches(bundle, "gate_up", gateUp(64),
                {{kNormal32, 132, 163840, 17, big, 64, 256},
                 {kSwapAB32, 528, 81920, 1, 16, 16, 64}},
                32);
  // Prefill, 131072 rows: work > resident, one wave of resident CTAs
  // (2056 * 112 = 230272 work items for the normal kernel).
  checkLaunches(bundle, "gate_up", gateUp(131072),
                {{kNormal32, 132, 163840, 17, big, 64, 256},
                 {kSwapAB32, 528, 81920, 1, 16, 16, 64}},
                32);
  // The largest M: (2^25 + 8) * 112 work items, in 64 bits.
  checkLaunches(bundle, "gate_up", gateUp(kMax),
                {{kNormal32, 132, 163840, 17, big, 64, 256},
                 {kSwapAB32, 528, 81920, 1, 16, 16, 64}},
                32);
  // i64 offsets, one kernel for every count: 72 slots * 16 > 132.
  checkLaunches(bundle, "down", args(4096, 4096, 14336, 8),
                {{kNormal64, 132, 163840, 1, big, 64, 256}}, 64);
  // Decode with work < resident: M = 1 gives min(1 + 1, 8 * 2^25) = 2 slots,
  // 2 * 16 = 32 work items, so 32 CTAs; M = 4: 5 * 16 = 80.
  checkLaunches(bundle, "down", args(1, 4096, 14336, 8),
                {{kNormal64, 32, 163840, 1, big, 64, 256}}, 64);
  checkLaunches(bundle, "down", args(4, 4096, 14336, 8),
                {{kNormal64, 80, 163840, 1, big, 64, 256}}, 64);
  // M = 8: 9 slots * 16 = 144, just above one wave.
  checkLaunches(bundle, "down", args(8, 4096, 14336, 8),
                {{kNormal64, 132, 163840, 1, big, 64, 256}}, 64);
  // DeepSeek-like E = 256, dynamic sizes: 4 rows per expert on average.
  // rows >= 65: at most floor(1024/65) = 15 experts, 16 + 15 = 31 slots,
  // 496 work items; rows 1..64: min(16 + 256, 256 * 1) = 256 slots, 8192.
  checkLaunches(bundle, "any", args(1024, 4096, 7168, 256),
                {{kNormal64, 132, 200000, 65, big, 64, 256},
                 {kSmall64, 528, 98304, 1, 64, 64, 128}},
                64);
  // E = 256, decode: 8 rows; rows_min = 65 is out of reach, the small kernel
  // has min(1 + 8, 256) = 9 slots * 32 = 288 work items < 528.
  checkLaunches(bundle, "any", args(8, 4096, 7168, 256),
                {{kSmall64, 288, 98304, 1, 64, 64, 128}}, 64);
  // E = 256 with 131072 rows: slots M/64 + E = 2304 (18432 work items) and
  // E = 256 (4096 work items), both above one wave.
  checkLaunches(bundle, "any", args(131072, 2048, 7168, 256),
                {{kNormal64, 132, 200000, 65, big, 64, 256},
                 {kSmall64, 528, 98304, 1, 64, 64, 128}},
                64);
  // N not a multiple of the tile: 3 slots * 1 and 3 slots * ceil(200/128).
  checkLaunches(bundle, "any", args(100, 200, 8, 3),
                {{kNormal64, 3, 200000, 65, big, 64, 256},
                 {kSmall64, 6, 98304, 1, 64, 64, 128}},
                64);
  // N beyond 65535 column tiles (v1's grid.y limit) is fine now.
  checkLaunches(bundle, "any", args(1000, 65535 * 256 + 1, 8, 4),
                {{kNormal64, 132, 200000, 65, big, 64, 256},
                 {kSmall64, 528, 98304, 1, 64, 64, 128}},
                64);
  moeBundleClose(bundle);
}

// A swap-AB form splitting K between two warpgroups (`_k2`, 256 threads,
// contract §1) is launched with its manifest's threads, its residency
// queried with them, and the same work and grid as a one-warpgroup form.
TEST(groupedMatmulLaunchesSplitKSwapAB) {
  FakeGpu &gpu = installFakeDriver();
  const char *symbol = "grouped_matmul_bf16_16x64x64_s8_swapab_k2_off64";
  std::string line =
      kernelLine("down", symbol, "moe_kernels", 1, kMax, 16, 64, 81920, 1);
  line.replace(line.find("threads=128"), 11, "threads=256");
  moeBundle *bundle =
      openBundle("MOEBUNDLE 6\n"
                 "chip sm_90a\n" +
                 imageRecord("moe_kernels", fakeCubin('K')) +
                 "entry down op=moe.grouped_matmul abi=grouped_matmul.v3 "
                 "epilogue=store experts=8 n=4096 k=14336 max_rows=2147483647 "
                 "offsets=i64 bias=none activation=none\n" +
                 line + "end\n");
  CHECK(bundle != nullptr);
  // M = 1: slots = min(1 + 1, 8 * 2^27) = 2, work = 2 * 64 = 128 < 528.
  checkLaunches(bundle, "down", args(1, 4096, 14336, 8),
                {{symbol, 128, 81920, 1, int32_t(kMax), 16, 64, 256}}, 64);
  // M = 64: 4 + 8 = 12 slots, 768 work items: one wave of 528.
  checkLaunches(bundle, "down", args(64, 4096, 14336, 8),
                {{symbol, 528, 81920, 1, int32_t(kMax), 16, 64, 256}}, 64);
  CHECK_EQ(gpu.occupancyQueries.size(), size_t(1));
  CHECK_EQ(gpu.occupancyQueries[0].threads, 256);
  moeBundleClose(bundle);
}

TEST(groupedMatmulGridIn64Bits) {
  FakeGpu &gpu = installFakeDriver();
  // 1-row tiles with rows_min = 1 give the most work items: M = N = 2^31 - 1
  // and E = 2^27 (the largest with E*N*K*2 in int64) make 2^31 - 1 + 2^27
  // slots and about 2^62 work items. 0 bytes of shared memory: 4 * 132
  // resident CTAs.
  std::string tiny =
      "MOEBUNDLE 6\nchip sm_90a\n" + imageRecord("img", fakeCubin('T')) +
      "entry tiny op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store "
      "experts=-1 n=-1 k=-1 max_rows=2147483647 offsets=i32 bias=none "
      "activation=none\n" +
      kernelLine("tiny", "k1", "img", 1, kMax, 1, 1, 0, 0) + "end\n";
  moeBundle *bundle = openBundle(tiny);
  CHECK(bundle != nullptr);
  CHECK_EQ(run(bundle, "tiny", args(kMax, kMax, 8, 1 << 27)),
           MOE_STATUS_SUCCESS);
  CHECK_EQ(run(bundle, "tiny", args(kMax, 1, 8, 1)), MOE_STATUS_SUCCESS);
  // One row, one column: slots = 1 + min(E, 1) = 2, two CTAs.
  CHECK_EQ(run(bundle, "tiny", args(1, 1, 8, kMax)), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.launches.size(), size_t(3));
  if (gpu.launches.size() == 3) {
    CHECK_EQ(gpu.launches[0].grid[0], 528u);
    CHECK_EQ(gpu.launches[1].grid[0], 528u);
    CHECK_EQ(gpu.launches[2].grid[0], 2u);
    for (const FakeLaunch &launch : gpu.launches) {
      CHECK_EQ(launch.grid[1], 1u);
      CHECK_EQ(launch.grid[2], 1u);
    }
  }
  moeBundleClose(bundle);

  // A device holding more than 2^31 - 1 CTAs does not exist; if one did,
  // the call would refuse rather than truncate the grid.
  gpu.smCount = 1 << 30;
  bundle = openBundle(tiny);
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  size_t before = gpu.calls.size();
  CHECK_STATUS(run(bundle, "tiny", args(kMax, 1, 8, kMax)),
               MOE_STATUS_UNSUPPORTED,
               "moeGroupedMatmul(tiny): grid.x = 4294967294 of kernel 'k1' "
               "exceeds 2^31-1");
  CHECK_EQ(callsSince(before), "cuCtxGetCurrent cuCtxGetId");
  // Below the cap it launches: 2^31 - 1 work items, as many CTAs.
  CHECK_EQ(run(bundle, "tiny", args(kMax - 1, 1, 8, 1)), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.launches.size(), size_t(4));
  if (gpu.launches.size() == 4)
    CHECK_EQ(gpu.launches[3].grid[0], unsigned(kMax));
  moeBundleClose(bundle);
}

TEST(groupedMatmulGridPerContext) {
  // Residency is cached per context at load: another device (here: fewer
  // multiprocessors) gets its own grid, and nothing is queried at launch.
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = openBundle(validBundle());
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  gpu.current = fakeContextB();
  gpu.smCount = 78;
  gpu.ctasPerSm[kNormal32] = 2;
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  gpu.smCount = 1000; // not read again
  gpu.ctasPerSm.clear();
  moeGroupedMatmulArgs a = gateUp(131072);
  size_t before = gpu.calls.size();
  CHECK_EQ(moeGroupedMatmul(bundle, "gate_up", &a, nullptr),
           MOE_STATUS_SUCCESS);
  gpu.current = fakeContextA();
  CHECK_EQ(moeGroupedMatmul(bundle, "gate_up", &a, nullptr),
           MOE_STATUS_SUCCESS);
  std::string once = "cuCtxGetCurrent cuCtxGetId cuTensorMapEncodeTiled "
                     "cuTensorMapEncodeTiled cuTensorMapEncodeTiled "
                     "cuTensorMapEncodeTiled cuLaunchKernelEx cuLaunchKernelEx";
  CHECK_EQ(callsSince(before), once + " " + once);
  CHECK_EQ(gpu.launches.size(), size_t(4));
  if (gpu.launches.size() == 4) {
    CHECK_EQ(gpu.launches[0].grid[0], 156u); // 2 * 78
    CHECK_EQ(gpu.launches[1].grid[0], 312u); // 4 * 78
    CHECK_EQ(gpu.launches[2].grid[0], 132u);
    CHECK_EQ(gpu.launches[3].grid[0], 528u);
  }
  moeBundleClose(bundle);
}

TEST(groupedMatmulPassesNullStream) {
  installFakeDriver();
  moeBundle *bundle = openBundle(validBundle());
  moeGroupedMatmulArgs a = gateUp(1);
  CHECK_EQ(moeGroupedMatmul(bundle, "gate_up", &a, nullptr),
           MOE_STATUS_SUCCESS);
  CHECK_EQ(fakeGpu().launches.size(), size_t(1));
  if (!fakeGpu().launches.empty())
    CHECK(fakeGpu().launches[0].stream == nullptr);
  moeBundleClose(bundle);
}

TEST(groupedMatmulLoadsLazily) {
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = openBundle(validBundle());
  moeGroupedMatmulArgs a = gateUp(64);
  CHECK_EQ(moeGroupedMatmul(bundle, "gate_up", &a, nullptr),
           MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.liveModules, 2);
  CHECK_EQ(gpu.launches.size(), size_t(2));
  CHECK_CONTAINS(callsSince(0), "cuInit");
  // The second call finds the loaded state.
  size_t before = gpu.calls.size();
  CHECK_EQ(moeGroupedMatmul(bundle, "gate_up", &a, nullptr),
           MOE_STATUS_SUCCESS);
  CHECK_EQ(callsSince(before),
           "cuCtxGetCurrent cuCtxGetId cuTensorMapEncodeTiled "
           "cuTensorMapEncodeTiled cuTensorMapEncodeTiled "
           "cuTensorMapEncodeTiled cuLaunchKernelEx cuLaunchKernelEx");
  // The first call's load queried the residency of the 5 kernel records;
  // the second queried nothing.
  CHECK_EQ(gpu.occupancyQueries.size(), size_t(5));
  moeBundleClose(bundle);
  CHECK_EQ(gpu.liveModules, 0);
}

TEST(groupedMatmulReportsDriverFailures) {
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = openBundle(validBundle());
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  // A descriptor that does not encode launches nothing.
  gpu.encodeResult = cu::kErrorInvalidValue;
  CHECK_STATUS(run(bundle, "gate_up", gateUp(131072)), MOE_STATUS_CUDA_ERROR,
               "moeGroupedMatmul: cuTensorMapEncodeTiled(rows of kernel "
               "'grouped_matmul_bf16_64x256x64_s4_off32' of entry 'gate_up') "
               "failed: CUDA_ERROR_INVALID_VALUE (fake driver error)");
  CHECK_EQ(gpu.launches.size(), size_t(0));
  // A failed second launch says that the first one was issued.
  gpu.encodeResult = cu::kSuccess;
  gpu.failLaunchNumber = 1;
  CHECK_STATUS(run(bundle, "gate_up", gateUp(131072)), MOE_STATUS_CUDA_ERROR,
               "moeGroupedMatmul: cuLaunchKernelEx("
               "'grouped_matmul_bf16_16x64x64_s4_swapab_off32' of entry "
               "'gate_up', grid (528, 1, 1), block (128, 1, 1), smem 81920, "
               "programmatic stream serialization; 1 of 2 launches already "
               "issued) failed: "
               "CUDA_ERROR_INVALID_VALUE");
  // Unknown CUresults are shown as numbers.
  gpu.failLaunchNumber = 2;
  gpu.launchResult = 719;
  CHECK_STATUS(run(bundle, "gate_up", gateUp(1)), MOE_STATUS_CUDA_ERROR,
               "failed: CUresult 719");
  moeBundleClose(bundle);
}

namespace {

/// Arguments matching entry mlp_down (E=8, N=4096, K=14336), with routing
/// weights.
moeGroupedMatmulArgs mlpDown(int64_t m) {
  moeGroupedMatmulArgs a = args(m, 4096, 14336, 8);
  a.row_scale = kScale;
  return a;
}

/// The fake's row_scale kernels take 22 parameters.
void declareRowScaleKernels(FakeGpu &gpu) {
  gpu.numParams[kDown32] = 22;
  gpu.numParams[kDown64] = 22;
}

} // namespace

TEST(groupedMatmulRunsExpertMlpEntries) {
  // op=moe.expert_mlp entries launch like op=moe.grouped_matmul ones.
  FakeGpu &gpu = installFakeDriver();
  declareRowScaleKernels(gpu);
  moeBundle *bundle = openBundle(mlpBundle());
  CHECK(bundle != nullptr);
  CHECK_EQ(run(bundle, "mlp_gate_up", gateUp(64)), MOE_STATUS_SUCCESS);
  CHECK_EQ(run(bundle, "mlp_down", mlpDown(64)), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.launches.size(), size_t(3));
  moeBundleClose(bundle);
}

TEST(groupedMatmulRejectsBadRowScale) {
  installFakeDriver();
  moeBundle *bundle = openBundle(mlpBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  // A row_scale entry needs a non-null, 4-byte aligned f32 pointer.
  moeGroupedMatmulArgs a = mlpDown(64);
  a.row_scale = 0;
  CHECK_REJECTED(run(bundle, "mlp_down", a), bad,
                 "moeGroupedMatmul(mlp_down): row_scale pointer is NULL "
                 "(row_scale entries take the f32 routing weight of each "
                 "row)");
  a.row_scale = kScale + 2;
  CHECK_REJECTED(run(bundle, "mlp_down", a), bad,
                 "moeGroupedMatmul(mlp_down): row_scale pointer "
                 "0x7f0000050002 is not 4-byte aligned (row_scale entries "
                 "take the f32 routing weight of each row)");
  a.row_scale = kScale + 1;
  CHECK_REJECTED(run(bundle, "dyn_down", a), bad,
                 "moeGroupedMatmul(dyn_down): row_scale pointer "
                 "0x7f0000050001 is not 4-byte aligned");
  // The other pointers are checked first.
  a = mlpDown(64);
  a.row_scale = 0;
  a.out = 0;
  CHECK_REJECTED(run(bundle, "mlp_down", a), bad, "out pointer is NULL");
  a = mlpDown(64);
  a.row_scale = kScale + 2;
  a.rows = kRows + 8;
  CHECK_REJECTED(run(bundle, "mlp_down", a), bad,
                 "rows pointer 0x7f0000010008 is not 16-byte aligned");
  // f32 needs 4-byte alignment only.
  a = mlpDown(64);
  a.row_scale = kScale + 4;
  CHECK_EQ(run(bundle, "mlp_down", a), MOE_STATUS_SUCCESS);

  // The other epilogues take no row_scale.
  moeGroupedMatmulArgs gate = gateUp(64);
  gate.row_scale = kScale;
  CHECK_REJECTED(run(bundle, "mlp_gate_up", gate), bad,
                 "moeGroupedMatmul(mlp_gate_up): row_scale = 0x7f0000050000, "
                 "but row_scale is only taken by row_scale entries (this "
                 "one's epilogue is swiglu): it must be 0");
  moeBundleClose(bundle);
  bundle = openBundle(validBundle());
  CHECK_REJECTED(run(bundle, "gate_up", gate), bad,
                 "moeGroupedMatmul(gate_up): row_scale = 0x7f0000050000, but "
                 "row_scale is only taken by row_scale entries (this one's "
                 "epilogue is store): it must be 0");
  gate.row_scale = 4; // even a small value is not "none"
  CHECK_REJECTED(run(bundle, "gate_up", gate), bad,
                 "row_scale = 0x4, but row_scale is only taken");
  moeBundleClose(bundle);
}

TEST(groupedMatmulRejectsOddSwiGLU) {
  installFakeDriver();
  moeBundle *bundle = openBundle(mlpBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  CHECK_REJECTED(run(bundle, "dyn_gate_up", args(64, 7, 64, 4)), bad,
                 "moeGroupedMatmul(dyn_gate_up): N = 7 is odd: a swiglu "
                 "entry's weights hold N/2 gate rows then N/2 up rows (N "
                 "must be even and at least 2; out has N/2 columns)");
  CHECK_REJECTED(run(bundle, "dyn_gate_up", args(64, 1, 64, 4)), bad,
                 "N = 1 is odd");
  CHECK_REJECTED(run(bundle, "dyn_gate_up", args(64, 0, 64, 4)), bad,
                 "N = 0 must be at least 1");
  CHECK_REJECTED(run(bundle, "dyn_gate_up", args(64, kMax, 64, 4)), bad,
                 "N = 2147483647 is odd");
  // Static N: the entry's n (even: the reader checks it) comes first.
  CHECK_REJECTED(run(bundle, "mlp_gate_up", args(64, 28671, 4096, 8)), bad,
                 "N = 28671 does not match the entry's n = 28672");
  // 2 is the smallest N: one output column.
  CHECK_EQ(run(bundle, "dyn_gate_up", args(64, 2, 64, 4)), MOE_STATUS_SUCCESS);
  // Odd N is fine for the other epilogues.
  moeGroupedMatmulArgs down = args(64, 7, 64, 4);
  down.row_scale = kScale;
  CHECK_EQ(run(bundle, "dyn_down", down), MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);
}

TEST(groupedMatmulLaunchesSwiGLU) {
  installFakeDriver();
  moeBundle *bundle = openBundle(mlpBundle());
  CHECK(bundle != nullptr);
  const int32_t big = int32_t(kMax);
  // The grid is a store's: work = slots * ceil(N / tile_n), the number
  // of (tile_n/2)-column tiles of the N/2 output columns. The weights box
  // has tile_n/2 rows (checkLaunches), out is [M, N/2].
  // 64 rows, N = 28672: as gate_up in groupedMatmulLaunchesPerContract.
  checkLaunches(bundle, "mlp_gate_up", gateUp(64),
                {{kGateUp32, 132, 163840, 17, big, 64, 256},
                 {kGateUpSwapAB32, 528, 81920, 1, 16, 16, 64}},
                32, "swiglu");
  checkLaunches(bundle, "mlp_gate_up", gateUp(1),
                {{kGateUpSwapAB32, 528, 81920, 1, 16, 16, 64}}, 32, "swiglu");
  // 8 rows over 4 experts, tile 64x128: 1 + 4 = 5 slots; N = 256: 128
  // output columns in 2 tiles of 64, 10 work items.
  checkLaunches(bundle, "dyn_gate_up", args(8, 256, 64, 4),
                {{kGateUp64, 10, 98304, 1, big, 64, 128}}, 64, "swiglu");
  // N = 258: 129 output columns, ceil(129 / 64) = ceil(258 / 128) = 3.
  checkLaunches(bundle, "dyn_gate_up", args(8, 258, 64, 4),
                {{kGateUp64, 15, 98304, 1, big, 64, 128}}, 64, "swiglu");
  // N = 2: one output column, one column tile.
  checkLaunches(bundle, "dyn_gate_up", args(8, 2, 64, 4),
                {{kGateUp64, 5, 98304, 1, big, 64, 128}}, 64, "swiglu");
  moeBundleClose(bundle);
}

TEST(groupedMatmulLaunchesRowScale) {
  FakeGpu &gpu = installFakeDriver();
  declareRowScaleKernels(gpu);
  moeBundle *bundle = openBundle(mlpBundle());
  CHECK(bundle != nullptr);
  const int32_t big = int32_t(kMax);
  // 22 parameters: 17..21 are the row_scale memref (pointer, pointer, 0, M,
  // 1); the weights box and out are those of a store (checkLaunches).
  // 64 rows over 8 experts: 1 + 8 = 9 slots * 16 column tiles > 132.
  checkLaunches(bundle, "mlp_down", mlpDown(64),
                {{kDown32, 132, 163840, 1, big, 64, 256}}, 32, "row_scale");
  // One row: 2 slots * 16 = 32 CTAs.
  checkLaunches(bundle, "mlp_down", mlpDown(1),
                {{kDown32, 32, 163840, 1, big, 64, 256}}, 32, "row_scale");
  moeGroupedMatmulArgs a = args(100, 200, 8, 3);
  a.row_scale = kScale + 12;
  // 2 + 3 = 5 slots * ceil(200 / 128) = 10.
  checkLaunches(bundle, "dyn_down", a, {{kDown64, 10, 98304, 1, big, 64, 128}},
                64, "row_scale");
  a.m = kMax;
  checkLaunches(bundle, "dyn_down", a, {{kDown64, 528, 98304, 1, big, 64, 128}},
                64, "row_scale");
  moeBundleClose(bundle);
}

namespace {

/// The fake's bias kernels take 24 parameters, 29 with a row_scale.
void declareBiasKernels(FakeGpu &gpu) {
  gpu.numParams[kBiasStore] = 24;
  gpu.numParams[kBiasSwiGLU] = 24;
  gpu.numParams[kBiasScale] = 29;
}

/// Arguments of entry bstore (E=8, N=256, K=128) with its f32 bias.
moeGroupedMatmulArgs biasStore(int64_t m) {
  moeGroupedMatmulArgs a = args(m, 256, 128, 8);
  a.bias = kBias;
  return a;
}

} // namespace

TEST(groupedMatmulLaunchesBias) {
  FakeGpu &gpu = installFakeDriver();
  declareBiasKernels(gpu);
  moeBundle *bundle = openBundle(biasBundle());
  CHECK(bundle != nullptr);
  const int32_t big = int32_t(kMax);
  // 24 parameters: 17..23 are the bias memref (pointer, pointer, 0, E, N,
  // N, 1). 64 rows over 8 experts: 9 slots * 2 column tiles.
  checkLaunches(bundle, "bstore", biasStore(64),
                {{kBiasStore, 18, 98304, 1, big, 64, 128}}, 32, "store", true);
  // swiglu: the bias has the weights' N columns (gate, then up), not N/2;
  // a bf16 bias needs 2-byte alignment only. 8 rows over 4 experts: 5
  // slots * ceil(256 / 128).
  moeGroupedMatmulArgs a = args(8, 256, 64, 4);
  a.bias = kBias + 2;
  checkLaunches(bundle, "bswiglu", a,
                {{kBiasSwiGLU, 10, 98304, 1, big, 64, 128}}, 64, "swiglu",
                true);
  // row_scale and bias: 29 parameters, the row_scale memref first.
  a = args(100, 200, 8, 3);
  a.row_scale = kScale + 12;
  a.bias = kBias + 4;
  checkLaunches(bundle, "bscale", a, {{kBiasScale, 10, 98304, 1, big, 64, 128}},
                32, "row_scale", true);
  moeBundleClose(bundle);
}

TEST(groupedMatmulRejectsBadBias) {
  installFakeDriver();
  moeBundle *bundle = openBundle(biasBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  // Required by bias entries, aligned to its element size.
  moeGroupedMatmulArgs a = biasStore(64);
  a.bias = 0;
  CHECK_REJECTED(run(bundle, "bstore", a), bad,
                 "moeGroupedMatmul(bstore): bias pointer is NULL (the entry "
                 "has bias=f32: [E, N])");
  a.bias = kBias + 2;
  CHECK_REJECTED(run(bundle, "bstore", a), bad,
                 "moeGroupedMatmul(bstore): bias pointer 0x7f0000060002 is "
                 "not 4-byte aligned (the entry's bias is f32)");
  moeGroupedMatmulArgs swiglu = args(8, 256, 64, 4);
  CHECK_REJECTED(run(bundle, "bswiglu", swiglu), bad,
                 "moeGroupedMatmul(bswiglu): bias pointer is NULL (the entry "
                 "has bias=bf16: [E, N])");
  swiglu.bias = kBias + 1;
  CHECK_REJECTED(run(bundle, "bswiglu", swiglu), bad,
                 "moeGroupedMatmul(bswiglu): bias pointer 0x7f0000060001 is "
                 "not 2-byte aligned (the entry's bias is bf16)");
  // The other pointers, then row_scale, are checked first.
  a = biasStore(64);
  a.bias = 0;
  a.offsets = 0;
  CHECK_REJECTED(run(bundle, "bstore", a), bad, "offsets pointer is NULL");
  moeGroupedMatmulArgs scaled = args(64, 64, 64, 4);
  CHECK_REJECTED(run(bundle, "bscale", scaled), bad,
                 "moeGroupedMatmul(bscale): row_scale pointer is NULL");
  scaled.row_scale = kScale;
  CHECK_REJECTED(run(bundle, "bscale", scaled), bad,
                 "moeGroupedMatmul(bscale): bias pointer is NULL");
  // E*N*4 bytes of an f32 bias beyond int64 (before the weights' bytes).
  scaled.bias = kBias;
  scaled.n = kMax;
  scaled.experts = kMax;
  CHECK_REJECTED(run(bundle, "bscale", scaled), bad,
                 "moeGroupedMatmul(bscale): E*N*4 (bytes of bias) overflows "
                 "int64 (E = 2147483647, N = 2147483647)");
  moeBundleClose(bundle);

  // Entries with bias=none take none, however small the value.
  bundle = openBundle(mlpBundle());
  moeGroupedMatmulArgs plain = gateUp(64);
  plain.bias = kBias;
  CHECK_REJECTED(run(bundle, "mlp_gate_up", plain), bad,
                 "moeGroupedMatmul(mlp_gate_up): bias = 0x7f0000060000, but "
                 "the entry has bias=none (its kernels take no bias): it must "
                 "be 0");
  plain.bias = 2;
  CHECK_REJECTED(run(bundle, "mlp_gate_up", plain), bad,
                 "bias = 0x2, but the entry has bias=none");
  moeBundleClose(bundle);
}
