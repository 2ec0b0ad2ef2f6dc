// libFuzzer harness over the C entry points of all four operators (built by fuzz/build.sh with
// ASan + UBSan, the runtime and the baseline kernels compiled straight into the binary).
//
// From the fuzz bytes it picks an op, builds tensors with fuzzed dims / strides / offset / dtype
// (each over a heap buffer of exactly the extent its layout reaches, so ASan sees any read or
// write past it), bool arrays, attributes (in and far out of range), null operands, read-only
// or aliasing outputs; then runs phase 1 and, when it succeeds, phase 2 with a workspace of the
// reported size (sometimes a smaller one, or a repeatable executor run twice).
//
// Beyond the sanitizers, these are findings (abort):
//   * a status outside {0, 161001, 161002, 561000} from phase 1, or a failure without a message;
//   * an input buffer that changed (inputs are const for every op);
//   * an output buffer that changed when phase 1 or phase 2 was refused;
//   * bytes of an output buffer outside the output's view that changed after a successful run;
//   * phase 2 of a freshly planned executor with the full workspace failing.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "aclnn/aclnn_base.h"
#include "aclnnop/aclnn_grid_sampler2d_backward.h"
#include "aclnnop/aclnn_group_norm_backward.h"
#include "aclnnop/aclnn_prelu_backward.h"
#include "aclnnop/aclnn_softmax_backward.h"

namespace {

constexpr int64_t kMaxElements = 1 << 14;  // per tensor: keeps each run in the microseconds
constexpr uint64_t kMaxWorkspace = 1ull << 28;

// When the input runs out FuzzedDataProvider returns the minimum of every range; these helpers
// make the minimum the ordinary choice, so short inputs make ordinary (valid) calls.
bool rare(FuzzedDataProvider& fdp, int max) { return fdp.ConsumeIntegralInRange<int>(0, max) == max; }
int rare_first(FuzzedDataProvider& fdp, int max) { return max - fdp.ConsumeIntegralInRange<int>(0, max); }

bool verbose() {
  static const bool on = std::getenv("FUZZ_VERBOSE") != nullptr;
  return on;
}

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "FINDING: %s (last message: %s)\n", what, aclGetRecentErrMsg());
  std::abort();
}

size_t item_size(aclDataType t) {
  switch (t) {
    case ACL_FLOAT: case ACL_INT32: return 4;
    case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: return 2;
    case ACL_DOUBLE: case ACL_INT64: return 8;
    default: return 1;
  }
}

// Values of modest magnitude (|x| in about [2^-5, 8)), so the ops' arithmetic stays finite, with
// the occasional zero, infinity, NaN or subnormal.
void fill_values(FuzzedDataProvider& fdp, aclDataType t, uint8_t* p, size_t count) {
  uint32_t seed = fdp.ConsumeIntegral<uint32_t>() | 1u;
  bool specials = rare(fdp, 7);
  size_t isz = item_size(t);
  for (size_t i = 0; i < count; ++i) {
    seed ^= seed << 13; seed ^= seed >> 17; seed ^= seed << 5;  // xorshift32
    uint32_t sign = seed >> 31, e = (seed >> 27) & 7, m = seed;
    uint64_t bits;
    if (specials && (seed & 0xF) == 0) {
      static const uint32_t kind_bits[4] = {0, 1, 2, 3};
      uint32_t kind = kind_bits[(seed >> 4) & 3];  // 0 zero, 1 inf, 2 nan, 3 subnormal
      switch (t) {
        case ACL_FLOAT16: bits = kind == 0 ? 0 : kind == 1 ? 0x7C00 : kind == 2 ? 0x7E00 : 1; break;
        case ACL_BF16: bits = kind == 0 ? 0 : kind == 1 ? 0x7F80 : kind == 2 ? 0x7FC0 : 1; break;
        case ACL_DOUBLE:
          bits = kind == 0 ? 0 : kind == 1 ? 0x7FF0000000000000ull : kind == 2 ? 0x7FF8000000000000ull : 1;
          break;
        default: bits = kind == 0 ? 0 : kind == 1 ? 0x7F800000u : kind == 2 ? 0x7FC00000u : 1; break;
      }
      bits |= uint64_t(sign) << (isz * 8 - 1);
    } else {
      switch (t) {
        case ACL_FLOAT16: bits = (sign << 15) | ((10 + e) << 10) | (m & 0x3FF); break;
        case ACL_BF16: bits = (sign << 15) | ((122 + e) << 7) | (m & 0x7F); break;
        case ACL_DOUBLE:
          bits = (uint64_t(sign) << 63) | (uint64_t(1018 + e) << 52) | (uint64_t(m) << 20);
          break;
        case ACL_FLOAT: bits = (sign << 31) | ((122 + e) << 23) | (m & 0x7FFFFF); break;
        default: bits = m; break;
      }
    }
    std::memcpy(p + i * isz, &bits, isz);  // little-endian: the low bytes
  }
}

