//===- Kernels.cpp - the kernel handles of the C ABI ----------------------===//
//
// Each handle holds what its C++ kernel needs between calls: the kernel
// (from the context's KernelSource), its workspace and the last plan. Launch
// arguments are completed from the variant and the plan (types, heads, token
// counts), so a C caller passes only pointers and strides.
//
//===----------------------------------------------------------------------===//
#include "capi/CApi.h"

#include "llvm/Support/FormatVariadic.h"

using namespace attn;
using namespace attn::capi;

namespace {

CUstream toStream(void *stream) { return static_cast<CUstream>(stream); }

/// An error unless `count` >= 0 and, when positive, `p` is given.
llvm::Error checkArray(const void *p, int64_t count, const char *name,
                       const char *countName) {
  if (count < 0)
    return argError(llvm::formatv("{0} is {1}", countName, count));
  if (count > 0 && !p)
    return argError(
        llvm::formatv("{0} is null ({1} is {2})", name, countName, count));
  return llvm::Error::success();
}

/// An error naming the first null pointer of `pointers`.
llvm::Error checkPointers(
    std::initializer_list<std::pair<const void *, const char *>> pointers) {
  for (auto [p, name] : pointers)
    if (llvm::Error error = requireNonNull(p, name))
      return error;
  return llvm::Error::success();
}

llvm::Error noPlan(const char *plan) {
  return argError(
      llvm::formatv("the handle has no plan: call {0} first", plan));
}

/// An error unless `value` >= 1, naming it.
llvm::Error checkPositive(int64_t value, const char *name) {
  if (value < 1)
    return argError(llvm::formatv("{0} is {1}", name, value));
  return llvm::Error::success();
}

/// An error unless `count` (`name`) units of `rowsEach` query rows of
/// `variant` fit one buffer: a workspace sized for more than any q holds is
/// an argument error, whatever the GPU.
template <class Variant>
llvm::Error checkQRows(int64_t count, int64_t rowsEach, const Variant &variant,
                       const char *name, const char *units) {
  return checkBytes(count,
                    rowsEach * variant.numQHeads * variant.headDim *
                        sizeOf(variant.qType),
                    name, units);
}

/// Every attn_*_create: clears `*out`, looks the context up and converts
/// the C variant, runs `check(variant)` (the caller's own arguments: these
/// errors need no GPU), then `make(variant, kernels)` builds the handle's
/// object from the context's kernel source.
template <class CHandle, class CVariant, class Check, class Make>
attn_status createHandle(const char *function, attn_context *context,
                         const CVariant *v, CHandle **out, Check &&check,
                         Make &&make) {
  return guard(function, [&]() -> llvm::Error {
    if (llvm::Error error = requireNonNull(out, "out"))
      return error;
    *out = nullptr;
    std::shared_ptr<Context> c;
    if (llvm::Error error = lookup(context, "context").moveInto(c))
      return error;
    auto variant = toVariant(v);
    if (!variant)
      return variant.takeError();
    if (llvm::Error error = check(*variant))
      return error;
    auto kernels = c->kernels();
    if (!kernels)
      return kernels.takeError();
    llvm::Expected<std::unique_ptr<typename HandleTraits<CHandle>::Object>>
        object = make(*variant, **kernels);
    if (!object)
      return object.takeError();
    *out = newHandle<CHandle>(std::move(*object));
    return llvm::Error::success();
  });
}

/// For creates whose only arguments are the context and the variant.
constexpr auto noCheck = [](const auto &) { return llvm::Error::success(); };

/// An error naming the first null pointer among those every call over the
/// paged cache needs: q, out, the cache's k and v, and its page tables.
template <class CArgs>
llvm::Error checkPagedPointers(const CArgs &args, const void *pageTables,
                               const char *pageTablesName) {
  return checkPointers({{args.q, "args->q"},
                        {args.out, "args->out"},
                        {args.cache.k, "args->cache.k"},
                        {args.cache.v, "args->cache.v"},
                        {pageTables, pageTablesName}});
}

/// The launch fields every call over the paged cache shares (decode, paged
/// prefill, mixed batches, cascade): q, out and lse as the caller passed
/// them, q's type, heads and head dim from the variant, the cache and its
/// FP8 scales.
template <class RuntimeArgs, class CArgs, class Variant>
void setPagedQuery(RuntimeArgs &a, const CArgs &args, const Variant &variant,
                   const runtime::PagedKVView &cache) {
  a.q = args.q;
  a.qType = variant.qType;
  a.numQHeads = variant.numQHeads;
  a.headDim = variant.headDim;
  a.qStrideToken = args.q_stride_token;
  a.out = args.out;
  a.outStrideToken = args.out_stride_token;
  a.lse = args.lse;
  a.cache = cache;
  a.kScale = args.cache.k_scale;
  a.vScale = args.cache.v_scale;
  a.numKVScales = args.cache.num_kv_scales;
}

} // namespace

