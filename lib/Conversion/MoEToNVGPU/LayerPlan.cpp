//===- LayerPlan.cpp - a moe.layer's plan, composed of its parts' --------===//
//
// addLayerPlan: the plan of a layer.v1 or layer_fp8.v1 entry (contract
// §3.5, §3.10), its parts' steps written by their own plan functions
// (writeSteps) on the layer's sizes, arguments and workspace.
//
//===----------------------------------------------------------------------===//

#include "EntryPlanSupport.h"

using namespace mlir;
using namespace mlir::moe::plan;
using namespace mlir::moe::plan::detail;

LogicalResult mlir::moe::plan::addLayerPlan(OpBuilder &b, Location loc,
                                            NamedAttrList &info,
                                            ArrayRef<LayerPart> parts,
                                            Operation *kernelModule,
                                            StringRef chip) {
  // Each part's keys and kernels, by role.
  struct Part {
    NamedAttrList info;
    SmallVector<gpu::GPUFuncOp> kernels;
  };
  std::map<std::string, Part> byRole;
  for (const LayerPart &part : parts) {
    Part &entry = byRole[part.role.str()];
    entry.info = NamedAttrList(part.launch);
    FailureOr<SmallVector<gpu::GPUFuncOp>> kernels =
        launchKernels(part.launch, kernelModule);
    if (failed(kernels))
      return emitError(loc) << "internal error: the layer's " << part.role
                            << " part names no kernel of the module";
    entry.kernels = std::move(*kernels);
  }
  // Without a route part the model routes: the layer takes ids and weights.
  bool routed = byRole.count("route");
  for (StringRef role : {"permute", "gate_up", "down", "unpermute"})
    if (!byRole.count(role.str()))
      return emitError(loc) << "internal error: the layer has no " << role
                            << " part with a launch";
  auto keysOf = [&](StringRef role) {
    Part &part = byRole[role.str()];
    return EntryKeys{part.info, part.kernels};
  };
  NamedAttrList noRoute;
  EntryKeys route = routed ? keysOf("route") : EntryKeys{noRoute, {}},
            permute = keysOf("permute"), gateUp = keysOf("gate_up"),
            down = keysOf("down"), unpermute = keysOf("unpermute");
  bool hasQuantize = byRole.count("quantize"),
       hasIntermediate = byRole.count("intermediate");
  bool fp8 =
      StringRef(info.get("abi") ? cast<StringAttr>(info.get("abi")).getValue()
                                : "") == "layer_fp8.v1";
  bool mx = gateUp.string("format") == "mxfp8";
  // Without a quantize part the gather writes the e4m3 rows; without an
  // intermediate part the gate-up GEMM writes the e4m3 activation. In a
  // layer.v1 the two parts are round trips of the bf16 rows and activation
  // (moe.fake_quantize), made in place.
  bool permuteQuantizes = fp8 && !hasQuantize,
       gateUpQuantizes = fp8 && !hasIntermediate;
  // The permute's experts and slots: the routed ones and, after them, the
  // shared expert's slices (--moe-route-shared-experts).
  int64_t k = permute.integer("top_k"), experts = permute.integer("experts"),
          logitsWidth = routed ? route.integer("experts") : 0,
          chunk = permute.integer("chunk");
  bool sharedGate = routed && route.flag("shared_gate");
  Type index = permute.type("offsets");
  int64_t quantum = mx ? kMxBlockSize : fp8 ? kFp8BlockSize : 8;

  PlanBuilder plan;
  auto firstStatic = [](std::initializer_list<int64_t> extents) {
    for (int64_t extent : extents)
      if (extent >= 0)
        return extent;
    return int64_t(-1);
  };
  auto maxRows = dyn_cast_or_null<IntegerAttr>(info.get("max_rows"));
  Expr t = plan.size("T", 0, maxRows ? maxRows.getInt() : kMaxRows);
  int64_t gateUpN = gateUp.integer("n");
  Expr h =
      plan.dim("H",
               firstStatic({permute.integer("hidden"), gateUp.integer("k"),
                            down.integer("n"), unpermute.integer("hidden")}),
               quantum, kUnbounded);
  Expr i = plan.dim(
      "I", firstStatic({down.integer("k"), gateUpN < 0 ? -1 : gateUpN / 2}),
      quantum, kUnbounded);
  Expr n = t * k;
  plan.check(compare("<=", n, kMaxRows), "T*k rows must be at most 2147483647");
  std::string why =
      mx    ? "(abi layer_fp8.v1 with mxfp8 GEMMs quantizes rows in [1, 32] "
              "groups)"
      : fp8 ? "(abi layer_fp8.v1 quantizes rows in [1, 128] groups and reads "
              "the weights in [128, 128] blocks)"
            : "";
  plan.check(multipleOf(h, quantum),
             "H must be a multiple of " + std::to_string(quantum) + " " +
                 (fp8 ? why : "(rows move in 16-byte vectors)"));
  plan.check(multipleOf(i, quantum),
             "I must be a multiple of " + std::to_string(quantum) + " " +
                 (fp8 ? why
                      : "(the down GEMM's K: TMA rows are multiples of 16 "
                        "bytes)"));

  // The arguments, in moeLayerArgs' order.
  StringRef weightsType = fp8 ? "e4m3" : "bf16";
  auto biasBytes = [](const EntryKeys &gemm) {
    StringRef bias = gemm.string("bias");
    return bias == "f32" ? 4 : bias == "bf16" ? 2 : 0;
  };
  plan.arg("tokens", "bf16", Role::In, 16, {t, h});
  if (!routed) {
    plan.arg("ids", "i32", Role::In, 4, {t, k});
    plan.arg("weights", "f32", Role::In, 4, {t, k});
  } else {
    Type logits = route.type("logits");
    plan.arg("logits", dtypeOf(logits), Role::In, bytesOf(logits),
             {t, logitsWidth});
    if (route.flag("bias"))
      plan.arg("score_bias", "f32", Role::In, 4, {logitsWidth});
  }
  plan.arg("gate_up_weights", weightsType, Role::In, 16, {experts, i * 2, h});
  plan.arg("down_weights", weightsType, Role::In, 16, {experts, h, i});
  if (biasBytes(gateUp))
    plan.arg("gate_up_bias", gateUp.string("bias"), Role::In, biasBytes(gateUp),
             {experts, i * 2});
  if (biasBytes(down))
    plan.arg("down_bias", down.string("bias"), Role::In, biasBytes(down),
             {experts, h});
  if (sharedGate)
    plan.arg("shared_gate", "bf16", Role::In, 2, {1, h});
  plan.arg("out", "bf16", Role::Out, 16, {t, h});
  if (mx) {
    plan.arg("gate_up_weights_scale", "e8m0", Role::In, 1,
             {experts, i * 2, floorDiv(h, kMxBlockSize)});
    plan.arg("down_weights_scale", "e8m0", Role::In, 1,
             {experts, h, floorDiv(i, kMxBlockSize)});
  } else if (fp8) {
    plan.arg(
        "gate_up_weights_scale", "f32", Role::In, 4,
        {experts, ceilDiv(i * 2, kFp8BlockSize), ceilDiv(h, kFp8BlockSize)});
    plan.arg("down_weights_scale", "f32", Role::In, 4,
             {experts, ceilDiv(h, kFp8BlockSize), ceilDiv(i, kFp8BlockSize)});
  }

  // The workspace (layerWorkspace): each buffer from a multiple of 256
  // bytes; the permute's own workspace is sources, then counts.
  int64_t indexBytes = bytesOf(index);
  if (routed) {
    plan.work("ids", n * 4, 256);
    plan.work("weights", n * 4, 256);
  }
  plan.work("offsets", Expr(experts + 1) * indexBytes, 256);
  plan.work("slots", n * indexBytes, 256);
  plan.work("sources", n * 4, 256);
  plan.work("counts", ceilDiv(n, chunk) * experts * 4, 256);
  plan.work("rows", n * h * 2, 256);
  plan.work("inter", n * i * 2, 256);
  // With a decode part (docs/decode-kernel.md), calls of at most `decode`
  // tokens run it instead of the gate-up, down and combine steps; its
  // experts' output cannot share `rows`, which its gate-up items still read
  // while its down items write.
  int64_t decode = 0, decodeTile = 1;
  if (byRole.count("decode")) {
    EntryKeys keys = keysOf("decode");
    decode = keys.integer("decode_max_tokens");
    decodeTile = keys.integer("tile_m");
  }
  Expr decoding = compare("<=", t, decode);
  if (decode > 0) {
    plan.work("decode_out", decoding * n * h * 2, 256);
    plan.work("decode_counters",
              decoding * (ceilDiv(n, decodeTile) + experts + ceilDiv(h, 64)) *
                  4,
              256);
  }
  if (fp8) {
    int64_t group = mx ? kMxBlockSize : kFp8BlockSize, scaleBytes = mx ? 1 : 4;
    plan.work("rows_q", n * h, 256);
    plan.work("rows_scale", n * floorDiv(h, group) * scaleBytes, 256);
    plan.work("inter_q", n * i, 256);
    plan.work("inter_scale", n * floorDiv(i, group) * scaleBytes, 256);
  }

  // The steps, in moeLayer's order, each part on the layer's buffers.
  auto steps = [&](StringRef role, std::map<std::string, Expr> sizes,
                   std::map<std::string, std::string> buffers) {
    Scope scope{plan,         role.str(), std::move(sizes), std::move(buffers),
                std::nullopt, "",         nullptr};
    // A route's k ids of a token are distinct, so no expert has more than
    // T rows; ids from outside may repeat within a token (M bounds them).
    if (routed && (role == "gate_up" || role == "down"))
      scope.maxExpertRows = t;
    return writeSteps(loc, keysOf(role), scope, chip);
  };
  std::string rows = fp8 ? "@rows_q" : "@rows",
              inter = fp8 ? "@inter_q" : "@inter",
              ids = routed ? "@ids" : "ids",
              weights = routed ? "@weights" : "weights";
  if ((routed && failed(steps("route", {{"T", t}, {"H", h}},
                              {{"logits", "logits"},
                               {"bias", "score_bias"},
                               {"tokens", "tokens"},
                               {"shared_gate", "shared_gate"},
                               {"ids", ids},
                               {"weights", weights}}))) ||
      failed(steps("permute", {{"T", t}, {"H", h}},
                   {{"tokens", "tokens"},
                    {"ids", ids},
                    {"rows", permuteQuantizes ? "@rows_q" : "@rows"},
                    {"offsets", "@offsets"},
                    {"slots", "@slots"},
                    {"rows_scale", "@rows_scale"},
                    {"@sources", "@sources"},
                    {"@counts", "@counts"}})) ||
      (hasQuantize && failed(steps("quantize", {{"R", n}, {"C", h}},
                                   {{"input", "@rows"},
                                    {"values", "@rows_q"},
                                    {"scales", "@rows_scale"},
                                    {"out", "@rows"}}))))
    return failure();
  if (decode > 0) {
    plan.guard = decoding;
    if (failed(steps("decode", {{"T", t}, {"H", h}, {"I", i}},
                     {{"rows", "@rows"},
                      {"gate_up_weights", "gate_up_weights"},
                      {"down_weights", "down_weights"},
                      {"offsets", "@offsets"},
                      {"slots", "@slots"},
                      {"weights", weights},
                      {"out", "out"},
                      {"@inter", "@inter"},
                      {"@experts_out", "@decode_out"},
                      {"@counters", "@decode_counters"}})))
      return failure();
    plan.guard = compare(">", t, decode);
  }
  if (failed(steps("gate_up",
                   {{"M", n}, {"N", i * 2}, {"K", h}, {"E", experts}},
                   {{"rows", rows},
                    {"weights", "gate_up_weights"},
                    {"offsets", "@offsets"},
                    {"out", gateUpQuantizes ? "@inter_q" : "@inter"},
                    {"bias", "gate_up_bias"},
                    {"rows_scale", "@rows_scale"},
                    {"weights_scale", "gate_up_weights_scale"},
                    {"out_scale", "@inter_scale"}})) ||
      (hasIntermediate && failed(steps("intermediate", {{"R", n}, {"C", i}},
                                       {{"input", "@inter"},
                                        {"values", "@inter_q"},
                                        {"scales", "@inter_scale"},
                                        {"out", "@inter"}}))) ||
      failed(steps("down", {{"M", n}, {"N", h}, {"K", i}, {"E", experts}},
                   {{"rows", inter},
                    {"weights", "down_weights"},
                    {"offsets", "@offsets"},
                    {"out", "@rows"},
                    {"bias", "down_bias"},
                    {"rows_scale", "@inter_scale"},
                    {"weights_scale", "down_weights_scale"}})) ||
      failed(steps("unpermute", {{"M", n}, {"T", t}, {"H", h}},
                   {{"rows", "@rows"},
                    {"slots", "@slots"},
                    {"weights", weights},
                    {"out", "out"}})))
    return failure();
  plan.guard.reset();
  FailureOr<DictionaryAttr> dict = plan.build(b, loc, [&](StringRef role) {
    auto it = byRole.find(role.str());
    return it == byRole.end() ? int64_t(0) : int64_t(it->second.kernels.size());
  });
  if (failed(dict))
    return failure();
  info.set("plan", *dict);
  return success();
}

