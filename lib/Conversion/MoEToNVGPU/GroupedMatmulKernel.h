//===- GroupedMatmulKernel.h - sm_90a grouped GEMM kernel builder -*- C++
//-*-===//

#ifndef MOE_CONVERSION_MOETONVGPU_GROUPEDMATMULKERNEL_H
#define MOE_CONVERSION_MOETONVGPU_GROUPEDMATMULKERNEL_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <algorithm>

namespace mlir::moe {

/// What a grouped GEMM computes, as its op decides it (not the kernel
/// choice): operand format, epilogue, activation, bias, output encoding.
struct GroupedMatmulSemantics {
  /// What the epilogue does with the f32 accumulator before storing bf16.
  enum class Epilogue {
    /// out = acc.
    Store,
    /// The fused expert MLP's gate-up projection: each tile loads tileN / 2
    /// gate rows and the matching up rows (N / 2 further on) of the
    /// weights, and stores silu(gate) * up: out has N / 2 columns.
    SwiGLU,
    /// The down projection: out = acc * scale[row] (the routing weight).
    RowScale,
    /// moe.grouped_dgrad's act_grad: acc is the gradient of a gated
    /// activation's output column c; the epilogue loads its gate and up
    /// inputs (columns c and N + c of `act_input`, [M, 2N]) and stores their
    /// gradients at the same columns of out ([M, 2N]).
    ActivationGrad,
  };
  /// The gated activation of a SwiGLU or ActivationGrad epilogue.
  enum class Activation {
    /// silu(gate) * up.
    Silu,
    /// GPT-OSS: with g = min(gate, limit), u = clamp(up, -limit, limit):
    /// (u + 1) * g * sigmoid(alpha * g).
    GptOss,
  };

  /// How rows and weights are stored.
  enum class Format {
    /// bf16 rows and weights.
    BF16,
    /// DeepSeek-style block FP8: e4m3 rows with one f32 scale per row and
    /// 128 K (`[M, ceil(K/128)]`), e4m3 weights with one per 128 x 128 block
    /// (`[E, ceil(N/128), ceil(K/128)]`). Each 128-wide K step accumulates
    /// in registers of its own, then is added to the f32 accumulator times
    /// both scales.
    FP8Block,
    /// OCP MXFP8: e4m3 rows and weights, each with one UE8M0 scale byte
    /// (2^(s - 127)) per 32 K (`[M, K/32]`, `[E, N, K/32]`). Each wgmma (32
    /// K) accumulates apart and is added times its two scales while the next
    /// one runs; the scales of a K step are staged in shared memory as f32.
    MXFP8,
  };

