// The acl runtime subset through its C API: aclInit/aclFinalize with and without a configuration
// file, devices (only device 0), contexts, streams, memory (aclrtMalloc/Free/Memcpy/Memset and
// their checks), aclCreateTensor/aclCreateBoolArray argument checks, null pointers everywhere,
// and aclGetRecentErrMsg's behaviour (messages pile up until read).
//
// usage: acl_runtime <scratch-dir>   (configuration files are written there)
#include <cstdint>
#include <fstream>
#include <string>

#include "harness.h"

namespace {

std::string scratch;

std::string write_config(const char* name, const char* text) {
  std::string path = scratch + "/" + name;
  std::ofstream(path) << text;
  return path;
}

void init_and_finalize() {
  CHECK(aclGetRecentErrMsg() != nullptr);
  EXPECT_STATUS(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE, "aclFinalize");

  const std::string missing = scratch + "/no_such_config.json";
  EXPECT_STATUS(aclInit(missing.c_str()), ACL_ERROR_INVALID_FILE, "aclInit", "no_such_config.json");
  const std::string not_json = write_config("not_json.json", "{\"aclnn_cpu\": {\"product\": ");
  EXPECT_STATUS(aclInit(not_json.c_str()), ACL_ERROR_PARSE_FILE, "aclInit", "not_json.json");
  const std::string trailing = write_config("trailing_comma.json", "{\"a\": 1,}");
  EXPECT_STATUS(aclInit(trailing.c_str()), ACL_ERROR_PARSE_FILE, "aclInit");
  const std::string not_object = write_config("array.json", "[1, 2]");
  EXPECT_STATUS(aclInit(not_object.c_str()), ACL_ERROR_PARSE_FILE, "aclInit");
  const std::string bad_product = write_config("bad_product.json", "{\"aclnn_cpu\": {\"product\": \"atlas_9000\"}}");
  EXPECT_STATUS(aclInit(bad_product.c_str()), ACL_ERROR_FILE_ATTR_INVALID, "aclInit",
                "aclnn_cpu.product must be \"atlas_training\", \"atlas_a2\" or \"atlas_inference\"");
  const std::string bad_threads = write_config("bad_threads.json", "{\"aclnn_cpu\": {\"num_threads\": 0}}");
  EXPECT_STATUS(aclInit(bad_threads.c_str()), ACL_ERROR_FILE_ATTR_INVALID, "aclInit", "num_threads");
  const std::string bad_isa = write_config("bad_isa.json", "{\"aclnn_cpu\": {\"isa\": \"sse9\"}}");
  EXPECT_STATUS(aclInit(bad_isa.c_str()), ACL_ERROR_FILE_ATTR_INVALID, "aclInit",
                "aclnn_cpu.isa must be \"baseline\", \"avx2\" or \"avx512\"");
  const std::string unknown_key = write_config("unknown_key.json", "{\"aclnn_cpu\": {\"speed\": 11}}");
  EXPECT_STATUS(aclInit(unknown_key.c_str()), ACL_ERROR_FILE_ATTR_INVALID, "aclInit", "speed");

  // A CANN configuration file (other keys only) is accepted as it is.
  const std::string cann = write_config("cann.json", "{\"dump\": {\"dump_path\": \"/tmp\"}, \"profiler\": {}}");
  EXPECT_STATUS(aclInit(cann.c_str()), 0);
  EXPECT_STATUS(aclInit(nullptr), ACL_ERROR_REPEAT_INITIALIZE, "aclInit");
  EXPECT_STATUS(aclFinalize(), 0);
  EXPECT_STATUS(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE, "aclFinalize");
  EXPECT_STATUS(aclInit(""), 0);  // empty path: no configuration
  EXPECT_STATUS(aclFinalize(), 0);
  const std::string ours = write_config("ours.json",
                                        "{\"aclnn_cpu\": {\"product\": \"atlas_a2\", \"num_threads\": 2, \"isa\": \"avx512\"}}");
  EXPECT_STATUS(aclInit(ours.c_str()), 0);
  CHECK(std::string(aclrtGetSocName()) == "Ascend910B1");
  EXPECT_STATUS(aclFinalize(), 0);
  EXPECT_STATUS(aclInit(nullptr), 0);  // stays initialised for the rest of the program
}

void devices() {
  EXPECT_STATUS(aclrtSetDevice(1), ACL_ERROR_RT_INVALID_DEVICEID, "aclrtSetDevice", "1");
  EXPECT_STATUS(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID, "aclrtSetDevice");
  EXPECT_STATUS(aclrtResetDevice(3), ACL_ERROR_RT_INVALID_DEVICEID, "aclrtResetDevice");
  int32_t device = -7;
  EXPECT_STATUS(aclrtGetDevice(&device), ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetDevice");
  EXPECT_STATUS(aclrtSetDevice(0), 0);
  EXPECT_STATUS(aclrtGetDevice(&device), 0);
  CHECK(device == 0);
  EXPECT_STATUS(aclrtGetDevice(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtGetDevice");
  uint32_t count = 0;
  EXPECT_STATUS(aclrtGetDeviceCount(&count), 0);
  CHECK(count == 1);
  EXPECT_STATUS(aclrtGetDeviceCount(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount");
  CHECK(aclrtGetSocName() != nullptr);
}

void contexts() {
  aclrtContext ctx = nullptr, current = nullptr;
  EXPECT_STATUS(aclrtCreateContext(nullptr, 0), ACL_ERROR_INVALID_PARAM, "aclrtCreateContext");
  EXPECT_STATUS(aclrtCreateContext(&ctx, 2), ACL_ERROR_RT_INVALID_DEVICEID, "aclrtCreateContext");
  EXPECT_STATUS(aclrtCreateContext(&ctx, 0), 0);
  EXPECT_STATUS(aclrtSetCurrentContext(ctx), 0);
  EXPECT_STATUS(aclrtGetCurrentContext(&current), 0);
  CHECK(current == ctx);
  EXPECT_STATUS(aclrtGetCurrentContext(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext");
  EXPECT_STATUS(aclrtSetCurrentContext(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtSetCurrentContext");
  EXPECT_STATUS(aclrtDestroyContext(ctx), 0);
  EXPECT_STATUS(aclrtDestroyContext(ctx), ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtDestroyContext");
  EXPECT_STATUS(aclrtSetCurrentContext(ctx), ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtSetCurrentContext");
  EXPECT_STATUS(aclrtDestroyContext(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtDestroyContext");
  int not_a_context = 0;
  EXPECT_STATUS(aclrtDestroyContext(&not_a_context), ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtDestroyContext");
}

void streams() {
  aclrtStream stream = nullptr;
  EXPECT_STATUS(aclrtCreateStream(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtCreateStream");
  EXPECT_STATUS(aclrtCreateStream(&stream), 0);
  EXPECT_STATUS(aclrtSynchronizeStream(stream), 0);
  EXPECT_STATUS(aclrtSynchronizeStream(nullptr), 0);  // the default stream
  EXPECT_STATUS(aclrtDestroyStream(stream), 0);
  EXPECT_STATUS(aclrtDestroyStream(stream), ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtDestroyStream");
  EXPECT_STATUS(aclrtSynchronizeStream(stream), ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtSynchronizeStream");
  EXPECT_STATUS(aclrtDestroyStream(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream");
  char buffer[8] = {};
  EXPECT_STATUS(aclrtMemsetAsync(buffer, 8, 1, 8, stream), ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtMemsetAsync");
  EXPECT_STATUS(aclrtMemcpyAsync(buffer, 8, buffer + 4, 4, ACL_MEMCPY_DEVICE_TO_DEVICE, stream),
                ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtMemcpyAsync");
  CHECK(buffer[0] == 0);
}

void memory() {
  void* p = nullptr;
  EXPECT_STATUS(aclrtMalloc(nullptr, 16, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM, "aclrtMalloc");
  EXPECT_STATUS(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM, "aclrtMalloc");
  EXPECT_STATUS(aclrtMalloc(&p, 16, static_cast<aclrtMemMallocPolicy>(99)), ACL_ERROR_INVALID_PARAM, "aclrtMalloc");
  EXPECT_STATUS(aclrtMalloc(&p, size_t{1} << 50, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc");
  EXPECT_STATUS(aclrtMalloc(&p, 100, ACL_MEM_MALLOC_NORMAL_ONLY), 0);
  CHECK(p != nullptr && reinterpret_cast<uintptr_t>(p) % 64 == 0);

  unsigned char host[100], back[100];
  for (int i = 0; i < 100; ++i) host[i] = static_cast<unsigned char>(i);
  EXPECT_STATUS(aclrtMemcpy(p, 100, host, 100, ACL_MEMCPY_HOST_TO_DEVICE), 0);
  EXPECT_STATUS(aclrtMemcpy(back, 100, p, 100, ACL_MEMCPY_DEVICE_TO_HOST), 0);
  CHECK(std::memcmp(host, back, 100) == 0);
  for (int kind = ACL_MEMCPY_HOST_TO_HOST; kind <= ACL_MEMCPY_DEFAULT; ++kind)
    EXPECT_STATUS(aclrtMemcpy(back, 100, p, 10, static_cast<aclrtMemcpyKind>(kind)), 0);
  // Sizes and kinds are checked; nothing is copied on failure.
  std::memset(back, 0xee, sizeof back);
  EXPECT_STATUS(aclrtMemcpy(back, 50, p, 100, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM,
                "aclrtMemcpy", "destMax");
  EXPECT_STATUS(aclrtMemcpy(back, 100, p, 10, static_cast<aclrtMemcpyKind>(5)), ACL_ERROR_INVALID_PARAM,
                "aclrtMemcpy", "aclrtMemcpyKind");
  EXPECT_STATUS(aclrtMemcpy(back, 100, p, 10, static_cast<aclrtMemcpyKind>(-1)), ACL_ERROR_INVALID_PARAM,
                "aclrtMemcpy", "aclrtMemcpyKind");
  EXPECT_STATUS(aclrtMemcpy(nullptr, 100, p, 10, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM,
                "aclrtMemcpy", "dst");
  EXPECT_STATUS(aclrtMemcpy(back, 100, nullptr, 10, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM,
                "aclrtMemcpy", "src");
  CHECK(back[0] == 0xee && back[99] == 0xee);
  // Overlapping ranges behave as memmove.
  EXPECT_STATUS(aclrtMemcpy(static_cast<char*>(p) + 1, 99, p, 50, ACL_MEMCPY_DEVICE_TO_DEVICE), 0);
  CHECK(static_cast<unsigned char*>(p)[1] == 0 && static_cast<unsigned char*>(p)[50] == 49);

  EXPECT_STATUS(aclrtMemset(p, 100, 0x7f, 100), 0);
  CHECK(static_cast<unsigned char*>(p)[99] == 0x7f);
  EXPECT_STATUS(aclrtMemset(p, 10, 0, 11), ACL_ERROR_INVALID_PARAM, "aclrtMemset", "maxCount");
  EXPECT_STATUS(aclrtMemset(nullptr, 10, 0, 1), ACL_ERROR_INVALID_PARAM, "aclrtMemset");
  CHECK(static_cast<unsigned char*>(p)[0] == 0x7f);
  EXPECT_STATUS(aclrtMemsetAsync(p, 100, 1, 100, nullptr), 0);
  EXPECT_STATUS(aclrtMemcpyAsync(back, 100, p, 100, ACL_MEMCPY_DEVICE_TO_HOST, nullptr), 0);
  CHECK(back[42] == 1);

  void* h = nullptr;
  EXPECT_STATUS(aclrtMallocHost(&h, 32), 0);
  EXPECT_STATUS(aclrtFree(h), ACL_ERROR_INVALID_PARAM, "aclrtFree");          // wrong family
  EXPECT_STATUS(aclrtFreeHost(p), ACL_ERROR_INVALID_PARAM, "aclrtFreeHost");
  EXPECT_STATUS(aclrtFreeHost(h), 0);
  EXPECT_STATUS(aclrtMallocHost(nullptr, 32), ACL_ERROR_INVALID_PARAM, "aclrtMallocHost");
  EXPECT_STATUS(aclrtFree(p), 0);
  EXPECT_STATUS(aclrtFree(p), ACL_ERROR_INVALID_PARAM, "aclrtFree");          // double free
  EXPECT_STATUS(aclrtFree(host), ACL_ERROR_INVALID_PARAM, "aclrtFree");       // never allocated
  EXPECT_STATUS(aclrtFree(nullptr), ACL_ERROR_INVALID_PARAM, "aclrtFree");
}

void tensors_and_arrays() {
  float data[6] = {};
  const int64_t dims[2] = {2, 3}, negative[2] = {2, -3}, huge[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 1 << 20};
  CHECK(aclCreateTensor(nullptr, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, data) == nullptr);
  CHECK(harness::take_message().find("viewDims") != std::string::npos);
  CHECK(aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 2, data) == nullptr);
  CHECK(harness::take_message().find("storageDims") != std::string::npos);
  CHECK(aclCreateTensor(negative, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, data) == nullptr);
  CHECK(harness::take_message().find("aclCreateTensor") != std::string::npos);
  CHECK(aclCreateTensor(huge, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, data) == nullptr);
  CHECK(harness::take_message().find("overflow") != std::string::npos);
  CHECK(aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, nullptr) == nullptr);
  CHECK(harness::take_message().find("tensorData") != std::string::npos);
  // Allowed: no data for an empty tensor, no storage dims, a 0-d tensor, unusual dtypes.
  const int64_t empty_dims[2] = {0, 3};
  aclTensor* empty = aclCreateTensor(empty_dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, nullptr);
  CHECK(empty != nullptr);
  aclTensor* scalar = aclCreateTensor(nullptr, 0, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, data);
  CHECK(scalar != nullptr);
  aclTensor* ints = aclCreateTensor(dims, 2, ACL_INT32, nullptr, 0, ACL_FORMAT_NCHW, dims, 2, data);
  CHECK(ints != nullptr);
  CHECK(harness::take_message().empty());
  EXPECT_STATUS(aclDestroyTensor(empty), 0);
  EXPECT_STATUS(aclDestroyTensor(scalar), 0);
  EXPECT_STATUS(aclDestroyTensor(ints), 0);
  EXPECT_STATUS(aclDestroyTensor(nullptr), 0);

  bool flags[3] = {true, false, true};
  CHECK(aclCreateBoolArray(nullptr, 3) == nullptr);
  CHECK(harness::take_message().find("aclCreateBoolArray") != std::string::npos);
  aclBoolArray* none = aclCreateBoolArray(nullptr, 0);
  CHECK(none != nullptr);
  aclBoolArray* three = aclCreateBoolArray(flags, 3);
  CHECK(three != nullptr);
  EXPECT_STATUS(aclDestroyBoolArray(none), 0);
  EXPECT_STATUS(aclDestroyBoolArray(three), 0);
  EXPECT_STATUS(aclDestroyBoolArray(nullptr), 0);

  EXPECT_STATUS(aclnnCpuSetTensorReadOnly(nullptr, true), ACLNN_ERR_PARAM_NULLPTR, "aclnnCpuSetTensorReadOnly");
}

void error_messages() {
  // As CANN documents aclGetRecentErrMsg ("gets and clears"): the messages of failed calls pile
  // up until it reads them, newest first, one a line; a call that succeeds in between leaves
  // them (the usual "fail, clean up, then log"); a read clears them.
  EXPECT_STATUS(aclrtSetDevice(5), ACL_ERROR_RT_INVALID_DEVICEID, "aclrtSetDevice");
  CHECK(aclrtSetDevice(57) != 0);
  CHECK(aclrtSetDevice(0) == 0);
  int64_t shape[1] = {2};
  int64_t stride[1] = {1};
  float data[2] = {0, 0};
  aclTensor* t = aclCreateTensor(shape, 1, ACL_FLOAT, stride, 0, ACL_FORMAT_ND, shape, 1, data);
  CHECK(t != nullptr);
  CHECK(aclDestroyTensor(t) == 0);
  const std::string kept = aclGetRecentErrMsg();
  CHECK(kept.find("57") != std::string::npos && kept.find('\n') == std::string::npos);
  CHECK(std::string(aclGetRecentErrMsg()).empty());
  // Two failures: both messages, the newer first.
  CHECK(aclrtSetDevice(58) != 0);
  CHECK(aclrtSetDevice(59) != 0);
  const std::string both = aclGetRecentErrMsg();
  const size_t newline = both.find('\n');
  CHECK(newline != std::string::npos && both.find("59") < newline && both.find("58") > newline);
  // A caller that never reads keeps the newest 32.
  for (int i = 0; i < 40; ++i) CHECK(aclrtSetDevice(100 + i) != 0);
  const std::string many = aclGetRecentErrMsg();
  size_t lines = 1;
  for (char c : many) lines += c == '\n';
  CHECK(lines == 32);
  CHECK(many.find("139") < many.find('\n') && many.find("108") != std::string::npos &&
        many.find("107") == std::string::npos);
  // The returned pointer stays valid until the next aclGetRecentErrMsg call.
  CHECK(aclrtSetDevice(6) != 0);
  const char* first = aclGetRecentErrMsg();
  std::string copy = first;
  CHECK(aclrtSetDevice(7) != 0);  // a new failure does not disturb the handed-out text
  CHECK(copy == first);
  CHECK(std::string(aclGetRecentErrMsg()).find("7") != std::string::npos);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: acl_runtime <scratch-dir>\n");
    return 2;
  }
  scratch = argv[1];
  init_and_finalize();
  devices();
  contexts();
  streams();
  memory();
  tensors_and_arrays();
  error_messages();
  EXPECT_STATUS(aclrtResetDevice(0), 0);
  EXPECT_STATUS(aclFinalize(), 0);
  return harness::finish();
}
