//===- MergeStates.cpp - combine partial attention states -----------------===//
#include "attn/runtime/kernels/MergeStates.h"
#include "attn/runtime/support/Error.h"
#include "codegen/EmitCuda.h"

#include "llvm/Support/FormatVariadic.h"

namespace attn::runtime {

namespace {

/// Lanes the kernel gives a row (templates/attn/merge_states.cuh): head_dim
/// / 8 rounded up to a power of two.
int lanesPerRow(int headDim) {
  int lanes = 1;
  while (lanes < headDim / 8)
    lanes *= 2;
  return lanes;
}

/// The bytes [begin, end) a tensor of `tokens` rows spans.
struct Span {
  uintptr_t begin = 0, end = 0;
  bool overlaps(const Span &o) const { return begin < o.end && o.begin < end; }
};
Span spanOf(const void *data, int64_t tokens, int64_t strideBytes,
            int64_t rowBytes) {
  auto begin = reinterpret_cast<uintptr_t>(data);
  return {begin, begin + uintptr_t((tokens - 1) * strideBytes + rowBytes)};
}

} // namespace

llvm::Expected<MergeStatesKernel>
MergeStatesKernel::create(const KernelSpec &spec, const MergeStatesVariant &,
                          std::shared_ptr<CudaLibrary> library) {
  if (spec.kind != KernelKind::MergeStates)
    return llvm::createStringError("merge_states: the spec is a " +
                                   std::string(toString(spec.kind)) +
                                   " kernel's");
  MergeStatesKernel kernel;
  if (llvm::Error error = kernel.bind(spec, std::move(library)))
    return std::move(error);
  return std::move(kernel);
}

llvm::Error MergeStatesKernel::checkArgs(const MergeStatesArgs &a) const {
  const KernelSpec &s = kernelSpec;
  auto fail = [](const llvm::Twine &m) {
    return llvm::createStringError("merge_states run: " + m.str());
  };
  if (a.dtype != s.qType || a.numHeads != s.numQHeads || a.headDim != s.headDim)
    return fail(llvm::formatv("states are {0} {1}x{2}; the kernel was "
                              "compiled for {3} {4}x{5}",
                              toString(a.dtype), a.numHeads, a.headDim,
                              toString(s.qType), s.numQHeads, s.headDim));
  if (a.numStates < 2 || a.numStates > kMaxMergeStates)
    return fail(llvm::formatv("numStates = {0}; a merge takes 2 to {1} states",
                              a.numStates, kMaxMergeStates));
  if (a.numTokens < 0 || a.numTokens > INT32_MAX)
    return fail(llvm::formatv("numTokens {0} out of range", a.numTokens));
  if (!a.out)
    return fail("out must not be null");
  const int bytes = sizeOf(a.dtype);
  const int64_t dense = int64_t(a.numHeads) * a.headDim;
  const int64_t statesStride =
      a.statesStrideToken ? a.statesStrideToken : dense;
  const int64_t outStride = a.outStrideToken ? a.outStrideToken : dense;
  for (auto [name, stride] : {std::pair{"statesStrideToken", statesStride},
                              {"outStrideToken", outStride}})
    if (stride < dense || stride % 8)
      return fail(llvm::formatv("{0} = {1} must be >= heads * head_dim ({2}) "
                                "and a multiple of 8",
                                name, stride, dense));
  // 16-byte vectors of 8 elements.
  auto misaligned = [](const void *p, int align) {
    return reinterpret_cast<uintptr_t>(p) % align != 0;
  };
  if (misaligned(a.out, 16))
    return fail("out must be 16-byte aligned");
  if (a.lse && misaligned(a.lse, 4))
    return fail("lse must be 4-byte aligned");
  if (a.numTokens == 0)
    return llvm::Error::success();
  const int64_t rowBytes = dense * bytes;
  const Span out = spanOf(a.out, a.numTokens, outStride * bytes, rowBytes);
  const Span lse =
      a.lse ? spanOf(a.lse, a.numTokens, a.numHeads * 4, a.numHeads * 4)
            : Span{};
  for (int i = 0; i < a.numStates; ++i) {
    if (!a.outs[i] || !a.lses[i])
      return fail(llvm::formatv("outs[{0}] and lses[{0}] must not be null", i));
    if (misaligned(a.outs[i], 16) || misaligned(a.lses[i], 4))
      return fail(llvm::formatv("outs[{0}] must be 16-byte and lses[{0}] "
                                "4-byte aligned",
                                i));
    // In place is one of the states exactly; a partial overlap would read
    // rows another thread has already written.
    Span state = spanOf(a.outs[i], a.numTokens, statesStride * bytes, rowBytes);
    bool same = a.outs[i] == a.out && statesStride == outStride;
    if (out.overlaps(state) && !same)
      return fail(llvm::formatv("out overlaps outs[{0}] without being it (with "
                                "the same stride): merge in place or into "
                                "separate memory",
                                i));
    Span stateLse =
        spanOf(a.lses[i], a.numTokens, a.numHeads * 4, a.numHeads * 4);
    if (a.lse && lse.overlaps(stateLse) && a.lse != a.lses[i])
      return fail(llvm::formatv("lse overlaps lses[{0}] without being it", i));
  }
  return llvm::Error::success();
}

llvm::Error MergeStatesKernel::run(const MergeStatesArgs &a,
                                   CUstream stream) const {
  if (llvm::Error err = checkArgs(a))
    return err;
  if (a.numTokens == 0)
    return llvm::Error::success();
  const int64_t dense = int64_t(a.numHeads) * a.headDim;
  MergeStatesParams p{};
  for (int i = 0; i < a.numStates; ++i) {
    p.outs[i] = a.outs[i];
    p.lses[i] = a.lses[i];
  }
  p.out = a.out;
  p.lse = a.lse;
  p.statesStrideToken = a.statesStrideToken ? a.statesStrideToken : dense;
  p.outStrideToken = a.outStrideToken ? a.outStrideToken : dense;
  p.numTokens = a.numTokens;
  p.numStates = a.numStates;
  const int threads = threadsPerBlock(kernelSpec);
  const int64_t total = a.numTokens * a.numHeads * lanesPerRow(a.headDim);
  void *args[] = {&p};
  ATTN_CU_CHECK(cuLaunchKernel(reinterpret_cast<CUfunction>(entry),
                               unsigned((total + threads - 1) / threads), 1, 1,
                               threads, 1, 1, 0, stream, args, nullptr));
  return llvm::Error::success();
}

} // namespace attn::runtime
