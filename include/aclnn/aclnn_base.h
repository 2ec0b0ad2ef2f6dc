/*
 * aclnn/aclnn_base.h: the aclnn basics every operator header includes: status codes, the opaque
 * aclTensor / aclScalar / aclIntArray / aclBoolArray / aclOpExecutor handles and their
 * create/destroy functions, as in Huawei CANN's aclnn API (same names, signatures and values).
 *
 * The sample programs of the operator documents call printf and std::array without including
 * <stdio.h> or <array>; on the NPU those arrive through CANN's headers, so this header includes
 * them too.
 */
#ifndef ACLNN_CPU_ACLNN_ACLNN_BASE_H_
#define ACLNN_CPU_ACLNN_ACLNN_BASE_H_

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
#include <array>
#else
#include <stdbool.h>
#endif

#include "acl/acl.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ACLNN_API
#define ACLNN_API __attribute__((visibility("default")))
#endif

typedef int32_t aclnnStatus;

/* ---- status codes (CANN's aclnn return codes) ---- */
#define ACLNN_SUCCESS 0
#define ACLNN_ERR_PARAM_NULLPTR 161001            /* an illegal null pointer among the parameters */
#define ACLNN_ERR_PARAM_INVALID 161002            /* a parameter breaks the operator's rules */
#define ACLNN_ERR_RUNTIME_ERROR 361001            /* the runtime failed */
#define ACLNN_ERR_INNER 561000                    /* internal error */
#define ACLNN_ERR_INNER_INFERSHAPE_ERROR 561001
#define ACLNN_ERR_INNER_TILING_ERROR 561002
#define ACLNN_ERR_INNER_FIND_KERNEL_ERROR 561003
#define ACLNN_ERR_INNER_CREATE_EXECUTOR 561101
#define ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR 561102
#define ACLNN_ERR_INNER_NULLPTR 561103
#define ACLNN_ERR_INNER_WRONG_ATTR_INFO_SIZE 561104
#define ACLNN_ERR_INNER_KEY_CONFLICT 561105
#define ACLNN_ERR_INNER_INVALID_IMPL_MODE 561106

/* ---- opaque handles ---- */
typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclBoolArray aclBoolArray;
typedef struct aclOpExecutor aclOpExecutor;

/*
 * Describes (does not copy) n-dimensional data. Element [i0, i1, ...] lives at
 *     (char*)tensorData + (offset + i0*stride[0] + i1*stride[1] + ...) * itemsize(dataType)
 * Strides and offset count elements, may be negative or zero; a null stride means row-major
 * contiguous. storageDims describes the allocation (informational on the CPU; may be null when
 * storageDimsNum is 0). The arrays are copied. Returns null (and records the reason for
 * aclGetRecentErrMsg) when viewDims is null with viewDimsNum > 0, a dim is negative, the element
 * count overflows, or tensorData is null while the tensor has elements. The data type is not
 * checked here: each operator rejects the types it does not support.
 */
ACLNN_API aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum,
                                     aclDataType dataType, const int64_t* stride, int64_t offset,
                                     aclFormat format, const int64_t* storageDims,
                                     uint64_t storageDimsNum, void* tensorData);
/* Null is accepted (no-op). */
ACLNN_API aclnnStatus aclDestroyTensor(const aclTensor* tensor);

/*
 * Copies the value *value of type dataType: any float (FLOAT, FLOAT16, BF16, DOUBLE), integer
 * (INT8 ... UINT64) or BOOL. Returns null (and records the reason for aclGetRecentErrMsg) when
 * value is null or dataType is none of those. Operators read the value as a double: exact for
 * every float type and for integers of magnitude up to 2^53.
 */
ACLNN_API aclScalar* aclCreateScalar(void* value, aclDataType dataType);
/* Null is accepted (no-op). */
ACLNN_API aclnnStatus aclDestroyScalar(const aclScalar* scalar);

/* Copies size integers; value may be null only when size is 0. */
ACLNN_API aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size);
ACLNN_API aclnnStatus aclDestroyIntArray(const aclIntArray* array);
/* The number of integers in array. Null array or size: ACLNN_ERR_PARAM_NULLPTR. */
ACLNN_API aclnnStatus aclGetIntArraySize(const aclIntArray* array, uint64_t* size);

/* Copies size flags; value may be null only when size is 0. */
ACLNN_API aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size);
ACLNN_API aclnnStatus aclDestroyBoolArray(const aclBoolArray* array);

/*
 * An executor (from an aclnnXxxGetWorkspaceSize call) is consumed by its aclnnXxx call unless it
 * was made repeatable; a repeatable one lives until aclDestroyAclOpExecutor. Destroying an
 * executor that never ran is allowed. Unknown, destroyed or consumed executors: 161002.
 * Phase 2 (aclnnXxx) refuses, before touching the executor: a null executor (161001), a
 * stream that is neither null nor a live aclrtCreateStream handle (161002), a null workspace
 * with workspaceSize > 0 (161001) and a workspaceSize below what phase 1 asked for (161002); the
 * executor then stays usable. Once the kernel starts, a plain executor is consumed whatever the
 * outcome.
 */
ACLNN_API aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor* executor);
ACLNN_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor);

/*
 * aclnn-cpu extension, not part of CANN: marks a tensor's memory read-only. An operator given a
 * read-only tensor as an output returns ACLNN_ERR_PARAM_INVALID instead of writing to it (the
 * Python binding uses this for non-writeable arrays). Null tensor: ACLNN_ERR_PARAM_NULLPTR.
 */
ACLNN_API aclnnStatus aclnnCpuSetTensorReadOnly(aclTensor* tensor, bool readOnly);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_CPU_ACLNN_ACLNN_BASE_H_ */
