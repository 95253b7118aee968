//===- EntryPlans.cpp - the launch plan of each kernel ABI ----------------===//
//
// addLaunchPlan: the host program the runtime runs for an entry (contract
// version 6, runtime/lib/Runtime.cpp's validate*/prepare*/launch*
// functions), written as a plan (docs/launch-plans.md) from the entry's own
// keys and its kernels. Parameters, memref sizes, grids and conditions are
// exactly the runtime's; its argument checks become arg records (pointer,
// alignment, bytes) and checks on the sizes. The forward ABIs' plans are
// here, the backward ops' in BackwardPlans.cpp, a layer's in LayerPlan.cpp.
//
//===----------------------------------------------------------------------===//

#include "EntryPlanSupport.h"
#include "GroupedMatmulKernel.h"

using namespace mlir;
using namespace mlir::moe::plan;
using namespace mlir::moe::plan::detail;

namespace {
/// route.v1 (contract §3.2, validateRoute).
void routePlan(const EntryKeys &e, Scope &p) {
  // k slots of routed experts, then `shared` slots of the shared expert.
  int64_t experts = e.integer("experts"),
          k = e.integer("top_k") + e.integer("shared");
  Type logits = e.type("logits");
  bool bias = e.flag("bias"), gate = e.flag("shared_gate");
  Expr t = p.size("T", 0, e.integer("max_rows"));
  Expr h = gate ? p.dim("H", e.integer("hidden"), 1, kUnbounded) : Expr(0);
  p.arg("logits", dtypeOf(logits), Role::In, bytesOf(logits), {t, experts});
  if (bias)
    p.arg("bias", "f32", Role::In, 4, {experts});
  if (gate) {
    p.arg("tokens", "bf16", Role::In, 2, {t, h});
    p.arg("shared_gate", "bf16", Role::In, 2, {1, h});
  }
  p.arg("ids", "i32", Role::Out, 4, {t, k});
  p.arg("weights", "f32", Role::Out, 4, {t, k});
  // One warp per token; grid-stride beyond 65535 CTAs.
  Step &s = p.launch(0, min(ceilDiv(t, e.threads(0) / 32), kMaxSimpleGrid));
  s.mem("logits", {t, experts});
  if (bias)
    s.mem("bias", {experts});
  if (gate)
    s.mem("tokens", {t, h}).mem("shared_gate", {1, h});
  s.mem("ids", {t, k}).mem("weights", {t, k});
}

/// unpermute.v2 (contract §3.3, validateUnpermute), or with a shared
/// expert's rows [T, H] to add, planned.v1 of moe.unpermute.
void unpermutePlan(const EntryKeys &e, Scope &p) {
  int64_t k = e.integer("top_k");
  Type slots = e.type("slots");
  bool weighted = e.flag("weighted"), shared = e.flag("shared");
  Expr m = p.size("M", 0, kUnbounded);
  Expr t = p.size("T", 0, e.integer("max_rows"));
  Expr h = p.dim("H", e.integer("hidden"), 8, kUnbounded);
  p.check(multipleOf(h, 8),
          "H must be a multiple of 8 (rows are read in 16-byte vectors)");
  p.arg("rows", "bf16", Role::In, 16, {m, h});
  p.arg("slots", dtypeOf(slots), Role::In, bytesOf(slots), {t, k});
  if (weighted)
    p.arg("weights", "f32", Role::In, 4, {t, k});
  if (shared)
    p.arg("shared", "bf16", Role::In, 16, {t, h});
  p.arg("out", "bf16", Role::Out, 16, {t, h});
  // A CTA per (token, block of 8 * threads columns), grid-stride beyond 2^20.
  Step &s =
      p.launch(0, min(t * ceilDiv(h, 8 * e.threads(0)), kMaxUnpermuteGrid));
  s.mem("rows", {m, h}).mem("slots", {t, k});
  if (weighted)
    s.mem("weights", {t, k});
  if (shared)
    s.mem("shared", {t, h});
  s.mem("out", {t, h});
}

/// permute.v2 (contract §3.4, validatePermute and permuteWorkspace).
void permutePlan(const EntryKeys &e, Scope &p) {
  int64_t experts = e.integer("experts"), k = e.integer("top_k"),
          chunk = e.integer("chunk"), scatterFrom = e.integer("scatter_from");
  Type index = e.type("offsets");
  bool fp8 = e.string("out") == "f8E4M3FN";
  Expr t = p.size("T", 0, e.integer("max_rows"));
  Expr h = p.dim("H", e.integer("hidden"), 8, kUnbounded);
  Expr n = t * k;
  p.check(compare("<=", n, kMaxRows), "T*k rows must be at most 2147483647");
  p.check(multipleOf(h, 8),
          "H must be a multiple of 8 (rows are copied in 16-byte vectors)");
  if (fp8)
    p.check(multipleOf(h, kFp8BlockSize),
            "H must be a multiple of 128 (out=f8E4M3FN: the gather quantizes "
            "whole [1, 128] groups of a row)");
  Expr groups = floorDiv(h, kFp8BlockSize);
  p.arg("tokens", "bf16", Role::In, 16, {t, h});
  p.arg("ids", "i32", Role::In, 4, {t, k});
  p.arg("rows", fp8 ? "e4m3" : "bf16", Role::Out, 16, {n, h});
  p.arg("offsets", dtypeOf(index), Role::Out, bytesOf(index), {experts + 1});
  p.arg("slots", dtypeOf(index), Role::Out, bytesOf(index), {t, k});
  if (fp8)
    p.arg("rows_scale", "f32", Role::Out, 4, {n, groups});
  // sources i32 [N], then counts i32 [chunks * E] from a multiple of 256.
  Expr chunks = ceilDiv(n, chunk), counts = chunks * experts;
  p.work("sources", n * 4, 256);
  p.work("counts", counts * 4, 256);
  // The count kernel, but for one chunk when the index kernel counts it.
  p.launch(0, chunks, e.flag("index_counts") ? compare(">", chunks, 1) : 1)
      .mem("ids", {t, k})
      .mem("@counts", {counts});
  p.launch(1, chunks)
      .mem("ids", {t, k})
      .mem("@counts", {counts})
      .mem("offsets", {experts + 1})
      .mem("slots", {t, k})
      .mem("@sources", {n});
  // The gather: a CTA per 4 rows and block of 8 * threads columns; from
  // scatter_from tokens on the scatter instead, per 4 tokens.
  Expr scatter = scatterFrom > 0 ? compare(">=", t, scatterFrom) : Expr(0);
  auto gather = [&](int64_t kernel, const Expr &items, StringRef sources,
                    ArrayRef<Expr> sourceDims, const Expr &when) {
    Step &s = p.launch(kernel,
                       min(ceilDiv(items, kGatherRowsPerCTA) *
                               ceilDiv(h, 8 * e.threads(kernel)),
                           kMaxSimpleGrid),
                       when);
    s.mem("tokens", {t, h})
        .mem(sources, sourceDims)
        .mem("offsets", {experts + 1})
        .mem("rows", {n, h});
    if (fp8)
      s.mem("rows_scale", {n, groups});
  };
  gather(2, n, "@sources", {n},
         scatterFrom > 0 ? compare("<", t, scatterFrom) : Expr(1));
  if (scatterFrom > 0 && e.kernels.size() > 3)
    gather(3, t, "slots", {t, k}, scatter);
}

/// quantize.v1 (contract §3.8, validateQuantize), and planned.v1 of
/// moe.fake_quantize (§3.12), the same kernel storing values of the input's
/// type.
void quantizePlan(const EntryKeys &e, Scope &p) {
  int64_t rank = e.integer("rank"), br = e.integer("block_rows"),
          bc = e.integer("block_cols");
  Type input = e.type("input");
  bool mx = e.string("scale") == "e8m0";
  // batch, R, C in call order; a static R is exact (the runtime checks
  // R == rows), as are static batch and C.
  Expr batch = rank == 3 ? p.dim("E", e.integer("batch"), 1, kUnbounded) : 1;
  Expr r = p.dim("R", e.integer("rows"), 0, e.integer("max_rows"));
  Expr c = p.dim("C", e.integer("cols"), 1, kUnbounded);
  p.check(multipleOf(r, br),
          "R must be a multiple of the block's " + Twine(br) + " rows");
  p.check(multipleOf(c, bc),
          "C must be a multiple of the block's " + Twine(bc) + " columns");
  SmallVector<Expr, 3> dims, scaleDims;
  if (rank == 3) {
    dims.push_back(batch);
    scaleDims.push_back(batch);
  }
  dims.append({r, c});
  scaleDims.append({floorDiv(r, br), floorDiv(c, bc)});
  StringRef element = e.string("element") == "f8E5M2" ? "e5m2" : "e4m3";
  // moe.fake_quantize (planned.v1): out [batch, R, C] of the input's type.
  bool roundTrip = e.string("op") == "moe.fake_quantize";
  p.arg("input", dtypeOf(input), Role::In, 16, dims);
  if (roundTrip) {
    p.arg("out", dtypeOf(input), Role::Out, 16, dims);
  } else {
    p.arg("values", element, Role::Out, 16, dims);
    p.arg("scales", mx ? "e8m0" : "f32", Role::Out, mx ? 1 : 4, scaleDims);
  }
  // The input as the [batch * R, C] matrix; [1, B] blocks: 32 elements per
  // thread per grid-stride step; [128, 128]: a CTA per block.
  Expr rows = batch * r, elements = rows * c;
  Expr work = br == 1
                  ? ceilDiv(elements, kQuantizeElementsPerThread * e.threads(0))
                  : floorDiv(elements, br * bc);
  Step &step = p.launch(0, min(work, kMaxQuantizeGrid)).mem("input", {rows, c});
  if (roundTrip)
    step.mem("out", {rows, c});
  else
    step.mem("values", {rows, c})
        .mem("scales", {floorDiv(rows, br), floorDiv(c, bc)});
}

/// grouped_matmul.v3 and grouped_matmul_fp8.v1 (contract §3.1, §3.7, §3.9:
/// validateGroupedMatmul, prepareGroupedMatmul, launchGroupedMatmul).
/// `chip`: the sm_100a MXFP8 kernel reads K in stages of 128.
void gemmPlan(const EntryKeys &e, Scope &p, StringRef chip) {
  bool fp8 = e.string("abi") == "grouped_matmul_fp8.v1";
  bool mx = fp8 && e.string("format") == "mxfp8";
  bool swiglu = e.string("epilogue") == "swiglu";
  bool rowScale = e.string("epilogue") == "row_scale";
  // moe.grouped_dgrad's act_grad (planned.v1): out and act_input [M, 2N].
  bool actGrad = e.string("epilogue") == "swiglu_grad";
  bool fp8Out = e.string("out") == "f8E4M3FN";
  // weights=kn (moe.grouped_dgrad): [E, K, N], loaded as [64, tileK] boxes.
  bool kn = e.string("weights") == "kn";
  StringRef bias = e.string("bias");
  Type offsets = e.type("offsets");
  int64_t elementBytes = fp8 ? 1 : 2;
  // K's quantum: a TMA row pitch of whole 16 bytes; MXFP8: whole blocks.
  int64_t quantum = mx ? kMxBlockSize : 16 / elementBytes;
  StringRef dtype = fp8 ? "e4m3" : "bf16";
  Expr m = p.size("M", 0, e.integer("max_rows"));
  Expr n = p.dim("N", e.integer("n"), 1, kMaxRows);
  Expr k = p.dim("K", e.integer("k"), quantum, kMaxRows);
  Expr experts = p.dim("E", e.integer("experts"), 1, kMaxRows);
  if (swiglu)
    p.check(multipleOf(n, 2), "N must be even: a swiglu entry's weights hold "
                              "N/2 gate rows then N/2 up rows");
  if (fp8Out)
    p.check(multipleOf(n, 2 * kFp8BlockSize),
            "N must be a multiple of 256: out=f8E4M3FN writes whole [1, 128] "
            "groups of the N/2 output columns");
  p.check(multipleOf(k, quantum),
          "K must be a multiple of " + Twine(quantum) +
              (mx    ? " (format=mxfp8 takes a scale per 32 elements of a "
                       "row)"
               : fp8 ? " (TMA row pitch of 1-byte float8 elements must be a "
                       "multiple of 16 bytes)"
                     : " (TMA row pitch must be a multiple of 16 bytes)"));
  if (kn)
    p.check(multipleOf(n, quantum),
            "N must be a multiple of " + Twine(quantum) +
                " (weights=kn: the TMA row pitch of the weights, N elements, "
                "must be a multiple of 16 bytes)");
  if (mx && chip == "sm_100a")
    p.check(multipleOf(k, 128), "K must be a multiple of 128 (the sm_100a "
                                "mxfp8 kernel reads K in stages of 128)");
  Expr expertBytes = n * k * elementBytes;
  p.check(compare("<", expertBytes, kTmaStrideLimit),
          "N*K bytes per expert must stay below the TMA stride limit of 2^40");

  // out has C = N/2 columns after a swiglu; the block scales: fp8_block's
  // f32 per [1, 128] of a row and [128, 128] of the weights, mxfp8's UE8M0
  // byte per [1, 32] of a row of each.
  Expr cols = swiglu ? floorDiv(n, 2) : actGrad ? n * 2 : n;
  Expr kBlocks = mx ? floorDiv(k, kMxBlockSize) : ceilDiv(k, kFp8BlockSize);
  Expr nBlocks = mx ? n : ceilDiv(n, kFp8BlockSize);
  StringRef scaleType = mx ? "e8m0" : "f32";
  int64_t scaleAlign = mx ? 1 : 4;
  int64_t biasBytes = bias == "f32" ? 4 : bias == "bf16" ? 2 : 0;
  p.arg("rows", dtype, Role::In, 16, {m, k});
  p.arg("weights", dtype, Role::In, 16,
        kn ? ArrayRef<Expr>{experts, k, n} : ArrayRef<Expr>{experts, n, k});
  p.arg("offsets", dtypeOf(offsets), Role::In, bytesOf(offsets), {experts + 1});
  p.arg("out", fp8Out ? "e4m3" : "bf16", Role::Out, 16, {m, cols});
  if (rowScale)
    p.arg("row_scale", "f32", Role::In, 4, {m});
  if (biasBytes)
    p.arg("bias", bias, Role::In, biasBytes, {experts, n});
  if (actGrad) {
    p.arg("act_input", "bf16", Role::In, 16, {m, cols});
    // Each tile loads its act_input elements into registers during its
    // mainloop and writes out's same elements after: a program may put out
    // over a dead act_input (the gate-up output under its gradient).
    p.inPlace("out", "act_input");
  }
  if (fp8) {
    p.arg("rows_scale", scaleType, Role::In, scaleAlign, {m, kBlocks});
    p.arg("weights_scale", scaleType, Role::In, scaleAlign,
          {experts, nBlocks, kBlocks});
  }
  Expr outGroups = floorDiv(cols, kFp8BlockSize);
  if (fp8Out)
    p.arg("out_scale", "f32", Role::Out, 4, {m, outGroups});

  for (size_t i = 0; i < e.kernels.size(); ++i) {
    auto tile = e.kernels[i]->getAttrOfType<DenseI64ArrayAttr>("moe.tile");
    auto clusterAttr = e.kernels[i]->getAttrOfType<IntegerAttr>("moe.cluster");
    int64_t tileM = tile[0], tileN = tile[1], tileK = tile[2];
    int64_t cluster = clusterAttr ? clusterAttr.getInt() : 1;
    int64_t rowsMin = e.formInteger(i, "rows_min"),
            rowsMax = e.formInteger(i, "rows_max");
    // Work items (§3.1): row tiles of eligible experts (slots) x column
    // tiles, or x [1, 128] groups of an FP8 output, or x pairs of them for
    // a cluster kernel, whose grid counts CTAs.
    Expr slots = min(ceilDiv(m, tileM) + min(experts, floorDiv(m, rowsMin)),
                     experts * ceilDiv(rowsMax, tileM));
    Expr columnItems = ceilDiv(fp8Out ? ceilDiv(floorDiv(n, 2), kFp8BlockSize)
                                      : ceilDiv(n, tileN),
                               cluster);
    Expr grid = cluster * min(slots * columnItems, Expr::name("resident"));
    // No expert can have rows_min rows below M = rows_min.
    Expr when = compare(">=", m, rowsMin);
    if (p.maxExpertRows)
      when = both(when, compare(">=", *p.maxExpertRows, rowsMin));
    Step &s = p.launch(int64_t(i), grid, when);
    s.tmap("rows", dtype, {k, m}, {k * elementBytes}, {tileK, tileM});
    if (kn)
      s.tmap("weights", dtype, {n, k, experts}, {n * elementBytes, expertBytes},
             {mlir::moe::GroupedMatmulTile::kNMajorChunk, tileK, 1});
    else
      s.tmap("weights", dtype, {k, n, experts}, {k * elementBytes, expertBytes},
             {tileK, swiglu ? tileN / 2 : tileN, 1});
    // A TMA-storing kernel's third parameter: out as boxes of the staging
    // tile (64 rows x 64 columns), in its 128-byte swizzle.
    if (e.kernels[i]->hasAttr("moe.tma_store"))
      s.tmap("out", "bf16", {cols, m}, {cols * 2}, {64, 64});
    s.mem("offsets", {experts + 1}).mem("out", {m, cols});
    s.i32(k).i32(rowsMin).i32(rowsMax);
    if (fp8)
      s.mem("rows_scale", {m, kBlocks})
          .mem("weights_scale", {experts, nBlocks, kBlocks});
    if (fp8Out)
      s.mem("out_scale", {m, outGroups});
    if (rowScale)
      s.mem("row_scale", {m});
    if (biasBytes)
      s.mem("bias", {experts, n});
    if (actGrad)
      s.mem("act_input", {m, cols});
  }
}
} // namespace

