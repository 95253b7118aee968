//===- Plan.cpp - launch plans: parsing parameters, the interpreter -------===//
//
// The generic host program of docs/launch-plans.md. Every value a bundle
// gives is checked before use: names are resolved at open
// (checkPlanNames), sizes, byte counts and grids are evaluated with
// overflow checks per call, and a failed check launches nothing.
//
//===----------------------------------------------------------------------===//

#include "Plan.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace moe::runtime {

namespace {

constexpr std::pair<const char *, PlanType> kTypes[] = {
    {"bf16", PlanType::BF16}, {"f32", PlanType::F32},
    {"i32", PlanType::I32},   {"i64", PlanType::I64},
    {"e4m3", PlanType::E4M3}, {"e5m2", PlanType::E5M2},
    {"e8m0", PlanType::E8M0}};

/// The largest grid.x a launch takes.
constexpr int64_t kMaxGridX = 2147483647;

std::string hex(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%" PRIx64, value);
  return text;
}

/// The values expressions read during one call.
struct Bindings {
  const Plan &plan;
  const int64_t *sizes;
  size_t knownSizes;        // sizes[0, knownSizes) are bound
  const uint64_t *pointers; // null: null() is not available
  int64_t resident = -1;    // -1: `resident` is not available

  bool operator()(const std::string &name, bool nullTest, int64_t &out) const {
    if (nullTest) {
      int arg = plan.findArg(name);
      if (!pointers || arg < 0)
        return false;
      out = pointers[arg] == 0;
      return true;
    }
    if (name == "resident") {
      out = resident;
      return resident >= 0;
    }
    for (size_t i = 0; i < knownSizes; ++i)
      if (plan.sizes[i].name == name) {
        out = sizes[i];
        return true;
      }
    return false;
  }
};

bool evaluate(const PlanExpr &expr, const Bindings &bindings, int64_t &out,
              std::string &error, const std::string &what) {
  if (expr.evaluate(bindings, out, error))
    return true;
  error = what + ": " + error;
  return false;
}

/// The sizes checked against their ranges (each range may read the sizes
/// before it).
bool checkSizes(const Plan &plan, const int64_t *sizes, std::string &error) {
  for (size_t i = 0; i < plan.sizes.size(); ++i) {
    Bindings bindings{plan, sizes, i, nullptr};
    const PlanSize &size = plan.sizes[i];
    int64_t min = 0, max = 0;
    if (!evaluate(size.min, bindings, min, error, size.name + "'s minimum") ||
        !evaluate(size.max, bindings, max, error, size.name + "'s maximum"))
      return false;
    if (sizes[i] < min || sizes[i] > max) {
      error = size.name + " = " + std::to_string(sizes[i]) + " is outside [" +
              std::to_string(min) + ", " + std::to_string(max) + "]";
      return false;
    }
  }
  return true;
}

/// Slice offsets from the workspace's start, in order, each aligned; and
/// the total.
bool layOutWorkspace(const Plan &plan, const Bindings &bindings,
                     std::vector<uint64_t> &offsets, uint64_t &total,
                     std::string &error) {
  offsets.clear();
  uint64_t end = 0;
  for (const PlanSlice &slice : plan.work) {
    int64_t bytes = 0;
    if (!evaluate(slice.bytes, bindings, bytes, error,
                  "workspace slice '" + slice.name + "'"))
      return false;
    if (bytes < 0) {
      error = "workspace slice '" + slice.name + "' has " +
              std::to_string(bytes) + " bytes";
      return false;
    }
    uint64_t align = uint64_t(slice.align);
    uint64_t start = (end + align - 1) / align * align;
    if (start < end || uint64_t(bytes) > UINT64_MAX - start) {
      error = "the workspace's size overflows";
      return false;
    }
    offsets.push_back(start);
    end = start + uint64_t(bytes);
  }
  total = end;
  return true;
}

/// Storage for a launch's parameters: 64-byte aligned (tensor maps).
struct Layout {
  std::vector<size_t> offsets, sizes;
  size_t size = 0;
  size_t add(size_t bytes, size_t align) {
    size = (size + align - 1) / align * align;
    offsets.push_back(size);
    sizes.push_back(bytes);
    size += bytes;
    return offsets.back();
  }
};

void put(std::vector<uint8_t> &bytes, size_t offset, const void *value,
         size_t size) {
  if (size) // a rank-0 memref has no sizes (and maybe no storage)
    std::memcpy(bytes.data() + offset, value, size);
}

} // namespace

