/*===- moe_runtime.h - C API of the moe-mlir launch runtime -------*- C -*-===*\
|*                                                                            *|
|* Reads the `.moebundle` files that `moe-translate --moe-to-bundle` writes *|
|* and launches their kernels through the CUDA driver API. The contract this  *|
|* implements is docs/runtime-contract.md (bundle version 6; kernel ABIs      *|
|* grouped_matmul.v3: persistent kernels with a store, swiglu or row_scale    *|
|* epilogue and an optional expert bias; grouped_matmul_fp8.v1: the same     *|
|* with block-FP8 or MXFP8 rows and weights; route.v1: top-k routing;        *|
|* unpermute.v2: the weighted combine; permute.v2: tokens grouped by expert;  *|
|* layer.v1: the five in one call; quantize.v1: block-scaled FP8             *|
|* quantization; layer_fp8.v1: a block-FP8 or MXFP8 layer, those and up to   *|
|* two quantizes).                                                            *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef MOE_RUNTIME_H
#define MOE_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define MOE_API
#elif defined(MOE_RUNTIME_BUILDING)
#define MOE_API __attribute__((visibility("default")))
#else
#define MOE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/// The bundle format version this runtime reads (`MOEBUNDLE 6`).
#define MOE_BUNDLE_VERSION 6
/// The kernel ABIs this runtime launches: persistent grouped GEMMs with an
/// epilogue (moeGroupedMatmul), of bf16 or of block-FP8 rows and weights
/// (grouped_matmul_fp8.v1), top-k routing (moeRoute), the combine of
/// the experts' rows of each token (moeUnpermute), and the grouping of the
/// tokens' rows by expert (moePermute), a whole layer made of those
/// (moeLayer), block-scaled FP8 quantization (moeQuantize), and a whole
/// block-FP8 or MXFP8 layer (moeLayer; added within version 6).
#define MOE_ABI_GROUPED_MATMUL "grouped_matmul.v3"
#define MOE_ABI_GROUPED_MATMUL_FP8 "grouped_matmul_fp8.v1"
#define MOE_ABI_ROUTE "route.v1"
#define MOE_ABI_UNPERMUTE "unpermute.v2"
#define MOE_ABI_PERMUTE "permute.v2"
#define MOE_ABI_LAYER "layer.v1"
#define MOE_ABI_QUANTIZE "quantize.v1"
#define MOE_ABI_LAYER_FP8 "layer_fp8.v1"
/// The op names of entries that moeGroupedMatmul launches: a grouped matmul,
/// and the two halves (`<name>_gate_up`, `<name>_down`) of a fused expert MLP
/// (a block-FP8 one has a third part between them, `<name>_intermediate`,
/// a quantize.v1 entry that moeQuantize launches).
#define MOE_OP_GROUPED_MATMUL "moe.grouped_matmul"
#define MOE_OP_EXPERT_MLP "moe.expert_mlp"
/// The op names of the entries that moeRoute, moeUnpermute, moePermute and
/// moeLayer launch.
#define MOE_OP_ROUTE "moe.route"
#define MOE_OP_UNPERMUTE "moe.unpermute"
#define MOE_OP_PERMUTE "moe.permute"
#define MOE_OP_LAYER "moe.layer"
#define MOE_OP_QUANTIZE "moe.quantize"
/// The epilogues of an entry (contract §3.1): out = rows @ weights^T; the
/// SwiGLU of its gate and up halves; scaled by a weight per row.
#define MOE_EPILOGUE_STORE "store"
#define MOE_EPILOGUE_SWIGLU "swiglu"
#define MOE_EPILOGUE_ROW_SCALE "row_scale"
/// The activation of a grouped_matmul.v3 entry (contract §3.1): none (store
/// and row_scale entries), silu(gate) * up, or GPT-OSS's clamped SwiGLU.
#define MOE_ACTIVATION_NONE "none"
#define MOE_ACTIVATION_SILU "silu"
#define MOE_ACTIVATION_GPTOSS "gptoss"
/// The element formats of a grouped_matmul_fp8.v1 entry (contract §3.7):
/// float8_e4m3fn rows and weights with f32 scales per block of 128 elements
/// of a row of `rows` and per 128 x 128 block of the weights (DeepSeek-V3's);
/// or (added within version 6) OCP MXFP8: float8_e4m3fn rows and weights
/// with a UE8M0 scale byte (2^(code - 127)) per 32 elements along K of a row
/// of `rows` and of a row of each expert's weights.
#define MOE_FORMAT_FP8_BLOCK "fp8_block"
#define MOE_FORMAT_MXFP8 "mxfp8"
/// The output of a grouped matmul entry (contract §3.7, moeEntryInfo.out):
/// bf16, or (a block-FP8 swiglu entry with out=f8E4M3FN, added within
/// version 6) float8_e4m3fn codes with an f32 scale per [1, 128] group of a
/// row, written by the kernels' epilogue. The same for the gathered rows of
/// a permute entry (contract §3.4; out=f8E4M3FN added within version 6: its
/// gather kernel quantizes them).
#define MOE_OUT_BF16 "bf16"
#define MOE_OUT_E4M3 "f8E4M3FN"
/// The FP8 elements of a quantize.v1 entry (contract §3.8): OCP FP8 E4M3
/// (largest finite 448, no infinity) and E5M2 (largest finite 57344).
#define MOE_ELEMENT_E4M3 "f8E4M3FN"
#define MOE_ELEMENT_E5M2 "f8E5M2"
/// The scales of a quantize.v1 entry: f32 values (amax / largest finite,
/// DeepSeek style), or E8M0 codes (1 byte: 2^(code - 127), 0xFF NaN; OCP MX).
#define MOE_SCALE_F32 "f32"
#define MOE_SCALE_E8M0 "e8m0"

/// What every function returns. On anything but MOE_STATUS_SUCCESS,
/// moeLastErrorMessage() says what went wrong.
typedef enum moeStatus {
  MOE_STATUS_SUCCESS = 0,
  /// A NULL, out-of-range or inconsistent argument.
  MOE_STATUS_INVALID_ARGUMENT = 1,
  /// The bundle bytes break the format (message names the line).
  MOE_STATUS_INVALID_BUNDLE = 2,
  /// A well-formed request this runtime cannot serve: a newer bundle version
  /// or ABI, or a bundle for another GPU than the current device.
  MOE_STATUS_UNSUPPORTED = 3,
  /// No CUDA driver (libcuda.so.1 missing or a stub) or no CUDA device.
  MOE_STATUS_NO_GPU = 4,
  /// A CUDA driver call failed; the message has its name and description.
  MOE_STATUS_CUDA_ERROR = 5,
  /// Host memory or device memory (CUDA_ERROR_OUT_OF_MEMORY) ran out.
  MOE_STATUS_OUT_OF_MEMORY = 6,
  /// A file, entry or kernel symbol that does not exist.
  MOE_STATUS_NOT_FOUND = 7
} moeStatus;

/// The enumerator's name without the prefix ("SUCCESS", "INVALID_BUNDLE",
/// ...), or "UNKNOWN" for a value outside the enum. Never NULL.
MOE_API const char *moeStatusName(moeStatus status);

/// The message of the most recent call on the calling thread that returned
/// something other than MOE_STATUS_SUCCESS ("" if none did). Successful calls
/// leave it unchanged. The pointer stays valid until the next failing call on
/// this thread.
MOE_API const char *moeLastErrorMessage(void);

/// A parsed bundle, and the modules it has loaded into CUDA contexts.
typedef struct moeBundle moeBundle;

/// Reads and validates a bundle file (contract §2). No GPU or CUDA driver is
/// needed. On failure *out is set to NULL and the message is
/// "<path>: bundle line <n>: ...", where n counts the text lines (an image's
/// payload belongs to its `image` line). Errors: NOT_FOUND (no such file),
/// INVALID_ARGUMENT (unreadable), INVALID_BUNDLE, UNSUPPORTED (bundle version,
/// abi or chip this runtime does not know), OUT_OF_MEMORY.
MOE_API moeStatus moeBundleOpenFile(const char *path, moeBundle **out);

/// Same as moeBundleOpenFile on `size` bytes at `data`, which are copied (the
/// caller may free them on return); messages start with "bundle line".
MOE_API moeStatus moeBundleOpenMemory(const void *data, size_t size,
                                      moeBundle **out);

/// Unloads the modules the bundle loaded (in every context it loaded into that
/// still exists) and frees it. NULL is a no-op. Must not race with any other
/// call on the same bundle. A primary context that moeBundleLoad retained stays
/// retained (as the CUDA runtime does), so memory the caller allocated in it
/// survives.
MOE_API void moeBundleClose(moeBundle *bundle);

/// The bundle as a whole. Strings point into the bundle and live until
/// moeBundleClose.
typedef struct moeBundleInfo {
  int32_t version;     ///< MOEBUNDLE version (always MOE_BUNDLE_VERSION).
  const char *chip;    ///< e.g. "sm_90a".
  int32_t num_images;  ///< `image` records.
  int32_t num_entries; ///< `entry` records, in file order.
} moeBundleInfo;

/// One `entry` record: a compiled op and its kernels. Which fields apply
/// depends on the ABI (`abi`); the others are 0 ("" for the strings):
///   grouped_matmul.v3: experts, n, k, offsets_bits, epilogue, bias_bits,
///                      activation;
///   grouped_matmul_fp8.v1: the same, and format ("fp8_block" or
///                      "mxfp8");
///   both grouped matmul ABIs and permute.v2: out;
///   route.v1:          experts, top_k, logits_bits, bias;
///   unpermute.v2:      top_k, slots_bits, hidden, weighted;
///   permute.v2:        experts, top_k, hidden, offsets_bits, chunk;
///   layer.v1:          route, permute, gate_up, down, unpermute;
///   quantize.v1:       element, scale, input_bits, block_rows, block_cols,
///                      rank, batch, rows, cols;
///   layer_fp8.v1:      route, permute, quantize, gate_up, intermediate,
///                      down, unpermute (quantize and intermediate "" for
///                      a layer without that part; max_rows applies to
///                      every ABI).
typedef struct moeEntryInfo {
  const char *name;     ///< Unique in the bundle: the calls' `entry`.
  const char *op;       ///< "moe.grouped_matmul", "moe.expert_mlp",
                        ///< "moe.route", "moe.unpermute", "moe.permute",
                        ///< "moe.layer" or "moe.quantize".
  const char *abi;      ///< "grouped_matmul.v3", "grouped_matmul_fp8.v1",
                        ///< "route.v1", "unpermute.v2", "permute.v2",
                        ///< "layer.v1", "quantize.v1", "layer_fp8.v1".
  int64_t experts;      ///< E of the weights [E, N, K], or -1 (dynamic);
                        ///< route.v1: E of the logits [T, E] (static);
                        ///< permute.v2: E of the offsets [E + 1] (static,
                        ///< 1..1024).
  int64_t n;            ///< N, or -1 (dynamic).
  int64_t k;            ///< K, or -1 (dynamic).
  int64_t max_rows;     ///< Largest M (route, unpermute, permute: T;
                        ///< quantize: R) accepted, at most 2^31 - 1.
  int32_t offsets_bits; ///< 32 (offsets=i32) or 64 (offsets=i64); permute.v2:
                        ///< the type of its offsets and slots.
  int32_t num_kernels;  ///< Kernel records of the entry, in file order
                        ///< (exactly 1 for route.v1 and unpermute.v2, exactly
                        ///< 3 for permute.v2: count, index, then gather; 0
                        ///< for layer.v1 and layer_fp8.v1, which launch
                        ///< their parts' kernels).
  const char *epilogue; ///< "store", "swiglu" or "row_scale" (both grouped
                        ///< matmul ABIs); "" for the other ABIs. Never
                        ///< NULL.
  // Added in version 4.
  int32_t top_k;       ///< k: experts per token (route: 1..min(E, 32));
                       ///< unpermute.v2, permute.v2 too.
  int32_t logits_bits; ///< route.v1: 32 (logits=f32) or 16 (logits=bf16).
  int32_t bias;        ///< route.v1: 1 when it takes a correction bias [E].
  int32_t slots_bits;  ///< unpermute.v2: 32 (slots=i32) or 64 (slots=i64).
  int64_t hidden;      ///< unpermute.v2: H of rows and out, or -1 (dynamic);
                       ///< permute.v2: H of tokens and rows, or -1.
  int32_t weighted;    ///< unpermute.v2: 1 when it takes weights [T, k].
  // Added in version 5.
  int32_t bias_bits;      ///< grouped_matmul.v3: the expert bias [E, N]: 0
                          ///< (bias=none), 16 (bf16) or 32 (f32).
  const char *activation; ///< grouped_matmul.v3: "none" (store, row_scale),
                          ///< "silu" or "gptoss" (swiglu); "" for the other
                          ///< ABIs. Never NULL.
  const char *route;      ///< layer.v1: the names of its part entries, all
  const char *permute;    ///< earlier in the bundle (route.v1, permute.v2,
  const char *gate_up;    ///< grouped_matmul.v3 swiglu, grouped_matmul.v3
  const char *down;       ///< store, unpermute.v2); layer_fp8.v1: the same
  const char *unpermute;  ///< with grouped_matmul_fp8.v1 GEMMs; "" for the
                          ///< other ABIs. Never NULL.
  int32_t chunk;          ///< permute.v2: ids per CTA of its count and index
                          ///< kernels (a multiple of 32, 32..65536); 0 for
                          ///< the other ABIs.
  // Added in version 6.
  const char *format; ///< grouped_matmul_fp8.v1: "fp8_block" or "mxfp8"
                      ///< (added within version 6); "" for the other ABIs.
                      ///< Never NULL.
  // quantize.v1 (added within version 6); 0 or "" for the other ABIs.
  const char *element; ///< "f8E4M3FN" or "f8E5M2". Never NULL.
  const char *scale;   ///< "f32" or "e8m0". Never NULL.
  int32_t input_bits;  ///< 16 (bf16 input) or 32 (f32).
  int32_t block_rows;  ///< The block [block_rows, block_cols] over the last
  int32_t block_cols;  ///< two dims: [1, 32] (e8m0), [1, B] or [128, 128].
  int32_t rank;        ///< 2 ([R, C]) or 3 ([E, R, C]: blocks per expert).
  int64_t batch;       ///< E, or -1 (dynamic); 1 when rank is 2.
  int64_t rows;        ///< R, or -1 (dynamic).
  int64_t cols;        ///< C, or -1 (dynamic).
  // layer_fp8.v1 (added within version 6); "" for the other ABIs.
  const char *quantize;     ///< The quantize.v1 entry (op moe.quantize) of
                            ///< the gathered rows; "" when the permute
                            ///< entry's gather quantizes them itself (its
                            ///< out is "f8E4M3FN"). Never NULL.
  const char *intermediate; ///< The quantize.v1 entry (op moe.expert_mlp) of
                            ///< the gate-up GEMM's output; "" when the
                            ///< gate_up entry quantizes it itself (its out
                            ///< is "f8E4M3FN"). Never NULL.
  // grouped_matmul.v3, grouped_matmul_fp8.v1 and permute.v2 (added within
  // version 6); "" for the other ABIs.
  const char *out; ///< The output's element: "bf16" (MOE_OUT_BF16), or
                   ///< "f8E4M3FN" (MOE_OUT_E4M3: a grouped_matmul_fp8.v1
                   ///< swiglu entry with out=f8E4M3FN, which also writes
                   ///< out_scale; a permute.v2 entry with out=f8E4M3FN,
                   ///< whose gather writes rows as e4m3 codes and
                   ///< rows_scale). Never NULL.
} moeEntryInfo;

/// One `kernel` record of an entry. The kernels of route.v1, unpermute.v2,
/// permute.v2 and quantize.v1 entries have only symbol, image, threads and
/// smem; their other fields are 0.
typedef struct moeKernelInfo {
  const char *symbol;  ///< Kernel function name in its image.
  const char *image;   ///< Name of the image holding it.
  uint64_t image_size; ///< Bytes of that image.
  int64_t rows_min;    ///< Experts with rows_min <= rows <= rows_max ...
  int64_t rows_max;    ///< ... are computed by this kernel.
  int32_t threads;     ///< Block size (threads, 1, 1).
  int32_t smem;        ///< Dynamic shared memory bytes.
  int32_t tile_m;
  int32_t tile_n;
  int32_t tile_k;
  int32_t stages;
  int32_t swap_ab; ///< 1 for the swap-AB form, else 0.
} moeKernelInfo;

/// Fills *out. INVALID_ARGUMENT if bundle or out is NULL.
MOE_API moeStatus moeBundleGetInfo(const moeBundle *bundle, moeBundleInfo *out);

/// Fills *out for entry `index` (0 <= index < num_entries).
MOE_API moeStatus moeBundleGetEntry(const moeBundle *bundle, int32_t index,
                                    moeEntryInfo *out);

/// Sets *index to the position of the entry called `name`; NOT_FOUND if none.
MOE_API moeStatus moeBundleFindEntry(const moeBundle *bundle, const char *name,
                                     int32_t *index);

/// Fills *out for kernel `kernel` of entry `entry`.
MOE_API moeStatus moeBundleGetKernel(const moeBundle *bundle, int32_t entry,
                                     int32_t kernel, moeKernelInfo *out);

/// Loads the bundle's images into the calling thread's current CUDA context
/// (when none is current, retains the primary context of device 0 and makes it
/// current), after checking the device's compute capability against `chip`
/// (sm_90a needs exactly 9.0, sm_100a 10.0; a chip without the `a` suffix
/// accepts any later minor version of the same major). Looks up every kernel,
/// sets its CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to `smem` (for
/// every grouped_matmul.v3 and grouped_matmul_fp8.v1 kernel, for the others
/// only when smem > 0), then caches how many of its CTAs the device holds at
/// once (its cuOccupancyMaxActiveBlocksPerMultiprocessor for `threads` and
/// `smem`, times the device's multiprocessor count; for a kernel line with
/// cluster=2, the clusters of 2 CTAs, cuOccupancyMaxActiveClusters): the
/// persistent grid of contract §3.1.
/// Idempotent per context; a bundle may be loaded into several contexts (one
/// per device). Thread-safe. Module loading is not allowed while a stream is
/// being captured, so call this before capturing moeGroupedMatmul, moeRoute,
/// moeUnpermute, moePermute or moeLayer in a graph.
/// Errors: NO_GPU, UNSUPPORTED (compute capability, or a kernel of which not
/// one CTA, or not one cluster, fits), CUDA_ERROR, NOT_FOUND (kernel symbol
/// missing from its image), OUT_OF_MEMORY.
MOE_API moeStatus moeBundleLoad(moeBundle *bundle);

/* Launching (moeGroupedMatmul, moeRoute, moeUnpermute, moePermute,
 * moeLayer): every kernel is launched with programmatic dependent launch
 * (contract §3.6): cuLaunchKernelEx with the one attribute
 * CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1, or
 * cuLaunchKernel where the driver lacks cuLaunchKernelEx. The environment
 * variable MOE_RUNTIME_PDL=0 turns it off (cuLaunchKernel); it is read at
 * each call, but a captured CUDA graph keeps what was captured. A grouped
 * GEMM kernel with cluster=2 (contract §3.1) goes through cuLaunchKernelEx
 * with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = (2, 1, 1) first, with PDL
 * or not. */

