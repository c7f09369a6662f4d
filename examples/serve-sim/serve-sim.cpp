//===- serve-sim.cpp - continuous batching over attn's serving backend ----===//
//
//   serve-sim [--requests N] [--kv bf16|e4m3] [--pages N] [--seed S]
//             [--prompt-len N] [--samples] [--max-running N] [--graphs=false]
//             [--cascade=false]
//
// A small serving engine on the GPU: a stack of attention layers with random
// weights, requests arriving with different prompt lengths, prefills chunked
// under a token budget, decodes replayed from CUDA graphs, requests that
// share a prompt prefix forking its cached pages (copy-on-write of the
// shared partial page), and a KV cache small enough that requests are
// swapped out to host memory and back. Every step goes through
// runtime::Backend as an inference engine's forward would.
//
// --samples makes every request continue system prompt 0 (parallel samples
// of one long prompt); with --graphs=false its decode steps are planned, not
// replayed, so the Backend runs them as cascade attention where that pays
// (docs/backend.md): compare with --cascade=false.
//
// The model: token t at position p has x = emb[t] + pos(p); each layer's
// q, k, v are random projections of x (precomputed per token and per
// position, so the host does adds only); the next token is chosen from the
// last layer's attention output. Sampled output rows are checked against an
// fp64 reference over the request's whole history as the GPU chose it, and
// at the end every request must have all its tokens and every page must be
// back in the allocators: nothing lost, nothing corrupted. Prints
// throughput; exits 1 on any mismatch.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/serving/Backend.h"
#include "attn/runtime/serving/CacheOps.h"
#include "attn/runtime/serving/KVCache.h"
#include "attn/runtime/serving/PageAllocator.h"
#include "compiler/Jit/Jit.h"
#include "test/reference/Reference.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <random>

using namespace attn;
using runtime::AttentionMetadata;
using runtime::ScheduledRequest;

namespace {

llvm::cl::opt<int> numRequests("requests", llvm::cl::desc("requests to serve"),
                               llvm::cl::init(96));
llvm::cl::opt<std::string> kvName("kv",
                                  llvm::cl::desc("cache type: bf16 or e4m3"),
                                  llvm::cl::init("bf16"));
llvm::cl::opt<int> numPages("pages",
                            llvm::cl::desc("device cache pages (of 16 tokens)"),
                            llvm::cl::init(640));
llvm::cl::opt<unsigned> seed("seed", llvm::cl::desc("random seed"),
                             llvm::cl::init(1));
llvm::cl::opt<int> promptLen("prompt-len",
                             llvm::cl::desc("tokens of each system prompt"),
                             llvm::cl::init(200));
llvm::cl::opt<bool>
    samples("samples",
            llvm::cl::desc("every request continues system prompt 0"),
            llvm::cl::init(false));
llvm::cl::opt<int> maxRunning("max-running",
                              llvm::cl::desc("requests running at once"),
                              llvm::cl::init(48));
llvm::cl::opt<bool>
    useGraphs("graphs",
              llvm::cl::desc("replay decode-only steps from CUDA graphs"),
              llvm::cl::init(true));
llvm::cl::opt<bool>
    useCascade("cascade",
               llvm::cl::desc("let the Backend run shared-prefix decode "
                              "steps as cascade attention"),
               llvm::cl::init(true));

constexpr int kLayers = 4, kHeads = 8, kKVHeads = 2, kDim = 128, kPage = 16;
constexpr int kVocab = 512, kEmbed = 64;
constexpr int kQRow = kHeads * kDim, kKVRow = kKVHeads * kDim;
constexpr int kTokenBudget = 512;
constexpr int kMaxOwnPrompt = 700, kMaxOutput = 96;
constexpr int kGraphSizes[] = {1, 2, 4, 8, 16, 32, 48};
/// Positions the model knows: a system prompt, a request's own prompt and
/// its output, rounded up to whole pages.
int maxPositions() {
  return (promptLen + kMaxOwnPrompt + kMaxOutput + kPage - 1) / kPage * kPage;
}

[[noreturn]] void fail(const llvm::Twine &message) {
  llvm::errs() << "serve-sim: FAIL: " << message << "\n";
  std::exit(1);
}
template <class T> T check(llvm::Expected<T> value, const char *what) {
  if (!value)
    fail(llvm::Twine(what) + ": " + llvm::toString(value.takeError()));
  return std::move(*value);
}
void check(llvm::Error error, const char *what) {
  if (error)
    fail(llvm::Twine(what) + ": " + llvm::toString(std::move(error)));
}

/// Round to nearest even (the model's values are finite).
uint16_t toBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return uint16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
double fromBf16(uint16_t bits) { return ref::decode(ScalarType::BF16, bits); }

/// The model's projections: q/k/v of (token, position, layer) = per-token
/// row + per-position row, both random, rounded to bf16 once summed.
struct Model {
  std::vector<float> tokenQ, tokenK, tokenV; ///< [layer][vocab][row]
  std::vector<float> posQ, posK, posV;       ///< [layer][pos][row]
  ScalarType kvType;

