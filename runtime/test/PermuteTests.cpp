//===- PermuteTests.cpp - moePermute and moePermuteWorkspaceBytes ---------===//
//
// Every argument check of contract §3.4 (permute.v2), then what a valid call
// hands the (fake) driver: three launches, in order, on the caller's stream:
// the count kernel and the index kernel on grid (chunks, 1, 1), one CTA per
// `chunk` ids, then the gather kernel on grid (min(ceil(T*k / 4) *
// ceil(H / (8 * threads)), 65535), 1, 1), with their exact 12, 29 and 24
// parameters (the sources and counts carved
// from the workspace; 31 for the gather kernel of an out=f8E4M3FN entry, the
// rows' scales after its rows; 33 for the scatter kernel a scatter_from
// entry launches instead from T = scatter_from on, the slots [T, k] for the
// sources, on a grid of groups of 4 tokens),
// and nothing else. The entries are those of permuteBundle(),
// permuteFp8Bundle() and permuteScatterBundle() (TestBundles.h); with
// index_counts=1, no count launch for a single chunk.
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "LaunchChecks.h"
#include "TestBundles.h"
#include "TestHarness.h"

using namespace moe_test;

namespace {

constexpr uint64_t kTokens = 0x7f0000210000, kIds = 0x7f0000220000,
                   kRows = 0x7f0000230000, kOffsets = 0x7f0000240000,
                   kSlots = 0x7f0000250000, kWorkspace = 0x7f0000260000,
                   kRowsScale = 0x7f0000270000;
constexpr int64_t kMax = 2147483647;

FakeGpu &install() {
  FakeGpu &gpu = installFakeDriver();
  for (const char *symbol : {kPermCount64, kPermCount32, kPermCountWide})
    gpu.wordParams[symbol] = 12;
  for (const char *symbol : {kPermIndex64, kPermIndex32, kPermIndexWide})
    gpu.wordParams[symbol] = 29;
  for (const char *symbol : {kPermGather64, kPermGather32})
    gpu.wordParams[symbol] = 24;
  for (const char *symbol : {kPermGatherE4m3_64, kPermGatherE4m3_32})
    gpu.wordParams[symbol] = 31;
  for (const char *symbol : {kPermScatterE4m3_64, kPermScatterE4m3_32})
    gpu.wordParams[symbol] = 33;
  gpu.wordParams[kRouteBias] = 21;
  gpu.wordParams[kCombine] = 28;
  return gpu;
}

/// Arguments of entry perm (E = 128, k = 8, H = 2048, i64, chunk 4096).
moePermuteArgs perm(int64_t tokens) {
  moePermuteArgs a;
  a.tokens = kTokens;
  a.ids = kIds;
  a.rows = kRows;
  a.offsets = kOffsets;
  a.slots = kSlots;
  a.workspace = kWorkspace;
  a.tokens_count = tokens;
  a.hidden = 2048;
  a.rows_scale = 0;
  return a;
}

/// Arguments of entry perm32 (E = 4, k = 2, H dynamic, i32, chunk 32).
moePermuteArgs perm32(int64_t tokens, int64_t hidden) {
  moePermuteArgs a = perm(tokens);
  a.hidden = hidden;
  return a;
}

moeStatus permute(moeBundle *bundle, const char *entry, const moePermuteArgs &a,
                  void *stream = nullptr) {
  return moePermute(bundle, entry, &a, stream);
}

/// An entry of permuteBundle(): its sizes and kernels.
struct KernelShape {
  const char *symbol;
  unsigned threads, smem;
};
struct PermuteEntry {
  const char *name;
  int64_t experts, topK, chunk;
  KernelShape count, index, gather;
  KernelShape scatter = {nullptr, 0, 0}; // with scatter_from
  int64_t scatterFrom = 0;
};

/// Whether a call of `entry` with `a` launches the scatter kernel.
bool scatters(const PermuteEntry &entry, const moePermuteArgs &a) {
  return entry.scatterFrom && a.tokens_count >= entry.scatterFrom;
}

/// What a call of `entry` with `a` launches, computed by hand: N = T*k ids,
/// the counts at the first multiple of 256 bytes after the N*4 bytes of
/// sources, one CTA per chunk of ids.
struct Expected {
  int64_t n, chunks;
  uint64_t sources, counts;
};
Expected expected(const PermuteEntry &entry, const moePermuteArgs &a) {
  Expected x;
  x.n = a.tokens_count * entry.topK;
  x.chunks = (x.n + entry.chunk - 1) / entry.chunk;
  x.sources = a.workspace;
  x.counts = a.workspace + uint64_t((x.n * 4 + 255) / 256 * 256);
  return x;
}

/// The 12 parameters of the count kernel: ids [T, k], counts [chunks * E].
std::vector<uint64_t> countParams(const PermuteEntry &entry,
                                  const moePermuteArgs &a) {
  Expected x = expected(entry, a);
  std::vector<uint64_t> words;
  pushMemref2D(words, a.ids, a.tokens_count, entry.topK);
  pushMemref1D(words, x.counts, x.chunks * entry.experts);
  return words;
}

/// The 29 parameters of the index kernel: ids [T, k], counts [chunks * E],
/// offsets [E + 1], slots [T, k], sources [N].
std::vector<uint64_t> indexParams(const PermuteEntry &entry,
                                  const moePermuteArgs &a) {
  Expected x = expected(entry, a);
  std::vector<uint64_t> words;
  pushMemref2D(words, a.ids, a.tokens_count, entry.topK);
  pushMemref1D(words, x.counts, x.chunks * entry.experts);
  pushMemref1D(words, a.offsets, entry.experts + 1);
  pushMemref2D(words, a.slots, a.tokens_count, entry.topK);
  pushMemref1D(words, x.sources, x.n);
  return words;
}

/// The 24 parameters of the gather kernel: tokens [T, H], sources [N],
/// offsets [E + 1], rows [N, H]; 31 for an out=f8E4M3FN entry (whose args
/// have rows_scale), rows_scale [N, H/128] last; 33 for the scatter kernel,
/// which takes the slots [T, k] for the sources.
std::vector<uint64_t> gatherParams(const PermuteEntry &entry,
                                   const moePermuteArgs &a) {
  Expected x = expected(entry, a);
  std::vector<uint64_t> words;
  pushMemref2D(words, a.tokens, a.tokens_count, a.hidden);
  if (scatters(entry, a))
    pushMemref2D(words, a.slots, a.tokens_count, entry.topK);
  else
    pushMemref1D(words, x.sources, x.n);
  pushMemref1D(words, a.offsets, entry.experts + 1);
  pushMemref2D(words, a.rows, x.n, a.hidden);
  if (a.rows_scale)
    pushMemref2D(words, a.rows_scale, x.n, a.hidden / 128);
  return words;
}

void checkOneLaunch(const FakeLaunch &got, const KernelShape &kernel,
                    unsigned gridX, const std::vector<uint64_t> &params) {
  checkLaunchShape(got, kernel.symbol, gridX, kernel.threads, kernel.smem,
                   testStream());
  checkWordParams(got, kernel.symbol, params);
}

/// After loading, runs moePermute(entry, a) and checks that it made exactly
/// three launches, count, index then gather, on grids (chunks, 1, 1),
/// (chunks, 1, 1) and (gatherGrid, 1, 1) — or without `counted` the last
/// two — with their blocks, smem, the stream and parameters; and no driver
/// call but the context lookup.
void checkPermute(moeBundle *bundle, const PermuteEntry &entry,
                  const moePermuteArgs &a, unsigned chunks, unsigned gatherGrid,
                  bool counted = true) {
  CHECK_EQ(int64_t(chunks), expected(entry, a).chunks);
  long first = runAfterLoad(
      bundle,
      [&](void *stream) { return permute(bundle, entry.name, a, stream); },
      counted ? "cuCtxGetCurrent cuCtxGetId cuLaunchKernelEx cuLaunchKernelEx "
                "cuLaunchKernelEx"
              : "cuCtxGetCurrent cuCtxGetId cuLaunchKernelEx cuLaunchKernelEx",
      counted ? 3 : 2);
  if (first < 0)
    return;
  const std::vector<FakeLaunch> &launches = fakeGpu().launches;
  if (counted)
    checkOneLaunch(launches[first++], entry.count, chunks,
                   countParams(entry, a));
  checkOneLaunch(launches[first], entry.index, chunks, indexParams(entry, a));
  checkOneLaunch(launches[first + 1],
                 scatters(entry, a) ? entry.scatter : entry.gather, gatherGrid,
                 gatherParams(entry, a));
}

const PermuteEntry kPerm = {"perm",
                            128,
                            8,
                            4096,
                            {kPermCount64, 1024, 0},
                            {kPermIndex64, 1024, 17408},
                            {kPermGather64, 128, 0}};
const PermuteEntry kPerm32 = {"perm32",
                              4,
                              2,
                              32,
                              {kPermCount32, 256, 0},
                              {kPermIndex32, 256, 0},
                              {kPermGather32, 256, 0}};
// The gather kernel is perm32's symbol with 128 threads.
const PermuteEntry kWide = {"wide",
                            1024,
                            1,
                            65536,
                            {kPermCountWide, 1024, 4096},
                            {kPermIndexWide, 1024, 73728},
                            {kPermGather32, 128, 0}};
// permuteFp8Bundle(): perm's and perm32's kernels but quantizing gathers.
const PermuteEntry kQperm = {"qperm",
                             128,
                             8,
                             4096,
                             {kPermCount64, 1024, 0},
                             {kPermIndex64, 1024, 17408},
                             {kPermGatherE4m3_64, 128, 0}};
const PermuteEntry kQperm32 = {"qperm32",
                               4,
                               2,
                               32,
                               {kPermCount32, 256, 0},
                               {kPermIndex32, 256, 0},
                               {kPermGatherE4m3_32, 256, 0}};

// permuteScatterBundle(): qperm's and qperm32's with scatter kernels.
const PermuteEntry kSperm = {"sperm",
                             128,
                             8,
                             4096,
                             {kPermCount64, 1024, 0},
                             {kPermIndex64, 1024, 17408},
                             {kPermGatherE4m3_64, 128, 0},
                             {kPermScatterE4m3_64, 256, 0},
                             128};
const PermuteEntry kSperm32 = {"sperm32",
                               4,
                               2,
                               32,
                               {kPermCount32, 256, 0},
                               {kPermIndex32, 256, 0},
                               {kPermGatherE4m3_32, 256, 0},
                               {kPermScatterE4m3_32, 256, 0},
                               16};

/// Arguments of entry qperm (E = 128, k = 8, H = 2048, i64, out=f8E4M3FN).
moePermuteArgs qperm(int64_t tokens) {
  moePermuteArgs a = perm(tokens);
  a.rows_scale = kRowsScale;
  return a;
}

/// Arguments of entry qperm32 (E = 4, k = 2, H dynamic, i32, out=f8E4M3FN).
moePermuteArgs qperm32(int64_t tokens, int64_t hidden) {
  moePermuteArgs a = qperm(tokens);
  a.hidden = hidden;
  return a;
}

} // namespace

