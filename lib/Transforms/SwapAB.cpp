//===- SwapAB.cpp - choose the grouped GEMM forms to compile -------------===//

#include "MoE/Transforms/Passes.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOESWAPAB
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {
struct MoESwapABPass : moe::impl::MoESwapABBase<MoESwapABPass> {
  using Base::Base;

  void runOnOperation() override {
    // WGMMA's N (the tokens of a swap-AB tile) is at most 64 here.
    if (maxRows < 0 || maxRows > 64) {
      getOperation()->emitError()
          << "moe-swap-ab: 'max-rows' must be in [0, 64], got "
          << static_cast<int64_t>(maxRows);
      return signalPassFailure();
    }
    if (maxRows == 0)
      return;
    Builder b(&getContext());
    // Both matmuls of a fused expert MLP see the same row counts.
    getOperation()->walk([&](Operation *op) {
      Value rowsValue;
      if (auto matmul = dyn_cast<GroupedMatmulOp>(op))
        rowsValue = matmul.getRows();
      else if (auto mlp = dyn_cast<ExpertMLPOp>(op))
        rowsValue = mlp.getRows();
      else
        return;
      op->setAttr(kSwapABMaxRowsAttr, b.getI64IntegerAttr(maxRows));
      int64_t rows = cast<RankedTensorType>(rowsValue.getType()).getDimSize(0);
      if (!ShapedType::isDynamic(rows) && rows <= maxRows)
        op->setAttr(kSwapABOnlyAttr, b.getUnitAttr());
    });
  }
};
} // namespace
