// GridSampler2DBackward: float64 operands, in double math.
// A part of the kernel ops/grid_sampler2d_backward.cpp, compiled inside it once per ISA level
// (hence the ISA namespace and the anonymous namespace); nothing outside the kernel includes it.
//
// The general path only: one task per sample (its inputGrad sums stay in one thread, in position
// order, so the bits do not depend on the thread count), positions one at a time, channels in
// order, every operand through its strides. The coordinates come from records.h's helpers (the
// lanes of a splat), so the taps land where the fp32 path and PyTorch's float64 kernel put them;
// the gradients are PyTorch's grid_sampler_2d_backward formulas term by term.
#pragma once

#include <cmath>
#include <cstdint>

#include "aclnn_cpu/ops/grid_sampler2d_backward_args.h"
#include "aclnn_cpu/parallel.h"
#include "aclnn_cpu/staging.h"  // kStageMaxSlots
#include "constants.h"
#include "records.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

// One sample's planes and strides, in double.
struct DoubleSample {
  const GridSampler2DBackwardArgs& a;
  const Geometry& g;
  int64_t n;

  double grad_output(int64_t c, int64_t p) const {
    const TensorView& t = a.gradOutput;
    return static_cast<const double*>(t.data)[n * t.strides[0] + c * t.strides[1] + p / g.Wo * t.strides[2] +
                                              p % g.Wo * t.strides[3]];
  }
  double grid(int64_t p, int k) const {
    const TensorView& t = a.grid;
    return static_cast<const double*>(t.data)[n * t.strides[0] + p / g.Wo * t.strides[1] + p % g.Wo * t.strides[2] +
                                              k * t.strides[3]];
  }
  static bool inside(double x, double y, const Geometry& g) { return x >= 0 && x < double(g.W) && y >= 0 && y < double(g.H); }
  // The input value at pixel (x, y) of channel c; 0 outside.
  double value(int64_t c, double x, double y) const {
    if (!inside(x, y, g)) return 0.0;
    const TensorView& t = a.input;
    return static_cast<const double*>(t.data)[n * t.strides[0] + c * t.strides[1] + int64_t(y) * t.strides[2] +
                                              int64_t(x) * t.strides[3]];
  }
  // inputGrad at pixel (x, y) of channel c += v (nothing outside, or without inputGrad).
  void add(int64_t c, double x, double y, double v) const {
    const TensorView& t = a.inputGrad;
    if (!t.present || !inside(x, y, g)) return;
    static_cast<double*>(t.data)[n * t.strides[0] + c * t.strides[1] + int64_t(y) * t.strides[2] +
                                 int64_t(x) * t.strides[3]] += v;
  }
  void set_grid_grad(int64_t p, double gx, double gy) const {
    const TensorView& t = a.gridGrad;
    if (!t.present) return;
    double* at = static_cast<double*>(t.data) + n * t.strides[0] + p / g.Wo * t.strides[1] + p % g.Wo * t.strides[2];
    at[0] = gx;
    at[t.strides[3]] = gy;
  }
  void zero_input_grad() const {
    const TensorView& t = a.inputGrad;
    if (!t.present) return;
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t y = 0; y < g.H; ++y)
        for (int64_t x = 0; x < g.W; ++x)
          static_cast<double*>(t.data)[n * t.strides[0] + c * t.strides[1] + y * t.strides[2] + x * t.strides[3]] = 0.0;
  }
};

// records.h's vector helpers on one value (lane 0 of a splat).
template <int Pad, bool Align>
double mapped(double x, const Axis& a) {
  return map_coordinate<Pad, Align>(splat(x), a)[0];
}

