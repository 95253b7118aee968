//===- Runtime.cpp - the C API: bundles, loading, launching ---------------===//
//
// Implements moe_runtime.h over the driver table of DriverAPI.h: contract §3
// (argument checks; for grouped_matmul.v3 the TMA descriptors, persistent
// grids, the 17 kernel parameters, the 5 more of row_scale entries and the
// 7 more of bias entries; for grouped_matmul_fp8.v1 the same with 1-byte
// tensor maps and the 16 parameters of its two scale memrefs after the 17
// (f32 blocks for fp8_block, UE8M0 bytes per 32 along K for mxfp8),
// then the 7 of the output's scales of an out=f8E4M3FN entry, on a grid of
// its [1, 128] output groups; the memref parameters and grids of route.v1,
// unpermute.v2, permute.v2 (the 7 of the rows' scales after the gather's 24
// when it quantizes them; the scatter kernel of a scatter_from entry takes
// the slots, 7, for the sources, 5) and
// quantize.v1; layer.v1 as five of those steps, layer_fp8.v1 as seven with two
// quantizes, less the quantize of the rows when its permute's gather quantizes
// them and less the intermediate when its gate_up quantizes its output; every
// launch with programmatic dependent launch, §3.6, unless MOE_RUNTIME_PDL=0;
// grouped matmul kernels with cluster=2 as 2-CTA clusters, §3.1). Each
// launching call validates into a plan, then launches it: moeLayer validates
// all of its steps' plans before the first launch.
//
// Over 800 lines because it holds the hand-written host program of every
// ABI (version 6); docs/launch-plans.md replaces it with one plan
// interpreter driven by the bundle.
//
//===----------------------------------------------------------------------===//

#include "Bundle.h"
#include "DriverAPI.h"

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>

using namespace moe::runtime;

namespace {

/// A kernel record of the bundle as loaded in one context.
struct LoadedKernel {
  cu::Function function = nullptr;
  /// What the device holds of it at once, the persistent grid's cap, in
  /// its launch units: CTAs (occupancy for its threads and smem, times the
  /// multiprocessor count), or clusters for a kernel with Kernel::cluster 2
  /// (cuOccupancyMaxActiveClusters; contract §3.1).
  int64_t resident = 0;
};

/// A bundle's modules and functions in one CUDA context.
struct ContextState {
  const Driver *driver = nullptr; // the table that loaded them
  cu::Context context = nullptr;
  unsigned long long id = 0; // cuCtxGetId: unique for the process lifetime
  std::vector<cu::Module> modules;                // per image, or null
  std::vector<std::vector<LoadedKernel>> kernels; // [entry][kernel]
};

thread_local char lastError[2048];

} // namespace

struct moeBundle {
  BundleData data;
  std::mutex mutex; // guards contexts
  std::vector<std::unique_ptr<ContextState>> contexts;
};

namespace moe::runtime {
moeStatus setError(moeStatus status, const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(lastError, sizeof(lastError), format, args);
  va_end(args);
  return status;
}
} // namespace moe::runtime

namespace {

/// "CUDA_ERROR_NAME (description)" of a driver result.
std::string describe(const Driver *driver, cu::Result result) {
  const char *name = nullptr, *text = nullptr;
  if (driver->getErrorName(result, &name) != cu::kSuccess || !name)
    name = nullptr;
  if (driver->getErrorString(result, &text) != cu::kSuccess || !text)
    text = nullptr;
  char buffer[512];
  if (name)
    std::snprintf(buffer, sizeof(buffer), "%s (%s)", name,
                  text ? text : "no description");
  else
    std::snprintf(buffer, sizeof(buffer), "CUresult %d", result);
  return buffer;
}

moeStatus statusOf(cu::Result result) {
  switch (result) {
  case cu::kErrorOutOfMemory:
    return MOE_STATUS_OUT_OF_MEMORY;
  case cu::kErrorNoDevice:
  case cu::kErrorStubLibrary:
    return MOE_STATUS_NO_GPU;
  case cu::kErrorNotFound:
    return MOE_STATUS_NOT_FOUND;
  default:
    return MOE_STATUS_CUDA_ERROR;
  }
}

/// Sets the error for a failed driver call and returns its status.
moeStatus driverError(const Driver *driver, const char *caller,
                      const std::string &call, cu::Result result) {
  return setError(statusOf(result), "%s: %s failed: %s", caller, call.c_str(),
                  describe(driver, result).c_str());
}

ContextState *findContext(moeBundle *bundle, const Driver *driver,
                          unsigned long long id) {
  for (auto &state : bundle->contexts)
    if (state->driver == driver && state->id == id)
      return state.get();
  return nullptr;
}

void unloadModules(const Driver *driver, std::vector<cu::Module> &modules) {
  for (cu::Module &module : modules)
    if (module) {
      driver->moduleUnload(module);
      module = nullptr;
    }
}

/// The launch configuration of `kernel` on grid (gridX, 1, 1) with
/// `count` attributes.
cu::LaunchConfig launchConfigOf(const Kernel &kernel, int64_t gridX,
                                cu::LaunchAttribute *attrs, unsigned count,
                                void *stream) {
  cu::LaunchConfig config;
  std::memset(&config, 0, sizeof(config));
  config.gridDimX = unsigned(gridX);
  config.gridDimY = 1;
  config.gridDimZ = 1;
  config.blockDimX = unsigned(kernel.threads);
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = unsigned(kernel.smem);
  config.hStream = static_cast<cu::Stream>(stream);
  config.attrs = attrs;
  config.numAttrs = count;
  return config;
}

/// Sets loaded.resident to the clusters of `kernel` (Kernel::cluster CTAs
/// each) the device holds at once: cuOccupancyMaxActiveClusters for its
/// block and smem on a grid of one cluster (any whole number of clusters
/// gives the same answer). 0 is an error, as 0 CTAs per multiprocessor.
moeStatus residentClusters(const Driver *driver, const char *caller,
                           const Entry &entry, const Kernel &kernel,
                           LoadedKernel &loaded, int smCount) {
  cu::LaunchAttribute attribute;
  std::memset(&attribute, 0, sizeof(attribute));
  attribute.id = cu::kLaunchAttributeClusterDimension;
  attribute.value.clusterDim.x = unsigned(kernel.cluster);
  attribute.value.clusterDim.y = 1;
  attribute.value.clusterDim.z = 1;
  cu::LaunchConfig config =
      launchConfigOf(kernel, kernel.cluster, &attribute, 1, nullptr);
  int clusters = 0;
  if (cu::Result result = driver->occupancyMaxActiveClusters(
          &clusters, loaded.function, &config))
    return driverError(driver, caller,
                       "cuOccupancyMaxActiveClusters('" + kernel.symbol +
                           "', cluster (" + std::to_string(kernel.cluster) +
                           ", 1, 1), " + std::to_string(kernel.threads) +
                           " threads, " + std::to_string(kernel.smem) +
                           " bytes)",
                       result);
  if (clusters < 1)
    return setError(MOE_STATUS_UNSUPPORTED,
                    "%s: kernel '%s' (entry '%s') cannot be resident as a "
                    "cluster of %d CTAs: %d threads, %d bytes of shared "
                    "memory, %d multiprocessors",
                    caller, kernel.symbol.c_str(), entry.name.c_str(),
                    kernel.cluster, kernel.threads, kernel.smem, smCount);
  loaded.resident = clusters;
  return MOE_STATUS_SUCCESS;
}

/// Loads `bundle` into the current context (the primary context of device 0
/// when none is current) unless it already is there; sets *out to its state.
/// Takes bundle->mutex.
moeStatus ensureLoaded(moeBundle *bundle, const char *caller,
                       ContextState **out) {
  std::string whyNot;
  const Driver *driver = getDriver(whyNot);
  if (!driver)
    return setError(MOE_STATUS_NO_GPU, "%s: %s", caller, whyNot.c_str());
  std::lock_guard<std::mutex> lock(bundle->mutex);
  cu::Context context = nullptr;
  unsigned long long id = 0;
  // Fast path: a context where the bundle is loaded is current.
  if (!bundle->contexts.empty() &&
      driver->ctxGetCurrent(&context) == cu::kSuccess && context &&
      driver->ctxGetId(context, &id) == cu::kSuccess) {
    if (ContextState *state = findContext(bundle, driver, id)) {
      *out = state;
      return MOE_STATUS_SUCCESS;
    }
  }

  if (cu::Result result = driver->init(0)) {
    if (result == cu::kErrorNoDevice || result == cu::kErrorStubLibrary)
      return setError(MOE_STATUS_NO_GPU,
                      "%s: no CUDA device: cuInit failed: %s", caller,
                      describe(driver, result).c_str());
    return driverError(driver, caller, "cuInit", result);
  }
  context = nullptr;
  if (cu::Result result = driver->ctxGetCurrent(&context))
    return driverError(driver, caller, "cuCtxGetCurrent", result);
  if (!context) {
    cu::Device device0 = 0;
    if (cu::Result result = driver->deviceGet(&device0, 0))
      return driverError(driver, caller, "cuDeviceGet(0)", result);
    // Retained for the rest of the process, like the CUDA runtime does.
    if (cu::Result result = driver->devicePrimaryCtxRetain(&context, device0))
      return driverError(driver, caller, "cuDevicePrimaryCtxRetain(device 0)",
                         result);
    if (cu::Result result = driver->ctxSetCurrent(context))
      return driverError(driver, caller, "cuCtxSetCurrent", result);
  }
  if (cu::Result result = driver->ctxGetId(context, &id))
    return driverError(driver, caller, "cuCtxGetId", result);
  if (ContextState *state = findContext(bundle, driver, id)) {
    *out = state;
    return MOE_STATUS_SUCCESS;
  }

  const BundleData &data = bundle->data;
  cu::Device device = 0;
  if (cu::Result result = driver->ctxGetDevice(&device))
    return driverError(driver, caller, "cuCtxGetDevice", result);
  int major = 0, minor = 0, maxSmem = 0, smCount = 0;
  if (cu::Result result = driver->deviceGetAttribute(
          &major, cu::kDevAttrComputeCapabilityMajor, device))
    return driverError(driver, caller, "cuDeviceGetAttribute(major)", result);
  if (cu::Result result = driver->deviceGetAttribute(
          &minor, cu::kDevAttrComputeCapabilityMinor, device))
    return driverError(driver, caller, "cuDeviceGetAttribute(minor)", result);
  bool compatible =
      major == data.ccMajor &&
      (data.archSpecific ? minor == data.ccMinor : minor >= data.ccMinor);
  if (!compatible)
    return setError(MOE_STATUS_UNSUPPORTED,
                    "%s: bundle is for %s but the device is sm_%d%d (compute "
                    "capability %d.%d)",
                    caller, data.chip.c_str(), major, minor, major, minor);
  if (cu::Result result = driver->deviceGetAttribute(
          &maxSmem, cu::kDevAttrMaxSharedMemoryPerBlockOptin, device))
    return driverError(driver, caller,
                       "cuDeviceGetAttribute(max shared memory per block)",
                       result);
  for (const Entry &entry : data.entries)
    for (const Kernel &kernel : entry.kernels)
      if (kernel.smem > maxSmem)
        return setError(MOE_STATUS_UNSUPPORTED,
                        "%s: kernel '%s' of entry '%s' needs smem = %d bytes "
                        "but the device allows at most %d per block",
                        caller, kernel.symbol.c_str(), entry.name.c_str(),
                        kernel.smem, maxSmem);
  if (cu::Result result = driver->deviceGetAttribute(
          &smCount, cu::kDevAttrMultiprocessorCount, device))
    return driverError(driver, caller,
                       "cuDeviceGetAttribute(multiprocessor count)", result);
  if (smCount < 1)
    return setError(MOE_STATUS_UNSUPPORTED,
                    "%s: the device reports %d multiprocessors", caller,
                    smCount);

  auto state = std::make_unique<ContextState>();
  state->driver = driver;
  state->context = context;
  state->id = id;
  state->modules.assign(data.images.size(), nullptr);
  // Load only the images some kernel uses.
  for (const Entry &entry : data.entries)
    for (const Kernel &kernel : entry.kernels) {
      cu::Module &module = state->modules[kernel.image];
      if (module)
        continue;
      const Image &image = data.images[kernel.image];
      if (cu::Result result =
              driver->moduleLoadData(&module, image.data.get())) {
        module = nullptr;
        unloadModules(driver, state->modules);
        return driverError(driver, caller,
                           "cuModuleLoadData(image '" + image.name + "')",
                           result);
      }
    }
  // Look the kernels up; a function shared by several entries gets the
  // largest dynamic shared memory any of them asks for.
  struct Unique {
    cu::Function function;
    int32_t smem;
    bool setSmem; // grouped matmul kernels always set it, others if > 0
  };
  std::vector<Unique> unique;
  for (const Entry &entry : data.entries) {
    std::vector<LoadedKernel> loaded;
    for (const Kernel &kernel : entry.kernels) {
      cu::Function function = nullptr;
      const Image &image = data.images[kernel.image];
      if (cu::Result result = driver->moduleGetFunction(
              &function, state->modules[kernel.image], kernel.symbol.c_str())) {
        unloadModules(driver, state->modules);
        if (result == cu::kErrorNotFound)
          return setError(MOE_STATUS_NOT_FOUND,
                          "%s: kernel symbol '%s' (entry '%s') not found in "
                          "image '%s'",
                          caller, kernel.symbol.c_str(), entry.name.c_str(),
                          image.name.c_str());
        return driverError(driver, caller,
                           "cuModuleGetFunction('" + kernel.symbol + "')",
                           result);
      }
      int maxThreads = 0;
      if (cu::Result result = driver->funcGetAttribute(
              &maxThreads, cu::kFuncAttrMaxThreadsPerBlock, function)) {
        unloadModules(driver, state->modules);
        return driverError(driver, caller,
                           "cuFuncGetAttribute('" + kernel.symbol + "')",
                           result);
      }
      if (maxThreads < kernel.threads) {
        unloadModules(driver, state->modules);
        return setError(MOE_STATUS_UNSUPPORTED,
                        "%s: kernel '%s' (entry '%s') runs at most %d threads "
                        "per block on this device, the bundle says threads = "
                        "%d",
                        caller, kernel.symbol.c_str(), entry.name.c_str(),
                        maxThreads, kernel.threads);
      }
      loaded.push_back({function, 0});
      auto it =
          std::find_if(unique.begin(), unique.end(),
                       [&](const Unique &u) { return u.function == function; });
      const bool setSmem = isGroupedMatmul(entry.kind) || kernel.smem > 0;
      if (it == unique.end()) {
        unique.push_back({function, kernel.smem, setSmem});
      } else {
        it->smem = std::max(it->smem, kernel.smem);
        it->setSmem = it->setSmem || setSmem;
      }
    }
    state->kernels.push_back(std::move(loaded));
  }
  for (const Unique &u : unique) {
    if (!u.setSmem)
      continue;
    if (cu::Result result = driver->funcSetAttribute(
            u.function, cu::kFuncAttrMaxDynamicSharedSizeBytes, u.smem)) {
      unloadModules(driver, state->modules);
      return driverError(driver, caller,
                         "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES = " +
                             std::to_string(u.smem) + ")",
                         result);
    }
  }
  // Residency of every kernel record, once the attribute allows its smem:
  // one query per (function, threads, smem, cluster), as a function shared
  // by entries may be launched with different smem.
  struct Occupancy {
    cu::Function function;
    int32_t threads, smem, cluster;
    int64_t resident;
  };
  std::vector<Occupancy> known;
  for (size_t e = 0; e < data.entries.size(); ++e) {
    const Entry &entry = data.entries[e];
    for (size_t i = 0; i < entry.kernels.size(); ++i) {
      const Kernel &kernel = entry.kernels[i];
      LoadedKernel &loaded = state->kernels[e][i];
      auto same =
          std::find_if(known.begin(), known.end(), [&](const Occupancy &o) {
            return o.function == loaded.function &&
                   o.threads == kernel.threads && o.smem == kernel.smem &&
                   o.cluster == kernel.cluster;
          });
      if (same != known.end()) {
        loaded.resident = same->resident;
        continue;
      }
      if (kernel.cluster > 1 && driver->occupancyMaxActiveClusters) {
        // Clusters of `cluster` CTAs, for any grid of whole clusters.
        if (moeStatus status = residentClusters(driver, caller, entry, kernel,
                                                loaded, smCount)) {
          unloadModules(driver, state->modules);
          return status;
        }
      } else {
        int perSM = 0;
        if (cu::Result result =
                driver->occupancyMaxActiveBlocksPerMultiprocessor(
                    &perSM, loaded.function, kernel.threads,
                    size_t(kernel.smem))) {
          unloadModules(driver, state->modules);
          return driverError(driver, caller,
                             "cuOccupancyMaxActiveBlocksPerMultiprocessor('" +
                                 kernel.symbol + "', " +
                                 std::to_string(kernel.threads) + " threads, " +
                                 std::to_string(kernel.smem) + " bytes)",
                             result);
        }
        if (perSM < 1) {
          unloadModules(driver, state->modules);
          return setError(MOE_STATUS_UNSUPPORTED,
                          "%s: kernel '%s' (entry '%s') cannot be resident: %d "
                          "threads, %d bytes of shared memory",
                          caller, kernel.symbol.c_str(), entry.name.c_str(),
                          kernel.threads, kernel.smem);
        }
        // Without cuOccupancyMaxActiveClusters, a cluster kernel's clusters
        // from its CTAs: floor(ctas_per_sm * sm_count / cluster).
        loaded.resident = int64_t(perSM) * smCount / kernel.cluster;
        if (loaded.resident < 1) {
          unloadModules(driver, state->modules);
          return setError(MOE_STATUS_UNSUPPORTED,
                          "%s: kernel '%s' (entry '%s') cannot be resident as "
                          "a cluster of %d CTAs: %d CTAs per multiprocessor, "
                          "%d multiprocessors",
                          caller, kernel.symbol.c_str(), entry.name.c_str(),
                          kernel.cluster, perSM, smCount);
        }
      }
      known.push_back({loaded.function, kernel.threads, kernel.smem,
                       kernel.cluster, loaded.resident});
    }
  }
  *out = state.get();
  bundle->contexts.push_back(std::move(state));
  return MOE_STATUS_SUCCESS;
}

moeStatus openBytes(const uint8_t *data, size_t size, moeBundle **out,
                    const char *origin) {
  auto bundle = std::make_unique<moeBundle>();
  std::string error;
  moeStatus status = parseBundle(data, size, bundle->data, error);
  if (status != MOE_STATUS_SUCCESS)
    return setError(status, "%s%s", origin, error.c_str());
  *out = bundle.release();
  return MOE_STATUS_SUCCESS;
}

/// An INVALID_ARGUMENT error of `caller` for entry `entry`.
moeStatus vInvalidArgument(const char *caller, const char *entry,
                           const char *format, va_list args) {
  char message[512];
  std::vsnprintf(message, sizeof(message), format, args);
  return setError(MOE_STATUS_INVALID_ARGUMENT, "%s(%s): %s", caller, entry,
                  message);
}

__attribute__((format(printf, 3, 4))) moeStatus invalidArgumentOf(
    const char *caller, const char *entry, const char *format, ...) {
  va_list args;
  va_start(args, format);
  moeStatus status = vInvalidArgument(caller, entry, format, args);
  va_end(args);
  return status;
}

/// An INVALID_ARGUMENT error of moeGroupedMatmul for entry `entry`.
__attribute__((format(printf, 2, 3))) moeStatus
invalidArgument(const char *entry, const char *format, ...) {
  va_list args;
  va_start(args, format);
  moeStatus status = vInvalidArgument("moeGroupedMatmul", entry, format, args);
  va_end(args);
  return status;
}

/// The checks every launching call starts with: non-null bundle, entry name
/// and args, and an entry of that name (NOT_FOUND lists the first ones).
moeStatus findEntry(const moeBundle *bundle, const char *caller,
                    const char *entryName, const void *args, int *index) {
  if (!bundle)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "%s: bundle is NULL", caller);
  if (!entryName)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "%s: entry name is NULL",
                    caller);
  if (!args)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "%s: args is NULL", caller);
  const auto &entries = bundle->data.entries;
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].name == entryName) {
      *index = int(i);
      return MOE_STATUS_SUCCESS;
    }
  std::string names;
  for (size_t i = 0; i < entries.size() && i < 8; ++i)
    names += (i ? ", " : "") + entries[i].name;
  if (entries.size() > 8)
    names += ", ...";
  return setError(MOE_STATUS_NOT_FOUND,
                  "%s: no entry '%.300s' in the bundle (entries: %s)", caller,
                  entryName, names.empty() ? "none" : names.c_str());
}

