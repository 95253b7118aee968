//===- NcclAPI.h - the NCCL API subset the exchanges use ---------*- C++
//-*-===//
//
// Declares, from NCCL's documented ABI, the few types and constants the
// expert-parallel exchanges need, so that the runtime builds without NCCL,
// and the table of entry points they call. test/NcclABICheck.cpp
// static_asserts all of it against nccl.h when one is found (PyPI's
// nvidia-nccl-cu13, which scripts/setup.sh installs).
//
// The table is filled by dlopen("libnccl.so.2") + dlsym (the library a
// process already loaded, such as PyTorch's, when one is), or injected by
// tests through setNcclForTesting. Internal: not part of the public API.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_LIB_NCCLAPI_H
#define MOE_RUNTIME_LIB_NCCLAPI_H

#include "DriverAPI.h"

#include <cstddef>
#include <string>

namespace moe::runtime {
namespace nccl {

using Result = int;                        // ncclResult_t
using Comm = struct ncclComm *;            // ncclComm_t
using DataType = int;                      // ncclDataType_t
inline constexpr Result kSuccess = 0;      // ncclSuccess
inline constexpr DataType kInt8 = 0;       // ncclInt8: all moves as bytes
inline constexpr int kUniqueIdBytes = 128; // NCCL_UNIQUE_ID_BYTES

/// ncclUniqueId: 128 opaque bytes, passed by value.
struct UniqueId {
  char internal[kUniqueIdBytes];
};

} // namespace nccl

/// X(member, exported symbol, parameter types...) for every NCCL entry point
/// the exchanges call; all return ncclResult_t.
#define MOE_NCCL_FUNCTIONS(X)                                                  \
  X(getVersion, ncclGetVersion, int *)                                         \
  X(getUniqueId, ncclGetUniqueId, nccl::UniqueId *)                            \
  X(commInitRank, ncclCommInitRank, nccl::Comm *, int, nccl::UniqueId, int)    \
  X(commDestroy, ncclCommDestroy, nccl::Comm)                                  \
  X(commCount, ncclCommCount, const nccl::Comm, int *)                         \
  X(commUserRank, ncclCommUserRank, const nccl::Comm, int *)                   \
  X(groupStart, ncclGroupStart)                                                \
  X(groupEnd, ncclGroupEnd)                                                    \
  X(send, ncclSend, const void *, std::size_t, nccl::DataType, int,            \
    nccl::Comm, cu::Stream)                                                    \
  X(recv, ncclRecv, void *, std::size_t, nccl::DataType, int, nccl::Comm,      \
    cu::Stream)

/// The NCCL entry points, all non-null in a usable table, and
/// ncclGetErrorString (which returns a string, not a result).
struct Nccl {
#define MOE_NCCL_MEMBER(member, symbol, ...)                                   \
  nccl::Result (*member)(__VA_ARGS__) = nullptr;
  MOE_NCCL_FUNCTIONS(MOE_NCCL_MEMBER)
#undef MOE_NCCL_MEMBER
  const char *(*getErrorString)(nccl::Result) = nullptr;
};

/// The table in use: the injected one, else libnccl.so.2 (or the library
/// $MOE_NCCL_LIBRARY names), opened once per process and never closed.
/// Returns null and sets `whyNot` when there is none.
const Nccl *getNccl(std::string &whyNot);

/// Test hook, as setDriverForTesting: `nccl` non-null is used from now on;
/// null with `loadError` fails as if the library could not be loaded; both
/// null go back to the real library.
void setNcclForTesting(const Nccl *nccl, const char *loadError = nullptr);

} // namespace moe::runtime

#endif // MOE_RUNTIME_LIB_NCCLAPI_H
