// Memory for the functional API's big outputs (include/aclnn_cpu/output_pages.h).
//
// A fresh big buffer from malloc is a fresh mmap: the kernel's first store to each 4 KiB page
// faults and the kernel zeroes the page, and free() unmaps it all again. Two things cut that
// cost, and both are used: each buffer is a 2 MiB-aligned mapping advised for transparent huge
// pages (one fault and one 2 MiB clear per 512 small-page faults), and released buffers are kept
// in a small cache keyed by their mapped length, so a loop that calls an op and drops its output
// writes into pages that are already there. docs/architecture.md, "Output allocation", has the
// figures.
#include "aclnn_cpu/output_pages.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#define ACLNN_HAVE_MMAP 1
#endif

#include "fork_guard.h"

namespace aclnn_cpu {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
// The cache holds at most this many buffers, so finding one is a short scan.
constexpr size_t kMaxCached = 32;
constexpr uint64_t kDefaultCacheBytes = uint64_t(256) << 20;

struct Mapping {
  void* ptr;
  size_t length;
};

std::mutex pages_mutex;
[[maybe_unused]] const int pages_mutex_fork_guard = hold_across_fork<pages_mutex>();

// Everything below is guarded by pages_mutex.
struct State {
  bool configured = false;
  bool huge_pages = true;
  bool advise_works = true;  // cleared when the kernel refuses MADV_HUGEPAGE (no THP)
  uint64_t cache_limit = kDefaultCacheBytes;
  uint64_t cached_bytes = 0;
  uint64_t live_bytes = 0;
  std::vector<Mapping> cached;  // most recently released last
  std::unordered_map<const void*, size_t> live;
};

State& state() {
  static State* s = new State();  // never destroyed: arrays may be freed during interpreter exit
  return *s;
}

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return !(v[0] == '0' && v[1] == '\0');
}

void configure_from_env(State& s) {
  if (s.configured) return;
  s.configured = true;
  s.huge_pages = env_flag("ACLNN_CPU_HUGE_PAGES", true);
  if (const char* v = std::getenv("ACLNN_CPU_OUTPUT_CACHE_BYTES"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    unsigned long long n = std::strtoull(v, &end, 10);
    if (end != v && *end == '\0') s.cache_limit = n;
  }
}

void unmap(const Mapping& m) {
#ifdef ACLNN_HAVE_MMAP
  munmap(m.ptr, m.length);
#else
  (void)m;
#endif
}

// A fresh 2 MiB-aligned mapping of `length` bytes (a multiple of 2 MiB), or nullptr.
void* map_aligned(size_t length, bool advise, bool& advise_works) {
#ifdef ACLNN_HAVE_MMAP
  size_t span = length + kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto base = reinterpret_cast<uintptr_t>(raw);
  uintptr_t start = (base + kHugePage - 1) & ~(uintptr_t(kHugePage) - 1);
  if (start > base) munmap(raw, start - base);
  size_t tail = base + span - (start + length);
  if (tail > 0) munmap(reinterpret_cast<void*>(start + length), tail);
  void* ptr = reinterpret_cast<void*>(start);
#ifdef MADV_HUGEPAGE
  if (advise && advise_works && madvise(ptr, length, MADV_HUGEPAGE) != 0) advise_works = false;
#else
  (void)advise;
  advise_works = false;
#endif
  return ptr;
#else
  (void)length;
  (void)advise;
  (void)advise_works;
  return nullptr;
#endif
}

// Unmaps cached buffers, oldest first, until the cache fits `limit` bytes and kMaxCached
// buffers; the caller unmaps what lands in `evicted` after dropping the lock.
void trim(State& s, uint64_t limit, size_t max_buffers, std::vector<Mapping>& evicted) {
  size_t drop = 0;
  uint64_t bytes = s.cached_bytes;
  while (drop < s.cached.size() && (bytes > limit || s.cached.size() - drop > max_buffers)) {
    bytes -= s.cached[drop].length;
    ++drop;
  }
  evicted.assign(s.cached.begin(), s.cached.begin() + static_cast<std::ptrdiff_t>(drop));
  s.cached.erase(s.cached.begin(), s.cached.begin() + static_cast<std::ptrdiff_t>(drop));
  s.cached_bytes = bytes;
}

}  // namespace

