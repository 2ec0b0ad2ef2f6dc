// GridSampler2DBackward: the tiles of phase 2, one block of channels on channel-last buffers.
// A part of the kernel ops/grid_sampler2d_backward.cpp, compiled inside it once per ISA level
// (hence the ISA namespace and the anonymous namespace); nothing outside the kernel includes it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "aclnn_cpu/simd.h"
#include "channel_layout.h"
#include "constants.h"
#include "records.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

// ---------------------------------------------------------------------------------------------
// Phase 2 compute: one tile of positions for one channel block. g: the tile's gradOutput,
// [len][Cb]; in: the block's input, channel-last; ig: the block's inputGrad accumulator;
// part: the block's gridGrad partial sums, two floats per position.

template <int Cb>
struct Lanes {
  typedef float V __attribute__((vector_size(Cb * sizeof(float))));
};
// One lane is a plain float: GCC kept one-element vectors in general registers and on the
// stack (bicubic's row sums went through memory three times a row).
template <>
struct Lanes<1> {
  typedef float V;
};

// Vector helpers take and return vectors through references: passing a wider-than-native
// vector by value would make the baseline build's calling convention depend on -m flags.
// Whether the Cb floats at p are all finite.
template <int Cb>
inline bool all_finite(const float* p) {
  for (int i = 0; i < Cb; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

// Whether any of the n floats at p is infinite or NaN: an integer OR over them, which vectorises.
inline bool any_nonfinite(const float* p, int64_t n) {
  uint32_t special = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + i, 4);
    special |= uint32_t((bits & 0x7f800000u) == 0x7f800000u);
  }
  return special != 0;
}

template <int Cb>
inline void vload(typename Lanes<Cb>::V& v, const float* p) {
  std::memcpy(&v, p, sizeof v);
}
template <int Cb>
inline void vstore(float* p, const typename Lanes<Cb>::V& v) {
  std::memcpy(p, &v, sizeof v);
}
// a * b + c, fused (one rounding) where the level has FMA. The build disables the compiler's
// own contraction, so fusing is decided here: per lane and per level, never per thread count.
template <int Cb>
ACLNN_ALWAYS_INLINE typename Lanes<Cb>::V fmadd(const typename Lanes<Cb>::V& a, const typename Lanes<Cb>::V& b,
                                             const typename Lanes<Cb>::V& c) {
#if ACLNN_ISA_LEVEL >= 1
  using V = typename Lanes<Cb>::V;
  if constexpr (Cb == 1) {
    return __builtin_fmaf(a, b, c);
  } else if constexpr (Cb == 4) {
    return (V)_mm_fmadd_ps((__m128)a, (__m128)b, (__m128)c);
  } else if constexpr (Cb == 8) {
    return (V)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
  } else {
#if ACLNN_ISA_LEVEL >= 2
    return (V)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#else
    typedef float H __attribute__((vector_size(32)));
    const H lo = (H)_mm256_fmadd_ps((__m256)__builtin_shufflevector(a, a, 0, 1, 2, 3, 4, 5, 6, 7),
                                    (__m256)__builtin_shufflevector(b, b, 0, 1, 2, 3, 4, 5, 6, 7),
                                    (__m256)__builtin_shufflevector(c, c, 0, 1, 2, 3, 4, 5, 6, 7));
    const H hi = (H)_mm256_fmadd_ps((__m256)__builtin_shufflevector(a, a, 8, 9, 10, 11, 12, 13, 14, 15),
                                    (__m256)__builtin_shufflevector(b, b, 8, 9, 10, 11, 12, 13, 14, 15),
                                    (__m256)__builtin_shufflevector(c, c, 8, 9, 10, 11, 12, 13, 14, 15));
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#endif
  }
#else
  return a * b + c;
#endif
}
// (With one lane, V is float and the overload above serves.)
template <int Cb, std::enable_if_t<(Cb > 1), int> = 0>
ACLNN_ALWAYS_INLINE typename Lanes<Cb>::V fmadd(const typename Lanes<Cb>::V& a, float b, const typename Lanes<Cb>::V& c) {
  // b - 0.0 is b for every b, so GCC folds it to a plain splat; V{} + b is not (-0.0 + 0.0 is
  // +0.0) and cost an addition per call. A lane-by-lane loop became masked broadcasts.
  return fmadd<Cb>(a, b - typename Lanes<Cb>::V{}, c);
}

// dst[0:Cb] += v * w, with the read and the write in program order (rows may alias).
template <int Cb>
inline void vaccumulate(float* dst, const typename Lanes<Cb>::V& v, float w) {
  typename Lanes<Cb>::V acc;
  vload<Cb>(acc, dst);
  acc = fmadd<Cb>(v, w, acc);
  vstore<Cb>(dst, acc);
}
// Lane sums of two vectors at once, each in a fixed pairwise tree (lane i += lane i + w for
// w = Cb/2, ..., 1); out[0] = sum of a, out[1] = sum of b. Each step packs the halves of both
// vectors into one vector of half the width.
typedef float F2 __attribute__((vector_size(8)));

