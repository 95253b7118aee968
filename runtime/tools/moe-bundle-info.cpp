//===- moe-bundle-info.cpp - print what a .moebundle holds ----------------===//
//
// Usage: moe-bundle-info <file>
//
// Parses and validates the bundle with libmoe_runtime (no GPU needed) and
// prints one line for the bundle, then one per entry, each followed by its
// kernels, in file order. The format is stable, for FileCheck:
//
//   bundle version=6 chip=sm_90a images=1 entries=4
//   entry gate_up op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store
//     experts=8 n=28672 k=4096 max_rows=2147483647 offsets=i32 bias=none
//     activation=none                                         (one line)
//     kernel grouped_matmul_bf16_64x256x64_s4_off32 rows=[17,2147483647]
//     tile=64x256x64 stages=4 threads=128 smem=163840 swap_ab=0
//     image=moe_kernels (123456 bytes)                       (one line)
//   entry gemm op=moe.grouped_matmul abi=grouped_matmul_fp8.v1
//     format=fp8_block epilogue=store experts=8 n=256 k=512
//     max_rows=2147483647 offsets=i32 bias=none activation=none (one line)
//     kernel grouped_matmul_fp8block_128x128x128_s4_off32
//     rows=[1,2147483647] tile=128x128x128 stages=4 threads=256
//     smem=147456 swap_ab=0 image=moe_kernels (123456 bytes)  (one line)
//   entry router op=moe.route abi=route.v1 max_rows=2147483647 experts=256
//     top_k=8 logits=f32 bias=1                              (one line)
//     kernel moe_route_sigmoid_topk_e256_k8_f32_bias threads=128 smem=0
//     image=moe_kernels                                      (one line)
//   entry combine op=moe.unpermute abi=unpermute.v2 max_rows=2147483647
//     hidden=4096 top_k=2 slots=i64 weighted=1               (one line)
//     kernel moe_unpermute_h4096_k2_i64_weighted threads=256 smem=0
//     image=moe_kernels                                      (one line)
//   entry perm op=moe.permute abi=permute.v2 max_rows=2147483647
//     experts=128 top_k=8 hidden=2048 offsets=i64 chunk=4096 (one line)
//     kernel moe_permute_count_e128_k8 threads=1024 smem=0
//     image=moe_kernels                                      (one line)
//     kernel moe_permute_index_e128_k8_off64 threads=1024 smem=17408
//     image=moe_kernels                                      (one line)
//     kernel moe_permute_gather_off64 threads=128 smem=0
//     image=moe_kernels                                      (one line)
//   entry mixtral op=moe.layer abi=layer.v1 max_rows=2147483647
//     route=mixtral_route permute=mixtral_permute gate_up=mixtral_gate_up
//     down=mixtral_down unpermute=mixtral_unpermute          (one line)
//   entry ds_gate_up op=moe.expert_mlp abi=grouped_matmul_fp8.v1
//     format=fp8_block out=f8E4M3FN epilogue=swiglu experts=256 n=4096
//     k=7168 max_rows=2147483647 offsets=i32 bias=none activation=silu
//                                                            (one line)
//   entry ds_permute op=moe.permute abi=permute.v2 max_rows=2147483647
//     experts=256 top_k=8 hidden=7168 offsets=i32 chunk=4096 out=f8E4M3FN
//                                                            (one line)
//   entry ds op=moe.layer abi=layer_fp8.v1 max_rows=2147483647
//     route=ds_route permute=ds_permute gate_up=ds_gate_up down=ds_down
//     unpermute=ds_unpermute (one line; quantize=<name> after permute and
//     intermediate=<name> after gate_up when the layer has those parts)
//   entry act op=moe.quantize abi=quantize.v1 max_rows=2147483647
//     element=f8E4M3FN scale=f32 input=bf16 block_rows=1 block_cols=128
//     rank=2 batch=1 rows=-1 cols=7168                       (one line)
//     kernel moe_quantize_bf16_e4m3_f32_1x128 threads=256 smem=0
//     image=moe_kernels                                      (one line)
//
//   entry layer_stage0 op=func.func abi=program.v1 max_rows=2147483647
//     stage_of=layer stage=0 exchange=moe.dispatch ranks=2
//     exchange_args=v1,v2 exchange_results=x0_0,x0_1,x0_2
//     function_args=arg0,arg1 function_results=result0      (one line; a
//     program.v1 entry that is no stage ends after max_rows)
//
// Entries print their ABI's keys in the order of the bundle line (contract
// §2; a grouped_matmul_fp8.v1 entry's `format` right after its abi, then
// its `out` where the bundle line has one; a permute.v2 entry's `out`, where
// the bundle line has one, last); the kernels of route.v1,
// unpermute.v2, permute.v2 and quantize.v1 entries have no rows range or
// tile; layer.v1 and layer_fp8.v1 entries have no kernels. planned.v1 and
// program.v1 entries (known by their plan) print op, abi and max_rows, then
// their signature, then their kernels (a program has none):
//
//   entry f op=func.func abi=program.v1 max_rows=2147483647
//     size T min=0 max=9223372036854775807
//     arg tokens bf16 in align=16 dims=T,4096
//     arg out bf16 out align=16 dims=T,4096
//
// On error prints "moe-bundle-info: error: <message>" and exits 1.
//
//===----------------------------------------------------------------------===//

