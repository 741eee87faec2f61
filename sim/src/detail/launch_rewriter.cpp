#include "detail/launch_rewriter.hpp"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

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

// Whether `text` holds `word` as a whole identifier.
bool holds_word(std::string_view text, std::string_view word) {
  for (std::size_t at = text.find(word); at != std::string_view::npos;
       at = text.find(word, at + 1)) {
    bool const starts = at == 0 || !identifier_char(text[at - 1]);
    bool const ends = at + word.size() >= text.size() || !identifier_char(text[at + word.size()]);
    if (starts && ends) return true;
  }
  return false;
}

class rewriter {
 public:
  // `register_symbols`: whether the variables of device memory defined here are registered
  // (note_symbols); a check for device code a header holds does not count them.
  rewriter(std::string_view source, std::string_view file, bool register_symbols = true)
      : source_{source}, file_{file}, register_symbols_{register_symbols} {}

  // The source's #includes and object-like #defines; notes where its directives are.
  source_directives scan_directives() {
    source_directives found;
    directives_.clear();
    bool line_start = true;
    std::size_t i = 0;
    while (i < source_.size()) {
      char const c = source_[i];
      if (c == '\n') {
        line_start = true;
        ++i;
      } else if (space(c) || source_.compare(i, 2, "/*") == 0) {
        i = space(c) ? i + 1 : skip_block_comment(i);  // a comment may come before the '#'
      } else if (c == '#' && line_start) {
        i = read_directive(i, found);
      } else {
        line_start = false;
        i = skip_token(i);
      }
    }
    return found;
  }

  // `kernel_macro_names`: macros, defined elsewhere, that declare kernels as __global__ does.
  std::string run(std::vector<std::string> const& kernel_macro_names) {
    std::vector<macro_definition> macros = scan_directives().macros;
    for (std::string const& name : kernel_macro_names) macros.push_back({name, "__global__"});
    kernel_macros_ = kernel_macros(macros);
    out_ = "#line 1 \"" + std::string{file_} + "\"\n";
    std::size_t i = 0;
    std::size_t directive = 0;
    while (i < source_.size()) {
      char const c = source_[i];
      while (directive < directives_.size() && directives_[directive].begin < i) ++directive;
      if (directive < directives_.size() && directives_[directive].begin == i &&
          !directives_[directive].define) {
        // #include, #if, #error...: nothing to rewrite (a #define's replacement may hold a
        // launch, rewritten where the macro is defined).
        i = directives_[directive].end;
      } else if (source_.compare(i, 3, "<<<") == 0) {
        i = rewrite_launch(i);
      } else if (identifier_char(c) && (i == 0 || !identifier_char(source_[i - 1]))) {
        std::size_t const end = identifier_end(i);
        std::string_view const word = source_.substr(i, end - i);
        if (std::size_t const literal_end = prefixed_literal_end(i, end); literal_end != 0) {
          i = literal_end;
        } else if (word == "extern") {
          i = maybe_rewrite_extern_shared(i);
        } else {
          if (declares_kernel(word) && !in_directive(i)) note_kernel(i, end);
          if (register_symbols_ && declares_symbol(word) && i >= symbols_noted_until_ &&
              !in_directive(i) &&
              std::find(scopes_.begin(), scopes_.end(), false) == scopes_.end()) {
            note_symbols(i, end);
          }
          i = end;
        }
      } else if (c == '{') {
        scopes_.push_back(opens_namespace(i));
        ++i;
      } else if (c == '}') {
        if (!scopes_.empty()) scopes_.pop_back();
        ++i;
      } else {
        i = skip_token(i);
      }
    }
    copy_to(source_.size());
    return out_;
  }

  /// Whether anything was rewritten or added (a source without device code comes out as it was).
  [[nodiscard]] bool changed() const noexcept { return changed_; }

