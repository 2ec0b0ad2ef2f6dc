// Run-time ISA selection: the best level both this CPU and this build support, lowered by the
// ACLNN_CPU_ISA environment variable or set_active_isa().
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "aclnn_cpu/isa.h"
#include "runtime_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace aclnn_cpu {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// F16C straight from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know
// the name "f16c"; the AVX2 check below already covers the OS saving the YMM state.
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  return (ecx & (1u << 29)) != 0;
}
#endif

bool cpu_has_avx2_level() {
#if defined(__x86_64__) || defined(__i386__)
  // The builtin checks CPUID and, for AVX/AVX-512, that the OS saves the wider registers
  // (XGETBV), so a kernel without AVX state support reports false here.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
#else
  return false;
#endif
}

bool cpu_has_avx512_level() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return cpu_has_avx2_level() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

// AVX512-BF16 (vcvtneps2bf16), used by the level-2 bf16 stores when the build compiled it in.
bool cpu_has_avx512_bf16() {
#if (defined(__x86_64__) || defined(__i386__)) && defined(ACLNN_HAVE_AVX512BF16)
  // CPUID leaf 7 subleaf 1, EAX bit 5; the AVX-512 level check covers the OS state.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
  return cpu_has_avx512_level() && (eax & (1u << 5)) != 0;
#else
  return false;
#endif
}

bool initial_bf16_instructions() {
  const char* env = std::getenv("ACLNN_CPU_BF16_INSTRUCTIONS");
  return cpu_has_avx512_bf16() && !(env != nullptr && std::strcmp(env, "0") == 0);
}

// The best level compiled into this library (kernels exist only for these).
Isa best_built_isa() {
  Isa best = kIsaLevels[0];
  for (int i = 0; i < kIsaCount; ++i)
    if (kIsaCompiled[i]) best = kIsaLevels[i];
  return best;
}

Isa detect_best() {
  Isa cpu = cpu_has_avx512_level() ? Isa::Avx512
            : cpu_has_avx2_level() ? Isa::Avx2
                                   : Isa::Baseline;
  Isa built = best_built_isa();
  return static_cast<int>(cpu) < static_cast<int>(built) ? cpu : built;
}

bool parse_isa(const char* text, Isa* out) {
  for (Isa level : kIsaLevels) {
    if (std::strcmp(text, isa_name(level)) == 0) {
      *out = level;
      return true;
    }
  }
  return false;
}

// The level at start-up: the best one, lowered by ACLNN_CPU_ISA. A level above the best is
// clamped to the best (so scripts can ask for avx512 everywhere); an unknown value is ignored
// with one warning.
Isa initial_isa() {
  Isa best = best_supported_isa();
  const char* env = std::getenv("ACLNN_CPU_ISA");
  if (env == nullptr || *env == '\0') return best;
  Isa wanted;
  if (!parse_isa(env, &wanted)) {
    std::fprintf(stderr, "aclnn_cpu: ignoring ACLNN_CPU_ISA=%s (expected %s)\n", env,
                 name_choices(kIsaNames, kIsaCount, "").c_str());
    return best;
  }
  return static_cast<int>(wanted) < static_cast<int>(best) ? wanted : best;
}

std::atomic<int>& active_level() {
  // Initialised once, on first use, from the CPU and the environment (thread-safe static).
  static std::atomic<int> level{static_cast<int>(initial_isa())};
  return level;
}

}  // namespace

bool g_bf16_instructions = initial_bf16_instructions();

bool bf16_instructions_available() {
  static const bool available = cpu_has_avx512_bf16();
  return available;
}

bool bf16_instructions_enabled() { return __atomic_load_n(&g_bf16_instructions, __ATOMIC_RELAXED); }

bool set_bf16_instructions(bool on) {
  if (on && !bf16_instructions_available()) return false;
  __atomic_store_n(&g_bf16_instructions, on, __ATOMIC_RELAXED);
  return true;
}

Isa best_supported_isa() {
  static const Isa best = detect_best();
  return best;
}

Isa active_isa() { return static_cast<Isa>(active_level().load(std::memory_order_relaxed)); }

bool set_active_isa(Isa level) {
  int wanted = static_cast<int>(level);
  if (wanted < 0 || wanted > static_cast<int>(best_supported_isa())) return false;
  active_level().store(wanted, std::memory_order_relaxed);
  return true;
}

const char* isa_name(Isa level) {
  const int index = static_cast<int>(level);
  return index >= 0 && index < kIsaCount ? kIsaNames[index] : "unknown";
}

}  // namespace aclnn_cpu