ACLNN_ALWAYS_INLINE void pair_sum4(const F4& ab, float* out) {  // ab = [a0 a1 | b0 b1]
  const F2 s = __builtin_shufflevector(ab, ab, 0, 2) + __builtin_shufflevector(ab, ab, 1, 3);
  std::memcpy(out, &s, sizeof s);
}

template <int Cb>
ACLNN_ALWAYS_INLINE void pair_sum(const typename Lanes<Cb>::V& a, const typename Lanes<Cb>::V& b, float* out);

template <>
ACLNN_ALWAYS_INLINE void pair_sum<1>(const typename Lanes<1>::V& a, const typename Lanes<1>::V& b, float* out) {
  out[0] = a;
  out[1] = b;
}
template <>
ACLNN_ALWAYS_INLINE void pair_sum<4>(const F4& a, const F4& b, float* out) {
  pair_sum4(__builtin_shufflevector(a, b, 0, 1, 4, 5) + __builtin_shufflevector(a, b, 2, 3, 6, 7), out);
}
template <>
ACLNN_ALWAYS_INLINE void pair_sum<8>(const typename Lanes<8>::V& a, const typename Lanes<8>::V& b, float* out) {
  const typename Lanes<8>::V s = __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11) +
                                 __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15);
  const F4 t = __builtin_shufflevector(s, s, 0, 1, 4, 5) + __builtin_shufflevector(s, s, 2, 3, 6, 7);
  pair_sum4(t, out);
}
template <>
ACLNN_ALWAYS_INLINE void pair_sum<16>(const typename Lanes<16>::V& a, const typename Lanes<16>::V& b, float* out) {
  const typename Lanes<16>::V s =
      __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
      __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  pair_sum<8>(__builtin_shufflevector(s, s, 0, 1, 2, 3, 4, 5, 6, 7),
              __builtin_shufflevector(s, s, 8, 9, 10, 11, 12, 13, 14, 15), out);
}

struct TileArgs {
  const Records* rec;
  int64_t i0;     // record index of the tile's first position
  int64_t len;    // positions in the tile
  const float* g;   // gradOutput of the tile, [len][Cb]
  const float* in;  // the block's input, channel-last (may be null when unused)
  float* ig;        // the block's inputGrad accumulator (may be null when unused)
  float* part;      // gridGrad partial sums of the tile's first position (x, y per position)
  int64_t sink;     // float offset of the spare pixel row: H * W * Cb
  // gradOutput as planes (tile_reads_planes), in the storage type the tile function was picked
  // for: channel c's row of the tile at rows[c], a row of zeros for the block's missing
  // channels; g is then unused. Null: g holds the tile.
  const void* const* rows = nullptr;
  // Bilinear on the framed layout (Frame; tiles instantiated Framed): floats from a pixel to
  // the one below, Frame::stride * Cb. The records hold the north-west corners only.
  int64_t frame_row = 0;
};

// Whether tile_bilinear at this level reads a gradOutput tile from its planes (TileArgs::rows)
// in place of the [len][Cb] transpose: 4 lanes on AVX-512, where the wide loop puts 4
// positions' lanes in one vector anyway. Its 4 rows go into that vector with one permutation;
// the transposing pass over the tile was 8-9% of an N4 C3 224x224 warp's time (in-process A/B,
// 2 threads, fp32: 0.966x the time with the planes read in place).
template <int Cb>
constexpr bool tile_reads_planes() {
  return ACLNN_ISA_LEVEL >= 1 && Cb == 4;
}

using TileFn = void (*)(const TileArgs&);

// A bilinear tile's record arrays from its first position on. Held in locals: stores through
// ig could otherwise alias the records' pointers and force reloads.
struct BilinearTile {
  const int32_t *k0, *k1, *k2, *k3;  // corners nw, ne, sw, se
  const float *fw, *fe, *fn, *fs;    // fractions w, e, n, s
  const float* gt;                   // TileArgs' g, in, ig, part, len
  const float* in;
  float* ig;
  float* part;
  int64_t len;
  explicit BilinearTile(const TileArgs& t)
      : k0(t.rec->corner[0] + t.i0), k1(t.rec->corner[1] + t.i0), k2(t.rec->corner[2] + t.i0),
        k3(t.rec->corner[3] + t.i0), fw(t.rec->frac[0] + t.i0), fe(t.rec->frac[1] + t.i0),
        fn(t.rec->frac[2] + t.i0), fs(t.rec->frac[3] + t.i0), gt(t.g), in(t.in), ig(t.ig), part(t.part),
        len(t.len) {}
};

