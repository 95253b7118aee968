//===- FakeDriver.cpp - a recording stand-in for libcuda ------------------===//

#include "FakeDriver.h"

#include <algorithm>
#include <cstring>

namespace moe_test {
namespace {

// Handles are addresses of these objects, never dereferenced by the runtime.
char contextA, primaryContext, contextB;
struct FakeModule {
  int index;
};
struct FakeFunction {
  std::string symbol;
  int maxDynamicSmem = 48 << 10; // the driver's default opt-in limit
};
// Never destroyed (as gpu() below), so that what a process leaves loaded at
// exit stays reachable for the leak checker.
std::vector<FakeModule *> &modules = *new std::vector<FakeModule *>;
std::vector<FakeFunction *> &functions = *new std::vector<FakeFunction *>;

FakeGpu &gpu() {
  static FakeGpu *instance = new FakeGpu;
  return *instance;
}

cu::Result record(const char *name) {
  gpu().calls.push_back(name);
  return cu::kSuccess;
}

cu::Result fakeInit(unsigned) {
  record("cuInit");
  return gpu().initResult;
}

const char *errorName(cu::Result result) {
  switch (result) {
  case cu::kErrorInvalidValue:
    return "CUDA_ERROR_INVALID_VALUE";
  case cu::kErrorOutOfMemory:
    return "CUDA_ERROR_OUT_OF_MEMORY";
  case cu::kErrorNoDevice:
    return "CUDA_ERROR_NO_DEVICE";
  case cu::kErrorInvalidImage:
    return "CUDA_ERROR_INVALID_IMAGE";
  case cu::kErrorNotFound:
    return "CUDA_ERROR_NOT_FOUND";
  default:
    return nullptr;
  }
}

cu::Result fakeGetErrorName(cu::Result result, const char **name) {
  // Not recorded: error reporting is not a GPU operation.
  *name = errorName(result);
  return *name ? cu::kSuccess : cu::kErrorInvalidValue;
}

cu::Result fakeGetErrorString(cu::Result result, const char **text) {
  *text = errorName(result) ? "fake driver error" : nullptr;
  return *text ? cu::kSuccess : cu::kErrorInvalidValue;
}

cu::Result fakeCtxGetCurrent(cu::Context *context) {
  record("cuCtxGetCurrent");
  *context = gpu().current;
  return cu::kSuccess;
}

cu::Result fakeCtxSetCurrent(cu::Context context) {
  record("cuCtxSetCurrent");
  gpu().current = context;
  return cu::kSuccess;
}

cu::Result fakeCtxGetDevice(cu::Device *device) {
  record("cuCtxGetDevice");
  if (!gpu().current)
    return cu::kErrorInvalidContext;
  *device = 0;
  return cu::kSuccess;
}

cu::Result fakeCtxGetId(cu::Context context, unsigned long long *id) {
  record("cuCtxGetId");
  if (context == fakeContextA())
    *id = 11;
  else if (context == fakePrimaryContext())
    *id = 22;
  else if (context == fakeContextB())
    *id = 33;
  else
    return cu::kErrorInvalidContext;
  return cu::kSuccess;
}

cu::Result fakeDeviceGet(cu::Device *device, int ordinal) {
  record("cuDeviceGet");
  if (ordinal != 0)
    return cu::kErrorInvalidValue;
  *device = 0;
  return cu::kSuccess;
}

cu::Result fakeDeviceGetAttribute(int *value, cu::DeviceAttribute attribute,
                                  cu::Device) {
  record("cuDeviceGetAttribute");
  switch (attribute) {
  case cu::kDevAttrComputeCapabilityMajor:
    *value = gpu().ccMajor;
    return cu::kSuccess;
  case cu::kDevAttrComputeCapabilityMinor:
    *value = gpu().ccMinor;
    return cu::kSuccess;
  case cu::kDevAttrMaxSharedMemoryPerBlockOptin:
    *value = gpu().maxSharedOptin;
    return cu::kSuccess;
  case cu::kDevAttrMultiprocessorCount:
    *value = gpu().smCount;
    return gpu().smCountResult;
  default:
    return cu::kErrorInvalidValue;
  }
}

cu::Result fakePrimaryCtxRetain(cu::Context *context, cu::Device) {
  record("cuDevicePrimaryCtxRetain");
  ++gpu().primaryRetains;
  *context = fakePrimaryContext();
  return cu::kSuccess;
}

cu::Result fakeModuleLoadData(cu::Module *module, const void *image) {
  record("cuModuleLoadData");
  if (gpu().loadResult != cu::kSuccess)
    return gpu().loadResult;
  if (gpu().recordImages)
    gpu().loadedImages.push_back(
        std::string(static_cast<const char *>(image), 16));
  modules.push_back(new FakeModule{int(modules.size())});
  ++gpu().liveModules;
  *module = reinterpret_cast<cu::Module>(modules.back());
  return cu::kSuccess;
}

cu::Result fakeModuleUnload(cu::Module) {
  record("cuModuleUnload");
  --gpu().liveModules;
  gpu().unloadContexts.push_back(gpu().current);
  return cu::kSuccess;
}

cu::Result fakeModuleGetFunction(cu::Function *function, cu::Module module,
                                 const char *name) {
  record("cuModuleGetFunction");
  if (!module)
    return cu::kErrorInvalidValue;
  if (gpu().missingSymbols.count(name))
    return cu::kErrorNotFound;
  // One handle per symbol: two entries naming the same kernel share it.
  for (FakeFunction *existing : functions)
    if (existing->symbol == name) {
      *function = reinterpret_cast<cu::Function>(existing);
      return cu::kSuccess;
    }
  functions.push_back(new FakeFunction{name});
  *function = reinterpret_cast<cu::Function>(functions.back());
  return cu::kSuccess;
}

cu::Result fakeFuncGetAttribute(int *value, cu::FunctionAttribute attribute,
                                cu::Function) {
  record("cuFuncGetAttribute");
  if (attribute != cu::kFuncAttrMaxThreadsPerBlock)
    return cu::kErrorInvalidValue;
  *value = gpu().maxThreadsPerBlock;
  return cu::kSuccess;
}

cu::Result fakeFuncSetAttribute(cu::Function function,
                                cu::FunctionAttribute attribute, int value) {
  record("cuFuncSetAttribute");
  if (attribute != cu::kFuncAttrMaxDynamicSharedSizeBytes)
    return cu::kErrorInvalidValue;
  auto *fake = reinterpret_cast<FakeFunction *>(function);
  fake->maxDynamicSmem = value;
  gpu().smemAttributes.push_back({fake->symbol, value});
  return cu::kSuccess;
}

cu::Result fakeOccupancy(int *blocks, cu::Function function, int threads,
                         size_t smem) {
  record("cuOccupancyMaxActiveBlocksPerMultiprocessor");
  auto *fake = reinterpret_cast<FakeFunction *>(function);
  gpu().occupancyQueries.push_back({fake->symbol, threads, smem});
  if (gpu().occupancyResult != cu::kSuccess)
    return gpu().occupancyResult;
  auto it = gpu().ctasPerSm.find(fake->symbol);
  if (smem > size_t(fake->maxDynamicSmem))
    *blocks = 0;
  else if (it != gpu().ctasPerSm.end())
    *blocks = it->second;
  else
    *blocks = smem > (114u << 10) ? 1 : 4;
  return cu::kSuccess;
}

/// The attributes of a launch configuration, as recorded.
std::vector<FakeLaunchAttribute> recordAttributes(const cu::LaunchConfig &c) {
  std::vector<FakeLaunchAttribute> recorded;
  for (unsigned i = 0; i < c.numAttrs; ++i) {
    const cu::LaunchAttribute &attribute = c.attrs[i];
    FakeLaunchAttribute one;
    one.id = attribute.id;
    std::memcpy(&one.value, &attribute.value, sizeof(one.value));
    std::memcpy(one.dims, &attribute.value, sizeof(one.dims));
    one.restOfValueZero = one.restOfDimsZero = true;
    for (size_t b = sizeof(one.value); b < sizeof(attribute.value); ++b)
      one.restOfValueZero &= attribute.value.pad[b] == 0;
    for (size_t b = sizeof(one.dims); b < sizeof(attribute.value); ++b)
      one.restOfDimsZero &= attribute.value.pad[b] == 0;
    recorded.push_back(one);
  }
  return recorded;
}

/// The cluster dimension among `attributes` (null if none), as the driver
/// checks it: every size at least 1, the grid whole clusters.
const FakeLaunchAttribute *
clusterOf(const std::vector<FakeLaunchAttribute> &attributes) {
  for (const FakeLaunchAttribute &attribute : attributes)
    if (attribute.id == cu::kLaunchAttributeClusterDimension)
      return &attribute;
  return nullptr;
}

bool wholeClusters(const FakeLaunchAttribute &cluster, const unsigned *grid) {
  for (int d = 0; d < 3; ++d)
    if (cluster.dims[d] < 1 || grid[d] % cluster.dims[d])
      return false;
  return true;
}

/// What a launch configuration says, into a recorded launch or occupancy
/// query.
template <typename Record>
void recordConfig(Record &out, const cu::LaunchConfig &config) {
  out.grid[0] = config.gridDimX;
  out.grid[1] = config.gridDimY;
  out.grid[2] = config.gridDimZ;
  out.block[0] = config.blockDimX;
  out.block[1] = config.blockDimY;
  out.block[2] = config.blockDimZ;
  out.smem = config.sharedMemBytes;
  out.stream = config.hStream;
  out.attributes = recordAttributes(config);
}

cu::Result fakeOccupancyClusters(int *clusters, cu::Function function,
                                 const cu::LaunchConfig *config) {
  record("cuOccupancyMaxActiveClusters");
  if (!config || (config->numAttrs && !config->attrs))
    return cu::kErrorInvalidValue;
  auto *fake = reinterpret_cast<FakeFunction *>(function);
  FakeClusterOccupancy query;
  query.function = fake->symbol;
  recordConfig(query, *config);
  gpu().clusterOccupancyQueries.push_back(query);
  if (gpu().clusterOccupancyResult != cu::kSuccess)
    return gpu().clusterOccupancyResult;
  const FakeLaunchAttribute *cluster = clusterOf(query.attributes);
  if (!cluster || !wholeClusters(*cluster, query.grid))
    return cu::kErrorInvalidValue;
  auto it = gpu().activeClusters.find(fake->symbol);
  if (config->sharedMemBytes > unsigned(fake->maxDynamicSmem))
    *clusters = 0;
  else if (it != gpu().activeClusters.end())
    *clusters = it->second;
  else
    *clusters = gpu().smCount / 2;
  return cu::kSuccess;
}

/// Records `launch`; fails it if it is the configured one.
cu::Result finishLaunch(const FakeLaunch &launch) {
  int number = int(gpu().launches.size());
  gpu().launches.push_back(launch);
  if (number == gpu().failLaunchNumber)
    return gpu().launchResult;
  return cu::kSuccess;
}

/// Records a launch of `function` with `params` whatever entry point took
/// it; `launch` has its grid, block, smem, stream and extra filled.
cu::Result recordLaunch(FakeLaunch &launch, cu::Function function,
                        void **params) {
  launch.function = reinterpret_cast<FakeFunction *>(function)->symbol;
  auto raw = gpu().rawParams.find(launch.function);
  if (raw != gpu().rawParams.end()) {
    for (size_t i = 0; i < raw->second.size(); ++i) {
      const uint8_t *bytes = static_cast<const uint8_t *>(params[i]);
      launch.raw.emplace_back(bytes, bytes + raw->second[i]);
    }
    return finishLaunch(launch);
  }
  auto words = gpu().wordParams.find(launch.function);
  if (words != gpu().wordParams.end()) {
    launch.numParams = words->second;
    launch.params.resize(size_t(words->second));
    for (int i = 0; i < words->second; ++i)
      std::memcpy(&launch.params[i], params[i], 8);
    return finishLaunch(launch);
  }
  if (!gpu().readUndeclaredParams) {
    launch.numParams = 0;
    return finishLaunch(launch);
  }
  launch.mapsAligned =
      uintptr_t(params[0]) % 64 == 0 && uintptr_t(params[1]) % 64 == 0;
  for (int i = 0; i < 2; ++i) {
    cu::TensorMap map;
    std::memcpy(&map, params[i], sizeof(map));
    launch.mapEncode[i] = int(map.opaque[0]) - 1;
  }
  for (int i = 0; i < 12; ++i)
    std::memcpy(&launch.words[i], params[2 + i], 8);
  for (int i = 0; i < 3; ++i)
    std::memcpy(&launch.ints[i], params[14 + i], 4);
  auto count = gpu().numParams.find(launch.function);
  if (count != gpu().numParams.end())
    launch.numParams = count->second;
  if (launch.numParams == 22)
    for (int i = 0; i < 5; ++i)
      std::memcpy(&launch.scale[i], params[17 + i], 8);
  launch.tail.resize(size_t(std::max(launch.numParams - 17, 0)));
  for (size_t i = 0; i < launch.tail.size(); ++i)
    std::memcpy(&launch.tail[i], params[17 + i], 8);
  return finishLaunch(launch);
}

cu::Result fakeLaunchKernel(cu::Function function, unsigned gridX,
                            unsigned gridY, unsigned gridZ, unsigned blockX,
                            unsigned blockY, unsigned blockZ, unsigned smem,
                            cu::Stream stream, void **params, void **extra) {
  record("cuLaunchKernel");
  FakeLaunch launch;
  launch.grid[0] = gridX;
  launch.grid[1] = gridY;
  launch.grid[2] = gridZ;
  launch.block[0] = blockX;
  launch.block[1] = blockY;
  launch.block[2] = blockZ;
  launch.smem = smem;
  launch.stream = stream;
  launch.extraIsNull = extra == nullptr;
  return recordLaunch(launch, function, params);
}

cu::Result fakeLaunchKernelEx(const cu::LaunchConfig *config,
                              cu::Function function, void **params,
                              void **extra) {
  record("cuLaunchKernelEx");
  if (!config || (config->numAttrs && !config->attrs))
    return cu::kErrorInvalidValue;
  FakeLaunch launch;
  launch.ex = true;
  recordConfig(launch, *config);
  launch.extraIsNull = extra == nullptr;
  // The driver refuses a grid of partial clusters.
  const FakeLaunchAttribute *cluster = clusterOf(launch.attributes);
  if (cluster && !wholeClusters(*cluster, launch.grid))
    return cu::kErrorInvalidValue;
  return recordLaunch(launch, function, params);
}

cu::Result fakeTensorMapEncodeTiled(
    cu::TensorMap *map, cu::TensorMapDataType dataType, uint32_t rank,
    void *address, const uint64_t *dims, const uint64_t *strides,
    const uint32_t *box, const uint32_t *elementStrides,
    cu::TensorMapInterleave interleave, cu::TensorMapSwizzle swizzle,
    cu::TensorMapL2Promotion l2Promotion, cu::TensorMapFloatOOBFill oobFill) {
  record("cuTensorMapEncodeTiled");
  if (gpu().encodeResult != cu::kSuccess)
    return gpu().encodeResult;
  FakeEncode encode;
  encode.dataType = dataType;
  encode.rank = rank;
  encode.address = uint64_t(uintptr_t(address));
  for (uint32_t i = 0; i < rank && i < 5; ++i) {
    encode.dims[i] = dims[i];
    encode.box[i] = box[i];
    encode.elementStrides[i] = elementStrides[i];
    if (i + 1 < rank)
      encode.strides[i] = strides[i];
  }
  encode.interleave = interleave;
  encode.swizzle = swizzle;
  encode.l2Promotion = l2Promotion;
  encode.oobFill = oobFill;
  gpu().encodes.push_back(encode);
  // Tag the map with its encode number so launches can be matched to it.
  std::memset(map, 0, sizeof(*map));
  map->opaque[0] = gpu().encodes.size();
  return cu::kSuccess;
}

// Device memory is host memory here: the copies are memcpy (not recorded,
// so that the exchange tests' ranks may run them on threads of their own).
cu::Result fakeMemcpyDtoHAsync(void *dst, cu::DevicePtr src, size_t bytes,
                               cu::Stream) {
  std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
  return cu::kSuccess;
}

cu::Result fakeMemcpyHtoDAsync(cu::DevicePtr dst, const void *src, size_t bytes,
                               cu::Stream) {
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  return cu::kSuccess;
}

cu::Result fakeStreamSynchronize(cu::Stream) { return cu::kSuccess; }

} // namespace

FakeGpu &fakeGpu() { return gpu(); }
cu::Context fakeContextA() { return reinterpret_cast<cu::Context>(&contextA); }
cu::Context fakePrimaryContext() {
  return reinterpret_cast<cu::Context>(&primaryContext);
}
cu::Context fakeContextB() { return reinterpret_cast<cu::Context>(&contextB); }

const Driver &fakeDriverTable(bool withLaunchKernelEx,
                              bool withMaxActiveClusters) {
  static const Driver table = [] {
    Driver d;
    d.init = fakeInit;
    d.getErrorName = fakeGetErrorName;
    d.getErrorString = fakeGetErrorString;
    d.ctxGetCurrent = fakeCtxGetCurrent;
    d.ctxSetCurrent = fakeCtxSetCurrent;
    d.ctxGetDevice = fakeCtxGetDevice;
    d.ctxGetId = fakeCtxGetId;
    d.deviceGet = fakeDeviceGet;
    d.deviceGetAttribute = fakeDeviceGetAttribute;
    d.devicePrimaryCtxRetain = fakePrimaryCtxRetain;
    d.moduleLoadData = fakeModuleLoadData;
    d.moduleUnload = fakeModuleUnload;
    d.moduleGetFunction = fakeModuleGetFunction;
    d.funcGetAttribute = fakeFuncGetAttribute;
    d.funcSetAttribute = fakeFuncSetAttribute;
    d.occupancyMaxActiveBlocksPerMultiprocessor = fakeOccupancy;
    d.launchKernel = fakeLaunchKernel;
    d.launchKernelEx = fakeLaunchKernelEx;
    d.occupancyMaxActiveClusters = fakeOccupancyClusters;
    d.tensorMapEncodeTiled = fakeTensorMapEncodeTiled;
    d.memcpyDtoHAsync = fakeMemcpyDtoHAsync;
    d.memcpyHtoDAsync = fakeMemcpyHtoDAsync;
    d.streamSynchronize = fakeStreamSynchronize;
    return d;
  }();
  // Without cuLaunchKernelEx (older than CUDA 12.0), without
  // cuOccupancyMaxActiveClusters (older than 11.8), or without both.
  static const Driver without[3] = {[] {
                                      Driver d = table;
                                      d.launchKernelEx = nullptr;
                                      return d;
                                    }(),
                                    [] {
                                      Driver d = table;
                                      d.occupancyMaxActiveClusters = nullptr;
                                      return d;
                                    }(),
                                    [] {
                                      Driver d = table;
                                      d.launchKernelEx = nullptr;
                                      d.occupancyMaxActiveClusters = nullptr;
                                      return d;
                                    }()};
  if (withLaunchKernelEx && withMaxActiveClusters)
    return table;
  return without[withLaunchKernelEx ? 1 : withMaxActiveClusters ? 0 : 2];
}

FakeGpu &installFakeDriver(bool withLaunchKernelEx,
                           bool withMaxActiveClusters) {
  FakeGpu &state = gpu();
  state = FakeGpu();
  state.current = fakeContextA();
  for (FakeModule *module : modules)
    delete module;
  modules.clear();
  for (FakeFunction *function : functions)
    delete function;
  functions.clear();
  setDriverForTesting(
      &fakeDriverTable(withLaunchKernelEx, withMaxActiveClusters));
  return state;
}

bool isPdlLaunch(const FakeLaunch &launch) {
  return launch.ex && launch.attributes.size() == 1 &&
         launch.attributes[0].id == 6 && launch.attributes[0].value == 1 &&
         launch.attributes[0].restOfValueZero;
}

bool isClusterLaunch(const FakeLaunch &launch, bool pdl) {
  if (!launch.ex || launch.attributes.size() != (pdl ? 2u : 1u))
    return false;
  const FakeLaunchAttribute &cluster = launch.attributes[0];
  if (cluster.id != 4 || cluster.dims[0] != 2 || cluster.dims[1] != 1 ||
      cluster.dims[2] != 1 || !cluster.restOfDimsZero)
    return false;
  return !pdl ||
         (launch.attributes[1].id == 6 && launch.attributes[1].value == 1 &&
          launch.attributes[1].restOfValueZero);
}

std::string callsSince(size_t from) {
  std::string joined;
  for (size_t i = from; i < gpu().calls.size(); ++i)
    joined += (joined.empty() ? "" : " ") + gpu().calls[i];
  return joined;
}

} // namespace moe_test
