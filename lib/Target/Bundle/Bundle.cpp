//===- Bundle.cpp - compiled moe modules as runtime bundles --------------===//
//
// The writer side of docs/runtime-contract.md: the manifest that
// --moe-extract-device-code recorded and the cubins of gpu-module-to-binary
// become one `.moebundle` file, which runtime/ reads without MLIR.
//
//===----------------------------------------------------------------------===//

#include "MoE/Target/Bundle.h"
#include "Checksum.h"
#include "ContractTables.h"
#include "MoE/Dialect/MoEDialect.h"
#include "MoE/Target/Contract.h"
#include "PlanRecords.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/InitAllDialects.h"
#include "mlir/Tools/mlir-translate/Translation.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"

using namespace mlir;
namespace contract = ::moe::contract;

/// The bundle layout follows the manifest's contract version.
static constexpr int64_t kBundleVersion = mlir::moe::kRuntimeContractVersion;

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
  /// An array of names, joined by ','.
  FailureOr<std::string> names(StringRef key) {
    auto array = dyn_cast_or_null<ArrayAttr>(dict.get(key));
    if (!array)
      return emitError(loc)
             << "moe-to-bundle: " << what << " lacks the list '" << key << "'";
    std::string joined;
    for (Attribute item : array) {
      auto name = dyn_cast<StringAttr>(item);
      if (!name || !isBundleName(name.getValue()))
        return emitError(loc)
               << "moe-to-bundle: " << what << " " << key << " has " << item
               << ", not 1-255 characters of [A-Za-z0-9_.$]";
      joined += (joined.empty() ? "" : ",") + name.getValue().str();
    }
    return joined;
  }
};
} // namespace

/// The value of the optional kernel key `cluster` (contract §1, §2: the
/// CTAs of the thread-block clusters a grouped matmul kernel was compiled
/// for), or "" without it, so that bundles without cluster kernels have no
/// such key. It is the integer 1 or 2, and 2 only for a normal-form (not
/// swap-AB) grouped matmul kernel.
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
  return std::to_string(value.getInt());
}

/// Writes `values` as the keys of `record` in its order (the contract's,
/// runtime/contract/Contract.td), leaving out an optional key without a
/// value; a required one without a value is an error.
static LogicalResult writeKeys(Location loc, StringRef what,
                               const contract::RecordSchema &record,
                               const llvm::StringMap<std::string> &values,
                               llvm::raw_ostream &os) {
  for (const contract::KeySchema &key :
       llvm::ArrayRef(record.keys, record.numKeys)) {
    auto value = values.find(key.name);
    if (value == values.end()) {
      if (key.optional)
        continue;
      return emitError(loc)
             << "moe-to-bundle: " << what << " lacks '" << key.name << "'";
    }
    os << " " << key.name << "=" << value->second;
  }
  os << "\n";
  return success();
}

