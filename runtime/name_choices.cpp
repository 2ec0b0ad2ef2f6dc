// Lists of a vocabulary's names for messages (runtime_internal.h).
#include <string>

#include "runtime_internal.h"

namespace aclnn_cpu {

std::string name_choices(const char* const* names, int count, const char* quote) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    if (i > 0) out += i + 1 == count ? " or " : ", ";
    out += quote;
    out += names[i];
    out += quote;
  }
  return out;
}

}  // namespace aclnn_cpu
