//===- Serving.cpp - cache ops and the metadata builder of the C ABI ------===//
//
// copy_blocks / advance_step (runtime::CacheOps), swap_blocks (coalesced
// page runs, one async copy each) and the step metadata builder.
//
//===----------------------------------------------------------------------===//
#include "capi/CApi.h"

#include "attn/runtime/support/Error.h"

#include "llvm/Support/FormatVariadic.h"

#include <cuda.h>

#include <cstring>
#include <vector>

using namespace attn;
using namespace attn::capi;

namespace {

CUstream toStream(void *stream) { return static_cast<CUstream>(stream); }

/// The geometry of `cache` as the runtime's KVCacheConfig (checked).
llvm::Expected<runtime::KVCacheConfig>
toCacheConfig(const attn_cache_layers *cache) {
  ATTN_CHECK_STRUCT(cache, attn_cache_layers);
  runtime::KVCacheConfig config;
  auto dtype = toScalarType(cache->dtype, "cache->dtype");
  if (!dtype)
    return dtype.takeError();
  auto layout = toLayout(cache->layout, "cache->layout");
  if (!layout)
    return layout.takeError();
  config.numLayers = cache->num_layers;
  config.numPages = cache->num_pages;
  config.pageSize = cache->page_size;
  config.numKVHeads = cache->num_kv_heads;
  config.headDim = cache->head_dim;
  config.dtype = *dtype;
  config.layout = *layout;
  if (llvm::Error error = runtime::checkConfig(config))
    return std::move(error);
  if (!cache->layer_table)
    return argError("cache->layer_table is null");
  return config;
}

/// An error unless 0 <= numPairs <= numDstPages (`dstName`), with `pairs`
/// (`name`) given for any: each pair writes a destination page, so more
/// pairs than pages write one twice. Checked before a pair is read or
/// copied, so a count no array holds is an argument error, not a failed
/// allocation.
llvm::Error checkPairs(const void *pairs, int64_t numPairs, const char *name,
                       int64_t numDstPages, const char *dstName) {
  if (numPairs < 0)
    return argError(llvm::formatv("num_pairs is {0}", numPairs));
  if (numPairs > numDstPages)
    return argError(llvm::formatv("num_pairs is {0}, more than {1} ({2}): a "
                                  "destination page would be written twice",
                                  numPairs, dstName, numDstPages));
  if (numPairs > 0 && !pairs)
    return argError(
        llvm::formatv("{0} is null (num_pairs is {1})", name, numPairs));
  return llvm::Error::success();
}

/// Host pairs [n, 2] as PagePairs (copied: no aliasing of the caller's
/// int64 array), checked by checkPairs.
llvm::Expected<std::vector<runtime::PagePair>>
toPairs(const int64_t *pairs, int64_t numPairs, const char *name,
        int64_t numDstPages, const char *dstName) {
  if (llvm::Error error =
          checkPairs(pairs, numPairs, name, numDstPages, dstName))
    return std::move(error);
  std::vector<runtime::PagePair> out(static_cast<size_t>(numPairs));
  for (int64_t i = 0; i < numPairs; ++i)
    out[i] = {pairs[2 * i], pairs[2 * i + 1]};
  return out;
}

} // namespace

extern "C" {

attn_status attn_cache_ops_create(attn_context *context, attn_cache_ops **out) {
  return guard(__func__, [&]() -> llvm::Error {
    if (llvm::Error error = requireNonNull(out, "out"))
      return error;
    *out = nullptr;
    std::shared_ptr<Context> c;
    if (llvm::Error error = lookup(context, "context").moveInto(c))
      return error;
    auto arch = c->targetArch();
    if (!arch)
      return arch.takeError();
    auto ops = runtime::CacheOps::create(*c->cache, *arch);
    if (!ops)
      return ops.takeError();
    *out = newHandle<attn_cache_ops>(
        std::unique_ptr<CacheOps>(new CacheOps{std::move(*ops)}));
    return llvm::Error::success();
  });
}

attn_status attn_cache_ops_destroy(attn_cache_ops *ops) {
  return guard(__func__, [&] { return destroyHandle(ops, "ops"); });
}

attn_status attn_copy_blocks(attn_cache_ops *ops,
                             const attn_cache_layers *cache,
                             const int64_t *host_pairs, int64_t num_pairs,
                             void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<CacheOps> o;
    if (llvm::Error error = lookup(ops, "ops").moveInto(o))
      return error;
    auto config = toCacheConfig(cache);
    if (!config)
      return config.takeError();
    auto pairs = toPairs(host_pairs, num_pairs, "host_pairs", config->numPages,
                         "cache->num_pages");
    if (!pairs)
      return pairs.takeError();
    return o->ops.copyPages(*config,
                            reinterpret_cast<CUdeviceptr>(cache->layer_table),
                            *pairs, toStream(stream));
  });
}

