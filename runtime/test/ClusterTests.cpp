//===- ClusterTests.cpp - grouped GEMM kernels as 2-CTA clusters ----------===//
//
// Contract §2 and §3.1 (added within version 6): the optional kernel key
// `cluster` (1, or 2 for grouped matmul kernels with swap_ab=0) and what a
// cluster kernel changes in the runtime: its residency in clusters
// (cuOccupancyMaxActiveClusters at load, else ctas_per_sm * sm_count / 2),
// which is what `resident` means in its launch plan's grid (the plan writes
// 2 * min(work, resident clusters): whole clusters), and its launch
// (cuLaunchKernelEx with the cluster dimension (2, 1, 1), then PDL's
// attribute), also as a layer's step. The bundle is clusterPlanBundle()
// (PlanBundles.h); the fake device has 132 multiprocessors, 1 CTA of a
// kernel with more than 114 KiB of shared memory per multiprocessor (else
// 4) and, unless told, 66 resident clusters of any cluster kernel.
//
//===----------------------------------------------------------------------===//

#include "Bundle.h"
#include "FakeDriver.h"
#include "LaunchChecks.h"
#include "PlanBundles.h"
#include "TestBundles.h"
#include "TestHarness.h"

#include <string>
#include <vector>

using namespace moe_test;

namespace {

constexpr uint64_t kTb = uint64_t(1) << 40;

/// The fake's kernels of clusterPlanBundle(): the router's parameters.
FakeGpu &install(bool withLaunchKernelEx = true,
                 bool withMaxActiveClusters = true) {
  FakeGpu &gpu = installFakeDriver(withLaunchKernelEx, withMaxActiveClusters);
  declareParams(gpu, kRouteSoftmax, kClusterRouterParams);
  return gpu;
}

/// Runs `entry` (E = 8, K = 4096) for M = `m` rows and N = `n` columns on
/// the stream; returns its launches (none when the call fails, which one
/// check reports).
std::vector<FakeLaunch> launch(moeBundle *bundle, const char *entry, int64_t m,
                               int64_t n) {
  FakeGpu &gpu = fakeGpu();
  size_t before = gpu.launches.size();
  int64_t sizes[] = {m, n};
  uint64_t args[] = {kTb, 2 * kTb, 3 * kTb, 4 * kTb};
  moeLaunchArgs a = {sizes, 2, 4, args, 0, 0};
  moeStatus status = moeLaunch(bundle, entry, &a, testStream());
  CHECK_EQ(status, MOE_STATUS_SUCCESS);
  if (status != MOE_STATUS_SUCCESS)
    return {};
  return std::vector<FakeLaunch>(gpu.launches.begin() + long(before),
                                 gpu.launches.end());
}

/// "symbol:gridX" of each launch, joined by ' '.
std::string grids(const std::vector<FakeLaunch> &launches) {
  std::string joined;
  for (const FakeLaunch &launch : launches)
    joined += (joined.empty() ? "" : " ") + launch.function + ":" +
              std::to_string(launch.grid[0]);
  return joined;
}

std::string cluster(unsigned gridX) {
  return std::string(kCluster128) + ":" + std::to_string(gridX);
}
std::string swapAB(unsigned gridX) {
  return std::string(kSwapAB32) + ":" + std::to_string(gridX);
}

} // namespace

TEST(clusterKeyParses) {
  // Absent: 1; cluster=1 on any kernel; cluster=2 on grouped matmul kernels.
  const std::string bytes = clusterBundle();
  moe::runtime::BundleData data;
  std::string error;
  CHECK_EQ(
      moe::runtime::parseBundle(reinterpret_cast<const uint8_t *>(bytes.data()),
                                bytes.size(), data, error),
      MOE_STATUS_SUCCESS);
  CHECK_EQ(error, std::string());
  std::string clusters;
  for (const moe::runtime::Entry &entry : data.entries)
    for (const moe::runtime::Kernel &kernel : entry.kernels)
      clusters += entry.name + ":" + std::to_string(kernel.cluster) + " ";
  CHECK_EQ(clusters, "cgemm:1 cgemm:2 cfp8:2 cone:1 cshare:2 router:1 ");
  // The C API opens it as well.
  moeBundle *bundle = OPEN_VALID(bytes);
  moeBundleClose(bundle);
}

