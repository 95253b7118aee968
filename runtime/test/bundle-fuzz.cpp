//===- bundle-fuzz.cpp - libFuzzer target for the bundle reader -----------===//
//
// Each input is a candidate .moebundle: moeBundleOpenMemory, then, when it is
// accepted, every introspection call, checked against what the reader
// guarantees of each ABI's entries (contract §2: keys, ranges, how a
// layer's parts chain), and for every entry with a launch plan
// (docs/launch-plans.md) its signature (moeEntryGetSignature, GetSize,
// GetArg, against the reader's own data), moeEntryArgShape of every
// argument, moeWorkspaceBytes and moeLaunch on the fake driver, with the
// sizes at their minimums and at larger values from the input (clamped to
// their ranges), non-overlapping aligned addresses 2^40 apart and the
// workspace moeWorkspaceBytes asks for (not above 2^50 bytes); a launch
// records the bytes of its parameters where the plan says unambiguously
// what the kernel takes, and launches only the plan's kernels with their
// blocks. Then moeBundleClose. Whatever the runtime answers, an error has a
// message. Built with MOE_ENABLE_FUZZER=ON (address and undefined
// sanitizers); seeds in runtime/test/bundle-corpus/.
//
//===----------------------------------------------------------------------===//

#include "Bundle.h"
#include "FakeDriver.h"
#include "moe_runtime.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace moe_test;

namespace {

void require(bool condition) {
  if (!condition)
    __builtin_trap();
}

uint64_t hashOf(const uint8_t *data, size_t size) {
  uint64_t hash = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i)
    hash = (hash ^ data[i]) * 1099511628211ull;
  return hash;
}

/// A failed call has a message.
void requireAnswered(moeStatus status) {
  require(status == MOE_STATUS_SUCCESS || *moeLastErrorMessage() != '\0');
}

void checkRoute(const moeEntryInfo &entry, const moeKernelInfo &kernel) {
  require(entry.experts >= 1 && entry.top_k >= 1 && entry.top_k <= 32 &&
          entry.top_k <= entry.experts);
  require(entry.logits_bits == 32 || entry.logits_bits == 16);
  require(kernel.threads % 32 == 0);
}

void checkQuantize(const moeEntryInfo &entry, const moeKernelInfo &kernel) {
  require(std::strcmp(entry.op, MOE_OP_QUANTIZE) == 0 ||
          std::strcmp(entry.op, MOE_OP_EXPERT_MLP) == 0);
  require(std::strcmp(entry.element, MOE_ELEMENT_E4M3) == 0 ||
          std::strcmp(entry.element, MOE_ELEMENT_E5M2) == 0);
  const bool e8m0 = std::strcmp(entry.scale, MOE_SCALE_E8M0) == 0;
  require(e8m0 || std::strcmp(entry.scale, MOE_SCALE_F32) == 0);
  require(entry.input_bits == 16 || entry.input_bits == 32);
  const int64_t br = entry.block_rows, bc = entry.block_cols;
  require((br == 1 && bc >= 8 && bc <= 256 && (bc & (bc - 1)) == 0) ||
          (br == 128 && bc == 128));
  require(!e8m0 || (br == 1 && bc == 32));
  require(entry.rank == 2 || entry.rank == 3);
  require(entry.rank == 3 || entry.batch == 1);
  require(entry.batch == -1 || entry.batch >= 1);
  require(entry.rows == -1 || (entry.rows >= 1 && entry.rows % br == 0));
  require(entry.cols == -1 || (entry.cols >= 1 && entry.cols % bc == 0));
  require(kernel.threads % 32 == 0);
}

void checkUnpermute(const moeEntryInfo &entry) {
  require(entry.top_k >= 1);
  require(entry.hidden == -1 || (entry.hidden >= 8 && entry.hidden % 8 == 0));
  require(entry.slots_bits == 32 || entry.slots_bits == 64);
}

