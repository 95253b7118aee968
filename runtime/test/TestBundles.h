//===- TestBundles.h - bundles the tests start from --------------*- C++
//-*-===//

#ifndef MOE_RUNTIME_TEST_TESTBUNDLES_H
#define MOE_RUNTIME_TEST_TESTBUNDLES_H

#include "Checksum.h"
#include "TestHarness.h"
#include "moe_runtime.h"

#include <cstdio>

#include <cstring>
#include <string>

namespace moe_test {

/// 32 bytes that pass for a cubin: ELF magic, then a '\n', a NUL and a fake
/// `end` line, so readers must honour the announced size.
inline std::string fakeCubin(char tag) {
  std::string image("\x7f"
                    "ELF\x02\x01\x01",
                    7);
  image += '\n';
  image += tag;
  image += std::string("\0\nend\n", 6);
  image.resize(32, tag);
  return image;
}

inline std::string imageRecord(const std::string &name,
                               const std::string &bytes) {
  return "image " + name + " " + std::to_string(bytes.size()) + "\n" + bytes +
         "\n";
}

inline std::string kernelLine(const std::string &entry,
                              const std::string &symbol,
                              const std::string &image, long long rowsMin,
                              long long rowsMax, int tileM, int tileN, int smem,
                              int swapAB) {
  return "kernel " + entry + " " + symbol + " image=" + image +
         " rows_min=" + std::to_string(rowsMin) +
         " rows_max=" + std::to_string(rowsMax) +
         " threads=128 smem=" + std::to_string(smem) +
         " tile_m=" + std::to_string(tileM) +
         " tile_n=" + std::to_string(tileN) +
         " tile_k=64 stages=4 swap_ab=" + std::to_string(swapAB) + "\n";
}

/// Symbols of the valid bundle.
inline constexpr const char *kNormal32 =
    "grouped_matmul_bf16_64x256x64_s4_off32";
inline constexpr const char *kSwapAB32 =
    "grouped_matmul_bf16_16x64x64_s4_swapab_off32";
inline constexpr const char *kNormal64 =
    "grouped_matmul_bf16_64x256x64_s4_off64";
inline constexpr const char *kSmall64 =
    "grouped_matmul_bf16_64x128x64_s2_off64";
/// Symbols of the expert-MLP bundle.
inline constexpr const char *kGateUp32 =
    "grouped_matmul_bf16_64x256x64_s4_swiglu_off32";
inline constexpr const char *kGateUpSwapAB32 =
    "grouped_matmul_bf16_16x64x64_s4_swapab_swiglu_off32";
inline constexpr const char *kDown32 =
    "grouped_matmul_bf16_64x256x64_s4_rowscale_off32";
inline constexpr const char *kGateUp64 =
    "grouped_matmul_bf16_64x128x64_s2_swiglu_off64";
inline constexpr const char *kDown64 =
    "grouped_matmul_bf16_64x128x64_s2_rowscale_off64";

/// A valid bundle (line numbers on the right):
///   gate_up: E=8 N=28672 K=4096, i32 offsets, a normal kernel for rows
///            >= 17 and a swap-AB kernel for 1..16, in two images;  (5-7)
///   down:    E=8 N=4096 K=14336 max_rows=4096, i64 offsets, one kernel;
///            (8-9)
///   any:     all sizes dynamic, i64 offsets, two kernels listed with the
///            larger rows first; its second kernel is down's, with more
///            shared memory. (10-12)
inline std::string validBundle() {
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('A')) +
         imageRecord("moe_kernels_swapab", fakeCubin('B')) +
         "entry gate_up op=moe.grouped_matmul abi=grouped_matmul.v3 "
         "epilogue=store "
         "experts=8 n=28672 k=4096 max_rows=2147483647 offsets=i32 bias=none "
         "activation=none\n" +
         kernelLine("gate_up", kNormal32, "moe_kernels", 17, 2147483647, 64,
                    256, 163840, 0) +
         kernelLine("gate_up", kSwapAB32, "moe_kernels_swapab", 1, 16, 16, 64,
                    81920, 1) +
         "entry down op=moe.grouped_matmul abi=grouped_matmul.v3 "
         "epilogue=store experts=8 "
         "n=4096 k=14336 max_rows=4096 offsets=i64 bias=none "
         "activation=none\n" +
         kernelLine("down", kNormal64, "moe_kernels", 1, 2147483647, 64, 256,
                    163840, 0) +
         "entry any op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store "
         "experts=-1 "
         "n=-1 k=-1 max_rows=2147483647 offsets=i64 bias=none "
         "activation=none\n" +
         kernelLine("any", kNormal64, "moe_kernels", 65, 2147483647, 64, 256,
                    200000, 0) +
         kernelLine("any", kSmall64, "moe_kernels", 1, 64, 64, 128, 98304, 0) +
         "end\n";
}

/// The entries of two moe.expert_mlp ops (line numbers on the right):
///   mlp_gate_up: swiglu, E=8 N=28672 K=4096 (out [M, 14336]), i32
///                offsets, a normal kernel for rows >= 17 and a swap-AB one
///                for 1..16;                                       (4-6)
///   mlp_down:    row_scale, E=8 N=4096 K=14336, i32 offsets;      (7-8)
///   dyn_gate_up: swiglu, all sizes dynamic, i64 offsets;          (9-10)
///   dyn_down:    row_scale, all sizes dynamic, i64 offsets.       (11-12)
inline std::string mlpBundle() {
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('M')) +
         "entry mlp_gate_up op=moe.expert_mlp abi=grouped_matmul.v3 "
         "epilogue=swiglu experts=8 n=28672 k=4096 max_rows=2147483647 "
         "offsets=i32 bias=none activation=silu\n" +
         kernelLine("mlp_gate_up", kGateUp32, "moe_kernels", 17, 2147483647, 64,
                    256, 163840, 0) +
         kernelLine("mlp_gate_up", kGateUpSwapAB32, "moe_kernels", 1, 16, 16,
                    64, 81920, 1) +
         "entry mlp_down op=moe.expert_mlp abi=grouped_matmul.v3 "
         "epilogue=row_scale experts=8 n=4096 k=14336 max_rows=2147483647 "
         "offsets=i32 bias=none activation=none\n" +
         kernelLine("mlp_down", kDown32, "moe_kernels", 1, 2147483647, 64, 256,
                    163840, 0) +
         "entry dyn_gate_up op=moe.expert_mlp abi=grouped_matmul.v3 "
         "epilogue=swiglu experts=-1 n=-1 k=-1 max_rows=2147483647 "
         "offsets=i64 bias=none activation=silu\n" +
         kernelLine("dyn_gate_up", kGateUp64, "moe_kernels", 1, 2147483647, 64,
                    128, 98304, 0) +
         "entry dyn_down op=moe.expert_mlp abi=grouped_matmul.v3 "
         "epilogue=row_scale experts=-1 n=-1 k=-1 max_rows=2147483647 "
         "offsets=i64 bias=none activation=none\n" +
         kernelLine("dyn_down", kDown64, "moe_kernels", 1, 2147483647, 64, 128,
                    98304, 0) +
         "end\n";
}

/// The kernel line of a route.v1, unpermute.v2 or permute.v2 entry.
inline std::string simpleKernelLine(const std::string &entry,
                                    const std::string &symbol,
                                    const std::string &image, int threads,
                                    int smem) {
  return "kernel " + entry + " " + symbol + " image=" + image +
         " threads=" + std::to_string(threads) +
         " smem=" + std::to_string(smem) + "\n";
}

/// Symbols of the route/unpermute bundle.
inline constexpr const char *kRouteBias =
    "moe_route_sigmoid_topk_e256_k8_f32_bias";
inline constexpr const char *kRouteSoftmax =
    "moe_route_softmax_topk_e8_k2_bf16";
inline constexpr const char *kCombine = "moe_unpermute_h4096_k2_i64_weighted";
inline constexpr const char *kGather = "moe_unpermute_k8_i32";

