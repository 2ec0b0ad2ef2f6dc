// A C++ user's own OpenMP loop calling the library: independent problems (a batch of Softmax
// and GroupNorm backward calls) planned and run from the threads of the user's parallel region,
// which makes every kernel's parallel region a nested one. OpenMP runs those on one thread unless
// the user allows nesting (max-active-levels > 1), when they start teams of their own. Either way
// each result must equal, bit for bit, the same call made alone on the main thread.
// Built with -fopenmp (tests/c_api/conftest.py).
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "aclnnop/aclnn_group_norm_backward.h"
#include "aclnnop/aclnn_softmax_backward.h"
#include "harness.h"

using harness::Tensor;

namespace {

constexpr int kJobs = 12;

// Deterministic values in [-1, 1) (positive with `positive`), different per job.
std::vector<float> values(int64_t n, int job, bool positive) {
  std::vector<float> v(n);
  uint32_t state = 2654435761u * static_cast<uint32_t>(job + 1);
  for (auto& x : v) {
    state = state * 1664525u + 1013904223u;
    const float u = static_cast<float>(state >> 8) / 16777216.0f;
    x = positive ? 0.01f + u : 2.0f * u - 1.0f;
  }
  return v;
}

// Softmax backward of job j ([rows, 1000], dim 1): the output's bytes, or empty on a failure.
std::vector<unsigned char> softmax_job(int j) {
  const int64_t rows = 64 + 16 * j, cols = 1000;
  Tensor g({rows, cols}, ACL_FLOAT), y({rows, cols}, ACL_FLOAT), out({rows, cols}, ACL_FLOAT);
  g.fill_f32(values(rows * cols, j, false));
  y.fill_f32(values(rows * cols, j + 100, true));
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  if (aclnnSoftmaxBackwardGetWorkspaceSize(g, y, 1, out, &ws, &ex) != 0) return {};
  std::vector<unsigned char> workspace(ws);
  if (aclnnSoftmaxBackward(ws ? workspace.data() : nullptr, ws, ex, nullptr) != 0) return {};
  return std::vector<unsigned char>(out.bytes(), out.bytes() + rows * cols * sizeof(float));
}

// GroupNorm backward of job j (N 2, C 64, HxW 1024, 8 groups): dX, dgamma and dbeta's bytes.
std::vector<unsigned char> group_norm_job(int j) {
  const int64_t N = 2, C = 64, HxW = 1024, G = 8;
  Tensor dy({N, C, HxW}, ACL_FLOAT), x({N, C, HxW}, ACL_FLOAT), mean({N, G}, ACL_FLOAT),
      rstd({N, G}, ACL_FLOAT), gamma({C}, ACL_FLOAT), dx({N, C, HxW}, ACL_FLOAT),
      dgamma({C}, ACL_FLOAT), dbeta({C}, ACL_FLOAT);
  dy.fill_f32(values(N * C * HxW, j, false));
  x.fill_f32(values(N * C * HxW, j + 200, false));
  mean.fill_f32(values(N * G, j + 300, false));
  rstd.fill_f32(values(N * G, j + 400, true));
  gamma.fill_f32(values(C, j + 500, false));
  aclBoolArray* mask = nullptr;
  const bool all[3] = {true, true, true};
  mask = aclCreateBoolArray(all, 3);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  const aclnnStatus planned = aclnnGroupNormBackwardGetWorkspaceSize(
      dy, x, mean, rstd, gamma, N, C, HxW, G, mask, dx, dgamma, dbeta, &ws, &ex);
  aclDestroyBoolArray(mask);
  if (planned != 0) return {};
  std::vector<unsigned char> workspace(ws);
  if (aclnnGroupNormBackward(ws ? workspace.data() : nullptr, ws, ex, nullptr) != 0) return {};
  std::vector<unsigned char> bytes(dx.bytes(), dx.bytes() + N * C * HxW * sizeof(float));
  bytes.insert(bytes.end(), dgamma.bytes(), dgamma.bytes() + C * sizeof(float));
  bytes.insert(bytes.end(), dbeta.bytes(), dbeta.bytes() + C * sizeof(float));
  return bytes;
}

std::vector<unsigned char> job(int j) { return j % 2 == 0 ? softmax_job(j) : group_norm_job(j); }

// Runs every job inside the user's parallel loop and compares each with its serial result.
void run_nested(const std::vector<std::vector<unsigned char>>& serial, int levels) {
  omp_set_max_active_levels(levels);
  std::vector<std::vector<unsigned char>> nested(kJobs);
  int inner_threads[kJobs] = {};
#pragma omp parallel for schedule(dynamic) num_threads(3)
  for (int j = 0; j < kJobs; ++j) {
    nested[j] = job(j);
#pragma omp parallel num_threads(2)
#pragma omp single
    inner_threads[j] = omp_get_num_threads();  // what a kernel's region may get here
  }
  for (int j = 0; j < kJobs; ++j) {
    CHECK_MSG(!nested[j].empty(), "max-active-levels %d: job %d failed inside the user's region",
              levels, j);
    CHECK_MSG(nested[j] == serial[j],
              "max-active-levels %d: job %d differs from the same call made alone", levels, j);
  }
  // The premise of each round: without nesting a region inside the user's gets one thread,
  // with it two.
  CHECK_MSG(inner_threads[0] == (levels > 1 ? 2 : 1), "max-active-levels %d: inner team of %d",
            levels, inner_threads[0]);
}

}  // namespace

int main() {
  EXPECT_STATUS(aclInit(nullptr), 0);
  std::vector<std::vector<unsigned char>> serial(kJobs);
  for (int j = 0; j < kJobs; ++j) {
    serial[j] = job(j);
    CHECK_MSG(!serial[j].empty(), "job %d failed on the main thread", j);
  }
  run_nested(serial, 1);  // OpenMP's default: nested regions run on one thread
  run_nested(serial, 2);  // nesting allowed: every kernel starts a team inside the user's
  EXPECT_STATUS(aclFinalize(), 0);
  return harness::finish();
}
