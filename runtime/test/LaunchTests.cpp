//===- LaunchTests.cpp - moeLaunch runs an entry by its launch plan -------===//
//
// What moeLaunch hands the (fake) driver for a plan (docs/launch-plans.md):
// the steps in order, a step whose `when` is 0 skipped, a layer's steps
// launching its parts' kernels; grids with `resident` from the load;
// memref descriptors, scalars and tensor maps (bf16 or 1-byte elements,
// 128-byte swizzle and L2 promotion) as parameters; workspace slices at
// their aligned offsets; and the calls it refuses before touching the
// driver. The fake device has 132 multiprocessors holding 1 CTA of a kernel
// with more than 114 KiB of shared memory, else 4: 132 or 528 resident CTAs.
// Expected grids are the contract's formulas (§3.1) worked out by hand.
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "LaunchChecks.h"
#include "PlanBundles.h"
#include "TestBundles.h"
#include "TestHarness.h"

using namespace moe_test;

namespace {

/// Device addresses far apart (2^40 bytes), so that no buffer of a call
/// overlaps another.
constexpr uint64_t kTb = uint64_t(1) << 40;
constexpr uint64_t kA = 1 * kTb, kB = 2 * kTb, kC = 3 * kTb, kD = 4 * kTb,
                   kE = 5 * kTb, kF = 6 * kTb, kWorkspace = 16 * kTb;
constexpr int64_t kMax = 2147483647;

/// Runs `entry` with `sizes` and `args` (and the workspace) on a loaded
/// bundle and checks that exactly the driver calls `calls` were made.
/// Returns the launches it made.
std::vector<FakeLaunch> run(moeBundle *bundle, const char *entry,
                            std::vector<int64_t> sizes,
                            std::vector<uint64_t> args,
                            const std::string &calls, uint64_t workspace = 0,
                            uint64_t bytes = 0, void *stream = testStream()) {
  FakeGpu &gpu = fakeGpu();
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  const size_t callsBefore = gpu.calls.size(),
               launchesBefore = gpu.launches.size();
  moeLaunchArgs a = {sizes.data(),
                     int32_t(sizes.size()),
                     int32_t(args.size()),
                     args.data(),
                     workspace,
                     bytes};
  moeStatus status = moeLaunch(bundle, entry, &a, stream);
  CHECK_EQ(status, MOE_STATUS_SUCCESS);
  if (status != MOE_STATUS_SUCCESS)
    fail(__FILE__, __LINE__, moeLastErrorMessage());
  CHECK_EQ(callsSince(callsBefore), calls);
  return std::vector<FakeLaunch>(gpu.launches.begin() + long(launchesBefore),
                                 gpu.launches.end());
}

/// `count` times `call`, after `prefix`.
std::string calls(const std::string &prefix, const char *call, int count) {
  std::string joined = prefix;
  for (int i = 0; i < count; ++i)
    joined += std::string(joined.empty() ? "" : " ") + call;
  return joined;
}

/// The driver calls of a loaded bundle's call: the context lookup, the
/// tensor maps, the launches.
std::string callsOf(int maps, int launches) {
  return calls(
      calls("cuCtxGetCurrent cuCtxGetId", "cuTensorMapEncodeTiled", maps),
      "cuLaunchKernelEx", launches);
}

/// "symbol:gridX" of each launch, joined by ' '.
std::string grids(const std::vector<FakeLaunch> &launches) {
  std::string joined;
  for (const FakeLaunch &launch : launches)
    joined += (joined.empty() ? "" : " ") + launch.function + ":" +
              std::to_string(launch.grid[0]);
  return joined;
}

/// A tensor map the fake encoded.
struct ExpectedMap {
  int dataType; // 9 bf16, 0 UINT8
  uint64_t address;
  std::vector<uint64_t> dims, strides;
  std::vector<uint32_t> box;
};

/// Checks tensor map `index` of `launch` (0 rows, 1 weights: the first two
/// parameters of a GEMM kernel) against `want`, and the fixed encoding.
void checkMap(const FakeLaunch &launch, int index, const ExpectedMap &want) {
  const std::vector<FakeEncode> &encodes = fakeGpu().encodes;
  const int at = launch.mapEncode[index];
  CHECK(at >= 0 && size_t(at) < encodes.size());
  if (at < 0 || size_t(at) >= encodes.size())
    return;
  const FakeEncode &map = encodes[size_t(at)];
  CHECK_EQ(map.dataType, want.dataType);
  CHECK_EQ(map.address, want.address);
  CHECK_EQ(map.rank, unsigned(want.dims.size()));
  for (size_t d = 0; d < want.dims.size(); ++d) {
    CHECK_EQ(map.dims[d], want.dims[d]);
    CHECK_EQ(map.box[d], want.box[d]);
    CHECK_EQ(map.elementStrides[d], 1u);
  }
  for (size_t d = 0; d < want.strides.size(); ++d)
    CHECK_EQ(map.strides[d], want.strides[d]);
  CHECK_EQ(map.interleave, 0);  // none
  CHECK_EQ(map.swizzle, 3);     // 128 B
  CHECK_EQ(map.l2Promotion, 2); // 128 B
  CHECK_EQ(map.oobFill, 0);     // zeros
}

/// Checks the 17 parameters of a grouped GEMM launch after its maps: the
/// offsets memref [E + 1], the out memref [M, columns], K, rows_min,
/// rows_max.
void checkGemmWords(const FakeLaunch &launch, uint64_t offsets, int64_t experts,
                    uint64_t out, int64_t m, int64_t columns, int32_t k,
                    int32_t rowsMin, int32_t rowsMax) {
  std::vector<uint64_t> want = memref1D(offsets, experts + 1);
  for (uint64_t word : memref2D(out, m, columns))
    want.push_back(word);
  CHECK(std::vector<uint64_t>(launch.words, launch.words + 12) == want);
  CHECK_EQ(launch.ints[0], k);
  CHECK_EQ(launch.ints[1], rowsMin);
  CHECK_EQ(launch.ints[2], rowsMax);
}

} // namespace

