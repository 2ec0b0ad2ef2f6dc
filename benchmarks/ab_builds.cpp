// A/B of two or more builds of libaclnn_cpu.so inside one process, on one GridSampler2DBackward
// call (both outputs; fp32 unless --dtype says otherwise). Each library is loaded with dlopen
// and called through the C API in alternation: per round, a block of calls of each, in an
// order reversed every round. A block of the one and a block of the other meet the same state
// of the machine, so their ratio does not carry the guest's slow spells (a chain of adds here
// ran at 1.4-3 GHz equivalents from one second to the next), which alternating processes does:
// on the RGB warp, 12 alternated processes a side left 5-15% either way; 300 rounds here put
// two copies of one library at 0.97-1.05x of each other (the copies' memory lies at different
// addresses), so read differences under 5% as none.
//
// The first library is the reference: per library, the median time of a call, and the median
// and quartiles of the per-round ratio to the reference; a line says when a library's outputs
// differ from the reference's (a build that changes the bits, or a different call). The files
// must be distinct (dlopen loads one file once): copy a build's library before comparing it.
//
// Build and run (from the repository root; any x86-64 or Arm Linux machine):
//   g++ -O2 -std=c++17 -Iinclude benchmarks/ab_builds.cpp -o ab_builds -ldl
//   cp "$(python -c 'import aclnn_cpu, os; print(os.path.join(aclnn_cpu.get_library_dir(), "libaclnn_cpu.so"))')" /tmp/a.so
//   ./ab_builds --threads 1 --rounds 300 /tmp/a.so /tmp/b.so
// Options (defaults in brackets): --threads [2], --rounds [300], --calls per block [3],
// --shape N,C,H,W,Ho,Wo [4,3,224,224,224,224], --mode [0], --pad [0], --align [0],
// --noise: the grid's displacement from identity, a normal deviate times this [0.05], as the
// suite's image-warp rows; --dtype fp32, fp16 or bf16 [fp32]: every tensor's storage type (the
// values drawn in fp32, then rounded to nearest even).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "aclnnop/aclnn_grid_sampler2d_backward.h"
#include "aclnn_cpu/half.h"

namespace {

struct Options {
  int threads = 2, rounds = 300, calls = 3;
  int64_t N = 4, C = 3, H = 224, W = 224, Ho = 224, Wo = 224;
  int64_t mode = 0, pad = 0;
  bool align = false;
  double noise = 0.05;
  aclDataType dtype = ACL_FLOAT;
  std::vector<std::string> libs;
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "ab_builds: %s\n", why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--threads") o.threads = std::atoi(value());
    else if (a == "--rounds") o.rounds = std::atoi(value());
    else if (a == "--calls") o.calls = std::atoi(value());
    else if (a == "--mode") o.mode = std::atoll(value());
    else if (a == "--pad") o.pad = std::atoll(value());
    else if (a == "--align") o.align = std::atoi(value()) != 0;
    else if (a == "--noise") o.noise = std::atof(value());
    else if (a == "--dtype") {
      const std::string d = value();
      if (d == "fp32") o.dtype = ACL_FLOAT;
      else if (d == "fp16") o.dtype = ACL_FLOAT16;
      else if (d == "bf16") o.dtype = ACL_BF16;
      else die("--dtype wants fp32, fp16 or bf16");
    }
    else if (a == "--shape") {
      int64_t* dims[6] = {&o.N, &o.C, &o.H, &o.W, &o.Ho, &o.Wo};
      const char* p = value();
      for (int k = 0; k < 6; ++k) {
        char* end = nullptr;
        *dims[k] = std::strtoll(p, &end, 10);
        if (end == p || (k < 5 && *end != ',')) die("--shape wants N,C,H,W,Ho,Wo");
        p = end + 1;
      }
    } else if (a.rfind("--", 0) == 0) {
      die("unknown option " + a);
    } else {
      o.libs.push_back(a);
    }
  }
  if (o.libs.empty()) die("name at least one library");
  if (o.threads < 1 || o.rounds < 1 || o.calls < 1) die("threads, rounds and calls must be positive");
  return o;
}

