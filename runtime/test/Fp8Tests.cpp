//===- Fp8Tests.cpp - grouped_matmul_fp8.v1 entries and launches ----------===//
//
// Contract §3.7 (version 6): what the reader accepts and refuses of a
// block-FP8 entry, every argument check moeGroupedMatmul adds for it, and
// what a valid call hands the (fake) driver: 1-byte (UINT8) tensor maps, the
// grids of grouped_matmul.v3, and the 33 parameters (38 with row_scale, 40
// with a bias, 45 with both), the two scale memrefs after the 17 of v3; for
// a swiglu entry with out=f8E4M3FN the 7 of its out_scale memref after them
// (40, 47 with a bias), on a grid of [1, 128] output groups rather than
// column tiles. The fake device has 132 multiprocessors holding 1
// CTA of a kernel with more than 114 KiB of shared memory, else 4: 132 or
// 528 resident CTAs.
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "GemmArgs.h"
#include "LaunchChecks.h"
#include "TestBundles.h"
#include "TestHarness.h"

#include <cstring>

using namespace moe_test;

namespace {

constexpr int64_t kMax = 2147483647;

/// Arguments matching entry gemm (E=8, N=256, K=512).
moeGroupedMatmulArgs gemm(int64_t m) { return scaledArgs(m, 256, 512, 8); }

moeStatus run(moeBundle *bundle, const char *entry,
              const moeGroupedMatmulArgs &a) {
  return moeGroupedMatmul(bundle, entry, &a, nullptr);
}

/// fp8Bundle() with the first `from` replaced by `to`.
std::string fp8Replaced(const std::string &from, const std::string &to) {
  return replaced(from, to, fp8Bundle());
}

/// The fake's FP8 kernels: 33 parameters, 38 with row_scale, 40 with a
/// bias, 45 with both.
void declareFp8Kernels(FakeGpu &gpu) {
  for (const char *symbol : {kFp8SwapAB, kFp8Normal, kFp8SwiGLU})
    gpu.numParams[symbol] = 33;
  gpu.numParams[kFp8Scale] = 38;
  gpu.numParams[kFp8Bias] = 40;
  gpu.numParams[kFp8Both] = 45;
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
       "bundle line 5: entry 'gate_up': unknown key 'format' (a bundle from a "
       "newer compiler?)"},
      {"unknown fp8 key",
       fp8Replaced("format=fp8_block", "format=fp8_block block=128"), bad,
       "bundle line 4: entry 'gemm': unknown key 'block' (a bundle from a "
       "newer compiler?)"},
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
       "(this runtime reads version 6): recompile it with moe-translate "
       "--moe-to-bundle"},
      {"newer fp8 abi",
       fp8Replaced("abi=grouped_matmul_fp8.v1", "abi=grouped_matmul_fp8.v2"),
       MOE_STATUS_UNSUPPORTED,
       "bundle line 4: entry 'gemm': abi 'grouped_matmul_fp8.v2' is not "
       "supported (this runtime implements bundle version 6 with abis "
       "grouped_matmul.v3, grouped_matmul_fp8.v1, route.v1, unpermute.v2, "
       "permute.v2, layer.v1, quantize.v1 and layer_fp8.v1)"},
  };
  for (const Case &c : cases)
    checkRefused(c.name, c.bytes, c.status, c.message);
}

