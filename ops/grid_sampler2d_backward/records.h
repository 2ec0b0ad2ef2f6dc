// GridSampler2DBackward: per-position records (coordinates, weights, corners), computed in double.
// A part of the kernel ops/grid_sampler2d_backward.cpp, compiled inside it once per ISA level
// (hence the ISA namespace and the anonymous namespace); the forward kernel ops/grid_sampler2d.cpp
// includes it too, and nothing else.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "aclnn_cpu/simd.h"
#include "aclnn_cpu/tensor_view.h"
#include "constants.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

// ---------------------------------------------------------------------------------------------
// Coordinates, in double, one native register of positions at a time (GCC vector extensions:
// 2 lanes at the baseline (SSE2), 4 with AVX2, 8 with AVX-512). These mirror PyTorch's
// vectorised ComputeLocation: the same formulas in the same order, so floor() and the
// clip/reflect branches land where PyTorch's float64 kernel puts them.
//
// Why native width: GCC splits the arithmetic of a generic vector wider than the level's
// registers into registers, but expands its comparisons and selects element by element
// (-Wvector-operation-performance: "vector condition will be expanded piecewise"). With 8 lanes
// everywhere, the AVX2 build computed every mask through scalar compares and setcc: the records
// took 39% of an N4 C3 224x224 bilinear call on a Zen 3 (AVX2) machine, against 13% at the
// AVX-512 level. Lanes are independent, so the width changes no result.

constexpr int kLanes = 8;  // the grid values' padding: a multiple of every level's kVec
constexpr int kVec = simd::kWidth / 2;  // doubles in one register of simd::kWidth floats
static_assert(kLanes % kVec == 0, "grid values are padded for whole vectors");
// The vector helpers are forced inline (ACLNN_ALWAYS_INLINE), which keeps their vector values
// out of any calling convention, so GCC's -Wpsabi warning about those returns is moot here.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef double DV __attribute__((vector_size(kVec * 8)));
typedef int64_t MV __attribute__((vector_size(kVec * 8)));  // lane masks of DV comparisons
typedef int32_t IV __attribute__((vector_size(kVec * 4)));
typedef float FV __attribute__((vector_size(kVec * 4)));

ACLNN_ALWAYS_INLINE DV splat(double x) { return DV{} + x; }
ACLNN_ALWAYS_INLINE DV vabs(const DV& v) { return (DV)((MV)v & INT64_MAX); }
ACLNN_ALWAYS_INLINE DV vsel(const MV& m, const DV& a, const DV& b) { return m ? a : b; }

// x rounded to an integer, to nearest even (vround_even) or down (vfloor); the sign of zero,
// inf and NaN kept. AVX2 and AVX-512 have an instruction for it (vroundpd, vrndscalepd: one
// instead of seven); the baseline (SSE2) adds and removes 2^52, which drops the fraction of
// |x| < 2^52 (larger magnitudes are integral already). With load_grid's vector widening, one
// thread, processes alternated: N4 C1 128x128 nearest 0.91x the time, N4 C3 224x224 nearest
// and bilinear 0.93-0.94x, N4 C1 bicubic 0.97x (2 threads 0.93-1.03x); bitwise the same
// outputs on every level (warps, random, exact half-pixel, NaN/inf/huge grids).
#if ACLNN_ISA_LEVEL >= 1
template <int Mode>  // _MM_FROUND_TO_NEAREST_INT or _MM_FROUND_TO_NEG_INF
ACLNN_ALWAYS_INLINE DV vround(const DV& x) {
#if ACLNN_ISA_LEVEL == 2
  return (DV)_mm512_roundscale_pd((__m512d)x, Mode | _MM_FROUND_NO_EXC);
#else
  return (DV)_mm256_round_pd((__m256d)x, Mode | _MM_FROUND_NO_EXC);
#endif
}
#endif
ACLNN_ALWAYS_INLINE DV vround_even(const DV& x) {
#if ACLNN_ISA_LEVEL >= 1
  return vround<_MM_FROUND_TO_NEAREST_INT>(x);
#else
  const DV big = splat(4503599627370496.0);
  const DV m = vabs(x);
  const DV r = (DV)(((MV)((m + big) - big)) | ((MV)x & INT64_MIN));  // keeps the sign of zero
  return vsel(m < big, r, x);
#endif
}
ACLNN_ALWAYS_INLINE DV vfloor(const DV& x) {
#if ACLNN_ISA_LEVEL >= 1
  return vround<_MM_FROUND_TO_NEG_INF>(x);
#else
  const DV r = vround_even(x);
  return vsel(r > x, r - 1.0, r);
#endif
}
ACLNN_ALWAYS_INLINE FV to_fv(const DV& v) { return __builtin_convertvector(v, FV); }
// Lanes must hold integers in int32 range (callers select a safe value first).
ACLNN_ALWAYS_INLINE IV to_iv(const DV& v) { return __builtin_convertvector(v, IV); }

