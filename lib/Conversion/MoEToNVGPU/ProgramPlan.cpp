//===- ProgramPlan.cpp - a function of moe ops as one entry ---------------===//
//
// addProgramPlan: the plan of a function marked `moe.program` (contract
// §3.13, docs/launch-plans.md). Each op's entry becomes a part: its steps
// run in the function's order, its sizes are the program's expressions, its
// arguments the function's arguments, its outputs or workspace slices (the
// values between ops), or a donated argument's buffer once the argument is
// dead (moe.donated: the backward's saved values). The program's sizes are
// those its arguments' dims name in the parts' plans (T, M); a dim two parts
// give different expressions for becomes a check on the call. A reshape of
// static shapes (tensor.expand_shape or collapse_shape: a shared expert's
// weights as one expert's) is a view: no step, its source's buffer under other
// dims.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"
#include "LaunchPlan.h"

#include "MoE/Dialect/MoEDialect.h"
#include "MoE/Target/Contract.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <set>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::plan;

namespace {
/// `text` is a bare name of the plan language (a size), not a number or
/// an expression.
bool isName(StringRef text) {
  return !text.empty() && (isalpha(text[0]) || text[0] == '_') &&
         llvm::all_of(text, [](char c) { return isalnum(c) || c == '_'; });
}

/// A reshape, which a program runs as a view of its source.
bool isView(Operation *op) {
  return isa_and_nonnull<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(op);
}

/// The value whose buffer `value` is: itself, or a view's source's.
Value rootOf(Value value) {
  while (isView(value.getDefiningOp()))
    value = value.getDefiningOp()->getOperand(0);
  return value;
}

struct ProgramBuilder {
  ProgramBuilder(func::FuncOp func, Operation *kernelModule, StringRef chip)
      : func(func), kernelModule(kernelModule), chip(chip) {}
  func::FuncOp func;
  Operation *kernelModule;
  StringRef chip;
  PlanBuilder plan;
  /// Each value's dims as the program's expressions, where known.
  DenseMap<Value, SmallVector<std::optional<Expr>>> dims;
  /// Each value's buffer: an argument's or output's name, or `@<slice>`
  /// (a view's is its root's: bufferOf).
  DenseMap<Value, std::string> buffers;
  std::string &bufferOf(Value value) { return buffers[rootOf(value)]; }
  /// The index of the last part that reads `value`, through views too.
  size_t lastUseOf(Value value, size_t index) {
    for (Operation *user : value.getUsers())
      index = isView(user) ? lastUseOf(user->getResult(0), index)
                           : std::max(index, indexOf.lookup(user));
    return index;
  }
  /// The largest alignment a part asks of each value.
  DenseMap<Value, int64_t> aligns;
  /// The workspace slices of the values between ops: a slice holds values
  /// whose lifetimes do not overlap (one is dead, its last reader done,
  /// before the next is written; each kernel waits for the one before it
  /// before touching memory, contract §3.6), and is as large as the largest.
  struct Slice {
    std::string name;
    SmallVector<Value> values;
    size_t lastUse = 0;
  };
  SmallVector<Slice> slices;
  /// The buffers of the donated arguments (moe.donated), which values
  /// reuse as they reuse a slice, where they fit (`placed`).
  struct Donated {
    BlockArgument arg;
    SmallVector<Value> placed;
    size_t lastUse = 0;
  };
  SmallVector<Donated> donated;
  /// Each op's index in the function.
  DenseMap<Operation *, size_t> indexOf;
  /// The program's size names.
  llvm::StringSet<> sizeNames;
  int64_t maxRows = INT64_MAX;

  /// Each op's entry: its keys, kernels, the arguments its own plan
  /// declares and the values they are (its operands, then its results).
  struct Part {
    NamedAttrList info;
    SmallVector<gpu::GPUFuncOp> kernels;
    SmallVector<ArgRecord> own;
    SmallVector<Value> values;
  };
  std::vector<Part> parts;
  /// Dims of values that some part's plan names by one size, as classes
  /// (union-find): a new size of the program is every argument dim of its
  /// class, so that the program has one M, not one per saved tensor.
  using Slot = std::pair<Value, unsigned>;
  DenseMap<Slot, Slot> parent;
  Slot find(Slot slot) {
    auto it = parent.find(slot);
    if (it == parent.end() || it->second == slot)
      return slot;
    return it->second = find(it->second);
  }

