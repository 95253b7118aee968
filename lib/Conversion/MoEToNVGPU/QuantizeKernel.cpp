//===- QuantizeKernel.cpp - the moe.quantize kernel ----------------------===//
//
// Block-scaled FP8 quantization (moe.quantize) on sm_90a, bit-exact with the
// CPU lowering. Per block:
//
// - amax: an unsigned max of the elements' f32 bits with the sign cleared.
//   On non-negative floats that order is the float order, and every NaN is
//   above infinity, so the result is the CPU's arith.maximumf of |x| (NaN
//   when any element is NaN) in any reduction order, without floating-point
//   compares (no flush-to-zero concern for subnormal inputs).
// - the scale and the divisor it stands for: mxScaleCode + decodeE8M0 (MX)
//   or blockScaleF32 (f32 scales), the emitters the CPU lowering uses.
// - every element divided by the divisor (arith.divf: PTX div.rn.f32, IEEE,
//   subnormals kept; nothing here enables fast math or flush-to-zero) and
//   encoded: e4m3 two at a time by the hardware's cvt.rn.satfinite.e4m3x2.f32
//   (round to nearest even, saturating to 448, NaN to 0x7F: what encodeFP8
//   computes, at one instruction per pair instead of about 20 integer
//   operations per element, which made the kernel compute-bound); e5m2 by
//   encodeFP8, whose rounding is integer arithmetic but for one
//   round-to-even of the subnormal range (the llvm.roundeven.f32 intrinsic
//   here: cvt.rni.f32.f32). test/device/quantize.py checks both bit for bit
//   against test/lib/moe_ref.py.
//
// bf16 elements widen by a shift (exact). A thread converts 8 consecutive
// elements at a time: one 16-byte load (two for f32), 8 codes stored as one
// 8-byte store.
//
// - [1, B] blocks (B = 8..256): the tensor is a flat array of blocks. B/8
//   lanes of a warp share a block and combine their maxima with xor
//   shuffles; each thread takes kQuantizeUnroll chunks per step (their loads
//   in flight together), a warp 32 consecutive chunks per unrolled part, so
//   the lanes of a block are aligned. Grid-stride over the tensor; the loop
//   bound is uniform per warp, so the shuffles always have the whole warp.
// - [128, 128] blocks: one CTA per block (grid-stride): 64 elements per
//   thread (8 chunks, 16 rows apart), a warp reduction, then the 8 warps'
//   maxima through shared memory.
//
// docs/runtime-contract.md §3.8 has the ABI (quantize.v1).
//
//===----------------------------------------------------------------------===//

#include "QuantizeKernel.h"
#include "KernelUtils.h"
#include "MoE/Utils/FP8Codec.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::moe;

std::string QuantizeKernelSpec::kernelName() const {
  return llvm::formatv("moe_{0}_{1}_{2}_{3}_{4}x{5}",
                       roundTrip ? "fake_quantize" : "quantize",
                       bf16Input ? "bf16" : "f32", e5m2 ? "e5m2" : "e4m3",
                       mx ? "e8m0" : "f32", blockRows, blockCols)
      .str();
}

Type QuantizeKernelSpec::elementType(MLIRContext *context) const {
  if (e5m2)
    return Float8E5M2Type::get(context);
  return Float8E4M3FNType::get(context);
}

std::string mlir::moe::unsupportedQuantizeBlock(int64_t blockRows,
                                                int64_t blockCols) {
  if (blockRows == 1 && blockCols >= kQuantizeChunk && blockCols <= 256 &&
      llvm::isPowerOf2_64(blockCols))
    return "";
  if (blockRows == 128 && blockCols == 128)
    return "";
  return "blocks of [1, B] with B one of 8, 16, 32, 64, 128, 256 (a block "
         "within a warp) and of [128, 128] (a block per CTA) are "
         "implemented, got [" +
         std::to_string(blockRows) + ", " + std::to_string(blockCols) + "]";
}

namespace {

/// Side of a [128, 128] block.
constexpr int64_t kTile = 128;
constexpr int64_t kWarps = kQuantizeThreads / 32;

} // namespace

