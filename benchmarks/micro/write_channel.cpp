// How fast this machine takes streamed (non-temporal) writes, by the value written: 512-bit
// streaming stores over a buffer, at 1 thread and at 2, of all-zero lines and of lines holding
// other values. On the 2-vCPU Zen 4 guests of docs/performance.md the two differ 2- to
// 3.5-fold (all-zero lines 54-97 GB/s by run, others 28 GB/s, shared by both cores), so a ceiling
// measured by streaming zeros (a memset, a freshly zeroed source) is not the ceiling of an op
// that writes real data. Also a read of the same buffer, for scale.
// Build and run (x86-64 with AVX-512):
//   g++ -O2 -march=native -fopenmp write_channel.cpp -o write_channel && ./write_channel [MiB]
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Streams `value` over floats [0, n) of dst on `threads` threads; returns the seconds taken.
double stream_fill(float* dst, size_t n, float value, int threads) {
  const double t0 = seconds();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (size_t i = 0; i < n; i += 16) _mm512_stream_ps(dst + i, _mm512_set1_ps(value));
  _mm_sfence();
  return seconds() - t0;
}

// Reads floats [0, n) of src on `threads` threads; returns the seconds taken.
double read_all(const float* src, size_t n, int threads, float* sink) {
  const double t0 = seconds();
  float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    __m512 acc = _mm512_setzero_ps();
#pragma omp for schedule(static)
    for (size_t i = 0; i < n; i += 16) acc = _mm512_add_ps(acc, _mm512_load_ps(src + i));
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc);
    for (float v : lanes) total += v;
  }
  *sink += total;
  return seconds() - t0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? size_t(std::atoi(argv[1])) : 16;
  const size_t bytes = mib << 20, n = bytes / 4;
  float* buf = static_cast<float*>(std::aligned_alloc(4096, bytes));
  std::memset(buf, 0, bytes);  // the pages mapped before timing
  float sink = 0;
  for (int threads = 1; threads <= 2; ++threads) {
    std::vector<double> zeros, ones, reads;
    for (int round = 0; round < 40; ++round) {  // interleaved, so drift hits all three alike
      zeros.push_back(stream_fill(buf, n, 0.0f, threads));
      ones.push_back(stream_fill(buf, n, 1.0f, threads));
      reads.push_back(read_all(buf, n, threads, &sink));
    }
    std::printf("%d thread%s, %zu MiB: streamed write of zeros %.1f GB/s, of 1.0f %.1f GB/s; read %.1f GB/s\n",
                threads, threads > 1 ? "s" : "", mib, double(bytes) / median(zeros) / 1e9,
                double(bytes) / median(ones) / 1e9, double(bytes) / median(reads) / 1e9);
  }
  return sink == 12345.0f ? 1 : 0;
}