  /// Declarations to put before the source, at namespace scope: for each kernel launched with
  /// template arguments named, a signature declaration that no launch's arguments match well,
  /// so that `graphstep_sim_signature_of_k<...>` names a template even where the rewriter never
  /// saw kernel `k` (C++17 reads `name<` as a template only when lookup finds one). It returns no
  /// pointer: such a launch takes the one kernel of its name.
  [[nodiscard]] std::string fallback_signatures() const {
    std::string declarations;
    for (std::string const& kernel : named_template_launches_) {
      for (std::string_view const parameters : {"class...", "auto..."}) {
        declarations +=
            "template <" + std::string{parameters} + "> int " + signature_name(kernel) + "(...);\n";
      }
    }
    return declarations;
  }

 private:
  struct directive_range {
    std::size_t begin;
    std::size_t end;
    bool define;
  };

  [[nodiscard]] bool declares_kernel(std::string_view word) const {
    return word == "__global__" ||
           std::find(kernel_macros_.begin(), kernel_macros_.end(), word) != kernel_macros_.end();
  }

  [[nodiscard]] bool in_directive(std::size_t at) const {
    auto const after = std::upper_bound(
        directives_.begin(), directives_.end(), at,
        [](std::size_t position, directive_range const& range) { return position < range.begin; });
    return after != directives_.begin() && at < std::prev(after)->end;
  }

  // The directive whose '#' is at `at`, up to the line end that is not escaped: noted in
  // directives_, and its #include or object-like #define added to `found`. Returns its end.
  std::size_t read_directive(std::size_t at, source_directives& found) {
    std::string text;
    std::size_t k = at + 1;
    while (k < source_.size() && source_[k] != '\n') {
      if (source_[k] == '\\' && source_.compare(k + 1, 1, "\n") == 0) {
        text += ' ';
        k += 2;
      } else if (source_[k] == '\\' && source_.compare(k + 1, 2, "\r\n") == 0) {
        text += ' ';
        k += 3;
      } else if (source_.compare(k, 2, "//") == 0) {
        k = skip_line_comment(k);
      } else if (source_.compare(k, 2, "/*") == 0) {
        text += ' ';
        k = skip_block_comment(k);
      } else if (source_[k] == '"') {
        // A header name or a string; an `#error don't` holds a lone quote, kept as it is.
        std::size_t const close = source_.find_first_of("\"\n", k + 1);
        std::size_t const end = close == std::string_view::npos || source_[close] == '\n'
                                    ? (close == std::string_view::npos ? source_.size() : close)
                                    : close + 1;
        text.append(source_.substr(k, end - k));
        k = end;
      } else {
        text += source_[k++];
      }
    }
    bool const define = parse_directive(trimmed(text), found);
    directives_.push_back({at, k, define});
    return k;
  }

