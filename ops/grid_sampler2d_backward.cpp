// aclnnGridSampler2DBackward kernel: the gradients of grid_sample (2-D) with respect to input
// and grid, as PyTorch's CPU grid_sampler_2d_backward computes them.
//
// Layout of the work. Every output position (n, ho, wo) maps to the same source pixels for all
// channels, so its coordinates, weights, corner indices and clip/reflect gradient multipliers
// are computed in double into per-position "records" that every channel of a block reuses:
// for a tile of positions just before the tile runs (bilinear with up to kTileRecordBlocks
// blocks, and bicubic: once per block), or for a chunk of samples, once for all blocks (phase
// 1, or nearest's whole-sample tasks; nearest, and bilinear with more blocks). Channels are
// handled in blocks of Cb (4, 8 or 16 lanes, chosen from C; a single channel takes one lane,
// so its buffers are plain planes): a block's input planes are transposed into a channel-last fp32
// buffer [H*W + 1][Cb], so one source pixel of the block is one short vector
// and the per-position work (scatter-add into inputGrad, gather of input values for gridGrad)
// is plain vector arithmetic without gathers or scatters (phase 2). Row H*W is a spare pixel:
// zero in the input buffer, a sink in the inputGrad buffer, so out-of-range corners need no
// branches. (Bilinear with one channel block on whole buffers frames the
// buffers instead: pads around every row take the out-of-range corners, and a record holds one
// corner; records.h, Frame.) gridGrad is a sum over channels: with one block it is written per
// tile; otherwise each block writes its per-position partial sums, and phase 3 adds them in
// block order and applies the multipliers. Grids that reach few of the pixels skip the
// whole-plane buffers: they run on the pixels reached (compact path, tap grids, pixel slots) or,
// with up to 4 channels, on the planes themselves (direct tiles), in the same order, so with
// the same bits.
//
// Files. This file holds the run (Runner: phases, paths, tasks) and the entry points; its parts
// are headers in grid_sampler2d_backward/, compiled here only: constants.h (modes, tuning
// constants), records.h (coordinates and records), channel_layout.h (planes and transposes),
// tiles.h (phase-2 tiles on channel-last buffers), direct_tiles.h (tiles on the planes) and
// plan.h (the plan and workspace layout).
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
#include "aclnn_cpu/staging.h"

