//===- GenerateBackward.cpp - a MoE layer's backward as moe ops ----------===//
//
// --moe-generate-backward: @F -> @F_train (forward returning what the
// backward saves) and @F_backward (saved values and dY -> gradients).
//
//===----------------------------------------------------------------------===//

#include "MoE/Target/Contract.h"
#include "MoE/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGENERATEBACKWARD
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// The forward layer of @F_train, unfused, read back from its output.
struct Chain {
  RouteOp route; // null when ids and weights are arguments
  PermuteOp permute;
  GroupedMatmulOp gateUp;
  SwiGLUOp activation;
  GroupedMatmulOp down;
  UnpermuteOp combine;
  SharedMLPOp shared; // null without a shared expert
  // With expert parallelism (--moe-expert-parallel), between the permute
  // and the combine: all null without.
  DispatchOp dispatch;
  PermuteOp localPermute;
  UnpermuteOp localUnpermute;
  UndispatchOp undispatch;
};

/// Why `output` is not a layer the backward can be derived for, or the
/// chain that computes it.
static FailureOr<Chain> matchChain(Value output, std::string &why) {
  auto no = [&](StringRef reason) {
    why = reason.str();
    return failure();
  };
  Chain c;
  c.combine = output.getDefiningOp<UnpermuteOp>();
  if (!c.combine)
    return no("its result is not a moe.unpermute's (the layer output)");
  if (!c.combine.getWeights())
    return no("the combine has no routing weights");
  Value combined = c.combine.getRows();
  if ((c.undispatch = combined.getDefiningOp<UndispatchOp>())) {
    c.localUnpermute = c.undispatch.getRows().getDefiningOp<UnpermuteOp>();
    if (!c.localUnpermute || c.localUnpermute.getWeights() ||
        c.localUnpermute.getShared())
      return no("the undispatched rows are not an unweighted moe.unpermute's "
                "(the rank's rows back in received order)");
    combined = c.localUnpermute.getRows();
  }
  c.down = combined.getDefiningOp<GroupedMatmulOp>();
  if (!c.down)
    return no("the combined rows are not a moe.grouped_matmul's (the down "
              "projection)");
  c.activation = c.down.getRows().getDefiningOp<SwiGLUOp>();
  if (!c.activation)
    return no("the down projection's rows are not a moe.swiglu's (an FP8 "
              "intermediate has no backward yet)");
  c.gateUp = c.activation.getInput().getDefiningOp<GroupedMatmulOp>();
  if (!c.gateUp)
    return no("the activation's input is not a moe.grouped_matmul's (the "
              "gate-up projection)");
  if (c.down.getRowScale() || c.gateUp.getRowScale() || c.activation.getScale())
    return no("a per-row scale on the expert MLP has no backward (the "
              "routing weight belongs on the combine)");
  c.permute = c.gateUp.getRows().getDefiningOp<PermuteOp>();
  if (!c.permute)
    return no("the gate-up projection's rows are not a moe.permute's "
              "(quantized rows have no backward yet)");
  if (c.undispatch) {
    // The expert MLP's rows are the received rows, permuted by local expert.
    c.localPermute = c.permute;
    c.dispatch = c.localPermute.getTokens().getDefiningOp<DispatchOp>();
    if (!c.dispatch ||
        c.localPermute.getExpertIds() != c.dispatch.getLocalIds() ||
        c.localUnpermute.getSlots() != c.localPermute.getSlots())
      return no("the expert MLP's rows are not the dispatched rows permuted "
                "by their local experts");
    c.permute = c.dispatch.getRows().getDefiningOp<PermuteOp>();
    if (!c.permute || c.dispatch.getOffsets() != c.permute.getOffsets() ||
        c.undispatch.getOffsets() != c.permute.getOffsets() ||
        c.undispatch.getCounts() != c.dispatch.getCounts() ||
        c.undispatch.getRanks() != c.dispatch.getRanks())
      return no("the dispatch and undispatch do not exchange one permute's "
                "rows with the same counts");
  }
  Value offsets = (c.localPermute ? c.localPermute : c.permute).getOffsets();
  if (c.gateUp.getOffsets() != offsets || c.down.getOffsets() != offsets ||
      c.combine.getSlots() != c.permute.getSlots())
    return no("the projections and the combine do not use the permute's "
              "offsets and slots");
  if (Value shared = c.combine.getShared()) {
    c.shared = shared.getDefiningOp<SharedMLPOp>();
    if (!c.shared || c.shared.getTokens() != c.permute.getTokens())
      return no("the combine adds a shared term that is not a "
                "moe.shared_mlp of the layer's tokens");
  }
  c.route = c.permute.getExpertIds().getDefiningOp<RouteOp>();
  if (c.route && c.route.getWeights() != c.combine.getWeights())
    return no("the combine's weights are not the route's");
  if (c.route && c.route.getSharedSlots())
    return no("the route has shared-expert slots, which have no backward "
              "yet");
  return c;
}

