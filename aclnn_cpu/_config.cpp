// aclnn_cpu._config: the runtime's configuration surface (threads, product line, ISA level,
// build facts) bound whole with pybind11. State lives in libaclnn_cpu.so, so the C API, the
// Cython stubs and this module all see the same settings.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "aclnn_cpu/cache_info.h"
#include "aclnn_cpu/isa.h"
#include "aclnn_cpu/parallel.h"
#include "aclnn_cpu/product.h"
#include "aclnn_cpu/version.h"

namespace py = pybind11;

extern "C" int aclnn_cpu_simd_selftest_convert(int from, int to, const void* src, void* dst, int64_t n, int path);
extern "C" void aclnn_cpu_simd_selftest_exp(int double_precision, const void* src, void* dst, int64_t n);

namespace {

using aclnn_cpu::Isa;
using aclnn_cpu::Product;

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out += "'" + n + "'";
  }
  return out;
}

// The default line first, then the others in their declared order.
std::vector<std::string> product_names() {
  std::vector<std::string> names{aclnn_cpu::product_name(aclnn_cpu::kDefaultProduct)};
  for (Product p : aclnn_cpu::kProducts)
    if (p != aclnn_cpu::kDefaultProduct) names.emplace_back(aclnn_cpu::product_name(p));
  return names;
}

std::vector<std::string> isa_names() {
  return std::vector<std::string>(aclnn_cpu::kIsaNames, aclnn_cpu::kIsaNames + aclnn_cpu::kIsaCount);
}

// "'a', 'b' or 'c'" (with " (default)" after the first name when `default_first`), as the
// docstrings list the choices.
std::string choices(const std::vector<std::string>& names, bool default_first) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += "'" + names[i] + "'" + (i == 0 && default_first ? " (default)" : "");
  }
  return out;
}

// Levels this CPU and build can run, lowest first.
std::vector<std::string> available_isas() {
  std::vector<std::string> names;
  for (Isa level : aclnn_cpu::kIsaLevels)
    if (static_cast<int>(level) <= static_cast<int>(aclnn_cpu::best_supported_isa()))
      names.emplace_back(aclnn_cpu::isa_name(level));
  return names;
}

void set_num_threads(int n) {
  if (n < 1) throw py::value_error("set_num_threads: n must be >= 1, got " + std::to_string(n));
  aclnn_cpu::set_num_threads(n);
}

void set_product(const std::string& name) {
  if (!aclnn_cpu::set_product(name.c_str()))
    throw py::value_error("unknown product '" + name + "'; valid: " +
                          quoted_list(product_names()));
}

void set_isa(const std::string& name) {
  for (Isa level : aclnn_cpu::kIsaLevels) {
    if (name == aclnn_cpu::isa_name(level)) {
      if (!aclnn_cpu::set_active_isa(level))
        throw py::value_error("ISA level '" + name + "' is not available on this CPU/build; "
                              "available: " + quoted_list(available_isas()));
      return;
    }
  }
  throw py::value_error("unknown ISA level '" + name + "'; valid: " + quoted_list(isa_names()));
}

// Element size of a dtype the self-test converts (aclDataType codes of float32, float16 and
// bfloat16), 0 for any other code.
int64_t code_itemsize(int code) {
  using aclnn_cpu::DType;
  const DType t = static_cast<DType>(code);
  return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16 ? aclnn_cpu::dtype_size(t) : 0;
}

void simd_convert(py::buffer src, int from, py::buffer dst, int to, int path) {
  py::buffer_info in = src.request(), out = dst.request(true);
  const int64_t n = in.size;
  if (code_itemsize(from) == 0 || code_itemsize(to) == 0)
    throw py::value_error("dtype codes are the aclDataType codes of float32, float16, bfloat16");
  if (out.size != n || in.itemsize != code_itemsize(from) || out.itemsize != code_itemsize(to))
    throw py::value_error("src/dst sizes do not match the dtype codes");
  for (const py::buffer_info* b : {&in, &out})
    if (b->ndim != 1 || b->strides[0] != b->itemsize) throw py::value_error("src and dst must be contiguous 1-D");
  if (aclnn_cpu_simd_selftest_convert(from, to, in.ptr, out.ptr, n, path) != 0)
    throw py::value_error("path is 0 (vectors), 1 (pairs), 2 (streamed pairs), 3 (scalar) or 4-7 + 256 * row "
                          "(a streaming cursor: + 1 pairs, + 2 rows last first)");
}

void simd_exp(py::buffer src, py::buffer dst) {
  py::buffer_info in = src.request(), out = dst.request(true);
  if (in.format != out.format || (in.format != "f" && in.format != "d"))
    throw py::value_error("src and dst must both be float32 or both float64");
  if (out.size != in.size) throw py::value_error("src and dst sizes differ");
  for (const py::buffer_info* b : {&in, &out})
    if (b->ndim != 1 || b->strides[0] != b->itemsize) throw py::value_error("src and dst must be contiguous 1-D");
  aclnn_cpu_simd_selftest_exp(in.format == "d", in.ptr, out.ptr, in.size);
}

}  // namespace

