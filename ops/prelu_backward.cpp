// aclnnPreluBackward kernel, one fused pass over gradOutput and self:
//   gradInput  = self > 0 ? gradOutput : weight[c] * gradOutput
//   gradWeight[c] = sum over channel c of (self > 0 ? 0 : self * gradOutput)
// (a NaN in self takes the weight branch and propagates into gradWeight, as PyTorch does).
//
// self is viewed as [N, W]: N = dim 0 and W = the rest when weight has one value per channel
// (channel c = j / HxW for position j of a row), else N = 1 and W = everything (one channel).
// The row dims are coalesced per layout, so contiguous data is one run per row and any strided
// or broadcast view (gradOutput may broadcast to self: stride 0) walks runs along its last
// dim. Two task shapes, both fixed by the shape alone so the sums never depend on threads:
//   * channel runs (HxW >= kChannelRunMin, or HxW >= kChannelRunPerRow * N): a task is a chunk
//     of one (n, c) plane; its partial sum goes to the workspace and gradWeight[c] adds them in
//     (n, chunk) order;
//   * column blocks (small HxW, e.g. [N, C] inputs): a task is a block of whole channels over
//     a fixed chunk of rows, accumulating per position in a stack array (vectorised across
//     channels); per-channel partials go to the workspace, combined in row-chunk order. When
//     each row of a block is one contiguous run, the run goes in pairs and two rows share one
//     load/store of the accumulators: with the data coming from DRAM, the accumulator stores
//     filled the store buffer beside gradInput's and halved the bandwidth (bf16 [32, 1024, 14,
//     14], 2 threads: 1.7-2.0 ms with single rows, 1.0 ms with two; channel runs 0.9-1.2 ms).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <type_traits>

#include "aclnn_cpu/flat_values.h"
#include "aclnn_cpu/ops/prelu_backward_args.h"
#include "aclnn_cpu/parallel.h"
#include "aclnn_cpu/simd.h"
#include "aclnn_cpu/staging.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

using namespace simd;

// Channel runs pay a horizontal sum per plane, column blocks a setup per task (weights and
// accumulators for the block, then per-channel sums) that only their rows amortise. Measured at
// 2 threads, channel runs against column blocks (fp32 and bf16): HxW 256 and 400 at N 1-128
// 0.54-0.97x the time; HxW 196 at N 1-2 0.75-0.93x, at N 4-32 0.86-1.36x; HxW 100 at N 1
// 0.87x, N 2 1.02-1.07x; HxW 64 at N 1 0.85-0.93x, N 2 1.11-1.20x; HxW 49 at N 1 1.09-1.19x.
constexpr int64_t kChannelRunMin = 256;   // HxW from which a task covers part of one plane,
constexpr int64_t kChannelRunPerRow = 64;  // or from this many positions per row of N
constexpr int64_t kPlaneChunk = 16384;    // elements of a plane per task (and per partial)
constexpr int64_t kColumnBlock = 2048;    // target positions per column block
constexpr int64_t kColumnSpan = kColumnBlock + kChannelRunMin;  // most positions of a block
constexpr int64_t kColumnTasks = 64;      // column mode aims for this many tasks,
// with at least this many rows each (when there are): a task's setup (its block's weights and
// accumulators, then per-channel sums) costs about as much as a few rows, and [64, 400] in 64
// one-row tasks took 120 us on one thread.
constexpr int64_t kColumnMinRows = 16;
// and at least this many elements each: narrow rows ([4096, 3]) made 64 tasks of 48-192
// elements, all on one thread (kGrainElems), each paying its setup.
constexpr int64_t kColumnMinElems = 4096;
// Fewest elements worth a thread of their own. 32768 left calls of 16K-32K elements on one
// thread; split in two they took 0.82-0.90x the time in fp32 ([1, 32, 32, 32], [2, 64, 16, 16],
// [1, 24, 32, 32]) and 0.92-0.99x in bf16, while splitting 16K-element calls gained nothing
// (0.99-1.05x). 2 threads, in-process A/B.
constexpr int64_t kGrainElems = 16384;
constexpr int64_t kGradWeightBlock = 1024;  // channels per block of gradWeight sums

enum Operand { kGo = 0, kX = 1, kGi = 2 };

// Row dims of the three elementwise tensors after coalescing, plus the row (dim 0) strides.
struct Layout {
  int64_t N = 1, W = 1, C = 1, HxW = 1;
  int m = 1;  // row dims (>= 1)
  int64_t shape[kMaxDims] = {1};
  int64_t stride[3][kMaxDims] = {{1}, {1}, {1}};
  int64_t row_stride[3] = {0, 0, 0};
  int64_t run_stride[3] = {1, 1, 1};  // strides along the last row dim
  bool channel_runs = true;
  // channel runs
  int64_t chunks_per_plane = 1;
  // column blocks
  int64_t channels_per_block = 1, blocks = 1, rows_per_chunk = 1, row_chunks = 1;
  int64_t fold = 1;  // > 1: a block's rows summed into `fold` accumulator copies (make_layout)
  bool fold_runs = false;  // fold > 1 with contiguous rows: `fold` rows per run
  bool unit_runs = false;  // one row dim, contiguous in all three: a block is one run per row

  int64_t partial_count() const { return channel_runs ? N * C * chunks_per_plane : row_chunks * C; }
  int64_t weight_floats() const { return channel_runs ? 0 : C; }
};

