// GridSampler2DBackward: strided planes, and transposes between channel planes and channel-last buffers.
// A part of the kernel ops/grid_sampler2d_backward.cpp, compiled inside it once per ISA level
// (hence the ISA namespace and the anonymous namespace); the forward kernel ops/grid_sampler2d.cpp
// includes it too, and nothing else.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "aclnn_cpu/simd.h"
#include "constants.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

// ---------------------------------------------------------------------------------------------
// Strided 2-D planes ([rows, cols] with element strides) walked in flat order.

struct Plane {
  int64_t rows = 0, cols = 0, srow = 0, scol = 0;
  bool flat = false;  // offset(p) == p * scol for every p
};

Plane make_plane(int64_t rows, int64_t cols, int64_t srow, int64_t scol) {
  Plane p{rows, cols, srow, scol, false};
  p.flat = rows <= 1 || srow == cols * scol;
  return p;
}

// Calls fn(q, offset) for the flat positions p0 + q, q in [0, len).
template <class Fn>
inline void for_each_offset(const Plane& pl, int64_t p0, int64_t len, Fn&& fn) {
  if (pl.flat) {
    for (int64_t q = 0; q < len; ++q) fn(q, (p0 + q) * pl.scol);
    return;
  }
  int64_t r = p0 / pl.cols, c = p0 % pl.cols;
  for (int64_t q = 0; q < len;) {
    const int64_t run = std::min(len - q, pl.cols - c);
    const int64_t base = r * pl.srow;
    for (int64_t k = 0; k < run; ++k) fn(q + k, base + (c + k) * pl.scol);
    q += run;
    c = 0;
    ++r;
  }
}

// Whether the same pixel of `channels` planes, `stride_bytes` apart, crowds one L1 set (64
// sets of 64-byte lines, 8 ways on the machines measured): planes of a power-of-two size put
// every channel's copy of a pixel in the same set, so touching a pixel's channels together
// evicts them before the next pixel of the same lines comes back.
inline bool channels_share_l1_sets(int64_t stride_bytes, int channels) {
  constexpr int kSets = 64, kCrowd = 4;  // over half the ways taken by one pixel's channels
  int count[kSets] = {};
  const int64_t lines = (stride_bytes < 0 ? -stride_bytes : stride_bytes) / 64;
  for (int c = 0; c < channels; ++c)
    if (++count[(c * lines) % kSets] > kCrowd) return true;
  return false;
}

// Channel-major <-> channel-last transposes, in 4 x 4 register blocks (4 channel rows of 4
// positions become 4 position vectors of 4 lanes), portable to every ISA level. The storage
// type's conversion happens inside the blocks (no separate conversion pass).

typedef float F4 __attribute__((vector_size(16)));
typedef float F8 __attribute__((vector_size(32)));  // one AVX2 register (used at levels >= 1)
typedef uint32_t U4 __attribute__((vector_size(16)));
typedef uint16_t H4 __attribute__((vector_size(8)));

inline F4 load4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, const F4& v) { std::memcpy(p, &v, sizeof v); }