const char *planTypeName(PlanType type) {
  for (const auto &[name, t] : kTypes)
    if (t == type)
      return name;
  return "?";
}

int64_t planTypeBytes(PlanType type) {
  switch (type) {
  case PlanType::BF16:
    return 2;
  case PlanType::F32:
  case PlanType::I32:
    return 4;
  case PlanType::I64:
    return 8;
  case PlanType::E4M3:
  case PlanType::E5M2:
  case PlanType::E8M0:
    return 1;
  }
  return 1;
}

bool parsePlanType(std::string_view text, PlanType &out) {
  for (const auto &[name, type] : kTypes)
    if (text == name) {
      out = type;
      return true;
    }
  return false;
}

int Plan::findArg(std::string_view name) const {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == name)
      return int(i);
  return -1;
}

int Plan::findSlice(std::string_view name) const {
  for (size_t i = 0; i < work.size(); ++i)
    if (work[i].name == name)
      return int(i);
  return -1;
}

std::vector<std::string_view> splitTopLevel(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '(' || c == '[')
      ++depth;
    else if (c == ')' || c == ']')
      --depth;
    else if (c == sep && depth == 0) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(text.substr(start));
  return parts;
}

namespace {

bool parseExprList(std::string_view text, std::vector<PlanExpr> &out,
                   std::string &error) {
  out.clear();
  if (text.empty())
    return true; // a rank-0 list
  for (std::string_view part : splitTopLevel(text, ',')) {
    PlanExpr expr;
    if (!PlanExpr::parse(part, expr, error))
      return false;
    out.push_back(std::move(expr));
  }
  return true;
}

/// "[a,b]" -> "a,b".
bool bracketed(std::string_view text, std::string_view &inner) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']')
    return false;
  inner = text.substr(1, text.size() - 2);
  return true;
}

bool parseBuffer(std::string_view name, const Plan &plan, PlanBuffer &out,
                 std::string &error) {
  bool workspace = !name.empty() && name.front() == '@';
  int index = workspace ? plan.findSlice(name.substr(1)) : plan.findArg(name);
  if (index < 0) {
    error = std::string(workspace ? "no workspace slice '" : "no argument '") +
            std::string(workspace ? name.substr(1) : name) + "'";
    return false;
  }
  out = PlanBuffer{workspace, index};
  return true;
}

} // namespace

bool parsePlanParams(std::string_view text, const Plan &plan,
                     std::vector<PlanParam> &out, std::string &error) {
  out.clear();
  if (text.empty())
    return true;
  for (std::string_view item : splitTopLevel(text, ';')) {
    PlanParam param;
    std::string why;
    size_t colon = item.find(':');
    std::string_view kind = item.substr(0, colon);
    std::string_view rest =
        colon == std::string_view::npos ? "" : item.substr(colon + 1);
    bool ok = colon != std::string_view::npos;
    if (ok && (kind == "i32" || kind == "i64")) {
      param.kind = kind == "i32" ? PlanParam::Kind::I32 : PlanParam::Kind::I64;
      ok = PlanExpr::parse(rest, param.value, why);
    } else if (ok && kind == "mem") {
      param.kind = PlanParam::Kind::Memref;
      size_t open = rest.find('[');
      std::string_view dims;
      ok = open != std::string_view::npos &&
           bracketed(rest.substr(open), dims) &&
           parseBuffer(rest.substr(0, open), plan, param.buffer, why) &&
           parseExprList(dims, param.dims, why);
      if (!ok && why.empty())
        why = "expected mem:<buffer>[<dims>]";
    } else if (ok && kind == "tmap") {
      param.kind = PlanParam::Kind::TensorMap;
      std::vector<std::string_view> fields = splitTopLevel(rest, ':');
      std::string_view dims, strides, box;
      ok = fields.size() == 5 && bracketed(fields[2], dims) &&
           bracketed(fields[3], strides) && bracketed(fields[4], box);
      if (!ok)
        why = "expected tmap:<buffer>:<type>:[<dims>]:[<strides>]:[<box>]";
      else if (!parsePlanType(fields[1], param.type)) {
        ok = false;
        why = "unknown type '" + std::string(fields[1]) + "'";
      } else {
        ok = parseBuffer(fields[0], plan, param.buffer, why) &&
             parseExprList(dims, param.dims, why) &&
             parseExprList(strides, param.strides, why) &&
             parseExprList(box, param.box, why);
        if (ok && (param.dims.empty() || param.dims.size() > 5 ||
                   param.strides.size() + 1 != param.dims.size() ||
                   param.box.size() != param.dims.size())) {
          ok = false;
          why = "a tensor map takes 1 to 5 dims, one box size per dim and a "
                "stride per dim but the first";
        }
      }
    } else {
      ok = false;
      why = "unknown parameter kind '" + std::string(kind) + "'";
    }
    if (!ok) {
      error = "parameter '" + std::string(item) + "': " + why;
      return false;
    }
    out.push_back(std::move(param));
  }
  return true;
}