/// Arguments of a grouped matmul, ABI grouped_matmul.v3 or
/// grouped_matmul_fp8.v1, for the rows r of expert e (offsets[e] <= r <
/// offsets[e + 1]), by the entry's epilogue, with b = bias[e] (zeros when the
/// entry has bias=none):
///   store:     out[r, :] = rows[r, :] @ weights[e]^T + b;
///   swiglu:    with g = rows[r, :] @ weights[e][0 : N/2]^T + b[0 : N/2]
///              (gate rows) and u = rows[r, :] @ weights[e][N/2 : N]^T +
///              b[N/2 : N] (up rows), N/2 columns of, by the activation,
///              silu:   out[r, :] = silu(g) * u;
///              gptoss: g' = min(g, limit), u' = clamp(u, -limit, limit),
///                      out[r, :] = (u' + 1) * g' * sigmoid(alpha * g')
///                      (alpha and limit are compiled into the kernels);
///   row_scale: out[r, :] = (rows[r, :] @ weights[e]^T + b) * row_scale[r].
/// grouped_matmul_fp8.v1 (format fp8_block, contract §3.7): rows and weights
/// are float8_e4m3fn (1 byte) and each product is of the dequantized values,
///   rows[r, k] * rows_scale[r, k/128] and
///   weights[e, n, k] * weights_scale[e, n/128, k/128]
/// (integer division), accumulated in f32; format mxfp8 (added within
/// version 6): the same with UE8M0 scale bytes s (2^(s - 127)) per 32
/// elements along K,
///   rows[r, k] * 2^(rows_scale[r, k/32] - 127) and
///   weights[e, n, k] * 2^(weights_scale[e, n, k/32] - 127).
/// out is bf16 as above, except for a fp8_block swiglu entry with
/// out=f8E4M3FN (moeEntryInfo.out): there out holds
/// float8_e4m3fn codes [M, N/2] and out_scale an f32 scale per [1, 128]
/// group of a row, each group quantized as moeQuantize quantizes bf16 input
/// in [1, 128] blocks with f32 scales, from the bf16-rounded activation.
/// All tensors are dense and row-major.
typedef struct moeGroupedMatmulArgs {
  uint64_t rows;      ///< Device pointer, bf16 [M, K] (float8_e4m3fn for
                      ///< grouped_matmul_fp8.v1), 16-byte aligned.
  uint64_t weights;   ///< Device pointer, bf16 [E, N, K] (float8_e4m3fn for
                      ///< grouped_matmul_fp8.v1), 16-byte aligned.
  uint64_t offsets;   ///< Device pointer, [E + 1] of the entry's offsets type
                      ///< (i32 or i64), aligned to its element size.
  uint64_t out;       ///< Device pointer, bf16 [M, N] ([M, N/2] for swiglu
                      ///< entries; float8_e4m3fn [M, N/2] for out=f8E4M3FN
                      ///< entries), 16-byte aligned.
  int64_t m;          ///< Rows (1 <= M <= the entry's max_rows).
  int64_t n;          ///< The weights' N: the output columns, except for
                      ///< swiglu entries, where it is 2 x the output columns
                      ///< (even, >= 2) and out has N/2 columns. Must equal
                      ///< the entry's n unless that is -1.
  int64_t k;          ///< Reduction size, K >= 8 and K % 8 == 0 (16-byte
                      ///< rows; grouped_matmul_fp8.v1: K >= 16 and
                      ///< K % 16 == 0, format mxfp8: K >= 32 and
                      ///< K % 32 == 0, and K % 128 == 0 in a bundle for
                      ///< sm_100a); must equal the entry's k unless that
                      ///< is -1.
  int64_t experts;    ///< E >= 1; must equal the entry's experts unless -1.
  uint64_t row_scale; ///< Device pointer, f32 [M], 4-byte aligned: the
                      ///< routing weight of each row. Required by row_scale
                      ///< entries, must be 0 for the others.
  // Added in version 5.
  uint64_t bias; ///< Device pointer, [E, N] (N the weights' N) of the entry's
                 ///< bias type (f32 or bf16), aligned to its element size.
                 ///< Required by entries with bias=f32|bf16, must be 0 for
                 ///< bias=none ones.
  // Added in version 6.
  uint64_t rows_scale;    ///< Device pointer, f32 [M, ceil(K/128)], 4-byte
                          ///< aligned: the scale of each block of 128
                          ///< elements of a row of `rows` (format mxfp8:
                          ///< UE8M0 bytes [M, K/32], any alignment, one per
                          ///< 32 elements). Required by
                          ///< grouped_matmul_fp8.v1 entries, must be 0 for
                          ///< grouped_matmul.v3 ones.
  uint64_t weights_scale; ///< Device pointer, f32 [E, ceil(N/128),
                          ///< ceil(K/128)] (N the weights' N), 4-byte
                          ///< aligned: the scale of each 128 x 128 block of
                          ///< `weights` (format mxfp8: UE8M0 bytes
                          ///< [E, N, K/32], any alignment, one per 32
                          ///< elements of a row). Required by
                          ///< grouped_matmul_fp8.v1 entries, must be 0 for
                          ///< grouped_matmul.v3 ones.
  // Added within version 6.
  uint64_t out_scale; ///< Device pointer, f32 [M, N/256] (one per 128 of
                      ///< the N/2 output columns), 4-byte aligned: the
                      ///< scales of `out`. Required by out=f8E4M3FN
                      ///< entries (whose N must then be a multiple of 256),
                      ///< must be 0 for the others.
} moeGroupedMatmulArgs;

