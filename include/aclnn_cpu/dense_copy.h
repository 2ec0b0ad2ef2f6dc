// Dense copies of strided operands, for kernels whose fast paths want row-major data. An
// operand in a layout no fast path takes (a slice along the last dim, a batch slice of a
// softmax over an inner dim, a transposed plane) is gathered into a dense buffer in the
// workspace, the kernel runs its contiguous code on the buffers, and a strided output is
// computed into a buffer and scattered back. Values move bit for bit, and the contiguous
// kernels never let an address decide a result, so such a call gives exactly the bits of the
// same call on contiguous copies. Element by element through a cursor, those layouts had cost
// 17-43x the contiguous call's time (GroupNorm, PReLU, Softmax over dim 1), up to 25x torch's.
// Kernels plan such copies, whole or a task at a time, through staging.h.
// For kernel translation units (compiled per ISA level).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "aclnn_cpu/flat_values.h"
#include "aclnn_cpu/parallel.h"
#include "aclnn_cpu/strided_move.h"
#include "aclnn_cpu/tensor_view.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {

// Bytes of a dense copy of t, rounded up to a 64-byte line (so buffers laid out one after
// another each start on a line).
inline uint64_t dense_bytes(const TensorView& t) {
  return (uint64_t(t.numel()) * t.itemsize() + 63) / 64 * 64;
}

// t's shape and dtype over the dense buffer `data` (row-major strides).
inline TensorView dense_view(const TensorView& t, void* data) {
  TensorView d = t;
  d.data = data;
  int64_t stride = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    d.strides[i] = stride;
    stride *= t.shape[i];
  }
  return d;
}

// Lays out an op's dense copies one after another from `at` (null for a size query).
struct DensePlace {
  char* at = nullptr;
  uint64_t bytes = 0;
  // A dense view of shape_of's shape and dtype, placed after the previous ones.
  TensorView take(const TensorView& shape_of) {
    const TensorView t = dense_view(shape_of, at == nullptr ? nullptr : at + bytes);
    bytes += dense_bytes(t);
    return t;
  }
};

// An op's workspace: [the kernel's own kernel_bytes][its dense copies]. prepare(dense_at)
// returns the op's prepared call with its copies placed from dense_at (null: sizes only), and
// a kernel_bytes that does not depend on where the copies go.
template <class Prepare>
auto prepare_in(void* workspace, Prepare&& prepare) {
  char* ws = static_cast<char*>(workspace);
  if (ws == nullptr) return prepare(nullptr);
  return prepare(ws + prepare(nullptr).kernel_bytes);
}

namespace dense_detail {

// The numel elements of f's tensor in row-major order as stretches along its innermost
// coalesced dim: copy(first, offset, len) with `first` the stretch's flat index, `offset` its
// element offset. Blocks of kPiece elements are spread over the threads (a tensor that
// coalesces into one strided run, such as a slice of every other element, splits too), each
// walking its stretches with one cursor (short runs are not worth a cursor each).
constexpr int64_t kPiece = 8192;

// Flat indices [first, first + count) of f's tensor as stretches, on the calling thread.
template <class Copy>
void stretches_in(const FlatIndex& f, int64_t first, int64_t count, Copy&& copy) {
  const int inner = f.m - 1;
  const int64_t run = f.shape[inner];
  Cursor at(f, first);
  while (count > 0) {
    const int64_t i0 = at.idx[inner], len = std::min(run - i0, count);
    copy(first, at.off, len);
    first += len;
    count -= len;
    // To the stretch's last element, then one step on (into the next run).
    at.idx[inner] = i0 + len - 1;
    at.off += (len - 1) * f.stride[inner];
    at.next();
  }
}

template <class Copy>
void for_each_stretch(const FlatIndex& f, int64_t numel, Copy&& copy) {
  const int64_t pieces = (numel + kPiece - 1) / kPiece;
  parallel_for(pieces, 4, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) stretches_in(f, p * kPiece, std::min(kPiece, numel - p * kPiece), copy);
  });
}

// t whose two innermost coalesced dims are a transposed pair, the inner one (a) at a stride
// other than 1 and the one before it (b) at stride 1: transposed planes, channels-last
// tensors. Element by element, each element of such a copy was a load from another line
// (GroupNorm on transposed planes with a contiguous gradInput: 0.58 ms of copies, 4.6x the
// kernel). Whole copies run as spread_pair (below) with b as its unit-stride dim.
constexpr int64_t kMinTransposed = 8;  // narrower dims are not worth the blocks

inline bool is_transposed_pair(const FlatIndex& f) {
  const int m = f.m;
  return m >= 2 && f.stride[m - 2] == 1 && f.stride[m - 1] != 1 && f.shape[m - 1] >= kMinTransposed &&
         f.shape[m - 2] >= kMinTransposed;
}

// Element offset of f's outer index o (the dims before the transposed pair).
inline int64_t outer_offset(const FlatIndex& f, int64_t o) {
  int64_t off = 0;
  for (int k = f.m - 3; k >= 0; --k) {
    off += o % f.shape[k] * f.stride[k];
    o /= f.shape[k];
  }
  return off;
}