SmallVector<Value> mlir::moe::bf16ChunkBits(ImplicitLocOpBuilder &b,
                                            Value chunk) {
  Type i32 = b.getI32Type();
  Value words = vector::BitCastOp::create(
      b, VectorType::get({kQuantizeChunk / 2}, i32), chunk);
  SmallVector<Value> bits;
  for (int64_t j = 0; j < kQuantizeChunk / 2; ++j) {
    Value word = vector::ExtractOp::create(b, words, j);
    // Little endian: element 2j is the low half of word j.
    bits.push_back(arith::ShLIOp::create(b, word, i32Constant(b, 16)));
    bits.push_back(arith::AndIOp::create(
        b, word, i32Constant(b, static_cast<int32_t>(0xFFFF0000u))));
  }
  return bits;
}

SmallVector<Value> mlir::moe::loadChunkBits(ImplicitLocOpBuilder &b,
                                            Value input, ValueRange indices,
                                            bool bf16) {
  Type i32 = b.getI32Type();
  if (bf16)
    return bf16ChunkBits(
        b, vector::LoadOp::create(
               b, VectorType::get({kQuantizeChunk}, b.getBF16Type()), input,
               indices, /*nontemporal=*/false, llvm::Align(16)));
  SmallVector<Value> bits;
  Value chunk = vector::LoadOp::create(
      b, VectorType::get({kQuantizeChunk}, b.getF32Type()), input, indices,
      /*nontemporal=*/false, llvm::Align(16));
  Value words = arith::BitcastOp::create(
      b, VectorType::get({kQuantizeChunk}, i32), chunk);
  for (int64_t j = 0; j < kQuantizeChunk; ++j)
    bits.push_back(vector::ExtractOp::create(b, words, j));
  return bits;
}