TEST(launchGemmPlan) {
  installFakeDriver();
  moeBundle *bundle = OPEN_VALID(gemmPlanBundle());
  if (!bundle)
    return;
  // gate_up, M = 64: kernel 0 (64x256, rows >= 17: at most floor(64/17) =
  // 3 experts) has 1 + 3 slots x 112 column tiles = 448 work items, above
  // its 132 resident CTAs; kernel 1 (swap-AB 16x64) min(4 + 8, 8) = 8 slots
  // x 448 tiles, above 528. Two maps each, encoded before any launch.
  std::vector<FakeLaunch> l =
      run(bundle, "gate_up", {64}, {kA, kB, kC, kD}, callsOf(4, 2));
  CHECK_EQ(grids(l), std::string(kNormal32) + ":132 " + kSwapAB32 + ":528");
  if (l.size() == 2) {
    checkLaunchShape(l[0], kNormal32, 132, 128, 163840, testStream());
    checkLaunchShape(l[1], kSwapAB32, 528, 128, 81920, testStream());
    checkGemmWords(l[0], kC, 8, kD, 64, 28672, 4096, 17, int32_t(kMax));
    checkGemmWords(l[1], kC, 8, kD, 64, 28672, 4096, 1, 16);
    // rows [M, K] and weights [E, N, K], innermost first, byte strides;
    // boxes of 64 bf16 by tile_m and tile_n.
    checkMap(l[0], 0, {9, kA, {4096, 64}, {8192}, {64, 64}});
    checkMap(l[0], 1,
             {9, kB, {4096, 28672, 8}, {8192, 234881024}, {64, 256, 1}});
    checkMap(l[1], 0, {9, kA, {4096, 64}, {8192}, {64, 16}});
    checkMap(l[1], 1,
             {9, kB, {4096, 28672, 8}, {8192, 234881024}, {64, 64, 1}});
    CHECK_EQ(l[0].mapEncode[0], 0);
    CHECK_EQ(l[1].mapEncode[1], 3);
  }
  // M = 1: no expert reaches 17 rows, kernel 0's step is skipped; kernel 1
  // has 1 + 1 slots x 448 tiles, 896 > 528.
  l = run(bundle, "gate_up", {1}, {kA, kB, kC, kD}, callsOf(2, 1));
  CHECK_EQ(grids(l), std::string(kSwapAB32) + ":528");
  // down (i64 offsets), M = 1 and 4: 2 and 5 slots x 16 tiles, below 132.
  l = run(bundle, "down", {1}, {kA, kB, kC, kD}, callsOf(2, 1));
  CHECK_EQ(grids(l), std::string(kNormal64) + ":32");
  if (l.size() == 1)
    checkGemmWords(l[0], kC, 8, kD, 1, 4096, 14336, 1, int32_t(kMax));
  l = run(bundle, "down", {4}, {kA, kB, kC, kD}, callsOf(2, 1));
  CHECK_EQ(grids(l), std::string(kNormal64) + ":80");
  // any: M = 100, N = 200, K = 8, E = 3: kernel 0 (rows >= 65) 2 + 1 = 3
  // slots x 1 tile; kernel 1 (64x128, rows 1..64) min(2 + 3, 3) slots x 2.
  l = run(bundle, "any", {100, 200, 8, 3}, {kA, kB, kC, kD}, callsOf(4, 2));
  CHECK_EQ(grids(l), std::string(kNormal64) + ":3 " + kSmall64 + ":6");
  if (l.size() == 2) {
    checkMap(l[1], 0, {9, kA, {8, 100}, {16}, {64, 64}});
    checkMap(l[1], 1, {9, kB, {8, 200, 3}, {16, 3200}, {64, 128, 1}});
    checkGemmWords(l[1], kC, 3, kD, 100, 200, 8, 1, 64);
  }
  // A null stream is passed on as such.
  l = run(bundle, "down", {4}, {kA, kB, kC, kD}, callsOf(2, 1), 0, 0, nullptr);
  CHECK(l.size() == 1 && l[0].stream == nullptr);
  moeBundleClose(bundle);
}

