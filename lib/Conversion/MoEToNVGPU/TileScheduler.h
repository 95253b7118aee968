//===- TileScheduler.h - device-side expert tile scheduler -*- C++ -*-===//
//
// The persistent grouped GEMM kernels' tile scheduler, shared by the sm_90a
// kernel (GroupedMatmulKernel.cpp, which defines these) and the sm_100a
// tcgen05 kernel (Tcgen05GroupedMatmulKernel.cpp): the offsets clamped as on
// the CPU, the experts whose row counts lie in [rows_min, rows_max] owning
// ceil(rows / tileM) consecutive token tiles, looked up in a shared-memory
// table (E < kCachedEnds) or by a warp scan.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONVERSION_MOETONVGPU_TILESCHEDULER_H
#define MOE_CONVERSION_MOETONVGPU_TILESCHEDULER_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::moe {

/// Offsets each CTA copies to shared memory (clamped, as i32) once at its
/// start, and the size of the tile table built from them (E < this many
/// experts; with more, each lookup scans and reads the rest from global
/// memory).
inline constexpr int64_t kCachedEnds = 1024;

/// The table is built by all warps (buildTileTableByWarps) from this many
/// experts on, with at most kTableSegments segments of 32 (one warp's scan
/// step builds it below that).
inline constexpr int64_t kTableByWarpsFrom = 65;
inline constexpr int64_t kTableSegments = 32;

/// A work item: an output tile of one expert.
struct WorkItem {
  Value expert, row0, rowEnd, col0;
  /// The token tile (scheduler slot); set by L2WorkOrder::describe.
  Value slot = {};
};

/// The (expert, token tile) a CTA's slot stands for, and the expert's rows.
struct TileLookup {
  Value expert; // -1 when the slot is past the last tile
  Value mTile, rowBegin, rowEnd;
  Value numTiles; // of all eligible experts (the scan only)
};

/// offsets[e] clamped into [0, numRows], as i32 (the ABI limits M to
/// 2^31 - 1).
Value clampOffset(ImplicitLocOpBuilder &b, Value offset, Value numRows);

/// One warp's step over experts [base, base + 32) of the tile scheduler:
/// an expert whose row count lies in [rowsMin, rowsMax] owns ceil(rows /
/// tileM) consecutive slots; the others belong to the entry's other
/// kernels. Offsets are clamped into [previous end, M] as on the CPU
/// (docs/semantics.md): expert e's rows end at clamp(max(offsets[0 .. e +
/// 1]), 0, M), a running maximum, taken here with shuffles (prefix max of
/// the ends, prefix sum of the tiles) after the previous step's carries.
/// Row counts are i32: the ABI limits M to 2^31 - 1.
struct ScanStep {
  Value hi, lo; // this lane's expert's rows [lo, hi)
  Value tiles;  // its slots (0 when not eligible or not an expert)
  Value upTo;   // slots of all experts up to and including it
  Value lastHi; // carries for the next step: lane 31's hi and upTo
  Value lastUpTo;
};

ScanStep scanStep(ImplicitLocOpBuilder &nb, Value lane, Value valid, Value end,
                  Value carryEnd, Value carryTiles, Value min32, Value max32,
                  int64_t tileM);

/// The tile scheduler's answer for `slot` by one warp scanning 32 experts
/// per step (E / 32 steps, a ballot finds the expert that holds `slot`):
/// the path for experts that do not fit the shared tile table. `cachedEnds`
/// holds the clamped offsets of the first kCachedEnds experts.
TileLookup lookUpTile(ImplicitLocOpBuilder &b, Value offsets, Value cachedEnds,
                      Value numExperts, Value numRows, Value slot,
                      Value rowsMin, Value rowsMax, int64_t tileM, Value tid);

/// The shared tile table, built once per CTA by warp 0 when E < kCachedEnds:
/// rowEnds (the offsets cache, rewritten in place) becomes the running
/// maximum, so expert e's rows are [rowEnds[e], rowEnds[e + 1]), and
/// tileEnds[e] the slots of experts 0..e.
void buildTileTable(ImplicitLocOpBuilder &b, Value rowEnds, Value tileEnds,
                    Value numExperts, Value rowsMin, Value rowsMax,
                    int64_t tileM, Value tid);

/// The same table built by all `warps` warps of the CTA (which all call
/// this): each takes segments of 32 experts; the segments' largest ends and
/// their tiles pass through the last 2 x kTableSegments entries of
/// tileEnds (so E <= kCachedEnds - 2 x kTableSegments), with a CTA barrier
/// between the three passes.
void buildTileTableByWarps(ImplicitLocOpBuilder &b, Value rowEnds,
                           Value tileEnds, Value numExperts, Value rowsMin,
                           Value rowsMax, int64_t tileM, Value tid,
                           int64_t warps);

/// Where `slot` (below the table's slot count) lies, by binary search for
/// the first expert whose tileEnds exceeds it (numTiles is left null).
TileLookup lookUpTableTile(ImplicitLocOpBuilder &b, Value rowEnds,
                           Value tileEnds, Value numExperts, Value slot);

/// One kernel's scheduler over the workgroup buffers `cachedEnds` and
/// `tileEnds` (kCachedEnds i32 each): what both grouped GEMM kernels do
/// between their set-up and their work loop.
struct TileScheduler {
  Value offsets, cachedEnds, tileEnds, numExperts, numRows, rowsMin, rowsMax;
  Value tid;
  int64_t tileM;
  /// E < kCachedEnds: lookups use the table rather than the warp scan.
  Value tableFits;

  /// The first min(E + 1, kCachedEnds) offsets, clamped, into cachedEnds by
  /// `threads` threads; the caller synchronises the CTA before buildTable.
  void cacheOffsets(ImplicitLocOpBuilder &b, int64_t threads) const;
  /// Warp 0, or from kTableByWarpsFrom experts all `threads` / 32 warps,
  /// build the table when it fits, then a CTA barrier.
  void buildTable(ImplicitLocOpBuilder &b, int64_t threads) const;
  /// Slots (token tiles) of all eligible experts.
  Value countTiles(ImplicitLocOpBuilder &b) const;
  /// Where slot `slot` (>= 0) lies: by the table, or by the warp scan.
  TileLookup lookUp(ImplicitLocOpBuilder &b, Value slot) const;
};

/// Token tiles per group of the L2-friendly work order.
inline constexpr int64_t kSlotGroup = 8;

/// A persistent kernel's work items: the eligible experts' token tiles
/// (slots) times `numColTiles` column tiles, in an L2-friendly order: groups
/// of kSlotGroup token tiles, all column tiles of a group before the next,
/// token tiles fastest inside it. A group's token rows stay in L2 across
/// the column tiles, and the token tiles of one expert meet each weights
/// tile back to back.
struct L2WorkOrder {
  const TileScheduler &scheduler;
  Value numTiles, numColTiles, numWork;
  /// Output columns of an item per CTA; a cluster's `clusterSize` CTAs
  /// take adjacent shares (CTA `rank`'s from the item's first column).
  int64_t itemColumns, clusterSize;
  Value rank;

  /// Where work item `work` lies (items past the last describe the last,
  /// never run).
  WorkItem describe(ImplicitLocOpBuilder &b, Value work) const;
};

/// The scheduler of a kernel with these operands (tableFits computed here).
TileScheduler makeTileScheduler(ImplicitLocOpBuilder &b, Value offsets,
                                Value cachedEnds, Value tileEnds,
                                Value numExperts, Value numRows, Value rowsMin,
                                Value rowsMax, Value tid, int64_t tileM);

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_TILESCHEDULER_H
