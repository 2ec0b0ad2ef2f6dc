// Fixed-width fp32 SIMD vectors and fp16/bf16 conversions for kernels. Compiled once per ISA
// level (ACLNN_ISA_LEVEL, see isa.h), everything lives in aclnn_cpu::ACLNN_ISA_NS::simd so the
// copies built with different -m flags never share a symbol.
//
//   level 2 (avx512): kWidth 16, fp16 via vcvtph2ps/vcvtps2ph, masked tail loads/stores
//   level 1 (avx2):   kWidth 8,  fp16 via F16C
//   level 0:          kWidth 4,  SSE2 (the x86-64 baseline) or portable code elsewhere;
//                     fp16 through integer bit manipulation
//
// Numerics, identical on every level for the same lane contents:
//   * fma(a, b, c) is a*b + c rounded once (vfmadd) on the AVX2 and AVX-512 levels, and with two
//     roundings on the baseline, which has no FMA unit (a software fma would be slow). Fused is
//     both more accurate and cheaper: GroupNorm's write pass, compute-bound with its inputs in
//     L2, took 0.76 ms instead of 1.0 ms per 10.5M bf16 elements on one Zen 4 core. So per-lane
//     results differ between the baseline and the other levels in the last bit of an fp32
//     intermediate; within a level nothing depends on the thread count. Plain a*b + c
//     expressions keep two roundings everywhere (setup.py passes -ffp-contract=off): kernels,
//     not the compiler, decide where a fused operation goes.
//   * bf16 -> fp32 is a 16-bit shift; fp32 -> bf16 rounds to nearest even on the integer bits,
//     NaN -> 0x7FC0 | sign, exactly like ml_dtypes. Where the CPU has AVX512-BF16 (and the
//     build's compiler knows it), level 2 converts with vcvtneps2bf16/vcvtne2ps2bf16 instead,
//     but only for vectors with no denormal and no NaN lane: the instruction flushes denormal
//     inputs to zero and keeps NaN payload bits, both unlike ml_dtypes, so such vectors take
//     the integer path. The result is the same bits either way; bf16_instructions() says
//     whether the instructions are in use (aclnn_cpu::set_bf16_instructions turns them off).
//   * fp16 conversions follow half.h bit for bit (hardware F16C rounding is RNE, subnormals
//     exact, NaN quieted).
//   * reduce_add sums lanes in a fixed pairwise tree, so a reduction's result depends only on
//     which values sit in which lane, never on threads.
// Results are *not* promised identical across levels (different kWidth, different lane order).
//
// Usage: VecF v = load(p); store(q, v); tails with load_partial(p, n) / store_partial(q, v, n),
// n in [0, kWidth): lanes >= n read as zero and memory past element n is never touched.
// Pairs: load_pair(p) / store_pair(q, v) move 2 * kWidth elements as two vectors, in a lane
// order of T's choosing (bf16: even and odd elements, which halves its conversion cost); for
// lane-wise math on operands of one storage type plus broadcasts (see "Pairs" below).
// store_run<kStream>(out, n, value) writes a whole elementwise run (head, body, tail), with
// streaming stores when kStream (see streams_worthwhile); stream_fence() ends a task that
// streamed. T is float, half_t or bfloat16_t everywhere; double for stores (and loads).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "aclnn_cpu/cache_info.h"
#include "aclnn_cpu/half.h"
#include "aclnn_cpu/isa.h"

// Forced inline, for the helpers of hot loops (here and in ops/): out of line, GCC passes a Pair
// (or a vector wider than the level's registers) through memory, and a helper taking lambdas
// reloads their captures after every store. Measured where each is used.
#define ACLNN_ALWAYS_INLINE inline __attribute__((always_inline))

#ifndef ACLNN_ISA_LEVEL
#error "simd.h is for kernel translation units compiled with -DACLNN_ISA_LEVEL=<n>"
#endif

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
// GCC 12's AVX-512 intrinsic headers trip -W(maybe-)uninitialized (their _mm512_undefined_*
// helpers); the warning points into the header, so silencing it around the include is enough.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#define ACLNN_SIMD_X86 1
#else
#define ACLNN_SIMD_X86 0
#endif

#if ACLNN_ISA_LEVEL >= 1 && !(ACLNN_SIMD_X86 && defined(__AVX2__) && defined(__F16C__))
#error "ACLNN_ISA_LEVEL 1 needs -mavx2 -mfma -mf16c"
#endif
#if ACLNN_ISA_LEVEL >= 2 && !(defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__))
#error "ACLNN_ISA_LEVEL 2 needs -mavx512f -mavx512bw -mavx512vl"
#endif

#if ACLNN_ISA_LEVEL == 2 && defined(__AVX512BF16__)
#define ACLNN_SIMD_BF16_INSTRUCTIONS 1
#else
#define ACLNN_SIMD_BF16_INSTRUCTIONS 0
#endif

namespace aclnn_cpu {
// True when the CPU has AVX512-BF16 and it has not been turned off (runtime/isa.cpp). Plain
// data read by the level-2 bf16 stores: a branch on it costs far less than the conversion.
extern bool g_bf16_instructions;

namespace ACLNN_ISA_NS {
namespace simd {

using aclnn_cpu::bfloat16_t;
using aclnn_cpu::half_t;
using aclnn_cpu::from_float;  // scalar paths: from_float<T>(float), to_float(T)
using aclnn_cpu::to_float;

#if ACLNN_ISA_LEVEL == 2
constexpr int kWidth = 16;
#elif ACLNN_ISA_LEVEL == 1
constexpr int kWidth = 8;
#else
constexpr int kWidth = 4;
#endif

typedef float VecF __attribute__((vector_size(kWidth * 4)));
typedef int32_t VecI __attribute__((vector_size(kWidth * 4)));   // also the compare-mask type
typedef uint32_t VecU __attribute__((vector_size(kWidth * 4)));  // bit manipulation
typedef VecI Mask;  // lanes all-ones (true) or zero (false)

// ---------------------------------------------------------------------------------------------
// Arithmetic

// x - (+0.0), not (+0.0) + x: the sum turns -0.0 into +0.0, so a negative zero coefficient
// (GroupNorm's with rstd 0) lost its sign on the vector paths and kept it on the scalar ones.
// GCC folds the subtraction into a plain broadcast.
inline VecF set1(float x) { return x - VecF{}; }
inline VecF zero() { return VecF{}; }
inline VecI set1_int(int32_t x) { return VecI{} + x; }

// See the header note: fused where the level has FMA, else two roundings.
inline VecF fma(VecF a, VecF b, VecF c) {
#if ACLNN_ISA_LEVEL == 2
  return (VecF)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif ACLNN_ISA_LEVEL == 1
  return (VecF)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
  return a * b + c;
#endif
}

// max/min with x86 maxps/minps semantics: max(a, b) = a > b ? a : b, so when either is NaN the
// result is b. std::max(x, lo) therefore equals max(lo, x).
inline VecF max(VecF a, VecF b) { return a > b ? a : b; }
inline VecF min(VecF a, VecF b) { return a < b ? a : b; }

inline Mask cmp_gt(VecF a, VecF b) { return a > b; }
inline Mask cmp_ge(VecF a, VecF b) { return a >= b; }
inline Mask cmp_lt(VecF a, VecF b) { return a < b; }
inline Mask cmp_le(VecF a, VecF b) { return a <= b; }
inline Mask cmp_eq(VecF a, VecF b) { return a == b; }
inline Mask cmp_ne(VecF a, VecF b) { return a != b; }  // true for NaN lanes
inline VecF select(Mask m, VecF if_true, VecF if_false) { return m ? if_true : if_false; }
inline VecI select(Mask m, VecI if_true, VecI if_false) { return m ? if_true : if_false; }

inline VecF abs(VecF a) { return (VecF)((VecU)a & 0x7fffffffu); }

inline VecF bitcast_float(VecI v) { return (VecF)v; }
inline VecI bitcast_int(VecF v) { return (VecI)v; }
inline VecF int_to_float(VecI v) { return __builtin_convertvector(v, VecF); }
// Truncates toward zero; lanes out of int32 range (or NaN) give INT32_MIN on x86.
inline VecI trunc_to_int(VecF v) { return __builtin_convertvector(v, VecI); }

// Sum of the lanes in a fixed pairwise order: lane i += lane i + w for w = kWidth/2, ..., 1.
inline float reduce_add(VecF v) {
#if ACLNN_SIMD_X86
  // The same tree with shuffles: each step adds the upper half of the live lanes to the lower.
  __m128 quad;
#if ACLNN_ISA_LEVEL == 2
  const __m512 z = (__m512)v;
  const __m256 oct = _mm256_add_ps(_mm512_castps512_ps256(z),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(z), 1)));
  quad = _mm_add_ps(_mm256_castps256_ps128(oct), _mm256_extractf128_ps(oct, 1));
#elif ACLNN_ISA_LEVEL == 1
  const __m256 oct = (__m256)v;
  quad = _mm_add_ps(_mm256_castps256_ps128(oct), _mm256_extractf128_ps(oct, 1));
#else
  quad = (__m128)v;
#endif
  const __m128 pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));          // lanes 0+2, 1+3
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 0x55)));  // (0+2)+(1+3)
#else
  float lane[kWidth];
  std::memcpy(lane, &v, sizeof v);
  for (int w = kWidth / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) lane[i] += lane[i + w];
  return lane[0];
