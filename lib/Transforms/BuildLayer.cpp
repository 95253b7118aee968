//===- BuildLayer.cpp - a MoE layer function from its parameters ----------===//
//
// --moe-build-layer: what a frontend would otherwise print as MLIR text
// (Passes.td has the function it adds).
//
//===----------------------------------------------------------------------===//

#include "MoE/Transforms/Passes.h"

#include "MoE/Target/Contract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEBUILDLAYER
#include "MoE/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

struct BuildLayer : mlir::moe::impl::MoEBuildLayerBase<BuildLayer> {
  using MoEBuildLayerBase::MoEBuildLayerBase;

  /// An error naming the option, then the pass fails.
  InFlightDiagnostic optionError(StringRef option) {
    signalPassFailure();
    return emitError(getOperation().getLoc())
           << "--moe-build-layer: " << option << " ";
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    for (auto [option, value] :
         {std::pair<StringRef, int64_t>{"hidden", hidden},
          {"intermediate", intermediate},
          {"experts", experts},
          {"top-k", topK}})
      if (value < 1) {
        optionError(option) << "= " << value << ": a positive size is required";
        return;
      }
    if (sharedIntermediate < 0) {
      optionError("shared-intermediate")
          << "= " << sharedIntermediate
          << ": the shared expert's width, or 0 for none";
      return;
    }
    if (sharedGate && !sharedIntermediate) {
      optionError("shared-gate") << "needs a shared expert "
                                    "(shared-intermediate > 0)";
      return;
    }
    // routing=none: the caller routes and passes the ids and weights.
    bool routed = routing != "none";
    std::optional<Routing> routingKind = symbolizeRouting(routing);
    if (routed && !routingKind) {
      optionError("routing") << "= '" << routing
                             << "': expected softmax_topk, topk_softmax, "
                                "sigmoid_topk or none";
      return;
    }
    if (!routed)
      for (auto [option, set] :
           {std::pair<StringRef, bool>{"renormalize", renormalize},
            {"groups", groups != 0},
            {"scale", scale != 1.0},
            {"score-bias", scoreBias},
            {"shared-intermediate", sharedIntermediate != 0}})
        if (set) {
          optionError(option) << "needs a moe.route: routing=none takes the "
                                 "ids and weights as arguments";
          return;
        }
    std::optional<GatedActivation> act = symbolizeGatedActivation(activation);
    if (!act) {
      optionError("activation")
          << "= '" << activation << "': expected silu or gptoss";
      return;
    }
    Type bf16 = BFloat16Type::get(context), f32 = Float32Type::get(context);
    if (logits != "bf16" && logits != "f32") {
      optionError("logits") << "= '" << logits << "': expected bf16 or f32";
      return;
    }
    if (*act != GatedActivation::gptoss && (alpha != 0.0 || limit != 0.0)) {
      optionError("alpha and limit") << "are gptoss's; silu takes neither";
      return;
    }
    if ((groups == 0) != (selectGroups == 0)) {
      optionError("groups and select-groups") << "go together";
      return;
    }
    if (SymbolTable::lookupSymbolIn(module, name)) {
      optionError("name") << "= '" << name << "': the module has a symbol "
                          << "of that name";
      return;
    }

    const int64_t H = hidden, I = intermediate, E = experts, k = topK,
                  Is = sharedIntermediate, dyn = ShapedType::kDynamic;
    auto tensor = [](ArrayRef<int64_t> shape, Type element) {
      return RankedTensorType::get(shape, element);
    };
    Type x = tensor({dyn, H}, bf16);
    SmallVector<Type> inputs = {x};
    if (routed)
      inputs.push_back(tensor({dyn, E}, logits == "f32" ? f32 : bf16));
    else
      inputs.append({tensor({dyn, k}, IntegerType::get(context, 32)),
                     tensor({dyn, k}, f32)});
    int bias = -1, b13 = -1, b2 = -1, s13 = -1, sg = -1;
    if (scoreBias) {
      bias = inputs.size();
      inputs.push_back(tensor({E}, f32));
    }
    int w13 = inputs.size();
    // native-layout: [E, K, N], as transformers keeps GPT-OSS's experts.
    inputs.push_back(nativeLayout ? tensor({E, H, 2 * I}, bf16)
                                  : tensor({E, 2 * I, H}, bf16));
    if (expertBias) {
      b13 = inputs.size();
      inputs.push_back(tensor({E, 2 * I}, bf16));
    }
    int w2 = inputs.size();
    inputs.push_back(nativeLayout ? tensor({E, I, H}, bf16)
                                  : tensor({E, H, I}, bf16));
    if (expertBias) {
      b2 = inputs.size();
      inputs.push_back(tensor({E, H}, f32));
    }
    if (Is) {
      s13 = inputs.size();
      inputs.push_back(tensor({2 * Is, H}, bf16));
      inputs.push_back(tensor({H, Is}, bf16));
      if (sharedGate) {
        sg = inputs.size();
        inputs.push_back(tensor({1, H}, bf16));
      }
    }

    Location loc = NameLoc::get(StringAttr::get(context, "moe-build-layer"));
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto func =
        func::FuncOp::create(b, loc, name, b.getFunctionType(inputs, {x}));
    // Each argument named as --moe-generate-backward and the runtime's
    // callers name it (moe.name: a program's argument names).
    SmallVector<std::pair<int, StringRef>> names = {
        {0, "tokens"},
        {w13, "gate_up_weights"},
        {w2, "down_weights"},
        {b13, "gate_up_bias"},
        {b2, "down_bias"},
        {bias, "score_bias"},
        {s13, "shared_gate_up_weights"},
        {s13 < 0 ? -1 : s13 + 1, "shared_down_weights"},
        {sg, "shared_gate_weights"}};
    if (routed)
      names.push_back({1, "logits"});
    else
      names.append({{1, "ids"}, {2, "weights"}});
    for (auto [index, argName] : names)
      if (index >= 0)
        func.setArgAttr(index, kNameAttr, b.getStringAttr(argName));
    func.setResultAttr(0, kNameAttr, b.getStringAttr("out"));
    Block *body = func.addEntryBlock();
    b.setInsertionPointToStart(body);
    auto arg = [&](int index) {
      return index < 0 ? Value() : body->getArgument(index);
    };
    Type i64 = b.getI64Type();
    Value ids = arg(1), weights = arg(2);
    if (routed) {
      auto route = RouteOp::create(
          b, loc, tensor({dyn, k}, b.getI32Type()), tensor({dyn, k}, f32),
          arg(1), arg(bias), Value(), Value(),
          RoutingAttr::get(context, *routingKind), b.getI64IntegerAttr(k),
          groups ? b.getI64IntegerAttr(groups) : nullptr,
          groups ? b.getI64IntegerAttr(selectGroups) : nullptr,
          renormalize ? b.getUnitAttr() : nullptr,
          scale != 1.0 ? b.getF32FloatAttr(scale) : nullptr, nullptr);
      ids = route.getExpertIds();
      weights = route.getWeights();
    }
    auto permute =
        PermuteOp::create(b, loc, x, tensor({E + 1}, i64),
                          tensor({dyn, k}, i64), arg(0), ids, nullptr);
    bool gptoss = *act == GatedActivation::gptoss;
    auto actAttr = GatedActivationAttr::get(context, *act);
    FloatAttr alphaAttr = gptoss ? b.getF32FloatAttr(alpha) : nullptr;
    FloatAttr limitAttr = gptoss ? b.getF32FloatAttr(limit) : nullptr;
    Value experts;
    if (nativeLayout) {
      // The unfused chain over the weights as they lie (moe.expert_mlp's
      // are [E, N, K] with gate and up in halves).
      Value offsets = permute.getOffsets();
      Value gateUp = GroupedMatmulOp::create(
          b, loc, tensor({dyn, 2 * I}, bf16), permute.getRows(), arg(w13),
          offsets, arg(b13), Value(), b.getUnitAttr());
      Value activated =
          SwiGLUOp::create(b, loc, tensor({dyn, I}, bf16), gateUp, Value(),
                           actAttr, alphaAttr, limitAttr, b.getUnitAttr());
      experts = GroupedMatmulOp::create(b, loc, x, activated, arg(w2), offsets,
                                        arg(b2), Value(), b.getUnitAttr());
    } else {
      experts = ExpertMLPOp::create(
          b, loc, x, permute.getRows(), permute.getOffsets(), arg(w13), arg(w2),
          arg(b13), arg(b2), Value(), actAttr, alphaAttr, limitAttr, nullptr);
    }
    Value shared;
    if (Is)
      shared = SharedMLPOp::create(
          b, loc, x, arg(0), arg(s13), arg(s13 + 1), arg(sg),
          GatedActivationAttr::get(context, GatedActivation::silu));
    auto out = UnpermuteOp::create(b, loc, x, experts, permute.getSlots(),
                                   weights, shared);
    func::ReturnOp::create(b, loc, out.getResult());
    // Options no layer can have are the ops' own rules.
    if (failed(verify(func))) {
      emitError(loc) << "--moe-build-layer: the options describe no valid "
                        "layer (the error above says why)";
      func.erase();
      signalPassFailure();
    }
  }
};

} // namespace