#include "moe_runtime.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace {

int failWith(const char *message) {
  std::fprintf(stderr, "moe-bundle-info: error: %s\n", message);
  return 1;
}

int failWithStatus() { return failWith(moeLastErrorMessage()); }

/// Prints `entry`'s sizes and arguments (its plan's signature); non-zero
/// when the runtime refuses a query (its message is the runtime's last) or
/// reports a dtype or role this tool does not know (its message printed).
int printSignature(const moeBundle *bundle, const char *entry) {
  static const char *const dtypes[] = {"bf16", "f32",  "i32", "i64",
                                       "e4m3", "e5m2", "e8m0"};
  static const char *const roles[] = {"in", "out", "opt", "donated"};
  moeSignature signature;
  if (moeEntryGetSignature(bundle, entry, &signature) != MOE_STATUS_SUCCESS)
    return 1;
  for (int32_t i = 0; i < signature.num_sizes; ++i) {
    moeSizeInfo size;
    if (moeEntryGetSize(bundle, entry, i, &size) != MOE_STATUS_SUCCESS)
      return 1;
    std::printf("  size %s min=%s max=%s\n", size.name, size.min, size.max);
  }
  for (int32_t i = 0; i < signature.num_args; ++i) {
    moeArgInfo arg;
    if (moeEntryGetArg(bundle, entry, i, &arg) != MOE_STATUS_SUCCESS)
      return 1;
    if (arg.dtype < 0 || arg.dtype > 6 || arg.role < 0 || arg.role > 3) {
      std::fprintf(stderr,
                   "moe-bundle-info: error: %s: argument %s has dtype %d and "
                   "role %d, which this tool does not know\n",
                   entry, arg.name, int(arg.dtype), int(arg.role));
      return 2;
    }
    std::printf("  arg %s %s %s align=%" PRId64 " dims=%s\n", arg.name,
                dtypes[arg.dtype], roles[arg.role], arg.align, arg.dims);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 2 &&
      (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::printf("usage: moe-bundle-info <file>\n"
                "Prints the entries and kernels of a .moebundle.\n");
    return 0;
  }
  if (argc != 2)
    return failWith("expected one argument, the bundle file (usage: "
                    "moe-bundle-info <file>)");
  moeBundle *bundle = nullptr;
  if (moeBundleOpenFile(argv[1], &bundle) != MOE_STATUS_SUCCESS)
    return failWithStatus();
  moeBundleInfo info;
  if (moeBundleGetInfo(bundle, &info) != MOE_STATUS_SUCCESS)
    return failWithStatus();
  std::printf("bundle version=%d chip=%s images=%d entries=%d\n",
              int(info.version), info.chip, int(info.num_images),
              int(info.num_entries));
  for (int32_t e = 0; e < info.num_entries; ++e) {
    moeEntryInfo entry;
    if (moeBundleGetEntry(bundle, e, &entry) != MOE_STATUS_SUCCESS)
      return failWithStatus();
    const bool route = !std::strcmp(entry.abi, MOE_ABI_ROUTE);
    const bool unpermute = !std::strcmp(entry.abi, MOE_ABI_UNPERMUTE);
    const bool permute = !std::strcmp(entry.abi, MOE_ABI_PERMUTE);
    const bool quantize = !std::strcmp(entry.abi, MOE_ABI_QUANTIZE);
    // planned.v1 and program.v1 entries are known by their plan: their
    // signature follows their line.
    const bool planOnly = !std::strcmp(entry.abi, MOE_ABI_PLANNED) ||
                          !std::strcmp(entry.abi, MOE_ABI_PROGRAM);
    // A GEMM's output, a permute's rows, are bf16 unless its bundle line
    // says out=f8E4M3FN.
    const bool fp8Out = !std::strcmp(entry.out, MOE_OUT_E4M3);
    if (quantize)
      std::printf(
          "entry %s op=%s abi=%s max_rows=%" PRId64
          " element=%s scale=%s input=%s block_rows=%d block_cols=%d "
          "rank=%d batch=%" PRId64 " rows=%" PRId64 " cols=%" PRId64 "\n",
          entry.name, entry.op, entry.abi, entry.max_rows, entry.element,
          entry.scale, entry.input_bits == 16 ? "bf16" : "f32",
          int(entry.block_rows), int(entry.block_cols), int(entry.rank),
          entry.batch, entry.rows, entry.cols);
    else if (route)
      std::printf("entry %s op=%s abi=%s max_rows=%" PRId64 " experts=%" PRId64
                  " top_k=%d logits=%s bias=%d\n",
                  entry.name, entry.op, entry.abi, entry.max_rows,
                  entry.experts, int(entry.top_k),
                  entry.logits_bits == 16 ? "bf16" : "f32", int(entry.bias));
    else if (unpermute)
      std::printf("entry %s op=%s abi=%s max_rows=%" PRId64 " hidden=%" PRId64
                  " top_k=%d slots=i%d weighted=%d\n",
                  entry.name, entry.op, entry.abi, entry.max_rows, entry.hidden,
                  int(entry.top_k), int(entry.slots_bits), int(entry.weighted));
    else if (permute)
      std::printf("entry %s op=%s abi=%s max_rows=%" PRId64 " experts=%" PRId64
                  " top_k=%d hidden=%" PRId64 " offsets=i%d chunk=%d%s%s\n",
                  entry.name, entry.op, entry.abi, entry.max_rows,
                  entry.experts, int(entry.top_k), entry.hidden,
                  int(entry.offsets_bits), int(entry.chunk),
                  fp8Out ? " out=" : "", fp8Out ? entry.out : "");
    else if (!std::strcmp(entry.abi, MOE_ABI_LAYER))
      std::printf("entry %s op=%s abi=%s max_rows=%" PRId64
                  "%s%s permute=%s gate_up=%s down=%s unpermute=%s\n",
                  entry.name, entry.op, entry.abi, entry.max_rows,
                  *entry.route ? " route=" : "", entry.route, entry.permute,
                  entry.gate_up, entry.down, entry.unpermute);
    else if (!std::strcmp(entry.abi, MOE_ABI_LAYER_FP8))
      std::printf("entry %s op=%s abi=%s max_rows=%" PRId64
                  "%s%s permute=%s%s%s gate_up=%s%s%s down=%s "
                  "unpermute=%s\n",
                  entry.name, entry.op, entry.abi, entry.max_rows,
                  *entry.route ? " route=" : "", entry.route, entry.permute,
                  *entry.quantize ? " quantize=" : "", entry.quantize,
                  entry.gate_up, *entry.intermediate ? " intermediate=" : "",
                  entry.intermediate, entry.down, entry.unpermute);
    else if (planOnly) {
      std::printf("entry %s op=%s abi=%s max_rows=%" PRId64, entry.name,
                  entry.op, entry.abi, entry.max_rows);
      // A stage of a split function: its keys as the bundle line has them.
      moeStageInfo stage;
      if (moeBundleGetStage(bundle, e, &stage) == MOE_STATUS_SUCCESS) {
        std::printf(" stage_of=%s stage=%d", stage.function, stage.stage);
        if (*stage.exchange)
          std::printf(" exchange=%s ranks=%d exchange_args=%s "
                      "exchange_results=%s",
                      stage.exchange, stage.ranks, stage.exchange_args,
                      stage.exchange_results);
        std::printf(" function_args=%s function_results=%s",
                    stage.function_args, stage.function_results);
      }
      std::printf("\n");
    } else
      std::printf("entry %s op=%s abi=%s%s%s%s%s epilogue=%s experts=%" PRId64
                  " n=%" PRId64 " k=%" PRId64 " max_rows=%" PRId64
                  " offsets=i%d bias=%s activation=%s\n",
                  entry.name, entry.op, entry.abi,
                  *entry.format ? " format=" : "", entry.format,
                  fp8Out ? " out=" : "", fp8Out ? entry.out : "",
                  entry.epilogue, entry.experts, entry.n, entry.k,
                  entry.max_rows, int(entry.offsets_bits),
                  entry.bias_bits == 32   ? "f32"
                  : entry.bias_bits == 16 ? "bf16"
                                          : "none",
                  entry.activation);
    if (planOnly)
      if (int failed = printSignature(bundle, entry.name))
        return failed == 1 ? failWithStatus() : 1;
    for (int32_t k = 0; k < entry.num_kernels; ++k) {
      moeKernelInfo kernel;
      if (moeBundleGetKernel(bundle, e, k, &kernel) != MOE_STATUS_SUCCESS)
        return failWithStatus();
      if (route || unpermute || permute || quantize || planOnly) {
        std::printf("  kernel %s threads=%d smem=%d image=%s\n", kernel.symbol,
                    int(kernel.threads), int(kernel.smem), kernel.image);
        continue;
      }
      std::printf("  kernel %s rows=[%" PRId64 ",%" PRId64
                  "] tile=%dx%dx%d stages=%d threads=%d smem=%d swap_ab=%d "
                  "image=%s (%" PRIu64 " bytes)\n",
                  kernel.symbol, kernel.rows_min, kernel.rows_max,
                  int(kernel.tile_m), int(kernel.tile_n), int(kernel.tile_k),
                  int(kernel.stages), int(kernel.threads), int(kernel.smem),
                  int(kernel.swap_ab), kernel.image, kernel.image_size);
    }
  }
  moeBundleClose(bundle);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