Layout make_layout(const PreluBackwardArgs& a) {
  Layout l;
  const TensorView& x = a.self;
  const int rank = x.ndim;
  // gradOutput's strides aligned to self's dims from the right; broadcast dims get stride 0.
  int64_t go_strides[kMaxDims] = {};
  const int shift = rank - a.gradOutput.ndim;
  for (int i = 0; i < a.gradOutput.ndim; ++i)
    go_strides[i + shift] = a.gradOutput.shape[i] == 1 ? 0 : a.gradOutput.strides[i];
  const int64_t* strides[3] = {go_strides, x.strides, a.gradInput.strides};

  const bool per_channel = rank >= 2 && a.weight.numel() != 1;
  const int first = per_channel ? 1 : 0;
  if (per_channel) {
    l.N = x.shape[0];
    l.C = x.shape[1];
    for (int t = 0; t < 3; ++t) l.row_stride[t] = strides[t][0];
  }
  l.W = 1;
  for (int i = first; i < rank; ++i) l.W *= x.shape[i];
  l.HxW = l.C > 0 ? l.W / l.C : 0;

  // Coalesce the row dims: drop size-1 dims, merge neighbours that are contiguous in all three.
  int m = 0;
  for (int i = first; i < rank; ++i) {
    if (x.shape[i] == 1) continue;
    bool merge = m > 0;
    for (int t = 0; t < 3 && merge; ++t) merge = l.stride[t][m - 1] == strides[t][i] * x.shape[i];
    if (merge) {
      l.shape[m - 1] *= x.shape[i];
      for (int t = 0; t < 3; ++t) l.stride[t][m - 1] = strides[t][i];
    } else {
      l.shape[m] = x.shape[i];
      for (int t = 0; t < 3; ++t) l.stride[t][m] = strides[t][i];
      ++m;
    }
  }
  if (m == 0) {  // a single position per row
    m = 1;
    l.shape[0] = 1;
    for (int t = 0; t < 3; ++t) l.stride[t][0] = 1;
  }
  l.m = m;
  for (int t = 0; t < 3; ++t) l.run_stride[t] = l.stride[t][m - 1];
  l.unit_runs = m == 1 && l.run_stride[kGo] == 1 && l.run_stride[kX] == 1 && l.run_stride[kGi] == 1;

  l.channel_runs = l.HxW >= kChannelRunMin || (l.N > 0 && l.HxW / kChannelRunPerRow >= l.N);
  if (l.channel_runs) {
    l.chunks_per_plane = std::max<int64_t>(1, (l.HxW + kPlaneChunk - 1) / kPlaneChunk);
  } else if (l.C > 0) {
    l.channels_per_block = std::max<int64_t>(1, kColumnBlock / std::max<int64_t>(1, l.HxW));
    // Blocks of whole 64-byte lines keep block starts as aligned as the rows are (streaming
    // stores need aligned lines): round the channel count down to a multiple of
    // line / gcd(HxW, line), line = 64 bytes in elements, when the block stays within
    // kColumnBlock positions.
    const int64_t line = 64 / int64_t(x.itemsize());
    const int64_t align = line / std::gcd<int64_t>(std::max<int64_t>(1, l.HxW), line);
    if (l.channels_per_block >= align) l.channels_per_block -= l.channels_per_block % align;
    l.blocks = (l.C + l.channels_per_block - 1) / l.channels_per_block;
    const int64_t wanted_chunks = std::max<int64_t>(1, (kColumnTasks + l.blocks - 1) / l.blocks);
    const int64_t row_chunks = std::min(std::max<int64_t>(l.N, 1), wanted_chunks);
    l.rows_per_chunk = std::max<int64_t>(1, (l.N + row_chunks - 1) / row_chunks);
    const int64_t block_row = std::max<int64_t>(1, std::min(l.channels_per_block * l.HxW, l.W));
    const int64_t min_rows = std::max(kColumnMinRows, (kColumnMinElems + block_row - 1) / block_row);
    l.rows_per_chunk = std::max(l.rows_per_chunk, std::min(l.N, min_rows));
    l.row_chunks = std::max<int64_t>(1, (l.N + l.rows_per_chunk - 1) / l.rows_per_chunk);
    bool rows_contiguous = l.blocks == 1 && l.m == 1 && l.shape[0] == l.W;
    for (int t = 0; t < 3; ++t)
      rows_contiguous = rows_contiguous && l.run_stride[t] == 1 && (l.N == 1 || l.row_stride[t] == l.W);
    // A block of whole rows narrower than a task's rows sums them `fold` at a time into as many
    // accumulator copies, added up in a fixed tree (fold_rows). fold follows from the shape
    // alone, so every layout sums in that order and gives the contiguous call's bits: contiguous
    // rows as one run of fold rows (fold_runs), others row by row into copy (n - n0) % fold.
    // (No more rows folded together than a task has: each folded copy costs the task a pass.)
    if (l.blocks == 1) l.fold = std::max<int64_t>(1, std::min(l.rows_per_chunk, kColumnBlock / std::max<int64_t>(1, l.W)));
    l.fold_runs = l.fold > 1 && rows_contiguous;
  }
  return l;
}

// Calls run(j, offsets, len) for the runs covering positions [j0, j1) of one row: stretches
// along the last row dim, offsets (in elements, from the row start) per operand.
template <class Run>
inline void for_runs(const Layout& l, int64_t j0, int64_t j1, Run&& run) {
  if (l.m == 1) {
    int64_t off[3];
    for (int t = 0; t < 3; ++t) off[t] = j0 * l.stride[t][0];
    run(j0, off, j1 - j0);
    return;
  }
  const int last = l.m - 1;
  int64_t idx[kMaxDims];
  int64_t off[3] = {0, 0, 0};
  int64_t rest = j0;
  for (int k = last; k >= 0; --k) {
    idx[k] = rest % l.shape[k];
    rest /= l.shape[k];
    for (int t = 0; t < 3; ++t) off[t] += idx[k] * l.stride[t][k];
  }
  int64_t j = j0;
  while (j < j1) {
    const int64_t len = std::min(l.shape[last] - idx[last], j1 - j);
    run(j, off, len);
    j += len;
    idx[last] += len;
    for (int t = 0; t < 3; ++t) off[t] += len * l.stride[t][last];
    if (idx[last] < l.shape[last]) continue;
    for (int t = 0; t < 3; ++t) off[t] -= l.shape[last] * l.stride[t][last];
    idx[last] = 0;
    for (int k = last - 1; k >= 0; --k) {
      for (int t = 0; t < 3; ++t) off[t] += l.stride[t][k];
      if (++idx[k] < l.shape[k]) break;
      for (int t = 0; t < 3; ++t) off[t] -= l.shape[k] * l.stride[t][k];
      idx[k] = 0;
    }
  }
}

