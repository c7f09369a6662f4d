//===- attn-opt.cpp - attn optimizer driver -------------------------------===//
//
// mlir-opt for attn: parses attn IR, verifies it, runs attn passes and
// pipelines, and prints the result.
//
// Two guards: the input's bracket nesting is bounded before MLIR parses it
// (compiler/Frontend/SourceLimits.h: the parser recurses per level and
// overflows the stack on deep nesting), and before the passes the command
// line asks for, MLIR 19 parses an i1 array written with integers
// (`array<i1: 1>`) into an attribute with no data, and printing it then
// reads past its end and crashes (an upstream bug). Such IR is rejected
// with a located error instead. Since the parser verifies what it read
// before any pass runs, and a verifier error shows its op, attn-opt shows
// no op in diagnostics unless asked (--mlir-print-op-on-diagnostic): the
// guard then reports such IR before anything prints it.
//
//===----------------------------------------------------------------------===//
#include "compiler/Frontend/SourceLimits.h"
#include "tools/RegisterAttn.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

namespace {

/// Fails on any i1 dense array whose data does not hold its elements (see
/// the file comment), naming the op's location and the attribute.
struct RejectMalformedBoolArrays
    : mlir::PassWrapper<RejectMalformedBoolArrays,
                        mlir::OperationPass<mlir::ModuleOp>> {
  llvm::StringRef getArgument() const override {
    return "attn-reject-malformed-bool-arrays";
  }
  void runOnOperation() override {
    if (mlir::failed(mlir::attn::rejectMalformedBoolArrays(getOperation())))
      signalPassFailure();
  }
};

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::DialectRegistry registry;
  mlir::attn::registerAttnDialects(registry);
  mlir::attn::registerAttnPassesAndPipelines();
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "attn optimizer driver\n", registry);
  auto &options = llvm::cl::getRegisteredOptions();
  if (auto *printOp = static_cast<llvm::cl::opt<bool> *>(
          options.lookup("mlir-print-op-on-diagnostic"));
      printOp && printOp->getNumOccurrences() == 0)
    *printOp = false;
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects()) {
    llvm::outs() << "Available Dialects: ";
    llvm::interleave(registry.getDialectNames(), llvm::outs(), ",");
    llvm::outs() << "\n";
    return EXIT_SUCCESS;
  }
  // The guard, then the pipeline the command line gave.
  mlir::MlirOptMainConfig commandLine = config;
  config.setPassPipelineSetupFn([commandLine](mlir::PassManager &pm) {
    pm.addPass(std::make_unique<RejectMalformedBoolArrays>());
    return commandLine.setupPassPipeline(pm);
  });

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return EXIT_FAILURE;
  }
  if (llvm::Error problem = mlir::attn::checkIRText(
          input->getBuffer(), input->getBufferIdentifier())) {
    llvm::errs() << "error: " << llvm::toString(std::move(problem)) << "\n";
    return EXIT_FAILURE;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return EXIT_FAILURE;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return EXIT_FAILURE;
  output->keep();
  return EXIT_SUCCESS;
}
