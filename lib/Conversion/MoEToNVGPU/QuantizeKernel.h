//===- QuantizeKernel.h - the moe.quantize kernel ---------------*- C++ -*-===//

#ifndef MOE_CONVERSION_MOETONVGPU_QUANTIZEKERNEL_H
#define MOE_CONVERSION_MOETONVGPU_QUANTIZEKERNEL_H

#include "MoE/Dialect/MoEDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <string>

namespace mlir::moe {

/// Threads per CTA of the quantize kernels: 8 warps.
inline constexpr int64_t kQuantizeThreads = 256;
/// Elements a thread converts at a time: one 16-byte vector of bf16 (two of
/// f32), whose 8 codes it stores as 8 bytes.
inline constexpr int64_t kQuantizeChunk = 8;
/// Chunks a thread of a [1, B] kernel loads before it reduces and stores
/// them (four 16-byte loads in flight), so a CTA takes
/// kQuantizeThreads * kQuantizeChunk * kQuantizeUnroll = 8192 elements per
/// grid-stride step (docs/runtime-contract.md §3.8).
inline constexpr int64_t kQuantizeUnroll = 4;

/// What a moe.quantize kernel is built for: the input element type, the FP8
/// element, the scale kind and the block. Blocks are [1, B] with B in {8, 16,
/// 32, 64, 128, 256} (B/8 lanes of a warp per block; MX: [1, 32]) or
/// [128, 128] (one CTA per block).
struct QuantizeKernelSpec {
  bool bf16Input = true; // else f32
  bool e5m2 = false;     // else e4m3 (f8E4M3FN)
  bool mx = false;       // E8M0 scales, else f32
  /// moe.fake_quantize: the dequantized values in the input's type, in
  /// place of the codes and scales.
  bool roundTrip = false;
  int64_t blockRows = 1, blockCols = 32;
  std::string kernelName() const;
  /// The FP8 element type in `context`.
  Type elementType(MLIRContext *context) const;
};

/// Why no quantize kernel implements blocks of [blockRows, blockCols], or an
/// empty string.
std::string unsupportedQuantizeBlock(int64_t blockRows, int64_t blockCols);

/// The f32 bits (i32) of the 8 bf16 (or f32) elements of `input` from
/// `indices` on: one 16-byte load (two for f32), bf16 widened by a shift.
SmallVector<Value> loadChunkBits(ImplicitLocOpBuilder &b, Value input,
                                 ValueRange indices, bool bf16);
/// The f32 bits (i32) of the elements of `chunk`, a vector<8xbf16>.
SmallVector<Value> bf16ChunkBits(ImplicitLocOpBuilder &b, Value chunk);

/// One 8-element chunk of a [1, 8 * lanesPerBlock] block quantized to e4m3
/// with an f32 scale, the block's chunks held by `lanesPerBlock` aligned
/// consecutive lanes (every lane of the warp takes part): the scale of the
/// block and the chunk's 8 codes as vector<2xi32> (element 4w + j in byte j
/// of word w), exactly as the quantize kernel computes them.
struct QuantizedChunk {
  Value codes, scale;
};
QuantizedChunk quantizeChunkE4M3(ImplicitLocOpBuilder &b, ArrayRef<Value> bits,
                                 int64_t lanesPerBlock);

/// The bundle's name of an MXFP8 round trip to `fp8Type` (the `round_trip`
/// key): mxfp8_e4m3 or mxfp8_e5m2; its kernels' name suffix: _mxe4m3rt or
/// _mxe5m2rt.
std::string mxRoundTripName(Type fp8Type);
std::string mxRoundTripSuffix(Type fp8Type);

/// The MXFP8 round trip (moe.fake_quantize with E8M0 scales) of `chunk`, a
/// vector<8xbf16> of a [1, 8 * lanesPerBlock] block whose chunks are held
/// by `lanesPerBlock` aligned consecutive lanes (every lane of the warp
/// takes part), exactly as the round-trip kernel computes it: vector<8xbf16>.
Value roundTripChunkMX(ImplicitLocOpBuilder &b, Value chunk,
                       int64_t lanesPerBlock, Type fp8Type);
/// The same for one bf16 value per lane, `lanes` aligned consecutive lanes
/// holding a block's values.
Value roundTripValueMX(ImplicitLocOpBuilder &b, Value value, int64_t lanes,
                       Type fp8Type);

/// Builds the kernel: (input memref<?x?xT> [M, C], values memref<?x?xi8>
/// [M, C], scales memref<?x?xS> [M/br, C/bc]) with T bf16 or f32 and S f32 or
/// i8 (E8M0 codes), row-major and dense. It computes exactly what the CPU
/// lowering of moe.quantize computes (the same FP8Codec emitters: the
/// integer encode, the scale, the IEEE division of every element by it).
/// A round trip (moe.fake_quantize) is (input, out memref<?x?xT>): each
/// code decoded (exact), times its block's scale in f32, rounded to T, as
/// the CPU lowering of moe.dequantize computes it; out may be input.
gpu::GPUFuncOp buildQuantizeKernel(OpBuilder &builder, Location loc,
                                   gpu::GPUModuleOp module,
                                   const QuantizeKernelSpec &spec);

/// The moe.launch (quantize.v1) of the kernel quantizing `input` with
/// `encoding` (RoutingLaunches.cpp), built into `kernels` on first use;
/// `part` names it inside a fused op.
FailureOr<DictionaryAttr> quantizeLaunch(OpBuilder &builder,
                                         gpu::GPUModuleOp kernels, Location loc,
                                         RankedTensorType input,
                                         BlockScaledEncodingAttr encoding,
                                         StringRef part = "");

/// The moe.launch (planned.v1 of moe.fake_quantize) of the round-trip
/// kernel of `input` and `encoding`; `part` names it inside a fused op.
FailureOr<DictionaryAttr>
fakeQuantizeLaunch(OpBuilder &builder, gpu::GPUModuleOp kernels, Location loc,
                   RankedTensorType input, BlockScaledEncodingAttr encoding,
                   StringRef part = "");

} // namespace mlir::moe

#endif // MOE_CONVERSION_MOETONVGPU_QUANTIZEKERNEL_H
