// aclnnSoftmax kernel: out = exp(x - max) / sum(exp(x - max)) along dim.
//
// The tensor is viewed as [outer, size, inner] around the dim (a 0-d tensor as [1, 1, 1]).
// Paths, on contiguous operands:
//   * rows (inner == 1): each row's max, then its exponentials (kept in a stack buffer) and
//     their sum, then the quotients, while the row is still in cache. Rows longer than
//     kRowChunk go in fixed chunks whose maxima and sums pass through the workspace, so long
//     rows split over the threads and their result never depends on the thread count; rows
//     shorter than kShortRow go in flat blocks of several rows (a per-row reduction would cost
//     more than the row);
//   * columns (inner > 1): vectorised across inner, in tiles of [size x width] whose max, sum
//     and quotients run over the tile while it stays in cache, the exponentials kept in a
//     stack buffer where they fit (each column over the dim in order, so the tiling cannot
//     change a result).
// Operands in a dense permutation of row-major that they share (channels-last, a transpose)
// take their dims in memory order first; anything else is copied to dense buffers in the
// workspace and back (dense_copy.h), which gives the bits of the same call on contiguous
// copies.
//
// Arithmetic: fp32 for float32, float16 and bfloat16 self, fp64 for float64 self, with
// simd.h's vector exp; the sums of exponentials are compensated (Kahan) sums. The result is defined in self's dtype and then cast to out's: a 16-bit
// self's fp32 result is rounded to that dtype first (round_to) and then stored as out's dtype.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>
#include <utility>

#include "aclnn_cpu/dense_copy.h"
#include "aclnn_cpu/ops/softmax_args.h"
#include "aclnn_cpu/parallel.h"
#include "aclnn_cpu/simd.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

using namespace simd;

constexpr int64_t kRowChunk = 8192;       // elements of a row chunk (and the row buffer)
constexpr int64_t kShortBlock = 2048;     // elements of a flat block of short rows
constexpr int64_t kGrainElems = 32768;    // fewest elements worth a thread of their own
constexpr int64_t kMaxBlock = 1024;       // widest column tile (its max and sum on the stack)
constexpr int64_t kTileBytes = 128 << 10; // a column tile's input should stay in L2

// ---------------------------------------------------------------------------------------------
// The math type M of a storage type T (double for float64, else float) and its vectors.

template <class T>
using MathOf = std::conditional_t<std::is_same<T, double>::value, double, float>;

template <class M>
struct Lanes;
template <>
struct Lanes<float> {
  using V = VecF;
  static constexpr int kN = kWidth;
};
template <>
struct Lanes<double> {
  using V = VecD;
  static constexpr int kN = kWidthD;
};
template <class M>
using Vec = typename Lanes<M>::V;
template <class M>
constexpr int64_t kLanes = Lanes<M>::kN;

template <class M>
ACLNN_ALWAYS_INLINE Vec<M> splat(M x) {
  if constexpr (std::is_same<M, double>::value) return set1d(x);
  else return set1(x);
}

// Lanes of self's values as M.
template <class T>
ACLNN_ALWAYS_INLINE Vec<MathOf<T>> load_m(const T* p) {
  if constexpr (std::is_same<T, double>::value) return load_d(p);
  else return load(p);
}
template <class T>
ACLNN_ALWAYS_INLINE Vec<MathOf<T>> load_m(const T* p, int64_t n) {  // n lanes, the rest 0
  if constexpr (std::is_same<T, double>::value) {
    double buffer[kWidthD] = {};
    for (int64_t i = 0; i < n; ++i) buffer[i] = p[i];
    return load_d(buffer);
  } else {
    return n == kWidth ? load(p) : load_partial(p, n);
  }
}
template <class M>
ACLNN_ALWAYS_INLINE void store_m(M* p, Vec<M> v) {
  if constexpr (std::is_same<M, double>::value) store_d(p, v);
  else store(p, v);
}

template <class M, class T>
inline M to_math(T x) {
  if constexpr (std::is_same<T, double>::value) return x;
  else return to_float(x);
}

