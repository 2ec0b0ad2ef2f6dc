// aclnnGridSampler2DBackward kernel: the gradients of grid_sample (2-D) with respect to input
// and grid, as PyTorch's CPU grid_sampler_2d_backward computes them.
//
// Layout of the work. Every output position (n, ho, wo) maps to the same source pixels for all
// channels, so its coordinates, weights, corner indices and clip/reflect gradient multipliers
// are computed in double into per-position "records" that every channel of a block reuses:
// for a tile of positions just before the tile runs (bilinear with up to kTileRecordBlocks
// blocks, and bicubic: once per block), or for a chunk of samples, once for all blocks (phase
// 1; nearest, and bilinear with more blocks). Channels are handled in blocks of Cb (4, 8 or
// 16 lanes, chosen from C; a single channel takes one lane, so its
// buffers are plain planes): a block's input planes are transposed into a channel-last fp32
// buffer [H*W + 1][Cb], so one source pixel of the block is one short vector
// and the per-position work (scatter-add into inputGrad, gather of input values for gridGrad)
// is plain vector arithmetic without gathers or scatters (phase 2). Row H*W is a spare pixel:
// zero in the input buffer, a sink in the inputGrad buffer, so out-of-range corners need no
// branches. gridGrad is a sum over channels: with one block it is written per tile; otherwise
// each block writes its per-position partial sums, and phase 3 adds them in block order and
// applies the multipliers. Grids that reach few of the pixels skip the whole-plane buffers:
// they run on the pixels reached (compact path, tap grids, pixel slots) or, with up to 4
// channels, on the planes themselves (direct tiles), in the same order, so with the same bits.
//
// Determinism. Every floating-point sum has an order fixed by the shapes alone: inputGrad
// pixels accumulate in position order (or, when positions are split into a shape-derived
// number of parts, per part in position order and then part by part), lane sums use a fixed
// tree, block partials are added in block order. Threads only decide who runs which task, so
// results are bitwise identical for any thread count.
//
// Numbers. Coordinates are computed in double from the grid values (as PyTorch's float64
// kernel does), then weights are rounded to fp32; all accumulation is fp32, fp16/bf16 outputs
// are rounded from the fp32 result (round to nearest even).
//
// Non-finite and far-away coordinates follow PyTorch's vectorised CPU kernel (tested against
// it): out-of-range corners contribute nothing in zeros padding while NaN weights still reach
// gridGrad through 0 * NaN; clipping maps NaN to 0 (PyTorch's clamp order). Where its bilinear
// backward reads out of bounds (border/reflection with a NaN, or reflection with an infinite,
// coordinate - it crashes), we use the coordinate its forward pass samples (0) with a zero
// gradient multiplier. A non-finite gradOutput gives PyTorch's NaNs and infinities too
// (bicubic's gridGrad multiplies it into each tap at such positions, see tile_bicubic).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "aclnn_cpu/ops/grid_sampler2d_backward_args.h"
#include "aclnn_cpu/parallel.h"
#include "aclnn_cpu/simd.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

enum Interpolation : int { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int { kZeros = 0, kBorder = 1, kReflection = 2 };

constexpr int64_t kAlign = 64;                  // byte alignment of every workspace region
constexpr int64_t kTile = 256;                  // positions per gradOutput tile
constexpr int64_t kTileRecordBytes = (kTile * 4 + kAlign - 1) / kAlign * kAlign;  // one array of a tile's records
// Workspace budgets. Python's functional API allocates the workspace on every call, and glibc
// serves blocks up to 32 MiB from its heap (reused, already mapped) but maps bigger ones afresh
// (every touched page faults again): typical calls should stay well below that.
constexpr int64_t kRecordBudget = 8 << 20;      // bytes of records + partials per sample chunk
constexpr int64_t kMaxSlots = 32;               // most threads that get a scratch slot
constexpr int64_t kSlotBudget = 16 << 20;       // bytes all scratch slots may take together
// Below this many (sample, channel block) pairs, each one's positions are split into parts
// (Runner::run_split): parts give idle threads work but cost their buffers' zeroing, bounding
// and reduction. 8 split 4-7 pairs too; 4, in-process A/B at 2 threads over two runs (bitwise
// different but fixed by the shape, as before): N4 C3 224x224 0.82-0.88x the time in all three
// modes, N4 C8 128x128 0.92x, N6 C3 bicubic 0.89x, N5 C1 nearest 0.90x, N5 and N7 C3 bilinear
// 0.94-1.08x, N4 C16 64x64 and N2 C32 1.00-1.05x. In a slow spell of the machine (the "slow
// mode" of docs/performance.md) the split runs were hit hardest: 0.44-0.53x the time unsplit.
constexpr int64_t kTargetTasks = 4;
constexpr int64_t kMinPartPositions = 1024;     // fewest positions worth a part of their own
constexpr int64_t kPositionGrain = 2048;        // phase 1 / 3 positions per thread, at least
// Phase 2 work worth a second thread: about 20 us on one thread, in units of task_cost().
constexpr int64_t kTaskGrainWork = 1 << 16;
constexpr int64_t kTileRecordBlocks = 8;       // most channel blocks computing bilinear records per tile
constexpr int64_t kPrefetch = 8;                // positions ahead whose pixel rows are prefetched
constexpr int64_t kNearestNoPrefetchBytes = 256 << 10;  // nearest: buffers up to this size are not prefetched
// Positions reaching this many times fewer pixels than the input has (taps * P + 1 <= H * W /
// kCompactRatio, bilinear and nearest): phase 2 works on the referenced pixels only
// (Runner::run_compact). Against the full buffers, in-process A/B, 2 threads, fp32 and bf16:
// at a ratio of 12.6-34 0.24-0.89x the time (N8 C64 56x56 -> 7x7 bilinear, at 15.9: 0.24-0.28x),
// at 8.5 0.79-1.08x, at 4-4.5 1.03-2.35x. Bicubic grids under the same ratio (16 taps) run on
// the rows and columns their taps reach (Runner::run_tap_grid) or on their pixels alone
// (Runner::run_bicubic_pixels).
constexpr int64_t kCompactRatio = 12;
// ... and from a ratio of 6 when a block's input and inputGrad planes take at most 512 KiB (half
// this machine's L2): the compact path's gathers from the input planes and scatters into the
// inputGrad planes then hit the cache. Processes alternated, 2 threads, fp32, against 12: N1 C9
// 165x31 -> 154x1 bilinear (ratio 8.3) 28-35 -> 13.4 us (torch 20), N2 C9 35x82 -> 2x40 (8.9)
// 25-26 -> 14 us (torch 19-20); at a ratio of 4 N4 C8 64x64 -> 30x30 nearest took 1.1x the time.
// Bigger planes keep 12: N10 C16 149x272 -> 2x703 (7.2, 2.6 MB of planes a block) 1.6-1.8 ->
// 2.9-3.2 ms at 6.
constexpr int64_t kCompactCachedRatio = 6;
constexpr int64_t kCompactCachedBytes = 512 << 10;
// Grids of at most 1/kWindowRatio as many positions as the input has pixels: one-task-per-block
// calls (Runner::run_fused) load, zero and write back only the input rows they can reach.
constexpr int64_t kWindowRatio = 8;
// Up to 4 channels (one block) whose taps reach at most 1/kDirectRatio of the input's pixels
// (taps * P * kDirectRatio <= H * W, bilinear and nearest) run on their planes directly
// (Runner::run_direct) instead of the compact, windowed or full-buffer paths. In-process A/B,
// 2 threads, fp32, random grids: at a ratio of 6, 128x128 planes 0.40-0.64x the time (N8 C1-C4
// -> 26x26 bilinear; nearest C3-C4 -> 52x52 0.60-0.71x), 512x512 planes with prefetches
// (Plan::direct_prefetch) 0.74-0.93x, C4 1.0x; at 8.5 0.27-0.68x; N10 C2 149x272 -> 2x703
// (7.2) 220 -> 113 us (torch 135); at 4 0.65-1.22x (C4 1.22x), at 2 0.89-1.69x.
constexpr int64_t kDirectRatio = 6;
// With 16-bit inputGrad, the direct path's fp32 planes cost 8 C - 4 bytes a pixel more than the
// compact path: the compact path is kept where it applies and taps * P * kDirectSlotRatio <
// (2 C - 1) * H * W (bf16, in-process A/B, 2 threads: N8 C3 128x128 -> 8x8 1.22x the time
// direct, 11x11 0.86x; N2 C3 256x256 -> 16x16 1.32x, 32x32 0.76x; C1 -> 8x8 0.78x).
constexpr int64_t kDirectSlotRatio = 256;
constexpr double kCubicA = -0.75;
// A bicubic tile's record arrays: 24 fields (lay_out_records), then 16 of pixel slots that only
// run_bicubic_pixels fills.
constexpr int kBicubicRecordFields = 24;
constexpr int kBicubicTileArrays = kBicubicRecordFields + 16;

int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }
int64_t ceil_div(int64_t x, int64_t a) { return (x + a - 1) / a; }

// ---------------------------------------------------------------------------------------------
// Coordinates, in double, 8 positions at a time (GCC vector extensions: 4 SSE2, 2 AVX2 or 1
// AVX-512 register per vector). These mirror PyTorch's vectorised ComputeLocation: the same
// formulas in the same order, so floor() and the clip/reflect branches land where PyTorch's
// float64 kernel puts them.

constexpr int kLanes = 8;
// The vector helpers return vectors wider than the baseline's registers (and take them by
// reference); forcing them inline (ACLNN_ALWAYS_INLINE) keeps such values out of any calling
// convention, so GCC's -Wpsabi warning about those returns is moot here.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef double D8 __attribute__((vector_size(64)));
typedef int64_t M8 __attribute__((vector_size(64)));  // lane masks of D8 comparisons
typedef int32_t I8 __attribute__((vector_size(32)));
typedef float F8 __attribute__((vector_size(32)));

ACLNN_ALWAYS_INLINE D8 splat(double x) { return D8{} + x; }
ACLNN_ALWAYS_INLINE D8 vabs(const D8& v) { return (D8)((M8)v & INT64_MAX); }
ACLNN_ALWAYS_INLINE D8 vsel(const M8& m, const D8& a, const D8& b) { return m ? a : b; }
ACLNN_ALWAYS_INLINE I8 vsel(const M8& m, const I8& a, const I8& b) { return __builtin_convertvector(m, I8) ? a : b; }

// x rounded to an integer, to nearest even (vround_even) or down (vfloor); the sign of zero,
// inf and NaN kept. AVX2 and AVX-512 have an instruction for it (vroundpd, vrndscalepd: one
// instead of seven); the baseline (SSE2) adds and removes 2^52, which drops the fraction of
// |x| < 2^52 (larger magnitudes are integral already). With load_grid's vector widening, one
// thread, processes alternated: N4 C1 128x128 nearest 0.91x the time, N4 C3 224x224 nearest
// and bilinear 0.93-0.94x, N4 C1 bicubic 0.97x (2 threads 0.93-1.03x); bitwise the same
// outputs on every level (warps, random, exact half-pixel, NaN/inf/huge grids).
#if ACLNN_ISA_LEVEL >= 1
template <int Mode>  // _MM_FROUND_TO_NEAREST_INT or _MM_FROUND_TO_NEG_INF
ACLNN_ALWAYS_INLINE D8 vround(const D8& x) {
#if ACLNN_ISA_LEVEL == 2
  return (D8)_mm512_roundscale_pd((__m512d)x, Mode | _MM_FROUND_NO_EXC);
#else
  __m256d half[2];
  std::memcpy(half, &x, sizeof x);
  for (__m256d& h : half) h = _mm256_round_pd(h, Mode | _MM_FROUND_NO_EXC);
  D8 r;
  std::memcpy(&r, half, sizeof r);
  return r;
#endif
}
#endif
ACLNN_ALWAYS_INLINE D8 vround_even(const D8& x) {
#if ACLNN_ISA_LEVEL >= 1
  return vround<_MM_FROUND_TO_NEAREST_INT>(x);
#else
  const D8 big = splat(4503599627370496.0);
  const D8 m = vabs(x);
  const D8 r = (D8)(((M8)((m + big) - big)) | ((M8)x & INT64_MIN));  // keeps the sign of zero
  return vsel(m < big, r, x);
#endif
}
ACLNN_ALWAYS_INLINE D8 vfloor(const D8& x) {
#if ACLNN_ISA_LEVEL >= 1
  return vround<_MM_FROUND_TO_NEG_INF>(x);
#else
  const D8 r = vround_even(x);
  return vsel(r > x, r - 1.0, r);
#endif
}
ACLNN_ALWAYS_INLINE F8 to_f8(const D8& v) { return __builtin_convertvector(v, F8); }
// Lanes must hold integers in int32 range (callers select a safe value first).
ACLNN_ALWAYS_INLINE I8 to_i8(const D8& v) { return __builtin_convertvector(v, I8); }

#if ACLNN_ISA_LEVEL == 2
// Index arithmetic with lane masks in mask registers: written with vector extensions, GCC
// widened each comparison mask to a vector and narrowed it back for every select. The records
// then took 0.89-0.97x the time to compute per call for one-channel nearest, 0.95-0.98x for
// one- and three-channel bilinear and bicubic (one thread, in-process A/B), bitwise the same.
// Lanes of v in [lo, hi); NaN is outside.
ACLNN_ALWAYS_INLINE __mmask8 in_range(const D8& v, double lo, double hi) {
  return _mm512_cmp_pd_mask((__m512d)v, _mm512_set1_pd(lo), _CMP_GE_OQ) &
         _mm512_cmp_pd_mask((__m512d)v, _mm512_set1_pd(hi), _CMP_LT_OQ);
}
// v as int32, exact for the lanes a mask keeps (the others hold the conversion's defined
// out-of-range value and are replaced).
ACLNN_ALWAYS_INLINE __m256i to_i32(const D8& v) { return _mm512_cvttpd_epi32((__m512d)v); }
ACLNN_ALWAYS_INLINE __m256i times(__m256i v, int32_t k) { return _mm256_mullo_epi32(v, _mm256_set1_epi32(k)); }
ACLNN_ALWAYS_INLINE I8 keep(__mmask8 k, __m256i v, const I8& otherwise) {
  return (I8)_mm256_mask_blend_epi32(k, (__m256i)otherwise, v);
}
#endif