TEST(fp8RejectsBadScales) {
  installFakeDriver();
  moeBundle *bundle = openBundle(fp8Bundle());
  CHECK(bundle != nullptr);
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  // Both scales are required, non-null and 4-byte aligned.
  moeGroupedMatmulArgs a = gemm(64);
  a.rows_scale = 0;
  CHECK_REJECTED(run(bundle, "gemm", a), bad,
                 "moeGroupedMatmul(gemm): rows_scale pointer is NULL "
                 "(grouped_matmul_fp8.v1 entries take the f32 scales [M, "
                 "ceil(K/128)] of the rows)");
  a = gemm(64);
  a.weights_scale = 0;
  CHECK_REJECTED(run(bundle, "gemm", a), bad,
                 "moeGroupedMatmul(gemm): weights_scale pointer is NULL "
                 "(grouped_matmul_fp8.v1 entries take the f32 scales [E, "
                 "ceil(N/128), ceil(K/128)] of the weights)");
  a = gemm(64);
  a.rows_scale = kRowsScale + 2;
  CHECK_REJECTED(run(bundle, "gemm", a), bad,
                 "moeGroupedMatmul(gemm): rows_scale pointer 0x7f0000070002 "
                 "is not 4-byte aligned (grouped_matmul_fp8.v1 entries take "
                 "the f32 scales");
  a = gemm(64);
  a.weights_scale = kWeightsScale + 1;
  CHECK_REJECTED(run(bundle, "gemm", a), bad,
                 "moeGroupedMatmul(gemm): weights_scale pointer "
                 "0x7f0000080001 is not 4-byte aligned");
  // f32 needs 4-byte alignment only.
  a = gemm(64);
  a.rows_scale = kRowsScale + 4;
  a.weights_scale = kWeightsScale + 12;
  CHECK_EQ(run(bundle, "gemm", a), MOE_STATUS_SUCCESS);
  // Nulls first, in parameter order: rows, weights, offsets, out, the
  // scales, row_scale, bias; then alignments in the same order.
  a = gemm(64);
  a.rows_scale = 0;
  a.out = 0;
  CHECK_REJECTED(run(bundle, "gemm", a), bad, "out pointer is NULL");
  a = gemm(64);
  a.weights_scale = 0;
  a.rows = kRows + 8;
  CHECK_REJECTED(run(bundle, "gemm", a), bad, "weights_scale pointer is NULL");
  a = gemm(64);
  a.weights_scale = kWeightsScale + 2;
  a.rows = kRows + 8;
  CHECK_REJECTED(run(bundle, "gemm", a), bad,
                 "rows pointer 0x7f0000010008 is not 16-byte aligned");
  moeGroupedMatmulArgs scaled = scaledArgs(64, 128, 128, 4);
  scaled.rows_scale = 0;
  CHECK_REJECTED(run(bundle, "fboth", scaled), bad,
                 "moeGroupedMatmul(fboth): rows_scale pointer is NULL");
  scaled.rows_scale = kRowsScale;
  CHECK_REJECTED(run(bundle, "fboth", scaled), bad,
                 "moeGroupedMatmul(fboth): row_scale pointer is NULL");
  scaled.row_scale = kScale;
  CHECK_REJECTED(run(bundle, "fboth", scaled), bad,
                 "moeGroupedMatmul(fboth): bias pointer is NULL");
  // rows, weights and out stay 16-byte aligned, whatever their element.
  a = gemm(64);
  a.weights = kWeights + 1;
  CHECK_REJECTED(run(bundle, "gemm", a), bad,
                 "weights pointer 0x7f0000020001 is not 16-byte aligned");
  a = gemm(64);
  a.out = kOut + 2;
  CHECK_REJECTED(run(bundle, "gemm", a), bad,
                 "out pointer 0x7f0000040002 is not 16-byte aligned");
  // row_scale and bias follow the epilogue and bias keys, as for v3.
  a = gemm(64);
  a.row_scale = kScale;
  CHECK_REJECTED(run(bundle, "gemm", a), bad,
                 "moeGroupedMatmul(gemm): row_scale = 0x7f0000050000, but "
                 "row_scale is only taken by row_scale entries (this one's "
                 "epilogue is store): it must be 0");
  a = gemm(64);
  a.bias = kBias;
  CHECK_REJECTED(run(bundle, "gemm", a), bad,
                 "moeGroupedMatmul(gemm): bias = 0x7f0000060000, but the "
                 "entry has bias=none");
  moeBundleClose(bundle);

  // grouped_matmul.v3 entries take no block scales, however small.
  bundle = openBundle(validBundle());
  moeGroupedMatmulArgs v3 = scaledArgs(64, 28672, 4096, 8);
  v3.weights_scale = 0;
  CHECK_REJECTED(run(bundle, "gate_up", v3), bad,
                 "moeGroupedMatmul(gate_up): rows_scale = 0x7f0000070000, but "
                 "the entry has abi grouped_matmul.v3 (bf16 rows and weights, "
                 "no block scales): it must be 0");
  v3.rows_scale = 0;
  v3.weights_scale = 4;
  CHECK_REJECTED(run(bundle, "gate_up", v3), bad,
                 "moeGroupedMatmul(gate_up): weights_scale = 0x4, but the "
                 "entry has abi grouped_matmul.v3");
  v3.rows_scale = 1;
  CHECK_REJECTED(run(bundle, "gate_up", v3), bad, "rows_scale = 0x1, but");
  v3.rows_scale = 0;
  v3.weights_scale = 0;
  CHECK_EQ(run(bundle, "gate_up", v3), MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);
}

