//===- Bundle.cpp - compiled moe modules as runtime bundles --------------===//
//
// The writer side of docs/runtime-contract.md: the manifest that
// --moe-extract-device-code recorded and the cubins of gpu-module-to-binary
// become one `.moebundle` file, which runtime/ reads without MLIR.
//
//===----------------------------------------------------------------------===//

#include "MoE/Target/Bundle.h"
#include "MoE/Dialect/MoEDialect.h"
#include "MoE/Target/Contract.h"
#include "PlanRecords.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/InitAllDialects.h"
#include "mlir/Tools/mlir-translate/Translation.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;

/// The bundle layout follows the manifest's contract version.
static constexpr int64_t kBundleVersion = moe::kRuntimeContractVersion;

/// Names travel unquoted on space-separated lines.
static bool isBundleName(StringRef name) {
  return !name.empty() && name.size() <= 255 && llvm::all_of(name, [](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '.' || c == '$';
  });
}

namespace {
/// Reads one manifest dictionary, reporting what is missing at `loc`.
struct ManifestReader {
  Location loc;
  DictionaryAttr dict;
  std::string what;

  FailureOr<int64_t> integer(StringRef key) {
    if (auto attr = dyn_cast_or_null<IntegerAttr>(dict.get(key)))
      return attr.getInt();
    return emitError(loc) << "moe-to-bundle: " << what << " lacks integer '"
                          << key << "'";
  }
  FailureOr<StringRef> name(StringRef key) {
    auto attr = dyn_cast_or_null<StringAttr>(dict.get(key));
    if (!attr)
      return emitError(loc)
             << "moe-to-bundle: " << what << " lacks '" << key << "'";
    if (!isBundleName(attr.getValue()))
      return emitError(loc) << "moe-to-bundle: " << what << " " << key << " '"
                            << attr.getValue()
                            << "' is not 1-255 characters of [A-Za-z0-9_.$]";
    return attr.getValue();
  }
};
} // namespace

/// The ` cluster=N` that ends the kernel line of a record with the optional
/// key `cluster` (contract §1, §2: the CTAs of the thread-block clusters a
/// grouped matmul kernel was compiled for), or "" without it, so that
/// bundles without cluster kernels stay byte-identical. N is the integer 1
/// or 2, and 2 only for a normal-form (not swap-AB) grouped matmul kernel.
static FailureOr<std::string> clusterKey(Location loc, StringRef name,
                                         DictionaryAttr kernel, bool gemm,
                                         bool swapAB) {
  Attribute attr = kernel.get("cluster");
  if (!attr)
    return std::string();
  if (!gemm)
    return emitError(loc) << "moe-to-bundle: kernel " << name
                          << " has a 'cluster', but only grouped matmul "
                             "kernels run as thread-block clusters";
  auto value = dyn_cast<IntegerAttr>(attr);
  if (!value || !value.getType().isSignlessInteger() ||
      (value.getInt() != 1 && value.getInt() != 2))
    return emitError(loc) << "moe-to-bundle: kernel " << name << " has cluster "
                          << attr << ", not the integer 1 or 2";
  if (value.getInt() == 2 && swapAB)
    return emitError(loc) << "moe-to-bundle: kernel " << name
                          << " has cluster 2 and swap_ab: only the normal "
                             "form runs as a cluster of 2 CTAs";
  return " cluster=" + std::to_string(value.getInt());
}

