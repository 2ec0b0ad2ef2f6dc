// GridSampler's nearest write-back on an AVX2 machine, without the op: per (sample, 8-channel
// block) task, 8 planes of 64x64 fp32 are transposed into a channel-last buffer [4096][8] (as
// load_channels does with gradOutput) and transposed back out to 8 planes (as the inputGrad
// write-back does), 128 tasks (N32 C32: 16 MiB each way). Variants of the write-back:
//   stream   two 32-byte streaming stores per line of each plane (what the AVX2 level did)
//   plain    normal stores (the AVX2 level now)
//   seq-*    the same instructions, but every store to consecutive addresses (one stream)
// and a plain streamed copy of the 16 MiB for scale. docs/performance.md quotes its numbers.
// Build and run (x86-64 with AVX2):
//   g++ -O2 -mavx2 -mfma -fopenmp plane_write_back.cpp -o pwb && OMP_NUM_THREADS=2 ./pwb
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr int kPixels = 64 * 64;
constexpr int kTasks = 32 * 4;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// x[k] becomes column k of the 8 x 8 block whose row j was x[j].
inline void transpose8x8(__m256 x[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(x[2 * i], x[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(x[2 * i], x[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    x[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    x[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

enum Write { kStream, kPlain, kSeqStream, kSeqPlain };

// One task: planes `in` -> buffer -> planes `out` (8 planes of kPixels each).
void task(const float* in, float* buf, float* out, Write how) {
  for (int q = 0; q < kPixels; q += 8) {
    __m256 x[8];
    for (int j = 0; j < 8; ++j) x[j] = _mm256_loadu_ps(in + j * kPixels + q);
    transpose8x8(x);
    for (int k = 0; k < 8; ++k) _mm256_store_ps(buf + (q + k) * 8, x[k]);
  }
  for (int q = 0; q < kPixels; q += 16) {
    __m256 lo[8], hi[8];
    for (int k = 0; k < 8; ++k) {
      lo[k] = _mm256_load_ps(buf + (q + k) * 8);
      hi[k] = _mm256_load_ps(buf + (q + 8 + k) * 8);
    }
    transpose8x8(lo);
    transpose8x8(hi);
    for (int j = 0; j < 8; ++j) {
      const bool seq = how == kSeqStream || how == kSeqPlain;
      float* at = seq ? out + q * 8 + j * 16 : out + j * kPixels + q;  // seq: one stream
      if (how == kStream || how == kSeqStream) {
        _mm256_stream_ps(at, lo[j]);
        _mm256_stream_ps(at + 8, hi[j]);
      } else {
        _mm256_store_ps(at, lo[j]);
        _mm256_store_ps(at + 8, hi[j]);
      }
    }
  }
}

}  // namespace

int main() {
  const size_t n = size_t(kTasks) * 8 * kPixels;
  float* src = static_cast<float*>(std::aligned_alloc(64, n * 4));
  float* dst = static_cast<float*>(std::aligned_alloc(64, n * 4));
  for (size_t i = 0; i < n; ++i) src[i] = float(i % 1000);
  std::memset(dst, 0, n * 4);
  const char* names[4] = {"stream", "plain", "seq-stream", "seq-plain"};
  std::vector<double> times[5];
  for (int round = 0; round < 40; ++round) {
    for (int how = 0; how < 4; ++how) {  // interleaved, so that the machine's drift hits all alike
      const double t0 = now();
#pragma omp parallel
      {
        float* buf = static_cast<float*>(std::aligned_alloc(64, 8 * kPixels * 4));
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < kTasks; ++t)
          task(src + size_t(t) * 8 * kPixels, buf, dst + size_t(t) * 8 * kPixels, Write(how));
        _mm_sfence();
        std::free(buf);
      }
      times[how].push_back(now() - t0);
    }
    const double t0 = now();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i += 8) _mm256_stream_ps(dst + i, _mm256_load_ps(src + i));
    _mm_sfence();
    times[4].push_back(now() - t0);
  }
  auto median_ms = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2] * 1e3;
  };
  std::printf("%d threads, medians of 40 rounds:\n", omp_get_max_threads());
  for (int how = 0; how < 4; ++how) std::printf("  %-10s %.3f ms\n", names[how], median_ms(times[how]));
  std::printf("  streamed copy of the 16 MiB: %.3f ms\n", median_ms(times[4]));
}