void checkPermute(const moeEntryInfo &entry, int64_t scatterFrom) {
  // scatter_from: a fourth kernel, the scatter.
  require(entry.num_kernels == (scatterFrom ? 4 : 3));
  require(entry.experts >= 1 && entry.experts <= 1024 && entry.top_k >= 1);
  require(entry.chunk >= 32 && entry.chunk <= 65536 && entry.chunk % 32 == 0);
  require(entry.hidden == -1 || (entry.hidden >= 8 && entry.hidden % 8 == 0));
  require(entry.offsets_bits == 32 || entry.offsets_bits == 64);
  // out=f8E4M3FN: the gather writes e4m3 rows and their scales per [1, 128]
  // group of a row (a static H of whole groups); only then scatter_from.
  const bool fp8Out = std::strcmp(entry.out, MOE_OUT_E4M3) == 0;
  require(fp8Out || std::strcmp(entry.out, MOE_OUT_BF16) == 0);
  require(!fp8Out || entry.hidden == -1 || entry.hidden % 128 == 0);
  require(!scatterFrom || fp8Out);
}

/// A layer's parts: earlier entries that chain as contract §2 says; a
/// layer.v1 entry has no quantize parts, a layer_fp8.v1 entry block-FP8
/// GEMMs, a quantize part exactly when its permute writes bf16 rows and an
/// intermediate part exactly when its gate_up writes bf16.
void checkLayer(moeBundle *bundle, int32_t e, const moeEntryInfo &entry,
                const moe::runtime::BundleData &parsed) {
  require(entry.num_kernels == 0 && entry.max_rows >= 1);
  const bool fp8 = std::strcmp(entry.abi, MOE_ABI_LAYER_FP8) == 0;
  const char *gemmAbi =
      fp8 ? MOE_ABI_GROUPED_MATMUL_FP8 : MOE_ABI_GROUPED_MATMUL;
  enum { kRoute, kPermute, kQuantize, kGateUp, kIntermediate, kDown, kCombine };
  const char *names[7] = {entry.route,    entry.permute,      entry.quantize,
                          entry.gate_up,  entry.intermediate, entry.down,
                          entry.unpermute};
  const char *abis[7] = {MOE_ABI_ROUTE,    MOE_ABI_PERMUTE,  MOE_ABI_QUANTIZE,
                         gemmAbi,          MOE_ABI_QUANTIZE, gemmAbi,
                         MOE_ABI_UNPERMUTE};
  moeEntryInfo parts[7];
  int32_t index[7] = {-1, -1, -1, -1, -1, -1, -1};
  for (int p = 0; p < 7; ++p) {
    const bool quantizePart = p == kQuantize || p == kIntermediate;
    require(quantizePart ? (*names[p] == '\0' || fp8) : *names[p] != '\0');
    if (!*names[p])
      continue;
    require(moeBundleFindEntry(bundle, names[p], &index[p]) ==
                MOE_STATUS_SUCCESS &&
            index[p] < e);
    require(moeBundleGetEntry(bundle, index[p], &parts[p]) ==
            MOE_STATUS_SUCCESS);
    require(std::strcmp(parts[p].abi, abis[p]) == 0);
  }
  const moeEntryInfo &route = parts[kRoute], &permute = parts[kPermute],
                     &gateUp = parts[kGateUp], &down = parts[kDown],
                     &unpermute = parts[kCombine];
  require(std::strcmp(gateUp.epilogue, "swiglu") == 0 &&
          std::strcmp(down.epilogue, "store") == 0);
  // One format for both GEMMs: MXFP8's scales are made by both quantize
  // parts.
  require(std::strcmp(gateUp.format, down.format) == 0);
  const bool mx = std::strcmp(gateUp.format, MOE_FORMAT_MXFP8) == 0;
  require(!mx || (index[kQuantize] >= 0 && index[kIntermediate] >= 0));
  const bool gateUpQuantizes = std::strcmp(gateUp.out, MOE_OUT_E4M3) == 0;
  require(std::strcmp(down.out, MOE_OUT_BF16) == 0 &&
          (gateUpQuantizes || std::strcmp(gateUp.out, MOE_OUT_BF16) == 0));
  require(gateUpQuantizes == (fp8 && index[kIntermediate] < 0));
  const bool gatherQuantizes = std::strcmp(permute.out, MOE_OUT_E4M3) == 0;
  require(gatherQuantizes || std::strcmp(permute.out, MOE_OUT_BF16) == 0);
  require(gatherQuantizes == (fp8 && index[kQuantize] < 0));
  const int64_t scatterFrom = parsed.entries[index[kPermute]].scatterFrom;
  require(!scatterFrom || gatherQuantizes);
  require(permute.num_kernels == (scatterFrom ? 4 : 3));
  // A route's shared-expert slots are experts and slots of the layer's
  // other parts (--moe-route-shared-experts).
  const int64_t shared = parsed.entries[index[kRoute]].shared;
  const int64_t experts = route.experts + shared, slots = route.top_k + shared;
  require(permute.experts == experts && permute.top_k == slots &&
          unpermute.top_k == slots && unpermute.weighted == 1);
  require(gateUp.offsets_bits == permute.offsets_bits &&
          down.offsets_bits == permute.offsets_bits &&
          unpermute.slots_bits == permute.offsets_bits);
  require(gateUp.experts == -1 || gateUp.experts == experts);
  require(down.experts == -1 || down.experts == experts);
  // An FP8 layer's quantizes make e4m3 values and f32 scales per [1, 128]
  // of the bf16 rows (mxfp8: E8M0 scales per [1, 32]).
  for (int p : {kQuantize, kIntermediate})
    require(index[p] < 0 ||
            (std::strcmp(parts[p].element, MOE_ELEMENT_E4M3) == 0 &&
             std::strcmp(parts[p].scale, mx ? MOE_SCALE_E8M0 : MOE_SCALE_F32) ==
                 0 &&
             parts[p].input_bits == 16 && parts[p].block_rows == 1 &&
             parts[p].block_cols == (mx ? 32 : 128) && parts[p].rank == 2));
  // The static H of the parts agree, and the static I.
  int64_t hidden = -1;
  for (int64_t value :
       {permute.hidden, index[kQuantize] >= 0 ? parts[kQuantize].cols : -1,
        gateUp.k, down.n, unpermute.hidden})
    if (value != -1) {
      require(hidden == -1 || value == hidden);
      hidden = value;
    }
  int64_t inter = gateUp.n != -1 ? gateUp.n / 2 : -1;
  for (int64_t value :
       {index[kIntermediate] >= 0 ? parts[kIntermediate].cols : -1, down.k})
    if (value != -1) {
      require(inter == -1 || value == inter);
      inter = value;
    }
}

