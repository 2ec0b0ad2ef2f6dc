// GroupNorm backward N2 C1280 16x16 G32 fp32 through the C API, interleaved in one process with
// bare loops of the same work, so that what the op adds to the loop shows without Python or the
// benchmark's noise between processes:
//   op        phase 1 + phase 2 of aclnnGroupNormBackward (all three outputs);
//   grouped   one task per (n, group): plane sums, then dX over the group (the op's schedule);
//   sums      the sums pass alone over all groups (reads dY and X from L3);
//   write     the write pass alone over all groups (reads dY and X from L3, writes dX);
//   backward  grouped, with dX written plane by plane from the group's last channel (the op's
//             order for fp32 groups over the L1: it starts on what the sums pass left there).
// docs/performance.md ("Targets missed") reads these. Build and run (x86-64 with AVX-512, the
// package installed):
//   P=$(python -c "import aclnn_cpu,os;print(os.path.dirname(aclnn_cpu.__file__))")
//   g++ -O2 -march=native -fopenmp group_norm_op_vs_loop.cpp -I$P/include -L$P/lib
//       -laclnn_cpu -Wl,-rpath,$P/lib -o gnop && OMP_NUM_THREADS=2 ./gnop [misalign [dx_misalign]]
// misalign (floats, default 0) puts dY and X that far past a 64-byte line (NumPy: 4);
// dx_misalign (floats, default 0) does the same for dX.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_group_norm_backward.h"

namespace {

constexpr long kN = 2, kC = 1280, kHW = 256, kG = 32, kD = kC / kG;
constexpr long kCount = kN * kC * kHW, kGroup = kD * kHW;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void plane_sums(const float* dy, const float* x, float* out) {
  const __m512 m = _mm512_set1_ps(0.5f);
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, b0 = s0, b1 = s0;
  for (long i = 0; i < kHW; i += 32) {
    const __m512 d0 = _mm512_loadu_ps(dy + i), d1 = _mm512_loadu_ps(dy + i + 16);
    s0 = _mm512_fmadd_ps(d0, _mm512_sub_ps(_mm512_loadu_ps(x + i), m), s0);
    s1 = _mm512_fmadd_ps(d1, _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), m), s1);
    b0 = _mm512_add_ps(b0, d0);
    b1 = _mm512_add_ps(b1, d1);
  }
  out[0] = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
  out[1] = _mm512_reduce_add_ps(_mm512_add_ps(b0, b1));
}

void write_run(const float* dy, const float* x, float* dx, long len, float k) {
  const __m512 c = _mm512_set1_ps(k), m = _mm512_set1_ps(0.5f);
  for (long i = 0; i < len; i += 16)
    _mm512_storeu_ps(dx + i, _mm512_fmadd_ps(_mm512_loadu_ps(dy + i), c,
                                             _mm512_fmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), m), c, c)));
}

}  // namespace

int main(int argc, char** argv) {
  const int misalign = argc > 1 ? std::atoi(argv[1]) : 0;
  float* x = static_cast<float*>(std::aligned_alloc(4096, kCount * 4 + 4096)) + misalign;
  float* dy = static_cast<float*>(std::aligned_alloc(4096, kCount * 4 + 4096)) + misalign;
  const int dx_misalign = argc > 2 ? std::atoi(argv[2]) : 0;
  float* dx = static_cast<float*>(std::aligned_alloc(4096, kCount * 4 + 4096)) + dx_misalign;
  for (long i = 0; i < kCount; ++i) {
    x[i] = float(i % 977) * 1e-3f;
    dy[i] = float((i * 7) % 13) * 0.1f - 0.6f;
    dx[i] = 0.0f;
  }
  std::vector<float> mean(kN * kG, 0.5f), rstd(kN * kG, 1.1f), gamma(kC, 1.0f), dgamma(kC), dbeta(kC);
  std::vector<float> sums(2 * kN * kC);
  int64_t s3[3] = {kN, kC, kHW}, t3[3] = {kC * kHW, kHW, 1}, s2[2] = {kN, kG}, t2[2] = {kG, 1};
  int64_t s1[1] = {kC}, t1[1] = {1};
  const auto tensor = [](int nd, int64_t* shape, int64_t* strides, void* p) {
    return aclCreateTensor(shape, nd, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, nd, p);
  };
  aclTensor* t_dy = tensor(3, s3, t3, dy);
  aclTensor* t_x = tensor(3, s3, t3, x);
  aclTensor* t_dx = tensor(3, s3, t3, dx);
  aclTensor* t_mean = tensor(2, s2, t2, mean.data());
  aclTensor* t_rstd = tensor(2, s2, t2, rstd.data());
  aclTensor* t_gamma = tensor(1, s1, t1, gamma.data());
  aclTensor* t_dgamma = tensor(1, s1, t1, dgamma.data());
  aclTensor* t_dbeta = tensor(1, s1, t1, dbeta.data());
  const bool mask[3] = {true, true, true};
  aclBoolArray* t_mask = aclCreateBoolArray(mask, 3);
  std::vector<char> workspace(1 << 20);

  const char* names[5] = {"op", "grouped", "sums", "write", "backward"};
  std::vector<double> times[5];
  for (int round = 0; round < 500; ++round) {
    for (int v = 0; v < 5; ++v) {
      const double t0 = now();
      if (v == 0) {
        uint64_t bytes = 0;
        aclOpExecutor* executor = nullptr;
        int status = aclnnGroupNormBackwardGetWorkspaceSize(t_dy, t_x, t_mean, t_rstd, t_gamma, kN, kC, kHW, kG, t_mask,
                                                            t_dx, t_dgamma, t_dbeta, &bytes, &executor);
        if (status == 0) status = aclnnGroupNormBackward(workspace.data(), bytes, executor, nullptr);
        if (status != 0) {
          std::printf("status %d\n", status);
          return 1;
        }
      } else {
#pragma omp parallel for schedule(static)
        for (long g = 0; g < kN * kG; ++g) {
          const long at = g * kGroup;
          float total = 0.0f;
          if (v != 3)
            for (long c = 0; c < kD; ++c) {
              plane_sums(dy + at + c * kHW, x + at + c * kHW, &sums[2 * (g * kD + c)]);
              total += sums[2 * (g * kD + c)];
            }
          const float k = 1.0f + total * 1e-9f;
          if (v == 4) {
            for (long c = kD - 1; c >= 0; --c) write_run(dy + at + c * kHW, x + at + c * kHW, dx + at + c * kHW, kHW, k);
          } else if (v != 2) {
            write_run(dy + at, x + at, dx + at, kGroup, k);
          }
        }
      }
      times[v].push_back(now() - t0);
    }
  }
  std::printf("misalign %d / %d floats, medians of 500 interleaved rounds:", misalign, dx_misalign);
  for (int v = 0; v < 5; ++v) {
    std::sort(times[v].begin(), times[v].end());
    std::printf("  %s %.1f us", names[v], times[v][times[v].size() / 2] * 1e6);
  }
  std::printf("\n");
  return 0;
}
