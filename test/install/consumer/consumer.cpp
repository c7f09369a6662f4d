// A host linked to attn's runtime only: it opens the kernel library its
// build made with attn_add_kernel_library, finds its decode kernel for each
// arch by variant, and with a GPU runs it on one request whose value rows
// are all equal (so every output element must equal that value, whatever
// the keys). Exit status 0 only if everything checks out.
#include "attn/runtime/cache/AotLibrary.h"
#include "attn/runtime/support/CudaHandles.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace attn;

static int fail(const char *what, llvm::Error error) {
  std::fprintf(stderr, "consumer: %s: %s\n", what,
               llvm::toString(std::move(error)).c_str());
  return 1;
}

static uint16_t bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

static float fromBf16(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

int main() {
  auto library = runtime::AotLibrary::open(KERNEL_LIBRARY);
  if (!library)
    return fail("open", library.takeError());
  DecodeVariant v;
  v.numQHeads = 8;
  v.numKVHeads = 2;
  for (Arch arch : {Arch::SM80, Arch::SM90a})
    if (!(*library)->find(runtime::kernelKey(v), arch)) {
      std::fprintf(stderr, "consumer: no kernel for %s\n",
                   toString(arch).data());
      return 1;
    }
  DecodeVariant other = v;
  other.headDim = 64;
  if (auto missing = (*library)->decode(other, Arch::SM90a)) {
    std::fprintf(stderr,
                 "consumer: found a kernel the library does not hold\n");
    return 1;
  } else {
    llvm::consumeError(missing.takeError());
  }
  std::printf("consumer: library %s holds %zu kernels\n", KERNEL_LIBRARY,
              (*library)->kernels().size());

  if (llvm::Error error = runtime::initCuda()) {
    std::printf("consumer: no GPU, kernels not run: %s\n",
                llvm::toString(std::move(error)).c_str());
    return 0;
  }
  auto arch = runtime::currentDeviceArch();
  if (!arch)
    return fail("arch", arch.takeError());
  auto kernel = (*library)->decode(v, *arch);
  if (!kernel)
    return fail("load", kernel.takeError());

  // One request of 100 tokens on pages 3, 0, 5, 1, 4, 2, 6 (7 pages of 16).
  const int seqLen = 100, pages = 8, dim = 128, kvHeads = 2, qHeads = 8;
  const float value = 0.75f;
  std::vector<uint16_t> k(size_t(pages) * 16 * kvHeads * dim),
      vals(k.size(), bf16(value));
  for (size_t i = 0; i < k.size(); ++i)
    k[i] = bf16(std::sin(float(i)) * 2.f);
  std::vector<uint16_t> q(size_t(qHeads) * dim);
  for (size_t i = 0; i < q.size(); ++i)
    q[i] = bf16(std::cos(float(i) * 0.37f));
  std::vector<int32_t> table = {3, 0, 5, 1, 4, 2, 6}, lens = {seqLen};
  auto upload = [](const void *data, size_t bytes) {
    auto buffer = runtime::DeviceBuffer::allocate(bytes);
    if (buffer)
      if (llvm::Error error = buffer->copyFromHost(data, bytes))
        return llvm::Expected<runtime::DeviceBuffer>(std::move(error));
    return buffer;
  };
  auto dq = upload(q.data(), q.size() * 2);
  auto dk = upload(k.data(), k.size() * 2);
  auto dv = upload(vals.data(), vals.size() * 2);
  auto dTable = upload(table.data(), table.size() * 4);
  auto dLens = upload(lens.data(), 4);
  auto dOut = runtime::DeviceBuffer::allocate(q.size() * 2);
  for (auto *b : {&dq, &dk, &dv, &dTable, &dLens, &dOut})
    if (!*b)
      return fail("buffers", b->takeError());
  auto stream = runtime::Stream::create();
  if (!stream)
    return fail("stream", stream.takeError());
  auto ws = (*kernel)->createWorkspace(1);
  if (!ws)
    return fail("workspace", ws.takeError());
  auto plan = (*kernel)->plan(lens, *ws, stream->get());
  if (!plan)
    return fail("plan", plan.takeError());
  runtime::DecodeArgs a;
  a.q = dq->ptr<void>();
  a.numTokens = 1;
  a.numQHeads = qHeads;
  a.headDim = dim;
  a.out = dOut->ptr<void>();
  a.cache = {dk->ptr<void>(),
             dv->ptr<void>(),
             ScalarType::BF16,
             kvHeads,
             dim,
             16,
             KVLayout::NHD,
             pages,
             0};
  a.pageTables = dTable->ptr<int32_t>();
  a.pageTableStride = int(table.size());
  a.seqLens = dLens->ptr<int32_t>();
  if (llvm::Error error = (*kernel)->run(*plan, a, stream->get()))
    return fail("run", std::move(error));
  std::vector<uint16_t> out(q.size());
  if (llvm::Error error = stream->synchronize())
    return fail("sync", std::move(error));
  if (llvm::Error error = dOut->copyToHost(out.data(), out.size() * 2))
    return fail("read", std::move(error));
  for (size_t i = 0; i < out.size(); ++i)
    if (!(std::fabs(fromBf16(out[i]) - value) < 1e-2f)) {
      std::fprintf(stderr, "consumer: out[%zu] = %g, expected %g\n", i,
                   fromBf16(out[i]), value);
      return 1;
    }
  std::printf("consumer: ran %s on %s: all %zu outputs = %g\n",
              (*kernel)->spec().uri().c_str(), toString(*arch).data(),
              out.size(), value);
  return 0;
}
