/*===- c_api_test.c - moe_runtime.h compiled as C99
------------------------===*\
|*                                                                            *|
|* Usage: moe-runtime-c-api-test <bundle> [<route bundle> [<layer bundle>    *|
|* [<fp8 bundle> [<fp8 layer bundle>]]]]. Opens the bundle (with entries      *|
|* gate_up and down), walks its entries and checks a few error paths that     *|
|* need no GPU; the same for moeRoute and moeUnpermute on the second (entries *|
|* router, softmax, combine, gather), for moeLayer on the third (layers       *|
|* mixtral and gptoss), for the block-FP8 moeGroupedMatmul on the fourth      *|
|* (entries gemm, down, plain, gate_up with out=f8E4M3FN), and for moeLayer   *|
|* and moeQuantize on the fifth (the layer_fp8.v1 layers dsv3, dsq without    *|
|* an intermediate part and dsf without quantize or intermediate parts, its   *|
|* permute dsf_permute with out=f8E4M3FN; the FP8 expert MLP mlp). Exits 1    *|
|* on failure.                                                                *|
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

/* Walks every entry and kernel of `bundle`. */
static void walk(moeBundle *bundle) {
  moeBundleInfo info;
  int32_t e, k;
  check(moeBundleGetInfo(bundle, &info) == MOE_STATUS_SUCCESS,
        "moeBundleGetInfo");
  check(info.version == MOE_BUNDLE_VERSION, "version");
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

/* The block-FP8 moeGroupedMatmul: argument errors need no GPU. */
static void checkFp8Bundle(const char *path) {
  moeBundle *bundle = NULL;
  moeGroupedMatmulArgs args;
  bundle = openAndWalk(path, "moeBundleOpenFile (fp8 bundle)");
  if (!bundle)
    return;
  memset(&args, 0, sizeof(args));
  args.rows = 0x10000;
  args.weights = 0x20000;
  args.offsets = 0x30000;
  args.out = 0x40000;
  args.m = 64;
  args.n = 256;
  args.k = 512;
  args.experts = 8;
  args.rows_scale = 0x50000;
  check(moeGroupedMatmul(bundle, "gemm", &args, NULL) ==
            MOE_STATUS_INVALID_ARGUMENT,
        "moeGroupedMatmul without weights_scale");
  check(strstr(moeLastErrorMessage(),
               "moeGroupedMatmul(gemm): weights_scale pointer is NULL") != NULL,
        "moeGroupedMatmul names the scale");
  args.weights_scale = 0x60000;
  args.k = 24;
  check(moeGroupedMatmul(bundle, "gemm", &args, NULL) ==
            MOE_STATUS_INVALID_ARGUMENT,
        "moeGroupedMatmul with K = 24");
  args.k = 512;
  check(moeGroupedMatmul(bundle, "plain", &args, NULL) ==
            MOE_STATUS_INVALID_ARGUMENT,
        "moeGroupedMatmul with scales on a grouped_matmul.v3 entry");
  check(strstr(moeLastErrorMessage(),
               "rows_scale = 0x50000, but the entry "
               "has abi " MOE_ABI_GROUPED_MATMUL) != NULL,
        "moeGroupedMatmul names the scale of a v3 entry");
  /* out=f8E4M3FN: out_scale required, 0 for the other entries. */
  args.n = 512;
  args.k = 256;
  check(moeGroupedMatmul(bundle, "gate_up", &args, NULL) ==
                MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(),
                   "moeGroupedMatmul(gate_up): out_scale pointer is NULL") !=
                NULL,
        "moeGroupedMatmul without out_scale");
  args.out_scale = 0x70002;
  check(moeGroupedMatmul(bundle, "gate_up", &args, NULL) ==
                MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(),
                   "out_scale pointer 0x70002 is not 4-byte aligned") != NULL,
        "moeGroupedMatmul with a misaligned out_scale");
  args.n = 256;
  args.k = 512;
  check(moeGroupedMatmul(bundle, "gemm", &args, NULL) ==
                MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(),
                   "moeGroupedMatmul(gemm): out_scale = 0x70002, but "
                   "out_scale is only taken by out=f8E4M3FN entries") != NULL,
        "moeGroupedMatmul with out_scale on a bf16-output entry");
  moeBundleClose(bundle);
}

