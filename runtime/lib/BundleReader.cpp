//===- BundleReader.cpp - parsing and validating a .moebundle -------------===//
//
// The bytes are untrusted: every length is bounded before use, numbers are
// range-checked without overflow, and any deviation from contract §2 is an
// error naming the line. Line numbers count the text lines only (an image's
// payload belongs to its `image` line).
//
// Over 800 lines because every ABI's values are checked here by hand (the
// keys come from runtime/contract/Contract.td; the ranges, the parts of a
// layer and the plan records do not).
//
//===----------------------------------------------------------------------===//

#include "Bundle.h"
#include "Checksum.h"
#include "ContractTables.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <string_view>

namespace moe::runtime {
namespace {

/// `text` between single quotes, with bytes outside printable ASCII escaped
/// and the middle of long values elided, for error messages.
std::string quote(std::string_view text) {
  constexpr size_t kShown = 64;
  std::string result = "'";
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == kShown && text.size() > kShown + 8) {
      result += "...";
      i = text.size() - 8;
    }
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      result += static_cast<char>(c);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      result += escaped;
    }
  }
  return result + "'";
}

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '$';
}

bool isValidName(std::string_view name) {
  return !name.empty() && name.size() <= kMaxNameBytes &&
         std::all_of(name.begin(), name.end(), isNameChar);
}

/// Canonical decimal: an optional '-', then "0" or digits without a leading
/// zero ("-0" is not canonical). False on anything else or int64 overflow.
/// Hex digits (0-9, a-f) into `value`; at most 16.
bool parseHex(std::string_view text, uint64_t &value) {
  if (text.empty() || text.size() > 16)
    return false;
  value = 0;
  for (char c : text) {
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
    if (digit < 0)
      return false;
    value = value << 4 | uint64_t(digit);
  }
  return true;
}

bool parseDecimal(std::string_view text, int64_t &value) {
  bool negative = !text.empty() && text[0] == '-';
  std::string_view digits = negative ? text.substr(1) : text;
  if (digits.empty() || digits.size() > 19 ||
      (digits.size() > 1 && digits[0] == '0') || (negative && digits == "0"))
    return false;
  uint64_t magnitude = 0;
  for (char c : digits) {
    if (c < '0' || c > '9')
      return false;
    magnitude = magnitude * 10 + uint64_t(c - '0'); // 19 digits cannot wrap
  }
  if (magnitude > uint64_t(INT64_MAX))
    return false;
  value = negative ? -int64_t(magnitude) : int64_t(magnitude);
  return true;
}

struct KeyValue {
  std::string_view key, value;
};

/// One kind of key=value record: its keys in order, required unless
/// optional (runtime/contract/Contract.td, generated into ContractTables.h).
using RecordSpec = moe::contract::RecordSchema;

/// Whether collectKeys found an optional key: a value it collected points
/// into its line, even when empty ("key=").
bool isPresent(std::string_view value) { return value.data() != nullptr; }

// Entries and kernels by ABI (contract §2): the values come back in the
// order of their keys.
constexpr const RecordSpec &kGroupedMatmulEntry =
    moe::contract::kGroupedMatmulAbi.entry;
constexpr const RecordSpec &kGroupedMatmulFp8Entry =
    moe::contract::kGroupedMatmulFp8Abi.entry;
constexpr const RecordSpec &kRouteEntry = moe::contract::kRouteAbi.entry;
constexpr const RecordSpec &kUnpermuteEntry =
    moe::contract::kUnpermuteAbi.entry;
constexpr const RecordSpec &kPermuteEntry = moe::contract::kPermuteAbi.entry;
constexpr const RecordSpec &kLayerEntry = moe::contract::kLayerAbi.entry;
constexpr const RecordSpec &kLayerFp8Entry = moe::contract::kLayerFp8Abi.entry;
constexpr const RecordSpec &kQuantizeEntry = moe::contract::kQuantizeAbi.entry;
constexpr const RecordSpec &kGroupedWgradEntry =
    moe::contract::kGroupedWgradAbi.entry;
constexpr const RecordSpec &kGroupedWgradKernel =
    moe::contract::kGroupedWgradAbi.kernel;
constexpr const RecordSpec &kPlannedEntry = moe::contract::kPlannedAbi.entry;
constexpr const RecordSpec &kPlannedKernel = moe::contract::kPlannedAbi.kernel;
constexpr const RecordSpec &kProgramEntry = moe::contract::kProgramAbi.entry;
constexpr const RecordSpec &kGroupedMatmulKernel =
    moe::contract::kGroupedMatmulAbi.kernel;
constexpr const RecordSpec &kRouteKernel = moe::contract::kRouteAbi.kernel;
constexpr const RecordSpec &kUnpermuteKernel =
    moe::contract::kUnpermuteAbi.kernel;
constexpr const RecordSpec &kPermuteKernel = moe::contract::kPermuteAbi.kernel;
constexpr const RecordSpec &kQuantizeKernel =
    moe::contract::kQuantizeAbi.kernel;

class Reader {
public:
  Reader(const uint8_t *data, size_t size, BundleData &out, std::string &error)
      : data(data), size(size), out(out), error(error) {}

  moeStatus run();

private:
  moeStatus fail(moeStatus status, const char *format, ...)
      __attribute__((format(printf, 3, 4)));
  moeStatus failAt(int atLine, moeStatus status, const char *format, ...)
      __attribute__((format(printf, 4, 5)));
  moeStatus vfail(int atLine, moeStatus status, const char *format,
                  va_list args);

  /// Reads the next text line into `tokens` (split on single spaces).
  moeStatus readLine(std::vector<std::string_view> &tokens);
  moeStatus parseHeader();
  moeStatus parseChip(const std::vector<std::string_view> &tokens);
  moeStatus parseImage(const std::vector<std::string_view> &tokens);
  moeStatus parseEntry(const std::vector<std::string_view> &tokens);
  /// A launch plan record (size, arg, check, work, launch) of the entry
  /// before it (docs/launch-plans.md).
  moeStatus parsePlanRecord(const std::vector<std::string_view> &tokens);
  /// The ABI-specific keys of an entry (values in the order of its spec).
  moeStatus parseGroupedMatmulEntry(const std::string &who,
                                    const std::vector<std::string_view> &values,
                                    Entry &entry);
  /// What grouped_matmul_fp8.v1 adds to grouped_matmul.v3's keys: its op
  /// (moe.grouped_matmul or moe.expert_mlp), `format` and the optional
  /// `out`.
  moeStatus parseFp8Keys(const std::string &who,
                         const std::vector<std::string_view> &values,
                         Entry &entry);
  moeStatus parseRouteEntry(const std::string &who,
                            const std::vector<std::string_view> &values,
                            Entry &entry);
  moeStatus parseUnpermuteEntry(const std::string &who,
                                const std::vector<std::string_view> &values,
                                Entry &entry);
  moeStatus parsePermuteEntry(const std::string &who,
                              const std::vector<std::string_view> &values,
                              Entry &entry);
  moeStatus parseQuantizeEntry(const std::string &who,
                               const std::vector<std::string_view> &values,
                               Entry &entry);
  /// Resolves a layer's parts (earlier entries) and checks that they chain
  /// (layer.v1 and layer_fp8.v1).
  moeStatus parseLayerEntry(const std::string &who,
                            const std::vector<std::string_view> &values,
                            Entry &entry);
  /// The checks layer_fp8.v1 adds: its quantize parts make what its GEMMs
  /// read.
  moeStatus checkFp8LayerQuantizes(const char *layer, const Entry &entry);
  moeStatus parseKernel(const std::vector<std::string_view> &tokens);
  moeStatus
  parseGroupedMatmulKernel(const std::string &who, const Entry &entry,
                           const std::vector<std::string_view> &values,
                           Kernel &kernel);
  /// The optional `cluster=N` of a kernel line (`value` null when absent:
  /// 1): N is 1, or 2 for a kernel of a grouped matmul entry with
  /// swap_ab=0 on a chip with clusters (sm_90 and later).
  moeStatus parseCluster(const std::string &who, const Entry &entry,
                         std::string_view value, Kernel &kernel);
  moeStatus finish();

  moeStatus checkName(std::string_view name, const char *what);
  /// `key`'s names joined by ',' (none: empty), each a valid name; sets
  /// `count` to how many.
  moeStatus checkNames(const std::string &who, const char *key,
                       std::string_view list, size_t &count);
  /// A program.v1 entry's stage keys (values 3-10; contract §3.14).
  moeStatus parseStageKeys(const std::string &who,
                           const std::vector<std::string_view> &values,
                           Entry &entry);
  /// The stages of each split function: 0, 1, ... once each, an exchange
  /// after each but the last, one list of the function's arguments and
  /// results.
  moeStatus checkStages();
  /// Splits tokens[first..] into key=value pairs in the order of spec.keys;
  /// rejects missing '=', unknown, duplicate and missing keys.
  /// experts, n, k, max_rows and offsets: values 2-6 of both grouped
  /// matmul ABIs and of grouped_wgrad.v1.
  moeStatus parseGemmShape(const std::string &who,
                           const std::vector<std::string_view> &values,
                           Entry &entry);
  moeStatus parseWgradEntry(const std::string &who,
                            const std::vector<std::string_view> &values,
                            Entry &entry);
  /// grouped_matmul.v3's optional `round_trip` and `weights` keys
  /// (contract §3.1).
  moeStatus parseRoundTripKey(const std::string &who,
                              std::string_view roundTrip, const Entry &entry);
  moeStatus parseWeightsKey(const std::string &who, std::string_view weights,
                            Entry &entry);
  moeStatus collectKeys(const std::vector<std::string_view> &tokens,
                        size_t first, const RecordSpec &spec,
                        std::string_view owner,
                        std::vector<std::string_view> &values);
  /// Parses `value` of `key` as a number in [min, max] (or -1 when
  /// allowMinusOne).
  moeStatus number(std::string_view owner, const char *key,
                   std::string_view value, int64_t min, int64_t max,
                   bool allowMinusOne, int64_t &result);
  /// Parses `key=i32|i64` into `bits` (32 or 64).
  moeStatus integerBits(const std::string &who, const char *key,
                        std::string_view value, int32_t &bits);
  /// Parses `hidden=H`: -1 (dynamic) or a multiple of 8 of at least 8, as
  /// the kernels move rows in 16-byte vectors.
  moeStatus hiddenSize(const std::string &who, std::string_view value,
                       int64_t &hidden);

  const uint8_t *data;
  size_t size;
  size_t pos = 0;
  int line = 0;
  BundleData &out;
  std::string &error;
};

