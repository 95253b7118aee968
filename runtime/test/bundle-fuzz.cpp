//===- bundle-fuzz.cpp - libFuzzer target for the bundle reader -----------===//
//
// Each input is a candidate .moebundle: moeBundleOpenMemory, then, when it is
// accepted, every introspection call and a launch per entry with sizes
// derived from the input, on the fake driver: moeGroupedMatmul for
// grouped_matmul.v3 and grouped_matmul_fp8.v1 entries (so the grid and
// descriptor arithmetic runs on fuzzed tiles and rows ranges; each grid is
// checked against contract §3.1 (§3.7 for out=f8E4M3FN) recomputed here in
// 128 bits, with the out memref, weights box and row_scale parameters of the
// entry's epilogue, and for FP8 entries the 1-byte tensor maps and the 16
// parameters of the scale memrefs (f32 blocks for fp8_block, UE8M0 bytes
// per 32 along K for mxfp8), then the 7 of out_scale with out=f8E4M3FN,
// §3.7), moeRoute and moeUnpermute for route.v1 and unpermute.v2 entries (grid,
// block and every parameter checked), moePermuteWorkspaceBytes (against
// contract §3.4 recomputed here) and moePermute for permute.v2 entries (the
// three launches, grids, blocks and their 12 + 29 + 24 parameters checked,
// 31 for the gather of an out=f8E4M3FN entry, its rows_scale last),
// moeLayerWorkspaceBytes (against contract §3.5 and §3.10 recomputed here)
// and moeLayer for layer.v1 and layer_fp8.v1 entries, with or without
// quantize and intermediate parts (the order of the launches and the carved
// pointers checked), moeQuantize for quantize.v1
// entries (grid against contract §3.8 recomputed here, block and the 21
// parameters checked), then moeBundleClose. Bias entries' 7 parameters are
// checked too. Built with MOE_ENABLE_FUZZER=ON (address and undefined
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

/// The 7 words of a rank-2 memref descriptor [rows, columns].
void memref2D(uint64_t *words, int &count, uint64_t pointer, int64_t rows,
              int64_t columns) {
  const uint64_t descriptor[7] = {
      pointer,           pointer,           0, uint64_t(rows),
      uint64_t(columns), uint64_t(columns), 1};
  for (uint64_t word : descriptor)
    words[count++] = word;
}

/// Checks launch `index` (from the end: 1 is the last) of a successful
/// moeRoute, moeUnpermute or moePermute.
void checkSimpleLaunch(size_t launchesBefore, const moeKernelInfo &kernel,
                       int64_t gridX, const uint64_t *words, int count,
                       size_t launches = 1, size_t index = 1) {
  require(fakeGpu().launches.size() == launchesBefore + launches);
  const FakeLaunch &launch =
      fakeGpu().launches[fakeGpu().launches.size() - index];
  require(launch.function == kernel.symbol);
  require(int64_t(launch.grid[0]) == gridX && launch.grid[1] == 1 &&
          launch.grid[2] == 1);
  require(launch.block[0] == unsigned(kernel.threads) && launch.block[1] == 1 &&
          launch.block[2] == 1);
  require(launch.smem == unsigned(kernel.smem));
  require(launch.params.size() == size_t(count));
  for (int i = 0; i < count; ++i)
    require(launch.params[i] == words[i]);
}

/// T for a call on an entry accepting up to `maxRows` tokens.
int64_t tokensFor(uint64_t h, int64_t maxRows) {
  return (h & 1) ? maxRows : 1 + int64_t((h >> 1) % uint64_t(maxRows));
}

void exerciseRoute(moeBundle *bundle, const moeEntryInfo &entry,
                   const moeKernelInfo &kernel, uint64_t h) {
  require(entry.experts >= 1 && entry.top_k >= 1 && entry.top_k <= 32 &&
          entry.top_k <= entry.experts);
  require(entry.logits_bits == 32 || entry.logits_bits == 16);
  require(kernel.threads % 32 == 0);
  moeRouteArgs args;
  args.logits = 0x100000;
  args.bias = entry.bias ? 0x200000 : 0;
  args.ids = 0x300000;
  args.weights = 0x400000;
  args.tokens = tokensFor(h, entry.max_rows);
  args.experts = entry.experts;
  fakeGpu().wordParams[kernel.symbol] = entry.bias ? 26 : 21;
  size_t launchesBefore = fakeGpu().launches.size();
  moeStatus status = moeRoute(bundle, entry.name, &args, nullptr);
  // INVALID_ARGUMENT: T*E*4 beyond int64 for a huge E.
  require(status == MOE_STATUS_SUCCESS ||
          status == MOE_STATUS_INVALID_ARGUMENT ||
          status == MOE_STATUS_UNSUPPORTED || status == MOE_STATUS_NO_GPU);
  if (status != MOE_STATUS_SUCCESS)
    return;
  uint64_t words[26];
  int count = 0;
  memref2D(words, count, args.logits, args.tokens, args.experts);
  if (entry.bias) {
    const uint64_t bias[5] = {args.bias, args.bias, 0, uint64_t(args.experts),
                              1};
    for (uint64_t word : bias)
      words[count++] = word;
  }
  memref2D(words, count, args.ids, args.tokens, entry.top_k);
  memref2D(words, count, args.weights, args.tokens, entry.top_k);
  const int64_t perCta = kernel.threads / 32;
  int64_t grid = (args.tokens + perCta - 1) / perCta;
  checkSimpleLaunch(launchesBefore, kernel, grid < 65535 ? grid : 65535, words,
                    count);
}

