// A tiny test harness shared by the C API test programs (tests/c_api/programs/*.cpp).
//
// Each program checks its expectations itself, prints one "FAIL <file>:<line>: ..." line per
// broken expectation and, at the end, "passed N checks" or "FAILED N of M checks"; its exit
// status is the number of failures (capped at 100). The pytest driver (tests/c_api) runs each
// program natively and under valgrind and reads both.
//
// Every object a program creates goes through an owner below, so a leak valgrind reports is a
// leak of the library, not of the test.
#pragma once

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"

namespace harness {

struct Counters {
  int checks = 0;
  int failures = 0;
};

inline Counters& counters() {
  static Counters c;
  return c;
}

inline bool record(bool ok, const char* file, int line, const std::string& what) {
  ++counters().checks;
  if (!ok) {
    ++counters().failures;
    std::printf("FAIL %s:%d: %s\n", file, line, what.c_str());
    std::fflush(stdout);
  }
  return ok;
}

// The exit status of a program: 0 when every check passed.
inline int finish() {
  const Counters& c = counters();
  if (c.failures == 0) {
    std::printf("passed %d checks\n", c.checks);
  } else {
    std::printf("FAILED %d of %d checks\n", c.failures, c.checks);
  }
  return c.failures > 100 ? 100 : c.failures;
}

inline std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string format(const char* fmt, ...) {
  char buffer[2048];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  return buffer;
}

// Reads (and so clears) the calling thread's most recent error message.
inline std::string take_message() {
  const char* m = aclGetRecentErrMsg();
  return m == nullptr ? std::string("<null>") : std::string(m);
}

// Checks a status and the message aclGetRecentErrMsg() holds afterwards: on success it must be
// empty; on failure it must contain every fragment of `fragments` (e.g. the function name and the
// parameter at fault). Returns true when everything held.
inline bool check_status(const char* file, int line, const char* what, int32_t got, int32_t want,
                         std::initializer_list<const char*> fragments) {
  std::string message = take_message();
  bool ok = record(got == want, file, line,
                   format("%s: status %d, expected %d (message: \"%s\")", what, got, want,
                          message.c_str()));
  if (want == 0) {
    ok &= record(message.empty(), file, line,
                 format("%s: succeeded but left the message \"%s\"", what, message.c_str()));
    return ok;
  }
  ok &= record(!message.empty(), file, line, format("%s: failed without a message", what));
  for (const char* fragment : fragments) {
    ok &= record(message.find(fragment) != std::string::npos, file, line,
                 format("%s: message \"%s\" lacks \"%s\"", what, message.c_str(), fragment));
  }
  // The message is handed out once: a second read finds nothing.
  std::string again = take_message();
  ok &= record(again.empty(), file, line,
               format("%s: aclGetRecentErrMsg() returned \"%s\" twice", what, again.c_str()));
  return ok;
}

#define CHECK(cond) ::harness::record((cond), __FILE__, __LINE__, #cond)
#define CHECK_MSG(cond, ...) ::harness::record((cond), __FILE__, __LINE__, ::harness::format(__VA_ARGS__))
// EXPECT_STATUS(expression, expected status, "fragment", ...): the expression is evaluated once.
#define EXPECT_STATUS(expr, want, ...) \
  ::harness::check_status(__FILE__, __LINE__, #expr, static_cast<int32_t>(expr), (want), {__VA_ARGS__})

// ---- owners of library objects ------------------------------------------------------------------

inline size_t itemsize(aclDataType t) {
  switch (t) {
    case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: case ACL_UINT16: return 2;
    case ACL_FLOAT: case ACL_INT32: case ACL_UINT32: return 4;
    case ACL_DOUBLE: case ACL_INT64: case ACL_UINT64: return 8;
    default: return 1;
  }
}

// Host data plus the aclTensor describing it. The storage is filled with a sentinel byte so a
// check can tell whether anything wrote to it.
class Tensor {
 public:
  static constexpr unsigned char kSentinel = 0x5a;

  Tensor() = default;
  // A contiguous tensor of `dims`.
  Tensor(std::vector<int64_t> dims, aclDataType dtype) : Tensor(dims, dtype, {}, 0) {}
  // A strided view: strides (elements; empty = contiguous) and offset (elements) as in
  // aclCreateTensor; the storage is sized to hold every element the view addresses.
  Tensor(std::vector<int64_t> dims, aclDataType dtype, std::vector<int64_t> strides,
         int64_t offset)
      : dims_(std::move(dims)), dtype_(dtype) {
    if (strides.empty()) {
      strides.assign(dims_.size(), 1);
      for (size_t i = dims_.size(); i-- > 1;) strides[i - 1] = strides[i] * (dims_[i] > 0 ? dims_[i] : 1);
    }
    int64_t reach = offset;
    bool empty = false;
    for (size_t i = 0; i < dims_.size(); ++i) {
      if (dims_[i] == 0) empty = true;
      if (dims_[i] > 0) reach += (dims_[i] - 1) * (strides[i] > 0 ? strides[i] : 0);
    }
    size_t elements = empty ? 1 : static_cast<size_t>(reach + 1);
    storage_.assign(elements * itemsize(dtype) + 16, kSentinel);  // a little slack past the end
    tensor_ = aclCreateTensor(dims_.data(), dims_.size(), dtype, strides.data(), offset,
                              ACL_FORMAT_ND, dims_.data(), dims_.size(), storage_.data());
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  Tensor(Tensor&& other) noexcept { *this = std::move(other); }
  Tensor& operator=(Tensor&& other) noexcept {
    std::swap(tensor_, other.tensor_);
    storage_.swap(other.storage_);
    dims_.swap(other.dims_);
    dtype_ = other.dtype_;
    return *this;
  }
  ~Tensor() { aclDestroyTensor(tensor_); }

  aclTensor* get() const { return tensor_; }
  operator aclTensor*() const { return tensor_; }
  unsigned char* bytes() { return storage_.data(); }
  // Every byte still holds the sentinel: nothing wrote to this tensor's memory.
  bool untouched() const {
    for (unsigned char b : storage_) {
      if (b != kSentinel) return false;
    }
    return true;
  }
  // Zeroes the whole storage (inputs whose values do not matter).
  void zero() { std::fill(storage_.begin(), storage_.end(), 0); }
  // Fills the storage with float32 values (contiguous float32 tensors only).
  void fill_f32(const std::vector<float>& values) {
    std::memcpy(storage_.data(), values.data(), values.size() * sizeof(float));
  }
  float f32(size_t i) const {
    float v;
    std::memcpy(&v, storage_.data() + i * sizeof(float), sizeof v);
    return v;
  }

 private:
  std::vector<int64_t> dims_;
  aclDataType dtype_ = ACL_FLOAT;
  std::vector<unsigned char> storage_;
  aclTensor* tensor_ = nullptr;
};

class BoolArray {
 public:
  explicit BoolArray(std::vector<bool> values) {
    bool flags[16] = {};
    for (size_t i = 0; i < values.size() && i < 16; ++i) flags[i] = values[i];
    array_ = aclCreateBoolArray(flags, values.size());
  }
  BoolArray(const BoolArray&) = delete;
  BoolArray& operator=(const BoolArray&) = delete;
  ~BoolArray() { aclDestroyBoolArray(array_); }
  operator aclBoolArray*() const { return array_; }

 private:
  aclBoolArray* array_ = nullptr;
};

// aclrtMalloc'd memory, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t size) {
    if (size > 0 && aclrtMalloc(&ptr_, size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) ptr_ = nullptr;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) aclrtFree(ptr_);
  }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

}  // namespace harness
