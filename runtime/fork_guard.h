// Mutexes a fork() must not copy while held. fork() copies only the calling thread: a mutex that
// another thread holds at that moment stays locked in the child forever, and the child's first
// call that needs it hangs (measured: 4 of 300 children of a process whose other threads were
// planning Softmax calls hung in register_executor). Each runtime mutex is therefore taken by
// the forking thread just before the fork and released on both sides after it, as glibc does
// for malloc's locks. No runtime code holds two of these at once, so the order they are taken
// in does not matter.
#pragma once
#include <mutex>

#include <pthread.h>

namespace aclnn_cpu {

// Registers the fork handlers of one mutex with static storage duration; call once, at static
// initialisation: [[maybe_unused]] const int guard = hold_across_fork<some_mutex>();
template <std::mutex& M>
int hold_across_fork() {
  return pthread_atfork([] { M.lock(); }, [] { M.unlock(); }, [] { M.unlock(); });
}

}  // namespace aclnn_cpu
