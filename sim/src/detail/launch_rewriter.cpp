#include "detail/launch_rewriter.hpp"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <string>

namespace graphstep::sim::detail {

namespace {

bool identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

bool space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return text;
}

class rewriter {
 public:
  rewriter(std::string_view source, std::string_view file) : source_{source}, file_{file} {}

  std::string run() {
    out_ = "#include <graphstep/sim/device.hpp>\n#line 1 \"" + std::string{file_} + "\"\n";
    std::size_t i = 0;
    while (i < source_.size()) {
      char const c = source_[i];
      char const next = i + 1 < source_.size() ? source_[i + 1] : '\0';
      if (c == '/' && next == '/') {
        i = skip_line_comment(i);
      } else if (c == '/' && next == '*') {
        i = skip_block_comment(i);
      } else if (c == 'R' && next == '"' && (i == 0 || !identifier_char(source_[i - 1]))) {
        i = skip_raw_string(i);
      } else if (c == '"' || c == '\'') {
        i = skip_quoted(i);
      } else if (source_.compare(i, 3, "<<<") == 0) {
        i = rewrite_launch(i);
      } else if (starts_word(i, "extern")) {
        i = maybe_rewrite_extern_shared(i);
      } else {
        ++i;
      }
    }
    out_.append(source_.substr(emitted_));
    return out_;
  }

 private:
  [[noreturn]] void fail(std::size_t at, std::string const& what) const {
    std::size_t line = 1;
    for (std::size_t k = 0; k < at && k < source_.size(); ++k) line += source_[k] == '\n' ? 1 : 0;
    throw rewrite_error{std::string{file_} + ":" + std::to_string(line) + ": " + what};
  }

  [[nodiscard]] bool starts_word(std::size_t i, std::string_view word) const {
    return source_.compare(i, word.size(), word) == 0 &&
           (i == 0 || !identifier_char(source_[i - 1])) &&
           (i + word.size() >= source_.size() || !identifier_char(source_[i + word.size()]));
  }

  [[nodiscard]] std::size_t skip_line_comment(std::size_t i) const {
    std::size_t const end = source_.find('\n', i);
    return end == std::string_view::npos ? source_.size() : end;
  }

  [[nodiscard]] std::size_t skip_block_comment(std::size_t i) const {
    std::size_t const end = source_.find("*/", i + 2);
    if (end == std::string_view::npos) fail(i, "a /* comment that never ends");
    return end + 2;
  }

  [[nodiscard]] std::size_t skip_raw_string(std::size_t i) const {
    std::size_t const open = source_.find('(', i + 2);
    if (open == std::string_view::npos) fail(i, "a raw string literal without its '('");
    std::string const closing = ")" + std::string{source_.substr(i + 2, open - (i + 2))} + "\"";
    std::size_t const end = source_.find(closing, open + 1);
    if (end == std::string_view::npos) fail(i, "a raw string literal that never ends");
    return end + closing.size();
  }

  [[nodiscard]] std::size_t skip_quoted(std::size_t i) const {
    char const quote = source_[i];
    std::size_t k = i + 1;
    while (k < source_.size() && source_[k] != quote) {
      if (source_[k] == '\\') ++k;
      if (source_[k] == '\n') fail(i, "a quoted literal that never ends on its line");
      ++k;
    }
    if (k >= source_.size()) fail(i, "a quoted literal that never ends");
    return k + 1;
  }

  // The start of the callee before `<<<` at `at`: identifiers joined by `::`, each possibly
  // followed by a template argument list.
  [[nodiscard]] std::size_t callee_start(std::size_t at) const {
    std::size_t k = at;
    auto skip_space_back = [&] {
      while (k > emitted_ && space(source_[k - 1])) --k;
    };
    skip_space_back();
    for (;;) {
      if (k > emitted_ && source_[k - 1] == '>') {
        int depth = 0;
        do {
          --k;
          if (source_[k] == '>') ++depth;
          if (source_[k] == '<') --depth;
        } while (depth > 0 && k > emitted_);
        if (depth != 0) fail(at, "unbalanced template arguments before <<<");
        skip_space_back();
      }
      std::size_t const name_end = k;
      while (k > emitted_ && identifier_char(source_[k - 1])) --k;
      if (k == name_end) fail(at, "no kernel name before <<<");
      std::size_t probe = k;
      while (probe > emitted_ && space(source_[probe - 1])) --probe;
      if (probe >= emitted_ + 2 && source_[probe - 1] == ':' && source_[probe - 2] == ':') {
        k = probe - 2;
        skip_space_back();
        if (k == emitted_ || !identifier_char(source_[k - 1])) {
          if (k > emitted_ && source_[k - 1] == '>') continue;
          return probe - 2;  // a leading `::`
        }
        continue;
      }
      return k;
    }
  }