TEST(launchOneByteTensorMapsAndScales) {
  // fp8Bundle()'s gemm (E=8 N=256 K=512) with a plan: e4m3 rows and
  // weights (UINT8 maps, boxes of 128 bytes), then the f32 scale memrefs
  // rows_scale [M, 4] and weights_scale [8, 2, 4]: 33 parameters.
  FakeGpu &gpu = installFakeDriver();
  gpu.numParams[kFp8SwapAB] = 33;
  gpu.numParams[kFp8Normal] = 33;
  GemmOperands o = gemmOperands("256", "512", "8");
  o.type = "e4m3";
  o.extra = ";mem:rows_scale[M,4];mem:weights_scale[8,2,4]";
  const std::string plan =
      "size gemm M min=1 max=2147483647\n"
      "arg gemm rows e4m3 in align=16 dims=M,512\n"
      "arg gemm weights e4m3 in align=16 dims=8,256,512\n"
      "arg gemm offsets i32 in align=4 dims=9\n"
      "arg gemm out bf16 out align=16 dims=M,256\n"
      "arg gemm rows_scale f32 in align=4 dims=M,4\n"
      "arg gemm weights_scale f32 in align=4 dims=8,2,4\n" +
      gemmLaunch("gemm", "", {0, 1, 16, 16, 64}, o) +
      gemmLaunch("gemm", "", {1, 17, kMax, 128, 128}, o);
  const std::string bytes = withRecordsAfter(
      fp8Bundle(), std::string("kernel gemm ") + kFp8Normal, plan);
  moeBundle *bundle = OPEN_VALID(bytes);
  if (!bundle)
    return;
  // M = 64: the swap-AB kernel min(4 + 8, 8) = 8 slots x 4 column tiles;
  // the 128x128 one 1 + 3 slots x 2.
  std::vector<FakeLaunch> l =
      run(bundle, "gemm", {64}, {kA, kB, kC, kD, kE, kF}, callsOf(4, 2));
  CHECK_EQ(grids(l), std::string(kFp8SwapAB) + ":32 " + kFp8Normal + ":8");
  if (l.size() == 2) {
    checkLaunchShape(l[1], kFp8Normal, 8, 256, 147456, testStream());
    checkMap(l[0], 0, {0, kA, {512, 64}, {512}, {128, 16}});
    checkMap(l[1], 1, {0, kB, {512, 256, 8}, {512, 131072}, {128, 128, 1}});
    std::vector<uint64_t> tail = memref2D(kE, 64, 4);
    for (uint64_t word : {kF, kF, uint64_t(0), uint64_t(8), uint64_t(2),
                          uint64_t(4), uint64_t(8), uint64_t(4), uint64_t(1)})
      tail.push_back(word);
    CHECK(l[0].tail == tail);
    CHECK(l[1].tail == tail);
  }
  moeBundleClose(bundle);
  // e5m2 and e8m0 maps are of 1-byte elements too.
  for (const char *type : {"e5m2", "e8m0"}) {
    installFakeDriver();
    bundle = OPEN_VALID(
        replacedAll(bytes, "tmap:rows:e4m3", std::string("tmap:rows:") + type));
    l = run(bundle, "gemm", {64}, {kA, kB, kC, kD, kE, kF}, callsOf(4, 2));
    CHECK(l.size() == 2 && fakeGpu().encodes.size() == 4 &&
          fakeGpu().encodes[0].dataType == 0);
    moeBundleClose(bundle);
  }
  // Maps of wider elements the runtime does not encode: the bundle is
  // refused when opened (BundleReaderAbiTests), so no call gets that far.
  std::string wide =
      replacedAll(bytes, "tmap:weights:e4m3", "tmap:weights:f32");
  moeBundle *refused = nullptr;
  CHECK_STATUS(moeBundleOpenMemory(wide.data(), wide.size(), &refused),
               MOE_STATUS_INVALID_BUNDLE,
               "a tensor map of f32 elements (the runtime encodes bf16 and "
               "1-byte elements)");
  CHECK(refused == nullptr);
}