//===--- Decode -----------------------------------------------------------===//

extern "C" {

attn_status attn_decode_create(attn_context *context,
                               const attn_decode_variant *v, int max_batch,
                               attn_decode **out) {
  return createHandle(
      __func__, context, v, out,
      [&](const DecodeVariant &variant) -> llvm::Error {
        if (llvm::Error error = checkPositive(max_batch, "max_batch"))
          return error;
        return checkQRows(max_batch, variant.queryLen, variant, "max_batch",
                          "requests' q rows");
      },
      [&](const DecodeVariant &variant, const runtime::KernelSource &kernels)
          -> llvm::Expected<std::unique_ptr<Decode>> {
        auto kernel = kernels.decode(variant);
        if (!kernel)
          return kernel.takeError();
        auto workspace = (*kernel)->createWorkspace(max_batch);
        if (!workspace)
          return workspace.takeError();
        return std::unique_ptr<Decode>(
            new Decode{*kernel, std::move(*workspace), std::nullopt});
      });
}

attn_status attn_decode_destroy(attn_decode *decode) {
  return guard(__func__, [&] { return destroyHandle(decode, "decode"); });
}

attn_status attn_decode_plan(attn_decode *decode, const int32_t *seq_lens,
                             int batch, int for_graph, void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<Decode> d;
    if (llvm::Error error = lookup(decode, "decode").moveInto(d))
      return error;
    if (llvm::Error error = checkArray(seq_lens, batch, "seq_lens", "batch"))
      return error;
    d->plan.reset();
    auto plan = d->kernel->plan(llvm::ArrayRef(seq_lens, size_t(batch)),
                                d->workspace, toStream(stream), for_graph != 0);
    if (!plan)
      return plan.takeError();
    d->plan = *plan;
    return llvm::Error::success();
  });
}

attn_status attn_decode_run(attn_decode *decode, const attn_decode_args *args,
                            void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<Decode> d;
    if (llvm::Error error = lookup(decode, "decode").moveInto(d))
      return error;
    ATTN_CHECK_STRUCT(args, attn_decode_args);
    if (llvm::Error error =
            checkPagedPointers(*args, args->page_tables, "args->page_tables"))
      return error;
    if (!d->plan)
      return noPlan("attn_decode_plan");
    auto cache = toView(args->cache, "args->cache");
    if (!cache)
      return cache.takeError();
    const DecodeVariant &variant = d->kernel->variant();
    runtime::DecodeArgs a;
    setHeadTables(a, args->tables);
    setPagedQuery(a, *args, variant, *cache);
    a.numTokens = int64_t(d->plan->batch) * variant.queryLen;
    a.pageTables = args->page_tables;
    a.pageTableStride = args->page_table_stride;
    a.seqLens = args->seq_lens;
    a.firstRequest = args->first_request;
    return d->kernel->run(*d->plan, a, toStream(stream));
  });
}

} // extern "C"

