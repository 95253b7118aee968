//===- BundleReaderAbiTests.cpp - entries of several ABIs, plans, versions ===//
//
// What the reader makes of quantize.v1 entries (contract §3.8), of launch
// plan records (docs/launch-plans.md: refused at open, naming the line, when
// they break the format or name what does not exist), and of the bundle
// versions it reads: 7 (every entry carries a plan), 6 (plans optional: its
// entries open and list, moeLaunch refuses those without one), none before.
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "PlanBundles.h"
#include "TestBundles.h"
#include "TestHarness.h"

#include <cstring>

using namespace moe_test;

namespace {

constexpr int64_t kMax = 2147483647;

/// The message of opening `bytes` ("opened" when it opens).
std::string openError(const std::string &bytes) {
  moeBundle *bundle = nullptr;
  moeStatus status = moeBundleOpenMemory(bytes.data(), bytes.size(), &bundle);
  moeBundleClose(bundle);
  return status == MOE_STATUS_SUCCESS ? std::string("opened")
                                      : std::string(moeLastErrorMessage());
}

/// `bytes` without the plan records of `entry`.
std::string withoutPlanOf(const std::string &bytes, const std::string &entry) {
  std::string out;
  size_t removed = 0;
  for (size_t at = 0; at < bytes.size();) {
    size_t end = bytes.find('\n', at);
    end = end == std::string::npos ? bytes.size() : end + 1;
    std::string line = bytes.substr(at, end - at);
    bool record = false;
    for (const char *kind : {"size ", "arg ", "check ", "work ", "launch "})
      record = record || line.rfind(kind + entry + " ", 0) == 0;
    if (record)
      ++removed;
    else
      out += line;
    at = end;
  }
  if (!removed)
    fail(__FILE__, __LINE__, "test bug: no plan records of " + entry);
  return out;
}

} // namespace

TEST(quantizeEntriesParse) {
  moeBundle *bundle = OPEN_VALID(quantizeBundle());
  if (!bundle)
    return;
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.num_entries, 5);
  struct {
    const char *name, *element, *scale;
    int inputBits, blockRows, blockCols, rank;
    int64_t batch, rows, cols, maxRows;
    const char *symbol;
    int threads;
  } expected[] = {
      {"mx", "f8E4M3FN", "e8m0", 16, 1, 32, 2, 1, -1, 4096, kMax, kQuantMx,
       256},
      {"act", "f8E5M2", "f32", 32, 1, 128, 2, 1, -1, -1, 4096, kQuantAct, 128},
      {"weights", "f8E4M3FN", "f32", 16, 128, 128, 3, 8, 256, 512, 256,
       kQuantWeights, 256},
      {"anyw", "f8E4M3FN", "f32", 32, 128, 128, 3, -1, -1, -1, kMax, kQuantAny,
       256}};
  for (int32_t e = 0; e < 4; ++e) {
    moeEntryInfo entry;
    CHECK_EQ(moeBundleGetEntry(bundle, e, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(entry.name), expected[e].name);
    CHECK_EQ(std::string(entry.op), "moe.quantize");
    CHECK_EQ(std::string(entry.abi), "quantize.v1");
    CHECK_EQ(std::string(entry.element), expected[e].element);
    CHECK_EQ(std::string(entry.scale), expected[e].scale);
    CHECK_EQ(entry.input_bits, expected[e].inputBits);
    CHECK_EQ(entry.block_rows, expected[e].blockRows);
    CHECK_EQ(entry.block_cols, expected[e].blockCols);
    CHECK_EQ(entry.rank, expected[e].rank);
    CHECK_EQ(entry.batch, expected[e].batch);
    CHECK_EQ(entry.rows, expected[e].rows);
    CHECK_EQ(entry.cols, expected[e].cols);
    CHECK_EQ(entry.max_rows, expected[e].maxRows);
    CHECK_EQ(entry.num_kernels, 1);
    // The other ABIs' fields are 0 or "".
    CHECK_EQ(std::string(entry.epilogue), "");
    CHECK_EQ(std::string(entry.activation), "");
    CHECK_EQ(std::string(entry.format), "");
    CHECK_EQ(std::string(entry.route), "");
    CHECK_EQ(entry.experts, 0);
    CHECK_EQ(entry.n, 0);
    CHECK_EQ(entry.k, 0);
    CHECK_EQ(entry.top_k, 0);
    CHECK_EQ(entry.hidden, 0);
    CHECK_EQ(entry.offsets_bits, 0);
    moeKernelInfo kernel;
    CHECK_EQ(moeBundleGetKernel(bundle, e, 0, &kernel), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(kernel.symbol), expected[e].symbol);
    CHECK_EQ(kernel.threads, expected[e].threads);
    CHECK_EQ(kernel.smem, 0);
    CHECK_EQ(kernel.rows_min, 0);
    CHECK_EQ(kernel.tile_m, 0);
  }
  // A grouped matmul has no quantize fields.
  moeEntryInfo gemm;
  CHECK_EQ(moeBundleGetEntry(bundle, 4, &gemm), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(gemm.element), "");
  CHECK_EQ(std::string(gemm.scale), "");
  CHECK_EQ(gemm.input_bits, 0);
  CHECK_EQ(gemm.block_rows, 0);
  CHECK_EQ(gemm.block_cols, 0);
  CHECK_EQ(gemm.rank, 0);
  CHECK_EQ(gemm.batch, 0);
  CHECK_EQ(gemm.rows, 0);
  CHECK_EQ(gemm.cols, 0);
  moeBundleClose(bundle);
}