/// The bytes of each kernel parameter a plan parameter passes.
void appendSizes(const moe::runtime::PlanParam &param,
                 std::vector<size_t> &sizes) {
  using Kind = moe::runtime::PlanParam::Kind;
  switch (param.kind) {
  case Kind::Memref:
    sizes.insert(sizes.end(), 3 + 2 * param.dims.size(), 8);
    break;
  case Kind::I32:
    sizes.push_back(4);
    break;
  case Kind::I64:
    sizes.push_back(8);
    break;
  case Kind::TensorMap:
    sizes.push_back(128);
    break;
  }
}

/// Declares to the fake the parameters of every kernel the plans launch
/// where they tell them unambiguously (a symbol launched with different
/// parameters by two steps is left undeclared: its launches record none).
void declareKernels(const moe::runtime::BundleData &parsed) {
  std::map<std::string, std::vector<size_t>> layouts;
  std::map<std::string, bool> ambiguous;
  for (size_t e = 0; e < parsed.entries.size(); ++e)
    for (const moe::runtime::PlanStep &step : parsed.entries[e].plan.steps) {
      const moe::runtime::Entry &owner =
          parsed.entries[step.entry < 0 ? e : size_t(step.entry)];
      const std::string &symbol = owner.kernels[size_t(step.kernel)].symbol;
      std::vector<size_t> sizes;
      for (const moe::runtime::PlanParam &param : step.params)
        appendSizes(param, sizes);
      auto [it, added] = layouts.insert({symbol, sizes});
      if (!added && it->second != sizes)
        ambiguous[symbol] = true;
    }
  for (const auto &[symbol, sizes] : layouts)
    if (!ambiguous.count(symbol))
      fakeGpu().rawParams[symbol] = sizes;
}

/// The value of `expr` over the sizes chosen so far, or `fallback`.
int64_t valueOf(const moe::contract::PlanExpr &expr,
                const moe::runtime::Plan &plan,
                const std::vector<int64_t> &sizes, int64_t fallback) {
  auto lookup = [&](const std::string &name, bool nullTest, int64_t &out) {
    for (size_t i = 0; i < sizes.size() && !nullTest; ++i)
      if (plan.sizes[i].name == name) {
        out = sizes[i];
        return true;
      }
    return false;
  };
  int64_t value = 0;
  std::string error;
  return expr.evaluate(lookup, value, error) ? value : fallback;
}

