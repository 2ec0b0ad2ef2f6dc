// aclnnGroupNorm kernel: self viewed as [N, C, HxW], C split into G groups of D channels; per
// (n, g), over the m = D * HxW elements of the group:
//   mean = sum x / m,  var = sum (x - mean)^2 / m (biased),  rstd = 1 / sqrt(var + float(eps))
//   out  = (x - mean) * (rstd * gamma[c]) + beta[c]   (one fused multiply-add where the level has one)
// gamma absent = ones, beta absent = zeros; meanOut and rstdOut get mean and rstd.
//
// Statistics in one read of x, numerically a two-pass algorithm: a group is cut into chunks of
// kChunk elements (fixed by the shape); per chunk a sum in double lanes gives a mean m', then, on
// the chunk while it is still in L1, q = sum (x - m')^2 and e = sum (x - m'): M2 = q - e^2 / n
// (the corrected two-pass formula: the rounding of m' drops out), and the mean is sum / n, or
// m' + e/n where it dwarfs the spread (see moments_of). q and e are fp32 vector lanes over blocks
// of kBlockSteps steps; the blocks' lanes, the chunks' moments and their merges are double (a
// handful of operations per block). Chunks merge pairwise in a fixed tree (Chan):
//   delta = mean_b - mean_a,  mean = mean_a + delta * n_b / n,  M2 = M2_a + M2_b + delta^2 * n_a n_b / n
// So the variance never comes from sum(x^2) - m * mean^2, and the rounding grows with
// log(chunks), not with the group's length. out subtracts the mean as a float pair (SplitMean),
// and rstd is rounded once from double. The normalize pass reads x a second time: 2 reads and 1
// write of the tensor in all (fused groups reread it from cache).
//
// Schedules (the bits depend on the shape and layout only, never on the thread count, since every
// partial is the same computation whoever runs it):
//   * groups: each group one unit-stride run (contiguous operands, or planes in memory order).
//     Enough groups: one task per group, statistics then normalization while the group is in
//     cache (fused). Few big groups: the chunks' statistics in parallel, the merge per group,
//     then the normalization in parallel over chunks.
//   * channel rows (self and out channels-last alike): each sample as HxW rows of C channels,
//     vectorised across the channels; chunks are blocks of rows.
//   * anything else: self and out through dense copies in the workspace (dense_copy.h).
// An empty self (N, C or HxW 0): meanOut = 0, rstdOut = NaN, out untouched.
// out of a call that overflows the last-level cache is written with streaming stores.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "aclnn_cpu/dense_copy.h"
#include "aclnn_cpu/flat_values.h"
#include "aclnn_cpu/ops/group_norm_args.h"
#include "aclnn_cpu/parallel.h"
#include "aclnn_cpu/simd.h"
#include "aclnn_cpu/staging.h"  // staged_slots

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

using namespace simd;

// Elements of a group per partial (mean, M2): 8 KiB of fp32, so the M2 pass rereads it from L1.
// A multiple of 2 * kWidth on every level, so only a group's last chunk has a vector tail.
constexpr int64_t kChunk = 2048;
// Fewest elements worth a thread of their own.
constexpr int64_t kGrainElems = 16384;
// Channel rows: rows per chunk hold about this many elements (64 KiB of fp32: the deviations
// pass rereads them from L2). Each chunk costs some scalar work per channel (group sums, the
// blocks' double adds, the normalization's spread coefficients); with 2048-element chunks that
// work matched the chunk's own ([8, 320, 64, 64] bf16 channels-last: 12.9 ms, torch 2.2).
constexpr int64_t kRowChunkElems = 16384;
constexpr int64_t kRowChunkMinPerGroup = 32;

// The statistics of some elements: their mean and the sum of squared deviations from it.
struct Moments {
  double mean = 0.0, m2 = 0.0;
};

