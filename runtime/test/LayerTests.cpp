//===- LayerTests.cpp - moeLayer and moeLayerWorkspaceBytes ---------------===//
//
// Contract §3.5 (layer.v1) and §3.10 (layer_fp8.v1): the workspace layout
// against a hand computation; that moeLayer launches exactly what moeRoute,
// moePermute, moeGroupedMatmul (twice) and moeUnpermute launch (and, for
// layer_fp8.v1, moeQuantize before each GEMM, but for the gathered rows when
// the permute's gather quantizes them itself and for the gate-up GEMM's
// output when that one quantizes it itself) with the buffers carved from the
// workspace, in that order, after validating and encoding everything; and
// that every bad argument is refused without a driver call. The entries are
// those of layerBundle(), layerFp8Bundle(), layerFp8OutBundle() and
// layerFp8GatherBundle() (TestBundles.h).
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "LaunchChecks.h"
#include "TestBundles.h"
#include "TestHarness.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <vector>

using namespace moe_test;

namespace {

constexpr uint64_t kTokens = 0x7f0000310000, kLogits = 0x7f0000320000,
                   kScoreBias = 0x7f0000330000, kGateUpW = 0x7f0000340000,
                   kDownW = 0x7f0000350000, kGateUpBias = 0x7f0000360000,
                   kDownBias = 0x7f0000370000, kOut = 0x7f0000380000,
                   kGateUpScale = 0x7f0000390000, kDownScale = 0x7f00003a0000,
                   kWorkspace = 0x7f0001000000;
constexpr int64_t kMax = 2147483647;

/// The fake's kernels of the layer bundles: how many parameters each takes.
FakeGpu &install() {
  FakeGpu &gpu = installFakeDriver();
  gpu.wordParams[kMixSymbols[0]] = 21;
  gpu.wordParams[kOssSymbols[0]] = 26; // with the score bias
  for (const char *const *symbols : {kMixSymbols, kOssSymbols}) {
    gpu.wordParams[symbols[1]] = 12; // permute: count,
    gpu.wordParams[symbols[2]] = 29; // index
    gpu.wordParams[symbols[3]] = 24; // and gather kernels
    gpu.wordParams[symbols[6]] = 28;
  }
  gpu.numParams[kOssSymbols[4]] = 24; // bias
  gpu.numParams[kOssSymbols[5]] = 24;
  // layerFp8Bundle(): the quantize kernels take 21 words, the FP8 GEMMs 33
  // parameters, 40 with a bias.
  gpu.wordParams[kFmixSymbols[0]] = 21;
  gpu.wordParams[kFossSymbols[0]] = 26;
  for (const char *const *symbols : {kFmixSymbols, kFossSymbols}) {
    gpu.wordParams[symbols[1]] = 12;
    gpu.wordParams[symbols[2]] = 29;
    gpu.wordParams[symbols[3]] = 24;
    gpu.wordParams[symbols[4]] = 21;
    gpu.wordParams[symbols[6]] = 21;
    gpu.wordParams[symbols[8]] = 28;
  }
  gpu.numParams[kFmixSymbols[5]] = 33;
  gpu.numParams[kFmixSymbols[7]] = 33;
  gpu.numParams[kFossSymbols[5]] = 40;
  gpu.numParams[kFossSymbols[7]] = 40;
  // layerFp8OutBundle(): its gate-up GEMMs take the 7 parameters of their
  // output's scales too: 40, 47 with a bias; the other kernels are those of
  // layerFp8Bundle().
  gpu.numParams[kQmixSymbols[5]] = 40;
  gpu.numParams[kQossSymbols[5]] = 47;
  // layerFp8GatherBundle() and withFp8Gather(layerFp8Bundle()): their
  // gathers take the 7 parameters of the rows' scales too: 31.
  gpu.wordParams[kGmixSymbols[3]] = 31;
  gpu.wordParams[kGossSymbols[3]] = 31;
  // layerMxfp8Bundle(): layerFp8Bundle()'s kernels, its MXFP8 GEMMs and
  // quantizes renamed: 33 and 40 parameters, 21 words.
  for (const char *const *symbols : {kMmixSymbols, kMossSymbols}) {
    gpu.wordParams[symbols[4]] = 21;
    gpu.wordParams[symbols[6]] = 21;
  }
  gpu.numParams[kMmixSymbols[5]] = 33;
  gpu.numParams[kMmixSymbols[7]] = 33;
  gpu.numParams[kMossSymbols[5]] = 40;
  gpu.numParams[kMossSymbols[7]] = 40;
  return gpu;
}

/// Arguments of layer mix (E = 8, k = 2, H = 256, I = 128, no biases).
moeLayerArgs mix(int64_t tokens) {
  moeLayerArgs a = {};
  a.tokens = kTokens;
  a.logits = kLogits;
  a.score_bias = 0;
  a.gate_up_weights = kGateUpW;
  a.down_weights = kDownW;
  a.gate_up_bias = 0;
  a.down_bias = 0;
  a.out = kOut;
  a.workspace = kWorkspace;
  a.workspace_bytes = uint64_t(1) << 32;
  a.tokens_count = tokens;
  a.hidden = 256;
  a.intermediate = 128;
  a.experts = 8;
  return a;
}

/// Arguments of layer oss (E = 4, k = 2, with all three biases).
moeLayerArgs oss(int64_t tokens, int64_t hidden, int64_t intermediate) {
  moeLayerArgs a = mix(tokens);
  a.score_bias = kScoreBias;
  a.gate_up_bias = kGateUpBias;
  a.down_bias = kDownBias;
  a.hidden = hidden;
  a.intermediate = intermediate;
  a.experts = 4;
  return a;
}

/// Arguments of layer_fp8.v1 layer fmix (E = 8, k = 2, H = 256, I = 128, no
/// biases): mix's, with the weights' scales.
moeLayerArgs fmix(int64_t tokens) {
  moeLayerArgs a = mix(tokens);
  a.gate_up_weights_scale = kGateUpScale;
  a.down_weights_scale = kDownScale;
  return a;
}

/// Arguments of layer_fp8.v1 layer foss (E = 4, k = 2, with all three
/// biases and the weights' scales).
moeLayerArgs foss(int64_t tokens, int64_t hidden, int64_t intermediate) {
  moeLayerArgs a = oss(tokens, hidden, intermediate);
  a.gate_up_weights_scale = kGateUpScale;
  a.down_weights_scale = kDownScale;
  return a;
}

moeStatus layer(moeBundle *bundle, const char *entry, const moeLayerArgs &a,
                void *stream = nullptr) {
  return moeLayer(bundle, entry, &a, stream);
}

uint64_t workspaceBytes(moeBundle *bundle, const char *entry, int64_t tokens,
                        int64_t hidden, int64_t intermediate) {
  uint64_t bytes = 0;
  CHECK_EQ(moeLayerWorkspaceBytes(bundle, entry, tokens, hidden, intermediate,
                                  &bytes),
           MOE_STATUS_SUCCESS);
  return bytes;
}

/// Bad arguments of moeLayer, and the message naming the bad one.
struct Case {
  moeLayerArgs args;
  const char *message;
};

/// `a` with a pointer argument replaced.
moeLayerArgs with(moeLayerArgs a, uint64_t moeLayerArgs::*field,
                  uint64_t value) {
  a.*field = value;
  return a;
}

/// `a` with a size replaced.
moeLayerArgs sized(moeLayerArgs a, int64_t moeLayerArgs::*field,
                   int64_t value) {
  a.*field = value;
  return a;
}

/// A launch of a layer that fails: its number in the call (from 0), and the
/// error.
struct FailingLaunch {
  size_t number;
  const char *message;
};

/// Runs layer `entry` of `bytes` with `a`: the first call loads the bundle
/// and makes all `kernels` launches; a gate_up tensor map that does not
/// encode (`encodeMessage`) launches nothing; each of `failing` says how many
/// launches were issued before it.
void checkLoadsAndFails(const std::string &bytes, const char *entry,
                        const moeLayerArgs &a, size_t kernels,
                        const char *encodeMessage,
                        std::initializer_list<FailingLaunch> failing) {
  FakeGpu &gpu = install();
  moeBundle *bundle = openBundle(bytes);
  CHECK(bundle != nullptr);
  CHECK_EQ(layer(bundle, entry, a), MOE_STATUS_SUCCESS);
  CHECK_CONTAINS(callsSince(0), "cuInit");
  CHECK_EQ(gpu.launches.size(), kernels);
  gpu.encodeResult = cu::kErrorInvalidValue;
  CHECK_STATUS(layer(bundle, entry, a), MOE_STATUS_CUDA_ERROR, encodeMessage);
  CHECK_EQ(gpu.launches.size(), kernels);
  gpu.encodeResult = cu::kSuccess;
  for (const FailingLaunch &f : failing) {
    const size_t before = gpu.launches.size();
    gpu.failLaunchNumber = int(before + f.number);
    CHECK_STATUS(layer(bundle, entry, a), MOE_STATUS_CUDA_ERROR, f.message);
    CHECK_EQ(gpu.launches.size(), before + f.number + 1);
  }
  moeBundleClose(bundle);
}

/// Where the buffers start in the workspace (contract §3.5, §3.10), by hand;
/// the quantized rows and inter and their scales in a layer_fp8.v1 layer's
/// only.
struct Carved {
  uint64_t ids, weights, offsets, slots, permute, rows, inter;
  uint64_t rowsValues = 0, rowsScales = 0, interValues = 0, interScales = 0;
};

/// The same launch, tensor maps included (compared by what was encoded).
void checkSameLaunch(const FakeLaunch &got, const FakeLaunch &want) {
  CHECK_EQ(got.function, want.function);
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ(got.grid[i], want.grid[i]);
    CHECK_EQ(got.block[i], want.block[i]);
  }
  CHECK_EQ(got.smem, want.smem);
  CHECK_EQ(got.stream, want.stream);
  CHECK(got.extraIsNull && want.extraIsNull);
  CHECK(isPdlLaunch(got) && isPdlLaunch(want));
  CHECK_EQ(got.numParams, want.numParams);
  CHECK_EQ(got.params.size(), want.params.size());
  for (size_t i = 0; i < got.params.size() && i < want.params.size(); ++i)
    CHECK_EQ(got.params[i], want.params[i]);
  if (!want.params.empty())
    return; // a route, permute or unpermute kernel: nothing else recorded
  for (int i = 0; i < 12; ++i)
    CHECK_EQ(got.words[i], want.words[i]);
  for (int i = 0; i < 3; ++i)
    CHECK_EQ(got.ints[i], want.ints[i]);
  CHECK_EQ(got.tail.size(), want.tail.size());
  for (size_t i = 0; i < got.tail.size() && i < want.tail.size(); ++i)
    CHECK_EQ(got.tail[i], want.tail[i]);
  CHECK(got.mapsAligned);
  const std::vector<FakeEncode> &encodes = fakeGpu().encodes;
  for (int m = 0; m < 2; ++m) {
    const FakeEncode &g = encodes[got.mapEncode[m]];
    const FakeEncode &w = encodes[want.mapEncode[m]];
    CHECK_EQ(g.rank, w.rank);
    CHECK_EQ(g.address, w.address);
    for (unsigned d = 0; d < w.rank; ++d) {
      CHECK_EQ(g.dims[d], w.dims[d]);
      CHECK_EQ(g.box[d], w.box[d]);
      if (d + 1 < w.rank)
        CHECK_EQ(g.strides[d], w.strides[d]);
    }
  }
}

