//===- RouteUnpermuteTests.cpp - moeRoute and moeUnpermute ----------------===//
//
// Every argument check of contract §3 for route.v1 and unpermute.v2, then
// what a valid call hands the (fake) driver: the grid (a route's with its
// 65535 cap, an unpermute's of (token, column block) pairs with its 2^20
// cap), block, shared memory, stream and the exact parameter list (21 or 26 for
// a route, 21 or 28 for an unpermute), and that nothing else is called. The
// entries are those of routeBundle() (TestBundles.h).
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "LaunchChecks.h"
#include "TestBundles.h"
#include "TestHarness.h"

using namespace moe_test;

namespace {

constexpr uint64_t kLogits = 0x7f0000110000, kBias = 0x7f0000120000,
                   kIds = 0x7f0000130000, kWeights = 0x7f0000140000,
                   kRows = 0x7f0000150000, kSlots = 0x7f0000160000,
                   kOut = 0x7f0000170000;
constexpr int64_t kMax = 2147483647;

/// The fake's route and unpermute kernels take only 8-byte parameters.
void declareSimpleKernels(FakeGpu &gpu) {
  gpu.wordParams[kRouteBias] = 26;
  gpu.wordParams[kRouteSoftmax] = 21;
  gpu.wordParams[kCombine] = 28;
  gpu.wordParams[kGather] = 21;
}

FakeGpu &install() {
  FakeGpu &gpu = installFakeDriver();
  declareSimpleKernels(gpu);
  return gpu;
}

/// Arguments of entry router (E = 256, with a bias).
moeRouteArgs router(int64_t tokens) {
  moeRouteArgs a;
  a.logits = kLogits;
  a.bias = kBias;
  a.ids = kIds;
  a.weights = kWeights;
  a.tokens = tokens;
  a.experts = 256;
  return a;
}

/// Arguments of entry softmax (E = 8, no bias, bf16 logits).
moeRouteArgs softmax(int64_t tokens) {
  moeRouteArgs a = router(tokens);
  a.bias = 0;
  a.experts = 8;
  return a;
}

/// Arguments of entry combine (H = 4096, weighted, i64 slots).
moeUnpermuteArgs combine(int64_t tokens, int64_t rowsCount = 64) {
  moeUnpermuteArgs a;
  a.rows = kRows;
  a.slots = kSlots;
  a.weights = kWeights;
  a.out = kOut;
  a.rows_count = rowsCount;
  a.tokens = tokens;
  a.hidden = 4096;
  return a;
}

/// Arguments of entry gather (H dynamic, unweighted, i32 slots).
moeUnpermuteArgs gather(int64_t tokens, int64_t hidden) {
  moeUnpermuteArgs a = combine(tokens);
  a.weights = 0;
  a.hidden = hidden;
  return a;
}

moeStatus route(moeBundle *bundle, const char *entry, const moeRouteArgs &a,
                void *stream = nullptr) {
  return moeRoute(bundle, entry, &a, stream);
}

moeStatus unpermute(moeBundle *bundle, const char *entry,
                    const moeUnpermuteArgs &a, void *stream = nullptr) {
  return moeUnpermute(bundle, entry, &a, stream);
}

/// After loading, runs `launch` and checks that it made exactly one launch,
/// of `symbol` on grid (gridX, 1, 1), block (threads, 1, 1), `smem`, the
/// stream, and exactly `params`; and no driver call but the context lookup.
template <typename Launch>
void checkLaunch(moeBundle *bundle, Launch launch, const char *symbol,
                 unsigned gridX, unsigned threads, unsigned smem,
                 const std::vector<uint64_t> &params) {
  long first = runAfterLoad(bundle, launch,
                            "cuCtxGetCurrent cuCtxGetId cuLaunchKernelEx", 1);
  if (first < 0)
    return;
  const FakeLaunch &got = fakeGpu().launches[first];
  checkLaunchShape(got, symbol, gridX, threads, smem, testStream());
  checkWordParams(got, symbol, params);
}

/// The 26 parameters of a route with a bias, 21 without.
std::vector<uint64_t> routeParams(const moeRouteArgs &a, int64_t topK,
                                  bool bias) {
  std::vector<uint64_t> words;
  pushMemref2D(words, a.logits, a.tokens, a.experts);
  if (bias)
    pushMemref1D(words, a.bias, a.experts);
  pushMemref2D(words, a.ids, a.tokens, topK);
  pushMemref2D(words, a.weights, a.tokens, topK);
  return words;
}

/// The 28 parameters of a weighted unpermute, 21 of an unweighted one.
std::vector<uint64_t> unpermuteParams(const moeUnpermuteArgs &a, int64_t topK,
                                      bool weighted) {
  std::vector<uint64_t> words;
  pushMemref2D(words, a.rows, a.rows_count, a.hidden);
  pushMemref2D(words, a.slots, a.tokens, topK);
  if (weighted)
    pushMemref2D(words, a.weights, a.tokens, topK);
  pushMemref2D(words, a.out, a.tokens, a.hidden);
  return words;
}

} // namespace

