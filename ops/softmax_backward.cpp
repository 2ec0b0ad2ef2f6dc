// aclnnSoftmaxBackward kernel: out = output * (gradOutput - sum_dim(gradOutput * output)).
//
// The tensor is viewed as [outer, size, inner] around the softmax dim. Three paths:
//   * rows (contiguous, inner == 1): each row is summed then written while it is still in
//     cache (with AVX-512 in registers: whole rows of 16 (fp16 20, bf16 22) to 128 elements, the
//     first 128 of rows up to 256; fp16 rows up to 2048 through a stack buffer of their
//     converted values); shorter rows in flat blocks of several rows;
//     rows longer than kRowChunk are summed in fixed chunks whose fp32
//     partials go through the workspace, so long rows are parallel too and the result never
//     depends on the thread count;
//   * columns (contiguous, inner > 1): vectorised across inner, blocked over inner so one
//     block's [size x width] tile is summed and then rewritten from cache; each column's sum
//     runs over the dim in order, so blocking cannot change a result;
//   * strided (anything else): rows enumerated with an N-d index, each summed in the order of
//     a contiguous row of its length (so its result does not depend on its strides) and
//     written with the row kernel when its elements are adjacent, else scalar.
// Layouts that neither the rows nor the columns take in place run the contiguous kernels on
// copies (staging.h): task by task through a slot per thread where a task's rows or slabs fit,
// else on whole dense copies in the workspace (see prepare).
// Arithmetic and accumulation are fp32 for every dtype; out may have its own dtype (float32,
// float16, bfloat16 or float64). A float64 out receives the fp32 result widened exactly.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "aclnn_cpu/ops/softmax_backward_args.h"
#include "aclnn_cpu/parallel.h"
#include "aclnn_cpu/simd.h"
#include "aclnn_cpu/staging.h"
#include "aclnn_cpu/strided_move.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

using namespace simd;

constexpr int64_t kRowChunk = 16384;     // elements per partial sum of a long row
constexpr int64_t kWholeRowTasks = 2;    // long rows: a task per row from this many rows per thread
constexpr int64_t kGrainElems = 32768;   // fewest elements worth a thread of their own
// Rows (long or short) are cheap to split: with this grain instead of kGrainElems, [17..32,
// 1000] and [40, 512] took 0.83-0.98x the time at 2 threads, short rows [1024, 24] and [1000,
// 30] 0.63-0.81x (in-process A/B; each thread still gets at least 8K elements, against a
// fork/join of about 1 us). Column tiles keep kGrainElems: split, [2, 128, 100] and [4, 64, 96]
// over dim 1 took 0.65-0.78x but [1, 256, 120] 1.06-1.16x.
constexpr int64_t kRowGrainElems = 16384;
constexpr int64_t kShortRow = 32;        // rows shorter than this are handled in flat blocks
constexpr int64_t kShortBlock = 2048;    // floats of a flat block of short rows
constexpr int64_t kRunBytes = 16384;     // widest column block, in bytes of one input row
constexpr int64_t kMaxBlock = kRunBytes / 2;        // its floats of stack accumulators (32 KiB)
constexpr int64_t kTileBytes = 4 * 1024 * 1024;     // a block's inputs should stay in cache

struct Layout {
  int dim = 0;  // normalised; a 0-d tensor is treated as shape [1]
  int64_t outer = 1, size = 1, inner = 1;
  bool contiguous = false;
  // Not contiguous, but each operand's [size, inner] slab per outer index is (a channel or batch
  // slice, for a softmax over dim 1), the slabs of operand k slab_stride[k] elements apart
  // (gradOutput, output, out): the column kernels run on the slabs in place. As dense copies,
  // a channel slice over dim 1 of [8, 64, 32, 32] took 68-86 us, torch 73-90, contiguous 50.
  bool slabs = false;
  int64_t slab_stride[3] = {0, 0, 0};
  int64_t row_chunks = 1;  // > 1: rows path with workspace partials
};

