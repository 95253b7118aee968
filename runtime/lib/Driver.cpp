//===- Driver.cpp - finding the CUDA driver at run time -------------------===//

#include "DriverAPI.h"
#include "RuntimeLibrary.h"

#include <dlfcn.h>

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
RuntimeLibrary<Driver> &driverLibrary() {
  // Never destroyed: the process's libcuda stays open.
  static auto *library = new RuntimeLibrary<Driver>(
      "no CUDA driver: ", [](Driver &table, std::string &error) {
        return loadDriverLibrary("libcuda.so.1", table, error);
      });
  return *library;
}
} // namespace

const Driver *getDriver(std::string &whyNot) {
  return driverLibrary().get(whyNot);
}

void setDriverForTesting(const Driver *driver, const char *loadError) {
  driverLibrary().inject(driver, loadError);
}

} // namespace moe::runtime
