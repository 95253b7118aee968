//===- plan-expr-fuzz.cpp - libFuzzer target for plan expressions ---------===//
//
// Parses the input as a launch plan expression; when it parses, its
// canonical text must parse to the same text and evaluate to the same value
// (or the same error) with every name bound to values taken from the input.
// Then parses it as a step's parameter list (Plan.cpp) against a small plan
// and, when it parses, prepares the step for a few sizes.
//
//===----------------------------------------------------------------------===//

#include "Plan.h"
#include "PlanExpr.h"

#include <cstdlib>
#include <string>

using moe::contract::PlanExpr;
using namespace moe::runtime;

namespace {

PlanExpr parsed(const char *text) {
  PlanExpr e;
  std::string error;
  PlanExpr::parse(text, e, error);
  return e;
}

/// A plan with two sizes, an input, an optional input, an output and a
/// workspace slice, whose one step's parameters the input gives.
Plan fuzzPlan() {
  Plan plan;
  auto size = [](const char *name, const char *min, const char *max) {
    PlanSize s;
    s.name = name;
    s.min = parsed(min);
    s.max = parsed(max);
    return s;
  };
  auto arg = [](const char *name, PlanType type, PlanArg::Role role,
                int64_t align, std::vector<PlanExpr> dims) {
    PlanArg a;
    a.name = name;
    a.type = type;
    a.role = role;
    a.align = align;
    a.dims = std::move(dims);
    return a;
  };
  plan.sizes.push_back(size("T", "1", "1000000"));
  plan.sizes.push_back(size("K", "1", "T"));
  plan.args.push_back(arg("x", PlanType::BF16, PlanArg::Role::In, 16,
                          {parsed("T"), parsed("K")}));
  plan.args.push_back(
      arg("bias", PlanType::F32, PlanArg::Role::Optional, 4, {parsed("K")}));
  plan.args.push_back(arg("y", PlanType::F32, PlanArg::Role::Out, 16,
                          {parsed("T"), parsed("K")}));
  plan.work.push_back({"tmp", parsed("T*4"), 16});
  return plan;
}

std::function<int(const PlanStep &)> kernels(int n) {
  return [n](const PlanStep &) { return n; };
}

void prepareParams(const std::string &text) {
  Plan plan = fuzzPlan();
  PlanStep step;
  std::string error;
  if (!parsePlanParams(text, plan, step.params, error))
    return;
  step.grid = parsed("min(T,resident)");
  step.when = parsed("null(bias)==0");
  plan.steps.push_back(std::move(step));
  if (!checkPlanNames(plan, kernels(1), error))
    return;
  const uint64_t tb = uint64_t(1) << 40;
  uint64_t pointers[] = {tb, 2 * tb, 3 * tb};
  for (int64_t t : {int64_t(1), int64_t(77), int64_t(1000000)}) {
    int64_t sizes[] = {t, (t + 1) / 2};
    PlanCall call{sizes, pointers, 4 * tb, uint64_t(t) * 4};
    std::vector<PreparedLaunch> launches;
    preparePlan(
        plan, call, [](const PlanStep &) { return int64_t(132); }, launches,
        error);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  PlanExpr expr;
  std::string error;
  prepareParams(text);
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
