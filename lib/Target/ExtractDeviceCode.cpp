//===- ExtractDeviceCode.cpp - device code and its launch manifest -------===//

#include "MoE/Dialect/MoEDialect.h"
#include "MoE/Target/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEEXTRACTDEVICECODE
#include "MoE/Target/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;

/// Whether a moe.launch (an array of part dictionaries) quantizes the fused
/// MLP's intermediate: a part named `intermediate`, or a `gate_up` part
/// whose output is FP8 (`out`) or its round trip (`round_trip`).
static bool recordsIntermediate(Attribute launch) {
  auto parts = dyn_cast_or_null<ArrayAttr>(launch);
  return parts && llvm::any_of(parts, [](Attribute part) {
           auto dict = dyn_cast<DictionaryAttr>(part);
           auto name = dict ? dict.getAs<StringAttr>("part") : StringAttr();
           return name && (name.getValue() == "intermediate" ||
                           (name.getValue() == "gate_up" &&
                            (dict.get("out") || dict.get("round_trip"))));
         });
}

namespace {
struct MoEExtractDeviceCodePass
    : moe::impl::MoEExtractDeviceCodeBase<MoEExtractDeviceCodePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder b(&getContext());
    entryOps.clear();
    SmallVector<Attribute> entries;
    bool failedAny = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      unsigned index = 0;
      // A program's ops are its parts `<name>.<i>`; its own entry follows.
      bool program = func->hasAttr(moe::kProgramAttr);
      func.walk<WalkOrder::PreOrder>([&](Operation *op) {
        Attribute launch = op->getAttr(moe::kLaunchAttr);
        if (!launch || op == func)
          return WalkResult::advance();
        std::string name = func.getName().str();
        if (program)
          name += "." + std::to_string(index);
        else if (index > 0)
          name += "_" + std::to_string(index - 1);
        ++index;
        if (auto layer = dyn_cast<moe::LayerOp>(op)) {
          if (failed(describeLayer(b, layer, name, entries)))
            failedAny = true;
          return WalkResult::skip();
        }
        if (failed(describeOp(b, op, name, launch, entries)))
          failedAny = true;
        return WalkResult::advance();
      });
      if (program && failed(describeProgram(b, func, entries)))
        failedAny = true;
    }
    // Dropping the host code must not drop part of the computation: every
    // op of a function is a compiled moe op, and the module holds nothing
    // else but functions and kernels.
    for (Operation &op : *module.getBody()) {
      if (isa<func::FuncOp, gpu::GPUModuleOp>(op))
        continue;
      op.emitOpError("is neither a function nor a gpu.module: the GPU "
                     "pipeline compiles the moe ops of the module's own "
                     "functions, and the bundle would silently drop it");
      failedAny = true;
    }
    // A function's first op without a kernel is named, with how many more.
    for (auto func : module.getOps<func::FuncOp>()) {
      bool program = func->hasAttr(moe::kProgramAttr);
      auto hostOnly = [&](Operation &op) {
        // A program's constants have kernels and its reshapes are views.
        if (program &&
            (op.hasAttr(moe::kLaunchAttr) ||
             isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(op)))
          return false;
        return !isa<moe::MoEDialect>(op.getDialect()) &&
               !isa<func::ReturnOp>(op);
      };
      auto ops = func.getFunctionBody().getOps();
      auto first = llvm::find_if(ops, hostOnly);
      if (first == ops.end())
        continue;
      first->emitOpError("has no GPU kernel: the GPU pipeline compiles moe "
                         "ops only, and the bundle would silently drop this "
                         "part of @")
          << func.getName()
          << " (ops without a kernel in all: " << llvm::count_if(ops, hostOnly)
          << "); compute it outside the compiled "
             "function, or as moe ops";
      failedAny = true;
    }
    module.walk([&](Operation *op) {
      if (isa<moe::MoEDialect>(op->getDialect()) && !isa<moe::YieldOp>(op) &&
          !op->hasAttr(moe::kLaunchAttr) &&
          !op->hasAttr(moe::kFusedIntoLaunchAttr)) {
        op->emitOpError(
            "has no GPU kernel yet, and the bundle would "
            "silently skip it; give the GPU pipeline only ops "
            "that have kernels (moe.route, moe.permute, "
            "moe.grouped_matmul, moe.grouped_dgrad, moe.grouped_wgrad, "
            "moe.swiglu, moe.swiglu_grad, moe.unpermute_grad, "
            "moe.route_grad, "
            "moe.expert_mlp, "
            "moe.unpermute, moe.layer, moe.quantize, moe.fake_quantize)");
        failedAny = true;
      }
      // A launch of an unpermute with a `shared` addend must say that its
      // kernel adds it, or the bundle would drop it.
      auto launch = op->getAttrOfType<DictionaryAttr>(moe::kLaunchAttr);
      if (auto combine = dyn_cast<moe::UnpermuteOp>(op);
          combine && combine.getShared() && launch &&
          !launch.getAs<BoolAttr>("shared")) {
        op->emitOpError("has a 'shared' addend (a shared expert's output) "
                        "that its GPU kernel does not add; the bundle would "
                        "silently drop the shared expert");
        failedAny = true;
      }
      // Kernels that keep the intermediate in bf16 compute another MLP than
      // one with an FP8 `intermediate`: its launch must say it handles it.
      if (auto mlp = dyn_cast<moe::ExpertMLPOp>(op);
          mlp && mlp.getIntermediateAttr() &&
          !recordsIntermediate(op->getAttr(moe::kLaunchAttr))) {
        op->emitOpError("has an FP8 'intermediate' that its GPU kernels do "
                        "not compute (its moe.launch has neither a part "
                        "'intermediate' nor a gate_up part with an FP8 "
                        "'out'); the bundle would run it with a bf16 "
                        "intermediate");
        failedAny = true;
      }
    });
    if (failedAny)
      return signalPassFailure();
    for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
      if (!isa<gpu::GPUModuleOp>(op))
        op.erase();
    module->setAttr(
        "moe.manifest",
        b.getDictionaryAttr(
            {b.getNamedAttr("version",
                            b.getI64IntegerAttr(moe::kRuntimeContractVersion)),
             b.getNamedAttr("entries", b.getArrayAttr(entries))}));
  }

  /// Appends the entries of `op` named `name`: one, or one per part of a
  /// fused op (`<name>_<part>`).
  LogicalResult describeOp(Builder &b, Operation *op, StringRef name,
                           Attribute launch, SmallVectorImpl<Attribute> &out) {
    auto parts = dyn_cast<ArrayAttr>(launch);
    for (Attribute part : parts ? parts.getValue() : ArrayRef(launch)) {
      auto dict = dyn_cast<DictionaryAttr>(part);
      auto partName = dict ? dict.getAs<StringAttr>("part") : StringAttr();
      if (!dict || (parts && !partName))
        return op->emitOpError("moe.launch must be a dictionary or an array "
                               "of dictionaries with a 'part' name");
      std::string entryName =
          parts ? (name + "_" + partName.getValue()).str() : name.str();
      FailureOr<DictionaryAttr> entry = describeEntry(b, op, entryName, dict);
      if (failed(entry) || failed(addEntry(op, *entry, out)))
        return failure();
    }
    return success();
  }

  /// The function of `op`, for messages: `@name`.
  static std::string functionOf(Operation *op) {
    auto func = op->getParentOfType<func::FuncOp>();
    return func ? ("@" + func.getSymName()).str() : std::string("?");
  }

  /// Appends `entry` (of `op`) to `out` when its name is one a bundle can
  /// hold and no earlier entry has: the runtime finds entries by name, so
  /// of two entries of one name one could never be called.
  LogicalResult addEntry(Operation *op, DictionaryAttr entry,
                         SmallVectorImpl<Attribute> &out) {
    StringRef name = entry.getAs<StringAttr>("name").getValue();
    auto bundleChar = [](char c) {
      return llvm::isAlnum(c) || c == '_' || c == '.' || c == '$';
    };
    if (name.empty() || name.size() > 255 || !llvm::all_of(name, bundleChar))
      return op->emitOpError()
             << "would get the runtime entry name '" << name << "' (from "
             << functionOf(op)
             << "), which a bundle cannot hold: names are 1-255 bytes of "
                "[A-Za-z0-9_.$]; rename the function";
    auto [it, inserted] = entryOps.try_emplace(name, op);
    if (!inserted) {
      Operation *other = it->second;
      InFlightDiagnostic diag =
          op->emitOpError()
          << "would get the runtime entry name '" << name << "' (from "
          << functionOf(op) << "), which the entry of '" << other->getName()
          << "' in " << functionOf(other)
          << " already has: an entry is named after its function, @f's "
             "first moe op 'f', its further ones 'f_0', 'f_1', ..., the parts "
             "of a fused op '<name>_<part>'; rename one of the functions";
      diag.attachNote(other->getLoc())
          << "the op whose entry is already named '" << name << "'";
      return diag;
    }
    out.push_back(entry);
    return success();
  }

  /// Every entry name given so far, and the op it was given to.
  llvm::StringMap<Operation *> entryOps;

  /// Appends the entries of the parts of `layer` (`<name>_route` unless the
  /// model routes, `<name>_permute`, with rows quantized by a kernel of their
  /// own
  /// `<name>_quantize`,
  /// `<name>_gate_up`, for an FP8 intermediate quantized by a kernel of its
  /// own `<name>_intermediate`,
  /// `<name>_down`, `<name>_unpermute`) and then the layer's own entry,
  /// which names them.
  LogicalResult describeLayer(Builder &b, moe::LayerOp layer, StringRef name,
                              SmallVectorImpl<Attribute> &out) {
    auto launch = layer->getAttrOfType<DictionaryAttr>(moe::kLaunchAttr);
    if (!launch)
      return layer.emitOpError("moe.launch of a layer must be a dictionary");
    NamedAttrList entry(launch);
    entry.set("name", b.getStringAttr(name));
    entry.set("op", b.getStringAttr(layer->getName().getStringRef()));
    entry.set("kernels", b.getArrayAttr({}));
    std::optional<moe::LayerChain> chain = moe::getLayerChain(layer);
    if (!chain)
      return layer.emitOpError("has no layer.v1 kernels: its body is not "
                               "the chain --moe-fuse-layer builds");
    // The parts' entries: `<name>_<role>`; the expert MLP's keep their part
    // names (gate_up, intermediate, down).
    SmallVector<std::pair<StringRef, Operation *>, 5> parts;
    if (chain->route)
      parts.push_back({"route", chain->route});
    parts.push_back({"permute", chain->permute});
    // Rows the gather quantizes (`out` of the permute) have no quantize
    // part.
    if (chain->rowsQuantize && chain->rowsQuantize->hasAttr(moe::kLaunchAttr))
      parts.push_back({"quantize", chain->rowsQuantize});
    if (chain->rowsRoundTrip && chain->rowsRoundTrip->hasAttr(moe::kLaunchAttr))
      parts.push_back({"quantize", chain->rowsRoundTrip});
    parts.append({{"", chain->mlp}, {"unpermute", chain->combine}});
    for (auto [role, op] : parts) {
      Attribute launch = op->getAttr(moe::kLaunchAttr);
      std::string partName = (name + (role.empty() ? "" : "_" + role)).str();
      if (!launch || failed(describeOp(b, op, partName, launch, out)))
        return launch ? failure()
                      : op->emitOpError("is a part of a moe.layer without "
                                        "GPU kernels");
      if (!role.empty()) {
        entry.set(role, b.getStringAttr(partName));
        continue;
      }
      for (Attribute part : cast<ArrayAttr>(launch)) {
        StringRef mlpPart =
            cast<DictionaryAttr>(part).getAs<StringAttr>("part").getValue();
        entry.set(mlpPart, b.getStringAttr(partName + "_" + mlpPart));
      }
    }
    return addEntry(layer, entry.getDictionary(&getContext()), out);
  }

  /// Appends the entry of the program `func` (program.v1): its plan, whose
  /// steps name their parts `p<i>`, the entries `<name>.<i>`.
  LogicalResult describeProgram(Builder &b, func::FuncOp func,
                                SmallVectorImpl<Attribute> &out) {
    auto launch = func->getAttrOfType<DictionaryAttr>(moe::kLaunchAttr);
    auto parts = launch ? launch.getAs<IntegerAttr>("parts") : IntegerAttr();
    if (!parts)
      return func.emitOpError("is a moe.program without the moe.launch of "
                              "its plan (run --convert-moe-to-nvgpu)");
    NamedAttrList entry(launch);
    entry.erase("parts");
    entry.set("name", func.getSymNameAttr());
    entry.set("op", b.getStringAttr(func->getName().getStringRef()));
    entry.set("kernels", b.getArrayAttr({}));
    for (int64_t i = 0; i < parts.getInt(); ++i)
      entry.set("p" + std::to_string(i),
                b.getStringAttr(func.getName() + "." + std::to_string(i)));
    // A stage of a split function says how its caller connects it
    // (contract §3.14): --moe-split-exchanges' attributes, as keys.
    for (auto [key, attr] : {std::pair{"stage_of", "moe.stage_of"},
                             {"stage", "moe.stage"},
                             {"exchange", "moe.exchange"},
                             {"ranks", "moe.exchange_ranks"},
                             {"exchange_args", "moe.exchange_args"},
                             {"exchange_results", "moe.exchange_results"},
                             {"function_args", "moe.function_args"},
                             {"function_results", "moe.function_results"}})
      if (Attribute value = func->getAttr(attr))
        entry.set(key, value);
    return addEntry(func, entry.getDictionary(&getContext()), out);
  }

  /// The manifest entry of `op`: its launch dictionary with each kernel
  /// reference replaced by what a launcher needs to know about the kernel.
  FailureOr<DictionaryAttr> describeEntry(Builder &b, Operation *op,
                                          StringRef name,
                                          DictionaryAttr launch) {
    NamedAttrList entry(launch);
    entry.erase("part");
    entry.set("name", b.getStringAttr(name));
    entry.set("op", b.getStringAttr(op->getName().getStringRef()));
    auto forms = dyn_cast_or_null<ArrayAttr>(launch.get("kernels"));
    if (!forms)
      return op->emitOpError("moe.launch has no 'kernels' array");
    SmallVector<Attribute> kernels;
    for (Attribute form : forms) {
      auto dict = dyn_cast<DictionaryAttr>(form);
      auto ref = dict ? dyn_cast_or_null<SymbolRefAttr>(dict.get("kernel"))
                      : SymbolRefAttr();
      auto func = ref ? dyn_cast_or_null<gpu::GPUFuncOp>(
                            SymbolTable::lookupSymbolIn(getOperation(), ref))
                      : gpu::GPUFuncOp();
      if (!func)
        return op->emitOpError("moe.launch names a kernel that is not a "
                               "gpu.func of this module: ")
               << form;
      NamedAttrList kernel(dict);
      kernel.erase("kernel");
      kernel.set("module", ref.getRootReference());
      kernel.set("name", func.getNameAttr());
      if (DenseI32ArrayAttr block = func.getKnownBlockSizeAttr())
        kernel.set("threads", b.getI64IntegerAttr(block[0]));
      // The kernel builders record the rest as moe.* attributes.
      for (NamedAttribute attr : func->getAttrs())
        if (attr.getName().strref().starts_with("moe."))
          kernel.set(attr.getName().strref().drop_front(4), attr.getValue());
      kernels.push_back(kernel.getDictionary(&getContext()));
    }
    entry.set("kernels", b.getArrayAttr(kernels));
    return entry.getDictionary(&getContext());
  }
};
} // namespace
