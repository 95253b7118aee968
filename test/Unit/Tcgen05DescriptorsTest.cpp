//===- Tcgen05DescriptorsTest.cpp - bit-by-bit descriptor tests -----------===//
//
// Unit tests of lib/Conversion/MoEToNVGPU/Tcgen05Descriptors.h: every field
// set alone to a distinctive value against a whole-word literal worked out by
// hand from the PTX ISA tables, the whole descriptors the sm_100a kernels
// will use, and the refusals. Run by lit (test/Unit/tcgen05-descriptors.test);
// test/GPU/sm100-tcgen05-block-scale.mlir assembles the literals named
// "known-good" here.
//
//===----------------------------------------------------------------------===//

#include "Tcgen05Descriptors.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

using namespace mlir::moe::tcgen05;

namespace {

struct TestCase {
  const char *name;
  void (*run)();
};

std::vector<TestCase> &registry() {
  static std::vector<TestCase> tests;
  return tests;
}

struct Registrar {
  Registrar(const char *name, void (*run)()) {
    registry().push_back({name, run});
  }
};

long checksMade = 0;
long failuresInTest = 0;

void fail(int line, const std::string &what) {
  ++failuresInTest;
  std::printf("  line %d: %s\n", line, what.c_str());
}

std::string hex(uint64_t value) { return detail::hex(value); }

} // namespace

#define TEST(name)                                                             \
  static void name();                                                          \
  static Registrar name##Registrar(#name, name);                               \
  static void name()

/// Compares two words and prints both in hex on a mismatch.
#define CHECK_WORD(actual, expected)                                           \
  do {                                                                         \
    uint64_t checkActual = (actual), checkExpected = (expected);               \
    ++checksMade;                                                              \
    if (checkActual != checkExpected)                                          \
      fail(__LINE__, std::string(#actual) + " = " + hex(checkActual) +         \
                         ", expected " + hex(checkExpected));                  \
  } while (0)

#define CHECK(condition)                                                       \
  do {                                                                         \
    ++checksMade;                                                              \
    if (!(condition))                                                          \
      fail(__LINE__, "CHECK(" #condition ")");                                 \
  } while (0)

/// `descriptor` is refused with a message containing `needle`.
#define CHECK_REFUSED(descriptor, needle)                                      \
  do {                                                                         \
    std::string checkWhy;                                                      \
    ++checksMade;                                                              \
    if ((descriptor).valid(checkWhy))                                          \
      fail(__LINE__, std::string(#descriptor) + " was accepted");              \
    else if (checkWhy.find(needle) == std::string::npos)                       \
      fail(__LINE__, "'" + checkWhy + "' lacks '" + (needle) + "'");           \
    else                                                                       \
      std::printf("  refused: %s\n", checkWhy.c_str());                        \
  } while (0)

#define CHECK_VALID(descriptor)                                                \
  do {                                                                         \
    std::string checkWhy;                                                      \
    ++checksMade;                                                              \
    if (!(descriptor).valid(checkWhy))                                         \
      fail(__LINE__, std::string(#descriptor) + " refused: " + checkWhy);      \
  } while (0)

//===----------------------------------------------------------------------===//
// Shared memory descriptor, field by field. Baseline: every field 0, which
// leaves only the fixed 0b001 of bits 46-48: 1 << 46 = 0x0000400000000000.
//===----------------------------------------------------------------------===//

TEST(smemFixedConstantBits46to48) {
  SmemDescriptor desc;
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x0000400000000000ull);
}

TEST(smemStartAddressBits0to13) {
  SmemDescriptor desc;
  desc.startAddress = 0x12340; // >> 4 = 0x1234
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x0000400000001234ull);
  desc.startAddress = 0x3FFF0; // the largest: 14 ones in bits 0-13
  CHECK_WORD(desc.encode(), 0x0000400000003FFFull);
}

TEST(smemLeadingDimByteOffsetBits16to29) {
  SmemDescriptor desc;
  desc.leadingDimByteOffset = 0x3FFF0; // 0x3FFF << 16
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x000040003FFF0000ull);
  desc.leadingDimByteOffset = 0x50; // 5 << 16
  CHECK_WORD(desc.encode(), 0x0000400000050000ull);
}

TEST(smemStrideDimByteOffsetBits32to45) {
  SmemDescriptor desc;
  desc.strideDimByteOffset = 0x3FFF0; // 0x3FFF << 32, next to bit 46
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x00007FFF00000000ull);
  desc.strideDimByteOffset = 1024; // 64 << 32
  CHECK_WORD(desc.encode(), 0x0000404000000000ull);
}

TEST(smemBaseOffsetBits49to51) {
  SmemDescriptor desc;
  desc.swizzle = SmemSwizzle::Swizzle128B; // 2 << 61 = 0x4000000000000000
  desc.baseOffset = 7;                     // 7 << 49 = 0x000E000000000000
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x400E400000000000ull);
  desc.baseOffset = 5; // 0b101 << 49 = 0x000A000000000000
  CHECK_WORD(desc.encode(), 0x400A400000000000ull);
}

TEST(smemLeadingDimModeBit52) {
  SmemDescriptor desc;
  desc.swizzle = SmemSwizzle::Swizzle128B;
  desc.leadingDimMode = LeadingDimMode::AbsoluteAddress; // 1 << 52
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x4010400000000000ull);
}