moeStatus Reader::vfail(int atLine, moeStatus status, const char *format,
                        va_list args) {
  char message[1024];
  std::vsnprintf(message, sizeof(message), format, args);
  char prefix[48];
  std::snprintf(prefix, sizeof(prefix), "bundle line %d: ", atLine);
  error = std::string(prefix) + message;
  return status;
}

moeStatus Reader::fail(moeStatus status, const char *format, ...) {
  va_list args;
  va_start(args, format);
  moeStatus result = vfail(line, status, format, args);
  va_end(args);
  return result;
}

moeStatus Reader::failAt(int atLine, moeStatus status, const char *format,
                         ...) {
  va_list args;
  va_start(args, format);
  moeStatus result = vfail(atLine, status, format, args);
  va_end(args);
  return result;
}

moeStatus Reader::readLine(std::vector<std::string_view> &tokens) {
  ++line;
  tokens.clear();
  if (pos >= size)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "unexpected end of the data (the bundle must finish with an "
                "'end' line)");
  const char *begin = reinterpret_cast<const char *>(data + pos);
  const void *newline = std::memchr(begin, '\n', size - pos);
  if (!newline)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "the line does not end with '\\n' before the end of the data");
  size_t length = static_cast<const char *>(newline) - begin;
  std::string_view text(begin, length);
  for (size_t i = 0; i < length; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == 0)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "NUL byte at column %zu of a text line", i + 1);
    if (c < 0x20 || c == 0x7f)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "control character 0x%02x at column %zu (text lines end "
                  "with a single '\\n')",
                  c, i + 1);
  }
  pos += length + 1;
  if (text.empty())
    return fail(MOE_STATUS_INVALID_BUNDLE, "empty line");
  size_t start = 0;
  while (true) {
    size_t space = text.find(' ', start);
    std::string_view token = text.substr(start, space - start);
    if (token.empty())
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "empty field at column %zu (fields are separated by "
                  "exactly one space, with none at either end of the line)",
                  start + 1);
    tokens.push_back(token);
    if (space == std::string_view::npos)
      break;
    start = space + 1;
  }
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::checkName(std::string_view name, const char *what) {
  if (isValidName(name))
    return MOE_STATUS_SUCCESS;
  if (name.size() > kMaxNameBytes)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s name %s has %zu bytes (at most %zu)", what,
                quote(name).c_str(), name.size(), kMaxNameBytes);
  return fail(MOE_STATUS_INVALID_BUNDLE,
              "%s name %s has a character outside [A-Za-z0-9_.$]", what,
              quote(name).c_str());
}

