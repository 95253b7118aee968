//===- Mxfp8Tests.cpp - grouped_matmul_fp8.v1 entries of format mxfp8 -----===//
//
// Contract §3.7 (format=mxfp8, added within version 6) and §3.9: what the
// reader accepts and refuses of an MXFP8 entry, the argument checks
// moeGroupedMatmul makes for it (K a positive multiple of 32, of 128 in a
// bundle for sm_100a; UE8M0 scales of any alignment), and what a valid call
// hands the (fake) driver: fp8_block's 1-byte (UINT8) tensor maps and grids,
// and its parameter positions (33, 38 with row_scale, 40 with a bias, 45
// with both) with the scale memrefs of bytes rows_scale [M, K/32] and
// weights_scale [E, N, K/32]. The fake device has 132 multiprocessors
// holding 1 CTA of a kernel with more than 114 KiB of shared memory, else 4:
// 132 or 528 resident CTAs.
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

/// Arguments matching entry mgemm (E=8, N=256, K=512).
moeGroupedMatmulArgs mgemm(int64_t m) { return scaledArgs(m, 256, 512, 8); }

moeStatus run(moeBundle *bundle, const char *entry,
              const moeGroupedMatmulArgs &a) {
  return moeGroupedMatmul(bundle, entry, &a, nullptr);
}

/// mxfp8Bundle() with the first `from` replaced by `to`.
std::string mxReplaced(const std::string &from, const std::string &to) {
  return replaced(from, to, mxfp8Bundle());
}

/// The fake's MXFP8 kernels: 33 parameters, 38 with row_scale, 40 with a
/// bias, 45 with both.
void declareMxKernels(FakeGpu &gpu) {
  for (const char *symbol : {kMxSwapAB, kMxNormal, kMxSwiGLU})
    gpu.numParams[symbol] = 33;
  gpu.numParams[kMxScale] = 38;
  gpu.numParams[kMxBias] = 40;
  gpu.numParams[kMxGptOss] = 40;
  gpu.numParams[kMxBoth] = 45;
}

/// Runs `entry` with `a` after loading, and checks that exactly the expected
/// launches (and their 1-byte UINT8 tensor maps) reached the driver, in
/// order, with the parameters of contract §3.7 for format=mxfp8: 17-23 the
/// rows_scale memref [M, K/32], 24-32 the weights_scale memref [E, N, K/32]
/// (N the weights', also for swiglu), then row_scale [M] and bias [E, N]
/// where the entry takes them.
void checkMxLaunches(moeBundle *bundle, const char *entry,
                     const moeGroupedMatmulArgs &a,
                     const std::vector<ExpectedGemmLaunch> &expected,
                     const char *epilogue, int biasBits = 0) {
  const uint64_t kb = uint64_t(a.k / 32), n = uint64_t(a.n);
  std::vector<uint64_t> tail;
  pushMemref2D(tail, a.rows_scale, a.m, int64_t(kb));
  for (uint64_t word : {a.weights_scale, a.weights_scale, uint64_t(0),
                        uint64_t(a.experts), n, kb, n * kb, kb, uint64_t(1)})
    tail.push_back(word);
  for (uint64_t word :
       epilogueParams(a, std::string(epilogue) == "row_scale", biasBits != 0))
    tail.push_back(word);
  checkGemmLaunches(bundle, entry, a, expected,
                    std::string(epilogue) == "swiglu", kFp8Element, tail);
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
       "bundle line 5: entry 'gate_up': unknown key 'format' (a bundle from a "
       "newer compiler?)"},
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