  Format format = Format::BF16;
  Epilogue epilogue = Epilogue::Store;
  Activation activation = Activation::Silu;
  float alpha = 0, limit = 0; // Activation::GptOss only
  /// SwiGLU only: the activation is stored as e4m3 with one f32 scale per
  /// row and 128 output columns (a `[1, 128]` group, quantized as
  /// moe.quantize does from its bf16 rounding) instead of bf16. A work item
  /// then covers a whole group: passes() tiles back to back, their
  /// activations gathered in shared memory.
  bool quantizeOut = false;
  /// bf16 SwiGLU only, when set (f8E4M3FN or f8E5M2): the activation is
  /// stored as its MXFP8 round trip to this element (moe.fake_quantize with
  /// [1, 32] blocks and E8M0 scales, from its bf16 rounding), made by the
  /// lanes that store each 32 columns of a row: the `intermediate` of a
  /// bf16 expert MLP (MXFP8 computed as bf16 GEMMs).
  Type roundTripOut;
  /// The element type (f32 or bf16) of a per-expert bias [E, N] added to
  /// the accumulator before the activation or row scale; null: no bias.
  Type biasType;
  /// How each expert's weights lie. NK: [N, K] (moe.grouped_matmul's,
  /// WGMMA's K-major B). KN: [K, N], N contiguous (moe.grouped_dgrad reading
  /// the forward's weights as they are): WGMMA's N-major B (imm-trans-b),
  /// loaded as boxes of 64 columns. bf16, normal form, plain store only.
  enum class WeightsLayout { NK, KN };
  WeightsLayout weightsLayout = WeightsLayout::NK;
  bool weightsKN() const { return weightsLayout == WeightsLayout::KN; }
};

/// Tile shape of the sm_90a grouped GEMM kernel. tileM / 64 warpgroups
/// compute tileM token rows x tileN output columns in K steps of tileK with
/// `stages` TMA buffers, sharing each weights tile. WGMMA fixes its M operand
/// at 64 rows: normally the tokens fill it (tileM = 64); with `swapAB` the
/// weights do (tileN = 64) and the tokens are WGMMA's N (tileM = 8..64),
/// computing out^T so that an expert with few rows wastes less of each
/// instruction.
struct GroupedMatmulTile : GroupedMatmulSemantics {
  int64_t tileM = 64;
  int64_t tileN = 128;
  int64_t tileK = 64;
  int64_t stages = 2;
  bool swapAB = false;
  /// MXFP8 only: instead of a promotion per 32 K, each K step's e4m3 rows
  /// and weights are widened to bf16 in shared memory times their scales
  /// (exact: an e4m3 value times a power of two) and multiplied by bf16
  /// wgmma into the accumulator directly. The widening of step s + 1 runs
  /// while step s multiplies (two bf16 buffers). Normal form only.
  bool widen = false;
  /// CTAs per thread-block cluster of the normal, unwidened forms (1 or 2;
  /// the others ignore it). With 2, CTAs 2c and 2c + 1 take the two halves
  /// of a work item of 2 x itemColumns() columns: the even one loads their
  /// shared row tile into both by TMA multicast (a sixth less L2 traffic at
  /// 128 x 256), so a stage is refilled once both have consumed it.
  int64_t cluster = 1;
  /// Consumer warpgroups sharing each work item's K steps in the swap-AB
  /// bf16 and block-FP8 forms of one pass per item (1 or 2; the others
  /// ignore it): warpgroup w multiplies steps 2i + w, streaming them
  /// through its own stages (every other one) with its own barrier and
  /// refills, and the epilogue adds the two partial sums. Decode over a
  /// long K with few work items (Mixtral's down projection at T = 1: 128
  /// items of 14336 K for 132 SMs) then streams like two CTAs per SM.
  int64_t splitK = 1;
  /// Which normal forms get a producer warpgroup: it issues every TMA load
  /// behind per-stage "empty" mbarriers that the consumer warpgroups arrive
  /// on once their wgmma retired, instead of a CTA barrier per K step;
  /// setmaxnreg moves its registers to two consumers. MXFP8's producer also
  /// stages each step's scales (f32, block-major, one buffer per stage)
  /// before arriving on the step's full mbarrier. The 128-row forms, and
  /// MXFP8's 64-row one (whose accumulator ptxas otherwise spilled).
  enum class WarpSpecialize {
    None,
    /// The FP8 formats (block FP8 and MXFP8): their promotions keep the
    /// consumers apart (block FP8 4-9 % faster layers at T = 8192, MXFP8
    /// 11-23 %, up to 1.9x at T = 64-1000 with the 64-row form; bf16
    /// measured neutral).
    FP8,
    /// Every format.
    All,
  };
  WarpSpecialize warpSpecialize = WarpSpecialize::None;
  /// Ping-pong (bf16 normal form, tileM = 64, or 128 with at most 128
  /// accumulator columns): two consumer warpgroups take alternate work items
  /// of the CTA, each a whole tile, behind a producer warpgroup. The producer
  /// loads the items' steps in order, so one warpgroup's mainloop runs while
  /// the other stores its tile: the epilogue overlaps the next item's wgmma
  /// instead of stalling them.
  bool pingpong = false;
  /// The staged epilogue (bf16 out of a normal form, no activation's
  /// gradient or round trip) hands each whole 64 x 64 staging tile whose
  /// rows are all the expert's to one TMA store through an out tensor map (the
  /// kernel's third argument) instead of 128 threads' 16-byte stores; the
  /// staging tile is reused once the TMA has read it. Needs out's columns a
  /// multiple of 8 (a 16-byte row pitch).
  bool tmaStore = false;

  /// Columns of one TMA box of N-major weights (WeightsLayout::KN): 128
  /// bytes of bf16, one row of the 128-byte swizzle.
  static constexpr int64_t kNMajorChunk = 64;

  /// Columns of the WGMMA accumulator (its rows are always 64).
  int64_t accumulatorColumns() const { return swapAB ? tileM : tileN; }
  /// Consumer warpgroups of the block: each computes 64 token rows of the
  /// tile, or with swap-AB (the tokens are WGMMA's N) a share of its K
  /// steps (see `splitK`), or ping-pong its own work items.
  int64_t warpgroups() const {
    return pingpong ? 2 : swapAB ? kSplit() : tileM / 64;
  }
  /// 64-row accumulators each consumer warpgroup holds: a 128-row
  /// ping-pong item is two (one wgmma's rows each), every other form one.
  int64_t rowGroups() const { return pingpong ? tileM / 64 : 1; }
  /// Whether a warpgroup can hold a 128-row item as two accumulators: at
  /// most 128 columns (128 registers a thread), no activation inputs beside.
  bool twoRowGroupsFit() const {
    return accumulatorColumns() <= 128 && !activationGrad();
  }
  /// Consumer warpgroups that read each stage (ping-pong: its item's one).
  int64_t stageReaders() const { return pingpong ? 1 : warpgroups(); }
  /// Warpgroups this kernel splits K between (see `splitK`).
  int64_t kSplit() const {
    return swapAB && !mxfp8() && !quantizeOut ? splitK : 1;
  }