/// Runs the layer `entry` with `a`, then the single calls of its parts (the
/// five of a layer.v1 layer, the seven of a layer_fp8.v1 one, less the
/// quantize and the intermediate where it has not those parts) with the
/// workspace carved as `at` says, and checks that the layer made exactly the
/// single calls' launches, in order (`symbols`: route, permute count, index
/// and gather, [quantize], gate-up, [intermediate], down, combine), with the
/// GEMMs' tensor maps encoded before its first launch.
void checkLayer(moeBundle *bundle, const char *entry, const moeLayerArgs &a,
                const Carved &at, const char *const *symbols, int numKernels) {
  FakeGpu &gpu = fakeGpu();
  int32_t index = -1;
  moeEntryInfo info;
  CHECK_EQ(moeBundleFindEntry(bundle, entry, &index), MOE_STATUS_SUCCESS);
  CHECK_EQ(moeBundleGetEntry(bundle, index, &info), MOE_STATUS_SUCCESS);
  const bool fp8 = std::string(info.abi) == MOE_ABI_LAYER_FP8;
  // Without a quantize part, the permute's gather writes the rows' values
  // and scales (and the bf16 rows are only the down GEMM's output); without
  // an intermediate part, the gate-up GEMM writes inter's values and scales
  // (and the bf16 inter is not used).
  const bool gatherQuantizes = fp8 && *info.quantize == '\0';
  const bool gateUpQuantizes = fp8 && *info.intermediate == '\0';
  // The GEMMs' format: f32 scales per [1, 128] group of a row and per
  // [128, 128] block of the weights, or MXFP8's E8M0 bytes per [1, 32]
  // group of a row of both.
  moeEntryInfo gateUpInfo;
  CHECK_EQ(moeBundleFindEntry(bundle, info.gate_up, &index),
           MOE_STATUS_SUCCESS);
  CHECK_EQ(moeBundleGetEntry(bundle, index, &gateUpInfo), MOE_STATUS_SUCCESS);
  const bool mx = std::string(gateUpInfo.format) == MOE_FORMAT_MXFP8;
  const int64_t group = mx ? 32 : 128;
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  void *stream = testStream();
  size_t callsBefore = gpu.calls.size(), before = gpu.launches.size();
  CHECK_EQ(layer(bundle, entry, a, stream), MOE_STATUS_SUCCESS);
  std::string calls = "cuCtxGetCurrent cuCtxGetId cuTensorMapEncodeTiled "
                      "cuTensorMapEncodeTiled cuTensorMapEncodeTiled "
                      "cuTensorMapEncodeTiled";
  for (int i = 0; i < numKernels; ++i)
    calls += " cuLaunchKernelEx";
  CHECK_EQ(callsSince(callsBefore), calls);
  CHECK_EQ(gpu.launches.size(), before + numKernels);
  for (int i = 0; i < numKernels && before + i < gpu.launches.size(); ++i)
    CHECK_EQ(gpu.launches[before + i].function, std::string(symbols[i]));

  const uint64_t ws = a.workspace;
  const int64_t rows = a.tokens_count * 2; // k = 2
  // An FP8 layer's GEMMs read the quantized values and their scales.
  const uint64_t gateUpRows = fp8 ? ws + at.rowsValues : ws + at.rows,
                 downRows = fp8 ? ws + at.interValues : ws + at.inter;
  moeRouteArgs route = {a.logits,        a.score_bias,   ws + at.ids,
                        ws + at.weights, a.tokens_count, a.experts};
  moePermuteArgs permute = {a.tokens,
                            ws + at.ids,
                            gatherQuantizes ? ws + at.rowsValues : ws + at.rows,
                            ws + at.offsets,
                            ws + at.slots,
                            ws + at.permute,
                            a.tokens_count,
                            a.hidden,
                            gatherQuantizes ? ws + at.rowsScales : 0};
  moeQuantizeArgs quantize = {
      ws + at.rows, ws + at.rowsValues, ws + at.rowsScales, 1, rows, a.hidden};
  moeGroupedMatmulArgs gateUp = {gateUpRows,
                                 a.gate_up_weights,
                                 ws + at.offsets,
                                 gateUpQuantizes ? ws + at.interValues
                                                 : ws + at.inter,
                                 rows,
                                 2 * a.intermediate,
                                 a.hidden,
                                 a.experts,
                                 0,
                                 a.gate_up_bias,
                                 fp8 ? ws + at.rowsScales : 0,
                                 a.gate_up_weights_scale,
                                 gateUpQuantizes ? ws + at.interScales : 0};
  moeQuantizeArgs intermediate = {
      ws + at.inter, ws + at.interValues, ws + at.interScales, 1,
      rows,          a.intermediate};
  moeGroupedMatmulArgs down = {downRows,
                               a.down_weights,
                               ws + at.offsets,
                               ws + at.rows,
                               rows,
                               a.hidden,
                               a.intermediate,
                               a.experts,
                               0,
                               a.down_bias,
                               fp8 ? ws + at.interScales : 0,
                               a.down_weights_scale,
                               0};
  moeUnpermuteArgs unpermute = {ws + at.rows, ws + at.slots, ws + at.weights,
                                a.out,        rows,          a.tokens_count,
                                a.hidden};
  size_t single = gpu.launches.size();
  CHECK_EQ(moeRoute(bundle, info.route, &route, stream), MOE_STATUS_SUCCESS);
  CHECK_EQ(moePermute(bundle, info.permute, &permute, stream),
           MOE_STATUS_SUCCESS);
  if (fp8 && !gatherQuantizes)
    CHECK_EQ(moeQuantize(bundle, info.quantize, &quantize, stream),
             MOE_STATUS_SUCCESS);
  CHECK_EQ(moeGroupedMatmul(bundle, info.gate_up, &gateUp, stream),
           MOE_STATUS_SUCCESS);
  if (fp8 && !gateUpQuantizes)
    CHECK_EQ(moeQuantize(bundle, info.intermediate, &intermediate, stream),
             MOE_STATUS_SUCCESS);
  CHECK_EQ(moeGroupedMatmul(bundle, info.down, &down, stream),
           MOE_STATUS_SUCCESS);
  CHECK_EQ(moeUnpermute(bundle, info.unpermute, &unpermute, stream),
           MOE_STATUS_SUCCESS);
  CHECK_EQ(gpu.launches.size(), single + numKernels);
  if (gpu.launches.size() != single + numKernels ||
      single != before + numKernels)
    return;
  for (int i = 0; i < numKernels; ++i)
    checkSameLaunch(gpu.launches[before + i], gpu.launches[single + i]);
  // The permute's count and index kernels take the counts right after the
  // sources in its part of the workspace (N*4 bytes rounded up to 256).
  const uint64_t counts =
      ws + at.permute + uint64_t((rows * 4 + 255) / 256 * 256);
  CHECK_EQ(gpu.launches[before + 1].params[7], counts);
  CHECK_EQ(gpu.launches[before + 2].params[7], counts);
  CHECK_EQ(gpu.launches[before + 2].params[24], ws + at.permute);
  // The gather reads the tokens and writes the rows: bf16, or (without a
  // quantize part) their e4m3 values [T*k, H] and f32 scales [T*k, H/128].
  std::vector<uint64_t> gatherRows;
  pushMemref2D(gatherRows, gatherQuantizes ? ws + at.rowsValues : ws + at.rows,
               rows, a.hidden);
  if (gatherQuantizes)
    pushMemref2D(gatherRows, ws + at.rowsScales, rows, a.hidden / 128);
  const std::vector<uint64_t> &gather = gpu.launches[before + 3].params;
  CHECK_EQ(gather.size(), 17 + gatherRows.size());
  CHECK_EQ(gather[0], a.tokens);
  if (gather.size() == 17 + gatherRows.size())
    CHECK(std::vector<uint64_t>(gather.begin() + 17, gather.end()) ==
          gatherRows);
  if (!fp8)
    return;
  // By hand: each GEMM reads e4m3 values [T*k, C] and their f32 scales
  // [T*k, C/128] (its rows map and its parameters 17..23; MXFP8: E8M0 bytes
  // [T*k, C/32]) with the weights' scales (24..32: [E, ceil(N/128), C/128];
  // MXFP8: [E, N, C/32]): the gathered rows' from the quantize step, inter's
  // from
  // the intermediate step or, in a layer without one, from the gate-up GEMM
  // itself (its out and its parameters 33..39, before its bias); the down
  // GEMM writes the rows, which the combine reads.
  const std::vector<FakeEncode> &encodes = gpu.encodes;
  auto checkQuantize = [&](const FakeLaunch &q, uint64_t input, uint64_t values,
                           uint64_t scales, int64_t columns) {
    CHECK_EQ(q.params.size(), size_t(21));
    if (q.params.size() != 21)
      return;
    CHECK_EQ(q.params[0], input);
    CHECK_EQ(q.params[3], uint64_t(rows));
    CHECK_EQ(q.params[4], uint64_t(columns));
    CHECK_EQ(q.params[7], values);
    std::vector<uint64_t> scaleWords;
    pushMemref2D(scaleWords, scales, rows, columns / group);
    CHECK(std::vector<uint64_t>(q.params.begin() + 14, q.params.end()) ==
          scaleWords);
  };
  auto checkGemm = [&](const FakeLaunch &gemm, uint64_t values, uint64_t scales,
                       int64_t columns, uint64_t weightsScale, int64_t n,
                       uint64_t out, int64_t outColumns, bool outScale,
                       uint64_t bias) {
    CHECK_EQ(encodes[gemm.mapEncode[0]].address, values);
    CHECK_EQ(encodes[gemm.mapEncode[0]].dataType, 0); // UINT8
    CHECK_EQ(gemm.words[5], out);
    CHECK_EQ(gemm.words[8], uint64_t(rows));
    CHECK_EQ(gemm.words[9], uint64_t(outColumns));
    const size_t tail = 16 + (outScale ? 7 : 0) + (bias ? 7 : 0);
    CHECK_EQ(gemm.tail.size(), tail);
    if (gemm.tail.size() != tail)
      return;
    // The scales: rows [T*k, KB], weights [E, NB, KB].
    const uint64_t kb = uint64_t(columns / group),
                   nb = uint64_t(mx ? n : (n + 127) / 128);
    std::vector<uint64_t> scaleWords;
    pushMemref2D(scaleWords, scales, rows, int64_t(kb));
    for (uint64_t word :
         {weightsScale, weightsScale, uint64_t(0), uint64_t(a.experts), nb, kb,
          nb * kb, kb, uint64_t(1)})
      scaleWords.push_back(word);
    CHECK(std::vector<uint64_t>(gemm.tail.begin(), gemm.tail.begin() + 16) ==
          scaleWords);
    std::vector<uint64_t> after(gemm.tail.begin() + 16, gemm.tail.end());
    std::vector<uint64_t> expected;
    if (outScale)
      pushMemref2D(expected, ws + at.interScales, rows, outColumns / 128);
    if (bias)
      for (uint64_t word : {bias, bias, uint64_t(0), uint64_t(a.experts)})
        expected.push_back(word);
    after.resize(std::min(after.size(), expected.size()));
    CHECK(after == expected);
  };
  const FakeLaunch *next = &gpu.launches[before + 4];
  if (!gatherQuantizes)
    checkQuantize(*next++, ws + at.rows, ws + at.rowsValues, ws + at.rowsScales,
                  a.hidden);
  checkGemm(*next++, ws + at.rowsValues, ws + at.rowsScales, a.hidden,
            a.gate_up_weights_scale, 2 * a.intermediate,
            gateUpQuantizes ? ws + at.interValues : ws + at.inter,
            a.intermediate, gateUpQuantizes, a.gate_up_bias);
  if (!gateUpQuantizes)
    checkQuantize(*next++, ws + at.inter, ws + at.interValues,
                  ws + at.interScales, a.intermediate);
  checkGemm(next[0], ws + at.interValues, ws + at.interScales, a.intermediate,
            a.down_weights_scale, a.hidden, ws + at.rows, a.hidden, false,
            a.down_bias);
  CHECK_EQ(next[1].params[0], ws + at.rows);
  CHECK_EQ(&next[1], &gpu.launches[before + numKernels - 1]);
}

} // namespace

