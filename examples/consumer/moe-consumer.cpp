//===- moe-consumer.cpp - compile a moe module with an installed moe-mlir -===//
//
// What an ML compiler embedding moe does: its own MLIRContext with the
// upstream dialects and moe, a module parsed from a file, the named
// --moe-gpu-pipeline built from text by the PassManager, the result printed.
//
//   moe-consumer layer.mlir [-o layer.gpu.mlir] [--pipeline-options="..."]
//
//===----------------------------------------------------------------------===//

#include "MoE/InitAll.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace cl = llvm::cl;

static cl::opt<std::string> inputFilename(cl::Positional, cl::Required,
                                          cl::desc("<input .mlir file>"));
static cl::opt<std::string> outputFilename("o", cl::desc("Output file"),
                                           cl::value_desc("filename"),
                                           cl::init("-"));
static cl::opt<std::string> pipelineOptions(
    "pipeline-options",
    cl::desc("Options of --moe-gpu-pipeline, e.g. \"format=isa\""),
    cl::init(""));

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  cl::ParseCommandLineOptions(
      argc, argv, "Compiles a moe module with --moe-gpu-pipeline\n");

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates the kernels to LLVM IR.
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::moe::registerMoEDialect(registry);
  mlir::moe::registerMoEPasses();
  mlir::MLIRContext context(registry);
  // An error's location says where; the failing op printed whole would
  // bury it.
  context.printOpOnDiagnostic(false);

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << "moe-consumer: " << error << "\n";
    return 1;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  // Parse errors, verifier errors and failing passes print with their
  // location in the input.
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  mlir::PassManager pm = mlir::PassManager::on<mlir::ModuleOp>(&context);
  std::string pipeline = "moe-gpu-pipeline{" + pipelineOptions + "}";
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm, llvm::errs()))) {
    llvm::errs() << "moe-consumer: cannot build '" << pipeline << "'\n";
    return 1;
  }
  if (mlir::failed(pm.run(*module)))
    return 1;

  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "moe-consumer: " << error << "\n";
    return 1;
  }
  module->print(output->os());
  output->keep();
  return 0;
}
