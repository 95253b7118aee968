//===- FakeDriver.h - a recording stand-in for libcuda -----------*- C++
//-*-===//
//
// installFakeDriver() injects a driver table whose functions record every
// call into fakeGpu() and answer from its configuration, so the launch path
// runs without a GPU. Not thread-safe (one test at a time).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_TEST_FAKEDRIVER_H
#define MOE_RUNTIME_TEST_FAKEDRIVER_H

#include "DriverAPI.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace moe_test {

using namespace moe::runtime;

struct FakeEncode {
  int dataType = -1;
  unsigned rank = 0;
  uint64_t address = 0;
  uint64_t dims[5] = {}, strides[4] = {};
  uint32_t box[5] = {}, elementStrides[5] = {};
  int interleave = -1, swizzle = -1, l2Promotion = -1, oobFill = -1;
};

/// An attribute of a cuLaunchKernelEx launch (or of a
/// cuOccupancyMaxActiveClusters configuration).
struct FakeLaunchAttribute {
  int id = -1;
  int value = 0;                // the first 4 bytes of its value union
  bool restOfValueZero = false; // and the other 60 are zero
  unsigned dims[3] = {};        // the first 12 bytes: clusterDim x, y, z
  bool restOfDimsZero = false;  // and the other 52 are zero
};

/// A launch through cuLaunchKernel or cuLaunchKernelEx: the same facts from
/// either, plus which one and the attributes.
struct FakeLaunch {
  std::string function;                        // symbol
  bool ex = false;                             // through cuLaunchKernelEx
  std::vector<FakeLaunchAttribute> attributes; // cuLaunchKernelEx's
  unsigned grid[3] = {}, block[3] = {};
  unsigned smem = 0;
  void *stream = nullptr;
  bool extraIsNull = false;
  bool mapsAligned = false; // params[0] and params[1] 64-byte aligned
  int mapEncode[2] = {};    // which FakeEncode produced each map (index)
  uint64_t words[12] = {};  // params 2..13
  int32_t ints[3] = {};     // params 14..16: K, rows_min, rows_max
  int numParams = 17;       // what the kernel takes (FakeGpu::numParams)
  uint64_t scale[5] = {};   // params 17..21 when it takes 22
  /// Params 17.. (all 8 bytes) of a kernel that takes more than 17: the
  /// scale memrefs of an FP8 kernel, then the row_scale memref, then the bias
  /// memref, as far as it takes them.
  std::vector<uint64_t> tail;
  /// Every parameter of a kernel that takes only 8-byte ones (a route.v1,
  /// unpermute.v2 or permute.v2 kernel, FakeGpu::wordParams); the fields
  /// above are then not filled.
  std::vector<uint64_t> params;
  /// The bytes of every parameter of a kernel listed in FakeGpu::rawParams
  /// (the fields above are then not filled).
  std::vector<std::vector<uint8_t>> raw;
};

/// A cuOccupancyMaxActiveBlocksPerMultiprocessor call.
struct FakeOccupancy {
  std::string function; // symbol
  int threads = 0;
  size_t smem = 0;
};

/// A cuOccupancyMaxActiveClusters call: its configuration.
struct FakeClusterOccupancy {
  std::string function; // symbol
  unsigned grid[3] = {}, block[3] = {};
  unsigned smem = 0;
  void *stream = nullptr;
  std::vector<FakeLaunchAttribute> attributes;
};

