//===- IRFuzzer.cpp - attn IR through the compiler, libFuzzer -------------===//
//
// Arbitrary bytes as attn IR text, through everything a JIT host or attn-opt
// runs on a spec before NVRTC: the text bounds, parse (attn, func, arith)
// and verify, then
// for each target GPU (sm_80, sm_89, sm_90a) attn-pipeline on a copy of the
// module, then the CUDA translation unit, symbol and launch shape of every
// kernel launch in the result, as attn-translate --attn-to-cuda emits them.
// Rejected input is fine; a crash, a sanitizer report, a hang or a runaway
// allocation is a bug.
//
// The harness never prints IR: diagnostics go to a handler that drops them
// unformatted, because MLIR 19's own printer crashes on some valid
// attributes (docs/fuzzing.md lists them) and that is not attn's bug.
//
//===----------------------------------------------------------------------===//
#include "codegen/EmitCuda.h"
#include "compiler/Frontend/SourceLimits.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Transforms/KernelSpecs.h"
#include "dialect/IR/AttnOps.h"
#include "test/fuzz/IRMutator.h"
#include "tools/RegisterAttn.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <cstdint>
#include <string>

using namespace mlir;
using namespace mlir::attn;

/// Runs attn-pipeline for `arch` on `module` and emits every kernel of the
/// result.
static void lowerAndEmit(MLIRContext &context, ModuleOp module,
                         llvm::StringRef arch) {
  PassManager pm(&context);
  AttnPipelineOptions options;
  options.arch = arch.str();
  buildAttnPipeline(pm, options);
  if (failed(pm.run(module)))
    return;
  // Launches written in the input are translated too, as attn-translate
  // would: their #attn.kernel_spec never went through the lowering.
  module.walk([](KernelLaunchOp launch) {
    FailureOr<::attn::KernelSpec> spec = getKernelSpec(launch);
    if (failed(spec))
      return;
    std::string source = ::attn::emitCuda(*spec);
    std::string symbol = ::attn::kernelSymbol(*spec);
    // The source must define the entry the runtime looks up.
    if (source.find(symbol) == std::string::npos)
      __builtin_trap();
    // ... and include the template that spec names.
    if (source.find(::attn::kernelTemplate(*spec).header) == std::string::npos)
      __builtin_trap();
    (void)::attn::threadsPerBlock(*spec);
  });
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static DialectRegistry *registry = [] {
    auto *r = new DialectRegistry();
    registerAttnDialects(*r);
    return r;
  }();
  // A fresh context per input keeps memory bounded and inputs independent;
  // no threads, so each input costs no thread-pool start-up.
  MLIRContext context(*registry, MLIRContext::Threading::DISABLED);
  ScopedDiagnosticHandler dropDiagnostics(
      &context, [](Diagnostic &) { return success(); });

  // MLIR's lexer reads up to a terminating NUL, as every file MLIR reads has
  // one (MemoryBuffer): libFuzzer's bytes have none, std::string does.
  std::string text(reinterpret_cast<const char *>(data), size);
  // As attn-opt does: text past the bounds (nesting, result numbers) never
  // reaches the parser.
  if (llvm::Error error = checkIRText(text, "input")) {
    llvm::consumeError(std::move(error));
    return 0;
  }
  // As attn's readers of IR: parsed, checked for what MLIR 19 cannot
  // print, then verified; no diagnostic shows its op.
  context.printOpOnDiagnostic(false);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
      text, ParserConfig(&context, /*verifyAfterParse=*/false));
  if (!module || failed(rejectMalformedBoolArrays(*module)) ||
      failed(verify(*module)))
    return 0;
  for (llvm::StringRef arch : {"sm_80", "sm_89", "sm_90a"}) {
    OwningOpRef<ModuleOp> copy = module->clone();
    lowerAndEmit(context, *copy, arch);
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  return ::attn::fuzz::mutateIR(data, size, maxSize, seed);
}