TEST(layerWorkspaceBytes) {
  install();
  moeBundle *bundle = OPEN_VALID(layerBundle());
  if (!bundle)
    return;
  // mix, T = 3 (6 rows, i32, E = 8, H = 256, I = 128, chunks of 4096): ids
  // 24 bytes at 0, weights 24 at 256, offsets 36 at 512, slots 24 at 768,
  // the permute's workspace (sources 24 bytes, then at 256 the counts of 1
  // chunk, 8*4 bytes: 288) at 1024, rows 6*256*2 = 3072 at 1536, inter
  // 6*128*2 = 1536 at 4608: 6144.
  CHECK_EQ(workspaceBytes(bundle, "mix", 3, 256, 128), uint64_t(6144));
  // T = 4096 (8192 rows): ids 32768 at 0, weights at 32768, offsets 36 at
  // 65536, slots 32768 at 65792, the permute's 32768 + 2 chunks * 8 * 4 =
  // 32832 at 98560, rows 4194304 at 131584, inter 2097152 at 4325888:
  // 6423040.
  CHECK_EQ(workspaceBytes(bundle, "mix", 4096, 256, 128), uint64_t(6423040));
  // oss, T = 5 (10 rows, i64, E = 4, H = 64, I = 32, chunks of 64): ids 40
  // at 0, weights 40 at 256, offsets 40 at 512, slots 80 at 768, the
  // permute's 256 + 4 * 4 = 272 at 1024, rows 1280 at 1536, inter 640 at
  // 2816: 3456.
  CHECK_EQ(workspaceBytes(bundle, "oss", 5, 64, 32), uint64_t(3456));
  // T = 1, H = I = 8: every buffer but the permute's (272 bytes) below 256
  // bytes, 7 * 256 + 32.
  CHECK_EQ(workspaceBytes(bundle, "oss", 1, 8, 8), uint64_t(7 * 256 + 32));
  // oss, T = 129 (258 rows in 5 chunks of 64, H = I = 8): ids 1032 at 0,
  // weights at 1280, offsets 40 at 2560, slots 2064 at 2816, the permute's
  // 1032 bytes of sources rounded up to 1280 then 5 * 4 * 4 counts (1360)
  // at 5120, rows 4128 at 6656, inter 4128 at 11008: 15136.
  CHECK_EQ(workspaceBytes(bundle, "oss", 129, 8, 8), uint64_t(15136));

  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  uint64_t bytes = 7;
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "mix", 1, 256, 128, nullptr),
                 bad, "moeLayerWorkspaceBytes: bytes is NULL");
  CHECK_REJECTED(moeLayerWorkspaceBytes(nullptr, "mix", 1, 256, 128, &bytes),
                 bad, "moeLayerWorkspaceBytes: bundle is NULL");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "nope", 1, 256, 128, &bytes),
                 MOE_STATUS_NOT_FOUND,
                 "moeLayerWorkspaceBytes: no entry 'nope' in the bundle");
  CHECK_REJECTED(
      moeLayerWorkspaceBytes(bundle, "mix_permute", 1, 256, 128, &bytes), bad,
      "moeLayerWorkspaceBytes(mix_permute): the entry is op=moe.permute "
      "abi=permute.v2, not op=moe.layer with abi=layer.v1");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "mix", 0, 256, 128, &bytes),
                 bad, "moeLayerWorkspaceBytes(mix): T = 0 must be at least 1");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "mix", 4097, 256, 128, &bytes),
                 bad, "T = 4097 exceeds the entry's max_rows = 4096");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "mix", 1, 255, 128, &bytes),
                 bad,
                 "moeLayerWorkspaceBytes(mix): hidden = 255 does not match "
                 "entry mix_permute's hidden = 256");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "mix", 1, 256, 64, &bytes), bad,
                 "intermediate = 64 does not match entry mix_gate_up's n = "
                 "256 (2I)");
  CHECK_REJECTED(
      moeLayerWorkspaceBytes(bundle, "oss", 1, 0, 32, &bytes), bad,
      "moeLayerWorkspaceBytes(oss): hidden = 0 is not a positive multiple of "
      "8 (rows move in 16-byte vectors)");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "oss", 1, 12, 32, &bytes), bad,
                 "hidden = 12 is not a positive multiple of 8");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "oss", 1, 64, -8, &bytes), bad,
                 "moeLayerWorkspaceBytes(oss): intermediate = -8 is not a "
                 "positive multiple of 8");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "oss", 1, 64, 4, &bytes), bad,
                 "intermediate = 4 is not a positive multiple of 8");
  CHECK_REJECTED(
      moeLayerWorkspaceBytes(bundle, "oss", kMax / 2 + 1, 64, 32, &bytes), bad,
      "moeLayerWorkspaceBytes(oss): T*k = 2147483648 rows exceeds "
      "2147483647 (T = 1073741824, k = 2)");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "oss", kMax / 2,
                                        int64_t(1) << 40, 32, &bytes),
                 bad,
                 "moeLayerWorkspaceBytes(oss): the workspace overflows int64 "
                 "(T = 1073741823, H = 1099511627776, I = 32)");
  CHECK_EQ(bytes, uint64_t(7)); // untouched on failure
  moeBundleClose(bundle);
}

TEST(layerLaunchesTheSingleCalls) {
  install();
  moeBundle *bundle = OPEN_VALID(layerBundle());
  if (!bundle)
    return;
  // The offsets of layerWorkspaceBytes' hand computations.
  checkLayer(bundle, "mix", mix(3), {0, 256, 512, 768, 1024, 1536, 4608},
             kMixSymbols, kLayerKernels);
  checkLayer(bundle, "mix", mix(4096),
             {0, 32768, 65536, 65792, 98560, 131584, 4325888}, kMixSymbols,
             kLayerKernels);
  checkLayer(bundle, "oss", oss(5, 64, 32),
             {0, 256, 512, 768, 1024, 1536, 2816}, kOssSymbols, kLayerKernels);
  // A workspace of exactly the size needed is enough.
  moeLayerArgs exact = oss(5, 64, 32);
  exact.workspace_bytes = 3456;
  checkLayer(bundle, "oss", exact, {0, 256, 512, 768, 1024, 1536, 2816},
             kOssSymbols, kLayerKernels);
  moeBundleClose(bundle);
}

TEST(layerLaunchesNoFormForExpertsAboveT) {
  FakeGpu &gpu = install();
  // mix's gate-up split into a form for experts of 1..2 rows and one from 3
  // rows on: a single call with M = T*k launches the second whenever M >= 3,
  // a layer only when T >= 3 (each token gives an expert at most one row).
  const std::string oneForm =
      kernelLine("mix_gate_up", kMixSymbols[4], "moe_kernels", 1, 2147483647,
                 64, 128, 98304, 0);
  const char *kBig = "gemm_gate_up_mix_big";
  moeBundle *bundle =
      OPEN_VALID(replaced(oneForm,
                          kernelLine("mix_gate_up", kMixSymbols[4],
                                     "moe_kernels", 1, 2, 64, 128, 98304, 0) +
                              kernelLine("mix_gate_up", kBig, "moe_kernels", 3,
                                         2147483647, 64, 128, 98304, 0),
                          layerBundle()));
  if (!bundle)
    return;
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  for (int64_t tokens : {2, 3}) {
    size_t before = gpu.launches.size();
    CHECK_EQ(layer(bundle, "mix", mix(tokens), testStream()),
             MOE_STATUS_SUCCESS);
    std::vector<std::string> gemms;
    for (size_t i = before; i < gpu.launches.size(); ++i)
      if (gpu.launches[i].function.rfind("gemm_gate_up", 0) == 0)
        gemms.push_back(gpu.launches[i].function);
    CHECK_EQ(gemms.size(), size_t(tokens == 2 ? 1 : 2));
    CHECK(!gemms.empty() && gemms[0] == kMixSymbols[4]);
    if (tokens == 3)
      CHECK(gemms.size() == 2 && gemms[1] == kBig);
    // The single call on the same M = 2T rows launches both forms.
    moeGroupedMatmulArgs single = {};
    single.rows = kWorkspace;
    single.weights = kGateUpW;
    single.offsets = kWorkspace + 4096;
    single.out = kWorkspace + 8192;
    single.m = 2 * tokens;
    single.n = 256;
    single.k = 256;
    single.experts = 8;
    before = gpu.launches.size();
    CHECK_EQ(moeGroupedMatmul(bundle, "mix_gate_up", &single, testStream()),
             MOE_STATUS_SUCCESS);
    CHECK_EQ(gpu.launches.size(), before + 2);
  }
  moeBundleClose(bundle);
}

