//===- BundleReaderTests.cpp - the .moebundle reader ----------------------===//

#include "TestBundles.h"
#include "TestHarness.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <unistd.h>

using namespace moe_test;

namespace {

/// `bytes` as contract version 4 wrote it: no bias or activation keys.
std::string asVersion4(std::string bytes) {
  bytes.replace(0, 11, "MOEBUNDLE 4");
  for (const char *keys :
       {" bias=none activation=none", " bias=none activation=silu"})
    for (size_t at; (at = bytes.find(keys)) != std::string::npos;)
      bytes.erase(at, std::strlen(keys));
  return bytes;
}

/// `bytes` as contract version 2 wrote it: no epilogues, ABI v2.
std::string asVersion2(std::string bytes) {
  bytes = asVersion4(bytes);
  bytes.replace(0, 11, "MOEBUNDLE 2");
  const std::string from = "abi=grouped_matmul.v3 epilogue=store ",
                    to = "abi=grouped_matmul.v2 ";
  for (size_t at; (at = bytes.find(from)) != std::string::npos;)
    bytes.replace(at, from.size(), to);
  return bytes;
}

/// The valid bundle with its final "end\n" replaced by `to` (the images
/// contain "end\n" too).
std::string withEnd(const std::string &to) {
  std::string bytes = validBundle();
  return bytes.substr(0, bytes.size() - 4) + to;
}

/// Header, chip, one image and `body` (entry/kernel lines), then `end`.
std::string bundleWith(const std::string &body) {
  return "MOEBUNDLE 6\nchip sm_90a\n" + imageRecord("img", fakeCubin('C')) +
         body + "end\n";
}

std::string entryLine(const std::string &name) {
  return "entry " + name +
         " op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store "
         "experts=4 n=64 k=64 "
         "max_rows=2147483647 offsets=i32 bias=none activation=none\n";
}

/// `count` kernels of entry `entry` whose rows ranges partition [1, 2^31-1].
std::string kernelsCovering(const std::string &entry, int count) {
  std::string lines;
  for (int i = 1; i <= count; ++i)
    lines += kernelLine(entry, "k" + std::to_string(i), "img", i,
                        i == count ? 2147483647LL : i, 64, 64, 0, 0);
  return lines;
}

struct Malformed {
  const char *name;
  std::string bytes;
  moeStatus status;
  std::string message;
};

/// routeBundle() with the first `from` replaced by `to`.
std::string routeReplaced(const std::string &from, const std::string &to) {
  return replaced(from, to, routeBundle());
}

/// Errors of route.v1 and unpermute.v2 entries and their kernels.
std::vector<Malformed> malformedRouteBundles() {
  const moeStatus bad = MOE_STATUS_INVALID_BUNDLE;
  const std::string routerKernel =
      simpleKernelLine("router", kRouteBias, "moe_kernels", 128, 0);
  const std::string gatherKernel =
      simpleKernelLine("gather", kGather, "moe_kernels", 128, 0);
  return {
      // route.v1 entries.
      {"route missing bias", routeReplaced(" logits=f32 bias=1", " logits=f32"),
       bad, "bundle line 4: entry 'router': missing key 'bias'"},
      {"route missing experts", routeReplaced(" experts=256", ""), bad,
       "bundle line 4: entry 'router': missing key 'experts'"},
      {"route missing top_k", routeReplaced(" top_k=8", ""), bad,
       "entry 'router': missing key 'top_k'"},
      {"route missing max_rows",
       routeReplaced("route.v1 max_rows=4096", "route.v1"), bad,
       "bundle line 6: entry 'softmax': missing key 'max_rows'"},
      {"route with an epilogue",
       routeReplaced("bias=1\n", "bias=1 epilogue=store\n"), bad,
       "bundle line 4: entry 'router': unknown key 'epilogue' (abi route.v1 "
       "takes op, abi, max_rows, experts, top_k, logits, bias, the optional "
       "shared, the optional shared_gate and the optional hidden)"},
      // Shared slots: a gate and its width describe them, and their count is
      // bounded.
      {"route gate without shared",
       routeReplaced("bias=1\n", "bias=1 shared_gate=1 hidden=64\n"), bad,
       "entry 'router': shared_gate or hidden without shared"},
      {"route shared 0", routeReplaced("bias=1\n", "bias=1 shared=0\n"), bad,
       "entry 'router': shared=0 is"},
      {"route gate of width 0",
       routeReplaced("bias=1\n", "bias=1 shared=1 shared_gate=1 hidden=0\n"),
       bad, "entry 'router': hidden=0"},
      {"route with GEMM keys",
       routeReplaced("experts=256 top_k=8", "experts=256 n=64 k=64 top_k=8"),
       bad, "entry 'router': unknown key 'n' (abi route.v1 takes"},
      {"route with offsets", routeReplaced("bias=0\n", "bias=0 offsets=i32\n"),
       bad, "entry 'softmax': unknown key 'offsets'"},
      {"route experts 0", routeReplaced("experts=256", "experts=0"), bad,
       "entry 'router': experts=0 is out of range ([1, 2147483647])"},
      {"route experts dynamic", routeReplaced("experts=256", "experts=-1"), bad,
       "entry 'router': experts=-1 is out of range ([1, 2147483647])"},
      {"route top_k 0", routeReplaced("top_k=8", "top_k=0"), bad,
       "entry 'router': top_k=0 is out of range ([1, 32])"},
      {"route top_k 33", routeReplaced("top_k=8", "top_k=33"), bad,
       "bundle line 4: entry 'router': top_k=33 is out of range ([1, 32])"},
      {"route top_k above experts",
       routeReplaced("experts=8 top_k=2", "experts=8 top_k=9"), bad,
       "bundle line 6: entry 'softmax': top_k=9 exceeds experts=8"},
      {"route logits f16", routeReplaced("logits=f32", "logits=f16"), bad,
       "bundle line 4: entry 'router': logits='f16' is neither f32 nor bf16"},
      {"route logits empty", routeReplaced("logits=bf16", "logits="), bad,
       "entry 'softmax': logits='' is neither f32 nor bf16"},
      {"route bias 2", routeReplaced("bias=1", "bias=2"), bad,
       "entry 'router': bias=2 is out of range ([0, 1])"},
      {"route bias text", routeReplaced("bias=1", "bias=yes"), bad,
       "entry 'router': bias='yes' is not a decimal integer"},
      {"route max_rows 0", routeReplaced("max_rows=4096", "max_rows=0"), bad,
       "entry 'softmax': max_rows=0 is out of range ([1, 2147483647])"},
      {"route max_rows above 2^31-1",
       routeReplaced("route.v1 max_rows=2147483647",
                     "route.v1 max_rows=2147483648"),
       bad, "max_rows=2147483648 is out of range ([1, 2147483647])"},
      // unpermute.v2 entries.
      {"unpermute missing hidden", routeReplaced(" hidden=4096", ""), bad,
       "bundle line 8: entry 'combine': missing key 'hidden'"},
      {"unpermute missing weighted", routeReplaced(" weighted=0", ""), bad,
       "bundle line 10: entry 'gather': missing key 'weighted'"},
      {"unpermute missing slots", routeReplaced(" slots=i64", ""), bad,
       "entry 'combine': missing key 'slots'"},
      {"unpermute with offsets",
       routeReplaced("slots=i32", "slots=i32 offsets=i32"), bad,
       "bundle line 10: entry 'gather': unknown key 'offsets' (abi "
       "unpermute.v2 takes op, abi, max_rows, hidden, top_k, slots and "
       "weighted)"},
      {"unpermute with bias", routeReplaced("weighted=1", "weighted=1 bias=0"),
       bad, "entry 'combine': unknown key 'bias'"},
      {"unpermute odd hidden", routeReplaced("hidden=4096", "hidden=4100"), bad,
       "bundle line 8: entry 'combine': hidden=4100 is not a multiple of 8 "
       "(rows move in 16-byte vectors)"},
      {"unpermute hidden 4", routeReplaced("hidden=4096", "hidden=4"), bad,
       "entry 'combine': hidden=4 is out of range (-1 or [8, 2147483647])"},
      {"unpermute hidden 0", routeReplaced("hidden=4096", "hidden=0"), bad,
       "hidden=0 is out of range"},
      {"unpermute hidden -2", routeReplaced("hidden=-1", "hidden=-2"), bad,
       "entry 'gather': hidden=-2 is out of range (-1 or [8, 2147483647])"},
      {"unpermute top_k 0", routeReplaced("top_k=2 slots", "top_k=0 slots"),
       bad, "entry 'combine': top_k=0 is out of range ([1, 2147483647])"},
      {"unpermute slots i16", routeReplaced("slots=i64", "slots=i16"), bad,
       "bundle line 8: entry 'combine': slots='i16' is neither i32 nor i64"},
      {"unpermute weighted 2", routeReplaced("weighted=1", "weighted=2"), bad,
       "entry 'combine': weighted=2 is out of range ([0, 1])"},
      {"unpermute weighted -1", routeReplaced("weighted=0", "weighted=-1"), bad,
       "entry 'gather': weighted=-1 is out of range ([0, 1])"},
      // Their kernels.
      {"route with two kernels",
       routeReplaced(routerKernel,
                     routerKernel + simpleKernelLine("router", "again",
                                                     "moe_kernels", 128, 0)),
       bad,
       "bundle line 6: kernel 'again': entry 'router' (abi route.v1) takes "
       "exactly one kernel, and has "
       "'moe_route_sigmoid_topk_e256_k8_f32_bias' already (line 5)"},
      {"unpermute with two kernels",
       routeReplaced(gatherKernel,
                     gatherKernel + simpleKernelLine("gather", "second",
                                                     "moe_kernels", 128, 0)),
       bad,
       "bundle line 12: kernel 'second': entry 'gather' (abi unpermute.v2) "
       "takes exactly one kernel"},
      {"route kernel twice",
       routeReplaced(routerKernel, routerKernel + routerKernel), bad,
       "kernel 'moe_route_sigmoid_topk_e256_k8_f32_bias' appears twice in "
       "entry 'router'"},
      {"route kernel with GEMM keys",
       routeReplaced(routerKernel,
                     kernelLine("router", kRouteBias, "moe_kernels", 1,
                                2147483647, 64, 64, 0, 0)),
       bad,
       "bundle line 5: kernel 'moe_route_sigmoid_topk_e256_k8_f32_bias': "
       "unknown key 'rows_min' (the kernels of an abi route.v1 entry take "
       "image, threads, smem and the optional cluster)"},
      {"route kernel with a tile",
       routeReplaced("threads=128 smem=0\n", "threads=128 smem=0 tile_m=64\n"),
       bad, "unknown key 'tile_m' (the kernels of an abi route.v1 entry"},
      {"unpermute kernel with GEMM keys",
       routeReplaced(gatherKernel, kernelLine("gather", kGather, "moe_kernels",
                                              1, 2147483647, 64, 64, 0, 0)),
       bad,
       "bundle line 11: kernel 'moe_unpermute_k8_i32': unknown key 'rows_min' "
       "(the kernels of an abi unpermute.v2 entry take image, threads, smem "
       "and the optional cluster)"},
      {"route kernel missing smem",
       routeReplaced(routerKernel, "kernel router " + std::string(kRouteBias) +
                                       " image=moe_kernels threads=128\n"),
       bad,
       "bundle line 5: kernel 'moe_route_sigmoid_topk_e256_k8_f32_bias': "
       "missing key 'smem'"},
      {"unpermute kernel missing image",
       routeReplaced(gatherKernel, "kernel gather " + std::string(kGather) +
                                       " threads=128 smem=0\n"),
       bad, "kernel 'moe_unpermute_k8_i32': missing key 'image'"},
      {"route kernel threads not a multiple of 32",
       routeReplaced(routerKernel, simpleKernelLine("router", kRouteBias,
                                                    "moe_kernels", 100, 0)),
       bad,
       "bundle line 5: kernel 'moe_route_sigmoid_topk_e256_k8_f32_bias': "
       "threads=100 is not a multiple of 32 (a route.v1 kernel runs one warp "
       "per token)"},
      {"route kernel threads 16",
       routeReplaced(routerKernel, simpleKernelLine("router", kRouteBias,
                                                    "moe_kernels", 16, 0)),
       bad, "threads=16 is not a multiple of 32"},
      {"route kernel threads 2048",
       routeReplaced(routerKernel, simpleKernelLine("router", kRouteBias,
                                                    "moe_kernels", 2048, 0)),
       bad, "threads=2048 is out of range ([1, 1024])"},
      {"unpermute kernel threads 0",
       routeReplaced(gatherKernel,
                     simpleKernelLine("gather", kGather, "moe_kernels", 0, 0)),
       bad, "kernel 'moe_unpermute_k8_i32': threads=0 is out of range"},
      {"route kernel smem negative",
       routeReplaced(routerKernel, simpleKernelLine("router", kRouteBias,
                                                    "moe_kernels", 128, -1)),
       bad, "smem=-1 is out of range ([0, 2147483647])"},
      {"route kernel of unknown image",
       routeReplaced(routerKernel,
                     simpleKernelLine("router", kRouteBias, "nope", 128, 0)),
       bad,
       "bundle line 5: kernel 'moe_route_sigmoid_topk_e256_k8_f32_bias' "
       "refers to unknown image 'nope'"},
      {"route entry without kernels", routeReplaced(routerKernel, ""), bad,
       "bundle line 4: entry 'router' has no kernels"},
      {"GEMM kernel with only route keys",
       routeReplaced(
           kernelLine("experts", kNormal32, "moe_kernels", 1, 2147483647, 64,
                      64, 0, 0),
           simpleKernelLine("experts", kNormal32, "moe_kernels", 128, 0)),
       bad,
       "bundle line 13: kernel '" + std::string(kNormal32) +
           "': missing key 'rows_min'"},
  };
}

/// permuteBundle() with the first `from` replaced by `to`.
std::string permuteReplaced(const std::string &from, const std::string &to) {
  return replaced(from, to, permuteBundle());
}

/// permuteFp8Bundle() with the first `from` replaced by `to`.
std::string permuteFp8Replaced(const std::string &from, const std::string &to) {
  return replaced(from, to, permuteFp8Bundle());
}

/// Errors of permute.v2 entries and their kernels.
std::vector<Malformed> malformedPermuteBundles() {
  const moeStatus bad = MOE_STATUS_INVALID_BUNDLE;
  const moeStatus unsupported = MOE_STATUS_UNSUPPORTED;
  const std::string countKernel =
      simpleKernelLine("perm", kPermCount64, "moe_kernels", 1024, 0);
  const std::string indexKernel =
      simpleKernelLine("perm", kPermIndex64, "moe_kernels", 1024, 17408);
  const std::string gatherKernel =
      simpleKernelLine("perm", kPermGather64, "moe_kernels", 128, 0);
  return {
      {"permute missing offsets", permuteReplaced(" offsets=i64", ""), bad,
       "bundle line 4: entry 'perm': missing key 'offsets'"},
      {"permute missing experts", permuteReplaced(" experts=128", ""), bad,
       "entry 'perm': missing key 'experts'"},
      {"permute missing top_k", permuteReplaced(" top_k=2", ""), bad,
       "bundle line 8: entry 'perm32': missing key 'top_k'"},
      {"permute missing hidden",
       permuteReplaced(" hidden=2048 offsets", " offsets"), bad,
       "entry 'perm': missing key 'hidden'"},
      {"permute missing max_rows",
       permuteReplaced("permute.v2 max_rows=4096", "permute.v2"), bad,
       "bundle line 8: entry 'perm32': missing key 'max_rows'"},
      {"permute missing chunk", permuteReplaced(" chunk=4096", ""), bad,
       "bundle line 4: entry 'perm': missing key 'chunk'"},
      {"permute as v1 wrote it",
       permuteReplaced("offsets=i32 chunk=32\n", "offsets=i32\n"), bad,
       "bundle line 8: entry 'perm32': missing key 'chunk'"},
      {"permute with slots",
       permuteReplaced("chunk=4096\n", "chunk=4096 slots=i64\n"), bad,
       "bundle line 4: entry 'perm': unknown key 'slots' (abi permute.v2 "
       "takes op, abi, max_rows, experts, top_k, hidden, offsets, chunk, the "
       "optional out, the optional index_counts, the optional scatter_from "
       "and the optional round_trip)"},
      // index_counts: 0 or 1 (absent: 0).
      {"permute index_counts 2",
       permuteReplaced("chunk=4096\n", "chunk=4096 index_counts=2\n"), bad,
       "bundle line 4: entry 'perm': index_counts=2 is out of range ([0, 1])"},
      {"permute index_counts yes",
       permuteReplaced("chunk=32\n", "chunk=32 index_counts=yes\n"), bad,
       "bundle line 8: entry 'perm32': index_counts="},
      {"permute duplicate index_counts",
       permuteReplaced("chunk=4096\n", "chunk=4096 index_counts=1 "
                                       "index_counts=1\n"),
       bad, "bundle line 4: entry 'perm': duplicate key 'index_counts'"},
      // round_trip: the gather stores the bf16 rows' MXFP8 round trip.
      {"permute round_trip of another format",
       permuteReplaced("chunk=4096\n", "chunk=4096 round_trip=mxfp4\n"), bad,
       "bundle line 4: entry 'perm': round_trip='mxfp4' is not mxfp8_e4m3 or "
       "mxfp8_e5m2"},
      {"permute round_trip with out",
       permuteFp8Replaced("out=f8E4M3FN\n",
                          "out=f8E4M3FN round_trip=mxfp8_e4m3\n"),
       bad,
       "bundle line 4: entry 'qperm': round_trip='mxfp8_e4m3' with "
       "out='f8E4M3FN' (a gather stores e4m3 rows or the bf16 rows' round "
       "trip, not both)"},
      {"permute round_trip on hidden 8",
       permuteReplaced("hidden=8 offsets=i32 chunk=65536\n",
                       "hidden=8 offsets=i32 chunk=65536 "
                       "round_trip=mxfp8_e4m3\n"),
       bad, "entry 'wide': hidden=8 with round_trip is not a multiple of 32"},
      // scatter_from: a positive T, only with out=f8E4M3FN and then with a
      // fourth kernel, the scatter.
      {"permute scatter_from 0",
       permuteFp8Replaced("out=f8E4M3FN\n", "out=f8E4M3FN scatter_from=0\n"),
       bad,
       "bundle line 4: entry 'qperm': scatter_from=0 is out of range ([1, "
       "2147483647])"},
      {"permute scatter_from without out",
       permuteReplaced("chunk=4096\n", "chunk=4096 scatter_from=128\n"), bad,
       "bundle line 4: entry 'perm': scatter_from=128 without out=f8E4M3FN "
       "(only a quantizing permute has a scatter kernel)"},
      {"permute scatter_from with three kernels",
       permuteFp8Replaced("out=f8E4M3FN\n", "out=f8E4M3FN scatter_from=64\n"),
       bad,
       "bundle line 4: entry 'qperm' (abi permute.v2) has scatter_from=64 and "
       "three kernels: it takes a fourth, the scatter kernel"},
      {"permute with four kernels and no scatter_from",
       permuteFp8Replaced(
           "chunk=32 out=f8E4M3FN\n",
           "chunk=32 out=f8E4M3FN\nkernel qperm32 extra image=moe_kernels "
           "threads=256 smem=0\n"),
       bad,
       "entry 'qperm32' (abi permute.v2) takes exactly three kernels, the "
       "count, index and gather kernels, and has 'extra' (line 9)"},
      {"permute with five kernels",
       replaced("scatter_from=16\n",
                "scatter_from=16\nkernel sperm32 extra image=moe_kernels "
                "threads=256 smem=0\n",
                permuteScatterBundle()),
       bad,
       "entry 'sperm32' (abi permute.v2) with scatter_from takes exactly four "
       "kernels, the count, index, gather and scatter kernels, and has four "
       "already"},
      {"scatter_from on a combine entry",
       permuteReplaced("weighted=1\n", "weighted=1 scatter_from=1\n"), bad,
       "entry 'combine': unknown key 'scatter_from'"},
      {"index_counts on a route entry",
       permuteReplaced("logits=f32 bias=0\n",
                       "logits=f32 bias=0 index_counts=1\n"),
       bad, "entry 'router': unknown key 'index_counts'"},
      {"permute with an epilogue",
       permuteReplaced("chunk=32\n", "chunk=32 epilogue=store\n"), bad,
       "entry 'perm32': unknown key 'epilogue' (abi permute.v2 takes"},
      {"permute duplicate key",
       permuteReplaced("top_k=8 hidden", "top_k=8 top_k=8 hidden"), bad,
       "entry 'perm': duplicate key 'top_k'"},
      {"permute duplicate chunk",
       permuteReplaced("chunk=4096", "chunk=4096 chunk=4096"), bad,
       "bundle line 4: entry 'perm': duplicate key 'chunk'"},
      // out=f8E4M3FN (the gather quantizes the rows): the only value, on
      // whole [1, 128] groups of a static H.
      {"permute out bf16", permuteFp8Replaced("out=f8E4M3FN", "out=bf16"), bad,
       "bundle line 4: entry 'qperm': out='bf16' is not f8E4M3FN (the only "
       "value of out; without it the rows are bf16)"},
      {"permute out e5m2", permuteFp8Replaced("out=f8E4M3FN", "out=f8E5M2"),
       bad, "entry 'qperm': out='f8E5M2' is not f8E4M3FN"},
      {"permute out empty", permuteFp8Replaced("out=f8E4M3FN", "out="), bad,
       "bundle line 4: entry 'qperm': out='' is not f8E4M3FN"},
      {"permute out in lower case",
       permuteFp8Replaced("out=f8E4M3FN", "out=f8e4m3fn"), bad,
       "entry 'qperm': out='f8e4m3fn' is not f8E4M3FN"},
      {"permute duplicate out",
       permuteFp8Replaced("chunk=32 out=f8E4M3FN",
                          "out=f8E4M3FN chunk=32 out=f8E4M3FN"),
       bad, "bundle line 8: entry 'qperm32': duplicate key 'out'"},
      {"permute out hidden 2056",
       permuteFp8Replaced("hidden=2048", "hidden=2056"), bad,
       "bundle line 4: entry 'qperm': hidden=2056 with out=f8E4M3FN is not a "
       "multiple of 128 (the gather writes whole [1, 128] groups of a row "
       "and their scales)"},
      {"permute out hidden 64", permuteFp8Replaced("hidden=2048", "hidden=64"),
       bad,
       "entry 'qperm': hidden=64 with out=f8E4M3FN is not a multiple of "
       "128"},
      {"permute out hidden 8", permuteFp8Replaced("hidden=2048", "hidden=8"),
       bad, "entry 'qperm': hidden=8 with out=f8E4M3FN is not a multiple"},
      // The checks of any hidden come first.
      {"permute out hidden 130",
       permuteFp8Replaced("hidden=2048", "hidden=130"), bad,
       "entry 'qperm': hidden=130 is not a multiple of 8 (rows move in "
       "16-byte vectors)"},
      {"permute out without chunk",
       permuteFp8Replaced("chunk=4096 out=f8E4M3FN", "out=f8E4M3FN"), bad,
       "bundle line 4: entry 'qperm': missing key 'chunk'"},
      // Only permutes (and FP8 grouped matmuls) have an out key.
      {"out on a route entry",
       permuteReplaced("logits=f32 bias=0\n", "logits=f32 bias=0 out=bf16\n"),
       bad,
       "bundle line 16: entry 'router': unknown key 'out' (abi route.v1 takes "
       "op, abi, max_rows, experts, top_k, logits, bias, the optional shared, "
       "the optional shared_gate and the optional hidden)"},
      {"out on an unpermute entry",
       permuteReplaced("slots=i64 weighted=1\n",
                       "slots=i64 weighted=1 out=f8E4M3FN\n"),
       bad, "bundle line 18: entry 'combine': unknown key 'out'"},
      {"permute experts 0", permuteReplaced("experts=128", "experts=0"), bad,
       "bundle line 4: entry 'perm': experts=0 is out of range ([1, 1024])"},
      {"permute experts 1025", permuteReplaced("experts=1024", "experts=1025"),
       bad, "entry 'wide': experts=1025 is out of range ([1, 1024])"},
      {"permute experts dynamic", permuteReplaced("experts=128", "experts=-1"),
       bad, "entry 'perm': experts=-1 is out of range ([1, 1024])"},
      {"permute top_k 0", permuteReplaced("top_k=8 hidden", "top_k=0 hidden"),
       bad, "entry 'perm': top_k=0 is out of range ([1, 2147483647])"},
      {"permute top_k -1", permuteReplaced("top_k=2", "top_k=-1"), bad,
       "entry 'perm32': top_k=-1 is out of range"},
      {"permute hidden odd", permuteReplaced("hidden=2048", "hidden=2052"), bad,
       "bundle line 4: entry 'perm': hidden=2052 is not a multiple of 8 (rows "
       "move in 16-byte vectors)"},
      {"permute hidden 4", permuteReplaced("hidden=2048", "hidden=4"), bad,
       "entry 'perm': hidden=4 is out of range (-1 or [8, 2147483647])"},
      {"permute hidden 0", permuteReplaced("hidden=8", "hidden=0"), bad,
       "entry 'wide': hidden=0 is out of range"},
      {"permute hidden -2", permuteReplaced("hidden=-1", "hidden=-2"), bad,
       "entry 'perm32': hidden=-2 is out of range"},
      {"permute offsets i16", permuteReplaced("offsets=i64", "offsets=i16"),
       bad,
       "bundle line 4: entry 'perm': offsets='i16' is neither i32 nor i64"},
      {"permute offsets empty", permuteReplaced("offsets=i32", "offsets="), bad,
       "entry 'perm32': offsets='' is neither i32 nor i64"},
      {"permute max_rows 0", permuteReplaced("max_rows=4096", "max_rows=0"),
       bad, "entry 'perm32': max_rows=0 is out of range ([1, 2147483647])"},
      // chunk: a multiple of 32 in [32, 65536].
      {"permute chunk 0", permuteReplaced("chunk=4096", "chunk=0"), bad,
       "bundle line 4: entry 'perm': chunk=0 is out of range ([32, 65536])"},
      {"permute chunk 16", permuteReplaced("chunk=32", "chunk=16"), bad,
       "bundle line 8: entry 'perm32': chunk=16 is out of range ([32, "
       "65536])"},
      {"permute chunk -1", permuteReplaced("chunk=4096", "chunk=-1"), bad,
       "entry 'perm': chunk=-1 is out of range"},
      {"permute chunk 65537", permuteReplaced("chunk=65536", "chunk=65537"),
       bad,
       "bundle line 12: entry 'wide': chunk=65537 is out of range ([32, "
       "65536])"},
      {"permute chunk 65568", permuteReplaced("chunk=65536", "chunk=65568"),
       bad, "entry 'wide': chunk=65568 is out of range"},
      {"permute chunk 48", permuteReplaced("chunk=32", "chunk=48"), bad,
       "bundle line 8: entry 'perm32': chunk=48 is not a multiple of 32 (ids "
       "are ranked a warp at a time)"},
      {"permute chunk 4095", permuteReplaced("chunk=4096", "chunk=4095"), bad,
       "entry 'perm': chunk=4095 is not a multiple of 32"},
      {"permute chunk empty", permuteReplaced("chunk=4096", "chunk="), bad,
       "entry 'perm': chunk='' is not a decimal integer"},
      {"permute chunk leading zero",
       permuteReplaced("chunk=4096", "chunk=04096"), bad,
       "entry 'perm': chunk='04096' is not a decimal integer"},
      // The ABI.
      {"newer permute abi",
       permuteReplaced("abi=permute.v2 max_rows=4096",
                       "abi=permute.v3 max_rows=4096"),
       unsupported,
       "bundle line 8: entry 'perm32': abi 'permute.v3' is not supported "
       "(this runtime implements bundle version 7 with abis "
       "grouped_matmul.v3, grouped_matmul_fp8.v1, route.v1, unpermute.v2, "
       "permute.v2, layer.v1, quantize.v1, layer_fp8.v1, grouped_wgrad.v1, "
       "planned.v1 and program.v1)"},
      {"permute.v1 refused",
       permuteReplaced("abi=permute.v2 max_rows=4096",
                       "abi=permute.v1 max_rows=4096"),
       unsupported,
       "bundle line 8: entry 'perm32': abi 'permute.v1' is not supported "
       "(this runtime implements bundle version 7 with abis "
       "grouped_matmul.v3, grouped_matmul_fp8.v1, route.v1, unpermute.v2, "
       "permute.v2, layer.v1, quantize.v1, layer_fp8.v1, grouped_wgrad.v1, "
       "planned.v1 and program.v1): "
       "it predates the "
       "multi-CTA count "
       "and index kernels, "
       "recompile it"},
      {"permute.v1 as v1 wrote it",
       permuteReplaced("abi=permute.v2 max_rows=2147483647 experts=128 top_k=8 "
                       "hidden=2048 offsets=i64 chunk=4096\n" +
                           countKernel,
                       "abi=permute.v1 max_rows=2147483647 experts=128 top_k=8 "
                       "hidden=2048 offsets=i64\n"),
       unsupported,
       "bundle line 4: entry 'perm': abi 'permute.v1' is not supported"},
      // Its kernels: exactly three.
      {"permute with one kernel",
       permuteReplaced(countKernel + indexKernel + gatherKernel, indexKernel),
       bad,
       "bundle line 4: entry 'perm' (abi permute.v2) has one kernel, "
       "'moe_permute_index_e128_k8_off64': it takes exactly three, the count, "
       "index and gather kernels"},
      {"permute with two kernels (v1's)", permuteReplaced(countKernel, ""), bad,
       "bundle line 4: entry 'perm' (abi permute.v2) has two kernels, "
       "'moe_permute_index_e128_k8_off64' and 'moe_permute_gather_off64': it "
       "takes exactly three, the count, index and gather kernels"},
      {"permute without a gather kernel", permuteReplaced(gatherKernel, ""),
       bad,
       "entry 'perm' (abi permute.v2) has two kernels, "
       "'moe_permute_count_e128_k8' and 'moe_permute_index_e128_k8_off64'"},
      {"permute with four kernels",
       permuteReplaced(gatherKernel,
                       gatherKernel + simpleKernelLine("perm", "fourth",
                                                       "moe_kernels", 128, 0)),
       bad,
       "bundle line 8: kernel 'fourth': entry 'perm' (abi permute.v2) takes "
       "exactly three kernels, the count, index and gather kernels, and has "
       "'moe_permute_count_e128_k8' (line 5), "
       "'moe_permute_index_e128_k8_off64' (line 6) and "
       "'moe_permute_gather_off64' (line 7) already"},
      {"permute without kernels",
       permuteReplaced(countKernel + indexKernel + gatherKernel, ""), bad,
       "bundle line 4: entry 'perm' has no kernels"},
      {"permute kernel twice", permuteReplaced(gatherKernel, indexKernel), bad,
       "kernel 'moe_permute_index_e128_k8_off64' appears twice in entry "
       "'perm'"},
      {"permute kernel with GEMM keys",
       permuteReplaced(gatherKernel,
                       kernelLine("perm", kPermGather64, "moe_kernels", 1,
                                  2147483647, 64, 64, 0, 0)),
       bad,
       "bundle line 7: kernel 'moe_permute_gather_off64': unknown key "
       "'rows_min' (the kernels of an abi permute.v2 entry take image, "
       "threads, smem and the optional cluster)"},
      {"permute count kernel with a chunk",
       permuteReplaced(countKernel, "kernel perm " + std::string(kPermCount64) +
                                        " image=moe_kernels threads=1024 "
                                        "smem=0 chunk=4096\n"),
       bad,
       "bundle line 5: kernel 'moe_permute_count_e128_k8': unknown key "
       "'chunk'"},
      {"permute kernel missing smem",
       permuteReplaced(indexKernel, "kernel perm " + std::string(kPermIndex64) +
                                        " image=moe_kernels threads=1024\n"),
       bad,
       "bundle line 6: kernel 'moe_permute_index_e128_k8_off64': missing key "
       "'smem'"},
      {"permute kernel threads 0",
       permuteReplaced(gatherKernel, simpleKernelLine("perm", kPermGather64,
                                                      "moe_kernels", 0, 0)),
       bad, "kernel 'moe_permute_gather_off64': threads=0 is out of range"},
      {"permute kernel threads 1025",
       permuteReplaced(indexKernel, simpleKernelLine("perm", kPermIndex64,
                                                     "moe_kernels", 1025, 0)),
       bad, "threads=1025 is out of range ([1, 1024])"},
      {"permute count kernel threads 2048",
       permuteReplaced(countKernel, simpleKernelLine("perm", kPermCount64,
                                                     "moe_kernels", 2048, 0)),
       bad,
       "bundle line 5: kernel 'moe_permute_count_e128_k8': threads=2048 is "
       "out of range ([1, 1024])"},
      {"permute kernel smem negative",
       permuteReplaced(indexKernel, simpleKernelLine("perm", kPermIndex64,
                                                     "moe_kernels", 1024, -1)),
       bad, "smem=-1 is out of range ([0, 2147483647])"},
      {"permute kernel of unknown image",
       permuteReplaced(gatherKernel,
                       simpleKernelLine("perm", kPermGather64, "nope", 128, 0)),
       bad,
       "bundle line 7: kernel 'moe_permute_gather_off64' refers to unknown "
       "image 'nope'"},
      {"permute count kernel of unknown image",
       permuteReplaced(countKernel,
                       simpleKernelLine("perm", kPermCount64, "nope", 1024, 0)),
       bad,
       "bundle line 5: kernel 'moe_permute_count_e128_k8' refers to unknown "
       "image 'nope'"},
  };
}

/// Errors of the bias and activation keys of grouped_matmul.v3 entries
/// (contract version 5).
std::vector<Malformed> malformedBiasBundles() {
  const moeStatus bad = MOE_STATUS_INVALID_BUNDLE;
  const std::string bias = biasBundle(), mlp = mlpBundle();
  return {
      {"missing bias", replaced(" bias=none activation", " activation"), bad,
       "bundle line 5: entry 'gate_up': missing key 'bias'"},
      {"missing activation", replaced(" activation=none\n", "\n", bias), bad,
       "bundle line 4: entry 'bstore': missing key 'activation'"},
      {"duplicate bias", replaced("bias=f32", "bias=f32 bias=f32", bias), bad,
       "bundle line 4: entry 'bstore': duplicate key 'bias'"},
      {"bias f16", replaced("bias=f32", "bias=f16", bias), bad,
       "bundle line 4: entry 'bstore': bias='f16' is not none, f32 or bf16"},
      {"bias as a route's", replaced("bias=bf16", "bias=1", bias), bad,
       "bundle line 6: entry 'bswiglu': bias='1' is not none, f32 or bf16"},
      {"bias empty", replaced("bias=none", "bias="), bad,
       "entry 'gate_up': bias='' is not none, f32 or bf16"},
      {"bias in capitals", replaced("bias=f32", "bias=F32", bias), bad,
       "bias='F32' is not none"},
      {"activation relu",
       replaced("activation=gptoss", "activation=relu", bias), bad,
       "bundle line 6: entry 'bswiglu': activation='relu' is not none, silu "
       "or gptoss"},
      {"activation empty", replaced("activation=none", "activation="), bad,
       "entry 'gate_up': activation='' is not none, silu or gptoss"},
      {"swiglu without activation",
       replaced("activation=silu", "activation=none", mlp), bad,
       "bundle line 4: entry 'mlp_gate_up': activation=none does not fit "
       "epilogue=swiglu (swiglu takes silu or gptoss, store and row_scale "
       "take none)"},
      {"store with silu", replaced("activation=none", "activation=silu"), bad,
       "bundle line 5: entry 'gate_up': activation=silu does not fit "
       "epilogue=store"},
      {"row_scale with gptoss",
       replaced("bias=none activation=none", "bias=none activation=gptoss",
                mlp),
       bad,
       "bundle line 7: entry 'mlp_down': activation=gptoss does not fit "
       "epilogue=row_scale"},
      {"activation on a permute",
       replaced("chunk=4096\n", "chunk=4096 activation=none\n",
                permuteBundle()),
       bad, "bundle line 4: entry 'perm': unknown key 'activation'"},
  };
}

/// layerBundle() with the first `from` replaced by `to`.
std::string layerReplaced(const std::string &from, const std::string &to,
                          const std::string &bytes = layerBundle()) {
  return replaced(from, to, bytes);
}

/// Errors of layer.v1 entries: their keys, the parts and how they chain.
std::vector<Malformed> malformedLayerBundles() {
  const moeStatus bad = MOE_STATUS_INVALID_BUNDLE;
  const std::string layer = layerBundle();
  // mix_unpermute and its kernel moved after the layer line.
  const std::string unpermuteLines =
      "entry mix_unpermute op=moe.unpermute abi=unpermute.v2 max_rows=4096 "
      "hidden=256 top_k=2 slots=i32 weighted=1\n" +
      simpleKernelLine("mix_unpermute", kMixSymbols[6], "moe_kernels", 256, 0);
  std::string late = layerReplaced(unpermuteLines, "");
  late = layerReplaced("unpermute=mix_unpermute\n",
                       "unpermute=mix_unpermute\n" + unpermuteLines, late);
  return {
      // Without a route (the model routes) E and k are the permute's.
      {"layer without route, k mismatch",
       layerReplaced(" route=mix_route", "",
                     layerReplaced("experts=8 top_k=2 hidden=256 offsets=i32",
                                   "experts=8 top_k=3 hidden=256 offsets=i32")),
       bad,
       "entry 'mix': unpermute=mix_unpermute has top_k=2, but "
       "permute=mix_permute has top_k=3"},
      {"layer missing max_rows",
       layerReplaced("layer.v1 max_rows=4096", "layer.v1"), bad,
       "bundle line 16: entry 'mix': missing key 'max_rows'"},
      {"layer with experts",
       layerReplaced("unpermute=mix_unpermute\n",
                     "unpermute=mix_unpermute experts=8\n"),
       bad,
       "bundle line 16: entry 'mix': unknown key 'experts' (abi layer.v1 "
       "takes op, abi, max_rows, the optional route, permute, gate_up, down "
       "and "
       "unpermute)"},
      {"layer max_rows 0",
       layerReplaced("layer.v1 max_rows=4096", "layer.v1 max_rows=0"), bad,
       "entry 'mix': max_rows=0 is out of range ([1, 2147483647])"},
      {"layer part missing", layerReplaced("route=mix_route", "route=nope"),
       bad,
       "bundle line 16: entry 'mix': route='nope' is not an entry defined "
       "before this line (the parts of a layer come first)"},
      {"layer part after it", late, bad,
       "bundle line 14: entry 'mix': unpermute='mix_unpermute' is not an "
       "entry defined before this line (the parts of a layer come first)"},
      {"layer part of another abi",
       layerReplaced("route=mix_route", "route=mix_permute"), bad,
       "bundle line 16: entry 'mix': route=mix_permute is op=moe.permute "
       "abi=permute.v2, not op=moe.route abi=route.v1"},
      {"layer part of another op",
       layerReplaced("entry mix_route op=moe.route",
                     "entry mix_route op=vendor.route"),
       bad,
       "entry 'mix': route=mix_route is op=vendor.route abi=route.v1, not "
       "op=moe.route abi=route.v1"},
      {"layer gate_up a grouped matmul",
       layerReplaced("entry mix_gate_up op=moe.expert_mlp",
                     "entry mix_gate_up op=moe.grouped_matmul"),
       bad,
       "entry 'mix': gate_up=mix_gate_up is op=moe.grouped_matmul "
       "abi=grouped_matmul.v3, not op=moe.expert_mlp abi=grouped_matmul.v3"},
      {"layer unpermute a route",
       layerReplaced("unpermute=mix_unpermute", "unpermute=mix_route"), bad,
       "entry 'mix': unpermute=mix_route is op=moe.route abi=route.v1, not "
       "op=moe.unpermute abi=unpermute.v2"},
      {"layer gate_up not swiglu",
       layerReplaced("gate_up=mix_gate_up", "gate_up=mix_down"), bad,
       "bundle line 16: entry 'mix': gate_up=mix_down has epilogue=store, "
       "expected swiglu"},
      {"layer down swiglu", layerReplaced("down=mix_down", "down=mix_gate_up"),
       bad,
       "entry 'mix': down=mix_gate_up has epilogue=swiglu, expected store"},
      {"layer down row_scale",
       layerReplaced("epilogue=store experts=8",
                     "epilogue=row_scale experts=8"),
       bad,
       "entry 'mix': down=mix_down has epilogue=row_scale, expected store"},
      {"layer permute experts",
       layerReplaced("experts=8 top_k=2 hidden=256", "experts=16 top_k=2 "
                                                     "hidden=256"),
       bad,
       "bundle line 16: entry 'mix': permute=mix_permute has experts=16, but "
       "route=mix_route has experts=8"},
      {"layer permute top_k",
       layerReplaced("experts=8 top_k=2 hidden=256", "experts=8 top_k=4 "
                                                     "hidden=256"),
       bad,
       "entry 'mix': permute=mix_permute has top_k=4, but route=mix_route has "
       "top_k=2"},
      {"layer unpermute top_k",
       layerReplaced("hidden=256 top_k=2 slots", "hidden=256 top_k=4 slots"),
       bad,
       "entry 'mix': unpermute=mix_unpermute has top_k=4, but "
       "route=mix_route has top_k=2"},
      {"layer gate_up experts",
       layerReplaced("epilogue=swiglu experts=8", "epilogue=swiglu experts=16"),
       bad,
       "entry 'mix': gate_up=mix_gate_up has experts=16, but route=mix_route "
       "has experts=8"},
      {"layer down experts",
       layerReplaced("epilogue=store experts=4", "epilogue=store experts=8"),
       bad,
       "bundle line 29: entry 'oss': down=oss_down has experts=8, but "
       "route=oss_route has experts=4"},
      {"layer gate_up offsets",
       layerReplaced("k=256 max_rows=8192 offsets=i32",
                     "k=256 max_rows=8192 offsets=i64"),
       bad,
       "entry 'mix': gate_up=mix_gate_up has offsets=i64, but "
       "permute=mix_permute has offsets=i32"},
      {"layer down offsets",
       layerReplaced("k=128 max_rows=8192 offsets=i32",
                     "k=128 max_rows=8192 offsets=i64"),
       bad,
       "entry 'mix': down=mix_down has offsets=i64, but permute=mix_permute "
       "has offsets=i32"},
      {"layer unpermute slots", layerReplaced("slots=i32", "slots=i64"), bad,
       "entry 'mix': unpermute=mix_unpermute has slots=i64, but "
       "permute=mix_permute has offsets=i32"},
      {"layer unpermute unweighted",
       layerReplaced("slots=i32 weighted=1", "slots=i32 weighted=0"), bad,
       "entry 'mix': unpermute=mix_unpermute has weighted=0, but a layer "
       "combines with the routing weights"},
      {"layer gate_up k", layerReplaced("n=256 k=256", "n=256 k=512"), bad,
       "entry 'mix': gate_up=mix_gate_up has k=512, but permute=mix_permute "
       "has hidden=256"},
      {"layer down n", layerReplaced("n=256 k=128", "n=512 k=128"), bad,
       "entry 'mix': down=mix_down has n=512, but permute=mix_permute has "
       "hidden=256"},
      {"layer unpermute hidden",
       layerReplaced("hidden=256 top_k=2 slots", "hidden=512 top_k=2 slots"),
       bad,
       "entry 'mix': unpermute=mix_unpermute has hidden=512, but "
       "permute=mix_permute has hidden=256"},
      {"layer H without the permute's",
       layerReplaced("hidden=-1 top_k=2 slots=i64",
                     "hidden=64 top_k=2 slots=i64",
                     layerReplaced("experts=4 n=-1", "experts=4 n=128")),
       bad,
       "bundle line 29: entry 'oss': unpermute=oss_unpermute has hidden=64, "
       "but down=oss_down has n=128"},
      {"layer I", layerReplaced("n=256 k=128", "n=256 k=64"), bad,
       "entry 'mix': down=mix_down has k=64, but gate_up=mix_gate_up has "
       "n=256 (k must be n/2)"},
      {"kernel under a layer",
       layerReplaced("unpermute=mix_unpermute\n",
                     "unpermute=mix_unpermute\n" +
                         simpleKernelLine("mix", "k", "moe_kernels", 128, 0)),
       bad,
       "bundle line 17: kernel 'k': entry 'mix' (abi layer.v1) takes no "
       "kernels (it launches those of its parts)"},
      {"GEMM kernel under a layer",
       layerReplaced("down=oss_down unpermute=oss_unpermute\n",
                     "down=oss_down unpermute=oss_unpermute\n" +
                         kernelLine("oss", "g", "moe_kernels", 1, 2147483647,
                                    64, 64, 0, 0)),
       bad,
       "bundle line 30: kernel 'g': entry 'oss' (abi layer.v1) takes no "
       "kernels"},
  };
}

/// layerFp8Bundle() with the first `from` replaced by `to`.
std::string layerFp8Replaced(const std::string &from, const std::string &to,
                             const std::string &bytes = layerFp8Bundle()) {
  return replaced(from, to, bytes);
}

/// Errors of layer_fp8.v1 entries: their keys, the op and ABI of each part,
/// what the quantize parts make, and how the parts chain.
std::vector<Malformed> malformedLayerFp8Bundles() {
  const moeStatus bad = MOE_STATUS_INVALID_BUNDLE;
  const std::string fmixQuantize =
      fp8LayerQuantizeLine("fmix_quantize", "moe.quantize", "8192", "256");
  const std::string fmixIntermediate = fp8LayerQuantizeLine(
      "fmix_intermediate", "moe.expert_mlp", "8192", "128");
  // fmix_quantize and fmix_intermediate with `from` replaced by `to`.
  auto quantizeWith = [&](const std::string &from, const std::string &to) {
    return layerFp8Replaced(fmixQuantize, replaced(from, to, fmixQuantize));
  };
  auto intermediateWith = [&](const std::string &from, const std::string &to) {
    return layerFp8Replaced(fmixIntermediate,
                            replaced(from, to, fmixIntermediate));
  };
  // fmix_gate_up as a bf16 grouped_matmul.v3 entry (its kernel's tile_k of
  // 64 bf16).
  std::string bf16GateUp = layerFp8Replaced(
      "entry fmix_gate_up op=moe.expert_mlp abi=grouped_matmul_fp8.v1 "
      "format=fp8_block",
      "entry fmix_gate_up op=moe.expert_mlp abi=grouped_matmul.v3");
  bf16GateUp = replaced("tile_k=128", "tile_k=64", bf16GateUp);
  return {
      // Without a quantize part the permute's gather quantizes the rows
      // (out=f8E4M3FN); with one, it writes bf16.
      {"fp8 layer without quantize of a bf16 permute",
       layerFp8Replaced(" quantize=fmix_quantize", ""), bad,
       "bundle line 20: entry 'fmix': permute=fmix_permute writes bf16 (no "
       "out key), but the layer has no quantize part to quantize it: "
       "without one, permute must have out=f8E4M3FN"},
      {"fp8 layer with quantize of an fp8-gather permute",
       layerFp8Replaced("offsets=i32 chunk=4096\n",
                        "offsets=i32 chunk=4096 out=f8E4M3FN\n"),
       bad,
       "bundle line 20: entry 'fmix': permute=fmix_permute has out=f8E4M3FN, "
       "but quantize=fmix_quantize quantizes its bf16 output (a permute that "
       "quantizes its output itself takes no quantize part)"},
      {"fp8-gather layer of a bf16 permute",
       layerFp8Replaced("offsets=i64 chunk=64 out=f8E4M3FN",
                        "offsets=i64 chunk=64", layerFp8GatherBundle()),
       bad,
       "bundle line 29: entry 'foss': permute=foss_permute writes bf16 (no "
       "out key), but the layer has no quantize part to quantize it"},
      {"fp8-gather layer with a quantize",
       layerFp8Replaced(
           "permute=fmix_permute gate_up=fmix_gate_up",
           "permute=fmix_permute quantize=fmix_quantize gate_up=fmix_gate_up",
           layerFp8Replaced("entry fmix_gate_up ",
                            fmixQuantize +
                                simpleKernelLine("fmix_quantize",
                                                 "fquant_rows_h256",
                                                 "moe_kernels", 256, 0) +
                                "entry fmix_gate_up ",
                            layerFp8GatherBundle())),
       bad,
       "bundle line 18: entry 'fmix': permute=fmix_permute has out=f8E4M3FN, "
       "but quantize=fmix_quantize quantizes its bf16 output"},
      {"fp8-gather layer quantize undefined",
       layerFp8Replaced("permute=fmix_permute gate_up=fmix_gate_up",
                        "permute=fmix_permute quantize=nope "
                        "gate_up=fmix_gate_up",
                        layerFp8GatherBundle()),
       bad,
       "bundle line 16: entry 'fmix': quantize='nope' is not an entry "
       "defined before this line"},
      {"fp8-gather layer quantize empty",
       layerFp8Replaced("permute=fmix_permute gate_up=fmix_gate_up",
                        "permute=fmix_permute quantize= gate_up=fmix_gate_up",
                        layerFp8GatherBundle()),
       bad, "entry 'fmix': quantize='' is not an entry defined"},
      {"fp8-gather layer duplicate quantize",
       layerFp8Replaced("permute=fmix_permute gate_up=fmix_gate_up",
                        "permute=fmix_permute quantize=nope quantize=nope "
                        "gate_up=fmix_gate_up",
                        layerFp8GatherBundle()),
       bad, "bundle line 16: entry 'fmix': duplicate key 'quantize'"},
      {"layer.v1 of an fp8-gather permute",
       replaced("offsets=i32 chunk=4096\n",
                "offsets=i32 chunk=4096 out=f8E4M3FN\n", layerBundle()),
       bad,
       "bundle line 16: entry 'mix': permute=mix_permute has out=f8E4M3FN, "
       "but abi layer.v1 runs bf16 GEMMs on bf16 rows (an FP8 gather belongs "
       "to a layer of abi layer_fp8.v1)"},
      // Without an intermediate part the gate_up quantizes its output
      // (out=f8E4M3FN); with one, it writes bf16.
      {"fp8 layer without intermediate of a bf16 gate_up",
       layerFp8Replaced(" intermediate=fmix_intermediate", ""), bad,
       "bundle line 20: entry 'fmix': gate_up=fmix_gate_up writes bf16 (no "
       "out key), but the layer has no intermediate part to quantize it: "
       "without one, gate_up must have out=f8E4M3FN"},
      {"fp8 layer with intermediate of an fp8-out gate_up",
       layerFp8Replaced("entry fmix_gate_up op=moe.expert_mlp "
                        "abi=grouped_matmul_fp8.v1 format=fp8_block",
                        "entry fmix_gate_up op=moe.expert_mlp "
                        "abi=grouped_matmul_fp8.v1 format=fp8_block "
                        "out=f8E4M3FN"),
       bad,
       "bundle line 20: entry 'fmix': gate_up=fmix_gate_up has "
       "out=f8E4M3FN, but intermediate=fmix_intermediate quantizes its bf16 "
       "output (a gate_up that quantizes its output itself takes no "
       "intermediate part)"},
      {"fp8-out layer of a bf16 gate_up",
       layerFp8Replaced("abi=grouped_matmul_fp8.v1 format=fp8_block "
                        "out=f8E4M3FN epilogue=swiglu activation=gptoss",
                        "abi=grouped_matmul_fp8.v1 format=fp8_block "
                        "epilogue=swiglu activation=gptoss",
                        layerFp8OutBundle()),
       bad,
       "bundle line 33: entry 'foss': gate_up=foss_gate_up writes bf16 (no "
       "out key), but the layer has no intermediate part to quantize it"},
      {"fp8-out layer with an intermediate",
       layerFp8Replaced(
           "gate_up=fmix_gate_up down=fmix_down",
           "gate_up=fmix_gate_up intermediate=fmix_intermediate "
           "down=fmix_down",
           layerFp8Replaced(
               "entry fmix_down ",
               fp8LayerQuantizeLine("fmix_intermediate", "moe.expert_mlp",
                                    "8192", "128") +
                   simpleKernelLine("fmix_intermediate", "fquant_inter_i128",
                                    "moe_kernels", 256, 0) +
                   "entry fmix_down ",
               layerFp8OutBundle())),
       bad,
       "bundle line 20: entry 'fmix': gate_up=fmix_gate_up has "
       "out=f8E4M3FN, but intermediate=fmix_intermediate quantizes its bf16 "
       "output"},
      {"fp8-out layer intermediate undefined",
       layerFp8Replaced("gate_up=fmix_gate_up down=fmix_down",
                        "gate_up=fmix_gate_up intermediate=nope "
                        "down=fmix_down",
                        layerFp8OutBundle()),
       bad,
       "bundle line 18: entry 'fmix': intermediate='nope' is not an entry "
       "defined before this line"},
      {"fp8-out layer intermediate empty",
       layerFp8Replaced("gate_up=fmix_gate_up down=fmix_down",
                        "gate_up=fmix_gate_up intermediate= down=fmix_down",
                        layerFp8OutBundle()),
       bad, "entry 'fmix': intermediate='' is not an entry defined"},
      {"fp8 layer missing down", layerFp8Replaced(" down=fmix_down", ""), bad,
       "bundle line 20: entry 'fmix': missing key 'down'"},
      {"fp8 layer with experts",
       layerFp8Replaced("unpermute=fmix_unpermute\n",
                        "unpermute=fmix_unpermute experts=8\n"),
       bad,
       "bundle line 20: entry 'fmix': unknown key 'experts' (abi "
       "layer_fp8.v1 takes op, abi, max_rows, the optional route, permute, "
       "the optional "
       "quantize, gate_up, the optional intermediate, down and unpermute)"},
      {"fp8 layer as a layer.v1",
       layerFp8Replaced("abi=layer_fp8.v1 max_rows=4096",
                        "abi=layer.v1 max_rows=4096"),
       bad,
       "bundle line 20: entry 'fmix': unknown key 'quantize' (abi layer.v1 "
       "takes op, abi, max_rows, the optional route, permute, gate_up, down "
       "and "
       "unpermute)"},
      {"fp8 layer max_rows 0",
       layerFp8Replaced("layer_fp8.v1 max_rows=4096",
                        "layer_fp8.v1 max_rows=0"),
       bad, "entry 'fmix': max_rows=0 is out of range ([1, 2147483647])"},
      {"fp8 layer quantize missing",
       layerFp8Replaced("quantize=fmix_quantize", "quantize=nope"), bad,
       "bundle line 20: entry 'fmix': quantize='nope' is not an entry "
       "defined before this line (the parts of a layer come first)"},
      {"fp8 layer quantize of another op",
       layerFp8Replaced("quantize=fmix_quantize", "quantize=fmix_intermediate"),
       bad,
       "bundle line 20: entry 'fmix': quantize=fmix_intermediate is "
       "op=moe.expert_mlp abi=quantize.v1, not op=moe.quantize "
       "abi=quantize.v1"},
      {"fp8 layer intermediate of another op",
       layerFp8Replaced("intermediate=fmix_intermediate",
                        "intermediate=fmix_quantize"),
       bad,
       "entry 'fmix': intermediate=fmix_quantize is op=moe.quantize "
       "abi=quantize.v1, not op=moe.expert_mlp abi=quantize.v1"},
      {"fp8 layer quantize of another abi",
       layerFp8Replaced("quantize=fmix_quantize", "quantize=fmix_permute"), bad,
       "entry 'fmix': quantize=fmix_permute is op=moe.permute abi=permute.v2, "
       "not op=moe.quantize abi=quantize.v1"},
      {"fp8 layer intermediate a GEMM",
       layerFp8Replaced("intermediate=fmix_intermediate",
                        "intermediate=fmix_down"),
       bad,
       "entry 'fmix': intermediate=fmix_down is op=moe.expert_mlp "
       "abi=grouped_matmul_fp8.v1, not op=moe.expert_mlp abi=quantize.v1"},
      {"fp8 layer gate_up a quantize",
       layerFp8Replaced("gate_up=fmix_gate_up", "gate_up=fmix_intermediate"),
       bad,
       "entry 'fmix': gate_up=fmix_intermediate is op=moe.expert_mlp "
       "abi=quantize.v1, not op=moe.expert_mlp abi=grouped_matmul_fp8.v1"},
      {"fp8 layer of a bf16 gate_up", bf16GateUp, bad,
       "bundle line 20: entry 'fmix': gate_up=fmix_gate_up is "
       "op=moe.expert_mlp abi=grouped_matmul.v3, not op=moe.expert_mlp "
       "abi=grouped_matmul_fp8.v1"},
      {"fp8 layer down a grouped matmul",
       layerFp8Replaced("entry fmix_down op=moe.expert_mlp",
                        "entry fmix_down op=moe.grouped_matmul"),
       bad,
       "entry 'fmix': down=fmix_down is op=moe.grouped_matmul "
       "abi=grouped_matmul_fp8.v1, not op=moe.expert_mlp "
       "abi=grouped_matmul_fp8.v1"},
      // An FP8 part of a format the reader does not know is refused on its
      // own line.
      {"fp8 layer gate_up mxfp4",
       layerFp8Replaced("format=fp8_block", "format=mxfp4"), bad,
       "bundle line 12: entry 'fmix_gate_up': format='mxfp4' is neither "
       "fp8_block nor mxfp8 (the formats of abi grouped_matmul_fp8.v1)"},
      // What the quantize parts make: what the GEMMs read.
      {"fp8 layer quantize e5m2",
       quantizeWith("element=f8E4M3FN", "element=f8E5M2"), bad,
       "bundle line 20: entry 'fmix': quantize=fmix_quantize has "
       "element=f8E5M2, but the gate_up GEMM reads f8E4M3FN values"},
      {"fp8 layer intermediate e5m2",
       intermediateWith("element=f8E4M3FN", "element=f8E5M2"), bad,
       "entry 'fmix': intermediate=fmix_intermediate has element=f8E5M2, but "
       "the down GEMM reads f8E4M3FN values"},
      {"fp8 layer intermediate e8m0",
       intermediateWith("scale=f32 input=bf16 block_rows=1 block_cols=128",
                        "scale=e8m0 input=bf16 block_rows=1 block_cols=32"),
       bad,
       "entry 'fmix': intermediate=fmix_intermediate has scale=e8m0, but the "
       "down GEMM reads f32 scales"},
      {"fp8 layer quantize [1, 32]",
       quantizeWith("block_cols=128", "block_cols=32"), bad,
       "bundle line 20: entry 'fmix': quantize=fmix_quantize has block [1, "
       "32], but the gate_up GEMM reads a scale per [1, 128] group of a row"},
      {"fp8 layer intermediate [128, 128]",
       intermediateWith("block_rows=1", "block_rows=128"), bad,
       "entry 'fmix': intermediate=fmix_intermediate has block [128, 128], "
       "but the down GEMM reads a scale per [1, 128] group of a row"},
      {"fp8 layer quantize f32 input", quantizeWith("input=bf16", "input=f32"),
       bad,
       "entry 'fmix': quantize=fmix_quantize has input=f32, but the layer "
       "quantizes the bf16 output of its permute"},
      {"fp8 layer intermediate f32 input",
       intermediateWith("input=bf16", "input=f32"), bad,
       "entry 'fmix': intermediate=fmix_intermediate has input=f32, but the "
       "layer quantizes the bf16 output of its gate_up GEMM"},
      {"fp8 layer quantize rank 3", quantizeWith("rank=2", "rank=3"), bad,
       "entry 'fmix': quantize=fmix_quantize has rank=3, but the layer "
       "quantizes [T*k, C] matrices (rank 2)"},
      // Their columns: H and I.
      {"fp8 layer quantize cols", quantizeWith("cols=256", "cols=512"), bad,
       "bundle line 20: entry 'fmix': quantize=fmix_quantize has cols=512, "
       "but permute=fmix_permute has hidden=256"},
      {"fp8 layer quantize cols without the permute's",
       layerFp8Replaced(
           "experts=4 n=-1", "experts=4 n=128",
           layerFp8Replaced("rows=-1 cols=-1\nkernel foss_quantize",
                            "rows=-1 cols=256\nkernel "
                            "foss_quantize")),
       bad,
       "bundle line 37: entry 'foss': down=foss_down has n=128, but "
       "quantize=foss_quantize has cols=256"},
      {"fp8 layer intermediate cols",
       intermediateWith("rows=-1 cols=128", "rows=-1 cols=256"), bad,
       "bundle line 20: entry 'fmix': intermediate=fmix_intermediate has "
       "cols=256, but down=fmix_down has k=128"},
      {"fp8 layer intermediate cols against gate_up",
       layerFp8Replaced(
           "activation=gptoss bias=f32 experts=-1 n=-1",
           "activation=gptoss bias=f32 experts=-1 n=512",
           layerFp8Replaced("rows=-1 cols=-1\nkernel foss_intermediate",
                            "rows=-1 cols=128\nkernel foss_intermediate")),
       bad,
       "bundle line 37: entry 'foss': intermediate=foss_intermediate has "
       "cols=128, but gate_up=foss_gate_up has n=512 (cols must be n/2)"},
      // The chain checks of layer.v1.
      {"fp8 layer down row_scale",
       layerFp8Replaced("epilogue=store activation=none bias=none experts=8",
                        "epilogue=row_scale activation=none bias=none "
                        "experts=8"),
       bad,
       "entry 'fmix': down=fmix_down has epilogue=row_scale, expected store"},
      {"fp8 layer gate_up offsets",
       layerFp8Replaced("k=256 max_rows=8192 offsets=i32",
                        "k=256 max_rows=8192 offsets=i64"),
       bad,
       "entry 'fmix': gate_up=fmix_gate_up has offsets=i64, but "
       "permute=fmix_permute has offsets=i32"},
      {"fp8 layer down experts",
       layerFp8Replaced("bias=bf16 experts=4", "bias=bf16 experts=8"), bad,
       "bundle line 37: entry 'foss': down=foss_down has experts=8, but "
       "route=foss_route has experts=4"},
      {"fp8 layer I", layerFp8Replaced("n=256 k=128", "n=256 k=64"), bad,
       "entry 'fmix': down=fmix_down has k=64, but gate_up=fmix_gate_up has "
       "n=256 (k must be n/2)"},
      {"kernel under an fp8 layer",
       layerFp8Replaced(
           "unpermute=fmix_unpermute\n",
           "unpermute=fmix_unpermute\n" +
               simpleKernelLine("fmix", "k", "moe_kernels", 128, 0)),
       bad,
       "bundle line 21: kernel 'k': entry 'fmix' (abi layer_fp8.v1) takes no "
       "kernels (it launches those of its parts)"},
      {"newer fp8 layer abi",
       layerFp8Replaced("abi=layer_fp8.v1 max_rows=4096",
                        "abi=layer_fp8.v2 max_rows=4096"),
       MOE_STATUS_UNSUPPORTED,
       "bundle line 20: entry 'fmix': abi 'layer_fp8.v2' is not supported "
       "(this runtime implements bundle version 7 with abis "
       "grouped_matmul.v3, grouped_matmul_fp8.v1, route.v1, unpermute.v2, "
       "permute.v2, layer.v1, quantize.v1, layer_fp8.v1, grouped_wgrad.v1, "
       "planned.v1 and program.v1)"},
  };
}

/// Errors of layer_fp8.v1 entries of MXFP8 GEMMs (layerMxfp8Bundle()):
/// one format for both GEMMs, both quantize parts, each making e4m3 values
/// and E8M0 scales per [1, 32] group.
std::vector<Malformed> malformedLayerMxfp8Bundles() {
  const moeStatus bad = MOE_STATUS_INVALID_BUNDLE;
  const std::string mx = layerMxfp8Bundle();
  auto mxReplaced = [&mx](const std::string &from, const std::string &to) {
    return replaced(from, to, mx);
  };
  const std::string fmixQuantize = replaced(
      "scale=f32 input=bf16 block_rows=1 block_cols=128",
      "scale=e8m0 input=bf16 block_rows=1 block_cols=32",
      fp8LayerQuantizeLine("fmix_quantize", "moe.quantize", "8192", "256"));
  const std::string fmixIntermediate =
      replaced("scale=f32 input=bf16 block_rows=1 block_cols=128",
               "scale=e8m0 input=bf16 block_rows=1 block_cols=32",
               fp8LayerQuantizeLine("fmix_intermediate", "moe.expert_mlp",
                                    "8192", "128"));
  // fmix_quantize and fmix_intermediate with `from` replaced by `to`.
  auto quantizeWith = [&](const std::string &from, const std::string &to) {
    return mxReplaced(fmixQuantize, replaced(from, to, fmixQuantize));
  };
  auto intermediateWith = [&](const std::string &from, const std::string &to) {
    return mxReplaced(fmixIntermediate, replaced(from, to, fmixIntermediate));
  };
  const std::string gateUp = "entry fmix_gate_up op=moe.expert_mlp "
                             "abi=grouped_matmul_fp8.v1 format=";
  const std::string down = "entry fmix_down op=moe.expert_mlp "
                           "abi=grouped_matmul_fp8.v1 format=";
  return {
      // Both GEMMs read what the quantize parts make: one format.
      {"mxfp8 layer of an fp8_block down",
       mxReplaced(down + "mxfp8", down + "fp8_block"), bad,
       "bundle line 20: entry 'fmix': gate_up=fmix_gate_up has format=mxfp8, "
       "but down=fmix_down has format=fp8_block (the GEMMs of a layer share "
       "one format)"},
      {"mxfp8 layer of an fp8_block gate_up",
       mxReplaced(gateUp + "mxfp8", gateUp + "fp8_block"), bad,
       "bundle line 20: entry 'fmix': gate_up=fmix_gate_up has "
       "format=fp8_block, but down=fmix_down has format=mxfp8"},
      {"fp8_block layer of an mxfp8 down",
       layerFp8Replaced(down + "fp8_block", down + "mxfp8"), bad,
       "bundle line 20: entry 'fmix': gate_up=fmix_gate_up has "
       "format=fp8_block, but down=fmix_down has format=mxfp8"},
      // No gather and no GEMM epilogue writes MXFP8: both quantize parts.
      {"mxfp8 layer of an fp8-gather permute",
       mxReplaced("offsets=i32 chunk=4096\n",
                  "offsets=i32 chunk=4096 out=f8E4M3FN\n"),
       bad,
       "bundle line 20: entry 'fmix': permute=fmix_permute has out=f8E4M3FN, "
       "but the layer's GEMMs have format=mxfp8 (a gather quantizes in [1, "
       "128] groups with f32 scales, for fp8_block GEMMs; an mxfp8 layer "
       "quantizes the bf16 rows with a quantize part)"},
      {"mxfp8 layer of an fp8-gather permute, no quantize",
       replaced(" quantize=fmix_quantize", "",
                mxReplaced("offsets=i32 chunk=4096\n",
                           "offsets=i32 chunk=4096 out=f8E4M3FN\n")),
       bad,
       "bundle line 20: entry 'fmix': permute=fmix_permute has out=f8E4M3FN, "
       "but the layer's GEMMs have format=mxfp8"},
      {"mxfp8 layer without quantize",
       mxReplaced(" quantize=fmix_quantize", ""), bad,
       "bundle line 20: entry 'fmix': the layer has no quantize part, but its "
       "GEMMs have format=mxfp8 (no gather quantizes to MXFP8: an mxfp8 "
       "layer quantizes the permute's bf16 rows by its quantize part)"},
      {"mxfp8 layer without intermediate",
       mxReplaced(" intermediate=fmix_intermediate", ""), bad,
       "bundle line 20: entry 'fmix': the layer has no intermediate part, but "
       "its GEMMs have format=mxfp8 (no GEMM epilogue quantizes to MXFP8: an "
       "mxfp8 layer quantizes the gate_up's bf16 output by its intermediate "
       "part)"},
      {"mxfp8 layer without either",
       replaced(" intermediate=fmix_intermediate", "",
                mxReplaced(" quantize=fmix_quantize", "")),
       bad, "entry 'fmix': the layer has no quantize part"},
      {"mxfp8 layer of an fp8-out gate_up",
       mxReplaced(gateUp + "mxfp8", gateUp + "mxfp8 out=f8E4M3FN"), bad,
       "bundle line 12: entry 'fmix_gate_up': out=f8E4M3FN with "
       "format=mxfp8"},
      // What the quantize parts make: e4m3 values and an E8M0 scale per
      // [1, 32] group of a row of bf16 [T*k, C].
      {"mxfp8 layer quantize f32 [1, 128]",
       quantizeWith("scale=e8m0 input=bf16 block_rows=1 block_cols=32",
                    "scale=f32 input=bf16 block_rows=1 block_cols=128"),
       bad,
       "bundle line 20: entry 'fmix': quantize=fmix_quantize has scale=f32, "
       "but the gate_up GEMM reads e8m0 scales (format=mxfp8)"},
      {"mxfp8 layer intermediate f32 [1, 32]",
       intermediateWith("scale=e8m0", "scale=f32"), bad,
       "bundle line 20: entry 'fmix': intermediate=fmix_intermediate has "
       "scale=f32, but the down GEMM reads e8m0 scales (format=mxfp8)"},
      {"mxfp8 layer quantize e5m2",
       quantizeWith("element=f8E4M3FN", "element=f8E5M2"), bad,
       "bundle line 20: entry 'fmix': quantize=fmix_quantize has "
       "element=f8E5M2, but the gate_up GEMM reads f8E4M3FN values"},
      {"mxfp8 layer intermediate f32 input",
       intermediateWith("input=bf16", "input=f32"), bad,
       "entry 'fmix': intermediate=fmix_intermediate has input=f32, but the "
       "layer quantizes the bf16 output of its gate_up GEMM"},
      {"mxfp8 layer quantize rank 3", quantizeWith("rank=2", "rank=3"), bad,
       "entry 'fmix': quantize=fmix_quantize has rank=3, but the layer "
       "quantizes [T*k, C] matrices (rank 2)"},
      {"mxfp8 layer quantize cols", quantizeWith("cols=256", "cols=512"), bad,
       "bundle line 20: entry 'fmix': quantize=fmix_quantize has cols=512, "
       "but permute=fmix_permute has hidden=256"},
  };
}

/// quantizeBundle() with the first `from` replaced by `to`.
std::string quantizeReplaced(const std::string &from, const std::string &to) {
  return replaced(from, to, quantizeBundle());
}

/// Errors of quantize.v1 entries and their kernels.
std::vector<Malformed> malformedQuantizeBundles() {
  const moeStatus bad = MOE_STATUS_INVALID_BUNDLE;
  const std::string mxKeys = "max_rows=2147483647 element=f8E4M3FN scale=e8m0 "
                             "input=bf16 block_rows=1 block_cols=32 rank=2 "
                             "batch=1 rows=-1 cols=4096";
  const std::string mxKernel =
      simpleKernelLine("mx", kQuantMx, "moe_kernels", 256, 0);
  return {
      {"quantize missing cols", quantizeReplaced(" cols=4096", ""), bad,
       "bundle line 4: entry 'mx': missing key 'cols'"},
      {"quantize missing element", quantizeReplaced(" element=f8E5M2", ""), bad,
       "bundle line 6: entry 'act': missing key 'element'"},
      {"quantize missing rank", quantizeReplaced(" rank=3 batch=8", " batch=8"),
       bad, "bundle line 8: entry 'weights': missing key 'rank'"},
      {"quantize unknown key",
       quantizeReplaced("cols=4096\n", "cols=4096 format=mxfp8\n"), bad,
       "bundle line 4: entry 'mx': unknown key 'format' (abi quantize.v1 "
       "takes op, abi, max_rows, element, scale, input, block_rows, "
       "block_cols, rank, batch, rows and cols)"},
      {"quantize with GEMM keys", quantizeReplaced(" rows=-1", " n=-1"), bad,
       "entry 'mx': unknown key 'n'"},
      {"quantize duplicate key",
       quantizeReplaced("scale=e8m0", "scale=e8m0 scale=f32"), bad,
       "entry 'mx': duplicate key 'scale'"},
      {"quantize of another op",
       quantizeReplaced("op=moe.quantize abi=quantize.v1 max_rows=4096",
                        "op=moe.dequantize abi=quantize.v1 max_rows=4096"),
       bad,
       "bundle line 6: entry 'act': op=moe.dequantize with abi quantize.v1 "
       "(its entries are op=moe.quantize or moe.expert_mlp)"},
      {"quantize max_rows 0",
       quantizeReplaced("max_rows=4096 element", "max_rows=0 element"), bad,
       "entry 'act': max_rows=0 is out of range ([1, 2147483647])"},
      {"quantize element e4m3",
       quantizeReplaced("element=f8E5M2", "element=e4m3"), bad,
       "bundle line 6: entry 'act': element='e4m3' is neither f8E4M3FN nor "
       "f8E5M2"},
      {"quantize element e4m3fnuz",
       quantizeReplaced("element=f8E4M3FN", "element=f8E4M3FNUZ"), bad,
       "entry 'mx': element='f8E4M3FNUZ' is neither f8E4M3FN nor f8E5M2"},
      {"quantize scale f8E8M0FNU",
       quantizeReplaced("scale=e8m0", "scale=f8E8M0FNU"), bad,
       "bundle line 4: entry 'mx': scale='f8E8M0FNU' is neither f32 nor e8m0"},
      {"quantize scale bf16", quantizeReplaced("scale=f32", "scale=bf16"), bad,
       "entry 'act': scale='bf16' is neither f32 nor e8m0"},
      {"quantize input f16", quantizeReplaced("input=bf16", "input=f16"), bad,
       "bundle line 4: entry 'mx': input='f16' is neither bf16 nor f32"},
      {"quantize input f8",
       quantizeReplaced("input=f32 block_rows=1",
                        "input=f8E4M3FN block_rows=1"),
       bad, "entry 'act': input='f8E4M3FN' is neither bf16 nor f32"},
      {"quantize block_rows 0",
       quantizeReplaced("block_rows=1 block_cols=32", "block_rows=0 "
                                                      "block_cols=32"),
       bad, "entry 'mx': block_rows=0 is out of range ([1, 128])"},
      {"quantize block_rows 256",
       quantizeReplaced("block_rows=128 block_cols=128 rank=3 batch=8",
                        "block_rows=256 block_cols=128 rank=3 batch=8"),
       bad, "entry 'weights': block_rows=256 is out of range ([1, 128])"},
      {"quantize block_cols 512",
       quantizeReplaced("block_cols=128 rank=2", "block_cols=512 rank=2"), bad,
       "entry 'act': block_cols=512 is out of range ([1, 256])"},
      {"quantize block [1, 48]",
       quantizeReplaced("block_cols=128 rank=2", "block_cols=48 rank=2"), bad,
       "bundle line 6: entry 'act': block [1, 48] has no kernel (abi "
       "quantize.v1 implements [1, B] with B a power of two from 8 to 256, "
       "and [128, 128])"},
      {"quantize block [1, 4]",
       quantizeReplaced("block_cols=128 rank=2", "block_cols=4 rank=2"), bad,
       "entry 'act': block [1, 4] has no kernel"},
      {"quantize block [128, 64]",
       quantizeReplaced("block_rows=128 block_cols=128 rank=3 batch=8",
                        "block_rows=128 block_cols=64 rank=3 batch=8"),
       bad, "entry 'weights': block [128, 64] has no kernel"},
      {"quantize block [64, 64]",
       quantizeReplaced("block_rows=128 block_cols=128 rank=3 batch=8",
                        "block_rows=64 block_cols=64 rank=3 batch=8"),
       bad, "entry 'weights': block [64, 64] has no kernel"},
      {"quantize e8m0 [1, 64]",
       quantizeReplaced("block_cols=32", "block_cols=64"), bad,
       "bundle line 4: entry 'mx': scale=e8m0 needs block [1, 32] (OCP MX), "
       "got [1, 64]"},
      {"quantize e8m0 [128, 128]",
       quantizeReplaced("scale=f32 input=bf16 block_rows=128",
                        "scale=e8m0 input=bf16 block_rows=128"),
       bad,
       "entry 'weights': scale=e8m0 needs block [1, 32] (OCP MX), got "
       "[128, 128]"},
      {"quantize rank 1",
       quantizeReplaced("rank=2 batch=1 rows=-1 cols=4096",
                        "rank=1 batch=1 rows=-1 cols=4096"),
       bad, "entry 'mx': rank=1 is out of range ([2, 3])"},
      {"quantize rank 4", quantizeReplaced("rank=3 batch=8", "rank=4 batch=8"),
       bad, "entry 'weights': rank=4 is out of range ([2, 3])"},
      {"quantize rank 2 with a batch",
       quantizeReplaced("rank=2 batch=1 rows=-1 cols=4096",
                        "rank=2 batch=4 rows=-1 cols=4096"),
       bad,
       "bundle line 4: entry 'mx': batch=4, but a rank-2 input [R, C] "
       "has batch=1"},
      {"quantize rank 2 dynamic batch",
       quantizeReplaced("rank=2 batch=1 rows=-1 cols=4096",
                        "rank=2 batch=-1 rows=-1 cols=4096"),
       bad, "entry 'mx': batch=-1, but a rank-2 input [R, C] has batch=1"},
      {"quantize batch 0", quantizeReplaced("batch=8", "batch=0"), bad,
       "entry 'weights': batch=0 is out of range (-1 or [1, 2147483647])"},
      {"quantize rows 0", quantizeReplaced(" rows=256", " rows=0"), bad,
       "entry 'weights': rows=0 is out of range (-1 or [1, 2147483647])"},
      {"quantize rows -2",
       quantizeReplaced("rows=-1 cols=4096", "rows=-2 cols=4096"), bad,
       "entry 'mx': rows=-2 is out of range"},
      {"quantize rows not whole blocks",
       quantizeReplaced(" rows=256", " rows=320"), bad,
       "bundle line 8: entry 'weights': rows=320 is not a multiple of "
       "block_rows=128"},
      {"quantize cols not whole blocks",
       quantizeReplaced("cols=4096", "cols=4100"), bad,
       "bundle line 4: entry 'mx': cols=4100 is not a multiple of "
       "block_cols=32"},
      {"quantize cols 0", quantizeReplaced("cols=512", "cols=0"), bad,
       "entry 'weights': cols=0 is out of range"},
      {"quantize cols not canonical", quantizeReplaced("cols=512", "cols=0512"),
       bad, "entry 'weights': cols='0512' is not a decimal integer"},
      // Kernels: image, threads and smem only; threads whole warps; one.
      {"quantize kernel with a tile",
       quantizeReplaced(mxKernel, "kernel mx " + std::string(kQuantMx) +
                                      " image=moe_kernels threads=256 smem=0 "
                                      "tile_m=64\n"),
       bad,
       "bundle line 5: kernel 'moe_quantize_bf16_e4m3_e8m0_1x32': unknown key "
       "'tile_m' (the kernels of an abi quantize.v1 entry take image, "
       "threads, smem and the optional cluster)"},
      {"quantize kernel without smem",
       quantizeReplaced(mxKernel, "kernel mx " + std::string(kQuantMx) +
                                      " image=moe_kernels threads=256\n"),
       bad, "kernel 'moe_quantize_bf16_e4m3_e8m0_1x32': missing key 'smem'"},
      {"quantize kernel of 48 threads",
       quantizeReplaced(mxKernel,
                        simpleKernelLine("mx", kQuantMx, "moe_kernels", 48, 0)),
       bad,
       "bundle line 5: kernel 'moe_quantize_bf16_e4m3_e8m0_1x32': threads=48 "
       "is not a multiple of 32 (a quantize.v1 kernel reduces a block within "
       "a warp)"},
      {"quantize kernel of 2048 threads",
       quantizeReplaced(
           mxKernel, simpleKernelLine("mx", kQuantMx, "moe_kernels", 2048, 0)),
       bad, "threads=2048 is out of range ([1, 1024])"},
      {"quantize two kernels",
       quantizeReplaced(mxKernel,
                        mxKernel + simpleKernelLine("mx", "moe_quantize_2",
                                                    "moe_kernels", 256, 0)),
       bad,
       "bundle line 6: kernel 'moe_quantize_2': entry 'mx' (abi quantize.v1) "
       "takes exactly one kernel, and has "
       "'moe_quantize_bf16_e4m3_e8m0_1x32' already (line 5)"},
      {"quantize without kernels", quantizeReplaced(mxKernel, ""), bad,
       "bundle line 4: entry 'mx' has no kernels"},
      {"quantize entry as v1 of another abi",
       quantizeReplaced("abi=quantize.v1 " + mxKeys,
                        "abi=quantize.v2 " + mxKeys),
       MOE_STATUS_UNSUPPORTED,
       "bundle line 4: entry 'mx': abi 'quantize.v2' is not supported (this "
       "runtime implements bundle version 7 with abis grouped_matmul.v3, "
       "grouped_matmul_fp8.v1, route.v1, unpermute.v2, permute.v2, layer.v1, "
       "quantize.v1, layer_fp8.v1, grouped_wgrad.v1, planned.v1 and "
       "program.v1)"},
  };
}

std::vector<Malformed> malformedBundles() {
  const moeStatus bad = MOE_STATUS_INVALID_BUNDLE;
  const moeStatus unsupported = MOE_STATUS_UNSUPPORTED;
  std::string valid = validBundle();
  std::string swapKernel = kernelLine(
      "gate_up", kSwapAB32, "moe_kernels_swapab", 1, 16, 16, 64, 81920, 1);
  std::string downKernel = kernelLine("down", kNormal64, "moe_kernels", 1,
                                      2147483647, 64, 256, 163840, 0);
  std::string manyImages = "MOEBUNDLE 6\nchip sm_90a\n";
  for (int i = 0; i < 65; ++i)
    manyImages += imageRecord("img" + std::to_string(i), fakeCubin('D'));
  std::string manyEntries;
  for (int i = 0; i < 257; ++i)
    manyEntries += entryLine("e" + std::to_string(i)) +
                   kernelsCovering("e" + std::to_string(i), 1);
  std::string notElf = fakeCubin('E');
  notElf[1] = 'X';
  std::vector<Malformed> cases = {
      {"empty", "", bad, "bundle line 1: the bundle is empty"},
      {"not a bundle",
       "\x7f"
       "ELF\x02\x01\x01\n",
       bad, "bundle line 1: not a moe bundle"},
      {"wrong magic", replaced("MOEBUNDLE 6", "MOEBUNDLX 5"), bad,
       "not a moe bundle (it must start with 'MOEBUNDLE 7')"},
      {"version 1", replaced("MOEBUNDLE 6", "MOEBUNDLE 1"), unsupported,
       "bundle line 1: bundle version 1 predates persistent kernels (this "
       "runtime reads version 7): recompile it with moe-translate "
       "--moe-to-bundle"},
      {"version 2", replaced("MOEBUNDLE 6", "MOEBUNDLE 2"), unsupported,
       "bundle line 1: bundle version 2 predates kernel epilogues (this "
       "runtime reads version 7): recompile it with moe-translate "
       "--moe-to-bundle"},
      {"version 3", replaced("MOEBUNDLE 6", "MOEBUNDLE 3"), unsupported,
       "bundle line 1: bundle version 3 predates the route and unpermute "
       "kernels (this runtime reads version 7): recompile it with "
       "moe-translate --moe-to-bundle"},
      {"version 3 with route entries",
       replaced("MOEBUNDLE 6", "MOEBUNDLE 3", routeBundle()), unsupported,
       "bundle version 3 predates"},
      {"version 2 bundle as v2 wrote it", asVersion2(valid), unsupported,
       "bundle line 1: bundle version 2 predates kernel epilogues"},
      {"version 4", replaced("MOEBUNDLE 6", "MOEBUNDLE 4"), unsupported,
       "bundle line 1: bundle version 4 predates expert biases and layer "
       "entries (this runtime reads version 7): recompile it with "
       "moe-translate --moe-to-bundle"},
      {"version 4 bundle as v4 wrote it", asVersion4(valid), unsupported,
       "bundle line 1: bundle version 4 predates expert biases"},
      {"version 4 permute bundle",
       replaced("MOEBUNDLE 6", "MOEBUNDLE 4", permuteBundle()), unsupported,
       "bundle version 4 predates"},
      {"version 5", replaced("MOEBUNDLE 6", "MOEBUNDLE 5"), unsupported,
       "bundle line 1: bundle version 5 predates block-FP8 grouped matmuls "
       "(this runtime reads version 7): recompile it with moe-translate "
       "--moe-to-bundle"},
      {"version 5 layer bundle",
       replaced("MOEBUNDLE 6", "MOEBUNDLE 5", layerBundle()), unsupported,
       "bundle version 5 predates"},
      {"newer version", replaced("MOEBUNDLE 6", "MOEBUNDLE 8"), unsupported,
       "bundle line 1: bundle version 8 is not supported (this runtime reads "
       "version 7)"},
      {"version 0", replaced("MOEBUNDLE 6", "MOEBUNDLE 0"), unsupported,
       "bundle version 0 is not supported"},
      {"version leading zero", replaced("MOEBUNDLE 6", "MOEBUNDLE 05"), bad,
       "expected 'MOEBUNDLE <version>', got 'MOEBUNDLE 05'"},
      {"version negative", replaced("MOEBUNDLE 6", "MOEBUNDLE -2"), bad,
       "expected 'MOEBUNDLE <version>'"},
      {"version overflow",
       replaced("MOEBUNDLE 6", "MOEBUNDLE 99999999999999999999"), bad,
       "expected 'MOEBUNDLE <version>'"},
      {"header extra field", replaced("MOEBUNDLE 6", "MOEBUNDLE 6 x"), bad,
       "expected 'MOEBUNDLE <version>'"},
      {"missing end", withEnd(""), bad,
       "bundle line 13: unexpected end of the data (the bundle must finish "
       "with an 'end' line)"},
      {"trailing garbage", valid + "x", bad,
       "bundle line 13: 1 bytes of trailing data after 'end'"},
      {"trailing line", valid + "end\n", bad,
       "4 bytes of trailing data after 'end'"},
      {"text after end", withEnd("end now\n"), bad,
       "bundle line 13: unexpected text after 'end'"},
      {"end without newline", withEnd("end"), bad,
       "bundle line 13: the line does not end with '\\n'"},
      {"NUL in a text line",
       replaced("chip sm_90a", std::string("chip sm_9\0a", 11)), bad,
       "bundle line 2: NUL byte at column 10 of a text line"},
      {"CRLF line end", replaced("chip sm_90a\n", "chip sm_90a\r\n"), bad,
       "bundle line 2: control character 0x0d"},
      {"tab separator", replaced("entry gate_up ", "entry\tgate_up "), bad,
       "control character 0x09"},
      {"two spaces", replaced("entry gate_up op", "entry gate_up  op"), bad,
       "bundle line 5: empty field at column 15"},
      {"trailing space", replaced("activation=none\n", "activation=none \n"),
       bad, "bundle line 5: empty field"},
      {"empty line", replaced("chip sm_90a\n", "chip sm_90a\n\n"), bad,
       "bundle line 3: empty line"},
      {"unknown record", withEnd("note hello\nend\n"), bad,
       "bundle line 13: unknown record 'note'"},
      {"unknown entry key", replaced("offsets=i32", "offsets=i32 foo=1"), bad,
       "bundle line 5: entry 'gate_up': unknown key 'foo' (abi "
       "grouped_matmul.v3 takes op, abi, experts, n, k, max_rows, offsets, "
       "epilogue, bias, activation, the optional weights and the optional "
       "round_trip)"},
      {"unknown kernel key", replaced("swap_ab=1", "swap_ab=1 split_k=2"), bad,
       "bundle line 7: kernel 'grouped_matmul_bf16_16x64x64_s4_swapab_off32': "
       "unknown key 'split_k'"},
      {"empty key", replaced("offsets=i32", "offsets=i32 =5"), bad,
       "unknown key ''"},
      {"duplicate key", replaced("n=28672 ", "n=28672 n=28672 "), bad,
       "bundle line 5: entry 'gate_up': duplicate key 'n'"},
      {"missing entry key", replaced(" max_rows=4096", ""), bad,
       "bundle line 8: entry 'down': missing key 'max_rows'"},
      {"missing kernel key", replaced(" stages=4 swap_ab=1", " swap_ab=1"), bad,
       "bundle line 7: kernel 'grouped_matmul_bf16_16x64x64_s4_swapab_off32': "
       "missing key 'stages'"},
      {"no equals sign", replaced("experts=8 n=28672", "experts=8 n 28672"),
       bad, "entry 'gate_up': expected key=value, got 'n'"},
      {"abi v1",
       replaced("abi=grouped_matmul.v3 epilogue=store experts=8 n=28672",
                "abi=grouped_matmul.v1 epilogue=store experts=8 n=28672"),
       unsupported,
       "bundle line 5: entry 'gate_up': abi 'grouped_matmul.v1' is not "
       "supported (this runtime implements bundle version 7 with abis "
       "grouped_matmul.v3, grouped_matmul_fp8.v1, route.v1, unpermute.v2, "
       "permute.v2, layer.v1, quantize.v1, layer_fp8.v1, grouped_wgrad.v1, "
       "planned.v1 and program.v1): "
       "its kernels "
       "are not "
       "persistent, recompile it"},
      {"abi v2",
       replaced("abi=grouped_matmul.v3 epilogue=store experts=8 n=28672",
                "abi=grouped_matmul.v2 epilogue=store experts=8 n=28672"),
       unsupported,
       "bundle line 5: entry 'gate_up': abi 'grouped_matmul.v2' is not "
       "supported (this runtime implements bundle version 7 with abis "
       "grouped_matmul.v3, grouped_matmul_fp8.v1, route.v1, unpermute.v2, "
       "permute.v2, layer.v1, quantize.v1, layer_fp8.v1, grouped_wgrad.v1, "
       "planned.v1 and program.v1): "
       "it predates "
       "kernel "
       "epilogues, recompile it"},
      {"newer abi",
       replaced("abi=grouped_matmul.v3 epilogue=store experts=8 n=28672",
                "abi=grouped_matmul.v4 epilogue=store experts=8 n=28672"),
       unsupported,
       "bundle line 5: entry 'gate_up': abi 'grouped_matmul.v4' is not "
       "supported (this runtime implements bundle version 7 with abis "
       "grouped_matmul.v3, grouped_matmul_fp8.v1, route.v1, unpermute.v2, "
       "permute.v2, layer.v1, quantize.v1, layer_fp8.v1, grouped_wgrad.v1, "
       "planned.v1 and program.v1)"},
      {"newer abi with new keys",
       replaced("abi=grouped_matmul.v3 epilogue=store experts=8 n=28672",
                "split_k=2 abi=grouped_matmul.v4 experts=8 n=28672"),
       unsupported, "abi 'grouped_matmul.v4' is not supported"},
      {"missing abi",
       replaced(" abi=grouped_matmul.v3 epilogue=store experts=8 "
                "n=28672",
                " epilogue=store experts=8 n=28672"),
       bad, "bundle line 5: entry 'gate_up': missing key 'abi'"},
      {"duplicate abi",
       replaced("abi=route.v1 max_rows=4096",
                "abi=route.v1 abi=unpermute.v2 max_rows=4096", routeBundle()),
       bad, "bundle line 6: entry 'softmax': duplicate key 'abi'"},
      {"newer route abi",
       replaced("abi=route.v1 max_rows=4096", "abi=route.v2 max_rows=4096",
                routeBundle()),
       unsupported,
       "bundle line 6: entry 'softmax': abi 'route.v2' is not supported (this "
       "runtime implements bundle version 7 with abis grouped_matmul.v3, "
       "grouped_matmul_fp8.v1, "
       "route.v1, unpermute.v2, permute.v2, layer.v1, quantize.v1, "
       "layer_fp8.v1, grouped_wgrad.v1, planned.v1 and program.v1)"},
      {"unpermute.v1 refused",
       replaced("abi=unpermute.v2 max_rows=1024",
                "abi=unpermute.v1 max_rows=1024", routeBundle()),
       unsupported,
       "bundle line 10: entry 'gather': abi 'unpermute.v1' is not supported "
       "(this runtime implements bundle version 7 with abis "
       "grouped_matmul.v3, grouped_matmul_fp8.v1, route.v1, unpermute.v2, "
       "permute.v2, layer.v1, quantize.v1, layer_fp8.v1, grouped_wgrad.v1, "
       "planned.v1 and program.v1): "
       "it predates column blocks, recompile it"},
      {"newer unpermute abi",
       replaced("abi=unpermute.v2 max_rows=1024",
                "abi=unpermute.v3 max_rows=1024", routeBundle()),
       unsupported,
       "bundle line 10: entry 'gather': abi 'unpermute.v3' is not supported "
       "(this runtime implements bundle version 7 with abis "
       "grouped_matmul.v3, grouped_matmul_fp8.v1, route.v1, unpermute.v2, "
       "permute.v2, layer.v1, quantize.v1, layer_fp8.v1, grouped_wgrad.v1, "
       "planned.v1 and program.v1)"},
      {"layer of v1 parts",
       replaced("abi=unpermute.v2 max_rows=4096",
                "abi=unpermute.v1 max_rows=4096", layerBundle()),
       unsupported,
       "bundle line 14: entry 'mix_unpermute': abi 'unpermute.v1' is not "
       "supported"},
      {"missing epilogue",
       replaced(" epilogue=store experts=8 n=28672", " experts=8 n=28672"), bad,
       "bundle line 5: entry 'gate_up': missing key 'epilogue'"},
      {"unknown epilogue",
       replaced("epilogue=store experts=8 n=28672",
                "epilogue=gelu experts=8 n=28672"),
       bad,
       "bundle line 5: entry 'gate_up': epilogue='gelu' is not store, swiglu "
       "or row_scale"},
      {"empty epilogue",
       replaced("epilogue=store experts=8 n=4096",
                "epilogue= experts=8 n=4096"),
       bad, "bundle line 8: entry 'down': epilogue='' is not store"},
      {"epilogue in capitals",
       replaced("epilogue=store experts=8 n=28672",
                "epilogue=STORE experts=8 n=28672"),
       bad, "epilogue='STORE' is not store, swiglu or row_scale"},
      {"duplicate epilogue",
       replaced("epilogue=store experts=8 n=28672",
                "epilogue=store epilogue=swiglu experts=8 n=28672"),
       bad, "bundle line 5: entry 'gate_up': duplicate key 'epilogue'"},
      // weights=kn belongs to op=moe.grouped_dgrad, and to a
      // moe.grouped_matmul with kn_weights.
      {"weights=kn on an expert_mlp",
       replaced("activation=silu", "activation=silu weights=kn", mlpBundle()),
       bad,
       "bundle line 4: entry 'mlp_gate_up': op=moe.expert_mlp with "
       "weights=kn (the weights of op=moe.grouped_dgrad are [E, K, N], those "
       "of op=moe.grouped_matmul [E, K, N] or [E, N, K], every other op's "
       "[E, N, K])"},
      // round_trip: a swiglu epilogue's MXFP8 round trip of its activation.
      {"round_trip on a row_scale epilogue",
       replaced("activation=none", "activation=none round_trip=mxfp8_e4m3",
                mlpBundle()),
       bad,
       "bundle line 7: entry 'mlp_down': round_trip='mxfp8_e4m3' with "
       "epilogue=row_scale (only a swiglu epilogue stores an activation's "
       "round trip)"},
      {"round_trip of another format",
       replaced("activation=silu", "activation=silu round_trip=mxfp4",
                mlpBundle()),
       bad,
       "bundle line 4: entry 'mlp_gate_up': round_trip='mxfp4' is not "
       "mxfp8_e4m3 or mxfp8_e5m2"},
      {"a grouped_dgrad without weights=kn",
       replaced("entry gate_up op=moe.grouped_matmul",
                "entry gate_up op=moe.grouped_dgrad"),
       bad,
       "bundle line 5: entry 'gate_up': op=moe.grouped_dgrad without "
       "weights=kn"},
      {"weights=nk",
       replaced("bias=none activation=none\n",
                "bias=none activation=none weights=nk\n"),
       bad,
       "bundle line 5: entry 'gate_up': weights='nk' is not kn (the only "
       "value of weights; without it the weights are [E, N, K])"},
      {"weights=kn with a swiglu epilogue",
       replaced("activation=silu", "activation=silu weights=kn",
                replaced("op=moe.expert_mlp abi=grouped_matmul.v3",
                         "op=moe.grouped_dgrad abi=grouped_matmul.v3",
                         mlpBundle())),
       bad, "weights=kn with epilogue=swiglu and a 0-bit bias"},
      {"swiglu with odd n", replaced("n=28672", "n=28671", mlpBundle()), bad,
       "bundle line 4: entry 'mlp_gate_up': n=28671 is odd, but "
       "epilogue=swiglu needs N/2 gate rows and N/2 up rows"},
      {"swiglu with n 1", replaced("n=28672", "n=1", mlpBundle()), bad,
       "n=1 is odd"},
      {"swiglu with odd tile_n",
       replaced("tile_n=128", "tile_n=127", mlpBundle()), bad,
       "bundle line 10: kernel "
       "'grouped_matmul_bf16_64x128x64_s2_swiglu_off64': "
       "tile_n=127 is odd, but entry 'dyn_gate_up' has epilogue=swiglu "
       "(tile_n/2 gate and tile_n/2 up columns)"},
      {"duplicate entry", replaced("entry down ", "entry gate_up "), bad,
       "bundle line 8: entry 'gate_up' is already defined on line 5"},
      {"duplicate image",
       replaced("image moe_kernels_swapab ", "image moe_kernels "), bad,
       "bundle line 4: image 'moe_kernels' is already defined on line 3"},
      {"second chip", replaced("chip sm_90a\n", "chip sm_90a\nchip sm_90a\n"),
       bad, "bundle line 3: second 'chip' line"},
      {"entry before chip", replaced("chip sm_90a\n", ""), bad,
       "bundle line 4: entry 'gate_up' comes before the 'chip' line"},
      {"chip after entry",
       replaced("chip sm_90a\n", "", withEnd("chip sm_90a\nend\n")), bad,
       "comes before the 'chip' line"},
      {"no chip", "MOEBUNDLE 6\nend\n", bad,
       "bundle line 2: the bundle has no 'chip' line"},
      {"unknown chip", replaced("chip sm_90a", "chip gfx942"), unsupported,
       "bundle line 2: chip 'gfx942' is not supported"},
      {"chip family suffix", replaced("chip sm_90a", "chip sm_100f"),
       unsupported, "chip 'sm_100f' is not supported"},
      {"chip bad character", replaced("chip sm_90a", "chip sm-90a"), bad,
       "chip name 'sm-90a' has a character outside [A-Za-z0-9_.$]"},
      {"chip without name", replaced("chip sm_90a", "chip"), bad,
       "bundle line 2: expected 'chip <name>'"},
      {"kernel of unknown entry", replaced("kernel down ", "kernel dawn "), bad,
       "bundle line 9: kernel 'grouped_matmul_bf16_64x256x64_s4_off64' "
       "refers to unknown entry 'dawn'"},
      {"kernel away from its entry",
       replaced("kernel any grouped_matmul_bf16_64x128x64",
                "kernel gate_up grouped_matmul_bf16_64x128x64"),
       bad,
       "bundle line 12: kernel 'grouped_matmul_bf16_64x128x64_s2_off64' of "
       "entry 'gate_up' must follow that entry's line directly (it follows "
       "entry 'any')"},
      {"kernel before any entry",
       "MOEBUNDLE 6\nchip sm_90a\n" + kernelsCovering("x", 1) + "end\n", bad,
       "refers to unknown entry 'x'"},
      {"kernel of unknown image",
       replaced("image=moe_kernels_swapab", "image=moe_kernels_nope"), bad,
       "bundle line 7: kernel 'grouped_matmul_bf16_16x64x64_s4_swapab_off32' "
       "refers to unknown image 'moe_kernels_nope'"},
      {"entry without kernels", replaced(downKernel, ""), bad,
       "bundle line 8: entry 'down' has no kernels"},
      {"last entry without kernels", withEnd(entryLine("x") + "end\n"), bad,
       "bundle line 13: entry 'x' has no kernels"},
      {"overlapping rows", replaced("rows_min=17", "rows_min=16"), bad,
       "bundle line 6: entry 'gate_up': rows [16, 2147483647] of kernel "
       "'grouped_matmul_bf16_64x256x64_s4_off32' overlap rows [1, 16] of "
       "kernel 'grouped_matmul_bf16_16x64x64_s4_swapab_off32'"},
      {"identical rows",
       bundleWith(entryLine("e") + kernelsCovering("e", 1) +
                  kernelLine("e", "again", "img", 1, 2147483647, 64, 64, 0, 0)),
       bad, "overlap"},
      {"rows gap", replaced("rows_min=17", "rows_min=20"), bad,
       "bundle line 5: entry 'gate_up': no kernel covers rows [17, 19]"},
      {"rows not from 1",
       replaced("rows_min=1 rows_max=16", "rows_min=2 "
                                          "rows_max=16"),
       bad, "entry 'gate_up': no kernel covers rows [1, 1]"},
      {"rows not to 2^31-1",
       replaced("rows_min=1 rows_max=2147483647",
                "rows_min=1 rows_max=1000000"),
       bad,
       "bundle line 8: entry 'down': no kernel covers rows [1000001, "
       "2147483647]"},
      {"rows_min above rows_max",
       replaced("rows_min=1 rows_max=16", "rows_min=16 rows_max=15"), bad,
       "bundle line 7: kernel 'grouped_matmul_bf16_16x64x64_s4_swapab_off32': "
       "rows_min=16 is greater than rows_max=15"},
      {"rows_max above 2^31-1",
       replaced("rows_min=1 rows_max=2147483647",
                "rows_min=1 rows_max=2147483648"),
       bad, "rows_max=2147483648 is out of range ([1, 2147483647])"},
      {"rows_min 0",
       replaced("rows_min=1 rows_max=16", "rows_min=0 "
                                          "rows_max=16"),
       bad, "rows_min=0 is out of range ([1, 2147483647])"},
      {"number overflow", replaced("n=28672", "n=99999999999999999999"), bad,
       "entry 'gate_up': n='99999999999999999999' is not a decimal integer"},
      {"number at int64 max", replaced("n=28672", "n=9223372036854775807"), bad,
       "n=9223372036854775807 is out of range"},
      {"number leading zero", replaced("n=28672", "n=028672"), bad,
       "n='028672' is not a decimal integer in canonical form"},
      {"number with plus", replaced("n=28672", "n=+28672"), bad,
       "n='+28672' is not a decimal integer"},
      {"number empty", replaced("n=28672", "n="), bad,
       "n='' is not a decimal integer"},
      {"negative size", replaced("n=28672", "n=-2"), bad,
       "entry 'gate_up': n=-2 is out of range (-1 or [1, 2147483647])"},
      {"minus zero", replaced("k=4096", "k=-0"), bad,
       "k='-0' is not a decimal integer"},
      {"max_rows -1", replaced("max_rows=4096", "max_rows=-1"), bad,
       "max_rows=-1 is out of range ([1, 2147483647])"},
      {"offsets type", replaced("offsets=i32", "offsets=i16"), bad,
       "entry 'gate_up': offsets='i16' is neither i32 nor i64"},
      {"op bad character",
       replaced("op=moe.grouped_matmul", "op=moe/grouped_matmul"), bad,
       "op name 'moe/grouped_matmul' has a character outside"},
      {"truncated image",
       valid.substr(0, valid.find("image moe_kernels 32\n") + 21 + 10), bad,
       "bundle line 3: image 'moe_kernels': its 32 bytes and '\\n' do not fit "
       "in the 10 bytes that follow (truncated bundle?)"},
      {"image too large",
       replaced("image moe_kernels 32", "image moe_kernels 268435457"), bad,
       "image 'moe_kernels' has 268435457 bytes, more than the limit of "
       "268435456"},
      {"image size overflow",
       replaced("image moe_kernels 32",
                "image moe_kernels 18446744073709551615"),
       bad,
       "image 'moe_kernels': size '18446744073709551615' is not a "
       "decimal integer"},
      {"image size not a number",
       replaced("image moe_kernels 32", "image moe_kernels 32x"), bad,
       "size '32x' is not a decimal integer"},
      {"empty image",
       replaced(imageRecord("moe_kernels", fakeCubin('A')),
                "image moe_kernels 0\n\n"),
       bad, "bundle line 3: image 'moe_kernels' is empty"},
      {"image size one short",
       replaced("image moe_kernels 32", "image moe_kernels 31"), bad,
       "bundle line 3: image 'moe_kernels': expected '\\n' right after its "
       "31 bytes"},
      {"image not ELF",
       replaced(imageRecord("moe_kernels_swapab", fakeCubin('B')),
                imageRecord("moe_kernels_swapab", notElf)),
       bad, "bundle line 4: image 'moe_kernels_swapab' is not an ELF cubin"},
      {"image without size", replaced("image moe_kernels 32", "image x"), bad,
       "bundle line 3: expected 'image <name> <size>'"},
      {"name too long",
       replaced("entry down ", "entry " + std::string(256, 'd') + " "), bad,
       "bundle line 8: entry name 'dddddddd"},
      {"name too long says the size",
       replaced("entry down ", "entry " + std::string(256, 'd') + " "), bad,
       "has 256 bytes (at most 255)"},
      {"name bad character", replaced("entry gate_up ", "entry gate-up "), bad,
       "entry name 'gate-up' has a character outside [A-Za-z0-9_.$]"},
      {"name non-ASCII", replaced("entry gate_up ", "entry gat\xc3\xa9 "), bad,
       "entry name 'gat\\xc3\\xa9' has a character outside"},
      {"65 images", manyImages + "end\n", bad,
       "bundle line 67: more than 64 images"},
      {"257 entries", bundleWith(manyEntries), bad, "more than 256 entries"},
      {"17 kernels", bundleWith(entryLine("e") + kernelsCovering("e", 17)), bad,
       "bundle line 21: entry 'e' has more than 16 kernels"},
      {"kernel twice", replaced(swapKernel, swapKernel + swapKernel), bad,
       "bundle line 8: kernel 'grouped_matmul_bf16_16x64x64_s4_swapab_off32' "
       "appears twice in entry 'gate_up' (also on line 7)"},
      {"tile_k not a multiple of 8", replaced("tile_k=64", "tile_k=12"), bad,
       "tile_k=12 is not a multiple of 8"},
      {"tile_k above 64", replaced("tile_k=64", "tile_k=128"), bad,
       "tile_k=128 is out of range ([8, 64])"},
      {"tile_m 0", replaced("tile_m=64", "tile_m=0"), bad,
       "tile_m=0 is out of range ([1, 256])"},
      {"tile_n above 256", replaced("tile_n=256", "tile_n=512"), bad,
       "tile_n=512 is out of range ([1, 256])"},
      {"threads above 1024", replaced("threads=128", "threads=2048"), bad,
       "threads=2048 is out of range ([1, 1024])"},
      {"smem negative", replaced("smem=163840", "smem=-1"), bad,
       "smem=-1 is out of range"},
      {"smem above int32", replaced("smem=163840", "smem=2147483648"), bad,
       "smem=2147483648 is out of range ([0, 2147483647])"},
      {"stages 0", replaced("stages=4", "stages=0"), bad,
       "stages=0 is out of range ([1, 64])"},
      {"swap_ab 2", replaced("swap_ab=0", "swap_ab=2"), bad,
       "swap_ab=2 is out of range ([0, 1])"},
      {"kernel without symbol", replaced(swapKernel, "kernel gate_up\n"), bad,
       "bundle line 7: expected 'kernel <entry> <symbol> key=value...'"},
      {"entry without name", withEnd("entry\nend\n"), bad,
       "bundle line 13: expected 'entry <name> key=value...'"},
  };
  for (Malformed &c : malformedRouteBundles())
    cases.push_back(std::move(c));
  for (Malformed &c : malformedPermuteBundles())
    cases.push_back(std::move(c));
  for (Malformed &c : malformedBiasBundles())
    cases.push_back(std::move(c));
  for (Malformed &c : malformedLayerBundles())
    cases.push_back(std::move(c));
  for (Malformed &c : malformedQuantizeBundles())
    cases.push_back(std::move(c));
  for (Malformed &c : malformedLayerFp8Bundles())
    cases.push_back(std::move(c));
  for (Malformed &c : malformedLayerMxfp8Bundles())
    cases.push_back(std::move(c));
  return cases;
}

/// Entry `index` of `bundle` is the layer `name` of `abi` with these part
/// names (route, permute, quantize, gate_up, intermediate, down, unpermute;
/// "" where it has none), no kernels, and 0 or "" in the other ABIs' fields.
void checkLayerEntry(moeBundle *bundle, int32_t index, const char *name,
                     const char *abi, int64_t maxRows,
                     const std::vector<std::string> &parts) {
  moeEntryInfo entry;
  CHECK_EQ(moeBundleGetEntry(bundle, index, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), name);
  CHECK_EQ(std::string(entry.op), MOE_OP_LAYER);
  CHECK_EQ(std::string(entry.abi), abi);
  CHECK_EQ(entry.max_rows, maxRows);
  CHECK_EQ(entry.num_kernels, 0);
  const char *got[] = {entry.route,    entry.permute,      entry.quantize,
                       entry.gate_up,  entry.intermediate, entry.down,
                       entry.unpermute};
  CHECK_EQ(parts.size(), std::size(got));
  for (size_t p = 0; p < parts.size() && p < std::size(got); ++p)
    CHECK_EQ(std::string(got[p]), parts[p]);
  for (int64_t value :
       {entry.experts, entry.n, entry.k, int64_t(entry.offsets_bits),
        int64_t(entry.top_k), entry.hidden, int64_t(entry.bias_bits),
        int64_t(entry.chunk), entry.cols})
    CHECK_EQ(value, int64_t(0));
  for (const char *text : {entry.epilogue, entry.activation, entry.format,
                           entry.element, entry.out})
    CHECK_EQ(std::string(text), "");
  moeKernelInfo kernel;
  CHECK_STATUS(moeBundleGetKernel(bundle, index, 0, &kernel),
               MOE_STATUS_INVALID_ARGUMENT,
               "kernel index 0 is out of range (entry '" + std::string(name) +
                   "' has 0 kernels)");
}

} // namespace