/// findEntry, then the checks moeRoute, moeUnpermute, moePermute and moeLayer
/// share: the entry is `op` with one of the ABIs `kinds`, and 1 <= tokens <=
/// its max_rows.
moeStatus findTokenEntry(const moeBundle *bundle, const char *caller,
                         const char *entryName, const void *args,
                         const char *op, std::initializer_list<Abi> kinds,
                         int64_t tokens, int *index) {
  if (moeStatus status = findEntry(bundle, caller, entryName, args, index))
    return status;
  const Entry &entry = bundle->data.entries[*index];
  const char *name = entry.name.c_str();
  if (entry.op != op ||
      std::find(kinds.begin(), kinds.end(), entry.kind) == kinds.end()) {
    std::string abis;
    for (Abi kind : kinds)
      abis += (abis.empty() ? "" : " or ") + std::string(abiName(kind));
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s(%s): the entry is op=%s abi=%s, not op=%s with abi=%s",
                    caller, name, entry.op.c_str(), entry.abi.c_str(), op,
                    abis.c_str());
  }
  if (tokens < 1)
    return invalidArgumentOf(caller, name, "T = %lld must be at least 1",
                             (long long)tokens);
  if (tokens > entry.maxRows)
    return invalidArgumentOf(caller, name,
                             "T = %lld exceeds the entry's max_rows = %lld",
                             (long long)tokens, (long long)entry.maxRows);
  return MOE_STATUS_SUCCESS;
}

/// One pointer argument of a launching call.
struct PointerArg {
  const char *what;
  uint64_t pointer;
  int64_t alignment;
  const char *whyNeeded;  // appended to the error when it is NULL
  const char *whyAligned; // appended to the error when it is misaligned
};

/// Nulls first, then alignments, in the order given.
moeStatus checkPointers(const char *caller, const char *entry,
                        const PointerArg *pointers, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (!pointers[i].pointer)
      return invalidArgumentOf(caller, entry, "%s pointer is NULL%s",
                               pointers[i].what, pointers[i].whyNeeded);
  for (size_t i = 0; i < count; ++i)
    if (pointers[i].pointer % uint64_t(pointers[i].alignment))
      return invalidArgumentOf(
          caller, entry, "%s pointer 0x%llx is not %d-byte aligned%s",
          pointers[i].what, (unsigned long long)pointers[i].pointer,
          int(pointers[i].alignment), pointers[i].whyAligned);
  return MOE_STATUS_SUCCESS;
}

/// Whether a * b * c fits in int64 (all non-negative).
bool productFits(int64_t a, int64_t b, int64_t c) {
  int64_t ab = 0, abc = 0;
  return !__builtin_mul_overflow(a, b, &ab) &&
         !__builtin_mul_overflow(ab, c, &abc);
}

int64_t ceilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0); }

/// The most parameters of a route.v1, unpermute.v2 or permute.v2 kernel: the
/// 33 of the permute's quantizing scatter kernel (scatter_from).
constexpr int kMaxWords = 33;

/// A launch of a route.v1, unpermute.v2 or permute.v2 kernel: all its
/// parameters are 8 bytes wide (memref descriptors: pointer, pointer,
/// offset 0, sizes, strides), kept here until the launch.
struct WordLaunch {
  int kernel = 0; // index in its entry
  int64_t gridX = 0;
  uint64_t words[kMaxWords];
  int count = 0;

  void push(uint64_t word) { words[count++] = word; }
  /// A rank-1 memref [size].
  void memref1D(uint64_t pointer, int64_t size) {
    for (uint64_t word :
         {pointer, pointer, uint64_t(0), uint64_t(size), uint64_t(1)})
      push(word);
  }
  /// A dense row-major rank-2 memref [rows, columns].
  void memref2D(uint64_t pointer, int64_t rows, int64_t columns) {
    for (uint64_t word : {pointer, pointer, uint64_t(0), uint64_t(rows),
                          uint64_t(columns), uint64_t(columns), uint64_t(1)})
      push(word);
  }
};

/// The validated launches of a moeRoute, moeUnpermute or moePermute call.
struct WordPlan {
  int entryIndex = -1;
  WordLaunch launches[3];
  int numLaunches = 0;
};

/// Whether the launches of a call use programmatic dependent launch
/// (contract §3.6): yes unless the environment variable MOE_RUNTIME_PDL is
/// "0". Read once per launching call, so that a process can compare both.
bool pdlRequested() {
  const char *value = std::getenv("MOE_RUNTIME_PDL");
  return !value || std::strcmp(value, "0") != 0;
}

/// Launches kernel `kernelIndex` of entry `entryIndex` of a loaded bundle on
/// grid (gridX, 1, 1) with `params`: launch `issued` (from 0) of the `total`
/// of the call, which an error names when there are several. Every launch of
/// the runtime goes through here: with `pdl` or a cluster kernel
/// (Kernel::cluster 2), and a driver that has cuLaunchKernelEx, through it
/// with the attributes CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = (cluster, 1,
/// 1) for a cluster kernel, then
/// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1 with `pdl`;
/// else through cuLaunchKernel, a cluster kernel then running as the
/// clusters its image requires (contract §3.1, §3.6).
moeStatus launchKernelOf(moeBundle *bundle, ContextState *state,
                         const char *caller, int entryIndex, int kernelIndex,
                         int64_t gridX, void **params, void *stream, bool pdl,
                         int issued, int total) {
  const Entry &entry = bundle->data.entries[entryIndex];
  const Kernel &kernel = entry.kernels[kernelIndex];
  cu::Function function = state->kernels[entryIndex][kernelIndex].function;
  const bool cluster = kernel.cluster > 1;
  const bool ex = (pdl || cluster) && state->driver->launchKernelEx;
  cu::Result result;
  if (ex) {
    cu::LaunchAttribute attributes[2];
    std::memset(attributes, 0, sizeof(attributes));
    unsigned count = 0;
    if (cluster) {
      cu::LaunchAttribute &attribute = attributes[count++];
      attribute.id = cu::kLaunchAttributeClusterDimension;
      attribute.value.clusterDim.x = unsigned(kernel.cluster);
      attribute.value.clusterDim.y = 1;
      attribute.value.clusterDim.z = 1;
    }
    if (pdl) {
      cu::LaunchAttribute &attribute = attributes[count++];
      attribute.id = cu::kLaunchAttributeProgrammaticStreamSerialization;
      attribute.value.programmaticStreamSerializationAllowed = 1;
    }
    cu::LaunchConfig config =
        launchConfigOf(kernel, gridX, attributes, count, stream);
    result = state->driver->launchKernelEx(&config, function, params, nullptr);
  } else {
    result = state->driver->launchKernel(
        function, unsigned(gridX), 1, 1, unsigned(kernel.threads), 1, 1,
        unsigned(kernel.smem), static_cast<cu::Stream>(stream), params,
        nullptr);
  }
  if (result != cu::kSuccess) {
    char progress[64] = "";
    if (total > 1)
      std::snprintf(progress, sizeof(progress),
                    "; %d of %d launches already issued", issued, total);
    // A cluster kernel: the attribute, or the size its image requires.
    char clusterText[64] = "";
    if (cluster)
      std::snprintf(clusterText, sizeof(clusterText), ", cluster (%d, 1, 1)%s",
                    kernel.cluster, ex ? "" : " from the image");
    char call[760];
    std::snprintf(call, sizeof(call),
                  "%s('%s' of entry '%s', grid (%lld, 1, 1), "
                  "block (%d, 1, 1), smem %d%s%s%s)",
                  ex ? "cuLaunchKernelEx" : "cuLaunchKernel",
                  kernel.symbol.c_str(), entry.name.c_str(), (long long)gridX,
                  kernel.threads, kernel.smem, clusterText,
                  ex && pdl ? ", programmatic stream serialization" : "",
                  progress);
    return driverError(state->driver, caller, call, result);
  }
  return MOE_STATUS_SUCCESS;
}