moeStatus Reader::checkNames(const std::string &who, const char *key,
                             std::string_view list, size_t &count) {
  count = 0;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view name = list.substr(0, comma);
    if (!isValidName(name))
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: %s=... has %s, not a name of at most %zu characters of "
                  "[A-Za-z0-9_.$] (names are joined by ',')",
                  who.c_str(), key, quote(name).c_str(), kMaxNameBytes);
    ++count;
    if (comma == std::string_view::npos)
      break;
    list.remove_prefix(comma + 1);
    if (list.empty())
      return fail(MOE_STATUS_INVALID_BUNDLE, "%s: %s=... ends with ','",
                  who.c_str(), key);
  }
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::parseStageKeys(const std::string &who,
                                 const std::vector<std::string_view> &values,
                                 Entry &entry) {
  std::string_view function = values[3], index = values[4],
                   exchange = values[5], ranks = values[6];
  bool any = false;
  for (size_t i = 3; i <= 10; ++i)
    any |= !values[i].empty();
  if (!any)
    return MOE_STATUS_SUCCESS;
  if (function.empty() || index.empty() || values[9].empty())
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: a stage (a key of stage_of, stage, exchange, ranks, "
                "exchange_args, exchange_results, function_args, "
                "function_results) needs stage_of, stage and function_args",
                who.c_str());
  if (moeStatus status = checkName(function, "stage_of"))
    return status;
  int64_t number = 0;
  if (moeStatus status =
          this->number(who, "stage", index, 0, kMaxEntries - 1, false, number))
    return status;
  Stage &stage = entry.stage;
  stage.function = std::string(function);
  stage.index = int32_t(number);
  size_t count = 0, args = 0, results = 0;
  if (moeStatus status = checkNames(who, "function_args", values[9], count))
    return status;
  if (moeStatus status = checkNames(who, "function_results", values[10], count))
    return status;
  if (count == 0)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: a stage's function_results names none", who.c_str());
  if (moeStatus status = checkNames(who, "exchange_args", values[7], args))
    return status;
  if (moeStatus status =
          checkNames(who, "exchange_results", values[8], results))
    return status;
  if (exchange.empty()) {
    if (!ranks.empty() || args || results)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: ranks, exchange_args and exchange_results belong to a "
                  "stage with an exchange",
                  who.c_str());
  } else {
    // moe.dispatch (rows, offsets) -> (rows, local ids, counts);
    // moe.undispatch (rows, counts, offsets) -> rows.
    bool dispatch = exchange == "moe.dispatch";
    if (!dispatch && exchange != "moe.undispatch")
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: exchange=%s is not moe.dispatch or moe.undispatch",
                  who.c_str(), quote(exchange).c_str());
    if (args != (dispatch ? 2u : 3u) || results != (dispatch ? 3u : 1u))
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: exchange=%s takes %u values and gives %u, but "
                  "exchange_args names %zu and exchange_results %zu",
                  who.c_str(), std::string(exchange).c_str(),
                  dispatch ? 2u : 3u, dispatch ? 3u : 1u, args, results);
    if (moeStatus status =
            this->number(who, "ranks", ranks, 1, 1 << 20, false, number))
      return status;
    stage.exchange = std::string(exchange);
    stage.ranks = int32_t(number);
  }
  stage.exchangeArgs = std::string(values[7]);
  stage.exchangeResults = std::string(values[8]);
  stage.functionArgs = std::string(values[9]);
  stage.functionResults = std::string(values[10]);
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::checkStages() {
  std::map<std::string, std::vector<const Entry *>> byFunction;
  for (const Entry &entry : out.entries)
    if (!entry.stage.function.empty())
      byFunction[entry.stage.function].push_back(&entry);
  for (auto &[function, stages] : byFunction) {
    std::sort(stages.begin(), stages.end(), [](const Entry *a, const Entry *b) {
      return a->stage.index < b->stage.index;
    });
    for (size_t i = 0; i < stages.size(); ++i) {
      const Entry &entry = *stages[i];
      bool last = i + 1 == stages.size();
      if (entry.stage.index < int32_t(i))
        return failAt(entry.line, MOE_STATUS_INVALID_BUNDLE,
                      "entry '%s' is stage %d of '%s', as is entry '%s'",
                      entry.name.c_str(), entry.stage.index, function.c_str(),
                      stages[i - 1]->name.c_str());
      if (entry.stage.index > int32_t(i))
        return failAt(entry.line, MOE_STATUS_INVALID_BUNDLE,
                      "entry '%s' is stage %d of '%s', which has no stage %zu",
                      entry.name.c_str(), entry.stage.index, function.c_str(),
                      i);
      if (entry.stage.exchange.empty() != last)
        return failAt(entry.line, MOE_STATUS_INVALID_BUNDLE,
                      "entry '%s': stage %d of '%s' %s", entry.name.c_str(),
                      entry.stage.index, function.c_str(),
                      last ? "is its last, after which no exchange runs"
                           : "is followed by another, so an exchange runs "
                             "after it");
      if (entry.stage.functionArgs != stages[0]->stage.functionArgs ||
          entry.stage.functionResults != stages[0]->stage.functionResults)
        return failAt(entry.line, MOE_STATUS_INVALID_BUNDLE,
                      "entry '%s': its function_args or function_results "
                      "differ from those of stage 0 of '%s'",
                      entry.name.c_str(), function.c_str());
    }
  }
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::number(std::string_view owner, const char *key,
                         std::string_view value, int64_t min, int64_t max,
                         bool allowMinusOne, int64_t &result) {
  int64_t parsed = 0;
  if (!parseDecimal(value, parsed))
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: %s=%s is not a decimal integer in canonical form "
                "(or does not fit in 64 bits)",
                std::string(owner).c_str(), key, quote(value).c_str());
  if ((parsed < min || parsed > max) && !(allowMinusOne && parsed == -1))
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: %s=%lld is out of range (%s[%lld, %lld])",
                std::string(owner).c_str(), key, (long long)parsed,
                allowMinusOne ? "-1 or " : "", (long long)min, (long long)max);
  result = parsed;
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::collectKeys(const std::vector<std::string_view> &tokens,
                              size_t first, const RecordSpec &spec,
                              std::string_view owner,
                              std::vector<std::string_view> &values) {
  std::string who(owner);
  std::vector<bool> seen(spec.numKeys, false);
  values.assign(spec.numKeys, std::string_view());
  for (size_t i = first; i < tokens.size(); ++i) {
    size_t equals = tokens[i].find('=');
    if (equals == std::string_view::npos)
      return fail(MOE_STATUS_INVALID_BUNDLE, "%s: expected key=value, got %s",
                  who.c_str(), quote(tokens[i]).c_str());
    std::string_view key = tokens[i].substr(0, equals);
    size_t index = 0;
    while (index < spec.numKeys && key != spec.keys[index].name)
      ++index;
    if (index == spec.numKeys)
      return fail(MOE_STATUS_INVALID_BUNDLE, "%s: unknown key %s %s",
                  who.c_str(), quote(key).c_str(), spec.hint);
    if (seen[index])
      return fail(MOE_STATUS_INVALID_BUNDLE, "%s: duplicate key '%s'",
                  who.c_str(), spec.keys[index].name);
    seen[index] = true;
    values[index] = tokens[i].substr(equals + 1);
  }
  for (size_t index = 0; index < spec.numKeys; ++index)
    if (!seen[index] && !spec.keys[index].optional)
      return fail(MOE_STATUS_INVALID_BUNDLE, "%s: missing key '%s'",
                  who.c_str(), spec.keys[index].name);
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::parseHeader() {
  static constexpr char kMagic[] = "MOEBUNDLE ";
  constexpr size_t kMagicBytes = sizeof(kMagic) - 1;
  if (size < kMagicBytes || std::memcmp(data, kMagic, kMagicBytes) != 0)
    return failAt(1, MOE_STATUS_INVALID_BUNDLE,
                  "not a moe bundle (it must start with 'MOEBUNDLE %d')",
                  MOE_BUNDLE_VERSION);
  std::vector<std::string_view> tokens;
  if (moeStatus status = readLine(tokens))
    return status;
  int64_t version = 0;
  if (tokens.size() != 2 || !parseDecimal(tokens[1], version) || version < 0)
    return fail(
        MOE_STATUS_INVALID_BUNDLE, "expected 'MOEBUNDLE <version>', got %s",
        quote(std::string_view(reinterpret_cast<const char *>(data), pos - 1))
            .c_str());
  // Version 6 differs only in that launch plans are optional: its bundles
  // open and list their entries, and moeLaunch runs those with a plan.
  if (version >= 1 && version < 6)
    return fail(MOE_STATUS_UNSUPPORTED,
                "bundle version %d predates %s (this runtime reads version "
                "%d): recompile it with moe-translate --moe-to-bundle",
                int(version),
                version == 1   ? "persistent kernels"
                : version == 2 ? "kernel epilogues"
                : version == 3 ? "the route and unpermute kernels"
                : version == 4 ? "expert biases and layer entries"
                               : "block-FP8 grouped matmuls",
                MOE_BUNDLE_VERSION);
  if (version != 6 && version != MOE_BUNDLE_VERSION)
    return fail(MOE_STATUS_UNSUPPORTED,
                "bundle version %lld is not supported (this runtime reads "
                "version %d)",
                (long long)version, MOE_BUNDLE_VERSION);
  out.version = int32_t(version);
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::parseChip(const std::vector<std::string_view> &tokens) {
  if (tokens.size() != 2)
    return fail(MOE_STATUS_INVALID_BUNDLE, "expected 'chip <name>'");
  if (!out.chip.empty())
    return fail(MOE_STATUS_INVALID_BUNDLE, "second 'chip' line");
  if (!out.entries.empty())
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "the 'chip' line must come before every entry");
  std::string_view chip = tokens[1];
  if (moeStatus status = checkName(chip, "chip"))
    return status;
  // sm_<major><minor>[a]: two or three digits without a leading zero.
  bool archSpecific = chip.back() == 'a';
  std::string_view digits;
  if (chip.size() > 3 && chip.substr(0, 3) == "sm_")
    digits = chip.substr(3, chip.size() - 3 - (archSpecific ? 1 : 0));
  int64_t number = 0;
  if (digits.size() < 2 || digits.size() > 3 || !parseDecimal(digits, number) ||
      number < 10)
    return fail(MOE_STATUS_UNSUPPORTED,
                "chip %s is not supported (expected sm_<major><minor> or "
                "sm_<major><minor>a, e.g. sm_90a)",
                quote(chip).c_str());
  // Only the chips the compiler builds kernels for (Contract.td).
  if (std::none_of(std::begin(moe::contract::kChips),
                   std::end(moe::contract::kChips),
                   [&](const char *known) { return chip == known; })) {
    std::string known;
    for (const char *name : moe::contract::kChips)
      known += (known.empty() ? "" : ", ") + std::string(name);
    return fail(MOE_STATUS_UNSUPPORTED,
                "chip %s is not supported (this runtime runs bundles for %s)",
                quote(chip).c_str(), known.c_str());
  }
  out.chip = std::string(chip);
  out.ccMajor = int(number / 10);
  out.ccMinor = int(number % 10);
  out.archSpecific = archSpecific;
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::parseImage(const std::vector<std::string_view> &tokens) {
  // Version 7 records the bytes' checksum.
  const bool checksummed = out.version >= 7;
  if (tokens.size() != (checksummed ? 4u : 3u))
    return fail(MOE_STATUS_INVALID_BUNDLE,
                checksummed ? "expected 'image <name> <size> fnv1a64=<16 hex "
                              "digits>'"
                            : "expected 'image <name> <size>'");
  std::string_view name = tokens[1];
  if (moeStatus status = checkName(name, "image"))
    return status;
  std::string who = "image '" + std::string(name) + "'";
  for (const Image &image : out.images)
    if (image.name == name)
      return fail(MOE_STATUS_INVALID_BUNDLE, "%s is already defined on line %d",
                  who.c_str(), image.line);
  if (out.images.size() == kMaxImages)
    return fail(MOE_STATUS_INVALID_BUNDLE, "more than %zu images", kMaxImages);
  int64_t bytes = 0;
  if (!parseDecimal(tokens[2], bytes) || bytes < 0)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: size %s is not a decimal integer", who.c_str(),
                quote(tokens[2]).c_str());
  if (bytes == 0)
    return fail(MOE_STATUS_INVALID_BUNDLE, "%s is empty", who.c_str());
  if (uint64_t(bytes) > kMaxImageBytes)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s has %lld bytes, more than the limit of %llu", who.c_str(),
                (long long)bytes, (unsigned long long)kMaxImageBytes);
  size_t length = size_t(bytes);
  if (size - pos < length + 1)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: its %zu bytes and '\\n' do not fit in the %zu bytes "
                "that follow (truncated bundle?)",
                who.c_str(), length, size - pos);
  if (data[pos + length] != '\n')
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: expected '\\n' right after its %zu bytes", who.c_str(),
                length);
  if (checksummed) {
    std::string_view recorded = tokens[3];
    uint64_t expected = 0;
    if (recorded.substr(0, 8) != "fnv1a64=" || recorded.size() != 8 + 16 ||
        !parseHex(recorded.substr(8), expected))
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: expected fnv1a64=<16 hex digits>, got %s", who.c_str(),
                  quote(recorded).c_str());
    uint64_t actual = moe::contract::fnv1a64(data + pos, length);
    if (actual != expected)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: its bytes are damaged (checksum fnv1a64=%016llx, the "
                  "bundle records %016llx)",
                  who.c_str(), (unsigned long long)actual,
                  (unsigned long long)expected);
  }
  static constexpr unsigned char kElfMagic[4] = {0x7f, 'E', 'L', 'F'};
  if (length < sizeof(kElfMagic) ||
      std::memcmp(data + pos, kElfMagic, sizeof(kElfMagic)) != 0)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s is not an ELF cubin (it does not start with \\x7fELF)",
                who.c_str());
  Image image;
  image.data.reset(static_cast<uint8_t *>(std::malloc(length)));
  if (!image.data)
    return fail(MOE_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes",
                who.c_str(), length);
  std::memcpy(image.data.get(), data + pos, length);
  image.name = std::string(name);
  image.size = length;
  image.line = line;
  out.images.push_back(std::move(image));
  pos += length + 1;
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::parseEntry(const std::vector<std::string_view> &tokens) {
  if (tokens.size() < 2)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "expected 'entry <name> key=value...'");
  std::string_view name = tokens[1];
  if (moeStatus status = checkName(name, "entry"))
    return status;
  std::string who = "entry '" + std::string(name) + "'";
  if (out.chip.empty())
    return fail(MOE_STATUS_INVALID_BUNDLE, "%s comes before the 'chip' line",
                who.c_str());
  for (const Entry &entry : out.entries)
    if (entry.name == name)
      return fail(MOE_STATUS_INVALID_BUNDLE, "%s is already defined on line %d",
                  who.c_str(), entry.line);
  if (out.entries.size() == kMaxEntries)
    return fail(MOE_STATUS_INVALID_BUNDLE, "more than %zu entries",
                kMaxEntries);
  // An ABI this runtime does not implement makes the rest of the line
  // meaningless to it (a newer compiler may add keys with a new ABI), so it
  // is reported first; a known one says which keys the line must have.
  const RecordSpec *spec = nullptr;
  Abi kind = Abi::GroupedMatmul;
  for (size_t i = 2; i < tokens.size(); ++i) {
    std::string_view token = tokens[i];
    if (token.substr(0, 4) != "abi=")
      continue;
    std::string_view abi = token.substr(4);
    const RecordSpec *known = nullptr;
    Abi knownKind = Abi::GroupedMatmul;
    if (abi == MOE_ABI_GROUPED_MATMUL) {
      known = &kGroupedMatmulEntry;
    } else if (abi == MOE_ABI_GROUPED_MATMUL_FP8) {
      known = &kGroupedMatmulFp8Entry;
      knownKind = Abi::GroupedMatmulFp8;
    } else if (abi == MOE_ABI_ROUTE) {
      known = &kRouteEntry;
      knownKind = Abi::Route;
    } else if (abi == MOE_ABI_UNPERMUTE) {
      known = &kUnpermuteEntry;
      knownKind = Abi::Unpermute;
    } else if (abi == MOE_ABI_PERMUTE) {
      known = &kPermuteEntry;
      knownKind = Abi::Permute;
    } else if (abi == MOE_ABI_LAYER) {
      known = &kLayerEntry;
      knownKind = Abi::Layer;
    } else if (abi == MOE_ABI_QUANTIZE) {
      known = &kQuantizeEntry;
      knownKind = Abi::Quantize;
    } else if (abi == MOE_ABI_LAYER_FP8) {
      known = &kLayerFp8Entry;
      knownKind = Abi::LayerFp8;
    } else if (abi == MOE_ABI_GROUPED_WGRAD) {
      known = &kGroupedWgradEntry;
      knownKind = Abi::GroupedWgrad;
    } else if (abi == MOE_ABI_PLANNED) {
      known = &kPlannedEntry;
      knownKind = Abi::Planned;
    } else if (abi == MOE_ABI_PROGRAM) {
      known = &kProgramEntry;
      knownKind = Abi::Program;
    } else {
      return fail(MOE_STATUS_UNSUPPORTED,
                  "%s: abi %s is not supported (this runtime implements "
                  "bundle version %d with abis " MOE_ABI_GROUPED_MATMUL
                  ", " MOE_ABI_GROUPED_MATMUL_FP8 ", " MOE_ABI_ROUTE
                  ", " MOE_ABI_UNPERMUTE ", " MOE_ABI_PERMUTE ", " MOE_ABI_LAYER
                  ", " MOE_ABI_QUANTIZE ", " MOE_ABI_LAYER_FP8
                  ", " MOE_ABI_GROUPED_WGRAD ", " MOE_ABI_PLANNED
                  " and " MOE_ABI_PROGRAM ")%s",
                  who.c_str(), quote(abi).c_str(), MOE_BUNDLE_VERSION,
                  abi == "grouped_matmul.v1"
                      ? ": its kernels are not persistent, recompile it"
                  : abi == "grouped_matmul.v2"
                      ? ": it predates kernel epilogues, recompile it"
                  : abi == "permute.v1" ? ": it predates the multi-CTA count "
                                          "and index kernels, recompile it"
                  : abi == "unpermute.v1"
                      ? ": it predates column blocks, recompile it"
                      : "");
    }
    if (!spec) { // a second abi key is a duplicate (collectKeys)
      spec = known;
      kind = knownKind;
    }
  }
  if (!spec)
    return fail(MOE_STATUS_INVALID_BUNDLE, "%s: missing key 'abi'",
                who.c_str());
  std::vector<std::string_view> values;
  if (moeStatus status = collectKeys(tokens, 2, *spec, who, values))
    return status;
  Entry entry;
  entry.name = std::string(name);
  entry.line = line;
  entry.kind = kind;
  if (moeStatus status = checkName(values[0], "op"))
    return status;
  entry.op = std::string(values[0]);
  entry.abi = std::string(values[1]);
  moeStatus status =
      kind == Abi::Route          ? parseRouteEntry(who, values, entry)
      : kind == Abi::Unpermute    ? parseUnpermuteEntry(who, values, entry)
      : kind == Abi::Permute      ? parsePermuteEntry(who, values, entry)
      : isLayer(kind)             ? parseLayerEntry(who, values, entry)
      : kind == Abi::Quantize     ? parseQuantizeEntry(who, values, entry)
      : kind == Abi::GroupedWgrad ? parseWgradEntry(who, values, entry)
      : kind == Abi::Planned || kind == Abi::Program
          ? number(who, "max_rows", values[2], 1, kMaxRows, false,
                   entry.maxRows)
          : parseGroupedMatmulEntry(who, values, entry);
  if (status == MOE_STATUS_SUCCESS && kind == Abi::Program)
    status = parseStageKeys(who, values, entry);
  if (status == MOE_STATUS_SUCCESS && kind == Abi::GroupedMatmulFp8)
    status = parseFp8Keys(who, values, entry);
  if (status == MOE_STATUS_SUCCESS && kind == Abi::GroupedMatmul)
    status = parseWeightsKey(who, values[10], entry);
  if (status == MOE_STATUS_SUCCESS && kind == Abi::GroupedMatmul)
    status = parseRoundTripKey(who, values[11], entry);
  if (status != MOE_STATUS_SUCCESS)
    return status;
  out.entries.push_back(std::move(entry));
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::parseGemmShape(const std::string &who,
                                 const std::vector<std::string_view> &values,
                                 Entry &entry) {
  moeStatus status;
  if ((status = number(who, "experts", values[2], 1, kMaxRows, true,
                       entry.experts)) ||
      (status = number(who, "n", values[3], 1, kMaxRows, true, entry.n)) ||
      (status = number(who, "k", values[4], 1, kMaxRows, true, entry.k)) ||
      (status = number(who, "max_rows", values[5], 1, kMaxRows, false,
                       entry.maxRows)))
    return status;
  return integerBits(who, "offsets", values[6], entry.offsetsBits);
}

