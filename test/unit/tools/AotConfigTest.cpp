//===- AotConfigTest.cpp - attn-aot's config reader -----------------------===//
//
// Ordinary configs become one job per combination and arch; configs that
// stand for too many variants are refused quickly, before expansion, naming
// the entry, its count, its lists and the flag; out-of-range integers,
// empty lists, duplicate keys, unknown fields and paged-only fields on a
// ragged prefill are errors naming the entry and the field. No config,
// however broken, yields neither a job nor an error.
//
//===----------------------------------------------------------------------===//
#include "tools/attn-aot/AotConfig.h"

#include "attn/runtime/cache/VariantKey.h"
#include "attn/runtime/support/InputFiles.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>

#include <sys/stat.h>
#include <unistd.h>

using namespace attn;
using namespace attn::aot;

namespace {

const std::vector<Arch> kOneArch = {Arch::SM90a};
const std::vector<Arch> kTwoArchs = {Arch::SM80, Arch::SM90a};

/// All errors of `config`, one per line.
std::string errorsOf(const ConfigJobs &config) {
  std::string text;
  for (const std::string &error : config.errors)
    text += error + "\n";
  return text;
}

/// Reads `text` expecting no job and an error containing each fragment.
void expectRefused(const std::string &text,
                   std::initializer_list<std::string> fragments,
                   const std::vector<Arch> &archs = kOneArch,
                   ConfigLimits limits = {}) {
  ConfigJobs config = readConfig(text, "c.json", archs, limits);
  EXPECT_TRUE(config.jobs.empty()) << text;
  std::string errors = errorsOf(config);
  for (const std::string &fragment : fragments)
    EXPECT_NE(errors.find(fragment), std::string::npos)
        << "missing: " << fragment << "\nin: " << errors;
}

TEST(AotConfigTest, EveryCombinationOnEveryArch) {
  ConfigJobs config = readConfig(
      R"({"decode": [{"num_q_heads": 8, "num_kv_heads": 8,
                      "head_dim": [64, 128], "window_left": [false, true]}]})",
      "c.json", kTwoArchs);
  EXPECT_TRUE(config.errors.empty()) << errorsOf(config);
  ASSERT_EQ(config.jobs.size(), 8u);
  int windowed = 0;
  for (const Job &job : config.jobs) {
    windowed += job.spec.slidingWindow;
    EXPECT_NE(job.origin.find("c.json: decode[0] {head_dim="),
              std::string::npos)
        << job.origin;
    DecodeVariant v;
    v.numQHeads = v.numKVHeads = 8;
    v.headDim = job.spec.headDim;
    if (job.spec.slidingWindow)
      v.windowLeft = 1;
    EXPECT_EQ(job.kernelKey, runtime::kernelKey(v));
  }
  EXPECT_EQ(windowed, 4);
}

TEST(AotConfigTest, SinksAreAKnobLikeAlibi) {
  // gpt-oss: sliding and full layers, with sinks; decode and paged prefill.
  ConfigJobs config = readConfig(
      R"({"decode": [{"num_q_heads": 64, "num_kv_heads": 8, "head_dim": 64,
                      "sinks": true, "window_left": [false, true]}],
          "prefill": [{"num_q_heads": 64, "num_kv_heads": 8, "head_dim": 64,
                       "sinks": true, "paged": true}]})",
      "c.json", kOneArch);
  EXPECT_TRUE(config.errors.empty()) << errorsOf(config);
  ASSERT_EQ(config.jobs.size(), 3u);
  for (const Job &job : config.jobs) {
    EXPECT_TRUE(job.spec.sinks) << job.spec.uri();
    EXPECT_NE(job.kernelKey.find("sinks=1"), std::string::npos)
        << job.kernelKey;
  }
  expectRefused(R"({"append_kv": [{"sinks": true}]})",
                {"unknown field \"sinks\""});
}