// The element stride between t's [size, inner] slabs when each is row-major contiguous and its
// outer dims (those before `dim`) coalesce into one; false otherwise.
bool slab_stride(const TensorView& t, int dim, int64_t& stride) {
  int64_t expect = 1;
  for (int i = t.ndim - 1; i >= dim; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  stride = expect;  // no outer dim: any stride will do
  bool first = true;
  int64_t span = 0;
  for (int i = dim - 1; i >= 0; --i) {
    if (t.shape[i] == 1) continue;
    if (first) {
      stride = t.strides[i];
      span = t.strides[i] * t.shape[i];
      first = false;
    } else {
      if (t.strides[i] != span) return false;
      span *= t.shape[i];
    }
  }
  return true;
}

Layout make_layout(const SoftmaxBackwardArgs& a) {
  Layout l;
  const int rank = a.gradOutput.ndim;
  int64_t dim = a.dim;
  if (dim < 0) dim += std::max(rank, 1);
  l.dim = int(dim);
  for (int i = 0; i < rank; ++i) {
    if (i < l.dim) l.outer *= a.gradOutput.shape[i];
    else if (i == l.dim) l.size = a.gradOutput.shape[i];
    else l.inner *= a.gradOutput.shape[i];
  }
  l.contiguous = a.gradOutput.is_contiguous() && a.output.is_contiguous() && a.out.is_contiguous();
  if (l.contiguous) {
    for (int64_t& k : l.slab_stride) k = l.size * l.inner;
  } else if (l.inner > 1 && rank > 0) {
    l.slabs = slab_stride(a.gradOutput, l.dim, l.slab_stride[0]) && slab_stride(a.output, l.dim, l.slab_stride[1]) &&
              slab_stride(a.out, l.dim, l.slab_stride[2]);
  }
  if (l.contiguous && l.inner == 1) l.row_chunks = std::max<int64_t>(1, (l.size + kRowChunk - 1) / kRowChunk);
  return l;
}

// ---------------------------------------------------------------------------------------------
// Row kernels (contiguous along the dim).

// sum(g * y) over a row: four accumulators, combined as (a0 + a1) + (a2 + a3), then reduce_add.
// g and y load as pairs (one layout, and the sum needs a fixed order, not element order).
// dot_accumulate adds the products of [i, n) (i a multiple of 4 * kWidth) into a0..a3.
template <class T>
ACLNN_ALWAYS_INLINE void dot_accumulate(const T* g, const T* y, int64_t i, int64_t n, VecF& a0, VecF& a1, VecF& a2,
                                        VecF& a3) {
  for (; i + 4 * kWidth <= n; i += 4 * kWidth) {
    const Pair g0 = load_pair(g + i), y0 = load_pair(y + i);
    const Pair g1 = load_pair(g + i + 2 * kWidth), y1 = load_pair(y + i + 2 * kWidth);
    a0 = fma(g0.a, y0.a, a0);
    a1 = fma(g0.b, y0.b, a1);
    a2 = fma(g1.a, y1.a, a2);
    a3 = fma(g1.b, y1.b, a3);
  }
  for (; i + kWidth <= n; i += kWidth) a0 = fma(load(g + i), load(y + i), a0);
  if (i < n) a1 = fma(load_partial(g + i, n - i), load_partial(y + i, n - i), a1);
}

template <class T>
ACLNN_ALWAYS_INLINE VecF dot_lanes(const T* g, const T* y, int64_t n) {
  VecF a0 = zero(), a1 = zero(), a2 = zero(), a3 = zero();
  dot_accumulate(g, y, 0, n, a0, a1, a2, a3);
  return (a0 + a1) + (a2 + a3);
}

template <class T>
float dot_row(const T* g, const T* y, int64_t n) {
  return reduce_add(dot_lanes(g, y, n));
}

template <bool kStream, class T, class O>
void write_row(StreamCursor<kStream>& cursor, const T* g, const T* y, O* out, int64_t n, float sum) {
  const VecF s = set1(sum);
  const auto value = [&](int64_t i, int64_t count) __attribute__((always_inline)) {
    if (count == kWidth) return load(y + i) * (load(g + i) - s);
    return load_partial(y + i, count) * (load_partial(g + i, count) - s);
  };
  if constexpr (kSameLayout<T, O>) {  // pairs line up lane for lane from inputs to out
    store_run_pairs(cursor, out, n, [&](int64_t i) __attribute__((always_inline)) {
      const Pair gp = load_pair(g + i), yp = load_pair(y + i);
      return Pair{yp.a * (gp.a - s), yp.b * (gp.b - s)};
    }, value);
  } else {
    store_run(cursor, out, n, value);
  }
}

// Rows of at most kRegisterRow elements (AVX-512: 8 vectors, 16 registers for g and y) are
// loaded and converted once and kept in registers from the dot product to the write, where
// write_row loads and converts them again. The dot product adds in dot_lanes's order exactly
// (Quads blocks of two pairs into a0..a3, then up to three single vectors into a0, the partial
// tail into a1), and each output is the same y * (g - sum), so the results are bitwise those
// of dot_row + write_row (which the strided path keeps using). In-process A/B against those,
// 2 threads: [96, 128, 128] (BERT attention) 0.81-0.86x the time in fp16, 0.77-0.98x bf16,
// 0.89-0.99x fp32; rows of 37, 64, 100 and 120 elements 0.67-0.93x. The loops must unroll:
// rolled, GCC kept the Pair arrays on the stack.
constexpr int64_t kRegisterRow = kWidth == 16 ? 8 * kWidth : 0;
// Rows shorter than kShortRow run as register rows too from this length on (AVX-512): the flat
// path's per-row sums are chains of n - 1 dependent additions, the register row's sum a tree.
// In-process A/B against the flat path, 2 threads, [8192, n]: fp32 0.81x the time at n = 16,
// 0.64x at 20, 0.42x at 31; fp16 1.21x at 16, 1.02x at 18, 0.89x at 20, 0.53x at 31; bf16
// 1.31x at 16, 1.02x at 20, 0.89x at 22, 0.60x at 31 (16-bit rows pay their conversions per
// row). [8192, 31] fp32 had taken 1.4x torch's time.
template <class T>
constexpr int64_t kShortRegisterRow = sizeof(T) == 4 ? kWidth : std::is_same<T, half_t>::value ? 20 : 22;

// Whether contiguous rows of n elements take the flat path (short_rows).
template <class T, class O>
constexpr bool flat_rows(int64_t n) {
  return n < kShortRow && !(kSameLayout<T, O> && kRegisterRow > 0 && n >= kShortRegisterRow<T>);
}

// The first Quads blocks of two pairs of g and y into gp/yp, their products added into a0..a3
// as dot_accumulate adds them.
template <int Quads, class T>
ACLNN_ALWAYS_INLINE void load_quads(const T* g, const T* y, Pair* gp, Pair* yp, VecF& a0, VecF& a1, VecF& a2,
                                    VecF& a3) {
#pragma GCC unroll 4
  for (int q = 0; q < 2 * Quads; q += 2) {
    gp[q] = load_pair(g + q * 2 * kWidth);
    yp[q] = load_pair(y + q * 2 * kWidth);
    gp[q + 1] = load_pair(g + (q + 1) * 2 * kWidth);
    yp[q + 1] = load_pair(y + (q + 1) * 2 * kWidth);
    a0 = fma(gp[q].a, yp[q].a, a0);
    a1 = fma(gp[q].b, yp[q].b, a1);
    a2 = fma(gp[q + 1].a, yp[q + 1].a, a2);
    a3 = fma(gp[q + 1].b, yp[q + 1].b, a3);
  }
}

// The outputs of what load_quads loaded: y * (g - s), pair by pair.
template <int Quads, bool kStream, class O>
ACLNN_ALWAYS_INLINE void store_quads(StreamCursor<kStream>& cursor, O* out, const Pair* gp, const Pair* yp, VecF s) {
#pragma GCC unroll 4
  for (int k = 0; k < 2 * Quads; ++k)
    cursor.put_pair(out + k * 2 * kWidth, Pair{yp[k].a * (gp[k].a - s), yp[k].b * (gp[k].b - s)});
}

template <int Quads, bool kStream, class T, class O>
ACLNN_ALWAYS_INLINE void register_row(StreamCursor<kStream>& cursor, const T* g, const T* y, O* out, int64_t n) {
  Pair gp[2 * Quads + 1], yp[2 * Quads + 1];
  VecF a0 = zero(), a1 = zero(), a2 = zero(), a3 = zero();
  load_quads<Quads>(g, y, gp, yp, a0, a1, a2, a3);
  const int64_t i0 = Quads * 4 * kWidth;
  const int64_t singles = (n - i0) / kWidth, tail = n - i0 - singles * kWidth;
  VecF gs[3] = {}, ys[3] = {}, gt = zero(), yt = zero();  // (zeroed: GCC cannot see that k < singles guards them)
#pragma GCC unroll 3
  for (int k = 0; k < 3; ++k) {
    if (k < singles) {
      gs[k] = load(g + i0 + k * kWidth);
      ys[k] = load(y + i0 + k * kWidth);
      a0 = fma(gs[k], ys[k], a0);
    }
  }
  const int64_t it = i0 + singles * kWidth;
  if (tail > 0) {
    gt = load_partial(g + it, tail);
    yt = load_partial(y + it, tail);
    a1 = fma(gt, yt, a1);
  }
  const VecF s = set1(reduce_add((a0 + a1) + (a2 + a3)));
  store_quads<Quads>(cursor, out, gp, yp, s);
#pragma GCC unroll 3
  for (int k = 0; k < 3; ++k)
    if (k < singles) cursor.put(out + i0 + k * kWidth, ys[k] * (gs[k] - s));
  if (tail > 0) cursor.put_partial(out + it, yt * (gt - s), tail);
}

// Rows of kRegisterRow to kHeadRegisterRow elements: their first kRegisterRow elements are held
// in registers from the dot product to the write, the rest is loaded again (dot_lanes's order
// throughout, so the results are bitwise those of dot_row + write_row). In-process A/B against
// those, 2 threads: rows of 130-250 elements 0.76-0.92x the time in fp32, 0.89-0.98x fp16,
// 0.81-1.00x bf16; ViT attention [16, 12, 197, 197] 0.86-0.93x. From 256 elements on it
// measured 0.95-1.05x, so longer rows keep the plain path.
constexpr int64_t kHeadRegisterRow = 2 * kRegisterRow;

template <bool kStream, class T, class O>
void head_register_rows(StreamCursor<kStream>& cursor, const T* g, const T* y, O* out, int64_t rows, int64_t n) {
  constexpr int64_t kHead = 8 * kWidth;  // == kRegisterRow
  for (int64_t r = 0; r < rows; ++r, g += n, y += n, out += n) {
    Pair gp[4], yp[4];
    VecF a0 = zero(), a1 = zero(), a2 = zero(), a3 = zero();
    load_quads<2>(g, y, gp, yp, a0, a1, a2, a3);
    dot_accumulate(g, y, kHead, n, a0, a1, a2, a3);
    const float sum = reduce_add((a0 + a1) + (a2 + a3));
    store_quads<2>(cursor, out, gp, yp, set1(sum));
    write_row(cursor, g + kHead, y + kHead, out + kHead, n - kHead, sum);
  }
}

// fp16 rows of kHeadRegisterRow to kBufferedRow elements: the dot product's converted pairs are
// kept in a stack buffer (16 KiB at most) for the write, which then converts only its output.
// fp16's conversions cost 2 cycles per 16 values each way on Zen 4 and bound its rows; the
// buffer's stores cost less than the second conversion. In-process A/B against dot_row +
// write_row, 2 threads, the same bits: [32, 1000] 0.94x the time, [256, 1000] 0.89-0.90x,
// [8, 2048] 0.92x, [24, 1500] 0.97x, [48, 300] 0.98x, [2000, 260] 1.00x; one thread
// 0.89-0.91x. fp32 took 1.17-1.23x (it converts nothing) and bf16 (two shifts per pair)
// 0.98-1.12x, so they keep the plain path.
constexpr int64_t kBufferedRow = 2048;
template <bool kStream, class T, class O>
void buffered_rows(StreamCursor<kStream>& cursor, const T* g, const T* y, O* out, int64_t rows, int64_t n) {
  constexpr int64_t kPairs = kBufferedRow / (2 * kWidth);
  Pair gp[kPairs], yp[kPairs];
  for (int64_t r = 0; r < rows; ++r, g += n, y += n, out += n) {
    VecF a0 = zero(), a1 = zero(), a2 = zero(), a3 = zero();
    int64_t i = 0, k = 0;
    // dot_accumulate's block loop, keeping the pairs. (dot_accumulate itself, taught to keep
    // them, gave the same bits but took 1.2-1.5x the time on [256, 1000]: processes alternated.)
    for (; i + 4 * kWidth <= n; i += 4 * kWidth, k += 2) {
      gp[k] = load_pair(g + i);
      yp[k] = load_pair(y + i);
      gp[k + 1] = load_pair(g + i + 2 * kWidth);
      yp[k + 1] = load_pair(y + i + 2 * kWidth);
      a0 = fma(gp[k].a, yp[k].a, a0);
      a1 = fma(gp[k].b, yp[k].b, a1);
      a2 = fma(gp[k + 1].a, yp[k + 1].a, a2);
      a3 = fma(gp[k + 1].b, yp[k + 1].b, a3);
    }
    dot_accumulate(g, y, i, n, a0, a1, a2, a3);
    const float sum = reduce_add((a0 + a1) + (a2 + a3));
    const VecF s = set1(sum);
    for (int64_t j = 0; j < k; ++j)
      cursor.put_pair(out + j * 2 * kWidth, Pair{yp[j].a * (gp[j].a - s), yp[j].b * (gp[j].b - s)});
    write_row(cursor, g + i, y + i, out + i, n - i, sum);
  }
}

template <int Quads, bool kStream, class T, class O>
void register_rows(StreamCursor<kStream>& cursor, const T* g, const T* y, O* out, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) register_row<Quads>(cursor, g + r * n, y + r * n, out + r * n, n);
}

