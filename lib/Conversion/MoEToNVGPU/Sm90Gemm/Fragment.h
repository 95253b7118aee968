//===- Fragment.h - where a thread's wgmma accumulator values lie -*- C++
//-*-===//
//
// The fragment walk of the sm_90a grouped GEMM, written once: which row
// and column of a warpgroup's 64-row accumulator each of a thread's values
// holds, and the register struct the accumulator lowers to. The mainloops'
// promotions and every epilogue walk the accumulator through these.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONVERSION_MOETONVGPU_SM90GEMM_FRAGMENT_H
#define MOE_CONVERSION_MOETONVGPU_SM90GEMM_FRAGMENT_H

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::moe::sm90 {

/// Where a thread's accumulator values lie. The wgmma D fragment: lane l of
/// the warpgroup's warp w holds rows l / 4 + 16 w + 8 i, columns
/// 8 j + 2 (l % 4) + {0, 1} as elements 4 j + 2 i + {0, 1} of the struct the
/// accumulator lowers to.
struct Fragment {
  Value quad; // l / 4: the row within 8 (fragment rows are 8 apart)
  Value row;  // l / 4 + 16 w, the row of element 0
  Value col;  // 2 (l % 4), the column of element 0

  /// Element e's row and column past (row, col).
  static constexpr int64_t rowOffset(int64_t e) { return 8 * ((e / 2) % 2); }
  static constexpr int64_t colOffset(int64_t e) { return 8 * (e / 4) + e % 2; }
  /// The element of row half i, column group j (8 columns), pair member p.
  static constexpr int64_t element(int64_t i, int64_t j, int64_t p) {
    return 4 * j + 2 * i + p;
  }
  /// Gated: gate column c pairs with up column c + columns / 2, which is
  /// element + upDistance(columns) of the same thread.
  static constexpr int64_t upDistance(int64_t columns) {
    return 4 * (columns / 16);
  }
};

/// The fragment of thread `tid` of its warpgroup.
Fragment fragmentOf(ImplicitLocOpBuilder &b, Value tid);

/// A thread's accumulator values as the registers it lowers to
/// ({{f32 x columns / 2}}).
class FragmentRegs {
public:
  FragmentRegs(ImplicitLocOpBuilder &b, Value accumulator, int64_t columns);
  /// Element e.
  Value element(ImplicitLocOpBuilder &b, int64_t e) const;
  /// The registers' struct type for `columns` accumulator columns.
  static Type structType(MLIRContext *ctx, int64_t columns);

private:
  Value regs;
};

/// acc + part * scaleOf(e), element by element of the thread's fragment
/// (`count` elements); `part` is an accumulator, or a wgmma's own register
/// struct of type `products`.
Value addScaled(ImplicitLocOpBuilder &b, Value acc, Value part, int64_t count,
                Type products, nvgpu::WarpgroupAccumulatorType accumulator,
                function_ref<Value(int64_t)> scaleOf);

} // namespace mlir::moe::sm90

#endif // MOE_CONVERSION_MOETONVGPU_SM90GEMM_FRAGMENT_H
