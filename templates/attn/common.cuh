//===- common.cuh - device building blocks of the attn kernels -*- CUDA -*-===//
//
// Type traits, cp.async, mma.sync and FP8 dequantization shared by the kernel
// templates. NVRTC-compilable: CUDA headers only, no host std headers.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEMPLATES_COMMON_CUH
#define ATTN_TEMPLATES_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "attn/params.h"

namespace attn {

template <class T> struct IsFP8 {
  static constexpr bool value = false;
};
template <> struct IsFP8<__nv_fp8_e4m3> {
  static constexpr bool value = true;
};
template <> struct IsFP8<__nv_fp8_e5m2> {
  static constexpr bool value = true;
};

template <class A, class B> struct IsSame {
  static constexpr bool value = false;
};
template <class A> struct IsSame<A, A> {
  static constexpr bool value = true;
};

/// A compile-time bool as a type (NVRTC has no <type_traits>).
template <bool B> struct BoolConstant {
  static constexpr bool value = B;
};

template <bool B, class T, class F> struct Conditional {
  using type = T;
};
template <class T, class F> struct Conditional<false, T, F> {
  using type = F;
};

template <class T> __device__ __forceinline__ constexpr T ceilDiv(T a, T b) {
  return (a + b - 1) / b;
}

/// \brief A 16-bit float as float.
template <class T> __device__ __forceinline__ float toFloat(T x);
template <> __device__ __forceinline__ float toFloat(__half x) {
  return __half2float(x);
}
template <> __device__ __forceinline__ float toFloat(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
/// \brief Two floats packed into one register of 16-bit T (lo in bits 0-15).
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&h);
}

/// \brief Byte permute (PTX prmt.b32): result byte i = selector nibble i of
/// {b,a}.
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

/// \brief Element offset of (page, token-in-page, kv head) in a paged cache
/// of Config's layout (NHD: tokens x heads x dim; HND: heads x tokens x dim).
template <class Config>
__device__ __forceinline__ int64_t kvOffset(int64_t page, int offset, int head,
                                            int64_t pageStride) {
  constexpr int D = Config::kHeadDim;
  if constexpr (Config::kLayoutHND)
    return page * pageStride + (int64_t(head) * Config::kPageSize + offset) * D;
  else
    return page * pageStride +
           (int64_t(offset) * Config::kNumKVHeads + head) * D;
}

/// \brief Reports an id outside the cache (params.h, PageIdError): `id` as
/// read (a page id, or an append_kv slot saturated to INT32_MAX) and `row`
/// (the page table's row, or the token). One plain store: any thread that
/// meets a bad id may write, and one of them is reported. Not inlined: the
/// kernels' hot loops keep a branch to it, not its registers.
__device__ __noinline__ void reportPageId(PageIdError *error, int64_t id,
                                          int row) {
  const uint32_t low = uint32_t(int32_t(id < 0x7fffffff ? id : 0x7fffffff));
  *reinterpret_cast<volatile uint64_t *>(&error->report) =
      (uint64_t(0x80000000u | uint32_t(row)) << 32) | low;
}

/// \brief A page id read from a page table (`p`: DecodeParams or
/// PrefillParams), made safe to address with: one outside the cache reads
/// the cache's last page instead. One unsigned min on the address path (a
/// negative id is a large unsigned one).
template <class Params>
__device__ __forceinline__ int clampedPage(const Params &p, int page) {
  return int(min(uint32_t(page), p.lastPage));
}

/// \brief Reports `page`, read from row `row` of a page table, if it is
/// outside the cache. Kernels check an id once it has arrived (where it is
/// first used, or after the loads it addresses are issued), not where it
/// is loaded, so that page ids loaded ahead stay in flight.
template <class Params>
__device__ __forceinline__ void checkPage(const Params &p, int page, int row) {
  if (uint32_t(page) > p.lastPage)
    reportPageId(p.pageIdError, page, row);
}

//===----------------------------------------------------------------------===//
// FP8 -> f16 dequantization
//===----------------------------------------------------------------------===//

/// \brief Two FP8 values in one 16-bit value (lo in bits 0-7) to an f16x2
/// register (lo in bits 0-15). Every e4m3 and e5m2 value is exact in f16, so
/// FP8 caches run their MMAs in f16. e5m2 is f16's top byte; e4m3 uses the
/// conversion instruction where the arch has it (sm_89+) and, on sm_80, bit
/// placement that yields the value times 2^-8 (same subnormal rule in both
/// formats), which the kernels fold into their scales (kLog2Ratio).
template <class F> struct FP8ToHalf;
template <> struct FP8ToHalf<__nv_fp8_e5m2> {
  static constexpr int kLog2Ratio = 0;
  __device__ static __forceinline__ uint32_t convert(uint32_t pair) {
    return prmt(pair, 0, 0x1404); // byte i -> high byte of half i
  }
};
template <> struct FP8ToHalf<__nv_fp8_e4m3> {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  static constexpr int kLog2Ratio = -8; // bias 7 vs 15
  __device__ static __forceinline__ uint32_t convert(uint32_t pair) {
    uint32_t x = prmt(pair, 0, 0x1404);
    return (x & 0x80008000u) | ((x & 0x7f007f00u) >> 1);
  }
#else
  static constexpr int kLog2Ratio = 0;
  __device__ static __forceinline__ uint32_t convert(uint32_t pair) {
    uint32_t r;
    asm("{.reg .b16 lo;\n cvt.u16.u32 lo, %1;\n"
        " cvt.rn.f16x2.e4m3x2 %0, lo;}\n"
        : "=r"(r)
        : "r"(pair));
    return r;
  }
#endif
};

