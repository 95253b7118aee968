//===- WgmmaDescriptor.h - sm_90 wgmma shared memory descriptors -*- C++
//-*-===//
//
// The 64-bit shared memory matrix descriptor an sm_90a `wgmma.mma_async`
// reads (PTX ISA, "Matrix Descriptor Format" of the warpgroup-level MMA):
//   bits  0-13  start address, (byte address & 0x3FFFF) >> 4 (run time)
//   bits 16-29  leading dimension byte offset >> 4
//   bits 32-45  stride dimension byte offset >> 4
//   bits 49-51  matrix base offset (0: tiles start on the swizzle pattern)
//   bits 62-63  swizzle: 0 none, 1 128-byte, 2 64-byte, 3 32-byte.
// nvgpu.warpgroup.generate.descriptor builds K-major ones; the N-major B
// operand of moe.grouped_dgrad is encoded here. Plain C++: the words are
// checked at compile time below.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONVERSION_MOETONVGPU_SM90GEMM_WGMMADESCRIPTOR_H
#define MOE_CONVERSION_MOETONVGPU_SM90GEMM_WGMMADESCRIPTOR_H

#include <cstdint>

namespace mlir::moe::sm90 {

/// The descriptor's constant bits for a 128-byte swizzled operand: the
/// start address is or-ed in with wgmmaStartAddress.
constexpr uint64_t wgmmaSwizzle128BDescriptor(uint32_t leadingBytes,
                                              uint32_t strideBytes) {
  return (uint64_t((leadingBytes >> 4) & 0x3FFF) << 16) |
         (uint64_t((strideBytes >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
}

/// Bits 0-13 of a descriptor for the shared byte address `address`.
constexpr uint64_t wgmmaStartAddress(uint64_t address) {
  return (address & 0x3FFFF) >> 4;
}

/// An N-major (MN-major) 128-byte swizzled operand of `rows` K rows stored as
/// chunks of 64 bf16 columns ([rows][64] each, 128 bytes a row): the leading
/// offset steps from one chunk of 64 N to the next, the stride offset from
/// one group of 8 K rows to the next (the 1024-byte swizzle pattern).
constexpr uint64_t wgmmaNMajorDescriptor(uint32_t rows) {
  return wgmmaSwizzle128BDescriptor(rows * 128, 8 * 128);
}

// Words worked out by hand from the table above: 64 K rows give chunks of
// 8192 bytes (LBO 512 = 0x200 at bit 16), 1024-byte groups (SBO 64 = 0x40
// at bit 32), swizzle 1 at bit 62.
static_assert(wgmmaNMajorDescriptor(64) == 0x4000004002000000ull);
static_assert(wgmmaStartAddress(0x12340) == 0x1234);
static_assert(wgmmaStartAddress(0x52340) == 0x1234); // an 18-bit window

} // namespace mlir::moe::sm90

#endif // MOE_CONVERSION_MOETONVGPU_SM90GEMM_WGMMADESCRIPTOR_H