// Rows [begin, end) of n <= kRegisterRow elements.
template <bool kStream, class T, class O>
void register_rows(StreamCursor<kStream>& cursor, const T* g, const T* y, O* out, int64_t begin, int64_t end, int64_t n) {
  const int64_t base = begin * n, rows = end - begin;
  if (n >= 8 * kWidth) register_rows<2>(cursor, g + base, y + base, out + base, rows, n);
  else if (n >= 4 * kWidth) register_rows<1>(cursor, g + base, y + base, out + base, rows, n);
  else register_rows<0>(cursor, g + base, y + base, out + base, rows, n);
}

template <class O>
inline void put(O* p, float v) {
  *p = from_float<O>(v);
}
template <>
inline void put<double>(double* p, float v) {
  *p = double(v);
}

// Rows shorter than kShortRow: a per-row reduction would cost more than the row itself, so a
// block of rows is handled flat: products vectorised into a buffer, each row summed in order
// and its sum spread over the row's slots, then the output vectorised over the whole block.

// Sums each row of `rows` rows of N floats in order and overwrites the row with its sum. N is a
// compile-time constant so the loops unroll; sum_spread_any is the fallback. Every sum of the op
// starts from +0.0, as the vector accumulators do: 0.0f + row[0] is row[0] but for -0.0, so a
// row of -0.0 products sums to +0.0 on every path (it had summed to -0.0 here and to +0.0 in
// the columns, so a layout that moved a short row between the two paths changed zeros' signs).
template <int N>
void sum_spread(float* buffer, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = buffer + r * N;
    float sum = 0.0f + row[0];
    for (int k = 1; k < N; ++k) sum += row[k];
    for (int k = 0; k < N; ++k) row[k] = sum;
  }
}

