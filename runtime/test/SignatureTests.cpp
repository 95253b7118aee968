//===- SignatureTests.cpp - an entry's signature from its launch plan -----===//
//
// moeEntryGetSignature, moeEntryGetSize, moeEntryGetArg and
// moeEntryArgShape (moe_runtime.h): what the C API reports of a plan's
// records, the shapes it evaluates for given sizes, and its errors; and
// moeWorkspaceBytes. The bundle is signatureBundle() (PlanBundles.h), written
// as the compiler would (its expressions partly in non-canonical form, which
// the queries report canonically); no driver is needed.
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "PlanBundles.h"
#include "TestBundles.h"
#include "TestHarness.h"

#include <cstring>

using namespace moe_test;

namespace {

/// "name:min:max" of each size of `entry`.
std::string sizesOf(const moeBundle *bundle, const char *entry) {
  moeSignature signature;
  if (moeEntryGetSignature(bundle, entry, &signature) != MOE_STATUS_SUCCESS)
    return moeLastErrorMessage();
  std::string joined;
  for (int32_t i = 0; i < signature.num_sizes; ++i) {
    moeSizeInfo size;
    if (moeEntryGetSize(bundle, entry, i, &size) != MOE_STATUS_SUCCESS)
      return moeLastErrorMessage();
    joined += std::string(joined.empty() ? "" : " ") + size.name + ":" +
              size.min + ":" + size.max;
  }
  return joined;
}

/// "name dtype role align rank dims" of each argument of `entry`, joined
/// by "; ", the dtype and role as the enumerators' values.
std::string argsOf(const moeBundle *bundle, const char *entry) {
  moeSignature signature;
  if (moeEntryGetSignature(bundle, entry, &signature) != MOE_STATUS_SUCCESS)
    return moeLastErrorMessage();
  std::string joined;
  for (int32_t i = 0; i < signature.num_args; ++i) {
    moeArgInfo arg;
    if (moeEntryGetArg(bundle, entry, i, &arg) != MOE_STATUS_SUCCESS)
      return moeLastErrorMessage();
    joined += std::string(joined.empty() ? "" : "; ") + arg.name + " " +
              std::to_string(arg.dtype) + " " + std::to_string(arg.role) + " " +
              std::to_string(arg.align) + " " + std::to_string(arg.rank) + " " +
              arg.dims;
  }
  return joined;
}

/// The shape of argument `index` of `entry` for `sizes`, joined by 'x'.
std::string shapeOf(const moeBundle *bundle, const char *entry, int32_t index,
                    std::vector<int64_t> sizes) {
  int64_t dims[MOE_MAX_RANK + 1];
  for (int64_t &d : dims)
    d = -77;
  if (moeEntryArgShape(bundle, entry, index, sizes.data(),
                       int32_t(sizes.size()), dims) != MOE_STATUS_SUCCESS)
    return moeLastErrorMessage();
  moeArgInfo arg;
  CHECK_EQ(moeEntryGetArg(bundle, entry, index, &arg), MOE_STATUS_SUCCESS);
  std::string joined;
  for (int32_t d = 0; d < arg.rank; ++d)
    joined += (d ? "x" : "") + std::to_string(dims[d]);
  // Nothing written past the rank.
  CHECK_EQ(dims[arg.rank], int64_t(-77));
  return joined;
}

} // namespace

TEST(signatureCounts) {
  CHECK_EQ(MOE_MAX_RANK, 8);
  moeBundle *bundle = OPEN_VALID(signatureBundle());
  if (!bundle)
    return;
  struct {
    const char *entry;
    int32_t sizes, args, checks, slices, steps;
  } expected[] = {{"router", 1, 4, 0, 0, 1},
                  {"combine", 3, 4, 1, 0, 1},
                  {"mx", 1, 3, 0, 0, 1},
                  {"act", 2, 4, 1, 0, 1},
                  {"experts", 1, 4, 0, 0, 1}};
  for (const auto &e : expected) {
    moeSignature s;
    std::memset(&s, 0x5a, sizeof(s));
    CHECK_EQ(moeEntryGetSignature(bundle, e.entry, &s), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(e.entry) + " " + std::to_string(s.num_sizes) + " " +
                 std::to_string(s.num_args) + " " +
                 std::to_string(s.num_checks) + " " +
                 std::to_string(s.num_slices) + " " +
                 std::to_string(s.num_steps),
             std::string(e.entry) + " " + std::to_string(e.sizes) + " " +
                 std::to_string(e.args) + " " + std::to_string(e.checks) + " " +
                 std::to_string(e.slices) + " " + std::to_string(e.steps));
  }
  moeBundleClose(bundle);
  // A layer: its own arguments, slices and its parts' steps; a GEMM of two
  // forms and four sizes.
  bundle = OPEN_VALID(layerPlanBundle());
  moeSignature s;
  CHECK_EQ(moeEntryGetSignature(bundle, "mix", &s), MOE_STATUS_SUCCESS);
  CHECK_EQ(s.num_sizes, 1);
  CHECK_EQ(s.num_args, 5);
  CHECK_EQ(s.num_checks, 1);
  CHECK_EQ(s.num_slices, 8);
  CHECK_EQ(s.num_steps, 7);
  moeBundleClose(bundle);
  bundle = OPEN_VALID(gemmPlanBundle());
  CHECK_EQ(moeEntryGetSignature(bundle, "any", &s), MOE_STATUS_SUCCESS);
  CHECK_EQ(s.num_sizes, 4);
  CHECK_EQ(s.num_args, 4);
  CHECK_EQ(s.num_checks, 1);
  CHECK_EQ(s.num_slices, 0);
  CHECK_EQ(s.num_steps, 2);
  moeBundleClose(bundle);
}

