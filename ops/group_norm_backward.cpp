// aclnnGroupNormBackward kernel. The formulas are PyTorch's native_group_norm_backward (CPU),
// written in the algebraically identical centred form, which avoids the cancellation between
// sum(dY*X) and mean*sum(dY) when |mean| >> std:
//   per (n, c):  dsc = sum_hw dY * (X - mean[n,g]),  db = sum_hw dY
//   per (n, g):  dsc_g = sum_{c in g} dsc * gamma[c],  db_g = sum_{c in g} db * gamma[c]
//                s = 1 / (D * HxW),  c2 = -dsc_g * rstd^3 * s,  c3 = -db_g * rstd * s
//   dX     = rstd * gamma[c] * dY + c2 * (X - mean) + c3
//   dgamma = sum_n dsc[n,c] * rstd[n,g]          dbeta = sum_n db[n,c]
// (PyTorch: c2 = (db_g*mean - ds_g) * rstd^3 * s, c3 = -c2*mean - db_g*rstd*s with
// ds = sum dY*X; expanding ds = dsc + mean*db gives the lines above.) gamma absent = ones.
//
// gradOut, input and gradInput are each viewed as [N, C, HxW] in row-major order of their own
// shape. Where each group of every operand is one unit-stride run (contiguous operands, channel
// slices of wider tensors: GroupRuns), the vector kernels run on per-group pointers. Other
// layouts are copied: group by group into a slot per thread in the fused schedule (Staging),
// else whole into the workspace (dense_copy.h); see prepare. Four schedules, chosen by shape
// and layout only (results never depend on threads):
//   * fused (small groups, or mid-sized ones when there are at least kFusedMinTasks): one task
//     per (n, g) sums its planes, derives the coefficients and writes dX while the group is
//     still in cache (bigger groups write their channels last to first, so that the write pass
//     starts on what the sums pass left in L1 or L2: writes_backward_for);
//   * chunked (other groups): plane sums in fixed chunks of kPlaneChunk (partials in the
//     workspace, combined in chunk order), coefficients per (n, g), then dX per chunk;
//   * channel rows (channels-last operands): each sample as HxW rows of C channels,
//     vectorised across the channels (run_channel_rows);
//   * spans (contiguous operands with HxW == 1 and groups narrower than a vector, or planes
//     shorter than a vector in groups of at most kShortSpanGroupMax positions): blocks of whole
//     groups across samples, each one vectorised span of memory (run_point_rows).
// Where each group is one channel, the coefficients are computed a vector of groups at a time
// (point_coefs).
// dX of an op that overflows the last-level cache is written with streaming stores.
// dgamma/dbeta add the per-(n, c) sums over n in order, parallel over channels. Masked-off
// outputs are neither computed nor touched.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "aclnn_cpu/flat_values.h"
#include "aclnn_cpu/ops/group_norm_backward_args.h"
#include "aclnn_cpu/parallel.h"
#include "aclnn_cpu/simd.h"
#include "aclnn_cpu/staging.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

using namespace simd;

constexpr int64_t kFusedElems = 65536;   // groups up to this size are always fused
constexpr int64_t kFusedMaxElems = 1 << 19;  // larger groups fused when there are enough of them:
constexpr int64_t kFusedMinTasks = 8;        // at least this many (n, g)
constexpr int64_t kPlaneChunk = 16384;   // elements per partial sum in the chunked schedule
// Fewest elements worth a thread of their own. 32768 left calls of 16K-32K elements on one
// thread; split in two they took 0.83-0.90x the time (N1 C128 and N2 C64 at HxW 256, N1 C32
// HxW 1024; fp32 and bf16), while splitting 16K-element calls gained nothing or lost (0.91-1.33x).
// 2 threads, in-process A/B.
constexpr int64_t kGrainElems = 16384;
// Channel rows with fewer samples than this split each sample's rows into chunks.
constexpr int64_t kRowSplitSamples = 8;
// Spans (channel rows with HxW 1, short planes): whole groups, about this many positions at a time.
constexpr int64_t kPointBlockElems = 2048;
// Short planes run as spans when a group has at most this many positions (processes
// alternated, 2 threads, fp32, against group_short: [64, 256, 3, 3] G128 (36) 0.71-0.94x the
// time; with the per-channel writes, [64, 512, 3, 3] G64 (72) 0.84-1.09x, G32 (144)
// 1.05-1.06x, [32, 128, 3, 3] G8 (144) 1.06-1.10x).
constexpr int64_t kShortSpanGroupMax = 48;
constexpr int64_t kShortBlock = 1024;    // floats of a channel block of short planes (HxW < kWidth)
// Small fused groups (Kernel::batched_groups): groups of at most kBatchGroupMax elements, in
// batches of at most kBatchMax groups and kBatchElems elements.
constexpr int64_t kBatchGroupMax = 1024;
constexpr int64_t kBatchMax = 256;
constexpr int64_t kBatchElems = 16384;
// Fused groups write dX channel by channel backwards (writes_backward_for) when their dY and X
// take more bytes than kBackwardWriteBytes, or (fp32) more than the L1 data cache in a call whose
// operands fit half of the last-level cache.
constexpr uint64_t kBackwardWriteBytes = 512 << 10;

struct Plan {
  int64_t N = 0, C = 0, HxW = 0, G = 1, D = 1;
  bool need_dx = false, need_dgamma = false, need_dbeta = false;
  bool fused = true;
  bool empty = false;  // N, C or HxW is 0: nothing to sum, and the other two may be anything
  int64_t chunks = 1;  // per plane, chunked schedule
  // Samples are HxW rows of C channels: gradOut, input, gradInput channels-last alike
  // (TensorView::is_channels_last), or HxW == 1 contiguous with narrow groups.
  bool channel_rows = false;
  // Workspace layout, in floats.
  int64_t mean_at = 0, rstd_at = 0, gamma_at = 0, ds_at = 0, db_at = 0, coef_at = 0, part_at = 0, total = 0;
  int64_t lanes_at = 0;  // channel rows: per lane slot, mean / scale / c2 / c3 of every channel
  int64_t lane_slots = 0;  // channel rows: a slot per sample (row_chunks > 1), else per worker
  int64_t point_block = 1;  // spans (run_point_rows): groups a task takes as one span
  int64_t slot_floats = 0;  // floats of a lane slot
  // Planes shorter than a vector in small groups, the operands contiguous: spans, as HxW 1.
  bool short_spans = false;
  int64_t row_chunks = 1;  // channel rows: chunks of rows per sample (partial sums each)
  int64_t row_part_at = 0;  // channel rows, row_chunks > 1: [N][row_chunks][2][C] partial sums
};