/* moeRoute and moeUnpermute: argument errors need no GPU. */
static void checkRouteBundle(const char *path) {
  moeBundle *bundle = NULL;
  moeRouteArgs route;
  moeUnpermuteArgs combine;
  bundle = openAndWalk(path, "moeBundleOpenFile (route bundle)");
  if (!bundle)
    return;
  memset(&route, 0, sizeof(route));
  route.tokens = 16;
  route.experts = 256;
  check(moeRoute(bundle, "router", &route, NULL) == MOE_STATUS_INVALID_ARGUMENT,
        "moeRoute with NULL pointers");
  check(strstr(moeLastErrorMessage(), "moeRoute(router): logits pointer is "
                                      "NULL") != NULL,
        "moeRoute names the pointer");
  check(moeRoute(bundle, "combine", &route, NULL) ==
            MOE_STATUS_INVALID_ARGUMENT,
        "moeRoute on an unpermute entry");
  check(strstr(moeLastErrorMessage(), "not op=" MOE_OP_ROUTE) != NULL,
        "moeRoute names the op");
  memset(&combine, 0, sizeof(combine));
  combine.rows_count = 32;
  combine.tokens = 16;
  combine.hidden = 4096;
  check(moeUnpermute(bundle, "combine", &combine, NULL) ==
            MOE_STATUS_INVALID_ARGUMENT,
        "moeUnpermute with NULL pointers");
  check(strstr(moeLastErrorMessage(), "moeUnpermute(combine): rows pointer "
                                      "is NULL") != NULL,
        "moeUnpermute names the pointer");
  check(moeUnpermute(bundle, "nope", &combine, NULL) == MOE_STATUS_NOT_FOUND,
        "moeUnpermute of a missing entry");
  moeBundleClose(bundle);
}

/* moeLayer and moeLayerWorkspaceBytes: argument errors need no GPU. */
static void checkLayerBundle(const char *path) {
  moeBundle *bundle = NULL;
  moeLayerArgs args;
  uint64_t bytes = 0;
  bundle = openAndWalk(path, "moeBundleOpenFile (layer bundle)");
  if (!bundle)
    return;
  /* mixtral, T = 1: 2 rows of H = 4096 and I = 14336, i32, E = 8; the
     permute's workspace (288 bytes: the sources, then at 256 one chunk's 8
     counts) is the one buffer above 256 bytes before the rows. */
  check(moeLayerWorkspaceBytes(bundle, "mixtral", 1, 4096, 14336, &bytes) ==
                MOE_STATUS_SUCCESS &&
            bytes == 6 * 256 + 2 * 4096 * 2 + 2 * 14336 * 2,
        "moeLayerWorkspaceBytes");
  {
    int64_t permuteBytes = 0;
    check(moePermuteWorkspaceBytes(bundle, "mixtral_permute", 1,
                                   &permuteBytes) == MOE_STATUS_SUCCESS &&
              permuteBytes == 256 + 8 * 4,
          "moePermuteWorkspaceBytes");
  }
  memset(&args, 0, sizeof(args));
  args.tokens_count = 1;
  args.hidden = 4096;
  args.intermediate = 14336;
  args.experts = 8;
  check(moeLayer(bundle, "mixtral", &args, NULL) == MOE_STATUS_INVALID_ARGUMENT,
        "moeLayer with NULL pointers");
  check(strstr(moeLastErrorMessage(), "moeLayer(mixtral): tokens pointer is "
                                      "NULL") != NULL,
        "moeLayer names the pointer");
  check(moeLayer(bundle, "mixtral_route", &args, NULL) ==
            MOE_STATUS_INVALID_ARGUMENT,
        "moeLayer on a route entry");
  check(strstr(moeLastErrorMessage(), "not op=" MOE_OP_LAYER) != NULL,
        "moeLayer names the op");
  moeBundleClose(bundle);
}

/* moeLayer on a layer_fp8.v1 layer, and moeQuantize on the intermediate of
   a block-FP8 expert MLP: argument errors need no GPU. */
