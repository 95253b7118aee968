//===- PlanBundles.h - bundles whose entries carry launch plans --*- C++
//-*-===//
//
// The bundles of TestBundles.h with the launch plan records
// (docs/launch-plans.md) the compiler would write for some of their entries,
// in its forms (test/Conversion/launch-plans*.mlir): the moeLaunch tests
// start from these. And what the fake driver must know of a plan's kernels:
// the size of each parameter a `params=` list passes.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_TEST_PLANBUNDLES_H
#define MOE_RUNTIME_TEST_PLANBUNDLES_H

#include "FakeDriver.h"
#include "TestBundles.h"

#include <cstring>
#include <string>
#include <vector>

namespace moe_test {

/// `text` cut at the `sep` outside parentheses.
inline std::vector<std::string> splitOutside(const std::string &text,
                                             char sep) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '(' || text[i] == '[')
      ++depth;
    else if (text[i] == ')' || text[i] == ']')
      --depth;
    else if (text[i] == sep && depth == 0) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(text.substr(start));
  return parts;
}

/// The bytes of each kernel parameter a launch record's `params=` value
/// passes, by the record format: a memref of rank r is 3 + 2r parameters of
/// 8 bytes (pointers, offset, sizes, strides), i32 4 bytes, i64 8, a tensor
/// map 128.
inline std::vector<size_t> paramSizes(const std::string &params) {
  std::vector<size_t> sizes;
  if (params.empty())
    return sizes;
  for (const std::string &param : splitOutside(params, ';')) {
    if (param.rfind("mem:", 0) == 0) {
      size_t open = param.find('[');
      std::string dims = param.substr(open + 1, param.size() - open - 2);
      size_t rank = dims.empty() ? 0 : splitOutside(dims, ',').size();
      sizes.insert(sizes.end(), 3 + 2 * rank, 8);
    } else if (param.rfind("i32:", 0) == 0) {
      sizes.push_back(4);
    } else if (param.rfind("i64:", 0) == 0) {
      sizes.push_back(8);
    } else if (param.rfind("tmap:", 0) == 0) {
      sizes.push_back(128);
    } else {
      fail(__FILE__, __LINE__, "test bug: parameter '" + param + "'");
    }
  }
  return sizes;
}

/// Tells the fake that `symbol` takes the parameters of `params` (a
/// `params=` value): its launches record them as bytes (FakeLaunch::raw).
inline void declareParams(FakeGpu &gpu, const std::string &symbol,
                          const std::string &params) {
  gpu.rawParams[symbol] = paramSizes(params);
}

/// The 8-byte word of parameter `i` of a launch recorded as bytes (0 and a
/// failed check when it has no such 8-byte parameter).
inline uint64_t rawWord(const FakeLaunch &launch, size_t i) {
  uint64_t word = 0;
  if (i >= launch.raw.size() || launch.raw[i].size() != 8) {
    fail(__FILE__, __LINE__,
         "launch of '" + launch.function + "' has no 8-byte parameter " +
             std::to_string(i));
    return 0;
  }
  std::memcpy(&word, launch.raw[i].data(), 8);
  return word;
}

/// The words of a rank-2 memref descriptor [rows, columns] (row-major).
inline std::vector<uint64_t> memref2D(uint64_t pointer, int64_t rows,
                                      int64_t columns) {
  return {pointer,           pointer,           0, uint64_t(rows),
          uint64_t(columns), uint64_t(columns), 1};
}

/// The words of a rank-1 memref descriptor [size].
inline std::vector<uint64_t> memref1D(uint64_t pointer, int64_t size) {
  return {pointer, pointer, 0, uint64_t(size), 1};
}

/// The words of parameters [first, first + count) of a launch recorded as
/// bytes.
inline std::vector<uint64_t> rawWords(const FakeLaunch &launch, size_t first,
                                      size_t count) {
  std::vector<uint64_t> words;
  for (size_t i = first; i < first + count; ++i)
    words.push_back(rawWord(launch, i));
  return words;
}

/// A form of a grouped GEMM entry as its launch record describes it.
struct GemmForm {
  int kernel;
  long long rowsMin, rowsMax;
  int tileM, tileN;
  int cluster = 1;
};

