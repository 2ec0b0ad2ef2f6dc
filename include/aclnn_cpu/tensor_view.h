// A validated, kernel-facing view of one tensor. Built by the generated entry points from an
// aclTensor after validation, copied into the executor, so kernels never see aclTensor and the
// caller may destroy its aclTensor right after planning.
#pragma once
#include <cstddef>
#include <cstdint>

#include "aclnn_cpu/vocabulary.h"  // kMaxDims, kMaxIntArray, DType and dtype_size

namespace aclnn_cpu {

// This header's functions are forced inline: ops objects are compiled once per ISA level, and
// an out-of-line copy of a shared header's inline function is a weak symbol the linker may take
// from an AVX-512 object for baseline code (setup.py rejects such objects; at -O1, as the
// sanitizer build compiles, GCC left is_contiguous out of line).
#define ACLNN_VIEW_INLINE inline __attribute__((always_inline))

const char* dtype_name(DType t);  // "float32", "bfloat16", ... (runtime/tensor.cpp)

// A validated aclScalar as kernels see it: its value as a double (exact for every float dtype
// and for integers up to 2^53 in magnitude) and the dtype it was created with.
struct ScalarArg {
  double value = 0.0;
  DType dtype = DType::Undefined;
  bool present = false;  // false: an optional scalar passed as null
};

// A validated aclIntArray as kernels see it: its integers, copied at planning time.
struct IntArrayArg {
  int64_t values[kMaxIntArray] = {};
  int64_t size = 0;
  bool present = false;  // false: an optional array passed as null
};

struct TensorView {
  void* data = nullptr;  // address of element [0,...,0] (storage offset already applied)
  DType dtype = DType::Undefined;
  int32_t ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};  // in elements; may be negative or zero (inputs only)
  bool present = false;  // false: optional operand absent (gamma None) or output masked off

  ACLNN_VIEW_INLINE int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  ACLNN_VIEW_INLINE std::size_t itemsize() const { return dtype_size(dtype); }
  // Memory-order detection, the one test behind every layout test of a view: whether the view
  // is dense with its dims dim_at(0), ..., dim_at(count - 1) from outermost to innermost, that
  // is row-major contiguous once so permuted (size-1 dims may carry any stride). A dim left out
  // must be size 1 for the whole view to be that dense, which the callers check themselves.
  template <class DimAt>
  ACLNN_VIEW_INLINE bool dense_in_order(int count, DimAt&& dim_at) const {
    int64_t expect = 1;
    for (int k = count - 1; k >= 0; --k) {
      const int i = dim_at(k);
      if (shape[i] != 1 && strides[i] != expect) return false;
      expect *= shape[i];
    }
    return true;
  }
  // The dims from `first` on in memory order, outermost first: largest stride first, ties in dim
  // order (an insertion sort over at most kMaxDims dims). Returns whether the view is dense in
  // that order (dense_in_order): its dims from `first` on are a dense permutation (transposed,
  // channels-last), with positive strides.
  ACLNN_VIEW_INLINE bool memory_order(int first, int order[kMaxDims]) const {
    const int count = ndim - first;
    for (int k = 0; k < count; ++k) order[k] = first + k;
    for (int i = 1; i < count; ++i)
      for (int k = i; k > 0 && strides[order[k]] > strides[order[k - 1]]; --k) {
        const int t = order[k];
        order[k] = order[k - 1];
        order[k - 1] = t;
      }
    return dense_in_order(count, [order](int k) __attribute__((always_inline)) { return order[k]; });
  }
  // Row-major contiguous (size-1 dims may carry any stride).
  ACLNN_VIEW_INLINE bool is_contiguous() const {
    return dense_in_order(ndim, [](int k) __attribute__((always_inline)) { return k; });
  }
  // Same shape, and the same strides wherever a dim has more than one element.
  ACLNN_VIEW_INLINE bool same_layout(const TensorView& other) const {
    if (other.ndim != ndim) return false;
    for (int i = 0; i < ndim; ++i)
      if (other.shape[i] != shape[i] || (shape[i] != 1 && other.strides[i] != strides[i])) return false;
    return true;
  }
  // Dense with dim 1 innermost and the other dims row-major around it (the memory of
  // [N, H, W, C] for a [N, C, H, W] view: torch's channels_last), rank >= 3, at least 2 channels.
  ACLNN_VIEW_INLINE bool is_channels_last() const {
    if (ndim < 3 || shape[1] < 2) return false;
    const int n = ndim;  // outermost first: 0, 2, ..., n - 1, then 1
    return dense_in_order(n, [n](int k) __attribute__((always_inline)) { return k == 0 ? 0 : k == n - 1 ? 1 : k + 1; });
  }
  // This view as [d0, d1, P] with each (i0, i1) plane, dims 2 and on, taken in memory order,
  // when those dims are a dense permutation with positive strides (transposed planes, say):
  // false otherwise. For elementwise ops and per-plane sums on operands that share the layout,
  // so that position k of a plane is the same element in all of them.
  ACLNN_VIEW_INLINE bool planes_in_memory_order(TensorView& out) const {
    int order[kMaxDims];
    if (ndim < 3 || !memory_order(2, order)) return false;
    int64_t plane = 1;
    for (int i = 2; i < ndim; ++i) plane *= shape[i];
    out = *this;
    out.ndim = 3;
    out.shape[2] = plane;
    out.strides[2] = 1;
    for (int i = 3; i < kMaxDims; ++i) out.shape[i] = 0, out.strides[i] = 0;
    return true;
  }
  template <typename T> ACLNN_VIEW_INLINE T* ptr() const { return static_cast<T*>(data); }
};

}  // namespace aclnn_cpu