/// Writes the `kernel` line of one manifest kernel of `entry`, whose ABI
/// has kernels of `record`.
static LogicalResult writeKernel(Location loc, StringRef entry,
                                 DictionaryAttr kernel, bool gemm,
                                 const contract::RecordSchema &record,
                                 const llvm::StringSet<> &images,
                                 llvm::raw_ostream &os) {
  ManifestReader r{loc, kernel, "a kernel of entry " + entry.str()};
  FailureOr<StringRef> name = r.name("name"), image = r.name("module");
  FailureOr<int64_t> threads = r.integer("threads"),
                     smem = r.integer("dynamic_shared_bytes");
  if (failed(name) || failed(image) || failed(threads) || failed(smem))
    return failure();
  if (!images.contains(*image))
    return emitError(loc) << "moe-to-bundle: kernel " << *name
                          << " is in gpu.binary @" << *image
                          << ", which the module does not have";
  llvm::StringMap<std::string> values;
  values["image"] = image->str();
  values["threads"] = std::to_string(*threads);
  values["smem"] = std::to_string(*smem);
  bool swapAB = false;
  if (gemm) {
    // Grouped matmuls: the rows the kernel serves and its tile.
    FailureOr<int64_t> rowsMin = r.integer("rows_min"),
                       rowsMax = r.integer("rows_max");
    auto tile = dyn_cast_or_null<DenseI64ArrayAttr>(kernel.get("tile"));
    auto swap = dyn_cast_or_null<BoolAttr>(kernel.get("swap_ab"));
    if (failed(rowsMin) || failed(rowsMax))
      return failure();
    if (!tile || tile.size() != 4 || !swap)
      return emitError(loc) << "moe-to-bundle: kernel " << *name
                            << " lacks its tile or swap_ab";
    swapAB = swap.getValue();
    values["rows_min"] = std::to_string(*rowsMin);
    values["rows_max"] = std::to_string(*rowsMax);
    const char *tileKeys[] = {"tile_m", "tile_n", "tile_k", "stages"};
    for (int i = 0; i < 4; ++i)
      values[tileKeys[i]] = std::to_string(tile[i]);
    values["swap_ab"] = swapAB ? "1" : "0";
  }
  FailureOr<std::string> cluster = clusterKey(loc, *name, kernel, gemm, swapAB);
  if (failed(cluster))
    return failure();
  if (!cluster->empty())
    values["cluster"] = *cluster;
  os << "kernel " << entry << " " << *name;
  return writeKeys(loc, "kernel " + name->str(), record, values, os);
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
    // Its checksum, so that the reader refuses damaged bytes.
    uint64_t checksum = contract::fnv1a64(
        reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
    imageStream << "image " << binary.getName() << " " << bytes.size()
                << " fnv1a64=" << llvm::format_hex_no_prefix(checksum, 16)
                << "\n"
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
    FailureOr<StringRef> name = r.name("name"), abi = r.name("abi");
    auto kernels = dyn_cast_or_null<ArrayAttr>(entry.get("kernels"));
    if (failed(name) || failed(abi))
      return failure();
    const contract::AbiSchema *schema = contract::findAbi(*abi);
    if (!schema)
      return emitError(loc) << "moe-to-bundle: entry " << *name
                            << " has unknown ABI '" << *abi << "'";
    // A layer launches its parts' kernels: it has none of its own.
    bool layer = schema->kernel.numKeys == 0;
    if (!kernels || (kernels.empty() != layer))
      return emitError(loc)
             << "moe-to-bundle: entry " << *name
             << (layer ? " (a layer) has kernels" : " lacks its kernels");
    if (!entryNames.insert(*name).second)
      return emitError(loc) << "moe-to-bundle: two entries named " << *name;
    // The entry's keys, spelled by their kind (contract §2).
    llvm::StringMap<std::string> values;
    for (const contract::KeySchema &key :
         llvm::ArrayRef(schema->entry.keys, schema->entry.numKeys)) {
      Attribute attr = entry.get(key.name);
      if (!attr && key.optional)
        continue;
      switch (key.kind) {
      case contract::KeyKind::Int: {
        FailureOr<int64_t> value = r.integer(key.name);
        if (failed(value))
          return failure();
        values[key.name] = std::to_string(*value);
        break;
      }
      case contract::KeyKind::Name: {
        FailureOr<StringRef> value = r.name(key.name);
        if (failed(value))
          return failure();
        values[key.name] = value->str();
        break;
      }
      case contract::KeyKind::Type: {
        auto type = dyn_cast_or_null<TypeAttr>(attr);
        if (!type || !type.getValue().isIntOrFloat())
          return emitError(loc) << "moe-to-bundle: entry " << *name
                                << " lacks its '" << key.name << "' type";
        Type t = type.getValue();
        values[key.name] = (t.isInteger() ? "i"
                            : t.isBF16()  ? "bf"
                                          : "f") +
                           std::to_string(t.getIntOrFloatBitWidth());
        break;
      }
      case contract::KeyKind::Names: {
        FailureOr<std::string> value = r.names(key.name);
        if (failed(value))
          return failure();
        values[key.name] = *value;
        break;
      }
      case contract::KeyKind::Flag: {
        auto flag = dyn_cast_or_null<BoolAttr>(attr);
        if (!flag)
          return emitError(loc) << "moe-to-bundle: entry " << *name
                                << " lacks boolean '" << key.name << "'";
        values[key.name] = flag.getValue() ? "1" : "0";
        break;
      }
      }
    }
    bodyStream << "entry " << *name;
    if (failed(writeKeys(loc, "entry " + name->str(), schema->entry, values,
                         bodyStream)))
      return failure();
    bool gemm = schema == &contract::kGroupedMatmulAbi ||
                schema == &contract::kGroupedMatmulFp8Abi;
    for (Attribute kernel : kernels) {
      auto dict = dyn_cast<DictionaryAttr>(kernel);
      if (!dict || failed(writeKernel(loc, *name, dict, gemm, schema->kernel,
                                      imageNames, bodyStream)))
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
