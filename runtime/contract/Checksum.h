//===- Checksum.h - the checksum of a bundle's images -----*- C++ -*-===//
//
// 64-bit FNV-1a over an image's bytes: moe-translate records it on the
// image's line (`fnv1a64=<16 hex digits>`, contract version 7) and the
// runtime's reader recomputes it, so that damaged cubin bytes are refused
// when the bundle is opened. A check against accidents, not an adversary.
// Header-only C++17, shared by the writer and the reader.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_CONTRACT_CHECKSUM_H
#define MOE_CONTRACT_CHECKSUM_H

#include <cstddef>
#include <cstdint>

namespace moe::contract {

inline uint64_t fnv1a64(const uint8_t *data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= data[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

} // namespace moe::contract

#endif // MOE_CONTRACT_CHECKSUM_H