/// Launches the kernels of `entry` (an op=moe.grouped_matmul or
/// op=moe.expert_mlp entry of abi grouped_matmul.v3 or grouped_matmul_fp8.v1)
/// on `stream` (a CUstream; NULL is the legacy default stream) of the current
/// context. Validates every argument first (INVALID_ARGUMENT / NOT_FOUND with a
/// message naming the problem, without touching the driver), then loads the
/// bundle into the current context if moeBundleLoad has not (see there), then
/// encodes the TMA descriptors on the host and launches. A kernel whose
/// rows_min exceeds M cannot have an eligible expert and is not launched; every
/// other kernel is, in file order, on the grid (min(work, resident), 1, 1) of
/// contract §3.1 (out=f8E4M3FN entries: work counts the [1, 128] groups of
/// the N/2 output columns instead of column tiles, §3.7; a cluster=2
/// kernel: (2 * min(work, resident clusters), 1, 1), work counting pairs of
/// them), where `resident` was cached by the load: once loaded, the call makes
/// no driver queries. It neither synchronises, nor allocates or copies device
/// memory, so once the bundle is loaded it can be captured in a CUDA graph. The
/// contents of `offsets` are not read on the host: the kernels clamp them (see
/// the contract). The kernels read `offsets` before waiting on the previous
/// kernel of the stream (programmatic dependent launch, contract §3.6): a
/// caller's kernel just before this call that executes
/// griddepcontrol.launch_dependents must have written them by then. Besides the
/// checks listed with moeGroupedMatmulArgs: N, K and E at most 2^31 - 1,
/// E*N*K*2 bytes within int64, N*K*2 below 2^40 (a TMA stride;
/// grouped_matmul_fp8.v1: E*N*K and N*K, 1-byte elements), E*N*4 or E*N*2 bytes
/// of bias within int64. A grouped_matmul_fp8.v1 kernel takes the 17 parameters
/// of grouped_matmul.v3 with 1-byte (UINT8) tensor maps, then the rows_scale
/// and weights_scale memrefs (16 more: [M, ceil(K/128)] and [E, ceil(N/128),
/// ceil(K/128)], format mxfp8 [M, K/32] and [E, N, K/32]), then (out=f8E4M3FN
/// entries) the out_scale memref (7 more; out is then a memref of 1-byte
/// codes), then row_scale and bias as grouped_matmul.v3 (contract §3.7). The
/// pointers must be of the current context's device (not checked). Thread-safe.
/// Errors after a launch was issued name how many kernels had already been
/// launched.
MOE_API moeStatus moeGroupedMatmul(moeBundle *bundle, const char *entry,
                                   const moeGroupedMatmulArgs *args,
                                   void *stream);

