//===- BackendGpuTest.cpp - the Backend facade end to end -----------------===//
//
// Engine steps through runtime::Backend, as an inference engine drives it:
// a KVCache, a PageAllocator per request, the AttentionMetadataBuilder,
// plan once per step, forward per layer. Each request's keys and values
// are drawn once per token (exactly representable in the cache type), kept
// on the host, and every output row is checked against the fp64 reference
// over the request's whole history (bottom-right causal): a lost append, a
// wrong page or a stale plan shows as an error. Graph replay must give the
// bytes the direct run gives.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/serving/Backend.h"
#include "attn/runtime/serving/KVCache.h"
#include "attn/runtime/serving/PageAllocator.h"
#include "compiler/Jit/Jit.h"
#include "test/gpu/GpuTestUtil.h"
#include "test/reference/DecodeCheck.h"
#include "test/reference/Modifiers.h"

#include <cmath>
#include <random>

using namespace attn;
using namespace attn::test;
using runtime::AttentionMetadata;
using runtime::ScheduledRequest;

namespace {

constexpr int kHeads = 8, kKVHeads = 2, kDim = 128, kPage = 16;

/// Values exactly representable in `type` (and so in bf16), as bf16 bytes
/// for the kernels and doubles for the reference.
struct Rows {
  std::vector<uint16_t> bf16;
  std::vector<double> values;
};
Rows randomRows(std::mt19937 &rng, ScalarType type, size_t count) {
  Quantized drawn = randomValues(rng, type, count, 1.0);
  Rows rows;
  rows.values = drawn.values;
  for (double x : drawn.values)
    rows.bf16.push_back(uint16_t(ref::encode(ScalarType::BF16, x)));
  return rows;
}

/// One request: its pages and the K/V of every token it has cached.
struct Request {
  runtime::PageTable table{kPage};
  std::vector<double> k, v; ///< [tokens, kKVHeads, kDim]
  int64_t tokens() const { return int64_t(k.size()) / (kKVHeads * kDim); }
};

/// An engine of one attention layer (or a few, sharing the step plan).
class Engine {
public:
  /// With `withSinks`, every layer has attention sinks (one logit per q
  /// head, some large enough to take most of a row's weight).
  /// With `modifiers`, every layer runs its regions and reads its aux
  /// tables (the object must outlive the engine).
  llvm::Error init(ScalarType kvType, int numLayers = 1, bool withSinks = false,
                   const check::TestModifiers *modifiers = nullptr) {
    this->kvType = kvType;
    this->modifiers = modifiers;
    runtime::KVCacheConfig cache;
    cache.numLayers = numLayers;
    cache.numPages = numPages;
    cache.pageSize = kPage;
    cache.numKVHeads = kKVHeads;
    cache.headDim = kDim;
    cache.dtype = kvType;
    auto kv = runtime::KVCache::allocate(cache);
    if (!kv)
      return kv.takeError();
    this->cache.emplace(std::move(*kv));
    allocator.emplace(cache.numPages);
    limits.pageSize = kPage;
    limits.numPages = cache.numPages;
    limits.maxBatch = 16;
    limits.maxTokens = maxTokens;
    limits.maxPagesPerSeq = maxPagesPerSeq;
    auto builder = runtime::AttentionMetadataBuilder::create(limits);
    if (!builder)
      return builder.takeError();
    this->builder.emplace(std::move(*builder));
    runtime::BackendConfig config;
    config.numQHeads = kHeads;
    config.numKVHeads = kKVHeads;
    config.headDim = kDim;
    config.kvType = kvType;
    config.pageSize = kPage;
    config.sinks = withSinks;
    if (modifiers) {
      config.scoreMod = modifiers->scoreMod;
      config.maskMod = modifiers->maskMod;
      if (llvm::Error error = check::uploadAux(*modifiers, auxBuffers, aux))
        return error;
    }
    if (withSinks) {
      for (int h = 0; h < kHeads; ++h)
        sinks.push_back(h % 4 == 3 ? 6.0f : -1.0f + 0.75f * float(h % 4));
      auto allocated =
          runtime::DeviceBuffer::allocate(sinks.size() * sizeof(float));
      if (!allocated)
        return allocated.takeError();
      sinksBuffer = std::move(*allocated);
      if (llvm::Error error = sinksBuffer.copyFromHost(
              sinks.data(), sinks.size() * sizeof(float)))
        return error;
    }
    auto backend =
        runtime::Backend::create(config, Jit::global().kernelSource(), limits);
    if (!backend)
      return backend.takeError();
    this->backend = std::move(*backend);
    auto stream = runtime::Stream::create();
    if (!stream)
      return stream.takeError();
    this->stream.emplace(std::move(*stream));
    // Fixed input/output buffers (graphs need fixed addresses).
    for (auto *buffer : {&q, &k, &v, &out}) {
      auto allocated = runtime::DeviceBuffer::allocate(
          size_t(limits.maxTokens) * kHeads * kDim * 2);
      if (!allocated)
        return allocated.takeError();
      *buffer = std::move(*allocated);
    }
    return llvm::Error::success();
  }