LogicalResult mlir::moe::plan::detail::writeSteps(Location loc,
                                                  const EntryKeys &keys,
                                                  Scope &scope,
                                                  StringRef chip) {
  for (auto [i, kernel] :
       llvm::enumerate(SmallVector<gpu::GPUFuncOp>(keys.kernels)))
    if (keys.threads(i) <= 0)
      return emitError(loc) << "internal error: kernel '" << kernel.getName()
                            << "' has no known block size for its plan";
  StringRef abi = keys.string("abi");
  if (abi == "route.v1")
    routePlan(keys, scope);
  else if (abi == "unpermute.v2")
    unpermutePlan(keys, scope);
  else if (abi == "permute.v2")
    permutePlan(keys, scope);
  else if (abi == "quantize.v1" ||
           (abi == "planned.v1" && keys.string("op") == "moe.fake_quantize"))
    quantizePlan(keys, scope);
  else if (abi == "grouped_wgrad.v1")
    wgradPlan(keys, scope);
  else if (abi == "planned.v1" && (keys.string("op") == "moe.swiglu_grad" ||
                                   keys.string("op") == "moe.swiglu"))
    swigluPlan(keys, scope);
  else if (abi == "planned.v1" && keys.string("op") == "moe.route_grad")
    routeGradPlan(keys, scope);
  else if (abi == "planned.v1" && keys.string("op") == "moe.unpermute_grad")
    unpermuteGradPlan(keys, scope);
  else if (abi == "planned.v1" && keys.string("op") == "moe.unpermute")
    unpermutePlan(keys, scope);
  else if (abi == "planned.v1" && keys.string("op") == "moe.grouped_wgrad")
    wgradPlan(keys, scope);
  else if (abi == "planned.v1" && keys.string("op") == "arith.constant")
    constantPlan(keys, scope);
  else if (abi == "planned.v1" && keys.string("op") == "moe.decode_experts")
    decodePlan(keys, scope);
  else if (abi == "grouped_matmul.v3" || abi == "grouped_matmul_fp8.v1" ||
           (abi == "planned.v1" && keys.string("op") == "moe.grouped_dgrad")) {
    for (gpu::GPUFuncOp kernel : SmallVector<gpu::GPUFuncOp>(keys.kernels))
      if (!kernel->getAttrOfType<DenseI64ArrayAttr>("moe.tile"))
        return emitError(loc) << "internal error: kernel '" << kernel.getName()
                              << "' has no moe.tile";
    gemmPlan(keys, scope, chip);
  } else {
    return emitError(loc) << "internal error: no launch plan for abi '" << abi
                          << "'";
  }
  return success();
}

