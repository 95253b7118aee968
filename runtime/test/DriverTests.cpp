//===- DriverTests.cpp - finding the driver, loading, contexts ------------===//
//
// The driver as moeBundleLoad and moeLaunch use it (on the fake driver of
// FakeDriver.h): a missing driver or device, compute capabilities, loading
// per context (images, functions, shared memory attributes, residency),
// lazy loading by the first launch, and the failures of loads, tensor map
// encodes and launches with what their messages say.
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "LaunchChecks.h"
#include "PlanBundles.h"
#include "TestBundles.h"
#include "TestHarness.h"

using namespace moe_test;

namespace {

constexpr uint64_t kTb = uint64_t(1) << 40;

/// A call of gemmPlanBundle()'s gate_up (E=8 N=28672 K=4096) for `m` rows;
/// its arguments live as long as it.
struct GateUp {
  int64_t m;
  uint64_t args[4] = {kTb, 2 * kTb, 3 * kTb, 4 * kTb};
  moeLaunchArgs launch;
  explicit GateUp(int64_t rows) : m(rows), launch{&m, 1, 4, args, 0, 0} {}
  moeStatus run(moeBundle *bundle, void *stream = nullptr) {
    return moeLaunch(bundle, "gate_up", &launch, stream);
  }
};

std::string withChip(const char *chip) {
  std::string bytes = validBundle();
  return bytes.replace(bytes.find("chip sm_90a"), 11,
                       std::string("chip ") + chip);
}

int count(const std::vector<std::string> &calls, const char *name) {
  int n = 0;
  for (const std::string &call : calls)
    n += call == name;
  return n;
}

} // namespace

TEST(driverMissingIsNoGpu) {
  setDriverForTesting(nullptr,
                      "dlopen(libcuda.so.1) failed: libcuda.so.1: cannot open "
                      "shared object file: No such file or directory");
  moeBundle *bundle = openBundle(gemmPlanBundle());
  CHECK(bundle != nullptr);
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_NO_GPU,
               "moeBundleLoad: no CUDA driver: dlopen(libcuda.so.1) failed: "
               "libcuda.so.1: cannot open shared object file");
  GateUp a(64);
  CHECK_STATUS(a.run(bundle), MOE_STATUS_NO_GPU,
               "moeLaunch: no CUDA driver: dlopen");
  // The arguments are checked before the driver is needed.
  a.m = 0;
  CHECK_STATUS(a.run(bundle), MOE_STATUS_INVALID_ARGUMENT,
               "moeLaunch(gate_up): M = 0 is outside [1, 2147483647]");
  // Neither needs it.
  uint64_t bytes = 7;
  CHECK_EQ(moeWorkspaceBytes(bundle, "gate_up", &a.m, 0, &bytes),
           MOE_STATUS_INVALID_ARGUMENT);
  a.m = 5;
  CHECK_EQ(moeWorkspaceBytes(bundle, "gate_up", &a.m, 1, &bytes),
           MOE_STATUS_SUCCESS);
  CHECK_EQ(bytes, uint64_t(0));
  moeBundleClose(bundle);
  setDriverForTesting(nullptr);
}

TEST(driverLoaderReportsDlopenAndDlsym) {
  Driver table;
  std::string error;
  CHECK(!loadDriverLibrary("libmoe-no-such-driver.so.1", table, error));
  CHECK_CONTAINS(error, "dlopen(libmoe-no-such-driver.so.1) failed: ");
  CHECK_CONTAINS(error, "libmoe-no-such-driver.so.1");
  error.clear();
  CHECK(!loadDriverLibrary("libc.so.6", table, error));
  CHECK_CONTAINS(error, "dlsym(cuInit) in libc.so.6 failed");
}