/// The operands of a grouped GEMM launch record: buffer names (arguments,
/// or `@slice`s of a layer's workspace) and size expressions.
struct GemmOperands {
  std::string rows, weights, offsets, out;
  std::string m, n, k, e; // n: the weights' N
  bool swiglu = false;
  const char *type = "bf16"; // of rows and weights: bf16 or e4m3
  std::string extra;         // parameters after the 17 (";mem:...")
};

/// The launch record of `form` of a grouped GEMM, as the compiler writes
/// it (contract §3.1): tensor maps of rows [M, K] and weights [E, N, K]
/// (innermost first, byte strides, boxes of 128 bytes by tile_m and
/// tile_n), offsets [E + 1], out [M, N] ([M, N/2] for swiglu), K, rows_min,
/// rows_max; grid min(work, resident), work = slots x column tiles (pairs
/// of them for a cluster), 2 x min(work, resident clusters) for a cluster;
/// launched when M >= rows_min.
inline std::string gemmLaunch(const std::string &entry, const std::string &part,
                              const GemmForm &f, const GemmOperands &o) {
  const int bytes = std::strcmp(o.type, "bf16") == 0 ? 2 : 1;
  const std::string b = std::to_string(bytes),
                    tileK = std::to_string(128 / bytes);
  const std::string slots =
      "min(ceildiv(" + o.m + "," + std::to_string(f.tileM) + ")+min(floordiv(" +
      o.m + "," + std::to_string(f.rowsMin) + ")," + o.e + ")," + o.e + "*" +
      std::to_string((f.rowsMax + f.tileM - 1) / f.tileM) + ")";
  std::string tiles = "ceildiv(" + o.n + "," + std::to_string(f.tileN) + ")";
  if (f.cluster == 2)
    tiles = "ceildiv(" + tiles + ",2)";
  std::string grid = "min(" + slots + "*" + tiles + ",resident)";
  if (f.cluster == 2)
    grid = "2*" + grid;
  const std::string outColumns = o.swiglu ? "floordiv(" + o.n + ",2)" : o.n;
  const int boxN = o.swiglu ? f.tileN / 2 : f.tileN;
  return "launch " + entry + " " + std::to_string(f.kernel) +
         (part.empty() ? "" : " part=" + part) + " grid=" + grid + " when=" +
         (f.rowsMin == 1 ? "1" : o.m + ">=" + std::to_string(f.rowsMin)) +
         " params=tmap:" + o.rows + ":" + o.type + ":[" + o.k + "," + o.m +
         "]:[" + o.k + "*" + b + "]:[" + tileK + "," + std::to_string(f.tileM) +
         "];tmap:" + o.weights + ":" + o.type + ":[" + o.k + "," + o.n + "," +
         o.e + "]:[" + o.k + "*" + b + "," + o.n + "*" + o.k + "*" + b + "]:[" +
         tileK + "," + std::to_string(boxN) + ",1];mem:" + o.offsets + "[" +
         o.e + "+1];mem:" + o.out + "[" + o.m + "," + outColumns +
         "];i32:" + o.k + ";i32:" + std::to_string(f.rowsMin) +
         ";i32:" + std::to_string(f.rowsMax) + o.extra + "\n";
}

/// The records of a grouped GEMM entry's signature: sizes M (and N, K, E
/// where `n`, `k`, `e` are empty: dynamic, K a multiple of 8), rows,
/// weights, offsets (`offsets` i32 or i64) and out.
inline std::string gemmSignature(const std::string &entry, const std::string &n,
                                 const std::string &k, const std::string &e,
                                 const char *offsets, bool swiglu = false) {
  std::string records = "size " + entry + " M min=1 max=2147483647\n";
  if (n.empty())
    records += "size " + entry + " N min=1 max=2147483647\n";
  if (k.empty())
    records += "size " + entry + " K min=8 max=2147483647\n";
  if (e.empty())
    records += "size " + entry + " E min=1 max=2147483647\n";
  if (k.empty())
    records += "check " + entry +
               " K==floordiv(K,8)*8 K must be a multiple of 8 (16-byte rows)\n";
  const std::string N = n.empty() ? "N" : n, K = k.empty() ? "K" : k,
                    E = e.empty() ? "E" : e;
  const int offsetBytes = std::strcmp(offsets, "i64") == 0 ? 8 : 4;
  records += "arg " + entry + " rows bf16 in align=16 dims=M," + K + "\n";
  records += "arg " + entry + " weights bf16 in align=16 dims=" + E + "," + N +
             "," + K + "\n";
  records += "arg " + entry + " offsets " + offsets +
             " in align=" + std::to_string(offsetBytes) + " dims=" + E + "+1\n";
  records += "arg " + entry + " out bf16 out align=16 dims=M," +
             (swiglu ? "floordiv(" + N + ",2)" : N) + "\n";
  return records;
}