// One tensor: its own exactly-sized heap buffer (or another tensor's, when aliasing).
struct FuzzTensor {
  aclTensor* handle = nullptr;
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  aclDataType dtype = ACL_FLOAT;
  std::shared_ptr<std::vector<uint8_t>> buffer;  // owner (shared when aliasing)
  bool is_output = false;
  bool written = true;  // an output the op fills (false: masked off)
};

int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

aclDataType pick_dtype(FuzzedDataProvider& fdp, aclDataType common) {
  switch (rare_first(fdp, 31)) {
    case 0: return ACL_FLOAT;
    case 1: return ACL_FLOAT16;
    case 2: return ACL_BF16;
    case 3: return fdp.ConsumeBool() ? ACL_DOUBLE : ACL_INT32;
    case 4: return static_cast<aclDataType>(fdp.ConsumeIntegralInRange<int>(-1, 40));
    default: return common;  // usually the op's common dtype, so calls get past the dtype rules
  }
}

// Perturbs a planned shape now and then: a dim off by one, a dim dropped or added, a zero.
std::vector<int64_t> perturb(FuzzedDataProvider& fdp, std::vector<int64_t> dims) {
  switch (rare_first(fdp, 39)) {
    case 0:
      if (!dims.empty()) dims[fdp.ConsumeIntegralInRange<size_t>(0, dims.size() - 1)] += fdp.ConsumeBool() ? 1 : -1;
      break;
    case 1: if (!dims.empty()) dims.pop_back(); break;
    case 2: dims.insert(dims.begin(), fdp.ConsumeIntegralInRange<int64_t>(0, 3)); break;
    case 3: if (!dims.empty()) dims[fdp.ConsumeIntegralInRange<size_t>(0, dims.size() - 1)] = 0; break;
    case 4: {  // any shape at all, up to 9 dims
      dims.assign(fdp.ConsumeIntegralInRange<size_t>(0, 9), 1);
      for (auto& d : dims) d = fdp.ConsumeIntegralInRange<int64_t>(0, 4);
      break;
    }
    default: break;
  }
  for (auto& d : dims) d = std::max<int64_t>(d, 0);
  return dims;
}

class Harness {
 public:
  explicit Harness(FuzzedDataProvider& fdp) : fdp_(fdp) {}
  ~Harness() {
    for (auto& t : tensors_) aclDestroyTensor(t->handle);
    for (auto* a : arrays_) aclDestroyBoolArray(a);
  }