Plan make_plan(const GroupNormBackwardArgs& a) {
  Plan p;
  p.N = a.N;
  p.C = a.C;
  p.HxW = a.HxW;
  p.G = std::max<int64_t>(1, a.group);
  p.D = p.C / p.G;
  p.need_dx = a.outputMask[0] && a.gradInput.present;
  p.need_dgamma = a.outputMask[1] && a.gradGammaOut.present;
  p.need_dbeta = a.outputMask[2] && a.gradBetaOut.present;
  // With a zero among N, C, HxW the validator's N * C * HxW == numel(input) bounds nothing else
  // (e.g. N = 0 with C and HxW near 2^60), so the products below could overflow: plan nothing.
  p.empty = p.N == 0 || p.C == 0 || p.HxW == 0;
  if (p.empty) return p;
  // Fused unless a group is too big to stay in cache between its two passes, or so big with so
  // few groups that one task per group would leave threads idle.
  const int64_t group_elems = p.D * p.HxW;
  p.fused = group_elems <= kFusedElems || (group_elems <= kFusedMaxElems && p.N * p.G >= kFusedMinTasks);
  p.chunks = p.fused ? 1 : std::max<int64_t>(1, (p.HxW + kPlaneChunk - 1) / kPlaneChunk);
  const int64_t NG = p.N * p.G, NC = p.N * p.C;
  int64_t at = 0;
  p.mean_at = at, at += NG;
  p.rstd_at = at, at += NG;
  p.gamma_at = at, at += p.C;
  p.ds_at = at, at += NC;
  p.db_at = at, at += NC;
  p.coef_at = at, at += p.fused ? 0 : 2 * NG;
  p.part_at = at, at += p.fused ? 0 : 2 * NC * p.chunks;
  // gradOut, input and gradInput (when written) channels-last alike: rows of C channels.
  const TensorView& x = a.input;
  p.channel_rows = p.HxW > 1 && x.is_channels_last() && x.shape[0] == p.N && x.shape[1] == p.C &&
                   x.same_layout(a.gradOut) && (!p.need_dx || x.same_layout(a.gradInput));
  // HxW == 1, contiguous: each sample is one row of C channels, the same memory. Groups
  // narrower than a vector run per group with fixed costs that dwarf their few elements (N16
  // C512 G512: 244 us, torch 48-117 us; as rows 42 us); wider ones lose as rows (D 32-512: 1.1x
  // the time, N = 1 one thread).
  p.channel_rows = p.channel_rows || (p.HxW == 1 && p.D < kWidth && x.is_contiguous() &&
                                      a.gradOut.is_contiguous() && (!p.need_dx || a.gradInput.is_contiguous()));
  // Few samples: each one's rows in chunks of at least kGrainElems elements, about
  // kRowSplitSamples chunks in all, so that N = 1 uses every core.
  if (p.channel_rows && p.N < kRowSplitSamples) {
    const int64_t by_size = std::max<int64_t>(1, p.C * p.HxW / kGrainElems);
    p.row_chunks = std::min({p.HxW, by_size, (kRowSplitSamples + p.N - 1) / p.N});
  }
  // Short planes (1 < HxW < a vector) in groups of few positions, contiguous: group by group
  // (group_short) each group's setup cost more than its positions ([128, 64, 3, 3] G64: 198 us,
  // torch 76 us); as spans about half the time.
  p.short_spans = !p.channel_rows && p.HxW > 1 && p.HxW < kWidth && group_elems <= kShortSpanGroupMax &&
                  x.is_contiguous() && a.gradOut.is_contiguous() && (!p.need_dx || a.gradInput.is_contiguous());
  // A sample's lanes are needed only while it runs, so they live in a slot per worker (a slot
  // per sample only when a sample's rows are split over tasks). A slot per sample made the
  // workspace of [256, 4096] HxW 1 G1024 26 MB, six times its input, and every call wrote and
  // reread all of it. Spans (run_point_rows): a block of whole groups per task, and per slot 9
  // floats per position of a block (its lanes, gamma, products and per-group sums).
  p.slot_floats = 4 * p.C;
  int64_t slot_tasks = p.N;
  if ((p.channel_rows && p.HxW == 1) || p.short_spans) {
    p.point_block = std::min(NG, std::max<int64_t>(1, kPointBlockElems / group_elems));
    p.slot_floats = 9 * group_elems * p.point_block;
    slot_tasks = (NG + p.point_block - 1) / p.point_block;
  }
  if (p.channel_rows || p.short_spans)
    p.lane_slots = p.row_chunks > 1 ? p.N : staged_slots(slot_tasks, uint64_t(p.slot_floats) * sizeof(float));
  p.lanes_at = at, at += p.slot_floats * p.lane_slots;
  p.row_part_at = at, at += p.row_chunks > 1 ? 2 * NC * p.row_chunks : 0;
  p.total = at;
  return p;
}

// Bytes of one group's dY and X, and of the call's three [N, C, HxW] operands (a non-empty plan).
uint64_t group_bytes(const Plan& p, uint64_t elem_bytes) { return uint64_t(p.D * p.HxW) * 2 * elem_bytes; }
uint64_t call_bytes(const Plan& p, uint64_t elem_bytes) { return uint64_t(p.N * p.C * p.HxW) * 3 * elem_bytes; }
// Groups too big for half an L2: written backwards, and handed out to the threads one at a time.
bool big_groups(const Plan& p, uint64_t elem_bytes) { return group_bytes(p, elem_bytes) > kBackwardWriteBytes; }

// Whether the fused schedule's second pass takes a group's channels last to first: it then starts
// on the lines the sums pass read last, which are still in L1 (or, for a group bigger than half an
// L2, in L2), before it reaches what the sums pass left further out. 2 threads, in-process A/B:
//   * groups over half an L2 (1 MiB on Zen 4): a forward pass would first fetch the evicted head
//     of the group, evicting the lines it needs next. N1 C128 256x256 G32 (1-2 MiB groups): bf16
//     0.91x, fp16 0.95x, fp32 0.97x the time.
//   * fp32 groups over the L1 (32 KiB on Zen 4) in calls whose operands stay in the L3 (at most
//     half of it): N2 C1280 16x16 (80 KiB groups) 0.92-0.94x, N1 C2560 8x8 (40 KiB) 0.77-0.91x,
//     N4 C256 32x32 (64 KiB) 0.92-0.96x, N2 C640 32x32 and N1 C1280 32x32 (160 and 320 KiB)
//     0.94-0.99x. fp16 and bf16 gain nothing there (0.97-1.04x; an earlier machine 1.03-1.11x):
//     the conversions bound their passes, not the L1's fill.
//   * elsewhere the forward pass wins: it ends where the next group's sums start, which the
//     hardware prefetcher is already streaming. Groups within the L1 (N32 C64 32x32 G32, 16 KiB)
//     backwards took 1.05-1.09x the time; calls of 25 MB (N4 C512 32x32, N1 C512 64x64) up to
//     1.05-1.08x, where the sums pass reads from memory and each group's start then waits for it.
bool writes_backward_for(const Plan& p, uint64_t elem_bytes) {
  if (p.empty) return false;  // (An empty plan's D and HxW may be anything: see make_plan.)
  if (big_groups(p, elem_bytes)) return true;
  return elem_bytes == 4 && group_bytes(p, elem_bytes) > l1_data_cache_bytes() &&
         !streams_worthwhile(2 * call_bytes(p, elem_bytes), 1);
}

// ---------------------------------------------------------------------------------------------
// Plane primitives. A "plane" is (n, c); positions [h0, h1) of it. Contiguous versions take
// pointers to position h0; strided versions take cursors.

struct Sums {
  float centred = 0.0f;  // sum dY * (X - mean)
  float dy = 0.0f;       // sum dY
};

template <class T>
ACLNN_ALWAYS_INLINE Sums plane_sums(const T* dy, const T* x, int64_t len, float mean, bool with_x) {
  VecF s0 = zero(), s1 = zero(), b0 = zero(), b1 = zero();
  const VecF m = set1(mean);
  int64_t i = 0;
  if (with_x) {
    // Pairs: dY and X share one layout, and a sum only needs a fixed order, not element order.
    for (; i + 2 * kWidth <= len; i += 2 * kWidth) {
      const Pair d = load_pair(dy + i), v = load_pair(x + i);
      s0 = fma(d.a, v.a - m, s0);
      s1 = fma(d.b, v.b - m, s1);
      b0 = b0 + d.a;
      b1 = b1 + d.b;
    }
    if (i + kWidth <= len) {
      const VecF d0 = load(dy + i);
      s0 = fma(d0, load(x + i) - m, s0);
      b0 = b0 + d0;
      i += kWidth;
    }
    if (i < len) {
      const VecF d1 = load_partial(dy + i, len - i);  // zero lanes: 0 * (0 - m) adds 0
      s1 = fma(d1, load_partial(x + i, len - i) - m, s1);
      b1 = b1 + d1;
    }
  } else {
    for (; i + 2 * kWidth <= len; i += 2 * kWidth) {
      const Pair d = load_pair(dy + i);
      b0 = b0 + d.a;
      b1 = b1 + d.b;
    }
    if (i + kWidth <= len) b0 = b0 + load(dy + i), i += kWidth;
    if (i < len) b1 = b1 + load_partial(dy + i, len - i);
  }
  return Sums{reduce_add(s0 + s1), reduce_add(b0 + b1)};
}

// Short planes (HxW < kWidth): scalar, no per-plane vector overhead.
template <class T>
Sums plane_sums_short(const T* dy, const T* x, int64_t len, float mean, bool with_x) {
  Sums s;
  for (int64_t i = 0; i < len; ++i) {
    const float d = to_float(dy[i]);
    if (with_x) s.centred += d * (to_float(x[i]) - mean);
    s.dy += d;
  }
  return s;
}

struct Coef {
  float c1, c2, c3, mean;
};

// fp32 planes of at least this many elements start their vector loop on dY's line (see
// plane_write).
constexpr int64_t kAlignLoadsMinElems = 128;