// Prefetches the pixel rows of position q + kPrefetch's corners (when there is one): nw/ne and
// sw/se are adjacent rows, a line apart at 16 lanes, usually in one line below that. Framed:
// the sw corner is frame_row floats below the nw one (k2 unused).
template <int Cb, bool NeedIg, bool NeedGx, bool Framed = false>
ACLNN_ALWAYS_INLINE void prefetch_corner_rows(const int32_t* k0, const int32_t* k2, const float* in, float* ig,
                                              int64_t q, int64_t len, int64_t frame_row = 0) {
  if (q + kPrefetch >= len) return;
  const int64_t p0 = int64_t(k0[q + kPrefetch]) * Cb;
  const int64_t p2 = Framed ? p0 + frame_row : int64_t(k2[q + kPrefetch]) * Cb;
  constexpr bool kTwoLines = Cb >= 16;
  if (NeedIg) {
    __builtin_prefetch(ig + p0, 1);
    __builtin_prefetch(ig + p2, 1);
    if (kTwoLines) {
      __builtin_prefetch(ig + p0 + Cb, 1);
      __builtin_prefetch(ig + p2 + Cb, 1);
    }
  }
  if (NeedGx) {
    __builtin_prefetch(in + p0);
    __builtin_prefetch(in + p2);
    if (kTwoLines) {
      __builtin_prefetch(in + p0 + Cb);
      __builtin_prefetch(in + p2 + Cb);
    }
  }
}

#if ACLNN_ISA_LEVEL == 2
// v with the Cb lanes at p (Cb 4 or 8) in its J-th 128- or 256-bit lane.
template <int Cb, int J>
ACLNN_ALWAYS_INLINE __m512 insert_lanes(__m512 v, const float* p) {
  if constexpr (Cb == 4) return _mm512_insertf32x4(v, _mm_loadu_ps(p), J);
  else return _mm512_insertf32x8(v, _mm256_loadu_ps(p), J);
}