TEST(layerRejectsBadArguments) {
  install();
  moeBundle *bundle = OPEN_VALID(layerBundle());
  if (!bundle)
    return;
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  moeLayerArgs a = mix(16);
  CHECK_REJECTED(moeLayer(nullptr, "mix", &a, nullptr), bad,
                 "moeLayer: bundle is NULL");
  CHECK_REJECTED(moeLayer(bundle, nullptr, &a, nullptr), bad,
                 "moeLayer: entry name is NULL");
  CHECK_REJECTED(moeLayer(bundle, "mix", nullptr, nullptr), bad,
                 "moeLayer: args is NULL");
  CHECK_REJECTED(layer(bundle, "mixtral", a), MOE_STATUS_NOT_FOUND,
                 "moeLayer: no entry 'mixtral' in the bundle");
  CHECK_REJECTED(layer(bundle, "mix_gate_up", a), bad,
                 "moeLayer(mix_gate_up): the entry is op=moe.expert_mlp "
                 "abi=grouped_matmul.v3, not op=moe.layer with abi=layer.v1");
  // The single calls refuse a layer entry.
  moeGroupedMatmulArgs gemm = {};
  CHECK_REJECTED(moeGroupedMatmul(bundle, "mix", &gemm, nullptr), bad,
                 "moeGroupedMatmul(mix): the entry is op=moe.layer "
                 "abi=layer.v1, not op=moe.grouped_matmul");
  moeRouteArgs route = {};
  route.tokens = 1;
  CHECK_REJECTED(moeRoute(bundle, "mix", &route, nullptr), bad,
                 "moeRoute(mix): the entry is op=moe.layer abi=layer.v1, not "
                 "op=moe.route with abi=route.v1");

  // Each bad argument, named.
  const moeLayerArgs m = mix(16);
  const Case mixCases[] = {
      {sized(m, &moeLayerArgs::tokens_count, 0),
       "moeLayer(mix): T = 0 must be at least 1"},
      {sized(m, &moeLayerArgs::tokens_count, 4097),
       "moeLayer(mix): T = 4097 exceeds the entry's max_rows = 4096"},
      {sized(m, &moeLayerArgs::experts, 7),
       "moeLayer(mix): experts = 7 does not match entry mix_route's experts "
       "= 8"},
      {sized(m, &moeLayerArgs::hidden, 512),
       "moeLayer(mix): hidden = 512 does not match entry mix_permute's "
       "hidden = 256"},
      {sized(m, &moeLayerArgs::intermediate, 256),
       "moeLayer(mix): intermediate = 256 does not match entry mix_gate_up's "
       "n = 256 (2I)"},
      {with(m, &moeLayerArgs::tokens, 0),
       "moeLayer(mix): tokens pointer is NULL"},
      {with(m, &moeLayerArgs::logits, 0),
       "moeLayer(mix): logits pointer is NULL"},
      {with(m, &moeLayerArgs::gate_up_weights, 0),
       "moeLayer(mix): gate_up_weights pointer is NULL"},
      {with(m, &moeLayerArgs::down_weights, 0),
       "moeLayer(mix): down_weights pointer is NULL"},
      {with(m, &moeLayerArgs::out, 0), "moeLayer(mix): out pointer is NULL"},
      {with(m, &moeLayerArgs::workspace, 0),
       "moeLayer(mix): workspace pointer is NULL (moeLayerWorkspaceBytes says "
       "how large)"},
      {with(m, &moeLayerArgs::tokens, kTokens + 8),
       "moeLayer(mix): tokens pointer 0x7f0000310008 is not 16-byte aligned"},
      {with(m, &moeLayerArgs::logits, kLogits + 2),
       "moeLayer(mix): logits pointer 0x7f0000320002 is not 4-byte aligned "
       "(the route's logits are f32)"},
      {with(m, &moeLayerArgs::gate_up_weights, kGateUpW + 8),
       "moeLayer(mix): gate_up_weights pointer 0x7f0000340008 is not 16-byte "
       "aligned"},
      {with(m, &moeLayerArgs::down_weights, kDownW + 4),
       "moeLayer(mix): down_weights pointer 0x7f0000350004 is not 16-byte "
       "aligned"},
      {with(m, &moeLayerArgs::out, kOut + 2),
       "moeLayer(mix): out pointer 0x7f0000380002 is not 16-byte aligned"},
      {with(m, &moeLayerArgs::workspace, kWorkspace + 128),
       "moeLayer(mix): workspace pointer 0x7f0001000080 is not 256-byte "
       "aligned"},
      {with(m, &moeLayerArgs::score_bias, kScoreBias),
       "moeLayer(mix): score_bias must be 0: entry mix_route has bias=0"},
      {with(m, &moeLayerArgs::gate_up_bias, kGateUpBias),
       "moeLayer(mix): gate_up_bias must be 0: entry mix_gate_up has "
       "bias=none"},
      {with(m, &moeLayerArgs::down_bias, 2),
       "moeLayer(mix): down_bias must be 0: entry mix_down has bias=none"},
      // T = 16: 32 rows, 16384 rows bytes at 1536, 8192 inter at 17920.
      {with(m, &moeLayerArgs::workspace_bytes, 26111),
       "moeLayer(mix): workspace_bytes = 26111 is less than the 26112 bytes "
       "the layer needs for T = 16, H = 256, I = 128 "
       "(moeLayerWorkspaceBytes)"},
  };
  for (const Case &c : mixCases)
    CHECK_REJECTED(layer(bundle, "mix", c.args), bad, c.message);
  CHECK_EQ(layer(bundle, "mix", with(m, &moeLayerArgs::workspace_bytes, 26112)),
           MOE_STATUS_SUCCESS);

  const moeLayerArgs o = oss(16, 64, 32);
  const Case ossCases[] = {
      {sized(o, &moeLayerArgs::hidden, 60),
       "moeLayer(oss): hidden = 60 is not a positive multiple of 8"},
      {sized(o, &moeLayerArgs::intermediate, 0),
       "moeLayer(oss): intermediate = 0 is not a positive multiple of 8"},
      {with(o, &moeLayerArgs::score_bias, 0),
       "moeLayer(oss): score_bias pointer is NULL (entry oss_route has "
       "bias=1: f32 [E])"},
      {with(o, &moeLayerArgs::gate_up_bias, 0),
       "moeLayer(oss): gate_up_bias pointer is NULL (entry oss_gate_up has "
       "bias=f32: [E, 2I])"},
      {with(o, &moeLayerArgs::down_bias, 0),
       "moeLayer(oss): down_bias pointer is NULL (entry oss_down has "
       "bias=bf16: [E, H])"},
      {with(o, &moeLayerArgs::logits, kLogits + 1),
       "moeLayer(oss): logits pointer 0x7f0000320001 is not 2-byte aligned "
       "(the route's logits are bf16)"},
      {with(o, &moeLayerArgs::score_bias, kScoreBias + 2),
       "moeLayer(oss): score_bias pointer 0x7f0000330002 is not 4-byte "
       "aligned"},
      {with(o, &moeLayerArgs::gate_up_bias, kGateUpBias + 2),
       "moeLayer(oss): gate_up_bias pointer 0x7f0000360002 is not 4-byte "
       "aligned (entry oss_gate_up's bias is f32)"},
      {with(o, &moeLayerArgs::down_bias, kDownBias + 1),
       "moeLayer(oss): down_bias pointer 0x7f0000370001 is not 2-byte "
       "aligned (entry oss_down's bias is bf16)"},
      {sized(o, &moeLayerArgs::experts, 8),
       "moeLayer(oss): experts = 8 does not match entry oss_route's experts "
       "= 4"},
  };
  for (const Case &c : ossCases)
    CHECK_REJECTED(layer(bundle, "oss", c.args), bad, c.message);
  // bf16 biases need 2-byte alignment only.
  CHECK_EQ(
      layer(bundle, "oss", with(o, &moeLayerArgs::down_bias, kDownBias + 2)),
      MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);

  // What only a step's own checks catch: a route that takes fewer tokens
  // than its layer, an intermediate size beyond the gate-up GEMM's N. The
  // step is named, and nothing is launched.
  std::string narrow = layerBundle();
  const std::string from = "abi=route.v1 max_rows=4096";
  narrow.replace(narrow.find(from), from.size(), "abi=route.v1 max_rows=16");
  bundle = openBundle(narrow);
  CHECK(bundle != nullptr);
  CHECK_REJECTED(layer(bundle, "mix", mix(17)), bad,
                 "moeLayer(mix): route step: moeRoute(mix_route): T = 17 "
                 "exceeds the entry's max_rows = 16");
  moeLayerArgs wide = oss(1, 64, int64_t(1) << 30);
  wide.workspace_bytes = uint64_t(1) << 40;
  CHECK_REJECTED(layer(bundle, "oss", wide), bad,
                 "moeLayer(oss): gate_up step: moeGroupedMatmul(oss_gate_up): "
                 "N = 2147483648 exceeds 2147483647");
  CHECK_EQ(fakeGpu().launches.size(), size_t(2 * kLayerKernels));
  moeBundleClose(bundle);
}

TEST(layerLoadsAndFails) {
  checkLoadsAndFails(
      layerBundle(), "mix", mix(64), kLayerKernels,
      "moeLayer(mix): gate_up step: moeGroupedMatmul: "
      "cuTensorMapEncodeTiled(rows of kernel 'gemm_gate_up_mix' of entry "
      "'mix_gate_up') failed: CUDA_ERROR_INVALID_VALUE",
      {{2, "moeLayer: cuLaunchKernelEx('perm_index_e8_k2' of entry "
           "'mix_permute', grid (1, 1, 1), block (256, 1, 1), smem 4096, "
           "programmatic stream serialization; 2 of 7 launches already "
           "issued) failed: CUDA_ERROR_INVALID_VALUE"},
       {4, "moeLayer: cuLaunchKernelEx('gemm_gate_up_mix' of entry "
           "'mix_gate_up', grid (20, 1, 1), block (128, 1, 1), smem 98304, "
           "programmatic stream serialization; 4 of 7 launches already "
           "issued) failed: CUDA_ERROR_INVALID_VALUE"},
       {6, "of entry 'mix_unpermute', grid (64, 1, 1), block (256, 1, 1), "
           "smem 0, programmatic stream serialization; 6 of 7 launches "
           "already issued) failed"}});

  // No driver: the checks pass, the load fails.
  setDriverForTesting(nullptr, "dlopen(libcuda.so.1) failed: no such file");
  moeBundle *bundle = openBundle(layerBundle());
  CHECK_STATUS(layer(bundle, "mix", mix(0)), MOE_STATUS_INVALID_ARGUMENT,
               "T = 0");
  CHECK_STATUS(layer(bundle, "mix", mix(64)), MOE_STATUS_NO_GPU,
               "moeLayer: no CUDA driver: dlopen(libcuda.so.1) failed");
  moeBundleClose(bundle);
  setDriverForTesting(nullptr);
}

TEST(layerFp8WorkspaceBytes) {
  install();
  moeBundle *bundle = OPEN_VALID(layerFp8Bundle());
  if (!bundle)
    return;
  // fmix, T = 3 (6 rows, i32, E = 8, H = 256, I = 128): mix's buffers up to
  // the end of inter at 6144, then the rows' values 6*256 = 1536 bytes at
  // 6144, their scales 6*2*4 = 48 at 7680, inter's values 6*128 = 768 at
  // 7936, their scales 6*1*4 = 24 at 8704: 8728.
  CHECK_EQ(workspaceBytes(bundle, "fmix", 3, 256, 128), uint64_t(8728));
  // T = 4096 (8192 rows): inter ends at 6423040; values 2097152 at 6423040,
  // scales 65536 at 8520192, inter's values 1048576 at 8585728, scales
  // 32768 at 9634304: 9667072.
  CHECK_EQ(workspaceBytes(bundle, "fmix", 4096, 256, 128), uint64_t(9667072));
  // foss, T = 5 (10 rows, i64, E = 4, H = I = 128, chunks of 64): ids 40 at
  // 0, weights 40 at 256, offsets 40 at 512, slots 80 at 768, the
  // permute's 272 at 1024, rows 2560 at 1536, inter 2560 at 4096, values
  // 1280 at 6656, scales 40 at 7936, inter's values 1280 at 8192, scales 40
  // at 9472: 9512.
  CHECK_EQ(workspaceBytes(bundle, "foss", 5, 128, 128), uint64_t(9512));
  // T = 1, H = I = 128 (2 rows): ids, weights, offsets and slots below 256
  // bytes each, the permute's 272 at 1024, rows and inter 512 each at 1536
  // and 2048, values 256 at 2560, scales 8 at 2816, inter's values 256 at
  // 3072, scales 8 at 3328: 3336.
  CHECK_EQ(workspaceBytes(bundle, "foss", 1, 128, 128), uint64_t(3336));

  // H and I: whole [1, 128] groups and [128, 128] blocks.
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  uint64_t bytes = 7;
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "foss", 1, 192, 128, &bytes),
                 bad,
                 "moeLayerWorkspaceBytes(foss): hidden = 192 is not a positive "
                 "multiple of 128 (abi layer_fp8.v1 quantizes rows in [1, "
                 "128] groups and reads the weights in [128, 128] blocks)");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "foss", 1, 64, 128, &bytes),
                 bad, "hidden = 64 is not a positive multiple of 128");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "foss", 1, 0, 128, &bytes), bad,
                 "hidden = 0 is not a positive multiple of 128");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "foss", 1, 128, 200, &bytes),
                 bad,
                 "moeLayerWorkspaceBytes(foss): intermediate = 200 is not a "
                 "positive multiple of 128 (abi layer_fp8.v1");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "foss", 1, 128, -128, &bytes),
                 bad, "intermediate = -128 is not a positive multiple of 128");
  // The parts' static sizes.
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "fmix", 1, 128, 128, &bytes),
                 bad,
                 "moeLayerWorkspaceBytes(fmix): hidden = 128 does not match "
                 "entry fmix_permute's hidden = 256");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "fmix", 1, 256, 256, &bytes),
                 bad,
                 "intermediate = 256 does not match entry fmix_gate_up's n = "
                 "256 (2I)");
  CHECK_REJECTED(
      moeLayerWorkspaceBytes(bundle, "fmix_quantize", 1, 256, 128, &bytes), bad,
      "moeLayerWorkspaceBytes(fmix_quantize): the entry is op=moe.quantize "
      "abi=quantize.v1, not op=moe.layer with abi=layer.v1 or layer_fp8.v1");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "fmix", 4097, 256, 128, &bytes),
                 bad, "T = 4097 exceeds the entry's max_rows = 4096");
  CHECK_EQ(bytes, uint64_t(7)); // untouched on failure
  moeBundleClose(bundle);

  // The quantizes' static columns, where the others are dynamic.
  std::string bytesOf = layerFp8Bundle();
  for (const char *part : {"foss_quantize", "foss_intermediate"}) {
    const std::string from = std::string("cols=-1\nkernel ") + part;
    bytesOf.replace(bytesOf.find(from), from.size(),
                    std::string("cols=256\nkernel ") + part);
  }
  bundle = openBundle(bytesOf);
  CHECK(bundle != nullptr);
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "foss", 1, 128, 256, &bytes),
                 bad,
                 "moeLayerWorkspaceBytes(foss): hidden = 128 does not match "
                 "entry foss_quantize's cols = 256");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "foss", 1, 256, 128, &bytes),
                 bad,
                 "moeLayerWorkspaceBytes(foss): intermediate = 128 does not "
                 "match entry foss_intermediate's cols = 256");
  // H = I = 256: rows and inter 1024 each at 1536 and 2560, values 512 at
  // 3584, scales 16 at 4096, inter's values 512 at 4352, scales 16 at 4864.
  CHECK_EQ(workspaceBytes(bundle, "foss", 1, 256, 256), uint64_t(4880));
  moeBundleClose(bundle);
}

TEST(layerFp8LaunchesTheSingleCalls) {
  install();
  moeBundle *bundle = OPEN_VALID(layerFp8Bundle());
  if (!bundle)
    return;
  // The offsets of layerFp8WorkspaceBytes' hand computations.
  checkLayer(bundle, "fmix", fmix(3),
             {0, 256, 512, 768, 1024, 1536, 4608, 6144, 7680, 7936, 8704},
             kFmixSymbols, kLayerFp8Kernels);
  checkLayer(bundle, "fmix", fmix(4096),
             {0, 32768, 65536, 65792, 98560, 131584, 4325888, 6423040, 8520192,
              8585728, 9634304},
             kFmixSymbols, kLayerFp8Kernels);
  // A workspace of exactly the size needed is enough; scales 4-byte aligned
  // suffice.
  moeLayerArgs exact = foss(5, 128, 128);
  exact.workspace_bytes = 9512;
  exact.gate_up_weights_scale += 4;
  exact.down_weights_scale += 12;
  checkLayer(bundle, "foss", exact,
             {0, 256, 512, 768, 1024, 1536, 4096, 6656, 7936, 8192, 9472},
             kFossSymbols, kLayerFp8Kernels);
  checkLayer(
      bundle, "foss", foss(64, 512, 256),
      {0, 512, 1024, 1280, 2304, 3072, 134144, 199680, 265216, 267264, 300032},
      kFossSymbols, kLayerFp8Kernels);
  moeBundleClose(bundle);
}

