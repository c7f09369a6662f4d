//===- attn-bench.cpp - attn kernel benchmarks ----------------------------===//
//
//   attn-bench decode [--json] [--quick]   decode GB/s vs. measured read BW
//   (either with --sinks: every variant has attention sinks)
//   attn-bench prefill [--json] [--quick]  ragged and paged prefill TFLOP/s
//   attn-bench prefill --tp-chunks         chunked prefill, TP head counts
//   attn-bench jit [--json]                compile, cache and launch overheads
//   attn-bench mla [--json] [--quick]      MLA decode GB/s and TFLOP/s
//
// Decode: the device's read-only bandwidth is measured in the same run (a
// kernel streaming 16-byte loads over 4 GiB), then each config is timed as a
// CUDA graph of back-to-back decode calls that rotate over enough KV-cache
// copies to keep the data several times the L2; the median of repeats is
// reported. Bytes = K and V read (each cached token once per KV head) plus q
// and out.
//
// Prefill: bf16, 16k query tokens per batch (1k x 16, 4k x 4, 16k x 1), each
// request attending to itself; each config is timed with events around
// single calls (a few ms each, so launch gaps do not matter and no graph is
// needed), rotating over copies of q/k/v/out when one copy is smaller than
// 4x the L2; the median of repeats is reported. FLOPs = 4 * batch * heads *
// seq^2 * head_dim (QK^T and PV), halved for causal, as FlashAttention counts
// them; bench/sdpa.py compares the JSON with PyTorch's SDPA backends. Each
// config is also timed as a paged prefill over a page-16 NHD cache (bf16 and
// e4m3) holding the same keys on shuffled pages.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/serving/Backend.h"
#include "attn/runtime/support/Error.h"
#include "attn/runtime/support/Nvrtc.h"
#include "compiler/Jit/Jit.h"
#include "spec/KernelLimits.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace attn;
using namespace attn::runtime;

namespace {

constexpr size_t kL2Bytes = 60ull << 20;

#define BENCH_CHECK(expr)                                                      \
  do {                                                                         \
    if (llvm::Error benchErr = (expr)) {                                       \
      llvm::errs() << "attn-bench: " << llvm::toString(std::move(benchErr))    \
                   << "\n";                                                    \
      std::exit(1);                                                            \
    }                                                                          \
  } while (false)

/// Success, or the driver's error for a failed call.
llvm::Error checkCu(CUresult result, const char *call) {
  return result == CUDA_SUCCESS ? llvm::Error::success()
                                : cudaError(result, call);
}

template <class T> T unwrap(llvm::Expected<T> value) {
  if (!value) {
    llvm::errs() << "attn-bench: " << llvm::toString(value.takeError()) << "\n";
    std::exit(1);
  }
  return std::move(*value);
}

bool haveGpu() {
  if (llvm::Error err = initCuda()) {
    llvm::consumeError(std::move(err));
    return false;
  }
  return true;
}

llvm::Error sync() {
  ATTN_CU_CHECK(cuCtxSynchronize());
  return llvm::Error::success();
}

/// Median of event-timed repeats of `launch` (which enqueues on `stream`), in
/// milliseconds.
template <class F> double timeMedian(CUstream stream, int repeats, F &&launch) {
  Event start = unwrap(Event::create()), stop = unwrap(Event::create());
  std::vector<float> times;
  for (int i = 0; i < repeats; ++i) {
    BENCH_CHECK(checkCu(cuEventRecord(start.get(), stream), "cuEventRecord"));
    launch();
    BENCH_CHECK(checkCu(cuEventRecord(stop.get(), stream), "cuEventRecord"));
    BENCH_CHECK(checkCu(cuEventSynchronize(stop.get()), "cuEventSynchronize"));
    float ms = 0;
    BENCH_CHECK(checkCu(cuEventElapsedTime(&ms, start.get(), stop.get()),
                        "cuEventElapsedTime"));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

//===----------------------------------------------------------------------===//
// Read bandwidth ceiling
//===----------------------------------------------------------------------===//

const char *kReadBandwidthSource = R"cuda(
extern "C" __global__ void __launch_bounds__(512)
attn_bench_read(const uint4 *data, unsigned long long n, unsigned *sink) {
  unsigned acc = 0;
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  // Four independent 16-byte loads in flight per iteration.
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 a = __ldcs(data + i), b = __ldcs(data + i + stride);
    uint4 c = __ldcs(data + i + 2 * stride), d = __ldcs(data + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^
           c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    uint4 a = __ldcs(data + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x12345678u) *sink = acc; // keeps the loads alive
}

// A streaming copy, 16 bytes per thread per step: the read + write ceiling.
extern "C" __global__ void __launch_bounds__(512)
attn_bench_copy(const uint4 *src, uint4 *dst, unsigned long long n) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
       i < n; i += stride)
    __stcs(dst + i, __ldcs(src + i));
}

// Pseudo-random words with the bits in `keep` from a hash and `set` forced:
// finite values of a chosen magnitude in any 8- or 16-bit float format.
extern "C" __global__ void attn_bench_fill(unsigned *data, unsigned long long n,
                                           unsigned keep, unsigned set) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
       i < n; i += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 0x9e3779b9u;
    h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16;
    data[i] = (h & keep) | set;
  }
}
)cuda";

/// The bench's helper kernels, compiled once.
struct BenchKernels {
  CudaLibrary library;
  CUkernel read, fill, copy;
};

BenchKernels &benchKernels(Arch arch) {
  static BenchKernels kernels = [&] {
    std::string cubin =
        unwrap(compileToCubin(kReadBandwidthSource, "attn_bench", arch));
    CudaLibrary library = unwrap(CudaLibrary::load(cubin));
    CUkernel read = unwrap(library.getKernel("attn_bench_read"));
    CUkernel fill = unwrap(library.getKernel("attn_bench_fill"));
    CUkernel copy = unwrap(library.getKernel("attn_bench_copy"));
    return BenchKernels{std::move(library), read, fill, copy};
  }();
  return kernels;
}

/// Fills `buffer` with random finite values of `type` (never zeros).
void fillRandom(DeviceBuffer &buffer, ScalarType type, Arch arch,
                CUstream stream) {
  // bf16/f16: sign, exponent fixed near 1, random mantissa; FP8 likewise
  // byte by byte (e4m3 0x30-0x37 / e5m2 0x38-0x3b are about 0.5 to 1).
  unsigned keep = 0x807f807fu, set = 0x3f003f00u;
  if (type == ScalarType::F16)
    keep = 0x83ff83ffu, set = 0x38003800u;
  else if (type == ScalarType::F8E4M3)
    keep = 0x87878787u, set = 0x30303030u;
  else if (type == ScalarType::F8E5M2)
    keep = 0x83838383u, set = 0x38383838u;
  unsigned long long n = buffer.size() / 4;
  CUdeviceptr ptr = buffer.get();
  void *args[] = {&ptr, &n, &keep, &set};
  BENCH_CHECK(checkCu(
      cuLaunchKernel(reinterpret_cast<CUfunction>(benchKernels(arch).fill),
                     1024, 1, 1, 256, 1, 1, 0, stream, args, nullptr),
      "cuLaunchKernel(fill)"));
}

/// Bytes per second of a read-only stream over 4 GiB of random data.
double measureReadBandwidth(Arch arch, CUstream stream) {
  CUkernel kernel = benchKernels(arch).read;
  const size_t bytes = 4ull << 30;
  DeviceBuffer data = unwrap(DeviceBuffer::allocate(bytes));
  DeviceBuffer sink = unwrap(DeviceBuffer::allocate(4));
  fillRandom(data, ScalarType::BF16, arch, stream);
  CUdevice device;
  BENCH_CHECK(checkCu(cuCtxGetDevice(&device), "cuCtxGetDevice"));
  int sms = 0;
  BENCH_CHECK(
      checkCu(cuDeviceGetAttribute(
                  &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
              "attr"));
  unsigned long long n = bytes / 16;
  CUdeviceptr ptr = data.get(), sinkPtr = sink.get();
  void *args[] = {&ptr, &n, &sinkPtr};
  auto launch = [&] {
    BENCH_CHECK(
        checkCu(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), sms * 4, 1,
                               1, 512, 1, 1, 0, stream, args, nullptr),
                "cuLaunchKernel"));
  };
  launch();
  BENCH_CHECK(sync());
  double ms = timeMedian(stream, 20, launch);
  return bytes / (ms * 1e-3);
}

//===----------------------------------------------------------------------===//
// Decode
//===----------------------------------------------------------------------===//

struct DecodeConfig {
  int batch, context, numKVHeads;
  ScalarType kvType;
  int numQHeads = 32;
  int queryLen = 1; ///< 1, or 1 + draft tokens (speculative decoding)
};

struct DecodeResult {
  DecodeConfig config;
  std::string kernel;
  double us, gbps, fractionOfRead;
  int chunkTokens;
  double bytes = 0; ///< read and written per call: K, V, q and out
};

/// A schedule pinned with --schedule, instead of attn-select-schedule's.
std::optional<DecodeSchedule> pinnedSchedule;
/// The one config --only selects (e.g. for a profiler run).
std::optional<DecodeConfig> onlyConfig;
/// --sinks: every decode and prefill variant has attention sinks (one
/// logit per q head), to compare their cost with the same run without.
bool benchSinks = false;
/// --batch-invariant: every decode and prefill variant in batch-invariant
/// mode, to measure what fixed splits cost against the default plans.
bool benchBatchInvariant = false;
/// attn-bench decode --via-prefill: each step through the paged-prefill
/// kernel (one query row per request), the Backend's path for decodes in
/// batch-invariant mode.
bool benchViaPrefill = false;
/// `attn-bench modifiers`: the knobs each measured variant adds (a built-in
/// modifier or a score_mod / mask_mod region); none elsewhere.
std::function<void(AttentionKnobs &)> editKnobs;
/// The per-head tables those variants read: ALiBi slopes (the alibi knob)
/// and the same slopes as aux table 0 (a score_mod reading them).
const float *benchSlopes = nullptr;
AuxTable benchAux[kMaxAuxTables] = {};
/// Cache geometry of every decode config (--page, --layout).
int benchPageSize = 16;
KVLayout benchLayout = KVLayout::NHD;
/// Query tokens per request of every decode config (--query-len).
int benchQueryLen = 1;

/// Preprocessor definitions given with --define (template experiments,
/// e.g. ATTN_SM90_ABLATE=1); compiled by a JIT of their own, disk cache off.
std::vector<std::string> benchDefines;
/// --ragged-only: skip the paged columns of `prefill`.
bool raggedOnly = false;
/// --no-e4m3: skip the FP8 paged columns of `prefill` (reported as 0).
bool noE4M3 = false;
/// --identity-pages: paged prefill and decode over page tables in page
/// order (each request's pages consecutive) instead of shuffled: page
/// locality alone.
bool identityPages = false;
/// attn-bench prefill --by-seq: sequence lengths 512 to 16k (16k tokens per
/// batch), 32/8 heads.
bool prefillBySeq = false;
/// attn-bench prefill --head-dim N: only the shapes of head dim N.
int onlyHeadDim = 0;
/// attn-bench prefill --rope-dim N: q and k of head dim + N dims, v and out
/// of the head dim (MLA's prefill: --head-dim 128 --rope-dim 64); ragged
/// only.
int benchRopeDim = 0;