#if ACLNN_ISA_LEVEL == 2
// Index arithmetic with lane masks in mask registers: written with vector extensions, GCC
// widened each comparison mask to a vector and narrowed it back for every select. The records
// then took 0.89-0.97x the time to compute per call for one-channel nearest, 0.95-0.98x for
// one- and three-channel bilinear and bicubic (one thread, in-process A/B), bitwise the same.
// Lanes of v in [lo, hi); NaN is outside.
ACLNN_ALWAYS_INLINE __mmask8 in_range(const DV& v, double lo, double hi) {
  return _mm512_cmp_pd_mask((__m512d)v, _mm512_set1_pd(lo), _CMP_GE_OQ) &
         _mm512_cmp_pd_mask((__m512d)v, _mm512_set1_pd(hi), _CMP_LT_OQ);
}
// v as int32, exact for the lanes a mask keeps (the others hold the conversion's defined
// out-of-range value and are replaced).
ACLNN_ALWAYS_INLINE __m256i to_i32(const DV& v) { return _mm512_cvttpd_epi32((__m512d)v); }
ACLNN_ALWAYS_INLINE __m256i times(__m256i v, int32_t k) { return _mm256_mullo_epi32(v, _mm256_set1_epi32(k)); }
ACLNN_ALWAYS_INLINE IV keep(__mmask8 k, __m256i v, const IV& otherwise) {
  return (IV)_mm256_mask_blend_epi32(k, (__m256i)otherwise, v);
}
#endif