/// The operands of a grouped GEMM entry's own launches.
inline GemmOperands gemmOperands(const std::string &n, const std::string &k,
                                 const std::string &e) {
  GemmOperands o;
  o.rows = "rows";
  o.weights = "weights";
  o.offsets = "offsets";
  o.out = "out";
  o.m = "M";
  o.n = n.empty() ? "N" : n;
  o.k = k.empty() ? "K" : k;
  o.e = e.empty() ? "E" : e;
  return o;
}

/// validBundle() as version 7 with the plans of its three entries:
///   gate_up: M; E=8 N=28672 K=4096, i32 offsets; kernel 0 (64x256, rows
///            17 and up, 132 resident CTAs) when M >= 17, then kernel 1
///            (swap-AB 16x64, rows 1..16, 528 resident);
///   down:    M; E=8 N=4096 K=14336, i64 offsets; kernel 0 (64x256, 132);
///   any:     M, N, K, E (K a multiple of 8), i64 offsets; kernel 0 (rows
///            65 and up, 200000 bytes: 132 resident) when M >= 65, kernel 1
///            (64x128, rows 1..64, 528 resident).
inline std::string gemmPlanBundle() {
  const long long big = 2147483647;
  std::string bytes = asVersion7(validBundle());
  bytes =
      withRecordsAfter(bytes, std::string("kernel gate_up ") + kSwapAB32,
                       gemmSignature("gate_up", "28672", "4096", "8", "i32") +
                           gemmLaunch("gate_up", "", {0, 17, big, 64, 256},
                                      gemmOperands("28672", "4096", "8")) +
                           gemmLaunch("gate_up", "", {1, 1, 16, 16, 64},
                                      gemmOperands("28672", "4096", "8")));
  bytes = withRecordsAfter(bytes, std::string("kernel down ") + kNormal64,
                           gemmSignature("down", "4096", "14336", "8", "i64") +
                               gemmLaunch("down", "", {0, 1, big, 64, 256},
                                          gemmOperands("4096", "14336", "8")));
  return withRecordsAfter(
      bytes, std::string("kernel any ") + kSmall64,
      gemmSignature("any", "", "", "", "i64") +
          gemmLaunch("any", "", {0, 65, big, 64, 256},
                     gemmOperands("", "", "")) +
          gemmLaunch("any", "", {1, 1, 64, 64, 128}, gemmOperands("", "", "")));
}

/// The `params=` of routeBundle()'s router and softmax plans.
inline constexpr const char *kRouterParams =
    "mem:logits[T,256];mem:bias[256];mem:ids[T,8];mem:weights[T,8]";
inline constexpr const char *kSoftmaxParams =
    "mem:logits[T,8];mem:ids[T,2];mem:weights[T,2]";

/// routeBundle() (version 6) with the plans of its two route entries (a
/// warp per token, at most 65535 CTAs); its other entries have none.
inline std::string routeBundleWithPlans() {
  std::string bytes = withRecordsAfter(
      routeBundle(), std::string("kernel router ") + kRouteBias,
      "size router T min=1 max=2147483647\n"
      "arg router logits f32 in align=4 dims=T,256\n"
      "arg router bias f32 in align=4 dims=256\n"
      "arg router ids i32 out align=4 dims=T,8\n"
      "arg router weights f32 out align=4 dims=T,8\n"
      "launch router 0 grid=min(ceildiv(T,4),65535) when=1 params=" +
          std::string(kRouterParams) + "\n");
  return withRecordsAfter(
      bytes, std::string("kernel softmax ") + kRouteSoftmax,
      "size softmax T min=1 max=4096\n"
      "arg softmax logits bf16 in align=2 dims=T,8\n"
      "arg softmax ids i32 out align=4 dims=T,2\n"
      "arg softmax weights f32 out align=4 dims=T,2\n"
      "launch softmax 0 grid=min(ceildiv(T,8),65535) when=1 params=" +
          std::string(kSoftmaxParams) + "\n");
}

