/*===- c_api_test.c - moe_runtime.h compiled as C99 -----------------------===*\
|*                                                                            *|
|* Usage: moe-runtime-c-api-test <bundle> [<route bundle> [<layer bundle>     *|
|* [<fp8 bundle> [<fp8 layer bundle>]]]]: version-6 bundles without launch    *|
|* plans (runtime/test/Inputs). Opens and walks each (their entries list,     *|
|* the plan queries and moeLaunch refuse them: "no launch plan"), checks      *|
|* the parts of the fp8 layers, then runs the plan queries, moeWorkspaceBytes *|
|* and moeLaunch's argument checks on a version-7 bundle in memory, none of   *|
|* which needs a GPU. Exits 1 on failure.                                     *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "moe_runtime.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "FAIL: %s (last error: %s)\n", what, moeLastErrorMessage());
    ++failures;
  }
}

/* `status` is INVALID_ARGUMENT and the last message contains `text`. */
static void checkRefused(moeStatus status, const char *text, const char *what) {
  check(status == MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(), text) != NULL,
        what);
}

/* The plan queries of entry `name`: a version-7 bundle's entries have a
   plan, a version-6 bundle's here none (every call that needs it refuses,
   before the driver). */
static void checkPlanOf(moeBundle *bundle, const char *name, int version) {
  moeSignature signature;
  moeLaunchArgs args;
  uint64_t bytes = 0;
  moeStatus status = moeEntryGetSignature(bundle, name, &signature);
  if (version >= 7) {
    check(status == MOE_STATUS_SUCCESS && signature.num_args >= 1 &&
              signature.num_steps >= 1,
          "a version 7 entry's signature");
    return;
  }
  checkRefused(status, "the entry has no launch plan",
               "moeEntryGetSignature of a version 6 entry");
  memset(&args, 0, sizeof(args));
  checkRefused(moeLaunch(bundle, name, &args, NULL),
               "the entry has no launch plan (a version-6 bundle: recompile "
               "it with moe-translate)",
               "moeLaunch of a version 6 entry");
  checkRefused(moeWorkspaceBytes(bundle, name, NULL, 0, &bytes),
               "no launch plan", "moeWorkspaceBytes of a version 6 entry");
}

