//===- ConstantKernel.cpp - a program's small integer constants -----------===//
//
// A moe.program's values live in its workspace, which holds nothing before
// the call: a small integer constant that its ops read (the offsets of one
// group, --moe-expand-shared-mlp) is written there by a kernel of its own,
// a planned.v1 entry of op arith.constant (contract §3.12).
//
//===----------------------------------------------------------------------===//

#include "BackwardKernels.h"
#include "KernelSupport.h"
#include "KernelUtils.h"
#include "LaunchPlan.h"
#include "RoutingKernelUtils.h"

#include "MoE/Target/Contract.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::moe;

static constexpr int64_t kMaxConstantElements = 8;

/// Why a program's constant `op` has no kernel, or "".
static std::string unsupportedConstant(arith::ConstantOp op) {
  auto type = dyn_cast<RankedTensorType>(op.getType());
  auto values = dyn_cast<DenseIntElementsAttr>(op.getValue());
  if (!type || type.getRank() != 1 || !values ||
      !(type.getElementType().isInteger(32) ||
        type.getElementType().isInteger(64)))
    return "only 1-D i32 and i64 tensors are written by a kernel";
  if (type.getNumElements() > kMaxConstantElements)
    return "a constant of more than " + std::to_string(kMaxConstantElements) +
           " elements has no kernel (its values are the kernel's)";
  return "";
}

/// The moe.launch of `op`: a kernel of one CTA writing its values.
static FailureOr<DictionaryAttr> constantLaunch(OpBuilder &builder,
                                                gpu::GPUModuleOp kernels,
                                                arith::ConstantOp op) {
  auto type = cast<RankedTensorType>(op.getType());
  auto values = cast<DenseIntElementsAttr>(op.getValue());
  Type element = type.getElementType();
  // The values spell the kernel's name: one kernel per constant.
  std::string name =
      "moe_constant_i" + std::to_string(element.getIntOrFloatBitWidth());
  for (const APInt &value : values) {
    int64_t v = value.getSExtValue();
    name += (v < 0 ? "_m" : "_") + std::to_string(v < 0 ? -v : v);
  }
  gpu::GPUFuncOp func = lookUpOrBuild(kernels, name, [&] {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToEnd(&kernels.getBodyRegion().front());
    ImplicitLocOpBuilder b(op.getLoc(), builder);
    auto out = MemRefType::get({ShapedType::kDynamic}, element);
    gpu::GPUFuncOp kernel = createKernel(b, name, {out}, /*threads=*/32);
    Value memref = kernel.getBody().front().getArgument(0);
    IndexMath m{b};
    Value first = arith::CmpIOp::create(
        b, arith::CmpIPredicate::eq,
        gpu::ThreadIdOp::create(b, gpu::Dimension::x), m.c(0));
    ifThen(b, first, [&](ImplicitLocOpBuilder &ib) {
      IndexMath n{ib};
      for (auto [i, value] : llvm::enumerate(values))
        memref::StoreOp::create(
            ib, arith::ConstantIntOp::create(ib, element, value.getSExtValue()),
            memref, ValueRange{n.c(int64_t(i))});
    });
    gpu::ReturnOp::create(b);
    return kernel;
  });
  NamedAttrList info;
  info.set("abi", builder.getStringAttr("planned.v1"));
  info.set("op", builder.getStringAttr(op->getName().getStringRef()));
  info.set("max_rows",
           builder.getI64IntegerAttr(maxTokens(ShapedType::kDynamic)));
  // For the plan only.
  info.set("elements", builder.getI64IntegerAttr(type.getNumElements()));
  info.set("element", TypeAttr::get(element));
  info.set("kernels", builder.getArrayAttr(kernelForm(builder, func)));
  return plan::finishLaunch(builder, op.getLoc(), info, func);
}

LogicalResult mlir::moe::addConstantLaunches(OpBuilder &builder,
                                             func::FuncOp func,
                                             gpu::GPUModuleOp kernels) {
  for (auto constant : func.getOps<arith::ConstantOp>()) {
    if (!isa<RankedTensorType>(constant.getType()))
      continue;
    if (std::string reason = unsupportedConstant(constant); !reason.empty())
      return constant.emitOpError() << "cannot be a value of the program @"
                                    << func.getSymName() << ": " << reason;
    FailureOr<DictionaryAttr> launch =
        constantLaunch(builder, kernels, constant);
    if (failed(launch))
      return failure();
    constant->setAttr(kLaunchAttr, *launch);
  }
  return success();
}