void sum_spread_any(float* buffer, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = buffer + r * n;
    float sum = 0.0f + row[0];
    for (int64_t k = 1; k < n; ++k) sum += row[k];
    for (int64_t k = 0; k < n; ++k) row[k] = sum;
  }
}

template <int... Ns>
void sum_spread_dispatch(float* buffer, int64_t rows, int64_t n, std::integer_sequence<int, Ns...>) {
  bool done = ((n == Ns + 1 ? (sum_spread<Ns + 1>(buffer, rows), true) : false) || ...);
  if (!done) sum_spread_any(buffer, rows, n);
}

template <bool kStream, class T, class O>
void short_rows(const T* g, const T* y, O* out, int64_t rows, int64_t n) {
  const int64_t rows_per_block = kShortBlock / n;
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  parallel_for(blocks, std::max<int64_t>(1, kRowGrainElems / kShortBlock), [&](int64_t begin, int64_t end) {
    alignas(64) float buffer[kShortBlock];
    StreamCursor<kStream> cursor;
    for (int64_t b = begin; b < end; ++b) {
      const int64_t r0 = b * rows_per_block, nr = std::min(rows_per_block, rows - r0);
      const int64_t m = nr * n, base = r0 * n;
      const T* gb = g + base;
      const T* yb = y + base;
      O* ob = out + base;
      int64_t i = 0;
      for (; i + kWidth <= m; i += kWidth) store(buffer + i, load(gb + i) * load(yb + i));
      if (i < m) store_partial(buffer + i, load_partial(gb + i, m - i) * load_partial(yb + i, m - i), m - i);
      sum_spread_dispatch(buffer, nr, n, std::make_integer_sequence<int, kShortRow - 1>{});
      store_run(cursor, ob, m, [&](int64_t k, int64_t count) __attribute__((always_inline)) {
        if (count == kWidth) return load(yb + k) * (load(gb + k) - load(buffer + k));
        return load_partial(yb + k, count) * (load_partial(gb + k, count) - load_partial(buffer + k, count));
      });
    }
    cursor.flush();
    if (kStream) stream_fence();
  });
}

// Contiguous rows [begin, end) of n elements, n at least kShortRow and at most kRowChunk, on
// the calling thread (the caller fences streamed stores).
template <bool kStream, class T, class O>
void rows_range(StreamCursor<kStream>& cursor, const T* g, const T* y, O* out, int64_t begin, int64_t end, int64_t n) {
  if constexpr (kSameLayout<T, O> && kRegisterRow > 0) {
    if (n <= kRegisterRow) return register_rows(cursor, g, y, out, begin, end, n);
    if (n <= kHeadRegisterRow)
      return head_register_rows(cursor, g + begin * n, y + begin * n, out + begin * n, end - begin, n);
    if (std::is_same<T, half_t>::value && n <= kBufferedRow)
      return buffered_rows(cursor, g + begin * n, y + begin * n, out + begin * n, end - begin, n);
  }
  for (int64_t r = begin; r < end; ++r) {
    const int64_t base = r * n;
    write_row(cursor, g + base, y + base, out + base, n, dot_row(g + base, y + base, n));
  }
}