void exerciseQuantize(moeBundle *bundle, const moeEntryInfo &entry,
                      const moeKernelInfo &kernel, uint64_t h) {
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
  moeQuantizeArgs args;
  args.input = 0x100000;
  args.values = 0x200000;
  args.scales = 0x300000;
  args.batch = entry.batch != -1 ? entry.batch : 1 + int64_t((h >> 8) % 1000);
  const int64_t blocksOfRows = entry.max_rows / br;
  args.rows = entry.rows != -1   ? entry.rows
              : blocksOfRows < 1 ? br
                                 : br * tokensFor(h, blocksOfRows);
  args.cols =
      entry.cols != -1 ? entry.cols : bc * (1 + int64_t((h >> 40) % 4096));
  fakeGpu().wordParams[kernel.symbol] = 21;
  size_t launchesBefore = fakeGpu().launches.size();
  moeStatus status = moeQuantize(bundle, entry.name, &args, nullptr);
  // INVALID_ARGUMENT: R above max_rows, or the input's bytes beyond int64.
  require(status == MOE_STATUS_SUCCESS ||
          status == MOE_STATUS_INVALID_ARGUMENT ||
          status == MOE_STATUS_UNSUPPORTED || status == MOE_STATUS_NO_GPU);
  if (status != MOE_STATUS_SUCCESS)
    return;
  require(args.rows <= entry.max_rows);
  const __int128 numRows = __int128(args.batch) * args.rows;
  const __int128 elements = numRows * args.cols;
  require(elements * (entry.input_bits / 8) <= INT64_MAX);
  uint64_t words[21];
  int count = 0;
  memref2D(words, count, args.input, int64_t(numRows), args.cols);
  memref2D(words, count, args.values, int64_t(numRows), args.cols);
  memref2D(words, count, args.scales, int64_t(numRows / br), args.cols / bc);
  // [1, B]: 32 elements per thread; [128, 128]: a CTA per block; <= 65535.
  const __int128 grid =
      br == 1 ? (elements + 32 * kernel.threads - 1) / (32 * kernel.threads)
              : elements / (br * bc);
  checkSimpleLaunch(launchesBefore, kernel,
                    grid < 65535 ? int64_t(grid) : 65535, words, count);
}

void exerciseUnpermute(moeBundle *bundle, const moeEntryInfo &entry,
                       const moeKernelInfo &kernel, uint64_t h) {
  require(entry.top_k >= 1);
  require(entry.hidden == -1 || (entry.hidden >= 8 && entry.hidden % 8 == 0));
  require(entry.slots_bits == 32 || entry.slots_bits == 64);
  moeUnpermuteArgs args;
  args.rows = 0x100000;
  args.slots = 0x200000;
  args.weights = entry.weighted ? 0x300000 : 0;
  args.out = 0x400000;
  args.tokens = tokensFor(h, entry.max_rows);
  args.rows_count = 1 + int64_t((h >> 8) % 1000000);
  args.hidden =
      entry.hidden != -1 ? entry.hidden : 8 * (1 + int64_t((h >> 40) % 4096));
  fakeGpu().wordParams[kernel.symbol] = entry.weighted ? 28 : 21;
  size_t launchesBefore = fakeGpu().launches.size();
  moeStatus status = moeUnpermute(bundle, entry.name, &args, nullptr);
  // INVALID_ARGUMENT: T*k*8 or T*H*2 beyond int64.
  require(status == MOE_STATUS_SUCCESS ||
          status == MOE_STATUS_INVALID_ARGUMENT ||
          status == MOE_STATUS_UNSUPPORTED || status == MOE_STATUS_NO_GPU);
  if (status != MOE_STATUS_SUCCESS)
    return;
  uint64_t words[28];
  int count = 0;
  memref2D(words, count, args.rows, args.rows_count, args.hidden);
  memref2D(words, count, args.slots, args.tokens, entry.top_k);
  if (entry.weighted)
    memref2D(words, count, args.weights, args.tokens, entry.top_k);
  memref2D(words, count, args.out, args.tokens, args.hidden);
  // One CTA per (token, column block of 8 * threads columns), at most 2^20.
  const __int128 blocks =
      (args.hidden + 8 * kernel.threads - 1) / (8 * kernel.threads);
  const __int128 grid = __int128(args.tokens) * blocks;
  checkSimpleLaunch(launchesBefore, kernel,
                    grid < 1048576 ? int64_t(grid) : 1048576, words, count);
}

/// The 5 words of a rank-1 memref descriptor [size].
void memref1D(uint64_t *words, int &count, uint64_t pointer, int64_t size) {
  const uint64_t descriptor[5] = {pointer, pointer, 0, uint64_t(size), 1};
  for (uint64_t word : descriptor)
    words[count++] = word;
}

/// The workspace of a permute.v2 entry for N ids (contract §3.4): the
/// sources, i32 [N], then from the next multiple of 256 bytes the counts,
/// i32 [chunks * E].
struct PermuteWorkspace {
  __int128 chunks, counts, bytes;
};
PermuteWorkspace permuteWorkspace(const moeEntryInfo &entry, __int128 n) {
  PermuteWorkspace w;
  w.chunks = (n + entry.chunk - 1) / entry.chunk;
  w.counts = (n * 4 + 255) / 256 * 256;
  w.bytes = w.counts + w.chunks * entry.experts * 4;
  return w;
}

