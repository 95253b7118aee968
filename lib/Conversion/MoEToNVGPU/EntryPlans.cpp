//===- EntryPlans.cpp - the launch plan of each kernel ABI ----------------===//
//
// addLaunchPlan: the host program the runtime runs for an entry (contract
// version 6, runtime/lib/Runtime.cpp's validate*/prepare*/launch*
// functions), written as a plan (docs/launch-plans.md) from the entry's own
// keys and its kernels. Parameters, memref sizes, grids and conditions are
// exactly the runtime's; its argument checks become arg records (pointer,
// alignment, bytes) and checks on the sizes.
//
// Over 800 lines for a reason that should go: every ABI's plan function
// writes through the file-local Scope, and the layer's hand-composed plan
// (addLayerPlan) uses them too; moving it to a file of its own needs Scope
// and EntryKeys in a header (a follow-up).
//
//===----------------------------------------------------------------------===//

#include "GroupedMatmulKernel.h"
#include "LaunchPlan.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <map>

using namespace mlir;
using namespace mlir::moe::plan;

namespace {
/// The runtime's constants (runtime/lib/Bundle.h).
constexpr int64_t kMaxRows = 2147483647;       // 2^31 - 1
constexpr int64_t kMaxSimpleGrid = 65535;      // route, permute
constexpr int64_t kMaxUnpermuteGrid = 1048576; // 2^20
constexpr int64_t kMaxQuantizeGrid = 65535;
constexpr int64_t kGatherRowsPerCTA = 4;
constexpr int64_t kQuantizeElementsPerThread = 32;
constexpr int64_t kFp8BlockSize = 128;
constexpr int64_t kMxBlockSize = 32;
constexpr int64_t kTmaStrideLimit = int64_t(1) << 40;

/// Reads the keys of a moe.launch dictionary and its kernels.
struct EntryKeys {
  const NamedAttrList &info;
  ArrayRef<gpu::GPUFuncOp> kernels;

  int64_t integer(StringRef key) const {
    if (auto attr = dyn_cast_or_null<IntegerAttr>(info.get(key)))
      return attr.getInt();
    return 0;
  }
  bool flag(StringRef key) const {
    auto attr = dyn_cast_or_null<BoolAttr>(info.get(key));
    return attr && attr.getValue();
  }
  StringRef string(StringRef key) const {
    auto attr = dyn_cast_or_null<StringAttr>(info.get(key));
    return attr ? attr.getValue() : "";
  }
  Type type(StringRef key) const {
    auto attr = dyn_cast_or_null<TypeAttr>(info.get(key));
    return attr ? attr.getValue() : Type();
  }
  /// The block size kernel `i` is launched with.
  int64_t threads(size_t i) const {
    gpu::GPUFuncOp kernel = kernels[i];
    DenseI32ArrayAttr block = kernel.getKnownBlockSizeAttr();
    return block ? block[0] : 0;
  }
  /// Key `key` of the form (the `kernels` dictionary) of kernel `i`.
  int64_t formInteger(size_t i, StringRef key) const {
    auto forms = dyn_cast_or_null<ArrayAttr>(info.get("kernels"));
    auto form = forms ? dyn_cast<DictionaryAttr>(forms[i]) : DictionaryAttr();
    auto attr = form ? form.getAs<IntegerAttr>(key) : IntegerAttr();
    return attr ? attr.getInt() : 0;
  }
};

int64_t bytesOf(Type type) {
  return type ? (type.getIntOrFloatBitWidth() + 7) / 8 : 0;
}

/// Where a plan function writes: an entry's own plan, or, inside a layer's
/// or a program's plan, a part's steps (its sizes given as the layer's
/// expressions, its arguments bound to the layer's arguments and workspace
/// slices, its own checks made on those, as moeLayer validates each step as
/// its own call).
struct Scope {
  PlanBuilder &p;
  std::string part; // "" for an entry's own plan
  std::map<std::string, Expr> sizes;
  std::map<std::string, std::string> buffers;
  /// Inside a routed layer: T, which no expert's rows exceed.
  std::optional<Expr> maxExpertRows;
  /// Inside a program: the prefix of the part's own workspace slices in the
  /// program's workspace (a layer lays out its parts' itself).
  std::string workPrefix;
  /// Where given: every argument the plan function declares.
  SmallVectorImpl<ArgRecord> *declared = nullptr;