// The backward of one vector of positions: gradInput = x > 0 ? gradOutput : gradOutput * w,
// and each position's contribution to the weight's gradient, x > 0 ? 0 : x * gradOutput.
struct Grads {
  VecF gi, dw;
};
ACLNN_ALWAYS_INLINE Grads grads(VecF xv, VecF gv, VecF wv) {
  const Mask positive = cmp_gt(xv, zero());
  return Grads{select(positive, gv, gv * wv), select(positive, zero(), xv * gv)};
}

// gradInput for the 2 * kWidth positions of a pair at x / go, with weight wv; their weight
// gradient contributions add into sum, lane by lane, the pair's first half first.
template <class T>
ACLNN_ALWAYS_INLINE Pair channel_pair(const T* x, const T* go, VecF wv, VecF& sum) {
  const Pair xv = load_pair(x), gv = load_pair(go);
  const Grads a = grads(xv.a, gv.a, wv), b = grads(xv.b, gv.b, wv);
  sum = sum + a.dw;
  sum = sum + b.dw;
  return Pair{a.gi, b.gi};
}

// channel_run for a contiguous run whose gradInput starts off a line, where single vectors are
// whole lines (fp32 on the AVX-512 level): the elements up to the first line go first, as a
// partial vector moved up to their lanes, then vectors start on lines and stream as on an
// aligned output. Their lanes are then turned by a constant against the lanes of the elements'
// positions, so the sums run in an accumulator turned likewise and turned back at the end
// (exact moves): each element still adds into the lane of its position, in position order.
// Joined into lines by the StreamCursor, such runs took 1.09-1.11x the time of aligned ones on
// one thread ([32, 128, 64, 64], out= 4-48 bytes past a line); from the line, 0.62x with out=
// and inputs 16 bytes past a line (NumPy's place), whose loads then stay within lines too.
template <class T>
inline void channel_run_from_line(const T* go, const T* x, T* gi, int64_t len, float w, int lane, VecF& acc) {
  const VecF wv = set1(w);
  const int64_t head = head_to<64>(gi, len);  // < kWidth: one vector of T is a line
  const auto part = [&](int64_t i, int64_t n, int turn) {  // zero lanes add 0
    const Grads g = grads(load_partial(x + i, n), load_partial(go + i, n), wv);
    store_partial(gi + i, g.gi, n);
    return rotate_lanes_up(g.dw, turn);
  };
  if (head > 0) acc = acc + part(0, head, lane);
  const int turn = int((lane + head) % kWidth);  // sum's lane k is acc's lane (k + turn) % kWidth
  VecF sum = rotate_lanes_up(acc, (kWidth - turn) % kWidth);
  const auto pair = [&](int64_t j) __attribute__((always_inline)) { return channel_pair(x + j, go + j, wv, sum); };
  int64_t i = pipelined(head, len, 2 * kWidth, pair,
                        [&](int64_t j, Pair v) __attribute__((always_inline)) { store_or_stream_pair<true>(gi + j, v); });
  for (; i + kWidth <= len; i += kWidth) {
    const Grads g = grads(load(x + i), load(go + i), wv);
    store_or_stream<true>(gi + i, g.gi);
    sum = sum + g.dw;
  }
  if (i < len) sum = sum + part(i, len - i, 0);
  acc = rotate_lanes_up(sum, turn);
}

// One run of a single channel with weight w: writes gradInput, adds the weight gradient
// contributions to acc. The run's first element goes to lane `lane` (its position from the
// task's start, modulo kWidth), so every element lands in the lane of its position and each lane
// sums its elements in position order, however the task's positions split into runs: a plane
// cut into rows by its layout (a slice along the last dim, rows reversed in memory, a gradInput
// view of its own) gives the bits of the contiguous call, whose plane is one run from lane 0.
template <bool kStream, class T>
inline void channel_run(StreamCursor<kStream>& cursor, const T* go, const T* x, T* gi, const int64_t* st,
                        int64_t len, float w, int lane, VecF& acc) {
  if (st[kGo] == 1 && st[kX] == 1 && st[kGi] == 1) {
    if constexpr (kStream && kLineStreams<T>) {
      if (!aligned_to<64>(gi) && aligned_to<sizeof(T)>(gi)) return channel_run_from_line(go, x, gi, len, w, lane, acc);
    }
    const VecF wv = set1(w);
    int64_t i = 0;
    if (lane != 0) {  // up to the next lane 0: a partial vector moved up to its lanes
      const int64_t n = std::min<int64_t>(len, kWidth - lane);
      const Grads g = grads(load_partial(x, n), load_partial(go, n), wv);  // zero lanes add 0
      cursor.put_partial(gi, g.gi, n);
      acc = acc + rotate_lanes_up(g.dw, lane);
      i = n;
    }
    // Pairs (w is a broadcast, so gradInput's pair lines up with the inputs'); both halves add
    // into the one accumulator, lane by lane in position order. Each pair is computed (and
    // summed, in order) two pairs before its store (simd::pipelined: loads must not wait on
    // the stores they alias modulo 4096).
    VecF sum = acc;  // a local, so it can stay in a register across the stores
    auto lines = cursor.lines();  // likewise the cursor's state
    const auto pair = [&](int64_t j) __attribute__((always_inline)) { return channel_pair(x + j, go + j, wv, sum); };
    i = pipelined(i, len, 2 * kWidth, pair,
                  [&](int64_t j, Pair v) __attribute__((always_inline)) { lines.put_pair(gi + j, v); });
    acc = sum;
    for (; i + kWidth <= len; i += kWidth) {
      const Grads g = grads(load(x + i), load(go + i), wv);
      lines.put(gi + i, g.gi);
      acc = acc + g.dw;
    }
    if (i < len) {
      const int64_t n = len - i;
      const Grads g = grads(load_partial(x + i, n), load_partial(go + i, n), wv);  // zero lanes add 0
      lines.put_partial(gi + i, g.gi, n);
      acc = acc + g.dw;
    }
    cursor.resume(lines);
    return;
  }
  alignas(64) float lanes[kWidth];  // the same lanes, element by element
  store(lanes, acc);
  for (int64_t i = 0; i < len; ++i) {
    const float xv = to_float(x[i * st[kX]]), gv = to_float(go[i * st[kGo]]);
    const bool positive = xv > 0.0f;
    gi[i * st[kGi]] = from_float<T>(positive ? gv : gv * w);
    lanes[(lane + i) % kWidth] += positive ? 0.0f : xv * gv;
  }
  acc = load(lanes);
}

