/*
 * acl/acl.h: the subset of Huawei CANN's acl runtime API that aclnn-cpu implements on the host.
 *
 * Names, types and numeric values are those of the real CANN headers, so programs written for
 * the NPU (the aclnn sample programs in particular) compile unchanged. "Device" memory is host
 * memory, device 0 is the only device, and streams run synchronously: work is finished when the
 * call that enqueued it returns.
 *
 * aclInit(configPath) accepts nullptr, "" or the path of a JSON file. Keys other than
 * "aclnn_cpu" are ignored (a real CANN configuration file is accepted as it is). The library's
 * own keys, all optional:
 *
 *     {"aclnn_cpu": {"product": "atlas_a2",   // or "atlas_training", "atlas_inference"
 *                    "num_threads": 4,        // kernel threads, >= 1
 *                    "isa": "avx2"}}          // "baseline", "avx2" or "avx512" (clamped to the CPU)
 *
 * A missing or unreadable file returns ACL_ERROR_INVALID_FILE, text that is not JSON returns
 * ACL_ERROR_PARSE_FILE, a known key with a wrong value returns ACL_ERROR_FILE_ATTR_INVALID.
 * The settings hold until aclFinalize, which restores the values they replaced.
 *
 * Every function that fails records a message that aclGetRecentErrMsg() returns.
 */
#ifndef ACLNN_CPU_ACL_ACL_H_
#define ACLNN_CPU_ACL_ACL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ACL_FUNC_VISIBILITY
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#endif

typedef int aclError;
typedef void* aclrtStream;
typedef void* aclrtContext;
typedef uint16_t aclFloat16;

/* ---- return codes (values of CANN's acl_base.h / acl_rt.h) ---- */
static const int ACL_SUCCESS = 0;
static const int ACL_ERROR_NONE = 0; /* deprecated alias of ACL_SUCCESS */

static const int ACL_ERROR_INVALID_PARAM = 100000;
static const int ACL_ERROR_UNINITIALIZE = 100001;
static const int ACL_ERROR_REPEAT_INITIALIZE = 100002;
static const int ACL_ERROR_INVALID_FILE = 100003;
static const int ACL_ERROR_WRITE_FILE = 100004;
static const int ACL_ERROR_INVALID_FILE_SIZE = 100005;
static const int ACL_ERROR_PARSE_FILE = 100006;
static const int ACL_ERROR_FILE_MISSING_ATTR = 100007;
static const int ACL_ERROR_FILE_ATTR_INVALID = 100008;
static const int ACL_ERROR_UNSUPPORTED_DATA_TYPE = 100026;
static const int ACL_ERROR_FORMAT_NOT_MATCH = 100027;
static const int ACL_ERROR_REPEAT_FINALIZE = 100037;

static const int ACL_ERROR_BAD_ALLOC = 200000;
static const int ACL_ERROR_API_NOT_SUPPORT = 200001;
static const int ACL_ERROR_INVALID_DEVICE = 200002;
static const int ACL_ERROR_MEMORY_ADDRESS_UNALIGNED = 200003;
static const int ACL_ERROR_RESOURCE_NOT_MATCH = 200004;
static const int ACL_ERROR_INVALID_RESOURCE_HANDLE = 200005;
static const int ACL_ERROR_FEATURE_UNSUPPORTED = 200006;

static const int ACL_ERROR_STORAGE_OVER_LIMIT = 300000;

static const int ACL_ERROR_INTERNAL_ERROR = 500000;
static const int ACL_ERROR_FAILURE = 500001;
static const int ACL_ERROR_RT_FAILURE = 500003;

/* runtime codes passed through by acl (CANN's rt_error_codes.h) */
static const int32_t ACL_ERROR_RT_PARAM_INVALID = 107000;
static const int32_t ACL_ERROR_RT_INVALID_DEVICEID = 107001;
static const int32_t ACL_ERROR_RT_CONTEXT_NULL = 107002;
static const int32_t ACL_ERROR_RT_STREAM_CONTEXT = 107003;
static const int32_t ACL_ERROR_RT_INVALID_MEMORY_TYPE = 107016;
static const int32_t ACL_ERROR_RT_INVALID_HANDLE = 107017;
static const int32_t ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000;
static const int32_t ACL_ERROR_RT_MEMORY_ALLOCATION = 207001;
static const int32_t ACL_ERROR_RT_MEMORY_FREE = 207002;
static const int32_t ACL_ERROR_RT_INTERNAL_ERROR = 507000;