moeStatus
Reader::parseGroupedMatmulEntry(const std::string &who,
                                const std::vector<std::string_view> &values,
                                Entry &entry) {
  moeStatus status;
  if ((status = parseGemmShape(who, values, entry)))
    return status;
  if (values[7] == MOE_EPILOGUE_STORE)
    entry.epilogue = Epilogue::Store;
  else if (values[7] == MOE_EPILOGUE_SWIGLU)
    entry.epilogue = Epilogue::SwiGLU;
  else if (values[7] == MOE_EPILOGUE_ROW_SCALE)
    entry.epilogue = Epilogue::RowScale;
  else
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: epilogue=%s is not store, swiglu or row_scale",
                who.c_str(), quote(values[7]).c_str());
  // A swiglu entry's weights hold N/2 gate rows, then N/2 up rows.
  if (entry.epilogue == Epilogue::SwiGLU && entry.n != -1 && entry.n % 2)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: n=%lld is odd, but epilogue=swiglu needs N/2 gate rows "
                "and N/2 up rows",
                who.c_str(), (long long)entry.n);
  if (values[8] == "none")
    entry.biasBits = 0;
  else if (values[8] == "f32")
    entry.biasBits = 32;
  else if (values[8] == "bf16")
    entry.biasBits = 16;
  else
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: bias=%s is not none, f32 or bf16", who.c_str(),
                quote(values[8]).c_str());
  if (values[9] == MOE_ACTIVATION_NONE)
    entry.activation = Activation::None;
  else if (values[9] == MOE_ACTIVATION_SILU)
    entry.activation = Activation::SiLU;
  else if (values[9] == MOE_ACTIVATION_GPTOSS)
    entry.activation = Activation::GptOss;
  else
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: activation=%s is not none, silu or gptoss", who.c_str(),
                quote(values[9]).c_str());
  // Only the swiglu epilogue has an activation, and it needs one.
  const bool swiglu = entry.epilogue == Epilogue::SwiGLU;
  if (swiglu == (entry.activation == Activation::None))
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: activation=%s does not fit epilogue=%s (swiglu takes "
                "silu or gptoss, store and row_scale take none)",
                who.c_str(), activationName(entry.activation),
                epilogueName(entry.epilogue));
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::parseWgradEntry(const std::string &who,
                                  const std::vector<std::string_view> &values,
                                  Entry &entry) {
  // The one op with this ABI; out [E, N, K], grad [M, N], rows [M, K].
  if (entry.op != MOE_OP_GROUPED_WGRAD)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: op=%s with abi " MOE_ABI_GROUPED_WGRAD
                " (its entries are op=" MOE_OP_GROUPED_WGRAD ")",
                who.c_str(), entry.op.c_str());
  return parseGemmShape(who, values, entry);
}

moeStatus Reader::parseWeightsKey(const std::string &who,
                                  std::string_view weights, Entry &entry) {
  // weights=kn: the op reads weights [E, K, N] untransposed: always
  // moe.grouped_dgrad (the forward's weights, a plain store), and a
  // moe.grouped_matmul with kn_weights (GPT-OSS's, a store and a bias).
  if (isPresent(weights) && weights != "kn")
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: weights=%s is not kn (the only value of weights; "
                "without it the weights are [E, N, K])",
                who.c_str(), quote(weights).c_str());
  entry.weightsKN = isPresent(weights);
  bool dgrad = entry.op == MOE_OP_GROUPED_DGRAD;
  if (entry.weightsKN ? !dgrad && entry.op != MOE_OP_GROUPED_MATMUL : dgrad)
    return fail(
        MOE_STATUS_INVALID_BUNDLE,
        "%s: op=%s %s weights=kn (the weights of op=" MOE_OP_GROUPED_DGRAD
        " are [E, K, N], those of op=" MOE_OP_GROUPED_MATMUL
        " [E, K, N] or [E, N, K], every other op's [E, N, K])",
        who.c_str(), entry.op.c_str(), entry.weightsKN ? "with" : "without");
  if (entry.weightsKN &&
      (entry.epilogue != Epilogue::Store || (dgrad && entry.biasBits != 0)))
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: weights=kn with epilogue=%s and a %d-bit bias "
                "(op=" MOE_OP_GROUPED_DGRAD " stores plainly, without a bias; "
                "op=" MOE_OP_GROUPED_MATMUL " stores, with a bias or not)",
                who.c_str(), epilogueName(entry.epilogue), int(entry.biasBits));
  return MOE_STATUS_SUCCESS;
}

/// A `round_trip` value (contract §3.1, §3.4): the MXFP8 elements.
static bool isRoundTripName(std::string_view value) {
  return value == "mxfp8_e4m3" || value == "mxfp8_e5m2";
}

moeStatus Reader::parseRoundTripKey(const std::string &who,
                                    std::string_view roundTrip,
                                    const Entry &entry) {
  // The activation stored as its MXFP8 round trip: what the kernels do to
  // their output, nothing a launch passes.
  if (!isPresent(roundTrip))
    return MOE_STATUS_SUCCESS;
  if (!isRoundTripName(roundTrip))
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: round_trip=%s is not mxfp8_e4m3 or mxfp8_e5m2",
                who.c_str(), quote(roundTrip).c_str());
  if (entry.epilogue != Epilogue::SwiGLU)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: round_trip=%s with epilogue=%s (only a swiglu epilogue "
                "stores an activation's round trip)",
                who.c_str(), quote(roundTrip).c_str(),
                epilogueName(entry.epilogue));
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::parseFp8Keys(const std::string &who,
                               const std::vector<std::string_view> &values,
                               Entry &entry) {
  // The compiler writes block-FP8 entries for moe.grouped_matmul ops and the
  // GEMMs of block-FP8 expert MLPs (and so of layer_fp8.v1 layers).
  if (entry.op != MOE_OP_GROUPED_MATMUL && entry.op != MOE_OP_EXPERT_MLP)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: op=%s with abi " MOE_ABI_GROUPED_MATMUL_FP8
                " (its entries are op=" MOE_OP_GROUPED_MATMUL
                " or " MOE_OP_EXPERT_MLP ")",
                who.c_str(), entry.op.c_str());
  // DeepSeek-V3's block scales, or OCP MX's (contract §3.7).
  if (values[10] == MOE_FORMAT_FP8_BLOCK)
    entry.format = Fp8Format::Block;
  else if (values[10] == MOE_FORMAT_MXFP8)
    entry.format = Fp8Format::Mx;
  else
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: format=%s is neither " MOE_FORMAT_FP8_BLOCK
                " nor " MOE_FORMAT_MXFP8
                " (the formats of abi " MOE_ABI_GROUPED_MATMUL_FP8 ")",
                who.c_str(), quote(values[10]).c_str());
  // out=f8E4M3FN: the gate-up GEMM of a block-FP8 expert MLP quantizes its
  // activation in its epilogue, in [1, 128] groups of the N/2 output
  // columns (contract §3.7). Absent: bf16.
  if (!isPresent(values[11]))
    return MOE_STATUS_SUCCESS;
  if (values[11] != MOE_OUT_E4M3)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: out=%s is not " MOE_OUT_E4M3
                " (the only value of out; without it the output is bf16)",
                who.c_str(), quote(values[11]).c_str());
  // The quantizing epilogue writes fp8_block's f32 scales per [1, 128]
  // group; no kernel writes MXFP8.
  if (entry.format != Fp8Format::Block)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: out=" MOE_OUT_E4M3
                " with format=%s (only " MOE_FORMAT_FP8_BLOCK
                " entries quantize their output, with f32 scales per [1, "
                "128] group; an " MOE_FORMAT_MXFP8 " entry writes bf16)",
                who.c_str(), fp8FormatName(entry.format));
  if (entry.epilogue != Epilogue::SwiGLU)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: out=" MOE_OUT_E4M3 " with epilogue=%s (only a swiglu "
                "entry, the gate-up GEMM of a block-FP8 expert MLP, quantizes "
                "its output)",
                who.c_str(), epilogueName(entry.epilogue));
  // n is even (swiglu): n/2 >= 1.
  if (entry.n != -1 && (entry.n / 2) % kFp8BlockSize)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: n=%lld with out=" MOE_OUT_E4M3 ": n/2 = %lld is not a "
                "multiple of 128 (the kernels write whole [1, 128] groups of "
                "the output and their scales)",
                who.c_str(), (long long)entry.n, (long long)(entry.n / 2));
  entry.fp8Out = true;
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::parseRouteEntry(const std::string &who,
                                  const std::vector<std::string_view> &values,
                                  Entry &entry) {
  int64_t topK = 0, bias = 0;
  moeStatus status;
  if ((status = number(who, "max_rows", values[2], 1, kMaxRows, false,
                       entry.maxRows)) ||
      (status = number(who, "experts", values[3], 1, kMaxRows, false,
                       entry.experts)) ||
      (status = number(who, "top_k", values[4], 1, kMaxTopK, false, topK)))
    return status;
  if (topK > entry.experts)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: top_k=%lld exceeds experts=%lld", who.c_str(),
                (long long)topK, (long long)entry.experts);
  if (values[5] == "f32")
    entry.logitsBits = 32;
  else if (values[5] == "bf16")
    entry.logitsBits = 16;
  else
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: logits=%s is neither f32 nor bf16", who.c_str(),
                quote(values[5]).c_str());
  if ((status = number(who, "bias", values[6], 0, 1, false, bias)))
    return status;
  entry.topK = int32_t(topK);
  entry.bias = bias != 0;
  // shared=c [shared_gate=1 hidden=H]: c slots of the shared expert's
  // slices after the k routed ones, gated by sigmoid(tokens . gate).
  int64_t shared = 0, gate = 0;
  if (isPresent(values[7]) &&
      (status = number(who, "shared", values[7], 1, kMaxTopK, false, shared)))
    return status;
  if (isPresent(values[8]) &&
      (status = number(who, "shared_gate", values[8], 0, 1, false, gate)))
    return status;
  if ((gate || isPresent(values[9])) && !shared)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: shared_gate or hidden without shared (they describe "
                "the shared slots' gate)",
                who.c_str());
  if (gate && (status = hiddenSize(who, values[9], entry.hidden)))
    return status;
  if (topK + shared > 2 * kMaxTopK)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: top_k=%lld plus shared=%lld exceeds %lld slots",
                who.c_str(), (long long)topK, (long long)shared,
                (long long)(2 * kMaxTopK));
  entry.shared = int32_t(shared);
  entry.sharedGate = gate != 0;
  return MOE_STATUS_SUCCESS;
}

