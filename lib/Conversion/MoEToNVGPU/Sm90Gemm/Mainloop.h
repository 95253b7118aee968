//===- Mainloop.h - the pipelined K loop of the sm_90a grouped GEMM -*- C++
//-*-===//
//
// The K loop the bf16, block-FP8 and MXFP8 mainloops share: each K step
// waits for its stage, multiplies it (the format's part) and frees the
// stage for a refill (a CTA, cluster or warpgroup barrier and the leader's
// loads, or warp-specialized, an arrival on its "empty" mbarrier). A new
// operand layout (transposed B, ragged K) is a new PipelinedMainloop.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONVERSION_MOETONVGPU_SM90GEMM_MAINLOOP_H
#define MOE_CONVERSION_MOETONVGPU_SM90GEMM_MAINLOOP_H

#include "GemmKernel.h"

namespace mlir::moe::sm90 {

/// One K step of a pass, as the K loop hands it to the format.
struct KStep {
  Value kStep;                 // the K step within the pass
  Value stage;                 // the stage its operands are in
  Value colBase;               // the pass's first output column
  Value rowsTile, weightsTile; // the stage's tiles (this warpgroup's rows)
  ArrayRef<Value> prefetched;  // what prefetch() loaded for it
};

class PipelinedMainloop : public GemmMainloop {
public:
  using GemmMainloop::GemmMainloop;
  SmallVector<Value, 2> runPass(Value pass) final;

protected:
  /// Before a pass's K loop, at k.b.
  virtual void beginPass(Value colBase) {}
  /// At the top of K step `kStep`, before its wait.
  virtual SmallVector<Value> prefetch(ImplicitLocOpBuilder &nb, Value kStep,
                                      Value colBase) {
    return {};
  }
  /// The step's products added into `acc`; returns the new accumulator.
  virtual Value multiply(ImplicitLocOpBuilder &nb, const KStep &step,
                         Value acc) = 0;

  /// The wgmma descriptors of the 32 bytes of K at kk (swap-AB: the
  /// weights are WGMMA's 64-row A operand).
  std::pair<Value, Value> descriptorsAt(ImplicitLocOpBuilder &nb,
                                        const KStep &step, int64_t kk) const;
  /// The B descriptor of N-major weights (WeightsLayout::KN) at K row kk of
  /// the step's stage (WgmmaDescriptor.h).
  Value nMajorWeightsDescriptor(ImplicitLocOpBuilder &nb, const KStep &step,
                                int64_t kk) const;
  /// An accumulator of zeros written before the pass's first wgmma (a
  /// warpgroup's second accumulator; see Mainloop.cpp).
  Value zeroAccumulator(ImplicitLocOpBuilder &b) const;
  /// The step's wgmma, one per 32 bytes of K inside the 128-byte swizzle
  /// atom (nvgpu.warpgroup.mma over a longer K steps K-major B wrongly),
  /// accumulating into `acc`. Each may leave one K step of wgmma (of every
  /// row group) in flight: after the last, the previous step has retired.
  Value multiplyInto(ImplicitLocOpBuilder &nb, const KStep &step,
                     Value acc) const;
};

} // namespace mlir::moe::sm90

#endif // MOE_CONVERSION_MOETONVGPU_SM90GEMM_MAINLOOP_H
