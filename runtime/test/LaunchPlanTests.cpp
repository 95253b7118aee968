//===- LaunchPlanTests.cpp - moeLaunch against the ABI functions ----------===//
//
// The plan interpreter's launches compared with the hand-written ABI code's
// on the fake driver: the same bundle entry with its plan records (as
// docs/launch-plans.md writes them), called through moeRoute and through
// moeLaunch, must launch the same kernel on the same grid with the same
// parameter words.
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "TestBundles.h"
#include "TestHarness.h"

using namespace moe_test;

namespace {

constexpr uint64_t kLogits = 0x7f0000110000, kBias = 0x7f0000120000,
                   kIds = 0x7f0000130000, kWeights = 0x7f0000140000;

/// routeBundle() with the plans of its two route entries.
std::string routeBundleWithPlans() {
  std::string bytes = routeBundle();
  auto insertAfter = [&](const std::string &line, const std::string &plan) {
    size_t at = bytes.find(line);
    if (at == std::string::npos) {
      moe_test::fail(__FILE__, __LINE__, "no line " + line);
      return;
    }
    at = bytes.find('\n', at) + 1;
    bytes.insert(at, plan);
  };
  insertAfter(std::string("kernel router ") + kRouteBias,
              "size router T min=1 max=2147483647\n"
              "arg router logits f32 in align=4 dims=T,256\n"
              "arg router bias f32 in align=4 dims=256\n"
              "arg router ids i32 out align=4 dims=T,8\n"
              "arg router weights f32 out align=4 dims=T,8\n"
              "launch router 0 grid=min(ceildiv(T,4),65535) when=1 "
              "params=mem:logits[T,256];mem:bias[256];mem:ids[T,8];"
              "mem:weights[T,8]\n");
  insertAfter(std::string("kernel softmax ") + kRouteSoftmax,
              "size softmax T min=1 max=4096\n"
              "arg softmax logits bf16 in align=2 dims=T,8\n"
              "arg softmax ids i32 out align=4 dims=T,2\n"
              "arg softmax weights f32 out align=4 dims=T,2\n"
              "launch softmax 0 grid=min(ceildiv(T,8),65535) when=1 "
              "params=mem:logits[T,8];mem:ids[T,2];mem:weights[T,2]\n");
  return bytes;
}

/// The launch `call` makes on a loaded bundle (its only one).
template <typename Call> FakeLaunch launchOf(Call call) {
  fakeGpu().launches.clear();
  moeStatus status = call();
  CHECK_EQ(status, MOE_STATUS_SUCCESS);
  if (status != MOE_STATUS_SUCCESS)
    moe_test::fail(__FILE__, __LINE__, moeLastErrorMessage());
  CHECK_EQ(fakeGpu().launches.size(), size_t(1));
  return fakeGpu().launches.empty() ? FakeLaunch() : fakeGpu().launches[0];
}

void checkSame(const FakeLaunch &a, const FakeLaunch &b) {
  CHECK_EQ(a.function, b.function);
  CHECK_EQ(a.grid[0], b.grid[0]);
  CHECK_EQ(a.block[0], b.block[0]);
  CHECK_EQ(a.smem, b.smem);
  CHECK_EQ(a.ex, b.ex);
  CHECK(a.params == b.params);
  CHECK(!a.params.empty());
}

} // namespace

TEST(launchPlanRouteMatchesMoeRoute) {
  FakeGpu &gpu = installFakeDriver();
  gpu.wordParams[kRouteBias] = 26;
  gpu.wordParams[kRouteSoftmax] = 21;
  moeBundle *bundle = openBundle(routeBundleWithPlans());
  CHECK(bundle != nullptr);
  if (!bundle)
    return;
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  for (int64_t tokens : {int64_t(1), int64_t(5)}) {
    moeRouteArgs a;
    a.logits = kLogits;
    a.bias = kBias;
    a.ids = kIds;
    a.weights = kWeights;
    a.tokens = tokens;
    a.experts = 256;
    uint64_t args[] = {kLogits, kBias, kIds, kWeights};
    moeLaunchArgs l{&tokens, 1, 4, args, 0, 0};
    // The test's usual addresses are 64 KiB apart: small T only (the plan
    // checks overlaps, moeRoute does not).
    checkSame(
        launchOf([&] { return moeRoute(bundle, "router", &a, nullptr); }),
        launchOf([&] { return moeLaunch(bundle, "router", &l, nullptr); }));
  }
  // Addresses far apart: larger T, past the grid's cap.
  const uint64_t tb = uint64_t(1) << 40;
  for (int64_t tokens :
       {int64_t(1000), int64_t(4096), int64_t(262141), int64_t(100000000)}) {
    moeRouteArgs a;
    a.logits = tb;
    a.bias = 2 * tb;
    a.ids = 3 * tb;
    a.weights = 4 * tb;
    a.tokens = tokens;
    a.experts = 256;
    uint64_t args[] = {tb, 2 * tb, 3 * tb, 4 * tb};
    moeLaunchArgs l{&tokens, 1, 4, args, 0, 0};
    checkSame(
        launchOf([&] { return moeRoute(bundle, "router", &a, nullptr); }),
        launchOf([&] { return moeLaunch(bundle, "router", &l, nullptr); }));
    if (tokens > 4096) // softmax's max_rows: both refuse it (above)
      continue;
    moeRouteArgs s = a;
    s.bias = 0;
    s.experts = 8;
    uint64_t sargs[] = {tb, 3 * tb, 4 * tb};
    moeLaunchArgs sl{&tokens, 1, 3, sargs, 0, 0};
    checkSame(
        launchOf([&] { return moeRoute(bundle, "softmax", &s, nullptr); }),
        launchOf([&] { return moeLaunch(bundle, "softmax", &sl, nullptr); }));
  }
  moeBundleClose(bundle);
}