TEST(mxfp8RejectsBadScales) {
  installFakeDriver();
  moeBundle *bundle = OPEN_VALID(mxfp8Bundle());
  if (!bundle)
    return;
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  // Both scales are required and non-null.
  moeGroupedMatmulArgs a = mgemm(64);
  a.rows_scale = 0;
  CHECK_REJECTED(run(bundle, "mgemm", a), bad,
                 "moeGroupedMatmul(mgemm): rows_scale pointer is NULL "
                 "(format=mxfp8 entries take the UE8M0 scales [M, K/32] of "
                 "the rows)");
  a = mgemm(64);
  a.weights_scale = 0;
  CHECK_REJECTED(run(bundle, "mgemm", a), bad,
                 "moeGroupedMatmul(mgemm): weights_scale pointer is NULL "
                 "(format=mxfp8 entries take the UE8M0 scales [E, N, K/32] "
                 "of the weights)");
  // Bytes, read byte by byte: any alignment.
  a = mgemm(64);
  a.rows_scale = kRowsScale + 1;
  a.weights_scale = kWeightsScale + 3;
  CHECK_EQ(run(bundle, "mgemm", a), MOE_STATUS_SUCCESS);
  // Nulls first, in parameter order: rows, weights, offsets, out, the
  // scales, row_scale, bias; then alignments in the same order.
  a = mgemm(64);
  a.weights_scale = 0;
  a.rows = kRows + 8;
  CHECK_REJECTED(run(bundle, "mgemm", a), bad, "weights_scale pointer is NULL");
  a = mgemm(64);
  a.rows_scale = 0;
  a.out = 0;
  CHECK_REJECTED(run(bundle, "mgemm", a), bad, "out pointer is NULL");
  a = mgemm(64);
  a.rows_scale = kRowsScale + 1;
  a.weights = kWeights + 8;
  CHECK_REJECTED(run(bundle, "mgemm", a), bad,
                 "moeGroupedMatmul(mgemm): weights pointer 0x7f0000020008 is "
                 "not 16-byte aligned");
  moeGroupedMatmulArgs both = scaledArgs(64, 128, 128, 4);
  both.rows_scale = 0;
  CHECK_REJECTED(run(bundle, "mboth", both), bad,
                 "moeGroupedMatmul(mboth): rows_scale pointer is NULL");
  both.rows_scale = kRowsScale + 5;
  CHECK_REJECTED(run(bundle, "mboth", both), bad,
                 "moeGroupedMatmul(mboth): row_scale pointer is NULL");
  both.row_scale = kScale;
  CHECK_REJECTED(run(bundle, "mboth", both), bad,
                 "moeGroupedMatmul(mboth): bias pointer is NULL");
  // row_scale and the bias keep their f32 alignment.
  both.bias = kBias;
  both.row_scale = kScale + 2;
  CHECK_REJECTED(run(bundle, "mboth", both), bad,
                 "moeGroupedMatmul(mboth): row_scale pointer 0x7f0000050002 "
                 "is not 4-byte aligned");
  both.row_scale = kScale;
  both.bias = kBias + 2;
  CHECK_REJECTED(run(bundle, "mboth", both), bad,
                 "moeGroupedMatmul(mboth): bias pointer 0x7f0000060002 is not "
                 "4-byte aligned");
  both.bias = kBias;
  CHECK_EQ(run(bundle, "mboth", both), MOE_STATUS_SUCCESS);
  // An MXFP8 entry writes bf16: no out_scale, even for swiglu.
  a = scaledArgs(8, 512, 96, 8);
  a.bias = kBias;
  a.out_scale = kOutScale;
  CHECK_REJECTED(run(bundle, "mgptoss", a), bad,
                 "moeGroupedMatmul(mgptoss): out_scale = 0x7f0000090000, but "
                 "out_scale is only taken by out=f8E4M3FN entries (this one's "
                 "out is bf16): it must be 0");
  a.out_scale = 0;
  CHECK_EQ(run(bundle, "mgptoss", a), MOE_STATUS_SUCCESS);
  // row_scale and bias follow the epilogue and bias keys, as for fp8_block.
  a = mgemm(64);
  a.row_scale = kScale;
  CHECK_REJECTED(run(bundle, "mgemm", a), bad,
                 "moeGroupedMatmul(mgemm): row_scale = 0x7f0000050000, but "
                 "row_scale is only taken by row_scale entries (this one's "
                 "epilogue is store): it must be 0");
  moeBundleClose(bundle);

  // fp8_block keeps its 4-byte f32 scales beside MXFP8 entries.
  bundle = OPEN_VALID(fp8Bundle());
  if (!bundle)
    return;
  a = scaledArgs(64, 256, 512, 8);
  a.rows_scale = kRowsScale + 1;
  CHECK_REJECTED(run(bundle, "gemm", a), bad,
                 "moeGroupedMatmul(gemm): rows_scale pointer 0x7f0000070001 "
                 "is not 4-byte aligned (grouped_matmul_fp8.v1 entries take "
                 "the f32 scales [M, ceil(K/128)] of the rows)");
  moeBundleClose(bundle);
}