/// Entries of the route.v1 and unpermute.v2 ABIs, and a grouped matmul (line
/// numbers on the right):
///   router:  moe.route, E=256 k=8, f32 logits with a bias, 128 threads;
///            (4-5)
///   softmax: moe.route, E=8 k=2, bf16 logits, no bias, max_rows=4096,
///            256 threads, 2048 bytes of shared memory;            (6-7)
///   combine: moe.unpermute, H=4096 k=2, i64 slots, weighted, 256
///            threads;                                             (8-9)
///   gather:  moe.unpermute, H dynamic, k=8, i32 slots, unweighted,
///            max_rows=1024, 128 threads;                          (10-11)
///   experts: a grouped matmul (E=8 N=64 K=64, i32 offsets).       (12-13)
inline std::string routeBundle() {
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('R')) +
         "entry router op=moe.route abi=route.v1 max_rows=2147483647 "
         "experts=256 top_k=8 logits=f32 bias=1\n" +
         simpleKernelLine("router", kRouteBias, "moe_kernels", 128, 0) +
         "entry softmax op=moe.route abi=route.v1 max_rows=4096 experts=8 "
         "top_k=2 logits=bf16 bias=0\n" +
         simpleKernelLine("softmax", kRouteSoftmax, "moe_kernels", 256, 2048) +
         "entry combine op=moe.unpermute abi=unpermute.v2 "
         "max_rows=2147483647 hidden=4096 top_k=2 slots=i64 weighted=1\n" +
         simpleKernelLine("combine", kCombine, "moe_kernels", 256, 0) +
         "entry gather op=moe.unpermute abi=unpermute.v2 max_rows=1024 "
         "hidden=-1 top_k=8 slots=i32 weighted=0\n" +
         simpleKernelLine("gather", kGather, "moe_kernels", 128, 0) +
         "entry experts op=moe.grouped_matmul abi=grouped_matmul.v3 "
         "epilogue=store experts=8 n=64 k=64 max_rows=2147483647 "
         "offsets=i32 bias=none activation=none\n" +
         kernelLine("experts", kNormal32, "moe_kernels", 1, 2147483647, 64, 64,
                    0, 0) +
         "end\n";
}

/// Symbols of the permute bundle.
inline constexpr const char *kPermCount64 = "moe_permute_count_e128_k8";
inline constexpr const char *kPermIndex64 = "moe_permute_index_e128_k8_off64";
inline constexpr const char *kPermGather64 = "moe_permute_gather_off64";
inline constexpr const char *kPermCount32 = "moe_permute_count_e4_k2";
inline constexpr const char *kPermIndex32 = "moe_permute_index_e4_k2_off32";
inline constexpr const char *kPermGather32 = "moe_permute_gather_off32";
inline constexpr const char *kPermCountWide = "moe_permute_count_e1024_k1";
inline constexpr const char *kPermIndexWide =
    "moe_permute_index_e1024_k1_off32";

/// Entries of the permute.v2 ABI, a route and an unpermute (line numbers on
/// the right):
///   perm:   moe.permute, E=128 k=8 H=2048, i64 offsets and slots,
///           chunk=4096; count kernel 1024 threads, index kernel 1024
///           threads and 17408 bytes of shared memory, gather kernel 128
///           threads;                                              (4-7)
///   perm32: moe.permute, E=4 k=2, H dynamic, i32, max_rows=4096,
///           chunk=32; count, index and gather kernels 256 threads;
///           (8-11)
///   wide:   moe.permute, E=1024 k=1 H=8, i32, chunk=65536; count kernel
///           with 4096 bytes of shared memory, index kernel with 73728
///           (over 48 KiB), perm32's gather kernel (shared symbol) with 128
///           threads;                                              (12-15)
///   router: moe.route, E=128 k=8, f32 logits, no bias;            (16-17)
///   combine: moe.unpermute, H=2048 k=8, i64 slots, weighted, 128
///           threads.                                              (18-19)
inline std::string permuteBundle() {
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('P')) +
         "entry perm op=moe.permute abi=permute.v2 max_rows=2147483647 "
         "experts=128 top_k=8 hidden=2048 offsets=i64 chunk=4096\n" +
         simpleKernelLine("perm", kPermCount64, "moe_kernels", 1024, 0) +
         simpleKernelLine("perm", kPermIndex64, "moe_kernels", 1024, 17408) +
         simpleKernelLine("perm", kPermGather64, "moe_kernels", 128, 0) +
         "entry perm32 op=moe.permute abi=permute.v2 max_rows=4096 experts=4 "
         "top_k=2 hidden=-1 offsets=i32 chunk=32\n" +
         simpleKernelLine("perm32", kPermCount32, "moe_kernels", 256, 0) +
         simpleKernelLine("perm32", kPermIndex32, "moe_kernels", 256, 0) +
         simpleKernelLine("perm32", kPermGather32, "moe_kernels", 256, 0) +
         "entry wide op=moe.permute abi=permute.v2 max_rows=2147483647 "
         "experts=1024 top_k=1 hidden=8 offsets=i32 chunk=65536\n" +
         simpleKernelLine("wide", kPermCountWide, "moe_kernels", 1024, 4096) +
         simpleKernelLine("wide", kPermIndexWide, "moe_kernels", 1024, 73728) +
         simpleKernelLine("wide", kPermGather32, "moe_kernels", 128, 0) +
         "entry router op=moe.route abi=route.v1 max_rows=2147483647 "
         "experts=128 top_k=8 logits=f32 bias=0\n" +
         simpleKernelLine("router", kRouteBias, "moe_kernels", 128, 0) +
         "entry combine op=moe.unpermute abi=unpermute.v2 "
         "max_rows=2147483647 hidden=2048 top_k=8 slots=i64 weighted=1\n" +
         simpleKernelLine("combine", kCombine, "moe_kernels", 128, 0) + "end\n";
}

/// Symbols of the FP8-gather permute bundle: count and index kernels as
/// permuteBundle()'s, quantizing gather kernels.
inline constexpr const char *kPermGatherE4m3_64 =
    "moe_permute_gather_off64_e4m3";
inline constexpr const char *kPermGatherE4m3_32 =
    "moe_permute_gather_off32_e4m3";

/// permute.v2 entries with out=f8E4M3FN (contract §3.4, added within version
/// 6), with the keys in the order the compiler writes them (line numbers on
/// the right):
///   qperm:   E=128 k=8 H=2048, i64 offsets and slots, chunk=4096; count
///            and index kernels as perm's (1024 threads, 17408 bytes of
///            shared memory for the index kernel), a quantizing gather
///            kernel of 128 threads;                                (4-7)
///   qperm32: E=4 k=2, H dynamic, i32, max_rows=4096, chunk=32; count,
///            index and quantizing gather kernels of 256 threads.   (8-11)
inline std::string permuteFp8Bundle() {
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('Z')) +
         "entry qperm op=moe.permute abi=permute.v2 max_rows=2147483647 "
         "experts=128 top_k=8 hidden=2048 offsets=i64 chunk=4096 "
         "out=f8E4M3FN\n" +
         simpleKernelLine("qperm", kPermCount64, "moe_kernels", 1024, 0) +
         simpleKernelLine("qperm", kPermIndex64, "moe_kernels", 1024, 17408) +
         simpleKernelLine("qperm", kPermGatherE4m3_64, "moe_kernels", 128, 0) +
         "entry qperm32 op=moe.permute abi=permute.v2 max_rows=4096 experts=4 "
         "top_k=2 hidden=-1 offsets=i32 chunk=32 out=f8E4M3FN\n" +
         simpleKernelLine("qperm32", kPermCount32, "moe_kernels", 256, 0) +
         simpleKernelLine("qperm32", kPermIndex32, "moe_kernels", 256, 0) +
         simpleKernelLine("qperm32", kPermGatherE4m3_32, "moe_kernels", 256,
                          0) +
         "end\n";
}

/// Symbols of the quantizing scatter kernels (scatter_from).
inline constexpr const char *kPermScatterE4m3_64 =
    "moe_permute_scatter_k8_off64_e4m3";
inline constexpr const char *kPermScatterE4m3_32 =
    "moe_permute_scatter_k2_off32_e4m3";

