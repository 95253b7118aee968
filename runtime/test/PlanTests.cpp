//===- PlanTests.cpp - the launch plan interpreter ------------------------===//

#include "Plan.h"
#include "TestHarness.h"

#include <cstring>

using namespace moe::runtime;

namespace {

PlanExpr expr(const char *text) {
  PlanExpr e;
  std::string error;
  if (!PlanExpr::parse(text, e, error))
    moe_test::fail(__FILE__, __LINE__, error);
  return e;
}

std::vector<PlanExpr> exprs(std::initializer_list<const char *> texts) {
  std::vector<PlanExpr> out;
  for (const char *text : texts)
    out.push_back(expr(text));
  return out;
}

/// A size record's parsed form.
PlanSize sizeOf(const char *name, const char *min, const char *max) {
  PlanSize size;
  size.name = name;
  size.min = expr(min);
  size.max = expr(max);
  size.minText = size.min.str();
  size.maxText = size.max.str();
  return size;
}

/// An arg record's parsed form.
PlanArg argOf(const char *name, PlanType type, PlanArg::Role role,
              int64_t align, std::initializer_list<const char *> dims) {
  PlanArg arg;
  arg.name = name;
  arg.type = type;
  arg.role = role;
  arg.align = align;
  arg.dims = exprs(dims);
  return arg;
}

/// The route.v1 plan the compiler writes for 256 experts, top 8, f32 logits
/// with a correction bias (docs/launch-plans.md's example).
Plan routePlan() {
  Plan plan;
  plan.sizes.push_back(sizeOf("T", "1", "2147483647"));
  plan.args.push_back(
      argOf("logits", PlanType::F32, PlanArg::Role::In, 4, {"T", "256"}));
  plan.args.push_back(
      argOf("bias", PlanType::F32, PlanArg::Role::In, 4, {"256"}));
  plan.args.push_back(
      argOf("ids", PlanType::I32, PlanArg::Role::Out, 4, {"T", "8"}));
  plan.args.push_back(
      argOf("weights", PlanType::F32, PlanArg::Role::Out, 4, {"T", "8"}));
  PlanStep step;
  step.grid = expr("min(ceildiv(T,4),65535)");
  step.when = expr("1");
  std::string error;
  if (!parsePlanParams("mem:logits[T,256];mem:bias[256];mem:ids[T,8];mem:"
                       "weights[T,8]",
                       plan, step.params, error))
    moe_test::fail(__FILE__, __LINE__, error);
  plan.steps.push_back(std::move(step));
  return plan;
}

/// `count` words from kernel parameter `first` on (a memref's words are
/// consecutive parameters).
std::vector<uint64_t> words(const PreparedLaunch &launch, size_t first,
                            size_t count) {
  std::vector<uint64_t> out(count);
  for (size_t i = 0; i < count; ++i)
    std::memcpy(&out[i], launch.bytes.data() + launch.offsets[first + i], 8);
  return out;
}

int64_t noResident(const PlanStep &) { return -1; }

/// Every step's entry has `n` kernels.
std::function<int(const PlanStep &)> kernels(int n) {
  return [n](const PlanStep &) { return n; };
}

/// preparePlan's error for `call` (empty when it succeeds).
std::string prepareError(const Plan &plan, const PlanCall &call) {
  std::vector<PreparedLaunch> launches;
  std::string error;
  return preparePlan(plan, call, noResident, launches, error) ? "" : error;
}

} // namespace

// The route plan packs four memref descriptors (pointer, pointer, 0, sizes,
// row-major strides) on a grid of one warp per token capped at 65535 CTAs.
TEST(planRouteLaunch) {
  Plan plan = routePlan();
  std::string error;
  CHECK(checkPlanNames(plan, kernels(1), error));
  int64_t sizes[] = {1000};
  const uint64_t tb = uint64_t(1) << 40;
  uint64_t pointers[] = {tb, 2 * tb, 3 * tb, 4 * tb};
  PlanCall call{sizes, pointers, 0, 0};
  std::vector<PreparedLaunch> launches;
  CHECK_EQ(prepareError(plan, call), std::string());
  CHECK(preparePlan(plan, call, noResident, launches, error));
  CHECK_EQ(launches.size(), size_t(1));
  CHECK_EQ(launches[0].gridX, int64_t(250));
  CHECK(words(launches[0], 0, 7) ==
        std::vector<uint64_t>({tb, tb, 0, 1000, 256, 256, 1}));
  CHECK(words(launches[0], 7, 5) ==
        std::vector<uint64_t>({2 * tb, 2 * tb, 0, 256, 1}));
  CHECK(words(launches[0], 19, 7) ==
        std::vector<uint64_t>({4 * tb, 4 * tb, 0, 1000, 8, 8, 1}));
  CHECK_EQ(launches[0].offsets.size(), size_t(26));
  sizes[0] = 1000000;
  CHECK(preparePlan(plan, call, noResident, launches, error));
  CHECK_EQ(launches[0].gridX, int64_t(65535));
}