// One run inside a column block: per-position weights and accumulators (index from the block
// start).
template <bool kStream, class T, class W>
inline void column_run(const T* go, const T* x, T* gi, const int64_t* st, int64_t len,
                       const W* w, float* acc) {
  if (st[kGo] == 1 && st[kX] == 1 && st[kGi] == 1) {
    int64_t i = 0;
    for (; i + kWidth <= len; i += kWidth) {
      const Grads g = grads(load(x + i), load(go + i), load(w + i));
      store_or_stream<kStream>(gi + i, g.gi);
      store(acc + i, load(acc + i) + g.dw);
    }
    if (i < len) {
      const int64_t n = len - i;
      const Grads g = grads(load_partial(x + i, n), load_partial(go + i, n), load_partial(w + i, n));
      store_partial(gi + i, g.gi, n);
      store_partial(acc + i, load_partial(acc + i, n) + g.dw, n);
    }
    return;
  }
  for (int64_t i = 0; i < len; ++i) {
    const float xv = to_float(x[i * st[kX]]), gv = to_float(go[i * st[kGo]]);
    const bool positive = xv > 0.0f;
    gi[i * st[kGi]] = from_float<T>(positive ? gv : gv * to_float(w[i]));
    acc[i] += positive ? 0.0f : xv * gv;
  }
}

// column_run over contiguous operands with pairs, so that a 16-bit pair's 2 * kWidth results go
// out as one (line-wide, streamable) store. The block's weights are kept in T itself when T's
// pairs split lanes (bf16: load_pair then yields them in the pair's lane order, at no more than
// the cost of an fp32 load), and the accumulators of the first pair_end(len) positions are in
// that lane order too (unpair_sums restores element order). Per position the arithmetic is
// column_run's, so the values are the same.
template <class T>
using ColumnWeight = std::conditional_t<kSplitPair<T>, T, float>;

inline int64_t pair_end(int64_t len) { return len - len % (2 * kWidth); }

// kRows rows at once (same block, rows given by their start pointers): the accumulators are
// loaded and stored once per kRows rows, which halves the stores competing with gradInput's for
// the store buffer when the data comes from DRAM; they still add the rows in row order.
// kFirst: the block's first rows, whose accumulators start from zero (+0.0f, as the zeroed
// buffer they stand for) without a read; past pair_end(len) they must be zeroed already.
template <bool kStream, int kRows, bool kFirst, class T>
inline void column_run_pairs(const T* const* go, const T* const* x, T* const* gi, int64_t len,
                             const ColumnWeight<T>* w, float* acc) {
  const int64_t end = pair_end(len);
  for (int64_t i = 0; i < end; i += 2 * kWidth) {
    const Pair wv = load_pair(w + i);
    VecF sa = kFirst ? zero() : load(acc + i), sb = kFirst ? zero() : load(acc + i + kWidth);
    // Unrolled, so that each load instruction walks one row: GCC kept this loop rolled for
    // bf16, and one load then alternated between two rows' lines, which the core's per-load
    // stride prefetcher cannot follow. bf16 [32, 1024, 14, 14] (38 MB) took 0.56x the time
    // unrolled (2 threads, processes alternated; one thread 0.54x); fp16 was unrolled already.
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const Pair xv = load_pair(x[r] + i), gv = load_pair(go[r] + i);
      const Grads a = grads(xv.a, gv.a, wv.a), b = grads(xv.b, gv.b, wv.b);
      store_or_stream_pair<kStream>(gi[r] + i, Pair{a.gi, b.gi});
      sa = sa + a.dw;
      sb = sb + b.dw;
    }
    store(acc + i, sa);
    store(acc + i + kWidth, sb);
  }
  static constexpr int64_t kUnit[3] = {1, 1, 1};
  for (int r = 0; r < kRows; ++r)
    column_run<kStream>(go[r] + end, x[r] + end, gi[r] + end, kUnit, len - end, w + end, acc + end);
}

// The accumulators of column_run_pairs for bf16 (even/odd lanes) in element order, into `out`.
inline void unpair_sums(const float* acc, float* out, int64_t len) {
  const int64_t end = pair_end(len);
  for (int64_t base = 0; base < end; base += 2 * kWidth)
    for (int k = 0; k < kWidth; ++k) {
      out[base + 2 * k] = acc[base + k];
      out[base + 2 * k + 1] = acc[base + kWidth + k];
    }
  std::copy(acc + end, acc + len, out + end);
}

// Each position of channels [c0, c1) gets its channel's weight, from the block start, in whole
// vectors: a channel's last vector runs into the next channel's positions, which that channel
// then overwrites, and the block's last one up to kWidth - 1 positions past the block (the
// buffers are kColumnSpan long, blocks at most kColumnBlock). With std::fill per channel this
// took a seventh of a [1, 1024, 7, 7] call.
template <class W>
inline void fill_block_weights(W* dst, const float* weights, int64_t c0, int64_t c1, int64_t HxW) {
  static_assert(kColumnSpan - kColumnBlock >= kWidth, "room for the last vector");
  if (HxW == 1) return convert_from_float(weights + c0, dst, c1 - c0);  // [N, C] inputs: a copy
  for (int64_t c = c0; c < c1; ++c) {
    const VecF w = set1(weights[c]);
    W* at = dst + (c - c0) * HxW;
    for (int64_t i = 0; i < HxW; i += kWidth) store(at + i, w);
  }
}