/// The `params=` of the steps of layerPlanBundle()'s mix that are not
/// GEMMs: route, permute count, index and gather, unpermute.
inline constexpr const char *kMixRouteParams =
    "mem:logits[T,8];mem:@ids[T,2];mem:@weights[T,2]";
inline constexpr const char *kMixCountParams =
    "mem:@ids[T,2];mem:@counts[ceildiv(T*2,4096)*8]";
inline constexpr const char *kMixIndexParams =
    "mem:@ids[T,2];mem:@counts[ceildiv(T*2,4096)*8];mem:@offsets[9];mem:@"
    "slots[T,2];mem:@sources[T*2]";
inline constexpr const char *kMixGatherParams =
    "mem:tokens[T,256];mem:@sources[T*2];mem:@offsets[9];mem:@rows[T*2,256]";
inline constexpr const char *kMixCombineParams =
    "mem:@rows[T*2,256];mem:@slots[T,2];mem:@weights[T,2];mem:out[T,256]";

/// layerBundle() (version 6) with the plan of its layer `mix` (T tokens,
/// E=8 k=2 H=256 I=128) as the compiler writes a layer's: its parts'
/// steps in order, each naming its part, on the layer's five arguments and
/// eight workspace slices (ids, weights, offsets, slots, sources, counts,
/// rows, inter, aligned to 256, 16, 4, 256, 256, 16, 256, 256 bytes); the
/// permute's count step when there is more than one chunk of 4096 ids. The
/// GEMM steps run 2-CTA clusters with `clusterGemms` (their kernels must
/// then have cluster=2). The parts have no plans.
inline std::string layerPlanBundle(bool clusterGemms = false) {
  const long long big = 2147483647;
  const int cluster = clusterGemms ? 2 : 1;
  GemmOperands gateUp;
  gateUp.rows = "@rows";
  gateUp.weights = "gate_up_weights";
  gateUp.offsets = "@offsets";
  gateUp.out = "@inter";
  gateUp.m = "T*2";
  gateUp.n = "256";
  gateUp.k = "256";
  gateUp.e = "8";
  gateUp.swiglu = true;
  GemmOperands down = gateUp;
  down.rows = "@inter";
  down.weights = "down_weights";
  down.out = "@rows";
  down.k = "128";
  down.swiglu = false;
  const std::string records =
      std::string("size mix T min=1 max=4096\n"
                  "arg mix tokens bf16 in align=16 dims=T,256\n"
                  "arg mix logits f32 in align=4 dims=T,8\n"
                  "arg mix gate_up_weights bf16 in align=16 dims=8,256,256\n"
                  "arg mix down_weights bf16 in align=16 dims=8,256,128\n"
                  "arg mix out bf16 out align=16 dims=T,256\n"
                  "check mix T*2<=2147483647 T*k rows must be at most "
                  "2147483647\n"
                  "work mix ids bytes=T*2*4 align=256\n"
                  "work mix weights bytes=T*2*4 align=16\n"
                  "work mix offsets bytes=36 align=4\n"
                  "work mix slots bytes=T*2*4 align=256\n"
                  "work mix sources bytes=T*2*4 align=256\n"
                  "work mix counts bytes=ceildiv(T*2,4096)*8*4 align=16\n"
                  "work mix rows bytes=T*2*256*2 align=256\n"
                  "work mix inter bytes=T*2*128*2 align=256\n"
                  "launch mix 0 part=mix_route grid=min(ceildiv(T,4),65535) "
                  "when=1 params=") +
      kMixRouteParams +
      "\nlaunch mix 0 part=mix_permute grid=ceildiv(T*2,4096) "
      "when=ceildiv(T*2,4096)>1 params=" +
      kMixCountParams +
      "\nlaunch mix 1 part=mix_permute grid=ceildiv(T*2,4096) when=1 "
      "params=" +
      kMixIndexParams +
      "\nlaunch mix 2 part=mix_permute grid=min(ceildiv(T*2,4),65535) "
      "when=1 params=" +
      kMixGatherParams + "\n" +
      gemmLaunch("mix", "mix_gate_up", {0, 1, big, 64, 128, cluster}, gateUp) +
      gemmLaunch("mix", "mix_down", {0, 1, big, 64, 128, cluster}, down) +
      "launch mix 0 part=mix_unpermute grid=min(T,1048576) when=1 params=" +
      kMixCombineParams + "\n";
  std::string bytes = layerBundle();
  if (clusterGemms)
    bytes = replacedAll(bytes, " swap_ab=0\n", " swap_ab=0 cluster=2\n");
  return withRecordsAfter(bytes, "entry mix ", records);
}