/// One call of entry `e` by its plan with `sizes`: moeEntryArgShape of
/// every argument, moeWorkspaceBytes, then moeLaunch (unless the workspace
/// is absurd).
void callPlan(moeBundle *bundle, const moe::runtime::BundleData &parsed,
              size_t e, const std::vector<int64_t> &sizes) {
  const moe::runtime::Entry &entry = parsed.entries[e];
  const moe::runtime::Plan &plan = entry.plan;
  const char *name = entry.name.c_str();
  const int32_t numSizes = int32_t(sizes.size());
  for (size_t a = 0; a < plan.args.size(); ++a) {
    int64_t dims[MOE_MAX_RANK + 1];
    dims[plan.args[a].dims.size()] = -77;
    moeStatus status = moeEntryArgShape(bundle, name, int32_t(a), sizes.data(),
                                        numSizes, dims);
    requireAnswered(status);
    require(dims[plan.args[a].dims.size()] == -77); // nothing past the rank
  }
  uint64_t bytes = 0;
  moeStatus status =
      moeWorkspaceBytes(bundle, name, sizes.data(), numSizes, &bytes);
  requireAnswered(status);
  require(status == MOE_STATUS_SUCCESS ||
          status == MOE_STATUS_INVALID_ARGUMENT);
  require(status != MOE_STATUS_SUCCESS || !plan.work.empty() || bytes == 0);
  if (status == MOE_STATUS_SUCCESS && bytes > (uint64_t(1) << 50))
    return;
  std::vector<uint64_t> args;
  for (size_t i = 0; i < plan.args.size(); ++i)
    args.push_back((uint64_t(i) + 1) << 40);
  moeLaunchArgs launch = {sizes.data(),
                          numSizes,
                          int32_t(args.size()),
                          args.data(),
                          (uint64_t(args.size()) + 1) << 40,
                          status == MOE_STATUS_SUCCESS ? bytes : 0};
  const size_t before = fakeGpu().launches.size();
  status = moeLaunch(bundle, name, &launch, nullptr);
  requireAnswered(status);
  const size_t made = fakeGpu().launches.size() - before;
  require(made <= plan.steps.size());
  // A success launched only the plan's kernels, in step order, each with
  // its kernel line's block and shared memory and the parameters declared.
  if (status != MOE_STATUS_SUCCESS)
    return;
  size_t step = 0;
  for (size_t i = before; i < fakeGpu().launches.size(); ++i) {
    const FakeLaunch &l = fakeGpu().launches[i];
    bool found = false;
    for (; step < plan.steps.size() && !found; ++step) {
      const moe::runtime::PlanStep &s = plan.steps[step];
      const moe::runtime::Kernel &kernel =
          parsed.entries[s.entry < 0 ? e : size_t(s.entry)]
              .kernels[size_t(s.kernel)];
      found = kernel.symbol == l.function &&
              l.block[0] == unsigned(kernel.threads) &&
              l.smem == unsigned(kernel.smem) && l.grid[0] >= 1;
    }
    require(found);
    auto declared = fakeGpu().rawParams.find(l.function);
    require(declared == fakeGpu().rawParams.end() ||
            l.raw.size() == declared->second.size());
  }
}

