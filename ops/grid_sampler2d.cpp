// aclnnGridSampler2D kernel: out[n, c, h, w] = input[n, c] sampled at grid[n, h, w], as
// PyTorch's CPU grid_sample computes it.
//
// Layout of the work. Every output position maps to the same source pixels for all channels,
// so a tile of kTile positions first gets its "taps": the pixels it reads (the spare pixel H*W
// where a tap lies outside the input) and their weights, computed in double with the
// coordinate helpers of the backward kernel (grid_sampler2d_backward/records.h: unnormalize,
// clip, reflect, round half to even, floor, the cubic weights), so both directions place every
// tap where PyTorch's float64 kernel does. The channels go in blocks of Cb lanes: a block's input
// planes are transposed into a channel-last fp32 buffer [H*W + 1][Cb] whose spare pixel is
// zero, a tap of a position is then one short vector, and a tile's samples [kTile][Cb] are
// transposed back into out's planes (the backward's transposes, channel_layout.h, which also
// take strided and channels-last operands, NHWC pixels as whole vector runs).
//
// Work split. A "unit" is one sample's block group (the blocks whose buffers fit kUnitBudget).
// With enough units each thread loads a unit into its slot of the workspace and samples all
// its positions; with fewer, all threads load one unit into slot 0 (pixel ranges), then share
// its position tiles. Every output element is computed by one thread in a fixed order, so the
// results are bitwise the same for any thread count and either split.
//
// Numbers. fp32 storage and the 16-bit types: weights rounded once from double to fp32, sums
// in fp32 (bilinear nw, ne, sw, se in that order; bicubic along x in each row, then the rows
// along y, as PyTorch adds them), one rounding to the output type. float64: the same taps with
// double weights, summed in double straight from the planes (any strides).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "aclnn_cpu/ops/grid_sampler2d_args.h"
#include "aclnn_cpu/parallel.h"
#include "aclnn_cpu/simd.h"
#include "aclnn_cpu/staging.h"  // staged_slots

// The backward kernel's coordinate math and transposes (header-only parts of that kernel);
// the functions of theirs this kernel does not call are not an error here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "grid_sampler2d_backward/channel_layout.h"
#include "grid_sampler2d_backward/records.h"
#pragma GCC diagnostic pop

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

constexpr int kMaxTaps = 16;
// One unit's channel-last buffers: at most this many bytes (one block may exceed it alone).
// A sample of up to 256 channels of 64 x 64 pixels is one unit: shared by the threads, each
// unit costs two parallel regions, and with more processes than cores a region can wait a
// scheduler slice for a thread (N1 C256 64x64 -> 128x128 split in two units took 0.1 s then).
constexpr int64_t kUnitBudget = 16 << 20;
// Pixels of a block one thread loads in the shared split: a one-channel 224 x 224 plane loads
// on the calling thread, one parallel region fewer (each can wait a scheduler slice for a
// thread on a busy machine).
constexpr int64_t kLoadGrain = 64 << 10;

// The taps of a tile of positions: pixel indices of the input plane (H * W: outside) and
// weights. Bilinear: pixel[0..3] = nw, ne, sw, se, weight[0..3] theirs; nearest: pixel[0];
// bicubic: pixel[4 * j + k] = row j, column k of the 4 x 4 taps, weight[k] along x and
// weight[4 + j] along y.
template <class W>
struct Taps {
  alignas(64) int32_t pixel[kMaxTaps][kTile];
  alignas(64) W weight[8][kTile];
};

template <class W>
ACLNN_ALWAYS_INLINE void store_weight(W* dst, const DV& v, int count) {
  if constexpr (std::is_same<W, float>::value) {
    store_n(dst, to_fv(v), count);
  } else {
    store_n(dst, v, count);
  }
}