TEST(signatureSizesAndArgs) {
  moeBundle *bundle = OPEN_VALID(signatureBundle());
  if (!bundle)
    return;
  // Names and ranges, canonical ("(2147483647)" is "2147483647"); a range
  // may read the sizes before it.
  CHECK_EQ(sizesOf(bundle, "router"), "T:1:2147483647");
  CHECK_EQ(sizesOf(bundle, "combine"),
           "M:1:9223372036854775807 T:1:floordiv(M,2) "
           "H:8:9223372036854775807");
  CHECK_EQ(sizesOf(bundle, "act"), "R:1:4096 C:128:2147483647");
  // Arguments in call order: dtype (bf16 0, f32 1, i32 2, i64 3, e4m3 4,
  // e5m2 5, e8m0 6), role (in 0, out 1, opt 2), alignment, rank and dims.
  CHECK_EQ(argsOf(bundle, "router"),
           "logits 1 0 4 2 T,256; bias 1 2 4 1 256; ids 2 1 4 2 T,8; "
           "weights 1 1 4 2 T,8");
  CHECK_EQ(argsOf(bundle, "combine"),
           "rows 0 0 16 2 M,H; slots 3 0 8 2 T,2; weights 1 0 4 2 T,2; "
           "out 0 1 16 2 T,H");
  CHECK_EQ(argsOf(bundle, "mx"),
           "input 0 0 16 2 R,4096; values 4 1 16 2 R,4096; "
           "scales 6 1 1 2 R,128");
  CHECK_EQ(argsOf(bundle, "act"),
           "input 1 0 16 2 R,C; values 5 1 16 2 R,C; "
           "scales 1 1 4 2 R,floordiv(C,128); amax 1 2 4 0 ");
  CHECK_EQ(argsOf(bundle, "experts"),
           "rows 0 0 16 2 M,64; weights 0 0 16 3 8,64,64; "
           "offsets 2 0 4 1 8+1; out 0 1 16 2 M,64");
  // The enumerators are those values.
  const int dtypes[] = {MOE_DTYPE_BF16, MOE_DTYPE_F32,  MOE_DTYPE_I32,
                        MOE_DTYPE_I64,  MOE_DTYPE_E4M3, MOE_DTYPE_E5M2,
                        MOE_DTYPE_E8M0};
  for (int i = 0; i < 7; ++i)
    CHECK_EQ(dtypes[i], i);
  CHECK_EQ(int(MOE_ARG_IN), 0);
  CHECK_EQ(int(MOE_ARG_OUT), 1);
  CHECK_EQ(int(MOE_ARG_OPTIONAL), 2);
  CHECK_EQ(int(MOE_ARG_DONATED), 3);
  // Strings stay where they are until the bundle is closed.
  moeArgInfo first, again;
  CHECK_EQ(moeEntryGetArg(bundle, "combine", 3, &first), MOE_STATUS_SUCCESS);
  CHECK_EQ(moeEntryGetArg(bundle, "router", 0, &again), MOE_STATUS_SUCCESS);
  CHECK_EQ(moeEntryGetArg(bundle, "combine", 3, &again), MOE_STATUS_SUCCESS);
  CHECK(first.name == again.name && first.dims == again.dims);
  moeBundleClose(bundle);
}