// A plan record that breaks the format, or names what does not exist, is
// refused when the bundle is opened, naming its line and entry.
TEST(planRecordsRefusedAtOpen) {
  const std::string good = routeBundleWithPlans();
  CHECK_EQ(openError(good), "opened");
  auto in = [&](const std::string &from, const std::string &to) {
    return replaced(from, to, good);
  };
  // routeBundleWithPlans(): router's entry and kernel lines 4-5, its
  // records 6-11; softmax's lines 12-13, its records 14-18.
  CHECK_CONTAINS(openError(in("mem:ids[T,8]", "mem:idz[T,8]")),
                 "bundle line 11: entry 'router': launch record: parameter "
                 "'mem:idz[T,8]': no argument 'idz'");
  CHECK_CONTAINS(openError(in("dims=T,256", "dims=U,256")),
                 "bundle line 6: entry 'router''s plan: argument logits: "
                 "unknown name 'U'");
  CHECK_CONTAINS(openError(in("launch router 0", "launch router 1")),
                 "kernel 1 is not one of the 1 of the entry");
  CHECK_CONTAINS(openError(in("size softmax T", "size router T")),
                 "bundle line 14: size record of 'router' must follow that "
                 "entry and its kernels");
  CHECK_CONTAINS(openError(in("arg router bias f32 in align=4 dims=256",
                              "arg router bias f32 in align=4 "
                              "dims=1,1,1,1,1,1,1,1,256")),
                 "bundle line 8: entry 'router': arg record: an argument of 9 "
                 "dims (at most 8)");
  CHECK_CONTAINS(
      openError(in("mem:bias[256]", "tmap:bias:bf16:[1,1,1,1,1,256]:[4,4,4,4,"
                                    "4]:[1,1,1,1,1,8]")),
      "a tensor map takes 1 to 5 dims");
  // Tensor maps of bf16 or 1-byte elements only: the runtime encodes no
  // other.
  CHECK_CONTAINS(openError(in("mem:bias[256]", "tmap:bias:f32:[256]:[]:[8]")),
                 "parameter 'tmap:bias:f32:[256]:[]:[8]': a tensor map of f32 "
                 "elements (the runtime encodes bf16 and 1-byte elements)");
  // A step's part must be an earlier entry.
  CHECK_CONTAINS(openError(in("launch router 0 grid",
                              "launch router 0 part=softmax grid")),
                 "bundle line 11: entry 'router': launch record: "
                 "part='softmax' names no earlier entry");
  // A layer's steps name their parts' kernels.
  std::string layer = layerPlanBundle();
  CHECK_EQ(openError(layer), "opened");
  CHECK_CONTAINS(openError(replaced("launch mix 2 part=mix_permute",
                                    "launch mix 3 part=mix_permute", layer)),
                 "entry 'mix''s plan: launch 3: kernel 3 is not one of the 3 "
                 "of part 'mix_permute'");
  CHECK_CONTAINS(
      openError(replaced("part=mix_unpermute", "part=mix_unpermut", layer)),
      "part='mix_unpermut' names no earlier entry");
}