namespace {

/// The largest |x| of `bits` (f32 bits), as bits: see the file comment.
Value magnitudeMax(ImplicitLocOpBuilder &b, ArrayRef<Value> bits) {
  Value result;
  for (Value x : bits) {
    Value magnitude =
        arith::AndIOp::create(b, x, i32Constant(b, 0x7FFFFFFF)).getResult();
    result = result ? arith::MaxUIOp::create(b, result, magnitude).getResult()
                    : magnitude;
  }
  return result;
}

/// The largest |x| (as bits) of a block whose elements `bits` are spread
/// over `lanes` aligned consecutive lanes: each lane's, then xor shuffles.
Value blockAmax(ImplicitLocOpBuilder &b, ArrayRef<Value> bits, int64_t lanes) {
  Value amax = magnitudeMax(b, bits);
  for (int64_t d = lanes / 2; d >= 1; d /= 2)
    amax = arith::MaxUIOp::create(b, amax, shuffleXor(b, amax, d));
  return amax;
}

/// A block's stored scale (f32, or the E8M0 code as i8) and the f32 its
/// elements are divided by.
struct BlockScale {
  Value stored, divisor;
};

BlockScale blockScale(ImplicitLocOpBuilder &b, Value amaxBits, bool mx,
                      Type fp8Type) {
  Value amax = arith::BitcastOp::create(b, b.getF32Type(), amaxBits);
  if (mx) {
    Value code = mxScaleCode(b, amax, fp8Type);
    return {code, decodeE8M0(b, code)};
  }
  Value scale = blockScaleF32(b, amax, fp8Type);
  return {scale, scale};
}

/// The codes of x / divisor for the 8 elements `bits`, 4 to a word (element
/// 4w + j in byte j of word w): vector<2xi32>.
Value encodeChunk(ImplicitLocOpBuilder &b, ArrayRef<Value> bits, Value divisor,
                  Type fp8Type) {
  Type i32 = b.getI32Type();
  auto quotient = [&](int64_t at) -> Value {
    Value x = arith::BitcastOp::create(b, b.getF32Type(), bits[at]);
    return arith::DivFOp::create(b, x, divisor);
  };
  // Element `at` and the next as 16 bits, `at` in the low byte.
  auto encodePair = [&](int64_t at) -> Value {
    if (isa<Float8E4M3FNType>(fp8Type))
      return NVVM::ConvertF32x2ToF8x2Op::create(
          b, b.getI16Type(), quotient(at + 1), quotient(at),
          NVVM::FPRoundingModeAttr::get(b.getContext(),
                                        NVVM::FPRoundingMode::RN),
          NVVM::SaturationModeAttr::get(b.getContext(),
                                        NVVM::SaturationMode::SATFINITE),
          b.getBoolAttr(false), TypeAttr::get(fp8Type));
    Value pair;
    for (int64_t j = 0; j < 2; ++j) {
      Value code = encodeFP8(b, quotient(at + j), fp8Type,
                             /*llvmRoundEven=*/true);
      Value byte = arith::ExtUIOp::create(b, b.getI16Type(), code);
      pair = j ? arith::OrIOp::create(
                     b, pair,
                     arith::ShLIOp::create(
                         b, byte,
                         arith::ConstantIntOp::create(b, b.getI16Type(), 8)))
                     .getResult()
               : byte;
    }
    return pair;
  };
  SmallVector<Value> words;
  for (int64_t w = 0; w < kQuantizeChunk / 4; ++w) {
    Value low = arith::ExtUIOp::create(b, i32, encodePair(4 * w));
    Value high = arith::ExtUIOp::create(b, i32, encodePair(4 * w + 2));
    words.push_back(arith::OrIOp::create(
        b, low, arith::ShLIOp::create(b, high, i32Constant(b, 16))));
  }
  return vector::FromElementsOp::create(
      b, VectorType::get({kQuantizeChunk / 4}, i32), words);
}

/// The 8 codes `packed` (encodeChunk's) decoded, times `scale` in f32 and
/// rounded to `type` (bf16 or f32): moe.dequantize's value of each. Pairs
/// decode by cvt.f16x2.{e4m3,e5m2}x2, exact (every code is an f16).
Value decodeChunk(ImplicitLocOpBuilder &b, Value packed, Value scale,
                  Type fp8Type, Type type) {
  Type i8Pair = VectorType::get({2}, b.getI8Type());
  Type halfPair = VectorType::get({2}, b.getF16Type());
  SmallVector<Value> values;
  for (int64_t w = 0; w < kQuantizeChunk / 4; ++w) {
    Value bytes = vector::BitCastOp::create(
        b, VectorType::get({4}, b.getI8Type()),
        vector::FromElementsOp::create(
            b, VectorType::get({1}, b.getI32Type()),
            ValueRange{vector::ExtractOp::create(b, packed, w)}));
    for (int64_t pair = 0; pair < 2; ++pair) {
      Value codes = vector::FromElementsOp::create(
          b, i8Pair,
          ValueRange{vector::ExtractOp::create(b, bytes, 2 * pair),
                     vector::ExtractOp::create(b, bytes, 2 * pair + 1)});
      Value halves = NVVM::ConvertF8x2ToF16x2Op::create(
          b, halfPair, codes, b.getBoolAttr(false), TypeAttr::get(fp8Type));
      for (int64_t j = 0; j < 2; ++j) {
        Value half = vector::ExtractOp::create(b, halves, j);
        Value x = arith::ExtFOp::create(b, b.getF32Type(), half);
        Value product = arith::MulFOp::create(b, x, scale);
        values.push_back(
            type.isF32()
                ? product
                : arith::TruncFOp::create(b, type, product).getResult());
      }
    }
  }
  return vector::FromElementsOp::create(
      b, VectorType::get({kQuantizeChunk}, type), values);
}

/// Stores the 8 values `chunk` at `index` of the 1-D `out` (16-byte
/// aligned).
void storeChunk(ImplicitLocOpBuilder &b, Value chunk, Value out, Value index) {
  vector::StoreOp::create(b, chunk, out, ValueRange{index},
                          /*nontemporal=*/false, llvm::Align(16));
}

/// A dense [M, C] memref as the 1-D memref of its M * C elements.
Value flatten(ImplicitLocOpBuilder &b, Value memref) {
  return memref::CollapseShapeOp::create(
      b, memref, ArrayRef<ReassociationIndices>{ReassociationIndices{0, 1}});
}

/// The codes `values` (memref<?x?xi8>, dense) as memref<?xi32> of their
/// M * C / 4 words (C is a multiple of 8).
Value codeWords(ImplicitLocOpBuilder &b, Value values) {
  IndexMath m{b};
  Value bytes = flatten(b, values);
  Value words = arith::DivUIOp::create(
      b, memref::DimOp::create(b, bytes, m.c(0)).getResult(), m.c(4));
  return memref::ViewOp::create(
      b, MemRefType::get({ShapedType::kDynamic}, b.getI32Type()), bytes, m.c(0),
      ValueRange{words});
}

void storeWords(ImplicitLocOpBuilder &b, Value packed, Value words,
                Value index) {
  vector::StoreOp::create(b, packed, words, ValueRange{index},
                          /*nontemporal=*/false, llvm::Align(8));
}

/// [1, B] blocks: B/8 lanes per block (see the file comment).
void buildRowBlocks(ImplicitLocOpBuilder &b, const QuantizeKernelSpec &spec,
                    Type fp8Type, Value input, Value values, Value scales) {
  IndexMath m{b};
  const int64_t lanesPerBlock = spec.blockCols / kQuantizeChunk;
  const int64_t warpStep = 32 * kQuantizeUnroll;
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value lane = arith::RemUIOp::create(b, tid, m.c(32));
  Value warp = arith::DivUIOp::create(b, tid, m.c(32));
  Value flatInput = flatten(b, input);
  // A round trip stores values of the input's type to `values`, no scales.
  Value flatScales = spec.roundTrip ? Value() : flatten(b, scales);
  Value words = spec.roundTrip ? flatten(b, values) : codeWords(b, values);
  Value chunks = arith::DivUIOp::create(
      b, memref::DimOp::create(b, flatInput, m.c(0)).getResult(),
      m.c(kQuantizeChunk));
  Value first = m.mul(
      m.add(m.mul(gpu::BlockIdOp::create(b, gpu::Dimension::x), m.c(kWarps)),
            warp),
      m.c(warpStep));
  Value step = m.mul(gpu::GridDimOp::create(b, gpu::Dimension::x),
                     m.c(kWarps * warpStep));
  Value isLeader =
      lanesPerBlock == 1
          ? Value()
          : arith::CmpIOp::create(
                b, arith::CmpIPredicate::eq,
                arith::RemUIOp::create(b, lane, m.c(lanesPerBlock)), m.c(0));
  scf::ForOp::create(
      b, first, chunks, step, ValueRange{},
      [&](OpBuilder &nested, Location loc, Value base, ValueRange) {
        ImplicitLocOpBuilder nb(loc, nested);
        IndexMath n{nb};
        // All loads first (chunks past the end read chunk 0 and store
        // nothing: a block's lanes are all in range or all out).
        SmallVector<Value> chunk, valid;
        SmallVector<SmallVector<Value>> bits;
        for (int64_t u = 0; u < kQuantizeUnroll; ++u) {
          chunk.push_back(n.add(base, n.add(n.c(32 * u), lane)));
          valid.push_back(n.lt(chunk[u], chunks));
          Value safe = arith::SelectOp::create(nb, valid[u], chunk[u], n.c(0));
          bits.push_back(loadChunkBits(
              nb, flatInput, ValueRange{n.mul(safe, n.c(8))}, spec.bf16Input));
        }
        for (int64_t u = 0; u < kQuantizeUnroll; ++u) {
          Value amax = blockAmax(nb, bits[u], lanesPerBlock);
          BlockScale scale = blockScale(nb, amax, spec.mx, fp8Type);
          Value packed = encodeChunk(nb, bits[u], scale.divisor, fp8Type);
          ifThen(nb, valid[u], [&](ImplicitLocOpBuilder &sb) {
            IndexMath s{sb};
            if (spec.roundTrip) {
              storeChunk(sb,
                         decodeChunk(sb, packed, scale.divisor, fp8Type,
                                     getElementTypeOrSelf(input.getType())),
                         words, s.mul(chunk[u], s.c(kQuantizeChunk)));
              return;
            }
            storeWords(sb, packed, words, s.mul(chunk[u], s.c(2)));
            auto storeScale = [&](ImplicitLocOpBuilder &lb) {
              IndexMath l{lb};
              memref::StoreOp::create(lb, scale.stored, flatScales,
                                      ValueRange{arith::DivUIOp::create(
                                          lb, chunk[u], l.c(lanesPerBlock))});
            };
            if (isLeader)
              ifThen(sb, isLeader, storeScale);
            else
              storeScale(sb);
          });
        }
        scf::YieldOp::create(nb);
      });
}

/// [128, 128] blocks: one CTA per block (see the file comment); `partial`
/// is the shared memory of the warps' maxima.
void buildTileBlocks(ImplicitLocOpBuilder &b, const QuantizeKernelSpec &spec,
                     Type fp8Type, Value input, Value values, Value scales,
                     Value partial) {
  IndexMath m{b};
  constexpr int64_t kChunksPerRow = kTile / kQuantizeChunk;          // 16
  constexpr int64_t kRowsPerPass = kQuantizeThreads / kChunksPerRow; // 16
  constexpr int64_t kPasses = kTile / kRowsPerPass;                  // 8
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value lane = arith::RemUIOp::create(b, tid, m.c(32));
  Value warp = arith::DivUIOp::create(b, tid, m.c(32));
  Value numRows = memref::DimOp::create(b, input, m.c(0));
  Value columns = memref::DimOp::create(b, input, m.c(1));
  Value blocksPerRow = arith::DivUIOp::create(b, columns, m.c(kTile));
  Value numBlocks =
      m.mul(arith::DivUIOp::create(b, numRows, m.c(kTile)), blocksPerRow);
  Value words = spec.roundTrip ? Value() : codeWords(b, values);
  Value wordsPerRow = arith::DivUIOp::create(b, columns, m.c(4));
  Value rowInTile = arith::DivUIOp::create(b, tid, m.c(kChunksPerRow));
  Value columnInTile = m.mul(arith::RemUIOp::create(b, tid, m.c(kChunksPerRow)),
                             m.c(kQuantizeChunk));
  Value isLane0 =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, m.c(0));
  Value isThread0 =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tid, m.c(0));
  scf::ForOp::create(
      b, gpu::BlockIdOp::create(b, gpu::Dimension::x), numBlocks,
      gpu::GridDimOp::create(b, gpu::Dimension::x), ValueRange{},
      [&](OpBuilder &nested, Location loc, Value block, ValueRange) {
        ImplicitLocOpBuilder nb(loc, nested);
        IndexMath n{nb};
        Value blockRow = arith::DivUIOp::create(nb, block, blocksPerRow);
        Value blockColumn = arith::RemUIOp::create(nb, block, blocksPerRow);
        Value column = n.add(n.mul(blockColumn, n.c(kTile)), columnInTile);
        Value firstRow = n.add(n.mul(blockRow, n.c(kTile)), rowInTile);
        SmallVector<Value> row;
        SmallVector<SmallVector<Value>> bits;
        SmallVector<Value> all;
        for (int64_t i = 0; i < kPasses; ++i) {
          row.push_back(n.add(firstRow, n.c(kRowsPerPass * i)));
          bits.push_back(loadChunkBits(nb, input, ValueRange{row[i], column},
                                       spec.bf16Input));
          all.append(bits[i]);
        }
        Value amax = magnitudeMax(nb, all);
        for (int32_t d = 16; d >= 1; d /= 2)
          amax = arith::MaxUIOp::create(nb, amax, shuffleXor(nb, amax, d));
        ifThen(nb, isLane0, [&](ImplicitLocOpBuilder &sb) {
          memref::StoreOp::create(sb, amax, partial, ValueRange{warp});
        });
        gpu::BarrierOp::create(nb);
        Value blockMax;
        for (int64_t w = 0; w < kWarps; ++w) {
          Value v = n.load(partial, ValueRange{n.c(w)});
          blockMax = blockMax
                         ? arith::MaxUIOp::create(nb, blockMax, v).getResult()
                         : v;
        }
        // Every warp has read the maxima before any writes the next
        // block's.
        gpu::BarrierOp::create(nb);
        BlockScale scale = blockScale(nb, blockMax, spec.mx, fp8Type);
        for (int64_t i = 0; i < kPasses; ++i) {
          Value packed = encodeChunk(nb, bits[i], scale.divisor, fp8Type);
          if (spec.roundTrip) {
            vector::StoreOp::create(
                nb,
                decodeChunk(nb, packed, scale.divisor, fp8Type,
                            getElementTypeOrSelf(input.getType())),
                values, ValueRange{row[i], column}, /*nontemporal=*/false,
                llvm::Align(16));
            continue;
          }
          Value index = n.add(n.mul(row[i], wordsPerRow),
                              arith::DivUIOp::create(nb, column, n.c(4)));
          storeWords(nb, packed, words, index);
        }
        if (!spec.roundTrip)
          ifThen(nb, isThread0, [&](ImplicitLocOpBuilder &sb) {
            memref::StoreOp::create(sb, scale.stored, scales,
                                    ValueRange{blockRow, blockColumn});
          });
        scf::YieldOp::create(nb);
      });
}

} // namespace