// Lanes of v in [lo, hi) (NaN is outside), and the pixel index of the lanes kept, the sink in the
// others: mask registers on AVX-512, comparison vectors below (GCC expanded the selects of
// computed comparison vectors lane by lane on AVX-512, and of masks kept in arrays on SSE2).
#if ACLNN_ISA_LEVEL == 2
typedef __mmask8 Inside;
ACLNN_ALWAYS_INLINE Inside within(const DV& v, double lo, double hi) { return in_range(v, lo, hi); }
ACLNN_ALWAYS_INLINE IV pixel_or_sink(Inside k, const DV& pixel, const Geometry& g) {
  return keep(k, to_i32(pixel), IV{} + int32_t(g.HW));
}
#else
typedef MV Inside;
ACLNN_ALWAYS_INLINE Inside within(const DV& v, double lo, double hi) { return (v >= lo) & (v < hi); }
ACLNN_ALWAYS_INLINE IV pixel_or_sink(const Inside& k, const DV& pixel, const Geometry& g) {
  return to_iv(vsel(k, pixel, splat(double(g.HW))));
}
#endif

// Taps of positions [0, len) from their grid values (padded with zeros to a multiple of kVec).
template <int Interp, int Pad, bool Align, class W>
void fill_taps(const Geometry& g, const double* gxv, const double* gyv, int64_t len, Taps<W>& t) {
  const double Wd = double(g.W), Hd = double(g.H);
  for (int64_t q = 0; q < len; q += kVec) {
    const int cnt = int(std::min<int64_t>(kVec, len - q));
    const DV gx = load_v(gxv + q), gy = load_v(gyv + q);
    if (Interp == kNearest) {
      const DV x = vround_even(map_coordinate<Pad, Align>(unnormalize<Align>(gx, g.ax), g.ax));
      const DV y = vround_even(map_coordinate<Pad, Align>(unnormalize<Align>(gy, g.ay), g.ay));
      store_n(t.pixel[0] + q, pixel_or_sink(within(x, 0.0, Wd) & within(y, 0.0, Hd), y * Wd + x, g), cnt);
    } else if (Interp == kBilinear) {
      const DV x = map_coordinate<Pad, Align>(unnormalize<Align>(gx, g.ax), g.ax);
      const DV y = map_coordinate<Pad, Align>(unnormalize<Align>(gy, g.ay), g.ay);
      const DV x0 = vfloor(x), y0 = vfloor(y);
      const DV w = x - x0, e = 1.0 - w, n = y - y0, s = 1.0 - n;
      // Validity in floating point (NaN and huge coordinates are outside); indices of valid
      // taps are integers below 2^31, exact in double.
      const Inside left = within(x0, 0.0, Wd), right = within(x0, -1.0, Wd - 1);
      const Inside top = within(y0, 0.0, Hd), bottom = within(y0, -1.0, Hd - 1);
      const DV nw = y0 * Wd + x0;
      store_n(t.pixel[0] + q, pixel_or_sink(left & top, nw, g), cnt);
      store_n(t.pixel[1] + q, pixel_or_sink(right & top, nw + 1.0, g), cnt);
      store_n(t.pixel[2] + q, pixel_or_sink(left & bottom, nw + Wd, g), cnt);
      store_n(t.pixel[3] + q, pixel_or_sink(right & bottom, nw + (Wd + 1.0), g), cnt);
      store_weight(t.weight[0] + q, e * s, cnt);
      store_weight(t.weight[1] + q, w * s, cnt);
      store_weight(t.weight[2] + q, e * n, cnt);
      store_weight(t.weight[3] + q, w * n, cnt);
    } else {
      const DV x = unnormalize<Align>(gx, g.ax), y = unnormalize<Align>(gy, g.ay);
      const DV x0 = vfloor(x), y0 = vfloor(y);
      DV wx[4], wy[4], col[4], row[4];
      cubic_weights(x - x0, wx);
      cubic_weights(y - y0, wy);
      for (int k = 0; k < 4; ++k) {  // each tap padded on its own, as PyTorch does
        col[k] = map_coordinate<Pad, Align>(x0 + double(k - 1), g.ax);
        row[k] = map_coordinate<Pad, Align>(y0 + double(k - 1), g.ay);
        store_weight(t.weight[k] + q, wx[k], cnt);
        store_weight(t.weight[4 + k] + q, wy[k], cnt);
      }
      for (int j = 0; j < 4; ++j) {
        const Inside row_in = within(row[j], 0.0, Hd);
        for (int k = 0; k < 4; ++k)
          store_n(t.pixel[4 * j + k] + q, pixel_or_sink(row_in & within(col[k], 0.0, Wd), row[j] * Wd + col[k], g), cnt);
      }
    }
  }
}

