// Runs the cases of a manifest through the aclnn C API: the pytest driver writes the tensors'
// storage (raw bytes, any dtype, any strides and offset) and a manifest, this program creates
// the aclTensors, calls phase 1 and, when it succeeds, phase 2 (several times through a
// repeatable executor when asked), and writes every output's storage back for the driver to
// compare with its float64 references. All data layout and all expectations live in the driver;
// this program only speaks the C API, so one valgrind run of it covers every case.
//
// usage: op_runner <case-dir> [aclInit-config.json]
//
// <case-dir>/manifest.txt, one record per line, tokens separated by blanks:
//   case <name> <op> <runs>           starts a case; op is the aclnn name without "aclnn"
//   int <param> <value>               int64 attribute
//   bool <param> <0|1>                bool attribute
//   double <param> <value>            double attribute
//   scalar <param> <aclDataType> <value>  aclScalar of that dtype (float, double, int64, bool)
//   int_array <param> <count> <values...> aclIntArray
//   mask <param> <count> <0|1>...     aclBoolArray
//   tensor <param> <aclDataType> <ndim> <dims...> <strides...> <offset> <file>
//                                     tensors naming the same file share its storage
//   readonly <param>                  marks an earlier tensor read-only (aclnnCpuSetTensorReadOnly)
//   null <param>                      a null tensor, scalar or array
//   null_out <workspaceSize|executor> phase 1 gets a null pointer for that out-parameter
//   end
// Output, one line per case (tab separated):
//   case <name> <phase-1 status> <workspace bytes> <phase-2 status> <message>
// and every storage file's bytes after the last run in <file>.out.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnn/aclnn_cpu_op_table.h"  // every op of the build, generated from the registry

namespace {

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "op_runner: %s\n", why.c_str());
  std::exit(101);
}

// The storage of one file of the manifest. Tensors naming the same file share it (that is how
// the driver builds overlapping tensors). It is a malloc of exactly the file's size rather than
// aclrtMalloc (which rounds up to 64 bytes), so valgrind sees any access past its end.
struct Storage {
  std::string file;
  std::vector<unsigned char> initial;  // the bytes as the driver wrote them
  void* device = nullptr;

  ~Storage() { std::free(device); }
  void restore() const {
    if (aclrtMemcpy(device, initial.size(), initial.data(), initial.size(),
                    ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS)
      die("aclrtMemcpy failed restoring " + file);
  }
  std::vector<unsigned char> read() const {
    std::vector<unsigned char> host(initial.size());
    if (aclrtMemcpy(host.data(), host.size(), device, host.size(), ACL_MEMCPY_DEVICE_TO_HOST) !=
        ACL_SUCCESS)
      die("aclrtMemcpy failed reading " + file);
    return host;
  }
};

struct TensorHandle {
  aclTensor* tensor = nullptr;
  ~TensorHandle() { aclDestroyTensor(tensor); }
};

// One case of the manifest; the generated op table reads its arguments from it by C name.
struct Case : aclnn_cpu_op_table::ArgSource {
  std::string name, op;
  int runs = 1;
  std::map<std::string, int64_t> ints;
  std::map<std::string, double> reals;
  std::map<std::string, std::unique_ptr<Storage>> storages;  // by file name
  std::map<std::string, std::unique_ptr<TensorHandle>> tensors;
  std::map<std::string, aclBoolArray*> masks;
  std::map<std::string, aclScalar*> scalars;
  std::map<std::string, aclIntArray*> int_arrays;
  bool null_workspace_size = false, null_executor = false;

  ~Case() override {
    tensors.clear();  // the tensors first: they describe the storages
    for (auto& m : masks) aclDestroyBoolArray(m.second);
    for (auto& s : scalars) aclDestroyScalar(s.second);
    for (auto& a : int_arrays) aclDestroyIntArray(a.second);
  }
  // A tensor parameter: null when the manifest says "null" (or omits it).
  aclTensor* tensor(const char* param) const override {
    auto it = tensors.find(param);
    return it == tensors.end() ? nullptr : it->second->tensor;
  }
  aclBoolArray* bool_array(const char* param) const override { return find(masks, param); }
  aclScalar* scalar(const char* param) const override { return find(scalars, param); }
  aclIntArray* int_array(const char* param) const override { return find(int_arrays, param); }
  int64_t int64(const char* param) const override {
    auto it = ints.find(param);
    if (it == ints.end()) die("case " + name + " lacks attribute " + param);
    return it->second;
  }
  bool flag(const char* param) const override { return int64(param) != 0; }
  double real(const char* param) const override {
    auto it = reals.find(param);
    if (it == reals.end()) die("case " + name + " lacks attribute " + param);
    return it->second;
  }