TEST(AotConfigTest, MlaDecodeSection) {
  // DeepSeek's MLA at TP8 and without TP, bf16 and e4m3 caches, and MTP.
  ConfigJobs config = readConfig(
      R"({"mla_decode": [{"kv_type": ["q", "e4m3"], "num_q_heads": [16, 128],
                          "kv_lora_rank": 512, "rope_dim": 64,
                          "page_size": 64},
                         {"num_q_heads": 16, "query_len": 2, "causal": true,
                          "write_lse": true}]})",
      "c.json", kTwoArchs);
  EXPECT_TRUE(config.errors.empty()) << errorsOf(config);
  ASSERT_EQ(config.jobs.size(), 10u);
  for (const Job &job : config.jobs) {
    EXPECT_EQ(job.spec.kind, KernelKind::MlaDecode) << job.spec.uri();
    EXPECT_EQ(job.spec.headDim, 512);
    EXPECT_EQ(job.spec.ropeDim, 64);
    MlaDecodeVariant v;
    v.kvType = job.spec.kvType;
    v.numQHeads = job.spec.numQHeads;
    v.queryLen = job.spec.queryLen;
    v.causal = job.spec.causal;
    v.writeLse = job.spec.writeLse;
    EXPECT_EQ(job.kernelKey, runtime::kernelKey(v));
  }
  expectRefused(R"({"mla_decode": [{"rope_dim": 32}]})",
                {"mla_decode[0] {rope_dim=32}",
                 "kpe head_dim (rope_dim) must be 64 or 128, got 32"});
  expectRefused(R"({"mla_decode": [{"head_dim": 512}]})",
                {"unknown field \"head_dim\""});
}

TEST(AotConfigTest, MlaPrefillIsAPrefillWithRopeDim) {
  // DeepSeek's MHA-mode prefill: q/k 128 + 64, v 128.
  ConfigJobs config = readConfig(
      R"({"prefill": [{"num_q_heads": 16, "num_kv_heads": 16, "head_dim": 128,
                       "rope_dim": 64, "write_lse": true}]})",
      "c.json", kTwoArchs);
  EXPECT_TRUE(config.errors.empty()) << errorsOf(config);
  ASSERT_EQ(config.jobs.size(), 2u);
  for (const Job &job : config.jobs) {
    EXPECT_EQ(job.spec.kind, KernelKind::Prefill) << job.spec.uri();
    EXPECT_EQ(job.spec.headDim, 128);
    EXPECT_EQ(job.spec.ropeDim, 64);
    PrefillVariant v;
    v.numQHeads = v.numKVHeads = 16;
    v.ropeDim = 64;
    v.writeLse = true;
    EXPECT_EQ(job.kernelKey, runtime::kernelKey(v));
  }
  expectRefused(R"({"prefill": [{"rope_dim": 64, "paged": true}]})",
                {"prefill[0]", "ropeDim (q/k wider than v) is for ragged "
                               "16-bit k/v; got a paged cache"});
}

TEST(AotConfigTest, CacheOpsAndMlirConfigs) {
  ConfigJobs ops = readConfig(R"({"cache_ops": true})", "c.json", kTwoArchs);
  EXPECT_TRUE(ops.errors.empty()) << errorsOf(ops);
  EXPECT_EQ(ops.jobs.size(), 4u); // copy_pages and advance_step per arch
  ConfigJobs none = readConfig(R"({"cache_ops": false})", "c.json", kOneArch);
  EXPECT_TRUE(none.jobs.empty());
  EXPECT_NE(errorsOf(none).find("c.json: the config yields no kernel"),
            std::string::npos);
  ConfigJobs empty = readConfig("module {}", "c.mlir", kOneArch);
  EXPECT_TRUE(empty.jobs.empty());
  EXPECT_NE(errorsOf(empty).find("c.mlir: the config yields no kernel"),
            std::string::npos);
}

TEST(AotConfigTest, ExampleConfigsAreValid) {
  // Modifier files are read under the config's directory, as attn-aot reads
  // them.
  for (const char *example :
       {"aot/serving.json", "aot/serving-full.json", "modifiers/aot.json"}) {
    std::string path = std::string(ATTN_SOURCE_DIR "/examples/") + example;
    ReadFile read = [path](llvm::StringRef name) {
      return readFileUnderConfig(path, name, 1 << 20);
    };
    llvm::Expected<std::string> text = runtime::readRegularFile(path, 1 << 20);
    ASSERT_TRUE(bool(text)) << llvm::toString(text.takeError());
    ConfigJobs config = readConfig(*text, path, kTwoArchs, {}, read);
    EXPECT_TRUE(config.errors.empty()) << errorsOf(config);
    EXPECT_FALSE(config.jobs.empty()) << example;
    // serving.json: decode 8, prefill 5, append_kv 4, on two archs, plus
    // two cache ops per arch (attn-aot builds these 38 kernels).
    if (std::string(example) == "aot/serving.json") {
      EXPECT_EQ(config.jobs.size(), 38u);
    }
  }
}