/// \brief Two FP8 values (lo in bits 0-7) of cache type KVT to a pair of
/// T (f16 or bf16) in one register, times 2^FP8ToHalf<KVT>::kLog2Ratio.
/// Exact: every FP8 value (and its 2^-8 multiple) is an f16 and a bf16.
template <class KVT, class T>
__device__ __forceinline__ uint32_t widenFP8Pair(uint32_t pair) {
  uint32_t halves = FP8ToHalf<KVT>::convert(pair);
  if constexpr (IsSame<T, __nv_bfloat16>::value) {
    float2 f = __half22float2(*reinterpret_cast<__half2 *>(&halves));
    halves = pack2<T>(f.x, f.y);
  }
  return halves;
}

/// 2^kLog2Ratio the dequantization of cache type KVT leaves (0 unless FP8).
template <class KVT, bool = IsFP8<KVT>::value> struct DequantRatio {
  static constexpr int kLog2 = 0;
};
template <class KVT> struct DequantRatio<KVT, true> {
  static constexpr int kLog2 = FP8ToHalf<KVT>::kLog2Ratio;
};

/// 2^e for an integer exponent in float range.
__device__ __forceinline__ float exp2i(int e) {
  return __int_as_float((e + 127) << 23);
}

/// \brief A prefill's score scale and output factor over a cache of type
/// KVT, KV head `kvHead`: an FP8 cache's K dequantization scale joins the
/// softmax scale, V's the output normalization; both also undo the
/// widening's 2^ratio. 16-bit caches: the softmax scale and 1.
template <class KVT, bool kPerHeadKVScale>
__device__ __forceinline__ void prefillScales(const PrefillParams &p,
                                              int kvHead, float &qkScale,
                                              float &vDequant) {
  qkScale = p.smScale;
  vDequant = 1.f;
  if constexpr (IsFP8<KVT>::value) {
    const int scaleIdx = kPerHeadKVScale ? kvHead : 0;
    const float unratio = exp2i(-DequantRatio<KVT>::kLog2);
    qkScale *= p.kScale[scaleIdx] * unratio;
    vDequant = p.vScale[scaleIdx] * unratio;
  }
}

//===----------------------------------------------------------------------===//
// cp.async
//===----------------------------------------------------------------------===//

__device__ __forceinline__ uint32_t smemAddr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// \brief Asynchronous global->shared copy of kBytes (4, 8 or 16); when
/// `valid` is false the destination is zero-filled and nothing is read.
template <int kBytes>
__device__ __forceinline__ void cpAsync(void *smem, const void *gmem,
                                        bool valid) {
  int srcBytes = valid ? kBytes : 0;
  if constexpr (kBytes == 16)
    asm volatile(
        "cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smemAddr(smem)),
        "l"(gmem), "r"(srcBytes));
  else
    asm volatile(
        "cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smemAddr(smem)),
        "l"(gmem), "n"(kBytes), "r"(srcBytes));
}

/// \brief cpAsync<16> for rows read once from DRAM (decode's K/V pages):
/// the L2 fetches the whole 128-byte line at the first 16-byte request
/// (.L2::128B). On an H200 +1.3-1.6 points of read bandwidth for decode;
/// a 256-byte prefetch lost 6-12 points on FP8 NHD caches, whose rows of
/// one head are 128 bytes (docs/perf-log/history.md, "Decode against the read
/// roof").
__device__ __forceinline__ void cpAsyncStream16(void *smem, const void *gmem,
                                                bool valid) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(
                   smemAddr(smem)),
               "l"(gmem), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void cpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

template <int kPending> __device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

//===----------------------------------------------------------------------===//
// mma.sync m16n8k16, fp32 accumulate
//===----------------------------------------------------------------------===//

/// \brief d += a * b for one m16n8k16 tile; T selects bf16 or f16 inputs.
template <class T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4],
                                         uint32_t b0, uint32_t b1) {
  if constexpr (IsSame<T, __nv_bfloat16>::value)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
}

/// \brief ldmatrix: four 8x8 b16 matrices; lane l gives the row address of
/// matrix l / 8.
__device__ __forceinline__ void ldmatrixX4(uint32_t (&r)[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smemAddr(p)));
}
__device__ __forceinline__ void ldmatrixX4Trans(uint32_t (&r)[4],
                                                const void *p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(smemAddr(p)));
}

/// \brief Shared-memory loads of 8 and 16 bytes as 32-bit words.
__device__ __forceinline__ void lds64(uint32_t (&r)[2], const void *p) {
  uint2 v = *reinterpret_cast<const uint2 *>(p);
  r[0] = v.x;
  r[1] = v.y;
}
__device__ __forceinline__ void lds128(uint32_t (&r)[4], const void *p) {
  uint4 v = *reinterpret_cast<const uint4 *>(p);
  r[0] = v.x;
  r[1] = v.y;
  r[2] = v.z;
  r[3] = v.w;
}

/// \brief 2^x by the SFU (ex2.approx: 2 ulp, exp2(-inf) = 0); softmax
/// weights need no more.
__device__ __forceinline__ float fastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// \brief tanh by the SFU (tanh.approx.f32, sm_75+: relative error about
/// 2^-11, docs/semantics.md, "Transcendentals"); a soft-capped score needs
/// no more than the 16-bit P it becomes.
__device__ __forceinline__ float fastTanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// -inf without <math.h>, which NVRTC does not have.
__device__ __forceinline__ float negInf() {
  return __int_as_float(0xff800000u);
}

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

} // namespace attn

#endif // ATTN_TEMPLATES_COMMON_CUH