  int maxPos;

  Model(std::mt19937 &rng, ScalarType kvType, int maxPos)
      : kvType(kvType), maxPos(maxPos) {
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> emb(size_t(kVocab) * kEmbed),
        pos(size_t(maxPos) * kEmbed);
    for (float &x : emb)
      x = normal(rng);
    for (int p = 0; p < maxPos; ++p)
      for (int i = 0; i < kEmbed; ++i)
        pos[size_t(p) * kEmbed + i] =
            0.5f * std::sin(p / std::pow(1000.f, float(i) / kEmbed) + i);
    auto project = [&](const std::vector<float> &in, int rows, int width) {
      std::vector<float> w(size_t(width) * kEmbed),
          out(size_t(kLayers) * rows * width);
      for (int l = 0; l < kLayers; ++l) {
        for (float &x : w)
          x = normal(rng) / std::sqrt(float(kEmbed));
        for (int r = 0; r < rows; ++r)
          for (int o = 0; o < width; ++o) {
            float sum = 0;
            for (int i = 0; i < kEmbed; ++i)
              sum += w[size_t(o) * kEmbed + i] * in[size_t(r) * kEmbed + i];
            out[(size_t(l) * rows + r) * width + o] = sum;
          }
      }
      return out;
    };
    tokenQ = project(emb, kVocab, kQRow);
    tokenK = project(emb, kVocab, kKVRow);
    tokenV = project(emb, kVocab, kKVRow);
    posQ = project(pos, maxPos, kQRow);
    posK = project(pos, maxPos, kKVRow);
    posV = project(pos, maxPos, kKVRow);
    cacheValue.resize(1 << 16);
    for (uint32_t bits = 0; bits < (1u << 16); ++bits) {
      double x = fromBf16(uint16_t(bits));
      cacheValue[bits] = kvType == ScalarType::BF16 || !std::isfinite(x)
                             ? x
                             : ref::decode(kvType, ref::encode(kvType, x));
    }
  }