// The moments of len elements from their sum and their sums around shift (the sum's mean in
// fp32): dev = sum (x - shift), sq = sum (x - shift)^2. M2 = sq - dev^2 / len, whatever the
// rounding of shift. The mean is shift + dev / len where the mean dwarfs the spread: there
// x - shift is exact (Sterbenz) and dev recovers what rounding shift and the sum lost. Elsewhere
// x - shift rounds with the same sign all over a binade (shift sits at a fixed place between
// the grid points of the x's), and that bias in dev (up to u * mean |x - shift|; 2.6e-8 on unit
// data against torch's 1.4e-8) would exceed the sum's own error: the mean is then sum / len.
inline Moments moments_of(double sum, float shift, double dev, double sq, int64_t len) {
  const double d = dev / double(len), m2 = std::max(0.0, sq - dev * d);
  const bool mean_dominates = double(shift) * double(shift) * double(len) > 4.0 * m2;
  return Moments{mean_dominates ? double(shift) + d : sum / double(len), m2};
}

// Chan's merge of a (na elements) and b (nb elements).
inline Moments merge(Moments a, int64_t na, Moments b, int64_t nb) {
  const double n = double(na) + double(nb);
  const double delta = b.mean - a.mean;
  return Moments{a.mean + delta * (double(nb) / n), (a.m2 + b.m2) + delta * delta * (double(na) * double(nb) / n)};
}

// parts[0, K) merged pairwise in a fixed tree (neighbours, then pairs of pairs, ...); count(i0,
// i1) gives the elements of parts [i0, i1). Overwrites parts.
template <class Count>
Moments merge_tree(Moments* parts, int64_t K, Count&& count) {
  for (int64_t w = 1; w < K; w *= 2)
    for (int64_t i = 0; i + w < K; i += 2 * w)
      parts[i] = merge(parts[i], count(i, i + w), parts[i + w], count(i + w, std::min(K, i + 2 * w)));
  return parts[0];
}

// a * b + c, rounded as the vector fma of this level rounds it (fused where the level has FMA):
// scalar tails give the bits a vector lane would.
ACLNN_ALWAYS_INLINE float fma1(float a, float b, float c) { return fma(set1(a), set1(b), set1(c))[0]; }

// Vector steps (pair steps; channel rows: rows) summed in fp32 lanes before their lanes join a
// double. Each flush costs a few dozen cycles (lanes_sum): every 8 steps that was a tenth of a
// call whose data sat in cache.
constexpr int64_t kBlockSteps = 32;

// The lanes of v added in double, in lane order: the partial sums of a block never round again
// (reduce_add's fp32 tree rounds at the sum's full size, the largest errors of a short sum).
ACLNN_ALWAYS_INLINE double lanes_sum(VecF v) {
  alignas(64) float lane[kWidth];
  store(lane, v);
  double s = 0.0;
  for (int i = 0; i < kWidth; ++i) s += lane[i];
  return s;
}

// A compensated (Kahan) sum in vector lanes, for channel rows, whose per-channel block sums live
// in memory as floats: the plain sum's errors grew with the lanes' length and left the mean of
// unit data 2x further from the exact one than torch's Welford (the mean is the one result whose
// error is not relative to itself). flush() returns the lanes' sum in double and restarts.
struct Compensated {
  VecF sum = zero(), carry = zero();  // carry: what the last adds lost, negated
  ACLNN_ALWAYS_INLINE void add(VecF v) {
    const VecF y = v - carry, t = sum + y;
    carry = (t - sum) - y;
    sum = t;
  }
  ACLNN_ALWAYS_INLINE double flush() {
    const double s = lanes_sum(sum) - lanes_sum(carry);
    sum = carry = zero();
    return s;
  }
};

// Calls step(i) for the pair steps [i, i + 2 * kWidth) of [0, len) in blocks of kBlockSteps, then
// block_end() after each block; returns the index the steps stopped at.
template <class Step, class BlockEnd>
ACLNN_ALWAYS_INLINE int64_t pair_blocks(int64_t len, Step&& step, BlockEnd&& block_end) {
  int64_t i = 0;
  while (i + 2 * kWidth <= len) {
    for (int64_t k = 0; k < kBlockSteps && i + 2 * kWidth <= len; ++k, i += 2 * kWidth) step(i);
    block_end();
  }
  return i;
}