/// permuteFp8Bundle() with scatter_from and a fourth kernel, the scatter:
/// sperm (as qperm, scatter_from=128, a scatter of 256 threads; lines 4-8)
/// and sperm32 (as qperm32, scatter_from=16; lines 9-13).
inline std::string permuteScatterBundle() {
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('Z')) +
         "entry sperm op=moe.permute abi=permute.v2 max_rows=2147483647 "
         "experts=128 top_k=8 hidden=2048 offsets=i64 chunk=4096 "
         "out=f8E4M3FN scatter_from=128\n" +
         simpleKernelLine("sperm", kPermCount64, "moe_kernels", 1024, 0) +
         simpleKernelLine("sperm", kPermIndex64, "moe_kernels", 1024, 17408) +
         simpleKernelLine("sperm", kPermGatherE4m3_64, "moe_kernels", 128, 0) +
         simpleKernelLine("sperm", kPermScatterE4m3_64, "moe_kernels", 256, 0) +
         "entry sperm32 op=moe.permute abi=permute.v2 max_rows=4096 experts=4 "
         "top_k=2 hidden=-1 offsets=i32 chunk=32 out=f8E4M3FN "
         "scatter_from=16\n" +
         simpleKernelLine("sperm32", kPermCount32, "moe_kernels", 256, 0) +
         simpleKernelLine("sperm32", kPermIndex32, "moe_kernels", 256, 0) +
         simpleKernelLine("sperm32", kPermGatherE4m3_32, "moe_kernels", 256,
                          0) +
         simpleKernelLine("sperm32", kPermScatterE4m3_32, "moe_kernels", 256,
                          0) +
         "end\n";
}

/// Symbols of the bias bundle.
inline constexpr const char *kBiasStore = "gemm_bias_f32_64x128";
inline constexpr const char *kBiasSwiGLU = "gemm_bias_bf16_gptoss_64x128";
inline constexpr const char *kBiasScale = "gemm_bias_f32_rowscale_64x128";

/// grouped_matmul.v3 entries with an expert bias (contract version 5; line
/// numbers on the right):
///   bstore:  store, bias=f32, E=8 N=256 K=128, i32 offsets;        (4-5)
///   bswiglu: swiglu, activation=gptoss, bias=bf16, all sizes dynamic,
///            i64 offsets;                                           (6-7)
///   bscale:  row_scale, bias=f32, all sizes dynamic, i32 offsets.   (8-9)
/// One kernel each, tile 64x128x64, 98304 bytes of shared memory.
inline std::string biasBundle() {
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('G')) +
         "entry bstore op=moe.grouped_matmul abi=grouped_matmul.v3 "
         "epilogue=store experts=8 n=256 k=128 max_rows=2147483647 "
         "offsets=i32 bias=f32 activation=none\n" +
         kernelLine("bstore", kBiasStore, "moe_kernels", 1, 2147483647, 64, 128,
                    98304, 0) +
         "entry bswiglu op=moe.expert_mlp abi=grouped_matmul.v3 "
         "epilogue=swiglu experts=-1 n=-1 k=-1 max_rows=2147483647 "
         "offsets=i64 bias=bf16 activation=gptoss\n" +
         kernelLine("bswiglu", kBiasSwiGLU, "moe_kernels", 1, 2147483647, 64,
                    128, 98304, 0) +
         "entry bscale op=moe.expert_mlp abi=grouped_matmul.v3 "
         "epilogue=row_scale experts=-1 n=-1 k=-1 max_rows=2147483647 "
         "offsets=i32 bias=f32 activation=none\n" +
         kernelLine("bscale", kBiasScale, "moe_kernels", 1, 2147483647, 64, 128,
                    98304, 0) +
         "end\n";
}

/// Symbols of the layer bundle, by layer: route, permute count, index and
/// gather, gate-up, down, combine: the order of a layer's launches.
inline constexpr int kLayerKernels = 7;
inline constexpr const char *kMixSymbols[kLayerKernels] = {
    "route_e8_k2",      "perm_count_e8_k2", "perm_index_e8_k2", "perm_gather32",
    "gemm_gate_up_mix", "gemm_down_mix",    "combine_k2_i32"};
inline constexpr const char *kOssSymbols[kLayerKernels] = {
    "route_e4_k2_bias", "perm_count_e4_k2", "perm_index_e4_k2", "perm_gather64",
    "gemm_gate_up_oss", "gemm_down_oss",    "combine_k2_i64"};

/// Two layer.v1 entries and their parts (contract version 5; line numbers on
/// the right), each part with one kernel (permutes three):
///   mix: max_rows=4096; E=8 k=2 H=256 I=128, i32 offsets and slots, f32
///        logits, no biases, chunk=4096: mix_route (4-5), mix_permute
///        (6-9), mix_gate_up (swiglu silu, n=256 k=256; 10-11), mix_down
///        (store, n=256 k=128; 12-13), mix_unpermute (14-15), mix (16);
///   oss: max_rows=2^31-1; E=4 k=2, H and I dynamic, i64, bf16 logits with a
///        score bias, an f32 gate-up bias and a bf16 down bias, chunk=64:
///        oss_route (17-18), oss_permute (19-22), oss_gate_up (swiglu gptoss;
///        23-24), oss_down (25-26), oss_unpermute (27-28), oss (29).
inline std::string layerBundle() {
  auto kernel = [](const std::string &entry, const char *symbol, int tileN) {
    return kernelLine(entry, symbol, "moe_kernels", 1, 2147483647, 64, tileN,
                      98304, 0);
  };
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('L')) +
         "entry mix_route op=moe.route abi=route.v1 max_rows=4096 experts=8 "
         "top_k=2 logits=f32 bias=0\n" +
         simpleKernelLine("mix_route", kMixSymbols[0], "moe_kernels", 128, 0) +
         "entry mix_permute op=moe.permute abi=permute.v2 max_rows=4096 "
         "experts=8 top_k=2 hidden=256 offsets=i32 chunk=4096\n" +
         simpleKernelLine("mix_permute", kMixSymbols[1], "moe_kernels", 256,
                          0) +
         simpleKernelLine("mix_permute", kMixSymbols[2], "moe_kernels", 256,
                          4096) +
         simpleKernelLine("mix_permute", kMixSymbols[3], "moe_kernels", 128,
                          0) +
         "entry mix_gate_up op=moe.expert_mlp abi=grouped_matmul.v3 "
         "epilogue=swiglu experts=8 n=256 k=256 max_rows=8192 offsets=i32 "
         "bias=none activation=silu\n" +
         kernel("mix_gate_up", kMixSymbols[4], 128) +
         "entry mix_down op=moe.expert_mlp abi=grouped_matmul.v3 "
         "epilogue=store experts=8 n=256 k=128 max_rows=8192 offsets=i32 "
         "bias=none activation=none\n" +
         kernel("mix_down", kMixSymbols[5], 128) +
         "entry mix_unpermute op=moe.unpermute abi=unpermute.v2 "
         "max_rows=4096 hidden=256 top_k=2 slots=i32 weighted=1\n" +
         simpleKernelLine("mix_unpermute", kMixSymbols[6], "moe_kernels", 256,
                          0) +
         "entry mix op=moe.layer abi=layer.v1 max_rows=4096 route=mix_route "
         "permute=mix_permute gate_up=mix_gate_up down=mix_down "
         "unpermute=mix_unpermute\n"
         "entry oss_route op=moe.route abi=route.v1 max_rows=2147483647 "
         "experts=4 top_k=2 logits=bf16 bias=1\n" +
         simpleKernelLine("oss_route", kOssSymbols[0], "moe_kernels", 64, 0) +
         "entry oss_permute op=moe.permute abi=permute.v2 "
         "max_rows=2147483647 experts=4 top_k=2 hidden=-1 offsets=i64 "
         "chunk=64\n" +
         simpleKernelLine("oss_permute", kOssSymbols[1], "moe_kernels", 128,
                          0) +
         simpleKernelLine("oss_permute", kOssSymbols[2], "moe_kernels", 128,
                          0) +
         simpleKernelLine("oss_permute", kOssSymbols[3], "moe_kernels", 128,
                          0) +
         "entry oss_gate_up op=moe.expert_mlp abi=grouped_matmul.v3 "
         "epilogue=swiglu experts=-1 n=-1 k=-1 max_rows=2147483647 "
         "offsets=i64 bias=f32 activation=gptoss\n" +
         kernel("oss_gate_up", kOssSymbols[4], 64) +
         "entry oss_down op=moe.expert_mlp abi=grouped_matmul.v3 "
         "epilogue=store experts=4 n=-1 k=-1 max_rows=2147483647 "
         "offsets=i64 bias=bf16 activation=none\n" +
         kernel("oss_down", kOssSymbols[5], 64) +
         "entry oss_unpermute op=moe.unpermute abi=unpermute.v2 "
         "max_rows=2147483647 hidden=-1 top_k=2 slots=i64 weighted=1\n" +
         simpleKernelLine("oss_unpermute", kOssSymbols[6], "moe_kernels", 128,
                          0) +
         "entry oss op=moe.layer abi=layer.v1 max_rows=2147483647 "
         "route=oss_route permute=oss_permute gate_up=oss_gate_up "
         "down=oss_down unpermute=oss_unpermute\n"
         "end\n";
}