TEST(signatureArgShapes) {
  moeBundle *bundle = OPEN_VALID(signatureBundle());
  if (!bundle)
    return;
  CHECK_EQ(shapeOf(bundle, "router", 0, {5}), "5x256");
  CHECK_EQ(shapeOf(bundle, "router", 1, {5}), "256");
  CHECK_EQ(shapeOf(bundle, "router", 3, {2147483647}), "2147483647x8");
  // M = 12 rows, T = 6 tokens, H = 4096.
  CHECK_EQ(shapeOf(bundle, "combine", 0, {12, 6, 4096}), "12x4096");
  CHECK_EQ(shapeOf(bundle, "combine", 1, {12, 6, 4096}), "6x2");
  CHECK_EQ(shapeOf(bundle, "combine", 3, {12, 6, 4096}), "6x4096");
  CHECK_EQ(shapeOf(bundle, "act", 2, {3, 384}), "3x3");
  CHECK_EQ(shapeOf(bundle, "act", 3, {3, 384}), ""); // rank 0
  CHECK_EQ(shapeOf(bundle, "experts", 2, {100}), "9");
  CHECK_EQ(shapeOf(bundle, "mx", 2, {7}), "7x128");
  moeBundleClose(bundle);
}

TEST(signatureErrors) {
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = OPEN_VALID(signatureBundle());
  if (!bundle)
    return;
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  moeSignature signature;
  moeSizeInfo size;
  moeArgInfo arg;
  int64_t dims[MOE_MAX_RANK];
  const int64_t sizes[] = {12, 6, 4096};
  // Indices out of range.
  CHECK_STATUS(moeEntryGetSize(bundle, "router", 1, &size), bad,
               "moeEntryGetSize(router): size 1 of the 1 the entry has");
  CHECK_STATUS(moeEntryGetSize(bundle, "router", -1, &size), bad,
               "size -1 of the 1 the entry has");
  CHECK_STATUS(moeEntryGetArg(bundle, "combine", 4, &arg), bad,
               "moeEntryGetArg(combine): argument 4 of the 4 the entry has");
  CHECK_STATUS(moeEntryGetArg(bundle, "combine", -1, &arg), bad,
               "argument -1 of the 4");
  CHECK_STATUS(moeEntryArgShape(bundle, "combine", 4, sizes, 3, dims), bad,
               "moeEntryArgShape(combine): argument 4 of the 4 the entry has");
  // The sizes: their number, then each in its range (which may read the
  // sizes before it).
  CHECK_STATUS(moeEntryArgShape(bundle, "combine", 0, sizes, 2, dims), bad,
               "moeEntryArgShape(combine): 2 sizes given, the entry takes 3");
  CHECK_STATUS(moeEntryArgShape(bundle, "combine", 0, nullptr, 3, dims), bad,
               "moeEntryArgShape(combine): ");
  const int64_t tooManyTokens[] = {12, 7, 4096};
  CHECK_STATUS(moeEntryArgShape(bundle, "combine", 1, tooManyTokens, 3, dims),
               bad, "moeEntryArgShape(combine): T = 7 is outside [1, 6]");
  const int64_t narrow[] = {12, 6, 4};
  CHECK_STATUS(moeEntryArgShape(bundle, "combine", 1, narrow, 3, dims), bad,
               "H = 4 is outside [8, 9223372036854775807]");
  const int64_t noRows[] = {0};
  CHECK_STATUS(moeEntryArgShape(bundle, "experts", 0, noRows, 1, dims), bad,
               "M = 0 is outside [1, 2147483647]");
  // NULL pointers and unknown entries.
  CHECK_STATUS(moeEntryGetSignature(nullptr, "router", &signature), bad,
               "moeEntryGetSignature: bundle is NULL");
  CHECK_STATUS(moeEntryGetSignature(bundle, nullptr, &signature), bad,
               "moeEntryGetSignature: entry name is NULL");
  CHECK_STATUS(moeEntryGetSignature(bundle, "router", nullptr), bad,
               "moeEntryGetSignature: ");
  CHECK_STATUS(moeEntryGetSize(bundle, "router", 0, nullptr), bad,
               "moeEntryGetSize: ");
  CHECK_STATUS(moeEntryGetArg(nullptr, "router", 0, &arg), bad,
               "moeEntryGetArg: bundle is NULL");
  CHECK_STATUS(moeEntryGetArg(bundle, "router", 0, nullptr), bad,
               "moeEntryGetArg: ");
  CHECK_STATUS(moeEntryArgShape(bundle, "combine", 0, sizes, 3, nullptr), bad,
               "moeEntryArgShape: ");
  CHECK_STATUS(moeEntryGetSignature(bundle, "nope", &signature),
               MOE_STATUS_NOT_FOUND,
               "moeEntryGetSignature: no entry 'nope' in the bundle (entries: "
               "router, combine, mx, act, experts)");
  CHECK_STATUS(moeEntryGetSize(bundle, "nope", 0, &size), MOE_STATUS_NOT_FOUND,
               "moeEntryGetSize: no entry 'nope'");
  CHECK_STATUS(moeEntryGetArg(bundle, "nope", 0, &arg), MOE_STATUS_NOT_FOUND,
               "moeEntryGetArg: no entry 'nope'");
  CHECK_STATUS(moeEntryArgShape(bundle, "nope", 0, sizes, 3, dims),
               MOE_STATUS_NOT_FOUND, "moeEntryArgShape: no entry 'nope'");
  // A failed query leaves *out as it was.
  std::memset(&size, 0, sizeof(size));
  CHECK_EQ(moeEntryGetSize(bundle, "router", 3, &size), bad);
  CHECK(size.name == nullptr);
  moeBundleClose(bundle);
  // Dims whose product overflows int64 (rows as [M*H]).
  bundle = OPEN_VALID(replaced("arg combine rows bf16 in align=16 dims=M,H",
                               "arg combine rows bf16 in align=16 dims=M*H",
                               signatureBundle()));
  const int64_t huge[] = {int64_t(1) << 40, 1, int64_t(1) << 40};
  CHECK_STATUS(moeEntryArgShape(bundle, "combine", 0, huge, 3, dims), bad,
               "moeEntryArgShape(combine): rows's dims: ");
  CHECK_CONTAINS(moeLastErrorMessage(), "overflows int64");
  moeBundleClose(bundle);
  // None of it needs the driver.
  CHECK(gpu.calls.empty());
}