/// The JIT decode and prefill kernels come from: the global one, or one whose
/// NVRTC options carry --define's definitions (they are part of the cache key).
Jit &benchJit() {
  if (benchDefines.empty())
    return Jit::global();
  static KernelCache *cache = [] {
    KernelCache::Options options;
    options.useDisk = false;
    options.nvrtc.defines = benchDefines;
    return new KernelCache(std::move(options));
  }();
  static Jit *jit = [] {
    Jit::Options options;
    options.cache = cache;
    return new Jit(options);
  }();
  return *jit;
}

DecodeResult benchDecode(const DecodeConfig &cfg, double readBw, Arch arch,
                         CUstream stream) {
  DecodeVariant v;
  v.schedule = pinnedSchedule;
  v.qType = ScalarType::BF16;
  v.kvType = cfg.kvType;
  v.numQHeads = cfg.numQHeads;
  v.numKVHeads = cfg.numKVHeads;
  v.headDim = 128;
  v.queryLen = cfg.queryLen;
  v.pageSize = benchPageSize;
  v.layout = benchLayout;
  v.sinks = benchSinks;
  v.batchInvariant = benchBatchInvariant;
  if (editKnobs)
    editKnobs(v);
  auto kernel = unwrap(benchJit().decode(v));

  const int pagesPerSeq = (cfg.context + v.pageSize - 1) / v.pageSize;
  const int64_t pageElems = int64_t(v.pageSize) * v.numKVHeads * v.headDim;
  const int kvBytes = sizeOf(v.kvType);
  const size_t cacheBytes =
      size_t(cfg.batch) * pagesPerSeq * pageElems * kvBytes * 2;
  // Enough copies that one pass over them is 4x the L2.
  const int copies =
      int(std::max<size_t>(1, (4 * kL2Bytes + cacheBytes - 1) / cacheBytes));
  const int64_t pagesPerCopy = int64_t(cfg.batch) * pagesPerSeq;
  const int64_t totalPages = pagesPerCopy * copies;

  DeviceBuffer k =
      unwrap(DeviceBuffer::allocate(totalPages * pageElems * kvBytes));
  DeviceBuffer vv =
      unwrap(DeviceBuffer::allocate(totalPages * pageElems * kvBytes));
  fillRandom(k, v.kvType, arch, stream);
  fillRandom(vv, v.kvType, arch, stream);
  std::vector<int32_t> tables(size_t(copies) * cfg.batch * pagesPerSeq);
  std::vector<int> perm(totalPages);
  std::iota(perm.begin(), perm.end(), 0);
  if (!identityPages)
    std::shuffle(perm.begin(), perm.end(), std::mt19937(1));
  for (size_t i = 0; i < tables.size(); ++i)
    tables[i] = perm[i];
  DeviceBuffer dTables = unwrap(DeviceBuffer::allocate(tables.size() * 4));
  BENCH_CHECK(dTables.copyFromHost(tables.data(), tables.size() * 4));
  std::vector<int32_t> lens(cfg.batch, cfg.context);
  DeviceBuffer dLens = unwrap(DeviceBuffer::allocate(lens.size() * 4));
  BENCH_CHECK(dLens.copyFromHost(lens.data(), lens.size() * 4));
  std::vector<float> scales = {0.01f};
  DeviceBuffer dScale = unwrap(DeviceBuffer::allocate(4));
  BENCH_CHECK(dScale.copyFromHost(scales.data(), 4));
  const size_t qBytes =
      size_t(cfg.batch) * cfg.queryLen * v.numQHeads * v.headDim * 2;
  DeviceBuffer q = unwrap(DeviceBuffer::allocate(qBytes));
  fillRandom(q, v.qType, arch, stream);
  DeviceBuffer out = unwrap(DeviceBuffer::allocate(qBytes));
  std::vector<float> sinkLogits(v.numQHeads, 1.f);
  DeviceBuffer sinks = unwrap(DeviceBuffer::allocate(sinkLogits.size() * 4));
  BENCH_CHECK(sinks.copyFromHost(sinkLogits.data(), sinkLogits.size() * 4));

  DecodeWorkspace ws = unwrap(kernel->createWorkspace(cfg.batch));
  DecodePlan plan = unwrap(kernel->plan(lens, ws, stream));
  std::vector<DecodeArgs> args(copies);
  // --via-prefill: the same step through the paged-prefill kernel, as the
  // Backend runs decodes in batch-invariant mode.
  std::shared_ptr<const PrefillKernel> prefillKernel;
  std::optional<PrefillWorkspace> prefillWs;
  std::optional<PrefillPlan> prefillPlan;
  std::vector<PagedPrefillArgs> prefillArgs(copies);
  if (benchViaPrefill) {
    PrefillVariant p;
    static_cast<AttentionKnobs &>(p) = v; // every knob, as MixedBatch does
    p.qType = v.qType;
    p.numQHeads = v.numQHeads;
    p.numKVHeads = v.numKVHeads;
    p.headDim = v.headDim;
    p.paged = PagedKVFormat{v.kvType, v.pageSize, v.layout, false};
    prefillKernel = unwrap(benchJit().prefill(p));
    const int64_t rows = int64_t(cfg.batch) * cfg.queryLen;
    prefillWs.emplace(unwrap(prefillKernel->createWorkspace(cfg.batch, rows)));
    std::vector<int32_t> cuQ(cfg.batch + 1);
    for (int b = 0; b <= cfg.batch; ++b)
      cuQ[b] = b * cfg.queryLen;
    prefillPlan =
        unwrap(prefillKernel->planPaged(cuQ, lens, *prefillWs, stream));
  }
  for (int c = 0; c < copies; ++c) {
    DecodeArgs &a = args[c];
    a.q = q.ptr<void>();
    a.qType = v.qType;
    a.numTokens = int64_t(cfg.batch) * cfg.queryLen;
    a.numQHeads = v.numQHeads;
    a.headDim = v.headDim;
    a.out = out.ptr<void>();
    a.cache = {k.ptr<void>(), vv.ptr<void>(), v.kvType,
               v.numKVHeads,  v.headDim,      v.pageSize,
               v.layout,      totalPages,     0};
    a.pageTables = dTables.ptr<int32_t>() + size_t(c) * cfg.batch * pagesPerSeq;
    a.pageTableStride = pagesPerSeq;
    a.seqLens = dLens.ptr<int32_t>();
    a.sinks = v.sinks ? sinks.ptr<float>() : nullptr;
    a.alibiSlopes = v.alibi ? benchSlopes : nullptr;
    for (int i = 0; i < kernel->spec().numAuxTables(); ++i)
      a.aux[i] = benchAux[i];
    if (sizeOf(v.kvType) == 1) {
      a.kScale = a.vScale = dScale.ptr<float>();
      a.numKVScales = 1;
    }
    PagedPrefillArgs &p = prefillArgs[c];
    p.q = a.q;
    p.qType = a.qType;
    p.numQTokens = a.numTokens;
    p.numQHeads = a.numQHeads;
    p.headDim = a.headDim;
    p.out = a.out;
    p.cache = a.cache;
    p.pageTables = a.pageTables;
    p.pageTableStride = a.pageTableStride;
    p.kScale = a.kScale;
    p.vScale = a.vScale;
    p.numKVScales = a.numKVScales;
    static_cast<HeadTables &>(p) = a; // sinks, ALiBi slopes, aux tables
  }
  auto runCopy = [&](int c) -> llvm::Error {
    if (prefillKernel)
      return prefillKernel->run(*prefillPlan, prefillArgs[c], stream);
    return kernel->run(plan, args[c], stream);
  };
  // A graph of back-to-back calls, rotating over the copies.
  const int callsPerGraph = std::max(copies, 20);
  BENCH_CHECK(runCopy(0));
  BENCH_CHECK(sync());
  CUgraph graph;
  BENCH_CHECK(checkCu(
      cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "capture"));
  for (int i = 0; i < callsPerGraph; ++i)
    BENCH_CHECK(runCopy(i % copies));
  BENCH_CHECK(checkCu(cuStreamEndCapture(stream, &graph), "end capture"));
  CUgraphExec exec;
  BENCH_CHECK(checkCu(cuGraphInstantiate(&exec, graph, 0), "instantiate"));
  auto launch = [&] {
    BENCH_CHECK(checkCu(cuGraphLaunch(exec, stream), "cuGraphLaunch"));
  };
  launch();
  BENCH_CHECK(sync());
  double ms = timeMedian(stream, 15, launch) / callsPerGraph;
  cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);

  double bytes =
      double(cfg.batch) * cfg.context * v.numKVHeads * v.headDim * kvBytes * 2 +
      2.0 * qBytes;
  DecodeResult r{
      cfg,
      prefillKernel ? prefillKernel->spec().uri() : kernel->spec().uri(),
      ms * 1e3,
      bytes / (ms * 1e-3) / 1e9,
      0,
      prefillKernel ? 0 : plan.chunkTokens,
      bytes};
  r.fractionOfRead = bytes / (ms * 1e-3) / readBw;
  return r;
}