/// The kernel line of a grouped_matmul_fp8.v1 entry: tile_k=128 (128
/// float8 = 128 bytes per TMA row, as v3's 64 bf16), 4 stages, in the key
/// order the compiler writes.
inline std::string fp8KernelLine(const std::string &entry,
                                 const std::string &symbol, long long rowsMin,
                                 long long rowsMax, int threads, int tileM,
                                 int tileN, int smem, int swapAB) {
  return "kernel " + entry + " " + symbol +
         " image=moe_kernels rows_min=" + std::to_string(rowsMin) +
         " rows_max=" + std::to_string(rowsMax) +
         " threads=" + std::to_string(threads) +
         " smem=" + std::to_string(smem) + " tile_m=" + std::to_string(tileM) +
         " tile_n=" + std::to_string(tileN) +
         " tile_k=128 stages=4 swap_ab=" + std::to_string(swapAB) + "\n";
}

/// Symbols of the block-FP8 bundle.
inline constexpr const char *kFp8SwapAB =
    "grouped_matmul_fp8block_16x64x128_s4_swapab_off32";
inline constexpr const char *kFp8Normal =
    "grouped_matmul_fp8block_128x128x128_s4_off32";
inline constexpr const char *kFp8Scale =
    "grouped_matmul_fp8block_64x128x128_s4_rowscale_off64";
inline constexpr const char *kFp8Bias =
    "grouped_matmul_fp8block_64x128x128_s4_bias_off32";
inline constexpr const char *kFp8Both =
    "grouped_matmul_fp8block_64x128x128_s4_rowscale_bias_off32";
inline constexpr const char *kFp8SwiGLU =
    "grouped_matmul_fp8block_64x128x128_s4_swiglu_off64";

/// grouped_matmul_fp8.v1 entries (contract version 6), all
/// op=moe.grouped_matmul format=fp8_block with the keys in the order the
/// compiler writes them (line numbers on the right):
///   gemm:    store, E=8 N=256 K=512, i32 offsets, a swap-AB kernel (tile
///            16x64x128, 128 threads, 81920 bytes) for rows 1..16 and a
///            128x128x128 one (256 threads, 147456 bytes) for 17 and up;
///            (4-6)
///   fscale:  row_scale, all sizes dynamic, i64 offsets;            (7-8)
///   fbias:   store, bias=bf16, E=4, N and K dynamic, i32 offsets;  (9-10)
///   fboth:   row_scale, bias=f32, all sizes dynamic, i32 offsets;  (11-12)
///   fswiglu: swiglu, activation=silu, all sizes dynamic, i64 offsets.
///            (13-14)
/// The last four have one 64x128x128 kernel each (128 threads, 98304 bytes).
inline std::string fp8Bundle() {
  auto entry = [](const std::string &name, const std::string &epilogue,
                  const std::string &activation, const std::string &bias,
                  const std::string &sizes, const std::string &offsets) {
    return "entry " + name +
           " op=moe.grouped_matmul abi=grouped_matmul_fp8.v1 "
           "format=fp8_block epilogue=" +
           epilogue + " activation=" + activation + " bias=" + bias + " " +
           sizes + " max_rows=2147483647 offsets=" + offsets + "\n";
  };
  auto one = [](const std::string &name, const char *symbol) {
    return fp8KernelLine(name, symbol, 1, 2147483647, 128, 64, 128, 98304, 0);
  };
  const std::string dynamic = "experts=-1 n=-1 k=-1";
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('F')) +
         entry("gemm", "store", "none", "none", "experts=8 n=256 k=512",
               "i32") +
         fp8KernelLine("gemm", kFp8SwapAB, 1, 16, 128, 16, 64, 81920, 1) +
         fp8KernelLine("gemm", kFp8Normal, 17, 2147483647, 256, 128, 128,
                       147456, 0) +
         entry("fscale", "row_scale", "none", "none", dynamic, "i64") +
         one("fscale", kFp8Scale) +
         entry("fbias", "store", "none", "bf16", "experts=4 n=-1 k=-1", "i32") +
         one("fbias", kFp8Bias) +
         entry("fboth", "row_scale", "none", "f32", dynamic, "i32") +
         one("fboth", kFp8Both) +
         entry("fswiglu", "swiglu", "silu", "none", dynamic, "i64") +
         one("fswiglu", kFp8SwiGLU) + "end\n";
}

/// Symbols of the cluster bundle: grouped matmul kernels compiled with a
/// required cluster size of (2, 1, 1).
inline constexpr const char *kCluster128 =
    "grouped_matmul_bf16_128x256x64_s4_cluster2_off32";
inline constexpr const char *kClusterFp8Out =
    "grouped_matmul_fp8block_64x128x128_s4_swiglu_e4m3_cluster2_off32";

/// `line` (a kernel line) with the optional key `cluster=N` last, where the
/// compiler writes it.
inline std::string withCluster(std::string line, int cluster) {
  line.insert(line.size() - 1, " cluster=" + std::to_string(cluster));
  return line;
}

/// Kernels with the optional `cluster` key (contract §2, §3.1, added within
/// version 6), in the key order the compiler writes (line numbers on the
/// right):
///   cgemm:  grouped_matmul.v3 store, E=8, N dynamic, K=4096, i32 offsets: a
///           swap-AB kernel without the key (rows 1..16, 16x64, 81920
///           bytes; 5) and kCluster128 with cluster=2 (rows 17 and up,
///           128x256, 200000 bytes: 1 CTA per SM; 6);          (4-6)
///   cfp8:   grouped_matmul_fp8.v1 fp8_block swiglu out=f8E4M3FN, E=8, N
///           dynamic, K=512: kClusterFp8Out with cluster=2 (all rows,
///           64x128x128, 98304 bytes; 8);                      (7-8)
///   cone:   as cgemm, one kernel (kNormal32, all rows, 64x256) with an
///           explicit cluster=1;                               (9-10)
///   cshare: as cgemm, kCluster128 with cluster=2 for all rows: the same
///           function, threads and smem as cgemm's;            (11-12)
///   router: route.v1 (E=8 k=2, f32 logits, no bias), its kernel with
///           cluster=1.                                        (13-14)
/// Every kernel has 128 threads.
inline std::string clusterBundle() {
  auto gemmEntry = [](const std::string &name) {
    return "entry " + name +
           " op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store "
           "activation=none bias=none experts=8 n=-1 k=4096 "
           "max_rows=2147483647 offsets=i32\n";
  };
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('K')) + gemmEntry("cgemm") +
         kernelLine("cgemm", kSwapAB32, "moe_kernels", 1, 16, 16, 64, 81920,
                    1) +
         withCluster(kernelLine("cgemm", kCluster128, "moe_kernels", 17,
                                2147483647, 128, 256, 200000, 0),
                     2) +
         "entry cfp8 op=moe.expert_mlp abi=grouped_matmul_fp8.v1 "
         "format=fp8_block out=f8E4M3FN epilogue=swiglu activation=silu "
         "bias=none experts=8 n=-1 k=512 max_rows=2147483647 offsets=i32\n" +
         withCluster(fp8KernelLine("cfp8", kClusterFp8Out, 1, 2147483647, 128,
                                   64, 128, 98304, 0),
                     2) +
         gemmEntry("cone") +
         withCluster(kernelLine("cone", kNormal32, "moe_kernels", 1, 2147483647,
                                64, 256, 163840, 0),
                     1) +
         gemmEntry("cshare") +
         withCluster(kernelLine("cshare", kCluster128, "moe_kernels", 1,
                                2147483647, 128, 256, 200000, 0),
                     2) +
         "entry router op=moe.route abi=route.v1 max_rows=2147483647 "
         "experts=8 top_k=2 logits=f32 bias=0\n" +
         withCluster(
             simpleKernelLine("router", kRouteSoftmax, "moe_kernels", 128, 0),
             1) +
         "end\n";
}

