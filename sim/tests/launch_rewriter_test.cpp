// The rewriting step that lets CUDA sources run on the simulated device.

#include "detail/launch_rewriter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace {

using graphstep::sim::detail::rewrite_error;
using graphstep::sim::detail::rewrite_header;
using graphstep::sim::detail::rewrite_launches;

// The rewritten body, without the two lines the rewriter puts first.
std::string body(std::string const& source) {
  std::string const out = rewrite_launches(source, "k.cu");
  std::size_t const first = out.find('\n');
  std::size_t const second = out.find('\n', first + 1);
  return out.substr(second + 1);
}

// What a launch of `callee` (no template arguments named) becomes before its configuration:
// the kernel is chosen by the launch's arguments, through the signature declaration in
// `scope` and the callee's address.
std::string chosen(std::string const& scope, std::string const& kernel, std::string callee = {}) {
  if (callee.empty()) callee = scope.empty() ? kernel : scope + "::" + kernel;
  return "::graphstep::sim::launcher([] { " +
         (scope.empty() ? std::string{} : "using namespace " + scope + "; ") +
         "return [](auto&&... graphstep_sim_a) -> decltype(graphstep_sim_signature_of_" + kernel +
         "(::graphstep::sim::kernel_signature{}, static_cast<decltype(graphstep_sim_a)&&>("
         "graphstep_sim_a)...)) { return {}; }; }(), [&](auto graphstep_sim_take) -> "
         "decltype(graphstep_sim_take(" +
         callee + ")) { return " + callee + "; }, ";
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
            chosen("", "k") + "::graphstep::sim::launch_config(g, b), \"k\")(x, 1);");
  EXPECT_EQ(body("k<<<g, b, 0>>>(x);"),
            chosen("", "k") + "::graphstep::sim::launch_config(g, b, 0), \"k\")(x);");
  EXPECT_EQ(
      body("k <<< g, b, s, stream.get() >>> (x);"),
      chosen("", "k") + "::graphstep::sim::launch_config( g, b, s, stream.get() ), \"k\") (x);");
  EXPECT_EQ(body("k\n<<<g, b>>>(x);"),
            chosen("", "k") + "::graphstep::sim::launch_config(g, b), \"k\")\n(x);");
}

TEST(launch_rewriter, keeps_namespaces_and_template_arguments_of_the_kernel) {
  // Named template arguments: the callee is one function, taken as it is.
  EXPECT_EQ(body("detail::fill<float, 4><<<1, 32>>>(p);"),
            "::graphstep::sim::launcher(detail::fill<float, 4>, ::graphstep::sim::launch_config(1, "
            "32), \"detail::fill<float,4>\")(p);");
  EXPECT_EQ(body("if (n) ::ns::k<T><<<f(a, b), dim3(2, 2)>>>(p);"),
            "if (n) ::graphstep::sim::launcher(::ns::k<T>, ::graphstep::sim::launch_config(f(a, "
            "b), dim3(2, 2)), \"::ns::k<T>\")(p);");
}

TEST(launch_rewriter, a_launch_without_template_arguments_chooses_its_kernel_by_its_arguments) {
  // The signature declaration is looked up in the kernel's namespace.
  EXPECT_EQ(body("a::b::fill<<<1, 64>>>(out, 1.0f);"),
            chosen("a::b", "fill") +
                "::graphstep::sim::launch_config(1, 64), \"a::b::fill\")"
                "(out, 1.0f);");
  EXPECT_EQ(
      body("::fill<<<1, 64>>>(out);"),
      chosen("", "fill", "::fill") + "::graphstep::sim::launch_config(1, 64), \"::fill\")(out);");
}