// rows[0, W) repeated to fill rows[0, W * count), the copied span doubling each step: a copy
// per row cost a call each, most of a task's time on narrow rows ([4096, 3]: 28 us a call).
inline void repeat_rows(float* rows, int64_t W, int64_t count) {
  for (int64_t have = 1; have < count;) {
    const int64_t more = std::min(have, count - have);
    std::copy(rows, rows + more * W, rows + have * W);
    have += more;
  }
}

// acc[p] for p < W becomes the sum of the `count` rows acc[r * W + p], in a fixed tree: the
// upper rows are added onto the lower ones in whole vectors, halving the count each step.
inline void fold_rows(float* acc, int64_t W, int64_t count) {
  while (count > 1) {
    const int64_t keep = (count + 1) / 2, n = (count - keep) * W;
    const float* upper = acc + keep * W;
    int64_t i = 0;
    for (; i + kWidth <= n; i += kWidth) store(acc + i, load(acc + i) + load(upper + i));
    if (i < n) store_partial(acc + i, load_partial(acc + i, n - i) + load_partial(upper + i, n - i), n - i);
    count = keep;
  }
}

// Sum of n floats in a fixed grouping: in order when short, else four vector accumulators
// from p, then the tail.
inline float sum_floats(const float* p, int64_t n) {
  if (n < 2 * kWidth) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += p[i];
    return sum;
  }
  VecF a0 = zero(), a1 = zero(), a2 = zero(), a3 = zero();
  int64_t i = 0;
  for (; i + 4 * kWidth <= n; i += 4 * kWidth) {
    a0 = a0 + load(p + i);
    a1 = a1 + load(p + i + kWidth);
    a2 = a2 + load(p + i + 2 * kWidth);
    a3 = a3 + load(p + i + 3 * kWidth);
  }
  for (; i + kWidth <= n; i += kWidth) a0 = a0 + load(p + i);
  if (i < n) a1 = a1 + load_partial(p + i, n - i);
  return reduce_add((a0 + a1) + (a2 + a3));
}

// Offset of the flat (row-major) element `i` of a tensor through its strides.
inline int64_t flat_offset(const TensorView& t, int64_t i) {
  if (t.ndim == 0) return 0;
  if (t.ndim == 1) return i * t.strides[0];
  int64_t off = 0;
  for (int k = t.ndim - 1; k >= 0; --k) {
    off += (i % t.shape[k]) * t.strides[k];
    i /= t.shape[k];
  }
  return off;
}

template <class T>
float weight_at(const TensorView& w, int64_t c) {
  return to_float(w.ptr<const T>()[flat_offset(w, w.numel() == 1 ? 0 : c)]);
}

// out[i] = ((0.0f + rows[i]) + rows[stride + i]) + ... over `count` rows, for i < n: each
// column summed in row order from 0.0f, as the scalar loops it stands for, a vector at a time.
inline void add_rows(const float* rows, int64_t count, int64_t n, int64_t stride, float* out) {
  const auto column = [&](int64_t i, int64_t lanes) __attribute__((always_inline)) {
    VecF sum = zero();
    for (int64_t r = 0; r < count; ++r)
      sum = sum + (lanes == kWidth ? load(rows + r * stride + i) : load_partial(rows + r * stride + i, lanes));
    if (lanes == kWidth) store(out + i, sum);
    else store_partial(out + i, sum, lanes);
  };
  for_each_vector(n, column);
}

// Channels in the first column block of a row. Blocks of whole lines (make_layout) start on a
// line when gradInput's rows do; rows a few bytes past one (np.empty puts big arrays 16 bytes
// past a line) begin the grid at the first channel that starts on a line, so that every block
// after the first starts on a line, and its pairs stream as on an aligned output (the first
// block, short, and the last one's tail do not). Only for blocks of whole rows' runs in pairs
// (fold 1) with every row at the same distance from a line. The grouping does not change the
// bits: each position adds its rows alone, each channel its positions from its own start.
// Returns channels_per_block where the grid stays.
template <class T>
int64_t column_lead(const T* gi, const Layout& l) {
  const int64_t per_block = l.channels_per_block;
  const uint64_t block_bytes = uint64_t(per_block * l.HxW) * sizeof(T);
  const uint64_t row_bytes = uint64_t(std::abs(l.row_stride[kGi])) * sizeof(T);
  if (l.channel_runs || !l.unit_runs || l.fold != 1 || l.blocks == 1 || block_bytes % 64 != 0 ||
      (l.N > 1 && row_bytes % 64 != 0) || aligned_to<64>(gi))
    return per_block;
  for (int64_t c = 1; c < per_block; ++c)
    if (aligned_to<64>(gi + c * l.HxW)) return c;
  return per_block;
}

template <class T>
void combine_grad_weight(const PreluBackwardArgs& a, const Layout& l, const float* partials);

