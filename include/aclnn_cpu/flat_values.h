// Row-major walks over a tensor's elements for the kernels (FlatIndex, Cursor), and small
// tensors to and from fp32 buffers (read_floats, write_floats). For kernel translation units:
// the conversions are simd.h's, compiled per ISA level.
#pragma once
#include <cstdint>

#include "aclnn_cpu/simd.h"
#include "aclnn_cpu/tensor_view.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {

// Row-major flat index -> element offset of one tensor, with its dims coalesced.
struct FlatIndex {
  int m = 0;
  int64_t shape[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};

  FlatIndex() = default;  // (m == 0: assign an index before use)
  explicit FlatIndex(const TensorView& t) {
    for (int i = 0; i < t.ndim; ++i) {
      if (t.shape[i] == 1) continue;
      if (m > 0 && stride[m - 1] == t.strides[i] * t.shape[i]) {
        shape[m - 1] *= t.shape[i];
        stride[m - 1] = t.strides[i];
      } else {
        shape[m] = t.shape[i];
        stride[m] = t.strides[i];
        ++m;
      }
    }
    if (m == 0) {
      m = 1;
      shape[0] = 1;
      stride[0] = 1;
    }
  }
  bool contiguous() const { return m == 1 && stride[0] == 1; }
};

// Walks consecutive flat indices of one tensor, keeping the element offset.
struct Cursor {
  const FlatIndex& f;
  int64_t idx[kMaxDims] = {};
  int64_t off = 0;

  Cursor(const FlatIndex& flat, int64_t start) : f(flat) {
    for (int k = f.m - 1; k >= 0; --k) {
      idx[k] = start % f.shape[k];
      start /= f.shape[k];
      off += idx[k] * f.stride[k];
    }
  }
  void next() {
    for (int k = f.m - 1; k >= 0; --k) {
      off += f.stride[k];
      if (++idx[k] < f.shape[k]) return;
      off -= f.shape[k] * f.stride[k];
      idx[k] = 0;
    }
  }
};

// Small tensors (an op's parameters and their gradients) to and from fp32 buffers, in row-major
// order. Contiguous ones are converted in vector runs: element by element through a cursor, the
// C = 1280 values of GroupNorm's gamma, dgamma and dbeta took about a tenth of a N2 C1280 16x16
// call's time on one thread, and PReLU's 1024 weights (with a division per dimension for each
// index) most of a [1, 1024, 1, 1] call.

// The first `count` elements of t.
template <class T>
inline void read_floats(const TensorView& t, int64_t count, float* out) {
  const T* src = t.ptr<const T>();
  if (t.is_contiguous()) return simd::convert_to_float(src, out, count);
  const FlatIndex f(t);
  Cursor at(f, 0);
  for (int64_t i = 0; i < count; ++i, at.next()) out[i] = simd::to_float(src[at.off]);
}

// Elements [first, first + count) of t (row-major) from floats.
template <class T>
inline void write_floats(const float* in, int64_t first, int64_t count, const TensorView& t) {
  T* dst = t.ptr<T>();
  if (t.is_contiguous()) return simd::convert_from_float(in, dst + first, count);
  const FlatIndex f(t);
  Cursor at(f, first);
  for (int64_t i = 0; i < count; ++i, at.next()) dst[at.off] = simd::from_float<T>(in[i]);
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