#endif
}

// Lane i of the result is lane i - k of v (0 <= k < kWidth); the lanes below k get v's top
// lanes. For a vector whose top k lanes are zero (a partial load of at most kWidth - k values),
// that moves its values to lanes k and up and puts zeros below.
inline VecF rotate_lanes_up(VecF v, int k) {
#if ACLNN_ISA_LEVEL == 0
  // A constant shuffle per k: SSE2 has no variable lane permutation, and GCC expanded the
  // general form below lane by lane.
  static_assert(kWidth == 4, "the baseline's vectors are 4 lanes");
  switch (k) {
    case 0: return v;
    case 1: return __builtin_shufflevector(v, v, 3, 0, 1, 2);
    case 2: return __builtin_shufflevector(v, v, 2, 3, 0, 1);
    default: return __builtin_shufflevector(v, v, 1, 2, 3, 0);
  }
#else
  VecI iota;
  for (int i = 0; i < kWidth; ++i) iota[i] = i;
  return __builtin_shuffle(v, (iota - k) & (kWidth - 1));
#endif
}

inline VecF floor(VecF v) {
#if ACLNN_ISA_LEVEL == 2
  return (VecF)_mm512_roundscale_ps((__m512)v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
#elif ACLNN_ISA_LEVEL == 1
  return (VecF)_mm256_round_ps((__m256)v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
#else
  // |v| >= 2^23 is integral already (and NaN passes through); otherwise truncate and step down.
  const Mask small = abs(v) < set1(8388608.0f);
  const VecF t = int_to_float(trunc_to_int(select(small, v, zero())));
  const VecF f = select(t > v, t - set1(1.0f), t);
  // Keep the sign of zero like floorf: floor(-0.0) = -0.0, floor(-0.5) = -1.
  return select(small, (VecF)((VecU)f | ((VecU)v & 0x80000000u)), v);
#endif
}

// Round to nearest integer, ties to even (nearbyint in the default rounding mode).
inline VecF round_even(VecF v) {
#if ACLNN_ISA_LEVEL == 2
  return (VecF)_mm512_roundscale_ps((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#elif ACLNN_ISA_LEVEL == 1
  return (VecF)_mm256_round_ps((__m256)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
  // Adding and subtracting 2^23 makes the FPU round at the units place (ties to even).
  const VecF magnitude = abs(v);
  const Mask small = magnitude < set1(8388608.0f);
  const VecF rounded = (magnitude + set1(8388608.0f)) - set1(8388608.0f);
  return select(small, (VecF)((VecU)rounded | ((VecU)v & 0x80000000u)), v);
#endif
}

// ---------------------------------------------------------------------------------------------
// fp16 <-> fp32 on integer lanes (used where there is no F16C). Lanes hold the 16-bit pattern
// zero-extended to 32 bits. Same results as half.h, bit for bit (tests check all 65536 patterns
// and the rounding boundaries), with fewer operations: the baseline converts every fp16 element
// this way, so these two functions decide its fp16 speed.

// True when any lane of the mask is set. Used to skip the inf/NaN fix-ups, which typical data
// never needs; the result is the same with or without the skip.
ACLNN_ALWAYS_INLINE bool any(Mask m) {
#if ACLNN_SIMD_X86 && ACLNN_ISA_LEVEL == 0
  return _mm_movemask_epi8((__m128i)m) != 0;
#else
  VecI folded = m;
  int32_t lanes[kWidth];
  std::memcpy(lanes, &folded, sizeof lanes);
  int32_t acc = 0;
  for (int i = 0; i < kWidth; ++i) acc |= lanes[i];
  return acc != 0;
#endif
}

ACLNN_ALWAYS_INLINE VecF half_bits_to_float(VecI h) {
  const VecI magnitude = h & 0x7fff;
  // Normal: the exponent rebiased from 15 to 127 by one add on the shifted bits.
  VecI out = (magnitude << 13) + ((127 - 15) << 23);
  // Subnormal or zero: magnitude * 2^-24, exact in float (independent of the DAZ/FTZ modes).
  out = select(magnitude < 0x0400, (VecI)(int_to_float(magnitude) * set1(5.9604644775390625e-8f)), out);
  const Mask special = magnitude >= 0x7c00;
  if (any(special)) {
    // inf/NaN: a second rebias takes the exponent to 255; NaN also gets the quiet bit.
    out = out + (special & ((127 - 15) << 23));
    out = out | ((magnitude > 0x7c00) & 0x00400000);
  }
  return (VecF)(((h & 0x8000) << 16) | out);
}

ACLNN_ALWAYS_INLINE VecI float_to_half_bits(VecF v) {
  const VecI u = (VecI)v;
  const VecI magnitude = u & 0x7fffffff;  // non-negative, so signed compares are fine
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
  VecI out = (magnitude + (0xfff - ((127 - 15) << 23)) + ((magnitude >> 13) & 1)) >> 13;
  // Below 2^-14: adding 0.5f makes the FPU round at 2^-24, the half subnormal step (half.h).
  out = select(magnitude < 0x38800000, (VecI)((VecF)magnitude + set1(0.5f)) - 0x3f000000, out);
  const Mask big = magnitude >= 0x477ff000;  // rounds to inf, or is inf or NaN
  if (any(big)) {
    const VecI nan = 0x7e00 | ((magnitude >> 13) & 0x3ff);
    out = select(big, select(magnitude > 0x7f800000, nan, set1_int(0x7c00)), out);
  }
  return ((u >> 16) & 0x8000) | out;
}

// fp32 -> bf16 bits (zero-extended in 32-bit lanes): round to nearest even on the integer
// bits; NaN -> quiet 0x7FC0 with the sign kept (ml_dtypes' result).
// NaN lanes are first replaced by sign | 0x7FC00000, which the rounding then leaves alone (its
// low half is zero), so the NaN fix costs a compare and one masked ternary-logic op on AVX-512
// (the vector ALUs are the bottleneck of bf16 stores on CPUs that split 512-bit ops).
ACLNN_ALWAYS_INLINE VecI float_to_bf16_bits(VecF v) {
#if ACLNN_ISA_LEVEL == 2
  const __mmask16 nan = _mm512_cmp_ps_mask((__m512)v, (__m512)v, _CMP_UNORD_Q);
  // 0xEA: (u & B) | C with u = sign source, B = 0x80000000, C = 0x7FC00000
  const VecU u = (VecU)_mm512_mask_ternarylogic_epi32((__m512i)v, nan, _mm512_set1_epi32(int(0x80000000u)),
                                                       _mm512_set1_epi32(0x7fc00000), 0xEA);
#elif ACLNN_ISA_LEVEL == 1
  // Without AVX-512's masked ternary logic the NaN fix costs five vector operations, as many as
  // the rounding: it runs only for a vector with a NaN lane (found by one unordered compare and
  // a test), which real data almost never has.
  const __m256 nan = _mm256_cmp_ps((__m256)v, (__m256)v, _CMP_UNORD_Q);
  VecU u = (VecU)v;
  if (__builtin_expect(!_mm256_testz_ps(nan, nan), 0))
    u = (VecU)_mm256_blendv_ps((__m256)v, (__m256)((u & 0x80000000u) | 0x7fc00000u), nan);
#else
  const VecU raw = (VecU)v;
  const VecI is_nan = (VecI)(raw & 0x7fffffffu) > 0x7f800000;
  const VecU u = (VecU)select(is_nan, (VecI)((raw & 0x80000000u) | 0x7fc00000u), (VecI)raw);
#endif
  return (VecI)(bf16_rounded(u) >> 16);
}

// ---------------------------------------------------------------------------------------------
// 16-bit lane packing: kWidth uint16 values <-> 32-bit lanes (zero-extended).

ACLNN_ALWAYS_INLINE VecI load_u16(const uint16_t* p) {
#if ACLNN_ISA_LEVEL == 2
  return (VecI)_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif ACLNN_ISA_LEVEL == 1
  return (VecI)_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#elif ACLNN_SIMD_X86
  return (VecI)_mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)),
                                  _mm_setzero_si128());
#else
  VecI out;
  for (int i = 0; i < kWidth; ++i) out[i] = p[i];
  return out;
#endif
}

// Stores the low 16 bits of each lane (lanes must hold values in [0, 0xFFFF]).
ACLNN_ALWAYS_INLINE void store_u16(uint16_t* p, VecI v) {
#if ACLNN_ISA_LEVEL == 2
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16((__m512i)v));
#elif ACLNN_ISA_LEVEL == 1
  // packus works per 128-bit half: [v0..3 v0..3 | v4..7 v4..7]; gather qwords 0 and 2.
  const __m256i packed = _mm256_packus_epi32((__m256i)v, (__m256i)v);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
#elif ACLNN_SIMD_X86
  // SSE2 only has a signed saturating pack: sign-extend the low 16 bits first so every value
  // is in int16 range and its bit pattern survives.
  const __m128i extended = _mm_srai_epi32(_mm_slli_epi32((__m128i)v, 16), 16);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi32(extended, extended));
#else
  for (int i = 0; i < kWidth; ++i) p[i] = uint16_t(v[i]);
#endif
}