/* Walks every entry and kernel of `bundle`. */
static void walk(moeBundle *bundle) {
  moeBundleInfo info;
  int32_t e, k;
  check(moeBundleGetInfo(bundle, &info) == MOE_STATUS_SUCCESS,
        "moeBundleGetInfo");
  /* Version 6 (plans optional; those of runtime/test/Inputs have none) or
     7 (every entry has one). */
  check(info.version == 6 || info.version == MOE_BUNDLE_VERSION, "version");
  for (e = 0; e < info.num_entries; ++e) {
    moeEntryInfo entry;
    int gemm, fp8, layer, fp8Layer, permute, quantize;
    check(moeBundleGetEntry(bundle, e, &entry) == MOE_STATUS_SUCCESS,
          "moeBundleGetEntry");
    fp8 = strcmp(entry.abi, MOE_ABI_GROUPED_MATMUL_FP8) == 0;
    gemm = fp8 || strcmp(entry.abi, MOE_ABI_GROUPED_MATMUL) == 0;
    /* format: "fp8_block" or "mxfp8" for FP8 entries, else "" (never
       NULL). */
    check(entry.format &&
              (fp8 ? strcmp(entry.format, MOE_FORMAT_FP8_BLOCK) == 0 ||
                         strcmp(entry.format, MOE_FORMAT_MXFP8) == 0
                   : entry.format[0] == '\0'),
          "format");
    fp8Layer = strcmp(entry.abi, MOE_ABI_LAYER_FP8) == 0;
    layer = fp8Layer || strcmp(entry.abi, MOE_ABI_LAYER) == 0;
    permute = strcmp(entry.abi, MOE_ABI_PERMUTE) == 0;
    quantize = strcmp(entry.abi, MOE_ABI_QUANTIZE) == 0;
    /* quantize and intermediate: the parts of layer_fp8.v1 layers only, the
       quantize exactly when the permute writes bf16 rows, the intermediate
       exactly when the gate_up writes bf16. */
    check(entry.quantize && entry.intermediate &&
              (fp8Layer ||
               (entry.quantize[0] == '\0' && entry.intermediate[0] == '\0')),
          "quantize and intermediate");
    if (fp8Layer) {
      moeEntryInfo gateUp, perm;
      int32_t index = -1;
      check(moeBundleFindEntry(bundle, entry.gate_up, &index) ==
                    MOE_STATUS_SUCCESS &&
                moeBundleGetEntry(bundle, index, &gateUp) ==
                    MOE_STATUS_SUCCESS &&
                (entry.intermediate[0] == '\0') ==
                    (strcmp(gateUp.out, MOE_OUT_E4M3) == 0),
            "the intermediate part goes with the gate_up's out");
      check(moeBundleFindEntry(bundle, entry.permute, &index) ==
                    MOE_STATUS_SUCCESS &&
                moeBundleGetEntry(bundle, index, &perm) == MOE_STATUS_SUCCESS &&
                (entry.quantize[0] == '\0') ==
                    (strcmp(perm.out, MOE_OUT_E4M3) == 0),
            "the quantize part goes with the permute's out");
    }
    /* out: "bf16" or "f8E4M3FN" for grouped matmuls and permutes, else "". */
    check(entry.out &&
              (gemm || permute ? strcmp(entry.out, MOE_OUT_BF16) == 0 ||
                                     ((fp8 || permute) &&
                                      strcmp(entry.out, MOE_OUT_E4M3) == 0)
                               : entry.out[0] == '\0'),
          "out");
    /* permute.v2: count, index and gather kernels, and a chunk. */
    check(permute ? entry.num_kernels == 3 && entry.chunk >= 32 &&
                        entry.chunk <= 65536 && entry.chunk % 32 == 0
                  : entry.chunk == 0,
          "permute kernels and chunk");
    check(gemm || layer || quantize || strcmp(entry.abi, MOE_ABI_ROUTE) == 0 ||
              strcmp(entry.abi, MOE_ABI_UNPERMUTE) == 0 ||
              strcmp(entry.abi, MOE_ABI_PERMUTE) == 0,
          "abi");
    check(entry.activation && entry.route && entry.permute && entry.gate_up &&
              entry.down && entry.unpermute,
          "no NULL strings");
    if (gemm)
      check((strcmp(entry.epilogue, MOE_EPILOGUE_STORE) == 0 ||
             strcmp(entry.epilogue, MOE_EPILOGUE_SWIGLU) == 0 ||
             strcmp(entry.epilogue, MOE_EPILOGUE_ROW_SCALE) == 0) &&
                (entry.bias_bits == 0 || entry.bias_bits == 16 ||
                 entry.bias_bits == 32) &&
                entry.activation[0] != '\0',
            "epilogue, bias and activation");
    else if (layer)
      check(entry.num_kernels == 0 && entry.route[0] && entry.permute[0] &&
                entry.gate_up[0] && entry.down[0] && entry.unpermute[0],
            "layer entry");
    else if (quantize)
      check(entry.num_kernels == 1 && entry.element[0] && entry.scale[0] &&
                entry.epilogue[0] == '\0',
            "quantize entry");
    else
      check(entry.epilogue && entry.epilogue[0] == '\0' &&
                entry.activation[0] == '\0' && entry.route[0] == '\0' &&
                entry.num_kernels >= 1 && entry.top_k >= 1,
            "route/unpermute/permute entry");
    checkPlanOf(bundle, entry.name, info.version);
    for (k = 0; k < entry.num_kernels; ++k) {
      moeKernelInfo kernel;
      check(moeBundleGetKernel(bundle, e, k, &kernel) == MOE_STATUS_SUCCESS,
            "moeBundleGetKernel");
      check(gemm ? kernel.rows_min >= 1 && kernel.rows_min <= kernel.rows_max
                 : kernel.rows_min == 0 && kernel.tile_m == 0,
            "rows range");
    }
  }
}