TEST(layerFp8RejectsBadArguments) {
  install();
  moeBundle *bundle = OPEN_VALID(layerFp8Bundle());
  if (!bundle)
    return;
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  // The single calls refuse the layer entry, moeLayer the parts.
  moeGroupedMatmulArgs gemm = {};
  CHECK_REJECTED(moeGroupedMatmul(bundle, "fmix", &gemm, nullptr), bad,
                 "moeGroupedMatmul(fmix): the entry is op=moe.layer "
                 "abi=layer_fp8.v1, not op=moe.grouped_matmul");
  moeQuantizeArgs quantize = {};
  CHECK_REJECTED(moeQuantize(bundle, "fmix", &quantize, nullptr), bad,
                 "moeQuantize(fmix): the entry is op=moe.layer "
                 "abi=layer_fp8.v1, not op=moe.quantize or moe.expert_mlp "
                 "with abi=quantize.v1");
  CHECK_REJECTED(layer(bundle, "fmix_intermediate", fmix(16)), bad,
                 "moeLayer(fmix_intermediate): the entry is op=moe.expert_mlp "
                 "abi=quantize.v1, not op=moe.layer with abi=layer.v1 or "
                 "layer_fp8.v1");

  const moeLayerArgs m = fmix(16);
  const moeLayerArgs o = foss(16, 128, 128);
  const Case fmixCases[] = {
      {with(m, &moeLayerArgs::gate_up_weights_scale, 0),
       "moeLayer(fmix): gate_up_weights_scale pointer is NULL (abi "
       "layer_fp8.v1 takes the f32 scales [E, 2I/128, H/128] of "
       "gate_up_weights)"},
      {with(m, &moeLayerArgs::down_weights_scale, 0),
       "moeLayer(fmix): down_weights_scale pointer is NULL (abi layer_fp8.v1 "
       "takes the f32 scales [E, H/128, I/128] of down_weights)"},
      {with(m, &moeLayerArgs::gate_up_weights_scale, kGateUpScale + 2),
       "moeLayer(fmix): gate_up_weights_scale pointer 0x7f0000390002 is not "
       "4-byte aligned (f32 scales)"},
      {with(m, &moeLayerArgs::down_weights_scale, kDownScale + 1),
       "moeLayer(fmix): down_weights_scale pointer 0x7f00003a0001 is not "
       "4-byte aligned (f32 scales)"},
      // Nulls first, then alignments; the weights stay 16-byte aligned.
      {with(with(m, &moeLayerArgs::down_weights_scale, 0),
            &moeLayerArgs::tokens, kTokens + 8),
       "moeLayer(fmix): down_weights_scale pointer is NULL"},
      {with(m, &moeLayerArgs::gate_up_weights, kGateUpW + 4),
       "moeLayer(fmix): gate_up_weights pointer 0x7f0000340004 is not "
       "16-byte aligned"},
      {sized(m, &moeLayerArgs::hidden, 384),
       "moeLayer(fmix): hidden = 384 does not match entry fmix_permute's "
       "hidden = 256"},
      // T = 16: 32 rows; the values' and scales' buffers end at 38784.
      {with(m, &moeLayerArgs::workspace_bytes, 38783),
       "moeLayer(fmix): workspace_bytes = 38783 is less than the 38784 bytes "
       "the layer needs for T = 16, H = 256, I = 128 "
       "(moeLayerWorkspaceBytes)"},
      // The workspace of a layer.v1 layer of the same sizes is too small.
      {with(m, &moeLayerArgs::workspace_bytes, 26112),
       "moeLayer(fmix): workspace_bytes = 26112 is less than the 38784 "
       "bytes"},
  };
  for (const Case &c : fmixCases)
    CHECK_REJECTED(layer(bundle, "fmix", c.args), bad, c.message);
  CHECK_EQ(
      layer(bundle, "fmix", with(m, &moeLayerArgs::workspace_bytes, 38784)),
      MOE_STATUS_SUCCESS);
  const Case fossCases[] = {
      {sized(o, &moeLayerArgs::hidden, 192),
       "moeLayer(foss): hidden = 192 is not a positive multiple of 128 (abi "
       "layer_fp8.v1 quantizes rows in [1, 128] groups and reads the weights "
       "in [128, 128] blocks)"},
      {sized(o, &moeLayerArgs::intermediate, 64),
       "moeLayer(foss): intermediate = 64 is not a positive multiple of 128"},
      {with(o, &moeLayerArgs::down_weights_scale, 0),
       "moeLayer(foss): down_weights_scale pointer is NULL"},
      {with(with(o, &moeLayerArgs::gate_up_weights_scale, 0),
            &moeLayerArgs::score_bias, 0),
       "moeLayer(foss): gate_up_weights_scale pointer is NULL"},
      {with(o, &moeLayerArgs::down_bias, 0),
       "moeLayer(foss): down_bias pointer is NULL (entry foss_down has "
       "bias=bf16: [E, H])"},
  };
  for (const Case &c : fossCases)
    CHECK_REJECTED(layer(bundle, "foss", c.args), bad, c.message);
  moeBundleClose(bundle);

  // A layer.v1 layer takes no block scales.
  bundle = openBundle(layerBundle());
  CHECK_REJECTED(
      layer(bundle, "mix",
            with(mix(16), &moeLayerArgs::gate_up_weights_scale, kGateUpScale)),
      bad,
      "moeLayer(mix): gate_up_weights_scale must be 0: entry mix "
      "has abi layer.v1 (bf16 weights, no block scales)");
  CHECK_REJECTED(
      layer(bundle, "oss",
            with(oss(16, 64, 32), &moeLayerArgs::down_weights_scale, 4)),
      bad,
      "moeLayer(oss): down_weights_scale must be 0: entry oss has abi "
      "layer.v1 (bf16 weights, no block scales)");
  moeBundleClose(bundle);

  // What only a step's own checks catch, named by its step, with nothing
  // launched: quantize parts that take fewer rows than the layer, a down
  // GEMM too.
  struct {
    const char *from, *to, *message;
  } narrow[] = {
      {"entry fmix_quantize op=moe.quantize abi=quantize.v1 max_rows=8192",
       "entry fmix_quantize op=moe.quantize abi=quantize.v1 max_rows=16",
       "moeLayer(fmix): quantize step: moeQuantize(fmix_quantize): R = 18 "
       "(rows) exceeds the entry's max_rows = 16"},
      {"entry fmix_intermediate op=moe.expert_mlp abi=quantize.v1 "
       "max_rows=8192",
       "entry fmix_intermediate op=moe.expert_mlp abi=quantize.v1 "
       "max_rows=16",
       "moeLayer(fmix): intermediate step: moeQuantize(fmix_intermediate): R "
       "= 18 (rows) exceeds the entry's max_rows = 16"},
      {"experts=8 n=256 k=128 max_rows=8192",
       "experts=8 n=256 k=128 max_rows=16",
       "moeLayer(fmix): down step: moeGroupedMatmul(fmix_down): M = 18 "
       "exceeds the entry's max_rows = 16"},
      {"rows=-1 cols=256", "rows=32 cols=256",
       "moeLayer(fmix): quantize step: moeQuantize(fmix_quantize): R = 18 "
       "(rows) does not match the entry's rows = 32"},
  };
  for (const auto &n : narrow) {
    std::string bytes = layerFp8Bundle();
    bytes.replace(bytes.find(n.from), std::strlen(n.from), n.to);
    bundle = openBundle(bytes);
    CHECK(bundle != nullptr);
    CHECK_REJECTED(layer(bundle, "fmix", fmix(9)), bad, n.message);
    moeBundleClose(bundle);
  }
  CHECK_EQ(fakeGpu().launches.size(), size_t(kLayerFp8Kernels));
}

TEST(layerFp8LoadsAndFails) {
  // The down GEMM's maps are encoded after the gate-up GEMM's; the quantizes
  // fail as their own launches.
  checkLoadsAndFails(
      layerFp8Bundle(), "fmix", fmix(64), kLayerFp8Kernels,
      "moeLayer(fmix): gate_up step: moeGroupedMatmul: "
      "cuTensorMapEncodeTiled(rows of kernel 'fgemm_gate_up_mix' of entry "
      "'fmix_gate_up') failed: CUDA_ERROR_INVALID_VALUE",
      {{4, "moeLayer: cuLaunchKernelEx('fquant_rows_h256' of entry "
           "'fmix_quantize', grid (4, 1, 1), block (256, 1, 1), smem 0, "
           "programmatic stream serialization; 4 of 9 launches already "
           "issued) failed: CUDA_ERROR_INVALID_VALUE"},
       {5, "moeLayer: cuLaunchKernelEx('fgemm_gate_up_mix' of entry "
           "'fmix_gate_up', grid (20, 1, 1), block (128, 1, 1), smem 98304, "
           "programmatic stream serialization; 5 of 9 launches already "
           "issued) failed"},
       {6, "moeLayer: cuLaunchKernelEx('fquant_inter_i128' of entry "
           "'fmix_intermediate', grid (2, 1, 1), block (256, 1, 1), smem 0, "
           "programmatic stream serialization; 6 of 9 launches already "
           "issued) failed"},
       {8, "of entry 'fmix_unpermute', grid (64, 1, 1), block (256, 1, 1), "
           "smem 0, programmatic stream serialization; 8 of 9 launches "
           "already issued) failed"}});
}

TEST(layerFp8OutWorkspaceBytes) {
  // The workspace of §3.10 whether the gate-up GEMM or an intermediate part
  // quantizes inter: the hand computations of layerFp8WorkspaceBytes (the
  // bf16 inter is carved, unused).
  install();
  moeBundle *bundle = OPEN_VALID(layerFp8OutBundle());
  if (!bundle)
    return;
  CHECK_EQ(workspaceBytes(bundle, "fmix", 3, 256, 128), uint64_t(8728));
  CHECK_EQ(workspaceBytes(bundle, "fmix", 4096, 256, 128), uint64_t(9667072));
  CHECK_EQ(workspaceBytes(bundle, "foss", 5, 128, 128), uint64_t(9512));
  CHECK_EQ(workspaceBytes(bundle, "foss", 1, 128, 128), uint64_t(3336));
  uint64_t bytes = 7;
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "foss", 1, 128, 192, &bytes),
                 MOE_STATUS_INVALID_ARGUMENT,
                 "moeLayerWorkspaceBytes(foss): intermediate = 192 is not a "
                 "positive multiple of 128");
  CHECK_EQ(bytes, uint64_t(7));
  moeBundleClose(bundle);
}