// ---------------------------------------------------------------------------------------------
// Loads and stores. Call as load(p) / store(p, v); the explicit form load<T>(p) works too.

template <class T>
VecF load(const T* p);
template <class T>
void store(T* p, VecF v);

template <>
inline VecF load<float>(const float* p) {
  VecF v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <>
inline void store<float>(float* p, VecF v) {
  std::memcpy(p, &v, sizeof v);
}

template <>
ACLNN_ALWAYS_INLINE VecF load<bfloat16_t>(const bfloat16_t* p) {
  return (VecF)(load_u16(reinterpret_cast<const uint16_t*>(p)) << 16);
}
// Lanes vcvtneps2bf16 would convert unlike ml_dtypes: denormals (0x20), quiet NaN (0x01) and
// signalling NaN (0x80), for vfpclassps.
constexpr int kBf16Fixups = 0x20 | 0x01 | 0x80;

inline bool bf16_instructions() {
#if ACLNN_SIMD_BF16_INSTRUCTIONS
  return __atomic_load_n(&aclnn_cpu::g_bf16_instructions, __ATOMIC_RELAXED);
#else
  return false;
#endif
}

#if ACLNN_ISA_LEVEL == 2
// The kWidth values of v in a 16-bit format, in a register: what store<T> writes (and
// store_partial, masked, without a trip through memory).
template <class T>
ACLNN_ALWAYS_INLINE __m256i narrow16(VecF v);
template <>
ACLNN_ALWAYS_INLINE __m256i narrow16<bfloat16_t>(VecF v) {
#if ACLNN_SIMD_BF16_INSTRUCTIONS
  if (bf16_instructions() && _mm512_fpclass_ps_mask((__m512)v, kBf16Fixups) == 0)
    return (__m256i)_mm512_cvtneps_pbh((__m512)v);
#endif
  return _mm512_cvtepi32_epi16((__m512i)float_to_bf16_bits(v));
}
template <>
ACLNN_ALWAYS_INLINE __m256i narrow16<half_t>(VecF v) {
  return _mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
#endif

template <>
ACLNN_ALWAYS_INLINE void store<bfloat16_t>(bfloat16_t* p, VecF v) {
#if ACLNN_ISA_LEVEL == 2
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow16<bfloat16_t>(v));
#else
  store_u16(reinterpret_cast<uint16_t*>(p), float_to_bf16_bits(v));
#endif
}

template <>
ACLNN_ALWAYS_INLINE VecF load<half_t>(const half_t* p) {
#if ACLNN_ISA_LEVEL == 2
  return (VecF)_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif ACLNN_ISA_LEVEL == 1
  return (VecF)_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
  return half_bits_to_float(load_u16(reinterpret_cast<const uint16_t*>(p)));
#endif
}
template <>
ACLNN_ALWAYS_INLINE void store<half_t>(half_t* p, VecF v) {
#if ACLNN_ISA_LEVEL == 2
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow16<half_t>(v));
#elif ACLNN_ISA_LEVEL == 1
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT));
#else
  store_u16(reinterpret_cast<uint16_t*>(p), float_to_half_bits(v));
#endif
}

// fp64 vectors (VecD, kWidthD lanes in one register's width); their arithmetic is further down.
constexpr int kWidthD = kWidth / 2;
typedef double VecD __attribute__((vector_size(kWidth * 4)));
typedef int64_t VecL __attribute__((vector_size(kWidth * 4)));  // bits and compare masks

// The low and high halves of v's lanes, widened to double (exactly).
struct HalvesD {
  VecD lo, hi;
};
inline HalvesD widen(VecF v) {
#if ACLNN_ISA_LEVEL == 2
  return {(VecD)_mm512_cvtps_pd(_mm512_castps512_ps256((__m512)v)),
          (VecD)_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd((__m512)v), 1)))};
#elif ACLNN_ISA_LEVEL == 1
  return {(VecD)_mm256_cvtps_pd(_mm256_castps256_ps128((__m256)v)),
          (VecD)_mm256_cvtps_pd(_mm256_extractf128_ps((__m256)v, 1))};
#else
  HalvesD h;
  for (int i = 0; i < kWidthD; ++i) h.lo[i] = double(v[i]), h.hi[i] = double(v[kWidthD + i]);
  return h;
#endif
}

// float64 (softmax's out may be float64): values are rounded to / widened from fp32.
template <>
inline VecF load<double>(const double* p) {
  VecF v;
  for (int i = 0; i < kWidth; ++i) v[i] = float(p[i]);
  return v;
}
template <>
inline void store<double>(double* p, VecF v) {
  const HalvesD h = widen(v);
  std::memcpy(p, &h.lo, sizeof h.lo);
  std::memcpy(p + kWidthD, &h.hi, sizeof h.hi);
}

