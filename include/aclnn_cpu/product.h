// Product (SoC) line emulation: the dtype rules of the documents differ per product line.
#pragma once

namespace aclnn_cpu {

enum class Product : int { AtlasTraining = 0, AtlasA2 = 1, AtlasInference = 2 };

Product current_product();                 // default AtlasA2; process-wide
bool set_product(const char* name);        // "atlas_training" | "atlas_a2" | "atlas_inference"
const char* product_name(Product p);       // the names above
const char* soc_name(Product p);           // what aclrtGetSocName() reports, e.g. "Ascend910B1"

}  // namespace aclnn_cpu
