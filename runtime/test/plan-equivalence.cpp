//===- plan-equivalence.cpp - plans against the hand-written host code ----===//
//
// Usage: moe-plan-equivalence <bundle>...
// For every entry of each bundle that has a launch plan, on the fake driver:
// calls the entry's ABI function (moeRoute, moeGroupedMatmul, moeLayer, ...)
// and moeLaunch with the same buffers and sizes, for several sizes, and
// compares what they launch: kernels, grids, blocks, shared memory, launch
// attributes, every parameter byte, and the tensor maps' encodings. Prints
// `N entries, N calls compared` and exits non-zero on any difference
// (migration step 2 of docs/launch-plans.md).
//
//===----------------------------------------------------------------------===//

#include "Bundle.h"
#include "FakeDriver.h"
#include "Plan.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

using namespace moe::runtime;
using namespace moe_test;

namespace {

int failures = 0;
int refused = 0; // calls both paths refused (compared, but launch nothing)

void report(const std::string &where, const std::string &what) {
  std::printf("DIFFERENT %s: %s\n", where.c_str(), what.c_str());
  ++failures;
}

/// A device address per argument name, 2^40 apart: no two buffers overlap.
uint64_t addressOf(const std::string &name) {
  static std::map<std::string, uint64_t> addresses;
  auto it = addresses.find(name);
  if (it != addresses.end())
    return it->second;
  uint64_t address = (uint64_t(addresses.size()) + 1) << 40;
  addresses[name] = address;
  return address;
}
constexpr uint64_t kWorkspace = uint64_t(1000) << 40;
constexpr uint64_t kWorkspaceBytes = uint64_t(1) << 40;

/// What one call launched, with each tensor map replaced by its encoding.
struct Recorded {
  moeStatus status = MOE_STATUS_SUCCESS;
  std::string error;
  std::vector<FakeLaunch> launches;
  std::vector<FakeEncode> encodes;
};

template <typename Call> Recorded record(Call call) {
  fakeGpu().launches.clear();
  fakeGpu().encodes.clear();
  Recorded r;
  r.status = call();
  if (r.status != MOE_STATUS_SUCCESS)
    r.error = moeLastErrorMessage();
  r.launches = fakeGpu().launches;
  r.encodes = fakeGpu().encodes;
  return r;
}

bool sameEncode(const FakeEncode &a, const FakeEncode &b) {
  return a.dataType == b.dataType && a.rank == b.rank &&
         a.address == b.address &&
         !std::memcmp(a.dims, b.dims, sizeof(a.dims)) &&
         !std::memcmp(a.strides, b.strides, sizeof(a.strides)) &&
         !std::memcmp(a.box, b.box, sizeof(a.box)) &&
         !std::memcmp(a.elementStrides, b.elementStrides,
                      sizeof(a.elementStrides)) &&
         a.interleave == b.interleave && a.swizzle == b.swizzle &&
         a.l2Promotion == b.l2Promotion && a.oobFill == b.oobFill;
}

void compare(const std::string &where, const Recorded &abi,
             const Recorded &plan) {
  if (abi.status != MOE_STATUS_SUCCESS && abi.status == plan.status)
    ++refused;
  if (abi.status != plan.status) {
    report(where, "status " + std::string(moeStatusName(abi.status)) + " (" +
                      abi.error + ") vs " + moeStatusName(plan.status) + " (" +
                      plan.error + ")");
    return;
  }
  if (abi.launches.size() != plan.launches.size()) {
    report(where, std::to_string(abi.launches.size()) + " launches vs " +
                      std::to_string(plan.launches.size()));
    return;
  }
  for (size_t i = 0; i < abi.launches.size(); ++i) {
    const FakeLaunch &a = abi.launches[i], &b = plan.launches[i];
    std::string at =
        where + " launch " + std::to_string(i) + " (" + a.function + ")";
    if (a.function != b.function || a.grid[0] != b.grid[0] ||
        a.block[0] != b.block[0] || a.smem != b.smem || a.ex != b.ex ||
        a.attributes.size() != b.attributes.size()) {
      report(at, "kernel/grid/block/smem/attributes: " + b.function + " " +
                     std::to_string(a.grid[0]) + " vs " +
                     std::to_string(b.grid[0]));
      continue;
    }
    for (size_t k = 0; k < a.attributes.size(); ++k)
      if (a.attributes[k].id != b.attributes[k].id ||
          a.attributes[k].value != b.attributes[k].value)
        report(at, "attribute " + std::to_string(k));
    if (a.raw.size() != b.raw.size()) {
      report(at, std::to_string(a.raw.size()) + " parameters vs " +
                     std::to_string(b.raw.size()));
      continue;
    }
    for (size_t p = 0; p < a.raw.size(); ++p) {
      if (a.raw[p].size() == 128) { // a tensor map: compare the encodings
        uint64_t ea = 0, eb = 0;
        std::memcpy(&ea, a.raw[p].data(), 8);
        std::memcpy(&eb, b.raw[p].data(), 8);
        if (!ea || !eb || ea > abi.encodes.size() || eb > plan.encodes.size() ||
            !sameEncode(abi.encodes[ea - 1], plan.encodes[eb - 1]))
          report(at, "tensor map parameter " + std::to_string(p));
        continue;
      }
      if (a.raw[p] != b.raw[p])
        report(at, "parameter " + std::to_string(p));
    }
  }
}

/// The sizes a plan's entry is called with: each from `base`, within the
/// size's range (ranges may read earlier sizes).
std::vector<int64_t> sizesFor(const Entry &entry, int64_t base) {
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < entry.plan.sizes.size(); ++i) {
    const PlanSize &size = entry.plan.sizes[i];
    auto bound = [&](const PlanExpr &e) {
      int64_t v = 0;
      std::string error;
      e.evaluate(
          [&](const std::string &name, bool, int64_t &out) {
            for (size_t j = 0; j < i; ++j)
              if (entry.plan.sizes[j].name == name) {
                out = sizes[j];
                return true;
              }
            return false;
          },
          v, error);
      return v;
    };
    int64_t min = bound(size.min), max = bound(size.max);
    // Hidden and intermediate sizes: a multiple of 128 near 1024.
    int64_t value = size.name == "T" || size.name == "M" ? base : 1024;
    if (size.name == "E")
      value = 8;
    sizes.push_back(std::max(min, std::min(max, value)));
  }
  return sizes;
}