static void checkLayerFp8Bundle(const char *path) {
  moeBundle *bundle = NULL;
  moeLayerArgs args;
  moeQuantizeArgs quantize;
  moePermuteArgs permute;
  moeEntryInfo entry;
  int32_t index = -1;
  uint64_t bytes = 0;
  bundle = openAndWalk(path, "moeBundleOpenFile (fp8 layer bundle)");
  if (!bundle)
    return;
  check(moeBundleFindEntry(bundle, "dsv3", &index) == MOE_STATUS_SUCCESS &&
            moeBundleGetEntry(bundle, index, &entry) == MOE_STATUS_SUCCESS &&
            strcmp(entry.abi, MOE_ABI_LAYER_FP8) == 0 &&
            strcmp(entry.quantize, "dsv3_quantize") == 0 &&
            strcmp(entry.intermediate, "dsv3_intermediate") == 0,
        "the fp8 layer's parts");
  /* dsv3, T = 1: 8 rows of H = 7168 and I = 2048, i32, E = 256: the
     layer.v1 buffers end at 150784, then come the rows' values (57344
     bytes) and scales (1792) from 150784, inter's values (16384) from
     209920 and scales (8*16*4) from 226304. */
  check(moeLayerWorkspaceBytes(bundle, "dsv3", 1, 7168, 2048, &bytes) ==
                MOE_STATUS_SUCCESS &&
            bytes == 226304 + 8 * 16 * 4,
        "moeLayerWorkspaceBytes (fp8 layer)");
  memset(&args, 0, sizeof(args));
  args.tokens = 0x100000;
  args.logits = 0x200000;
  args.score_bias = 0x300000;
  args.gate_up_weights = 0x400000;
  args.down_weights = 0x500000;
  args.out = 0x600000;
  args.workspace = 0x1000000;
  args.workspace_bytes = bytes;
  args.tokens_count = 1;
  args.hidden = 7168;
  args.intermediate = 2048;
  args.experts = 256;
  args.down_weights_scale = 0x700000;
  check(moeLayer(bundle, "dsv3", &args, NULL) == MOE_STATUS_INVALID_ARGUMENT,
        "moeLayer without gate_up_weights_scale");
  check(strstr(moeLastErrorMessage(),
               "moeLayer(dsv3): gate_up_weights_scale pointer is NULL") != NULL,
        "moeLayer names the scale");
  args.gate_up_weights_scale = 0x800002;
  check(moeLayer(bundle, "dsv3", &args, NULL) == MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(), "is not 4-byte aligned") != NULL,
        "moeLayer with a misaligned scale");
  check(moeLayerWorkspaceBytes(bundle, "dsv3", 1, 7000, 2048, &bytes) ==
                MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(), "hidden = 7000 does not match") !=
                NULL,
        "moeLayerWorkspaceBytes with another H");
  /* dsq: dsv3's parts but a gate_up with out=f8E4M3FN and no intermediate
     part; the same workspace. */
  check(moeBundleFindEntry(bundle, "dsq", &index) == MOE_STATUS_SUCCESS &&
            moeBundleGetEntry(bundle, index, &entry) == MOE_STATUS_SUCCESS &&
            strcmp(entry.abi, MOE_ABI_LAYER_FP8) == 0 &&
            strcmp(entry.gate_up, "dsq_gate_up") == 0 &&
            strcmp(entry.intermediate, "") == 0,
        "the six-step fp8 layer's parts");
  check(moeLayerWorkspaceBytes(bundle, "dsq", 1, 7168, 2048, &bytes) ==
                MOE_STATUS_SUCCESS &&
            bytes == 226304 + 8 * 16 * 4,
        "moeLayerWorkspaceBytes (six-step fp8 layer)");
  args.gate_up_weights_scale = 0;
  check(moeLayer(bundle, "dsq", &args, NULL) == MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(),
                   "moeLayer(dsq): gate_up_weights_scale pointer is NULL") !=
                NULL,
        "moeLayer (six-step) without gate_up_weights_scale");
  /* dsf: dsq's parts but a permute with out=f8E4M3FN and no quantize part
     (five steps); the same workspace. */
  check(moeBundleFindEntry(bundle, "dsf", &index) == MOE_STATUS_SUCCESS &&
            moeBundleGetEntry(bundle, index, &entry) == MOE_STATUS_SUCCESS &&
            strcmp(entry.abi, MOE_ABI_LAYER_FP8) == 0 &&
            strcmp(entry.permute, "dsf_permute") == 0 &&
            strcmp(entry.quantize, "") == 0 &&
            strcmp(entry.intermediate, "") == 0,
        "the five-step fp8 layer's parts");
  check(moeLayerWorkspaceBytes(bundle, "dsf", 1, 7168, 2048, &bytes) ==
                MOE_STATUS_SUCCESS &&
            bytes == 226304 + 8 * 16 * 4,
        "moeLayerWorkspaceBytes (five-step fp8 layer)");
  check(moeLayer(bundle, "dsf", &args, NULL) == MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(),
                   "moeLayer(dsf): gate_up_weights_scale pointer is NULL") !=
                NULL,
        "moeLayer (five-step) without gate_up_weights_scale");
  /* moePermute on dsf_permute: rows_scale required, 0 for dsv3_permute. */
  check(moeBundleFindEntry(bundle, "dsf_permute", &index) ==
                MOE_STATUS_SUCCESS &&
            moeBundleGetEntry(bundle, index, &entry) == MOE_STATUS_SUCCESS &&
            strcmp(entry.out, MOE_OUT_E4M3) == 0,
        "dsf_permute's out");
  memset(&permute, 0, sizeof(permute));
  permute.tokens = 0x100000;
  permute.ids = 0x200000;
  permute.rows = 0x300000;
  permute.offsets = 0x400000;
  permute.slots = 0x500000;
  permute.workspace = 0x600000;
  permute.tokens_count = 4;
  permute.hidden = 7168;
  check(moePermute(bundle, "dsf_permute", &permute, NULL) ==
                MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(),
                   "moePermute(dsf_permute): rows_scale pointer is NULL") !=
                NULL,
        "moePermute without rows_scale");
  permute.rows_scale = 0x700002;
  check(moePermute(bundle, "dsf_permute", &permute, NULL) ==
                MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(),
                   "rows_scale pointer 0x700002 is not 4-byte aligned") != NULL,
        "moePermute with a misaligned rows_scale");
  check(moePermute(bundle, "dsv3_permute", &permute, NULL) ==
                MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(),
                   "moePermute(dsv3_permute): rows_scale = 0x700002, but "
                   "rows_scale is only taken by out=f8E4M3FN entries") != NULL,
        "moePermute with rows_scale on a bf16-rows entry");
  memset(&quantize, 0, sizeof(quantize));
  quantize.batch = 1;
  quantize.rows = 64;
  quantize.cols = 100;
  check(moeQuantize(bundle, "mlp_intermediate", &quantize, NULL) ==
                MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(),
                   "moeQuantize(mlp_intermediate): C = 100 (cols) is not a "
                   "multiple of the block's 128 columns") != NULL,
        "moeQuantize on an expert MLP's intermediate");
  moeBundleClose(bundle);
}