PYBIND11_MODULE(_config, m) {
  m.doc() = "Runtime configuration of aclnn_cpu: threads, product line, ISA level, build facts.";

  m.def("set_num_threads", &set_num_threads, py::arg("n"),
        "Threads the kernels use (>= 1); results are bitwise identical for any count.");
  m.def("get_num_threads", &aclnn_cpu::num_threads,
        "Threads the kernels use (default: OpenMP's, which honours OMP_NUM_THREADS; 1 in a process "
        "forked where the OpenMP pool could not be released first).");
  m.def("single_threaded_after_fork", &aclnn_cpu::single_threaded_after_fork,
        "Whether this process was forked where the OpenMP pool could not be released first, so "
        "that its kernels run on one thread.");
  m.def("has_fork_pool_handler", &aclnn_cpu::has_fork_pool_handler,
        "Whether this build releases GNU OpenMP's worker pool before each fork (and falls back to "
        "one thread in the child where it cannot).");
  m.def("set_release_pool_on_fork", &aclnn_cpu::set_release_pool_on_fork, py::arg("on"),
        "Tests only: False makes later forks leave the pool, so the children run on one thread.");

  const std::string set_product_doc =
      "Product line whose dtype rules apply: " + choices(product_names(), true) + ".";
  m.def("set_product", &set_product, py::arg("name"), set_product_doc.c_str());
  m.def("get_product", [] { return std::string(aclnn_cpu::product_name(aclnn_cpu::current_product())); },
        "The emulated product line.");
  m.def("products", &product_names, "Every product line name.");
  m.def("soc_name", [] { return std::string(aclnn_cpu::soc_name(aclnn_cpu::current_product())); },
        "What aclrtGetSocName() reports for the current product line.");

  const std::string set_isa_doc = "Kernel ISA level for executors planned from now on: " +
                                  choices(isa_names(), false) +
                                  " (ValueError when this CPU/build lacks it).";
  m.def("set_isa", &set_isa, py::arg("name"), set_isa_doc.c_str());
  m.def("get_isa", [] { return std::string(aclnn_cpu::isa_name(aclnn_cpu::active_isa())); },
        "The ISA level new executors use.");
  m.def("best_isa", [] { return std::string(aclnn_cpu::isa_name(aclnn_cpu::best_supported_isa())); },
        "The best level this CPU and this build support.");
  m.def("available_isas", &available_isas, "Levels this CPU and build can run, lowest first.");

  m.def("bf16_instructions", &aclnn_cpu::bf16_instructions_enabled,
        "Whether the avx512 level converts to bf16 with AVX512-BF16 instructions (same results).");
  m.def("bf16_instructions_available", &aclnn_cpu::bf16_instructions_available,
        "Whether this CPU and build have the AVX512-BF16 conversions.");
  m.def("set_bf16_instructions", &aclnn_cpu::set_bf16_instructions, py::arg("on"),
        "Use (or not) the AVX512-BF16 conversions; False when asked for them without them.");
  m.def("llc_bytes", &aclnn_cpu::last_level_cache_bytes,
        "Last-level cache size the kernels plan streaming stores with (bytes).");
  m.def("set_llc_bytes", &aclnn_cpu::set_last_level_cache_bytes, py::arg("bytes"),
        "Override llc_bytes() for this process (0 restores the detected size). Outputs of ops "
        "whose traffic exceeds it go out with streaming stores; the values are the same.");
  m.def("l1d_bytes", &aclnn_cpu::l1_data_cache_bytes,
        "Level-1 data cache size the kernels plan traversal orders with (bytes).");
  m.def("simd_convert", &simd_convert, py::arg("src"), py::arg("from_code"), py::arg("dst"),
        py::arg("to_code"), py::arg("path"),
        "Test hook: converts contiguous src into dst with the active level's SIMD loads and "
        "stores (aclDataType codes of float32, float16, bfloat16; path 0 vectors, 1 pairs, 2 streamed, 3 the "
        "scalar element conversions).");
  m.def("simd_exp", &simd_exp, py::arg("src"), py::arg("dst"),
        "Test hook: dst = exp(src) with the active level's SIMD exp (contiguous float32 or "
        "float64 arrays).");

  m.def("version", [] { return std::string(aclnn_cpu::version()); }, "Library version.");
  m.def("openmp", &aclnn_cpu::built_with_openmp, "Whether the library was built with OpenMP.");
  m.def("compiler", [] { return std::string(aclnn_cpu::compiler()); },
        "The compiler that built the library.");
}
