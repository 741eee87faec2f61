// graphstep_core: plain C++, includes no CUDA header.
#include "train/detail/safetensors_header.hpp"

#include <cstddef>
#include <graphstep/error.hpp>
#include <limits>
#include <set>
#include <string>

namespace graphstep::train::detail {
namespace {

constexpr std::string_view metadata_key = "__metadata__";

// JSON's whitespace (RFC 8259, section 2).
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

void append_utf8(std::string& out, std::uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

// A strict recursive-descent reader of the header's subset of JSON. The nesting is fixed (the
// header, a tensor or the metadata, a shape), so no input can make it recurse deeply.
class parser {
 public:
  parser(std::string_view text, std::string const& where) : text_{text}, where_{where} {}

  safetensors_header header() {
    // The format requires the header to begin with '{'; no writer puts whitespace first.
    if (text_.empty() || text_[0] != '{') {
      fail("the header must begin with '{'", "a safetensors header is one JSON object");
    }
    safetensors_header result;
    std::set<std::string, std::less<>> keys;
    members([&](std::string key) {
      if (!keys.insert(key).second) {
        fail("the key " + quoted(key) + " appears twice in the header",
             "each tensor name must be unique");
      }
      if (key == metadata_key) {
        metadata(result);
      } else {
        result.tensors.push_back(tensor(std::move(key)));
      }
    });
    skip_space();
    if (at_ < text_.size()) {
      fail("the header's object ends at byte " + std::to_string(at_) + ", but " + found() +
               " follows it",
           "only spaces may pad the header after its object");
    }
    return result;
  }

 private:
  [[noreturn]] void fail(std::string const& what, std::string const& hint) const {
    throw error{where_ + ": the JSON header is malformed: " + what + " (byte " +
                std::to_string(at_) + " of " + std::to_string(text_.size()) + "); " + hint};
  }

  [[noreturn]] void expected(std::string const& what) const {
    fail("expected " + what + ", found " + found(), "the header is not valid JSON");
  }

  // What is at the current position, for a message.
  [[nodiscard]] std::string found() const {
    if (at_ >= text_.size()) return "the end of the header";
    auto const c = static_cast<unsigned char>(text_[at_]);
    if (c >= 0x20 && c < 0x7F) return std::string{"'"} + static_cast<char>(c) + "'";
    return "the byte 0x" + std::string{"0123456789abcdef"[c >> 4]} + "0123456789abcdef"[c & 0xF];
  }

  static std::string quoted(std::string const& text) {
    constexpr std::size_t longest = 80;
    if (text.size() > longest) return "\"" + text.substr(0, longest) + "...\"";
    return "\"" + text + "\"";
  }

  void skip_space() {
    while (at_ < text_.size() && is_space(text_[at_])) ++at_;
  }

  [[nodiscard]] bool next_is(char c) {
    skip_space();
    return at_ < text_.size() && text_[at_] == c;
  }

  void expect(char c, char const* what) {
    if (!next_is(c)) expected(what);
    ++at_;
  }

  // An object's members: `member` is called with each key, positioned at its value.
  template <class Member>
  void members(Member&& member) {
    expect('{', "'{'");
    if (next_is('}')) {
      ++at_;
      return;
    }
    while (true) {
      skip_space();
      if (!next_is('"')) expected("a key (a string)");
      std::string key = string();
      expect(':', "':' after a key");
      member(std::move(key));
      if (next_is(',')) {
        ++at_;
        continue;
      }
      expect('}', "',' or '}' after a value");
      return;
    }
  }

  void metadata(safetensors_header& result) {
    std::set<std::string, std::less<>> keys;
    members([&](std::string key) {
      if (!keys.insert(key).second) {
        fail("the key " + quoted(key) + " appears twice in \"__metadata__\"",
             "each metadata key must be unique");
      }
      if (!next_is('"')) {
        fail("the value of " + quoted(key) + " in \"__metadata__\" is not a string",
             "safetensors metadata maps strings to strings");
      }
      result.metadata.emplace_back(std::move(key), string());
    });
  }

  safetensors_tensor tensor(std::string name) {
    if (!next_is('{')) {
      fail("the value of " + quoted(name) + " is not an object",
           R"(a tensor is {"dtype": ..., "shape": [...], "data_offsets": [begin, end]})");
    }
    safetensors_tensor result;
    bool seen_dtype = false;
    bool seen_shape = false;
    bool seen_offsets = false;
    auto const once = [&](bool& seen, std::string const& key) {
      if (seen) {
        fail("tensor " + quoted(name) + " has the key " + quoted(key) + " twice",
             "each key of a tensor must be unique");
      }
      seen = true;
    };
    members([&](std::string const& key) {
      if (key == "dtype") {
        once(seen_dtype, key);
        if (!next_is('"')) {
          fail("the dtype of tensor " + quoted(name) + " is not a string", "write e.g. \"F32\"");
        }
        result.dtype = string();
      } else if (key == "shape") {
        once(seen_shape, key);
        result.shape = integers("the shape of tensor " + quoted(name));
      } else if (key == "data_offsets") {
        once(seen_offsets, key);
        std::vector<std::uint64_t> const offsets =
            integers("the data_offsets of tensor " + quoted(name));
        if (offsets.size() != 2) {
          fail(
              "tensor " + quoted(name) + " has " + std::to_string(offsets.size()) + " data_offsets",
              "data_offsets is [begin, end]");
        }
        result.begin = offsets[0];
        result.end = offsets[1];
        if (result.end < result.begin) {
          fail("tensor " + quoted(name) + " has data_offsets [" + std::to_string(result.begin) +
                   ", " + std::to_string(result.end) + "], which end before they begin",
               "data_offsets is [begin, end] with begin <= end");
        }
      } else {
        fail("tensor " + quoted(name) + " has the unknown key " + quoted(key),
             R"(a tensor has exactly "dtype", "shape" and "data_offsets")");
      }
    });
    for (auto const& [seen, key] : {std::pair{seen_dtype, "dtype"}, std::pair{seen_shape, "shape"},
                                    std::pair{seen_offsets, "data_offsets"}}) {
      if (!seen) {
        fail("tensor " + quoted(name) + " has no \"" + key + "\"",
             R"(a tensor has exactly "dtype", "shape" and "data_offsets")");
      }
    }
    result.name = std::move(name);
    return result;
  }

  std::vector<std::uint64_t> integers(std::string const& what) {
    if (!next_is('[')) fail(what + " is not an array", "write an array of integers");
    ++at_;
    std::vector<std::uint64_t> values;
    if (next_is(']')) {
      ++at_;
      return values;
    }
    while (true) {
      values.push_back(integer(what));
      if (next_is(',')) {
        ++at_;
        continue;
      }
      expect(']', "',' or ']' in an array of integers");
      return values;
    }
  }

  std::uint64_t integer(std::string const& what) {
    skip_space();
    auto const digit = [&] { return at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9'; };
    if (at_ < text_.size() && text_[at_] == '-') {
      fail(what + " holds a negative number", "sizes and offsets are 0 or more");
    }
    if (!digit()) expected("an integer in " + what);
    std::size_t const start = at_;
    std::uint64_t value = 0;
    while (digit()) {
      auto const d = static_cast<std::uint64_t>(text_[at_] - '0');
      if (value > (std::numeric_limits<std::uint64_t>::max() - d) / 10) {
        fail(what + " holds a number larger than 2^64 - 1", "no size or offset is that large");
      }
      value = value * 10 + d;
      ++at_;
    }
    if (text_[start] == '0' && at_ - start > 1) {
      at_ = start;
      fail(what + " holds a number with a leading zero", "JSON writes integers without one");
    }
    if (at_ < text_.size() && (text_[at_] == '.' || text_[at_] == 'e' || text_[at_] == 'E')) {
      fail(what + " holds a number that is not an integer", "sizes and offsets are integers");
    }
    return value;
  }

  std::uint32_t hex4() {
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i, ++at_) {
      if (at_ >= text_.size()) expected("four hexadecimal digits after \\u");
      char const c = text_[at_];
      std::uint32_t d = 0;
      if (c >= '0' && c <= '9') {
        d = static_cast<std::uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<std::uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = static_cast<std::uint32_t>(c - 'A' + 10);
      } else {
        expected("four hexadecimal digits after \\u");
      }
      value = value * 16 + d;
    }
    return value;
  }

  // A string at the current position (its opening quote); the text is known to be UTF-8.
  std::string string() {
    ++at_;
    std::string out;
    while (true) {
      if (at_ >= text_.size()) expected("the '\"' that ends a string");
      char const c = text_[at_];
      if (c == '"') {
        ++at_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        fail("a string holds a control character unescaped", "JSON escapes them (\\n, \\u0001)");
      }
      if (c != '\\') {
        out += c;
        ++at_;
        continue;
      }
      ++at_;
      if (at_ >= text_.size()) expected("an escape after '\\'");
      char const e = text_[at_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t code = hex4();
          if (code >= 0xDC00 && code <= 0xDFFF) {
            fail("a string holds a lone low surrogate \\u" + hex(code), "escape a pair");
          }
          if (code >= 0xD800 && code <= 0xDBFF) {
            if (at_ + 1 >= text_.size() || text_[at_] != '\\' || text_[at_ + 1] != 'u') {
              fail("a string holds a high surrogate \\u" + hex(code) + " without its low half",
                   "escape a character past U+FFFF as a surrogate pair");
            }
            at_ += 2;
            std::uint32_t const low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) {
              fail("a string holds a high surrogate \\u" + hex(code) + " followed by \\u" +
                       hex(low) + ", which is no low surrogate",
                   "escape a character past U+FFFF as a surrogate pair");
            }
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, code);
          break;
        }
        default:
          --at_;
          fail(std::string{"a string holds the unknown escape \\"} + e,
               R"(JSON escapes are \" \\ \/ \b \f \n \r \t \uXXXX)");
      }
    }
  }

