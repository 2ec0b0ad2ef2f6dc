// The vocabulary of the generated validators (runtime/generated/<op>_entry.cpp): accessors that
// the C++ expressions of registry/<op>.yaml rules call, message formatting, and the structural
// checks every op shares (layout sanity, writable outputs, no overlap). Implemented in
// runtime/validate.cpp; written for validators only, kernels never see aclTensor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "aclnn/aclnn_base.h"
#include "aclnn_cpu/product.h"
#include "aclnn_cpu/status.h"
#include "aclnn_cpu/tensor_view.h"

namespace aclnn_cpu {

using Shape = std::vector<int64_t>;

// ---- accessors (tensor arguments must be non-null unless said otherwise) -----------------------
// A null argument (an optional param a rule reads without a present() guard) throws
// std::logic_error, which the entry point reports as 561000: a registry bug, never a crash.

inline bool present(const aclTensor* t) { return t != nullptr; }
int64_t rank(const aclTensor* t);
// Element count. The structural checks reject counts that overflow int64 before any rule that
// could call this runs; should it still happen, it throws std::logic_error (-> 561000).
int64_t numel(const aclTensor* t);
// Size of dim i; negative i counts from the end. An index outside the rank is a registry bug
// (a rule read a dim before a rank rule fixed the rank): throws std::logic_error (-> 561000).
int64_t dim(const aclTensor* t, int64_t i);
DType dtype(const aclTensor* t);
const Shape& shape(const aclTensor* t);  // the tensor's own dims: no copy
// The storage format the tensor was created with (aclCreateTensor's aclFormat) by its name
// without the ACL_FORMAT_ prefix ("ND", "NCHW", "NHWC", "NC1HWC0", ...; unknown values as
// "format(99)"), and whether it is one of the NPU's private, blocked formats (NC1HWC0,
// NC1HWC0_C04, FRACTAL_Z, FRACTAL_NZ, NDC1HWC0, FRACTAL_Z_3D). The Python API creates every
// tensor as ND.
std::string format_name(const aclTensor* t);
bool is_private_format(const aclTensor* t);
// Scalars and integer arrays (non-null unless said otherwise).
inline bool present(const aclScalar* s) { return s != nullptr; }
inline bool present(const aclIntArray* a) { return a != nullptr; }
DType dtype(const aclScalar* s);       // the dtype it was created with
double scalar_value(const aclScalar* s);  // its value as a double
const Shape& int_values(const aclIntArray* a);  // its integers: int_values(a).size(), [i]
// Flag i of a bool array; false when the array is null or too short (null-safe on purpose: masks
// are read before the array's own checks run).
bool mask(const aclBoolArray* flags, int64_t i);
Product product();  // the product line whose rules apply (current_product())

// Product of non-negative factors; -1 when a factor is negative or the product overflows int64,
// so it never equals a real element count.
int64_t checked_mul(std::initializer_list<int64_t> factors);
// Elements of the dims of t from `first` on (1 when first >= rank(t)): the HxW of an [N, C, ...]
// tensor. -1 when that count overflows int64 (a zero dim elsewhere lets the others be anything).
int64_t trailing_numel(const aclTensor* t, int64_t first);
// Dim lists (an integer array of dims, e.g. int_values(dims)) of a tensor of rank `rank`:
// every entry in [-r, r) with r = max(rank, 1) (a 0-d tensor takes dim 0 or -1, as PyTorch's);
// and no dim named twice once negative entries are counted from the end (entries out of range
// are not compared).
bool dims_in_range(const Shape& dims, int64_t rank);
bool dims_unique(const Shape& dims, int64_t rank);
// NumPy broadcasting that yields exactly `to`: `from` has at most as many dims, and each of its
// dims (aligned from the right) equals the target's or is 1.
bool broadcasts_to(const Shape& from, const Shape& to);

// ---- dtype sets ---------------------------------------------------------------------------------

// The dtypes one dtype set of a registry op allows on the current product (generated tables).
struct DTypeList {
  const DType* items = nullptr;
  std::size_t count = 0;

  bool contains(DType t) const;
  std::string names() const;  // "float32, float16" or "none"
};

// ---- messages -----------------------------------------------------------------------------------

std::string to_string(bool v);  // "true" / "false"
std::string to_string(double v);
std::string to_string(DType t);  // "bfloat16"; unknown values as "dtype(99)"
std::string to_string(const Shape& s);  // "[4, 2]"
std::string to_string(Product p);  // "atlas_a2"
std::string to_string(const char* s);
std::string to_string(const std::string& s);
// Any integer other than bool (int, int64_t, uint64_t ...), printed in decimal.
template <typename T, typename std::enable_if<std::is_integral<T>::value &&
                                                  !std::is_same<T, bool>::value, int>::type = 0>
std::string to_string(T v) {
  if (std::is_signed<T>::value) return std::to_string(static_cast<long long>(v));
  return std::to_string(static_cast<unsigned long long>(v));
}

// An expected element count for messages: checked_mul's -1 reads "more than int64 can count".
std::string count_to_string(int64_t n);

// Records "<op>: <message>" as the thread's error and returns `status`.
aclnnStatus reject(aclnnStatus status, const char* op, const std::string& message);

// ---- structural checks every op shares (each returns kSuccess or the rejection) ---------------

// A bool array has exactly `size` flags.
aclnnStatus check_bool_array_size(const char* op, const char* name, const aclBoolArray* flags,
                                  uint64_t size);
// A present integer array has at most `max_size` integers (IntArrayArg holds kMaxIntArray).
aclnnStatus check_int_array_size(const char* op, const char* name, const aclIntArray* a,
                                 int64_t max_size);
// A present tensor is addressable: dims >= 0, one stride per dim, element count, byte size and
// byte extent (offset and strides included) within int64, data non-null when it has elements.
aclnnStatus check_layout(const char* op, const char* name, const aclTensor* t);
// A present tensor has at most `max_rank` dims (TensorView holds kMaxDims).
aclnnStatus check_max_rank(const char* op, const char* name, const aclTensor* t, int64_t max_rank);
// A present output is writable and never writes one memory location twice (no zero stride on a
// dim of size > 1, no strides that make distinct indices alias).
aclnnStatus check_output_writable(const char* op, const char* name, const aclTensor* out);
// A present output shares no byte with another present tensor (compared by the byte extents
// [lowest, highest] of the two views; empty tensors never overlap).
aclnnStatus check_no_overlap(const char* op, const char* out_name, const aclTensor* out,
                             const char* other_name, const aclTensor* other);

// The predicates behind the checks above, for tests and custom rules.
bool overlaps(const aclTensor* a, const aclTensor* b);
// 161002 when t's first element does not sit on its element size (kernels load whole elements).
aclnnStatus check_aligned(const char* op, const char* name, const aclTensor* t);
bool has_internal_overlap(const aclTensor* t);

}  // namespace aclnn_cpu
