//===- RegionOpsCases.h - every region op on edge values --------*- C++ -*-===//
//
// The cases of the differential test of modifier-region code against MLIR's
// folder, shared by the host run (RegionOpsTest.cpp) and the GPU run
// (test/gpu/ModifiersGpuTest.cpp): each op a region may hold, per type, as a
// score_mod that reads its operands' bits from an aux table and returns the
// result's bits; the evaluations (case, operand bits, which 32-bit half);
// and the comparison of what the emitted code returned with the folder.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_UNIT_COMPILER_REGIONOPSCASES_H
#define ATTN_TEST_UNIT_COMPILER_REGIONOPSCASES_H

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace attn::regiontest {

/// One op on one set of types: `text` is its IR with {0}, {1}, {2} for the
/// operands (e.g. "arith.addi {0}, {1} : i32").
struct OpCase {
  std::string op; ///< "arith.addi"
  std::string text;
  std::vector<std::string> operandTypes; ///< "i1", "i32", "i64", "f32", "f64"
  std::string resultType;
  /// Rounded once (or exact): compared bit for bit; else (transcendental
  /// math) within a few ulps.
  bool exact = true;
  /// f32 results of !exact ops: relative and absolute bounds. exp, log and
  /// tanh run on the GPU's SFU (templates/attn/region_ops.h), with their
  /// documented errors.
  double f32Rel = 1e-5, f32Abs = 1e-30;
};

std::vector<OpCase> regionOpCases();

/// Words of one evaluation's aux table: two 32-bit words (low, high) per
/// operand, then which half of a 64-bit result to return (0 low, 1 high),
/// passed as q_pos.
constexpr int kWordsPerEvaluation = 7;

struct Evaluation {
  int caseIndex;
  std::vector<uint64_t> operands; ///< bits, zero-extended
  int half;
  int32_t words[kWordsPerEvaluation];
};

enum class HarnessTarget { Host, Device };

/// The emitted Config of every case (compiled through the front end, as a
/// host's variant is) in one translation unit that evaluates them: on the
/// host, `harness <inputs>` prints each result's 32 bits in hex, one per
/// line; on the device, `extern "C" __global__ void evaluateRegionOps(const
/// int32_t *words, const int32_t *cases, uint32_t *results, int count)`
/// writes them, one thread per evaluation.
struct Harness {
  std::string source;
  std::vector<Evaluation> evaluations;
  /// Host: one line per evaluation, "<case> <word>..." in decimal.
  std::string inputs;
};
std::optional<Harness> buildHarness(const std::vector<OpCase> &cases,
                                    HarnessTarget target, std::string &error);

struct Comparison {
  size_t folded = 0; ///< results compared with the folder's value
  /// Results compared with region_ops.h's rule (where MLIR's is undefined),
  /// the op's documentation (where the folder contradicts it) or an
  /// independent reference (where the folder has no value).
  size_t documented = 0;
  size_t unchecked = 0; ///< neither (no fold, no rule)
  std::map<std::string, size_t> uncheckedByOp;
  std::vector<std::string> mismatches;
  std::vector<std::string> opsNeverFolded;
};
/// `results` holds one 32-bit result per evaluation, in order.
Comparison compareWithFolder(const std::vector<OpCase> &cases,
                             const Harness &harness,
                             const std::vector<uint64_t> &results);

} // namespace attn::regiontest

#endif // ATTN_TEST_UNIT_COMPILER_REGIONOPSCASES_H