// Accumulators of double lanes fed fp32 vectors, widened exactly: four independent chains, so
// the adds' latency hides behind each other.
struct WideSum {
  VecD d0 = set1d(0.0), d1 = set1d(0.0), d2 = set1d(0.0), d3 = set1d(0.0);
  ACLNN_ALWAYS_INLINE void add(VecF a, VecF b) {
    const HalvesD wa = widen(a), wb = widen(b);
    d0 = d0 + wa.lo, d1 = d1 + wa.hi, d2 = d2 + wb.lo, d3 = d3 + wb.hi;
  }
  double total() const { return simd::lanes_sum((d0 + d1) + (d2 + d3)); }
};

// Mean and M2 of len (1..kChunk) consecutive elements (the corrected two-pass formula): the sum
// gives a mean m', then q = sum (x - m')^2 and e = sum (x - m'). The sum adds every element in
// double lanes (no rounding before 2^29 of them could pile up: more exact than a compensated
// fp32 sum, and without its dependency chain: [2, 640, 32, 32] fp32 on 1 thread 0.33 ms with it).
// q and e are fp32 vector lanes over blocks of kBlockSteps steps, the blocks' lanes added in
// double lanes.
template <class T>
ACLNN_ALWAYS_INLINE Moments run_moments(const T* p, int64_t len) {
  WideSum s;
  int64_t i = 0;
  for (; i + 2 * kWidth <= len; i += 2 * kWidth) {
    const Pair v = load_pair(p + i);
    s.add(v.a, v.b);
  }
  if (i + kWidth <= len) s.add(load(p + i), zero()), i += kWidth;
  if (i < len) s.add(load_partial(p + i, len - i), zero());  // zero lanes add nothing
  const double sum = s.total();
  const float shift = float(sum / double(len));
  const VecF m = set1(shift);
  VecF q0 = zero(), q1 = zero(), e0 = zero(), e1 = zero();
  WideSum q, e;
  i = pair_blocks(
      len,
      [&](int64_t at) __attribute__((always_inline)) {
        const Pair v = load_pair(p + at);
        const VecF d0 = v.a - m, d1 = v.b - m;
        q0 = fma(d0, d0, q0);
        q1 = fma(d1, d1, q1);
        e0 = e0 + d0;
        e1 = e1 + d1;
      },
      [&]() __attribute__((always_inline)) {
        q.add(q0, q1);
        e.add(e0, e1);
        q0 = q1 = e0 = e1 = zero();
      });
  if (i + kWidth <= len) {
    const VecF d = load(p + i) - m;
    q0 = fma(d, d, q0);
    e0 = e0 + d;
    i += kWidth;
  }
  float q_tail = 0.0f, e_tail = 0.0f;  // (zero lanes would add shift^2 each: the tail is scalar)
  for (; i < len; ++i) {
    const float d = to_float(p[i]) - shift;
    q_tail = fma1(d, d, q_tail);
    e_tail += d;
  }
  q.add(q0, q1);
  e.add(e0, e1);
  return moments_of(sum, shift, e.total() + e_tail, q.total() + q_tail, len);
}

// rstd of a group's merged moments over m elements, rounded once (eps is already fp32).
inline float rstd_of(const Moments& s, int64_t m, float eps) {
  return float(1.0 / std::sqrt(s.m2 / double(m) + double(eps)));
}

// The mean as an unevaluated sum of two floats, hi + lo: x - hi - lo keeps the mean's digits
// that one float drops, whose rounding otherwise dominates out's error where |mean| >> std
// (offset 1e4, unit spread: half an ulp of 1e4 is 5e-4 of every output).
struct SplitMean {
  float hi = 0.0f, lo = 0.0f;
};

// y[i] = (x[i] - hi - lo) * scale + shift for len elements of one channel.
template <bool kStream, class T>
ACLNN_ALWAYS_INLINE void normalize_run(const T* x, T* y, int64_t len, SplitMean mean, float scale, float shift) {
  const VecF hi = set1(mean.hi), lo = set1(mean.lo), s = set1(scale), b = set1(shift);
  const auto value = [&](int64_t i, int64_t count) __attribute__((always_inline)) {
    return fma((load_partial(x + i, count) - hi) - lo, s, b);
  };
  // The coefficients are broadcasts, so pairs of x and y (one storage type) line up lane for lane.
  const auto pair = [&](int64_t i) __attribute__((always_inline)) {
    const Pair v = load_pair(x + i);
    return Pair{fma((v.a - hi) - lo, s, b), fma((v.b - hi) - lo, s, b)};
  };
  store_run_pairs<kStream>(y, len, pair, value);
}