//===- Counting before expanding ------------------------------------------===//

TEST(AotConfigTest, TenMillionCombinationsAreRefusedBeforeExpanding) {
  // Under 450 bytes for 12.8 million combinations: expanded, this ran out
  // of memory.
  std::string ten = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]";
  std::string both = "[false, true]";
  std::string text = R"({"decode": [{"num_q_heads": )" + ten +
                     R"(, "num_kv_heads": )" + ten + R"(, "head_dim": )" + ten +
                     R"(, "page_size": )" + ten + R"(, "query_len": )" + ten +
                     R"(, "causal": )" + both + R"(, "cross": )" + both +
                     R"(, "alibi": )" + both + R"(, "write_lse": )" + both +
                     R"(, "per_head_kv_scale": )" + both + R"(, "softcap": )" +
                     both + R"(, "window_left": )" + both + "}]}";
  EXPECT_LT(text.size(), 450u);
  auto start = std::chrono::steady_clock::now();
  expectRefused(text,
                {"c.json: decode[0] stands for 25600000 variants (12800000 "
                 "combinations of alibi: 2, causal: 2, cross: 2, head_dim: "
                 "10, num_kv_heads: 10, num_q_heads: 10, page_size: 10, "
                 "per_head_kv_scale: 2, query_len: 10, softcap: 2, "
                 "window_left: 2, write_lse: 2; times 2 archs), more than the "
                 "limit of "
                 "10000 variants; --max-variants N raises it"},
                kTwoArchs);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(AotConfigTest, CountsSaturateInsteadOfWrapping) {
  // 20^15 combinations overflow 64 bits; wrapped, the count could look small.
  std::string twenty = "[";
  for (int i = 0; i < 20; ++i)
    twenty += (i ? ", " : "") + std::to_string(i + 1);
  twenty += "]";
  std::string text = R"({"decode": [{)";
  const char *fields[] = {"q_type",       "kv_type",           "num_q_heads",
                          "num_kv_heads", "head_dim",          "page_size",
                          "layout",       "query_len",         "causal",
                          "cross",        "window_left",       "softcap",
                          "alibi",        "per_head_kv_scale", "write_lse"};
  for (const char *field : fields)
    text += std::string(field == fields[0] ? "" : ", ") + "\"" + field +
            "\": " + twenty;
  text += "}]}";
  expectRefused(text, {"decode[0] stands for 18446744073709551615 variants",
                       "more than the limit of 10000 variants"});
}

TEST(AotConfigTest, TheTotalOfAllEntriesIsLimited) {
  // Each entry is within the limit alone; together they are not.
  std::string entry =
      R"({"num_q_heads": [1, 2, 3, 4, 5, 6, 7, 8], "head_dim": [64, 128]})";
  std::string text = R"({"decode": [)" + entry + ", " + entry +
                     R"(], "append_kv": [{"head_dim": [64, 128]}]})";
  expectRefused(text,
                {"c.json: the config stands for 34 variants (decode[0]: 16, "
                 "decode[1]: 16, append_kv[0]: 2 combinations; times 1 "
                 "arch), more than the limit of 30 variants; --max-variants "
                 "N raises it"},
                kOneArch, ConfigLimits{30});
  // The limit counts archs too, and an entry at the limit is fine.
  expectRefused(R"({"append_kv": [{"head_dim": [64, 128]}]})",
                {"append_kv[0] stands for 4 variants"}, kTwoArchs,
                ConfigLimits{3});
  ConfigJobs atLimit = readConfig(R"({"append_kv": [{"head_dim": [64, 128]}]})",
                                  "c.json", kTwoArchs, ConfigLimits{4});
  EXPECT_TRUE(atLimit.errors.empty()) << errorsOf(atLimit);
  EXPECT_EQ(atLimit.jobs.size(), 4u);
}

