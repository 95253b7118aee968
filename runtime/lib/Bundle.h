//===- Bundle.h - the parsed form of a .moebundle ----------------*- C++
//-*-===//
//
// Internal. BundleReader.cpp fills a BundleData from bytes (contract §2);
// Runtime.cpp wraps it in the public moeBundle.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_LIB_BUNDLE_H
#define MOE_RUNTIME_LIB_BUNDLE_H

#include "Plan.h"
#include "moe_runtime.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace moe::runtime {

/// Limits of contract §2 and of the kernel ABIs (§3).
inline constexpr int64_t kMaxRows = 2147483647; // 2^31 - 1
inline constexpr size_t kMaxNameBytes = 255;
inline constexpr size_t kMaxImages = 64;
inline constexpr size_t kMaxEntries = 256;
inline constexpr size_t kMaxKernelsPerEntry = 16;
inline constexpr uint64_t kMaxImageBytes = uint64_t(256) << 20;
inline constexpr int64_t kMaxThreads = 1024;
inline constexpr int64_t kMaxTile = 256; // TMA box dimensions
/// A TMA box row (tile_k elements) is at most 128 bytes (the 128-byte
/// swizzle: 64 bf16 or 128 float8) and a multiple of 16 bytes.
inline constexpr int64_t kMaxTileKBytes = 128;
inline constexpr int64_t kTmaRowQuantumBytes = 16;
/// Block-FP8 (contract §3.7): one f32 scale per 128 elements of a row of the
/// rows, per 128 x 128 elements of the weights.
inline constexpr int64_t kFp8BlockSize = 128;
/// MXFP8 (OCP MX, contract §3.7): one UE8M0 scale byte per 32 elements along
/// K of a row of the rows and of the weights.
inline constexpr int64_t kMxBlockSize = 32;
/// The sm_100a MXFP8 kernel (tcgen05, contract §3.9) reads K in stages of
/// 128 elements (4 scale bytes per row).
inline constexpr int64_t kTcgen05MxKQuantum = 128;
inline constexpr int64_t kMaxStages = 64;
/// The largest `cluster` of a kernel record: 2 CTAs (contract §3.1).
inline constexpr int64_t kMaxCluster = 2;
inline constexpr int64_t kMaxTopK = 32; // route.v1: top_k <= min(E, 32)
/// permute.v2: experts <= 1024 (a CTA keeps a count per expert).
inline constexpr int64_t kMaxPermuteExperts = 1024;
/// permute.v2: `chunk`, the ids per CTA of the count and index kernels, is a
/// multiple of 32 of at most 65536.
inline constexpr int64_t kPermuteChunkQuantum = 32;
inline constexpr int64_t kMaxPermuteChunk = 65536;
/// Grid limit of the route.v1 and permute.v2 gather launches (grid-stride).
inline constexpr int64_t kMaxSimpleGrid = 65535;
/// Rows of `rows` each CTA of a permute.v2 gather kernel copies.
inline constexpr int64_t kGatherRowsPerCTA = 4;
/// Grid limit of the unpermute.v2 launch (grid-stride over the (token,
/// column block) pairs).
inline constexpr int64_t kMaxUnpermuteGrid = 1048576; // 2^20
/// quantize.v1 (contract §3.8): the blocks its kernels implement, [1, B]
/// with B a power of two in [8, 256], or [128, 128]; each thread of a [1, B]
/// kernel takes 32 elements per grid-stride step (so its threads are whole
/// warps), a CTA of a [128, 128] kernel one block; grid-stride beyond 65535
/// CTAs.
inline constexpr int64_t kMinQuantizeRowBlock = 8;
inline constexpr int64_t kMaxQuantizeRowBlock = 256;
inline constexpr int64_t kQuantizeTile = 128;
inline constexpr int64_t kQuantizeElementsPerThread = 32;
inline constexpr int64_t kMaxQuantizeGrid = 65535;

struct FreeDeleter {
  void operator()(void *p) const { std::free(p); }
};

struct Image {
  std::string name;
  std::unique_ptr<uint8_t, FreeDeleter> data; // malloc'd copy, 16-aligned
  uint64_t size = 0;
  int line = 0;
};

struct Kernel {
  std::string symbol;
  std::string imageName;
  int image = -1; // index into BundleData::images
  int32_t threads = 0, smem = 0;
  // grouped_matmul.v3 and grouped_matmul_fp8.v1 only (0 for the kernels of
  // the other ABIs).
  int64_t rowsMin = 0, rowsMax = 0;
  int32_t tileM = 0, tileN = 0, tileK = 0, stages = 0;
  bool swapAB = false;
  // The CTAs of a thread-block cluster along x (the optional `cluster` key,
  // added within version 6): 1, or 2 for a grouped matmul kernel with
  // swap_ab=0 compiled with `.reqnctapercluster 2, 1, 1` (contract §3.1).
  int32_t cluster = 1;
  int line = 0;
};

