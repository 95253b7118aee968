//===- PlanExprTests.cpp - launch plan expressions ------------------------===//

#include "PlanExpr.h"
#include "TestHarness.h"

#include <map>
#include <random>

using moe::contract::PlanExpr;

namespace {

/// Evaluates `text` with `sizes` (and `null(x)` true for names in `nulls`);
/// on failure returns false with the error in `error`.
bool evaluate(const char *text, const std::map<std::string, int64_t> &sizes,
              int64_t &value, std::string &error,
              const std::map<std::string, bool> &nulls = {}) {
  PlanExpr expr;
  if (!PlanExpr::parse(text, expr, error))
    return false;
  return expr.evaluate(
      [&](const std::string &name, bool nullTest, int64_t &out) {
        if (nullTest) {
          auto it = nulls.find(name);
          if (it == nulls.end())
            return false;
          out = it->second;
          return true;
        }
        auto it = sizes.find(name);
        if (it == sizes.end())
          return false;
        out = it->second;
        return true;
      },
      value, error);
}

int64_t valueOf(const char *text, const std::map<std::string, int64_t> &sizes) {
  int64_t value = -12345;
  std::string error;
  if (!evaluate(text, sizes, value, error))
    moe_test::fail(__FILE__, __LINE__, std::string(text) + ": " + error);
  return value;
}

std::string errorOf(const char *text,
                    const std::map<std::string, int64_t> &sizes = {}) {
  int64_t value = 0;
  std::string error;
  if (evaluate(text, sizes, value, error))
    return "no error: " + std::to_string(value);
  return error;
}

} // namespace

TEST(planExprArithmetic) {
  std::map<std::string, int64_t> s{{"T", 1000}, {"E", 8}, {"M", 2000}};
  CHECK_EQ(valueOf("T", s), 1000);
  CHECK_EQ(valueOf("T+E*2", s), 1016);
  CHECK_EQ(valueOf("(T+E)*2", s), 2016);
  CHECK_EQ(valueOf("T-E-8", s), 984); // left-associative
  CHECK_EQ(valueOf("-T+1", s), -999);
  CHECK_EQ(valueOf("--T", s), 1000);
  CHECK_EQ(valueOf("ceildiv(T,32)", s), 32);
  CHECK_EQ(valueOf("ceildiv(T,8)", s), 125);
  CHECK_EQ(valueOf("floordiv(T,3)", s), 333);
  // Floor and ceiling toward -inf and +inf for negative dividends.
  CHECK_EQ(valueOf("floordiv(-7,2)", s), -4);
  CHECK_EQ(valueOf("ceildiv(-7,2)", s), -3);
  CHECK_EQ(valueOf("min(T,65535)", s), 1000);
  CHECK_EQ(valueOf("min(ceildiv(T,4),65535,E)", s), 8);
  CHECK_EQ(valueOf("max(1,E,T,M)", s), 2000);
  CHECK_EQ(valueOf("min(7)", s), 7);
}

TEST(planExprConditions) {
  std::map<std::string, int64_t> s{{"T", 128}, {"scatter_from", 128}};
  CHECK_EQ(valueOf("T>=scatter_from", s), 1);
  CHECK_EQ(valueOf("T>scatter_from", s), 0);
  CHECK_EQ(valueOf("T<=128&&T>0", s), 1);
  CHECK_EQ(valueOf("T<1||T==128", s), 1);
  CHECK_EQ(valueOf("T!=128", s), 0);
  CHECK_EQ(valueOf("T<129", s), 1);
  // Comparisons bind looser than arithmetic, && than comparisons.
  CHECK_EQ(valueOf("T+1>T*1", s), 1);
  CHECK_EQ(valueOf("0&&1||1", s), 1);
  int64_t value = 0;
  std::string error;
  CHECK(evaluate("null(bias)", s, value, error, {{"bias", true}}));
  CHECK_EQ(value, 1);
  CHECK(evaluate("null(bias)==0&&T>1", s, value, error, {{"bias", false}}));
  CHECK_EQ(value, 1);
}

// The gate-up grid of a 128-row form over M rows: its work items capped by
// the device's resident CTAs.
TEST(planExprGemmGrid) {
  std::map<std::string, int64_t> s{{"M", 16384}, {"resident", 132}};
  CHECK_EQ(valueOf("min(min(ceildiv(M,128)+min(8,floordiv(M,65)),8*16777216)*"
                   "56,resident)",
                   s),
           132);
  s["M"] = 65;
  CHECK_EQ(valueOf("(M>=65)*min(min(ceildiv(M,128)+min(8,floordiv(M,65)),8*"
                   "16777216)*1,resident)",
                   s),
           2);
}