TEST(planArgumentErrors) {
  Plan plan = routePlan();
  int64_t sizes[] = {100};
  uint64_t pointers[] = {0x10000, 0x20000, 0x30000, 0x40000};
  PlanCall call{sizes, pointers, 0, 0};
  CHECK_EQ(prepareError(plan, call), std::string());
  sizes[0] = 0;
  CHECK_CONTAINS(prepareError(plan, call), "T = 0 is outside [1, 2147483647]");
  sizes[0] = 100;
  pointers[2] = 0;
  CHECK_CONTAINS(prepareError(plan, call), "ids pointer is NULL");
  pointers[2] = 0x30002;
  CHECK_CONTAINS(prepareError(plan, call),
                 "ids pointer 0x30002 is not 4-byte aligned");
  // ids [100, 8] i32 is 3200 bytes: weights 3199 bytes on overlaps it.
  pointers[2] = 0x30000;
  pointers[3] = 0x30000 + 3196;
  CHECK_CONTAINS(prepareError(plan, call), "ids overlaps weights");
  pointers[3] = 0x30000 + 3200;
  CHECK_EQ(prepareError(plan, call), std::string());
  // An output over an input is refused too.
  pointers[3] = 0x10000 + 16;
  CHECK_CONTAINS(prepareError(plan, call), "weights overlaps logits");
  // Inputs may alias each other.
  pointers[3] = 0x40000;
  pointers[1] = 0x10000;
  CHECK_EQ(prepareError(plan, call), std::string());
  // Bytes that overflow int64 are refused before any pointer is read.
  plan.args[0].dims = exprs({"T", "4611686018427387904"});
  CHECK_CONTAINS(prepareError(plan, call), "the bytes of logits overflow");
}

TEST(planChecksAndOptional) {
  Plan plan;
  plan.sizes.push_back(sizeOf("M", "1", "2147483647"));
  plan.sizes.push_back(sizeOf("K", "8", "2147483647"));
  plan.checks.push_back({expr("K==floordiv(K,8)*8"),
                         "K must be a multiple of 8 (TMA row pitch)"});
  plan.args.push_back(
      argOf("rows", PlanType::BF16, PlanArg::Role::In, 16, {"M", "K"}));
  plan.args.push_back(
      argOf("bias", PlanType::F32, PlanArg::Role::Optional, 4, {"K"}));
  plan.args.push_back(
      argOf("out", PlanType::BF16, PlanArg::Role::Out, 16, {"M", "K"}));
  PlanStep step;
  step.grid = expr("M");
  step.when = expr("null(bias)==0");
  std::string error;
  CHECK(parsePlanParams("mem:rows[M,K];mem:bias[K];i32:K;i64:M*K;mem:out[M,K]",
                        plan, step.params, error));
  plan.steps.push_back(std::move(step));
  CHECK(checkPlanNames(plan, kernels(1), error));
  int64_t sizes[] = {3, 12};
  uint64_t pointers[] = {0x1000, 0, 0x8000};
  PlanCall call{sizes, pointers, 0, 0};
  CHECK_CONTAINS(prepareError(plan, call),
                 "K must be a multiple of 8 (TMA row pitch)");
  sizes[1] = 7;
  CHECK_CONTAINS(prepareError(plan, call), "K = 7 is outside [8, 2147483647]");
  sizes[1] = 16;
  std::vector<PreparedLaunch> launches;
  // A null optional argument: the step says when it runs.
  CHECK(preparePlan(plan, call, noResident, launches, error));
  CHECK_EQ(launches.size(), size_t(0));
  pointers[1] = 0x4000;
  CHECK(preparePlan(plan, call, noResident, launches, error));
  CHECK_EQ(launches.size(), size_t(1));
  CHECK_EQ(launches[0].gridX, int64_t(3));
  int32_t k = 0;
  int64_t mk = 0;
  std::memcpy(&k, launches[0].bytes.data() + launches[0].offsets[12], 4);
  std::memcpy(&mk, launches[0].bytes.data() + launches[0].offsets[13], 8);
  CHECK_EQ(k, 16);
  CHECK_EQ(mk, int64_t(48));
}

