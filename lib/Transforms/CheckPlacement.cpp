//===- CheckPlacement.cpp - moe ops where a pipeline compiles them -------===//

#include "MoE/Transforms/Passes.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOECHECKPLACEMENT
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {
struct MoECheckPlacementPass
    : moe::impl::MoECheckPlacementBase<MoECheckPlacementPass> {
  using Base::Base;

  void runOnOperation() override {
    if (target != "cpu" && target != "gpu") {
      emitError(getOperation().getLoc())
          << "moe-check-placement: 'target' must be cpu or gpu, got '" << target
          << "'";
      return signalPassFailure();
    }
    if (failed(verifyMoEPlacement(getOperation(), target == "gpu"
                                                      ? MoEPipelineKind::GPU
                                                      : MoEPipelineKind::CPU)))
      signalPassFailure();
  }
};
} // namespace