/// Launches `plan` on a loaded bundle (with PDL when `pdl`); *issued counts
/// the launches of the whole call (`total`), for the error messages.
moeStatus launchWords(moeBundle *bundle, ContextState *state,
                      const char *caller, WordPlan &plan, void *stream,
                      bool pdl, int *issued, int total) {
  for (int i = 0; i < plan.numLaunches; ++i) {
    WordLaunch &launch = plan.launches[i];
    void *params[kMaxWords];
    for (int p = 0; p < launch.count; ++p)
      params[p] = &launch.words[p];
    if (moeStatus status = launchKernelOf(
            bundle, state, caller, plan.entryIndex, launch.kernel, launch.gridX,
            params, stream, pdl, *issued, total))
      return status;
    ++*issued;
  }
  return MOE_STATUS_SUCCESS;
}

/// Loads the bundle if needed, then launches `plan` alone.
moeStatus loadAndLaunch(moeBundle *bundle, const char *caller, WordPlan &plan,
                        void *stream) {
  ContextState *state = nullptr;
  if (moeStatus status = ensureLoaded(bundle, caller, &state))
    return status;
  int issued = 0;
  return launchWords(bundle, state, caller, plan, stream, pdlRequested(),
                     &issued, plan.numLaunches);
}

/// The checks of moeRoute (contract §3.2), and its launch into `plan`.
moeStatus validateRoute(const moeBundle *bundle, const char *entryName,
                        const moeRouteArgs *args, WordPlan &plan) {
  static constexpr const char *kCaller = "moeRoute";
  int entryIndex = -1;
  if (moeStatus status =
          findTokenEntry(bundle, kCaller, entryName, args, MOE_OP_ROUTE,
                         {Abi::Route}, args ? args->tokens : 0, &entryIndex))
    return status;
  const Entry &entry = bundle->data.entries[entryIndex];
  const char *name = entry.name.c_str();
  const moeRouteArgs &a = *args;
  // The entry's experts is static (1 <= E < 2^31: the reader checks it).
  if (a.experts != entry.experts)
    return invalidArgumentOf(
        kCaller, name, "E = %lld does not match the entry's experts = %lld",
        (long long)a.experts, (long long)entry.experts);
  // T, E < 2^31 and k <= 32: only the logits' bytes can overflow.
  const int64_t logitsBytes = entry.logitsBits / 8;
  if (!productFits(a.tokens, a.experts, logitsBytes))
    return invalidArgumentOf(kCaller, name,
                             "T*E*%d (bytes of logits) overflows int64 (T = "
                             "%lld, E = %lld)",
                             int(logitsBytes), (long long)a.tokens,
                             (long long)a.experts);
  // Pointers after sizes, as for moeGroupedMatmul; bias only with bias=1.
  const PointerArg pointers[] = {
      {"logits", a.logits, logitsBytes, "",
       entry.logitsBits == 32 ? " (the entry's logits are f32)"
                              : " (the entry's logits are bf16)"},
      {"ids", a.ids, 4, "", ""},
      {"weights", a.weights, 4, "", ""},
      {"bias", a.bias, 4, " (the entry has bias=1: f32 [E])", ""}};
  if (moeStatus status =
          checkPointers(kCaller, name, pointers, entry.bias ? 4 : 3))
    return status;
  if (!entry.bias && a.bias)
    return invalidArgumentOf(kCaller, name,
                             "bias = 0x%llx, but the entry has bias=0 (its "
                             "kernel takes no bias): it must be 0",
                             (unsigned long long)a.bias);

  // One warp per token, threads/32 tokens per CTA (threads is a multiple of
  // 32: the reader checks it), grid-stride beyond 65535 CTAs.
  plan.entryIndex = entryIndex;
  plan.numLaunches = 1;
  WordLaunch &launch = plan.launches[0];
  launch = WordLaunch();
  launch.gridX = std::min(ceilDiv(a.tokens, entry.kernels[0].threads / 32),
                          kMaxSimpleGrid);
  // logits [T, E], bias [E] (bias=1 only), ids [T, k], weights [T, k].
  launch.memref2D(a.logits, a.tokens, a.experts);
  if (entry.bias)
    launch.memref1D(a.bias, a.experts);
  launch.memref2D(a.ids, a.tokens, entry.topK);
  launch.memref2D(a.weights, a.tokens, entry.topK);
  return MOE_STATUS_SUCCESS;
}

/// The checks of moeQuantize (contract §3.8), and its launch into `plan`.
moeStatus validateQuantize(const moeBundle *bundle, const char *entryName,
                           const moeQuantizeArgs *args, WordPlan &plan) {
  static constexpr const char *kCaller = "moeQuantize";
  int entryIndex = -1;
  if (moeStatus status =
          findEntry(bundle, kCaller, entryName, args, &entryIndex))
    return status;
  const Entry &entry = bundle->data.entries[entryIndex];
  const char *name = entry.name.c_str();
  // A block-FP8 expert MLP's intermediate is an op=moe.expert_mlp entry.
  if ((entry.op != MOE_OP_QUANTIZE && entry.op != MOE_OP_EXPERT_MLP) ||
      entry.kind != Abi::Quantize)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s(%s): the entry is op=%s abi=%s, not op=%s or %s with "
                    "abi=%s",
                    kCaller, name, entry.op.c_str(), entry.abi.c_str(),
                    MOE_OP_QUANTIZE, MOE_OP_EXPERT_MLP, MOE_ABI_QUANTIZE);
  const moeQuantizeArgs &a = *args;
  // Sizes first: batch, then R, then C.
  if (entry.rank == 2 && a.batch != 1)
    return invalidArgumentOf(kCaller, name,
                             "batch = %lld, but the entry's input is 2-D "
                             "[R, C]: batch must be 1",
                             (long long)a.batch);
  if (a.batch < 1)
    return invalidArgumentOf(kCaller, name, "batch = %lld must be at least 1",
                             (long long)a.batch);
  if (entry.batch != -1 && a.batch != entry.batch)
    return invalidArgumentOf(
        kCaller, name, "batch = %lld does not match the entry's batch = %lld",
        (long long)a.batch, (long long)entry.batch);
  // R and C: at least 1, at most max_rows (R), the entry's size unless
  // dynamic, whole blocks.
  auto checkExtent = [&](const char *symbol, const char *dim,
                         const char *blockUnit, int64_t value, int64_t most,
                         int64_t fixed, int32_t block) -> moeStatus {
    if (value < 1)
      return invalidArgumentOf(kCaller, name,
                               "%s = %lld (%s) must be at least 1", symbol,
                               (long long)value, dim);
    if (value > most)
      return invalidArgumentOf(kCaller, name,
                               "%s = %lld (%s) exceeds the entry's max_rows = "
                               "%lld",
                               symbol, (long long)value, dim, (long long)most);
    if (fixed != -1 && value != fixed)
      return invalidArgumentOf(
          kCaller, name, "%s = %lld (%s) does not match the entry's %s = %lld",
          symbol, (long long)value, dim, dim, (long long)fixed);
    if (value % block)
      return invalidArgumentOf(kCaller, name,
                               "%s = %lld (%s) is not a multiple of the "
                               "block's %d %s (block [%d, %d])",
                               symbol, (long long)value, dim, int(block),
                               blockUnit, int(entry.blockRows),
                               int(entry.blockCols));
    return MOE_STATUS_SUCCESS;
  };
  if (moeStatus status = checkExtent("R", "rows", "rows", a.rows, entry.maxRows,
                                     entry.rows, entry.blockRows))
    return status;
  if (moeStatus status = checkExtent("C", "cols", "columns", a.cols, INT64_MAX,
                                     entry.cols, entry.blockCols))
    return status;
  const int64_t inputBytes = entry.inputBits / 8;
  int64_t numRows = 0;
  if (__builtin_mul_overflow(a.batch, a.rows, &numRows) ||
      !productFits(numRows, a.cols, inputBytes))
    return invalidArgumentOf(kCaller, name,
                             "batch*R*C*%d (bytes of input) overflows int64 "
                             "(batch = %lld, R = %lld, C = %lld)",
                             int(inputBytes), (long long)a.batch,
                             (long long)a.rows, (long long)a.cols);
  // Then the pointers: 16-byte vectors of input and values.
  const PointerArg pointers[] = {
      {"input", a.input, 16, "", " (the kernel reads 16-byte vectors)"},
      {"values", a.values, 16, "", " (the kernel stores 8-byte vectors)"},
      {"scales", a.scales, entry.e8m0 ? 1 : 4, "",
       " (the entry's scales are f32)"}};
  if (moeStatus status = checkPointers(kCaller, name, pointers, 3))
    return status;

  // [1, B] blocks: 32 elements per thread per grid-stride step; [128, 128]:
  // a CTA per block. numRows * cols fits (its bytes do).
  plan.entryIndex = entryIndex;
  plan.numLaunches = 1;
  WordLaunch &launch = plan.launches[0];
  launch = WordLaunch();
  const int64_t elements = numRows * a.cols;
  const int64_t work =
      entry.blockRows == 1
          ? ceilDiv(elements, kQuantizeElementsPerThread *
                                  int64_t(entry.kernels[0].threads))
          : elements / (int64_t(entry.blockRows) * entry.blockCols);
  launch.gridX = std::min(work, kMaxQuantizeGrid);
  // input [batch*R, C], values [batch*R, C], scales [batch*R/br, C/bc].
  launch.memref2D(a.input, numRows, a.cols);
  launch.memref2D(a.values, numRows, a.cols);
  launch.memref2D(a.scales, numRows / entry.blockRows,
                  a.cols / entry.blockCols);
  return MOE_STATUS_SUCCESS;
}

/// The checks of moeUnpermute (contract §3.3), and its launch into `plan`.
moeStatus validateUnpermute(const moeBundle *bundle, const char *entryName,
                            const moeUnpermuteArgs *args, WordPlan &plan) {
  static constexpr const char *kCaller = "moeUnpermute";
  int entryIndex = -1;
  if (moeStatus status = findTokenEntry(bundle, kCaller, entryName, args,
                                        MOE_OP_UNPERMUTE, {Abi::Unpermute},
                                        args ? args->tokens : 0, &entryIndex))
    return status;
  const Entry &entry = bundle->data.entries[entryIndex];
  const char *name = entry.name.c_str();
  const moeUnpermuteArgs &a = *args;
  if (a.rows_count < 1)
    return invalidArgumentOf(kCaller, name,
                             "M = %lld (rows_count) must be at least 1",
                             (long long)a.rows_count);
  if (entry.hidden != -1 && a.hidden != entry.hidden)
    return invalidArgumentOf(kCaller, name,
                             "H = %lld does not match the entry's hidden = "
                             "%lld",
                             (long long)a.hidden, (long long)entry.hidden);
  if (a.hidden < 8)
    return invalidArgumentOf(kCaller, name,
                             "H = %lld is less than 8 (rows are read in "
                             "16-byte vectors)",
                             (long long)a.hidden);
  if (a.hidden % 8)
    return invalidArgumentOf(kCaller, name,
                             "H = %lld is not a multiple of 8 (rows are read "
                             "in 16-byte vectors)",
                             (long long)a.hidden);
  const int64_t slotBytes = entry.slotsBits / 8;
  if (!productFits(a.rows_count, a.hidden, 2))
    return invalidArgumentOf(kCaller, name,
                             "M*H*2 (bytes of rows) overflows int64 (M = "
                             "%lld, H = %lld)",
                             (long long)a.rows_count, (long long)a.hidden);
  if (!productFits(a.tokens, a.hidden, 2))
    return invalidArgumentOf(kCaller, name,
                             "T*H*2 (bytes of out) overflows int64 (T = %lld, "
                             "H = %lld)",
                             (long long)a.tokens, (long long)a.hidden);
  if (!productFits(a.tokens, entry.topK, slotBytes))
    return invalidArgumentOf(kCaller, name,
                             "T*k*%d (bytes of slots) overflows int64 (T = "
                             "%lld, k = %d)",
                             int(slotBytes), (long long)a.tokens,
                             int(entry.topK));
  // Pointers after sizes; weights only with weighted=1.
  const PointerArg pointers[] = {
      {"rows", a.rows, 16, "", ""},
      {"slots", a.slots, slotBytes, "",
       entry.slotsBits == 32 ? " (the entry's slots are i32)"
                             : " (the entry's slots are i64)"},
      {"out", a.out, 16, "", ""},
      {"weights", a.weights, 4, " (the entry has weighted=1: f32 [T, k])", ""}};
  if (moeStatus status =
          checkPointers(kCaller, name, pointers, entry.weighted ? 4 : 3))
    return status;
  if (!entry.weighted && a.weights)
    return invalidArgumentOf(kCaller, name,
                             "weights = 0x%llx, but the entry has weighted=0 "
                             "(its kernel takes no weights): it must be 0",
                             (unsigned long long)a.weights);

  // One CTA per (token, column block) pair, a block being 8 columns (one
  // 16-byte vector) per thread; grid-stride beyond 2^20 CTAs. T*blocks fits:
  // T*H*2 does.
  plan.entryIndex = entryIndex;
  plan.numLaunches = 1;
  WordLaunch &launch = plan.launches[0];
  launch = WordLaunch();
  const int64_t blocks =
      ceilDiv(a.hidden, 8 * int64_t(entry.kernels[0].threads));
  launch.gridX = std::min(a.tokens * blocks, kMaxUnpermuteGrid);
  // rows [M, H], slots [T, k], weights [T, k] (weighted=1 only), out [T, H].
  launch.memref2D(a.rows, a.rows_count, a.hidden);
  launch.memref2D(a.slots, a.tokens, entry.topK);
  if (entry.weighted)
    launch.memref2D(a.weights, a.tokens, entry.topK);
  launch.memref2D(a.out, a.tokens, a.hidden);
  return MOE_STATUS_SUCCESS;
}

