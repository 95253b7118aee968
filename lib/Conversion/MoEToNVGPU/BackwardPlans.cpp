//===- BackwardPlans.cpp - the launch plans of the backward's ops ---------===//
//
// The plans of the backward's entries (contract §3.11 and §3.12): the
// weight gradient (grouped_wgrad.v1, or planned.v1 with its bias
// gradient's kernel) and the planned.v1 SIMT kernels, and a program's
// constants. Their kernels are BackwardKernels.cpp's, GroupedWgradKernel.cpp's
// and ConstantKernel.cpp's.
//
//===----------------------------------------------------------------------===//

#include "EntryPlanSupport.h"

using namespace mlir;
using namespace mlir::moe::plan;

namespace mlir::moe::plan::detail {

/// grouped_wgrad.v1 (contract §3.11): out [E, N, K] = per expert
/// grad[rows]^T . rows[rows]; a CTA per (expert, tile_m x tile_n output
/// tile), launched also at M = 0 (every expert's gradient is then zero),
/// when its tensor maps name `out` (never read: no expert has rows).
void wgradPlan(const EntryKeys &e, Scope &p) {
  auto tile = e.kernels[0]->getAttrOfType<DenseI64ArrayAttr>("moe.tile");
  int64_t tileM = tile[0], tileN = tile[1], tileK = tile[2];
  Type offsets = e.type("offsets");
  Expr m = p.size("M", 0, e.integer("max_rows"));
  Expr n = p.dim("N", e.integer("n"), 8, kMaxRows);
  Expr k = p.dim("K", e.integer("k"), 8, kMaxRows);
  Expr experts = p.dim("E", e.integer("experts"), 1, kMaxRows);
  p.check(multipleOf(n, 8), "N must be a multiple of 8 (the gradient's TMA "
                            "row pitch must be a multiple of 16 bytes)");
  p.check(multipleOf(k, 8), "K must be a multiple of 8 (the rows' TMA row "
                            "pitch must be a multiple of 16 bytes)");
  p.arg("grad", "bf16", Role::In, 16, {m, n});
  p.arg("rows", "bf16", Role::In, 16, {m, k});
  p.arg("offsets", dtypeOf(offsets), Role::In, bytesOf(offsets), {experts + 1});
  // The kernel computes out[e] = A^T B over the expert's rows: A the
  // gradient and B the rows, or for weights lying [E, K, N] (kn) the other
  // way round.
  bool kn = e.string("weights") == "kn";
  StringRef a = kn ? "rows" : "grad", bOperand = kn ? "grad" : "rows";
  Expr aCols = kn ? k : n, bCols = kn ? n : k;
  p.arg("out", "bf16", Role::Out, 16, {experts, aCols, bCols});
  Expr grid = experts * ceilDiv(aCols, tileM) * ceilDiv(bCols, tileN);
  for (bool empty : {false, true}) {
    Step &s = p.launch(0, grid, compare(empty ? "==" : ">=", m, empty ? 0 : 1));
    s.tmap(empty ? "out" : a, "bf16", {aCols, empty ? Expr(1) : m}, {aCols * 2},
           {64, tileK});
    s.tmap(empty ? "out" : bOperand, "bf16", {bCols, empty ? Expr(1) : m},
           {bCols * 2}, {64, tileK});
    s.mem("offsets", {experts + 1}).mem("out", {experts, aCols, bCols}).i32(m);
  }
  // planned.v1 with a bias gradient: each expert's rows of the gradient
  // summed, a CTA per (expert, 256 columns), zeros where it has none.
  if (Type bias = e.type("bias")) {
    p.arg("bias_grad", dtypeOf(bias), Role::Out, 16, {experts, n});
    p.launch(1, min(experts * ceilDiv(n, 256), kMaxSimpleGrid))
        .mem("grad", {m, n})
        .mem("offsets", {experts + 1})
        .mem("bias_grad", {experts, n});
  }
}

/// planned.v1 of moe.swiglu_grad and moe.swiglu (contract §3.12): input
/// [M, 2I] (and, the gradient, grad [M, I]) -> out [M, 2I] (the activation:
/// [M, I]); a thread per 8 columns of [M, I], grid-stride beyond 2^20 CTAs;
/// nothing to do at M = 0.
void swigluPlan(const EntryKeys &e, Scope &p) {
  bool gradient = e.string("op") == "moe.swiglu_grad";
  Expr m = p.size("M", 0, e.integer("max_rows"));
  Expr i = p.dim("I", e.integer("intermediate"), 8, kMaxRows);
  p.check(multipleOf(i, 8), "I must be a multiple of 8 (rows are read in "
                            "16-byte vectors)");
  Expr out = gradient ? i * 2 : i;
  p.arg("input", "bf16", Role::In, 16, {m, i * 2});
  if (gradient)
    p.arg("grad", "bf16", Role::In, 16, {m, i});
  p.arg("out", "bf16", Role::Out, 16, {m, out});
  Expr grid = min(ceilDiv(m * floorDiv(i, 8), e.threads(0)), kMaxUnpermuteGrid);
  Step &s = p.launch(0, grid, compare(">=", m, 1));
  s.mem("input", {m, i * 2});
  if (gradient)
    s.mem("grad", {m, i});
  s.mem("out", {m, out});
}

/// planned.v1 of moe.unpermute_grad (contract §3.12): grad [T, H], rows
/// [M, H], slots [T, k] (and weights [T, k]) -> rows_grad [M, H] (and
/// weights_grad [T, k]); the rows' pair counts in the workspace. Zeroing
/// the counts, counting, then a warp per pair and per row.
void unpermuteGradPlan(const EntryKeys &e, Scope &p) {
  int64_t k = e.integer("top_k");
  Type slots = e.type("slots");
  bool weighted = e.flag("weighted");
  Expr t = p.size("T", 0, e.integer("max_rows"));
  Expr m = p.size("M", 0, kMaxRows);
  Expr h = p.dim("H", e.integer("hidden"), 8, kUnbounded);
  p.check(multipleOf(h, 8),
          "H must be a multiple of 8 (rows are read in 16-byte vectors)");
  p.arg("grad", "bf16", Role::In, 16, {t, h});
  p.arg("rows", "bf16", Role::In, 16, {m, h});
  p.arg("slots", dtypeOf(slots), Role::In, bytesOf(slots), {t, k});
  if (weighted)
    p.arg("weights", "f32", Role::In, 4, {t, k});
  p.arg("rows_grad", "bf16", Role::Out, 16, {m, h});
  // A row's first pair reads the row for its pairs' weight gradients before
  // it writes the row's gradient, and no other warp touches either.
  p.inPlace("rows_grad", "rows");
  if (weighted)
    p.arg("weights_grad", "f32", Role::Out, 4, {t, k});
  p.work("counts", m * 4, 256);
  Expr pairs = t * k;
  p.launch(0, min(ceilDiv(m, e.threads(0)), kMaxSimpleGrid),
           compare(">=", m, 1))
      .mem("@counts", {m});
  p.launch(1, min(ceilDiv(pairs, e.threads(1)), kMaxSimpleGrid),
           both(compare(">=", m, 1), compare(">=", pairs, 1)))
      .mem("slots", {t, k})
      .mem("@counts", {m});
  Step &s =
      p.launch(2, min(ceilDiv(pairs + m, e.threads(2) / 32), kMaxSimpleGrid),
               compare(">=", pairs + m, 1));
  s.mem("grad", {t, h}).mem("rows", {m, h}).mem("slots", {t, k});
  if (weighted)
    s.mem("weights", {t, k});
  s.mem("@counts", {m}).mem("rows_grad", {m, h});
  if (weighted)
    s.mem("weights_grad", {t, k});
}

/// planned.v1 of moe.route_grad (contract §3.12): logits [T, E], ids and
/// grad [T, k] -> out [T, E]; one warp per token, grid-stride beyond 65535
/// CTAs.
void routeGradPlan(const EntryKeys &e, Scope &p) {
  int64_t experts = e.integer("experts"), k = e.integer("top_k");
  StringRef logits = dtypeOf(e.type("logits"));
  int64_t logitBytes = bytesOf(e.type("logits"));
  Expr t = p.size("T", 0, e.integer("max_rows"));
  p.arg("logits", logits, Role::In, logitBytes, {t, experts});
  p.arg("ids", "i32", Role::In, 4, {t, k});
  p.arg("grad", "f32", Role::In, 4, {t, k});
  p.arg("out", logits, Role::Out, logitBytes, {t, experts});
  p.launch(0, min(ceilDiv(t, e.threads(0) / 32), kMaxSimpleGrid),
           compare(">=", t, 1))
      .mem("logits", {t, experts})
      .mem("ids", {t, k})
      .mem("grad", {t, k})
      .mem("out", {t, experts});
}

/// planned.v1 of arith.constant (a program's, ConstantKernel.cpp): out
/// [n], written by one CTA.
void constantPlan(const EntryKeys &e, Scope &p) {
  Type element = e.type("element");
  Expr n = e.integer("elements");
  p.arg("out", dtypeOf(element), Role::Out, bytesOf(element), {n});
  p.launch(0, 1).mem("out", {n});
}

} // namespace mlir::moe::plan::detail
