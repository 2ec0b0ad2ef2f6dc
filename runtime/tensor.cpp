// aclTensor, aclIntArray and aclBoolArray: creation with structural checks, destruction, the
// read-only flag, and the views kernels see.
#include <memory>
#include <new>
#include <vector>

#include "aclnn/aclnn_base.h"
#include "aclnn_cpu/status.h"
#include "aclnn_cpu/tensor.h"

namespace aclnn_cpu {

const char* dtype_name(DType t) {
  for (int i = 0; i < kDTypeCount; ++i)
    if (kDTypes[i] == t) return kDTypeNames[i];
  // Undefined, or a value outside the enum (ACL_STRING, say): still printable.
  return t == DType::Undefined ? "undefined" : "unknown";
}

TensorView make_view(const aclTensor* t) {
  TensorView view;
  if (t == nullptr || t->view_dims.size() > static_cast<size_t>(kMaxDims)) return view;
  view.dtype = t->dtype;
  view.ndim = static_cast<int32_t>(t->view_dims.size());
  for (int32_t i = 0; i < view.ndim; ++i) {
    view.shape[i] = t->view_dims[i];
    view.strides[i] = t->strides[i];
  }
  // Offset arithmetic in bytes on char*: the offset may be negative, and the data of an empty
  // tensor may be null, in which case there is nothing to address.
  if (t->data != nullptr) {
    view.data = static_cast<char*>(t->data) +
                t->offset * static_cast<int64_t>(dtype_size(t->dtype));
  }
  view.present = true;
  return view;
}

bool tensor_is_read_only(const aclTensor* t) { return t != nullptr && t->read_only; }

uint64_t bool_array_size(const aclBoolArray* a) { return a == nullptr ? 0 : a->values.size(); }

bool bool_array_at(const aclBoolArray* a, uint64_t i) {
  return a != nullptr && i < a->values.size() && a->values[i];
}

IntArrayArg make_int_array_arg(const aclIntArray* a) {
  IntArrayArg arg;
  // Validators refuse arrays longer than kMaxIntArray before this runs; a longer one would
  // leave the copy absent rather than overrun it.
  if (a == nullptr || a->values.size() > static_cast<size_t>(kMaxIntArray)) return arg;
  arg.size = static_cast<int64_t>(a->values.size());
  for (int64_t i = 0; i < arg.size; ++i) arg.values[i] = a->values[static_cast<size_t>(i)];
  arg.present = true;
  return arg;
}

}  // namespace aclnn_cpu

namespace {

using aclnn_cpu::fail;
using aclnn_cpu::kParamInvalid;
using aclnn_cpu::kParamNullptr;

// Checks dims for negatives and counts elements without overflowing; false (with the message
// recorded) when the dims are unusable.
bool count_elements(const int64_t* dims, uint64_t n, const char* what, int64_t* count) {
  int64_t total = 1;
  bool overflow = false, has_zero = false;
  for (uint64_t i = 0; i < n; ++i) {
    if (dims[i] < 0) {
      fail(kParamInvalid, "aclCreateTensor: %s[%llu] is %lld; dims must be >= 0", what,
           static_cast<unsigned long long>(i), static_cast<long long>(dims[i]));
      return false;
    }
    if (dims[i] == 0) has_zero = true;
    if (!overflow && __builtin_mul_overflow(total, dims[i], &total)) overflow = true;
  }
  // A zero dim makes the count 0 whatever overflowed before it.
  if (has_zero) {
    *count = 0;
    return true;
  }
  if (overflow) {
    fail(kParamInvalid, "aclCreateTensor: the element count of %s overflows int64", what);
    return false;
  }
  *count = total;
  return true;
}

// aclCreateBoolArray and aclCreateIntArray: a new Array holding a copy of size values (its
// `values` a std::vector of them), or null with the reason recorded: a null value with a size,
// or a size no vector can hold (checked first: value + size could wrap around the address
// space and copy a short array without complaint).
template <class Array, class T>
Array* create_array(const char* fn, const char* items, const T* value, uint64_t size) {
  if (value == nullptr && size > 0) {
    fail(kParamNullptr, "%s: value is null but size is %llu", fn,
         static_cast<unsigned long long>(size));
    return nullptr;
  }
  try {
    auto a = std::make_unique<Array>();  // owned until returned (assign may throw)
    if (size > a->values.max_size()) throw std::bad_alloc();
    a->values.assign(value, value + size);
    return a.release();
  } catch (const std::bad_alloc&) {
    fail(aclnn_cpu::kInner, "%s: out of memory for %llu %s", fn,
         static_cast<unsigned long long>(size), items);
  } catch (...) {
    fail(aclnn_cpu::kInner, "%s: unexpected internal error", fn);
  }
  return nullptr;
}

}  // namespace

