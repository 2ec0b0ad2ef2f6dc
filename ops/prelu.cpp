// aclnnPrelu kernel: out = self > 0 ? self : weight[c] * self, in fp32 (a NaN self gives itself,
// as PyTorch's), rounded once on the write to out's dtype. self, weight and out
// may each have their own dtype; the weight is read once into fp32 in the workspace.
//
// The call is one walk over the elements in out's memory order (Walk): self's dims are put in
// the order of out's strides (outermost first) and neighbours that are contiguous in self, out
// and the weight's broadcast view merge, so contiguous data, channels-last and transposed
// layouts that self and out share all become unit-stride runs: planes with one weight (the
// weight broadcast), rows of channels (weights position by position), or, for short runs, the
// run joined with the dim around it into one long run: planes of at least a vector ([N, C, 7, 7])
// blend their two weights where a vector crosses a boundary, and shorter stretches ([N, C] with
// few channels, [N, C, 2, 2]) get their weights laid out per position. Tasks are chunks of
// about 4096 positions of a run; a run that is not unit-stride in self or out (a slice, a layout
// the two do not share) goes through stack buffers with strided_move.h's gathers and scatters;
// layouts whose runs those would take element by element are copied through the workspace
// instead (staging.h). Every layout gives, element by element, the contiguous call's bits.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <numeric>

#include "aclnn_cpu/dense_copy.h"
#include "aclnn_cpu/flat_values.h"
#include "aclnn_cpu/ops/prelu_args.h"
#include "aclnn_cpu/parallel.h"
#include "aclnn_cpu/simd.h"
#include "aclnn_cpu/staging.h"
#include "aclnn_cpu/strided_move.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

using namespace simd;

constexpr int64_t kTaskPositions = 4096;  // positions of a run per task, about
constexpr int64_t kLineElems = 32;        // elements of a 64-byte line, for the narrowest dtype
constexpr int64_t kGrainElems = 16384;  // fewest elements worth a thread of their own
// An innermost run shorter than this is joined with the dim around it when self and out
// continue across it: a [N, C, 7, 7] plane of 49 positions in one vector pass per chunk costs
// a head and a tail per plane, and a [N, 3] row of channels a task per row.
constexpr int64_t kJoinMax = 256;
// The stack buffers: a joined run's chunk is a multiple of lcm(inner, kLineElems) (plan_walk).
constexpr int64_t kChunk = 2 * kTaskPositions;
static_assert(kJoinMax * kLineElems <= kChunk, "a joined chunk fits the buffers");

// The walk: outer dims (any strides) around one run. Weight index of run position p, beside the
// outer dims' own weight offset: (p / inner) * w_outer_step + (p % inner) * w_inner_step, each
// step 0 (broadcast) or 1 (the channel dim).
struct Walk {
  int outer_dims = 0;
  int64_t outer_shape[kMaxDims] = {};
  int64_t x_stride[kMaxDims] = {}, out_stride[kMaxDims] = {}, w_stride[kMaxDims] = {};
  int64_t outer_count = 1;
  int64_t run = 1, x_step = 1, out_step = 1;
  int64_t inner = 1, w_outer_step = 0, w_inner_step = 0;
  int64_t chunk = 1, chunks = 1;  // positions per task, tasks per run

  bool broadcast_weight() const { return w_outer_step == 0 && w_inner_step == 0; }
  // The run's weights are the fp32 buffer itself, from the outer offset on (a run of channels).
  bool weights_in_place() const { return w_inner_step == 1 && inner == run; }
  // A joined run, whose weights each task lays out position by position (fill_weights).
  bool fills_weights() const { return !broadcast_weight() && !weights_in_place(); }
};

struct Dim {
  int64_t size, x, out, w;  // extent; strides in self, out, the weight buffer
};