TEST(AotConfigTest, MlirConfigsAreLimitedToo) {
  const char *module = R"(
    func.func @f(%k: tensor<?x8x128xbf16>, %v: tensor<?x8x128xbf16>,
                 %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                 %s: tensor<?xi64>) {
      %a = attn.append_kv %k, %v into %c at %s
          : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
            !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi64>
      return
    })";
  ConfigJobs config = readConfig(module, "c.mlir", kTwoArchs, ConfigLimits{1});
  EXPECT_TRUE(config.jobs.empty());
  EXPECT_NE(errorsOf(config).find("c.mlir: 1 attn ops times 2 archs stand for "
                                  "2 variants, more than the limit of 1"),
            std::string::npos)
      << errorsOf(config);
  EXPECT_EQ(readConfig(module, "c.mlir", kTwoArchs).jobs.size(), 2u);
}

//===- Values and fields --------------------------------------------------===//

TEST(AotConfigTest, IntegersOutOfRangeAreErrorsNamingFieldAndValue) {
  // 4294967328 is 32 once cut to an int: it used to build a 32-head kernel.
  for (const char *value : {"4294967328", "-8", "0", "1.5", "1e300",
                            "9223372036854775808.0", "\"32\""}) {
    std::string text =
        std::string(R"({"decode": [{"num_q_heads": )") + value + "}]}";
    std::string printed = value;
    if (printed == "1e300")
      printed = "1.0000000000000001e+300";
    if (printed == "9223372036854775808.0")
      printed = "9.2233720368547758e+18";
    expectRefused(text, {"c.json: decode[0] {num_q_heads=" + printed +
                         "}: \"num_q_heads\" must be an integer from 1 to "
                         "2147483647, not " +
                         printed});
  }
}

TEST(AotConfigTest, EmptyListsAreErrors) {
  expectRefused(R"({"decode": [{"head_dim": []}]})",
                {"c.json: decode[0]: \"head_dim\" is an empty list"});
  expectRefused(R"({"decode": []})", {"c.json: \"decode\" is an empty list"});
  expectRefused(R"({})", {"c.json: the config yields no kernel"});
  // An empty list elsewhere does not stop the good entries.
  ConfigJobs config = readConfig(
      R"({"append_kv": [{"head_dim": 64}, {"head_dim": []}], "prefill": []})",
      "c.json", kOneArch);
  EXPECT_EQ(config.jobs.size(), 1u);
  EXPECT_EQ(config.errors.size(), 2u) << errorsOf(config);
}

TEST(AotConfigTest, DuplicateKeysAndDeepNestingAreErrors) {
  expectRefused(R"({"decode": [{"head_dim": 64, "head_dim": 128}]})",
                {"c.json: duplicate key \"head_dim\" at line 1, column 30"});
  expectRefused(R"({"decode": [], "decode": [{}]})",
                {"duplicate key \"decode\""});
  expectRefused(std::string(100000, '[') + std::string(100000, ']'),
                {"c.json: JSON nests deeper than the limit of 64 levels"});
}