// A transposed pair's flat indices [first, first + count), whole a-rows, on the calling
// thread: dense[i - first] is element i.
template <class E>
void transposed_pair_range(const FlatIndex& f, E* base, int64_t first, int64_t count, E* dense, bool to_dense) {
  const int m = f.m;
  const int64_t na = f.shape[m - 1], nb = f.shape[m - 2], sa = f.stride[m - 1];
  constexpr int64_t kStrip = 64 / sizeof(E);
  for (int64_t row = first / na, end = (first + count) / na; row < end;) {
    const int64_t o = row / nb, b0 = row % nb, b1 = std::min(nb, b0 + (end - row));
    const int64_t off = outer_offset(f, o);
    for (int64_t b = b0; b < b1; b += kStrip) {
      const int64_t len = std::min(kStrip, b1 - b);
      E* const strided = base + off + b;
      E* const d = dense + ((o * nb + b) * na - first);
      if (to_dense) transpose_run(d, na, strided, sa, na, len);
      else transpose_run(strided, sa, d, na, len, na);
    }
    row += b1 - b0;
  }
}

// t whose unit-stride dim k lies further out than the one before the innermost (a): a fully
// reversed layout (NumPy's Fortran order, a.T), or one with the batch dim innermost. Each dense
// row of a (fixed outer index) takes its elements from a-strided places, one line of k-indices
// serving kStrip rows: as a transposed pair over (k, a), with the dims between them and before
// k as outer loops. Element by element, GroupNorm [8, 64, 32, 32] in Fortran order took 2.8 ms
// against 58 us contiguous (torch, copying to contiguous first, 1.3 ms).
inline int spread_pair_dim(const FlatIndex& f) {
  const int m = f.m;
  if (m < 3 || f.stride[m - 1] == 1 || f.shape[m - 1] < kMinTransposed) return -1;
  for (int k = 0; k < m - 2; ++k)
    if (f.stride[k] == 1) return f.shape[k] >= kMinTransposed ? k : -1;
  return -1;
}

// Element offsets, in t and in its dense copy, of outer index o over the dims other than k and
// the innermost (row-major among themselves).
inline void spread_outer_offsets(const FlatIndex& f, int k, int64_t o, int64_t* src, int64_t* dense) {
  int64_t s = 0, d = 0, dense_stride = f.shape[f.m - 1];
  for (int i = f.m - 2; i >= 0; --i) {
    if (i != k) {
      const int64_t idx = o % f.shape[i];
      o /= f.shape[i];
      s += idx * f.stride[i];
      d += idx * dense_stride;
    }
    dense_stride *= f.shape[i];
  }
  *src = s;
  *dense = d;
}

// The copy of t whose unit-stride dim k is not the innermost (a): k = m - 2 (a transposed
// pair) or further out (spread_pair_dim). Each task transposes a strip of kStrip k-indices (a
// line of each a-row) by a span of up to kSpan a-indices, in vector blocks; a long a is cut
// into spans so that a pair with few k-indices (a transposed [8, 1M]) still splits over the
// threads (as one task per strip it ran on one thread).
template <class E>
void spread_pair(const FlatIndex& f, int k, E* base, int64_t numel, E* dense, bool to_dense) {
  const int m = f.m;
  const int64_t na = f.shape[m - 1], nb = f.shape[k], sa = f.stride[m - 1];
  int64_t db = 1;  // the dense stride of dim k
  for (int i = k + 1; i < m; ++i) db *= f.shape[i];
  constexpr int64_t kStrip = 64 / sizeof(E);
  constexpr int64_t kSpan = kPiece / kStrip;
  const int64_t strips = (nb + kStrip - 1) / kStrip, spans = (na + kSpan - 1) / kSpan;
  const int64_t outer = numel / (na * nb);
  parallel_for(outer * strips * spans, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t o = task / (strips * spans), rest_task = task % (strips * spans);
      const int64_t b0 = (rest_task / spans) * kStrip, len = std::min(kStrip, nb - b0);
      const int64_t a0 = (rest_task % spans) * kSpan, alen = std::min(kSpan, na - a0);
      int64_t src_off, dense_off;
      spread_outer_offsets(f, k, o, &src_off, &dense_off);
      E* const strided = base + src_off + b0 + a0 * sa;
      E* const d = dense + dense_off + b0 * db + a0;
      if (to_dense) transpose_run(d, db, strided, sa, alen, len);
      else transpose_run(strided, sa, d, db, len, alen);
    }
  });
}

template <class E>
void gather_range(const TensorView& t, const FlatIndex& f, int64_t first, int64_t count, void* dst) {
  E* out = static_cast<E*>(dst);
  const int64_t na = f.shape[f.m - 1];
  if (is_transposed_pair(f) && first % na == 0 && count % na == 0)
    return transposed_pair_range(f, t.ptr<E>(), first, count, out, true);
  const E* src = t.ptr<const E>();
  const int64_t step = f.stride[f.m - 1];
  stretches_in(f, first, count,
               [&](int64_t i, int64_t off, int64_t len) { gather_run(out + (i - first), src + off, len, step); });
}