TEST(launchScalarsRankZeroAndOptional) {
  // routeBundle()'s gather with a plan passing a rank-0 optional memref,
  // an i64 and a negative i32: each parameter at its own bytes.
  FakeGpu &gpu = installFakeDriver();
  const std::string params = "mem:rows[M,H];mem:slots[T,8];mem:scale[];"
                             "i64:M*H;i32:-H;mem:out[T,H]";
  declareParams(gpu, kGather, params);
  const std::string plan = "size gather M min=1 max=2147483647\n"
                           "size gather T min=1 max=1024\n"
                           "size gather H min=8 max=2147483647\n"
                           "arg gather rows bf16 in align=16 dims=M,H\n"
                           "arg gather slots i32 in align=4 dims=T,8\n"
                           "arg gather scale f32 opt align=4 dims=\n"
                           "arg gather out bf16 out align=16 dims=T,H\n"
                           "launch gather 0 grid=T when=1 params=" +
                           params + "\n";
  moeBundle *bundle = OPEN_VALID(withRecordsAfter(
      routeBundle(), std::string("kernel gather ") + kGather, plan));
  if (!bundle)
    return;
  for (uint64_t scale : {uint64_t(0), kC}) {
    std::vector<FakeLaunch> l = run(bundle, "gather", {100000, 1000, 65536},
                                    {kA, kB, scale, kD}, callsOf(0, 1));
    CHECK_EQ(l.size(), size_t(1));
    if (l.size() != 1)
      continue;
    checkLaunchShape(l[0], kGather, 1000, 128, 0, testStream());
    CHECK_EQ(l[0].raw.size(), size_t(26));
    if (l[0].raw.size() != 26)
      continue;
    CHECK(rawWords(l[0], 0, 7) == memref2D(kA, 100000, 65536));
    CHECK(rawWords(l[0], 7, 7) == memref2D(kB, 1000, 8));
    // A rank-0 memref: pointers and offset; null when the caller passes 0.
    CHECK(rawWords(l[0], 14, 3) == std::vector<uint64_t>({scale, scale, 0}));
    CHECK_EQ(rawWord(l[0], 17), uint64_t(100000) * 65536);
    CHECK_EQ(l[0].raw[18].size(), size_t(4));
    int32_t negative = 0;
    std::memcpy(&negative, l[0].raw[18].data(), 4);
    CHECK_EQ(negative, -65536);
    CHECK(rawWords(l[0], 19, 7) == memref2D(kD, 1000, 65536));
  }
  moeBundleClose(bundle);
}