  /// Row of q (width kQRow) or k / v (kKVRow) as the GPU gets it (bf16).
  void row(const std::vector<float> &tok, const std::vector<float> &posTable,
           int width, int layer, int token, int position, uint16_t *out) const {
    const float *a = &tok[(size_t(layer) * kVocab + token) * width];
    const float *b = &posTable[(size_t(layer) * maxPos + position) * width];
    for (int i = 0; i < width; ++i)
      out[i] = toBf16(a[i] + b[i]);
  }
  /// The value the cache holds for a k / v element (bf16, then the cache's
  /// type with scale 1), by table: the checks read millions per step.
  double cached(uint16_t bits) const { return cacheValue[bits]; }
  std::vector<double> cacheValue; ///< by bf16 bit pattern
};

struct Request {
  int id = 0;
  std::vector<int> tokens; ///< prompt, then generated tokens
  int promptLen = 0;
  int outputLen = 0; ///< tokens to generate
  int computed = 0;  ///< tokens whose K/V are in the cache
  int prefix = -1;   ///< shared-prefix request it forks, or -1
  runtime::PageTable table{kPage};
  bool swapped = false;
  std::vector<int32_t> hostPages; ///< while swapped out
  bool done() const {
    return int(tokens.size()) == promptLen + outputLen &&
           computed == int(tokens.size());
  }
};

/// fp64 attention of one query row of `r` (position `pos`) in `layer` over
/// its tokens 0..pos, for the check.
std::vector<double> referenceRow(const Model &m, const Request &r, int layer,
                                 int pos) {
  std::vector<uint16_t> row(kQRow), krow(kKVRow), vrow(kKVRow);
  m.row(m.tokenQ, m.posQ, kQRow, layer, r.tokens[pos], pos, row.data());
  ref::PrefillProblem prob;
  prob.numQHeads = kHeads;
  prob.numKVHeads = kKVHeads;
  prob.headDim = kDim;
  prob.cuSeqlensQ = {0, 1};
  prob.cuSeqlensKV = {0, pos + 1};
  prob.scale = 1.0 / std::sqrt(double(kDim));
  prob.causal = true;
  for (uint16_t x : row)
    prob.q.push_back(fromBf16(x));
  for (int p = 0; p <= pos; ++p) {
    m.row(m.tokenK, m.posK, kKVRow, layer, r.tokens[p], p, krow.data());
    m.row(m.tokenV, m.posV, kKVRow, layer, r.tokens[p], p, vrow.data());
    for (int i = 0; i < kKVRow; ++i) {
      prob.k.push_back(m.cached(krow[i]));
      prob.v.push_back(m.cached(vrow[i]));
    }
  }
  std::vector<double> out, lse;
  ref::prefillReference(prob, out, lse);
  return out;
}

int run() {
  const auto setupStart = std::chrono::steady_clock::now();
  ScalarType kvType = kvName == "e4m3" ? ScalarType::F8E4M3 : ScalarType::BF16;
  if (kvName != "e4m3" && kvName != "bf16")
    fail("--kv must be bf16 or e4m3");
  if (promptLen < 1 || promptLen > 65536)
    fail("--prompt-len must be in 1..65536");
  if (maxRunning < 1 || maxRunning > 1024)
    fail("--max-running must be in 1..1024");
  if (numRequests < 1)
    fail("--requests must be at least 1");
  check(runtime::initCuda(), "CUDA");
  Arch arch = check(runtime::currentDeviceArch(), "arch");
  std::mt19937 rng(seed);
  Model model(rng, kvType, maxPositions());

  // Cache, allocators, metadata, backend, cache ops.
  runtime::KVCacheConfig cacheConfig;
  cacheConfig.numLayers = kLayers;
  cacheConfig.numPages = numPages;
  cacheConfig.pageSize = kPage;
  cacheConfig.numKVHeads = kKVHeads;
  cacheConfig.headDim = kDim;
  cacheConfig.dtype = kvType;
  runtime::KVCache cache =
      check(runtime::KVCache::allocate(cacheConfig), "cache");
  runtime::KVCacheConfig hostConfig = cacheConfig;
  hostConfig.numPages = 4 * numPages;
  runtime::HostKVCache hostCache =
      check(runtime::HostKVCache::allocate(hostConfig), "host cache");
  runtime::PageAllocator device(numPages), host(int32_t(hostConfig.numPages));
  // Page 0 backs the padding rows of captured graphs; never handed out.
  int32_t paddingPage = check(device.allocate(1), "padding page")[0];
  runtime::MetadataLimits limits;
  limits.pageSize = kPage;
  limits.numPages = numPages;
  limits.maxBatch = maxRunning + 8;
  limits.maxTokens = kTokenBudget + maxRunning;
  limits.maxPagesPerSeq = maxPositions() / kPage;
  runtime::AttentionMetadataBuilder builder =
      check(runtime::AttentionMetadataBuilder::create(limits), "metadata");
  runtime::BackendConfig config;
  config.numQHeads = kHeads;
  config.numKVHeads = kKVHeads;
  config.headDim = kDim;
  config.kvType = kvType;
  config.pageSize = kPage;
  config.cascade = useCascade;
  std::unique_ptr<runtime::Backend> backend =
      check(runtime::Backend::create(config, Jit::global().kernelSource(),
                                     limits, &cacheConfig),
            "backend");
  runtime::CacheOps ops =
      check(runtime::CacheOps::create(runtime::KernelCache::global(), arch),
            "cache ops");
  runtime::Stream stream = check(runtime::Stream::create(), "stream");

  // Fixed per-layer q/k/v/out buffers (graphs replay the same addresses).
  const size_t maxRows = size_t(limits.maxTokens);
  std::vector<runtime::DeviceBuffer> q, k, v, out;
  for (int l = 0; l < kLayers; ++l) {
    q.push_back(
        check(runtime::DeviceBuffer::allocate(maxRows * kQRow * 2), "q"));
    k.push_back(
        check(runtime::DeviceBuffer::allocate(maxRows * kKVRow * 2), "k"));
    v.push_back(
        check(runtime::DeviceBuffer::allocate(maxRows * kKVRow * 2), "v"));
    out.push_back(
        check(runtime::DeviceBuffer::allocate(maxRows * kQRow * 2), "out"));
  }
  auto layerArgs = [&](int l) {
    runtime::LayerArgs a;
    a.q = q[l].ptr<void>();
    a.k = k[l].ptr<void>();
    a.v = v[l].ptr<void>();
    a.out = out[l].ptr<void>();
    runtime::bindCache(a, cache, l);
    return a;
  };
  auto forwardAll = [&](const runtime::StepPlan &plan,
                        CUstream s) -> llvm::Error {
    for (int l = 0; l < kLayers; ++l)
      if (llvm::Error error = backend->forward(plan, layerArgs(l), s))
        return error;
    return llvm::Error::success();
  };

  // Graphs of decode-only steps at padded batch sizes; padding rows decode
  // one token of the padding page.
  std::vector<int32_t> paddingTable = {paddingPage};
  for (int size : kGraphSizes) {
    if (!useGraphs || size > maxRunning)
      break;
    std::vector<ScheduledRequest> padded(size);
    for (ScheduledRequest &r : padded) {
      r.queryLen = 1;
      r.pageTable = paddingTable;
    }
    AttentionMetadata md =
        check(builder.build(padded, stream.get()), "padded metadata");
    check(backend->captureGraph(md, forwardAll, stream.get()), "capture");
  }
  size_t graphBytes = 0;
  std::string graphMemory; // per captured size, for the report
  for (auto [size, bytes] : backend->graphSizes()) {
    graphBytes += bytes;
    graphMemory += llvm::formatv(
        "{0}{1}: {2} KiB", graphMemory.empty() ? "" : ", ", size, bytes / 1024);
  }

  // Requests: prompts of 16-700 tokens, 16-96 generated; every fourth (with
  // --samples every one) continues one of two shared system prompts (prefix
  // requests 0 and 1; with --samples always 0).
  std::vector<Request> requests(numRequests + 2);
  std::uniform_int_distribution<int> tokenDist(0, kVocab - 1),
      promptDist(16, kMaxOwnPrompt), outputDist(16, kMaxOutput);
  for (int i = 0; i < int(requests.size()); ++i) {
    Request &r = requests[i];
    r.id = i;
    bool isPrefix = i < 2;
    if (samples)
      r.prefix = isPrefix ? -1 : 0;
    else
      r.prefix = !isPrefix && i % 4 == 0 ? (i / 4) % 2 : -1;
    int own = isPrefix ? int(promptLen) : promptDist(rng);
    if (r.prefix >= 0)
      r.tokens = requests[r.prefix].tokens;
    for (int t = 0; t < own; ++t)
      r.tokens.push_back(tokenDist(rng));
    r.promptLen = int(r.tokens.size());
    r.outputLen = isPrefix ? 0 : outputDist(rng);
  }

  std::deque<int> waiting;
  for (int i = 0; i < int(requests.size()); ++i)
    waiting.push_back(i);
  std::vector<int> running; // admission order
  int64_t prefillTokens = 0, decodeTokens = 0, steps = 0, graphSteps = 0,
          cascadeSteps = 0, swapOuts = 0, swapIns = 0, swappedPages = 0,
          cowCopies = 0, checks = 0;
  double maxError = 0, checkSeconds = 0;
  std::uniform_real_distribution<double> unit(0, 1);

  // Swaps the most recently admitted request (not a shared prefix) out.
  auto preemptOne = [&]() -> bool {
    for (auto it = running.rbegin(); it != running.rend(); ++it) {
      Request &r = requests[*it];
      if (r.id < 2 || r.table.pages().empty())
        continue;
      // The pages holding computed tokens go to the host; pages grown for
      // this step hold nothing yet.
      int32_t used = int32_t((r.computed + kPage - 1) / kPage);
      std::vector<int32_t> hostPages = check(host.allocate(used), "host pages");
      std::vector<runtime::PagePair> pairs;
      for (size_t b = 0; b < hostPages.size(); ++b)
        pairs.push_back({r.table.pages()[b], hostPages[b]});
      check(cache.swapOut(pairs, hostCache, stream.get()), "swap out");
      check(stream.synchronize(), "swap out");
      check(r.table.release(device), "release");
      r.hostPages = std::move(hostPages);
      r.swapped = true;
      swappedPages += int64_t(pairs.size());
      ++swapOuts;
      int id = *it;
      running.erase(std::next(it).base());
      waiting.push_front(id);
      return true;
    }
    return false;
  };
  // Room for `n` more tokens of `r`, swapping requests out while needed;
  // false when none is left to swap, true without room when `r` itself was
  // swapped out (the caller skips it).
  auto grow = [&](Request &r, int n) -> bool {
    while (true) {
      auto copy = r.table.append(device, n);
      if (copy) {
        if (*copy) {
          runtime::PagePair pair{(*copy)->src, (*copy)->dst};
          check(ops.copyPages(cache, pair, stream.get()), "copy pages");
          ++cowCopies;
        }
        return true;
      }
      llvm::consumeError(copy.takeError());
      if (!preemptOne())
        return false;
      // `r` itself went to the host: it grows when it comes back (pages
      // taken now would sit before its swapped-in ones).
      if (r.swapped)
        return true;
    }
  };

  auto start = std::chrono::steady_clock::now();
  llvm::errs() << llvm::formatv(
      "serve-sim: model, cache, kernels and graphs ready in {0:F1} s\n",
      std::chrono::duration<double>(start - setupStart).count());
  auto lastReport = start;
  while (!waiting.empty() || !running.empty()) {
    // A line on stderr every few seconds: long runs do not look hung.
    if (std::chrono::steady_clock::now() - lastReport >
        std::chrono::seconds(5)) {
      lastReport = std::chrono::steady_clock::now();
      int finished = 0;
      for (const Request &r : requests)
        finished += r.id >= 2 && r.done();
      llvm::errs() << llvm::formatv(
          "serve-sim: step {0}: {1} running, {2} waiting, "
          "{3} of {4} requests done\n",
          steps, running.size(), waiting.size(), finished, int(numRequests));
    }
    // Admit: swapped requests first (swap in), then new ones.
    while (!waiting.empty() && int(running.size()) < maxRunning) {
      Request &r = requests[waiting.front()];
      if (r.prefix >= 0 &&
          requests[r.prefix].computed < requests[r.prefix].promptLen)
        break; // its system prompt is not cached yet
      int32_t need = int32_t(r.swapped ? r.hostPages.size()
                                       : (promptLen + kPage) / kPage + 2);
      if (device.numFree() < need + 8)
        break;
      if (r.swapped) {
        check(r.table.append(device, r.computed).takeError(), "swap-in pages");
        std::vector<runtime::PagePair> pairs;
        for (size_t b = 0; b < r.hostPages.size(); ++b)
          pairs.push_back({r.hostPages[b], r.table.pages()[b]});
        check(cache.swapIn(pairs, hostCache, stream.get()), "swap in");
        check(host.free(r.hostPages), "host free");
        r.hostPages.clear();
        r.swapped = false;
        ++swapIns;
      } else if (r.prefix >= 0) {
        r.table = check(requests[r.prefix].table.fork(device), "fork prefix");
        r.computed = requests[r.prefix].promptLen;
      }
      running.push_back(waiting.front());
      waiting.pop_front();
    }

    // Schedule: decodes (one token each), then prefill chunks in budget.
    std::vector<int> decodes, prefills;
    std::vector<int> chunk;
    int budget = kTokenBudget;
    for (int id : std::vector<int>(running)) {
      Request &r = requests[id];
      if (r.computed >= r.promptLen && !r.done() &&
          std::find(running.begin(), running.end(), id) != running.end()) {
        if (!grow(r, 1))
          fail("cannot fit one decode token");
        if (std::find(running.begin(), running.end(), id) != running.end())
          decodes.push_back(id);
        --budget;
      }
    }
    for (int id : std::vector<int>(running)) {
      Request &r = requests[id];
      if (r.computed >= r.promptLen || budget <= 0 ||
          std::find(running.begin(), running.end(), id) == running.end())
        continue;
      int n = std::min(budget, r.promptLen - r.computed);
      if (!grow(r, n))
        break;
      if (std::find(running.begin(), running.end(), id) == running.end())
        continue;
      prefills.push_back(id);
      chunk.push_back(n);
      budget -= n;
    }
    // A preemption may have swapped out a request scheduled earlier.
    auto isRunning = [&](int id) {
      return std::find(running.begin(), running.end(), id) != running.end();
    };
    decodes.erase(std::remove_if(decodes.begin(), decodes.end(),
                                 [&](int id) { return !isRunning(id); }),
                  decodes.end());
    for (size_t i = prefills.size(); i-- > 0;)
      if (!isRunning(prefills[i])) {
        prefills.erase(prefills.begin() + i);
        chunk.erase(chunk.begin() + i);
      }
    if (decodes.empty() && prefills.empty()) {
      if (running.empty() && !waiting.empty() && !preemptOne())
        fail("no request can run: the cache is too small");
      continue;
    }

    // The step's rows: prefill chunks first, then decodes.
    std::vector<ScheduledRequest> scheduled;
    std::vector<std::pair<int, int>> rows; // (request, position) per row
    for (size_t i = 0; i < prefills.size(); ++i) {
      Request &r = requests[prefills[i]];
      ScheduledRequest s;
      s.isPrefill = true;
      s.queryLen = chunk[i];
      s.contextLen = r.computed;
      s.pageTable = r.table.pages();
      scheduled.push_back(s);
      for (int p = r.computed; p < r.computed + chunk[i]; ++p)
        rows.push_back({r.id, p});
    }
    for (int id : decodes) {
      Request &r = requests[id];
      ScheduledRequest s;
      s.queryLen = 1;
      s.contextLen = r.computed;
      s.pageTable = r.table.pages();
      scheduled.push_back(s);
      rows.push_back({r.id, r.computed});
    }
    std::vector<uint16_t> hq(rows.size() * kQRow), hk(rows.size() * kKVRow),
        hv(rows.size() * kKVRow);
    for (int l = 0; l < kLayers; ++l) {
      for (size_t i = 0; i < rows.size(); ++i) {
        const Request &r = requests[rows[i].first];
        int p = rows[i].second;
        model.row(model.tokenQ, model.posQ, kQRow, l, r.tokens[p], p,
                  &hq[i * kQRow]);
        model.row(model.tokenK, model.posK, kKVRow, l, r.tokens[p], p,
                  &hk[i * kKVRow]);
        model.row(model.tokenV, model.posV, kKVRow, l, r.tokens[p], p,
                  &hv[i * kKVRow]);
      }
      check(q[l].copyFromHost(hq.data(), hq.size() * 2), "q");
      check(k[l].copyFromHost(hk.data(), hk.size() * 2), "k");
      check(v[l].copyFromHost(hv.data(), hv.size() * 2), "v");
    }
    AttentionMetadata md =
        check(builder.build(scheduled, stream.get()), "metadata");
    bool replayed = useGraphs && prefills.empty() &&
                    check(backend->replayGraph(md, stream.get()), "replay");
    if (!replayed) {
      runtime::StepPlan plan = check(backend->plan(md, stream.get()), "plan");
      cascadeSteps += plan.cascade.has_value();
      check(forwardAll(plan, stream.get()), "forward");
    }
    graphSteps += replayed;
    ++steps;

    // Read the last layer's output: tokens to sample, rows to check.
    std::vector<uint16_t> hout(rows.size() * kQRow);
    check(stream.synchronize(), "step");
    check(out[kLayers - 1].copyToHost(hout.data(), hout.size() * 2), "out");
    for (size_t i = 0; i < rows.size(); ++i) {
      Request &r = requests[rows[i].first];
      int p = rows[i].second;
      r.computed = p + 1;
      bool lastPrompt = p + 1 == r.promptLen, decoding = p + 1 > r.promptLen;
      (lastPrompt || decoding) ? ++decodeTokens : ++prefillTokens;
      if ((lastPrompt || decoding) &&
          int(r.tokens.size()) < r.promptLen + r.outputLen) {
        // Next token: the argmax of head 0's first 64 outputs, mixed with
        // the current token.
        int best = 0;
        for (int j = 1; j < 64; ++j)
          if (fromBf16(hout[i * kQRow + j]) > fromBf16(hout[i * kQRow + best]))
            best = j;
        r.tokens.push_back((best * 7 + r.tokens[p]) % kVocab);
      }
      if (unit(rng) < 16.0 / double(rows.size() + 16)) { // a few rows per step
        auto t0 = std::chrono::steady_clock::now();
        std::vector<double> expected = referenceRow(model, r, kLayers - 1, p);
        std::vector<double> got(kQRow);
        for (int j = 0; j < kQRow; ++j)
          got[j] = fromBf16(hout[i * kQRow + j]);
        double error = ref::relativeError(got, expected);
        maxError = std::max(maxError, error);
        ++checks;
        if (!(error < 2e-2))
          fail(llvm::formatv(
              "request {0} position {1}: relative error {2} against "
              "the fp64 reference (step {3})",
              r.id, p, error, steps));
        checkSeconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                .count();
      }
    }
    // Finished requests give their pages back (system prompts stay).
    for (size_t i = 0; i < running.size();) {
      Request &r = requests[running[i]];
      if (r.id >= 2 && r.done()) {
        check(r.table.release(device), "release");
        running.erase(running.begin() + i);
      } else {
        ++i;
      }
    }
    if (running.size() == 2 && waiting.empty() && requests[0].done() &&
        requests[1].done())
      break; // only the system prompts are left
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count() -
      checkSeconds;

  // Nothing lost: every request complete; every page back.
  for (const Request &r : requests)
    if (!r.done())
      fail(llvm::formatv("request {0} has {1} of {2} tokens", r.id,
                         r.tokens.size(), r.promptLen + r.outputLen));
  for (int id : {0, 1})
    check(requests[id].table.release(device), "release prefix");
  if (device.numFree() != numPages - 1 || host.numFree() != host.numPages())
    fail(llvm::formatv(
        "pages leaked: {0} of {1} device and {2} of {3} host pages free",
        device.numFree(), numPages - 1, host.numFree(), host.numPages()));

  llvm::outs() << llvm::formatv(
      "serve-sim: {0} requests, {1} layers x {2}/{3} heads x {4}, {5} cache of "
      "{6} "
      "pages x {7} tokens, {8}; system prompts of {9} tokens{10}\n",
      numRequests, kLayers, kHeads, kKVHeads, kDim, toString(kvType),
      int(numPages), kPage, toString(arch), int(promptLen),
      samples ? ", every request continues prompt 0" : "");
  llvm::outs() << llvm::formatv(
      "  {0} steps ({1} replayed from graphs, {2:F1} MiB for all graphs; {3} "
      "run "
      "as cascade attention), {4} swap-outs ({5} pages) and {6} swap-ins, {7} "
      "copy-on-write page copies\n",
      steps, graphSteps, graphBytes / double(1 << 20), cascadeSteps, swapOuts,
      swappedPages, swapIns, cowCopies);
  llvm::outs() << "  graph memory by padded batch size: " << graphMemory
               << "; the workspaces they share: "
               << llvm::formatv("{0:F1} MiB\n",
                                backend->workspaceBytes() / double(1 << 20));
  llvm::outs() << llvm::formatv(
      "  {0} prompt + {1} generated tokens in {2:F2} s: {3:F0} tokens/s "
      "({4:F0} generated tokens/s); checks excluded\n",
      prefillTokens, decodeTokens, seconds,
      (prefillTokens + decodeTokens) / seconds, decodeTokens / seconds);
  llvm::outs() << llvm::formatv(
      "  {0} output rows checked against the fp64 reference: worst relative "
      "error "
      "{1:E2}; every request complete, every page returned: PASS\n",
      checks, maxError);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "serve-sim: continuous batching on attn\n");
  return run();
}
