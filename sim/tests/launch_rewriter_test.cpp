// The rewriting step that lets CUDA sources run on the simulated device.

#include "detail/launch_rewriter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {

using graphstep::sim::detail::directives_of;
using graphstep::sim::detail::holds_device_code;
using graphstep::sim::detail::kernel_macros;
using graphstep::sim::detail::macro_definition;
using graphstep::sim::detail::rewrite_error;
using graphstep::sim::detail::rewrite_header;
using graphstep::sim::detail::rewrite_launches;

// The rewritten body: what follows the #line that starts the source.
std::string body(std::string const& source, std::vector<std::string> const& kernel_macros = {}) {
  std::string const out = rewrite_launches(source, "k.cu", kernel_macros);
  std::size_t const line = out.find("#line 1 \"k.cu\"\n");
  return out.substr(out.find('\n', line) + 1);
}

// What comes before the source: the device header and the fallback signature declarations.
std::string preamble(std::string const& source) {
  std::string const out = rewrite_launches(source, "k.cu");
  return out.substr(0, out.find("#line 1 \"k.cu\"\n"));
}

// What a launch of `callee` becomes before its configuration: the kernel is chosen by the
// launch's arguments and the template arguments it names, through the signature declaration in
// `scope` and the callee's address.
std::string chosen(std::string const& scope, std::string const& kernel, std::string callee = {},
                   std::string const& template_arguments = {}) {
  if (callee.empty()) {
    callee = (scope.empty() ? kernel : scope + "::" + kernel) + template_arguments;
  }
  return "::graphstep::sim::launcher([] { " +
         (scope.empty() ? std::string{} : "using namespace " + scope + "; ") +
         "return [](auto&&... graphstep_sim_a) -> decltype(graphstep_sim_signature_of_" + kernel +
         template_arguments +
         "(::graphstep::sim::kernel_signature{}, static_cast<decltype(graphstep_sim_a)&&>("
         "graphstep_sim_a)...)) { return {}; }; }(), [&](auto graphstep_sim_take) -> "
         "decltype(graphstep_sim_take(" +
         callee + ")) { return " + callee + "; }, ";
}

// The declarations that let a launch name template arguments of a kernel never seen.
std::string fallback_signatures(std::string const& kernel) {
  return "template <class...> int graphstep_sim_signature_of_" + kernel +
         "(...);\ntemplate <auto...> int graphstep_sim_signature_of_" + kernel + "(...);\n";
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
  // Named template arguments, all or the first ones, go to the signature declaration too: the
  // rest are deduced from the arguments, as in a call.
  EXPECT_EQ(body("detail::fill<float, 4><<<1, 32>>>(p);"),
            chosen("detail", "fill", {}, "<float, 4>") +
                "::graphstep::sim::launch_config(1, 32), \"detail::fill<float,4>\")(p);");
  EXPECT_EQ(body("if (n) ::ns::k<T><<<f(a, b), dim3(2, 2)>>>(p);"),
            "if (n) " + chosen("::ns", "k", {}, "<T>") +
                "::graphstep::sim::launch_config(f(a, b), dim3(2, 2)), \"::ns::k<T>\")(p);");
  EXPECT_EQ(body("k<4><<<1, 1>>>(p);"),
            chosen("", "k", {}, "<4>") + "::graphstep::sim::launch_config(1, 1), \"k<4>\")(p);");
  // A callee over two lines, with a comment, is written on one line; the line count stays.
  EXPECT_EQ(body("ns::k< 4, /* rows */\n float ><<<1, 1>>>(p);"),
            chosen("ns", "k", {}, "< 4, float >") +
                "::graphstep::sim::launch_config(1, 1), \"ns::k<4,float>\")\n(p);");
}