int runDecode(bool json, bool quick) {
  BENCH_CHECK(initCuda());
  Arch arch = unwrap(currentDeviceArch());
  Stream stream = unwrap(Stream::create());
  double readBw = measureReadBandwidth(arch, stream.get());
  std::vector<DecodeConfig> configs;
  std::vector<int> batches =
      quick ? std::vector<int>{1, 16, 64} : std::vector<int>{1, 4, 16, 64, 256};
  std::vector<int> contexts = quick
                                  ? std::vector<int>{4096, 32768}
                                  : std::vector<int>{1024, 4096, 16384, 32768};
  if (onlyConfig)
    configs.push_back(*onlyConfig);
  // Head ratios (q heads / KV heads): MHA, GQA 4 and 8 (Llama 3 8B), and
  // 64/8 (Llama 3 70B).
  const std::pair<int, int> ratios[] = {{32, 32}, {32, 8}, {32, 4}, {64, 8}};
  for (ScalarType kv :
       {ScalarType::BF16, ScalarType::F8E4M3, ScalarType::F8E5M2})
    for (auto [hq, hkv] : ratios)
      for (int b : batches)
        for (int ctx : contexts) {
          if (onlyConfig)
            break;
          double gib = double(b) * ctx * hkv * 128 * sizeOf(kv) * 2 / (1 << 30);
          if (gib > 12)
            continue; // keep each config's cache within a few GiB
          configs.push_back({b, ctx, hkv, kv, hq, benchQueryLen});
        }
  std::vector<DecodeResult> results;
  if (!json)
    llvm::outs() << llvm::formatv(
        "read bandwidth (16-byte loads, 4 GiB): {0:F1} GB/s\n"
        "q bf16, head dim 128, page {9}, {10}, query_len {11}\n\n"
        "{1,-5} {2,-7} {3,-6} {4,-8} {5,10} {6,10} {7,8} {8,7}\n",
        readBw / 1e9, "kv", "heads", "batch", "context", "time_us", "GB/s",
        "%read", "chunk", benchPageSize, toString(benchLayout), benchQueryLen);
  for (const DecodeConfig &cfg : configs) {
    DecodeResult r = benchDecode(cfg, readBw, arch, stream.get());
    results.push_back(r);
    if (!json)
      llvm::outs() << llvm::formatv(
          "{0,-5} {1,-7} {2,-6} {3,-8} {4,10:F1} {5,10:F1} {6,7:F1}% {7,7}\n",
          toString(cfg.kvType),
          llvm::formatv("{0}/{1}", cfg.numQHeads, cfg.numKVHeads).str(),
          cfg.batch, cfg.context, r.us, r.gbps, 100 * r.fractionOfRead,
          r.chunkTokens);
  }
  if (json) {
    llvm::outs() << llvm::formatv(
        "{{\"read_bandwidth_gbps\": {0:F1}, \"decode\": [\n", readBw / 1e9);
    for (size_t i = 0; i < results.size(); ++i) {
      const DecodeResult &r = results[i];
      llvm::outs() << llvm::formatv(
          "  {{\"kv\": \"{0}\", \"q_heads\": {9}, \"kv_heads\": {1}, "
          "\"batch\": "
          "{2}, \"context\": {3}, \"query_len\": {10}, \"page_size\": {11}, "
          "\"layout\": \"{12}\", \"bytes\": {13:F0}, \"time_us\": {4:F2}, "
          "\"gbps\": {5:F1}, \"fraction_of_read\": {6:F4}, \"kernel\": "
          "\"{7}\"}{8}\n",
          toString(r.config.kvType), r.config.numKVHeads, r.config.batch,
          r.config.context, r.us, r.gbps, r.fractionOfRead, r.kernel,
          i + 1 < results.size() ? "," : "", r.config.numQHeads,
          r.config.queryLen, benchPageSize, toString(benchLayout), r.bytes);
    }
    llvm::outs() << "]}\n";
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// Prefill
//===----------------------------------------------------------------------===//

struct PrefillConfig {
  int batch, seq, numKVHeads, headDim;
  bool causal;
  int numQHeads = 32;
  /// Paged: cached keys before each request's `seq` new rows (a chunk of a
  /// chunked prefill); the queries see them and their own.
  int context = 0;
};

struct PrefillResult {
  PrefillConfig config;
  std::string kernel;
  double ms, tflops;
  int copies;
  std::vector<uint16_t> out; ///< the output (bf16 bits), when asked for
};

/// Relative L2 distance of bf16 output `a` from `b` (0 when either is
/// missing).
double relativeL2(const std::vector<uint16_t> &a,
                  const std::vector<uint16_t> &b) {
  if (a.empty() || a.size() != b.size())
    return 0;
  auto value = [](uint16_t x) {
    uint32_t bits = uint32_t(x) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return double(f);
  };
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = value(a[i]) - value(b[i]);
    diff += d * d;
    norm += value(b[i]) * value(b[i]);
  }
  return norm > 0 ? std::sqrt(diff / norm) : 0;
}

constexpr int kPrefillQHeads = 32;

/// FLOPs of one prefill call: two GEMMs per (request, head), 2 * d per
/// (query, visible key) with d q/k's dims for Q K^T (head dim + --rope-dim)
/// and v's for P V. A row sees the context and, causal, its chunk up to
/// itself (counted as half the chunk), else the whole chunk.
double prefillFlops(const PrefillConfig &cfg) {
  const double seq = cfg.seq;
  const double pairs =
      seq * cfg.context + (cfg.causal ? seq * seq / 2 : seq * seq);
  return 2.0 * cfg.batch * cfg.numQHeads * pairs *
         (2 * cfg.headDim + benchRopeDim);
}

/// A prefill schedule pinned with --prefill-schedule.
std::optional<PrefillSchedule> pinnedPrefillSchedule;
/// What one prefill measurement reads and computes in (benchPrefill).
struct PrefillInputs {
  /// Keys and values from a paged cache holding every request's tokens on
  /// shuffled pages, as after appending a fresh prompt; else ragged k/v.
  std::optional<PagedKVFormat> paged;
  std::optional<ScalarType> raggedFP8; ///< ragged k/v in FP8, else bf16
  bool fp8Compute = false;             ///< FP8 MMAs
  bool fp8Query = false;               ///< an e4m3 q with per-head scales
  /// The result holds the output (the inputs are the same in every call:
  /// fillRandom is deterministic).
  bool keepOutput = false;
  bool splitKV = true; ///< the workspace lets plans split keys
  /// A schedule for this run (else --prefill-schedule's, else the default).
  std::optional<PrefillSchedule> schedule;
};

/// Times one prefill variant on `cfg` over `in`.
PrefillResult benchPrefill(const PrefillConfig &cfg, Arch arch, CUstream stream,
                           const PrefillInputs &in = {}) {
  const std::optional<PagedKVFormat> &paged = in.paged;
  const bool fp8Query = in.fp8Query;
  PrefillVariant v;
  v.fp8Compute = in.fp8Compute;
  v.fp8Query = fp8Query;
  if (in.raggedFP8)
    v.fp8KV = FP8RowsFormat{*in.raggedFP8, false};
  v.schedule = in.schedule ? in.schedule : pinnedPrefillSchedule;
  // A pinned wgmma schedule is for 16-bit caches; FP8 ones keep the default.
  if (paged && paged->kvType != ScalarType::BF16 && v.schedule &&
      v.schedule->mma == PrefillMma::Wgmma)
    v.schedule.reset();
  v.qType = ScalarType::BF16;
  v.numQHeads = cfg.numQHeads;
  v.numKVHeads = cfg.numKVHeads;
  v.headDim = cfg.headDim;
  v.ropeDim = benchRopeDim;
  v.causal = cfg.causal;
  // Bidirectional self attention: an encoder's when ragged; a paged cache
  // belongs to a decoder, whose mask is then none.
  if (!cfg.causal && !paged)
    v.kind = AttentionKind::Encoder;
  v.paged = paged;
  v.sinks = benchSinks;
  v.batchInvariant = benchBatchInvariant;
  if (editKnobs)
    editKnobs(v);
  auto kernel = unwrap(benchJit().prefill(v));

  const int64_t tokens = int64_t(cfg.batch) * cfg.seq;
  const ScalarType kvType =
      paged ? paged->kvType : in.raggedFP8.value_or(v.qType);
  const int pageSize = paged ? paged->pageSize : 1;
  const int keys = cfg.seq + (paged ? cfg.context : 0); // per request
  const int pagesPerRequest = (keys + pageSize - 1) / pageSize;
  const int64_t numPages = int64_t(cfg.batch) * pagesPerRequest;
  // Out and v have the head dim, q and k rope_dim more.
  const size_t qkDim = size_t(v.headDim + v.ropeDim);
  const size_t outBytes = size_t(tokens) * v.numQHeads * v.headDim * 2;
  const size_t qBytes = outBytes / v.headDim * qkDim;
  const ScalarType qInType = fp8Query ? ScalarType::F8E4M3 : v.qType;
  const size_t kvBytes =
      size_t(numPages) * pageSize * v.numKVHeads * v.headDim * sizeOf(kvType);
  const size_t kBytes = kvBytes / v.headDim * qkDim;
  const size_t copyBytes = qBytes + outBytes + kBytes + kvBytes;
  // Copies enough that consecutive calls do not find their inputs in the
  // L2 (at most 3: the largest configs are far beyond it anyway).
  const int copies =
      int(std::clamp<size_t>((4 * kL2Bytes + copyBytes - 1) / copyBytes, 1, 3));
  struct Copy {
    DeviceBuffer q, k, v, out;
  };
  std::vector<Copy> data;
  for (int c = 0; c < copies; ++c) {
    Copy copy{unwrap(DeviceBuffer::allocate(qBytes)),
              unwrap(DeviceBuffer::allocate(kBytes)),
              unwrap(DeviceBuffer::allocate(kvBytes)),
              unwrap(DeviceBuffer::allocate(outBytes))};
    fillRandom(copy.q, qInType, arch, stream); // an e4m3 q: its first half
    fillRandom(copy.k, kvType, arch, stream);
    fillRandom(copy.v, kvType, arch, stream);
    data.push_back(std::move(copy));
  }
  std::vector<int32_t> cu(cfg.batch + 1), seqLens(cfg.batch, keys);
  for (int b = 0; b <= cfg.batch; ++b)
    cu[b] = b * cfg.seq;
  // Page tables over all pages in a fixed random order.
  std::vector<int32_t> pages(numPages);
  std::iota(pages.begin(), pages.end(), 0);
  if (!identityPages)
    std::shuffle(pages.begin(), pages.end(), std::mt19937(7));
  DeviceBuffer pageTables = unwrap(DeviceBuffer::allocate(pages.size() * 4));
  BENCH_CHECK(pageTables.copyFromHost(pages.data(), pages.size() * 4));
  std::vector<float> ones = {1.f};
  DeviceBuffer scale = unwrap(DeviceBuffer::allocate(sizeof(float)));
  BENCH_CHECK(scale.copyFromHost(ones.data(), sizeof(float)));
  std::vector<float> sinkLogits(v.numQHeads, 1.f);
  DeviceBuffer sinks = unwrap(DeviceBuffer::allocate(sinkLogits.size() * 4));
  BENCH_CHECK(sinks.copyFromHost(sinkLogits.data(), sinkLogits.size() * 4));
  const float *sinksArg = v.sinks ? sinks.ptr<float>() : nullptr;
  std::vector<float> qScales(v.numQHeads, 1.f);
  DeviceBuffer qScale = unwrap(DeviceBuffer::allocate(qScales.size() * 4));
  BENCH_CHECK(qScale.copyFromHost(qScales.data(), qScales.size() * 4));

  PrefillWorkspace ws =
      unwrap(kernel->createWorkspace(cfg.batch, tokens, in.splitKV));
  PrefillPlan plan = unwrap(paged ? kernel->planPaged(cu, seqLens, ws, stream)
                                  : kernel->plan(cu, cu, ws, stream));
  std::vector<std::function<llvm::Error()>> calls;
  for (int c = 0; c < copies; ++c) {
    if (paged) {
      PagedPrefillArgs a;
      a.q = data[c].q.ptr<void>();
      a.out = data[c].out.ptr<void>();
      a.qType = v.qType;
      a.numQTokens = tokens;
      a.numQHeads = v.numQHeads;
      a.headDim = v.headDim;
      a.cache = {data[c].k.ptr<void>(),
                 data[c].v.ptr<void>(),
                 kvType,
                 v.numKVHeads,
                 v.headDim,
                 pageSize,
                 paged->layout,
                 numPages,
                 0};
      a.pageTables = pageTables.ptr<int32_t>();
      a.pageTableStride = pagesPerRequest;
      a.sinks = sinksArg;
      a.qScale = fp8Query ? qScale.ptr<float>() : nullptr;
      a.alibiSlopes = v.alibi ? benchSlopes : nullptr;
      for (int i = 0; i < kernel->spec().numAuxTables(); ++i)
        a.aux[i] = benchAux[i];
      if (kvType != v.qType) {
        a.kScale = a.vScale = scale.ptr<float>();
        a.numKVScales = 1;
      }
      calls.push_back(
          [=, &kernel, &plan] { return kernel->run(plan, a, stream); });
    } else {
      PrefillArgs a;
      a.q = data[c].q.ptr<void>();
      a.k = data[c].k.ptr<void>();
      a.v = data[c].v.ptr<void>();
      a.out = data[c].out.ptr<void>();
      a.dtype = v.qType;
      a.qScale = fp8Query ? qScale.ptr<float>() : nullptr;
      if (in.raggedFP8) {
        a.kvType = kvType;
        a.kScale = a.vScale = scale.ptr<float>();
        a.numKVScales = 1;
      }
      a.numQTokens = a.numKVTokens = tokens;
      a.numQHeads = v.numQHeads;
      a.numKVHeads = v.numKVHeads;
      a.headDim = v.headDim;
      a.ropeDim = v.ropeDim;
      a.sinks = sinksArg;
      a.alibiSlopes = v.alibi ? benchSlopes : nullptr;
      for (int i = 0; i < kernel->spec().numAuxTables(); ++i)
        a.aux[i] = benchAux[i];
      calls.push_back(
          [=, &kernel, &plan] { return kernel->run(plan, a, stream); });
    }
  }
  for (auto &call : calls) // warm up: clocks, the L2, the TLB
    BENCH_CHECK(call());
  BENCH_CHECK(sync());
  int call = 0;
  double ms =
      timeMedian(stream, 15, [&] { BENCH_CHECK(calls[call++ % copies]()); });
  PrefillResult result{cfg,    kernel->spec().uri(),
                       ms,     prefillFlops(cfg) / (ms * 1e-3) / 1e12,
                       copies, {}};
  if (in.keepOutput) {
    BENCH_CHECK(sync());
    result.out.resize(outBytes / 2);
    BENCH_CHECK(data[0].out.copyToHost(result.out.data(), outBytes));
  }
  return result;
}

/// attn-bench prefill --tp-chunks: chunked prefill as tensor-parallel
/// serving runs it (TP8 of a 64/8 model: 8 q heads over 1 KV head), a chunk
/// of new tokens over a long paged bf16 cache (page 16), causal, d128, and
/// a whole 16k prompt. Beside the default (split keys, q heads packed per
/// KV head), the same kernel unpacked, and unpacked without splits.
int runPrefillChunks(bool json) {
  BENCH_CHECK(initCuda());
  Arch arch = unwrap(currentDeviceArch());
  Stream stream = unwrap(Stream::create());
  const PagedKVFormat paged{ScalarType::BF16, benchPageSize, benchLayout,
                            false};
  if (json)
    llvm::outs() << "{\"arch\": \"" << toString(arch)
                 << "\", \"prefill_chunks\": [\n";
  else
    llvm::outs() << llvm::formatv(
        "{0}: chunked prefill, 8/1 heads, d128, causal, paged bf16 page {1}\n"
        "default: keys split across CTAs, the 8 q heads of the KV head in "
        "one tile;\nunpacked: one q head per tile; whole: unpacked, one CTA "
        "per (query tile, head)\n"
        "{2,-6} {3,-8} {4,10} {5,9} {6,12} {7,9} {8,10} {9,9}  kernel\n",
        toString(arch), benchPageSize, "chunk", "context", "time_ms", "TFLOP/s",
        "unpacked_ms", "TFLOP/s", "whole_ms", "TFLOP/s");
  PrefillSchedule unpacked;
  unpacked.mma = PrefillMma::Wgmma;
  unpacked.warps = 12;
  unpacked.blockM = 128;
  unpacked.blockN = 128;
  unpacked.stages = 2;
  bool first = true;
  for (auto [chunk, context] : {std::pair{256, 8192},
                                {256, 32768},
                                {256, 131072},
                                {1024, 8192},
                                {1024, 32768},
                                {1024, 131072},
                                {16384, 0}}) {
    PrefillConfig cfg{1, chunk, 1, 128, true, 8, context};
    PrefillInputs in{paged};
    PrefillResult r = benchPrefill(cfg, arch, stream.get(), in);
    in.schedule = unpacked;
    PrefillResult split = benchPrefill(cfg, arch, stream.get(), in);
    in.splitKV = false;
    PrefillResult whole = benchPrefill(cfg, arch, stream.get(), in);
    if (json) {
      llvm::outs() << llvm::formatv(
          "{0}  {{\"chunk\": {1}, \"context\": {2}, \"q_heads\": 8, "
          "\"kv_heads\": 1, \"head_dim\": 128, \"time_ms\": {3:F4}, "
          "\"tflops\": {4:F2}, \"unpacked_time_ms\": {5:F4}, "
          "\"unpacked_tflops\": {6:F2}, \"whole_time_ms\": {7:F4}, "
          "\"whole_tflops\": {8:F2}, \"kernel\": \"{9}\"}",
          first ? "" : ",\n", chunk, context, r.ms, r.tflops, split.ms,
          split.tflops, whole.ms, whole.tflops, r.kernel);
      first = false;
    } else {
      llvm::outs() << llvm::formatv(
          "{0,-6} {1,-8} {2,10:F4} {3,9:F1} {4,12:F4} {5,9:F1} {6,10:F4} "
          "{7,9:F1}  {8}\n",
          chunk, context, r.ms, r.tflops, split.ms, split.tflops, whole.ms,
          whole.tflops, r.kernel);
    }
  }
  if (json)
    llvm::outs() << "\n]}\n";
  return 0;
}

int runPrefill(bool json, bool quick) {
  BENCH_CHECK(initCuda());
  Arch arch = unwrap(currentDeviceArch());
  Stream stream = unwrap(Stream::create());
  // The SM count identifies the part (the runtime's driver shim forwards no
  // cuDeviceGetName; nvidia-smi in scripts/gpu-check.sh names the GPU).
  CUdevice device;
  BENCH_CHECK(checkCu(cuCtxGetDevice(&device), "cuCtxGetDevice"));
  int sms = 0;
  BENCH_CHECK(
      checkCu(cuDeviceGetAttribute(
                  &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
              "cuDeviceGetAttribute"));

  // 16k query tokens per batch in every shape; --by-seq: every power of two
  // from 512 to 16k (a curve per peer), 32/8 heads.
  std::vector<std::pair<int, int>> shapes = {{16, 1024}, {4, 4096}, {1, 16384}};
  if (prefillBySeq)
    shapes = {{32, 512}, {16, 1024}, {8, 2048},
              {4, 4096}, {2, 8192},  {1, 16384}};
  std::vector<int> kvHeads =
      quick || prefillBySeq ? std::vector<int>{8} : std::vector<int>{32, 8};
  std::vector<int> dims =
      quick ? std::vector<int>{64, 128} : std::vector<int>{64, 128, 256};
  if (onlyHeadDim)
    dims = {onlyHeadDim};
  std::vector<PrefillConfig> configs;
  for (int hkv : kvHeads)
    for (int d : dims)
      for (bool causal : {false, true})
        for (auto [batch, seq] : shapes)
          configs.push_back({batch, seq, hkv, d, causal});

  if (!json)
    llvm::outs() << llvm::formatv(
        "{1}, {0} SMs: bf16 prefill, 32 q heads, 16k tokens per batch{16}\n"
        "fp8mma: FP8 compute over the e4m3 cache; err: its relative L2\n"
        "distance from paged_e4m3's output (16-bit MMAs, same inputs);\n"
        "fp8q: fp8mma over an e4m3 q the caller quantized (per-head scales);\n"
        "rag_fp8q: the same over ragged e4m3 k/v rows (FlashAttention 3's "
        "FP8)\n\n"
        "{2,-6} {3,-6} {4,-7} {5,-4} {6,-7} {7,10} {8,9} {9,9} {10,10} {11,10} "
        "{12,10} {13,8} "
        "{14,8} {15,8}\n",
        sms, toString(arch), "batch", "seq", "heads", "dim", "mask", "time_ms",
        "TFLOP/s", "paged", "paged_e4m3", "paged_e5m2", "fp8mma", "err", "fp8q",
        "rag_fp8q",
        benchRopeDim ? llvm::formatv(", q/k of dim + {0}", benchRopeDim).str()
                     : std::string());
  // Paged prefill over the same shapes: a bf16 cache and e4m3 / e5m2 ones,
  // page 16, NHD by default (vLLM's default page size and layout).
  const PagedKVFormat pagedBF16{ScalarType::BF16, benchPageSize, benchLayout,
                                false};
  const PagedKVFormat pagedE4M3{ScalarType::F8E4M3, benchPageSize, benchLayout,
                                false};
  const PagedKVFormat pagedE5M2{ScalarType::F8E5M2, benchPageSize, benchLayout,
                                false};
  struct Row {
    PrefillResult ragged, paged, pagedFP8, pagedE5M2, fp8Compute, fp8Query,
        raggedFP8Query;
    double fp8ComputeError = 0;
  };
  // FP8 compute where the arch and head dim have it (sm_90a, 128 and 256).
  auto hasFP8Compute = [&](const PrefillConfig &cfg) {
    return arch == Arch::SM90a && cfg.headDim >= 128 && !pinnedPrefillSchedule;
  };
  std::vector<Row> results;
  for (const PrefillConfig &cfg : configs) {
    Row r{benchPrefill(cfg, arch, stream.get()), {}, {}, {}, {}, {}, {}, 0};
    if (!raggedOnly && !benchRopeDim) {
      r.paged = benchPrefill(cfg, arch, stream.get(), {pagedBF16});
      if (!noE4M3) {
        const bool fp8mma = hasFP8Compute(cfg);
        r.pagedFP8 =
            benchPrefill(cfg, arch, stream.get(),
                         {pagedE4M3, std::nullopt, false, false, fp8mma});
        r.pagedE5M2 = benchPrefill(cfg, arch, stream.get(), {pagedE5M2});
        if (fp8mma) {
          r.fp8Compute =
              benchPrefill(cfg, arch, stream.get(),
                           {pagedE4M3, std::nullopt, true, false, true});
          r.fp8ComputeError = relativeL2(r.fp8Compute.out, r.pagedFP8.out);
          r.fp8Compute.out.clear();
          r.pagedFP8.out.clear();
          r.fp8Query = benchPrefill(cfg, arch, stream.get(),
                                    {pagedE4M3, std::nullopt, true, true});
          // FlashAttention 3's FP8 forward: e4m3 q, k and v rows.
          r.raggedFP8Query =
              benchPrefill(cfg, arch, stream.get(),
                           {std::nullopt, ScalarType::F8E4M3, true, true});
        }
      }
    }
    results.push_back(r);
    if (!json)
      llvm::outs() << llvm::formatv(
          "{0,-6} {1,-6} {2,-7} {3,-4} {4,-7} {5,10:F3} {6,9:F1} {7,9:F1} "
          "{8,10:F1} {9,10:F1} "
          "{10,10:F1} {11,8:F4} {12,8:F1} {13,8:F1}\n",
          cfg.batch, cfg.seq, llvm::formatv("32/{0}", cfg.numKVHeads).str(),
          cfg.headDim, cfg.causal ? "causal" : "full", r.ragged.ms,
          r.ragged.tflops, r.paged.tflops, r.pagedFP8.tflops,
          r.pagedE5M2.tflops, r.fp8Compute.tflops, r.fp8ComputeError,
          r.fp8Query.tflops, r.raggedFP8Query.tflops);
  }
  if (json) {
    llvm::outs() << llvm::formatv("{{\"arch\": \"{0}\", \"sms\": {1}, "
                                  "\"dtype\": \"bf16\", \"prefill\": [\n",
                                  toString(arch), sms);
    for (size_t i = 0; i < results.size(); ++i) {
      const PrefillResult &r = results[i].ragged;
      llvm::outs() << llvm::formatv(
          "  {{\"batch\": {0}, \"seq\": {1}, \"q_heads\": {2}, "
          "\"kv_heads\": {3}, \"head_dim\": {4}, \"rope_dim\": {19}, "
          "\"causal\": {5}, "
          "\"time_ms\": {6:F4}, \"tflops\": {7:F2}, \"flops\": {8:E}, "
          "\"copies\": {9}, \"kernel\": \"{10}\", "
          "\"paged_p16_tflops\": {11:F2}, \"paged_p16_e4m3_tflops\": {12:F2}, "
          "\"paged_p16_e5m2_tflops\": {14:F2}, "
          "\"paged_p16_e4m3_fp8mma_tflops\": {15:F2}, "
          "\"paged_p16_e4m3_fp8mma_error\": {16:F5}, "
          "\"paged_p16_e4m3_fp8mma_q8_tflops\": {17:F2}, "
          "\"ragged_e4m3_fp8mma_q8_tflops\": {18:F2}}{13}\n",
          r.config.batch, r.config.seq, kPrefillQHeads, r.config.numKVHeads,
          r.config.headDim, r.config.causal ? "true" : "false", r.ms, r.tflops,
          prefillFlops(r.config), r.copies, r.kernel, results[i].paged.tflops,
          results[i].pagedFP8.tflops, i + 1 < results.size() ? "," : "",
          results[i].pagedE5M2.tflops, results[i].fp8Compute.tflops,
          results[i].fp8ComputeError, results[i].fp8Query.tflops,
          results[i].raggedFP8Query.tflops, benchRopeDim);
    }
    llvm::outs() << "]}\n";
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// JIT overheads
//===----------------------------------------------------------------------===//

/// Soft-cap 30 written as a score_mod region (Gemma 2's logit cap).
constexpr const char *kSoftcapRegion = R"({
^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
  %cap = arith.constant 30.0 : f32
  %x = arith.divf %score, %cap : f32
  %t = math.tanh %x : f32
  %y = arith.mulf %t, %cap : f32
  attn.yield %y : f32
})";

/// The same with the division allowed as a multiply by 1 / 30
/// (fastmath<arcp>).
constexpr const char *kSoftcapRegionArcp = R"({
^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
  %cap = arith.constant 30.0 : f32
  %x = arith.divf %score, %cap fastmath<arcp> : f32
  %t = math.tanh %x : f32
  %y = arith.mulf %t, %cap : f32
  attn.yield %y : f32
})";