TEST(launch_rewriter, declares_the_signature_of_each_kernel_where_it_ends) {
  EXPECT_EQ(body("template <class T>\n__global__ void fill(T* out, T v) {\n  *out = v;\n}\n"),
            "template <class T>\n__global__ void fill(T* out, T v) {\n  *out = v;\n} template "
            "<class T> auto graphstep_sim_signature_of_fill(::graphstep::sim::kernel_signature, T* "
            "out, T v) -> void (*)(T* out, T v);\n");
  // A declaration, parameters over two lines with comments and defaults, attributes before the
  // name, no parameters.
  EXPECT_EQ(body("__global__ void __launch_bounds__(128) k(int* p, // out\n int n = 4);"),
            "__global__ void __launch_bounds__(128) k(int* p, // out\n int n = 4); auto "
            "graphstep_sim_signature_of_k(::graphstep::sim::kernel_signature, int* p, int n = 4)"
            " -> void (*)(int* p, int n );");
  EXPECT_EQ(body("static __global__ void tick(void) {}"),
            "static __global__ void tick(void) {} auto "
            "graphstep_sim_signature_of_tick(::graphstep::sim::kernel_signature) -> void (*)();");
  EXPECT_EQ(body("template <typename T, int N = 4> __global__ void k(T (*f)(T), T* p) { "
                 "char const* s = \"}\"; }"),
            "template <typename T, int N = 4> __global__ void k(T (*f)(T), T* p) { "
            "char const* s = \"}\"; } template <typename T, int N = 4> auto "
            "graphstep_sim_signature_of_k(::graphstep::sim::kernel_signature, T (*f)(T), T* p) "
            "-> void (*)(T (*f)(T), T* p);");
}

TEST(launch_rewriter, declares_no_signature_for_specializations_and_c_kernels) {
  for (std::string const source :
       {"template <> __global__ void k<int>(int* p) {}", "template __global__ void k<int>(int*);",
        "extern \"C\" __global__ void k(int* p) {}", "__global__ void ns::k(int* p) {}"}) {
    EXPECT_EQ(body(source), source);
  }
}

TEST(launch_rewriter, a_header_without_device_code_becomes_an_include_of_the_original) {
  EXPECT_EQ(rewrite_header("#pragma once\nint f();\n", "/src/a.h"), "#include \"/src/a.h\"\n");
  EXPECT_EQ(rewrite_header("__global__ void k();\n", "/src/k.cuh"),
            "#line 1 \"/src/k.cuh\"\n__global__ void k(); auto graphstep_sim_signature_of_k("
            "::graphstep::sim::kernel_signature) -> void (*)();\n");
  EXPECT_EQ(rewrite_header("void f() { extern __shared__ float s[]; }", "/src/s.cuh"),
            "#line 1 \"/src/s.cuh\"\nvoid f() { float* const s = "
            "::graphstep::sim::detail::dynamic_shared<float>(); }");
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
  EXPECT_EQ(body("void f() { extern __shared__ float cache[]; }"),
            "void f() { float* const cache = ::graphstep::sim::detail::dynamic_shared<float>(); }");
  EXPECT_EQ(body("namespace n {\ntemplate <class T> T* g() {\n  if (true) {\n"
                 "    extern __shared__ __align__(16) unsigned char raw[];\n  }\n}\n}"),
            "namespace n {\ntemplate <class T> T* g() {\n  if (true) {\n    unsigned char* const "
            "raw = ::graphstep::sim::detail::dynamic_shared<unsigned char>();\n  }\n}\n}");
}

TEST(launch_rewriter, names_the_file_and_line_of_what_it_cannot_parse) {
  EXPECT_EQ(error_of("int a;\nk<<<1, 2;\n"),
            "k.cu:2: a <<< whose configuration is never closed by >>>");
  EXPECT_EQ(error_of("\n\n<<<1, 1>>>(x);"), "k.cu:3: no kernel name before <<<");
  EXPECT_EQ(error_of("k<<<1, 1>>>;"),
            "k.cu:1: a <<<...>>> launch not followed by its argument list");
  EXPECT_EQ(error_of("/* never closed"), "k.cu:1: a /* comment that never ends");
  EXPECT_EQ(error_of("namespace a {\nextern __shared__ float s[];\n}"),
            "k.cu:2: extern __shared__ outside a function is not supported on the simulated "
            "device yet: declare the array inside the kernel or device function that uses it");
  EXPECT_EQ(error_of("char const* s = \"open;\n"),
            "k.cu:1: a quoted literal that never ends on its line");
}

}  // namespace