/// The entry checks of moePermute and moePermuteWorkspaceBytes: a
/// permute.v2 entry, 1 <= T <= max_rows and T*k <= 2^31 - 1 (the rows are
/// indexed in 32 bits).
moeStatus findPermuteEntry(const moeBundle *bundle, const char *caller,
                           const char *entryName, const void *args,
                           int64_t tokens, int *index) {
  if (moeStatus status =
          findTokenEntry(bundle, caller, entryName, args, MOE_OP_PERMUTE,
                         {Abi::Permute}, tokens, index))
    return status;
  const Entry &entry = bundle->data.entries[*index];
  // T < 2^31 and k < 2^31: the product fits in int64.
  if (tokens * entry.topK > kMaxRows)
    return invalidArgumentOf(caller, entry.name.c_str(),
                             "T*k = %lld rows exceeds 2147483647 (T = %lld, "
                             "k = %d)",
                             (long long)(tokens * entry.topK),
                             (long long)tokens, int(entry.topK));
  return MOE_STATUS_SUCCESS;
}

/// The workspace of a permute.v2 entry for N = T*k ids (contract §3.4): the
/// sources, i32 [N], at 0, then the counts, i32 [chunks * E], at `counts`.
struct PermuteWorkspace {
  int64_t chunks; // ceil(N / chunk): CTAs of the count and index kernels
  int64_t counts; // align_up(N*4, 256)
  int64_t bytes;  // counts + chunks*E*4
};

/// N < 2^31, chunk >= 32 and E <= 1024: nothing overflows.
PermuteWorkspace permuteWorkspace(const Entry &entry, int64_t rowsCount) {
  PermuteWorkspace w;
  w.chunks = ceilDiv(rowsCount, entry.chunk);
  w.counts = ceilDiv(rowsCount * 4, 256) * 256;
  w.bytes = w.counts + w.chunks * entry.experts * 4;
  return w;
}

/// The checks of moePermute (contract §3.4), and its three launches into
/// `plan`.
moeStatus validatePermute(const moeBundle *bundle, const char *entryName,
                          const moePermuteArgs *args, WordPlan &plan) {
  static constexpr const char *kCaller = "moePermute";
  int entryIndex = -1;
  if (moeStatus status =
          findPermuteEntry(bundle, kCaller, entryName, args,
                           args ? args->tokens_count : 0, &entryIndex))
    return status;
  const Entry &entry = bundle->data.entries[entryIndex];
  const char *name = entry.name.c_str();
  const moePermuteArgs &a = *args;
  if (entry.hidden != -1 && a.hidden != entry.hidden)
    return invalidArgumentOf(kCaller, name,
                             "H = %lld does not match the entry's hidden = "
                             "%lld",
                             (long long)a.hidden, (long long)entry.hidden);
  if (a.hidden < 8)
    return invalidArgumentOf(kCaller, name,
                             "H = %lld is less than 8 (rows are copied in "
                             "16-byte vectors)",
                             (long long)a.hidden);
  if (a.hidden % 8)
    return invalidArgumentOf(kCaller, name,
                             "H = %lld is not a multiple of 8 (rows are "
                             "copied in 16-byte vectors)",
                             (long long)a.hidden);
  // out=f8E4M3FN: the gather quantizes whole [1, 128] groups of a row.
  const bool fp8Out = entry.fp8Out;
  if (fp8Out && a.hidden % kFp8BlockSize)
    return invalidArgumentOf(kCaller, name,
                             "H = %lld is not a multiple of 128 (the entry "
                             "has out=" MOE_OUT_E4M3 ": the gather quantizes "
                             "whole [1, 128] groups of a row)",
                             (long long)a.hidden);
  // N = T*k < 2^31 (findPermuteEntry): ids, slots, offsets and the
  // workspace fit; tokens and rows may not, for a huge H (the rows' scales,
  // N*(H/128)*4 bytes, are smaller than the rows).
  const int64_t rowsCount = a.tokens_count * entry.topK;
  const int64_t rowBytes = fp8Out ? 1 : 2;
  if (!productFits(a.tokens_count, a.hidden, 2))
    return invalidArgumentOf(kCaller, name,
                             "T*H*2 (bytes of tokens) overflows int64 (T = "
                             "%lld, H = %lld)",
                             (long long)a.tokens_count, (long long)a.hidden);
  if (!productFits(rowsCount, a.hidden, rowBytes))
    return invalidArgumentOf(kCaller, name,
                             "T*k*H%s (bytes of rows) overflows int64 (T*k = "
                             "%lld, H = %lld)",
                             fp8Out ? "" : "*2", (long long)rowsCount,
                             (long long)a.hidden);
  // Pointers after sizes, in the order of moePermuteArgs; rows_scale only
  // with out=f8E4M3FN.
  const int64_t indexBytes = entry.offsetsBits / 8;
  const char *indexType = entry.offsetsBits == 32
                              ? " (the entry's offsets and slots are i32)"
                              : " (the entry's offsets and slots are i64)";
  const char *const kRowsScaleWhy =
      " (out=" MOE_OUT_E4M3 " entries write the f32 scales [T*k, H/128] of "
      "rows)";
  const PointerArg pointers[] = {
      {"tokens", a.tokens, 16, "", ""},
      {"ids", a.ids, 4, "", ""},
      {"rows", a.rows, 16, "", ""},
      {"offsets", a.offsets, indexBytes, "", indexType},
      {"slots", a.slots, indexBytes, "", indexType},
      {"workspace", a.workspace, 256,
       " (moePermuteWorkspaceBytes says how large)", ""},
      {"rows_scale", a.rows_scale, 4, kRowsScaleWhy, kRowsScaleWhy}};
  if (moeStatus status = checkPointers(kCaller, name, pointers, fp8Out ? 7 : 6))
    return status;
  if (!fp8Out && a.rows_scale)
    return invalidArgumentOf(kCaller, name,
                             "rows_scale = 0x%llx, but rows_scale is only "
                             "taken by out=" MOE_OUT_E4M3 " entries (this "
                             "one's rows are bf16): it must be 0",
                             (unsigned long long)a.rows_scale);

  // One CTA per chunk of ids counts them by expert (not launched for a
  // single chunk when the entry has index_counts=1: its index kernel counts
  // it), then one CTA per chunk ranks them (CTA 0 also writes the offsets);
  // then one CTA per 4 rows and column block (threads * 8 columns),
  // grid-stride beyond 65535 CTAs. chunks < 2^31 as N is; groups * blocks
  // <= N * H fits int64 as the rows' bytes do.
  const PermuteWorkspace w = permuteWorkspace(entry, rowsCount);
  const uint64_t sources = a.workspace, counts = a.workspace + w.counts;
  const int64_t countsSize = w.chunks * entry.experts;
  plan.entryIndex = entryIndex;
  plan.numLaunches = 3;
  WordLaunch &count = plan.launches[0], &index = plan.launches[1],
             &gather = plan.launches[2];
  count = WordLaunch();
  index = WordLaunch();
  gather = WordLaunch();
  count.gridX = w.chunks;
  index.kernel = 1;
  index.gridX = w.chunks;
  // From T = scatter_from on, the scatter kernel (the fourth) runs instead:
  // its pairs are a group of 4 tokens (not rows) and a column block.
  const bool scatter = entry.scatterFrom && a.tokens_count >= entry.scatterFrom;
  gather.kernel = scatter ? 3 : 2;
  const int64_t columnBlocks =
      ceilDiv(a.hidden, 8 * int64_t(entry.kernels[gather.kernel].threads));
  const int64_t gathered = scatter ? a.tokens_count : rowsCount;
  gather.gridX = std::min(ceilDiv(gathered, kGatherRowsPerCTA) * columnBlocks,
                          kMaxSimpleGrid);
  // count kernel: ids [T, k], counts [chunks * E];
  // index kernel: ids [T, k], counts [chunks * E], offsets [E + 1],
  // slots [T, k], sources [N];
  // gather kernel: tokens [T, H], sources [N] (scatter: slots [T, k]),
  // offsets [E + 1], rows [N, H] (e4m3 codes with out=f8E4M3FN: the
  // memref's sizes count elements), then with out=f8E4M3FN rows_scale
  // [N, H/128].
  count.memref2D(a.ids, a.tokens_count, entry.topK);
  count.memref1D(counts, countsSize);
  index.memref2D(a.ids, a.tokens_count, entry.topK);
  index.memref1D(counts, countsSize);
  index.memref1D(a.offsets, entry.experts + 1);
  index.memref2D(a.slots, a.tokens_count, entry.topK);
  index.memref1D(sources, rowsCount);
  gather.memref2D(a.tokens, a.tokens_count, a.hidden);
  if (scatter)
    gather.memref2D(a.slots, a.tokens_count, entry.topK);
  else
    gather.memref1D(sources, rowsCount);
  gather.memref1D(a.offsets, entry.experts + 1);
  gather.memref2D(a.rows, rowsCount, a.hidden);
  if (fp8Out)
    gather.memref2D(a.rows_scale, rowsCount, a.hidden / kFp8BlockSize);
  if (entry.indexCounts && w.chunks == 1) {
    plan.launches[0] = plan.launches[1];
    plan.launches[1] = plan.launches[2];
    plan.numLaunches = 2;
  }
  return MOE_STATUS_SUCCESS;
}

/// One kernel launch of a grouped matmul.
struct Launch {
  const Kernel *kernel;
  int index;
  // Work items: row tiles of eligible experts x column tiles, or x pairs
  // of adjacent column tiles for a cluster kernel (one per cluster of 2
  // CTAs).
  int64_t work;
  int64_t gridX; // cluster * min(work, resident): whole clusters
};

/// A validated grouped matmul: its arguments and the kernels it launches;
/// prepareGroupedMatmul adds their grids and tensor maps.
struct GemmPlan {
  int entryIndex = -1;
  moeGroupedMatmulArgs args;
  int64_t expertBytes = 0; // N*K*2 (FP8: N*K): the weights' expert stride
  Launch launches[kMaxKernelsPerEntry];
  int numLaunches = 0;
  cu::TensorMap maps[kMaxKernelsPerEntry][2];
};

