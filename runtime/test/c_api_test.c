/*===- c_api_test.c - moe_runtime.h compiled as C99
------------------------===*\
|*                                                                            *|
|* Usage: moe-runtime-c-api-test <valid bundle file>. Opens the bundle,       *|
|* walks its entries and checks a few error paths that need no GPU. Exits 1   *|
|* on any failure.                                                            *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "moe_runtime.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "FAIL: %s (last error: %s)\n", what, moeLastErrorMessage());
    ++failures;
  }
}

int main(int argc, char **argv) {
  moeBundle *bundle = NULL;
  moeBundleInfo info;
  moeGroupedMatmulArgs args;
  int32_t e, k, index = -1;

  if (argc != 2) {
    fprintf(stderr, "usage: moe-runtime-c-api-test <bundle>\n");
    return 2;
  }
  check(strcmp(moeStatusName(MOE_STATUS_NO_GPU), "NO_GPU") == 0,
        "moeStatusName");
  check(moeBundleOpenFile(argv[1], &bundle) == MOE_STATUS_SUCCESS,
        "moeBundleOpenFile");
  if (!bundle)
    return 1;
  check(moeBundleGetInfo(bundle, &info) == MOE_STATUS_SUCCESS,
        "moeBundleGetInfo");
  check(info.version == MOE_BUNDLE_VERSION, "version");
  for (e = 0; e < info.num_entries; ++e) {
    moeEntryInfo entry;
    check(moeBundleGetEntry(bundle, e, &entry) == MOE_STATUS_SUCCESS,
          "moeBundleGetEntry");
    check(strcmp(entry.abi, MOE_ABI_GROUPED_MATMUL) == 0, "abi");
    check(strcmp(entry.epilogue, MOE_EPILOGUE_STORE) == 0 ||
              strcmp(entry.epilogue, MOE_EPILOGUE_SWIGLU) == 0 ||
              strcmp(entry.epilogue, MOE_EPILOGUE_ROW_SCALE) == 0,
          "epilogue");
    for (k = 0; k < entry.num_kernels; ++k) {
      moeKernelInfo kernel;
      check(moeBundleGetKernel(bundle, e, k, &kernel) == MOE_STATUS_SUCCESS,
            "moeBundleGetKernel");
      check(kernel.rows_min >= 1 && kernel.rows_min <= kernel.rows_max,
            "rows range");
    }
  }
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

  check(moeBundleOpenMemory("MOEBUNDLE 3\n", 12, &bundle) ==
            MOE_STATUS_INVALID_BUNDLE,
        "a bundle without end");
  check(bundle == NULL, "no bundle on failure");
  check(moeBundleOpenMemory("MOEBUNDLE 2\nchip sm_90a\nend\n", 28, &bundle) ==
            MOE_STATUS_UNSUPPORTED,
        "a version 2 bundle");
  check(strstr(moeLastErrorMessage(), "recompile it") != NULL,
        "message says to recompile");
  printf("%s\n", failures ? "c api test FAILED" : "c api test passed");
  return failures ? 1 : 0;
}
