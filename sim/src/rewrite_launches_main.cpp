// rewrite_launches [--header] <in> <out>: the build step that lets a CUDA source run on the
// simulated device (see sim/src/detail/launch_rewriter.hpp). With --header, <in> is a header of
// the project and <out> its copy in the mirrored include folder.

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>

#include "detail/launch_rewriter.hpp"

int main(int argc, char** argv) {
  bool const header = argc == 4 && std::string_view{argv[1]} == "--header";
  if (argc != (header ? 4 : 3)) {
    static_cast<void>(
        std::fprintf(stderr, "usage: rewrite_launches [--header] <in.cu> <out.cpp>\n"));
    return 2;
  }
  char const* const input = argv[header ? 2 : 1];
  char const* const output = argv[header ? 3 : 2];
  std::ifstream in{input, std::ios::binary};
  if (!in) {
    static_cast<void>(std::fprintf(stderr, "rewrite_launches: cannot read %s\n", input));
    return 1;
  }
  std::string const source{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  std::string rewritten;
  try {
    rewritten = header ? graphstep::sim::detail::rewrite_header(source, input)
                       : graphstep::sim::detail::rewrite_launches(source, input);
  } catch (graphstep::sim::detail::rewrite_error const& e) {
    static_cast<void>(std::fprintf(stderr, "rewrite_launches: %s\n", e.what()));
    return 1;
  }
  std::ofstream out{output, std::ios::binary | std::ios::trunc};
  out << rewritten;
  if (!out) {
    static_cast<void>(std::fprintf(stderr, "rewrite_launches: cannot write %s\n", output));
    return 1;
  }
  return 0;
}