/// The checks of moeGroupedMatmul (contract §3.1, §3.7), and the kernels it
/// launches for M (those that can have an eligible expert, given that no
/// expert has more than `maxExpertRows` rows), into `plan`.
moeStatus validateGroupedMatmul(const moeBundle *bundle, const char *entryName,
                                const moeGroupedMatmulArgs *args,
                                GemmPlan &plan,
                                int64_t maxExpertRows = INT64_MAX) {
  int entryIndex = -1;
  if (moeStatus status =
          findEntry(bundle, "moeGroupedMatmul", entryName, args, &entryIndex))
    return status;
  const Entry &entry = bundle->data.entries[entryIndex];
  const char *name = entry.name.c_str();
  const bool fp8 = entry.kind == Abi::GroupedMatmulFp8;
  if ((entry.op != MOE_OP_GROUPED_MATMUL && entry.op != MOE_OP_EXPERT_MLP) ||
      !isGroupedMatmul(entry.kind))
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "moeGroupedMatmul(%s): the entry is op=%s abi=%s, not "
                    "op=" MOE_OP_GROUPED_MATMUL " or " MOE_OP_EXPERT_MLP
                    " with abi=" MOE_ABI_GROUPED_MATMUL
                    " or " MOE_ABI_GROUPED_MATMUL_FP8,
                    name, entry.op.c_str(), entry.abi.c_str());
  const bool swiglu = entry.epilogue == Epilogue::SwiGLU;
  const bool rowScale = entry.epilogue == Epilogue::RowScale;
  // out=f8E4M3FN (a swiglu entry): e4m3 codes and f32 scales per [1, 128].
  const bool fp8Out = entry.fp8Out;
  // format=mxfp8: a UE8M0 scale byte per 32 elements along K.
  const bool mx = entry.format == Fp8Format::Mx;
  // Bytes of an element of rows and weights, and so the K quantum of a
  // 16-byte TMA row pitch: 8 bf16 or 16 float8; MXFP8: whole scale blocks.
  const int64_t elementBytes = gemmElementBytes(entry.kind),
                kQuantum =
                    mx ? kMxBlockSize : kTmaRowQuantumBytes / elementBytes;
  const char *const kPitchWhy =
      mx    ? "format=" MOE_FORMAT_MXFP8 " takes a scale per 32 elements of "
              "a row"
      : fp8 ? "TMA row pitch of 1-byte float8 elements must be a multiple of "
              "16 bytes"
            : "TMA row pitch must be a multiple of 16 bytes";
  // The sm_100a MXFP8 kernel (tcgen05, contract §3.9) reads K in stages of
  // 128.
  const bool tcgen05 = mx && bundle->data.chip == "sm_100a";

  const moeGroupedMatmulArgs &a = *args;
  if (a.m < 1)
    return invalidArgument(name, "M = %lld must be at least 1", (long long)a.m);
  if (a.m > entry.maxRows)
    return invalidArgument(name, "M = %lld exceeds the entry's max_rows = %lld",
                           (long long)a.m, (long long)entry.maxRows);
  if (entry.n != -1 && a.n != entry.n)
    return invalidArgument(name, "N = %lld does not match the entry's n = %lld",
                           (long long)a.n, (long long)entry.n);
  if (a.n < 1)
    return invalidArgument(name, "N = %lld must be at least 1", (long long)a.n);
  if (a.n > kMaxRows)
    return invalidArgument(name, "N = %lld exceeds 2147483647", (long long)a.n);
  if (swiglu && a.n % 2)
    return invalidArgument(name,
                           "N = %lld is odd: a swiglu entry's weights hold N/2 "
                           "gate rows then N/2 up rows (N must be even and at "
                           "least 2; out has N/2 columns)",
                           (long long)a.n);
  if (fp8Out && (a.n / 2) % kFp8BlockSize)
    return invalidArgument(name,
                           "N = %lld: the entry has out=" MOE_OUT_E4M3
                           " and writes whole [1, 128] groups of the N/2 "
                           "output columns, so N must be a multiple of 256",
                           (long long)a.n);
  if (entry.k != -1 && a.k != entry.k)
    return invalidArgument(name, "K = %lld does not match the entry's k = %lld",
                           (long long)a.k, (long long)entry.k);
  if (a.k < kQuantum)
    return invalidArgument(name, "K = %lld is less than %lld (%s)",
                           (long long)a.k, (long long)kQuantum, kPitchWhy);
  if (a.k % kQuantum)
    return invalidArgument(name, "K = %lld is not a multiple of %lld (%s)",
                           (long long)a.k, (long long)kQuantum, kPitchWhy);
  if (tcgen05 && a.k % kTcgen05MxKQuantum)
    return invalidArgument(name,
                           "K = %lld is not a multiple of 128 (the bundle is "
                           "for sm_100a, whose " MOE_FORMAT_MXFP8
                           " kernel reads K in stages of 128)",
                           (long long)a.k);
  if (a.k > kMaxRows)
    return invalidArgument(
        name, "K = %lld exceeds 2147483647 (the kernel takes K as i32)",
        (long long)a.k);
  if (entry.experts != -1 && a.experts != entry.experts)
    return invalidArgument(name,
                           "E = %lld does not match the entry's experts = %lld",
                           (long long)a.experts, (long long)entry.experts);
  if (a.experts < 1)
    return invalidArgument(name, "E = %lld must be at least 1",
                           (long long)a.experts);
  if (a.experts > kMaxRows)
    return invalidArgument(name, "E = %lld exceeds 2147483647",
                           (long long)a.experts);
  // Pointers after sizes: an empty tensor (M = 0) often has a null one.
  // The block scales, row_scale and bias only where the entry takes them,
  // in the order of the kernel parameters.
  const char *kScaleWhy =
      " (row_scale entries take the f32 routing weight of each row)";
  const char *kRowsScaleWhy =
      mx ? " (format=" MOE_FORMAT_MXFP8 " entries take the UE8M0 scales "
           "[M, K/32] of the rows)"
         : " (grouped_matmul_fp8.v1 entries take the f32 scales "
           "[M, ceil(K/128)] of the rows)";
  const char *kWeightsScaleWhy =
      mx ? " (format=" MOE_FORMAT_MXFP8 " entries take the UE8M0 scales "
           "[E, N, K/32] of the weights)"
         : " (grouped_matmul_fp8.v1 entries take the f32 scales "
           "[E, ceil(N/128), ceil(K/128)] of the weights)";
  const char *kOutScaleWhy =
      " (out=" MOE_OUT_E4M3 " entries write the f32 scales [M, N/256] of "
      "out)";
  const int64_t biasBytes = entry.biasBits / 8;
  PointerArg pointers[9] = {{"rows", a.rows, 16, "", ""},
                            {"weights", a.weights, 16, "", ""},
                            {"offsets", a.offsets, entry.offsetsBits / 8, "",
                             entry.offsetsBits == 32
                                 ? " (the entry's offsets are i32)"
                                 : " (the entry's offsets are i64)"},
                            {"out", a.out, 16, "", ""}};
  size_t numPointers = 4;
  // f32 scales, or MXFP8's bytes (any alignment: the kernels read a row's
  // codes of a K step as one word only where every row is word-aligned).
  const int64_t scaleBytes = mx ? 1 : 4;
  if (fp8) {
    pointers[numPointers++] = {"rows_scale", a.rows_scale, scaleBytes,
                               kRowsScaleWhy, kRowsScaleWhy};
    pointers[numPointers++] = {"weights_scale", a.weights_scale, scaleBytes,
                               kWeightsScaleWhy, kWeightsScaleWhy};
  }
  if (fp8Out)
    pointers[numPointers++] = {"out_scale", a.out_scale, 4, kOutScaleWhy,
                               kOutScaleWhy};
  if (rowScale)
    pointers[numPointers++] = {"row_scale", a.row_scale, 4, kScaleWhy,
                               kScaleWhy};
  if (biasBytes)
    pointers[numPointers++] = {
        "bias", a.bias, biasBytes,
        entry.biasBits == 32 ? " (the entry has bias=f32: [E, N])"
                             : " (the entry has bias=bf16: [E, N])",
        entry.biasBits == 32 ? " (the entry's bias is f32)"
                             : " (the entry's bias is bf16)"};
  if (moeStatus status =
          checkPointers("moeGroupedMatmul", name, pointers, numPointers))
    return status;
  if (!rowScale && a.row_scale)
    return invalidArgument(name,
                           "row_scale = 0x%llx, but row_scale is only taken "
                           "by row_scale entries (this one's epilogue is %s): "
                           "it must be 0",
                           (unsigned long long)a.row_scale,
                           epilogueName(entry.epilogue));
  if (!biasBytes && a.bias)
    return invalidArgument(name,
                           "bias = 0x%llx, but the entry has bias=none (its "
                           "kernels take no bias): it must be 0",
                           (unsigned long long)a.bias);
  if (!fp8 && (a.rows_scale || a.weights_scale))
    return invalidArgument(
        name,
        "%s = 0x%llx, but the entry has abi " MOE_ABI_GROUPED_MATMUL
        " (bf16 rows and weights, no block scales): it must be 0",
        a.rows_scale ? "rows_scale" : "weights_scale",
        (unsigned long long)(a.rows_scale ? a.rows_scale : a.weights_scale));
  if (!fp8Out && a.out_scale)
    return invalidArgument(name,
                           "out_scale = 0x%llx, but out_scale is only taken "
                           "by out=" MOE_OUT_E4M3 " entries (this one's out "
                           "is bf16): it must be 0",
                           (unsigned long long)a.out_scale);
  // Byte sizes: M*K*2 and M*N*2 fit in int64 since every size is below
  // 2^31; E*N*K*2 and E*N of the bias may not. One expert's weights are a
  // TMA stride, which must stay below 2^40. The FP8 scales are smaller than
  // the weights: M*ceil(K/128)*4 < 2^58 and, as K >= 16 makes ceil(K/128) <=
  // K/16, E*ceil(N/128)*ceil(K/128)*4 <= E*N*K/4; MXFP8's M*K/32 < 2^57 and
  // E*N*K/32.
  if (biasBytes && !productFits(a.experts, a.n, biasBytes))
    return invalidArgument(name,
                           "E*N*%d (bytes of bias) overflows int64 (E = %lld, "
                           "N = %lld)",
                           int(biasBytes), (long long)a.experts,
                           (long long)a.n);
  int64_t expertBytes = 0, allBytes = 0;
  const char *const kTimesBytes = fp8 ? "" : "*2";
  if (__builtin_mul_overflow(elementBytes * a.k, a.n, &expertBytes) ||
      __builtin_mul_overflow(expertBytes, a.experts, &allBytes))
    return invalidArgument(name,
                           "E*N*K%s (bytes of %sweights) overflows int64 (E = "
                           "%lld, N = %lld, K = %lld)",
                           kTimesBytes, fp8 ? "float8 " : "",
                           (long long)a.experts, (long long)a.n,
                           (long long)a.k);
  if (expertBytes >= (int64_t(1) << 40))
    return invalidArgument(name,
                           "N*K%s = %lld bytes per expert reaches the TMA "
                           "stride limit of 2^40",
                           kTimesBytes, (long long)expertBytes);

  // Work items (contract §3.1), all in 64 bits: slots bounds the row tiles of
  // eligible experts, each paired with every column tile; with out=f8E4M3FN
  // with every [1, 128] group of the N/2 output columns, whose column tiles
  // a work item runs back to back (§3.7). A cluster kernel's work item is a
  // row tile and `cluster` adjacent column items, one per CTA of the
  // cluster (an odd count rounds up: the last CTA finds no columns).
  plan.entryIndex = entryIndex;
  plan.args = a;
  plan.expertBytes = expertBytes;
  plan.numLaunches = 0;
  for (size_t i = 0; i < entry.kernels.size(); ++i) {
    const Kernel &kernel = entry.kernels[i];
    int64_t eligible = std::min(a.experts, a.m / kernel.rowsMin);
    if (eligible == 0 || kernel.rowsMin > maxExpertRows)
      continue; // no expert can have rows_min rows: nothing to compute
    int64_t slots = ceilDiv(a.m, kernel.tileM) + eligible;
    int64_t perExpert = ceilDiv(kernel.rowsMax, kernel.tileM), all = 0;
    if (!__builtin_mul_overflow(a.experts, perExpert, &all))
      slots = std::min(slots, all);
    // slots < 2^32 and column tiles < 2^31, so this cannot overflow; the
    // grid is capped by residency anyway.
    const int64_t columnItems = ceilDiv(fp8Out ? ceilDiv(a.n / 2, kFp8BlockSize)
                                               : ceilDiv(a.n, kernel.tileN),
                                        kernel.cluster);
    int64_t work = 0;
    if (__builtin_mul_overflow(slots, columnItems, &work))
      work = INT64_MAX;
    if (work == 0)
      continue;
    plan.launches[plan.numLaunches++] = {&kernel, int(i), work, 0};
  }
  return MOE_STATUS_SUCCESS;
}

/// The grids (from the residency cached at load) and the tensor maps of a
/// validated grouped matmul, before any of its launches, so that a bad
/// descriptor launches nothing.
moeStatus prepareGroupedMatmul(moeBundle *bundle, ContextState *state,
                               GemmPlan &plan) {
  const Entry &entry = bundle->data.entries[plan.entryIndex];
  const moeGroupedMatmulArgs &a = plan.args;
  const bool swiglu = entry.epilogue == Epilogue::SwiGLU;
  // bf16, or block-FP8's float8_e4m3fn as 1-byte integers.
  const int64_t elementBytes = gemmElementBytes(entry.kind);
  const cu::TensorMapDataType dataType = entry.kind == Abi::GroupedMatmulFp8
                                             ? cu::kTensorMapDataTypeUInt8
                                             : cu::kTensorMapDataTypeBFloat16;
  // One wave of resident CTAs at most: the kernels loop over the work. A
  // cluster kernel's work items and residency count clusters, its grid
  // CTAs: CTAs 2c and 2c + 1 form cluster c.
  for (int i = 0; i < plan.numLaunches; ++i) {
    Launch &launch = plan.launches[i];
    launch.gridX =
        launch.kernel->cluster *
        std::min(launch.work,
                 state->kernels[plan.entryIndex][launch.index].resident);
    if (launch.gridX > INT32_MAX) // a device this large does not exist
      return setError(MOE_STATUS_UNSUPPORTED,
                      "moeGroupedMatmul(%s): grid.x = %lld of kernel '%s' "
                      "exceeds 2^31-1",
                      entry.name.c_str(), (long long)launch.gridX,
                      launch.kernel->symbol.c_str());
  }
  for (int i = 0; i < plan.numLaunches; ++i) {
    const Kernel &kernel = *plan.launches[i].kernel;
    const uint64_t rowsDims[2] = {uint64_t(a.k), uint64_t(a.m)};
    const uint64_t rowsStrides[1] = {uint64_t(elementBytes * a.k)};
    const uint32_t rowsBox[2] = {uint32_t(kernel.tileK),
                                 uint32_t(kernel.tileM)};
    const uint64_t weightsDims[3] = {uint64_t(a.k), uint64_t(a.n),
                                     uint64_t(a.experts)};
    const uint64_t weightsStrides[2] = {uint64_t(elementBytes * a.k),
                                        uint64_t(plan.expertBytes)};
    // A swiglu kernel loads tile_n/2 gate rows and as many up rows (tile_n
    // is even: the reader checks it).
    const uint32_t weightsBox[3] = {
        uint32_t(kernel.tileK),
        uint32_t(swiglu ? kernel.tileN / 2 : kernel.tileN), 1};
    const uint32_t unit[3] = {1, 1, 1};
    struct {
      const char *what;
      uint64_t pointer;
      uint32_t rank;
      const uint64_t *dims, *strides;
      const uint32_t *box;
    } tensors[2] = {
        {"rows", a.rows, 2, rowsDims, rowsStrides, rowsBox},
        {"weights", a.weights, 3, weightsDims, weightsStrides, weightsBox}};
    for (int t = 0; t < 2; ++t)
      if (cu::Result result = state->driver->tensorMapEncodeTiled(
              &plan.maps[i][t], dataType, tensors[t].rank,
              reinterpret_cast<void *>(tensors[t].pointer), tensors[t].dims,
              tensors[t].strides, tensors[t].box, unit,
              cu::kTensorMapInterleaveNone, cu::kTensorMapSwizzle128B,
              cu::kTensorMapL2Promotion128B, cu::kTensorMapFloatOOBFillNone))
        return driverError(state->driver, "moeGroupedMatmul",
                           "cuTensorMapEncodeTiled(" +
                               std::string(tensors[t].what) + " of kernel '" +
                               kernel.symbol + "' of entry '" + entry.name +
                               "')",
                           result);
  }
  return MOE_STATUS_SUCCESS;
}

