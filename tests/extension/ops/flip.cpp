// tests/extension: out = self reversed along each listed dim (CANN's aclnnFlip). A pure copy:
// the elements move by their size whatever their type, through a view of self whose flipped
// dims run backwards.
#include <cstdint>
#include <cstring>

#include "aclnn_cpu/flat_values.h"
#include "aclnn_cpu/ops/flip_args.h"
#include "aclnn_cpu/parallel.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

// Elements as unsigned integers of their size: a copy needs no arithmetic on them.
template <class Bits>
void copy_flipped(const TensorView& src, const TensorView& dst) {
  const FlatIndex fs(src), fd(dst);
  const Bits* s = src.ptr<const Bits>();
  Bits* d = dst.ptr<Bits>();
  parallel_for(dst.numel(), 16384, [&](int64_t begin, int64_t end) {
    Cursor cs(fs, begin), cd(fd, begin);
    for (int64_t i = begin; i < end; ++i, cs.next(), cd.next()) d[cd.off] = s[cs.off];
  });
}

}  // namespace

uint64_t flip_workspace(const FlipArgs&) { return 0; }

aclnnStatus flip(const FlipArgs& a, void*) {
  // self seen from its last element along each flipped dim, stepping backwards: element i of
  // this view is element (size - 1 - i) of self there.
  if (a.out.numel() == 0) return kSuccess;  // nothing to move (and data may be null)
  TensorView src = a.self;
  const int r = src.ndim > 0 ? src.ndim : 1;
  for (int64_t k = 0; k < a.dims.size; ++k) {
    if (src.ndim == 0) break;  // a 0-d tensor flips to itself
    const int64_t d = a.dims.values[k] < 0 ? a.dims.values[k] + r : a.dims.values[k];
    if (src.shape[d] > 1) {
      src.data = static_cast<char*>(src.data) +
                 (src.shape[d] - 1) * src.strides[d] * static_cast<int64_t>(src.itemsize());
      src.strides[d] = -src.strides[d];
    }
  }
  switch (src.itemsize()) {
    case 1: copy_flipped<uint8_t>(src, a.out); return kSuccess;
    case 2: copy_flipped<uint16_t>(src, a.out); return kSuccess;
    case 4: copy_flipped<uint32_t>(src, a.out); return kSuccess;
    case 8: copy_flipped<uint64_t>(src, a.out); return kSuccess;
    default: return kInner;
  }
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