/// Arguments of a routing step, ABI route.v1 (contract §3.2): for each token t,
/// the entry's top_k experts of the scores derived from logits[t, :] (plus
/// bias, when the entry has bias=1, for the choice), as ids[t, :] and their
/// routing weights[t, :]. Ties go to the lower expert id; a slot without a
/// valid candidate gets id -1. All tensors are dense and row-major.
typedef struct moeRouteArgs {
  uint64_t logits;  ///< Device pointer, [T, E] of the entry's logits type
                    ///< (f32 or bf16), aligned to its element size.
  uint64_t bias;    ///< Device pointer, f32 [E], 4-byte aligned: required by
                    ///< bias=1 entries, must be 0 for the others.
  uint64_t ids;     ///< Device pointer, i32 [T, top_k], 4-byte aligned.
  uint64_t weights; ///< Device pointer, f32 [T, top_k], 4-byte aligned.
  int64_t tokens;   ///< T: 1 <= T <= the entry's max_rows.
  int64_t experts;  ///< E: must equal the entry's experts.
} moeRouteArgs;

/// Launches the kernel of `entry` (an op=moe.route, abi=route.v1 entry) on
/// `stream` of the current context, on the grid (min(ceil(T / (threads/32)),
/// 65535), 1, 1) (one warp per token, grid-stride) with its 21 parameters (26
/// with a bias; contract §3.2). Validates every argument first
/// (INVALID_ARGUMENT / NOT_FOUND, without touching the driver; besides the
/// checks listed with moeRouteArgs: the T*E*2 or T*E*4 bytes of logits within
/// int64), then loads the bundle into the current context if needed (see
/// moeBundleLoad). No host synchronisation, allocation or copy: capturable in a
/// CUDA graph once the bundle is loaded. Thread-safe.
MOE_API moeStatus moeRoute(moeBundle *bundle, const char *entry,
                           const moeRouteArgs *args, void *stream);