template <class E>
void scatter_range(const void* src, const TensorView& t, const FlatIndex& f, int64_t first, int64_t count) {
  E* in = const_cast<E*>(static_cast<const E*>(src));
  E* dst = t.ptr<E>();
  const int64_t na = f.shape[f.m - 1];
  if (is_transposed_pair(f) && first % na == 0 && count % na == 0)
    return transposed_pair_range(f, dst, first, count, in, false);
  const int64_t step = f.stride[f.m - 1];
  stretches_in(f, first, count,
               [&](int64_t i, int64_t off, int64_t len) { scatter_run(dst + off, in + (i - first), len, step); });
}

template <class E>
void gather(const TensorView& t, void* dst) {
  E* out = static_cast<E*>(dst);
  const FlatIndex f(t);
  if (is_transposed_pair(f)) return spread_pair(f, f.m - 2, t.ptr<E>(), t.numel(), out, true);
  if (const int k = spread_pair_dim(f); k >= 0) return spread_pair(f, k, t.ptr<E>(), t.numel(), out, true);
  const E* src = t.ptr<const E>();
  const int64_t step = f.stride[f.m - 1];
  for_each_stretch(f, t.numel(),
                   [&](int64_t first, int64_t off, int64_t len) { gather_run(out + first, src + off, len, step); });
}

template <class E>
void scatter(const void* src, const TensorView& t) {
  const E* in = static_cast<const E*>(src);
  E* dst = t.ptr<E>();
  const FlatIndex f(t);
  if (is_transposed_pair(f)) return spread_pair(f, f.m - 2, dst, t.numel(), const_cast<E*>(in), false);
  if (const int k = spread_pair_dim(f); k >= 0) return spread_pair(f, k, dst, t.numel(), const_cast<E*>(in), false);
  const int64_t step = f.stride[f.m - 1];
  for_each_stretch(f, t.numel(),
                   [&](int64_t first, int64_t off, int64_t len) { scatter_run(dst + off, in + first, len, step); });
}

}  // namespace dense_detail

// Whether copying t whole moves whole vectors: contiguous runs, steps of 2 or -1 along its
// innermost coalesced dim, a transposed pair (transposed planes, channels-last) or a spread one
// (Fortran order). Other layouts are copied element by element.
inline bool copies_in_vectors(const TensorView& t) {
  const FlatIndex f(t);
  return step_in_vectors(f.stride[f.m - 1]) || dense_detail::is_transposed_pair(f) ||
         dense_detail::spread_pair_dim(f) >= 0;
}

// Whether the whole copies of one of `ts` (nulls skipped) transpose a unit-stride dim further
// out than its two innermost (spread_pair_dim: Fortran order, the batch dim innermost): a task's
// range of such an operand holds no line-wide run, so staged copies of it would go element by
// element, and kernels copy it whole instead.
inline bool copies_spread(std::initializer_list<const TensorView*> ts) {
  for (const TensorView* t : ts)
    if (t != nullptr && dense_detail::spread_pair_dim(FlatIndex(*t)) >= 0) return true;
  return false;
}

// dst (dense, t.numel() elements) = t's elements in row-major order.
inline void copy_to_dense(const TensorView& t, void* dst) {
  if (t.numel() == 0) return;
  switch (t.itemsize()) {
    case 2: return dense_detail::gather<uint16_t>(t, dst);
    case 4: return dense_detail::gather<uint32_t>(t, dst);
    default: return dense_detail::gather<uint64_t>(t, dst);
  }
}

// dst (dense, count elements) = t's elements [first, first + count) in row-major order, with
// f = FlatIndex(t); on the calling thread (a task's share of an op's copies).
inline void copy_range_to_dense(const TensorView& t, const FlatIndex& f, int64_t first, int64_t count, void* dst) {
  if (count <= 0) return;
  switch (t.itemsize()) {
    case 2: return dense_detail::gather_range<uint16_t>(t, f, first, count, dst);
    case 4: return dense_detail::gather_range<uint32_t>(t, f, first, count, dst);
    default: return dense_detail::gather_range<uint64_t>(t, f, first, count, dst);
  }
}

// t's elements [first, first + count) in row-major order = src (dense), on the calling thread.
inline void copy_range_from_dense(const void* src, const TensorView& t, const FlatIndex& f, int64_t first,
                                  int64_t count) {
  if (count <= 0) return;
  switch (t.itemsize()) {
    case 2: return dense_detail::scatter_range<uint16_t>(src, t, f, first, count);
    case 4: return dense_detail::scatter_range<uint32_t>(src, t, f, first, count);
    default: return dense_detail::scatter_range<uint64_t>(src, t, f, first, count);
  }
}

// t's elements in row-major order = src (dense). t must not overlap itself (outputs never do).
inline void copy_from_dense(const void* src, const TensorView& t) {
  if (t.numel() == 0) return;
  switch (t.itemsize()) {
    case 2: return dense_detail::scatter<uint16_t>(src, t);
    case 4: return dense_detail::scatter<uint32_t>(src, t);
    default: return dense_detail::scatter<uint64_t>(src, t);
  }
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
