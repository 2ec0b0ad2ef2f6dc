// Executor lifecycle and phase 2 through the C API: a plain executor is consumed by its run; a
// repeatable one runs many times (seeing new input data each time) until
// aclDestroyAclOpExecutor; consumed, destroyed, foreign and null executors are refused with a
// status and a message, never a crash; workspace checks (size, alignment) and misaligned data;
// an executor outlives the aclTensors it
// was planned with; a bad stream is refused without consuming the executor; repeatable executors
// run in two threads at once.
#include <cmath>
#include <thread>
#include <vector>

#include "aclnnop/aclnn_group_norm_backward.h"
#include "aclnnop/aclnn_grid_sampler2d_backward.h"
#include "aclnnop/aclnn_prelu_backward.h"
#include "aclnnop/aclnn_softmax_backward.h"
#include "harness.h"

using harness::Tensor;

namespace {

constexpr int kRows = 4, kCols = 3;

// Softmax backward along dim 1 of [kRows, kCols] float32 data, in double.
std::vector<double> softmax_backward_reference(const std::vector<float>& g, const std::vector<float>& y) {
  std::vector<double> out(g.size());
  for (int r = 0; r < kRows; ++r) {
    double s = 0;
    for (int c = 0; c < kCols; ++c) s += double(g[r * kCols + c]) * y[r * kCols + c];
    for (int c = 0; c < kCols; ++c) out[r * kCols + c] = y[r * kCols + c] * (g[r * kCols + c] - s);
  }
  return out;
}

// GroupNorm backward N=2, C=64, HxW=16, group=8 in float16, planned (a plan that asks for a
// workspace).
struct GroupNormProblem {
  static constexpr int64_t N = 2, C = 64, HxW = 16, G = 8;
  Tensor dy{{N, C, HxW}, ACL_FLOAT16}, x{{N, C, HxW}, ACL_FLOAT16}, mean{{N, G}, ACL_FLOAT16},
      rstd{{N, G}, ACL_FLOAT16}, gamma{{C}, ACL_FLOAT16}, gi{{N, C, HxW}, ACL_FLOAT16},
      gg{{C}, ACL_FLOAT16}, gb{{C}, ACL_FLOAT16};
  harness::BoolArray mask{{true, true, true}};
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;

  GroupNormProblem() {
    EXPECT_STATUS(aclnnGroupNormBackwardGetWorkspaceSize(dy, x, mean, rstd, gamma, N, C, HxW, G,
                                                          mask, gi, gg, gb, &ws, &ex), 0);
  }
  bool outputs_untouched() const { return gi.untouched() && gg.untouched() && gb.untouched(); }
};

// One softmax backward problem: float32 [kRows, kCols] tensors over host memory.
struct SoftmaxProblem {
  Tensor grad{{kRows, kCols}, ACL_FLOAT};
  Tensor output{{kRows, kCols}, ACL_FLOAT};
  Tensor out{{kRows, kCols}, ACL_FLOAT};
  std::vector<float> g, y;