//===--- Prefill ----------------------------------------------------------===//

namespace {

runtime::PagedPrefillArgs pagedPrefillArgs(const PrefillVariant &variant,
                                           int64_t numQTokens,
                                           const attn_prefill_args &args,
                                           const runtime::PagedKVView &cache) {
  runtime::PagedPrefillArgs a;
  setHeadTables(a, args.tables);
  setPagedQuery(a, args, variant, cache);
  a.numQTokens = numQTokens;
  a.pageTables = args.page_tables;
  a.pageTableStride = args.page_table_stride;
  return a;
}

} // namespace

extern "C" {

attn_status attn_prefill_create(attn_context *context,
                                const attn_prefill_variant *v, int max_batch,
                                int64_t max_q_tokens, attn_prefill **out) {
  return createHandle(
      __func__, context, v, out,
      [&](const PrefillVariant &variant) -> llvm::Error {
        if (llvm::Error error = checkPositive(max_batch, "max_batch"))
          return error;
        if (llvm::Error error = checkPositive(max_q_tokens, "max_q_tokens"))
          return error;
        return checkQRows(max_q_tokens, 1, variant, "max_q_tokens", "q rows");
      },
      [&](const PrefillVariant &variant, const runtime::KernelSource &kernels)
          -> llvm::Expected<std::unique_ptr<Prefill>> {
        auto kernel = kernels.prefill(variant);
        if (!kernel)
          return kernel.takeError();
        auto workspace = (*kernel)->createWorkspace(max_batch, max_q_tokens);
        if (!workspace)
          return workspace.takeError();
        return std::unique_ptr<Prefill>(
            new Prefill{*kernel, std::move(*workspace), std::nullopt});
      });
}

attn_status attn_prefill_destroy(attn_prefill *prefill) {
  return guard(__func__, [&] { return destroyHandle(prefill, "prefill"); });
}

attn_status attn_prefill_plan(attn_prefill *prefill,
                              const int32_t *cu_seqlens_q,
                              const int32_t *cu_seqlens_kv, int batch,
                              int for_graph, void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<Prefill> p;
    if (llvm::Error error = lookup(prefill, "prefill").moveInto(p))
      return error;
    if (p->kernel->variant().paged)
      return argError("the variant is paged: plan it with "
                      "attn_prefill_plan_paged");
    if (batch < 0)
      return argError(llvm::formatv("batch is {0}", batch));
    if (llvm::Error error = checkPointers(
            {{cu_seqlens_q, "cu_seqlens_q"}, {cu_seqlens_kv, "cu_seqlens_kv"}}))
      return error;
    p->plan.reset();
    auto plan =
        p->kernel->plan(llvm::ArrayRef(cu_seqlens_q, size_t(batch) + 1),
                        llvm::ArrayRef(cu_seqlens_kv, size_t(batch) + 1),
                        p->workspace, toStream(stream), for_graph != 0);
    if (!plan)
      return plan.takeError();
    p->plan = *plan;
    return llvm::Error::success();
  });
}

attn_status attn_prefill_plan_paged(attn_prefill *prefill,
                                    const int32_t *cu_seqlens_q,
                                    const int32_t *seq_lens, int batch,
                                    int for_graph, void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<Prefill> p;
    if (llvm::Error error = lookup(prefill, "prefill").moveInto(p))
      return error;
    if (!p->kernel->variant().paged)
      return argError("the variant is ragged: plan it with attn_prefill_plan");
    if (batch < 0)
      return argError(llvm::formatv("batch is {0}", batch));
    if (llvm::Error error = requireNonNull(cu_seqlens_q, "cu_seqlens_q"))
      return error;
    if (llvm::Error error = checkArray(seq_lens, batch, "seq_lens", "batch"))
      return error;
    p->plan.reset();
    auto plan =
        p->kernel->planPaged(llvm::ArrayRef(cu_seqlens_q, size_t(batch) + 1),
                             llvm::ArrayRef(seq_lens, size_t(batch)),
                             p->workspace, toStream(stream), for_graph != 0);
    if (!plan)
      return plan.takeError();
    p->plan = *plan;
    return llvm::Error::success();
  });
}