TEST(layerFp8OutLaunchesTheSingleCalls) {
  // Six steps: route, permute (three kernels), quantize, the gate-up GEMM
  // writing inter_q and inter_scale, the down GEMM reading them, combine.
  install();
  moeBundle *bundle = OPEN_VALID(layerFp8OutBundle());
  if (!bundle)
    return;
  int32_t index = -1;
  moeEntryInfo info;
  CHECK_EQ(moeBundleFindEntry(bundle, "fmix", &index), MOE_STATUS_SUCCESS);
  CHECK_EQ(moeBundleGetEntry(bundle, index, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(info.intermediate), "");
  // The offsets of layerFp8WorkspaceBytes' hand computations.
  checkLayer(bundle, "fmix", fmix(3),
             {0, 256, 512, 768, 1024, 1536, 4608, 6144, 7680, 7936, 8704},
             kQmixSymbols, kLayerFp8OutKernels);
  checkLayer(bundle, "fmix", fmix(4096),
             {0, 32768, 65536, 65792, 98560, 131584, 4325888, 6423040, 8520192,
              8585728, 9634304},
             kQmixSymbols, kLayerFp8OutKernels);
  moeLayerArgs exact = foss(5, 128, 128);
  exact.workspace_bytes = 9512;
  checkLayer(bundle, "foss", exact,
             {0, 256, 512, 768, 1024, 1536, 4096, 6656, 7936, 8192, 9472},
             kQossSymbols, kLayerFp8OutKernels);
  checkLayer(
      bundle, "foss", foss(64, 512, 256),
      {0, 512, 1024, 1280, 2304, 3072, 134144, 199680, 265216, 267264, 300032},
      kQossSymbols, kLayerFp8OutKernels);
  moeBundleClose(bundle);
}

TEST(layerFp8OutGateUpWritesInterQuantized) {
  // By hand, against the workspace: fmix, T = 3 (6 rows, I = 128): the
  // gate-up GEMM (40 parameters) writes the e4m3 inter [6, 128] at 7936 and
  // its scales [6, 1] at 8704 (parameters 33..39); the down GEMM reads them
  // (its rows map and parameters 17..23). No launch writes or reads the
  // bf16 inter at 4608.
  FakeGpu &gpu = install();
  moeBundle *bundle = OPEN_VALID(layerFp8OutBundle());
  if (!bundle)
    return;
  const moeLayerArgs a = fmix(3);
  const uint64_t interQ = kWorkspace + 7936, interScale = kWorkspace + 8704;
  long first = runAfterLoad(
      bundle, [&](void *stream) { return layer(bundle, "fmix", a, stream); },
      "cuCtxGetCurrent cuCtxGetId cuTensorMapEncodeTiled "
      "cuTensorMapEncodeTiled cuTensorMapEncodeTiled cuTensorMapEncodeTiled "
      "cuLaunchKernelEx cuLaunchKernelEx cuLaunchKernelEx cuLaunchKernelEx "
      "cuLaunchKernelEx cuLaunchKernelEx cuLaunchKernelEx cuLaunchKernelEx",
      kLayerFp8OutKernels);
  if (first < 0)
    return;
  const FakeLaunch &gateUp = gpu.launches[first + 5];
  const FakeLaunch &down = gpu.launches[first + 6];
  CHECK_EQ(gateUp.function, std::string("fgemm_gate_up_mix_e4m3out"));
  CHECK_EQ(gateUp.numParams, 40);
  CHECK_EQ(gateUp.words[5], interQ);
  CHECK_EQ(gateUp.words[6], interQ);
  CHECK_EQ(gateUp.words[8], uint64_t(6));   // M
  CHECK_EQ(gateUp.words[9], uint64_t(128)); // C = N/2 = I
  const std::vector<uint64_t> outScale = {interScale, interScale, 0, 6,
                                          1,          1,          1};
  CHECK_EQ(gateUp.tail.size(), size_t(23));
  if (gateUp.tail.size() == 23)
    CHECK(std::vector<uint64_t>(gateUp.tail.begin() + 16, gateUp.tail.end()) ==
          outScale);
  CHECK_EQ(down.function, std::string("fgemm_down_mix"));
  CHECK_EQ(down.numParams, 33);
  CHECK_EQ(gpu.encodes[down.mapEncode[0]].address, interQ);
  CHECK_EQ(down.tail.size(), size_t(16));
  if (down.tail.size() == 16)
    CHECK_EQ(down.tail[0], interScale);
  for (long i = first; i < first + kLayerFp8OutKernels; ++i) {
    for (uint64_t word : gpu.launches[i].params)
      CHECK(word != kWorkspace + 4608);
    CHECK(gpu.launches[i].words[5] != kWorkspace + 4608);
  }
  moeBundleClose(bundle);
}

TEST(layerFp8OutRejectsBadArguments) {
  install();
  moeBundle *bundle = OPEN_VALID(layerFp8OutBundle());
  if (!bundle)
    return;
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  // The layer's own checks, as for the seven-step form.
  const moeLayerArgs m = fmix(16);
  const Case cases[] = {
      {with(m, &moeLayerArgs::gate_up_weights_scale, 0),
       "moeLayer(fmix): gate_up_weights_scale pointer is NULL (abi "
       "layer_fp8.v1 takes the f32 scales [E, 2I/128, H/128] of "
       "gate_up_weights)"},
      {with(m, &moeLayerArgs::down_weights_scale, kDownScale + 2),
       "moeLayer(fmix): down_weights_scale pointer 0x7f00003a0002 is not "
       "4-byte aligned (f32 scales)"},
      {sized(m, &moeLayerArgs::intermediate, 256),
       "moeLayer(fmix): intermediate = 256 does not match entry "
       "fmix_gate_up's n = 256 (2I)"},
      {with(m, &moeLayerArgs::workspace_bytes, 38783),
       "moeLayer(fmix): workspace_bytes = 38783 is less than the 38784 bytes "
       "the layer needs for T = 16, H = 256, I = 128 "
       "(moeLayerWorkspaceBytes)"},
  };
  for (const Case &c : cases)
    CHECK_REJECTED(layer(bundle, "fmix", c.args), bad, c.message);
  CHECK_EQ(
      layer(bundle, "fmix", with(m, &moeLayerArgs::workspace_bytes, 38784)),
      MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);

  // What only a step's own checks catch, named by its step, with nothing
  // launched: the gate-up GEMM (which writes inter's values and scales) and
  // the down GEMM taking fewer rows than the layer.
  struct {
    const char *from, *to, *message;
  } narrow[] = {
      {"experts=8 n=256 k=256 max_rows=8192",
       "experts=8 n=256 k=256 max_rows=16",
       "moeLayer(fmix): gate_up step: moeGroupedMatmul(fmix_gate_up): M = 18 "
       "exceeds the entry's max_rows = 16"},
      {"experts=8 n=256 k=128 max_rows=8192",
       "experts=8 n=256 k=128 max_rows=16",
       "moeLayer(fmix): down step: moeGroupedMatmul(fmix_down): M = 18 "
       "exceeds the entry's max_rows = 16"},
      {"rows=-1 cols=256", "rows=32 cols=256",
       "moeLayer(fmix): quantize step: moeQuantize(fmix_quantize): R = 18 "
       "(rows) does not match the entry's rows = 32"},
  };
  const size_t launches = fakeGpu().launches.size();
  for (const auto &n : narrow) {
    bundle = OPEN_VALID(replaced(n.from, n.to, layerFp8OutBundle()));
    if (!bundle)
      continue;
    CHECK_REJECTED(layer(bundle, "fmix", fmix(9)), bad, n.message);
    moeBundleClose(bundle);
  }
  CHECK_EQ(fakeGpu().launches.size(), launches);
}

TEST(layerFp8OutLaunchesNoFormForExpertsAboveT) {
  // fmix's FP8-output gate-up split into a form for experts of 1..2 rows
  // and one from 3 rows on: the layer launches the second only when T >= 3.
  FakeGpu &gpu = install();
  const char *kBig = "fgemm_gate_up_mix_e4m3out_big";
  gpu.numParams[kBig] = 40;
  const std::string oneForm = fp8KernelLine("fmix_gate_up", kQmixSymbols[5], 1,
                                            2147483647, 128, 64, 128, 98304, 0);
  moeBundle *bundle =
      OPEN_VALID(replaced(oneForm,
                          fp8KernelLine("fmix_gate_up", kQmixSymbols[5], 1, 2,
                                        128, 64, 128, 98304, 0) +
                              fp8KernelLine("fmix_gate_up", kBig, 3, 2147483647,
                                            128, 64, 128, 98304, 0),
                          layerFp8OutBundle()));
  if (!bundle)
    return;
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  for (int64_t tokens : {2, 3}) {
    size_t before = gpu.launches.size();
    CHECK_EQ(layer(bundle, "fmix", fmix(tokens), testStream()),
             MOE_STATUS_SUCCESS);
    std::vector<std::string> gemms;
    for (size_t i = before; i < gpu.launches.size(); ++i)
      if (gpu.launches[i].function.rfind("fgemm_gate_up", 0) == 0)
        gemms.push_back(gpu.launches[i].function);
    CHECK_EQ(gemms.size(), size_t(tokens == 2 ? 1 : 2));
    CHECK(!gemms.empty() && gemms[0] == kQmixSymbols[5]);
    if (tokens == 3)
      CHECK(gemms.size() == 2 && gemms[1] == kBig);
    CHECK_EQ(gpu.launches.size() - before,
             size_t(kLayerFp8OutKernels + (tokens == 2 ? 0 : 1)));
  }
  moeBundleClose(bundle);
}

TEST(layerFp8OutLoadsAndFails) {
  // Eight launches: the down GEMM follows the gate-up GEMM directly.
  checkLoadsAndFails(
      layerFp8OutBundle(), "fmix", fmix(64), kLayerFp8OutKernels,
      "moeLayer(fmix): gate_up step: moeGroupedMatmul: "
      "cuTensorMapEncodeTiled(rows of kernel 'fgemm_gate_up_mix_e4m3out' of "
      "entry 'fmix_gate_up') failed: CUDA_ERROR_INVALID_VALUE",
      {{5, "moeLayer: cuLaunchKernelEx('fgemm_gate_up_mix_e4m3out' of entry "
           "'fmix_gate_up', grid (10, 1, 1), block (128, 1, 1), smem 98304, "
           "programmatic stream serialization; 5 of 8 launches already "
           "issued) failed"},
       {6, "moeLayer: cuLaunchKernelEx('fgemm_down_mix' of entry "
           "'fmix_down', grid (20, 1, 1), block (128, 1, 1), smem 98304, "
           "programmatic stream serialization; 6 of 8 launches already "
           "issued) failed"},
       {7, "of entry 'fmix_unpermute', grid (64, 1, 1), block (256, 1, 1), "
           "smem 0, programmatic stream serialization; 7 of 8 launches "
           "already issued) failed"}});
}

TEST(layerFp8GatherWorkspaceBytes) {
  // The workspace of §3.10 whichever part quantizes the rows and inter: the
  // hand computations of layerFp8WorkspaceBytes (the bf16 rows are carved,
  // and are the down GEMM's output).
  install();
  for (const std::string &bytes :
       {layerFp8GatherBundle(), withFp8Gather(layerFp8Bundle())}) {
    moeBundle *bundle = OPEN_VALID(bytes);
    if (!bundle)
      continue;
    CHECK_EQ(workspaceBytes(bundle, "fmix", 3, 256, 128), uint64_t(8728));
    CHECK_EQ(workspaceBytes(bundle, "fmix", 4096, 256, 128), uint64_t(9667072));
    CHECK_EQ(workspaceBytes(bundle, "foss", 5, 128, 128), uint64_t(9512));
    CHECK_EQ(workspaceBytes(bundle, "foss", 1, 128, 128), uint64_t(3336));
    uint64_t out = 7;
    CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "foss", 1, 192, 128, &out),
                   MOE_STATUS_INVALID_ARGUMENT,
                   "moeLayerWorkspaceBytes(foss): hidden = 192 is not a "
                   "positive multiple of 128");
    CHECK_EQ(out, uint64_t(7));
    moeBundleClose(bundle);
  }
}

TEST(layerFp8GatherLaunchesTheSingleCalls) {
  // Five steps: route, permute (three kernels, the gather writing rows_q
  // and rows_scale), the gate-up GEMM reading them and writing inter_q and
  // inter_scale, the down GEMM reading those, combine. And six: the same
  // with a bf16 gate-up GEMM and the intermediate's quantize after it.
  install();
  const struct {
    std::string bytes;
    const char *const *fmix, *const *foss;
    int kernels;
  } forms[] = {{layerFp8GatherBundle(), kGmixSymbols, kGossSymbols,
                kLayerFp8GatherKernels},
               {withFp8Gather(layerFp8Bundle()), kGimixSymbols, kGiossSymbols,
                kLayerFp8GatherInterKernels}};
  for (const auto &form : forms) {
    moeBundle *bundle = OPEN_VALID(form.bytes);
    if (!bundle)
      continue;
    int32_t index = -1;
    moeEntryInfo info;
    CHECK_EQ(moeBundleFindEntry(bundle, "fmix", &index), MOE_STATUS_SUCCESS);
    CHECK_EQ(moeBundleGetEntry(bundle, index, &info), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(info.quantize), "");
    // The offsets of layerFp8WorkspaceBytes' hand computations.
    checkLayer(bundle, "fmix", fmix(3),
               {0, 256, 512, 768, 1024, 1536, 4608, 6144, 7680, 7936, 8704},
               form.fmix, form.kernels);
    checkLayer(bundle, "fmix", fmix(4096),
               {0, 32768, 65536, 65792, 98560, 131584, 4325888, 6423040,
                8520192, 8585728, 9634304},
               form.fmix, form.kernels);
    moeLayerArgs exact = foss(5, 128, 128);
    exact.workspace_bytes = 9512;
    checkLayer(bundle, "foss", exact,
               {0, 256, 512, 768, 1024, 1536, 4096, 6656, 7936, 8192, 9472},
               form.foss, form.kernels);
    checkLayer(bundle, "foss", foss(64, 512, 256),
               {0, 512, 1024, 1280, 2304, 3072, 134144, 199680, 265216, 267264,
                300032},
               form.foss, form.kernels);
    moeBundleClose(bundle);
  }
}