bool isPlanRecord(std::string_view kind) {
  return kind == "size" || kind == "arg" || kind == "check" || kind == "work" ||
         kind == "launch";
}

namespace {

/// The value of `key=value` in `field`, or false.
bool keyValue(std::string_view field, std::string_view key,
              std::string_view &value) {
  if (field.size() <= key.size() || field.substr(0, key.size()) != key ||
      field[key.size()] != '=')
    return false;
  value = field.substr(key.size() + 1);
  return true;
}

bool parseKeyExpr(std::string_view field, std::string_view key, PlanExpr &out,
                  std::string &error) {
  std::string_view value;
  if (!keyValue(field, key, value)) {
    error = "expected " + std::string(key) + "=<expression>, got '" +
            std::string(field) + "'";
    return false;
  }
  return PlanExpr::parse(value, out, error);
}

/// A decimal in [min, max].
bool parseBounded(std::string_view text, int64_t min, int64_t max,
                  int64_t &out) {
  if (text.empty() || text.size() > 18)
    return false;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    value = value * 10 + (c - '0');
  }
  out = value;
  return value >= min && value <= max;
}

/// align=<power of two up to 256>.
bool parseAlign(std::string_view field, int64_t &out, std::string &error) {
  std::string_view value;
  if (!keyValue(field, "align", value) || !parseBounded(value, 1, 256, out) ||
      (out & (out - 1))) {
    error = "expected align=<a power of two up to 256>, got '" +
            std::string(field) + "'";
    return false;
  }
  return true;
}

/// A plan-wide name: like a bundle name, and unique in its kind.
bool checkPlanName(std::string_view name, std::string &error) {
  bool ok = !name.empty() && name.size() <= 64;
  for (char c : name)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9') || c == '_');
  if (!ok)
    error = "'" + std::string(name) +
            "' is not a name (1 to 64 letters, digits and '_')";
  return ok;
}

bool tooMany(size_t have, size_t limit, const char *what, std::string &error) {
  if (have < limit)
    return false;
  error = "more than " + std::to_string(limit) + " " + what;
  return true;
}

} // namespace

