// Memory for the big outputs the functional Python API allocates (runtime/output_pages.cpp).
// The Cython glue hands these buffers to NumPy through a PyDataMem_Handler, so the arrays own
// them (aclnn_cpu/_glue.pyx, "Big outputs").
#pragma once
#include <cstddef>
#include <cstdint>

namespace aclnn_cpu {

// A buffer of at least `bytes` bytes whose start is 2 MiB-aligned: a mapping of its own,
// advised for transparent huge pages (MADV_HUGEPAGE) when enabled, or a released buffer of the
// same mapped length taken from the cache. nullptr when no mapping can be had (the caller falls
// back to its plain allocator). Thread-safe.
void* output_pages_allocate(size_t bytes) noexcept;

// Gives back a buffer output_pages_allocate returned: it goes to the cache when it fits there,
// else it is unmapped. Returns false, touching nothing, for a pointer that is not such a
// buffer (or null). Thread-safe.
bool output_pages_release(void* ptr) noexcept;

// The mapped length of a live buffer of output_pages_allocate, 0 for any other pointer.
size_t output_pages_length(const void* ptr) noexcept;

// Settings (process-wide; read from ACLNN_CPU_HUGE_PAGES=0|1 and ACLNN_CPU_OUTPUT_CACHE_BYTES
// at first use). huge_pages: advise new mappings for huge pages. cache_bytes: how many bytes of
// released buffers the cache may hold (0: none; setting it lower unmaps what no longer fits).
void output_pages_configure(bool huge_pages, uint64_t cache_bytes) noexcept;
bool output_pages_huge_pages() noexcept;
uint64_t output_pages_cache_limit() noexcept;

// For tests: bytes mapped for live buffers, bytes held by the cache, buffers in the cache.
struct OutputPagesStats {
  uint64_t live_bytes;
  uint64_t cached_bytes;
  uint64_t cached_buffers;
};
OutputPagesStats output_pages_stats() noexcept;

}  // namespace aclnn_cpu
