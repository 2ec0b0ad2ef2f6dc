// Product (SoC) line emulation: the dtype rules of the documents differ per product line.
// The lines (Product, kProductNames, kSocNames, kDefaultProduct) are declared in
// registry/aclnn_gen/vocabulary.py.
#pragma once

#include "aclnn_cpu/vocabulary.h"

namespace aclnn_cpu {

Product current_product();                 // kDefaultProduct until set; process-wide
bool set_product(const char* name);        // one of kProductNames ("atlas_a2", ...)
const char* product_name(Product p);       // its kProductNames entry
const char* soc_name(Product p);           // what aclrtGetSocName() reports, e.g. "Ascend910B1"

}  // namespace aclnn_cpu