attn_status attn_prefill_run(attn_prefill *prefill,
                             const attn_prefill_args *args, void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<Prefill> p;
    if (llvm::Error error = lookup(prefill, "prefill").moveInto(p))
      return error;
    ATTN_CHECK_STRUCT(args, attn_prefill_args);
    const PrefillVariant &variant = p->kernel->variant();
    if (variant.paged) {
      if (llvm::Error error =
              checkPagedPointers(*args, args->page_tables, "args->page_tables"))
        return error;
      if (!p->plan)
        return noPlan("attn_prefill_plan_paged");
      auto cache = toView(args->cache, "args->cache");
      if (!cache)
        return cache.takeError();
      return p->kernel->run(
          *p->plan,
          pagedPrefillArgs(variant, p->plan->numQTokens, *args, *cache),
          toStream(stream));
    }
    if (llvm::Error error = checkPointers({{args->q, "args->q"},
                                           {args->out, "args->out"},
                                           {args->k, "args->k"},
                                           {args->v, "args->v"}}))
      return error;
    if (!p->plan)
      return noPlan("attn_prefill_plan");
    runtime::PrefillArgs a;
    setHeadTables(a, args->tables);
    a.q = args->q;
    a.k = args->k;
    a.v = args->v;
    a.dtype = variant.qType;
    if (variant.fp8KV)
      a.kvType = variant.fp8KV->kvType;
    a.kScale = args->k_scale;
    a.vScale = args->v_scale;
    a.numKVScales = args->num_kv_scales;
    a.numQTokens = p->plan->numQTokens;
    a.numKVTokens = p->plan->numKVTokens;
    a.numQHeads = variant.numQHeads;
    a.numKVHeads = variant.numKVHeads;
    a.headDim = variant.headDim;
    a.ropeDim = variant.ropeDim;
    a.qStrideToken = args->q_stride_token;
    a.kStrideToken = args->k_stride_token;
    a.vStrideToken = args->v_stride_token;
    a.out = args->out;
    a.outStrideToken = args->out_stride_token;
    a.lse = args->lse;
    return p->kernel->run(*p->plan, a, toStream(stream));
  });
}

} // extern "C"

//===--- Mixed batches ----------------------------------------------------===//

extern "C" {

attn_status attn_mixed_batch_create(attn_context *context,
                                    const attn_prefill_variant *v,
                                    int max_batch, int64_t max_q_tokens,
                                    attn_mixed_batch **out) {
  return createHandle(
      __func__, context, v, out,
      [&](const PrefillVariant &variant) -> llvm::Error {
        if (!variant.paged)
          return argError("v->paged is 0: a mixed batch reads the paged cache");
        if (llvm::Error error = checkPositive(max_batch, "max_batch"))
          return error;
        if (llvm::Error error = checkPositive(max_q_tokens, "max_q_tokens"))
          return error;
        return checkQRows(max_q_tokens, 1, variant, "max_q_tokens", "q rows");
      },
      [&](const PrefillVariant &variant, const runtime::KernelSource &kernels)
          -> llvm::Expected<std::unique_ptr<MixedBatch>> {
        // The JIT's Jit::mixedBatch and the Backend pair kernels this way.
        auto prefill = kernels.prefill(variant);
        if (!prefill)
          return prefill.takeError();
        auto decode = kernels.decode(runtime::decodeVariantFor(variant));
        if (!decode)
          return decode.takeError();
        auto attention =
            runtime::MixedBatchAttention::create(*prefill, *decode);
        if (!attention)
          return attention.takeError();
        auto workspace = attention->createWorkspace(max_batch, max_q_tokens);
        if (!workspace)
          return workspace.takeError();
        return std::unique_ptr<MixedBatch>(new MixedBatch{
            std::move(*attention), std::move(*workspace), std::nullopt});
      });
}

attn_status attn_mixed_batch_destroy(attn_mixed_batch *mixed) {
  return guard(__func__, [&] { return destroyHandle(mixed, "mixed"); });
}

attn_status attn_mixed_batch_plan(attn_mixed_batch *mixed,
                                  const int32_t *cu_seqlens_q,
                                  const int32_t *seq_lens, int batch,
                                  int num_prefills, int for_graph,
                                  void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<MixedBatch> m;
    if (llvm::Error error = lookup(mixed, "mixed").moveInto(m))
      return error;
    if (batch < 0)
      return argError(llvm::formatv("batch is {0}", batch));
    if (llvm::Error error = requireNonNull(cu_seqlens_q, "cu_seqlens_q"))
      return error;
    if (llvm::Error error = checkArray(seq_lens, batch, "seq_lens", "batch"))
      return error;
    m->plan.reset();
    auto plan =
        m->attention.plan(llvm::ArrayRef(cu_seqlens_q, size_t(batch) + 1),
                          llvm::ArrayRef(seq_lens, size_t(batch)), num_prefills,
                          m->workspace, toStream(stream), for_graph != 0);
    if (!plan)
      return plan.takeError();
    m->plan = std::move(*plan);
    return llvm::Error::success();
  });
}

