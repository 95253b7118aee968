//===- EntryPlanSupport.h - what the plan functions share -------*- C++ -*-===//
//
// The plan functions of EntryPlans.cpp (the forward ABIs), BackwardPlans.cpp
// (the backward's ops) and LayerPlan.cpp (a layer's composed plan) read an
// entry's keys through EntryKeys and write through Scope: an entry's own
// plan, or a part's steps inside a layer's or a program's plan.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_CONVERSION_MOETONVGPU_ENTRYPLANSUPPORT_H
#define MOE_LIB_CONVERSION_MOETONVGPU_ENTRYPLANSUPPORT_H

#include "LaunchPlan.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <map>
#include <optional>
#include <string>

namespace mlir::moe::plan::detail {

/// The runtime's constants (runtime/lib/Bundle.h).
constexpr int64_t kMaxRows = 2147483647;       // 2^31 - 1
constexpr int64_t kMaxSimpleGrid = 65535;      // route, permute
constexpr int64_t kMaxUnpermuteGrid = 1048576; // 2^20
constexpr int64_t kMaxQuantizeGrid = 65535;
constexpr int64_t kGatherRowsPerCTA = 4;
constexpr int64_t kQuantizeElementsPerThread = 32;
constexpr int64_t kFp8BlockSize = 128;
constexpr int64_t kMxBlockSize = 32;
constexpr int64_t kTmaStrideLimit = int64_t(1) << 40;

/// Reads the keys of a moe.launch dictionary and its kernels.
struct EntryKeys {
  const NamedAttrList &info;
  ArrayRef<gpu::GPUFuncOp> kernels;

  int64_t integer(StringRef key) const {
    if (auto attr = dyn_cast_or_null<IntegerAttr>(info.get(key)))
      return attr.getInt();
    return 0;
  }
  bool flag(StringRef key) const {
    auto attr = dyn_cast_or_null<BoolAttr>(info.get(key));
    return attr && attr.getValue();
  }
  StringRef string(StringRef key) const {
    auto attr = dyn_cast_or_null<StringAttr>(info.get(key));
    return attr ? attr.getValue() : "";
  }
  Type type(StringRef key) const {
    auto attr = dyn_cast_or_null<TypeAttr>(info.get(key));
    return attr ? attr.getValue() : Type();
  }
  /// The block size kernel `i` is launched with.
  int64_t threads(size_t i) const {
    gpu::GPUFuncOp kernel = kernels[i];
    DenseI32ArrayAttr block = kernel.getKnownBlockSizeAttr();
    return block ? block[0] : 0;
  }
  /// Key `key` of the form (the `kernels` dictionary) of kernel `i`.
  int64_t formInteger(size_t i, StringRef key) const {
    auto forms = dyn_cast_or_null<ArrayAttr>(info.get("kernels"));
    auto form = forms ? dyn_cast<DictionaryAttr>(forms[i]) : DictionaryAttr();
    auto attr = form ? form.getAs<IntegerAttr>(key) : IntegerAttr();
    return attr ? attr.getInt() : 0;
  }
};

inline int64_t bytesOf(Type type) {
  return type ? (type.getIntOrFloatBitWidth() + 7) / 8 : 0;
}

/// Where a plan function writes: an entry's own plan, or, inside a layer's
/// or a program's plan, a part's steps (its sizes given as the layer's
/// expressions, its arguments bound to the layer's arguments and workspace
/// slices, its own checks made on those, as moeLayer validates each step as
/// its own call).
struct Scope {
  PlanBuilder &p;
  std::string part; // "" for an entry's own plan
  std::map<std::string, Expr> sizes;
  std::map<std::string, std::string> buffers;
  /// Inside a routed layer: T, which no expert's rows exceed.
  std::optional<Expr> maxExpertRows;
  /// Inside a program: the prefix of the part's own workspace slices in the
  /// program's workspace (a layer lays out its parts' itself).
  std::string workPrefix;
  /// Where given: every argument the plan function declares.
  SmallVectorImpl<ArgRecord> *declared = nullptr;

  bool inLayer() const { return !part.empty(); }
  /// A part's size as the layer gives it (an unknown name, which build()
  /// reports, when it does not).
  Expr given(StringRef name) const {
    auto it = sizes.find(name.str());
    return it == sizes.end() ? Expr::name(name) : it->second;
  }
  std::string message(const Twine &text) const {
    return inLayer() ? (part + " step: " + text).str() : text.str();
  }
  Expr size(StringRef name, int64_t min, int64_t max) {
    if (!inLayer())
      return p.size(name, min, max);
    Expr value = given(name);
    p.check(compare(">=", value, min),
            message(name + " must be at least " + Twine(min)));
    if (max != kUnbounded)
      p.check(compare("<=", value, max),
              message(name + " must be at most " + Twine(max)));
    return value;
  }
  Expr dim(StringRef name, int64_t extent, int64_t min, int64_t max) {
    if (extent < 0)
      return size(name, min, max);
    // A program gives a part only the sizes its arguments' dims name.
    if (inLayer() && sizes.count(name.str()))
      p.check(compare("==", given(name), extent),
              message(name + " must be the part's " + Twine(extent)));
    return extent;
  }
  void arg(StringRef name, StringRef dtype, Role role, int64_t align,
           ArrayRef<Expr> dims) {
    if (declared)
      declared->push_back(
          {name.str(), dtype.str(), role, align, SmallVector<Expr>(dims), {}});
    if (!inLayer())
      p.arg(name, dtype, role, align, dims);
  }
  /// Output `out` may be written over input `in` (ArgRecord::inPlaceOf).
  void inPlace(StringRef out, StringRef in) {
    if (declared)
      for (ArgRecord &arg : *declared)
        if (arg.name == out)
          arg.inPlaceOf = in.str();
  }
  void check(const Expr &condition, const Twine &text) {
    p.check(condition, message(text));
  }
  void work(StringRef name, const Expr &bytes, int64_t align) {
    if (!inLayer())
      p.work(name, bytes, align);
    else if (!workPrefix.empty()) {
      p.work(workPrefix + name.str(), bytes, align);
      buffers["@" + name.str()] = "@" + workPrefix + name.str();
    }
  }
  Step &launch(int64_t kernel, const Expr &grid, const Expr &when = 1) {
    Step &step = p.launch(kernel, grid, when);
    if (inLayer()) {
      step.part = part;
      // An unbound name stays unknown: build() reports it.
      step.rename = [buffers = buffers](StringRef name) {
        auto it = buffers.find(name.str());
        return it == buffers.end() ? ("?" + name).str() : it->second;
      };
    }
    return step;
  }
};

/// The planned.v1 and grouped_wgrad.v1 plans of the backward's ops
/// (BackwardPlans.cpp).
void wgradPlan(const EntryKeys &e, Scope &p);
/// moe.swiglu_grad and moe.swiglu.
void swigluPlan(const EntryKeys &e, Scope &p);
void unpermuteGradPlan(const EntryKeys &e, Scope &p);
void routeGradPlan(const EntryKeys &e, Scope &p);
void constantPlan(const EntryKeys &e, Scope &p);
/// moe.decode_experts, a bf16 layer's decode part (LayerPlan.cpp).
void decodePlan(const EntryKeys &e, Scope &p);

/// The plan of the entry `keys` into `scope`, by its abi (EntryPlans.cpp);
/// an internal error at `loc` for an abi without one.
LogicalResult writeSteps(Location loc, const EntryKeys &keys, Scope &scope,
                         StringRef chip);

} // namespace mlir::moe::plan::detail

#endif // MOE_LIB_CONVERSION_MOETONVGPU_ENTRYPLANSUPPORT_H