 private:
  template <typename T>
  static T* find(const std::map<std::string, T*>& from, const char* param) {
    auto it = from.find(param);
    return it == from.end() ? nullptr : it->second;
  }
};

// An aclScalar of the given aclDataType holding value (the dtypes a manifest uses).
aclScalar* make_scalar(int dtype, double value) {
  switch (static_cast<aclDataType>(dtype)) {
    case ACL_FLOAT: {
      float v = static_cast<float>(value);
      return aclCreateScalar(&v, ACL_FLOAT);
    }
    case ACL_DOUBLE:
      return aclCreateScalar(&value, ACL_DOUBLE);
    case ACL_INT64: {
      int64_t v = static_cast<int64_t>(value);
      return aclCreateScalar(&v, ACL_INT64);
    }
    case ACL_BOOL: {
      bool v = value != 0;
      return aclCreateScalar(&v, ACL_BOOL);
    }
    default:
      die("scalar of unsupported dtype " + std::to_string(dtype));
  }
}

std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) die("cannot read " + path);
  return std::vector<unsigned char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::vector<unsigned char>& data) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!out) die("cannot write " + path);
}

void parse_tensor(std::istringstream& in, const std::string& dir, Case* c) {
  std::string param, file;
  int dtype = 0;
  uint64_t ndim = 0;
  in >> param >> dtype >> ndim;
  if (!in || ndim > 64) die("malformed tensor record");
  std::vector<int64_t> dims(ndim), strides(ndim);
  for (auto& d : dims) in >> d;
  for (auto& s : strides) in >> s;
  int64_t offset = 0;
  in >> offset >> file;
  if (!in) die("malformed tensor record");
  std::unique_ptr<Storage>& storage = c->storages[file];
  if (storage == nullptr) {
    storage = std::make_unique<Storage>();
    storage->file = dir + "/" + file;
    storage->initial = read_file(storage->file);
    if (storage->initial.empty()) die("empty storage file " + storage->file);
    storage->device = std::malloc(storage->initial.size());
    if (storage->device == nullptr) die("out of memory for " + storage->file);
    storage->restore();
  }
  auto handle = std::make_unique<TensorHandle>();
  handle->tensor = aclCreateTensor(dims.data(), ndim, static_cast<aclDataType>(dtype),
                                   strides.data(), offset, ACL_FORMAT_ND, dims.data(), ndim,
                                   storage->device);
  if (handle->tensor == nullptr) die("aclCreateTensor failed: " + std::string(aclGetRecentErrMsg()));
  c->tensors[param] = std::move(handle);
}

const aclnn_cpu_op_table::OpEntry& op_entry(const Case& c) {
  const aclnn_cpu_op_table::OpEntry* entry = aclnn_cpu_op_table::find_op(c.op.c_str());
  if (entry == nullptr) die("unknown op " + c.op);
  return *entry;
}

std::string one_line(std::string text) {
  for (char& ch : text) {
    if (ch == '\n' || ch == '\t') ch = ' ';
  }
  return text;
}