/* An MXFP8 entry (format=mxfp8), from memory: its format, and argument
   errors that need no GPU: K a multiple of 32, UE8M0 scales of any
   alignment. */
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
  moeGroupedMatmulArgs args;
  moeStatus status;
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
  memset(&args, 0, sizeof(args));
  args.rows = 0x10000;
  args.weights = 0x20000;
  args.offsets = 0x30000;
  args.out = 0x40000;
  args.m = 64;
  args.n = 256;
  args.k = 48;
  args.experts = 8;
  args.rows_scale = 0x50001;
  args.weights_scale = 0x60003;
  check(moeGroupedMatmul(bundle, "mx", &args, NULL) ==
                MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(),
                   "moeGroupedMatmul(mx): K = 48 is not a multiple of 32") !=
                NULL,
        "moeGroupedMatmul of an mxfp8 entry with K = 48");
  /* Past the argument checks (odd scales are fine): the driver's turn. */
  args.k = 96;
  status = moeGroupedMatmul(bundle, "mx", &args, NULL);
  check(status != MOE_STATUS_SUCCESS && status != MOE_STATUS_INVALID_ARGUMENT,
        "moeGroupedMatmul of an mxfp8 entry with unaligned scales");
  moeBundleClose(bundle);
}

int main(int argc, char **argv) {
  moeBundle *bundle = NULL;
  moeGroupedMatmulArgs args;
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
    check(sizeof(moeGroupedMatmulArgs) == 104, "sizeof(moeGroupedMatmulArgs)");
    check(offsetof(moeGroupedMatmulArgs, out_scale) == 96,
          "moeGroupedMatmulArgs.out_scale");
    check(offsetof(moeGroupedMatmulArgs, bias) == 72,
          "moeGroupedMatmulArgs.bias");
    check(offsetof(moeGroupedMatmulArgs, rows_scale) == 80,
          "moeGroupedMatmulArgs.rows_scale");
    check(offsetof(moeGroupedMatmulArgs, weights_scale) == 88,
          "moeGroupedMatmulArgs.weights_scale");
    check(sizeof(moeRouteArgs) == 48, "sizeof(moeRouteArgs)");
    check(sizeof(moeUnpermuteArgs) == 56, "sizeof(moeUnpermuteArgs)");
    check(sizeof(moePermuteArgs) == 72, "sizeof(moePermuteArgs)");
    check(offsetof(moePermuteArgs, rows_scale) == 64,
          "moePermuteArgs.rows_scale");
    check(sizeof(moeLayerArgs) == 128, "sizeof(moeLayerArgs)");
    check(offsetof(moeLayerArgs, gate_up_weights_scale) == 112,
          "moeLayerArgs.gate_up_weights_scale");
    check(offsetof(moeLayerArgs, down_weights_scale) == 120,
          "moeLayerArgs.down_weights_scale");
    check(sizeof(moeQuantizeArgs) == 48, "sizeof(moeQuantizeArgs)");
    check(offsetof(moeQuantizeArgs, batch) == 24, "moeQuantizeArgs.batch");
    check(offsetof(moeLayerArgs, workspace_bytes) == 72,
          "moeLayerArgs.workspace_bytes");
  }
  check(moeQuantize(NULL, "act", NULL, NULL) == MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(), "moeQuantize: bundle is NULL"),
        "moeQuantize without a bundle");
  check(moeLayer(NULL, "mixtral", NULL, NULL) == MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(), "moeLayer: bundle is NULL"),
        "moeLayer without a bundle");
  /* moePermute and moePermuteWorkspaceBytes: argument errors need no GPU. */
  check(moePermute(NULL, "perm", NULL, NULL) == MOE_STATUS_INVALID_ARGUMENT &&
            strstr(moeLastErrorMessage(), "moePermute: bundle is NULL"),
        "moePermute without a bundle");
  check(moePermuteWorkspaceBytes(NULL, "perm", 1, NULL) ==
            MOE_STATUS_INVALID_ARGUMENT,
        "moePermuteWorkspaceBytes without a bundle");
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

  /* Argument errors come before any driver call, so no GPU is needed. */
  memset(&args, 0, sizeof(args));
  args.m = 64;
  args.n = 28672;
  args.k = 4096;
  args.experts = 8;
  args.row_scale = 0;
  args.bias = 0;
  check(moeGroupedMatmul(bundle, "gate_up", &args, NULL) ==
            MOE_STATUS_INVALID_ARGUMENT,
        "moeGroupedMatmul with NULL pointers");
  check(strstr(moeLastErrorMessage(), "rows pointer is NULL") != NULL,
        "message names the pointer");
  check(moeGroupedMatmul(NULL, "gate_up", &args, NULL) ==
            MOE_STATUS_INVALID_ARGUMENT,
        "moeGroupedMatmul with a NULL bundle");
  moeBundleClose(bundle);
  moeBundleClose(NULL);

  check(moeBundleOpenMemory("MOEBUNDLE 6\n", 12, &bundle) ==
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
  if (argc >= 3)
    checkRouteBundle(argv[2]);
  if (argc >= 4)
    checkLayerBundle(argv[3]);
  if (argc >= 5)
    checkFp8Bundle(argv[4]);
  if (argc == 6)
    checkLayerFp8Bundle(argv[5]);
  printf("%s\n", failures ? "c api test FAILED" : "c api test passed");
  return failures ? 1 : 0;
}