// The op's parts, in the order each builds on the ones before.
#include "grid_sampler2d_backward/constants.h"
#include "grid_sampler2d_backward/records.h"
#include "grid_sampler2d_backward/channel_layout.h"
#include "grid_sampler2d_backward/tiles.h"
#include "grid_sampler2d_backward/direct_tiles.h"
#include "grid_sampler2d_backward/plan.h"
#include "grid_sampler2d_backward/double_math.h"  // float64 operands

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

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
  run_tasks(ceil_div(n, chunk), kStageMaxSlots, n >= 2 * chunk,
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
// (One native register: GCC expands the comparisons of a wider generic vector element by
// element.) Only windows come of it, so the sign a zero bound keeps does not matter.
inline void y_range(const float* xy, int64_t count, float* lo, float* hi, bool* nan) {
  using simd::VecF;
  using simd::VecI;
  constexpr int64_t kPairs = simd::kWidth / 2;
  VecF vlo = simd::set1(INFINITY), vhi = simd::set1(-INFINITY);
  VecI bad = VecI{};
  int64_t q = 0;
  for (; q + kPairs <= count; q += kPairs) {
    VecF v;
    std::memcpy(&v, xy + 2 * q, sizeof v);
    vlo = v < vlo ? v : vlo;
    vhi = v > vhi ? v : vhi;
    bad |= v != v;
  }
  for (int k = 1; k < simd::kWidth; k += 2) {
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
    grid_pairs_flat_ = grid_plane_.flat && grid_plane_.scol == 2 && a.grid.strides[3] == 1;
    gg_pairs_flat_ = p.need_gg && gg_plane_.flat && gg_plane_.scol == 2 && a.gridGrad.strides[3] == 1;
    if (!p.tile_records) rec_ = lay_out_records(ws + p.rec_off, p.interp, p.rec_array);
    if (!p.tile_grid_grad) partials_ = reinterpret_cast<float*>(ws + p.part_off);
    if (p.mult_array > 0) {  // phase 3 reads them where it reads the chunk records' multipliers
      rec_.mult[0] = reinterpret_cast<float*>(ws + p.mult_off);
      rec_.mult[1] = reinterpret_cast<float*>(ws + p.mult_off + p.mult_array);
    }
    record_fn_ = p.framed ? pick_framed_record_fn(p.pad, p.align) : pick_record_fn(p.interp, p.pad, p.align);
    tile_fn_ = p.framed ? pick_framed_tile_fn<T, Cb>(p.need_ig, p.need_gx)
                        : pick_tile_fn<T, Cb>(p.interp, p.need_ig, p.need_gx);
    if (p.few_bicubic) pixels_tile_fn_ = pick_bicubic_pixels_fn<Cb>(p.need_ig, p.need_gx);
    if constexpr (Cb == 1 || Cb == 4) {
      if (p.direct) direct_fn_ = pick_direct_fn<T>(p.geo.C, p.interp, p.need_ig, p.need_gx);
    }
  }

  void run() {
    for (int64_t n0 = 0; n0 < g_.N; n0 += p_.chunk) {
      const int64_t nc = std::min(p_.chunk, g_.N - n0);
      const bool sample_tasks = records_per_sample_task(nc);
      if (!p_.tile_records && !sample_tasks) compute_chunk_records(n0, nc);
      if (p_.parts == 1) {
        run_fused(n0, nc, sample_tasks);
      } else {
        run_split(n0, nc);
      }
      if (p_.need_gx && !p_.tile_grid_grad) write_grid_grad(n0, nc);
    }
  }

 private:
  // Phase 1: records of every position of samples [n0, n0 + nc).
  void compute_chunk_records(int64_t n0, int64_t nc) {
    run_chunks(nc * g_.P, kPositionGrain, [&](int64_t begin, int64_t end) { fill_records(n0, begin, end); });
  }

  // Records [begin, end) of the chunk of samples from n0.
  void fill_records(int64_t n0, int64_t begin, int64_t end) {
    alignas(64) double gx[kTile], gy[kTile];
    for (int64_t i = begin; i < end;) {
      const int64_t n = i / g_.P, p = i % g_.P;
      const int64_t len = std::min({kTile, end - i, g_.P - p});
      load_grid(n0 + n, p, len, gx, gy);
      record_fn_(g_, gx, gy, i, len, rec_);
      i += len;
    }
  }

  // Whether phase 2's tasks are whole samples of a chunk (nc samples) that compute their own
  // records first, in place of phase 1 and its own pass: nearest's records, one int a position,
  // written and read back by one thread while they are in its caches, and no wait between the
  // two phases. Enough samples to go round the threads several times.
  bool records_per_sample_task(int64_t nc) const {
    return p_.interp == kNearest && !p_.tile_records && p_.parts == 1 && !p_.compact && !p_.direct &&
           nc >= kSampleTasksPerThread * num_threads();
  }

  // The (x, y) grid values of positions [p, p + len) of sample n, len <= kTile, as fp32 pairs:
  // read in place when the grid is fp32 with its pairs side by side, else converted (and
  // gathered) into `scratch` (2 * kTile floats).
  const float* grid_pairs(int64_t n, int64_t p, int64_t len, float* scratch) const {
    const T* base = tensor_ptr<T>(a_.grid) + n * a_.grid.strides[0];
    const int64_t sk = a_.grid.strides[3];
    if (grid_pairs_flat_) {
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
  // padded with zeros to a multiple of kLanes. Pairs side by side are widened straight from the
  // storage type (converted to a float scratch first, a 16-bit grid's loads stalled: the bf16
  // RGB warp takes 0.98-0.99x the time without the scratch, in-process A/B, one thread).
  void load_grid(int64_t n, int64_t p, int64_t len, double* gx, double* gy) const {
    if (grid_pairs_flat_) {
      split_pairs(tensor_ptr<T>(a_.grid) + n * a_.grid.strides[0] + 2 * p, len, gx, gy);
    } else {
      alignas(64) float scratch[2 * kTile];
      split_pairs(grid_pairs(n, p, len, scratch), len, gx, gy);
    }
    for (int64_t q = len; q < round_up(len, kLanes); ++q) gx[q] = gy[q] = 0.0;
  }

  // gx[q], gy[q] = the `len` (x, y) pairs at `pairs`, widened to double.
  template <class S>
  static void split_pairs(const S* pairs, int64_t len, double* gx, double* gy) {
    int64_t q = 0;
#if ACLNN_ISA_LEVEL == 2
    // 8 (x, y) pairs at a time: widened to double, then split into x and y (GCC left the
    // loop below scalar: with the phase-1 code around it, 10% of a one-channel nearest call).
    const __m512i even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), odd = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
    for (; q + 8 <= len; q += 8) {
      const __m512 xy = (__m512)simd::load<S>(pairs + 2 * q);
      const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(xy));
      const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xy), 1)));
      _mm512_store_pd(gx + q, _mm512_permutex2var_pd(lo, even, hi));
      _mm512_store_pd(gy + q, _mm512_permutex2var_pd(lo, odd, hi));
    }
