// The cache sizes kernels plan their memory traffic with (runtime/cache_info.cpp).
#pragma once
#include <cstdint>

namespace aclnn_cpu {

// Bytes of the largest cache of cpu0 (sysfs), else glibc's L3/L2 size, else 32 MiB; read once.
uint64_t last_level_cache_bytes();

// Overrides the size for this process (0 restores the detected one). For tests and benchmarks:
// the streaming decisions of every kernel follow it.
void set_last_level_cache_bytes(uint64_t bytes);

// Bytes of cpu0's level-1 data cache (sysfs), else glibc's, else 32 KiB; read once.
uint64_t l1_data_cache_bytes();

}  // namespace aclnn_cpu
