//===- DriverTests.cpp - finding the driver, loading, contexts ------------===//

#include "FakeDriver.h"
#include "TestBundles.h"
#include "TestHarness.h"

using namespace moe_test;

namespace {

moeGroupedMatmulArgs validGateUp() {
  moeGroupedMatmulArgs a;
  a.rows = 0x10000;
  a.weights = 0x20000;
  a.offsets = 0x30000;
  a.out = 0x40000;
  a.m = 64;
  a.n = 28672;
  a.k = 4096;
  a.experts = 8;
  a.row_scale = 0;
  a.bias = 0;
  a.rows_scale = 0;
  a.weights_scale = 0;
  a.out_scale = 0;
  return a;
}

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
  moeBundle *bundle = openBundle(validBundle());
  CHECK(bundle != nullptr);
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_NO_GPU,
               "moeBundleLoad: no CUDA driver: dlopen(libcuda.so.1) failed: "
               "libcuda.so.1: cannot open shared object file");
  moeGroupedMatmulArgs a = validGateUp();
  CHECK_STATUS(moeGroupedMatmul(bundle, "gate_up", &a, nullptr),
               MOE_STATUS_NO_GPU, "moeGroupedMatmul: no CUDA driver: dlopen");
  // The arguments are checked before the driver is needed.
  a.k = 100;
  CHECK_STATUS(moeGroupedMatmul(bundle, "gate_up", &a, nullptr),
               MOE_STATUS_INVALID_ARGUMENT, "K = 100 does not match");
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
  moeBundle *bundle = openBundle(validBundle());
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_NO_GPU,
               "moeBundleLoad: no CUDA device: cuInit failed: "
               "CUDA_ERROR_NO_DEVICE (fake driver error)");
  moeGroupedMatmulArgs a = validGateUp();
  CHECK_STATUS(moeGroupedMatmul(bundle, "gate_up", &a, nullptr),
               MOE_STATUS_NO_GPU, "moeGroupedMatmul: no CUDA device");
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
  moeBundle *bundle = openBundle(validBundle());
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
  moeGroupedMatmulArgs a = validGateUp();
  CHECK_STATUS(
      moeGroupedMatmul(bundle, "gate_up", &a, nullptr), MOE_STATUS_UNSUPPORTED,
      "moeGroupedMatmul: bundle is for sm_90a but the device is sm_91");
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

  // Without the `a` suffix later minor versions of the major are fine.
  bundle = openBundle(withChip("sm_80"));
  gpu.ccMajor = 8;
  gpu.ccMinor = 6;
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);
  bundle = openBundle(withChip("sm_86"));
  gpu.ccMinor = 0;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               "bundle is for sm_86 but the device is sm_80");
  moeBundleClose(bundle);
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
  moeBundle *bundle = openBundle(validBundle());
  moeGroupedMatmulArgs a = validGateUp();
  CHECK_EQ(moeGroupedMatmul(bundle, "gate_up", &a, nullptr),
           MOE_STATUS_SUCCESS);
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
  moeBundle *bundle = openBundle(validBundle());
  moeGroupedMatmulArgs a = validGateUp();

  // Not one CTA fits on a multiprocessor: a load error, whichever entry is
  // launched, and nothing stays loaded.
  gpu.ctasPerSm[kNormal64] = 0;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               "moeBundleLoad: kernel 'grouped_matmul_bf16_64x256x64_s4_off64' "
               "(entry 'down') cannot be resident: 128 threads, 163840 bytes "
               "of shared memory");
  CHECK_EQ(gpu.liveModules, 0);
  CHECK_STATUS(moeGroupedMatmul(bundle, "gate_up", &a, nullptr),
               MOE_STATUS_UNSUPPORTED,
               "moeGroupedMatmul: kernel "
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
  CHECK_EQ(moeGroupedMatmul(bundle, "gate_up", &a, nullptr),
           MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.launches.size(), size_t(2));
  moeBundleClose(bundle);
  CHECK_EQ(gpu.liveModules, 0);
}