attn_status attn_copy_blocks_device(attn_cache_ops *ops,
                                    const attn_cache_layers *cache,
                                    const int64_t *device_pairs,
                                    int64_t num_pairs, void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<CacheOps> o;
    if (llvm::Error error = lookup(ops, "ops").moveInto(o))
      return error;
    auto config = toCacheConfig(cache);
    if (!config)
      return config.takeError();
    if (llvm::Error error = checkPairs(device_pairs, num_pairs, "device_pairs",
                                       config->numPages, "cache->num_pages"))
      return error;
    // int64 [n, 2] on the device is PagePair's layout (CacheOps.h).
    return o->ops.copyPages(
        *config, reinterpret_cast<CUdeviceptr>(cache->layer_table),
        reinterpret_cast<const runtime::PagePair *>(device_pairs), num_pairs,
        toStream(stream));
  });
}

attn_status attn_swap_blocks(const void *src, int64_t num_src_pages, void *dst,
                             int64_t num_dst_pages, int64_t page_bytes,
                             const int64_t *host_pairs, int64_t num_pairs,
                             void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    if (page_bytes < 1)
      return argError(llvm::formatv("page_bytes is {0}", page_bytes));
    // Page ids are int32, as in every attn cache's page tables; with the
    // buffers' bytes bounded, every offset below stays far from overflow.
    for (auto [pages, name] : {std::pair{num_src_pages, "num_src_pages"},
                               std::pair{num_dst_pages, "num_dst_pages"}}) {
      if (pages < 0 || pages > INT32_MAX)
        return argError(llvm::formatv("{0} is {1}; expected 0 to {2} (page "
                                      "ids are int32)",
                                      name, pages, INT32_MAX));
      if (llvm::Error error = checkBytes(pages, page_bytes, name, "pages"))
        return error;
    }
    auto pairs = toPairs(host_pairs, num_pairs, "host_pairs", num_dst_pages,
                         "num_dst_pages");
    if (!pairs)
      return pairs.takeError();
    if (pairs->empty())
      return llvm::Error::success();
    if (llvm::Error error = requireNonNull(src, "src"))
      return error;
    if (llvm::Error error = requireNonNull(dst, "dst"))
      return error;
    for (size_t i = 0; i < pairs->size(); ++i) {
      const runtime::PagePair &p = (*pairs)[i];
      if (p.src < 0 || p.src >= num_src_pages)
        return argError(
            llvm::formatv("pair {0}: source page {1} is outside [0, {2})", i,
                          p.src, num_src_pages));
      if (p.dst < 0 || p.dst >= num_dst_pages)
        return argError(
            llvm::formatv("pair {0}: destination page {1} is outside [0, {2})",
                          i, p.dst, num_dst_pages));
    }
    if (llvm::Error error = runtime::initCuda())
      return error;
    // Unified addressing: one call serves device and pinned host memory
    // in either direction.
    for (const runtime::PageRun &run : runtime::coalescePagePairs(*pairs))
      ATTN_CU_CHECK(cuMemcpyAsync(
          reinterpret_cast<CUdeviceptr>(dst) + run.dst * page_bytes,
          reinterpret_cast<CUdeviceptr>(src) + run.src * page_bytes,
          size_t(run.count * page_bytes), toStream(stream)));
    return llvm::Error::success();
  });
}

attn_status attn_advance_step(attn_cache_ops *ops,
                              const attn_advance_step_args *args,
                              attn_decode *decode, void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<CacheOps> o;
    if (llvm::Error error = lookup(ops, "ops").moveInto(o))
      return error;
    ATTN_CHECK_STRUCT(args, attn_advance_step_args);
    std::shared_ptr<Decode> d;
    if (decode)
      if (llvm::Error error = lookup(decode, "decode").moveInto(d))
        return error;
    if (d && !d->plan)
      return argError("decode has no plan: call attn_decode_plan first (or "
                      "pass NULL)");
    runtime::AdvanceStepArgs a;
    a.numQueries = args->num_queries;
    a.numSeqs = args->num_seqs;
    a.pageSize = args->page_size;
    a.seqLens = args->seq_lens;
    a.slotMapping = args->slot_mapping;
    a.pageTables = args->page_tables;
    a.pageTableStride = args->page_table_stride;
    a.inputTokens = args->input_tokens;
    a.sampledTokenIds = args->sampled_token_ids;
    a.positions = args->positions;
    return o->ops.advanceStep(a, d ? &*d->plan : nullptr, toStream(stream));
  });
}

//===--- The metadata builder ---------------------------------------------===//

