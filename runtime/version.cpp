// Build facts of this library.
#include "aclnn_cpu/version.h"

#ifndef ACLNN_CPU_VERSION
#define ACLNN_CPU_VERSION "0.1.0"
#endif

namespace aclnn_cpu {

const char* version() { return ACLNN_CPU_VERSION; }

const char* compiler() {
#if defined(__clang__)
  return "Clang " __clang_version__;
#elif defined(__GNUC__)
  return "GCC " __VERSION__;
#else
  return "unknown compiler";
#endif
}

bool built_with_openmp() {
#ifdef _OPENMP
  return true;
#else
  return false;
#endif
}

}  // namespace aclnn_cpu