TEST(smemSwizzleBits61to63) {
  SmemDescriptor desc;
  desc.swizzle = SmemSwizzle::Swizzle128BAtom32B; // 1 << 61
  CHECK_WORD(desc.encode(), 0x2000400000000000ull);
  desc.swizzle = SmemSwizzle::Swizzle128B; // 2 << 61
  CHECK_WORD(desc.encode(), 0x4000400000000000ull);
  desc.swizzle = SmemSwizzle::Swizzle64B; // 4 << 61
  CHECK_WORD(desc.encode(), 0x8000400000000000ull);
  desc.swizzle = SmemSwizzle::Swizzle32B; // 6 << 61
  CHECK_WORD(desc.encode(), 0xC000400000000000ull);
}

TEST(smemReservedBitsStayZero) {
  // Every field at its widest: bits 14-15, 30-31, 47-48 and 53-60 stay 0.
  SmemDescriptor desc;
  desc.startAddress = 0x3FFF0;
  desc.leadingDimByteOffset = 0x3FFF0;
  desc.strideDimByteOffset = 0x3FFF0;
  desc.baseOffset = 7;
  desc.leadingDimMode = LeadingDimMode::AbsoluteAddress;
  desc.swizzle = static_cast<SmemSwizzle>(7);
  CHECK_WORD(desc.encode(), 0xE01E7FFF3FFF3FFFull);
  CHECK_WORD(desc.encode() & 0x1FE18000C000C000ull, 0);
}

TEST(smemBaseOffsetFormula) {
  // 0 on the pattern boundary, else (pattern start >> 7) & 7.
  CHECK_WORD(SmemDescriptor::baseOffsetFor(0x400, SmemSwizzle::Swizzle128B), 0);
  CHECK_WORD(SmemDescriptor::baseOffsetFor(0x480, SmemSwizzle::Swizzle128B), 1);
  CHECK_WORD(SmemDescriptor::baseOffsetFor(0x780, SmemSwizzle::Swizzle128B), 7);
  CHECK_WORD(SmemDescriptor::baseOffsetFor(0x200, SmemSwizzle::Swizzle64B), 0);
  CHECK_WORD(SmemDescriptor::baseOffsetFor(0x300, SmemSwizzle::Swizzle64B), 6);
  CHECK_WORD(SmemDescriptor::baseOffsetFor(0x180, SmemSwizzle::Swizzle32B), 3);
  CHECK_WORD(SmemDescriptor::baseOffsetFor(0x180, SmemSwizzle::None), 0);
}

//===----------------------------------------------------------------------===//
// Shared memory descriptors the kernels use (known-good).
//===----------------------------------------------------------------------===//

/// A K-major e4m3 tile in 128-byte swizzle: rows of 128 bytes (128 K
/// elements), 8-row groups 1024 bytes apart; LBO unused ("assumed 1").
static SmemDescriptor kMajorSwizzle128(uint32_t start) {
  SmemDescriptor desc;
  desc.startAddress = start;
  desc.leadingDimByteOffset = 16; // encodes 1
  desc.strideDimByteOffset = 1024;
  desc.swizzle = SmemSwizzle::Swizzle128B;
  return desc;
}