TEST(mxfp8RejectsBadSizes) {
  FakeGpu &gpu = installFakeDriver();
  moeBundle *bundle = OPEN_VALID(mxfp8Bundle());
  if (!bundle)
    return;
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  auto scaled = [](int64_t m, int64_t n, int64_t k, int64_t experts) {
    moeGroupedMatmulArgs a = scaledArgs(m, n, k, experts);
    a.row_scale = kScale;
    return a;
  };
  // K: whole blocks of 32, at least one (fp8_block takes 16).
  CHECK_REJECTED(run(bundle, "mscale", scaled(64, 64, 16, 4)), bad,
                 "moeGroupedMatmul(mscale): K = 16 is less than 32 "
                 "(format=mxfp8 takes a scale per 32 elements of a row)");
  CHECK_REJECTED(run(bundle, "mscale", scaled(64, 64, 48, 4)), bad,
                 "moeGroupedMatmul(mscale): K = 48 is not a multiple of 32 "
                 "(format=mxfp8 takes a scale per 32 elements of a row)");
  CHECK_REJECTED(run(bundle, "mscale", scaled(64, 64, 528, 4)), bad,
                 "K = 528 is not a multiple of 32");
  CHECK_REJECTED(run(bundle, "mscale", scaled(64, 64, 0, 4)), bad,
                 "K = 0 is less than 32");
  CHECK_REJECTED(run(bundle, "mscale", scaled(64, 64, -32, 4)), bad,
                 "K = -32 is less than 32");
  CHECK_REJECTED(run(bundle, "mscale", scaled(64, 64, kMax + 1, 4)), bad,
                 "K = 2147483648 exceeds 2147483647");
  // On sm_90a a multiple of 32 suffices: 32, 96, 160.
  for (int64_t k : {32, 96, 160})
    CHECK_EQ(run(bundle, "mscale", scaled(64, 64, k, 4)), MOE_STATUS_SUCCESS);
  // Static sizes as for fp8_block.
  moeGroupedMatmulArgs a = scaledArgs(8, 512, 128, 8);
  a.bias = kBias;
  CHECK_REJECTED(run(bundle, "mgptoss", a), bad,
                 "moeGroupedMatmul(mgptoss): K = 128 does not match the "
                 "entry's k = 96");
  CHECK_REJECTED(run(bundle, "mswiglu", scaledArgs(8, 255, 64, 4)), bad,
                 "moeGroupedMatmul(mswiglu): N = 255 is odd");
  moeBundleClose(bundle);

  // A bundle for sm_100a (the tcgen05 kernel, contract §3.9): K also a
  // multiple of 128, checked before the chip (and the multiple of 32
  // first); fp8_block entries keep K % 16.
  const std::string sm100 =
      replaced("chip sm_90a", "chip sm_100a", mxfp8Bundle());
  bundle = OPEN_VALID(sm100);
  if (!bundle)
    return;
  CHECK_REJECTED(run(bundle, "mscale", scaled(64, 64, 96, 4)), bad,
                 "moeGroupedMatmul(mscale): K = 96 is not a multiple of 128 "
                 "(the bundle is for sm_100a, whose mxfp8 kernel reads K in "
                 "stages of 128)");
  CHECK_REJECTED(run(bundle, "mscale", scaled(64, 64, 160, 4)), bad,
                 "K = 160 is not a multiple of 128");
  CHECK_REJECTED(run(bundle, "mscale", scaled(64, 64, 48, 4)), bad,
                 "K = 48 is not a multiple of 32");
  a = scaledArgs(8, 512, 96, 8);
  a.bias = kBias;
  CHECK_REJECTED(run(bundle, "mgptoss", a), bad,
                 "moeGroupedMatmul(mgptoss): K = 96 is not a multiple of 128");
  // Past the checks, the chip check of the load still refuses the bundle on
  // this sm_90 device...
  CHECK_STATUS(run(bundle, "mscale", scaled(64, 64, 256, 4)),
               MOE_STATUS_UNSUPPORTED,
               "bundle is for sm_100a but the device is sm_90");
  moeBundleClose(bundle);
  // ... and launches on an sm_100 one.
  gpu.ccMajor = 10;
  declareMxKernels(gpu);
  bundle = OPEN_VALID(sm100);
  if (!bundle)
    return;
  checkMxLaunches(bundle, "mscale", scaled(8, 128, 256, 4),
                  {{kMxScale, 5, 98304, 1, int32_t(kMax), 64, 128, 128}},
                  "row_scale");
  moeBundleClose(bundle);
  gpu.ccMajor = 9;
  bundle = OPEN_VALID(replaced("chip sm_90a", "chip sm_100a", fp8Bundle()));
  if (!bundle)
    return;
  a = scaledArgs(64, 64, 16, 4);
  a.row_scale = kScale;
  CHECK_STATUS(run(bundle, "fscale", a), MOE_STATUS_UNSUPPORTED,
               "bundle is for sm_100a but the device is sm_90");
  moeBundleClose(bundle);
}

