/*===- moe_runtime.h - C API of the moe-mlir launch runtime -------*- C -*-===*\
|*                                                                            *|
|* Reads the `.moebundle` files that `moe-translate --moe-to-bundle` writes *|
|* and launches their kernels through the CUDA driver API. The contract this  *|
|* implements is docs/runtime-contract.md (bundle version 3, kernel ABI       *|
|* grouped_matmul.v3: persistent kernels with a store, swiglu or row_scale    *|
|* epilogue).                                                                 *|
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

/// The bundle format version this runtime reads (`MOEBUNDLE 3`).
#define MOE_BUNDLE_VERSION 3
/// The only kernel ABI this runtime launches (persistent kernels with an
/// epilogue).
#define MOE_ABI_GROUPED_MATMUL "grouped_matmul.v3"
/// The op names of entries that moeGroupedMatmul launches: a grouped matmul,
/// and the two halves (`<name>_gate_up`, `<name>_down`) of a fused expert MLP.
#define MOE_OP_GROUPED_MATMUL "moe.grouped_matmul"
#define MOE_OP_EXPERT_MLP "moe.expert_mlp"
/// The epilogues of an entry (contract §3): out = rows @ weights^T; the
/// SwiGLU of its gate and up halves; scaled by a weight per row.
#define MOE_EPILOGUE_STORE "store"
#define MOE_EPILOGUE_SWIGLU "swiglu"
#define MOE_EPILOGUE_ROW_SCALE "row_scale"

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

/// One `entry` record: a compiled op and its kernels.
typedef struct moeEntryInfo {
  const char *name;     ///< Unique in the bundle; moeGroupedMatmul's `entry`.
  const char *op;       ///< "moe.grouped_matmul" or "moe.expert_mlp".
  const char *abi;      ///< e.g. "grouped_matmul.v3".
  int64_t experts;      ///< E of the weights [E, N, K], or -1 (dynamic).
  int64_t n;            ///< N, or -1 (dynamic).
  int64_t k;            ///< K, or -1 (dynamic).
  int64_t max_rows;     ///< Largest M accepted, at most 2^31 - 1.
  int32_t offsets_bits; ///< 32 (offsets=i32) or 64 (offsets=i64).
  int32_t num_kernels;  ///< Kernel records of the entry, in file order.
  const char *epilogue; ///< "store", "swiglu" or "row_scale".
} moeEntryInfo;

/// One `kernel` record of an entry.
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
/// sets its CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to `smem`, then
/// caches how many of its CTAs the device holds at once (its
/// cuOccupancyMaxActiveBlocksPerMultiprocessor for `threads` and `smem`, times
/// the device's multiprocessor count): the persistent grid of contract §3.
/// Idempotent per context; a bundle may be loaded into several contexts (one
/// per device). Thread-safe. Module loading is not allowed while a stream is
/// being captured, so call this before capturing moeGroupedMatmul in a graph.
/// Errors: NO_GPU, UNSUPPORTED (compute capability, or a kernel of which not
/// one CTA fits on a multiprocessor), CUDA_ERROR, NOT_FOUND (kernel symbol
/// missing from its image), OUT_OF_MEMORY.
MOE_API moeStatus moeBundleLoad(moeBundle *bundle);

/// Arguments of a grouped matmul, ABI grouped_matmul.v3, for the rows r of
/// expert e (offsets[e] <= r < offsets[e + 1]), by the entry's epilogue:
///   store:     out[r, :] = rows[r, :] @ weights[e]^T;
///   swiglu:    with g = rows[r, :] @ weights[e][0 : N/2]^T (gate rows) and
///              u = rows[r, :] @ weights[e][N/2 : N]^T (up rows),
///              out[r, :] = silu(g) * u, N/2 columns;
///   row_scale: out[r, :] = (rows[r, :] @ weights[e]^T) * row_scale[r].
/// All tensors are dense and row-major.
typedef struct moeGroupedMatmulArgs {
  uint64_t rows;      ///< Device pointer, bf16 [M, K], 16-byte aligned.
  uint64_t weights;   ///< Device pointer, bf16 [E, N, K], 16-byte aligned.
  uint64_t offsets;   ///< Device pointer, [E + 1] of the entry's offsets type
                      ///< (i32 or i64), aligned to its element size.
  uint64_t out;       ///< Device pointer, bf16 [M, N] ([M, N/2] for swiglu
                      ///< entries), 16-byte aligned.
  int64_t m;          ///< Rows (1 <= M <= the entry's max_rows).
  int64_t n;          ///< The weights' N: the output columns, except for
                      ///< swiglu entries, where it is 2 x the output columns
                      ///< (even, >= 2) and out has N/2 columns. Must equal
                      ///< the entry's n unless that is -1.
  int64_t k;          ///< Reduction size, K >= 8 and K % 8 == 0; must equal
                      ///< the entry's k unless that is -1.
  int64_t experts;    ///< E >= 1; must equal the entry's experts unless -1.
  uint64_t row_scale; ///< Device pointer, f32 [M], 4-byte aligned: the
                      ///< routing weight of each row. Required by row_scale
                      ///< entries, must be 0 for the others.
} moeGroupedMatmulArgs;

/// Launches the kernels of `entry` (an op=moe.grouped_matmul or
/// op=moe.expert_mlp, abi=grouped_matmul.v3 entry) on `stream` (a CUstream;
/// NULL is the legacy default stream) of the current context. Validates every
/// argument first (INVALID_ARGUMENT / NOT_FOUND with a message naming the
/// problem, without touching the driver), then loads the bundle into the
/// current context if moeBundleLoad has not (see there), then encodes the TMA
/// descriptors on the host and launches. A kernel whose rows_min exceeds M
/// cannot have an eligible expert and is not launched; every other kernel is,
/// in file order, on the grid (min(work, resident), 1, 1) of contract §3, where
/// `resident` was cached by the load: once loaded, the call makes no driver
/// queries. It neither synchronises, nor allocates or copies device memory, so
/// once the bundle is loaded it can be captured in a CUDA graph. The contents
/// of `offsets` are not read on the host: the kernels clamp them (see the
/// contract). Besides the checks listed with moeGroupedMatmulArgs: N, K and
/// E at most 2^31 - 1, E*N*K*2 bytes within int64, N*K*2 below 2^40 (a TMA
/// stride). The pointers must be of the current context's device (not
/// checked). Thread-safe. Errors after a launch was issued name how many
/// kernels had already been launched.
MOE_API moeStatus moeGroupedMatmul(moeBundle *bundle, const char *entry,
                                   const moeGroupedMatmulArgs *args,
                                   void *stream);

#ifdef __cplusplus
} // extern "C"
#endif

#endif // MOE_RUNTIME_H