TEST(clusterKeyRefusals) {
  const moeStatus bad = MOE_STATUS_INVALID_BUNDLE;
  const std::string clusterLine =
      withCluster(kernelLine("cgemm", kCluster128, "moe_kernels", 17,
                             2147483647, 128, 256, 200000, 0),
                  2);
  const std::string swapLine =
      kernelLine("cgemm", kSwapAB32, "moe_kernels", 1, 16, 16, 64, 81920, 1);
  auto in = [](const std::string &from, const std::string &to) {
    return replaced(from, to, clusterBundle());
  };
  const std::string who =
      "bundle line 6: kernel '" + std::string(kCluster128) + "': ";
  checkRefused("cluster=3", in(" cluster=2\n", " cluster=3\n"), bad,
               who + "cluster=3 is out of range ([1, 2])");
  checkRefused("cluster=0", in(" cluster=2\n", " cluster=0\n"), bad,
               who + "cluster=0 is out of range ([1, 2])");
  checkRefused("cluster=-2", in(" cluster=2\n", " cluster=-2\n"), bad,
               who + "cluster=-2 is out of range ([1, 2])");
  checkRefused("cluster=02", in(" cluster=2\n", " cluster=02\n"), bad,
               who + "cluster='02' is not a decimal integer");
  checkRefused("cluster=", in(" cluster=2\n", " cluster=\n"), bad,
               who + "cluster='' is not a decimal integer");
  checkRefused("cluster twice", in(" cluster=2\n", " cluster=2 cluster=2\n"),
               bad, who + "duplicate key 'cluster'");
  // The swap-AB form keeps its CTAs apart.
  checkRefused("cluster=2 with swap_ab=1",
               in(swapLine, withCluster(swapLine, 2)), bad,
               "bundle line 5: kernel '" + std::string(kSwapAB32) +
                   "': cluster=2 with swap_ab=1: only the normal form "
                   "(swap_ab=0) runs as a cluster of 2 CTAs sharing a row "
                   "tile");
  // The order of the keys does not matter.
  checkRefused(
      "cluster=2 before swap_ab=1",
      in(swapLine, replaced(" swap_ab=1", " cluster=2 swap_ab=1", swapLine)),
      bad,
      "bundle line 5: kernel '" + std::string(kSwapAB32) +
          "': cluster=2 with swap_ab=1");
  // Only grouped matmul kernels run as clusters.
  checkRefused(
      "cluster=2 on a route kernel",
      in("threads=128 smem=0 cluster=1\n", "threads=128 smem=0 cluster=2\n"),
      bad,
      "bundle line 14: kernel '" + std::string(kRouteSoftmax) +
          "': cluster=2, but entry 'router' has abi route.v1: only "
          "the kernels of grouped_matmul.v3 and "
          "grouped_matmul_fp8.v1 entries run as clusters of 2 CTAs");
  checkRefused("cluster=2 on a permute kernel",
               replaced(" threads=1024 smem=0\n",
                        " threads=1024 smem=0 cluster=2\n", permuteBundle()),
               bad,
               "kernel '" + std::string(kPermCount64) +
                   "': cluster=2, but entry 'perm' has abi permute.v2");
  checkRefused("cluster=2 on a quantize kernel",
               replaced(" threads=256 smem=0\n",
                        " threads=256 smem=0 cluster=2\n", quantizeBundle()),
               bad,
               "bundle line 5: kernel '" + std::string(kQuantMx) +
                   "': cluster=2, but entry 'mx' has abi quantize.v1");
  checkRefused(
      "cluster=3 on a route kernel",
      in("threads=128 smem=0 cluster=1\n", "threads=128 smem=0 cluster=3\n"),
      bad, "cluster=3 is out of range ([1, 2])");
  // Clusters need sm_90: a bundle for an older chip is not opened at all.
  checkRefused("cluster=2 on sm_80", in("chip sm_90a\n", "chip sm_80\n"),
               MOE_STATUS_UNSUPPORTED,
               "bundle line 2: chip 'sm_80' is not supported (this runtime "
               "runs bundles for sm_90a, sm_100a)");
  // A cluster is no entry key.
  checkRefused("cluster on an entry",
               in("offsets=i32\n", "offsets=i32 cluster=2\n"), bad,
               "bundle line 4: entry 'cgemm': unknown key 'cluster'");
  // Still a kernel line with every other check.
  checkRefused("cluster=2 without stages",
               in(clusterLine, replaced(" stages=4", "", clusterLine)), bad,
               who + "missing key 'stages'");
}