// gradOutput lanes of 4 positions from the 4 rows of a 4-lane block in 16-bit storage (not
// channel_layout.h's rows4_to_positions16, which transposes 16 positions of fp32 rows):
// [c0 c1 c2 c3 of position 0 | of position 1 | ...] as fp32. The 16 values are packed into one
// 256-bit register and a single word permutation puts them in position order; bf16 lands in the
// high half of each 32-bit lane (the low half zeroed by the mask), fp16 is widened after. The
// rows one at a time took 4 widenings, 3 inserts and a float permutation.
template <class G>
ACLNN_ALWAYS_INLINE __m512 positions4_from_rows16(const G* g0, const G* g1, const G* g2, const G* g3) {
  const auto qword = [](const G* p) {
    int64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  // Word c * 4 + p of `packed` is channel c of position p.
  const __m256i packed = _mm256_set_epi64x(qword(g3), qword(g2), qword(g1), qword(g0));
  if constexpr (std::is_same<G, bfloat16_t>::value) {
    // Word 2 * (p * 4 + c) + 1 takes word c * 4 + p; even words are zeroed.
    const __m512i index = _mm512_set_epi16(15, 0, 11, 0, 7, 0, 3, 0, 14, 0, 10, 0, 6, 0, 2, 0,  //
                                           13, 0, 9, 0, 5, 0, 1, 0, 12, 0, 8, 0, 4, 0, 0, 0);
    return _mm512_castsi512_ps(
        _mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, index, _mm512_castsi256_si512(packed)));
  } else {
    const __m256i index = _mm256_set_epi16(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    return _mm512_cvtph_ps(_mm256_permutexvar_epi16(index, packed));
  }
}

// tile_bilinear's first positions with Cb = 4 or 8 on AVX-512, 16 / Cb positions at a time:
// the corner reads of the grid gradient fill one 512-bit vector per corner (a position per
// 128- or 256-bit lane), so its arithmetic and lane sums run once per 4 or 2 positions. The
// inputGrad scatter stays position by position, in order. The same operations per lane and
// position as the one-position loop, so the same results. Against that loop (in-process A/B,
// 2 threads): N4 C3 224x224 0.85x the time in fp32 and bf16, 0.88x fp16, N4 C2 128x128 0.83x;
// C6-8 0.92-0.96x (fp16 0.97-1.00x). Framed: the records hold the north-west corners only
// (TileArgs::frame_row). Returns the positions done.
template <int Cb, bool NeedIg, bool NeedGx, bool Prefetch, bool Framed, class G>
int64_t tile_bilinear_wide(const TileArgs& t) {
  using V = typename Lanes<Cb>::V;
  constexpr int kStep = 16 / Cb;  // positions per 512-bit vector
  const int64_t row = t.frame_row;  // (framed)
  const BilinearTile b(t);  // (locals, not a structured binding: the lambda below captures them)
  const int32_t *const k0 = b.k0, *const k1 = b.k1, *const k2 = b.k2, *const k3 = b.k3;
  const float *const gt = b.gt, *const in = b.in;
  float *const ig = b.ig, *const part = b.part;
  const int64_t len = b.len, end = len - len % kStep;
  // Lane l of a 512-bit vector belongs to position l / Cb: `spread` copies a position's value
  // across its lanes; `firsts` picks each position's x and y sums (see below).
  const __m512i spread = Cb == 4 ? _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0)
                                 : _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i firsts = Cb == 4 ? _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 14, 12, 10, 8, 6, 4, 2, 0)
                                 : _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 4, 8, 0);
  // The rows in locals: the scatter's stores could otherwise alias t.rows[] (reloaded each step).
  const G* const g0 = t.rows ? static_cast<const G*>(t.rows[0]) : nullptr;
  const G* const g1 = t.rows ? static_cast<const G*>(t.rows[1]) : nullptr;
  const G* const g2 = t.rows ? static_cast<const G*>(t.rows[2]) : nullptr;
  const G* const g3 = t.rows ? static_cast<const G*>(t.rows[3]) : nullptr;
  // [c0 c1 c2 c3 of position 0 | of position 1 | ...] from [4 positions of c0 | of c1 | ...].
  const __m512i transpose = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  for (int64_t q = 0; q < end; q += kStep) {
    // The kStep positions' gradOutput lanes, position j in 128- or 256-bit lane j.
    __m512 gq;
    if constexpr (Cb == 4) {
      if constexpr (sizeof(G) == 2) {
        if (g0) gq = positions4_from_rows16<G>(g0 + q, g1 + q, g2 + q, g3 + q);
        else gq = _mm512_loadu_ps(gt + q * Cb);
      } else if (g0) {
        gq = _mm512_castps128_ps512((__m128)load4_as_float(g0 + q));
        gq = _mm512_insertf32x4(gq, (__m128)load4_as_float(g1 + q), 1);
        gq = _mm512_insertf32x4(gq, (__m128)load4_as_float(g2 + q), 2);
        gq = _mm512_insertf32x4(gq, (__m128)load4_as_float(g3 + q), 3);
        gq = _mm512_permutexvar_ps(transpose, gq);
      } else {
        gq = _mm512_loadu_ps(gt + q * Cb);
      }
    } else {
      gq = _mm512_loadu_ps(gt + q * Cb);
    }
    const auto fractions = [&](const float* f) {  // f[q..q + kStep)
      // (Two floats: an unaligned 64-bit load; _mm_load_sd would assume a double's alignment.)
      return Cb == 4 ? _mm_loadu_ps(f + q) : _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(f + q)));
    };
    const __m128 w4 = fractions(b.fw), e4 = fractions(b.fe), n4 = fractions(b.fn), s4 = fractions(b.fs);
    alignas(16) float wt[4][4];  // [corner][position]: the scatter's weights, multiplied kStep at a time
    if (NeedIg) {
      _mm_store_ps(wt[0], _mm_mul_ps(s4, e4));
      _mm_store_ps(wt[1], _mm_mul_ps(s4, w4));
      _mm_store_ps(wt[2], _mm_mul_ps(n4, e4));
      _mm_store_ps(wt[3], _mm_mul_ps(n4, w4));
    }
    __m512 nw = _mm512_setzero_ps(), ne = nw, sw = nw, se = nw;
    auto position = [&](auto j_) {
      constexpr int j = decltype(j_)::value;
      const int64_t at = q + j;
      if (Prefetch) prefetch_corner_rows<Cb, NeedIg, NeedGx, Framed>(k0, k2, in, ig, at, len, row);
      const int64_t c0 = int64_t(k0[at]) * Cb;
      const int64_t c1 = Framed ? c0 + Cb : int64_t(k1[at]) * Cb;
      const int64_t c2 = Framed ? c0 + row : int64_t(k2[at]) * Cb;
      const int64_t c3 = Framed ? c2 + Cb : int64_t(k3[at]) * Cb;
      if (NeedIg) {
        // One read-modify-write after the other: out-of-range corners share the sink row
        // (framed: corners outside may share a pad pixel).
        V g;
        if constexpr (Cb == 4) {
          g = (V)_mm512_extractf32x4_ps(gq, j);
        } else {
          g = (V)_mm512_extractf32x8_ps(gq, j);
        }
        vaccumulate<Cb>(ig + c0, g, wt[0][j]);
        vaccumulate<Cb>(ig + c1, g, wt[1][j]);
        vaccumulate<Cb>(ig + c2, g, wt[2][j]);
        vaccumulate<Cb>(ig + c3, g, wt[3][j]);
      }
      if (NeedGx) {
        nw = insert_lanes<Cb, j>(nw, in + c0);
        ne = insert_lanes<Cb, j>(ne, in + c1);
        sw = insert_lanes<Cb, j>(sw, in + c2);
        se = insert_lanes<Cb, j>(se, in + c3);
      }
    };
    position(std::integral_constant<int, 0>{});
    position(std::integral_constant<int, 1>{});
    if constexpr (kStep == 4) {
      position(std::integral_constant<int, 2>{});
      position(std::integral_constant<int, 3>{});
    }
    if (NeedGx) {
      const __m512 g = gq;
      // Each position's fractions across its lanes.
      const auto spread_over = [&](__m128 v) { return _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(v)); };
      const __m512 w = spread_over(w4), e = spread_over(e4), n = spread_over(n4), s = spread_over(s4);
      const __m512 dx =
          _mm512_mul_ps(_mm512_fmadd_ps(_mm512_sub_ps(se, sw), n, _mm512_mul_ps(_mm512_sub_ps(ne, nw), s)), g);
      const __m512 dy =
          _mm512_mul_ps(_mm512_fmadd_ps(_mm512_sub_ps(se, ne), w, _mm512_mul_ps(_mm512_sub_ps(sw, nw), e)), g);
      // pair_sum<Cb> per position, in its order. Cb 4: [dx0 + dx2, dx1 + dx3, dy0 + dy2,
      // dy1 + dy3] per 128-bit lane, then i + 1. Cb 8: lane i + lane i + 4 (128-bit lanes
      // [dx, dx, dy, dy] of positions 0, 1, 0, 1), then i + 2, then i + 1.
      __m512 h;
      if constexpr (Cb == 4) {
        h = _mm512_add_ps(_mm512_shuffle_ps(dx, dy, _MM_SHUFFLE(1, 0, 1, 0)),
                          _mm512_shuffle_ps(dx, dy, _MM_SHUFFLE(3, 2, 3, 2)));
      } else {
        h = _mm512_add_ps(_mm512_shuffle_f32x4(dx, dy, _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_f32x4(dx, dy, _MM_SHUFFLE(3, 1, 3, 1)));
        h = _mm512_add_ps(h, _mm512_permute_ps(h, _MM_SHUFFLE(1, 0, 3, 2)));
      }
      const __m512 sums = _mm512_permutexvar_ps(firsts, _mm512_add_ps(h, _mm512_permute_ps(h, _MM_SHUFFLE(2, 3, 0, 1))));
      if constexpr (Cb == 4) {
        _mm256_storeu_ps(part + 2 * q, _mm512_castps512_ps256(sums));
      } else {
        _mm_storeu_ps(part + 2 * q, _mm512_castps512_ps128(sums));
      }
    }
  }
  return end;
}
#endif