/// Symbols of the quantize bundle.
inline constexpr const char *kQuantMx = "moe_quantize_bf16_e4m3_e8m0_1x32";
inline constexpr const char *kQuantAct = "moe_quantize_f32_e5m2_f32_1x128";
inline constexpr const char *kQuantWeights =
    "moe_quantize_bf16_e4m3_f32_128x128";
inline constexpr const char *kQuantAny = "moe_quantize_f32_e4m3_f32_128x128";

/// quantize.v1 entries (contract §3.8), in the key order the compiler
/// writes, and a grouped matmul (line numbers on the right):
///   mx:      MXFP8: e4m3, E8M0 scales, [1, 32] blocks, bf16 [R, 4096] with
///            R dynamic;                                           (4-5)
///   act:     e5m2, f32 scales, [1, 128] blocks, f32 [R, C], R and C
///            dynamic, max_rows=4096, 128 threads;                 (6-7)
///   weights: e4m3, f32 scales, [128, 128] blocks of bf16 [8, 256, 512];
///            (8-9)
///   anyw:    e4m3, f32 scales, [128, 128] blocks of f32 [E, R, C], all
///            dynamic (the compiler writes a static R for [128, 128]
///            blocks; the reader takes -1);                        (10-11)
///   experts: a grouped matmul (E=8 N=64 K=64, i32 offsets).       (12-13)
/// Quantize kernels have 256 threads (act: 128) and no shared memory.
inline std::string quantizeBundle() {
  auto entry = [](const std::string &name, const std::string &keys) {
    return "entry " + name + " op=moe.quantize abi=quantize.v1 " + keys + "\n";
  };
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('Q')) +
         entry("mx", "max_rows=2147483647 element=f8E4M3FN scale=e8m0 "
                     "input=bf16 block_rows=1 block_cols=32 rank=2 batch=1 "
                     "rows=-1 cols=4096") +
         simpleKernelLine("mx", kQuantMx, "moe_kernels", 256, 0) +
         entry("act", "max_rows=4096 element=f8E5M2 scale=f32 input=f32 "
                      "block_rows=1 block_cols=128 rank=2 batch=1 rows=-1 "
                      "cols=-1") +
         simpleKernelLine("act", kQuantAct, "moe_kernels", 128, 0) +
         entry("weights", "max_rows=256 element=f8E4M3FN scale=f32 "
                          "input=bf16 block_rows=128 block_cols=128 rank=3 "
                          "batch=8 rows=256 cols=512") +
         simpleKernelLine("weights", kQuantWeights, "moe_kernels", 256, 0) +
         entry("anyw", "max_rows=2147483647 element=f8E4M3FN scale=f32 "
                       "input=f32 block_rows=128 block_cols=128 rank=3 "
                       "batch=-1 rows=-1 cols=-1") +
         simpleKernelLine("anyw", kQuantAny, "moe_kernels", 256, 0) +
         "entry experts op=moe.grouped_matmul abi=grouped_matmul.v3 "
         "epilogue=store experts=8 n=64 k=64 max_rows=2147483647 "
         "offsets=i32 bias=none activation=none\n" +
         kernelLine("experts", kNormal32, "moe_kernels", 1, 2147483647, 64, 64,
                    0, 0) +
         "end\n";
}

/// Symbols of the block-FP8 layer bundle, by layer: route, permute count,
/// index and gather, quantize, gate-up, intermediate quantize, down,
/// combine: the order of a layer_fp8.v1 layer's launches. foss's two
/// quantize entries share one kernel, as a compiler may emit them.
inline constexpr int kLayerFp8Kernels = 9;
inline constexpr const char *kFmixSymbols[kLayerFp8Kernels] = {
    "froute_e8_k2",      "fperm_count_e8_k2", "fperm_index_e8_k2",
    "fperm_gather32",    "fquant_rows_h256",  "fgemm_gate_up_mix",
    "fquant_inter_i128", "fgemm_down_mix",    "fcombine_k2_i32"};
inline constexpr const char *kFossSymbols[kLayerFp8Kernels] = {
    "froute_e4_k2_bias", "fperm_count_e4_k2", "fperm_index_e4_k2",
    "fperm_gather64",    "fquant_1x128",      "fgemm_gate_up_oss",
    "fquant_1x128",      "fgemm_down_oss",    "fcombine_k2_i64"};

/// The entry line of a quantize.v1 part of a layer_fp8.v1 layer: e4m3
/// values, f32 scales per [1, 128] group of the bf16 [T*k, cols] rows.
inline std::string fp8LayerQuantizeLine(const std::string &name,
                                        const std::string &op,
                                        const std::string &maxRows,
                                        const std::string &cols) {
  return "entry " + name + " op=" + op +
         " abi=quantize.v1 max_rows=" + maxRows +
         " element=f8E4M3FN scale=f32 input=bf16 block_rows=1 block_cols=128 "
         "rank=2 batch=1 rows=-1 cols=" +
         cols + "\n";
}

