// What was built: the library version and the toolchain facts `show_config()` reports.
#pragma once

namespace aclnn_cpu {

const char* version();        // "0.1.0" (setup.py may override with -DACLNN_CPU_VERSION="...")
const char* compiler();       // e.g. "GCC 12.2.0"
bool built_with_openmp();     // whether the runtime and kernels were compiled with -fopenmp

}  // namespace aclnn_cpu
