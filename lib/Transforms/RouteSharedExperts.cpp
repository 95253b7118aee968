//===- RouteSharedExperts.cpp - shared experts as always-routed experts ---===//
//
// A shared expert of width Is next to routed experts of width I is the sum
// of c = ceil(Is / I) gated MLPs of width I (the activation is elementwise
// over the intermediate and the down projection sums over it; zero padding
// adds zero). This pass makes those slices experts E .. E+c-1 that the
// route gives every token, so the routed experts' kernels run them.
//
//===----------------------------------------------------------------------===//

#include "MoE/Target/Contract.h"
#include "MoE/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEROUTESHAREDEXPERTS
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// The routed layer a shared expert joins, and the four weights it arranges.
struct SharedLayer {
  SharedMLPOp shared;
  UnpermuteOp combine;
  ExpertMLPOp mlp;
  PermuteOp permute;
  RouteOp route;
  BlockArgument w13, w2, s13, s2;
  int64_t experts, intermediate, sharedWidth, slices;
};

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// `value` as an argument of `func`'s entry block used by `user` alone.
FailureOr<BlockArgument> soleArgument(func::FuncOp func, Value value,
                                      Operation *user, StringRef what,
                                      Operation *diagnosed) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg || arg.getOwner() != &func.getBody().front())
    return diagnosed->emitOpError()
           << "--moe-route-shared-experts: the " << what
           << " must be an argument of @" << func.getSymName()
           << " (the arranged weights replace it, made once by @"
           << func.getSymName() << "_pack_shared)";
  for (Operation *other : arg.getUsers())
    if (other != user)
      return diagnosed->emitOpError()
             << "--moe-route-shared-experts: the " << what << " (argument #"
             << arg.getArgNumber() << ") is also used by '" << other->getName()
             << "', which would still need it as it is";
  return arg;
}

/// Matches the layer around `shared`, or says why it is none.
FailureOr<SharedLayer> matchLayer(func::FuncOp func, SharedMLPOp shared) {
  auto fail = [&](const Twine &why) {
    return shared.emitOpError()
           << "--moe-route-shared-experts: " << why
           << "; a shared expert runs on the GPU as routed experts of the "
              "layer route -> permute -> expert_mlp -> unpermute whose "
              "'shared' addend it is";
  };
  SharedLayer layer;
  layer.shared = shared;
  Value result = shared.getResult();
  layer.combine = result.hasOneUse()
                      ? dyn_cast<UnpermuteOp>(*result.getUsers().begin())
                      : UnpermuteOp();
  if (!layer.combine || layer.combine.getShared() != result)
    return fail("its result must be only the 'shared' addend of one "
                "moe.unpermute");
  layer.mlp = layer.combine.getRows().getDefiningOp<ExpertMLPOp>();
  if (!layer.mlp)
    return fail("the unpermute's rows must be a moe.expert_mlp's (run "
                "--moe-fuse-experts first)");
  layer.permute = layer.mlp.getRows().getDefiningOp<PermuteOp>();
  if (!layer.permute || layer.mlp.getOffsets() != layer.permute.getOffsets() ||
      layer.combine.getSlots() != layer.permute.getSlots() ||
      layer.permute.getTokens() != shared.getTokens())
    return fail("the expert MLP's rows and offsets and the unpermute's slots "
                "must be one moe.permute's of the shared expert's tokens");
  layer.route = layer.permute.getExpertIds().getDefiningOp<RouteOp>();
  if (!layer.route || layer.combine.getWeights() != layer.route.getWeights() ||
      layer.route.getSharedExperts())
    return fail("the permute's ids and the unpermute's weights must be one "
                "moe.route's without shared slots");
  if (layer.mlp.getActivation() != GatedActivation::silu ||
      layer.mlp.getGateUpBias() || layer.mlp.getDownBias() ||
      layer.mlp.getRowScale())
    return fail("the expert MLP must be silu without biases or a row scale, "
                "as the shared expert is");
  Block *block = shared->getBlock();
  for (Operation *op :
       {layer.combine.getOperation(), layer.mlp.getOperation(),
        layer.permute.getOperation(), layer.route.getOperation()})
    if (op->getBlock() != block)
      return fail("the layer's ops must be in one block");
  Type element = typeOf(layer.mlp.getGateUpWeights()).getElementType();
  if (typeOf(shared.getGateUpWeights()).getElementType() != element ||
      typeOf(shared.getDownWeights()).getElementType() != element)
    return fail("the shared and routed weights must have one element type");
  layer.experts = typeOf(layer.permute.getOffsets()).getDimSize(0) - 1;
  layer.intermediate = typeOf(layer.mlp.getDownWeights()).getDimSize(2);
  layer.sharedWidth = typeOf(shared.getDownWeights()).getDimSize(1);
  if (ShapedType::isDynamic(layer.intermediate) ||
      ShapedType::isDynamic(layer.sharedWidth) ||
      ShapedType::isDynamic(typeOf(layer.mlp.getGateUpWeights()).getDimSize(0)))
    return fail("the expert count and both widths must be static");
  layer.slices = llvm::divideCeil(layer.sharedWidth, layer.intermediate);

  FailureOr<BlockArgument> w13 =
      soleArgument(func, layer.mlp.getGateUpWeights(), layer.mlp,
                   "gate-up weights", layer.mlp);
  if (failed(w13))
    return failure();
  FailureOr<BlockArgument> w2 = soleArgument(
      func, layer.mlp.getDownWeights(), layer.mlp, "down weights", layer.mlp);
  if (failed(w2))
    return failure();
  FailureOr<BlockArgument> s13 =
      soleArgument(func, shared.getGateUpWeights(), shared,
                   "shared gate-up weights", shared);
  if (failed(s13))
    return failure();
  FailureOr<BlockArgument> s2 = soleArgument(
      func, shared.getDownWeights(), shared, "shared down weights", shared);
  if (failed(s2))
    return failure();
  if (*w13 == *w2 || *s13 == *s2)
    return fail("the four weights must be four arguments");
  layer.w13 = *w13;
  layer.w2 = *w2;
  layer.s13 = *s13;
  layer.s2 = *s2;
  return layer;
}