/// Launches a prepared grouped matmul (with PDL when `pdl`); *issued counts
/// the launches of the whole call (`total`), for the error messages.
moeStatus launchGroupedMatmul(moeBundle *bundle, ContextState *state,
                              const char *caller, GemmPlan &plan, void *stream,
                              bool pdl, int *issued, int total) {
  const Entry &entry = bundle->data.entries[plan.entryIndex];
  const moeGroupedMatmulArgs &a = plan.args;
  // The 17 parameters of grouped_matmul.v3, then (grouped_matmul_fp8.v1
  // only) the 7 of the rows_scale memref [M, KB] and the 9 of the
  // weights_scale memref [E, NB, KB] (format mxfp8: [M, K/32] and
  // [E, N, K/32], the same descriptors with KB = K/32 and NB = N), then
  // (out=f8E4M3FN only) the 7 of the
  // out_scale memref [M, C/128], then the 5 of the row_scale memref
  // (row_scale entries only), then the 7 of the bias memref (bias entries
  // only). out has C = N/2 columns after a swiglu (1-byte codes with
  // out=f8E4M3FN: the memref's sizes count elements).
  const bool fp8 = entry.kind == Abi::GroupedMatmulFp8;
  uint64_t offsets = a.offsets, out = a.out, scale = a.row_scale, bias = a.bias,
           rowsScale = a.rows_scale, weightsScale = a.weights_scale,
           outScale = a.out_scale;
  int64_t zero = 0, one = 1, offsetsSize = a.experts + 1, m = a.m, n = a.n,
          experts = a.experts,
          outColumns = entry.epilogue == Epilogue::SwiGLU ? a.n / 2 : a.n;
  // Scale blocks along K and along the weights' N (contract §3.7: [1, 32]
  // blocks of a row for MXFP8, whose K is whole blocks), and the [1, 128]
  // groups of an FP8 output's columns.
  const bool mx = entry.format == Fp8Format::Mx;
  int64_t kBlocks = mx ? a.k / kMxBlockSize : ceilDiv(a.k, kFp8BlockSize),
          nBlocks = mx ? a.n : ceilDiv(a.n, kFp8BlockSize),
          expertBlocks = nBlocks * kBlocks,
          outGroups = outColumns / kFp8BlockSize;
  int32_t k32 = int32_t(a.k);
  for (int i = 0; i < plan.numLaunches; ++i) {
    const Kernel &kernel = *plan.launches[i].kernel;
    int32_t rowsMin = int32_t(kernel.rowsMin),
            rowsMax = int32_t(kernel.rowsMax);
    // At most 17 + 16 + 7 + 5 + 7 (row_scale never comes with out_scale).
    void *params[52] = {&plan.maps[i][0],
                        &plan.maps[i][1],
                        &offsets,
                        &offsets,
                        &zero,
                        &offsetsSize,
                        &one,
                        &out,
                        &out,
                        &zero,
                        &m,
                        &outColumns,
                        &outColumns,
                        &one,
                        &k32,
                        &rowsMin,
                        &rowsMax};
    int count = 17;
    if (fp8)
      for (void *param :
           {(void *)&rowsScale, (void *)&rowsScale, (void *)&zero, (void *)&m,
            (void *)&kBlocks, (void *)&kBlocks, (void *)&one,
            (void *)&weightsScale, (void *)&weightsScale, (void *)&zero,
            (void *)&experts, (void *)&nBlocks, (void *)&kBlocks,
            (void *)&expertBlocks, (void *)&kBlocks, (void *)&one})
        params[count++] = param;
    if (entry.fp8Out)
      for (void *param :
           {(void *)&outScale, (void *)&outScale, (void *)&zero, (void *)&m,
            (void *)&outGroups, (void *)&outGroups, (void *)&one})
        params[count++] = param;
    if (entry.epilogue == Epilogue::RowScale)
      for (void *param : {(void *)&scale, (void *)&scale, (void *)&zero,
                          (void *)&m, (void *)&one})
        params[count++] = param;
    if (entry.biasBits)
      for (void *param :
           {(void *)&bias, (void *)&bias, (void *)&zero, (void *)&experts,
            (void *)&n, (void *)&n, (void *)&one})
        params[count++] = param;
    if (moeStatus status = launchKernelOf(
            bundle, state, caller, plan.entryIndex, plan.launches[i].index,
            plan.launches[i].gridX, params, stream, pdl, *issued, total))
      return status;
    ++*issued;
  }
  return MOE_STATUS_SUCCESS;
}

/// Where moeLayer's buffers start in its workspace (contract §3.5, §3.10),
/// and the bytes it needs.
struct LayerWorkspace {
  uint64_t ids, weights, offsets, slots, permute, rows, inter;
  // layer_fp8.v1 only (0 for layer.v1): the e4m3 values and f32 scales of
  // rows and inter, the GEMMs' inputs.
  uint64_t rowsValues = 0, rowsScales = 0, interValues = 0, interScales = 0;
  uint64_t bytes;
};

/// The checks moeLayer and moeLayerWorkspaceBytes share (a layer.v1 or
/// layer_fp8.v1 entry, 1 <= T <= max_rows, T*k <= 2^31 - 1, H and I positive
/// multiples of 8, of 128 for layer_fp8.v1 (of 32 with mxfp8 GEMMs), equal
/// to the parts' static sizes), and the workspace for these sizes.
moeStatus layerWorkspace(const moeBundle *bundle, const char *caller,
                         const char *entryName, const void *args,
                         int64_t tokens, int64_t hidden, int64_t intermediate,
                         int *index, LayerWorkspace &out) {
  if (moeStatus status =
          findTokenEntry(bundle, caller, entryName, args, MOE_OP_LAYER,
                         {Abi::Layer, Abi::LayerFp8}, tokens, index))
    return status;
  const auto &entries = bundle->data.entries;
  const Entry &layer = entries[*index];
  const char *name = layer.name.c_str();
  const bool fp8 = layer.kind == Abi::LayerFp8;
  const Entry &route = entries[layer.parts[kRoutePart]];
  const Entry &permute = entries[layer.parts[kPermutePart]];
  const Entry &gateUp = entries[layer.parts[kGateUpPart]];
  // The GEMMs' format (the reader checks that both have it): MXFP8 scales
  // per [1, 32] group of a row.
  const bool mx = gateUp.format == Fp8Format::Mx;
  // T < 2^31 and k <= 32: the product fits.
  const int64_t rowsCount = tokens * route.topK;
  if (rowsCount > kMaxRows)
    return invalidArgumentOf(caller, name,
                             "T*k = %lld rows exceeds 2147483647 (T = %lld, "
                             "k = %d)",
                             (long long)rowsCount, (long long)tokens,
                             int(route.topK));
  // The parts' static sizes (the reader checks that they agree); a layer.v1
  // entry has no quantize parts.
  struct StaticSize {
    int part;
    const char *key;
    int64_t Entry::*size;
  };
  auto checkStatic = [&](const char *what, int64_t value,
                         std::initializer_list<StaticSize> sizes) {
    for (const StaticSize &s : sizes) {
      if (layer.parts[s.part] < 0)
        continue;
      const Entry &part = entries[layer.parts[s.part]];
      if (part.*s.size != -1 && part.*s.size != value)
        return invalidArgumentOf(
            caller, name, "%s = %lld does not match entry %s's %s = %lld", what,
            (long long)value, part.name.c_str(), s.key,
            (long long)(part.*s.size));
    }
    return MOE_STATUS_SUCCESS;
  };
  if (moeStatus status =
          checkStatic("hidden", hidden,
                      {{kPermutePart, "hidden", &Entry::hidden},
                       {kQuantizePart, "cols", &Entry::cols},
                       {kGateUpPart, "k", &Entry::k},
                       {kDownPart, "n", &Entry::n},
                       {kUnpermutePart, "hidden", &Entry::hidden}}))
    return status;
  // gate_up's n is even (the reader checks it): I gate rows, I up rows.
  if (gateUp.n != -1 && gateUp.n / 2 != intermediate)
    return invalidArgumentOf(caller, name,
                             "intermediate = %lld does not match entry %s's "
                             "n = %lld (2I)",
                             (long long)intermediate, gateUp.name.c_str(),
                             (long long)gateUp.n);
  if (moeStatus status = checkStatic("intermediate", intermediate,
                                     {{kIntermediatePart, "cols", &Entry::cols},
                                      {kDownPart, "k", &Entry::k}}))
    return status;
  // bf16 rows move in 16-byte vectors, and the down GEMM's K makes TMA rows
  // of whole 16 bytes; layer_fp8.v1 quantizes both in [1, 128] groups, in
  // [1, 32] groups with mxfp8 GEMMs.
  const int64_t quantum = mx ? kMxBlockSize : fp8 ? kFp8BlockSize : 8;
  const char *const kFp8Why =
      mx ? "abi layer_fp8.v1 with " MOE_FORMAT_MXFP8 " GEMMs quantizes rows "
           "in [1, 32] groups and reads a weights scale per 32 elements of a "
           "row"
         : "abi layer_fp8.v1 quantizes rows in [1, 128] groups and reads the "
           "weights in [128, 128] blocks";
  const struct {
    const char *what;
    int64_t value;
    const char *why;
  } multiples[] = {
      {"hidden", hidden, fp8 ? kFp8Why : "rows move in 16-byte vectors"},
      {"intermediate", intermediate,
       fp8 ? kFp8Why
           : "the down GEMM's K: TMA rows are multiples of 16 bytes"}};
  for (const auto &m : multiples)
    if (m.value < quantum || m.value % quantum)
      return invalidArgumentOf(caller, name,
                               "%s = %lld is not a positive multiple of %lld "
                               "(%s)",
                               m.what, (long long)m.value, (long long)quantum,
                               m.why);
  // Each buffer from a multiple of 256 bytes, in 128 bits (T*k < 2^31, H
  // and I < 2^63: no term overflows).
  using Wide = unsigned __int128;
  const Wide n = Wide(rowsCount), indexBytes = Wide(permute.offsetsBits / 8);
  Wide end = 0;
  auto place = [&end](Wide bytes) {
    Wide start = (end + 255) / 256 * 256;
    end = start + bytes;
    return uint64_t(start);
  };
  out.ids = place(n * 4);
  out.weights = place(n * 4);
  out.offsets = place(Wide(route.experts + 1) * indexBytes);
  out.slots = place(n * indexBytes);
  // moePermuteWorkspaceBytes (it starts at a multiple of 256 bytes, as the
  // permute's counts need).
  out.permute = place(Wide(permuteWorkspace(permute, rowsCount).bytes));
  out.rows = place(n * Wide(hidden) * 2);
  out.inter = place(n * Wide(intermediate) * 2);
  if (fp8) {
    // 1-byte e4m3 values and an f32 scale per [1, 128] group of a row, or
    // an E8M0 byte per [1, 32] group: the same bytes.
    const Wide group = Wide(mx ? kMxBlockSize : kFp8BlockSize),
               scaleBytes = mx ? 1 : 4;
    out.rowsValues = place(n * Wide(hidden));
    out.rowsScales = place(n * (Wide(hidden) / group) * scaleBytes);
    out.interValues = place(n * Wide(intermediate));
    out.interScales = place(n * (Wide(intermediate) / group) * scaleBytes);
  }
  if (end > Wide(INT64_MAX))
    return invalidArgumentOf(caller, name,
                             "the workspace overflows int64 (T = %lld, H = "
                             "%lld, I = %lld)",
                             (long long)tokens, (long long)hidden,
                             (long long)intermediate);
  out.bytes = uint64_t(end);
  return MOE_STATUS_SUCCESS;
}

/// Prefixes the error of a step of moeLayer with the layer and the part;
/// returns SUCCESS unchanged.
moeStatus inStep(moeStatus status, const char *layer, int part) {
  if (status == MOE_STATUS_SUCCESS)
    return status;
  std::string message = lastError;
  return setError(status, "moeLayer(%s): %s step: %s", layer,
                  layerPartName(part), message.c_str());
}

} // namespace

extern "C" {

MOE_API const char *moeStatusName(moeStatus status) {
  switch (status) {
  case MOE_STATUS_SUCCESS:
    return "SUCCESS";
  case MOE_STATUS_INVALID_ARGUMENT:
    return "INVALID_ARGUMENT";
  case MOE_STATUS_INVALID_BUNDLE:
    return "INVALID_BUNDLE";
  case MOE_STATUS_UNSUPPORTED:
    return "UNSUPPORTED";
  case MOE_STATUS_NO_GPU:
    return "NO_GPU";
  case MOE_STATUS_CUDA_ERROR:
    return "CUDA_ERROR";
  case MOE_STATUS_OUT_OF_MEMORY:
    return "OUT_OF_MEMORY";
  case MOE_STATUS_NOT_FOUND:
    return "NOT_FOUND";
  }
  return "UNKNOWN";
}

MOE_API const char *moeLastErrorMessage(void) { return lastError; }

MOE_API moeStatus moeBundleOpenMemory(const void *data, size_t size,
                                      moeBundle **out) {
  if (!out)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "moeBundleOpenMemory: out is NULL");
  *out = nullptr;
  if (!data && size != 0)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "moeBundleOpenMemory: data is NULL but size is %zu", size);
  static const uint8_t empty = 0;
  return openBytes(data ? static_cast<const uint8_t *>(data) : &empty, size,
                   out, "");
}

MOE_API moeStatus moeBundleOpenFile(const char *path, moeBundle **out) {
  if (!out)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "moeBundleOpenFile: out is NULL");
  *out = nullptr;
  if (!path)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "moeBundleOpenFile: path is NULL");
  std::FILE *file = std::fopen(path, "rb");
  if (!file) {
    int error = errno;
    return setError(error == ENOENT ? MOE_STATUS_NOT_FOUND
                                    : MOE_STATUS_INVALID_ARGUMENT,
                    "cannot open '%s': %s", path, std::strerror(error));
  }
  // Read it whole; the largest valid bundle is bounded by the image limits.
  constexpr size_t kMaxBundleBytes =
      kMaxImages * (size_t(kMaxImageBytes) + 512) + (size_t(64) << 20);
  std::unique_ptr<uint8_t, FreeDeleter> buffer;
  size_t size = 0, capacity = 0;
  while (true) {
    if (size == capacity) {
      if (capacity >= kMaxBundleBytes) {
        std::fclose(file);
        return setError(MOE_STATUS_INVALID_BUNDLE,
                        "%s: larger than any valid bundle (%zu bytes)", path,
                        kMaxBundleBytes);
      }
      size_t grown =
          capacity ? std::min(capacity * 2, kMaxBundleBytes) : size_t(1) << 16;
      void *bigger = std::realloc(buffer.get(), grown);
      if (!bigger) {
        std::fclose(file);
        return setError(MOE_STATUS_OUT_OF_MEMORY,
                        "%s: cannot allocate %zu bytes to read it", path,
                        grown);
      }
      buffer.release();
      buffer.reset(static_cast<uint8_t *>(bigger));
      capacity = grown;
    }
    size_t got = std::fread(buffer.get() + size, 1, capacity - size, file);
    size += got;
    if (got == 0)
      break;
  }
  bool readError = std::ferror(file);
  int error = errno;
  std::fclose(file);
  if (readError)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "cannot read '%s': %s", path,
                    std::strerror(error));
  std::string origin = std::string(path) + ": ";
  return openBytes(buffer.get(), size, out, origin.c_str());
}

