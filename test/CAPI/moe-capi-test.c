//===- moe-capi-test.c - the moe C API used from C ------------------------===//
//
// RUN: env CUDA_ROOT=%cuda_toolkit moe-capi-test 2>&1 | FileCheck %s
//
// Embeds moe as an ML compiler would, through mlir-c only; bad input must
// give a diagnostic and a failure, never a crash.

#include "MoE-c/Dialects.h"
#include "MoE-c/Pipelines.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/RegisterEverything.h"

#include <stdio.h>

static const char *expertsF32 =
    "func.func @experts(%rows: tensor<?x8xf32>, %weights: tensor<4x16x8xf32>,"
    "                   %offsets: tensor<5xi64>) -> tensor<?x16xf32> {\n"
    "  %out = moe.grouped_matmul %rows, %weights, %offsets\n"
    "      : (tensor<?x8xf32>, tensor<4x16x8xf32>, tensor<5xi64>)"
    " -> tensor<?x16xf32>\n"
    "  return %out : tensor<?x16xf32>\n"
    "}\n";

static const char *expertsBF16 =
    "func.func @experts(%rows: tensor<?x64xbf16>,"
    "                   %weights: tensor<4x128x64xbf16>,"
    "                   %offsets: tensor<5xi64>) -> tensor<?x128xbf16> {\n"
    "  %out = moe.grouped_matmul %rows, %weights, %offsets\n"
    "      : (tensor<?x64xbf16>, tensor<4x128x64xbf16>, tensor<5xi64>)"
    " -> tensor<?x128xbf16>\n"
    "  return %out : tensor<?x128xbf16>\n"
    "}\n";

// Top-5 of 4 experts: parses, but the moe verifier rejects it.
static const char *tooManyExperts =
    "func.func @router(%logits: tensor<?x4xf32>) {\n"
    "  %ids, %weights = moe.route softmax_topk %logits top 5\n"
    "      : (tensor<?x4xf32>) -> (tensor<?x5xi32>, tensor<?x5xf32>)\n"
    "  return\n"
    "}\n";

static int failures = 0;

static void expect(int condition, const char *what) {
  if (!condition) {
    printf("FAILED: %s\n", what);
    ++failures;
  }
}

static void printString(MlirStringRef text, void *userData) {
  (void)userData;
  fwrite(text.data, 1, text.length, stdout);
}

static MlirLogicalResult printDiagnostic(MlirDiagnostic diagnostic,
                                         void *userData) {
  (void)userData;
  printf("diagnostic: ");
  mlirDiagnosticPrint(diagnostic, printString, NULL);
  printf("\n");
  return mlirLogicalResultSuccess();
}

static MlirModule parse(MlirContext context, const char *source) {
  return mlirModuleCreateParse(context, mlirStringRefCreateFromCString(source));
}

/// Prints the names of the operations in the module's body.
static void printBody(MlirModule module) {
  MlirBlock body = mlirModuleGetBody(module);
  for (MlirOperation op = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
    printf("  %.*s\n", (int)name.length, name.data);
  }
}

static void testDialectHandle(MlirContext context) {
  // CHECK-LABEL: dialect handle
  printf("dialect handle\n");
  MlirDialectHandle moe = mlirGetDialectHandle__moe__();
  MlirStringRef name = mlirDialectHandleGetNamespace(moe);
  // CHECK-NEXT: namespace: moe
  printf("namespace: %.*s\n", (int)name.length, name.data);
  mlirDialectHandleRegisterDialect(moe, context);
  MlirDialect dialect = mlirDialectHandleLoadDialect(moe, context);
  expect(!mlirDialectIsNull(dialect), "the handle loads the dialect");
  MlirDialect found = mlirContextGetOrLoadDialect(
      context, mlirStringRefCreateFromCString("moe"));
  // CHECK-NEXT: loaded: 1
  printf("loaded: %d\n", mlirDialectEqual(dialect, found));

  // The other route: the handle fills a registry a new context starts from.
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirDialectHandleInsertDialect(moe, registry);
  MlirContext other = mlirContextCreateWithRegistry(registry, false);
  MlirDialect fromRegistry =
      mlirContextGetOrLoadDialect(other, mlirStringRefCreateFromCString("moe"));
  // CHECK-NEXT: from a registry: 1
  printf("from a registry: %d\n", !mlirDialectIsNull(fromRegistry));
  mlirContextDestroy(other);
  mlirDialectRegistryDestroy(registry);
}

