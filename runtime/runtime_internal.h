// Declarations shared by the runtime's own source files (not installed, not for kernels).
#pragma once
#include <string>
#include <vector>

#include "acl/acl.h"

namespace aclnn_cpu {

// Null (the default stream) or a stream from aclrtCreateStream that was not destroyed yet.
bool stream_is_usable(aclrtStream stream);

// The names of a vocabulary (kIsaNames, kProductNames) as messages list the choices: each in
// `quote`, comma-separated, the last after "or" ("baseline, avx2 or avx512").
std::string name_choices(const char* const* names, int count, const char* quote);

// A parsed JSON document (aclInit's configuration file). Objects keep their members in file
// order, as parallel key/value vectors.
struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0.0;
  std::string text;               // String
  std::vector<JsonValue> items;   // Array elements, or Object values
  std::vector<std::string> keys;  // Object keys, parallel to items

  const JsonValue* member(const char* key) const;  // last member of that name, or null
};

// Strict RFC 8259 JSON (no comments, no trailing commas). On failure returns false and sets
// `error` to a message with the line and column.
bool parse_json(const std::string& text, JsonValue* out, std::string* error);

}  // namespace aclnn_cpu