  // Adds an #include or object-like #define to `found`; whether the directive is a #define.
  static bool parse_directive(std::string_view text, source_directives& found) {
    std::size_t k = 0;
    while (k < text.size() && identifier_char(text[k])) ++k;
    std::string_view const kind = text.substr(0, k);
    std::string_view const rest = trimmed(text.substr(k));
    if (kind == "include" && rest.size() >= 2 && (rest[0] == '"' || rest[0] == '<')) {
      std::size_t const close = rest.find(rest[0] == '"' ? '"' : '>', 1);
      if (close != std::string_view::npos) {
        found.includes.push_back({std::string{rest.substr(1, close - 1)}, rest[0] == '"'});
      }
    }
    if (kind != "define") return false;
    std::size_t name_end = 0;
    while (name_end < rest.size() && identifier_char(rest[name_end])) ++name_end;
    bool const function_like = name_end < rest.size() && rest[name_end] == '(';
    if (name_end > 0 && !function_like) {
      found.macros.push_back(
          {std::string{rest.substr(0, name_end)}, std::string{trimmed(rest.substr(name_end))}});
    }
    return true;
  }
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
    std::string const callee = one_line(start, at);
    std::string name;
    for (char const c : callee) {
      if (!space(c)) name += c;
    }
    copy_to(start);
    std::size_t const newlines_in_callee = static_cast<std::size_t>(
        std::count(source_.begin() + static_cast<std::ptrdiff_t>(start),
                   source_.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
    // Template arguments named at the launch (all of them, or the first ones), kept for the
    // signature declaration.
    std::string_view path = callee;
    std::string_view template_arguments;
    if (!path.empty() && path.back() == '>') {
      int depth = 0;
      std::size_t open = path.size();
      do {
        --open;
        if (path[open] == '>') ++depth;
        if (path[open] == '<') --depth;
      } while (depth > 0 && open > 0);
      template_arguments = path.substr(open);
      path = trimmed(path.substr(0, open));
    }
    // The kernel is chosen as a call `callee(args...)` would choose it (template arguments
    // named or deduced, overloads resolved: CUDA C++ Programming Guide, "Execution
    // Configuration", a launch is a call with the configuration added). The first lambda asks
    // the signature declaration the rewriter adds beside each kernel (note_kernel) for the
    // chosen kernel's type, looked up in the callee's namespace, with the template arguments the
    // launch names; the second takes the kernel's address as that type (its return type; `&` for
    // a callee that is a local pointer to a kernel). A kernel the rewriter never saw has no
    // signature declaration and is taken as the one function of its name.
    std::size_t const last_name = path.rfind("::");
    std::string_view const scope =
        last_name == std::string_view::npos ? std::string_view{} : path.substr(0, last_name);
    std::string_view const kernel =
        last_name == std::string_view::npos ? path : trimmed(path.substr(last_name + 2));
    if (!template_arguments.empty()) {
      std::string const kernel_name{kernel};
      if (std::find(named_template_launches_.begin(), named_template_launches_.end(),
                    kernel_name) == named_template_launches_.end()) {
        named_template_launches_.push_back(kernel_name);
      }
    }
    out_ += "::graphstep::sim::launcher([] { ";
    if (!trimmed(scope).empty()) {
      out_ += "using namespace ";
      out_.append(trimmed(scope));
      out_ += "; ";
    }
    out_ += "return [](auto&&... graphstep_sim_a) -> decltype(" + signature_name(kernel);
    out_.append(template_arguments);
    out_ +=
        "(::graphstep::sim::kernel_signature{}, static_cast<decltype(graphstep_sim_a)&&>("
        "graphstep_sim_a)...)) { return {}; }; }(), [&](auto graphstep_sim_take) -> "
        "decltype(graphstep_sim_take(" +
        callee + ")) { return " + callee + "; }, ";
    out_ += "::graphstep::sim::launch_config(";
    out_.append(source_.substr(at + 3, end - (at + 3)));
    out_ += "), \"" + name + "\")";
    changed_ = true;
    out_.append(newlines_in_callee, '\n');  // line numbers stay those of the source
    emitted_ = end + 3;
    return emitted_;
  }

  // Whether the `{` at `at` opens a namespace or linkage block (`namespace n {`, `namespace {`,
  // `extern "C" {`) rather than a function, class or statement.
  [[nodiscard]] bool opens_namespace(std::size_t at) const {
    std::size_t k = at;
    while (k > 0 && space(source_[k - 1])) --k;
    if (k >= 9 && starts_word(k - 9, "namespace")) return true;
    if (k > 0 && source_[k - 1] == '"') return true;  // extern "C" {
    std::size_t const name_end = k;
    while (k > 0 && (identifier_char(source_[k - 1]) || source_[k - 1] == ':')) --k;
    if (k == name_end) return false;
    while (k > 0 && space(source_[k - 1])) --k;
    return k >= 9 && starts_word(k - 9, "namespace");
  }

  // `extern __shared__ <type> <name>[];` -> `<type>* <name> = ...dynamic_shared<<type>>();`
  std::size_t maybe_rewrite_extern_shared(std::size_t at) {
    std::size_t k = at + 6;
    while (k < source_.size() && space(source_[k])) ++k;
    if (!starts_word(k, "__shared__")) return at + 6;
    if (std::find(scopes_.begin(), scopes_.end(), false) == scopes_.end()) {
      // Outside every function the pointer would be set once, before any block has memory.
      fail(at,
           "extern __shared__ outside a function is not supported on the simulated device yet: "
           "declare the array inside the kernel or device function that uses it");
    }
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
    copy_to(at);
    changed_ = true;
    out_ += type + "* const " + name + " = ::graphstep::sim::detail::dynamic_shared<" + type +
            ">()" + std::string(newlines, '\n');
    emitted_ = semicolon;  // the ';' stays
    return semicolon;
  }

  // Appends the source up to `end`, with the declarations noted for kernels that end before it.
  void copy_to(std::size_t end) {
    while (next_addition_ < additions_.size() && additions_[next_addition_].first <= end) {
      auto const& [at, text] = additions_[next_addition_++];
      out_.append(source_.substr(emitted_, at - emitted_));
      out_ += text;
      emitted_ = at;
    }
    out_.append(source_.substr(emitted_, end - emitted_));
    emitted_ = end;
  }

  // The name of the declaration beside kernel `name` that gives its type (note_kernel).
  static std::string signature_name(std::string_view name) {
    return "graphstep_sim_signature_of_" + std::string{trimmed(name)};
  }

  // The end of the comment, literal or plain character at `i`.
  [[nodiscard]] std::size_t skip_token(std::size_t i) const {
    char const c = source_[i];
    char const next = i + 1 < source_.size() ? source_[i + 1] : '\0';
    if (c == '/' && next == '/') return skip_line_comment(i);
    if (c == '/' && next == '*') return skip_block_comment(i);
    if (c == '\'' && digit_separator(i)) return i + 1;
    if (c == '"' || c == '\'') return skip_quoted(i);
    if (identifier_char(c) && (i == 0 || !identifier_char(source_[i - 1]))) {
      std::size_t const end = identifier_end(i);
      std::size_t const literal_end = prefixed_literal_end(i, end);
      return literal_end != 0 ? literal_end : end;
    }
    return i + 1;
  }

  // Whether the quote at `i` separates digits of a number (`1'000'000`, C++14).
  [[nodiscard]] bool digit_separator(std::size_t i) const {
    if (i == 0 || i + 1 >= source_.size() || !identifier_char(source_[i - 1]) ||
        !identifier_char(source_[i + 1])) {
      return false;
    }
    std::size_t k = i;
    while (k > 0 && (identifier_char(source_[k - 1]) || source_[k - 1] == '\'')) --k;
    return std::isdigit(static_cast<unsigned char>(source_[k])) != 0;
  }

  // The end of the literal whose encoding prefix is the identifier [begin, end) (`u8"..."`,
  // `L'x'`, `R"(...)"`, `u8R"x(...)x"`), or 0 when the identifier is no such prefix.
  [[nodiscard]] std::size_t prefixed_literal_end(std::size_t begin, std::size_t end) const {
    if (end >= source_.size() || (source_[end] != '"' && source_[end] != '\'')) return 0;
    std::string_view const word = source_.substr(begin, end - begin);
    bool const raw = word.back() == 'R' && source_[end] == '"';
    std::string_view const encoding = raw ? word.substr(0, word.size() - 1) : word;
    if (!encoding.empty() && encoding != "L" && encoding != "u" && encoding != "U" &&
        encoding != "u8") {
      return 0;
    }
    if (raw) return skip_raw_string(end - 1);
    return encoding.empty() ? 0 : skip_quoted(end);
  }

  [[nodiscard]] std::size_t skip_space(std::size_t i) const {
    while (i < source_.size()) {
      if (space(source_[i])) {
        ++i;
      } else if (source_.compare(i, 2, "//") == 0 || source_.compare(i, 2, "/*") == 0) {
        i = skip_token(i);
      } else {
        break;
      }
    }
    return i;
  }

  [[nodiscard]] std::size_t identifier_end(std::size_t i) const {
    while (i < source_.size() && identifier_char(source_[i])) ++i;
    return i;
  }

  // The position after the bracket that closes the one at `open`.
  [[nodiscard]] std::size_t after_closing(std::size_t open) const {
    char const opening = source_[open];
    char const closing = opening == '(' ? ')' : opening == '[' ? ']' : '}';
    int depth = 0;
    std::size_t k = open;
    while (k < source_.size()) {
      char const c = source_[k];
      if (c == opening) ++depth;
      if (c == closing && --depth == 0) return k + 1;
      k = skip_token(k);
    }
    fail(open, std::string{"a '"} + opening + "' that is never closed");
  }

  // Text between `begin` and `end` on one line: comments dropped, each run of white space one
  // space (literals kept as they are).
  [[nodiscard]] std::string one_line(std::size_t begin, std::size_t end) const {
    std::string text;
    std::size_t k = begin;
    while (k < end) {
      std::size_t const next = skip_token(k);
      bool const blank = source_.compare(k, 2, "//") == 0 || source_.compare(k, 2, "/*") == 0 ||
                         (next == k + 1 && space(source_[k]));
      if (!blank) {
        text.append(source_.substr(k, next - k));
      } else if (!text.empty() && text.back() != ' ') {
        text += ' ';
      }
      k = next;
    }
    return std::string{trimmed(text)};
  }

  // A parameter list without its default arguments (a type-id may not hold them).
  static std::string without_defaults(std::string_view parameters) {
    std::string out;
    int depth = 0;
    bool in_default = false;
    for (char const c : parameters) {
      if (c == '(' || c == '[' || c == '{' || c == '<') ++depth;
      if (c == ')' || c == ']' || c == '}' || c == '>') --depth;
      if (depth == 0 && c == ',') in_default = false;
      if (depth == 0 && c == '=') in_default = true;
      if (!in_default) out += c;
    }
    return out;
  }

  // `__global__` at `at` begins a kernel's declaration or definition. After it ends, a
  // declaration with the kernel's template head and parameters is added, taking a leading
  // kernel_signature and returning a pointer to the kernel's type: a launch calls it, unevaluated,
  // to choose the kernel as overload resolution and template argument deduction choose it for a
  // call (CUDA C++ Programming Guide, "Execution Configuration": the launch is a call of the
  // function with the execution configuration added; C++ [temp.deduct.call] deduces its
  // template arguments from the call's arguments).
  // `word_end`: the end of `__global__`, or of the macro that stands for it.
  void note_kernel(std::size_t at, std::size_t word_end) {
    // The template head before `__global__` (and specifiers), if any.
    std::size_t k = at;
    auto back_space = [&] {
      while (k > 0 && space(source_[k - 1])) --k;
    };
    back_space();
    for (std::string_view specifier : {"static", "inline", "__forceinline__", "__noinline__"}) {
      if (k >= specifier.size() && starts_word(k - specifier.size(), specifier)) {
        k -= specifier.size();
        back_space();
      }
    }
    if (k > 0 && source_[k - 1] == '"') return;  // extern "C": a C function has no overloads
    std::string head;
    if (k > 0 && source_[k - 1] == '>') {
      std::size_t const head_end = k;
      int depth = 0;
      do {
        --k;
        if (source_[k] == '>') ++depth;
        if (source_[k] == '<') --depth;
      } while (depth > 0 && k > 0);
      std::size_t const open = k;
      back_space();
      if (depth != 0 || k < 8 || !starts_word(k - 8, "template")) return;
      head = one_line(k - 8, head_end);
      if (trimmed(source_.substr(open + 1, head_end - 1 - (open + 1))).empty()) {
        return;  // `template <>`: a specialization, chosen through its primary template
      }
    } else if (k >= 8 && starts_word(k - 8, "template")) {
      return;  // an explicit instantiation
    }
    // The kernel's name: the identifier before its parameter list, past attributes such as
    // __launch_bounds__(...).
    std::size_t i = word_end;
    std::size_t name_begin = 0;
    std::size_t name_end = 0;
    for (;;) {
      i = skip_space(i);
      if (i >= source_.size()) return;
      if (source_.compare(i, 2, "[[") == 0) {
        i = after_closing(i);
        continue;
      }
      std::size_t const end = identifier_end(i);
      if (end == i) {
        if (source_[i] == '*' || source_[i] == '&') {
          ++i;
          continue;
        }
        return;  // not a declaration this rewriter reads: no deduction for it
      }
      std::size_t const after = skip_space(end);
      std::string_view const word = source_.substr(i, end - i);
      bool const attribute = word == "alignas" || (word.size() > 4 && word.substr(0, 2) == "__" &&
                                                   word.substr(word.size() - 2) == "__");
      if (after < source_.size() && source_[after] == '(' && attribute) {
        i = after_closing(after);
        continue;
      }
      if (after < source_.size() && source_[after] == '(') {
        name_begin = i;
        name_end = end;
        i = after;
        break;
      }
      if (after < source_.size() && (source_[after] == '<' || source_[after] == ':')) {
        return;  // a specialization or a qualified name: declared already
      }
      i = end;
    }
    std::size_t const parameters_end = after_closing(i);
    std::string parameters = one_line(i + 1, parameters_end - 1);
    if (parameters == "void") parameters.clear();
    // The end of the declaration (`;`) or of the definition's body.
    std::size_t end = parameters_end;
    while (end < source_.size() && source_[end] != ';' && source_[end] != '{') {
      end = source_[end] == '(' || source_[end] == '[' ? after_closing(end) : skip_token(end);
    }
    if (end >= source_.size()) fail(at, "a __global__ function that never ends");
    end = source_[end] == ';' ? end + 1 : after_closing(end);

    std::string const name{source_.substr(name_begin, name_end - name_begin)};
    std::string const type_parameters = without_defaults(parameters);
    std::string const declaration = head + (head.empty() ? "" : " ") + "auto " +
                                    signature_name(name) + "(::graphstep::sim::kernel_signature" +
                                    (parameters.empty() ? "" : ", ") + parameters +
                                    ") -> void (*)(" + type_parameters + ");";
    // On the line where the kernel ends: line numbers do not change. The kernel's own
    // redeclarations are valid, so the same copies of its head and parameters are too.
    std::string addition = " " + declaration;
    additions_.emplace_back(end, std::move(addition));
    changed_ = true;
  }

  // `__device__`, `__constant__` or `__managed__` at `at`, outside every function and class:
  // where it begins the definition of variables, a registration of each
  // (graphstep/sim/symbol.hpp) is added after the definition's `;`, as nvcc registers them when
  // the module loads. A function, a declaration (`extern`), a variable template and what this
  // reader does not follow (a declarator in parentheses) are left as they are.
  void note_symbols(std::size_t at, std::size_t word_end) {
    // Back over the specifiers before the word: `extern` (or `extern "C"`) only declares, and a
    // `>` outside a directive ends a template head.
    std::size_t k = at;
    for (;;) {
      while (k > 0 && space(source_[k - 1])) --k;
      if (k == 0 || !identifier_char(source_[k - 1])) break;
      std::size_t const word_start = [&] {
        std::size_t w = k;
        while (w > 0 && identifier_char(source_[w - 1])) --w;
        return w;
      }();
      if (source_.substr(word_start, k - word_start) == "extern") return;
      k = word_start;
    }
    if (k > 0 && source_[k - 1] == '>' && !in_directive(k - 1)) return;
    if (k > 0 && source_[k - 1] == '"') return;  // extern "C" declares, as extern does
    std::vector<std::string> names;
    std::string declarator;  // the last identifier seen in the current declarator
    bool named = false;      // the current declarator's name is known
    bool initializer = false;
    int angles = 0;
    std::size_t i = word_end;
    for (;;) {
      i = skip_space(i);
      if (i >= source_.size()) return;
      char const c = source_[i];
      if (identifier_char(c)) {
        std::size_t const end = identifier_end(i);
        std::size_t const after = skip_space(end);
        std::string_view const word = source_.substr(i, end - i);
        bool const attribute =
            word == "alignas" || word == "__attribute__" ||
            (word.size() > 4 && word.substr(0, 2) == "__" && word.substr(word.size() - 2) == "__");
        if (attribute && after < source_.size() && source_[after] == '(') {
          i = after_closing(after);
          continue;
        }
        if (!initializer && !named) declarator = std::string{word};
        i = end;
        continue;
      }
      bool const top = angles == 0;
      if (c == '(' && top && !initializer) return;  // a function (or a declarator not followed)
      if (c == '<' && !initializer) {
        ++angles;
      } else if (c == '>' && angles > 0 && !initializer) {
        --angles;
      } else if (top && (c == '[' || c == '=' || c == '{' || c == ',' || c == ';')) {
        if (!named && !declarator.empty()) {
          names.push_back(declarator);
          named = true;
        }
        if (c == ',') {
          named = false;
          initializer = false;
          declarator.clear();
        } else if (c == '=' || c == '{') {
          initializer = true;
        }
        if (c == ';') {
          symbols_noted_until_ = i + 1;
          break;
        }
      }
      i = c == '(' || c == '[' || c == '{' ? after_closing(i) : skip_token(i);
    }
    std::string addition;
    for (std::string const& name : names) {
      addition.append(" static ::graphstep::sim::symbol_registration const graphstep_sim_symbol_")
          .append(name)
          .append("{__builtin_addressof(")
          .append(name)
          .append("), sizeof ")
          .append(name)
          .append(", \"")
          .append(name)
          .append("\"};");
    }
    if (addition.empty()) return;
    // On the line where the definition ends: line numbers do not change.
    additions_.emplace_back(i + 1, std::move(addition));
    changed_ = true;
  }

  [[nodiscard]] static bool declares_symbol(std::string_view word) {
    return word == "__device__" || word == "__constant__" || word == "__managed__";
  }

  std::string_view source_;
  std::string_view file_;
  bool register_symbols_;
  std::vector<directive_range> directives_;
  std::vector<std::string> kernel_macros_;
  std::vector<std::string> named_template_launches_;
  std::string out_;
  std::size_t emitted_{};
  std::vector<std::pair<std::size_t, std::string>> additions_;
  std::vector<bool> scopes_;  // per open brace: whether it opens a namespace

  std::size_t next_addition_{};
  std::size_t symbols_noted_until_{};  // the end of the last variable definition noted
  bool changed_{};
};

}  // namespace