template <int Interp, int Pad, bool Align>
void backward_sample_double(const DoubleSample& s) {
  const Geometry& g = s.g;
  s.zero_input_grad();
  for (int64_t p = 0; p < g.P; ++p) {
    const double gx = s.grid(p, 0), gy = s.grid(p, 1);
    if (Interp == kNearest) {
      const double x = vround_even(splat(mapped<Pad, Align>(unnormalize<Align>(splat(gx), g.ax)[0], g.ax)))[0];
      const double y = vround_even(splat(mapped<Pad, Align>(unnormalize<Align>(splat(gy), g.ay)[0], g.ay)))[0];
      for (int64_t c = 0; c < g.C; ++c) s.add(c, x, y, s.grad_output(c, p));
      s.set_grid_grad(p, 0.0, 0.0);
    } else if (Interp == kBilinear) {
      DV mx, my;
      const double x = bilinear_coordinate<Pad, Align>(splat(gx), g.ax, &mx)[0];
      const double y = bilinear_coordinate<Pad, Align>(splat(gy), g.ay, &my)[0];
      const double x0 = std::floor(x), y0 = std::floor(y);
      const double w = x - x0, e = 1.0 - w, nn = y - y0, ss = 1.0 - nn;
      double gix = 0.0, giy = 0.0;
      for (int64_t c = 0; c < g.C; ++c) {
        const double go = s.grad_output(c, p);
        s.add(c, x0, y0, e * ss * go);
        s.add(c, x0 + 1, y0, w * ss * go);
        s.add(c, x0, y0 + 1, e * nn * go);
        s.add(c, x0 + 1, y0 + 1, w * nn * go);
        const double nw = s.value(c, x0, y0), ne = s.value(c, x0 + 1, y0);
        const double sw = s.value(c, x0, y0 + 1), se = s.value(c, x0 + 1, y0 + 1);
        gix -= nw * ss * go;
        gix += ne * ss * go;
        gix -= sw * nn * go;
        gix += se * nn * go;
        giy -= nw * e * go;
        giy -= ne * w * go;
        giy += sw * e * go;
        giy += se * w * go;
      }
      s.set_grid_grad(p, mx[0] * gix, my[0] * giy);
    } else {
      const double x = unnormalize<Align>(splat(gx), g.ax)[0], y = unnormalize<Align>(splat(gy), g.ay)[0];
      const double x0 = std::floor(x), y0 = std::floor(y);
      DV cwx[4], cwy[4], csx[4], csy[4];  // lane 0 of each: the weights and slopes of the 4 taps
      cubic_weights(splat(x - x0), cwx);
      cubic_weights(splat(y - y0), cwy);
      cubic_weight_slopes(splat(x - x0), csx);
      cubic_weight_slopes(splat(y - y0), csy);
      double tx[4], ty[4];
      for (int k = 0; k < 4; ++k) {  // each tap padded on its own
        tx[k] = mapped<Pad, Align>(x0 + double(k - 1), g.ax);
        ty[k] = mapped<Pad, Align>(y0 + double(k - 1), g.ay);
      }
      double gix = 0.0, giy = 0.0;
      for (int64_t c = 0; c < g.C; ++c) {
        const double go = s.grad_output(c, p);
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) {
            s.add(c, tx[i], ty[j], go * cwx[i][0] * cwy[j][0]);
            const double v = s.value(c, tx[i], ty[j]);
            gix -= v * csx[i][0] * cwy[j][0] * go;
            giy -= v * csy[j][0] * cwx[i][0] * go;
          }
      }
      s.set_grid_grad(p, g.ax.scale * gix, g.ay.scale * giy);
    }
  }
}

using DoubleSampleFn = void (*)(const DoubleSample&);

template <int Interp>
DoubleSampleFn pick_double_fn(int64_t pad, bool align) {
  switch (pad) {
    case kBorder: return align ? backward_sample_double<Interp, kBorder, true> : backward_sample_double<Interp, kBorder, false>;
    case kReflection:
      return align ? backward_sample_double<Interp, kReflection, true>
                   : backward_sample_double<Interp, kReflection, false>;
    default: return align ? backward_sample_double<Interp, kZeros, true> : backward_sample_double<Interp, kZeros, false>;
  }
}

// Both gradients of float64 operands: one task per sample.
void run_double(const GridSampler2DBackwardArgs& a) {
  const Geometry g = make_geometry(a.input, a.grid, a.alignCorners);
  const int64_t pad = a.paddingMode;
  const bool align = a.alignCorners;
  const DoubleSampleFn fn = a.interpolationMode == kNearest   ? pick_double_fn<kNearest>(pad, align)
                            : a.interpolationMode == kBicubic ? pick_double_fn<kBicubic>(pad, align)
                                                              : pick_double_fn<kBilinear>(pad, align);
  parallel_tasks(g.N, kStageMaxSlots, [&](int64_t n, int64_t) { fn(DoubleSample{a, g, n}); });
}

}  // namespace
}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
