// Memory of the acl runtime: "device" memory is host memory aligned to 64 bytes (a cache line,
// and the widest SIMD load). Allocations are registered so that aclrtFree of a foreign or
// already freed pointer returns an error instead of corrupting the heap.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

#include "acl/acl.h"
#include "aclnn_cpu/status.h"
#include "fork_guard.h"
#include "runtime_internal.h"

namespace aclnn_cpu {
namespace {

constexpr size_t kAlignment = 64;

enum class MemoryKind { Device, Host };

std::mutex allocations_mutex;
[[maybe_unused]] const int allocations_mutex_fork_guard = hold_across_fork<allocations_mutex>();
std::unordered_map<void*, MemoryKind>& allocations() {
  static auto* map = new std::unordered_map<void*, MemoryKind>();  // never destroyed (exit order)
  return *map;
}

const char* kind_name(MemoryKind kind) { return kind == MemoryKind::Device ? "aclrtMalloc" : "aclrtMallocHost"; }

aclError allocate(const char* fn, void** ptr, size_t size, MemoryKind kind) {
  if (ptr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "%s: the output pointer is null", fn);
  if (size == 0) return fail(ACL_ERROR_INVALID_PARAM, "%s: size is 0", fn);
  if (size > SIZE_MAX - (kAlignment - 1))
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: cannot allocate %zu bytes", fn, size);
  size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;  // aligned_alloc needs it
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr)
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of memory allocating %zu bytes", fn, size);
  try {
    std::lock_guard<std::mutex> lock(allocations_mutex);
    allocations()[p] = kind;
  } catch (const std::bad_alloc&) {
    std::free(p);
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of memory allocating %zu bytes", fn, size);
  }
  *ptr = p;
  return ACL_SUCCESS;
}

aclError release(const char* fn, void* ptr, MemoryKind kind) {
  if (ptr == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "%s: the pointer is null", fn);
  {
    std::lock_guard<std::mutex> lock(allocations_mutex);
    auto it = allocations().find(ptr);
    if (it == allocations().end())
      return fail(ACL_ERROR_INVALID_PARAM,
                  "%s: %p was not returned by %s or was already freed", fn, ptr, kind_name(kind));
    if (it->second != kind)
      return fail(ACL_ERROR_INVALID_PARAM, "%s: %p was allocated by %s", fn, ptr,
                  kind_name(it->second));
    allocations().erase(it);
  }
  std::free(ptr);
  return ACL_SUCCESS;
}

bool is_valid_policy(int policy) {
  constexpr unsigned kFlags = ACL_MEM_TYPE_LOW_BAND_WIDTH | ACL_MEM_TYPE_HIGH_BAND_WIDTH |
                              ACL_MEM_ACCESS_USER_SPACE_READONLY;
  unsigned bits = static_cast<unsigned>(policy);
  unsigned base = bits & ~kFlags;
  return base <= ACL_MEM_MALLOC_HUGE1G_ONLY_P2P;
}

aclError copy(const char* fn, void* dst, size_t dest_max, const void* src, size_t count,
              aclrtMemcpyKind kind) {
  if (dst == nullptr || src == nullptr)
    return fail(ACL_ERROR_INVALID_PARAM, "%s: %s is null", fn, dst == nullptr ? "dst" : "src");
  if (static_cast<int>(kind) < ACL_MEMCPY_HOST_TO_HOST || static_cast<int>(kind) > ACL_MEMCPY_DEFAULT)
    return fail(ACL_ERROR_INVALID_PARAM, "%s: unknown aclrtMemcpyKind %d", fn, static_cast<int>(kind));
  if (count > dest_max)
    return fail(ACL_ERROR_INVALID_PARAM, "%s: count %zu is larger than destMax %zu", fn, count,
                dest_max);
  if (count > 0) std::memmove(dst, src, count);
  return ACL_SUCCESS;
}

aclError set(const char* fn, void* dst, size_t max_count, int32_t value, size_t count) {
  if (dst == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "%s: devPtr is null", fn);
  if (count > max_count)
    return fail(ACL_ERROR_INVALID_PARAM, "%s: count %zu is larger than maxCount %zu", fn, count,
                max_count);
  if (count > 0) std::memset(dst, static_cast<unsigned char>(value), count);
  return ACL_SUCCESS;
}

aclError check_stream(const char* fn, aclrtStream stream) {
  if (!stream_is_usable(stream))
    return fail(ACL_ERROR_INVALID_RESOURCE_HANDLE,
                "%s: unknown stream (already destroyed or not created by aclrtCreateStream)", fn);
  return ACL_SUCCESS;
}

}  // namespace
}  // namespace aclnn_cpu

using namespace aclnn_cpu;

extern "C" {

ACL_FUNC_VISIBILITY aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
  if (!is_valid_policy(static_cast<int>(policy)))
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: unknown aclrtMemMallocPolicy 0x%x",
                static_cast<unsigned>(policy));
  return allocate("aclrtMalloc", devPtr, size, MemoryKind::Device);
}

ACL_FUNC_VISIBILITY aclError aclrtFree(void* devPtr) {
  return release("aclrtFree", devPtr, MemoryKind::Device);
}

ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void** hostPtr, size_t size) {
  return allocate("aclrtMallocHost", hostPtr, size, MemoryKind::Host);
}

ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void* hostPtr) {
  return release("aclrtFreeHost", hostPtr, MemoryKind::Host);
}

ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                                         aclrtMemcpyKind kind) {
  return copy("aclrtMemcpy", dst, destMax, src, count, kind);
}

ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src,
                                              size_t count, aclrtMemcpyKind kind,
                                              aclrtStream stream) {
  if (aclError e = check_stream("aclrtMemcpyAsync", stream)) return e;
  return copy("aclrtMemcpyAsync", dst, destMax, src, count, kind);
}

ACL_FUNC_VISIBILITY aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value,
                                         size_t count) {
  return set("aclrtMemset", devPtr, maxCount, value, count);
}

ACL_FUNC_VISIBILITY aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value,
                                              size_t count, aclrtStream stream) {
  if (aclError e = check_stream("aclrtMemsetAsync", stream)) return e;
  return set("aclrtMemsetAsync", devPtr, maxCount, value, count);
}

}  // extern "C"
