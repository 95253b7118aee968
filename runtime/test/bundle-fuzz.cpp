//===- bundle-fuzz.cpp - libFuzzer target for the bundle reader -----------===//
//
// Each input is a candidate .moebundle: moeBundleOpenMemory, then, when it is
// accepted, every introspection call and a moeGroupedMatmul per entry with
// sizes derived from the input, launched on the fake driver (so the grid and
// descriptor arithmetic runs on fuzzed tiles and rows ranges), then
// moeBundleClose. Built with MOE_ENABLE_FUZZER=ON (address and undefined
// sanitizers); seeds in runtime/test/bundle-corpus/.
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "moe_runtime.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

using namespace moe_test;

namespace {

void require(bool condition) {
  if (!condition)
    __builtin_trap();
}

uint64_t hashOf(const uint8_t *data, size_t size) {
  uint64_t hash = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i)
    hash = (hash ^ data[i]) * 1099511628211ull;
  return hash;
}

void exercise(moeBundle *bundle, uint64_t hash) {
  moeBundleInfo info;
  require(moeBundleGetInfo(bundle, &info) == MOE_STATUS_SUCCESS);
  require(info.version == 1 && std::strlen(info.chip) > 3);
  for (int32_t e = 0; e < info.num_entries; ++e) {
    moeEntryInfo entry;
    require(moeBundleGetEntry(bundle, e, &entry) == MOE_STATUS_SUCCESS);
    require(entry.num_kernels >= 1 && entry.num_kernels <= 16);
    int32_t found = -1;
    require(moeBundleFindEntry(bundle, entry.name, &found) ==
                MOE_STATUS_SUCCESS &&
            found == e);
    for (int32_t k = 0; k < entry.num_kernels; ++k) {
      moeKernelInfo kernel;
      require(moeBundleGetKernel(bundle, e, k, &kernel) == MOE_STATUS_SUCCESS);
      require(kernel.rows_min >= 1 && kernel.rows_min <= kernel.rows_max);
    }
    moeGroupedMatmulArgs args;
    args.rows = 0x100000;
    args.weights = 0x200000;
    args.offsets = 0x300000;
    args.out = 0x400000;
    uint64_t h = hash + uint64_t(e) * 0x9e3779b97f4a7c15ull;
    args.m = (h & 1) ? entry.max_rows
                     : 1 + int64_t((h >> 1) % uint64_t(entry.max_rows));
    args.n = entry.n != -1 ? entry.n : 1 + int64_t((h >> 20) % 100000);
    args.k = entry.k != -1 ? entry.k : 8 * (1 + int64_t((h >> 40) % 2048));
    args.experts =
        entry.experts != -1 ? entry.experts : 1 + int64_t((h >> 8) % 512);
    size_t launchesBefore = fakeGpu().launches.size();
    moeStatus status = moeGroupedMatmul(bundle, entry.name, &args, nullptr);
    require(status == MOE_STATUS_SUCCESS ||
            status == MOE_STATUS_INVALID_ARGUMENT ||
            status == MOE_STATUS_UNSUPPORTED || status == MOE_STATUS_NO_GPU);
    if (status != MOE_STATUS_SUCCESS)
      continue;
    // Some kernel covers every count, so at least one launch, each within
    // the limits the runtime promises.
    require(fakeGpu().launches.size() > launchesBefore);
    for (size_t i = launchesBefore; i < fakeGpu().launches.size(); ++i) {
      const FakeLaunch &launch = fakeGpu().launches[i];
      require(launch.grid[0] >= 1 && launch.grid[0] <= 2147483647u);
      require(launch.grid[1] >= 1 && launch.grid[1] <= 65535u);
      require(launch.ints[0] == int32_t(args.k));
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FakeGpu &gpu = installFakeDriver();
  gpu.recordImages = false; // fuzzed images may be shorter than 16 bytes
  moeBundle *bundle = nullptr;
  moeStatus status = moeBundleOpenMemory(data, size, &bundle);
  require((status == MOE_STATUS_SUCCESS) == (bundle != nullptr));
  require(status == MOE_STATUS_SUCCESS || *moeLastErrorMessage() != '\0');
  if (bundle)
    exercise(bundle, hashOf(data, size));
  moeBundleClose(bundle);
  return 0;
}