struct FakeGpu {
  // Configuration.
  cu::Result initResult = cu::kSuccess;
  cu::Result loadResult = cu::kSuccess;   // cuModuleLoadData
  cu::Result encodeResult = cu::kSuccess; // cuTensorMapEncodeTiled
  int failLaunchNumber = -1;              // this launch (from 0) fails
  cu::Result launchResult = cu::kErrorInvalidValue;
  std::set<std::string> missingSymbols; // cuModuleGetFunction fails
  int ccMajor = 9, ccMinor = 0;
  int maxSharedOptin = 232448;
  int maxThreadsPerBlock = 1024;
  int smCount = 132; // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
  cu::Result smCountResult = cu::kSuccess;
  /// CTAs per multiprocessor by symbol; symbols not listed get 1 when their
  /// smem exceeds 114 KiB, else 4. Any smem above what cuFuncSetAttribute
  /// allowed the function (48 KiB if never set) gives 0, as the driver does.
  std::map<std::string, int> ctasPerSm;
  /// Parameters a kernel takes, by symbol (a real driver knows them from the
  /// image): 17 when not listed; a kernel with 22 (a row_scale kernel) has
  /// params 17..21 recorded in `scale` too; every kernel with more has them
  /// in `tail` (24: a bias kernel, 29: row_scale and bias; 33 to 45: a
  /// grouped_matmul_fp8.v1 kernel, its scale memrefs first).
  std::map<std::string, int> numParams;
  /// Kernels whose parameters are all 8 bytes wide (route.v1, unpermute.v2,
  /// permute.v2),
  /// by symbol: how many they take. Their launches record them all in
  /// FakeLaunch::params and read no tensor maps.
  std::map<std::string, int> wordParams;
  /// Kernels whose parameters are recorded as bytes (FakeLaunch::raw), by
  /// symbol: the size of each parameter.
  std::map<std::string, std::vector<size_t>> rawParams;
  /// Whether a launch of a kernel in neither rawParams nor wordParams reads
  /// its parameters as a grouped GEMM's 17 (or numParams); false records
  /// none of them (a fuzzed plan's kernels take any parameters).
  bool readUndeclaredParams = true;
  cu::Result occupancyResult = cu::kSuccess;
  /// cuOccupancyMaxActiveClusters by symbol; symbols not listed get
  /// smCount / 2 (0 when their smem exceeds what cuFuncSetAttribute
  /// allowed). The call fails with CUDA_ERROR_INVALID_VALUE when the
  /// configuration has no cluster dimension or a grid of partial clusters.
  std::map<std::string, int> activeClusters;
  cu::Result clusterOccupancyResult = cu::kSuccess;
  bool recordImages = true; // keep the first 16 bytes of each loaded image

  // State and records.
  cu::Context current = nullptr;
  std::vector<std::string> calls;        // driver function names, in order
  std::vector<std::string> loadedImages; // first 16 bytes of each image
  int liveModules = 0;
  std::vector<std::pair<std::string, int>> smemAttributes; // symbol, value
  std::vector<FakeOccupancy> occupancyQueries;
  std::vector<FakeClusterOccupancy> clusterOccupancyQueries;
  std::vector<FakeEncode> encodes;
  std::vector<FakeLaunch> launches;
  int primaryRetains = 0;
  std::vector<void *> unloadContexts; // current context at each unload
};

FakeGpu &fakeGpu();

/// Fake context handles: the one current at start, the primary context of
/// device 0, and a second one tests can switch to.
cu::Context fakeContextA();
cu::Context fakePrimaryContext();
cu::Context fakeContextB();

/// The fake table, filled once; without cuLaunchKernelEx (null) when
/// `withLaunchKernelEx` is false, as a driver older than CUDA 12.0, and
/// without cuOccupancyMaxActiveClusters when `withMaxActiveClusters` is
/// false (older than CUDA 11.8).
const Driver &fakeDriverTable(bool withLaunchKernelEx = true,
                              bool withMaxActiveClusters = true);

/// Resets fakeGpu() to its defaults and injects the fake driver (the one
/// without cuLaunchKernelEx when `withLaunchKernelEx` is false, without
/// cuOccupancyMaxActiveClusters when `withMaxActiveClusters` is false).
FakeGpu &installFakeDriver(bool withLaunchKernelEx = true,
                           bool withMaxActiveClusters = true);

/// Names of the calls recorded since index `from`, joined by ' '.
std::string callsSince(size_t from);

/// Whether `launch` went through cuLaunchKernelEx with exactly one
/// attribute, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (6) = 1,
/// the rest of its value zero: a launch with programmatic dependent launch.
bool isPdlLaunch(const FakeLaunch &launch);

/// Whether `launch` went through cuLaunchKernelEx with exactly the
/// attributes of a 2-CTA cluster kernel: CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
/// (4) = (2, 1, 1), the rest of its value zero, then, when `pdl`,
/// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (6) = 1.
bool isClusterLaunch(const FakeLaunch &launch, bool pdl);

} // namespace moe_test

#endif // MOE_RUNTIME_TEST_FAKEDRIVER_H