/// Entries with a launch plan: their signature as the reader parsed it,
/// then calls with the sizes at their minimums and at larger values from
/// the hash, each clamped into its range. Entries without one: refused.
void exercisePlans(moeBundle *bundle, const moe::runtime::BundleData &parsed,
                   uint64_t hash) {
  declareKernels(parsed);
  for (size_t e = 0; e < parsed.entries.size(); ++e) {
    const moe::runtime::Entry &entry = parsed.entries[e];
    const char *name = entry.name.c_str();
    moeSignature signature;
    moeStatus status = moeEntryGetSignature(bundle, name, &signature);
    if (!entry.planLine) {
      require(parsed.version < 7 && status == MOE_STATUS_INVALID_ARGUMENT);
      continue;
    }
    require(status == MOE_STATUS_SUCCESS);
    const moe::runtime::Plan &plan = entry.plan;
    require(size_t(signature.num_sizes) == plan.sizes.size() &&
            size_t(signature.num_args) == plan.args.size() &&
            size_t(signature.num_checks) == plan.checks.size() &&
            size_t(signature.num_slices) == plan.work.size() &&
            size_t(signature.num_steps) == plan.steps.size());
    for (int32_t i = 0; i < signature.num_sizes; ++i) {
      moeSizeInfo size;
      require(moeEntryGetSize(bundle, name, i, &size) == MOE_STATUS_SUCCESS);
      require(plan.sizes[size_t(i)].name == size.name && size.min && size.max);
    }
    for (int32_t i = 0; i < signature.num_args; ++i) {
      moeArgInfo arg;
      require(moeEntryGetArg(bundle, name, i, &arg) == MOE_STATUS_SUCCESS);
      require(plan.args[size_t(i)].name == arg.name && arg.dims &&
              arg.dtype >= MOE_DTYPE_BF16 && arg.dtype <= MOE_DTYPE_E8M0 &&
              arg.role >= MOE_ARG_IN && arg.role <= MOE_ARG_DONATED &&
              arg.align >= 1 && arg.align <= 256 &&
              (arg.align & (arg.align - 1)) == 0 && arg.rank >= 0 &&
              arg.rank <= MOE_MAX_RANK);
    }
    moeArgInfo arg;
    require(moeEntryGetArg(bundle, name, signature.num_args, &arg) ==
            MOE_STATUS_INVALID_ARGUMENT);
    uint64_t h = hash + e * 0x9e3779b97f4a7c15ull;
    for (int larger = 0; larger < 2; ++larger) {
      std::vector<int64_t> sizes;
      for (size_t i = 0; i < plan.sizes.size(); ++i) {
        int64_t min = valueOf(plan.sizes[i].min, plan, sizes, 1);
        int64_t max = valueOf(plan.sizes[i].max, plan, sizes, min);
        int64_t value = min;
        if (larger) {
          const int64_t step = 1 + int64_t((h >> (7 * i)) % 70000);
          value = max - min > step ? min + step : max;
          value = std::max(value, min);
        }
        sizes.push_back(value);
      }
      callPlan(bundle, parsed, e, sizes);
    }
  }
}