Walk plan_walk(const PreluArgs& a) {
  const TensorView& x = a.self;
  const bool per_channel = x.ndim >= 2 && a.weight.numel() != 1;
  Dim dims[kMaxDims];
  int m = 0;
  for (int i = 0; i < x.ndim; ++i)
    if (x.shape[i] != 1) dims[m++] = Dim{x.shape[i], x.strides[i], a.out.strides[i], per_channel && i == 1 ? 1 : 0};
  // Outermost first in out's memory order (a stable insertion sort: at most kMaxDims dims).
  for (int i = 1; i < m; ++i)
    for (int j = i; j > 0 && std::llabs(dims[j].out) > std::llabs(dims[j - 1].out); --j) std::swap(dims[j], dims[j - 1]);
  // Merge neighbours that continue each other in all three.
  int merged = 0;
  for (int i = 0; i < m; ++i) {
    if (merged > 0) {
      Dim& o = dims[merged - 1];
      const Dim& d = dims[i];
      if (o.x == d.x * d.size && o.out == d.out * d.size && o.w == d.w * d.size) {
        o = Dim{o.size * d.size, d.x, d.out, d.w};
        continue;
      }
    }
    dims[merged++] = dims[i];
  }
  if (merged == 0) dims[merged++] = Dim{1, 1, 1, 0};

  Walk w;
  Dim run = dims[merged - 1];
  int outer = merged - 1;
  w.inner = run.size;
  w.w_inner_step = run.w;
  if (outer > 0 && run.size < kJoinMax) {
    const Dim& around = dims[outer - 1];
    if (around.x == run.x * run.size && around.out == run.out * run.size) {
      w.w_outer_step = around.w;
      run.size *= around.size;
      --outer;
    }
  }
  w.run = run.size;
  w.x_step = run.x;
  w.out_step = run.out;
  w.outer_dims = outer;
  for (int i = 0; i < outer; ++i) {
    w.outer_shape[i] = dims[i].size;
    w.x_stride[i] = dims[i].x;
    w.out_stride[i] = dims[i].out;
    w.w_stride[i] = dims[i].w;
    w.outer_count *= dims[i].size;
  }
  // A joined run's chunks are whole stretches of `inner` positions, so every chunk's weights
  // start at the same phase (fill_weights) and a task can keep the previous task's, and whole
  // lines, so that a chunk of an aligned run starts on a line as the plain chunks do.
  w.chunk = kTaskPositions;
  if (w.fills_weights()) {
    const int64_t unit = w.inner / std::gcd(w.inner, kLineElems) * kLineElems;  // lcm
    w.chunk = std::max<int64_t>(1, kTaskPositions / unit) * unit;
  }
  w.chunks = (w.run + w.chunk - 1) / w.chunk;
  return w;
}

// Element offsets of outer index o in self, out and the weight buffer.
struct Offsets {
  int64_t x = 0, out = 0, w = 0;
};

inline Offsets outer_offsets(const Walk& w, int64_t o) {
  Offsets off;
  for (int k = w.outer_dims - 1; k >= 0; --k) {
    const int64_t i = o % w.outer_shape[k];
    o /= w.outer_shape[k];
    off.x += i * w.x_stride[k];
    off.out += i * w.out_stride[k];
    off.w += i * w.w_stride[k];
  }
  return off;
}

// The weights of run positions [p0, p0 + n) of a joined run into dst, p0 a multiple of
// `inner`: one weight per stretch of `inner` positions (channels around short planes), or the
// `inner` channel weights repeated (rows of few channels), copied in doubling spans (a copy per
// row cost a call per few positions).
inline void fill_weights(const Walk& w, const float* weights, int64_t p0, int64_t n, float* dst) {
  if (w.w_inner_step == 0) {
    const float* at = weights + p0 / w.inner;
    for (int64_t i = 0; i < n; i += w.inner) {
      const VecF v = set1(*at++);
      const int64_t len = std::min(w.inner, n - i);
      int64_t k = 0;
      for (; k + kWidth <= len; k += kWidth) store(dst + i + k, v);
      if (k < len) store_partial(dst + i + k, v, len - k);
    }
    return;
  }
  std::copy(weights, weights + std::min(w.inner, n), dst);
  for (int64_t have = w.inner; have < n; have *= 2) std::copy(dst, dst + std::min(have, n - have), dst + have);
}