TEST(fp8RejectsBadSizes) {
  installFakeDriver();
  moeBundle *bundle = openBundle(fp8Bundle());
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  // K: a row of 1-byte elements is a multiple of 16 bytes, at least 16.
  CHECK_REJECTED(run(bundle, "fscale", scaledArgs(64, 64, 24, 4)), bad,
                 "moeGroupedMatmul(fscale): K = 24 is not a multiple of 16 "
                 "(TMA row pitch of 1-byte float8 elements must be a "
                 "multiple of 16 bytes)");
  CHECK_REJECTED(run(bundle, "fscale", scaledArgs(64, 64, 520, 4)), bad,
                 "K = 520 is not a multiple of 16");
  CHECK_REJECTED(run(bundle, "fscale", scaledArgs(64, 64, 8, 4)), bad,
                 "moeGroupedMatmul(fscale): K = 8 is less than 16 (TMA row "
                 "pitch of 1-byte float8 elements must be a multiple of 16 "
                 "bytes)");
  CHECK_REJECTED(run(bundle, "fscale", scaledArgs(64, 64, 0, 4)), bad,
                 "K = 0 is less than 16");
  CHECK_REJECTED(run(bundle, "fscale", scaledArgs(64, 64, -16, 4)), bad,
                 "K = -16 is less than 16");
  CHECK_REJECTED(run(bundle, "fscale", scaledArgs(64, 64, kMax + 17, 4)), bad,
                 "K = 2147483664 exceeds 2147483647");
  // Static sizes, M and E as for v3.
  CHECK_REJECTED(run(bundle, "gemm", scaledArgs(64, 256, 528, 8)), bad,
                 "moeGroupedMatmul(gemm): K = 528 does not match the entry's "
                 "k = 512");
  CHECK_REJECTED(run(bundle, "gemm", scaledArgs(64, 128, 512, 8)), bad,
                 "N = 128 does not match the entry's n = 256");
  CHECK_REJECTED(run(bundle, "fbias", scaledArgs(64, 64, 64, 8)), bad,
                 "moeGroupedMatmul(fbias): E = 8 does not match the entry's "
                 "experts = 4");
  CHECK_REJECTED(run(bundle, "gemm", gemm(0)), bad, "M = 0 must be at least 1");
  CHECK_REJECTED(run(bundle, "fswiglu", scaledArgs(64, 255, 64, 4)), bad,
                 "moeGroupedMatmul(fswiglu): N = 255 is odd");
  // The weights' bytes (1 each) within int64, one expert's below 2^40.
  // (After the pointers: row_scale too.)
  moeGroupedMatmulArgs huge = scaledArgs(64, 1 << 21, 1 << 21, kMax);
  huge.row_scale = kScale;
  CHECK_REJECTED(run(bundle, "fscale", huge), bad,
                 "moeGroupedMatmul(fscale): E*N*K (bytes of float8 weights) "
                 "overflows int64 (E = 2147483647, N = 2097152, K = "
                 "2097152)");
  huge = scaledArgs(64, 1 << 20, 1 << 20, 1);
  huge.row_scale = kScale;
  CHECK_REJECTED(run(bundle, "fscale", huge), bad,
                 "moeGroupedMatmul(fscale): N*K = 1099511627776 bytes per "
                 "expert reaches the TMA stride limit of 2^40");
  // What bf16 would refuse, FP8 takes: N*K*2 = 2^40, N*K = 2^39; K = 16.
  moeGroupedMatmulArgs a = scaledArgs(64, 1 << 20, 1 << 19, 1);
  a.row_scale = kScale;
  CHECK_EQ(run(bundle, "fscale", a), MOE_STATUS_SUCCESS);
  a = scaledArgs(64, 64, 16, 4);
  a.row_scale = kScale;
  CHECK_EQ(run(bundle, "fscale", a), MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);

  // The ops that launch: moeGroupedMatmul takes the FP8 entries, the calls
  // of the other ABIs do not.
  bundle = openBundle(routeBundle());
  CHECK_REJECTED(run(bundle, "router", gemm(64)), bad,
                 "moeGroupedMatmul(router): the entry is op=moe.route "
                 "abi=route.v1, not op=moe.grouped_matmul or moe.expert_mlp "
                 "with abi=grouped_matmul.v3 or grouped_matmul_fp8.v1");
  moeBundleClose(bundle);
  bundle = openBundle(fp8Bundle());
  moeRouteArgs route;
  std::memset(&route, 0, sizeof(route));
  route.tokens = 1;
  route.experts = 8;
  CHECK_REJECTED(moeRoute(bundle, "gemm", &route, nullptr), bad,
                 "moeRoute(gemm): the entry is op=moe.grouped_matmul "
                 "abi=grouped_matmul_fp8.v1, not op=moe.route with "
                 "abi=route.v1");
  moeBundleClose(bundle);
}