// One library, its entry points, and the call's tensors (over storage shared by all libraries).
struct Build {
  std::string path;
  void* handle = nullptr;
  decltype(&aclnnGridSampler2DBackwardGetWorkspaceSize) plan = nullptr;
  decltype(&aclnnGridSampler2DBackward) run = nullptr;
  aclTensor *grad_output = nullptr, *input = nullptr, *grid = nullptr, *input_grad = nullptr, *grid_grad = nullptr;
  aclBoolArray* mask = nullptr;
  std::vector<unsigned char> workspace;
  std::vector<double> ms;  // per round, a call's mean time in its block
};

template <class Fn>
Fn symbol(void* handle, const char* name, const std::string& path) {
  void* p = dlsym(handle, name);
  if (p == nullptr) die(path + " has no " + name);
  return reinterpret_cast<Fn>(p);
}

// The tensors' bytes in the storage type.
struct Storage {
  std::vector<unsigned char> grad_output, input, grid, input_grad, grid_grad;
};

size_t element_bytes(aclDataType t) { return t == ACL_FLOAT ? 4 : 2; }

// `values` in the storage type t.
std::vector<unsigned char> stored(const std::vector<float>& values, aclDataType t) {
  std::vector<unsigned char> bytes(values.size() * element_bytes(t));
  for (size_t i = 0; i < values.size(); ++i) {
    if (t == ACL_FLOAT) {
      std::memcpy(&bytes[4 * i], &values[i], 4);
    } else {
      // (the library's own scalar rounding, half.h: to nearest even)
      const uint16_t b = t == ACL_FLOAT16 ? aclnn_cpu::from_float<aclnn_cpu::half_t>(values[i]).bits
                                          : aclnn_cpu::from_float<aclnn_cpu::bfloat16_t>(values[i]).bits;
      std::memcpy(&bytes[2 * i], &b, 2);
    }
  }
  return bytes;
}

