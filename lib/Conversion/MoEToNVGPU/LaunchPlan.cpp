//===- LaunchPlan.cpp - building and checking launch plans ----------------===//
//
// The expression builder and the plan collector of LaunchPlan.h. Texts are
// written as PlanExpr prints them (canonical), and build() parses each one
// back and compares: a mismatch is an internal error as a parse failure is.
//
//===----------------------------------------------------------------------===//

#include "LaunchPlan.h"

#include "ContractTables.h"
#include "PlanExpr.h"

#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::moe::plan;

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

/// PlanExpr's binding strengths.
static constexpr int kOr = 1, kAnd = 2, kCompare = 3, kSum = 4, kProduct = 5,
                     kNegate = 6, kTerm = 7;

Expr::Expr(int64_t v) {
  value = v;
  lowerBound = v;
  upperBound = v;
  if (v == INT64_MIN) { // no literal: its magnitude overflows
    text = "-9223372036854775807-1";
    prec = kSum;
  } else {
    text = std::to_string(v);
    prec = v < 0 ? kNegate : kTerm;
  }
}

Expr Expr::name(StringRef name, int64_t lowerBound, int64_t upperBound) {
  Expr e(name.str(), kTerm);
  if (lowerBound != INT64_MIN)
    e.lowerBound = lowerBound;
  if (upperBound != INT64_MAX)
    e.upperBound = upperBound;
  return e;
}

Expr Expr::null(StringRef arg) {
  Expr e(("null(" + arg + ")").str(), kTerm);
  e.lowerBound = 0;
  e.upperBound = 1;
  return e;
}

Expr Expr::infix(StringRef op, int precedence, const Expr &a, const Expr &b) {
  // As PlanExpr::print: a looser operand is wrapped; so is an equal one on
  // the right (left associative), and on either side of a comparison.
  auto wrap = [&](const Expr &e, bool strict) {
    bool paren = e.prec < precedence || (strict && e.prec == precedence);
    return paren ? "(" + e.text + ")" : e.text;
  };
  bool compareOp = precedence == kCompare;
  return Expr(wrap(a, compareOp) + op.str() + wrap(b, true), precedence);
}

Expr Expr::call(StringRef function, ArrayRef<Expr> operands) {
  std::string text = function.str() + "(";
  for (auto [i, e] : llvm::enumerate(operands))
    text += (i ? "," : "") + e.text;
  return Expr(text + ")", kTerm);
}