void exercisePermute(moeBundle *bundle, const moeEntryInfo &entry,
                     const moeKernelInfo *kernels, bool indexCounts,
                     int64_t scatterFrom, uint64_t h) {
  // scatter_from: a fourth kernel, the scatter.
  require(entry.num_kernels == (scatterFrom ? 4 : 3));
  require(entry.experts >= 1 && entry.experts <= 1024 && entry.top_k >= 1);
  require(entry.chunk >= 32 && entry.chunk <= 65536 && entry.chunk % 32 == 0);
  require(entry.hidden == -1 || (entry.hidden >= 8 && entry.hidden % 8 == 0));
  require(entry.offsets_bits == 32 || entry.offsets_bits == 64);
  // out=f8E4M3FN: the gather writes e4m3 rows and their scales per [1, 128]
  // group of a row (a static H of whole groups).
  const bool fp8Out = std::strcmp(entry.out, MOE_OUT_E4M3) == 0;
  require(fp8Out || std::strcmp(entry.out, MOE_OUT_BF16) == 0);
  require(!fp8Out || entry.hidden == -1 || entry.hidden % 128 == 0);
  // scatter_from (only with out=f8E4M3FN): from T = scatter_from on, the
  // scatter runs instead of the gather, over the tokens, and takes the
  // slots [T, k] for the sources [N].
  require(!scatterFrom || fp8Out);
  moePermuteArgs args;
  args.tokens = 0x100000;
  args.ids = 0x200000;
  args.rows = 0x300000;
  args.offsets = 0x400000;
  args.slots = 0x500000;
  args.workspace = 0x600000;
  args.rows_scale = fp8Out ? 0x700000 : 0;
  args.tokens_count = tokensFor(h, entry.max_rows);
  const bool scatter = scatterFrom && args.tokens_count >= scatterFrom;
  const int last = scatter ? 3 : 2; // the launched gather or scatter
  const int64_t quantum = fp8Out ? 128 : 8;
  args.hidden = entry.hidden != -1 ? entry.hidden
                                   : quantum * (1 + int64_t((h >> 40) % 4096));
  __int128 rows = __int128(args.tokens_count) * entry.top_k;
  int64_t bytes = -1;
  moeStatus status =
      moePermuteWorkspaceBytes(bundle, entry.name, args.tokens_count, &bytes);
  // The reader accepts any op; the calls want moe.permute.
  const bool permuteOp = std::strcmp(entry.op, MOE_OP_PERMUTE) == 0;
  require((status == MOE_STATUS_SUCCESS) == (permuteOp && rows <= 2147483647));
  const PermuteWorkspace w = permuteWorkspace(entry, rows);
  require(status != MOE_STATUS_SUCCESS || bytes == int64_t(w.bytes));
  // A symbol shared by two of the kernels is declared with the fewest
  // parameters of its kernels (the fake must not read past a launch's
  // parameters), and the launches are then not compared.
  const int params[4] = {12, 29, fp8Out ? 31 : 24, 33};
  bool distinct = true;
  for (int k = 0; k < entry.num_kernels; ++k) {
    int words = params[k];
    for (int j = 0; j < entry.num_kernels; ++j)
      if (j != k && std::strcmp(kernels[k].symbol, kernels[j].symbol) == 0) {
        distinct = false;
        words = std::min(words, params[j]);
      }
    fakeGpu().wordParams[kernels[k].symbol] = words;
  }
  size_t launchesBefore = fakeGpu().launches.size();
  status = moePermute(bundle, entry.name, &args, nullptr);
  // INVALID_ARGUMENT: T*k beyond 2^31 - 1, or T*H*2 or T*k*H*(2 or 1)
  // beyond int64.
  require(status == MOE_STATUS_SUCCESS ||
          status == MOE_STATUS_INVALID_ARGUMENT ||
          status == MOE_STATUS_UNSUPPORTED || status == MOE_STATUS_NO_GPU);
  if (status != MOE_STATUS_SUCCESS)
    return;
  require(permuteOp && rows <= 2147483647);
  // index_counts=1 with one chunk: no count kernel (contract §3.4).
  const bool counted = !indexCounts || w.chunks > 1;
  const size_t total = counted ? 3 : 2;
  require(fakeGpu().launches.size() == launchesBefore + total);
  if (!distinct)
    return;
  const int64_t n = int64_t(rows), chunks = int64_t(w.chunks),
                countsSize = chunks * entry.experts;
  const uint64_t sources = args.workspace,
                 counts = args.workspace + uint64_t(w.counts);
  uint64_t words[33];
  int count = 0;
  memref2D(words, count, args.ids, args.tokens_count, entry.top_k);
  memref1D(words, count, counts, countsSize);
  if (counted)
    checkSimpleLaunch(launchesBefore, kernels[0], chunks, words, count, 3, 3);
  count = 0;
  memref2D(words, count, args.ids, args.tokens_count, entry.top_k);
  memref1D(words, count, counts, countsSize);
  memref1D(words, count, args.offsets, entry.experts + 1);
  memref2D(words, count, args.slots, args.tokens_count, entry.top_k);
  memref1D(words, count, sources, n);
  checkSimpleLaunch(launchesBefore, kernels[1], chunks, words, count, total, 2);
  count = 0;
  memref2D(words, count, args.tokens, args.tokens_count, args.hidden);
  if (scatter)
    memref2D(words, count, args.slots, args.tokens_count, entry.top_k);
  else
    memref1D(words, count, sources, n);
  memref1D(words, count, args.offsets, entry.experts + 1);
  memref2D(words, count, args.rows, n, args.hidden);
  if (fp8Out)
    memref2D(words, count, args.rows_scale, n, args.hidden / 128);
  // Groups of 4 rows (scatter=1: tokens) times column blocks of threads * 8
  // (n * H fits).
  const int64_t gatherCTAs = ((scatter ? args.tokens_count : n) + 3) / 4 *
                             ((args.hidden + 8 * kernels[last].threads - 1) /
                              (8 * kernels[last].threads));
  checkSimpleLaunch(launchesBefore, kernels[last],
                    gatherCTAs < 65535 ? gatherCTAs : 65535, words, count,
                    total, 1);
}

/// Declares to the fake how many parameters each kernel of `entry` takes
/// (`words`: all 8 bytes, else a grouped matmul's; `kernelWords`, when
/// given, per kernel instead); false when a symbol was already declared
/// otherwise (the fuzzed bundle shares it), as the fake could not record
/// both.
bool declare(std::map<std::string, int> &declared, moeBundle *bundle,
             const char *name, int words, int gemmParams,
             const int *kernelWords = nullptr) {
  int32_t index = -1;
  moeEntryInfo entry;
  require(moeBundleFindEntry(bundle, name, &index) == MOE_STATUS_SUCCESS &&
          moeBundleGetEntry(bundle, index, &entry) == MOE_STATUS_SUCCESS);
  for (int32_t k = 0; k < entry.num_kernels; ++k) {
    if (kernelWords)
      words = kernelWords[k];
    const int key = words ? words : 100 + gemmParams;
    moeKernelInfo kernel;
    require(moeBundleGetKernel(bundle, index, k, &kernel) ==
            MOE_STATUS_SUCCESS);
    auto [it, added] = declared.insert({kernel.symbol, key});
    if (!added && it->second != key)
      return false;
    if (words) {
      fakeGpu().wordParams[kernel.symbol] = words;
    } else {
      fakeGpu().wordParams.erase(kernel.symbol);
      fakeGpu().numParams[kernel.symbol] = gemmParams;
    }
  }
  return true;
}

