// aclInit's configuration file selects the product line whose dtype rules apply: after a config
// selecting atlas_training, every op refuses bfloat16 (161002, naming the dtype) and still takes
// float16; aclFinalize restores the default line; after a config selecting atlas_a2 bfloat16 is
// accepted; atlas_inference refuses bfloat16 for softmax backward (the only op whose document
// lists that line).
//
// usage: product_config <scratch-dir>
#include <fstream>
#include <string>

#include "aclnnop/aclnn_grid_sampler2d_backward.h"
#include "aclnnop/aclnn_group_norm_backward.h"
#include "aclnnop/aclnn_prelu_backward.h"
#include "aclnnop/aclnn_softmax_backward.h"
#include "harness.h"

using harness::Tensor;

namespace {

std::string write_product_config(const std::string& dir, const char* product) {
  std::string path = dir + "/" + product + ".json";
  std::ofstream(path) << "{\"aclnn_cpu\": {\"product\": \"" << product << "\"}}\n";
  return path;
}

// Plans (and, when planning succeeds, runs) each op with every tensor of `dtype`; returns the
// statuses in the order softmax, prelu, group norm, grid sampler and checks the messages.
struct Outcome {
  aclnnStatus status;
  std::string message;
};

Outcome finish_plan(aclnnStatus status, uint64_t ws, aclOpExecutor* ex,
                    aclnnStatus (*run)(void*, uint64_t, aclOpExecutor*, aclrtStream)) {
  Outcome o{status, harness::take_message()};
  if (status == ACLNN_SUCCESS) {
    harness::DeviceBuffer workspace(ws);
    aclnnStatus r = run(workspace.get(), ws, ex, nullptr);
    CHECK_MSG(r == ACLNN_SUCCESS, "phase 2 returned %d: %s", r, harness::take_message().c_str());
  }
  return o;
}

Outcome softmax(aclDataType dtype) {
  Tensor g({2, 3}, dtype), y({2, 3}, dtype), out({2, 3}, dtype);
  g.zero();
  y.zero();
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  aclnnStatus s = aclnnSoftmaxBackwardGetWorkspaceSize(g, y, 1, out, &ws, &ex);
  return finish_plan(s, ws, ex, aclnnSoftmaxBackward);
}

Outcome prelu(aclDataType dtype) {
  Tensor g({2, 3}, dtype), x({2, 3}, dtype), w({3}, dtype), gi({2, 3}, dtype), gw({3}, dtype);
  for (Tensor* t : {&g, &x, &w}) t->zero();
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  aclnnStatus s = aclnnPreluBackwardGetWorkspaceSize(g, x, w, gi, gw, &ws, &ex);
  return finish_plan(s, ws, ex, aclnnPreluBackward);
}

Outcome group_norm(aclDataType dtype) {
  Tensor dy({2, 4, 3}, dtype), x({2, 4, 3}, dtype), mean({2, 2}, dtype), rstd({2, 2}, dtype),
      gamma({4}, dtype), gi({2, 4, 3}, dtype), gg({4}, dtype), gb({4}, dtype);
  for (Tensor* t : {&dy, &x, &mean, &rstd, &gamma}) t->zero();
  harness::BoolArray mask({true, true, true});
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  aclnnStatus s = aclnnGroupNormBackwardGetWorkspaceSize(dy, x, mean, rstd, gamma, 2, 4, 3, 2, mask,
                                                         gi, gg, gb, &ws, &ex);
  return finish_plan(s, ws, ex, aclnnGroupNormBackward);
}

Outcome grid_sampler(aclDataType dtype) {
  Tensor go({1, 2, 2, 2}, dtype), in({1, 2, 3, 3}, dtype), grid({1, 2, 2, 2}, dtype),
      ig({1, 2, 3, 3}, dtype), gg({1, 2, 2, 2}, dtype);
  for (Tensor* t : {&go, &in, &grid}) t->zero();
  harness::BoolArray mask({true, true});
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  aclnnStatus s = aclnnGridSampler2DBackwardGetWorkspaceSize(go, in, grid, 0, 0, false, mask, ig,
                                                             gg, &ws, &ex);
  return finish_plan(s, ws, ex, aclnnGridSampler2DBackward);
}

void expect_bf16_refused(const char* op, const Outcome& o) {
  CHECK_MSG(o.status == ACLNN_ERR_PARAM_INVALID, "%s bfloat16: status %d (%s)", op, o.status,
            o.message.c_str());
  CHECK_MSG(o.message.find(op) != std::string::npos && o.message.find("bfloat16") != std::string::npos,
            "%s bfloat16: message \"%s\" should name the op and the dtype", op, o.message.c_str());
}

void expect_accepted(const char* op, const char* dtype, const Outcome& o) {
  CHECK_MSG(o.status == ACLNN_SUCCESS, "%s %s: status %d (%s)", op, dtype, o.status, o.message.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: product_config <scratch-dir>\n");
    return 2;
  }
  const std::string dir = argv[1];

  // Atlas training series: no bfloat16.
  EXPECT_STATUS(aclInit(write_product_config(dir, "atlas_training").c_str()), 0);
  CHECK(std::string(aclrtGetSocName()) == "Ascend910A");
  expect_bf16_refused("aclnnSoftmaxBackward", softmax(ACL_BF16));
  expect_bf16_refused("aclnnPreluBackward", prelu(ACL_BF16));
  expect_bf16_refused("aclnnGroupNormBackward", group_norm(ACL_BF16));
  expect_bf16_refused("aclnnGridSampler2DBackward", grid_sampler(ACL_BF16));
  expect_accepted("aclnnSoftmaxBackward", "float16", softmax(ACL_FLOAT16));
  expect_accepted("aclnnPreluBackward", "float16", prelu(ACL_FLOAT16));
  expect_accepted("aclnnGroupNormBackward", "float16", group_norm(ACL_FLOAT16));
  expect_accepted("aclnnGridSampler2DBackward", "float16", grid_sampler(ACL_FLOAT16));
  expect_accepted("aclnnGridSampler2DBackward", "float32", grid_sampler(ACL_FLOAT));
  EXPECT_STATUS(aclFinalize(), 0);

  // aclFinalize restored what the configuration changed: the default line (Atlas A2) is back.
  EXPECT_STATUS(aclInit(nullptr), 0);
  CHECK(std::string(aclrtGetSocName()) == "Ascend910B1");
  expect_accepted("aclnnSoftmaxBackward", "bfloat16", softmax(ACL_BF16));
  EXPECT_STATUS(aclFinalize(), 0);

  // Atlas A2: bfloat16 everywhere.
  EXPECT_STATUS(aclInit(write_product_config(dir, "atlas_a2").c_str()), 0);
  CHECK(std::string(aclrtGetSocName()) == "Ascend910B1");
  expect_accepted("aclnnSoftmaxBackward", "bfloat16", softmax(ACL_BF16));
  expect_accepted("aclnnPreluBackward", "bfloat16", prelu(ACL_BF16));
  expect_accepted("aclnnGroupNormBackward", "bfloat16", group_norm(ACL_BF16));
  expect_accepted("aclnnGridSampler2DBackward", "bfloat16", grid_sampler(ACL_BF16));
  EXPECT_STATUS(aclFinalize(), 0);

  // Atlas inference series (softmax backward's document lists it): no bfloat16.
  EXPECT_STATUS(aclInit(write_product_config(dir, "atlas_inference").c_str()), 0);
  CHECK(std::string(aclrtGetSocName()) == "Ascend310P3");
  expect_bf16_refused("aclnnSoftmaxBackward", softmax(ACL_BF16));
  expect_accepted("aclnnSoftmaxBackward", "float32", softmax(ACL_FLOAT));
  EXPECT_STATUS(aclFinalize(), 0);
  return harness::finish();
}
