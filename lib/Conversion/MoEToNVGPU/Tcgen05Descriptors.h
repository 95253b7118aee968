//===- Tcgen05Descriptors.h - tcgen05 smem and instruction descriptors ----===//
//
// Encoders for the two descriptor words a Blackwell (sm_100a) block-scaled
// `tcgen05.mma` reads at run time:
//   - the 64-bit shared memory matrix descriptor of operands A and B (PTX ISA,
//     "Tensor Core 5th Generation Family Instructions" > "Matrix
//     Descriptors" > "Shared memory descriptor");
//   - the 32-bit instruction descriptor for `.kind::mxf8f6f4` (same section >
//     "Instruction descriptor", the table "Instruction descriptor format for
//     .kind::mxf8f6f4"), used with `.block_scale.block32` (= scale_vec::1X:
//     one UE8M0 scale per 32 K elements).
// The element types and the scale type are not in the opcode: they live only
// in the instruction descriptor, so a wrong bit here is a silent wrong answer.
// Hence one struct per word with named fields, a validator that names what the
// ISA refuses, and bit-by-bit unit tests (test/Unit/).
//
// Plain C++ on purpose (no MLIR types): the unit tests compile this header
// alone, and the kernel builder turns encode() into an i32/i64 constant.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONVERSION_MOETONVGPU_TCGEN05DESCRIPTORS_H
#define MOE_CONVERSION_MOETONVGPU_TCGEN05DESCRIPTORS_H

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>

namespace mlir::moe::tcgen05 {

//===----------------------------------------------------------------------===//
// Shared memory matrix descriptor (64 bits)
//===----------------------------------------------------------------------===//

/// Swizzling mode, bits 61-63 ("Shared memory descriptor" table; values 3, 5
/// and 7 are invalid).
enum class SmemSwizzle : uint8_t {
  None = 0,
  Swizzle128BAtom32B = 1, // 128-byte swizzle with 32-byte atomicity
  Swizzle128B = 2,
  Swizzle64B = 4,
  Swizzle32B = 6,
};

/// Leading dimension stride mode, bit 52.
enum class LeadingDimMode : uint8_t {
  RelativeOffset = 0, // bits 16-29 hold a byte offset (LBO)
  AbsoluteAddress = 1 // bits 16-29 hold a second start address
};

/// Byte size of one repeat of a swizzle pattern; the matrix base offset is 0
/// when the pattern starts on this boundary ("Shared memory descriptor",
/// the base-offset table). 0 for no swizzling (no pattern to be off from).
inline uint32_t swizzlePatternBytes(SmemSwizzle swizzle) {
  switch (swizzle) {
  case SmemSwizzle::Swizzle128B:
  case SmemSwizzle::Swizzle128BAtom32B:
    return 1024;
  case SmemSwizzle::Swizzle64B:
    return 512;
  case SmemSwizzle::Swizzle32B:
    return 256;
  case SmemSwizzle::None:
    return 0;
  }
  return 0;
}

/// The ISA's "matrix-descriptor-encode": shared addresses live in an 18-bit
/// window and are 16-byte granular, so a 14-bit field holds bits 4-17.
inline uint64_t matrixDescriptorEncode(uint32_t bytes) {
  return (bytes & 0x3FFFFu) >> 4;
}

/// A tcgen05 shared memory matrix descriptor. Byte quantities are given as
/// bytes; encode() applies matrix-descriptor-encode.
struct SmemDescriptor {
  /// Bits 0-13: matrix start address (a `.shared::cta` byte address).
  uint32_t startAddress = 0;
  /// Bits 16-29: leading dimension byte offset (LBO). For K-major swizzled
  /// operands the ISA says it is unused and "assumed 1": pass 16 bytes.
  uint32_t leadingDimByteOffset = 0;
  /// Bits 32-45: stride dimension byte offset (SBO): for K-major operands the
  /// distance from one group of 8 rows to the next (1024 for 128-byte rows).
  uint32_t strideDimByteOffset = 0;
  /// Bits 49-51: matrix base offset, 0 when the swizzle pattern starts on
  /// its boundary, else (pattern start address >> 7) & 7.
  uint8_t baseOffset = 0;
  /// Bit 52.
  LeadingDimMode leadingDimMode = LeadingDimMode::RelativeOffset;
  /// Bits 61-63.
  SmemSwizzle swizzle = SmemSwizzle::None;

  /// Bits 46-48 hold the fixed constant 0b001 (CUTLASS calls bits 46-47 the
  /// descriptor version; Hopper's wgmma descriptor has no such field, so its
  /// words cannot be reused). Bits 14-15, 30-31 and 53-60 are 0 (the MLIR 22
  /// op documentation writes the latter "0xb00000000", meaning 0b0).
  static constexpr uint64_t kFixedBits = uint64_t(1) << 46;