TEST(driverRealLibcudaIfAny) {
  // On a machine without libcuda.so.1 (CI) the real lookup fails cleanly;
  // where there is one, loading the fake cubins must fail in some other way.
  setDriverForTesting(nullptr);
  std::string whyNot;
  const Driver *driver = getDriver(whyNot);
  moeBundle *bundle = openBundle(validBundle());
  moeStatus status = moeBundleLoad(bundle);
  CHECK(status != MOE_STATUS_SUCCESS);
  if (!driver) {
    CHECK_EQ(status, MOE_STATUS_NO_GPU);
    CHECK_CONTAINS(whyNot, "no CUDA driver: dlopen(libcuda.so.1) failed");
    CHECK_CONTAINS(moeLastErrorMessage(),
                   "moeBundleLoad: no CUDA driver: dlopen(libcuda.so.1)");
  }
  moeBundleClose(bundle);
}

TEST(driverInitNoDevice) {
  FakeGpu &gpu = installFakeDriver();
  gpu.initResult = cu::kErrorNoDevice;
  moeBundle *bundle = openBundle(gemmPlanBundle());
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_NO_GPU,
               "moeBundleLoad: no CUDA device: cuInit failed: "
               "CUDA_ERROR_NO_DEVICE (fake driver error)");
  GateUp a(64);
  CHECK_STATUS(a.run(bundle), MOE_STATUS_NO_GPU, "moeLaunch: no CUDA device");
  CHECK_EQ(gpu.launches.size(), size_t(0));
  gpu.initResult = cu::kErrorStubLibrary;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_NO_GPU, "cuInit failed");
  gpu.initResult = 999;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_CUDA_ERROR,
               "moeBundleLoad: cuInit failed: CUresult 999");
  moeBundleClose(bundle);
}

TEST(driverComputeCapability) {
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = openBundle(gemmPlanBundle());
  gpu.ccMajor = 8;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               "moeBundleLoad: bundle is for sm_90a but the device is sm_80 "
               "(compute capability 8.0)");
  gpu.ccMajor = 10;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               "bundle is for sm_90a but the device is sm_100");
  // sm_90a needs exactly 9.0.
  gpu.ccMajor = 9;
  gpu.ccMinor = 1;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               "the device is sm_91");
  GateUp a(64);
  CHECK_STATUS(a.run(bundle), MOE_STATUS_UNSUPPORTED,
               "moeLaunch: bundle is for sm_90a but the device is sm_91");
  CHECK_EQ(count(gpu.calls, "cuModuleLoadData"), 0);
  moeBundleClose(bundle);

  bundle = openBundle(withChip("sm_100a"));
  gpu.ccMajor = 9;
  gpu.ccMinor = 0;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               "bundle is for sm_100a but the device is sm_90");
  gpu.ccMajor = 10;
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);

  // A chip the compiler builds no kernels for is refused when the bundle is
  // opened, before any driver call.
  for (const char *chip : {"sm_80", "sm_86", "sm_90", "sm_120a", "sm_100"}) {
    moeStatus status = MOE_STATUS_SUCCESS;
    CHECK(openBundle(withChip(chip), &status) == nullptr);
    CHECK_EQ(status, MOE_STATUS_UNSUPPORTED);
    CHECK_CONTAINS(moeLastErrorMessage(), "chip '" + std::string(chip) +
                                              "' is not supported (this "
                                              "runtime runs bundles for "
                                              "sm_90a, sm_100a)");
  }
}

