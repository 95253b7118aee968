//===- DriverAPI.h - the CUDA driver API subset the runtime uses -*- C++
//-*-===//
//
// Declares, from the documented CUDA driver ABI, the few types and constants
// the runtime needs, so that it builds without the CUDA toolkit, and the table
// of driver entry points it calls. test/DriverABICheck.cpp static_asserts all
// of it against cuda.h when a toolkit is installed.
//
// The table is filled by dlopen("libcuda.so.1") + dlsym, or injected by tests
// through setDriverForTesting. Internal: not part of the public API.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_LIB_DRIVERAPI_H
#define MOE_RUNTIME_LIB_DRIVERAPI_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace moe::runtime {
namespace cu {

using Result = int; // CUresult
using Device = int; // CUdevice
using Context = struct CUctx_st *;
using Module = struct CUmod_st *;
using Function = struct CUfunc_st *;
using Stream = struct CUstream_st *;
using DeviceAttribute = int;   // CUdevice_attribute
using FunctionAttribute = int; // CUfunction_attribute
using TensorMapDataType = int; // CUtensorMapDataType
using TensorMapInterleave = int;
using TensorMapSwizzle = int;
using TensorMapL2Promotion = int;
using TensorMapFloatOOBFill = int;
using LaunchAttributeID = int;        // CUlaunchAttributeID
using DevicePtr = unsigned long long; // CUdeviceptr

/// CUtensorMap: 128 opaque bytes. The driver needs 64-byte alignment; CUDA
/// 13's cuda.h declares 128, which satisfies both.
struct alignas(128) TensorMap {
  std::uint64_t opaque[16];
};

/// CUlaunchAttributeValue: a 64-byte union (8-byte aligned: some members
/// hold pointers); the runtime sets only the members below.
union alignas(8) LaunchAttributeValue {
  char pad[64];
  /// CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION's value: the cluster's size in
  /// blocks along each grid dimension (each a divisor of the grid's).
  struct {
    unsigned x, y, z;
  } clusterDim;
  /// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION's value.
  int programmaticStreamSerializationAllowed;
};

/// CUlaunchAttribute: the id (a CUlaunchAttributeID), padding to 8 bytes,
/// the value.
struct LaunchAttribute {
  LaunchAttributeID id;
  char pad[8 - sizeof(LaunchAttributeID)];
  LaunchAttributeValue value;
};

/// CUlaunchConfig, the launch configuration of cuLaunchKernelEx.
struct LaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  Stream hStream;
  LaunchAttribute *attrs; // null when numAttrs is 0
  unsigned numAttrs;
};

inline constexpr Result kSuccess = 0;           // CUDA_SUCCESS
inline constexpr Result kErrorInvalidValue = 1; // CUDA_ERROR_INVALID_VALUE
inline constexpr Result kErrorOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY
inline constexpr Result kErrorNotInitialized = 3;
inline constexpr Result kErrorDeinitialized = 4;
inline constexpr Result kErrorStubLibrary = 34; // CUDA_ERROR_STUB_LIBRARY
inline constexpr Result kErrorNoDevice = 100;   // CUDA_ERROR_NO_DEVICE
inline constexpr Result kErrorInvalidImage = 200;
inline constexpr Result kErrorInvalidContext = 201;
inline constexpr Result kErrorNotFound = 500; // CUDA_ERROR_NOT_FOUND
inline constexpr Result kErrorContextIsDestroyed = 709;

inline constexpr DeviceAttribute kDevAttrMultiprocessorCount = 16;
inline constexpr DeviceAttribute kDevAttrComputeCapabilityMajor = 75;
inline constexpr DeviceAttribute kDevAttrComputeCapabilityMinor = 76;
inline constexpr DeviceAttribute kDevAttrMaxSharedMemoryPerBlockOptin = 97;

inline constexpr FunctionAttribute kFuncAttrMaxThreadsPerBlock = 0;
inline constexpr FunctionAttribute kFuncAttrMaxDynamicSharedSizeBytes = 8;

inline constexpr TensorMapDataType kTensorMapDataTypeUInt8 = 0;
inline constexpr TensorMapDataType kTensorMapDataTypeBFloat16 = 9;
inline constexpr TensorMapInterleave kTensorMapInterleaveNone = 0;
inline constexpr TensorMapSwizzle kTensorMapSwizzle128B = 3;
inline constexpr TensorMapL2Promotion kTensorMapL2PromotionNone = 0;
inline constexpr TensorMapL2Promotion kTensorMapL2Promotion64B = 1;
inline constexpr TensorMapL2Promotion kTensorMapL2Promotion128B = 2;
inline constexpr TensorMapL2Promotion kTensorMapL2Promotion256B = 3;
inline constexpr TensorMapFloatOOBFill kTensorMapFloatOOBFillNone = 0;

/// CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: the launch's thread-block cluster
/// size (for a kernel compiled with a required cluster size, the same size).
inline constexpr LaunchAttributeID kLaunchAttributeClusterDimension = 4;

/// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: the kernel may
/// start before the previous kernel on the stream has finished (programmatic
/// dependent launch; the kernel's griddepcontrol.wait keeps it correct).
inline constexpr LaunchAttributeID
    kLaunchAttributeProgrammaticStreamSerialization = 6;

} // namespace cu