MOE_API void moeBundleClose(moeBundle *bundle) {
  if (!bundle)
    return;
  for (auto &state : bundle->contexts) {
    const Driver *driver = state->driver;
    cu::Context previous = nullptr;
    unsigned long long id = 0;
    // Skip contexts that are gone, and everything once the driver has shut
    // down (process exit).
    if (driver->ctxGetCurrent(&previous) != cu::kSuccess ||
        driver->ctxGetId(state->context, &id) != cu::kSuccess ||
        id != state->id)
      continue;
    if (previous != state->context &&
        driver->ctxSetCurrent(state->context) != cu::kSuccess)
      continue;
    unloadModules(driver, state->modules);
    if (previous != state->context)
      driver->ctxSetCurrent(previous);
  }
  delete bundle;
}

MOE_API moeStatus moeBundleGetInfo(const moeBundle *bundle,
                                   moeBundleInfo *out) {
  if (!bundle || !out)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "moeBundleGetInfo: %s is NULL",
                    bundle ? "out" : "bundle");
  out->version = bundle->data.version;
  out->chip = bundle->data.chip.c_str();
  out->num_images = int32_t(bundle->data.images.size());
  out->num_entries = int32_t(bundle->data.entries.size());
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeBundleGetEntry(const moeBundle *bundle, int32_t index,
                                    moeEntryInfo *out) {
  if (!bundle || !out)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "moeBundleGetEntry: %s is NULL", bundle ? "out" : "bundle");
  const auto &entries = bundle->data.entries;
  if (index < 0 || size_t(index) >= entries.size())
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "moeBundleGetEntry: index %d is out of range (the bundle "
                    "has %zu entries)",
                    index, entries.size());
  const Entry &entry = entries[index];
  out->name = entry.name.c_str();
  out->op = entry.op.c_str();
  out->abi = entry.abi.c_str();
  out->experts = entry.experts;
  out->n = entry.n;
  out->k = entry.k;
  out->max_rows = entry.maxRows;
  out->offsets_bits = entry.offsetsBits;
  out->num_kernels = int32_t(entry.kernels.size());
  const bool gemm = isGroupedMatmul(entry.kind);
  out->epilogue = gemm ? epilogueName(entry.epilogue) : "";
  out->top_k = entry.topK;
  out->logits_bits = entry.logitsBits;
  out->bias = entry.bias ? 1 : 0;
  out->slots_bits = entry.slotsBits;
  out->hidden = entry.hidden;
  out->weighted = entry.weighted ? 1 : 0;
  out->bias_bits = entry.biasBits;
  out->activation = gemm ? activationName(entry.activation) : "";
  const char **parts[kNumLayerParts] = {
      &out->route,        &out->permute, &out->quantize, &out->gate_up,
      &out->intermediate, &out->down,    &out->unpermute};
  for (int p = 0; p < kNumLayerParts; ++p)
    *parts[p] = entry.parts[p] >= 0 ? entries[entry.parts[p]].name.c_str() : "";
  out->chunk = entry.chunk;
  out->format = fp8FormatName(entry.format); // "" outside FP8 entries
  const bool quantize = entry.kind == Abi::Quantize;
  out->element = !quantize    ? ""
                 : entry.e5m2 ? MOE_ELEMENT_E5M2
                              : MOE_ELEMENT_E4M3;
  out->scale = !quantize ? "" : entry.e8m0 ? MOE_SCALE_E8M0 : MOE_SCALE_F32;
  out->input_bits = entry.inputBits;
  out->block_rows = entry.blockRows;
  out->block_cols = entry.blockCols;
  out->rank = entry.rank;
  out->batch = entry.batch;
  out->rows = entry.rows;
  out->cols = entry.cols;
  // The element of a grouped matmul's output and of a permute's rows.
  out->out = !gemm && entry.kind != Abi::Permute ? ""
             : entry.fp8Out                      ? MOE_OUT_E4M3
                                                 : MOE_OUT_BF16;
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeBundleFindEntry(const moeBundle *bundle, const char *name,
                                     int32_t *index) {
  if (!bundle || !name || !index)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "moeBundleFindEntry: %s is NULL",
                    !bundle ? "bundle"
                    : !name ? "name"
                            : "index");
  const auto &entries = bundle->data.entries;
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].name == name) {
      *index = int32_t(i);
      return MOE_STATUS_SUCCESS;
    }
  return setError(MOE_STATUS_NOT_FOUND,
                  "moeBundleFindEntry: no entry '%.300s' in the bundle", name);
}

MOE_API moeStatus moeBundleGetKernel(const moeBundle *bundle, int32_t entry,
                                     int32_t kernel, moeKernelInfo *out) {
  if (!bundle || !out)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "moeBundleGetKernel: %s is NULL",
                    bundle ? "out" : "bundle");
  const auto &entries = bundle->data.entries;
  if (entry < 0 || size_t(entry) >= entries.size())
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "moeBundleGetKernel: entry index %d is out of range (the "
                    "bundle has %zu entries)",
                    entry, entries.size());
  const auto &kernels = entries[entry].kernels;
  if (kernel < 0 || size_t(kernel) >= kernels.size())
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "moeBundleGetKernel: kernel index %d is out of range "
                    "(entry '%s' has %zu kernels)",
                    kernel, entries[entry].name.c_str(), kernels.size());
  const Kernel &k = kernels[kernel];
  const Image &image = bundle->data.images[k.image];
  out->symbol = k.symbol.c_str();
  out->image = image.name.c_str();
  out->image_size = image.size;
  out->rows_min = k.rowsMin;
  out->rows_max = k.rowsMax;
  out->threads = k.threads;
  out->smem = k.smem;
  out->tile_m = k.tileM;
  out->tile_n = k.tileN;
  out->tile_k = k.tileK;
  out->stages = k.stages;
  out->swap_ab = k.swapAB ? 1 : 0;
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeBundleLoad(moeBundle *bundle) {
  if (!bundle)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "moeBundleLoad: bundle is NULL");
  ContextState *state = nullptr;
  return ensureLoaded(bundle, "moeBundleLoad", &state);
}

MOE_API moeStatus moeGroupedMatmul(moeBundle *bundle, const char *entryName,
                                   const moeGroupedMatmulArgs *args,
                                   void *stream) {
  static constexpr const char *kCaller = "moeGroupedMatmul";
  GemmPlan plan;
  if (moeStatus status = validateGroupedMatmul(bundle, entryName, args, plan))
    return status;
  ContextState *state = nullptr;
  if (moeStatus status = ensureLoaded(bundle, kCaller, &state))
    return status;
  if (moeStatus status = prepareGroupedMatmul(bundle, state, plan))
    return status;
  int issued = 0;
  return launchGroupedMatmul(bundle, state, kCaller, plan, stream,
                             pdlRequested(), &issued, plan.numLaunches);
}

MOE_API moeStatus moeRoute(moeBundle *bundle, const char *entryName,
                           const moeRouteArgs *args, void *stream) {
  WordPlan plan;
  if (moeStatus status = validateRoute(bundle, entryName, args, plan))
    return status;
  return loadAndLaunch(bundle, "moeRoute", plan, stream);
}

MOE_API moeStatus moeUnpermute(moeBundle *bundle, const char *entryName,
                               const moeUnpermuteArgs *args, void *stream) {
  WordPlan plan;
  if (moeStatus status = validateUnpermute(bundle, entryName, args, plan))
    return status;
  return loadAndLaunch(bundle, "moeUnpermute", plan, stream);
}

MOE_API moeStatus moeQuantize(moeBundle *bundle, const char *entryName,
                              const moeQuantizeArgs *args, void *stream) {
  WordPlan plan;
  if (moeStatus status = validateQuantize(bundle, entryName, args, plan))
    return status;
  return loadAndLaunch(bundle, "moeQuantize", plan, stream);
}

MOE_API moeStatus moePermuteWorkspaceBytes(const moeBundle *bundle,
                                           const char *entryName,
                                           int64_t tokens_count,
                                           int64_t *bytes) {
  static constexpr const char *kCaller = "moePermuteWorkspaceBytes";
  if (bundle && entryName && !bytes)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "%s: bytes is NULL", kCaller);
  int entryIndex = -1;
  if (moeStatus status = findPermuteEntry(bundle, kCaller, entryName, bytes,
                                          tokens_count, &entryIndex))
    return status;
  // The sources (an i32 per row), then the counts (an i32 per chunk and
  // expert) from the next multiple of 256 bytes.
  const Entry &entry = bundle->data.entries[entryIndex];
  *bytes = permuteWorkspace(entry, tokens_count * entry.topK).bytes;
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moePermute(moeBundle *bundle, const char *entryName,
                             const moePermuteArgs *args, void *stream) {
  WordPlan plan;
  if (moeStatus status = validatePermute(bundle, entryName, args, plan))
    return status;
  return loadAndLaunch(bundle, "moePermute", plan, stream);
}