/// `source` [R, C] with zero rows (dim 0) or columns (dim 1) appended to
/// `size`.
Value padTo(OpBuilder &b, Location loc, Value source, int64_t dim,
            int64_t size) {
  RankedTensorType type = typeOf(source);
  if (type.getDimSize(dim) == size)
    return source;
  SmallVector<int64_t> shape(type.getShape());
  SmallVector<OpFoldResult> low(2, b.getIndexAttr(0)), high = low;
  high[dim] = b.getIndexAttr(size - shape[dim]);
  shape[dim] = size;
  Value zero =
      arith::ConstantOp::create(b, loc, b.getZeroAttr(type.getElementType()));
  return tensor::PadOp::create(b, loc, type.clone(shape), source, low, high,
                               zero)
      .getResult();
}

Value slice(OpBuilder &b, Location loc, Value source, ArrayRef<int64_t> offsets,
            ArrayRef<int64_t> sizes) {
  SmallVector<int64_t> strides(offsets.size(), 1);
  MLIRContext *context = b.getContext();
  return tensor::ExtractSliceOp::create(
             b, loc, source, getAsIndexOpFoldResult(context, offsets),
             getAsIndexOpFoldResult(context, sizes),
             getAsIndexOpFoldResult(context, strides))
      .getResult();
}

Value insert(OpBuilder &b, Location loc, Value source, Value dest,
             ArrayRef<int64_t> offsets) {
  ArrayRef<int64_t> sizes = typeOf(source).getShape();
  SmallVector<int64_t> strides(offsets.size(), 1);
  MLIRContext *context = b.getContext();
  return tensor::InsertSliceOp::create(b, loc, source, dest,
                                       getAsIndexOpFoldResult(context, offsets),
                                       getAsIndexOpFoldResult(context, sizes),
                                       getAsIndexOpFoldResult(context, strides))
      .getResult();
}

