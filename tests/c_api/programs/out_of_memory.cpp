// No C++ exception crosses the C ABI, even when memory runs out: this program replaces the
// global operator new (the library's allocations resolve to it too, the executable's definition
// interposes) so that, from the K-th allocation on, every allocation throws std::bad_alloc. For
// K = 0, 1, 2, ... each entry point is called until it needs fewer than K allocations; every
// call must return a status (561000 ACLNN_ERR_INNER, an acl allocation code, or the status of
// the rule it breaks) or null, never throw, never write an output when it fails, and leak
// nothing (valgrind checks the last part).
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>

#include "aclnnop/aclnn_grid_sampler2d_backward.h"
#include "aclnnop/aclnn_group_norm_backward.h"
#include "aclnnop/aclnn_prelu_backward.h"
#include "aclnnop/aclnn_softmax_backward.h"
#include "harness.h"

namespace {

// Allocations still allowed before operator new starts throwing; -1: no limit.
std::atomic<long> allocations_left{-1};
std::atomic<long> refused{0};

void* allocate(std::size_t size) {
  long left = allocations_left.load();
  while (left >= 0) {
    if (left == 0) {
      ++refused;
      throw std::bad_alloc();
    }
    if (allocations_left.compare_exchange_weak(left, left - 1)) break;
  }
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void* allocate_aligned(std::size_t size, std::align_val_t align) {
  long left = allocations_left.load();
  while (left >= 0) {
    if (left == 0) {
      ++refused;
      throw std::bad_alloc();
    }
    if (allocations_left.compare_exchange_weak(left, left - 1)) break;
  }
  const std::size_t a = static_cast<std::size_t>(align);
  void* p = std::aligned_alloc(a, (size + a - 1) / a * a);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t size) { return allocate(size); }
void* operator new[](std::size_t size) { return allocate(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t size, std::align_val_t align) { return allocate_aligned(size, align); }
void* operator new[](std::size_t size, std::align_val_t align) { return allocate_aligned(size, align); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

using harness::Tensor;

namespace {

constexpr long kMaxAllocations = 400;
long budget = -1;  // the K of the current attempt

// Around the library call under test only: the harness's own objects allocate freely.
void arm() { allocations_left = budget; }
void disarm() { allocations_left = -1; }

// Calls `attempt` with K = 0, 1, ... allocations allowed until it succeeds. `attempt` builds its
// arguments, arms the limit around the library call, checks the failure outcome itself and
// returns true on success.
template <typename Attempt>
void exhaust(const char* what, Attempt attempt) {
  long k = 0;
  for (; k < kMaxAllocations; ++k) {
    const long refused_before = refused.load();
    bool succeeded = false, threw = false;
    budget = k;
    try {
      succeeded = attempt();
    } catch (...) {
      threw = true;
    }
    disarm();
    CHECK_MSG(!threw, "%s: an exception crossed the C API with %ld allocations allowed", what, k);
    if (threw) return;
    if (succeeded) break;
    CHECK_MSG(refused.load() > refused_before,
              "%s failed with %ld allocations allowed although none was refused", what, k);
  }
  CHECK_MSG(k > 0, "%s: no allocation was ever refused (is operator new interposed?)", what);
  CHECK_MSG(k < kMaxAllocations, "%s still fails with %ld allocations allowed", what, k);
  std::printf("%s: failed cleanly with 0..%ld allocations allowed\n", what, k - 1);
}

// Phase 1 of an op under the limit; on failure, 561000 and untouched outputs. On success the
// executor runs (phase 2 allocates nothing it could fail on) and must succeed.
template <typename Plan, typename Run>
bool plan_and_run(const char* what, Plan plan, Run run, std::initializer_list<const Tensor*> outputs) {
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  arm();
  aclnnStatus s = plan(&ws, &ex);
  disarm();
  if (s != ACLNN_SUCCESS) {
    CHECK_MSG(s == ACLNN_ERR_INNER, "%s phase 1 under OOM: %d (%s)", what, s, aclGetRecentErrMsg());
    for (const Tensor* t : outputs) CHECK(t->untouched());
    return false;
  }
  void* workspace = ws > 0 ? std::malloc(ws) : nullptr;
  aclnnStatus r = run(workspace, ws, ex, nullptr);
  std::free(workspace);
  CHECK_MSG(r == ACLNN_SUCCESS, "%s phase 2 after a successful plan: %d", what, r);
  return true;
}

void every_op() {
  exhaust("softmax backward", [] {
    Tensor g({3, 4}, ACL_FLOAT), y({3, 4}, ACL_FLOAT), out({3, 4}, ACL_FLOAT);
    g.zero();
    y.zero();
    return plan_and_run("softmax", [&](uint64_t* ws, aclOpExecutor** ex) {
      return aclnnSoftmaxBackwardGetWorkspaceSize(g, y, 1, out, ws, ex);
    }, aclnnSoftmaxBackward, {&out});
  });
  exhaust("prelu backward", [] {
    Tensor g({2, 3}, ACL_FLOAT), x({2, 3}, ACL_FLOAT), w({3}, ACL_FLOAT), gi({2, 3}, ACL_FLOAT),
        gw({3}, ACL_FLOAT);
    for (Tensor* t : {&g, &x, &w}) t->zero();
    return plan_and_run("prelu", [&](uint64_t* ws, aclOpExecutor** ex) {
      return aclnnPreluBackwardGetWorkspaceSize(g, x, w, gi, gw, ws, ex);
    }, aclnnPreluBackward, {&gi, &gw});
  });
  exhaust("group norm backward", [] {
    Tensor dy({2, 4, 3}, ACL_FLOAT16), x({2, 4, 3}, ACL_FLOAT16), mean({2, 2}, ACL_FLOAT16),
        rstd({2, 2}, ACL_FLOAT16), gamma({4}, ACL_FLOAT16), gi({2, 4, 3}, ACL_FLOAT16),
        gg({4}, ACL_FLOAT16), gb({4}, ACL_FLOAT16);
    for (Tensor* t : {&dy, &x, &mean, &rstd, &gamma}) t->zero();
    harness::BoolArray mask({true, true, true});
    return plan_and_run("group norm", [&](uint64_t* ws, aclOpExecutor** ex) {
      return aclnnGroupNormBackwardGetWorkspaceSize(dy, x, mean, rstd, gamma, 2, 4, 3, 2, mask, gi,
                                                    gg, gb, ws, ex);
    }, aclnnGroupNormBackward, {&gi, &gg, &gb});
  });
  exhaust("grid sampler backward", [] {
    Tensor go({1, 2, 2, 2}, ACL_BF16), in({1, 2, 3, 3}, ACL_BF16), grid({1, 2, 2, 2}, ACL_BF16),
        ig({1, 2, 3, 3}, ACL_BF16), gg({1, 2, 2, 2}, ACL_BF16);
    for (Tensor* t : {&go, &in, &grid}) t->zero();
    harness::BoolArray mask({true, true});
    return plan_and_run("grid sampler", [&](uint64_t* ws, aclOpExecutor** ex) {
      return aclnnGridSampler2DBackwardGetWorkspaceSize(go, in, grid, 2, 1, true, mask, ig, gg, ws, ex);
    }, aclnnGridSampler2DBackward, {&ig, &gg});
  });
}

// A call that breaks a rule reports it, or 561000 when even the message cannot be built.
void rejection() {
  exhaust("softmax rejection", [] {
    Tensor g({3, 4}, ACL_FLOAT), y({3, 4}, ACL_FLOAT), out({3, 5}, ACL_FLOAT);
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    arm();
    aclnnStatus s = aclnnSoftmaxBackwardGetWorkspaceSize(g, y, 1, out, &ws, &ex);
    disarm();
    std::string message = aclGetRecentErrMsg();
    CHECK_MSG(s == ACLNN_ERR_PARAM_INVALID || s == ACLNN_ERR_INNER, "status %d", s);
    CHECK(out.untouched());
    // Done once the rule's own status and message come through.
    return s == ACLNN_ERR_PARAM_INVALID && message.find("out") != std::string::npos;
  });
}

void runtime_objects() {
  exhaust("aclCreateTensor", [] {
    const int64_t dims[3] = {2, 3, 4};
    float data[24] = {};
    arm();
    aclTensor* t = aclCreateTensor(dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 3, data);
    disarm();
    aclDestroyTensor(t);
    return t != nullptr;
  });
  exhaust("aclCreateBoolArray", [] {
    bool flags[5] = {true, false, true, false, true};
    arm();
    aclBoolArray* a = aclCreateBoolArray(flags, 5);
    disarm();
    aclDestroyBoolArray(a);
    return a != nullptr;
  });
  exhaust("aclrtCreateStream", [] {
    aclrtStream s = nullptr;
    arm();
    aclError e = aclrtCreateStream(&s);
    disarm();
    if (e != ACL_SUCCESS) {
      CHECK_MSG(e == ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtCreateStream: %d", e);
      return false;
    }
    return aclrtDestroyStream(s) == ACL_SUCCESS;
  });
  exhaust("aclrtCreateContext", [] {
    aclrtContext c = nullptr;
    arm();
    aclError e = aclrtCreateContext(&c, 0);
    disarm();
    if (e != ACL_SUCCESS) {
      CHECK_MSG(e == ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtCreateContext: %d", e);
      return false;
    }
    return aclrtDestroyContext(c) == ACL_SUCCESS;
  });
  exhaust("aclrtMalloc", [] {
    void* p = nullptr;
    arm();
    aclError e = aclrtMalloc(&p, 256, ACL_MEM_MALLOC_HUGE_FIRST);
    disarm();
    if (e != ACL_SUCCESS) {
      CHECK_MSG(e == ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc: %d", e);
      return false;
    }
    return aclrtFree(p) == ACL_SUCCESS;
  });
}

std::string config_path;

void init_with_config() {
  exhaust("aclInit with a configuration file", [] {
    arm();
    aclError e = aclInit(config_path.c_str());
    disarm();
    if (e != ACL_SUCCESS) {
      CHECK_MSG(e == ACL_ERROR_BAD_ALLOC, "aclInit: %d", e);
      return false;
    }
    return aclFinalize() == ACL_SUCCESS;
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: out_of_memory <scratch-dir>\n");
    return 2;
  }
  config_path = std::string(argv[1]) + "/oom_config.json";
  std::ofstream(config_path) << "{\"other\": [1, 2, {\"x\": \"y\"}], \"aclnn_cpu\": {\"product\": \"atlas_a2\"}}";
  init_with_config();
  CHECK(aclInit(nullptr) == ACL_SUCCESS);
  every_op();
  rejection();
  runtime_objects();
  CHECK(aclFinalize() == ACL_SUCCESS);
  return harness::finish();
}