/// Arguments of a combine, ABI unpermute.v2 (contract §3.3): for each token t,
///   out[t, :] = sum over j of weights[t, j] * rows[slots[t, j], :]
/// (weight 1 when the entry has weighted=0), skipping the slots outside
/// [0, M); bf16 rows and out, f32 accumulation. k is the entry's top_k. All
/// tensors are dense and row-major.
typedef struct moeUnpermuteArgs {
  uint64_t rows;      ///< Device pointer, bf16 [M, H], 16-byte aligned.
  uint64_t slots;     ///< Device pointer, [T, k] of the entry's slots type
                      ///< (i32 or i64), aligned to its element size.
  uint64_t weights;   ///< Device pointer, f32 [T, k], 4-byte aligned:
                      ///< required by weighted=1 entries, must be 0 for the
                      ///< others.
  uint64_t out;       ///< Device pointer, bf16 [T, H], 16-byte aligned.
  int64_t rows_count; ///< M >= 1.
  int64_t tokens;     ///< T: 1 <= T <= the entry's max_rows.
  int64_t hidden;     ///< H >= 8, H % 8 == 0; must equal the entry's hidden
                      ///< unless that is -1.
} moeUnpermuteArgs;

/// Launches the kernel of `entry` (an op=moe.unpermute, abi=unpermute.v2
/// entry) on `stream` of the current context, on the grid
/// (min(T * blocks, 1048576), 1, 1) with blocks = ceil(H / (8 * threads))
/// column blocks per token (the kernel grid-strides over the (token, column
/// block) pairs) with its 21 parameters (28 when weighted; contract §3.3).
/// Validates every argument first, as moeRoute does (besides the checks listed
/// with moeUnpermuteArgs: the bytes of rows, out and slots within int64), then
/// loads the bundle if needed. The contents of `slots` are not read on the
/// host. No host synchronisation, allocation or copy. Thread-safe.
MOE_API moeStatus moeUnpermute(moeBundle *bundle, const char *entry,
                               const moeUnpermuteArgs *args, void *stream);

