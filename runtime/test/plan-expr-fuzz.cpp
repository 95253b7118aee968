//===- plan-expr-fuzz.cpp - libFuzzer target for plan expressions ---------===//
//
// Parses the input as a launch plan expression; when it parses, its
// canonical text must parse to the same text and evaluate to the same value
// (or the same error) with every name bound to values taken from the input.
//
//===----------------------------------------------------------------------===//

#include "PlanExpr.h"

#include <cstdlib>
#include <string>

using moe::contract::PlanExpr;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  PlanExpr expr;
  std::string error;
  if (!PlanExpr::parse(text, expr, error))
    return 0;
  PlanExpr again;
  if (!PlanExpr::parse(expr.str(), again, error) || again.str() != expr.str())
    std::abort();
  // Names take values from the input's bytes, spread over int64.
  auto lookup = [&](const std::string &name, bool nullTest, int64_t &out) {
    uint64_t h = 1469598103934665603ull;
    for (char c : name)
      h = (h ^ uint8_t(c)) * 1099511628211ull;
    out = nullTest ? int64_t(h & 1) : int64_t(h >> (h % 64));
    return true;
  };
  int64_t a = 0, b = 0;
  std::string errorA, errorB;
  bool okA = expr.evaluate(lookup, a, errorA);
  bool okB = again.evaluate(lookup, b, errorB);
  if (okA != okB || (okA && a != b))
    std::abort();
  return 0;
}
