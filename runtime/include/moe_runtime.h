/*===- moe_runtime.h - C API of the moe-mlir launch runtime -------*- C -*-===*\
|*                                                                            *|
|* Reads the `.moebundle` files that `moe-translate --moe-to-bundle` writes *|
|* and runs their entries through the CUDA driver API. Each entry carries    *|
|* its launch plan, the host program the compiler wrote for it (signature,   *|
|* checks, workspace slices, launches); moeLaunch executes any plan. The     *|
|* contract this implements is docs/runtime-contract.md (bundle version 7).  *|
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

/// The newest bundle format version this runtime reads (`MOEBUNDLE 7`).
/// Versions 1 to 6 still open (their entries can be listed), but only
/// version 7 entries carry the launch plans moeLaunch runs.
#define MOE_BUNDLE_VERSION 7
/// The kernel ABIs of entries (moeEntryInfo.abi): what an entry computes,
/// contract §3. How to run it is its launch plan's.
#define MOE_ABI_GROUPED_MATMUL "grouped_matmul.v3"
#define MOE_ABI_GROUPED_MATMUL_FP8 "grouped_matmul_fp8.v1"
#define MOE_ABI_ROUTE "route.v1"
#define MOE_ABI_UNPERMUTE "unpermute.v2"
#define MOE_ABI_PERMUTE "permute.v2"
#define MOE_ABI_LAYER "layer.v1"
#define MOE_ABI_QUANTIZE "quantize.v1"
#define MOE_ABI_LAYER_FP8 "layer_fp8.v1"
#define MOE_ABI_GROUPED_WGRAD "grouped_wgrad.v1"
#define MOE_ABI_PLANNED "planned.v1"
#define MOE_ABI_PROGRAM "program.v1"
/// The op names of entries: a grouped matmul, and the two halves
/// (`<name>_gate_up`, `<name>_down`) of a fused expert MLP (a block-FP8 one
/// has a third part between them, `<name>_intermediate`, a quantize.v1
/// entry).
#define MOE_OP_GROUPED_MATMUL "moe.grouped_matmul"
/// A grouped matmul against untransposed weights: out = rows @ weights[e],
/// weights [E, K, N] (grouped_matmul.v3 with weights=kn, contract §3.1).
#define MOE_OP_GROUPED_DGRAD "moe.grouped_dgrad"
/// Per-expert weight gradients, out [E, N, K] = grad[rows of e]^T @
/// rows[rows of e] (grouped_wgrad.v1, contract §3.11).
#define MOE_OP_GROUPED_WGRAD "moe.grouped_wgrad"
#define MOE_OP_EXPERT_MLP "moe.expert_mlp"
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
  int32_t version;     ///< MOEBUNDLE version: 7, or 6 (plans optional).
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
  const char *op;       ///< "moe.grouped_matmul", "moe.grouped_dgrad"
                        ///< (weights [E, K, N]), "moe.expert_mlp",
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

/// A program.v1 entry that is a stage of a split function
/// (--moe-split-exchanges, contract §3.14): which stage of which function,
/// the exchange its caller performs after it, and the split function's
/// arguments and results. A list is names joined by ',' ("" when empty);
/// the entry's own arguments and results are its plan's.
typedef struct moeStageInfo {
  const char *function;         ///< The split function @F (stages F_stage<i>).
  int32_t stage;                ///< i: 0, 1, ... in call order.
  const char *exchange;         ///< "moe.dispatch", "moe.undispatch", or ""
                                ///< after the last stage.
  int32_t ranks;                ///< The exchange's ranks (0 without one).
  const char *exchange_args;    ///< The values the exchange takes, by name.
  const char *exchange_results; ///< The names of what the exchange gives.
  const char *function_args;    ///< @F's arguments, in order.
  const char *function_results; ///< @F's results, in order.
} moeStageInfo;

/// Fills *out for entry `index` when it is a stage; NOT_FOUND when it is
/// not (another ABI, or a program.v1 entry of a function not split).
MOE_API moeStatus moeBundleGetStage(const moeBundle *bundle, int32_t index,
                                    moeStageInfo *out);

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
/// persistent grid of contract §3.1 (`resident` in plan expressions).
/// Idempotent per context; a bundle may be loaded into several contexts (one
/// per device). Thread-safe. Module loading is not allowed while a stream is
/// being captured, so call this before capturing moeLaunch in a graph.
/// Errors: NO_GPU, UNSUPPORTED (compute capability, or a kernel of which not
/// one CTA, or not one cluster, fits), CUDA_ERROR, NOT_FOUND (kernel symbol
/// missing from its image), OUT_OF_MEMORY.
MOE_API moeStatus moeBundleLoad(moeBundle *bundle);

/* Launching. Every entry of a version-7 bundle carries its launch plan
 * (contract §4): its signature (the dynamic sizes a call passes and its
 * arguments, with element types, alignment and dims as expressions of the
 * sizes), the checks a call must pass, the workspace slices, and the
 * kernel launches in order with their grids and parameters. moeLaunch runs
 * any entry by its plan. Every kernel is launched with programmatic
 * dependent launch (contract §3.6): cuLaunchKernelEx with the attribute
 * CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1, or
 * cuLaunchKernel where the driver lacks cuLaunchKernelEx. The environment
 * variable MOE_RUNTIME_PDL=0 turns it off (cuLaunchKernel); it is read at
 * each call, but a captured CUDA graph keeps what was captured. A kernel
 * with cluster=2 (contract §3.1) goes through cuLaunchKernelEx with
 * CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = (2, 1, 1) first, with PDL or
 * not. */