/// The kernel ABI of an entry (its `abi` key), which decides its other keys.
enum class Abi {
  GroupedMatmul,    // grouped_matmul.v3: bf16
  GroupedMatmulFp8, // grouped_matmul_fp8.v1: fp8_block or mxfp8, v3's keys+
  Route,
  Unpermute,
  Permute,
  Layer,
  Quantize,
  LayerFp8,     // layer_fp8.v1: an FP8 layer (added within version 6)
  GroupedWgrad, // grouped_wgrad.v1: per-expert weight gradients (version 7)
  Planned,      // planned.v1: an op launched by its plan alone (version 7)
  Program       // program.v1: a function of ops, its parts' steps (version 7)
};

/// Whether entries of `abi` are whole layers (moeLayer): no kernels, the
/// names of earlier entries as parts.
inline bool isLayer(Abi abi) {
  return abi == Abi::Layer || abi == Abi::LayerFp8;
}

/// Whether entries of `abi` have no kernels of their own: every step of
/// their plan launches a kernel of an earlier entry (a layer's or a
/// program's parts).
inline bool launchesParts(Abi abi) {
  return isLayer(abi) || abi == Abi::Program;
}

/// Whether entries of `abi` are grouped matmuls (moeGroupedMatmul): the keys,
/// kernels and launches of grouped_matmul.v3, and more for the FP8 one.
inline bool isGroupedMatmul(Abi abi) {
  return abi == Abi::GroupedMatmul || abi == Abi::GroupedMatmulFp8;
}

/// Bytes of an element of the rows and weights of a grouped matmul: 2 (bf16)
/// or 1 (float8_e4m3fn).
inline int64_t gemmElementBytes(Abi abi) {
  return abi == Abi::GroupedMatmulFp8 ? 1 : 2;
}

/// "grouped_matmul.v3", "grouped_matmul_fp8.v1", "route.v1", "unpermute.v2",
/// "permute.v2", "layer.v1", "quantize.v1" or "layer_fp8.v1".
inline const char *abiName(Abi abi) {
  switch (abi) {
  case Abi::GroupedMatmul:
    return MOE_ABI_GROUPED_MATMUL;
  case Abi::GroupedMatmulFp8:
    return MOE_ABI_GROUPED_MATMUL_FP8;
  case Abi::Route:
    return MOE_ABI_ROUTE;
  case Abi::Unpermute:
    return MOE_ABI_UNPERMUTE;
  case Abi::Permute:
    return MOE_ABI_PERMUTE;
  case Abi::Layer:
    return MOE_ABI_LAYER;
  case Abi::Quantize:
    return MOE_ABI_QUANTIZE;
  case Abi::LayerFp8:
    return MOE_ABI_LAYER_FP8;
  case Abi::GroupedWgrad:
    return MOE_ABI_GROUPED_WGRAD;
  case Abi::Planned:
    return MOE_ABI_PLANNED;
  case Abi::Program:
    return MOE_ABI_PROGRAM;
  }
  return "?";
}

/// The format of a grouped_matmul_fp8.v1 entry's rows, weights and scales
/// (contract §3.7; None for the other ABIs): DeepSeek-V3's block-FP8 (f32
/// scales per [1, 128] of the rows, per [128, 128] of the weights) or OCP
/// MXFP8 (a UE8M0 scale byte per 32 elements along K of both).
enum class Fp8Format { None, Block, Mx };

/// "fp8_block", "mxfp8", or "" (None): the bundle's spelling.
inline const char *fp8FormatName(Fp8Format format) {
  switch (format) {
  case Fp8Format::None:
    return "";
  case Fp8Format::Block:
    return MOE_FORMAT_FP8_BLOCK;
  case Fp8Format::Mx:
    return MOE_FORMAT_MXFP8;
  }
  return "?";
}

/// What the kernels of an entry do with the accumulator (contract §3.1).
enum class Epilogue { Store, SwiGLU, RowScale };

/// "store", "swiglu" or "row_scale": the bundle's spelling.
inline const char *epilogueName(Epilogue epilogue) {
  switch (epilogue) {
  case Epilogue::Store:
    return MOE_EPILOGUE_STORE;
  case Epilogue::SwiGLU:
    return MOE_EPILOGUE_SWIGLU;
  case Epilogue::RowScale:
    return MOE_EPILOGUE_ROW_SCALE;
  }
  return "?";
}

/// The activation of a swiglu entry's kernels (contract §3.1); none for the
/// other epilogues.
enum class Activation { None, SiLU, GptOss };

/// "none", "silu" or "gptoss": the bundle's spelling.
inline const char *activationName(Activation activation) {
  switch (activation) {
  case Activation::None:
    return MOE_ACTIVATION_NONE;
  case Activation::SiLU:
    return MOE_ACTIVATION_SILU;
  case Activation::GptOss:
    return MOE_ACTIVATION_GPTOSS;
  }
  return "?";
}

/// The parts of a layer.v1 or layer_fp8.v1 entry, in the order its steps
/// run (and its bundle keys come); a layer.v1 entry has no quantize or
/// intermediate part.
enum LayerPart {
  kRoutePart,
  kPermutePart,
  kQuantizePart,
  kGateUpPart,
  kIntermediatePart,
  kDownPart,
  kUnpermutePart,
  kNumLayerParts
};

