//===- Contract.td - the compiler <-> runtime contract, declared once ----===//
//
// The records of a .moebundle (docs/runtime-contract.md §2, §4) and the C
// API's enums and structs, in one place. tools/tblgen/moe-tblgen.py reads
// llvm-tblgen's JSON dump of this file and
//   - generates runtime/contract/ContractTables.inc (committed, so that the
//     runtime builds without LLVM): the keys of every entry and kernel
//     record by ABI, which moe-translate writes in this order and the
//     runtime's reader checks; the plan element types and roles; the
//     version;
//   - checks (`contract-check`, run by test/Contract/drift.test) that
//     ContractTables.inc is what this file generates, and that the C header
//     (runtime/include/moe_runtime.h), the compiler's version
//     (include/MoE/Target/Contract.h) and the Python ctypes mirror
//     (python/moe_mlir/runtime.py) declare the same version, enums and
//     struct fields.
//
// A change here is a contract change: regenerate with
// `cmake --build build --target moe-contract-tables`, bump Version when a
// reader of the old contract could misread a new bundle.
//
//===----------------------------------------------------------------------===//

class ContractVersion<int v> { int value = v; }
def Version : ContractVersion<7>;

//===----------------------------------------------------------------------===//
// Bundle records
//===----------------------------------------------------------------------===//

// How a key's value is spelled, and which manifest attribute it comes from.
class KeyKind<string n> { string name = n; }
def IntKey : KeyKind<"Int">;   // decimal integer (an IntegerAttr)
def NameKey : KeyKind<"Name">; // [A-Za-z0-9_.$]+ (a StringAttr)
def TypeKey : KeyKind<"Type">; // i32, i64, f32, bf16 (a TypeAttr)
def FlagKey : KeyKind<"Flag">; // 0 or 1 (a BoolAttr)
def NamesKey : KeyKind<"Names">; // names joined by ',' (an ArrayAttr of StringAttr)

class Key<string n, KeyKind k, bit opt = 0> {
  string name = n;
  KeyKind kind = k;
  bit optional = opt; // absent means the default the contract gives
}
class Opt<string n, KeyKind k> : Key<n, k, 1>;

// The keys of a `kernel` line after its entry and symbol.
class KernelRecord<list<Key> k> { list<Key> keys = k; }

def GemmKernel : KernelRecord<[
  Key<"image", NameKey>, Key<"rows_min", IntKey>, Key<"rows_max", IntKey>,
  Key<"threads", IntKey>, Key<"smem", IntKey>, Key<"tile_m", IntKey>,
  Key<"tile_n", IntKey>, Key<"tile_k", IntKey>, Key<"stages", IntKey>,
  Key<"swap_ab", IntKey>, Opt<"cluster", IntKey>]>;
def SimpleKernel : KernelRecord<[
  Key<"image", NameKey>, Key<"threads", IntKey>, Key<"smem", IntKey>,
  Opt<"cluster", IntKey>]>;
def NoKernel : KernelRecord<[]>; // layers launch their parts' kernels

// An ABI: the keys of its `entry` line after the entry's name, in the
// order written and read, and the record of its kernels.
class Abi<string n, list<Key> k, KernelRecord kr> {
  string name = n;
  list<Key> entryKeys = k;
  KernelRecord kernel = kr;
}

defvar GemmKeys = [
  Key<"op", NameKey>, Key<"abi", NameKey>, Key<"experts", IntKey>,
  Key<"n", IntKey>, Key<"k", IntKey>, Key<"max_rows", IntKey>,
  Key<"offsets", TypeKey>, Key<"epilogue", NameKey>, Key<"bias", NameKey>,
  Key<"activation", NameKey>];