#if ACLNN_ISA_LEVEL == 1
// tile_bilinear_wide on AVX2, 4-lane blocks only: 4 positions a step, as two 256-bit halves of
// 2 positions each (a position per 128-bit lane), with the same operations per lane and
// position as the one-position loop, so the same results. gradOutput comes from the tile or,
// where the plan lets tiles read planes (tile_reads_planes), from its 4 rows: 4 positions of
// each row transposed in registers, so the transposing pass over the tile is skipped.
template <bool NeedIg, bool NeedGx, bool Prefetch, bool Framed, class G>
int64_t tile_bilinear_wide(const TileArgs& t) {
  constexpr int Cb = 4;
  const int64_t row = t.frame_row;  // (framed)
  const BilinearTile b(t);  // (locals, not a structured binding: the lambda below captures them)
  const int32_t *const k0 = b.k0, *const k1 = b.k1, *const k2 = b.k2, *const k3 = b.k3;
  const float *const gt = b.gt, *const in = b.in;
  float *const ig = b.ig, *const part = b.part;
  const int64_t len = b.len, end = len - len % 4;
  const G* const g0 = t.rows ? static_cast<const G*>(t.rows[0]) : nullptr;  // (see the AVX-512 form)
  const G* const g1 = t.rows ? static_cast<const G*>(t.rows[1]) : nullptr;
  const G* const g2 = t.rows ? static_cast<const G*>(t.rows[2]) : nullptr;
  const G* const g3 = t.rows ? static_cast<const G*>(t.rows[3]) : nullptr;
  // Lane l of half h belongs to position 2h + l / 4: `spread[h]` copies its fractions across.
  const __m256i spread[2] = {_mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0), _mm256_set_epi32(3, 3, 3, 3, 2, 2, 2, 2)};
  for (int64_t q = 0; q < end; q += 4) {
    F4 gp[4];  // gp[k]: the 4 lanes of position q + k
    if (g0) {
      gp[0] = load4_as_float(g0 + q), gp[1] = load4_as_float(g1 + q);
      gp[2] = load4_as_float(g2 + q), gp[3] = load4_as_float(g3 + q);
      transpose4(gp[0], gp[1], gp[2], gp[3]);
    } else {
      for (int k = 0; k < 4; ++k) gp[k] = load4(gt + (q + k) * Cb);
    }
    const __m128 w4 = _mm_loadu_ps(b.fw + q), e4 = _mm_loadu_ps(b.fe + q);
    const __m128 n4 = _mm_loadu_ps(b.fn + q), s4 = _mm_loadu_ps(b.fs + q);
    alignas(16) float wt[4][4];  // [corner][position]: the scatter's weights, 4 at a time
    if (NeedIg) {
      _mm_store_ps(wt[0], _mm_mul_ps(s4, e4));
      _mm_store_ps(wt[1], _mm_mul_ps(s4, w4));
      _mm_store_ps(wt[2], _mm_mul_ps(n4, e4));
      _mm_store_ps(wt[3], _mm_mul_ps(n4, w4));
    }
    // A half (2 positions) at a time: its scatter, then its gridGrad from its corners loaded
    // straight into 256-bit pairs. (Holding all 4 positions' 16 corner vectors exceeded AVX2's
    // 16 registers: GCC spilled them. Per half, the tile ran 4% fewer instructions, callgrind.)
    __m128 sums[2];  // pair sums, [x, y] of positions 2h and 2h + 1 in half h
    for (int h = 0; h < 2; ++h) {
      int64_t c[2][4];  // [position of the half][nw, ne, sw, se]: float offsets in the buffers
      for (int j = 0; j < 2; ++j) {
        const int k = 2 * h + j;
        const int64_t at = q + k;
        if (Prefetch) prefetch_corner_rows<Cb, NeedIg, NeedGx, Framed>(k0, k2, in, ig, at, len, row);
        if constexpr (Framed) {
          c[j][0] = int64_t(k0[at]) * Cb, c[j][1] = c[j][0] + Cb;
          c[j][2] = c[j][0] + row, c[j][3] = c[j][2] + Cb;
        } else {
          c[j][0] = int64_t(k0[at]) * Cb, c[j][1] = int64_t(k1[at]) * Cb;
          c[j][2] = int64_t(k2[at]) * Cb, c[j][3] = int64_t(k3[at]) * Cb;
        }
        if (NeedIg) {
          // One read-modify-write after the other: out-of-range corners share the sink row
          // (framed: corners outside may share a pad pixel).
          for (int i = 0; i < 4; ++i) vaccumulate<Cb>(ig + c[j][i], gp[k], wt[i][k]);
        }
      }
      if (!NeedGx) continue;
      const auto pair = [&](int i) { return _mm256_loadu2_m128(in + c[1][i], in + c[0][i]); };
      const __m256 nw = pair(0), ne = pair(1), sw = pair(2), se = pair(3);
      const __m256 g = _mm256_set_m128((__m128)gp[2 * h + 1], (__m128)gp[2 * h]);
      const auto spread_over = [&](__m128 v) { return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), spread[h]); };
      const __m256 w = spread_over(w4), e = spread_over(e4), n = spread_over(n4), s = spread_over(s4);
      const __m256 dx =
          _mm256_mul_ps(_mm256_fmadd_ps(_mm256_sub_ps(se, sw), n, _mm256_mul_ps(_mm256_sub_ps(ne, nw), s)), g);
      const __m256 dy =
          _mm256_mul_ps(_mm256_fmadd_ps(_mm256_sub_ps(se, ne), w, _mm256_mul_ps(_mm256_sub_ps(sw, nw), e)), g);
      // pair_sum<4> per position, in its order: [dx0 + dx2, dx1 + dx3, dy0 + dy2, dy1 + dy3]
      // per 128-bit lane, then lane i + lane i + 1.
      const __m256 hsum = _mm256_add_ps(_mm256_shuffle_ps(dx, dy, _MM_SHUFFLE(1, 0, 1, 0)),
                                        _mm256_shuffle_ps(dx, dy, _MM_SHUFFLE(3, 2, 3, 2)));
      const __m256 lanes = _mm256_add_ps(hsum, _mm256_permute_ps(hsum, _MM_SHUFFLE(2, 3, 0, 1)));
      // Lanes 0 and 2 of each 128-bit lane: x and y of its position.
      const __m256 xy = _mm256_permutevar8x32_ps(lanes, _mm256_set_epi32(0, 0, 0, 0, 6, 4, 2, 0));
      sums[h] = _mm256_castps256_ps128(xy);
    }
    if (!NeedGx) continue;
    _mm_storeu_ps(part + 2 * q, sums[0]);
    _mm_storeu_ps(part + 2 * q + 4, sums[1]);
  }
  return end;
}
#endif