/// "route", "permute", "quantize", "gate_up", "intermediate", "down",
/// "unpermute": the bundle keys.
inline const char *layerPartName(int part) {
  static const char *const names[kNumLayerParts] = {
      "route",        "permute", "quantize", "gate_up",
      "intermediate", "down",    "unpermute"};
  return names[part];
}

/// A program.v1 entry that is a stage of a split function (contract
/// §3.14); `function` is empty for any other entry. Lists are names joined
/// by ','.
struct Stage {
  std::string function, exchange, exchangeArgs, exchangeResults;
  std::string functionArgs, functionResults;
  int32_t index = 0, ranks = 0;
};

struct Entry {
  std::string name, op, abi;
  Abi kind = Abi::GroupedMatmul;
  int64_t maxRows = 0;
  Stage stage;
  // grouped_matmul.v3 and grouped_matmul_fp8.v1 (experts also for route.v1
  // and permute.v2, offsetsBits also for permute.v2).
  Epilogue epilogue = Epilogue::Store;
  int64_t experts = 0, n = 0, k = 0;
  int32_t offsetsBits = 0;
  int32_t biasBits = 0; // the expert bias [E, N]: 0 (none), 16 or 32
  // grouped_matmul.v3 weights=kn (op moe.grouped_dgrad): weights [E, K, N].
  bool weightsKN = false;
  Activation activation = Activation::None;
  // grouped_matmul_fp8.v1: its `format`, fp8_block or mxfp8 (None for every
  // other ABI).
  Fp8Format format = Fp8Format::None;
  // out=f8E4M3FN: a grouped_matmul_fp8.v1 swiglu entry's (format fp8_block
  // only) output is e4m3 codes [M, N/2] and f32 scales [M, N/256], a
  // permute.v2 entry's gathered rows e4m3 codes [N, H] and f32 scales
  // [N, H/128] (else bf16).
  bool fp8Out = false;
  // route.v1, unpermute.v2 and permute.v2 (top_k), route.v1 (logits, bias),
  // unpermute.v2 (hidden, slots, weighted) and permute.v2 (hidden, chunk).
  int32_t topK = 0;
  int32_t logitsBits = 0;
  bool bias = false;
  // route.v1: shared-expert slots after the top_k routed ones (experts
  // experts .. experts+shared-1), gated by the tokens of width `hidden`.
  int32_t shared = 0;
  bool sharedGate = false;
  int64_t hidden = 0;
  int32_t slotsBits = 0;
  bool weighted = false;
  int32_t chunk = 0; // permute.v2: ids per CTA of its count and index kernels
  // permute.v2 with index_counts=1: its index kernel counts a single chunk
  // of ids itself, so the count kernel is launched only for more.
  bool indexCounts = false;
  // permute.v2 with scatter_from=S (out=f8E4M3FN only): a fourth kernel,
  // the scatter over the tokens (4 per CTA, each stored to the rows of its
  // slots), launched instead of the gather when T >= S; 0: none.
  int64_t scatterFrom = 0;
  // layer.v1 and layer_fp8.v1: its parts, indices of earlier entries (by
  // LayerPart; -1 for the parts its ABI has not, and for the optional
  // quantize and intermediate of a layer_fp8.v1 entry whose permute and
  // gate_up have out=f8E4M3FN).
  int parts[kNumLayerParts] = {-1, -1, -1, -1, -1, -1, -1};
  // quantize.v1: the FP8 element (e5m2, else e4m3), the scales (E8M0 codes,
  // else f32), the input (bits: 16 bf16, 32 f32), the block, the rank of the
  // input and its sizes (-1: dynamic; batch is 1 for rank 2).
  bool e5m2 = false;
  bool e8m0 = false;
  int32_t inputBits = 0;
  int32_t blockRows = 0, blockCols = 0;
  int32_t rank = 0;
  int64_t batch = 0, rows = 0, cols = 0;
  std::vector<Kernel> kernels;
  // Its launch plan (docs/launch-plans.md; records added within version 6,
  // optional until the runtime runs every entry by its plan), and the line
  // of its first plan record (0: none).
  Plan plan;
  int planLine = 0;
  int line = 0;
};

struct BundleData {
  int32_t version = 0;
  std::string chip;
  int ccMajor = 0, ccMinor = 0;
  bool archSpecific = false; // the `a` suffix: exact compute capability
  std::vector<Image> images;
  std::vector<Entry> entries;
};

/// Parses and validates `size` bytes. On failure returns INVALID_BUNDLE,
/// UNSUPPORTED or OUT_OF_MEMORY with a message (naming the line) in `error`.
moeStatus parseBundle(const uint8_t *data, size_t size, BundleData &out,
                      std::string &error);

/// Sets the calling thread's last error message (printf-style) and returns
/// `status`.
moeStatus setError(moeStatus status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

} // namespace moe::runtime

#endif // MOE_RUNTIME_LIB_BUNDLE_H
