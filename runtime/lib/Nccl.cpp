//===- Nccl.cpp - finding NCCL at run time --------------------------------===//

#include "NcclAPI.h"
#include "RuntimeLibrary.h"

#include <cstdlib>
#include <dlfcn.h>
#include <type_traits>

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

RuntimeLibrary<Nccl> &ncclLibrary() {
  // Never destroyed: the process's NCCL stays open.
  static auto *library = new RuntimeLibrary<Nccl>(
      "no NCCL: ", [](Nccl &table, std::string &error) {
        const char *path = std::getenv("MOE_NCCL_LIBRARY");
        return loadNcclLibrary(path && *path ? path : "libnccl.so.2", table,
                               error);
      });
  return *library;
}
} // namespace

const Nccl *getNccl(std::string &whyNot) { return ncclLibrary().get(whyNot); }

void setNcclForTesting(const Nccl *nccl, const char *loadError) {
  ncclLibrary().inject(nccl, loadError);
}

} // namespace moe::runtime
