// Thread count and the parallel helpers kernels use. Work splits never influence the order of a
// floating-point reduction: reductions are cut into fixed-size chunks whose partial results are
// combined in chunk order, so results are bitwise identical for any thread count.
#pragma once
#include <atomic>
#include <cstdint>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace aclnn_cpu {

int num_threads();            // threads kernels use (default: OpenMP's default, >= 1)
void set_num_threads(int n);  // n >= 1

// Calls body(begin, end) on contiguous sub-ranges of [0, n), in parallel when worthwhile.
// `grain` is the smallest range worth a thread of its own.
template <typename Body>
void parallel_for(int64_t n, int64_t grain, Body&& body) {
  if (n <= 0) return;
  int threads = num_threads();
  if (grain < 1) grain = 1;
  int64_t max_useful = (n + grain - 1) / grain;
  if (threads > max_useful) threads = static_cast<int>(max_useful);
#ifdef _OPENMP
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    {
      int t = omp_get_thread_num();
      int nt = omp_get_num_threads();
      int64_t begin = n * t / nt, end = n * (t + 1) / nt;
      if (begin < end) body(begin, end);
    }
    return;
  }
#endif
  body(int64_t(0), n);
}

// Like parallel_for, but [0, n) is cut into chunks of `grain` items handed out one at a time to
// whichever thread is free, so a thread that loses its core to another process delays the call
// by one chunk rather than by a share fixed in advance. Only for bodies whose results do not
// depend on which thread runs which chunk.
template <typename Body>
void parallel_for_dynamic(int64_t n, int64_t grain, Body&& body) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t chunks = (n + grain - 1) / grain;
  int threads = num_threads();
  if (threads > chunks) threads = static_cast<int>(chunks);
#ifdef _OPENMP
  if (threads > 1) {
    std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(threads)
    {
      for (int64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1))
        body(c * grain, c + 1 < chunks ? (c + 1) * grain : n);
    }
    return;
  }
#endif
  body(int64_t(0), n);
}

}  // namespace aclnn_cpu