/* ---- enums (values of CANN's acl_base.h / acl_rt.h) ---- */
#include "acl/acl_data_type.h" /* aclDataType, generated from registry/aclnn_gen/vocabulary.py */

typedef enum {
  ACL_FORMAT_UNDEFINED = -1,
  ACL_FORMAT_NCHW = 0,
  ACL_FORMAT_NHWC = 1,
  ACL_FORMAT_ND = 2,
  ACL_FORMAT_NC1HWC0 = 3,
  ACL_FORMAT_FRACTAL_Z = 4,
  ACL_FORMAT_NC1HWC0_C04 = 12,
  ACL_FORMAT_HWCN = 16,
  ACL_FORMAT_NDHWC = 27,
  ACL_FORMAT_FRACTAL_NZ = 29,
  ACL_FORMAT_NCDHW = 30,
  ACL_FORMAT_NDC1HWC0 = 32,
  ACL_FRACTAL_Z_3D = 33,
  ACL_FORMAT_NC = 35,
  ACL_FORMAT_NCL = 47
} aclFormat;

/* Every policy is accepted; all of them allocate ordinary host memory aligned to 64 bytes. */
typedef enum aclrtMemMallocPolicy {
  ACL_MEM_MALLOC_HUGE_FIRST = 0,
  ACL_MEM_MALLOC_HUGE_ONLY = 1,
  ACL_MEM_MALLOC_NORMAL_ONLY = 2,
  ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3,
  ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4,
  ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5,
  ACL_MEM_MALLOC_HUGE1G_ONLY = 6,
  ACL_MEM_MALLOC_HUGE1G_ONLY_P2P = 7,
  ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100,
  ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000,
  ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000
} aclrtMemMallocPolicy;

/* Every kind copies host memory to host memory. */
typedef enum aclrtMemcpyKind {
  ACL_MEMCPY_HOST_TO_HOST = 0,
  ACL_MEMCPY_HOST_TO_DEVICE = 1,
  ACL_MEMCPY_DEVICE_TO_HOST = 2,
  ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
  ACL_MEMCPY_DEFAULT = 4
} aclrtMemcpyKind;

/* ---- initialisation ---- */
/* Once per process; a second call before aclFinalize returns ACL_ERROR_REPEAT_INITIALIZE. */
ACL_FUNC_VISIBILITY aclError aclInit(const char* configPath);
/* ACL_ERROR_REPEAT_FINALIZE when not initialised. */
ACL_FUNC_VISIBILITY aclError aclFinalize(void);

/* ---- devices: only device 0 exists (others: ACL_ERROR_RT_INVALID_DEVICEID) ---- */
ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t* deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t* count);
/* The SoC of the emulated product line, e.g. "Ascend910B1" (never null). */
ACL_FUNC_VISIBILITY const char* aclrtGetSocName(void);

/* ---- contexts (per thread current context; aclrtSetDevice makes the default one current) ---- */
ACL_FUNC_VISIBILITY aclError aclrtCreateContext(aclrtContext* context, int32_t deviceId);
ACL_FUNC_VISIBILITY aclError aclrtDestroyContext(aclrtContext context);
ACL_FUNC_VISIBILITY aclError aclrtSetCurrentContext(aclrtContext context);
ACL_FUNC_VISIBILITY aclError aclrtGetCurrentContext(aclrtContext* context);

/* ---- streams: synchronous; a null stream is the default stream ---- */
ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream* stream);
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);

/* ---- memory: host memory standing in for device memory ---- */
ACL_FUNC_VISIBILITY aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy);
/* Only pointers returned by aclrtMalloc; others (and double frees) return ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclrtFree(void* devPtr);
ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void** hostPtr, size_t size);
ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void* hostPtr);
/* count > destMax, a null dst or src, or an unknown kind: ACL_ERROR_INVALID_PARAM (nothing is
 * copied). Overlapping ranges are allowed (memmove). */
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                                         aclrtMemcpyKind kind);
ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src,
                                              size_t count, aclrtMemcpyKind kind,
                                              aclrtStream stream);
/* Sets count bytes to (unsigned char)value; count > maxCount: ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count);
ACL_FUNC_VISIBILITY aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value,
                                              size_t count, aclrtStream stream);

/* ---- errors ---- */
/* Returns and clears the calling thread's messages of failed acl and aclnn calls not read yet,
 * one a line, newest first (calls that succeed in between leave them; at most the newest 32
 * are kept). Never null: "" when there is none. The pointer stays valid until the thread's next
 * aclGetRecentErrMsg() call. */
ACL_FUNC_VISIBILITY const char* aclGetRecentErrMsg(void);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_CPU_ACL_ACL_H_ */