/// Two layer_fp8.v1 entries and their parts (contract §3.10; line numbers on
/// the right), in the order and with the keys the compiler writes them, each
/// part with one kernel (permutes three):
///   fmix: max_rows=4096; E=8 k=2 H=256 I=128, i32 offsets and slots, f32
///         logits, no biases, chunk=4096: fmix_route (4-5), fmix_permute
///         (6-9), fmix_quantize (cols=256; 10-11), fmix_gate_up (swiglu
///         silu, n=256 k=256; 12-13), fmix_intermediate (cols=128; 14-15),
///         fmix_down (store, n=256 k=128; 16-17), fmix_unpermute (18-19),
///         fmix (20);
///   foss: max_rows=2^31-1; E=4 k=2, H and I dynamic, i64, bf16 logits with
///         a score bias, an f32 gate-up bias and a bf16 down bias, chunk=64:
///         foss_route (21-22), foss_permute (23-26), foss_quantize (27-28),
///         foss_gate_up (swiglu gptoss; 29-30), foss_intermediate (31-32),
///         foss_down (33-34), foss_unpermute (35-36), foss (37).
/// The GEMM kernels: tile 64x128x128, 128 threads, 98304 bytes; the
/// quantize kernels 256 threads.
inline std::string layerFp8Bundle() {
  auto gemm = [](const std::string &name, const std::string &keys) {
    return "entry " + name +
           " op=moe.expert_mlp abi=grouped_matmul_fp8.v1 format=fp8_block " +
           keys + "\n";
  };
  auto gemmKernel = [](const std::string &entry, const char *symbol) {
    return fp8KernelLine(entry, symbol, 1, 2147483647, 128, 64, 128, 98304, 0);
  };
  auto simple = [](const std::string &entry, const char *symbol, int threads,
                   int smem) {
    return simpleKernelLine(entry, symbol, "moe_kernels", threads, smem);
  };
  const std::string max = "2147483647";
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('Y')) +
         "entry fmix_route op=moe.route abi=route.v1 max_rows=4096 experts=8 "
         "top_k=2 logits=f32 bias=0\n" +
         simple("fmix_route", kFmixSymbols[0], 128, 0) +
         "entry fmix_permute op=moe.permute abi=permute.v2 max_rows=4096 "
         "experts=8 top_k=2 hidden=256 offsets=i32 chunk=4096\n" +
         simple("fmix_permute", kFmixSymbols[1], 256, 0) +
         simple("fmix_permute", kFmixSymbols[2], 256, 4096) +
         simple("fmix_permute", kFmixSymbols[3], 128, 0) +
         fp8LayerQuantizeLine("fmix_quantize", "moe.quantize", "8192", "256") +
         simple("fmix_quantize", kFmixSymbols[4], 256, 0) +
         gemm("fmix_gate_up", "epilogue=swiglu activation=silu bias=none "
                              "experts=8 n=256 k=256 max_rows=8192 "
                              "offsets=i32") +
         gemmKernel("fmix_gate_up", kFmixSymbols[5]) +
         fp8LayerQuantizeLine("fmix_intermediate", "moe.expert_mlp", "8192",
                              "128") +
         simple("fmix_intermediate", kFmixSymbols[6], 256, 0) +
         gemm("fmix_down", "epilogue=store activation=none bias=none "
                           "experts=8 n=256 k=128 max_rows=8192 offsets=i32") +
         gemmKernel("fmix_down", kFmixSymbols[7]) +
         "entry fmix_unpermute op=moe.unpermute abi=unpermute.v2 "
         "max_rows=4096 hidden=256 top_k=2 slots=i32 weighted=1\n" +
         simple("fmix_unpermute", kFmixSymbols[8], 256, 0) +
         "entry fmix op=moe.layer abi=layer_fp8.v1 max_rows=4096 "
         "route=fmix_route permute=fmix_permute quantize=fmix_quantize "
         "gate_up=fmix_gate_up intermediate=fmix_intermediate down=fmix_down "
         "unpermute=fmix_unpermute\n"
         "entry foss_route op=moe.route abi=route.v1 max_rows=2147483647 "
         "experts=4 top_k=2 logits=bf16 bias=1\n" +
         simple("foss_route", kFossSymbols[0], 64, 0) +
         "entry foss_permute op=moe.permute abi=permute.v2 "
         "max_rows=2147483647 experts=4 top_k=2 hidden=-1 offsets=i64 "
         "chunk=64\n" +
         simple("foss_permute", kFossSymbols[1], 128, 0) +
         simple("foss_permute", kFossSymbols[2], 128, 0) +
         simple("foss_permute", kFossSymbols[3], 128, 0) +
         fp8LayerQuantizeLine("foss_quantize", "moe.quantize", max, "-1") +
         simple("foss_quantize", kFossSymbols[4], 256, 0) +
         gemm("foss_gate_up", "epilogue=swiglu activation=gptoss bias=f32 "
                              "experts=-1 n=-1 k=-1 max_rows=2147483647 "
                              "offsets=i64") +
         gemmKernel("foss_gate_up", kFossSymbols[5]) +
         fp8LayerQuantizeLine("foss_intermediate", "moe.expert_mlp", max,
                              "-1") +
         simple("foss_intermediate", kFossSymbols[6], 256, 0) +
         gemm("foss_down", "epilogue=store activation=none bias=bf16 "
                           "experts=4 n=-1 k=-1 max_rows=2147483647 "
                           "offsets=i64") +
         gemmKernel("foss_down", kFossSymbols[7]) +
         "entry foss_unpermute op=moe.unpermute abi=unpermute.v2 "
         "max_rows=2147483647 hidden=-1 top_k=2 slots=i64 weighted=1\n" +
         simple("foss_unpermute", kFossSymbols[8], 128, 0) +
         "entry foss op=moe.layer abi=layer_fp8.v1 max_rows=2147483647 "
         "route=foss_route permute=foss_permute quantize=foss_quantize "
         "gate_up=foss_gate_up intermediate=foss_intermediate "
         "down=foss_down unpermute=foss_unpermute\n"
         "end\n";
}

/// Symbols of the FP8-output bundle.
inline constexpr const char *kFp8OutSwapAB =
    "grouped_matmul_fp8block_16x64x128_s4_swapab_swiglu_e4m3out_off32";
inline constexpr const char *kFp8OutNormal =
    "grouped_matmul_fp8block_64x128x128_s4_swiglu_e4m3out_off32";
inline constexpr const char *kFp8OutBias =
    "grouped_matmul_fp8block_64x128x128_s4_swiglu_bias_e4m3out_off64";

/// grouped_matmul_fp8.v1 swiglu entries with out=f8E4M3FN (contract §3.7,
/// added within version 6), op=moe.expert_mlp, with the keys in the order
/// the compiler writes them (line numbers on the right):
///   qgate:  activation=silu, bias=none, E=8 N=512 K=256, i32 offsets, a
///           swap-AB kernel (tile 16x64x128, 81920 bytes) for rows 1..16
///           and a 64x128x128 one (98304 bytes) for 17 and up;     (4-6)
///   qbias:  activation=gptoss, bias=f32, all sizes dynamic, i64 offsets,
///           one 64x128x128 kernel.                                (7-8)
/// All kernels have 128 threads.
inline std::string fp8OutBundle() {
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('O')) +
         "entry qgate op=moe.expert_mlp abi=grouped_matmul_fp8.v1 "
         "format=fp8_block out=f8E4M3FN epilogue=swiglu activation=silu "
         "bias=none experts=8 n=512 k=256 max_rows=2147483647 offsets=i32\n" +
         fp8KernelLine("qgate", kFp8OutSwapAB, 1, 16, 128, 16, 64, 81920, 1) +
         fp8KernelLine("qgate", kFp8OutNormal, 17, 2147483647, 128, 64, 128,
                       98304, 0) +
         "entry qbias op=moe.expert_mlp abi=grouped_matmul_fp8.v1 "
         "format=fp8_block out=f8E4M3FN epilogue=swiglu activation=gptoss "
         "bias=f32 experts=-1 n=-1 k=-1 max_rows=2147483647 offsets=i64\n" +
         fp8KernelLine("qbias", kFp8OutBias, 1, 2147483647, 128, 64, 128, 98304,
                       0) +
         "end\n";
}

/// Symbols of the block-FP8 layer bundle whose gate-up GEMMs quantize their
/// output (no intermediate part), by layer: route, permute count, index and
/// gather, quantize, gate-up, down, combine: the order of such a layer's
/// launches.
inline constexpr int kLayerFp8OutKernels = 8;
inline constexpr const char *kQmixSymbols[kLayerFp8OutKernels] = {
    "froute_e8_k2",   "fperm_count_e8_k2", "fperm_index_e8_k2",
    "fperm_gather32", "fquant_rows_h256",  "fgemm_gate_up_mix_e4m3out",
    "fgemm_down_mix", "fcombine_k2_i32"};
inline constexpr const char *kQossSymbols[kLayerFp8OutKernels] = {
    "froute_e4_k2_bias", "fperm_count_e4_k2", "fperm_index_e4_k2",
    "fperm_gather64",    "fquant_1x128",      "fgemm_gate_up_oss_e4m3out",
    "fgemm_down_oss",    "fcombine_k2_i64"};

/// layerFp8Bundle() as the compiler writes it by default: each gate_up with
/// out=f8E4M3FN (its kernel renamed *_e4m3out), no intermediate entries, and
/// layers without an intermediate part (contract §3.10; line numbers on the
/// right): fmix_route (4-5), fmix_permute (6-9), fmix_quantize (10-11),
/// fmix_gate_up (12-13), fmix_down (14-15), fmix_unpermute (16-17), fmix
/// (18); foss_route (19-20), foss_permute (21-24), foss_quantize (25-26),
/// foss_gate_up (27-28), foss_down (29-30), foss_unpermute (31-32), foss
/// (33).
inline std::string layerFp8OutBundle() {
  std::string bytes = layerFp8Bundle();
  auto replace = [&bytes](const std::string &from, const std::string &to) {
    size_t at = bytes.find(from);
    if (at == std::string::npos)
      fail(__FILE__, __LINE__, "test bug: '" + from + "' not in the bundle");
    else
      bytes.replace(at, from.size(), to);
  };
  for (const std::string layer : {"fmix", "foss"}) {
    replace("entry " + layer +
                "_gate_up op=moe.expert_mlp "
                "abi=grouped_matmul_fp8.v1 format=fp8_block ",
            "entry " + layer +
                "_gate_up op=moe.expert_mlp "
                "abi=grouped_matmul_fp8.v1 format=fp8_block out=f8E4M3FN ");
    const std::string gemm =
        layer == "fmix" ? "fgemm_gate_up_mix" : "fgemm_gate_up_oss";
    replace(" " + gemm + " ", " " + gemm + "_e4m3out ");
    // The intermediate's entry and kernel lines.
    const std::string entry = "entry " + layer + "_intermediate ";
    size_t at = bytes.find(entry);
    size_t end = bytes.find(
        "\nentry ", bytes.find("\nkernel " + layer + "_intermediate ", at));
    if (at == std::string::npos || end == std::string::npos)
      fail(__FILE__, __LINE__, "test bug: no " + layer + "_intermediate");
    else
      bytes.erase(at, end + 1 - at);
    replace(" intermediate=" + layer + "_intermediate", "");
  }
  return bytes;
}