// Workspace slices are laid out in order, aligned; the call's workspace is
// checked and its slices are what the parameters point at.
TEST(planWorkspace) {
  Plan plan;
  plan.sizes.push_back(sizeOf("T", "1", "65536"));
  plan.args.push_back(
      argOf("ids", PlanType::I32, PlanArg::Role::In, 4, {"T", "2"}));
  plan.args.push_back(
      argOf("out", PlanType::I64, PlanArg::Role::Out, 8, {"T"}));
  plan.work.push_back({"counts", expr("ceildiv(T*2,4096)*8*4"), 16});
  plan.work.push_back({"sources", expr("T*2*4"), 256});
  PlanStep count, index;
  count.grid = expr("ceildiv(T*2,4096)");
  count.when = expr("ceildiv(T*2,4096)>1");
  index.kernel = 1;
  index.grid = expr("ceildiv(T*2,4096)");
  index.when = expr("1");
  std::string error;
  CHECK(parsePlanParams("mem:ids[T,2];mem:@counts[ceildiv(T*2,4096)*8]", plan,
                        count.params, error));
  CHECK(parsePlanParams(
      "mem:ids[T,2];mem:@counts[ceildiv(T*2,4096)*8];mem:@sources[T*2];mem:"
      "out[T]",
      plan, index.params, error));
  plan.steps.push_back(std::move(count));
  plan.steps.push_back(std::move(index));
  CHECK(checkPlanNames(plan, kernels(2), error));
  int64_t sizes[] = {3000};
  uint64_t bytes = 0;
  CHECK(planWorkspaceBytes(plan, sizes, bytes, error));
  // counts: 2 chunks x 8 x 4 = 64 bytes, sources at 256: 24000 bytes.
  CHECK_EQ(bytes, uint64_t(256 + 24000));
  uint64_t pointers[] = {0x10000, 0x20000};
  PlanCall call{sizes, pointers, 0, 0};
  CHECK_CONTAINS(prepareError(plan, call), "workspace pointer is NULL");
  call.workspace = 0x100000;
  call.workspaceBytes = bytes - 1;
  CHECK_CONTAINS(prepareError(plan, call),
                 "workspace of 24255 bytes is smaller than the 24256");
  call.workspaceBytes = bytes;
  call.workspace = 0x100008;
  // Aligned to the largest slice alignment, that of sources.
  CHECK_CONTAINS(prepareError(plan, call),
                 "workspace pointer 0x100008 is not 256-byte aligned");
  call.workspace = 0x100010;
  CHECK_CONTAINS(prepareError(plan, call), "is not 256-byte aligned");
  call.workspace = 0x20000 - 4096; // overlaps out [0x20000, +24000)
  CHECK_CONTAINS(prepareError(plan, call), "out overlaps the workspace");
  call.workspace = 0x100000;
  std::vector<PreparedLaunch> launches;
  CHECK(preparePlan(plan, call, noResident, launches, error));
  CHECK_EQ(launches.size(), size_t(2));
  std::vector<uint64_t> sources = words(launches[1], 12, 1),
                        counts = words(launches[1], 7, 1);
  CHECK_EQ(sources[0], uint64_t(0x100000 + 256));
  CHECK_EQ(counts[0], uint64_t(0x100000));
  // One chunk: the count kernel is skipped.
  sizes[0] = 2000;
  CHECK(planWorkspaceBytes(plan, sizes, bytes, error));
  call.workspaceBytes = bytes;
  CHECK(preparePlan(plan, call, noResident, launches, error));
  CHECK_EQ(launches.size(), size_t(1));
  CHECK_EQ(launches[0].kernel, 1);
}

