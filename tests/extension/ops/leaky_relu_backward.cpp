// tests/extension: out = self > 0 ? gradOutput : negativeSlope * gradOutput (CANN's
// aclnnLeakyReluBackward), the general strided path of docs/contract.md's "Writing a kernel".
#include <cstdint>

#include "aclnn_cpu/flat_values.h"
#include "aclnn_cpu/ops/leaky_relu_backward_args.h"
#include "aclnn_cpu/parallel.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

template <class T>
void run(const LeakyReluBackwardArgs& a) {
  const FlatIndex fg(a.gradOutput), fx(a.self), fo(a.out);
  const T* g = a.gradOutput.ptr<const T>();
  const T* x = a.self.ptr<const T>();
  T* out = a.out.ptr<T>();
  // The slope in fp32, as every other operand of the arithmetic.
  const float slope = static_cast<float>(a.negativeSlope.value);
  parallel_for(a.self.numel(), 16384, [&](int64_t begin, int64_t end) {
    Cursor cg(fg, begin), cx(fx, begin), co(fo, begin);
    for (int64_t i = begin; i < end; ++i, cg.next(), cx.next(), co.next()) {
      const float gv = simd::to_float(g[cg.off]);
      out[co.off] = simd::from_float<T>(simd::to_float(x[cx.off]) > 0.0f ? gv : gv * slope);
    }
  });
}

}  // namespace

uint64_t leaky_relu_backward_workspace(const LeakyReluBackwardArgs&) { return 0; }

aclnnStatus leaky_relu_backward(const LeakyReluBackwardArgs& a, void*) {
  switch (a.self.dtype) {
    case DType::Float32: run<float>(a); return kSuccess;
    case DType::Float16: run<half_t>(a); return kSuccess;
    case DType::BFloat16: run<bfloat16_t>(a); return kSuccess;
    default: return kInner;
  }
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
