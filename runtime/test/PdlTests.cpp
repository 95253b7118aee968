//===- PdlTests.cpp - programmatic dependent launch (contract 3.6) --------===//
//
// Every moeLaunch (a grouped GEMM's two forms, a route, a layer's seven
// steps) launches each kernel through cuLaunchKernelEx with exactly one
// attribute, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1, by
// default; through cuLaunchKernel with MOE_RUNTIME_PDL=0 (read at each call)
// and with a driver that lacks cuLaunchKernelEx. Whichever the path, the
// launches are otherwise the same: function, grid, block, shared memory,
// stream, parameters and tensor maps.
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "LaunchChecks.h"
#include "PlanBundles.h"
#include "TestBundles.h"
#include "TestHarness.h"

#include <cstdlib>
#include <functional>

using namespace moe_test;

namespace {

constexpr uint64_t kTb = uint64_t(1) << 40;
constexpr uint64_t kA = 1 * kTb, kB = 2 * kTb, kC = 3 * kTb, kD = 4 * kTb,
                   kE = 5 * kTb, kWorkspace = 16 * kTb;

/// One moeLaunch of a bundle, and how the fake must know its kernels.
struct Call {
  const char *name;
  std::string bundle;
  std::function<void(FakeGpu &)> declare;
  const char *entry;
  std::vector<int64_t> sizes;
  std::vector<uint64_t> args;
  uint64_t workspaceBytes;
  size_t launches; // how many kernels it launches
};

std::vector<Call> calls() {
  std::vector<Call> all;
  all.push_back({"a grouped GEMM",
                 gemmPlanBundle(),
                 [](FakeGpu &) {},
                 "gate_up",
                 {64},
                 {kA, kB, kC, kD},
                 0,
                 2});
  all.push_back(
      {"a route",
       routeBundleWithPlans(),
       [](FakeGpu &gpu) { declareParams(gpu, kRouteBias, kRouterParams); },
       "router",
       {1000},
       {kA, kB, kC, kD},
       0,
       1});
  // T = 4096: two chunks of ids, so the count step too.
  all.push_back({"a layer",
                 layerPlanBundle(),
                 declareMixKernels,
                 "mix",
                 {4096},
                 {kA, kB, kC, kD, kE},
                 6423040,
                 7});
  return all;
}

moeStatus run(const Call &call, moeBundle *bundle, void *stream) {
  moeLaunchArgs a = {call.sizes.data(),
                     int32_t(call.sizes.size()),
                     int32_t(call.args.size()),
                     call.args.data(),
                     call.workspaceBytes ? kWorkspace : 0,
                     call.workspaceBytes};
  return moeLaunch(bundle, call.entry, &a, stream);
}

/// What `call` launched on a fresh fake driver (with or without
/// cuLaunchKernelEx) and bundle, with MOE_RUNTIME_PDL as `pdl` (unset for
/// null); the driver calls it made in *made, the tensor maps encoded (which
/// the launches' mapEncode index) in *encodes.
std::vector<FakeLaunch> launchesOf(const Call &call, bool withLaunchKernelEx,
                                   const char *pdl, std::string *made,
                                   std::vector<FakeEncode> *encodes) {
  FakeGpu &gpu = installFakeDriver(withLaunchKernelEx);
  call.declare(gpu);
  moeBundle *bundle = OPEN_VALID(call.bundle);
  if (!bundle)
    return {};
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  size_t before = gpu.calls.size();
  void *stream = testStream();
  {
    PdlEnvironment environment(pdl);
    CHECK_EQ(run(call, bundle, stream), MOE_STATUS_SUCCESS);
  }
  *made = callsSince(before);
  moeBundleClose(bundle);
  *encodes = gpu.encodes;
  return gpu.launches;
}

/// `got` and `want` are the same launch but for the entry point and its
/// attributes: function, grid, block, smem, stream, parameters, maps.
void checkSameFacts(const FakeLaunch &got, const FakeLaunch &want,
                    const std::vector<FakeEncode> &gotEncodes,
                    const std::vector<FakeEncode> &wantEncodes) {
  CHECK_EQ(got.function, want.function);
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ(got.grid[i], want.grid[i]);
    CHECK_EQ(got.block[i], want.block[i]);
  }
  CHECK_EQ(got.smem, want.smem);
  CHECK_EQ(got.stream, want.stream);
  CHECK(got.extraIsNull && want.extraIsNull);
  CHECK_EQ(got.numParams, want.numParams);
  CHECK(got.raw == want.raw);
  if (!want.raw.empty())
    return; // a kernel declared by its parameters' bytes: nothing else
  for (int i = 0; i < 12; ++i)
    CHECK_EQ(got.words[i], want.words[i]);
  for (int i = 0; i < 3; ++i)
    CHECK_EQ(got.ints[i], want.ints[i]);
  for (int i = 0; i < 5; ++i)
    CHECK_EQ(got.scale[i], want.scale[i]);
  CHECK(got.tail == want.tail);
  for (int m = 0; m < 2; ++m) {
    CHECK(got.mapEncode[m] >= 0 &&
          size_t(got.mapEncode[m]) < gotEncodes.size());
    CHECK(want.mapEncode[m] >= 0 &&
          size_t(want.mapEncode[m]) < wantEncodes.size());
    if (got.mapEncode[m] < 0 || size_t(got.mapEncode[m]) >= gotEncodes.size() ||
        want.mapEncode[m] < 0 ||
        size_t(want.mapEncode[m]) >= wantEncodes.size())
      continue;
    const FakeEncode &g = gotEncodes[got.mapEncode[m]];
    const FakeEncode &w = wantEncodes[want.mapEncode[m]];
    CHECK_EQ(g.rank, w.rank);
    CHECK_EQ(g.address, w.address);
    for (unsigned d = 0; d < w.rank && d < 5; ++d) {
      CHECK_EQ(g.dims[d], w.dims[d]);
      CHECK_EQ(g.box[d], w.box[d]);
      if (d + 1 < w.rank)
        CHECK_EQ(g.strides[d], w.strides[d]);
    }
  }
}