template <class W>
using TapsFn = void (*)(const Geometry&, const double*, const double*, int64_t, Taps<W>&);

template <int Interp, class W>
TapsFn<W> pick_taps_fn(int64_t pad, bool align) {
  switch (pad) {
    case kBorder: return align ? fill_taps<Interp, kBorder, true, W> : fill_taps<Interp, kBorder, false, W>;
    case kReflection:
      return align ? fill_taps<Interp, kReflection, true, W> : fill_taps<Interp, kReflection, false, W>;
    default: return align ? fill_taps<Interp, kZeros, true, W> : fill_taps<Interp, kZeros, false, W>;
  }
}

template <class W>
TapsFn<W> pick_taps_fn(int64_t interp, int64_t pad, bool align) {
  if (interp == kNearest) return pick_taps_fn<kNearest, W>(pad, align);
  if (interp == kBicubic) return pick_taps_fn<kBicubic, W>(pad, align);
  return pick_taps_fn<kBilinear, W>(pad, align);
}

template <class T>
ACLNN_ALWAYS_INLINE double as_double(T v) {
  if constexpr (std::is_same<T, double>::value) {
    return v;
  } else {
    return double(to_float(v));
  }
}

// gx, gy = the grid values of positions [p, p + len) of sample n (len <= kTile), padded with
// zeros to a multiple of kLanes.
template <class T>
void load_grid(const TensorView& grid, const Plane& pl, int64_t n, int64_t p, int64_t len, double* gx, double* gy) {
  const T* base = static_cast<const T*>(grid.data) + n * grid.strides[0];
  const int64_t sk = grid.strides[3];
  int64_t q = 0;
  if constexpr (!std::is_same<T, double>::value) {
    // (x, y) pairs side by side: a register of them at a time, widened and split into x and y
    // (one at a time, the loads and conversions took a fifth of a one-channel nearest call).
    if (pl.flat && pl.scol == 2 && sk == 1) {
      const T* pairs = base + 2 * p;
      for (; q + kVec <= len; q += kVec) {
        const simd::VecF v = simd::load(pairs + 2 * q);
#if ACLNN_ISA_LEVEL == 2
        const FV x = __builtin_shufflevector(v, v, 0, 2, 4, 6, 8, 10, 12, 14);
        const FV y = __builtin_shufflevector(v, v, 1, 3, 5, 7, 9, 11, 13, 15);
        store_n(gx + q, __builtin_convertvector(x, DV), kVec);
        store_n(gy + q, __builtin_convertvector(y, DV), kVec);
#elif ACLNN_ISA_LEVEL == 1
        const FV x = __builtin_shufflevector(v, v, 0, 2, 4, 6), y = __builtin_shufflevector(v, v, 1, 3, 5, 7);
        store_n(gx + q, __builtin_convertvector(x, DV), kVec);
        store_n(gy + q, __builtin_convertvector(y, DV), kVec);
#elif ACLNN_SIMD_X86  // (2 floats are half an SSE register: GCC converted them one by one)
        const __m128 xy = (__m128)v;
        _mm_storeu_pd(gx + q, _mm_cvtps_pd(_mm_shuffle_ps(xy, xy, _MM_SHUFFLE(2, 0, 2, 0))));
        _mm_storeu_pd(gy + q, _mm_cvtps_pd(_mm_shuffle_ps(xy, xy, _MM_SHUFFLE(3, 1, 3, 1))));
#else
        break;
#endif
      }
    }
  }
  for_each_offset(pl, p + q, len - q, [&](int64_t i, int64_t off) {
    gx[q + i] = as_double(base[off]);
    gy[q + i] = as_double(base[off + sk]);
  });
  for (int64_t i = len; i < round_up(len, kLanes); ++i) gx[i] = gy[i] = 0.0;
}