/* Opens and walks the bundle at `path`; NULL, noted as `what`, if not. */
static moeBundle *openAndWalk(const char *path, const char *what) {
  moeBundle *bundle = NULL;
  check(moeBundleOpenFile(path, &bundle) == MOE_STATUS_SUCCESS, what);
  if (bundle)
    walk(bundle);
  return bundle;
}

/* The parts of the block-FP8 layers of the fifth bundle: dsv3 with a
   quantize and an intermediate part, dsq without an intermediate part (its
   gate_up writes e4m3), dsf without either (its permute writes e4m3 rows
   too). */
static void checkLayerFp8Bundle(const char *path) {
  moeBundle *bundle = openAndWalk(path, "moeBundleOpenFile (fp8 layer bundle)");
  moeEntryInfo entry;
  int32_t index = -1;
  if (!bundle)
    return;
  check(moeBundleFindEntry(bundle, "dsv3", &index) == MOE_STATUS_SUCCESS &&
            moeBundleGetEntry(bundle, index, &entry) == MOE_STATUS_SUCCESS &&
            strcmp(entry.abi, MOE_ABI_LAYER_FP8) == 0 &&
            strcmp(entry.quantize, "dsv3_quantize") == 0 &&
            strcmp(entry.intermediate, "dsv3_intermediate") == 0,
        "the fp8 layer's parts");
  check(moeBundleFindEntry(bundle, "dsq", &index) == MOE_STATUS_SUCCESS &&
            moeBundleGetEntry(bundle, index, &entry) == MOE_STATUS_SUCCESS &&
            strcmp(entry.gate_up, "dsq_gate_up") == 0 &&
            strcmp(entry.intermediate, "") == 0,
        "the six-step fp8 layer's parts");
  check(moeBundleFindEntry(bundle, "dsf", &index) == MOE_STATUS_SUCCESS &&
            moeBundleGetEntry(bundle, index, &entry) == MOE_STATUS_SUCCESS &&
            strcmp(entry.permute, "dsf_permute") == 0 &&
            strcmp(entry.quantize, "") == 0 &&
            strcmp(entry.intermediate, "") == 0,
        "the five-step fp8 layer's parts");
  check(moeBundleFindEntry(bundle, "dsf_permute", &index) ==
                MOE_STATUS_SUCCESS &&
            moeBundleGetEntry(bundle, index, &entry) == MOE_STATUS_SUCCESS &&
            strcmp(entry.out, MOE_OUT_E4M3) == 0,
        "dsf_permute's out");
  moeBundleClose(bundle);
}

/* An MXFP8 entry (format=mxfp8) of a version-6 bundle, from memory. */
static void checkMxfp8(void) {
  static const char bytes[] =
      "MOEBUNDLE 6\nchip sm_90a\nimage moe_kernels 4\n\x7f"
      "ELF\n"
      "entry mx op=moe.grouped_matmul abi=grouped_matmul_fp8.v1 format=mxfp8 "
      "epilogue=store activation=none bias=none experts=8 n=256 k=-1 "
      "max_rows=2147483647 offsets=i32\n"
      "kernel mx grouped_matmul_mxfp8 image=moe_kernels rows_min=1 "
      "rows_max=2147483647 threads=128 smem=98304 tile_m=64 tile_n=128 "
      "tile_k=128 stages=4 swap_ab=0\n"
      "end\n";
  moeBundle *bundle = NULL;
  moeEntryInfo entry;
  check(moeBundleOpenMemory(bytes, sizeof(bytes) - 1, &bundle) ==
            MOE_STATUS_SUCCESS,
        "moeBundleOpenMemory (mxfp8 entry)");
  if (!bundle)
    return;
  walk(bundle);
  check(moeBundleGetEntry(bundle, 0, &entry) == MOE_STATUS_SUCCESS &&
            strcmp(entry.format, MOE_FORMAT_MXFP8) == 0 &&
            strcmp(entry.format, "mxfp8") == 0 &&
            strcmp(entry.out, MOE_OUT_BF16) == 0,
        "an mxfp8 entry's format");
  moeBundleClose(bundle);
}

