// aclInit / aclFinalize and the optional JSON configuration file (format in acl/acl.h).
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

#include "acl/acl.h"
#include "aclnn_cpu/isa.h"
#include "aclnn_cpu/parallel.h"
#include "aclnn_cpu/product.h"
#include "aclnn_cpu/status.h"
#include "fork_guard.h"
#include "runtime_internal.h"

namespace aclnn_cpu {
namespace {

std::mutex init_mutex;
[[maybe_unused]] const int init_mutex_fork_guard = hold_across_fork<init_mutex>();
bool initialized = false;

// What the configuration file of the current aclInit changed, and the values before: aclFinalize
// puts them back, so a later aclInit without that setting starts from the same state.
struct Restore {
  bool product = false, threads = false, isa = false;
  Product previous_product = kDefaultProduct;
  int previous_threads = 0;
  Isa previous_isa = kIsaLevels[0];
};
Restore restore;  // guarded by init_mutex

// The settings a configuration file asks for; applied only when the whole file is valid.
struct Settings {
  const char* product = nullptr;  // points into the parsed document
  int num_threads = 0;            // 0: unchanged
  bool has_isa = false;
  Isa isa = kIsaLevels[0];
};

aclError read_file(const char* path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return fail(ACL_ERROR_INVALID_FILE, "aclInit: cannot open the configuration file '%s': %s",
                path, std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad())
    return fail(ACL_ERROR_INVALID_FILE, "aclInit: cannot read the configuration file '%s'", path);
  *text = buffer.str();
  return ACL_SUCCESS;
}

// Reads the "aclnn_cpu" section; other top-level keys belong to CANN and are ignored.
aclError read_settings(const char* path, const JsonValue& doc, Settings* settings) {
  if (doc.kind != JsonValue::Kind::Object)
    return fail(ACL_ERROR_PARSE_FILE, "aclInit: '%s' must hold a JSON object", path);
  const JsonValue* section = doc.member("aclnn_cpu");
  if (section == nullptr) return ACL_SUCCESS;
  if (section->kind != JsonValue::Kind::Object)
    return fail(ACL_ERROR_FILE_ATTR_INVALID, "aclInit: '%s': \"aclnn_cpu\" must be an object",
                path);
  for (size_t i = 0; i < section->keys.size(); ++i) {
    const std::string& key = section->keys[i];
    const JsonValue& value = section->items[i];
    if (key == "product") {
      bool known = false;
      for (const char* name : kProductNames)
        known = known || (value.kind == JsonValue::Kind::String && value.text == name);
      if (!known)
        return fail(ACL_ERROR_FILE_ATTR_INVALID, "aclInit: '%s': aclnn_cpu.product must be %s", path,
                    name_choices(kProductNames, kProductCount, "\"").c_str());
      settings->product = value.text.c_str();
    } else if (key == "num_threads") {
      if (value.kind != JsonValue::Kind::Number || value.number < 1 || value.number > 4096 ||
          std::floor(value.number) != value.number)
        return fail(ACL_ERROR_FILE_ATTR_INVALID,
                    "aclInit: '%s': aclnn_cpu.num_threads must be an integer in [1, 4096]", path);
      settings->num_threads = static_cast<int>(value.number);
    } else if (key == "isa") {
      bool known = false;
      if (value.kind == JsonValue::Kind::String) {
        for (Isa level : kIsaLevels) {
          if (value.text == isa_name(level)) {
            settings->isa = level;
            known = true;
          }
        }
      }
      if (!known)
        return fail(ACL_ERROR_FILE_ATTR_INVALID, "aclInit: '%s': aclnn_cpu.isa must be %s", path,
                    name_choices(kIsaNames, kIsaCount, "\"").c_str());
      settings->has_isa = true;
    } else {
      return fail(ACL_ERROR_FILE_ATTR_INVALID,
                  "aclInit: '%s': unknown key aclnn_cpu.%s (known: product, num_threads, isa)",
                  path, key.c_str());
    }
  }
  return ACL_SUCCESS;
}

void apply(const Settings& settings) {
  restore = Restore{};
  if (settings.product != nullptr) {
    restore.product = true;
    restore.previous_product = current_product();
    set_product(settings.product);
  }
  if (settings.num_threads > 0) {
    restore.threads = true;
    restore.previous_threads = num_threads();
    set_num_threads(settings.num_threads);
  }
  if (settings.has_isa) {
    restore.isa = true;
    restore.previous_isa = active_isa();
    Isa best = best_supported_isa();
    set_active_isa(static_cast<int>(settings.isa) < static_cast<int>(best) ? settings.isa : best);
  }
}

void undo_settings() {
  if (restore.product) set_product(product_name(restore.previous_product));
  if (restore.threads) set_num_threads(restore.previous_threads);
  if (restore.isa) set_active_isa(restore.previous_isa);
  restore = Restore{};
}

}  // namespace
}  // namespace aclnn_cpu

using namespace aclnn_cpu;

extern "C" {

ACL_FUNC_VISIBILITY aclError aclInit(const char* configPath) {
  try {
    std::lock_guard<std::mutex> lock(init_mutex);
    if (initialized)
      return fail(ACL_ERROR_REPEAT_INITIALIZE,
                  "aclInit: already initialised (call aclFinalize before initialising again)");
    restore = Restore{};
    if (configPath != nullptr && *configPath != '\0') {
      std::string text;
      if (aclError e = read_file(configPath, &text)) return e;
      JsonValue doc;
      std::string parse_error;
      if (!parse_json(text, &doc, &parse_error))
        return fail(ACL_ERROR_PARSE_FILE, "aclInit: '%s' is not valid JSON: %s", configPath,
                    parse_error.c_str());
      Settings settings;
      if (aclError e = read_settings(configPath, doc, &settings)) return e;
      apply(settings);
    }
    initialized = true;
    return ACL_SUCCESS;
  } catch (const std::bad_alloc&) {
    return fail(ACL_ERROR_BAD_ALLOC, "aclInit: out of memory");
  } catch (...) {
    return fail(ACL_ERROR_INTERNAL_ERROR, "aclInit: unexpected internal error");
  }
}

ACL_FUNC_VISIBILITY aclError aclFinalize(void) {
  std::lock_guard<std::mutex> lock(init_mutex);
  if (!initialized)
    return fail(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize: not initialised (aclInit was not called "
                                           "or aclFinalize was already called)");
  undo_settings();
  initialized = false;
  return ACL_SUCCESS;
}

}  // extern "C"