// As `v > 0 ? v : w * v`, except that a NaN self passes through as itself (that formula
// returns it quieted, or the weight's NaN where both are NaN, as the product's operand order
// decides): PyTorch's F.prelu gives self's NaN.
ACLNN_ALWAYS_INLINE VecF prelu_lanes(VecF v, VecF w) { return select(cmp_le(v, zero()), w * v, v); }

// out[i] = x[i] > 0 ? x[i] : w * x[i] for i < n, unit strides; the weight one value (kScalar)
// or one per position.
template <bool kStream, bool kScalar, class TX, class TO>
ACLNN_ALWAYS_INLINE void prelu_run(const TX* x, TO* out, int64_t n, float scalar, const float* weights) {
  const VecF ws = set1(scalar);
  store_run<kStream>(out, n, [&](int64_t i, int64_t count) __attribute__((always_inline)) {
    const bool whole = count == kWidth;
    const VecF v = whole ? load(x + i) : load_partial(x + i, count);
    if constexpr (kScalar) return prelu_lanes(v, ws);
    else return prelu_lanes(v, whole ? load(weights + i) : load_partial(weights + i, count));
  });
}

// prelu_run over planes of `inner` (>= kWidth) positions, one weight each (plane_weights, the
// first plane starting at position 0): a vector spans at most two planes, and takes the second
// one's weight in the lanes past the boundary. Without it a joined run's weights were laid out
// position by position first ([1, 1024, 14, 14] fp32, 1 thread: 20 us against torch's 16).
// Relies on store_run asking for positions in increasing order.
template <bool kStream, class TX, class TO>
ACLNN_ALWAYS_INLINE void prelu_planes(const TX* x, TO* out, int64_t n, int64_t inner, const float* plane_weights) {
  VecF lane;
  for (int k = 0; k < kWidth; ++k) lane[k] = float(k);
  const float* w = plane_weights;
  int64_t next = inner;  // where the plane after w's starts
  store_run<kStream>(out, n, [&](int64_t i, int64_t count) __attribute__((always_inline)) {
    while (i >= next) next += inner, ++w;
    VecF wv = set1(w[0]);
    if (i + count > next) wv = select(cmp_ge(lane, set1(float(next - i))), set1(w[1]), wv);
    const VecF v = count == kWidth ? load(x + i) : load_partial(x + i, count);
    return prelu_lanes(v, wv);
  });
}

// Bytes a call moves: self read, out written.
template <class TX, class TO>
uint64_t bytes_moved(const PreluArgs& a) {
  return uint64_t(a.self.numel()) * (sizeof(TX) + sizeof(TO));
}

