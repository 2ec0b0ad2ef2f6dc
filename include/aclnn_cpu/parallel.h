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
// True in a process forked where the OpenMP worker pool could not be released first
// (runtime/threads.cpp): its kernels run on one thread.
bool single_threaded_after_fork();
// Whether this build has that fork handler (GNU OpenMP; other runtimes handle forks themselves,
// and without OpenMP there is no pool).
bool has_fork_pool_handler();
// Tests of that fallback only: false makes every later fork take it.
void set_release_pool_on_fork(bool on);

namespace detail {
// The one compiled copy of a kernel's body, called from the parallel region and from the
// one-thread path alike. A body inlined at both call sites is compiled twice, and the compiler
// may give a commutative add its operands in another order in each copy; where two NaNs meet,
// which one an x86 add passes on depends on that order, so a NaN's sign followed the thread
// count (PReLU's gradWeight at the baseline level, a +NaN meeting -NaN from inf - inf).
// noipa: no inlining, and no clone specialised for one call site's constants either.
#if defined(__clang__)
#define ACLNN_ONE_COPY __attribute__((noinline))
#else
#define ACLNN_ONE_COPY __attribute__((noipa))
#endif
template <typename Body, typename... Args>
ACLNN_ONE_COPY void call_body(Body& body, Args... args) {
  body(args...);
}
#undef ACLNN_ONE_COPY
}  // namespace detail

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
      if (begin < end) detail::call_body(body, begin, end);
    }
    return;
  }
#endif
  detail::call_body(body, int64_t(0), n);
}

// Runs fn(task, worker) for every task in [0, ntasks) on at most `max_workers` threads, handing
// the tasks out one at a time to whichever thread is free: a thread that loses its core to
// another process delays the call by one task, not by a share fixed in advance. `worker`, in
// [0, max_workers), is the same for all the tasks one thread takes (an index for per-thread
// scratch memory). Only for tasks whose results do not depend on which thread runs them.
template <typename Fn>
void parallel_tasks(int64_t ntasks, int64_t max_workers, Fn&& fn) {
  int64_t threads = num_threads();
  if (threads > max_workers) threads = max_workers;
  if (threads > ntasks) threads = ntasks;
  if (threads <= 1) {
    for (int64_t t = 0; t < ntasks; ++t) detail::call_body(fn, t, int64_t(0));
    return;
  }
  std::atomic<int64_t> next{0};
  parallel_for(threads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t worker = begin; worker < end; ++worker)
      for (int64_t t = next.fetch_add(1); t < ntasks; t = next.fetch_add(1)) detail::call_body(fn, t, worker);
  });
}

// parallel_for with [0, n) cut into chunks of `grain` items handed out by parallel_tasks.
template <typename Body>
void parallel_for_dynamic(int64_t n, int64_t grain, Body&& body) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t chunks = (n + grain - 1) / grain;
  parallel_tasks(chunks, chunks,
                 [&](int64_t c, int64_t) { body(c * grain, c + 1 < chunks ? (c + 1) * grain : n); });
}

}  // namespace aclnn_cpu
