// Sizes of cpu0's L1 data cache and of the last-level cache one core can use, for the kernels'
// traversal-order and streaming-store decisions.
//
// sysfs first: glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) can report the whole package (in a KVM
// guest on an AMD EPYC host it gives 320 MiB, ten CCDs' worth, while cpu0's L3 is 32 MiB),
// which would switch streaming stores off for every realistic tensor.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "aclnn_cpu/cache_info.h"

namespace aclnn_cpu {
namespace {

// "32768K" -> bytes; 0 if unreadable.
uint64_t read_size(const char* path) {
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  unsigned long long value = 0;
  char unit = 0;
  const int got = std::fscanf(f, "%llu%c", &value, &unit);
  std::fclose(f);
  if (got < 1) return 0;
  const uint64_t scale = unit == 'K' ? 1024ull : unit == 'M' ? 1024ull * 1024 : unit == 'G' ? 1024ull * 1024 * 1024 : 1;
  return uint64_t(value) * scale;
}

// The size in cpu0's sysfs cache entry `index`; `level` and `type` ("Data", "Unified") must
// match when given.
uint64_t cache_entry_size(int index, int level, const char* type) {
  char path[96];
  if (level > 0) {
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
    if (read_size(path) != uint64_t(level)) return 0;
  }
  if (type != nullptr) {
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", index);
    std::FILE* f = std::fopen(path, "r");
    if (f == nullptr) return 0;
    char text[32] = {0};
    const int got = std::fscanf(f, "%31s", text);
    std::fclose(f);
    if (got != 1 || std::strcmp(text, type) != 0) return 0;
  }
  std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
  return read_size(path);
}

uint64_t detect_l1d() {
  for (int index = 0; index < 8; ++index)
    if (const uint64_t size = cache_entry_size(index, 1, "Data")) return size;
  long size = -1;
#if defined(_SC_LEVEL1_DCACHE_SIZE)
  size = sysconf(_SC_LEVEL1_DCACHE_SIZE);
#endif
  return size > 0 ? uint64_t(size) : uint64_t(32) << 10;
}

uint64_t detect() {
  uint64_t best = 0;
  for (int index = 0; index < 8; ++index) {  // the largest of cpu0's caches is the last level
    const uint64_t size = cache_entry_size(index, 0, nullptr);
    if (size > best) best = size;
  }
  if (best > 0) return best;
  long size = -1;
#if defined(_SC_LEVEL3_CACHE_SIZE)
  size = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (size <= 0) size = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  return size > 0 ? uint64_t(size) : uint64_t(32) << 20;
}

// Set by set_last_level_cache_bytes (tests: a tiny size makes every kernel take its streaming
// path on small data); 0 means "what the machine says".
std::atomic<uint64_t> g_override{0};

}  // namespace

void set_last_level_cache_bytes(uint64_t bytes) { g_override.store(bytes, std::memory_order_relaxed); }

uint64_t last_level_cache_bytes() {
  const uint64_t forced = g_override.load(std::memory_order_relaxed);
  if (forced != 0) return forced;
  static const uint64_t bytes = [] {
    // ACLNN_CPU_LLC_BYTES overrides (tests, and machines whose sysfs misleads).
    const char* env = std::getenv("ACLNN_CPU_LLC_BYTES");
    if (env != nullptr && *env != '\0') {
      const unsigned long long v = std::strtoull(env, nullptr, 10);
      if (v > 0) return uint64_t(v);
    }
    return detect();
  }();
  return bytes;
}

uint64_t l1_data_cache_bytes() {
  static const uint64_t bytes = detect_l1d();
  return bytes;
}

}  // namespace aclnn_cpu