attn_status attn_metadata_builder_create(const attn_metadata_limits *limits,
                                         attn_metadata_builder **out) {
  return guard(__func__, [&]() -> llvm::Error {
    if (llvm::Error error = requireNonNull(out, "out"))
      return error;
    *out = nullptr;
    ATTN_CHECK_STRUCT(limits, attn_metadata_limits);
    runtime::MetadataLimits l;
    l.pageSize = limits->page_size;
    l.numPages = limits->num_pages;
    l.maxBatch = limits->max_batch;
    l.maxTokens = limits->max_tokens;
    l.maxPagesPerSeq = limits->max_pages_per_seq;
    // Limits first: their errors need no GPU.
    if (llvm::Error error = runtime::checkLimits(l))
      return error;
    if (llvm::Error error =
            checkBytes(int64_t(l.maxBatch) * l.maxPagesPerSeq, sizeof(int32_t),
                       "limits->max_batch * limits->max_pages_per_seq",
                       "page-table entries"))
      return error;
    auto builder = runtime::AttentionMetadataBuilder::create(l);
    if (!builder)
      return builder.takeError();
    *out = newHandle<attn_metadata_builder>(std::unique_ptr<MetadataBuilder>(
        new MetadataBuilder{std::move(*builder), std::nullopt}));
    return llvm::Error::success();
  });
}

attn_status attn_metadata_builder_destroy(attn_metadata_builder *builder) {
  return guard(__func__, [&] { return destroyHandle(builder, "builder"); });
}

attn_status attn_metadata_builder_build(attn_metadata_builder *builder,
                                        const attn_scheduled_request *requests,
                                        int num_requests, void *stream,
                                        attn_metadata *out) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<MetadataBuilder> b;
    if (llvm::Error error = lookup(builder, "builder").moveInto(b))
      return error;
    ATTN_CHECK_STRUCT(out, attn_metadata);
    if (num_requests < 0 || num_requests > b->builder.limits().maxBatch)
      return argError(llvm::formatv("num_requests is {0}; expected 0 to the "
                                    "builder's max_batch ({1})",
                                    num_requests,
                                    b->builder.limits().maxBatch));
    if (num_requests > 0 && !requests)
      return argError(llvm::formatv("requests is null (num_requests is {0})",
                                    num_requests));
    std::vector<runtime::ScheduledRequest> scheduled(
        static_cast<size_t>(num_requests));
    for (int i = 0; i < num_requests; ++i) {
      const attn_scheduled_request &r = requests[i];
      if (r.num_pages < 0 || (r.num_pages > 0 && !r.page_table))
        return argError(
            llvm::formatv("requests[{0}]: num_pages is {1} and page_table {2}",
                          i, r.num_pages, r.page_table ? "set" : "null"));
      scheduled[i].isPrefill = r.is_prefill != 0;
      scheduled[i].queryLen = r.query_len;
      scheduled[i].contextLen = r.context_len;
      scheduled[i].pageTable =
          llvm::ArrayRef(r.page_table, size_t(r.num_pages));
    }
    // The previous build's arrays stay valid until this one succeeds.
    auto md = b->builder.build(scheduled, toStream(stream));
    if (!md)
      return md.takeError();
    b->metadata = std::move(*md);
    const runtime::AttentionMetadata &m = *b->metadata;
    // Only this release's fields: a newer caller's struct keeps its tail.
    uint32_t structSize = out->struct_size;
    std::memset(out, 0, sizeof(attn_metadata));
    out->struct_size = structSize;
    out->num_prefills = m.numPrefills;
    out->num_decodes = m.numDecodes;
    out->num_prefill_tokens = m.numPrefillTokens;
    out->num_decode_tokens = m.numDecodeTokens;
    out->max_query_len = m.maxQueryLen;
    out->max_decode_query_len = m.maxDecodeQueryLen;
    out->max_prefill_seq_len = m.maxPrefillSeqLen;
    out->max_decode_seq_len = m.maxDecodeSeqLen;
    out->page_table_stride = m.pageTableStride;
    out->batch = m.batch();
    out->seq_lens = m.seqLens.data();
    out->context_lens = m.contextLens.data();
    out->query_start_loc = m.queryStartLoc.data();
    out->seq_start_loc = m.seqStartLoc.data();
    out->page_tables = m.pageTables.data();
    out->slot_mapping = m.slotMapping.data();
    out->device_seq_lens = m.device.seqLens;
    out->device_context_lens = m.device.contextLens;
    out->device_query_start_loc = m.device.queryStartLoc;
    out->device_seq_start_loc = m.device.seqStartLoc;
    out->device_page_tables = m.device.pageTables;
    out->device_slot_mapping = m.device.slotMapping;
    return llvm::Error::success();
  });
}

} // extern "C"
