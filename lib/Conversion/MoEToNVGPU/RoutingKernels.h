//===- RoutingKernels.h - moe.route and moe.unpermute kernels -*- C++ -*-===//

#ifndef MOE_CONVERSION_MOETONVGPU_ROUTINGKERNELS_H
#define MOE_CONVERSION_MOETONVGPU_ROUTINGKERNELS_H

#include "MoE/Dialect/MoEDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir::moe {

/// Threads per CTA of the routing and combine kernels: 4 warps, one token
/// per warp (route) or one token per CTA (unpermute).
inline constexpr int64_t kRoutingThreads = 128;

/// What a moe.route kernel is built for (see docs/semantics.md).
struct RouteKernelSpec {
  Routing routing = Routing::softmax_topk;
  int64_t experts = 0, topK = 0;
  int64_t groups = 0, topGroups = 0; // 0: no group limiting
  bool renormalize = false;
  double scale = 1.0;
  bool bias = false;
  int64_t logitBits = 32; // f32, or 16 for bf16
  /// Shared slots after the k routed ones (experts E .. E+c-1), weighted 1
  /// or, with sharedGate, by sigmoid(tokens[t, :] . gate[0, :]).
  int64_t shared = 0;
  bool sharedGate = false;
  std::string kernelName() const;
};

/// What a moe.unpermute kernel is built for.
struct UnpermuteKernelSpec {
  int64_t topK = 0;
  int64_t slotBits = 64;
  bool weighted = false;
  bool shared = false; // adds a [T, H] bf16 row per token
  std::string kernelName() const;
};

/// What a moe.permute is built for: three kernels over chunks of
/// kPermuteChunk flattened ids, one CTA of kPermuteIndexThreads per chunk: a
/// count kernel (each chunk's per-expert counts), an index kernel (offsets,
/// and each chunk's stable slots and rows' source tokens, placed after the
/// earlier chunks' ids) and a gather kernel (one CTA per kGatherRows rows).
inline constexpr int64_t kPermuteIndexThreads = 1024;
/// Ids per chunk: each warp ranks 4 rounds of 32.
inline constexpr int64_t kPermuteChunk = kPermuteIndexThreads * 4;
/// Experts whose index kernel keeps an i32 [warp][expert] table (up to
/// kPermuteMaxExperts an i16 one: its cells never exceed a chunk's ids).
inline constexpr int64_t kPermuteWideExperts = 256;
inline constexpr int64_t kPermuteMaxExperts = 512;
/// Rows each CTA of the gather kernel copies (docs/runtime-contract.md §3.4).
inline constexpr int64_t kGatherRows = 4;
struct PermuteKernelSpec {
  int64_t experts = 0, topK = 0;
  int64_t offsetBits = 64;
  /// The gather stores the rows as e4m3 with one f32 scale per row and 128
  /// columns (moe.quantize's [1, 128] groups) instead of bf16.
  bool quantize = false;
  /// When set (f8E4M3FN or f8E5M2): the gather stores the rows' MXFP8 round
  /// trip to this element ([1, 32] blocks, E8M0 scales), in bf16.
  Type roundTrip;
  std::string countKernelName() const;
  std::string indexKernelName() const;
  std::string gatherKernelName() const;
  /// The quantizing scatter's (see buildPermuteScatterKernel): its loop over
  /// a token's k slots is unrolled, so k is in its name.
  std::string scatterKernelName() const;
};

/// Builds the routing kernel: (logits memref<?x?xT>, [bias memref<?xf32>],
/// [tokens memref<?x?xbf16>, gate memref<?x?xbf16> (shared gate)], ids
/// memref<?x?xi32>, weights memref<?x?xf32>), one warp per token.
gpu::GPUFuncOp buildRouteKernel(OpBuilder &builder, Location loc,
                                gpu::GPUModuleOp module,
                                const RouteKernelSpec &spec);