template <bool kStream, class T, class O>
void rows_path(const T* g, const T* y, O* out, const Layout& l, float* partials) {
  const int64_t n = l.size;
  if (flat_rows<T, O>(n)) return short_rows<kStream>(g, y, out, l.outer, n);
  if (l.row_chunks == 1) {
    parallel_for(l.outer, std::max<int64_t>(1, kRowGrainElems / n), [&](int64_t begin, int64_t end) {
      StreamCursor<kStream> cursor;
      rows_range(cursor, g, y, out, begin, end, n);
      cursor.flush();
      if (kStream) stream_fence();
    });
    return;
  }
  // Long rows: fixed chunks of kRowChunk elements, chunk t = r * chunks + c. Each chunk's dot
  // product goes to partials[t]; a row's sum adds its partials in chunk order (whoever computes
  // it gets the same value), and each chunk is then written with it.
  const int64_t chunks = l.row_chunks;
  const auto chunk_sum = [&](int64_t t) {
    const int64_t c = t % chunks, start = (t / chunks) * n + c * kRowChunk;
    partials[t] = dot_row(g + start, y + start, std::min(kRowChunk, n - c * kRowChunk));
  };
  const auto row_sum = [&](int64_t r) {
    float sum = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) sum += partials[r * chunks + k];
    return sum;
  };
  const auto chunk_write = [&](StreamCursor<kStream>& cursor, int64_t t, float sum) {
    const int64_t c = t % chunks, start = (t / chunks) * n + c * kRowChunk;
    write_row(cursor, g + start, y + start, out + start, std::min(kRowChunk, n - c * kRowChunk), sum);
  };
  if (l.outer >= kWholeRowTasks * num_threads()) {
    // Enough rows for every thread: a task per row, its chunk sums and then its writes, so the
    // write rereads the row from L2 rather than L3. In two passes over all rows (below),
    // [16, 50257] (GPT-2 logits) fp32 took 87 us, torch 71.
    parallel_for(l.outer, 1, [&](int64_t begin, int64_t end) {
      StreamCursor<kStream> cursor;
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t t = r * chunks; t < (r + 1) * chunks; ++t) chunk_sum(t);
        const float sum = row_sum(r);
        for (int64_t t = r * chunks; t < (r + 1) * chunks; ++t) chunk_write(cursor, t, sum);
      }
      cursor.flush();
      if (kStream) stream_fence();
    });
    return;
  }
  // Few rows: chunks are the tasks, so that every thread works; all sums, then all writes.
  const int64_t tasks = l.outer * chunks;
  parallel_for(tasks, 2, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) chunk_sum(t);
  });
  // Each row's sum once, kept in its first chunk's slot (fewer than 2 * threads rows). Added up
  // again for every chunk, the sums cost chunks^2 additions a row: a row of 2^30 fp16 elements
  // (65,536 chunks) took 3.7 ns an element on one thread instead of 0.34.
  for (int64_t r = 0; r < l.outer; ++r) partials[r * chunks] = row_sum(r);
  parallel_for(tasks, 2, [&](int64_t begin, int64_t end) {
    StreamCursor<kStream> cursor;
    for (int64_t t = begin; t < end; ++t) chunk_write(cursor, t, partials[(t / chunks) * chunks]);
    cursor.flush();
    if (kStream) stream_fence();
  });
}

// ---------------------------------------------------------------------------------------------
// Column kernels (contiguous, dim not last): a [size x width] tile at stride `inner`.

template <bool kStream, class T, class O>
void column_tile(const T* g, const T* y, O* out, int64_t size, int64_t inner, int64_t width) {
  alignas(64) float acc[kMaxBlock];
  const int64_t full = width - width % kWidth;
  for (int64_t j = 0; j < width; ++j) acc[j] = 0.0f;
  // The last width - full columns (the last inner % kWidth of the dim: j0 is a multiple of
  // kWidth) sum in a register across the rows: a masked store of acc reloaded by the next row
  // would miss store forwarding.
  const int64_t tail = width - full;
  VecF tail_acc = zero();
  for (int64_t d = 0; d < size; ++d) {
    const T* gd = g + d * inner;
    const T* yd = y + d * inner;
    int64_t j = 0;
    for (; j < full; j += kWidth) store(acc + j, fma(load(gd + j), load(yd + j), load(acc + j)));
    if (tail > 0) tail_acc = fma(load_partial(gd + full, tail), load_partial(yd + full, tail), tail_acc);
  }
  if (tail > 0) store_partial(acc + full, tail_acc, tail);
  for (int64_t d = 0; d < size; ++d) {
    const T* gd = g + d * inner;
    const T* yd = y + d * inner;
    O* od = out + d * inner;
    store_run<kStream>(od, width, [&](int64_t j, int64_t count) __attribute__((always_inline)) {
      if (count == kWidth) return load(yd + j) * (load(gd + j) - load(acc + j));
      return load_partial(yd + j, count) * (load_partial(gd + j, count) - load_partial(acc + j, count));
    });
  }
}