int64_t sizeNamed(const Entry &entry, const std::vector<int64_t> &sizes,
                  const char *name, int64_t fallback) {
  for (size_t i = 0; i < entry.plan.sizes.size(); ++i)
    if (entry.plan.sizes[i].name == name)
      return sizes[i];
  return fallback;
}

/// Calls the entry's ABI function with the plan's buffers (by argument
/// name) and sizes.
moeStatus callAbi(moeBundle *bundle, const BundleData &parsed,
                  const Entry &entry, const std::vector<int64_t> &sizes) {
  const char *name = entry.name.c_str();
  auto has = [&](const char *arg) { return entry.plan.findArg(arg) >= 0; };
  auto at = [&](const char *arg) { return has(arg) ? addressOf(arg) : 0; };
  int64_t tokens = sizeNamed(entry, sizes, "T", 0);
  switch (entry.kind) {
  case Abi::Route: {
    moeRouteArgs a{};
    a.logits = at("logits");
    a.bias = at("bias");
    a.ids = at("ids");
    a.weights = at("weights");
    a.tokens = tokens;
    a.experts = entry.experts;
    return moeRoute(bundle, name, &a, nullptr);
  }
  case Abi::Unpermute: {
    moeUnpermuteArgs a{};
    a.rows = at("rows");
    a.slots = at("slots");
    a.weights = at("weights");
    a.out = at("out");
    a.rows_count = sizeNamed(entry, sizes, "M", 0);
    a.tokens = tokens;
    a.hidden = sizeNamed(entry, sizes, "H", entry.hidden);
    return moeUnpermute(bundle, name, &a, nullptr);
  }
  case Abi::Permute: {
    moePermuteArgs a{};
    a.tokens = at("tokens");
    a.ids = at("ids");
    a.rows = at("rows");
    a.offsets = at("offsets");
    a.slots = at("slots");
    a.rows_scale = at("rows_scale");
    a.workspace = kWorkspace;
    a.tokens_count = tokens;
    a.hidden = sizeNamed(entry, sizes, "H", entry.hidden);
    return moePermute(bundle, name, &a, nullptr);
  }
  case Abi::Quantize: {
    moeQuantizeArgs a{};
    a.input = at("input");
    a.values = at("values");
    a.scales = at("scales");
    a.batch = entry.batch == -1 ? sizeNamed(entry, sizes, "E", 1) : entry.batch;
    a.rows = sizeNamed(entry, sizes, "R", entry.rows);
    a.cols = sizeNamed(entry, sizes, "C", entry.cols);
    return moeQuantize(bundle, name, &a, nullptr);
  }
  case Abi::GroupedMatmul:
  case Abi::GroupedMatmulFp8: {
    moeGroupedMatmulArgs a{};
    a.rows = at("rows");
    a.weights = at("weights");
    a.offsets = at("offsets");
    a.out = at("out");
    a.row_scale = at("row_scale");
    a.bias = at("bias");
    a.rows_scale = at("rows_scale");
    a.weights_scale = at("weights_scale");
    a.out_scale = at("out_scale");
    a.m = sizeNamed(entry, sizes, "M", 0);
    a.n = sizeNamed(entry, sizes, "N", entry.n);
    a.k = sizeNamed(entry, sizes, "K", entry.k);
    a.experts = sizeNamed(entry, sizes, "E", entry.experts);
    return moeGroupedMatmul(bundle, name, &a, nullptr);
  }
  case Abi::Layer:
  case Abi::LayerFp8: {
    moeLayerArgs a{};
    a.tokens = at("tokens");
    a.logits = at("logits");
    a.score_bias = at("score_bias");
    a.gate_up_weights = at("gate_up_weights");
    a.down_weights = at("down_weights");
    a.gate_up_bias = at("gate_up_bias");
    a.down_bias = at("down_bias");
    a.gate_up_weights_scale = at("gate_up_weights_scale");
    a.down_weights_scale = at("down_weights_scale");
    a.out = at("out");
    a.workspace = kWorkspace;
    a.workspace_bytes = kWorkspaceBytes;
    a.tokens_count = tokens;
    // The layer's dims, from its parts where static.
    auto part = [&](int which) -> const Entry & {
      return parsed.entries[size_t(entry.parts[which])];
    };
    a.hidden = sizeNamed(entry, sizes, "H", part(kPermutePart).hidden);
    a.intermediate = sizeNamed(entry, sizes, "I", part(kGateUpPart).n / 2);
    a.experts = sizeNamed(entry, sizes, "E", part(kRoutePart).experts);
    return moeLayer(bundle, name, &a, nullptr);
  }
  }
  return MOE_STATUS_INVALID_ARGUMENT;
}

} // namespace