// A grouped GEMM step: tensor maps of rows and weights, a persistent grid
// over the device's resident CTAs.
TEST(planTensorMaps) {
  Plan plan;
  plan.sizes.push_back(sizeOf("M", "1", "2147483647"));
  plan.args.push_back(
      argOf("rows", PlanType::BF16, PlanArg::Role::In, 16, {"M", "4096"}));
  plan.args.push_back(argOf("weights", PlanType::BF16, PlanArg::Role::In, 16,
                            {"8", "28672", "4096"}));
  PlanStep step;
  step.grid = expr("min(min(ceildiv(M,128)+min(8,floordiv(M,65)),8*16777216)*"
                   "112,resident)");
  step.when = expr("M>=65");
  std::string error;
  CHECK(parsePlanParams("tmap:rows:bf16:[4096,M]:[8192]:[64,128];tmap:"
                        "weights:bf16:[4096,28672,8]:[8192,234881024]:[64,"
                        "128,1];i32:65",
                        plan, step.params, error));
  plan.steps.push_back(std::move(step));
  CHECK(checkPlanNames(plan, kernels(1), error));
  int64_t sizes[] = {64};
  uint64_t pointers[] = {0x10000, 0x100000};
  PlanCall call{sizes, pointers, 0, 0};
  auto resident = [](const PlanStep &step) {
    return step.kernel == 0 ? int64_t(132) : int64_t(-1);
  };
  std::vector<PreparedLaunch> launches;
  CHECK(preparePlan(plan, call, resident, launches, error));
  CHECK_EQ(launches.size(), size_t(0)); // no expert can have 65 rows
  sizes[0] = 4096;
  CHECK(preparePlan(plan, call, resident, launches, error));
  CHECK_EQ(launches.size(), size_t(1));
  CHECK_EQ(launches[0].gridX, int64_t(132));
  CHECK_EQ(launches[0].tensorMaps.size(), size_t(2));
  const TensorMapRequest &rows = launches[0].tensorMaps[0];
  CHECK_EQ(rows.address, uint64_t(0x10000));
  CHECK(rows.dims == std::vector<uint64_t>({4096, 4096}));
  CHECK(rows.strides == std::vector<uint64_t>({8192}));
  CHECK(rows.box == std::vector<uint32_t>({64, 128}));
  CHECK_EQ(rows.offset % 64, size_t(0));
  const TensorMapRequest &weights = launches[0].tensorMaps[1];
  CHECK(weights.strides == std::vector<uint64_t>({8192, 234881024}));
  CHECK(weights.box == std::vector<uint32_t>({64, 128, 1}));
}

TEST(planParseErrors) {
  Plan plan = routePlan();
  std::vector<PlanParam> params;
  std::string error;
  CHECK(!parsePlanParams("mem:nothing[T]", plan, params, error));
  CHECK_CONTAINS(error, "no argument 'nothing'");
  CHECK(!parsePlanParams("mem:@ws[T]", plan, params, error));
  CHECK_CONTAINS(error, "no workspace slice 'ws'");
  CHECK(!parsePlanParams("mem:logits", plan, params, error));
  CHECK_CONTAINS(error, "expected mem:<buffer>[<dims>]");
  CHECK(!parsePlanParams("f16:1", plan, params, error));
  CHECK_CONTAINS(error, "unknown parameter kind 'f16'");
  CHECK(!parsePlanParams("i32", plan, params, error));
  CHECK_CONTAINS(error, "unknown parameter kind 'i32'");
  CHECK(!parsePlanParams("i32:T+", plan, params, error));
  CHECK_CONTAINS(error, "expected a term");
  CHECK(!parsePlanParams("tmap:logits:f16:[T]:[]:[8]", plan, params, error));
  CHECK_CONTAINS(error, "unknown type 'f16'");
  CHECK(
      !parsePlanParams("tmap:logits:bf16:[T,8]:[]:[8,8]", plan, params, error));
  CHECK_CONTAINS(error, "a stride per dim but the first");
  CHECK(!parsePlanParams("tmap:logits:i64:[T]:[]:[8]", plan, params, error));
  CHECK_CONTAINS(error, "a tensor map of i64 elements");
  CHECK(parsePlanParams("", plan, params, error));
  CHECK(params.empty());
  // Names: a size's range reads only earlier sizes; `resident` only in
  // launches; null() only of optional arguments.
  plan.sizes.push_back(sizeOf("U", "1", "T"));
  CHECK(checkPlanNames(plan, kernels(1), error));
  plan.sizes[0].max = expr("U");
  CHECK(!checkPlanNames(plan, kernels(1), error));
  CHECK_CONTAINS(error, "size T: unknown name 'U'");
  plan = routePlan();
  plan.args[0].dims = exprs({"resident", "256"});
  CHECK(!checkPlanNames(plan, kernels(1), error));
  CHECK_CONTAINS(error, "argument logits: unknown name 'resident'");
  plan = routePlan();
  plan.steps[0].when = expr("null(ids)");
  CHECK(!checkPlanNames(plan, kernels(1), error));
  CHECK_CONTAINS(error, "null(ids) names no optional argument");
  plan = routePlan();
  CHECK(!checkPlanNames(plan, kernels(0), error));
  CHECK_CONTAINS(error, "kernel 0 is not one of the 0 of the entry");
}