TEST(knownGoodSmemKMajor128BAtZero) {
  // LBO 1 << 16 | SBO 64 << 32 | 1 << 46 | 2 << 61. The sm100 lit test adds
  // the tile's shared address >> 4 to this word.
  SmemDescriptor desc = kMajorSwizzle128(0);
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x4000404000010000ull);
}

TEST(knownGoodSmemKMajor128BTiles) {
  // A tile at 1 KiB and one at 113 KiB (both on the 1024-byte boundary).
  CHECK_WORD(kMajorSwizzle128(0x400).encode(), 0x4000404000010040ull);
  CHECK_WORD(kMajorSwizzle128(0x1C400).encode(), 0x4000404000011C40ull);
  // The second K = 32 step of a 128-byte row starts 32 bytes in: only the
  // address moves; the pattern still starts at 0x400, so base offset 0.
  CHECK_WORD(kMajorSwizzle128(0x420).encode(), 0x4000404000010042ull);
}

TEST(knownGoodSmemSwizzle128BOffPattern) {
  // A tile whose swizzle pattern starts at 0x480 carries base offset 1.
  SmemDescriptor desc = kMajorSwizzle128(0x480);
  desc.baseOffset = SmemDescriptor::baseOffsetFor(0x480, desc.swizzle);
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x4002404000010048ull);
}

TEST(knownGoodSmemScaleTileForCopy) {
  // The UE8M0 scales of 128 rows as tcgen05.cp .32x128b.warpx4 reads them:
  // unswizzled 16-byte rows, 8-row core matrices 128 bytes apart.
  SmemDescriptor desc;
  desc.leadingDimByteOffset = 128; // 8 << 16
  desc.strideDimByteOffset = 128;  // 8 << 32
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x0000400800080000ull);
}

//===----------------------------------------------------------------------===//
// Instruction descriptor (.kind::mxf8f6f4), field by field. Baseline: the
// smallest valid word, M = 128, N = 8, E4M3 x E4M3, UE8M0:
// N 1 << 17 | UE8M0 1 << 23 | M 1 << 27 = 0x08820000.
//===----------------------------------------------------------------------===//

static BlockScaledInstrDescriptor baseline() {
  BlockScaledInstrDescriptor desc;
  desc.n = 8;
  return desc;
}

TEST(idescBaseline) {
  BlockScaledInstrDescriptor desc = baseline();
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x08820000u);
}

TEST(idescSparsityBit2) {
  BlockScaledInstrDescriptor desc = baseline();
  desc.sparse = true; // 1 << 2
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x08820004u);
  CHECK_WORD(desc.k(), 64);
  CHECK_WORD(baseline().k(), 32);
}

TEST(idescScaleFactorBByteBits4to5) {
  BlockScaledInstrDescriptor desc = baseline();
  desc.scaleFactorBByte = 3; // 3 << 4
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x08820030u);
  desc.scaleFactorBByte = 2; // 2 << 4
  CHECK_WORD(desc.encode(), 0x08820020u);
}

TEST(idescATypeBits7to9) {
  BlockScaledInstrDescriptor desc = baseline();
  desc.aFormat = MxF8F6F4Format::E2M1; // 5 << 7
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x08820280u);
  desc.aFormat = MxF8F6F4Format::E5M2; // 1 << 7
  CHECK_WORD(desc.encode(), 0x08820080u);
  desc.aFormat = MxF8F6F4Format::E2M3; // 3 << 7
  CHECK_WORD(desc.encode(), 0x08820180u);
}

TEST(idescBTypeBits10to12) {
  BlockScaledInstrDescriptor desc = baseline();
  desc.bFormat = MxF8F6F4Format::E3M2; // 4 << 10
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x08821000u);
  desc.bFormat = MxF8F6F4Format::E2M1; // 5 << 10
  CHECK_WORD(desc.encode(), 0x08821400u);
  desc.bFormat = MxF8F6F4Format::E5M2; // 1 << 10
  CHECK_WORD(desc.encode(), 0x08820400u);
}