  bool inLayer() const { return !part.empty(); }
  /// A part's size as the layer gives it (an unknown name, which build()
  /// reports, when it does not).
  Expr given(StringRef name) const {
    auto it = sizes.find(name.str());
    return it == sizes.end() ? Expr::name(name) : it->second;
  }
  std::string message(const Twine &text) const {
    return inLayer() ? (part + " step: " + text).str() : text.str();
  }
  Expr size(StringRef name, int64_t min, int64_t max) {
    if (!inLayer())
      return p.size(name, min, max);
    Expr value = given(name);
    p.check(compare(">=", value, min),
            message(name + " must be at least " + Twine(min)));
    if (max != kUnbounded)
      p.check(compare("<=", value, max),
              message(name + " must be at most " + Twine(max)));
    return value;
  }
  Expr dim(StringRef name, int64_t extent, int64_t min, int64_t max) {
    if (extent < 0)
      return size(name, min, max);
    // A program gives a part only the sizes its arguments' dims name.
    if (inLayer() && sizes.count(name.str()))
      p.check(compare("==", given(name), extent),
              message(name + " must be the part's " + Twine(extent)));
    return extent;
  }
  void arg(StringRef name, StringRef dtype, Role role, int64_t align,
           ArrayRef<Expr> dims) {
    if (declared)
      declared->push_back(
          {name.str(), dtype.str(), role, align, SmallVector<Expr>(dims)});
    if (!inLayer())
      p.arg(name, dtype, role, align, dims);
  }
  void check(const Expr &condition, const Twine &text) {
    p.check(condition, message(text));
  }
  void work(StringRef name, const Expr &bytes, int64_t align) {
    if (!inLayer())
      p.work(name, bytes, align);
    else if (!workPrefix.empty()) {
      p.work(workPrefix + name.str(), bytes, align);
      buffers["@" + name.str()] = "@" + workPrefix + name.str();
    }
  }
  Step &launch(int64_t kernel, const Expr &grid, const Expr &when = 1) {
    Step &step = p.launch(kernel, grid, when);
    if (inLayer()) {
      step.part = part;
      // An unbound name stays unknown: build() reports it.
      step.rename = [buffers = buffers](StringRef name) {
        auto it = buffers.find(name.str());
        return it == buffers.end() ? ("?" + name).str() : it->second;
      };
    }
    return step;
  }
};

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

/// quantize.v1 (contract §3.8, validateQuantize).
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
  p.arg("input", dtypeOf(input), Role::In, 16, dims);
  p.arg("values", element, Role::Out, 16, dims);
  p.arg("scales", mx ? "e8m0" : "f32", Role::Out, mx ? 1 : 4, scaleDims);
  // The input as the [batch * R, C] matrix; [1, B] blocks: 32 elements per
  // thread per grid-stride step; [128, 128]: a CTA per block.
  Expr rows = batch * r, elements = rows * c;
  Expr work = br == 1
                  ? ceilDiv(elements, kQuantizeElementsPerThread * e.threads(0))
                  : floorDiv(elements, br * bc);
  p.launch(0, min(work, kMaxQuantizeGrid))
      .mem("input", {rows, c})
      .mem("values", {rows, c})
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
  Expr cols = swiglu ? floorDiv(n, 2) : n;
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
  }
}

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
  p.arg("out", "bf16", Role::Out, 16, {experts, n, k});
  Expr grid = experts * ceilDiv(n, tileM) * ceilDiv(k, tileN);
  for (bool empty : {false, true}) {
    Step &s = p.launch(0, grid, compare(empty ? "==" : ">=", m, empty ? 0 : 1));
    s.tmap(empty ? "out" : "grad", "bf16", {n, empty ? Expr(1) : m}, {n * 2},
           {64, tileK});
    s.tmap(empty ? "out" : "rows", "bf16", {k, empty ? Expr(1) : m}, {k * 2},
           {64, tileK});
    s.mem("offsets", {experts + 1}).mem("out", {experts, n, k}).i32(m);
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

/// planned.v1 of moe.swiglu_grad (contract §3.12): input [M, 2I], grad
/// [M, I] -> out [M, 2I]; a thread per 8 columns of the gradient,
/// grid-stride beyond 2^20 CTAs; nothing to do at M = 0.
void swigluGradPlan(const EntryKeys &e, Scope &p) {
  Expr m = p.size("M", 0, e.integer("max_rows"));
  Expr i = p.dim("I", e.integer("intermediate"), 8, kMaxRows);
  p.check(multipleOf(i, 8), "I must be a multiple of 8 (rows are read in "
                            "16-byte vectors)");
  p.arg("input", "bf16", Role::In, 16, {m, i * 2});
  p.arg("grad", "bf16", Role::In, 16, {m, i});
  p.arg("out", "bf16", Role::Out, 16, {m, i * 2});
  Expr grid = min(ceilDiv(m * floorDiv(i, 8), e.threads(0)), kMaxUnpermuteGrid);
  p.launch(0, grid, compare(">=", m, 1))
      .mem("input", {m, i * 2})
      .mem("grad", {m, i})
      .mem("out", {m, i * 2});
}

/// planned.v1 of moe.swiglu (contract §3.12): input [M, 2I] -> out [M, I];
/// a thread per 8 columns of the activation, grid-stride beyond 2^20 CTAs.
void swigluPlan(const EntryKeys &e, Scope &p) {
  Expr m = p.size("M", 0, e.integer("max_rows"));
  Expr i = p.dim("I", e.integer("intermediate"), 8, kMaxRows);
  p.check(multipleOf(i, 8), "I must be a multiple of 8 (rows are read in "
                            "16-byte vectors)");
  p.arg("input", "bf16", Role::In, 16, {m, i * 2});
  p.arg("out", "bf16", Role::Out, 16, {m, i});
  Expr grid = min(ceilDiv(m * floorDiv(i, 8), e.threads(0)), kMaxUnpermuteGrid);
  p.launch(0, grid, compare(">=", m, 1))
      .mem("input", {m, i * 2})
      .mem("out", {m, i});
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

/// The plan of the entry `keys` into `scope`, by its abi.
LogicalResult writeSteps(Location loc, const EntryKeys &keys, Scope &scope,
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
  else if (abi == "quantize.v1")
    quantizePlan(keys, scope);
  else if (abi == "grouped_wgrad.v1")
    wgradPlan(keys, scope);
  else if (abi == "planned.v1" && keys.string("op") == "moe.swiglu_grad")
    swigluGradPlan(keys, scope);
  else if (abi == "planned.v1" && keys.string("op") == "moe.route_grad")
    routeGradPlan(keys, scope);
  else if (abi == "planned.v1" && keys.string("op") == "moe.swiglu")
    swigluPlan(keys, scope);
  else if (abi == "planned.v1" && keys.string("op") == "moe.unpermute_grad")
    unpermuteGradPlan(keys, scope);
  else if (abi == "planned.v1" && keys.string("op") == "moe.unpermute")
    unpermutePlan(keys, scope);
  else if (abi == "planned.v1" && keys.string("op") == "moe.grouped_wgrad")
    wgradPlan(keys, scope);
  else if (abi == "planned.v1" && keys.string("op") == "arith.constant")
    constantPlan(keys, scope);
  else if (abi == "grouped_matmul.v3" || abi == "grouped_matmul_fp8.v1") {
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
} // namespace

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
  // intermediate part the gate-up GEMM writes the e4m3 activation.
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
                                    {"scales", "@rows_scale"}}))) ||
      failed(steps("gate_up",
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
                                        {"scales", "@inter_scale"}}))) ||
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
  FailureOr<DictionaryAttr> dict = plan.build(b, loc, [&](StringRef role) {
    auto it = byRole.find(role.str());
    return it == byRole.end() ? int64_t(0) : int64_t(it->second.kernels.size());
  });
  if (failed(dict))
    return failure();
  info.set("plan", *dict);
  return success();
}
