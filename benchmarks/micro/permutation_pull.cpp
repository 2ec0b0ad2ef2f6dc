// A pull by in-register permutation for GridSampler2DBackward's nearest mode (fp32, zeros
// padding, alignCorners false): a timing prototype, measured and dropped (docs/performance.md,
// "Medians over repeated runs, and a pull by permutation"). It writes the library's bits.
//
// Per sample: each position's target pixel; the positions bucketed by 16-pixel chunk of the
// input plane (a counting sort, stable in position order); per chunk, "ops": a window of 32
// consecutive flat positions [s, s+32) and one level of the chunk's hits in it (each lane at most
// once), as 16 byte indices into the window and a lane mask. Per group of channels: for each
// chunk, an accumulator per channel starts at +0.0, each op adds vpermt2ps of the window under
// its mask (so each pixel's hits add in position order, as the library's scatter adds them), and
// the chunk's 16 floats, one line, stream to inputGrad.
//
// Build (a shared library that permutation_pull.py loads beside the installed aclnn_cpu):
//   g++ -O2 -march=native -fno-math-errno -fopenmp -shared -fPIC -std=c++17 \
//       benchmarks/micro/permutation_pull.cpp -o /tmp/permutation_pull.so
//   python benchmarks/micro/permutation_pull.py /tmp/permutation_pull.so
// `variant` bits: 0x1 chunks processed in order of op count; 0x2 op lists only (no pull);
// 0x4 the first sample's op lists reused for every sample (wrong results: the pull's cost
// alone); 0x8000 windows starting on a 16-position boundary; (variant >> 4) & 0xff channels a
// pass over the op lists (1, 2, 4, 8 or 16).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

struct Ops {
  std::vector<int32_t> target;      // per position: pixel or -1
  std::vector<int32_t> count;       // per chunk
  std::vector<int32_t> start;       // per chunk: first sorted position
  std::vector<int32_t> sorted;      // positions by chunk
  std::vector<int32_t> op_s;        // per op: window start
  std::vector<uint16_t> op_mask;    // per op: lanes
  std::vector<uint8_t> op_idx;      // per op: 16 indices
  std::vector<int32_t> chunk_order; // chunks in processing order
  std::vector<int32_t> chunk_first; // per processed chunk: first op
  std::vector<int32_t> chunk_nops;  // per processed chunk: op count
  std::vector<int32_t> chunk_id;
  std::vector<int32_t> tmp_first, tmp_n;
};

