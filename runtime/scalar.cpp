// aclScalar: creation (the value converted once to the double operators read), destruction, and
// the kernel-facing copy.
#include <cstring>
#include <memory>
#include <new>

#include "aclnn/aclnn_base.h"
#include "aclnn_cpu/half.h"
#include "aclnn_cpu/status.h"
#include "aclnn_cpu/tensor.h"

namespace aclnn_cpu {

namespace {

// Reads a T from possibly unaligned caller memory.
template <typename T>
T load(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// *value of type t as a double; false for a type a scalar cannot hold (complex, string, unknown).
bool read_scalar(const void* value, DType t, double* out) {
  switch (t) {
    case DType::Float32: *out = load<float>(value); return true;
    case DType::Float64: *out = load<double>(value); return true;
    case DType::Float16: *out = to_float(half_t{load<uint16_t>(value)}); return true;
    case DType::BFloat16: *out = to_float(bfloat16_t{load<uint16_t>(value)}); return true;
    case DType::Int8: *out = load<int8_t>(value); return true;
    case DType::Int16: *out = load<int16_t>(value); return true;
    case DType::Int32: *out = load<int32_t>(value); return true;
    case DType::Int64: *out = static_cast<double>(load<int64_t>(value)); return true;
    case DType::UInt8: *out = load<uint8_t>(value); return true;
    case DType::UInt16: *out = load<uint16_t>(value); return true;
    case DType::UInt32: *out = load<uint32_t>(value); return true;
    case DType::UInt64: *out = static_cast<double>(load<uint64_t>(value)); return true;
    // Any nonzero byte is true, as C++ reads a bool it did not write itself.
    case DType::Bool: *out = load<uint8_t>(value) != 0 ? 1.0 : 0.0; return true;
    default: return false;
  }
}

}  // namespace

ScalarArg make_scalar_arg(const aclScalar* s) {
  ScalarArg arg;
  if (s == nullptr) return arg;
  arg.value = s->value;
  arg.dtype = s->dtype;
  arg.present = true;
  return arg;
}

}  // namespace aclnn_cpu

extern "C" {

ACLNN_API aclScalar* aclCreateScalar(void* value, aclDataType dataType) {
  using aclnn_cpu::fail;
  if (value == nullptr) {
    fail(aclnn_cpu::kParamNullptr, "aclCreateScalar: value is null");
    return nullptr;
  }
  const auto dtype = static_cast<aclnn_cpu::DType>(static_cast<int32_t>(dataType));
  double v = 0.0;
  if (!aclnn_cpu::read_scalar(value, dtype, &v)) {
    fail(aclnn_cpu::kParamInvalid,
         "aclCreateScalar: dataType %d is not a float, integer or bool type a scalar can hold",
         static_cast<int>(dataType));
    return nullptr;
  }
  try {
    auto s = std::make_unique<aclScalar>();
    s->dtype = dtype;
    s->value = v;
    return s.release();
  } catch (const std::bad_alloc&) {
    fail(aclnn_cpu::kInner, "aclCreateScalar: out of memory");
  } catch (...) {
    fail(aclnn_cpu::kInner, "aclCreateScalar: unexpected internal error");
  }
  return nullptr;
}

ACLNN_API aclnnStatus aclDestroyScalar(const aclScalar* scalar) {
  delete scalar;
  return ACLNN_SUCCESS;
}

}  // extern "C"