QuantizedChunk mlir::moe::quantizeChunkE4M3(ImplicitLocOpBuilder &b,
                                            ArrayRef<Value> bits,
                                            int64_t lanesPerBlock) {
  Type fp8Type = Float8E4M3FNType::get(b.getContext());
  BlockScale scale =
      blockScale(b, blockAmax(b, bits, lanesPerBlock), /*mx=*/false, fp8Type);
  return {encodeChunk(b, bits, scale.divisor, fp8Type), scale.stored};
}

std::string mlir::moe::mxRoundTripName(Type fp8Type) {
  return isa<Float8E5M2Type>(fp8Type) ? "mxfp8_e5m2" : "mxfp8_e4m3";
}

std::string mlir::moe::mxRoundTripSuffix(Type fp8Type) {
  return isa<Float8E5M2Type>(fp8Type) ? "_mxe5m2rt" : "_mxe4m3rt";
}

/// The MXFP8 round trip of the 8 elements `bits` of a lane, its block's
/// amax taken over `amaxBits` of each of `lanes` lanes.
static Value roundTripBitsMX(ImplicitLocOpBuilder &b, ArrayRef<Value> bits,
                             ArrayRef<Value> amaxBits, int64_t lanes,
                             Type fp8Type) {
  BlockScale scale =
      blockScale(b, blockAmax(b, amaxBits, lanes), /*mx=*/true, fp8Type);
  return decodeChunk(b, encodeChunk(b, bits, scale.divisor, fp8Type),
                     scale.divisor, fp8Type, b.getBF16Type());
}