// A double rounded to O: float64 as it is, float32 by one rounding; 16-bit types through a
// float rounded to odd (toward zero, the lowest bit set when inexact), which keeps the second
// rounding correct, so the result is the double rounded once to O.
template <class O>
inline O from_double(double d) {
  if constexpr (std::is_same<O, double>::value) {
    return d;
  } else if constexpr (std::is_same<O, float>::value) {
    return float(d);
  } else {
    float f = float(d);
    if (std::isfinite(d) && double(f) != d) {
      if (std::fabs(double(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      bits |= 1u;
      std::memcpy(&f, &bits, sizeof f);
    }
    return from_float<O>(f);
  }
}

// Stores a result vector (lanes [0, n), n <= kLanes) as O. fp32 math: a 16-bit self's result
// is rounded to self's dtype first when out has another dtype; fp64 math: each lane rounded
// once to O.
template <class T, class O>
ACLNN_ALWAYS_INLINE void store_out(O* p, Vec<MathOf<T>> v, int64_t n) {
  if constexpr (std::is_same<T, double>::value) {
    if constexpr (std::is_same<O, double>::value) {
      if (n == kWidthD) return store_d(p, v);
    }
    for (int64_t i = 0; i < n; ++i) p[i] = from_double<O>(v[i]);
  } else {
    if constexpr (!std::is_same<T, O>::value) v = round_to<T>(v);
    if (n == kWidth) store(p, v);
    else store_partial(p, v, n);
  }
}

// Lane reductions in a fixed pairwise tree (the result depends on lane contents only).
template <class M, class Op>
ACLNN_ALWAYS_INLINE M reduce(Vec<M> v, Op op) {
  M lane[kLanes<M>];
  std::memcpy(lane, &v, sizeof v);
  for (int64_t w = kLanes<M> / 2; w >= 1; w /= 2)
    for (int64_t i = 0; i < w; ++i) lane[i] = op(lane[i], lane[i + w]);
  return lane[0];
}
template <class M>
ACLNN_ALWAYS_INLINE M reduce_max(Vec<M> v) {
  return reduce<M>(v, [](M a, M b) { return a > b ? a : b; });
}
template <class M>
ACLNN_ALWAYS_INLINE M reduce_sum(Vec<M> v) {
  if constexpr (std::is_same<M, float>::value) return reduce_add(v);
  else return reduce<M>(v, [](M a, M b) { return a + b; });
}

template <class M>
constexpr M kMinusInf = -std::numeric_limits<M>::infinity();

// ---------------------------------------------------------------------------------------------
// Rows: contiguous along the dim.

// Max of n contiguous values. NaN need not win here: a NaN makes its exponential, the sum and
// so every quotient of the row NaN whatever the max.
template <class T>
MathOf<T> row_max(const T* x, int64_t n) {
  using M = MathOf<T>;
  constexpr int64_t L = kLanes<M>;
  Vec<M> a0 = splat<M>(kMinusInf<M>), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    a0 = max(a0, load_m(x + i));
    a1 = max(a1, load_m(x + i + L));
    a2 = max(a2, load_m(x + i + 2 * L));
    a3 = max(a3, load_m(x + i + 3 * L));
  }
  for (; i + L <= n; i += L) a0 = max(a0, load_m(x + i));
  M m = reduce_max<M>(max(max(a0, a1), max(a2, a3)));
  for (; i < n; ++i) m = std::max(m, to_math<M>(x[i]));
  return m;
}

// Adds v to the compensated sum (s, c) (Kahan): the rounding error of each addition is carried
// in c, so a long sum of exponentials is off by about one rounding instead of up to n of them
// (the dim's sum decides every quotient's accuracy: with plain sums, columns over 300 elements
// came out up to 5% less accurate than torch's).
template <class V>
ACLNN_ALWAYS_INLINE void add_compensated(V& s, V& c, V v) {
  const V y = v - c, t = s + y;
  c = (t - s) - y;
  s = t;
}

// e[i] = exp(x[i] - m) for n contiguous values, and their sum in a fixed order: four
// compensated vector accumulators over blocks of 4 vectors, single vectors into the first, a
// partial last vector (its dead lanes zero) into the second; (a0 + a1) + (a2 + a3), then the
// lanes. e may be null.
template <class T>
MathOf<T> row_exp_sum(const T* x, int64_t n, MathOf<T> m, MathOf<T>* e) {
  using M = MathOf<T>;
  constexpr int64_t L = kLanes<M>;
  const Vec<M> vm = splat<M>(m);
  Vec<M> a[4] = {splat<M>(0), splat<M>(0), splat<M>(0), splat<M>(0)}, c[4] = {a[0], a[0], a[0], a[0]};
  const auto step = [&](int64_t i, int k) __attribute__((always_inline)) {
    const Vec<M> v = exp(load_m(x + i) - vm);
    if (e != nullptr) store_m(e + i, v);
    add_compensated(a[k], c[k], v);
  };
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    step(i, 0);
    step(i + L, 1);
    step(i + 2 * L, 2);
    step(i + 3 * L, 3);
  }
  for (; i + L <= n; i += L) step(i, 0);
  if (i < n) {
    // Dead lanes load as 0 and would add exp(-m): masked to zero.
    Vec<M> v = exp(load_m(x + i, n - i) - vm);
    for (int64_t k = n - i; k < L; ++k) v[k] = 0;
    if (e != nullptr) store_m(e + i, v);
    add_compensated(a[1], c[1], v);
  }
  return reduce_sum<M>((a[0] + a[1]) + (a[2] + a[3]));
}

// out = e / s for n values; e from the buffer, or exp(x - m) again when e is null. fp32 math
// goes through store_run: through the cursor, or (Cursor = Direct) store_run<kStream> itself,
// which rows_range takes for rows on a line while no run is open. Two functions, one loop
// each: with both loops in one, GCC spilled the exp constants (rows on a line 1.09-1.15x the
// time).
struct Direct {};
template <bool kStream, class T, class O, class Cursor>
void row_write(Cursor& cursor, const T* x, const MathOf<T>* e, O* out, int64_t n, MathOf<T> m, MathOf<T> s) {
  using M = MathOf<T>;
  constexpr int64_t L = kLanes<M>;
  const Vec<M> vm = splat<M>(m), vs = splat<M>(s);
  if constexpr (std::is_same<M, float>::value) {
    const auto value = [&](int64_t i, int64_t count) __attribute__((always_inline)) {
      const VecF v = e != nullptr ? load_m(e + i, count) : exp(load_m(x + i, count) - vm);
      if constexpr (std::is_same<T, O>::value) return v / vs;
      else return round_to<T>(v / vs);
    };
    if constexpr (std::is_same<Cursor, Direct>::value) store_run<kStream>(out, n, value);
    else store_run(cursor, out, n, value);
    return;
  }
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const Vec<M> v = e != nullptr ? load_m(e + i) : exp(load_m(x + i) - vm);
    store_out<T>(out + i, v / vs, L);
  }
  if (i < n) {
    const Vec<M> v = e != nullptr ? load_m(e + i, n - i) : exp(load_m(x + i, n - i) - vm);
    store_out<T>(out + i, v / vs, n - i);
  }
}