// weights=kn (moe.grouped_dgrad): the weights are [E, K, N] and the entry
// computes rows @ weights[e]; absent: [E, N, K] and rows @ weights[e]^T.
// round_trip: the swiglu epilogue stores its activation's MXFP8 round trip
// (mxfp8_e4m3 or mxfp8_e5m2; contract §3.1).
def GroupedMatmulAbi : Abi<"grouped_matmul.v3",
  !listconcat(GemmKeys, [Opt<"weights", NameKey>, Opt<"round_trip", NameKey>]),
  GemmKernel>;
def GroupedMatmulFp8Abi : Abi<"grouped_matmul_fp8.v1",
  !listconcat(GemmKeys, [Key<"format", NameKey>, Opt<"out", NameKey>]),
  GemmKernel>;
// moe.grouped_wgrad: out [E, N, K] per expert, grad [M, N]^T . rows [M, K]
// over the expert's rows (contract §3.11).
def GroupedWgradAbi : Abi<"grouped_wgrad.v1", [
  Key<"op", NameKey>, Key<"abi", NameKey>, Key<"experts", IntKey>,
  Key<"n", IntKey>, Key<"k", IntKey>, Key<"max_rows", IntKey>,
  Key<"offsets", TypeKey>], SimpleKernel>;
// An op whose launch plan alone says how to call it: its op names what it
// computes (docs/semantics.md), its plan's arguments what it takes
// (contract §3.12). The backward's SIMT kernels.
def PlannedAbi : Abi<"planned.v1", [
  Key<"op", NameKey>, Key<"abi", NameKey>, Key<"max_rows", IntKey>],
  SimpleKernel>;
// A function of moe ops as one call (contract §3.13): its plan runs the
// steps of its ops' entries (its parts, each `launch ... part=<entry>`) on
// the function's arguments and a workspace for the values between them.
// A stage of a split function (--moe-split-exchanges, contract §3.14)
// also says which function and stage it is, the exchange its caller runs
// after it, and the split function's arguments and results by name.
def ProgramAbi : Abi<"program.v1", [
  Key<"op", NameKey>, Key<"abi", NameKey>, Key<"max_rows", IntKey>,
  Opt<"stage_of", NameKey>, Opt<"stage", IntKey>, Opt<"exchange", NameKey>,
  Opt<"ranks", IntKey>, Opt<"exchange_args", NamesKey>,
  Opt<"exchange_results", NamesKey>, Opt<"function_args", NamesKey>,
  Opt<"function_results", NamesKey>],
  NoKernel>;
def RouteAbi : Abi<"route.v1", [
  Key<"op", NameKey>, Key<"abi", NameKey>, Key<"max_rows", IntKey>,
  Key<"experts", IntKey>, Key<"top_k", IntKey>, Key<"logits", TypeKey>,
  Key<"bias", FlagKey>,
  // Shared-expert slots after the k routed ones, gated by
  // sigmoid(tokens . gate) of width `hidden` (-1: dynamic).
  Opt<"shared", IntKey>, Opt<"shared_gate", FlagKey>, Opt<"hidden", IntKey>],
  SimpleKernel>;
def UnpermuteAbi : Abi<"unpermute.v2", [
  Key<"op", NameKey>, Key<"abi", NameKey>, Key<"max_rows", IntKey>,
  Key<"hidden", IntKey>, Key<"top_k", IntKey>, Key<"slots", TypeKey>,
  Key<"weighted", FlagKey>], SimpleKernel>;
def PermuteAbi : Abi<"permute.v2", [
  Key<"op", NameKey>, Key<"abi", NameKey>, Key<"max_rows", IntKey>,
  Key<"experts", IntKey>, Key<"top_k", IntKey>, Key<"hidden", IntKey>,
  Key<"offsets", TypeKey>, Key<"chunk", IntKey>, Opt<"out", NameKey>,
  Opt<"index_counts", FlagKey>, Opt<"scatter_from", IntKey>,
  // The gather stores the rows' MXFP8 round trip (bf16; contract §3.4).
  Opt<"round_trip", NameKey>], SimpleKernel>;