namespace mlir::moe::plan {

Expr operator+(const Expr &a, const Expr &b) {
  int64_t sum;
  if (a.value && b.value && !__builtin_add_overflow(*a.value, *b.value, &sum))
    return sum;
  if (b.value == 0)
    return a;
  if (a.value == 0)
    return b;
  Expr e = Expr::infix("+", kSum, a, b);
  if (a.lowerBound && b.lowerBound &&
      !__builtin_add_overflow(*a.lowerBound, *b.lowerBound, &sum))
    e.lowerBound = sum;
  if (a.upperBound && b.upperBound &&
      !__builtin_add_overflow(*a.upperBound, *b.upperBound, &sum))
    e.upperBound = sum;
  return e;
}

Expr operator-(const Expr &a, const Expr &b) {
  int64_t difference;
  if (a.value && b.value &&
      !__builtin_sub_overflow(*a.value, *b.value, &difference))
    return difference;
  if (b.value == 0)
    return a;
  return Expr::infix("-", kSum, a, b);
}

Expr operator*(const Expr &a, const Expr &b) {
  int64_t product;
  if (a.value && b.value &&
      !__builtin_mul_overflow(*a.value, *b.value, &product))
    return product;
  if (b.value == 1)
    return a;
  if (a.value == 1)
    return b;
  Expr e = Expr::infix("*", kProduct, a, b);
  // Bounds of non-negative factors multiply.
  if (a.lowerBound >= 0 && b.lowerBound >= 0) {
    if (!__builtin_mul_overflow(*a.lowerBound, *b.lowerBound, &product))
      e.lowerBound = product;
    if (a.upperBound && b.upperBound &&
        !__builtin_mul_overflow(*a.upperBound, *b.upperBound, &product))
      e.upperBound = product;
  }
  return e;
}

/// ceildiv or floordiv of `a` by `b`: folded for constants and a divisor
/// of 1; a positive constant divisor keeps a's lower bound.
Expr Expr::divide(StringRef function, const Expr &a, const Expr &b) {
  bool ceil = function == "ceildiv";
  auto apply = [&](int64_t x, int64_t y) {
    int64_t q = x / y, r = x % y;
    return q + (ceil && r > 0) - (!ceil && r < 0);
  };
  if (a.value && b.value && *b.value > 0)
    return apply(*a.value, *b.value);
  if (b.value == 1)
    return a;
  Expr e = Expr::call(function, {a, b});
  if (a.lowerBound && b.value && *b.value > 0)
    e.lowerBound = apply(*a.lowerBound, *b.value);
  if (a.upperBound && b.value && *b.value > 0)
    e.upperBound = apply(*a.upperBound, *b.value);
  return e;
}

Expr ceilDiv(const Expr &a, const Expr &b) {
  return Expr::divide("ceildiv", a, b);
}
Expr floorDiv(const Expr &a, const Expr &b) {
  return Expr::divide("floordiv", a, b);
}

/// min or max: the constants folded into one, written last; one operand
/// left is that operand.
Expr Expr::extremum(bool isMin, ArrayRef<Expr> operands) {
  SmallVector<Expr> kept;
  std::optional<int64_t> folded;
  for (const Expr &e : operands) {
    if (!e.constant()) {
      kept.push_back(e);
      continue;
    }
    int64_t v = *e.constant();
    folded = !folded ? v : isMin ? std::min(*folded, v) : std::max(*folded, v);
  }
  if (folded)
    kept.push_back(*folded);
  if (kept.size() == 1)
    return kept.front();
  Expr e = Expr::call(isMin ? "min" : "max", kept);
  // min is at least the least lower bound when every operand has one, and
  // at most any operand's upper bound; max the other way round.
  auto bound = [&](std::optional<int64_t> Expr::*field, bool all, bool least) {
    std::optional<int64_t> out;
    for (const Expr &k : kept) {
      if (!(k.*field)) {
        if (all)
          return std::optional<int64_t>();
        continue;
      }
      if (!out || (least ? *(k.*field) < *out : *(k.*field) > *out))
        out = k.*field;
    }
    return out;
  };
  e.lowerBound = bound(&Expr::lowerBound, isMin, isMin);
  e.upperBound = bound(&Expr::upperBound, !isMin, isMin);
  return e;
}

Expr min(ArrayRef<Expr> operands) { return Expr::extremum(true, operands); }
Expr max(ArrayRef<Expr> operands) { return Expr::extremum(false, operands); }

Expr compare(StringRef op, const Expr &a, const Expr &b) {
  auto decide = [&](int64_t x, int64_t y) -> int64_t {
    if (op == "<")
      return x < y;
    if (op == "<=")
      return x <= y;
    if (op == "==")
      return x == y;
    if (op == "!=")
      return x != y;
    if (op == ">=")
      return x >= y;
    return x > y;
  };
  if (a.value && b.value)
    return decide(*a.value, *b.value);
  // a's bounds may decide a comparison with a number.
  if (a.lowerBound && b.value) {
    if ((op == ">=" && *a.lowerBound >= *b.value) ||
        (op == ">" && *a.lowerBound > *b.value))
      return 1;
    if ((op == "<" && *a.lowerBound >= *b.value) ||
        (op == "<=" && *a.lowerBound > *b.value))
      return 0;
  }
  if (a.upperBound && b.value) {
    if ((op == "<=" && *a.upperBound <= *b.value) ||
        (op == "<" && *a.upperBound < *b.value))
      return 1;
    if ((op == ">" && *a.upperBound <= *b.value) ||
        (op == ">=" && *a.upperBound < *b.value))
      return 0;
  }
  Expr e = Expr::infix(op, kCompare, a, b);
  e.lowerBound = 0;
  e.upperBound = 1;
  return e;
}

Expr both(const Expr &a, const Expr &b) {
  if (a.value)
    return *a.value ? b : Expr(0);
  if (b.value)
    return *b.value ? a : Expr(0);
  Expr e = Expr::infix("&&", kAnd, a, b);
  e.lowerBound = 0;
  e.upperBound = 1;
  return e;
}

Expr either(const Expr &a, const Expr &b) {
  if (a.value)
    return *a.value ? Expr(1) : b;
  if (b.value)
    return *b.value ? Expr(1) : a;
  Expr e = Expr::infix("||", kOr, a, b);
  e.lowerBound = 0;
  e.upperBound = 1;
  return e;
}

} // namespace mlir::moe::plan