  InFlightDiagnostic refuse(Operation *op, const Twine &why) {
    return op->emitOpError("cannot be a step of the program @")
           << func.getSymName() << " (moe.program): " << why;
  }

  /// A new size of the program, named after the part's `name`, for the
  /// argument dim `slot`: every argument dim of its class is that size.
  Expr newSize(StringRef name, Slot slot) {
    std::string unique = name.str();
    for (int i = 2; sizeNames.contains(unique); ++i)
      unique = (name + Twine(i)).str();
    sizeNames.insert(unique);
    Expr size = plan.size(unique, 0, kUnbounded);
    Slot root = find(slot);
    for (BlockArgument arg : func.getBody().front().getArguments())
      for (auto [d, known] : llvm::enumerate(dims[arg]))
        if (!known && find({arg, unsigned(d)}) == root)
          known = size;
    return size;
  }

  /// The `moe.name` in `attrs`, else `fallback`.
  static std::string nameOf(DictionaryAttr attrs, const Twine &fallback) {
    if (auto name = attrs ? attrs.getAs<StringAttr>(kNameAttr) : StringAttr())
      return name.str();
    return fallback.str();
  }

  /// Whether `value` fits `arg`'s buffer for every value of the sizes: its
  /// dynamic dims are of the classes of `arg`'s and its static rest no more
  /// bytes.
  bool fits(Value value, Value arg) {
    auto bytesAndClasses = [&](Value v) {
      auto type = cast<RankedTensorType>(v.getType());
      int64_t bytes = (type.getElementTypeBitWidth() + 7) / 8;
      SmallVector<Slot> classes;
      for (auto [d, extent] : llvm::enumerate(type.getShape())) {
        if (ShapedType::isDynamic(extent))
          classes.push_back(find({v, unsigned(d)}));
        else
          bytes *= extent;
      }
      return std::make_pair(bytes, classes);
    };
    auto [valueBytes, valueClasses] = bytesAndClasses(value);
    auto [argBytes, argClasses] = bytesAndClasses(arg);
    return valueBytes <= argBytes &&
           std::is_permutation(valueClasses.begin(), valueClasses.end(),
                               argClasses.begin(), argClasses.end());
  }
  /// Whether a buffer whose latest value is `latest`, read last by op
  /// `lastUse`, is free for a result of op `index`: its value is dead, or
  /// read last by that op as the input the result may overwrite.
  bool freeFor(Value latest, size_t lastUse, size_t index, Value inPlace) {
    return lastUse < index ||
           (inPlace && lastUse == index && rootOf(inPlace) == latest);
  }

