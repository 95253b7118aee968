//===- FinalizeKernelABI.cpp - by-value TMA descriptors ------------------===//

#include "MoE/Conversion/Passes.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFINALIZEKERNELABI
#include "MoE/Conversion/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;

/// Bytes of a `CUtensorMap` and the alignment the driver requires.
static constexpr int64_t kTensorMapBytes = 128, kTensorMapAlign = 64;

namespace {
struct MoEFinalizeKernelABIPass
    : moe::impl::MoEFinalizeKernelABIBase<MoEFinalizeKernelABIPass> {
  void runOnOperation() override {
    Builder b(&getContext());
    auto descriptorType = LLVM::LLVMArrayType::get(
        IntegerType::get(&getContext(), 8), kTensorMapBytes);
    WalkResult result = getOperation().walk([&](LLVM::LLVMFuncOp func) {
      auto args =
          func->getAttrOfType<DenseI64ArrayAttr>(moe::kTensorMapArgsAttr);
      if (!args)
        return WalkResult::advance();
      for (int64_t index : args.asArrayRef()) {
        // Only parameters before any memref keep their index through the
        // memref expansion of convert-gpu-to-nvvm.
        if (index < 0 || index >= func.getNumArguments() ||
            !isa<LLVM::LLVMPointerType>(func.getArgument(index).getType())) {
          func.emitOpError("moe.tensor_map_args names parameter #")
              << index << ", which is not a pointer of the lowered kernel";
          return WalkResult::interrupt();
        }
        func.setArgAttr(index, LLVM::LLVMDialect::getByValAttrName(),
                        TypeAttr::get(descriptorType));
        func.setArgAttr(index, LLVM::LLVMDialect::getAlignAttrName(),
                        b.getI64IntegerAttr(kTensorMapAlign));
        func.setArgAttr(index, NVVM::NVVMDialect::getGridConstantAttrName(),
                        b.getUnitAttr());
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
