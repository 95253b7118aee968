//===- SplitExchanges.cpp - a function's stages between its exchanges ----===//
//
// --moe-split-exchanges: @F with n collectives -> @F_stage0 .. @F_stage<n>,
// which a caller runs with the exchanges between them.
//
//===----------------------------------------------------------------------===//

#include "MoE/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOESPLITEXCHANGES
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

static bool isExchange(Operation *op) {
  return isa<DispatchOp, UndispatchOp>(op);
}

static int64_t exchangeRanks(Operation *op) {
  if (auto dispatch = dyn_cast<DispatchOp>(op))
    return dispatch.getRanks();
  return cast<UndispatchOp>(op).getRanks();
}

struct MoESplitExchangesPass
    : moe::impl::MoESplitExchangesBase<MoESplitExchangesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> functions;
    WalkResult nested = module.walk([&](Operation *op) {
      if (!isExchange(op))
        return WalkResult::advance();
      auto fn = dyn_cast<func::FuncOp>(op->getParentOp());
      if (!fn || fn->getParentOp() != module) {
        op->emitError() << "--moe-split-exchanges: an exchange must be at the "
                           "top level of a function of the module";
        return WalkResult::interrupt();
      }
      if (!llvm::is_contained(functions, fn))
        functions.push_back(fn);
      return WalkResult::advance();
    });
    if (nested.wasInterrupted())
      return signalPassFailure();
    SymbolTable symbols(module);
    for (func::FuncOp fn : functions)
      if (failed(split(fn, symbols)))
        return signalPassFailure();
  }

  LogicalResult split(func::FuncOp fn, SymbolTable &symbols) {
    if (!fn.getBody().hasOneBlock())
      return fn.emitError() << "--moe-split-exchanges: @" << fn.getSymName()
                            << " has more than one block; its exchanges must "
                               "be in straight-line code";
    Block &body = fn.getBody().front();
    // Stage of each op: the number of exchanges before it (an exchange
    // ends the stage it is counted in).
    SmallVector<Operation *> exchanges;
    DenseMap<Operation *, unsigned> stageOf;
    for (Operation &op : body) {
      stageOf[&op] = exchanges.size();
      if (isExchange(&op))
        exchanges.push_back(&op);
    }
    unsigned numStages = exchanges.size() + 1;
    for (unsigned s = 0; s < numStages; ++s) {
      std::string name = (fn.getSymName() + "_stage" + Twine(s)).str();
      if (symbols.lookup(name))
        return fn.emitError() << "--moe-split-exchanges: a symbol named @"
                              << name << " already exists";
    }

    // The stage a value becomes available in (an exchange's results: the
    // next one) and the last stage that reads it.
    auto definedIn = [&](Value v) -> unsigned {
      Operation *def = v.getDefiningOp();
      return isExchange(def) ? stageOf[def] + 1 : stageOf[def];
    };
    auto usedUntil = [&](Value v) {
      unsigned last = 0;
      for (Operation *user : v.getUsers())
        last = std::max(last, stageOf[body.findAncestorOpInBlock(*user)]);
      return last;
    };
    // carried[s]: values from stages <= s (not exchange s's results) that a
    // later stage reads.
    SmallVector<SmallVector<Value>> carried(numStages);
    for (Operation &op : body) {
      if (isExchange(&op))
        continue;
      for (Value v : op.getResults())
        for (unsigned s = definedIn(v); s + 1 < numStages && s < usedUntil(v);
             ++s)
          carried[s].push_back(v);
    }
    for (Operation *exchange : exchanges)
      for (Value v : exchange->getResults())
        for (unsigned s = definedIn(v); s + 1 < numStages && s < usedUntil(v);
             ++s)
          carried[s].push_back(v);

    OpBuilder b(&getContext());
    Block::iterator where = std::next(Block::iterator(fn));
    for (unsigned s = 0; s < numStages; ++s) {
      SmallVector<Value> inputs(fn.getArguments());
      if (s > 0) {
        llvm::append_range(inputs, exchanges[s - 1]->getResults());
        llvm::append_range(inputs, carried[s - 1]);
      }
      SmallVector<Value> outputs;
      if (s + 1 < numStages) {
        llvm::append_range(outputs, exchanges[s]->getOperands());
        llvm::append_range(outputs, carried[s]);
      } else {
        llvm::append_range(outputs, body.getTerminator()->getOperands());
      }
      b.clearInsertionPoint();
      auto stage = func::FuncOp::create(
          b, fn.getLoc(), (fn.getSymName() + "_stage" + Twine(s)).str(),
          b.getFunctionType(ValueRange(inputs).getTypes(),
                            ValueRange(outputs).getTypes()));
      symbols.insert(stage, where);
      where = std::next(Block::iterator(stage));
      // @F's own attributes (what its results and arguments mean) hold for
      // every stage.
      for (NamedAttribute attr : fn->getDiscardableAttrs())
        stage->setAttr(attr.getName(), attr.getValue());
      stage->setAttr("moe.stage", b.getI64IntegerAttr(s));
      if (s + 1 < numStages) {
        Operation *exchange = exchanges[s];
        stage->setAttr("moe.exchange",
                       b.getStringAttr(exchange->getName().getStringRef()));
        stage->setAttr("moe.exchange_ranks",
                       b.getI64IntegerAttr(exchangeRanks(exchange)));
        stage->setAttr("moe.exchange_operands",
                       b.getI64IntegerAttr(exchange->getNumOperands()));
      }
      Block *entry = stage.addEntryBlock();
      IRMapping mapping;
      mapping.map(inputs, entry->getArguments());
      b.setInsertionPointToStart(entry);
      for (Operation &op : body.without_terminator())
        if (stageOf[&op] == s && !isExchange(&op))
          b.clone(op, mapping);
      SmallVector<Value> results;
      for (Value v : outputs)
        results.push_back(mapping.lookupOrDefault(v));
      func::ReturnOp::create(b, fn.getLoc(), results);
    }
    symbols.erase(fn);
    return success();
  }
};

} // namespace