/// The launch calls among `made`: `name` `count` times, nothing else.
std::string repeated(const char *name, size_t count) {
  std::string joined;
  for (size_t i = 0; i < count; ++i)
    joined += (joined.empty() ? "" : " ") + std::string(name);
  return joined;
}

std::string launchCallsOf(const std::string &made) {
  std::string joined;
  size_t start = 0;
  while (start <= made.size()) {
    size_t end = made.find(' ', start);
    if (end == std::string::npos)
      end = made.size();
    std::string call = made.substr(start, end - start);
    if (call.rfind("cuLaunch", 0) == 0)
      joined += (joined.empty() ? "" : " ") + call;
    start = end + 1;
  }
  return joined;
}

} // namespace

TEST(pdlEveryCallEveryPath) {
  for (const Call &call : calls()) {
    std::string pdlCalls, offCalls, oldCalls, oneCalls;
    std::vector<FakeEncode> pdlEncodes, offEncodes, oldEncodes, oneEncodes;
    // Default (unset), MOE_RUNTIME_PDL=0, a driver without cuLaunchKernelEx,
    // and MOE_RUNTIME_PDL=1.
    std::vector<FakeLaunch> pdl =
        launchesOf(call, true, nullptr, &pdlCalls, &pdlEncodes);
    std::vector<FakeLaunch> off =
        launchesOf(call, true, "0", &offCalls, &offEncodes);
    std::vector<FakeLaunch> old =
        launchesOf(call, false, nullptr, &oldCalls, &oldEncodes);
    std::vector<FakeLaunch> one =
        launchesOf(call, true, "1", &oneCalls, &oneEncodes);
    // The call's name in each comparison, to tell which failed.
    const std::string name = std::string(call.name) + ": ";
    const std::string ex = name + repeated("cuLaunchKernelEx", call.launches);
    const std::string plain = name + repeated("cuLaunchKernel", call.launches);
    CHECK_EQ(name + launchCallsOf(pdlCalls), ex);
    CHECK_EQ(name + launchCallsOf(oneCalls), ex);
    CHECK_EQ(name + launchCallsOf(offCalls), plain);
    CHECK_EQ(name + launchCallsOf(oldCalls), plain);
    for (size_t size : {pdl.size(), off.size(), old.size(), one.size()})
      CHECK_EQ(name + std::to_string(size),
               name + std::to_string(call.launches));
    if (pdl.size() != call.launches || off.size() != call.launches ||
        old.size() != call.launches || one.size() != call.launches)
      continue;
    for (size_t i = 0; i < call.launches; ++i) {
      CHECK(isPdlLaunch(pdl[i]));
      CHECK(isPdlLaunch(one[i]));
      CHECK(!off[i].ex && off[i].attributes.empty());
      CHECK(!old[i].ex && old[i].attributes.empty());
      checkSameFacts(pdl[i], off[i], pdlEncodes, offEncodes);
      checkSameFacts(old[i], off[i], oldEncodes, offEncodes);
      checkSameFacts(one[i], off[i], oneEncodes, offEncodes);
    }
  }
}