namespace {

/// Runs `entry` with `a` after loading, and checks that exactly the expected
/// launches (and their tensor maps, of 1-byte UINT8 elements) reached the
/// driver, in order, with the parameters of contract §3.7 (with the out_scale
/// memref when `fp8Out`).
void checkFp8Launches(moeBundle *bundle, const char *entry,
                      const moeGroupedMatmulArgs &a,
                      const std::vector<ExpectedGemmLaunch> &expected,
                      const char *epilogue, int biasBits = 0,
                      bool fp8Out = false) {
  // Scale blocks: along K, and along the weights' N.
  const uint64_t kb = uint64_t((a.k + 127) / 128),
                 nb = uint64_t((a.n + 127) / 128);
  // 17-23: rows_scale [M, KB]; 24-32: weights_scale [E, NB, KB]; then
  // row_scale [M] and bias [E, N] where the entry takes them.
  std::vector<uint64_t> tail;
  pushMemref2D(tail, a.rows_scale, a.m, int64_t(kb));
  for (uint64_t word : {a.weights_scale, a.weights_scale, uint64_t(0),
                        uint64_t(a.experts), nb, kb, nb * kb, kb, uint64_t(1)})
    tail.push_back(word);
  // 33-39: out_scale [M, (N/2)/128].
  if (fp8Out)
    pushMemref2D(tail, a.out_scale, a.m, a.n / 256);
  for (uint64_t word :
       epilogueParams(a, std::string(epilogue) == "row_scale", biasBits != 0))
    tail.push_back(word);
  checkGemmLaunches(bundle, entry, a, expected,
                    std::string(epilogue) == "swiglu", kFp8Element, tail);
}

} // namespace

TEST(fp8LaunchesStore) {
  FakeGpu &gpu = installFakeDriver();
  declareFp8Kernels(gpu);
  moeBundle *bundle = openBundle(fp8Bundle());
  CHECK(bundle != nullptr);
  const int32_t big = int32_t(kMax);
  // The grids of grouped_matmul.v3: min(work, resident), work = slots *
  // ceil(N / tile_n), slots = min(ceil(M / tile_m) + min(E, floor(M /
  // rows_min)), E * ceil(rows_max / tile_m)).
  // 64 rows over 8 experts: swap-AB 16x64 (528 resident): min(4 + 8, 8 * 1)
  // = 8 slots * 4 = 32; 128x128 (132 resident): ceil(64/128) + 3 = 4 slots
  // * 2 = 8. 33 parameters each; KB = 4, NB = 2.
  checkFp8Launches(bundle, "gemm", gemm(64),
                   {{kFp8SwapAB, 32, 81920, 1, 16, 16, 64, 128},
                    {kFp8Normal, 8, 147456, 17, big, 128, 128, 256}},
                   "store");
  // One row: no expert reaches rows_min = 17: 2 slots * 4 = 8.
  checkFp8Launches(bundle, "gemm", gemm(1),
                   {{kFp8SwapAB, 8, 81920, 1, 16, 16, 64, 128}}, "store");
  // 4096 rows: 8 slots * 4 = 32; 32 + 8 = 40 slots * 2 = 80.
  checkFp8Launches(bundle, "gemm", gemm(4096),
                   {{kFp8SwapAB, 32, 81920, 1, 16, 16, 64, 128},
                    {kFp8Normal, 80, 147456, 17, big, 128, 128, 256}},
                   "store");
  // 2^31 - 1 rows: capped by residency.
  checkFp8Launches(bundle, "gemm", gemm(kMax),
                   {{kFp8SwapAB, 32, 81920, 1, 16, 16, 64, 128},
                    {kFp8Normal, 132, 147456, 17, big, 128, 128, 256}},
                   "store");
  // swiglu: the weights box has tile_n/2 rows, out N/2 columns; the weights
  // scale has the weights' N: NB = ceil(256/128) = 2 (K = 64: KB = 1). 8
  // rows over 4 experts: 5 slots * 2 column tiles.
  checkFp8Launches(bundle, "fswiglu", scaledArgs(8, 256, 64, 4),
                   {{kFp8SwiGLU, 10, 98304, 1, big, 64, 128, 128}}, "swiglu");
  moeBundleClose(bundle);
}