struct Plan {
  int64_t N = 0, C = 0, HxW = 0, G = 1, D = 1, NG = 0;
  int64_t m = 0;  // elements of a group
  int64_t K = 1;  // chunks of a group (groups) or of a sample's rows (channel rows)
  int64_t rows = 0;  // channel rows: rows per chunk
  bool empty = false;
  bool channel_rows = false;
  bool fused = false;
  int64_t lane_slots = 0;  // channel rows: a slot per worker
  int64_t slot_floats = 0;
  // Workspace, in floats.
  int64_t mean_at = 0, mean_lo_at = 0, rstd_at = 0, gamma_at = 0, beta_at = 0, parts_at = 0, lanes_at = 0, total = 0;
};

Plan make_plan(const GroupNormArgs& a, bool channel_rows) {
  Plan p;
  p.N = a.N, p.C = a.C, p.HxW = a.HxW, p.G = a.group;
  // With a zero among N, C, HxW the validator bounds none of the others' products: plan nothing.
  p.empty = p.N == 0 || p.C == 0 || p.HxW == 0;
  if (p.empty) return p;
  p.D = p.C / p.G;
  p.NG = p.N * p.G;
  p.m = p.D * p.HxW;
  p.channel_rows = channel_rows;
  if (channel_rows) {
    // At least kRowChunkMinPerGroup elements of each group per chunk, so that the partials stay
    // a small fraction of the input when the groups are narrow.
    p.rows = std::max({int64_t(1), kRowChunkElems / p.C, (kRowChunkMinPerGroup + p.D - 1) / p.D});
    p.K = (p.HxW + p.rows - 1) / p.rows;
    // G + 3 C doubles first (an even count of floats: every slot keeps them 8-byte aligned), then
    // 4 C floats (row_chunk_moments; the normalization takes 3 C floats of a slot).
    p.slot_floats = 2 * (p.G + 3 * p.C) + 4 * p.C;
    p.lane_slots = staged_slots(p.N * p.K, uint64_t(p.slot_floats) * sizeof(float));
  } else {
    p.K = (p.m + kChunk - 1) / kChunk;
    // One task per group when the groups are enough to keep the threads busy, or small.
    p.fused = p.NG >= 4 * int64_t(num_threads()) || p.m <= kGrainElems;
  }
  int64_t at = 0;
  p.parts_at = at, at += 4 * p.NG * p.K;  // Moments (two doubles) per chunk of every group, first: 8-byte aligned
  p.mean_at = at, at += p.NG;
  p.mean_lo_at = at, at += p.NG;
  p.rstd_at = at, at += p.NG;
  p.gamma_at = at, at += p.C;
  p.beta_at = at, at += p.C;
  at = (at + 15) / 16 * 16;  // the slots start on a line (their doubles need 8-byte alignment)
  p.lanes_at = at, at += p.slot_floats * p.lane_slots;
  p.total = at;
  return p;
}

template <class T>
struct Kernel {
  const GroupNormArgs& a;
  const Plan& p;
  float* ws;
  const float eps;
  // self and out together overflow the last-level cache: out streams where its runs suit it,
  // and fused groups prefetch the next group (from cache the prefetches only take load slots:
  // [2, 640, 32, 32] fp32, 1 thread, 0.24 ms with, 0.21 ms without).
  const bool beyond_cache;
  const bool stream;
  const T* x0;
  T* y0;

  Kernel(const GroupNormArgs& args, const Plan& plan, float* workspace)
      : a(args),
        p(plan),
        ws(workspace),
        eps(float(args.eps)),
        beyond_cache(streams_worthwhile(2 * uint64_t(args.self.numel()) * sizeof(T), 1)),
        stream(beyond_cache &&
               stream_runs_fit(args.out.ptr<T>(), uint64_t(plan.channel_rows ? plan.C : plan.HxW) * sizeof(T))),
        x0(args.self.ptr<const T>()),
        y0(args.out.ptr<T>()) {}