// Tails: n in [0, kWidth). AVX-512 uses masked moves; elsewhere fp32 on AVX2 uses vmaskmov and the
// rest goes through a small buffer copied element by element (a constant-trip loop, so it unrolls
// instead of becoming a memcpy call).
#if ACLNN_ISA_LEVEL == 1
inline __m256i lanes_below(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif

template <class T>
inline VecF load_partial(const T* p, int64_t n) {
#if ACLNN_ISA_LEVEL == 2
  const __mmask16 mask = __mmask16((1u << n) - 1u);
  if constexpr (sizeof(T) == 4) {
    return (VecF)_mm512_maskz_loadu_ps(mask, p);
  } else if constexpr (sizeof(T) == 2) {
    const __m256i raw = _mm256_maskz_loadu_epi16(mask, p);  // widened as load<T> widens
    if constexpr (std::is_same<T, half_t>::value) return (VecF)_mm512_cvtph_ps(raw);
    else return (VecF)((VecI)_mm512_cvtepu16_epi32(raw) << 16);
  }
#elif ACLNN_ISA_LEVEL == 1
  if constexpr (sizeof(T) == 4) {
    return (VecF)_mm256_maskload_ps(reinterpret_cast<const float*>(p), lanes_below(n));
  } else if constexpr (sizeof(T) == 2) {
    // Whole pairs with a 32-bit masked load, an odd last element blended in: no byte-wise
    // buffer, whose narrow stores would stall the wide load (failed store forwarding).
    const __m128i pairs = _mm_cmpgt_epi32(_mm_set1_epi32(int(n / 2)), _mm_setr_epi32(0, 1, 2, 3));
    __m128i raw = _mm_maskload_epi32(reinterpret_cast<const int*>(p), pairs);
    if (n & 1) {
      const uint16_t last = reinterpret_cast<const uint16_t*>(p)[n - 1];
      const __m128i at_last = _mm_cmpeq_epi16(_mm_set1_epi16(short(n - 1)), _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7));
      raw = _mm_or_si128(raw, _mm_and_si128(at_last, _mm_set1_epi16(short(last))));
    }
    T buffer[kWidth];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(buffer), raw);
    return load(static_cast<const T*>(buffer));
  }
#endif
  T buffer[kWidth] = {};
  for (int i = 0; i < kWidth; ++i)
    if (i < n) buffer[i] = p[i];
  return load(static_cast<const T*>(buffer));
}

template <class T>
inline void store_partial(T* p, VecF v, int64_t n) {
#if ACLNN_ISA_LEVEL == 2
  const __mmask16 mask = __mmask16((1u << n) - 1u);
  if constexpr (sizeof(T) == 4) {
    _mm512_mask_storeu_ps(p, mask, (__m512)v);
    return;
  } else if constexpr (sizeof(T) == 2) {
    __m256i raw = narrow16<T>(v);
    // Keep the narrowing in a register: GCC would otherwise fuse it with the masked store into
    // a masked vpmovdw to memory, which is very slow on AMD Zen 4.
    __asm__("" : "+v"(raw));
    _mm256_mask_storeu_epi16(p, mask, raw);
    return;
  }
#elif ACLNN_ISA_LEVEL == 1
  if constexpr (sizeof(T) == 4) {
    _mm256_maskstore_ps(reinterpret_cast<float*>(p), lanes_below(n), (__m256)v);
    return;
  } else if constexpr (sizeof(T) == 2) {
    T buffer[kWidth];
    store(buffer, v);
    __m128i raw;
    std::memcpy(&raw, buffer, sizeof raw);
    const __m128i pairs = _mm_cmpgt_epi32(_mm_set1_epi32(int(n / 2)), _mm_setr_epi32(0, 1, 2, 3));
    _mm_maskstore_epi32(reinterpret_cast<int*>(p), pairs, raw);
    if (n & 1) p[n - 1] = buffer[n - 1];
    return;
  }
#endif
  T buffer[kWidth];
  store(buffer, v);
  for (int i = 0; i < kWidth; ++i)
    if (i < n) p[i] = buffer[i];
}

// ---------------------------------------------------------------------------------------------
// Non-temporal ("streaming") stores, for outputs too big to stay in cache: they skip the
// read-for-ownership a normal store does and do not evict the inputs. stream(p, v) needs p
// aligned to kStreamAlign<T> bytes (one vector of T; use stream_head() to peel up to there),
// and a task must call stream_fence() before its results may be read by another thread.
// Whether to stream is the caller's choice: streams_worthwhile(bytes) says whether an op moving
// that many bytes overflows the last-level cache. Values stored are the same either way.

template <class T>
constexpr std::size_t kStreamAlign = kWidth * sizeof(T) < 64 ? kWidth * sizeof(T) : 64;

// Where the store helpers below actually stream: only where one instruction writes a whole
// 64-byte line. Measured on Zen 4 (softmax backward, [32, 512, 512], 2 threads): 32-byte
// streaming stores, even back to back filling whole lines, took 4.9 ms against 2.8 ms with
// normal stores (fp32 on the AVX2 level), and 3.6 ms against 1.3 ms for fp16 on AVX-512
// (32-byte vcvtps2ph results); 64-byte ones gain (bf16 pairs 1.2 ms against 1.5 ms). So
// single vectors stream on the AVX-512 level for fp32 only, pairs for fp32 and 16-bit types,
// and the narrower levels never stream (stream() itself still works everywhere).
template <class T>
constexpr bool kLineStreams = ACLNN_ISA_LEVEL == 2 && sizeof(T) == 4;
template <class T>
constexpr bool kLinePairStreams = ACLNN_ISA_LEVEL == 2 && (sizeof(T) == 4 || sizeof(T) == 2);

// p is a multiple of `align` bytes (a power of two).
template <std::size_t align, class T>
inline bool aligned_to(const T* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & (align - 1)) == 0;
}

// Elements to store normally before p + head is `align`-aligned (at most n); n if p cannot get
// there (not even element-aligned).
template <std::size_t align, class T>
inline int64_t head_to(const T* p, int64_t n) {
  const std::uintptr_t misalign = reinterpret_cast<std::uintptr_t>(p) & (align - 1);
  if (misalign == 0) return 0;
  if (misalign % sizeof(T) != 0) return n;
  const int64_t head = int64_t((align - misalign) / sizeof(T));
  return head < n ? head : n;
}

template <class T>
inline bool stream_aligned(const T* p) {
  return aligned_to<kStreamAlign<T>>(p);
}

template <class T>
inline int64_t stream_head(const T* p, int64_t n) {
  return head_to<kStreamAlign<T>>(p, n);
}

template <class T>
void stream(T* p, VecF v);

template <>
inline void stream<float>(float* p, VecF v) {
#if ACLNN_ISA_LEVEL == 2
  _mm512_stream_ps(p, (__m512)v);
#elif ACLNN_ISA_LEVEL == 1
  _mm256_stream_ps(p, (__m256)v);
#elif ACLNN_SIMD_X86
  _mm_stream_ps(p, (__m128)v);
#else
  store(p, v);
#endif
}

namespace detail {
// Streams kWidth 16-bit values held in the low halves of 32-bit lanes (values <= 0xFFFF).
inline void stream_u16(uint16_t* p, VecI v) {
#if ACLNN_ISA_LEVEL == 2
  __m256i packed = _mm512_cvtepi32_epi16((__m512i)v);
  _mm256_stream_si256(reinterpret_cast<__m256i*>(p), packed);
#elif ACLNN_ISA_LEVEL == 1
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32((__m256i)v, (__m256i)v), 0x08);
  _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
#elif ACLNN_SIMD_X86
  const __m128i extended = _mm_srai_epi32(_mm_slli_epi32((__m128i)v, 16), 16);
  const __m128i packed = _mm_packs_epi32(extended, extended);
  _mm_stream_si64(reinterpret_cast<long long*>(p), _mm_cvtsi128_si64(packed));
#else
  store_u16(p, v);
#endif
}
}  // namespace detail