attn_status attn_mixed_batch_run(attn_mixed_batch *mixed,
                                 const attn_prefill_args *args,
                                 const int32_t *seq_lens, void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<MixedBatch> m;
    if (llvm::Error error = lookup(mixed, "mixed").moveInto(m))
      return error;
    ATTN_CHECK_STRUCT(args, attn_prefill_args);
    if (llvm::Error error =
            checkPagedPointers(*args, args->page_tables, "args->page_tables"))
      return error;
    if (!m->plan)
      return noPlan("attn_mixed_batch_plan");
    auto cache = toView(args->cache, "args->cache");
    if (!cache)
      return cache.takeError();
    const PrefillVariant &variant = m->attention.prefillKernel().variant();
    const runtime::MixedBatchPlan &plan = *m->plan;
    runtime::MixedBatchArgs a;
    setHeadTables(a, args->tables);
    setPagedQuery(a, *args, variant, *cache);
    a.numQTokens = plan.numPrefillTokens + plan.numDecodeTokens;
    a.pageTables = args->page_tables;
    a.pageTableStride = args->page_table_stride;
    a.seqLens = seq_lens;
    return m->attention.run(plan, a, toStream(stream));
  });
}

} // extern "C"

//===--- merge_states -----------------------------------------------------===//

extern "C" {

attn_status attn_merge_states_create(attn_context *context,
                                     const attn_merge_states_variant *v,
                                     attn_merge_states **out) {
  return createHandle(__func__, context, v, out, noCheck,
                      [&](const MergeStatesVariant &variant,
                          const runtime::KernelSource &kernels)
                          -> llvm::Expected<std::unique_ptr<MergeStates>> {
                        auto kernel = kernels.mergeStates(variant);
                        if (!kernel)
                          return kernel.takeError();
                        return std::unique_ptr<MergeStates>(
                            new MergeStates{*kernel, variant});
                      });
}

attn_status attn_merge_states_destroy(attn_merge_states *merge) {
  return guard(__func__, [&] { return destroyHandle(merge, "merge"); });
}

attn_status attn_merge_states_run(attn_merge_states *merge,
                                  const attn_merge_states_args *args,
                                  void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<MergeStates> m;
    if (llvm::Error error = lookup(merge, "merge").moveInto(m))
      return error;
    ATTN_CHECK_STRUCT(args, attn_merge_states_args);
    if (args->num_states < 2 || args->num_states > ATTN_MAX_MERGE_STATES)
      return argError(llvm::formatv("args->num_states is {0}, not in [2, {1}]",
                                    args->num_states, ATTN_MAX_MERGE_STATES));
    if (llvm::Error error = requireNonNull(args->out, "args->out"))
      return error;
    runtime::MergeStatesArgs a;
    a.dtype = m->variant.dtype;
    a.numTokens = args->num_tokens;
    a.numHeads = m->variant.numHeads;
    a.headDim = m->variant.headDim;
    a.numStates = args->num_states;
    for (int i = 0; i < args->num_states; ++i) {
      if (!args->outs[i] || !args->lses[i])
        return argError(llvm::formatv("args->outs[{0}] or args->lses[{0}] is "
                                      "null",
                                      i));
      a.outs[i] = args->outs[i];
      a.lses[i] = args->lses[i];
    }
    a.statesStrideToken = args->states_stride_token;
    a.out = args->out;
    a.outStrideToken = args->out_stride_token;
    a.lse = args->lse;
    return m->kernel->run(a, toStream(stream));
  });
}

} // extern "C"