TEST(driverLoadsFunctionsAndSharedMemory) {
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = openBundle(validBundle());
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  // Both images, each once, with their bytes.
  CHECK_EQ(gpu.loadedImages.size(), size_t(2));
  if (gpu.loadedImages.size() == 2) {
    CHECK_EQ(gpu.loadedImages[0], fakeCubin('A').substr(0, 16));
    CHECK_EQ(gpu.loadedImages[1], fakeCubin('B').substr(0, 16));
  }
  CHECK_EQ(count(gpu.calls, "cuModuleGetFunction"), 5);
  // One attribute per function; down's kernel, which `any` shares, gets the
  // larger of the two.
  std::vector<std::pair<std::string, int>> expected = {{kNormal32, 163840},
                                                       {kSwapAB32, 81920},
                                                       {kNormal64, 200000},
                                                       {kSmall64, 98304}};
  CHECK(gpu.smemAttributes == expected);
  // Then the residency of each kernel record with its own threads and smem
  // (down's and any's records of one function differ in smem), and the
  // multiprocessor count once, before loading anything.
  std::vector<std::pair<std::string, size_t>> queried;
  for (const FakeOccupancy &q : gpu.occupancyQueries) {
    CHECK_EQ(q.threads, 128);
    queried.push_back({q.function, q.smem});
  }
  std::vector<std::pair<std::string, size_t>> records = {{kNormal32, 163840},
                                                         {kSwapAB32, 81920},
                                                         {kNormal64, 163840},
                                                         {kNormal64, 200000},
                                                         {kSmall64, 98304}};
  CHECK(queried == records);
  CHECK_CONTAINS(
      callsSince(0),
      "cuFuncSetAttribute cuFuncSetAttribute cuFuncSetAttribute "
      "cuFuncSetAttribute cuOccupancyMaxActiveBlocksPerMultiprocessor");
  CHECK_CONTAINS(callsSince(0), "cuDeviceGetAttribute cuDeviceGetAttribute "
                                "cuDeviceGetAttribute cuDeviceGetAttribute "
                                "cuModuleLoadData");
  CHECK_EQ(count(gpu.calls, "cuDeviceGetAttribute"), 4);
  // A no-op the second time in the same context.
  size_t before = gpu.calls.size();
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(callsSince(before), "cuCtxGetCurrent cuCtxGetId");
  moeBundleClose(bundle);
  CHECK_EQ(gpu.liveModules, 0);
}

TEST(driverLoadPerContext) {
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = openBundle(validBundle());
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.liveModules, 2);
  gpu.current = fakeContextB();
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.liveModules, 4);
  gpu.current = fakeContextA();
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.liveModules, 4);
  // Close unloads in each context and restores the current one.
  gpu.current = fakeContextB();
  moeBundleClose(bundle);
  CHECK_EQ(gpu.liveModules, 0);
  std::vector<void *> contexts = {fakeContextA(), fakeContextA(),
                                  fakeContextB(), fakeContextB()};
  CHECK(gpu.unloadContexts == contexts);
  CHECK(gpu.current == fakeContextB());
}

TEST(driverNoCurrentContextUsesPrimary) {
  FakeGpu &gpu = installFakeDriver();
  gpu.current = nullptr;
  moeBundle *bundle = openBundle(gemmPlanBundle());
  GateUp a(64);
  CHECK_EQ(a.run(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.primaryRetains, 1);
  CHECK(gpu.current == fakePrimaryContext());
  CHECK_CONTAINS(callsSince(0),
                 "cuInit cuCtxGetCurrent cuDeviceGet cuDevicePrimaryCtxRetain "
                 "cuCtxSetCurrent cuCtxGetId cuCtxGetDevice");
  // The primary context is kept retained after close.
  moeBundleClose(bundle);
  CHECK_EQ(gpu.primaryRetains, 1);
  CHECK_EQ(count(gpu.calls, "cuModuleUnload"), 2);
}

TEST(driverLoadFailures) {
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = openBundle(validBundle());

  gpu.loadResult = cu::kErrorInvalidImage;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_CUDA_ERROR,
               "moeBundleLoad: cuModuleLoadData(image 'moe_kernels') failed: "
               "CUDA_ERROR_INVALID_IMAGE (fake driver error)");
  gpu.loadResult = cu::kErrorOutOfMemory;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_OUT_OF_MEMORY,
               "CUDA_ERROR_OUT_OF_MEMORY");
  gpu.loadResult = cu::kSuccess;

  gpu.missingSymbols = {kSwapAB32};
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_NOT_FOUND,
               "moeBundleLoad: kernel symbol "
               "'grouped_matmul_bf16_16x64x64_s4_swapab_off32' (entry "
               "'gate_up') not found in image 'moe_kernels_swapab'");
  CHECK_EQ(gpu.liveModules, 0); // what was loaded is unloaded again
  gpu.missingSymbols.clear();

  gpu.maxSharedOptin = 163839;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               "moeBundleLoad: kernel "
               "'grouped_matmul_bf16_64x256x64_s4_off32' of entry 'gate_up' "
               "needs smem = 163840 bytes but the device allows at most "
               "163839 per block");
  gpu.maxSharedOptin = 232448;

  gpu.maxThreadsPerBlock = 64;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               "runs at most 64 threads per block on this device, the bundle "
               "says threads = 128");
  CHECK_EQ(gpu.liveModules, 0);
  gpu.maxThreadsPerBlock = 1024;

  // After the failures it still loads.
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.liveModules, 2);
  moeBundleClose(bundle);
  CHECK_EQ(gpu.liveModules, 0);
  CHECK_STATUS(moeBundleLoad(nullptr), MOE_STATUS_INVALID_ARGUMENT,
               "moeBundleLoad: bundle is NULL");
}