TEST(idescNegateBits13and14) {
  BlockScaledInstrDescriptor desc = baseline();
  desc.negateA = true; // 1 << 13
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x08822000u);
  desc.negateA = false;
  desc.negateB = true; // 1 << 14
  CHECK_WORD(desc.encode(), 0x08824000u);
}

TEST(idescTransposeBits15and16) {
  BlockScaledInstrDescriptor desc = baseline();
  desc.aMajor = OperandMajor::MN; // 1 << 15
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x08828000u);
  desc.aMajor = OperandMajor::K;
  desc.bMajor = OperandMajor::MN; // 1 << 16
  CHECK_WORD(desc.encode(), 0x08830000u);
}

TEST(idescNBits17to22) {
  BlockScaledInstrDescriptor desc = baseline();
  desc.n = 248; // 31 << 17
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x08BE0000u);
  desc.n = 256; // 32 << 17: the top bit of the field
  CHECK_WORD(desc.encode(), 0x08C00000u);
  desc.n = 40; // 5 << 17
  CHECK_WORD(desc.encode(), 0x088A0000u);
}

TEST(idescScaleFormatBit23) {
  BlockScaledInstrDescriptor desc = baseline();
  desc.scaleFormat = ScaleFormat::UE4M3; // refused, but the bit must clear
  CHECK_WORD(desc.encode(), 0x08020000u);
}

TEST(idescMBits27to28) {
  // cta_group::2, M = 256, N = 16: M 2 << 27 | N 2 << 17 | UE8M0.
  BlockScaledInstrDescriptor desc;
  desc.ctaGroup = CtaGroup::Two;
  desc.m = 256;
  desc.n = 16;
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x10840000u);
  desc.m = 128; // 1 << 27
  CHECK_WORD(desc.encode(), 0x08840000u);
}

TEST(idescScaleFactorAByteBits29to30) {
  BlockScaledInstrDescriptor desc = baseline();
  desc.scaleFactorAByte = 1; // 1 << 29
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x28820000u);
  desc.scaleFactorAByte = 2; // 2 << 29
  CHECK_WORD(desc.encode(), 0x48820000u);
  desc.scaleFactorAByte = 3; // 3 << 29: bit 31 stays reserved
  CHECK_WORD(desc.encode(), 0x68820000u);
}

TEST(idescReservedBitsStayZero) {
  // Every field at its widest: bits 0-1, 3, 6, 24-26 and 31 stay 0.
  BlockScaledInstrDescriptor desc;
  desc.sparse = true;
  desc.scaleFactorBByte = 3;
  desc.aFormat = static_cast<MxF8F6F4Format>(7);
  desc.bFormat = static_cast<MxF8F6F4Format>(7);
  desc.negateA = desc.negateB = true;
  desc.aMajor = desc.bMajor = OperandMajor::MN;
  desc.n = 63 << 3;
  desc.m = 3 << 7;
  desc.scaleFactorAByte = 3;
  CHECK_WORD(desc.encode(), 0x78FFFFB4u);
  CHECK_WORD(desc.encode() & 0x8700004Bu, 0);
}

//===----------------------------------------------------------------------===//
// Instruction descriptors the kernels use (known-good): M = 128, K-major A
// and B, UE8M0 scales at byte 0, cta_group::1.
//===----------------------------------------------------------------------===//

static BlockScaledInstrDescriptor mxfp8(uint32_t n, MxF8F6F4Format a) {
  BlockScaledInstrDescriptor desc;
  desc.n = n;
  desc.aFormat = a;
  return desc;
}

TEST(knownGoodIdescE4M3xE4M3) {
  // UE8M0 1 << 23 | M 1 << 27 = 0x08800000, plus N >> 3 << 17.
  for (uint32_t n : {256u, 128u, 64u, 32u, 16u})
    CHECK_VALID(mxfp8(n, MxF8F6F4Format::E4M3));
  CHECK_WORD(mxfp8(256, MxF8F6F4Format::E4M3).encode(), 0x08C00000u);
  CHECK_WORD(mxfp8(128, MxF8F6F4Format::E4M3).encode(), 0x08A00000u);
  CHECK_WORD(mxfp8(64, MxF8F6F4Format::E4M3).encode(), 0x08900000u);
  CHECK_WORD(mxfp8(32, MxF8F6F4Format::E4M3).encode(), 0x08880000u);
  CHECK_WORD(mxfp8(16, MxF8F6F4Format::E4M3).encode(), 0x08840000u);
}

