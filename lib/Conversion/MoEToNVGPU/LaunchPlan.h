//===- LaunchPlan.h - the host program of a moe.launch ----------*- C++ -*-===//
//
// The `plan` of a moe.launch (docs/launch-plans.md): the sizes a caller
// passes, the arguments, the checks, the workspace slices and the launch
// steps of an entry, as the runtime runs them (runtime/lib/Runtime.cpp,
// contract version 6). Expressions are built folded (constants combine)
// and every one is parsed with the runtime's own parser
// (runtime/contract/PlanExpr.h) before it is written: a text it rejects is
// an internal error, never a plan.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_CONVERSION_MOETONVGPU_LAUNCHPLAN_H
#define MOE_LIB_CONVERSION_MOETONVGPU_LAUNCHPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OperationSupport.h"

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace mlir::moe::plan {

/// An integer expression of a plan, in the canonical text of PlanExpr. A
/// constant stays a number through every operation on constants; `x + 0`,
/// `x * 1` and divisions by 1 vanish; a comparison that a size's lower
/// and upper bounds decide is that constant.
class Expr {
public:
  Expr(int64_t value); // NOLINT: numbers are expressions
  /// A size or runtime fact `name` (within [lowerBound, upperBound]).
  static Expr name(StringRef name, int64_t lowerBound = INT64_MIN,
                   int64_t upperBound = INT64_MAX);
  /// `null(<arg>)`: 1 when the optional argument `arg` is null.
  static Expr null(StringRef arg);

  std::optional<int64_t> constant() const { return value; }
  const std::string &str() const { return text; }

  friend Expr operator+(const Expr &a, const Expr &b);
  friend Expr operator-(const Expr &a, const Expr &b);
  friend Expr operator*(const Expr &a, const Expr &b);
  friend Expr ceilDiv(const Expr &a, const Expr &b);
  friend Expr floorDiv(const Expr &a, const Expr &b);
  friend Expr min(ArrayRef<Expr> operands);
  friend Expr max(ArrayRef<Expr> operands);
  friend Expr compare(StringRef op, const Expr &a, const Expr &b);
  friend Expr both(const Expr &a, const Expr &b);
  friend Expr either(const Expr &a, const Expr &b);

private:
  Expr(std::string text, int precedence)
      : text(std::move(text)), prec(precedence) {}
  /// `op`'s operands, parenthesised where the grammar needs it.
  static Expr infix(StringRef op, int precedence, const Expr &a, const Expr &b);
  static Expr call(StringRef function, ArrayRef<Expr> operands);
  static Expr divide(StringRef function, const Expr &a, const Expr &b);
  static Expr extremum(bool isMin, ArrayRef<Expr> operands);

  std::string text;
  int prec = 7; // PlanExpr's binding strength: 7 for terms
  std::optional<int64_t> value;
  // Values the expression is never below or above (where known).
  std::optional<int64_t> lowerBound, upperBound;
};

Expr ceilDiv(const Expr &a, const Expr &b);
Expr floorDiv(const Expr &a, const Expr &b);
Expr min(ArrayRef<Expr> operands);
Expr max(ArrayRef<Expr> operands);
/// `a op b` for op one of < <= == != >= >.
Expr compare(StringRef op, const Expr &a, const Expr &b);
Expr both(const Expr &a, const Expr &b);   // &&
Expr either(const Expr &a, const Expr &b); // ||
inline Expr min(const Expr &a, const Expr &b) { return min({a, b}); }
inline Expr max(const Expr &a, const Expr &b) { return max({a, b}); }
/// `a` is a multiple of `b`: a==floordiv(a,b)*b.
inline Expr multipleOf(const Expr &a, int64_t b) {
  if (b == 1)
    return 1;
  return compare("==", a, floorDiv(a, b) * b);
}

/// The largest int64: a size without another bound.
inline constexpr int64_t kUnbounded = INT64_MAX;

/// How an argument is used, in the order of the contract's roles: Donated is
/// an input the call overwrites once read (a program's saved value that a
/// later value reuses).
enum class Role { In, Out, Opt, Donated };

/// One launch: a kernel of the entry, its grid and condition, and its
/// parameters in kernel order.
class Step {
public:
  /// `mem:<buffer>[<dims>]`: a memref descriptor of row-major `dims`.
  Step &mem(StringRef buffer, ArrayRef<Expr> dims);
  /// `i32:<value>` and `i64:<value>`.
  Step &i32(const Expr &value);
  Step &i64(const Expr &value);
  /// `tmap:<buffer>:<dtype>:[<dims>]:[<strides>]:[<box>]`: a TMA
  /// descriptor, dims innermost first, byte strides of the outer dims.
  Step &tmap(StringRef buffer, StringRef dtype, ArrayRef<Expr> dims,
             ArrayRef<Expr> strides, ArrayRef<Expr> box);

  /// Inside a layer's plan: the part whose kernel it launches, and how
  /// the part's buffer names read in the layer.
  std::string part;
  std::function<std::string(StringRef)> rename;

private:
  friend class PlanBuilder;
  int64_t kernel = 0;
  Expr grid = 0, when = 1;
  SmallVector<std::string> params;
  SmallVector<std::string> buffers;     // each param's buffer ("" for scalars)
  SmallVector<std::string> expressions; // every expression, to check
};

/// Collects an entry's plan, then checks and writes it.
class PlanBuilder {
public:
  /// A dynamic size the caller passes, in call order; its expression.
  Expr size(StringRef name, int64_t min, int64_t max);
  /// A dimension of the IR: the number when static, else size(name, ...).
  Expr dim(StringRef name, int64_t extent, int64_t min, int64_t max);
  /// An argument, in call order; dtype one of bf16 f32 i32 i64 e4m3 e5m2
  /// e8m0.
  void arg(StringRef name, StringRef dtype, Role role, int64_t align,
           ArrayRef<Expr> dims);
  /// A condition the sizes must meet (dropped when constant true, and with
  /// uniqueChecks when an earlier check is the same condition).
  void check(const Expr &condition, StringRef message);
  /// A program's parts repeat each other's checks on shared sizes.
  bool uniqueChecks = false;
  /// A workspace slice of `bytes`, aligned to `align`, after the previous.
  void work(StringRef name, const Expr &bytes, int64_t align);
  /// A launch of kernel `kernel` on `grid` CTAs when `when` (and the guard,
  /// where set) is not 0.
  Step &launch(int64_t kernel, const Expr &grid, const Expr &when = 1);
  /// A condition every launch from here on also needs (a layer's choice
  /// between its parts' steps), or none.
  std::optional<Expr> guard;

  /// The plan dictionary {sizes, args, checks, work, steps}, after parsing
  /// every expression with PlanExpr and checking every name; an internal
  /// error at `loc` (and failure) otherwise. `numKernels(part)`: the
  /// kernels of the entry (part "") or of a layer's part.
  FailureOr<DictionaryAttr>
  build(Builder &b, Location loc,
        function_ref<int64_t(StringRef part)> numKernels) const;

private:
  struct Size {
    std::string name, min, max;
  };
  struct Arg {
    std::string name, dtype;
    Role role;
    int64_t align;
    std::string dims;
  };
  struct Check {
    std::string expr, message;
  };
  struct Work {
    std::string name, bytes;
    int64_t align;
  };
  SmallVector<Size> sizes;
  SmallVector<Arg> args;
  SmallVector<Check> checks;
  SmallVector<Work> slices;
  std::deque<Step> steps; // stable: launch() returns a reference
};

/// Adds `plan` to the moe.launch `info` of a route.v1, unpermute.v2,
/// permute.v2, quantize.v1, grouped_matmul.v3 or grouped_matmul_fp8.v1
/// entry, read from its keys (those the manifest carries) and from its
/// `kernels` (in the order of info's `kernels`); `chip` is the target.
/// Fails (with an error at `loc`) on an internal error.
LogicalResult addLaunchPlan(OpBuilder &b, Location loc, NamedAttrList &info,
                            ArrayRef<gpu::GPUFuncOp> kernels, StringRef chip);

/// `info` with its plan added (addLaunchPlan): the op's whole moe.launch.
FailureOr<DictionaryAttr> finishLaunch(OpBuilder &b, Location loc,
                                       NamedAttrList &info,
                                       ArrayRef<gpu::GPUFuncOp> kernels,
                                       StringRef chip = "");

/// The plan's name of an element type (bf16 f32 i32 i64 e4m3 e5m2 e8m0),
/// "" for another.
StringRef dtypeOf(Type type);

/// The kernels a moe.launch dictionary names (its `kernels` forms), looked
/// up in `kernelModule`; failure when one is not there.
FailureOr<SmallVector<gpu::GPUFuncOp>> launchKernels(DictionaryAttr launch,
                                                     Operation *kernelModule);

/// An argument as an entry's plan function declares it.
struct ArgRecord {
  std::string name, dtype;
  Role role;
  int64_t align;
  SmallVector<Expr> dims;
  /// An output that may be written over this input of the entry (same
  /// bytes): its kernels read each element of the input before they write
  /// the output's, and no other CTA reads it. Empty for the others.
  std::string inPlaceOf;
};

/// How an entry's plan reads as a part of a program's plan: its steps'
/// `part`, its sizes as the program's expressions, its argument names as
/// the program's buffers, and the prefix of its own workspace slices.
struct PartScope {
  std::string part;
  std::map<std::string, Expr> sizes;
  std::map<std::string, std::string> buffers;
  std::string workPrefix;
};

/// The arguments the plan of the moe.launch `info` (its kernels `kernels`)
/// declares, in order: written as the entry's own plan into `plan` when
/// `scope` is null, else as a part of `plan` through `scope` (the dims then
/// in the program's terms). Fails (with an error at `loc`) on an internal
/// error.
FailureOr<SmallVector<ArgRecord>>
writeEntryPlan(Location loc, const NamedAttrList &info,
               ArrayRef<gpu::GPUFuncOp> kernels, StringRef chip,
               PlanBuilder &plan, const PartScope *scope);

/// The plan of a function of moe ops marked `moe.program` (contract §3.13,
/// ProgramPlan.cpp): its ops' steps in order, each a part, on the
/// function's arguments (named by their `moe.name`), its results (outputs,
/// but for an argument returned as itself) and workspace slices for the
/// values between the ops. Sets the function's moe.launch; fails with an
/// error at the function or its op that cannot be a part.
LogicalResult addProgramPlan(OpBuilder &b, func::FuncOp func,
                             Operation *kernelModule, StringRef chip);

/// A part of a layer: its role (route, permute, quantize, gate_up,
/// intermediate, down, unpermute) and its moe.launch dictionary.
struct LayerPart {
  StringRef role;
  DictionaryAttr launch;
};

/// Adds `plan` to the moe.launch `info` of a layer.v1 or layer_fp8.v1
/// entry: its parts' steps (each with its `part`) on the layer's arguments
/// and workspace, laid out as the runtime's layerWorkspace does. `kernels`
/// holds the parts' kernels; `chip` is the target.
LogicalResult addLayerPlan(OpBuilder &b, Location loc, NamedAttrList &info,
                           ArrayRef<LayerPart> parts, Operation *kernels,
                           StringRef chip);

} // namespace mlir::moe::plan

#endif // MOE_LIB_CONVERSION_MOETONVGPU_LAUNCHPLAN_H