// ---------------------------------------------------------------------------------------------
// fp32 math on channel-last buffers (float32, float16, bfloat16 storage).

// Channels per block: one register of the level at most; the narrowest that holds C, else a
// whole register. One channel is a plain plane.
int block_width(int64_t C) {
  if (C == 1) return 1;
  for (const int w : {4, 8, 16})
    if (w <= simd::kWidth && C <= w) return w;
  return simd::kWidth;
}

struct Plan {
  Geometry g;
  bool empty = false;
  int cb = 1;
  int64_t nblocks = 0, group = 1, ngroups = 1, units = 0;
  int64_t block_floats = 0;  // one block's buffer, (H*W + 1) * cb floats, whole lines
  int64_t unit_bytes = 0, slots = 1;
  int64_t total = 0;
};

Plan make_plan(const GridSampler2DArgs& a) {
  Plan p;
  p.g = make_geometry(a.input, a.grid, a.alignCorners);
  const Geometry& g = p.g;
  p.empty = a.out.numel() == 0;
  if (p.empty || a.input.dtype == DType::Float64) return p;
  p.cb = block_width(g.C);
  p.nblocks = ceil_div(g.C, p.cb);
  p.block_floats = round_up((g.HW + 1) * p.cb * 4, kAlign) / 4;
  const int64_t block_bytes = p.block_floats * 4;
  p.ngroups = std::min(p.nblocks, std::max<int64_t>(1, ceil_div(p.nblocks * block_bytes, kUnitBudget)));
  p.group = ceil_div(p.nblocks, p.ngroups);
  p.ngroups = ceil_div(p.nblocks, p.group);
  p.units = g.N * p.ngroups;
  p.unit_bytes = p.group * block_bytes;
  p.slots = staged_slots(p.units, uint64_t(p.unit_bytes));  // the shared rule: threads, budget
  p.total = p.slots * p.unit_bytes + kAlign;  // (+ the base's alignment)
  return p;
}

template <int Cb>
struct Lanes {
  typedef float type __attribute__((vector_size(Cb * sizeof(float))));
};
template <>
struct Lanes<1> {
  typedef float type;
};

template <int Cb>
ACLNN_ALWAYS_INLINE typename Lanes<Cb>::type tap(const float* buf, int32_t pixel) {
  typename Lanes<Cb>::type v;
  std::memcpy(&v, buf + int64_t(pixel) * Cb, sizeof v);
  return v;
}

// tile[q * Cb + c] = the sample of position q in lane c of the block buffer `buf`, for
// positions [q0, len).
template <int Interp, int Cb>
void sample_positions(const Taps<float>& t, int64_t q0, int64_t len, const float* buf, float* tile) {
  using V = typename Lanes<Cb>::type;
  for (int64_t q = q0; q < len; ++q) {
    V v;
    if (Interp == kNearest) {
      v = tap<Cb>(buf, t.pixel[0][q]);
    } else if (Interp == kBilinear) {
      v = tap<Cb>(buf, t.pixel[0][q]) * t.weight[0][q] + tap<Cb>(buf, t.pixel[1][q]) * t.weight[1][q] +
          tap<Cb>(buf, t.pixel[2][q]) * t.weight[2][q] + tap<Cb>(buf, t.pixel[3][q]) * t.weight[3][q];
    } else {
      for (int j = 0; j < 4; ++j) {
        const int32_t* px = &t.pixel[4 * j][0];
        const V row = tap<Cb>(buf, px[q]) * t.weight[0][q] + tap<Cb>(buf, px[kTile + q]) * t.weight[1][q] +
                      tap<Cb>(buf, px[2 * kTile + q]) * t.weight[2][q] +
                      tap<Cb>(buf, px[3 * kTile + q]) * t.weight[3][q];
        v = j == 0 ? row * t.weight[4][q] : v + row * t.weight[4 + j][q];
      }
    }
    std::memcpy(tile + q * Cb, &v, sizeof v);
  }
}

