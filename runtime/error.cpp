// The calling thread's error message: what fail() records, what aclGetRecentErrMsg() returns.
#include <cstdarg>
#include <cstdio>
#include <string>

#include "acl/acl.h"
#include "aclnn_cpu/status.h"

namespace aclnn_cpu {
namespace {

// The message of the most recent failure on this thread ("" when none).
thread_local std::string current_message;
// What the last aclGetRecentErrMsg() handed out: CANN documents that the pointer it returns
// stays valid until the next call on the same thread, so it is kept apart from current_message.
thread_local std::string handed_out_message;

}  // namespace

aclnnStatus fail(aclnnStatus status, const char* fmt, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, fmt);
  int n = std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  try {
    if (n < 0) {
      current_message = "(unformattable error message)";
    } else if (static_cast<size_t>(n) < sizeof buffer) {
      current_message.assign(buffer, static_cast<size_t>(n));
    } else {
      // Too long for the stack buffer: format again into a string of the exact size.
      std::string long_message(static_cast<size_t>(n) + 1, '\0');
      va_start(args, fmt);
      std::vsnprintf(&long_message[0], long_message.size(), fmt, args);
      va_end(args);
      long_message.resize(static_cast<size_t>(n));
      current_message.swap(long_message);
    }
  } catch (...) {
    // Out of memory while recording an error: keep the status, lose the text.
    current_message.clear();
  }
  return status;
}

void clear_error() { current_message.clear(); }

const char* recent_error() { return current_message.c_str(); }

}  // namespace aclnn_cpu

// CANN: "gets and clears" the thread's most recent error description.
extern "C" ACL_FUNC_VISIBILITY const char* aclGetRecentErrMsg(void) {
  using namespace aclnn_cpu;
  handed_out_message.swap(current_message);
  current_message.clear();
  return handed_out_message.c_str();
}