static void testCPUReferencePipeline(MlirContext context) {
  // CHECK-LABEL: cpu reference pipeline
  printf("cpu reference pipeline\n");
  MlirModule module = parse(context, expertsF32);
  expect(!mlirModuleIsNull(module), "the f32 module parses");
  MlirOperation moduleOp = mlirModuleGetOperation(module);
  // CHECK-NEXT: verified: 1
  printf("verified: %d\n", mlirOperationVerify(moduleOp));

  // The plain mlir-c route: the pipeline by name, after registration.
  mlirMoERegisterPasses();
  MlirPassManager pm = mlirPassManagerCreate(context);
  MlirLogicalResult parsed =
      mlirParsePassPipeline(mlirPassManagerGetAsOpPassManager(pm),
                            mlirStringRefCreateFromCString(
                                "builtin.module(moe-cpu-reference-pipeline)"),
                            printString, NULL);
  expect(mlirLogicalResultIsSuccess(parsed), "the pipeline is registered");
  MlirLogicalResult ran = mlirPassManagerRunOnOp(pm, moduleOp);
  // CHECK-NEXT: success: 1
  printf("success: %d\n", mlirLogicalResultIsSuccess(ran));
  // CHECK: llvm.func
  // CHECK-NOT: moe.
  printBody(module);
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);
}

static void testGPUPipeline(MlirContext context) {
  // CHECK-LABEL: gpu pipeline
  printf("gpu pipeline\n");
  MlirModule module = parse(context, expertsBF16);
  expect(!mlirModuleIsNull(module), "the bf16 module parses");
  MlirLogicalResult ran = mlirMoERunPipeline(
      module, mlirStringRefCreateFromCString("moe-gpu-pipeline"),
      mlirStringRefCreateFromCString("chip=sm_90a"));
  // CHECK-NEXT: success: 1
  printf("success: %d\n", mlirLogicalResultIsSuccess(ran));
  // CHECK-NEXT: gpu.binary
  printBody(module);
  MlirAttribute manifest = mlirOperationGetDiscardableAttributeByName(
      mlirModuleGetOperation(module),
      mlirStringRefCreateFromCString("moe.manifest"));
  // CHECK-NEXT: manifest: 1
  printf("manifest: %d\n", !mlirAttributeIsNull(manifest));
  mlirModuleDestroy(module);
}

static void testErrors(MlirContext context) {
  // CHECK-LABEL: errors
  printf("errors\n");
  // CHECK-NEXT: diagnostic: 'moe.route' op 'top' must be in [1, 4] (the expert
  // count of 'logits'), got 5
  MlirModule invalid = parse(context, tooManyExperts);
  // CHECK-NEXT: invalid module rejected: 1
  printf("invalid module rejected: %d\n", mlirModuleIsNull(invalid));

  MlirModule module = parse(context, expertsF32);
  // CHECK-NEXT: diagnostic: cannot build pass pipeline 'moe-no-such-pipeline':
  // {{.*}}'moe-no-such-pipeline' does not refer to a registered pass or pass
  // pipeline
  MlirLogicalResult unknown = mlirMoERunPipeline(
      module, mlirStringRefCreateFromCString("moe-no-such-pipeline"),
      mlirStringRefCreateFromCString(""));
  // CHECK-NEXT: unknown pipeline fails: 1
  printf("unknown pipeline fails: %d\n", mlirLogicalResultIsFailure(unknown));

  // CHECK-NEXT: no such option bogus
  // CHECK-NEXT: diagnostic: cannot build pass pipeline
  // 'moe-gpu-pipeline{bogus=1}': failed to add `moe-gpu-pipeline` with options
  // `bogus=1`
  MlirLogicalResult badOption = mlirMoERunPipeline(
      module, mlirStringRefCreateFromCString("moe-gpu-pipeline"),
      mlirStringRefCreateFromCString("bogus=1"));
  // CHECK-NEXT: bad option fails: 1
  printf("bad option fails: %d\n", mlirLogicalResultIsFailure(badOption));

  // f32 experts have no GPU kernels: the pass fails and says why.
  // CHECK-NEXT: diagnostic: 'moe.grouped_matmul' op cannot be lowered to sm_90a
  // yet
  MlirLogicalResult noKernels = mlirMoERunPipeline(
      module, mlirStringRefCreateFromCString("moe-gpu-pipeline"),
      mlirStringRefCreateFromCString(""));
  // CHECK-NEXT: failing pass fails: 1
  printf("failing pass fails: %d\n", mlirLogicalResultIsFailure(noKernels));
  mlirModuleDestroy(module);
}

int main(void) {
  // Unbuffered, so that MLIR's own messages on stderr keep their place.
  setvbuf(stdout, NULL, _IONBF, 0);

  MlirContext context = mlirContextCreate();
  mlirContextAttachDiagnosticHandler(context, printDiagnostic, NULL, NULL);
  // The pipelines emit upstream dialects and translate kernels to LLVM IR.
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirRegisterAllDialects(registry);
  mlirContextAppendDialectRegistry(context, registry);
  mlirDialectRegistryDestroy(registry);
  mlirRegisterAllLLVMTranslations(context);

  testDialectHandle(context);
  testCPUReferencePipeline(context);
  testGPUPipeline(context);
  testErrors(context);

  mlirContextDestroy(context);
  // CHECK: done: 0 failures
  printf("done: %d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