TEST(knownGoodIdescE5M2xE4M3) {
  // atype E5M2 adds 1 << 7.
  CHECK_VALID(mxfp8(256, MxF8F6F4Format::E5M2));
  CHECK_WORD(mxfp8(256, MxF8F6F4Format::E5M2).encode(), 0x08C00080u);
  CHECK_WORD(mxfp8(128, MxF8F6F4Format::E5M2).encode(), 0x08A00080u);
}

TEST(knownGoodIdescScalesAtByte1) {
  // The second K step reading its scales from byte 1 of the same columns.
  BlockScaledInstrDescriptor desc = mxfp8(256, MxF8F6F4Format::E4M3);
  desc.scaleFactorAByte = 1;
  desc.scaleFactorBByte = 1;
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x28C00010u);
  desc.n = 128; // 16 << 17 instead of 32 << 17
  CHECK_WORD(desc.encode(), 0x28A00010u);
}

TEST(knownGoodIdescTwoCta) {
  BlockScaledInstrDescriptor desc = mxfp8(256, MxF8F6F4Format::E4M3);
  desc.ctaGroup = CtaGroup::Two;
  desc.m = 256;
  CHECK_VALID(desc);
  CHECK_WORD(desc.encode(), 0x10C00000u);
}

//===----------------------------------------------------------------------===//
// Refusals.
//===----------------------------------------------------------------------===//

TEST(smemRefusals) {
  SmemDescriptor desc;
  desc.startAddress = 0x408;
  CHECK_REFUSED(desc, "start address 0x408 is not 16-byte aligned");
  desc.startAddress = 0x40000;
  CHECK_REFUSED(desc, "start address 0x40000 does not fit 14 bits");
  desc = SmemDescriptor();
  desc.leadingDimByteOffset = 24;
  CHECK_REFUSED(desc, "leading dimension byte offset 0x18 is not 16-byte");
  desc = SmemDescriptor();
  desc.strideDimByteOffset = 0x40000;
  CHECK_REFUSED(desc, "stride dimension byte offset 0x40000 does not fit");
  desc = SmemDescriptor();
  desc.swizzle = SmemSwizzle::Swizzle128B;
  desc.baseOffset = 8;
  CHECK_REFUSED(desc, "matrix base offset 8 does not fit 3 bits");
  desc = SmemDescriptor();
  desc.swizzle = static_cast<SmemSwizzle>(3);
  CHECK_REFUSED(desc, "swizzle mode 3 is invalid");
  desc.swizzle = static_cast<SmemSwizzle>(5);
  CHECK_REFUSED(desc, "swizzle mode 5 is invalid");
  desc.swizzle = static_cast<SmemSwizzle>(7);
  CHECK_REFUSED(desc, "swizzle mode 7 is invalid");
  desc = SmemDescriptor();
  desc.baseOffset = 2;
  CHECK_REFUSED(desc, "base offset must be 0 without swizzling");
  desc = SmemDescriptor();
  desc.swizzle = SmemSwizzle::Swizzle64B;
  desc.leadingDimMode = LeadingDimMode::AbsoluteAddress;
  CHECK_REFUSED(desc, "absolute leading dimension mode needs 128-byte");
}

