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
  // (Bounded by kBlock in so many words: GCC, not seeing it, warned of overflowing iterations.)
  for (int64_t k = 0; k < kBlock && i + k < n; ++k) dst[i + k] = src[i + k];
}

// The scatters read a buffer their caller has just filled (Softmax's row outputs, written by
// vector stores GCC does not follow), and GCC warned that it may be uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

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

#pragma GCC diagnostic pop

// Transposes of small square blocks in 16-byte vectors (GCC's generic vectors: shuffles at
// every level), a row per vector: 4 x 4 of 4-byte elements, 8 x 8 of 2-byte ones.
typedef uint32_t U32x4 __attribute__((vector_size(16)));
typedef uint16_t U16x8 __attribute__((vector_size(16)));

template <class V>
ACLNN_ALWAYS_INLINE V load_vec(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
ACLNN_ALWAYS_INLINE void store_vec(void* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// dst[c * ds + r] = src[r * ss + c] for r, c < 4.
ACLNN_ALWAYS_INLINE void transpose_block(uint32_t* dst, int64_t ds, const uint32_t* src, int64_t ss) {
  const U32x4 r0 = load_vec<U32x4>(src), r1 = load_vec<U32x4>(src + ss);
  const U32x4 r2 = load_vec<U32x4>(src + 2 * ss), r3 = load_vec<U32x4>(src + 3 * ss);
  const U32x4 t0 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5), t1 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7);
  const U32x4 t2 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5), t3 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
  store_vec(dst, __builtin_shufflevector(t0, t2, 0, 1, 4, 5));
  store_vec(dst + ds, __builtin_shufflevector(t0, t2, 2, 3, 6, 7));
  store_vec(dst + 2 * ds, __builtin_shufflevector(t1, t3, 0, 1, 4, 5));
  store_vec(dst + 3 * ds, __builtin_shufflevector(t1, t3, 2, 3, 6, 7));
}

// dst[c * ds + r] = src[r * ss + c] for r, c < 8: interleaves of 2-, 4- and 8-byte pieces.
ACLNN_ALWAYS_INLINE void transpose_block(uint16_t* dst, int64_t ds, const uint16_t* src, int64_t ss) {
  U16x8 r[8], u[8];
  for (int k = 0; k < 8; ++k) r[k] = load_vec<U16x8>(src + k * ss);
  for (int k = 0; k < 4; ++k) {  // rows 2k, 2k+1 element by element
    u[2 * k] = __builtin_shufflevector(r[2 * k], r[2 * k + 1], 0, 8, 1, 9, 2, 10, 3, 11);
    u[2 * k + 1] = __builtin_shufflevector(r[2 * k], r[2 * k + 1], 4, 12, 5, 13, 6, 14, 7, 15);
  }
  for (int k = 0; k < 2; ++k) {  // row pairs (4k, 4k+1) and (4k+2, 4k+3), two elements at a time
    for (int h = 0; h < 2; ++h) {
      const U16x8 a = u[4 * k + h], b = u[4 * k + 2 + h];
      r[4 * k + 2 * h] = __builtin_shufflevector(a, b, 0, 1, 8, 9, 2, 3, 10, 11);
      r[4 * k + 2 * h + 1] = __builtin_shufflevector(a, b, 4, 5, 12, 13, 6, 7, 14, 15);
    }
  }
  // r[j] (j < 4) holds rows 0-3 of columns 2j and 2j + 1, r[4 + j] rows 4-7 of the same.
  for (int j = 0; j < 4; ++j) {
    store_vec(dst + 2 * j * ds, __builtin_shufflevector(r[j], r[4 + j], 0, 1, 2, 3, 8, 9, 10, 11));
    store_vec(dst + (2 * j + 1) * ds, __builtin_shufflevector(r[j], r[4 + j], 4, 5, 6, 7, 12, 13, 14, 15));
  }
}

// Rows [r0, r1) of transpose_run: square blocks, each a row per vector; the edges element by
// element.
template <class U>
ACLNN_ALWAYS_INLINE void transpose_blocks(U* d, int64_t ds, const U* s, int64_t ss, int64_t r0, int64_t r1, int64_t cols) {
  constexpr int64_t kBlock = sizeof(U) == 4 ? 4 : sizeof(U) == 2 ? 8 : 1;
  int64_t r = r0;
  if constexpr (kBlock > 1) {
    for (; r + kBlock <= r1; r += kBlock) {
      int64_t c = 0;
      for (; c + kBlock <= cols; c += kBlock) transpose_block(d + c * ds + r, ds, s + r * ss + c, ss);
      for (; c < cols; ++c)
        for (int64_t k = r; k < r + kBlock; ++k) d[c * ds + k] = s[k * ss + c];
    }
  }
  for (; r < r1; ++r)
    for (int64_t c = 0; c < cols; ++c) d[c * ds + r] = s[r * ss + c];
}