void exercise(moeBundle *bundle, const moe::runtime::BundleData &parsed,
              uint64_t hash) {
  moeBundleInfo info;
  require(moeBundleGetInfo(bundle, &info) == MOE_STATUS_SUCCESS);
  require((info.version == 6 || info.version == MOE_BUNDLE_VERSION) &&
          std::strlen(info.chip) > 3);
  require(size_t(info.num_entries) == parsed.entries.size());
  for (int32_t e = 0; e < info.num_entries; ++e) {
    moeEntryInfo entry;
    require(moeBundleGetEntry(bundle, e, &entry) == MOE_STATUS_SUCCESS);
    require(entry.activation && entry.route && entry.permute && entry.gate_up &&
            entry.down && entry.unpermute);
    const bool fp8Layer = std::strcmp(entry.abi, MOE_ABI_LAYER_FP8) == 0;
    const bool layer = fp8Layer || std::strcmp(entry.abi, MOE_ABI_LAYER) == 0;
    // Layers and programs launch their parts' kernels, none of their own.
    const bool program = std::strcmp(entry.abi, MOE_ABI_PROGRAM) == 0;
    require((layer || program) == (entry.num_kernels == 0) &&
            entry.num_kernels <= 16);
    // An FP8 layer's quantize and intermediate are optional (checkLayer
    // checks them); the other entries have neither.
    require(
        entry.quantize && entry.intermediate &&
        (fp8Layer || (*entry.quantize == '\0' && *entry.intermediate == '\0')));
    int32_t found = -1;
    require(moeBundleFindEntry(bundle, entry.name, &found) ==
                MOE_STATUS_SUCCESS &&
            found == e);
    // A stage (contract §3.14) is a program; one with an exchange names its
    // ranks, one without names no exchange values.
    moeStageInfo stage;
    moeStatus staged = moeBundleGetStage(bundle, e, &stage);
    require(staged == MOE_STATUS_SUCCESS || staged == MOE_STATUS_NOT_FOUND);
    if (staged == MOE_STATUS_SUCCESS)
      require(program && *stage.function && stage.stage >= 0 &&
              *stage.function_args && *stage.function_results &&
              (*stage.exchange != '\0') == (stage.ranks > 0) &&
              (*stage.exchange != '\0') == (*stage.exchange_args != '\0') &&
              (*stage.exchange != '\0') == (*stage.exchange_results != '\0'));
    const bool fp8 = std::strcmp(entry.abi, MOE_ABI_GROUPED_MATMUL_FP8) == 0;
    const bool gemm =
        fp8 || std::strcmp(entry.abi, MOE_ABI_GROUPED_MATMUL) == 0;
    const bool route = std::strcmp(entry.abi, MOE_ABI_ROUTE) == 0;
    const bool permute = std::strcmp(entry.abi, MOE_ABI_PERMUTE) == 0;
    const bool quantize = std::strcmp(entry.abi, MOE_ABI_QUANTIZE) == 0;
    const bool wgrad = std::strcmp(entry.abi, MOE_ABI_GROUPED_WGRAD) == 0;
    const bool planned = std::strcmp(entry.abi, MOE_ABI_PLANNED) == 0;
    require(gemm || route || permute || layer || quantize || wgrad || planned ||
            program || std::strcmp(entry.abi, MOE_ABI_UNPERMUTE) == 0);
    // The quantize fields: set exactly for quantize entries.
    require(entry.element && entry.scale);
    require(quantize == (*entry.element != '\0') &&
            quantize == (*entry.scale != '\0') &&
            quantize == (entry.rank != 0));
    require(quantize || (entry.input_bits == 0 && entry.block_rows == 0 &&
                         entry.block_cols == 0 && entry.batch == 0 &&
                         entry.rows == 0 && entry.cols == 0));
    require(layer == (*entry.route != '\0') &&
            gemm == (*entry.activation != 0));
    require(gemm || entry.bias_bits == 0);
    // (A permute's three, four with scatter_from: checkPermute.)
    require(gemm || layer || permute || planned || program ||
            entry.num_kernels == 1);
    require(!planned || entry.num_kernels >= 1);
    require(permute == (entry.chunk != 0));
    // format: "fp8_block" or "mxfp8" exactly for FP8 entries, whose op is
    // moe.grouped_matmul or moe.expert_mlp.
    require(entry.format);
    const bool mx = std::strcmp(entry.format, MOE_FORMAT_MXFP8) == 0;
    require(fp8 ? mx || std::strcmp(entry.format, MOE_FORMAT_FP8_BLOCK) == 0
                : *entry.format == '\0');
    require(!fp8 || std::strcmp(entry.op, MOE_OP_GROUPED_MATMUL) == 0 ||
            std::strcmp(entry.op, MOE_OP_EXPERT_MLP) == 0);
    // out: "bf16" or "f8E4M3FN" (FP8 swiglu entries only) for grouped
    // matmuls and permutes, "" for the other ABIs.
    require(entry.out);
    const bool fp8Out = std::strcmp(entry.out, MOE_OUT_E4M3) == 0;
    require(gemm || permute
                ? fp8Out || std::strcmp(entry.out, MOE_OUT_BF16) == 0
                : *entry.out == '\0');
    require(!fp8Out || permute ||
            (fp8 && !mx && std::strcmp(entry.epilogue, "swiglu") == 0 &&
             (entry.n == -1 || entry.n % 256 == 0)));
    moeKernelInfo kernels[16];
    for (int32_t k = 0; k < entry.num_kernels; ++k) {
      moeKernelInfo &kernel = kernels[k];
      require(moeBundleGetKernel(bundle, e, k, &kernel) == MOE_STATUS_SUCCESS);
      if (gemm)
        require(kernel.rows_min >= 1 && kernel.rows_min <= kernel.rows_max);
      else
        require(kernel.rows_min == 0 && kernel.rows_max == 0 &&
                kernel.tile_m == 0 && kernel.threads >= 1);
    }
    if (layer) {
      checkLayer(bundle, e, entry, parsed);
      continue;
    }
    if (permute) {
      require(entry.epilogue && !*entry.epilogue && entry.n == 0 &&
              entry.k == 0 && entry.slots_bits == 0 && entry.bias == 0);
      checkPermute(entry, parsed.entries[e].scatterFrom);
      continue;
    }
    // A weight gradient: its shapes and offsets; a planned op: its plan.
    if (wgrad) {
      require(std::strcmp(entry.op, MOE_OP_GROUPED_WGRAD) == 0 &&
              entry.epilogue && !*entry.epilogue && entry.n != 0 &&
              entry.k != 0 && entry.experts != 0 &&
              (entry.offsets_bits == 32 || entry.offsets_bits == 64));
      continue;
    }
    if (planned || program) {
      require(entry.epilogue && !*entry.epilogue && entry.n == 0 &&
              entry.k == 0 && entry.offsets_bits == 0);
      continue;
    }
    if (!gemm) {
      require(entry.epilogue && !*entry.epilogue && entry.n == 0 &&
              entry.k == 0 && entry.offsets_bits == 0);
      if (route)
        checkRoute(entry, kernels[0]);
      else if (quantize)
        checkQuantize(entry, kernels[0]);
      else
        checkUnpermute(entry);
      continue;
    }
    require(entry.top_k == 0 && entry.hidden == 0 && entry.weighted == 0 &&
            entry.bias == 0);
    const bool swiglu = std::strcmp(entry.epilogue, "swiglu") == 0;
    const bool rowScale = std::strcmp(entry.epilogue, "row_scale") == 0;
    // weights=kn: a dgrad stores plainly, without a bias.
    require(std::strcmp(entry.op, MOE_OP_GROUPED_DGRAD) != 0 ||
            (!swiglu && !rowScale && entry.bias_bits == 0 && !fp8));
    require(swiglu || rowScale || std::strcmp(entry.epilogue, "store") == 0);
    require(!swiglu || entry.n == -1 || entry.n % 2 == 0);
    // swiglu entries have an activation, the others none.
    require(swiglu == (std::strcmp(entry.activation, "none") != 0));
    require(entry.bias_bits == 0 || entry.bias_bits == 16 ||
            entry.bias_bits == 32);
    // A cluster kernel (its `cluster`, which the C API does not report)
    // is of the normal form.
    for (int32_t k = 0; k < entry.num_kernels; ++k) {
      const moe::runtime::Kernel &record = parsed.entries[e].kernels[k];
      require(record.symbol == kernels[k].symbol);
      require(record.cluster == 1 ||
              (record.cluster == 2 && !kernels[k].swap_ab));
    }
  }
  exercisePlans(bundle, parsed, hash);
}

} // namespace