extern "C" {

ACLNN_API aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum,
                                     aclDataType dataType, const int64_t* stride, int64_t offset,
                                     aclFormat format, const int64_t* storageDims,
                                     uint64_t storageDimsNum, void* tensorData) {
  if (viewDims == nullptr && viewDimsNum > 0) {
    fail(kParamNullptr, "aclCreateTensor: viewDims is null but viewDimsNum is %llu",
         static_cast<unsigned long long>(viewDimsNum));
    return nullptr;
  }
  if (storageDims == nullptr && storageDimsNum > 0) {
    fail(kParamNullptr, "aclCreateTensor: storageDims is null but storageDimsNum is %llu",
         static_cast<unsigned long long>(storageDimsNum));
    return nullptr;
  }
  // Absurd dim counts are refused before anything is allocated for them.
  constexpr uint64_t kMaxCreateDims = 64;
  if (viewDimsNum > kMaxCreateDims || storageDimsNum > kMaxCreateDims) {
    fail(kParamInvalid, "aclCreateTensor: %llu view dims / %llu storage dims; at most %llu",
         static_cast<unsigned long long>(viewDimsNum),
         static_cast<unsigned long long>(storageDimsNum),
         static_cast<unsigned long long>(kMaxCreateDims));
    return nullptr;
  }
  int64_t numel = 0, storage_numel = 0;
  if (!count_elements(viewDims, viewDimsNum, "viewDims", &numel)) return nullptr;
  if (!count_elements(storageDims, storageDimsNum, "storageDims", &storage_numel)) return nullptr;
  if (tensorData == nullptr && numel > 0) {
    fail(kParamNullptr, "aclCreateTensor: tensorData is null but the tensor has %lld elements",
         static_cast<long long>(numel));
    return nullptr;
  }
  try {
    // Owned until returned: a later allocation that throws must not leak it. Default-initialised
    // (not make_unique's value-initialisation, which zero-fills the inline dims first).
    auto t = std::unique_ptr<aclTensor>(new aclTensor);
    t->view_dims.assign(viewDims, viewDims + viewDimsNum);
    if (stride != nullptr) {
      t->strides.assign(stride, stride + viewDimsNum);
    } else {
      // Row-major contiguous; size-0/1 dims still get the product of the dims after them.
      t->strides.assign(viewDimsNum, 1);
      for (uint64_t i = viewDimsNum; i-- > 1;) {
        int64_t d = viewDims[i] > 0 ? viewDims[i] : 1;
        t->strides[i - 1] = t->strides[i] * d;
      }
    }
    if (storageDimsNum > 0) t->storage_dims.assign(storageDims, storageDims + storageDimsNum);
    t->offset = offset;
    t->dtype = static_cast<aclnn_cpu::DType>(static_cast<int32_t>(dataType));
    t->format = static_cast<int32_t>(format);
    t->data = tensorData;
    return t.release();
  } catch (const std::bad_alloc&) {
    fail(aclnn_cpu::kInner, "aclCreateTensor: out of memory");
  } catch (...) {
    fail(aclnn_cpu::kInner, "aclCreateTensor: unexpected internal error");
  }
  return nullptr;
}

ACLNN_API aclnnStatus aclDestroyTensor(const aclTensor* tensor) {
  delete tensor;
  return ACLNN_SUCCESS;
}

ACLNN_API aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
  return create_array<aclBoolArray>("aclCreateBoolArray", "flags", value, size);
}

ACLNN_API aclnnStatus aclDestroyBoolArray(const aclBoolArray* array) {
  delete array;
  return ACLNN_SUCCESS;
}

ACLNN_API aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
  return create_array<aclIntArray>("aclCreateIntArray", "integers", value, size);
}

ACLNN_API aclnnStatus aclDestroyIntArray(const aclIntArray* array) {
  delete array;
  return ACLNN_SUCCESS;
}

ACLNN_API aclnnStatus aclGetIntArraySize(const aclIntArray* array, uint64_t* size) {
  if (array == nullptr) return fail(kParamNullptr, "aclGetIntArraySize: array is null");
  if (size == nullptr) return fail(kParamNullptr, "aclGetIntArraySize: size is null");
  *size = array->values.size();
  return ACLNN_SUCCESS;
}

ACLNN_API aclnnStatus aclnnCpuSetTensorReadOnly(aclTensor* tensor, bool readOnly) {
  if (tensor == nullptr)
    return fail(kParamNullptr, "aclnnCpuSetTensorReadOnly: tensor is null");
  tensor->read_only = readOnly;
  return ACLNN_SUCCESS;
}

}  // extern "C"
