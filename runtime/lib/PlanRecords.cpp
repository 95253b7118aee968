//===- PlanRecords.cpp - parsing a launch plan's records
//-------------------===//
//
// The text side of a launch plan (docs/launch-plans.md): a bundle's size,
// arg, check, work and launch records, and a launch's parameter list, parsed
// into Plan. Every field comes from an untrusted bundle: names, types,
// roles, alignments, expressions and counts are checked here, names against
// the plan in checkPlanNames (Plan.cpp) once the entry is complete.
//
//===----------------------------------------------------------------------===//

#include "Plan.h"

namespace moe::runtime {

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
      } else if (param.type != PlanType::BF16 &&
                 planTypeBytes(param.type) != 1) {
        ok = false;
        why = "a tensor map of " + std::string(fields[1]) +
              " elements (the runtime encodes bf16 and 1-byte elements)";
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
    size.minText = size.min.str();
    size.maxText = size.max.str();
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
    if (!arity(5, "<name> <type> in|out|opt|donated align=<n> dims=<dims>") ||
        tooMany(plan.args.size(), kMaxPlanArgs, "arguments", error) ||
        !checkPlanName(fields[0], error))
      return false;
    if (!parsePlanType(fields[1], arg.type)) {
      error = "unknown type '" + std::string(fields[1]) + "'";
      return false;
    }
    if (!parsePlanRole(fields[2], arg.role)) {
      error = "role '" + std::string(fields[2]) +
              "' is not in, out, opt or donated";
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
    if (arg.dims.size() > kMaxPlanRank) {
      error = "an argument of " + std::to_string(arg.dims.size()) +
              " dims (at most " + std::to_string(kMaxPlanRank) + ")";
      return false;
    }
    for (size_t i = 0; i < arg.dims.size(); ++i)
      arg.dimsText += (i ? "," : "") + arg.dims[i].str();
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

} // namespace moe::runtime