TEST(launchPlanErrors) {
  FakeGpu &gpu = installFakeDriver();
  gpu.wordParams[kRouteBias] = 26;
  moeBundle *bundle = openBundle(routeBundleWithPlans());
  CHECK(bundle != nullptr);
  if (!bundle)
    return;
  const uint64_t tb = uint64_t(1) << 40;
  int64_t tokens = 100;
  uint64_t args[] = {tb, 2 * tb, 3 * tb, 4 * tb};
  moeLaunchArgs l{&tokens, 1, 4, args, 0, 0};
  gpu.calls.clear();
  args[2] = 0;
  CHECK_STATUS(moeLaunch(bundle, "router", &l, nullptr),
               MOE_STATUS_INVALID_ARGUMENT,
               "moeLaunch(router): ids pointer is NULL");
  args[2] = 3 * tb;
  args[3] = 3 * tb + 100;
  CHECK_STATUS(moeLaunch(bundle, "router", &l, nullptr),
               MOE_STATUS_INVALID_ARGUMENT, "ids overlaps weights");
  args[3] = 4 * tb;
  tokens = 0;
  CHECK_STATUS(moeLaunch(bundle, "router", &l, nullptr),
               MOE_STATUS_INVALID_ARGUMENT, "T = 0 is outside [1, 2147483647]");
  tokens = 100;
  l.num_args = 3;
  CHECK_STATUS(moeLaunch(bundle, "router", &l, nullptr),
               MOE_STATUS_INVALID_ARGUMENT,
               "1 sizes and 3 arguments given, the entry takes 1 and 4");
  l.num_args = 4;
  // The arguments are checked without the driver.
  CHECK(gpu.calls.empty());
  CHECK_STATUS(moeLaunch(bundle, "combine", &l, nullptr),
               MOE_STATUS_INVALID_ARGUMENT, "the entry has no launch plan");
  CHECK_STATUS(moeLaunch(bundle, "nothing", &l, nullptr), MOE_STATUS_NOT_FOUND,
               "no entry 'nothing'");
  uint64_t bytes = 7;
  CHECK_EQ(moeWorkspaceBytes(bundle, "router", &tokens, 1, &bytes),
           MOE_STATUS_SUCCESS);
  CHECK_EQ(bytes, uint64_t(0));
  CHECK_STATUS(moeWorkspaceBytes(bundle, "router", &tokens, 2, &bytes),
               MOE_STATUS_INVALID_ARGUMENT, "2 sizes given, the entry takes 1");
  moeBundleClose(bundle);
}

// A plan record that is wrong is refused when the bundle is opened, naming
// the line.
TEST(launchPlanBadRecordsRefusedAtOpen) {
  installFakeDriver();
  auto openError = [](const std::string &bytes) {
    moeBundle *bundle = nullptr;
    moeStatus status = moeBundleOpenMemory(bytes.data(), bytes.size(), &bundle);
    if (bundle)
      moeBundleClose(bundle);
    return status == MOE_STATUS_SUCCESS ? std::string("opened")
                                        : std::string(moeLastErrorMessage());
  };
  std::string good = routeBundleWithPlans();
  CHECK_EQ(openError(good), std::string("opened"));
  auto replaced = [&](const std::string &from, const std::string &to) {
    std::string bytes = good;
    size_t at = bytes.find(from);
    CHECK(at != std::string::npos);
    if (at != std::string::npos)
      bytes.replace(at, from.size(), to);
    return bytes;
  };
  CHECK_CONTAINS(openError(replaced("mem:ids[T,8]", "mem:idz[T,8]")),
                 "entry 'router': launch record: parameter 'mem:idz[T,8]': "
                 "no argument 'idz'");
  CHECK_CONTAINS(openError(replaced("dims=T,256", "dims=U,256")),
                 "entry 'router''s plan: argument logits: unknown name 'U'");
  CHECK_CONTAINS(openError(replaced("launch router 0", "launch router 1")),
                 "kernel 1 is not one of the 1 of the entry");
  CHECK_CONTAINS(openError(replaced("size softmax T", "size router T")),
                 "size record of 'router' must follow that entry");
}