bool addPlanRecord(std::string_view kind,
                   const std::vector<std::string_view> &fields, Plan &plan,
                   std::string &error) {
  auto arity = [&](size_t n, const char *form) {
    if (fields.size() == n)
      return true;
    error = "expected '" + std::string(kind) + " <entry> " + form + "'";
    return false;
  };
  if (kind == "size") {
    PlanSize size;
    if (!arity(3, "<name> min=<expr> max=<expr>") ||
        tooMany(plan.sizes.size(), kMaxPlanSizes, "sizes", error) ||
        !checkPlanName(fields[0], error) ||
        !parseKeyExpr(fields[1], "min", size.min, error) ||
        !parseKeyExpr(fields[2], "max", size.max, error))
      return false;
    size.name = std::string(fields[0]);
    for (const PlanSize &other : plan.sizes)
      if (other.name == size.name) {
        error = "size '" + size.name + "' twice";
        return false;
      }
    if (size.name == "resident") {
      error = "'resident' is the runtime's, not a size";
      return false;
    }
    plan.sizes.push_back(std::move(size));
    return true;
  }
  if (kind == "arg") {
    PlanArg arg;
    std::string_view dims;
    if (!arity(5, "<name> <type> in|out|opt align=<n> dims=<dims>") ||
        tooMany(plan.args.size(), kMaxPlanArgs, "arguments", error) ||
        !checkPlanName(fields[0], error))
      return false;
    if (!parsePlanType(fields[1], arg.type)) {
      error = "unknown type '" + std::string(fields[1]) + "'";
      return false;
    }
    if (fields[2] == "in" || fields[2] == "out" || fields[2] == "opt")
      arg.role = fields[2] == "in"    ? PlanArg::Role::In
                 : fields[2] == "out" ? PlanArg::Role::Out
                                      : PlanArg::Role::Optional;
    else {
      error = "role '" + std::string(fields[2]) + "' is not in, out or opt";
      return false;
    }
    if (!parseAlign(fields[3], arg.align, error))
      return false;
    if (!keyValue(fields[4], "dims", dims) && fields[4] != "dims=") {
      error = "expected dims=<dims>, got '" + std::string(fields[4]) + "'";
      return false;
    }
    if (fields[4] != "dims=" && !parseExprList(dims, arg.dims, error))
      return false;
    arg.name = std::string(fields[0]);
    if (plan.findArg(arg.name) >= 0) {
      error = "argument '" + arg.name + "' twice";
      return false;
    }
    plan.args.push_back(std::move(arg));
    return true;
  }
  if (kind == "check") {
    PlanCheck check;
    if (fields.size() < 2) {
      error = "expected 'check <entry> <expr> <message>'";
      return false;
    }
    if (tooMany(plan.checks.size(), kMaxPlanChecks, "checks", error) ||
        !PlanExpr::parse(fields[0], check.condition, error))
      return false;
    for (size_t i = 1; i < fields.size(); ++i)
      check.message += (i > 1 ? " " : "") + std::string(fields[i]);
    plan.checks.push_back(std::move(check));
    return true;
  }
  if (kind == "work") {
    PlanSlice slice;
    if (!arity(3, "<name> bytes=<expr> align=<n>") ||
        tooMany(plan.work.size(), kMaxPlanSlices, "workspace slices", error) ||
        !checkPlanName(fields[0], error) ||
        !parseKeyExpr(fields[1], "bytes", slice.bytes, error) ||
        !parseAlign(fields[2], slice.align, error))
      return false;
    slice.name = std::string(fields[0]);
    if (plan.findSlice(slice.name) >= 0) {
      error = "workspace slice '" + slice.name + "' twice";
      return false;
    }
    plan.work.push_back(std::move(slice));
    return true;
  }
  if (kind == "launch") {
    PlanStep step;
    std::string_view params;
    int64_t kernel = 0;
    std::vector<std::string_view> rest = fields;
    std::string_view part;
    if (rest.size() == 5 && keyValue(rest[1], "part", part)) {
      if (part.empty() || part.size() > 255) {
        error = "part= names no entry";
        return false;
      }
      step.part = std::string(part);
      rest.erase(rest.begin() + 1);
    }
    if (rest.size() != 4) {
      error = "expected 'launch <entry> <kernel> [part=<entry>] grid=<expr> "
              "when=<expr> params=<params>'";
      return false;
    }
    if (tooMany(plan.steps.size(), kMaxPlanSteps, "launches", error))
      return false;
    if (!parseBounded(rest[0], 0, 1 << 20, kernel)) {
      error = "kernel '" + std::string(rest[0]) + "' is not an index";
      return false;
    }
    if (!parseKeyExpr(rest[1], "grid", step.grid, error) ||
        !parseKeyExpr(rest[2], "when", step.when, error))
      return false;
    if (!keyValue(rest[3], "params", params) && rest[3] != "params=") {
      error = "expected params=<params>, got '" + std::string(rest[3]) + "'";
      return false;
    }
    if (!parsePlanParams(rest[3] == "params=" ? "" : params, plan, step.params,
                         error))
      return false;
    if (tooMany(step.params.size(), kMaxPlanParams + 1, "parameters", error))
      return false;
    step.kernel = int(kernel);
    plan.steps.push_back(std::move(step));
    return true;
  }
  error = "unknown plan record '" + std::string(kind) + "'";
  return false;
}

