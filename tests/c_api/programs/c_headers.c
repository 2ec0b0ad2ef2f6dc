/* The public headers compile as C and the C API is callable from C: a softmax backward of a
 * [2, 2] float32 tensor, checked against values worked out by hand. */
#include <math.h>
#include <stdio.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_grid_sampler2d_backward.h"
#include "aclnnop/aclnn_group_norm_backward.h"
#include "aclnnop/aclnn_prelu_backward.h"
#include "aclnnop/aclnn_softmax_backward.h"

int main(void) {
  /* out = y * (g - sum(g * y)) along dim 1: row 0: s = 0.5*1 + 0.5*3 = 2 -> (-0.5, 0.5);
   * row 1: s = 0.25*2 + 0.75*2 = 2 -> (0, 0). */
  float g[4] = {1.0f, 3.0f, 2.0f, 2.0f};
  float y[4] = {0.5f, 0.5f, 0.25f, 0.75f};
  float out[4] = {9.0f, 9.0f, 9.0f, 9.0f};
  const float want[4] = {-0.5f, 0.5f, 0.0f, 0.0f};
  const int64_t dims[2] = {2, 2};
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = NULL;
  aclTensor* tg = aclCreateTensor(dims, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, dims, 2, g);
  aclTensor* ty = aclCreateTensor(dims, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, dims, 2, y);
  aclTensor* to = aclCreateTensor(dims, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, dims, 2, out);
  aclnnStatus status = aclnnSoftmaxBackwardGetWorkspaceSize(tg, ty, 1, to, &workspace_size, &executor);
  void* workspace = NULL;
  int i, bad = 0;
  if (status != ACLNN_SUCCESS) {
    printf("phase 1: %d (%s)\n", status, aclGetRecentErrMsg());
    return 1;
  }
  if (workspace_size > 0 && aclrtMalloc(&workspace, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
    printf("aclrtMalloc: %s\n", aclGetRecentErrMsg());
    return 1;
  }
  status = aclnnSoftmaxBackward(workspace, workspace_size, executor, NULL);
  if (status != ACLNN_SUCCESS) {
    printf("phase 2: %d (%s)\n", status, aclGetRecentErrMsg());
    return 1;
  }
  for (i = 0; i < 4; ++i) bad += fabsf(out[i] - want[i]) > 1e-6f;
  aclDestroyTensor(tg);
  aclDestroyTensor(ty);
  aclDestroyTensor(to);
  if (workspace != NULL) aclrtFree(workspace);
  printf(bad ? "wrong values\n" : "ok\n");
  return bad;
}
