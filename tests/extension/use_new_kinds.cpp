// tests/extension: a C++ user of the extension ops' C API, built against a scratch build with
// `python -m aclnn_cpu --cflags --libs` by tests/test_extension_build.py: aclScalar,
// aclIntArray and double parameters through the generated headers, including their refusals.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_flip.h"
#include "aclnnop/aclnn_leaky_relu_backward.h"
#include "aclnnop/aclnn_logit_grad.h"
#include "harness.h"  // CHECK, finish(): tests/c_api/programs/harness.h

// Plans and runs one call; returns phase 1's status.
template <class Plan>
static aclnnStatus plan_and_run(Plan plan, aclnnStatus (*run)(void*, uint64_t, aclOpExecutor*, aclrtStream)) {
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  const aclnnStatus status = plan(&ws, &ex);
  if (status != ACLNN_SUCCESS) return status;
  std::vector<char> workspace(ws + 16);
  CHECK(run(ws ? workspace.data() : nullptr, ws, ex, nullptr) == ACLNN_SUCCESS);
  return status;
}

int main() {
  CHECK(aclInit(nullptr) == ACL_SUCCESS);
  const int64_t shape[] = {2, 3};
  float g[6] = {1, 2, 3, 4, 5, 6}, x[6] = {-1, 2, -3, 0, 5, -6}, out[6] = {};
  aclTensor* tg = aclCreateTensor(shape, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, shape, 2, g);
  aclTensor* tx = aclCreateTensor(shape, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, shape, 2, x);
  aclTensor* to = aclCreateTensor(shape, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, shape, 2, out);

  // LeakyReluBackward with an int32 scalar 2 and a float16 scalar -0.5 (0xB800).
  int32_t two = 2;
  uint16_t minus_half = 0xB800;
  aclScalar* s2 = aclCreateScalar(&two, ACL_INT32);
  aclScalar* sh = aclCreateScalar(&minus_half, ACL_FLOAT16);
  CHECK(s2 != nullptr && sh != nullptr);
  CHECK(plan_and_run([&](uint64_t* ws, aclOpExecutor** ex) {
           return aclnnLeakyReluBackwardGetWorkspaceSize(tg, tx, s2, false, to, ws, ex);
         }, aclnnLeakyReluBackward) == ACLNN_SUCCESS);
  for (int i = 0; i < 6; ++i) CHECK(out[i] == (x[i] > 0 ? g[i] : 2 * g[i]));
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  CHECK(aclnnLeakyReluBackwardGetWorkspaceSize(tg, tx, sh, true, to, &ws, &ex) == ACLNN_ERR_PARAM_INVALID);
  CHECK(std::strstr(aclGetRecentErrMsg(), "may not be negative") != nullptr);
  CHECK(aclnnLeakyReluBackwardGetWorkspaceSize(tg, tx, nullptr, false, to, &ws, &ex) == ACLNN_ERR_PARAM_NULLPTR);
  CHECK(std::strstr(aclGetRecentErrMsg(), "negativeSlope must not be null") != nullptr);
  uint16_t u16 = 1;
  aclScalar* su = aclCreateScalar(&u16, ACL_UINT16);  // a scalar may hold it, the op refuses it
  CHECK(aclnnLeakyReluBackwardGetWorkspaceSize(tg, tx, su, false, to, &ws, &ex) == ACLNN_ERR_PARAM_INVALID);
  CHECK(std::strstr(aclGetRecentErrMsg(), "negativeSlope has dtype uint16") != nullptr);

  // LogitGrad with eps 0.25: x = 0.5 inside, 0.1 outside.
  float lx[2] = {0.5f, 0.1f}, ldy[2] = {1, 1}, lout[2] = {};
  const int64_t two_shape[] = {2};
  aclTensor* tlx = aclCreateTensor(two_shape, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, two_shape, 1, lx);
  aclTensor* tld = aclCreateTensor(two_shape, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, two_shape, 1, ldy);
  aclTensor* tlo = aclCreateTensor(two_shape, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, two_shape, 1, lout);
  CHECK(plan_and_run([&](uint64_t* w, aclOpExecutor** e) {
           return aclnnLogitGradGetWorkspaceSize(tlx, tld, 0.25, tlo, w, e);
         }, aclnnLogitGrad) == ACLNN_SUCCESS);
  CHECK(lout[0] == 4.0f && lout[1] == 0.0f);
  CHECK(plan_and_run([&](uint64_t* w, aclOpExecutor** e) {
           return aclnnLogitGradGetWorkspaceSize(tlx, tld, -1.0, tlo, w, e);
         }, aclnnLogitGrad) == ACLNN_SUCCESS);
  CHECK(lout[0] == 4.0f && std::fabs(lout[1] - 1.0f / 0.09f) < 1e-5f);

  // Flip over dims {-1}; the array's integers are copied when planning.
  int64_t dims[] = {-1};
  aclIntArray* d = aclCreateIntArray(dims, 1);
  uint64_t n = 0;
  CHECK(aclGetIntArraySize(d, &n) == ACLNN_SUCCESS && n == 1);
  CHECK(aclnnFlipGetWorkspaceSize(tx, d, to, &ws, &ex) == ACLNN_SUCCESS);
  aclDestroyIntArray(d);
  std::vector<char> workspace(ws + 16);
  CHECK(aclnnFlip(ws ? workspace.data() : nullptr, ws, ex, nullptr) == ACLNN_SUCCESS);
  const float flipped[6] = {-3, 2, -1, -6, 5, 0};
  for (int i = 0; i < 6; ++i) CHECK(out[i] == flipped[i]);
  CHECK(aclnnFlipGetWorkspaceSize(tx, nullptr, to, &ws, &ex) == ACLNN_ERR_PARAM_NULLPTR);
  CHECK(std::strstr(aclGetRecentErrMsg(), "dims must not be null") != nullptr);
  int64_t twice[] = {1, -1};
  aclIntArray* bad = aclCreateIntArray(twice, 2);
  CHECK(aclnnFlipGetWorkspaceSize(tx, bad, to, &ws, &ex) == ACLNN_ERR_PARAM_INVALID);
  CHECK(std::strstr(aclGetRecentErrMsg(), "names a dim twice") != nullptr);

  aclDestroyIntArray(bad);
  aclDestroyScalar(s2);
  aclDestroyScalar(sh);
  aclDestroyScalar(su);
  for (aclTensor* t : {tg, tx, to, tlx, tld, tlo}) aclDestroyTensor(t);
  CHECK(aclFinalize() == ACL_SUCCESS);
  return harness::finish();
}