def LayerAbi : Abi<"layer.v1", [
  Key<"op", NameKey>, Key<"abi", NameKey>, Key<"max_rows", IntKey>,
  Opt<"route", NameKey>, Key<"permute", NameKey>, Key<"gate_up", NameKey>,
  Key<"down", NameKey>, Key<"unpermute", NameKey>], NoKernel>;
def LayerFp8Abi : Abi<"layer_fp8.v1", [
  Key<"op", NameKey>, Key<"abi", NameKey>, Key<"max_rows", IntKey>,
  Opt<"route", NameKey>, Key<"permute", NameKey>, Opt<"quantize", NameKey>,
  Key<"gate_up", NameKey>, Opt<"intermediate", NameKey>,
  Key<"down", NameKey>, Key<"unpermute", NameKey>], NoKernel>;
def QuantizeAbi : Abi<"quantize.v1", [
  Key<"op", NameKey>, Key<"abi", NameKey>, Key<"max_rows", IntKey>,
  Key<"element", NameKey>, Key<"scale", NameKey>, Key<"input", TypeKey>,
  Key<"block_rows", IntKey>, Key<"block_cols", IntKey>, Key<"rank", IntKey>,
  Key<"batch", IntKey>, Key<"rows", IntKey>, Key<"cols", IntKey>],
  SimpleKernel>;

// The chips whose kernels the compiler builds and the runtime runs (the
// bundle's `chip` line; another is refused when the bundle is opened).
class Chip<string n> { string name = n; }
def : Chip<"sm_90a">;
def : Chip<"sm_100a">;

// Launch plans (§4): the element types of arguments and tensor maps, in
// the order of moeDtype, and the roles of arguments, in the order of
// moeArgRole.
class PlanType<string n, int b, string c> {
  string name = n; // as the records spell it
  int bytes = b;
  string cName = c; // the moeDtype enumerator
}
def : PlanType<"bf16", 2, "MOE_DTYPE_BF16">;
def : PlanType<"f32", 4, "MOE_DTYPE_F32">;
def : PlanType<"i32", 4, "MOE_DTYPE_I32">;
def : PlanType<"i64", 8, "MOE_DTYPE_I64">;
def : PlanType<"e4m3", 1, "MOE_DTYPE_E4M3">;
def : PlanType<"e5m2", 1, "MOE_DTYPE_E5M2">;
def : PlanType<"e8m0", 1, "MOE_DTYPE_E8M0">;

class PlanRole<string n, string c> { string name = n; string cName = c; }
def : PlanRole<"in", "MOE_ARG_IN">;
def : PlanRole<"out", "MOE_ARG_OUT">;
def : PlanRole<"opt", "MOE_ARG_OPTIONAL">;
def : PlanRole<"donated", "MOE_ARG_DONATED">;

//===----------------------------------------------------------------------===//
// The C API (runtime/include/moe_runtime.h) and its ctypes mirror
//===----------------------------------------------------------------------===//

class CEnum<string n, list<string> e> {
  string name = n;
  list<string> enumerators = e; // values 0, 1, ...
}
def : CEnum<"moeStatus", ["MOE_STATUS_SUCCESS", "MOE_STATUS_INVALID_ARGUMENT",
  "MOE_STATUS_INVALID_BUNDLE", "MOE_STATUS_UNSUPPORTED", "MOE_STATUS_NO_GPU",
  "MOE_STATUS_CUDA_ERROR", "MOE_STATUS_OUT_OF_MEMORY",
  "MOE_STATUS_NOT_FOUND"]>;
def : CEnum<"moeDtype", ["MOE_DTYPE_BF16", "MOE_DTYPE_F32", "MOE_DTYPE_I32",
  "MOE_DTYPE_I64", "MOE_DTYPE_E4M3", "MOE_DTYPE_E5M2", "MOE_DTYPE_E8M0"]>;
def : CEnum<"moeArgRole", ["MOE_ARG_IN", "MOE_ARG_OUT", "MOE_ARG_OPTIONAL",
  "MOE_ARG_DONATED"]>;