  float* mean() const { return ws + p.mean_at; }
  float* mean_lo() const { return ws + p.mean_lo_at; }  // mean's remainder (SplitMean)
  float* rstd() const { return ws + p.rstd_at; }
  float* gamma() const { return ws + p.gamma_at; }
  float* beta() const { return ws + p.beta_at; }
  Moments* parts(int64_t ng) const { return reinterpret_cast<Moments*>(ws + p.parts_at) + ng * p.K; }

  // ---- groups: group ng is the run [ng * m, (ng + 1) * m) of x and y ----

  int64_t chunk_len(int64_t k) const { return std::min(kChunk, p.m - k * kChunk); }

  void chunk_moments(int64_t ng, int64_t k) const {
    parts(ng)[k] = run_moments(x0 + ng * p.m + k * kChunk, chunk_len(k));
  }

  // Merges group ng's chunk moments (count(i0, i1): elements of chunks [i0, i1)) into its mean
  // and rstd.
  template <class Count>
  void finish(int64_t ng, Count&& count) const {
    const Moments s = merge_tree(parts(ng), p.K, count);
    mean()[ng] = float(s.mean);
    mean_lo()[ng] = float(s.mean - double(mean()[ng]));
    rstd()[ng] = rstd_of(s, p.m, eps);
  }
  SplitMean split_mean(int64_t ng) const { return SplitMean{mean()[ng], mean_lo()[ng]}; }

  void finish_group(int64_t ng) const {
    const int64_t m = p.m;
    finish(ng, [m](int64_t i0, int64_t i1) { return std::min(m, i1 * kChunk) - i0 * kChunk; });
  }

  // Elements [b, e) of group ng normalized, channel by channel.
  // ahead: where the next group's same elements are, to prefetch while this group's are
  // normalized from cache (fused groups), or null. The hardware prefetcher only runs a little
  // ahead of the stream it follows, so each group's statistics pass would wait on memory:
  // [32, 64, 56, 56] fp32 G32, one thread, 1.70-1.81 ms with, 2.31 ms without (torch 2.0).
  template <bool kStream>
  void normalize_range(int64_t ng, int64_t b, int64_t e, const T* ahead) const {
    const int64_t g = ng % p.G;
    const SplitMean mu = split_mean(ng);
    const float r = rstd()[ng];
    const T* x = x0 + ng * p.m;
    T* y = y0 + ng * p.m;
    if (p.HxW == 1) {
      // One element per channel: vectors across the channels (per element the operations of
      // normalize_run, so the same bits). Channel by channel, [256, 4096] G32 took 4x torch's time.
      const VecF hi = set1(mu.hi), lo = set1(mu.lo), rv = set1(r);
      const float* gm = gamma() + g * p.D + b;
      const float* bt = beta() + g * p.D + b;
      store_run<kStream>(y + b, e - b, [&](int64_t i, int64_t count) __attribute__((always_inline)) {
        return fma((load_partial(x + b + i, count) - hi) - lo, rv * load_partial(gm + i, count),
                   load_partial(bt + i, count));
      });
      return;
    }
    for (int64_t i = b; i < e;) {
      const int64_t c = g * p.D + i / p.HxW, end = std::min(e, (i / p.HxW + 1) * p.HxW);
      if (ahead != nullptr)
        for (int64_t j = i; j < end; j += 64 / int64_t(sizeof(T))) __builtin_prefetch(ahead + j);
      normalize_run<kStream>(x + i, y + i, end - i, mu, r * gamma()[c], beta()[c]);
      i = end;
    }
  }
  void normalize(int64_t ng, int64_t b, int64_t e, const T* ahead = nullptr) const {
    if (stream) normalize_range<true>(ng, b, e, ahead);
    else normalize_range<false>(ng, b, e, ahead);
  }

