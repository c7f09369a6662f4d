//===- region_ops.h - MLIR's arith and math ops in C++ ----------*- C++ -*-===//
//
// What the ops of a score_mod / mask_mod region compute, as the generated
// Config's code calls them (compiler/Transforms/Modifiers.cpp writes one
// call per op, named as the op: attn::region::addi for arith.addi). C++'s
// own operators do not mean what MLIR's ops mean: signed overflow, a
// division by zero or a shift by the width is undefined behaviour that
// NVRTC folds into wrong masks, bool arithmetic is not i1 arithmetic, and
// `a * b + c` may become one fma. Here:
//
//   - integers wrap (two's complement), as MLIR's do;
//   - i1 is a 1-bit integer: true is -1 when signed, 1 when unsigned;
//   - where MLIR leaves a result undefined or poison, it is defined:
//     x / 0 and x % 0 are 0; INT_MIN / -1 is INT_MIN (wrapped) and
//     INT_MIN % -1 is 0; a shift by the width or more (the amount read
//     unsigned) is 0; fptosi and fptoui saturate, and NaN converts to 0;
//   - f32/f64 ops round once each, to nearest even (no contraction; an
//     addf/subf/mulf with fastmath<contract> is emitted as the plain
//     operator instead, which NVRTC may fuse into an fma).
//
// The header compiles for NVRTC and for the host, where the tests compare
// every op with MLIR's folder (test/unit/compiler/RegionOpsTest.cpp);
// docs/semantics.md states the same rules for users.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEMPLATES_REGION_OPS_H
#define ATTN_TEMPLATES_REGION_OPS_H

#include "attn/params.h"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ATTN_REGION_FN __host__ __device__ __forceinline__
#else
#include <cmath>
#include <cstdint>
#include <cstring>
#define ATTN_REGION_FN inline
#endif