#if ACLNN_SIMD_X86 && ACLNN_ISA_LEVEL >= 1
// The taps of kWidth positions of a one-channel buffer, gathered.
ACLNN_ALWAYS_INLINE simd::VecF gather(const float* buf, const int32_t* pixels) {
#if ACLNN_ISA_LEVEL == 2
  return (simd::VecF)_mm512_i32gather_ps(_mm512_loadu_si512(pixels), buf, 4);
#else
  return (simd::VecF)_mm256_i32gather_ps(buf, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pixels)), 4);
#endif
}
#endif

// sample_positions of a whole tile. One channel (a plain plane): the positions are the lanes,
// their taps gathered, the same products and sums in the same order (so the same bits), where
// the level has gathers (one position at a time took 1.1x PyTorch's time, N1 C1 224x224).
template <int Interp, int Cb>
void sample_tile(const Taps<float>& t, int64_t len, const float* buf, float* tile) {
  int64_t q = 0;
#if ACLNN_SIMD_X86 && ACLNN_ISA_LEVEL >= 1
  if constexpr (Cb == 1) {
    using simd::VecF;
    const auto weight = [&](int k) { return simd::load(t.weight[k] + q); };
    for (; q + simd::kWidth <= len; q += simd::kWidth) {
      VecF v;
      if (Interp == kNearest) {
        v = gather(buf, t.pixel[0] + q);
      } else if (Interp == kBilinear) {
        v = gather(buf, t.pixel[0] + q) * weight(0) + gather(buf, t.pixel[1] + q) * weight(1) +
            gather(buf, t.pixel[2] + q) * weight(2) + gather(buf, t.pixel[3] + q) * weight(3);
      } else {
        for (int j = 0; j < 4; ++j) {
          const VecF row = gather(buf, t.pixel[4 * j] + q) * weight(0) + gather(buf, t.pixel[4 * j + 1] + q) * weight(1) +
                           gather(buf, t.pixel[4 * j + 2] + q) * weight(2) +
                           gather(buf, t.pixel[4 * j + 3] + q) * weight(3);
          v = j == 0 ? row * weight(4) : v + row * weight(4 + j);
        }
      }
      simd::store(tile + q, v);
    }
  }
#endif
  sample_positions<Interp, Cb>(t, q, len, buf, tile);
}

template <int Cb>
using SampleFn = void (*)(const Taps<float>&, int64_t, const float*, float*);

template <int Cb>
SampleFn<Cb> pick_sample_fn(int64_t interp) {
  if (interp == kNearest) return sample_tile<kNearest, Cb>;
  if (interp == kBicubic) return sample_tile<kBicubic, Cb>;
  return sample_tile<kBilinear, Cb>;
}

template <class T, int Cb>
class Runner {
 public:
  Runner(const GridSampler2DArgs& a, const Plan& p, char* ws) : a_(a), p_(p), g_(p.g), ws_(ws) {
    in_plane_ = make_plane(g_.H, g_.W, a.input.strides[2], a.input.strides[3]);
    out_plane_ = make_plane(g_.Ho, g_.Wo, a.out.strides[2], a.out.strides[3]);
    grid_plane_ = make_plane(g_.Ho, g_.Wo, a.grid.strides[1], a.grid.strides[2]);
    taps_fn_ = pick_taps_fn<float>(a.interpolationMode, a.paddingMode, a.alignCorners);
    sample_fn_ = pick_sample_fn<Cb>(a.interpolationMode);
  }

  void run() {
    const int64_t threads = num_threads();
    if (p_.units >= 2 * threads && p_.slots >= threads) {
      parallel_tasks(p_.units, p_.slots, [&](int64_t unit, int64_t slot) { run_unit_alone(unit, slot_mem(slot)); });
    } else {
      for (int64_t unit = 0; unit < p_.units; ++unit) run_unit_shared(unit, slot_mem(0));
    }
  }

 private:
  float* slot_mem(int64_t slot) const { return reinterpret_cast<float*>(ws_ + slot * p_.unit_bytes); }
  int64_t first_block(int64_t unit) const { return unit % p_.ngroups * p_.group; }
  int64_t end_block(int64_t unit) const { return std::min(p_.nblocks, first_block(unit) + p_.group); }

