// Run-time ISA dispatch. Each ops/<op>.cpp is compiled once per level with the level's compiler
// flags and -DACLNN_ISA_LEVEL=<n>; ACLNN_ISA_NS names the namespace its kernels live in, so the
// copies link side by side and the generated entry points pick one per executor. The levels
// (Isa, kIsaNames, ACLNN_ISA_NS) are declared in registry/aclnn_gen/vocabulary.py.
#pragma once

#include "aclnn_cpu/vocabulary.h"

namespace aclnn_cpu {

// Best level this CPU and this build support, lowered by ACLNN_CPU_ISA=<a level's name>.
Isa active_isa();
// Lowers (or restores, up to the CPU's best) the active level; false if the CPU lacks it.
bool set_active_isa(Isa level);
Isa best_supported_isa();
const char* isa_name(Isa level);  // its kIsaNames entry: "baseline", "avx2", ...

// AVX512-BF16 conversions inside the avx512 level (see simd.h): same results, fewer
// instructions. On when the CPU and the build have them, unless ACLNN_CPU_BF16_INSTRUCTIONS=0;
// set_bf16_instructions(true) fails without them. Not to be toggled while kernels run.
bool bf16_instructions_available();
bool bf16_instructions_enabled();
bool set_bf16_instructions(bool on);

}  // namespace aclnn_cpu