//===--- MLA decode -------------------------------------------------------===//

extern "C" {

attn_status attn_mla_decode_create(attn_context *context,
                                   const attn_mla_decode_variant *v,
                                   int max_batch, attn_mla_decode **out) {
  return createHandle(
      __func__, context, v, out,
      [&](const MlaDecodeVariant &variant) -> llvm::Error {
        if (llvm::Error error = checkPositive(max_batch, "max_batch"))
          return error;
        return checkBytes(int64_t(max_batch) * variant.queryLen *
                              variant.numQHeads,
                          int64_t(variant.kvLoraRank) * 4, "max_batch",
                          "requests' partial rows");
      },
      [&](const MlaDecodeVariant &variant, const runtime::KernelSource &kernels)
          -> llvm::Expected<std::unique_ptr<MlaDecode>> {
        auto kernel = kernels.mlaDecode(variant);
        if (!kernel)
          return kernel.takeError();
        auto workspace = (*kernel)->createWorkspace(max_batch);
        if (!workspace)
          return workspace.takeError();
        return std::unique_ptr<MlaDecode>(
            new MlaDecode{*kernel, std::move(*workspace), std::nullopt});
      });
}

attn_status attn_mla_decode_destroy(attn_mla_decode *mla) {
  return guard(__func__, [&] { return destroyHandle(mla, "mla"); });
}

attn_status attn_mla_decode_plan(attn_mla_decode *mla, const int32_t *seq_lens,
                                 int batch, int for_graph, void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<MlaDecode> m;
    if (llvm::Error error = lookup(mla, "mla").moveInto(m))
      return error;
    if (llvm::Error error = checkArray(seq_lens, batch, "seq_lens", "batch"))
      return error;
    m->plan.reset();
    auto plan = m->kernel->plan(llvm::ArrayRef(seq_lens, size_t(batch)),
                                m->workspace, toStream(stream), for_graph != 0);
    if (!plan)
      return plan.takeError();
    m->plan = *plan;
    return llvm::Error::success();
  });
}

attn_status attn_mla_decode_run(attn_mla_decode *mla,
                                const attn_mla_decode_args *args,
                                void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<MlaDecode> m;
    if (llvm::Error error = lookup(mla, "mla").moveInto(m))
      return error;
    ATTN_CHECK_STRUCT(args, attn_mla_decode_args);
    if (!m->plan)
      return noPlan("attn_mla_decode_plan");
    const MlaDecodeVariant &variant = m->kernel->variant();
    runtime::MlaDecodeArgs a;
    a.qType = variant.qType;
    a.numTokens = int64_t(m->plan->batch) * variant.queryLen;
    a.numQHeads = variant.numQHeads;
    a.qNope = args->q_nope;
    a.qNopeStrideToken = args->q_nope_stride_token;
    a.qRope = args->q_rope;
    a.qRopeStrideToken = args->q_rope_stride_token;
    a.out = args->out;
    a.outStrideToken = args->out_stride_token;
    a.lse = args->lse;
    a.kvType = variant.kvType;
    a.numPages = args->num_pages;
    a.ckv = args->ckv;
    a.ckvPageStride = args->ckv_page_stride;
    a.ckvTokenStride = args->ckv_token_stride;
    a.kpe = args->kpe;
    a.kpePageStride = args->kpe_page_stride;
    a.kpeTokenStride = args->kpe_token_stride;
    a.pageTables = args->page_tables;
    a.pageTableStride = args->page_table_stride;
    a.kvScale = args->kv_scale;
    return m->kernel->run(*m->plan, a, toStream(stream));
  });
}

} // extern "C"