// Rows [begin, end) of n <= kRowChunk elements, on the calling thread.
template <bool kStream, class T, class O>
void rows_range(StreamCursor<kStream>& cursor, const T* x, O* out, int64_t begin, int64_t end, int64_t n) {
  using M = MathOf<T>;
  alignas(64) M e[kRowChunk];
  for (int64_t r = begin; r < end; ++r) {
    const T* xr = x + r * n;
    const M m = row_max(xr, n);
    const M s = row_exp_sum(xr, n, m, e);
    O* o = out + r * n;
    if (!std::is_same<M, float>::value || (cursor.idle() && stream_aligned(o))) {
      Direct direct;
      row_write<kStream>(direct, xr, e, o, n, m, s);
    } else {
      row_write<kStream>(cursor, xr, e, o, n, m, s);
    }
  }
}

// Rows shorter than this go in flat blocks (short_rows).
template <class M>
constexpr int64_t kShortRow = 2 * kLanes<M>;

// A block of rows of n < kShortRow elements at a time, flat: each row's max (in order) spread
// over its slots, the exponentials vectorised over the block, each row's sum (in order, from
// +0) spread over its slots, the quotients vectorised.
template <class T, class O>
void short_rows(const T* x, O* out, int64_t rows, int64_t n) {
  using M = MathOf<T>;
  constexpr int64_t L = kLanes<M>;
  const int64_t per_block = kShortBlock / n;
  const int64_t blocks = (rows + per_block - 1) / per_block;
  parallel_for(blocks, std::max<int64_t>(1, kGrainElems / kShortBlock), [&](int64_t begin, int64_t end) {
    alignas(64) M spread[kShortBlock], e[kShortBlock];
    for (int64_t b = begin; b < end; ++b) {
      const int64_t r0 = b * per_block, nr = std::min(per_block, rows - r0), count = nr * n;
      const T* xb = x + r0 * n;
      O* ob = out + r0 * n;
      for (int64_t r = 0; r < nr; ++r) {
        M m = to_math<M>(xb[r * n]);
        for (int64_t k = 1; k < n; ++k) m = std::max(m, to_math<M>(xb[r * n + k]));
        for (int64_t k = 0; k < n; ++k) spread[r * n + k] = m;
      }
      int64_t i = 0;
      for (; i + L <= count; i += L) store_m(e + i, exp(load_m(xb + i) - load_m(spread + i)));
      if (i < count) store_m(e + i, exp(load_m(xb + i, count - i) - load_m(spread + i, count - i)));
      for (int64_t r = 0; r < nr; ++r) {
        M s = M(0) + e[r * n];
        for (int64_t k = 1; k < n; ++k) s += e[r * n + k];
        for (int64_t k = 0; k < n; ++k) spread[r * n + k] = s;
      }
      for (i = 0; i + L <= count; i += L) store_out<T>(ob + i, load_m(e + i) / load_m(spread + i), L);
      if (i < count) store_out<T>(ob + i, load_m(e + i, count - i) / load_m(spread + i, count - i), count - i);
    }
  });
}