// A field's C type: the ctypes mirror uses the matching c_* type.
class CType<string t, string py> { string c = t; string ctypes = py; }
def Str : CType<"const char *", "c_char_p">;
def I32 : CType<"int32_t", "c_int32">;
def I64 : CType<"int64_t", "c_int64">;
def U64 : CType<"uint64_t", "c_uint64">;
def I64Ptr : CType<"const int64_t *", "POINTER(c_int64)">;
def U64Ptr : CType<"const uint64_t *", "POINTER(c_uint64)">;

class Field<string n, CType t> { string name = n; CType type = t; }
class CStruct<string n, string py, list<Field> f> {
  string name = n;
  string python = py; // the ctypes.Structure in moe_mlir/runtime.py
  list<Field> fields = f;
}

def : CStruct<"moeBundleInfo", "_BundleInfo", [
  Field<"version", I32>, Field<"chip", Str>, Field<"num_images", I32>,
  Field<"num_entries", I32>]>;
def : CStruct<"moeEntryInfo", "_EntryInfo", [
  Field<"name", Str>, Field<"op", Str>, Field<"abi", Str>,
  Field<"experts", I64>, Field<"n", I64>, Field<"k", I64>,
  Field<"max_rows", I64>, Field<"offsets_bits", I32>,
  Field<"num_kernels", I32>, Field<"epilogue", Str>, Field<"top_k", I32>,
  Field<"logits_bits", I32>, Field<"bias", I32>, Field<"slots_bits", I32>,
  Field<"hidden", I64>, Field<"weighted", I32>, Field<"bias_bits", I32>,
  Field<"activation", Str>, Field<"route", Str>, Field<"permute", Str>,
  Field<"gate_up", Str>, Field<"down", Str>, Field<"unpermute", Str>,
  Field<"chunk", I32>, Field<"format", Str>, Field<"element", Str>,
  Field<"scale", Str>, Field<"input_bits", I32>, Field<"block_rows", I32>,
  Field<"block_cols", I32>, Field<"rank", I32>, Field<"batch", I64>,
  Field<"rows", I64>, Field<"cols", I64>, Field<"quantize", Str>,
  Field<"intermediate", Str>, Field<"out", Str>]>;
def : CStruct<"moeKernelInfo", "_KernelInfo", [
  Field<"symbol", Str>, Field<"image", Str>, Field<"image_size", U64>,
  Field<"rows_min", I64>, Field<"rows_max", I64>, Field<"threads", I32>,
  Field<"smem", I32>, Field<"tile_m", I32>, Field<"tile_n", I32>,
  Field<"tile_k", I32>, Field<"stages", I32>, Field<"swap_ab", I32>]>;
def : CStruct<"moeStageInfo", "_StageInfo", [
  Field<"function", Str>, Field<"stage", I32>, Field<"exchange", Str>,
  Field<"ranks", I32>, Field<"exchange_args", Str>,
  Field<"exchange_results", Str>, Field<"function_args", Str>,
  Field<"function_results", Str>]>;
def : CStruct<"moeSignature", "_Signature", [
  Field<"num_sizes", I32>, Field<"num_args", I32>, Field<"num_checks", I32>,
  Field<"num_slices", I32>, Field<"num_steps", I32>]>;
def : CStruct<"moeSizeInfo", "_SizeInfo", [
  Field<"name", Str>, Field<"min", Str>, Field<"max", Str>]>;
def : CStruct<"moeArgInfo", "_ArgInfo", [
  Field<"name", Str>, Field<"dtype", I32>, Field<"role", I32>,
  Field<"align", I64>, Field<"rank", I32>, Field<"dims", Str>]>;
def : CStruct<"moeLaunchArgs", "_LaunchArgs", [
  Field<"sizes", I64Ptr>, Field<"num_sizes", I32>, Field<"num_args", I32>,
  Field<"args", U64Ptr>, Field<"workspace", U64>,
  Field<"workspace_bytes", U64>]>;