TEST(bundleVersion7EveryEntryHasAPlan) {
  CHECK_EQ(MOE_BUNDLE_VERSION, 7);
  const std::string bytes = gemmPlanBundle();
  moeBundle *bundle = OPEN_VALID(bytes);
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.version, 7);
  CHECK_EQ(info.num_entries, 3);
  moeBundleClose(bundle);
  // gemmPlanBundle(): gate_up's lines 5-14, down's entry line 15.
  checkRefused("an entry without plan records", withoutPlanOf(bytes, "down"),
               MOE_STATUS_INVALID_BUNDLE,
               "bundle line 15: entry 'down' has no launch plan (version 7 "
               "entries carry size, arg and launch records)");
  checkRefused("the first entry without plan records",
               withoutPlanOf(bytes, "gate_up"), MOE_STATUS_INVALID_BUNDLE,
               "bundle line 5: entry 'gate_up' has no launch plan");
  // A version-7 layer needs one too (its parts as well).
  checkRefused("a version 7 layer", asVersion7(layerBundle()),
               MOE_STATUS_INVALID_BUNDLE,
               "entry 'mix_route' has no launch plan");
  // The same records in a version-6 bundle: plans are optional there.
  std::string six = withoutPlanOf(bytes, "down");
  six[10] = '6';
  // (Version 6 image lines carry no checksum.)
  for (size_t at; (at = six.find(" fnv1a64=")) != std::string::npos;)
    six.erase(at, 9 + 16);
  CHECK_EQ(openError(six), "opened");
}

TEST(bundleVersion6PlansAreOptional) {
  FakeGpu &gpu = installFakeDriver();
  declareParams(gpu, kRouteBias, kRouterParams);
  // Without any plan: it opens and lists its entries and kernels.
  moeBundle *bundle = OPEN_VALID(validBundle());
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.version, 6);
  CHECK_EQ(info.num_entries, 3);
  moeEntryInfo entry;
  CHECK_EQ(moeBundleGetEntry(bundle, 2, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "any");
  moeBundleClose(bundle);
  // With plans for some entries: those run, the others are refused by
  // every call that needs a plan, naming the entry, before the driver.
  bundle = OPEN_VALID(routeBundleWithPlans());
  if (!bundle)
    return;
  const std::string noPlan = "the entry has no launch plan (a version-6 "
                             "bundle: recompile it with moe-translate)";
  int64_t tokens = 4;
  const uint64_t tb = uint64_t(1) << 40;
  uint64_t args[] = {tb, 2 * tb, 3 * tb, 4 * tb};
  moeLaunchArgs call = {&tokens, 1, 4, args, 0, 0};
  uint64_t bytes = 0;
  moeSignature signature;
  moeSizeInfo size;
  moeArgInfo arg;
  int64_t dims[8];
  for (const char *name : {"combine", "gather", "experts"}) {
    const std::string who = "(" + std::string(name) + "): ";
    CHECK_STATUS(moeLaunch(bundle, name, &call, nullptr),
                 MOE_STATUS_INVALID_ARGUMENT, "moeLaunch" + who + noPlan);
    CHECK_STATUS(moeWorkspaceBytes(bundle, name, &tokens, 1, &bytes),
                 MOE_STATUS_INVALID_ARGUMENT,
                 "moeWorkspaceBytes" + who + noPlan);
    CHECK_STATUS(moeEntryGetSignature(bundle, name, &signature),
                 MOE_STATUS_INVALID_ARGUMENT,
                 "moeEntryGetSignature" + who + noPlan);
    CHECK_STATUS(moeEntryGetSize(bundle, name, 0, &size),
                 MOE_STATUS_INVALID_ARGUMENT, "moeEntryGetSize" + who + noPlan);
    CHECK_STATUS(moeEntryGetArg(bundle, name, 0, &arg),
                 MOE_STATUS_INVALID_ARGUMENT, "moeEntryGetArg" + who + noPlan);
    CHECK_STATUS(moeEntryArgShape(bundle, name, 0, &tokens, 1, dims),
                 MOE_STATUS_INVALID_ARGUMENT,
                 "moeEntryArgShape" + who + noPlan);
  }
  CHECK(gpu.calls.empty());
  CHECK_EQ(moeEntryGetSignature(bundle, "router", &signature),
           MOE_STATUS_SUCCESS);
  CHECK_EQ(signature.num_args, 4);
  CHECK_EQ(moeLaunch(bundle, "router", &call, nullptr), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.launches.size(), size_t(1));
  moeBundleClose(bundle);
}

