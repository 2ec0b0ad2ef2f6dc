// Storage types for IEEE binary16 (half_t) and bfloat16 (bfloat16_t) with exact scalar
// conversions to and from float: integer/float bit manipulation, but for half_t at ISA levels
// with F16C, whose single-element instructions give the same bits (and take a few cycles where
// the portable code takes a few dozen: kernels convert element by element where they gather
// and scatter). Every ISA level's kernels and the runtime agree bit for bit. The SIMD versions
// (simd.h) must give the same bits as these; tests check all 65536 patterns of each type at
// every level (aclnn_cpu._config.simd_convert, path "scalar").
//
// Rounding rules (float -> narrow type):
//   * round to nearest, ties to even;
//   * half_t: values >= 65520 in magnitude become +-inf; results below 2^-14 are exact
//     subnormals (no flush to zero); NaN stays NaN, quieted, keeping the sign and the top
//     payload bits (what F16C's vcvtps2ph produces);
//   * bfloat16_t: NaN becomes the canonical quiet NaN 0x7FC0 with the sign kept (what ml_dtypes
//     produces), everything else rounds on the upper 16 bits.
// Widening (narrow -> float) is exact; a half_t NaN is quieted (what vcvtph2ps does), a
// bfloat16_t widens by a plain 16-bit shift.
#pragma once
#include <cstdint>
#include <cstring>
#if defined(ACLNN_ISA_LEVEL) && ACLNN_ISA_LEVEL >= 1 && defined(__F16C__)
// (diagnostics as simd.h: GCC 12 flags intrinsics' own undefined locals)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#define ACLNN_SCALAR_F16C 1
#endif

// The functions live in an inline namespace named after the ISA level of the including
// translation unit: kernels are compiled once per level with different -m flags, and an inline
// function shared under one mangled name could be resolved by the linker to a copy using
// instructions the running CPU lacks. The types stay shared.
// (vocabulary.h names a kernel level's namespace: half_baseline, half_avx2, ...)
#include "aclnn_cpu/vocabulary.h"
#if !defined(ACLNN_ISA_LEVEL)
#define ACLNN_HALF_NS half_generic
#endif

namespace aclnn_cpu {

struct half_t {
  uint16_t bits;
};
struct bfloat16_t {
  uint16_t bits;
};

inline namespace ACLNN_HALF_NS {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float to_float(float f) { return f; }

inline float to_float(bfloat16_t b) { return bits_float(uint32_t(b.bits) << 16); }

inline float to_float(half_t h) {
#if defined(ACLNN_SCALAR_F16C)
  return _cvtsh_ss(h.bits);
#else
  const uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  const uint32_t magnitude = h.bits & 0x7fffu;
  uint32_t out;
  if (magnitude >= 0x7c00u) {
    // inf keeps a zero payload; NaN payload moves up 13 bits and gets the quiet bit.
    const uint32_t payload = (magnitude & 0x3ffu) << 13;
    out = 0x7f800000u | payload | (payload ? 0x00400000u : 0u);
  } else if (magnitude >= 0x0400u) {
    // Normal: rebias the exponent from 15 to 127.
    out = (magnitude << 13) + ((127u - 15u) << 23);
  } else {
    // Subnormal or zero: value = magnitude * 2^-24, exact in float.
    out = float_bits(float(magnitude) * 5.9604644775390625e-8f);
  }
  return bits_float(sign | out);
#endif
}

template <class T>
T from_float(float f);

template <>
inline float from_float<float>(float f) {
  return f;
}

// fp32 bits u rounded to nearest even at bit 16: the bf16 value in the high half (the low half
// is not cleared). Adding 0x7fff plus the lowest kept bit rounds ties to even; a carry out of
// the mantissa bumps the exponent (up to inf). A NaN must first become sign | 0x7FC00000, which
// this leaves alone (a NaN with low payload bits could carry into infinity). U: uint32_t or a
// vector of uint32_t lanes (the SIMD conversions use the same step).
template <class U>
inline __attribute__((always_inline)) U bf16_rounded(U u) {
  return u + 0x7fffu + ((u >> 16) & 1u);
}

template <>
inline bfloat16_t from_float<bfloat16_t>(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bfloat16_t{uint16_t(((u >> 16) & 0x8000u) | 0x7fc0u)};
  return bfloat16_t{uint16_t(bf16_rounded(u) >> 16)};
}

template <>
inline half_t from_float<half_t>(float f) {
#if defined(ACLNN_SCALAR_F16C)
  return half_t{uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))};
#else
  const uint32_t u = float_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {
    return half_t{uint16_t(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu))};
  }
  if (magnitude >= 0x477ff000u) return half_t{uint16_t(sign | 0x7c00u)};  // >= 65520: inf
  if (magnitude < 0x38800000u) {
    // Below 2^-14: the result is a subnormal (or 2^-14 after rounding up). Adding 0.5f makes
    // the FPU round at 2^-24, the half subnormal step, with ties to even; the low mantissa bits
    // of the sum are then exactly the half's bits.
    const float shifted = bits_float(magnitude) + 0.5f;
    return half_t{uint16_t(sign | (float_bits(shifted) - 0x3f000000u))};
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
  const uint32_t odd = (magnitude >> 13) & 1u;
  const uint32_t rebased = magnitude - ((127u - 15u) << 23) + 0xfffu + odd;
  return half_t{uint16_t(sign | (rebased >> 13))};
#endif
}

}  // inline namespace ACLNN_HALF_NS
}  // namespace aclnn_cpu
