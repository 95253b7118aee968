//===- DriverABICheck.cpp - DriverAPI.h against the real cuda.h -----------===//
//
// Compiled only when CMake finds a cuda.h. Every check is a static_assert, so
// a mismatch breaks the build of moe-runtime-tests: the constants, the sizes
// of the types (and the field offsets of cuLaunchKernelEx's configuration),
// the signatures of the entry points, optional ones included (parameter by
// parameter, up to what the calling convention sees), and that each dlsym'd
// name is the one cuda.h binds rather than a legacy version of a `_v2`
// function.
//
//===----------------------------------------------------------------------===//

#include "AbiCheck.h"
#include "DriverAPI.h"

#include <cuda.h>

#include <cstddef>
#include <type_traits>

namespace {

using namespace moe::runtime;
using namespace moe_abi;

// Constants.
static_assert(cu::kSuccess == CUDA_SUCCESS);
static_assert(cu::kErrorInvalidValue == CUDA_ERROR_INVALID_VALUE);
static_assert(cu::kErrorOutOfMemory == CUDA_ERROR_OUT_OF_MEMORY);
static_assert(cu::kErrorNotInitialized == CUDA_ERROR_NOT_INITIALIZED);
static_assert(cu::kErrorDeinitialized == CUDA_ERROR_DEINITIALIZED);
static_assert(cu::kErrorStubLibrary == CUDA_ERROR_STUB_LIBRARY);
static_assert(cu::kErrorNoDevice == CUDA_ERROR_NO_DEVICE);
static_assert(cu::kErrorInvalidImage == CUDA_ERROR_INVALID_IMAGE);
static_assert(cu::kErrorInvalidContext == CUDA_ERROR_INVALID_CONTEXT);
static_assert(cu::kErrorNotFound == CUDA_ERROR_NOT_FOUND);
static_assert(cu::kErrorContextIsDestroyed == CUDA_ERROR_CONTEXT_IS_DESTROYED);
static_assert(cu::kDevAttrMultiprocessorCount ==
              CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
static_assert(cu::kDevAttrComputeCapabilityMajor ==
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(cu::kDevAttrComputeCapabilityMinor ==
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(cu::kDevAttrMaxSharedMemoryPerBlockOptin ==
              CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
static_assert(cu::kFuncAttrMaxThreadsPerBlock ==
              CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
static_assert(cu::kFuncAttrMaxDynamicSharedSizeBytes ==
              CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
static_assert(cu::kTensorMapDataTypeUInt8 == CU_TENSOR_MAP_DATA_TYPE_UINT8);
static_assert(cu::kTensorMapDataTypeBFloat16 ==
              CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
static_assert(cu::kTensorMapInterleaveNone == CU_TENSOR_MAP_INTERLEAVE_NONE);
static_assert(cu::kTensorMapSwizzle128B == CU_TENSOR_MAP_SWIZZLE_128B);
static_assert(cu::kTensorMapL2PromotionNone == CU_TENSOR_MAP_L2_PROMOTION_NONE);
static_assert(cu::kTensorMapL2Promotion64B ==
              CU_TENSOR_MAP_L2_PROMOTION_L2_64B);
static_assert(cu::kTensorMapL2Promotion128B ==
              CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
static_assert(cu::kTensorMapL2Promotion256B ==
              CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
static_assert(cu::kTensorMapFloatOOBFillNone ==
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
static_assert(cu::kLaunchAttributeProgrammaticStreamSerialization ==
              CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
static_assert(cu::kLaunchAttributeProgrammaticStreamSerialization == 6);
static_assert(cu::kLaunchAttributeClusterDimension ==
              CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
static_assert(cu::kLaunchAttributeClusterDimension == 4);

// Types.
static_assert(sizeof(cu::TensorMap) == sizeof(CUtensorMap));
// CUDA 12's cuda.h aligns CUtensorMap to 64 bytes, CUDA 13's to 128.
static_assert(alignof(cu::TensorMap) == alignof(CUtensorMap) ||
              (alignof(CUtensorMap) == 64 && alignof(cu::TensorMap) == 128));
static_assert(sizeof(cu::TensorMap) == 128 && alignof(cu::TensorMap) >= 64);
static_assert(sizeof(cu::Result) == sizeof(CUresult));
static_assert(sizeof(cu::Device) == sizeof(CUdevice));
static_assert(std::is_integral_v<CUdevice>);
static_assert(sizeof(cu::Context) == sizeof(CUcontext));
static_assert(sizeof(cu::Module) == sizeof(CUmodule));
static_assert(sizeof(cu::Function) == sizeof(CUfunction));
static_assert(sizeof(cu::Stream) == sizeof(CUstream));
static_assert(std::is_same_v<cu::DevicePtr, CUdeviceptr>);
static_assert(std::is_same_v<std::uint32_t, cuuint32_t>);
static_assert(std::is_same_v<std::uint64_t, cuuint64_t>);

// cuLaunchKernelEx's configuration, field by field.
static_assert(sizeof(cu::LaunchAttributeID) == sizeof(CUlaunchAttributeID));
static_assert(sizeof(cu::LaunchAttributeValue) ==
                  sizeof(CUlaunchAttributeValue) &&
              sizeof(cu::LaunchAttributeValue) == 64);
static_assert(alignof(cu::LaunchAttributeValue) ==
              alignof(CUlaunchAttributeValue));
static_assert(
    sizeof(cu::LaunchAttributeValue::programmaticStreamSerializationAllowed) ==
    sizeof(CUlaunchAttributeValue::programmaticStreamSerializationAllowed));
static_assert(
    std::is_same_v<decltype(cu::LaunchAttributeValue::
                                programmaticStreamSerializationAllowed),
                   decltype(CUlaunchAttributeValue::
                                programmaticStreamSerializationAllowed)>);
static_assert(offsetof(cu::LaunchAttributeValue,
                       programmaticStreamSerializationAllowed) ==
              offsetof(CUlaunchAttributeValue,
                       programmaticStreamSerializationAllowed));
// The cluster dimension: three unsigned ints x, y, z at the union's start.
using ClusterDim = decltype(cu::LaunchAttributeValue::clusterDim);
using CudaClusterDim = decltype(CUlaunchAttributeValue::clusterDim);
static_assert(sizeof(ClusterDim) == sizeof(CudaClusterDim) &&
              sizeof(ClusterDim) == 12);
static_assert(alignof(ClusterDim) == alignof(CudaClusterDim));
static_assert(offsetof(cu::LaunchAttributeValue, clusterDim) ==
                  offsetof(CUlaunchAttributeValue, clusterDim) &&
              offsetof(cu::LaunchAttributeValue, clusterDim) == 0);
#define MOE_CHECK_CLUSTER_DIM_FIELD(field)                                     \
  static_assert(                                                               \
      offsetof(ClusterDim, field) == offsetof(CudaClusterDim, field) &&        \
          std::is_same_v<decltype(ClusterDim::field),                          \
                         decltype(CudaClusterDim::field)>,                     \
      "LaunchAttributeValue::clusterDim." #field " does not match cuda.h");
MOE_CHECK_CLUSTER_DIM_FIELD(x)
MOE_CHECK_CLUSTER_DIM_FIELD(y)
MOE_CHECK_CLUSTER_DIM_FIELD(z)
#undef MOE_CHECK_CLUSTER_DIM_FIELD
static_assert(sizeof(cu::LaunchAttribute) == sizeof(CUlaunchAttribute));
static_assert(alignof(cu::LaunchAttribute) == alignof(CUlaunchAttribute));
static_assert(offsetof(cu::LaunchAttribute, id) ==
              offsetof(CUlaunchAttribute, id));
static_assert(offsetof(cu::LaunchAttribute, value) ==
                  offsetof(CUlaunchAttribute, value) &&
              offsetof(cu::LaunchAttribute, value) == 8);
static_assert(sizeof(cu::LaunchConfig) == sizeof(CUlaunchConfig));
static_assert(alignof(cu::LaunchConfig) == alignof(CUlaunchConfig));
#define MOE_CHECK_LAUNCH_CONFIG_FIELD(field)                                   \
  static_assert(                                                               \
      offsetof(cu::LaunchConfig, field) == offsetof(CUlaunchConfig, field) &&  \
          sizeof(cu::LaunchConfig::field) == sizeof(CUlaunchConfig::field),    \
      "LaunchConfig::" #field " does not match CUlaunchConfig");
MOE_CHECK_LAUNCH_CONFIG_FIELD(gridDimX)
MOE_CHECK_LAUNCH_CONFIG_FIELD(gridDimY)
MOE_CHECK_LAUNCH_CONFIG_FIELD(gridDimZ)
MOE_CHECK_LAUNCH_CONFIG_FIELD(blockDimX)
MOE_CHECK_LAUNCH_CONFIG_FIELD(blockDimY)
MOE_CHECK_LAUNCH_CONFIG_FIELD(blockDimZ)
MOE_CHECK_LAUNCH_CONFIG_FIELD(sharedMemBytes)
MOE_CHECK_LAUNCH_CONFIG_FIELD(hStream)
MOE_CHECK_LAUNCH_CONFIG_FIELD(attrs)
MOE_CHECK_LAUNCH_CONFIG_FIELD(numAttrs)
#undef MOE_CHECK_LAUNCH_CONFIG_FIELD

#define MOE_CHECK_DRIVER_FUNCTION(member, symbol, ...)                         \
  static_assert(sameSignature(static_cast<decltype(Driver::member)>(nullptr),  \
                              &::symbol),                                      \
                "Driver::" #member " does not match " #symbol " of cuda.h");   \
  static_assert(sameString(#symbol, MOE_STRINGIFY(symbol)),                    \
                "cuda.h binds " #symbol " to another symbol name");
MOE_DRIVER_FUNCTIONS(MOE_CHECK_DRIVER_FUNCTION)
MOE_DRIVER_OPTIONAL_FUNCTIONS(MOE_CHECK_DRIVER_FUNCTION)
#undef MOE_CHECK_DRIVER_FUNCTION
// The copies are dlsym'd by their `_v2` names: those cuda.h binds today.
static_assert(sameString(MOE_STRINGIFY(cuMemcpyDtoHAsync),
                         "cuMemcpyDtoHAsync_v2"));
static_assert(sameString(MOE_STRINGIFY(cuMemcpyHtoDAsync),
                         "cuMemcpyHtoDAsync_v2"));

} // namespace
