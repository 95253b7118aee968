//===- Plan.h - launch plans: parsed form and interpreter ---------*- C++
//-*-===//
//
// Internal. An entry's launch plan (docs/launch-plans.md): the sizes a call
// passes, its arguments, the checks on them, the workspace slices and the
// launch steps with their parameters. preparePlan() checks a call against
// the plan and turns it into launches (grids and parameter bytes, tensor
// maps to encode): the one generic host program that replaces the per-ABI
// code of Runtime.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_LIB_PLAN_H
#define MOE_RUNTIME_LIB_PLAN_H

#include "PlanExpr.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace moe::runtime {

using contract::PlanExpr;

/// Element types of plan arguments and tensor maps: Contract.td's
/// PlanTypes, in order.
enum class PlanType { BF16, F32, I32, I64, E4M3, E5M2, E8M0 };

/// "bf16", "f32", "i32", "i64", "e4m3", "e5m2" or "e8m0".
const char *planTypeName(PlanType type);
int64_t planTypeBytes(PlanType type);
bool parsePlanType(std::string_view text, PlanType &out);

struct PlanSize {
  std::string name;
  PlanExpr min, max;
  std::string minText, maxText; // canonical, for moeEntryGetSize
};

struct PlanArg {
  /// Contract.td's PlanRoles, in order, which is moeArgRole's (Donated: an
  /// input the call overwrites once read).
  enum class Role { In, Out, Optional, Donated };
  std::string name;
  PlanType type = PlanType::F32;
  Role role = Role::In;
  int64_t align = 1;
  std::vector<PlanExpr> dims;
  std::string dimsText; // canonical, comma-separated, for moeEntryGetArg
};

/// A role as the records spell it ("in", "out", "opt", "donated"); false
/// for another word.
bool parsePlanRole(std::string_view text, PlanArg::Role &out);

struct PlanCheck {
  PlanExpr condition;
  std::string message;
};

struct PlanSlice {
  std::string name;
  PlanExpr bytes;
  int64_t align = 16;
};

/// What a parameter points at: an argument, or a workspace slice.
struct PlanBuffer {
  bool workspace = false;
  int index = -1; // into Plan::args or Plan::work
};

struct PlanParam {
  enum class Kind { Memref, I32, I64, TensorMap };
  Kind kind = Kind::I32;
  PlanBuffer buffer;                  // Memref, TensorMap
  std::vector<PlanExpr> dims;         // Memref; TensorMap (innermost first)
  std::vector<PlanExpr> strides, box; // TensorMap: byte strides, box
  PlanType type = PlanType::BF16;     // TensorMap
  PlanExpr value;                     // I32, I64
};

struct PlanStep {
  /// The entry whose kernel it launches: -1 for the plan's own; a layer's
  /// steps name a part (`part=` on the record, resolved by the reader).
  int entry = -1;
  std::string part;
  int kernel = 0;
  PlanExpr grid, when;
  std::vector<PlanParam> params;
};

struct Plan {
  std::vector<PlanSize> sizes;
  std::vector<PlanArg> args;
  std::vector<PlanCheck> checks;
  std::vector<PlanSlice> work;
  std::vector<PlanStep> steps;

  int findArg(std::string_view name) const;
  int findSlice(std::string_view name) const;
};

/// Splits `text` at the commas outside parentheses and brackets.
std::vector<std::string_view> splitTopLevel(std::string_view text, char sep);

/// Parses a step's `params=` value against the plan's arguments and slices
/// (so a parameter naming neither is an error here, at open).
bool parsePlanParams(std::string_view text, const Plan &plan,
                     std::vector<PlanParam> &out, std::string &error);

/// Limits on what one entry's plan may hold.
inline constexpr size_t kMaxPlanSizes = 8;
inline constexpr size_t kMaxPlanArgs = 32;
inline constexpr size_t kMaxPlanChecks = 32;
inline constexpr size_t kMaxPlanSlices = 32;
inline constexpr size_t kMaxPlanSteps = 64;
inline constexpr size_t kMaxPlanParams = 32;
/// An argument's dims (MOE_MAX_RANK of moe_runtime.h).
inline constexpr size_t kMaxPlanRank = 8;

/// Whether `kind` is a plan record: size, arg, check, work or launch.
bool isPlanRecord(std::string_view kind);

/// Adds one plan record to `plan`: `kind` and the tokens after the entry
/// name (docs/launch-plans.md). Records refer only to what came before
/// (a launch's parameters to earlier arguments and slices). On failure
/// returns false with `error` saying what is wrong.
bool addPlanRecord(std::string_view kind,
                   const std::vector<std::string_view> &fields, Plan &plan,
                   std::string &error);