ACLNN_ALWAYS_INLINE D8 load8(const double* p) {
  D8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V, class E>
ACLNN_ALWAYS_INLINE void store_n(E* dst, const V& v, int count) {
  if (count == kLanes) {
    std::memcpy(dst, &v, sizeof v);
  } else {
    E tmp[kLanes];
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
ACLNN_ALWAYS_INLINE D8 unnormalize(const D8& g, const Axis& a) {
  return Align ? (g + 1.0) * a.scale : (g + 1.0) * a.scale - 0.5;
}

// Clamp to [0, max]; NaN -> 0 (PyTorch's clamp_min(0, x) keeps the 0 when x is NaN).
ACLNN_ALWAYS_INLINE D8 clip(const D8& x, const Axis& a) {
  return vsel(x > 0.0, vsel(x < a.max_val, x, splat(a.max_val)), D8{});
}

// Reflection into [low, low + span]; NaN propagates (PyTorch's minimum()). `against`, when
// given, receives whether the result moves against x (the gradient multiplier is then -1).
template <bool Align>
ACLNN_ALWAYS_INLINE D8 reflect(const D8& x, const Axis& a, M8* against = nullptr) {
  if (Align && a.empty) {
    if (against) *against = M8{};
    return D8{};
  }
  const D8 shifted = Align ? x : x - a.low;
  const D8 in = vabs(shifted);
  const D8 extra = in - vfloor(in / a.twice_span) * a.twice_span;  // in >= 0: floor == trunc
  const D8 other = a.twice_span - extra;
  const M8 flip = extra > other;
  if (against) *against = flip ^ (shifted < 0.0);
  // extra NaN: the comparison fails and `other` (NaN too) is taken, as minimum() would.
  const D8 r = vsel(extra < other, extra, other);
  return Align ? r : r + a.low;
}

// Source coordinate as PyTorch's forward pass (and the nearest/bicubic backward) computes it.
template <int Pad, bool Align>
ACLNN_ALWAYS_INLINE D8 map_coordinate(const D8& x, const Axis& a) {
  if (Pad == kBorder) return clip(x, a);
  if (Pad == kReflection) return clip(reflect<Align>(x, a), a);
  return x;
}

// Bilinear source coordinate and its gradient multiplier d(coordinate)/d(grid value).
template <int Pad, bool Align>
ACLNN_ALWAYS_INLINE D8 bilinear_coordinate(const D8& g, const Axis& a, D8* mult) {
  D8 x = unnormalize<Align>(g, a);
  if (Pad == kZeros) {
    *mult = splat(a.scale);
    return x;
  }
  D8 m = splat(a.scale);
  if (Pad == kReflection) {
    if (Align && a.empty) {
      x = D8{};
      m = D8{};
    } else {
      M8 against;
      x = reflect<Align>(x, a, &against);
      m = vsel(against, splat(-a.scale), m);
    }
  }
  // Borders count as outside for the gradient; NaN (see the header) becomes 0 with no gradient.
  *mult = vsel((x > 0.0) & (x < a.max_val), m, D8{});
  return clip(x, a);
}

// ---------------------------------------------------------------------------------------------
// Per-position records (structure of arrays over the positions of a chunk of samples).

struct Records {
  // bilinear: corner pixel (row of the channel-last buffers) nw, ne, sw, se; nearest: [0] only
  int32_t* corner[4] = {};
  float* frac[4] = {};  // bilinear: w (x - floor x), e (1 - w), n (y - floor y), s (1 - n)
  float* mult[2] = {};  // bilinear: gradient multipliers x, y
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
ACLNN_ALWAYS_INLINE void cubic_weights(const D8& t, D8 w[4]) {
  const double A = kCubicA;
  D8 x = t + 1.0;
  w[0] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  x = t;
  w[1] = ((A + 2) * x - (A + 3)) * x * x + 1.0;
  x = 1.0 - t;
  w[2] = ((A + 2) * x - (A + 3)) * x * x + 1.0;
  x = 2.0 - t;
  w[3] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
}

ACLNN_ALWAYS_INLINE void cubic_weight_slopes(const D8& t, D8 g[4]) {
  const double A = kCubicA;
  D8 x = -1.0 - t;
  g[0] = (-3 * A * x - 10 * A) * x - 8 * A;
  x = -t;
  g[1] = (-3 * (A + 2) * x - 2 * (A + 3)) * x;
  x = 1.0 - t;
  g[2] = (3 * (A + 2) * x - 2 * (A + 3)) * x;
  x = 2.0 - t;
  g[3] = (3 * A * x - 10 * A) * x + 8 * A;
}

struct Geometry {
  int64_t N = 0, C = 0, H = 0, W = 0, Ho = 0, Wo = 0, P = 0, HW = 0;
  Axis ax, ay;
};

// Fills the records of positions [i0, i0 + len) of the chunk; gxv/gyv hold their grid values,
// padded with zeros to a multiple of kLanes.
template <int Interp, int Pad, bool Align>
void compute_records(const Geometry& g, const double* gxv, const double* gyv, int64_t i0, int64_t len,
                     const Records& r) {
  const int32_t W = int32_t(g.W);
  const I8 sink = I8{} + int32_t(g.HW);
  const double Wd = double(g.W), Hd = double(g.H);
  for (int64_t q = 0; q < len; q += kLanes) {
    const int cnt = int(std::min<int64_t>(kLanes, len - q));
    const int64_t i = i0 + q;
    const D8 gx = load8(gxv + q), gy = load8(gyv + q);
    if (Interp == kBilinear) {
      D8 mx, my;
      const D8 x = bilinear_coordinate<Pad, Align>(gx, g.ax, &mx);
      const D8 y = bilinear_coordinate<Pad, Align>(gy, g.ay, &my);
      const D8 x0 = vfloor(x), y0 = vfloor(y);
      const D8 w = x - x0, e = 1.0 - w, n = y - y0, s = 1.0 - n;
      // Corner validity, decided in floating point (NaN and huge values are simply outside).
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
      const M8 vw = (x0 >= 0.0) & (x0 < Wd), ve = (x0 >= -1.0) & (x0 < Wd - 1);
      const M8 vn = (y0 >= 0.0) & (y0 < Hd), vs = (y0 >= -1.0) & (y0 < Hd - 1);
      const I8 ix = to_i8(vsel(vw | ve, x0, D8{})), iy = to_i8(vsel(vn | vs, y0, D8{}));
      const I8 base = iy * W + ix;
      store_n(r.corner[0] + i, vsel(vw & vn, base, sink), cnt);
      store_n(r.corner[1] + i, vsel(ve & vn, base + 1, sink), cnt);
      store_n(r.corner[2] + i, vsel(vw & vs, base + W, sink), cnt);
      store_n(r.corner[3] + i, vsel(ve & vs, base + (W + 1), sink), cnt);
#endif
      store_n(r.frac[0] + i, to_f8(w), cnt);
      store_n(r.frac[1] + i, to_f8(e), cnt);
      store_n(r.frac[2] + i, to_f8(n), cnt);
      store_n(r.frac[3] + i, to_f8(s), cnt);
      store_n(r.mult[0] + i, to_f8(mx), cnt);
      store_n(r.mult[1] + i, to_f8(my), cnt);
    } else if (Interp == kNearest) {
      const D8 x = vround_even(map_coordinate<Pad, Align>(unnormalize<Align>(gx, g.ax), g.ax));
      const D8 y = vround_even(map_coordinate<Pad, Align>(unnormalize<Align>(gy, g.ay), g.ay));
#if ACLNN_ISA_LEVEL == 2
      const __mmask8 inside = in_range(x, 0.0, Wd) & in_range(y, 0.0, Hd);
      store_n(r.corner[0] + i, keep(inside, _mm256_add_epi32(times(to_i32(y), W), to_i32(x)), sink), cnt);
#else
      const M8 valid = (x >= 0.0) & (x < Wd) & (y >= 0.0) & (y < Hd);
      const I8 ix = to_i8(vsel(valid, x, D8{})), iy = to_i8(vsel(valid, y, D8{}));
      store_n(r.corner[0] + i, vsel(valid, iy * W + ix, sink), cnt);
#endif
    } else {
      const D8 x = unnormalize<Align>(gx, g.ax), y = unnormalize<Align>(gy, g.ay);
      const D8 x0 = vfloor(x), y0 = vfloor(y);
      D8 wx[4], wy[4], sx[4], sy[4];
      cubic_weights(x - x0, wx);
      cubic_weights(y - y0, wy);
      cubic_weight_slopes(x - x0, sx);
      cubic_weight_slopes(y - y0, sy);
      for (int k = 0; k < 4; ++k) {
        const D8 xx = map_coordinate<Pad, Align>(x0 + double(k - 1), g.ax);
        const D8 yy = map_coordinate<Pad, Align>(y0 + double(k - 1), g.ay);
        // Mapped taps are integral; zeros padding checks the range (the others are inside).
#if ACLNN_ISA_LEVEL == 2
        store_n(r.tap_col[k] + i, keep(in_range(xx, 0.0, Wd), to_i32(xx), I8{} - 1), cnt);
        store_n(r.tap_row[k] + i, keep(in_range(yy, 0.0, Hd), times(to_i32(yy), W), I8{} - 1), cnt);
#else
        const M8 vx = (xx >= 0.0) & (xx < Wd), vy = (yy >= 0.0) & (yy < Hd);
        store_n(r.tap_col[k] + i, vsel(vx, to_i8(vsel(vx, xx, D8{})), I8{} - 1), cnt);
        store_n(r.tap_row[k] + i, vsel(vy, to_i8(vsel(vy, yy, D8{})) * W, I8{} - 1), cnt);
#endif
        store_n(r.cx[k] + i, to_f8(wx[k]), cnt);
        store_n(r.cy[k] + i, to_f8(wy[k]), cnt);
        store_n(r.ncxg[k] + i, to_f8(-sx[k]), cnt);
        store_n(r.ncyg[k] + i, to_f8(-sy[k]), cnt);
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

RecordFn pick_record_fn(int64_t interp, int64_t pad, bool align) {
  if (interp == kNearest) return pick_record_fn<kNearest>(pad, align);
  if (interp == kBicubic) return pick_record_fn<kBicubic>(pad, align);
  return pick_record_fn<kBilinear>(pad, align);
}

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

// Channel-major <-> channel-last transposes, in 4 x 4 register blocks (4 channel rows of 4
// positions become 4 position vectors of 4 lanes), portable to every ISA level. The storage
// type's conversion happens inside the blocks (no separate conversion pass).

typedef float F4 __attribute__((vector_size(16)));
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
  const U4 rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
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
// kBlock8Positions<T>.
template <class T, int Cb>
void rows8_to_lanes(const T* const* rows, int64_t end, float* dst) {
  for (int64_t q = 0; q < end; q += kBlock8Positions<T>) {
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
template <class T, int Cb>
void rows_to_lane_blocks(const T* const* rows, int64_t len, float* dst) {
#if ACLNN_SIMD_X86 && ACLNN_ISA_LEVEL >= 1
  if constexpr (Cb >= 8) {
    const int64_t end = len - len % kBlock8Positions<T>;
    for (int c = 0; c < Cb; c += 8) rows8_to_lanes<T, Cb>(rows + c, end, dst + c);
    for (int64_t q = end; q < len; ++q)
      for (int c = 0; c < Cb; ++c) dst[q * Cb + c] = to_float(rows[c][q]);
    return;
  }
#endif
  const int64_t len4 = len & ~int64_t(3);
  for (int c = 0; c < Cb; c += 4) {
    const T *r0 = rows[c], *r1 = rows[c + 1], *r2 = rows[c + 2], *r3 = rows[c + 3];
    int64_t q = 0;
#if ACLNN_SIMD_X86 && ACLNN_ISA_LEVEL >= 2
    if constexpr (Cb == 4) {
      for (; q + 16 <= len4; q += 16) {
        __m512 x[4] = {(__m512)simd::load(r0 + q), (__m512)simd::load(r1 + q), (__m512)simd::load(r2 + q),
                       (__m512)simd::load(r3 + q)};
        rows4_to_positions16(x);
        for (int k = 0; k < 4; ++k) _mm512_storeu_ps(dst + (q + 4 * k) * Cb, x[k]);
      }
    }
#endif
    for (; q < len4; q += 4) {
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

template <class T, int Cb>
void rows_to_lanes(const T* const* rows, int64_t len, float* dst) {
  if constexpr (Cb == 1) {  // one channel: the lanes are the row
    simd::convert_to_float(rows[0], dst, len);
  } else {
    rows_to_lane_blocks<T, Cb>(rows, len, dst);
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
// buffers summed over `parts`.
template <class T, int Cb, bool Parts>
void group_to_rows(const float* src, int64_t parts, int64_t part_stride, int c, int64_t q0, int64_t q1,
                   T* const* r) {
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
      for (int j = 0; j < 4; ++j) simd::store(r[j] + q, (simd::VecF)x[j]);
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
      for (int j = 0; j < 4; ++j) store16_from_float(r[j] + q, v[j], v[4 + j], v[8 + j], v[12 + j]);
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
// group8_to_rows for fp32 with whole lines streamed (see group_to_rows_streamed below); rows
// r[0..7] share their offset within a line. 16 positions are one line of each row: two 8 x 8
// blocks, joined into one 64-byte store per row. The partial lines at either end go through
// group8_to_rows.
template <int Cb, bool Parts>
void float_group8_to_rows_streamed(const float* src, int64_t parts, int64_t part_stride, int c, int64_t len,
                                   float* const* r) {
  const int64_t head = simd::head_to<64>(r[0], len);
  group8_to_rows<float, Cb, Parts>(src, parts, part_stride, c, 0, head, r);
  int64_t q = head;
  for (; q + 16 <= len; q += 16) {
    __m256 lo[8], hi[8];  // channels c..c+7 of positions q + k and q + 8 + k
    for (int k = 0; k < 8; ++k) {
      lo[k] = (__m256)lanes8<Cb, Parts>(src, parts, part_stride, c, q + k);
      hi[k] = (__m256)lanes8<Cb, Parts>(src, parts, part_stride, c, q + 8 + k);
    }
    transpose8x8_floats(lo);
    transpose8x8_floats(hi);
    for (int j = 0; j < 8; ++j)
      _mm512_stream_ps(r[j] + q, _mm512_insertf32x8(_mm512_castps256_ps512(lo[j]), hi[j], 1));
  }
  group8_to_rows<float, Cb, Parts>(src, parts, part_stride, c, q, len, r);
}

#endif

// The same with whole cache lines written by stores that bypass the caches: for a big
// inputGrad nobody reads soon, this saves reading every line before overwriting it (the kernel
// is memory-bound there). Each line is written by 4 consecutive 16-byte stores, so the
// write-combining buffer sends it whole. Callers end with simd::stream_fence().
template <class T, int Cb, bool Parts>
void group_to_rows_streamed(const float* src, int64_t parts, int64_t part_stride, int c, int64_t len,
                            T* const* r) {
  constexpr int64_t kLine = 64 / int64_t(sizeof(T));  // values per line: 16 or 32
  const int64_t head = simd::head_to<64>(r[0], len);
  group_to_rows<T, Cb, Parts>(src, parts, part_stride, c, 0, head, r);
  int64_t q = head;
  for (; q + kLine <= len; q += kLine) {
    F4 v[kLine];  // after the transposes, v[k + j] = channel c + j of positions q + k .. q + k + 3
    for (int k = 0; k < kLine; ++k) v[k] = lanes4<Cb, Parts>(src, parts, part_stride, c, q + k);
    for (int k = 0; k < kLine; k += 4) transpose4(v[k], v[k + 1], v[k + 2], v[k + 3]);
    for (int j = 0; j < 4; ++j) {
      if constexpr (std::is_same<T, float>::value) {
        for (int k = 0; k < kLine; k += 4) stream16(r[j] + q + k, v[k + j]);
      } else {
        for (int k = 0; k < kLine; k += 8) {
          const H4 lo = narrow4<T>(v[k + j]), hi = narrow4<T>(v[k + 4 + j]);
          stream16(r[j] + q + k, (F4)__builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7));
        }
      }
    }
  }
  group_to_rows<T, Cb, Parts>(src, parts, part_stride, c, q, len, r);
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
    if (contiguous) {
      // The next tile's lines into L2 while this one is transposed (the hardware prefetcher
      // does poorly on 16 short interleaved streams). A prefetch never faults, even past the end.
      constexpr int64_t kLine = 64 / int64_t(sizeof(T));
      for (int c = 0; c < cvalid; ++c)
        for (int64_t k = 0; k < n; k += kLine) __builtin_prefetch(base + c * schan + p0 + q0 + n + k, 0, 2);
    }
    rows_to_lanes<T, Cb>(rows, n, dst + q0 * Cb);
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
      if constexpr (std::is_same<T, float>::value) {  // (only fp32 streams: see the plan)
        if (stream && contiguous)
          for (; c + 8 <= cvalid && share_line_offset<8>(rows + c); c += 8)
            float_group8_to_rows_streamed<Cb, Parts>(chunk, parts, part_stride, c, n, rows + c);
      }
#endif
    }
#endif
    for (; c < cvalid; c += 4) {
      // A partial last group writes its missing channels' rows into scratch.
      T* group[4];
      for (int j = 0; j < 4; ++j) group[j] = c + j < cvalid ? rows[c + j] : raw[c + j];
      if (stream && contiguous && c + 4 <= cvalid && share_line_offset<4>(group) &&
          reinterpret_cast<uintptr_t>(group[0]) % sizeof(F4) == 0) {
        group_to_rows_streamed<T, Cb, Parts>(chunk, parts, part_stride, c, n, group);
      } else {
        group_to_rows<T, Cb, Parts>(chunk, parts, part_stride, c, 0, n, group);
      }
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
};

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
// sw/se are adjacent rows, a line apart at 16 lanes, usually in one line below that.
template <int Cb, bool NeedIg, bool NeedGx>
ACLNN_ALWAYS_INLINE void prefetch_corner_rows(const int32_t* k0, const int32_t* k2, const float* in, float* ig,
                                              int64_t q, int64_t len) {
  if (q + kPrefetch >= len) return;
  const int64_t p0 = int64_t(k0[q + kPrefetch]) * Cb, p2 = int64_t(k2[q + kPrefetch]) * Cb;
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

// tile_bilinear's first positions with Cb = 4 or 8 on AVX-512, 16 / Cb positions at a time:
// the corner reads of the grid gradient fill one 512-bit vector per corner (a position per
// 128- or 256-bit lane), so its arithmetic and lane sums run once per 4 or 2 positions. The
// inputGrad scatter stays position by position, in order. The same operations per lane and
// position as the one-position loop, so the same results. Against that loop (in-process A/B,
// 2 threads): N4 C3 224x224 0.85x the time in fp32 and bf16, 0.88x fp16, N4 C2 128x128 0.83x;
// C6-8 0.92-0.96x (fp16 0.97-1.00x). Returns the positions done.
template <int Cb, bool NeedIg, bool NeedGx>
int64_t tile_bilinear_wide(const TileArgs& t) {
  using V = typename Lanes<Cb>::V;
  constexpr int kStep = 16 / Cb;  // positions per 512-bit vector
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
  for (int64_t q = 0; q < end; q += kStep) {
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
      prefetch_corner_rows<Cb, NeedIg, NeedGx>(k0, k2, in, ig, at, len);
      const int64_t c0 = int64_t(k0[at]) * Cb, c1 = int64_t(k1[at]) * Cb;
      const int64_t c2 = int64_t(k2[at]) * Cb, c3 = int64_t(k3[at]) * Cb;
      if (NeedIg) {
        // One read-modify-write after the other: out-of-range corners share the sink row.
        V g;
        vload<Cb>(g, gt + at * Cb);
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
      const __m512 g = _mm512_loadu_ps(gt + q * Cb);
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

template <int Cb, bool NeedIg, bool NeedGx>
void tile_bilinear(const TileArgs& t) {
  using V = typename Lanes<Cb>::V;
  const auto [k0, k1, k2, k3, fw, fe, fn, fs, gt, in, ig, part, len] = BilinearTile(t);
  int64_t q = 0;
#if ACLNN_ISA_LEVEL == 2
  if constexpr (Cb == 4 || Cb == 8) q = tile_bilinear_wide<Cb, NeedIg, NeedGx>(t);
#endif
  for (; q < len; ++q) {
    prefetch_corner_rows<Cb, NeedIg, NeedGx>(k0, k2, in, ig, q, len);
    V g;
    vload<Cb>(g, gt + q * Cb);
    const int64_t c0 = int64_t(k0[q]) * Cb, c1 = int64_t(k1[q]) * Cb;
    const int64_t c2 = int64_t(k2[q]) * Cb, c3 = int64_t(k3[q]) * Cb;
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

// ---------------------------------------------------------------------------------------------
// Direct tiles: the one block of a sample with up to 4 channels, on its planes themselves,
// channel by channel, rather than on channel-last buffers (Runner::run_direct). Each pixel of
// each channel sums the same terms in the same order as tile_bilinear, tile_nearest and
// tile_bicubic on the buffers. gridGrad computes every lane of the block as they do, the
// buffers' padding lanes with their zero input and zero gradOutput (a NaN weight makes those
// lanes NaN there too), and adds the lanes in pair_sum's tree; so the results are the same bits.

struct DirectArgs {
  const Records* rec;  // the tile's records, from index 0
  int64_t len;         // positions in the tile
  const float* g;      // gradOutput of the tile, [len][Cb], padding lanes zero
  const void* in;      // input of the sample's first channel (T); null when unused
  int64_t in_chan;     // input channel stride, elements
  int64_t in_pix;      // input pixel stride: pixel k at in + k * in_pix (a flat plane)
  float* ig;           // inputGrad sums of the first channel; null when unused
  int64_t ig_chan;     // their channel stride, floats
  int64_t ig_pix;      // their pixel stride
  int32_t sink;        // H * W: the corner index of out-of-range corners (bilinear, nearest)
  float* part;         // gridGrad sums, x and y per position
  bool prefetch;       // planes beyond the cache: prefetch the corners kPrefetch positions ahead
};

using DirectFn = void (*)(const DirectArgs&);

// pair_sum<Cb> of lanes held as arrays.
template <int Cb>
ACLNN_ALWAYS_INLINE void lane_pair_sum(const float* dx, const float* dy, float* out) {
  typename Lanes<Cb>::V a, b;
  vload<Cb>(a, dx);
  vload<Cb>(b, dy);
  pair_sum<Cb>(a, b, out);
}

template <class T, int C, int Interp, bool NeedIg, bool NeedGx>
void tile_direct(const DirectArgs& t) {
  constexpr int Cb = C == 1 ? 1 : 4;  // the block's lanes
  const Records& r = *t.rec;
  const T* const in = static_cast<const T*>(t.in);
  float* const ig = t.ig;
  const int64_t in_chan = t.in_chan, ig_chan = t.ig_chan, in_pix = t.in_pix, ig_pix = t.ig_pix, len = t.len;
  const int32_t sink = t.sink;
  const float* const gt = t.g;
  float* const part = t.part;
  float trash[C] = {};  // out-of-range corners' inputGrad, one float a channel
  // Where corner k's inputGrad of channel c goes: at[c * step] (trash outside).
  const auto target = [&](int32_t k, float*& at, int64_t& step) {
    const bool inside = k != sink;
    at = inside ? ig + k * ig_pix : trash;
    step = inside ? ig_chan : 1;
  };
  // Lane c of pixel k's input: zero outside the image and in the padding lanes. An outside
  // pixel reads pixel 0 (in range) and drops it.
  const auto lanes = [&](bool inside, int64_t k, float* v) {
    const T* src = in + (inside ? k * in_pix : 0);
    for (int c = 0; c < Cb; ++c) {
      const float x = c < C ? to_float(src[c * in_chan]) : 0.0f;
      v[c] = inside ? x : 0.0f;
    }
  };
  if constexpr (Interp == kNearest) {
    for (int64_t q = 0; q < len; ++q) {
      float* at;
      int64_t step;
      target(r.corner[0][q], at, step);
      for (int c = 0; c < C; ++c) at[c * step] += gt[q * Cb + c];
    }
  } else if constexpr (Interp == kBicubic) {
    // As tile_bicubic: a tile with a non-finite gradOutput lane takes PyTorch's order at its
    // positions with one.
    const bool special = NeedGx && any_nonfinite(gt, len * Cb);
    for (int64_t q = 0; q < len; ++q) {
      if (t.prefetch && q + kPrefetch < len) {  // the 4 tap rows' lines of each channel
        const int64_t ahead = q + kPrefetch, col = std::max(r.tap_col[1][ahead], 0);
        for (int j = 0; j < 4; ++j) {
          const int32_t row = r.tap_row[j][ahead];
          if (row < 0) continue;
          for (int c = 0; c < C; ++c) {
            if (NeedIg) __builtin_prefetch(ig + (row + col) * ig_pix + c * ig_chan, 1);
            if (NeedGx) __builtin_prefetch(in + (row + col) * in_pix + c * in_chan);
          }
        }
      }
      float cx[4], cy[4], ncxg[4], ncyg[4], g[Cb];
      int32_t col[4], row[4];
      for (int k = 0; k < 4; ++k) {
        col[k] = r.tap_col[k][q], row[k] = r.tap_row[k][q];
        cx[k] = r.cx[k][q], cy[k] = r.cy[k][q], ncxg[k] = r.ncxg[k][q], ncyg[k] = r.ncyg[k][q];
      }
      for (int c = 0; c < Cb; ++c) g[c] = gt[q * Cb + c];
      const auto inside = [&](int j, int k) { return row[j] >= 0 && col[k] >= 0; };
      if (NeedIg)
        for (int j = 0; j < 4; ++j)
          for (int k = 0; k < 4; ++k) {
            if (!inside(j, k)) continue;
            float* at = ig + int64_t(row[j] + col[k]) * ig_pix;
            const float w = cx[k] * cy[j];
            for (int c = 0; c < C; ++c) at[c * ig_chan] = fmadd<1>(g[c], w, at[c * ig_chan]);
          }
      if (!NeedGx) continue;
      float v[4][4][Cb];  // [row][column][lane]
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 4; ++k) lanes(inside(j, k), int64_t(row[j]) + col[k], v[j][k]);
      const bool finite = all_finite<Cb>(gt + q * Cb);
      float dx[Cb], dy[Cb];
      for (int c = 0; c < Cb; ++c) {
        dx[c] = 0.0f, dy[c] = 0.0f;
        if (!special || finite) {
          for (int j = 0; j < 4; ++j) {
            float ax = 0.0f, ay = 0.0f;
            for (int k = 0; k < 4; ++k) {
              ax = fmadd<1>(v[j][k][c], ncxg[k], ax);
              ay = fmadd<1>(v[j][k][c], cx[k], ay);
            }
            dx[c] = fmadd<1>(ax, cy[j], dx[c]);
            dy[c] = fmadd<1>(ay, ncyg[j], dy[c]);
          }
          dx[c] *= g[c];
          dy[c] *= g[c];
        } else {
          for (int j = 0; j < 4; ++j)
            for (int k = 0; k < 4; ++k) {
              const float vg = v[j][k][c] * g[c];
              dx[c] += vg * ncxg[k] * cy[j];
              dy[c] += vg * ncyg[j] * cx[k];
            }
        }
      }
      lane_pair_sum<Cb>(dx, dy, part + 2 * q);
    }
  } else {
    const auto run = [&](auto prefetch) {
      for (int64_t q = 0; q < len; ++q) {
        if (prefetch && q + kPrefetch < len) {
          const int32_t a0 = r.corner[0][q + kPrefetch], a2 = r.corner[2][q + kPrefetch];
          for (int c = 0; c < C; ++c) {
            if (NeedIg && a0 != sink) __builtin_prefetch(ig + a0 * ig_pix + c * ig_chan, 1);
            if (NeedIg && a2 != sink) __builtin_prefetch(ig + a2 * ig_pix + c * ig_chan, 1);
            if (NeedGx && a0 != sink) __builtin_prefetch(in + a0 * in_pix + c * in_chan);
            if (NeedGx && a2 != sink) __builtin_prefetch(in + a2 * in_pix + c * in_chan);
          }
        }
        const int32_t k[4] = {r.corner[0][q], r.corner[1][q], r.corner[2][q], r.corner[3][q]};
        const float w = r.frac[0][q], e = r.frac[1][q], n = r.frac[2][q], s = r.frac[3][q];
        float g[Cb];
        for (int c = 0; c < Cb; ++c) g[c] = gt[q * Cb + c];
        if (NeedIg) {
          const float wt[4] = {s * e, s * w, n * e, n * w};
          for (int j = 0; j < 4; ++j) {
            float* at;
            int64_t step;
            target(k[j], at, step);
            for (int c = 0; c < C; ++c) at[c * step] = fmadd<1>(g[c], wt[j], at[c * step]);
          }
        }
        if (NeedGx) {
          float v[4][Cb];  // [corner][lane]
          for (int j = 0; j < 4; ++j) lanes(k[j] != sink, k[j], v[j]);
          float dx[Cb], dy[Cb];
          for (int c = 0; c < Cb; ++c) {
            dx[c] = fmadd<1>(v[3][c] - v[2][c], n, (v[1][c] - v[0][c]) * s) * g[c];
            dy[c] = fmadd<1>(v[3][c] - v[1][c], w, (v[2][c] - v[0][c]) * e) * g[c];
          }
          lane_pair_sum<Cb>(dx, dy, part + 2 * q);
        }
      }
    };
    if (t.prefetch) run(std::true_type{});
    else run(std::false_type{});
  }
}

template <class T, int C>
DirectFn pick_direct_fn(int64_t interp, bool need_ig, bool need_gx) {
  if (interp == kNearest) return tile_direct<T, C, kNearest, true, false>;
  if (interp == kBicubic) {
    if (need_ig && need_gx) return tile_direct<T, C, kBicubic, true, true>;
    if (need_ig) return tile_direct<T, C, kBicubic, true, false>;
    return tile_direct<T, C, kBicubic, false, true>;
  }
  if (need_ig && need_gx) return tile_direct<T, C, kBilinear, true, true>;
  if (need_ig) return tile_direct<T, C, kBilinear, true, false>;
  return tile_direct<T, C, kBilinear, false, true>;
}

template <class T>
DirectFn pick_direct_fn(int64_t C, int64_t interp, bool need_ig, bool need_gx) {
  switch (C) {
    case 1: return pick_direct_fn<T, 1>(interp, need_ig, need_gx);
    case 2: return pick_direct_fn<T, 2>(interp, need_ig, need_gx);
    case 3: return pick_direct_fn<T, 3>(interp, need_ig, need_gx);
    default: return pick_direct_fn<T, 4>(interp, need_ig, need_gx);
  }
}

template <int Cb, bool NeedIg, bool NeedGx>
TileFn pick_tile_fn(int64_t interp) {
  if (interp == kNearest) return tile_nearest<Cb, NeedIg, NeedGx>;
  if (interp == kBicubic) return tile_bicubic<Cb, NeedIg, NeedGx>;
  return tile_bilinear<Cb, NeedIg, NeedGx>;
}

template <int Cb>
TileFn pick_bicubic_pixels_fn(bool need_ig, bool need_gx) {
  if (need_ig && need_gx) return tile_bicubic<Cb, true, true, true>;
  if (need_ig) return tile_bicubic<Cb, true, false, true>;
  return tile_bicubic<Cb, false, true, true>;
}

template <int Cb>
TileFn pick_tile_fn(int64_t interp, bool need_ig, bool need_gx) {
  if (need_ig && need_gx) return pick_tile_fn<Cb, true, true>(interp);
  if (need_ig) return pick_tile_fn<Cb, true, false>(interp);
  return pick_tile_fn<Cb, false, true>(interp);
}

// ---------------------------------------------------------------------------------------------
// The plan: block width, chunking, parallel strategy and workspace layout. A function of the
// arguments only (never of the thread count), shared by the workspace query and the run.

struct Plan {
  Geometry geo;
  int64_t interp = 0, pad = 0;
  bool align = false;
  bool need_ig = false;  // inputGrad requested
  bool need_gg = false;  // gridGrad requested
  bool need_gx = false;  // gridGrad needs computing (not nearest)
  bool trivial = false;  // nothing to compute beyond zero-filling outputs
  bool stream_out = false;  // inputGrad is big: write it with cache-bypassing stores
  int cb = 16;           // channels per block
  int64_t nblocks = 0;
  int64_t chunk = 1;     // samples per chunk
  int64_t parts = 1;     // position parts per block (> 1: split positions, reduce inputGrad)
  int64_t slots = 1;     // scratch slots = most threads used in phase 2
  bool compact = false;  // phase 2 on the referenced pixels only (see kCompactRatio)
  int64_t taps = 0;      // compact: corners per position (4 bilinear, 1 nearest)
  // Each tile's records computed in the thread's slot just before the tile uses them (bilinear
  // with up to kTileRecordBlocks blocks, bicubic; not compact) rather than in phase 1.
  bool tile_records = false;
  bool tile_grid_grad = false;  // with tile records and one block: gridGrad written per tile
  // Workspace layout (bytes from the aligned base).
  int64_t buf_floats = 0;   // one channel-last buffer: (H*W + 1) * cb
  int64_t rec_array = 0;    // bytes of one record array (chunk * P entries, or kTile, aligned)
  int64_t mult_array = 0;   // several blocks with tile records: bytes of the chunk's bilinear multipliers
  int64_t mult_off = 0, rec_off = 0, part_off = 0, group_off = 0, group_bytes = 0, slot_off = 0, slot_bytes = 0;
  int64_t buffer_bytes = 0;  // fused: a slot's bytes before its tile (the buffers, or the compact layout)
  bool few_bicubic = false;  // bicubic, 16 taps a position kCompactRatio times fewer than the pixels
  bool direct = false;  // one block of up to 4 channels on its planes themselves (run_direct)
  bool direct_in_place = false;  // direct, and inputGrad is fp32 on a flat plane: summed in place
  bool direct_prefetch = false;  // direct, on a sample's planes bigger than kCompactCachedBytes
  bool direct_copy_input = false;  // direct, and the input plane is not flat: read from flat copies
  int64_t total = 0;
};

// Byte sizes of run_compact's regions, in the order it takes them from a slot: the pixel ->
// row map, the remapped corners, the row -> pixel list, then one buffer of `rows` rows of cb
// lanes for the input (when needed) and one for inputGrad (when needed).
struct CompactSizes {
  int64_t rows, map, remap, pixels, buffer;
  CompactSizes(int64_t HW, int64_t P, int64_t taps, int64_t cb)
      : rows(taps * P + 1),  // most distinct pixels, the sink included
        map(4 * (HW + 1)),
        remap(4 * taps * P),
        pixels(4 * rows),
        buffer(rows * cb * 4) {}
};

int record_arrays(int64_t interp) { return interp == kBilinear ? 10 : interp == kNearest ? 1 : kBicubicTileArrays; }

int pick_block_width(int64_t C) {
  if (C == 1) return 1;  // one lane: no transposes, a quarter of the buffers
  // Relative cost of one position for one block of each width; fewest total cost wins.
  const int widths[3] = {16, 8, 4};
  const double cost[3] = {1.0, 0.6, 0.4};
  int best = 16;
  double best_cost = 0;
  for (int k = 0; k < 3; ++k) {
    const double c = double(ceil_div(C, widths[k])) * cost[k];
    if (k == 0 || c < best_cost) {
      best = widths[k];
      best_cost = c;
    }
  }
  return best;
}

Plan make_plan(const GridSampler2DBackwardArgs& a) {
  Plan p;
  Geometry& g = p.geo;
  g.N = a.input.shape[0];
  g.C = a.input.shape[1];
  g.H = a.input.shape[2];
  g.W = a.input.shape[3];
  g.Ho = a.grid.shape[1];
  g.Wo = a.grid.shape[2];
  g.P = g.Ho * g.Wo;
  g.HW = g.H * g.W;
  p.interp = a.interpolationMode;
  p.pad = a.paddingMode;
  p.align = a.alignCorners;
  g.ax = make_axis(g.W, p.align);
  g.ay = make_axis(g.H, p.align);
  p.need_ig = a.outputMask[0] && a.inputGrad.present;
  p.need_gg = a.outputMask[1] && a.gridGrad.present;
  p.need_gx = p.need_gg && p.interp != kNearest;
  p.trivial = (!p.need_ig && !p.need_gx) || g.N == 0 || g.C == 0 || g.P == 0 || g.HW == 0;
  if (p.trivial) return p;

  // inputGrad bigger than a quarter of the last-level cache bypasses the caches (8 MiB of this
  // machine's 32: the size from which streaming was measured to win; tests shrink the cache
  // size to run this path on small data). fp32 only: for fp16/bf16 streaming measured slower,
  // with 16- and 64-byte stores alike (nearest b32 fp16 1.42 against 1.35 ms).
  const uint64_t ig_bytes = uint64_t(g.N * g.C * g.HW) * 4;
  p.stream_out = p.need_ig && a.input.dtype == DType::Float32 && simd::streams_worthwhile(4 * ig_bytes, 1);
  p.cb = pick_block_width(g.C);
  p.nblocks = ceil_div(g.C, p.cb);
  p.buf_floats = (g.HW + 1) * p.cb;
  const int64_t buf_bytes = round_up(p.buf_floats * 4, kAlign);

  // Too few channel blocks to keep threads busy: split each block's positions into parts.
  const int64_t blocks_total = g.N * p.nblocks;
  if (blocks_total < kTargetTasks) {
    int64_t k = ceil_div(kTargetTasks, blocks_total);
    k = std::min(k, g.P / kMinPartPositions);
    if (p.need_ig) k = std::min(k, std::max<int64_t>(1, 2 * g.P / g.HW));  // reduction cost
    p.parts = std::max<int64_t>(1, k);
  }
  const int64_t in_bytes = p.need_gx ? buf_bytes : 0;
  if (p.parts == 1) {
    // A small grid over a big input: the channel-last buffers would be filled, zeroed and
    // transposed for every pixel while few are touched (N2 C16 128x128 input, 8x8 grid: nearest
    // 152 us and bilinear 245 us, against torch's 75 and 99; compact 76 and 64 us, same run).
    // A slot holds the compact layout (run_compact) in place of those buffers.
    p.taps = p.interp == kBilinear ? 4 : 1;
    const CompactSizes cs(g.HW, g.P, p.taps, p.cb);
    const int64_t compact_bytes = round_up(cs.map, kAlign) + round_up(cs.remap, kAlign) + round_up(cs.pixels, kAlign) +
                                  (p.need_gx + p.need_ig) * round_up(cs.buffer, kAlign);
    // A block's input and inputGrad planes that fit in L2 take the compact path from half the
    // ratio: its gathers and scatters stay in cache (see kCompactCachedRatio).
    const int64_t plane_bytes = 2 * g.HW * std::min<int64_t>(g.C, p.cb) * int64_t(dtype_size(a.input.dtype));
    const int64_t ratio = plane_bytes <= kCompactCachedBytes ? kCompactCachedRatio : kCompactRatio;
    p.compact = p.interp != kBicubic && cs.rows * ratio <= g.HW;
    // Bicubic with few positions: a tap grid in the buffers' space, else pixel slots
    // (Runner::run_tap_grid, run_bicubic_pixels).
    p.few_bicubic = p.interp == kBicubic && 16 * g.P * kCompactRatio <= g.HW;
    // Up to 4 channels (one block, so tile records and gridGrad per tile) whose taps reach at
    // most a 6th of the pixels run on their planes directly (run_direct): no per-pixel pass but
    // inputGrad's zero-fill, where the full buffers make four and the compact path two. fp32
    // sums into inputGrad in place; 16-bit sums into fp32 planes written back, which costs
    // 8 C - 4 bytes a pixel more than the compact path's map and zero-fill (kDirectSlotRatio).
    const int64_t taps = p.interp == kBicubic ? 16 : p.taps;
    p.direct_in_place = a.input.dtype == DType::Float32 && p.need_ig &&
                        make_plane(g.H, g.W, a.inputGrad.strides[2], a.inputGrad.strides[3]).flat;
    p.direct = g.C <= 4 && taps * g.P * kDirectRatio <= g.HW &&
               (!(p.compact || p.few_bicubic) || !p.need_ig || p.direct_in_place ||
                taps * g.P * kDirectSlotRatio >= (2 * g.C - 1) * g.HW);
    if (p.direct) p.compact = p.few_bicubic = false;
    // An input plane that is not flat is copied, as it is stored, to flat planes in the slot:
    // the same code then runs whatever the strides, so a call's bits do not depend on its
    // operands' layout (NaN signs included: where several NaNs meet, which one an instruction
    // passes on depends on the instruction's form, which differs between compiled paths).
    p.direct_copy_input = p.need_gx && !make_plane(g.H, g.W, a.input.strides[2], a.input.strides[3]).flat;
    p.direct_prefetch = g.C * g.HW * (4 + int64_t(dtype_size(a.input.dtype))) > kCompactCachedBytes;
    p.buffer_bytes = in_bytes + (p.need_ig ? buf_bytes : 0);
    if (p.compact) p.buffer_bytes = std::max(p.buffer_bytes, compact_bytes);
    if (p.few_bicubic) {  // pixel slots may need more
      const int64_t slots = 16 * g.P + 1;
      const int64_t pixels_bytes = round_up(4 * (g.HW + 1), kAlign) + round_up(4 * slots, kAlign) +
                                   (p.need_gx + p.need_ig) * round_up(slots * p.cb * 4, kAlign);
      p.buffer_bytes = std::max(p.buffer_bytes, pixels_bytes);
    }
  }
  // Phase 1 computes the records of a chunk of samples once for all channel blocks: 40 bytes a
  // position for bilinear, 96 for bicubic, which go out to L2/L3 and come back for every block.
  // Computing each tile's records in the slot just before its tile runs (once per block) costs
  // more arithmetic and no traffic; with one block gridGrad is then written per tile too, with
  // no partials (phase 3). In-process A/B against the chunk records, 2 threads, bitwise the
  // same results: one block, bilinear 0.73-0.88x the time (N4 C3 224x224 fp32 1.88 -> 1.29 ms,
  // C1 0.77-0.83x), bicubic 0.42-0.51x; several blocks, bilinear at 2-4 blocks 0.80-0.90x, 6-8
  // 0.92-1.00x, 16 1.03-1.10x, bicubic at 2-16 blocks 0.56-0.71x; nearest (one 4-byte record
  // a position) 0.96-1.14x with one block, 1.19-1.24x with 16, so it kept phase 1; with its
  // cheaper records (in_range/keep) one block measured 0.94-1.00x at 2 threads (N16 C1 64x64,
  // N4 C1 128x128, N2 C1 256x256, N4 C3 224x224) and 0.88-0.98x on one thread: one block
  // computes them per tile now, several keep phase 1.
  p.tile_records = !p.compact && (p.interp == kBicubic || (p.interp == kBilinear && p.nblocks <= kTileRecordBlocks) ||
                                   (p.interp == kNearest && p.nblocks == 1));
  p.tile_grid_grad = p.tile_records && p.nblocks == 1;
  const bool chunk_mults = p.tile_records && !p.tile_grid_grad && p.need_gx && p.interp == kBilinear;
  const int64_t tile_bytes = round_up(kTile * p.cb * 4, kAlign) +
                             (p.tile_records ? record_arrays(p.interp) * round_up(kTile * 4, kAlign) +
                                                   (p.need_gx ? round_up(2 * kTile * 4, kAlign) : 0)
                                             : 0);

  // Samples per chunk: a chunk's records and gridGrad partials, and with tile records the
  // inputGrad parts of its blocks, stay within a budget.
  int64_t per_sample = 0;
  if (!p.tile_records) per_sample += g.P * 4 * record_arrays(p.interp);
  if (!p.tile_grid_grad && p.need_gx) per_sample += g.P * 8 * p.nblocks;
  if (chunk_mults) per_sample += g.P * 8;
  if (p.tile_records && p.parts > 1) per_sample += p.nblocks * (in_bytes + p.parts * buf_bytes);
  p.chunk = per_sample == 0 ? g.N : std::max<int64_t>(1, std::min<int64_t>(g.N, kRecordBudget / per_sample));

  const int64_t groups = p.chunk * p.nblocks;
  int64_t off = 0;
  p.rec_array = p.tile_records ? kTileRecordBytes : round_up(p.chunk * g.P * 4, kAlign);
  p.rec_off = off;
  if (!p.tile_records) off += p.rec_array * record_arrays(p.interp);
  p.part_off = off;
  if (!p.tile_grid_grad && p.need_gx) off += round_up(groups * g.P * 2 * 4, kAlign);
  p.mult_array = chunk_mults ? round_up(p.chunk * g.P * 4, kAlign) : 0;
  p.mult_off = off;
  off += 2 * p.mult_array;
  if (p.parts == 1) {
    // Fused per-block tasks: each thread reuses one slot (input + inputGrad buffers + tile).
    p.slot_bytes = p.buffer_bytes + tile_bytes;
    p.slots = std::min<int64_t>({kMaxSlots, groups, std::max<int64_t>(1, kSlotBudget / p.slot_bytes)});
  } else {
    // Every block of the chunk lives at once: its input and one inputGrad buffer per part.
    p.group_bytes = in_bytes + (p.need_ig ? p.parts * buf_bytes : 0);
    p.group_off = off;
    off += groups * p.group_bytes;
    p.slot_bytes = tile_bytes;
    p.slots = std::min<int64_t>(kMaxSlots, groups * p.parts);
  }
  p.slot_off = off;
  off += p.slots * p.slot_bytes;
  p.total = off + kAlign;  // room to align the caller's pointer
  return p;
}

// ---------------------------------------------------------------------------------------------
// Parallel helpers.

// parallel_tasks on at most `slots` threads (one when not `worth_threads`); a thread keeps one
// slot (its scratch memory) for all the tasks it takes.
template <class Fn>
void run_tasks(int64_t ntasks, int64_t slots, bool worth_threads, Fn&& fn) {
  parallel_tasks(ntasks, worth_threads ? slots : 1, fn);
}

// fn(begin, end) over [0, n) in chunks of `chunk` items, handed out as tasks.
template <class Fn>
void run_chunks(int64_t n, int64_t chunk, Fn&& fn) {
  run_tasks(ceil_div(n, chunk), kMaxSlots, n >= 2 * chunk,
            [&](int64_t task, int64_t) { fn(task * chunk, std::min(n, (task + 1) * chunk)); });
}

// ---------------------------------------------------------------------------------------------
// The run, for one storage type T (all operands share it) and block width Cb.

template <class T>
const T* tensor_ptr(const TensorView& v) {
  return static_cast<const T*>(v.data);
}

template <class T>
void fill_zero(const TensorView& v) {
  if (!v.present || v.numel() == 0) return;
  if (v.is_contiguous()) {  // +0.0 is all-zero bits in every storage type
    std::memset(v.data, 0, size_t(v.numel()) * sizeof(T));
    return;
  }
  T* base = static_cast<T*>(v.data);
  const T zero{};  // +0.0: all bits zero in every storage type
  for (int64_t a = 0; a < v.shape[0]; ++a)
    for (int64_t b = 0; b < v.shape[1]; ++b)
      for (int64_t c = 0; c < v.shape[2]; ++c) {
        T* row = base + a * v.strides[0] + b * v.strides[1] + c * v.strides[2];
        for (int64_t d = 0; d < v.shape[3]; ++d) row[d * v.strides[3]] = zero;
      }
}

// Folds the y values of `count` (x, y) pairs into [*lo, *hi]; *nan is set if one is NaN. Whole
// vectors of pairs go through min/max on every lane, and only the y lanes are kept at the end.
inline void y_range(const float* xy, int64_t count, float* lo, float* hi, bool* nan) {
  typedef float F16 __attribute__((vector_size(64)));
  typedef int32_t I16 __attribute__((vector_size(64)));
  F16 vlo = F16{} + INFINITY, vhi = F16{} - INFINITY;
  I16 bad = I16{};
  int64_t q = 0;
  for (; q + 8 <= count; q += 8) {
    F16 v;
    std::memcpy(&v, xy + 2 * q, sizeof v);
    vlo = v < vlo ? v : vlo;
    vhi = v > vhi ? v : vhi;
    bad |= v != v;
  }
  for (int k = 1; k < 16; k += 2) {
    *lo = std::min(*lo, vlo[k]);
    *hi = std::max(*hi, vhi[k]);
    *nan |= bad[k] != 0;
  }
  for (; q < count; ++q) {
    const float y = xy[2 * q + 1];
    *nan |= y != y;
    *lo = std::min(*lo, y);
    *hi = std::max(*hi, y);
  }
}

// Ascending insertion sort of a handful of values. (Not std::sort: its out-of-line helpers are
// shared weak symbols, which one ISA level's object must not define; see setup.py.)
inline void sort_few(int64_t* v, int64_t n) {
  for (int64_t i = 1; i < n; ++i) {
    const int64_t x = v[i];
    int64_t j = i;
    for (; j > 0 && v[j - 1] > x; --j) v[j] = v[j - 1];
    v[j] = x;
  }
}

// Pixel rows [lo, hi) of the input.
struct RowWindow {
  int64_t lo = 0, hi = 0;
};

// The set bits of `bands` (bit k: rows [k * band, (k + 1) * band) of an image of H rows) as row
// runs, in order, into runs (at most 32: runs of 64 bits are separated by clear ones); the count.
inline int64_t band_runs(uint64_t bands, int64_t band, int64_t H, RowWindow runs[32]) {
  int64_t count = 0;
  for (int64_t k = 0; k < 64 && k * band < H;) {
    if (!(bands >> k & 1)) {
      ++k;
      continue;
    }
    int64_t e = k;
    while (e < 64 && e * band < H && (bands >> e & 1)) ++e;
    runs[count++] = RowWindow{k * band, std::min(H, e * band)};
    k = e;
  }
  return count;
}

// Grows the windows of parts 0..K-1 until the parts whose windows hold any one row are a run
// k0..k1 (a part between two that reach a row gets that row too), so a pixel's parts can be
// summed as consecutive buffers. Windows only grow: each still holds what its part reaches.
void close_windows(RowWindow* w, int64_t K) {
  for (bool grew = true; grew;) {
    grew = false;
    for (int64_t j = 0; j < K; ++j)
      for (int64_t l = j + 2; l < K; ++l) {
        const int64_t lo = std::max(w[j].lo, w[l].lo), hi = std::min(w[j].hi, w[l].hi);
        if (lo >= hi) continue;
        for (int64_t k = j + 1; k < l; ++k) {
          const bool empty = w[k].lo >= w[k].hi;
          const RowWindow grown{empty ? lo : std::min(w[k].lo, lo), empty ? hi : std::max(w[k].hi, hi)};
          if (grown.lo != w[k].lo || grown.hi != w[k].hi) {
            w[k] = grown;
            grew = true;
          }
        }
      }
  }
}

// Record arrays of `array_bytes` each, laid out from `mem` in the order Records lists them.
Records lay_out_records(char* mem, int64_t interp, int64_t array_bytes) {
  Records r;
  auto next_i32 = [&]() { int32_t* a = reinterpret_cast<int32_t*>(mem); mem += array_bytes; return a; };
  auto next_f32 = [&]() { float* a = reinterpret_cast<float*>(mem); mem += array_bytes; return a; };
  if (interp == kBilinear) {
    for (int k = 0; k < 4; ++k) r.corner[k] = next_i32();
    for (int k = 0; k < 4; ++k) r.frac[k] = next_f32();
    for (int k = 0; k < 2; ++k) r.mult[k] = next_f32();
  } else if (interp == kNearest) {
    r.corner[0] = next_i32();
  } else {  // tile_bicubic reads these 24 arrays by their place in this order
    for (int k = 0; k < 4; ++k) {
      r.tap_col[k] = next_i32();
      r.tap_row[k] = next_i32();
      r.cx[k] = next_f32();
      r.cy[k] = next_f32();
      r.ncxg[k] = next_f32();
      r.ncyg[k] = next_f32();
    }
  }
  return r;
}

// Where a bicubic sample's few positions' taps go in small buffers. A "tap grid"
// (Runner::run_tap_grid): the input rows and columns its taps reach, taken as an image of rows
// x cols pixels plus a sink. Pixel slots (Runner::run_bicubic_pixels): each pixel reached.
struct TapRemap {
  const int32_t* row_rank = nullptr;  // tap grid: input row -> its row (rows reached only)
  const int32_t* col_rank = nullptr;  // tap grid: input column -> its column (columns reached only)
  int64_t cols = 0;
  const int32_t* slot_of = nullptr;   // pixel slots: input pixel -> slot (pixel H * W: the sink, 0)
  int64_t sink = 0;  // the sink's pixel in the buffers: rows * cols, or slot 0
};

template <class T, int Cb>
class Runner {
 public:
  Runner(const GridSampler2DBackwardArgs& a, const Plan& p, char* ws) : a_(a), p_(p), g_(p.geo), ws_(ws) {
    go_plane_ = make_plane(g_.Ho, g_.Wo, a.gradOutput.strides[2], a.gradOutput.strides[3]);
    in_plane_ = make_plane(g_.H, g_.W, a.input.strides[2], a.input.strides[3]);
    grid_plane_ = make_plane(g_.Ho, g_.Wo, a.grid.strides[1], a.grid.strides[2]);
    if (p.need_ig) ig_plane_ = make_plane(g_.H, g_.W, a.inputGrad.strides[2], a.inputGrad.strides[3]);
    if (p.need_gg) gg_plane_ = make_plane(g_.Ho, g_.Wo, a.gridGrad.strides[1], a.gridGrad.strides[2]);
    if (!p.tile_records) rec_ = lay_out_records(ws + p.rec_off, p.interp, p.rec_array);
    if (!p.tile_grid_grad) partials_ = reinterpret_cast<float*>(ws + p.part_off);
    if (p.mult_array > 0) {  // phase 3 reads them where it reads the chunk records' multipliers
      rec_.mult[0] = reinterpret_cast<float*>(ws + p.mult_off);
      rec_.mult[1] = reinterpret_cast<float*>(ws + p.mult_off + p.mult_array);
    }
    record_fn_ = pick_record_fn(p.interp, p.pad, p.align);
    tile_fn_ = pick_tile_fn<Cb>(p.interp, p.need_ig, p.need_gx);
    if (p.few_bicubic) pixels_tile_fn_ = pick_bicubic_pixels_fn<Cb>(p.need_ig, p.need_gx);
    if constexpr (Cb == 1 || Cb == 4) {
      if (p.direct) direct_fn_ = pick_direct_fn<T>(p.geo.C, p.interp, p.need_ig, p.need_gx);
    }
  }

  void run() {
    for (int64_t n0 = 0; n0 < g_.N; n0 += p_.chunk) {
      const int64_t nc = std::min(p_.chunk, g_.N - n0);
      if (!p_.tile_records) compute_chunk_records(n0, nc);
      if (p_.parts == 1) {
        run_fused(n0, nc);
      } else {
        run_split(n0, nc);
      }
      if (p_.need_gx && !p_.tile_grid_grad) write_grid_grad(n0, nc);
    }
  }

 private:
  // Phase 1: records of every position of samples [n0, n0 + nc).
  void compute_chunk_records(int64_t n0, int64_t nc) {
    run_chunks(nc * g_.P, kPositionGrain, [&](int64_t begin, int64_t end) {
      alignas(64) double gx[kTile], gy[kTile];
      for (int64_t i = begin; i < end;) {
        const int64_t n = i / g_.P, p = i % g_.P;
        const int64_t len = std::min({kTile, end - i, g_.P - p});
        load_grid(n0 + n, p, len, gx, gy);
        record_fn_(g_, gx, gy, i, len, rec_);
        i += len;
      }
    });
  }

  // The (x, y) grid values of positions [p, p + len) of sample n, len <= kTile, as fp32 pairs:
  // read in place when the grid is fp32 with its pairs side by side, else converted (and
  // gathered) into `scratch` (2 * kTile floats).
  const float* grid_pairs(int64_t n, int64_t p, int64_t len, float* scratch) const {
    const T* base = tensor_ptr<T>(a_.grid) + n * a_.grid.strides[0];
    const int64_t sk = a_.grid.strides[3];
    if (grid_plane_.flat && grid_plane_.scol == 2 && sk == 1) {  // (x, y) pairs side by side
      if constexpr (std::is_same<T, float>::value) return base + 2 * p;
      simd::convert_to_float(base + 2 * p, scratch, 2 * len);
      return scratch;
    }
    T raw[2 * kTile];
    for_each_offset(grid_plane_, p, len, [&](int64_t q, int64_t off) {
      raw[2 * q] = base[off];
      raw[2 * q + 1] = base[off + sk];
    });
    simd::convert_to_float(raw, scratch, 2 * len);
    return scratch;
  }

  // gx, gy = the grid values of positions [p, p + len) of sample n, len <= kTile, in double and
  // padded with zeros to a multiple of kLanes.
  void load_grid(int64_t n, int64_t p, int64_t len, double* gx, double* gy) const {
    alignas(64) float scratch[2 * kTile];
    const float* pairs = grid_pairs(n, p, len, scratch);
    int64_t q = 0;
#if ACLNN_ISA_LEVEL == 2
    // 8 (x, y) pairs at a time: widened to double, then split into x and y (GCC left the
    // loop below scalar: with the phase-1 code around it, 10% of a one-channel nearest call).
    const __m512i even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), odd = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
    for (; q + 8 <= len; q += 8) {
      const __m512 xy = _mm512_loadu_ps(pairs + 2 * q);
      const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(xy));
      const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xy), 1)));
      _mm512_store_pd(gx + q, _mm512_permutex2var_pd(lo, even, hi));
      _mm512_store_pd(gy + q, _mm512_permutex2var_pd(lo, odd, hi));
    }
#endif
    for (; q < len; ++q) {
      gx[q] = double(pairs[2 * q]);
      gy[q] = double(pairs[2 * q + 1]);
    }
    for (q = len; q < round_up(len, kLanes); ++q) gx[q] = gy[q] = 0.0;
  }

  float* slot_mem(int64_t slot) const { return reinterpret_cast<float*>(ws_ + p_.slot_off + slot * p_.slot_bytes); }
  int64_t buf_stride() const { return round_up(p_.buf_floats * 4, kAlign) / 4; }

  // Transposes input rows [rows.lo, rows.hi) of channel block b of sample n into the
  // channel-last buffer `dst` (the sink row is left to the caller: zero_sink).
  void load_input_rows(int64_t n, int64_t b, float* dst, RowWindow rows) const {
    const int64_t c0 = b * Cb, p0 = rows.lo * g_.W;
    const int cvalid = int(std::min<int64_t>(Cb, g_.C - c0));
    const T* base = tensor_ptr<T>(a_.input) + n * a_.input.strides[0] + c0 * a_.input.strides[1];
    load_channels<T, Cb>(base, a_.input.strides[1], cvalid, in_plane_, p0, rows.hi * g_.W - p0, dst + p0 * Cb);
  }

  // The whole block, sink row zero.
  void load_input_block(int64_t n, int64_t b, float* dst) const {
    load_input_rows(n, b, dst, RowWindow{0, g_.H});
    zero_sink(dst);
  }

  // A channel-last buffer's sink row (pixel HW, where out-of-range taps go) = 0.
  void zero_sink(float* buf) const { std::memset(buf + g_.HW * Cb, 0, Cb * sizeof(float)); }

  // Rows [rows.lo, rows.hi) of a channel-last inputGrad buffer = 0.
  void zero_rows(float* buf, RowWindow rows) const {
    std::memset(buf + rows.lo * g_.W * Cb, 0, size_t((rows.hi - rows.lo) * g_.W * Cb) * sizeof(float));
  }

  // Writes pixels [p0, p0 + len) of channel block b of sample n: the sum of `parts` buffers.
  void store_input_grad(int64_t n, int64_t b, const float* src, int64_t parts, int64_t p0, int64_t len) const {
    const int64_t c0 = b * Cb;
    const int cvalid = int(std::min<int64_t>(Cb, g_.C - c0));
    T* base = static_cast<T*>(a_.inputGrad.data) + n * a_.inputGrad.strides[0] + c0 * a_.inputGrad.strides[1];
    if (parts > 1) {
      store_channels<T, Cb, true>(src, parts, buf_stride(), cvalid, base, a_.inputGrad.strides[1], ig_plane_, p0,
                                  len, p_.stream_out);
    } else {
      store_channels<T, Cb, false>(src, 1, 0, cvalid, base, a_.inputGrad.strides[1], ig_plane_, p0, len,
                                   p_.stream_out);
    }
    if (p_.stream_out) simd::stream_fence();
  }

  // Phase 2 inner loop: positions [p0, p1) of block b of sample n (chunk-local index nl).
  // `rec` and `first` (the record of the sample's position 0) default to the chunk's records;
  // run_compact passes its sample's records with corners remapped to compact rows. `tile` is
  // the slot's scratch: the gradOutput tile, then with tile records the tile's records and
  // gridGrad sums. With `taps` (bicubic), `in` and `ig` are tap-grid buffers and each tile's
  // records are remapped to them.
  void run_positions(int64_t n0, int64_t nl, int64_t b, int64_t p0, int64_t p1, const float* in, float* ig,
                     float* tile, const Records* rec = nullptr, int64_t first = -1,
                     const TapRemap* taps = nullptr, const DirectArgs* direct = nullptr) const {
    const int64_t n = n0 + nl, c0 = b * Cb;
    Records own;
    float* part = nullptr;  // gridGrad sums: the tile's own (tile_grid_grad), else the chunk's
    if (p_.tile_records) {
      char* scratch = reinterpret_cast<char*>(tile) + round_up(kTile * Cb * 4, kAlign);
      own = lay_out_records(scratch, p_.interp, p_.rec_array);
      rec = &own;
      if (p_.tile_grid_grad && p_.need_gx)
        part = reinterpret_cast<float*>(scratch + record_arrays(p_.interp) * p_.rec_array);
    } else if (rec == nullptr) {
      rec = &rec_, first = nl * g_.P;
    }
    if (!p_.tile_grid_grad && p_.need_gx) part = partials_ + (nl * p_.nblocks + b) * g_.P * 2;
    const int cvalid = int(std::min<int64_t>(Cb, g_.C - c0));
    const T* go = tensor_ptr<T>(a_.gradOutput) + n * a_.gradOutput.strides[0] + c0 * a_.gradOutput.strides[1];
    for (int64_t t0 = p0; t0 < p1; t0 += kTile) {
      const int64_t len = std::min(kTile, p1 - t0);
      if (p_.tile_records) {
        alignas(64) double gx[kTile], gy[kTile];
        load_grid(n, t0, len, gx, gy);
        record_fn_(g_, gx, gy, 0, len, own);
        if (taps) remap_taps(own, len, *taps);
        if (b == 0 && p_.mult_array > 0)
          for (int k = 0; k < 2; ++k) std::memcpy(rec_.mult[k] + nl * g_.P + t0, own.mult[k], size_t(len) * 4);
      }
      // One fp32 channel laid out along the positions is already the tile: read in place (N4 C1
      // 128x128 nearest, one thread, in-process A/B: 0.97x the time).
      const float* gtile = tile;
      if constexpr (Cb == 1 && std::is_same<T, float>::value) {
        if (go_plane_.flat && go_plane_.scol == 1) gtile = go + t0;
      }
      if (gtile == tile) load_channels<T, Cb>(go, a_.gradOutput.strides[1], cvalid, go_plane_, t0, len, tile);
      const int64_t i0 = p_.tile_records ? 0 : first + t0;  // the tile's first record
      float* tile_part = part == nullptr || p_.tile_grid_grad ? part : part + 2 * t0;
      if (direct) {  // (tile records: i0 is 0)
        DirectArgs d = *direct;
        d.rec = rec, d.len = len, d.g = gtile, d.part = tile_part;
        direct_fn_(d);
      } else {
        const TileArgs t{rec, i0, len, gtile, in, ig, tile_part, (taps ? taps->sink : g_.HW) * Cb};
        (taps && taps->slot_of ? pixels_tile_fn_ : tile_fn_)(t);
      }
      if (p_.tile_grid_grad && part) store_grid_grad(n, t0, len, part, own, 0);
    }
  }

  // Cost of `positions` positions of one block on one thread, in units of about 0.3 ns: per
  // position (8 + Cb) units times 1 (nearest), 3 (bilinear) or 12 (bicubic). Measured (N16 32x32
  // warp, fp32, ns per position for Cb 1 / 4 / 8 / 16): nearest 2.8 / 3.7 / 5.4 / 10.4,
  // bilinear 7.7 / 10 / 12 / 26, bicubic 35 / 31 / 50 / 70. (Counting lane-positions, as
  // before, kept a 0.6 ms one-channel bicubic call on one thread.)
  int64_t task_cost(int64_t positions) const {
    const int64_t weight = p_.interp == kNearest ? 1 : p_.interp == kBilinear ? 3 : 12;
    return positions * (8 + Cb) * weight;
  }

  // Phase 2, one task per (sample, block): load, accumulate and write back in one slot.
  void run_fused(int64_t n0, int64_t nc) {
    const int64_t bs = buf_stride();
    const bool windowed = g_.P * kWindowRatio <= g_.HW;
    // A compact or windowed task also zero-fills its channels' inputGrad planes, wholly or
    // outside the rows it reaches, and a compact one fills a map of the pixels: (8 + Cb) / 4
    // units a pixel. Measured on one thread, fp32, 9 compact calls of 1-16 channels: 0.5-1.8 ns
    // a pixel of each (sample, block) beyond the positions' cost (N4 C1 221x35 -> 15x52 nearest
    // 0.8, N1 C9 165x31 -> 154x1 1.8, N4 C16 128x128 -> 8x8 1.5). A 16th of a position's cost,
    // as before, kept that nearest call (32 us alone) on one thread.
    const int64_t task_work = task_cost(g_.P) + (p_.compact || p_.direct || windowed ? g_.HW * (8 + Cb) / 4 : 0);
    const bool worth_threads = nc * p_.nblocks * task_work >= kTaskGrainWork;
    // A grid of few positions against the input's pixels reaches few of its rows (a crop, a
    // patch, a few samples): only those rows, in 64 bands, are loaded, zeroed and written back
    // from the buffers, the rest of inputGrad is zero-filled (the same bits: their sums would
    // stay +0.0). Whole planes cost a bicubic N1 C9 118x54 -> 2x1 call 27 us against torch's 8,
    // N13 C5 209x115 -> 2x2 (4 positions spread over the image) 568 us against 65. Reflection
    // padding and NaN reach every row (reachable_bands), as do grids spread more densely, which
    // then cost a pass over their y values, a fraction of a plane's work here.
    const int64_t band = ceil_div(g_.H, 64);  // rows per band
    run_tasks(nc * p_.nblocks, p_.slots, worth_threads, [&](int64_t task, int64_t slot) {
      const int64_t nl = task / p_.nblocks, b = task % p_.nblocks, n = n0 + nl;
      if (p_.compact) return run_compact(n0, nl, b, slot_mem(slot));
      if (p_.direct) return run_direct(n0, nl, slot_mem(slot));
      if (p_.few_bicubic) {
        if (!run_tap_grid(n0, nl, b, slot_mem(slot))) run_bicubic_pixels(n0, nl, b, slot_mem(slot));
        return;
      }
      RowWindow runs[32];
      const int64_t nruns =
          band_runs(windowed ? reachable_bands(n, 0, g_.P, band) : ~uint64_t(0), band, g_.H, runs);
      float* mem = slot_mem(slot);
      float* in = nullptr;
      float* ig = nullptr;
      if (p_.need_gx) {
        in = mem;
        mem += bs;
        for (int64_t r = 0; r < nruns; ++r) load_input_rows(n, b, in, runs[r]);
        zero_sink(in);  // also when no row is reached
      }
      if (p_.need_ig) {
        ig = mem;
        mem += bs;
        for (int64_t r = 0; r < nruns; ++r) zero_rows(ig, runs[r]);
        zero_sink(ig);
      }
      run_positions(n0, nl, b, 0, g_.P, in, ig, mem);
      if (!p_.need_ig) return;
      int64_t done = 0;  // pixels written so far
      for (int64_t r = 0; r < nruns; ++r) {
        const int64_t lo = runs[r].lo * g_.W, hi = runs[r].hi * g_.W;
        store_zero_input_grad(n, b, done, lo - done);
        store_input_grad(n, b, ig, 1, lo, hi - lo);
        done = hi;
      }
      store_zero_input_grad(n, b, done, g_.HW - done);
    });
  }

  // Phase 2 for one (sample, block) on the referenced pixels only: each pixel the sample's
  // positions reach gets a row (a slot) of compact channel-last buffers, in order of first use;
  // the tile functions run unchanged on corner indices remapped to slots, so every pixel sums
  // the same values in the same order as in the full buffers (bitwise the same results). The
  // block's inputGrad planes are zeroed and the touched pixels written over them.
  void run_compact(int64_t n0, int64_t nl, int64_t b, float* slot) const {
    const int64_t P = g_.P, HW = g_.HW, taps = p_.taps, n = n0 + nl;
    const int64_t i0 = nl * P;  // the sample's first record
    char* at = reinterpret_cast<char*>(slot);
    const auto take = [&](int64_t bytes) {
      char* r = at;
      at += round_up(bytes, kAlign);
      return r;
    };
    const CompactSizes cs(HW, P, taps, Cb);
    int32_t* slot_of = reinterpret_cast<int32_t*>(take(cs.map));
    int32_t* remap = reinterpret_cast<int32_t*>(take(cs.remap));
    int32_t* pixel_of = reinterpret_cast<int32_t*>(take(cs.pixels));
    std::fill(slot_of, slot_of + HW + 1, -1);
    int64_t slots = 0;
    for (int64_t q = 0; q < P; ++q)
      for (int64_t k = 0; k < taps; ++k) {
        const int32_t pixel = rec_.corner[k][i0 + q];
        if (slot_of[pixel] < 0) {
          slot_of[pixel] = int32_t(slots);
          pixel_of[slots++] = pixel;
        }
        remap[k * P + q] = slot_of[pixel];
      }
    float* in = nullptr;
    float* ig = nullptr;
    if (p_.need_gx) {
      in = reinterpret_cast<float*>(take(cs.buffer));
      gather_slots(n, b, pixel_of, slots, in);
    }
    if (p_.need_ig) {
      ig = reinterpret_cast<float*>(take(cs.buffer));
      std::memset(ig, 0, size_t(slots * Cb) * sizeof(float));
    }
    // The records of this sample with corners as slots (positions indexed from the sample's
    // first one).
    Records local = rec_;
    for (int64_t k = 0; k < taps; ++k) local.corner[k] = remap + k * P;
    if (p_.interp == kBilinear)
      for (int k = 0; k < 4; ++k) local.frac[k] = rec_.frac[k] + i0;
    float* tile = slot + p_.buffer_bytes / 4;
    run_positions(n0, nl, b, 0, P, in, ig, tile, &local, 0);
    if (p_.need_ig) scatter_slots(n, b, pixel_of, slots, ig);
  }

  // Phase 2 for one sample of at most 4 channels (its one block) on a grid that reaches few of
  // its pixels: the positions run on the planes themselves (tile_direct), so no buffer is
  // filled, zeroed or transposed pixel by pixel. inputGrad is zeroed and summed in place when it
  // is fp32 on a flat plane, else summed in fp32 planes in the slot and written back.
  void run_direct(int64_t n0, int64_t nl, float* slot) const {
    if constexpr (Cb == 1 || Cb == 4) {
      const int64_t n = n0 + nl, HW = g_.HW;
      const int cvalid = int(std::min<int64_t>(Cb, g_.C));
      DirectArgs d{};
      d.sink = int32_t(HW);
      d.prefetch = p_.direct_prefetch;
      const T* input = tensor_ptr<T>(a_.input) + n * a_.input.strides[0];
      float* mem = slot;
      if (p_.need_gx && p_.direct_copy_input) {  // cvalid flat planes, in the input buffer's room
        T* copy = reinterpret_cast<T*>(mem);
        for (int c = 0; c < cvalid; ++c) {
          const T* src = input + c * a_.input.strides[1];
          T* dst = copy + c * HW;
          for_each_offset(in_plane_, 0, HW, [&](int64_t q, int64_t off) { dst[q] = src[off]; });
        }
        d.in = copy, d.in_chan = HW, d.in_pix = 1;
        mem += buf_stride();
      } else if (p_.need_gx) {
        d.in = input, d.in_chan = a_.input.strides[1], d.in_pix = in_plane_.scol;
      }
      const bool in_place = p_.direct_in_place;  // (fp32 only)
      if (p_.need_ig) {
        if (in_place) {
          store_zero_input_grad(n, 0, 0, HW);
          d.ig = static_cast<float*>(a_.inputGrad.data) + n * a_.inputGrad.strides[0];
          d.ig_chan = a_.inputGrad.strides[1];
          d.ig_pix = ig_plane_.scol;
        } else {  // cvalid planes of H * W floats, in the inputGrad buffer's room
          d.ig = mem;
          d.ig_chan = HW;
          d.ig_pix = 1;
          std::memset(mem, 0, size_t(cvalid * HW) * sizeof(float));
        }
      }
      run_positions(n0, nl, 0, 0, g_.P, nullptr, nullptr, slot + p_.buffer_bytes / 4, nullptr, -1, nullptr, &d);
      if (p_.need_ig && !in_place) {
        T* base = static_cast<T*>(a_.inputGrad.data) + n * a_.inputGrad.strides[0];
        for (int c = 0; c < cvalid; ++c)
          store_plane<T, false>(d.ig + c * HW, 1, 0, base + c * a_.inputGrad.strides[1], ig_plane_, 0, HW,
                                p_.stream_out);
        if (p_.stream_out) simd::stream_fence();
      }
    }
  }

  // Compact buffers: slot s of block b of sample n = input pixel pixel_of[s] (the sink, pixel
  // H * W, reads zeros).
  void gather_slots(int64_t n, int64_t b, const int32_t* pixel_of, int64_t slots, float* in) const {
    const int64_t c0 = b * Cb;
    const int cvalid = int(std::min<int64_t>(Cb, g_.C - c0));
    const T* base = tensor_ptr<T>(a_.input) + n * a_.input.strides[0] + c0 * a_.input.strides[1];
    for (int64_t s = 0; s < slots; ++s) {
      const int64_t pixel = pixel_of[s], off = pixel < g_.HW ? pixel_offset(in_plane_, pixel) : 0;
      for (int c = 0; c < Cb; ++c)
        in[s * Cb + c] = pixel < g_.HW && c < cvalid ? to_float(base[c * a_.input.strides[1] + off]) : 0.0f;
    }
  }

  // inputGrad of block b of sample n = zero, but for the compact slots' pixels (not the sink).
  void scatter_slots(int64_t n, int64_t b, const int32_t* pixel_of, int64_t slots, const float* ig) const {
    store_zero_input_grad(n, b, 0, g_.HW);
    const int64_t c0 = b * Cb;
    const int cvalid = int(std::min<int64_t>(Cb, g_.C - c0));
    T* base = static_cast<T*>(a_.inputGrad.data) + n * a_.inputGrad.strides[0] + c0 * a_.inputGrad.strides[1];
    const int64_t schan = a_.inputGrad.strides[1];
    for (int64_t s = 0; s < slots; ++s) {
      const int64_t pixel = pixel_of[s];
      if (pixel == g_.HW) continue;  // the sink
      const int64_t off = pixel_offset(ig_plane_, pixel);
      for (int c = 0; c < cvalid; ++c) base[c * schan + off] = from_float<T>(ig[s * Cb + c]);
    }
  }

  static int64_t pixel_offset(const Plane& pl, int64_t pixel) {
    return pl.flat ? pixel * pl.scol : (pixel / pl.cols) * pl.srow + (pixel % pl.cols) * pl.scol;
  }

  // The records of sample n's positions, a tile at a time into `tile`'s scratch (as
  // run_positions lays them out): fn(records, len) per tile.
  template <class Fn>
  void for_each_tile_records(int64_t n, float* tile, Fn&& fn) const {
    Records own = lay_out_records(reinterpret_cast<char*>(tile) + round_up(kTile * Cb * 4, kAlign), p_.interp,
                                  p_.rec_array);
    for (int64_t t0 = 0; t0 < g_.P; t0 += kTile) {
      const int64_t len = std::min(kTile, g_.P - t0);
      alignas(64) double gx[kTile], gy[kTile];
      load_grid(n, t0, len, gx, gy);
      record_fn_(g_, gx, gy, 0, len, own);
      fn(own, len);
    }
  }

  // Phase 2 for one (sample, block) of a bicubic grid with few positions against the input's
  // pixels (16 taps a position, kCompactRatio times fewer than the pixels): the rows and the
  // columns its taps reach make a small image (a "tap grid"), and the block runs on buffers of
  // that image alone. Bicubic taps are a row start plus a column, which a grid of rows x columns
  // keeps; the tile function runs unchanged on remapped records, so every pixel sums the same
  // values in the same order as in the full buffers (bitwise the same results). Spread
  // positions reach 4 rows and 4 columns each: N13 C5 209x115 -> 2x2 loaded a fifth of the
  // input in row bands; the tap grid holds 16x16 pixels. The block's inputGrad planes are
  // zeroed and the tap grid's pixels written over them. Returns false, having written nothing,
  // when the tap grid would cost more than pixel slots (run_bicubic_pixels) or does not fit.
  bool run_tap_grid(int64_t n0, int64_t nl, int64_t b, float* slot) const {
    const int64_t H = g_.H, W = g_.W, n = n0 + nl, c0 = b * Cb;
    const int64_t bs = buf_stride(), nbuf = int64_t(p_.need_gx) + int64_t(p_.need_ig);
    float* tile = slot + p_.buffer_bytes / 4;
    if (H + 2 * W > nbuf * bs / 2) return false;  // a thin image: no room for the maps below
    // Rank maps and the reached columns at the end of the buffers' space: -1 until reached.
    int32_t* row_rank = reinterpret_cast<int32_t*>(tile) - (H + 2 * W);
    int32_t* col_rank = row_rank + H;
    int32_t* col_list = col_rank + W;
    std::memset(row_rank, 0xff, size_t(H + W) * sizeof(int32_t));
    for_each_tile_records(n, tile, [&](const Records& own, int64_t len) {
      for (int k = 0; k < 4; ++k)
        for (int64_t q = 0; q < len; ++q) {
          if (own.tap_row[k][q] >= 0) row_rank[own.tap_row[k][q] / W] = 0;
          if (own.tap_col[k][q] >= 0) col_rank[own.tap_col[k][q]] = 0;
        }
    });
    int64_t rows = 0, cols = 0;
    for (int64_t y = 0; y < H; ++y)
      if (row_rank[y] >= 0) row_rank[y] = int32_t(rows++);
    for (int64_t x = 0; x < W; ++x)
      if (col_rank[x] >= 0) {
        col_list[cols] = int32_t(x);
        col_rank[x] = int32_t(cols++);
      }
    const int64_t pixels = rows * cols;
    const int64_t buffer_floats = round_up((pixels + 1) * Cb * 4, kAlign) / 4;
    // The tap grid's gathers against run_bicubic_pixels' map of every pixel and gathers of
    // the taps' pixels alone, in element operations.
    if (pixels * Cb > g_.HW / 8 + 16 * g_.P * Cb || nbuf * buffer_floats + H + 2 * W > nbuf * bs) return false;

    float* in = nullptr;
    float* ig = nullptr;
    float* mem = slot;
    const int cvalid = int(std::min<int64_t>(Cb, g_.C - c0));
    if (p_.need_gx) {  // the tap grid's input values; its sink reads zeros
      in = mem;
      mem += buffer_floats;
      const T* base = tensor_ptr<T>(a_.input) + n * a_.input.strides[0] + c0 * a_.input.strides[1];
      float* dst = in;
      for (int64_t y = 0; y < H; ++y) {
        if (row_rank[y] < 0) continue;
        for (int64_t j = 0; j < cols; ++j, dst += Cb) {
          const T* src = base + y * in_plane_.srow + col_list[j] * in_plane_.scol;
          for (int c = 0; c < Cb; ++c) dst[c] = c < cvalid ? to_float(src[c * a_.input.strides[1]]) : 0.0f;
        }
      }
      std::memset(in + pixels * Cb, 0, Cb * sizeof(float));
    }
    if (p_.need_ig) {
      ig = mem;
      std::memset(ig, 0, size_t((pixels + 1) * Cb) * sizeof(float));
    }
    TapRemap taps;
    taps.row_rank = row_rank, taps.col_rank = col_rank, taps.cols = cols, taps.sink = pixels;
    run_positions(n0, nl, b, 0, g_.P, in, ig, tile, nullptr, -1, &taps);
    if (!p_.need_ig) return true;
    store_zero_input_grad(n, b, 0, g_.HW);
    T* base = static_cast<T*>(a_.inputGrad.data) + n * a_.inputGrad.strides[0] + c0 * a_.inputGrad.strides[1];
    const float* src = ig;
    for (int64_t y = 0; y < H; ++y) {
      if (row_rank[y] < 0) continue;
      for (int64_t j = 0; j < cols; ++j, src += Cb) {
        T* dst = base + y * ig_plane_.srow + col_list[j] * ig_plane_.scol;
        for (int c = 0; c < cvalid; ++c) dst[c * a_.inputGrad.strides[1]] = from_float<T>(src[c]);
      }
    }
    return true;
  }

  // The input pixel of bicubic tap (row j, column k) of a tile's position q; H * W outside.
  int64_t tap_pixel(const Records& r, int j, int k, int64_t q) const {
    const int32_t row = r.tap_row[j][q], col = r.tap_col[k][q];
    return row >= 0 && col >= 0 ? int64_t(row) + col : g_.HW;
  }

  // Pixel-slot array `field` (4 j + k) of a tile's bicubic records, after the 24 fields.
  int32_t* tap_slots(const Records& r, int field) const {
    return reinterpret_cast<int32_t*>(reinterpret_cast<char*>(r.tap_col[0]) +
                                      (kBicubicRecordFields + field) * p_.rec_array);
  }

  // Phase 2 for one (sample, block) of a bicubic grid with few positions whose tap grid is too
  // big (positions spread over the image, reflected, or a thin image): each pixel the taps
  // reach gets a slot of compact channel-last buffers, in order of first use, as run_compact
  // gives bilinear and nearest; slot 0 is the sink. Each tile's taps are remapped to slots
  // after its records are computed (tile_bicubic<..., Pixels>), so every pixel sums the same
  // values in the same order as in the full buffers (bitwise the same results). The block's
  // inputGrad planes are zeroed and the reached pixels written over them.
  void run_bicubic_pixels(int64_t n0, int64_t nl, int64_t b, float* slot) const {
    const int64_t HW = g_.HW, n = n0 + nl;
    char* at = reinterpret_cast<char*>(slot);
    const auto take = [&](int64_t bytes) {
      char* r = at;
      at += round_up(bytes, kAlign);
      return r;
    };
    int32_t* slot_of = reinterpret_cast<int32_t*>(take(4 * (HW + 1)));
    int32_t* pixel_of = reinterpret_cast<int32_t*>(take(4 * (16 * g_.P + 1)));
    std::memset(slot_of, 0xff, size_t(HW) * sizeof(int32_t));
    slot_of[HW] = 0;
    pixel_of[0] = int32_t(HW);
    int64_t slots = 1;
    float* tile = slot + p_.buffer_bytes / 4;
    for_each_tile_records(n, tile, [&](const Records& own, int64_t len) {
      for (int64_t q = 0; q < len; ++q)
        for (int j = 0; j < 4; ++j)
          for (int k = 0; k < 4; ++k) {
            const int64_t pixel = tap_pixel(own, j, k, q);
            if (slot_of[pixel] < 0) {
              slot_of[pixel] = int32_t(slots);
              pixel_of[slots++] = int32_t(pixel);
            }
          }
    });
    float* in = nullptr;
    float* ig = nullptr;
    if (p_.need_gx) {
      in = reinterpret_cast<float*>(take(slots * Cb * 4));
      gather_slots(n, b, pixel_of, slots, in);
    }
    if (p_.need_ig) {
      ig = reinterpret_cast<float*>(take(slots * Cb * 4));
      std::memset(ig, 0, size_t(slots * Cb) * sizeof(float));
    }
    TapRemap taps;
    taps.slot_of = slot_of, taps.sink = 0;
    run_positions(n0, nl, b, 0, g_.P, in, ig, tile, nullptr, -1, &taps);
    if (p_.need_ig) scatter_slots(n, b, pixel_of, slots, ig);
  }

  // A tile's bicubic records (tap rows as row starts y * W, tap columns as x; -1 outside) as
  // rows and columns of a tap grid, or as pixel slots in the 16 arrays after the records.
  void remap_taps(Records& r, int64_t len, const TapRemap& t) const {
    if (t.slot_of) {
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 4; ++k) {
          int32_t* slots = tap_slots(r, 4 * j + k);
          for (int64_t q = 0; q < len; ++q) slots[q] = t.slot_of[tap_pixel(r, j, k, q)];
        }
      return;
    }
    for (int k = 0; k < 4; ++k)
      for (int64_t q = 0; q < len; ++q) {
        const int32_t row = r.tap_row[k][q], col = r.tap_col[k][q];
        r.tap_row[k][q] = row < 0 ? -1 : int32_t(t.row_rank[row / g_.W] * t.cols);
        r.tap_col[k][q] = col < 0 ? -1 : t.col_rank[col];
      }
  }

  // Pixel rows [lo, hi) of the input that positions [p0, p1) of sample n can reach, with a row
  // to spare on each side: the grid's y values bound them, since every interpolation's taps
  // move monotonically with y (bicubic's reach one row above and two below; border padding
  // clips them into the image), except under reflection padding, which gets every row, as
  // does a NaN.
  RowWindow reachable_rows(int64_t n, int64_t p0, int64_t p1) const {
    const RowWindow all{0, g_.H};
    if (p_.pad == kReflection) return all;
    float lo = INFINITY, hi = -INFINITY;
    bool nan = false;
    alignas(64) float scratch[2 * kTile];
    for (int64_t t0 = p0; t0 < p1; t0 += kTile) {
      const int64_t len = std::min(kTile, p1 - t0);
      y_range(grid_pairs(n, t0, len, scratch), len, &lo, &hi, &nan);
    }
    if (nan || !(lo <= hi)) return all;
    return rows_between(lo, hi);
  }

  // The rows that grid y values in [lo, hi] (not NaN, no reflection) can reach, with a row to
  // spare on each side (see reachable_rows).
  RowWindow rows_between(float lo, float hi) const {
    const Axis& a = g_.ay;
    const auto pixel = [&](float v) {
      return p_.align ? (double(v) + 1.0) * a.scale : (double(v) + 1.0) * a.scale - 0.5;
    };
    const double H = double(g_.H);
    double from = pixel(lo), to = pixel(hi);
    if (p_.pad == kBorder) {
      // Clipped into [0, H - 1] as the records clip them; the taps of a clipped coordinate
      // still reach past it with zero weights (bilinear's row 1 at 0), and a zero weight times
      // a value read is a value read: those rows must be loaded too.
      from = std::min(std::max(from, 0.0), H - 1);
      to = std::min(std::max(to, 0.0), H - 1);
    }
    const double first = std::floor(from) - 2, last = std::floor(to) + 3;  // [first, last)
    return RowWindow{int64_t(std::min(std::max(first, 0.0), H)), int64_t(std::min(std::max(last, 0.0), H))};
  }

  // reachable_rows position by position, as bands: bit k of the result stands for rows
  // [k * band, (k + 1) * band), band = ceil(H / 64). A few positions spread over the image
  // reach a few bands where their one window would be the whole image.
  uint64_t reachable_bands(int64_t n, int64_t p0, int64_t p1, int64_t band) const {
    const int64_t bands = ceil_div(g_.H, band);  // at most 64
    const uint64_t all = bands >= 64 ? ~uint64_t(0) : (uint64_t(1) << bands) - 1;
    if (p_.pad == kReflection) return all;
    uint64_t bits = 0;
    alignas(64) float scratch[2 * kTile];
    for (int64_t t0 = p0; t0 < p1; t0 += kTile) {
      const int64_t len = std::min(kTile, p1 - t0);
      const float* xy = grid_pairs(n, t0, len, scratch);
      for (int64_t q = 0; q < len; ++q) {
        const float y = xy[2 * q + 1];
        if (y != y) return all;
        const RowWindow w = rows_between(y, y);
        if (w.lo >= w.hi) continue;
        const int64_t k0 = w.lo / band, k1 = (w.hi - 1) / band;  // bands [k0, k1]
        bits |= (k1 - k0 >= 63 ? ~uint64_t(0) : (uint64_t(2) << (k1 - k0)) - 1) << k0;
        if ((q & 31) == 31 && (bits & all) == all) return all;  // a spread grid: stop looking
      }
    }
    return bits & all;
  }

  // Phase 2 with positions split into parts: prepare every block, run the parts, then reduce
  // each block's inputGrad parts in part order while writing them out. Each part zeroes and
  // contributes only the rows its positions can reach (its window): a pixel outside a part's
  // window has +0.0 there, and skipping it leaves the part-order sum of the others bitwise as it
  // was (a sum that starts from +0.0 is never -0.0, and x + 0.0 == x for every other x). For
  // near-identity warps split into 2 parts that is a bit over half of each buffer, and a part
  // zeroes its rows in its own task, where they are about to be used. In-process A/B against
  // whole buffers zeroed in the preparing phase, 2 threads: 0.84-1.01x the time (N4 C3 224x224
  // bilinear 0.91-0.94x, N4 C2 128x128 nearest 0.88-0.89x, N1 C12 64x64 -> 128x128 0.87-0.89x;
  // uniformly random grids, whose windows are whole, 0.93-0.96x), one thread 0.93-1.01x. The
  // bounding pass first read the grid through load_grid: 6.7% of the call, more than it saved.
  void run_split(int64_t n0, int64_t nc) {
    const int64_t groups = nc * p_.nblocks, K = p_.parts, bs = buf_stride();
    auto group_mem = [&](int64_t grp) { return reinterpret_cast<float*>(ws_ + p_.group_off + grp * p_.group_bytes); };
    auto group_in = [&](int64_t grp) { return p_.need_gx ? group_mem(grp) : nullptr; };
    auto group_ig = [&](int64_t grp, int64_t k) {
      return p_.need_ig ? group_mem(grp) + (p_.need_gx ? bs : 0) + k * bs : nullptr;
    };
    // Split only when there are fewer blocks than kTargetTasks, each into at most kTargetTasks
    // parts, so groups * K < 2 * kTargetTasks; more would go unwindowed.
    RowWindow windows[2 * kTargetTasks];
    const bool windowed = p_.need_ig && groups * K <= 2 * kTargetTasks;
    run_tasks(groups * K, kMaxSlots, true, [&](int64_t t, int64_t) {
      const int64_t grp = t / K, k = t % K;
      if (k == 0 && p_.need_gx) load_input_block(n0 + grp / p_.nblocks, grp % p_.nblocks, group_in(grp));
      if (windowed) windows[t] = reachable_rows(n0 + grp / p_.nblocks, g_.P * k / K, g_.P * (k + 1) / K);
    });
    if (windowed)
      for (int64_t grp = 0; grp < groups; ++grp) close_windows(windows + grp * K, K);
    run_tasks(groups * K, p_.slots, true, [&](int64_t task, int64_t slot) {
      const int64_t grp = task / K, k = task % K;
      const int64_t p0 = g_.P * k / K, p1 = g_.P * (k + 1) / K;
      if (p_.need_ig) {  // zeroed here, where the part's lines are about to be used
        const RowWindow w = windowed ? windows[task] : RowWindow{0, g_.H};
        float* ig = group_ig(grp, k);
        zero_rows(ig, w);
        zero_sink(ig);
      }
      run_positions(n0, grp / p_.nblocks, grp % p_.nblocks, p0, p1, group_in(grp), group_ig(grp, k),
                    slot_mem(slot));
    });
    if (!p_.need_ig) return;
    const int64_t pieces = ceil_div(g_.HW, 4096);
    run_tasks(groups * pieces, kMaxSlots, true, [&](int64_t t, int64_t) {
      const int64_t grp = t / pieces, piece = t % pieces;
      const int64_t n = n0 + grp / p_.nblocks, b = grp % p_.nblocks;
      const int64_t q0 = piece * 4096, q1 = std::min<int64_t>(g_.HW, q0 + 4096);
      if (!windowed) return store_input_grad(n, b, group_ig(grp, 0), K, q0, q1 - q0);
      const RowWindow* w = windows + grp * K;
      // Pixels between consecutive window edges are reached by the same run of parts.
      int64_t cuts[2 * kTargetTasks + 2];
      int64_t ncuts = 0;
      cuts[ncuts++] = q0;
      cuts[ncuts++] = q1;
      for (int64_t k = 0; k < K; ++k)
        for (const int64_t edge : {w[k].lo * g_.W, w[k].hi * g_.W})
          if (edge > q0 && edge < q1) cuts[ncuts++] = edge;
      sort_few(cuts, ncuts);
      for (int64_t c = 0; c + 1 < ncuts; ++c) {
        const int64_t a = cuts[c], e = cuts[c + 1];
        if (a == e) continue;
        int64_t first = -1, last = -1;
        for (int64_t k = 0; k < K; ++k)
          if (w[k].lo * g_.W <= a && e <= w[k].hi * g_.W) {
            if (first < 0) first = k;
            last = k;
          }
        if (first < 0) {
          store_zero_input_grad(n, b, a, e - a);
        } else {
          store_input_grad(n, b, group_ig(grp, first), last - first + 1, a, e - a);
        }
      }
    });
  }

  // Writes +0.0 to pixels [p0, p0 + len) of channel block b of sample n.
  void store_zero_input_grad(int64_t n, int64_t b, int64_t p0, int64_t len) const {
    const int64_t c0 = b * Cb;
    const int cvalid = int(std::min<int64_t>(Cb, g_.C - c0));
    T* base = static_cast<T*>(a_.inputGrad.data) + n * a_.inputGrad.strides[0] + c0 * a_.inputGrad.strides[1];
    for (int c = 0; c < cvalid; ++c) {
      T* plane = base + c * a_.inputGrad.strides[1];
      if (ig_plane_.flat && ig_plane_.scol == 1) {
        std::memset(static_cast<void*>(plane + p0), 0, size_t(len) * sizeof(T));  // +0.0: all-zero bits
      } else {
        for_each_offset(ig_plane_, p0, len, [&](int64_t, int64_t off) { plane[off] = T{}; });
      }
    }
  }

  // Phase 3: gridGrad = (block partials added in block order) * multiplier.
  void write_grid_grad(int64_t n0, int64_t nc) {
    const int64_t block_stride = g_.P * 2;
    run_chunks(nc * g_.P, kPositionGrain, [&](int64_t begin, int64_t end) {
      alignas(64) float out[2 * kTile];
      for (int64_t i = begin; i < end;) {
        const int64_t nl = i / g_.P, p = i % g_.P;
        const int64_t len = std::min({kTile, end - i, g_.P - p});
        const float* part = partials_ + nl * p_.nblocks * block_stride + 2 * p;
        for (int64_t k = 0; k < 2 * len; ++k) out[k] = part[k];
        for (int64_t b = 1; b < p_.nblocks; ++b)
          for (int64_t k = 0; k < 2 * len; ++k) out[k] += part[b * block_stride + k];
        store_grid_grad(n0 + nl, p, len, out, rec_, i);
        i += len;
      }
    });
  }

  // gridGrad of positions [p, p + len) of sample n from their sums over the channels `out`
  // (x, y side by side; scaled in place); bilinear multipliers from record i of `rec` on.
  void store_grid_grad(int64_t n, int64_t p, int64_t len, float* out, const Records& rec, int64_t i) const {
    if (p_.interp == kBilinear) {
      const float *mx = rec.mult[0] + i, *my = rec.mult[1] + i;
      for (int64_t q = 0; q < len; ++q) {
        out[2 * q] *= mx[q];
        out[2 * q + 1] *= my[q];
      }
    } else {
      const float scale_x = float(g_.ax.scale), scale_y = float(g_.ay.scale);
      for (int64_t q = 0; q < len; ++q) {
        out[2 * q] *= scale_x;
        out[2 * q + 1] *= scale_y;
      }
    }
    T* base = static_cast<T*>(a_.gridGrad.data) + n * a_.gridGrad.strides[0];
    const int64_t sk = a_.gridGrad.strides[3];
    if (gg_plane_.flat && gg_plane_.scol == 2 && sk == 1) {
      simd::convert_from_float(out, base + 2 * p, 2 * len);
    } else {
      T narrow[2 * kTile];
      simd::convert_from_float(out, narrow, 2 * len);
      for_each_offset(gg_plane_, p, len, [&](int64_t q, int64_t off) {
        base[off] = narrow[2 * q];
        base[off + sk] = narrow[2 * q + 1];
      });
    }
  }

  const GridSampler2DBackwardArgs& a_;
  const Plan& p_;
  const Geometry& g_;
  char* ws_;
  Plane go_plane_, in_plane_, grid_plane_, ig_plane_, gg_plane_;
  Records rec_;
  float* partials_ = nullptr;
  RecordFn record_fn_ = nullptr;
  TileFn tile_fn_ = nullptr;
  TileFn pixels_tile_fn_ = nullptr;  // few_bicubic: tile_bicubic on pixel slots
  DirectFn direct_fn_ = nullptr;     // direct: tile_direct
};

template <class T>
void run_typed(const GridSampler2DBackwardArgs& a, const Plan& p, char* ws) {
  if (p.need_gg && !p.need_gx) fill_zero<T>(a.gridGrad);  // nearest: no grid gradient
  if (p.trivial) {
    if (p.need_ig) fill_zero<T>(a.inputGrad);
    if (p.need_gx) fill_zero<T>(a.gridGrad);  // a sum over no channels (or no pixels)
    return;
  }
  switch (p.cb) {
    case 1: Runner<T, 1>(a, p, ws).run(); break;
    case 4: Runner<T, 4>(a, p, ws).run(); break;
    case 8: Runner<T, 8>(a, p, ws).run(); break;
    default: Runner<T, 16>(a, p, ws).run(); break;
  }
}

}  // namespace

uint64_t grid_sampler2d_backward_workspace(const GridSampler2DBackwardArgs& args) {
  const Plan p = make_plan(args);
  return p.trivial ? 0 : uint64_t(p.total);
}

aclnnStatus grid_sampler2d_backward(const GridSampler2DBackwardArgs& args, void* workspace) {
  const Plan p = make_plan(args);
  char* ws = reinterpret_cast<char*>(round_up(reinterpret_cast<intptr_t>(workspace), kAlign));
  switch (args.input.dtype) {
    case DType::Float16: run_typed<half_t>(args, p, ws); break;
    case DType::BFloat16: run_typed<bfloat16_t>(args, p, ws); break;
    default: run_typed<float>(args, p, ws); break;
  }
  return kSuccess;
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