/// Declares the parameters of layerPlanBundle()'s kernels that are not
/// GEMMs (the GEMM kernels take the 17 the fake reads by default).
inline void declareMixKernels(FakeGpu &gpu) {
  declareParams(gpu, kMixSymbols[0], kMixRouteParams);
  declareParams(gpu, kMixSymbols[1], kMixCountParams);
  declareParams(gpu, kMixSymbols[2], kMixIndexParams);
  declareParams(gpu, kMixSymbols[3], kMixGatherParams);
  declareParams(gpu, kMixSymbols[6], kMixCombineParams);
}

/// The `params=` of clusterPlanBundle()'s router.
inline constexpr const char *kClusterRouterParams =
    "mem:logits[T,8];mem:ids[T,2];mem:weights[T,2]";

/// clusterBundle() (version 6) with the plans of cgemm (M, N; its swap-AB
/// kernel 1 then its cluster kernel when M >= 17, as 2 x min(pairs of
/// column tiles x slots, resident clusters)), cone (its explicit cluster=1
/// kernel, a plain grid), cshare (its cluster kernel for every M) and the
/// router; cfp8 has none.
inline std::string clusterPlanBundle() {
  const long long big = 2147483647;
  auto gemm = [&](const std::string &name, int kernel, long long rowsMin,
                  long long rowsMax, int tileM, int tileN, int cluster) {
    return gemmLaunch(name, "",
                      {kernel, rowsMin, rowsMax, tileM, tileN, cluster},
                      gemmOperands("", "4096", "8"));
  };
  std::string bytes = withRecordsAfter(
      clusterBundle(), std::string("kernel cgemm ") + kCluster128,
      gemmSignature("cgemm", "", "4096", "8", "i32") +
          gemm("cgemm", 0, 1, 16, 16, 64, 1) +
          gemm("cgemm", 1, 17, big, 128, 256, 2));
  bytes = withRecordsAfter(bytes, std::string("kernel cone ") + kNormal32,
                           gemmSignature("cone", "", "4096", "8", "i32") +
                               gemm("cone", 0, 1, big, 64, 256, 1));
  bytes = withRecordsAfter(bytes, std::string("kernel cshare ") + kCluster128,
                           gemmSignature("cshare", "", "4096", "8", "i32") +
                               gemm("cshare", 0, 1, big, 128, 256, 2));
  return withRecordsAfter(
      bytes, std::string("kernel router ") + kRouteSoftmax,
      "size router T min=1 max=2147483647\n"
      "arg router logits f32 in align=4 dims=T,8\n"
      "arg router ids i32 out align=4 dims=T,2\n"
      "arg router weights f32 out align=4 dims=T,2\n"
      "launch router 0 grid=min(ceildiv(T,4),65535) when=1 params=" +
          std::string(kClusterRouterParams) + "\n");
}