  LogicalResult run(OpBuilder &b);
  LogicalResult prepare(Operation *op);
  LogicalResult addPart(Operation *op, size_t index);
};

LogicalResult ProgramBuilder::run(OpBuilder &b) {
  plan.uniqueChecks = true;
  Block &body = func.getBody().front();
  // The arguments: inputs under their names; their static dims known.
  for (BlockArgument arg : body.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || dtypeOf(type.getElementType()).empty())
      return func.emitOpError("cannot be a program (moe.program): argument #")
             << arg.getArgNumber()
             << " is not a tensor of bf16, f32, i32 or i64";
    buffers[arg] = nameOf(func.getArgAttrDict(arg.getArgNumber()),
                          "arg" + Twine(arg.getArgNumber()));
    auto &d = dims[arg];
    for (int64_t extent : type.getShape())
      d.push_back(ShapedType::isDynamic(extent) ? std::optional<Expr>()
                                                : Expr(extent));
  }
  // The results: outputs under their names, but for arguments.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, returned] : llvm::enumerate(ret.getOperands())) {
    Value value = rootOf(returned);
    if (isa<BlockArgument>(value))
      continue;
    if (buffers.count(value))
      return func.emitOpError("cannot be a program (moe.program): it returns "
                              "one value twice (result #")
             << i << ")";
    buffers[value] = nameOf(func.getResultAttrDict(i), "result" + Twine(i));
  }
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator()) {
    if (!isView(&op)) {
      ops.push_back(&op);
      continue;
    }
    auto source = cast<RankedTensorType>(op.getOperand(0).getType());
    auto result = cast<RankedTensorType>(op.getResult(0).getType());
    if (!source.hasStaticShape() || !result.hasStaticShape())
      return refuse(&op, "a reshape is a view of its source only between "
                         "static shapes");
    for (int64_t extent : result.getShape())
      dims[op.getResult(0)].push_back(Expr(extent));
  }
  if (ops.empty())
    return func.emitOpError("cannot be a program (moe.program): it has no op");
  std::set<std::string> names;
  for (auto &[value, name] : buffers)
    if (!names.insert(name).second)
      return func.emitOpError("cannot be a program (moe.program): two of its "
                              "arguments and results are named '")
             << name << "' (moe.name)";
  for (auto [i, op] : llvm::enumerate(ops)) {
    indexOf[op] = i;
    if (failed(prepare(op)))
      return failure();
  }
  // The donated arguments, free once their last reader ran; not one the
  // function returns (its caller reads it after the call).
  llvm::SmallPtrSet<Value, 8> returned;
  for (Value value : ret.getOperands())
    returned.insert(rootOf(value));
  for (BlockArgument arg : body.getArguments())
    if (func.getArgAttr(arg.getArgNumber(), kDonatedAttr) &&
        !returned.contains(arg))
      donated.push_back({arg, {}, lastUseOf(arg, 0)});
  for (auto [i, op] : llvm::enumerate(ops))
    if (failed(addPart(op, i)))
      return failure();
  for (BlockArgument arg : body.getArguments())
    if (llvm::any_of(dims[arg], [](auto &d) { return !d.has_value(); }))
      return func.emitOpError("cannot be a program (moe.program): no step "
                              "reads argument #")
             << arg.getArgNumber() << " ('" << buffers[arg]
             << "'), so its shape is unknown";

  // The signature: the arguments, then the outputs in result order; a
  // donated argument whose buffer holds values is `donated`, aligned for
  // them too.
  auto declare = [&](Value value, Role role) {
    auto type = cast<RankedTensorType>(value.getType());
    SmallVector<Expr> shape;
    for (auto &d : dims[value])
      shape.push_back(*d);
    int64_t align = std::max<int64_t>(aligns.lookup(rootOf(value)),
                                      (type.getElementTypeBitWidth() + 7) / 8);
    for (const Donated &buffer : donated)
      if (buffer.arg == value && !buffer.placed.empty()) {
        role = Role::Donated;
        for (Value placed : buffer.placed)
          align = std::max(align, aligns.lookup(placed));
      }
    plan.arg(bufferOf(value), dtypeOf(type.getElementType()), role, align,
             shape);
  };
  for (BlockArgument arg : body.getArguments())
    declare(arg, Role::In);
  for (Value value : ret.getOperands())
    if (!isa<BlockArgument>(rootOf(value)))
      declare(value, Role::Out);
  // The values between ops: their slices, from a multiple of 256 bytes.
  for (const Slice &slice : slices) {
    SmallVector<Expr> sizes;
    for (Value value : slice.values) {
      auto type = cast<RankedTensorType>(value.getType());
      Expr bytes = (type.getElementTypeBitWidth() + 7) / 8;
      for (auto &d : dims[value])
        bytes = bytes * *d;
      if (llvm::none_of(sizes,
                        [&](const Expr &e) { return e.str() == bytes.str(); }))
        sizes.push_back(bytes);
    }
    plan.work(slice.name, max(sizes), 256);
  }
  FailureOr<DictionaryAttr> dict =
      plan.build(b, func.getLoc(), [&](StringRef part) -> int64_t {
        unsigned index;
        if (!part.consume_front("p") || part.getAsInteger(10, index) ||
            index >= parts.size())
          return 0;
        return int64_t(parts[index].kernels.size());
      });
  if (failed(dict))
    return failure();
  NamedAttrList info;
  info.set("abi", b.getStringAttr("program.v1"));
  info.set("max_rows", b.getI64IntegerAttr(maxRows));
  info.set("plan", *dict);
  info.set("parts", b.getI64IntegerAttr(ops.size()));
  func->setAttr(kLaunchAttr, info.getDictionary(b.getContext()));
  return success();
}