// Rows longer than kRowChunk: fixed chunks, chunk t = r * chunks + c. Each chunk's max goes to
// maxima[t]; a row's max is that of its chunks; each chunk's sum of exponentials goes to
// sums[t], and a row's sum adds them in chunk order from +0; each chunk is then written with
// exp computed again. Whoever computes a chunk gets the same values.
template <bool kStream, class T, class O>
void long_rows(const T* x, O* out, int64_t rows, int64_t n, MathOf<T>* partials) {
  using M = MathOf<T>;
  const int64_t chunks = (n + kRowChunk - 1) / kRowChunk, tasks = rows * chunks;
  M* maxima = partials;
  M* sums = partials + tasks;
  const auto start = [&](int64_t t) { return (t / chunks) * n + (t % chunks) * kRowChunk; };
  const auto length = [&](int64_t t) { return std::min(kRowChunk, n - (t % chunks) * kRowChunk); };
  const auto row_max_of = [&](int64_t r) {
    M m = maxima[r * chunks];
    for (int64_t c = 1; c < chunks; ++c) m = std::max(m, maxima[r * chunks + c]);
    return m;
  };
  const auto row_sum_of = [&](int64_t r) {
    M s = 0;
    for (int64_t c = 0; c < chunks; ++c) s += sums[r * chunks + c];
    return s;
  };
  if (rows >= 2 * num_threads()) {  // a task per row: its chunks stay in L2 between the passes
    parallel_for(rows, 1, [&](int64_t begin, int64_t end) {
      StreamCursor<kStream> cursor;
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t t = r * chunks; t < (r + 1) * chunks; ++t) maxima[t] = row_max(x + start(t), length(t));
        const M m = row_max_of(r);
        for (int64_t t = r * chunks; t < (r + 1) * chunks; ++t)
          sums[t] = row_exp_sum(x + start(t), length(t), m, static_cast<M*>(nullptr));
        const M s = row_sum_of(r);
        for (int64_t t = r * chunks; t < (r + 1) * chunks; ++t)
          row_write<kStream>(cursor, x + start(t), static_cast<const M*>(nullptr), out + start(t), length(t), m, s);
      }
      cursor.flush();
      if (kStream) stream_fence();
    });
    return;
  }
  // Few rows: the chunks are the tasks, so every thread works; each pass over all chunks.
  parallel_for(tasks, 2, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) maxima[t] = row_max(x + start(t), length(t));
  });
  for (int64_t r = 0; r < rows; ++r) maxima[r * chunks] = row_max_of(r);
  parallel_for(tasks, 2, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      sums[t] = row_exp_sum(x + start(t), length(t), maxima[(t / chunks) * chunks], static_cast<M*>(nullptr));
  });
  for (int64_t r = 0; r < rows; ++r) sums[r * chunks] = row_sum_of(r);
  parallel_for(tasks, 2, [&](int64_t begin, int64_t end) {
    StreamCursor<kStream> cursor;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t first = (t / chunks) * chunks;
      row_write<kStream>(cursor, x + start(t), static_cast<const M*>(nullptr), out + start(t), length(t), maxima[first],
                sums[first]);
    }
    cursor.flush();
    if (kStream) stream_fence();
  });
}