/// Checks that every expression of `plan` reads only what it may: the
/// sizes, `resident` (grids and when only), and null() of optional
/// arguments; and that each step's kernel is below `kernelsOf(step)`, the
/// kernels of the entry it launches from.
bool checkPlanNames(const Plan &plan,
                    const std::function<int(const PlanStep &)> &kernelsOf,
                    std::string &error);

/// A tensor map a launch needs: the launcher encodes it (into 64-byte
/// aligned storage, as the driver requires) and copies its 128 bytes to
/// `PreparedLaunch::bytes[offset]`.
struct TensorMapRequest {
  size_t offset = 0;
  uint64_t address = 0;
  PlanType type = PlanType::BF16;
  std::vector<uint64_t> dims, strides; // strides: dims.size() - 1 of them
  std::vector<uint32_t> box;
};

/// One launch of a call: its kernel and grid, and its kernel parameters as
/// bytes (kernel parameter i at offsets[i], 8- or 64-byte aligned: a driver
/// params array points at bytes.data() + offsets[i]; a memref descriptor is
/// 3 + 2 x rank parameters of 8 bytes, as MLIR's calling convention expands
/// it).
/// Kernel parameter bytes in 64-byte aligned storage: a tensor map
/// parameter must be 64-byte aligned in host memory too.
class ParamBytes {
public:
  void assign(size_t count, uint8_t value) {
    blocks.assign((count + 63) / 64, Block());
    if (!blocks.empty())
      std::memset(data(), value, blocks.size() * 64);
    bytes = count;
  }
  uint8_t *data() { return blocks.empty() ? nullptr : blocks[0].b; }
  const uint8_t *data() const { return blocks.empty() ? nullptr : blocks[0].b; }
  size_t size() const { return bytes; }

private:
  struct alignas(64) Block {
    uint8_t b[64];
  };
  std::vector<Block> blocks;
  size_t bytes = 0;
};

struct PreparedLaunch {
  int entry = -1; // PlanStep::entry
  int kernel = 0;
  int64_t gridX = 0;
  ParamBytes bytes;
  std::vector<size_t> offsets, sizes; // per kernel parameter
  std::vector<TensorMapRequest> tensorMaps;
};

/// A call: the sizes (in Plan::sizes order), the argument addresses (in
/// Plan::args order) and the workspace.
struct PlanCall {
  const int64_t *sizes = nullptr;
  const uint64_t *pointers = nullptr;
  uint64_t workspace = 0;
  uint64_t workspaceBytes = 0;
};

/// The bytes of the workspace the plan needs for `sizes` (0 without
/// slices); false with `error` when a size is out of range.
bool planWorkspaceBytes(const Plan &plan, const int64_t *sizes, uint64_t &bytes,
                        std::string &error);

/// The dims of argument `arg` for `sizes` (checked against their ranges)
/// into dims[0, rank); false with `error` otherwise.
bool planArgShape(const Plan &plan, size_t arg, const int64_t *sizes,
                  int64_t *dims, std::string &error);

/// What checkPlanCall found that the launches need: where each workspace
/// slice starts.
struct CheckedCall {
  std::vector<uint64_t> sliceOffsets;
};

/// Checks `call` against `plan` (sizes, checks, arguments, overlaps,
/// workspace) without evaluating a launch: false with `error` naming the
/// size, argument or check.
bool checkPlanCall(const Plan &plan, const PlanCall &call, CheckedCall &checked,
                   std::string &error);

/// Evaluates the launches of a call checkPlanCall accepted (grids with
/// `resident(step)`, parameter bytes, tensor maps); false with `error` when
/// one is out of range (nothing to launch).
bool planLaunches(const Plan &plan, const PlanCall &call,
                  const CheckedCall &checked,
                  const std::function<int64_t(const PlanStep &)> &resident,
                  std::vector<PreparedLaunch> &launches, std::string &error);

/// checkPlanCall, then planLaunches; `resident(step)` gives the work
/// takers of the step's kernel that fit on the device. On failure returns
/// false with `error` naming the size, argument or check (nothing to
/// launch).
bool preparePlan(const Plan &plan, const PlanCall &call,
                 const std::function<int64_t(const PlanStep &)> &resident,
                 std::vector<PreparedLaunch> &launches, std::string &error);

} // namespace moe::runtime

#endif // MOE_RUNTIME_LIB_PLAN_H
