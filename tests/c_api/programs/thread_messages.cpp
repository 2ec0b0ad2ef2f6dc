// aclGetRecentErrMsg() is per thread: two threads fail different calls at the same time, wait
// for each other, and each reads back its own message (and not the other's); the main thread,
// which failed nothing, reads nothing; a success in between leaves a thread's unread message.
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "aclnnop/aclnn_prelu_backward.h"
#include "aclnnop/aclnn_softmax_backward.h"
#include "harness.h"

using harness::Tensor;

namespace {

// Blocks until `count` threads arrived (C++17 has no std::barrier).
class Rendezvous {
 public:
  explicit Rendezvous(int count) : waiting_(count) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (--waiting_ == 0) {
      cv_.notify_all();
    } else {
      cv_.wait(lock, [this] { return waiting_ == 0; });
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int waiting_;
};

struct ThreadReport {
  aclnnStatus status = -1;
  std::string message, second_read, after_success;
};

}  // namespace

int main() {
  EXPECT_STATUS(aclInit(nullptr), 0);
  Rendezvous failed(2), read(2);
  ThreadReport softmax_report, prelu_report;

  std::thread softmax_thread([&] {
    Tensor g({2, 3}, ACL_FLOAT), y({2, 3}, ACL_FLOAT), out({2, 3}, ACL_FLOAT);
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    softmax_report.status = aclnnSoftmaxBackwardGetWorkspaceSize(g, y, 7, out, &ws, &ex);
    failed.arrive_and_wait();   // both threads hold a message now
    softmax_report.message = aclGetRecentErrMsg();
    softmax_report.second_read = aclGetRecentErrMsg();
    read.arrive_and_wait();
  });
  std::thread prelu_thread([&] {
    Tensor g({2, 3}, ACL_FLOAT), w({3}, ACL_FLOAT), gi({2, 3}, ACL_FLOAT), gw({3}, ACL_FLOAT);
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    prelu_report.status = aclnnPreluBackwardGetWorkspaceSize(g, nullptr, w, gi, gw, &ws, &ex);
    failed.arrive_and_wait();
    // Fail again on this thread, then succeed: the success leaves this thread's unread message
    // (messages pile up until read, as CANN's do), which the next read hands out.
    prelu_report.message = aclGetRecentErrMsg();
    prelu_report.second_read = aclGetRecentErrMsg();
    aclrtSetDevice(9);
    uint32_t count = 0;
    aclrtGetDeviceCount(&count);
    prelu_report.after_success = aclGetRecentErrMsg();
    read.arrive_and_wait();
  });
  softmax_thread.join();
  prelu_thread.join();

  CHECK(softmax_report.status == ACLNN_ERR_PARAM_INVALID);
  CHECK_MSG(softmax_report.message.find("aclnnSoftmaxBackward") != std::string::npos &&
                softmax_report.message.find("dim") != std::string::npos,
            "softmax thread read \"%s\"", softmax_report.message.c_str());
  CHECK(softmax_report.message.find("Prelu") == std::string::npos);
  CHECK(softmax_report.second_read.empty());

  CHECK(prelu_report.status == ACLNN_ERR_PARAM_NULLPTR);
  CHECK_MSG(prelu_report.message.find("aclnnPreluBackward") != std::string::npos &&
                prelu_report.message.find("self") != std::string::npos,
            "prelu thread read \"%s\"", prelu_report.message.c_str());
  CHECK(prelu_report.message.find("Softmax") == std::string::npos);
  CHECK(prelu_report.second_read.empty());
  CHECK_MSG(prelu_report.after_success.find("device 9") != std::string::npos &&
                prelu_report.after_success.find("Prelu") == std::string::npos,
            "after a success: \"%s\"", prelu_report.after_success.c_str());

  // The main thread failed nothing.
  CHECK(std::string(aclGetRecentErrMsg()).empty());
  // A failure on the main thread is seen by the main thread only, even while workers fail.
  CHECK(aclrtSetDevice(4) == ACL_ERROR_RT_INVALID_DEVICEID);
  std::string worker_saw;
  std::thread worker([&] { worker_saw = aclGetRecentErrMsg(); });
  worker.join();
  CHECK(worker_saw.empty());
  CHECK(std::string(aclGetRecentErrMsg()).find("aclrtSetDevice") != std::string::npos);

  EXPECT_STATUS(aclFinalize(), 0);
  return harness::finish();
}