  // The position of the `>>>` that closes the `<<<` at `at`.
  [[nodiscard]] std::size_t config_end(std::size_t at) const {
    int depth = 0;
    std::size_t k = at + 3;
    while (k < source_.size()) {
      char const c = source_[k];
      if (c == '"' || c == '\'') {
        k = skip_quoted(k);
        continue;
      }
      if (c == '(' || c == '[' || c == '{') ++depth;
      if (c == ')' || c == ']' || c == '}') --depth;
      if (depth < 0) fail(at, "a <<< whose configuration is never closed by >>>");
      if (depth == 0 && source_.compare(k, 3, ">>>") == 0) return k;
      if (c == ';') fail(at, "a <<< whose configuration is never closed by >>>");
      ++k;
    }
    fail(at, "a <<< whose configuration is never closed by >>>");
  }

  std::size_t rewrite_launch(std::size_t at) {
    std::size_t const start = callee_start(at);
    std::size_t const end = config_end(at);
    std::size_t after = end + 3;
    while (after < source_.size() && space(source_[after])) ++after;
    if (after >= source_.size() || source_[after] != '(') {
      fail(at, "a <<<...>>> launch not followed by its argument list");
    }
    std::string_view const callee = trimmed(source_.substr(start, at - start));
    std::string name;
    for (char const c : callee) {
      if (!space(c)) name += c;
    }
    out_.append(source_.substr(emitted_, start - emitted_));
    std::size_t const newlines_in_callee = static_cast<std::size_t>(
        std::count(source_.begin() + static_cast<std::ptrdiff_t>(start),
                   source_.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
    out_ += "::graphstep::sim::launcher(";
    out_.append(callee);
    out_ += ", ::graphstep::sim::launch_config(";
    out_.append(source_.substr(at + 3, end - (at + 3)));
    out_ += "), \"" + name + "\")";
    out_.append(newlines_in_callee, '\n');  // line numbers stay those of the source
    emitted_ = end + 3;
    return emitted_;
  }

  // `extern __shared__ <type> <name>[];` -> `<type>* <name> = ...dynamic_shared<<type>>();`
  std::size_t maybe_rewrite_extern_shared(std::size_t at) {
    std::size_t k = at + 6;
    while (k < source_.size() && space(source_[k])) ++k;
    if (!starts_word(k, "__shared__")) return at + 6;
    std::size_t const semicolon = source_.find(';', k);
    if (semicolon == std::string_view::npos) fail(at, "extern __shared__ without a ';'");
    std::string_view const declaration = source_.substr(k + 10, semicolon - (k + 10));
    std::size_t const bracket = declaration.rfind('[');
    if (bracket == std::string_view::npos) fail(at, "extern __shared__ that is not an array");
    std::size_t name_end = bracket;
    while (name_end > 0 && space(declaration[name_end - 1])) --name_end;
    std::size_t name_start = name_end;
    while (name_start > 0 && identifier_char(declaration[name_start - 1])) --name_start;
    if (name_start == name_end) fail(at, "extern __shared__ array without a name");
    std::string type;
    std::string_view rest = declaration.substr(0, name_start);
    // Alignment requests are met by the buffer itself (16-byte aligned).
    for (std::string_view attribute :
         {std::string_view{"__align__"}, std::string_view{"alignas"}}) {
      std::size_t const found = rest.find(attribute);
      if (found == std::string_view::npos) continue;
      std::size_t const close = rest.find(')', found);
      if (close == std::string_view::npos) fail(at, "an unclosed alignment in extern __shared__");
      type.append(rest.substr(0, found));
      rest = rest.substr(close + 1);
    }
    type.append(rest);
    type = std::string{trimmed(type)};
    std::size_t newlines = 0;
    for (char const c : declaration) newlines += c == '\n' ? 1 : 0;
    std::string const name{declaration.substr(name_start, name_end - name_start)};
    out_.append(source_.substr(emitted_, at - emitted_));
    out_ += type + "* const " + name + " = ::graphstep::sim::detail::dynamic_shared<" + type +
            ">()" + std::string(newlines, '\n');
    emitted_ = semicolon;  // the ';' stays
    return semicolon;
  }

  std::string_view source_;
  std::string_view file_;
  std::string out_;
  std::size_t emitted_{};
};

}  // namespace

std::string rewrite_launches(std::string_view source, std::string_view file_name) {
  return rewriter{source, file_name}.run();
}

}  // namespace graphstep::sim::detail