template <>
inline void stream<bfloat16_t>(bfloat16_t* p, VecF v) {
  detail::stream_u16(reinterpret_cast<uint16_t*>(p), float_to_bf16_bits(v));
}

template <>
inline void stream<half_t>(half_t* p, VecF v) {
#if ACLNN_ISA_LEVEL == 2
  _mm256_stream_si256(reinterpret_cast<__m256i*>(p),
                      _mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif ACLNN_ISA_LEVEL == 1
  _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT));
#else
  detail::stream_u16(reinterpret_cast<uint16_t*>(p), float_to_half_bits(v));
#endif
}

template <>
inline void stream<double>(double* p, VecF v) {
  const HalvesD h = widen(v);
#if ACLNN_ISA_LEVEL == 2
  _mm512_stream_pd(p, (__m512d)h.lo);
  _mm512_stream_pd(p + kWidthD, (__m512d)h.hi);
#elif ACLNN_ISA_LEVEL == 1
  _mm256_stream_pd(p, (__m256d)h.lo);
  _mm256_stream_pd(p + kWidthD, (__m256d)h.hi);
#elif ACLNN_SIMD_X86
  _mm_stream_pd(p, (__m128d)h.lo);
  _mm_stream_pd(p + kWidthD, (__m128d)h.hi);
#else
  (void)h;
  store(p, v);
#endif
}

inline void stream_fence() {
#if ACLNN_SIMD_X86
  _mm_sfence();
#endif
}

// ---------------------------------------------------------------------------------------------
// Loads ahead of stores (4K aliasing). A load waits for every older store in flight whose
// address agrees with its own in bits 0-11 (the CPU compares those first), so an elementwise
// loop whose output sits a little past an input modulo 4096 bytes makes each iteration's loads
// wait for the previous iteration's store. NumPy puts big arrays 16 bytes into a page and
// 64-byte-aligned outputs sit 48 bytes further: softmax backward bf16 [64, 512, 512], one
// thread, took 7.7 ms against 3.4 ms with all three arrays at the same page offset, GroupNorm
// backward bf16 N1 C128 256x256 5.0 ms against 3.1 (Zen 4). Computing each value a few steps
// before storing it puts those loads ahead of the stores they would alias: the slow layouts
// then run as fast as the others (offsets up to two steps are covered). Values and the order
// of stores within a run are unchanged.

// put(i, make(i)) for i = i0, i0 + step, ... while a whole step fits below end, with make()
// evaluated two steps before the matching put(); returns the first index not done. Two named
// values rather than an array, and callers' put lambdas always inlined taking values: with an
// array, or a Pair passed by reference, GCC kept the values on the stack and the bf16 rows of
// softmax went from 3.1 to 6.5 ms instead of faster.
template <class Make, class Put>
ACLNN_ALWAYS_INLINE int64_t pipelined(int64_t i, int64_t end, int64_t step, Make&& make, Put&& put) {
  if (end - i >= 3 * step) {
    auto first = make(i), second = make(i + step);
    for (; i + 3 * step <= end; i += step) {
      const auto third = make(i + 2 * step);
      put(i, first);
      first = second;
      second = third;
    }
    put(i, first);
    put(i + step, second);
    i += 2 * step;
  }
  for (; i + step <= end; i += step) put(i, make(i));
  return i;
}

// Calls fn(i, count) for the vectors of [0, n): count is kWidth, but n - i for a last partial
// vector (its lanes loaded with load_partial). Forced inline, as store_run below.
template <class Fn>
ACLNN_ALWAYS_INLINE void for_each_vector(int64_t n, Fn&& fn) {
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth) fn(i, int64_t(kWidth));
  if (i < n) fn(i, n - i);
}

// Stores a run of n elementwise results: value(i, count) returns lanes [i, i + count), where
// count is kWidth except for a partial head or tail (load its inputs with load_partial then).
// With kStream the aligned middle of the run goes through streaming stores; the values stored
// are the same either way. Values are computed ahead of their stores (see pipelined).
// Forced inline, like store_run_pairs: out of line, every value the lambdas capture by
// reference is reloaded after each store (an intrinsic store may alias anything), which cost
// GroupNorm's plane writes 8-10 loads per pair step.
template <bool kStream, class T, class Value>
ACLNN_ALWAYS_INLINE void store_run(T* out, int64_t n, Value&& value) {
  const auto full = [&](int64_t i) { return value(i, int64_t(kWidth)); };
  int64_t i = 0;
  if constexpr (kStream && kLineStreams<T>) {
    const int64_t head = stream_head(out, n);
    if (head < n && n - head >= kWidth) {
      if (head > 0) store_partial(out, value(int64_t(0), head), head);
      i = pipelined(head, n, kWidth, full,
                    [&](int64_t j, VecF v) __attribute__((always_inline)) { stream(out + j, v); });
    }
  }
  i = pipelined(i, n, kWidth, full, [&](int64_t j, VecF v) __attribute__((always_inline)) { store(out + j, v); });
  if (i < n) store_partial(out + i, value(i, n - i), n - i);
}

// One full vector at p: streamed when kStream and p is stream-aligned, else a normal store. For
// loops whose lane grouping must not depend on addresses (a fused reduction), where store_run's
// peeling would shift the lanes.
template <bool kStream, class T>
ACLNN_ALWAYS_INLINE void store_or_stream(T* p, VecF v) {
  if (kStream && kLineStreams<T> && stream_aligned(p)) stream(p, v);
  else store(p, v);
}

// True when an op moving `bytes` (inputs read plus outputs written) overflows the last-level
// cache `multiple` times over, so its outputs cannot stay there for the next op anyway:
// streaming them skips the read-for-ownership of every destination line and leaves the cache
// to the inputs. The multiple is the op's, measured on Zen 4 (32 MiB L3), 2 threads, streamed
// against plain, in-process A/B, outputs on a line:
//   * Softmax, GroupNorm: 1. Softmax [32, 512, 512] (50 MB bf16/fp16) 1.10 / 1.04 ms streamed
//     against 1.41 / 1.13 ms plain, [24, 512, 512] bf16 (38 MB) 0.62 / 0.70 ms, [16, 512, 512]
//     fp32 (50 MB) 0.82 / 1.06 ms; GroupNorm N8 C320 64x64 bf16 (63 MB) 1.50 / 1.64 ms.
//   * PReLU: 2. Just past the cache its plain stores win or tie (bf16 [32, 64, 56, 56], 38 MB:
//     1.17 ms streamed, 0.90 ms plain; [32, 1024, 14, 14]: 1.17 / 1.11 ms), well past it
//     streaming wins (fp32 [32, 64, 56, 56], 77 MB: 1.45 ms, 157% of a copy's bandwidth).
inline bool streams_worthwhile(uint64_t bytes, uint64_t multiple) {
  return bytes > multiple * aclnn_cpu::last_level_cache_bytes();
}