/// ALiBi as a score_mod over aux table 0, the per-head slopes.
constexpr const char *kAlibiRegion = R"({
^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32, %slopes: tensor<32xf32>):
  %slope = attn.aux_load %slopes[%q_head] : tensor<32xf32>
  %d = arith.subi %k_pos, %q_pos : i32
  %a = math.absi %d : i32
  %af = arith.sitofp %a : i32 to f32
  %bias = arith.mulf %slope, %af fastmath<contract> : f32
  %r = arith.subf %score, %bias fastmath<contract> : f32
  attn.yield %r : f32
})";

/// Chunked local attention over 8192-token chunks (Llama 4's
/// attention_chunk) as a mask_mod region.
constexpr const char *kChunkedLocalRegion = R"({
^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
  %c = arith.constant 8192 : i32
  %qc = arith.divsi %q_pos, %c : i32
  %kc = arith.divsi %k_pos, %c : i32
  %same = arith.cmpi eq, %qc, %kc : i32
  attn.yield %same : i1
})";

/// T5's relative-position bias (examples/modifiers/t5-bias.mlir): a table of
/// 32 heads x 32 buckets read at the bucket of q_pos - k_pos. Its IEEE
/// division and float-to-int cast make it a costly region, which an sm_90a
/// prefill runs in mma.sync (docs/semantics.md, "Programmable variants").
constexpr const char *kT5BiasRegion = R"({
^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32, %t: tensor<32x32xf32>):
  %zero = arith.constant 0 : i32
  %d = arith.subi %q_pos, %k_pos : i32
  %n = arith.maxsi %d, %zero : i32
  %c16 = arith.constant 16 : i32
  %c31 = arith.constant 31 : i32
  %exact = arith.cmpi slt, %n, %c16 : i32
  %nf = arith.sitofp %n : i32 to f32
  %f16 = arith.constant 16.0 : f32
  %ratio = arith.divf %nf, %f16 : f32
  %log = math.log %ratio : f32
  %f8 = arith.constant 8.0 : f32
  %log8 = math.log %f8 : f32
  %quot = arith.divf %log, %log8 : f32
  %scaled = arith.mulf %quot, %f16 : f32
  %si = arith.fptosi %scaled : f32 to i32
  %far = arith.addi %si, %c16 : i32
  %farc = arith.minsi %far, %c31 : i32
  %bucket = arith.select %exact, %n, %farc : i32
  %b = attn.aux_load %t[%q_head, %bucket] : tensor<32x32xf32>
  %r = arith.addf %score, %b : f32
  attn.yield %r : f32
})";