TEST(launch_rewriter, declares_a_fallback_signature_for_kernels_launched_with_template_arguments) {
  // Once per kernel name, before the source: where the kernel itself was never seen,
  // `graphstep_sim_signature_of_k<4>` must still read as a template.
  EXPECT_EQ(preamble("k<4><<<1, 1>>>(p); k<8><<<1, 1>>>(p); n::g<T><<<1, 1>>>(p); "
                     "h<<<1, 1>>>(p);"),
            "#include <graphstep/sim/device.hpp>\n" + fallback_signatures("k") +
                fallback_signatures("g"));
  EXPECT_EQ(rewrite_header("void f(int* p) { k<1><<<1, 1>>>(p); }", "/src/l.cuh")
                .substr(0, fallback_signatures("k").size()),
            fallback_signatures("k"));
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

TEST(launch_rewriter, declares_the_signature_of_kernels_declared_through_macros) {
  // A macro the source defines, or one the headers it includes define (given by name).
  EXPECT_EQ(body("#define KERNEL __global__ void\nKERNEL k(int* p) {}"),
            "#define KERNEL __global__ void\nKERNEL k(int* p) {} auto "
            "graphstep_sim_signature_of_k(::graphstep::sim::kernel_signature, int* p) -> void "
            "(*)(int* p);");
  EXPECT_EQ(body("template <class T>\nGLOBAL void k(T* p) {}", {"GLOBAL"}),
            "template <class T>\nGLOBAL void k(T* p) {} template <class T> auto "
            "graphstep_sim_signature_of_k(::graphstep::sim::kernel_signature, T* p) -> void "
            "(*)(T* p);");
  // A macro defined through another.
  EXPECT_EQ(body("#define EXPORTED GLOBAL\nEXPORTED void k() {}", {"GLOBAL"}),
            "#define EXPORTED GLOBAL\nEXPORTED void k() {} auto "
            "graphstep_sim_signature_of_k(::graphstep::sim::kernel_signature) -> void (*)();");
  // Directives themselves declare nothing; a function-like macro is expanded by the compiler
  // alone (its kernel is launched by name).
  for (std::string const source :
       {"#define KERNEL __global__ void\n", "#define K(name) __global__ void name(int* p) {}\n",
        "#define K(name) __global__ void name(int* p) {}\nK(k)\n",
        "#if 0\n__global__ void k();\n#endif\n"}) {
    std::string const expected =
        source.find("#if 0") == 0
            ? "#if 0\n__global__ void k(); auto "
              "graphstep_sim_signature_of_k(::graphstep::sim::kernel_signature) -> void (*)();\n"
              "#endif\n"
            : source;
    EXPECT_EQ(body(source), expected);
  }
}

TEST(launch_rewriter, finds_the_includes_and_object_like_macros_of_a_source) {
  auto const found = directives_of(
      "#include \"a/b.cuh\" // kernels\n  #  include <c.h>\n#include MACRO\n"
      "#define KERNEL __global__ \\\n  void\n#define F(x) __global__ void x()\n"
      "/* c */ #define EMPTY\n#error don't\nchar const* s = \"#define NOT\";\n"
      "int x = 1'000; // #define NOT_EITHER 1\n",
      "k.cu");
  ASSERT_EQ(found.includes.size(), 2U);
  EXPECT_EQ(found.includes[0].name, "a/b.cuh");
  EXPECT_TRUE(found.includes[0].quoted);
  EXPECT_EQ(found.includes[1].name, "c.h");
  EXPECT_FALSE(found.includes[1].quoted);
  ASSERT_EQ(found.macros.size(), 2U);
  EXPECT_EQ(found.macros[0].name, "KERNEL");
  EXPECT_EQ(found.macros[0].replacement, "__global__    void");
  EXPECT_EQ(found.macros[1].name, "EMPTY");
  EXPECT_EQ(found.macros[1].replacement, "");
}

TEST(launch_rewriter, kernel_macros_are_those_that_expand_to_global) {
  std::vector<macro_definition> const macros{{"EXPORTED", "extern \"C\" GLOBAL"},
                                             {"GLOBAL", "__global__"},
                                             {"HOST_DEVICE", "__host__ __device__"},
                                             {"NOT_GLOBAL", "__global___x"},
                                             {"KERNEL", "__launch_bounds__(256) __global__ void"}};
  EXPECT_EQ(kernel_macros(macros), (std::vector<std::string>{"GLOBAL", "KERNEL", "EXPORTED"}));
}

TEST(launch_rewriter, reads_digit_separators_and_prefixed_literals) {
  std::string const source =
      "int n = 1'000'000; auto h = 0xFF'FF;\nauto s = u8\"<<<\"; auto w = L'<';\n"
      "auto r = u8R\"x(k<<<1, 1>>>() \" )x\";\n__global__ void k(int* p) {}";
  EXPECT_EQ(body(source), source +
                              " auto graphstep_sim_signature_of_k("
                              "::graphstep::sim::kernel_signature, int* p) -> void (*)(int* "
                              "p);");
}

TEST(launch_rewriter, a_header_without_device_code_becomes_an_include_of_the_original) {
  EXPECT_EQ(rewrite_header("#pragma once\nint f();\n", "/src/a.h"), "#include \"/src/a.h\"\n");
  // Such a header is not even parsed: a construct the rewriter cannot read is left to the
  // compiler.
  EXPECT_EQ(rewrite_header("char const* s = \"open;\n", "/src/b.h"), "#include \"/src/b.h\"\n");
  // A kernel declared through a macro of another header makes a header device code.
  EXPECT_EQ(rewrite_header("GLOBAL void k();\n", "/src/m.cuh", {"GLOBAL"}),
            "#line 1 \"/src/m.cuh\"\nGLOBAL void k(); auto graphstep_sim_signature_of_k("
            "::graphstep::sim::kernel_signature) -> void (*)();\n");
  EXPECT_EQ(rewrite_header("__global__ void k();\n", "/src/k.cuh"),
            "#line 1 \"/src/k.cuh\"\n__global__ void k(); auto graphstep_sim_signature_of_k("
            "::graphstep::sim::kernel_signature) -> void (*)();\n");
  EXPECT_EQ(rewrite_header("void f() { extern __shared__ float s[]; }", "/src/s.cuh"),
            "#line 1 \"/src/s.cuh\"\nvoid f() { float* const s = "
            "::graphstep::sim::detail::dynamic_shared<float>(); }");
}

TEST(launch_rewriter, a_header_holds_device_code_exactly_where_it_would_be_rewritten) {
  // What the build refuses in a header outside the rewritten folders: kernels, launches,
  // dynamic shared memory.
  EXPECT_TRUE(holds_device_code("template <class T> __global__ void k(T* p);\n", "k.cuh"));
  EXPECT_TRUE(holds_device_code("void f(int* p) { k<<<1, 1>>>(p); }\n", "l.cuh"));
  EXPECT_TRUE(holds_device_code("void f() { extern __shared__ float s[]; }", "s.cuh"));
  EXPECT_TRUE(holds_device_code("GLOBAL void k();\n", "m.cuh", {"GLOBAL"}));
  // Not what merely names the words: a macro that defines __global__ (as the toolkit's headers
  // do), a comment, a string, a plain header.
  EXPECT_FALSE(holds_device_code("#define __global__ __attribute__((global))\n", "d.h"));
  EXPECT_FALSE(holds_device_code("// k<<<1, 1>>>(p) launches __global__ k\nint f();\n", "c.h"));
  EXPECT_FALSE(holds_device_code("char const* s = \"__global__ <<<\";\n", "t.h"));
  EXPECT_FALSE(holds_device_code("#pragma once\nint f();\n", "a.h"));
  EXPECT_FALSE(holds_device_code("GLOBAL void k();\n", "m.cuh"));
}

TEST(launch_rewriter, a_mirrored_header_includes_its_original_by_the_path_it_is_given) {
  // The build gives a path from the mirror's folder: no absolute path of the checkout goes into
  // the mirror, so a compiler cache serves another checkout of the same sources.
  EXPECT_EQ(rewrite_header("#pragma once\nint f();\n", "../src/a.h", {}, "../../../src/a.h"),
            "#include \"../../../src/a.h\"\n");
  // A header with device code is rewritten, named in #line as given.
  EXPECT_EQ(rewrite_header("__global__ void k();\n", "../src/k.cuh", {}, "../../../src/k.cuh")
                .rfind("#line 1 \"../src/k.cuh\"\n", 0),
            0U);
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

// What a variable of device memory defined at namespace scope gets after its definition: its
// registration in the simulated device's symbol table.
std::string registration(std::string const& name) {
  return " static ::graphstep::sim::symbol_registration const graphstep_sim_symbol_" + name +
         "{__builtin_addressof(" + name + "), sizeof " + name + ", \"" + name + "\"};";
}

TEST(launch_rewriter, registers_variables_of_device_memory_where_they_are_defined) {
  EXPECT_EQ(body("__constant__ float table[4] = {1, 2, 3, 4};\nint x;"),
            "__constant__ float table[4] = {1, 2, 3, 4};" + registration("table") + "\nint x;");
  EXPECT_EQ(body("namespace n {\nstatic __device__ unsigned long long counter;\n}"),
            "namespace n {\nstatic __device__ unsigned long long counter;" +
                registration("counter") + "\n}");
  // Several declarators, initializers with parentheses, commas and template arguments.
  EXPECT_EQ(body("__device__ int a = f(1, 2), b{3}, c[2];"),
            "__device__ int a = f(1, 2), b{3}, c[2];" + registration("a") + registration("b") +
                registration("c"));
  EXPECT_EQ(body("__device__ pair<int, float> p;"),
            "__device__ pair<int, float> p;" + registration("p"));
  EXPECT_EQ(body("__device__ __align__(16) float const* pointer = nullptr;"),
            "__device__ __align__(16) float const* pointer = nullptr;" + registration("pointer"));
  EXPECT_EQ(body("__managed__ __device__ int both;"),
            "__managed__ __device__ int both;" + registration("both"));
  EXPECT_EQ(
      body("#include <x.h>\n__device__ int after_a_directive;"),
      "#include <x.h>\n__device__ int after_a_directive;" + registration("after_a_directive"));
}

TEST(launch_rewriter, registers_no_function_declaration_or_local) {
  // Functions, declarations, variable templates, locals and members stay as they are.
  for (std::string const source : {
           "__device__ float f(float x);",
           "__device__ __forceinline__ float g(float x) { return x; }",
           "extern __device__ int declared_elsewhere;",
           "extern \"C\" __device__ int c_declared;",
           "template <class T> __device__ T variable_template;",
           "void h() { static __device__ int local; }",
           "struct s { static __device__ int member; };",
           "#define D __device__ int in_a_macro;",
           "// __device__ int in_a_comment;",
       }) {
    EXPECT_EQ(body(source), source);
  }
  // A header with variables only is rewritten to register them; it holds no device code that
  // must be rewritten to compile.
  EXPECT_NE(rewrite_header("__constant__ int c;\n", "c.cuh", {}, "c.cuh").find(registration("c")),
            std::string::npos);
  EXPECT_FALSE(holds_device_code("__constant__ int c;\n", "c.cuh"));
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
