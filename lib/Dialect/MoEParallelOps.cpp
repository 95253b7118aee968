//===- MoEParallelOps.cpp - verifiers of the expert-parallel ops ---------===//

#include "MoE/Dialect/MoEDialect.h"
#include "ShapeChecks.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::shape_checks;

/// `ranks` splits the experts of `offsets` evenly, and `counts` has one
/// entry per rank. Returns E.
static FailureOr<int64_t> verifyRanks(Operation *op, int64_t ranks,
                                      Value offsets, Value counts) {
  FailureOr<int64_t> numExperts = verifyOffsets(op, offsets);
  if (failed(numExperts))
    return failure();
  if (ranks < 1 || *numExperts % ranks != 0)
    return op->emitOpError()
           << "'ranks' (" << ranks << ") must divide the expert count "
           << *numExperts << " (each rank owns E / ranks experts)";
  if (failed(checkRank(op, "counts", counts, 1, "[ranks]")) ||
      failed(checkStatic(op, "rank count", {"counts", counts, 0})) ||
      failed(checkExtent(op, "rank count", {"counts", counts, 0}, ranks,
                         "the 'ranks' attribute")))
    return failure();
  return numExperts;
}

LogicalResult DispatchOp::verify() {
  Operation *op = getOperation();
  Value rows = getRows(), received = getReceived(), ids = getLocalIds();
  if (failed(checkRank(op, "rows", rows, 2, "[M, H]")) ||
      failed(checkRank(op, "received", received, 2, "[R, H]")) ||
      failed(checkRank(op, "local_ids", ids, 2, "[R, 1]")) ||
      failed(checkStaticSizes(op, {{"rows", rows, "[M, H]"},
                                   {"received", received, "[R, H]"},
                                   {"local_ids", ids, "[R, 1]"}})) ||
      failed(verifyRanks(op, getRanks(), getOffsets(), getCounts())) ||
      failed(checkSameExtent(op, "hidden size", {"received", received, 1},
                             {"rows", rows, 1})) ||
      failed(checkSameExtent(op, "row count", {"local_ids", ids, 0},
                             {"received", received, 0})) ||
      failed(checkExtent(op, "ids per row", {"local_ids", ids, 1}, 1,
                         "one expert per received row")))
    return failure();
  if (getElementTypeOrSelf(received) != getElementTypeOrSelf(rows))
    return emitOpError() << "'received' element type must match 'rows'";
  return success();
}

LogicalResult UndispatchOp::verify() {
  Operation *op = getOperation();
  Value rows = getRows(), result = getResult();
  if (failed(checkRank(op, "rows", rows, 2, "[R, H]")) ||
      failed(checkRank(op, "result", result, 2, "[M, H]")) ||
      failed(checkStaticSizes(
          op, {{"rows", rows, "[R, H]"}, {"result", result, "[M, H]"}})) ||
      failed(verifyRanks(op, getRanks(), getOffsets(), getCounts())) ||
      failed(checkSameExtent(op, "hidden size", {"result", result, 1},
                             {"rows", rows, 1})))
    return failure();
  if (getElementTypeOrSelf(result) != getElementTypeOrSelf(rows))
    return emitOpError() << "result element type must match 'rows'";
  return success();
}