TEST(driverOccupancyQueriedOncePerKernel) {
  // Two entries launching one function with the same threads and smem share
  // one query; another smem is another query.
  FakeGpu &gpu = installFakeDriver();
  std::string entry =
      " op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store experts=4 "
      "n=64 k=64 max_rows=2147483647 offsets=i32 bias=none activation=none\n";
  std::string bytes =
      "MOEBUNDLE 6\nchip sm_90a\n" + imageRecord("img", fakeCubin('S')) +
      "entry a" + entry +
      kernelLine("a", "k", "img", 1, 2147483647, 64, 64, 0, 0) + "entry b" +
      entry + kernelLine("b", "k", "img", 1, 2147483647, 64, 64, 0, 0) +
      "entry c" + entry +
      kernelLine("c", "k", "img", 1, 2147483647, 64, 64, 1024, 0) + "end\n";
  moeBundle *bundle = openBundle(bytes);
  CHECK(bundle != nullptr);
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.occupancyQueries.size(), size_t(2));
  moeBundleClose(bundle);
}

TEST(driverOccupancyFailures) {
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = openBundle(gemmPlanBundle());
  GateUp a(64);

  // Not one CTA fits on a multiprocessor: a load error, whichever entry is
  // launched, and nothing stays loaded.
  gpu.ctasPerSm[kNormal64] = 0;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               "moeBundleLoad: kernel 'grouped_matmul_bf16_64x256x64_s4_off64' "
               "(entry 'down') cannot be resident: 128 threads, 163840 bytes "
               "of shared memory");
  CHECK_EQ(gpu.liveModules, 0);
  CHECK_STATUS(a.run(bundle), MOE_STATUS_UNSUPPORTED,
               "moeLaunch: kernel "
               "'grouped_matmul_bf16_64x256x64_s4_off64' (entry 'down') "
               "cannot be resident");
  CHECK_EQ(gpu.launches.size(), size_t(0));
  CHECK_EQ(gpu.liveModules, 0);
  gpu.ctasPerSm[kNormal64] = -1;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               "cannot be resident");
  gpu.ctasPerSm.clear();

  // (The fake also answers 0 for more smem than cuFuncSetAttribute allowed,
  // as the driver does, so every successful load shows that the attribute
  // is set before the query.) A failing query:
  gpu.occupancyResult = cu::kErrorInvalidValue;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_CUDA_ERROR,
               "moeBundleLoad: cuOccupancyMaxActiveBlocksPerMultiprocessor("
               "'grouped_matmul_bf16_64x256x64_s4_off32', 128 threads, "
               "163840 bytes) failed: CUDA_ERROR_INVALID_VALUE");
  CHECK_EQ(gpu.liveModules, 0);
  gpu.occupancyResult = cu::kSuccess;

  // The multiprocessor count is read before any module is loaded.
  int loads = count(gpu.calls, "cuModuleLoadData");
  gpu.smCountResult = cu::kErrorInvalidValue;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_CUDA_ERROR,
               "moeBundleLoad: cuDeviceGetAttribute(multiprocessor count) "
               "failed: CUDA_ERROR_INVALID_VALUE");
  gpu.smCountResult = cu::kSuccess;
  gpu.smCount = 0;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               "moeBundleLoad: the device reports 0 multiprocessors");
  CHECK_EQ(count(gpu.calls, "cuModuleLoadData"), loads);
  gpu.smCount = 132;

  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(a.run(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.launches.size(), size_t(2));
  moeBundleClose(bundle);
  CHECK_EQ(gpu.liveModules, 0);
}