  /// The base offset for a swizzle pattern starting at `patternStart`.
  static uint8_t baseOffsetFor(uint32_t patternStart, SmemSwizzle swizzle) {
    uint32_t repeat = swizzlePatternBytes(swizzle);
    if (repeat == 0 || patternStart % repeat == 0)
      return 0;
    return (patternStart >> 7) & 0x7;
  }

  /// Whether the ISA allows these fields; `why` names the first that it
  /// refuses.
  bool valid(std::string &why) const;

  /// The 64-bit word. Fields are masked to their width, so only a valid()
  /// descriptor encodes what it says.
  uint64_t encode() const {
    return matrixDescriptorEncode(startAddress) |
           matrixDescriptorEncode(leadingDimByteOffset) << 16 |
           matrixDescriptorEncode(strideDimByteOffset) << 32 | kFixedBits |
           uint64_t(baseOffset & 0x7) << 49 |
           uint64_t(static_cast<uint8_t>(leadingDimMode) & 0x1) << 52 |
           uint64_t(static_cast<uint8_t>(swizzle) & 0x7) << 61;
  }
};

//===----------------------------------------------------------------------===//
// Instruction descriptor for .kind::mxf8f6f4 (32 bits)
//===----------------------------------------------------------------------===//

/// atype / btype values of the .kind::mxf8f6f4 table (2 and 6-7 unused).
enum class MxF8F6F4Format : uint8_t {
  E4M3 = 0,
  E5M2 = 1,
  E2M3 = 3,
  E3M2 = 4,
  E2M1 = 5,
};

/// "Scale Matrix Type, for both scale_A / scale_B", bit 23. The mxf8f6f4
/// table lists only UE8M0; UE4M3 (0) belongs to .kind::mxf4nvf4.
enum class ScaleFormat : uint8_t { UE4M3 = 0, UE8M0 = 1 };

/// "Transpose A/B Matrix" bits 15 and 16: "No Transpose" means K-major and
/// "Transpose" MN-major (stated with the LBO/SBO definitions).
enum class OperandMajor : uint8_t { K = 0, MN = 1 };

/// `.cta_group::1` or `::2`: not a descriptor bit, but it selects the row of
/// the "Matrix Shape" table that M and N are checked against.
enum class CtaGroup : uint8_t { One = 1, Two = 2 };

/// The instruction descriptor of `tcgen05.mma{.sp}.cta_group.kind::mxf8f6f4
/// .block_scale.block32`. Defaults: dense E4M3 x E4M3, K-major A and B, UE8M0
/// scales at byte 0 of their tensor-memory words, M = 128, cta_group::1.
struct BlockScaledInstrDescriptor {
  // Bits 0-1 are reserved for this kind (no sparsity selector, unlike
  // .kind::f8f6f4); bit 3 and bit 6 are reserved.
  /// Bit 2: sparse A (`tcgen05.mma.sp`, K = 64) instead of dense (K = 32).
  bool sparse = false;
  /// Bits 4-5: "Matrix B Scale Factor Data ID": which byte of each 32-bit
  /// tensor-memory word holds B's scale (scale_vec::1X: one byte per row per
  /// instruction, so a column holds the scales of four K steps).
  uint8_t scaleFactorBByte = 0;
  /// Bits 7-9: atype.
  MxF8F6F4Format aFormat = MxF8F6F4Format::E4M3;
  /// Bits 10-12: btype.
  MxF8F6F4Format bFormat = MxF8F6F4Format::E4M3;
  /// Bit 13: negate A.
  bool negateA = false;
  /// Bit 14: negate B.
  bool negateB = false;
  /// Bit 15: transpose A.
  OperandMajor aMajor = OperandMajor::K;
  /// Bit 16: transpose B.
  OperandMajor bMajor = OperandMajor::K;
  /// Bits 17-22 hold N >> 3.
  uint32_t n = 0;
  /// Bit 23.
  ScaleFormat scaleFormat = ScaleFormat::UE8M0;
  /// Bits 27-28 hold M >> 7 (bits 24-26 are reserved for this kind).
  uint32_t m = 128;
  /// Bits 29-30: "Matrix A Scale Factor Data ID", the byte of A's scale.
  uint8_t scaleFactorAByte = 0;
  // Bit 31 is reserved for this kind. There is no "maximum shift" field
  // (bits 30-31 of the .kind::f16 table): .ws is invalid for mxf8f6f4.
  /// Not encoded: picks the shape rule.
  CtaGroup ctaGroup = CtaGroup::One;