TEST(AotConfigTest, UnknownAndInapplicableFieldsAreErrors) {
  expectRefused(R"({"decode": [{"head_dmi": 64}]})",
                {"c.json: decode[0]: unknown field \"head_dmi\""});
  expectRefused(
      R"({"decode": [{"window": true}]})",
      {"decode[0]: unknown field \"window\" (renamed \"window_left\")"});
  expectRefused(
      R"({"prefill": [{"window": [false, true]}]})",
      {"prefill[0]: unknown field \"window\" (renamed \"window_left\")"});
  expectRefused(R"({"append_kv": [{"causal": true}]})",
                {"append_kv[0]: unknown field \"causal\""});
  // Fields of the paged cache on a prefill entry that is not always paged.
  for (const char *field : {"page_size", "layout"})
    for (const char *paged :
         {"", ", \"paged\": false", ", \"paged\": [false, true]"}) {
      std::string value = std::string(field) == "page_size" ? "16" : "\"nhd\"";
      std::string text = std::string(R"({"prefill": [{")") + field +
                         "\": " + value + paged + "}]}";
      expectRefused(text, {std::string("c.json: prefill[0]: \"") + field +
                           "\" applies to paged prefill only"});
    }
  ConfigJobs paged = readConfig(
      R"({"prefill": [{"paged": true, "kv_type": "e4m3", "page_size": 16}]})",
      "c.json", kOneArch);
  EXPECT_TRUE(paged.errors.empty()) << errorsOf(paged);
  ASSERT_EQ(paged.jobs.size(), 1u);
  EXPECT_EQ(paged.jobs[0].spec.kvType, ScalarType::F8E4M3);
  // kv_type on a ragged entry: FP8 k/v rows with their scales.
  ConfigJobs ragged = readConfig(
      R"({"prefill": [{"kv_type": "e5m2", "per_head_kv_scale": true, "fp8_compute": true}]})",
      "c.json", kOneArch);
  EXPECT_TRUE(ragged.errors.empty()) << errorsOf(ragged);
  ASSERT_EQ(ragged.jobs.size(), 1u);
  EXPECT_EQ(ragged.jobs[0].spec.kind, KernelKind::Prefill);
  EXPECT_EQ(ragged.jobs[0].spec.kvType, ScalarType::F8E5M2);
  EXPECT_TRUE(ragged.jobs[0].spec.perHeadKVScale &&
              ragged.jobs[0].spec.fp8Compute);
}

TEST(AotConfigTest, StructureErrorsNameTheSection) {
  expectRefused("[]", {"c.json: the config must be a JSON object"});
  expectRefused(R"({"decode": {}})", {"c.json: \"decode\" must be a list"});
  expectRefused(R"({"decode": [1]})", {"c.json: decode[0]: must be an object"});
  expectRefused(R"({"encode": []})", {"c.json: unknown section \"encode\""});
  expectRefused(R"({"cache_ops": 1})",
                {"c.json: \"cache_ops\" must be true or false"});
  expectRefused(R"({"cache_ops": true})", {"c.json: no arch to build for"}, {});
}

TEST(AotConfigTest, EveryPrefixOfAConfigGivesJobsOrErrors) {
  // Truncated files are what a fuzzer tries first: none may give nothing.
  std::string text =
      R"({"decode": [{"head_dim": [64, 128], "window_left": true}], )"
      R"("cache_ops": false})";
  for (size_t size = 0; size <= text.size(); ++size) {
    ConfigJobs config = readConfig(text.substr(0, size), "c.json", kOneArch);
    EXPECT_FALSE(config.jobs.empty() && config.errors.empty()) << size;
  }
}

//===- Modifier files -----------------------------------------------------===//

/// A .mlir file of one decode op with a chunked-local mask_mod, commented.
constexpr const char *kChunkedDecode = R"(
func.func @f(%q: tensor<?x32x128xbf16>,
    %cache: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
    %tables: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  %out = attn.decode %q, %cache, %tables, %lens
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  mask_mod {
  ^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
    // the same chunk of 4096 {not a brace that counts}
    %c = arith.constant 4096 : i32
    %qc = arith.divsi %q_pos, %c : i32
    %kc = arith.divsi %k_pos, %c : i32
    %same = arith.cmpi eq, %qc, %kc : i32
    attn.yield %same : i1
  }
  return %out : tensor<?x32x128xbf16>
}
)";

/// Reads files from `files` by name; any other name is missing.
ReadFile readFrom(std::map<std::string, std::string> files) {
  return [files](llvm::StringRef path) -> llvm::Expected<std::string> {
    auto it = files.find(path.str());
    if (it == files.end())
      return llvm::createStringError("no such file: " + path.str());
    return it->second;
  };
}