// 4 storage values <-> 4 floats, bit for bit as half.h / simd.h convert (round to nearest even;
// bf16 NaN -> 0x7FC0 with the sign, fp16 NaN quieted).
inline H4 bf16_bits4(const F4& v) {
  const U4 u = (U4)v;
  const U4 rounded = bf16_rounded(u) >> 16;
  const U4 nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
  return __builtin_convertvector((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded, H4);
}
inline H4 half_bits4(const F4& v) {
#if ACLNN_ISA_LEVEL >= 1
  const __m128i h = _mm_cvtps_ph((__m128)v, _MM_FROUND_TO_NEAREST_INT);
  H4 out;
  std::memcpy(&out, &h, sizeof out);
  return out;
#else
  return __builtin_convertvector((U4)simd::float_to_half_bits(v), H4);  // VecF is 4 lanes here
#endif
}
inline F4 half_to_float4(const H4& h) {
#if ACLNN_ISA_LEVEL >= 1
  __m128i raw = _mm_setzero_si128();
  std::memcpy(&raw, &h, sizeof h);
  return (F4)_mm_cvtph_ps(raw);
#else
  return simd::half_bits_to_float((simd::VecI)__builtin_convertvector(h, U4));
#endif
}

template <class T>
ACLNN_ALWAYS_INLINE F4 load4_as_float(const T* p) {
  if constexpr (std::is_same<T, float>::value) {
    return load4(p);
  } else {
#if ACLNN_SIMD_X86
    const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    if constexpr (std::is_same<T, bfloat16_t>::value) {
      return (F4)_mm_unpacklo_epi16(_mm_setzero_si128(), raw);  // the 16 bits become the high half
    } else {
#if ACLNN_ISA_LEVEL >= 1
      return (F4)_mm_cvtph_ps(raw);
#else
      H4 h;
      std::memcpy(&h, &raw, sizeof h);
      return half_to_float4(h);
#endif
    }
#else
    H4 h;
    std::memcpy(&h, p, sizeof h);
    if constexpr (std::is_same<T, bfloat16_t>::value) return (F4)(__builtin_convertvector(h, U4) << 16);
    else return half_to_float4(h);
#endif
  }
}
template <class T>
ACLNN_ALWAYS_INLINE H4 narrow4(const F4& v) {
  if constexpr (std::is_same<T, bfloat16_t>::value) return bf16_bits4(v);
  else return half_bits4(v);
}
template <class T>
ACLNN_ALWAYS_INLINE void store4_from_float(T* p, const F4& v) {
  if constexpr (std::is_same<T, float>::value) {
    store4(p, v);
  } else {
    const H4 h = narrow4<T>(v);
    std::memcpy(p, &h, sizeof h);
  }
}

// 16 values at p from four 4-lane vectors, assembled in registers (a round trip through memory
// would stall on store forwarding) and converted with simd.h's full-width stores.
template <class T>
ACLNN_ALWAYS_INLINE void store16_from_float(T* p, const F4& a, const F4& b, const F4& c, const F4& d) {
#if ACLNN_ISA_LEVEL >= 1
  typedef float F8x __attribute__((vector_size(32)));
  const F8x ab = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7);
  const F8x cd = __builtin_shufflevector(c, d, 0, 1, 2, 3, 4, 5, 6, 7);
#endif
#if ACLNN_ISA_LEVEL >= 2
  simd::store(p, __builtin_shufflevector(ab, cd, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
#elif ACLNN_ISA_LEVEL == 1
  simd::store(p, ab);
  simd::store(p + 8, cd);
#else
  simd::store(p, a);
  simd::store(p + 4, b);
  simd::store(p + 8, c);
  simd::store(p + 12, d);
#endif
}

// 16 bytes at p (16-byte aligned), bypassing the caches.
inline void stream16(void* p, const F4& bytes) {
#if ACLNN_SIMD_X86
  _mm_stream_ps(static_cast<float*>(p), (__m128)bytes);
#else
  std::memcpy(p, &bytes, sizeof bytes);
#endif
}

// In place: rows a, b, c, d (4 elements each) become columns.
inline void transpose4(F4& a, F4& b, F4& c, F4& d) {
  const F4 t0 = __builtin_shufflevector(a, b, 0, 4, 1, 5), t1 = __builtin_shufflevector(a, b, 2, 6, 3, 7);
  const F4 t2 = __builtin_shufflevector(c, d, 0, 4, 1, 5), t3 = __builtin_shufflevector(c, d, 2, 6, 3, 7);
  a = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
  b = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
  c = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
  d = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
}

#if ACLNN_SIMD_X86 && ACLNN_ISA_LEVEL >= 2
// 4 channels x 16 positions (as fp32) on AVX-512: rows[c] = 16 positions of channel c <->
// pos[k] = positions 4k..4k+3, 4 channels each. 24 operations per 64 values where four 4 x 4
// blocks take 64 (16 loads, 32 shuffles, 16 stores); 16-bit rows convert 16 values at a time.
// For 4-lane blocks (C = 2-4), in-process A/B, N4 C3 224x224, bitwise the same results: fp32
// one thread nearest 0.94-0.96x the time, bilinear 0.97-1.00x, 2 threads 0.95-0.97x; fp16 and
// bf16 (against 4 x 4 blocks converting 16 at a time) 0.85-1.02x, mostly 0.95-0.97x.
ACLNN_ALWAYS_INLINE void rows4_to_positions16(__m512 x[4]) {
  const __m512 t0 = _mm512_unpacklo_ps(x[0], x[1]), t1 = _mm512_unpackhi_ps(x[0], x[1]);
  const __m512 t2 = _mm512_unpacklo_ps(x[2], x[3]), t3 = _mm512_unpackhi_ps(x[2], x[3]);
  // u[k]: in 128-bit lane j, position 4j + k (channels 0..3)
  const __m512 u0 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2)));
  const __m512 u1 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2)));
  const __m512 u2 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3)));
  const __m512 u3 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3)));
  const __m512 v0 = _mm512_shuffle_f32x4(u0, u1, 0x44), v1 = _mm512_shuffle_f32x4(u0, u1, 0xEE);
  const __m512 v2 = _mm512_shuffle_f32x4(u2, u3, 0x44), v3 = _mm512_shuffle_f32x4(u2, u3, 0xEE);
  x[0] = _mm512_shuffle_f32x4(v0, v2, 0x88);
  x[1] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
  x[2] = _mm512_shuffle_f32x4(v1, v3, 0x88);
  x[3] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
}
// The inverse: x[k] = positions 4k..4k+3 (4 channels each) -> x[c] = channel c of the 16.
ACLNN_ALWAYS_INLINE void positions16_to_rows4(__m512 x[4]) {
  const __m512 w0 = _mm512_shuffle_f32x4(x[0], x[1], 0x88), w1 = _mm512_shuffle_f32x4(x[0], x[1], 0xDD);
  const __m512 w2 = _mm512_shuffle_f32x4(x[2], x[3], 0x88), w3 = _mm512_shuffle_f32x4(x[2], x[3], 0xDD);
  // In 128-bit lane j: a = position 4j, b = 4j + 1, c = 4j + 2, d = 4j + 3.
  const __m512 a = _mm512_shuffle_f32x4(w0, w2, 0x88), c = _mm512_shuffle_f32x4(w0, w2, 0xDD);
  const __m512 b = _mm512_shuffle_f32x4(w1, w3, 0x88), d = _mm512_shuffle_f32x4(w1, w3, 0xDD);
  const __m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(a, b)), t1 = _mm512_castps_pd(_mm512_unpackhi_ps(a, b));
  const __m512d t2 = _mm512_castps_pd(_mm512_unpacklo_ps(c, d)), t3 = _mm512_castps_pd(_mm512_unpackhi_ps(c, d));
  x[0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
  x[1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
  x[2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
  x[3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
}
#endif

// Rows [0, count) of a transpose's input that are planes in memory: at each of their lines
// (position q a multiple of a line's values), the line kTile positions on, the next tile's,
// which load_channels transposes next. One line of each row per block, spread over the tile:
// issued all at its start (8 rows x 16 lines of fp32), the prefetches queued behind the
// core's few outstanding misses and stalled it (AVX2 Zen 3, 2 threads, fp32, processes
// alternated: N32 C32 64x64 nearest 0.90x the time spread, bilinear 0.94x, N1 C256 64x64 ->
// 128x128 0.93x). A prefetch never faults, even past the end.
template <class T>
ACLNN_ALWAYS_INLINE void prefetch_ahead(const T* const* rows, int count, int64_t q) {
  if (q % (64 / int64_t(sizeof(T))) != 0) return;
  for (int j = 0; j < count; ++j) __builtin_prefetch(rows[j] + q + kTile, 0, 2);
}

#if ACLNN_SIMD_X86 && ACLNN_ISA_LEVEL >= 1
// 8-channel transposes. 16-bit storage (fp16, bf16) moves through them as raw 16-bit values,
// in blocks of 8 channels x 16 positions: one 256-bit shuffle moves 16 values where a 4 x 4
// float block's moves 4, and each value is converted once, 8 or 16 at a time, on the fp32 side.
// fp32 goes in 8 x 8 blocks (24 shuffles per 64 values against 32). In cache (nearest, N4 C32
// 64x64 fp16, one thread) the two transposes took half the kernel's time with 4 x 4 float
// blocks; the 16-bit blocks took nearest b32 from 2.94 to 2.53 ms (fp16, one thread), the fp32
// ones bilinear N1 C256 from 4.5 to 4.1 ms (2 threads). A block reads 32 bytes of 8 rows, so
// the lines of rows a power of two apart (which share an L1 set) are each used twice before
// they can be evicted.

// In place, x[j] = 16 values of row j: each 128-bit half is transposed as an 8 x 8 block, so
// x[k] becomes (column k of the first 8 values | column k of the next 8).
ACLNN_ALWAYS_INLINE void transpose8x8_halves(__m256i x[8]) {
  const __m256i t0 = _mm256_unpacklo_epi16(x[0], x[1]), t1 = _mm256_unpackhi_epi16(x[0], x[1]);
  const __m256i t2 = _mm256_unpacklo_epi16(x[2], x[3]), t3 = _mm256_unpackhi_epi16(x[2], x[3]);
  const __m256i t4 = _mm256_unpacklo_epi16(x[4], x[5]), t5 = _mm256_unpackhi_epi16(x[4], x[5]);
  const __m256i t6 = _mm256_unpacklo_epi16(x[6], x[7]), t7 = _mm256_unpackhi_epi16(x[6], x[7]);
  const __m256i u0 = _mm256_unpacklo_epi32(t0, t2), u1 = _mm256_unpackhi_epi32(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi32(t1, t3), u3 = _mm256_unpackhi_epi32(t1, t3);
  const __m256i u4 = _mm256_unpacklo_epi32(t4, t6), u5 = _mm256_unpackhi_epi32(t4, t6);
  const __m256i u6 = _mm256_unpacklo_epi32(t5, t7), u7 = _mm256_unpackhi_epi32(t5, t7);
  x[0] = _mm256_unpacklo_epi64(u0, u4);
  x[1] = _mm256_unpackhi_epi64(u0, u4);
  x[2] = _mm256_unpacklo_epi64(u1, u5);
  x[3] = _mm256_unpackhi_epi64(u1, u5);
  x[4] = _mm256_unpacklo_epi64(u2, u6);
  x[5] = _mm256_unpackhi_epi64(u2, u6);
  x[6] = _mm256_unpacklo_epi64(u3, u7);
  x[7] = _mm256_unpackhi_epi64(u3, u7);
}

// 8 storage values -> 8 floats.
template <class T>
ACLNN_ALWAYS_INLINE F8 widen8(__m128i h) {
  if constexpr (std::is_same<T, bfloat16_t>::value) return (F8)_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
  else return (F8)_mm256_cvtph_ps(h);
}

// 16 floats (lo: the first 8) -> 16 storage values, bit for bit as simd.h's stores round them.
template <class T>
ACLNN_ALWAYS_INLINE __m256i narrow16(const F8& lo, const F8& hi) {
#if ACLNN_ISA_LEVEL >= 2
  const __m512 v = _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512((__m256)lo)), _mm256_castps_pd((__m256)hi), 1));
  if constexpr (std::is_same<T, bfloat16_t>::value)
    return _mm512_cvtepi32_epi16((__m512i)simd::float_to_bf16_bits((simd::VecF)v));
  else
    return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
  if constexpr (std::is_same<T, bfloat16_t>::value) {
    // packus works per 128-bit half: [lo0-3 hi0-3 | lo4-7 hi4-7]; qwords 0, 2, 1, 3.
    const __m256i packed = _mm256_packus_epi32((__m256i)simd::float_to_bf16_bits((simd::VecF)lo),
                                               (__m256i)simd::float_to_bf16_bits((simd::VecF)hi));
    return _mm256_permute4x64_epi64(packed, 0xD8);
  } else {
    return _mm256_set_m128i(_mm256_cvtps_ph((__m256)hi, _MM_FROUND_TO_NEAREST_INT),
                            _mm256_cvtps_ph((__m256)lo, _MM_FROUND_TO_NEAREST_INT));
  }
#endif
}

// In place, x[j] = 8 floats of row j: x[k] becomes column k (an 8 x 8 block of fp32 values).
ACLNN_ALWAYS_INLINE void transpose8x8_floats(__m256 x[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(x[0], x[1]), t1 = _mm256_unpackhi_ps(x[0], x[1]);
  const __m256 t2 = _mm256_unpacklo_ps(x[2], x[3]), t3 = _mm256_unpackhi_ps(x[2], x[3]);
  const __m256 t4 = _mm256_unpacklo_ps(x[4], x[5]), t5 = _mm256_unpackhi_ps(x[4], x[5]);
  const __m256 t6 = _mm256_unpacklo_ps(x[6], x[7]), t7 = _mm256_unpackhi_ps(x[6], x[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  x[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  x[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  x[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  x[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  x[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  x[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  x[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  x[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Positions per 8-channel block: 16 for 16-bit storage (two 8 x 8 blocks, one per 128-bit
// lane), 8 for fp32.
template <class T>
constexpr int64_t kBlock8Positions = sizeof(T) == 2 ? 16 : 8;

// dst[q * Cb + j] = rows[j][q] as fp32 for j < 8 and q in [0, end), a multiple of
// kBlock8Positions<T>; rows [0, prefetch) prefetched ahead (prefetch_ahead).
template <class T, int Cb>
void rows8_to_lanes(const T* const* rows, int64_t end, float* dst, int prefetch) {
  prefetch = std::min(prefetch, 8);
  for (int64_t q = 0; q < end; q += kBlock8Positions<T>) {
    prefetch_ahead(rows, prefetch, q);
    if constexpr (std::is_same<T, float>::value) {
      __m256 x[8];
      for (int j = 0; j < 8; ++j) x[j] = _mm256_loadu_ps(rows[j] + q);
      transpose8x8_floats(x);
      for (int k = 0; k < 8; ++k) _mm256_storeu_ps(dst + (q + k) * Cb, x[k]);
    } else {
      __m256i x[8];
      for (int j = 0; j < 8; ++j) x[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[j] + q));
      transpose8x8_halves(x);
      for (int k = 0; k < 8; ++k) {
        const F8 first = widen8<T>(_mm256_castsi256_si128(x[k]));
        const F8 second = widen8<T>(_mm256_extracti128_si256(x[k], 1));
        std::memcpy(dst + (q + k) * Cb, &first, sizeof first);
        std::memcpy(dst + (q + 8 + k) * Cb, &second, sizeof second);
      }
    }
  }
}
#endif

// All-zero bits: +0.0 in every storage type, as many bytes as kTile floats.
alignas(64) constexpr float kZeroRow[kTile] = {};

// dst[q * Cb + c] = rows[c][q] as fp32, q in [0, len), len <= kTile: 8-channel blocks on the
// AVX2 and AVX-512 levels (32 bytes of each of 8 rows per block: the lines of rows that share an
// L1 set are still each used twice before they can be evicted), 4 x 4 float blocks otherwise.
// Rows [0, prefetch) are prefetched a tile ahead (prefetch_ahead).
template <class T, int Cb>
void rows_to_lane_blocks(const T* const* rows, int64_t len, float* dst, int prefetch) {
#if ACLNN_SIMD_X86 && ACLNN_ISA_LEVEL >= 1
  if constexpr (Cb >= 8) {
    const int64_t end = len - len % kBlock8Positions<T>;
    for (int c = 0; c < Cb; c += 8) rows8_to_lanes<T, Cb>(rows + c, end, dst + c, std::max(prefetch - c, 0));
    for (int64_t q = end; q < len; ++q)
      for (int c = 0; c < Cb; ++c) dst[q * Cb + c] = to_float(rows[c][q]);
    return;
  }
#endif
  const int64_t len4 = len & ~int64_t(3);
  for (int c = 0; c < Cb; c += 4) {
    const T *r0 = rows[c], *r1 = rows[c + 1], *r2 = rows[c + 2], *r3 = rows[c + 3];
    const int pf = std::min(std::max(prefetch - c, 0), 4);
    int64_t q = 0;
#if ACLNN_SIMD_X86 && ACLNN_ISA_LEVEL >= 2
    if constexpr (Cb == 4) {
      for (; q + 16 <= len4; q += 16) {
        prefetch_ahead(rows + c, pf, q);
        __m512 x[4] = {(__m512)simd::load(r0 + q), (__m512)simd::load(r1 + q), (__m512)simd::load(r2 + q),
                       (__m512)simd::load(r3 + q)};
        rows4_to_positions16(x);
        for (int k = 0; k < 4; ++k) _mm512_storeu_ps(dst + (q + 4 * k) * Cb, x[k]);
      }
    }
#endif
    for (; q < len4; q += 4) {
      prefetch_ahead(rows + c, pf, q);
      F4 a = load4_as_float(r0 + q), b = load4_as_float(r1 + q);
      F4 x = load4_as_float(r2 + q), y = load4_as_float(r3 + q);
      transpose4(a, b, x, y);
      store4(dst + q * Cb + c, a);
      store4(dst + (q + 1) * Cb + c, b);
      store4(dst + (q + 2) * Cb + c, x);
      store4(dst + (q + 3) * Cb + c, y);
    }
    for (int64_t q = len4; q < len; ++q) {
      dst[q * Cb + c] = to_float(r0[q]);
      dst[q * Cb + c + 1] = to_float(r1[q]);
      dst[q * Cb + c + 2] = to_float(r2[q]);
      dst[q * Cb + c + 3] = to_float(r3[q]);
    }
  }
}

// Rows [0, prefetch) are planes in memory, prefetched a tile ahead (one channel: by the caller).
template <class T, int Cb>
void rows_to_lanes(const T* const* rows, int64_t len, float* dst, int prefetch) {
  if constexpr (Cb == 1) {  // one channel: the lanes are the row
    simd::convert_to_float(rows[0], dst, len);
  } else {
    rows_to_lane_blocks<T, Cb>(rows, len, dst, prefetch);
  }
}

// Lanes c..c+3 of position q of channel-last buffers, summed over `parts` (each part_stride
// floats apart) in part order when Parts (the one-part case is its own instantiation: the
// write-back is hot and must not depend on the optimiser specialising it).
template <int Cb, bool Parts>
ACLNN_ALWAYS_INLINE F4 lanes4(const float* src, int64_t parts, int64_t part_stride, int c, int64_t q) {
  F4 v = load4(src + q * Cb + c);
  if (Parts)
    for (int64_t k = 1; k < parts; ++k) v += load4(src + k * part_stride + q * Cb + c);
  return v;
}

// Rows r[0..3] (channels c..c+3, storage type T) of positions [q0, q1) from channel-last
// buffers summed over `parts`. Rows from `live` on are scratch nobody reads (channels past the
// tensor's): the whole-vector loops skip their conversions and stores (a 3-channel image's
// fourth lane; the bf16 RGB warp's write-back narrowed a quarter of its vectors for nothing).
template <class T, int Cb, bool Parts>
void group_to_rows(const float* src, int64_t parts, int64_t part_stride, int c, int64_t q0, int64_t q1,
                   T* const* r, int live = 4) {
  int64_t q = q0;
#if ACLNN_SIMD_X86 && ACLNN_ISA_LEVEL >= 2
  if constexpr (Cb == 4) {
    for (; q + 16 <= q1; q += 16) {
      __m512 x[4];  // c is 0: a 4-lane block is one group
      for (int k = 0; k < 4; ++k) {
        const float* at = src + (q + 4 * k) * Cb + c;
        x[k] = _mm512_loadu_ps(at);
        if (Parts)  // in part order, as lanes4
          for (int64_t p = 1; p < parts; ++p) x[k] = _mm512_add_ps(x[k], _mm512_loadu_ps(at + p * part_stride));
      }
      positions16_to_rows4(x);
      for (int j = 0; j < 4; ++j)
        if (j < live) simd::store(r[j] + q, (simd::VecF)x[j]);
    }
  }
#endif
  if constexpr (!std::is_same<T, float>::value) {
    // 16 positions at a time, each row narrowed with full-width conversions (4-lane narrowing
    // costs several times more per value).
    for (; q + 16 <= q1; q += 16) {
      F4 v[16];  // after the transposes, v[k + j] = channel c + j of positions q + k .. q + k + 3
      for (int k = 0; k < 16; ++k) v[k] = lanes4<Cb, Parts>(src, parts, part_stride, c, q + k);
      for (int k = 0; k < 16; k += 4) transpose4(v[k], v[k + 1], v[k + 2], v[k + 3]);
      for (int j = 0; j < 4; ++j)
        if (j < live) store16_from_float(r[j] + q, v[j], v[4 + j], v[8 + j], v[12 + j]);
    }
  }
  for (; q + 4 <= q1; q += 4) {
    F4 a = lanes4<Cb, Parts>(src, parts, part_stride, c, q);
    F4 b = lanes4<Cb, Parts>(src, parts, part_stride, c, q + 1);
    F4 x = lanes4<Cb, Parts>(src, parts, part_stride, c, q + 2);
    F4 y = lanes4<Cb, Parts>(src, parts, part_stride, c, q + 3);
    transpose4(a, b, x, y);
    store4_from_float(r[0] + q, a);
    store4_from_float(r[1] + q, b);
    store4_from_float(r[2] + q, x);
    store4_from_float(r[3] + q, y);
  }
  for (; q < q1; ++q) {
    const F4 v = lanes4<Cb, Parts>(src, parts, part_stride, c, q);
    float lane[4];
    std::memcpy(lane, &v, sizeof lane);
    T narrow[4];
    for (int j = 0; j < 4; ++j) narrow[j] = from_float<T>(lane[j]);
    for (int j = 0; j < 4; ++j) r[j][q] = narrow[j];
  }
}

// Rows r[0..kRows) start at one offset within a 64-byte line (their streamed stores then fill
// whole lines together).
template <int kRows, class T>
bool share_line_offset(T* const* r) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(r[0]) & 63;
  for (int j = 1; j < kRows; ++j)
    if ((reinterpret_cast<uintptr_t>(r[j]) & 63) != at) return false;
  return true;
}

#if ACLNN_SIMD_X86 && ACLNN_ISA_LEVEL >= 1
// Lanes c..c+7 of position q, summed over `parts` in part order (as lanes4).
template <int Cb, bool Parts>
ACLNN_ALWAYS_INLINE F8 lanes8(const float* src, int64_t parts, int64_t part_stride, int c, int64_t q) {
  F8 v;
  std::memcpy(&v, src + q * Cb + c, sizeof v);
  if (Parts)
    for (int64_t k = 1; k < parts; ++k) {
      F8 w;
      std::memcpy(&w, src + k * part_stride + q * Cb + c, sizeof w);
      v += w;
    }
  return v;
}

// group_to_rows for channels c..c+7 of positions [q0, q1): blocks of kBlock8Positions<T>
// (fp32: 8 x 8 blocks; 16-bit: narrowed on the fp32 side, then transposed as 16-bit values),
// the rest by 4-channel groups.
template <class T, int Cb, bool Parts>
void group8_to_rows(const float* src, int64_t parts, int64_t part_stride, int c, int64_t q0, int64_t q1,
                    T* const* r) {
  int64_t q = q0;
  for (; q + kBlock8Positions<T> <= q1; q += kBlock8Positions<T>) {
    if constexpr (std::is_same<T, float>::value) {
      __m256 y[8];  // y[k] = channels c..c+7 of position q + k
      for (int k = 0; k < 8; ++k) y[k] = (__m256)lanes8<Cb, Parts>(src, parts, part_stride, c, q + k);
      transpose8x8_floats(y);  // y[j] = channel c + j of positions q..q+7
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(r[j] + q, y[j]);
    } else {
      __m256i y[8];  // y[k] = (position q + k | position q + 8 + k), channels c..c+7 each
      for (int k = 0; k < 8; ++k)
        y[k] = narrow16<T>(lanes8<Cb, Parts>(src, parts, part_stride, c, q + k),
                           lanes8<Cb, Parts>(src, parts, part_stride, c, q + 8 + k));
      transpose8x8_halves(y);  // y[j] = channel c + j of positions q..q+15
      for (int j = 0; j < 8; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(r[j] + q), y[j]);
    }
  }
  group_to_rows<T, Cb, Parts>(src, parts, part_stride, c, q, q1, r);
  group_to_rows<T, Cb, Parts>(src, parts, part_stride, c + 4, q, q1, r + 4);
}
#endif

#if ACLNN_SIMD_X86 && ACLNN_ISA_LEVEL >= 2
// group8_to_rows with whole lines streamed (see float_group_to_rows_streamed below; the plan
// streams on AVX-512 only); rows r[0..7] share their offset within a line. A line of each row
// is 16 positions in fp32, two 8 x 8 blocks, or 32 in 16-bit storage, two blocks of 16
// positions (narrowed on the fp32 side, transposed as 16-bit values, as group8_to_rows); either
// way the two blocks are joined into one 64-byte store per row. The partial lines at either end
// go through group8_to_rows.
template <class T, int Cb, bool Parts>
void group8_to_rows_streamed(const float* src, int64_t parts, int64_t part_stride, int c, int64_t len,
                             T* const* r) {
  constexpr int64_t kLine = 64 / int64_t(sizeof(T));  // positions per line
  const int64_t head = simd::head_to<64>(r[0], len);
  group8_to_rows<T, Cb, Parts>(src, parts, part_stride, c, 0, head, r);
  const auto lanes = [&](int64_t at) { return lanes8<Cb, Parts>(src, parts, part_stride, c, at); };
  int64_t q = head;
  for (; q + kLine <= len; q += kLine) {
    if constexpr (std::is_same<T, float>::value) {
      __m256 lo[8], hi[8];  // channels c..c+7 of positions q + k and q + 8 + k
      for (int k = 0; k < 8; ++k) lo[k] = (__m256)lanes(q + k), hi[k] = (__m256)lanes(q + 8 + k);
      transpose8x8_floats(lo);
      transpose8x8_floats(hi);
      for (int j = 0; j < 8; ++j)
        _mm512_stream_ps(r[j] + q, _mm512_insertf32x8(_mm512_castps256_ps512(lo[j]), hi[j], 1));
    } else {
      __m256i lo[8], hi[8];  // lo[k]: positions q + k | q + 8 + k; hi[k]: q + 16 + k | q + 24 + k
      for (int k = 0; k < 8; ++k) {
        lo[k] = narrow16<T>(lanes(q + k), lanes(q + 8 + k));
        hi[k] = narrow16<T>(lanes(q + 16 + k), lanes(q + 24 + k));
      }
      transpose8x8_halves(lo);
      transpose8x8_halves(hi);
      for (int j = 0; j < 8; ++j)
        _mm512_stream_si512(reinterpret_cast<__m512i*>(r[j] + q),
                            _mm512_inserti64x4(_mm512_castsi256_si512(lo[j]), hi[j], 1));
    }
  }
  group8_to_rows<T, Cb, Parts>(src, parts, part_stride, c, q, len, r);
}

#endif

// The same with whole cache lines written by stores that bypass the caches, for fp32: for a
// big inputGrad nobody reads soon, this saves reading every line before overwriting it (the
// kernel is memory-bound there). Each line is written by 4 consecutive 16-byte stores, so the
// write-combining buffer sends it whole. Callers end with simd::stream_fence(). (16-bit groups
// of 4 channels do not stream: 16-byte streams of them measured slower than plain stores.)
template <int Cb, bool Parts>
void float_group_to_rows_streamed(const float* src, int64_t parts, int64_t part_stride, int c, int64_t len,
                                  float* const* r) {
  constexpr int64_t kLine = 16;  // values per line
  const int64_t head = simd::head_to<64>(r[0], len);
  group_to_rows<float, Cb, Parts>(src, parts, part_stride, c, 0, head, r);
  int64_t q = head;
  for (; q + kLine <= len; q += kLine) {
    F4 v[kLine];  // after the transposes, v[k + j] = channel c + j of positions q + k .. q + k + 3
    for (int k = 0; k < kLine; ++k) v[k] = lanes4<Cb, Parts>(src, parts, part_stride, c, q + k);
    for (int k = 0; k < kLine; k += 4) transpose4(v[k], v[k + 1], v[k + 2], v[k + 3]);
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < kLine; k += 4) stream16(r[j] + q + k, v[k + j]);
  }
  group_to_rows<float, Cb, Parts>(src, parts, part_stride, c, q, len, r);
}

// Points rows[c] at channel c's values for positions [p0, p0 + len), len <= kTile: into the
// tensor when it is contiguous along the positions, else into `raw` (gathered); missing
// channels (the last block of C) read zeros.
template <class T, int Cb>
void load_rows(const T* base, int64_t schan, int cvalid, const Plane& pl, int64_t p0, int64_t len,
               T (*raw)[kTile], const T** rows) {
  const bool contiguous = pl.flat && pl.scol == 1;
  for (int c = 0; c < Cb; ++c) {
    if (c >= cvalid) {
      rows[c] = reinterpret_cast<const T*>(kZeroRow);
      continue;
    }
    const T* src = base + c * schan;
    if (contiguous) {
      rows[c] = src + p0;
    } else {
      T* row = raw[c];
      for_each_offset(pl, p0, len, [&](int64_t q, int64_t off) { row[q] = src[off]; });
      rows[c] = row;
    }
  }
}

// Whether a plane's positions hold their channels side by side (channels-last, NHWC): the
// channel-last lanes are then a strided copy of whole pixels, with no transposes. Gathered as
// rows and transposed back, channels-last operands had cost 2-2.6x their contiguous time.
inline bool pixels_interleaved(int64_t schan, const Plane& pl) { return schan == 1 && pl.flat && pl.scol != 1; }

// load_channels of pixels_interleaved operands: each position's cvalid channels, one vector run.
template <class T, int Cb>
void load_interleaved(const T* base, int cvalid, int64_t step, int64_t p0, int64_t len, float* dst) {
  for (int64_t q = 0; q < len; ++q) {
    const T* src = base + (p0 + q) * step;
    float* to = dst + q * Cb;
    for (int c = 0; c < Cb; c += simd::kWidth) {
      const int64_t have = std::min<int64_t>(std::max(cvalid - c, 0), simd::kWidth);
      const simd::VecF v = have == simd::kWidth ? simd::load(src + c)
                           : have > 0           ? simd::load_partial(src + c, have)
                                                : simd::zero();
      if (Cb - c >= simd::kWidth) simd::store(to + c, v);
      else simd::store_partial(to + c, v, Cb - c);
    }
  }
}

// store_channel_blocks of pixels_interleaved outputs: each position's cvalid channels summed
// over `parts` (in part order, as group_to_rows adds them), rounded to T, one vector run.
template <class T, int Cb, bool Parts>
void store_interleaved(const float* src, int64_t parts, int64_t part_stride, int cvalid, T* base, int64_t step,
                       int64_t p0, int64_t len) {
  for (int64_t q = 0; q < len; ++q) {
    const float* from = src + (p0 + q) * Cb;
    T* out = base + (p0 + q) * step;
    for (int c = 0; c < cvalid; c += simd::kWidth) {
      const int64_t have = std::min<int64_t>(cvalid - c, simd::kWidth);
      simd::VecF v = simd::load_partial(from + c, have);
      if (Parts)
        for (int64_t k = 1; k < parts; ++k) v = v + simd::load_partial(from + c + k * part_stride, have);
      if (have == simd::kWidth) simd::store(out + c, v);
      else simd::store_partial(out + c, v, have);
    }
  }
}

// Reads channels [0, cvalid) of positions [p0, p0 + len) into dst[q * Cb + c] as fp32; lanes of
// missing channels are zero.
template <class T, int Cb>
void load_channels(const T* base, int64_t schan, int cvalid, const Plane& pl, int64_t p0, int64_t len,
                   float* dst) {
  if (pixels_interleaved(schan, pl)) return load_interleaved<T, Cb>(base, cvalid, pl.scol, p0, len, dst);
  alignas(64) T raw[Cb][kTile];
  const T* rows[Cb];
  const bool contiguous = pl.flat && pl.scol == 1;
  for (int64_t q0 = 0; q0 < len; q0 += kTile) {
    const int64_t n = std::min(kTile, len - q0);
    load_rows<T, Cb>(base, schan, cvalid, pl, p0 + q0, n, raw, rows);
    // The next tile's lines into L2 while this one is transposed (the hardware prefetcher does
    // poorly on 16 short interleaved streams): spread over the transposes (prefetch_ahead), or
    // here for one channel's single row. A prefetch never faults, even past the end.
    if (Cb == 1 && contiguous) {
      constexpr int64_t kLine = 64 / int64_t(sizeof(T));
      for (int64_t k = 0; k < n; k += kLine) __builtin_prefetch(base + p0 + q0 + n + k, 0, 2);
    }
    rows_to_lanes<T, Cb>(rows, n, dst + q0 * Cb, contiguous ? cvalid : 0);
  }
}

// Writes channels [0, cvalid) of pixels [p0, p0 + len): the sum over `parts` channel-last
// buffers (each part_stride floats apart, added in part order), rounded to T. `stream`:
// contiguous output rows go out with cache-bypassing whole-line stores where 4 rows share
// their alignment.
template <class T, int Cb, bool Parts>
void store_channel_blocks(const float* src, int64_t parts, int64_t part_stride, int cvalid, T* base,
                          int64_t schan, const Plane& pl, int64_t p0, int64_t len, bool stream) {
  if (pixels_interleaved(schan, pl))
    return store_interleaved<T, Cb, Parts>(src, parts, part_stride, cvalid, base, pl.scol, p0, len);
  alignas(64) T raw[Cb][kTile];
  T* rows[Cb];
  const bool contiguous = pl.flat && pl.scol == 1;
  // Streaming: chunks after the first start on an output line, so only the first and the last
  // line of a row are written partially (a line split between two chunks would be read).
  int64_t first = kTile;
  if (stream && contiguous) first -= int64_t((reinterpret_cast<uintptr_t>(base + p0) / sizeof(T)) % (64 / sizeof(T)));
  for (int64_t q0 = 0, n = 0; q0 < len; q0 += n) {
    n = std::min(q0 == 0 ? first : kTile, len - q0);
    for (int c = 0; c < Cb; ++c) rows[c] = contiguous && c < cvalid ? base + c * schan + p0 + q0 : raw[c];
    const float* chunk = src + (p0 + q0) * Cb;
    int c = 0;
#if ACLNN_SIMD_X86 && ACLNN_ISA_LEVEL >= 1
    if constexpr (Cb >= 8) {
      if (!stream) {
        for (; c + 8 <= cvalid; c += 8) group8_to_rows<T, Cb, Parts>(chunk, parts, part_stride, c, 0, n, rows + c);
      }
#if ACLNN_ISA_LEVEL >= 2
      if (stream && contiguous)  // (streams on AVX-512 only: see the plan)
        for (; c + 8 <= cvalid && share_line_offset<8>(rows + c); c += 8)
          group8_to_rows_streamed<T, Cb, Parts>(chunk, parts, part_stride, c, n, rows + c);
#endif
    }
#endif
    for (; c < cvalid; c += 4) {
      // A partial last group writes its missing channels' rows into scratch.
      T* group[4];
      for (int j = 0; j < 4; ++j) group[j] = c + j < cvalid ? rows[c + j] : raw[c + j];
      if constexpr (std::is_same<T, float>::value) {  // (16-bit groups of 4 stay plain: see the plan)
        if (stream && contiguous && c + 4 <= cvalid && share_line_offset<4>(group) &&
            reinterpret_cast<uintptr_t>(group[0]) % sizeof(F4) == 0) {
          float_group_to_rows_streamed<Cb, Parts>(chunk, parts, part_stride, c, n, group);
          continue;
        }
      }
      group_to_rows<T, Cb, Parts>(chunk, parts, part_stride, c, 0, n, group, std::min(4, cvalid - c));
    }
    if (!contiguous) {
      for (int c = 0; c < cvalid; ++c) {
        T* dst = base + c * schan;
        const T* row = raw[c];
        for_each_offset(pl, p0 + q0, n, [&](int64_t q, int64_t off) { dst[off] = row[q]; });
      }
    }
  }
}

// store_channels of a one-channel block: the buffer is the plane (summed over `parts` in part
// order), converted in vector runs; fp32 goes out streamed when `stream` and the plane is
// contiguous.
template <class T, bool Parts>
void store_plane(const float* src, int64_t parts, int64_t part_stride, T* base, const Plane& pl, int64_t p0,
                 int64_t len, bool stream) {
  alignas(64) float sum[kTile];
  alignas(64) T raw[kTile];
  const bool contiguous = pl.flat && pl.scol == 1;
  for (int64_t q0 = 0; q0 < len; q0 += kTile) {
    const int64_t n = std::min(kTile, len - q0);
    const float* v = src + p0 + q0;
    if (Parts) {
      std::copy(v, v + n, sum);
      for (int64_t k = 1; k < parts; ++k) {
        const float* w = v + k * part_stride;
        int64_t i = 0;
        for (; i + simd::kWidth <= n; i += simd::kWidth) simd::store(sum + i, simd::load(sum + i) + simd::load(w + i));
        for (; i < n; ++i) sum[i] += w[i];
      }
      v = sum;
    }
    if (contiguous) {
      T* out = base + p0 + q0;
      const auto value = [&](int64_t i, int64_t count) __attribute__((always_inline)) {
        return count == simd::kWidth ? simd::load(v + i) : simd::load_partial(v + i, count);
      };
      if (stream && std::is_same<T, float>::value) simd::store_run<true>(out, n, value);
      else simd::store_run<false>(out, n, value);
    } else {
      simd::convert_from_float(v, raw, n);
      for_each_offset(pl, p0 + q0, n, [&](int64_t q, int64_t off) { base[off] = raw[q]; });
    }
  }
}

template <class T, int Cb, bool Parts>
void store_channels(const float* src, int64_t parts, int64_t part_stride, int cvalid, T* base, int64_t schan,
                    const Plane& pl, int64_t p0, int64_t len, bool stream) {
  if constexpr (Cb == 1) {
    store_plane<T, Parts>(src, parts, part_stride, base, pl, p0, len, stream);
  } else {
    store_channel_blocks<T, Cb, Parts>(src, parts, part_stride, cvalid, base, schan, pl, p0, len, stream);
  }
}

}  // namespace
}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