template <bool kStream, class TX, class TO>
void run_walk(const PreluArgs& a, const Walk& w, const float* weights) {
  const TX* x0 = a.self.ptr<const TX>();
  TO* out0 = a.out.ptr<TO>();
  const int64_t tasks = w.outer_count * w.chunks;
  const int64_t task_elems = std::min(w.run, w.chunk);
  // Joined runs within the cache take their tasks chunk-major, so that consecutive tasks (the
  // same chunk of successive rows) share their weights and fill them once; past the cache a
  // thread's tasks go through memory in order instead, as the others do, and fill per task.
  // Measured (2 threads, in-process A/B): [64, 256, 7, 7] (3 MB fp32) 0.050 ms chunk-major
  // against 0.056 ms in order; [64, 1024, 14, 14] bf16 (51 MB) 2.0 ms against 1.0 ms (fp32
  // 2.7 / 2.3 ms), fp16 [256, 256, 14, 14] 1.84 / 0.93 ms.
  // Planes of at least a vector blend their weights in registers (prelu_planes): no weights to
  // share, so memory order.
  const bool planes = w.fills_weights() && w.w_inner_step == 0 && w.inner >= kWidth;
  const bool chunk_major = w.fills_weights() && !planes && !streams_worthwhile(bytes_moved<TX, TO>(a), 1);
  parallel_for(tasks, std::max<int64_t>(1, kGrainElems / task_elems), [&](int64_t begin, int64_t end) {
    alignas(64) float wbuf[kChunk];
    alignas(64) TX xbuf[kChunk];
    alignas(64) TO obuf[kChunk];
    int64_t filled_at = -1, filled_n = 0;  // the weights in wbuf: weight offset and count
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = chunk_major ? t % w.outer_count : t / w.chunks;
      const int64_t p0 = (chunk_major ? t / w.outer_count : t % w.chunks) * w.chunk, n = std::min(w.chunk, w.run - p0);
      const Offsets off = outer_offsets(w, o);
      const TX* x = x0 + off.x + p0 * w.x_step;
      TO* out = out0 + off.out + p0 * w.out_step;
      if (w.x_step != 1) {
        gather_run(xbuf, x, n, w.x_step);
        x = xbuf;
      }
      TO* dst = w.out_step == 1 ? out : obuf;
      if (w.broadcast_weight()) {
        const float scalar = weights[off.w];
        if (w.out_step == 1) prelu_run<kStream, true>(x, dst, n, scalar, nullptr);
        else prelu_run<false, true>(x, dst, n, scalar, nullptr);
      } else if (planes) {
        const float* plane_weights = weights + off.w + p0 / w.inner;
        if (w.out_step == 1) prelu_planes<kStream>(x, dst, n, w.inner, plane_weights);
        else prelu_planes<false>(x, dst, n, w.inner, plane_weights);
      } else {
        const float* ws = weights + off.w + p0;
        if (w.fills_weights()) {
          const int64_t at = off.w + p0 / w.inner * w.w_outer_step;
          if (at != filled_at || n != filled_n) fill_weights(w, weights + off.w, p0, n, wbuf);
          filled_at = at, filled_n = n;
          ws = wbuf;
        }
        if (w.out_step == 1) prelu_run<kStream, false>(x, dst, n, 0.0f, ws);
        else prelu_run<false, false>(x, dst, n, 0.0f, ws);
      }
      if (dst != out) scatter_run(out, obuf, n, w.out_step);
    }
    if (kStream) stream_fence();
  });
}

// out goes out with streaming stores when the call overflows the last-level cache and the
// chunks' starts suit streaming (stream_runs_fit): they lie at multiples of the chunk within a
// run and at the outer dims' strides. Past the cache once, not twice as for the backward (which
// reads two operands): fp32 [32, 64, 56, 56] (51 MB moved) took 0.93 ms streamed against
// 1.06 ms plain (torch 1.05 ms, a copy of the same bytes 0.64 ms), [64, 64, 56, 56] 1.97 ms
// against 2.24 ms (copy 1.33 ms); 2 threads, in-process A/B on a shared host, best of 200.
// (store_run streams whole lines only, fp32 vectors at the AVX-512 level: 16-bit outputs stay
// plain. Streamed as pairs, a line a store, they lost: bf16 [64, 64, 56, 56] 0.69 ms against
// 0.59 ms plain, fp16 0.94 / 0.55 ms; at [128, 64, 56, 56] bf16 1.73 / 1.27 ms, fp16 2.01 / 2.26.)
template <class TX, class TO>
bool streams(const PreluArgs& a, const Walk& w) {
  if (w.out_step != 1 || !streams_worthwhile(bytes_moved<TX, TO>(a), 1)) return false;
  const uint64_t run_bytes = uint64_t(std::min(w.run, w.chunk)) * sizeof(TO);
  uint64_t step = w.chunks > 1 ? run_bytes : 0;
  for (int k = 0; k < w.outer_dims; ++k) step = std::gcd<uint64_t>(step, uint64_t(std::llabs(w.out_stride[k])) * sizeof(TO));
  return stream_runs_fit(a.out.ptr<TO>(), run_bytes, step);
}

template <class TX, class TO>
void run_typed(const PreluArgs& a, const Walk& w, const float* weights, bool may_stream) {
  if (may_stream && streams<TX, TO>(a, w)) run_walk<true, TX, TO>(a, w, weights);
  else run_walk<false, TX, TO>(a, w, weights);
}