TEST(fp8LaunchesRowScaleAndBias) {
  FakeGpu &gpu = installFakeDriver();
  declareFp8Kernels(gpu);
  moeBundle *bundle = openBundle(fp8Bundle());
  CHECK(bundle != nullptr);
  const int32_t big = int32_t(kMax);
  // 38 parameters: the row_scale memref after the scales. K = 272 is not a
  // multiple of 128: KB = 3; N = 200: NB = 2. 100 rows over 3 experts: 2 +
  // 3 = 5 slots * 2 column tiles.
  moeGroupedMatmulArgs a = scaledArgs(100, 200, 272, 3);
  a.row_scale = kScale + 12;
  checkFp8Launches(bundle, "fscale", a,
                   {{kFp8Scale, 10, 98304, 1, big, 64, 128, 128}}, "row_scale");
  // 40 parameters: the bf16 bias memref [E, N] after the scales (2-byte
  // aligned suffices). 8 rows over 4 experts: 5 slots * 2.
  a = scaledArgs(8, 256, 128, 4);
  a.bias = kBias + 2;
  checkFp8Launches(bundle, "fbias", a,
                   {{kFp8Bias, 10, 98304, 1, big, 64, 128, 128}}, "store", 16);
  // 45 parameters: scales, row_scale, then the f32 bias. 300 rows over 8
  // experts: 5 + 8 = 13 slots * 3 column tiles; K = 1024: KB = 8, NB = 3.
  a = scaledArgs(300, 384, 1024, 8);
  a.row_scale = kScale;
  a.bias = kBias;
  checkFp8Launches(bundle, "fboth", a,
                   {{kFp8Both, 39, 98304, 1, big, 64, 128, 128}}, "row_scale",
                   32);
  // K = 16, the smallest: KB = 1; N = 1: NB = 1.
  a = scaledArgs(5, 1, 16, 2);
  a.row_scale = kScale;
  checkFp8Launches(bundle, "fscale", a,
                   {{kFp8Scale, 3, 98304, 1, big, 64, 128, 128}}, "row_scale");
  moeBundleClose(bundle);
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

TEST(fp8ReportsEncodeFailures) {
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = openBundle(fp8Bundle());
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  gpu.encodeResult = cu::kErrorInvalidValue;
  CHECK_STATUS(run(bundle, "gemm", gemm(64)), MOE_STATUS_CUDA_ERROR,
               "moeGroupedMatmul: cuTensorMapEncodeTiled(rows of kernel "
               "'grouped_matmul_fp8block_16x64x128_s4_swapab_off32' of entry "
               "'gemm') failed: CUDA_ERROR_INVALID_VALUE");
  CHECK_EQ(gpu.launches.size(), size_t(0));
  moeBundleClose(bundle);
}

// out=f8E4M3FN (added within version 6): a block-FP8 swiglu entry whose
// kernels quantize the activation into e4m3 codes and an f32 scale per
// [1, 128] group of a row, and take the out_scale memref after the scales.

namespace {

/// Arguments of an out=f8E4M3FN entry: fp8Args with out_scale.
moeGroupedMatmulArgs fp8OutArgs(int64_t m, int64_t n, int64_t k,
                                int64_t experts) {
  moeGroupedMatmulArgs a = scaledArgs(m, n, k, experts);
  a.out_scale = kOutScale;
  return a;
}

/// Arguments matching entry qgate (E=8, N=512, K=256).
moeGroupedMatmulArgs qgate(int64_t m) { return fp8OutArgs(m, 512, 256, 8); }

/// The fake's FP8-output kernels: 40 parameters, 47 with a bias.
void declareFp8OutKernels(FakeGpu &gpu) {
  gpu.numParams[kFp8OutSwapAB] = 40;
  gpu.numParams[kFp8OutNormal] = 40;
  gpu.numParams[kFp8OutBias] = 47;
}

} // namespace

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
       "bundle line 5: entry 'gate_up': unknown key 'out' (a bundle from a "
       "newer compiler?)"},
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

