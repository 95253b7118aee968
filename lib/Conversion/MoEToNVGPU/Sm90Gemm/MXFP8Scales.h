//===- MXFP8Scales.h - MXFP8 scale codes staged in shared memory -*- C++
//-*-===//
//
// MXFP8's rows and weights carry one UE8M0 code per 32 K. The mainloops
// stage the f32 scales of a K step in shared memory: buffer x staging row
// (the tile's tileN weight rows, then its tileM token rows) x block, or,
// warp-specialized, the step's stage x block x staging row (a fragment's
// two adjacent columns are one 8-byte load). Unspecialized, the consumers
// load the next step's codes while this step multiplies, then decode and
// store them into the other buffer before the step's barrier; specialized,
// the producer stages them with the step's loads.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONVERSION_MOETONVGPU_SM90GEMM_MXFP8SCALES_H
#define MOE_CONVERSION_MOETONVGPU_SM90GEMM_MXFP8SCALES_H

#include "GemmKernel.h"

#include "llvm/ADT/DenseMap.h"

namespace mlir::moe::sm90 {

class MXFP8ScaleStaging {
public:
  explicit MXFP8ScaleStaging(GemmKernel &k) : k(k) {}

  /// The staging buffers' view and the code tensors' addresses and word
  /// alignment, at k.b.
  void setUp();
  /// The codes of K step kStep of item `w` (weight rows from colBase) that
  /// loader `loader` of `loaders` stages: [round][block], staging row
  /// loader + round * loaders (rounds past the last row load a clamped one
  /// and store none).
  SmallVector<Value> load(ImplicitLocOpBuilder &nb, const WorkItem &w,
                          Value kStep, Value colBase, Value loader,
                          int64_t loaders) const;
  /// Decodes `codes` (from load()) and stores them into `buffer`.
  void store(ImplicitLocOpBuilder &nb, ArrayRef<Value> codes, Value buffer,
             Value loader, int64_t loaders) const;

  /// The staged scales: see the file comment for the layout.
  Value buffers;
  /// Block-major layout (warp-specialized kernels).
  bool blockMajor = false;

private:
  /// A code tensor's first byte and strides.
  struct CodeTensor {
    Value base;
    SmallVector<Value> strides;
  };
  GemmKernel &k;
  llvm::DenseMap<Value, CodeTensor> codeTensors;
  /// Whether every row of both code tensors starts on a block-count byte
  /// boundary (strides and bases; checked once).
  Value wordsAligned;
};

} // namespace mlir::moe::sm90

#endif // MOE_CONVERSION_MOETONVGPU_SM90GEMM_MXFP8SCALES_H