/// Adds `@<name>_pack_shared(w13, w2, s13, s2) -> (w13', w2')`: expert E+j
/// of w13' holds gate rows [jI, (j+1)I) and the up rows Is + [jI, (j+1)I) of
/// s13, of w2' the columns [jI, (j+1)I) of s2, zero past Is.
FailureOr<func::FuncOp> buildPack(OpBuilder &b, func::FuncOp func,
                                  SharedLayer layer,
                                  RankedTensorType gateUpType,
                                  RankedTensorType downType) {
  std::string name = (func.getSymName() + "_pack_shared").str();
  if (SymbolTable::lookupSymbolIn(func->getParentOp(), name))
    return func.emitOpError() << "--moe-route-shared-experts: the module has "
                                 "a symbol @"
                              << name << " already";
  Location loc = layer.shared.getLoc();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfter(func);
  SmallVector<Type> inputs = {layer.w13.getType(), layer.w2.getType(),
                              layer.s13.getType(), layer.s2.getType()};
  auto pack = func::FuncOp::create(
      b, loc, name, b.getFunctionType(inputs, {gateUpType, downType}));
  pack.setVisibility(func.getVisibility());
  Block *body = pack.addEntryBlock();
  b.setInsertionPointToStart(body);
  Value w13 = body->getArgument(0), w2 = body->getArgument(1),
        s13 = body->getArgument(2), s2 = body->getArgument(3);
  const int64_t E = layer.experts, I = layer.intermediate,
                Is = layer.sharedWidth, c = layer.slices;
  const int64_t H = typeOf(s13).getDimSize(1);
  Type element = gateUpType.getElementType();

  Value gateUp =
      tensor::EmptyOp::create(b, loc, gateUpType.getShape(), element);
  gateUp = insert(b, loc, w13, gateUp, {0, 0, 0});
  for (int64_t half = 0; half < 2; ++half) {
    // The gate (half 0) or up (half 1) rows as c slices of I.
    Value rows =
        padTo(b, loc, slice(b, loc, s13, {half * Is, 0}, {Is, H}), 0, c * I);
    Value sliced = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({c, I, H}, element), rows,
        ArrayRef<ReassociationIndices>{{0, 1}, {2}});
    gateUp = insert(b, loc, sliced, gateUp, {E, half * I, 0});
  }

  Value down = tensor::EmptyOp::create(b, loc, downType.getShape(), element);
  down = insert(b, loc, w2, down, {0, 0, 0});
  Value columns = padTo(b, loc, s2, 1, c * I);
  Value byColumn = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get({H, c, I}, element), columns,
      ArrayRef<ReassociationIndices>{{0}, {1, 2}});
  Value bySlice =
      linalg::TransposeOp::create(
          b, loc, byColumn, tensor::EmptyOp::create(b, loc, {c, H, I}, element),
          ArrayRef<int64_t>{1, 0, 2})
          ->getResult(0);
  down = insert(b, loc, bySlice, down, {E, 0, 0});
  func::ReturnOp::create(b, loc, ValueRange{gateUp, down});
  return pack;
}

/// The rows a permute of `tokens` token copies makes (see moe.permute).
int64_t permutedRows(int64_t tokens, int64_t perToken, int64_t experts,
                     std::optional<int64_t> padTo) {
  if (ShapedType::isDynamic(tokens))
    return ShapedType::kDynamic;
  return tokens * perToken + (padTo ? experts * (*padTo - 1) : 0);
}

/// Rewrites `layer` in `func`; `pack` is the new sibling.
void rewriteLayer(OpBuilder &b, func::FuncOp func, SharedLayer layer,
                  RankedTensorType gateUpType, RankedTensorType downType) {
  const int64_t c = layer.slices, E = layer.experts;
  RouteOp route = layer.route;
  RankedTensorType ids = typeOf(route.getExpertIds());
  int64_t tokens = ids.getDimSize(0), slots = ids.getDimSize(1) + c;

  // Every token takes the c slices after its k experts, gated or not.
  b.setInsertionPoint(layer.combine);
  auto shared = RouteOp::create(
      b, route.getLoc(), ids.clone({tokens, slots}),
      typeOf(route.getWeights()).clone({tokens, slots}), route.getLogits(),
      route.getCorrectionBias(),
      layer.shared.getGateWeights() ? layer.shared.getTokens() : Value(),
      layer.shared.getGateWeights(), route.getRoutingAttr(),
      route.getTopKAttr(), route.getNumGroupsAttr(), route.getTopGroupsAttr(),
      route.getRenormalizeAttr(), route.getScalingFactorAttr(),
      b.getI64IntegerAttr(c));
  PermuteOp permute = layer.permute;
  RankedTensorType rows = typeOf(permute.getRows()),
                   offsets = typeOf(permute.getOffsets()),
                   slotType = typeOf(permute.getSlots());
  auto newPermute = PermuteOp::create(
      b, permute.getLoc(),
      rows.clone({permutedRows(tokens, slots, E + c, permute.getPadTo()),
                  rows.getDimSize(1)}),
      offsets.clone({E + c + 1}), slotType.clone({tokens, slots}),
      permute.getTokens(), shared.getExpertIds(), permute.getPadToAttr());

  // The routed experts' weights become the arranged ones, in place.
  layer.w13.setType(gateUpType);
  layer.w2.setType(downType);
  ExpertMLPOp mlp = layer.mlp;
  RankedTensorType mlpType = typeOf(mlp.getResult());
  auto newMLP = ExpertMLPOp::create(
      b, mlp.getLoc(),
      mlpType.clone(
          {typeOf(newPermute.getRows()).getDimSize(0), mlpType.getDimSize(1)}),
      newPermute.getRows(), newPermute.getOffsets(), layer.w13, layer.w2,
      Value(), Value(), Value(), mlp.getActivationAttr(), mlp.getAlphaAttr(),
      mlp.getLimitAttr(), mlp.getIntermediateAttr());
  auto combine = UnpermuteOp::create(
      b, layer.combine.getLoc(), layer.combine.getType(), newMLP.getResult(),
      newPermute.getSlots(), shared.getWeights(), Value());
  layer.combine.replaceAllUsesWith(combine.getResult());

  // The old chain, but for a route or permute something else still reads.
  layer.combine.erase();
  layer.shared.erase();
  mlp.erase();
  if (permute->use_empty())
    permute.erase();
  if (route->use_empty())
    route.erase();
}