TEST(mxfp8LaunchesStore) {
  FakeGpu &gpu = installFakeDriver();
  declareMxKernels(gpu);
  moeBundle *bundle = OPEN_VALID(mxfp8Bundle());
  if (!bundle)
    return;
  const int32_t big = int32_t(kMax);
  // The grids of grouped_matmul.v3, as for fp8_block. 64 rows over 8
  // experts: swap-AB 16x64 (528 resident): min(4 + 8, 8 * 1) = 8 slots * 4
  // = 32; 128x128 (132 resident): 1 + 3 = 4 slots * 2 = 8. 33 parameters
  // each; rows_scale [64, 16], weights_scale [8, 256, 16].
  checkMxLaunches(bundle, "mgemm", mgemm(64),
                  {{kMxSwapAB, 32, 81920, 1, 16, 16, 64, 128},
                   {kMxNormal, 8, 147456, 17, big, 128, 128, 256}},
                  "store");
  // One row: 2 slots * 4 = 8.
  checkMxLaunches(bundle, "mgemm", mgemm(1),
                  {{kMxSwapAB, 8, 81920, 1, 16, 16, 64, 128}}, "store");
  // 2^31 - 1 rows: capped by residency.
  checkMxLaunches(bundle, "mgemm", mgemm(kMax),
                  {{kMxSwapAB, 32, 81920, 1, 16, 16, 64, 128},
                   {kMxNormal, 132, 147456, 17, big, 128, 128, 256}},
                  "store");
  // swiglu: the weights box has tile_n/2 rows, out N/2 columns; the weights
  // scale has the weights' N rows (N = 384, K = 32: [4, 384, 1]). 8 rows
  // over 4 experts: 5 slots * 3 column tiles.
  checkMxLaunches(bundle, "mswiglu", scaledArgs(8, 384, 32, 4),
                  {{kMxSwiGLU, 15, 98304, 1, big, 64, 128, 128}}, "swiglu");

  // By hand, parameter by parameter: mgemm, M = 5, K = 512 (16 scales per
  // row), N = 256, E = 8: 17 + rows_scale (7) + weights_scale (9).
  moeGroupedMatmulArgs a = mgemm(5);
  a.rows_scale = kRowsScale + 1; // any alignment
  a.weights_scale = kWeightsScale + 7;
  CHECK_EQ(moeGroupedMatmul(bundle, "mgemm", &a, testStream()),
           MOE_STATUS_SUCCESS);
  const FakeLaunch &got = gpu.launches.back();
  CHECK_EQ(got.function, std::string(kMxSwapAB));
  CHECK_EQ(got.numParams, 33);
  std::vector<uint64_t> tail;
  pushMemref2D(tail, kRowsScale + 1, 5, 16); // 17-23
  for (uint64_t word :
       {kWeightsScale + 7, kWeightsScale + 7, uint64_t(0), uint64_t(8),
        uint64_t(256), uint64_t(16), uint64_t(4096), uint64_t(16), uint64_t(1)})
    tail.push_back(word); // 24-32: [8, 256, 16]
  CHECK(got.tail == tail);
  moeBundleClose(bundle);
}