/// Arguments of a permute, ABI permute.v2 (contract §3.4): the rows of the
/// tokens grouped by expert. With N = T*k (k the entry's top_k, E its
/// experts): offsets[e] is the first row of expert e (offsets[E] the number
/// of valid ids), rows[offsets[e] + i] = tokens[t] for the i-th (t, j), in
/// the order of the flattened [T, k] ids, with ids[t, j] == e, slots[t, j] =
/// that row; ids outside [0, E) get slot -1 and no row; rows from
/// offsets[E] on are zero. An entry with out=f8E4M3FN (moeEntryInfo.out)
/// writes those rows quantized instead: float8_e4m3fn codes in rows and an
/// f32 scale per [1, 128] group of a row in rows_scale, exactly what
/// moeQuantize of a [1, 128]-block, f32-scale, e4m3 entry makes of the bf16
/// rows (zero rows: codes 0 and scale 1). All tensors are dense and
/// row-major.
typedef struct moePermuteArgs {
  uint64_t tokens;      ///< Device pointer, bf16 [T, H], 16-byte aligned.
  uint64_t ids;         ///< Device pointer, i32 [T, k], 4-byte aligned.
  uint64_t rows;        ///< Device pointer, bf16 [N, H] (float8_e4m3fn
                        ///< [N, H] for out=f8E4M3FN entries), 16-byte
                        ///< aligned.
  uint64_t offsets;     ///< Device pointer, [E + 1] of the entry's offsets
                        ///< type (i32 or i64), aligned to its element size.
  uint64_t slots;       ///< Device pointer, [T, k] of the same type, aligned
                        ///< to its element size.
  uint64_t workspace;   ///< Device pointer, moePermuteWorkspaceBytes bytes
                        ///< (scratch: its contents on entry do not matter),
                        ///< 256-byte aligned.
  int64_t tokens_count; ///< T: 1 <= T <= the entry's max_rows, T*k at most
                        ///< 2^31 - 1.
  int64_t hidden;       ///< H >= 8, H % 8 == 0 (out=f8E4M3FN entries:
                        ///< H % 128 == 0); must equal the entry's hidden
                        ///< unless that is -1.
  // Added within version 6.
  uint64_t rows_scale; ///< Device pointer, f32 [N, H/128], 4-byte aligned:
                       ///< the scales of `rows`. Required by out=f8E4M3FN
                       ///< entries, must be 0 for the others.
} moePermuteArgs;

/// Launches the three kernels of `entry` (an op=moe.permute, abi=permute.v2
/// entry) on `stream` of the current context, in order: the count kernel
/// (12 parameters; not launched for a single chunk when the entry has
/// index_counts=1) and the index kernel (29) on grid (chunks, 1, 1), one CTA
/// per `chunk` ids (chunks = ceil(T*k / chunk)), then the gather kernel (24;
/// 31 with out=f8E4M3FN: the rows_scale memref [N, H/128] after the rows
/// memref of 1-byte codes) on grid (min(ceil(T*k / 4) * ceil(H / (8 *
/// threads)), 65535), 1, 1) (4 rows and a column block per CTA,
/// grid-stride; contract §3.4); an entry with scatter_from launches its
/// fourth kernel, the scatter, instead of the gather when T >= scatter_from
/// (33: the slots memref [T, k] for the sources; 4 tokens per CTA,
/// ceil(T / 4) for ceil(T*k / 4)).
/// Validates every argument first
/// (INVALID_ARGUMENT / NOT_FOUND, without touching the driver; besides the
/// checks listed with moePermuteArgs: the bytes of tokens and rows within
/// int64; pointers in the order of moePermuteArgs), then loads the
/// bundle if needed (see moeBundleLoad). The contents of `ids` are not read on
/// the host. No host synchronisation, allocation or copy: capturable in a CUDA
/// graph once the bundle is loaded. Thread-safe. An error of a later launch
/// says how many were issued.
MOE_API moeStatus moePermute(moeBundle *bundle, const char *entry,
                             const moePermuteArgs *args, void *stream);

/// Sets *bytes to the size of the workspace moePermute needs for
/// `tokens_count` tokens: with N = T*k and chunks = ceil(N / chunk), the
/// sources (i32 [N]) at 0, then the per-chunk expert counts (i32
/// [chunks * E]) from align_up(N*4, 256): align_up(N*4, 256) + chunks*E*4.
/// Checks the entry and T as moePermute does (INVALID_ARGUMENT / NOT_FOUND).
/// No driver call.
MOE_API moeStatus moePermuteWorkspaceBytes(const moeBundle *bundle,
                                           const char *entry,
                                           int64_t tokens_count,
                                           int64_t *bytes);