TEST(signatureWorkspaceBytes) {
  installFakeDriver();
  moeBundle *bundle = OPEN_VALID(layerPlanBundle());
  if (!bundle)
    return;
  // mix's slices for T = 3, each at its alignment: ids [0, 24), weights
  // [32, 56), offsets [56, 92), slots [256, 280), sources [512, 536),
  // counts [544, 576), rows [768, 3840), inter [3840, 5376).
  const int64_t three = 3, many = 4096;
  uint64_t bytes = 7;
  CHECK_EQ(moeWorkspaceBytes(bundle, "mix", &three, 1, &bytes),
           MOE_STATUS_SUCCESS);
  CHECK_EQ(bytes, uint64_t(5376));
  // T = 4096: ids [0, 32768), weights [32768, 65536), offsets
  // [65536, 65572), slots [65792, 98560), sources [98560, 131328), counts
  // (2 chunks) [131328, 131392), rows [131584, 4325888), inter [4325888,
  // 6423040).
  CHECK_EQ(moeWorkspaceBytes(bundle, "mix", &many, 1, &bytes),
           MOE_STATUS_SUCCESS);
  CHECK_EQ(bytes, uint64_t(6423040));
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  const int64_t tooMany = 4097;
  bytes = 7;
  CHECK_STATUS(moeWorkspaceBytes(bundle, "mix", &tooMany, 1, &bytes), bad,
               "moeWorkspaceBytes(mix): T = 4097 is outside [1, 4096]");
  CHECK_STATUS(moeWorkspaceBytes(bundle, "mix", &three, 2, &bytes), bad,
               "moeWorkspaceBytes(mix): 2 sizes given, the entry takes 1");
  CHECK_STATUS(moeWorkspaceBytes(bundle, "mix", nullptr, 1, &bytes), bad,
               "moeWorkspaceBytes(mix): ");
  CHECK_EQ(bytes, uint64_t(7)); // untouched on failure
  CHECK_STATUS(moeWorkspaceBytes(bundle, "mix", &three, 1, nullptr), bad,
               "moeWorkspaceBytes: ");
  CHECK_STATUS(moeWorkspaceBytes(bundle, "mixx", &three, 1, &bytes),
               MOE_STATUS_NOT_FOUND, "moeWorkspaceBytes: no entry 'mixx'");
  CHECK_STATUS(moeWorkspaceBytes(nullptr, "mix", &three, 1, &bytes), bad,
               "moeWorkspaceBytes: bundle is NULL");
  moeBundleClose(bundle);
  // An entry without slices needs none.
  bundle = OPEN_VALID(signatureBundle());
  const int64_t combine[] = {12, 6, 4096};
  bytes = 7;
  CHECK_EQ(moeWorkspaceBytes(bundle, "combine", combine, 3, &bytes),
           MOE_STATUS_SUCCESS);
  CHECK_EQ(bytes, uint64_t(0));
  CHECK(fakeGpu().calls.empty());
  moeBundleClose(bundle);
}
