// The calling thread's error messages: what fail() records, what aclGetRecentErrMsg() returns.
// As CANN documents it, the messages of failed calls pile up until aclGetRecentErrMsg() reads
// them ("gets and clears"; several are returned newest first): a call that succeeds in between
// leaves them, so the usual "fail, clean up, then log" still finds the message. (Each entry
// point used to forget the message on entry, so the clean-up calls wiped it.)
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnn_cpu/status.h"

namespace aclnn_cpu {
namespace {

constexpr size_t kMaxUnread = 32;  // a caller that never reads keeps the newest messages only

// Messages of this thread's failures not read yet, oldest first.
thread_local std::vector<std::string> unread;
thread_local uint64_t failures = 0;
// What the last aclGetRecentErrMsg() handed out: CANN documents that the pointer it returns
// stays valid until the next call on the same thread, so it is kept apart from `unread`.
thread_local std::string handed_out_message;

void record(std::string&& message) {
  try {
    if (unread.size() >= kMaxUnread) unread.erase(unread.begin());
    unread.push_back(std::move(message));
  } catch (...) {
    // Out of memory while recording an error: keep the status, lose the text.
  }
}

}  // namespace

aclnnStatus fail(aclnnStatus status, const char* fmt, ...) {
  ++failures;
  char buffer[1024];
  va_list args;
  va_start(args, fmt);
  int n = std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  try {
    if (n < 0) {
      record("(unformattable error message)");
    } else if (static_cast<size_t>(n) < sizeof buffer) {
      record(std::string(buffer, static_cast<size_t>(n)));
    } else {
      // Too long for the stack buffer: format again into a string of the exact size.
      std::string long_message(static_cast<size_t>(n) + 1, '\0');
      va_start(args, fmt);
      std::vsnprintf(&long_message[0], long_message.size(), fmt, args);
      va_end(args);
      long_message.resize(static_cast<size_t>(n));
      record(std::move(long_message));
    }
  } catch (...) {
  }
  return status;
}

const char* recent_error() { return unread.empty() ? "" : unread.back().c_str(); }

uint64_t failure_count() { return failures; }

}  // namespace aclnn_cpu

// CANN: "gets and clears" the thread's descriptions of failed calls, newest first.
extern "C" ACL_FUNC_VISIBILITY const char* aclGetRecentErrMsg(void) {
  using namespace aclnn_cpu;
  try {
    std::string all;
    for (auto it = unread.rbegin(); it != unread.rend(); ++it) {
      if (!all.empty()) all += '\n';
      all += *it;
    }
    handed_out_message.swap(all);
  } catch (...) {
    handed_out_message.clear();
  }
  unread.clear();
  return handed_out_message.c_str();
}
