// A training step written as a CANN user writes one (the shape of the operator documents'
// samples: aclInit, a device and a stream, device buffers from aclrtMalloc, aclCreateTensor,
// both phases of each call, aclrtMemcpy of the results back to the host):
//   y = GroupNorm(x; gamma, beta)        -> y, mean, rstd
//   s = Softmax(y, dim = -1)
//   gradY = SoftmaxBackward(gradS, s)    (the forward's own output)
//   gradX, gradGamma, gradBeta = GroupNormBackward(gradY, x, mean, rstd, gamma)
// It prints every result as "name[i] is: value"; tests/c_api/test_capi_training_step.py checks
// them against PyTorch float64 autograd of the same forward and runs the program under valgrind.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_group_norm.h"
#include "aclnnop/aclnn_group_norm_backward.h"
#include "aclnnop/aclnn_softmax.h"
#include "aclnnop/aclnn_softmax_backward.h"

#define CHECK_RET(cond, ...)        \
  do {                              \
    if (!(cond)) {                  \
      std::printf(__VA_ARGS__);     \
      std::printf("\n");            \
      return 1;                     \
    }                               \
  } while (0)

namespace {

int64_t ShapeSize(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A float32 tensor on the device holding `host` (contiguous strides, as the documents' samples).
int CreateAclTensor(const std::vector<float>& host, const std::vector<int64_t>& shape, void** device,
                    aclTensor** tensor) {
  const size_t bytes = static_cast<size_t>(ShapeSize(shape)) * sizeof(float);
  CHECK_RET(aclrtMalloc(device, bytes, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, "aclrtMalloc failed");
  CHECK_RET(aclrtMemcpy(*device, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS,
            "aclrtMemcpy to the device failed");
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) strides[i] = shape[i + 1] * strides[i + 1];
  *tensor = aclCreateTensor(shape.data(), shape.size(), ACL_FLOAT, strides.data(), 0, ACL_FORMAT_ND, shape.data(),
                            shape.size(), *device);
  CHECK_RET(*tensor != nullptr, "aclCreateTensor failed");
  return 0;
}

// Runs phase 2 of a call whose phase 1 returned `ws` and `executor`, with its own workspace.
template <typename Run>
int RunPhaseTwo(Run run, uint64_t ws, aclOpExecutor* executor, aclrtStream stream, const char* what) {
  void* workspace = nullptr;
  if (ws > 0) CHECK_RET(aclrtMalloc(&workspace, ws, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, "workspace of %s", what);
  const aclnnStatus status = run(workspace, ws, executor, stream);
  if (workspace != nullptr) aclrtFree(workspace);
  CHECK_RET(status == ACL_SUCCESS, "%s failed: %d (%s)", what, static_cast<int>(status), aclGetRecentErrMsg());
  return 0;
}

int PrintResult(const char* name, void* device, const std::vector<int64_t>& shape) {
  std::vector<float> host(static_cast<size_t>(ShapeSize(shape)));
  const size_t bytes = host.size() * sizeof(float);
  CHECK_RET(aclrtMemcpy(host.data(), bytes, device, bytes, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS,
            "aclrtMemcpy of %s failed", name);
  for (size_t i = 0; i < host.size(); ++i) std::printf("%s[%zu] is: %.9g\n", name, i, host[i]);
  return 0;
}

}  // namespace

int main() {
  const int32_t deviceId = 0;
  aclrtStream stream = nullptr;
  CHECK_RET(aclInit(nullptr) == ACL_SUCCESS, "aclInit failed");
  CHECK_RET(aclrtSetDevice(deviceId) == ACL_SUCCESS, "aclrtSetDevice failed");
  CHECK_RET(aclrtCreateStream(&stream) == ACL_SUCCESS, "aclrtCreateStream failed");

  const int64_t N = 2, C = 4, HxW = 3, group = 2;
  const double eps = 1e-5;
  const std::vector<int64_t> xShape = {N, C, HxW}, cShape = {C}, statShape = {N, group};
  std::vector<float> xHost(static_cast<size_t>(ShapeSize(xShape)));
  std::vector<float> gradSHost(xHost.size());
  for (size_t i = 0; i < xHost.size(); ++i) {
    xHost[i] = 0.25f * static_cast<float>((i * 7) % 11) - 1.0f;
    gradSHost[i] = 0.125f * static_cast<float>((i * 5) % 9) - 0.5f;
  }
  const std::vector<float> gammaHost = {1.5f, -0.5f, 2.0f, 0.75f}, betaHost = {0.1f, 0.2f, -0.3f, 0.0f};
  const std::vector<float> zeros(xHost.size(), 0.0f), statZeros(static_cast<size_t>(N * group), 0.0f);

  void *x = nullptr, *gamma = nullptr, *beta = nullptr, *y = nullptr, *mean = nullptr, *rstd = nullptr;
  void *s = nullptr, *gradS = nullptr, *gradY = nullptr, *gradX = nullptr, *gradGamma = nullptr, *gradBeta = nullptr;
  aclTensor *xT = nullptr, *gammaT = nullptr, *betaT = nullptr, *yT = nullptr, *meanT = nullptr, *rstdT = nullptr;
  aclTensor *sT = nullptr, *gradST = nullptr, *gradYT = nullptr, *gradXT = nullptr, *gradGammaT = nullptr,
            *gradBetaT = nullptr;
  int ret = 0;
  ret |= CreateAclTensor(xHost, xShape, &x, &xT);
  ret |= CreateAclTensor(gammaHost, cShape, &gamma, &gammaT);
  ret |= CreateAclTensor(betaHost, cShape, &beta, &betaT);
  ret |= CreateAclTensor(zeros, xShape, &y, &yT);
  ret |= CreateAclTensor(statZeros, statShape, &mean, &meanT);
  ret |= CreateAclTensor(statZeros, statShape, &rstd, &rstdT);
  ret |= CreateAclTensor(zeros, xShape, &s, &sT);
  ret |= CreateAclTensor(gradSHost, xShape, &gradS, &gradST);
  ret |= CreateAclTensor(zeros, xShape, &gradY, &gradYT);
  ret |= CreateAclTensor(zeros, xShape, &gradX, &gradXT);
  ret |= CreateAclTensor(gammaHost, cShape, &gradGamma, &gradGammaT);
  ret |= CreateAclTensor(betaHost, cShape, &gradBeta, &gradBetaT);
  CHECK_RET(ret == 0, "creating the tensors failed");

  uint64_t ws = 0;
  aclOpExecutor* executor = nullptr;
  // Forward: GroupNorm, then softmax over the last dim.
  CHECK_RET(aclnnGroupNormGetWorkspaceSize(xT, gammaT, betaT, N, C, HxW, group, eps, yT, meanT, rstdT, &ws,
                                           &executor) == ACL_SUCCESS,
            "aclnnGroupNormGetWorkspaceSize failed: %s", aclGetRecentErrMsg());
  CHECK_RET(RunPhaseTwo(aclnnGroupNorm, ws, executor, stream, "aclnnGroupNorm") == 0, "GroupNorm");
  CHECK_RET(aclnnSoftmaxGetWorkspaceSize(yT, -1, sT, &ws, &executor) == ACL_SUCCESS,
            "aclnnSoftmaxGetWorkspaceSize failed: %s", aclGetRecentErrMsg());
  CHECK_RET(RunPhaseTwo(aclnnSoftmax, ws, executor, stream, "aclnnSoftmax") == 0, "Softmax");
  // Backward, on the forward's own outputs.
  CHECK_RET(aclnnSoftmaxBackwardGetWorkspaceSize(gradST, sT, -1, gradYT, &ws, &executor) == ACL_SUCCESS,
            "aclnnSoftmaxBackwardGetWorkspaceSize failed: %s", aclGetRecentErrMsg());
  CHECK_RET(RunPhaseTwo(aclnnSoftmaxBackward, ws, executor, stream, "aclnnSoftmaxBackward") == 0, "SoftmaxBackward");
  bool maskData[3] = {true, true, true};
  aclBoolArray* outputMask = aclCreateBoolArray(maskData, 3);
  CHECK_RET(outputMask != nullptr, "aclCreateBoolArray failed");
  CHECK_RET(aclnnGroupNormBackwardGetWorkspaceSize(gradYT, xT, meanT, rstdT, gammaT, N, C, HxW, group, outputMask,
                                                   gradXT, gradGammaT, gradBetaT, &ws, &executor) == ACL_SUCCESS,
            "aclnnGroupNormBackwardGetWorkspaceSize failed: %s", aclGetRecentErrMsg());
  CHECK_RET(RunPhaseTwo(aclnnGroupNormBackward, ws, executor, stream, "aclnnGroupNormBackward") == 0,
            "GroupNormBackward");
  CHECK_RET(aclrtSynchronizeStream(stream) == ACL_SUCCESS, "aclrtSynchronizeStream failed");

  ret |= PrintResult("y", y, xShape);
  ret |= PrintResult("mean", mean, statShape);
  ret |= PrintResult("rstd", rstd, statShape);
  ret |= PrintResult("s", s, xShape);
  ret |= PrintResult("gradY", gradY, xShape);
  ret |= PrintResult("gradX", gradX, xShape);
  ret |= PrintResult("gradGamma", gradGamma, cShape);
  ret |= PrintResult("gradBeta", gradBeta, cShape);

  aclDestroyBoolArray(outputMask);
  for (aclTensor* t : {xT, gammaT, betaT, yT, meanT, rstdT, sT, gradST, gradYT, gradXT, gradGammaT, gradBetaT}) {
    aclDestroyTensor(t);
  }
  for (void* p : {x, gamma, beta, y, mean, rstd, s, gradS, gradY, gradX, gradGamma, gradBeta}) aclrtFree(p);
  aclrtDestroyStream(stream);
  aclrtResetDevice(deviceId);
  aclFinalize();
  return ret;
}