int main(int argc, char **argv) {
  int entries = 0, calls = 0;
  for (int i = 1; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(file)),
                      std::istreambuf_iterator<char>());
    BundleData parsed;
    std::string error;
    if (parseBundle(reinterpret_cast<const uint8_t *>(bytes.data()),
                    bytes.size(), parsed, error) != MOE_STATUS_SUCCESS) {
      report(argv[i], "does not parse: " + error);
      continue;
    }
    FakeGpu &gpu = installFakeDriver();
    gpu.recordImages = false;
    moeBundle *bundle = nullptr;
    if (moeBundleOpenMemory(bytes.data(), bytes.size(), &bundle) !=
        MOE_STATUS_SUCCESS) {
      report(argv[i], moeLastErrorMessage());
      continue;
    }
    for (const Entry &entry : parsed.entries) {
      if (!entry.planLine)
        continue;
      ++entries;
      for (int64_t base : {int64_t(1), int64_t(7), int64_t(64), int64_t(1000),
                           int64_t(8192), int64_t(70000)}) {
        std::vector<int64_t> sizes = sizesFor(entry, base);
        // Record every parameter's bytes: the plan says their sizes.
        std::vector<uint64_t> args;
        for (const PlanArg &arg : entry.plan.args)
          args.push_back(addressOf(arg.name));
        PlanCall call{sizes.data(), args.data(), kWorkspace, kWorkspaceBytes};
        std::vector<PreparedLaunch> launches;
        if (!preparePlan(
                entry.plan, call, [](const PlanStep &) { return int64_t(1); },
                launches, error))
          continue; // sizes the plan refuses: the comparison below says
                    // whether the ABI function refuses them too
        for (const PreparedLaunch &launch : launches) {
          int owner = launch.entry < 0 ? int(&entry - parsed.entries.data())
                                       : launch.entry;
          const std::string &symbol = parsed.entries[size_t(owner)]
                                          .kernels[size_t(launch.kernel)]
                                          .symbol;
          gpu.rawParams[symbol] = launch.sizes;
        }
        moeLaunchArgs l{sizes.data(),         int32_t(sizes.size()),
                        int32_t(args.size()), args.data(),
                        kWorkspace,           kWorkspaceBytes};
        Recorded abi =
            record([&] { return callAbi(bundle, parsed, entry, sizes); });
        Recorded plan = record(
            [&] { return moeLaunch(bundle, entry.name.c_str(), &l, nullptr); });
        compare(std::string(argv[i]) + ":" + entry.name + " at " +
                    std::to_string(base),
                abi, plan);
        ++calls;
      }
    }
    moeBundleClose(bundle);
  }
  std::printf("%d entries, %d calls compared (%d refused by both), %d "
              "differences\n",
              entries, calls, refused, failures);
  return failures ? 1 : 0;
}