template <bool kStream, class T>
void run_typed(const PreluBackwardArgs& a, const Layout& l, float* workspace) {
  const T* go0 = a.gradOutput.ptr<const T>();
  const T* x0 = a.self.ptr<const T>();
  T* gi0 = a.gradInput.ptr<T>();
  float* weights = workspace;  // column mode: fp32 copy of the weights
  // No elements: the workspace is 0 bytes and may be null, and null + offset is undefined.
  float* partials = workspace == nullptr ? nullptr : workspace + l.weight_floats();
  const int64_t numel = l.N * l.W;
  const int64_t* run_stride = l.run_stride;

  if (numel > 0 && l.channel_runs) {
    const int64_t chunks = l.chunks_per_plane;
    const int64_t tasks = l.N * l.C * chunks;
    const int64_t task_elems = std::min(kPlaneChunk, l.HxW);
    parallel_for(tasks, std::max<int64_t>(1, kGrainElems / task_elems), [&](int64_t begin, int64_t end) {
      StreamCursor<kStream> cursor;
      for (int64_t t = begin; t < end; ++t) {
        const int64_t plane = t / chunks, k = t % chunks;
        const int64_t n = plane / l.C, c = plane % l.C;
        const float w = weight_at<T>(a.weight, c);
        const int64_t j0 = c * l.HxW + k * kPlaneChunk;
        const int64_t j1 = c * l.HxW + std::min(l.HxW, (k + 1) * kPlaneChunk);
        const T* go = go0 + n * l.row_stride[kGo];
        const T* x = x0 + n * l.row_stride[kX];
        T* gi = gi0 + n * l.row_stride[kGi];
        VecF acc = zero();
        for_runs(l, j0, j1, [&](int64_t j, const int64_t* off, int64_t len) {
          const int lane = int((j - j0) % kWidth);
          channel_run(cursor, go + off[kGo], x + off[kX], gi + off[kGi], run_stride, len, w, lane, acc);
        });
        partials[t] = reduce_add(acc);
      }
      cursor.flush();
      if (kStream) stream_fence();
    });
  } else if (numel > 0) {
    read_floats<T>(a.weight, l.C, weights);  // (C values: the weight count, or 1 with C = 1)
    const int64_t span = l.channels_per_block * l.HxW;
    // Streamed rows off a line: the blocks after the first start on lines (column_lead).
    const int64_t lead = kStream ? column_lead(gi0, l) : l.channels_per_block;
    const int64_t blocks = lead == l.channels_per_block ? l.blocks : 1 + (l.C - lead + l.channels_per_block - 1) / l.channels_per_block;
    const int64_t tasks = l.row_chunks * blocks;
    const int64_t task_elems = std::max<int64_t>(1, l.rows_per_chunk * std::min(span, l.W));
    parallel_for(tasks, std::max<int64_t>(1, kGrainElems / task_elems), [&](int64_t begin, int64_t end) {
      alignas(64) float acc[kColumnSpan];
      alignas(64) float wcol[kColumnSpan];
      alignas(64) ColumnWeight<T> wpair[kColumnSpan];
      for (int64_t t = begin; t < end; ++t) {
        const int64_t rc = t / blocks, b = t % blocks;
        const int64_t c0 = b == 0 ? 0 : lead + (b - 1) * l.channels_per_block;
        const int64_t c1 = std::min(l.C, lead + b * l.channels_per_block);
        const int64_t j0 = c0 * l.HxW, j1 = c1 * l.HxW;
        const int64_t n0 = rc * l.rows_per_chunk, n1 = std::min(l.N, n0 + l.rows_per_chunk);
        const float* sums = acc;  // per-position sums in element order
        if (l.fold == 1 && l.unit_runs) {
          // Each row of the block is one contiguous run from j0: pairs. The first rows start
          // the accumulators (a zeroing pass took a fourteenth of a [1, 1024, 7, 7] call).
          fill_block_weights(wpair, weights, c0, c1, l.HxW);
          std::fill(acc + pair_end(j1 - j0), acc + (j1 - j0), 0.0f);
          const auto rows = [&](int64_t n, auto count, auto first) {
            constexpr int kRows = decltype(count)::value;
            const T* go[kRows];
            const T* x[kRows];
            T* gi[kRows];
            for (int r = 0; r < kRows; ++r) {
              go[r] = go0 + (n + r) * l.row_stride[kGo] + j0;
              x[r] = x0 + (n + r) * l.row_stride[kX] + j0;
              gi[r] = gi0 + (n + r) * l.row_stride[kGi] + j0;
            }
            column_run_pairs<kStream, kRows, decltype(first)::value>(go, x, gi, j1 - j0, wpair, acc);
          };
          using Two = std::integral_constant<int, 2>;
          using One = std::integral_constant<int, 1>;
          int64_t n = n0;
          if (n + 2 <= n1) rows(n, Two{}, std::true_type{}), n += 2;
          else rows(n, One{}, std::true_type{}), n += 1;  // (a chunk has at least one row)
          for (; n + 2 <= n1; n += 2) rows(n, Two{}, std::false_type{});
          if (n < n1) rows(n, One{}, std::false_type{});
          if (kSplitPair<T>) {
            unpair_sums(acc, wcol, j1 - j0);
            sums = wcol;
          }
        } else if (l.fold_runs) {
          // Short contiguous rows: `fold` rows at a time form one run, with the block's
          // weights and accumulators repeated per row; the copies are added up below.
          fill_block_weights(wcol, weights, c0, c1, l.HxW);
          repeat_rows(wcol, l.W, l.fold);
          std::fill(acc, acc + l.fold * l.W, 0.0f);
          for (int64_t n = n0; n < n1; n += l.fold) {
            const int64_t len = std::min(l.fold, n1 - n) * l.W;
            column_run<kStream>(go0 + n * l.W, x0 + n * l.W, gi0 + n * l.W, run_stride, len, wcol, acc);
          }
          fold_rows(acc, l.W, l.fold);
        } else {
          // Row by row; with fold > 1 (whole rows, so j0 = 0 and j1 = W) row n goes into
          // accumulator copy (n - n0) % fold, as the folded runs add it.
          fill_block_weights(wcol, weights, c0, c1, l.HxW);
          const int64_t span_elems = j1 - j0;
          std::fill(acc, acc + l.fold * span_elems, 0.0f);
          for (int64_t n = n0; n < n1; ++n) {
            const T* go = go0 + n * l.row_stride[kGo];
            const T* x = x0 + n * l.row_stride[kX];
            T* gi = gi0 + n * l.row_stride[kGi];
            float* copy = acc + (n - n0) % l.fold * span_elems;
            for_runs(l, j0, j1, [&](int64_t j, const int64_t* off, int64_t len) {
              column_run<kStream>(go + off[kGo], x + off[kX], gi + off[kGi], run_stride, len, wcol + (j - j0), copy + (j - j0));
            });
          }
          fold_rows(acc, span_elems, l.fold);
        }
        // Per-channel partial of this row chunk: the channel's positions, in a fixed grouping
        // (one position: sum_floats's 0.0f + value, a vector of channels at a time).
        if (l.HxW == 1) {
          add_rows(sums, 1, c1 - c0, 0, partials + rc * l.C + c0);
        } else {
          for (int64_t c = c0; c < c1; ++c) partials[rc * l.C + c] = sum_floats(sums + (c - c0) * l.HxW, l.HxW);
        }
      }
      if (kStream) stream_fence();
    });
  }

  combine_grad_weight<T>(a, l, partials);
}