moeStatus
Reader::parseUnpermuteEntry(const std::string &who,
                            const std::vector<std::string_view> &values,
                            Entry &entry) {
  int64_t topK = 0, weighted = 0;
  moeStatus status;
  if ((status = number(who, "max_rows", values[2], 1, kMaxRows, false,
                       entry.maxRows)) ||
      (status = hiddenSize(who, values[3], entry.hidden)) ||
      (status = number(who, "top_k", values[4], 1, kMaxRows, false, topK)) ||
      (status = integerBits(who, "slots", values[5], entry.slotsBits)))
    return status;
  if ((status = number(who, "weighted", values[6], 0, 1, false, weighted)))
    return status;
  entry.topK = int32_t(topK);
  entry.weighted = weighted != 0;
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::parsePermuteEntry(const std::string &who,
                                    const std::vector<std::string_view> &values,
                                    Entry &entry) {
  int64_t topK = 0;
  moeStatus status;
  if ((status = number(who, "max_rows", values[2], 1, kMaxRows, false,
                       entry.maxRows)) ||
      (status = number(who, "experts", values[3], 1, kMaxPermuteExperts, false,
                       entry.experts)) ||
      (status = number(who, "top_k", values[4], 1, kMaxRows, false, topK)) ||
      (status = hiddenSize(who, values[5], entry.hidden)))
    return status;
  if ((status = integerBits(who, "offsets", values[6], entry.offsetsBits)))
    return status;
  int64_t chunk = 0;
  if ((status = number(who, "chunk", values[7], kPermuteChunkQuantum,
                       kMaxPermuteChunk, false, chunk)))
    return status;
  // The kernels rank the ids of a chunk a warp (32 ids) at a time.
  if (chunk % kPermuteChunkQuantum)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: chunk=%lld is not a multiple of 32 (ids are ranked a "
                "warp at a time)",
                who.c_str(), (long long)chunk);
  entry.topK = int32_t(topK);
  entry.chunk = int32_t(chunk);
  // index_counts=1: the index kernel counts a single chunk itself (contract
  // §3.4), so the runtime launches the count kernel only for more.
  if (isPresent(values[9])) {
    int64_t indexCounts = 0;
    if ((status =
             number(who, "index_counts", values[9], 0, 1, false, indexCounts)))
      return status;
    entry.indexCounts = indexCounts != 0;
  }
  // scatter_from=S: a fourth kernel, the scatter over the tokens, launched
  // instead of the gather from T = S on (contract §3.4); only a quantizing
  // permute has one.
  if (isPresent(values[10])) {
    if ((status = number(who, "scatter_from", values[10], 1, kMaxRows, false,
                         entry.scatterFrom)))
      return status;
    if (!isPresent(values[8]))
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: scatter_from=%lld without out=" MOE_OUT_E4M3
                  " (only a quantizing permute has a scatter kernel)",
                  who.c_str(), (long long)entry.scatterFrom);
  }
  // round_trip: the gather stores the bf16 rows' MXFP8 round trip, in
  // [1, 32] blocks of a row (contract §3.4): bf16 rows still.
  if (isPresent(values[11])) {
    if (!isRoundTripName(values[11]))
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: round_trip=%s is not mxfp8_e4m3 or mxfp8_e5m2",
                  who.c_str(), quote(values[11]).c_str());
    if (isPresent(values[8]))
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: round_trip=%s with out=%s (a gather stores e4m3 rows "
                  "or the bf16 rows' round trip, not both)",
                  who.c_str(), quote(values[11]).c_str(),
                  quote(values[8]).c_str());
    if (entry.hidden != -1 && entry.hidden % kMxBlockSize)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: hidden=%lld with round_trip is not a multiple of 32 "
                  "(the gather makes whole [1, 32] blocks of a row)",
                  who.c_str(), (long long)entry.hidden);
  }
  // out=f8E4M3FN: the gather quantizes the rows, in [1, 128] groups of a row
  // (contract §3.4). Absent: bf16.
  if (!isPresent(values[8]))
    return MOE_STATUS_SUCCESS;
  if (values[8] != MOE_OUT_E4M3)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: out=%s is not " MOE_OUT_E4M3
                " (the only value of out; without it the rows are bf16)",
                who.c_str(), quote(values[8]).c_str());
  if (entry.hidden != -1 && entry.hidden % kFp8BlockSize)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: hidden=%lld with out=" MOE_OUT_E4M3 " is not a multiple "
                "of 128 (the gather writes whole [1, 128] groups of a row and "
                "their scales)",
                who.c_str(), (long long)entry.hidden);
  entry.fp8Out = true;
  return MOE_STATUS_SUCCESS;
}