// Whether an output written run by run (rows, planes: `run_bytes` each from `out`, their
// starts `start_step` bytes apart or multiples of it; back to back by default) should stream,
// for kernels that stream run by run (store_run<kStream>); runs put through one StreamCursor
// back to back are joined into lines and need only cursor_joins(out).
// When its runs do not start on a line, each run's first and last lines get plain (partly
// masked) stores beside the streamed ones, and for 16-bit data that measured
// slower than not streaming at all unless the runs are long. Softmax [64, 512, 512], 1 KiB
// rows, 2 threads, output 16 bytes past a line (where NumPy puts big arrays): bf16 4.95 ms
// streamed, 3.68 ms plain (fp16 4.99 / 4.01); the same output on a line: 2.69 ms streamed.
// 4 KiB rows: 2.79 streamed, 2.51 plain; GroupNorm's 8 KiB planes gain from streaming. fp32
// (and fp64) runs pay off from 1 KiB: misaligned 1 KiB rows streamed 3.63 ms against 3.85 ms
// plain, and rows of 1200-8188 bytes 0.69-0.93x the plain time, but shorter misaligned runs
// lost, badly (2 threads, in-process A/B, out on a line): softmax rows of 1020 bytes 1.22x the
// plain time, 788 bytes ([16, 12, 197, 197], ViT attention) 1.16-1.81x, 400 bytes 2.08x;
// GroupNorm planes of 784 bytes (N64 C512 14x14) 1.44x and 400 bytes (N128 C256 10x10) 1.43x.
constexpr uint64_t kLongRunBytes = 8192;
constexpr uint64_t kLongRunBytes32 = 1024;
template <class T>
inline bool stream_runs_fit(const T* out, uint64_t run_bytes, uint64_t start_step = 0) {
  if (start_step == 0) start_step = run_bytes;
  const uint64_t long_run = sizeof(T) >= 4 ? kLongRunBytes32 : kLongRunBytes;
  return run_bytes >= long_run || (aligned_to<64>(out) && start_step % 64 == 0);
}

// ---------------------------------------------------------------------------------------------
// Pairs: 2 * kWidth consecutive elements as two vectors. float, half_t and double keep element
// order (first kWidth, next kWidth); bfloat16_t splits even and odd elements, because one wide
// load then gives both vectors with a shift and a mask, and the store packs two vectors with
// one vcvtne2ps2bf16 + vpermw (or three integer ops), instead of a widening move per vector.
// The lane order is therefore only meaningful between a load_pair and a store_pair of the same
// layout: use pairs for lane-wise math whose operands are all loaded as pairs of types with
// the same layout (kSameLayout) or are broadcasts, and for reductions whose order only has to
// be fixed (the sum of a pair's lanes is deterministic, just not in element order).

template <class T>
constexpr bool kSplitPair = std::is_same<T, bfloat16_t>::value;
template <class A, class B>
constexpr bool kSameLayout = kSplitPair<A> == kSplitPair<B>;

struct Pair {
  VecF a, b;
};

template <class T>
ACLNN_ALWAYS_INLINE Pair load_pair(const T* p) {
  if constexpr (kSplitPair<T>) {
    VecU raw;
    std::memcpy(&raw, p, sizeof raw);
    return Pair{(VecF)(raw << 16), (VecF)(raw & 0xffff0000u)};
  } else {
    return Pair{load(p), load(p + kWidth)};
  }
}

namespace detail {
// The bits of a bf16 pair (even, odd) packed back into element order, 2 * kWidth values.
// Always inlined: a Pair is passed in memory to an out-of-line call, and GCC stopped inlining
// it into pipelined loops (softmax bf16 rows: 4.3 -> 6.5 ms).
ACLNN_ALWAYS_INLINE VecU bf16_pair_bits(Pair v) {
#if ACLNN_SIMD_BF16_INSTRUCTIONS
  if (bf16_instructions() &&
      // kortestw tests both masks in one instruction (an | of the masks went through two kmovs).
      _kortestz_mask16_u8(_mm512_fpclass_ps_mask((__m512)v.a, kBf16Fixups),
                          _mm512_fpclass_ps_mask((__m512)v.b, kBf16Fixups))) {
    // cvtne2ps(b, a): words 0-15 from a (even elements), 16-31 from b (odd); interleave.
    const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                           22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return (VecU)_mm512_permutexvar_epi16(order, (__m512i)_mm512_cvtne2ps_pbh((__m512)v.b, (__m512)v.a));
  }
#endif
#if ACLNN_ISA_LEVEL == 1
  // One NaN test for the pair, and the odd half rounded in place (masked, not shifted down
  // and back up).
  const __m256 nan = _mm256_or_ps(_mm256_cmp_ps((__m256)v.a, (__m256)v.a, _CMP_UNORD_Q),
                                  _mm256_cmp_ps((__m256)v.b, (__m256)v.b, _CMP_UNORD_Q));
  if (__builtin_expect(_mm256_testz_ps(nan, nan), 1)) {
    const VecU a = (VecU)v.a, b = (VecU)v.b;
    return (bf16_rounded(a) >> 16) | (bf16_rounded(b) & 0xffff0000u);
  }
#endif
  return (VecU)float_to_bf16_bits(v.a) | ((VecU)float_to_bf16_bits(v.b) << 16);
}

#if ACLNN_ISA_LEVEL == 2
// The 2 * kWidth fp16 values of a pair in element order, one 64-byte line (see kLineStreams).
ACLNN_ALWAYS_INLINE __m512i half_pair_bits(Pair v) {
  const __m256i lo = _mm512_cvtps_ph((__m512)v.a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256i hi = _mm512_cvtps_ph((__m512)v.b, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
#endif
}  // namespace detail

template <class T>
ACLNN_ALWAYS_INLINE void store_pair(T* p, Pair v) {
  if constexpr (kSplitPair<T>) {
    const VecU bits = detail::bf16_pair_bits(v);
    std::memcpy(p, &bits, sizeof bits);
  } else {
    store(p, v.a);
    store(p + kWidth, v.b);
  }
}

// Streaming pair store; p aligned to kPairStreamAlign<T>: the pair's bytes, at most a line
// (a multiple of kStreamAlign<T>, so each vector's own stream is aligned too).
template <class T>
constexpr std::size_t kPairStreamAlign = 2 * kWidth * sizeof(T) < 64 ? 2 * kWidth * sizeof(T) : 64;

template <class T>
ACLNN_ALWAYS_INLINE void stream_pair(T* p, Pair v) {
  if constexpr (kSplitPair<T>) {
    const VecU bits = detail::bf16_pair_bits(v);
#if ACLNN_ISA_LEVEL == 2
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), (__m512i)bits);
#elif ACLNN_ISA_LEVEL == 1
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), (__m256i)bits);
#elif ACLNN_SIMD_X86
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), (__m128i)bits);
#else
    std::memcpy(p, &bits, sizeof bits);
#endif
  } else {
    // (A preprocessor guard, not only `if constexpr`: the discarded branch of a template is
    // still parsed, and the intrinsic types do not exist on other architectures.)
#if ACLNN_ISA_LEVEL == 2
    if constexpr (std::is_same<T, half_t>::value) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(p), detail::half_pair_bits(v));  // one 64-byte store
      return;
    }
#endif
    stream(p, v.a);
    stream(p + kWidth, v.b);
  }
}

// store_or_stream for a pair: streamed when kStream and p is pair-stream-aligned.
template <bool kStream, class T>
ACLNN_ALWAYS_INLINE void store_or_stream_pair(T* p, Pair v) {
  if (kStream && kLinePairStreams<T> && aligned_to<kPairStreamAlign<T>>(p)) stream_pair(p, v);
  else store_pair(p, v);
}

// store_run with pairs: `pair(i)` gives the Pair for elements [i, i + 2 * kWidth), `value(i,
// count)` a single vector as for store_run (used for the head, before the stream alignment,
// and for the tail). Same values as store_run, whatever the split.
template <bool kStream, class T, class PairValue, class Value>
ACLNN_ALWAYS_INLINE void store_run_pairs(T* out, int64_t n, PairValue&& pair, Value&& value) {
  constexpr int64_t kPair = 2 * kWidth;
  int64_t i = 0;
  if constexpr (kStream && kLinePairStreams<T>) {
    const int64_t head = head_to<kPairStreamAlign<T>>(out, n);
    if (head < n && n - head >= kPair) {
      for (; i + kWidth <= head; i += kWidth) store(out + i, value(i, int64_t(kWidth)));
      if (i < head) store_partial(out + i, value(i, head - i), head - i), i = head;
      i = pipelined(i, n, kPair, pair,
                    [&](int64_t j, Pair v) __attribute__((always_inline)) { stream_pair(out + j, v); });
    }
  }
  i = pipelined(i, n, kPair, pair,
                [&](int64_t j, Pair v) __attribute__((always_inline)) { store_pair(out + j, v); });
  for (; i + kWidth <= n; i += kWidth) store(out + i, value(i, int64_t(kWidth)));
  if (i < n) store_partial(out + i, value(i, n - i), n - i);
}