  void run_groups() const {
    if (p.fused) {
      // Tasks of whole groups, about kGrainElems elements each.
      const int64_t grain = std::max<int64_t>(1, kGrainElems / p.m);
      parallel_for_dynamic(p.NG, grain, [&](int64_t begin, int64_t end) {
        for (int64_t ng = begin; ng < end; ++ng) {
          for (int64_t k = 0; k < p.K; ++k) chunk_moments(ng, k);
          finish_group(ng);
          normalize(ng, 0, p.m, beyond_cache && ng + 1 < p.NG ? x0 + (ng + 1) * p.m : nullptr);
        }
        if (stream) stream_fence();
      });
      return;
    }
    const int64_t tasks = p.NG * p.K, grain = std::max<int64_t>(1, kGrainElems / kChunk);
    parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) chunk_moments(t / p.K, t % p.K);
    });
    parallel_for(p.NG, 64, [&](int64_t begin, int64_t end) {
      for (int64_t ng = begin; ng < end; ++ng) finish_group(ng);
    });
    parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t k = t % p.K;
        normalize(t / p.K, k * kChunk, k * kChunk + chunk_len(k));
      }
      if (stream) stream_fence();
    });
  }

  // ---- channel rows: sample n is HxW rows of C channels, row r at x0 + (n * HxW + r) * C ----

  float* lanes(int64_t worker) const { return ws + p.lanes_at + worker * p.slot_floats; }
  int64_t rows_in(int64_t k) const { return std::min(p.rows, p.HxW - k * p.rows); }

  // Chunk k of sample n (rows [k * rows, ...)): per group, the mean of its elements in the
  // chunk, then their deviations from it and their squares (run_moments' sums). Per channel the
  // rows are summed in fp32 vectors across the channels over blocks of kBlockSteps rows, the
  // blocks added per channel in double, then per group its channels in order. `wide` holds
  // G + 3 C doubles, `narrow` 4 C floats.
  void row_chunk_moments(int64_t n, int64_t k, double* wide, float* narrow) const {
    const int64_t C = p.C, R = rows_in(k);
    double *totals = wide, *sum = totals + p.G, *sq = sum + C, *dev = sq + C;
    float *block_sum = narrow, *block_sq = block_sum + C, *block_dev = block_sq + C, *spread = block_dev + C;
    const T* x = x0 + (n * p.HxW + k * p.rows) * C;
    // The sums read the chunk from memory: rows outer, so that it streams in row by row (down
    // the rows a vector of channels at a time, the hardware prefetcher did not follow: [8, 320,
    // 64, 64] bf16 3.8-5.7 ms against 3.0). The deviations reread it from L1 or L2: per block of
    // at most kBlockSteps rows, a vector of channels at a time down the rows (accumulators in
    // registers). Per channel the rows in order either way.
    // Compensated (block_sq holds the carries meanwhile).
    float* block_carry = block_sq;
    std::fill(sum, sum + C, 0.0);
    for (int64_t r0 = 0; r0 < R; r0 += kBlockSteps) {
      std::fill(block_sum, block_sum + C, 0.0f);
      std::fill(block_carry, block_carry + C, 0.0f);
      for (int64_t r = r0; r < std::min(R, r0 + kBlockSteps); ++r)
        for_each_vector(C, [&](int64_t c, int64_t cnt) {
          Compensated acc{load_partial(block_sum + c, cnt), load_partial(block_carry + c, cnt)};
          acc.add(load_partial(x + r * C + c, cnt));
          store_partial(block_sum + c, acc.sum, cnt);
          store_partial(block_carry + c, acc.carry, cnt);
        });
      for (int64_t c = 0; c < C; ++c) sum[c] += double(block_sum[c]) - double(block_carry[c]);
    }
    const double count = double(R * p.D);
    for (int64_t g = 0; g < p.G; ++g) {
      double total = 0.0;
      for (int64_t c = g * p.D; c < (g + 1) * p.D; ++c) total += sum[c];
      totals[g] = total;
      std::fill(spread + g * p.D, spread + (g + 1) * p.D, float(total / count));
    }
    std::fill(sq, sq + C, 0.0);
    std::fill(dev, dev + C, 0.0);
    for (int64_t r0 = 0; r0 < R; r0 += kBlockSteps) {
      const int64_t r1 = std::min(R, r0 + kBlockSteps);
      for_each_vector(C, [&](int64_t c, int64_t cnt) {
        const VecF m = load_partial(spread + c, cnt);
        VecF q = zero(), e = zero();
        for (int64_t r = r0; r < r1; ++r) {
          const VecF d = load_partial(x + r * C + c, cnt) - m;
          q = fma(d, d, q);
          e = e + d;
        }
        store_partial(block_sq + c, q, cnt);
        store_partial(block_dev + c, e, cnt);
      });
      for (int64_t c = 0; c < C; ++c) sq[c] += block_sq[c], dev[c] += block_dev[c];
    }
    for (int64_t g = 0; g < p.G; ++g) {
      double q = 0.0, e = 0.0;
      for (int64_t c = g * p.D; c < (g + 1) * p.D; ++c) q += sq[c], e += dev[c];
      parts(n * p.G + g)[k] = moments_of(totals[g], spread[g * p.D], e, q, R * p.D);
    }
  }

  void finish_row_group(int64_t ng) const {
    const int64_t rows = p.rows, HxW = p.HxW, D = p.D;
    finish(ng, [=](int64_t i0, int64_t i1) { return (std::min(HxW, i1 * rows) - i0 * rows) * D; });
  }

  // Rows of chunk k of sample n, with the per-channel mean (hi, lo) and scale spread into `lanes`
  // (3 C floats).
  template <bool kStream>
  void row_normalize(int64_t n, int64_t k, float* lanes) const {
    const int64_t C = p.C;
    float *mu = lanes, *mu_lo = lanes + C, *scale = lanes + 2 * C;
    for (int64_t c = 0; c < C; ++c) {
      const int64_t ng = n * p.G + c / p.D;
      mu[c] = mean()[ng];
      mu_lo[c] = mean_lo()[ng];
      scale[c] = rstd()[ng] * gamma()[c];
    }
    const float* shift = beta();
    const int64_t first = n * p.HxW + k * p.rows;
    for (int64_t r = 0; r < rows_in(k); ++r) {
      const T* x = x0 + (first + r) * C;
      store_run<kStream>(y0 + (first + r) * C, C, [&](int64_t c, int64_t count) __attribute__((always_inline)) {
        const VecF centred = (load_partial(x + c, count) - load_partial(mu + c, count)) - load_partial(mu_lo + c, count);
        return fma(centred, load_partial(scale + c, count), load_partial(shift + c, count));
      });
    }
  }

  void run_channel_rows() const {
    if (p.N >= 4 * int64_t(num_threads())) {
      // Enough samples: one task per sample, statistics then normalization while the sample is
      // still in L2 (as fused groups: 1 read of x from memory instead of 2).
      parallel_tasks(p.N, p.lane_slots, [&](int64_t n, int64_t worker) {
        float* l = lanes(worker);
        for (int64_t k = 0; k < p.K; ++k)
          row_chunk_moments(n, k, reinterpret_cast<double*>(l), l + 2 * (p.G + 3 * p.C));
        for (int64_t g = 0; g < p.G; ++g) finish_row_group(n * p.G + g);
        for (int64_t k = 0; k < p.K; ++k) {
          if (stream) row_normalize<true>(n, k, l);
          else row_normalize<false>(n, k, l);
        }
        if (stream) stream_fence();
      });
      return;
    }
    const int64_t tasks = p.N * p.K;
    parallel_tasks(tasks, p.lane_slots, [&](int64_t t, int64_t worker) {
      float* l = lanes(worker);
      row_chunk_moments(t / p.K, t % p.K, reinterpret_cast<double*>(l), l + 2 * (p.G + 3 * p.C));
    });
    parallel_for(p.NG, 64, [&](int64_t begin, int64_t end) {
      for (int64_t ng = begin; ng < end; ++ng) finish_row_group(ng);
    });
    parallel_tasks(tasks, p.lane_slots, [&](int64_t t, int64_t worker) {
      float* l = lanes(worker);
      if (stream) row_normalize<true>(t / p.K, t % p.K, l);
      else row_normalize<false>(t / p.K, t % p.K, l);
      if (stream) stream_fence();
    });
  }

  // ---- the call ----

  void load_params() const {
    if (a.gamma.present) read_floats<T>(a.gamma, p.C, gamma());
    else std::fill(gamma(), gamma() + p.C, 1.0f);
    if (a.beta.present) read_floats<T>(a.beta, p.C, beta());
    else std::fill(beta(), beta() + p.C, 0.0f);
  }

  void run() const {
    load_params();
    if (p.channel_rows) run_channel_rows();
    else run_groups();
    write_floats<T>(mean(), 0, p.NG, a.meanOut);
    write_floats<T>(rstd(), 0, p.NG, a.rstdOut);
  }
};