/// Custom modifiers against their built-in equivalents, same run: soft-cap
/// and ALiBi as score_mod regions against their knobs, and chunked local
/// attention as a mask_mod against plain causal attention (the tiles it
/// hides are skipped), in prefill (the arch's default template) and decode.
int runModifiers(bool json) {
  BENCH_CHECK(initCuda());
  Arch arch = unwrap(currentDeviceArch());
  Stream stream = unwrap(Stream::create());
  double readBw = measureReadBandwidth(arch, stream.get());
  std::vector<float> slopes;
  for (int h = 0; h < kPrefillQHeads; ++h)
    slopes.push_back(std::pow(2.f, -8.f * float(h + 1) / kPrefillQHeads));
  DeviceBuffer dSlopes = unwrap(DeviceBuffer::allocate(slopes.size() * 4));
  BENCH_CHECK(dSlopes.copyFromHost(slopes.data(), slopes.size() * 4));
  benchSlopes = dSlopes.ptr<float>();
  const AuxTable slopesTable{dSlopes.ptr<void>(),
                             {int32_t(slopes.size()), 1, 1}};
  // T5's bias table: head h, bucket b holds (b - 16) / 64 - h / 256.
  std::vector<float> t5Bias;
  for (int h = 0; h < kPrefillQHeads; ++h)
    for (int b = 0; b < 32; ++b)
      t5Bias.push_back(float(b - 16) / 64.f - float(h) / 256.f);
  DeviceBuffer dT5Bias = unwrap(DeviceBuffer::allocate(t5Bias.size() * 4));
  BENCH_CHECK(dT5Bias.copyFromHost(t5Bias.data(), t5Bias.size() * 4));
  const AuxTable t5Table{dT5Bias.ptr<void>(), {kPrefillQHeads, 32, 1}};
  struct Knobs {
    const char *name;
    std::function<void(AttentionKnobs &)> edit;
    const AuxTable *aux = nullptr; // aux table 0 where not the slopes
  };
  const std::vector<Knobs> knobs = {
      {"causal", [](AttentionKnobs &) {}},
      {"softcap", [](AttentionKnobs &k) { k.softcap = 30.f; }},
      {"softcap_region",
       [](AttentionKnobs &k) { k.scoreMod = kSoftcapRegion; }},
      {"softcap_region_arcp",
       [](AttentionKnobs &k) { k.scoreMod = kSoftcapRegionArcp; }},
      {"alibi", [](AttentionKnobs &k) { k.alibi = true; }},
      {"alibi_region", [](AttentionKnobs &k) { k.scoreMod = kAlibiRegion; }},
      {"chunked_local_region",
       [](AttentionKnobs &k) { k.maskMod = kChunkedLocalRegion; }},
      {"t5_bias_region", [](AttentionKnobs &k) { k.scoreMod = kT5BiasRegion; },
       &t5Table},
  };
  if (json)
    llvm::outs() << "[\n";
  else
    llvm::outs() << llvm::formatv(
        "{0,-10} {1,-22} {2,-22} {3,10} {4,10}  kernel\n", "call", "shape",
        "variant", "ms", "vs causal");
  bool first = true;
  auto report = [&](const char *call, const std::string &shape,
                    const char *variant, double ms, double base,
                    const std::string &kernel) {
    if (json) {
      llvm::outs() << llvm::formatv(
          "{0}  {{\"call\": \"{1}\", \"shape\": \"{2}\", \"variant\": \"{3}\", "
          "\"ms\": {4:f4}, \"vs_causal\": {5:f3}, \"kernel\": \"{6}\"}",
          first ? "" : ",\n", call, shape, variant, ms, ms / base, kernel);
      first = false;
    } else {
      llvm::outs() << llvm::formatv(
          "{0,-10} {1,-22} {2,-22} {3,10:f4} {4,10:f3}  {5}\n", call, shape,
          variant, ms, ms / base, kernel);
    }
  };
  for (int seq : {8192, 32768}) {
    PrefillConfig cfg{1, seq, 8, 128, true};
    std::string shape = llvm::formatv("1x{0} 32/8 d128", seq);
    double base = 0;
    for (const Knobs &k : knobs) {
      editKnobs = k.edit;
      benchAux[0] = k.aux ? *k.aux : slopesTable;
      PrefillResult r = benchPrefill(cfg, arch, stream.get());
      if (base == 0)
        base = r.ms;
      report("prefill", shape, k.name, r.ms, base, r.kernel);
    }
  }
  for (auto [batch, context] : {std::pair{16, 32768}, {1, 32768}}) {
    DecodeConfig cfg{batch, context, 8, ScalarType::BF16};
    std::string shape = llvm::formatv("{0}x{1} 32/8 d128", batch, context);
    double base = 0;
    for (const Knobs &k : knobs) {
      if (std::string(k.name) == "causal")
        editKnobs = [](AttentionKnobs &) {};
      else
        editKnobs = k.edit;
      benchAux[0] = k.aux ? *k.aux : slopesTable;
      DecodeResult r = benchDecode(cfg, readBw, arch, stream.get());
      double ms = r.us / 1e3;
      if (base == 0)
        base = ms;
      report("decode", shape, k.name, ms, base, r.kernel);
    }
    // The floor for chunked local: the same 8192 keys per request, read by
    // a plan that knows them (a built-in window the planner splits over).
    editKnobs = [](AttentionKnobs &k) { k.windowLeft = 8191; };
    benchAux[0] = slopesTable;
    DecodeResult r = benchDecode(cfg, readBw, arch, stream.get());
    report("decode", shape, "window_8192", r.us / 1e3, base, r.kernel);
  }
  editKnobs = nullptr;
  benchAux[0] = {}; // the tables are freed on return
  if (json)
    llvm::outs() << "\n]\n";
  return 0;
}

