//===- Mxfp8Tests.cpp - grouped_matmul_fp8.v1 entries of format mxfp8 -----===//
//
// Contract §3.7 (format=mxfp8, added within version 6): what the reader
// accepts and refuses of an MXFP8 entry and what moeBundleGetEntry reports
// of it. How such an entry runs is its launch plan's
// (test/Conversion/launch-plans-fp8.mlir).
//
//===----------------------------------------------------------------------===//

#include "TestBundles.h"
#include "TestHarness.h"

#include <cstring>

using namespace moe_test;

namespace {

/// mxfp8Bundle() with the first `from` replaced by `to`.
std::string mxReplaced(const std::string &from, const std::string &to) {
  return replaced(from, to, mxfp8Bundle());
}

} // namespace

TEST(mxfp8BundleParses) {
  CHECK_EQ(std::string(MOE_FORMAT_MXFP8), "mxfp8");
  moeBundle *bundle = OPEN_VALID(mxfp8Bundle());
  if (!bundle)
    return;
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.num_entries, 6);
  moeEntryInfo entry;
  std::memset(&entry, 0x5a, sizeof(entry)); // no stale pointer survives
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "mgemm");
  CHECK_EQ(std::string(entry.op), MOE_OP_GROUPED_MATMUL);
  CHECK_EQ(std::string(entry.abi), MOE_ABI_GROUPED_MATMUL_FP8);
  CHECK(entry.format != nullptr);
  CHECK_EQ(std::string(entry.format), MOE_FORMAT_MXFP8);
  CHECK_EQ(std::string(entry.epilogue), "store");
  CHECK_EQ(std::string(entry.activation), "none");
  CHECK_EQ(std::string(entry.out), "bf16");
  CHECK_EQ(entry.experts, 8);
  CHECK_EQ(entry.n, 256);
  CHECK_EQ(entry.k, 512);
  CHECK_EQ(entry.offsets_bits, 32);
  CHECK_EQ(entry.num_kernels, 2);
  CHECK_EQ(std::string(entry.element), ""); // not a quantize entry
  CHECK_EQ(std::string(entry.scale), "");
  moeKernelInfo kernel;
  CHECK_EQ(moeBundleGetKernel(bundle, 0, 1, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(kernel.symbol), kMxNormal);
  CHECK_EQ(kernel.tile_k, 128);
  CHECK_EQ(kernel.threads, 256);
  // Every epilogue, both biases and both activations.
  const char *epilogues[] = {"store",     "row_scale", "store",
                             "row_scale", "swiglu",    "swiglu"};
  const char *activations[] = {"none", "none", "none",
                               "none", "silu", "gptoss"};
  const int32_t biases[] = {0, 0, 16, 32, 0, 32};
  for (int32_t e = 0; e < 6; ++e) {
    CHECK_EQ(moeBundleGetEntry(bundle, e, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(entry.format), "mxfp8");
    CHECK_EQ(std::string(entry.out), "bf16");
    CHECK_EQ(std::string(entry.epilogue), epilogues[e]);
    CHECK_EQ(std::string(entry.activation), activations[e]);
    CHECK_EQ(entry.bias_bits, biases[e]);
  }
  CHECK_EQ(std::string(entry.name), "mgptoss");
  CHECK_EQ(std::string(entry.op), MOE_OP_EXPERT_MLP);
  CHECK_EQ(entry.k, 96);
  moeBundleClose(bundle);

  // Keys in any order, format among them.
  bundle = OPEN_VALID(mxReplaced(
      "op=moe.grouped_matmul abi=grouped_matmul_fp8.v1 format=mxfp8 "
      "epilogue=store activation=none bias=none experts=8",
      "format=mxfp8 bias=none abi=grouped_matmul_fp8.v1 activation=none "
      "epilogue=store op=moe.grouped_matmul experts=8"));
  if (!bundle)
    return;
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.format), "mxfp8");
  moeBundleClose(bundle);

  // Both formats in one bundle, each entry reporting its own.
  bundle = OPEN_VALID(replaced("entry fbias op=moe.grouped_matmul "
                               "abi=grouped_matmul_fp8.v1 format=fp8_block",
                               "entry fbias op=moe.grouped_matmul "
                               "abi=grouped_matmul_fp8.v1 format=mxfp8",
                               fp8Bundle()));
  if (!bundle)
    return;
  for (int32_t e = 0; e < 5; ++e) {
    CHECK_EQ(moeBundleGetEntry(bundle, e, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(entry.format), e == 2 ? "mxfp8" : "fp8_block");
  }
  moeBundleClose(bundle);
}