/// The element type of a plan argument.
typedef enum moeDtype {
  MOE_DTYPE_BF16 = 0,
  MOE_DTYPE_F32 = 1,
  MOE_DTYPE_I32 = 2,
  MOE_DTYPE_I64 = 3,
  MOE_DTYPE_E4M3 = 4, ///< float8_e4m3fn codes (1 byte)
  MOE_DTYPE_E5M2 = 5, ///< float8_e5m2 codes (1 byte)
  MOE_DTYPE_E8M0 = 6  ///< UE8M0 scale codes (1 byte: 2^(code - 127))
} moeDtype;

/// What a call does with an argument.
typedef enum moeArgRole {
  MOE_ARG_IN = 0,       ///< read
  MOE_ARG_OUT = 1,      ///< written; overlaps nothing else of the call
  MOE_ARG_OPTIONAL = 2, ///< read, or 0 (the kernels then get a null pointer)
  MOE_ARG_DONATED = 3   ///< read, then overwritten by the call (its contents
                        ///< afterwards are unspecified); overlaps nothing
                        ///< else of the call, as an output
} moeArgRole;

/// The most dims of a plan argument.
#define MOE_MAX_RANK 8

/// An entry's launch plan in numbers.
typedef struct moeSignature {
  int32_t num_sizes;  ///< `size` records: the dynamic sizes of a call.
  int32_t num_args;   ///< `arg` records: the device buffers of a call.
  int32_t num_checks; ///< `check` records.
  int32_t num_slices; ///< `work` records: workspace slices.
  int32_t num_steps;  ///< `launch` records.
} moeSignature;

/// A dynamic size of an entry (T tokens, M rows, or N, K, E, H, R, C where
/// the IR left them dynamic): its name and range as plan expressions
/// (canonical text; both are constants in what moe-translate writes).
/// Strings live until moeBundleClose.
typedef struct moeSizeInfo {
  const char *name;
  const char *min;
  const char *max;
} moeSizeInfo;

/// An argument of an entry: a dense row-major device buffer.
typedef struct moeArgInfo {
  const char *name; ///< e.g. "tokens", "gate_up_weights", "out".
  int32_t dtype;    ///< a moeDtype
  int32_t role;     ///< a moeArgRole
  int64_t align;    ///< byte alignment the kernels need (power of 2)
  int32_t rank;     ///< number of dims, 0..MOE_MAX_RANK (0: one element)
  const char *dims; ///< comma-separated expressions of the sizes ("T,4096")
} moeArgInfo;