// Runs one case; returns false when the runner itself saw something wrong (a repeated run that
// differs, a failing acl call), which the driver reports as a failure.
bool run_case(const Case& c, aclrtStream stream) {
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  const aclnn_cpu_op_table::OpEntry& op = op_entry(c);
  aclnnStatus status = op.get_workspace_size(c, c.null_workspace_size ? nullptr : &workspace_size,
                                             c.null_executor ? nullptr : &executor);
  std::string message = one_line(aclGetRecentErrMsg());
  aclnnStatus run_status = -1;  // -1: phase 2 not attempted
  bool ok = true;
  if (status == ACLNN_SUCCESS) {
    if (executor == nullptr) {
      std::printf("runner: %s: phase 1 succeeded without an executor\n", c.name.c_str());
      return false;
    }
    if (!message.empty()) {
      std::printf("runner: %s: phase 1 succeeded but left the message \"%s\"\n", c.name.c_str(),
                  message.c_str());
      ok = false;
    }
    // Exactly the bytes asked for (as the storages): valgrind sees a kernel that goes beyond.
    void* workspace = workspace_size > 0 ? std::malloc(workspace_size) : nullptr;
    if (workspace_size > 0 && workspace == nullptr) {
      std::printf("runner: %s: cannot allocate %llu workspace bytes\n", c.name.c_str(),
                  static_cast<unsigned long long>(workspace_size));
      aclDestroyAclOpExecutor(executor);
      return false;
    }
    if (c.runs > 1 && aclSetAclOpExecutorRepeatable(executor) != ACLNN_SUCCESS) {
      std::printf("runner: %s: aclSetAclOpExecutorRepeatable failed: %s\n", c.name.c_str(),
                  aclGetRecentErrMsg());
      ok = false;
    }
    std::map<std::string, std::vector<unsigned char>> first_results;
    for (int r = 0; r < c.runs; ++r) {
      // Each run starts from the driver's output storage, so it must write every element again.
      for (const auto& s : c.storages) s.second->restore();
      run_status = op.run(workspace, workspace_size, executor, stream);
      message = one_line(aclGetRecentErrMsg());
      if (run_status != ACLNN_SUCCESS) break;
      if (!message.empty()) {
        std::printf("runner: %s: phase 2 succeeded but left the message \"%s\"\n",
                    c.name.c_str(), message.c_str());
        ok = false;
      }
      if (aclrtSynchronizeStream(stream) != ACL_SUCCESS) {
        std::printf("runner: %s: aclrtSynchronizeStream failed\n", c.name.c_str());
        ok = false;
      }
      for (const auto& t : c.storages) {
        std::vector<unsigned char> now = t.second->read();
        if (r == 0) {
          first_results[t.first] = now;
        } else if (now != first_results[t.first]) {
          std::printf("runner: %s: run %d of the repeatable executor changed %s\n",
                      c.name.c_str(), r + 1, t.first.c_str());
          ok = false;
        }
      }
    }
    if (c.runs > 1 && aclDestroyAclOpExecutor(executor) != ACLNN_SUCCESS) {
      std::printf("runner: %s: aclDestroyAclOpExecutor failed: %s\n", c.name.c_str(),
                  aclGetRecentErrMsg());
      ok = false;
    }
    std::free(workspace);
  }
  for (const auto& s : c.storages) write_file(s.second->file + ".out", s.second->read());
  std::printf("case\t%s\t%d\t%llu\t%d\t%s\n", c.name.c_str(), status,
              static_cast<unsigned long long>(workspace_size), run_status, message.c_str());
  std::fflush(stdout);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: op_runner <case-dir> [aclInit-config.json]\n");
    return 2;
  }
  const std::string dir = argv[1];
  if (aclInit(argc == 3 ? argv[2] : nullptr) != ACL_SUCCESS) die(std::string("aclInit: ") + aclGetRecentErrMsg());
  if (aclrtSetDevice(0) != ACL_SUCCESS) die("aclrtSetDevice failed");
  aclrtStream stream = nullptr;
  if (aclrtCreateStream(&stream) != ACL_SUCCESS) die("aclrtCreateStream failed");
  std::printf("soc\t%s\n", aclrtGetSocName());

  std::ifstream manifest(dir + "/manifest.txt");
  if (!manifest) die("cannot read " + dir + "/manifest.txt");
  int failures = 0;
  std::unique_ptr<Case> current;
  std::string line;
  while (std::getline(manifest, line)) {
    std::istringstream in(line);
    std::string kind;
    if (!(in >> kind)) continue;
    if (kind == "case") {
      current = std::make_unique<Case>();
      in >> current->name >> current->op >> current->runs;
    } else if (current == nullptr) {
      die("record outside a case: " + line);
    } else if (kind == "int" || kind == "bool") {
      std::string param;
      long long value = 0;
      in >> param >> value;
      current->ints[param] = value;
    } else if (kind == "double") {
      std::string param;
      double value = 0;
      in >> param >> value;
      current->reals[param] = value;
    } else if (kind == "scalar") {
      std::string param;
      int dtype = 0;
      double value = 0;
      in >> param >> dtype >> value;
      current->scalars[param] = make_scalar(dtype, value);
    } else if (kind == "int_array") {
      std::string param;
      uint64_t count = 0;
      in >> param >> count;
      std::vector<int64_t> values(count);
      for (auto& v : values) in >> v;
      current->int_arrays[param] = aclCreateIntArray(values.data(), count);
    } else if (kind == "mask") {
      std::string param;
      uint64_t count = 0;
      in >> param >> count;
      bool flags[16] = {};
      for (uint64_t i = 0; i < count && i < 16; ++i) {
        int v = 0;
        in >> v;
        flags[i] = v != 0;
      }
      current->masks[param] = aclCreateBoolArray(flags, count);
    } else if (kind == "tensor") {
      parse_tensor(in, dir, current.get());
    } else if (kind == "readonly") {
      std::string param;
      in >> param;
      aclTensor* t = current->tensor(param.c_str());
      if (t == nullptr || aclnnCpuSetTensorReadOnly(t, true) != ACLNN_SUCCESS)
        die("readonly: no tensor " + param);
    } else if (kind == "null") {
      // Absent from the maps: passed as a null pointer.
    } else if (kind == "null_out") {
      std::string which;
      in >> which;
      if (which == "workspaceSize") current->null_workspace_size = true;
      else if (which == "executor") current->null_executor = true;
      else die("unknown null_out " + which);
    } else if (kind == "end") {
      if (!run_case(*current, stream)) ++failures;
      current.reset();
    } else {
      die("unknown record: " + line);
    }
  }

  if (aclrtDestroyStream(stream) != ACL_SUCCESS) ++failures;
  if (aclrtResetDevice(0) != ACL_SUCCESS) ++failures;
  if (aclFinalize() != ACL_SUCCESS) ++failures;
  std::printf("runner failures\t%d\n", failures);
  return failures == 0 ? 0 : 1;
}