TEST(AotConfigTest, ModifiersFileGivesEveryVariantItsRegions) {
  ReadFile read = readFrom({{"chunked.mlir", kChunkedDecode}});
  ConfigJobs config = readConfig(
      R"({"decode": [{"modifiers": "chunked.mlir"}],
          "prefill": [{"causal": true, "modifiers": "chunked.mlir",
                       "head_dim": [64, 128]}]})",
      "c.json", kOneArch, {}, read);
  EXPECT_TRUE(config.errors.empty()) << errorsOf(config);
  ASSERT_EQ(config.jobs.size(), 3u);
  for (const Job &job : config.jobs) {
    EXPECT_FALSE(job.spec.maskMod.empty()) << job.origin;
    EXPECT_TRUE(job.spec.scoreMod.empty()) << job.origin;
    EXPECT_FALSE(job.spec.maskModTiles.empty()) << job.origin;
  }
  // A host passing the same region, laid out otherwise and without the
  // comment, finds the kernel by its key.
  DecodeVariant host;
  host.maskMod = "{ ^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: "
                 "i32, %kv_head: i32): %c = arith.constant 4096 : i32 %qc = "
                 "arith.divsi %q_pos, %c : i32 %kc = arith.divsi %k_pos, %c : "
                 "i32 %same = arith.cmpi eq, %qc, %kc : i32 attn.yield %same "
                 ": i1 }";
  EXPECT_EQ(config.jobs[0].kernelKey, runtime::kernelKey(host));
}

TEST(AotConfigTest, ModifiersFileProblemsNameTheFile) {
  std::string twoOps = kChunkedDecode;
  twoOps += std::string(kChunkedDecode)
                .replace(std::string(kChunkedDecode).find("@f"), 2, "@g");
  std::string noRegion = kChunkedDecode;
  noRegion.erase(noRegion.find("  mask_mod {"),
                 noRegion.find("  return") - noRegion.find("  mask_mod {"));
  std::string impure = kChunkedDecode;
  impure.replace(impure.find("%c = arith.constant 4096 : i32"), 30,
                 "%c = \"test.unknown\"() : () -> i32");
  ReadFile read = readFrom({{"two.mlir", twoOps},
                            {"none.mlir", noRegion},
                            {"impure.mlir", impure},
                            {"garbage.mlir", "func.func @"}});
  auto refused = [&](const char *modifiers, std::string fragment,
                     const ReadFile &reader) {
    std::string text =
        std::string(R"({"decode": [{"modifiers": )") + modifiers + "}]}";
    ConfigJobs config = readConfig(text, "c.json", kOneArch, {}, reader);
    EXPECT_TRUE(config.jobs.empty()) << text;
    std::string errors = errorsOf(config);
    EXPECT_NE(errors.find("c.json: decode[0]"), std::string::npos) << errors;
    EXPECT_NE(errors.find(fragment), std::string::npos)
        << "missing: " << fragment << "\nin: " << errors;
  };
  refused("3", "\"modifiers\" must be the path of a .mlir file", read);
  refused("\"m.json\"", "\"modifiers\" must be the path of a .mlir file", read);
  refused("\"two.mlir\"",
          "two.mlir: a modifiers file holds one attention op "
          "(its score_mod and mask_mod are the modifiers), "
          "not 2",
          read);
  refused("\"none.mlir\"", "none.mlir: its attention op has neither", read);
  refused("\"impure.mlir\"", "impure.mlir", read);
  refused("\"garbage.mlir\"", "garbage.mlir:1", read);
  refused("\"missing.mlir\"", "no such file: missing.mlir", read);
  refused("\"two.mlir\"", "names a file, and this reader reads no files", {});
}