template <bool kStream, class T>
ACLNN_ALWAYS_INLINE void plane_write(const T* dy, const T* x, T* dx, int64_t len, const Coef& k) {
  const VecF c1 = set1(k.c1), c2 = set1(k.c2), c3 = set1(k.c3), m = set1(k.mean);
  const auto value = [&](int64_t i, int64_t count) __attribute__((always_inline)) {
    if (count == kWidth) return fma(c1, load(dy + i), fma(c2, load(x + i) - m, c3));
    return fma(c1, load_partial(dy + i, count), fma(c2, load_partial(x + i, count) - m, c3));
  };
  // fp32 inputs off a line (NumPy puts big arrays 16 bytes past one): the plane's first values
  // up to dY's next line go out as one partial vector, so that every later load of dY (and of
  // X when it has dY's offset, as arrays NumPy maps afresh do) reads one line instead of two;
  // dX's stores may then straddle lines instead. Each value is the same lane-wise expression, so the
  // results are too. 2 threads, in-process A/B, inputs 4-48 bytes past a line: N2 C1280 16x16
  // and N2 C640 32x32 0.91-0.95x the time, N4 C256 32x32 and N32 C64 32x32 0.91-0.95x; with dX
  // also off a line 0.91-0.96x; shorter planes (8x8, 10x10) gained nothing, 16-bit data neither
  // (0.98-1.03x: their loop is bound by the conversions), nor the AVX2 level's 32-byte loads
  // (0.99-1.01x). Streamed stores keep dX's alignment, which they need.
  if constexpr (!kStream && sizeof(T) == 4 && kWidth == 16) {
    if (len >= kAlignLoadsMinElems) {
      const int64_t head = head_to<64>(dy, len);
      if (head > 0 && head < len) {
        store_partial(dx, value(0, head), head);
        dy += head, x += head, dx += head, len -= head;
      }
    }
  }
  // The coefficients are broadcasts, so pairs of dY, X and dX (one layout) line up lane for lane.
  const auto pair = [&](int64_t i) __attribute__((always_inline)) {
    const Pair d = load_pair(dy + i), v = load_pair(x + i);
    return Pair{fma(c1, d.a, fma(c2, v.a - m, c3)), fma(c1, d.b, fma(c2, v.b - m, c3))};
  };
  store_run_pairs<kStream>(dx, len, pair, value);
}

template <class T>
void plane_write_short(const T* dy, const T* x, T* dx, int64_t len, const Coef& k) {
  for (int64_t i = 0; i < len; ++i)
    dx[i] = from_float<T>(k.c1 * to_float(dy[i]) + (k.c2 * (to_float(x[i]) - k.mean) + k.c3));
}

// ---------------------------------------------------------------------------------------------

// Where the groups of one operand's [N, C, HxW] view start, when each group is one run of unit
// stride: the innermost of the operand's coalesced dims has stride 1 and spans whole groups.
// That holds for contiguous operands (one run) and for a channel slice x[:, c0:c1] of a wider
// NCHW tensor (torch.chunk along the channels: a run per sample), which then take the
// contiguous kernels; the element-by-element path took such a slice (N2 C640 32x32) 20 times
// the contiguous call's time, 17 times torch's.
struct GroupRuns {
  const FlatIndex& f;
  const bool ok;
  GroupRuns(const FlatIndex& flat, int64_t group_elems)
      : f(flat), ok(group_elems > 0 && f.stride[f.m - 1] == 1 && f.shape[f.m - 1] % group_elems == 0) {}
  // Element offset of flat index `start`, the first element of a group.
  int64_t at(int64_t start) const {
    if (f.m == 1) return start;
    const int64_t run = f.shape[f.m - 1];
    int64_t outer = start / run, off = start % run;
    for (int k = f.m - 2; k >= 0; --k) {
      off += outer % f.shape[k] * f.stride[k];
      outer /= f.shape[k];
    }
    return off;
  }
};

// Elements of the dX runs written one after another (for stream_runs_fit): planes, or for short
// planes the channel blocks of group_short.
inline uint64_t run_elems(const Plan& p) {
  if (p.HxW >= kWidth) return uint64_t(p.HxW);
  return uint64_t(std::min(p.D, kShortBlock / std::max<int64_t>(1, p.HxW)) * p.HxW);
}

// The operands as staged (see prepare), in slot order: a task is one group, those of its
// operands that no fast path takes copied into its thread's slot.
enum StagedOperand { kDy = 0, kX = 1, kDx = 2 };

template <class T>
struct Kernel {
  const GroupNormBackwardArgs& a;
  const Plan& p;
  float* ws;
  const FlatIndex fdy, fx, fdx;
  const GroupRuns rdy, rx, rdx;
  const bool contiguous;  // every operand (group(): no offsets to compute)
  const bool runs;        // every operand's groups are unit-stride runs: the vector kernels apply
  const bool stream;  // dX overflows the last-level cache: streaming stores
  // The fused schedule's second pass takes the group's channels last to first (see
  // writes_backward_for).
  const bool writes_backward;
  const T* dy0;
  const T* x0;
  T* dx0;
  const Staging& st;

  Kernel(const GroupNormBackwardArgs& args, const Plan& plan, float* workspace, const Staging& staging)
      : a(args),
        p(plan),
        ws(workspace),
        fdy(args.gradOut),
        fx(args.input),
        fdx(plan.need_dx ? args.gradInput : args.input),
        // (An empty plan's D and HxW may be anything, their product too: see make_plan.)
        rdy(fdy, plan.empty ? 0 : plan.D * plan.HxW),
        rx(fx, plan.empty ? 0 : plan.D * plan.HxW),
        rdx(fdx, plan.empty ? 0 : plan.D * plan.HxW),
        contiguous(fdy.contiguous() && fx.contiguous() && fdx.contiguous()),
        runs(!plan.empty && rdy.ok && rx.ok && rdx.ok),
        stream(plan.need_dx && !plan.empty && fdx.contiguous() &&
               streams_worthwhile(call_bytes(plan, sizeof(T)), 1) &&
               stream_runs_fit(args.gradInput.ptr<T>(), run_elems(plan) * sizeof(T))),
        writes_backward(writes_backward_for(plan, sizeof(T))),
        dy0(args.gradOut.ptr<const T>()),
        x0(args.input.ptr<const T>()),
        dx0(plan.need_dx ? args.gradInput.ptr<T>() : nullptr),
        st(staging) {}

  float* mean() const { return ws + p.mean_at; }
  float* rstd() const { return ws + p.rstd_at; }
  float* gamma() const { return ws + p.gamma_at; }
  float* ds() const { return ws + p.ds_at; }
  float* db() const { return ws + p.db_at; }

  bool with_x() const { return p.need_dx || p.need_dgamma; }

  // The first elements of group g of sample n (runs only; dx null when dX is not written).
  struct Group {
    const T* dy;
    const T* x;
    T* dx;
  };
  Group group(int64_t n, int64_t g) const {
    const int64_t start = (n * p.C + g * p.D) * p.HxW;
    if (contiguous) return Group{dy0 + start, x0 + start, p.need_dx ? dx0 + start : nullptr};
    return group_in_runs(start);
  }
  // Out of line: inlined, its divisions made the short-plane groups' code 1.2x slower even for
  // contiguous operands (N16 C256 HxW 4 G32: 30.2 against 25.6 us).
  __attribute__((noinline)) Group group_in_runs(int64_t start) const {
    return Group{dy0 + rdy.at(start), x0 + rx.at(start), p.need_dx ? dx0 + rdx.at(start) : nullptr};
  }

  // Elements [h0, h1) of plane (n, c), for the chunked schedule. Its operands are all in runs:
  // prepare stages only fused groups and replaces any other operand by a dense copy.
  Sums sums(int64_t n, int64_t c, int64_t h0, int64_t h1, float m) const {
    const int64_t len = h1 - h0;
    const Group gp = group(n, c / p.D);
    const int64_t at = (c % p.D) * p.HxW + h0;
    if (p.HxW < kWidth) return plane_sums_short(gp.dy + at, gp.x + at, len, m, with_x());
    return plane_sums(gp.dy + at, gp.x + at, len, m, with_x());
  }

  void write(int64_t n, int64_t c, int64_t h0, int64_t h1, const Coef& k) const {
    const int64_t len = h1 - h0;
    const Group gp = group(n, c / p.D);
    const int64_t at = (c % p.D) * p.HxW + h0;
    if (p.HxW < kWidth) return plane_write_short(gp.dy + at, gp.x + at, gp.dx + at, len, k);
    if (stream) plane_write<true>(gp.dy + at, gp.x + at, gp.dx + at, len, k);
    else plane_write<false>(gp.dy + at, gp.x + at, gp.dx + at, len, k);
  }

  // Group coefficients c2, c3 from the per-channel sums of (n, g).
  void group_coef(int64_t n, int64_t g, float& c2, float& c3) const {
    float dsc_g = 0.0f, db_g = 0.0f;
    for (int64_t c = g * p.D; c < (g + 1) * p.D; ++c) {
      dsc_g += ds()[n * p.C + c] * gamma()[c];
      db_g += db()[n * p.C + c] * gamma()[c];
    }
    const float r = rstd()[n * p.G + g];
    const float s = 1.0f / float(p.D * p.HxW);
    c2 = -dsc_g * r * r * r * s;
    c3 = -db_g * r * s;
  }