//===----------------------------------------------------------------------===//
// Steps and plans
//===----------------------------------------------------------------------===//

/// `a,b,...` of the expressions' texts.
static std::string joined(ArrayRef<Expr> list) {
  std::string text;
  for (auto [i, e] : llvm::enumerate(list))
    text += (i ? "," : "") + e.str();
  return text;
}

Step &Step::mem(StringRef name, ArrayRef<Expr> dims) {
  std::string buffer = rename ? rename(name) : name.str();
  params.push_back("mem:" + buffer + "[" + joined(dims) + "]");
  buffers.push_back(buffer);
  for (const Expr &e : dims)
    expressions.push_back(e.str());
  return *this;
}

Step &Step::i32(const Expr &value) {
  params.push_back("i32:" + value.str());
  buffers.push_back("");
  expressions.push_back(value.str());
  return *this;
}

Step &Step::i64(const Expr &value) {
  params.push_back("i64:" + value.str());
  buffers.push_back("");
  expressions.push_back(value.str());
  return *this;
}

Step &Step::tmap(StringRef name, StringRef dtype, ArrayRef<Expr> dims,
                 ArrayRef<Expr> strides, ArrayRef<Expr> box) {
  std::string buffer = rename ? rename(name) : name.str();
  params.push_back("tmap:" + buffer + ":" + dtype.str() + ":[" + joined(dims) +
                   "]:[" + joined(strides) + "]:[" + joined(box) + "]");
  buffers.push_back(buffer);
  for (ArrayRef<Expr> list : {dims, strides, box})
    for (const Expr &e : list)
      expressions.push_back(e.str());
  return *this;
}

Expr PlanBuilder::size(StringRef name, int64_t min, int64_t max) {
  sizes.push_back({name.str(), std::to_string(min), std::to_string(max)});
  return Expr::name(name, min, max);
}

Expr PlanBuilder::dim(StringRef name, int64_t extent, int64_t min,
                      int64_t max) {
  // -1 (a manifest key) or ShapedType::kDynamic: the caller's size.
  if (extent >= 0)
    return extent;
  return size(name, min, max);
}

void PlanBuilder::arg(StringRef name, StringRef dtype, Role role, int64_t align,
                      ArrayRef<Expr> dims) {
  args.push_back({name.str(), dtype.str(), role, align, joined(dims)});
}

void PlanBuilder::check(const Expr &condition, StringRef message) {
  if (condition.constant() && *condition.constant() != 0)
    return;
  if (uniqueChecks && llvm::any_of(checks, [&](const Check &check) {
        return check.expr == condition.str();
      }))
    return;
  checks.push_back({condition.str(), message.str()});
}

void PlanBuilder::work(StringRef name, const Expr &bytes, int64_t align) {
  slices.push_back({name.str(), bytes.str(), align});
}

Step &PlanBuilder::launch(int64_t kernel, const Expr &grid, const Expr &when) {
  steps.emplace_back();
  Step &step = steps.back();
  step.kernel = kernel;
  step.grid = grid;
  step.when = guard ? both(*guard, when) : when;
  return step;
}

