//===- ExtractDeviceCode.cpp - device code and its launch manifest -------===//

#include "MoE/Dialect/MoEDialect.h"
#include "MoE/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEEXTRACTDEVICECODE
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;

namespace {
struct MoEExtractDeviceCodePass
    : moe::impl::MoEExtractDeviceCodeBase<MoEExtractDeviceCodePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder b(&getContext());
    SmallVector<Attribute> entries;
    bool failedAny = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      unsigned index = 0;
      func.walk([&](Operation *op) {
        Attribute launch = op->getAttr(moe::kLaunchAttr);
        if (!launch)
          return;
        std::string name = func.getName().str();
        if (index > 0)
          name += "_" + std::to_string(index - 1);
        ++index;
        // A fused op launches in parts (an array), each an entry named
        // `<name>_<part>`.
        auto parts = dyn_cast<ArrayAttr>(launch);
        for (Attribute part : parts ? parts.getValue() : ArrayRef(launch)) {
          auto dict = dyn_cast<DictionaryAttr>(part);
          auto partName = dict ? dict.getAs<StringAttr>("part") : StringAttr();
          if (!dict || (parts && !partName)) {
            op->emitOpError("moe.launch must be a dictionary or an array of "
                            "dictionaries with a 'part' name");
            failedAny = true;
            return;
          }
          std::string entryName =
              parts ? name + "_" + partName.getValue().str() : name;
          FailureOr<DictionaryAttr> entry =
              describeEntry(b, op, entryName, dict);
          if (failed(entry)) {
            failedAny = true;
            return;
          }
          entries.push_back(*entry);
        }
      });
    }
    // Dropping the host code must not drop part of the computation: every
    // moe op left must have been compiled (carry moe.launch).
    module.walk([&](Operation *op) {
      if (isa<moe::MoEDialect>(op->getDialect()) &&
          !op->hasAttr(moe::kLaunchAttr)) {
        op->emitOpError("has no GPU kernel yet, and the bundle would "
                        "silently skip it; give the GPU pipeline only ops "
                        "that have kernels (moe.route, moe.permute, "
                        "moe.grouped_matmul, moe.expert_mlp, "
                        "moe.unpermute)");
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