  // group_coef for channels [c0, c1) of sample n when each group is one channel (D = 1), a
  // vector of groups at a time with group_coef's operations in its order per lane (its sums
  // start from 0.0f, hence the added zero: the same values, signed zeros included). Writes
  // scale[k] = rstd * gamma, c2[k] and c3[k] of channel c0 + k.
  void point_coefs(int64_t n, int64_t c0, int64_t c1, float* scale, float* c2, float* c3) const {
    point_coefs_at(ds() + n * p.C + c0, db() + n * p.C + c0, rstd() + n * p.G + c0, gamma() + c0, c1 - c0,
                   scale, c2, c3);
  }

  // point_coefs on len channels whose sums, rstd and gamma are at dsn, dbn, rn and gmn.
  void point_coefs_at(const float* dsn, const float* dbn, const float* rn, const float* gmn, int64_t len,
                      float* scale, float* c2, float* c3) const {
    const VecF zero = set1(0.0f), sv = set1(1.0f / float(p.D * p.HxW));
    const auto lanes = [&](int64_t c, int64_t count) {
      const bool full = count == kWidth;
      const VecF gm = full ? load(gmn + c) : load_partial(gmn + c, count);
      const VecF r = full ? load(rn + c) : load_partial(rn + c, count);
      const VecF dsc = zero + (full ? load(dsn + c) : load_partial(dsn + c, count)) * gm;
      const VecF dbg = zero + (full ? load(dbn + c) : load_partial(dbn + c, count)) * gm;
      const VecF k2 = -dsc * r * r * r * sv, k3 = -dbg * r * sv, k1 = r * gm;
      if (full) {
        store(scale + c, k1), store(c2 + c, k2), store(c3 + c, k3);
      } else {
        store_partial(scale + c, k1, count), store_partial(c2 + c, k2, count), store_partial(c3 + c, k3, count);
      }
    };
    for_each_vector(len, lanes);
  }

  // run_fused's groups [begin, end) when they are small (at most kBatchGroupMax elements, planes
  // of at least kWidth): in batches (at most kBatchMax groups, kBatchElems elements: dY and X
  // of fp32 take 128 KiB, still in L2 for the write), the sums of the batch's planes, then
  // its groups' coefficients, then its dX. One group at a time, each group's coefficient chain
  // (group_coef: D dependent adds, a division) sat between its sums and its write; batched, the
  // chains of different groups overlap, and one-channel groups take a vector of groups at a
  // time (point_coefs). 2 threads, in-process A/B against one group at a time, fp32 and bf16,
  // two rounds: N8 C64 HxW 64 G64 0.76-0.88x the time, N64 C32 HxW 32 G4 0.84-0.87x, G32
  // 0.71-0.99x, N2 C512 HxW 16 G512 0.61-0.72x, N16 C64 HxW 16 G16 0.89-0.92x; groups of 2K+
  // elements (not batched) 0.96-1.00x.
  bool batches_groups() const {
    return runs && p.HxW >= kWidth && p.D * p.HxW <= kBatchGroupMax;
  }
  void batched_groups(int64_t begin, int64_t end) const {
    if (contiguous) batched_groups<true>(begin, end);
    else batched_groups<false>(begin, end);
  }
  // kContiguous: plane pointers by index arithmetic. Through group() per group (its branch and
  // three pointers), groups of 64-256 elements took 1.07-1.15x the time.
  template <bool kContiguous>
  void batched_groups(int64_t begin, int64_t end) const {
    alignas(64) float k1[kBatchMax], k2[kBatchMax], k3[kBatchMax];  // per channel (D = 1) or per group
    const int64_t batch = std::max<int64_t>(1, std::min(kBatchMax, kBatchElems / (p.D * p.HxW)));
    const auto plane = [&](int64_t n, int64_t g, int64_t c) __attribute__((always_inline)) {
      if constexpr (kContiguous) {
        const int64_t at = (n * p.C + c) * p.HxW;
        return Group{dy0 + at, x0 + at, dx0 == nullptr ? nullptr : dx0 + at};
      } else {
        const Group gp = group(n, g);
        const int64_t at = (c - g * p.D) * p.HxW;
        return Group{gp.dy + at, gp.x + at, gp.dx == nullptr ? nullptr : gp.dx + at};
      }
    };
    for (int64_t t0 = begin; t0 < end;) {
      const int64_t n = t0 / p.G, g0 = t0 % p.G;
      const int64_t g1 = std::min({p.G, g0 + batch, g0 + (end - t0)});
      for (int64_t g = g0; g < g1; ++g) {
        const float m = mean()[n * p.G + g];
        for (int64_t c = g * p.D; c < (g + 1) * p.D; ++c) {
          const Group at = plane(n, g, c);
          const Sums s = plane_sums(at.dy, at.x, p.HxW, m, with_x());
          ds()[n * p.C + c] = s.centred;
          db()[n * p.C + c] = s.dy;
        }
      }
      if (p.need_dx) {
        if (p.D == 1) {
          point_coefs(n, g0, g1, k1, k2, k3);
        } else {
          for (int64_t g = g0; g < g1; ++g) group_coef(n, g, k2[g - g0], k3[g - g0]);
        }
        for (int64_t g = g0; g < g1; ++g) {
          const float m = mean()[n * p.G + g], r = rstd()[n * p.G + g];
          for (int64_t c = g * p.D; c < (g + 1) * p.D; ++c) {
            const Group at = plane(n, g, c);
            const Coef k{p.D == 1 ? k1[g - g0] : r * gamma()[c], k2[g - g0], k3[g - g0], m};
            if (stream) plane_write<true>(at.dy, at.x, at.dx, p.HxW, k);
            else plane_write<false>(at.dy, at.x, at.dx, p.HxW, k);
          }
        }
      }
      t0 += g1 - g0;
    }
  }

  Coef coef(int64_t n, int64_t c, float c2, float c3) const {
    const int64_t ng = n * p.G + c / p.D;
    return Coef{rstd()[ng] * gamma()[c], c2, c3, mean()[ng]};
  }

  void load_params() const {
    read_floats<T>(a.mean, p.N * p.G, mean());
    read_floats<T>(a.rstd, p.N * p.G, rstd());
    if (a.gamma.present) read_floats<T>(a.gamma, p.C, gamma());
    else std::fill(gamma(), gamma() + p.C, 1.0f);
  }