/* A version-7 bundle: a route, and a permute (E = 4, k = 2, H = 64, chunks
   of 32 ids) whose plan has two workspace slices, the sources (T*k i32,
   256-byte aligned) and the counts (a chunk's 4 i32 per chunk, 16-byte
   aligned), and a count step only for more than one chunk. */
static const char kPlanBundle[] =
    "MOEBUNDLE 7\nchip sm_90a\nimage moe_kernels 4 fnv1a64=28b265382f1249f3\n"
    "\x7f"
    "ELF\n"
    "entry router op=moe.route abi=route.v1 max_rows=2147483647 experts=8 "
    "top_k=2 logits=f32 bias=0\n"
    "kernel router moe_route_e8_k2 image=moe_kernels threads=128 smem=0\n"
    "size router T min=1 max=2147483647\n"
    "arg router logits f32 in align=4 dims=T,8\n"
    "arg router ids i32 out align=4 dims=T,2\n"
    "arg router weights f32 out align=4 dims=T,2\n"
    "launch router 0 grid=min(ceildiv(T,4),65535) when=1 "
    "params=mem:logits[T,8];mem:ids[T,2];mem:weights[T,2]\n"
    "entry perm op=moe.permute abi=permute.v2 max_rows=2147483647 experts=4 "
    "top_k=2 hidden=64 offsets=i32 chunk=32\n"
    "kernel perm moe_permute_count_e4_k2 image=moe_kernels threads=256 "
    "smem=0\n"
    "kernel perm moe_permute_index_e4_k2_off32 image=moe_kernels threads=256 "
    "smem=0\n"
    "kernel perm moe_permute_gather_off32 image=moe_kernels threads=128 "
    "smem=0\n"
    "size perm T min=1 max=1073741823\n"
    "arg perm tokens bf16 in align=16 dims=T,64\n"
    "arg perm ids i32 in align=4 dims=T,2\n"
    "arg perm rows bf16 out align=16 dims=T*2,64\n"
    "arg perm offsets i32 out align=4 dims=5\n"
    "arg perm slots i32 out align=4 dims=T,2\n"
    "work perm sources bytes=T*2*4 align=256\n"
    "work perm counts bytes=ceildiv(T*2,32)*4*4 align=16\n"
    "launch perm 0 grid=ceildiv(T*2,32) when=ceildiv(T*2,32)>1 "
    "params=mem:ids[T,2];mem:@counts[ceildiv(T*2,32)*4]\n"
    "launch perm 1 grid=ceildiv(T*2,32) when=1 params=mem:ids[T,2];"
    "mem:@counts[ceildiv(T*2,32)*4];mem:offsets[5];mem:slots[T,2];"
    "mem:@sources[T*2]\n"
    "launch perm 2 grid=min(ceildiv(T*2,4),65535) when=1 "
    "params=mem:tokens[T,64];mem:@sources[T*2];mem:offsets[5];"
    "mem:rows[T*2,64]\n"
    "end\n";

/* The signature queries, moeWorkspaceBytes and moeLaunch's argument checks
   on kPlanBundle: none needs a GPU. */
