// The C++ layout behind the public opaque handles aclTensor, aclScalar, aclIntArray and
// aclBoolArray (aclnn/aclnn_base.h), and the accessors validators and entry points use. Only the
// runtime creates these objects.
#pragma once
#include <cstdint>
#include <vector>

#include "aclnn/aclnn_base.h"
#include "aclnn_cpu/dim_array.h"
#include "aclnn_cpu/tensor_view.h"

struct aclTensor {
  std::vector<int64_t> view_dims;     // the logical shape (a Shape, as validators read it)
  aclnn_cpu::DimArray strides;        // in elements, one per view dim (filled in when null)
  aclnn_cpu::DimArray storage_dims;   // as given; informational
  int64_t offset = 0;                 // in elements, from data to element [0, ..., 0]
  aclnn_cpu::DType dtype = aclnn_cpu::DType::Undefined;  // any aclDataType value, unchecked
  int32_t format = ACL_FORMAT_ND;     // aclFormat value
  void* data = nullptr;               // null only when the tensor has no elements
  bool read_only = false;             // aclnnCpuSetTensorReadOnly: refuse as an output
};

struct aclBoolArray {
  std::vector<bool> values;
};

struct aclIntArray {
  std::vector<int64_t> values;
};

// The value converted once, at creation, to the double every operator reads (exact for every
// float type and for integers up to 2^53 in magnitude); the dtype is kept for rules on it.
struct aclScalar {
  aclnn_cpu::DType dtype = aclnn_cpu::DType::Undefined;
  double value = 0.0;
};

namespace aclnn_cpu {

// The kernel-facing view of a validated tensor: present = true, data = address of element
// [0, ..., 0] (offset applied), shape and strides copied. Precondition: the tensor has at most
// kMaxDims dims (validators check this first); a tensor with more, or a null tensor, gives an
// absent view (present = false) rather than overrunning the view's arrays.
TensorView make_view(const aclTensor* t);
bool tensor_is_read_only(const aclTensor* t);  // false for null

uint64_t bool_array_size(const aclBoolArray* a);          // 0 for null
bool bool_array_at(const aclBoolArray* a, uint64_t i);    // false when out of range or null

// The kernel-facing copies of a scalar and an integer array (absent for null).
ScalarArg make_scalar_arg(const aclScalar* s);
IntArrayArg make_int_array_arg(const aclIntArray* a);

}  // namespace aclnn_cpu