TEST(clusterResidencyQueriedAtLoad) {
  FakeGpu &gpu = install();
  moeBundle *bundle = OPEN_VALID(clusterBundle());
  if (!bundle)
    return;
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  // One query per (function, threads, smem, cluster): cgemm's and cshare's
  // kCluster128 share one; each after its smem attribute was set.
  CHECK_EQ(gpu.clusterOccupancyQueries.size(), size_t(2));
  if (gpu.clusterOccupancyQueries.size() == 2) {
    const FakeClusterOccupancy &q = gpu.clusterOccupancyQueries[0];
    CHECK_EQ(q.function, std::string(kCluster128));
    CHECK_EQ(q.grid[0], 2u); // one cluster
    CHECK_EQ(q.grid[1], 1u);
    CHECK_EQ(q.grid[2], 1u);
    CHECK_EQ(q.block[0], 128u);
    CHECK_EQ(q.block[1], 1u);
    CHECK_EQ(q.block[2], 1u);
    CHECK_EQ(q.smem, 200000u);
    CHECK(q.stream == nullptr);
    CHECK_EQ(q.attributes.size(), size_t(1));
    if (q.attributes.size() == 1) {
      CHECK_EQ(q.attributes[0].id, 4); // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
      CHECK_EQ(q.attributes[0].dims[0], 2u);
      CHECK_EQ(q.attributes[0].dims[1], 1u);
      CHECK_EQ(q.attributes[0].dims[2], 1u);
      CHECK(q.attributes[0].restOfDimsZero);
    }
    CHECK_EQ(gpu.clusterOccupancyQueries[1].function,
             std::string(kClusterFp8Out));
    CHECK_EQ(gpu.clusterOccupancyQueries[1].smem, 98304u);
  }
  // The other kernels' CTAs per multiprocessor, not the cluster kernels'.
  std::string perSm;
  for (const FakeOccupancy &q : gpu.occupancyQueries)
    perSm += q.function + " ";
  CHECK_EQ(perSm, std::string(kSwapAB32) + " " + kNormal32 + " " +
                      kRouteSoftmax + " ");
  std::string calls = callsSince(0);
  CHECK(calls.rfind("cuFuncSetAttribute") < calls.find("cuOccupancy"));
  moeBundleClose(bundle);
}

TEST(clusterResidentIsClustersInGrids) {
  FakeGpu &gpu = install();
  moeBundle *bundle = OPEN_VALID(clusterPlanBundle());
  if (!bundle)
    return;
  // The plan's grid: 2 * min(work, resident clusters), work = slots *
  // ceil(ceil(N / 256) / 2) (pairs of column tiles). M = 17: the cluster
  // kernel has slots = ceil(17/128) + min(8, 17/17) = 2; the swap-AB one
  // min(2 + 8, 8) = 8 slots of ceil(N/64) column tiles, capped by its 528
  // resident CTAs. N = 768: 3 column tiles make 2 pairs: 4 clusters.
  CHECK_EQ(grids(launch(bundle, "cgemm", 17, 768)),
           swapAB(96) + " " + cluster(8));
  // N = 256: one column tile, one pair: 2 clusters; N = 1 as well.
  CHECK_EQ(grids(launch(bundle, "cgemm", 17, 256)),
           swapAB(32) + " " + cluster(4));
  CHECK_EQ(grids(launch(bundle, "cgemm", 17, 1)), swapAB(8) + " " + cluster(4));
  // N = 1280: 5 column tiles, 3 pairs: 6 clusters.
  CHECK_EQ(grids(launch(bundle, "cgemm", 17, 1280)),
           swapAB(160) + " " + cluster(12));
  // M = 8192, N = 28672: 72 slots * 56 pairs = 4032 clusters > 66.
  CHECK_EQ(grids(launch(bundle, "cgemm", 8192, 28672)),
           swapAB(528) + " " + cluster(132));
  // cshare (rows_min = 1), M = 300: slots ceil(300/128) + min(8, 300) = 11,
  // N = 1024: 4 column tiles, 2 pairs: 22 clusters.
  CHECK_EQ(grids(launch(bundle, "cshare", 300, 1024)), cluster(44));
  // An explicit cluster=1 is resident in CTAs: min(slots * 4, 132).
  CHECK_EQ(grids(launch(bundle, "cone", 300, 1024)),
           std::string(kNormal32) + ":" + std::to_string((5 + 8) * 4));
  CHECK_EQ(grids(launch(bundle, "cone", 8192, 28672)),
           std::string(kNormal32) + ":132");
  moeBundleClose(bundle);

  // The residency the driver reports is `resident`: 50 clusters, 100 CTAs.
  install();
  gpu.activeClusters[kCluster128] = 50;
  bundle = OPEN_VALID(clusterPlanBundle());
  if (!bundle)
    return;
  CHECK_EQ(grids(launch(bundle, "cgemm", 8192, 28672)),
           swapAB(528) + " " + cluster(100));
  // cshare: 2048 rows give 16 + 8 slots * 56 pairs, above it; 16 rows 1 + 8
  // slots * 1 pair, below it.
  CHECK_EQ(grids(launch(bundle, "cshare", 2048, 28672)), cluster(100));
  CHECK_EQ(grids(launch(bundle, "cshare", 16, 512)), cluster(18));
  // Every launch of a cluster kernel is whole clusters.
  for (const FakeLaunch &l : gpu.launches)
    if (l.function == kCluster128)
      CHECK_EQ(l.grid[0] % 2, 0u);
  moeBundleClose(bundle);
}