TEST(pdlEnvironmentReadAtEachCall) {
  // One process, one loaded bundle: the setting follows the environment
  // from one call to the next, and applies to every launch of a call.
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = openBundle(gemmPlanBundle());
  int64_t m = 131072;
  uint64_t args[] = {kA, kB, kC, kD};
  moeLaunchArgs a = {&m, 1, 4, args, 0, 0};
  PdlEnvironment environment(nullptr);
  auto paths = [&](const char *value) {
    environment.set(value);
    size_t before = gpu.launches.size();
    CHECK_EQ(moeLaunch(bundle, "gate_up", &a, nullptr), MOE_STATUS_SUCCESS);
    std::string joined;
    for (size_t i = before; i < gpu.launches.size(); ++i) {
      const FakeLaunch &launch = gpu.launches[i];
      const char *path = "other";
      if (isPdlLaunch(launch))
        path = "pdl";
      else if (!launch.ex && launch.attributes.empty())
        path = "plain";
      joined += std::string(joined.empty() ? "" : " ") + path;
    }
    return joined;
  };
  CHECK_EQ(paths(nullptr), "pdl pdl");
  CHECK_EQ(paths("0"), "plain plain");
  CHECK_EQ(paths("1"), "pdl pdl");
  CHECK_EQ(paths("0"), "plain plain");
  // Only "0" turns it off.
  CHECK_EQ(paths(""), "pdl pdl");
  CHECK_EQ(paths("yes"), "pdl pdl");
  CHECK_EQ(paths("00"), "pdl pdl");
  CHECK_EQ(paths(nullptr), "pdl pdl");
  moeBundleClose(bundle);
}

TEST(pdlRestoresTheEnvironment) {
  // The guard above puts back what was there (here: a value set before it).
  setenv("MOE_RUNTIME_PDL", "7", 1);
  {
    PdlEnvironment environment("0");
    CHECK_EQ(std::string(std::getenv("MOE_RUNTIME_PDL")), "0");
  }
  CHECK_EQ(std::string(std::getenv("MOE_RUNTIME_PDL")), "7");
  unsetenv("MOE_RUNTIME_PDL");
}

TEST(pdlFailedLaunchNamesItsEntryPoint) {
  // A failure through cuLaunchKernel (PDL off, or no cuLaunchKernelEx)
  // names it and no attribute; through cuLaunchKernelEx, it and the
  // attribute. T = 1000 tokens: 250 CTAs of a warp per token.
  int64_t tokens = 1000;
  uint64_t args[] = {kA, kB, kC, kD};
  moeLaunchArgs a = {&tokens, 1, 4, args, 0, 0};
  const std::string kernel = "'moe_route_sigmoid_topk_e256_k8_f32_bias' of "
                             "entry 'router', grid (250, 1, 1), block (128, "
                             "1, 1), smem 0";
  for (int mode = 0; mode < 3; ++mode) {
    FakeGpu &gpu = installFakeDriver(/*withLaunchKernelEx=*/mode != 2);
    declareParams(gpu, kRouteBias, kRouterParams);
    gpu.failLaunchNumber = 0;
    moeBundle *bundle = openBundle(routeBundleWithPlans());
    PdlEnvironment environment(mode == 1 ? "0" : nullptr);
    CHECK_STATUS(moeLaunch(bundle, "router", &a, nullptr),
                 MOE_STATUS_CUDA_ERROR,
                 mode == 0 ? "moeLaunch: cuLaunchKernelEx(" + kernel +
                                 ", programmatic stream serialization) "
                                 "failed: CUDA_ERROR_INVALID_VALUE"
                           : "moeLaunch: cuLaunchKernel(" + kernel +
                                 ") failed: CUDA_ERROR_INVALID_VALUE");
    CHECK_EQ(gpu.launches.size(), size_t(1));
    moeBundleClose(bundle);
  }
}
