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
//   * channel runs (HxW >= kChannelRunMin): a task is a chunk of one (n, c) plane; its partial
//     sum goes to the workspace and gradWeight[c] adds them in (n, chunk) order;
//   * column blocks (small HxW, e.g. [N, C] inputs): a task is a block of whole channels over
//     a fixed chunk of rows, accumulating per position in a stack array (vectorised across
//     channels); per-channel partials go to the workspace, combined in row-chunk order.
#include <algorithm>
#include <cstdint>
#include <numeric>

#include "aclnn_cpu/ops/prelu_backward_args.h"
#include "aclnn_cpu/parallel.h"
#include "aclnn_cpu/simd.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

using namespace simd;

constexpr int64_t kChannelRunMin = 512;   // HxW from which a task covers part of one plane
constexpr int64_t kPlaneChunk = 16384;    // elements of a plane per task (and per partial)
constexpr int64_t kColumnBlock = 2048;    // target positions per column block
constexpr int64_t kColumnSpan = kColumnBlock + kChannelRunMin;  // most positions of a block
constexpr int64_t kColumnTasks = 64;      // column mode aims for this many tasks
constexpr int64_t kGrainElems = 32768;    // fewest elements worth a thread of their own

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
  int64_t fold = 1;  // > 1: whole contiguous rows, processed `fold` rows per run

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

  l.channel_runs = l.HxW >= kChannelRunMin;
  if (l.channel_runs) {
    l.chunks_per_plane = std::max<int64_t>(1, (l.HxW + kPlaneChunk - 1) / kPlaneChunk);
  } else if (l.C > 0) {
    l.channels_per_block = std::max<int64_t>(1, kColumnBlock / std::max<int64_t>(1, l.HxW));
    // Whole multiples of 16 positions per block keep block starts as aligned as the rows are
    // (streaming stores need aligned vectors): round the channel count down to a multiple of
    // 16 / gcd(HxW, 16) when the block stays within kColumnBlock positions.
    const int64_t align = 16 / std::gcd<int64_t>(std::max<int64_t>(1, l.HxW), 16);
    if (l.channels_per_block >= align) l.channels_per_block -= l.channels_per_block % align;
    l.blocks = (l.C + l.channels_per_block - 1) / l.channels_per_block;
    const int64_t wanted_chunks = std::max<int64_t>(1, (kColumnTasks + l.blocks - 1) / l.blocks);
    const int64_t row_chunks = std::min(std::max<int64_t>(l.N, 1), wanted_chunks);
    l.rows_per_chunk = std::max<int64_t>(1, (l.N + row_chunks - 1) / row_chunks);
    l.row_chunks = std::max<int64_t>(1, (l.N + l.rows_per_chunk - 1) / l.rows_per_chunk);
    bool rows_contiguous = l.blocks == 1 && l.m == 1 && l.shape[0] == l.W;
    for (int t = 0; t < 3; ++t)
      rows_contiguous = rows_contiguous && l.run_stride[t] == 1 && (l.N == 1 || l.row_stride[t] == l.W);
    if (rows_contiguous) l.fold = std::max<int64_t>(1, kColumnBlock / std::max<int64_t>(1, l.W));
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

// One run of a single channel with weight w: writes gradInput, adds the weight gradient
// contributions to acc (vector part) / acc_scalar (strided part).
template <bool kStream, class T>
inline void channel_run(const T* go, const T* x, T* gi, const int64_t* st, int64_t len, float w,
                        VecF& acc, float& acc_scalar) {
  if (st[kGo] == 1 && st[kX] == 1 && st[kGi] == 1) {
    const VecF wv = set1(w);
    int64_t i = 0;
    // Pairs (w is a broadcast, so gradInput's pair lines up with the inputs'); both halves add
    // into the one accumulator, so its lanes never depend on where the run starts.
    for (; i + 2 * kWidth <= len; i += 2 * kWidth) {
      const Pair xv = load_pair(x + i), gv = load_pair(go + i);
      const Mask pa = cmp_gt(xv.a, zero()), pb = cmp_gt(xv.b, zero());
      const Pair out{select(pa, gv.a, gv.a * wv), select(pb, gv.b, gv.b * wv)};
      store_or_stream_pair<kStream>(gi + i, out);
      acc = acc + select(pa, zero(), xv.a * gv.a);
      acc = acc + select(pb, zero(), xv.b * gv.b);
    }
    for (; i + kWidth <= len; i += kWidth) {
      const VecF xv = load(x + i), gv = load(go + i);
      const Mask positive = cmp_gt(xv, zero());
      store_or_stream<kStream>(gi + i, select(positive, gv, gv * wv));
      acc = acc + select(positive, zero(), xv * gv);
    }
    if (i < len) {
      const int64_t n = len - i;
      const VecF xv = load_partial(x + i, n), gv = load_partial(go + i, n);  // zero lanes add 0
      const Mask positive = cmp_gt(xv, zero());
      store_partial(gi + i, select(positive, gv, gv * wv), n);
      acc = acc + select(positive, zero(), xv * gv);
    }
    return;
  }
  for (int64_t i = 0; i < len; ++i) {
    const float xv = to_float(x[i * st[kX]]), gv = to_float(go[i * st[kGo]]);
    const bool positive = xv > 0.0f;
    gi[i * st[kGi]] = from_float<T>(positive ? gv : gv * w);
    acc_scalar += positive ? 0.0f : xv * gv;
  }
}

// One run inside a column block: per-position weights and accumulators (index from the block
// start).
template <bool kStream, class T>
inline void column_run(const T* go, const T* x, T* gi, const int64_t* st, int64_t len,
                       const float* w, float* acc) {
  if (st[kGo] == 1 && st[kX] == 1 && st[kGi] == 1) {
    int64_t i = 0;
    for (; i + kWidth <= len; i += kWidth) {
      const VecF xv = load(x + i), gv = load(go + i);
      const Mask positive = cmp_gt(xv, zero());
      store_or_stream<kStream>(gi + i, select(positive, gv, gv * load(w + i)));
      store(acc + i, load(acc + i) + select(positive, zero(), xv * gv));
    }
    if (i < len) {
      const int64_t n = len - i;
      const VecF xv = load_partial(x + i, n), gv = load_partial(go + i, n);
      const Mask positive = cmp_gt(xv, zero());
      store_partial(gi + i, select(positive, gv, gv * load_partial(w + i, n)), n);
      store_partial(acc + i, load_partial(acc + i, n) + select(positive, zero(), xv * gv), n);
    }
    return;
  }
  for (int64_t i = 0; i < len; ++i) {
    const float xv = to_float(x[i * st[kX]]), gv = to_float(go[i * st[kGo]]);
    const bool positive = xv > 0.0f;
    gi[i * st[kGi]] = from_float<T>(positive ? gv : gv * w[i]);
    acc[i] += positive ? 0.0f : xv * gv;
  }
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
        float acc_scalar = 0.0f;
        for_runs(l, j0, j1, [&](int64_t, const int64_t* off, int64_t len) {
          channel_run<kStream>(go + off[kGo], x + off[kX], gi + off[kGi], run_stride, len, w, acc, acc_scalar);
        });
        partials[t] = reduce_add(acc) + acc_scalar;
      }
      if (kStream) stream_fence();
    });
  } else if (numel > 0) {
    parallel_for(l.C, kGrainElems, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) weights[c] = weight_at<T>(a.weight, c);
    });
    const int64_t span = l.channels_per_block * l.HxW;
    const int64_t tasks = l.row_chunks * l.blocks;
    const int64_t task_elems = std::max<int64_t>(1, l.rows_per_chunk * std::min(span, l.W));
    parallel_for(tasks, std::max<int64_t>(1, kGrainElems / task_elems), [&](int64_t begin, int64_t end) {
      alignas(64) float acc[kColumnSpan];
      alignas(64) float wcol[kColumnSpan];
      for (int64_t t = begin; t < end; ++t) {
        const int64_t rc = t / l.blocks, b = t % l.blocks;
        const int64_t c0 = b * l.channels_per_block, c1 = std::min(l.C, c0 + l.channels_per_block);
        const int64_t j0 = c0 * l.HxW, j1 = c1 * l.HxW;
        for (int64_t c = c0; c < c1; ++c)
          for (int64_t h = 0; h < l.HxW; ++h) wcol[(c - c0) * l.HxW + h] = weights[c];
        std::fill(acc, acc + (j1 - j0), 0.0f);  // (fold > 1 refills a wider range below)
        const int64_t n0 = rc * l.rows_per_chunk, n1 = std::min(l.N, n0 + l.rows_per_chunk);
        if (l.fold > 1) {
          // Short contiguous rows: `fold` rows at a time form one run, with the block's
          // weights and accumulators repeated per row; the copies are added up below.
          for (int64_t r = 1; r < l.fold; ++r) std::copy(wcol, wcol + l.W, wcol + r * l.W);
          std::fill(acc, acc + l.fold * l.W, 0.0f);
          for (int64_t n = n0; n < n1; n += l.fold) {
            const int64_t len = std::min(l.fold, n1 - n) * l.W;
            column_run<kStream>(go0 + n * l.W, x0 + n * l.W, gi0 + n * l.W, run_stride, len, wcol, acc);
          }
          for (int64_t r = 1; r < l.fold; ++r)
            for (int64_t p = 0; p < l.W; ++p) acc[p] += acc[r * l.W + p];
        } else {
          for (int64_t n = n0; n < n1; ++n) {
            const T* go = go0 + n * l.row_stride[kGo];
            const T* x = x0 + n * l.row_stride[kX];
            T* gi = gi0 + n * l.row_stride[kGi];
            for_runs(l, j0, j1, [&](int64_t j, const int64_t* off, int64_t len) {
              column_run<kStream>(go + off[kGo], x + off[kX], gi + off[kGi], run_stride, len, wcol + (j - j0), acc + (j - j0));
            });
          }
        }
        // Per-channel partial of this row chunk: the channel's positions summed in order.
        for (int64_t c = c0; c < c1; ++c) {
          const float* p = acc + (c - c0) * l.HxW;
          float sum = 0.0f;
          for (int64_t h = 0; h < l.HxW; ++h) sum += p[h];
          partials[rc * l.C + c] = sum;
        }
      }
      if (kStream) stream_fence();
    });
  }

  // gradWeight[c]: partials combined in a fixed order; zeros when there was nothing to sum.
  T* gw = a.gradWeight.ptr<T>();
  const int64_t C = l.C;
  parallel_for(C, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      float sum = 0.0f;
      if (numel > 0 && l.channel_runs) {
        for (int64_t n = 0; n < l.N; ++n)
          for (int64_t k = 0; k < l.chunks_per_plane; ++k) sum += partials[(n * C + c) * l.chunks_per_plane + k];
      } else if (numel > 0) {
        for (int64_t rc = 0; rc < l.row_chunks; ++rc) sum += partials[rc * C + c];
      }
      gw[flat_offset(a.gradWeight, c)] = from_float<T>(sum);
    }
  });
}

}  // namespace

uint64_t prelu_backward_workspace(const PreluBackwardArgs& args) {
  const Layout l = make_layout(args);
  if (l.N * l.W == 0) return 0;
  return uint64_t(l.weight_floats() + l.partial_count()) * sizeof(float);
}

aclnnStatus prelu_backward(const PreluBackwardArgs& args, void* workspace) {
  const Layout l = make_layout(args);
  float* ws = static_cast<float*>(workspace);
  // gradInput of an op that overflows the last-level cache goes out with streaming stores.
  const bool stream = streams_worthwhile(uint64_t(l.N * l.W) * 3 * args.self.itemsize());
  switch (args.self.dtype) {
    case DType::Float32: stream ? run_typed<true, float>(args, l, ws) : run_typed<false, float>(args, l, ws); return kSuccess;
    case DType::Float16: stream ? run_typed<true, half_t>(args, l, ws) : run_typed<false, half_t>(args, l, ws); return kSuccess;
    case DType::BFloat16:
      stream ? run_typed<true, bfloat16_t>(args, l, ws) : run_typed<false, bfloat16_t>(args, l, ws);
      return kSuccess;
    default: return kInner;
  }
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
