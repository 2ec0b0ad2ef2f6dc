// The SIMD conversions of simd.h, reachable on their own so tests can check every level's
// loads and stores bit for bit against ml_dtypes/NumPy (aclnn_cpu._config.simd_convert). Not a
// kernel and not part of the C API. Compiled once per ISA level, like ops/; the baseline copy
// also holds the dispatcher (aclnn_cpu_simd_selftest_convert), which exists once.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "aclnn_cpu/isa.h"
#include "aclnn_cpu/simd.h"
#include "aclnn_cpu/vocabulary.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

using namespace simd;

// Single vectors: whole vectors, then one partial tail.
template <class S, class D>
void convert_vectors(const S* src, D* dst, int64_t n) {
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth) store(dst + i, load(src + i));
  if (i < n) store_partial(dst + i, load_partial(src + i, n - i), n - i);
}

// The pair of S at src (load_pair) in D's pair order. When the two layouts differ the lanes are
// reordered through a buffer, so each side's pair order is exercised on its own.
template <class D, class S>
Pair pair_for(const S* src) {
  constexpr int64_t kPair = 2 * kWidth;
  Pair v = load_pair(src);
  if constexpr (!kSameLayout<S, D>) {
    alignas(64) float element[kPair], a[kWidth], b[kWidth];
    store(a, v.a);
    store(b, v.b);
    for (int k = 0; k < kWidth; ++k) {  // back to element order ...
      element[kSplitPair<S> ? 2 * k : k] = a[k];
      element[kSplitPair<S> ? 2 * k + 1 : k + kWidth] = b[k];
    }
    for (int k = 0; k < kWidth; ++k) {  // ... and into D's pair order
      a[k] = element[kSplitPair<D> ? 2 * k : k];
      b[k] = element[kSplitPair<D> ? 2 * k + 1 : k + kWidth];
    }
    v = Pair{load(static_cast<const float*>(a)), load(static_cast<const float*>(b))};
  }
  return v;
}

// Pairs: each block of 2 * kWidth elements goes through load_pair of S and store_pair of D
// (pair_for). The tail goes through single vectors.
template <bool kStream, class S, class D>
void convert_pairs(const S* src, D* dst, int64_t n) {
  constexpr int64_t kPair = 2 * kWidth;
  int64_t i = 0;
  if (kStream) {  // store normally up to the pair stream alignment
    for (const int64_t head = head_to<kPairStreamAlign<D>>(dst, n); i < head; ++i) dst[i] = from_float<D>(to_float(src[i]));
  }
  for (; i + kPair <= n; i += kPair) {
    const Pair v = pair_for<D>(src + i);
    if (kStream) stream_pair(dst + i, v);
    else store_pair(dst + i, v);
  }
  if (kStream) stream_fence();
  convert_vectors(src + i, dst + i, n - i);
}

// Through a streaming cursor (StreamCursor<true>): rows of `row` elements (0: one row of n),
// each a store_run (or store_run_pairs) of its own, taken in order (consecutive puts join
// across rows) or last row first (each row a jump); one flush and fence at the end.
template <class S, class D>
void convert_cursor(const S* src, D* dst, int64_t n, bool pairs, bool reverse, int64_t row) {
  if (row <= 0 || row > n) row = n;
  const int64_t rows = row > 0 ? (n + row - 1) / row : 0;
  StreamCursor<true> cursor;
  for (int64_t k = 0; k < rows; ++k) {
    const int64_t r = reverse ? rows - 1 - k : k, at = r * row, len = std::min(row, n - at);
    const S* s = src + at;
    const auto value = [&](int64_t i, int64_t count) {
      return count == kWidth ? load(s + i) : load_partial(s + i, count);
    };
    if (pairs) store_run_pairs(cursor, dst + at, len, [&](int64_t i) { return pair_for<D>(s + i); }, value);
    else store_run(cursor, dst + at, len, value);
  }
  cursor.flush();
  stream_fence();
}

template <class S, class D>
void convert_typed(const void* src, void* dst, int64_t n, int path) {
  const S* s = static_cast<const S*>(src);
  D* d = static_cast<D*>(dst);
  if (path == 0) convert_vectors(s, d, n);
  else if (path == 1) convert_pairs<false>(s, d, n);
  else if (path == 2) convert_pairs<true>(s, d, n);
  else if (path == 3)  // the scalar conversions (half.h) the kernels use element by element
    for (int64_t i = 0; i < n; ++i) d[i] = from_float<D>(to_float(s[i]));
  else
    convert_cursor(s, d, n, (path & 1) != 0, (path & 2) != 0, path >> 8);
}

