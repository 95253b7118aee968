//===- Plan.cpp - launch plans: the interpreter ---------------------------===//
//
// The generic host program of docs/launch-plans.md. Every value a bundle
// gives is checked before use: names are resolved at open
// (checkPlanNames), sizes, byte counts and grids are evaluated with
// overflow checks per call, and a failed check launches nothing.
//
//===----------------------------------------------------------------------===//

#include "Plan.h"
#include "ContractTables.h"

#include <algorithm>
#include <iterator>

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace moe::runtime {

namespace {

// PlanType follows the contract's element types (Contract.td), in order.
constexpr auto &kTypes = moe::contract::kPlanTypes;
static_assert(std::size(kTypes) == size_t(PlanType::E8M0) + 1,
              "PlanType and Contract.td's PlanTypes differ");
// PlanArg::Role follows the contract's roles, in order.
constexpr auto &kRoles = moe::contract::kPlanRoles;
static_assert(std::size(kRoles) == size_t(PlanArg::Role::Donated) + 1,
              "PlanArg::Role and Contract.td's PlanRoles differ");

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

void put(ParamBytes &bytes, size_t offset, const void *value, size_t size) {
  if (size) // a rank-0 memref has no sizes (and maybe no storage)
    std::memcpy(bytes.data() + offset, value, size);
}

} // namespace

const char *planTypeName(PlanType type) { return kTypes[size_t(type)].name; }

int64_t planTypeBytes(PlanType type) { return kTypes[size_t(type)].bytes; }

bool parsePlanType(std::string_view text, PlanType &out) {
  for (size_t i = 0; i < std::size(kTypes); ++i)
    if (text == kTypes[i].name) {
      out = PlanType(i);
      return true;
    }
  return false;
}

bool parsePlanRole(std::string_view text, PlanArg::Role &out) {
  for (size_t i = 0; i < std::size(kRoles); ++i)
    if (text == kRoles[i]) {
      out = PlanArg::Role(i);
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

bool checkPlanCall(const Plan &plan, const PlanCall &call, CheckedCall &checked,
                   std::string &error) {
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
  // An empty tensor (T = 0, say) may have a NULL pointer: nothing reads it.
  for (size_t a = 0; a < plan.args.size(); ++a)
    if (!call.pointers[a] && plan.args[a].role != PlanArg::Role::Optional &&
        argBytes[a]) {
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
  std::vector<uint64_t> &sliceOffsets = checked.sliceOffsets;
  uint64_t workspaceBytes = 0;
  if (!layOutWorkspace(plan, bindings, sliceOffsets, workspaceBytes, error))
    return false;
  if (workspaceBytes) {
    if (!call.workspace) {
      error = "workspace pointer is NULL (the call needs " +
              std::to_string(workspaceBytes) + " bytes)";
      return false;
    }
    // Slices start at their alignment from the workspace's start.
    uint64_t align = 1;
    for (const PlanSlice &slice : plan.work)
      align = std::max(align, uint64_t(slice.align));
    if (call.workspace % align) {
      error = "workspace pointer " + hex(call.workspace) + " is not " +
              std::to_string(align) + "-byte aligned";
      return false;
    }
    if (call.workspaceBytes < workspaceBytes) {
      error = "workspace of " + std::to_string(call.workspaceBytes) +
              " bytes is smaller than the " + std::to_string(workspaceBytes) +
              " the call needs";
      return false;
    }
  }

  // No output or donated input (both written) overlaps another buffer of
  // the call; the workspace, which the kernels write too, overlaps no
  // argument.
  auto overlaps = [](uint64_t a, uint64_t aBytes, uint64_t b, uint64_t bBytes) {
    return aBytes && bBytes && a < b + bBytes && b < a + aBytes;
  };
  for (size_t o = 0; o < plan.args.size(); ++o) {
    if (plan.args[o].role != PlanArg::Role::Out &&
        plan.args[o].role != PlanArg::Role::Donated)
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
  for (size_t a = 0; a < plan.args.size(); ++a)
    if (overlaps(call.workspace, workspaceBytes, call.pointers[a],
                 argBytes[a])) {
      error = "the workspace overlaps " + plan.args[a].name +
              " (the kernels write the workspace)";
      return false;
    }

  return true;
}

bool planLaunches(const Plan &plan, const PlanCall &call,
                  const CheckedCall &checked,
                  const std::function<int64_t(const PlanStep &)> &resident,
                  std::vector<PreparedLaunch> &launches, std::string &error) {
  launches.clear();
  Bindings bindings{plan, call.sizes, plan.sizes.size(), call.pointers};
  auto address = [&](const PlanBuffer &buffer) {
    return buffer.workspace
               ? call.workspace + checked.sliceOffsets[buffer.index]
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

bool planArgShape(const Plan &plan, size_t arg, const int64_t *sizes,
                  int64_t *dims, std::string &error) {
  if (!checkSizes(plan, sizes, error))
    return false;
  Bindings bindings{plan, sizes, plan.sizes.size(), nullptr};
  const PlanArg &a = plan.args[arg];
  for (size_t d = 0; d < a.dims.size(); ++d)
    if (!evaluate(a.dims[d], bindings, dims[d], error, a.name + "'s dims"))
      return false;
  return true;
}

bool preparePlan(const Plan &plan, const PlanCall &call,
                 const std::function<int64_t(const PlanStep &)> &resident,
                 std::vector<PreparedLaunch> &launches, std::string &error) {
  launches.clear();
  CheckedCall checked;
  return checkPlanCall(plan, call, checked, error) &&
         planLaunches(plan, call, checked, resident, launches, error);
}

} // namespace moe::runtime
