//===- TestMain.cpp - runs every registered test --------------------------===//
//
// Usage: moe-runtime-tests [substring]  (runs the tests whose name contains
// it). Exits 1 if any test failed.
//
//===----------------------------------------------------------------------===//

#include "TestHarness.h"

#include <cstdio>
#include <cstring>

namespace moe_test {

std::vector<TestCase> &registry() {
  static std::vector<TestCase> tests;
  return tests;
}

long checksMade = 0;

namespace {
const char *currentTest = "";
int currentFailures = 0;
} // namespace

void fail(const char *file, int line, const std::string &what) {
  ++currentFailures;
  std::fprintf(stderr, "FAIL %s (%s:%d): %s\n", currentTest, file, line,
               what.c_str());
}

std::string show(long long value) { return std::to_string(value); }
std::string show(unsigned long long value) { return std::to_string(value); }
std::string show(const std::string &value) { return "'" + value + "'"; }
std::string show(const char *value) {
  return value ? "'" + std::string(value) + "'" : "NULL";
}

} // namespace moe_test

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : nullptr;
  int passed = 0, failed = 0;
  for (const moe_test::TestCase &test : moe_test::registry()) {
    if (filter && !std::strstr(test.name, filter))
      continue;
    moe_test::currentTest = test.name;
    moe_test::currentFailures = 0;
    test.run();
    if (moe_test::currentFailures)
      ++failed;
    else
      ++passed;
  }
#ifdef MOE_RUNTIME_ABI_CHECKED
  std::printf("driver ABI declarations checked against cuda.h at compile "
              "time\n");
#else
  std::printf("driver ABI check skipped (no cuda.h at configure time)\n");
#endif
#ifdef MOE_RUNTIME_NCCL_ABI_CHECKED
  std::printf("NCCL ABI declarations checked against nccl.h at compile time\n");
#else
  std::printf("NCCL ABI check skipped (no nccl.h at configure time)\n");
#endif
  std::printf("%ld checks\n", moe_test::checksMade);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