template <class S>
bool convert_from(int to, const void* src, void* dst, int64_t n, int path) {
  switch (static_cast<DType>(to)) {
    case DType::Float32: convert_typed<S, float>(src, dst, n, path); return true;
    case DType::Float16: convert_typed<S, half_t>(src, dst, n, path); return true;
    case DType::BFloat16: convert_typed<S, bfloat16_t>(src, dst, n, path); return true;
    default: return false;
  }
}

// exp over n values, whole vectors then a tail through a zero-padded buffer.
template <class M, class V, int kLanes>
void exp_all(const M* src, M* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    M buffer[kLanes] = {};
    const int64_t count = std::min<int64_t>(kLanes, n - i);
    std::memcpy(buffer, src + i, count * sizeof(M));
    V v;
    std::memcpy(&v, buffer, sizeof v);
    v = exp(v);
    std::memcpy(buffer, &v, sizeof v);
    std::memcpy(dst + i, buffer, count * sizeof(M));
  }
}

}  // namespace

// simd.h's exp: double_precision false: fp32 lanes (VecF), true: fp64 lanes (VecD).
void simd_selftest_exp(bool double_precision, const void* src, void* dst, int64_t n) {
  if (double_precision) exp_all<double, VecD, kWidthD>(static_cast<const double*>(src), static_cast<double*>(dst), n);
  else exp_all<float, VecF, kWidth>(static_cast<const float*>(src), static_cast<float*>(dst), n);
}

// from/to: aclDataType codes of float32, float16, bfloat16; path: 0 vectors, 1 pairs, 2 streamed
// pairs, 3 scalar; 4 + (1 pairs) + (2 rows last first) + 256 * row: through a StreamCursor in
// rows of `row` elements (convert_cursor).
bool simd_selftest_convert(int from, int to, const void* src, void* dst, int64_t n, int path) {
  switch (static_cast<DType>(from)) {
    case DType::Float32: return convert_from<float>(to, src, dst, n, path);
    case DType::Float16: return convert_from<half_t>(to, src, dst, n, path);
    case DType::BFloat16: return convert_from<bfloat16_t>(to, src, dst, n, path);
    default: return false;
  }
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu

#if ACLNN_ISA_LEVEL == 0
// ---------------------------------------------------------------------------------------------
// Dispatch to the active level (in the baseline object only).

namespace aclnn_cpu {
#define ACLNN_DECLARE_SELFTEST(name, level) \
  namespace isa_##name { \
  bool simd_selftest_convert(int from, int to, const void* src, void* dst, int64_t n, int path); \
  void simd_selftest_exp(bool double_precision, const void* src, void* dst, int64_t n); \
  }
ACLNN_FOR_EACH_COMPILED_ISA(ACLNN_DECLARE_SELFTEST)
#undef ACLNN_DECLARE_SELFTEST
}  // namespace aclnn_cpu

// Converts n elements with the active level's simd.h loads and stores. Returns 0, or -1 for
// an unknown dtype or path code. For tests only (see the per-level file).
extern "C" __attribute__((visibility("default"))) int aclnn_cpu_simd_selftest_convert(
    int from, int to, const void* src, void* dst, int64_t n, int path) {
  using namespace aclnn_cpu;
  if (path < 0 || (path & 255) > 7 || (path >= 256 && (path & 255) < 4) || n < 0) return -1;
  bool ok = false;
  switch (active_isa()) {
#define ACLNN_DISPATCH_SELFTEST(name, level) \
    case Isa::level: ok = isa_##name::simd_selftest_convert(from, to, src, dst, n, path); break;
    ACLNN_FOR_EACH_COMPILED_ISA(ACLNN_DISPATCH_SELFTEST)
#undef ACLNN_DISPATCH_SELFTEST
    default: ok = isa_baseline::simd_selftest_convert(from, to, src, dst, n, path); break;
  }
  return ok ? 0 : -1;
}

// dst = exp(src) for n float32 (double_precision 0) or float64 (1) values with the active
// level's simd.h exp. For tests only.
extern "C" __attribute__((visibility("default"))) void aclnn_cpu_simd_selftest_exp(
    int double_precision, const void* src, void* dst, int64_t n) {
  using namespace aclnn_cpu;
  switch (active_isa()) {
#define ACLNN_DISPATCH_SELFTEST(name, level) \
    case Isa::level: return isa_##name::simd_selftest_exp(double_precision != 0, src, dst, n);
    ACLNN_FOR_EACH_COMPILED_ISA(ACLNN_DISPATCH_SELFTEST)
#undef ACLNN_DISPATCH_SELFTEST
    default: return isa_baseline::simd_selftest_exp(double_precision != 0, src, dst, n);
  }
}
#endif  // ACLNN_ISA_LEVEL == 0
