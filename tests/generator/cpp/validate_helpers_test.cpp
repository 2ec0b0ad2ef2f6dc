// Unit test of include/aclnn_cpu/validate.h (runtime/validate.cpp): the helpers every generated
// validator relies on. Built and run by tests/generator/test_validate_helpers.py.
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "aclnn_cpu/status.h"
#include "aclnn_cpu/tensor.h"
#include "aclnn_cpu/validate.h"

using namespace aclnn_cpu;

static int failures = 0;
#define EXPECT(cond)                                                   \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
      ++failures;                                                      \
    }                                                                  \
  } while (0)

static aclTensor make(std::vector<int64_t> dims, std::vector<int64_t> strides, void* data,
                      int64_t offset = 0, DType dt = DType::Float32) {
  aclTensor t;
  t.view_dims = dims;
  t.strides.assign(strides.data(), strides.data() + strides.size());
  t.storage_dims.assign(dims.data(), dims.data() + dims.size());
  t.offset = offset;
  t.dtype = dt;
  t.data = data;
  return t;
}

int main() {
  float buf[64] = {};
  // accessors
  aclTensor a = make({4, 2}, {2, 1}, buf);
  EXPECT(rank(&a) == 2 && numel(&a) == 8 && dim(&a, -1) == 2 && dim(&a, 0) == 4);
  bool threw = false;
  try { dim(&a, 2); } catch (const std::logic_error&) { threw = true; }
  EXPECT(threw);
  EXPECT(to_string(shape(&a)) == "[4, 2]");
  EXPECT(to_string(DType::BFloat16) == "bfloat16");
  EXPECT(to_string(static_cast<DType>(99)) == "dtype(99)");
  EXPECT(to_string(int64_t(-3)) == "-3" && to_string(7) == "7" && to_string(true) == "true");
  EXPECT(count_to_string(-1) == "more than int64 can count" && count_to_string(24) == "24");

  // checked_mul, broadcasts_to
  EXPECT(checked_mul({2, 3, 4}) == 24 && checked_mul({}) == 1 && checked_mul({5, 0}) == 0);
  EXPECT(checked_mul({int64_t(1) << 40, int64_t(1) << 40}) == -1 && checked_mul({-1, 2}) == -1);
  EXPECT(broadcasts_to({2}, {4, 2}) && broadcasts_to({1, 2}, {4, 2}) && broadcasts_to({}, {4, 2}));
  EXPECT(!broadcasts_to({3}, {4, 2}) && !broadcasts_to({1, 4, 2}, {4, 2}) && !broadcasts_to({4, 2}, {1, 2}));

  // masks
  bool flags[2] = {true, false};
  aclBoolArray* arr = aclCreateBoolArray(flags, 2);
  EXPECT(mask(arr, 0) && !mask(arr, 1) && !mask(arr, 2) && !mask(arr, -1) && !mask(nullptr, 0));
  EXPECT(check_bool_array_size("op", "m", arr, 2) == kSuccess);
  EXPECT(check_bool_array_size("op", "m", arr, 3) == kParamInvalid);
  EXPECT(std::string(recent_error()) == "op: m has 2 elements, expected 3");
  aclDestroyBoolArray(arr);

  // layout
  EXPECT(check_layout("op", "t", &a) == kSuccess);
  aclTensor neg = make({-1, 2}, {2, 1}, buf);
  EXPECT(check_layout("op", "t", &neg) == kParamInvalid);
  aclTensor huge = make({int64_t(1) << 40, int64_t(1) << 40}, {1, 1}, buf);
  EXPECT(check_layout("op", "t", &huge) == kParamInvalid);
  aclTensor far = make({2}, {int64_t(1) << 62}, buf);
  EXPECT(check_layout("op", "t", &far) == kParamInvalid);
  aclTensor nodata = make({2}, {1}, nullptr);
  EXPECT(check_layout("op", "t", &nodata) == kParamInvalid);
  aclTensor empty = make({0, 3}, {3, 1}, nullptr);
  EXPECT(check_layout("op", "t", &empty) == kSuccess);
  aclTensor short_strides = make({2, 2}, {1}, buf);
  EXPECT(check_layout("op", "t", &short_strides) == kParamInvalid);
  EXPECT(check_max_rank("op", "t", &a, 1) == kParamInvalid && check_max_rank("op", "t", &a, 2) == kSuccess);

  // internal overlap
  EXPECT(!has_internal_overlap(&a));
  aclTensor transposed = make({2, 4}, {1, 2}, buf);
  EXPECT(!has_internal_overlap(&transposed));
  aclTensor zero = make({4, 2}, {0, 1}, buf);
  EXPECT(has_internal_overlap(&zero));
  aclTensor alias = make({4, 2}, {1, 1}, buf);
  EXPECT(has_internal_overlap(&alias));
  aclTensor negative = make({4, 2}, {-2, -1}, buf, 7);
  EXPECT(!has_internal_overlap(&negative));
  aclTensor ones = make({1, 5}, {0, 1}, buf);  // zero stride on a size-1 dim is harmless
  EXPECT(!has_internal_overlap(&ones));
  EXPECT(check_output_writable("op", "out", &zero) == kParamInvalid);
  EXPECT(std::string(recent_error()) ==
         "op: out of shape [4, 2] and strides [0, 1] would write some memory locations more than once");
  // Strides past the 8 a tensor keeps inline live on the heap; reassigning goes back inline.
  aclTensor deep = make(std::vector<int64_t>(12, 2), std::vector<int64_t>(12, 1), buf);
  EXPECT(deep.strides.size() == 12 && deep.strides[11] == 1 && has_internal_overlap(&deep));
  EXPECT(check_output_writable("op", "out", &deep) == kParamInvalid);
  EXPECT(std::string(recent_error()).find("strides [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]") != std::string::npos);
  const int64_t four[4] = {8, 4, 2, 1};
  deep.strides.assign(four, four + 4);
  EXPECT(deep.strides.size() == 4 && deep.strides[0] == 8 && deep.strides[3] == 1);
  deep.strides.assign(9, 3);
  EXPECT(deep.strides.size() == 9 && deep.strides[8] == 3);
  aclTensor ro = make({2}, {1}, buf);
  ro.read_only = true;
  EXPECT(check_output_writable("op", "out", &ro) == kParamInvalid);
  EXPECT(std::string(recent_error()) == "op: out is read-only and cannot be written");

  // overlap between tensors (byte extents)
  aclTensor first = make({4}, {1}, buf);
  aclTensor second = make({4}, {1}, buf, 4);
  aclTensor straddle = make({4}, {1}, buf, 3);
  EXPECT(!overlaps(&first, &second) && overlaps(&first, &straddle));
  aclTensor half_lo = make({4}, {1}, buf, 0, DType::Float16);  // bytes [0, 8)
  aclTensor f32_hi = make({2}, {1}, buf, 2);                   // bytes [8, 16)
  EXPECT(!overlaps(&half_lo, &f32_hi));
  aclTensor reversed = make({4}, {-1}, buf, 7);  // elements 4..7
  EXPECT(!overlaps(&first, &reversed) && overlaps(&second, &reversed));
  EXPECT(!overlaps(&first, &empty) && !overlaps(nullptr, &first));
  EXPECT(check_no_overlap("op", "out", &first, "in", &straddle) == kParamInvalid);

  // scalars: every dtype a scalar may hold reads back as the double of its value
  {
    const float f32 = 0.1f;
    const double f64 = -2.5e300;
    const uint16_t f16 = 0x3555, bf16 = 0x3DCD;  // 0.333251953125 and 0.10009765625
    const int8_t i8 = -128;
    const int16_t i16 = -32768;
    const int32_t i32 = -2147483647;
    const int64_t i64 = -(int64_t(1) << 53);
    const uint8_t u8 = 255, yes = 2;  // any nonzero byte reads as true
    const uint16_t u16 = 65535;
    const uint32_t u32 = 4294967295u;
    const uint64_t u64 = uint64_t(1) << 63;
    const struct {
      const void* value;
      aclDataType type;
      double expect;
    } cases[] = {
        {&f32, ACL_FLOAT, double(0.1f)}, {&f64, ACL_DOUBLE, -2.5e300},
        {&f16, ACL_FLOAT16, 0.333251953125}, {&bf16, ACL_BF16, 0.10009765625},
        {&i8, ACL_INT8, -128}, {&i16, ACL_INT16, -32768}, {&i32, ACL_INT32, -2147483647.0},
        {&i64, ACL_INT64, -9007199254740992.0}, {&u8, ACL_UINT8, 255}, {&u16, ACL_UINT16, 65535},
        {&u32, ACL_UINT32, 4294967295.0}, {&u64, ACL_UINT64, 9223372036854775808.0},
        {&yes, ACL_BOOL, 1.0},
    };
    for (const auto& c : cases) {
      aclScalar* s = aclCreateScalar(const_cast<void*>(c.value), c.type);
      EXPECT(s != nullptr);
      if (s == nullptr) continue;
      EXPECT(scalar_value(s) == c.expect);
      EXPECT(static_cast<int>(dtype(s)) == static_cast<int>(c.type));
      const ScalarArg arg = make_scalar_arg(s);
      EXPECT(arg.present && arg.value == c.expect && arg.dtype == dtype(s));
      aclDestroyScalar(s);
    }
    EXPECT(aclCreateScalar(nullptr, ACL_FLOAT) == nullptr);
    EXPECT(aclCreateScalar(const_cast<float*>(&f32), ACL_COMPLEX64) == nullptr);
    EXPECT(aclCreateScalar(const_cast<float*>(&f32), ACL_STRING) == nullptr);
    EXPECT(!make_scalar_arg(nullptr).present);
    EXPECT(aclDestroyScalar(nullptr) == 0);
  }
  // integer arrays and the dim-list helpers
  {
    const int64_t values[] = {3, -1, 0};
    aclIntArray* arr = aclCreateIntArray(values, 3);
    EXPECT(arr != nullptr && int_values(arr) == (Shape{3, -1, 0}));
    uint64_t n = 0;
    EXPECT(aclGetIntArraySize(arr, &n) == 0 && n == 3);
    EXPECT(aclGetIntArraySize(nullptr, &n) == kParamNullptr);
    EXPECT(aclGetIntArraySize(arr, nullptr) == kParamNullptr);
    const IntArrayArg arg = make_int_array_arg(arr);
    EXPECT(arg.present && arg.size == 3 && arg.values[0] == 3 && arg.values[1] == -1);
    EXPECT(check_int_array_size("op", "dims", arr, 3) == kSuccess);
    EXPECT(check_int_array_size("op", "dims", arr, 2) == kParamInvalid);
    EXPECT(check_int_array_size("op", "dims", nullptr, 0) == kSuccess);
    aclDestroyIntArray(arr);
    EXPECT(aclCreateIntArray(nullptr, 2) == nullptr);
    // sizes past what memory can hold fail (value + size must not wrap to a small array)
    for (uint64_t huge : {uint64_t(1) << 61, uint64_t(1) << 62, ~uint64_t(0)})
      EXPECT(aclCreateIntArray(values, huge) == nullptr);
    // A bool array past max_size (smaller huge sizes would really try to allocate, which
    // aborts under the sanitizer run's allocator instead of throwing).
    const bool flags[] = {true};
    EXPECT(aclCreateBoolArray(flags, ~uint64_t(0)) == nullptr);
    aclIntArray* none = aclCreateIntArray(nullptr, 0);
    EXPECT(none != nullptr && int_values(none).empty());
    aclDestroyIntArray(none);
    std::vector<int64_t> long_list(kMaxIntArray + 1, 0);
    aclIntArray* too_long = aclCreateIntArray(long_list.data(), long_list.size());
    EXPECT(!make_int_array_arg(too_long).present);
    aclDestroyIntArray(too_long);
    EXPECT(dims_in_range({0, -4, 3}, 4) && !dims_in_range({4}, 4) && !dims_in_range({-5}, 4));
    EXPECT(dims_in_range({0, -1}, 0) && !dims_in_range({1}, 0));  // a 0-d tensor: dim 0 or -1
    EXPECT(dims_unique({0, 1, -1}, 3) && !dims_unique({1, -2}, 3) && !dims_unique({0, 0}, 1));
    EXPECT(dims_unique({}, 2) && dims_unique({7, 7}, 2));  // out of range: not compared
  }
  // accessors of an absent (null) argument throw (561000 at the entry point), never crash
  {
    int thrown = 0;
    const aclTensor* no_tensor = nullptr;
    const aclScalar* no_scalar = nullptr;
    const aclIntArray* no_array = nullptr;
    for (int k = 0; k < 7; ++k) {
      try {
        switch (k) {
          case 0: rank(no_tensor); break;
          case 1: numel(no_tensor); break;
          case 2: dim(no_tensor, 0); break;
          case 3: shape(no_tensor); break;
          case 4: scalar_value(no_scalar); break;
          case 5: dtype(no_scalar); break;
          case 6: int_values(no_array); break;
        }
      } catch (const std::logic_error& e) {
        thrown += std::strstr(e.what(), "present(") != nullptr;
      }
    }
    EXPECT(thrown == 7);
  }

  std::printf(failures ? "%d failures\n" : "all passed\n", failures);
  return failures ? 1 : 0;
}