ACLNN_ALWAYS_INLINE DV load_v(const double* p) {
  DV v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V, class E>
ACLNN_ALWAYS_INLINE void store_n(E* dst, const V& v, int count) {
  if (count == kVec) {
    std::memcpy(dst, &v, sizeof v);
  } else {
    E tmp[kVec];
    std::memcpy(tmp, &v, sizeof v);
    std::memcpy(dst, tmp, size_t(count) * sizeof(E));
  }
}

struct Axis {
  int64_t size = 1;
  double scale = 0;       // d(pixel coordinate) / d(grid value)
  double max_val = 0;     // size - 1
  double low = 0;         // reflection interval start (0 or -0.5)
  double twice_span = 0;  // reflection period
  bool empty = false;     // align_corners reflection of a size-1 axis: everything maps to 0
};

Axis make_axis(int64_t size, bool align) {
  Axis a;
  a.size = size;
  a.max_val = double(size - 1);
  if (align) {
    a.scale = double(size - 1) / 2;
    a.low = 0;
    a.twice_span = double(size - 1) * 2;
    a.empty = size <= 1;
  } else {
    a.scale = double(size) / 2;
    a.low = -0.5;
    a.twice_span = double(size) * 2;
    a.empty = size <= 0;
  }
  return a;
}

template <bool Align>
ACLNN_ALWAYS_INLINE DV unnormalize(const DV& g, const Axis& a) {
  return Align ? (g + 1.0) * a.scale : (g + 1.0) * a.scale - 0.5;
}

// Clamp to [0, max]; NaN -> 0 (PyTorch's clamp_min(0, x) keeps the 0 when x is NaN).
ACLNN_ALWAYS_INLINE DV clip(const DV& x, const Axis& a) {
  return vsel(x > 0.0, vsel(x < a.max_val, x, splat(a.max_val)), DV{});
}

// Reflection into [low, low + span]; NaN propagates (PyTorch's minimum()). `mult`, when given,
// is negated in the lanes where the result moves against x (a gradient multiplier).
template <bool Align>
ACLNN_ALWAYS_INLINE DV reflect(const DV& x, const Axis& a, DV* mult = nullptr) {
  if (Align && a.empty) return DV{};
  const DV shifted = Align ? x : x - a.low;
  const DV in = vabs(shifted);
  const DV extra = in - vfloor(in / a.twice_span) * a.twice_span;  // in >= 0: floor == trunc
  const DV other = a.twice_span - extra;
  if (mult) {  // against x: in the period's far half, or x below the interval, but not both
    // (Two selects on comparisons rather than one on their XOR: SSE2 has no test of a 64-bit
    // lane for the select to use on a computed mask, and GCC expanded it lane by lane.)
    *mult = vsel(extra > other, -*mult, *mult);
    *mult = vsel(shifted < 0.0, -*mult, *mult);
  }
  // extra NaN: the comparison fails and `other` (NaN too) is taken, as minimum() would.
  const DV r = vsel(extra < other, extra, other);
  return Align ? r : r + a.low;
}

// Source coordinate as PyTorch's forward pass (and the nearest/bicubic backward) computes it.
template <int Pad, bool Align>
ACLNN_ALWAYS_INLINE DV map_coordinate(const DV& x, const Axis& a) {
  if (Pad == kBorder) return clip(x, a);
  if (Pad == kReflection) return clip(reflect<Align>(x, a), a);
  return x;
}

// Bilinear source coordinate and its gradient multiplier d(coordinate)/d(grid value).
template <int Pad, bool Align>
ACLNN_ALWAYS_INLINE DV bilinear_coordinate(const DV& g, const Axis& a, DV* mult) {
  DV x = unnormalize<Align>(g, a);
  if (Pad == kZeros) {
    *mult = splat(a.scale);
    return x;
  }
  DV m = splat(a.scale);
  if (Pad == kReflection) {
    if (Align && a.empty) {
      x = DV{};
      m = DV{};
    } else {
      x = reflect<Align>(x, a, &m);
    }
  }
  // Borders count as outside for the gradient; NaN (see the header) becomes 0 with no gradient.
  *mult = vsel((x > 0.0) & (x < a.max_val), m, DV{});
  return clip(x, a);
}

// ---------------------------------------------------------------------------------------------
// Per-position records (structure of arrays over the positions of a chunk of samples).

struct Records {
  // bilinear: corner pixel (row of the channel-last buffers) nw, ne, sw, se; nearest: [0] only
  int32_t* corner[4] = {};
  float* frac[4] = {};  // bilinear: w (x - floor x), e (1 - w), n (y - floor y), s (1 - n)
  float* mult[2] = {};  // bilinear, border and reflection padding: gradient multipliers x, y
  // bicubic: tap columns (x index or -1) and tap row starts (y * W or -1)
  int32_t* tap_col[4] = {};
  int32_t* tap_row[4] = {};
  float* cx[4] = {};    // cubic weights along x / y
  float* cy[4] = {};
  float* ncxg[4] = {};  // minus the derivative of the cubic weights along x / y
  float* ncyg[4] = {};
};

// Cubic convolution weights of the 4 taps at distance t in [0, 1) (A = -0.75) and their
// derivatives, as PyTorch's get_cubic_coefficients(_grad) write them.
ACLNN_ALWAYS_INLINE void cubic_weights(const DV& t, DV w[4]) {
  const double A = kCubicA;
  DV x = t + 1.0;
  w[0] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  x = t;
  w[1] = ((A + 2) * x - (A + 3)) * x * x + 1.0;
  x = 1.0 - t;
  w[2] = ((A + 2) * x - (A + 3)) * x * x + 1.0;
  x = 2.0 - t;
  w[3] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
}

ACLNN_ALWAYS_INLINE void cubic_weight_slopes(const DV& t, DV g[4]) {
  const double A = kCubicA;
  DV x = -1.0 - t;
  g[0] = (-3 * A * x - 10 * A) * x - 8 * A;
  x = -t;
  g[1] = (-3 * (A + 2) * x - 2 * (A + 3)) * x;
  x = 1.0 - t;
  g[2] = (3 * (A + 2) * x - 2 * (A + 3)) * x;
  x = 2.0 - t;
  g[3] = (3 * A * x - 10 * A) * x + 8 * A;
}

// The framed channel-last layout of a block's buffers (Plan::framed): each row of W pixels is
// followed by a pad pixel, and pad rows lie above (one) and below (two), so a bilinear
// position's four corners are always its north-west pixel plus 1, the row stride and both,
// and a corner outside the image lands on a pad (zero in the input buffer, discarded in the
// inputGrad one). A record then holds one corner instead of four, and a tile derives the
// others with additions instead of loading them. Pixel (y, x), y in [-1, H + 1] and x in
// [-1, W], lies at 1 + (y + 1) * stride + x: (-1, -1) is pixel 0, and (y, -1) is row y - 1's pad.
struct Frame {
  int64_t stride = 0;   // W + 1
  int64_t pixels = 0;   // the buffer: the leading pad pixel and H + 3 rows
  int64_t outside = 0;  // the corner of a position with none inside: (H, 0), rows H and H + 1 all pads
  int64_t at(int64_t y, int64_t x) const { return 1 + (y + 1) * stride + x; }
};

inline Frame make_frame(int64_t H, int64_t W) {
  Frame f;
  f.stride = W + 1;
  f.pixels = 1 + (H + 3) * f.stride;
  f.outside = f.at(H, 0);
  return f;
}

struct Geometry {
  int64_t N = 0, C = 0, H = 0, W = 0, Ho = 0, Wo = 0, P = 0, HW = 0;
  Axis ax, ay;
  Frame frame;  // the framed layout of H x W (used where Plan::framed)
};

// The geometry of input [N, C, H, W] sampled at grid [N, Ho, Wo, 2].
inline Geometry make_geometry(const TensorView& input, const TensorView& grid, bool align) {
  Geometry g;
  g.N = input.shape[0];
  g.C = input.shape[1];
  g.H = input.shape[2];
  g.W = input.shape[3];
  g.Ho = grid.shape[1];
  g.Wo = grid.shape[2];
  g.P = g.Ho * g.Wo;
  g.HW = g.H * g.W;
  g.frame = make_frame(g.H, g.W);
  g.ax = make_axis(g.W, align);
  g.ay = make_axis(g.H, align);
  return g;
}


// Fills the records of positions [i0, i0 + len) of the chunk; gxv/gyv hold their grid values,
// padded with zeros to a multiple of kLanes.
// Framed (bilinear only): corner[0] alone, as a pixel of the framed layout (Frame).
template <int Interp, int Pad, bool Align, bool Framed = false>
void compute_records(const Geometry& g, const double* gxv, const double* gyv, int64_t i0, int64_t len,
                     const Records& r) {
  const double Wd = double(g.W), Hd = double(g.H);
  const double frame_stride = double(g.frame.stride), frame_outside = double(g.frame.outside);
#if ACLNN_ISA_LEVEL == 2
  const int32_t W = int32_t(g.W);
  const IV sink = IV{} + int32_t(g.HW);
#else
  const DV sink = splat(double(g.HW));
#endif
  for (int64_t q = 0; q < len; q += kVec) {
    const int cnt = int(std::min<int64_t>(kVec, len - q));
    const int64_t i = i0 + q;
    const DV gx = load_v(gxv + q), gy = load_v(gyv + q);
    if (Interp == kBilinear) {
      DV mx, my;
      const DV x = bilinear_coordinate<Pad, Align>(gx, g.ax, &mx);
      const DV y = bilinear_coordinate<Pad, Align>(gy, g.ay, &my);
      const DV x0 = vfloor(x), y0 = vfloor(y);
      const DV w = x - x0, e = 1.0 - w, n = y - y0, s = 1.0 - n;
      // Corner validity, decided in floating point (NaN and huge values are simply outside).
      if constexpr (Framed) {
        // Some corner inside: x0 in [-1, W) and y0 in [-1, H), so the north-west corner is a
        // pixel of the frame (below 2^31: Plan::framed) and the others follow from it.
        const MV inside = (x0 >= -1.0) & (x0 < Wd) & (y0 >= -1.0) & (y0 < Hd);
        const DV nw = (y0 + 1.0) * frame_stride + (x0 + 1.0);
        store_n(r.corner[0] + i, to_iv(vsel(inside, nw, splat(frame_outside))), cnt);
      } else {
#if ACLNN_ISA_LEVEL == 2
      // A lane with any corner inside has x0 in [-1, W) and y0 in [-1, H): its base converts
      // exactly. The others take the sink.
      const __mmask8 kw = in_range(x0, 0.0, Wd), ke = in_range(x0, -1.0, Wd - 1);
      const __mmask8 kn = in_range(y0, 0.0, Hd), ks = in_range(y0, -1.0, Hd - 1);
      const __m256i base = _mm256_add_epi32(times(to_i32(y0), W), to_i32(x0));
      const auto corner = [&](__mmask8 k, int32_t offset) {
        return keep(k, _mm256_add_epi32(base, _mm256_set1_epi32(offset)), sink);
      };
      store_n(r.corner[0] + i, corner(kw & kn, 0), cnt);
      store_n(r.corner[1] + i, corner(ke & kn, 1), cnt);
      store_n(r.corner[2] + i, corner(kw & ks, W), cnt);
      store_n(r.corner[3] + i, corner(ke & ks, W + 1), cnt);
#else
      // Indices in double (integers below 2^31: exact), selected there and converted once a
      // corner. Selecting int32 lanes by int64 masks, and SSE2's int32 multiply, were expanded
      // lane by lane.
      const MV vw = (x0 >= 0.0) & (x0 < Wd), ve = (x0 >= -1.0) & (x0 < Wd - 1);
      const MV vn = (y0 >= 0.0) & (y0 < Hd), vs = (y0 >= -1.0) & (y0 < Hd - 1);
      const DV base = y0 * Wd + x0;
      store_n(r.corner[0] + i, to_iv(vsel(vw & vn, base, sink)), cnt);
      store_n(r.corner[1] + i, to_iv(vsel(ve & vn, base + 1.0, sink)), cnt);
      store_n(r.corner[2] + i, to_iv(vsel(vw & vs, base + Wd, sink)), cnt);
      store_n(r.corner[3] + i, to_iv(vsel(ve & vs, base + (Wd + 1.0), sink)), cnt);
#endif
      }
      store_n(r.frac[0] + i, to_fv(w), cnt);
      store_n(r.frac[1] + i, to_fv(e), cnt);
      store_n(r.frac[2] + i, to_fv(n), cnt);
      store_n(r.frac[3] + i, to_fv(s), cnt);
      if (Pad != kZeros) {  // (zeros: the axis scales, which store_grid_grad applies itself)
        store_n(r.mult[0] + i, to_fv(mx), cnt);
        store_n(r.mult[1] + i, to_fv(my), cnt);
      }
    } else if (Interp == kNearest) {
      const DV x = vround_even(map_coordinate<Pad, Align>(unnormalize<Align>(gx, g.ax), g.ax));
      const DV y = vround_even(map_coordinate<Pad, Align>(unnormalize<Align>(gy, g.ay), g.ay));
#if ACLNN_ISA_LEVEL == 2
      const __mmask8 inside = in_range(x, 0.0, Wd) & in_range(y, 0.0, Hd);
      store_n(r.corner[0] + i, keep(inside, _mm256_add_epi32(times(to_i32(y), W), to_i32(x)), sink), cnt);
#else
      const MV valid = (x >= 0.0) & (x < Wd) & (y >= 0.0) & (y < Hd);
      store_n(r.corner[0] + i, to_iv(vsel(valid, y * Wd + x, sink)), cnt);
#endif
    } else {
      const DV x = unnormalize<Align>(gx, g.ax), y = unnormalize<Align>(gy, g.ay);
      const DV x0 = vfloor(x), y0 = vfloor(y);
      DV wx[4], wy[4], sx[4], sy[4];
      cubic_weights(x - x0, wx);
      cubic_weights(y - y0, wy);
      cubic_weight_slopes(x - x0, sx);
      cubic_weight_slopes(y - y0, sy);
      for (int k = 0; k < 4; ++k) {
        const DV xx = map_coordinate<Pad, Align>(x0 + double(k - 1), g.ax);
        const DV yy = map_coordinate<Pad, Align>(y0 + double(k - 1), g.ay);
        // Mapped taps are integral; zeros padding checks the range (the others are inside).
#if ACLNN_ISA_LEVEL == 2
        store_n(r.tap_col[k] + i, keep(in_range(xx, 0.0, Wd), to_i32(xx), IV{} - 1), cnt);
        store_n(r.tap_row[k] + i, keep(in_range(yy, 0.0, Hd), times(to_i32(yy), W), IV{} - 1), cnt);
#else
        const MV vx = (xx >= 0.0) & (xx < Wd), vy = (yy >= 0.0) & (yy < Hd);
        store_n(r.tap_col[k] + i, to_iv(vsel(vx, xx, splat(-1.0))), cnt);
        store_n(r.tap_row[k] + i, to_iv(vsel(vy, yy * Wd, splat(-1.0))), cnt);
#endif
        store_n(r.cx[k] + i, to_fv(wx[k]), cnt);
        store_n(r.cy[k] + i, to_fv(wy[k]), cnt);
        store_n(r.ncxg[k] + i, to_fv(-sx[k]), cnt);
        store_n(r.ncyg[k] + i, to_fv(-sy[k]), cnt);
      }
    }
  }
}

using RecordFn = void (*)(const Geometry&, const double*, const double*, int64_t, int64_t, const Records&);

template <int Interp>
RecordFn pick_record_fn(int64_t pad, bool align) {
  switch (pad) {
    case kBorder: return align ? compute_records<Interp, kBorder, true> : compute_records<Interp, kBorder, false>;
    case kReflection:
      return align ? compute_records<Interp, kReflection, true> : compute_records<Interp, kReflection, false>;
    default: return align ? compute_records<Interp, kZeros, true> : compute_records<Interp, kZeros, false>;
  }
}

// Bilinear records for the framed layout.
RecordFn pick_framed_record_fn(int64_t pad, bool align) {
  switch (pad) {
    case kBorder:
      return align ? compute_records<kBilinear, kBorder, true, true> : compute_records<kBilinear, kBorder, false, true>;
    case kReflection:
      return align ? compute_records<kBilinear, kReflection, true, true>
                   : compute_records<kBilinear, kReflection, false, true>;
    default:
      return align ? compute_records<kBilinear, kZeros, true, true> : compute_records<kBilinear, kZeros, false, true>;
  }
}

RecordFn pick_record_fn(int64_t interp, int64_t pad, bool align) {
  if (interp == kNearest) return pick_record_fn<kNearest>(pad, align);
  if (interp == kBicubic) return pick_record_fn<kBicubic>(pad, align);
  return pick_record_fn<kBilinear>(pad, align);
}

}  // namespace
}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
