// The rewriting step that lets CUDA sources run on the simulated device.

#include "detail/launch_rewriter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace {

using graphstep::sim::detail::rewrite_error;
using graphstep::sim::detail::rewrite_launches;

// The rewritten body, without the two lines the rewriter puts first.
std::string body(std::string const& source) {
  std::string const out = rewrite_launches(source, "k.cu");
  std::size_t const first = out.find('\n');
  std::size_t const second = out.find('\n', first + 1);
  return out.substr(second + 1);
}

std::string error_of(std::string const& source) {
  try {
    static_cast<void>(rewrite_launches(source, "k.cu"));
  } catch (rewrite_error const& e) {
    return e.what();
  }
  return {};
}

TEST(launch_rewriter, starts_with_the_device_header_and_the_original_line_numbers) {
  std::string const out = rewrite_launches("int x;\n", "dir/k.cu");
  EXPECT_EQ(out, "#include <graphstep/sim/device.hpp>\n#line 1 \"dir/k.cu\"\nint x;\n");
}

TEST(launch_rewriter, rewrites_a_launch_with_two_three_and_four_configuration_values) {
  EXPECT_EQ(body("k<<<g, b>>>(x, 1);"),
            "::graphstep::sim::launcher(k, ::graphstep::sim::launch_config(g, b), \"k\")(x, 1);");
  EXPECT_EQ(body("k<<<g, b, 0>>>(x);"),
            "::graphstep::sim::launcher(k, ::graphstep::sim::launch_config(g, b, 0), \"k\")(x);");
  EXPECT_EQ(body("k <<< g, b, s, stream.get() >>> (x);"),
            "::graphstep::sim::launcher(k, ::graphstep::sim::launch_config( g, b, s, "
            "stream.get() ), \"k\") (x);");
  EXPECT_EQ(body("k\n<<<g, b>>>(x);"),
            "::graphstep::sim::launcher(k, ::graphstep::sim::launch_config(g, b), \"k\")\n(x);");
}

TEST(launch_rewriter, keeps_namespaces_and_template_arguments_of_the_kernel) {
  EXPECT_EQ(body("detail::fill<float, 4><<<1, 32>>>(p);"),
            "::graphstep::sim::launcher(detail::fill<float, 4>, ::graphstep::sim::launch_config(1, "
            "32), \"detail::fill<float,4>\")(p);");
  EXPECT_EQ(body("if (n) ::ns::k<T><<<f(a, b), dim3(2, 2)>>>(p);"),
            "if (n) ::graphstep::sim::launcher(::ns::k<T>, ::graphstep::sim::launch_config(f(a, "
            "b), dim3(2, 2)), \"::ns::k<T>\")(p);");
}

TEST(launch_rewriter, keeps_line_numbers_of_a_launch_over_several_lines) {
  std::string const source = "k<<<blocks,\n    threads, 0,\n    stream>>>(a,\n b);\nint after;\n";
  std::string const out = body(source);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'),
            std::count(source.begin(), source.end(), '\n'));
  EXPECT_NE(out.find("int after;"), std::string::npos);
}

TEST(launch_rewriter, leaves_comments_strings_and_characters_alone) {
  std::string const source =
      "// k<<<1, 1>>>(x);\n/* k<<<1, 1>>>(x); */\nchar const* s = \"k<<<1, 1>>>(x)\";\n"
      "char c = '<';\nauto r = R\"(k<<<1,1>>>())\";\n";
  EXPECT_EQ(body(source), source);
}

TEST(launch_rewriter, turns_dynamic_shared_memory_into_the_blocks_buffer) {
  EXPECT_EQ(body("extern __shared__ float cache[];"),
            "float* const cache = ::graphstep::sim::detail::dynamic_shared<float>();");
  EXPECT_EQ(
      body("extern __shared__ __align__(16) unsigned char raw[];"),
      "unsigned char* const raw = ::graphstep::sim::detail::dynamic_shared<unsigned char>();");
}

TEST(launch_rewriter, names_the_file_and_line_of_what_it_cannot_parse) {
  EXPECT_EQ(error_of("int a;\nk<<<1, 2;\n"),
            "k.cu:2: a <<< whose configuration is never closed by >>>");
  EXPECT_EQ(error_of("\n\n<<<1, 1>>>(x);"), "k.cu:3: no kernel name before <<<");
  EXPECT_EQ(error_of("k<<<1, 1>>>;"),
            "k.cu:1: a <<<...>>> launch not followed by its argument list");
  EXPECT_EQ(error_of("/* never closed"), "k.cu:1: a /* comment that never ends");
  EXPECT_EQ(error_of("char const* s = \"open;\n"),
            "k.cu:1: a quoted literal that never ends on its line");
}

}  // namespace
