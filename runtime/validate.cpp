// Helpers of the generated validators (include/aclnn_cpu/validate.h): accessors, message
// formatting and the structural checks shared by every op.
#include "aclnn_cpu/validate.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "aclnn_cpu/tensor.h"

namespace aclnn_cpu {

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// a * b for non-negative a, b; false on overflow. (The overflow builtins: a test by division
// cost a 64-bit divide per dim, several per tensor of every call.)
bool mul_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

bool add_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

int64_t abs_or_max(int64_t v) {
  return v == std::numeric_limits<int64_t>::min() ? kInt64Max : (v < 0 ? -v : v);
}

// Element count, or -1 when a dim is negative or the count overflows.
int64_t safe_numel(const aclTensor* t) {
  int64_t n = 1;
  for (int64_t d : t->view_dims) {
    if (d < 0 || !mul_ok(n, d, &n)) return -1;
  }
  return n;
}

// Byte addresses [lo, hi] a non-empty view touches. check_layout() has verified that the
// element extent times the item size fits int64, so the arithmetic below cannot overflow.
struct ByteExtent {
  __int128 lo, hi;
};

ByteExtent byte_extent(const aclTensor* t) {
  const int64_t item = static_cast<int64_t>(dtype_size(t->dtype) ? dtype_size(t->dtype) : 1);
  __int128 lo = t->offset, hi = t->offset;
  for (std::size_t i = 0; i < t->view_dims.size(); ++i) {
    const __int128 reach = static_cast<__int128>(t->view_dims[i] - 1) * t->strides[i];
    if (reach < 0) lo += reach; else hi += reach;
  }
  const __int128 base = static_cast<__int128>(reinterpret_cast<uintptr_t>(t->data));
  return {base + lo * item, base + hi * item + item - 1};
}

// An accessor reached a null argument: an optional param read by a rule that does not guard it
// with present(). A registry bug, reported as 561000 rather than dereferenced.
template <class T>
const T* require(const T* p, const char* accessor) {
  if (p == nullptr) {
    throw std::logic_error(std::string(accessor) +
                           "() of a null argument (an optional param read by a rule: guard the "
                           "rule with present(...))");
  }
  return p;
}

}  // namespace

// ---- accessors ----------------------------------------------------------------------------------

int64_t rank(const aclTensor* t) {
  return static_cast<int64_t>(require(t, "rank")->view_dims.size());
}

int64_t numel(const aclTensor* t) {
  const int64_t n = safe_numel(require(t, "numel"));
  if (n < 0) throw std::logic_error("numel() of a tensor whose element count overflows");
  return n;
}

int64_t dim(const aclTensor* t, int64_t i) {
  const int64_t r = rank(require(t, "dim"));
  const int64_t k = i < 0 ? i + r : i;
  if (k < 0 || k >= r) {
    throw std::logic_error("dim(t, " + std::to_string(i) + ") of a tensor of rank " +
                           std::to_string(r) + " (a rule read a dim before checking the rank)");
  }
  return t->view_dims[static_cast<std::size_t>(k)];
}

DType dtype(const aclTensor* t) { return require(t, "dtype")->dtype; }

const Shape& shape(const aclTensor* t) { return require(t, "shape")->view_dims; }

std::string format_name(const aclTensor* t) {
  switch (require(t, "format_name")->format) {
    case ACL_FORMAT_UNDEFINED: return "UNDEFINED";
    case ACL_FORMAT_NCHW: return "NCHW";
    case ACL_FORMAT_NHWC: return "NHWC";
    case ACL_FORMAT_ND: return "ND";
    case ACL_FORMAT_NC1HWC0: return "NC1HWC0";
    case ACL_FORMAT_FRACTAL_Z: return "FRACTAL_Z";
    case ACL_FORMAT_NC1HWC0_C04: return "NC1HWC0_C04";
    case ACL_FORMAT_HWCN: return "HWCN";
    case ACL_FORMAT_NDHWC: return "NDHWC";
    case ACL_FORMAT_FRACTAL_NZ: return "FRACTAL_NZ";
    case ACL_FORMAT_NCDHW: return "NCDHW";
    case ACL_FORMAT_NDC1HWC0: return "NDC1HWC0";
    case ACL_FRACTAL_Z_3D: return "FRACTAL_Z_3D";
    case ACL_FORMAT_NC: return "NC";
    case ACL_FORMAT_NCL: return "NCL";
    default: return "format(" + std::to_string(t->format) + ")";
  }
}

bool is_private_format(const aclTensor* t) {
  switch (require(t, "is_private_format")->format) {
    case ACL_FORMAT_NC1HWC0: case ACL_FORMAT_NC1HWC0_C04: case ACL_FORMAT_FRACTAL_Z:
    case ACL_FORMAT_FRACTAL_NZ: case ACL_FORMAT_NDC1HWC0: case ACL_FRACTAL_Z_3D:
      return true;
    default:
      return false;
  }
}