template <bool kStream, class T, class O>
void columns_path(const T* g, const T* y, O* out, const Layout& l) {
  // Block width (the sums do not depend on it): long contiguous runs per row keep the hardware
  // prefetchers streaming, the tile's inputs should stay in cache between the sum and the
  // write, and there should be a few blocks per thread.
  const int64_t tile_width = kTileBytes / std::max<int64_t>(1, l.size * 2 * int64_t(sizeof(T)));
  // Narrower blocks for the threads only where the call is worth threads: on one thread they
  // only add per-row work ([91, 146] over dim 0 ran as ten blocks of 16 columns: 7.6 us, torch
  // 4.5; one block: 4.3-5.0 us), and no block narrower than a vector beside a wide one.
  const bool threaded = l.outer * l.size * l.inner >= 2 * kGrainElems;
  const int64_t per_thread =
      threaded ? (l.outer * l.inner + 4 * num_threads() - 1) / (4 * num_threads()) : l.inner;
  int64_t width = std::min({tile_width, kRunBytes / int64_t(sizeof(T)), per_thread});
  if (width < l.inner) width = std::max<int64_t>(kWidth, width - width % kWidth);  // else one block
  width = std::min(width, l.inner);
  const int64_t blocks = (l.inner + width - 1) / width;
  const int64_t tasks = l.outer * blocks;
  const int64_t grain = std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, l.size * width));
  parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / blocks, b = t % blocks;
      const int64_t j0 = b * width, w = std::min(width, l.inner - j0);
      const int64_t* at = l.slab_stride;
      column_tile<kStream>(g + o * at[0] + j0, y + o * at[1] + j0, out + o * at[2] + j0, l.size, l.inner, w);
    }
    if (kStream) stream_fence();
  });
}

// `slabs` contiguous [size, inner] slabs one after another, on the calling thread: each in
// column tiles of a width the sums do not depend on (the widest columns_path takes).
template <bool kStream, class T, class O>
void slabs_range(const T* g, const T* y, O* out, int64_t slabs, int64_t size, int64_t inner) {
  int64_t width = kRunBytes / int64_t(sizeof(T));
  width = std::min(std::max<int64_t>(kWidth, width - width % kWidth), inner);
  for (int64_t s = 0; s < slabs; ++s)
    for (int64_t j0 = 0; j0 < inner; j0 += width) {
      const int64_t at = s * size * inner + j0;
      column_tile<kStream>(g + at, y + at, out + at, size, inner, std::min(width, inner - j0));
    }
}

// ---------------------------------------------------------------------------------------------
// General strided path: one row per combination of the other dims' indices.

// Elements of T a strided row gathers at a time (a multiple of 4 * kWidth, so the gathered
// pieces continue dot_accumulate's blocks exactly).
constexpr int64_t kGather = 1024;

// The sum of a row of n elements at strides dg, dy, in the order the contiguous rows path sums
// a row of n (flat rows one product after another; otherwise dot_row per chunk of kRowChunk,
// several chunks added in order from 0.0f), through stack buffers, so that a row's result
// does not depend on its strides. (Summed in one sequential chain, a sliced row of 3M elements
// was off by 280 times the contiguous row's error.)
template <class T, class O>
float strided_row_sum(const T* g, const T* y, int64_t dg, int64_t dy, int64_t n) {
  if (n == 0) return 0.0f;
  if (dg == 1 && dy == 1 && !flat_rows<T, O>(n)) {  // adjacent elements: no copies needed
    if (n <= kRowChunk) return dot_row(g, y, n);
    float sum = 0.0f;
    for (int64_t c0 = 0; c0 < n; c0 += kRowChunk) sum += dot_row(g + c0, y + c0, std::min(kRowChunk, n - c0));
    return sum;
  }
  if (flat_rows<T, O>(n)) {
    float sum = 0.0f + to_float(g[0]) * to_float(y[0]);  // from +0.0, as sum_spread
    for (int64_t d = 1; d < n; ++d) sum += to_float(g[d * dg]) * to_float(y[d * dy]);
    return sum;
  }
  alignas(64) T gb[kGather], yb[kGather];
  const auto chunk_sum = [&](int64_t c0, int64_t len) {
    VecF a0 = zero(), a1 = zero(), a2 = zero(), a3 = zero();
    for (int64_t i = 0; i < len; i += kGather) {
      const int64_t m = std::min(kGather, len - i);
      gather_run(gb, g + (c0 + i) * dg, m, dg);
      gather_run(yb, y + (c0 + i) * dy, m, dy);
      dot_accumulate(gb, yb, 0, m, a0, a1, a2, a3);
    }
    return reduce_add((a0 + a1) + (a2 + a3));
  };
  if (n <= kRowChunk) return chunk_sum(0, n);
  float sum = 0.0f;
  for (int64_t c0 = 0; c0 < n; c0 += kRowChunk) sum += chunk_sum(c0, std::min(kRowChunk, n - c0));
  return sum;
}

template <class T, class O>
void strided_path(const SoftmaxBackwardArgs& a, const Layout& l) {
  const TensorView& G = a.gradOutput;
  const TensorView& Y = a.output;
  const TensorView& R = a.out;
  // The other dims, in order; their row-major enumeration gives the rows.
  int m = 0;
  int64_t shape[kMaxDims], sg[kMaxDims], sy[kMaxDims], so[kMaxDims];
  for (int i = 0; i < G.ndim; ++i) {
    if (i == l.dim) continue;
    shape[m] = G.shape[i];
    sg[m] = G.strides[i];
    sy[m] = Y.strides[i];
    so[m] = R.strides[i];
    ++m;
  }
  const bool has_dim = G.ndim > 0;
  const int64_t dg = has_dim ? G.strides[l.dim] : 1;
  const int64_t dy = has_dim ? Y.strides[l.dim] : 1;
  const int64_t dout = has_dim ? R.strides[l.dim] : 1;
  const int64_t n = l.size;
  const bool unit = dg == 1 && dy == 1 && dout == 1;
  const T* g0 = G.ptr<const T>();
  const T* y0 = Y.ptr<const T>();
  O* out0 = R.ptr<O>();

  parallel_for(l.outer * l.inner, std::max<int64_t>(1, kGrainElems / n), [&](int64_t begin, int64_t end) {
    int64_t idx[kMaxDims] = {};
    int64_t og = 0, oy = 0, oo = 0;
    int64_t rest = begin;
    for (int k = m - 1; k >= 0; --k) {
      idx[k] = rest % shape[k];
      rest /= shape[k];
      og += idx[k] * sg[k];
      oy += idx[k] * sy[k];
      oo += idx[k] * so[k];
    }
    StreamCursor<false> plain;
    for (int64_t r = begin; r < end; ++r) {
      const T* g = g0 + og;
      const T* y = y0 + oy;
      O* out = out0 + oo;
      if (!unit && n <= kGather && !flat_rows<T, O>(n)) {
        // One gather: the row's sum and its outputs from the buffers (the same operations as
        // a contiguous row), the outputs scattered to their stride.
        alignas(64) T gb[kGather], yb[kGather];
        alignas(64) O ob[kGather];
        gather_run(gb, g, n, dg);
        gather_run(yb, y, n, dy);
        write_row(plain, gb, yb, ob, n, dot_row(gb, yb, n));
        scatter_run(out, ob, n, dout);
      } else if (unit) {
        write_row(plain, g, y, out, n, strided_row_sum<T, O>(g, y, dg, dy, n));
      } else {
        const float sum = strided_row_sum<T, O>(g, y, dg, dy, n);
        for (int64_t d = 0; d < n; ++d) put(out + d * dout, to_float(y[d * dy]) * (to_float(g[d * dg]) - sum));
      }
      // Next row: odometer increment over the other dims.
      for (int k = m - 1; k >= 0; --k) {
        og += sg[k];
        oy += sy[k];
        oo += so[k];
        if (++idx[k] < shape[k]) break;
        og -= sg[k] * shape[k];
        oy -= sy[k] * shape[k];
        oo -= so[k] * shape[k];
        idx[k] = 0;
      }
    }
  });
}