TEST(launchLayerPlan) {
  FakeGpu &gpu = installFakeDriver();
  declareMixKernels(gpu);
  moeBundle *bundle = OPEN_VALID(layerPlanBundle());
  if (!bundle)
    return;
  const uint64_t w = kWorkspace;
  // T = 3 (one chunk: no count step): route, index, gather, gate-up, down,
  // combine, each its part's kernel with its block and shared memory; the
  // GEMMs min(ceil(6/64) + 6, 8) = 7 slots x 2 column tiles.
  std::vector<FakeLaunch> l =
      run(bundle, "mix", {3}, {kA, kB, kC, kD, kE}, callsOf(4, 6), w, 5376);
  CHECK_EQ(grids(l), "route_e8_k2:1 perm_index_e8_k2:1 perm_gather32:2 "
                     "gemm_gate_up_mix:14 gemm_down_mix:14 combine_k2_i32:3");
  if (l.size() == 6) {
    checkLaunchShape(l[0], "route_e8_k2", 1, 128, 0, testStream());
    checkLaunchShape(l[1], "perm_index_e8_k2", 1, 256, 4096, testStream());
    checkLaunchShape(l[2], "perm_gather32", 2, 128, 0, testStream());
    checkLaunchShape(l[3], "gemm_gate_up_mix", 14, 128, 98304, testStream());
    checkLaunchShape(l[5], "combine_k2_i32", 3, 256, 0, testStream());
    // The slices (T = 3): ids at 0, weights 32, offsets 56, slots 256,
    // sources 512, counts 544, rows 768, inter 3840.
    std::vector<uint64_t> route = memref2D(kB, 3, 8);
    for (const auto &part : {memref2D(w, 3, 2), memref2D(w + 32, 3, 2)})
      route.insert(route.end(), part.begin(), part.end());
    CHECK(rawWords(l[0], 0, 21) == route);
    std::vector<uint64_t> index = memref2D(w, 3, 2);
    for (const auto &part : {memref1D(w + 544, 8), memref1D(w + 56, 9),
                             memref2D(w + 256, 3, 2), memref1D(w + 512, 6)})
      index.insert(index.end(), part.begin(), part.end());
    CHECK(rawWords(l[1], 0, 29) == index);
    std::vector<uint64_t> gather = memref2D(kA, 3, 256);
    for (const auto &part :
         {memref1D(w + 512, 6), memref1D(w + 56, 9), memref2D(w + 768, 6, 256)})
      gather.insert(gather.end(), part.begin(), part.end());
    CHECK(rawWords(l[2], 0, 24) == gather);
    // Gate-up: rows (slice) @ gate_up_weights into inter; down: inter @
    // down_weights into rows.
    checkMap(l[3], 0, {9, w + 768, {256, 6}, {512}, {64, 64}});
    checkMap(l[3], 1, {9, kC, {256, 256, 8}, {512, 131072}, {64, 64, 1}});
    checkGemmWords(l[3], w + 56, 8, w + 3840, 6, 128, 256, 1, int32_t(kMax));
    checkMap(l[4], 0, {9, w + 3840, {128, 6}, {256}, {64, 64}});
    checkMap(l[4], 1, {9, kD, {128, 256, 8}, {256, 65536}, {64, 128, 1}});
    checkGemmWords(l[4], w + 56, 8, w + 768, 6, 256, 128, 1, int32_t(kMax));
    std::vector<uint64_t> combine = memref2D(w + 768, 6, 256);
    for (const auto &part : {memref2D(w + 256, 3, 2), memref2D(w + 32, 3, 2),
                             memref2D(kE, 3, 256)})
      combine.insert(combine.end(), part.begin(), part.end());
    CHECK(rawWords(l[5], 0, 28) == combine);
  }
  // T = 4096: 8192 ids in two chunks, so the count step runs first; the
  // GEMMs 128 + 8 slots x 2 tiles = 272 work items, below 528.
  l = run(bundle, "mix", {4096}, {kA, kB, kC, kD, kE}, callsOf(4, 7), w,
          6423040);
  CHECK_EQ(grids(l), "route_e8_k2:1024 perm_count_e8_k2:2 perm_index_e8_k2:2 "
                     "perm_gather32:2048 gemm_gate_up_mix:272 "
                     "gemm_down_mix:272 combine_k2_i32:4096");
  if (l.size() == 7) {
    // ids at 0, counts at 131328 (after sources, 16-byte aligned).
    std::vector<uint64_t> count = memref2D(w, 4096, 2);
    for (uint64_t word : memref1D(w + 131328, 16))
      count.push_back(word);
    CHECK(rawWords(l[1], 0, 12) == count);
    // offsets at 65536, slots at 65792, sources at 98560.
    CHECK(rawWords(l[2], 12, 5) == memref1D(w + 65536, 9));
    CHECK(rawWords(l[2], 17, 7) == memref2D(w + 65792, 4096, 2));
    CHECK(rawWords(l[2], 24, 5) == memref1D(w + 98560, 8192));
    // rows at 131584, inter at 4325888.
    checkMap(l[4], 0, {9, w + 131584, {256, 8192}, {512}, {64, 64}});
    checkGemmWords(l[5], w + 65536, 8, w + 131584, 8192, 256, 128, 1,
                   int32_t(kMax));
    checkMap(l[5], 0, {9, w + 4325888, {128, 8192}, {256}, {64, 64}});
  }
  moeBundleClose(bundle);
}