TEST(routeLaunchesPerContract) {
  install();
  moeBundle *bundle = openBundle(routeBundle());
  CHECK(bundle != nullptr);
  // router: 128 threads, 4 tokens (warps) per CTA; 26 parameters.
  struct {
    int64_t tokens;
    unsigned grid;
  } routerGrids[] = {{1, 1},          {4, 1},          {5, 2},
                     {1000, 250},     {262140, 65535}, // exactly 65535 CTAs
                     {262141, 65535},                  // capped: grid-stride
                     {kMax, 65535}};
  for (const auto &g : routerGrids) {
    moeRouteArgs a = router(g.tokens);
    checkLaunch(
        bundle,
        [&](void *stream) { return route(bundle, "router", a, stream); },
        kRouteBias, g.grid, 128, 0, routeParams(a, 8, true));
  }
  // softmax: 256 threads, 8 tokens per CTA, 2048 bytes of shared memory; no
  // bias: 21 parameters; bf16 logits need 2-byte alignment only.
  moeRouteArgs a = softmax(4096);
  a.logits = kLogits + 2;
  checkLaunch(
      bundle, [&](void *stream) { return route(bundle, "softmax", a, stream); },
      kRouteSoftmax, 512, 256, 2048, routeParams(a, 2, false));
  a = softmax(9);
  checkLaunch(
      bundle, [&](void *stream) { return route(bundle, "softmax", a, stream); },
      kRouteSoftmax, 2, 256, 2048, routeParams(a, 2, false));
  moeBundleClose(bundle);
}