template <class TX>
aclnnStatus run_self(const PreluArgs& a, const Walk& w, const float* weights, bool may_stream) {
  switch (a.out.dtype) {
    case DType::Float32: run_typed<TX, float>(a, w, weights, may_stream); return kSuccess;
    case DType::Float16: run_typed<TX, half_t>(a, w, weights, may_stream); return kSuccess;
    case DType::BFloat16: run_typed<TX, bfloat16_t>(a, w, weights, may_stream); return kSuccess;
    default: return kInner;
  }
}

bool empty_call(const PreluArgs& a) { return a.self.numel() == 0 || a.weight.numel() == 0; }

// Whether the walk takes an operand's runs in vectors: unit steps, or steps the gathers and
// scatters move in vectors along runs long enough to pay for a task each.
bool walks_in_vectors(int64_t step, int64_t run) { return step == 1 || (step_in_vectors(step) && run >= kJoinMax); }

// The call as the kernel runs it. When the walk would take self or out element by element (a
// transposed plane or a channels-last self beside a contiguous out, whose runs then step across
// lines; short strided runs), the one of them that is not contiguous, or both, go through dense
// copies in the workspace (staging.h's whole copies; dense_copy.h: tiles for transposed pairs), and the walk runs on
// row-major data. Element by element, fp32 [8, 64, 56, 56] with transposed planes into a
// contiguous out took 0.51 ms, 5x torch's 0.10 ms (which writes its output in self's layout).
// Workspace: the weight in fp32 (kernel_bytes), then the dense copies (staging.h, whole).
// `dense_at` may be null (the size query).
enum { kSelf, kOut };  // the staged operands
using Call = Prepared<PreluArgs, Walk>;  // args: self and out as the walk takes them

Call prepare(const PreluArgs& given, char* dense_at) {
  Call r{given, Walk{}, Staging(dense_at)};
  if (empty_call(given)) return r;
  r.kernel_bytes = (uint64_t(given.weight.numel()) * sizeof(float) + 63) / 64 * 64;
  r.plan = plan_walk(given);
  if (!walks_in_vectors(r.plan.x_step, r.plan.run) || !walks_in_vectors(r.plan.out_step, r.plan.run)) {
    Staging& s = r.staging;
    s.add(given.self, Staging::kIn, !given.self.is_contiguous());
    s.add(given.out, Staging::kOut, !given.out.is_contiguous());
    s.plan_whole();
    s.use_dense(kSelf, r.args.self);
    s.use_dense(kOut, r.args.out);
    r.plan = plan_walk(r.args);
  }
  return r;
}

}  // namespace

uint64_t prelu_workspace(const PreluArgs& a) { return prepare(a, nullptr).bytes(); }

aclnnStatus prelu(const PreluArgs& given, void* workspace) {
  if (empty_call(given)) return kSuccess;
  const Call r = prepare_in(workspace, [&](char* dense_at) { return prepare(given, dense_at); });
  float* weights = static_cast<float*>(workspace);
  const int64_t count = given.weight.numel();
  switch (given.weight.dtype) {
    case DType::Float32: read_floats<float>(given.weight, count, weights); break;
    case DType::Float16: read_floats<half_t>(given.weight, count, weights); break;
    case DType::BFloat16: read_floats<bfloat16_t>(given.weight, count, weights); break;
    default: return kInner;
  }
  r.staging.copy_in();
  // (A dense out is read back right away: no streaming into it.)
  const bool may_stream = !r.staging.moves(kOut);
  aclnnStatus status = kInner;
  switch (r.args.self.dtype) {
    case DType::Float32: status = run_self<float>(r.args, r.plan, weights, may_stream); break;
    case DType::Float16: status = run_self<half_t>(r.args, r.plan, weights, may_stream); break;
    case DType::BFloat16: status = run_self<bfloat16_t>(r.args, r.plan, weights, may_stream); break;
    default: break;
  }
  if (status == kSuccess) r.staging.copy_out();
  return status;
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