moeStatus
Reader::parseQuantizeEntry(const std::string &who,
                           const std::vector<std::string_view> &values,
                           Entry &entry) {
  // The compiler writes quantize.v1 entries for moe.quantize ops and for the
  // quantize between the GEMMs of a block-FP8 expert MLP.
  if (entry.op != MOE_OP_QUANTIZE && entry.op != MOE_OP_EXPERT_MLP)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: op=%s with abi " MOE_ABI_QUANTIZE
                " (its entries are op=" MOE_OP_QUANTIZE " or " MOE_OP_EXPERT_MLP
                ")",
                who.c_str(), entry.op.c_str());
  moeStatus status;
  if ((status = number(who, "max_rows", values[2], 1, kMaxRows, false,
                       entry.maxRows)))
    return status;
  if (values[3] == MOE_ELEMENT_E4M3 || values[3] == MOE_ELEMENT_E5M2)
    entry.e5m2 = values[3] == MOE_ELEMENT_E5M2;
  else
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: element=%s is neither " MOE_ELEMENT_E4M3
                " nor " MOE_ELEMENT_E5M2,
                who.c_str(), quote(values[3]).c_str());
  if (values[4] == MOE_SCALE_F32 || values[4] == MOE_SCALE_E8M0)
    entry.e8m0 = values[4] == MOE_SCALE_E8M0;
  else
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: scale=%s is neither " MOE_SCALE_F32 " nor " MOE_SCALE_E8M0,
                who.c_str(), quote(values[4]).c_str());
  if (values[5] == "bf16" || values[5] == "f32")
    entry.inputBits = values[5] == "bf16" ? 16 : 32;
  else
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: input=%s is neither bf16 nor f32", who.c_str(),
                quote(values[5]).c_str());
  int64_t blockRows = 0, blockCols = 0, rank = 0;
  if ((status = number(who, "block_rows", values[6], 1, kQuantizeTile, false,
                       blockRows)) ||
      (status = number(who, "block_cols", values[7], 1, kMaxQuantizeRowBlock,
                       false, blockCols)) ||
      (status = number(who, "rank", values[8], 2, 3, false, rank)))
    return status;
  const bool rowBlock = blockRows == 1 && blockCols >= kMinQuantizeRowBlock &&
                        (blockCols & (blockCols - 1)) == 0;
  const bool tile = blockRows == kQuantizeTile && blockCols == kQuantizeTile;
  if (!rowBlock && !tile)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: block [%lld, %lld] has no kernel (abi " MOE_ABI_QUANTIZE
                " implements [1, B] with B a power of two from 8 to 256, and "
                "[128, 128])",
                who.c_str(), (long long)blockRows, (long long)blockCols);
  // OCP MX fixes the block at 32 elements of a row.
  if (entry.e8m0 && (blockRows != 1 || blockCols != 32))
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: scale=" MOE_SCALE_E8M0 " needs block [1, 32] (OCP MX), "
                "got [%lld, %lld]",
                who.c_str(), (long long)blockRows, (long long)blockCols);
  if ((status =
           number(who, "batch", values[9], 1, kMaxRows, true, entry.batch)) ||
      (status =
           number(who, "rows", values[10], 1, kMaxRows, true, entry.rows)) ||
      (status = number(who, "cols", values[11], 1, kMaxRows, true, entry.cols)))
    return status;
  if (rank == 2 && entry.batch != 1)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: batch=%lld, but a rank-2 input [R, C] has batch=1",
                who.c_str(), (long long)entry.batch);
  if (entry.rows != -1 && entry.rows % blockRows)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: rows=%lld is not a multiple of block_rows=%lld",
                who.c_str(), (long long)entry.rows, (long long)blockRows);
  if (entry.cols != -1 && entry.cols % blockCols)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: cols=%lld is not a multiple of block_cols=%lld",
                who.c_str(), (long long)entry.cols, (long long)blockCols);
  entry.blockRows = int32_t(blockRows);
  entry.blockCols = int32_t(blockCols);
  entry.rank = int32_t(rank);
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::parseLayerEntry(const std::string &who,
                                  const std::vector<std::string_view> &values,
                                  Entry &entry) {
  if (moeStatus status =
          number(who, "max_rows", values[2], 1, kMaxRows, false, entry.maxRows))
    return status;
  // Each part is an earlier entry of the op and ABI its step launches (the
  // compiler writes the parts first). A layer.v1 entry has bf16 GEMMs and
  // no quantize parts (op null); a layer_fp8.v1 entry block-FP8 GEMMs and a
  // quantize before each.
  const bool fp8 = entry.kind == Abi::LayerFp8;
  const Abi gemmKind = fp8 ? Abi::GroupedMatmulFp8 : Abi::GroupedMatmul;
  const struct {
    Abi kind;
    const char *op;
  } kParts[kNumLayerParts] = {
      {Abi::Route, MOE_OP_ROUTE},
      {Abi::Permute, MOE_OP_PERMUTE},
      {Abi::Quantize, fp8 ? MOE_OP_QUANTIZE : nullptr},
      {gemmKind, MOE_OP_EXPERT_MLP},
      {Abi::Quantize, fp8 ? MOE_OP_EXPERT_MLP : nullptr},
      {gemmKind, MOE_OP_EXPERT_MLP},
      {Abi::Unpermute, MOE_OP_UNPERMUTE}};
  // The spec lists the parts after op, abi and max_rows, in LayerPart order;
  // the route is absent when the model routes (the layer takes ids and
  // weights), and a layer_fp8.v1 entry's quantize and intermediate may be
  // absent (checked below).
  size_t next = 3;
  for (int p = 0; p < kNumLayerParts; ++p) {
    if (!kParts[p].op)
      continue;
    std::string_view name = values[next++];
    if (!isPresent(name))
      continue;
    for (size_t i = 0; i < out.entries.size(); ++i)
      if (out.entries[i].name == name)
        entry.parts[p] = int(i);
    if (entry.parts[p] < 0)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: %s=%s is not an entry defined before this line (the "
                  "parts of a layer come first)",
                  who.c_str(), layerPartName(p), quote(name).c_str());
    const Entry &part = out.entries[entry.parts[p]];
    if (part.kind != kParts[p].kind || part.op != kParts[p].op)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: %s=%s is op=%s abi=%s, not op=%s abi=%s", who.c_str(),
                  layerPartName(p), part.name.c_str(), part.op.c_str(),
                  part.abi.c_str(), kParts[p].op, abiName(kParts[p].kind));
  }
  const Entry *route = entry.parts[kRoutePart] >= 0
                           ? &out.entries[entry.parts[kRoutePart]]
                           : nullptr;
  const Entry &permute = out.entries[entry.parts[kPermutePart]];
  const Entry &gateUp = out.entries[entry.parts[kGateUpPart]];
  const Entry &down = out.entries[entry.parts[kDownPart]];
  const Entry &unpermute = out.entries[entry.parts[kUnpermutePart]];
  const char *layer = who.c_str();
  // "<layer>: <part>=<name> has <key>=<value>, but <part>=<name> has ...".
  auto mismatch = [&](int p, const char *key, long long value, int q,
                      const char *otherKey, long long other) {
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: %s=%s has %s=%lld, but %s=%s has %s=%lld", layer,
                layerPartName(p), out.entries[entry.parts[p]].name.c_str(), key,
                value, layerPartName(q),
                out.entries[entry.parts[q]].name.c_str(), otherKey, other);
  };
  if (gateUp.epilogue != Epilogue::SwiGLU)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: gate_up=%s has epilogue=%s, expected swiglu", layer,
                gateUp.name.c_str(), epilogueName(gateUp.epilogue));
  // The combine applies the routing weights, not the down GEMM.
  if (down.epilogue != Epilogue::Store)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: down=%s has epilogue=%s, expected store", layer,
                down.name.c_str(), epilogueName(down.epilogue));
  // The gate-up GEMM reads the gathered rows: bf16 for a layer.v1 entry;
  if (!fp8 && permute.fp8Out)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: permute=%s has out=" MOE_OUT_E4M3
                ", but abi " MOE_ABI_LAYER
                " runs bf16 GEMMs on bf16 rows (an FP8 gather belongs to a "
                "layer of abi " MOE_ABI_LAYER_FP8 ")",
                layer, permute.name.c_str());
  // A layer_fp8.v1 entry's GEMMs read FP8: the permute's rows and the
  // gate-up's output are each quantized by their producer (out=f8E4M3FN)
  // or by a quantize part of the layer, exactly one of the two.
  auto quantizedOnce = [&](int producer, int quantize) -> moeStatus {
    const Entry &written = out.entries[entry.parts[producer]];
    if (entry.parts[quantize] < 0 && !written.fp8Out)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: %s=%s writes bf16 (no out key), but the layer has no "
                  "%s part to quantize it: without one, %s must have "
                  "out=" MOE_OUT_E4M3,
                  layer, layerPartName(producer), written.name.c_str(),
                  layerPartName(quantize), layerPartName(producer));
    if (entry.parts[quantize] >= 0 && written.fp8Out)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: %s=%s has out=" MOE_OUT_E4M3 ", but %s=%s quantizes "
                  "its bf16 output (a %s that quantizes its output itself "
                  "takes no %s part)",
                  layer, layerPartName(producer), written.name.c_str(),
                  layerPartName(quantize),
                  out.entries[entry.parts[quantize]].name.c_str(),
                  layerPartName(producer), layerPartName(quantize));
    return MOE_STATUS_SUCCESS;
  };
  // Both GEMMs read what the layer's quantizes make: one format.
  if (fp8 && gateUp.format != down.format)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: gate_up=%s has format=%s, but down=%s has format=%s (the "
                "GEMMs of a layer share one format)",
                layer, gateUp.name.c_str(), fp8FormatName(gateUp.format),
                down.name.c_str(), fp8FormatName(down.format));
  // No gather and no GEMM epilogue writes MXFP8 (the permute's and the
  // gate_up's out=f8E4M3FN make fp8_block's f32 scales per [1, 128]; the
  // reader refuses the gate_up's): an mxfp8 layer has both quantize parts.
  if (fp8 && gateUp.format == Fp8Format::Mx) {
    if (permute.fp8Out)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: permute=%s has out=" MOE_OUT_E4M3
                  ", but the layer's GEMMs have format=" MOE_FORMAT_MXFP8
                  " (a gather quantizes in [1, 128] groups with f32 scales, "
                  "for " MOE_FORMAT_FP8_BLOCK " GEMMs; an " MOE_FORMAT_MXFP8
                  " layer quantizes the bf16 rows with a quantize part)",
                  layer, permute.name.c_str());
    for (int p : {kQuantizePart, kIntermediatePart})
      if (entry.parts[p] < 0)
        return fail(MOE_STATUS_INVALID_BUNDLE,
                    "%s: the layer has no %s part, but its GEMMs have "
                    "format=" MOE_FORMAT_MXFP8 " (no %s quantizes to "
                    "MXFP8: an " MOE_FORMAT_MXFP8 " layer quantizes %s by "
                    "its %s part)",
                    layer, layerPartName(p),
                    p == kQuantizePart ? "gather" : "GEMM epilogue",
                    p == kQuantizePart ? "the permute's bf16 rows"
                                       : "the gate_up's bf16 output",
                    layerPartName(p));
  }
  if (fp8) {
    if (moeStatus status = quantizedOnce(kPermutePart, kQuantizePart))
      return status;
    if (moeStatus status = quantizedOnce(kGateUpPart, kIntermediatePart))
      return status;
  }
  if (fp8)
    if (moeStatus status = checkFp8LayerQuantizes(layer, entry))
      return status;
  // E and k: the route's, static, each with its shared slots; without a
  // route, the permute's.
  const int shape = route ? kRoutePart : kPermutePart;
  const int64_t shared = route ? route->shared : 0,
                experts = route ? route->experts + shared : permute.experts,
                slots = route ? route->topK + shared : permute.topK;
  const char *expertsKey = shared ? "experts+shared" : "experts",
             *slotsKey = shared ? "top_k+shared" : "top_k";
  if (permute.experts != experts)
    return mismatch(kPermutePart, "experts", permute.experts, shape, expertsKey,
                    experts);
  if (permute.topK != slots)
    return mismatch(kPermutePart, "top_k", permute.topK, shape, slotsKey,
                    slots);
  if (unpermute.topK != slots)
    return mismatch(kUnpermutePart, "top_k", unpermute.topK, shape, slotsKey,
                    slots);
  for (int p : {kGateUpPart, kDownPart}) {
    const Entry &gemm = out.entries[entry.parts[p]];
    if (gemm.experts != -1 && gemm.experts != experts)
      return mismatch(p, "experts", gemm.experts, shape, expertsKey, experts);
    // Both GEMMs read the permute's offsets.
    if (gemm.offsetsBits != permute.offsetsBits)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: %s=%s has offsets=i%d, but permute=%s has offsets=i%d",
                  layer, layerPartName(p), gemm.name.c_str(),
                  int(gemm.offsetsBits), permute.name.c_str(),
                  int(permute.offsetsBits));
  }
  // The combine reads the permute's slots, weighted by the route.
  if (unpermute.slotsBits != permute.offsetsBits)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: unpermute=%s has slots=i%d, but permute=%s has "
                "offsets=i%d",
                layer, unpermute.name.c_str(), int(unpermute.slotsBits),
                permute.name.c_str(), int(permute.offsetsBits));
  if (!unpermute.weighted)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: unpermute=%s has weighted=0, but a layer combines with "
                "the routing weights",
                layer, unpermute.name.c_str());
  // The columns of a layer_fp8.v1 entry's quantizes (-1: none, or dynamic).
  auto colsOf = [&](int p) {
    return entry.parts[p] >= 0 ? out.entries[entry.parts[p]].cols : int64_t(-1);
  };
  // H: every static one equal, the first static one as the reference.
  const struct {
    int part;
    const char *key;
    int64_t value;
  } hiddens[] = {
      {kRoutePart, "hidden", route && route->sharedGate ? route->hidden : -1},
      {kPermutePart, "hidden", permute.hidden},
      {kQuantizePart, "cols", colsOf(kQuantizePart)},
      {kGateUpPart, "k", gateUp.k},
      {kDownPart, "n", down.n},
      {kUnpermutePart, "hidden", unpermute.hidden}};
  const auto *reference = hiddens;
  for (const auto &h : hiddens) {
    if (h.value == -1)
      continue;
    if (reference->value == -1)
      reference = &h;
    else if (h.value != reference->value)
      return mismatch(h.part, h.key, h.value, reference->part, reference->key,
                      reference->value);
  }
  // I: the down GEMM reduces over the gate_up's N/2 outputs (which the
  // intermediate of a layer_fp8.v1 entry quantizes).
  if (gateUp.n != -1 && down.k != -1 && down.k != gateUp.n / 2)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: down=%s has k=%lld, but gate_up=%s has n=%lld (k must "
                "be n/2)",
                layer, down.name.c_str(), (long long)down.k,
                gateUp.name.c_str(), (long long)gateUp.n);
  const int64_t interCols = colsOf(kIntermediatePart);
  if (interCols != -1 && down.k != -1 && interCols != down.k)
    return mismatch(kIntermediatePart, "cols", interCols, kDownPart, "k",
                    down.k);
  if (interCols != -1 && gateUp.n != -1 && interCols != gateUp.n / 2)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: intermediate=%s has cols=%lld, but gate_up=%s has "
                "n=%lld (cols must be n/2)",
                layer, out.entries[entry.parts[kIntermediatePart]].name.c_str(),
                (long long)interCols, gateUp.name.c_str(), (long long)gateUp.n);
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::checkFp8LayerQuantizes(const char *layer,
                                         const Entry &entry) {
  // Each makes the rows of the GEMM after it: e4m3 values and an f32 scale
  // per [1, 128] group of a row (contract §3.7; format mxfp8: an E8M0 scale
  // per [1, 32] group), from the bf16 rows of the permute or the gate_up
  // GEMM, as a [T*k, C] matrix (the quantize only
  // when the permute's gather does not quantize the rows itself, the
  // intermediate only when the gate_up does not quantize its output
  // itself).
  // Both GEMMs have the gate_up's format (parseLayerEntry checks it).
  const bool mx = out.entries[entry.parts[kGateUpPart]].format == Fp8Format::Mx;
  const int64_t group = mx ? kMxBlockSize : kFp8BlockSize;
  for (int p : {kQuantizePart, kIntermediatePart}) {
    if (entry.parts[p] < 0)
      continue;
    const Entry &q = out.entries[entry.parts[p]];
    const char *key = layerPartName(p), *name = q.name.c_str();
    const char *gemm =
        layerPartName(p == kQuantizePart ? kGateUpPart : kDownPart);
    if (q.e5m2)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: %s=%s has element=" MOE_ELEMENT_E5M2
                  ", but the %s GEMM reads " MOE_ELEMENT_E4M3 " values",
                  layer, key, name, gemm);
    if (q.e8m0 != mx)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: %s=%s has scale=%s, but the %s GEMM reads %s scales%s",
                  layer, key, name, q.e8m0 ? MOE_SCALE_E8M0 : MOE_SCALE_F32,
                  gemm, mx ? MOE_SCALE_E8M0 : MOE_SCALE_F32,
                  mx ? " (format=" MOE_FORMAT_MXFP8 ")" : "");
    if (q.inputBits != 16)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: %s=%s has input=f32, but the layer quantizes the bf16 "
                  "output of its %s",
                  layer, key, name,
                  p == kQuantizePart ? "permute" : "gate_up GEMM");
    if (q.blockRows != 1 || q.blockCols != group)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: %s=%s has block [%d, %d], but the %s GEMM reads a scale "
                  "per [1, %d] group of a row",
                  layer, key, name, int(q.blockRows), int(q.blockCols), gemm,
                  int(group));
    if (q.rank != 2)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: %s=%s has rank=%d, but the layer quantizes [T*k, C] "
                  "matrices (rank 2)",
                  layer, key, name, int(q.rank));
  }
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::integerBits(const std::string &who, const char *key,
                              std::string_view value, int32_t &bits) {
  if (value == "i32" || value == "i64") {
    bits = value == "i32" ? 32 : 64;
    return MOE_STATUS_SUCCESS;
  }
  return fail(MOE_STATUS_INVALID_BUNDLE, "%s: %s=%s is neither i32 nor i64",
              who.c_str(), key, quote(value).c_str());
}

