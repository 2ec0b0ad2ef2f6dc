// DimArray: a tensor's strides or storage dims, kept inside the aclTensor up to kMaxDims.
// As std::vectors they were two of the four heap allocations (and frees) of every aclTensor, a
// tenth of a tiny call's time through the C API.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "aclnn_cpu/tensor_view.h"

namespace aclnn_cpu {

class DimArray {
 public:
  // Copies [first, last); may throw std::bad_alloc past kInline values.
  void assign(const int64_t* first, const int64_t* last) {
    int64_t* to = reserve(static_cast<std::size_t>(last - first));
    for (std::size_t i = 0; i < size_; ++i) to[i] = first[i];
  }
  void assign(std::size_t n, int64_t value) {
    int64_t* to = reserve(n);
    for (std::size_t i = 0; i < n; ++i) to[i] = value;
  }

  std::size_t size() const { return size_; }
  const int64_t* data() const { return heap_ ? heap_.get() : inline_; }
  int64_t* data() { return heap_ ? heap_.get() : inline_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t operator[](std::size_t i) const { return data()[i]; }
  int64_t& operator[](std::size_t i) { return data()[i]; }

 private:
  static constexpr std::size_t kInline = kMaxDims;  // every rank a kernel accepts

  int64_t* reserve(std::size_t n) {
    heap_.reset(n > kInline ? new int64_t[n] : nullptr);
    size_ = n;
    return data();
  }

  int64_t inline_[kInline];
  std::unique_ptr<int64_t[]> heap_;
  std::size_t size_ = 0;
};

}  // namespace aclnn_cpu