TEST(clusterResidencyWithoutTheQuery) {
  // A driver without cuOccupancyMaxActiveClusters: floor(ctas_per_sm *
  // sm_count / 2) clusters.
  FakeGpu &gpu = install(true, /*withMaxActiveClusters=*/false);
  gpu.smCount = 133;
  gpu.ctasPerSm[kCluster128] = 3;
  moeBundle *bundle = OPEN_VALID(clusterPlanBundle());
  if (!bundle)
    return;
  CHECK_EQ(moeBundleLoad(bundle), MOE_STATUS_SUCCESS);
  CHECK_EQ(callsSince(0).find("cuOccupancyMaxActiveClusters"),
           std::string::npos);
  CHECK(gpu.clusterOccupancyQueries.empty());
  // 3 * 133 / 2 = 199 clusters; the swap-AB kernel 4 * 133 CTAs.
  CHECK_EQ(grids(launch(bundle, "cgemm", 8192, 28672)),
           swapAB(532) + " " + cluster(398));
  // Below the cap: the work, as with the query.
  CHECK_EQ(grids(launch(bundle, "cgemm", 17, 768)),
           swapAB(96) + " " + cluster(8));
  // One query per function, threads and smem, as for every kernel: cgemm's
  // and cshare's share one.
  size_t clusterQueries = 0;
  for (const FakeOccupancy &q : gpu.occupancyQueries)
    if (q.function == kCluster128) {
      ++clusterQueries;
      CHECK_EQ(q.threads, 128);
      CHECK_EQ(q.smem, size_t(200000));
    }
  CHECK_EQ(clusterQueries, size_t(1));
  // Launches still carry the cluster dimension.
  for (const FakeLaunch &l : gpu.launches)
    if (l.function == kCluster128)
      CHECK(isClusterLaunch(l, true));
  moeBundleClose(bundle);
}

TEST(clusterResidencyErrors) {
  const std::string where = "moeBundleLoad: kernel '" +
                            std::string(kCluster128) + "' (entry 'cgemm') ";
  // No resident cluster: refused at load, nothing left loaded.
  FakeGpu &gpu = install();
  gpu.activeClusters[kCluster128] = 0;
  moeBundle *bundle = OPEN_VALID(clusterBundle());
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               where + "cannot be resident as a cluster of 2 CTAs: 128 "
                       "threads, 200000 bytes of shared memory, 132 "
                       "multiprocessors");
  CHECK_EQ(gpu.liveModules, 0);
  moeBundleClose(bundle);
  // The query fails.
  install();
  gpu.clusterOccupancyResult = cu::kErrorInvalidValue;
  bundle = OPEN_VALID(clusterBundle());
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_CUDA_ERROR,
               "moeBundleLoad: cuOccupancyMaxActiveClusters('" +
                   std::string(kCluster128) +
                   "', cluster (2, 1, 1), 128 threads, 200000 bytes) failed: "
                   "CUDA_ERROR_INVALID_VALUE");
  CHECK_EQ(gpu.liveModules, 0);
  moeBundleClose(bundle);
  // Without the query: one CTA on one multiprocessor is no cluster.
  install(true, false);
  gpu.smCount = 1;
  bundle = OPEN_VALID(clusterBundle());
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               where + "cannot be resident as a cluster of 2 CTAs: 1 CTAs per "
                       "multiprocessor, 1 multiprocessors");
  CHECK_EQ(gpu.liveModules, 0);
  // ... and 0 CTAs per multiprocessor is the usual error.
  gpu.smCount = 132;
  gpu.ctasPerSm[kCluster128] = 0;
  CHECK_STATUS(moeBundleLoad(bundle), MOE_STATUS_UNSUPPORTED,
               where + "cannot be resident: 128 threads, 200000 bytes");
  moeBundleClose(bundle);
}