TEST(launchEmptyBatch) {
  // T = 0 (the compiler's plans allow it) is a no-op: every step's grid is
  // 0, so nothing is launched (no tensor map either), and the empty tokens,
  // logits and output may be NULL.
  FakeGpu &gpu = installFakeDriver();
  declareMixKernels(gpu);
  moeBundle *bundle = OPEN_VALID(
      replacedAll(layerPlanBundle(), "size mix T min=1 ", "size mix T min=0 "));
  if (!bundle)
    return;
  std::vector<FakeLaunch> l = run(bundle, "mix", {0}, {0, 0, kC, kD, 0},
                                  callsOf(0, 0), kWorkspace, 4096);
  CHECK_EQ(grids(l), "");
  // A non-empty argument stays refused when NULL.
  moeLaunchArgs a = {nullptr, 0, 0, nullptr, 0, 0};
  int64_t sizes[] = {0};
  uint64_t args[] = {0, 0, 0, kD, 0};
  a.sizes = sizes;
  a.num_sizes = 1;
  a.num_args = 5;
  a.args = args;
  a.workspace = kWorkspace;
  a.workspace_bytes = 4096;
  CHECK_EQ(moeLaunch(bundle, "mix", &a, testStream()),
           MOE_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(moeLastErrorMessage())
            .find("gate_up_weights pointer "
                  "is NULL") != std::string::npos);
  moeBundleClose(bundle);
}

TEST(launchWorkspaceRefusals) {
  FakeGpu &gpu = installFakeDriver();
  declareMixKernels(gpu);
  moeBundle *bundle = OPEN_VALID(layerPlanBundle());
  if (!bundle)
    return;
  int64_t tokens = 3;
  uint64_t args[] = {kA, kB, kC, kD, kE};
  moeLaunchArgs a = {&tokens, 1, 5, args, kWorkspace, 5376};
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  a.workspace_bytes = 5375;
  CHECK_REJECTED(moeLaunch(bundle, "mix", &a, nullptr), bad,
                 "moeLaunch(mix): workspace of 5375 bytes is smaller than the "
                 "5376 the call needs");
  a.workspace_bytes = 5376;
  a.workspace = 0;
  CHECK_REJECTED(moeLaunch(bundle, "mix", &a, nullptr), bad,
                 "moeLaunch(mix): workspace pointer is NULL (the call needs "
                 "5376 bytes)");
  // The largest slice alignment (256), not 16.
  a.workspace = kWorkspace + 16;
  CHECK_REJECTED(moeLaunch(bundle, "mix", &a, nullptr), bad,
                 "moeLaunch(mix): workspace pointer 0x100000000010 is not "
                 "256-byte aligned");
  a.workspace = kWorkspace + 128;
  CHECK_REJECTED(moeLaunch(bundle, "mix", &a, nullptr), bad,
                 "is not 256-byte aligned");
  // No output may overlap it: out [3, 256] bf16 is 1536 bytes.
  a.workspace = kWorkspace;
  args[4] = kWorkspace + 5376 - 16;
  CHECK_REJECTED(moeLaunch(bundle, "mix", &a, nullptr), bad,
                 "moeLaunch(mix): out overlaps the workspace");
  args[4] = kWorkspace - 1536;
  CHECK_EQ(moeLaunch(bundle, "mix", &a, nullptr), MOE_STATUS_SUCCESS);
  // Nor any input, which the kernels would overwrite: each argument in turn
  // at the last bytes the call uses.
  for (size_t i = 0; i < 4; ++i) {
    uint64_t saved = args[i];
    args[i] = kWorkspace + 5376 - 16;
    CHECK_REJECTED(moeLaunch(bundle, "mix", &a, nullptr), bad,
                   "moeLaunch(mix): the workspace overlaps ");
    args[i] = saved;
  }
  // More workspace than needed, anywhere 256-byte aligned, is fine.
  args[4] = kE;
  a.workspace = kWorkspace + 256;
  a.workspace_bytes = uint64_t(1) << 32;
  CHECK_EQ(moeLaunch(bundle, "mix", &a, nullptr), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.launches.size(), size_t(12));
  moeBundleClose(bundle);
}