namespace attn {

/// \brief attn.aux_load: element (i0, i1, i2) of an aux table; indices past
/// the table's rank are 0. A read outside the table's dimensions returns 0
/// and touches no memory.
template <class T>
ATTN_REGION_FN T auxLoad(const AuxTable &table, int32_t i0, int32_t i1 = 0,
                         int32_t i2 = 0) {
  if (uint32_t(i0) >= uint32_t(table.dims[0]) ||
      uint32_t(i1) >= uint32_t(table.dims[1]) ||
      uint32_t(i2) >= uint32_t(table.dims[2]))
    return T(0);
  int64_t at = (int64_t(i0) * table.dims[1] + i1) * table.dims[2] + i2;
  return static_cast<const T *>(table.data)[at];
}

namespace region {

/// The unsigned type and width of each integer region type.
template <class T> struct IntBits;
template <> struct IntBits<int32_t> {
  using U = uint32_t;
  static constexpr int width = 32;
  static constexpr int32_t min = -2147483647 - 1;
  static constexpr int32_t max = 2147483647;
};
template <> struct IntBits<int64_t> {
  using U = uint64_t;
  static constexpr int width = 64;
  static constexpr int64_t min = -9223372036854775807ll - 1;
  static constexpr int64_t max = 9223372036854775807ll;
};

//===--- Bit casts
//---------------------------------------------------------===//

template <class To, class From> ATTN_REGION_FN To bitcast(From x) {
  static_assert(sizeof(To) == sizeof(From), "bitcast keeps the width");
#if defined(__CUDA_ARCH__)
  To y;
  memcpy(&y, &x, sizeof y);
  return y;
#else
  To y;
  std::memcpy(&y, &x, sizeof y);
  return y;
#endif
}

//===--- Integer arithmetic (i32, i64)
//-------------------------------------===//

template <class T> ATTN_REGION_FN T addi(T a, T b) {
  using U = typename IntBits<T>::U;
  return T(U(a) + U(b));
}
template <class T> ATTN_REGION_FN T subi(T a, T b) {
  using U = typename IntBits<T>::U;
  return T(U(a) - U(b));
}
template <class T> ATTN_REGION_FN T muli(T a, T b) {
  using U = typename IntBits<T>::U;
  return T(U(a) * U(b));
}
/// Whether a signed division has no defined C++ result.
template <class T> ATTN_REGION_FN bool divUndefined(T a, T b) {
  return b == 0 || (a == IntBits<T>::min && b == T(-1));
}
template <class T> ATTN_REGION_FN T divsi(T a, T b) {
  if (divUndefined(a, b))
    return b == 0 ? T(0) : a; // INT_MIN / -1 wraps to INT_MIN
  return a / b;
}
template <class T> ATTN_REGION_FN T remsi(T a, T b) {
  return divUndefined(a, b) ? T(0) : a % b;
}
template <class T> ATTN_REGION_FN T divui(T a, T b) {
  using U = typename IntBits<T>::U;
  return b == 0 ? T(0) : T(U(a) / U(b));
}
template <class T> ATTN_REGION_FN T remui(T a, T b) {
  using U = typename IntBits<T>::U;
  return b == 0 ? T(0) : T(U(a) % U(b));
}
template <class T> ATTN_REGION_FN T ceildivsi(T a, T b) {
  if (divUndefined(a, b))
    return b == 0 ? T(0) : a;
  T q = a / b;
  return a % b != 0 && (a < 0) == (b < 0) ? q + 1 : q;
}
template <class T> ATTN_REGION_FN T floordivsi(T a, T b) {
  if (divUndefined(a, b))
    return b == 0 ? T(0) : a;
  T q = a / b;
  return a % b != 0 && (a < 0) != (b < 0) ? q - 1 : q;
}
template <class T> ATTN_REGION_FN T ceildivui(T a, T b) {
  using U = typename IntBits<T>::U;
  if (b == 0)
    return T(0);
  return T(U(a) / U(b) + (U(a) % U(b) != 0));
}
template <class T> ATTN_REGION_FN T andi(T a, T b) { return a & b; }
template <class T> ATTN_REGION_FN T ori(T a, T b) { return a | b; }
template <class T> ATTN_REGION_FN T xori(T a, T b) { return a ^ b; }
template <class T> ATTN_REGION_FN bool shiftTooFar(T amount) {
  using U = typename IntBits<T>::U;
  return U(amount) >= U(IntBits<T>::width);
}
template <class T> ATTN_REGION_FN T shli(T a, T b) {
  using U = typename IntBits<T>::U;
  return shiftTooFar(b) ? T(0) : T(U(a) << U(b));
}
template <class T> ATTN_REGION_FN T shrui(T a, T b) {
  using U = typename IntBits<T>::U;
  return shiftTooFar(b) ? T(0) : T(U(a) >> U(b));
}
template <class T> ATTN_REGION_FN T shrsi(T a, T b) {
  using U = typename IntBits<T>::U;
  if (shiftTooFar(b))
    return T(0);
  // Sign-filling, written on unsigned values.
  return a < 0 ? T(~(~U(a) >> U(b))) : T(U(a) >> U(b));
}
template <class T> ATTN_REGION_FN T minsi(T a, T b) { return a < b ? a : b; }
template <class T> ATTN_REGION_FN T maxsi(T a, T b) { return a > b ? a : b; }
template <class T> ATTN_REGION_FN T minui(T a, T b) {
  using U = typename IntBits<T>::U;
  return U(a) < U(b) ? a : b;
}
template <class T> ATTN_REGION_FN T maxui(T a, T b) {
  using U = typename IntBits<T>::U;
  return U(a) > U(b) ? a : b;
}
/// math.absi: |INT_MIN| wraps to INT_MIN.
template <class T> ATTN_REGION_FN T absi(T a) {
  using U = typename IntBits<T>::U;
  return a < 0 ? T(U(0) - U(a)) : a;
}
template <class T> ATTN_REGION_FN T ctpop(T a) {
  using U = typename IntBits<T>::U;
  U x = U(a);
  T n = 0;
  for (; x; x &= x - 1)
    ++n;
  return n;
}
/// math.ctlz and math.cttz count the width for 0.
template <class T> ATTN_REGION_FN T ctlz(T a) {
  using U = typename IntBits<T>::U;
  U x = U(a);
  T n = 0;
  for (U bit = U(1) << (IntBits<T>::width - 1); bit && !(x & bit); bit >>= 1)
    ++n;
  return n;
}
template <class T> ATTN_REGION_FN T cttz(T a) {
  using U = typename IntBits<T>::U;
  U x = U(a);
  T n = 0;
  for (U bit = 1; bit && !(x & bit); bit <<= 1)
    ++n;
  return n;
}

#define ATTN_REGION_CMPI(name, op, cast)                                       \
  template <class T> ATTN_REGION_FN bool cmpi##name(T a, T b) {                \
    using U = typename IntBits<T>::U;                                          \
    (void)sizeof(U);                                                           \
    return cast(a) op cast(b);                                                 \
  }
#define ATTN_REGION_SIGNED(x) (x)
#define ATTN_REGION_UNSIGNED(x) U(x)
ATTN_REGION_CMPI(Eq, ==, ATTN_REGION_SIGNED)
ATTN_REGION_CMPI(Ne, !=, ATTN_REGION_SIGNED)
ATTN_REGION_CMPI(Slt, <, ATTN_REGION_SIGNED)
ATTN_REGION_CMPI(Sle, <=, ATTN_REGION_SIGNED)
ATTN_REGION_CMPI(Sgt, >, ATTN_REGION_SIGNED)
ATTN_REGION_CMPI(Sge, >=, ATTN_REGION_SIGNED)
ATTN_REGION_CMPI(Ult, <, ATTN_REGION_UNSIGNED)
ATTN_REGION_CMPI(Ule, <=, ATTN_REGION_UNSIGNED)
ATTN_REGION_CMPI(Ugt, >, ATTN_REGION_UNSIGNED)
ATTN_REGION_CMPI(Uge, >=, ATTN_REGION_UNSIGNED)
#undef ATTN_REGION_CMPI
#undef ATTN_REGION_SIGNED
#undef ATTN_REGION_UNSIGNED

//===--- i1 arithmetic
//------------------------------------------------------===//
//
// A 1-bit integer: signed, true is -1 (so it is INT_MIN, and the smaller of
// the two); unsigned, true is 1. Each rule is the i32 rule above read in one
// bit.

ATTN_REGION_FN bool addi(bool a, bool b) { return a != b; }
ATTN_REGION_FN bool subi(bool a, bool b) { return a != b; }
ATTN_REGION_FN bool muli(bool a, bool b) { return a && b; }
// -1 / -1 wraps to -1; x / 0 is 0.
ATTN_REGION_FN bool divsi(bool a, bool b) { return a && b; }
ATTN_REGION_FN bool divui(bool a, bool b) { return a && b; }
ATTN_REGION_FN bool ceildivsi(bool a, bool b) { return a && b; }
ATTN_REGION_FN bool ceildivui(bool a, bool b) { return a && b; }
ATTN_REGION_FN bool floordivsi(bool a, bool b) { return a && b; }
ATTN_REGION_FN bool remsi(bool, bool) { return false; }
ATTN_REGION_FN bool remui(bool, bool) { return false; }
ATTN_REGION_FN bool andi(bool a, bool b) { return a && b; }
ATTN_REGION_FN bool ori(bool a, bool b) { return a || b; }
ATTN_REGION_FN bool xori(bool a, bool b) { return a != b; }
// A shift by true (1) is by the width.
ATTN_REGION_FN bool shli(bool a, bool b) { return a && !b; }
ATTN_REGION_FN bool shrui(bool a, bool b) { return a && !b; }
ATTN_REGION_FN bool shrsi(bool a, bool b) { return a && !b; }
ATTN_REGION_FN bool minsi(bool a, bool b) { return a || b; }
ATTN_REGION_FN bool maxsi(bool a, bool b) { return a && b; }
ATTN_REGION_FN bool minui(bool a, bool b) { return a && b; }
ATTN_REGION_FN bool maxui(bool a, bool b) { return a || b; }
ATTN_REGION_FN bool absi(bool a) { return a; }
ATTN_REGION_FN bool ctpop(bool a) { return a; }
ATTN_REGION_FN bool ctlz(bool a) { return !a; }
ATTN_REGION_FN bool cttz(bool a) { return !a; }
ATTN_REGION_FN bool cmpiEq(bool a, bool b) { return a == b; }
ATTN_REGION_FN bool cmpiNe(bool a, bool b) { return a != b; }
ATTN_REGION_FN bool cmpiSlt(bool a, bool b) { return a && !b; }
ATTN_REGION_FN bool cmpiSle(bool a, bool b) { return a || !b; }
ATTN_REGION_FN bool cmpiSgt(bool a, bool b) { return !a && b; }
ATTN_REGION_FN bool cmpiSge(bool a, bool b) { return !a || b; }
ATTN_REGION_FN bool cmpiUlt(bool a, bool b) { return !a && b; }
ATTN_REGION_FN bool cmpiUle(bool a, bool b) { return !a || b; }
ATTN_REGION_FN bool cmpiUgt(bool a, bool b) { return a && !b; }
ATTN_REGION_FN bool cmpiUge(bool a, bool b) { return a || !b; }

//===--- Integer casts
//-----------------------------------------------------===//

template <class To> ATTN_REGION_FN To extsi(bool a) {
  return a ? To(-1) : To(0);
}
template <class To> ATTN_REGION_FN To extsi(int32_t a) { return To(a); }
template <class To> ATTN_REGION_FN To extui(bool a) { return To(a ? 1 : 0); }
template <class To> ATTN_REGION_FN To extui(int32_t a) {
  return To(uint32_t(a));
}
/// The low bits of `a`.
template <class To, class From> ATTN_REGION_FN To trunci(From a) {
  using U = typename IntBits<From>::U;
  return To(U(a) & U(typename IntBits<To>::U(-1)));
}
template <> ATTN_REGION_FN bool trunci<bool, int32_t>(int32_t a) {
  return (a & 1) != 0;
}
template <> ATTN_REGION_FN bool trunci<bool, int64_t>(int64_t a) {
  return (a & 1) != 0;
}

//===--- Integer <-> float
//-------------------------------------------------===//

template <class F> ATTN_REGION_FN F sitofp(bool a) { return a ? F(-1) : F(0); }
template <class F, class T> ATTN_REGION_FN F sitofp(T a) { return F(a); }
template <class F> ATTN_REGION_FN F uitofp(bool a) { return a ? F(1) : F(0); }
template <class F, class T> ATTN_REGION_FN F uitofp(T a) {
  return F(typename IntBits<T>::U(a));
}
/// Rounds toward zero; saturates out of range; NaN is 0 (as the GPU's cvt).
template <class T, class F> ATTN_REGION_FN T fptosiInt(F x) {
  const F limit = F(typename IntBits<T>::U(1) << (IntBits<T>::width - 1));
  if (x != x)
    return T(0);
  if (x >= limit)
    return IntBits<T>::max;
  if (x <= -limit)
    return IntBits<T>::min;
  return T(x);
}
template <class T, class F> ATTN_REGION_FN T fptoui(F x) {
  using U = typename IntBits<T>::U;
  const F limit = F(2) * F(U(1) << (IntBits<T>::width - 1));
  if (x != x || x <= F(-1))
    return T(0);
  if (x >= limit)
    return T(U(-1));
  return T(U(x));
}
template <class T, class F> ATTN_REGION_FN T fptosi(F x) {
  return fptosiInt<T>(x);
}
// To i1: the low bit of the i32 result (-1 and 0 are i1's signed values).
template <> ATTN_REGION_FN bool fptosi<bool, float>(float x) {
  return (fptosiInt<int32_t>(x) & 1) != 0;
}
template <> ATTN_REGION_FN bool fptosi<bool, double>(double x) {
  return (fptosiInt<int32_t>(x) & 1) != 0;
}
template <> ATTN_REGION_FN bool fptoui<bool, float>(float x) {
  return (fptoui<int32_t>(x) & 1) != 0;
}
template <> ATTN_REGION_FN bool fptoui<bool, double>(double x) {
  return (fptoui<int32_t>(x) & 1) != 0;
}

//===--- Float arithmetic
//--------------------------------------------------===//

#if defined(__CUDA_ARCH__)
// The _rn intrinsics are never contracted into an fma.
ATTN_REGION_FN float addf(float a, float b) { return __fadd_rn(a, b); }
ATTN_REGION_FN float subf(float a, float b) { return __fsub_rn(a, b); }
ATTN_REGION_FN float mulf(float a, float b) { return __fmul_rn(a, b); }
ATTN_REGION_FN float divf(float a, float b) { return __fdiv_rn(a, b); }
ATTN_REGION_FN double addf(double a, double b) { return __dadd_rn(a, b); }
ATTN_REGION_FN double subf(double a, double b) { return __dsub_rn(a, b); }
ATTN_REGION_FN double mulf(double a, double b) { return __dmul_rn(a, b); }
ATTN_REGION_FN double divf(double a, double b) { return __ddiv_rn(a, b); }
ATTN_REGION_FN float sqrt(float a) { return __fsqrt_rn(a); }
ATTN_REGION_FN double sqrt(double a) { return __dsqrt_rn(a); }
ATTN_REGION_FN float rsqrt(float a) { return rsqrtf(a); }
ATTN_REGION_FN double rsqrt(double a) { return ::rsqrt(a); }
// arith.divf with fastmath<arcp> (or fast): a times the reciprocal of b,
// which is exact division's 1 / b and folds away for a constant b.
ATTN_REGION_FN float divfArcp(float a, float b) {
  return __fmul_rn(a, 1.0f / b);
}
ATTN_REGION_FN double divfArcp(double a, double b) {
  return __dmul_rn(a, 1.0 / b);
}
#else
// Host builds of this header (the tests) compile with -ffp-contract=off.
ATTN_REGION_FN float addf(float a, float b) { return a + b; }
ATTN_REGION_FN float subf(float a, float b) { return a - b; }
ATTN_REGION_FN float mulf(float a, float b) { return a * b; }
ATTN_REGION_FN float divf(float a, float b) { return a / b; }
ATTN_REGION_FN double addf(double a, double b) { return a + b; }
ATTN_REGION_FN double subf(double a, double b) { return a - b; }
ATTN_REGION_FN double mulf(double a, double b) { return a * b; }
ATTN_REGION_FN double divf(double a, double b) { return a / b; }
ATTN_REGION_FN float sqrt(float a) { return ::sqrtf(a); }
ATTN_REGION_FN double sqrt(double a) { return ::sqrt(a); }
ATTN_REGION_FN float rsqrt(float a) { return 1.0f / ::sqrtf(a); }
ATTN_REGION_FN double rsqrt(double a) { return 1.0 / ::sqrt(a); }
ATTN_REGION_FN float divfArcp(float a, float b) { return a * (1.0f / b); }
ATTN_REGION_FN double divfArcp(double a, double b) { return a * (1.0 / b); }
#endif

template <class F> ATTN_REGION_FN F negf(F a) { return -a; }
template <class F> ATTN_REGION_FN bool signBit(F a) {
  return sizeof(F) == 4 ? bitcast<int32_t>(float(a)) < 0
                        : bitcast<int64_t>(double(a)) < 0;
}
/// arith.maximumf / minimumf: NaN if either is; -0 < +0.
template <class F> ATTN_REGION_FN F maximumf(F a, F b) {
  if (a != a || b != b)
    return a != a ? a : b;
  if (a == b)
    return signBit(a) ? b : a;
  return a > b ? a : b;
}
template <class F> ATTN_REGION_FN F minimumf(F a, F b) {
  if (a != a || b != b)
    return a != a ? a : b;
  if (a == b)
    return signBit(a) ? a : b;
  return a < b ? a : b;
}
/// arith.maxnumf / minnumf: the other operand if one is NaN; -0 < +0.
template <class F> ATTN_REGION_FN F maxnumf(F a, F b) {
  if (a != a)
    return b;
  if (b != b)
    return a;
  return maximumf(a, b);
}
template <class F> ATTN_REGION_FN F minnumf(F a, F b) {
  if (a != a)
    return b;
  if (b != b)
    return a;
  return minimumf(a, b);
}

#define ATTN_REGION_CMPF(name, expr)                                           \
  template <class F> ATTN_REGION_FN bool cmpf##name(F a, F b) {                \
    bool unordered = a != a || b != b;                                         \
    (void)unordered;                                                           \
    return expr;                                                               \
  }