LogicalResult ProgramBuilder::prepare(Operation *op) {
  auto launch = op->getAttrOfType<DictionaryAttr>(kLaunchAttr);
  if (!launch)
    return refuse(op, op->hasAttr(kLaunchAttr)
                          ? "it is several entries (a fused op's parts)"
                      : op->hasAttr(kFusedIntoLaunchAttr)
                          ? "another op's kernel computes it"
                          : "it has no GPU kernel");
  if (isa<LayerOp>(op))
    return refuse(op, "a moe.layer is an entry of its own (layer.v1); write "
                      "its ops unfused");
  Part part;
  FailureOr<SmallVector<gpu::GPUFuncOp>> kernels =
      launchKernels(launch, kernelModule);
  if (failed(kernels))
    return op->emitOpError("internal error: its moe.launch names a kernel "
                           "the module does not have");
  part.kernels = *kernels;
  part.info = NamedAttrList(launch);
  if (auto rows = launch.getAs<IntegerAttr>("max_rows"))
    maxRows = std::min(maxRows, rows.getInt());
  // The entry's own arguments: the op's operands, then its results.
  PlanBuilder scratch;
  FailureOr<SmallVector<ArgRecord>> own = writeEntryPlan(
      op->getLoc(), part.info, part.kernels, chip, scratch, nullptr);
  if (failed(own))
    return failure();
  part.own = std::move(*own);
  size_t inputs = llvm::count_if(
      part.own, [](const ArgRecord &arg) { return arg.role != Role::Out; });
  if (inputs != op->getNumOperands() ||
      part.own.size() - inputs != op->getNumResults())
    return refuse(op, "its entry's arguments are not its operands and "
                      "results (" +
                          Twine(part.own.size()) + " arguments)");
  // Inputs are the operands in order, outputs the results in order (an
  // entry may declare an output before an input: a GEMM's out before its
  // bias); each must be what it says it is.
  unsigned nextIn = 0, nextOut = 0;
  for (const ArgRecord &arg : part.own) {
    Value value = arg.role == Role::Out ? op->getResult(nextOut++)
                                        : op->getOperand(nextIn++);
    auto type = cast<RankedTensorType>(value.getType());
    if (dtypeOf(type.getElementType()) != arg.dtype ||
        type.getRank() != int64_t(arg.dims.size()))
      return op->emitOpError("internal error: its entry's argument '")
             << arg.name << "' is not its "
             << (arg.role == Role::Out ? "result #" : "operand #")
             << (arg.role == Role::Out ? nextOut : nextIn) - 1;
    part.values.push_back(value);
  }
  // The dims this part names by one size are one class.
  std::map<std::string, Slot> first;
  for (auto [arg, value] : llvm::zip(part.own, part.values))
    for (auto [d, expr] : llvm::enumerate(arg.dims))
      if (isName(expr.str())) {
        Slot slot{value, unsigned(d)};
        auto [it, inserted] = first.try_emplace(expr.str(), slot);
        if (!inserted)
          parent[find(slot)] = find(it->second);
      }
  parts.push_back(std::move(part));
  return success();
}