template <bool kStream, class T, class O>
void rows_path(const T* x, O* out, int64_t rows, int64_t n, MathOf<T>* partials) {
  using M = MathOf<T>;
  if (n < kShortRow<M>) return short_rows(x, out, rows, n);
  if (n > kRowChunk) return long_rows<kStream>(x, out, rows, n, partials);
  parallel_for(rows, std::max<int64_t>(1, kGrainElems / n), [&](int64_t begin, int64_t end) {
    StreamCursor<kStream> cursor;
    rows_range(cursor, x, out, begin, end, n);
    cursor.flush();
    if (kStream) stream_fence();
  });
}

// ---------------------------------------------------------------------------------------------
// Columns: a [size x width] tile at stride `inner`, vectorised across the width.

// A tile's exponentials are kept for the quotients (computing them twice cost more than the
// memory traffic) where [size x width] of them fit this buffer; a tile whose dim is too long
// for a useful width computes them again instead.
constexpr int64_t kTileBufferBytes = 128 << 10;
template <class M>
constexpr int64_t kTileBuffer = kTileBufferBytes / int64_t(sizeof(M));

template <bool kStream, class T, class O>
void column_tile(const T* x, O* out, int64_t size, int64_t inner, int64_t width) {
  using M = MathOf<T>;
  constexpr int64_t L = kLanes<M>;
  alignas(64) M mx[kMaxBlock], sum[kMaxBlock], carry[kMaxBlock];
  alignas(64) M e[kTileBuffer<M>];
  for (int64_t j = 0; j < width; j += L) {
    store_m(mx + j, splat<M>(kMinusInf<M>));
    store_m(sum + j, splat<M>(0));
    store_m(carry + j, splat<M>(0));
  }
  const int64_t full = width - width % L, tail = width - full, padded = full + (tail > 0 ? L : 0);
  const bool buffered = size * padded <= kTileBuffer<M>;
  const auto each = [&](auto&& fn) __attribute__((always_inline)) {
    for (int64_t d = 0; d < size; ++d) {
      for (int64_t j = 0; j < full; j += L) fn(d, j, load_m(x + d * inner + j), L);
      if (tail > 0) fn(d, full, load_m(x + d * inner + full, tail), tail);
    }
  };
  each([&](int64_t, int64_t j, Vec<M> v, int64_t) { store_m(mx + j, max(load_m(mx + j), v)); });
  each([&](int64_t d, int64_t j, Vec<M> v, int64_t) {
    Vec<M> s = load_m(sum + j), c = load_m(carry + j);
    const Vec<M> ev = exp(v - load_m(mx + j));
    if (buffered) store_m(e + d * padded + j, ev);
    add_compensated(s, c, ev);
    store_m(sum + j, s);
    store_m(carry + j, c);
  });
  // The exponential of element (d, j): kept, or computed again (the same value).
  const auto exp_at = [&](int64_t d, int64_t j, int64_t count) __attribute__((always_inline)) {
    return buffered ? load_m(e + d * padded + j) : exp(load_m(x + d * inner + j, count) - load_m(mx + j));
  };
  if constexpr (std::is_same<M, float>::value) {
    for (int64_t d = 0; d < size; ++d) {
      store_run<kStream>(out + d * inner, width, [&](int64_t j, int64_t count) __attribute__((always_inline)) {
        const VecF v = exp_at(d, j, count) / load(sum + j);
        if constexpr (std::is_same<T, O>::value) return v;
        else return round_to<T>(v);
      });
    }
  } else {
    each([&](int64_t d, int64_t j, Vec<M>, int64_t count) {
      store_out<T>(out + d * inner + j, exp_at(d, j, count) / load_m(sum + j), count);
    });
  }
}

