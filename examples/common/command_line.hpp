#pragma once

// The examples' command lines: flags read in order, some followed by a value that is checked;
// on any mistake the problem and the usage line go to stderr and the program exits with 2.
// --help (or -h) prints the usage line and the description to stdout and exits with 0.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace examples {

class command_line {
 public:
  // `synopsis`: what follows the program's name in the usage line ("[--steps N] [--verify]");
  // `description`: what the program does and what each flag means, for --help.
  command_line(int argc, char** argv, std::string program, std::string synopsis,
               std::string description)
      : argc_{argc},
        argv_{argv},
        program_{std::move(program)},
        synopsis_{std::move(synopsis)},
        description_{std::move(description)} {}

  // Moves to the next flag; false when there is none. Answers --help itself.
  bool next() {
    if (++index_ >= argc_) return false;
    if (flag() == "--help" || flag() == "-h") {
      std::printf("usage: %s%s%s\n\n%s", program_.c_str(), synopsis_.empty() ? "" : " ",
                  synopsis_.c_str(), description_.c_str());
      std::exit(0);
    }
    return true;
  }
  // For a program that takes no flags: refuses any but --help.
  void expect_none() {
    if (next()) fail("takes no arguments, not '" + flag() + "'");
  }
  // The flag at hand.
  [[nodiscard]] std::string flag() const { return argv_[index_]; }
  // The argument after the flag at hand: its value.
  char const* value() {
    if (index_ + 1 >= argc_) fail(flag() + " needs a value");
    return argv_[++index_];
  }
  // The value as a file's path: not empty (an unset shell variable would make it so, and the
  // run would quietly save or resume nothing).
  std::string path() {
    std::string const name = flag();
    std::string text = value();
    if (text.empty()) {
      fail(name + " needs a file's path, not an empty value (an unset shell variable?)");
    }
    return text;
  }
  // The value as an integer from 1 to `limit`.
  int positive(int limit) {
    std::string const name = flag();
    char const* const text = value();
    char* end = nullptr;
    long const number = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || number <= 0 || number > limit) {
      fail(name + " must be a positive integer, not '" + text + "'");
    }
    return static_cast<int>(number);
  }
  [[noreturn]] void fail(std::string const& problem) const {
    std::fprintf(stderr, "%s: %s\nusage: %s%s%s (--help says more)\n", program_.c_str(),
                 problem.c_str(), program_.c_str(), synopsis_.empty() ? "" : " ",
                 synopsis_.c_str());
    std::exit(2);
  }

 private:
  int argc_;
  char** argv_;
  int index_{0};
  std::string program_;
  std::string synopsis_;
  std::string description_;
};

}  // namespace examples
