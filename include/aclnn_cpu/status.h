// Status codes (values of the real aclnn / acl APIs) and the thread-local error message that
// aclGetRecentErrMsg() returns. Every failing path records a message through fail().
#pragma once
#include <cstdint>

typedef int32_t aclnnStatus;

namespace aclnn_cpu {

constexpr aclnnStatus kSuccess = 0;
constexpr aclnnStatus kParamNullptr = 161001;   // ACLNN_ERR_PARAM_NULLPTR
constexpr aclnnStatus kParamInvalid = 161002;   // ACLNN_ERR_PARAM_INVALID
constexpr aclnnStatus kRuntimeError = 361001;   // ACLNN_ERR_RUNTIME_ERROR
constexpr aclnnStatus kInner = 561000;          // ACLNN_ERR_INNER
constexpr aclnnStatus kInnerNullptr = 561103;   // ACLNN_ERR_INNER_NULLPTR

// Records the message of a failure for the calling thread and returns `status`. Messages pile
// up until aclGetRecentErrMsg() reads them (as CANN's do): a call that succeeds leaves them.
aclnnStatus fail(aclnnStatus status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// The calling thread's newest unread message ("" when none).
const char* recent_error();
// Failures recorded on the calling thread so far (did a call in between record one?).
uint64_t failure_count();

}  // namespace aclnn_cpu