//===--- Cascade ----------------------------------------------------------===//

extern "C" {

attn_status attn_cascade_create(attn_context *context,
                                const attn_decode_variant *v, int max_batch,
                                int max_levels, attn_cascade **out) {
  return createHandle(
      __func__, context, v, out,
      [&](const DecodeVariant &variant) -> llvm::Error {
        if (llvm::Error error = checkPositive(max_batch, "max_batch"))
          return error;
        if (llvm::Error error = checkQRows(max_batch, variant.queryLen, variant,
                                           "max_batch", "requests' q rows"))
          return error;
        if (max_levels < 1 || max_levels > ATTN_MAX_CASCADE_LEVELS)
          return argError(llvm::formatv("max_levels is {0}, not in [1, {1}]",
                                        max_levels, ATTN_MAX_CASCADE_LEVELS));
        if (std::optional<std::string> problem =
                runtime::cascadeProblem(variant))
          return argError("the variant cannot run as a cascade: " + *problem);
        return llvm::Error::success();
      },
      [&](const DecodeVariant &variant, const runtime::KernelSource &kernels)
          -> llvm::Expected<std::unique_ptr<Cascade>> {
        auto attention = runtime::cascadeFrom(kernels, variant);
        if (!attention)
          return attention.takeError();
        auto workspace = attention->createWorkspace(max_batch, max_levels);
        if (!workspace)
          return workspace.takeError();
        return std::unique_ptr<Cascade>(
            new Cascade{variant, std::move(*attention), std::move(*workspace),
                        max_levels, std::nullopt});
      });
}

attn_status attn_cascade_destroy(attn_cascade *cascade) {
  return guard(__func__, [&] { return destroyHandle(cascade, "cascade"); });
}

attn_status attn_cascade_plan(attn_cascade *cascade,
                              const attn_cascade_level *levels, int num_levels,
                              const int32_t *suffix_lens, int batch,
                              int for_graph, void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<Cascade> c;
    if (llvm::Error error = lookup(cascade, "cascade").moveInto(c))
      return error;
    if (num_levels < 0 || num_levels > c->maxLevels)
      return argError(llvm::formatv("num_levels is {0}, not in [0, {1}] "
                                    "(max_levels)",
                                    num_levels, c->maxLevels));
    if (llvm::Error error =
            checkArray(levels, num_levels, "levels", "num_levels"))
      return error;
    if (llvm::Error error =
            checkArray(suffix_lens, batch, "suffix_lens", "batch"))
      return error;
    std::vector<runtime::CascadeLevel> converted(num_levels);
    for (int l = 0; l < num_levels; ++l) {
      const attn_cascade_level &level = levels[l];
      // Groups are non-empty runs of requests: at most `batch` of them.
      if (level.num_groups < 0 || level.num_groups > batch ||
          !level.group_starts || (level.num_groups > 0 && !level.kv_lens))
        return argError(llvm::formatv(
            "levels[{0}]: num_groups is {1} (0 to batch, {2}), group_starts "
            "{3}, kv_lens {4}",
            l, level.num_groups, batch, level.group_starts ? "set" : "null",
            level.kv_lens ? "set" : "null"));
      converted[l].groupStarts.assign(
          level.group_starts, level.group_starts + level.num_groups + 1);
      converted[l].kvLens.assign(level.kv_lens,
                                 level.kv_lens + level.num_groups);
    }
    c->plan.reset();
    auto plan =
        c->attention.plan(converted, llvm::ArrayRef(suffix_lens, size_t(batch)),
                          c->workspace, toStream(stream), for_graph != 0);
    if (!plan)
      return plan.takeError();
    c->plan = std::move(*plan);
    return llvm::Error::success();
  });
}