TEST(planGridAndScalarLimits) {
  Plan plan = routePlan();
  plan.steps[0].grid = expr("T*1000000000");
  int64_t sizes[] = {1000};
  const uint64_t tb = uint64_t(1) << 40;
  uint64_t pointers[] = {tb, 2 * tb, 3 * tb, 4 * tb};
  PlanCall call{sizes, pointers, 0, 0};
  CHECK_CONTAINS(prepareError(plan, call), "is outside [1, 2^31 - 1]");
  plan.steps[0].grid = expr("T-T");
  std::vector<PreparedLaunch> launches;
  std::string error;
  CHECK(preparePlan(plan, call, noResident, launches, error));
  CHECK_EQ(launches.size(), size_t(0)); // nothing to compute
  plan = routePlan();
  CHECK(parsePlanParams("i32:T*10000000", plan, plan.steps[0].params, error));
  CHECK_CONTAINS(prepareError(plan, call), "does not fit i32");
  CHECK(parsePlanParams("mem:logits[T,-1]", plan, plan.steps[0].params, error));
  CHECK_CONTAINS(prepareError(plan, call), "a memref size is negative");
  CHECK(parsePlanParams("tmap:logits:bf16:[T]:[]:[512]", plan,
                        plan.steps[0].params, error));
  CHECK_CONTAINS(prepareError(plan, call),
                 "tensor map box 512 is out of range");
}

namespace {

/// Adds `line` (a bundle record without its entry name) to `plan`.
bool addLine(const char *line, Plan &plan, std::string &error) {
  std::vector<std::string_view> fields;
  std::string_view text(line);
  while (!text.empty()) {
    size_t space = text.find(' ');
    fields.push_back(text.substr(0, space));
    text = space == std::string_view::npos ? "" : text.substr(space + 1);
  }
  std::string_view kind = fields.front();
  fields.erase(fields.begin());
  return addPlanRecord(kind, fields, plan, error);
}

} // namespace

// The records of docs/launch-plans.md's route example give the plan
// routePlan() builds by hand.
TEST(planRecords) {
  Plan plan;
  std::string error;
  for (const char *line :
       {"size T min=1 max=2147483647", "arg logits f32 in align=4 dims=T,256",
        "arg bias f32 opt align=4 dims=256", "arg ids i32 out align=4 dims=T,8",
        "arg weights f32 out align=4 dims=T,8",
        "check T<=1000000 at most a million tokens",
        "work scratch bytes=T*4 align=256",
        "launch 0 grid=min(ceildiv(T,4),65535) when=1 "
        "params=mem:logits[T,256];mem:bias[256];mem:ids[T,8];mem:weights[T,"
        "8]"})
    if (!addLine(line, plan, error))
      moe_test::fail(__FILE__, __LINE__, std::string(line) + ": " + error);
  CHECK(checkPlanNames(plan, kernels(1), error));
  CHECK_EQ(plan.sizes.size(), size_t(1));
  CHECK_EQ(plan.args.size(), size_t(4));
  CHECK(plan.args[1].role == PlanArg::Role::Optional);
  CHECK_EQ(plan.checks[0].message, std::string("at most a million tokens"));
  CHECK_EQ(plan.work[0].align, int64_t(256));
  CHECK_EQ(plan.steps[0].params.size(), size_t(4));
  int64_t sizes[] = {2000000};
  const uint64_t tb = uint64_t(1) << 40;
  uint64_t pointers[] = {tb, 0, 3 * tb, 4 * tb};
  PlanCall call{sizes, pointers, 5 * tb, 8000000};
  CHECK_CONTAINS(prepareError(plan, call), "at most a million tokens");
  sizes[0] = 1000;
  CHECK_EQ(prepareError(plan, call), std::string());
  // A rank-0 argument.
  CHECK(addLine("arg scale f32 in align=4 dims=", plan, error));
  CHECK(plan.args.back().dims.empty());
}