TEST(AotConfigTest, ModifiersFileBuildsExactlyTheVerifiedRegion) {
  auto errorOf = [](const std::string &text) {
    llvm::Expected<ModifierRegions> regions = readModifierFile(text, "m.mlir");
    return regions ? std::string() : llvm::toString(regions.takeError());
  };
  EXPECT_EQ(errorOf(kChunkedDecode), "");
  // The op's location points into a comment that spells another region:
  // the text found there is not the region that was verified.
  std::string intoComment =
      "// mask_mod { ^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: "
      "i32, %kv_head: i32): %t = arith.constant true attn.yield %t : i1 }\n" +
      std::string(kChunkedDecode);
  size_t end = intoComment.find("  return %out");
  std::string located = intoComment.substr(0, end);
  located.insert(located.rfind("  }\n") + 3, " loc(\"m.mlir\":1:4)");
  located += intoComment.substr(end);
  std::string error = errorOf(located);
  EXPECT_NE(error.find("is not its mask_mod region"), std::string::npos)
      << error;
  // An op in generic form and a module named @score_mod: the keyword found
  // after the op is the module's, whose text is no region of the op.
  std::string generic = R"(
module @score_mod {}
func.func @f(%q: tensor<?x8x64xbf16>, %k: tensor<?x8x64xbf16>, %cu: tensor<?xi32>) -> tensor<?x8x64xbf16> {
  %o = "attn.prefill"(%q, %k, %k, %cu, %cu) <{kind = #attn.kind<decoder>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0>}> ({
  ^bb0(%s: f32, %r: i32, %qp: i32, %kp: i32, %qh: i32, %kh: i32):
    %two = arith.constant 2.0 : f32
    %m = arith.mulf %s, %two : f32
    attn.yield %m : f32
  }, {
  }) : (tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x64xbf16>
  return %o : tensor<?x8x64xbf16>
}
)";
  error = errorOf(generic);
  EXPECT_NE(error.find("is not its score_mod region"), std::string::npos)
      << error;
  // What MLIR 19 cannot print is refused before the verifier shows it.
  std::string boolArray = kChunkedDecode;
  boolArray.insert(boolArray.find("    %c ="),
                   "    %x = arith.constant {a = array<i1: 1>} 0 : i32\n");
  error = errorOf(boolArray);
  EXPECT_NE(error.find("is an i1 array written with integers"),
            std::string::npos)
      << error;
  // Nesting deeper than attn parses is refused before parsing.
  error = errorOf(std::string(100, '[') + std::string(100, ']'));
  EXPECT_NE(error.find("nests deeper"), std::string::npos) << error;
  // A file that is not IR: its lines are not echoed back.
  error = errorOf("root:$6$secretsalt$hash:19000:0:99999:7:::\n");
  EXPECT_NE(error.find("m.mlir:1:"), std::string::npos) << error;
  EXPECT_EQ(error.find("secretsalt"), std::string::npos) << error;
}

TEST(AotConfigTest, ModifiersPathsStayUnderTheConfigsDirectory) {
  char dirTemplate[] = "/tmp/attn-aot-config-XXXXXX";
  ASSERT_NE(mkdtemp(dirTemplate), nullptr);
  std::string dir = dirTemplate;
  std::string config = dir + "/c.json";
  ASSERT_EQ(mkdir((dir + "/sub").c_str(), 0700), 0);
  std::ofstream(dir + "/sub/m.mlir") << "secret contents";
  std::ofstream(dir + "/m.mlir") << "plain";
  ASSERT_EQ(symlink("/etc/passwd", (dir + "/link.mlir").c_str()), 0);
  ASSERT_EQ(symlink((dir + "/sub").c_str(), (dir + "/sublink").c_str()), 0);
  auto read = [&](const char *path) {
    llvm::Expected<std::string> text = readFileUnderConfig(config, path, 1024);
    return text ? "ok: " + *text : llvm::toString(text.takeError());
  };
  EXPECT_EQ(read("m.mlir"), "ok: plain");
  EXPECT_EQ(read("sub/m.mlir"), "ok: secret contents");
  for (const char *path : {"/etc/passwd", "../c.json", "sub/../m.mlir",
                           "./m.mlir", "sub//m.mlir", ""})
    EXPECT_NE(read(path).find("cannot read '"), std::string::npos) << path;
  EXPECT_NE(read("link.mlir").find("symbolic link"), std::string::npos)
      << read("link.mlir");
  EXPECT_NE(read("sublink/m.mlir").find("symbolic link"), std::string::npos)
      << read("sublink/m.mlir");
  EXPECT_EQ(read("sublink/m.mlir").find("secret"), std::string::npos);
  EXPECT_NE(read("sub").find("not a regular file"), std::string::npos)
      << read("sub");
  std::ofstream(dir + "/big.mlir") << std::string(2000, 'x');
  EXPECT_NE(read("big.mlir").find("at most 1024"), std::string::npos);
  std::system(("rm -rf " + dir).c_str());
}

} // namespace
