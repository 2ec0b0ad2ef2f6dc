// A small strict JSON reader, enough for aclInit's configuration file. Written here to keep the
// runtime free of dependencies; nesting is limited so a hostile file cannot exhaust the stack.
#include <cstdlib>
#include <cstring>

#include "runtime_internal.h"

namespace aclnn_cpu {
namespace {

constexpr int kMaxDepth = 64;

class Reader {
 public:
  explicit Reader(const std::string& text) : s_(text) {}

  bool document(JsonValue* out) {
    skip_space();
    if (!value(out, 0)) return false;
    skip_space();
    if (pos_ != s_.size()) return error("unexpected text after the JSON value");
    return true;
  }

  std::string message() const { return message_; }

 private:
  bool error(const char* what) {
    if (message_.empty()) {
      size_t line = 1, column = 1;
      for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
        if (s_[i] == '\n') {
          ++line;
          column = 1;
        } else {
          ++column;
        }
      }
      message_ = std::string(what) + " at line " + std::to_string(line) + ", column " +
                 std::to_string(column);
    }
    return false;
  }

  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  bool literal(const char* word) {
    size_t n = std::strlen(word);
    if (s_.compare(pos_, n, word) != 0) return error("invalid literal");
    pos_ += n;
    return true;
  }

  bool value(JsonValue* out, int depth) {
    if (depth > kMaxDepth) return error("nesting too deep");
    if (pos_ >= s_.size()) return error("unexpected end of input");
    char c = s_[pos_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out->kind = JsonValue::Kind::String;
      return string(&out->text);
    }
    if (c == 't') {
      out->kind = JsonValue::Kind::Bool;
      out->boolean = true;
      return literal("true");
    }
    if (c == 'f') {
      out->kind = JsonValue::Kind::Bool;
      out->boolean = false;
      return literal("false");
    }
    if (c == 'n') {
      out->kind = JsonValue::Kind::Null;
      return literal("null");
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number(out);
    return error("unexpected character");
  }

  bool object(JsonValue* out, int depth) {
    out->kind = JsonValue::Kind::Object;
    ++pos_;  // '{'
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '"') return error("expected a member name");
      std::string key;
      if (!string(&key)) return false;
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ':') return error("expected ':'");
      ++pos_;
      skip_space();
      JsonValue member;
      if (!value(&member, depth + 1)) return false;
      out->keys.push_back(std::move(key));
      out->items.push_back(std::move(member));
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return error("expected ',' or '}'");
    }
  }

  bool array(JsonValue* out, int depth) {
    out->kind = JsonValue::Kind::Array;
    ++pos_;  // '['
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_space();
      JsonValue item;
      if (!value(&item, depth + 1)) return false;
      out->items.push_back(std::move(item));
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return error("expected ',' or ']'");
    }
  }

  static void append_utf8(std::string* out, unsigned code) {
    if (code < 0x80) {
      out->push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (code >> 6)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else if (code < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (code >> 12)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (code >> 18)));
      out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
  }

  bool hex4(unsigned* code) {
    if (pos_ + 4 > s_.size()) return error("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f') v |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= static_cast<unsigned>(h - 'A' + 10);
      else return error("invalid \\u escape");
    }
    *code = v;
    return true;
  }

  bool string(std::string* out) {
    ++pos_;  // opening quote
    for (;;) {
      if (pos_ >= s_.size()) return error("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return error("control character in string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) return error("unterminated string");
      char e = s_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          unsigned code = 0;
          if (!hex4(&code)) return false;
          if (code >= 0xD800 && code <= 0xDBFF) {  // high surrogate: a low one must follow
            unsigned low = 0;
            if (s_.compare(pos_, 2, "\\u") != 0) return error("unpaired surrogate");
            pos_ += 2;
            if (!hex4(&low)) return false;
            if (low < 0xDC00 || low > 0xDFFF) return error("unpaired surrogate");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          } else if (code >= 0xDC00 && code <= 0xDFFF) {
            return error("unpaired surrogate");
          }
          append_utf8(out, code);
          break;
        }
        default: return error("invalid escape");
      }
    }
  }

  bool digits() {
    size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    return pos_ > start;
  }

  bool number(JsonValue* out) {
    size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '0') {
      ++pos_;  // no leading zeros
    } else if (!digits()) {
      return error("invalid number");
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (!digits()) return error("invalid number");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digits()) return error("invalid number");
    }
    out->kind = JsonValue::Kind::Number;
    out->number = std::strtod(s_.substr(start, pos_ - start).c_str(), nullptr);
    return true;
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string message_;
};

}  // namespace

const JsonValue* JsonValue::member(const char* key) const {
  if (kind != Kind::Object) return nullptr;
  for (size_t i = keys.size(); i-- > 0;)
    if (keys[i] == key) return &items[i];
  return nullptr;
}

bool parse_json(const std::string& text, JsonValue* out, std::string* error) {
  Reader reader(text);
  JsonValue result;
  if (!reader.document(&result)) {
    if (error != nullptr) *error = reader.message();
    return false;
  }
  *out = std::move(result);
  return true;
}

}  // namespace aclnn_cpu