FailureOr<SmallVector<ArgRecord>> mlir::moe::plan::writeEntryPlan(
    Location loc, const NamedAttrList &info, ArrayRef<gpu::GPUFuncOp> kernels,
    StringRef chip, PlanBuilder &plan, const PartScope *part) {
  EntryKeys keys{info, kernels};
  SmallVector<ArgRecord> declared;
  Scope scope{plan, "", {}, {}, std::nullopt, "", nullptr};
  if (part) {
    scope.part = part->part;
    scope.sizes = part->sizes;
    scope.buffers = part->buffers;
    scope.workPrefix = part->workPrefix;
  }
  scope.declared = &declared;
  if (failed(writeSteps(loc, keys, scope, chip)))
    return failure();
  return declared;
}

StringRef mlir::moe::plan::dtypeOf(Type type) {
  if (type.isBF16())
    return "bf16";
  if (type.isF32())
    return "f32";
  if (type.isInteger(32))
    return "i32";
  if (type.isInteger(64))
    return "i64";
  if (isa<Float8E4M3FNType>(type))
    return "e4m3";
  if (isa<Float8E5M2Type>(type))
    return "e5m2";
  if (isa<Float8E8M0FNUType>(type))
    return "e8m0";
  return "";
}

LogicalResult mlir::moe::plan::addLaunchPlan(OpBuilder &b, Location loc,
                                             NamedAttrList &info,
                                             ArrayRef<gpu::GPUFuncOp> kernels,
                                             StringRef chip) {
  EntryKeys keys{info, kernels};
  PlanBuilder plan;
  Scope scope{plan, "", {}, {}, std::nullopt, "", nullptr};
  if (failed(writeSteps(loc, keys, scope, chip)))
    return failure();
  FailureOr<DictionaryAttr> dict =
      plan.build(b, loc, [&](StringRef) { return int64_t(kernels.size()); });
  if (failed(dict))
    return failure();
  info.set("plan", *dict);
  return success();
}

FailureOr<DictionaryAttr>
mlir::moe::plan::finishLaunch(OpBuilder &b, Location loc, NamedAttrList &info,
                              ArrayRef<gpu::GPUFuncOp> kernels,
                              StringRef chip) {
  if (failed(addLaunchPlan(b, loc, info, kernels, chip)))
    return failure();
  return info.getDictionary(b.getContext());
}