TEST(launchArgumentRefusals) {
  // Every refusal names what is wrong, launches nothing and makes no driver
  // call (the bundle is not even loaded).
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = OPEN_VALID(routeBundleWithPlans());
  if (!bundle)
    return;
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  int64_t tokens = 100;
  uint64_t args[] = {kA, kB, kC, kD};
  moeLaunchArgs l = {&tokens, 1, 4, args, 0, 0};
  CHECK_REJECTED(moeLaunch(nullptr, "router", &l, nullptr), bad,
                 "moeLaunch: bundle is NULL");
  CHECK_REJECTED(moeLaunch(bundle, nullptr, &l, nullptr), bad,
                 "moeLaunch: entry name is NULL");
  CHECK_REJECTED(moeLaunch(bundle, "router", nullptr, nullptr), bad,
                 "moeLaunch: args is NULL");
  CHECK_REJECTED(moeLaunch(bundle, "nothing", &l, nullptr),
                 MOE_STATUS_NOT_FOUND,
                 "moeLaunch: no entry 'nothing' in the bundle (entries: "
                 "router, softmax, combine, gather, experts)");
  CHECK_REJECTED(moeLaunch(bundle, "combine", &l, nullptr), bad,
                 "moeLaunch(combine): the entry has no launch plan");
  l.num_args = 3;
  CHECK_REJECTED(moeLaunch(bundle, "router", &l, nullptr), bad,
                 "moeLaunch(router): 1 sizes and 3 arguments given, the entry "
                 "takes 1 and 4");
  l.num_args = 4;
  l.num_sizes = 0;
  CHECK_REJECTED(moeLaunch(bundle, "router", &l, nullptr), bad,
                 "0 sizes and 4 arguments given, the entry takes 1 and 4");
  l.num_sizes = 1;
  l.sizes = nullptr;
  CHECK_REJECTED(moeLaunch(bundle, "router", &l, nullptr), bad,
                 "moeLaunch(router): sizes is NULL");
  l.sizes = &tokens;
  l.args = nullptr;
  CHECK_REJECTED(moeLaunch(bundle, "router", &l, nullptr), bad,
                 "moeLaunch(router): args is NULL");
  l.args = args;
  // The sizes in their ranges.
  tokens = 0;
  CHECK_REJECTED(moeLaunch(bundle, "router", &l, nullptr), bad,
                 "moeLaunch(router): T = 0 is outside [1, 2147483647]");
  tokens = 4097;
  uint64_t softmax[] = {kA, kC, kD};
  moeLaunchArgs s = {&tokens, 1, 3, softmax, 0, 0};
  CHECK_REJECTED(moeLaunch(bundle, "softmax", &s, nullptr), bad,
                 "moeLaunch(softmax): T = 4097 is outside [1, 4096]");
  tokens = 100;
  // Each pointer: not NULL, aligned; outputs overlap nothing.
  args[2] = 0;
  CHECK_REJECTED(moeLaunch(bundle, "router", &l, nullptr), bad,
                 "moeLaunch(router): ids pointer is NULL");
  args[2] = kC;
  args[1] = kB + 2;
  CHECK_REJECTED(moeLaunch(bundle, "router", &l, nullptr), bad,
                 "moeLaunch(router): bias pointer 0x20000000002 is not 4-byte "
                 "aligned");
  args[1] = kB;
  // ids [100, 8] i32 is 3200 bytes.
  args[3] = kC + 3196;
  CHECK_REJECTED(moeLaunch(bundle, "router", &l, nullptr), bad,
                 "moeLaunch(router): ids overlaps weights");
  args[3] = kA + 4;
  CHECK_REJECTED(moeLaunch(bundle, "router", &l, nullptr), bad,
                 "moeLaunch(router): weights overlaps logits");
  // Inputs may alias; outputs just after each other are fine.
  args[3] = kC + 3200;
  args[1] = kA;
  CHECK(gpu.calls.empty());
  CHECK_EQ(moeLaunch(bundle, "router", &l, nullptr), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.launches.size(), size_t(1));
  moeBundleClose(bundle);

  // A plan's check, and bytes beyond int64 (gemmPlanBundle()'s any: M, N,
  // K, E).
  installFakeDriver();
  bundle = OPEN_VALID(gemmPlanBundle());
  uint64_t gemm[] = {kA, kB, kC, kD};
  int64_t sizes[] = {100, 200, 12, 3};
  moeLaunchArgs g = {sizes, 4, 4, gemm, 0, 0};
  CHECK_REJECTED(moeLaunch(bundle, "any", &g, nullptr), bad,
                 "moeLaunch(any): K must be a multiple of 8 (16-byte rows)");
  sizes[1] = sizes[3] = kMax;
  sizes[2] = 1 << 30;
  CHECK_REJECTED(moeLaunch(bundle, "any", &g, nullptr), bad,
                 "moeLaunch(any): the bytes of weights overflow int64");
  moeBundleClose(bundle);

  // Without a driver the arguments are checked first, then NO_GPU.
  setDriverForTesting(nullptr, "dlopen(libcuda.so.1) failed: no such file");
  bundle = OPEN_VALID(gemmPlanBundle());
  int64_t m = 0;
  moeLaunchArgs d = {&m, 1, 4, gemm, 0, 0};
  CHECK_STATUS(moeLaunch(bundle, "down", &d, nullptr), bad, "M = 0");
  m = 1;
  CHECK_STATUS(moeLaunch(bundle, "down", &d, nullptr), MOE_STATUS_NO_GPU,
               "moeLaunch: no CUDA driver: dlopen(libcuda.so.1) failed");
  moeBundleClose(bundle);
  setDriverForTesting(nullptr);
}