ATTN_REGION_CMPF(False, false)
ATTN_REGION_CMPF(Oeq, a == b)
ATTN_REGION_CMPF(Ogt, a > b)
ATTN_REGION_CMPF(Oge, a >= b)
ATTN_REGION_CMPF(Olt, a < b)
ATTN_REGION_CMPF(Ole, a <= b)
ATTN_REGION_CMPF(One, a<b || a> b)
ATTN_REGION_CMPF(Ord, !unordered)
ATTN_REGION_CMPF(Ueq, unordered || a == b)
ATTN_REGION_CMPF(Ugt, unordered || a > b)
ATTN_REGION_CMPF(Uge, unordered || a >= b)
ATTN_REGION_CMPF(Ult, unordered || a < b)
ATTN_REGION_CMPF(Ule, unordered || a <= b)
ATTN_REGION_CMPF(Une, unordered || a != b)
ATTN_REGION_CMPF(Uno, unordered)
ATTN_REGION_CMPF(True, true)
#undef ATTN_REGION_CMPF

//===--- Float casts
//-------------------------------------------------------===//

ATTN_REGION_FN double extf(float a) { return double(a); }
/// arith.truncf f64 -> f32, to nearest even unless a rounding mode says
/// otherwise: the nearest float, then one step where the mode wants the
/// other neighbour.
ATTN_REGION_FN float truncf(double a) { return float(a); }
ATTN_REGION_FN float nextFloat(float a, bool up) {
  // a is finite or infinite, never NaN, here.
  if (a == 0.0f)
    return up ? bitcast<float>(int32_t(1)) : -bitcast<float>(int32_t(1));
  int32_t bits = bitcast<int32_t>(a);
  bool away = (a > 0.0f) == up;
  return bitcast<float>(int32_t(away ? bits + 1 : bits - 1));
}
ATTN_REGION_FN float truncfUpward(double a) {
  float f = float(a);
  return double(f) < a ? nextFloat(f, true) : f;
}
ATTN_REGION_FN float truncfDownward(double a) {
  float f = float(a);
  return double(f) > a ? nextFloat(f, false) : f;
}
ATTN_REGION_FN float truncfTowardZero(double a) {
  float f = float(a);
  if (a > 0.0 && double(f) > a)
    return nextFloat(f, false);
  if (a < 0.0 && double(f) < a)
    return nextFloat(f, true);
  return f;
}
ATTN_REGION_FN float truncfToNearestEven(double a) { return float(a); }
ATTN_REGION_FN float truncfToNearestAway(double a) {
  float f = float(a);
  if (double(f) == a || !(f - f == 0.0f))
    return f; // exact, NaN or infinite
  // A tie sits exactly halfway between f and its other neighbour g; halves
  // of two floats' sum are exact in double.
  float g = nextFloat(f, a > double(f));
  if (g - g == 0.0f && (double(f) + double(g)) / 2 == a &&
      (g < 0.0f ? -g : g) > (f < 0.0f ? -f : f))
    return g;
  return f;
}

