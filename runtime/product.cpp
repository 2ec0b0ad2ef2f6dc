// Which product line is emulated. The operator documents give different dtype rules per line
// (the Atlas training and inference series have no bfloat16), and aclrtGetSocName reports a SoC
// of that line.
#include <atomic>
#include <cstring>

#include "aclnn_cpu/product.h"

namespace aclnn_cpu {
namespace {

std::atomic<int> current{static_cast<int>(Product::AtlasA2)};

constexpr Product kAllProducts[] = {Product::AtlasTraining, Product::AtlasA2,
                                    Product::AtlasInference};

}  // namespace

Product current_product() { return static_cast<Product>(current.load(std::memory_order_relaxed)); }

bool set_product(const char* name) {
  if (name == nullptr) return false;
  for (Product p : kAllProducts) {
    if (std::strcmp(name, product_name(p)) == 0) {
      current.store(static_cast<int>(p), std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

const char* product_name(Product p) {
  switch (p) {
    case Product::AtlasTraining: return "atlas_training";
    case Product::AtlasA2: return "atlas_a2";
    case Product::AtlasInference: return "atlas_inference";
  }
  return "unknown";
}

// Real SoC names, one representative per line: Ascend910A (Atlas 800 training server, Atlas 300T),
// Ascend910B1 (Atlas A2 training series), Ascend310P3 (Atlas 300I Pro / 300V Pro inference cards).
const char* soc_name(Product p) {
  switch (p) {
    case Product::AtlasTraining: return "Ascend910A";
    case Product::AtlasA2: return "Ascend910B1";
    case Product::AtlasInference: return "Ascend310P3";
  }
  return "unknown";
}

}  // namespace aclnn_cpu
