//===- Fp8Tests.cpp - grouped_matmul_fp8.v1 entries -----------------------===//
//
// Contract §3.7 (added in version 6): what the reader accepts and refuses of
// a block-FP8 entry (format, keys, tile_k, out=f8E4M3FN), what
// moeBundleGetEntry reports of it, and that its kernels get their dynamic
// shared memory at load. How such an entry runs is its launch plan's
// (test/Conversion/launch-plans-fp8.mlir pins the plans the compiler writes;
// the tests of moeLaunch run them).
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "TestBundles.h"
#include "TestHarness.h"

#include <cstring>

using namespace moe_test;

namespace {

constexpr int64_t kMax = 2147483647;

/// fp8Bundle() with the first `from` replaced by `to`.
std::string fp8Replaced(const std::string &from, const std::string &to) {
  return replaced(from, to, fp8Bundle());
}

} // namespace

TEST(fp8BundleParses) {
  moeStatus status = MOE_STATUS_INVALID_ARGUMENT;
  moeBundle *bundle = OPEN_VALID(fp8Bundle());
  if (!bundle)
    return;
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.version, 6);
  CHECK_EQ(info.num_entries, 5);
  moeEntryInfo entry;
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "gemm");
  CHECK_EQ(std::string(entry.op), MOE_OP_GROUPED_MATMUL);
  CHECK_EQ(std::string(entry.abi), MOE_ABI_GROUPED_MATMUL_FP8);
  CHECK_EQ(std::string(entry.abi), "grouped_matmul_fp8.v1");
  CHECK(entry.format != nullptr);
  CHECK_EQ(std::string(entry.format), MOE_FORMAT_FP8_BLOCK);
  CHECK_EQ(std::string(entry.format), "fp8_block");
  CHECK_EQ(std::string(entry.epilogue), "store");
  CHECK_EQ(std::string(entry.activation), "none");
  CHECK_EQ(entry.bias_bits, 0);
  CHECK_EQ(entry.experts, 8);
  CHECK_EQ(entry.n, 256);
  CHECK_EQ(entry.k, 512);
  CHECK_EQ(entry.max_rows, kMax);
  CHECK_EQ(entry.offsets_bits, 32);
  CHECK_EQ(entry.num_kernels, 2);
  CHECK_EQ(entry.top_k, 0);
  CHECK_EQ(entry.chunk, 0);
  CHECK_EQ(std::string(entry.route), "");
  moeKernelInfo kernel;
  CHECK_EQ(moeBundleGetKernel(bundle, 0, 1, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(kernel.symbol), kFp8Normal);
  CHECK_EQ(kernel.rows_min, 17);
  CHECK_EQ(kernel.rows_max, kMax);
  CHECK_EQ(kernel.threads, 256);
  CHECK_EQ(kernel.smem, 147456);
  CHECK_EQ(kernel.tile_m, 128);
  CHECK_EQ(kernel.tile_n, 128);
  CHECK_EQ(kernel.tile_k, 128);
  CHECK_EQ(kernel.stages, 4);
  CHECK_EQ(kernel.swap_ab, 0);
  // The other epilogues, biases and offsets types as for grouped_matmul.v3.
  const char *epilogues[] = {"store", "row_scale", "store", "row_scale",
                             "swiglu"};
  const int32_t biases[] = {0, 0, 16, 32, 0};
  const int32_t offsets[] = {32, 64, 32, 32, 64};
  for (int32_t e = 0; e < 5; ++e) {
    CHECK_EQ(moeBundleGetEntry(bundle, e, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(entry.format), "fp8_block");
    CHECK_EQ(std::string(entry.epilogue), epilogues[e]);
    CHECK_EQ(entry.bias_bits, biases[e]);
    CHECK_EQ(entry.offsets_bits, offsets[e]);
  }
  CHECK_EQ(std::string(entry.activation), "silu");
  CHECK_EQ(entry.n, -1);
  moeBundleClose(bundle);

  // Keys in any order, as for every ABI; tile_k from 16 to 128 bytes.
  std::string other = fp8Replaced(
      "op=moe.grouped_matmul abi=grouped_matmul_fp8.v1 format=fp8_block "
      "epilogue=store activation=none bias=none experts=8",
      "format=fp8_block bias=none abi=grouped_matmul_fp8.v1 activation=none "
      "epilogue=store op=moe.grouped_matmul experts=8");
  other.replace(other.find("tile_k=128"), 10, "tile_k=16");
  bundle = openBundle(other, &status);
  CHECK_EQ(status, MOE_STATUS_SUCCESS);
  CHECK_EQ(moeBundleGetKernel(bundle, 0, 0, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(kernel.tile_k, 16);
  moeBundleClose(bundle);
}

TEST(fp8FormatIsEmptyForOtherAbis) {
  for (const std::string &bytes :
       {validBundle(), routeBundle(), permuteBundle(), layerBundle()}) {
    moeBundle *bundle = openBundle(bytes);
    CHECK(bundle != nullptr);
    moeBundleInfo info;
    CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
    for (int32_t e = 0; e < info.num_entries; ++e) {
      moeEntryInfo entry;
      std::memset(&entry, 0x5a, sizeof(entry)); // no stale pointer survives
      CHECK_EQ(moeBundleGetEntry(bundle, e, &entry), MOE_STATUS_SUCCESS);
      CHECK(entry.format != nullptr);
      CHECK_EQ(std::string(entry.format), "");
    }
    moeBundleClose(bundle);
  }
}

TEST(fp8MalformedEntries) {
  const moeStatus bad = MOE_STATUS_INVALID_BUNDLE;
  const std::string v3 = validBundle();
  std::string v3WithFormat = v3;
  v3WithFormat.replace(v3WithFormat.find("offsets=i32"), 11,
                       "offsets=i32 format=fp8_block");
  std::string layerOfFp8 = layerBundle();
  const std::string mixDown =
      "entry mix_down op=moe.expert_mlp abi=grouped_matmul.v3";
  layerOfFp8.replace(layerOfFp8.find(mixDown), mixDown.size(),
                     "entry mix_down op=moe.grouped_matmul "
                     "abi=grouped_matmul_fp8.v1 format=fp8_block");
  const std::string gemmKernels =
      fp8KernelLine("gemm", kFp8SwapAB, 1, 16, 128, 16, 64, 81920, 1) +
      fp8KernelLine("gemm", kFp8Normal, 17, kMax, 256, 128, 128, 147456, 0);
  struct Case {
    const char *name;
    std::string bytes;
    moeStatus status;
    const char *message;
  } cases[] = {
      {"missing format",
       fp8Replaced(" format=fp8_block epilogue=store", " epilogue=store"), bad,
       "bundle line 4: entry 'gemm': missing key 'format'"},
      {"format fp8", fp8Replaced("format=fp8_block", "format=fp8"), bad,
       "bundle line 4: entry 'gemm': format='fp8' is neither fp8_block nor "
       "mxfp8 (the formats of abi grouped_matmul_fp8.v1)"},
      {"format bf16", fp8Replaced("format=fp8_block", "format=bf16"), bad,
       "entry 'gemm': format='bf16' is neither fp8_block nor mxfp8"},
      {"format mxfp4", fp8Replaced("format=fp8_block", "format=mxfp4"), bad,
       "entry 'gemm': format='mxfp4' is neither fp8_block nor mxfp8"},
      {"format empty", fp8Replaced("format=fp8_block", "format="), bad,
       "entry 'gemm': format='' is neither fp8_block nor mxfp8"},
      {"format in capitals",
       fp8Replaced("format=fp8_block", "format=FP8_BLOCK"), bad,
       "format='FP8_BLOCK' is neither fp8_block nor mxfp8"},
      {"mxfp8 in capitals", fp8Replaced("format=fp8_block", "format=MXFP8"),
       bad, "format='MXFP8' is neither fp8_block nor mxfp8"},
      {"duplicate format",
       fp8Replaced("format=fp8_block", "format=fp8_block format=fp8_block"),
       bad, "bundle line 4: entry 'gemm': duplicate key 'format'"},
      {"format on a v3 entry", v3WithFormat, bad,
       "bundle line 5: entry 'gate_up': unknown key 'format' (abi "
       "grouped_matmul.v3 takes op, abi, experts, n, k, max_rows, offsets, "
       "epilogue, bias, activation, the optional weights and the optional "
       "round_trip)"},
      {"unknown fp8 key",
       fp8Replaced("format=fp8_block", "format=fp8_block block=128"), bad,
       "bundle line 4: entry 'gemm': unknown key 'block' (abi "
       "grouped_matmul_fp8.v1 takes op, abi, experts, n, k, max_rows, offsets, "
       "epilogue, bias, activation, format and the optional out)"},
      {"fp8 without bias", fp8Replaced(" bias=none experts=8", " experts=8"),
       bad, "bundle line 4: entry 'gemm': missing key 'bias'"},
      {"fp8 of another op",
       fp8Replaced("entry gemm op=moe.grouped_matmul",
                   "entry gemm op=vendor.gemm"),
       bad,
       "bundle line 4: entry 'gemm': op=vendor.gemm with abi "
       "grouped_matmul_fp8.v1 (its entries are op=moe.grouped_matmul or "
       "moe.expert_mlp)"},
      {"fp8 of a quantize op",
       fp8Replaced("entry fswiglu op=moe.grouped_matmul",
                   "entry fswiglu op=moe.quantize"),
       bad,
       "bundle line 13: entry 'fswiglu': op=moe.quantize with abi "
       "grouped_matmul_fp8.v1"},
      {"fp8 swiglu with odd n",
       fp8Replaced("activation=silu bias=none experts=-1 n=-1",
                   "activation=silu bias=none experts=-1 n=255"),
       bad, "entry 'fswiglu': n=255 is odd"},
      // A TMA box row is 16..128 bytes, a multiple of 16: tile_k of float8.
      {"fp8 tile_k 8", fp8Replaced("tile_k=128", "tile_k=8"), bad,
       "bundle line 5: kernel "
       "'grouped_matmul_fp8block_16x64x128_s4_swapab_off32': tile_k=8 is out "
       "of range ([16, 128])"},
      {"fp8 tile_k 256", fp8Replaced("tile_k=128", "tile_k=256"), bad,
       "tile_k=256 is out of range ([16, 128])"},
      {"fp8 tile_k 24", fp8Replaced("tile_k=128", "tile_k=24"), bad,
       "bundle line 5: kernel "
       "'grouped_matmul_fp8block_16x64x128_s4_swapab_off32': tile_k=24 is "
       "not a multiple of 16 (a TMA box row must be a multiple of 16 bytes)"},
      {"v3 tile_k 128",
       [&] {
         std::string bytes = v3;
         bytes.replace(bytes.find("tile_k=64"), 9, "tile_k=128");
         return bytes;
       }(),
       bad, "tile_k=128 is out of range ([8, 64])"},
      // The kernels' rows ranges partition [1, 2^31 - 1] as for v3.
      {"fp8 rows gap",
       fp8Replaced(gemmKernels, fp8KernelLine("gemm", kFp8Normal, 17, kMax, 256,
                                              128, 128, 147456, 0)),
       bad, "bundle line 4: entry 'gemm': no kernel covers rows [1, 16]"},
      {"fp8 kernel with a chunk",
       fp8Replaced("tile_k=128 stages=4 swap_ab=1",
                   "tile_k=128 stages=4 swap_ab=1 chunk=32"),
       bad,
       "bundle line 5: kernel "
       "'grouped_matmul_fp8block_16x64x128_s4_swapab_off32': unknown key "
       "'chunk'"},
      // A layer's GEMMs are grouped_matmul.v3 expert-MLP halves.
      {"layer of an fp8 part", layerOfFp8, bad,
       "bundle line 16: entry 'mix': down=mix_down is op=moe.grouped_matmul "
       "abi=grouped_matmul_fp8.v1, not op=moe.expert_mlp "
       "abi=grouped_matmul.v3"},
      // Version 5 had no FP8 entries: refused before any entry is read.
      {"version 5 with fp8 entries", fp8Replaced("MOEBUNDLE 6", "MOEBUNDLE 5"),
       MOE_STATUS_UNSUPPORTED,
       "bundle line 1: bundle version 5 predates block-FP8 grouped matmuls "
       "(this runtime reads version 7): recompile it with moe-translate "
       "--moe-to-bundle"},
      {"newer fp8 abi",
       fp8Replaced("abi=grouped_matmul_fp8.v1", "abi=grouped_matmul_fp8.v2"),
       MOE_STATUS_UNSUPPORTED,
       "bundle line 4: entry 'gemm': abi 'grouped_matmul_fp8.v2' is not "
       "supported (this runtime implements bundle version 7 with abis "
       "grouped_matmul.v3, grouped_matmul_fp8.v1, route.v1, unpermute.v2, "
       "permute.v2, layer.v1, quantize.v1, layer_fp8.v1, grouped_wgrad.v1, "
       "planned.v1 and program.v1)"},
  };
  for (const Case &c : cases)
    checkRefused(c.name, c.bytes, c.status, c.message);
}

TEST(fp8LoadSetsSharedMemory) {
  // Every FP8 kernel gets its dynamic shared memory attribute and a
  // residency query at load, as grouped_matmul.v3 kernels do.
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = openBundle(fp8Bundle());
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.smemAttributes.size(), size_t(6));
  CHECK_EQ(gpu.occupancyQueries.size(), size_t(6));
  bool normal = false;
  for (const auto &[symbol, value] : gpu.smemAttributes)
    if (symbol == kFp8Normal)
      normal = value == 147456;
  CHECK(normal);
  moeBundleClose(bundle);
}

// out=f8E4M3FN (added within version 6): a block-FP8 swiglu entry whose
// kernels quantize the activation into e4m3 codes and an f32 scale per
// [1, 128] group of a row.

TEST(fp8OutBundleParses) {
  moeBundle *bundle = OPEN_VALID(fp8OutBundle());
  if (!bundle)
    return;
  moeEntryInfo entry;
  std::memset(&entry, 0x5a, sizeof(entry));
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "qgate");
  CHECK_EQ(std::string(entry.op), MOE_OP_EXPERT_MLP);
  CHECK_EQ(std::string(entry.abi), MOE_ABI_GROUPED_MATMUL_FP8);
  CHECK_EQ(std::string(entry.format), "fp8_block");
  CHECK(entry.out != nullptr);
  CHECK_EQ(std::string(entry.out), MOE_OUT_E4M3);
  CHECK_EQ(std::string(entry.out), "f8E4M3FN");
  CHECK_EQ(std::string(entry.epilogue), "swiglu");
  CHECK_EQ(std::string(entry.activation), "silu");
  CHECK_EQ(entry.n, 512);
  CHECK_EQ(entry.num_kernels, 2);
  CHECK_EQ(std::string(entry.element), ""); // not a quantize entry
  CHECK_EQ(moeBundleGetEntry(bundle, 1, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "qbias");
  CHECK_EQ(std::string(entry.out), "f8E4M3FN");
  CHECK_EQ(entry.bias_bits, 32);
  CHECK_EQ(entry.n, -1);
  moeBundleClose(bundle);

  // Keys in any order, out among them; n/2 = 128 is the smallest static n.
  bundle = OPEN_VALID(replaced(
      "format=fp8_block out=f8E4M3FN epilogue=swiglu activation=silu "
      "bias=none experts=8 n=512",
      "out=f8E4M3FN epilogue=swiglu n=256 activation=silu format=fp8_block "
      "bias=none experts=8",
      fp8OutBundle()));
  if (!bundle)
    return;
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.out), "f8E4M3FN");
  CHECK_EQ(entry.n, 256);
  moeBundleClose(bundle);
}

