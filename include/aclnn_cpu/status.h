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

// Formats the message into the calling thread's error slot and returns `status`.
aclnnStatus fail(aclnnStatus status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Forgets the calling thread's message (done at the start of every public entry point).
void clear_error();
// The calling thread's current message ("" when none).
const char* recent_error();

}  // namespace aclnn_cpu