  bool fp8() const { return format != Format::BF16; }
  bool mxfp8() const { return format == Format::MXFP8; }
  bool widened() const { return mxfp8() && widen; }
  /// Bytes of one bf16 copy of a stage (widened): K is 2 x 64 bf16 halves.
  int64_t widenedStageBytes() const { return (tileM + tileN) * tileK * 2; }
  /// MXFP8: the scale blocks of one K step, and the bytes of the f32
  /// buffers of the tile's weight rows' and token rows' scales: two (this
  /// step's and the next's), or warp-specialized one per stage.
  int64_t scaleBlocksPerStep() const { return tileK / 32; }
  int64_t scaleBuffers() const { return specialized() ? stages : 2; }
  int64_t scaleStagingBytes() const {
    return mxfp8() ? scaleBuffers() * scaleBlocksPerStep() * (tileN + tileM) * 4
                   : 0;
  }
  /// Bytes of one row or weight element.
  int64_t elementBytes() const { return fp8() ? 1 : 2; }
  /// K of one wgmma: 32 bytes (16 bf16 or 32 e4m3 values).
  int64_t mmaK() const { return 32 / elementBytes(); }

  /// CTAs per cluster this kernel is built for (see `cluster`).
  int64_t clusterSize() const {
    return swapAB || widened() ? 1 : std::max<int64_t>(cluster, 1);
  }
  /// Whether this kernel has a producer warpgroup (see `warpSpecialize`).
  bool specialized() const {
    bool wanted = warpSpecialize == WarpSpecialize::All ||
                  (warpSpecialize == WarpSpecialize::FP8 && fp8());
    return pingpong ||
           (wanted && !swapAB && !widened() &&
            (tileM == 128 || (mxfp8() && tileM == 64)) && clusterSize() == 1);
  }
  /// Whether this kernel stores through a tensor map (see `tmaStore`).
  bool tmaStores() const {
    return tmaStore && !swapAB && !quantizeOut && !roundTripOut &&
           !activationGrad();
  }
  /// Threads of the block: the consumer warpgroups and the producer's.
  int64_t threads() const {
    return 128 * (warpgroups() + (specialized() ? 1 : 0));
  }

  bool gated() const { return epilogue == Epilogue::SwiGLU; }
  bool activationGrad() const { return epilogue == Epilogue::ActivationGrad; }
  /// Output columns of one tile (gate and up share a tile when gated).
  int64_t outputColumns() const { return gated() ? tileN / 2 : tileN; }
  /// Output columns of a quantized group (`quantizeOut`).
  static constexpr int64_t kOutGroup = 128;
  /// Tiles a work item runs back to back: one, or with `quantizeOut` those
  /// of one output group.
  int64_t passes() const {
    return quantizeOut ? kOutGroup / outputColumns() : 1;
  }
  /// Output columns of one work item.
  int64_t itemColumns() const { return outputColumns() * passes(); }
  /// Token rows a warpgroup quantizes: 64, or the swap-AB tile's.
  int64_t activationRows() const { return swapAB ? tileM : 64; }
  /// Bytes of the bf16 activations of an item's groups (`quantizeOut`).
  int64_t activationTileBytes() const {
    return warpgroups() * activationRows() * kOutGroup * 2;
  }

  /// The same epilogue on another tile shape.
  GroupedMatmulTile withShape(int64_t m, int64_t n, int64_t stages_,
                              bool swapAB_) const {
    GroupedMatmulTile tile = *this;
    tile.tileM = m;
    tile.tileN = n;
    tile.stages = stages_;
    tile.swapAB = swapAB_;
    return tile;
  }

  /// Bytes of dynamic shared memory the kernel needs.
  int64_t dynamicSharedBytes() const;
  /// The part of it before the widened bf16 stages and the MXFP8 scale
  /// buffers.
  int64_t tileSharedBytes() const;
  /// A name that says what the kernel was built for.
  std::string kernelName(Type offsetType) const;
};

/// Builds `gpu.func` computing out[rows of e] = rows[rows of e] @ weights[e]^T
/// (weights [E, N, K]; WeightsLayout::KN: @ weights[e], weights [E, K, N])
/// for bf16 or block-FP8 operands with f32 accumulation (then the tile's
/// epilogue), inside `module`. Its arguments: (rows tensor map ptr, weights
/// tensor map ptr, with `tmaStore` out's tensor map ptr, offsets memref<?xT>,
/// out memref<?x?xbf16>, K, rows_min, rows_max as i32, for Format::FP8Block the
/// rows' scales memref<?x?xf32> and the weights' scales memref<?x?x?xf32>
/// (Format::MXFP8: memref<?x?xi8> and memref<?x?x?xi8> of UE8M0 codes), with
/// `quantizeOut` the output's scales memref<?x?xf32> [M, N / 256] (out is then
/// memref<?x?xi8>), for Epilogue::RowScale the
/// scale memref<?xf32>, and with a bias the bias memref<?x?xT> [E, N]). See
/// docs/hopper-notes.md and docs/runtime-contract.md.
gpu::GPUFuncOp buildGroupedMatmulKernel(OpBuilder &builder, Location loc,
                                        gpu::GPUModuleOp module,
                                        const GroupedMatmulTile &tile,
                                        Type offsetType);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_GROUPEDMATMULKERNEL_H