// ---------------------------------------------------------------------------------------------
// Streaming cursor: a task's output stores in address order, streamed in whole lines wherever
// the output starts. store_or_stream can stream only vectors that sit on a line, and
// store_run only peels one run at a time; NumPy puts big arrays 16 bytes past a line, so a
// kernel that keeps its vectors where its lanes put them (register rows, fused reductions) or
// writes short rows back to back otherwise stores most lines plainly (read-for-ownership of
// each). StreamCursor<kStream> takes 64-byte vectors (fp32 vectors, pairs of every type) in
// address order and, when they sit a constant multiple of 4 bytes past a line, joins each with
// the one before (one vpermt2d) into the line between them, which it streams; a run's first
// and last partial lines get masked plain stores. Consecutive puts continue a run across rows;
// a jump in address ends it (its last partial line is stored) and starts another. Values and
// lane grouping are the caller's, only where bytes go changes; flush() stores the last partial
// line and must come before stream_fence(). Where store_or_stream would not stream (narrower
// levels, 32-byte vectors, kStream false) every put is a plain store and flush() does nothing.
template <bool kStream>
class StreamCursor {
#if ACLNN_ISA_LEVEL == 2
  static constexpr bool kJoins = kStream;
#else
  static constexpr bool kJoins = false;
#endif

 public:
  // The cursor's state as a value: a loop that copies it into a local (lines()), puts through
  // that and hands it back (resume()) keeps it in registers. Through the cursor itself, every
  // streaming store may alias its members, so they are stored and reloaded around each one.
  class Lines {
   public:
    template <class T>
    ACLNN_ALWAYS_INLINE void put(T* p, VecF v) {
#if ACLNN_ISA_LEVEL == 2
      if constexpr (kJoins && kLineStreams<T>) return line(p, (__m512i)v);
#endif
      store(p, v);
    }

    template <class T>
    ACLNN_ALWAYS_INLINE void put_pair(T* p, Pair v) {
#if ACLNN_ISA_LEVEL == 2
      if constexpr (kJoins && kLinePairStreams<T>) {
        if constexpr (kSplitPair<T>) {
          return line(p, (__m512i)detail::bf16_pair_bits(v));
        } else if constexpr (std::is_same<T, half_t>::value) {
          return line(p, detail::half_pair_bits(v));
        } else {
          line(p, (__m512i)v.a);
          return line(p + kWidth, (__m512i)v.b);
        }
      }
#endif
      store_pair(p, v);
    }

    // A partial vector (n < kWidth elements): a plain store, which ends the run.
    template <class T>
    ACLNN_ALWAYS_INLINE void put_partial(T* p, VecF v, int64_t n) {
      store_partial(p, v, n);
    }

    // No run open: the next vector at a line streams as it is.
    bool idle() const {
#if ACLNN_ISA_LEVEL == 2
      return next_ == nullptr;
#else
      return true;
#endif
    }

    void flush() {
#if ACLNN_ISA_LEVEL == 2
      if constexpr (kJoins) {
        if (next_ == nullptr) return;
        const unsigned tail = unsigned(reinterpret_cast<std::uintptr_t>(next_) & 63) / 4;  // dwords in the last line
        _mm512_mask_storeu_epi32(next_ - 64, __mmask16(0xffffu << (16 - tail)), pending_);
        next_ = nullptr;
      }
#endif
    }

#if ACLNN_ISA_LEVEL == 2
   private:
    // The 64 bytes `bits` belong at p.
    ACLNN_ALWAYS_INLINE void line(void* to, __m512i bits) {
      char* p = static_cast<char*>(to);
      if (p == next_) {  // the run goes on: the line ending inside this vector is now whole
        const std::uintptr_t into = reinterpret_cast<std::uintptr_t>(p) & 63;
        _mm512_stream_si512(reinterpret_cast<__m512i*>(p - into), _mm512_permutex2var_epi32(pending_, select_, bits));
        pending_ = bits;
        next_ = p + 64;
      } else if ((reinterpret_cast<std::uintptr_t>(p) & 63) == 0 && next_ == nullptr) {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(p), bits);
      } else {
        *this = started(*this, p, bits);  // by value: the state's address does not escape
      }
    }

    // A jump: ends the open run and starts one at p (or streams p's line when p is on one).
    __attribute__((noinline)) static Lines started(Lines s, char* p, __m512i bits) {
      s.flush();
      const unsigned into = unsigned(reinterpret_cast<std::uintptr_t>(p) & 63);
      if (into == 0) {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(p), bits);
        return s;
      }
      if (into % 4 != 0) {  // 16-bit data at an odd offset
        _mm512_storeu_si512(p, bits);
        return s;
      }
      const unsigned tail = into / 4;  // dwords of each vector that fall into the next line
      _mm512_mask_storeu_epi32(p, __mmask16((1u << (16 - tail)) - 1), bits);
      // Lane j of a joined line: dword 16 - tail + j of the previous vector (j < tail), else
      // dword j - tail of the new one (selector bit 4 picks the second operand).
      s.select_ = _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                   _mm512_set1_epi32(int(16 - tail)));
      s.pending_ = bits;
      s.next_ = p + 64;
      return s;
    }

    char* next_ = nullptr;  // where the open run's next vector goes; null when none is open
    __m512i pending_ = _mm512_setzero_si512();  // the open run's last vector (its last `tail` dwords not yet stored)
    __m512i select_ = _mm512_setzero_si512();   // (zeroed, so that copies of an idle cursor copy defined values)
#endif
  };

  StreamCursor() = default;
  StreamCursor(const StreamCursor&) = delete;
  StreamCursor& operator=(const StreamCursor&) = delete;

  template <class T>
  ACLNN_ALWAYS_INLINE void put(T* p, VecF v) {
    lines_.put(p, v);
  }
  template <class T>
  ACLNN_ALWAYS_INLINE void put_pair(T* p, Pair v) {
    lines_.put_pair(p, v);
  }
  template <class T>
  ACLNN_ALWAYS_INLINE void put_partial(T* p, VecF v, int64_t n) {
    lines_.put_partial(p, v, n);
  }
  void flush() { lines_.flush(); }
  bool idle() const { return lines_.idle(); }

  Lines lines() const { return lines_; }
  void resume(const Lines& lines) { lines_ = lines; }

 private:
  Lines lines_;
};

// Whether a StreamCursor joins the 64-byte vectors of an output at `out` into whole lines: its
// elements lie a multiple of 4 bytes past a line. Rows written back to back through one cursor
// then stream as one run, so stream_runs_fit's per-run partial lines do not arise.
template <class T>
inline bool cursor_joins(const T* out) {
  return aligned_to<4>(out);
}

// store_run through a cursor: full vectors put in order (joined into lines when the cursor
// streams), the partial tail stored plainly; the same values as store_run. One loop for every
// alignment: with store_run<kStream>'s loop beside it for runs on a line, GCC spilled Softmax
// forward's exp constants in both (its rows on a line 1.09-1.15x the time of store_run alone);
// a kernel that wants that loop for aligned runs calls it in a function of its own.
template <bool kStream, class T, class Value>
ACLNN_ALWAYS_INLINE void store_run(StreamCursor<kStream>& cursor, T* out, int64_t n, Value&& value) {
  auto lines = cursor.lines();
  const auto full = [&](int64_t i) { return value(i, int64_t(kWidth)); };
  const int64_t i = pipelined(int64_t(0), n, kWidth, full,
                              [&](int64_t j, VecF v) __attribute__((always_inline)) { lines.put(out + j, v); });
  if (i < n) lines.put_partial(out + i, value(i, n - i), n - i);
  cursor.resume(lines);
}