TEST(bundleMalformedVariants) {
  std::vector<Malformed> cases = malformedBundles();
  CHECK(cases.size() >= 25);
  for (const Malformed &c : cases)
    checkRefused(c.name, c.bytes, c.status, c.message);
}

TEST(bundleValidParses) {
  moeBundle *bundle = OPEN_VALID(validBundle());
  if (!bundle)
    return;
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.version, 6);
  CHECK_EQ(info.version, 6); // a version-6 bundle (plans optional)
  CHECK_EQ(std::string(info.chip), "sm_90a");
  CHECK_EQ(info.num_images, 2);
  CHECK_EQ(info.num_entries, 3);

  moeEntryInfo entry;
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "gate_up");
  CHECK_EQ(std::string(entry.op), "moe.grouped_matmul");
  CHECK_EQ(std::string(entry.abi), "grouped_matmul.v3");
  CHECK_EQ(std::string(entry.epilogue), "store");
  CHECK_EQ(entry.experts, 8);
  CHECK_EQ(entry.n, 28672);
  CHECK_EQ(entry.k, 4096);
  CHECK_EQ(entry.max_rows, 2147483647);
  CHECK_EQ(entry.offsets_bits, 32);
  CHECK_EQ(entry.num_kernels, 2);
  CHECK_EQ(moeBundleGetEntry(bundle, 2, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "any");
  CHECK_EQ(entry.experts, -1);
  CHECK_EQ(entry.n, -1);
  CHECK_EQ(entry.k, -1);
  CHECK_EQ(entry.offsets_bits, 64);

  moeKernelInfo kernel;
  CHECK_EQ(moeBundleGetKernel(bundle, 0, 1, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(kernel.symbol), kSwapAB32);
  CHECK_EQ(std::string(kernel.image), "moe_kernels_swapab");
  CHECK_EQ(kernel.image_size, 32u);
  CHECK_EQ(kernel.rows_min, 1);
  CHECK_EQ(kernel.rows_max, 16);
  CHECK_EQ(kernel.threads, 128);
  CHECK_EQ(kernel.smem, 81920);
  CHECK_EQ(kernel.tile_m, 16);
  CHECK_EQ(kernel.tile_n, 64);
  CHECK_EQ(kernel.tile_k, 64);
  CHECK_EQ(kernel.stages, 4);
  CHECK_EQ(kernel.swap_ab, 1);
  // Kernels keep their file order.
  CHECK_EQ(moeBundleGetKernel(bundle, 2, 0, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(kernel.rows_min, 65);

  int32_t index = -1;
  CHECK_EQ(moeBundleFindEntry(bundle, "down", &index), MOE_STATUS_SUCCESS);
  CHECK_EQ(index, 1);
  CHECK_STATUS(moeBundleFindEntry(bundle, "up", &index), MOE_STATUS_NOT_FOUND,
               "no entry 'up'");
  moeBundleClose(bundle);
}

TEST(bundleExpertMlpParses) {
  moeStatus status = MOE_STATUS_INVALID_ARGUMENT;
  moeBundle *bundle = OPEN_VALID(mlpBundle());
  if (!bundle)
    return;
  const char *names[] = {"mlp_gate_up", "mlp_down", "dyn_gate_up", "dyn_down"};
  const char *epilogues[] = {"swiglu", "row_scale", "swiglu", "row_scale"};
  for (int32_t e = 0; e < 4; ++e) {
    moeEntryInfo entry;
    CHECK_EQ(moeBundleGetEntry(bundle, e, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(entry.name), names[e]);
    CHECK_EQ(std::string(entry.op), "moe.expert_mlp");
    CHECK_EQ(std::string(entry.abi), MOE_ABI_GROUPED_MATMUL);
    CHECK_EQ(std::string(entry.epilogue), epilogues[e]);
  }
  moeEntryInfo entry;
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(entry.n, 28672); // the weights' N, not the output columns
  moeBundleClose(bundle);

  // A gate-up that stores its activation's MXFP8 round trip launches as
  // any other (the kernels make it).
  for (const char *roundTrip : {"mxfp8_e4m3", "mxfp8_e5m2"}) {
    std::string rt = mlpBundle();
    rt.replace(rt.find("activation=silu"), 15,
               std::string("activation=silu round_trip=") + roundTrip);
    bundle = openBundle(rt, &status);
    CHECK_EQ(status, MOE_STATUS_SUCCESS);
    CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(entry.epilogue), "swiglu");
    moeBundleClose(bundle);
  }

  // The reader does not care about the op: any name it accepts is
  // reported. Odd N and tile_n are fine outside swiglu
  // entries.
  std::string other = mlpBundle();
  other.replace(other.find("op=moe.expert_mlp"), 17, "op=vendor.fused_thing");
  other.replace(other.find("n=4096"), 6, "n=4095");
  other.replace(other.rfind("tile_n=128"), 10, "tile_n=127");
  bundle = openBundle(other, &status);
  CHECK_EQ(status, MOE_STATUS_SUCCESS);
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.op), "vendor.fused_thing");
  CHECK_EQ(moeBundleGetEntry(bundle, 1, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(entry.n, 4095);
  moeBundleClose(bundle);
}

TEST(bundleRouteAndUnpermuteParse) {
  moeBundle *bundle = OPEN_VALID(routeBundle());
  if (!bundle)
    return;
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.num_entries, 5);

  // route.v1: experts, top_k, logits, bias; the GEMM fields are 0 and the
  // epilogue "".
  moeEntryInfo entry;
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "router");
  CHECK_EQ(std::string(entry.op), MOE_OP_ROUTE);
  CHECK_EQ(std::string(entry.abi), MOE_ABI_ROUTE);
  CHECK_EQ(entry.max_rows, 2147483647);
  CHECK_EQ(entry.experts, 256);
  CHECK_EQ(entry.top_k, 8);
  CHECK_EQ(entry.logits_bits, 32);
  CHECK_EQ(entry.bias, 1);
  CHECK_EQ(entry.n, 0);
  CHECK_EQ(entry.k, 0);
  CHECK_EQ(entry.offsets_bits, 0);
  CHECK(entry.epilogue != nullptr);
  CHECK_EQ(std::string(entry.epilogue), "");
  CHECK_EQ(entry.slots_bits, 0);
  CHECK_EQ(entry.hidden, 0);
  CHECK_EQ(entry.weighted, 0);
  CHECK_EQ(entry.chunk, 0);
  CHECK_EQ(entry.num_kernels, 1);
  CHECK_EQ(moeBundleGetEntry(bundle, 1, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "softmax");
  CHECK_EQ(entry.max_rows, 4096);
  CHECK_EQ(entry.experts, 8);
  CHECK_EQ(entry.top_k, 2);
  CHECK_EQ(entry.logits_bits, 16);
  CHECK_EQ(entry.bias, 0);

  // unpermute.v2: hidden, top_k, slots, weighted; experts too is 0.
  CHECK_EQ(moeBundleGetEntry(bundle, 2, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "combine");
  CHECK_EQ(std::string(entry.op), MOE_OP_UNPERMUTE);
  CHECK_EQ(std::string(entry.abi), MOE_ABI_UNPERMUTE);
  CHECK_EQ(entry.max_rows, 2147483647);
  CHECK_EQ(entry.hidden, 4096);
  CHECK_EQ(entry.top_k, 2);
  CHECK_EQ(entry.slots_bits, 64);
  CHECK_EQ(entry.weighted, 1);
  CHECK_EQ(entry.experts, 0);
  CHECK_EQ(entry.n, 0);
  CHECK_EQ(entry.k, 0);
  CHECK_EQ(entry.offsets_bits, 0);
  CHECK_EQ(std::string(entry.epilogue), "");
  CHECK_EQ(entry.logits_bits, 0);
  CHECK_EQ(entry.bias, 0);
  CHECK_EQ(entry.chunk, 0);
  CHECK_EQ(entry.num_kernels, 1);
  CHECK_EQ(moeBundleGetEntry(bundle, 3, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "gather");
  CHECK_EQ(entry.max_rows, 1024);
  CHECK_EQ(entry.hidden, -1);
  CHECK_EQ(entry.top_k, 8);
  CHECK_EQ(entry.slots_bits, 32);
  CHECK_EQ(entry.weighted, 0);

  // A grouped matmul's new fields are 0.
  CHECK_EQ(moeBundleGetEntry(bundle, 4, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.abi), MOE_ABI_GROUPED_MATMUL);
  CHECK_EQ(std::string(entry.epilogue), "store");
  CHECK_EQ(entry.experts, 8);
  CHECK_EQ(entry.top_k, 0);
  CHECK_EQ(entry.logits_bits, 0);
  CHECK_EQ(entry.bias, 0);
  CHECK_EQ(entry.slots_bits, 0);
  CHECK_EQ(entry.hidden, 0);
  CHECK_EQ(entry.weighted, 0);

  // Their kernels: symbol, image, threads, smem; the rest 0.
  moeKernelInfo kernel;
  CHECK_EQ(moeBundleGetKernel(bundle, 1, 0, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(kernel.symbol), kRouteSoftmax);
  CHECK_EQ(std::string(kernel.image), "moe_kernels");
  CHECK_EQ(kernel.image_size, 32u);
  CHECK_EQ(kernel.threads, 256);
  CHECK_EQ(kernel.smem, 2048);
  CHECK_EQ(kernel.rows_min, 0);
  CHECK_EQ(kernel.rows_max, 0);
  CHECK_EQ(kernel.tile_m, 0);
  CHECK_EQ(kernel.tile_n, 0);
  CHECK_EQ(kernel.tile_k, 0);
  CHECK_EQ(kernel.stages, 0);
  CHECK_EQ(kernel.swap_ab, 0);
  CHECK_EQ(moeBundleGetKernel(bundle, 3, 0, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(kernel.symbol), kGather);
  CHECK_EQ(kernel.threads, 128);
  CHECK_STATUS(moeBundleGetKernel(bundle, 0, 1, &kernel),
               MOE_STATUS_INVALID_ARGUMENT,
               "kernel index 1 is out of range (entry 'router' has 1 kernels)");
  moeBundleClose(bundle);

  // Keys in any order; the reader does not care about the op; an unpermute
  // kernel's threads need not be a multiple of 32; a route kernel's may be just
  // 32; top_k = experts = 32 and top_k = experts = 1 are fine; hidden = 8.
  std::string other = routeBundle();
  auto swap = [&other](const std::string &from, const std::string &to) {
    size_t at = other.find(from);
    CHECK(at != std::string::npos);
    if (at != std::string::npos)
      other.replace(at, from.size(), to);
  };
  swap("op=moe.route abi=route.v1 max_rows=2147483647 experts=256 top_k=8 "
       "logits=f32 bias=1",
       "bias=1 logits=f32 top_k=32 experts=32 max_rows=2147483647 "
       "abi=route.v1 op=vendor.router");
  swap("experts=8 top_k=2", "experts=1 top_k=1");
  swap("op=moe.unpermute abi=unpermute.v2 max_rows=2147483647 hidden=4096 "
       "top_k=2 slots=i64 weighted=1",
       "weighted=1 slots=i64 top_k=2 hidden=8 max_rows=2147483647 "
       "abi=unpermute.v2 op=moe.unpermute");
  swap("moe_kernels threads=128 smem=0\nentry softmax",
       "moe_kernels threads=32 smem=0\nentry softmax");
  swap("moe_unpermute_k8_i32 image=moe_kernels threads=128",
       "moe_unpermute_k8_i32 image=moe_kernels threads=100");
  bundle = OPEN_VALID(other);
  if (!bundle)
    return;
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.op), "vendor.router");
  CHECK_EQ(entry.top_k, 32);
  CHECK_EQ(entry.experts, 32);
  CHECK_EQ(moeBundleGetEntry(bundle, 2, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(entry.hidden, 8);
  CHECK_EQ(moeBundleGetKernel(bundle, 0, 0, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(kernel.threads, 32);
  CHECK_EQ(moeBundleGetKernel(bundle, 3, 0, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(kernel.threads, 100);
  moeBundleClose(bundle);
}

TEST(bundlePermuteParses) {
  moeBundle *bundle = OPEN_VALID(permuteBundle());
  if (!bundle)
    return;
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.num_entries, 5);

  // permute.v2: experts, top_k, hidden, offsets, chunk; the other fields 0
  // and the epilogue "".
  moeEntryInfo entry;
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "perm");
  CHECK_EQ(std::string(entry.op), MOE_OP_PERMUTE);
  CHECK_EQ(std::string(entry.abi), MOE_ABI_PERMUTE);
  CHECK_EQ(entry.max_rows, 2147483647);
  CHECK_EQ(entry.experts, 128);
  CHECK_EQ(entry.top_k, 8);
  CHECK_EQ(entry.hidden, 2048);
  CHECK_EQ(entry.offsets_bits, 64);
  CHECK_EQ(entry.chunk, 4096);
  CHECK_EQ(entry.num_kernels, 3);
  CHECK_EQ(entry.n, 0);
  CHECK_EQ(entry.k, 0);
  CHECK(entry.epilogue != nullptr);
  CHECK_EQ(std::string(entry.epilogue), "");
  CHECK_EQ(entry.logits_bits, 0);
  CHECK_EQ(entry.bias, 0);
  CHECK_EQ(entry.slots_bits, 0);
  CHECK_EQ(entry.weighted, 0);
  CHECK_EQ(moeBundleGetEntry(bundle, 1, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "perm32");
  CHECK_EQ(entry.max_rows, 4096);
  CHECK_EQ(entry.experts, 4);
  CHECK_EQ(entry.top_k, 2);
  CHECK_EQ(entry.hidden, -1);
  CHECK_EQ(entry.offsets_bits, 32);
  CHECK_EQ(entry.chunk, 32);
  CHECK_EQ(moeBundleGetEntry(bundle, 2, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(entry.experts, 1024);
  CHECK_EQ(entry.top_k, 1);
  CHECK_EQ(entry.hidden, 8);
  CHECK_EQ(entry.chunk, 65536);
  // The other ABIs' chunk is 0.
  CHECK_EQ(moeBundleGetEntry(bundle, 3, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.abi), MOE_ABI_ROUTE);
  CHECK_EQ(entry.chunk, 0);
  CHECK_EQ(moeBundleGetEntry(bundle, 4, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.abi), MOE_ABI_UNPERMUTE);
  CHECK_EQ(entry.chunk, 0);

  // Its kernels, count, index then gather: symbol, image, threads, smem;
  // the rest 0.
  moeKernelInfo kernel;
  CHECK_EQ(moeBundleGetKernel(bundle, 0, 0, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(kernel.symbol), kPermCount64);
  CHECK_EQ(std::string(kernel.image), "moe_kernels");
  CHECK_EQ(kernel.threads, 1024);
  CHECK_EQ(kernel.smem, 0);
  CHECK_EQ(kernel.rows_min, 0);
  CHECK_EQ(kernel.tile_m, 0);
  CHECK_EQ(moeBundleGetKernel(bundle, 0, 1, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(kernel.symbol), kPermIndex64);
  CHECK_EQ(std::string(kernel.image), "moe_kernels");
  CHECK_EQ(kernel.threads, 1024);
  CHECK_EQ(kernel.smem, 17408);
  CHECK_EQ(kernel.rows_min, 0);
  CHECK_EQ(kernel.rows_max, 0);
  CHECK_EQ(kernel.tile_m, 0);
  CHECK_EQ(kernel.stages, 0);
  CHECK_EQ(kernel.swap_ab, 0);
  CHECK_EQ(moeBundleGetKernel(bundle, 0, 2, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(kernel.symbol), kPermGather64);
  CHECK_EQ(kernel.threads, 128);
  CHECK_EQ(kernel.smem, 0);
  CHECK_STATUS(moeBundleGetKernel(bundle, 0, 3, &kernel),
               MOE_STATUS_INVALID_ARGUMENT,
               "kernel index 3 is out of range (entry 'perm' has 3 kernels)");
  moeBundleClose(bundle);

  // Keys in any order; the reader does not care about the op; the limits
  // exactly: experts 1 and 1024, top_k 2^31 - 1, hidden 8, chunk 32 and 65536;
  // threads need not be a multiple of 32.
  std::string other = permuteBundle();
  auto swap = [&other](const std::string &from, const std::string &to) {
    size_t at = other.find(from);
    CHECK(at != std::string::npos);
    if (at != std::string::npos)
      other.replace(at, from.size(), to);
  };
  swap("op=moe.permute abi=permute.v2 max_rows=2147483647 experts=128 "
       "top_k=8 hidden=2048 offsets=i64 chunk=4096",
       "chunk=32 offsets=i64 hidden=8 top_k=2147483647 experts=1 max_rows=1 "
       "abi=permute.v2 op=vendor.permute");
  swap("moe_permute_gather_off64 image=moe_kernels threads=128",
       "moe_permute_gather_off64 image=moe_kernels threads=100");
  bundle = OPEN_VALID(other);
  if (!bundle)
    return;
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.op), "vendor.permute");
  CHECK_EQ(entry.experts, 1);
  CHECK_EQ(entry.top_k, 2147483647);
  CHECK_EQ(entry.hidden, 8);
  CHECK_EQ(entry.max_rows, 1);
  CHECK_EQ(entry.offsets_bits, 64);
  CHECK_EQ(entry.chunk, 32);
  CHECK_EQ(moeBundleGetKernel(bundle, 0, 2, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(kernel.threads, 100);
  moeBundleClose(bundle);

  // A gather storing the rows' MXFP8 round trip is a permute like any other.
  std::string roundTrip = permuteBundle();
  roundTrip.replace(roundTrip.find("chunk=4096\n"), 11,
                    "chunk=4096 round_trip=mxfp8_e4m3\n");
  bundle = OPEN_VALID(roundTrip);
  if (!bundle)
    return;
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "perm");
  moeBundleClose(bundle);
}

TEST(bundleIntrospectionArguments) {
  moeBundle *bundle = openBundle(validBundle());
  CHECK(bundle != nullptr);
  moeBundleInfo info;
  moeEntryInfo entry;
  moeKernelInfo kernel;
  int32_t index;
  CHECK_STATUS(moeBundleGetInfo(nullptr, &info), MOE_STATUS_INVALID_ARGUMENT,
               "bundle is NULL");
  CHECK_STATUS(moeBundleGetInfo(bundle, nullptr), MOE_STATUS_INVALID_ARGUMENT,
               "out is NULL");
  CHECK_STATUS(moeBundleGetEntry(bundle, 3, &entry),
               MOE_STATUS_INVALID_ARGUMENT,
               "index 3 is out of range (the bundle has 3 entries)");
  CHECK_STATUS(moeBundleGetEntry(bundle, -1, &entry),
               MOE_STATUS_INVALID_ARGUMENT, "index -1 is out of range");
  CHECK_STATUS(moeBundleGetEntry(nullptr, 0, &entry),
               MOE_STATUS_INVALID_ARGUMENT, "bundle is NULL");
  CHECK_STATUS(moeBundleGetKernel(bundle, 1, 1, &kernel),
               MOE_STATUS_INVALID_ARGUMENT,
               "kernel index 1 is out of range (entry 'down' has 1 kernels)");
  CHECK_STATUS(moeBundleGetKernel(bundle, 7, 0, &kernel),
               MOE_STATUS_INVALID_ARGUMENT, "entry index 7 is out of range");
  CHECK_STATUS(moeBundleGetKernel(bundle, 0, 0, nullptr),
               MOE_STATUS_INVALID_ARGUMENT, "out is NULL");
  CHECK_STATUS(moeBundleFindEntry(bundle, nullptr, &index),
               MOE_STATUS_INVALID_ARGUMENT, "name is NULL");
  CHECK_STATUS(moeBundleFindEntry(bundle, "down", nullptr),
               MOE_STATUS_INVALID_ARGUMENT, "index is NULL");
  moeBundleClose(bundle);
}

TEST(bundleOpenArguments) {
  moeBundle *bundle = reinterpret_cast<moeBundle *>(1);
  CHECK_STATUS(moeBundleOpenMemory(nullptr, 5, &bundle),
               MOE_STATUS_INVALID_ARGUMENT, "data is NULL but size is 5");
  CHECK(bundle == nullptr);
  CHECK_STATUS(moeBundleOpenMemory(nullptr, 0, &bundle),
               MOE_STATUS_INVALID_BUNDLE, "the bundle is empty");
  CHECK_STATUS(moeBundleOpenMemory("x", 1, nullptr),
               MOE_STATUS_INVALID_ARGUMENT, "out is NULL");
  CHECK_STATUS(moeBundleOpenFile(nullptr, &bundle), MOE_STATUS_INVALID_ARGUMENT,
               "path is NULL");
  CHECK_STATUS(moeBundleOpenFile("/x", nullptr), MOE_STATUS_INVALID_ARGUMENT,
               "out is NULL");
  moeBundleClose(nullptr); // a no-op
}

TEST(bundleAcceptsWhatTheContractAllows) {
  // Keys in any order, chip after the images, an image no kernel uses,
  // names of 255 bytes, the limits exactly.
  std::string reordered =
      replaced("entry down op=moe.grouped_matmul abi=grouped_matmul.v3 "
               "epilogue=store experts=8 "
               "n=4096 k=14336 max_rows=4096 offsets=i64",
               "entry down offsets=i64 max_rows=4096 k=14336 n=4096 experts=8 "
               "abi=grouped_matmul.v3 epilogue=store op=moe.grouped_matmul");
  std::string lateChip = "MOEBUNDLE 6\n" + imageRecord("img", fakeCubin('C')) +
                         imageRecord("unused", fakeCubin('U')) +
                         "chip sm_100a\n" + entryLine("e") +
                         kernelsCovering("e", 1) + "end\n";
  std::string longName(255, 'n');
  std::string longNames =
      bundleWith(entryLine(longName) + kernelsCovering(longName, 1));
  std::string manyImages = "MOEBUNDLE 6\nchip sm_90a\n";
  for (int i = 0; i < 64; ++i)
    manyImages += imageRecord("img" + std::to_string(i), fakeCubin('D'));
  manyImages += "end\n";
  std::string manyEntries;
  for (int i = 0; i < 256; ++i)
    manyEntries += entryLine("e" + std::to_string(i)) +
                   kernelsCovering("e" + std::to_string(i), 1);
  std::string sixteenKernels =
      bundleWith(entryLine("e") + kernelsCovering("e", 16));
  std::string noEntries = "MOEBUNDLE 6\nchip sm_90a\nend\n";
  const char *names[] = {"reordered",   "late chip",  "long names", "64 images",
                         "256 entries", "16 kernels", "no entries"};
  std::string bytes[] = {
      reordered,      lateChip, longNames, manyImages, bundleWith(manyEntries),
      sixteenKernels, noEntries};
  for (size_t i = 0; i < std::size(bytes); ++i) {
    ++checksMade;
    moeStatus status = MOE_STATUS_INVALID_ARGUMENT;
    moeBundle *bundle = openBundle(bytes[i], &status);
    if (status != MOE_STATUS_SUCCESS)
      fail(__FILE__, __LINE__,
           std::string(names[i]) + ": " + moeLastErrorMessage());
    moeBundleClose(bundle);
  }
  moeBundle *bundle = openBundle(lateChip);
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(info.chip), "sm_100a");
  moeBundleClose(bundle);
}

TEST(bundleOpenFile) {
  char path[] = "/tmp/moe-runtime-test-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0)
    return;
  std::string bytes = validBundle();
  CHECK_EQ(write(fd, bytes.data(), bytes.size()), ssize_t(bytes.size()));
  close(fd);
  moeBundle *bundle = nullptr;
  CHECK_EQ(moeBundleOpenFile(path, &bundle), MOE_STATUS_SUCCESS);
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.num_entries, 3);
  moeBundleClose(bundle);

  // Errors name the file.
  std::FILE *file = std::fopen(path, "wb");
  std::fputs("MOEBUNDLE 6\nchip sm_90a\nentry\n", file);
  std::fclose(file);
  CHECK_STATUS(moeBundleOpenFile(path, &bundle), MOE_STATUS_INVALID_BUNDLE,
               std::string(path) + ": bundle line 3: expected 'entry <name>");
  CHECK(bundle == nullptr);
  unlink(path);

  CHECK_STATUS(moeBundleOpenFile(path, &bundle), MOE_STATUS_NOT_FOUND,
               "cannot open '" + std::string(path) + "': No such file");
  CHECK_STATUS(moeBundleOpenFile("/", &bundle), MOE_STATUS_INVALID_ARGUMENT,
               "cannot read '/': Is a directory");
}

TEST(statusNames) {
  CHECK_EQ(std::string(moeStatusName(MOE_STATUS_SUCCESS)), "SUCCESS");
  CHECK_EQ(std::string(moeStatusName(MOE_STATUS_INVALID_ARGUMENT)),
           "INVALID_ARGUMENT");
  CHECK_EQ(std::string(moeStatusName(MOE_STATUS_INVALID_BUNDLE)),
           "INVALID_BUNDLE");
  CHECK_EQ(std::string(moeStatusName(MOE_STATUS_UNSUPPORTED)), "UNSUPPORTED");
  CHECK_EQ(std::string(moeStatusName(MOE_STATUS_NO_GPU)), "NO_GPU");
  CHECK_EQ(std::string(moeStatusName(MOE_STATUS_CUDA_ERROR)), "CUDA_ERROR");
  CHECK_EQ(std::string(moeStatusName(MOE_STATUS_OUT_OF_MEMORY)),
           "OUT_OF_MEMORY");
  CHECK_EQ(std::string(moeStatusName(MOE_STATUS_NOT_FOUND)), "NOT_FOUND");
  CHECK_EQ(std::string(moeStatusName(moeStatus(42))), "UNKNOWN");
}

TEST(lastErrorIsPerThreadAndKeptOnSuccess) {
  moeBundle *bundle = nullptr;
  CHECK_EQ(moeBundleOpenMemory("MOEBUNDLE 8\n", 12, &bundle),
           MOE_STATUS_UNSUPPORTED);
  std::string message = moeLastErrorMessage();
  CHECK_CONTAINS(message, "bundle version 8");
  bundle = openBundle(validBundle());
  CHECK(bundle != nullptr);
  CHECK_EQ(std::string(moeLastErrorMessage()), message);
  moeBundleClose(bundle);
}

TEST(bundleBiasAndActivationParse) {
  moeStatus status = MOE_STATUS_INVALID_ARGUMENT;
  moeBundle *bundle = OPEN_VALID(biasBundle());
  if (!bundle)
    return;
  // bias_bits and activation by entry; the layer fields "".
  const int32_t bits[] = {32, 16, 32};
  const char *activations[] = {"none", "gptoss", "none"};
  for (int32_t e = 0; e < 3; ++e) {
    moeEntryInfo entry;
    CHECK_EQ(moeBundleGetEntry(bundle, e, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(entry.bias_bits, bits[e]);
    CHECK_EQ(std::string(entry.activation), activations[e]);
    CHECK_EQ(entry.bias, 0); // a route's
    for (const char *part : {entry.route, entry.permute, entry.gate_up,
                             entry.down, entry.unpermute})
      CHECK(part != nullptr && *part == '\0');
  }
  moeBundleClose(bundle);

  // Without a bias: bias_bits 0; silu; the other ABIs' activation is "".
  bundle = openBundle(mlpBundle());
  moeEntryInfo entry;
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(entry.bias_bits, 0);
  CHECK_EQ(std::string(entry.activation), "silu");
  moeBundleClose(bundle);
  bundle = openBundle(routeBundle());
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(entry.bias, 1);
  CHECK_EQ(entry.bias_bits, 0);
  CHECK(entry.activation != nullptr);
  CHECK_EQ(std::string(entry.activation), "");
  moeBundleClose(bundle);

  // The keys in any order.
  std::string reordered = biasBundle();
  const std::string from = "epilogue=store experts=8 n=256 k=128 "
                           "max_rows=2147483647 offsets=i32 bias=f32 "
                           "activation=none";
  reordered.replace(reordered.find(from), from.size(),
                    "activation=none bias=f32 offsets=i32 epilogue=store "
                    "max_rows=2147483647 k=128 n=256 experts=8");
  bundle = openBundle(reordered, &status);
  CHECK_EQ(status, MOE_STATUS_SUCCESS);
  moeBundleClose(bundle);
}

TEST(bundleDgradParses) {
  // op=moe.grouped_dgrad with weights=kn: n and k are its GEMM's (out [M, N],
  // weights [E, K, N]).
  moeStatus status = MOE_STATUS_INVALID_ARGUMENT;
  moeBundle *bundle =
      openBundle(replaced("bias=none activation=none\n",
                          "bias=none activation=none weights=kn\n",
                          replaced("entry gate_up op=moe.grouped_matmul",
                                   "entry gate_up op=moe.grouped_dgrad")),
                 &status);
  CHECK_EQ(status, MOE_STATUS_SUCCESS);
  if (!bundle)
    return;
  moeEntryInfo entry;
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.op), MOE_OP_GROUPED_DGRAD);
  CHECK_EQ(entry.n, 28672);
  CHECK_EQ(entry.k, 4096);
  moeBundleClose(bundle);
}

TEST(bundleKnMatmulParses) {
  // op=moe.grouped_matmul with weights=kn (kn_weights: GPT-OSS's [E, K, N]
  // experts) stores, with a bias; not with a row scale.
  moeStatus status = MOE_STATUS_INVALID_ARGUMENT;
  moeBundle *bundle =
      openBundle(replaced("bias=none activation=none\n",
                          "bias=f32 activation=none weights=kn\n"),
                 &status);
  CHECK_EQ(status, MOE_STATUS_SUCCESS);
  if (bundle) {
    moeEntryInfo entry;
    CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(entry.op), MOE_OP_GROUPED_MATMUL);
    CHECK_EQ(entry.bias_bits, 32);
    moeBundleClose(bundle);
  }
  CHECK(
      !openBundle(replaced("epilogue=store experts=8 n=28672",
                           "epilogue=row_scale experts=8 n=28672",
                           replaced("bias=none activation=none\n",
                                    "bias=none activation=none weights=kn\n")),
                  &status));
  CHECK_CONTAINS(moeLastErrorMessage(),
                 "weights=kn with epilogue=row_scale and a 0-bit bias");
}

/// A bundle of one grouped_wgrad.v1 entry (moe.grouped_wgrad).
static std::string wgradBundle(const std::string &more = "") {
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('W')) +
         "entry dw op=moe.grouped_wgrad abi=grouped_wgrad.v1 experts=8 n=256 "
         "k=512 max_rows=2147483647 offsets=i64\n" +
         simpleKernelLine("dw", "grouped_wgrad_bf16_128x128x64_s4_off64",
                          "moe_kernels", 256, 131072) +
         more + "end\n";
}

TEST(bundleWgradParses) {
  moeStatus status = MOE_STATUS_INVALID_ARGUMENT;
  moeBundle *bundle = openBundle(wgradBundle(), &status);
  CHECK_EQ(status, MOE_STATUS_SUCCESS);
  if (!bundle)
    return;
  moeEntryInfo entry;
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.op), MOE_OP_GROUPED_WGRAD);
  CHECK_EQ(std::string(entry.abi), MOE_ABI_GROUPED_WGRAD);
  CHECK_EQ(entry.experts, 8);
  CHECK_EQ(entry.n, 256);
  CHECK_EQ(entry.k, 512);
  CHECK_EQ(entry.offsets_bits, 64);
  moeBundleClose(bundle);

  // Another op with the ABI, a second kernel, a key of another ABI.
  const struct {
    std::string bytes;
    const char *message;
  } bad[] = {
      {replacedAll(wgradBundle(), "op=moe.grouped_wgrad",
                   "op=moe.grouped_matmul"),
       "bundle line 4: entry 'dw': op=moe.grouped_matmul with abi "
       "grouped_wgrad.v1 (its entries are op=moe.grouped_wgrad)"},
      {wgradBundle(simpleKernelLine("dw", "second", "moe_kernels", 256, 0)),
       "entry 'dw' (abi grouped_wgrad.v1) takes exactly one kernel"},
      {replacedAll(wgradBundle(), "offsets=i64", "offsets=i64 epilogue=store"),
       "bundle line 4: entry 'dw': unknown key 'epilogue' (abi "
       "grouped_wgrad.v1 takes op, abi, experts, n, k, max_rows and "
       "offsets)"},
  };
  for (const auto &c : bad) {
    moeBundle *refused = openBundle(c.bytes, &status);
    CHECK(refused == nullptr);
    CHECK_EQ(status, MOE_STATUS_INVALID_BUNDLE);
    CHECK_CONTAINS(std::string(moeLastErrorMessage()), c.message);
    if (refused)
      moeBundleClose(refused);
  }
}

TEST(bundlePlannedNeedsAPlan) {
  // A planned.v1 entry is known by its plan alone: refused without one, in
  // a version 6 bundle too (where plans are otherwise optional).
  std::string bytes =
      "MOEBUNDLE 6\n"
      "chip sm_90a\n" +
      imageRecord("moe_kernels", fakeCubin('P')) +
      "entry sg op=moe.swiglu_grad abi=planned.v1 "
      "max_rows=2147483647\n" +
      simpleKernelLine("sg", "moe_swiglu_grad_silu", "moe_kernels", 256, 0) +
      "end\n";
  moeStatus status = MOE_STATUS_SUCCESS;
  moeBundle *bundle = openBundle(bytes, &status);
  CHECK(bundle == nullptr);
  CHECK_EQ(status, MOE_STATUS_INVALID_BUNDLE);
  CHECK_CONTAINS(std::string(moeLastErrorMessage()),
                 "entry 'sg' has no launch plan (planned.v1 entries carry "
                 "size, arg and launch records)");
  if (bundle)
    moeBundleClose(bundle);
}

/// A program.v1 entry `f` over one part, the planned.v1 entry `f.0`
/// (contract §3.13); `programExtra` goes after the program's entry line.
static std::string programBundle(const std::string &programExtra = "") {
  return withChecksums(
      "MOEBUNDLE 7\n"
      "chip sm_90a\n" +
      imageRecord("moe_kernels", fakeCubin('P')) +
      "entry f.0 op=moe.swiglu abi=planned.v1 max_rows=2147483647\n" +
      simpleKernelLine("f.0", "moe_swiglu_silu", "moe_kernels", 256, 0) +
      "size f.0 M min=0 max=2147483647\n"
      "arg f.0 input bf16 in align=16 dims=M,512\n"
      "arg f.0 out bf16 out align=16 dims=M,256\n"
      "launch f.0 0 grid=ceildiv(M*32,256) when=M>=1 "
      "params=mem:input[M,512];mem:out[M,256]\n"
      "entry f op=func.func abi=program.v1 max_rows=2147483647\n" +
      programExtra +
      "size f M min=0 max=2147483647\n"
      "arg f gate_up bf16 in align=16 dims=M,512\n"
      "arg f act bf16 out align=16 dims=M,256\n"
      "launch f 0 part=f.0 grid=ceildiv(M*32,256) when=M>=1 "
      "params=mem:gate_up[M,512];mem:act[M,256]\n"
      "end\n");
}

TEST(bundleProgramParses) {
  // A program has no kernels of its own: its steps launch its parts'.
  moeBundle *bundle = OPEN_VALID(programBundle());
  if (!bundle)
    return;
  moeEntryInfo entry;
  CHECK_EQ(moeBundleGetEntry(bundle, 1, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), std::string("f"));
  CHECK_EQ(std::string(entry.abi), std::string(MOE_ABI_PROGRAM));
  CHECK_EQ(std::string(entry.op), std::string("func.func"));
  CHECK_EQ(entry.num_kernels, 0);
  moeBundleClose(bundle);
  moeStatus status = MOE_STATUS_SUCCESS;
  struct {
    std::string bytes, message;
  } bad[] = {
      {programBundle(simpleKernelLine("f", "own", "moe_kernels", 256, 0)),
       "entry 'f' (abi program.v1) takes no kernels (it launches those of "
       "its parts)"},
      {replacedAll(programBundle(), "launch f 0 part=f.0", "launch f 0"),
       "entry 'f''s plan"},
      {replacedAll(programBundle(), "part=f.0", "part=g"),
       "part='g' names no earlier entry"},
  };
  for (const auto &c : bad) {
    moeBundle *refused = openBundle(c.bytes, &status);
    CHECK(refused == nullptr);
    CHECK_EQ(status, MOE_STATUS_INVALID_BUNDLE);
    CHECK_CONTAINS(std::string(moeLastErrorMessage()), c.message);
    if (refused)
      moeBundleClose(refused);
  }
}

/// Two stages of a split function `f` (contract §3.14), each a program
/// over the planned.v1 entry `p.0`, with the stage keys `first` and
/// `second`.
static std::string stageBundle(const std::string &first,
                               const std::string &second) {
  std::string program;
  for (auto [name, keys] : {std::pair{"f_stage0", first}, {"f_stage1", second}})
    program += std::string("entry ") + name +
               " op=func.func abi=program.v1 max_rows=2147483647" +
               (keys.empty() ? "" : " " + keys) + "\nsize " + name +
               " M min=0 max=2147483647\narg " + name +
               " gate_up bf16 in align=16 dims=M,512\narg " + name +
               " act bf16 out align=16 dims=M,256\nlaunch " + name +
               " 0 part=p.0 grid=ceildiv(M*32,256) when=M>=1 "
               "params=mem:gate_up[M,512];mem:act[M,256]\n";
  return withChecksums(
      "MOEBUNDLE 7\n"
      "chip sm_90a\n" +
      imageRecord("moe_kernels", fakeCubin('P')) +
      "entry p.0 op=moe.swiglu abi=planned.v1 max_rows=2147483647\n" +
      simpleKernelLine("p.0", "moe_swiglu_silu", "moe_kernels", 256, 0) +
      "size p.0 M min=0 max=2147483647\n"
      "arg p.0 input bf16 in align=16 dims=M,512\n"
      "arg p.0 out bf16 out align=16 dims=M,256\n"
      "launch p.0 0 grid=ceildiv(M*32,256) when=M>=1 "
      "params=mem:input[M,512];mem:out[M,256]\n" +
      program + "end\n");
}

TEST(bundleStagesParse) {
  const std::string first =
      "stage_of=f stage=0 exchange=moe.dispatch ranks=4 "
      "exchange_args=act,offsets exchange_results=x0_0,x0_1,x0_2 "
      "function_args=tokens,logits function_results=out,logits";
  const std::string second = "stage_of=f stage=1 function_args=tokens,logits "
                             "function_results=out,logits";
  moeBundle *bundle = OPEN_VALID(stageBundle(first, second));
  if (!bundle)
    return;
  moeStageInfo stage;
  CHECK_EQ(moeBundleGetStage(bundle, 1, &stage), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(stage.function), "f");
  CHECK_EQ(stage.stage, 0);
  CHECK_EQ(std::string(stage.exchange), "moe.dispatch");
  CHECK_EQ(stage.ranks, 4);
  CHECK_EQ(std::string(stage.exchange_args), "act,offsets");
  CHECK_EQ(std::string(stage.exchange_results), "x0_0,x0_1,x0_2");
  CHECK_EQ(std::string(stage.function_args), "tokens,logits");
  CHECK_EQ(std::string(stage.function_results), "out,logits");
  CHECK_EQ(moeBundleGetStage(bundle, 2, &stage), MOE_STATUS_SUCCESS);
  CHECK_EQ(stage.stage, 1);
  CHECK_EQ(std::string(stage.exchange), "");
  CHECK_EQ(stage.ranks, 0);
  CHECK_EQ(std::string(stage.exchange_args), "");
  // The part is no stage; bad arguments are refused.
  CHECK_EQ(moeBundleGetStage(bundle, 0, &stage), MOE_STATUS_NOT_FOUND);
  CHECK_CONTAINS(std::string(moeLastErrorMessage()),
                 "entry 'p.0' is not a stage of a split function");
  CHECK_EQ(moeBundleGetStage(bundle, 3, &stage), MOE_STATUS_INVALID_ARGUMENT);
  CHECK_EQ(moeBundleGetStage(bundle, 1, nullptr), MOE_STATUS_INVALID_ARGUMENT);
  moeBundleClose(bundle);
  // A program that is no stage has none.
  moeBundle *plain = OPEN_VALID(stageBundle("", ""));
  if (plain) {
    CHECK_EQ(moeBundleGetStage(plain, 1, &stage), MOE_STATUS_NOT_FOUND);
    moeBundleClose(plain);
  }

  auto with = [](std::string text, const std::string &from,
                 const std::string &to) { return replacedAll(text, from, to); };
  struct {
    std::string first, second, message;
  } bad[] = {
      {with(first, "stage_of=f ", ""), second,
       "needs stage_of, stage and function_args"},
      {with(first, " function_args=tokens,logits", ""), second,
       "needs stage_of, stage and function_args"},
      {with(first, "moe.dispatch", "moe.all_to_all"), second,
       "exchange='moe.all_to_all' is not moe.dispatch or moe.undispatch"},
      {with(first, "moe.dispatch", "moe.undispatch"), second,
       "exchange=moe.undispatch takes 3 values and gives 1, but "
       "exchange_args names 2 and exchange_results 3"},
      {with(first, "ranks=4", "ranks=0"), second, "ranks"},
      {with(first, "x0_1", ""), second, "not a name of at most 255"},
      {with(first, "offsets", "offsets,"), second, "ends with ','"},
      {with(first, "x0_0", "x 0"), second, ""},
      {first, second + " ranks=2", "belong to a stage with an exchange"},
      {first, with(second, "stage=1", "stage=0"),
       "is stage 0 of 'f', as is entry 'f_stage0'"},
      {first, with(second, "stage=1", "stage=2"),
       "entry 'f_stage1' is stage 2 of 'f', which has no stage 1"},
      {first,
       second + " exchange=moe.undispatch ranks=4 exchange_args=a,b,c "
                "exchange_results=y",
       "is its last, after which no exchange runs"},
      {with(first,
            "exchange=moe.dispatch ranks=4 exchange_args=act,offsets "
            "exchange_results=x0_0,x0_1,x0_2 ",
            ""),
       second, "is followed by another, so an exchange runs after it"},
      {first,
       with(second, "function_args=tokens,logits", "function_args=tokens"),
       "its function_args or function_results differ from those of stage 0"},
      {first, with(second, "stage=1", "stage=x"), "stage"},
  };
  moeStatus status = MOE_STATUS_SUCCESS;
  for (const auto &c : bad) {
    moeBundle *refused = openBundle(stageBundle(c.first, c.second), &status);
    CHECK(refused == nullptr);
    CHECK_EQ(status, MOE_STATUS_INVALID_BUNDLE);
    CHECK_CONTAINS(std::string(moeLastErrorMessage()), c.message);
    if (refused)
      moeBundleClose(refused);
  }
}

TEST(bundleLayerParses) {
  moeBundle *bundle = OPEN_VALID(layerBundle());
  if (!bundle)
    return;
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.num_entries, 12);
  // layer.v1: max_rows and the part names (no quantize parts); no kernels;
  // the rest 0 or "".
  checkLayerEntry(bundle, 5, "mix", MOE_ABI_LAYER, 4096,
                  {"mix_route", "mix_permute", "", "mix_gate_up", "",
                   "mix_down", "mix_unpermute"});
  checkLayerEntry(bundle, 11, "oss", MOE_ABI_LAYER, 2147483647,
                  {"oss_route", "oss_permute", "", "oss_gate_up", "",
                   "oss_down", "oss_unpermute"});
  moeEntryInfo entry;
  // Its parts are ordinary entries: the permutes with their chunks and
  // three kernels.
  CHECK_EQ(moeBundleGetEntry(bundle, 1, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "mix_permute");
  CHECK_EQ(entry.chunk, 4096);
  CHECK_EQ(entry.num_kernels, 3);
  CHECK_EQ(moeBundleGetEntry(bundle, 7, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "oss_permute");
  CHECK_EQ(entry.chunk, 64);
  CHECK_EQ(moeBundleGetEntry(bundle, 8, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "oss_gate_up");
  CHECK_EQ(entry.bias_bits, 32);
  CHECK_EQ(entry.chunk, 0);
  CHECK_EQ(std::string(entry.activation), "gptoss");
  CHECK_EQ(std::string(entry.route), "");
  CHECK_EQ(moeBundleGetEntry(bundle, 9, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(entry.bias_bits, 16);
  moeBundleClose(bundle);

  // Keys in any order; a part may serve several layers; static sizes of
  // the GEMMs may stand beside dynamic ones of the permute.
  std::string other = layerBundle();
  const std::string from = "op=moe.layer abi=layer.v1 max_rows=4096 "
                           "route=mix_route permute=mix_permute "
                           "gate_up=mix_gate_up down=mix_down "
                           "unpermute=mix_unpermute";
  other.replace(other.find(from), from.size(),
                "unpermute=mix_unpermute down=mix_down gate_up=mix_gate_up "
                "permute=mix_permute route=mix_route max_rows=16 "
                "abi=layer.v1 op=moe.layer");
  other.replace(other.size() - 4, 4,
                "entry again op=moe.layer abi=layer.v1 max_rows=1 "
                "route=oss_route permute=oss_permute gate_up=oss_gate_up "
                "down=oss_down unpermute=oss_unpermute\nend\n");
  const std::string hidden = "max_rows=2147483647 experts=4 top_k=2 hidden=-1";
  other.replace(other.find(hidden), hidden.size(),
                "max_rows=2147483647 experts=4 top_k=2 hidden=4096");
  bundle = OPEN_VALID(other);
  if (!bundle)
    return;
  CHECK_EQ(moeBundleGetEntry(bundle, 5, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(entry.max_rows, 16);
  CHECK_EQ(std::string(entry.down), "mix_down");
  CHECK_EQ(moeBundleGetEntry(bundle, 12, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "again");
  CHECK_EQ(std::string(entry.gate_up), "oss_gate_up");
  moeBundleClose(bundle);
}

TEST(bundleLayerFp8Parses) {
  moeBundle *bundle = OPEN_VALID(layerFp8Bundle());
  if (!bundle)
    return;
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.num_entries, 16);
  // layer_fp8.v1: max_rows and the seven part names; no kernels; the rest 0
  // or "".
  checkLayerEntry(bundle, 7, "fmix", "layer_fp8.v1", 4096,
                  {"fmix_route", "fmix_permute", "fmix_quantize",
                   "fmix_gate_up", "fmix_intermediate", "fmix_down",
                   "fmix_unpermute"});
  checkLayerEntry(bundle, 15, "foss", MOE_ABI_LAYER_FP8, 2147483647,
                  {"foss_route", "foss_permute", "foss_quantize",
                   "foss_gate_up", "foss_intermediate", "foss_down",
                   "foss_unpermute"});
  moeEntryInfo entry;
  moeKernelInfo kernel;
  // Its parts are ordinary entries: the quantizes of ops moe.quantize and
  // moe.expert_mlp, the GEMMs block-FP8 expert-MLP halves.
  struct {
    int32_t index;
    const char *name, *op, *abi;
    int64_t cols;
  } parts[] = {
      {2, "fmix_quantize", "moe.quantize", "quantize.v1", 256},
      {3, "fmix_gate_up", "moe.expert_mlp", "grouped_matmul_fp8.v1", 0},
      {4, "fmix_intermediate", "moe.expert_mlp", "quantize.v1", 128},
      {5, "fmix_down", "moe.expert_mlp", "grouped_matmul_fp8.v1", 0},
      {12, "foss_intermediate", "moe.expert_mlp", "quantize.v1", -1}};
  for (const auto &p : parts) {
    CHECK_EQ(moeBundleGetEntry(bundle, p.index, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(entry.name), p.name);
    CHECK_EQ(std::string(entry.op), p.op);
    CHECK_EQ(std::string(entry.abi), p.abi);
    CHECK_EQ(entry.cols, p.cols);
    CHECK_EQ(entry.num_kernels, 1);
    CHECK_EQ(std::string(entry.quantize), "");
    CHECK_EQ(std::string(entry.intermediate), "");
    CHECK_EQ(std::string(entry.route), "");
  }
  CHECK_EQ(moeBundleGetEntry(bundle, 3, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.format), "fp8_block");
  CHECK_EQ(std::string(entry.epilogue), "swiglu");
  CHECK_EQ(moeBundleGetKernel(bundle, 3, 0, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(kernel.tile_k, 128);
  CHECK_EQ(moeBundleGetEntry(bundle, 4, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.element), "f8E4M3FN");
  CHECK_EQ(std::string(entry.scale), "f32");
  CHECK_EQ(entry.block_cols, 128);
  moeBundleClose(bundle);

  // Keys in any order; quantize parts of static rows; a standalone block-FP8
  // expert MLP (its gate_up, intermediate and down, no layer).
  std::string other = layerFp8Bundle();
  const std::string from =
      "op=moe.layer abi=layer_fp8.v1 max_rows=4096 route=fmix_route "
      "permute=fmix_permute quantize=fmix_quantize gate_up=fmix_gate_up "
      "intermediate=fmix_intermediate down=fmix_down "
      "unpermute=fmix_unpermute";
  other.replace(other.find(from), from.size(),
                "unpermute=fmix_unpermute intermediate=fmix_intermediate "
                "down=fmix_down gate_up=fmix_gate_up quantize=fmix_quantize "
                "permute=fmix_permute route=fmix_route max_rows=16 "
                "abi=layer_fp8.v1 op=moe.layer");
  other.replace(other.find("rows=-1 cols=256"), 16, "rows=32 cols=256");
  const std::string mlp =
      fp8LayerQuantizeLine("q_intermediate", "moe.expert_mlp", "2147483647",
                           "-1") +
      simpleKernelLine("q_intermediate", kFossSymbols[4], "moe_kernels", 256,
                       0) +
      "entry q_down op=moe.expert_mlp abi=grouped_matmul_fp8.v1 "
      "format=fp8_block epilogue=row_scale activation=none bias=none "
      "experts=-1 n=-1 k=-1 max_rows=2147483647 offsets=i32\n" +
      fp8KernelLine("q_down", "q_down_kernel", 1, 2147483647, 128, 64, 128,
                    98304, 0);
  other.replace(other.size() - 4, 4, mlp + "end\n");
  bundle = OPEN_VALID(other);
  if (!bundle)
    return;
  CHECK_EQ(moeBundleGetEntry(bundle, 7, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(entry.max_rows, 16);
  CHECK_EQ(std::string(entry.intermediate), "fmix_intermediate");
  CHECK_EQ(moeBundleGetEntry(bundle, 2, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(entry.rows, 32);
  CHECK_EQ(moeBundleGetEntry(bundle, 17, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "q_down");
  CHECK_EQ(std::string(entry.op), "moe.expert_mlp");
  CHECK_EQ(std::string(entry.epilogue), "row_scale");
  moeBundleClose(bundle);
}

TEST(bundleLayerFp8OutParses) {
  // layer_fp8.v1 layers without an intermediate part, their gate_up entries
  // with out=f8E4M3FN (the compiler's default form).
  moeBundle *bundle = OPEN_VALID(layerFp8OutBundle());
  if (!bundle)
    return;
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.num_entries, 14);
  checkLayerEntry(bundle, 6, "fmix", "layer_fp8.v1", 4096,
                  {"fmix_route", "fmix_permute", "fmix_quantize",
                   "fmix_gate_up", "", "fmix_down", "fmix_unpermute"});
  checkLayerEntry(bundle, 13, "foss", MOE_ABI_LAYER_FP8, 2147483647,
                  {"foss_route", "foss_permute", "foss_quantize",
                   "foss_gate_up", "", "foss_down", "foss_unpermute"});
  moeEntryInfo entry;
  const struct {
    int32_t index;
    const char *name, *out;
  } gemms[] = {{3, "fmix_gate_up", "f8E4M3FN"},
               {4, "fmix_down", "bf16"},
               {10, "foss_gate_up", "f8E4M3FN"},
               {11, "foss_down", "bf16"}};
  for (const auto &g : gemms) {
    CHECK_EQ(moeBundleGetEntry(bundle, g.index, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(entry.name), g.name);
    CHECK_EQ(std::string(entry.out), g.out);
  }
  moeBundleClose(bundle);

  // Keys in any order; both forms of layer in one bundle (fmix with its
  // intermediate, foss without).
  std::string mixed = layerFp8Bundle();
  auto swap = [&mixed](const std::string &from, const std::string &to) {
    mixed = replaced(from, to, mixed);
  };
  swap("entry foss_gate_up op=moe.expert_mlp abi=grouped_matmul_fp8.v1 "
       "format=fp8_block epilogue=swiglu",
       "entry foss_gate_up epilogue=swiglu out=f8E4M3FN op=moe.expert_mlp "
       "format=fp8_block abi=grouped_matmul_fp8.v1");
  swap(" intermediate=foss_intermediate", "");
  swap("entry foss op=moe.layer abi=layer_fp8.v1 max_rows=2147483647 "
       "route=foss_route",
       "entry foss route=foss_route max_rows=2147483647 abi=layer_fp8.v1 "
       "op=moe.layer");
  bundle = OPEN_VALID(mixed);
  if (!bundle)
    return;
  CHECK_EQ(moeBundleGetEntry(bundle, 7, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.intermediate), "fmix_intermediate");
  CHECK_EQ(moeBundleGetEntry(bundle, 15, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "foss");
  CHECK_EQ(std::string(entry.intermediate), "");
  CHECK_EQ(std::string(entry.gate_up), "foss_gate_up");
  moeBundleClose(bundle);
}

TEST(bundlePermuteFp8Parses) {
  // permute.v2 entries with out=f8E4M3FN: moeEntryInfo.out says so; every
  // other field as without it. A bf16 permute's out is "bf16".
  moeBundle *bundle = OPEN_VALID(permuteFp8Bundle());
  if (!bundle)
    return;
  moeEntryInfo entry;
  std::memset(&entry, 0x5a, sizeof(entry));
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "qperm");
  CHECK_EQ(std::string(entry.abi), MOE_ABI_PERMUTE);
  CHECK(entry.out != nullptr);
  CHECK_EQ(std::string(entry.out), MOE_OUT_E4M3);
  CHECK_EQ(entry.experts, 128);
  CHECK_EQ(entry.top_k, 8);
  CHECK_EQ(entry.hidden, 2048);
  CHECK_EQ(entry.offsets_bits, 64);
  CHECK_EQ(entry.chunk, 4096);
  CHECK_EQ(entry.num_kernels, 3);
  CHECK_EQ(std::string(entry.epilogue), "");
  CHECK_EQ(std::string(entry.format), "");
  CHECK_EQ(std::string(entry.element), "");
  moeKernelInfo kernel;
  CHECK_EQ(moeBundleGetKernel(bundle, 0, 2, &kernel), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(kernel.symbol), kPermGatherE4m3_64);
  CHECK_EQ(moeBundleGetEntry(bundle, 1, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.name), "qperm32");
  CHECK_EQ(std::string(entry.out), "f8E4M3FN");
  CHECK_EQ(entry.hidden, -1);
  moeBundleClose(bundle);

  bundle = OPEN_VALID(permuteBundle());
  if (!bundle)
    return;
  for (int32_t e = 0; e < 3; ++e) {
    CHECK_EQ(moeBundleGetEntry(bundle, e, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(entry.out), MOE_OUT_BF16);
  }
  moeBundleClose(bundle);

  // Keys in any order, out among them; the smallest static H, 128.
  bundle = OPEN_VALID(replaced(
      "op=moe.permute abi=permute.v2 max_rows=2147483647 experts=128 top_k=8 "
      "hidden=2048 offsets=i64 chunk=4096 out=f8E4M3FN",
      "out=f8E4M3FN hidden=128 chunk=4096 offsets=i64 top_k=8 experts=128 "
      "max_rows=2147483647 abi=permute.v2 op=moe.permute",
      permuteFp8Bundle()));
  if (!bundle)
    return;
  CHECK_EQ(moeBundleGetEntry(bundle, 0, &entry), MOE_STATUS_SUCCESS);
  CHECK_EQ(std::string(entry.out), "f8E4M3FN");
  CHECK_EQ(entry.hidden, 128);
  moeBundleClose(bundle);
}

TEST(bundleLayerFp8GatherParses) {
  // layer_fp8.v1 layers without a quantize part, their permutes with
  // out=f8E4M3FN: the five-step form (no intermediate either) and the
  // six-step one with an intermediate part.
  moeBundle *bundle = OPEN_VALID(layerFp8GatherBundle());
  if (!bundle)
    return;
  moeBundleInfo info;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.num_entries, 12);
  checkLayerEntry(bundle, 5, "fmix", "layer_fp8.v1", 4096,
                  {"fmix_route", "fmix_permute", "", "fmix_gate_up", "",
                   "fmix_down", "fmix_unpermute"});
  checkLayerEntry(bundle, 11, "foss", MOE_ABI_LAYER_FP8, 2147483647,
                  {"foss_route", "foss_permute", "", "foss_gate_up", "",
                   "foss_down", "foss_unpermute"});
  moeEntryInfo entry;
  const struct {
    int32_t index;
    const char *name, *out;
  } outs[] = {{1, "fmix_permute", "f8E4M3FN"}, {2, "fmix_gate_up", "f8E4M3FN"},
              {3, "fmix_down", "bf16"},        {7, "foss_permute", "f8E4M3FN"},
              {8, "foss_gate_up", "f8E4M3FN"}, {4, "fmix_unpermute", ""}};
  for (const auto &o : outs) {
    CHECK_EQ(moeBundleGetEntry(bundle, o.index, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(entry.name), o.name);
    CHECK_EQ(std::string(entry.out), o.out);
  }
  moeBundleClose(bundle);

  // The gather quantizing the rows, an intermediate part quantizing the
  // gate-up's bf16 output.
  bundle = OPEN_VALID(withFp8Gather(layerFp8Bundle()));
  if (!bundle)
    return;
  checkLayerEntry(bundle, 6, "fmix", "layer_fp8.v1", 4096,
                  {"fmix_route", "fmix_permute", "", "fmix_gate_up",
                   "fmix_intermediate", "fmix_down", "fmix_unpermute"});
  checkLayerEntry(bundle, 13, "foss", MOE_ABI_LAYER_FP8, 2147483647,
                  {"foss_route", "foss_permute", "", "foss_gate_up",
                   "foss_intermediate", "foss_down", "foss_unpermute"});
  moeBundleClose(bundle);

  // The four pairings over one set of parts, keys in any order: fmix's
  // bf16 permute and gate_up with their quantize and intermediate (seven
  // steps), and FP8-output siblings of them (gmix_permute, gmix_gate_up).
  std::string mixed = layerFp8Bundle();
  mixed.replace(
      mixed.size() - 4, 4,
      "entry gmix_permute op=moe.permute abi=permute.v2 max_rows=4096 "
      "experts=8 top_k=2 hidden=256 offsets=i32 chunk=4096 out=f8E4M3FN\n" +
          simpleKernelLine("gmix_permute", kPermCount32, "moe_kernels", 256,
                           0) +
          simpleKernelLine("gmix_permute", kPermIndex32, "moe_kernels", 256,
                           0) +
          simpleKernelLine("gmix_permute", kPermGatherE4m3_32, "moe_kernels",
                           128, 0) +
          "entry gmix_gate_up out=f8E4M3FN op=moe.expert_mlp "
          "abi=grouped_matmul_fp8.v1 format=fp8_block epilogue=swiglu "
          "activation=silu bias=none experts=8 n=256 k=256 max_rows=8192 "
          "offsets=i32\n" +
          fp8KernelLine("gmix_gate_up", kQmixSymbols[5], 1, 2147483647, 128, 64,
                        128, 98304, 0) +
          "entry rows_q op=moe.layer abi=layer_fp8.v1 max_rows=4096 "
          "route=fmix_route permute=fmix_permute quantize=fmix_quantize "
          "gate_up=gmix_gate_up down=fmix_down unpermute=fmix_unpermute\n"
          "entry inter_q unpermute=fmix_unpermute down=fmix_down "
          "intermediate=fmix_intermediate gate_up=fmix_gate_up "
          "permute=gmix_permute route=fmix_route max_rows=4096 "
          "abi=layer_fp8.v1 op=moe.layer\n"
          "entry neither op=moe.layer abi=layer_fp8.v1 max_rows=16 "
          "gate_up=gmix_gate_up route=fmix_route permute=gmix_permute "
          "down=fmix_down unpermute=fmix_unpermute\n"
          "end\n");
  bundle = OPEN_VALID(mixed);
  if (!bundle)
    return;
  CHECK_EQ(moeBundleGetInfo(bundle, &info), MOE_STATUS_SUCCESS);
  CHECK_EQ(info.num_entries, 21);
  checkLayerEntry(bundle, 7, "fmix", "layer_fp8.v1", 4096,
                  {"fmix_route", "fmix_permute", "fmix_quantize",
                   "fmix_gate_up", "fmix_intermediate", "fmix_down",
                   "fmix_unpermute"});
  checkLayerEntry(bundle, 18, "rows_q", "layer_fp8.v1", 4096,
                  {"fmix_route", "fmix_permute", "fmix_quantize",
                   "gmix_gate_up", "", "fmix_down", "fmix_unpermute"});
  checkLayerEntry(bundle, 19, "inter_q", "layer_fp8.v1", 4096,
                  {"fmix_route", "gmix_permute", "", "fmix_gate_up",
                   "fmix_intermediate", "fmix_down", "fmix_unpermute"});
  checkLayerEntry(bundle, 20, "neither", "layer_fp8.v1", 16,
                  {"fmix_route", "gmix_permute", "", "gmix_gate_up", "",
                   "fmix_down", "fmix_unpermute"});
  moeBundleClose(bundle);
}

TEST(bundleLayerMxfp8Parses) {
  // layer_fp8.v1 layers of MXFP8 GEMMs: both quantize parts, with E8M0
  // scales per [1, 32] group.
  moeBundle *bundle = OPEN_VALID(layerMxfp8Bundle());
  if (!bundle)
    return;
  checkLayerEntry(bundle, 7, "fmix", MOE_ABI_LAYER_FP8, 4096,
                  {"fmix_route", "fmix_permute", "fmix_quantize",
                   "fmix_gate_up", "fmix_intermediate", "fmix_down",
                   "fmix_unpermute"});
  checkLayerEntry(bundle, 15, "foss", MOE_ABI_LAYER_FP8, 2147483647,
                  {"foss_route", "foss_permute", "foss_quantize",
                   "foss_gate_up", "foss_intermediate", "foss_down",
                   "foss_unpermute"});
  moeEntryInfo entry;
  for (int32_t index : {3, 5, 11, 13}) { // the GEMMs
    CHECK_EQ(moeBundleGetEntry(bundle, index, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(entry.abi), MOE_ABI_GROUPED_MATMUL_FP8);
    CHECK_EQ(std::string(entry.format), MOE_FORMAT_MXFP8);
    CHECK_EQ(std::string(entry.out), "bf16");
  }
  for (int32_t index : {2, 4, 10, 12}) { // the quantizes
    CHECK_EQ(moeBundleGetEntry(bundle, index, &entry), MOE_STATUS_SUCCESS);
    CHECK_EQ(std::string(entry.abi), MOE_ABI_QUANTIZE);
    CHECK_EQ(std::string(entry.scale), MOE_SCALE_E8M0);
    CHECK_EQ(entry.block_rows, 1);
    CHECK_EQ(entry.block_cols, 32);
    CHECK_EQ(std::string(entry.format), "");
  }
  moeBundleClose(bundle);
}