/// X(member, exported symbol, parameter types...) for every driver entry
/// point the runtime calls; all return CUresult. The symbols are dlsym'd by
/// name, so they must be the names cuda.h binds (its macros map some to
/// `_v2` versions: test/DriverABICheck.cpp checks that none of these is).
#define MOE_DRIVER_FUNCTIONS(X)                                                \
  X(init, cuInit, unsigned)                                                    \
  X(getErrorName, cuGetErrorName, cu::Result, const char **)                   \
  X(getErrorString, cuGetErrorString, cu::Result, const char **)               \
  X(ctxGetCurrent, cuCtxGetCurrent, cu::Context *)                             \
  X(ctxSetCurrent, cuCtxSetCurrent, cu::Context)                               \
  X(ctxGetDevice, cuCtxGetDevice, cu::Device *)                                \
  X(ctxGetId, cuCtxGetId, cu::Context, unsigned long long *)                   \
  X(deviceGet, cuDeviceGet, cu::Device *, int)                                 \
  X(deviceGetAttribute, cuDeviceGetAttribute, int *, cu::DeviceAttribute,      \
    cu::Device)                                                                \
  X(devicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, cu::Context *,           \
    cu::Device)                                                                \
  X(moduleLoadData, cuModuleLoadData, cu::Module *, const void *)              \
  X(moduleUnload, cuModuleUnload, cu::Module)                                  \
  X(moduleGetFunction, cuModuleGetFunction, cu::Function *, cu::Module,        \
    const char *)                                                              \
  X(funcGetAttribute, cuFuncGetAttribute, int *, cu::FunctionAttribute,        \
    cu::Function)                                                              \
  X(funcSetAttribute, cuFuncSetAttribute, cu::Function, cu::FunctionAttribute, \
    int)                                                                       \
  X(occupancyMaxActiveBlocksPerMultiprocessor,                                 \
    cuOccupancyMaxActiveBlocksPerMultiprocessor, int *, cu::Function, int,     \
    std::size_t)                                                               \
  X(launchKernel, cuLaunchKernel, cu::Function, unsigned, unsigned, unsigned,  \
    unsigned, unsigned, unsigned, unsigned, cu::Stream, void **, void **)      \
  X(tensorMapEncodeTiled, cuTensorMapEncodeTiled, cu::TensorMap *,             \
    cu::TensorMapDataType, std::uint32_t, void *, const std::uint64_t *,       \
    const std::uint64_t *, const std::uint32_t *, const std::uint32_t *,       \
    cu::TensorMapInterleave, cu::TensorMapSwizzle, cu::TensorMapL2Promotion,   \
    cu::TensorMapFloatOOBFill)

/// The same for the entry points a usable driver may lack: loading leaves
/// their members null when the symbol is missing, and the runtime then does
/// without them. cuLaunchKernelEx (CUDA 12.0+): without it every launch
/// goes through cuLaunchKernel, without programmatic dependent launch (a
/// cluster kernel then gets its cluster size from its image).
/// cuOccupancyMaxActiveClusters (CUDA 11.8+): without it the residency of a
/// cluster kernel is derived from its CTAs per multiprocessor. The copies and
/// the stream synchronisation only the expert-parallel exchanges use
/// (Exchange.cpp; without them those calls are UNSUPPORTED).
#define MOE_DRIVER_OPTIONAL_FUNCTIONS(X)                                       \
  X(launchKernelEx, cuLaunchKernelEx, const cu::LaunchConfig *, cu::Function,  \
    void **, void **)                                                          \
  X(occupancyMaxActiveClusters, cuOccupancyMaxActiveClusters, int *,           \
    cu::Function, const cu::LaunchConfig *)                                    \
  X(memcpyDtoHAsync, cuMemcpyDtoHAsync_v2, void *, cu::DevicePtr, std::size_t, \
    cu::Stream)                                                                \
  X(memcpyHtoDAsync, cuMemcpyHtoDAsync_v2, cu::DevicePtr, const void *,        \
    std::size_t, cu::Stream)                                                   \
  X(streamSynchronize, cuStreamSynchronize, cu::Stream)

/// The driver entry points: those of MOE_DRIVER_FUNCTIONS all non-null in a
/// usable table, those of MOE_DRIVER_OPTIONAL_FUNCTIONS null where the
/// driver lacks them.
struct Driver {
#define MOE_DRIVER_MEMBER(member, symbol, ...)                                 \
  cu::Result (*member)(__VA_ARGS__) = nullptr;
  MOE_DRIVER_FUNCTIONS(MOE_DRIVER_MEMBER)
  MOE_DRIVER_OPTIONAL_FUNCTIONS(MOE_DRIVER_MEMBER)
#undef MOE_DRIVER_MEMBER
};

/// The table in use: the injected one, else libcuda.so.1 (opened once per
/// process, never closed). Returns null and sets `whyNot` when there is none.
const Driver *getDriver(std::string &whyNot);

/// Fills `out` from the shared library `path` with dlopen + dlsym (an
/// optional entry point that is missing is left null). On failure returns
/// false with the dlopen/dlsym message in `error`; `out` is then
/// unspecified and the library stays open if it opened.
bool loadDriverLibrary(const char *path, Driver &out, std::string &error);

/// Test hook. `driver` non-null: getDriver returns it from now on. `driver`
/// null and `loadError` non-null: getDriver fails with `loadError`, as if
/// libcuda.so.1 could not be loaded. Both null: back to the real libcuda.
/// Not thread-safe with concurrent runtime calls.
void setDriverForTesting(const Driver *driver, const char *loadError = nullptr);

} // namespace moe::runtime

#endif // MOE_RUNTIME_LIB_DRIVERAPI_H