TEST(launchGridBeyondInt32LaunchesNothing) {
  // A device holding 2^32 CTAs of kernel 1 of `any` (4 per multiprocessor,
  // 2^30 of them): E = 2^20 experts make 2^20 slots x 8192 column tiles, so
  // min(work, resident) = 2^32 > 2^31 - 1: refused once the residency is
  // known, before any map or launch.
  FakeGpu &gpu = installFakeDriver();
  gpu.smCount = 1 << 30;
  moeBundle *bundle = OPEN_VALID(gemmPlanBundle());
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  int64_t sizes[] = {kMax, 1 << 20, 8, 1 << 20};
  // out [M, N] is 2^52 bytes: far from the others.
  uint64_t args[] = {kA, kB, kC, uint64_t(1) << 60};
  moeLaunchArgs a = {sizes, 4, 4, args, 0, 0};
  size_t before = gpu.calls.size();
  CHECK_STATUS(moeLaunch(bundle, "any", &a, nullptr),
               MOE_STATUS_INVALID_ARGUMENT,
               "moeLaunch(any): launch 1: grid.x = 4294967296 is outside "
               "[1, 2^31 - 1]");
  CHECK_EQ(callsSince(before), "cuCtxGetCurrent cuCtxGetId");
  // Fewer experts: within it, launched (kernel 0: 2^30 resident CTAs).
  sizes[3] = 1 << 10;
  before = gpu.launches.size();
  CHECK_EQ(moeLaunch(bundle, "any", &a, nullptr), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.launches.size(), before + 2);
  if (gpu.launches.size() == before + 2) {
    CHECK_EQ(gpu.launches[before].grid[0], 1u << 30);
    CHECK_EQ(gpu.launches[before + 1].grid[0], (1u << 10) * 8192u);
  }
  moeBundleClose(bundle);
}