// A donated input (a backward's saved value that the call overwrites) is
// read like an input and written like an output: nothing may overlap it,
// where inputs may alias each other.
TEST(planDonated) {
  Plan plan;
  std::string error;
  for (const char *line :
       {"size M min=0 max=2147483647",
        "arg saved bf16 donated align=16 dims=M,64",
        "arg other bf16 in align=16 dims=M,64",
        "arg grad bf16 out align=16 dims=M,64",
        "launch 0 grid=M when=1 params=mem:saved[M,64];mem:other[M,64];mem:"
        "grad[M,64]"})
    if (!addLine(line, plan, error))
      moe_test::fail(__FILE__, __LINE__, std::string(line) + ": " + error);
  CHECK(checkPlanNames(plan, kernels(1), error));
  CHECK(plan.args[0].role == PlanArg::Role::Donated);
  int64_t sizes[] = {100}; // 12800 bytes each
  uint64_t pointers[] = {0x10000, 0x20000, 0x30000};
  PlanCall call{sizes, pointers, 0, 0};
  CHECK_EQ(prepareError(plan, call), std::string());
  pointers[1] = 0x10000 + 12800 - 16;
  CHECK_CONTAINS(prepareError(plan, call), "saved overlaps other");
  pointers[1] = 0x10000 + 12800;
  CHECK_EQ(prepareError(plan, call), std::string());
  // Nor does it overlap an output.
  pointers[2] = 0x10000 + 64;
  CHECK_CONTAINS(prepareError(plan, call), "saved overlaps grad");
}

TEST(planRecordErrors) {
  auto errorOf = [](std::initializer_list<const char *> lines) {
    Plan plan;
    std::string error;
    for (const char *line : lines)
      if (!addLine(line, plan, error))
        return error;
    return std::string("no error");
  };
  CHECK_CONTAINS(errorOf({"size T min=1"}),
                 "expected 'size <entry> <name> min=<expr> max=<expr>'");
  CHECK_CONTAINS(errorOf({"size T min=1 top=2"}), "expected max=<expression>");
  CHECK_CONTAINS(errorOf({"size T-1 min=1 max=2"}), "'T-1' is not a name");
  CHECK_CONTAINS(errorOf({"size T min=1 max=2", "size T min=1 max=2"}),
                 "size 'T' twice");
  CHECK_CONTAINS(errorOf({"size resident min=1 max=2"}),
                 "'resident' is the runtime's");
  CHECK_CONTAINS(errorOf({"arg x f16 in align=4 dims=1"}),
                 "unknown type 'f16'");
  CHECK_CONTAINS(errorOf({"arg x f32 inout align=4 dims=1"}),
                 "role 'inout' is not in, out, opt or donated");
  CHECK_CONTAINS(errorOf({"arg x f32 in align=3 dims=1"}),
                 "expected align=<a power of two up to 256>");
  CHECK_CONTAINS(errorOf({"arg x f32 in align=512 dims=1"}),
                 "expected align=<a power of two up to 256>");
  CHECK_CONTAINS(errorOf({"arg x f32 in align=4 shape=1"}),
                 "expected dims=<dims>");
  CHECK_CONTAINS(errorOf({"arg x f32 in align=4 dims=1,(2"}), "expected ')'");
  CHECK_CONTAINS(
      errorOf({"arg x f32 in align=4 dims=1", "arg x f32 in align=4 dims=1"}),
      "argument 'x' twice");
  CHECK_CONTAINS(errorOf({"check 1"}), "expected 'check <entry> <expr>");
  CHECK_CONTAINS(errorOf({"work w bytes=1 align=0"}), "expected align=");
  CHECK_CONTAINS(errorOf({"launch x grid=1 when=1 params="}),
                 "kernel 'x' is not an index");
  CHECK_CONTAINS(errorOf({"launch 0 grid=1 when=1 params=mem:y[1]"}),
                 "no argument 'y'");
  CHECK_CONTAINS(errorOf({"launch 0 grid=1 if=1 params="}),
                 "expected when=<expression>");
  CHECK_EQ(errorOf({"launch 0 grid=1 when=1 params="}), "no error");
  std::vector<std::string> many;
  for (int i = 0; i < 33; ++i)
    many.push_back("arg a" + std::to_string(i) + " f32 in align=4 dims=1");
  Plan plan;
  std::string error;
  bool ok = true;
  for (const std::string &line : many)
    ok = ok && addLine(line.c_str(), plan, error);
  CHECK(!ok);
  CHECK_CONTAINS(error, "more than 32 arguments");
}