/// Arguments of a whole MoE layer, ABI layer.v1 (contract §3.5): with k the
/// route's top_k, E its experts and I the intermediate size,
///   ids, weights = route(logits, score_bias);
///   rows, offsets, slots = permute(tokens, ids);
///   inter = swiglu(rows @ gate_up_weights[e]^T + gate_up_bias[e]);
///   down = inter @ down_weights[e]^T + down_bias[e];
///   out[t, :] = sum over j of weights[t, j] * down[slots[t, j], :],
/// the intermediate tensors living in `workspace`. ABI layer_fp8.v1 (contract
/// §3.10, added within version 6): the same with block-FP8 GEMMs, rows and
/// inter quantized (e4m3 values, an f32 scale per [1, 128] group: rows by
/// moeQuantize or, in a layer without a quantize part, by the permute's
/// gather itself; inter by moeQuantize or, in a layer without an
/// intermediate part, by the gate-up GEMM itself) before the gate-up and
/// down GEMMs,
/// float8_e4m3fn weights with an f32 scale per [128, 128] block; with
/// format=mxfp8 GEMMs (added within version 6) rows and inter quantized
/// by moeQuantize (e4m3 values, a UE8M0 scale byte per [1, 32] group:
/// always by the quantize and intermediate parts), float8_e4m3fn weights
/// with a UE8M0 scale byte per 32 elements of a row. All tensors are dense
/// and row-major.
typedef struct moeLayerArgs {
  uint64_t tokens;          ///< Device pointer, bf16 [T, H], 16-byte aligned.
  uint64_t logits;          ///< Device pointer, [T, E] of the route's logits
                            ///< type, aligned to its element size.
  uint64_t score_bias;      ///< Device pointer, f32 [E], 4-byte aligned:
                            ///< required iff the route entry has bias=1,
                            ///< else 0.
  uint64_t gate_up_weights; ///< Device pointer, bf16 [E, 2I, H]
                            ///< (float8_e4m3fn for layer_fp8.v1), 16-byte
                            ///< aligned: I gate rows, then I up rows.
  uint64_t down_weights;    ///< Device pointer, bf16 [E, H, I]
                            ///< (float8_e4m3fn for layer_fp8.v1), 16-byte
                            ///< aligned.
  uint64_t gate_up_bias;    ///< Device pointer, [E, 2I] of the gate_up
                            ///< entry's bias type: required iff its bias is
                            ///< not none, else 0.
  uint64_t down_bias;       ///< Device pointer, [E, H] of the down entry's
                            ///< bias type: required iff its bias is not
                            ///< none, else 0.
  uint64_t out;             ///< Device pointer, bf16 [T, H], 16-byte aligned.
  uint64_t workspace;       ///< Device memory, 256-byte aligned, at least
                            ///< moeLayerWorkspaceBytes bytes.
  uint64_t workspace_bytes; ///< Its size.
  int64_t tokens_count;     ///< T: 1 <= T <= the layer's max_rows.
  int64_t hidden;           ///< H >= 8, H % 8 == 0 (layer_fp8.v1: H >= 128,
                            ///< H % 128 == 0; of mxfp8 GEMMs: H >= 32,
                            ///< H % 32 == 0).
  int64_t intermediate;     ///< I >= 8, I % 8 == 0 (the gate_up weights
                            ///< have 2I rows; layer_fp8.v1: I >= 128,
                            ///< I % 128 == 0; of mxfp8 GEMMs: I >= 32,
                            ///< I % 32 == 0).
  int64_t experts;          ///< E: must equal the route's experts.
  // layer_fp8.v1 (added within version 6); must be 0 for layer.v1.
  uint64_t gate_up_weights_scale; ///< Device pointer, f32 [E, 2I/128,
                                  ///< H/128], 4-byte aligned: the scale of
                                  ///< each 128 x 128 block of
                                  ///< gate_up_weights (mxfp8 GEMMs: UE8M0
                                  ///< bytes [E, 2I, H/32], any alignment).
                                  ///< Required.
  uint64_t down_weights_scale;    ///< Device pointer, f32 [E, H/128, I/128],
                                  ///< 4-byte aligned: the scale of each
                                  ///< 128 x 128 block of down_weights
                                  ///< (mxfp8 GEMMs: UE8M0 bytes [E, H, I/32],
                                  ///< any alignment). Required.
} moeLayerArgs;

/// Launches the layer `entry` (an op=moe.layer, abi=layer.v1 entry) on
/// `stream` of the current context: its route, permute (count, index and
/// gather), gate_up, down and unpermute entries, in this order, exactly as
/// moeRoute, moePermute, moeGroupedMatmul (twice) and moeUnpermute would with
/// buffers carved from the workspace (contract §3.5). An abi=layer_fp8.v1
/// entry (contract §3.10) launches route, permute, quantize (moeQuantize of
/// the gathered rows), gate_up, intermediate (moeQuantize of its output),
/// down and unpermute, the GEMMs block-FP8 or MXFP8 (moeGroupedMatmul with
/// the quantized rows, their scales and the weights' scales of `args`, the
/// down GEMM writing the dead bf16 rows); one without a quantize part (of
/// fp8_block GEMMs only) has no quantize step, its permute (out=f8E4M3FN)
/// writing the quantized rows and their scales itself, and one without an
/// intermediate part (of fp8_block GEMMs only) no intermediate step, its
/// gate_up (out=f8E4M3FN) writing the quantized inter and its scales itself
/// (five steps without either). The grouped
/// GEMMs take
/// M = T*k rows (those past offsets[E] are zero and owned by no expert) but
/// skip their kernels for experts of more than T rows, which a layer cannot
/// have (a token's ids are distinct); the combine takes the route's
/// weights. Validates every argument of every step
/// before the first launch (INVALID_ARGUMENT / NOT_FOUND, naming the layer
/// argument, without launching anything), then loads the bundle into the
/// current context if needed (see moeBundleLoad) and encodes the GEMMs'
/// tensor maps. No host synchronisation, allocation or copy: capturable in
/// a CUDA graph once the bundle is loaded. The contents of the device
/// buffers are not read on the host. Thread-safe. An error after launches
/// began says how many were issued.
MOE_API moeStatus moeLayer(moeBundle *bundle, const char *entry,
                           const moeLayerArgs *args, void *stream);

