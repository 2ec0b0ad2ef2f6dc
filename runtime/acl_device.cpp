// Devices, contexts and streams of the acl runtime. There is one device (0); contexts only
// record the device; streams are synchronous, so synchronising one has nothing to wait for.
// Contexts and streams are registered objects, so a destroyed or foreign handle is reported
// (ACL_ERROR_INVALID_RESOURCE_HANDLE) instead of being dereferenced.
#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_set>

#include "acl/acl.h"
#include "aclnn_cpu/product.h"
#include "aclnn_cpu/status.h"
#include "fork_guard.h"
#include "runtime_internal.h"

namespace aclnn_cpu {
namespace {

struct Context {
  int32_t device = 0;
};
struct Stream {
  int32_t device = 0;
};

constexpr int32_t kOnlyDevice = 0;

std::mutex handles_mutex;
[[maybe_unused]] const int handles_mutex_fork_guard = hold_across_fork<handles_mutex>();
// Never destroyed: handles may be released from static destructors at exit.
std::unordered_set<const void*>& live_contexts() {
  static auto* set = new std::unordered_set<const void*>();
  return *set;
}
std::unordered_set<const void*>& live_streams() {
  static auto* set = new std::unordered_set<const void*>();
  return *set;
}

// The device's default context, current after aclrtSetDevice; destroyed only by the runtime.
Context default_context;
std::atomic<int> device_refs{0};
thread_local aclrtContext current_context = nullptr;

bool is_live_context(aclrtContext ctx) {
  if (ctx == &default_context) return true;
  std::lock_guard<std::mutex> lock(handles_mutex);
  return live_contexts().count(ctx) != 0;
}

aclError check_device(const char* fn, int32_t device) {
  if (device != kOnlyDevice)
    return fail(ACL_ERROR_RT_INVALID_DEVICEID, "%s: device %d does not exist (the CPU is device 0)",
                fn, static_cast<int>(device));
  return ACL_SUCCESS;
}

}  // namespace

bool stream_is_usable(aclrtStream stream) {
  if (stream == nullptr) return true;
  std::lock_guard<std::mutex> lock(handles_mutex);
  return live_streams().count(stream) != 0;
}

}  // namespace aclnn_cpu

using namespace aclnn_cpu;

extern "C" {

ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId) {
  if (aclError e = check_device("aclrtSetDevice", deviceId)) return e;
  device_refs.fetch_add(1, std::memory_order_relaxed);
  current_context = &default_context;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId) {
  if (aclError e = check_device("aclrtResetDevice", deviceId)) return e;
  int refs = device_refs.load(std::memory_order_relaxed);
  while (refs > 0 &&
         !device_refs.compare_exchange_weak(refs, refs - 1, std::memory_order_relaxed)) {
  }
  if (current_context == &default_context) current_context = nullptr;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t* deviceId) {
  if (deviceId == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is null");
  if (current_context == nullptr)
    return fail(ACL_ERROR_RT_CONTEXT_NULL,
                "aclrtGetDevice: no device is set on this thread (call aclrtSetDevice first)");
  *deviceId = kOnlyDevice;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t* count) {
  if (count == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is null");
  *count = 1;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY const char* aclrtGetSocName(void) { return soc_name(current_product()); }

ACL_FUNC_VISIBILITY aclError aclrtCreateContext(aclrtContext* context, int32_t deviceId) {
  if (context == nullptr)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateContext: context is null");
  if (aclError e = check_device("aclrtCreateContext", deviceId)) return e;
  try {
    // Owned until registered: the registry's insert may throw.
    auto owned = std::make_unique<Context>(Context{deviceId});
    Context* ctx = owned.get();
    {
      std::lock_guard<std::mutex> lock(handles_mutex);
      live_contexts().insert(ctx);
    }
    owned.release();
    *context = ctx;
    current_context = ctx;  // as in CANN: the new context becomes the thread's current one
    return ACL_SUCCESS;
  } catch (const std::bad_alloc&) {
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtCreateContext: out of memory");
  }
}

ACL_FUNC_VISIBILITY aclError aclrtDestroyContext(aclrtContext context) {
  if (context == nullptr)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyContext: context is null");
  if (context == &default_context)
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtDestroyContext: the device's default context is released by "
                "aclrtResetDevice, not destroyed");
  {
    std::lock_guard<std::mutex> lock(handles_mutex);
    if (live_contexts().erase(context) == 0)
      return fail(ACL_ERROR_INVALID_RESOURCE_HANDLE,
                  "aclrtDestroyContext: unknown context (already destroyed or not created by "
                  "aclrtCreateContext)");
  }
  if (current_context == context) current_context = nullptr;
  delete static_cast<Context*>(context);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtSetCurrentContext(aclrtContext context) {
  if (context == nullptr)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtSetCurrentContext: context is null");
  if (!is_live_context(context))
    return fail(ACL_ERROR_INVALID_RESOURCE_HANDLE,
                "aclrtSetCurrentContext: unknown context (already destroyed or not created by "
                "aclrtCreateContext)");
  current_context = context;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtGetCurrentContext(aclrtContext* context) {
  if (context == nullptr)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext: context is null");
  // The current context may have been destroyed by another thread meanwhile.
  if (current_context != nullptr && !is_live_context(current_context)) current_context = nullptr;
  if (current_context == nullptr)
    return fail(ACL_ERROR_RT_CONTEXT_NULL,
                "aclrtGetCurrentContext: this thread has no current context (call "
                "aclrtSetDevice or aclrtCreateContext first)");
  *context = current_context;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream* stream) {
  if (stream == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is null");
  try {
    auto owned = std::make_unique<Stream>(Stream{kOnlyDevice});  // owned until registered
    Stream* s = owned.get();
    {
      std::lock_guard<std::mutex> lock(handles_mutex);
      live_streams().insert(s);
    }
    owned.release();
    *stream = s;
    return ACL_SUCCESS;
  } catch (const std::bad_alloc&) {
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtCreateStream: out of memory");
  }
}

ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream) {
  if (stream == nullptr)
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtDestroyStream: stream is null (the default stream cannot be destroyed)");
  {
    std::lock_guard<std::mutex> lock(handles_mutex);
    if (live_streams().erase(stream) == 0)
      return fail(ACL_ERROR_INVALID_RESOURCE_HANDLE,
                  "aclrtDestroyStream: unknown stream (already destroyed or not created by "
                  "aclrtCreateStream)");
  }
  delete static_cast<Stream*>(stream);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream) {
  if (!stream_is_usable(stream))
    return fail(ACL_ERROR_INVALID_RESOURCE_HANDLE,
                "aclrtSynchronizeStream: unknown stream (already destroyed or not created by "
                "aclrtCreateStream)");
  return ACL_SUCCESS;  // work on every stream completes before the call that enqueued it returns
}

}  // extern "C"
