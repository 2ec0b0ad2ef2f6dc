// The last-level cache size kernels plan their memory traffic with (runtime/cache_info.cpp).
#pragma once
#include <cstdint>

namespace aclnn_cpu {

// Bytes of the largest cache of cpu0 (sysfs), else glibc's L3/L2 size, else 32 MiB; read once.
uint64_t last_level_cache_bytes();

// Overrides the size for this process (0 restores the detected one). For tests and benchmarks:
// the streaming decisions of every kernel follow it.
void set_last_level_cache_bytes(uint64_t bytes);

}  // namespace aclnn_cpu
