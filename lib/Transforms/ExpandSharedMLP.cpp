//===- ExpandSharedMLP.cpp - a shared expert as grouped ops of one group --===//
//
// A shared expert is a dense MLP over every token: a grouped matmul whose
// one group is all rows (offsets [0, 2^31 - 1], clamped to the rows as
// every grouped op clamps them) over its weights viewed as one expert's.
// Its forward becomes grouped_matmul -> swiglu -> grouped_matmul, its
// adjoint the dgrad, wgrad and swiglu_grad of the routed experts' backward.
//
//===----------------------------------------------------------------------===//

#include "MoE/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

#include <cstdint>

namespace mlir::moe {
#define GEN_PASS_DEF_MOEEXPANDSHAREDMLP
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {
RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The builder of one shared expert's ops, before `anchor`.
struct OneGroup {
  OpBuilder &b;
  Location loc;
  Value offsets;

  OneGroup(OpBuilder &b, Location loc) : b(b), loc(loc) {
    // Clamped to [0, M] by every grouped op: one group of all rows.
    auto type = RankedTensorType::get({2}, b.getI64Type());
    offsets = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, ArrayRef<int64_t>{0, INT32_MAX}));
  }
  /// [R, C] viewed as one expert's [1, R, C].
  Value expert(Value weights) {
    RankedTensorType type = typeOf(weights);
    return tensor::ExpandShapeOp::create(
        b, loc,
        RankedTensorType::get({1, type.getDimSize(0), type.getDimSize(1)},
                              type.getElementType()),
        weights, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  }
  /// One expert's [1, R, C] as [R, C].
  Value dense(Value grad) {
    return tensor::CollapseShapeOp::create(
        b, loc, grad, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  }
  RankedTensorType rowsOf(Value rows, int64_t columns) {
    RankedTensorType type = typeOf(rows);
    return RankedTensorType::get({type.getDimSize(0), columns},
                                 type.getElementType());
  }
  /// rows . weights[0]^T, of `type`'s element type (the rows' if null).
  Value matmul(Value rows, Value weights, Type type = {}) {
    return GroupedMatmulOp::create(
        b, loc, type ? type : rowsOf(rows, typeOf(weights).getDimSize(1)), rows,
        weights, offsets, /*bias=*/Value(), /*row_scale=*/Value());
  }
  /// grad . weights[0], of `type` (the weights' element type if null).
  Value dgrad(Value grad, Value weights, Type type = {}) {
    RankedTensorType rows = rowsOf(grad, typeOf(weights).getDimSize(2));
    return GroupedDgradOp::create(
        b, loc, type ? type : rows.clone(typeOf(weights).getElementType()),
        grad, weights, offsets);
  }
  Value wgrad(Value grad, Value rows, Value weights) {
    return dense(GroupedWgradOp::create(b, loc, typeOf(weights), Type(), grad,
                                        rows, offsets)
                     .getWeightGrad());
  }
};

LogicalResult refuseGate(Operation *op) {
  return op->emitOpError()
         << "--moe-expand-shared-mlp: a gated shared expert (Qwen2-MoE) is "
            "not expanded yet (its gate's sigmoid and gradient have no "
            "grouped op); run it as routed experts (--moe-route-shared-"
            "experts) or on the CPU";
}

LogicalResult expand(SharedMLPOp op) {
  if (op.getGateWeights())
    return refuseGate(op);
  OpBuilder b(op);
  OneGroup g(b, op.getLoc());
  Value w13 = g.expert(op.getGateUpWeights());
  Value gateUp = g.matmul(op.getTokens(), w13);
  Value w2 = g.expert(op.getDownWeights());
  Value activated = SwiGLUOp::create(
      b, op.getLoc(), g.rowsOf(gateUp, typeOf(w2).getDimSize(2)), gateUp,
      /*scale=*/Value(), op.getActivationAttr(), FloatAttr(), FloatAttr());
  op.getResult().replaceAllUsesWith(g.matmul(activated, w2, op.getType()));
  op.erase();
  return success();
}

LogicalResult expand(SharedMLPGradOp op) {
  if (op.getGateWeights())
    return refuseGate(op);
  OpBuilder b(op);
  OneGroup g(b, op.getLoc());
  Value tokens = op.getTokens(), grad = op.getGrad();
  Value w13 = g.expert(op.getGateUpWeights());
  Value w2 = g.expert(op.getDownWeights());
  // The forward recomputed, then the routed experts' backward of one group.
  // The down projection's weight gradient first: the activation is dead
  // before its gradient is made (a program's workspace).
  Value gateUp = g.matmul(tokens, w13);
  Value activated = SwiGLUOp::create(
      b, op.getLoc(), g.rowsOf(gateUp, typeOf(w2).getDimSize(2)), gateUp,
      /*scale=*/Value(), op.getActivationAttr(), FloatAttr(), FloatAttr());
  Value downGrad = g.wgrad(grad, activated, w2);
  Value dActivated = g.dgrad(grad, w2);
  Value dGateUp =
      SwiGLUGradOp::create(b, op.getLoc(), typeOf(gateUp), gateUp, dActivated,
                           op.getActivationAttr(), FloatAttr(), FloatAttr());
  Value tokensGrad = g.dgrad(dGateUp, w13, op.getTokensGrad().getType());
  Value gateUpGrad = g.wgrad(dGateUp, tokens, w13);
  op.getTokensGrad().replaceAllUsesWith(tokensGrad);
  op.getGateUpGrad().replaceAllUsesWith(gateUpGrad);
  op.getDownGrad().replaceAllUsesWith(downGrad);
  op.erase();
  return success();
}

struct ExpandSharedMLP : moe::impl::MoEExpandSharedMLPBase<ExpandSharedMLP> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation()->walk([&](Operation *op) {
      if (isa<SharedMLPOp, SharedMLPGradOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      LogicalResult done = isa<SharedMLPOp>(op)
                               ? expand(cast<SharedMLPOp>(op))
                               : expand(cast<SharedMLPGradOp>(op));
      if (failed(done))
        return signalPassFailure();
    }
  }
};
} // namespace