// A square tile of kTile x kTile elements, a tile row being 64 bytes (a line when aligned):
// the blocks are transposed into a buffer on the stack, each block reading its source rows'
// lines whole before the next rows, and the buffer's rows go to the destination whole. Block by
// block straight into the destination, each destination line takes its 16 bytes a block at a
// time, so the lines of every destination row a pass touches are in flight together (a line
// per column). When the destination rows lie a multiple of 2-4 KiB apart, those lines crowd
// into 1-4 sets of the 64-set, 8-way L1 and evict one another before they are full. GroupNorm
// N2 C640 32x32 G32, fp32, 2 threads, in-process A/B: channels-last inputs gathered into planes
// of 1024 floats (rows 4 KiB apart) took 0.70x the time in tiles (bf16 0.61x); a planar
// gradInput scattered to channels-last with 1280 channels (5 KiB, 4 sets) 0.62x, with 512
// (2 KiB) 0.58x. Where the rows spread over 8 sets or more, tiles lost: scatters to 640 and 320
// channels (2.5 and 1.25 KiB) took 1.16x and 1.58x the time; the round trip through the buffer
// costs more than the blocks' misses.
template <class U>
constexpr int64_t kTile = 64 / sizeof(U);

// Whether rows `ds` elements apart crowd kTile<U> lines into at most kTile / 4 sets of a
// 64-set L1 (fp32: 4 sets, 16-bit: 8), where transpose_run takes tiles.
template <class U>
inline bool rows_crowd_sets(int64_t ds) {
  const uint64_t bytes = uint64_t(ds < 0 ? -ds : ds) * sizeof(U);
  if (bytes % 64 != 0) return false;  // rows off the lines' grid spread over the sets
  // Rows `lines` lines apart use 64 / gcd(lines, 64) sets.
  uint64_t lines = bytes / 64, sets = 64;
  while (lines % 2 == 0 && sets > 1) lines /= 2, sets /= 2;
  return uint64_t(kTile<U>) >= 4 * sets;
}

template <class U>
ACLNN_ALWAYS_INLINE void transpose_tile(U* d, int64_t ds, const U* s, int64_t ss) {
  constexpr int64_t kT = kTile<U>;
  alignas(64) U tile[kT * kT];
  transpose_blocks(tile, kT, s, ss, 0, kT, kT);
  for (int64_t c = 0; c < kT; ++c) std::memcpy(d + c * ds, tile + c * kT, 64);
}

}  // namespace strided_detail

// dst[c * ds + r] = src[r * ss + c] for r < rows, c < cols (elements of type E, moved as bits):
// in tiles where the destination rows crowd the L1's sets (rows_crowd_sets), else in blocks;
// the edges element by element. Strides may be negative.
template <class E>
void transpose_run(E* dst, int64_t ds, const E* src, int64_t ss, int64_t rows, int64_t cols) {
  using U = typename strided_detail::Bits<sizeof(E)>::type;
  U* d = reinterpret_cast<U*>(dst);
  const U* s = reinterpret_cast<const U*>(src);
  int64_t r = 0;
  if constexpr (sizeof(U) <= 4) {
    constexpr int64_t kT = strided_detail::kTile<U>;
    const int64_t whole_cols = cols / kT * kT;
    const bool tiles = strided_detail::rows_crowd_sets<U>(ds);
    for (; r + kT <= rows && tiles; r += kT) {
      for (int64_t c = 0; c < whole_cols; c += kT)
        strided_detail::transpose_tile(d + c * ds + r, ds, s + r * ss + c, ss);
      if (whole_cols < cols)
        strided_detail::transpose_blocks(d + whole_cols * ds, ds, s + whole_cols, ss, r, r + kT, cols - whole_cols);
    }
  }
  strided_detail::transpose_blocks(d, ds, s, ss, r, rows, cols);
}

// The steps gather_run and scatter_run move in vectors; others go element by element.
constexpr bool step_in_vectors(int64_t step) { return step == 1 || step == 2 || step == -1; }

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
