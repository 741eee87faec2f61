// rewrite_launches <in.cu> <out.cpp>: the build step that lets a CUDA source run on the
// simulated device (see sim/src/detail/launch_rewriter.hpp).

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "detail/launch_rewriter.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    static_cast<void>(std::fprintf(stderr, "usage: rewrite_launches <in.cu> <out.cpp>\n"));
    return 2;
  }
  std::ifstream in{argv[1], std::ios::binary};
  if (!in) {
    static_cast<void>(std::fprintf(stderr, "rewrite_launches: cannot read %s\n", argv[1]));
    return 1;
  }
  std::string const source{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  std::string rewritten;
  try {
    rewritten = graphstep::sim::detail::rewrite_launches(source, argv[1]);
  } catch (graphstep::sim::detail::rewrite_error const& e) {
    static_cast<void>(std::fprintf(stderr, "rewrite_launches: %s\n", e.what()));
    return 1;
  }
  std::ofstream out{argv[2], std::ios::binary | std::ios::trunc};
  out << rewritten;
  if (!out) {
    static_cast<void>(std::fprintf(stderr, "rewrite_launches: cannot write %s\n", argv[2]));
    return 1;
  }
  return 0;
}
