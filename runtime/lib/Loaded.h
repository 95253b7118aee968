//===- Loaded.h - a bundle and its modules in CUDA contexts ------*- C++
//-*-===//
//
// Internal to the runtime: what Runtime.cpp loads and Launch.cpp launches
// with, and the helpers they share.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_LIB_LOADED_H
#define MOE_RUNTIME_LIB_LOADED_H

#include "Bundle.h"
#include "DriverAPI.h"

#include <memory>
#include <mutex>
#include <vector>

namespace moe::runtime {

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

} // namespace moe::runtime

struct moeBundle {
  moe::runtime::BundleData data;
  std::mutex mutex; // guards contexts
  std::vector<std::unique_ptr<moe::runtime::ContextState>> contexts;
};

namespace moe::runtime {

/// A CUDA_ERROR (or the status `result` maps to) of `caller` naming the
/// driver call `what` and the driver's description of `result`.
moeStatus driverError(const Driver *driver, const char *caller,
                      const std::string &what, cu::Result result);

/// Loads the bundle into the current context unless it is (*out: its
/// modules and functions there).
moeStatus ensureLoaded(moeBundle *bundle, const char *caller,
                       ContextState **out);

/// An INVALID_ARGUMENT error "<caller>(<entry>): <message>".
__attribute__((format(printf, 3, 4))) moeStatus invalidArgumentOf(
    const char *caller, const char *entry, const char *format, ...);

/// The checks every call on an entry starts with: a bundle, an entry name
/// and the output `out` (called `outName`) non-null, and an entry of that
/// name (NOT_FOUND lists the first ones); then, for findPlanEntry, a plan.
moeStatus findEntry(const moeBundle *bundle, const char *caller,
                    const char *entryName, const void *out, const char *outName,
                    int *index);
moeStatus findPlanEntry(const moeBundle *bundle, const char *caller,
                        const char *entryName, const void *out,
                        const char *outName, int *index);

/// Whether launches use programmatic dependent launch (MOE_RUNTIME_PDL).
bool pdlRequested();

/// Launches kernel `kernelIndex` of entry `entryIndex` on grid (gridX, 1, 1)
/// with `params` (launch `issued` of the call's `total`).
moeStatus launchKernelOf(moeBundle *bundle, ContextState *state,
                         const char *caller, int entryIndex, int kernelIndex,
                         int64_t gridX, void **params, void *stream, bool pdl,
                         int issued, int total);

} // namespace moe::runtime

#endif // MOE_RUNTIME_LIB_LOADED_H
