//===- LaunchChecks.h - checks of fake-driver launches ----------*- C++ -*-===//
//
// Shared by the launch tests: refusals that must not touch the driver, the
// words of memref descriptor parameters, and the fields every launch has.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_TEST_LAUNCHCHECKS_H
#define MOE_RUNTIME_TEST_LAUNCHCHECKS_H

#include "FakeDriver.h"
#include "TestHarness.h"

#include <cstdint>
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

/// The stream the launch tests pass: any non-null value, recorded as is.
inline void *testStream() {
  return reinterpret_cast<void *>(uintptr_t(0x5712ea));
}

/// Appends the 5 words of a rank-1 memref descriptor [size].
inline void pushMemref1D(std::vector<uint64_t> &words, uint64_t pointer,
                         int64_t size) {
  for (uint64_t word :
       {pointer, pointer, uint64_t(0), uint64_t(size), uint64_t(1)})
    words.push_back(word);
}

/// Appends the 7 words of a rank-2 memref descriptor [rows, columns].
inline void pushMemref2D(std::vector<uint64_t> &words, uint64_t pointer,
                         int64_t rows, int64_t columns) {
  for (uint64_t word : {pointer, pointer, uint64_t(0), uint64_t(rows),
                        uint64_t(columns), uint64_t(columns), uint64_t(1)})
    words.push_back(word);
}

} // namespace moe_test

#endif // MOE_RUNTIME_TEST_LAUNCHCHECKS_H
