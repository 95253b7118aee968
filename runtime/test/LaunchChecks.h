//===- LaunchChecks.h - checks of fake-driver launches ----------*- C++ -*-===//
//
// Shared by the launch tests: refusals that must not touch the driver, the
// environment variable of programmatic dependent launch, and the fields
// every launch has.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_TEST_LAUNCHCHECKS_H
#define MOE_RUNTIME_TEST_LAUNCHCHECKS_H

#include "FakeDriver.h"
#include "TestHarness.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

/// Expects `call` to fail with `status` and `message`, without having called
/// the driver at all.
#define CHECK_REJECTED(call, status, message)                                  \
  do {                                                                         \
    size_t callsBefore = moe_test::fakeGpu().calls.size();                     \
    CHECK_STATUS(call, status, message);                                       \
    CHECK_EQ(moe_test::callsSince(callsBefore), std::string());                \
  } while (0)

namespace moe_test {

/// Sets MOE_RUNTIME_PDL (unsets it for null) for its lifetime, then puts
/// back what was there.
class PdlEnvironment {
public:
  explicit PdlEnvironment(const char *value) {
    if (const char *old = std::getenv("MOE_RUNTIME_PDL")) {
      hadValue = true;
      oldValue = old;
    }
    set(value);
  }
  ~PdlEnvironment() { set(hadValue ? oldValue.c_str() : nullptr); }
  void set(const char *value) {
    if (value)
      setenv("MOE_RUNTIME_PDL", value, 1);
    else
      unsetenv("MOE_RUNTIME_PDL");
  }

private:
  bool hadValue = false;
  std::string oldValue;
};

/// The stream the launch tests pass: any non-null value, recorded as is.
inline void *testStream() {
  return reinterpret_cast<void *>(uintptr_t(0x5712ea));
}

/// Checks `got`'s symbol, grid (gridX, 1, 1), block (threads, 1, 1), shared
/// memory and stream, that `extra` is NULL and that it is a PDL launch.
inline void checkLaunchShape(const FakeLaunch &got, const char *symbol,
                             unsigned gridX, unsigned threads, unsigned smem,
                             void *stream) {
  CHECK_EQ(got.function, std::string(symbol));
  CHECK_EQ(got.grid[0], gridX);
  CHECK_EQ(got.grid[1], 1u);
  CHECK_EQ(got.grid[2], 1u);
  CHECK_EQ(got.block[0], threads);
  CHECK_EQ(got.block[1], 1u);
  CHECK_EQ(got.block[2], 1u);
  CHECK_EQ(got.smem, smem);
  CHECK_EQ(got.stream, stream);
  CHECK(got.extraIsNull);
  CHECK(isPdlLaunch(got));
}

} // namespace moe_test

#endif // MOE_RUNTIME_TEST_LAUNCHCHECKS_H