DType dtype(const aclScalar* s) { return require(s, "dtype")->dtype; }

double scalar_value(const aclScalar* s) { return require(s, "scalar_value")->value; }

const Shape& int_values(const aclIntArray* a) { return require(a, "int_values")->values; }

bool mask(const aclBoolArray* flags, int64_t i) {
  return i >= 0 && bool_array_at(flags, static_cast<uint64_t>(i));
}

Product product() { return current_product(); }

int64_t checked_mul(std::initializer_list<int64_t> factors) {
  int64_t n = 1;
  for (int64_t f : factors) {
    if (f < 0 || !mul_ok(n, f, &n)) return -1;
  }
  return n;
}

int64_t trailing_numel(const aclTensor* t, int64_t first) {
  const Shape& dims = require(t, "trailing_numel")->view_dims;
  int64_t n = 1;
  for (std::size_t i = first < 0 ? 0 : static_cast<std::size_t>(first); i < dims.size(); ++i)
    if (dims[i] < 0 || !mul_ok(n, dims[i], &n)) return -1;
  return n;
}

bool dims_in_range(const Shape& dims, int64_t rank) {
  const int64_t r = rank > 0 ? rank : 1;
  for (int64_t d : dims) {
    if (d < -r || d >= r) return false;
  }
  return true;
}

bool dims_unique(const Shape& dims, int64_t rank) {
  const int64_t r = rank > 0 ? rank : 1;
  std::vector<bool> seen(static_cast<std::size_t>(r), false);
  for (int64_t d : dims) {
    if (d < -r || d >= r) continue;
    const std::size_t k = static_cast<std::size_t>(d < 0 ? d + r : d);
    if (seen[k]) return false;
    seen[k] = true;
  }
  return true;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const std::size_t lead = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (from[i] != to[lead + i] && from[i] != 1) return false;
  }
  return true;
}

// ---- dtype sets ---------------------------------------------------------------------------------

bool DTypeList::contains(DType t) const {
  return std::find(items, items + count, t) != items + count;
}

std::string DTypeList::names() const {
  if (count == 0) return "none";
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    if (i) out += ", ";
    out += to_string(items[i]);
  }
  return out;
}

// ---- messages -----------------------------------------------------------------------------------

std::string to_string(bool v) { return v ? "true" : "false"; }