TEST(permuteLaunchesPerContract) {
  install();
  moeBundle *bundle = OPEN_VALID(permuteBundle());
  if (!bundle)
    return;
  // perm: k = 8, chunks of 4096 ids; the gather kernel copies 4 rows and
  // 1024 columns per CTA (H = 2048: 2 blocks), its grid capped at 65535.
  struct {
    int64_t tokens;
    unsigned chunks, gather;
  } permGrids[] = {{1, 1, 4},
                   {511, 1, 2044},
                   {512, 1, 2048},  // N = chunk
                   {513, 2, 2052},  // N = chunk + 8: a second chunk
                   {1000, 2, 4000}, // several chunks
                   {8191, 16, 32764},
                   {16383, 32, 65532},
                   {16384, 32, 65535}, // 131072 rows: capped, grid-stride
                   {kMax / 8, 524288, 65535}};
  for (const auto &g : permGrids)
    checkPermute(bundle, kPerm, perm(g.tokens), g.chunks, g.gather);
  // perm32: dynamic H, i32 offsets and slots, chunks of 32 ids (k = 2).
  moePermuteArgs a = perm32(1, 8);
  a.offsets += 4;
  a.slots += 4;
  a.ids += 4;
  a.workspace += 256;
  checkPermute(bundle, kPerm32, a, 1, 1);
  // H = 7168 in blocks of 256 threads x 8 columns: 4 (the last one short).
  struct {
    int64_t tokens;
    unsigned chunks;
  } perm32Grids[] = {{15, 1}, {16, 1}, {17, 2}, {48, 3}, {49, 4}, {4096, 256}};
  for (const auto &g : perm32Grids)
    checkPermute(bundle, kPerm32, perm32(g.tokens, 7168), g.chunks,
                 unsigned((2 * g.tokens + 3) / 4 * 4));
  checkPermute(bundle, kPerm32, perm32(3, 2048), 1, 2);
  checkPermute(bundle, kPerm32, perm32(3, 2056), 1, 4);
  // wide: k = 1, so N = T: chunk - 1, chunk and chunk + 1 ids; at most
  // 2^31 - 1 ids in 32768 chunks of 65536.
  struct {
    int64_t tokens;
    unsigned chunks, gather;
  } wideGrids[] = {
      {3, 1, 1},         {65535, 1, 16384},         {65536, 1, 16384},
      {65537, 2, 16385}, {65536 * 5 + 7, 6, 65535}, {kMax, 32768, 65535}};
  for (const auto &g : wideGrids)
    checkPermute(bundle, kWide, perm32(g.tokens, 8), g.chunks, g.gather);
  moeBundleClose(bundle);
}

