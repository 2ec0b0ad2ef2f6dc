// The number of threads kernels use: OpenMP's default (which honours OMP_NUM_THREADS) until
// set_num_threads() chooses another.
#include <atomic>

#include "aclnn_cpu/parallel.h"

namespace aclnn_cpu {
namespace {

int default_threads() {
#ifdef _OPENMP
  // Read once: omp_get_max_threads() depends on the calling thread's state (0 inside a parallel
  // region of someone else's, changed by omp_set_num_threads elsewhere); the process default
  // is what we want.
  static const int n = omp_get_max_threads() > 0 ? omp_get_max_threads() : 1;
  return n;
#else
  return 1;
#endif
}

std::atomic<int> chosen_threads{0};  // 0: not chosen, use the default

}  // namespace

int num_threads() {
  int n = chosen_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : default_threads();
}

// n < 1 restores the default.
void set_num_threads(int n) { chosen_threads.store(n > 0 ? n : 0, std::memory_order_relaxed); }

}  // namespace aclnn_cpu