std::string to_string(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string to_string(DType t) {
  const char* name = dtype_name(t);
  if (name == nullptr || std::strcmp(name, "unknown") == 0) {
    return "dtype(" + std::to_string(static_cast<int32_t>(t)) + ")";
  }
  return name;
}

std::string to_string(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::string to_string(Product p) { return product_name(p); }

std::string to_string(const char* s) { return s ? s : "(null)"; }

std::string to_string(const std::string& s) { return s; }

std::string count_to_string(int64_t n) {
  return n < 0 ? std::string("more than int64 can count") : std::to_string(n);
}

aclnnStatus reject(aclnnStatus status, const char* op, const std::string& message) {
  return fail(status, "%s: %s", op, message.c_str());
}

// ---- structural checks --------------------------------------------------------------------------

aclnnStatus check_bool_array_size(const char* op, const char* name, const aclBoolArray* flags,
                                  uint64_t size) {
  const uint64_t got = bool_array_size(flags);
  if (got == size) return kSuccess;
  return reject(kParamInvalid, op, std::string(name) + " has " + to_string(got) +
                                       " elements, expected " + to_string(size));
}

aclnnStatus check_int_array_size(const char* op, const char* name, const aclIntArray* a,
                                 int64_t max_size) {
  if (a == nullptr || a->values.size() <= static_cast<std::size_t>(max_size)) return kSuccess;
  return reject(kParamInvalid, op, std::string(name) + " has " + to_string(a->values.size()) +
                                       " integers, more than the supported " + to_string(max_size));
}

aclnnStatus check_layout(const char* op, const char* name, const aclTensor* t) {
  if (t == nullptr) return kSuccess;
  const std::string who(name);
  for (int64_t d : t->view_dims) {
    if (d < 0) return reject(kParamInvalid, op, who + " has a negative dim in shape " + to_string(t->view_dims));
  }
  if (t->strides.size() != t->view_dims.size()) {
    return reject(kParamInvalid, op, who + " has " + to_string(t->strides.size()) + " strides for " +
                                         to_string(t->view_dims.size()) + " dims");
  }
  const int64_t n = safe_numel(t);
  if (n < 0) {
    return reject(kParamInvalid, op, who + " of shape " + to_string(t->view_dims) +
                                         " has more elements than int64 can count");
  }
  const int64_t item = static_cast<int64_t>(dtype_size(t->dtype) ? dtype_size(t->dtype) : 1);
  int64_t bytes = 0;
  if (!mul_ok(n, item, &bytes)) {
    return reject(kParamInvalid, op, who + " of shape " + to_string(t->view_dims) +
                                         " has a byte size that overflows int64");
  }
  if (n == 0) return kSuccess;
  if (t->data == nullptr) {
    return reject(kParamInvalid, op, who + " has " + to_string(n) + " elements but no data address");
  }
  // Farthest element (in elements, either direction) from the data address.
  int64_t reach = abs_or_max(t->offset);
  for (std::size_t i = 0; i < t->view_dims.size(); ++i) {
    int64_t step = 0;
    if (!mul_ok(t->view_dims[i] - 1, abs_or_max(t->strides[i]), &step) || !add_ok(reach, step, &reach)) {
      reach = -1;
      break;
    }
  }
  int64_t reach_bytes = 0;
  if (reach < 0 || !add_ok(reach, 1, &reach) || !mul_ok(reach, item, &reach_bytes)) {
    return reject(kParamInvalid, op, who + ": its offset and strides address bytes beyond the int64 range");
  }
  return kSuccess;
}

aclnnStatus check_max_rank(const char* op, const char* name, const aclTensor* t, int64_t max_rank) {
  if (t == nullptr || rank(t) <= max_rank) return kSuccess;
  return reject(kParamInvalid, op, std::string(name) + " has rank " + to_string(rank(t)) +
                                       ", more than the supported " + to_string(max_rank));
}

bool has_internal_overlap(const aclTensor* t) {
  // Dims that matter (size > 1), sorted by |stride|: the view is free of aliasing when every
  // stride exceeds the farthest offset the smaller dims reach (sufficient, and exact for every
  // layout a reshape/transpose/slice of a dense tensor produces).
  // (|stride|, size) pairs on the stack for the usual ranks: a heap vector was a malloc and a
  // free per output on every call, a few percent of a tiny call.
  using Dim = std::pair<int64_t, int64_t>;
  constexpr std::size_t kInlineDims = 16;
  Dim inline_dims[kInlineDims];
  std::vector<Dim> heap_dims;
  Dim* dims = inline_dims;
  if (t->view_dims.size() > kInlineDims) {
    heap_dims.resize(t->view_dims.size());
    dims = heap_dims.data();
  }
  std::size_t m = 0;
  for (std::size_t i = 0; i < t->view_dims.size(); ++i) {
    if (t->view_dims[i] == 0) return false;  // empty: nothing is written
    if (t->view_dims[i] > 1) dims[m++] = Dim(abs_or_max(t->strides[i]), t->view_dims[i]);
  }
  std::sort(dims, dims + m);
  __int128 reach = 0;
  for (std::size_t k = 0; k < m; ++k) {
    if (dims[k].first == 0 || static_cast<__int128>(dims[k].first) <= reach) return true;
    reach += static_cast<__int128>(dims[k].first) * (dims[k].second - 1);
  }
  return false;
}

bool overlaps(const aclTensor* a, const aclTensor* b) {
  if (a == nullptr || b == nullptr) return false;
  if (safe_numel(a) <= 0 || safe_numel(b) <= 0) return false;
  if (a->data == nullptr || b->data == nullptr) return false;
  const ByteExtent x = byte_extent(a), y = byte_extent(b);
  return x.lo <= y.hi && y.lo <= x.hi;
}

aclnnStatus check_output_writable(const char* op, const char* name, const aclTensor* out) {
  if (out == nullptr) return kSuccess;
  if (tensor_is_read_only(out)) {
    return reject(kParamInvalid, op, std::string(name) + " is read-only and cannot be written");
  }
  if (has_internal_overlap(out)) {
    return reject(kParamInvalid, op, std::string(name) + " of shape " + to_string(out->view_dims) +
                                         " and strides " + to_string(Shape(out->strides.begin(), out->strides.end())) +
                                         " would write some memory locations more than once");
  }
  return kSuccess;
}

aclnnStatus check_aligned(const char* op, const char* name, const aclTensor* t) {
  if (t == nullptr || t->data == nullptr || safe_numel(t) <= 0) return kSuccess;
  const uint64_t size = dtype_size(t->dtype);
  if (size <= 1) return kSuccess;
  const uintptr_t address = reinterpret_cast<uintptr_t>(t->data) + uintptr_t(t->offset) * size;
  if (address % size == 0) return kSuccess;
  return reject(kParamInvalid, op, std::string(name) + "'s data is not aligned to its " + std::to_string(size) +
                                       "-byte elements");
}

aclnnStatus check_no_overlap(const char* op, const char* out_name, const aclTensor* out,
                             const char* other_name, const aclTensor* other) {
  if (!overlaps(out, other)) return kSuccess;
  return reject(kParamInvalid, op, std::string(out_name) + " overlaps " + other_name +
                                       " in memory (outputs must not share memory with inputs "
                                       "or other outputs)");
}

}  // namespace aclnn_cpu