// gradWeight[c]: the tasks' partials combined in a fixed order; zeros when there was nothing to
// sum. A NaN sum is written as the default quiet NaN (+, no payload): where NaNs of both signs
// meet (a NaN self beside an inf - inf), which one an add passes on depends on the form the
// compiler gave that add, which differs between the contiguous and the staged code, so the
// NaN's sign had followed the operands' layout.
template <class T>
void combine_grad_weight(const PreluBackwardArgs& a, const Layout& l, const float* partials) {
  const int64_t numel = l.N * l.W;
  const int64_t C = l.C;
  parallel_for(C, 4096, [&](int64_t begin, int64_t end) {
    alignas(64) float sums[kGradWeightBlock];
    for (int64_t c0 = begin; c0 < end; c0 += kGradWeightBlock) {
      const int64_t count = std::min(kGradWeightBlock, end - c0);
      if (numel == 0) {
        std::fill(sums, sums + count, 0.0f);
      } else if (!l.channel_runs || l.chunks_per_plane == 1) {
        // partials[r * C + c] for r < rows (row chunks, or samples with one chunk per plane).
        add_rows(partials + c0, l.channel_runs ? l.N : l.row_chunks, count, C, sums);
      } else {
        for (int64_t c = c0; c < c0 + count; ++c) {
          float sum = 0.0f;
          for (int64_t n = 0; n < l.N; ++n)
            for (int64_t k = 0; k < l.chunks_per_plane; ++k) sum += partials[(n * C + c) * l.chunks_per_plane + k];
          sums[c - c0] = sum;
        }
      }
      for (int64_t i = 0; i < count; ++i)
        if (sums[i] != sums[i]) sums[i] = std::numeric_limits<float>::quiet_NaN();
      write_floats<T>(sums, c0, count, a.gradWeight);
    }
  });
}

// Staged tasks (see prepare): on the channel-run schedule a task takes whole planes of
// gradOutput (broadcast to self's shape), self and gradInput, those that are not contiguous
// copied into its thread's slot, and runs each plane's chunks there as the contiguous call does
// (the same partials).
template <bool kStream, class T>
void run_staged_planes(const PreluBackwardArgs& a, const Layout& l, const Staging& st, float* partials) {
  const int64_t HxW = l.HxW, chunks = l.chunks_per_plane;
  const int64_t unit[3] = {1, 1, 1};
  run_staged(st, [&](const StagedTask& task) {
    const T* go = task.in<const T>(kGo);
    const T* x = task.in<const T>(kX);
    T* gi = task.out<T>(kGi);
    const int64_t p0 = task.first / HxW, p1 = p0 + task.count / HxW;
    StreamCursor<kStream> cursor;
    for (int64_t p = p0; p < p1; ++p) {
      const float w = weight_at<T>(a.weight, p % l.C);
      for (int64_t k = 0; k < chunks; ++k) {
        const int64_t at = (p - p0) * HxW + k * kPlaneChunk, len = std::min(kPlaneChunk, HxW - k * kPlaneChunk);
        VecF acc = zero();
        channel_run(cursor, go + at, x + at, gi + at, unit, len, w, 0, acc);
        partials[p * chunks + k] = reduce_add(acc);
      }
    }
    cursor.flush();
    if (kStream) stream_fence();
  });
  combine_grad_weight<T>(a, l, partials);
}

}  // namespace

// A channels-last tensor (dim 1 innermost, the other dims row-major around it: the memory of
// [N, H, W, C]) as rows of its C channels, [N * H * W, C] contiguous, when gradOutput, self and
// gradInput share that layout: per channel the same elements, on the column-block schedule
// instead of the strided one. [8, 64, 56, 56] channels-last, 2 threads: 6.8 ms strided (torch
// 6.1 ms). gradWeight then sums each channel's values in another fixed order.
static PreluBackwardArgs as_channel_rows(const PreluBackwardArgs& a) {
  const TensorView& x = a.self;
  if (a.weight.numel() == 1 || x.numel() == 0 || !x.is_channels_last() || !x.same_layout(a.gradOutput) ||
      !x.same_layout(a.gradInput))
    return a;
  PreluBackwardArgs rows = a;
  for (TensorView* t : {&rows.gradOutput, &rows.self, &rows.gradInput}) {
    *t = TensorView{t->data, t->dtype, 2, {x.numel() / x.shape[1], x.shape[1]}, {x.shape[1], 1}, t->present};
  }
  return rows;
}

// Transposed planes (dims 2 and on a dense permutation, dims 0 and 1 around them) as [N, C, P]
// with each plane in memory order, when gradOutput, self and gradInput share that layout:
// gradInput is elementwise, and each channel's gradWeight sum takes the plane's elements in
// memory order (another fixed order, as for channel rows). Through dense copies, transposed
// planes of [8, 64, 56, 56] took 10.9x the contiguous call's time (1.17 ms; torch 3.9 ms).
static PreluBackwardArgs as_planes_in_memory_order(const PreluBackwardArgs& a) {
  PreluBackwardArgs planes = a;
  to_planes_in_memory_order({&planes.self, &planes.gradOutput, &planes.gradInput});
  return planes;
}

