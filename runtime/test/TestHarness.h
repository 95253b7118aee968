//===- TestHarness.h - a minimal unit-test framework -------------*- C++
//-*-===//
//
// TEST(name) { ... } registers a test; CHECK* report a failure and let the
// test go on. TestMain.cpp runs every test and prints "N passed, N failed".
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_TEST_TESTHARNESS_H
#define MOE_RUNTIME_TEST_TESTHARNESS_H

#include "moe_runtime.h"

#include <cstdint>
#include <string>
#include <vector>

namespace moe_test {

struct TestCase {
  const char *name;
  void (*run)();
};

std::vector<TestCase> &registry();

struct Registrar {
  Registrar(const char *name, void (*run)()) {
    registry().push_back({name, run});
  }
};

/// Records a failed check of the running test.
void fail(const char *file, int line, const std::string &what);

/// Checks made so far (for the summary).
extern long checksMade;

std::string show(long long value);
std::string show(unsigned long long value);
std::string show(const std::string &value);
std::string show(const char *value);
inline std::string show(long value) { return show((long long)value); }
inline std::string show(int value) { return show((long long)value); }
inline std::string show(unsigned value) {
  return show((unsigned long long)value);
}
inline std::string show(unsigned long value) {
  return show((unsigned long long)value);
}
inline std::string show(bool value) { return value ? "true" : "false"; }
inline std::string show(moeStatus value) { return moeStatusName(value); }
inline std::string show(const void *value) {
  return show((unsigned long long)(uintptr_t)value);
}

} // namespace moe_test

#define TEST(name)                                                             \
  static void name();                                                          \
  static moe_test::Registrar name##Registrar(#name, name);                     \
  static void name()

#define CHECK(condition)                                                       \
  do {                                                                         \
    ++moe_test::checksMade;                                                    \
    if (!(condition))                                                          \
      moe_test::fail(__FILE__, __LINE__, "CHECK(" #condition ")");             \
  } while (0)

#define CHECK_EQ(actual, expected)                                             \
  do {                                                                         \
    auto &&checkActual = (actual);                                             \
    auto &&checkExpected = (expected);                                         \
    ++moe_test::checksMade;                                                    \
    if (!(checkActual == checkExpected))                                       \
      moe_test::fail(__FILE__, __LINE__,                                       \
                     "CHECK_EQ(" #actual ", " #expected "): " +                \
                         moe_test::show(checkActual) +                         \
                         " != " + moe_test::show(checkExpected));              \
  } while (0)

/// `text` (a std::string or const char *) contains `needle`.
#define CHECK_CONTAINS(text, needle)                                           \
  do {                                                                         \
    std::string checkText = (text);                                            \
    ++moe_test::checksMade;                                                    \
    if (checkText.find(needle) == std::string::npos)                           \
      moe_test::fail(__FILE__, __LINE__,                                       \
                     std::string("CHECK_CONTAINS(" #text "): '") + checkText + \
                         "' lacks '" + (needle) + "'");                        \
  } while (0)

/// `call` returns `status` and the last error message contains `needle`.
#define CHECK_STATUS(call, status, needle)                                     \
  do {                                                                         \
    moeStatus checkStatus = (call);                                            \
    CHECK_EQ(checkStatus, status);                                             \
    if (checkStatus != MOE_STATUS_SUCCESS)                                     \
      CHECK_CONTAINS(moeLastErrorMessage(), needle);                           \
  } while (0)

#endif // MOE_RUNTIME_TEST_TESTHARNESS_H
