//===- ExtractDeviceCode.cpp - device code and its launch manifest -------===//

#include "MoE/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"

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
    SmallVector<Attribute> kernels;
    for (auto gpuModule : module.getOps<gpu::GPUModuleOp>()) {
      for (auto func : gpuModule.getOps<gpu::GPUFuncOp>()) {
        if (!func.isKernel())
          continue;
        SmallVector<NamedAttribute> entry{
            b.getNamedAttr("module", b.getStringAttr(gpuModule.getName())),
            b.getNamedAttr("name", b.getStringAttr(func.getName()))};
        if (DenseI32ArrayAttr block = func.getKnownBlockSizeAttr())
          entry.push_back(b.getNamedAttr("threads", block));
        // The kernel builders record what else a launcher needs as moe.*.
        for (NamedAttribute attr : func->getAttrs())
          if (attr.getName().strref().starts_with("moe."))
            entry.push_back(b.getNamedAttr(
                attr.getName().strref().drop_front(4), attr.getValue()));
        kernels.push_back(b.getDictionaryAttr(entry));
      }
    }
    for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
      if (!isa<gpu::GPUModuleOp>(op))
        op.erase();
    module->setAttr("moe.manifest",
                    b.getDictionaryAttr(
                        {b.getNamedAttr("version", b.getI64IntegerAttr(0)),
                         b.getNamedAttr("kernels", b.getArrayAttr(kernels))}));
  }
};
} // namespace
