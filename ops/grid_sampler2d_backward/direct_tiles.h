// GridSampler2DBackward: the direct tiles, up to 4 channels on their planes themselves.
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
#include "tiles.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

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

// T: the storage type of gradOutput planes that bilinear tiles read in place (tile_reads_planes).
template <class T, int Cb, bool NeedIg, bool NeedGx>
TileFn pick_tile_fn(int64_t interp) {
  if (interp == kNearest) return tile_nearest<Cb, NeedIg, NeedGx>;
  if (interp == kBicubic) return tile_bicubic<Cb, NeedIg, NeedGx>;
  if constexpr (tile_reads_planes<Cb>()) return tile_bilinear<Cb, NeedIg, NeedGx, T>;
  return tile_bilinear<Cb, NeedIg, NeedGx>;
}

template <int Cb>
TileFn pick_bicubic_pixels_fn(bool need_ig, bool need_gx) {
  if (need_ig && need_gx) return tile_bicubic<Cb, true, true, true>;
  if (need_ig) return tile_bicubic<Cb, true, false, true>;
  return tile_bicubic<Cb, false, true, true>;
}

// Bilinear tiles on framed buffers and records (Plan::framed).
template <class T, int Cb>
TileFn pick_framed_tile_fn(bool need_ig, bool need_gx) {
  using G = std::conditional_t<tile_reads_planes<Cb>(), T, float>;
  if (need_ig && need_gx) return tile_bilinear<Cb, true, true, G, true>;
  if (need_ig) return tile_bilinear<Cb, true, false, G, true>;
  return tile_bilinear<Cb, false, true, G, true>;
}

template <class T, int Cb>
TileFn pick_tile_fn(int64_t interp, bool need_ig, bool need_gx) {
  if (need_ig && need_gx) return pick_tile_fn<T, Cb, true, true>(interp);
  if (need_ig) return pick_tile_fn<T, Cb, true, false>(interp);
  return pick_tile_fn<T, Cb, false, true>(interp);
}

}  // namespace
}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