/// A version-7 bundle of
///   router:  route.v1, E=256 k=8, f32 logits, its bias optional; T;
///   combine: unpermute.v2, H dynamic, k=2, i64 slots, weighted; M rows,
///            T <= M/2 tokens, H a multiple of 8;
///   mx:      quantize.v1 of bf16 [R, 4096] into e4m3 codes and E8M0
///            scales per 32;
///   act:     quantize.v1 of f32 [R, C] (R <= 4096, C a multiple of 128)
///            into e5m2 codes and f32 scales, and a rank-0 optional amax;
///   experts: a grouped GEMM, E=8 N=64 K=64, i32 offsets; M.
inline std::string signatureBundle() {
  return withChecksums(
      "MOEBUNDLE 7\n"
      "chip sm_90a\n" +
      imageRecord("moe_kernels", fakeCubin('S')) +
      "entry router op=moe.route abi=route.v1 max_rows=2147483647 "
      "experts=256 top_k=8 logits=f32 bias=1\n" +
      simpleKernelLine("router", kRouteBias, "moe_kernels", 128, 0) +
      "size router T min=1 max=(2147483647)\n"
      "arg router logits f32 in align=4 dims=(T),256\n"
      "arg router bias f32 opt align=4 dims=256\n"
      "arg router ids i32 out align=4 dims=T,8\n"
      "arg router weights f32 out align=4 dims=T,(8)\n"
      "launch router 0 grid=min(ceildiv(T,4),65535) when=1 params=" +
      kRouterParams +
      "\n"
      "entry combine op=moe.unpermute abi=unpermute.v2 "
      "max_rows=2147483647 hidden=-1 top_k=2 slots=i64 weighted=1\n" +
      simpleKernelLine("combine", kCombine, "moe_kernels", 256, 0) +
      "size combine M min=1 max=9223372036854775807\n"
      "size combine T min=1 max=floordiv(M,2)\n"
      "size combine H min=8 max=9223372036854775807\n"
      "check combine H==floordiv(H,8)*8 H must be a multiple of 8 (rows "
      "are read in 16-byte vectors)\n"
      "arg combine rows bf16 in align=16 dims=M,H\n"
      "arg combine slots i64 in align=8 dims=T,2\n"
      "arg combine weights f32 in align=4 dims=T,2\n"
      "arg combine out bf16 out align=16 dims=T,H\n"
      "launch combine 0 grid=min(T,1048576) when=1 params=mem:rows[M,H];"
      "mem:slots[T,2];mem:weights[T,2];mem:out[T,H]\n"
      "entry mx op=moe.quantize abi=quantize.v1 max_rows=2147483647 "
      "element=f8E4M3FN scale=e8m0 input=bf16 block_rows=1 block_cols=32 "
      "rank=2 batch=1 rows=-1 cols=4096\n" +
      simpleKernelLine("mx", kQuantMx, "moe_kernels", 256, 0) +
      "size mx R min=1 max=2147483647\n"
      "arg mx input bf16 in align=16 dims=R,4096\n"
      "arg mx values e4m3 out align=16 dims=R,4096\n"
      "arg mx scales e8m0 out align=1 dims=R,128\n"
      "launch mx 0 grid=min(ceildiv(R*4096,8192),65535) when=1 "
      "params=mem:input[R,4096];mem:values[R,4096];mem:scales[R,128]\n"
      "entry act op=moe.quantize abi=quantize.v1 max_rows=4096 "
      "element=f8E5M2 scale=f32 input=f32 block_rows=1 block_cols=128 "
      "rank=2 batch=1 rows=-1 cols=-1\n" +
      simpleKernelLine("act", kQuantAct, "moe_kernels", 128, 0) +
      "size act R min=1 max=4096\n"
      "size act C min=128 max=2147483647\n"
      "check act C==floordiv(C,128)*128 C must be a multiple of 128\n"
      "arg act input f32 in align=16 dims=R,C\n"
      "arg act values e5m2 out align=16 dims=R,C\n"
      "arg act scales f32 out align=4 dims=R,floordiv(C,(128))\n"
      "arg act amax f32 opt align=4 dims=\n"
      "launch act 0 grid=min(ceildiv(R*C,4096),65535) when=1 "
      "params=mem:input[R,C];mem:values[R,C];mem:scales[R,floordiv(C,128)"
      "]\n"
      "entry experts op=moe.grouped_matmul abi=grouped_matmul.v3 "
      "epilogue=store experts=8 n=64 k=64 max_rows=2147483647 "
      "offsets=i32 bias=none activation=none\n" +
      kernelLine("experts", kNormal32, "moe_kernels", 1, 2147483647, 64, 64, 0,
                 0) +
      gemmSignature("experts", "64", "64", "8", "i32") +
      gemmLaunch("experts", "", {0, 1, 2147483647, 64, 64},
                 gemmOperands("64", "64", "8")) +
      "end\n");
}

} // namespace moe_test

#endif // MOE_RUNTIME_TEST_PLANBUNDLES_H
