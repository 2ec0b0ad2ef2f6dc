// tests/extension: out = dy / (x (1 - x)) where eps <= x <= 1 - eps, else 0; with eps < 0, NaN
// where x lies outside [0, 1] (CANN's aclnnLogitGrad, PyTorch's logit_backward).
#include <cstdint>
#include <limits>

#include "aclnn_cpu/flat_values.h"
#include "aclnn_cpu/ops/logit_grad_args.h"
#include "aclnn_cpu/parallel.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

template <class T>
void run(const LogitGradArgs& a) {
  const FlatIndex fx(a.x), fd(a.dy), fo(a.out);
  const T* x = a.x.ptr<const T>();
  const T* dy = a.dy.ptr<const T>();
  T* out = a.out.ptr<T>();
  const bool clamp = a.eps >= 0.0;
  // The bounds in fp32, as PyTorch's float kernel compares them.
  const float lo = clamp ? static_cast<float>(a.eps) : 0.0f;
  const float hi = clamp ? 1.0f - lo : 1.0f;
  const float outside = clamp ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  parallel_for(a.x.numel(), 16384, [&](int64_t begin, int64_t end) {
    Cursor cx(fx, begin), cd(fd, begin), co(fo, begin);
    for (int64_t i = begin; i < end; ++i, cx.next(), cd.next(), co.next()) {
      const float v = simd::to_float(x[cx.off]);
      const float g = simd::to_float(dy[cd.off]);
      out[co.off] = simd::from_float<T>(v < lo || v > hi ? outside : g / (v * (1.0f - v)));
    }
  });
}

}  // namespace

uint64_t logit_grad_workspace(const LogitGradArgs&) { return 0; }

aclnnStatus logit_grad(const LogitGradArgs& a, void*) {
  switch (a.x.dtype) {
    case DType::Float32: run<float>(a); return kSuccess;
    case DType::Float16: run<half_t>(a); return kSuccess;
    case DType::BFloat16: run<bfloat16_t>(a); return kSuccess;
    default: return kInner;
  }
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