TEST(routeRejectsNullsAndOtherEntries) {
  install();
  moeBundle *bundle = openBundle(routeBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  moeRouteArgs a = router(16);
  CHECK_REJECTED(moeRoute(nullptr, "router", &a, nullptr), bad,
                 "moeRoute: bundle is NULL");
  CHECK_REJECTED(moeRoute(bundle, nullptr, &a, nullptr), bad,
                 "moeRoute: entry name is NULL");
  CHECK_REJECTED(moeRoute(bundle, "router", nullptr, nullptr), bad,
                 "moeRoute: args is NULL");
  CHECK_REJECTED(route(bundle, "route", a), MOE_STATUS_NOT_FOUND,
                 "moeRoute: no entry 'route' in the bundle (entries: router, "
                 "softmax, combine, gather, experts)");
  // Entries of the other ABIs.
  CHECK_REJECTED(route(bundle, "combine", a), bad,
                 "moeRoute(combine): the entry is op=moe.unpermute "
                 "abi=unpermute.v2, not op=moe.route with abi=route.v1");
  CHECK_REJECTED(route(bundle, "experts", a), bad,
                 "moeRoute(experts): the entry is op=moe.grouped_matmul "
                 "abi=grouped_matmul.v3, not op=moe.route with abi=route.v1");
  // moeGroupedMatmul and moeUnpermute refuse route entries.
  moeGroupedMatmulArgs gemm = {};
  CHECK_REJECTED(moeGroupedMatmul(bundle, "router", &gemm, nullptr), bad,
                 "moeGroupedMatmul(router): the entry is op=moe.route "
                 "abi=route.v1, not op=moe.grouped_matmul or moe.expert_mlp "
                 "with abi=grouped_matmul.v3");
  moeUnpermuteArgs u = combine(16);
  CHECK_REJECTED(unpermute(bundle, "softmax", u), bad,
                 "moeUnpermute(softmax): the entry is op=moe.route "
                 "abi=route.v1, not op=moe.unpermute with abi=unpermute.v2");
  moeBundleClose(bundle);

  // The op must be moe.route too, and the ABI route.v1.
  std::string other = routeBundle();
  other.replace(other.find("op=moe.route"), 12, "op=moe.other");
  other.replace(other.find("op=moe.grouped_matmul"), 21, "op=moe.route");
  bundle = openBundle(other);
  CHECK(bundle != nullptr);
  CHECK_REJECTED(route(bundle, "router", a), bad,
                 "moeRoute(router): the entry is op=moe.other abi=route.v1, "
                 "not op=moe.route with abi=route.v1");
  CHECK_REJECTED(route(bundle, "experts", a), bad,
                 "moeRoute(experts): the entry is op=moe.route "
                 "abi=grouped_matmul.v3, not op=moe.route");
  moeBundleClose(bundle);
}

TEST(routeRejectsBadSizes) {
  install();
  moeBundle *bundle = openBundle(routeBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  CHECK_REJECTED(route(bundle, "router", router(0)), bad,
                 "moeRoute(router): T = 0 must be at least 1");
  CHECK_REJECTED(route(bundle, "router", router(-5)), bad,
                 "T = -5 must be at least 1");
  CHECK_REJECTED(route(bundle, "softmax", softmax(4097)), bad,
                 "moeRoute(softmax): T = 4097 exceeds the entry's max_rows = "
                 "4096");
  CHECK_REJECTED(route(bundle, "router", router(kMax + 1)), bad,
                 "T = 2147483648 exceeds the entry's max_rows = 2147483647");
  moeRouteArgs a = router(16);
  a.experts = 255;
  CHECK_REJECTED(route(bundle, "router", a), bad,
                 "moeRoute(router): E = 255 does not match the entry's "
                 "experts = 256");
  a.experts = 0;
  CHECK_REJECTED(route(bundle, "router", a), bad,
                 "E = 0 does not match the entry's experts = 256");
  a.experts = -1;
  CHECK_REJECTED(route(bundle, "router", a), bad,
                 "E = -1 does not match the entry's experts = 256");
  // Sizes come before pointers.
  a = router(0);
  a.logits = 0;
  CHECK_REJECTED(route(bundle, "router", a), bad, "T = 0 must be at least 1");
  moeBundleClose(bundle);

  // T*E*4 bytes of f32 logits beyond int64 (T, E < 2^31); bf16 fits.
  std::string huge = "MOEBUNDLE 6\nchip sm_90a\n" +
                     imageRecord("img", fakeCubin('H')) +
                     "entry wide op=moe.route abi=route.v1 max_rows=2147483647 "
                     "experts=2147483647 top_k=32 logits=f32 bias=0\n" +
                     simpleKernelLine("wide", "r32", "img", 1024, 0) +
                     "entry half op=moe.route abi=route.v1 max_rows=2147483647 "
                     "experts=2147483647 top_k=32 logits=bf16 bias=0\n" +
                     simpleKernelLine("half", "r16", "img", 32, 0) + "end\n";
  FakeGpu &gpu = fakeGpu();
  gpu.wordParams["r32"] = 21;
  gpu.wordParams["r16"] = 21;
  bundle = openBundle(huge);
  CHECK(bundle != nullptr);
  a = softmax(kMax);
  a.experts = kMax;
  CHECK_REJECTED(route(bundle, "wide", a), bad,
                 "moeRoute(wide): T*E*4 (bytes of logits) overflows int64 (T "
                 "= 2147483647, E = 2147483647)");
  // 1024 threads: 32 tokens per CTA; 32 threads: 1, capped at 65535.
  a.tokens = 1 << 20;
  checkLaunch(
      bundle, [&](void *stream) { return route(bundle, "wide", a, stream); },
      "r32", 32768, 1024, 0, routeParams(a, 32, false));
  a.tokens = kMax;
  checkLaunch(
      bundle, [&](void *stream) { return route(bundle, "half", a, stream); },
      "r16", 65535, 32, 0, routeParams(a, 32, false));
  moeBundleClose(bundle);
}

TEST(routeRejectsBadPointers) {
  install();
  moeBundle *bundle = openBundle(routeBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  moeRouteArgs a = router(16);
  a.logits = 0;
  CHECK_REJECTED(route(bundle, "router", a), bad,
                 "moeRoute(router): logits pointer is NULL");
  a = router(16);
  a.ids = 0;
  CHECK_REJECTED(route(bundle, "router", a), bad,
                 "moeRoute(router): ids pointer is NULL");
  a = router(16);
  a.weights = 0;
  CHECK_REJECTED(route(bundle, "router", a), bad,
                 "moeRoute(router): weights pointer is NULL");
  a = router(16);
  a.bias = 0;
  CHECK_REJECTED(route(bundle, "router", a), bad,
                 "moeRoute(router): bias pointer is NULL (the entry has "
                 "bias=1: f32 [E])");
  // A bias=0 entry takes none.
  a = softmax(16);
  a.bias = kBias;
  CHECK_REJECTED(route(bundle, "softmax", a), bad,
                 "moeRoute(softmax): bias = 0x7f0000120000, but the entry has "
                 "bias=0 (its kernel takes no bias): it must be 0");
  a.bias = 4;
  CHECK_REJECTED(route(bundle, "softmax", a), bad, "bias = 0x4, but");

  // Alignment: logits to their element size, the rest to 4 bytes.
  a = router(16);
  a.logits = kLogits + 2;
  CHECK_REJECTED(route(bundle, "router", a), bad,
                 "moeRoute(router): logits pointer 0x7f0000110002 is not "
                 "4-byte aligned (the entry's logits are f32)");
  a = softmax(16);
  a.logits = kLogits + 1;
  CHECK_REJECTED(route(bundle, "softmax", a), bad,
                 "moeRoute(softmax): logits pointer 0x7f0000110001 is not "
                 "2-byte aligned (the entry's logits are bf16)");
  a = router(16);
  a.bias = kBias + 2;
  CHECK_REJECTED(route(bundle, "router", a), bad,
                 "bias pointer 0x7f0000120002 is not 4-byte aligned");
  a = router(16);
  a.ids = kIds + 1;
  CHECK_REJECTED(route(bundle, "router", a), bad,
                 "ids pointer 0x7f0000130001 is not 4-byte aligned");
  a = router(16);
  a.weights = kWeights + 2;
  CHECK_REJECTED(route(bundle, "router", a), bad,
                 "weights pointer 0x7f0000140002 is not 4-byte aligned");
  // Nulls are reported before misalignments.
  a = router(16);
  a.logits = kLogits + 1;
  a.weights = 0;
  CHECK_REJECTED(route(bundle, "router", a), bad, "weights pointer is NULL");
  // 4-byte alignment is enough everywhere.
  a = router(16);
  a.logits += 4;
  a.bias += 4;
  a.ids += 4;
  a.weights += 4;
  CHECK_EQ(route(bundle, "router", a), MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);
}

TEST(unpermuteLaunchesPerContract) {
  install();
  moeBundle *bundle = openBundle(routeBundle());
  CHECK(bundle != nullptr);
  // One CTA per (token, column block) pair, at most 2^20: combine has
  // H = 4096 and 256 threads, so blocks of 8 * 256 = 2048 columns, 2 per
  // token; weighted: 28 parameters.
  struct {
    int64_t tokens;
    unsigned grid;
  } grids[] = {{1, 2},
               {7, 14},
               {65535, 131070},
               {65536, 131072},
               {524287, 1048574},
               {524288, 1048576},
               {524289, 1048576}, // capped: grid-stride
               {kMax, 1048576}};
  for (const auto &g : grids) {
    moeUnpermuteArgs a = combine(g.tokens, 2 * g.tokens);
    checkLaunch(
        bundle,
        [&](void *stream) { return unpermute(bundle, "combine", a, stream); },
        kCombine, g.grid, 256, 0, unpermuteParams(a, 2, true));
  }
  // Unweighted, dynamic H: 21 parameters; M need not be T*k. 128 threads:
  // blocks of 1024 columns, the last one partial.
  struct {
    int64_t tokens, hidden;
    unsigned grid;
  } gatherGrids[] = {{1024, 8, 1024},           // one block of 8 columns
                     {3, 1024, 3},              // one full block
                     {3, 1032, 6},              // a second block of 8 columns
                     {3, 7168, 21},             // 7 blocks
                     {5, 1048576, 5120},        // H = 2^20: 1024 blocks
                     {1024, 1048576, 1048576},  // exactly the cap
                     {1024, 1048584, 1048576}}; // capped
  for (const auto &g : gatherGrids) {
    moeUnpermuteArgs a = gather(g.tokens, g.hidden);
    a.rows_count = g.tokens == 3 ? kMax : 1;
    a.slots = kSlots + 4; // i32 slots: 4-byte alignment
    checkLaunch(
        bundle,
        [&](void *stream) { return unpermute(bundle, "gather", a, stream); },
        kGather, g.grid, 128, 0, unpermuteParams(a, 8, false));
  }
  moeBundleClose(bundle);
}

TEST(unpermuteRejectsNullsAndOtherEntries) {
  install();
  moeBundle *bundle = openBundle(routeBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  moeUnpermuteArgs a = combine(16);
  CHECK_REJECTED(moeUnpermute(nullptr, "combine", &a, nullptr), bad,
                 "moeUnpermute: bundle is NULL");
  CHECK_REJECTED(moeUnpermute(bundle, nullptr, &a, nullptr), bad,
                 "moeUnpermute: entry name is NULL");
  CHECK_REJECTED(moeUnpermute(bundle, "combine", nullptr, nullptr), bad,
                 "moeUnpermute: args is NULL");
  CHECK_REJECTED(unpermute(bundle, "combined", a), MOE_STATUS_NOT_FOUND,
                 "moeUnpermute: no entry 'combined' in the bundle");
  CHECK_REJECTED(unpermute(bundle, "experts", a), bad,
                 "moeUnpermute(experts): the entry is op=moe.grouped_matmul "
                 "abi=grouped_matmul.v3, not op=moe.unpermute with "
                 "abi=unpermute.v2");
  moeGroupedMatmulArgs gemm = {};
  CHECK_REJECTED(moeGroupedMatmul(bundle, "gather", &gemm, nullptr), bad,
                 "moeGroupedMatmul(gather): the entry is op=moe.unpermute "
                 "abi=unpermute.v2, not op=moe.grouped_matmul");
  moeBundleClose(bundle);

  std::string other = routeBundle();
  other.replace(other.find("op=moe.unpermute"), 16, "op=moe.combine");
  bundle = openBundle(other);
  CHECK_REJECTED(unpermute(bundle, "combine", a), bad,
                 "moeUnpermute(combine): the entry is op=moe.combine "
                 "abi=unpermute.v2, not op=moe.unpermute with "
                 "abi=unpermute.v2");
  moeBundleClose(bundle);
}

TEST(unpermuteRejectsBadSizes) {
  install();
  moeBundle *bundle = openBundle(routeBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  CHECK_REJECTED(unpermute(bundle, "combine", combine(0)), bad,
                 "moeUnpermute(combine): T = 0 must be at least 1");
  CHECK_REJECTED(unpermute(bundle, "combine", combine(-1)), bad,
                 "T = -1 must be at least 1");
  CHECK_REJECTED(unpermute(bundle, "gather", gather(1025, 64)), bad,
                 "moeUnpermute(gather): T = 1025 exceeds the entry's "
                 "max_rows = 1024");
  CHECK_REJECTED(unpermute(bundle, "combine", combine(kMax + 1)), bad,
                 "T = 2147483648 exceeds the entry's max_rows = 2147483647");
  CHECK_REJECTED(unpermute(bundle, "combine", combine(16, 0)), bad,
                 "moeUnpermute(combine): M = 0 (rows_count) must be at least "
                 "1");
  CHECK_REJECTED(unpermute(bundle, "combine", combine(16, -3)), bad,
                 "M = -3 (rows_count) must be at least 1");
  // A static hidden must match; a dynamic one is checked on its own.
  moeUnpermuteArgs a = combine(16);
  a.hidden = 4104;
  CHECK_REJECTED(unpermute(bundle, "combine", a), bad,
                 "moeUnpermute(combine): H = 4104 does not match the entry's "
                 "hidden = 4096");
  a.hidden = -1;
  CHECK_REJECTED(unpermute(bundle, "combine", a), bad,
                 "H = -1 does not match the entry's hidden = 4096");
  CHECK_REJECTED(unpermute(bundle, "gather", gather(16, 4)), bad,
                 "moeUnpermute(gather): H = 4 is less than 8 (rows are read "
                 "in 16-byte vectors)");
  CHECK_REJECTED(unpermute(bundle, "gather", gather(16, 0)), bad,
                 "H = 0 is less than 8");
  CHECK_REJECTED(unpermute(bundle, "gather", gather(16, -8)), bad,
                 "H = -8 is less than 8");
  CHECK_REJECTED(unpermute(bundle, "gather", gather(16, 4100)), bad,
                 "moeUnpermute(gather): H = 4100 is not a multiple of 8 (rows "
                 "are read in 16-byte vectors)");
  // Byte sizes beyond int64.
  a = gather(16, int64_t(1) << 40);
  a.rows_count = int64_t(1) << 22;
  CHECK_REJECTED(unpermute(bundle, "gather", a), bad,
                 "moeUnpermute(gather): M*H*2 (bytes of rows) overflows int64 "
                 "(M = 4194304, H = 1099511627776)");
  a = gather(1024, int64_t(1) << 53);
  a.rows_count = 1;
  CHECK_REJECTED(unpermute(bundle, "gather", a), bad,
                 "moeUnpermute(gather): T*H*2 (bytes of out) overflows int64 "
                 "(T = 1024, H = 9007199254740992)");
  moeBundleClose(bundle);

  // T*k*8 bytes of i64 slots (k up to 2^31 - 1).
  std::string wide =
      "MOEBUNDLE 6\nchip sm_90a\n" + imageRecord("img", fakeCubin('W')) +
      "entry wide op=moe.unpermute abi=unpermute.v2 max_rows=2147483647 "
      "hidden=8 top_k=2147483647 slots=i64 weighted=0\n" +
      simpleKernelLine("wide", "u", "img", 64, 0) + "end\n";
  bundle = openBundle(wide);
  CHECK(bundle != nullptr);
  a = gather(kMax, 8);
  CHECK_REJECTED(unpermute(bundle, "wide", a), bad,
                 "moeUnpermute(wide): T*k*8 (bytes of slots) overflows int64 "
                 "(T = 2147483647, k = 2147483647)");
  fakeGpu().wordParams["u"] = 21;
  // H = 8: one column block per token, T CTAs up to 2^20.
  for (int64_t tokens : {int64_t(1) << 20, (int64_t(1) << 20) + 1}) {
    a.tokens = tokens;
    checkLaunch(
        bundle,
        [&](void *stream) { return unpermute(bundle, "wide", a, stream); }, "u",
        1048576, 64, 0, unpermuteParams(a, kMax, false));
  }
  a.tokens = 1000;
  checkLaunch(
      bundle,
      [&](void *stream) { return unpermute(bundle, "wide", a, stream); }, "u",
      1000, 64, 0, unpermuteParams(a, kMax, false));
  moeBundleClose(bundle);
}

TEST(unpermuteRejectsBadPointers) {
  install();
  moeBundle *bundle = openBundle(routeBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  moeUnpermuteArgs a = combine(16);
  a.rows = 0;
  CHECK_REJECTED(unpermute(bundle, "combine", a), bad,
                 "moeUnpermute(combine): rows pointer is NULL");
  a = combine(16);
  a.slots = 0;
  CHECK_REJECTED(unpermute(bundle, "combine", a), bad, "slots pointer is NULL");
  a = combine(16);
  a.out = 0;
  CHECK_REJECTED(unpermute(bundle, "combine", a), bad, "out pointer is NULL");
  a = combine(16);
  a.weights = 0;
  CHECK_REJECTED(unpermute(bundle, "combine", a), bad,
                 "moeUnpermute(combine): weights pointer is NULL (the entry "
                 "has weighted=1: f32 [T, k])");
  moeUnpermuteArgs g = gather(16, 64);
  g.weights = kWeights;
  CHECK_REJECTED(unpermute(bundle, "gather", g), bad,
                 "moeUnpermute(gather): weights = 0x7f0000140000, but the "
                 "entry has weighted=0 (its kernel takes no weights): it must "
                 "be 0");

  a = combine(16);
  a.rows = kRows + 8;
  CHECK_REJECTED(unpermute(bundle, "combine", a), bad,
                 "moeUnpermute(combine): rows pointer 0x7f0000150008 is not "
                 "16-byte aligned");
  a = combine(16);
  a.out = kOut + 4;
  CHECK_REJECTED(unpermute(bundle, "combine", a), bad,
                 "out pointer 0x7f0000170004 is not 16-byte aligned");
  a = combine(16);
  a.slots = kSlots + 4;
  CHECK_REJECTED(unpermute(bundle, "combine", a), bad,
                 "moeUnpermute(combine): slots pointer 0x7f0000160004 is not "
                 "8-byte aligned (the entry's slots are i64)");
  g = gather(16, 64);
  g.slots = kSlots + 2;
  CHECK_REJECTED(unpermute(bundle, "gather", g), bad,
                 "moeUnpermute(gather): slots pointer 0x7f0000160002 is not "
                 "4-byte aligned (the entry's slots are i32)");
  a = combine(16);
  a.weights = kWeights + 2;
  CHECK_REJECTED(unpermute(bundle, "combine", a), bad,
                 "weights pointer 0x7f0000140002 is not 4-byte aligned");
  a = combine(16);
  a.weights = kWeights + 4;
  CHECK_EQ(unpermute(bundle, "combine", a), MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);
}

TEST(routeAndUnpermuteLoadAndFail) {
  FakeGpu &gpu = install();
  moeBundle *bundle = openBundle(routeBundle());
  // The first call loads the bundle: MAX_DYNAMIC_SHARED_SIZE is set for the
  // grouped matmul's kernel and the route kernel with smem > 0 only; every
  // kernel's residency is checked.
  moeRouteArgs a = router(64);
  CHECK_EQ(route(bundle, "router", a), MOE_STATUS_SUCCESS);
  CHECK_CONTAINS(callsSince(0), "cuInit");
  CHECK_EQ(gpu.smemAttributes.size(), size_t(2));
  if (gpu.smemAttributes.size() == 2) {
    CHECK_EQ(gpu.smemAttributes[0].first, std::string(kRouteSoftmax));
    CHECK_EQ(gpu.smemAttributes[0].second, 2048);
    CHECK_EQ(gpu.smemAttributes[1].first, std::string(kNormal32));
    CHECK_EQ(gpu.smemAttributes[1].second, 0);
  }
  CHECK_EQ(gpu.occupancyQueries.size(), size_t(5));
  CHECK_EQ(gpu.liveModules, 1);
  CHECK_EQ(gpu.launches.size(), size_t(1));

  // A failed launch names the kernel, grid, block and smem.
  gpu.failLaunchNumber = 1;
  CHECK_STATUS(route(bundle, "softmax", softmax(17)), MOE_STATUS_CUDA_ERROR,
               "moeRoute: cuLaunchKernelEx("
               "'moe_route_softmax_topk_e8_k2_bf16' of entry 'softmax', grid "
               "(3, 1, 1), block (256, 1, 1), smem 2048, programmatic stream "
               "serialization) failed: CUDA_ERROR_INVALID_VALUE (fake driver "
               "error)");
  gpu.failLaunchNumber = 2;
  gpu.launchResult = 719;
  CHECK_STATUS(unpermute(bundle, "combine", combine(5)), MOE_STATUS_CUDA_ERROR,
               "moeUnpermute: cuLaunchKernelEx("
               "'moe_unpermute_h4096_k2_i64_weighted' of entry 'combine', "
               "grid (10, 1, 1), block (256, 1, 1), smem 0, programmatic "
               "stream serialization) failed: CUresult 719");
  moeBundleClose(bundle);
  CHECK_EQ(gpu.liveModules, 0);

  // No driver: the arguments are checked first, then NO_GPU.
  setDriverForTesting(nullptr, "dlopen(libcuda.so.1) failed: no such file");
  bundle = openBundle(routeBundle());
  CHECK_STATUS(route(bundle, "router", router(0)), MOE_STATUS_INVALID_ARGUMENT,
               "T = 0");
  CHECK_STATUS(route(bundle, "router", router(1)), MOE_STATUS_NO_GPU,
               "moeRoute: no CUDA driver: dlopen(libcuda.so.1) failed");
  CHECK_STATUS(unpermute(bundle, "combine", combine(1)), MOE_STATUS_NO_GPU,
               "moeUnpermute: no CUDA driver");
  moeBundleClose(bundle);
  setDriverForTesting(nullptr);

  // A kernel that cannot be resident fails the load, as for the GEMMs.
  install();
  gpu.ctasPerSm[kGather] = 0;
  bundle = openBundle(routeBundle());
  CHECK_STATUS(unpermute(bundle, "combine", combine(1)), MOE_STATUS_UNSUPPORTED,
               "moeUnpermute: kernel 'moe_unpermute_k8_i32' (entry 'gather') "
               "cannot be resident: 128 threads, 0 bytes of shared memory");
  gpu.ctasPerSm.clear();
  gpu.missingSymbols.insert(kRouteBias);
  CHECK_STATUS(route(bundle, "router", router(1)), MOE_STATUS_NOT_FOUND,
               "moeRoute: kernel symbol "
               "'moe_route_sigmoid_topk_e256_k8_f32_bias' (entry 'router') "
               "not found in image 'moe_kernels'");
  CHECK_EQ(gpu.launches.size(), size_t(0));
  moeBundleClose(bundle);
}