source_directives directives_of(std::string_view source, std::string_view file_name) {
  return rewriter{source, file_name}.scan_directives();
}

std::vector<std::string> kernel_macros(std::vector<macro_definition> const& macros) {
  std::vector<std::string> names;
  for (bool grew = true; grew;) {
    grew = false;
    for (macro_definition const& macro : macros) {
      if (std::find(names.begin(), names.end(), macro.name) != names.end()) continue;
      bool declares = holds_word(macro.replacement, "__global__");
      for (std::size_t k = 0; k < names.size() && !declares; ++k) {
        declares = holds_word(macro.replacement, names[k]);
      }
      if (declares) {
        names.push_back(macro.name);
        grew = true;
      }
    }
  }
  return names;
}

std::string rewrite_launches(std::string_view source, std::string_view file_name,
                             std::vector<std::string> const& kernel_macro_names) {
  rewriter file{source, file_name};
  std::string rewritten = file.run(kernel_macro_names);
  return "#include <graphstep/sim/device.hpp>\n" + file.fallback_signatures() + rewritten;
}

namespace {

// Whether `source` names what the rewriting changes: most headers of an include folder do not,
// and are not parsed.
// `symbols`: whether variables of device memory count.
bool mentions_device_code(std::string_view source,
                          std::vector<std::string> const& kernel_macro_names, bool symbols) {
  bool device_code = false;
  for (std::string_view const word : {"__global__", "<<<", "__shared__"}) {
    device_code = device_code || source.find(word) != std::string_view::npos;
  }
  for (std::string_view const word : {"__device__", "__constant__", "__managed__"}) {
    device_code = device_code || (symbols && source.find(word) != std::string_view::npos);
  }
  for (std::string const& name : kernel_macro_names) {
    device_code = device_code || holds_word(source, name);
  }
  return device_code;
}

}  // namespace

bool holds_device_code(std::string_view source, std::string_view file_name,
                       std::vector<std::string> const& kernel_macro_names) {
  if (!mentions_device_code(source, kernel_macro_names, false)) return false;
  rewriter header{source, file_name, false};
  static_cast<void>(header.run(kernel_macro_names));
  return header.changed();
}

std::string rewrite_header(std::string_view source, std::string_view file_name,
                           std::vector<std::string> const& kernel_macro_names,
                           std::string_view included_as) {
  if (mentions_device_code(source, kernel_macro_names, true)) {
    rewriter header{source, file_name};
    std::string rewritten = header.run(kernel_macro_names);
    if (header.changed()) return header.fallback_signatures() + rewritten;
  }
  return "#include \"" + std::string{included_as.empty() ? file_name : included_as} + "\"\n";
}

}  // namespace graphstep::sim::detail