MOE_API moeStatus moeLayerWorkspaceBytes(const moeBundle *bundle,
                                         const char *entryName, int64_t tokens,
                                         int64_t hidden, int64_t intermediate,
                                         uint64_t *bytes) {
  static constexpr const char *kCaller = "moeLayerWorkspaceBytes";
  if (bundle && entryName && !bytes)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "%s: bytes is NULL", kCaller);
  int entryIndex = -1;
  LayerWorkspace workspace;
  if (moeStatus status =
          layerWorkspace(bundle, kCaller, entryName, bytes, tokens, hidden,
                         intermediate, &entryIndex, workspace))
    return status;
  *bytes = workspace.bytes;
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeLayer(moeBundle *bundle, const char *entryName,
                           const moeLayerArgs *args, void *stream) {
  static constexpr const char *kCaller = "moeLayer";
  int layerIndex = -1;
  LayerWorkspace w;
  if (moeStatus status =
          layerWorkspace(bundle, kCaller, entryName, args,
                         args ? args->tokens_count : 0, args ? args->hidden : 0,
                         args ? args->intermediate : 0, &layerIndex, w))
    return status;
  const auto &entries = bundle->data.entries;
  const Entry &layer = entries[layerIndex];
  const char *name = layer.name.c_str();
  const bool fp8 = layer.kind == Abi::LayerFp8;
  // Its GEMMs' format (one for both): MXFP8's weights scales are bytes.
  const bool mx = entries[layer.parts[kGateUpPart]].format == Fp8Format::Mx;
  // The entry of part p (a layer.v1 entry has no quantize parts).
  auto partName = [&](int p) { return entries[layer.parts[p]].name.c_str(); };
  const Entry &route = entries[layer.parts[kRoutePart]];
  const Entry &gateUp = entries[layer.parts[kGateUpPart]];
  const Entry &down = entries[layer.parts[kDownPart]];
  const moeLayerArgs &a = *args;
  if (a.experts != route.experts)
    return invalidArgumentOf(kCaller, name,
                             "experts = %lld does not match entry %s's "
                             "experts = %lld",
                             (long long)a.experts, route.name.c_str(),
                             (long long)route.experts);
  // Pointers after sizes; the block scales, then the biases, only where the
  // layer and its parts take them. Their explanations on the stack: no host
  // allocation.
  char scoreWhy[320], gateUpWhy[320], gateUpType[320], downWhy[320],
      downType[320];
  std::snprintf(scoreWhy, sizeof(scoreWhy), " (entry %s has bias=1: f32 [E])",
                route.name.c_str());
  auto explainBias = [](char *why, char *type, const Entry &part,
                        const char *shape) {
    const char *bias = part.biasBits == 32 ? "f32" : "bf16";
    std::snprintf(why, 320, " (entry %s has bias=%s: %s)", part.name.c_str(),
                  bias, shape);
    std::snprintf(type, 320, " (entry %s's bias is %s)", part.name.c_str(),
                  bias);
  };
  explainBias(gateUpWhy, gateUpType, gateUp, "[E, 2I]");
  explainBias(downWhy, downType, down, "[E, H]");
  PointerArg pointers[11] = {{"tokens", a.tokens, 16, "", ""},
                             {"logits", a.logits, route.logitsBits / 8, "",
                              route.logitsBits == 32
                                  ? " (the route's logits are f32)"
                                  : " (the route's logits are bf16)"},
                             {"gate_up_weights", a.gate_up_weights, 16, "", ""},
                             {"down_weights", a.down_weights, 16, "", ""},
                             {"out", a.out, 16, "", ""},
                             {"workspace", a.workspace, 256,
                              " (moeLayerWorkspaceBytes says how large)", ""}};
  size_t numPointers = 6;
  if (fp8 && mx) {
    // UE8M0 bytes, any alignment (word loads only where rows are aligned).
    pointers[numPointers++] = {
        "gate_up_weights_scale", a.gate_up_weights_scale, 1,
        " (abi layer_fp8.v1 with " MOE_FORMAT_MXFP8
        " GEMMs takes the UE8M0 scales [E, 2I, H/32] of gate_up_weights)",
        ""};
    pointers[numPointers++] = {
        "down_weights_scale", a.down_weights_scale, 1,
        " (abi layer_fp8.v1 with " MOE_FORMAT_MXFP8
        " GEMMs takes the UE8M0 scales [E, H, I/32] of down_weights)",
        ""};
  } else if (fp8) {
    pointers[numPointers++] = {
        "gate_up_weights_scale", a.gate_up_weights_scale, 4,
        " (abi layer_fp8.v1 takes the f32 scales [E, 2I/128, H/128] of "
        "gate_up_weights)",
        " (f32 scales)"};
    pointers[numPointers++] = {
        "down_weights_scale", a.down_weights_scale, 4,
        " (abi layer_fp8.v1 takes the f32 scales [E, H/128, I/128] of "
        "down_weights)",
        " (f32 scales)"};
  }
  if (route.bias)
    pointers[numPointers++] = {"score_bias", a.score_bias, 4, scoreWhy, ""};
  if (gateUp.biasBits)
    pointers[numPointers++] = {"gate_up_bias", a.gate_up_bias,
                               gateUp.biasBits / 8, gateUpWhy, gateUpType};
  if (down.biasBits)
    pointers[numPointers++] = {"down_bias", a.down_bias, down.biasBits / 8,
                               downWhy, downType};
  if (moeStatus status = checkPointers(kCaller, name, pointers, numPointers))
    return status;
  // What the layer and its parts do not take must be 0.
  const char *const kNoScales = "abi layer.v1 (bf16 weights, no block scales)";
  const struct {
    const char *what;
    uint64_t pointer;
    bool taken;
    const char *entry, *because;
  } unused[] = {
      {"score_bias", a.score_bias, route.bias, route.name.c_str(), "bias=0"},
      {"gate_up_bias", a.gate_up_bias, gateUp.biasBits != 0,
       gateUp.name.c_str(), "bias=none"},
      {"down_bias", a.down_bias, down.biasBits != 0, down.name.c_str(),
       "bias=none"},
      {"gate_up_weights_scale", a.gate_up_weights_scale, fp8, name, kNoScales},
      {"down_weights_scale", a.down_weights_scale, fp8, name, kNoScales}};
  for (const auto &u : unused)
    if (!u.taken && u.pointer)
      return invalidArgumentOf(kCaller, name, "%s must be 0: entry %s has %s",
                               u.what, u.entry, u.because);
  if (a.workspace_bytes < w.bytes)
    return invalidArgumentOf(kCaller, name,
                             "workspace_bytes = %llu is less than the %llu "
                             "bytes the layer needs for T = %lld, H = %lld, "
                             "I = %lld (moeLayerWorkspaceBytes)",
                             (unsigned long long)a.workspace_bytes,
                             (unsigned long long)w.bytes,
                             (long long)a.tokens_count, (long long)a.hidden,
                             (long long)a.intermediate);

  // The steps on buffers carved from the workspace, each validated as its
  // own call would be, before anything is launched. The gathered rows are
  // reused as the down GEMM's output: the gate-up GEMM (or, in an FP8 layer,
  // the quantize) has read them. An FP8 layer's GEMMs read the values and
  // scales of its quantizes; without a quantize part, its permute's gather
  // (out=f8E4M3FN) writes the rows' values and scales itself, and the bf16
  // rows are only the down GEMM's output; without an intermediate part, its
  // gate-up GEMM (out=f8E4M3FN) writes inter's values and scales itself, and
  // the bf16 inter goes unused.
  const bool quantizeStep = layer.parts[kQuantizePart] >= 0;
  const bool intermediateStep = layer.parts[kIntermediatePart] >= 0;
  const bool permuteQuantizes = fp8 && !quantizeStep;
  const bool gateUpQuantizes = fp8 && !intermediateStep;
  const uint64_t ws = a.workspace;
  const int64_t rowsCount = a.tokens_count * route.topK;
  const moeRouteArgs routeArgs = {a.logits,       a.score_bias,   ws + w.ids,
                                  ws + w.weights, a.tokens_count, a.experts};
  const moePermuteArgs permuteArgs = {a.tokens,
                                      ws + w.ids,
                                      permuteQuantizes ? ws + w.rowsValues
                                                       : ws + w.rows,
                                      ws + w.offsets,
                                      ws + w.slots,
                                      ws + w.permute,
                                      a.tokens_count,
                                      a.hidden,
                                      permuteQuantizes ? ws + w.rowsScales : 0};
  const moeQuantizeArgs quantizeArgs = {ws + w.rows,       ws + w.rowsValues,
                                        ws + w.rowsScales, 1,
                                        rowsCount,         a.hidden};
  const moeGroupedMatmulArgs gateUpArgs = {
      fp8 ? ws + w.rowsValues : ws + w.rows,
      a.gate_up_weights,
      ws + w.offsets,
      gateUpQuantizes ? ws + w.interValues : ws + w.inter,
      rowsCount,
      2 * a.intermediate,
      a.hidden,
      a.experts,
      0,
      a.gate_up_bias,
      fp8 ? ws + w.rowsScales : 0,
      a.gate_up_weights_scale,
      gateUpQuantizes ? ws + w.interScales : 0};
  const moeQuantizeArgs intermediateArgs = {
      ws + w.inter, ws + w.interValues, ws + w.interScales, 1,
      rowsCount,    a.intermediate};
  const moeGroupedMatmulArgs downArgs = {fp8 ? ws + w.interValues
                                             : ws + w.inter,
                                         a.down_weights,
                                         ws + w.offsets,
                                         ws + w.rows,
                                         rowsCount,
                                         a.hidden,
                                         a.intermediate,
                                         a.experts,
                                         0,
                                         a.down_bias,
                                         fp8 ? ws + w.interScales : 0,
                                         a.down_weights_scale,
                                         0};
  const moeUnpermuteArgs unpermuteArgs = {
      ws + w.rows, ws + w.slots,   ws + w.weights, a.out,
      rowsCount,   a.tokens_count, a.hidden};
  WordPlan routePlan, permutePlan, quantizePlan, intermediatePlan,
      unpermutePlan;
  GemmPlan gateUpPlan, downPlan;
  // The route picks k distinct experts per token (§3.2): no expert gets more
  // than T rows, so the GEMM forms for larger experts are not launched.
  const int64_t maxRows = a.tokens_count;
  moeStatus status;
  if ((status = inStep(
           validateRoute(bundle, partName(kRoutePart), &routeArgs, routePlan),
           name, kRoutePart)) ||
      (status = inStep(validatePermute(bundle, partName(kPermutePart),
                                       &permuteArgs, permutePlan),
                       name, kPermutePart)) ||
      (quantizeStep &&
       (status = inStep(validateQuantize(bundle, partName(kQuantizePart),
                                         &quantizeArgs, quantizePlan),
                        name, kQuantizePart))) ||
      (status = inStep(validateGroupedMatmul(bundle, partName(kGateUpPart),
                                             &gateUpArgs, gateUpPlan, maxRows),
                       name, kGateUpPart)) ||
      (intermediateStep &&
       (status = inStep(validateQuantize(bundle, partName(kIntermediatePart),
                                         &intermediateArgs, intermediatePlan),
                        name, kIntermediatePart))) ||
      (status = inStep(validateGroupedMatmul(bundle, partName(kDownPart),
                                             &downArgs, downPlan, maxRows),
                       name, kDownPart)) ||
      (status = inStep(validateUnpermute(bundle, partName(kUnpermutePart),
                                         &unpermuteArgs, unpermutePlan),
                       name, kUnpermutePart)))
    return status;

  ContextState *state = nullptr;
  if ((status = ensureLoaded(bundle, kCaller, &state)))
    return status;
  // The GEMMs' grids and tensor maps before the first launch too.
  if ((status = inStep(prepareGroupedMatmul(bundle, state, gateUpPlan), name,
                       kGateUpPart)) ||
      (status = inStep(prepareGroupedMatmul(bundle, state, downPlan), name,
                       kDownPart)))
    return status;
  // In launch order; a layer.v1 entry's quantize plans launch nothing, nor
  // do the quantize and intermediate plans of a layer_fp8.v1 entry without
  // those parts.
  const struct {
    WordPlan *words;
    GemmPlan *gemm;
  } steps[kNumLayerParts] = {
      {&routePlan, nullptr},        {&permutePlan, nullptr},
      {&quantizePlan, nullptr},     {nullptr, &gateUpPlan},
      {&intermediatePlan, nullptr}, {nullptr, &downPlan},
      {&unpermutePlan, nullptr}};
  int total = 0, issued = 0;
  for (const auto &step : steps)
    total += step.words ? step.words->numLaunches : step.gemm->numLaunches;
  const bool pdl = pdlRequested(); // one setting for all the layer's launches
  for (const auto &step : steps)
    if ((status = step.words
                      ? launchWords(bundle, state, kCaller, *step.words, stream,
                                    pdl, &issued, total)
                      : launchGroupedMatmul(bundle, state, kCaller, *step.gemm,
                                            stream, pdl, &issued, total)))
      return status;
  return MOE_STATUS_SUCCESS;
}

/// Runs an entry by its plan (docs/launch-plans.md): validated without the
/// driver first (with `resident` 1), then loaded, prepared with the real
/// residency, tensor maps encoded, and launched.
MOE_API moeStatus moeLaunch(moeBundle *bundle, const char *entryName,
                            const moeLaunchArgs *args, void *stream) {
  static constexpr const char *kCaller = "moeLaunch";
  int entryIndex = -1;
  if (moeStatus status =
          findEntry(bundle, kCaller, entryName, args, &entryIndex))
    return status;
  const Entry &entry = bundle->data.entries[entryIndex];
  const char *name = entry.name.c_str();
  const Plan &plan = entry.plan;
  if (!entry.planLine)
    return invalidArgumentOf(kCaller, name,
                             "the entry has no launch plan (the bundle "
                             "predates plans: call its ABI's function)");
  if (args->num_sizes != int32_t(plan.sizes.size()) ||
      args->num_args != int32_t(plan.args.size()))
    return invalidArgumentOf(kCaller, name,
                             "%d sizes and %d arguments given, the entry "
                             "takes %zu and %zu",
                             int(args->num_sizes), int(args->num_args),
                             plan.sizes.size(), plan.args.size());
  if ((plan.sizes.size() && !args->sizes) || (plan.args.size() && !args->args))
    return invalidArgumentOf(kCaller, name, "%s is NULL",
                             args->sizes ? "args" : "sizes");
  PlanCall call{args->sizes, args->args, args->workspace,
                args->workspace_bytes};
  std::vector<PreparedLaunch> launches;
  std::string error;
  if (!preparePlan(
          plan, call, [](const PlanStep &) { return int64_t(1); }, launches,
          error))
    return invalidArgumentOf(kCaller, name, "%s", error.c_str());
  ContextState *state = nullptr;
  if (moeStatus status = ensureLoaded(bundle, kCaller, &state))
    return status;
  // A step's kernel: of this entry, or of the part it names (a layer's).
  auto owner = [&](int entry) { return entry < 0 ? entryIndex : entry; };
  if (!preparePlan(
          plan, call,
          [&](const PlanStep &step) {
            return state
                ->kernels[size_t(owner(step.entry))][size_t(step.kernel)]
                .resident;
          },
          launches, error))
    return invalidArgumentOf(kCaller, name, "%s", error.c_str());
  // Every tensor map before the first launch: a bad one launches nothing.
  for (PreparedLaunch &launch : launches)
    for (const TensorMapRequest &request : launch.tensorMaps) {
      if (request.type != PlanType::BF16 && request.type != PlanType::E4M3 &&
          request.type != PlanType::E5M2 && request.type != PlanType::E8M0)
        return invalidArgumentOf(kCaller, name,
                                 "a tensor map of %s elements (the runtime "
                                 "encodes bf16 and 1-byte elements)",
                                 planTypeName(request.type));
      cu::TensorMap map;
      const uint32_t unit[5] = {1, 1, 1, 1, 1};
      if (cu::Result result = state->driver->tensorMapEncodeTiled(
              &map,
              request.type == PlanType::BF16 ? cu::kTensorMapDataTypeBFloat16
                                             : cu::kTensorMapDataTypeUInt8,
              uint32_t(request.dims.size()),
              reinterpret_cast<void *>(request.address), request.dims.data(),
              request.strides.data(), request.box.data(), unit,
              cu::kTensorMapInterleaveNone, cu::kTensorMapSwizzle128B,
              cu::kTensorMapL2Promotion128B, cu::kTensorMapFloatOOBFillNone))
        return driverError(state->driver, kCaller,
                           "cuTensorMapEncodeTiled(a tensor map of kernel '" +
                               bundle->data.entries[size_t(owner(launch.entry))]
                                   .kernels[size_t(launch.kernel)]
                                   .symbol +
                               "' of entry '" + entry.name + "')",
                           result);
      std::memcpy(launch.bytes.data() + request.offset, &map, sizeof(map));
    }
  const bool pdl = pdlRequested();
  int issued = 0;
  for (PreparedLaunch &launch : launches) {
    std::vector<void *> params;
    for (size_t offset : launch.offsets)
      params.push_back(launch.bytes.data() + offset);
    if (moeStatus status =
            launchKernelOf(bundle, state, kCaller, owner(launch.entry),
                           launch.kernel, launch.gridX, params.data(), stream,
                           pdl, issued, int(launches.size())))
      return status;
    ++issued;
  }
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeWorkspaceBytes(const moeBundle *bundle,
                                    const char *entryName, const int64_t *sizes,
                                    int32_t num_sizes, uint64_t *bytes) {
  static constexpr const char *kCaller = "moeWorkspaceBytes";
  int entryIndex = -1;
  if (moeStatus status =
          findEntry(bundle, kCaller, entryName, bytes, &entryIndex))
    return status;
  const Entry &entry = bundle->data.entries[entryIndex];
  if (!entry.planLine)
    return invalidArgumentOf(kCaller, entry.name.c_str(),
                             "the entry has no launch plan");
  if (num_sizes != int32_t(entry.plan.sizes.size()) || (num_sizes && !sizes))
    return invalidArgumentOf(kCaller, entry.name.c_str(),
                             "%d sizes given, the entry takes %zu",
                             int(num_sizes), entry.plan.sizes.size());
  std::string error;
  if (!planWorkspaceBytes(entry.plan, sizes, *bytes, error))
    return invalidArgumentOf(kCaller, entry.name.c_str(), "%s", error.c_str());
  return MOE_STATUS_SUCCESS;
}

} // extern "C"
