//===- SplitExchanges.cpp - a function's stages between its exchanges ----===//
//
// --moe-split-exchanges: @F with n collectives -> @F_stage0 .. @F_stage<n>,
// which a caller runs with the exchanges between them.
//
//===----------------------------------------------------------------------===//

#include "MoE/Transforms/Passes.h"

#include "MoE/Target/Contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

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

    // Every value a stage can read, in definition order (@F's arguments,
    // then the block's results), with the stage that defines it (none for
    // the arguments and the exchanges' results: the caller holds those).
    constexpr unsigned kCaller = ~0u;
    SmallVector<Value> values(fn.getArguments());
    DenseMap<Value, unsigned> definedIn;
    DenseMap<Value, std::string> names;
    for (BlockArgument arg : fn.getArguments()) {
      definedIn[arg] = kCaller;
      auto name =
          fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
      names[arg] =
          name ? name.str() : ("arg" + Twine(arg.getArgNumber())).str();
    }
    // What @F returns, by its first result's name (moe.name, else
    // result<i>) unless an argument already has it.
    ValueRange returned = body.getTerminator()->getOperands();
    llvm::StringSet<> taken;
    for (auto &[value, name] : names)
      taken.insert(name);
    DenseMap<Value, std::string> resultNames;
    for (auto [i, v] : llvm::enumerate(returned)) {
      auto name = fn.getResultAttrOfType<StringAttr>(i, kNameAttr);
      std::string text = name ? name.str() : ("result" + Twine(i)).str();
      if (!names.count(v) && !resultNames.count(v) && taken.insert(text).second)
        resultNames[v] = text;
    }
    // An exchange's results are x<s>_<j>, or the name @F returns one by
    // (the train forward's saved counts keep the name its backward takes).
    for (Operation &op : body.without_terminator())
      for (OpResult v : op.getResults()) {
        values.push_back(v);
        definedIn[v] = isExchange(&op) ? kCaller : stageOf[&op];
        if (!isExchange(&op))
          continue;
        std::string name = resultNames.lookup(v);
        if (name.empty()) {
          name = ("x" + Twine(stageOf[&op]) + "_" + Twine(v.getResultNumber()))
                     .str();
          if (!taken.insert(name).second)
            return fn.emitError() << "--moe-split-exchanges: @"
                                  << fn.getSymName() << " names a value '"
                                  << name << "', the name of an exchange's "
                                  << "result";
        }
        names[v] = name;
      }
    // readers[s]: the values stage s's ops read (@F's return is no reader:
    // the caller takes @F's results from its named values).
    SmallVector<llvm::SetVector<Value>> readers(numStages);
    for (Operation &op : body.without_terminator()) {
      if (isExchange(&op))
        continue;
      unsigned s = stageOf[&op];
      op.walk([&](Operation *nested) {
        for (Value v : nested->getOperands())
          if (definedIn.count(v))
            readers[s].insert(v);
      });
    }
    auto exchangeReads = [&](unsigned s, Value v) {
      return s < exchanges.size() &&
             llvm::is_contained(exchanges[s]->getOperands(), v);
    };
    // Stage s returns what it defines that exchange s, a later stage or
    // @F's return reads, once each; stage s takes what it reads and does not
    // define.
    SmallVector<SmallVector<Value>> inputs(numStages), outputs(numStages);
    unsigned numbered = 0;
    for (Value v : values) {
      unsigned def = definedIn[v];
      for (unsigned s = 0; s < numStages; ++s)
        if (def != s && readers[s].contains(v))
          inputs[s].push_back(v);
      if (def == kCaller)
        continue;
      bool later = exchangeReads(def, v) || llvm::is_contained(returned, v);
      for (unsigned s = def + 1; s < numStages; ++s)
        later |= readers[s].contains(v);
      if (!later)
        continue;
      outputs[def].push_back(v);
      std::string name = resultNames.lookup(v); // reserved above
      while (name.empty())
        if (std::string next = ("v" + Twine(numbered++)).str();
            taken.insert(next).second)
          name = next;
      names[v] = name;
    }

    // A donated argument (its buffer the callee's to overwrite) stays
    // donated only in the last stage that reads it, and only if no exchange
    // from that stage on reads it: earlier readers must leave it intact.
    auto donatedIn = [&](unsigned s, Value v) {
      for (unsigned later = s + 1; later < numStages; ++later)
        if (readers[later].contains(v))
          return false;
      for (unsigned e = s; e < exchanges.size(); ++e)
        if (exchangeReads(e, v))
          return false;
      return true;
    };

    OpBuilder b(&getContext());
    auto nameList = [&](ValueRange range) {
      SmallVector<Attribute> list;
      for (Value v : range)
        list.push_back(b.getStringAttr(names.lookup(v)));
      return b.getArrayAttr(list);
    };
    Block::iterator where = std::next(Block::iterator(fn));
    for (unsigned s = 0; s < numStages; ++s) {
      b.clearInsertionPoint();
      auto stage = func::FuncOp::create(
          b, fn.getLoc(), (fn.getSymName() + "_stage" + Twine(s)).str(),
          b.getFunctionType(ValueRange(inputs[s]).getTypes(),
                            ValueRange(outputs[s]).getTypes()));
      symbols.insert(stage, where);
      where = std::next(Block::iterator(stage));
      // @F's own attributes (what its results and arguments mean) hold for
      // every stage.
      for (NamedAttribute attr : fn->getDiscardableAttrs())
        stage->setAttr(attr.getName(), attr.getValue());
      // Each argument and result is named as the caller keeps it (moe.name:
      // a program entry's argument names).
      for (auto [i, v] : llvm::enumerate(inputs[s])) {
        if (auto arg = dyn_cast<BlockArgument>(v)) {
          stage.setArgAttrs(i, fn.getArgAttrDict(arg.getArgNumber()));
          if (!donatedIn(s, v))
            stage.removeArgAttr(i, kDonatedAttr);
        }
        stage.setArgAttr(i, kNameAttr, b.getStringAttr(names.lookup(v)));
      }
      // A caller runs each stage as one call: on the GPU, one entry.
      stage->setAttr(kProgramAttr, b.getUnitAttr());
      stage->setAttr("moe.stage_of", fn.getSymNameAttr());
      stage->setAttr("moe.stage", b.getI64IntegerAttr(s));
      stage->setAttr("moe.function_args", nameList(fn.getArguments()));
      stage->setAttr("moe.stage_args", nameList(inputs[s]));
      stage->setAttr("moe.stage_results", nameList(outputs[s]));
      stage->setAttr("moe.function_results", nameList(returned));
      // A result @F returns keeps what @F says of it (its first position's
      // attributes); every result is named as the caller keeps it.
      for (auto [i, v] : llvm::enumerate(outputs[s])) {
        if (auto at = llvm::find(returned, v); at != returned.end())
          stage.setResultAttrs(
              i, fn.getResultAttrDict(std::distance(returned.begin(), at)));
        stage.setResultAttr(i, kNameAttr, b.getStringAttr(names.lookup(v)));
      }
      if (s + 1 < numStages) {
        Operation *exchange = exchanges[s];
        stage->setAttr("moe.exchange",
                       b.getStringAttr(exchange->getName().getStringRef()));
        stage->setAttr("moe.exchange_ranks",
                       b.getI64IntegerAttr(exchangeRanks(exchange)));
        stage->setAttr("moe.exchange_args", nameList(exchange->getOperands()));
        stage->setAttr("moe.exchange_results",
                       nameList(exchange->getResults()));
      }
      Block *entry = stage.addEntryBlock();
      IRMapping mapping;
      mapping.map(inputs[s], entry->getArguments());
      b.setInsertionPointToStart(entry);
      for (Operation &op : body.without_terminator())
        if (stageOf[&op] == s && !isExchange(&op))
          b.clone(op, mapping);
      SmallVector<Value> results;
      for (Value v : outputs[s])
        results.push_back(mapping.lookupOrDefault(v));
      func::ReturnOp::create(b, fn.getLoc(), results);
    }
    symbols.erase(fn);
    return success();
  }
};

} // namespace
