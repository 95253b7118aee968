//===- Driver.cpp - finding the CUDA driver at run time -------------------===//

#include "DriverAPI.h"

#include <atomic>
#include <dlfcn.h>
#include <mutex>

namespace moe::runtime {

bool loadDriverLibrary(const char *path, Driver &out, std::string &error) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    error = std::string("dlopen(") + path + ") failed: " + (why ? why : "?");
    return false;
  }
  bool ok = true;
#define MOE_DRIVER_LOOKUP(member, symbol, ...)                                 \
  if (ok) {                                                                    \
    dlerror();                                                                 \
    void *address = dlsym(handle, #symbol);                                    \
    if (!address) {                                                            \
      const char *why = dlerror();                                             \
      error = std::string("dlsym(" #symbol ") in ") + path +                   \
              " failed: " + (why ? why : "symbol is null") +                   \
              " (the driver is older than CUDA 12.0?)";                        \
      ok = false;                                                              \
    } else {                                                                   \
      out.member = reinterpret_cast<decltype(out.member)>(address);            \
    }                                                                          \
  }
  MOE_DRIVER_FUNCTIONS(MOE_DRIVER_LOOKUP)
#undef MOE_DRIVER_LOOKUP
  // The optional ones: null when the driver lacks them.
#define MOE_DRIVER_OPTIONAL_LOOKUP(member, symbol, ...)                        \
  if (ok) {                                                                    \
    dlerror();                                                                 \
    out.member =                                                               \
        reinterpret_cast<decltype(out.member)>(dlsym(handle, #symbol));        \
    dlerror();                                                                 \
  }
  MOE_DRIVER_OPTIONAL_FUNCTIONS(MOE_DRIVER_OPTIONAL_LOOKUP)
#undef MOE_DRIVER_OPTIONAL_LOOKUP
  return ok;
}

namespace {
// The injected table, or the error to report instead of loading libcuda.
std::atomic<const Driver *> injectedDriver{nullptr};
std::atomic<bool> injectedFailure{false};
std::mutex injectedErrorMutex;
std::string injectedError;

struct RealDriver {
  Driver table;
  bool ok = false;
  std::string error;
};

const RealDriver &realDriver() {
  // Loaded once per process; a missing driver is not retried.
  static const RealDriver *real = [] {
    auto *result = new RealDriver;
    result->ok =
        loadDriverLibrary("libcuda.so.1", result->table, result->error);
    return result;
  }();
  return *real;
}
} // namespace

const Driver *getDriver(std::string &whyNot) {
  if (const Driver *driver = injectedDriver.load(std::memory_order_acquire))
    return driver;
  if (injectedFailure.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(injectedErrorMutex);
    whyNot = "no CUDA driver: " + injectedError;
    return nullptr;
  }
  const RealDriver &real = realDriver();
  if (!real.ok) {
    whyNot = "no CUDA driver: " + real.error;
    return nullptr;
  }
  return &real.table;
}

void setDriverForTesting(const Driver *driver, const char *loadError) {
  {
    std::lock_guard<std::mutex> lock(injectedErrorMutex);
    injectedError = loadError ? loadError : "";
  }
  injectedFailure.store(!driver && loadError, std::memory_order_release);
  injectedDriver.store(driver, std::memory_order_release);
}

} // namespace moe::runtime