/// The kernel symbols of entry `index`, in file order, with rows_min <=
/// `rows` (a grouped matmul launches those with rows_min <= M; in a layer,
/// where no expert has more than T rows, rows_min <= T).
std::vector<std::string> symbolsOf(moeBundle *bundle, int32_t index,
                                   int64_t rows) {
  moeEntryInfo entry;
  require(moeBundleGetEntry(bundle, index, &entry) == MOE_STATUS_SUCCESS);
  std::vector<std::string> symbols;
  for (int32_t k = 0; k < entry.num_kernels; ++k) {
    moeKernelInfo kernel;
    require(moeBundleGetKernel(bundle, index, k, &kernel) ==
            MOE_STATUS_SUCCESS);
    if (kernel.rows_min <= rows)
      symbols.push_back(kernel.symbol);
  }
  return symbols;
}

void exerciseLayer(moeBundle *bundle, int32_t e, const moeEntryInfo &entry,
                   const moe::runtime::BundleData &parsed, uint64_t h) {
  require(entry.num_kernels == 0 && entry.max_rows >= 1);
  // The parts: earlier entries that chain as contract §2 says; a layer.v1
  // entry has no quantize parts, a layer_fp8.v1 entry block-FP8 GEMMs, a
  // quantize part exactly when its permute writes bf16 rows and an
  // intermediate part exactly when its gate_up writes bf16.
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
  // One format for both GEMMs: MXFP8's scales are E8M0 bytes per [1, 32]
  // group of a row, made by both quantize parts (no gather or epilogue
  // writes them).
  require(std::strcmp(gateUp.format, down.format) == 0);
  const bool mx = std::strcmp(gateUp.format, MOE_FORMAT_MXFP8) == 0;
  require(!mx || (index[kQuantize] >= 0 && index[kIntermediate] >= 0));
  const int64_t group = mx ? 32 : 128;
  // Without an intermediate part, the gate-up GEMM quantizes inter itself.
  const bool gateUpQuantizes = std::strcmp(gateUp.out, MOE_OUT_E4M3) == 0;
  require(std::strcmp(down.out, MOE_OUT_BF16) == 0 &&
          (gateUpQuantizes || std::strcmp(gateUp.out, MOE_OUT_BF16) == 0));
  require(gateUpQuantizes == (fp8 && index[kIntermediate] < 0));
  // Without a quantize part, the permute's gather quantizes the rows itself.
  const bool gatherQuantizes = std::strcmp(permute.out, MOE_OUT_E4M3) == 0;
  require(gatherQuantizes || std::strcmp(permute.out, MOE_OUT_BF16) == 0);
  require(gatherQuantizes == (fp8 && index[kQuantize] < 0));
  // scatter_from: a fourth kernel, the scatter, which takes the slots (7
  // words) for the sources (5); launched instead of the gather from T =
  // scatter_from on.
  const int64_t scatterFrom = parsed.entries[index[kPermute]].scatterFrom;
  require(!scatterFrom || gatherQuantizes);
  require(permute.num_kernels == (scatterFrom ? 4 : 3));
  require(permute.experts == route.experts && permute.top_k == route.top_k &&
          unpermute.top_k == route.top_k && unpermute.weighted == 1);
  require(gateUp.offsets_bits == permute.offsets_bits &&
          down.offsets_bits == permute.offsets_bits &&
          unpermute.slots_bits == permute.offsets_bits);
  require(gateUp.experts == -1 || gateUp.experts == route.experts);
  require(down.experts == -1 || down.experts == route.experts);
  // An FP8 layer's quantizes make e4m3 values and f32 scales per [1, 128]
  // of the bf16 rows, [T*k, C] (mxfp8: E8M0 scales per [1, 32]).
  for (int p : {kQuantize, kIntermediate})
    require(index[p] < 0 ||
            (std::strcmp(parts[p].element, MOE_ELEMENT_E4M3) == 0 &&
             std::strcmp(parts[p].scale, mx ? MOE_SCALE_E8M0 : MOE_SCALE_F32) ==
                 0 &&
             parts[p].input_bits == 16 && parts[p].block_rows == 1 &&
             parts[p].block_cols == group && parts[p].rank == 2));
  // H and I: the static ones (which agree), else from the input; whole
  // [1, 128] groups for an FP8 layer ([1, 32] for mxfp8).
  const int64_t quantum = fp8 ? group : 8;
  int64_t hidden = quantum * (1 + int64_t((h >> 40) % 512)), inter = -1;
  bool staticHidden = false;
  for (int64_t value :
       {permute.hidden, index[kQuantize] >= 0 ? parts[kQuantize].cols : -1,
        gateUp.k, down.n, unpermute.hidden})
    if (value != -1) {
      require(!staticHidden || value == hidden);
      hidden = value;
      staticHidden = true;
    }
  if (gateUp.n != -1)
    inter = gateUp.n / 2;
  for (int64_t value :
       {index[kIntermediate] >= 0 ? parts[kIntermediate].cols : -1, down.k})
    if (value != -1) {
      require(inter == -1 || value == inter);
      inter = value;
    }
  if (inter == -1)
    inter = quantum * (1 + int64_t((h >> 20) % 512));

  // The workspace of contract §3.5 (§3.10: then the values and scales of
  // rows and inter), in 128 bits.
  const int64_t tokens = tokensFor(h, entry.max_rows);
  using Wide = unsigned __int128;
  const Wide rows = Wide(tokens) * Wide(route.top_k),
             index8 = Wide(permute.offsets_bits / 8);
  Wide end = 0, starts[11];
  const PermuteWorkspace permuteBytes = permuteWorkspace(permute, rows);
  const Wide sizes[11] = {rows * 4,
                          rows * 4,
                          Wide(route.experts + 1) * index8,
                          rows * index8,
                          Wide(permuteBytes.bytes),
                          rows * Wide(hidden) * 2,
                          rows * Wide(inter) * 2,
                          rows * Wide(hidden),
                          rows * Wide(hidden / group) * (mx ? 1 : 4),
                          rows * Wide(inter),
                          rows * Wide(inter / group) * (mx ? 1 : 4)};
  for (int i = 0; i < (fp8 ? 11 : 7); ++i) {
    starts[i] = (end + 255) / 256 * 256;
    end = starts[i] + sizes[i];
  }
  const bool layerOp = std::strcmp(entry.op, MOE_OP_LAYER) == 0;
  const bool fits = layerOp && rows <= 2147483647 && hidden >= quantum &&
                    hidden % quantum == 0 && inter >= quantum &&
                    inter % quantum == 0 && end <= Wide(INT64_MAX);
  uint64_t bytes = 0;
  moeStatus status =
      moeLayerWorkspaceBytes(bundle, entry.name, tokens, hidden, inter, &bytes);
  require((status == MOE_STATUS_SUCCESS) == fits);
  if (!fits)
    return;
  require(Wide(bytes) == end);

  std::map<std::string, int> declared;
  // count, index, gather (7 more with the rows' scales)
  const bool scatter = scatterFrom && tokens >= scatterFrom;
  const int permuteWords[4] = {12, 29, gatherQuantizes ? 31 : 24, 33};
  const int gemmParams = fp8 ? 33 : 17; // and 7 more with a bias
  if (!declare(declared, bundle, names[kRoute], route.bias ? 26 : 21, 0) ||
      !declare(declared, bundle, names[kPermute], 0, 0, permuteWords) ||
      (index[kQuantize] >= 0 &&
       !declare(declared, bundle, names[kQuantize], 21, 0)) ||
      !declare(declared, bundle, names[kGateUp], 0,
               gemmParams + (gateUpQuantizes ? 7 : 0) +
                   (gateUp.bias_bits ? 7 : 0)) ||
      (index[kIntermediate] >= 0 &&
       !declare(declared, bundle, names[kIntermediate], 21, 0)) ||
      !declare(declared, bundle, names[kDown], 0,
               gemmParams + (down.bias_bits ? 7 : 0)) ||
      !declare(declared, bundle, names[kCombine], 28, 0))
    return;
  moeLayerArgs args = {};
  args.tokens = 0x100000;
  args.logits = 0x200000;
  args.score_bias = route.bias ? 0x300000 : 0;
  args.gate_up_weights = 0x400000;
  args.down_weights = 0x500000;
  args.gate_up_bias = gateUp.bias_bits ? 0x600000 : 0;
  args.down_bias = down.bias_bits ? 0x700000 : 0;
  args.out = 0x800000;
  args.workspace = uint64_t(1) << 40;
  args.workspace_bytes = bytes;
  args.tokens_count = tokens;
  args.hidden = hidden;
  args.intermediate = inter;
  args.experts = route.experts;
  // MXFP8's scales are bytes: any alignment.
  args.gate_up_weights_scale = fp8 ? (mx ? 0x900001 : 0x900000) : 0;
  args.down_weights_scale = fp8 ? (mx ? 0xa00003 : 0xa00000) : 0;
  size_t before = fakeGpu().launches.size();
  status = moeLayer(bundle, entry.name, &args, nullptr);
  // INVALID_ARGUMENT: a step's own limits (a part's max_rows, N or the TMA
  // stride of huge sizes).
  require(status == MOE_STATUS_SUCCESS ||
          status == MOE_STATUS_INVALID_ARGUMENT ||
          status == MOE_STATUS_UNSUPPORTED || status == MOE_STATUS_NO_GPU);
  if (status != MOE_STATUS_SUCCESS) {
    require(fakeGpu().launches.size() == before); // nothing launched
    return;
  }
  // route, permute (count, index, gather), [quantize], the gate-up GEMM's
  // kernels, [intermediate], the down GEMM's, combine; the GEMMs' kernels
  // for experts of up to T rows only (a token's ids are distinct).
  // An index_counts=1 permute of one chunk launches no count kernel.
  const bool counted =
      !parsed.entries[index[kPermute]].indexCounts || permuteBytes.chunks > 1;
  std::vector<std::string> expected;
  size_t first[7] = {};
  for (int p = 0; p < 7; ++p) {
    first[p] = expected.size();
    if (index[p] < 0)
      continue;
    const bool gemm = p == kGateUp || p == kDown;
    std::vector<std::string> symbols =
        symbolsOf(bundle, index[p], gemm ? tokens : INT64_MAX);
    if (p == kPermute && scatterFrom)
      symbols.erase(symbols.begin() + (scatter ? 2 : 3)); // not launched
    if (p == kPermute && !counted)
      symbols.erase(symbols.begin()); // the count kernel
    for (const std::string &symbol : symbols)
      expected.push_back(symbol);
  }
  const std::vector<FakeLaunch> &launches = fakeGpu().launches;
  require(launches.size() == before + expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    require(launches[before + i].function == expected[i]);
  // The route writes ids and weights at the start of the workspace; the
  // combine reads the rows the down GEMM wrote and writes out.
  const FakeLaunch &route0 = launches[before], &last = launches.back();
  const size_t ids = route.bias ? 12 : 7;
  require(route0.params[0] == args.logits &&
          route0.params[ids] == args.workspace &&
          route0.params[ids + 7] == args.workspace + uint64_t(starts[1]));
  require(last.params[0] == args.workspace + uint64_t(starts[5]) &&
          last.params[21] == args.out);
  // The permute's count and index kernels take the counts, its index and
  // gather kernels the sources, from its part of the workspace.
  const uint64_t sources = args.workspace + uint64_t(starts[4]),
                 counts = sources + uint64_t(permuteBytes.counts);
  const size_t gatherAt = before + first[kPermute] + (counted ? 2 : 1);
  if (counted)
    require(launches[gatherAt - 2].params[7] == counts);
  // The scatter reads the slots (buffer 3) instead.
  require(launches[gatherAt - 1].params[7] == counts &&
          launches[gatherAt - 1].params[24] == sources &&
          launches[gatherAt].params[7] ==
              (scatter ? args.workspace + uint64_t(starts[3]) : sources));
  // Each quantize reads bf16 rows (or inter: buffer 5 or 6) and writes the
  // values and scales (7 and 8, or 9 and 10) its GEMM reads.
  auto at = [&](int buffer) {
    return args.workspace + uint64_t(starts[buffer]);
  };
  const struct {
    int part;
    int input, values;
  } quantizes[2] = {{kQuantize, 5, 7}, {kIntermediate, 6, 9}};
  for (const auto &q : quantizes) {
    if (index[q.part] < 0)
      continue;
    const FakeLaunch &launch = launches[before + first[q.part]];
    require(launch.params[0] == at(q.input) &&
            launch.params[7] == at(q.values) &&
            launch.params[14] == at(q.values + 1) &&
            launch.params[18] ==
                uint64_t((q.part == kQuantize ? hidden : inter) / group));
  }
  // The gather writes the bf16 rows (buffer 5), or without a quantize part
  // their values and scales (7 and 8, its parameters 17 and 24), which
  // every gate-up kernel reads (its rows map and parameters 17..23).
  // (the scatter's: 19 and 26, after the slots' 7 words for the sources' 5).
  const FakeLaunch &gather = launches[gatherAt];
  const size_t rowsAt = scatter ? 19 : 17;
  require(gather.params[rowsAt] == at(gatherQuantizes ? 7 : 5) &&
          gather.params[rowsAt + 3] == uint64_t(rows) &&
          gather.params[rowsAt + 4] == uint64_t(hidden));
  require(!gatherQuantizes ||
          (gather.params.size() == rowsAt + 14 &&
           gather.params[rowsAt + 7] == at(8) &&
           gather.params[rowsAt + 10] == uint64_t(rows) &&
           gather.params[rowsAt + 11] == uint64_t(hidden / 128)));
  for (size_t i = first[kGateUp]; i < first[kIntermediate]; ++i) {
    const FakeLaunch &launch = launches[before + i];
    require(fakeGpu().encodes[launch.mapEncode[0]].address == at(fp8 ? 7 : 5));
    require(!fp8 || (launch.tail.size() >= 16 && launch.tail[0] == at(8) &&
                     launch.tail[4] == uint64_t(hidden / group) &&
                     launch.tail[7] == args.gate_up_weights_scale &&
                     launch.tail[11] ==
                         uint64_t(mx ? 2 * inter : (2 * inter + 127) / 128)));
  }
  // Without an intermediate part, every gate-up kernel writes inter's values
  // (its out) and scales (its parameters 33..39), and every down kernel
  // reads them; with one, the gate-up writes the bf16 inter.
  for (size_t i = first[kGateUp]; i < first[kIntermediate]; ++i) {
    const FakeLaunch &launch = launches[before + i];
    require(launch.words[5] == at(gateUpQuantizes ? 9 : 6));
    require(!gateUpQuantizes ||
            (launch.tail.size() >= 23 && launch.tail[16] == at(10) &&
             launch.tail[19] == uint64_t(rows) &&
             launch.tail[20] == uint64_t(inter / 128)));
  }
  for (size_t i = first[kDown]; fp8 && i < first[kCombine]; ++i) {
    const FakeLaunch &launch = launches[before + i];
    require(fakeGpu().encodes[launch.mapEncode[0]].address == at(9) &&
            launch.tail.size() >= 16 && launch.tail[0] == at(10) &&
            launch.tail[4] == uint64_t(inter / group) &&
            launch.tail[7] == args.down_weights_scale &&
            launch.tail[11] == uint64_t(mx ? hidden : (hidden + 127) / 128));
  }
}

/// Entries with a launch plan: moeWorkspaceBytes and moeLaunch with sizes
/// and far-apart addresses from the hash; whatever they answer, an error
/// has a message and a success launches only the plan's kernels.
void exercisePlans(moeBundle *bundle, const moe::runtime::BundleData &parsed,
                   uint64_t hash) {
  for (const moe::runtime::Entry &entry : parsed.entries) {
    if (!entry.planLine)
      continue;
    const moe::runtime::Plan &plan = entry.plan;
    std::vector<int64_t> sizes;
    for (size_t i = 0; i < plan.sizes.size(); ++i)
      sizes.push_back(int64_t((hash >> (7 * i)) % 70000) + 1);
    std::vector<uint64_t> args;
    for (size_t i = 0; i < plan.args.size(); ++i)
      args.push_back((uint64_t(i) + 1) << 44);
    uint64_t bytes = 0;
    moeStatus status =
        moeWorkspaceBytes(bundle, entry.name.c_str(), sizes.data(),
                          int32_t(sizes.size()), &bytes);
    require(status == MOE_STATUS_SUCCESS || *moeLastErrorMessage() != '\0');
    moeLaunchArgs launch{
        sizes.data(),         int32_t(sizes.size()),
        int32_t(args.size()), args.data(),
        uint64_t(63) << 44,   status == MOE_STATUS_SUCCESS ? bytes : 0};
    size_t before = fakeGpu().launches.size();
    status = moeLaunch(bundle, entry.name.c_str(), &launch, nullptr);
    require(status == MOE_STATUS_SUCCESS || *moeLastErrorMessage() != '\0');
    require(fakeGpu().launches.size() - before <= plan.steps.size());
  }
}

void exercise(moeBundle *bundle, const moe::runtime::BundleData &parsed,
              uint64_t hash) {
  exercisePlans(bundle, parsed, hash);
  moeBundleInfo info;
  require(moeBundleGetInfo(bundle, &info) == MOE_STATUS_SUCCESS);
  require(info.version == MOE_BUNDLE_VERSION && std::strlen(info.chip) > 3);
  for (int32_t e = 0; e < info.num_entries; ++e) {
    moeEntryInfo entry;
    require(moeBundleGetEntry(bundle, e, &entry) == MOE_STATUS_SUCCESS);
    require(entry.activation && entry.route && entry.permute && entry.gate_up &&
            entry.down && entry.unpermute);
    const bool fp8Layer = std::strcmp(entry.abi, MOE_ABI_LAYER_FP8) == 0;
    const bool layer = fp8Layer || std::strcmp(entry.abi, MOE_ABI_LAYER) == 0;
    require(layer == (entry.num_kernels == 0) && entry.num_kernels <= 16);
    // An FP8 layer's quantize and intermediate are optional (exerciseLayer
    // checks them); the other entries have neither.
    require(
        entry.quantize && entry.intermediate &&
        (fp8Layer || (*entry.quantize == '\0' && *entry.intermediate == '\0')));
    int32_t found = -1;
    require(moeBundleFindEntry(bundle, entry.name, &found) ==
                MOE_STATUS_SUCCESS &&
            found == e);
    const bool fp8 = std::strcmp(entry.abi, MOE_ABI_GROUPED_MATMUL_FP8) == 0;
    const bool gemm =
        fp8 || std::strcmp(entry.abi, MOE_ABI_GROUPED_MATMUL) == 0;
    const bool route = std::strcmp(entry.abi, MOE_ABI_ROUTE) == 0;
    const bool permute = std::strcmp(entry.abi, MOE_ABI_PERMUTE) == 0;
    const bool quantize = std::strcmp(entry.abi, MOE_ABI_QUANTIZE) == 0;
    require(gemm || route || permute || layer || quantize ||
            std::strcmp(entry.abi, MOE_ABI_UNPERMUTE) == 0);
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
    require(gemm || layer || entry.num_kernels == (permute ? 3 : 1));
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
    uint64_t h = hash + uint64_t(e) * 0x9e3779b97f4a7c15ull;
    if (layer) {
      exerciseLayer(bundle, e, entry, parsed, h);
      continue;
    }
    if (permute) {
      require(entry.epilogue && !*entry.epilogue && entry.n == 0 &&
              entry.k == 0 && entry.slots_bits == 0 && entry.bias == 0);
      exercisePermute(bundle, entry, kernels, parsed.entries[e].indexCounts,
                      parsed.entries[e].scatterFrom, h);
      continue;
    }
    if (!gemm) {
      require(entry.epilogue && !*entry.epilogue && entry.n == 0 &&
              entry.k == 0 && entry.offsets_bits == 0);
      if (route)
        exerciseRoute(bundle, entry, kernels[0], h);
      else if (quantize)
        exerciseQuantize(bundle, entry, kernels[0], h);
      else
        exerciseUnpermute(bundle, entry, kernels[0], h);
      continue;
    }
    require(entry.top_k == 0 && entry.hidden == 0 && entry.weighted == 0 &&
            entry.bias == 0);
    const bool swiglu = std::strcmp(entry.epilogue, "swiglu") == 0;
    const bool rowScale = std::strcmp(entry.epilogue, "row_scale") == 0;
    require(swiglu || rowScale || std::strcmp(entry.epilogue, "store") == 0);
    require(!swiglu || entry.n == -1 || entry.n % 2 == 0);
    // swiglu entries have an activation, the others none.
    require(swiglu == (std::strcmp(entry.activation, "none") != 0));
    require(entry.bias_bits == 0 || entry.bias_bits == 16 ||
            entry.bias_bits == 32);
    const bool bias = entry.bias_bits != 0;
    moeGroupedMatmulArgs args;
    std::memset(&args, 0, sizeof(args));
    args.rows = 0x100000;
    args.weights = 0x200000;
    args.offsets = 0x300000;
    args.out = 0x400000;
    args.row_scale = rowScale ? 0x500000 : 0;
    args.bias = bias ? 0x600000 : 0;
    // MXFP8's scales are bytes: any alignment.
    args.rows_scale = fp8 ? (mx ? 0x700001 : 0x700000) : 0;
    args.weights_scale = fp8 ? (mx ? 0x800003 : 0x800000) : 0;
    args.out_scale = fp8Out ? 0x900000 : 0;
    args.m = (h & 1) ? entry.max_rows
                     : 1 + int64_t((h >> 1) % uint64_t(entry.max_rows));
    args.n = entry.n != -1 ? entry.n : 1 + int64_t((h >> 20) % 100000);
    if (swiglu && entry.n == -1)
      args.n += args.n % 2; // even: gate and up halves
    if (fp8Out && entry.n == -1)
      args.n = 256 * (1 + int64_t((h >> 20) % 400)); // whole [1, 128] groups
    // A multiple of 16 bytes: 8 bf16 or 16 float8; MXFP8: whole [1, 32]
    // blocks, of 128 in a bundle for sm_100a.
    const int64_t kQuantum =
        mx    ? (std::strcmp(info.chip, "sm_100a") == 0 ? 128 : 32)
        : fp8 ? 16
              : 8;
    args.k =
        entry.k != -1 ? entry.k : kQuantum * (1 + int64_t((h >> 40) % 2048));
    args.experts =
        entry.experts != -1 ? entry.experts : 1 + int64_t((h >> 8) % 512);
    // The fake records parameters 17.. of kernels declared to take more (a
    // symbol may be shared by entries of several epilogues).
    const int numParams = 17 + (fp8 ? 16 : 0) + (fp8Out ? 7 : 0) +
                          (rowScale ? 5 : 0) + (bias ? 7 : 0);
    for (int32_t k = 0; k < entry.num_kernels; ++k) {
      fakeGpu().numParams[kernels[k].symbol] = numParams;
      // The symbol may be a route or unpermute kernel's too.
      fakeGpu().wordParams.erase(kernels[k].symbol);
    }
    size_t launchesBefore = fakeGpu().launches.size();
    moeStatus status = moeGroupedMatmul(bundle, entry.name, &args, nullptr);
    require(status == MOE_STATUS_SUCCESS ||
            status == MOE_STATUS_INVALID_ARGUMENT ||
            status == MOE_STATUS_UNSUPPORTED || status == MOE_STATUS_NO_GPU);
    if (status != MOE_STATUS_SUCCESS)
      continue;
    // Some kernel covers every count, so at least one launch. The grid is
    // (min(work, resident), 1, 1), in file order, skipping the kernels
    // whose rows_min exceeds M; the fake holds 1 CTA per multiprocessor of
    // a kernel with more than 114 KiB of shared memory, else 4. A cluster
    // kernel (its `cluster`, which the C API does not report, from the
    // reader's data): (2 * min(work, resident clusters), 1, 1), with work
    // items of two adjacent column items and the fake's sm_count / 2
    // resident clusters, launched with the cluster dimension (2, 1, 1).
    require(fakeGpu().launches.size() > launchesBefore);
    size_t next = launchesBefore;
    for (int32_t k = 0; k < entry.num_kernels; ++k) {
      const moeKernelInfo &kernel = kernels[k];
      const moe::runtime::Kernel &record = parsed.entries[e].kernels[k];
      require(record.symbol == kernel.symbol);
      require(record.cluster == 1 || (record.cluster == 2 && !kernel.swap_ab));
      const int cluster = record.cluster;
      using Wide = __int128;
      auto ceilDiv = [](Wide a, Wide b) { return (a + b - 1) / b; };
      Wide eligible = args.m / kernel.rows_min;
      if (eligible > args.experts)
        eligible = args.experts;
      if (eligible == 0)
        continue;
      Wide slots = ceilDiv(args.m, kernel.tile_m) + eligible;
      Wide all = Wide(args.experts) * ceilDiv(kernel.rows_max, kernel.tile_m);
      if (all < slots)
        slots = all;
      // out=f8E4M3FN: an item per [1, 128] group of the N/2 output columns
      // (contract §3.7), not per column tile.
      Wide work = slots * ceilDiv(fp8Out ? Wide(args.n / 256)
                                         : ceilDiv(args.n, kernel.tile_n),
                                  cluster);
      Wide resident = cluster == 1 ? (kernel.smem > (114 << 10) ? 1 : 4) *
                                         Wide(fakeGpu().smCount)
                                   : Wide(fakeGpu().smCount / 2);
      require(next < fakeGpu().launches.size());
      const FakeLaunch &launch = fakeGpu().launches[next++];
      require(launch.function == kernel.symbol);
      require(Wide(launch.grid[0]) ==
              cluster * (work < resident ? work : resident));
      require(cluster == 1 ||
              (!launch.attributes.empty() && launch.attributes[0].id == 4 &&
               launch.attributes[0].dims[0] == 2 &&
               launch.attributes[0].dims[1] == 1 &&
               launch.attributes[0].dims[2] == 1));
      require(launch.grid[1] == 1 && launch.grid[2] == 1);
      require(launch.block[0] == unsigned(kernel.threads));
      require(launch.ints[0] == int32_t(args.k));
      // out is [M, N/2] after a swiglu, whose weights box has tile_n/2 rows.
      const uint64_t columns = uint64_t(swiglu ? args.n / 2 : args.n);
      require(launch.words[8] == uint64_t(args.m) &&
              launch.words[9] == columns && launch.words[10] == columns);
      require(launch.mapEncode[1] >= 0 &&
              size_t(launch.mapEncode[1]) < fakeGpu().encodes.size());
      const FakeEncode &weights = fakeGpu().encodes[launch.mapEncode[1]];
      require(weights.dims[1] == uint64_t(args.n));
      // bf16, or float8 as UINT8: the strides in bytes.
      const uint64_t elementBytes = fp8 ? 1 : 2;
      require(weights.dataType == (fp8 ? 0 : 9));
      require(weights.strides[0] == elementBytes * uint64_t(args.k) &&
              weights.strides[1] ==
                  elementBytes * uint64_t(args.k) * uint64_t(args.n));
      require(weights.box[1] ==
              uint32_t(swiglu ? kernel.tile_n / 2 : kernel.tile_n));
      // FP8: the rows_scale memref [M, KB] and the weights_scale memref
      // [E, NB, KB]; then the out_scale memref [M, N/256] with
      // out=f8E4M3FN; then the row_scale memref [M], then the bias memref
      // [E, N].
      require(launch.numParams == numParams);
      std::vector<uint64_t> tail;
      if (fp8) {
        // fp8_block: [M, KB] and [E, NB, KB] of 128 x 128 blocks; mxfp8:
        // [M, K/32] and [E, N, K/32].
        const uint64_t kb = uint64_t(mx ? args.k / 32 : (args.k + 127) / 128),
                       nb = uint64_t(mx ? args.n : (args.n + 127) / 128);
        tail = {args.rows_scale,
                args.rows_scale,
                0,
                uint64_t(args.m),
                kb,
                kb,
                1,
                args.weights_scale,
                args.weights_scale,
                0,
                uint64_t(args.experts),
                nb,
                kb,
                nb * kb,
                kb,
                1};
      }
      if (fp8Out)
        for (uint64_t word :
             {args.out_scale, args.out_scale, uint64_t(0), uint64_t(args.m),
              uint64_t(args.n / 256), uint64_t(args.n / 256), uint64_t(1)})
          tail.push_back(word);
      if (rowScale)
        for (uint64_t word : {args.row_scale, args.row_scale, uint64_t(0),
                              uint64_t(args.m), uint64_t(1)})
          tail.push_back(word);
      if (bias)
        for (uint64_t word :
             {args.bias, args.bias, uint64_t(0), uint64_t(args.experts),
              uint64_t(args.n), uint64_t(args.n), uint64_t(1)})
          tail.push_back(word);
      require(launch.tail == tail);
    }
    require(next == fakeGpu().launches.size());
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FakeGpu &gpu = installFakeDriver();
  gpu.recordImages = false; // fuzzed images may be shorter than 16 bytes
  moeBundle *bundle = nullptr;
  moeStatus status = moeBundleOpenMemory(data, size, &bundle);
  require((status == MOE_STATUS_SUCCESS) == (bundle != nullptr));
  require(status == MOE_STATUS_SUCCESS || *moeLastErrorMessage() != '\0');
  if (bundle) {
    // The reader's own data, for what the C API does not report.
    moe::runtime::BundleData parsed;
    std::string error;
    require(moe::runtime::parseBundle(data, size, parsed, error) ==
            MOE_STATUS_SUCCESS);
    exercise(bundle, parsed, hashOf(data, size));
  }
  moeBundleClose(bundle);
  return 0;
}