attn_status attn_cascade_run(attn_cascade *cascade,
                             const attn_cascade_args *args, void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<Cascade> c;
    if (llvm::Error error = lookup(cascade, "cascade").moveInto(c))
      return error;
    ATTN_CHECK_STRUCT(args, attn_cascade_args);
    if (llvm::Error error = checkPagedPointers(*args, args->suffix_page_tables,
                                               "args->suffix_page_tables"))
      return error;
    if (!c->plan)
      return noPlan("attn_cascade_plan");
    auto cache = toView(args->cache, "args->cache");
    if (!cache)
      return cache.takeError();
    const DecodeVariant &variant = c->variant;
    runtime::CascadeArgs a;
    setPagedQuery(a, *args, variant, *cache);
    a.numQTokens = int64_t(c->plan->batch) * variant.queryLen;
    for (int l = 0; l < runtime::kMaxCascadeLevels; ++l) {
      a.levelPageTables[l] = args->level_page_tables[l];
      a.levelPageTableStrides[l] = args->level_page_table_strides[l];
    }
    a.suffixPageTables = args->suffix_page_tables;
    a.suffixPageTableStride = args->suffix_page_table_stride;
    return c->attention.run(*c->plan, a, toStream(stream));
  });
}

} // extern "C"

//===--- Append-KV --------------------------------------------------------===//

extern "C" {

attn_status attn_append_kv_create(attn_context *context,
                                  const attn_append_kv_variant *v,
                                  attn_append_kv **out) {
  return createHandle(
      __func__, context, v, out, noCheck,
      [&](const AppendKVVariant &variant, const runtime::KernelSource &kernels)
          -> llvm::Expected<std::unique_ptr<AppendKV>> {
        auto kernel = kernels.appendKV(variant);
        if (!kernel)
          return kernel.takeError();
        return std::unique_ptr<AppendKV>(new AppendKV{*kernel, variant});
      });
}

attn_status attn_append_kv_destroy(attn_append_kv *append) {
  return guard(__func__, [&] { return destroyHandle(append, "append"); });
}

attn_status attn_append_kv_run(attn_append_kv *append,
                               const attn_append_kv_args *args, void *stream) {
  return guard(__func__, [&]() -> llvm::Error {
    std::shared_ptr<AppendKV> kv;
    if (llvm::Error error = lookup(append, "append").moveInto(kv))
      return error;
    ATTN_CHECK_STRUCT(args, attn_append_kv_args);
    if (llvm::Error error =
            checkPointers({{args->k, "args->k"},
                           {args->v, "args->v"},
                           {args->cache.k, "args->cache.k"},
                           {args->cache.v, "args->cache.v"},
                           {args->slot_mapping, "args->slot_mapping"}}))
      return error;
    auto cache = toView(args->cache, "args->cache");
    if (!cache)
      return cache.takeError();
    runtime::AppendKVArgs a;
    a.k = args->k;
    a.v = args->v;
    a.inType = kv->variant.inType;
    a.numTokens = args->num_tokens;
    a.numKVHeads = kv->variant.numKVHeads;
    a.headDim = kv->variant.headDim;
    a.kStrideToken = args->k_stride_token;
    a.vStrideToken = args->v_stride_token;
    a.cache = *cache;
    a.slotMapping = args->slot_mapping;
    a.kScale = args->cache.k_scale;
    a.vScale = args->cache.v_scale;
    a.numKVScales = args->cache.num_kv_scales;
    return kv->kernel->run(a, toStream(stream));
  });
}

} // extern "C"
