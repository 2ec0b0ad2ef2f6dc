// The registry of live executors and phase 2 of every operator.
//
// Phase 2 receives a raw pointer from the caller, who may pass one that was already consumed,
// destroyed or never created; the registry turns those into ACLNN_ERR_PARAM_INVALID instead of a
// crash. It also keeps an executor alive while a run is in progress, so a concurrent
// aclDestroyAclOpExecutor on a repeatable executor defers the delete to the end of the run.
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <unordered_map>

#include "aclnn/aclnn_base.h"
#include "aclnn_cpu/executor.h"
#include "aclnn_cpu/status.h"
#include "fork_guard.h"
#include "runtime_internal.h"

namespace aclnn_cpu {
namespace {

struct Liveness {
  int active_runs = 0;            // runs of a repeatable executor in progress
  bool destroy_requested = false;  // destroyed during a run: deleted when the last run ends
};

std::mutex registry_mutex;
[[maybe_unused]] const int registry_mutex_fork_guard = hold_across_fork<registry_mutex>();
std::unordered_map<aclOpExecutor*, Liveness>& registry() {
  // Never destroyed: executors may be released from other static destructors at exit.
  static auto* live = new std::unordered_map<aclOpExecutor*, Liveness>();
  return *live;
}

// Found and not being destroyed; caller holds registry_mutex.
Liveness* find_live(aclOpExecutor* ex) {
  auto it = registry().find(ex);
  if (it == registry().end() || it->second.destroy_requested) return nullptr;
  return &it->second;
}

// How a phase-2 call holds the executor it runs.
enum class Hold { None, Owned, Shared };

// The caller's workspace arguments, checked before the executor is consumed so that a call
// with a wrong workspace can be repeated with a right one (as a bad stream can).
aclnnStatus check_workspace(const char* op_name, void* workspace, uint64_t workspace_size,
                            const aclOpExecutor* ex) {
  if (workspace == nullptr && workspace_size > 0)
    return fail(kParamNullptr, "%s: workspace is null but workspaceSize is %llu", op_name,
                static_cast<unsigned long long>(workspace_size));
  // Kernels keep floats and vectors in the workspace; aclrtMalloc's memory is always aligned.
  if (ex->workspace_size > 0 && reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
    return fail(kParamInvalid, "%s: workspace %p is not 16-byte aligned", op_name, workspace);
  if (workspace_size < ex->workspace_size)
    return fail(kParamInvalid, "%s: workspaceSize %llu is smaller than the %llu bytes %sGetWorkspaceSize asked for",
                op_name, static_cast<unsigned long long>(workspace_size),
                static_cast<unsigned long long>(ex->workspace_size), op_name);
  return kSuccess;
}

aclnnStatus run_checked(const char* op_name, void* workspace, aclOpExecutor* ex) {
  try {
    const uint64_t failures = failure_count();
    const aclnnStatus status = ex->run(ex->workspace_size > 0 ? workspace : nullptr);
    // Kernels return a status without a message (they are pure); every failure the caller sees
    // must still carry one for aclGetRecentErrMsg().
    if (status != kSuccess && failure_count() == failures)
      return fail(status, "%s: the kernel failed with status %d", op_name, static_cast<int>(status));
    return status;
  } catch (const std::bad_alloc&) {
    return fail(kInner, "%s: out of memory while running the kernel", op_name);
  } catch (const std::exception& e) {
    return fail(kInner, "%s: internal error: %s", op_name, e.what());
  } catch (...) {
    return fail(kInner, "%s: unexpected internal error", op_name);
  }
}

}  // namespace

aclOpExecutor* register_executor(aclOpExecutor* ex) {
  if (ex == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry()[ex] = Liveness{};
  return ex;
}

aclnnStatus run_executor(const char* op_name, void* workspace, uint64_t workspace_size,
                         aclOpExecutor* executor, void* stream) {
  if (executor == nullptr) return fail(kParamNullptr, "%s: executor is null", op_name);
  // Work runs synchronously, so the stream only has to be one the caller may use: null (the
  // default stream) or a live aclrtCreateStream handle. A bad one is refused before the
  // executor is touched, so it can still be run with a good stream or destroyed.
  if (!stream_is_usable(stream))
    return fail(kParamInvalid,
                "%s: unknown stream (destroyed, or not created by aclrtCreateStream); the "
                "executor was not run", op_name);

  Hold hold = Hold::None;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    Liveness* state = find_live(executor);
    if (state == nullptr)
      return fail(kParamInvalid,
                  "%s: unknown executor (already run and not repeatable, destroyed, or never "
                  "returned by %sGetWorkspaceSize)", op_name, op_name);
    if (std::strcmp(executor->op_name, op_name) != 0)
      return fail(kParamInvalid, "%s: the executor belongs to %s", op_name, executor->op_name);
    if (aclnnStatus bad = check_workspace(op_name, workspace, workspace_size, executor)) return bad;
    if (executor->repeatable) {
      ++state->active_runs;
      hold = Hold::Shared;
    } else {
      // Consumed by this call whatever its outcome: no other call can reach it from now on.
      registry().erase(executor);
      hold = Hold::Owned;
    }
  }

  aclnnStatus status = run_checked(op_name, workspace, executor);

  if (hold == Hold::Owned) {
    delete executor;
  } else {
    bool delete_now = false;
    {
      std::lock_guard<std::mutex> lock(registry_mutex);
      auto it = registry().find(executor);
      if (it != registry().end() && --it->second.active_runs == 0 &&
          it->second.destroy_requested) {
        registry().erase(it);
        delete_now = true;
      }
    }
    if (delete_now) delete executor;
  }
  return status;
}

}  // namespace aclnn_cpu

extern "C" {

ACLNN_API aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor* executor) {
  using namespace aclnn_cpu;
  if (executor == nullptr) return fail(kParamNullptr, "aclSetAclOpExecutorRepeatable: executor is null");
  std::lock_guard<std::mutex> lock(registry_mutex);
  if (find_live(executor) == nullptr)
    return fail(kParamInvalid,
                "aclSetAclOpExecutorRepeatable: unknown executor (already run, destroyed, or "
                "never created)");
  executor->repeatable = true;
  return ACLNN_SUCCESS;
}

ACLNN_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  using namespace aclnn_cpu;
  if (executor == nullptr) return fail(kParamNullptr, "aclDestroyAclOpExecutor: executor is null");
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    Liveness* state = find_live(executor);
    if (state == nullptr)
      return fail(kParamInvalid,
                  "aclDestroyAclOpExecutor: unknown executor (already run and not repeatable, "
                  "destroyed, or never created)");
    if (state->active_runs > 0) {
      state->destroy_requested = true;  // the last run deletes it
      return ACLNN_SUCCESS;
    }
    registry().erase(executor);
  }
  try {
    delete executor;
  } catch (...) {
    return fail(kInner, "aclDestroyAclOpExecutor: the executor's destructor failed");
  }
  return ACLNN_SUCCESS;
}

}  // extern "C"
