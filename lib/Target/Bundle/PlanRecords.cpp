//===- PlanRecords.cpp - an entry's launch plan as bundle records ---------===//
//
// Writes the `plan` dictionary --convert-moe-to-nvgpu put into an entry's
// moe.launch (carried into the manifest) as the bundle's size, arg, check,
// work and launch records (docs/launch-plans.md). The runtime checks every
// record again; here a value that would break the line format (spaces,
// newlines) or a missing field is refused, naming the entry.
//
//===----------------------------------------------------------------------===//

#include "PlanRecords.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;

namespace {

/// Reads the fields of one plan member.
struct Member {
  Location loc;
  DictionaryAttr dict;
  std::string what;

  /// A string field; `spaces` allows single spaces (a check's message).
  FailureOr<StringRef> text(StringRef key, bool spaces = false) const {
    auto attr = dyn_cast_or_null<StringAttr>(dict.get(key));
    if (!attr)
      return emitError(loc)
             << "moe-to-bundle: " << what << " lacks string '" << key << "'";
    StringRef value = attr.getValue();
    bool ok = !value.empty() || key == "dims" || key == "params";
    for (char c : value)
      ok = ok && c > ' ' - (spaces ? 1 : 0) && c != 127;
    if (!ok)
      return emitError(loc) << "moe-to-bundle: " << what << " " << key << " '"
                            << value << "' cannot be written on a record line";
    return value;
  }
  FailureOr<int64_t> integer(StringRef key) const {
    if (auto attr = dyn_cast_or_null<IntegerAttr>(dict.get(key)))
      return attr.getInt();
    return emitError(loc) << "moe-to-bundle: " << what << " lacks integer '"
                          << key << "'";
  }
};

/// The members of plan[key], each a dictionary.
FailureOr<SmallVector<Member>> members(Location loc, DictionaryAttr plan,
                                       StringRef key, StringRef entry) {
  auto list = dyn_cast_or_null<ArrayAttr>(plan.get(key));
  if (!list)
    return emitError(loc) << "moe-to-bundle: the plan of entry " << entry
                          << " lacks its '" << key << "' array";
  SmallVector<Member> out;
  for (Attribute attr : list) {
    auto dict = dyn_cast<DictionaryAttr>(attr);
    if (!dict)
      return emitError(loc)
             << "moe-to-bundle: a " << key << " member of the "
             << "plan of entry " << entry << " is not a dictionary";
    out.push_back(
        {loc, dict,
         ("a " + key + " member of the plan of entry " + entry).str()});
  }
  return out;
}

} // namespace

LogicalResult mlir::moe::writePlanRecords(Location loc, StringRef name,
                                          DictionaryAttr entry,
                                          llvm::raw_ostream &os) {
  auto plan = dyn_cast_or_null<DictionaryAttr>(entry.get("plan"));
  if (!plan)
    return success(); // an entry without a plan (an older compiler's)
  auto sizes = members(loc, plan, "sizes", name);
  auto args = members(loc, plan, "args", name);
  auto checks = members(loc, plan, "checks", name);
  auto work = members(loc, plan, "work", name);
  auto steps = members(loc, plan, "steps", name);
  if (failed(sizes) || failed(args) || failed(checks) || failed(work) ||
      failed(steps))
    return failure();
  for (const Member &m : *sizes) {
    auto size = m.text("name"), min = m.text("min"), max = m.text("max");
    if (failed(size) || failed(min) || failed(max))
      return failure();
    os << "size " << name << " " << *size << " min=" << *min << " max=" << *max
       << "\n";
  }
  for (const Member &m : *args) {
    auto arg = m.text("name"), dtype = m.text("dtype"), role = m.text("role"),
         dims = m.text("dims");
    auto align = m.integer("align");
    if (failed(arg) || failed(dtype) || failed(role) || failed(dims) ||
        failed(align))
      return failure();
    os << "arg " << name << " " << *arg << " " << *dtype << " " << *role
       << " align=" << *align << " dims=" << *dims << "\n";
  }
  for (const Member &m : *checks) {
    auto expr = m.text("expr"), message = m.text("message", /*spaces=*/true);
    if (failed(expr) || failed(message))
      return failure();
    os << "check " << name << " " << *expr << " " << *message << "\n";
  }
  for (const Member &m : *work) {
    auto slice = m.text("name"), bytes = m.text("bytes");
    auto align = m.integer("align");
    if (failed(slice) || failed(bytes) || failed(align))
      return failure();
    os << "work " << name << " " << *slice << " bytes=" << *bytes
       << " align=" << *align << "\n";
  }
  for (const Member &m : *steps) {
    auto kernel = m.integer("kernel");
    auto grid = m.text("grid"), when = m.text("when"),
         params = m.text("params");
    if (failed(kernel) || failed(grid) || failed(when) || failed(params))
      return failure();
    os << "launch " << name << " " << *kernel;
    // A layer's step runs a kernel of one of its parts: the part's entry,
    // named by the layer's key for that part.
    if (m.dict.get("part")) {
      auto part = m.text("part");
      if (failed(part))
        return failure();
      auto partEntry = dyn_cast_or_null<StringAttr>(entry.get(*part));
      if (!partEntry)
        return emitError(loc)
               << "moe-to-bundle: a step of entry " << name << " runs part '"
               << *part << "', which the entry does not name";
      os << " part=" << partEntry.getValue();
    }
    os << " grid=" << *grid << " when=" << *when << " params=" << *params
       << "\n";
  }
  return success();
}