/// Fills *out with the counts of `entry`'s plan. INVALID_ARGUMENT for an
/// entry without a plan (a version-6 bundle's), NOT_FOUND for no entry.
MOE_API moeStatus moeEntryGetSignature(const moeBundle *bundle,
                                       const char *entry, moeSignature *out);

/// Fills *out for size `index` (0 <= index < num_sizes) of `entry`.
MOE_API moeStatus moeEntryGetSize(const moeBundle *bundle, const char *entry,
                                  int32_t index, moeSizeInfo *out);

/// Fills *out for argument `index` (0 <= index < num_args) of `entry`.
MOE_API moeStatus moeEntryGetArg(const moeBundle *bundle, const char *entry,
                                 int32_t index, moeArgInfo *out);

/// Evaluates the dims of argument `index` of `entry` for `sizes` (in the
/// order of its size records, each checked against its range) into
/// dims[0 .. rank): the shape the buffer of a call with those sizes has.
/// INVALID_ARGUMENT naming the size or the overflow otherwise.
MOE_API moeStatus moeEntryArgShape(const moeBundle *bundle, const char *entry,
                                   int32_t index, const int64_t *sizes,
                                   int32_t num_sizes, int64_t *dims);

/// A call of an entry through its launch plan: the entry's dynamic sizes
/// in the order of its `size` records, the device addresses of its
/// arguments in the order of its `arg` records (0 for an absent optional
/// argument), and the workspace (0 and 0 when the plan has no workspace
/// slices; moeWorkspaceBytes says how much).
typedef struct moeLaunchArgs {
  const int64_t *sizes;     ///< num_sizes values
  int32_t num_sizes;        ///< the entry's `size` records
  int32_t num_args;         ///< the entry's `arg` records
  const uint64_t *args;     ///< num_args device addresses
  uint64_t workspace;       ///< device address, aligned to the plan's
                            ///< largest slice alignment (256)
  uint64_t workspace_bytes; ///< bytes at `workspace`
} moeLaunchArgs;

/// Runs `entry` by its launch plan on `stream` (a CUstream; NULL is the
/// legacy default stream) of the current context: checks the sizes against
/// their ranges, the plan's checks, every argument (non-null unless
/// optional, aligned, bytes within int64), the workspace, and that no
/// output overlaps another argument or the workspace and the workspace no
/// argument, each error
/// (INVALID_ARGUMENT, NOT_FOUND) naming what is wrong and launching
/// nothing, without touching the driver; then loads the bundle into the
/// current context if moeBundleLoad has not and issues the plan's launches
/// in order (the tensor maps it describes encoded first, on the host). The
/// contents of the buffers are never read on the host. An entry without a
/// plan (a version-6 bundle's) is INVALID_ARGUMENT. No host synchronisation,
/// allocation or copy, and once loaded no driver query: capturable in a CUDA
/// graph once the bundle is loaded. The pointers must be of the current
/// context's device (not checked). Thread-safe. An error after launches
/// began says how many were issued.
MOE_API moeStatus moeLaunch(moeBundle *bundle, const char *entry,
                            const moeLaunchArgs *args, void *stream);

/// The workspace bytes moeLaunch needs for `entry` with these sizes (in the
/// order of its `size` records) into *bytes (0 when its plan has no
/// workspace): its slices laid out in order, each at its alignment.
/// INVALID_ARGUMENT for a size out of range or an entry without a plan.
/// No driver call.
MOE_API moeStatus moeWorkspaceBytes(const moeBundle *bundle, const char *entry,
                                    const int64_t *sizes, int32_t num_sizes,
                                    uint64_t *bytes);

/* ------------------------------------------------------------------------ */
/* Expert-parallel exchanges through NCCL (docs/expert-parallel.md)          */
/* ------------------------------------------------------------------------ */