TEST(permuteRejectsNullsAndOtherEntries) {
  install();
  moeBundle *bundle = openBundle(permuteBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  moePermuteArgs a = perm(16);
  CHECK_REJECTED(moePermute(nullptr, "perm", &a, nullptr), bad,
                 "moePermute: bundle is NULL");
  CHECK_REJECTED(moePermute(bundle, nullptr, &a, nullptr), bad,
                 "moePermute: entry name is NULL");
  CHECK_REJECTED(moePermute(bundle, "perm", nullptr, nullptr), bad,
                 "moePermute: args is NULL");
  CHECK_REJECTED(permute(bundle, "permute", a), MOE_STATUS_NOT_FOUND,
                 "moePermute: no entry 'permute' in the bundle (entries: "
                 "perm, perm32, wide, router, combine)");
  CHECK_REJECTED(permute(bundle, "router", a), bad,
                 "moePermute(router): the entry is op=moe.route abi=route.v1, "
                 "not op=moe.permute with abi=permute.v2");
  CHECK_REJECTED(permute(bundle, "combine", a), bad,
                 "moePermute(combine): the entry is op=moe.unpermute "
                 "abi=unpermute.v2, not op=moe.permute with abi=permute.v2");
  // The other calls refuse permute entries.
  moeGroupedMatmulArgs gemm = {};
  CHECK_REJECTED(moeGroupedMatmul(bundle, "perm", &gemm, nullptr), bad,
                 "moeGroupedMatmul(perm): the entry is op=moe.permute "
                 "abi=permute.v2, not op=moe.grouped_matmul");
  moeRouteArgs route = {};
  route.tokens = 1;
  CHECK_REJECTED(moeRoute(bundle, "perm", &route, nullptr), bad,
                 "moeRoute(perm): the entry is op=moe.permute abi=permute.v2, "
                 "not op=moe.route with abi=route.v1");
  moeUnpermuteArgs unpermute = {};
  unpermute.tokens = 1;
  CHECK_REJECTED(moeUnpermute(bundle, "perm32", &unpermute, nullptr), bad,
                 "moeUnpermute(perm32): the entry is op=moe.permute "
                 "abi=permute.v2, not op=moe.unpermute");
  moeBundleClose(bundle);

  // The op must be moe.permute too.
  std::string other = permuteBundle();
  other.replace(other.find("op=moe.permute"), 14, "op=moe.scatter");
  bundle = openBundle(other);
  CHECK(bundle != nullptr);
  CHECK_REJECTED(permute(bundle, "perm", a), bad,
                 "moePermute(perm): the entry is op=moe.scatter "
                 "abi=permute.v2, not op=moe.permute with abi=permute.v2");
  moeBundleClose(bundle);
}

TEST(permuteRejectsBadSizes) {
  install();
  moeBundle *bundle = openBundle(permuteBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  CHECK_REJECTED(permute(bundle, "perm", perm(0)), bad,
                 "moePermute(perm): T = 0 must be at least 1");
  CHECK_REJECTED(permute(bundle, "perm", perm(-1)), bad,
                 "T = -1 must be at least 1");
  CHECK_REJECTED(permute(bundle, "perm32", perm32(4097, 64)), bad,
                 "moePermute(perm32): T = 4097 exceeds the entry's max_rows = "
                 "4096");
  CHECK_REJECTED(permute(bundle, "perm", perm(kMax + 1)), bad,
                 "T = 2147483648 exceeds the entry's max_rows = 2147483647");
  // T*k rows must fit in 32 bits.
  CHECK_REJECTED(permute(bundle, "perm", perm(kMax / 8 + 1)), bad,
                 "moePermute(perm): T*k = 2147483648 rows exceeds 2147483647 "
                 "(T = 268435456, k = 8)");
  CHECK_REJECTED(permute(bundle, "perm", perm(kMax)), bad,
                 "T*k = 17179869176 rows exceeds 2147483647");
  // A static H must match; a dynamic one is checked on its own.
  moePermuteArgs a = perm(16);
  a.hidden = 2056;
  CHECK_REJECTED(permute(bundle, "perm", a), bad,
                 "moePermute(perm): H = 2056 does not match the entry's "
                 "hidden = 2048");
  a.hidden = -1;
  CHECK_REJECTED(permute(bundle, "perm", a), bad,
                 "H = -1 does not match the entry's hidden = 2048");
  CHECK_REJECTED(permute(bundle, "perm32", perm32(16, 4)), bad,
                 "moePermute(perm32): H = 4 is less than 8 (rows are copied "
                 "in 16-byte vectors)");
  CHECK_REJECTED(permute(bundle, "perm32", perm32(16, 0)), bad,
                 "H = 0 is less than 8");
  CHECK_REJECTED(permute(bundle, "perm32", perm32(16, -8)), bad,
                 "H = -8 is less than 8");
  CHECK_REJECTED(permute(bundle, "perm32", perm32(16, 4100)), bad,
                 "moePermute(perm32): H = 4100 is not a multiple of 8 (rows "
                 "are copied in 16-byte vectors)");
  // Byte sizes beyond int64: tokens, then rows (k = 2).
  CHECK_REJECTED(permute(bundle, "perm32", perm32(1, int64_t(1) << 62)), bad,
                 "moePermute(perm32): T*H*2 (bytes of tokens) overflows int64 "
                 "(T = 1, H = 4611686018427387904)");
  CHECK_REJECTED(permute(bundle, "perm32", perm32(1, int64_t(1) << 61)), bad,
                 "moePermute(perm32): T*k*H*2 (bytes of rows) overflows int64 "
                 "(T*k = 2, H = 2305843009213693952)");
  // Sizes come before pointers.
  a = perm(0);
  a.tokens = 0;
  CHECK_REJECTED(permute(bundle, "perm", a), bad, "T = 0 must be at least 1");
  moeBundleClose(bundle);
}

TEST(permuteRejectsBadPointers) {
  install();
  moeBundle *bundle = openBundle(permuteBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  struct {
    uint64_t moePermuteArgs::*field;
    const char *name;
  } fields[] = {{&moePermuteArgs::tokens, "tokens"},
                {&moePermuteArgs::ids, "ids"},
                {&moePermuteArgs::rows, "rows"},
                {&moePermuteArgs::offsets, "offsets"},
                {&moePermuteArgs::slots, "slots"},
                {&moePermuteArgs::workspace, "workspace"}};
  for (const auto &f : fields) {
    moePermuteArgs a = perm(16);
    a.*f.field = 0;
    CHECK_REJECTED(permute(bundle, "perm", a), bad,
                   "moePermute(perm): " + std::string(f.name) +
                       " pointer is NULL");
  }
  moePermuteArgs a = perm(16);
  a.workspace = 0;
  CHECK_REJECTED(permute(bundle, "perm", a), bad,
                 "workspace pointer is NULL (moePermuteWorkspaceBytes says "
                 "how large)");

  // Alignment: tokens and rows 16 bytes, ids 4, the workspace 256 (where
  // its counts start), offsets and slots their element size.
  a = perm(16);
  a.tokens = kTokens + 8;
  CHECK_REJECTED(permute(bundle, "perm", a), bad,
                 "moePermute(perm): tokens pointer 0x7f0000210008 is not "
                 "16-byte aligned");
  a = perm(16);
  a.rows = kRows + 4;
  CHECK_REJECTED(permute(bundle, "perm", a), bad,
                 "rows pointer 0x7f0000230004 is not 16-byte aligned");
  a = perm(16);
  a.ids = kIds + 2;
  CHECK_REJECTED(permute(bundle, "perm", a), bad,
                 "ids pointer 0x7f0000220002 is not 4-byte aligned");
  const struct {
    uint64_t offset;
    const char *message;
  } misaligned[] = {{1, "moePermute(perm): workspace pointer 0x7f0000260001 "
                        "is not 256-byte aligned"},
                    {4, "workspace pointer 0x7f0000260004 is not 256-byte "
                        "aligned"},
                    {128, "workspace pointer 0x7f0000260080 is not 256-byte "
                          "aligned"}};
  for (const auto &m : misaligned) {
    a = perm(16);
    a.workspace = kWorkspace + m.offset;
    CHECK_REJECTED(permute(bundle, "perm", a), bad, m.message);
  }
  a = perm32(16, 64);
  a.workspace = kWorkspace + 16;
  CHECK_REJECTED(permute(bundle, "perm32", a), bad,
                 "moePermute(perm32): workspace pointer 0x7f0000260010 is not "
                 "256-byte aligned");
  a = perm(16);
  a.offsets = kOffsets + 4;
  CHECK_REJECTED(permute(bundle, "perm", a), bad,
                 "moePermute(perm): offsets pointer 0x7f0000240004 is not "
                 "8-byte aligned (the entry's offsets and slots are i64)");
  a = perm(16);
  a.slots = kSlots + 4;
  CHECK_REJECTED(permute(bundle, "perm", a), bad,
                 "slots pointer 0x7f0000250004 is not 8-byte aligned (the "
                 "entry's offsets and slots are i64)");
  a = perm32(16, 64);
  a.offsets = kOffsets + 2;
  CHECK_REJECTED(permute(bundle, "perm32", a), bad,
                 "moePermute(perm32): offsets pointer 0x7f0000240002 is not "
                 "4-byte aligned (the entry's offsets and slots are i32)");
  a = perm32(16, 64);
  a.slots = kSlots + 2;
  CHECK_REJECTED(permute(bundle, "perm32", a), bad,
                 "slots pointer 0x7f0000250002 is not 4-byte aligned");
  // Nulls are reported before misalignments.
  a = perm(16);
  a.tokens = kTokens + 1;
  a.slots = 0;
  CHECK_REJECTED(permute(bundle, "perm", a), bad, "slots pointer is NULL");
  // 16 bytes for tokens and rows, 256 for the workspace, 8 for the rest, is
  // enough.
  a = perm(16);
  a.tokens += 16;
  a.rows += 16;
  a.ids += 8;
  a.offsets += 8;
  a.slots += 8;
  a.workspace += 256;
  CHECK_EQ(permute(bundle, "perm", a), MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);
}

TEST(permuteWorkspaceBytes) {
  install();
  moeBundle *bundle = openBundle(permuteBundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  int64_t bytes = -7;
  // The sources, an i32 per id (N*4 bytes), then from the next multiple of
  // 256 bytes the counts, an i32 per chunk and expert.
  struct {
    const char *entry;
    int64_t tokens, bytes;
  } sizes[] = {
      // perm, N = 24: sources 96 bytes, 1 chunk of 128 counts at 256.
      {"perm", 3, 256 + 128 * 4},
      // N = 64 = 256 bytes of sources exactly: the counts right after.
      {"perm", 8, 256 + 128 * 4},
      // N = 4096 ids: one chunk; N = 4104: two.
      {"perm", 512, 16384 + 128 * 4},
      {"perm", 513, 16640 + 2 * 128 * 4},
      // perm32, N = 8192 (32768 bytes): 256 chunks of 32 ids, 4 counts each.
      {"perm32", 4096, 32768 + 256 * 4 * 4},
      {"perm32", 17, 256 + 2 * 4 * 4},
      // N = 2147483640: sources 8589934560 bytes, 524288 chunks of 4096.
      {"perm", kMax / 8, 8589934592 + int64_t(524288) * 128 * 4},
      // wide, N = 2^31 - 1: 32768 chunks of 65536 ids, 1024 counts each.
      {"wide", kMax, 8589934592 + int64_t(32768) * 1024 * 4},
      {"wide", 65536, 262144 + 1024 * 4},
      {"wide", 65537, 262400 + 2 * 1024 * 4}};
  for (const auto &size : sizes) {
    bytes = -7;
    CHECK_EQ(moePermuteWorkspaceBytes(bundle, size.entry, size.tokens, &bytes),
             MOE_STATUS_SUCCESS);
    CHECK_EQ(bytes, size.bytes);
  }
  bytes = -7;
  bytes = -7;
  CHECK_REJECTED(moePermuteWorkspaceBytes(nullptr, "perm", 3, &bytes), bad,
                 "moePermuteWorkspaceBytes: bundle is NULL");
  CHECK_REJECTED(moePermuteWorkspaceBytes(bundle, nullptr, 3, &bytes), bad,
                 "moePermuteWorkspaceBytes: entry name is NULL");
  CHECK_REJECTED(moePermuteWorkspaceBytes(bundle, "perm", 3, nullptr), bad,
                 "moePermuteWorkspaceBytes: bytes is NULL");
  CHECK_REJECTED(moePermuteWorkspaceBytes(bundle, "nope", 3, &bytes),
                 MOE_STATUS_NOT_FOUND,
                 "moePermuteWorkspaceBytes: no entry 'nope' in the bundle");
  CHECK_REJECTED(moePermuteWorkspaceBytes(bundle, "router", 3, &bytes), bad,
                 "moePermuteWorkspaceBytes(router): the entry is op=moe.route "
                 "abi=route.v1, not op=moe.permute with abi=permute.v2");
  CHECK_REJECTED(moePermuteWorkspaceBytes(bundle, "perm", 0, &bytes), bad,
                 "moePermuteWorkspaceBytes(perm): T = 0 must be at least 1");
  CHECK_REJECTED(moePermuteWorkspaceBytes(bundle, "perm32", 4097, &bytes), bad,
                 "T = 4097 exceeds the entry's max_rows = 4096");
  CHECK_REJECTED(moePermuteWorkspaceBytes(bundle, "perm", kMax / 8 + 1, &bytes),
                 bad, "T*k = 2147483648 rows exceeds 2147483647");
  CHECK_EQ(bytes, -7); // untouched on failure
  moeBundleClose(bundle);
}

TEST(permuteIndexCountsSkipsTheCountKernel) {
  // index_counts=1 (perm): the index kernel counts a single chunk itself,
  // so one chunk launches index and gather only; two chunks all three.
  // index_counts=0 (perm32) is as absent.
  install();
  std::string text = permuteBundle();
  auto add = [&](const std::string &at, const std::string &key) {
    size_t where = text.find(at);
    CHECK(where != std::string::npos);
    if (where != std::string::npos)
      text.insert(where + at.size() - 1, key);
  };
  add("chunk=4096\n", " index_counts=1");
  add("chunk=32\n", " index_counts=0");
  moeBundle *bundle = OPEN_VALID(text);
  if (!bundle)
    return;
  checkPermute(bundle, kPerm, perm(1), 1, 4, /*counted=*/false);
  checkPermute(bundle, kPerm, perm(512), 1, 2048, /*counted=*/false);
  checkPermute(bundle, kPerm, perm(513), 2, 2052);
  checkPermute(bundle, kPerm32, perm32(3, 8), 1, 2);
  moeBundleClose(bundle);
}

TEST(permuteLoadsAndFails) {
  FakeGpu &gpu = install();
  moeBundle *bundle = openBundle(permuteBundle());
  // The first call loads the bundle: MAX_DYNAMIC_SHARED_SIZE is set for the
  // kernels with smem > 0 only (both index kernels, one of them above
  // 48 KiB, and wide's count kernel); every kernel record's residency is
  // checked.
  CHECK_EQ(permute(bundle, "perm", perm(4)), MOE_STATUS_SUCCESS);
  CHECK_CONTAINS(callsSince(0), "cuInit");
  CHECK_EQ(gpu.smemAttributes.size(), size_t(3));
  if (gpu.smemAttributes.size() == 3) {
    CHECK_EQ(gpu.smemAttributes[0].first, std::string(kPermIndex64));
    CHECK_EQ(gpu.smemAttributes[0].second, 17408);
    CHECK_EQ(gpu.smemAttributes[1].first, std::string(kPermCountWide));
    CHECK_EQ(gpu.smemAttributes[1].second, 4096);
    CHECK_EQ(gpu.smemAttributes[2].first, std::string(kPermIndexWide));
    CHECK_EQ(gpu.smemAttributes[2].second, 73728);
  }
  // perm (3), perm32 (3), wide (3: its gather kernel has other threads than
  // perm32's), router, combine.
  CHECK_EQ(gpu.occupancyQueries.size(), size_t(11));
  CHECK_EQ(gpu.liveModules, 1);
  CHECK_EQ(gpu.launches.size(), size_t(3));

  // A failed count launch launches nothing more; a failed index or gather
  // launch says how many kernels were issued.
  gpu.failLaunchNumber = 3;
  CHECK_STATUS(permute(bundle, "perm32", perm32(5, 64)), MOE_STATUS_CUDA_ERROR,
               "moePermute: cuLaunchKernelEx('moe_permute_count_e4_k2' "
               "of entry 'perm32', grid (1, 1, 1), block (256, 1, 1), smem 0, "
               "programmatic stream serialization; 0 of 3 launches already "
               "issued) failed: CUDA_ERROR_INVALID_VALUE (fake driver error)");
  CHECK_EQ(gpu.launches.size(), size_t(4));
  gpu.failLaunchNumber = 5;
  CHECK_STATUS(permute(bundle, "perm32", perm32(100, 64)),
               MOE_STATUS_CUDA_ERROR,
               "moePermute: cuLaunchKernelEx('moe_permute_index_e4_k2_off32' "
               "of entry 'perm32', grid (7, 1, 1), block (256, 1, 1), smem 0, "
               "programmatic stream serialization; 1 of 3 launches already "
               "issued) failed: CUDA_ERROR_INVALID_VALUE");
  CHECK_EQ(gpu.launches.size(), size_t(6));
  gpu.failLaunchNumber = 8;
  gpu.launchResult = 719;
  CHECK_STATUS(permute(bundle, "perm", perm(5)), MOE_STATUS_CUDA_ERROR,
               "moePermute: cuLaunchKernelEx('moe_permute_gather_off64' of "
               "entry 'perm', grid (20, 1, 1), block (128, 1, 1), smem 0, "
               "programmatic stream serialization; 2 of 3 launches already "
               "issued) failed: CUresult 719");
  CHECK_EQ(gpu.launches.size(), size_t(9));
  moeBundleClose(bundle);
  CHECK_EQ(gpu.liveModules, 0);

  // No driver: the arguments are checked first, then NO_GPU.
  setDriverForTesting(nullptr, "dlopen(libcuda.so.1) failed: no such file");
  bundle = openBundle(permuteBundle());
  CHECK_STATUS(permute(bundle, "perm", perm(0)), MOE_STATUS_INVALID_ARGUMENT,
               "T = 0");
  CHECK_STATUS(permute(bundle, "perm", perm(1)), MOE_STATUS_NO_GPU,
               "moePermute: no CUDA driver: dlopen(libcuda.so.1) failed");
  int64_t bytes = 0;
  CHECK_EQ(moePermuteWorkspaceBytes(bundle, "perm", 2, &bytes),
           MOE_STATUS_SUCCESS); // no driver needed
  CHECK_EQ(bytes, 256 + 128 * 4);
  moeBundleClose(bundle);
  setDriverForTesting(nullptr);

  // A kernel that cannot be resident, or a missing symbol, fails the load.
  install();
  gpu.ctasPerSm[kPermGather64] = 0;
  bundle = openBundle(permuteBundle());
  CHECK_STATUS(permute(bundle, "perm32", perm32(1, 8)), MOE_STATUS_UNSUPPORTED,
               "moePermute: kernel 'moe_permute_gather_off64' (entry 'perm') "
               "cannot be resident: 128 threads, 0 bytes of shared memory");
  gpu.ctasPerSm.clear();
  gpu.missingSymbols.insert(kPermGather32);
  CHECK_STATUS(permute(bundle, "perm", perm(1)), MOE_STATUS_NOT_FOUND,
               "moePermute: kernel symbol 'moe_permute_gather_off32' (entry "
               "'perm32') not found in image 'moe_kernels'");
  CHECK_EQ(gpu.launches.size(), size_t(0));
  moeBundleClose(bundle);
}

TEST(permuteFp8LaunchesPerContract) {
  // The count and index kernels and every grid as for bf16 rows; the gather
  // kernel takes the rows' e4m3 codes [N, H] and then their f32 scales
  // [N, H/128]: 31 parameters.
  install();
  moeBundle *bundle = OPEN_VALID(permuteFp8Bundle());
  if (!bundle)
    return;
  struct {
    int64_t tokens;
    unsigned chunks, gather;
  } grids[] = {
      {1, 1, 4}, {513, 2, 2052}, {32768, 64, 65535}, {kMax / 8, 524288, 65535}};
  for (const auto &g : grids)
    checkPermute(bundle, kQperm, qperm(g.tokens), g.chunks, g.gather);
  // qperm32: a dynamic H of whole [1, 128] groups; rows_scale 4-byte
  // aligned suffices, rows stays 16-byte aligned.
  moePermuteArgs a = qperm32(17, 384);
  a.rows_scale += 4;
  a.rows += 16;
  checkPermute(bundle, kQperm32, a, 2, 9);
  checkPermute(bundle, kQperm32, qperm32(4096, 7168), 256, 8192);

  // By hand, parameter by parameter: qperm32, T = 3 (N = 6), H = 256.
  a = qperm32(3, 256);
  long first = runAfterLoad(
      bundle,
      [&](void *stream) { return permute(bundle, "qperm32", a, stream); },
      "cuCtxGetCurrent cuCtxGetId cuLaunchKernelEx cuLaunchKernelEx "
      "cuLaunchKernelEx",
      3);
  if (first >= 0) {
    const FakeLaunch &gather = fakeGpu().launches[first + 2];
    const std::vector<uint64_t> words = {
        kTokens,    kTokens,    0, 3, 256, 256, 1,  // tokens [T, H]
        kWorkspace, kWorkspace, 0, 6, 1,            // sources [N]
        kOffsets,   kOffsets,   0, 5, 1,            // offsets [E + 1]
        kRows,      kRows,      0, 6, 256, 256, 1,  // rows [N, H] (codes)
        kRowsScale, kRowsScale, 0, 6, 2,   2,   1}; // rows_scale [N, H/128]
    CHECK_EQ(gather.function, std::string(kPermGatherE4m3_32));
    CHECK_EQ(gather.grid[0], 2u);
    checkWordParams(gather, "qperm32 gather", words);
  }
  // The same workspace as for bf16 rows.
  int64_t bytes = 0, bf16Bytes = 0;
  moeBundle *bf16 = OPEN_VALID(permuteBundle());
  if (bf16) {
    for (int64_t tokens : {3, 513, 4096}) {
      CHECK_EQ(moePermuteWorkspaceBytes(bundle, "qperm32", tokens, &bytes),
               MOE_STATUS_SUCCESS);
      CHECK_EQ(moePermuteWorkspaceBytes(bf16, "perm32", tokens, &bf16Bytes),
               MOE_STATUS_SUCCESS);
      CHECK_EQ(bytes, bf16Bytes);
    }
    moeBundleClose(bf16);
  }
  moeBundleClose(bundle);
}

TEST(permuteScatterLaunchesPerContract) {
  // Below T = scatter_from as out=f8E4M3FN; from it on the scatter kernel
  // (the fourth) instead of the gather: it takes the slots [T, k] for the
  // sources [N] (33 parameters), on a grid of groups of 4 tokens, not rows,
  // times its column blocks (sperm's scatter has 256 threads: one block of
  // H = 2048).
  install();
  moeBundle *bundle = OPEN_VALID(permuteScatterBundle());
  if (!bundle)
    return;
  struct {
    int64_t tokens;
    unsigned chunks, gather;
  } grids[] = {{1, 1, 4},
               {127, 1, 508},
               {128, 1, 32},
               {513, 2, 129},
               {32768, 64, 8192},
               {262140, 512, 65535},
               {kMax / 8, 524288, 65535}};
  for (const auto &g : grids)
    checkPermute(bundle, kSperm, qperm(g.tokens), g.chunks, g.gather);
  checkPermute(bundle, kSperm32, qperm32(15, 384), 1, 8);
  checkPermute(bundle, kSperm32, qperm32(17, 384), 2, 5);
  checkPermute(bundle, kSperm32, qperm32(4096, 7168), 256, 4096);

  // By hand, parameter by parameter: sperm32, T = 16 (N = 32), H = 256.
  moePermuteArgs a = qperm32(16, 256);
  long first = runAfterLoad(
      bundle,
      [&](void *stream) { return permute(bundle, "sperm32", a, stream); },
      "cuCtxGetCurrent cuCtxGetId cuLaunchKernelEx cuLaunchKernelEx "
      "cuLaunchKernelEx",
      3);
  if (first >= 0) {
    const FakeLaunch &scatter = fakeGpu().launches[first + 2];
    const std::vector<uint64_t> words = {
        kTokens,    kTokens,    0, 16, 256, 256, 1,  // tokens [T, H]
        kSlots,     kSlots,     0, 16, 2,   2,   1,  // slots [T, k]
        kOffsets,   kOffsets,   0, 5,  1,            // offsets [E + 1]
        kRows,      kRows,      0, 32, 256, 256, 1,  // rows [N, H] (codes)
        kRowsScale, kRowsScale, 0, 32, 2,   2,   1}; // rows_scale [N, H/128]
    CHECK_EQ(scatter.function, std::string(kPermScatterE4m3_32));
    CHECK_EQ(scatter.grid[0], 4u);
    checkWordParams(scatter, "sperm32 scatter", words);
  }
  moeBundleClose(bundle);
}

TEST(permuteFp8RejectsBadArguments) {
  install();
  moeBundle *bundle = OPEN_VALID(permuteFp8Bundle());
  if (!bundle)
    return;
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  // rows_scale: required, 4-byte aligned; nulls before misalignments, in
  // the order of moePermuteArgs (rows_scale last).
  moePermuteArgs a = qperm(16);
  a.rows_scale = 0;
  CHECK_REJECTED(permute(bundle, "qperm", a), bad,
                 "moePermute(qperm): rows_scale pointer is NULL (out=f8E4M3FN "
                 "entries write the f32 scales [T*k, H/128] of rows)");
  a = qperm(16);
  a.rows_scale = kRowsScale + 2;
  CHECK_REJECTED(permute(bundle, "qperm", a), bad,
                 "moePermute(qperm): rows_scale pointer 0x7f0000270002 is not "
                 "4-byte aligned (out=f8E4M3FN entries write the f32 scales "
                 "[T*k, H/128] of rows)");
  a = qperm(16);
  a.rows_scale = 0;
  a.tokens = kTokens + 8;
  CHECK_REJECTED(permute(bundle, "qperm", a), bad,
                 "rows_scale pointer is NULL");
  a = qperm(16);
  a.rows_scale = kRowsScale + 1;
  a.workspace = kWorkspace + 128;
  CHECK_REJECTED(permute(bundle, "qperm", a), bad,
                 "moePermute(qperm): workspace pointer 0x7f0000260080 is not "
                 "256-byte aligned");
  a = qperm(16);
  a.rows_scale = 0;
  a.rows = 0;
  CHECK_REJECTED(permute(bundle, "qperm", a), bad,
                 "moePermute(qperm): rows pointer is NULL");
  // The rows stay 16-byte aligned, their codes being 1-byte elements.
  a = qperm(16);
  a.rows = kRows + 8;
  CHECK_REJECTED(permute(bundle, "qperm", a), bad,
                 "moePermute(qperm): rows pointer 0x7f0000230008 is not "
                 "16-byte aligned");
  // A dynamic H: whole [1, 128] groups, after the checks of any H.
  CHECK_REJECTED(permute(bundle, "qperm32", qperm32(16, 200)), bad,
                 "moePermute(qperm32): H = 200 is not a multiple of 128 (the "
                 "entry has out=f8E4M3FN: the gather quantizes whole [1, 128] "
                 "groups of a row)");
  CHECK_REJECTED(permute(bundle, "qperm32", qperm32(16, 64)), bad,
                 "H = 64 is not a multiple of 128");
  CHECK_REJECTED(permute(bundle, "qperm32", qperm32(16, 100)), bad,
                 "moePermute(qperm32): H = 100 is not a multiple of 8");
  CHECK_REJECTED(permute(bundle, "qperm32", qperm32(16, 0)), bad,
                 "H = 0 is less than 8");
  // Sizes before pointers.
  a = qperm32(16, 200);
  a.rows_scale = 0;
  CHECK_REJECTED(permute(bundle, "qperm32", a), bad,
                 "H = 200 is not a multiple of 128");
  CHECK_EQ(permute(bundle, "qperm32", qperm32(16, 128)), MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);

  // The rows' bytes are N*H (1-byte codes): with k = 4 they overflow where
  // the tokens' T*H*2 do not.
  bundle = OPEN_VALID(replaced("top_k=2 hidden=-1 offsets=i32 chunk=32",
                               "top_k=4 hidden=-1 offsets=i32 chunk=32",
                               permuteFp8Bundle()));
  if (bundle) {
    CHECK_REJECTED(permute(bundle, "qperm32", qperm32(1, int64_t(1) << 61)),
                   bad,
                   "moePermute(qperm32): T*k*H (bytes of rows) overflows "
                   "int64 (T*k = 4, H = 2305843009213693952)");
    CHECK_REJECTED(permute(bundle, "qperm32", qperm32(1, int64_t(1) << 62)),
                   bad, "T*H*2 (bytes of tokens) overflows int64");
    moeBundleClose(bundle);
  }

  // An entry whose rows are bf16 takes no rows_scale.
  bundle = OPEN_VALID(permuteBundle());
  if (!bundle)
    return;
  a = perm(16);
  a.rows_scale = kRowsScale;
  CHECK_REJECTED(permute(bundle, "perm", a), bad,
                 "moePermute(perm): rows_scale = 0x7f0000270000, but "
                 "rows_scale is only taken by out=f8E4M3FN entries (this "
                 "one's rows are bf16): it must be 0");
  a = perm32(16, 64);
  a.rows_scale = 4;
  CHECK_REJECTED(permute(bundle, "perm32", a), bad,
                 "moePermute(perm32): rows_scale = 0x4, but rows_scale is "
                 "only taken by out=f8E4M3FN entries");
  // ... and needs no multiple of 128.
  CHECK_EQ(permute(bundle, "perm32", perm32(16, 64)), MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);
}