  // A whole group of short planes (runs, HxW < kWidth): vectorised over the group's
  // flat range in blocks of whole channels through stack buffers; per-channel sums are then
  // scalar over each channel's few positions, in order.
  ACLNN_ALWAYS_INLINE void group_short(int64_t n, int64_t g) const {
    const int64_t H = p.HxW, per_block = kShortBlock / H;
    const int64_t cg0 = g * p.D, cg1 = cg0 + p.D;
    const float m = mean()[n * p.G + g];
    const VecF mv = set1(m);
    const Group gp = group(n, g);
    const T* dy = gp.dy;
    const T* x = gp.x;
    float* dsn = ds() + n * p.C;
    float* dbn = db() + n * p.C;
    alignas(64) float bs[kShortBlock], bb[kShortBlock];
    const bool use_x = with_x();
    if (H == 1) {
      // One position per channel: the products are the sums, and the write needs no per-position
      // scale buffer. Through the stack buffers (masked stores read back by loads) N32 C256
      // HxW 1 G32, 8 channels per group, took 1.25-1.35x the time.
      const int64_t len = p.D;
      int64_t i = 0;
      for (; i + kWidth <= len; i += kWidth) {
        const VecF d = load(dy + i);
        if (use_x) store(dsn + cg0 + i, d * (load(x + i) - mv));
        store(dbn + cg0 + i, d);
      }
      if (i < len) {
        const VecF d = load_partial(dy + i, len - i);
        if (use_x) store_partial(dsn + cg0 + i, d * (load_partial(x + i, len - i) - mv), len - i);
        store_partial(dbn + cg0 + i, d, len - i);
      }
      if (!p.need_dx) return;
      float c2, c3;
      group_coef(n, g, c2, c3);
      const VecF rv = set1(rstd()[n * p.G + g]), c2v = set1(c2), c3v = set1(c3);
      const float* gm = gamma() + cg0;
      const auto value = [&](int64_t k, int64_t count) __attribute__((always_inline)) {
        if (count == kWidth) return fma(rv * load(gm + k), load(dy + k), fma(c2v, load(x + k) - mv, c3v));
        return fma(rv * load_partial(gm + k, count), load_partial(dy + k, count),
                   fma(c2v, load_partial(x + k, count) - mv, c3v));
      };
      if (stream) store_run<true>(gp.dx, len, value);
      else store_run<false>(gp.dx, len, value);
      return;
    }
    for (int64_t c0 = cg0; c0 < cg1; c0 += per_block) {
      const int64_t c1 = std::min(cg1, c0 + per_block), len = (c1 - c0) * H, off = (c0 - cg0) * H;
      int64_t i = 0;
      for (; i + kWidth <= len; i += kWidth) {
        const VecF d = load(dy + off + i);
        if (use_x) store(bs + i, d * (load(x + off + i) - mv));
        store(bb + i, d);
      }
      if (i < len) {
        const VecF d = load_partial(dy + off + i, len - i);
        if (use_x) store_partial(bs + i, d * (load_partial(x + off + i, len - i) - mv), len - i);
        store_partial(bb + i, d, len - i);
      }
      for (int64_t c = c0; c < c1; ++c) {
        const float* ps = bs + (c - c0) * H;
        const float* pb = bb + (c - c0) * H;
        float sc = 0.0f, sd = 0.0f;
        for (int64_t h = 0; h < H; ++h) {
          if (use_x) sc += ps[h];
          sd += pb[h];
        }
        dsn[c] = sc;
        dbn[c] = sd;
      }
    }
    if (!p.need_dx) return;
    float c2, c3;
    group_coef(n, g, c2, c3);
    const float r = rstd()[n * p.G + g];
    const VecF c2v = set1(c2), c3v = set1(c3);
    T* dx = gp.dx;
    for (int64_t c0 = cg0; c0 < cg1; c0 += per_block) {
      const int64_t c1 = std::min(cg1, c0 + per_block), len = (c1 - c0) * H, off = (c0 - cg0) * H;
      for (int64_t c = c0; c < c1; ++c) {
        const float scale = r * gamma()[c];
        for (int64_t h = 0; h < H; ++h) bs[(c - c0) * H + h] = scale;
      }
      const auto value = [&](int64_t i, int64_t count) __attribute__((always_inline)) {
        if (count == kWidth) return fma(load(bs + i), load(dy + off + i), fma(c2v, load(x + off + i) - mv, c3v));
        return fma(load_partial(bs + i, count), load_partial(dy + off + i, count),
                   fma(c2v, load_partial(x + off + i, count) - mv, c3v));
      };
      if (stream) store_run<true>(dx + off, len, value);
      else store_run<false>(dx + off, len, value);
    }
  }

  // Group t = (n, g) of the fused schedule (planes of at least kWidth) from its pointers: its
  // planes' sums, its coefficients, its dX.
  void fused_group(int64_t t, const Group& gp, bool stream_dx) const {
    const int64_t n = t / p.G, g = t % p.G;
    const float m = mean()[t];
    const int64_t cg0 = g * p.D, cg1 = cg0 + p.D;
    for (int64_t c = cg0; c < cg1; ++c) {
      const int64_t at = (c - cg0) * p.HxW;
      const Sums s = plane_sums(gp.dy + at, gp.x + at, p.HxW, m, with_x());
      ds()[n * p.C + c] = s.centred;
      db()[n * p.C + c] = s.dy;
    }
    if (!p.need_dx) return;
    float c2, c3;
    group_coef(n, g, c2, c3);
    const float r = rstd()[t];
    for (int64_t i = 0; i < p.D; ++i) {
      const int64_t c = writes_backward ? cg1 - 1 - i : cg0 + i;
      const Coef k{r * gamma()[c], c2, c3, m};
      const int64_t at = (c - cg0) * p.HxW;
      if (stream_dx) plane_write<true>(gp.dy + at, gp.x + at, gp.dx + at, p.HxW, k);
      else plane_write<false>(gp.dy + at, gp.x + at, gp.dx + at, p.HxW, k);
    }
  }

  // The fused schedule with staged operands: a task per group, each in its thread's slot. An
  // operand that is not staged has its groups in runs.
  void fused_staged() const {
    const bool stream_dx = stream && !st.moves(kDx);
    run_staged(st, [&](const StagedTask& task) {
      const int64_t start = task.first, t = start / (p.D * p.HxW);  // start = (n * C + g * D) * HxW, t = n * G + g
      Group gp{nullptr, nullptr, nullptr};
      gp.dy = task.moves(kDy) ? task.in<const T>(kDy) : dy0 + rdy.at(start);
      if (!task.moves(kX)) gp.x = x0 + rx.at(start);
      else gp.x = with_x() ? task.in<const T>(kX) : task.room<const T>(kX);  // (unread: dbeta alone)
      if (p.need_dx) gp.dx = task.moves(kDx) ? task.out<T>(kDx) : dx0 + rdx.at(start);
      fused_group(t, gp, stream_dx);
      if (stream_dx) stream_fence();
    });
  }