template <bool kStream, class T, class O>
void columns_path(const T* x, O* out, int64_t outer, int64_t size, int64_t inner, int64_t width) {
  const int64_t blocks = (inner + width - 1) / width, tasks = outer * blocks;
  parallel_for(tasks, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, size * width)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t t = begin; t < end; ++t) {
                   const int64_t o = t / blocks, j0 = (t % blocks) * width;
                   const int64_t at = o * size * inner + j0;
                   column_tile<kStream>(x + at, out + at, size, inner, std::min(width, inner - j0));
                 }
                 if (kStream) stream_fence();
               });
}

// ---------------------------------------------------------------------------------------------
// The call.

struct Layout {
  int64_t outer = 1, size = 1, inner = 1;
};

// Column tile width: the tile's input stays in L2 between the passes, and there are a few
// tiles per thread where the call is worth threads. The sums do not depend on it.
template <class T>
int64_t tile_width(const Layout& l) {
  constexpr int64_t lanes = kLanes<MathOf<T>>;
  int64_t width = kTileBytes / std::max<int64_t>(1, l.size * int64_t(sizeof(T)));
  // Narrower where that keeps the exponentials in the tile buffer, down to 4 vectors.
  const int64_t buffered = kTileBuffer<MathOf<T>> / std::max<int64_t>(1, l.size);
  if (buffered >= 4 * lanes) width = std::min(width, buffered);
  if (l.outer * l.size * l.inner >= 2 * kGrainElems)
    width = std::min(width, (l.outer * l.inner + 4 * num_threads() - 1) / (4 * num_threads()));
  width = std::min(std::max<int64_t>(lanes, width - width % lanes), kMaxBlock);
  return std::min(width, l.inner);
}

Layout make_layout(const SoftmaxArgs& a) {
  Layout l;
  const int rank = a.self.ndim;
  const int64_t dim = a.dim < 0 ? a.dim + std::max(rank, 1) : a.dim;
  for (int i = 0; i < rank; ++i) {
    if (i < dim) l.outer *= a.self.shape[i];
    else if (i == dim) l.size = a.self.shape[i];
    else l.inner *= a.self.shape[i];
  }
  return l;
}

// self and out sharing one dense layout whose dims are a permutation of row-major (channels-
// last, a transposed matrix): the same views with their dims in memory order and dim following
// its dim, so the contiguous paths take them in place.
SoftmaxArgs in_memory_order(const SoftmaxArgs& a) {
  const TensorView& x = a.self;
  const int rank = x.ndim;
  if (rank < 2 || x.is_contiguous() || !x.same_layout(a.out)) return a;
  int order[kMaxDims];
  for (int i = 0; i < rank; ++i) order[i] = i;
  for (int i = 1; i < rank; ++i)  // largest stride first, ties in dim order
    for (int k = i; k > 0 && x.strides[order[k]] > x.strides[order[k - 1]]; --k) std::swap(order[k], order[k - 1]);
  SoftmaxArgs m = a;
  for (TensorView* t : {&m.self, &m.out})
    for (int k = 0; k < rank; ++k) {
      t->shape[k] = (t == &m.self ? a.self : a.out).shape[order[k]];
      t->strides[k] = (t == &m.self ? a.self : a.out).strides[order[k]];
    }
  if (!m.self.is_contiguous()) return a;  // not a dense permutation (gaps, zero strides)
  const int64_t dim = a.dim < 0 ? a.dim + rank : a.dim;
  for (int k = 0; k < rank; ++k)
    if (order[k] == dim) m.dim = k;
  return m;
}

// The call as the kernel runs it: in memory order, with operands that are still not
// contiguous replaced by dense copies in the workspace (after the long rows' partials).
struct Prepared {
  SoftmaxArgs args;
  Layout l;
  bool dense_self = false, dense_out = false;
  uint64_t kernel_bytes = 0, bytes = 0;
};

