//===- Passes.h - moe to other dialects -------------------------*- C++ -*-===//

#ifndef MOE_CONVERSION_PASSES_H
#define MOE_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
class ConversionTarget;
namespace moe {

#define GEN_PASS_DECL
#include "MoE/Conversion/Passes.h.inc"

/// Kernel attribute listing the parameters that are 128-byte TMA
/// descriptors passed by value; moe-finalize-kernel-abi makes them so.
inline constexpr llvm::StringLiteral kTensorMapArgsAttr = "moe.tensor_map_args";

/// Patterns building the kernels of each moe op that `moe.kernels`
/// configures into `kernels` (one pattern per op) and recording their
/// launch in `moe.launch`.
void populateMoEToNVGPUPatterns(RewritePatternSet &patterns,
                                gpu::GPUModuleOp kernels);

/// Patterns lowering every basic moe op to linalg/tensor/scf/arith/math.
void populateMoEToLinalgPatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "MoE/Conversion/Passes.h.inc"

} // namespace moe
} // namespace mlir

#endif // MOE_CONVERSION_PASSES_H
