//===- Nccl.cpp - finding NCCL at run time --------------------------------===//

#include "NcclAPI.h"

#include <atomic>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

namespace moe::runtime {
namespace {

bool loadNcclLibrary(const char *path, Nccl &out, std::string &error) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    error = std::string("dlopen(") + path + ") failed: " + (why ? why : "?");
    return false;
  }
  auto lookup = [&](const char *symbol, auto &member) {
    dlerror();
    void *address = dlsym(handle, symbol);
    if (!address) {
      error = std::string("dlsym(") + symbol + ") in " + path +
              " failed (NCCL older than 2.7?)";
      return false;
    }
    member =
        reinterpret_cast<std::remove_reference_t<decltype(member)>>(address);
    return true;
  };
  bool ok = true;
#define MOE_NCCL_LOOKUP(member, symbol, ...)                                   \
  ok = ok && lookup(#symbol, out.member);
  MOE_NCCL_FUNCTIONS(MOE_NCCL_LOOKUP)
#undef MOE_NCCL_LOOKUP
  return ok && lookup("ncclGetErrorString", out.getErrorString);
}

std::atomic<const Nccl *> injectedNccl{nullptr};
std::atomic<bool> injectedFailure{false};
std::mutex injectedErrorMutex;
std::string injectedError;

struct RealNccl {
  Nccl table;
  bool ok = false;
  std::string error;
};

const RealNccl &realNccl() {
  // Loaded once per process; a missing library is not retried.
  static const RealNccl *real = [] {
    auto *result = new RealNccl;
    const char *path = std::getenv("MOE_NCCL_LIBRARY");
    result->ok = loadNcclLibrary(path && *path ? path : "libnccl.so.2",
                                 result->table, result->error);
    return result;
  }();
  return *real;
}
} // namespace

const Nccl *getNccl(std::string &whyNot) {
  if (const Nccl *nccl = injectedNccl.load(std::memory_order_acquire))
    return nccl;
  if (injectedFailure.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(injectedErrorMutex);
    whyNot = "no NCCL: " + injectedError;
    return nullptr;
  }
  const RealNccl &real = realNccl();
  if (!real.ok) {
    whyNot = "no NCCL: " + real.error;
    return nullptr;
  }
  return &real.table;
}

void setNcclForTesting(const Nccl *nccl, const char *loadError) {
  {
    std::lock_guard<std::mutex> lock(injectedErrorMutex);
    injectedError = loadError ? loadError : "";
  }
  injectedFailure.store(!nccl && loadError, std::memory_order_release);
  injectedNccl.store(nccl, std::memory_order_release);
}

} // namespace moe::runtime