bool checkPlanNames(const Plan &plan,
                    const std::function<int(const PlanStep &)> &kernelsOf,
                    std::string &error) {
  // What an expression may read: the sizes declared before it (all of them
  // after the sizes), `resident` where launches are evaluated, and null()
  // of an optional argument.
  auto check = [&](const PlanExpr &expr, size_t knownSizes, bool launch,
                   const std::string &where) {
    const std::vector<std::string> &names = expr.names();
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string &name = names[i];
      if (expr.isNullTest(i)) {
        int arg = plan.findArg(name);
        if (arg >= 0 && plan.args[arg].role == PlanArg::Role::Optional)
          continue;
        error = where + ": null(" + name + ") names no optional argument";
        return false;
      }
      bool known = launch && name == "resident";
      for (size_t s = 0; s < knownSizes && !known; ++s)
        known = plan.sizes[s].name == name;
      if (!known) {
        error = where + ": unknown name '" + name + "'";
        return false;
      }
    }
    return true;
  };
  const size_t all = plan.sizes.size();
  for (size_t i = 0; i < all; ++i)
    if (!check(plan.sizes[i].min, i, false, "size " + plan.sizes[i].name) ||
        !check(plan.sizes[i].max, i, false, "size " + plan.sizes[i].name))
      return false;
  for (const PlanCheck &c : plan.checks)
    if (!check(c.condition, all, false, "check '" + c.message + "'"))
      return false;
  for (const PlanArg &arg : plan.args)
    for (const PlanExpr &dim : arg.dims)
      if (!check(dim, all, false, "argument " + arg.name))
        return false;
  for (const PlanSlice &slice : plan.work)
    if (!check(slice.bytes, all, false, "workspace slice " + slice.name))
      return false;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const PlanStep &step = plan.steps[s];
    std::string where = "launch " + std::to_string(s);
    int numKernels = kernelsOf(step);
    if (step.kernel < 0 || step.kernel >= numKernels) {
      error = where + ": kernel " + std::to_string(step.kernel) +
              " is not one of the " + std::to_string(numKernels) + " of " +
              (step.part.empty() ? std::string("the entry")
                                 : "part '" + step.part + "'");
      return false;
    }
    if (!check(step.grid, all, true, where) ||
        !check(step.when, all, true, where))
      return false;
    for (const PlanParam &param : step.params) {
      for (const auto *list : {&param.dims, &param.strides, &param.box})
        for (const PlanExpr &e : *list)
          if (!check(e, all, true, where))
            return false;
      if ((param.kind == PlanParam::Kind::I32 ||
           param.kind == PlanParam::Kind::I64) &&
          !check(param.value, all, true, where))
        return false;
    }
  }
  return true;
}

bool planWorkspaceBytes(const Plan &plan, const int64_t *sizes, uint64_t &bytes,
                        std::string &error) {
  if (!checkSizes(plan, sizes, error))
    return false;
  Bindings bindings{plan, sizes, plan.sizes.size(), nullptr};
  std::vector<uint64_t> offsets;
  return layOutWorkspace(plan, bindings, offsets, bytes, error);
}