Prepared prepare(const SoftmaxArgs& given, void* dense_at) {
  Prepared p;
  p.args = in_memory_order(given);  // (given itself when it is not such a permutation)
  if (!p.args.self.is_contiguous() || !p.args.out.is_contiguous()) {
    DensePlace place{static_cast<char*>(dense_at)};
    if (!p.args.self.is_contiguous()) {
      p.dense_self = true;
      p.args.self = place.take(given.self);
    }
    if (!p.args.out.is_contiguous()) {
      p.dense_out = true;
      p.args.out = place.take(given.out);
    }
    p.bytes = place.bytes;
  }
  p.l = make_layout(p.args);
  if (p.l.inner == 1 && p.l.size > kRowChunk) {
    const uint64_t chunks = uint64_t((p.l.size + kRowChunk - 1) / kRowChunk);
    const uint64_t math_bytes = p.args.self.dtype == DType::Float64 ? sizeof(double) : sizeof(float);
    p.kernel_bytes = (2 * uint64_t(p.l.outer) * chunks * math_bytes + 63) / 64 * 64;
  }
  p.bytes += p.kernel_bytes;
  return p;
}

template <bool kStream, class T, class O>
void run_path(const Prepared& p, void* workspace, int64_t width) {
  const T* x = p.args.self.ptr<const T>();
  O* out = p.args.out.ptr<O>();
  const Layout& l = p.l;
  if (l.inner == 1) rows_path<kStream>(x, out, l.outer, l.size, static_cast<MathOf<T>*>(workspace));
  else columns_path<kStream>(x, out, l.outer, l.size, l.inner, width);
}

// Outputs of a call that overflows the last-level cache go out with streaming stores where
// their runs (rows, or a column tile's rows) keep to lines. fp32 math only (the fp64 stores
// convert lane by lane).
template <class T, class O>
void run_typed(const Prepared& p, void* workspace) {
  const Layout& l = p.l;
  const int64_t width = l.inner > 1 ? tile_width<T>(l) : 0;
  const uint64_t bytes = uint64_t(l.outer * l.size * l.inner) * (sizeof(T) + sizeof(O));
  const O* out = p.args.out.ptr<O>();
  const bool fits = l.inner > 1 ? stream_runs_fit(out, uint64_t(width) * sizeof(O), uint64_t(std::gcd(width, l.inner)) * sizeof(O))
                                : l.size >= kShortRow<MathOf<T>> && cursor_joins(out);
  if (std::is_same<MathOf<T>, float>::value && streams_worthwhile(bytes, 1) && fits)
    run_path<true, T, O>(p, workspace, width);
  else
    run_path<false, T, O>(p, workspace, width);
}

template <class T>
aclnnStatus run_out(const Prepared& p, void* workspace) {
  switch (p.args.out.dtype) {
    case DType::Float32: run_typed<T, float>(p, workspace); return kSuccess;
    case DType::Float16: run_typed<T, half_t>(p, workspace); return kSuccess;
    case DType::BFloat16: run_typed<T, bfloat16_t>(p, workspace); return kSuccess;
    case DType::Float64: run_typed<T, double>(p, workspace); return kSuccess;
    default: return kInner;
  }
}

}  // namespace

uint64_t softmax_workspace(const SoftmaxArgs& args) {
  if (args.self.numel() == 0) return 0;
  return prepare(args, nullptr).bytes;
}

aclnnStatus softmax(const SoftmaxArgs& given, void* workspace) {
  if (given.self.numel() == 0) return kSuccess;
  const Prepared p = prepare_in(workspace, [&](char* dense_at) { return prepare(given, dense_at); });
  if (p.dense_self) copy_to_dense(given.self, p.args.self.data);
  aclnnStatus status = kInner;
  switch (p.args.self.dtype) {
    case DType::Float32: status = run_out<float>(p, workspace); break;
    case DType::Float16: status = run_out<half_t>(p, workspace); break;
    case DType::BFloat16: status = run_out<bfloat16_t>(p, workspace); break;
    case DType::Float64: status = run_out<double>(p, workspace); break;
    default: break;
  }
  if (status == kSuccess && p.dense_out) copy_from_dense(p.args.out.data, given.out);
  return status;
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