TEST(layerFp8GatherWritesRowsQuantized) {
  // By hand, against the workspace: fmix, T = 3 (6 rows, H = 256, I = 128)
  // of the five-step form. The gather (31 parameters) writes the e4m3 rows
  // [6, 256] at 6144 and their scales [6, 2] at 7680 (parameters 24..30);
  // the gate-up GEMM reads them (its rows map and parameters 17..23) and
  // writes inter's values at 7936 and scales at 8704, which the down GEMM
  // reads; the down GEMM writes the bf16 rows at 1536, which the combine
  // reads. Nothing before the down GEMM writes or reads the bf16 rows, and
  // nothing the bf16 inter at 4608.
  FakeGpu &gpu = install();
  moeBundle *bundle = OPEN_VALID(layerFp8GatherBundle());
  if (!bundle)
    return;
  const moeLayerArgs a = fmix(3);
  const uint64_t rows = kWorkspace + 1536, inter = kWorkspace + 4608,
                 rowsQ = kWorkspace + 6144, rowsScale = kWorkspace + 7680,
                 interQ = kWorkspace + 7936, interScale = kWorkspace + 8704;
  long first = runAfterLoad(
      bundle, [&](void *stream) { return layer(bundle, "fmix", a, stream); },
      "cuCtxGetCurrent cuCtxGetId cuTensorMapEncodeTiled "
      "cuTensorMapEncodeTiled cuTensorMapEncodeTiled cuTensorMapEncodeTiled "
      "cuLaunchKernelEx cuLaunchKernelEx cuLaunchKernelEx cuLaunchKernelEx "
      "cuLaunchKernelEx cuLaunchKernelEx cuLaunchKernelEx",
      kLayerFp8GatherKernels);
  if (first < 0)
    return;
  for (int i = 0; i < kLayerFp8GatherKernels; ++i)
    CHECK_EQ(gpu.launches[first + i].function, std::string(kGmixSymbols[i]));
  const FakeLaunch &gather = gpu.launches[first + 3];
  const FakeLaunch &gateUp = gpu.launches[first + 4];
  const FakeLaunch &down = gpu.launches[first + 5];
  const FakeLaunch &combine = gpu.launches[first + 6];
  // tokens [3, 256], sources [6] and offsets [9] (i32) in the workspace,
  // rows_q [6, 256], rows_scale [6, 2].
  const uint64_t sources = kWorkspace + 1024, offsets = kWorkspace + 512;
  const std::vector<uint64_t> gatherWords = {
      kTokens,   kTokens,   0,     3, 256,     256,     1,   sources,
      sources,   0,         6,     1, offsets, offsets, 0,   9,
      1,         rowsQ,     rowsQ, 0, 6,       256,     256, 1,
      rowsScale, rowsScale, 0,     6, 2,       2,       1};
  checkWordParams(gather, "fmix gather", gatherWords);
  CHECK_EQ(gateUp.numParams, 40);
  CHECK_EQ(gpu.encodes[gateUp.mapEncode[0]].address, rowsQ);
  CHECK_EQ(gpu.encodes[gateUp.mapEncode[0]].dims[0], uint64_t(256));
  CHECK_EQ(gpu.encodes[gateUp.mapEncode[0]].dims[1], uint64_t(6));
  CHECK_EQ(gateUp.words[5], interQ);
  CHECK_EQ(gateUp.tail.size(), size_t(23));
  if (gateUp.tail.size() == 23) {
    const std::vector<uint64_t> rowsScaleWords = {rowsScale, rowsScale, 0, 6,
                                                  2,         2,         1};
    CHECK(std::vector<uint64_t>(gateUp.tail.begin(), gateUp.tail.begin() + 7) ==
          rowsScaleWords);
    CHECK_EQ(gateUp.tail[16], interScale);
  }
  CHECK_EQ(gpu.encodes[down.mapEncode[0]].address, interQ);
  CHECK_EQ(down.tail.size(), size_t(16));
  if (down.tail.size() == 16)
    CHECK_EQ(down.tail[0], interScale);
  CHECK_EQ(down.words[5], rows);
  CHECK_EQ(combine.params[0], rows);
  for (long i = first; i < first + kLayerFp8GatherKernels; ++i) {
    const FakeLaunch &launch = gpu.launches[i];
    for (uint64_t word : launch.params) {
      CHECK(word != inter);
      if (i < first + 5)
        CHECK(word != rows);
    }
    CHECK(launch.words[5] != inter);
    if (i < first + 5)
      CHECK(launch.function.rfind("fgemm", 0) != 0 ||
            (launch.words[5] != rows &&
             gpu.encodes[launch.mapEncode[0]].address != rows));
  }
  moeBundleClose(bundle);
}

TEST(layerFp8GatherRejectsBadArguments) {
  install();
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  moeBundle *bundle = OPEN_VALID(layerFp8GatherBundle());
  if (!bundle)
    return;
  // The layer's own checks, as for the seven-step form.
  const moeLayerArgs m = fmix(16);
  const Case cases[] = {
      {with(m, &moeLayerArgs::gate_up_weights_scale, 0),
       "moeLayer(fmix): gate_up_weights_scale pointer is NULL (abi "
       "layer_fp8.v1 takes the f32 scales [E, 2I/128, H/128] of "
       "gate_up_weights)"},
      {sized(m, &moeLayerArgs::hidden, 384),
       "moeLayer(fmix): hidden = 384 does not match entry fmix_permute's "
       "hidden = 256"},
      {with(m, &moeLayerArgs::workspace_bytes, 38783),
       "moeLayer(fmix): workspace_bytes = 38783 is less than the 38784 bytes "
       "the layer needs for T = 16, H = 256, I = 128 "
       "(moeLayerWorkspaceBytes)"},
  };
  for (const Case &c : cases)
    CHECK_REJECTED(layer(bundle, "fmix", c.args), bad, c.message);
  CHECK_REJECTED(layer(bundle, "foss", foss(16, 192, 128)), bad,
                 "moeLayer(foss): hidden = 192 is not a positive multiple of "
                 "128");
  CHECK_EQ(
      layer(bundle, "fmix", with(m, &moeLayerArgs::workspace_bytes, 38784)),
      MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);

  // What only a step's own checks catch, named by its step, with nothing
  // launched: the permute (whose gather writes the rows' values and
  // scales), the gate-up GEMM and the down GEMM taking fewer rows than the
  // layer.
  struct {
    const char *from, *to, *message;
  } narrow[] = {
      {"abi=permute.v2 max_rows=4096", "abi=permute.v2 max_rows=8",
       "moeLayer(fmix): permute step: moePermute(fmix_permute): T = 9 "
       "exceeds the entry's max_rows = 8"},
      {"experts=8 n=256 k=256 max_rows=8192",
       "experts=8 n=256 k=256 max_rows=16",
       "moeLayer(fmix): gate_up step: moeGroupedMatmul(fmix_gate_up): M = 18 "
       "exceeds the entry's max_rows = 16"},
      {"experts=8 n=256 k=128 max_rows=8192",
       "experts=8 n=256 k=128 max_rows=16",
       "moeLayer(fmix): down step: moeGroupedMatmul(fmix_down): M = 18 "
       "exceeds the entry's max_rows = 16"},
  };
  const size_t launches = fakeGpu().launches.size();
  for (const auto &n : narrow) {
    bundle = OPEN_VALID(replaced(n.from, n.to, layerFp8GatherBundle()));
    if (!bundle)
      continue;
    CHECK_REJECTED(layer(bundle, "fmix", fmix(9)), bad, n.message);
    moeBundleClose(bundle);
  }
  CHECK_EQ(fakeGpu().launches.size(), launches);
}

TEST(layerFp8GatherLoadsAndFails) {
  // Seven launches: the gate-up GEMM follows the gather directly; its grid
  // is one item per row tile and [1, 128] output group (10), the down
  // GEMM's one per row tile and column tile (20).
  checkLoadsAndFails(
      layerFp8GatherBundle(), "fmix", fmix(64), kLayerFp8GatherKernels,
      "moeLayer(fmix): gate_up step: moeGroupedMatmul: "
      "cuTensorMapEncodeTiled(rows of kernel 'fgemm_gate_up_mix_e4m3out' of "
      "entry 'fmix_gate_up') failed: CUDA_ERROR_INVALID_VALUE",
      {{3, "moeLayer: cuLaunchKernelEx('fperm_gather32_e4m3' of entry "
           "'fmix_permute', grid (32, 1, 1), block (128, 1, 1), smem 0, "
           "programmatic stream serialization; 3 of 7 launches already "
           "issued) failed: CUDA_ERROR_INVALID_VALUE"},
       {4, "moeLayer: cuLaunchKernelEx('fgemm_gate_up_mix_e4m3out' of entry "
           "'fmix_gate_up', grid (10, 1, 1), block (128, 1, 1), smem 98304, "
           "programmatic stream serialization; 4 of 7 launches already "
           "issued) failed"},
       {5, "moeLayer: cuLaunchKernelEx('fgemm_down_mix' of entry "
           "'fmix_down', grid (20, 1, 1), block (128, 1, 1), smem 98304, "
           "programmatic stream serialization; 5 of 7 launches already "
           "issued) failed"},
       {6, "of entry 'fmix_unpermute', grid (64, 1, 1), block (256, 1, 1), "
           "smem 0, programmatic stream serialization; 6 of 7 launches "
           "already issued) failed"}});
}

// layer_fp8.v1 layers of MXFP8 GEMMs (contract §3.10, added within version
// 6): always seven steps, the quantizes making E8M0 scales per [1, 32]
// group; H and I multiples of 32; the weights' scales bytes.

TEST(layerMxfp8WorkspaceBytes) {
  install();
  moeBundle *bundle = OPEN_VALID(layerMxfp8Bundle());
  if (!bundle)
    return;
  // The bytes of layerFp8WorkspaceBytes: an E8M0 byte per 32 elements is an
  // f32 per 128 (fmix, T = 3: the rows' scales 6*256/32 = 48 bytes at 7680,
  // inter's 6*128/32 = 24 at 8704).
  CHECK_EQ(workspaceBytes(bundle, "fmix", 3, 256, 128), uint64_t(8728));
  CHECK_EQ(workspaceBytes(bundle, "fmix", 4096, 256, 128), uint64_t(9667072));
  CHECK_EQ(workspaceBytes(bundle, "foss", 5, 128, 128), uint64_t(9512));
  // H = 96, I = 160, multiples of 32 only (foss, T = 5: 10 rows, i64, E =
  // 4): ids 40 at 0, weights 40 at 256, offsets 40 at 512, slots 80 at 768,
  // the permute's 272 at 1024, rows 1920 at 1536, inter 3200 at 3584,
  // values 960 at 6912, scales 30 at 7936, inter's values 1600 at 8192,
  // scales 50 at 9984: 10034.
  CHECK_EQ(workspaceBytes(bundle, "foss", 5, 96, 160), uint64_t(10034));
  // H = I = 32, T = 1 (2 rows): the permute's 272 at 1024, rows and inter
  // 128 each at 1536 and 1792, values 64 at 2048, scales 2 at 2304, inter's
  // values 64 at 2560, scales 2 at 2816: 2818.
  CHECK_EQ(workspaceBytes(bundle, "foss", 1, 32, 32), uint64_t(2818));

  // H and I: whole [1, 32] groups.
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  uint64_t bytes = 7;
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "foss", 1, 48, 128, &bytes),
                 bad,
                 "moeLayerWorkspaceBytes(foss): hidden = 48 is not a positive "
                 "multiple of 32 (abi layer_fp8.v1 with mxfp8 GEMMs quantizes "
                 "rows in [1, 32] groups and reads a weights scale per 32 "
                 "elements of a row)");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "foss", 1, 16, 128, &bytes),
                 bad, "hidden = 16 is not a positive multiple of 32");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "foss", 1, 0, 128, &bytes), bad,
                 "hidden = 0 is not a positive multiple of 32");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "foss", 1, 128, 40, &bytes),
                 bad,
                 "moeLayerWorkspaceBytes(foss): intermediate = 40 is not a "
                 "positive multiple of 32 (abi layer_fp8.v1 with mxfp8 GEMMs");
  CHECK_REJECTED(moeLayerWorkspaceBytes(bundle, "foss", 1, 128, -32, &bytes),
                 bad, "intermediate = -32 is not a positive multiple of 32");
  CHECK_EQ(bytes, uint64_t(7)); // untouched on failure
  moeBundleClose(bundle);
}