#elif ACLNN_ISA_LEVEL == 1
    for (; q + 4 <= len; q += 4) {  // 4 pairs at a time, as above
      const __m256 xy = (__m256)simd::load<S>(pairs + 2 * q);
      const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(xy)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(xy, 1));
      // unpacklo: [x0 x2 x1 x3], unpackhi: [y0 y2 y1 y3]; then qwords 0, 2, 1, 3.
      _mm256_store_pd(gx + q, _mm256_permute4x64_pd(_mm256_unpacklo_pd(lo, hi), 0xD8));
      _mm256_store_pd(gy + q, _mm256_permute4x64_pd(_mm256_unpackhi_pd(lo, hi), 0xD8));
    }
#endif
    for (; q < len; ++q) {
      gx[q] = double(to_float(pairs[2 * q]));
      gy[q] = double(to_float(pairs[2 * q + 1]));
    }
  }

  float* slot_mem(int64_t slot) const { return reinterpret_cast<float*>(ws_ + p_.slot_off + slot * p_.slot_bytes); }
  int64_t buf_stride() const { return round_up(p_.buf_floats * 4, kAlign) / 4; }

  // Transposes input rows [rows.lo, rows.hi) of channel block b of sample n into the
  // channel-last buffer `dst` (the sink row or the frame's pads are left to the caller:
  // zero_sink). Framed buffers take a row at a time, into its place in the frame.
  void load_input_rows(int64_t n, int64_t b, float* dst, RowWindow rows) const {
    const int64_t c0 = b * Cb, p0 = rows.lo * g_.W;
    const int cvalid = int(std::min<int64_t>(Cb, g_.C - c0));
    const T* base = tensor_ptr<T>(a_.input) + n * a_.input.strides[0] + c0 * a_.input.strides[1];
    if (!p_.framed)
      return load_channels<T, Cb>(base, a_.input.strides[1], cvalid, in_plane_, p0, rows.hi * g_.W - p0, dst + p0 * Cb);
    for (int64_t y = rows.lo; y < rows.hi; ++y)
      load_channels<T, Cb>(base, a_.input.strides[1], cvalid, in_plane_, y * g_.W, g_.W, dst + g_.frame.at(y, 0) * Cb);
  }

  // The whole block, sink row zero.
  void load_input_block(int64_t n, int64_t b, float* dst) const {
    load_input_rows(n, b, dst, RowWindow{0, g_.H});
    zero_sink(dst);
  }

  // Pixels [first, end) of a channel-last buffer = 0.
  void zero_pixels(float* buf, int64_t first, int64_t end) const {
    std::memset(buf + first * Cb, 0, size_t((end - first) * Cb) * sizeof(float));
  }

  // Where a channel-last buffer's out-of-range taps go = 0: the sink row (pixel HW) or, framed,
  // every pad of the frame: the row above the image, each row's pad, the two rows below (all of
  // them, windowed or not: a few hundred pixels against the rows' H * W).
  void zero_sink(float* buf) const {
    if (!p_.framed) return zero_pixels(buf, g_.HW, g_.HW + 1);
    const Frame& f = g_.frame;
    zero_pixels(buf, 0, f.at(0, 0));  // row -1 and row 0's left pad (row -1's right one)
    for (int64_t y = 0; y + 1 < g_.H; ++y) zero_pixels(buf, f.at(y, g_.W), f.at(y, g_.W) + 1);
    zero_pixels(buf, f.at(g_.H - 1, g_.W), f.pixels);
  }

  // Rows [rows.lo, rows.hi) of a channel-last inputGrad buffer = 0 (framed: with their pads).
  void zero_rows(float* buf, RowWindow rows) const {
    if (p_.framed) return zero_pixels(buf, g_.frame.at(rows.lo, 0), g_.frame.at(rows.hi, 0));
    zero_pixels(buf, rows.lo * g_.W, rows.hi * g_.W);
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
    // An fp32 gridGrad of side-by-side pairs takes each tile's sums in place, scaled there: no
    // copy out of the scratch (the RGB warp 0.94-0.97x the time on one thread, 0.98-1.00x at 2;
    // in-process A/B, the same bits).
    float* const gg_in_place = p_.tile_grid_grad && part && std::is_same<T, float>::value && gg_pairs_flat_
                                   ? reinterpret_cast<float*>(static_cast<T*>(a_.gridGrad.data) + n * a_.gridGrad.strides[0])
                                   : nullptr;
    const int cvalid = int(std::min<int64_t>(Cb, g_.C - c0));
    const T* go = tensor_ptr<T>(a_.gradOutput) + n * a_.gradOutput.strides[0] + c0 * a_.gradOutput.strides[1];
    for (int64_t t0 = p0; t0 < p1; t0 += kTile) {
      const int64_t len = std::min(kTile, p1 - t0);
      if (p_.tile_records) {
        alignas(64) double gx[kTile], gy[kTile];
        load_grid(n, t0, len, gx, gy);
        record_fn_(g_, gx, gy, 0, len, own);
        if (taps) remap_taps(own, len, *taps);
        if (b == 0 && p_.mult_array > 0 && p_.pad != kZeros)
          for (int k = 0; k < 2; ++k) std::memcpy(rec_.mult[k] + nl * g_.P + t0, own.mult[k], size_t(len) * 4);
      }
      // One fp32 channel laid out along the positions is already the tile: read in place (N4 C1
      // 128x128 nearest, one thread, in-process A/B: 0.97x the time).
      const float* gtile = tile;
      if constexpr (Cb == 1 && std::is_same<T, float>::value) {
        if (go_plane_.flat && go_plane_.scol == 1) gtile = go + t0;
      }
      // Bilinear tiles of 4 lanes read flat planes themselves where the level can (TileArgs::rows).
      const void* rows[Cb];
      bool planes = false;
      if constexpr (tile_reads_planes<Cb>()) {
        planes = p_.interp == kBilinear && direct == nullptr && go_plane_.flat && go_plane_.scol == 1;
        if (planes) {
          for (int c = 0; c < Cb; ++c) {
            rows[c] = c < cvalid ? static_cast<const void*>(go + c * a_.gradOutput.strides[1] + t0) : kZeroRow;
          }
          gtile = nullptr;
        }
      }
      if (gtile == tile) load_channels<T, Cb>(go, a_.gradOutput.strides[1], cvalid, go_plane_, t0, len, tile);
      const int64_t i0 = p_.tile_records ? 0 : first + t0;  // the tile's first record
      float* tile_part = part == nullptr || p_.tile_grid_grad ? part : part + 2 * t0;
      if (gg_in_place) tile_part = gg_in_place + 2 * t0;
      if (direct) {  // (tile records: i0 is 0)
        DirectArgs d = *direct;
        d.rec = rec, d.len = len, d.g = gtile, d.part = tile_part;
        direct_fn_(d);
      } else {
        const int64_t sink = taps ? taps->sink : p_.framed ? g_.frame.pixels - 1 : g_.HW;  // (framed: the last pad)
        const TileArgs t{rec, i0, len, gtile, in, ig, tile_part, sink * Cb, planes ? rows : nullptr,
                         p_.framed ? g_.frame.stride * Cb : 0};
        (taps && taps->slot_of ? pixels_tile_fn_ : tile_fn_)(t);
      }
      if (gg_in_place) {
        scale_grid_grad(tile_part, len, own, 0);
      } else if (p_.tile_grid_grad && part) {
        store_grid_grad(n, t0, len, part, own, 0);
      }
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

  // Phase 2, one task per (sample, block), or per sample with its blocks one after the other
  // (records_per_sample_task): load, accumulate and write back in one slot.
  void run_fused(int64_t n0, int64_t nc, bool sample_tasks) {
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
    ig_zeroed_ = zero_fill_first(nc);
    if (ig_zeroed_) zero_input_grad(n0, nc);
    const auto block_task = [&](int64_t nl, int64_t b, int64_t slot) {
      const int64_t n = n0 + nl;
      if (p_.zero_gg_in_tasks && b == 0) zero_sample_grid_grad(n);
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
        if (p_.framed) {
          for (int64_t y = runs[r].lo; y < runs[r].hi; ++y)  // (src + y * W * Cb: row y of the frame)
            store_input_grad(n, b, ig + (g_.frame.at(y, 0) - y * g_.W) * Cb, 1, y * g_.W, g_.W);
        } else {
          store_input_grad(n, b, ig, 1, lo, hi - lo);
        }
        done = hi;
      }
      store_zero_input_grad(n, b, done, g_.HW - done);
    };
    if (sample_tasks) {
      run_tasks(nc, p_.slots, worth_threads, [&](int64_t nl, int64_t slot) {
        fill_records(n0, nl * g_.P, (nl + 1) * g_.P);
        for (int64_t b = 0; b < p_.nblocks; ++b) block_task(nl, b, slot);
      });
    } else {
      run_tasks(nc * p_.nblocks, p_.slots, worth_threads,
                [&](int64_t task, int64_t slot) { block_task(task / p_.nblocks, task % p_.nblocks, slot); });
    }
    ig_zeroed_ = false;
  }

  // Nearest's gridGrad of sample n = +0.0 (Plan::zero_gg_in_tasks: one thread zeroing the whole
  // of it before the tasks kept the other waiting, 1 MiB on N32 64x64 in fp32).
  void zero_sample_grid_grad(int64_t n) const {
    TensorView sample = a_.gridGrad;
    sample.data = static_cast<T*>(sample.data) + n * sample.strides[0];
    sample.shape[0] = 1;
    fill_zero<T>(sample);
  }

  // Whether run_fused zero-fills inputGrad for samples [n0, n0 + nc) before its tasks, on every
  // thread, rather than each task its own planes: when a task's inputGrad is mostly zeros
  // written over whole planes (compact paths, direct tiles in place), the tasks are fewer than
  // the threads, which would otherwise wait, and the planes are too big to stay in one core's
  // cache or the taps reach few of their lines (the other core's share of the lines the task
  // then writes is fetched from that core). (Writing zeros is no sum: the same bits.)
  bool zero_fill_first(int64_t nc) const {
    const bool zeroes_planes = p_.compact || p_.few_bicubic || (p_.direct && p_.direct_in_place);
    if (!p_.need_ig || !zeroes_planes || nc * p_.nblocks >= num_threads()) return false;
    const int64_t bytes = nc * g_.C * g_.HW * int64_t(sizeof(T));
    return bytes >= kZeroFillFirstBytes &&
           (bytes >= kZeroFillFirstUncachedBytes || p_.taps * g_.P * kZeroFillFirstRatio <= g_.HW);
  }

  // inputGrad of samples [n0, n0 + nc) = +0.0, split over the threads.
  void zero_input_grad(int64_t n0, int64_t nc) const {
    const int64_t HW = g_.HW, pieces = nc * g_.C;  // planes
    parallel_for(pieces * HW, kZeroFillGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end;) {
        const int64_t plane = i / HW, p0 = i % HW, len = std::min(end - i, HW - p0);
        zero_plane(n0 + plane / g_.C, plane % g_.C, p0, len);
        i += len;
      }
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
        // The sample's planes (its one block holds all C = cvalid channels), staged as the
        // shared range copies do (staging.h).
        T* copy = reinterpret_cast<T*>(mem);
        copy_range_to_dense(a_.input, FlatIndex(a_.input), n * cvalid * HW, cvalid * HW, copy);
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
  // H * W, reads zeros). A slot's channels lie a plane apart. Where that crowds them into one
  // cache set (planes of a power-of-two size, channels_share_l1_sets) slots go a chunk at a time
  // and, within a chunk, a channel at a time: slot by slot, N1 C16 128x128 -> 12x12 bicubic
  // spent half its time in these gathers and scatters (150 against 74 us chunked). Elsewhere
  // slot by slot is the faster order (C9 269x80 -> 13x11: 54 against 60-65 us chunked).
  void gather_slots(int64_t n, int64_t b, const int32_t* pixel_of, int64_t slots, float* in) const {
    const int64_t c0 = b * Cb, schan = a_.input.strides[1];
    const int cvalid = int(std::min<int64_t>(Cb, g_.C - c0));
    const T* base = tensor_ptr<T>(a_.input) + n * a_.input.strides[0] + c0 * schan;
    if (!channels_share_l1_sets(schan * int64_t(sizeof(T)), cvalid)) {
      for (int64_t s = 0; s < slots; ++s) {
        const int64_t pixel = pixel_of[s], off = pixel < g_.HW ? pixel_offset(in_plane_, pixel) : 0;
        for (int c = 0; c < Cb; ++c)
          in[s * Cb + c] = pixel < g_.HW && c < cvalid ? to_float(base[c * schan + off]) : 0.0f;
      }
      return;
    }
    int64_t off[kSlotChunk];
    for (int64_t s0 = 0; s0 < slots; s0 += kSlotChunk) {
      const int64_t len = std::min(kSlotChunk, slots - s0);
      float* chunk = in + s0 * Cb;
      bool sink = false;
      for (int64_t s = 0; s < len; ++s) {
        const int64_t pixel = pixel_of[s0 + s];
        sink |= pixel == g_.HW;
        off[s] = pixel < g_.HW ? pixel_offset(in_plane_, pixel) : 0;
      }
      if (cvalid < Cb) std::memset(chunk, 0, size_t(len * Cb) * sizeof(float));  // missing channels
      for (int c = 0; c < cvalid; ++c) {
        const T* src = base + c * schan;
        for (int64_t s = 0; s < len; ++s) chunk[s * Cb + c] = to_float(src[off[s]]);
      }
      if (sink)
        for (int64_t s = 0; s < len; ++s)
          if (pixel_of[s0 + s] == g_.HW) std::fill(chunk + s * Cb, chunk + (s + 1) * Cb, 0.0f);
    }
  }

  // inputGrad of block b of sample n = zero, but for the compact slots' pixels (not the sink),
  // in gather_slots' order.
  void scatter_slots(int64_t n, int64_t b, const int32_t* pixel_of, int64_t slots, const float* ig) const {
    store_zero_input_grad(n, b, 0, g_.HW);
    const int64_t c0 = b * Cb, schan = a_.inputGrad.strides[1];
    const int cvalid = int(std::min<int64_t>(Cb, g_.C - c0));
    T* base = static_cast<T*>(a_.inputGrad.data) + n * a_.inputGrad.strides[0] + c0 * schan;
    if (!channels_share_l1_sets(schan * int64_t(sizeof(T)), cvalid)) {
      for (int64_t s = 0; s < slots; ++s) {
        const int64_t pixel = pixel_of[s];
        if (pixel == g_.HW) continue;  // the sink
        const int64_t off = pixel_offset(ig_plane_, pixel);
        for (int c = 0; c < cvalid; ++c) base[c * schan + off] = from_float<T>(ig[s * Cb + c]);
      }
      return;
    }
    int64_t off[kSlotChunk], from[kSlotChunk];
    for (int64_t s0 = 0; s0 < slots; s0 += kSlotChunk) {
      const int64_t end = std::min(kSlotChunk, slots - s0);
      int64_t len = 0;
      for (int64_t s = 0; s < end; ++s) {
        const int64_t pixel = pixel_of[s0 + s];
        if (pixel == g_.HW) continue;  // the sink
        off[len] = pixel_offset(ig_plane_, pixel);
        from[len++] = (s0 + s) * Cb;
      }
      for (int c = 0; c < cvalid; ++c) {
        T* dst = base + c * schan;
        for (int64_t s = 0; s < len; ++s) dst[off[s]] = from_float<T>(ig[from[s] + c]);
      }
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
  // pixels (16 taps a position, kFewBicubicRatio times fewer than the pixels): the rows and the
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
    int32_t* pixel_of = reinterpret_cast<int32_t*>(take(4 * (p_.taps * g_.P + 1)));
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
    run_tasks(groups * K, kStageMaxSlots, true, [&](int64_t t, int64_t) {
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
    run_tasks(groups * pieces, kStageMaxSlots, true, [&](int64_t t, int64_t) {
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
  // (Nothing when run_fused has zeroed inputGrad already.)
  void store_zero_input_grad(int64_t n, int64_t b, int64_t p0, int64_t len) const {
    if (ig_zeroed_) return;
    const int64_t c0 = b * Cb;
    const int cvalid = int(std::min<int64_t>(Cb, g_.C - c0));
    for (int c = 0; c < cvalid; ++c) zero_plane(n, c0 + c, p0, len);
  }

  // Writes +0.0 to pixels [p0, p0 + len) of channel c of sample n.
  void zero_plane(int64_t n, int64_t c, int64_t p0, int64_t len) const {
    T* plane = static_cast<T*>(a_.inputGrad.data) + n * a_.inputGrad.strides[0] + c * a_.inputGrad.strides[1];
    if (ig_plane_.flat && ig_plane_.scol == 1) {
      std::memset(static_cast<void*>(plane + p0), 0, size_t(len) * sizeof(T));  // +0.0: all-zero bits
    } else {
      for_each_offset(ig_plane_, p0, len, [&](int64_t, int64_t off) { plane[off] = T{}; });
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
    scale_grid_grad(out, len, rec, i);
    T* base = static_cast<T*>(a_.gridGrad.data) + n * a_.gridGrad.strides[0];
    const int64_t sk = a_.gridGrad.strides[3];
    if (gg_pairs_flat_) {
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

  // The (x, y) sums of `len` positions times their multipliers (records from i on), in place.
  void scale_grid_grad(float* out, int64_t len, const Records& rec, int64_t i) const {
    if (p_.interp == kBilinear && p_.pad != kZeros) {  // (zeros: the multipliers are the scales)
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
  }

  const GridSampler2DBackwardArgs& a_;
  const Plan& p_;
  const Geometry& g_;
  char* ws_;
  Plane go_plane_, in_plane_, grid_plane_, ig_plane_, gg_plane_;
  bool grid_pairs_flat_ = false;  // the grid's (x, y) pairs side by side along the positions
  bool gg_pairs_flat_ = false;    // and gridGrad's (requested)
  Records rec_;
  float* partials_ = nullptr;
  RecordFn record_fn_ = nullptr;
  TileFn tile_fn_ = nullptr;
  TileFn pixels_tile_fn_ = nullptr;  // few_bicubic: tile_bicubic on pixel slots
  DirectFn direct_fn_ = nullptr;     // direct: tile_direct
  bool ig_zeroed_ = false;           // run_fused zeroed inputGrad before its tasks
};

// Blocks wider than the level's registers are never planned (pick_block_width), so they are not
// compiled either.
template <class T, int Cb>
void run_blocks(const GridSampler2DBackwardArgs& a, const Plan& p, char* ws) {
  if constexpr (Cb <= simd::kWidth) Runner<T, Cb>(a, p, ws).run();
}

template <class T>
void run_typed(const GridSampler2DBackwardArgs& a, const Plan& p, char* ws) {
  // nearest: no grid gradient (zero-filled here, or sample by sample in the tasks; a trivial
  // plan never sets zero_gg_in_tasks)
  if (p.need_gg && !p.need_gx && !p.zero_gg_in_tasks) fill_zero<T>(a.gridGrad);
  if (p.trivial) {
    if (p.need_ig) fill_zero<T>(a.inputGrad);
    if (p.need_gx) fill_zero<T>(a.gridGrad);  // a sum over no channels (or no pixels)
    return;
  }
  switch (p.cb) {
    case 1: run_blocks<T, 1>(a, p, ws); break;
    case 4: run_blocks<T, 4>(a, p, ws); break;
    case 8: run_blocks<T, 8>(a, p, ws); break;
    default: run_blocks<T, 16>(a, p, ws); break;
  }
}

}  // namespace

uint64_t grid_sampler2d_backward_workspace(const GridSampler2DBackwardArgs& args) {
  if (args.input.dtype == DType::Float64) return 0;
  const Plan p = make_plan(args);
  return p.trivial ? 0 : uint64_t(p.total);
}

aclnnStatus grid_sampler2d_backward(const GridSampler2DBackwardArgs& args, void* workspace) {
  if (args.input.dtype == DType::Float64) {
    run_double(args);
    return kSuccess;
  }
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