TEST(clusterLaunchAttributes) {
  // PDL on (default): the cluster dimension, then PDL's attribute; the
  // other kernels PDL's only. MOE_RUNTIME_PDL=0: the cluster dimension
  // alone, the others through cuLaunchKernel. No cuLaunchKernelEx: all
  // through cuLaunchKernel, the same grids (the image sets the cluster).
  for (int mode = 0; mode < 3; ++mode) {
    install(/*withLaunchKernelEx=*/mode != 2);
    moeBundle *bundle = OPEN_VALID(clusterPlanBundle());
    if (!bundle)
      return;
    PdlEnvironment environment(mode == 1 ? "0" : nullptr);
    std::vector<FakeLaunch> launches = launch(bundle, "cgemm", 17, 768);
    CHECK_EQ(grids(launches), swapAB(96) + " " + cluster(8));
    std::vector<FakeLaunch> shared = launch(bundle, "cshare", 300, 1024);
    CHECK_EQ(shared.size(), size_t(1));
    if (launches.size() != 2 || shared.size() != 1) {
      moeBundleClose(bundle);
      continue;
    }
    const FakeLaunch &swap = launches[0], &pair = launches[1];
    if (mode == 0) {
      CHECK(isPdlLaunch(swap));
      CHECK(isClusterLaunch(pair, /*pdl=*/true));
      CHECK(isClusterLaunch(shared[0], true));
    } else if (mode == 1) {
      CHECK(!swap.ex && swap.attributes.empty());
      CHECK(isClusterLaunch(pair, /*pdl=*/false));
      CHECK(isClusterLaunch(shared[0], false));
    } else {
      CHECK(!swap.ex && swap.attributes.empty());
      CHECK(!pair.ex && pair.attributes.empty());
      CHECK(!shared[0].ex && shared[0].attributes.empty());
    }
    // Otherwise a grouped GEMM launch as any: block, smem, parameters.
    CHECK_EQ(pair.block[0], 128u);
    CHECK_EQ(pair.block[1], 1u);
    CHECK_EQ(pair.smem, 200000u);
    CHECK_EQ(pair.stream, testStream());
    CHECK(pair.extraIsNull);
    CHECK_EQ(pair.ints[0], 4096);
    CHECK_EQ(pair.ints[1], 17);
    CHECK_EQ(pair.ints[2], 2147483647);
    moeBundleClose(bundle);
  }
}

TEST(clusterFailedLaunchNamesTheCluster) {
  // The second launch (the cluster kernel) fails, through each entry point.
  const std::string call =
      "('" + std::string(kCluster128) +
      "' of entry 'cgemm', grid (8, 1, 1), block (128, 1, 1), smem 200000, "
      "cluster (2, 1, 1)";
  const char *const expected[3] = {"cuLaunchKernelEx", "cuLaunchKernelEx",
                                   "cuLaunchKernel"};
  const char *const tails[3] = {
      ", programmatic stream serialization; 1 of 2 launches already issued)",
      "; 1 of 2 launches already issued)",
      " from the image; 1 of 2 launches already issued)"};
  for (int mode = 0; mode < 3; ++mode) {
    FakeGpu &gpu = install(/*withLaunchKernelEx=*/mode != 2);
    gpu.failLaunchNumber = 1;
    moeBundle *bundle = OPEN_VALID(clusterPlanBundle());
    PdlEnvironment environment(mode == 1 ? "0" : nullptr);
    int64_t sizes[] = {17, 768};
    uint64_t args[] = {kTb, 2 * kTb, 3 * kTb, 4 * kTb};
    moeLaunchArgs a = {sizes, 2, 4, args, 0, 0};
    CHECK_STATUS(moeLaunch(bundle, "cgemm", &a, nullptr), MOE_STATUS_CUDA_ERROR,
                 "moeLaunch: " + std::string(expected[mode]) + call +
                     tails[mode] + " failed: CUDA_ERROR_INVALID_VALUE");
    moeBundleClose(bundle);
  }
}