static void checkPlans(void) {
  moeBundle *bundle = NULL;
  moeBundleInfo info;
  moeSignature signature;
  moeSizeInfo size;
  moeArgInfo arg;
  moeLaunchArgs args;
  moeStatus status;
  int64_t tokens = 100, dims[MOE_MAX_RANK];
  uint64_t bytes = 0;
  uint64_t pointers[5] = {0x10000000000ull, 0x20000000000ull, 0x30000000000ull,
                          0x40000000000ull, 0x50000000000ull};
  check(moeBundleOpenMemory(kPlanBundle, sizeof(kPlanBundle) - 1, &bundle) ==
            MOE_STATUS_SUCCESS,
        "moeBundleOpenMemory (version 7 bundle)");
  if (!bundle)
    return;
  check(moeBundleGetInfo(bundle, &info) == MOE_STATUS_SUCCESS &&
            info.version == 7 && info.num_entries == 2,
        "a version 7 bundle");
  walk(bundle);
  check(moeEntryGetSignature(bundle, "perm", &signature) ==
                MOE_STATUS_SUCCESS &&
            signature.num_sizes == 1 && signature.num_args == 5 &&
            signature.num_checks == 0 && signature.num_slices == 2 &&
            signature.num_steps == 3,
        "moeEntryGetSignature");
  check(moeEntryGetSize(bundle, "perm", 0, &size) == MOE_STATUS_SUCCESS &&
            strcmp(size.name, "T") == 0 && strcmp(size.min, "1") == 0 &&
            strcmp(size.max, "1073741823") == 0,
        "moeEntryGetSize");
  check(moeEntryGetArg(bundle, "perm", 2, &arg) == MOE_STATUS_SUCCESS &&
            strcmp(arg.name, "rows") == 0 && arg.dtype == MOE_DTYPE_BF16 &&
            arg.role == MOE_ARG_OUT && arg.align == 16 && arg.rank == 2 &&
            strcmp(arg.dims, "T*2,64") == 0,
        "moeEntryGetArg");
  check(moeEntryGetArg(bundle, "perm", 1, &arg) == MOE_STATUS_SUCCESS &&
            arg.dtype == MOE_DTYPE_I32 && arg.role == MOE_ARG_IN &&
            arg.align == 4,
        "moeEntryGetArg (ids)");
  check(moeEntryArgShape(bundle, "perm", 2, &tokens, 1, dims) ==
                MOE_STATUS_SUCCESS &&
            dims[0] == 200 && dims[1] == 64,
        "moeEntryArgShape");
  checkRefused(moeEntryGetArg(bundle, "perm", 5, &arg),
               "moeEntryGetArg(perm): argument 5 of the 5 the entry has",
               "moeEntryGetArg out of range");
  check(moeEntryGetSignature(bundle, "nope", &signature) ==
            MOE_STATUS_NOT_FOUND,
        "moeEntryGetSignature of a missing entry");
  /* T = 100: sources [0, 800), counts (7 chunks) [800, 912); T = 5:
     sources [0, 40), counts [48, 64). */
  check(moeWorkspaceBytes(bundle, "perm", &tokens, 1, &bytes) ==
                MOE_STATUS_SUCCESS &&
            bytes == 912,
        "moeWorkspaceBytes");
  tokens = 5;
  check(moeWorkspaceBytes(bundle, "perm", &tokens, 1, &bytes) ==
                MOE_STATUS_SUCCESS &&
            bytes == 64,
        "moeWorkspaceBytes (T = 5)");
  check(moeWorkspaceBytes(bundle, "router", &tokens, 1, &bytes) ==
                MOE_STATUS_SUCCESS &&
            bytes == 0,
        "moeWorkspaceBytes without slices");
  tokens = 0;
  checkRefused(moeWorkspaceBytes(bundle, "perm", &tokens, 1, &bytes),
               "moeWorkspaceBytes(perm): T = 0 is outside [1, 1073741823]",
               "moeWorkspaceBytes with T = 0");
  /* moeLaunch's argument checks come before the driver. */
  tokens = 100;
  memset(&args, 0, sizeof(args));
  args.sizes = &tokens;
  args.num_sizes = 1;
  args.num_args = 5;
  args.args = pointers;
  args.workspace = 0x60000000000ull;
  args.workspace_bytes = 911;
  checkRefused(moeLaunch(bundle, "perm", &args, NULL),
               "moeLaunch(perm): workspace of 911 bytes is smaller than the "
               "912 the call needs",
               "moeLaunch with a small workspace");
  args.workspace_bytes = 912;
  args.workspace = 0x60000000010ull;
  checkRefused(moeLaunch(bundle, "perm", &args, NULL),
               "is not 256-byte aligned", "moeLaunch with a 16-byte workspace");
  args.workspace = 0x60000000000ull;
  pointers[0] = 0;
  checkRefused(moeLaunch(bundle, "perm", &args, NULL),
               "moeLaunch(perm): tokens pointer is NULL",
               "moeLaunch names the pointer");
  pointers[0] = 0x10000000000ull;
  args.num_args = 4;
  checkRefused(moeLaunch(bundle, "perm", &args, NULL),
               "1 sizes and 4 arguments given, the entry takes 1 and 5",
               "moeLaunch with too few arguments");
  args.num_args = 5;
  tokens = 1073741824;
  checkRefused(moeLaunch(bundle, "perm", &args, NULL),
               "T = 1073741824 is outside [1, 1073741823]",
               "moeLaunch with too many tokens");
  tokens = 100;
  check(moeLaunch(NULL, "perm", &args, NULL) == MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(), "moeLaunch: bundle is NULL"),
        "moeLaunch without a bundle");
  /* Past the argument checks: the driver's turn (no GPU here, or one that
     cannot load these 4 bytes). */
  status = moeLaunch(bundle, "perm", &args, NULL);
  check(status != MOE_STATUS_SUCCESS && status != MOE_STATUS_INVALID_ARGUMENT,
        "moeLaunch past its argument checks");
  moeBundleClose(bundle);
}