moeStatus Reader::hiddenSize(const std::string &who, std::string_view value,
                             int64_t &hidden) {
  if (moeStatus status =
          number(who, "hidden", value, 8, kMaxRows, true, hidden))
    return status;
  if (hidden != -1 && hidden % 8)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: hidden=%lld is not a multiple of 8 (rows move in "
                "16-byte vectors)",
                who.c_str(), (long long)hidden);
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::parseKernel(const std::vector<std::string_view> &tokens) {
  if (tokens.size() < 3)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "expected 'kernel <entry> <symbol> key=value...'");
  std::string_view entryName = tokens[1], symbol = tokens[2];
  if (moeStatus status = checkName(entryName, "entry"))
    return status;
  if (moeStatus status = checkName(symbol, "kernel"))
    return status;
  std::string who = "kernel '" + std::string(symbol) + "'";
  if (out.entries.empty() || out.entries.back().name != entryName) {
    for (const Entry &entry : out.entries)
      if (entry.name == entryName)
        return fail(MOE_STATUS_INVALID_BUNDLE,
                    "%s of entry %s must follow that entry's line directly "
                    "(it follows entry '%s')",
                    who.c_str(), quote(entryName).c_str(),
                    out.entries.back().name.c_str());
    return fail(MOE_STATUS_INVALID_BUNDLE, "%s refers to unknown entry %s",
                who.c_str(), quote(entryName).c_str());
  }
  Entry &entry = out.entries.back();
  if (launchesParts(entry.kind))
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: entry '%s' (abi %s) takes no kernels (it launches those "
                "of its parts)",
                who.c_str(), entry.name.c_str(), abiName(entry.kind));
  for (const Kernel &kernel : entry.kernels)
    if (kernel.symbol == symbol)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s appears twice in entry '%s' (also on line %d)",
                  who.c_str(), entry.name.c_str(), kernel.line);
  if (entry.kernels.size() == kMaxKernelsPerEntry)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "entry '%s' has more than %zu kernels", entry.name.c_str(),
                kMaxKernelsPerEntry);
  // A permute.v2 entry has its count kernel, its index kernel, then its
  // gather kernel, and with scatter_from its scatter kernel.
  if (entry.kind == Abi::Permute && entry.kernels.size() == 3 &&
      !entry.scatterFrom)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: entry '%s' (abi %s) takes exactly three kernels, the "
                "count, index and gather kernels, and has '%s' (line %d), "
                "'%s' (line %d) and '%s' (line %d) already",
                who.c_str(), entry.name.c_str(), abiName(entry.kind),
                entry.kernels[0].symbol.c_str(), entry.kernels[0].line,
                entry.kernels[1].symbol.c_str(), entry.kernels[1].line,
                entry.kernels[2].symbol.c_str(), entry.kernels[2].line);
  if (entry.kind == Abi::Permute && entry.kernels.size() == 4)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: entry '%s' (abi %s) with scatter_from takes exactly four "
                "kernels, the count, index, gather and scatter kernels, and "
                "has four already",
                who.c_str(), entry.name.c_str(), abiName(entry.kind));
  // The kernel of a route.v1, unpermute.v2, quantize.v1 or grouped_wgrad.v1
  // entry computes everything.
  if ((entry.kind == Abi::Route || entry.kind == Abi::Unpermute ||
       entry.kind == Abi::Quantize || entry.kind == Abi::GroupedWgrad) &&
      !entry.kernels.empty())
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: entry '%s' (abi %s) takes exactly one kernel, and has "
                "'%s' already (line %d)",
                who.c_str(), entry.name.c_str(), abiName(entry.kind),
                entry.kernels[0].symbol.c_str(), entry.kernels[0].line);
  // Both grouped matmul ABIs have grouped_matmul.v3's kernel keys.
  const RecordSpec &spec = entry.kind == Abi::Route       ? kRouteKernel
                           : entry.kind == Abi::Unpermute ? kUnpermuteKernel
                           : entry.kind == Abi::Permute   ? kPermuteKernel
                           : entry.kind == Abi::Quantize  ? kQuantizeKernel
                           : entry.kind == Abi::GroupedWgrad
                               ? kGroupedWgradKernel
                           : entry.kind == Abi::Planned ? kPlannedKernel
                                                        : kGroupedMatmulKernel;
  std::vector<std::string_view> values;
  if (moeStatus status = collectKeys(tokens, 3, spec, who, values))
    return status;
  Kernel kernel;
  kernel.symbol = std::string(symbol);
  kernel.line = line;
  if (moeStatus status = checkName(values[0], "image"))
    return status;
  kernel.imageName = std::string(values[0]);
  if (isGroupedMatmul(entry.kind)) {
    if (moeStatus status = parseGroupedMatmulKernel(who, entry, values, kernel))
      return status;
  } else {
    int64_t threads = 0, smem = 0;
    moeStatus status;
    if ((status = number(who, "threads", values[1], 1, kMaxThreads, false,
                         threads)) ||
        (status = number(who, "smem", values[2], 0, INT32_MAX, false, smem)))
      return status;
    // One warp per token: the grid is derived from threads/32.
    if (entry.kind == Abi::Route && threads % 32)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: threads=%lld is not a multiple of 32 (a %s kernel "
                  "runs one warp per token)",
                  who.c_str(), (long long)threads, MOE_ABI_ROUTE);
    // Blocks of a row are shared by the lanes of one warp.
    if (entry.kind == Abi::Quantize && threads % 32)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "%s: threads=%lld is not a multiple of 32 (a %s kernel "
                  "reduces a block within a warp)",
                  who.c_str(), (long long)threads, MOE_ABI_QUANTIZE);
    kernel.threads = int32_t(threads);
    kernel.smem = int32_t(smem);
  }
  if (moeStatus status = parseCluster(who, entry, values.back(), kernel))
    return status;
  entry.kernels.push_back(std::move(kernel));
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::parseCluster(const std::string &who, const Entry &entry,
                               std::string_view value, Kernel &kernel) {
  if (!isPresent(value))
    return MOE_STATUS_SUCCESS; // absent: 1
  int64_t cluster = 0;
  if (moeStatus status =
          number(who, "cluster", value, 1, kMaxCluster, false, cluster))
    return status;
  if (cluster == 1)
    return MOE_STATUS_SUCCESS;
  // Two CTAs of a cluster share one row tile, loaded once by TMA multicast,
  // and take two adjacent column tiles (contract §3.1).
  if (!isGroupedMatmul(entry.kind))
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: cluster=%lld, but entry '%s' has abi %s: only the "
                "kernels of %s and %s entries run as clusters of 2 CTAs",
                who.c_str(), (long long)cluster, entry.name.c_str(),
                abiName(entry.kind), MOE_ABI_GROUPED_MATMUL,
                MOE_ABI_GROUPED_MATMUL_FP8);
  if (kernel.swapAB)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: cluster=%lld with swap_ab=1: only the normal form "
                "(swap_ab=0) runs as a cluster of 2 CTAs sharing a row tile",
                who.c_str(), (long long)cluster);
  // Every chip the reader admits (sm_90a, sm_100a) has clusters.
  kernel.cluster = int32_t(cluster);
  return MOE_STATUS_SUCCESS;
}