  void run_fused() const {
    const int64_t NG = p.N * p.G;
    const auto groups = [&](int64_t begin, int64_t end) {
      if (batches_groups()) {
        batched_groups(begin, end);
        if (stream) stream_fence();
        return;
      }
      for (int64_t t = begin; t < end; ++t) {
        // Every operand is in runs here: prepare staged or copied the others.
        const int64_t n = t / p.G, g = t % p.G;
        if (p.HxW < kWidth) group_short(n, g);
        else fused_group(t, group(n, g), stream);
      }
      if (stream) stream_fence();
    };
    if (st.staged()) return fused_staged();
    // Big groups, a few per thread, are handed out one at a time: with a fixed share, a thread
    // that loses its core for a while holds up the call (VAE N1 C128 256x256, 32 groups of
    // 1-2 MiB, 2 threads, in-process A/B against the fixed split, three runs: bf16 0.87-0.95x
    // the time, fp32 0.96-1.00x, fp16 0.98-1.05x). Small groups keep fixed contiguous shares:
    // handed out, the small UNet shapes took 1.00-1.07x their time (each thread's next group no
    // longer starts where its last one ended, which may be why).
    const int64_t grain = std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, p.D * p.HxW));
    if (big_groups(p, sizeof(T))) parallel_for_dynamic(NG, grain, groups);
    else parallel_for(NG, grain, groups);
  }

  // Channel rows (channels-last operands, or HxW == 1): each sample is HxW rows of C channels.
  // Per channel, the sums run over the rows in order (vectorised across the channels of a row);
  // then each group's coefficients, spread per channel, and dX row by row. One task per sample,
  // or, with fewer than kRowSplitSamples samples, per chunk of a sample's rows (Plan::row_chunks:
  // partial sums per chunk, added in chunk order). On a channels-last [8, 64, 56, 56] G32 the
  // strided path took 10.4 ms (torch 6.0 ms).
  float* lanes(int64_t slot) const { return ws + p.lanes_at + slot * p.slot_floats; }

  // A lane slot: the spread means, scales, c2 and c3 of a span of `width` channels (one sample's
  // C, or a block of samples' block * C when HxW is 1), one array after another.
  struct Lanes {
    float *mean, *scale, *c2, *c3;
    Lanes(float* slot, int64_t width) : mean(slot), scale(slot + width), c2(slot + 2 * width), c3(slot + 3 * width) {}
  };

  // Accumulates one row of `width` channels into s (centred sums) and b (dY sums); kFirst: s and
  // b start from zero instead (the same values as zeroing them first, without that pass).
  template <bool kFirst = false>
  void span_sums(const T* dr, const T* xr, const float* lm, int64_t width, float* s, float* b) const {
    const VecF z = zero();
    int64_t c = 0;
    for (; c + kWidth <= width; c += kWidth) {
      const VecF d = load(dr + c);
      store(s + c, fma(d, load(xr + c) - load(lm + c), kFirst ? z : load(s + c)));
      store(b + c, (kFirst ? z : load(b + c)) + d);
    }
    if (c < width) {
      const int64_t k = width - c;
      const VecF d = load_partial(dr + c, k);
      store_partial(s + c, fma(d, load_partial(xr + c, k) - load_partial(lm + c, k), kFirst ? z : load_partial(s + c, k)), k);
      store_partial(b + c, (kFirst ? z : load_partial(b + c, k)) + d, k);
    }
  }

  // dX of one row of `width` channels from its spread means and coefficients.
  void span_write(const T* dr, const T* xr, T* out, const Lanes& l, int64_t width) const {
    const float *lm = l.mean, *ls = l.scale, *l2 = l.c2, *l3 = l.c3;
    int64_t c = 0;
    for (; c + kWidth <= width; c += kWidth)
      store(out + c, fma(load(ls + c), load(dr + c), fma(load(l2 + c), load(xr + c) - load(lm + c), load(l3 + c))));
    if (c < width) {
      const int64_t k = width - c;
      store_partial(out + c, fma(load_partial(ls + c, k), load_partial(dr + c, k),
                                 fma(load_partial(l2 + c, k), load_partial(xr + c, k) - load_partial(lm + c, k),
                                     load_partial(l3 + c, k))), k);
    }
  }

  // Accumulates rows [r0, r1) of sample n into s and b, C each.
  void row_sums(int64_t n, const Lanes& l, int64_t r0, int64_t r1, float* s, float* b) const {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t at = (n * p.HxW + r) * p.C;
      span_sums(dy0 + at, x0 + at, l.mean, p.C, s, b);
    }
  }

  // dX of rows [r0, r1) of sample n.
  void row_write(int64_t n, const Lanes& l, int64_t r0, int64_t r1) const {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t at = (n * p.HxW + r) * p.C;
      span_write(dy0 + at, x0 + at, dx0 + at, l, p.C);
    }
  }

  // out[c - c0] = per_group[c / D] for channels [c0, c1).
  void spread_per_channel(const float* per_group, int64_t c0, int64_t c1, float* out) const {
    for (int64_t g = c0 / p.D, c = c0; c < c1; ++g)
      for (const int64_t cend = std::min(c1, (g + 1) * p.D); c < cend; ++c) out[c - c0] = per_group[g];
  }

  // Sample n's means spread per channel into mean[0, C).
  void spread_means(int64_t n, float* mean_lanes) const { spread_per_channel(mean() + n * p.G, 0, p.C, mean_lanes); }

  // Sample n's coefficients spread per channel into scale, c2, c3 [0, C) (its ds/db complete).
  void spread_coefs(int64_t n, float* ls, float* l2, float* l3) const {
    const int64_t D = p.D;
    if (D == 1) return point_coefs(n, 0, p.C, ls, l2, l3);
    for (int64_t g = 0; g < p.G; ++g) {
      float c2, c3;
      group_coef(n, g, c2, c3);
      const float r = rstd()[n * p.G + g];
      for (int64_t c = g * D; c < (g + 1) * D; ++c) ls[c] = r * gamma()[c];
      std::fill(l2 + g * D, l2 + (g + 1) * D, c2);
      std::fill(l3 + g * D, l3 + (g + 1) * D, c3);
    }
  }

  // fn(std::integral_constant<int64_t, H>) for plane sizes 2..15 (loops over a plane's
  // positions then unroll), fn(std::integral_constant<int64_t, 0>) for any other size.
  template <class Fn>
  static void with_short_plane(int64_t H, Fn&& fn) {
    with_plane_size(H, fn, std::make_integer_sequence<int64_t, 14>{});
  }
  template <class Fn, int64_t... Ks>  // plane sizes Ks + 2
  static void with_plane_size(int64_t H, Fn& fn, std::integer_sequence<int64_t, Ks...>) {
    const bool known = ((H == Ks + 2 && (fn(std::integral_constant<int64_t, Ks + 2>{}), true)) || ...);
    if (!known) fn(std::integral_constant<int64_t, 0>{});
  }

  // out_a[k], out_b[k] = the sums of run k of a and of b (len values each, runs back to back),
  // each added in order from 0.0f. Runs of one value (0.0f + the value: the same bits) go as
  // vectors; a len known at compile time unrolls the loop over a run.
  template <class Len>
  static void run_sums(const float* a, const float* b, int64_t runs, Len len, float* out_a, float* out_b) {
    if constexpr (std::is_same<Len, std::integral_constant<int64_t, 1>>::value) {
      for_each_vector(runs, [&](int64_t k, int64_t count) {
        if (count == kWidth) {
          store(out_a + k, zero() + load(a + k));
          store(out_b + k, zero() + load(b + k));
        } else {
          store_partial(out_a + k, zero() + load_partial(a + k, count), count);
          store_partial(out_b + k, zero() + load_partial(b + k, count), count);
        }
      });
    } else {
      const int64_t n = len;
      for (int64_t k = 0; k < runs; ++k) {
        float sa = 0.0f, sb = 0.0f;
        for (int64_t i = k * n; i < (k + 1) * n; ++i) {
          sa += a[i];
          sb += b[i];
        }
        out_a[k] = sa;
        out_b[k] = sb;
      }
    }
  }

  // Spans (channel rows with HxW 1, or short planes in small groups: Plan::short_spans). The
  // operands are contiguous, so all samples' groups lie one after another, each D channels of
  // HxW positions (flat group k is group k % G of sample k / G, flat channel j channel j % C),
  // and a block of whole groups is one span. Sums, products with gamma, coefficients and dX run over the span
  // as vectors; only each channel's sum over its HxW positions, each group's over its D
  // channels, and the spreads of per-channel and per-group values are scalar. The operations
  // per element, channel and group are those of row_sums / group_short, group_coef and
  // row_write, so the results are the same bits. Per sample or group, [1572, 3] G1 bf16 took
  // 79 us (torch 29 us), [4096, 64] G32 fp32 1.0 ms (torch 1.3 ms), and instance-norm-like
  // groups of one 3x3 plane [128, 64, 3, 3] G64 198 us (torch 76 us; as spans 83 us, and 57-63
  // with the means stored as vectors, the plane sums unrolled and the sizes held in registers).
  void run_point_rows() const {
    const int64_t C_ = p.C, D_ = p.D, H_ = p.HxW, B = p.point_block, NG = p.N * p.G;
    const VecF sv = set1(1.0f / float(D_ * H_));
    parallel_tasks((NG + B - 1) / B, p.lane_slots, [&](int64_t t, int64_t worker) {
      // Sizes as locals: captured by reference, they were reloaded after every vector store (an
      // intrinsic store may alias anything), twice per channel in the short planes' dX loop.
      const int64_t C = C_, D = D_, H = H_;
      // Groups [k0, k0 + KG) of all samples' groups one after another, as in memory.
      const int64_t k0 = t * B, KG = std::min(B, NG - k0), KC = KG * D, W = KC * H, c0 = k0 * D;
      float* slot = lanes(worker);
      const Lanes l(slot, W);    // per position
      float* gm = slot + 4 * W;  // gamma of each channel of the span
      float* ps = gm + W;        // per position: dY * (X - mean); per channel: ds * gamma
      float* pb = ps + W;        // per position: dY; per channel: db * gamma
      float* k2 = pb + W;        // per group: its centred sum, then c2
      float* k3 = k2 + KG;       // per group: its dY sum, then c3
      const float* mflat = mean() + k0;
      const float* rflat = rstd() + k0;
      float* dsn = ds() + c0;  // flat channel c0 + j is channel (c0 + j) % C of its sample
      float* dbn = db() + c0;
      const T* dyb = dy0 + c0 * H;
      const T* xb = x0 + c0 * H;
      T* dxb = dx0 + c0 * H;
      const int64_t run = D * H;  // positions of a group
      const auto gamma_tile = [&] {  // gm[j] = gamma of flat channel c0 + j
        for (int64_t j = 0, c = c0 % C; j < KC;) {
          const int64_t len = std::min(KC - j, C - c);
          std::copy(gamma() + c, gamma() + c + len, gm + j);
          j += len;
          c = 0;
        }
      };
      if (D == 1 && H == 1) {
        // One channel per group: the per-group values are the per-channel ones, the means need
        // no spreading, and the coefficients are point_coefs' vectors.
        span_sums<true>(dyb, xb, mflat, W, dsn, dbn);
        if (!p.need_dx) return;
        gamma_tile();
        point_coefs_at(dsn, dbn, rflat, gm, W, l.scale, l.c2, l.c3);
        Lanes flat = l;
        flat.mean = const_cast<float*>(mflat);
        return span_write(dyb, xb, dxb, flat, W);
      }
      for (int64_t k = 0; k < KG; ++k) {  // (a group is at most kShortSpanGroupMax positions)
        const VecF m = set1(mflat[k]);
        for_each_vector(run, [&](int64_t i, int64_t count) {
          if (count == kWidth) store(l.mean + k * run + i, m);
          else store_partial(l.mean + k * run + i, m, count);
        });
      }
      if (H == 1) {
        span_sums<true>(dyb, xb, l.mean, W, dsn, dbn);
      } else {
        // group_short's sums: the products per position, then each channel's in order from 0.
        const auto position = [&](int64_t e, int64_t count) {
          if (count == kWidth) {
            const VecF d = load(dyb + e);
            store(ps + e, d * (load(xb + e) - load(l.mean + e)));
            store(pb + e, d);
          } else {
            const VecF d = load_partial(dyb + e, count);
            store_partial(ps + e, d * (load_partial(xb + e, count) - load_partial(l.mean + e, count)), count);
            store_partial(pb + e, d, count);
          }
        };
        for_each_vector(W, position);
        with_short_plane(H, [&](auto plane) {  // each channel's few positions, unrolled
          if constexpr (plane.value > 0) run_sums(ps, pb, KC, plane, dsn, dbn);
          else run_sums(ps, pb, KC, H, dsn, dbn);
        });
      }
      if (!p.need_dx) return;
      gamma_tile();
      const auto products = [&](int64_t c, int64_t count) {
        if (count == kWidth) {
          store(ps + c, load(dsn + c) * load(gm + c));
          store(pb + c, load(dbn + c) * load(gm + c));
        } else {
          store_partial(ps + c, load_partial(dsn + c, count) * load_partial(gm + c, count), count);
          store_partial(pb + c, load_partial(dbn + c, count) * load_partial(gm + c, count), count);
        }
      };
      for_each_vector(KC, products);
      // group_coef's sums, in channel order
      if (D == 1) run_sums(ps, pb, KG, std::integral_constant<int64_t, 1>{}, k2, k3);
      else run_sums(ps, pb, KG, D, k2, k3);
      const auto coefs = [&](int64_t k, int64_t count) {
        const bool full = count == kWidth;
        const VecF r = full ? load(rflat + k) : load_partial(rflat + k, count);
        const VecF dsc = full ? load(k2 + k) : load_partial(k2 + k, count);
        const VecF dbg = full ? load(k3 + k) : load_partial(k3 + k, count);
        const VecF c2 = -dsc * r * r * r * sv, c3 = -dbg * r * sv;
        if (full) {
          store(k2 + k, c2), store(k3 + k, c3);
        } else {
          store_partial(k2 + k, c2, count), store_partial(k3 + k, c3, count);
        }
      };
      for_each_vector(KG, coefs);
      if (H == 1) {
        for (int64_t g = 0; g < KG; ++g) {
          const float r = rflat[g];
          for (int64_t j = g * D; j < (g + 1) * D; ++j) l.scale[j] = r * gm[j];
          std::fill(l.c2 + g * D, l.c2 + (g + 1) * D, k2[g]);
          std::fill(l.c3 + g * D, l.c3 + (g + 1) * D, k3[g]);
        }
        return span_write(dyb, xb, dxb, l, W);
      }
      // Short planes: each channel's H positions as one partial vector with its values broadcast
      // (span_write's operations per position, so the same bits). Spread per position first and
      // written as one span, [128, 64, 3, 3] G64 took 108-179 us, [64, 512, 3, 3] G512 390-509
      // (processes alternated); this way 82-83 and 286-310.
      for (int64_t g = 0; g < KG; ++g) {
        const float r = rflat[g];
        const VecF mv = set1(mflat[g]), c2v = set1(k2[g]), c3v = set1(k3[g]);
        for (int64_t j = g * D; j < (g + 1) * D; ++j) {
          const int64_t at = j * H;
          const VecF value = fma(set1(r * gm[j]), load_partial(dyb + at, H),
                                 fma(c2v, load_partial(xb + at, H) - mv, c3v));
          store_partial(dxb + at, value, H);
        }
      }
    });
  }

  void run_channel_rows() const {
    const int64_t C = p.C, HW = p.HxW, K = p.row_chunks;
    if (HW == 1) return run_point_rows();
    if (K == 1) {
      // Runs of samples of about kGrainElems elements, handed out to the workers, each with its
      // lane slot.
      const int64_t run = std::max<int64_t>(1, kGrainElems / (C * HW));
      parallel_tasks((p.N + run - 1) / run, p.lane_slots, [&](int64_t t, int64_t worker) {
        const Lanes l(lanes(worker), C);
        for (int64_t n = t * run; n < std::min(p.N, (t + 1) * run); ++n) {
          spread_means(n, l.mean);
          float* dsn = ds() + n * C;
          float* dbn = db() + n * C;
          std::fill(dsn, dsn + C, 0.0f);
          std::fill(dbn, dbn + C, 0.0f);
          row_sums(n, l, 0, HW, dsn, dbn);
          if (!p.need_dx) continue;
          spread_coefs(n, l.scale, l.c2, l.c3);
          row_write(n, l, 0, HW);
        }
      });
      return;
    }
    const auto rows_of = [&](int64_t k, int64_t& r0, int64_t& r1) {
      r0 = HW * k / K;
      r1 = HW * (k + 1) / K;
    };
    for (int64_t n = 0; n < p.N; ++n) spread_means(n, lanes(n));  // a slot per sample, from its start
    float* part = ws + p.row_part_at;  // [N][K][2][C]
    parallel_tasks(p.N * K, p.N * K, [&](int64_t t, int64_t) {
      const int64_t n = t / K;
      int64_t r0, r1;
      rows_of(t % K, r0, r1);
      float* s = part + t * 2 * C;
      std::fill(s, s + 2 * C, 0.0f);
      row_sums(n, Lanes(lanes(n), C), r0, r1, s, s + C);
    });
    for (int64_t n = 0; n < p.N; ++n) {  // C * K values per sample: not worth threads
      float* dsn = ds() + n * C;
      float* dbn = db() + n * C;
      const float* pn = part + n * K * 2 * C;
      std::copy(pn, pn + C, dsn);
      std::copy(pn + C, pn + 2 * C, dbn);
      for (int64_t k = 1; k < K; ++k)
        for (int64_t c = 0; c < C; ++c) {
          dsn[c] += pn[k * 2 * C + c];
          dbn[c] += pn[k * 2 * C + C + c];
        }
      if (p.need_dx) {
        const Lanes l(lanes(n), C);
        spread_coefs(n, l.scale, l.c2, l.c3);
      }
    }
    if (!p.need_dx) return;
    parallel_tasks(p.N * K, p.N * K, [&](int64_t t, int64_t) {
      int64_t r0, r1;
      rows_of(t % K, r0, r1);
      row_write(t / K, Lanes(lanes(t / K), C), r0, r1);
    });
  }

  void run_chunked() const {
    const int64_t NC = p.N * p.C, chunks = p.chunks;
    float* part_s = ws + p.part_at;
    float* part_b = part_s + NC * chunks;
    const int64_t tasks = NC * chunks;
    const int64_t grain = std::max<int64_t>(1, kGrainElems / std::min(kPlaneChunk, std::max<int64_t>(1, p.HxW)));
    parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t plane = t / chunks, k = t % chunks;
        const int64_t n = plane / p.C, c = plane % p.C;
        const int64_t h0 = k * kPlaneChunk, h1 = std::min(p.HxW, h0 + kPlaneChunk);
        const Sums s = sums(n, c, h0, h1, mean()[n * p.G + c / p.D]);
        part_s[t] = s.centred;
        part_b[t] = s.dy;
      }
    });
    parallel_for(NC, 1024, [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        float s = 0.0f, b = 0.0f;
        for (int64_t k = 0; k < chunks; ++k) {
          s += part_s[plane * chunks + k];
          b += part_b[plane * chunks + k];
        }
        ds()[plane] = s;
        db()[plane] = b;
      }
    });
    if (!p.need_dx) return;
    float* coef2 = ws + p.coef_at;
    float* coef3 = coef2 + p.N * p.G;
    parallel_for(p.N * p.G, 256, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) group_coef(t / p.G, t % p.G, coef2[t], coef3[t]);
    });
    parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t plane = t / chunks, k = t % chunks;
        const int64_t n = plane / p.C, c = plane % p.C;
        const int64_t h0 = k * kPlaneChunk, h1 = std::min(p.HxW, h0 + kPlaneChunk);
        const int64_t ng = n * p.G + c / p.D;
        write(n, c, h0, h1, coef(n, c, coef2[ng], coef3[ng]));
      }
      if (stream) stream_fence();
    });
  }

  // dgamma/dbeta: per channel, the (n, c) sums added over n in order. Channels are blocked so
  // the loops run along rows of ds/db (n outer), not down their columns.
  void write_param_grads() const {
    constexpr int64_t kBlock = 256;
    const bool empty = p.empty;
    const int64_t blocks = (p.C + kBlock - 1) / kBlock;
    const int64_t rows = std::min<int64_t>(p.N, kGrainElems);  // kBlock * N must not overflow
    parallel_for(blocks, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, kBlock * rows)), [&](int64_t begin, int64_t end) {
      alignas(64) float sg[kBlock], sb[kBlock], rc[kBlock];
      int32_t group_of[kBlock];
      for (int64_t b = begin; b < end; ++b) {
        const int64_t c0 = b * kBlock, c1 = std::min(p.C, c0 + kBlock);
        std::fill(sg, sg + kBlock, 0.0f);
        std::fill(sb, sb + kBlock, 0.0f);
        // Fewer channels than a vector (HxW 1 GroupNorm of a few features, many samples): scalar,
        // each channel's rstd looked up by its group. The spread and masked vectors below cost
        // ~50 cycles a sample ([884, 7] G7: 26 of a 48 us call, on one thread).
        const bool narrow = c1 - c0 < kWidth;
        if (narrow)
          for (int64_t c = c0; c < c1; ++c) group_of[c - c0] = int32_t(c / p.D);
        for (int64_t n = 0; n < p.N && !empty && narrow; ++n) {
          const float* dsn = ds() + n * p.C;
          const float* dbn = db() + n * p.C;
          const float* rn = rstd() + n * p.G;
          for (int64_t c = c0; c < c1; ++c) {  // the operations of the loops below, per channel
            sg[c - c0] += dsn[c] * rn[group_of[c - c0]];
            sb[c - c0] += dbn[c];
          }
        }
        for (int64_t n = 0; n < p.N && !empty && !narrow; ++n) {
          const float* dsn = ds() + n * p.C;
          const float* dbn = db() + n * p.C;
          if (p.D < kWidth) {
            // Groups narrower than a vector: rstd spread per channel first (with one channel per
            // group, sample n's rstd row already is), then whole vectors (per channel the same
            // operations as below, so the same values).
            const float* rn = rc;
            if (p.D == 1) rn = rstd() + n * p.G + c0;
            else spread_per_channel(rstd() + n * p.G, c0, c1, rc);
            int64_t c = c0;
            for (; c + kWidth <= c1; c += kWidth) {
              store(sg + (c - c0), load(sg + (c - c0)) + load(dsn + c) * load(rn + (c - c0)));
              store(sb + (c - c0), load(sb + (c - c0)) + load(dbn + c));
            }
            for (; c < c1; ++c) {
              sg[c - c0] += dsn[c] * rn[c - c0];
              sb[c - c0] += dbn[c];
            }
            continue;
          }
          for (int64_t c = c0; c < c1;) {
            const int64_t g = c / p.D, cend = std::min(c1, (g + 1) * p.D);
            const float r = rstd()[n * p.G + g];
            const VecF rv = set1(r);
            // Lane for lane the scalar tail's operations (no FMA: one rounding per step).
            for (; c + kWidth <= cend; c += kWidth) {
              store(sg + (c - c0), load(sg + (c - c0)) + load(dsn + c) * rv);
              store(sb + (c - c0), load(sb + (c - c0)) + load(dbn + c));
            }
            for (; c < cend; ++c) {
              sg[c - c0] += dsn[c] * r;
              sb[c - c0] += dbn[c];
            }
          }
        }
        if (p.need_dgamma) write_floats<T>(sg, c0, c1 - c0, a.gradGammaOut);
        if (p.need_dbeta) write_floats<T>(sb, c0, c1 - c0, a.gradBetaOut);
      }
    });
  }

  void run() const {
    if (!p.need_dx && !p.need_dgamma && !p.need_dbeta) return;
    if (p.empty) {
      // gradInput has no elements; gradGamma/gradBeta are zeros (sums over nothing). Only then
      // walk the C channels: with those outputs masked off C is unbounded (see make_plan).
      if (p.need_dgamma || p.need_dbeta) write_param_grads();
      return;
    }
    load_params();
    if (p.channel_rows) run_channel_rows();
    else if (p.short_spans) run_point_rows();
    else if (p.fused) run_fused();
    else run_chunked();
    if (p.need_dgamma || p.need_dbeta) write_param_grads();
  }
};

}  // namespace