/// What a bundle that opened must not survive: a byte of one of its images
/// damaged (version 7 records their checksums: INVALID_BUNDLE), and a chip
/// the compiler builds no kernels for (UNSUPPORTED).
void requireDamageRefused(const uint8_t *data, size_t size,
                          const moe::runtime::BundleData &parsed,
                          uint64_t seed) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  auto refuses = [](const std::string &changed, moeStatus expected) {
    moeBundle *bundle = nullptr;
    moeStatus status =
        moeBundleOpenMemory(changed.data(), changed.size(), &bundle);
    require(status == expected && bundle == nullptr);
  };
  if (parsed.version >= 7 && !parsed.images.empty()) {
    const moe::runtime::Image &image =
        parsed.images[seed % parsed.images.size()];
    // Its payload follows its line: "image <name> <size> fnv1a64=<hex>\n".
    std::string head = "\nimage " + image.name + " ";
    size_t line = bytes.find(head);
    require(line != std::string::npos);
    size_t payload = bytes.find('\n', line + 1) + 1;
    std::string damaged = bytes;
    damaged[payload + (seed >> 8) % image.size] ^= uint8_t(1 + seed % 255);
    refuses(damaged, MOE_STATUS_INVALID_BUNDLE);
  }
  size_t chip = bytes.find("\nchip " + parsed.chip + "\n");
  require(chip != std::string::npos);
  std::string other = bytes;
  other.replace(chip + 6, parsed.chip.size(), (seed & 1) ? "sm_80" : "sm_120a");
  refuses(other, MOE_STATUS_UNSUPPORTED);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FakeGpu &gpu = installFakeDriver();
  gpu.recordImages = false; // fuzzed images may be shorter than 16 bytes
  // A plan's kernels take any parameters: only those declared are read.
  gpu.readUndeclaredParams = false;
  moeBundle *bundle = nullptr;
  moeStatus status = moeBundleOpenMemory(data, size, &bundle);
  require((status == MOE_STATUS_SUCCESS) == (bundle != nullptr));
  requireAnswered(status);
  if (bundle) {
    // The reader's own data, for what the C API does not report.
    moe::runtime::BundleData parsed;
    std::string error;
    require(moe::runtime::parseBundle(data, size, parsed, error) ==
            MOE_STATUS_SUCCESS);
    exercise(bundle, parsed, hashOf(data, size));
    requireDamageRefused(data, size, parsed, hashOf(data, size));
  }
  moeBundleClose(bundle);
  return 0;
}
