//===- bundle-fuzz.cpp - libFuzzer target for the bundle reader -----------===//
//
// Each input is a candidate .moebundle: moeBundleOpenMemory, then, when it is
// accepted, every introspection call and a moeGroupedMatmul per entry with
// sizes derived from the input, launched on the fake driver (so the grid and
// descriptor arithmetic runs on fuzzed tiles and rows ranges; each grid is
// checked against contract §3 recomputed here in 128 bits, with the out
// memref, weights box and row_scale parameters of the entry's epilogue), then
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
  require(info.version == MOE_BUNDLE_VERSION && std::strlen(info.chip) > 3);
  for (int32_t e = 0; e < info.num_entries; ++e) {
    moeEntryInfo entry;
    require(moeBundleGetEntry(bundle, e, &entry) == MOE_STATUS_SUCCESS);
    require(entry.num_kernels >= 1 && entry.num_kernels <= 16);
    int32_t found = -1;
    require(moeBundleFindEntry(bundle, entry.name, &found) ==
                MOE_STATUS_SUCCESS &&
            found == e);
    moeKernelInfo kernels[16];
    for (int32_t k = 0; k < entry.num_kernels; ++k) {
      moeKernelInfo &kernel = kernels[k];
      require(moeBundleGetKernel(bundle, e, k, &kernel) == MOE_STATUS_SUCCESS);
      require(kernel.rows_min >= 1 && kernel.rows_min <= kernel.rows_max);
    }
    const bool swiglu = std::strcmp(entry.epilogue, "swiglu") == 0;
    const bool rowScale = std::strcmp(entry.epilogue, "row_scale") == 0;
    require(swiglu || rowScale || std::strcmp(entry.epilogue, "store") == 0);
    require(!swiglu || entry.n == -1 || entry.n % 2 == 0);
    moeGroupedMatmulArgs args;
    args.rows = 0x100000;
    args.weights = 0x200000;
    args.offsets = 0x300000;
    args.out = 0x400000;
    args.row_scale = rowScale ? 0x500000 : 0;
    uint64_t h = hash + uint64_t(e) * 0x9e3779b97f4a7c15ull;
    args.m = (h & 1) ? entry.max_rows
                     : 1 + int64_t((h >> 1) % uint64_t(entry.max_rows));
    args.n = entry.n != -1 ? entry.n : 1 + int64_t((h >> 20) % 100000);
    if (swiglu && entry.n == -1)
      args.n += args.n % 2; // even: gate and up halves
    args.k = entry.k != -1 ? entry.k : 8 * (1 + int64_t((h >> 40) % 2048));
    args.experts =
        entry.experts != -1 ? entry.experts : 1 + int64_t((h >> 8) % 512);
    // The fake records parameters 17..21 of kernels declared to take 22 (a
    // symbol may be shared by entries of several epilogues).
    for (int32_t k = 0; k < entry.num_kernels; ++k)
      fakeGpu().numParams[kernels[k].symbol] = rowScale ? 22 : 17;
    size_t launchesBefore = fakeGpu().launches.size();
    moeStatus status = moeGroupedMatmul(bundle, entry.name, &args, nullptr);
    require(status == MOE_STATUS_SUCCESS ||
            status == MOE_STATUS_INVALID_ARGUMENT ||
            status == MOE_STATUS_UNSUPPORTED || status == MOE_STATUS_NO_GPU);
    if (status != MOE_STATUS_SUCCESS)
      continue;
    // Some kernel covers every count, so at least one launch. The grid is
    // (min(work, resident), 1, 1), in file order, skipping the kernels
    // whose rows_min exceeds M; the fake holds 1 CTA per multiprocessor of
    // a kernel with more than 114 KiB of shared memory, else 4.
    require(fakeGpu().launches.size() > launchesBefore);
    size_t next = launchesBefore;
    for (int32_t k = 0; k < entry.num_kernels; ++k) {
      const moeKernelInfo &kernel = kernels[k];
      using Wide = __int128;
      auto ceilDiv = [](Wide a, Wide b) { return (a + b - 1) / b; };
      Wide eligible = args.m / kernel.rows_min;
      if (eligible > args.experts)
        eligible = args.experts;
      if (eligible == 0)
        continue;
      Wide slots = ceilDiv(args.m, kernel.tile_m) + eligible;
      Wide all = Wide(args.experts) * ceilDiv(kernel.rows_max, kernel.tile_m);
      if (all < slots)
        slots = all;
      Wide work = slots * ceilDiv(args.n, kernel.tile_n);
      Wide resident =
          (kernel.smem > (114 << 10) ? 1 : 4) * Wide(fakeGpu().smCount);
      require(next < fakeGpu().launches.size());
      const FakeLaunch &launch = fakeGpu().launches[next++];
      require(launch.function == kernel.symbol);
      require(Wide(launch.grid[0]) == (work < resident ? work : resident));
      require(launch.grid[1] == 1 && launch.grid[2] == 1);
      require(launch.block[0] == unsigned(kernel.threads));
      require(launch.ints[0] == int32_t(args.k));
      // out is [M, N/2] after a swiglu, whose weights box has tile_n/2 rows.
      const uint64_t columns = uint64_t(swiglu ? args.n / 2 : args.n);
      require(launch.words[8] == uint64_t(args.m) &&
              launch.words[9] == columns && launch.words[10] == columns);
      require(launch.mapEncode[1] >= 0 &&
              size_t(launch.mapEncode[1]) < fakeGpu().encodes.size());
      const FakeEncode &weights = fakeGpu().encodes[launch.mapEncode[1]];
      require(weights.dims[1] == uint64_t(args.n));
      require(weights.box[1] ==
              uint32_t(swiglu ? kernel.tile_n / 2 : kernel.tile_n));
      if (rowScale)
        require(launch.numParams == 22 && launch.scale[0] == args.row_scale &&
                launch.scale[1] == args.row_scale && launch.scale[2] == 0 &&
                launch.scale[3] == uint64_t(args.m) && launch.scale[4] == 1);
    }
    require(next == fakeGpu().launches.size());
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