LogicalResult ProgramBuilder::addPart(Operation *op, size_t index) {
  Part &entry = parts[index];
  ArrayRef<ArgRecord> own = entry.own;
  ArrayRef<Value> values = entry.values;
  // Its results are outputs, donated arguments' buffers where they fit, or
  // slices, named by the op and result.
  for (OpResult result : op->getResults()) {
    dims[result].assign(cast<RankedTensorType>(result.getType()).getRank(),
                        std::nullopt);
    if (buffers.count(result))
      continue;
    size_t lastUse = lastUseOf(result, index);
    // The input the entry may write this result over (ArgRecord::inPlaceOf),
    // unless the op reads its buffer through another operand too.
    Value inPlace;
    for (auto [arg, value] : llvm::zip(own, values))
      if (arg.role == Role::Out && value == Value(result) &&
          !arg.inPlaceOf.empty())
        for (auto [input, inputValue] : llvm::zip(own, values))
          if (input.name == arg.inPlaceOf)
            inPlace = inputValue;
    if (inPlace && llvm::any_of(op->getOperands(), [&](Value operand) {
          return operand != inPlace && rootOf(operand) == rootOf(inPlace);
        }))
      inPlace = Value();
    Donated *buffer = llvm::find_if(donated, [&](const Donated &d) {
      Value latest = d.placed.empty() ? Value(d.arg) : d.placed.back();
      return freeFor(latest, d.lastUse, index, inPlace) && fits(result, d.arg);
    });
    if (buffer != donated.end()) {
      buffer->placed.push_back(result);
      buffer->lastUse = lastUse;
      buffers[result] = buffers[buffer->arg];
      continue;
    }
    Slice *free = llvm::find_if(slices, [&](const Slice &slice) {
      return freeFor(rootOf(slice.values.back()), slice.lastUse, index,
                     inPlace);
    });
    if (free == slices.end()) {
      slices.push_back({("v" + Twine(slices.size())).str(), {}, 0});
      free = &slices.back();
    }
    free->values.push_back(result);
    free->lastUse = lastUse;
    buffers[result] = "@" + free->name;
  }

  // Its sizes: the dims of its arguments that name one, as the program
  // knows them, else a new size of the program (an argument's dim).
  PartScope scope;
  scope.part = ("p" + Twine(index)).str();
  scope.workPrefix = scope.part + "_";
  for (auto [arg, value] : llvm::zip(own, values)) {
    scope.buffers[arg.name] = bufferOf(value);
    for (auto [d, expr] : llvm::enumerate(arg.dims)) {
      if (!isName(expr.str()) || scope.sizes.count(expr.str()))
        continue;
      if (std::optional<Expr> &known = dims[value][d])
        scope.sizes.emplace(expr.str(), *known);
    }
  }
  for (auto [arg, value] : llvm::zip(own, values))
    for (auto [d, expr] : llvm::enumerate(arg.dims))
      if (isName(expr.str()) && !scope.sizes.count(expr.str()) &&
          isa<BlockArgument>(value))
        scope.sizes.emplace(expr.str(),
                            newSize(expr.str(), {value, unsigned(d)}));

  FailureOr<SmallVector<ArgRecord>> part = writeEntryPlan(
      op->getLoc(), entry.info, entry.kernels, chip, plan, &scope);
  if (failed(part))
    return failure();
  // Each dim: what the program knows must be what the part takes.
  for (auto [arg, value] : llvm::zip(*part, values)) {
    aligns[rootOf(value)] = std::max(aligns.lookup(rootOf(value)), arg.align);
    for (auto [d, expr] : llvm::enumerate(arg.dims)) {
      std::optional<Expr> &known = dims[value][d];
      if (!known) {
        known = expr;
        continue;
      }
      if (known->str() == expr.str())
        continue;
      Expr same = compare("==", *known, expr);
      if (same.constant() == 0)
        return refuse(op, "its '" + arg.name + "' has " + expr.str() +
                              " in dim " + Twine(d) +
                              ", where the program has " + known->str());
      plan.check(same,
                 ("step " + Twine(index) + " (" + op->getName().getStringRef() +
                  "): '" + bufferOf(value) + "' dim " + Twine(d) + " must be " +
                  expr.str())
                     .str());
    }
  }
  return success();
}
} // namespace

LogicalResult mlir::moe::plan::addProgramPlan(OpBuilder &b, func::FuncOp func,
                                              Operation *kernelModule,
                                              StringRef chip) {
  ProgramBuilder builder(func, kernelModule, chip);
  return builder.run(b);
}