  // Builds a tensor of `dims` (perturbed) with a fuzzed layout, or returns null now and then.
  // Inputs get any strides (negative, zero); outputs usually non-overlapping ones.
  aclTensor* tensor(std::vector<int64_t> dims, aclDataType common, bool is_output, bool may_be_null = true) {
    if (may_be_null && rare(fdp_, 40)) return nullptr;
    auto t = std::make_unique<FuzzTensor>();
    t->is_output = is_output;
    t->dims = perturb(fdp_, std::move(dims));
    t->dtype = pick_dtype(fdp_, common);
    const size_t rank = t->dims.size();
    if (numel_of(t->dims) > kMaxElements) return nullptr;

    // Strides: contiguous (passed as null or explicitly), or per dim a fuzzed multiple/sign.
    bool null_strides = false;
    t->strides.assign(rank, 0);
    int layout = fdp_.ConsumeIntegralInRange<int>(0, 5);
    int64_t run = 1;
    for (size_t k = rank; k-- > 0;) {
      int64_t s = run;
      if (layout >= 3) {
        int mode = rare_first(fdp_, 5);
        if (mode == 0) s = -run;                                   // reversed
        else if (mode == 1) s = run * fdp_.ConsumeIntegralInRange<int64_t>(2, 3);  // sliced
        else if (mode == 2 && !is_output) s = 0;                   // broadcast
        else if (mode == 3) s = fdp_.ConsumeIntegralInRange<int64_t>(-5, 5);  // anything
      }
      t->strides[k] = s;
      run *= std::max<int64_t>(t->dims[k], 1);
      if (layout >= 3 && s != 0) run = std::max(run, std::abs(s) * std::max<int64_t>(t->dims[k], 1));
    }
    if (layout == 0) null_strides = true;

    // Extent of the element indices the layout reaches, relative to element [0, ..., 0].
    int64_t lo = 0, hi = 0;
    bool empty = numel_of(t->dims) == 0;
    for (size_t k = 0; k < rank && !empty; ++k) {
      int64_t span = (t->dims[k] - 1) * t->strides[k];
      (span < 0 ? lo : hi) += span;
    }
    t->offset = -lo + fdp_.ConsumeIntegralInRange<int64_t>(0, 2);
    const size_t isz = item_size(t->dtype);
    const size_t count = empty ? 0 : static_cast<size_t>(t->offset + hi + 1);

    // Aliasing: an output placed over an earlier tensor's buffer (phase 1 must refuse it).
    if (!tensors_.empty() && rare(fdp_, 15)) {
      auto& other = tensors_[fdp_.ConsumeIntegralInRange<size_t>(0, tensors_.size() - 1)];
      if (other->buffer && other->buffer->size() >= count * isz) t->buffer = other->buffer;
    }
    if (!t->buffer) {
      t->buffer = std::make_shared<std::vector<uint8_t>>(count * isz);
      fill_values(fdp_, t->dtype, t->buffer->data(), count);
    }
    // A tensor without elements may carry a null data pointer (the API allows it).
    void* data = t->buffer->empty() && fdp_.ConsumeBool() ? nullptr : t->buffer->data();
    if (data == nullptr && !empty) data = t->buffer->data();
    if (t->buffer->empty()) {
      // std::vector may hand out null for size 0; give a tensor without elements a real address.
      static uint8_t scratch[16];
      if (data == nullptr && fdp_.ConsumeBool()) data = scratch;
    }
    int64_t storage = static_cast<int64_t>(count);
    t->handle = aclCreateTensor(t->dims.data(), rank, t->dtype, null_strides ? nullptr : t->strides.data(),
                                t->offset, ACL_FORMAT_ND, &storage, 1, data);
    if (t->handle == nullptr) return nullptr;  // refused at creation (e.g. null data with elements)
    if (verbose()) {  // FUZZ_VERBOSE=1: describe each tensor, to turn a crash into a test
      std::fprintf(stderr, "%s dtype %d dims [", is_output ? "out" : "in ", int(t->dtype));
      for (size_t k = 0; k < rank; ++k) std::fprintf(stderr, "%lld ", (long long)t->dims[k]);
      std::fprintf(stderr, "] strides [");
      for (size_t k = 0; k < rank; ++k) std::fprintf(stderr, "%lld ", (long long)t->strides[k]);
      std::fprintf(stderr, "]%s offset %lld, %zu bytes\n", null_strides ? " (null)" : "", (long long)t->offset,
                   t->buffer->size());
    }
    if (is_output && rare(fdp_, 30)) aclnnCpuSetTensorReadOnly(t->handle, true);
    aclTensor* h = t->handle;
    tensors_.push_back(std::move(t));
    return h;
  }

  aclBoolArray* mask(size_t declared) {
    if (rare(fdp_, 40)) return nullptr;
    size_t size = rare(fdp_, 12) ? fdp_.ConsumeIntegralInRange<size_t>(0, 4) : declared;
    bool values[4] = {true, true, true, true};
    for (size_t i = 0; i < size; ++i) values[i] = fdp_.ConsumeIntegralInRange<int>(0, 3) != 0;
    mask_values_.assign(values, values + size);
    aclBoolArray* a = aclCreateBoolArray(size ? values : nullptr, size);
    if (a) arrays_.push_back(a);
    return a;
  }

  int64_t attribute(int64_t planned) {
    switch (rare_first(fdp_, 23)) {
      case 0: return fdp_.ConsumeIntegral<int64_t>();
      case 1: return fdp_.ConsumeBool() ? INT64_MIN : INT64_MAX;
      case 2: return planned + fdp_.ConsumeIntegralInRange<int64_t>(-3, 3);
      default: return planned;
    }
  }

