//===- GemmKernel.h - the parts of the sm_90a grouped GEMM kernel -*- C++
//-*-===//
//
// The sm_90a grouped GEMM kernel is built from parts, along the lines
// CUTLASS 3.x draws:
//   kernel shell  (GroupedMatmulKernel.cpp): signature, set-up, producer and
//                 consumer roles, the persistent work loop;
//   tile scheduler (TileScheduler.cpp): which expert tile a work item is;
//   pipeline      (Pipeline.cpp): TMA loads into stages behind mbarriers;
//   mainloop      (Mainloop*.cpp): one per operand format, a pass's K loop;
//   epilogue      (Epilogue*.cpp): the accumulator to memory, with the
//                 per-value fusion (bias, gated activation, row scale) in
//                 EpilogueFusion.cpp;
//   fragment      (Fragment.h): where a thread's accumulator values lie.
// Every part reads the kernel's state from one GemmKernel and emits at the
// builder it is given.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONVERSION_MOETONVGPU_SM90GEMM_GEMMKERNEL_H
#define MOE_CONVERSION_MOETONVGPU_SM90GEMM_GEMMKERNEL_H

#include "../GroupedMatmulKernel.h"
#include "../TileScheduler.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

#include <memory>

namespace mlir::moe::sm90 {

/// Columns of the bf16 staging tile each warpgroup's epilogue goes through.
inline constexpr int64_t kStagingColumns = 64;
inline constexpr int64_t kStagingBytes = 64 * kStagingColumns * 2;

inline constexpr int64_t kNMajorChunk = GroupedMatmulTile::kNMajorChunk;

/// Types and constants of one kernel, derived from its tile shape.
struct KernelTypes {
  gpu::AddressSpaceAttr smem;
  nvgpu::TensorMapDescriptorType rowsMap, weightsMap, outMap;
  MemRefType rowsTile, rowsSliceTile, weightsLoadTile, weightsTile, outTile,
      stagingTile, activationTile, sharedBytes;
  nvgpu::MBarrierGroupType barriers;
  nvgpu::WarpgroupAccumulatorType accumulator;
  /// Widened MXFP8: a 64-column bf16 half of the token rows of a warpgroup
  /// and of the weights, their k16 wgmma descriptors, and tensor map types
  /// that only tell the descriptors the 128-byte swizzle.
  MemRefType wideRowsSlice, wideWeights;
  nvgpu::WarpgroupMatrixDescriptorType wideADesc, wideBDesc;
  nvgpu::TensorMapDescriptorType wideRowsMap, wideWeightsMap;
  /// The registers of one wgmma's result, {f32 x accumulator columns / 2}.
  LLVM::LLVMStructType products;
  nvgpu::WarpgroupMatrixDescriptorType mmaADesc, mmaBDesc;

  KernelTypes(MLIRContext *ctx, const GroupedMatmulTile &t);
};

/// What every part of one kernel reads: its tile, its arguments, the
/// launch-wide values the shell computes, and the work item in flight.
struct GemmKernel {
  GemmKernel(ImplicitLocOpBuilder &b, const GroupedMatmulTile &t)
      : b(b), t(t), ctx(b.getContext()), ty(ctx, t) {}

  /// The consumers' builder: the shell moves it through the work loop.
  ImplicitLocOpBuilder &b;
  const GroupedMatmulTile &t;
  MLIRContext *ctx;
  KernelTypes ty;

  // Arguments (null where the tile has none).
  Value rowsMapPtr, weightsMapPtr, offsets, out, rowsScales, weightsScales,
      outScales, rowScales, biases, actInput, outMapPtr;

  // Launch-wide values.
  Value tid, warpgroup, rank, leader, smem, barriers, rowsMap, weightsMap,
      outMap;
  /// Which 64 rows of the item this consumer warpgroup multiplies (its
  /// index; ping-pong: 0, its item is its own, rows 64.. too at 128 rows).
  Value rowGroup;
  /// smem's `.shared::cta` byte address (i64), for descriptors built here
  /// (N-major weights only; null otherwise).
  Value smemAddress;
  Value numRows, numCols, numK, numSteps;
  int64_t threads = 0, cluster = 1, tileCols = 0, rowsBytes = 0, stageBytes = 0;
  bool specialized = false;

  // The work item the consumers are at, and the pipeline steps of the
  // items this CTA did before it (stage and mbarrier phase continue).
  WorkItem current;
  Value stepBase;

  // The pipeline (Pipeline.cpp).