/// A token's k slots as the combine reads them: each slot's row (row 0
/// where the slot lies outside [0, numRows): `take` is then false) and its
/// weight (1 without `weights`).
struct CombineSlots {
  SmallVector<Value> row, take, weight;
};
CombineSlots loadCombineSlots(ImplicitLocOpBuilder &b, Value slots,
                              Value weights, Value token, Value numRows,
                              int64_t topK);

/// The combine's f32 sum of 8 columns from `col`: sum over the slots, in
/// order, of weight * rows[row, col..col+8] (0 for a slot not taken); the
/// k rows' loads are issued first, so that they are in flight together.
Value combineColumns(ImplicitLocOpBuilder &b, Value rows,
                     const CombineSlots &slots, Value col);

/// Builds the combine kernel: (rows memref<?x?xbf16>, slots memref<?x?xiN>,
/// [weights memref<?x?xf32>], out memref<?x?xbf16>), one CTA per token.
gpu::GPUFuncOp buildUnpermuteKernel(OpBuilder &builder, Location loc,
                                    gpu::GPUModuleOp module,
                                    const UnpermuteKernelSpec &spec);

/// Builds the permutation's count kernel: (ids memref<?x?xi32>, counts
/// memref<?xi32> [chunks * E]).
gpu::GPUFuncOp buildPermuteCountKernel(OpBuilder &builder, Location loc,
                                       gpu::GPUModuleOp module,
                                       const PermuteKernelSpec &spec);

/// Builds the permutation's index kernel: (ids memref<?x?xi32>, counts
/// memref<?xi32>, offsets memref<?xiN>, slots memref<?x?xiN>, sources
/// memref<?xi32>).
gpu::GPUFuncOp buildPermuteIndexKernel(OpBuilder &builder, Location loc,
                                       gpu::GPUModuleOp module,
                                       const PermuteKernelSpec &spec);

/// Builds the permutation's gather kernel: (tokens memref<?x?xbf16>,
/// sources memref<?xi32>, offsets memref<?xiN>, rows memref<?x?xbf16>), or
/// with `quantize` (rows memref<?x?xi8>, rows_scale memref<?x?xf32>
/// [n, H / 128]): the rows quantize.v1 would make of the bf16 ones.
gpu::GPUFuncOp buildPermuteGatherKernel(OpBuilder &builder, Location loc,
                                        gpu::GPUModuleOp module,
                                        const PermuteKernelSpec &spec);

/// Builds the permutation's quantizing scatter, a fourth kernel the runtime
/// launches instead of the gather from `scatter_from` tokens on: (tokens
/// memref<?x?xbf16>, slots memref<?x?xiN>, offsets memref<?xiN>, rows
/// memref<?x?xi8>, rows_scale memref<?x?xf32>). It runs over the tokens
/// (kGatherRows per CTA) and stores each quantized token to the rows its
/// slots name, so each token is quantized once instead of k times: the same
/// rows and scales as the quantizing gather kernel (`quantize`).
gpu::GPUFuncOp buildPermuteScatterKernel(OpBuilder &builder, Location loc,
                                         gpu::GPUModuleOp module,
                                         const PermuteKernelSpec &spec);

/// The moe.launch of each op (RoutingLaunches.cpp), its kernels built into
/// `kernels` on first use. permuteLaunch: count, index and gather, the
/// gather storing e4m3 rows with [1, 128]-group scales with `quantize`, and
/// with `scatterFrom` > 0 the scatter the runtime runs from that T on.
FailureOr<DictionaryAttr> routeLaunch(OpBuilder &builder,
                                      gpu::GPUModuleOp kernels, RouteOp op);
FailureOr<DictionaryAttr> permuteLaunch(OpBuilder &builder,
                                        gpu::GPUModuleOp kernels, PermuteOp op,
                                        bool quantize, int64_t scatterFrom);
FailureOr<DictionaryAttr>
unpermuteLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels, UnpermuteOp op);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_ROUTINGKERNELS_H