void* output_pages_allocate(size_t bytes) noexcept {
  if (bytes == 0 || bytes > SIZE_MAX - 2 * kHugePage) return nullptr;
  size_t length = (bytes + kHugePage - 1) & ~(kHugePage - 1);
  State& s = state();
  bool advise = false;
  bool advise_works = true;
  try {
    {
      std::lock_guard<std::mutex> lock(pages_mutex);
      configure_from_env(s);
      for (size_t i = s.cached.size(); i-- > 0;) {  // the most recently released first
        if (s.cached[i].length != length) continue;
        void* ptr = s.cached[i].ptr;
        s.live.emplace(ptr, length);  // may throw: then the buffer stays cached
        s.cached.erase(s.cached.begin() + static_cast<std::ptrdiff_t>(i));
        s.cached_bytes -= length;
        s.live_bytes += length;
        return ptr;
      }
      advise = s.huge_pages;
      advise_works = s.advise_works;
    }
    void* ptr = map_aligned(length, advise, advise_works);  // outside the lock: mmap may block
    if (ptr == nullptr) return nullptr;
    std::lock_guard<std::mutex> lock(pages_mutex);
    if (!advise_works) s.advise_works = false;
    try {
      s.live.emplace(ptr, length);
    } catch (...) {
      unmap({ptr, length});
      return nullptr;
    }
    s.live_bytes += length;
    return ptr;
  } catch (...) {  // std::system_error from the mutex, bad_alloc from the map
    return nullptr;
  }
}

bool output_pages_release(void* ptr) noexcept {
  if (ptr == nullptr) return false;
  State& s = state();
  std::vector<Mapping> evicted;
  Mapping released{ptr, 0};
  bool keep = false;
  try {
    std::lock_guard<std::mutex> lock(pages_mutex);
    auto it = s.live.find(ptr);
    if (it == s.live.end()) return false;
    released.length = it->second;
    s.live.erase(it);
    s.live_bytes -= released.length;
    if (released.length <= s.cache_limit && kMaxCached > 0) {
      s.cached.push_back(released);  // may throw: then the buffer is unmapped below
      s.cached_bytes += released.length;
      keep = true;
      trim(s, s.cache_limit, kMaxCached, evicted);
    }
  } catch (...) {
    if (released.length == 0) return false;  // the lock failed: leave the buffer alone
  }
  if (!keep) unmap(released);
  for (const Mapping& m : evicted) unmap(m);
  return true;
}

size_t output_pages_length(const void* ptr) noexcept {
  try {
    std::lock_guard<std::mutex> lock(pages_mutex);
    const State& s = state();
    auto it = s.live.find(ptr);
    return it == s.live.end() ? 0 : it->second;
  } catch (...) {
    return 0;
  }
}

void output_pages_configure(bool huge_pages, uint64_t cache_bytes) noexcept {
  std::vector<Mapping> evicted;
  try {
    std::lock_guard<std::mutex> lock(pages_mutex);
    State& s = state();
    configure_from_env(s);
    s.huge_pages = huge_pages;
    s.cache_limit = cache_bytes;
    trim(s, cache_bytes, kMaxCached, evicted);
  } catch (...) {
    return;
  }
  for (const Mapping& m : evicted) unmap(m);
}

bool output_pages_huge_pages() noexcept {
  try {
    std::lock_guard<std::mutex> lock(pages_mutex);
    State& s = state();
    configure_from_env(s);
    return s.huge_pages && s.advise_works;
  } catch (...) {
    return false;
  }
}

uint64_t output_pages_cache_limit() noexcept {
  try {
    std::lock_guard<std::mutex> lock(pages_mutex);
    State& s = state();
    configure_from_env(s);
    return s.cache_limit;
  } catch (...) {
    return 0;
  }
}

OutputPagesStats output_pages_stats() noexcept {
  try {
    std::lock_guard<std::mutex> lock(pages_mutex);
    const State& s = state();
    return {s.live_bytes, s.cached_bytes, s.cached.size()};
  } catch (...) {
    return {0, 0, 0};
  }
}

}  // namespace aclnn_cpu