/// Symbols of the block-FP8 layer bundles whose permutes' gathers quantize
/// the rows (no quantize part), by layer: route, permute count, index and
/// gather, gate-up, [intermediate quantize,] down, combine: the order of
/// such a layer's launches. With gate-up GEMMs that quantize their output
/// too (no intermediate part: five steps, seven launches):
inline constexpr int kLayerFp8GatherKernels = 7;
inline constexpr const char *kGmixSymbols[kLayerFp8GatherKernels] = {
    "froute_e8_k2",        "fperm_count_e8_k2",         "fperm_index_e8_k2",
    "fperm_gather32_e4m3", "fgemm_gate_up_mix_e4m3out", "fgemm_down_mix",
    "fcombine_k2_i32"};
inline constexpr const char *kGossSymbols[kLayerFp8GatherKernels] = {
    "froute_e4_k2_bias",   "fperm_count_e4_k2",         "fperm_index_e4_k2",
    "fperm_gather64_e4m3", "fgemm_gate_up_oss_e4m3out", "fgemm_down_oss",
    "fcombine_k2_i64"};
/// With bf16 gate-up GEMMs and intermediate parts (six steps, eight
/// launches):
inline constexpr int kLayerFp8GatherInterKernels = 8;
inline constexpr const char *kGimixSymbols[kLayerFp8GatherInterKernels] = {
    "froute_e8_k2",        "fperm_count_e8_k2", "fperm_index_e8_k2",
    "fperm_gather32_e4m3", "fgemm_gate_up_mix", "fquant_inter_i128",
    "fgemm_down_mix",      "fcombine_k2_i32"};
inline constexpr const char *kGiossSymbols[kLayerFp8GatherInterKernels] = {
    "froute_e4_k2_bias",   "fperm_count_e4_k2", "fperm_index_e4_k2",
    "fperm_gather64_e4m3", "fgemm_gate_up_oss", "fquant_1x128",
    "fgemm_down_oss",      "fcombine_k2_i64"};

/// `bytes` (layerFp8Bundle() or layerFp8OutBundle()) with the permutes'
/// gathers quantizing the rows: each permute with out=f8E4M3FN (its gather
/// kernel renamed *_e4m3), no quantize entries, and layers without a
/// quantize part (contract §3.10). From layerFp8OutBundle() (the compiler's
/// default form; line numbers on the right): fmix_route (4-5), fmix_permute
/// (6-9), fmix_gate_up (10-11), fmix_down (12-13), fmix_unpermute (14-15),
/// fmix (16); foss_route (17-18), foss_permute (19-22), foss_gate_up
/// (23-24), foss_down (25-26), foss_unpermute (27-28), foss (29). From
/// layerFp8Bundle(): the same with fmix_intermediate (12-13) after
/// fmix_gate_up, foss_intermediate after foss_gate_up: fmix (18), foss (33).
inline std::string withFp8Gather(std::string bytes) {
  auto replace = [&bytes](const std::string &from, const std::string &to) {
    size_t at = bytes.find(from);
    if (at == std::string::npos)
      fail(__FILE__, __LINE__, "test bug: '" + from + "' not in the bundle");
    else
      bytes.replace(at, from.size(), to);
  };
  for (const std::string layer : {"fmix", "foss"}) {
    const std::string permute = "entry " + layer + "_permute ";
    const size_t line = bytes.find(permute);
    const size_t end =
        line == std::string::npos ? line : bytes.find('\n', line);
    if (end == std::string::npos) {
      fail(__FILE__, __LINE__, "test bug: no " + layer + "_permute");
      return bytes;
    }
    bytes.insert(end, " out=f8E4M3FN");
    const std::string gather =
        layer == "fmix" ? "fperm_gather32" : "fperm_gather64";
    replace(" " + gather + " ", " " + gather + "_e4m3 ");
    // The quantize's entry and kernel lines.
    const std::string entry = "entry " + layer + "_quantize ";
    size_t at = bytes.find(entry);
    size_t next = bytes.find(
        "\nentry ", bytes.find("\nkernel " + layer + "_quantize ", at));
    if (at == std::string::npos || next == std::string::npos)
      fail(__FILE__, __LINE__, "test bug: no " + layer + "_quantize");
    else
      bytes.erase(at, next + 1 - at);
    replace(" quantize=" + layer + "_quantize", "");
  }
  return bytes;
}

/// The five-step form (contract §3.10): permutes and gate-up GEMMs with
/// out=f8E4M3FN, layers without quantize and intermediate parts.
inline std::string layerFp8GatherBundle() {
  return withFp8Gather(layerFp8OutBundle());
}

/// Symbols of the MXFP8 bundle.
inline constexpr const char *kMxSwapAB =
    "grouped_matmul_mxfp8_16x64x128_s4_swapab_off32";
inline constexpr const char *kMxNormal =
    "grouped_matmul_mxfp8_128x128x128_s4_off32";
inline constexpr const char *kMxScale =
    "grouped_matmul_mxfp8_64x128x128_s4_rowscale_off64";
inline constexpr const char *kMxBias =
    "grouped_matmul_mxfp8_64x128x128_s4_bias_off32";
inline constexpr const char *kMxBoth =
    "grouped_matmul_mxfp8_64x128x128_s4_rowscale_bias_off32";
inline constexpr const char *kMxSwiGLU =
    "grouped_matmul_mxfp8_64x128x128_s4_swiglu_off64";
inline constexpr const char *kMxGptOss =
    "grouped_matmul_mxfp8_64x128x128_s4_swiglu_gptoss_bias_off32";

/// grouped_matmul_fp8.v1 entries with format=mxfp8 (contract §3.7, added
/// within version 6), with the keys in the order the compiler writes them
/// (line numbers on the right):
///   mgemm:    store, E=8 N=256 K=512, i32 offsets, a swap-AB kernel (tile
///             16x64x128, 128 threads, 81920 bytes) for rows 1..16 and a
///             128x128x128 one (256 threads, 147456 bytes) for 17 and up;
///             (4-6)
///   mscale:   row_scale, all sizes dynamic, i64 offsets;           (7-8)
///   mbias:    store, bias=bf16, E=4, N and K dynamic, i32 offsets; (9-10)
///   mboth:    row_scale, bias=f32, all sizes dynamic, i32 offsets; (11-12)
///   mswiglu:  swiglu, activation=silu, all sizes dynamic, i64 offsets;
///             (13-14)
///   mgptoss:  op=moe.expert_mlp, swiglu, activation=gptoss, bias=f32, E=8
///             N=512 K=96 (a multiple of 32, not of 128), i32 offsets.
///             (15-16)
/// All op=moe.grouped_matmul but mgptoss; the last five have one 64x128x128
/// kernel each (128 threads, 98304 bytes).
inline std::string mxfp8Bundle() {
  auto entry = [](const std::string &name, const std::string &op,
                  const std::string &epilogue, const std::string &activation,
                  const std::string &bias, const std::string &sizes,
                  const std::string &offsets) {
    return "entry " + name + " op=" + op +
           " abi=grouped_matmul_fp8.v1 format=mxfp8 epilogue=" + epilogue +
           " activation=" + activation + " bias=" + bias + " " + sizes +
           " max_rows=2147483647 offsets=" + offsets + "\n";
  };
  auto one = [](const std::string &name, const char *symbol) {
    return fp8KernelLine(name, symbol, 1, 2147483647, 128, 64, 128, 98304, 0);
  };
  const std::string gemm = "moe.grouped_matmul";
  const std::string dynamic = "experts=-1 n=-1 k=-1";
  return "MOEBUNDLE 6\n"
         "chip sm_90a\n" +
         imageRecord("moe_kernels", fakeCubin('X')) +
         entry("mgemm", gemm, "store", "none", "none", "experts=8 n=256 k=512",
               "i32") +
         fp8KernelLine("mgemm", kMxSwapAB, 1, 16, 128, 16, 64, 81920, 1) +
         fp8KernelLine("mgemm", kMxNormal, 17, 2147483647, 256, 128, 128,
                       147456, 0) +
         entry("mscale", gemm, "row_scale", "none", "none", dynamic, "i64") +
         one("mscale", kMxScale) +
         entry("mbias", gemm, "store", "none", "bf16", "experts=4 n=-1 k=-1",
               "i32") +
         one("mbias", kMxBias) +
         entry("mboth", gemm, "row_scale", "none", "f32", dynamic, "i32") +
         one("mboth", kMxBoth) +
         entry("mswiglu", gemm, "swiglu", "silu", "none", dynamic, "i64") +
         one("mswiglu", kMxSwiGLU) +
         entry("mgptoss", "moe.expert_mlp", "swiglu", "gptoss", "f32",
               "experts=8 n=512 k=96", "i32") +
         one("mgptoss", kMxGptOss) + "end\n";
}