template <class T, class O>
void run_typed(const SoftmaxBackwardArgs& a, const Layout& l, float* partials) {
  if (!l.contiguous && !l.slabs) return strided_path<T, O>(a, l);
  const T* g = a.gradOutput.ptr<const T>();
  const T* y = a.output.ptr<const T>();
  O* out = a.out.ptr<O>();
  // Outputs of an op that overflows the last-level cache go out with streaming stores: rows
  // through a cursor per task (cursor_joins), a column tile's rows of `inner` elements when
  // they fit stream_runs_fit (slabs: when they keep the runs' line alignment).
  const uint64_t bytes = uint64_t(l.outer * l.size * l.inner) * (2 * sizeof(T) + sizeof(O));
  const bool fits = l.inner == 1 ? cursor_joins(out)
                                 : stream_runs_fit(out, uint64_t(l.inner) * sizeof(O)) &&
                                       (l.contiguous || uint64_t(l.slab_stride[2]) * sizeof(O) % 64 == 0);
  if (streams_worthwhile(bytes, 1) && fits) {
    if (l.inner == 1) rows_path<true>(g, y, out, l, partials);
    else columns_path<true>(g, y, out, l);
  } else {
    if (l.inner == 1) rows_path<false>(g, y, out, l, partials);
    else columns_path<false>(g, y, out, l);
  }
}

// The operands as staged (see prepare), in slot order.
enum StagedOperand { kG = 0, kY = 1, kO = 2 };

// Staged tasks (see prepare): each takes whole rows (or slabs) of the operands in row-major
// order, those that are not contiguous copied into its thread's slot, and runs the contiguous
// code on them there, so the copies stay in L2 instead of going through whole-tensor buffers.
template <class T, class O>
void run_staged_rows(const Layout& l, const Staging& st) {
  run_staged(st, [&](const StagedTask& task) {
    const T* g = task.in<const T>(kG);
    const T* y = task.in<const T>(kY);
    O* out = task.out<O>(kO);
    StreamCursor<false> plain;
    if (l.inner == 1) rows_range(plain, g, y, out, 0, task.count / l.size, l.size);
    else slabs_range<false>(g, y, out, task.count / (l.size * l.inner), l.size, l.inner);
  });
}

template <class T>
aclnnStatus run_staged_out(const SoftmaxBackwardArgs& a, const Layout& l, const Staging& st) {
  switch (a.out.dtype) {
    case DType::Float32: run_staged_rows<T, float>(l, st); return kSuccess;
    case DType::Float16: run_staged_rows<T, half_t>(l, st); return kSuccess;
    case DType::BFloat16: run_staged_rows<T, bfloat16_t>(l, st); return kSuccess;
    case DType::Float64: run_staged_rows<T, double>(l, st); return kSuccess;
    default: return kInner;
  }
}

template <class T>
aclnnStatus run_out(const SoftmaxBackwardArgs& a, const Layout& l, float* partials) {
  switch (a.out.dtype) {
    case DType::Float32: run_typed<T, float>(a, l, partials); return kSuccess;
    case DType::Float16: run_typed<T, half_t>(a, l, partials); return kSuccess;
    case DType::BFloat16: run_typed<T, bfloat16_t>(a, l, partials); return kSuccess;
    case DType::Float64: run_typed<T, double>(a, l, partials); return kSuccess;
    default: return kInner;
  }
}

}  // namespace

namespace {

// gradOutput, output and out sharing one dense layout whose dims are a permutation of row-major
// (a transposed matrix, a channels-last tensor): the same views with their dims in memory order
// and `dim` following its dim, so the contiguous paths run instead of the scalar strided one
// (softmax over the last dim of a transposed [512, 1024], 2 threads: 2.4 ms strided, torch
// 2.0 ms). Each value still sums its dim in a fixed order (that of the path its layout takes).
SoftmaxBackwardArgs in_memory_order(const SoftmaxBackwardArgs& a) {
  const TensorView& g = a.gradOutput;
  const int rank = g.ndim;
  if (rank < 2 || (g.is_contiguous() && a.output.is_contiguous() && a.out.is_contiguous())) return a;
  if (!g.same_layout(a.output) || !g.same_layout(a.out)) return a;
  int order[kMaxDims];  // outermost first
  if (!g.memory_order(0, order)) return a;  // not a dense permutation (gaps, zero strides)
  SoftmaxBackwardArgs m = a;
  for (TensorView* t : {&m.gradOutput, &m.output, &m.out}) {
    const TensorView before = *t;
    for (int k = 0; k < rank; ++k) {
      t->shape[k] = before.shape[order[k]];
      t->strides[k] = before.strides[order[k]];
    }
  }
  const int64_t dim = a.dim < 0 ? a.dim + rank : a.dim;
  for (int k = 0; k < rank; ++k)
    if (order[k] == dim) m.dim = k;
  return m;
}

}  // namespace