/// Bytes per second of a streaming copy of 2 GiB, counting what is read
/// and what is written: the ceiling of a kernel that streams through
/// memory once in each direction.
double measureCopyBandwidth(Arch arch, CUstream stream) {
  const size_t bytes = 2ull << 30;
  DeviceBuffer src = unwrap(DeviceBuffer::allocate(bytes));
  DeviceBuffer dst = unwrap(DeviceBuffer::allocate(bytes));
  fillRandom(src, ScalarType::BF16, arch, stream);
  CUdevice device;
  BENCH_CHECK(checkCu(cuCtxGetDevice(&device), "cuCtxGetDevice"));
  int sms = 0;
  BENCH_CHECK(
      checkCu(cuDeviceGetAttribute(
                  &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
              "attr"));
  unsigned long long n = bytes / 16;
  CUdeviceptr from = src.get(), to = dst.get();
  void *args[] = {&from, &to, &n};
  double ms = timeMedian(stream, 10, [&] {
    BENCH_CHECK(checkCu(
        cuLaunchKernel(reinterpret_cast<CUfunction>(benchKernels(arch).copy),
                       sms * 4, 1, 1, 512, 1, 1, 0, stream, args, nullptr),
        "cuLaunchKernel(copy)"));
  });
  return 2.0 * bytes / (ms * 1e-3);
}

/// merge_states over large batches: bytes read and written per second
/// against a device-to-device copy's in the same run.
int runMerge(bool json) {
  BENCH_CHECK(initCuda());
  Arch arch = unwrap(currentDeviceArch());
  Stream stream = unwrap(Stream::create());
  const double copyBw = measureCopyBandwidth(arch, stream.get());
  if (json)
    llvm::outs() << "[\n";
  else
    llvm::outs() << llvm::formatv(
        "copy bandwidth (read + write): {0:F0} GB/s\n{1,-6} {2,-7} {3,-16} "
        "{4,10} {5,10} {6,8}\n",
        copyBw / 1e9, "dtype", "states", "tokens x 32 x 128", "us", "GB/s",
        "% copy");
  bool first = true;
  for (ScalarType dtype : {ScalarType::BF16, ScalarType::F32})
    for (int states : {2, 4, 8})
      for (int64_t tokens : {int64_t(8192), int64_t(65536)}) {
        MergeStatesVariant v{dtype, 32, 128};
        auto kernel = unwrap(Jit::global().mergeStates(v));
        const int64_t rows = tokens * v.numHeads;
        const size_t outBytes = size_t(rows) * v.headDim * sizeOf(dtype);
        std::vector<DeviceBuffer> buffers;
        MergeStatesArgs a;
        a.dtype = dtype;
        a.numTokens = tokens;
        a.numHeads = v.numHeads;
        a.headDim = v.headDim;
        a.numStates = states;
        for (int i = 0; i <= states; ++i) {
          buffers.push_back(unwrap(DeviceBuffer::allocate(outBytes)));
          fillRandom(buffers.back(),
                     dtype == ScalarType::F32 ? ScalarType::BF16 : dtype, arch,
                     stream.get());
          std::vector<float> ones(size_t(rows), 1.f);
          DeviceBuffer lse = unwrap(DeviceBuffer::allocate(size_t(rows) * 4));
          BENCH_CHECK(lse.copyFromHost(ones.data(), ones.size() * 4));
          if (i < states) {
            a.outs[i] = buffers.back().ptr<void>();
            a.lses[i] = lse.ptr<float>();
          } else {
            a.out = buffers.back().ptr<void>();
            a.lse = lse.ptr<float>();
          }
          buffers.push_back(std::move(lse));
        }
        double ms = timeMedian(stream.get(), 20, [&] {
          BENCH_CHECK(kernel->run(a, stream.get()));
        });
        double bytes = double(states + 1) * (outBytes + rows * 4.0);
        double bw = bytes / (ms * 1e-3);
        std::string shape = llvm::formatv("{0} x 32 x 128", tokens);
        if (json) {
          llvm::outs() << llvm::formatv(
              "{0}  {{\"dtype\": \"{1}\", \"states\": {2}, \"tokens\": {3}, "
              "\"us\": {4:F2}, \"gbps\": {5:F0}, \"pct_copy\": {6:F1}}",
              first ? "" : ",\n", toString(dtype), states, tokens, ms * 1e3,
              bw / 1e9, 100 * bw / copyBw);
          first = false;
        } else {
          llvm::outs() << llvm::formatv("{0,-6} {1,-7} {2,-16} {3,10:F2} "
                                        "{4,10:F0} {5,8:F1}\n",
                                        toString(dtype), states, shape,
                                        ms * 1e3, bw / 1e9, 100 * bw / copyBw);
        }
      }
  if (json)
    llvm::outs() << "\n]\n";
  return 0;
}

/// Absorbed MLA decode (attn.mla_decode): DeepSeek's 512 + 64 latent cache
/// in pages of 64 (vLLM's and FlashMLA's), one query token per request,
/// shuffled pages. Bytes are the latent cache read once; FLOPs 2 * heads *
/// query tokens * keys * (576 + 512).
int runMla(bool json, bool quick) {
  BENCH_CHECK(initCuda());
  Arch arch = unwrap(currentDeviceArch());
  Stream stream = unwrap(Stream::create());
  const double readBw = measureReadBandwidth(arch, stream.get());
  struct Shape {
    ScalarType kv;
    int heads, batch, context;
  };
  std::vector<Shape> shapes;
  for (ScalarType kv : {ScalarType::BF16, ScalarType::F8E4M3})
    for (int batch : {32, 64, 128})
      for (int context : {4096, 8192, 32768})
        if (!quick || (batch != 64 && context != 8192))
          shapes.push_back({kv, 16, batch, context});
  for (int batch : {32, 64})
    for (int context : {4096, 8192})
      if (!quick || batch == 64)
        shapes.push_back({ScalarType::BF16, 128, batch, context});
  if (json)
    llvm::outs() << "[\n";
  else
    llvm::outs() << llvm::formatv(
        "read roof: {0:F0} GB/s\n{1,-6} {2,6} {3,6} {4,8} {5,10} {6,8} {7,7} "
        "{8,9}\n",
        readBw / 1e9, "cache", "heads", "batch", "context", "us", "GB/s",
        "% roof", "TFLOP/s");
  bool first = true;
  for (const Shape &sh : shapes) {
    MlaDecodeVariant v;
    v.kvType = sh.kv;
    v.numQHeads = sh.heads;
    v.scale = 0.1352f;
    if (pinnedSchedule)
      v.schedule = *pinnedSchedule;
    auto kernel = unwrap(Jit::global().mlaDecode(v));
    const int dims = v.kvLoraRank + v.ropeDim;
    const int64_t pagesPer = (sh.context + v.pageSize - 1) / v.pageSize;
    const int64_t numPages = pagesPer * sh.batch;
    // Copies of the cache, used in turn, keep what one call reads out of
    // the L2 of the call before (240 MB or more in all).
    const size_t cacheBytes =
        size_t(numPages) * v.pageSize * dims * sizeOf(sh.kv);
    std::vector<DeviceBuffer> caches;
    for (size_t total = 0; total < (240u << 20) || caches.empty();
         total += cacheBytes) {
      caches.push_back(unwrap(DeviceBuffer::allocate(cacheBytes)));
      fillRandom(caches.back(), sh.kv, arch, stream.get());
    }
    const int64_t tokens = sh.batch;
    DeviceBuffer qNope = unwrap(
        DeviceBuffer::allocate(size_t(tokens) * sh.heads * v.kvLoraRank * 2));
    DeviceBuffer qRope = unwrap(
        DeviceBuffer::allocate(size_t(tokens) * sh.heads * v.ropeDim * 2));
    DeviceBuffer out = unwrap(
        DeviceBuffer::allocate(size_t(tokens) * sh.heads * v.kvLoraRank * 2));
    fillRandom(qNope, ScalarType::BF16, arch, stream.get());
    fillRandom(qRope, ScalarType::BF16, arch, stream.get());
    std::vector<int32_t> pages(numPages);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), std::mt19937(7));
    DeviceBuffer pageTables = unwrap(DeviceBuffer::allocate(pages.size() * 4));
    BENCH_CHECK(pageTables.copyFromHost(pages.data(), pages.size() * 4));
    std::vector<float> one = {1.f};
    DeviceBuffer scale = unwrap(DeviceBuffer::allocate(sizeof(float)));
    BENCH_CHECK(scale.copyFromHost(one.data(), sizeof(float)));
    std::vector<int32_t> lens(sh.batch, sh.context);
    DecodeWorkspace ws = unwrap(kernel->createWorkspace(sh.batch));
    DecodePlan plan = unwrap(kernel->plan(lens, ws, stream.get()));
    MlaDecodeArgs a;
    a.qType = v.qType;
    a.numTokens = tokens;
    a.numQHeads = sh.heads;
    a.qNope = qNope.ptr<void>();
    a.qRope = qRope.ptr<void>();
    a.out = out.ptr<void>();
    a.kvType = sh.kv;
    a.numPages = numPages;
    a.pageTables = pageTables.ptr<int32_t>();
    a.pageTableStride = int(pagesPer);
    a.kvScale = sh.kv == ScalarType::F8E4M3 ? scale.ptr<float>() : nullptr;
    size_t call = 0;
    double ms = timeMedian(stream.get(), 21, [&] {
      a.ckv = caches[call++ % caches.size()].ptr<void>();
      BENCH_CHECK(kernel->run(plan, a, stream.get()));
    });
    const double bytes = double(sh.batch) * sh.context * dims * sizeOf(sh.kv);
    const double flops =
        2.0 * sh.heads * tokens * double(sh.context) * (dims + v.kvLoraRank);
    const double bw = bytes / (ms * 1e-3), tflops = flops / (ms * 1e-3) / 1e12;
    if (json) {
      llvm::outs() << llvm::formatv(
          "{0}  {{\"cache\": \"{1}\", \"heads\": {2}, \"batch\": {3}, "
          "\"context\": {4}, \"us\": {5:F1}, \"gbps\": {6:F0}, "
          "\"pct_roof\": {7:F1}, \"tflops\": {8:F1}}",
          first ? "" : ",\n", toString(sh.kv), sh.heads, sh.batch, sh.context,
          ms * 1e3, bw / 1e9, 100 * bw / readBw, tflops);
      first = false;
    } else {
      llvm::outs() << llvm::formatv(
          "{0,-6} {1,6} {2,6} {3,8} {4,10:F1} {5,8:F0} {6,7:F1} {7,9:F1}\n",
          toString(sh.kv), sh.heads, sh.batch, sh.context, ms * 1e3, bw / 1e9,
          100 * bw / readBw, tflops);
    }
  }
  if (json)
    llvm::outs() << "\n]\n";
  return 0;
}

