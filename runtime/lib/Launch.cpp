//===- Launch.cpp - running an entry by its launch plan -------------------===//
//
// moeLaunch, moeWorkspaceBytes and the signature queries of moe_runtime.h:
// Plan.cpp checks a call against the entry's plan and evaluates its
// launches; this file encodes their tensor maps and issues them.
//
//===----------------------------------------------------------------------===//

#include "Loaded.h"

#include <cstring>

using namespace moe::runtime;

namespace {

/// The C API's name of a plan element type.
moeDtype moeDtypeOf(PlanType type) {
  switch (type) {
  case PlanType::BF16:
    return MOE_DTYPE_BF16;
  case PlanType::F32:
    return MOE_DTYPE_F32;
  case PlanType::I32:
    return MOE_DTYPE_I32;
  case PlanType::I64:
    return MOE_DTYPE_I64;
  case PlanType::E4M3:
    return MOE_DTYPE_E4M3;
  case PlanType::E5M2:
    return MOE_DTYPE_E5M2;
  case PlanType::E8M0:
    return MOE_DTYPE_E8M0;
  }
  return MOE_DTYPE_F32;
}

} // namespace

extern "C" {

/// Runs an entry by its plan (docs/launch-plans.md): the call checked
/// without the driver, then the bundle loaded, the launches evaluated with
/// the real residency, tensor maps encoded, and launched.
MOE_API moeStatus moeLaunch(moeBundle *bundle, const char *entryName,
                            const moeLaunchArgs *args, void *stream) {
  static constexpr const char *kCaller = "moeLaunch";
  int entryIndex = -1;
  if (moeStatus status =
          findPlanEntry(bundle, kCaller, entryName, args, "args", &entryIndex))
    return status;
  const Entry &entry = bundle->data.entries[entryIndex];
  const char *name = entry.name.c_str();
  const Plan &plan = entry.plan;
  if (args->num_sizes != int32_t(plan.sizes.size()) ||
      args->num_args != int32_t(plan.args.size()))
    return invalidArgumentOf(kCaller, name,
                             "%d sizes and %d arguments given, the entry "
                             "takes %zu and %zu",
                             int(args->num_sizes), int(args->num_args),
                             plan.sizes.size(), plan.args.size());
  if ((plan.sizes.size() && !args->sizes) || (plan.args.size() && !args->args))
    return invalidArgumentOf(kCaller, name, "%s is NULL",
                             args->sizes ? "args" : "sizes");
  PlanCall call{args->sizes, args->args, args->workspace,
                args->workspace_bytes};
  CheckedCall checked;
  std::string error;
  if (!checkPlanCall(plan, call, checked, error))
    return invalidArgumentOf(kCaller, name, "%s", error.c_str());
  ContextState *state = nullptr;
  if (moeStatus status = ensureLoaded(bundle, kCaller, &state))
    return status;
  // A step's kernel: of this entry, or of the part it names (a layer's).
  auto owner = [&](int entry) { return entry < 0 ? entryIndex : entry; };
  std::vector<PreparedLaunch> launches;
  if (!planLaunches(
          plan, call, checked,
          [&](const PlanStep &step) {
            return state
                ->kernels[size_t(owner(step.entry))][size_t(step.kernel)]
                .resident;
          },
          launches, error))
    return invalidArgumentOf(kCaller, name, "%s", error.c_str());
  // Every tensor map before the first launch: a bad one launches nothing
  // (the reader admits bf16 and 1-byte elements only).
  for (PreparedLaunch &launch : launches)
    for (const TensorMapRequest &request : launch.tensorMaps) {
      cu::TensorMap map;
      const uint32_t unit[5] = {1, 1, 1, 1, 1};
      if (cu::Result result = state->driver->tensorMapEncodeTiled(
              &map,
              request.type == PlanType::BF16 ? cu::kTensorMapDataTypeBFloat16
                                             : cu::kTensorMapDataTypeUInt8,
              uint32_t(request.dims.size()),
              reinterpret_cast<void *>(request.address), request.dims.data(),
              request.strides.data(), request.box.data(), unit,
              cu::kTensorMapInterleaveNone, cu::kTensorMapSwizzle128B,
              cu::kTensorMapL2Promotion128B, cu::kTensorMapFloatOOBFillNone))
        return driverError(state->driver, kCaller,
                           "cuTensorMapEncodeTiled(a tensor map of kernel '" +
                               bundle->data.entries[size_t(owner(launch.entry))]
                                   .kernels[size_t(launch.kernel)]
                                   .symbol +
                               "' of entry '" + entry.name + "')",
                           result);
      std::memcpy(launch.bytes.data() + request.offset, &map, sizeof(map));
    }
  const bool pdl = pdlRequested();
  int issued = 0;
  for (PreparedLaunch &launch : launches) {
    std::vector<void *> params;
    for (size_t offset : launch.offsets)
      params.push_back(launch.bytes.data() + offset);
    if (moeStatus status =
            launchKernelOf(bundle, state, kCaller, owner(launch.entry),
                           launch.kernel, launch.gridX, params.data(), stream,
                           pdl, issued, int(launches.size())))
      return status;
    ++issued;
  }
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeWorkspaceBytes(const moeBundle *bundle,
                                    const char *entryName, const int64_t *sizes,
                                    int32_t num_sizes, uint64_t *bytes) {
  static constexpr const char *kCaller = "moeWorkspaceBytes";
  int entryIndex = -1;
  if (moeStatus status = findPlanEntry(bundle, kCaller, entryName, bytes,
                                       "bytes", &entryIndex))
    return status;
  const Entry &entry = bundle->data.entries[entryIndex];
  if (num_sizes != int32_t(entry.plan.sizes.size()))
    return invalidArgumentOf(kCaller, entry.name.c_str(),
                             "%d sizes given, the entry takes %zu",
                             int(num_sizes), entry.plan.sizes.size());
  if (num_sizes && !sizes)
    return invalidArgumentOf(kCaller, entry.name.c_str(), "sizes is NULL");
  std::string error;
  if (!planWorkspaceBytes(entry.plan, sizes, *bytes, error))
    return invalidArgumentOf(kCaller, entry.name.c_str(), "%s", error.c_str());
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeEntryGetSignature(const moeBundle *bundle,
                                       const char *entryName,
                                       moeSignature *out) {
  int index = -1;
  if (moeStatus status = findPlanEntry(bundle, "moeEntryGetSignature",
                                       entryName, out, "out", &index))
    return status;
  const Plan &plan = bundle->data.entries[size_t(index)].plan;
  out->num_sizes = int32_t(plan.sizes.size());
  out->num_args = int32_t(plan.args.size());
  out->num_checks = int32_t(plan.checks.size());
  out->num_slices = int32_t(plan.work.size());
  out->num_steps = int32_t(plan.steps.size());
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeEntryGetSize(const moeBundle *bundle,
                                  const char *entryName, int32_t index,
                                  moeSizeInfo *out) {
  static constexpr const char *kCaller = "moeEntryGetSize";
  int entry = -1;
  if (moeStatus status =
          findPlanEntry(bundle, kCaller, entryName, out, "out", &entry))
    return status;
  const Entry &e = bundle->data.entries[size_t(entry)];
  if (index < 0 || size_t(index) >= e.plan.sizes.size())
    return invalidArgumentOf(kCaller, e.name.c_str(),
                             "size %d of the %zu the entry has", int(index),
                             e.plan.sizes.size());
  const PlanSize &size = e.plan.sizes[size_t(index)];
  out->name = size.name.c_str();
  out->min = size.minText.c_str();
  out->max = size.maxText.c_str();
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeEntryGetArg(const moeBundle *bundle, const char *entryName,
                                 int32_t index, moeArgInfo *out) {
  static constexpr const char *kCaller = "moeEntryGetArg";
  int entry = -1;
  if (moeStatus status =
          findPlanEntry(bundle, kCaller, entryName, out, "out", &entry))
    return status;
  const Entry &e = bundle->data.entries[size_t(entry)];
  if (index < 0 || size_t(index) >= e.plan.args.size())
    return invalidArgumentOf(kCaller, e.name.c_str(),
                             "argument %d of the %zu the entry has", int(index),
                             e.plan.args.size());
  const PlanArg &arg = e.plan.args[size_t(index)];
  out->name = arg.name.c_str();
  out->dtype = int32_t(moeDtypeOf(arg.type));
  // PlanArg::Role is in moeArgRole's order (both Contract.td's).
  static_assert(int(PlanArg::Role::Donated) == MOE_ARG_DONATED &&
                int(PlanArg::Role::Optional) == MOE_ARG_OPTIONAL);
  out->role = int32_t(arg.role);
  out->align = arg.align;
  out->rank = int32_t(arg.dims.size());
  out->dims = arg.dimsText.c_str();
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeEntryArgShape(const moeBundle *bundle,
                                   const char *entryName, int32_t index,
                                   const int64_t *sizes, int32_t num_sizes,
                                   int64_t *dims) {
  static constexpr const char *kCaller = "moeEntryArgShape";
  int entry = -1;
  if (moeStatus status =
          findPlanEntry(bundle, kCaller, entryName, dims, "dims", &entry))
    return status;
  const Entry &e = bundle->data.entries[size_t(entry)];
  const Plan &plan = e.plan;
  if (index < 0 || size_t(index) >= plan.args.size())
    return invalidArgumentOf(kCaller, e.name.c_str(),
                             "argument %d of the %zu the entry has", int(index),
                             plan.args.size());
  if (num_sizes != int32_t(plan.sizes.size()))
    return invalidArgumentOf(kCaller, e.name.c_str(),
                             "%d sizes given, the entry takes %zu",
                             int(num_sizes), plan.sizes.size());
  if (num_sizes && !sizes)
    return invalidArgumentOf(kCaller, e.name.c_str(), "sizes is NULL");
  std::string error;
  if (!planArgShape(plan, size_t(index), sizes, dims, error))
    return invalidArgumentOf(kCaller, e.name.c_str(), "%s", error.c_str());
  return MOE_STATUS_SUCCESS;
}

} // extern "C"