TEST(bundleVersionsBefore6Refused) {
  // Plan records or not, a bundle older than version 6 is refused at its
  // first line; so is one newer than this runtime.
  const std::string plans = gemmPlanBundle();
  const char *what[] = {"",
                        "persistent kernels",
                        "kernel epilogues",
                        "the route and unpermute kernels",
                        "expert biases and layer entries",
                        "block-FP8 grouped matmuls"};
  for (int version = 1; version <= 5; ++version) {
    std::string bytes = plans;
    bytes[10] = char('0' + version);
    checkRefused("an old version", bytes, MOE_STATUS_UNSUPPORTED,
                 "bundle line 1: bundle version " + std::to_string(version) +
                     " predates " + what[version] +
                     " (this runtime reads version 7): recompile it with "
                     "moe-translate --moe-to-bundle");
  }
  std::string eight = plans;
  eight[10] = '8';
  checkRefused("version 8", eight, MOE_STATUS_UNSUPPORTED,
               "bundle line 1: bundle version 8 is not supported (this "
               "runtime reads version 7)");
}

// Version 7 records each image's checksum (64-bit FNV-1a of its bytes): a
// damaged byte anywhere in a cubin, or a checksum that is missing or
// malformed, is refused when the bundle is opened.
TEST(bundleVersion7ImageChecksums) {
  installFakeDriver();
  const std::string bytes = gemmPlanBundle();
  // The first image: "image moe_kernels 32 fnv1a64=<hex>\n" then 32 bytes.
  size_t line = bytes.find("image moe_kernels ");
  size_t payload = bytes.find('\n', line) + 1;
  std::string record = bytes.substr(line, payload - 1 - line);
  std::string recorded = record.substr(record.find("fnv1a64=") + 8);
  // FNV-1a computed here, independently of the runtime's.
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : fakeCubin('A')) {
    hash ^= uint8_t(c);
    hash *= 0x100000001b3ull;
  }
  char expected[17];
  std::snprintf(expected, sizeof(expected), "%016llx",
                (unsigned long long)hash);
  CHECK_EQ(recorded, std::string(expected));
  // Every byte of the payload is covered, the first and the last too.
  for (size_t at : {payload, payload + 1, payload + 17, payload + 31}) {
    std::string damaged = bytes;
    damaged[at] ^= 0x20;
    checkRefused("a damaged cubin byte", damaged, MOE_STATUS_INVALID_BUNDLE,
                 "bundle line 3: image 'moe_kernels': its bytes are damaged "
                 "(checksum fnv1a64=");
  }
  auto withRecord = [&](const std::string &to) {
    std::string changed = bytes;
    changed.replace(line, record.size(), to);
    return changed;
  };
  checkRefused("no checksum", withRecord("image moe_kernels 32"),
               MOE_STATUS_INVALID_BUNDLE,
               "bundle line 3: expected 'image <name> <size> fnv1a64=<16 hex "
               "digits>'");
  for (const std::string &bad :
       {"fnv1a64=" + recorded.substr(1), "fnv1a64=" + recorded + "0",
        "crc32=" + recorded, "fnv1a64=" + std::string(16, 'g'),
        "fnv1a64=" + std::string(16, 'F')})
    checkRefused("a malformed checksum",
                 withRecord("image moe_kernels 32 " + bad),
                 MOE_STATUS_INVALID_BUNDLE,
                 "image 'moe_kernels': expected fnv1a64=<16 hex digits>, got "
                 "'" +
                     bad + "'");
  std::string other = recorded;
  other[15] = other[15] == '0' ? '1' : '0';
  checkRefused("another checksum",
               withRecord("image moe_kernels 32 fnv1a64=" + other),
               MOE_STATUS_INVALID_BUNDLE,
               "its bytes are damaged (checksum fnv1a64=" + recorded +
                   ", the bundle records " + other + ")");
}

// The chip is checked when the bundle is opened: only the chips the
// compiler builds kernels for.
TEST(bundleChipsAreTheCompilers) {
  installFakeDriver();
  const std::string bytes = gemmPlanBundle();
  moeBundle *bundle =
      OPEN_VALID(replacedAll(bytes, "chip sm_90a", "chip sm_100a"));
  moeBundleClose(bundle);
  for (const char *chip :
       {"sm_80", "sm_89", "sm_90", "sm_100", "sm_103a", "sm_120a"})
    checkRefused("a chip without kernels",
                 replacedAll(bytes, "chip sm_90a", std::string("chip ") + chip),
                 MOE_STATUS_UNSUPPORTED,
                 "bundle line 2: chip '" + std::string(chip) +
                     "' is not supported (this runtime runs bundles for "
                     "sm_90a, sm_100a)");
}