//===--- math
//---------------------------------------------------------------===//

#define ATTN_REGION_MATH1(name, f32, f64)                                      \
  ATTN_REGION_FN float name(float a) { return ::f32(a); }                      \
  ATTN_REGION_FN double name(double a) { return ::f64(a); }
ATTN_REGION_MATH1(absf, fabsf, fabs)
ATTN_REGION_MATH1(ceil, ceilf, ceil)
ATTN_REGION_MATH1(floor, floorf, floor)
ATTN_REGION_MATH1(trunc, truncf, trunc)
ATTN_REGION_MATH1(round, roundf, round)
ATTN_REGION_MATH1(roundeven, rintf, rint)
ATTN_REGION_MATH1(exp2, exp2f, exp2)
ATTN_REGION_MATH1(expm1, expm1f, expm1)
ATTN_REGION_MATH1(log2, log2f, log2)
ATTN_REGION_MATH1(log10, log10f, log10)
ATTN_REGION_MATH1(log1p, log1pf, log1p)
ATTN_REGION_MATH1(cbrt, cbrtf, cbrt)
ATTN_REGION_MATH1(sin, sinf, sin)
ATTN_REGION_MATH1(cos, cosf, cos)
ATTN_REGION_MATH1(tan, tanf, tan)
ATTN_REGION_MATH1(asin, asinf, asin)
ATTN_REGION_MATH1(acos, acosf, acos)
ATTN_REGION_MATH1(atan, atanf, atan)
ATTN_REGION_MATH1(sinh, sinhf, sinh)
ATTN_REGION_MATH1(cosh, coshf, cosh)
ATTN_REGION_MATH1(asinh, asinhf, asinh)
ATTN_REGION_MATH1(acosh, acoshf, acosh)
ATTN_REGION_MATH1(atanh, atanhf, atanh)
ATTN_REGION_MATH1(erf, erff, erf)
#undef ATTN_REGION_MATH1
// exp, log and tanh of f32 run on the SFU on the GPU, as the kernels' own
// softmax and soft-cap do (docs/semantics.md, "Transcendentals"): __expf
// (2 + 1.17 |x| ulp), __logf (2^-21.4 absolute in [0.5, 2], else 3 ulp) and
// tanh.approx.f32 (about 2^-11 relative). f64 and the host keep libm's.
#define ATTN_REGION_SFU1(name, f32, device, f64)                               \
  ATTN_REGION_FN float name(float a) {                                         \
    return ATTN_REGION_PICK(device, ::f32);                                    \
  }                                                                            \
  ATTN_REGION_FN double name(double a) { return ::f64(a); }