  void snapshot() {
    for (auto& t : tensors_) before_.push_back(*t->buffer);
  }
  // An output the op must leave alone (its mask flag is false).
  void mark_unwritten(const aclTensor* handle) {
    for (auto& t : tensors_)
      if (t->handle == handle) t->written = false;
  }
  bool mask_flag(size_t i) const { return i < mask_values_.size() && mask_values_[i]; }

  // Every changed byte must lie in the view of an output the op writes, and in no input's view;
  // when the call was refused (`outputs_may_change` false) no byte may change at all.
  void check_buffers(bool outputs_may_change) {
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const auto& buf = tensors_[i]->buffer;
      if (*buf == before_[i]) continue;
      if (!outputs_may_change) finding("a buffer changed although the call was refused");
      std::vector<uint8_t> allowed(buf->size(), 0);
      for (const auto& u : tensors_)
        if (u->buffer == buf && u->is_output && u->written) mark_view(*u, allowed, 1);
      for (const auto& u : tensors_)
        if (u->buffer == buf && !u->is_output) mark_view(*u, allowed, 0);
      for (size_t b = 0; b < buf->size(); ++b)
        if ((*buf)[b] != before_[i][b] && !allowed[b])
          finding(tensors_[i]->is_output ? "a byte outside the written outputs' views changed"
                                         : "an input buffer changed");
    }
  }

 private:
  static void mark_view(const FuzzTensor& t, std::vector<uint8_t>& marks, uint8_t value) {
    const int64_t n = numel_of(t.dims);
    const size_t isz = item_size(t.dtype);
    std::vector<int64_t> idx(t.dims.size(), 0);
    for (int64_t e = 0; e < n; ++e) {
      int64_t pos = t.offset;
      for (size_t k = 0; k < idx.size(); ++k) pos += idx[k] * t.strides[k];
      for (size_t b = 0; b < isz && (pos * isz + b) < marks.size(); ++b) marks[pos * isz + b] = value;
      for (size_t k = idx.size(); k-- > 0;) {
        if (++idx[k] < t.dims[k]) break;
        idx[k] = 0;
      }
    }
  }

 private:
  FuzzedDataProvider& fdp_;
  std::vector<std::unique_ptr<FuzzTensor>> tensors_;
  std::vector<aclBoolArray*> arrays_;
  std::vector<std::vector<uint8_t>> before_;
  std::vector<bool> mask_values_;
};

void check_phase1_status(aclnnStatus s) {
  if (s != ACLNN_SUCCESS && s != ACLNN_ERR_PARAM_NULLPTR && s != ACLNN_ERR_PARAM_INVALID &&
      s != ACLNN_ERR_INNER)
    finding("phase 1 returned an undocumented status");
  if (s != ACLNN_SUCCESS && std::strlen(aclGetRecentErrMsg()) == 0) finding("a failure without a message");
}

using Phase2 = aclnnStatus (*)(void*, uint64_t, aclOpExecutor*, aclrtStream);

// Phase 2 with a workspace of the reported size; sometimes too small, or repeatable and run twice.
void run_phase2(FuzzedDataProvider& fdp, Harness& h, Phase2 run, uint64_t ws_size, aclOpExecutor* ex) {
  if (ws_size > kMaxWorkspace) {
    aclDestroyAclOpExecutor(ex);
    return;
  }
  int mode = rare_first(fdp, 9);
  if (mode == 0 && ws_size > 0) {  // too small: refused, nothing written
    uint64_t small = fdp.ConsumeIntegralInRange<uint64_t>(0, ws_size - 1);
    std::vector<uint8_t> ws(small);
    aclnnStatus s = run(small ? ws.data() : nullptr, small, ex, nullptr);
    if (s == ACLNN_SUCCESS) finding("phase 2 accepted a workspace smaller than reported");
    h.check_buffers(false);
    aclDestroyAclOpExecutor(ex);
    return;
  }
  bool repeat = mode == 1;
  if (repeat && aclSetAclOpExecutorRepeatable(ex) != ACLNN_SUCCESS) finding("aclSetAclOpExecutorRepeatable failed");
  std::unique_ptr<uint8_t[]> ws(ws_size ? new uint8_t[ws_size] : nullptr);
  if (ws_size) std::memset(ws.get(), 0xA5, ws_size);
  for (int i = 0; i < (repeat ? 2 : 1); ++i) {
    aclnnStatus s = run(ws.get(), ws_size, ex, nullptr);
    if (s != ACLNN_SUCCESS) finding("phase 2 failed on a planned executor with a full workspace");
  }
  if (repeat) aclDestroyAclOpExecutor(ex);
  else if (run(ws.get(), ws_size, ex, nullptr) == ACLNN_SUCCESS) finding("a consumed executor ran again");
  h.check_buffers(true);
}