TEST(mxfp8LaunchesRowScaleAndBias) {
  FakeGpu &gpu = installFakeDriver();
  declareMxKernels(gpu);
  moeBundle *bundle = OPEN_VALID(mxfp8Bundle());
  if (!bundle)
    return;
  const int32_t big = int32_t(kMax);
  // 38 parameters: the row_scale memref after the scales. K = 96: 3 scales
  // per row; N = 200. 100 rows over 3 experts: 2 + 3 = 5 slots * 2.
  moeGroupedMatmulArgs a = scaledArgs(100, 200, 96, 3);
  a.row_scale = kScale + 12;
  checkMxLaunches(bundle, "mscale", a,
                  {{kMxScale, 10, 98304, 1, big, 64, 128, 128}}, "row_scale");
  // 40 parameters: the bf16 bias memref [E, N] after the scales.
  a = scaledArgs(8, 256, 128, 4);
  a.bias = kBias + 2;
  checkMxLaunches(bundle, "mbias", a,
                  {{kMxBias, 10, 98304, 1, big, 64, 128, 128}}, "store", 16);
  // 45 parameters: scales, row_scale, then the f32 bias. 300 rows over 8
  // experts: 5 + 8 = 13 slots * 3; K = 1024: 32 scales per row.
  a = scaledArgs(300, 384, 1024, 8);
  a.row_scale = kScale;
  a.bias = kBias;
  checkMxLaunches(bundle, "mboth", a,
                  {{kMxBoth, 39, 98304, 1, big, 64, 128, 128}}, "row_scale",
                  32);
  // 40 parameters: gptoss swiglu with an f32 bias [E, N] of the weights' N.
  // 40 rows over 8 experts: 1 + 8 = 9 slots * 4 column tiles of N/2.
  a = scaledArgs(40, 512, 96, 8);
  a.bias = kBias;
  checkMxLaunches(bundle, "mgptoss", a,
                  {{kMxGptOss, 36, 98304, 1, big, 64, 128, 128}}, "swiglu", 32);

  // By hand: mboth, M = 5, N = 256, K = 96, E = 2: rows_scale [5, 3],
  // weights_scale [2, 256, 3], row_scale [5], bias [2, 256].
  a = scaledArgs(5, 256, 96, 2);
  a.row_scale = kScale;
  a.bias = kBias;
  CHECK_EQ(moeGroupedMatmul(bundle, "mboth", &a, testStream()),
           MOE_STATUS_SUCCESS);
  const FakeLaunch &both = gpu.launches.back();
  CHECK_EQ(both.numParams, 45);
  CHECK_EQ(both.ints[0], 96); // K
  const std::vector<uint64_t> bothTail = {
      kRowsScale,    kRowsScale,    0, 5, 3,   3,   1,         // 17-23
      kWeightsScale, kWeightsScale, 0, 2, 256, 3,   768, 3, 1, // 24-32
      kScale,        kScale,        0, 5, 1,                   // 33-37
      kBias,         kBias,         0, 2, 256, 256, 1};        // 38-44
  CHECK(both.tail == bothTail);
  // mgptoss, M = 40: out [40, 256] (N/2), weights_scale [8, 512, 3] (the
  // weights' N), bias [8, 512].
  a = scaledArgs(40, 512, 96, 8);
  a.bias = kBias;
  CHECK_EQ(moeGroupedMatmul(bundle, "mgptoss", &a, testStream()),
           MOE_STATUS_SUCCESS);
  const FakeLaunch &oss = gpu.launches.back();
  CHECK_EQ(oss.numParams, 40);
  CHECK_EQ(oss.words[8], uint64_t(40));
  CHECK_EQ(oss.words[9], uint64_t(256));
  const std::vector<uint64_t> ossTail = {
      kRowsScale,    kRowsScale,    0, 40, 3,   3,   1,          // 17-23
      kWeightsScale, kWeightsScale, 0, 8,  512, 3,   1536, 3, 1, // 24-32
      kBias,         kBias,         0, 8,  512, 512, 1};         // 33-39
  CHECK(oss.tail == ossTail);
  moeBundleClose(bundle);
}
