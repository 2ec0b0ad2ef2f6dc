// The number of threads kernels use: OpenMP's default (which honours OMP_NUM_THREADS) until
// set_num_threads() chooses another; and what a fork does to it.
#include <atomic>

#include <pthread.h>

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

// fork() and OpenMP. GNU OpenMP keeps a pool of worker threads for each thread that opened a
// parallel region; fork() copies the pool's bookkeeping into the child but not its threads, so
// the child's first parallel region waits forever for workers that do not exist (Python's
// multiprocessing forks by default on Linux before 3.14). Before every fork the forking thread
// releases its pool (OpenMP 5.0's omp_pause_resource_all; the parent's next region starts new
// workers: 0.1-0.2 ms once, beside the 0.5-0.6 ms the fork's copy-on-write faults add to a 4 MB
// call then anyway), so the child starts with none and builds its own. Where
// that is not possible (a runtime without it, or a fork from inside a parallel region, where it
// fails), the child and its descendants run every kernel on one thread: the same results
// (bitwise identical for any thread count), never a hang. LLVM's and Intel's runtimes
// (ACLNN_OMP_HANDLES_FORK, probed by setup.py) re-initialise themselves in the child and need
// none of this.
std::atomic<bool> one_thread_after_fork{false};
thread_local bool pool_released_for_fork = false;  // the forking thread's, which the child inherits
std::atomic<bool> release_pool_on_fork{true};  // false only in tests of the fallback

void before_fork() {
  pool_released_for_fork = false;
#if defined(_OPENMP) && defined(ACLNN_HAVE_OMP_PAUSE)
  if (release_pool_on_fork.load(std::memory_order_relaxed))
    pool_released_for_fork = omp_pause_resource_all(omp_pause_hard) == 0;
#endif
}

void in_forked_child() {
  if (!pool_released_for_fork) one_thread_after_fork.store(true, std::memory_order_relaxed);
}

#if defined(_OPENMP) && !defined(ACLNN_OMP_HANDLES_FORK)
constexpr bool kPoolHandler = true;
[[maybe_unused]] const int fork_handlers_registered = pthread_atfork(before_fork, nullptr, in_forked_child);
#else
constexpr bool kPoolHandler = false;
#endif

}  // namespace

int num_threads() {
  if (one_thread_after_fork.load(std::memory_order_relaxed)) return 1;
  int n = chosen_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : default_threads();
}

bool has_fork_pool_handler() { return kPoolHandler; }

void set_release_pool_on_fork(bool on) { release_pool_on_fork.store(on, std::memory_order_relaxed); }

bool single_threaded_after_fork() { return one_thread_after_fork.load(std::memory_order_relaxed); }

// n < 1 restores the default.
void set_num_threads(int n) { chosen_threads.store(n > 0 ? n : 0, std::memory_order_relaxed); }

}  // namespace aclnn_cpu