moeStatus
Reader::parseGroupedMatmulKernel(const std::string &who, const Entry &entry,
                                 const std::vector<std::string_view> &values,
                                 Kernel &kernel) {
  int64_t threads = 0, smem = 0, tileM = 0, tileN = 0, tileK = 0, stages = 0,
          swapAB = 0;
  // A TMA box row of tile_k elements: 16..128 bytes, a multiple of 16 (8..64
  // bf16, 16..128 float8).
  const int64_t elementBytes = gemmElementBytes(entry.kind),
                tileKQuantum = kTmaRowQuantumBytes / elementBytes;
  moeStatus status;
  if ((status = number(who, "rows_min", values[1], 1, kMaxRows, false,
                       kernel.rowsMin)) ||
      (status = number(who, "rows_max", values[2], 1, kMaxRows, false,
                       kernel.rowsMax)) ||
      (status =
           number(who, "threads", values[3], 1, kMaxThreads, false, threads)) ||
      (status = number(who, "smem", values[4], 0, INT32_MAX, false, smem)) ||
      (status = number(who, "tile_m", values[5], 1, kMaxTile, false, tileM)) ||
      (status = number(who, "tile_n", values[6], 1, kMaxTile, false, tileN)) ||
      (status = number(who, "tile_k", values[7], tileKQuantum,
                       kMaxTileKBytes / elementBytes, false, tileK)) ||
      (status =
           number(who, "stages", values[8], 1, kMaxStages, false, stages)) ||
      (status = number(who, "swap_ab", values[9], 0, 1, false, swapAB)))
    return status;
  if (kernel.rowsMin > kernel.rowsMax)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: rows_min=%lld is greater than rows_max=%lld", who.c_str(),
                (long long)kernel.rowsMin, (long long)kernel.rowsMax);
  if (tileK % tileKQuantum != 0)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: tile_k=%lld is not a multiple of %lld (a TMA box row must "
                "be a multiple of 16 bytes)",
                who.c_str(), (long long)tileK, (long long)tileKQuantum);
  // Its weights box is tile_n/2 gate rows (and as many up rows).
  if (entry.epilogue == Epilogue::SwiGLU && tileN % 2 != 0)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s: tile_n=%lld is odd, but entry '%s' has epilogue=swiglu "
                "(tile_n/2 gate and tile_n/2 up columns)",
                who.c_str(), (long long)tileN, entry.name.c_str());
  kernel.threads = int32_t(threads);
  kernel.smem = int32_t(smem);
  kernel.tileM = int32_t(tileM);
  kernel.tileN = int32_t(tileN);
  kernel.tileK = int32_t(tileK);
  kernel.stages = int32_t(stages);
  kernel.swapAB = swapAB != 0;
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::parsePlanRecord(const std::vector<std::string_view> &tokens) {
  std::string_view record = tokens[0];
  if (tokens.size() < 2)
    return fail(MOE_STATUS_INVALID_BUNDLE, "expected '%s <entry> ...'",
                std::string(record).c_str());
  std::string_view entryName = tokens[1];
  if (out.entries.empty() || out.entries.back().name != entryName)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%s record of %s must follow that entry and its kernels",
                std::string(record).c_str(), quote(entryName).c_str());
  Entry &entry = out.entries.back();
  std::vector<std::string_view> fields(tokens.begin() + 2, tokens.end());
  std::string why;
  if (!addPlanRecord(record, fields, entry.plan, why))
    return fail(MOE_STATUS_INVALID_BUNDLE, "entry '%s': %s record: %s",
                entry.name.c_str(), std::string(record).c_str(), why.c_str());
  // A layer's step launches a kernel of an earlier entry, its part.
  if (record == "launch" && !entry.plan.steps.back().part.empty()) {
    PlanStep &step = entry.plan.steps.back();
    for (size_t e = 0; e + 1 < out.entries.size() && step.entry < 0; ++e)
      if (out.entries[e].name == step.part)
        step.entry = int(e);
    if (step.entry < 0)
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "entry '%s': launch record: part=%s names no earlier entry",
                  entry.name.c_str(), quote(step.part).c_str());
  }
  if (!entry.planLine)
    entry.planLine = line;
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::finish() {
  if (pos != size)
    return fail(MOE_STATUS_INVALID_BUNDLE,
                "%zu bytes of trailing data after 'end'", size - pos);
  if (out.chip.empty())
    return fail(MOE_STATUS_INVALID_BUNDLE, "the bundle has no 'chip' line");
  if (moeStatus status = checkStages())
    return status;
  for (Entry &entry : out.entries) {
    std::string why;
    auto kernelsOf = [&](const PlanStep &step) {
      return int(step.entry < 0
                     ? entry.kernels.size()
                     : out.entries[size_t(step.entry)].kernels.size());
    };
    // A planned.v1 or program.v1 entry is known by its plan alone (in every
    // version).
    bool planOnly = entry.kind == Abi::Planned || entry.kind == Abi::Program;
    if (!entry.planLine && (out.version >= 7 || planOnly))
      return failAt(entry.line, MOE_STATUS_INVALID_BUNDLE,
                    "entry '%s' has no launch plan (%s entries carry "
                    "size, arg and launch records)",
                    entry.name.c_str(),
                    planOnly ? abiName(entry.kind) : "version 7");
    if ((out.version >= 7 || planOnly) && entry.plan.steps.empty())
      return failAt(entry.planLine, MOE_STATUS_INVALID_BUNDLE,
                    "entry '%s''s plan has no launch record",
                    entry.name.c_str());
    if (entry.planLine && !checkPlanNames(entry.plan, kernelsOf, why))
      return failAt(entry.planLine, MOE_STATUS_INVALID_BUNDLE,
                    "entry '%s''s plan: %s", entry.name.c_str(), why.c_str());
    if (entry.kernels.empty() && !launchesParts(entry.kind))
      return failAt(entry.line, MOE_STATUS_INVALID_BUNDLE,
                    "entry '%s' has no kernels", entry.name.c_str());
    if (entry.kind == Abi::Permute && entry.kernels.size() == 1)
      return failAt(entry.line, MOE_STATUS_INVALID_BUNDLE,
                    "entry '%s' (abi %s) has one kernel, '%s': it takes "
                    "exactly three, the count, index and gather kernels",
                    entry.name.c_str(), abiName(entry.kind),
                    entry.kernels[0].symbol.c_str());
    if (entry.kind == Abi::Permute && entry.kernels.size() == 2)
      return failAt(entry.line, MOE_STATUS_INVALID_BUNDLE,
                    "entry '%s' (abi %s) has two kernels, '%s' and '%s': it "
                    "takes exactly three, the count, index and gather kernels",
                    entry.name.c_str(), abiName(entry.kind),
                    entry.kernels[0].symbol.c_str(),
                    entry.kernels[1].symbol.c_str());
    if (entry.kind == Abi::Permute && entry.scatterFrom &&
        entry.kernels.size() == 3)
      return failAt(entry.line, MOE_STATUS_INVALID_BUNDLE,
                    "entry '%s' (abi %s) has scatter_from=%lld and three "
                    "kernels: it takes a fourth, the scatter kernel",
                    entry.name.c_str(), abiName(entry.kind),
                    (long long)entry.scatterFrom);
    for (Kernel &kernel : entry.kernels) {
      for (size_t i = 0; i < out.images.size(); ++i)
        if (out.images[i].name == kernel.imageName)
          kernel.image = int(i);
      if (kernel.image < 0)
        return failAt(kernel.line, MOE_STATUS_INVALID_BUNDLE,
                      "kernel '%s' refers to unknown image '%s'",
                      kernel.symbol.c_str(), kernel.imageName.c_str());
    }
    if (!isGroupedMatmul(entry.kind))
      continue;
    // The rows ranges must partition [1, 2^31 - 1].
    std::vector<const Kernel *> sorted;
    for (const Kernel &kernel : entry.kernels)
      sorted.push_back(&kernel);
    std::sort(sorted.begin(), sorted.end(),
              [](const Kernel *a, const Kernel *b) {
                return a->rowsMin < b->rowsMin;
              });
    int64_t next = 1;
    const Kernel *previous = nullptr;
    for (const Kernel *kernel : sorted) {
      if (kernel->rowsMin < next)
        return failAt(kernel->line, MOE_STATUS_INVALID_BUNDLE,
                      "entry '%s': rows [%lld, %lld] of kernel '%s' overlap "
                      "rows [%lld, %lld] of kernel '%s'",
                      entry.name.c_str(), (long long)kernel->rowsMin,
                      (long long)kernel->rowsMax, kernel->symbol.c_str(),
                      (long long)previous->rowsMin,
                      (long long)previous->rowsMax, previous->symbol.c_str());
      if (kernel->rowsMin > next)
        return failAt(entry.line, MOE_STATUS_INVALID_BUNDLE,
                      "entry '%s': no kernel covers rows [%lld, %lld]",
                      entry.name.c_str(), (long long)next,
                      (long long)kernel->rowsMin - 1);
      next = kernel->rowsMax + 1;
      previous = kernel;
    }
    if (next <= kMaxRows)
      return failAt(entry.line, MOE_STATUS_INVALID_BUNDLE,
                    "entry '%s': no kernel covers rows [%lld, %lld]",
                    entry.name.c_str(), (long long)next, (long long)kMaxRows);
  }
  return MOE_STATUS_SUCCESS;
}

moeStatus Reader::run() {
  if (size == 0)
    return failAt(1, MOE_STATUS_INVALID_BUNDLE, "the bundle is empty");
  if (moeStatus status = parseHeader())
    return status;
  std::vector<std::string_view> tokens;
  while (true) {
    if (moeStatus status = readLine(tokens))
      return status;
    std::string_view record = tokens[0];
    moeStatus status = MOE_STATUS_SUCCESS;
    if (record == "chip") {
      status = parseChip(tokens);
    } else if (record == "image") {
      status = parseImage(tokens);
    } else if (record == "entry") {
      status = parseEntry(tokens);
    } else if (record == "kernel") {
      status = parseKernel(tokens);
    } else if (isPlanRecord(record)) {
      status = parsePlanRecord(tokens);
    } else if (record == "end") {
      if (tokens.size() != 1)
        return fail(MOE_STATUS_INVALID_BUNDLE, "unexpected text after 'end'");
      return finish();
    } else {
      return fail(MOE_STATUS_INVALID_BUNDLE,
                  "unknown record %s (expected chip, image, entry, kernel, "
                  "size, arg, check, work, launch or end)",
                  quote(record).c_str());
    }
    if (status != MOE_STATUS_SUCCESS)
      return status;
  }
}

} // namespace

moeStatus parseBundle(const uint8_t *data, size_t size, BundleData &out,
                      std::string &error) {
  return Reader(data, size, out, error).run();
}

} // namespace moe::runtime