void fuzz_softmax(FuzzedDataProvider& fdp, Harness& h, aclDataType dt) {
  std::vector<int64_t> shape(fdp.ConsumeIntegralInRange<size_t>(0, 8));
  for (auto& d : shape) d = fdp.ConsumeIntegralInRange<int64_t>(0, 4);
  aclTensor* g = h.tensor(shape, dt, false);
  aclTensor* y = h.tensor(shape, dt, false);
  aclDataType out_dt = rare(fdp, 3) ? ACL_DOUBLE : dt;
  aclTensor* out = h.tensor(shape, out_dt, true);
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t dim = h.attribute(fdp.ConsumeIntegralInRange<int64_t>(-std::max<int64_t>(rank, 1), std::max<int64_t>(rank, 1) - 1));
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  bool null_out_ptrs = rare(fdp, 50);
  h.snapshot();
  aclnnStatus s = aclnnSoftmaxBackwardGetWorkspaceSize(g, y, dim, out, null_out_ptrs ? nullptr : &ws,
                                                       null_out_ptrs ? nullptr : &ex);
  check_phase1_status(s);
  h.check_buffers(false);
  if (s == ACLNN_SUCCESS) run_phase2(fdp, h, aclnnSoftmaxBackward, ws, ex);
}

void fuzz_prelu(FuzzedDataProvider& fdp, Harness& h, aclDataType dt) {
  std::vector<int64_t> shape(fdp.ConsumeIntegralInRange<size_t>(0, 8));
  for (auto& d : shape) d = fdp.ConsumeIntegralInRange<int64_t>(0, 4);
  // gradOutput: self's shape, or a broadcastable one (leading dims dropped, some dims 1).
  std::vector<int64_t> gshape = shape;
  if (fdp.ConsumeBool()) {
    gshape.erase(gshape.begin(), gshape.begin() + fdp.ConsumeIntegralInRange<size_t>(0, gshape.size()));
    for (auto& d : gshape) if (fdp.ConsumeBool()) d = 1;
  }
  int64_t channels = shape.size() >= 2 ? shape[1] : 1;
  std::vector<int64_t> wshape = fdp.ConsumeBool() ? std::vector<int64_t>{channels} : std::vector<int64_t>{};
  if (rare(fdp, 5)) wshape = {1, 1};
  int64_t wn = numel_of(wshape);
  std::vector<int64_t> gw_shape = wn == 1 ? wshape : std::vector<int64_t>{wn};
  aclTensor* g = h.tensor(gshape, dt, false);
  aclTensor* x = h.tensor(shape, dt, false);
  aclTensor* w = h.tensor(wshape, dt, false);
  aclTensor* gi = h.tensor(shape, dt, true);
  aclTensor* gw = h.tensor(gw_shape, dt, true);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  h.snapshot();
  aclnnStatus s = aclnnPreluBackwardGetWorkspaceSize(g, x, w, gi, gw, &ws, &ex);
  check_phase1_status(s);
  h.check_buffers(false);
  if (s == ACLNN_SUCCESS) run_phase2(fdp, h, aclnnPreluBackward, ws, ex);
}