  /// K of one instruction ("Matrix Shape" table: 32 dense, 64 sparse).
  uint32_t k() const { return sparse ? 64 : 32; }

  /// Whether the ISA allows this descriptor; `why` names the first refusal.
  bool valid(std::string &why) const;

  /// The 32-bit word. Fields are masked to their width, so only a valid()
  /// descriptor encodes what it says.
  uint32_t encode() const {
    // The ISA 9.x table puts M >> 7 in bits 27-28 with 24-26 reserved;
    // CUTLASS writes M >> 4 into bits 24-28. For the only legal M (128,
    // 256) both give the same bits, so either reading of the table agrees.
    return uint32_t(sparse) << 2 | uint32_t(scaleFactorBByte & 0x3) << 4 |
           uint32_t(static_cast<uint8_t>(aFormat) & 0x7) << 7 |
           uint32_t(static_cast<uint8_t>(bFormat) & 0x7) << 10 |
           uint32_t(negateA) << 13 | uint32_t(negateB) << 14 |
           uint32_t(static_cast<uint8_t>(aMajor) & 0x1) << 15 |
           uint32_t(static_cast<uint8_t>(bMajor) & 0x1) << 16 |
           ((n >> 3) & 0x3F) << 17 |
           uint32_t(static_cast<uint8_t>(scaleFormat) & 0x1) << 23 |
           ((m >> 7) & 0x3) << 27 | uint32_t(scaleFactorAByte & 0x3) << 29;
  }
};

/// Whether A and B in shared memory, described by `a` and `b`, suit `instr`
/// (what neither descriptor can check alone); `why` names the refusal.
bool validOperands(const BlockScaledInstrDescriptor &instr,
                   const SmemDescriptor &a, const SmemDescriptor &b,
                   std::string &why);

//===----------------------------------------------------------------------===//
// Implementation
//===----------------------------------------------------------------------===//

namespace detail {
inline std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx", (unsigned long long)value);
  return text;
}
inline bool isFormat(MxF8F6F4Format format) {
  switch (format) {
  case MxF8F6F4Format::E4M3:
  case MxF8F6F4Format::E5M2:
  case MxF8F6F4Format::E2M3:
  case MxF8F6F4Format::E3M2:
  case MxF8F6F4Format::E2M1:
    return true;
  }
  return false;
}
inline bool isSwizzle(SmemSwizzle swizzle) {
  switch (swizzle) {
  case SmemSwizzle::None:
  case SmemSwizzle::Swizzle128BAtom32B:
  case SmemSwizzle::Swizzle128B:
  case SmemSwizzle::Swizzle64B:
  case SmemSwizzle::Swizzle32B:
    return true;
  }
  return false;
}
inline bool isEightBit(MxF8F6F4Format format) {
  return format == MxF8F6F4Format::E4M3 || format == MxF8F6F4Format::E5M2;
}
inline bool refuse(std::string &why, std::string message) {
  why = std::move(message);
  return false;
}
/// An 18-bit, 16-byte aligned shared memory quantity (start address, LBO,
/// SBO): anything else would be truncated by matrix-descriptor-encode.
inline bool validSharedBytes(uint32_t bytes, const char *what,
                             std::string &why) {
  if (bytes % 16 != 0)
    return refuse(why, std::string("shared memory descriptor: ") + what + " " +
                           hex(bytes) + " is not 16-byte aligned");
  if (bytes > 0x3FFF0u)
    return refuse(why, std::string("shared memory descriptor: ") + what + " " +
                           hex(bytes) +
                           " does not fit 14 bits after >> 4 (at most "
                           "0x3fff0)");
  return true;
}
} // namespace detail

inline bool SmemDescriptor::valid(std::string &why) const {
  if (!detail::validSharedBytes(startAddress, "start address", why) ||
      !detail::validSharedBytes(leadingDimByteOffset,
                                "leading dimension byte offset", why) ||
      !detail::validSharedBytes(strideDimByteOffset,
                                "stride dimension byte offset", why))
    return false;
  if (baseOffset > 7)
    return detail::refuse(why, "shared memory descriptor: matrix base offset " +
                                   std::to_string(baseOffset) +
                                   " does not fit 3 bits");
  if (!detail::isSwizzle(swizzle))
    return detail::refuse(why,
                          "shared memory descriptor: swizzle mode " +
                              std::to_string(static_cast<unsigned>(swizzle)) +
                              " is invalid (0, 1, 2, 4 or 6)");
  if (leadingDimMode != LeadingDimMode::RelativeOffset &&
      leadingDimMode != LeadingDimMode::AbsoluteAddress)
    return detail::refuse(why, "shared memory descriptor: leading dimension "
                               "mode must be 0 (relative) or 1 (absolute)");
  // Newer ISA text allows the absolute mode only for 128-byte swizzling with
  // base offset 0; we do not use it, so take the narrow reading.
  if (leadingDimMode == LeadingDimMode::AbsoluteAddress &&
      (swizzle != SmemSwizzle::Swizzle128B || baseOffset != 0))
    return detail::refuse(why, "shared memory descriptor: the absolute "
                               "leading dimension mode needs 128-byte "
                               "swizzling and base offset 0");
  if (swizzle == SmemSwizzle::None && baseOffset != 0)
    return detail::refuse(why, "shared memory descriptor: matrix base offset "
                               "must be 0 without swizzling");
  return true;
}