bool preparePlan(const Plan &plan, const PlanCall &call,
                 const std::function<int64_t(const PlanStep &)> &resident,
                 std::vector<PreparedLaunch> &launches, std::string &error) {
  launches.clear();
  if (!checkSizes(plan, call.sizes, error))
    return false;
  Bindings bindings{plan, call.sizes, plan.sizes.size(), call.pointers};

  for (const PlanCheck &c : plan.checks) {
    int64_t holds = 0;
    if (!evaluate(c.condition, bindings, holds, error, "check"))
      return false;
    if (!holds) {
      error = c.message;
      return false;
    }
  }

  // Arguments: bytes (no overflow), pointers (nulls first, then alignment).
  std::vector<uint64_t> argBytes(plan.args.size());
  for (size_t a = 0; a < plan.args.size(); ++a) {
    const PlanArg &arg = plan.args[a];
    int64_t bytes = planTypeBytes(arg.type);
    for (const PlanExpr &dim : arg.dims) {
      int64_t d = 0;
      if (!evaluate(dim, bindings, d, error, arg.name + "'s dims"))
        return false;
      if (d < 0) {
        error = arg.name + " has a negative dimension " + std::to_string(d);
        return false;
      }
      if (__builtin_mul_overflow(bytes, d, &bytes)) {
        error = "the bytes of " + arg.name + " overflow int64";
        return false;
      }
    }
    argBytes[a] = uint64_t(bytes);
  }
  for (size_t a = 0; a < plan.args.size(); ++a)
    if (!call.pointers[a] && plan.args[a].role != PlanArg::Role::Optional) {
      error = plan.args[a].name + " pointer is NULL";
      return false;
    }
  for (size_t a = 0; a < plan.args.size(); ++a)
    if (call.pointers[a] % uint64_t(plan.args[a].align)) {
      error = plan.args[a].name + " pointer " + hex(call.pointers[a]) +
              " is not " + std::to_string(plan.args[a].align) + "-byte aligned";
      return false;
    }

  // The workspace.
  std::vector<uint64_t> sliceOffsets;
  uint64_t workspaceBytes = 0;
  if (!layOutWorkspace(plan, bindings, sliceOffsets, workspaceBytes, error))
    return false;
  if (workspaceBytes) {
    if (!call.workspace) {
      error = "workspace pointer is NULL (the call needs " +
              std::to_string(workspaceBytes) + " bytes)";
      return false;
    }
    if (call.workspace % 16) {
      error = "workspace pointer " + hex(call.workspace) +
              " is not 16-byte aligned";
      return false;
    }
    if (call.workspaceBytes < workspaceBytes) {
      error = "workspace of " + std::to_string(call.workspaceBytes) +
              " bytes is smaller than the " + std::to_string(workspaceBytes) +
              " the call needs";
      return false;
    }
  }

  // No output overlaps another buffer of the call.
  auto overlaps = [](uint64_t a, uint64_t aBytes, uint64_t b, uint64_t bBytes) {
    return aBytes && bBytes && a < b + bBytes && b < a + aBytes;
  };
  for (size_t o = 0; o < plan.args.size(); ++o) {
    if (plan.args[o].role != PlanArg::Role::Out)
      continue;
    for (size_t a = 0; a < plan.args.size(); ++a)
      if (a != o && overlaps(call.pointers[o], argBytes[o], call.pointers[a],
                             argBytes[a])) {
        error = plan.args[o].name + " overlaps " + plan.args[a].name;
        return false;
      }
    if (overlaps(call.pointers[o], argBytes[o], call.workspace,
                 workspaceBytes)) {
      error = plan.args[o].name + " overlaps the workspace";
      return false;
    }
  }

  auto address = [&](const PlanBuffer &buffer) {
    return buffer.workspace ? call.workspace + sliceOffsets[buffer.index]
                            : call.pointers[buffer.index];
  };
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const PlanStep &step = plan.steps[s];
    const std::string where = "launch " + std::to_string(s);
    bindings.resident = resident(step);
    int64_t when = 0, grid = 0;
    if (!evaluate(step.when, bindings, when, error, where))
      return false;
    if (!when)
      continue;
    if (!evaluate(step.grid, bindings, grid, error, where + "'s grid"))
      return false;
    if (grid == 0)
      continue; // nothing to compute
    if (grid < 0 || grid > kMaxGridX) {
      error = where + ": grid.x = " + std::to_string(grid) +
              " is outside [1, 2^31 - 1]";
      return false;
    }
    PreparedLaunch launch;
    launch.entry = step.entry;
    launch.kernel = step.kernel;
    launch.gridX = grid;
    // Sizes first, then the bytes.
    Layout layout;
    std::vector<std::vector<int64_t>> values(step.params.size());
    // Each parameter's first kernel parameter (a memref has several).
    std::vector<size_t> first(step.params.size());
    for (size_t p = 0; p < step.params.size(); ++p) {
      const PlanParam &param = step.params[p];
      std::vector<int64_t> &v = values[p];
      auto all = [&](const std::vector<PlanExpr> &list) {
        for (const PlanExpr &e : list) {
          int64_t x = 0;
          if (!evaluate(e, bindings, x, error,
                        where + " parameter " + std::to_string(p)))
            return false;
          v.push_back(x);
        }
        return true;
      };
      switch (param.kind) {
      case PlanParam::Kind::I32:
      case PlanParam::Kind::I64: {
        int64_t x = 0;
        if (!evaluate(param.value, bindings, x, error,
                      where + " parameter " + std::to_string(p)))
          return false;
        if (param.kind == PlanParam::Kind::I32 &&
            (x < INT32_MIN || x > INT32_MAX)) {
          error = where + " parameter " + std::to_string(p) + " = " +
                  std::to_string(x) + " does not fit i32";
          return false;
        }
        v.push_back(x);
        first[p] = layout.offsets.size();
        layout.add(param.kind == PlanParam::Kind::I32 ? 4 : 8, 8);
        break;
      }
      case PlanParam::Kind::Memref: {
        if (!all(param.dims))
          return false;
        // The row-major strides after the sizes, checked for overflow.
        size_t rank = v.size();
        v.resize(2 * rank);
        int64_t stride = 1;
        for (size_t d = rank; d-- > 0;) {
          if (v[d] < 0 || (d + 1 < rank &&
                           __builtin_mul_overflow(stride, v[d + 1], &stride))) {
            error = where + " parameter " + std::to_string(p) +
                    ": a memref size is negative or its strides overflow";
            return false;
          }
          v[rank + d] = stride;
        }
        // Allocated and aligned pointer, offset, sizes, strides: each word
        // a kernel parameter of its own.
        first[p] = layout.offsets.size();
        for (size_t w = 0; w < 3 + 2 * rank; ++w)
          layout.add(8, 8);
        break;
      }
      case PlanParam::Kind::TensorMap: {
        if (!all(param.dims) || !all(param.strides) || !all(param.box))
          return false;
        // What cuTensorMapEncodeTiled takes: dims in [1, 2^32], byte
        // strides below 2^40, boxes of 1..256 elements.
        size_t rank = param.dims.size();
        for (size_t i = 0; i < v.size(); ++i) {
          int64_t x = v[i];
          bool ok = i < rank           ? x >= 1 && x <= (int64_t(1) << 32)
                    : i < 2 * rank - 1 ? x >= 0 && x < (int64_t(1) << 40)
                                       : x >= 1 && x <= 256;
          if (!ok) {
            error = where + " parameter " + std::to_string(p) +
                    ": tensor map " +
                    (i < rank           ? "dim"
                     : i < 2 * rank - 1 ? "stride"
                                        : "box") +
                    " " + std::to_string(x) + " is out of range";
            return false;
          }
        }
        first[p] = layout.offsets.size();
        layout.add(128, 64);
        break;
      }
      }
    }
    launch.bytes.assign(layout.size, 0);
    launch.offsets = layout.offsets;
    launch.sizes = layout.sizes;
    for (size_t p = 0; p < step.params.size(); ++p) {
      const PlanParam &param = step.params[p];
      const std::vector<int64_t> &v = values[p];
      size_t at = launch.offsets[first[p]];
      switch (param.kind) {
      case PlanParam::Kind::I32: {
        int32_t x = int32_t(v[0]);
        put(launch.bytes, at, &x, 4);
        break;
      }
      case PlanParam::Kind::I64:
        put(launch.bytes, at, &v[0], 8);
        break;
      case PlanParam::Kind::Memref: {
        uint64_t pointer = address(param.buffer), zero = 0;
        // Consecutive 8-byte parameters lie 8 bytes apart.
        put(launch.bytes, at, &pointer, 8);
        put(launch.bytes, at + 8, &pointer, 8);
        put(launch.bytes, at + 16, &zero, 8);
        put(launch.bytes, at + 24, v.data(), 8 * v.size());
        break;
      }
      case PlanParam::Kind::TensorMap: {
        TensorMapRequest request;
        request.offset = at;
        request.address = address(param.buffer);
        request.type = param.type;
        size_t rank = param.dims.size();
        for (size_t d = 0; d < rank; ++d)
          request.dims.push_back(uint64_t(v[d]));
        for (size_t d = 0; d + 1 < rank; ++d)
          request.strides.push_back(uint64_t(v[rank + d]));
        for (size_t d = 0; d < rank; ++d)
          request.box.push_back(uint32_t(v[2 * rank - 1 + d]));
        launch.tensorMaps.push_back(std::move(request));
        break;
      }
      }
    }
    launches.push_back(std::move(launch));
  }
  return true;
}

} // namespace moe::runtime