namespace {

// Operands whose planes share one permuted dense layout (transposed planes) run in memory
// order: GroupNorm's sums do not depend on the position order beyond rounding, and dX is
// elementwise. (Through dense copies, transposed planes of N2 C640 32x32 took 1.2 ms against
// torch's 0.19.) A masked-off gradInput does not count.
void planes_in_memory_order(GroupNormBackwardArgs& a, int64_t N, int64_t C, bool need_dx) {
  const TensorView& x = a.input;
  if (x.ndim < 4 || x.shape[0] != N || x.shape[1] != C) return;
  if (need_dx) to_planes_in_memory_order({&a.input, &a.gradOut, &a.gradInput});
  else to_planes_in_memory_order({&a.input, &a.gradOut});
}

// Staged groups: a layout no fast path takes, in the fused schedule (groups that stay in cache
// between their two passes), is copied group by group into a slot per thread instead of whole
// into the workspace. The slot stays in L2, where the dense copies wrote and reread the
// operands through the last-level cache or beyond it (N2 C640 32x32 G32 sliced along W: 47 MB
// of strided operands and copies). Groups of planes narrower than a vector, or small enough to
// run in batches, keep the whole copies.
constexpr uint64_t kSlotMaxBytes = 1 << 20;   // a slot ([dY][X][dX] of one group) at most

bool stages_groups(const Plan& p, uint64_t operand_bytes) {
  return p.fused && !p.channel_rows && p.HxW >= kWidth && p.D * p.HxW > kBatchGroupMax &&
         3 * operand_bytes <= kSlotMaxBytes;
}

// The call as the kernel runs it: when neither channel rows nor group runs take the operands'
// layouts (a slice along the last dim, transposed planes), the operands that are not runs are
// copied (staging.h), group by group (stages_groups) or whole into the workspace, after the
// plan's floats. Element by element, such layouts had taken 17-24x the contiguous call's time
// (N2 C640 32x32), 14-20x torch's. `at` may be null (the size query).
Prepared<GroupNormBackwardArgs, Plan> prepare(const GroupNormBackwardArgs& given, char* at) {
  Prepared<GroupNormBackwardArgs, Plan> r{given, make_plan(given), Staging(at)};
  if (!r.plan.empty && !r.plan.channel_rows) {
    planes_in_memory_order(r.args, r.plan.N, r.plan.C, r.plan.need_dx);
    const GroupNormBackwardArgs& views = r.args;  // what the copies copy
    const int64_t group_elems = r.plan.D * r.plan.HxW;
    const auto runs = [&](const TensorView& t) {
      const FlatIndex f(t);
      return GroupRuns(f, group_elems).ok;
    };
    Staging& s = r.staging;  // operands kDy, kX, kDx (input's shape when dX is not written)
    s.add(views.gradOut, Staging::kIn, !runs(views.gradOut));
    s.add(views.input, Staging::kIn, !runs(views.input));
    s.add(r.plan.need_dx ? views.gradInput : views.input, Staging::kOut,
          r.plan.need_dx && !runs(views.gradInput));
    const uint64_t operand_bytes = (uint64_t(group_elems) * views.gradOut.itemsize() + 63) / 64 * 64;
    if (s.any() && !(stages_groups(r.plan, operand_bytes) &&
                     s.plan_fixed_tasks(r.plan.N * r.plan.G * group_elems, group_elems))) {
      s.plan_whole();
      s.use_dense(kDy, r.args.gradOut);
      s.use_dense(kX, r.args.input);
      s.use_dense(kDx, r.args.gradInput);
      r.plan = make_plan(r.args);
    }
  }
  r.kernel_bytes = r.plan.empty ? 0 : (uint64_t(r.plan.total) * sizeof(float) + 63) / 64 * 64;
  return r;
}

}  // namespace

uint64_t group_norm_backward_workspace(const GroupNormBackwardArgs& args) {
  return prepare(args, nullptr).bytes();
}

aclnnStatus group_norm_backward(const GroupNormBackwardArgs& args, void* workspace) {
  const auto r = prepare_in(workspace, [&](char* at) { return prepare(args, at); });
  r.staging.copy_in();
  float* floats = static_cast<float*>(workspace);
  switch (args.gradOut.dtype) {
    case DType::Float32: Kernel<float>(r.args, r.plan, floats, r.staging).run(); break;
    case DType::Float16: Kernel<half_t>(r.args, r.plan, floats, r.staging).run(); break;
    case DType::BFloat16: Kernel<bfloat16_t>(r.args, r.plan, floats, r.staging).run(); break;
    default: return kInner;
  }
  r.staging.copy_out();
  return kSuccess;
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
