// The last-level cache size kernels plan their memory traffic with (runtime/cache_info.cpp).
#pragma once
#include <cstdint>

namespace aclnn_cpu {

// Bytes of the largest cache of cpu0 (sysfs), else glibc's L3/L2 size, else 32 MiB; read once.
uint64_t last_level_cache_bytes();

}  // namespace aclnn_cpu