  // Pixels [p0, p0 + len) of channel block b of sample n into its buffer (at pixel p0 of buf).
  void load_pixels(int64_t n, int64_t b, float* buf, int64_t p0, int64_t len) const {
    const int64_t c0 = b * Cb;
    const int cvalid = int(std::min<int64_t>(Cb, g_.C - c0));
    const T* base = static_cast<const T*>(a_.input.data) + n * a_.input.strides[0] + c0 * a_.input.strides[1];
    load_channels<T, Cb>(base, a_.input.strides[1], cvalid, in_plane_, p0, len, buf + p0 * Cb);
  }

  void zero_spare(float* buf) const { std::memset(buf + g_.HW * Cb, 0, Cb * sizeof(float)); }

  // One thread: the unit's blocks into `mem`, then all its positions.
  void run_unit_alone(int64_t unit, float* mem) const {
    const int64_t n = unit / p_.ngroups, b0 = first_block(unit), b1 = end_block(unit);
    for (int64_t b = b0; b < b1; ++b) {
      float* buf = mem + (b - b0) * p_.block_floats;
      load_pixels(n, b, buf, 0, g_.HW);
      zero_spare(buf);
    }
    for (int64_t t0 = 0; t0 < g_.P; t0 += kTile) run_tile(n, b0, b1, mem, t0, std::min(kTile, g_.P - t0));
  }

  // All threads: the unit's blocks into `mem` by pixel ranges, then its position tiles.
  void run_unit_shared(int64_t unit, float* mem) const {
    const int64_t n = unit / p_.ngroups, b0 = first_block(unit), b1 = end_block(unit);
    const int64_t pieces = ceil_div(g_.HW, kLoadGrain);
    parallel_tasks((b1 - b0) * pieces, kStageMaxSlots, [&](int64_t task, int64_t) {
      const int64_t b = b0 + task / pieces, p0 = task % pieces * kLoadGrain;
      float* buf = mem + (b - b0) * p_.block_floats;
      load_pixels(n, b, buf, p0, std::min(kLoadGrain, g_.HW - p0));
      if (p0 == 0) zero_spare(buf);
    });
    parallel_tasks(ceil_div(g_.P, kTile), kStageMaxSlots, [&](int64_t tile, int64_t) {
      const int64_t t0 = tile * kTile;
      run_tile(n, b0, b1, mem, t0, std::min(kTile, g_.P - t0));
    });
  }

  // Positions [t0, t0 + len) of sample n, blocks [b0, b1) (their buffers from mem on).
  void run_tile(int64_t n, int64_t b0, int64_t b1, const float* mem, int64_t t0, int64_t len) const {
    alignas(64) double gx[kTile], gy[kTile];
    alignas(64) Taps<float> taps;
    alignas(64) float tile[kTile * Cb];
    load_grid<T>(a_.grid, grid_plane_, n, t0, len, gx, gy);
    taps_fn_(g_, gx, gy, len, taps);
    // store_channels reads pixel p of its source at src + p * Cb: the tile holds from t0 on.
    const float* src = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(tile) - uintptr_t(t0 * Cb) * 4);
    for (int64_t b = b0; b < b1; ++b) {
      sample_fn_(taps, len, mem + (b - b0) * p_.block_floats, tile);
      const int64_t c0 = b * Cb;
      const int cvalid = int(std::min<int64_t>(Cb, g_.C - c0));
      T* out = static_cast<T*>(a_.out.data) + n * a_.out.strides[0] + c0 * a_.out.strides[1];
      store_channels<T, Cb, false>(src, 1, 0, cvalid, out, a_.out.strides[1], out_plane_, t0, len, false);
    }
  }

  const GridSampler2DArgs& a_;
  const Plan& p_;
  const Geometry& g_;
  char* ws_;
  Plane in_plane_, out_plane_, grid_plane_;
  TapsFn<float> taps_fn_ = nullptr;
  SampleFn<Cb> sample_fn_ = nullptr;
};

// Blocks wider than the level's registers are never planned (block_width), so not compiled.
template <class T, int Cb>
void run_blocks(const GridSampler2DArgs& a, const Plan& p, char* ws) {
  if constexpr (Cb <= simd::kWidth) Runner<T, Cb>(a, p, ws).run();
}

