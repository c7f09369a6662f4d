//===- RegionFuzzer.cpp - score_mod / mask_mod text via the C ABI ---------===//
//
// Bytes as the region text a C or Python host passes: byte 0 chooses decode
// or prefill (bit 0) and the arch (the rest, mod 3); the others, split at
// their first NUL, are the score_mod and the mask_mod text (empty: none).
//
// Every input goes through the C ABI's variant checks and kernel key
// (attn_*_kernel_key), then the compiler as attn_compile_* runs it before
// NVRTC: the region parsed (exactly one region, bounded nesting and size),
// verified, scheduled and emitted. A spec that comes out must pass
// checkKernelSpec and its CUDA must define its symbol. On a sample of the
// accepted inputs (the first of the process, so any input run alone, and
// then every 4096th: a count, so a fixed seed compiles the same inputs
// every run) attn_compile_* itself runs NVRTC on the source: an
// op the verifier accepts that NVRTC cannot compile is a bug, as is a
// crash, a sanitizer report, a hang or a runaway allocation anywhere.
//
//===----------------------------------------------------------------------===//
#include "capi/CApi.h"
#include "codegen/EmitCuda.h"
#include "compiler/Frontend/Frontend.h"
#include "spec/KernelLimits.h"
#include "test/fuzz/IRMutator.h"

#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace {

/// Whether this accepted input also goes through NVRTC.
bool sampleNvrtc() {
  static unsigned accepted = 0;
  return accepted++ % 4096 == 0;
}

/// The spec's invariants; a broken one ends the run.
void checkSpec(const attn::KernelSpec &spec) {
  if (!attn::checkKernelSpec(spec).empty())
    __builtin_trap();
  if (attn::emitCuda(spec).find(attn::kernelSymbol(spec)) == std::string::npos)
    __builtin_trap();
}

template <class CVariant, class KeyFn, class CompileFn, class FrontendFn>
void run(CVariant &v, const char *arch, KeyFn key, CompileFn compile,
         FrontendFn frontend) {
  char buffer[256];
  size_t length = 0;
  if (key(&v, buffer, sizeof buffer, &length) != ATTN_OK)
    return;
  auto variant = attn::capi::toVariant(&v);
  if (!variant) {
    // The key function accepted what the variant checks refuse.
    __builtin_trap();
  }
  auto target = attn::parseArch(arch);
  llvm::Expected<attn::KernelSpec> spec = frontend(*variant, *target);
  if (!spec) {
    llvm::consumeError(spec.takeError());
    return;
  }
  checkSpec(*spec);
  if (!sampleNvrtc())
    return;
  attn_compiled *compiled = nullptr;
  if (compile(&v, arch, &compiled) != ATTN_OK) {
    llvm::errs() << "the front end accepted the regions, attn_compile_* "
                    "did not: "
                 << attn_last_error() << "\n";
    __builtin_trap();
  }
  attn_compiled_destroy(compiled);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0 || size > 2 * attn::kMaxModifierBytes)
    return 0;
  uint8_t selector = data[0];
  std::string rest(reinterpret_cast<const char *>(data + 1), size - 1);
  size_t nul = rest.find('\0');
  std::string scoreMod = rest.substr(0, nul);
  std::string maskMod =
      nul == std::string::npos ? std::string() : rest.substr(nul + 1);
  maskMod = maskMod.substr(0, maskMod.find('\0')); // a C string ends there
  static const char *const kArchs[] = {"sm_80", "sm_89", "sm_90a"};
  const char *arch = kArchs[(selector >> 1) % 3];
  const char *score = scoreMod.empty() ? nullptr : scoreMod.c_str();
  const char *mask = maskMod.empty() ? nullptr : maskMod.c_str();
  if (selector & 1) {
    attn_prefill_variant v;
    attn_prefill_variant_init(&v);
    v.knobs.score_mod = score;
    v.knobs.mask_mod = mask;
    run(v, arch, attn_prefill_kernel_key, attn_compile_prefill,
        [](const attn::PrefillVariant &p, attn::Arch a) {
          return mlir::attn::compilePrefillVariant(p, a);
        });
  } else {
    attn_decode_variant v;
    attn_decode_variant_init(&v);
    v.knobs.score_mod = score;
    v.knobs.mask_mod = mask;
    run(v, arch, attn_decode_kernel_key, attn_compile_decode,
        [](const attn::DecodeVariant &d, attn::Arch a) {
          return mlir::attn::compileDecodeVariant(d, a);
        });
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  return attn::fuzz::mutateIR(data, size, maxSize, seed);
}