TEST(mxfp8MalformedEntries) {
  const moeStatus bad = MOE_STATUS_INVALID_BUNDLE;
  std::string v3WithFormat = validBundle();
  v3WithFormat.replace(v3WithFormat.find("offsets=i32"), 11,
                       "offsets=i32 format=mxfp8");
  struct Case {
    const char *name;
    std::string bytes;
    const char *message;
  } cases[] = {
      // Only fp8_block's swiglu epilogue quantizes its output: MXFP8 GEMMs
      // write bf16, whatever N (mgptoss's n/2 = 256 would suit fp8_block).
      {"out on an mxfp8 swiglu entry",
       mxReplaced("format=mxfp8 epilogue=swiglu activation=gptoss",
                  "format=mxfp8 out=f8E4M3FN epilogue=swiglu "
                  "activation=gptoss"),
       "bundle line 15: entry 'mgptoss': out=f8E4M3FN with format=mxfp8 "
       "(only fp8_block entries quantize their output, with f32 scales per "
       "[1, 128] group; an mxfp8 entry writes bf16)"},
      {"out on a dynamic mxfp8 swiglu entry",
       mxReplaced("format=mxfp8 epilogue=swiglu activation=silu",
                  "format=mxfp8 out=f8E4M3FN epilogue=swiglu "
                  "activation=silu"),
       "bundle line 13: entry 'mswiglu': out=f8E4M3FN with format=mxfp8"},
      {"out on an mxfp8 store entry",
       mxReplaced("format=mxfp8 epilogue=store",
                  "format=mxfp8 out=f8E4M3FN epilogue=store"),
       "bundle line 4: entry 'mgemm': out=f8E4M3FN with format=mxfp8"},
      {"bad out on an mxfp8 entry",
       mxReplaced("format=mxfp8 epilogue=store",
                  "format=mxfp8 out=bf16 epilogue=store"),
       "bundle line 4: entry 'mgemm': out='bf16' is not f8E4M3FN"},
      {"duplicate mxfp8 format",
       mxReplaced("format=mxfp8", "format=mxfp8 format=fp8_block"),
       "bundle line 4: entry 'mgemm': duplicate key 'format'"},
      {"mxfp8 without format",
       mxReplaced(" format=mxfp8 epilogue=store", " epilogue=store"),
       "bundle line 4: entry 'mgemm': missing key 'format'"},
      {"mxfp8 format on a v3 entry", v3WithFormat,
       "bundle line 5: entry 'gate_up': unknown key 'format' (abi "
       "grouped_matmul.v3 takes op, abi, experts, n, k, max_rows, offsets, "
       "epilogue, bias, activation, the optional weights and the optional "
       "round_trip)"},
      {"mxfp8 of a quantize op",
       mxReplaced("entry mgemm op=moe.grouped_matmul",
                  "entry mgemm op=moe.quantize"),
       "bundle line 4: entry 'mgemm': op=moe.quantize with abi "
       "grouped_matmul_fp8.v1"},
      // The kernels' keys as for fp8_block: tile_k counts 1-byte elements.
      {"mxfp8 tile_k 256", mxReplaced("tile_k=128", "tile_k=256"),
       "tile_k=256 is out of range ([16, 128])"},
      {"mxfp8 swiglu with odd n",
       mxReplaced("activation=gptoss bias=f32 experts=8 n=512",
                  "activation=gptoss bias=f32 experts=8 n=511"),
       "entry 'mgptoss': n=511 is odd"},
  };
  for (const Case &c : cases)
    checkRefused(c.name, c.bytes, bad, c.message);
}