void build(Ops& o, const float* grid, int H, int W, int Ho, int Wo, bool sort_by_count, int variant) {
  const int P = Ho * Wo, chunks = (H * W + 15) / 16;
  o.target.resize(P);
  o.count.assign(chunks + 1, 0);
  for (int q = 0; q < P; ++q) {
    double x = ((double(grid[2 * q]) + 1.0) * W - 1.0) / 2.0;
    double y = ((double(grid[2 * q + 1]) + 1.0) * H - 1.0) / 2.0;
    double rx = __builtin_rint(x), ry = __builtin_rint(y);
    int t = -1;
    if (rx >= 0 && rx < W && ry >= 0 && ry < H) t = int(ry) * W + int(rx);
    o.target[q] = t;
    if (t >= 0) o.count[t >> 4]++;
  }
  o.start.resize(chunks + 1);
  int acc = 0;
  for (int c = 0; c < chunks; ++c) { o.start[c] = acc; acc += o.count[c]; }
  o.start[chunks] = acc;
  o.sorted.resize(acc);
  {
    std::vector<int32_t>& fill = o.tmp_first;
    fill.assign(o.start.begin(), o.start.end() - 1);
    for (int q = 0; q < P; ++q) { int t = o.target[q]; if (t >= 0) o.sorted[fill[t >> 4]++] = q; }
  }
  o.op_s.resize(P + chunks); o.op_mask.resize(P + chunks); o.op_idx.resize(16 * (P + chunks));
  o.tmp_first.resize(chunks); o.tmp_n.resize(chunks);
  int32_t* op_s = o.op_s.data(); uint16_t* op_mask = o.op_mask.data(); uint8_t* op_idx = o.op_idx.data();
  const int32_t* srt = o.sorted.data(); const int32_t* tg = o.target.data();
  int nops = 0;
  for (int c = 0; c < chunks; ++c) {
    o.tmp_first[c] = nops;
    int i = o.start[c], end = o.start[c + 1];
    while (i < end) {
      int s = std::min((variant & 0x8000) ? (srt[i] & ~15) : srt[i], std::max(P - 32, 0));
      uint8_t level[16] = {0};
      int nl = 0;
      const int base = nops;
      for (; i < end && srt[i] < s + 32; ++i) {
        const int q = srt[i], lane = tg[q] & 15, lv = level[lane]++;
        if (lv >= nl) {
          op_s[base + lv] = s; op_mask[base + lv] = 0;
          std::memset(op_idx + 16 * (base + lv), 0, 16);
          ++nl;
        }
        op_mask[base + lv] |= uint16_t(1u << lane);
        op_idx[16 * (base + lv) + lane] = uint8_t(q - s);
      }
      nops += nl;
    }
    o.tmp_n[c] = nops - o.tmp_first[c];
  }
  o.chunk_id.resize(chunks);
  for (int c = 0; c < chunks; ++c) o.chunk_id[c] = c;
  if (sort_by_count)
    std::stable_sort(o.chunk_id.begin(), o.chunk_id.end(), [&](int a, int b) { return o.tmp_n[a] < o.tmp_n[b]; });
  o.chunk_first.resize(chunks); o.chunk_nops.resize(chunks);
  for (int k = 0; k < chunks; ++k) { o.chunk_first[k] = o.tmp_first[o.chunk_id[k]]; o.chunk_nops[k] = o.tmp_n[o.chunk_id[k]]; }
}

template <int G>
void pull_group(const Ops& o, const float* go, int64_t go_plane, float* ig, int64_t ig_plane, int chunks) {
  for (int k = 0; k < chunks; ++k) {
    __m512 acc[G];
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
    const int first = o.chunk_first[k], n = o.chunk_nops[k];
    for (int p = first; p < first + n; ++p) {
      const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(o.op_idx.data() + 16 * p)));
      const __mmask16 m = o.op_mask[p];
      const float* src = go + o.op_s[p];
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) {
        const __m512 a = _mm512_loadu_ps(src + g * go_plane), b = _mm512_loadu_ps(src + g * go_plane + 16);
        acc[g] = _mm512_mask_add_ps(acc[g], m, acc[g], _mm512_permutex2var_ps(a, idx, b));
      }
    }
    float* dst = ig + int64_t(o.chunk_id[k]) * 16;
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) _mm512_stream_ps(dst + g * ig_plane, acc[g]);
  }
}

}  // namespace

extern "C" double proto(const float* go, const float* grid, float* ig, int N, int C, int H, int W, int Ho, int Wo,
                        int variant, int threads, long go_stride) {
  const bool sorted = variant & 1;
  const int G = (variant >> 4) & 0xff;
  const int chunks = H * W / 16;
  auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
  {
    Ops o;
#pragma omp for schedule(dynamic, 1)
    for (int n = 0; n < N; ++n) {
      if (!(variant & 4) || o.chunk_id.empty()) build(o, grid + int64_t(n) * Ho * Wo * 2, H, W, Ho, Wo, sorted, variant);
      if (variant & 2) continue;  // build only
      for (int c = 0; c < C; c += G) {
        const float* gop = go + (int64_t(n) * C + c) * go_stride;
        float* igp = ig + (int64_t(n) * C + c) * H * W;
        if (G == 1) pull_group<1>(o, gop, go_stride, igp, int64_t(H) * W, chunks);
        else if (G == 2) pull_group<2>(o, gop, go_stride, igp, int64_t(H) * W, chunks);
        else if (G == 4) pull_group<4>(o, gop, go_stride, igp, int64_t(H) * W, chunks);
        else if (G == 8) pull_group<8>(o, gop, go_stride, igp, int64_t(H) * W, chunks);
        else pull_group<16>(o, gop, go_stride, igp, int64_t(H) * W, chunks);
      }
    }
  }
  _mm_sfence();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