inline bool BlockScaledInstrDescriptor::valid(std::string &why) const {
  if (!detail::isFormat(aFormat) || !detail::isFormat(bFormat))
    return detail::refuse(
        why, "mxf8f6f4 instruction descriptor: A and B formats must be "
             "E4M3 (0), E5M2 (1), E2M3 (3), E3M2 (4) or E2M1 (5)");
  if (scaleFormat != ScaleFormat::UE8M0)
    return detail::refuse(why, "mxf8f6f4 instruction descriptor: the scale "
                               "format must be UE8M0 (UE4M3 is mxf4nvf4 only)");
  if (scaleFactorAByte > 3 || scaleFactorBByte > 3)
    return detail::refuse(why, "mxf8f6f4 instruction descriptor: scale factor "
                               "IDs select a byte of a 32-bit tensor memory "
                               "word: 0 to 3");
  // CUTLASS documents MN-major only for 8-bit operands; sub-byte operands
  // are stored padded and their MN-major layouts are not described.
  if ((aMajor == OperandMajor::MN && !detail::isEightBit(aFormat)) ||
      (bMajor == OperandMajor::MN && !detail::isEightBit(bFormat)))
    return detail::refuse(why, "mxf8f6f4 instruction descriptor: an MN-major "
                               "(transposed) operand must be E4M3 or E5M2");
  // "Matrix Shape" table, .kind::mxf8f6f4 rows (no .ws: invalid for it).
  std::string shape = "mxf8f6f4 instruction descriptor: ";
  if (ctaGroup == CtaGroup::One) {
    if (m != 128)
      return detail::refuse(why, shape + "M = " + std::to_string(m) +
                                     " is not allowed with cta_group::1 "
                                     "(M must be 128)");
    if (n < 8 || n > 256 || n % 8 != 0)
      return detail::refuse(why, shape + "N = " + std::to_string(n) +
                                     " is not allowed with cta_group::1 "
                                     "(8 to 256 in steps of 8)");
  } else if (ctaGroup == CtaGroup::Two) {
    if (sparse ? m != 256 : (m != 128 && m != 256))
      return detail::refuse(
          why, shape + "M = " + std::to_string(m) +
                   " is not allowed with cta_group::2 (M must be " +
                   (sparse ? "256 when sparse)" : "128 or 256)"));
    if (n < 16 || n > 256 || n % 16 != 0)
      return detail::refuse(why, shape + "N = " + std::to_string(n) +
                                     " is not allowed with cta_group::2 "
                                     "(16 to 256 in steps of 16)");
  } else {
    return detail::refuse(why, shape + "cta_group must be 1 or 2");
  }
  return true;
}

inline bool validOperands(const BlockScaledInstrDescriptor &instr,
                          const SmemDescriptor &a, const SmemDescriptor &b,
                          std::string &why) {
  if (!instr.valid(why) || !a.valid(why) || !b.valid(why))
    return false;
  // The 32-byte-atom 128B swizzle exists only for MN-major atoms, and outside
  // .kind::tf32 transposed operands may not use it: never valid here.
  for (const SmemDescriptor *operand : {&a, &b})
    if (operand->swizzle == SmemSwizzle::Swizzle128BAtom32B)
      return detail::refuse(why, "mxf8f6f4 operands: 128-byte swizzling with "
                                 "32-byte atomicity is only for .kind::tf32");
  // The absolute leading dimension mode is K-major only (see valid()).
  if ((a.leadingDimMode == LeadingDimMode::AbsoluteAddress &&
       instr.aMajor != OperandMajor::K) ||
      (b.leadingDimMode == LeadingDimMode::AbsoluteAddress &&
       instr.bMajor != OperandMajor::K))
    return detail::refuse(why, "mxf8f6f4 operands: the absolute leading "
                               "dimension mode needs a K-major operand");
  return true;
}

} // namespace mlir::moe::tcgen05

#endif // MOE_CONVERSION_MOETONVGPU_TCGEN05DESCRIPTORS_H
