//===- Runtime.cpp - the C API: bundles, loading, launching ---------------===//
//
// Implements moe_runtime.h over the driver table of DriverAPI.h: errors,
// opening and describing bundles, loading their images into CUDA contexts
// (with each kernel's residency for persistent grids), and issuing one
// kernel launch with programmatic dependent launch and clusters (contract
// §3.6, §3.1). Launch.cpp runs entries by their plans.
//
//===----------------------------------------------------------------------===//

#include "Loaded.h"

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

using namespace moe::runtime;

namespace {
thread_local char lastError[2048];
} // namespace

namespace moe::runtime {
moeStatus setError(moeStatus status, const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(lastError, sizeof(lastError), format, args);
  va_end(args);
  return status;
}
} // namespace moe::runtime

namespace moe::runtime {

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

/// The checks every launching call starts with: non-null bundle, entry name
/// and args, and an entry of that name (NOT_FOUND lists the first ones).
moeStatus findEntry(const moeBundle *bundle, const char *caller,
                    const char *entryName, const void *out, const char *outName,
                    int *index) {
  if (!bundle)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "%s: bundle is NULL", caller);
  if (!entryName)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "%s: entry name is NULL",
                    caller);
  if (!out)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "%s: %s is NULL", caller,
                    outName);
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

/// findEntry, then the entry must have a launch plan.
moeStatus findPlanEntry(const moeBundle *bundle, const char *caller,
                        const char *entryName, const void *out,
                        const char *outName, int *index) {
  if (moeStatus status =
          findEntry(bundle, caller, entryName, out, outName, index))
    return status;
  const Entry &entry = bundle->data.entries[size_t(*index)];
  if (!entry.planLine)
    return invalidArgumentOf(caller, entry.name.c_str(),
                             "the entry has no launch plan (a version-%d "
                             "bundle: recompile it with moe-translate)",
                             bundle->data.version);
  return MOE_STATUS_SUCCESS;
}

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

} // namespace moe::runtime

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

/// INVALID_ARGUMENT naming `function` unless `bundle` and `out` are set and
/// `index` (called `label` in the message) is one of the bundle's entries.
static moeStatus checkEntryIndex(const char *function, const moeBundle *bundle,
                                 const void *out, int32_t index,
                                 const char *label = "index") {
  if (!bundle || !out)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "%s: %s is NULL", function,
                    bundle ? "out" : "bundle");
  size_t count = bundle->data.entries.size();
  if (index < 0 || size_t(index) >= count)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: %s %d is out of range (the bundle has %zu entries)",
                    function, label, index, count);
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeBundleGetEntry(const moeBundle *bundle, int32_t index,
                                    moeEntryInfo *out) {
  if (moeStatus status =
          checkEntryIndex("moeBundleGetEntry", bundle, out, index))
    return status;
  const auto &entries = bundle->data.entries;
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

MOE_API moeStatus moeBundleGetStage(const moeBundle *bundle, int32_t index,
                                    moeStageInfo *out) {
  if (moeStatus status =
          checkEntryIndex("moeBundleGetStage", bundle, out, index))
    return status;
  const Entry &entry = bundle->data.entries[index];
  const Stage &stage = entry.stage;
  if (stage.function.empty())
    return setError(MOE_STATUS_NOT_FOUND,
                    "moeBundleGetStage: entry '%s' is not a stage of a split "
                    "function",
                    entry.name.c_str());
  out->function = stage.function.c_str();
  out->stage = stage.index;
  out->exchange = stage.exchange.c_str();
  out->ranks = stage.ranks;
  out->exchange_args = stage.exchangeArgs.c_str();
  out->exchange_results = stage.exchangeResults.c_str();
  out->function_args = stage.functionArgs.c_str();
  out->function_results = stage.functionResults.c_str();
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
  if (moeStatus status = checkEntryIndex("moeBundleGetKernel", bundle, out,
                                         entry, "entry index"))
    return status;
  const auto &entries = bundle->data.entries;
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

} // extern "C"
