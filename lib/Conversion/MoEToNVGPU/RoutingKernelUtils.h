//===- RoutingKernelUtils.h - shared by the routing kernels -----*- C++ -*-===//
//
// What the route, permute and unpermute kernel builders share: their kernel
// shell, dynamic memref types and a lane shuffle.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONVERSION_MOETONVGPU_ROUTINGKERNELUTILS_H
#define MOE_CONVERSION_MOETONVGPU_ROUTINGKERNELUTILS_H

#include "KernelUtils.h"
#include "RoutingKernels.h"

namespace mlir::moe {

/// Lane `lane`'s value of the 32-bit `v`.
inline Value shuffleFrom(ImplicitLocOpBuilder &b, Value v, Value lane) {
  return gpu::ShuffleOp::create(b, v, lane, i32Constant(b, 32),
                                gpu::ShuffleMode::IDX)
      .getShuffleResult();
}

inline MemRefType dynamic2D(Type element) {
  return MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, element);
}

/// A kernel of `threads` threads taking `args`, with `shared` arrays of
/// static shared memory (of `sharedTypes`, default i32); the builder is left
/// in its body after its wait for the previous kernel.
inline gpu::GPUFuncOp createKernel(ImplicitLocOpBuilder &b, StringRef name,
                                   ArrayRef<Type> args,
                                   int64_t threads = kRoutingThreads,
                                   ArrayRef<int64_t> shared = {},
                                   ArrayRef<Type> sharedTypes = {}) {
  auto smem =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  SmallVector<Type> attributions;
  for (auto [i, size] : llvm::enumerate(shared))
    attributions.push_back(MemRefType::get(
        {size}, sharedTypes.empty() ? b.getI32Type() : sharedTypes[i],
        MemRefLayoutAttrInterface(), smem));
  auto func = gpu::GPUFuncOp::create(b, name, b.getFunctionType(args, {}),
                                     attributions);
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({int32_t(threads), 1, 1}));
  b.setInsertionPointToStart(&func.getBody().front());
  waitForPreviousKernel(b);
  return func;
}

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_ROUTINGKERNELUTILS_H