// G: the storage type of TileArgs::rows (unused when the tile comes transposed). Framed: the
// buffers and records are framed (TileArgs::frame_row).
template <int Cb, bool NeedIg, bool NeedGx, class G = float, bool Framed = false>
void tile_bilinear(const TileArgs& t) {
  using V = typename Lanes<Cb>::V;
  const auto [k0, k1, k2, k3, fw, fe, fn, fs, gt, in, ig, part, len] = BilinearTile(t);
  const int64_t row = t.frame_row;
  int64_t q = 0;
#if ACLNN_ISA_LEVEL == 1
  if constexpr (Cb == 4) {  // (the AVX-512 rule below for prefetches)
    if ((t.sink + Cb) * int64_t(sizeof(float)) <= kBilinearNoPrefetchBytes) {
      q = tile_bilinear_wide<NeedIg, NeedGx, false, Framed, G>(t);
    } else {
      q = tile_bilinear_wide<NeedIg, NeedGx, true, Framed, G>(t);
    }
  }
#endif
#if ACLNN_ISA_LEVEL == 2
  // Buffers of up to 1 MiB are not prefetched: the prefetches' index loads and address
  // arithmetic were a fifth of the loop's instructions, and a warp's lines come from L2 in
  // time. Processes alternated, 2 threads, fp32, without them: N4 C3 224x224 warp (0.8 MB
  // buffers) 0.95-0.97x the time, N2 C8 128x128 0.94x; C3 320x320 (1.6 MB) a tie; C3 448x448
  // and C4 512x512 on random grids 1.06-1.09x, so big buffers keep them.
  if constexpr (Cb == 4 || Cb == 8) {
    if ((t.sink + Cb) * int64_t(sizeof(float)) <= kBilinearNoPrefetchBytes) {
      q = tile_bilinear_wide<Cb, NeedIg, NeedGx, false, Framed, G>(t);
    } else {
      q = tile_bilinear_wide<Cb, NeedIg, NeedGx, true, Framed, G>(t);
    }
  }
#endif
  for (; q < len; ++q) {
    prefetch_corner_rows<Cb, NeedIg, NeedGx, Framed>(k0, k2, in, ig, q, len, row);
    V g;
    if constexpr (tile_reads_planes<Cb>()) {
      if (t.rows) {
        float lanes[Cb];
        for (int c = 0; c < Cb; ++c) lanes[c] = to_float(static_cast<const G*>(t.rows[c])[q]);
        vload<Cb>(g, lanes);
      } else {
        vload<Cb>(g, gt + q * Cb);
      }
    } else {
      vload<Cb>(g, gt + q * Cb);
    }
    const int64_t c0 = int64_t(k0[q]) * Cb;
    const int64_t c1 = Framed ? c0 + Cb : int64_t(k1[q]) * Cb;
    const int64_t c2 = Framed ? c0 + row : int64_t(k2[q]) * Cb;
    const int64_t c3 = Framed ? c2 + Cb : int64_t(k3[q]) * Cb;
    const float w = fw[q], e = fe[q], n = fn[q], s = fs[q];
    if (NeedIg) {
      // One read-modify-write after the other: out-of-range corners share the sink row.
      vaccumulate<Cb>(ig + c0, g, s * e);
      vaccumulate<Cb>(ig + c1, g, s * w);
      vaccumulate<Cb>(ig + c2, g, n * e);
      vaccumulate<Cb>(ig + c3, g, n * w);
    }
    if (NeedGx) {
      V nw, ne, sw, se;
      vload<Cb>(nw, in + c0);
      vload<Cb>(ne, in + c1);
      vload<Cb>(sw, in + c2);
      vload<Cb>(se, in + c3);
      const V dx = fmadd<Cb>(se - sw, n, (ne - nw) * s) * g;
      const V dy = fmadd<Cb>(se - ne, w, (sw - nw) * e) * g;
      pair_sum<Cb>(dx, dy, part + 2 * q);
    }
  }
}

