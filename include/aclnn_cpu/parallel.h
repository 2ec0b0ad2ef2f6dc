// Thread count and the parallel helpers kernels use. Work splits never influence the order of a
// floating-point reduction: reductions are cut into fixed-size chunks whose partial results are
// combined in chunk order, so results are bitwise identical for any thread count.
#pragma once
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

}  // namespace aclnn_cpu