namespace {

// The call as the kernel runs it: when a row's positions are not unit-stride in all three
// operands (a slice along the last dim, a transposed plane, a gradOutput broadcast along the
// rows), the operands that are not contiguous are copied (staging.h): task by task on the
// channel-run schedule, a task whole planes of about 64 KiB of each operand (staged_unit
// makes an operand that is a transposed pair copy in tiles), else whole into the workspace (a
// broadcast gradOutput is expanded to self's shape), after the kernel's floats. Element by
// element, such layouts had taken 38-44x the contiguous call's time ([8, 64, 56, 56]: a
// transposed plane 4.7 ms, torch 4.0 ms). `at` may be null (the size query).
Prepared<PreluBackwardArgs, Layout> prepare(const PreluBackwardArgs& given, char* at) {
  Prepared<PreluBackwardArgs, Layout> r{as_planes_in_memory_order(as_channel_rows(given)), Layout{}, Staging(at)};
  r.plan = make_layout(r.args);
  const bool empty = r.plan.N * r.plan.W == 0;
  const Layout& l = r.plan;
  if (!empty && (l.run_stride[kGo] != 1 || l.run_stride[kX] != 1 || l.run_stride[kGi] != 1)) {
    const TensorView& x = given.self;
    // gradOutput aligned to self's dims from the right, broadcast dims at stride 0.
    TensorView go_view = x;
    go_view.data = given.gradOutput.data;
    const int shift = x.ndim - given.gradOutput.ndim;
    for (int i = 0; i < x.ndim; ++i) {
      const int j = i - shift;
      go_view.strides[i] = j < 0 || given.gradOutput.shape[j] == 1 ? 0 : given.gradOutput.strides[j];
    }
    Staging& s = r.staging;  // operands kGo, kX, kGi
    s.add(go_view, Staging::kIn, !(given.gradOutput.is_contiguous() && given.gradOutput.same_layout(go_view)));
    s.add(x, Staging::kIn, !x.is_contiguous());
    s.add(given.gradInput, Staging::kOut, !given.gradInput.is_contiguous());
    // The kernel on the dense copies (channel rows where they apply); a staged call keeps their
    // layout's schedule, and reads gradOutput through go_view.
    const auto on_dense = [&] {
      PreluBackwardArgs dense = given;
      s.use_dense(kGo, dense.gradOutput);
      s.use_dense(kX, dense.self);
      s.use_dense(kGi, dense.gradInput);
      return as_channel_rows(dense);
    };
    r.args = on_dense();
    r.plan = make_layout(r.args);
    if (l.channel_runs && s.plan_tasks(l.N * l.C * l.HxW, l.HxW, kGrainElems)) {
      r.args = given;
    } else {
      s.plan_whole();
      r.args = on_dense();
    }
  }
  r.kernel_bytes = empty ? 0 : (uint64_t(l.weight_floats() + l.partial_count()) * sizeof(float) + 63) / 64 * 64;
  return r;
}

}  // namespace

uint64_t prelu_backward_workspace(const PreluBackwardArgs& given) {
  return prepare(given, nullptr).bytes();
}

namespace {

// gradInput goes out with streaming stores when the op overflows the last-level cache and its
// runs (planes or channel blocks, back to back in a row; rows at their stride) suit streaming
// (stream_runs_fit). The threshold was twice the cache until 38 MB calls were measured again
// with the column loop unrolled per row (in-process A/B against twice, 2 threads): 16-bit
// [32, 1024, 14, 14] 0.86x and 0.79x the time (fp16, bf16), [40, 64, 56, 56] 0.78x and 0.84x,
// [32, 64, 56, 56] 0.92x and 1.00x; fp32 at 38 MB 0.91-1.06x (one thread 0.80x), at 48 MB
// 0.80-0.89x.
template <class T>
bool streams(const PreluBackwardArgs& a, const Layout& l) {
  if (!l.unit_runs || !streams_worthwhile(uint64_t(l.N * l.W) * 3 * sizeof(T), 1)) return false;
  const int64_t run = l.channel_runs ? std::min(l.HxW, kPlaneChunk)
                     : l.fold_runs      ? l.fold * l.W
                                       : std::min(l.channels_per_block * l.HxW, l.W);
  const uint64_t run_bytes = uint64_t(run) * sizeof(T);
  // Runs start at multiples of run_bytes within a row, rows at multiples of the row stride.
  const uint64_t row_bytes = uint64_t(std::abs(l.row_stride[kGi])) * sizeof(T);
  const uint64_t start_step = l.N == 1 ? run_bytes : std::gcd(run_bytes, row_bytes);
  // Planes back to back go through one cursor a task (channel_run), which joins them into
  // lines wherever gradInput starts.
  const bool back_to_back = l.N == 1 || row_bytes == uint64_t(l.W) * sizeof(T);
  if (l.channel_runs && back_to_back && cursor_joins(a.gradInput.ptr<T>())) return true;
  // Column blocks whose grid can start on a line for rows off one (column_lead).
  if (!l.channel_runs && column_lead(a.gradInput.ptr<T>(), l) < l.channels_per_block) return true;
  return stream_runs_fit(a.gradInput.ptr<T>(), run_bytes, start_step);
}

template <class T>
void run_dtype(const PreluBackwardArgs& a, const Layout& l, float* ws) {
  if (streams<T>(a, l)) run_typed<true, T>(a, l, ws);
  else run_typed<false, T>(a, l, ws);
}

// Staged: gradInput streams as on the dense copies when it is written in place (contiguous).
template <class T>
void run_staged_dtype(const PreluBackwardArgs& a, const Layout& l, const Staging& st, float* ws) {
  if (!st.moves(kGi) && streams<T>(a, l)) run_staged_planes<true, T>(a, l, st, ws);
  else run_staged_planes<false, T>(a, l, st, ws);
}

}  // namespace

aclnnStatus prelu_backward(const PreluBackwardArgs& given, void* workspace) {
  const auto r = prepare_in(workspace, [&](char* at) { return prepare(given, at); });
  float* ws = static_cast<float*>(workspace);
  if (r.staging.staged()) {
    // The channel-run schedule's floats: no weights, the partials first.
    switch (given.self.dtype) {
      case DType::Float32: run_staged_dtype<float>(given, r.plan, r.staging, ws); break;
      case DType::Float16: run_staged_dtype<half_t>(given, r.plan, r.staging, ws); break;
      case DType::BFloat16: run_staged_dtype<bfloat16_t>(given, r.plan, r.staging, ws); break;
      default: return kInner;
    }
    return kSuccess;
  }
  r.staging.copy_in();
  switch (r.args.self.dtype) {
    case DType::Float32: run_dtype<float>(r.args, r.plan, ws); break;
    case DType::Float16: run_dtype<half_t>(r.args, r.plan, ws); break;
    case DType::BFloat16: run_dtype<bfloat16_t>(r.args, r.plan, ws); break;
    default: return kInner;
  }
  r.staging.copy_out();
  return kSuccess;
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