void fuzz_group_norm(FuzzedDataProvider& fdp, Harness& h, aclDataType dt) {
  int64_t N = fdp.ConsumeIntegralInRange<int64_t>(0, 4);
  int64_t group = fdp.ConsumeIntegralInRange<int64_t>(1, 4);
  int64_t C = group * fdp.ConsumeIntegralInRange<int64_t>(0, 3);
  std::vector<int64_t> rest(fdp.ConsumeIntegralInRange<size_t>(0, 4));
  for (auto& d : rest) d = fdp.ConsumeIntegralInRange<int64_t>(0, 5);
  int64_t HxW = numel_of(rest);
  std::vector<int64_t> xshape = {N, C};
  xshape.insert(xshape.end(), rest.begin(), rest.end());
  if (rare(fdp, 7)) xshape = {N * C * HxW};  // any shape with the count
  std::vector<int64_t> stat_shape = fdp.ConsumeBool() ? std::vector<int64_t>{N, group} : std::vector<int64_t>{N * group};
  bool with_gamma = fdp.ConsumeIntegralInRange<int>(0, 3) != 0;
  aclTensor* dy = h.tensor(xshape, dt, false);
  aclTensor* x = h.tensor(xshape, dt, false);
  aclTensor* mean = h.tensor(stat_shape, dt, false);
  aclTensor* rstd = h.tensor(stat_shape, dt, false);
  aclTensor* gamma = with_gamma ? h.tensor({C}, dt, false) : nullptr;
  aclBoolArray* mask = h.mask(3);
  aclTensor* dx = h.tensor(xshape, dt, true);
  aclTensor* dgamma = h.tensor({C}, dt, true);
  aclTensor* dbeta = h.tensor({C}, dt, true);
  int64_t aN = h.attribute(N), aC = h.attribute(C), aHxW = h.attribute(HxW), agroup = h.attribute(group);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  h.snapshot();
  aclnnStatus s = aclnnGroupNormBackwardGetWorkspaceSize(dy, x, mean, rstd, gamma, aN, aC, aHxW, agroup, mask,
                                                         dx, dgamma, dbeta, &ws, &ex);
  check_phase1_status(s);
  h.check_buffers(false);
  if (s != ACLNN_SUCCESS) return;
  if (!h.mask_flag(0)) h.mark_unwritten(dx);
  if (!h.mask_flag(1)) h.mark_unwritten(dgamma);
  if (!h.mask_flag(2)) h.mark_unwritten(dbeta);
  run_phase2(fdp, h, aclnnGroupNormBackward, ws, ex);
}

void fuzz_grid_sampler(FuzzedDataProvider& fdp, Harness& h, aclDataType dt) {
  int64_t N = fdp.ConsumeIntegralInRange<int64_t>(0, 3), C = fdp.ConsumeIntegralInRange<int64_t>(0, 3);
  int64_t Hin = fdp.ConsumeIntegralInRange<int64_t>(1, 6), Win = fdp.ConsumeIntegralInRange<int64_t>(1, 6);
  int64_t Hout = fdp.ConsumeIntegralInRange<int64_t>(0, 5), Wout = fdp.ConsumeIntegralInRange<int64_t>(0, 5);
  aclTensor* dy = h.tensor({N, C, Hout, Wout}, dt, false);
  aclTensor* x = h.tensor({N, C, Hin, Win}, dt, false);
  aclTensor* grid = h.tensor({N, Hout, Wout, 2}, dt, false);
  int64_t interp = h.attribute(fdp.ConsumeIntegralInRange<int64_t>(0, 2));
  int64_t padding = h.attribute(fdp.ConsumeIntegralInRange<int64_t>(0, 2));
  bool align = fdp.ConsumeBool();
  aclBoolArray* mask = h.mask(2);
  aclTensor* dx = h.tensor({N, C, Hin, Win}, dt, true);
  aclTensor* dgrid = h.tensor({N, Hout, Wout, 2}, dt, true);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  h.snapshot();
  aclnnStatus s = aclnnGridSampler2DBackwardGetWorkspaceSize(dy, x, grid, interp, padding, align, mask, dx, dgrid,
                                                             &ws, &ex);
  check_phase1_status(s);
  h.check_buffers(false);
  if (s != ACLNN_SUCCESS) return;
  if (!h.mask_flag(0)) h.mark_unwritten(dx);
  if (!h.mask_flag(1)) h.mark_unwritten(dgrid);
  run_phase2(fdp, h, aclnnGridSampler2DBackward, ws, ex);
}

}  // namespace

// FUZZ_OP=<0..3> restricts the run to one op (softmax, prelu, group norm, grid sampler).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int only_op = [] {
    const char* v = std::getenv("FUZZ_OP");
    return v ? std::atoi(v) : -1;
  }();
  FuzzedDataProvider fdp(data, size);
  int op = fdp.ConsumeIntegralInRange<int>(0, 3);
  if (only_op >= 0) op = only_op;
  static const aclDataType kCommon[3] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
  aclDataType dt = kCommon[fdp.ConsumeIntegralInRange<int>(0, 2)];
  Harness h(fdp);
  switch (op) {
    case 0: fuzz_softmax(fdp, h, dt); break;
    case 1: fuzz_prelu(fdp, h, dt); break;
    case 2: fuzz_group_norm(fdp, h, dt); break;
    default: fuzz_grid_sampler(fdp, h, dt); break;
  }
  return 0;
}
