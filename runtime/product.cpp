// Which product line is emulated. The operator documents give different dtype rules per line
// (the Atlas training and inference series have no bfloat16), and aclrtGetSocName reports a SoC
// of that line (the lines and their SoCs: registry/aclnn_gen/vocabulary.py).
#include <atomic>
#include <cstring>

#include "aclnn_cpu/product.h"

namespace aclnn_cpu {
namespace {

std::atomic<int> current{static_cast<int>(kDefaultProduct)};

}  // namespace

Product current_product() { return static_cast<Product>(current.load(std::memory_order_relaxed)); }

bool set_product(const char* name) {
  if (name == nullptr) return false;
  for (Product p : kProducts) {
    if (std::strcmp(name, product_name(p)) == 0) {
      current.store(static_cast<int>(p), std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

const char* product_name(Product p) {
  const int index = static_cast<int>(p);
  return index >= 0 && index < kProductCount ? kProductNames[index] : "unknown";
}

const char* soc_name(Product p) {
  const int index = static_cast<int>(p);
  return index >= 0 && index < kProductCount ? kSocNames[index] : "unknown";
}

}  // namespace aclnn_cpu