/// moe.dispatch and moe.undispatch between the stage entries of an
/// expert-parallel layer (--moe-split-exchanges), on one rank of the
/// caller's NCCL communicator of N ranks, for a layer of E experts (rank d
/// owns experts [d*E/N, (d+1)*E/N)). NCCL is libnccl.so.2 as the process
/// has it (PyTorch's, when it is loaded), or $MOE_NCCL_LIBRARY. Every rank
/// makes the same calls in the same order. Each call synchronizes `stream`
/// (NCCL's send and receive sizes are host values): not capturable in a
/// CUDA graph. Device addresses are of the current context's device.
typedef struct moeExchange moeExchange;

/// An exchange over `nccl_comm` (an ncclComm_t the caller keeps alive and
/// owns) for E = `experts`, which N must divide. UNSUPPORTED when NCCL or
/// the driver's copies are missing, with the reason.
MOE_API moeStatus moeExchangeCreate(void *nccl_comm, int64_t experts,
                                    moeExchange **out);
MOE_API void moeExchangeDestroy(moeExchange *exchange);

/// N and this rank's index.
MOE_API moeStatus moeExchangeGetRanks(const moeExchange *exchange,
                                      int32_t *ranks, int32_t *rank);

/// The device workspace the exchange calls take: N * E/N counts sent and
/// as many received (int64), aligned to 8.
MOE_API moeStatus moeExchangeWorkspaceBytes(const moeExchange *exchange,
                                            uint64_t *bytes);

/// moe.dispatch, first half. `offsets` (E + 1 integers of `offsets_bits` 32
/// or 64, device) group this rank's `rows` rows by expert, read as
/// moe.grouped_matmul reads them (clamped to [0, rows], never decreasing).
/// Exchanges the rows per local expert with every rank; writes `counts` (N
/// int64, device: the op's counts, rows received from each rank) and, on the
/// host, *sent (rows this rank sends: the undispatch's result rows) and
/// *received (R: the rows moeDispatchRows receives).
MOE_API moeStatus moeDispatchCounts(moeExchange *exchange, uint64_t offsets,
                                    int32_t offsets_bits, int64_t rows,
                                    uint64_t counts, uint64_t workspace,
                                    int64_t *sent, int64_t *received,
                                    void *stream);

/// moe.dispatch, second half, after this exchange's last moeDispatchCounts:
/// sends the rows of `rows` (`row_bytes` each) to their experts' ranks and
/// receives `received` (R rows, from rank 0 first) and `local_ids` (R int32:
/// each received row's expert on this rank).
MOE_API moeStatus moeDispatchRows(moeExchange *exchange, uint64_t rows,
                                  int64_t row_bytes, uint64_t received,
                                  uint64_t local_ids, void *stream);

/// moe.undispatch: `rows` (`num_rows` = the sum of `counts`, in the order
/// moeDispatchRows received them) go back to their ranks; `result` (the
/// dispatch's *sent rows) gets, at the rows this rank sent rank d, what d
/// returns. `counts` and `offsets` are the dispatch's (device), `rows_sent`
/// its `rows`. Synchronizes to read counts and offsets.
MOE_API moeStatus moeUndispatch(moeExchange *exchange, uint64_t rows,
                                int64_t num_rows, int64_t row_bytes,
                                uint64_t counts, uint64_t offsets,
                                int32_t offsets_bits, int64_t rows_sent,
                                uint64_t result, int64_t result_rows,
                                void *stream);

/// A communicator of the process's NCCL for a caller without NCCL bindings:
/// ncclGetUniqueId into `id` (128 bytes, to share with every rank), then
/// ncclCommInitRank; moeNcclCommDestroy frees it.
MOE_API moeStatus moeNcclGetUniqueId(void *id);
MOE_API moeStatus moeNcclCommInitRank(int32_t ranks, const void *id,
                                      int32_t rank, void **comm);
MOE_API moeStatus moeNcclCommDestroy(void *comm);

#ifdef __cplusplus
} // extern "C"
#endif

#endif // MOE_RUNTIME_H