  explicit SoftmaxProblem(float scale) {
    for (int i = 0; i < kRows * kCols; ++i) {
      g.push_back(scale * static_cast<float>((i % 5) - 2));
      y.push_back(0.125f * static_cast<float>(1 + i % 4));
    }
    grad.fill_f32(g);
    output.fill_f32(y);
  }
  void set_grad(float scale) {
    for (int i = 0; i < kRows * kCols; ++i) g[i] = scale * static_cast<float>((i % 7) - 3);
    grad.fill_f32(g);
  }
  aclnnStatus plan(uint64_t* ws, aclOpExecutor** ex) {
    return aclnnSoftmaxBackwardGetWorkspaceSize(grad, output, 1, out, ws, ex);
  }
  // The out tensor holds the reference values (fp32 rounding and a 3-term sum).
  bool out_is_right() const {
    std::vector<double> want = softmax_backward_reference(g, y);
    for (int i = 0; i < kRows * kCols; ++i) {
      double bound = 1e-6 * (1 + std::fabs(want[i]));
      if (!(std::fabs(out.f32(i) - want[i]) <= bound)) {
        std::printf("  out[%d] = %.9g, expected %.9g\n", i, out.f32(i), want[i]);
        return false;
      }
    }
    return true;
  }
};

void plain_executor_is_consumed() {
  SoftmaxProblem p(1.0f);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  EXPECT_STATUS(p.plan(&ws, &ex), 0);
  CHECK(ex != nullptr);
  harness::DeviceBuffer workspace(ws);
  EXPECT_STATUS(aclnnSoftmaxBackward(workspace.get(), ws, ex, nullptr), 0);
  CHECK(p.out_is_right());
  // Run twice: the first run consumed it.
  EXPECT_STATUS(aclnnSoftmaxBackward(workspace.get(), ws, ex, nullptr), ACLNN_ERR_PARAM_INVALID,
                "aclnnSoftmaxBackward", "executor");
  EXPECT_STATUS(aclSetAclOpExecutorRepeatable(ex), ACLNN_ERR_PARAM_INVALID,
                "aclSetAclOpExecutorRepeatable", "executor");
  EXPECT_STATUS(aclDestroyAclOpExecutor(ex), ACLNN_ERR_PARAM_INVALID, "aclDestroyAclOpExecutor",
                "executor");
}

void repeatable_executor_runs_until_destroyed() {
  SoftmaxProblem p(1.0f);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  EXPECT_STATUS(p.plan(&ws, &ex), 0);
  EXPECT_STATUS(aclSetAclOpExecutorRepeatable(ex), 0);
  EXPECT_STATUS(aclSetAclOpExecutorRepeatable(ex), 0);  // idempotent
  harness::DeviceBuffer workspace(ws);
  aclrtStream stream = nullptr;
  EXPECT_STATUS(aclrtCreateStream(&stream), 0);
  for (int run = 0; run < 6; ++run) {
    // New data in the same memory: the executor reads it at run time.
    p.set_grad(0.5f + static_cast<float>(run));
    EXPECT_STATUS(aclnnSoftmaxBackward(workspace.get(), ws, ex, stream), 0);
    EXPECT_STATUS(aclrtSynchronizeStream(stream), 0);
    CHECK_MSG(p.out_is_right(), "repeatable run %d", run + 1);
  }
  EXPECT_STATUS(aclDestroyAclOpExecutor(ex), 0);
  EXPECT_STATUS(aclnnSoftmaxBackward(workspace.get(), ws, ex, stream), ACLNN_ERR_PARAM_INVALID,
                "aclnnSoftmaxBackward", "executor");
  EXPECT_STATUS(aclDestroyAclOpExecutor(ex), ACLNN_ERR_PARAM_INVALID, "aclDestroyAclOpExecutor");
  EXPECT_STATUS(aclrtDestroyStream(stream), 0);
}

void unrun_executor_can_be_destroyed() {
  SoftmaxProblem p(1.0f);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  EXPECT_STATUS(p.plan(&ws, &ex), 0);
  EXPECT_STATUS(aclDestroyAclOpExecutor(ex), 0);
  CHECK(p.out.untouched());
  EXPECT_STATUS(aclnnSoftmaxBackward(nullptr, 0, ex, nullptr), ACLNN_ERR_PARAM_INVALID,
                "aclnnSoftmaxBackward");
  CHECK(p.out.untouched());
}

void null_and_foreign_executors() {
  EXPECT_STATUS(aclnnSoftmaxBackward(nullptr, 0, nullptr, nullptr), ACLNN_ERR_PARAM_NULLPTR,
                "aclnnSoftmaxBackward", "executor");
  EXPECT_STATUS(aclnnPreluBackward(nullptr, 0, nullptr, nullptr), ACLNN_ERR_PARAM_NULLPTR,
                "aclnnPreluBackward", "executor");
  EXPECT_STATUS(aclnnGroupNormBackward(nullptr, 0, nullptr, nullptr), ACLNN_ERR_PARAM_NULLPTR,
                "aclnnGroupNormBackward", "executor");
  EXPECT_STATUS(aclnnGridSampler2DBackward(nullptr, 0, nullptr, nullptr), ACLNN_ERR_PARAM_NULLPTR,
                "aclnnGridSampler2DBackward", "executor");
  EXPECT_STATUS(aclSetAclOpExecutorRepeatable(nullptr), ACLNN_ERR_PARAM_NULLPTR,
                "aclSetAclOpExecutorRepeatable");
  EXPECT_STATUS(aclDestroyAclOpExecutor(nullptr), ACLNN_ERR_PARAM_NULLPTR, "aclDestroyAclOpExecutor");

  // An address that never was an executor: refused without being dereferenced.
  alignas(64) unsigned char not_an_executor[256] = {};
  auto* fake = reinterpret_cast<aclOpExecutor*>(not_an_executor);
  EXPECT_STATUS(aclnnSoftmaxBackward(nullptr, 0, fake, nullptr), ACLNN_ERR_PARAM_INVALID,
                "aclnnSoftmaxBackward");
  EXPECT_STATUS(aclSetAclOpExecutorRepeatable(fake), ACLNN_ERR_PARAM_INVALID,
                "aclSetAclOpExecutorRepeatable");
  EXPECT_STATUS(aclDestroyAclOpExecutor(fake), ACLNN_ERR_PARAM_INVALID, "aclDestroyAclOpExecutor");

  // Another op's executor: refused, and still usable by its own op afterwards.
  SoftmaxProblem p(1.0f);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  EXPECT_STATUS(p.plan(&ws, &ex), 0);
  harness::DeviceBuffer workspace(ws);
  EXPECT_STATUS(aclnnPreluBackward(workspace.get(), ws, ex, nullptr), ACLNN_ERR_PARAM_INVALID,
                "aclnnPreluBackward", "aclnnSoftmaxBackward");
  EXPECT_STATUS(aclnnGridSampler2DBackward(workspace.get(), ws, ex, nullptr),
                ACLNN_ERR_PARAM_INVALID, "aclnnGridSampler2DBackward");
  CHECK(p.out.untouched());
  EXPECT_STATUS(aclnnSoftmaxBackward(workspace.get(), ws, ex, nullptr), 0);
  CHECK(p.out_is_right());
}

void workspace_checks() {
  // A null workspace with a non-zero size: 161001 whatever the op asked for. The check comes
  // before the run, so neither a plain nor a repeatable executor is consumed by it.
  {
    SoftmaxProblem p(1.0f);
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    EXPECT_STATUS(p.plan(&ws, &ex), 0);
    EXPECT_STATUS(aclnnSoftmaxBackward(nullptr, ws + 64, ex, nullptr), ACLNN_ERR_PARAM_NULLPTR,
                  "aclnnSoftmaxBackward", "workspace");
    CHECK(p.out.untouched());
    harness::DeviceBuffer workspace(ws);
    EXPECT_STATUS(aclnnSoftmaxBackward(workspace.get(), ws, ex, nullptr), 0);  // still usable
    CHECK(p.out_is_right());
    EXPECT_STATUS(aclDestroyAclOpExecutor(ex), ACLNN_ERR_PARAM_INVALID, "aclDestroyAclOpExecutor");
  }
  {
    SoftmaxProblem p(1.0f);
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    EXPECT_STATUS(p.plan(&ws, &ex), 0);
    EXPECT_STATUS(aclSetAclOpExecutorRepeatable(ex), 0);
    EXPECT_STATUS(aclnnSoftmaxBackward(nullptr, ws + 64, ex, nullptr), ACLNN_ERR_PARAM_NULLPTR,
                  "aclnnSoftmaxBackward", "workspace");
    CHECK(p.out.untouched());
    harness::DeviceBuffer workspace(ws);
    EXPECT_STATUS(aclnnSoftmaxBackward(workspace.get(), ws, ex, nullptr), 0);  // still usable
    CHECK(p.out_is_right());
    EXPECT_STATUS(aclDestroyAclOpExecutor(ex), 0);
  }
  // A larger workspace than asked for is fine.
  {
    SoftmaxProblem p(2.0f);
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    EXPECT_STATUS(p.plan(&ws, &ex), 0);
    harness::DeviceBuffer workspace(ws + 4096);
    EXPECT_STATUS(aclnnSoftmaxBackward(workspace.get(), ws + 4096, ex, nullptr), 0);
    CHECK(p.out_is_right());
  }
}

// Too small a workspace needs an op that asks for one: GroupNorm backward over many channels and
// grid sampler backward are the candidates; every op whose plan asks for bytes is tried.
void too_small_workspace() {
  int tried = 0;
  {
    GroupNormProblem p;
    if (p.ws > 0) {
      ++tried;
      harness::DeviceBuffer workspace(p.ws);
      EXPECT_STATUS(aclSetAclOpExecutorRepeatable(p.ex), 0);
      EXPECT_STATUS(aclnnGroupNormBackward(workspace.get(), p.ws - 1, p.ex, nullptr),
                    ACLNN_ERR_PARAM_INVALID, "aclnnGroupNormBackward", "workspace");
      CHECK(p.outputs_untouched());
    }
    EXPECT_STATUS(aclDestroyAclOpExecutor(p.ex), 0);
  }
  // Grid sampler backward, bilinear, float16 (accumulation of inputGrad may need scratch).
  {
    const int64_t N = 2, C = 8, H = 16, W = 16, Ho = 8, Wo = 8;
    Tensor go({N, C, Ho, Wo}, ACL_FLOAT16), in({N, C, H, W}, ACL_FLOAT16), grid({N, Ho, Wo, 2}, ACL_FLOAT16),
        ig({N, C, H, W}, ACL_FLOAT16), gg({N, Ho, Wo, 2}, ACL_FLOAT16);
    harness::BoolArray mask({true, true});
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    EXPECT_STATUS(aclnnGridSampler2DBackwardGetWorkspaceSize(go, in, grid, 0, 0, false, mask, ig,
                                                              gg, &ws, &ex), 0);
    if (ws > 0) {
      ++tried;
      harness::DeviceBuffer workspace(ws);
      EXPECT_STATUS(aclSetAclOpExecutorRepeatable(ex), 0);
      EXPECT_STATUS(aclnnGridSampler2DBackward(workspace.get(), ws / 2, ex, nullptr),
                    ACLNN_ERR_PARAM_INVALID, "aclnnGridSampler2DBackward", "workspace");
      CHECK(ig.untouched() && gg.untouched());
    }
    EXPECT_STATUS(aclDestroyAclOpExecutor(ex), 0);
  }
  std::printf("too-small workspace checked on %d op(s)\n", tried);
  CHECK_MSG(tried > 0, "no op asked for a workspace: add a case whose plan needs one");
}

// Kernels load whole elements and keep floats and vectors in the workspace: data that does not
// sit on its element size, or a workspace off a 16-byte boundary, is refused (161002) and
// nothing is written; the same executor then runs with an aligned workspace.
void misaligned_data_and_workspace() {
  GroupNormProblem p;
  CHECK_MSG(p.ws > 0, "GroupNorm asked for no workspace: pick a case that needs one");
  harness::DeviceBuffer workspace(p.ws + 16);
  EXPECT_STATUS(aclSetAclOpExecutorRepeatable(p.ex), 0);
  for (int shift : {1, 4, 8}) {
    EXPECT_STATUS(aclnnGroupNormBackward(static_cast<char*>(workspace.get()) + shift, p.ws, p.ex, nullptr),
                  ACLNN_ERR_PARAM_INVALID, "aclnnGroupNormBackward", "16-byte aligned");
    CHECK(p.outputs_untouched());
  }
  EXPECT_STATUS(aclnnGroupNormBackward(workspace.get(), p.ws, p.ex, nullptr), 0);
  EXPECT_STATUS(aclDestroyAclOpExecutor(p.ex), 0);

  // float32 data one and two bytes past an element boundary; an element offset is fine.
  std::vector<float> storage(kRows * kCols + 2, 0.5f);
  const int64_t shape[2] = {kRows, kCols}, strides[2] = {kCols, 1};
  Tensor output({kRows, kCols}, ACL_FLOAT), out({kRows, kCols}, ACL_FLOAT);
  for (int shift : {1, 2, 0}) {
    aclTensor* grad = aclCreateTensor(shape, 2, ACL_FLOAT, strides, shift == 0 ? 1 : 0, ACL_FORMAT_ND,
                                      shape, 2, reinterpret_cast<char*>(storage.data()) + shift);
    CHECK(grad != nullptr);
    aclOpExecutor* sx = nullptr;
    uint64_t sws = 0;
    if (shift == 0) {
      EXPECT_STATUS(aclnnSoftmaxBackwardGetWorkspaceSize(grad, output, 1, out, &sws, &sx), 0);
      harness::DeviceBuffer sw(sws);
      EXPECT_STATUS(aclnnSoftmaxBackward(sw.get(), sws, sx, nullptr), 0);
    } else {
      EXPECT_STATUS(aclnnSoftmaxBackwardGetWorkspaceSize(grad, output, 1, out, &sws, &sx),
                    ACLNN_ERR_PARAM_INVALID, "aclnnSoftmaxBackward", "gradOutput", "aligned");
      CHECK(sx == nullptr && out.untouched());
    }
    EXPECT_STATUS(aclDestroyTensor(grad), 0);
  }
}

// A stream that is not null and not live is refused before the executor is touched.
void bad_streams() {
  SoftmaxProblem p(1.0f);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  EXPECT_STATUS(p.plan(&ws, &ex), 0);
  harness::DeviceBuffer workspace(ws);
  aclrtStream stream = nullptr;
  EXPECT_STATUS(aclrtCreateStream(&stream), 0);
  EXPECT_STATUS(aclrtDestroyStream(stream), 0);
  EXPECT_STATUS(aclnnSoftmaxBackward(workspace.get(), ws, ex, stream), ACLNN_ERR_PARAM_INVALID,
                "aclnnSoftmaxBackward", "stream");
  int not_a_stream = 0;
  EXPECT_STATUS(aclnnSoftmaxBackward(workspace.get(), ws, ex, &not_a_stream),
                ACLNN_ERR_PARAM_INVALID, "aclnnSoftmaxBackward", "stream");
  CHECK(p.out.untouched());
  EXPECT_STATUS(aclnnSoftmaxBackward(workspace.get(), ws, ex, nullptr), 0);  // not consumed
  CHECK(p.out_is_right());
}

void executor_outlives_its_tensors() {
  std::vector<float> g, y;
  for (int i = 0; i < kRows * kCols; ++i) {
    g.push_back(static_cast<float>(i % 3) - 1.0f);
    y.push_back(0.25f);
  }
  std::vector<float> out(kRows * kCols, -1.0f);
  const int64_t dims[2] = {kRows, kCols};
  aclTensor* tg = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, g.data());
  aclTensor* ty = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, y.data());
  aclTensor* to = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, out.data());
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  EXPECT_STATUS(aclnnSoftmaxBackwardGetWorkspaceSize(tg, ty, -1, to, &ws, &ex), 0);
  // The descriptors go away; the data stays (as on the NPU, the executor holds what it needs).
  aclDestroyTensor(tg);
  aclDestroyTensor(ty);
  aclDestroyTensor(to);
  harness::DeviceBuffer workspace(ws);
  EXPECT_STATUS(aclnnSoftmaxBackward(workspace.get(), ws, ex, nullptr), 0);
  std::vector<double> want = softmax_backward_reference(g, y);
  for (int i = 0; i < kRows * kCols; ++i) CHECK_MSG(std::fabs(out[i] - want[i]) <= 1e-6, "out[%d]", i);
}