TEST(planExprErrors) {
  CHECK_CONTAINS(errorOf("T"), "unknown name 'T'");
  CHECK_CONTAINS(errorOf(""), "expected a term at byte 0");
  CHECK_CONTAINS(errorOf("1+"), "expected a term at byte 2");
  CHECK_CONTAINS(errorOf("1 + 2"), "unexpected ' ' at byte 1");
  CHECK_CONTAINS(errorOf("(1"), "expected ')'");
  CHECK_CONTAINS(errorOf("1)"), "unexpected ')'");
  CHECK_CONTAINS(errorOf("1<2<3"), "unexpected '<'");
  CHECK_CONTAINS(errorOf("foo(1)"), "unknown function 'foo'");
  CHECK_CONTAINS(errorOf("ceildiv(1)"), "ceildiv takes 2 arguments");
  CHECK_CONTAINS(errorOf("ceildiv(1,2,3)"), "ceildiv takes 2 arguments");
  CHECK_CONTAINS(errorOf("min()"), "expected a term");
  CHECK_CONTAINS(errorOf("min"), "expected '(' after min");
  CHECK_CONTAINS(errorOf("null(1)"), "null takes one argument name");
  CHECK_CONTAINS(errorOf("1&2"), "unexpected '&'");
  CHECK_CONTAINS(errorOf("9223372036854775808"), "number overflows int64");
  CHECK_CONTAINS(errorOf("9223372036854775807+1"), "a sum overflows int64");
  CHECK_CONTAINS(errorOf("-9223372036854775807-2"),
                 "a difference overflows int64");
  CHECK_CONTAINS(errorOf("4611686018427387904*2"), "a product overflows");
  CHECK_CONTAINS(errorOf("ceildiv(5,0)"), "division by 0");
  CHECK_CONTAINS(errorOf("floordiv(5,-1)"), "division by -1");
  std::string deep(40, '(');
  deep += "1" + std::string(40, ')');
  CHECK_CONTAINS(errorOf(deep.c_str()), "nested deeper than 32");
  std::string wide = "1";
  for (int i = 0; i < 300; ++i)
    wide += "+1";
  CHECK_CONTAINS(errorOf(wide.c_str()), "more than 256 terms");
  std::string longText(2000, '1');
  CHECK_CONTAINS(errorOf(longText.c_str()), "longer than 1024 bytes");
}

TEST(planExprNames) {
  PlanExpr expr;
  std::string error;
  CHECK(PlanExpr::parse("min(ceildiv(T,E),T)+null(bias)", expr, error));
  CHECK_EQ(expr.names().size(), size_t(3));
  CHECK_EQ(expr.names()[0], std::string("T"));
  CHECK_EQ(expr.names()[1], std::string("E"));
  CHECK_EQ(expr.names()[2], std::string("bias"));
  CHECK(!expr.isNullTest(0));
  CHECK(expr.isNullTest(2));
  CHECK(!expr.isConstant());
  CHECK(PlanExpr::parse("65535", expr, error));
  CHECK(expr.isConstant());
}

// str() is canonical: parsing it gives the same value and the same text,
// over random expressions.
TEST(planExprRoundTrip) {
  std::mt19937 rng(7);
  const char *const terms[] = {
      "T", "E", "3", "ceildiv(T,4)", "min(T,E,9)", "floordiv(E,2)", "max(1,T)"};
  const char *const ops[] = {"+", "-", "*", "<", "==", "&&", "||"};
  std::map<std::string, int64_t> s{{"T", 77}, {"E", 5}};
  for (int i = 0; i < 500; ++i) {
    std::string text = terms[rng() % 7];
    for (int j = rng() % 5; j > 0; --j) {
      std::string op = ops[rng() % 7];
      // Comparisons do not chain: parenthesise the left side first.
      if (op == "<" || op == "==")
        text = "(" + text + ")";
      text += op + std::string(terms[rng() % 7]);
    }
    PlanExpr expr, again;
    std::string error;
    if (!PlanExpr::parse(text, expr, error)) {
      moe_test::fail(__FILE__, __LINE__, text + ": " + error);
      continue;
    }
    CHECK(PlanExpr::parse(expr.str(), again, error));
    CHECK_EQ(again.str(), expr.str());
    CHECK_EQ(valueOf(expr.str().c_str(), s), valueOf(text.c_str(), s));
  }
}