  /// Schedules `newTokens` rows for each request (prefill chunks first, then
  /// decodes of 1), draws q/k/v, uploads them; the reference of the step's
  /// rows goes to `expected`.
  llvm::Expected<AttentionMetadata> step(std::vector<Request> &requests,
                                         const std::vector<int> &newTokens,
                                         int numPrefills, std::mt19937 &rng,
                                         std::vector<double> &expected) {
    std::vector<ScheduledRequest> scheduled;
    std::vector<uint16_t> qBytes, kBytes, vBytes;
    ref::PrefillProblem prob;
    prob.numQHeads = kHeads;
    prob.numKVHeads = kKVHeads;
    prob.headDim = kDim;
    prob.scale = 1.0 / std::sqrt(double(kDim));
    prob.causal = true;
    prob.sinks.assign(sinks.begin(), sinks.end());
    if (modifiers) {
      prob.scoreMod = modifiers->refScore;
      prob.maskMod = modifiers->refMask;
    }
    prob.cuSeqlensQ = {0};
    prob.cuSeqlensKV = {0};
    for (size_t i = 0; i < requests.size(); ++i) {
      Request &r = requests[i];
      int64_t context = r.tokens();
      auto copy = r.table.append(*allocator, newTokens[i]);
      if (!copy)
        return copy.takeError();
      Rows q = randomRows(rng, ScalarType::BF16,
                          size_t(newTokens[i]) * kHeads * kDim);
      Rows k = randomRows(rng, kvType, size_t(newTokens[i]) * kKVHeads * kDim);
      Rows v = randomRows(rng, kvType, size_t(newTokens[i]) * kKVHeads * kDim);
      qBytes.insert(qBytes.end(), q.bf16.begin(), q.bf16.end());
      kBytes.insert(kBytes.end(), k.bf16.begin(), k.bf16.end());
      vBytes.insert(vBytes.end(), v.bf16.begin(), v.bf16.end());
      r.k.insert(r.k.end(), k.values.begin(), k.values.end());
      r.v.insert(r.v.end(), v.values.begin(), v.values.end());
      prob.q.insert(prob.q.end(), q.values.begin(), q.values.end());
      prob.k.insert(prob.k.end(), r.k.begin(), r.k.end());
      prob.v.insert(prob.v.end(), r.v.begin(), r.v.end());
      prob.cuSeqlensQ.push_back(prob.cuSeqlensQ.back() + newTokens[i]);
      prob.cuSeqlensKV.push_back(prob.cuSeqlensKV.back() + int(r.tokens()));
      ScheduledRequest s;
      s.isPrefill = int(i) < numPrefills;
      s.queryLen = newTokens[i];
      s.contextLen = int32_t(context);
      s.pageTable = r.table.pages();
      scheduled.push_back(s);
    }
    std::vector<double> lse;
    ref::prefillReference(prob, expected, lse);
    // The previous step's kernels may still read q/k/v on this engine's
    // stream; an upload does not wait for other streams' work.
    if (llvm::Error error = stream->synchronize())
      return std::move(error);
    for (auto [buffer, bytes] :
         {std::pair{&q, &qBytes}, {&k, &kBytes}, {&v, &vBytes}})
      if (llvm::Error error =
              buffer->copyFromHost(bytes->data(), bytes->size() * 2))
        return std::move(error);
    return builder->build(scheduled, stream->get());
  }