#if defined(__CUDA_ARCH__)
#define ATTN_REGION_PICK(device, host) device(a)
#else
#define ATTN_REGION_PICK(device, host) host(a)
#endif
ATTN_REGION_FN float sfuTanh(float a) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(a));
  return y;
#else
  return ::tanhf(a);
#endif
}
ATTN_REGION_SFU1(exp, expf, __expf, exp)
ATTN_REGION_SFU1(log, logf, __logf, log)
ATTN_REGION_SFU1(tanh, tanhf, sfuTanh, tanh)
#undef ATTN_REGION_SFU1
#undef ATTN_REGION_PICK
#define ATTN_REGION_MATH2(name, f32, f64)                                      \
  ATTN_REGION_FN float name(float a, float b) { return ::f32(a, b); }          \
  ATTN_REGION_FN double name(double a, double b) { return ::f64(a, b); }
ATTN_REGION_MATH2(remf, fmodf, fmod)
ATTN_REGION_MATH2(powf, powf, pow)
ATTN_REGION_MATH2(atan2, atan2f, atan2)
ATTN_REGION_MATH2(copysign, copysignf, copysign)
#undef ATTN_REGION_MATH2
ATTN_REGION_FN float fma(float a, float b, float c) { return ::fmaf(a, b, c); }
ATTN_REGION_FN double fma(double a, double b, double c) {
  return ::fma(a, b, c);
}
} // namespace region
} // namespace attn

#undef ATTN_REGION_FN

#endif // ATTN_TEMPLATES_REGION_OPS_H