template <class T>
void run_typed(const GridSampler2DArgs& a, const Plan& p, char* ws) {
  switch (p.cb) {
    case 1: run_blocks<T, 1>(a, p, ws); break;
    case 4: run_blocks<T, 4>(a, p, ws); break;
    case 8: run_blocks<T, 8>(a, p, ws); break;
    default: run_blocks<T, 16>(a, p, ws); break;
  }
}

// ---------------------------------------------------------------------------------------------
// float64: double math, straight from the planes through their strides.

constexpr int64_t kOutside = INT64_MIN;  // a tap's offset outside the input (offsets may be negative)

void run_double(const GridSampler2DArgs& a, const Geometry& g) {
  const Plane grid_plane = make_plane(g.Ho, g.Wo, a.grid.strides[1], a.grid.strides[2]);
  const Plane out_plane = make_plane(g.Ho, g.Wo, a.out.strides[2], a.out.strides[3]);
  const TapsFn<double> taps_fn = pick_taps_fn<double>(a.interpolationMode, a.paddingMode, a.alignCorners);
  const int ntaps = a.interpolationMode == kNearest ? 1 : 4;
  const int64_t tiles = ceil_div(g.P, kTile);
  parallel_tasks(g.N * tiles, kStageMaxSlots, [&](int64_t task, int64_t) {
    const int64_t n = task / tiles, t0 = task % tiles * kTile, len = std::min(kTile, g.P - t0);
    alignas(64) double gx[kTile], gy[kTile];
    alignas(64) Taps<double> taps;
    int64_t offset[kMaxTaps][kTile];  // element offset of each tap in a plane; kOutside outside
    load_grid<double>(a.grid, grid_plane, n, t0, len, gx, gy);
    taps_fn(g, gx, gy, len, taps);
    for (int k = 0; k < ntaps; ++k)
      for (int64_t q = 0; q < len; ++q) {
        const int64_t pixel = taps.pixel[k][q];
        offset[k][q] = pixel == g.HW ? kOutside : pixel / g.W * a.input.strides[2] + pixel % g.W * a.input.strides[3];
      }
    int64_t out_off[kTile];
    for_each_offset(out_plane, t0, len, [&](int64_t q, int64_t off) { out_off[q] = off; });
    for (int64_t c = 0; c < g.C; ++c) {
      const double* in = static_cast<const double*>(a.input.data) + n * a.input.strides[0] + c * a.input.strides[1];
      double* out = static_cast<double*>(a.out.data) + n * a.out.strides[0] + c * a.out.strides[1];
      const auto value = [&](int k, int64_t q) { return offset[k][q] == kOutside ? 0.0 : in[offset[k][q]]; };
      for (int64_t q = 0; q < len; ++q) {
        double v;
        if (ntaps == 1) {
          v = value(0, q);
        } else {  // bilinear (the rules refuse bicubic with float64)
          v = value(0, q) * taps.weight[0][q] + value(1, q) * taps.weight[1][q] + value(2, q) * taps.weight[2][q] +
              value(3, q) * taps.weight[3][q];
        }
        out[out_off[q]] = v;
      }
    }
  });
}

}  // namespace

uint64_t grid_sampler2d_workspace(const GridSampler2DArgs& args) {
  const Plan p = make_plan(args);
  return p.empty ? 0 : uint64_t(p.total);
}

aclnnStatus grid_sampler2d(const GridSampler2DArgs& args, void* workspace) {
  const Plan p = make_plan(args);
  if (p.empty) return kSuccess;
  char* ws = reinterpret_cast<char*>(round_up(reinterpret_cast<intptr_t>(workspace), kAlign));
  switch (args.input.dtype) {
    case DType::Float64: run_double(args, p.g); break;
    case DType::Float16: run_typed<half_t>(args, p, ws); break;
    case DType::BFloat16: run_typed<bfloat16_t>(args, p, ws); break;
    default: run_typed<float>(args, p, ws); break;
  }
  return kSuccess;
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