/// Sets *bytes to the workspace moeLayer needs for `tokens` tokens of size
/// `hidden` and an intermediate size `intermediate`: the buffers of
/// contract §3.5 (layer_fp8.v1: then those of the quantized rows and inter
/// and their scales, §3.10; the same bytes whatever the GEMMs' format), each
/// starting at a multiple of 256 bytes. Checks the entry and the sizes as
/// moeLayer does (INVALID_ARGUMENT / NOT_FOUND: T in 1..max_rows, T*k at
/// most 2^31 - 1, H and I positive multiples of 8 (of 128 for layer_fp8.v1,
/// of 32 for one of mxfp8 GEMMs) and equal to the parts' static sizes, the
/// total within int64). No driver call.
MOE_API moeStatus moeLayerWorkspaceBytes(const moeBundle *bundle,
                                         const char *entry, int64_t tokens,
                                         int64_t hidden, int64_t intermediate,
                                         uint64_t *bytes);

/// Arguments of a quantization, ABI quantize.v1 (contract §3.8): `input`
/// [batch, rows, cols] (rank 3) or [rows, cols] (rank 2, batch 1) cut into
/// blocks of [block_rows, block_cols] of the entry (per expert for rank 3);
/// for a block with largest magnitude amax:
///   e8m0 scales: scale = 2^clamp(floor(log2(amax)) - emax, -127, 127)
///                (emax = 8 for e4m3, 15 for e5m2; an all-zero block gets
///                2^-127), stored as its E8M0 code (1 byte);
///   f32 scales:  scale = amax / max (448 for e4m3, 57344 for e5m2),
///                1 when that is 0;
///   values:      the FP8 code of input / scale (IEEE f32 division), rounded
///                to nearest, ties to even, saturated to +-max;
///   a block with a NaN or an infinity: scale NaN (E8M0 0xFF, f32
///   0x7FC00000), every value 0x7F (NaN).
/// Exactly moe.quantize's CPU lowering, bit for bit. All tensors are dense
/// and row-major; none may overlap another.
typedef struct moeQuantizeArgs {
  uint64_t input;  ///< Device pointer, [batch, rows, cols] of the entry's
                   ///< input type (bf16 or f32), 16-byte aligned.
  uint64_t values; ///< Device pointer, 1-byte FP8 codes of the entry's
                   ///< element, [batch, rows, cols], 16-byte aligned.
  uint64_t scales; ///< Device pointer, [batch, rows/block_rows,
                   ///< cols/block_cols] f32 (4-byte aligned) or E8M0 codes
                   ///< (1 byte).
  int64_t batch;   ///< E >= 1, equal to the entry's batch unless that is -1;
                   ///< 1 for rank-2 entries.
  int64_t rows;    ///< R: 1 <= R <= max_rows, a multiple of block_rows,
                   ///< equal to the entry's rows unless that is -1.
  int64_t cols;    ///< C >= 1, a multiple of block_cols, equal to the
                   ///< entry's cols unless that is -1.
} moeQuantizeArgs;

/// Launches the kernel of `entry` (an op=moe.quantize or op=moe.expert_mlp,
/// abi=quantize.v1 entry) on `stream` of the current context with its 21
/// parameters (the input, values and scales as [batch*rows, cols], [batch*rows,
/// cols] and [batch*rows/block_rows, cols/block_cols] memrefs), on the grid of
/// contract §3.8: (min(ceil(batch*rows*cols / (32*threads)), 65535), 1, 1) for
/// [1, B] blocks (32 elements per thread), (min(batch*rows*cols / (128*128),
/// 65535), 1, 1) for [128, 128] blocks (a CTA per block); the kernel
/// grid-strides beyond. Validates every argument first
/// (INVALID_ARGUMENT / NOT_FOUND with a message naming it, without touching
/// the driver; besides the checks listed with moeQuantizeArgs: the input's
/// bytes within int64), then loads the bundle into the current context if
/// needed (see moeBundleLoad). The contents of `input` are not read on the
/// host. No host synchronisation, allocation or copy: capturable in a CUDA
/// graph once the bundle is loaded. Thread-safe.
MOE_API moeStatus moeQuantize(moeBundle *bundle, const char *entry,
                              const moeQuantizeArgs *args, void *stream);

/// A call of an entry through its launch plan (docs/launch-plans.md): the
/// entry's dynamic sizes in the order of its `size` records, the device
/// addresses of its arguments in the order of its `arg` records (0 for an
/// absent optional argument), and the workspace (0 and 0 when the plan has
/// no workspace slices; moeWorkspaceBytes says how much).
typedef struct moeLaunchArgs {
  const int64_t *sizes;     ///< num_sizes values
  int32_t num_sizes;        ///< the entry's `size` records
  int32_t num_args;         ///< the entry's `arg` records
  const uint64_t *args;     ///< num_args device addresses
  uint64_t workspace;       ///< device address, 16-byte aligned
  uint64_t workspace_bytes; ///< bytes at `workspace`
} moeLaunchArgs;

/// Runs `entry` by its launch plan on `stream` of the current context:
/// checks the sizes against their ranges, the plan's checks, every argument
/// (non-null unless optional, aligned, bytes within int64), the workspace,
/// and that no output overlaps another argument or the workspace, each
/// error (INVALID_ARGUMENT, NOT_FOUND) naming what is wrong and launching
/// nothing; then loads the bundle into the current context if needed and
/// issues the plan's launches in order (the tensor maps it describes
/// encoded first). An entry without a plan is INVALID_ARGUMENT. No host
/// synchronisation, allocation or copy: capturable in a CUDA graph once the
/// bundle is loaded. Thread-safe.
MOE_API moeStatus moeLaunch(moeBundle *bundle, const char *entry,
                            const moeLaunchArgs *args, void *stream);

/// The workspace bytes moeLaunch needs for `entry` with these sizes (in the
/// order of its `size` records) into *bytes (0 when its plan has no
/// workspace). INVALID_ARGUMENT for a size out of range or an entry
/// without a plan.
MOE_API moeStatus moeWorkspaceBytes(const moeBundle *bundle, const char *entry,
                                    const int64_t *sizes, int32_t num_sizes,
                                    uint64_t *bytes);

#ifdef __cplusplus
} // extern "C"
#endif

#endif // MOE_RUNTIME_H
