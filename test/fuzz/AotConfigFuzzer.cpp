//===- AotConfigFuzzer.cpp - attn-aot config reader, libFuzzer ------------===//
//
// Arbitrary bytes as an attn-aot JSON config through the tool's own front
// end (tools/attn-aot/AotConfig.h): shape checks, counting, expansion, every
// variant compiled to its kernel spec by the attn pipeline, for two archs.
// No NVRTC. A rejected config is fine; a crash, a sanitizer report, a hang
// or a runaway allocation is a bug, and so is a job whose spec the kernel
// rules (checkKernelSpec) refuse or whose CUDA does not emit its symbol:
// attn-aot would hand it to NVRTC or write it into a library.
//
//===----------------------------------------------------------------------===//
#include "codegen/EmitCuda.h"
#include "spec/KernelLimits.h"
#include "tools/attn-aot/AotConfig.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  // A small variant limit keeps each input to milliseconds; the limit
  // itself is part of what is fuzzed.
  aot::ConfigLimits limits;
  limits.maxVariants = 64;
  aot::ConfigJobs read =
      aot::readConfig(text, "config.json", {Arch::SM80, Arch::SM90a}, limits);
  if (read.jobs.empty() && read.errors.empty()) {
    llvm::errs() << "a config with no kernel must be an error\n";
    std::abort();
  }
  for (const aot::Job &job : read.jobs) {
    if (std::string problem = checkKernelSpec(job.spec); !problem.empty()) {
      llvm::errs() << job.origin << ": a job no template runs: " << problem
                   << "\n";
      std::abort();
    }
    std::string symbol = kernelSymbol(job.spec);
    if (emitCuda(job.spec).find(symbol) == std::string::npos) {
      llvm::errs() << job.origin << ": the CUDA lacks " << symbol << "\n";
      std::abort();
    }
  }
  return 0;
}
