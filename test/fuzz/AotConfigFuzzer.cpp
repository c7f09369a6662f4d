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
  // A "modifiers" file named "chunked.mlir" reads as a chunked-local mask
  // (every other name is missing), so the regions' path is fuzzed too.
  aot::ReadFile readFile =
      [](llvm::StringRef path) -> llvm::Expected<std::string> {
    if (path != "chunked.mlir")
      return llvm::createStringError("no such file");
    return std::string(R"(
func.func @f(%q: tensor<?x8x64xbf16>,
    %cache: !attn.paged_kv<2x64xbf16, page_size = 16, layout = nhd>,
    %tables: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x8x64xbf16> {
  %out = attn.decode %q, %cache, %tables, %lens
      : tensor<?x8x64xbf16>, !attn.paged_kv<2x64xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  mask_mod {
  ^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
    %c = arith.constant 512 : i32
    %qc = arith.divsi %q_pos, %c : i32
    %kc = arith.divsi %k_pos, %c : i32
    %same = arith.cmpi eq, %qc, %kc : i32
    attn.yield %same : i1
  }
  return %out : tensor<?x8x64xbf16>
})");
  };
  aot::ConfigJobs read = aot::readConfig(
      text, "config.json", {Arch::SM80, Arch::SM90a}, limits, readFile);
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
