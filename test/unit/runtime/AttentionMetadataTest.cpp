//===- AttentionMetadataTest.cpp - a step's metadata, by hand -------------===//
//
// buildAttentionMetadata on the host against values worked out by hand: a
// mixed step of two chunked prefills over cached context and three decodes
// (page size 4, so new tokens cross page boundaries), the prefill and
// decode views, multi-token decodes, cross attention, the kernel-argument
// bindings, and every input rule as an Error.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/serving/AttentionMetadata.h"

#include <gtest/gtest.h>

using namespace attn::runtime;

namespace {

using I32 = std::vector<int32_t>;
using I64 = std::vector<int64_t>;

template <typename T> std::vector<T> vec(llvm::ArrayRef<T> a) {
  return std::vector<T>(a.begin(), a.end());
}

MetadataLimits limits() {
  MetadataLimits l;
  l.pageSize = 4;
  l.numPages = 12;
  l.maxBatch = 8;
  l.maxTokens = 64;
  l.maxPagesPerSeq = 4;
  return l;
}

// Page tables of the mixed step; each covers exactly its tokens.
const I32 kP0 = {7, 2, 9};   // 3 cached + 6 new = 9 tokens
const I32 kP1 = {1, 4, 5};   // 8 cached + 2 new = 10 tokens
const I32 kD0 = {3, 6};      // 4 cached + 1 new = 5 tokens
const I32 kD1 = {0, 10, 11}; // 11 cached + 1 new = 12 tokens
const I32 kD2 = {8};         // 2 cached + 1 new = 3 tokens

std::vector<ScheduledRequest> mixedStep() {
  auto prefill = [](int32_t q, int32_t ctx, const I32 &table) {
    ScheduledRequest r;
    r.isPrefill = true;
    r.queryLen = q;
    r.contextLen = ctx;
    r.pageTable = table;
    return r;
  };
  auto decode = [](int32_t ctx, const I32 &table) {
    ScheduledRequest r;
    r.queryLen = 1;
    r.contextLen = ctx;
    r.pageTable = table;
    return r;
  };
  return {prefill(6, 3, kP0), prefill(2, 8, kP1), decode(4, kD0),
          decode(11, kD1), decode(2, kD2)};
}

AttentionMetadata build(llvm::ArrayRef<ScheduledRequest> requests,
                        const MetadataLimits &l = limits()) {
  llvm::Expected<AttentionMetadata> md = buildAttentionMetadata(requests, l);
  if (!md) {
    ADD_FAILURE() << llvm::toString(md.takeError());
    return AttentionMetadata();
  }
  return std::move(*md);
}

std::string buildError(llvm::ArrayRef<ScheduledRequest> requests,
                       const MetadataLimits &l = limits()) {
  llvm::Expected<AttentionMetadata> md = buildAttentionMetadata(requests, l);
  EXPECT_FALSE(bool(md)) << "expected an error";
  return md ? std::string() : llvm::toString(md.takeError());
}

TEST(AttentionMetadata, MixedStepArrays) {
  AttentionMetadata md = build(mixedStep());
  EXPECT_EQ(md.batch(), 5);
  EXPECT_EQ(md.numPrefills, 2);
  EXPECT_EQ(md.numDecodes, 3);
  EXPECT_EQ(md.numPrefillTokens, 8);
  EXPECT_EQ(md.numDecodeTokens, 3);
  EXPECT_EQ(md.numTokens(), 11);
  EXPECT_EQ(md.maxQueryLen, 6);
  EXPECT_EQ(md.maxDecodeQueryLen, 1);
  EXPECT_EQ(md.maxPrefillSeqLen, 10);
  EXPECT_EQ(md.maxDecodeSeqLen, 12);
  EXPECT_EQ(md.seqLens, (I32{9, 10, 5, 12, 3}));
  EXPECT_EQ(md.contextLens, (I32{3, 8, 4, 11, 2}));
  EXPECT_EQ(md.queryStartLoc, (I32{0, 6, 8, 9, 10, 11}));
  EXPECT_EQ(md.seqStartLoc, (I32{0, 9, 19, 24, 36, 39}));
  EXPECT_EQ(md.pageTableStride, 4);
  // Rows padded with 0 to the limit's width.
  EXPECT_EQ(md.pageTables, (I32{7, 2,  9,  0, //
                                1, 4,  5,  0, //
                                3, 6,  0,  0, //
                                0, 10, 11, 0, //
                                8, 0,  0,  0}));
  // P0 writes tokens 3..8: the end of page 7, all of page 2, the start of
  // page 9. P1 tokens 8, 9 (page 5), decodes token 4 (page 6 slot 0),
  // 11 (page 11 slot 3), 2 (page 8 slot 2).
  EXPECT_EQ(md.slotMapping, (I64{7 * 4 + 3, 2 * 4 + 0, 2 * 4 + 1, 2 * 4 + 2,
                                 2 * 4 + 3, 9 * 4 + 0, 5 * 4 + 0, 5 * 4 + 1,
                                 6 * 4 + 0, 11 * 4 + 3, 8 * 4 + 2}));
  // No encoder: zeros, empty cross tables.
  EXPECT_EQ(md.encoderSeqLens, (I32{0, 0, 0, 0, 0}));
  EXPECT_EQ(md.encoderSeqStartLoc, (I32{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(md.numEncoderTokens, 0);
  EXPECT_EQ(md.crossPageTableStride, 0);
  EXPECT_TRUE(md.crossPageTables.empty());
  EXPECT_TRUE(md.crossSlotMapping.empty());
  EXPECT_EQ(md.device.seqLens, nullptr); // host-only build
  EXPECT_EQ(md.kvLens(), llvm::ArrayRef<int32_t>(md.seqLens));
}

TEST(AttentionMetadata, PrefillView) {
  AttentionMetadata md = build(mixedStep());
  AttentionMetadataView p = md.prefillView();
  EXPECT_EQ(p.firstRequest, 0);
  EXPECT_EQ(p.numRequests, 2);
  EXPECT_EQ(p.firstToken, 0);
  EXPECT_EQ(p.numTokens, 8);
  EXPECT_EQ(p.maxQueryLen, 6);
  EXPECT_EQ(p.maxSeqLen, 10);
  EXPECT_EQ(vec(p.seqLens), (I32{9, 10}));
  EXPECT_EQ(vec(p.contextLens), (I32{3, 8}));
  EXPECT_EQ(vec(p.queryStartLoc), (I32{0, 6, 8}));
  EXPECT_EQ(vec(p.seqStartLoc), (I32{0, 9, 19}));
  EXPECT_EQ(vec(p.pageTables), (I32{7, 2, 9, 0, 1, 4, 5, 0}));
  EXPECT_EQ(vec(p.slotMapping), (I64{31, 8, 9, 10, 11, 36, 20, 21}));
}

TEST(AttentionMetadata, DecodeViewIsRebased) {
  AttentionMetadata md = build(mixedStep());
  AttentionMetadataView d = md.decodeView();
  EXPECT_EQ(d.firstRequest, 2);
  EXPECT_EQ(d.numRequests, 3);
  EXPECT_EQ(d.firstToken, 8);
  EXPECT_EQ(d.numTokens, 3);
  EXPECT_EQ(d.maxQueryLen, 1);
  EXPECT_EQ(d.maxSeqLen, 12);
  EXPECT_EQ(vec(d.seqLens), (I32{5, 12, 3}));
  EXPECT_EQ(vec(d.contextLens), (I32{4, 11, 2}));
  EXPECT_EQ(vec(d.queryStartLoc), (I32{0, 1, 2, 3}));
  EXPECT_EQ(vec(d.seqStartLoc), (I32{0, 5, 17, 20}));
  EXPECT_EQ(vec(d.pageTables), (I32{3, 6, 0, 0, 0, 10, 11, 0, 8, 0, 0, 0}));
  EXPECT_EQ(vec(d.slotMapping), (I64{24, 47, 34}));
}

TEST(AttentionMetadata, OnlyDecodesOrOnlyPrefills) {
  std::vector<ScheduledRequest> step = mixedStep();
  AttentionMetadata decodes = build(llvm::ArrayRef(step).drop_front(2));
  EXPECT_EQ(decodes.numPrefills, 0);
  EXPECT_EQ(decodes.queryStartLoc, (I32{0, 1, 2, 3}));
  EXPECT_EQ(decodes.maxPrefillSeqLen, 0);
  EXPECT_EQ(decodes.prefillView().numRequests, 0);
  EXPECT_EQ(vec(decodes.prefillView().queryStartLoc), I32{0});
  AttentionMetadata prefills = build(llvm::ArrayRef(step).take_front(2));
  EXPECT_EQ(prefills.numDecodes, 0);
  EXPECT_EQ(prefills.maxDecodeSeqLen, 0);
  EXPECT_EQ(vec(prefills.decodeView().queryStartLoc), I32{0});
  EXPECT_TRUE(prefills.decodeView().slotMapping.empty());
  AttentionMetadata empty = build({});
  EXPECT_EQ(empty.queryStartLoc, I32{0});
  EXPECT_EQ(empty.numTokens(), 0);
}

TEST(AttentionMetadata, MultiTokenDecodes) {
  // Speculative decoding: 1 + 2 draft tokens per decode.
  const I32 t0 = {2, 3}, t1 = {5};
  ScheduledRequest a, b;
  a.queryLen = b.queryLen = 3;
  a.contextLen = 3; // tokens 3, 4, 5: page 2 slot 3, page 3 slots 0, 1
  a.pageTable = t0;
  b.contextLen = 0; // tokens 0, 1, 2 of page 5
  b.pageTable = t1;
  AttentionMetadata md = build({a, b});
  EXPECT_EQ(md.numDecodeTokens, 6);
  EXPECT_EQ(md.maxDecodeQueryLen, 3);
  EXPECT_EQ(md.maxQueryLen, 3);
  EXPECT_EQ(md.queryStartLoc, (I32{0, 3, 6}));
  EXPECT_EQ(md.seqLens, (I32{6, 3}));
  EXPECT_EQ(md.slotMapping, (I64{11, 12, 13, 20, 21, 22}));
}

TEST(AttentionMetadata, CrossAttention) {
  MetadataLimits l = limits();
  l.maxEncoderTokens = 16;
  l.maxCrossPagesPerSeq = 3;
  const I32 p0 = {0}, p0x = {10, 11};
  const I32 p1 = {1, 2}, p1x = {6};
  const I32 d0 = {3, 4}, d0x = {7, 8};
  ScheduledRequest first, chunk, decode;
  first.isPrefill = true; // its encoder runs now: 5 encoder slots
  first.queryLen = 3;
  first.pageTable = p0;
  first.encoderLen = 5;
  first.crossPageTable = p0x;
  chunk.isPrefill = true; // a later chunk: encoder K/V already cached
  chunk.queryLen = 2;
  chunk.contextLen = 4;
  chunk.pageTable = p1;
  chunk.encoderLen = 3;
  chunk.crossPageTable = p1x;
  decode.contextLen = 5;
  decode.pageTable = d0;
  decode.encoderLen = 6;
  decode.crossPageTable = d0x;
  AttentionMetadata md = build({first, chunk, decode}, l);
  EXPECT_EQ(md.slotMapping, (I64{0, 1, 2, 8, 9, 17}));
  EXPECT_EQ(md.encoderSeqLens, (I32{5, 3, 6}));
  EXPECT_EQ(md.encoderSeqStartLoc, (I32{0, 5, 8, 14}));
  EXPECT_EQ(md.maxEncoderSeqLen, 6);
  EXPECT_EQ(md.numEncoderTokens, 14);
  EXPECT_EQ(md.crossPageTableStride, 3);
  EXPECT_EQ(md.crossPageTables, (I32{10, 11, 0, 6, 0, 0, 7, 8, 0}));
  EXPECT_EQ(md.crossSlotMapping, (I64{40, 41, 42, 43, 44}));
  EXPECT_EQ(md.kvLens(true), llvm::ArrayRef<int32_t>(md.encoderSeqLens));
  AttentionMetadataView p = md.prefillView(), d = md.decodeView();
  EXPECT_EQ(vec(p.crossSlotMapping), (I64{40, 41, 42, 43, 44}));
  EXPECT_TRUE(d.crossSlotMapping.empty());
  EXPECT_EQ(vec(d.encoderSeqLens), I32{6});
  EXPECT_EQ(vec(d.crossPageTables), (I32{7, 8, 0}));
}

TEST(AttentionMetadata, BindingsPointIntoTheDeviceArrays) {
  // Device pointers stand in for the builder's upload: the host arrays.
  AttentionMetadata md = build(mixedStep());
  md.device.seqLens = md.seqLens.data();
  md.device.pageTables = md.pageTables.data();
  md.device.slotMapping = md.slotMapping.data();
  MixedBatchArgs mixed;
  bindMetadata(mixed, md);
  EXPECT_EQ(mixed.numQTokens, 11);
  EXPECT_EQ(mixed.pageTables, md.pageTables.data());
  EXPECT_EQ(mixed.pageTableStride, 4);
  EXPECT_EQ(mixed.seqLens, md.seqLens.data());
  DecodeArgs decode;
  bindMetadata(decode, md.decodeView());
  EXPECT_EQ(decode.numTokens, 3);
  EXPECT_EQ(decode.pageTables, md.pageTables.data() + 2 * 4);
  EXPECT_EQ(decode.pageTableStride, 4);
  EXPECT_EQ(decode.seqLens, md.seqLens.data() + 2);
  EXPECT_EQ(md.decodeView().device.slotMapping, md.slotMapping.data() + 8);
  AppendKVArgs append;
  bindSlots(append, md);
  EXPECT_EQ(append.numTokens, 11);
  EXPECT_EQ(append.slotMapping, md.slotMapping.data());
}

TEST(AttentionMetadataErrors, PrefillAfterDecode) {
  std::vector<ScheduledRequest> step = mixedStep();
  std::swap(step[1], step[2]);
  EXPECT_EQ(buildError(step),
            "attention metadata: request 2 is a prefill after decode "
            "request 1; prefills come first");
}

TEST(AttentionMetadataErrors, DecodesOfDifferentLengths) {
  std::vector<ScheduledRequest> step = mixedStep();
  step[4].queryLen = 2;
  EXPECT_EQ(buildError(step),
            "attention metadata: request 4: decode query length 2 differs "
            "from the first decode's 1; one step's decodes share one length");
  step[4].queryLen = 17;
  step[4].pageTable = kD1;
  EXPECT_TRUE(llvm::StringRef(buildError(step)).contains("at most 16"));
}

TEST(AttentionMetadataErrors, BlockTables) {
  std::vector<ScheduledRequest> step = mixedStep();
  step[0].queryLen = 7;   // 10 tokens need 3 pages: still fits
  step[0].contextLen = 6; // 13 tokens need 4
  EXPECT_EQ(buildError(step), "attention metadata: request 0: page table "
                              "has 3 pages, 13 tokens need 4");
  const I32 wide = {1, 2, 3, 4, 5};
  step = mixedStep();
  step[3].pageTable = wide;
  EXPECT_EQ(buildError(step), "attention metadata: request 3: page table "
                              "has 5 pages, more than the limit of 4");
  const I32 bad = {3, 12};
  step[3].pageTable = kD1;
  step[2].pageTable = bad;
  EXPECT_EQ(buildError(step), "attention metadata: request 2: page "
                              "table[1] = 12 is outside [0, 12)");
}

TEST(AttentionMetadataErrors, Oversize) {
  MetadataLimits l = limits();
  l.maxBatch = 4;
  EXPECT_EQ(buildError(mixedStep(), l),
            "attention metadata: 5 requests exceed the limit of 4");
  l = limits();
  l.maxTokens = 10;
  EXPECT_EQ(buildError(mixedStep(), l),
            "attention metadata: the requests up to 4 have 11 query tokens, "
            "more than the limit of 10");
  l = limits();
  l.maxBatch = 0;
  EXPECT_EQ(buildError(mixedStep(), l),
            "attention metadata: limit maxBatch must be >= 1, got 0");
}

TEST(AttentionMetadataErrors, BadLengths) {
  std::vector<ScheduledRequest> step = mixedStep();
  step[1].queryLen = 0;
  EXPECT_TRUE(llvm::StringRef(buildError(step))
                  .starts_with("attention metadata: request 1: queryLen = 0 "
                               "must be >= 1"));
}

TEST(AttentionMetadataErrors, CrossAttention) {
  const I32 table = {0}, cross = {1, 2};
  ScheduledRequest r;
  r.isPrefill = true;
  r.queryLen = 2;
  r.pageTable = table;
  r.encoderLen = 6;
  r.crossPageTable = cross;
  EXPECT_EQ(buildError({r}),
            "attention metadata: request 0 has encoder tokens but the limits "
            "allow no cross attention (maxCrossPagesPerSeq = 0)");
  MetadataLimits l = limits();
  l.maxCrossPagesPerSeq = 2;
  l.maxEncoderTokens = 5;
  EXPECT_EQ(buildError({r}, l),
            "attention metadata: the requests up to 0 write 6 encoder tokens, "
            "more than the limit of 5");
  r.encoderLen = 9;
  l.maxEncoderTokens = 16;
  EXPECT_EQ(buildError({r}, l), "attention metadata: request 0: cross page "
                                "table has 2 pages, 9 tokens need 3");
}

} // namespace