/// Shared-prefix decode: `batch` requests in groups of `groupSize`, each
/// group sharing `prefix` tokens, each request with 256-1024 tokens of its
/// own, over one paged cache (32/8 heads, d128, page 16). Plain decode
/// reads every request's pages; the cascade reads each group's once.
struct CascadeResult {
  double plainUs = 0, cascadeUs = 0;
};
CascadeResult benchCascade(ScalarType kvType, int batch, int groupSize,
                           int prefix, Arch arch, CUstream stream) {
  DecodeVariant v;
  v.kvType = kvType;
  v.numQHeads = 32;
  v.numKVHeads = 8;
  auto plain = unwrap(Jit::global().decode(v));
  runtime::CascadeAttention cascade = unwrap(Jit::global().cascade(v));
  const int groups = (batch + groupSize - 1) / groupSize;
  const int prefixPages = prefix / v.pageSize;
  std::mt19937 rng(7);
  std::vector<int32_t> own(batch), full(batch);
  int ownPagesMax = 0, totalPages = groups * prefixPages;
  for (int b = 0; b < batch; ++b) {
    own[b] = 256 + int(rng() % 769);
    full[b] = prefix + own[b];
    int pages = (own[b] + v.pageSize - 1) / v.pageSize;
    ownPagesMax = std::max(ownPagesMax, pages);
    totalPages += pages;
  }
  // Pages: each group's prefix, then each request's own, in order. Full
  // rows (plain decode) are prefix + own; the cascade reads the two parts.
  const int fullStride = prefixPages + ownPagesMax;
  std::vector<int32_t> fullTables(size_t(batch) * fullStride, 0);
  std::vector<int32_t> prefixTables(size_t(groups) * std::max(prefixPages, 1),
                                    0);
  std::vector<int32_t> ownTables(size_t(batch) * ownPagesMax, 0);
  for (int g = 0; g < groups; ++g)
    for (int i = 0; i < prefixPages; ++i)
      prefixTables[size_t(g) * prefixPages + i] = g * prefixPages + i;
  int next = groups * prefixPages;
  for (int b = 0; b < batch; ++b) {
    int g = b / groupSize;
    for (int i = 0; i < prefixPages; ++i)
      fullTables[size_t(b) * fullStride + i] = g * prefixPages + i;
    for (int i = 0; i < (own[b] + v.pageSize - 1) / v.pageSize; ++i, ++next) {
      fullTables[size_t(b) * fullStride + prefixPages + i] = next;
      ownTables[size_t(b) * ownPagesMax + i] = next;
    }
  }
  const int64_t pageElems = int64_t(v.pageSize) * v.numKVHeads * v.headDim;
  DeviceBuffer k =
      unwrap(DeviceBuffer::allocate(totalPages * pageElems * sizeOf(kvType)));
  DeviceBuffer vv =
      unwrap(DeviceBuffer::allocate(totalPages * pageElems * sizeOf(kvType)));
  fillRandom(k, kvType, arch, stream);
  fillRandom(vv, kvType, arch, stream);
  auto upload = [](const std::vector<int32_t> &t) {
    DeviceBuffer d = unwrap(DeviceBuffer::allocate(t.size() * 4));
    BENCH_CHECK(d.copyFromHost(t.data(), t.size() * 4));
    return d;
  };
  DeviceBuffer dFull = upload(fullTables), dPrefix = upload(prefixTables),
               dOwn = upload(ownTables), dLens = upload(full);
  const size_t qBytes = size_t(batch) * v.numQHeads * v.headDim * 2;
  DeviceBuffer q = unwrap(DeviceBuffer::allocate(qBytes));
  DeviceBuffer out = unwrap(DeviceBuffer::allocate(qBytes));
  fillRandom(q, v.qType, arch, stream);
  std::vector<float> scale = {0.01f};
  DeviceBuffer dScale = unwrap(DeviceBuffer::allocate(4));
  BENCH_CHECK(dScale.copyFromHost(scale.data(), 4));
  const bool fp8 = sizeOf(kvType) == 1;
  PagedKVView view{k.ptr<void>(), vv.ptr<void>(), kvType,
                   v.numKVHeads,  v.headDim,      v.pageSize,
                   v.layout,      totalPages,     0};

  DecodeWorkspace ws = unwrap(plain->createWorkspace(batch));
  DecodePlan plan = unwrap(plain->plan(full, ws, stream));
  DecodeArgs a;
  a.q = q.ptr<void>();
  a.qType = v.qType;
  a.numTokens = batch;
  a.numQHeads = v.numQHeads;
  a.headDim = v.headDim;
  a.out = out.ptr<void>();
  a.cache = view;
  a.pageTables = dFull.ptr<int32_t>();
  a.pageTableStride = fullStride;
  a.seqLens = dLens.ptr<int32_t>();
  if (fp8) {
    a.kScale = a.vScale = dScale.ptr<float>();
    a.numKVScales = 1;
  }
  CascadeResult r;
  r.plainUs = 1e3 * timeMedian(stream, 20, [&] {
                BENCH_CHECK(plain->run(plan, a, stream));
              });

  runtime::CascadeWorkspace cws = unwrap(cascade.createWorkspace(batch, 1));
  runtime::CascadeLevel level;
  std::vector<int32_t> groupLens(groups, prefix);
  for (int g = 0; g <= groups; ++g)
    level.groupStarts.push_back(std::min(batch, g * groupSize));
  level.kvLens = groupLens;
  runtime::CascadePlan cplan = unwrap(cascade.plan({level}, own, cws, stream));
  runtime::CascadeArgs c;
  c.q = q.ptr<void>();
  c.qType = v.qType;
  c.numQTokens = batch;
  c.numQHeads = v.numQHeads;
  c.headDim = v.headDim;
  c.out = out.ptr<void>();
  c.cache = view;
  c.levelPageTables[0] = dPrefix.ptr<int32_t>();
  c.levelPageTableStrides[0] = std::max(prefixPages, 1);
  c.suffixPageTables = dOwn.ptr<int32_t>();
  c.suffixPageTableStride = ownPagesMax;
  if (fp8) {
    c.kScale = c.vScale = dScale.ptr<float>();
    c.numKVScales = 1;
  }
  r.cascadeUs = 1e3 * timeMedian(stream, 20, [&] {
                  BENCH_CHECK(cascade.run(cplan, c, stream));
                });
  return r;
}

/// Cascade against plain paged decode over the same cache: the issue's
/// shape (64 requests sharing 16k), then shared lengths and group sizes.
int runCascade(bool json) {
  BENCH_CHECK(initCuda());
  Arch arch = unwrap(currentDeviceArch());
  Stream stream = unwrap(Stream::create());
  struct Shape {
    int batch, groupSize, prefix;
  };
  std::vector<Shape> shapes = {{64, 64, 16384}};
  for (int prefix : {1024, 2048, 4096, 8192, 32768})
    shapes.push_back({64, 64, prefix});
  for (int group : {4, 16, 256})
    shapes.push_back({std::max(64, group), group, 16384});
  for (int group : {1, 2})
    shapes.push_back({64, group, 16384});
  for (int prefix : {2048, 4096, 8192})
    shapes.push_back({64, 16, prefix});
  if (json)
    llvm::outs() << "[\n";
  else
    llvm::outs() << llvm::formatv(
        "{0,-6} {1,6} {2,6} {3,8} {4,12} {5,12} {6,8} {7,8}\n", "kv", "batch",
        "group", "prefix", "plain us", "cascade us", "speedup", "backend");
  bool first = true;
  for (ScalarType kv : {ScalarType::BF16, ScalarType::F8E4M3})
    for (const Shape &s : shapes) {
      CascadeResult r =
          benchCascade(kv, s.batch, s.groupSize, s.prefix, arch, stream.get());
      // What the Backend picks for a decode step of one such group.
      BackendConfig config;
      config.numQHeads = 32;
      config.numKVHeads = 8;
      config.kvType = kv;
      const char *picked =
          cascadePays(config, s.groupSize, s.prefix) ? "cascade" : "plain";
      if (json) {
        llvm::outs() << llvm::formatv(
            "{0}  {{\"kv\": \"{1}\", \"batch\": {2}, \"group\": {3}, "
            "\"prefix\": {4}, \"plain_us\": {5:F2}, \"cascade_us\": {6:F2}, "
            "\"speedup\": {7:F2}, \"backend\": \"{8}\"}",
            first ? "" : ",\n", toString(kv), s.batch, s.groupSize, s.prefix,
            r.plainUs, r.cascadeUs, r.plainUs / r.cascadeUs, picked);
        first = false;
      } else {
        llvm::outs() << llvm::formatv(
            "{0,-6} {1,6} {2,6} {3,8} {4,12:F2} {5,12:F2} {6,8:F2} {7,8}\n",
            toString(kv), s.batch, s.groupSize, s.prefix, r.plainUs,
            r.cascadeUs, r.plainUs / r.cascadeUs, picked);
      }
    }
  if (json)
    llvm::outs() << "\n]\n";
  return 0;
}