TEST(layerMxfp8LaunchesTheSingleCalls) {
  // Seven steps: route, permute (three kernels), quantize (E8M0 scales
  // [T*k, H/32]), gate_up (rows_scale [T*k, H/32], weights_scale
  // [E, 2I, H/32]), intermediate ([T*k, I/32]), down ([T*k, I/32],
  // [E, H, I/32]), combine.
  install();
  moeBundle *bundle = OPEN_VALID(layerMxfp8Bundle());
  if (!bundle)
    return;
  // The offsets of layerMxfp8WorkspaceBytes' hand computations.
  checkLayer(bundle, "fmix", fmix(3),
             {0, 256, 512, 768, 1024, 1536, 4608, 6144, 7680, 7936, 8704},
             kMmixSymbols, kLayerFp8Kernels);
  checkLayer(bundle, "fmix", fmix(4096),
             {0, 32768, 65536, 65792, 98560, 131584, 4325888, 6423040, 8520192,
              8585728, 9634304},
             kMmixSymbols, kLayerFp8Kernels);
  // A workspace of exactly the size needed; the scales of any alignment.
  moeLayerArgs exact = foss(5, 96, 160);
  exact.workspace_bytes = 10034;
  exact.gate_up_weights_scale += 1;
  exact.down_weights_scale += 3;
  checkLayer(bundle, "foss", exact,
             {0, 256, 512, 768, 1024, 1536, 3584, 6912, 7936, 8192, 9984},
             kMossSymbols, kLayerFp8Kernels);
  moeBundleClose(bundle);
}

TEST(layerMxfp8StepsByHand) {
  // fmix, T = 3 (6 rows, H = 256, I = 128, E = 8): the quantize writes e4m3
  // rows [6, 256] at 6144 and E8M0 scales [6, 8] at 7680; the gate-up GEMM
  // reads them with weights_scale [8, 256, 8]; the intermediate writes inter
  // [6, 128] at 7936 and scales [6, 4] at 8704; the down GEMM reads them
  // with weights_scale [8, 256, 4].
  FakeGpu &gpu = install();
  moeBundle *bundle = OPEN_VALID(layerMxfp8Bundle());
  if (!bundle)
    return;
  const moeLayerArgs a = fmix(3);
  const uint64_t ws = kWorkspace;
  long first = runAfterLoad(
      bundle, [&](void *stream) { return layer(bundle, "fmix", a, stream); },
      "cuCtxGetCurrent cuCtxGetId cuTensorMapEncodeTiled "
      "cuTensorMapEncodeTiled cuTensorMapEncodeTiled cuTensorMapEncodeTiled "
      "cuLaunchKernelEx cuLaunchKernelEx cuLaunchKernelEx cuLaunchKernelEx "
      "cuLaunchKernelEx cuLaunchKernelEx cuLaunchKernelEx cuLaunchKernelEx "
      "cuLaunchKernelEx",
      kLayerFp8Kernels);
  if (first < 0)
    return;
  const FakeLaunch &quantize = gpu.launches[first + 4];
  const FakeLaunch &gateUp = gpu.launches[first + 5];
  const FakeLaunch &intermediate = gpu.launches[first + 6];
  const FakeLaunch &down = gpu.launches[first + 7];
  std::vector<uint64_t> want;
  pushMemref2D(want, ws + 1536, 6, 256); // bf16 rows
  pushMemref2D(want, ws + 6144, 6, 256); // e4m3 rows
  pushMemref2D(want, ws + 7680, 6, 8);   // E8M0 scales
  CHECK_EQ(quantize.function, std::string("mquant_rows_h256"));
  CHECK(quantize.params == want);
  want.clear();
  pushMemref2D(want, ws + 4608, 6, 128); // bf16 inter
  pushMemref2D(want, ws + 7936, 6, 128); // e4m3 inter
  pushMemref2D(want, ws + 8704, 6, 4);   // E8M0 scales
  CHECK_EQ(intermediate.function, std::string("mquant_inter_i128"));
  CHECK(intermediate.params == want);
  const std::vector<uint64_t> gateUpTail = {
      ws + 7680,    ws + 7680,    0, 6, 8,   8, 1,          // 17-23
      kGateUpScale, kGateUpScale, 0, 8, 256, 8, 2048, 8, 1, // 24-32
  };
  CHECK_EQ(gateUp.function, std::string("mgemm_gate_up_mix"));
  CHECK_EQ(gateUp.numParams, 33);
  CHECK_EQ(gpu.encodes[gateUp.mapEncode[0]].address, ws + 6144);
  CHECK_EQ(gateUp.words[5], ws + 4608); // bf16 inter [6, 128]
  CHECK_EQ(gateUp.words[9], uint64_t(128));
  CHECK(gateUp.tail == gateUpTail);
  const std::vector<uint64_t> downTail = {
      ws + 8704,  ws + 8704,  0, 6, 4,   4, 1,          // 17-23
      kDownScale, kDownScale, 0, 8, 256, 4, 1024, 4, 1, // 24-32
  };
  CHECK_EQ(down.function, std::string("mgemm_down_mix"));
  CHECK_EQ(gpu.encodes[down.mapEncode[0]].address, ws + 7936);
  CHECK_EQ(down.words[5], ws + 1536); // bf16 rows [6, 256]
  CHECK(down.tail == downTail);
  moeBundleClose(bundle);
}

TEST(layerMxfp8RejectsBadArguments) {
  install();
  moeBundle *bundle = OPEN_VALID(layerMxfp8Bundle());
  if (!bundle)
    return;
  const moeStatus bad = MOE_STATUS_INVALID_ARGUMENT;
  const moeLayerArgs m = fmix(16);
  const moeLayerArgs o = foss(16, 96, 160);
  const Case cases[] = {
      {with(m, &moeLayerArgs::gate_up_weights_scale, 0),
       "moeLayer(fmix): gate_up_weights_scale pointer is NULL (abi "
       "layer_fp8.v1 with mxfp8 GEMMs takes the UE8M0 scales [E, 2I, H/32] "
       "of gate_up_weights)"},
      {with(m, &moeLayerArgs::down_weights_scale, 0),
       "moeLayer(fmix): down_weights_scale pointer is NULL (abi layer_fp8.v1 "
       "with mxfp8 GEMMs takes the UE8M0 scales [E, H, I/32] of "
       "down_weights)"},
      // Nulls first, then alignments (the scales' odd ones are fine).
      {with(with(m, &moeLayerArgs::down_weights_scale, 0),
            &moeLayerArgs::tokens, kTokens + 8),
       "moeLayer(fmix): down_weights_scale pointer is NULL"},
      {with(with(m, &moeLayerArgs::gate_up_weights_scale, kGateUpScale + 1),
            &moeLayerArgs::down_weights, kDownW + 4),
       "moeLayer(fmix): down_weights pointer 0x7f0000350004 is not 16-byte "
       "aligned"},
      {sized(m, &moeLayerArgs::hidden, 288),
       "moeLayer(fmix): hidden = 288 does not match entry fmix_permute's "
       "hidden = 256"},
      {with(m, &moeLayerArgs::workspace_bytes, 38783),
       "moeLayer(fmix): workspace_bytes = 38783 is less than the 38784 bytes "
       "the layer needs for T = 16, H = 256, I = 128"},
      {sized(o, &moeLayerArgs::hidden, 80),
       "moeLayer(foss): hidden = 80 is not a positive multiple of 32 (abi "
       "layer_fp8.v1 with mxfp8 GEMMs quantizes rows in [1, 32] groups"},
      {sized(o, &moeLayerArgs::intermediate, 8),
       "moeLayer(foss): intermediate = 8 is not a positive multiple of 32"},
      {with(o, &moeLayerArgs::down_bias, 0),
       "moeLayer(foss): down_bias pointer is NULL (entry foss_down has "
       "bias=bf16: [E, H])"},
  };
  const size_t launches = fakeGpu().launches.size();
  for (const Case &c : cases)
    CHECK_REJECTED(layer(bundle, c.args.experts == 8 ? "fmix" : "foss", c.args),
                   bad, c.message);
  CHECK_EQ(fakeGpu().launches.size(), launches);
  // The scales' odd alignments are fine.
  moeLayerArgs odd =
      with(m, &moeLayerArgs::gate_up_weights_scale, kGateUpScale + 1);
  odd.down_weights_scale = kDownScale + 7;
  CHECK_EQ(layer(bundle, "fmix", odd), MOE_STATUS_SUCCESS);
  CHECK_EQ(layer(bundle, "foss", o), MOE_STATUS_SUCCESS);
  CHECK_EQ(fakeGpu().launches.size(), launches + 2 * kLayerFp8Kernels);
  moeBundleClose(bundle);

  // A bundle for sm_100a: its GEMMs' K (H for gate_up, I for down) also
  // multiples of 128, refused by the step, nothing launched; past them, the
  // chip check of the load.
  bundle =
      OPEN_VALID(replaced("chip sm_90a", "chip sm_100a", layerMxfp8Bundle()));
  if (!bundle)
    return;
  CHECK_REJECTED(
      layer(bundle, "foss", foss(16, 96, 128)), bad,
      "moeLayer(foss): gate_up step: moeGroupedMatmul(foss_gate_up): "
      "K = 96 is not a multiple of 128 (the bundle is for sm_100a, "
      "whose mxfp8 kernel reads K in stages of 128)");
  CHECK_REJECTED(layer(bundle, "foss", foss(16, 128, 160)), bad,
                 "moeLayer(foss): down step: moeGroupedMatmul(foss_down): K = "
                 "160 is not a multiple of 128");
  CHECK_STATUS(layer(bundle, "foss", foss(16, 128, 128)),
               MOE_STATUS_UNSUPPORTED,
               "bundle is for sm_100a but the device is sm_90");
  CHECK_EQ(fakeGpu().launches.size(), launches + 2 * kLayerFp8Kernels);
  moeBundleClose(bundle);
}

TEST(layerMxfp8LoadsAndFails) {
  checkLoadsAndFails(
      layerMxfp8Bundle(), "fmix", fmix(64), kLayerFp8Kernels,
      "moeLayer(fmix): gate_up step: moeGroupedMatmul: "
      "cuTensorMapEncodeTiled(rows of kernel 'mgemm_gate_up_mix' of entry "
      "'fmix_gate_up') failed: CUDA_ERROR_INVALID_VALUE",
      {{4, "moeLayer: cuLaunchKernelEx('mquant_rows_h256' of entry "
           "'fmix_quantize', grid (4, 1, 1), block (256, 1, 1), smem 0, "
           "programmatic stream serialization; 4 of 9 launches already "
           "issued) failed: CUDA_ERROR_INVALID_VALUE"},
       {7, "moeLayer: cuLaunchKernelEx('mgemm_down_mix' of entry "
           "'fmix_down', grid (20, 1, 1), block (128, 1, 1), smem 98304, "
           "programmatic stream serialization; 7 of 9 launches already "
           "issued) failed"}});
}