/// Writes the `kernel` line of one manifest kernel of `entry`.
static LogicalResult writeKernel(Location loc, StringRef entry,
                                 DictionaryAttr kernel, bool gemm,
                                 const llvm::StringSet<> &images,
                                 llvm::raw_ostream &os) {
  ManifestReader r{loc, kernel, "a kernel of entry " + entry.str()};
  if (!gemm) {
    // Routing and combine kernels: no row ranges or tiles.
    FailureOr<StringRef> name = r.name("name"), image = r.name("module");
    FailureOr<int64_t> threads = r.integer("threads"),
                       smem = r.integer("dynamic_shared_bytes");
    if (failed(name) || failed(image) || failed(threads) || failed(smem))
      return failure();
    if (!images.contains(*image))
      return emitError(loc)
             << "moe-to-bundle: kernel " << *name << " is in gpu.binary @"
             << *image << ", which the module does not have";
    if (failed(clusterKey(loc, *name, kernel, /*gemm=*/false, false)))
      return failure();
    os << "kernel " << entry << " " << *name << " image=" << *image
       << " threads=" << *threads << " smem=" << *smem << "\n";
    return success();
  }
  FailureOr<StringRef> name = r.name("name"), image = r.name("module");
  FailureOr<int64_t> rowsMin = r.integer("rows_min"),
                     rowsMax = r.integer("rows_max"),
                     threads = r.integer("threads"),
                     smem = r.integer("dynamic_shared_bytes");
  auto tile = dyn_cast_or_null<DenseI64ArrayAttr>(kernel.get("tile"));
  auto swapAB = dyn_cast_or_null<BoolAttr>(kernel.get("swap_ab"));
  if (failed(name) || failed(image) || failed(rowsMin) || failed(rowsMax) ||
      failed(threads) || failed(smem))
    return failure();
  if (!tile || tile.size() != 4 || !swapAB)
    return emitError(loc) << "moe-to-bundle: kernel " << *name
                          << " lacks its tile or swap_ab";
  if (!images.contains(*image))
    return emitError(loc) << "moe-to-bundle: kernel " << *name
                          << " is in gpu.binary @" << *image
                          << ", which the module does not have";
  FailureOr<std::string> cluster =
      clusterKey(loc, *name, kernel, /*gemm=*/true, swapAB.getValue());
  if (failed(cluster))
    return failure();
  os << "kernel " << entry << " " << *name << " image=" << *image
     << " rows_min=" << *rowsMin << " rows_max=" << *rowsMax
     << " threads=" << *threads << " smem=" << *smem << " tile_m=" << tile[0]
     << " tile_n=" << tile[1] << " tile_k=" << tile[2] << " stages=" << tile[3]
     << " swap_ab=" << (swapAB.getValue() ? 1 : 0) << *cluster << "\n";
  return success();
}