  static std::string hex(std::uint32_t code) {
    std::string text(4, '0');
    for (int i = 3; i >= 0; --i, code >>= 4) {
      text[static_cast<std::size_t>(i)] = "0123456789ABCDEF"[code & 0xF];
    }
    return text;
  }

  std::string_view text_;
  std::string const& where_;
  std::size_t at_{0};
};

void write_string(std::string& out, std::string_view text) {
  out += '"';
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out += "0123456789abcdef"[(c >> 4) & 0xF];
          out += "0123456789abcdef"[c & 0xF];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void write_integers(std::string& out, std::vector<std::uint64_t> const& values) {
  out += '[';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  out += ']';
}

}  // namespace

safetensors_header parse_safetensors_header(std::string_view text, std::string const& where) {
  return parser{text, where}.header();
}

std::string write_safetensors_header(safetensors_header const& header) {
  std::string out = "{";
  bool first = true;
  if (!header.metadata.empty()) {
    write_string(out, metadata_key);
    out += ":{";
    for (std::size_t i = 0; i < header.metadata.size(); ++i) {
      if (i > 0) out += ',';
      write_string(out, header.metadata[i].first);
      out += ':';
      write_string(out, header.metadata[i].second);
    }
    out += '}';
    first = false;
  }
  for (safetensors_tensor const& tensor : header.tensors) {
    if (!first) out += ',';
    first = false;
    write_string(out, tensor.name);
    out += ":{\"dtype\":";
    write_string(out, tensor.dtype);
    out += ",\"shape\":";
    write_integers(out, tensor.shape);
    out += ",\"data_offsets\":";
    write_integers(out, {tensor.begin, tensor.end});
    out += '}';
  }
  out += '}';
  return out;
}

bool is_utf8(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size()) {
    auto const lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    std::uint32_t code = 0;
    std::uint32_t smallest = 0;
    if ((lead & 0xE0) == 0xC0) {
      length = 2;
      code = lead & 0x1FU;
      smallest = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      code = lead & 0x0FU;
      smallest = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      code = lead & 0x07U;
      smallest = 0x10000;
    } else {
      return false;  // a continuation byte first, or 0xF8 and above
    }
    if (text.size() - i < length) return false;
    for (std::size_t k = 1; k < length; ++k) {
      auto const next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3FU);
    }
    if (code < smallest || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += length;
  }
  return true;
}

}  // namespace graphstep::train::detail