namespace mlir::moe::plan::detail {

/// planned.v1 of moe.decode_experts (docs/decode-kernel.md): the expert MLP
/// and the combine of a bf16 layer in one persistent kernel, after a kernel
/// that zeroes its counters. rows [T·k, H] (the gather's), offsets,
/// slots, weights -> out [T, H]; nothing is launched at T = 0.
void decodePlan(const EntryKeys &e, Scope &p) {
  int64_t tileM = e.integer("tile_m"), k = e.integer("top_k");
  Expr t = p.size("T", 0, e.integer("max_rows"));
  Expr h = p.dim("H", e.integer("hidden"), 8, kUnbounded);
  Expr i = p.dim("I", e.integer("intermediate"), 8, kUnbounded);
  Expr experts = e.integer("experts");
  Expr n = t * k;
  p.check(compare("<=", n, kMaxRows), "T*k rows must be at most 2147483647");
  p.check(multipleOf(h, 8), "H must be a multiple of 8 (TMA rows are "
                            "multiples of 16 bytes)");
  p.check(multipleOf(i, 8), "I must be a multiple of 8 (TMA rows are "
                            "multiples of 16 bytes)");
  p.check(compare("<", h * i * 4, kTmaStrideLimit),
          "2I*H bytes per expert must stay below the TMA stride limit of "
          "2^40");
  Type offsets = e.type("offsets"), slots = e.type("slots");
  p.arg("rows", "bf16", Role::In, 16, {n, h});
  p.arg("gate_up_weights", "bf16", Role::In, 16, {experts, i * 2, h});
  p.arg("down_weights", "bf16", Role::In, 16, {experts, h, i});
  p.arg("offsets", dtypeOf(offsets), Role::In, bytesOf(offsets), {experts + 1});
  p.arg("slots", dtypeOf(slots), Role::In, bytesOf(slots), {t, k});
  p.arg("weights", "f32", Role::In, 4, {t, k});
  p.arg("out", "bf16", Role::Out, 16, {t, h});
  // A counter per token tile (at most ceil(n / tileM) + E of them), then
  // one per 64 columns of the experts' output.
  Expr counters = ceilDiv(n, tileM) + experts + ceilDiv(h, 64);
  p.work("inter", n * i * 2, 256);
  p.work("experts_out", n * h * 2, 256);
  p.work("counters", counters * 4, 256);
  Expr some = min(n, 1);
  p.launch(0, some * min(ceilDiv(counters, e.threads(0)), 1024))
      .mem("@counters", {counters});
  // Work items: token tiles x (activation column tiles of 32 + output
  // column tiles of 64), one wave of resident CTAs.
  Expr slotsBound =
      min(ceilDiv(n, tileM) + min(experts, n), experts * ceilDiv(n, tileM));
  Expr work = slotsBound * (ceilDiv(i, 32) + ceilDiv(h, 64));
  p.launch(1, min(work, Expr::name("resident")))
      .tmap("rows", "bf16", {h, n}, {h * 2}, {64, tileM})
      .tmap("gate_up_weights", "bf16", {h, i * 2, experts}, {h * 2, i * h * 4},
            {64, 32, 1})
      .tmap("@inter", "bf16", {i, n}, {i * 2}, {64, tileM})
      .tmap("down_weights", "bf16", {i, h, experts}, {i * 2, h * i * 2},
            {64, 64, 1})
      .mem("offsets", {experts + 1})
      .mem("@inter", {n, i})
      .mem("@experts_out", {n, h})
      .mem("@counters", {counters})
      .mem("slots", {t, k})
      .mem("weights", {t, k})
      .mem("out", {t, h})
      .i32(h);
}

} // namespace mlir::moe::plan::detail
