//===- NcclABICheck.cpp - NcclAPI.h against the real nccl.h ---------------===//
//
// Compiled only when CMake finds an nccl.h (PyPI's nvidia-nccl-cu13, which
// scripts/setup.sh installs into the venv). Every check is a static_assert:
// the constants, the types' sizes, and the signature and bound name of every
// entry point the exchanges dlsym.
//
//===----------------------------------------------------------------------===//

#include "AbiCheck.h"
#include "NcclAPI.h"

#include <nccl.h>

namespace {
using namespace moe::runtime;
using namespace moe_abi;

static_assert(nccl::kSuccess == ncclSuccess);
static_assert(nccl::kInt8 == ncclInt8);
static_assert(nccl::kUniqueIdBytes == NCCL_UNIQUE_ID_BYTES);
static_assert(sizeof(nccl::Result) == sizeof(ncclResult_t));
static_assert(sizeof(nccl::DataType) == sizeof(ncclDataType_t));
static_assert(sizeof(nccl::Comm) == sizeof(ncclComm_t));
static_assert(sizeof(nccl::UniqueId) == sizeof(ncclUniqueId) &&
              alignof(nccl::UniqueId) == alignof(ncclUniqueId));
// NCCL's stream parameter is a cudaStream_t: the driver's CUstream.
static_assert(sizeof(cu::Stream) == sizeof(cudaStream_t));

#define MOE_CHECK_NCCL_FUNCTION(member, symbol, ...)                           \
  static_assert(                                                               \
      sameSignature(static_cast<decltype(Nccl::member)>(nullptr), &::symbol),  \
      "Nccl::" #member " does not match " #symbol " of nccl.h");               \
  static_assert(sameString(#symbol, MOE_STRINGIFY(symbol)),                    \
                "nccl.h binds " #symbol " to another symbol name");
MOE_NCCL_FUNCTIONS(MOE_CHECK_NCCL_FUNCTION)
MOE_CHECK_NCCL_FUNCTION(getErrorString, ncclGetErrorString)
#undef MOE_CHECK_NCCL_FUNCTION

} // namespace