// Empty self: meanOut = 0 and rstdOut = NaN (N * group elements each, without a workspace).
template <class T>
void fill_empty_stats(const GroupNormArgs& a) {
  constexpr int64_t kBlock = 256;
  float zeros[kBlock], nans[kBlock];
  std::fill(zeros, zeros + kBlock, 0.0f);
  std::fill(nans, nans + kBlock, std::numeric_limits<float>::quiet_NaN());
  const int64_t count = a.meanOut.numel();
  for (int64_t i = 0; i < count; i += kBlock) {
    write_floats<T>(zeros, i, std::min(kBlock, count - i), a.meanOut);
    write_floats<T>(nans, i, std::min(kBlock, count - i), a.rstdOut);
  }
}

// The call as the kernel runs it. self and out as [N, C, HxW]: contiguous (each group one run),
// planes in memory order (transposed planes: the sums do not care about the order of positions
// beyond rounding, and the normalization is elementwise), or channels-last alike (channel rows);
// any other layout is replaced by a dense copy in the workspace, after the plan's floats
// (staging.h, whole copies).
enum { kSelf, kOut };  // the staged operands
using Call = Prepared<GroupNormArgs, Plan>;

bool is_channel_rows(const GroupNormArgs& a) {
  const TensorView& x = a.self;
  return a.HxW > 1 && x.is_channels_last() && x.same_layout(a.out);
}