int main(int argc, char **argv) {
  moeBundle *bundle = NULL;
  int32_t index = -1;

  if (argc < 2 || argc > 6) {
    fprintf(stderr, "usage: moe-runtime-c-api-test <bundle> [<route bundle> "
                    "[<layer bundle> [<fp8 bundle> [<fp8 layer "
                    "bundle>]]]]\n");
    return 2;
  }
  /* The layout the ctypes wrapper mirrors (LP64): each version's fields
     last. */
  if (sizeof(void *) == 8) {
    check(sizeof(moeEntryInfo) == 248, "sizeof(moeEntryInfo)");
    check(offsetof(moeEntryInfo, out) == 240, "moeEntryInfo.out");
    check(offsetof(moeEntryInfo, top_k) == 72, "moeEntryInfo.top_k");
    check(offsetof(moeEntryInfo, hidden) == 88, "moeEntryInfo.hidden");
    check(offsetof(moeEntryInfo, weighted) == 96, "moeEntryInfo.weighted");
    check(offsetof(moeEntryInfo, bias_bits) == 100, "moeEntryInfo.bias_bits");
    check(offsetof(moeEntryInfo, activation) == 104, "moeEntryInfo.activation");
    check(offsetof(moeEntryInfo, route) == 112, "moeEntryInfo.route");
    check(offsetof(moeEntryInfo, unpermute) == 144, "moeEntryInfo.unpermute");
    check(offsetof(moeEntryInfo, chunk) == 152, "moeEntryInfo.chunk");
    check(offsetof(moeEntryInfo, format) == 160, "moeEntryInfo.format");
    check(offsetof(moeEntryInfo, element) == 168, "moeEntryInfo.element");
    check(offsetof(moeEntryInfo, input_bits) == 184, "moeEntryInfo.input_bits");
    check(offsetof(moeEntryInfo, batch) == 200, "moeEntryInfo.batch");
    check(offsetof(moeEntryInfo, cols) == 216, "moeEntryInfo.cols");
    check(offsetof(moeEntryInfo, quantize) == 224, "moeEntryInfo.quantize");
    check(offsetof(moeEntryInfo, intermediate) == 232,
          "moeEntryInfo.intermediate");
    check(sizeof(moeLaunchArgs) == 40, "sizeof(moeLaunchArgs)");
    check(offsetof(moeLaunchArgs, num_sizes) == 8, "moeLaunchArgs.num_sizes");
    check(offsetof(moeLaunchArgs, num_args) == 12, "moeLaunchArgs.num_args");
    check(offsetof(moeLaunchArgs, args) == 16, "moeLaunchArgs.args");
    check(offsetof(moeLaunchArgs, workspace) == 24, "moeLaunchArgs.workspace");
    check(offsetof(moeLaunchArgs, workspace_bytes) == 32,
          "moeLaunchArgs.workspace_bytes");
    check(sizeof(moeSignature) == 20, "sizeof(moeSignature)");
    check(offsetof(moeSignature, num_steps) == 16, "moeSignature.num_steps");
    check(sizeof(moeSizeInfo) == 24, "sizeof(moeSizeInfo)");
    check(sizeof(moeArgInfo) == 40, "sizeof(moeArgInfo)");
    check(offsetof(moeArgInfo, dtype) == 8, "moeArgInfo.dtype");
    check(offsetof(moeArgInfo, role) == 12, "moeArgInfo.role");
    check(offsetof(moeArgInfo, align) == 16, "moeArgInfo.align");
    check(offsetof(moeArgInfo, rank) == 24, "moeArgInfo.rank");
    check(offsetof(moeArgInfo, dims) == 32, "moeArgInfo.dims");
  }
  check(MOE_BUNDLE_VERSION == 7 && MOE_MAX_RANK == 8, "the header's numbers");
  check(moeWorkspaceBytes(NULL, "perm", NULL, 0, NULL) ==
            MOE_STATUS_INVALID_ARGUMENT,
        "moeWorkspaceBytes without a bundle");
  check(moeEntryGetSignature(NULL, "perm", NULL) == MOE_STATUS_INVALID_ARGUMENT,
        "moeEntryGetSignature without a bundle");
  check(strcmp(moeStatusName(MOE_STATUS_NO_GPU), "NO_GPU") == 0,
        "moeStatusName");
  bundle = openAndWalk(argv[1], "moeBundleOpenFile");
  if (!bundle)
    return 1;
  check(moeBundleFindEntry(bundle, "no such entry", &index) ==
            MOE_STATUS_NOT_FOUND,
        "moeBundleFindEntry of a missing entry");
  check(strstr(moeLastErrorMessage(), "no such entry") != NULL,
        "message names the entry");
  moeBundleClose(bundle);
  moeBundleClose(NULL);

  check(moeBundleOpenMemory("MOEBUNDLE 7\n", 12, &bundle) ==
            MOE_STATUS_INVALID_BUNDLE,
        "a bundle without end");
  check(bundle == NULL, "no bundle on failure");
  check(moeBundleOpenMemory("MOEBUNDLE 4\nchip sm_90a\nend\n", 28, &bundle) ==
            MOE_STATUS_UNSUPPORTED,
        "a version 4 bundle");
  check(strstr(moeLastErrorMessage(), "recompile it") != NULL,
        "message says to recompile");
  check(moeBundleOpenMemory("MOEBUNDLE 5\nchip sm_90a\nend\n", 28, &bundle) ==
            MOE_STATUS_UNSUPPORTED,
        "a version 5 bundle");
  check(strstr(moeLastErrorMessage(), "recompile it") != NULL,
        "message says to recompile a version 5 bundle");
  checkMxfp8();
  checkPlans();
  {
    int i;
    for (i = 2; i < argc && i < 5; ++i) {
      bundle = openAndWalk(argv[i], argv[i]);
      moeBundleClose(bundle);
    }
  }
  if (argc == 6)
    checkLayerFp8Bundle(argv[5]);
  printf("%s\n", failures ? "c api test FAILED" : "c api test passed");
  return failures ? 1 : 0;
}