/// `bytes` with every `from` replaced by `to`; a `from` it lacks is a bug
/// of the test.
inline std::string replacedAll(std::string bytes, const std::string &from,
                               const std::string &to) {
  size_t at = bytes.find(from);
  if (at == std::string::npos)
    fail(__FILE__, __LINE__, "test bug: '" + from + "' not in the bundle");
  for (; at != std::string::npos; at = bytes.find(from, at + to.size()))
    bytes.replace(at, from.size(), to);
  return bytes;
}

/// Symbols of the MXFP8 layer bundle, by layer, in launch order as
/// kFmixSymbols and kFossSymbols: the GEMM and quantize kernels renamed.
inline constexpr const char *kMmixSymbols[kLayerFp8Kernels] = {
    "froute_e8_k2",      "fperm_count_e8_k2", "fperm_index_e8_k2",
    "fperm_gather32",    "mquant_rows_h256",  "mgemm_gate_up_mix",
    "mquant_inter_i128", "mgemm_down_mix",    "fcombine_k2_i32"};
inline constexpr const char *kMossSymbols[kLayerFp8Kernels] = {
    "froute_e4_k2_bias", "fperm_count_e4_k2", "fperm_index_e4_k2",
    "fperm_gather64",    "mquant_1x32",       "mgemm_gate_up_oss",
    "mquant_1x32",       "mgemm_down_oss",    "fcombine_k2_i64"};

/// layerFp8Bundle() with MXFP8 GEMMs (contract §3.10, added within version
/// 6): its four GEMM entries format=mxfp8, its four quantize entries
/// scale=e8m0 with [1, 32] blocks, their kernels renamed (kMmixSymbols,
/// kMossSymbols); the same lines (fmix_gate_up 12, fmix 20, foss 37).
inline std::string layerMxfp8Bundle() {
  std::string bytes = layerFp8Bundle();
  bytes = replacedAll(bytes, "format=fp8_block", "format=mxfp8");
  bytes = replacedAll(bytes, "scale=f32 input=bf16 block_rows=1 block_cols=128",
                      "scale=e8m0 input=bf16 block_rows=1 block_cols=32");
  bytes = replacedAll(bytes, " fgemm_", " mgemm_");
  bytes = replacedAll(bytes, " fquant_1x128 ", " mquant_1x32 ");
  bytes = replacedAll(bytes, " fquant_", " mquant_");
  return bytes;
}

/// `bytes` with `records` (whole lines: a launch plan's size, arg, check,
/// work and launch records, docs/launch-plans.md) inserted after the line
/// that starts with `line` (an entry's last kernel line, or its entry line
/// for a layer); a `line` it lacks is a bug of the test.
inline std::string withRecordsAfter(std::string bytes, const std::string &line,
                                    const std::string &records) {
  size_t at = bytes.find("\n" + line);
  if (at == std::string::npos) {
    fail(__FILE__, __LINE__, "test bug: no line '" + line + "' in the bundle");
    return bytes;
  }
  bytes.insert(bytes.find('\n', at + 1) + 1, records);
  return bytes;
}

/// `bytes` (a `MOEBUNDLE 6` bundle) as version 7, where every entry must
/// carry a launch plan.
/// `bytes` with the checksum version 7 records on each `image` line
/// (64-bit FNV-1a of the payload, runtime/contract/Checksum.h).
inline std::string withChecksums(const std::string &bytes) {
  std::string out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string::npos)
      end = bytes.size();
    std::string line = bytes.substr(pos, end - pos);
    out += line;
    pos = end + 1;
    if (line.compare(0, 6, "image ") != 0) {
      if (end < bytes.size())
        out += '\n';
      continue;
    }
    size_t size = std::stoull(line.substr(line.rfind(' ') + 1));
    const auto *payload = reinterpret_cast<const uint8_t *>(bytes.data() + pos);
    char hex[32];
    std::snprintf(hex, sizeof(hex), " fnv1a64=%016llx\n",
                  (unsigned long long)moe::contract::fnv1a64(payload, size));
    out += hex;
    out += bytes.substr(pos, size + 1); // the payload and its '\n'
    pos += size + 1;
  }
  return out;
}

inline std::string asVersion7(std::string bytes) {
  if (bytes.compare(0, 12, "MOEBUNDLE 6\n") != 0)
    fail(__FILE__, __LINE__, "test bug: not a version 6 bundle");
  else
    bytes[10] = '7';
  return withChecksums(bytes);
}

/// Opens `bytes`; returns NULL (and leaves the status in *status) on failure.
inline moeBundle *openBundle(const std::string &bytes,
                             moeStatus *status = nullptr) {
  moeBundle *bundle = nullptr;
  moeStatus result = moeBundleOpenMemory(bytes.data(), bytes.size(), &bundle);
  if (status)
    *status = result;
  return bundle;
}

/// `bytes` (the valid bundle if not given) with the first `from` replaced by
/// `to`; a `from` it lacks is a bug of the test.
inline std::string replaced(const std::string &from, const std::string &to,
                            std::string bytes = validBundle()) {
  size_t at = bytes.find(from);
  if (at == std::string::npos) {
    fail(__FILE__, __LINE__, "test bug: '" + from + "' not in the bundle");
    return "";
  }
  return bytes.replace(at, from.size(), to);
}

/// Opens `bytes`, which the test expects the reader to accept: one check that
/// it opens. NULL if not, its message recorded with the caller's line.
inline moeBundle *openValid(const std::string &bytes, const char *file,
                            int line) {
  moeStatus status = MOE_STATUS_INVALID_ARGUMENT;
  moeBundle *bundle = openBundle(bytes, &status);
  ++checksMade;
  if (status != MOE_STATUS_SUCCESS || !bundle)
    fail(file, line,
         std::string("bundle not opened: ") + moeStatusName(status) + " (" +
             moeLastErrorMessage() + ")");
  return bundle;
}
#define OPEN_VALID(bytes) moe_test::openValid(bytes, __FILE__, __LINE__)

/// Checks that the reader refuses `bytes` (case `name`) with `status` and a
/// message containing `message` (two checks), returning no bundle (a third).
inline void checkRefused(const char *name, const std::string &bytes,
                         moeStatus status, const std::string &message) {
  checksMade += 2; // the status and the message
  moeStatus got = MOE_STATUS_SUCCESS;
  moeBundle *bundle = openBundle(bytes, &got);
  if (got != status)
    fail(__FILE__, __LINE__,
         std::string(name) + ": status " + moeStatusName(got) + ", expected " +
             moeStatusName(status) + " (" + moeLastErrorMessage() + ")");
  else if (!std::strstr(moeLastErrorMessage(), message.c_str()))
    fail(__FILE__, __LINE__,
         std::string(name) + ": message '" + moeLastErrorMessage() +
             "' lacks '" + message + "'");
  CHECK(bundle == nullptr);
  moeBundleClose(bundle);
}

} // namespace moe_test

#endif // MOE_RUNTIME_TEST_TESTBUNDLES_H