// store_run_pairs through a cursor: pairs, then single vectors, then the partial tail.
template <bool kStream, class T, class PairValue, class Value>
ACLNN_ALWAYS_INLINE void store_run_pairs(StreamCursor<kStream>& cursor, T* out, int64_t n, PairValue&& pair,
                                         Value&& value) {
  auto lines = cursor.lines();
  int64_t i = pipelined(int64_t(0), n, 2 * kWidth, pair,
                        [&](int64_t j, Pair v) __attribute__((always_inline)) { lines.put_pair(out + j, v); });
  for (; i + kWidth <= n; i += kWidth) lines.put(out + i, value(i, int64_t(kWidth)));
  if (i < n) lines.put_partial(out + i, value(i, n - i), n - i);
  cursor.resume(lines);
}

// ---------------------------------------------------------------------------------------------
// Rounding to a storage type without storing: the lanes of v as store<T> then load<T> would
// give them (a result computed in fp32 but defined in T's precision, cast on to another type).

template <class T>
ACLNN_ALWAYS_INLINE VecF round_to(VecF v) {
  if constexpr (std::is_same<T, bfloat16_t>::value) {
    return (VecF)(float_to_bf16_bits(v) << 16);
  } else if constexpr (std::is_same<T, half_t>::value) {
#if ACLNN_ISA_LEVEL == 2
    return (VecF)_mm512_cvtph_ps(narrow16<half_t>(v));
#elif ACLNN_ISA_LEVEL == 1
    return (VecF)_mm256_cvtph_ps(_mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT));
#else
    return half_bits_to_float(float_to_half_bits(v));
#endif
  } else {
    static_assert(std::is_same<T, float>::value, "round_to: float, half_t or bfloat16_t");
    return v;
  }
}

// ---------------------------------------------------------------------------------------------
// exp(v), lane by lane: Cody-Waite reduction x = n ln2 + r (|r| <= ln2/2, ln2 in two parts so
// n * ln2_hi is exact), e^r by the degree-7 minimax polynomial of Cephes' expf, and the scale
// 2^n applied as two normal factors 2^(n/2) * 2^(n - n/2), so that results below 2^-126 round
// once into the subnormals and large ones overflow to inf. Within 1.01 ulp of the exact result
// over the whole range, more than 99% of results correctly rounded (tests/test_simd_exp.py
// measures every level against float64 exp: at most 0.89 ulp with FMA, 0.97 without).
// exp(-inf) = 0, exp(+inf) = inf, NaN stays NaN.
inline VecF exp(VecF x) {
  // Past these bounds the result is 0 or inf anyway; within them 2^n splits into normal
  // factors. max(lo, x) and min(hi, x) return x for a NaN lane.
  x = min(set1(89.0f), max(set1(-104.0f), x));
  const VecF n = round_even(x * set1(1.44269504088896341f));  // x / ln2
  VecF r = fma(n, set1(-0.693359375f), x);                    // ln2_hi: 9 bits, exact product
  r = fma(n, set1(2.12194440e-4f), r);                        // -ln2_lo = ln2_hi - ln2
  VecF p = set1(1.9875691500e-4f);
  p = fma(p, r, set1(1.3981999507e-3f));
  p = fma(p, r, set1(8.3334519073e-3f));
  p = fma(p, r, set1(4.1665795894e-2f));
  p = fma(p, r, set1(1.6666665459e-1f));
  p = fma(p, r, set1(5.0000001201e-1f));
#if ACLNN_ISA_LEVEL >= 1
  p = fma(fma(p, r, set1(1.0f)), r, set1(1.0f));  // 1 + r (1 + r P(r)): one rounding at the end
#else
  p = (p * (r * r) + r) + set1(1.0f);  // without FMA this order rounds least (Cephes')
#endif
  const VecI k = trunc_to_int(n), half = k >> 1;
  return p * bitcast_float((half + 127) << 23) * bitcast_float((k - half + 127) << 23);
}

// ---------------------------------------------------------------------------------------------
// fp64 vector arithmetic (VecD: see the float64 loads and stores), for ops whose float64 inputs
// are computed in float64 (Softmax) and for double accumulators (GroupNorm's sums). load_d and
// store_d move doubles as they are.

inline VecD set1d(double x) { return x - VecD{}; }
inline VecD fma(VecD a, VecD b, VecD c) {
#if ACLNN_ISA_LEVEL == 2
  return (VecD)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c);
#elif ACLNN_ISA_LEVEL == 1
  return (VecD)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c);
#else
  return a * b + c;
#endif
}
inline VecD max(VecD a, VecD b) { return a > b ? a : b; }
inline VecD min(VecD a, VecD b) { return a < b ? a : b; }
// The lanes of v added in lane order.
inline double lanes_sum(VecD v) {
  double s = 0.0;
  for (int i = 0; i < kWidthD; ++i) s += v[i];
  return s;
}
inline VecD load_d(const double* p) {
  VecD v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_d(double* p, VecD v) { std::memcpy(p, &v, sizeof v); }

// exp(v) in float64, as exp(VecF): reduction by ln2 in fdlibm's two parts (n * ln2_hi exact
// for |n| < 2^20), e^r by its Taylor polynomial to degree 13 (truncation below 1e-17 relative
// for |r| <= ln2/2), the scale as two normal factors. Rounding to an integer goes through
// 1.5 * 2^52, whose bits then hold the integer: no vector double-to-int64 conversion (AVX-512DQ).
inline VecD exp(VecD x) {
  x = min(set1d(710.0), max(set1d(-746.0), x));
  const VecD shifter = set1d(6755399441055744.0);  // 1.5 * 2^52: adding it rounds to an integer
  const VecD t = x * set1d(1.4426950408889634) + shifter;
  const VecD n = t - shifter;
  VecD r = fma(n, set1d(-6.93147180369123816490e-01), x);
  r = fma(n, set1d(-1.90821492927058770002e-10), r);
  constexpr double kInverseFactorial[12] = {  // 1/13!, 1/12!, ..., 1/2!
      1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
      1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,      1.0 / 720.0,
      1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,         1.0 / 2.0};
  VecD p = set1d(kInverseFactorial[0]);
  for (int i = 1; i < 12; ++i) p = fma(p, r, set1d(kInverseFactorial[i]));
#if ACLNN_ISA_LEVEL >= 1
  p = fma(fma(p, r, set1d(1.0)), r, set1d(1.0));
#else
  p = (p * (r * r) + r) + set1d(1.0);
#endif
  const VecL bits = (VecL)t, half_bits = (VecL)(n * set1d(0.5) + shifter), base = (VecL)shifter;
  const VecL half = half_bits - base, rest = bits - half_bits;  // half + rest = n
  return p * (VecD)((half + 1023) << 52) * (VecD)((rest + 1023) << 52);
}

// ---------------------------------------------------------------------------------------------
// Bulk conversions of contiguous arrays.

template <class T>
inline void convert_to_float(const T* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth) store(dst + i, load(src + i));
  if (i < n) store_partial(dst + i, load_partial(src + i, n - i), n - i);
}

template <class T>
inline void convert_from_float(const float* src, T* dst, int64_t n) {
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth) store(dst + i, load(src + i));
  if (i < n) store_partial(dst + i, load_partial(src + i, n - i), n - i);
}

}  // namespace simd
}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