LogicalResult mlir::moe::writeBundle(ModuleOp module, llvm::raw_ostream &os) {
  Location loc = module.getLoc();
  auto manifest = module->getAttrOfType<DictionaryAttr>("moe.manifest");
  if (!manifest)
    return emitError(loc) << "moe-to-bundle: the module has no moe.manifest; "
                             "run --moe-gpu-pipeline first";
  auto version = dyn_cast_or_null<IntegerAttr>(manifest.get("version"));
  if (!version || version.getInt() != kBundleVersion)
    return emitError(loc) << "moe-to-bundle: manifest version "
                          << manifest.get("version") << " is not "
                          << kBundleVersion;
  auto entries = dyn_cast_or_null<ArrayAttr>(manifest.get("entries"));
  if (!entries)
    return emitError(loc) << "moe-to-bundle: the manifest has no entries";

  // One cubin per gpu.binary, all for the same chip.
  std::string chip, images;
  llvm::raw_string_ostream imageStream(images);
  llvm::StringSet<> imageNames;
  for (auto binary : module.getOps<gpu::BinaryOp>()) {
    if (binary.getObjects().size() != 1)
      return binary.emitError("moe-to-bundle: expected one object (one "
                              "target) per gpu.binary");
    auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
    auto target = dyn_cast<NVVM::NVVMTargetAttr>(object.getTarget());
    if (!target)
      return binary.emitError("moe-to-bundle: only NVVM targets are bundled");
    if (object.getFormat() != gpu::CompilationTarget::Binary)
      return binary.emitError("moe-to-bundle: the object is not a cubin; "
                              "compile with --moe-gpu-pipeline=\"format=bin\"");
    if (!chip.empty() && chip != target.getChip())
      return binary.emitError("moe-to-bundle: binaries for both ")
             << chip << " and " << target.getChip();
    chip = target.getChip().str();
    if (!isBundleName(binary.getName()))
      return binary.emitError("moe-to-bundle: binary name is not 1-255 "
                              "characters of [A-Za-z0-9_.$]");
    StringRef bytes = object.getObject().getValue();
    imageNames.insert(binary.getName());
    imageStream << "image " << binary.getName() << " " << bytes.size() << "\n"
                << bytes << "\n";
  }
  if (chip.empty())
    return emitError(loc) << "moe-to-bundle: the module has no gpu.binary";

  std::string body;
  llvm::raw_string_ostream bodyStream(body);
  llvm::StringSet<> entryNames;
  for (Attribute attr : entries) {
    auto entry = dyn_cast<DictionaryAttr>(attr);
    if (!entry)
      return emitError(loc) << "moe-to-bundle: manifest entry " << attr
                            << " is not a dictionary";
    ManifestReader r{loc, entry, "a manifest entry"};
    FailureOr<StringRef> name = r.name("name"), op = r.name("op"),
                         abi = r.name("abi");
    FailureOr<int64_t> maxRows = r.integer("max_rows");
    auto kernels = dyn_cast_or_null<ArrayAttr>(entry.get("kernels"));
    if (failed(name) || failed(op) || failed(abi) || failed(maxRows))
      return failure();
    // A layer launches its parts' kernels: it has none of its own.
    bool fp8Layer = *abi == "layer_fp8.v1";
    bool layer = fp8Layer || *abi == "layer.v1";
    if (!kernels || (kernels.empty() != layer))
      return emitError(loc)
             << "moe-to-bundle: entry " << *name
             << (layer ? " (a layer) has kernels" : " lacks its kernels");
    if (!entryNames.insert(*name).second)
      return emitError(loc) << "moe-to-bundle: two entries named " << *name;
    // The keys after max_rows depend on the ABI (docs/runtime-contract.md).
    auto typeName = [&](StringRef key) -> FailureOr<std::string> {
      auto type = dyn_cast_or_null<TypeAttr>(entry.get(key));
      if (!type || !type.getValue().isIntOrFloat())
        return emitError(loc) << "moe-to-bundle: entry " << *name
                              << " lacks its '" << key << "' type";
      Type t = type.getValue();
      return (t.isInteger() ? "i"
              : t.isBF16()  ? "bf"
                            : "f") +
             std::to_string(t.getIntOrFloatBitWidth());
    };
    auto flag = [&](StringRef key) -> FailureOr<int> {
      auto attr = dyn_cast_or_null<BoolAttr>(entry.get(key));
      if (!attr)
        return emitError(loc) << "moe-to-bundle: entry " << *name
                              << " lacks boolean '" << key << "'";
      return attr.getValue() ? 1 : 0;
    };
    bool fp8 = *abi == "grouped_matmul_fp8.v1";
    bool gemm = fp8 || *abi == "grouped_matmul.v3";
    bodyStream << "entry " << *name << " op=" << *op << " abi=" << *abi;
    if (fp8) {
      FailureOr<StringRef> format = r.name("format");
      if (failed(format))
        return failure();
      bodyStream << " format=" << *format;
      // An FP8 output (a gate-up quantizing its activation): bf16 if absent.
      if (entry.get("out")) {
        FailureOr<StringRef> out = r.name("out");
        if (failed(out))
          return failure();
        bodyStream << " out=" << *out;
      }
    }
    if (gemm) {
      FailureOr<StringRef> epilogue = r.name("epilogue"),
                           activation = r.name("activation"),
                           bias = r.name("bias");
      FailureOr<int64_t> experts = r.integer("experts"), n = r.integer("n"),
                         k = r.integer("k");
      FailureOr<std::string> offsets = typeName("offsets");
      if (failed(epilogue) || failed(activation) || failed(bias) ||
          failed(experts) || failed(n) || failed(k) || failed(offsets))
        return failure();
      bodyStream << " epilogue=" << *epilogue << " activation=" << *activation
                 << " bias=" << *bias << " experts=" << *experts << " n=" << *n
                 << " k=" << *k << " max_rows=" << *maxRows
                 << " offsets=" << *offsets << "\n";
    } else if (*abi == "route.v1") {
      FailureOr<int64_t> experts = r.integer("experts"),
                         topK = r.integer("top_k");
      FailureOr<std::string> logits = typeName("logits");
      FailureOr<int> bias = flag("bias");
      if (failed(experts) || failed(topK) || failed(logits) || failed(bias))
        return failure();
      bodyStream << " max_rows=" << *maxRows << " experts=" << *experts
                 << " top_k=" << *topK << " logits=" << *logits
                 << " bias=" << *bias << "\n";
    } else if (*abi == "unpermute.v2") {
      FailureOr<int64_t> hidden = r.integer("hidden"),
                         topK = r.integer("top_k");
      FailureOr<std::string> slots = typeName("slots");
      FailureOr<int> weighted = flag("weighted");
      if (failed(hidden) || failed(topK) || failed(slots) || failed(weighted))
        return failure();
      bodyStream << " max_rows=" << *maxRows << " hidden=" << *hidden
                 << " top_k=" << *topK << " slots=" << *slots
                 << " weighted=" << *weighted << "\n";
    } else if (*abi == "permute.v2") {
      FailureOr<int64_t> experts = r.integer("experts"),
                         topK = r.integer("top_k"),
                         hidden = r.integer("hidden"),
                         chunk = r.integer("chunk");
      FailureOr<std::string> offsets = typeName("offsets");
      if (failed(experts) || failed(topK) || failed(hidden) ||
          failed(offsets) || failed(chunk))
        return failure();
      bodyStream << " max_rows=" << *maxRows << " experts=" << *experts
                 << " top_k=" << *topK << " hidden=" << *hidden
                 << " offsets=" << *offsets << " chunk=" << *chunk;
      // Rows the gather quantizes: bf16 if absent.
      if (entry.get("out")) {
        FailureOr<StringRef> out = r.name("out");
        if (failed(out))
          return failure();
        bodyStream << " out=" << *out;
      }
      // The index kernel counts a single chunk itself: 0 if absent.
      if (entry.get("index_counts")) {
        FailureOr<int> indexCounts = flag("index_counts");
        if (failed(indexCounts))
          return failure();
        bodyStream << " index_counts=" << *indexCounts;
      }
      // From this many tokens on, the fourth kernel (the scatter) runs
      // instead of the gather: no scatter kernel if absent.
      if (entry.get("scatter_from")) {
        FailureOr<int64_t> scatterFrom = r.integer("scatter_from");
        if (failed(scatterFrom))
          return failure();
        bodyStream << " scatter_from=" << *scatterFrom;
      }
      bodyStream << "\n";
    } else if (*abi == "quantize.v1") {
      FailureOr<StringRef> element = r.name("element"), scale = r.name("scale");
      FailureOr<std::string> input = typeName("input");
      FailureOr<int64_t> blockRows = r.integer("block_rows"),
                         blockCols = r.integer("block_cols"),
                         rank = r.integer("rank"), batch = r.integer("batch"),
                         rows = r.integer("rows"), cols = r.integer("cols");
      if (failed(element) || failed(scale) || failed(input) ||
          failed(blockRows) || failed(blockCols) || failed(rank) ||
          failed(batch) || failed(rows) || failed(cols))
        return failure();
      bodyStream << " max_rows=" << *maxRows << " element=" << *element
                 << " scale=" << *scale << " input=" << *input
                 << " block_rows=" << *blockRows << " block_cols=" << *blockCols
                 << " rank=" << *rank << " batch=" << *batch
                 << " rows=" << *rows << " cols=" << *cols << "\n";
    } else if (layer) {
      bodyStream << " max_rows=" << *maxRows;
      SmallVector<StringRef, 7> parts =
          fp8Layer ? SmallVector<StringRef, 7>{"route",        "permute",
                                               "quantize",     "gate_up",
                                               "intermediate", "down",
                                               "unpermute"}
                   : SmallVector<StringRef, 7>{"route", "permute", "gate_up",
                                               "down", "unpermute"};
      for (StringRef part : parts) {
        // The quantize kernels are parts only when the gather and the
        // gate-up do not quantize the rows themselves.
        if ((part == "quantize" || part == "intermediate") && !entry.get(part))
          continue;
        FailureOr<StringRef> partName = r.name(part);
        if (failed(partName))
          return failure();
        bodyStream << " " << part << "=" << *partName;
      }
      bodyStream << "\n";
    } else {
      return emitError(loc) << "moe-to-bundle: entry " << *name
                            << " has unknown ABI '" << *abi << "'";
    }
    for (Attribute kernel : kernels) {
      auto dict = dyn_cast<DictionaryAttr>(kernel);
      if (!dict ||
          failed(writeKernel(loc, *name, dict, gemm, imageNames, bodyStream)))
        return failure();
    }
    if (failed(writePlanRecords(loc, *name, entry, bodyStream)))
      return failure();
  }
  os << "MOEBUNDLE " << kBundleVersion << "\nchip " << chip << "\n"
     << images << body << "end\n";
  return success();
}

void mlir::moe::registerToBundleTranslation() {
  TranslateFromMLIRRegistration registration(
      "moe-to-bundle",
      "Write the output of --moe-gpu-pipeline as a .moebundle for the runtime",
      [](Operation *op, llvm::raw_ostream &os) {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return LogicalResult(op->emitError("moe-to-bundle: expected a "
                                             "builtin.module"));
        return writeBundle(module, os);
      },
      [](DialectRegistry &registry) {
        registerAllDialects(registry);
        // Uncompiled moe modules parse, to be told what to run first.
        registry.insert<MoEDialect>();
      });
}
