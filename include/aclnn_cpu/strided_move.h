// Moving a run of elements between a dense buffer and a strided run, bit for bit: the gathers
// and scatters of the dense copies (dense_copy.h) and of Softmax's strided rows. Steps of 2 (a
// slice of every other element, `x[..., ::2]`, the commonest strided view after a plain slice)
// and -1 (a NumPy view reversed along its last dim, `x[..., ::-1]`) get vector code: element
// by element, such a gather cost about 1.3 cycles an element, most of a GroupNorm call on a
// sliced tensor. For kernel translation units (compiled per ISA level).
#pragma once
#include <cstdint>
#include <cstring>

#include "aclnn_cpu/simd.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace strided_detail {

// Unsigned integer of an element's size: the moves copy bits and never look at values.
template <int kBytes> struct Bits;
template <> struct Bits<2> { using type = uint16_t; };
template <> struct Bits<4> { using type = uint32_t; };
template <> struct Bits<8> { using type = uint64_t; };

// With the step a constant, GCC vectorizes the loop with two-source permutes (vpermt2d/w at
// AVX-512, vpermi2 at AVX2).
template <class U>
void gather_step2(U* __restrict dst, const U* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[2 * i];
}

// A unit-step run. Short ones (a transposed or flipped plane's rows, say) are copied in line, a
// vector at a time: through memcpy, each paid a library call.
template <class U>
ACLNN_ALWAYS_INLINE void copy_run(U* __restrict dst, const U* __restrict src, int64_t n) {
  constexpr int64_t kBlock = 64 / sizeof(U);
  if (n > 4 * kBlock) {
    std::memcpy(dst, src, size_t(n) * sizeof(U));
    return;
  }
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) std::memcpy(dst + i, src + i, 64);
  for (; i < n; ++i) dst[i] = src[i];
}

// Reversed runs, either way: the elements are adjacent, so plain vector loads and stores with a
// lane reversal between (GCC vectorizes both loops at every level).
template <class U>
void gather_reversed(U* __restrict dst, const U* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[-i];
}
template <class U>
void scatter_reversed(U* __restrict dst, const U* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[-i] = src[i];
}

// Writes only the run's own elements (the ones between belong to someone else, possibly to
// another thread), so the vector form needs masked stores: AVX-512 only.
template <class U>
void scatter_step2(U* __restrict dst, const U* __restrict src, int64_t n) {
  int64_t i = 0;
#if ACLNN_SIMD_X86 && ACLNN_ISA_LEVEL == 2
  if constexpr (sizeof(U) == 4) {
    // Lanes 0-7 of v to the even lanes of `lo`, lanes 8-15 to the even lanes of `hi`.
    const __m512i to_lo = _mm512_set_epi32(0, 7, 0, 6, 0, 5, 0, 4, 0, 3, 0, 2, 0, 1, 0, 0);
    const __m512i to_hi = _mm512_add_epi32(to_lo, _mm512_set1_epi32(8));
    for (; i + 16 <= n; i += 16) {
      const __m512i v = _mm512_loadu_si512(src + i);
      _mm512_mask_storeu_epi32(dst + 2 * i, __mmask16(0x5555), _mm512_permutexvar_epi32(to_lo, v));
      _mm512_mask_storeu_epi32(dst + 2 * i + 16, __mmask16(0x5555), _mm512_permutexvar_epi32(to_hi, v));
    }
  } else if constexpr (sizeof(U) == 2) {
    alignas(64) uint16_t lo_idx[32];
    for (int k = 0; k < 32; ++k) lo_idx[k] = uint16_t(k / 2);
    const __m512i to_lo = _mm512_load_si512(lo_idx);
    const __m512i to_hi = _mm512_add_epi16(to_lo, _mm512_set1_epi16(16));
    for (; i + 32 <= n; i += 32) {
      const __m512i v = _mm512_loadu_si512(src + i);
      _mm512_mask_storeu_epi16(dst + 2 * i, __mmask32(0x55555555u), _mm512_permutexvar_epi16(to_lo, v));
      _mm512_mask_storeu_epi16(dst + 2 * i + 32, __mmask32(0x55555555u), _mm512_permutexvar_epi16(to_hi, v));
    }
  }
#endif
  for (; i < n; ++i) dst[2 * i] = src[i];
}

}  // namespace strided_detail

// dst[i] = src[i * step] for i < n (elements of type E, moved as bits).
template <class E>
inline void gather_run(E* dst, const E* src, int64_t n, int64_t step) {
  using U = typename strided_detail::Bits<sizeof(E)>::type;
  U* d = reinterpret_cast<U*>(dst);
  const U* s = reinterpret_cast<const U*>(src);
  if (step == 1) {
    strided_detail::copy_run(d, s, n);
  } else if (step == 2) {
    strided_detail::gather_step2(d, s, n);
  } else if (step == -1) {
    strided_detail::gather_reversed(d, s, n);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = s[i * step];
  }
}

// dst[i * step] = src[i] for i < n (elements of type E, moved as bits).
template <class E>
inline void scatter_run(E* dst, const E* src, int64_t n, int64_t step) {
  using U = typename strided_detail::Bits<sizeof(E)>::type;
  U* d = reinterpret_cast<U*>(dst);
  const U* s = reinterpret_cast<const U*>(src);
  if (step == 1) {
    strided_detail::copy_run(d, s, n);
  } else if (step == 2) {
    strided_detail::scatter_step2(d, s, n);
  } else if (step == -1) {
    strided_detail::scatter_reversed(d, s, n);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i * step] = s[i];
  }
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