Value mlir::moe::roundTripChunkMX(ImplicitLocOpBuilder &b, Value chunk,
                                  int64_t lanesPerBlock, Type fp8Type) {
  SmallVector<Value> bits = bf16ChunkBits(b, chunk);
  return roundTripBitsMX(b, bits, bits, lanesPerBlock, fp8Type);
}

Value mlir::moe::roundTripValueMX(ImplicitLocOpBuilder &b, Value value,
                                  int64_t lanes, Type fp8Type) {
  // The lane's value as a chunk of 8 copies, its amax the value's own.
  SmallVector<Value> bits = bf16ChunkBits(
      b, vector::BroadcastOp::create(
             b, VectorType::get({kQuantizeChunk}, b.getBF16Type()), value));
  return vector::ExtractOp::create(
      b, roundTripBitsMX(b, bits, ArrayRef(bits).take_front(1), lanes, fp8Type),
      0);
}

gpu::GPUFuncOp mlir::moe::buildQuantizeKernel(OpBuilder &builder, Location loc,
                                              gpu::GPUModuleOp module,
                                              const QuantizeKernelSpec &spec) {
  assert(unsupportedQuantizeBlock(spec.blockRows, spec.blockCols).empty() &&
         "unsupported quantize block");
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&module.getBodyRegion().front());
  ImplicitLocOpBuilder b(loc, builder);
  Type f32 = b.getF32Type(), i8 = b.getI8Type();
  auto dynamic2D = [](Type element) {
    return MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                           element);
  };
  Type inputType = spec.bf16Input ? Type(b.getBF16Type()) : f32;
  SmallVector<Type> args{dynamic2D(inputType), dynamic2D(i8),
                         dynamic2D(spec.mx ? i8 : f32)};
  if (spec.roundTrip)
    args = {dynamic2D(inputType), dynamic2D(inputType)};
  const bool tiles = spec.blockRows > 1;
  SmallVector<Type> shared;
  if (tiles)
    shared.push_back(
        MemRefType::get({kWarps}, b.getI32Type(), MemRefLayoutAttrInterface(),
                        gpu::AddressSpaceAttr::get(
                            b.getContext(), gpu::AddressSpace::Workgroup)));
  auto func = gpu::GPUFuncOp::create(b, spec.kernelName(),
                                     b.getFunctionType(args, {}), shared);
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({int32_t(kQuantizeThreads), 1, 1}));
  b.setInsertionPointToStart(&func.getBody().front());
  // Contract §3.6: wait for the producer of the input; the next kernel may
  // launch now (its CTAs wait for this one in turn).
  waitForPreviousKernel(b);
  Type fp8Type = spec.elementType(b.getContext());
  Value input = func.getArgument(0), values = func.getArgument(1),
        scales = spec.roundTrip ? Value() : func.getArgument(2);
  if (tiles)
    buildTileBlocks(b, spec, fp8Type, input, values, scales,
                    func.getWorkgroupAttributions()[0]);
  else
    buildRowBlocks(b, spec, fp8Type, input, values, scales);
  gpu::ReturnOp::create(b);
  return func;
}