namespace {

/// The launches of layerPlanBundle()'s mix for `tokens`, its GEMM kernels
/// clustered or not; `activeClusters` of the gate-up kernel, if not 0.
std::vector<FakeLaunch> layerLaunches(bool clustered, int64_t tokens,
                                      int activeClusters = 0) {
  FakeGpu &gpu = installFakeDriver();
  declareMixKernels(gpu);
  if (activeClusters)
    gpu.activeClusters[kMixSymbols[4]] = activeClusters;
  moeBundle *bundle = OPEN_VALID(layerPlanBundle(clustered));
  if (!bundle)
    return {};
  uint64_t args[] = {kTb, 2 * kTb, 3 * kTb, 4 * kTb, 5 * kTb};
  uint64_t bytes = 0;
  CHECK_EQ(moeWorkspaceBytes(bundle, "mix", &tokens, 1, &bytes),
           MOE_STATUS_SUCCESS);
  moeLaunchArgs a = {&tokens, 1, 5, args, 16 * kTb, bytes};
  CHECK_EQ(moeLaunch(bundle, "mix", &a, testStream()), MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);
  return gpu.launches;
}

/// The layer's launches with clustered GEMMs are those without clusters
/// but for the GEMMs (positions `gemms`, on grids `plainGrids` without
/// clusters): cluster launches on grids `want`.
void checkClusteredLayer(int64_t tokens, const std::vector<size_t> &gemms,
                         const std::vector<unsigned> &plainGrids,
                         const std::vector<unsigned> &want) {
  std::vector<FakeLaunch> plain = layerLaunches(false, tokens);
  std::vector<FakeLaunch> paired = layerLaunches(true, tokens);
  CHECK_EQ(paired.size(), plain.size());
  if (paired.size() != plain.size())
    return;
  size_t g = 0;
  for (size_t i = 0; i < paired.size(); ++i) {
    CHECK_EQ(paired[i].function, plain[i].function);
    if (g < gemms.size() && i == gemms[g]) {
      CHECK(isClusterLaunch(paired[i], true));
      CHECK(isPdlLaunch(plain[i]));
      CHECK_EQ(plain[i].grid[0], plainGrids[g]);
      CHECK_EQ(paired[i].grid[0], want[g]);
      for (int w = 0; w < 12; ++w)
        CHECK_EQ(paired[i].words[w], plain[i].words[w]);
      ++g;
    } else {
      CHECK(isPdlLaunch(paired[i]));
      CHECK_EQ(paired[i].grid[0], plain[i].grid[0]);
      CHECK(paired[i].raw == plain[i].raw);
    }
  }
  CHECK_EQ(g, gemms.size());
}

} // namespace

TEST(clusterLayerGemms) {
  // A layer's GEMM steps launch their parts' cluster kernels as clusters,
  // `resident` their resident clusters. T = 4096 tokens: M = 8192 rows,
  // slots 128 + 8 = 136; gate-up N = 256 and down N = 256 in tiles of 128:
  // 2 column tiles, 1 pair. Unclustered: 272 work items below 528 resident
  // CTAs (4 per SM of 98304 bytes); clustered: 136 clusters above 66, 132
  // CTAs. (The permute's count step runs: two chunks.)
  checkClusteredLayer(4096, {4, 5}, {272, 272}, {132, 132});
  // T = 3: M = 6 rows, slots 1 + 6 = 7: 14 CTAs both ways (no count step).
  checkClusteredLayer(3, {3, 4}, {14, 14}, {14, 14});
  // The gate-up kernel's 50 resident clusters: 100 CTAs.
  std::vector<FakeLaunch> l = layerLaunches(true, 4096, 50);
  CHECK_EQ(l.size(), size_t(7));
  if (l.size() == 7) {
    CHECK_EQ(l[4].function, std::string(kMixSymbols[4]));
    CHECK_EQ(l[4].grid[0], 100u);
    CHECK_EQ(l[5].grid[0], 132u);
  }
}