  runtime::LayerArgs layer(int index = 0) const {
    runtime::LayerArgs a;
    a.q = q.ptr<void>();
    a.k = k.ptr<void>();
    a.v = v.ptr<void>();
    a.out = out.ptr<void>();
    runtime::bindCache(a, *cache, index);
    if (!sinks.empty())
      a.sinks = sinksBuffer.ptr<float>();
    std::copy(std::begin(aux), std::end(aux), std::begin(a.aux));
    return a;
  }

  /// The first `rows` output rows, decoded.
  llvm::Expected<std::vector<double>> output(int64_t rows) const {
    std::vector<uint8_t> bytes(size_t(rows) * kHeads * kDim * 2);
    if (llvm::Error error = stream->synchronize())
      return std::move(error);
    if (llvm::Error error = out.copyToHost(bytes.data(), bytes.size()))
      return std::move(error);
    return decodeAll(ScalarType::BF16, bytes);
  }

  // Sizes init() uses; a test may raise them first.
  int numPages = 256, maxTokens = 2048, maxPagesPerSeq = 64;
  ScalarType kvType = ScalarType::BF16;
  std::optional<runtime::KVCache> cache;
  std::optional<runtime::PageAllocator> allocator;
  runtime::MetadataLimits limits;
  std::optional<runtime::AttentionMetadataBuilder> builder;
  std::unique_ptr<runtime::Backend> backend;
  std::optional<runtime::Stream> stream;
  runtime::DeviceBuffer q, k, v, out;
  std::vector<float> sinks; ///< per q head; empty: none
  runtime::DeviceBuffer sinksBuffer;
  const check::TestModifiers *modifiers = nullptr;
  std::vector<runtime::DeviceBuffer> auxBuffers;
  AuxTable aux[kMaxAuxTables] = {};
};

/// Step 1 prefills three prompts; step 2 continues one prompt by a chunk
/// and decodes the other two (chunked prefill with decodes in one call);
/// step 3 decodes all three. Each step's output against the reference.
void runMixedSteps(Engine &engine) {
  std::mt19937 rng(11);
  std::vector<Request> requests(3);
  std::vector<double> expected;
  for (auto [newTokens, numPrefills] :
       {std::pair{std::vector<int>{300, 17, 64}, 3},
        {std::vector<int>{100, 1, 1}, 1},
        {std::vector<int>{1, 1, 1}, 0}}) {
    ATTN_ASSIGN_OR_FAIL(
        md, engine.step(requests, newTokens, numPrefills, rng, expected));
    ATTN_ASSIGN_OR_FAIL(plan, engine.backend->plan(md, engine.stream->get()));
    ATTN_ASSERT_OK(
        engine.backend->forward(plan, engine.layer(), engine.stream->get()));
    ATTN_ASSIGN_OR_FAIL(got, engine.output(md.numTokens()));
    EXPECT_LT(ref::relativeError(got, expected), 1e-2)
        << numPrefills << " prefills of " << md.batch();
  }
}

class BackendGpuTest : public ::testing::TestWithParam<ScalarType> {};

TEST_P(BackendGpuTest, MixedStepsMatchReference) {
  ATTN_REQUIRE_GPU();
  Engine engine;
  ATTN_ASSERT_OK(engine.init(GetParam()));
  runMixedSteps(engine);
}

// gpt-oss's attention sinks through the Backend: the same steps with a sink
// logit per q head in the mixed prefill+decode kernel.
TEST_P(BackendGpuTest, MixedStepsWithSinksMatchReference) {
  ATTN_REQUIRE_GPU();
  Engine engine;
  ATTN_ASSERT_OK(engine.init(GetParam(), /*numLayers=*/1, /*withSinks=*/true));
  runMixedSteps(engine);
}

// A programmable variant through the Backend: a document mask over an aux
// table of per-token ids [request, position], in the mixed prefill+decode
// kernel and the decode-only step (a decode's region sees its place in the
// step, after the prefills).
TEST_P(BackendGpuTest, MixedStepsWithDocumentMaskMatchReference) {
  ATTN_REQUIRE_GPU();
  std::mt19937 rng(5);
  // The three requests' lengths after runMixedSteps' last step.
  check::TestModifiers docs = check::documentMask(rng, {401, 19, 66});
  Engine engine;
  ATTN_ASSERT_OK(
      engine.init(GetParam(), /*numLayers=*/1, /*withSinks=*/false, &docs));
  runMixedSteps(engine);
}

// Parallel samples of one prompt: a 2048-token prefill forked into 16
// requests that share its pages; their decode steps run as a cascade (the
// plan says so) and match the reference over each request's history.
TEST(BackendCascadeGpuTest, DecodesOverASharedPromptRunAsCascade) {
  ATTN_REQUIRE_GPU();
  Engine engine;
  engine.numPages = 512;
  engine.maxTokens = 4096;
  engine.maxPagesPerSeq = 160;
  ATTN_ASSERT_OK(engine.init(ScalarType::BF16));
  std::mt19937 rng(21);
  std::vector<Request> prompt(1);
  std::vector<double> expected;
  ATTN_ASSIGN_OR_FAIL(md, engine.step(prompt, {2048}, 1, rng, expected));
  ATTN_ASSIGN_OR_FAIL(plan, engine.backend->plan(md, engine.stream->get()));
  EXPECT_FALSE(plan.cascade.has_value());
  ATTN_ASSERT_OK(
      engine.backend->forward(plan, engine.layer(), engine.stream->get()));
  ATTN_ASSIGN_OR_FAIL(got, engine.output(md.numTokens()));
  EXPECT_LT(ref::relativeError(got, expected), 1e-2);

  std::vector<Request> samples(16);
  for (Request &r : samples) {
    ATTN_ASSIGN_OR_FAIL(forked, prompt[0].table.fork(*engine.allocator));
    r.table = std::move(forked);
    r.k = prompt[0].k;
    r.v = prompt[0].v;
  }
  for (int step = 0; step < 3; ++step) {
    ATTN_ASSIGN_OR_FAIL(
        dmd, engine.step(samples, std::vector<int>(16, 1), 0, rng, expected));
    ATTN_ASSIGN_OR_FAIL(dplan, engine.backend->plan(dmd, engine.stream->get()));
    ASSERT_TRUE(dplan.cascade.has_value()) << "step " << step;
    EXPECT_EQ(dplan.sharedPages, 128);
    ATTN_ASSERT_OK(
        engine.backend->forward(dplan, engine.layer(), engine.stream->get()));
    ATTN_ASSIGN_OR_FAIL(dgot, engine.output(dmd.numTokens()));
    EXPECT_LT(ref::relativeError(dgot, expected), 1e-2) << "step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Caches, BackendGpuTest,
                         ::testing::Values(ScalarType::BF16,
                                           ScalarType::F8E4M3),
                         [](const auto &info) {
                           return std::string(toString(info.param));
                         });

// Decode steps replayed from graphs captured at padded batch 8 equal the
// direct runs, over two layers, for batches smaller than the capture.
TEST(BackendGraphGpuTest, ReplayEqualsDirectRun) {
  ATTN_REQUIRE_GPU();
  constexpr int kLayers = 2;
  Engine direct, graphed;
  ATTN_ASSERT_OK(direct.init(ScalarType::BF16, kLayers));
  ATTN_ASSERT_OK(graphed.init(ScalarType::BF16, kLayers));
  auto forwardAll = [](Engine &e) {
    return [&e](const runtime::StepPlan &plan, CUstream stream) -> llvm::Error {
      for (int l = 0; l < kLayers; ++l)
        if (llvm::Error error = e.backend->forward(plan, e.layer(l), stream))
          return error;
      return llvm::Error::success();
    };
  };
  // Capture with 8 padded one-token decodes over one page each.
  {
    std::vector<Request> padding(8);
    std::mt19937 rng(1);
    std::vector<double> unused;
    ATTN_ASSIGN_OR_FAIL(
        md, graphed.step(padding, std::vector<int>(8, 1), 0, rng, unused));
    ATTN_ASSERT_OK(graphed.backend->captureGraph(md, forwardAll(graphed),
                                                 graphed.stream->get()));
    for (Request &r : padding)
      ATTN_ASSERT_OK(r.table.release(*graphed.allocator));
  }
  ASSERT_EQ(graphed.backend->graphSizes().size(), 1u);
  EXPECT_EQ(graphed.backend->graphSizes()[0].first, 8);

  // Same prompts in both engines, then decode steps: direct vs replayed.
  std::mt19937 rngDirect(5), rngGraphed(5);
  std::vector<Request> a(5), b(5);
  std::vector<double> expectedA, expectedB;
  std::vector<int> prompts = {40, 200, 16, 17, 90};
  for (auto [engine, requests, rng, expected] :
       {std::tuple{&direct, &a, &rngDirect, &expectedA},
        {&graphed, &b, &rngGraphed, &expectedB}}) {
    ATTN_ASSIGN_OR_FAIL(md,
                        engine->step(*requests, prompts, 5, *rng, *expected));
    ATTN_ASSIGN_OR_FAIL(plan, engine->backend->plan(md, engine->stream->get()));
    ATTN_ASSERT_OK(forwardAll(*engine)(plan, engine->stream->get()));
  }
  for (int stepIndex = 0; stepIndex < 3; ++stepIndex) {
    std::vector<int> ones(5, 1);
    ATTN_ASSIGN_OR_FAIL(mdA, direct.step(a, ones, 0, rngDirect, expectedA));
    ATTN_ASSIGN_OR_FAIL(planA, direct.backend->plan(mdA, direct.stream->get()));
    ATTN_ASSERT_OK(forwardAll(direct)(planA, direct.stream->get()));
    ATTN_ASSIGN_OR_FAIL(mdB, graphed.step(b, ones, 0, rngGraphed, expectedB));
    ATTN_ASSIGN_OR_FAIL(
        replayed, graphed.backend->replayGraph(mdB, graphed.stream->get()));
    ASSERT_TRUE(replayed);
    ATTN_ASSIGN_OR_FAIL(outA, direct.output(5));
    ATTN_ASSIGN_OR_FAIL(outB, graphed.output(5));
    EXPECT_EQ(outA, outB) << "step " << stepIndex;
    EXPECT_LT(ref::relativeError(outB, expectedB), 1e-2)
        << "step " << stepIndex;
  }
}

// The profiling run attends within the step's rows, with no cache.
TEST(BackendNoCacheGpuTest, ProfilingRunMatchesReference) {
  ATTN_REQUIRE_GPU();
  Engine engine;
  ATTN_ASSERT_OK(engine.init(ScalarType::BF16));
  std::mt19937 rng(3);
  std::vector<Request> requests(2);
  std::vector<double> expected;
  ATTN_ASSIGN_OR_FAIL(md, engine.step(requests, {500, 33}, 2, rng, expected));
  ATTN_ASSIGN_OR_FAIL(
      plan, engine.backend->planWithoutCache(md, engine.stream->get()));
  ATTN_ASSERT_OK(engine.backend->forwardWithoutCache(plan, engine.layer(),
                                                     engine.stream->get()));
  ATTN_ASSIGN_OR_FAIL(got, engine.output(md.numTokens()));
  EXPECT_LT(ref::relativeError(got, expected), 1e-2);
}

/// q rows attend to their request's `kv` rows (no mask): the reference of
/// encoder and cross attention.
std::vector<double> unmaskedReference(const std::vector<int> &qLens,
                                      const std::vector<int> &kvLens,
                                      const std::vector<double> &q,
                                      const std::vector<double> &k,
                                      const std::vector<double> &v) {
  ref::PrefillProblem prob;
  prob.numQHeads = kHeads;
  prob.numKVHeads = kKVHeads;
  prob.headDim = kDim;
  prob.scale = 1.0 / std::sqrt(double(kDim));
  prob.cuSeqlensQ = {0};
  prob.cuSeqlensKV = {0};
  for (size_t b = 0; b < qLens.size(); ++b) {
    prob.cuSeqlensQ.push_back(prob.cuSeqlensQ.back() + qLens[b]);
    prob.cuSeqlensKV.push_back(prob.cuSeqlensKV.back() + kvLens[b]);
  }
  prob.q = q;
  prob.k = k;
  prob.v = v;
  std::vector<double> out, lse;
  ref::prefillReference(prob, out, lse);
  return out;
}

llvm::Expected<runtime::DeviceBuffer>
uploadRows(const std::vector<uint16_t> &rows) {
  auto buffer =
      runtime::DeviceBuffer::allocate(std::max<size_t>(rows.size() * 2, 2));
  if (buffer)
    if (llvm::Error error = buffer->copyFromHost(rows.data(), rows.size() * 2))
      return std::move(error);
  return buffer;
}

// Encoder attention: bidirectional over each request's rows, no cache.
TEST(BackendEncoderGpuTest, MatchesReference) {
  ATTN_REQUIRE_GPU();
  runtime::MetadataLimits limits;
  limits.pageSize = 1024; // one (unused) page covers a request: no cache
  limits.maxBatch = 4;
  limits.maxTokens = 1024;
  limits.maxPagesPerSeq = 1;
  runtime::BackendConfig config;
  config.kind = AttentionKind::Encoder;
  config.numQHeads = kHeads;
  config.numKVHeads = kKVHeads;
  config.headDim = kDim;
  ATTN_ASSIGN_OR_FAIL(
      backend,
      runtime::Backend::create(config, Jit::global().kernelSource(), limits));
  std::vector<int> lens = {300, 17, 64};
  std::vector<ScheduledRequest> requests;
  std::vector<int32_t> noPages = {0};
  for (int len : lens) {
    ScheduledRequest r;
    r.isPrefill = true;
    r.queryLen = len;
    r.pageTable = noPages; // an encoder reads no cache
    requests.push_back(r);
  }
  ATTN_ASSIGN_OR_FAIL(md, runtime::buildAttentionMetadata(requests, limits));
  std::mt19937 rng(21);
  int64_t tokens = md.numTokens();
  Rows q = randomRows(rng, ScalarType::BF16, size_t(tokens) * kHeads * kDim);
  Rows k = randomRows(rng, ScalarType::BF16, size_t(tokens) * kKVHeads * kDim);
  Rows v = randomRows(rng, ScalarType::BF16, size_t(tokens) * kKVHeads * kDim);
  ATTN_ASSIGN_OR_FAIL(dq, uploadRows(q.bf16));
  ATTN_ASSIGN_OR_FAIL(dk, uploadRows(k.bf16));
  ATTN_ASSIGN_OR_FAIL(dv, uploadRows(v.bf16));
  ATTN_ASSIGN_OR_FAIL(dout, runtime::DeviceBuffer::allocate(q.bf16.size() * 2));
  ATTN_ASSIGN_OR_FAIL(stream, runtime::Stream::create());
  ATTN_ASSIGN_OR_FAIL(plan, backend->plan(md, stream.get()));
  runtime::LayerArgs layer;
  layer.q = dq.ptr<void>();
  layer.k = dk.ptr<void>();
  layer.v = dv.ptr<void>();
  layer.out = dout.ptr<void>();
  ATTN_ASSERT_OK(backend->forward(plan, layer, stream.get()));
  std::vector<uint8_t> bytes(q.bf16.size() * 2);
  ATTN_ASSERT_OK(stream.synchronize());
  ATTN_ASSERT_OK(dout.copyToHost(bytes.data(), bytes.size()));
  EXPECT_LT(ref::relativeError(
                decodeAll(ScalarType::BF16, bytes),
                unmaskedReference(lens, lens, q.values, k.values, v.values)),
            1e-2);
}

// Encoder-decoder cross attention: at the step the encoders run, their K/V
// go into the cross cache and the prompts attend to them; a later decode
// step reads them from the cache only.
TEST(BackendCrossGpuTest, CachedEncoderMatchesReference) {
  ATTN_REQUIRE_GPU();
  runtime::KVCacheConfig cacheConfig;
  cacheConfig.numPages = 64;
  cacheConfig.numKVHeads = kKVHeads;
  cacheConfig.headDim = kDim;
  cacheConfig.dtype = ScalarType::F8E4M3;
  ATTN_ASSIGN_OR_FAIL(cache, runtime::KVCache::allocate(cacheConfig));
  runtime::MetadataLimits limits;
  limits.numPages = 64;
  limits.maxBatch = 4;
  limits.maxTokens = 512;
  limits.maxPagesPerSeq = 8;
  limits.maxEncoderTokens = 1024;
  limits.maxCrossPagesPerSeq = 32;
  runtime::BackendConfig config;
  config.kind = AttentionKind::Cross;
  config.numQHeads = kHeads;
  config.numKVHeads = kKVHeads;
  config.headDim = kDim;
  config.kvType = ScalarType::F8E4M3;
  ATTN_ASSIGN_OR_FAIL(
      backend, runtime::Backend::create(config, Jit::global().kernelSource(),
                                        limits, &cacheConfig));
  ATTN_ASSIGN_OR_FAIL(builder,
                      runtime::AttentionMetadataBuilder::create(limits));
  ATTN_ASSIGN_OR_FAIL(stream, runtime::Stream::create());

  // Two requests: encoders of 300 and 40 tokens (cross pages 0-18 and
  // 20-22), decoder prompts of 5 and 1 tokens (self pages unused here).
  std::vector<int> encoderLens = {300, 40};
  std::vector<std::vector<int32_t>> crossTables = {{}, {20, 21, 22}};
  for (int32_t b = 0; b < 19; ++b)
    crossTables[0].push_back(b);
  std::vector<int32_t> selfTable = {40};
  std::mt19937 rng(31);
  Rows ek = randomRows(rng, ScalarType::F8E4M3, size_t(340) * kKVHeads * kDim);
  Rows ev = randomRows(rng, ScalarType::F8E4M3, size_t(340) * kKVHeads * kDim);
  ATTN_ASSIGN_OR_FAIL(dek, uploadRows(ek.bf16));
  ATTN_ASSIGN_OR_FAIL(dev, uploadRows(ev.bf16));
  ATTN_ASSIGN_OR_FAIL(
      dq, runtime::DeviceBuffer::allocate(size_t(8) * kHeads * kDim * 2));
  ATTN_ASSIGN_OR_FAIL(
      dout, runtime::DeviceBuffer::allocate(size_t(8) * kHeads * kDim * 2));

  for (int stepIndex = 0; stepIndex < 2; ++stepIndex) {
    std::vector<int> qLens =
        stepIndex == 0 ? std::vector<int>{5, 1} : std::vector<int>{1, 1};
    std::vector<ScheduledRequest> requests(2);
    for (int b = 0; b < 2; ++b) {
      requests[b].isPrefill = stepIndex == 0;
      requests[b].queryLen = qLens[b];
      requests[b].contextLen =
          stepIndex == 0 ? 0 : (b == 0 ? 5 : 1); // step 0's prompts
      requests[b].pageTable = selfTable;
      requests[b].encoderLen = encoderLens[b];
      requests[b].crossPageTable = crossTables[b];
    }
    ATTN_ASSIGN_OR_FAIL(md, builder.build(requests, stream.get()));
    EXPECT_EQ(md.crossSlotMapping.size(), stepIndex == 0 ? 340u : 0u);
    int tokens = qLens[0] + qLens[1];
    Rows q = randomRows(rng, ScalarType::BF16, size_t(tokens) * kHeads * kDim);
    ATTN_ASSERT_OK(dq.copyFromHost(q.bf16.data(), q.bf16.size() * 2));
    ATTN_ASSIGN_OR_FAIL(plan, backend->plan(md, stream.get()));
    runtime::LayerArgs layer;
    layer.q = dq.ptr<void>();
    layer.out = dout.ptr<void>();
    if (stepIndex == 0) { // the encoders run now
      layer.k = dek.ptr<void>();
      layer.v = dev.ptr<void>();
    }
    runtime::bindCache(layer, cache, 0);
    ATTN_ASSERT_OK(backend->forward(plan, layer, stream.get()));
    std::vector<uint8_t> bytes(size_t(tokens) * kHeads * kDim * 2);
    ATTN_ASSERT_OK(stream.synchronize());
    ATTN_ASSERT_OK(dout.copyToHost(bytes.data(), bytes.size()));
    EXPECT_LT(ref::relativeError(decodeAll(ScalarType::BF16, bytes),
                                 unmaskedReference(qLens, encoderLens, q.values,
                                                   ek.values, ev.values)),
              1e-2)
        << "step " << stepIndex;
  }
}

} // namespace