int runJit(bool json) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::duration d) {
    return std::chrono::duration<double>(d).count();
  };
  DecodeVariant v;    // bf16, 32/8 heads, d128, page 16
  v.windowLeft = 777; // a variant no earlier run has cached
  Arch arch = Arch::SM90a;
  if (haveGpu())
    arch = unwrap(currentDeviceArch());

  // Cold: a fresh cache with the disk layer off, so NVRTC runs.
  KernelCache::Options coldOptions;
  coldOptions.useDisk = false;
  KernelCache cold(coldOptions);
  Jit coldJit({arch, &cold});
  auto t0 = Clock::now();
  CompiledKernel compiled = unwrap(coldJit.compile(v, arch));
  double coldS = seconds(Clock::now() - t0);

  // Disk: write through one cache, then read it back through a new one.
  llvm::SmallString<128> dir;
  BENCH_CHECK(llvm::errorCodeToError(
      llvm::sys::fs::createUniqueDirectory("attn-bench-cache", dir)));
  KernelCache::Options diskOptions;
  diskOptions.diskDir = std::string(dir);
  CompileRequest request{compiled.spec.uri(), compiled.source, arch};
  {
    KernelCache writer(diskOptions);
    unwrap(writer.getCubin(request));
  }
  KernelCache reader(diskOptions);
  t0 = Clock::now();
  unwrap(reader.getCubin(request));
  double diskS = seconds(Clock::now() - t0);
  llvm::sys::fs::remove_directories(dir);

  // In memory: the JIT's variant map (GPU) or the cache's memory layer.
  double memoryS = 0, runS = -1, launchS = -1, launchFnS = -1, planS = -1;
  const int n = 10000;
  if (haveGpu()) {
    Jit &jit = Jit::global();
    auto kernel = unwrap(jit.decode(v));
    t0 = Clock::now();
    for (int i = 0; i < n; ++i)
      unwrap(jit.decode(v));
    memoryS = seconds(Clock::now() - t0) / n;

    // run(): host time per call with launches queued (no sync inside).
    Stream stream = unwrap(Stream::create());
    std::vector<int32_t> lens(64, 2048);
    DecodeWorkspace ws = unwrap(kernel->createWorkspace(64));
    DecodePlan plan = unwrap(kernel->plan(lens, ws, stream.get()));
    const int64_t pages = 64 * 128;
    DeviceBuffer kv = unwrap(DeviceBuffer::allocate(pages * 16 * 8 * 128 * 2));
    BENCH_CHECK(checkCu(cuMemsetD8(kv.get(), 0, kv.size()), "memset"));
    std::vector<int32_t> tables(pages);
    std::iota(tables.begin(), tables.end(), 0);
    DeviceBuffer dTables = unwrap(DeviceBuffer::allocate(pages * 4));
    BENCH_CHECK(dTables.copyFromHost(tables.data(), pages * 4));
    DeviceBuffer dLens = unwrap(DeviceBuffer::allocate(64 * 4));
    BENCH_CHECK(dLens.copyFromHost(lens.data(), 64 * 4));
    DeviceBuffer q = unwrap(DeviceBuffer::allocate(64 * 32 * 128 * 2));
    BENCH_CHECK(checkCu(cuMemsetD8(q.get(), 0, q.size()), "memset"));
    DecodeArgs a;
    a.q = q.ptr<void>();
    a.numTokens = 64;
    a.numQHeads = 32;
    a.headDim = 128;
    a.out = q.ptr<void>();
    a.cache = {kv.ptr<void>(),
               kv.ptr<void>(),
               ScalarType::BF16,
               8,
               128,
               16,
               KVLayout::NHD,
               pages,
               0};
    a.pageTables = dTables.ptr<int32_t>();
    a.pageTableStride = 128;
    a.seqLens = dLens.ptr<int32_t>();
    // Host seconds per call of `call`, made `runs` times back to back (no
    // sync inside), then drained.
    const int runs = 200;
    auto hostSeconds = [&](auto &&call) {
      auto start = Clock::now();
      for (int i = 0; i < runs; ++i)
        call();
      double s = seconds(Clock::now() - start) / runs;
      BENCH_CHECK(sync());
      return s;
    };
    BENCH_CHECK(kernel->run(plan, a, stream.get()));
    BENCH_CHECK(sync());
    runS =
        hostSeconds([&] { BENCH_CHECK(kernel->run(plan, a, stream.get())); });

    // The driver's share: cuLaunchKernel of an empty kernel (the bench's
    // fill over no words), the floor under any run(), through the
    // context-independent CUkernel and through the context's CUfunction.
    CUkernel empty = benchKernels(arch).fill;
    CUfunction emptyFn;
    BENCH_CHECK(
        checkCu(cuKernelGetFunction(&emptyFn, empty), "cuKernelGetFunction"));
    unsigned long long none = 0;
    unsigned keep = 0, set = 0;
    CUdeviceptr nowhere = 0;
    void *emptyArgs[] = {&nowhere, &none, &keep, &set};
    auto launchEmpty = [&](CUfunction f) {
      BENCH_CHECK(checkCu(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, stream.get(),
                                         emptyArgs, nullptr),
                          "cuLaunchKernel(empty)"));
    };
    launchS =
        hostSeconds([&] { launchEmpty(reinterpret_cast<CUfunction>(empty)); });
    launchFnS = hostSeconds([&] { launchEmpty(emptyFn); });

    // plan(): host time of a 64-request plan (partition and upload).
    planS = hostSeconds(
        [&] { plan = unwrap(kernel->plan(lens, ws, stream.get())); });
  } else {
    t0 = Clock::now();
    for (int i = 0; i < n; ++i)
      unwrap(cold.getCubin(request));
    memoryS = seconds(Clock::now() - t0) / n;
  }
  if (json) {
    llvm::outs() << llvm::formatv(
        "{{\"cold_compile_s\": {0:F3}, \"disk_hit_ms\": {1:F3}, "
        "\"memory_hit_us\": {2:F3}, \"run_host_us\": {3:F3}, "
        "\"empty_launch_us\": {4:F3}, \"empty_launch_function_us\": {5:F3}, "
        "\"plan_host_us\": {6:F3}}\n",
        coldS, diskS * 1e3, memoryS * 1e6, runS * 1e6, launchS * 1e6,
        launchFnS * 1e6, planS * 1e6);
  } else {
    llvm::outs() << llvm::formatv("cold NVRTC compile ({0}):  {1:F3} s\n",
                                  compiled.spec.uri(), coldS);
    llvm::outs() << llvm::formatv("disk cache hit:            {0:F3} ms\n",
                                  diskS * 1e3);
    llvm::outs() << llvm::formatv("in-memory hit:             {0:F3} us\n",
                                  memoryS * 1e6);
    if (runS >= 0) {
      llvm::outs() << llvm::formatv("run() host overhead:       {0:F3} us\n",
                                    runS * 1e6);
      llvm::outs() << llvm::formatv("empty cuLaunchKernel:      {0:F3} us "
                                    "(CUkernel), {1:F3} us (CUfunction)\n",
                                    launchS * 1e6, launchFnS * 1e6);
      llvm::outs() << llvm::formatv("plan() of 64 requests:     {0:F3} us\n",
                                    planS * 1e6);
    } else {
      llvm::outs() << "run() host overhead:       not measured (no GPU)\n";
    }
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto has = [&](const char *flag) {
    return std::find(args.begin(), args.end(), flag) != args.end();
  };
  if (args.empty() || has("--help") || has("-h")) {
    llvm::outs()
        << "usage: attn-bench decode [--json] [--quick] [--schedule "
           "W,S,R,C,M]\n"
           "       attn-bench decode --only "
           "bf16|e4m3|e5m2,KV_HEADS,BATCH,CONTEXT\n"
           "         [--page N] [--hnd] [--identity-pages]   cache geometry\n"
           "         (default: 16, NHD, shuffled pages; prefill's paged "
           "columns\n"
           "         take them too)\n"
           "         [--query-len N]   query tokens per request (speculative\n"
           "         decoding; default 1)\n"
           "       attn-bench decode|prefill ... --sinks   every variant with\n"
           "         attention sinks\n"
           "       attn-bench decode|prefill ... --batch-invariant   every\n"
           "         variant in batch-invariant mode\n"
           "       attn-bench decode ... --via-prefill   each step through "
           "the\n"
           "         paged-prefill kernel (the Backend's decodes in that "
           "mode)\n"
           "       attn-bench prefill [--json] [--quick]\n"
           "         [--prefill-schedule W,M,N,S[,sync|wgmma[,pack_gqa]]]\n"
           "         [--ragged-only] [--no-e4m3] [--head-dim N]\n"
           "         [--by-seq]   seq 512 to 16k, 32/8 heads (prefill's\n"
           "         curve against the peers: bench/sdpa.py)\n"
           "         [--rope-dim N]   q/k of head dim + N (MLA's prefill)\n"
           "       attn-bench prefill --tp-chunks [--json]   chunks of 256 "
           "and\n"
           "         1024 tokens over 8k-128k cached keys and a 16k prompt, "
           "8/1 heads\n"
           "         (TP): the default beside unpacked and unsplit kernels\n"
           "       attn-bench decode|prefill ... [--define NAME[=VALUE]]...\n"
           "         template experiments\n"
           "       attn-bench jit [--json]\n"
           "       attn-bench modifiers [--json]   score_mod / mask_mod "
           "regions\n"
           "         against the built-in knobs and plain causal attention,\n"
           "         and T5's bias (a costly region: mma.sync on sm_90a)\n"
           "       attn-bench merge [--json]   merge_states against a copy's\n"
           "         read + write bandwidth\n"
           "       attn-bench cascade [--json]   shared-prefix decode against\n"
           "         plain paged decode over the same cache\n"
           "       attn-bench mla [--json] [--quick]   absorbed MLA decode "
           "(512 + 64,\n"
           "         pages of 64) against the read roof\n"
           "  --schedule pins warps, stages, row tiles, CTAs per SM (also the\n"
           "  decode entry's launch bounds) and the minimum chunk instead of\n"
           "  the schedule attn-select-schedule picks\n";
    return args.empty() ? 1 : 0;
  }
  auto schedule = std::find(args.begin(), args.end(), "--schedule");
  if (schedule != args.end()) {
    DecodeSchedule s;
    if (schedule + 1 == args.end() ||
        std::sscanf((schedule + 1)->c_str(), "%d,%d,%d,%d,%d", &s.warps,
                    &s.stages, &s.rowTiles, &s.ctasPerSM,
                    &s.minChunkTokens) != 5) {
      llvm::errs() << "attn-bench: --schedule takes "
                      "warps,stages,row_tiles,ctas_per_sm,min_chunk_tokens\n";
      return 1;
    }
    pinnedSchedule = s;
  }
  auto only = std::find(args.begin(), args.end(), "--only");
  if (only != args.end()) {
    char kv[8] = {0};
    DecodeConfig c{};
    if (only + 1 == args.end() ||
        std::sscanf((only + 1)->c_str(), "%7[^,],%d,%d,%d", kv, &c.numKVHeads,
                    &c.batch, &c.context) != 4 ||
        !parseScalarType(kv) || sizeOf(*parseScalarType(kv)) == 4) {
      llvm::errs() << "attn-bench: --only takes "
                      "bf16|f16|e4m3|e5m2,kv_heads,batch,context\n";
      return 1;
    }
    c.kvType = *parseScalarType(kv);
    onlyConfig = c;
  }
  auto page = std::find(args.begin(), args.end(), "--page");
  if (page != args.end() &&
      (page + 1 == args.end() ||
       std::sscanf((page + 1)->c_str(), "%d", &benchPageSize) != 1)) {
    llvm::errs() << "attn-bench: --page takes a page size\n";
    return 1;
  }
  if (has("--hnd"))
    benchLayout = KVLayout::HND;
  auto queryLen = std::find(args.begin(), args.end(), "--query-len");
  if (queryLen != args.end() &&
      (queryLen + 1 == args.end() ||
       std::sscanf((queryLen + 1)->c_str(), "%d", &benchQueryLen) != 1 ||
       benchQueryLen < 1 || benchQueryLen > int(kMaxDecodeQueryLen))) {
    llvm::errs() << "attn-bench: --query-len takes 1 to " << kMaxDecodeQueryLen
                 << "\n";
    return 1;
  }
  if (onlyConfig)
    onlyConfig->queryLen = benchQueryLen;
  benchSinks = has("--sinks");
  benchBatchInvariant = has("--batch-invariant");
  benchViaPrefill = has("--via-prefill");
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--define")
      benchDefines.push_back(args[i + 1]);
  identityPages = has("--identity-pages");
  if (args[0] == "decode")
    return runDecode(has("--json"), has("--quick"));
  auto prefillSchedule =
      std::find(args.begin(), args.end(), "--prefill-schedule");
  if (prefillSchedule != args.end()) {
    PrefillSchedule s;
    char mma[16] = "sync";
    int fields =
        prefillSchedule + 1 == args.end()
            ? 0
            : std::sscanf((prefillSchedule + 1)->c_str(), "%d,%d,%d,%d,%15s",
                          &s.warps, &s.blockM, &s.blockN, &s.stages, mma);
    // The tail: sync or wgmma, then optionally pack_gqa.
    auto [mmaName, pack] = llvm::StringRef(mma).split(',');
    std::optional<PrefillMma> kind = parsePrefillMma(mmaName);
    if (fields < 4 || !kind || (!pack.empty() && pack != "pack_gqa")) {
      llvm::errs() << "attn-bench: --prefill-schedule takes "
                      "warps,block_m,block_n,stages[,sync|wgmma[,pack_gqa]]\n";
      return 1;
    }
    s.mma = *kind;
    s.packGqa = pack == "pack_gqa";
    pinnedPrefillSchedule = s;
  }
  raggedOnly = has("--ragged-only");
  prefillBySeq = has("--by-seq");
  noE4M3 = has("--no-e4m3");
  auto headDim = std::find(args.begin(), args.end(), "--head-dim");
  if (headDim != args.end() &&
      (headDim + 1 == args.end() ||
       std::sscanf((headDim + 1)->c_str(), "%d", &onlyHeadDim) != 1)) {
    llvm::errs() << "attn-bench: --head-dim takes a head dim\n";
    return 1;
  }
  auto ropeDim = std::find(args.begin(), args.end(), "--rope-dim");
  if (ropeDim != args.end() &&
      (ropeDim + 1 == args.end() ||
       std::sscanf((ropeDim + 1)->c_str(), "%d", &benchRopeDim) != 1)) {
    llvm::errs() << "attn-bench: --rope-dim takes a number of dims\n";
    return 1;
  }
  if (args[0] == "prefill" && has("--tp-chunks"))
    return runPrefillChunks(has("--json"));
  if (args[0] == "prefill")
    return runPrefill(has("--json"), has("--quick"));
  if (args[0] == "jit")
    return runJit(has("--json"));
  if (args[0] == "modifiers")
    return runModifiers(has("--json"));
  if (args[0] == "merge")
    return runMerge(has("--json"));
  if (args[0] == "cascade")
    return runCascade(has("--json"));
  if (args[0] == "mla")
    return runMla(has("--json"), has("--quick"));
  llvm::errs() << "attn-bench: unknown command '" << args[0]
               << "' (expected decode, prefill, jit, modifiers, merge, "
                  "cascade or mla)\n";
  return 1;
}