TEST(fp8OutIsBf16OrEmptyForOtherEntries) {
  // "bf16" for every grouped matmul and permute without out=f8E4M3FN (both
  // GEMM ABIs), "" for the other ABIs; never NULL.
  struct {
    std::string bytes;
    const char *gemmOut, *permuteOut;
  } bundles[] = {
      {fp8Bundle(), "bf16", ""},       {validBundle(), "bf16", ""},
      {mlpBundle(), "bf16", ""},       {routeBundle(), "bf16", ""},
      {permuteBundle(), "", "bf16"},   {permuteFp8Bundle(), "", "f8E4M3FN"},
      {layerBundle(), "bf16", "bf16"}, {layerFp8Bundle(), "bf16", "bf16"},
      {quantizeBundle(), "bf16", ""}};
  for (const auto &b : bundles) {
    moeBundle *bundle = openBundle(b.bytes);
    CHECK(bundle != nullptr);
    if (!bundle)
      continue;
    moeBundleInfo info;
    CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
    for (int32_t e = 0; e < info.num_entries; ++e) {
      moeEntryInfo entry;
      std::memset(&entry, 0x5a, sizeof(entry)); // no stale pointer survives
      CHECK_EQ(moeBundleGetEntry(bundle, e, &entry), MOE_STATUS_SUCCESS);
      CHECK(entry.out != nullptr);
      const bool gemm = !std::strcmp(entry.abi, MOE_ABI_GROUPED_MATMUL) ||
                        !std::strcmp(entry.abi, MOE_ABI_GROUPED_MATMUL_FP8);
      const bool permute = !std::strcmp(entry.abi, MOE_ABI_PERMUTE);
      CHECK_EQ(std::string(entry.out), gemm      ? b.gemmOut
                                       : permute ? b.permuteOut
                                                 : "");
    }
    moeBundleClose(bundle);
  }
}