TEST(fp8OutLaunches) {
  FakeGpu &gpu = installFakeDriver();
  declareFp8OutKernels(gpu);
  moeBundle *bundle = OPEN_VALID(fp8OutBundle());
  if (!bundle)
    return;
  const int32_t big = int32_t(kMax);
  // A work item is a row tile by a [1, 128] group of the N/2 output
  // columns (contract §3.7), not by a column tile: 64 rows over 8 experts:
  // swap-AB 16x64 (528 resident): min(4 + 8, 8 * 1) = 8 slots * 256 / 128
  // = 16 (not 8 * ceil(512 / 64) = 64); 64x128: 1 + 3 = 4 slots * 2 = 8.
  // out is [64, 256] codes; KB = 2, NB = 4; out_scale [64, 2] after the
  // scales: 40 parameters.
  checkFp8Launches(bundle, "qgate", qgate(64),
                   {{kFp8OutSwapAB, 16, 81920, 1, 16, 16, 64, 128},
                    {kFp8OutNormal, 8, 98304, 17, big, 64, 128, 128}},
                   "swiglu", 0, true);
  // 47 parameters: out_scale, then the f32 bias [E, N]. N = 1024: out_scale
  // [300, 4]; 300 rows over 4 experts: 5 + 4 = 9 slots * 4 groups.
  moeGroupedMatmulArgs a = fp8OutArgs(300, 1024, 128, 4);
  a.bias = kBias;
  a.out_scale = kOutScale + 4; // 4-byte aligned suffices
  checkFp8Launches(bundle, "qbias", a,
                   {{kFp8OutBias, 36, 98304, 1, big, 64, 128, 128}}, "swiglu",
                   32, true);
  // Capped by residency all the same: 8192 rows over 8 experts, N = 4096
  // (16 groups): 128 + 8 = 136 slots * 16 = 2176 items, 528 resident.
  a = fp8OutArgs(8192, 4096, 256, 8);
  a.bias = kBias;
  checkFp8Launches(bundle, "qbias", a,
                   {{kFp8OutBias, 528, 98304, 1, big, 64, 128, 128}}, "swiglu",
                   32, true);

  // By hand, parameter by parameter: qbias, M = 5, N = 256, K = 384 (KB =
  // 3, NB = 2), E = 2: 17 + rows_scale (7) + weights_scale (9) + out_scale
  // (7) + bias (7).
  a = fp8OutArgs(5, 256, 384, 2);
  a.bias = kBias;
  CHECK_EQ(moeGroupedMatmul(bundle, "qbias", &a, testStream()),
           MOE_STATUS_SUCCESS);
  const FakeLaunch &got = gpu.launches.back();
  CHECK_EQ(got.numParams, 47);
  // out: [5, 128] codes.
  CHECK_EQ(got.words[5], kOut);
  CHECK_EQ(got.words[8], uint64_t(5));
  CHECK_EQ(got.words[9], uint64_t(128));
  CHECK_EQ(got.words[10], uint64_t(128));
  const std::vector<uint64_t> tail = {
      kRowsScale,    kRowsScale,    0, 5, 3,   3,   1,       // 17-23
      kWeightsScale, kWeightsScale, 0, 2, 2,   3,   6, 3, 1, // 24-32
      kOutScale,     kOutScale,     0, 5, 1,   1,   1,       // 33-39
      kBias,         kBias,         0, 2, 256, 256, 1};      // 40-46
  CHECK(got.tail == tail);
  moeBundleClose(bundle);
}