template <int Cb, bool NeedIg, bool NeedGx>
void tile_nearest(const TileArgs& t) {
  using V = typename Lanes<Cb>::V;
  if (!NeedIg) return;  // nearest has no grid gradient
  // Locals: a store through ig could otherwise alias t's fields and reload them every position.
  const int32_t* const corner = t.rec->corner[0] + t.i0;
  const float* const gt = t.g;
  float* const ig = t.ig;
  const int64_t len = t.len;
  auto run = [&](auto prefetch) {
    for (int64_t q = 0; q < len; ++q) {
      if (prefetch && q + kPrefetch < len) __builtin_prefetch(ig + int64_t(corner[q + kPrefetch]) * Cb, 1);
      float* dst = ig + int64_t(corner[q]) * Cb;
      V acc, g;
      vload<Cb>(acc, dst);
      vload<Cb>(g, gt + q * Cb);
      acc += g;
      vstore<Cb>(dst, acc);
    }
  };
  // A buffer that fits in L2 needs no prefetch: without it, one-channel planes up to 128x128
  // took 0.94-0.95x the time (one thread, in-process A/B); a 512x512 one 1.01x.
  if (t.sink * int64_t(sizeof(float)) <= kNearestNoPrefetchBytes) {
    run(std::false_type{});
  } else {
    run(std::true_type{});
  }
}