/// Splits `text` at the commas outside parentheses.
static SmallVector<StringRef> splitTopLevel(StringRef text) {
  SmallVector<StringRef> parts;
  if (text.empty())
    return parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '(')
      ++depth;
    else if (text[i] == ')')
      --depth;
    else if (text[i] == ',' && depth == 0) {
      parts.push_back(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push_back(text.drop_front(start));
  return parts;
}

// Role follows the contract's roles (Contract.td), in order.
static_assert(std::size(::moe::contract::kPlanRoles) ==
                  size_t(Role::Donated) + 1,
              "Role and Contract.td's PlanRoles differ");

static StringRef roleName(Role role) {
  return ::moe::contract::kPlanRoles[size_t(role)];
}

FailureOr<DictionaryAttr>
PlanBuilder::build(Builder &b, Location loc,
                   function_ref<int64_t(StringRef part)> numKernels) const {
  auto internal = [&](const Twine &what) {
    return emitError(loc) << "internal error: the launch plan's " << what;
  };
  auto isName = [](StringRef name) {
    return !name.empty() && (llvm::isAlpha(name[0]) || name[0] == '_') &&
           llvm::all_of(name,
                        [](char c) { return llvm::isAlnum(c) || c == '_'; });
  };
  llvm::StringSet<> sizeNames, optional, buffers;
  for (const Size &s : sizes) {
    if (!isName(s.name) || s.name == "sms" || s.name == "resident" ||
        !sizeNames.insert(s.name).second)
      return internal("size '" + s.name + "' is not a new name");
  }
  for (const Arg &a : args) {
    if (!isName(a.name) || !buffers.insert(a.name).second)
      return internal("argument '" + a.name + "' is not a new name");
    if (a.role == Role::Opt)
      optional.insert(a.name);
    // The element types the contract declares (Contract.td).
    if (!llvm::any_of(::moe::contract::kPlanTypes,
                      [&](const auto &t) { return a.dtype == t.name; }) ||
        a.align < 1 || !llvm::isPowerOf2_64(a.align))
      return internal("argument '" + a.name + "' has dtype " + a.dtype +
                      ", align " + Twine(a.align));
  }
  for (const Work &w : slices)
    if (!isName(w.name) || !buffers.insert("@" + w.name).second ||
        w.align < 1 || !llvm::isPowerOf2_64(w.align))
      return internal("workspace slice '" + w.name + "' is malformed");

  // Every expression parses back to its own text and reads only sizes,
  // `sms`, and in a step `resident` and optional arguments' null().
  auto checkExpr = [&](StringRef text, StringRef where,
                       bool inStep) -> LogicalResult {
    ::moe::contract::PlanExpr parsed;
    std::string error;
    if (!::moe::contract::PlanExpr::parse(text, parsed, error))
      return internal(where + ": " + error);
    if (parsed.str() != text)
      return internal(where + ": '" + text + "' is not canonical ('" +
                      parsed.str() + "')");
    for (auto [i, name] : llvm::enumerate(parsed.names())) {
      bool known = parsed.isNullTest(i)
                       ? inStep && optional.contains(name)
                       : sizeNames.contains(name) || name == "sms" ||
                             (inStep && name == "resident");
      if (!known)
        return internal(where + ": '" + text + "' reads unknown name '" + name +
                        "'");
    }
    return success();
  };

  SmallVector<Attribute> sizeAttrs, argAttrs, checkAttrs, workAttrs, stepAttrs;
  for (const Size &s : sizes) {
    if (failed(checkExpr(s.min, "size " + s.name, false)) ||
        failed(checkExpr(s.max, "size " + s.name, false)))
      return failure();
    sizeAttrs.push_back(
        b.getDictionaryAttr({b.getNamedAttr("name", b.getStringAttr(s.name)),
                             b.getNamedAttr("min", b.getStringAttr(s.min)),
                             b.getNamedAttr("max", b.getStringAttr(s.max))}));
  }
  for (const Arg &a : args) {
    for (StringRef dim : splitTopLevel(a.dims))
      if (failed(checkExpr(dim, "argument " + a.name, false)))
        return failure();
    argAttrs.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("name", b.getStringAttr(a.name)),
         b.getNamedAttr("dtype", b.getStringAttr(a.dtype)),
         b.getNamedAttr("role", b.getStringAttr(roleName(a.role))),
         b.getNamedAttr("align", b.getI64IntegerAttr(a.align)),
         b.getNamedAttr("dims", b.getStringAttr(a.dims))}));
  }
  for (const Check &c : checks) {
    if (failed(checkExpr(c.expr, "check", false)))
      return failure();
    if (c.message.empty() ||
        llvm::any_of(c.message, [](char ch) { return ch == '\n'; }))
      return internal("check '" + c.expr + "' has no one-line message");
    checkAttrs.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("expr", b.getStringAttr(c.expr)),
         b.getNamedAttr("message", b.getStringAttr(c.message))}));
  }
  for (const Work &w : slices) {
    if (failed(checkExpr(w.bytes, "workspace slice " + w.name, false)))
      return failure();
    workAttrs.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("name", b.getStringAttr(w.name)),
         b.getNamedAttr("bytes", b.getStringAttr(w.bytes)),
         b.getNamedAttr("align", b.getI64IntegerAttr(w.align))}));
  }
  for (auto [i, step] : llvm::enumerate(steps)) {
    std::string where = "step " + std::to_string(i);
    int64_t kernels = numKernels(step.part);
    if (step.kernel < 0 || step.kernel >= kernels)
      return internal(where + " launches kernel " + Twine(step.kernel) +
                      " of " + Twine(kernels) + " of part '" + step.part + "'");
    if (failed(checkExpr(step.grid.str(), where + " grid", true)) ||
        failed(checkExpr(step.when.str(), where + " when", true)))
      return failure();
    for (StringRef text : step.expressions)
      if (failed(checkExpr(text, where + " parameters", true)))
        return failure();
    for (StringRef buffer : step.buffers)
      if (!buffer.empty() && !buffers.contains(buffer))
        return internal(where + " passes '" + buffer +
                        "', neither an argument nor a workspace slice");
    NamedAttrList stepAttr;
    if (!step.part.empty())
      stepAttr.set("part", b.getStringAttr(step.part));
    stepAttr.set("kernel", b.getI64IntegerAttr(step.kernel));
    stepAttr.set("grid", b.getStringAttr(step.grid.str()));
    stepAttr.set("when", b.getStringAttr(step.when.str()));
    stepAttr.set("params", b.getStringAttr(llvm::join(step.params, ";")));
    stepAttrs.push_back(stepAttr.getDictionary(b.getContext()));
  }
  return b.getDictionaryAttr(
      {b.getNamedAttr("sizes", b.getArrayAttr(sizeAttrs)),
       b.getNamedAttr("args", b.getArrayAttr(argAttrs)),
       b.getNamedAttr("checks", b.getArrayAttr(checkAttrs)),
       b.getNamedAttr("work", b.getArrayAttr(workAttrs)),
       b.getNamedAttr("steps", b.getArrayAttr(stepAttrs))});
}

FailureOr<SmallVector<gpu::GPUFuncOp>>
mlir::moe::plan::launchKernels(DictionaryAttr launch, Operation *kernelModule) {
  SmallVector<gpu::GPUFuncOp> kernels;
  auto forms = launch.getAs<ArrayAttr>("kernels");
  for (Attribute form : forms ? forms.getValue() : ArrayRef<Attribute>()) {
    auto dict = dyn_cast<DictionaryAttr>(form);
    auto ref = dict ? dict.getAs<SymbolRefAttr>("kernel") : SymbolRefAttr();
    auto func =
        ref ? dyn_cast_or_null<gpu::GPUFuncOp>(SymbolTable::lookupSymbolIn(
                  kernelModule, ref.getLeafReference()))
            : gpu::GPUFuncOp();
    if (!func)
      return failure();
    kernels.push_back(func);
  }
  return kernels;
}