TEST(fp8OutRejectsBadOutScale) {
  installFakeDriver();
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  moeBundle *bundle = OPEN_VALID(fp8OutBundle());
  if (!bundle)
    return;
  // Required, non-null and 4-byte aligned.
  moeGroupedMatmulArgs a = qgate(64);
  a.out_scale = 0;
  CHECK_REJECTED(run(bundle, "qgate", a), bad,
                 "moeGroupedMatmul(qgate): out_scale pointer is NULL "
                 "(out=f8E4M3FN entries write the f32 scales [M, N/256] of "
                 "out)");
  a = qgate(64);
  a.out_scale = kOutScale + 2;
  CHECK_REJECTED(run(bundle, "qgate", a), bad,
                 "moeGroupedMatmul(qgate): out_scale pointer 0x7f0000090002 "
                 "is not 4-byte aligned (out=f8E4M3FN entries write the f32 "
                 "scales [M, N/256] of out)");
  // Nulls first, in parameter order: out_scale after weights_scale, before
  // the bias; then alignments in the same order.
  a = qgate(64);
  a.out_scale = 0;
  a.rows = kRows + 8;
  CHECK_REJECTED(run(bundle, "qgate", a), bad, "out_scale pointer is NULL");
  a = qgate(64);
  a.out_scale = 0;
  a.weights_scale = 0;
  CHECK_REJECTED(run(bundle, "qgate", a), bad, "weights_scale pointer is NULL");
  moeGroupedMatmulArgs b = fp8OutArgs(8, 256, 128, 4);
  b.out_scale = 0;
  CHECK_REJECTED(run(bundle, "qbias", b), bad,
                 "moeGroupedMatmul(qbias): out_scale pointer is NULL");
  b.out_scale = kOutScale + 1;
  CHECK_REJECTED(run(bundle, "qbias", b), bad,
                 "moeGroupedMatmul(qbias): bias pointer is NULL");
  b.bias = kBias + 4;
  CHECK_REJECTED(run(bundle, "qbias", b), bad,
                 "out_scale pointer 0x7f0000090001 is not 4-byte aligned");
  // out stays 16-byte aligned, its codes being 1-byte elements.
  a = qgate(64);
  a.out = kOut + 8;
  CHECK_REJECTED(run(bundle, "qgate", a), bad,
                 "out pointer 0x7f0000040008 is not 16-byte aligned");
  // A dynamic N: whole [1, 128] groups of the N/2 columns.
  b = fp8OutArgs(8, 384, 128, 4);
  b.bias = kBias;
  CHECK_REJECTED(run(bundle, "qbias", b), bad,
                 "moeGroupedMatmul(qbias): N = 384: the entry has "
                 "out=f8E4M3FN and writes whole [1, 128] groups of the N/2 "
                 "output columns, so N must be a multiple of 256");
  b.n = 258;
  CHECK_REJECTED(run(bundle, "qbias", b), bad, "N = 258: the entry has");
  b.n = 255;
  CHECK_REJECTED(run(bundle, "qbias", b), bad, "N = 255 is odd");
  b.n = 256;
  CHECK_EQ(run(bundle, "qbias", b), MOE_STATUS_SUCCESS);
  // The other checks as for any FP8 entry.
  a = qgate(64);
  a.rows_scale = 0;
  CHECK_REJECTED(run(bundle, "qgate", a), bad, "rows_scale pointer is NULL");
  a = qgate(64);
  a.row_scale = kScale;
  CHECK_REJECTED(run(bundle, "qgate", a), bad,
                 "row_scale is only taken by row_scale entries (this one's "
                 "epilogue is swiglu)");
  moeBundleClose(bundle);

  // Every other entry takes no out_scale: FP8 ones writing bf16 (swiglu
  // too), bf16 ones.
  bundle = OPEN_VALID(fp8Bundle());
  if (!bundle)
    return;
  a = gemm(64);
  a.out_scale = kOutScale;
  CHECK_REJECTED(run(bundle, "gemm", a), bad,
                 "moeGroupedMatmul(gemm): out_scale = 0x7f0000090000, but "
                 "out_scale is only taken by out=f8E4M3FN entries (this "
                 "one's out is bf16): it must be 0");
  a = scaledArgs(8, 256, 64, 4);
  a.out_scale = 4;
  CHECK_REJECTED(run(bundle, "fswiglu", a), bad,
                 "moeGroupedMatmul(fswiglu): out_scale = 0x4, but out_scale "
                 "is only taken by out=f8E4M3FN entries");
  a.out_scale = 0;
  CHECK_EQ(run(bundle, "fswiglu", a), MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);
  bundle = OPEN_VALID(mlpBundle());
  if (!bundle)
    return;
  a = scaledArgs(64, 28672, 4096, 8);
  a.rows_scale = 0;
  a.weights_scale = 0;
  a.out_scale = 1;
  CHECK_REJECTED(run(bundle, "mlp_gate_up", a), bad,
                 "moeGroupedMatmul(mlp_gate_up): out_scale = 0x1, but "
                 "out_scale is only taken by out=f8E4M3FN entries");
  moeBundleClose(bundle);
}