namespace {

// Rows along the last dim whose elements lie further apart than the vector moves reach (a
// transposed plane's rows, a channels-last tensor's rows along W) go dense when every such
// operand copies in vectors: one row gathered at a time, element by element, such rows of
// [8, 64, 56, 56] took 0.80 ms (transposed inputs) and 1.3-1.4 ms (channels-last), torch
// 0.4x and 0.2x of that.
bool rows_go_dense(const SoftmaxBackwardArgs& a, const Layout& l) {
  if (a.gradOutput.ndim == 0) return false;
  bool slow = false;
  for (const TensorView* t : {&a.gradOutput, &a.output, &a.out}) {
    const int64_t step = t->strides[l.dim];
    if (step_in_vectors(step) || t->shape[l.dim] == 1) continue;
    if (!copies_in_vectors(*t)) return false;
    slow = true;
  }
  return slow;
}

// The call as the kernel runs it: operands in a layout that neither the memory order nor
// unit-stride rows make fast are copied (staging.h), after the long rows' partials. Task by
// task where a task is whole rows of the contiguous rows path (rows of kShortRow to kRowChunk
// elements: the flat blocks of shorter rows and the chunks of longer ones stay on whole copies)
// or whole [size, inner] slabs of the columns path, so the call gives the contiguous call's
// bits; a transposed pair (transposed planes, channels-last) copies in tiles when a task is
// whole planes of it, or at least whole rows of its inner dim (staged_unit). Fortran-order
// operands, and calls whose rows or slabs do not fit a slot, are copied whole. `at` may be null
// (the size query).
Prepared<SoftmaxBackwardArgs, Layout> prepare(const SoftmaxBackwardArgs& given, char* at) {
  Prepared<SoftmaxBackwardArgs, Layout> p{in_memory_order(given), Layout{}, Staging(at)};
  p.plan = make_layout(p.args);
  const Layout& l = p.plan;
  if (p.args.gradOutput.numel() == 0) return p;
  if (!l.contiguous) {
    // Rows along the last dim mostly stay on the strided path: unit-stride ones run the row
    // kernels, others gather one row at a time, a single pass where dense copies take three
    // (a slice of every other element along the last dim of [8, 12, 128, 128]: 0.59 ms
    // strided, 0.82 dense), except rows far apart that copy in blocks (rows_go_dense). Dims
    // with an inner extent would step by `inner` element by element (a channel slice over dim
    // 1 of [8, 64, 32, 32]: 2.15 ms, torch 0.08): those run on their slabs in place where each
    // slab is contiguous (Layout::slabs), and are copied otherwise.
    if (l.inner > 1 ? !l.slabs : rows_go_dense(p.args, l)) {
      // (Not contiguous, so not in memory order either: p.args are the given operands.)
      Staging& s = p.staging;  // operands kG, kY, kO
      s.add(p.args.gradOutput, Staging::kIn, !p.args.gradOutput.is_contiguous());
      s.add(p.args.output, Staging::kIn, !p.args.output.is_contiguous());
      s.add(p.args.out, Staging::kOut, !p.args.out.is_contiguous());
      const bool whole_rows = l.inner > 1 || (l.size >= kShortRow && l.size <= kRowChunk);
      if (whole_rows && s.plan_tasks(l.outer * l.size * l.inner, l.size * l.inner, kRowGrainElems))
        return p;  // (no long rows: no kernel bytes)
      s.plan_whole();
      SoftmaxBackwardArgs dense = p.args;
      s.use_dense(kG, dense.gradOutput);
      s.use_dense(kY, dense.output);
      s.use_dense(kO, dense.out);
      p.args = in_memory_order(dense);
      p.plan = make_layout(p.args);
    }
  }
  p.kernel_bytes = l.row_chunks > 1 ? (uint64_t(l.outer * l.row_chunks) * sizeof(float) + 63) / 64 * 64 : 0;
  return p;
}

}  // namespace

uint64_t softmax_backward_workspace(const SoftmaxBackwardArgs& given) {
  return prepare(given, nullptr).bytes();
}

aclnnStatus softmax_backward(const SoftmaxBackwardArgs& given, void* workspace) {
  const auto p = prepare_in(workspace, [&](char* at) { return prepare(given, at); });
  if (p.args.gradOutput.numel() == 0) return kSuccess;
  if (p.staging.staged()) {
    switch (p.args.gradOutput.dtype) {
      case DType::Float32: return run_staged_out<float>(p.args, p.plan, p.staging);
      case DType::Float16: return run_staged_out<half_t>(p.args, p.plan, p.staging);
      case DType::BFloat16: return run_staged_out<bfloat16_t>(p.args, p.plan, p.staging);
      default: return kInner;
    }
  }
  p.staging.copy_in();
  float* partials = static_cast<float*>(workspace);
  aclnnStatus status = kInner;
  switch (p.args.gradOutput.dtype) {
    case DType::Float32: status = run_out<float>(p.args, p.plan, partials); break;
    case DType::Float16: status = run_out<half_t>(p.args, p.plan, partials); break;
    case DType::BFloat16: status = run_out<bfloat16_t>(p.args, p.plan, partials); break;
    default: break;
  }
  if (status == kSuccess) p.staging.copy_out();
  return status;
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