void load(Build& b, const Options& o, Storage& s) {
  b.handle = dlopen(b.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (b.handle == nullptr) die(dlerror());
  const auto create = symbol<decltype(&aclCreateTensor)>(b.handle, "aclCreateTensor", b.path);
  const auto create_bools = symbol<decltype(&aclCreateBoolArray)>(b.handle, "aclCreateBoolArray", b.path);
  b.plan = symbol<decltype(b.plan)>(b.handle, "aclnnGridSampler2DBackwardGetWorkspaceSize", b.path);
  b.run = symbol<decltype(b.run)>(b.handle, "aclnnGridSampler2DBackward", b.path);
  // The thread count has no C entry point; the library's C++ one is exported (parallel.h).
  symbol<void (*)(int)>(b.handle, "_ZN9aclnn_cpu15set_num_threadsEi", b.path)(o.threads);
  const int64_t image[4] = {o.N, o.C, o.H, o.W}, sampled[4] = {o.N, o.C, o.Ho, o.Wo}, grid[4] = {o.N, o.Ho, o.Wo, 2};
  const auto tensor = [&](const int64_t* dims, std::vector<unsigned char>& data) {
    aclTensor* t = create(dims, 4, o.dtype, nullptr, 0, ACL_FORMAT_ND, dims, 4, data.data());
    if (t == nullptr) die("aclCreateTensor failed");
    return t;
  };
  b.grad_output = tensor(sampled, s.grad_output);
  b.input = tensor(image, s.input);
  b.grid = tensor(grid, s.grid);
  b.input_grad = tensor(image, s.input_grad);
  b.grid_grad = tensor(grid, s.grid_grad);
  const bool both[2] = {true, true};
  b.mask = create_bools(both, 2);
}

void call(Build& b, const Options& o) {
  uint64_t bytes = 0;
  aclOpExecutor* executor = nullptr;
  if (b.plan(b.grad_output, b.input, b.grid, o.mode, o.pad, o.align, b.mask, b.input_grad, b.grid_grad, &bytes,
             &executor) != ACL_SUCCESS)
    die(b.path + ": phase 1 failed");
  if (b.workspace.size() < bytes) b.workspace.resize(bytes);
  if (b.run(bytes ? b.workspace.data() : nullptr, bytes, executor, nullptr) != ACL_SUCCESS) die(b.path + ": phase 2 failed");
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[size_t(q * double(v.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  Storage s;
  const size_t image = size_t(o.N * o.C * o.H * o.W), sampled = size_t(o.N * o.C * o.Ho * o.Wo);
  const size_t grid = size_t(o.N * o.Ho * o.Wo * 2);
  std::vector<float> grad_output(sampled), input(image), grid_values(grid);
  std::mt19937_64 rng(0);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (float& v : input) v = float(normal(rng));
  for (float& v : grad_output) v = float(normal(rng));
  for (int64_t n = 0; n < o.N; ++n)  // pixel centres (align 0's identity) plus the displacement
    for (int64_t i = 0; i < o.Ho; ++i)
      for (int64_t j = 0; j < o.Wo; ++j) {
        float* xy = &grid_values[size_t(((n * o.Ho + i) * o.Wo + j) * 2)];
        xy[0] = float((2.0 * double(j) + 1) / double(o.Wo) - 1 + o.noise * normal(rng));
        xy[1] = float((2.0 * double(i) + 1) / double(o.Ho) - 1 + o.noise * normal(rng));
      }
  const size_t bytes = element_bytes(o.dtype);
  s.grad_output = stored(grad_output, o.dtype);
  s.input = stored(input, o.dtype);
  s.grid = stored(grid_values, o.dtype);
  s.input_grad.resize(image * bytes);
  s.grid_grad.resize(grid * bytes);

  std::vector<Build> builds(o.libs.size());
  std::vector<unsigned char> reference;
  for (size_t l = 0; l < builds.size(); ++l) {
    builds[l].path = o.libs[l];
    load(builds[l], o, s);
    for (int k = 0; k < 3; ++k) call(builds[l], o);  // warm-up, and the outputs to compare
    std::vector<unsigned char> bits(s.input_grad);
    bits.insert(bits.end(), s.grid_grad.begin(), s.grid_grad.end());
    if (l == 0) reference = bits;
    else if (bits != reference) std::printf("%s: outputs differ from %s's\n", o.libs[l].c_str(), o.libs[0].c_str());
  }
  for (int r = 0; r < o.rounds; ++r)
    for (size_t k = 0; k < builds.size(); ++k) {
      Build& b = builds[r % 2 == 0 ? k : builds.size() - 1 - k];
      const auto t0 = std::chrono::steady_clock::now();
      for (int c = 0; c < o.calls; ++c) call(b, o);
      b.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / o.calls);
    }
  const char* dtype = o.dtype == ACL_FLOAT ? "fp32" : o.dtype == ACL_FLOAT16 ? "fp16" : "bf16";
  std::printf("N%lld C%lld %lldx%lld -> %lldx%lld %s mode %lld pad %lld align %d, %d threads, %d rounds of %d calls\n",
              (long long)o.N, (long long)o.C, (long long)o.H, (long long)o.W, (long long)o.Ho, (long long)o.Wo, dtype,
              (long long)o.mode, (long long)o.pad, int(o.align), o.threads, o.rounds, o.calls);
  for (const Build& b : builds) {
    std::vector<double> ratio(size_t(o.rounds));
    for (int r = 0; r < o.rounds; ++r) ratio[size_t(r)] = b.ms[size_t(r)] / builds[0].ms[size_t(r)];
    std::printf("%-48s %8.3f ms  ratio to the first %.3f (quartiles %.3f-%.3f)\n", b.path.c_str(), quantile(b.ms, 0.5),
                quantile(ratio, 0.5), quantile(ratio, 0.25), quantile(ratio, 0.75));
  }
  return 0;
}