TEST(fp8OutMalformedEntries) {
  const moeStatus bad = MOE_STATUS_INVALID_BUNDLE;
  auto outReplaced = [](const std::string &from, const std::string &to) {
    return replaced(from, to, fp8OutBundle());
  };
  // out on the fp8 bundle's entries of other epilogues (gemm: store, line
  // 4; fscale: row_scale, line 7).
  auto fp8With = [](const std::string &entry, const std::string &keys) {
    const std::string from = "entry " + entry +
                             " op=moe.grouped_matmul "
                             "abi=grouped_matmul_fp8.v1 format=fp8_block";
    return replaced(from, from + " " + keys, fp8Bundle());
  };
  std::string v3WithOut = validBundle();
  v3WithOut.replace(v3WithOut.find("offsets=i32"), 11,
                    "offsets=i32 out=f8E4M3FN");
  std::string v3SwiGLUWithOut = mlpBundle();
  v3SwiGLUWithOut.replace(v3SwiGLUWithOut.find("activation=silu"), 15,
                          "activation=silu out=f8E4M3FN");
  struct Case {
    const char *name;
    std::string bytes;
    const char *message;
  } cases[] = {
      {"out bf16", outReplaced("out=f8E4M3FN", "out=bf16"),
       "bundle line 4: entry 'qgate': out='bf16' is not f8E4M3FN (the only "
       "value of out; without it the output is bf16)"},
      {"out e5m2", outReplaced("out=f8E4M3FN", "out=f8E5M2"),
       "entry 'qgate': out='f8E5M2' is not f8E4M3FN"},
      {"out empty", outReplaced("out=f8E4M3FN", "out="),
       "bundle line 4: entry 'qgate': out='' is not f8E4M3FN"},
      {"out in lower case", outReplaced("out=f8E4M3FN", "out=f8e4m3fn"),
       "entry 'qgate': out='f8e4m3fn' is not f8E4M3FN"},
      {"duplicate out",
       outReplaced("out=f8E4M3FN", "out=f8E4M3FN out=f8E4M3FN"),
       "bundle line 4: entry 'qgate': duplicate key 'out'"},
      {"out on a store entry", fp8With("gemm", "out=f8E4M3FN"),
       "bundle line 4: entry 'gemm': out=f8E4M3FN with epilogue=store (only a "
       "swiglu entry, the gate-up GEMM of a block-FP8 expert MLP, quantizes "
       "its output)"},
      {"out on a row_scale entry", fp8With("fscale", "out=f8E4M3FN"),
       "bundle line 7: entry 'fscale': out=f8E4M3FN with epilogue=row_scale"},
      {"bad out on a store entry", fp8With("gemm", "out=bf16"),
       "entry 'gemm': out='bf16' is not f8E4M3FN"},
      // A bf16 entry has no out key (its output is bf16).
      {"out on a v3 entry", v3WithOut,
       "bundle line 5: entry 'gate_up': unknown key 'out' (abi "
       "grouped_matmul.v3 takes op, abi, experts, n, k, max_rows, offsets, "
       "epilogue, bias, activation, the optional weights and the optional "
       "round_trip)"},
      {"out on a v3 swiglu entry", v3SwiGLUWithOut,
       "bundle line 4: entry 'mlp_gate_up': unknown key 'out'"},
      // The kernels write whole [1, 128] groups of the n/2 columns.
      {"out n 384", outReplaced("n=512 k=256", "n=384 k=256"),
       "bundle line 4: entry 'qgate': n=384 with out=f8E4M3FN: n/2 = 192 is "
       "not a multiple of 128 (the kernels write whole [1, 128] groups of "
       "the output and their scales)"},
      {"out n 128", outReplaced("n=512 k=256", "n=128 k=256"),
       "entry 'qgate': n=128 with out=f8E4M3FN: n/2 = 64 is not a multiple "
       "of 128"},
      {"out n 2", outReplaced("n=512 k=256", "n=2 k=256"),
       "entry 'qgate': n=2 with out=f8E4M3FN: n/2 = 1 is not a multiple of "
       "128"},
      // The other keys' checks come first.
      {"out with odd n", outReplaced("n=512 k=256", "n=511 k=256"),
       "entry 'qgate': n=511 is odd"},
      {"out without format",
       outReplaced("format=fp8_block out=f8E4M3FN", "out=f8E4M3FN"),
       "bundle line 4: entry 'qgate': missing key 'format'"},
  };
  for (const Case &c : cases)
    checkRefused(c.name, c.bytes, bad, c.message);
}
