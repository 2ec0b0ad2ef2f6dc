// How much of the last-level cache this guest really gets, and whether the core itself slows
// down when the kernels do. docs/performance.md ("Targets missed", the slow mode) quotes it.
//   * chase: a random cyclic pointer chase over 1-16 MiB, ns per dependent load (median of
//     windows of 100000 loads). Within the L3 share a load takes 10-20 ns; past it, DRAM's
//     70-150 ns.
//   * alu: a dependent integer multiply chain in windows of 2 million steps; the window medians
//     over time show whether the core's speed moves (it did not, while memory-bound calls
//     swung by 2x).
// Build and run (any x86-64 or other 64-bit target):
//   g++ -O2 cache_share.cpp -o cache_share && ./cache_share
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ns per load of a random single cycle through `mib` MiB of 8-byte slots.
double chase_ns(size_t mib, int windows) {
  const size_t n = mib * (1u << 20) / sizeof(uint64_t);
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin() + 1, order.end(), std::mt19937_64(1));
  std::vector<uint64_t> next(n);
  for (size_t i = 0; i < n; ++i) next[order[i]] = order[(i + 1) % n];  // one cycle over all slots
  constexpr int kLoads = 100000;
  uint64_t p = 0;
  for (int i = 0; i < kLoads; ++i) p = next[p];  // warm up
  std::vector<double> t;
  for (int w = 0; w < windows; ++w) {
    const double t0 = now();
    for (int i = 0; i < kLoads; ++i) p = next[p];
    t.push_back((now() - t0) / kLoads * 1e9);
  }
  if (p == n) std::printf(" ");  // keeps the chase
  return median(t);
}

}  // namespace

int main() {
  std::printf("pointer chase (ns per load):");
  for (size_t mib : {1, 2, 3, 4, 6, 8, 16}) std::printf("  %zu MiB %.0f", mib, chase_ns(mib, 60));
  std::printf("\n");

  std::printf("alu chain, ms per window (medians of 50 windows):");
  volatile uint64_t sink = 0;
  for (int block = 0; block < 8; ++block) {
    std::vector<double> t;
    for (int w = 0; w < 50; ++w) {
      const double t0 = now();
      uint64_t a = uint64_t(w), b = 3;
      for (long i = 0; i < 2000000; ++i) {
        a = a * 6364136223846793005ULL + b;
        b ^= a >> 17;
      }
      sink = sink + a + b;
      t.push_back((now() - t0) * 1e3);
    }
    std::printf(" %.3f", median(t));
  }
  std::printf("\n");
  return 0;
}