// Two threads, each with its own repeatable executor over its own data, run at the same time.
void repeatable_executors_in_two_threads() {
  SoftmaxProblem p(1.5f), q(-0.75f);
  uint64_t ws_p = 0, ws_q = 0;
  aclOpExecutor* ex_p = nullptr;
  aclOpExecutor* ex_q = nullptr;
  EXPECT_STATUS(p.plan(&ws_p, &ex_p), 0);
  EXPECT_STATUS(q.plan(&ws_q, &ex_q), 0);
  EXPECT_STATUS(aclSetAclOpExecutorRepeatable(ex_p), 0);
  EXPECT_STATUS(aclSetAclOpExecutorRepeatable(ex_q), 0);
  harness::DeviceBuffer workspace_p(ws_p), workspace_q(ws_q);
  auto runner = [](void* ws, uint64_t size, aclOpExecutor* ex, int* status) {
    for (int i = 0; i < 10; ++i) {
      *status = aclnnSoftmaxBackward(ws, size, ex, nullptr);
      if (*status != ACLNN_SUCCESS) return;
    }
  };
  int status_p = -1, status_q = -1;
  std::thread a(runner, workspace_p.get(), ws_p, ex_p, &status_p);
  std::thread b(runner, workspace_q.get(), ws_q, ex_q, &status_q);
  a.join();
  b.join();
  CHECK(status_p == ACLNN_SUCCESS);
  CHECK(status_q == ACLNN_SUCCESS);
  CHECK(p.out_is_right());
  CHECK(q.out_is_right());
  EXPECT_STATUS(aclDestroyAclOpExecutor(ex_p), 0);
  EXPECT_STATUS(aclDestroyAclOpExecutor(ex_q), 0);
}

}  // namespace

int main() {
  EXPECT_STATUS(aclInit(nullptr), 0);
  EXPECT_STATUS(aclrtSetDevice(0), 0);
  plain_executor_is_consumed();
  repeatable_executor_runs_until_destroyed();
  unrun_executor_can_be_destroyed();
  null_and_foreign_executors();
  workspace_checks();
  too_small_workspace();
  misaligned_data_and_workspace();
  bad_streams();
  executor_outlives_its_tensors();
  repeatable_executors_in_two_threads();
  EXPECT_STATUS(aclrtResetDevice(0), 0);
  EXPECT_STATUS(aclFinalize(), 0);
  return harness::finish();
}