TEST(idescShapeRefusals) {
  BlockScaledInstrDescriptor desc = mxfp8(256, MxF8F6F4Format::E4M3);
  desc.m = 64;
  CHECK_REFUSED(desc,
                "M = 64 is not allowed with cta_group::1 (M must be 128)");
  desc.m = 256;
  CHECK_REFUSED(desc, "M = 256 is not allowed with cta_group::1");
  desc = mxfp8(0, MxF8F6F4Format::E4M3);
  CHECK_REFUSED(desc, "N = 0 is not allowed with cta_group::1 (8 to 256 in "
                      "steps of 8)");
  desc.n = 12;
  CHECK_REFUSED(desc, "N = 12 is not allowed with cta_group::1");
  desc.n = 264;
  CHECK_REFUSED(desc, "N = 264 is not allowed with cta_group::1");
  desc = mxfp8(24, MxF8F6F4Format::E4M3);
  desc.ctaGroup = CtaGroup::Two;
  CHECK_REFUSED(desc, "N = 24 is not allowed with cta_group::2 (16 to 256 in "
                      "steps of 16)");
  desc.n = 32;
  desc.m = 64;
  CHECK_REFUSED(desc, "M = 64 is not allowed with cta_group::2 (M must be "
                      "128 or 256)");
  desc.m = 128;
  desc.sparse = true;
  CHECK_REFUSED(desc, "M = 128 is not allowed with cta_group::2 (M must be "
                      "256 when sparse)");
  desc.ctaGroup = static_cast<CtaGroup>(3);
  CHECK_REFUSED(desc, "cta_group must be 1 or 2");
}

TEST(idescFieldRefusals) {
  BlockScaledInstrDescriptor desc = mxfp8(128, MxF8F6F4Format::E4M3);
  desc.scaleFormat = ScaleFormat::UE4M3;
  CHECK_REFUSED(desc, "scale format must be UE8M0");
  desc = mxfp8(128, static_cast<MxF8F6F4Format>(2));
  CHECK_REFUSED(desc, "A and B formats must be E4M3 (0), E5M2 (1), E2M3 (3), "
                      "E3M2 (4) or E2M1 (5)");
  desc = mxfp8(128, MxF8F6F4Format::E4M3);
  desc.bFormat = static_cast<MxF8F6F4Format>(6);
  CHECK_REFUSED(desc, "A and B formats must be");
  desc = mxfp8(128, MxF8F6F4Format::E4M3);
  desc.scaleFactorAByte = 4;
  CHECK_REFUSED(desc, "scale factor IDs select a byte of a 32-bit tensor "
                      "memory word: 0 to 3");
  desc.scaleFactorAByte = 0;
  desc.scaleFactorBByte = 4;
  CHECK_REFUSED(desc, "0 to 3");
  desc = mxfp8(128, MxF8F6F4Format::E2M1);
  desc.aMajor = OperandMajor::MN;
  CHECK_REFUSED(desc, "an MN-major (transposed) operand must be E4M3 or E5M2");
}

TEST(operandPairing) {
  BlockScaledInstrDescriptor instr = mxfp8(256, MxF8F6F4Format::E4M3);
  SmemDescriptor a = kMajorSwizzle128(0x400);
  SmemDescriptor b = kMajorSwizzle128(0x4400);
  std::string why;
  CHECK(validOperands(instr, a, b, why));
  b.swizzle = SmemSwizzle::Swizzle128BAtom32B;
  CHECK(!validOperands(instr, a, b, why));
  CHECK(why.find("32-byte atomicity is only for .kind::tf32") !=
        std::string::npos);
  std::printf("  refused: %s\n", why.c_str());
  b = kMajorSwizzle128(0x4400);
  b.leadingDimMode = LeadingDimMode::AbsoluteAddress;
  instr.bMajor = OperandMajor::MN;
  CHECK(!validOperands(instr, a, b, why));
  CHECK(why.find("absolute leading dimension mode needs a K-major") !=
        std::string::npos);
  std::printf("  refused: %s\n", why.c_str());
  instr.n = 4; // the instruction's own refusal comes first
  CHECK(!validOperands(instr, a, b, why));
  CHECK(why.find("N = 4") != std::string::npos);
}

int main() {
  long failedTests = 0;
  for (const TestCase &test : registry()) {
    failuresInTest = 0;
    std::printf("%s\n", test.name);
    test.run();
    std::printf("%s: %s\n", failuresInTest ? "FAIL" : "PASS", test.name);
    failedTests += failuresInTest != 0;
  }
  std::printf("moe-nvgpu-unit-tests: %zu tests, %ld checks, %ld failed\n",
              registry().size(), checksMade, failedTests);
  return failedTests ? 1 : 0;
}
