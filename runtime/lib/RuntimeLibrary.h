//===- RuntimeLibrary.h - a table of entry points found at run time -*- C++
//-*-===//
//
// The CUDA driver (Driver.cpp) and NCCL (Nccl.cpp) are opened with dlopen
// at run time: each is a table of entry points loaded once per process (a
// library that is missing is not retried), or one a test injects.
// Internal: not part of the public API.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_LIB_RUNTIMELIBRARY_H
#define MOE_RUNTIME_LIB_RUNTIMELIBRARY_H

#include <atomic>
#include <mutex>
#include <string>

namespace moe::runtime {

template <typename Table> class RuntimeLibrary {
public:
  /// Fills the table (dlopen + dlsym) or says why it cannot.
  using Loader = bool (*)(Table &out, std::string &error);

  /// `what` prefixes every reason there is no table ("no NCCL: ").
  RuntimeLibrary(const char *what, Loader load) : what(what), load(load) {}

  /// The injected table, else the loaded one; null with `whyNot` set when
  /// there is none.
  const Table *get(std::string &whyNot) {
    if (const Table *table = injected.load(std::memory_order_acquire))
      return table;
    if (injectedFailure.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(injectedErrorMutex);
      whyNot = what + injectedError;
      return nullptr;
    }
    std::call_once(loadedOnce, [&] { real.ok = load(real.table, real.error); });
    if (!real.ok) {
      whyNot = what + real.error;
      return nullptr;
    }
    return &real.table;
  }

  /// Test hook: `table` non-null is used from now on; null with
  /// `loadError` fails as if the library could not be loaded; both null go
  /// back to the real library.
  void inject(const Table *table, const char *loadError) {
    {
      std::lock_guard<std::mutex> lock(injectedErrorMutex);
      injectedError = loadError ? loadError : "";
    }
    injectedFailure.store(!table && loadError, std::memory_order_release);
    injected.store(table, std::memory_order_release);
  }

private:
  std::string what;
  Loader load;
  std::atomic<const Table *> injected{nullptr};
  std::atomic<bool> injectedFailure{false};
  std::mutex injectedErrorMutex;
  std::string injectedError;
  std::once_flag loadedOnce;
  struct {
    Table table;
    bool ok = false;
    std::string error;
  } real;
};

} // namespace moe::runtime

#endif // MOE_RUNTIME_LIB_RUNTIMELIBRARY_H