/// Names, in @F_backward's argument order, of what @F_train saves.
struct Saved {
  SmallVector<StringRef> names;
  SmallVector<Value> values;

  void add(StringRef name, Value value) {
    names.push_back(name);
    values.push_back(value);
  }
};

struct MoEGenerateBackwardPass
    : moe::impl::MoEGenerateBackwardBase<MoEGenerateBackwardPass> {
  using MoEGenerateBackwardBase::MoEGenerateBackwardBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> forwards;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isDeclaration() && !fn->hasAttr(kTrainAttr) &&
          !fn->hasAttr(kSavedAttr) && hasMoEOps(fn))
        forwards.push_back(fn);
    SymbolTable symbols(module);
    for (func::FuncOp fn : forwards)
      if (failed(derive(fn, symbols)))
        return signalPassFailure();
  }

  static constexpr StringLiteral kTrainAttr = "moe.train";
  static constexpr StringLiteral kSavedAttr = "moe.saved";
  static constexpr StringLiteral kGradientOfAttr = "moe.gradient_of";

  static bool hasMoEOps(func::FuncOp fn) {
    return fn
        .walk([](Operation *op) {
          return isa<MoEDialect>(op->getDialect()) ? WalkResult::interrupt()
                                                   : WalkResult::advance();
        })
        .wasInterrupted();
  }

  LogicalResult derive(func::FuncOp fn, SymbolTable &symbols) {
    auto fail = [&](const Twine &why) {
      return fn.emitError() << "--moe-generate-backward: cannot derive the "
                               "backward of @"
                            << fn.getSymName() << ": " << why;
    };
    if (!fn.getBody().hasOneBlock())
      return fail("it has more than one block (the layer must be straight-line "
                  "code)");
    if (fn.getNumResults() != 1)
      return fail("it must return exactly one value, the layer output (it "
                  "returns " +
                  Twine(fn.getNumResults()) + ")");
    std::string trainName = (fn.getSymName() + "_train").str();
    std::string backwardName = (fn.getSymName() + "_backward").str();
    for (StringRef name : {StringRef(trainName), StringRef(backwardName)})
      if (symbols.lookup(name))
        return fail("a symbol named @" + name + " already exists");

    // @F_train: @F unfused, so that the intermediates can be returned.
    func::FuncOp train = fn.clone();
    train.setSymName(trainName);
    symbols.insert(train, std::next(Block::iterator(fn)));
    train->setAttr(kTrainAttr, UnitAttr::get(&getContext()));
    RewritePatternSet patterns(&getContext());
    populateExpandFusedOpsPatterns(patterns);
    if (failed(applyPatternsGreedily(train, std::move(patterns)))) {
      train.erase();
      return fail("its fused ops could not be expanded");
    }
    auto ret = cast<func::ReturnOp>(train.getBody().front().getTerminator());
    std::string why;
    FailureOr<Chain> chain = matchChain(ret.getOperand(0), why);
    if (failed(chain)) {
      train.erase();
      return fail(why);
    }

    // The differentiable inputs, each an argument of @F, and their names
    // (those of the saved values they are).
    struct Leaf {
      StringRef what;
      Value value;
      StringRef name;
    };
    Chain &c = *chain;
    SmallVector<Leaf> leaves{{"the tokens", c.permute.getTokens(), "tokens"}};
    if (c.route)
      leaves.push_back({"the router logits", c.route.getLogits(), "logits"});
    else
      leaves.push_back(
          {"the routing weights", c.combine.getWeights(), "weights"});
    leaves.push_back(
        {"the gate-up weights", c.gateUp.getWeights(), "gate_up_weights"});
    leaves.push_back({"the down weights", c.down.getWeights(), "down_weights"});
    if (Value bias = c.gateUp.getBias())
      leaves.push_back({"the gate-up bias", bias, "gate_up_bias"});
    if (Value bias = c.down.getBias())
      leaves.push_back({"the down bias", bias, "down_bias"});
    if (SharedMLPOp shared = c.shared) {
      leaves.push_back({"the shared expert's gate-up weights",
                        shared.getGateUpWeights(), "shared_gate_up_weights"});
      leaves.push_back({"the shared expert's down weights",
                        shared.getDownWeights(), "shared_down_weights"});
      if (Value gate = shared.getGateWeights())
        leaves.push_back(
            {"the shared expert's gate", gate, "shared_gate_weights"});
    }
    DenseMap<unsigned, size_t> leafOfArg;
    for (auto [i, leaf] : llvm::enumerate(leaves)) {
      auto arg = dyn_cast<BlockArgument>(leaf.value);
      if (!arg || arg.getOwner() != &train.getBody().front()) {
        train.erase();
        return fail(Twine(leaf.what) +
                    " must be an argument of the function (the gradient "
                    "would have nowhere to go; quantized weights have no "
                    "backward yet)");
      }
      if (!leafOfArg.try_emplace(arg.getArgNumber(), i).second) {
        train.erase();
        return fail("argument #" + Twine(arg.getArgNumber()) +
                    " is two of the layer's inputs");
      }
    }
    if (!c.route && !isa<BlockArgument>(c.permute.getExpertIds())) {
      train.erase();
      return fail("the expert ids are neither a moe.route's nor an argument "
                  "of the function");
    }
    // The names of @F_train's arguments (moe.name, as a program's).
    SmallVector<std::pair<Value, StringRef>> named;
    for (const Leaf &leaf : leaves)
      named.push_back({leaf.value, leaf.name});
    if (!c.route)
      named.push_back({c.permute.getExpertIds(), "ids"});
    else if (Value bias = c.route.getCorrectionBias())
      named.push_back({bias, "score_bias"});
    for (auto [value, name] : named)
      if (auto arg = dyn_cast<BlockArgument>(value);
          arg && arg.getOwner() == &train.getBody().front() &&
          !train.getArgAttr(arg.getArgNumber(), kNameAttr))
        train.setArgAttr(arg.getArgNumber(), kNameAttr,
                         StringAttr::get(&getContext(), name));
    SmallVector<StringRef> gradientNames;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto it = leafOfArg.find(i); it != leafOfArg.end())
        gradientNames.push_back(leaves[it->second].name);

    if (recomputeRows && c.dispatch) {
      train.erase();
      return fail("recompute-rows cannot recompute the expert-parallel "
                  "rows (they are the rows other ranks sent)");
    }
    Saved saved;
    if (c.route) {
      saved.add("logits", c.route.getLogits());
      saved.add("ids", c.route.getExpertIds());
    } else if (recomputeRows) {
      saved.add("ids", c.permute.getExpertIds());
    }
    saved.add("weights", c.combine.getWeights());
    // With recompute-rows, the backward permutes the tokens again (the
    // permute is stable: the same rows in the same order).
    if (!recomputeRows)
      saved.add("rows", c.gateUp.getRows());
    saved.add("offsets", c.gateUp.getOffsets());
    saved.add("slots", c.permute.getSlots());
    if (c.dispatch) {
      saved.add("local_slots", c.localPermute.getSlots());
      saved.add("dispatch_offsets", c.permute.getOffsets());
      saved.add("counts", c.dispatch.getCounts());
      saved.add("combined", c.undispatch.getResult());
    }
    if (!recomputeGateUp)
      saved.add("gate_up", c.gateUp.getResult());
    else if (Value bias = c.gateUp.getBias())
      saved.add("gate_up_bias", bias);
    // With expert parallelism the routing-weight gradient reads the
    // combined rows; the experts' output is needed for its shape only, which
    // the rows have when their types agree.
    if (!c.dispatch || c.gateUp.getRows().getType() != c.down.getType())
      saved.add("expert_out", c.down.getResult());
    saved.add("gate_up_weights", c.gateUp.getWeights());
    saved.add("down_weights", c.down.getWeights());
    if (recomputeRows || c.shared)
      saved.add("tokens", c.permute.getTokens());
    if (SharedMLPOp shared = c.shared) {
      saved.add("shared_gate_up_weights", shared.getGateUpWeights());
      saved.add("shared_down_weights", shared.getDownWeights());
      if (Value gate = shared.getGateWeights())
        saved.add("shared_gate_weights", gate);
    }

    SmallVector<Value> results{ret.getOperand(0)};
    llvm::append_range(results, saved.values);
    OpBuilder b(ret);
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    train.setType(b.getFunctionType(train.getArgumentTypes(),
                                    ValueRange(results).getTypes()));
    // One runtime entry on the GPU, its outputs named y and the saved names.
    train->setAttr(kProgramAttr, UnitAttr::get(&getContext()));
    train.setResultAttr(0, kNameAttr, b.getStringAttr("out"));
    for (auto [i, name] : llvm::enumerate(saved.names))
      train.setResultAttr(i + 1, kNameAttr, b.getStringAttr(name));

    buildBackward(fn, backwardName, c, saved, leafOfArg, gradientNames, symbols,
                  std::next(Block::iterator(train)));
    return success();
  }

  void buildBackward(func::FuncOp fn, StringRef name, Chain &c,
                     const Saved &saved,
                     const DenseMap<unsigned, size_t> &leafOfArg,
                     ArrayRef<StringRef> gradientNames, SymbolTable &symbols,
                     Block::iterator where) {
    Location loc = fn.getLoc();
    OpBuilder b(&getContext());
    SmallVector<Type> inputs(ValueRange(saved.values).getTypes());
    Value output = c.combine.getResult();
    inputs.push_back(output.getType());

    // Gradients of @F's differentiable arguments, in argument order.
    SmallVector<unsigned> gradientOf;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (leafOfArg.count(i))
        gradientOf.push_back(i);
    SmallVector<Type> outputs;
    for (unsigned i : gradientOf)
      outputs.push_back(fn.getArgument(i).getType());

    auto backward =
        func::FuncOp::create(b, loc, name, b.getFunctionType(inputs, outputs));
    symbols.insert(backward, where);
    backward->setAttr(kSavedAttr, b.getStrArrayAttr(saved.names));
    if (Attribute ranks = fn->getAttr("moe.expert_parallel_ranks"))
      backward->setAttr("moe.expert_parallel_ranks", ranks);
    backward->setAttr(
        kGradientOfAttr,
        b.getDenseI64ArrayAttr(llvm::to_vector_of<int64_t>(gradientOf)));
    // One runtime entry on the GPU: the saved values by their names, the
    // output's gradient, and each input's gradient as grad_<its name>.
    backward->setAttr(kProgramAttr, b.getUnitAttr());
    for (auto [i, name] : llvm::enumerate(saved.names))
      backward.setArgAttr(i, kNameAttr, b.getStringAttr(name));
    // What the train forward made for the backward alone is the backward's
    // to overwrite once read (its arguments, the weights and tokens, are
    // the caller's).
    for (auto [i, value] : llvm::enumerate(saved.values))
      if (!isa<BlockArgument>(value))
        backward.setArgAttr(i, kDonatedAttr, b.getUnitAttr());
    backward.setArgAttr(saved.names.size(), kNameAttr,
                        b.getStringAttr("grad_out"));
    for (auto [i, name] : llvm::enumerate(gradientNames))
      backward.setResultAttr(i, kNameAttr,
                             b.getStringAttr("grad_" + name.str()));
    Block *entry = backward.addEntryBlock();
    b.setInsertionPointToStart(entry);

    // The saved values, and the forward values they stand for.
    IRMapping forward;
    for (auto [value, arg] : llvm::zip(saved.values, entry->getArguments()))
      forward.map(value, arg);
    auto get = [&](Value v) { return forward.lookup(v); };
    Value dy = entry->getArguments().back();
    Value offsets = get(c.gateUp.getOffsets());
    // The rows: saved, or with recompute-rows the tokens permuted again
    // where first needed (the forward's permute, whose order is stable).
    Value rows = forward.lookupOrNull(c.gateUp.getRows());
    auto getRows = [&]() {
      if (!rows) {
        IRMapping operands = forward; // the saved tokens and ids
        rows = b.clone(*c.permute.getOperation(), operands)->getResult(0);
      }
      return rows;
    };
    Value slots = get(c.permute.getSlots()),
          weights = get(c.combine.getWeights());
    Value w13 = get(c.gateUp.getWeights()), w2 = get(c.down.getWeights());
    Value expertOut = forward.lookupOrNull(c.down.getResult());
    if (!expertOut)
      expertOut = getRows();

    Value gateUp = forward.lookupOrNull(c.gateUp.getResult());
    if (!gateUp) {
      Value bias = c.gateUp.getBias() ? get(c.gateUp.getBias()) : Value();
      gateUp = GroupedMatmulOp::create(
          b, loc, c.gateUp.getType(), getRows(), w13, offsets, bias,
          /*row_scale=*/Value(), c.gateUp.getKnWeightsAttr());
    }
    // The combine's adjoint; with expert parallelism, the rows' gradients go
    // back to the ranks that computed them (the undispatch's adjoint is a
    // dispatch of the same layout) and into the expert rows' order.
    Value combined = c.undispatch ? get(c.undispatch.getResult()) : expertOut;
    auto combineGrad =
        UnpermuteGradOp::create(b, loc, combined.getType(), weights.getType(),
                                dy, combined, slots, weights);
    Value dOut = combineGrad.getRowsGrad();
    if (DispatchOp dispatch = c.dispatch) {
      auto sent = DispatchOp::create(
          b, loc, dispatch.getReceived().getType(),
          dispatch.getLocalIds().getType(), dispatch.getCounts().getType(),
          dOut, get(c.permute.getOffsets()), dispatch.getRanks());
      dOut = UnpermuteGradOp::create(b, loc, expertOut.getType(), Type(),
                                     sent.getReceived(), expertOut,
                                     get(c.localPermute.getSlots()), Value())
                 .getRowsGrad();
    }
    Value activated = SwiGLUOp::create(
        b, loc, c.activation.getType(), gateUp, /*scale=*/Value(),
        c.activation.getActivationAttr(), c.activation.getAlphaAttr(),
        c.activation.getLimitAttr(), c.activation.getInterleavedAttr());

    // Down projection: dW2[e] = dO[e]^T . H[e] first, so that H is dead
    // before dH and dGU are made (a program's workspace), then dH = dO . W2[e].
    auto downGrad = wgrad(b, loc, c.down, dOut, activated, offsets);
    Value dAct =
        dgrad(b, loc, c.down, c.activation.getType(), dOut, w2, offsets);
    Value dGateUp = SwiGLUGradOp::create(
        b, loc, c.gateUp.getType(), gateUp, dAct,
        c.activation.getActivationAttr(), c.activation.getAlphaAttr(),
        c.activation.getLimitAttr(), c.activation.getInterleavedAttr());
    // Gate-up projection, then the permute's adjoint: a token's k rows summed.
    Value dRows = dgrad(b, loc, c.gateUp, c.gateUp.getRows().getType(), dGateUp,
                        w13, offsets);
    if (DispatchOp dispatch = c.dispatch) {
      // The local permute's adjoint, then the dispatch's: back to the
      // tokens' ranks, in their rows' order.
      Value received = UnpermuteOp::create(
          b, loc, dispatch.getReceived().getType(), dRows,
          get(c.localPermute.getSlots()), /*weights=*/Value(),
          /*shared=*/Value());
      dRows = UndispatchOp::create(
          b, loc, c.undispatch.getType(), received, get(dispatch.getCounts()),
          get(c.permute.getOffsets()), dispatch.getRanks());
    }
    // The gate-up weights' gradient; with recompute-rows after dX, so that
    // the permuted rows can take dRows' buffer in a program.
    GroupedWgradOp gateUpGrad;
    if (!recomputeRows)
      gateUpGrad = wgrad(b, loc, c.gateUp, dGateUp, rows, offsets);
    // The shared expert's part of dX joins the sum of each token's rows.
    SharedMLPGradOp sharedGrad;
    if (SharedMLPOp shared = c.shared) {
      Value gate = shared.getGateWeights();
      sharedGrad = SharedMLPGradOp::create(
          b, loc, shared.getTokens().getType(),
          shared.getGateUpWeights().getType(),
          shared.getDownWeights().getType(), gate ? gate.getType() : Type(), dy,
          get(shared.getTokens()), get(shared.getGateUpWeights()),
          get(shared.getDownWeights()), gate ? get(gate) : Value(),
          shared.getActivationAttr());
    }
    Value dTokens = UnpermuteOp::create(
        b, loc, c.permute.getTokens().getType(), dRows, slots,
        /*weights=*/Value(), sharedGrad ? sharedGrad.getTokensGrad() : Value());
    if (!gateUpGrad)
      gateUpGrad = wgrad(b, loc, c.gateUp, dGateUp, getRows(), offsets);

    Value dRouting = combineGrad.getWeightsGrad();
    if (RouteOp route = c.route)
      dRouting = RouteGradOp::create(
          b, loc, route.getLogits().getType(), get(route.getLogits()),
          get(route.getExpertIds()), dRouting, route.getRoutingAttr(),
          route.getRenormalizeAttr(), route.getScalingFactorAttr());

    // Gradients in the order `leaves` lists the inputs.
    SmallVector<Value> byLeaf{dTokens, dRouting, gateUpGrad.getWeightGrad(),
                              downGrad.getWeightGrad()};
    if (c.gateUp.getBias())
      byLeaf.push_back(gateUpGrad.getBiasGrad());
    if (c.down.getBias())
      byLeaf.push_back(downGrad.getBiasGrad());
    if (sharedGrad) {
      byLeaf.push_back(sharedGrad.getGateUpGrad());
      byLeaf.push_back(sharedGrad.getDownGrad());
      if (Value gateGrad = sharedGrad.getGateGrad())
        byLeaf.push_back(gateGrad);
    }
    SmallVector<Value> results;
    for (unsigned i : gradientOf)
      results.push_back(byLeaf[leafOfArg.lookup(i)]);
    func::ReturnOp::create(b, loc, results);
  }

  /// The weight (and bias) gradient of the forward `matmul`, lying as its
  /// weights do.
  static GroupedWgradOp wgrad(OpBuilder &b, Location loc,
                              GroupedMatmulOp matmul, Value grad, Value rows,
                              Value offsets) {
    Type biasType = matmul.getBias() ? matmul.getBias().getType() : Type();
    return GroupedWgradOp::create(b, loc, matmul.getWeights().getType(),
                                  biasType, grad, rows, offsets,
                                  matmul.getKnWeightsAttr());
  }

  /// The rows' gradient of the forward `matmul` (its `weights` here):
  /// grad . W[e]^T. Weights [E, N, K] are a dgrad's; weights lying
  /// [E, K, N] are already W^T as a plain grouped matmul reads them
  /// (K-major, its fastest kernels).
  static Value dgrad(OpBuilder &b, Location loc, GroupedMatmulOp matmul,
                     Type type, Value grad, Value weights, Value offsets) {
    if (matmul.getKnWeights())
      return GroupedMatmulOp::create(b, loc, type, grad, weights, offsets,
                                     /*bias=*/Value(), /*row_scale=*/Value());
    return GroupedDgradOp::create(b, loc, type, grad, weights, offsets);
  }
};

} // namespace
