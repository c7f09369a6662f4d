//===- AotConfig.h - attn-aot configs -> kernels to build -------*- C++ -*-===//
//
// Reads an attn-aot config (the JSON format attn-aot.cpp documents, or attn
// IR) into the kernels to build, without touching the filesystem (a file
// the config names comes through the caller's reader), printing or
// exiting, so attn-aot and a fuzzer can both call it on any bytes.
//
// A config is input attn cannot trust, and a few hundred bytes of JSON
// lists can stand for millions of variants: every entry's combinations are
// counted (saturating) and the total times the archs is checked against a
// limit before a single variant is expanded. Integers are range-checked,
// empty lists, fields a section does not use and duplicate keys are errors;
// every error names the config, the entry (e.g. "decode[0]") and the field.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TOOLS_ATTN_AOT_AOTCONFIG_H
#define ATTN_TOOLS_ATTN_AOT_AOTCONFIG_H

#include "spec/KernelSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attn::aot {

/// Variants a config may stand for unless raised (attn-aot --max-variants):
/// 10,000 kernels take hours of NVRTC and gigabytes of cubins; a larger
/// count is almost surely a list too many.
constexpr uint64_t kDefaultMaxVariants = 10000;

/// Bounds on what one config may ask for.
struct ConfigLimits {
  /// Variants the config may stand for in all: each JSON entry's
  /// combinations times the archs, summed (cache_ops kernels not counted).
  uint64_t maxVariants = kDefaultMaxVariants;
};

/// Reads a file a config names (a "modifiers" .mlir file) by the path as
/// the config gives it; attn-aot resolves it against the config's
/// directory.
using ReadFile =
    std::function<llvm::Expected<std::string>(llvm::StringRef path)>;

/// The file a config at `configPath` names as `path` ("modifiers"), read
/// under the config's directory only: `path` must be relative and of plain
/// names (no `.`, `..` or empty one), no name on the way may be a symbolic
/// link, and the file must be a regular one of at most `maxBytes`. Errors
/// name `path` and the problem, never the file's contents.
llvm::Expected<std::string> readFileUnderConfig(llvm::StringRef configPath,
                                                llvm::StringRef path,
                                                uint64_t maxBytes);

/// The score_mod and mask_mod regions of a .mlir file that holds one
/// attention op, as that file spells them (`{ ^bb0(...): ... }`; empty
/// where the op has none): what AttentionKnobs::scoreMod / maskMod take,
/// and so the text a host passes to find the kernels in an AOT library.
/// `name` starts every message.
struct ModifierRegions {
  std::string scoreMod, maskMod;
};
llvm::Expected<ModifierRegions> readModifierFile(llvm::StringRef text,
                                                 llvm::StringRef name);

/// One kernel to build: its spec and where in the config it came from.
struct Job {
  KernelSpec spec;
  std::string kernelKey; ///< the variant's kernel key; empty for .mlir configs
  /// For messages: "CONFIG: decode[0] {head_dim=128, ...}" or an IR location.
  std::string origin;
};

/// What a config asks for: the kernels to build and every problem found. A
/// problem confined to some variants leaves the others' jobs; a config-wide
/// one (not JSON, over the limit, no arch) leaves no job. `jobs` is empty
/// only with at least one error: a config that yields no kernel is one.
struct ConfigJobs {
  std::vector<Job> jobs;
  std::vector<std::string> errors;
};

/// The jobs of config `text` for `archs`: attn IR if `name` ends in ".mlir"
/// (each attn op lowered by attn-pipeline per arch), else JSON. `name`
/// starts every message. Files an entry names ("modifiers") are read
/// through `readFile`; without one, naming a file is an error. The entry
/// point for fuzzing configs.
ConfigJobs readConfig(llvm::StringRef text, llvm::StringRef name,
                      llvm::ArrayRef<Arch> archs,
                      const ConfigLimits &limits = {},
                      const ReadFile &readFile = {});

} // namespace attn::aot

#endif // ATTN_TOOLS_ATTN_AOT_AOTCONFIG_H