TEST(driverLoadsLazilyAndOncePerContext) {
  // The first moeLaunch loads the bundle; the next finds it loaded and
  // makes no query: the context lookup, the maps, the launches.
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = openBundle(gemmPlanBundle());
  GateUp a(64);
  CHECK_EQ(a.run(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.liveModules, 2);
  CHECK_EQ(gpu.launches.size(), size_t(2));
  CHECK_CONTAINS(callsSince(0), "cuInit");
  const std::string once = "cuCtxGetCurrent cuCtxGetId cuTensorMapEncodeTiled "
                           "cuTensorMapEncodeTiled cuTensorMapEncodeTiled "
                           "cuTensorMapEncodeTiled cuLaunchKernelEx "
                           "cuLaunchKernelEx";
  size_t before = gpu.calls.size();
  CHECK_EQ(a.run(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(callsSince(before), once);
  // The load queried the residency of the 5 kernel records, once.
  CHECK_EQ(gpu.occupancyQueries.size(), size_t(5));

  // Residency is cached per context: another device (here: fewer
  // multiprocessors) gets its own grids, and nothing is queried at launch.
  gpu.current = fakeContextB();
  gpu.smCount = 78;
  gpu.ctasPerSm[kNormal32] = 2;
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.liveModules, 4);
  gpu.smCount = 1000; // not read again
  gpu.ctasPerSm.clear();
  // M = 131072: both kernels have more work than resident CTAs.
  a.m = 131072;
  before = gpu.calls.size();
  size_t launches = gpu.launches.size();
  CHECK_EQ(a.run(bundle), MOE_STATUS_SUCCESS);
  gpu.current = fakeContextA();
  CHECK_EQ(a.run(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(callsSince(before), once + " " + once);
  CHECK_EQ(gpu.launches.size(), launches + 4);
  if (gpu.launches.size() == launches + 4) {
    CHECK_EQ(gpu.launches[launches].grid[0], 156u);     // 2 x 78
    CHECK_EQ(gpu.launches[launches + 1].grid[0], 312u); // 4 x 78
    CHECK_EQ(gpu.launches[launches + 2].grid[0], 132u);
    CHECK_EQ(gpu.launches[launches + 3].grid[0], 528u);
  }
  moeBundleClose(bundle);
  CHECK_EQ(gpu.liveModules, 0);
}

TEST(driverSharedMemoryAttributeWhereNeeded) {
  // MAX_DYNAMIC_SHARED_SIZE_BYTES is set for every grouped GEMM kernel and
  // for the others only with smem > 0; every kernel record's residency is
  // queried (a function shared with other threads: another query).
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = openBundle(permuteBundle());
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  std::vector<std::pair<std::string, int>> permute = {
      {kPermIndex64, 17408}, {kPermCountWide, 4096}, {kPermIndexWide, 73728}};
  CHECK(gpu.smemAttributes == permute);
  // perm (3), perm32 (3), wide (3: its gather kernel is perm32's with 128
  // threads), router, combine.
  CHECK_EQ(gpu.occupancyQueries.size(), size_t(11));
  CHECK_EQ(gpu.liveModules, 1);
  moeBundleClose(bundle);
  installFakeDriver();
  bundle = openBundle(routeBundle());
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  std::vector<std::pair<std::string, int>> route = {{kRouteSoftmax, 2048},
                                                    {kNormal32, 0}};
  CHECK(gpu.smemAttributes == route);
  CHECK_EQ(gpu.occupancyQueries.size(), size_t(5));
  moeBundleClose(bundle);
  // A kernel of any entry that cannot be resident, or is missing, fails the
  // load, naming it and its entry.
  installFakeDriver();
  gpu.ctasPerSm[kGather] = 0;
  bundle = openBundle(routeBundle());
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               "moeBundleLoad: kernel 'moe_unpermute_k8_i32' (entry 'gather') "
               "cannot be resident: 128 threads, 0 bytes of shared memory");
  gpu.ctasPerSm.clear();
  gpu.missingSymbols.insert(kPermGather32);
  moeBundleClose(bundle);
  bundle = openBundle(permuteBundle());
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_NOT_FOUND,
               "moeBundleLoad: kernel symbol 'moe_permute_gather_off32' (entry "
               "'perm32') not found in image 'moe_kernels'");
  CHECK_EQ(gpu.liveModules, 0);
  moeBundleClose(bundle);
}

TEST(driverEncodeAndLaunchFailures) {
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = openBundle(gemmPlanBundle());
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  GateUp a(131072);
  // A map that does not encode launches nothing.
  gpu.encodeResult = cu::kErrorInvalidValue;
  CHECK_STATUS(a.run(bundle), MOE_STATUS_CUDA_ERROR,
               "moeLaunch: cuTensorMapEncodeTiled(a tensor map of kernel "
               "'grouped_matmul_bf16_64x256x64_s4_off32' of entry 'gate_up') "
               "failed: CUDA_ERROR_INVALID_VALUE (fake driver error)");
  CHECK_EQ(gpu.launches.size(), size_t(0));
  gpu.encodeResult = cu::kSuccess;
  // A failed second launch says that the first one was issued.
  gpu.failLaunchNumber = 1;
  CHECK_STATUS(a.run(bundle), MOE_STATUS_CUDA_ERROR,
               "moeLaunch: cuLaunchKernelEx("
               "'grouped_matmul_bf16_16x64x64_s4_swapab_off32' of entry "
               "'gate_up', grid (528, 1, 1), block (128, 1, 1), smem 81920, "
               "programmatic stream serialization; 1 of 2 launches already "
               "issued) failed: CUDA_ERROR_INVALID_VALUE (fake driver error)");
  CHECK_EQ(gpu.launches.size(), size_t(2));
  // A call of one launch has no count; unknown CUresults are numbers.
  gpu.failLaunchNumber = 2;
  gpu.launchResult = 719;
  a.m = 1;
  CHECK_STATUS(a.run(bundle), MOE_STATUS_CUDA_ERROR,
               "grid (528, 1, 1), block (128, 1, 1), smem 81920, programmatic "
               "stream serialization) failed: CUresult 719");
  CHECK_EQ(gpu.launches.size(), size_t(3));
  moeBundleClose(bundle);

  // A layer: the steps after the failed one are not launched (T = 3: six
  // launches, the third fails).
  installFakeDriver();
  declareMixKernels(gpu);
  gpu.failLaunchNumber = 2;
  bundle = openBundle(layerPlanBundle());
  int64_t tokens = 3;
  uint64_t args[] = {kTb, 2 * kTb, 3 * kTb, 4 * kTb, 5 * kTb};
  moeLaunchArgs l = {&tokens, 1, 5, args, 16 * kTb, 5376};
  CHECK_STATUS(moeLaunch(bundle, "mix", &l, nullptr), MOE_STATUS_CUDA_ERROR,
               "moeLaunch: cuLaunchKernelEx('perm_gather32' of entry '");
  CHECK_CONTAINS(moeLastErrorMessage(),
                 "', grid (2, 1, 1), block (128, 1, 1), smem 0, programmatic "
                 "stream serialization; 2 of 6 launches already issued) "
                 "failed: CUDA_ERROR_INVALID_VALUE");
  CHECK_EQ(gpu.launches.size(), size_t(3));
  moeBundleClose(bundle);
}