Call prepare(const GroupNormArgs& given, char* dense_at) {
  Call r{given, Plan{}, Staging(dense_at)};
  const bool empty = given.N == 0 || given.C == 0 || given.HxW == 0;
  const bool rows = !empty && is_channel_rows(given);
  if (!empty && !rows) {
    TensorView xm, ym;
    if (!given.self.is_contiguous() && given.self.same_layout(given.out) &&
        given.self.planes_in_memory_order(xm) && given.out.planes_in_memory_order(ym)) {
      r.args.self = xm;
      r.args.out = ym;
    }
    Staging& s = r.staging;
    s.add(r.args.self, Staging::kIn, !r.args.self.is_contiguous());
    s.add(r.args.out, Staging::kOut, !r.args.out.is_contiguous());
    s.plan_whole();
    s.use_dense(kSelf, r.args.self);
    s.use_dense(kOut, r.args.out);
  }
  r.plan = make_plan(r.args, rows);
  r.kernel_bytes = r.plan.empty ? 0 : (uint64_t(r.plan.total) * sizeof(float) + 63) / 64 * 64;
  return r;
}

template <class T>
void run_typed(const Call& r, void* workspace) {
  if (r.plan.empty) return fill_empty_stats<T>(r.args);
  Kernel<T>(r.args, r.plan, static_cast<float*>(workspace)).run();
}

}  // namespace

uint64_t group_norm_workspace(const GroupNormArgs& args) { return prepare(args, nullptr).bytes(); }

aclnnStatus group_norm(const GroupNormArgs& args, void* workspace) {
  const Call r = prepare_in(workspace, [&](char* dense_at) { return prepare(args, dense_at); });
  r.staging.copy_in();
  switch (args.self.dtype) {
    case DType::Float32: run_typed<float>(r, workspace); break;
    case DType::Float16: run_typed<half_t>(r, workspace); break;
    case DType::BFloat16: run_typed<bfloat16_t>(r, workspace); break;
    default: return kInner;
  }
  r.staging.copy_out();
  return kSuccess;
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