// Pixels: the taps are 16 arrays of pixel slots after the 24 record arrays (fields 24 + 4 j + k,
// Runner::run_bicubic_pixels; slot 0 the sink) rather than row starts plus columns.
template <int Cb, bool NeedIg, bool NeedGx, bool Pixels = false>
void tile_bicubic(const TileArgs& t) {
  using V = typename Lanes<Cb>::V;
  // Bicubic records are always per tile: 24 arrays kTileRecordBytes apart (lay_out_records),
  // read through one base pointer at constant offsets. With a pointer per array, GCC spilled
  // and reloaded most of the 24 for every position. With one-lane rows kept in registers
  // (Lanes<1>), one thread, processes alternated: N4 C1 128x128 0.75x the time, N4 C3 0.78x;
  // C16-32 0.99-1.00x (in-process); the same results.
  const char* const base = reinterpret_cast<const char*>(t.rec->tap_col[0] + t.i0);
  auto i32 = [base](int field, int64_t q) {
    return *reinterpret_cast<const int32_t*>(base + field * kTileRecordBytes + q * 4);
  };
  auto f32 = [base](int field, int64_t q) {
    return *reinterpret_cast<const float*>(base + field * kTileRecordBytes + q * 4);
  };
  const float* const gt = t.g;
  const float* const in = t.in;
  float* const ig = t.ig;
  float* const part = t.part;
  const int64_t len = t.len, sink = t.sink;
  // The offset of tap (row j, column k) of position q in the buffers.
  auto tap = [&](const int32_t* row, const int32_t* col, int j, int k, int64_t q) -> int64_t {
    if constexpr (Pixels) return int64_t(i32(kBicubicRecordFields + 4 * j + k, q)) * Cb;
    return (row[j] >= 0 && col[k] >= 0) ? int64_t(row[j] + col[k]) * Cb : sink;
  };
  // gridGrad sums the taps and scales by gradOutput once; PyTorch scales each tap, so an
  // infinite gradOutput meets taps of both signs (or a zero tap) and gives NaN, not an
  // infinity. Positions with a non-finite gradOutput lane take PyTorch's order (all_finite
  // looked up only in tiles that have one: an integer OR over the tile, which vectorises).
  const bool special = NeedGx && any_nonfinite(gt, len * Cb);
  for (int64_t q = 0; q < len; ++q) {
    V g;
    vload<Cb>(g, gt + q * Cb);
    float cx[4], cy[4], ncxg[4], ncyg[4];
    int32_t col[4], row[4];
    for (int k = 0; k < 4; ++k) {
      col[k] = i32(6 * k + 0, q);
      row[k] = i32(6 * k + 1, q);
      cx[k] = f32(6 * k + 2, q);
      cy[k] = f32(6 * k + 3, q);
      ncxg[k] = f32(6 * k + 4, q);
      ncyg[k] = f32(6 * k + 5, q);
    }
    V dx = V{}, dy = V{};
    for (int j = 0; j < 4; ++j) {
      V ax = V{}, ay = V{};
      for (int k = 0; k < 4; ++k) {
        // An outside tap's inputGrad would go to the sink: skipped, as a chain of read-modify-
        // writes of one address (a small input, most taps outside: N13 C1 8x2 -> 122x4 138-192
        // -> 82-130 us, torch 81) waits on each store. Its input value (zero) is still read:
        // a NaN weight times it reaches gridGrad as PyTorch's does.
        const int64_t off = tap(row, col, j, k, q);
        if (NeedIg && off != sink) vaccumulate<Cb>(ig + off, g, cx[k] * cy[j]);
        if (NeedGx) {
          V v;
          vload<Cb>(v, in + off);
          ax = fmadd<Cb>(v, ncxg[k], ax);
          ay = fmadd<Cb>(v, cx[k], ay);
        }
      }
      if (NeedGx) {
        dx = fmadd<Cb>(ax, cy[j], dx);
        dy = fmadd<Cb>(ay, ncyg[j], dy);
      }
    }
    if (NeedGx) {
      if (!special || all_finite<Cb>(gt + q * Cb)) {
        dx *= g;
        dy *= g;
      } else {
        dx = V{}, dy = V{};
        for (int j = 0; j < 4; ++j)
          for (int k = 0; k < 4; ++k) {
            V v;
            vload<Cb>(v, in + tap(row, col, j, k, q));
            const V vg = v * g;
            dx += vg * ncxg[k] * cy[j];
            dy += vg * ncyg[j] * cx[k];
          }
      }
      pair_sum<Cb>(dx, dy, part + 2 * q);
    }
  }
}

}  // namespace
}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