struct RouteSharedExperts
    : moe::impl::MoERouteSharedExpertsBase<RouteSharedExperts> {
  using MoERouteSharedExpertsBase::MoERouteSharedExpertsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    OpBuilder b(&getContext());
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      // A program's caller passes the weights as they are each call (a
      // training step): --moe-expand-shared-mlp runs its shared expert.
      if (func->hasAttr(kProgramAttr))
        continue;
      SmallVector<SharedMLPOp> shared;
      func.walk([&](SharedMLPOp op) { shared.push_back(op); });
      if (shared.empty())
        continue;
      if (shared.size() > 1) {
        shared[1].emitOpError()
            << "--moe-route-shared-experts: @" << func.getSymName()
            << " has more than one shared expert; one "
               "per function is implemented";
        return signalPassFailure();
      }
      if (failed(rewrite(b, module, func, shared.front())))
        return signalPassFailure();
    }
  }

  LogicalResult rewrite(OpBuilder &b, ModuleOp module, func::FuncOp func,
                        SharedMLPOp op) {
    FailureOr<SharedLayer> matched = matchLayer(func, op);
    if (failed(matched))
      return failure();
    SharedLayer &layer = *matched;
    RankedTensorType w13 = typeOf(layer.w13), w2 = typeOf(layer.w2);
    const int64_t experts = layer.experts + layer.slices;
    auto gateUpType =
        w13.clone({experts, w13.getDimSize(1), w13.getDimSize(2)});
    auto downType = w2.clone({experts, w2.getDimSize(1), w2.getDimSize(2)});
    FailureOr<func::FuncOp> pack = func::FuncOp();
    if (packFunction)
      pack = buildPack(b, func, layer, gateUpType, downType);
    if (failed(pack))
      return failure();

    // Callers in the module arrange the weights first.
    unsigned args[4] = {layer.w13.getArgNumber(), layer.w2.getArgNumber(),
                        layer.s13.getArgNumber(), layer.s2.getArgNumber()};
    std::optional<SymbolTable::UseRange> uses =
        SymbolTable::getSymbolUses(func, module);
    for (const SymbolTable::SymbolUse &use :
         uses ? *uses : SymbolTable::UseRange({})) {
      auto call = dyn_cast<func::CallOp>(use.getUser());
      if (!call)
        return use.getUser()->emitOpError()
               << "--moe-route-shared-experts: refers to @" << func.getSymName()
               << " other than by a call, whose arguments it rewrites";
      if (!packFunction)
        return call.emitOpError()
               << "--moe-route-shared-experts (pack-function=false): calls @"
               << func.getSymName() << ", whose arranged weights only @"
               << func.getSymName()
               << "_pack_shared (pack-function=true) would make";
    }

    rewriteLayer(b, func, layer, gateUpType, downType);
    BitVector erase(func.getNumArguments());
    erase.set(args[2]);
    erase.set(args[3]);
    if (failed(func.eraseArguments(erase)))
      return failure();
    func.setType(b.getFunctionType(func.getBody().getArgumentTypes(),
                                   func.getResultTypes()));

    for (const SymbolTable::SymbolUse &use :
         uses ? *uses : SymbolTable::UseRange({})) {
      auto call = cast<func::CallOp>(use.getUser());
      b.setInsertionPoint(call);
      auto packed = func::CallOp::create(
          b, call.getLoc(), *pack,
          ValueRange{call.getOperand(args[0]), call.getOperand(args[1]),
                     call.getOperand(args[2]), call.getOperand(args[3])});
      SmallVector<Value> operands;
      for (auto [i, operand] : llvm::enumerate(call.getOperands())) {
        if (i == args[2] || i == args[3])
          continue;
        operands.push_back(i == args[0]   ? packed.getResult(0)
                           : i == args[1] ? packed.getResult(1)
                                          : operand);
      }
      call->setOperands(operands);
    }
    return success();
  }
};

} // namespace