  /// Frees stages for refills: a CTA barrier, or a cluster barrier when the
  /// peer's multicast refills this CTA's stages too.
  void syncStages(ImplicitLocOpBuilder &nb) const;
  /// A barrier of this thread's warpgroup only (named barrier 1 + its
  /// index; 0 is the CTA's).
  void syncWarpgroup(ImplicitLocOpBuilder &nb) const;
  /// A pipeline step's stage (step % stages) or round (step / stages).
  Value stageDiv(ImplicitLocOpBuilder &nb, Value step, bool round) const;
  Value stageOf(ImplicitLocOpBuilder &nb, Value step) const {
    return stageDiv(nb, step, /*round=*/false);
  }
  /// Waits until pipeline step `step`'s loads have landed in its stage.
  void waitLoaded(ImplicitLocOpBuilder &nb, Value step) const;
  /// Warp-specialized: this consumer thread is done with pipeline step
  /// `step`'s stage (its wgmma retired).
  void releaseStage(ImplicitLocOpBuilder &nb, Value step) const;
  /// Ping-pong: this consumer warpgroup waits for its turn to run the
  /// current item's mainloop, and after its last stage wait gives the turn
  /// to the other one.
  void waitTurn(ImplicitLocOpBuilder &nb) const;
  void passTurn(ImplicitLocOpBuilder &nb) const;
  /// The leader loads step `itemStep` of `w` (K step itemStep % numK of
  /// pass itemStep / numK) into `stage`.
  void issueLoad(ImplicitLocOpBuilder &nb, const WorkItem &w, Value stage,
                 Value itemStep) const;
  /// The first `stages` steps of `w`, pipeline steps from `base` on.
  void issuePrologue(ImplicitLocOpBuilder &nb, const WorkItem &w, Value base,
                     Value active) const;
};

/// The wgmma descriptor (as `type`) of an M- or N-major operand at byte
/// `offset` of shared memory (`smemAddress`, i64), stored as boxes of 64
/// columns x `rows` K rows (WgmmaDescriptor.h).
Value nMajorDescriptor(ImplicitLocOpBuilder &nb, Value smemAddress,
                       Value offset, int64_t rows, Type type);

/// Columns [kk, kk + width) of the first `rows` rows of a K-major tile: a
/// wgmma operand.
Value kSlice(ImplicitLocOpBuilder &nb, Value tile, int64_t rows, int64_t kk,
             int64_t width);

/// The collective mainloop of one operand format: the K loop of a work
/// item's pass into the f32 accumulator, and what a warp-specialized
/// producer stages besides the TMA loads.
class GemmMainloop {
public:
  explicit GemmMainloop(GemmKernel &k) : k(k) {}
  virtual ~GemmMainloop() = default;

  /// Launch-wide set-up, emitted at k.b before the work loop.
  virtual void setUp() {}
  /// Emits at k.b the K loop of pass `pass` of k.current (output columns
  /// col0 + pass * tileCols); returns the accumulators, one per 64 rows the
  /// warpgroup holds (GroupedMatmulTile::rowGroups).
  virtual SmallVector<Value, 2> runPass(Value pass) = 0;
  /// Warp-specialized producer thread `loader` (of 128), per pipeline step:
  /// what it loads for item step `itemStep` of `w` while the stage drains,
  /// and publishes into the stage once the loads are issued.
  virtual SmallVector<Value> producerLoad(ImplicitLocOpBuilder &nb,
                                          const WorkItem &w, Value itemStep,
                                          Value loader) {
    return {};
  }
  virtual void producerPublish(ImplicitLocOpBuilder &nb, ArrayRef<Value> loaded,
                               Value stage, Value loader) {}

protected:
  GemmKernel &k;
};

/// The mainloop of k.t's operand format (Mainloop*.cpp).
std::unique_ptr<GemmMainloop> makeBF16Mainloop(GemmKernel &k);
std::unique_ptr<GemmMainloop> makeBlockFP8Mainloop(GemmKernel &k);
std::unique_ptr<GemmMainloop> makeMXFP8Mainloop(GemmKernel &k);
std::unique_ptr<GemmMainloop> makeWidenedMXFP8Mainloop(GemmKernel &k);

/// What an epilogue needs of the item after the current one: where its
/// first loads go once the stages are free.
struct NextItem {
  WorkItem item;
  Value stepBase, active;
};

/// An epilogue: the current item's passes (through the mainloop) and their
/// accumulators to memory, through the per-value fusion of EpilogueFusion.
class GemmEpilogue {
public:
  explicit GemmEpilogue(GemmKernel &k) : k(k) {}
  virtual ~GemmEpilogue() = default;

  /// Emits at k.b the current item's passes and their stores (rows
  /// [row0, row0 + rowsHere) of the tile are the expert's), and the next
  /// item's first loads as soon as the stages are free.
  virtual void emit(GemmMainloop &mainloop, const NextItem &next,
                    Value rowsHere) = 0;
  /// Emits at k.b, after the consumers' last item, what must complete
  /// before the CTA exits.
  virtual void finish() {}

protected:
  GemmKernel &k;
};

/// bf16 rows through a staging tile per warpgroup (EpilogueStore.cpp).
std::unique_ptr<GemmEpilogue> makeStagedStoreEpilogue(GemmKernel &k);
/// Swap-AB's out^T through an f32 tile (EpilogueSwapAB.cpp).
std::unique_ptr<GemmEpilogue> makeTransposedStoreEpilogue(GemmKernel &k);
/// e4m3 rows and their [1, 128] group scales (EpilogueQuantize.cpp).
std::unique_ptr<GemmEpilogue> makeQuantizeEpilogue(GemmKernel &k);

/// The per-value epilogue fusion (EpilogueFusion.cpp): one f32 output
/// value from its accumulator value `v` (and, gated, its up partner): +
/// bias, the gated activation, * weight. Absent parts are null.
Value fuseEpilogueValue(ImplicitLocOpBuilder &b, const GroupedMatmulTile &t,
                        Value v, Value up, Value bias, Value upBias,
                        Value weight);
/// biases[expert, column] in f32; column is clamped below `columns` (values
/// of columns past N are computed but never stored).
Value loadBias(ImplicitLocOpBuilder &b, Value biases, Value expert,
               Value column, Value columns);
/// The bias of output column `column` of the current expert and, gated,
/// of its up partner N further (null where there is none).
std::pair<Value, Value> loadBiasPair(ImplicitLocOpBuilder &b,
                                     const GemmKernel &k, Value column);

} // namespace mlir::moe::sm90

#endif // MOE_CONVERSION_MOETONVGPU_SM90GEMM_GEMMKERNEL_H
