#pragma once

// Plain C++: includes no CUDA header, so that the rewriting tool builds anywhere.
//
// The rewriting step that lets a CUDA source run on the simulated device: every
// `callee<<<grid, block[, shared[, stream]]>>>(args)` becomes
// `::graphstep::sim::launcher(<how to choose callee for args>, ::graphstep::sim::launch_config(
// grid, block, ...), "callee")(args)`, every `extern __shared__ T name[];` a pointer to the
// block's dynamic shared memory, and every `__global__` function is followed by a declaration
// (kernel_signature, in graphstep/sim/launch.hpp) through which a launch deduces its template
// arguments and resolves its overloads. Comments, string and character literals are left alone;
// line numbers do not change (a #line 1 "<file>" precedes the source).

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace graphstep::sim::detail {

/// @brief A source the rewriter cannot parse; what() is "file:line: what is wrong".
class rewrite_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief An `#include` of a source: its header name and whether it is quoted ("x" or <x>).
struct include_directive {
  std::string name;
  bool quoted{};
};

/// @brief An object-like macro a source defines: its name and replacement list.
struct macro_definition {
  std::string name;
  std::string replacement;
};

/// @brief The preprocessing directives of `source` the rewriting step follows.
struct source_directives {
  std::vector<include_directive> includes;
  std::vector<macro_definition> macros;
};

/// @brief The #includes and object-like #defines of `source` (comments and literals skipped).
/// @throws rewrite_error
source_directives directives_of(std::string_view source, std::string_view file_name);

/// @brief The names of the macros among `macros` that declare kernels: those whose replacement
/// holds `__global__`, or the name of another such macro (`#define KERNEL __global__ void`,
/// `#define GLOBAL __global__`, `#define EXPORTED_KERNEL GLOBAL`).
std::vector<std::string> kernel_macros(std::vector<macro_definition> const& macros);

/// @brief `source` (named `file_name` in messages and #line) with its launches rewritten, after
/// #include <graphstep/sim/device.hpp>: a .cu file. A kernel may be declared with `__global__`,
/// or with one of `kernel_macro_names` (defined in the headers the source includes), or with an
/// object-like macro the source itself defines to hold `__global__`. Each `__device__`,
/// `__constant__` or `__managed__` variable defined at namespace scope is registered as a symbol
/// (graphstep/sim/symbol.hpp) by a definition added after its own, on the same line.
/// @throws rewrite_error
std::string rewrite_launches(std::string_view source, std::string_view file_name,
                             std::vector<std::string> const& kernel_macro_names = {});

/// @brief Whether `source` declares or launches kernels, or declares `extern __shared__`
/// arrays: what a compiler cannot read unless rewrite_header rewrites it. (rewrite_header also
/// rewrites a header that only defines `__device__`, `__constant__` or `__managed__` variables,
/// to register them; as it is, such a header compiles, and its variables are not symbols.)
/// @throws rewrite_error
bool holds_device_code(std::string_view source, std::string_view file_name,
                       std::vector<std::string> const& kernel_macro_names = {});

/// @brief A header for the mirrored include folder: rewritten as rewrite_launches does (without
/// the #include of device.hpp, which the .cu file had first) when it holds device code to
/// rewrite, else one line that includes the original: `included_as` (a path from the mirrored
/// copy's folder), or `file_name` when that is empty.
/// @throws rewrite_error
std::string rewrite_header(std::string_view source, std::string_view file_name,
                           std::vector<std::string> const& kernel_macro_names = {},
                           std::string_view included_as = {});

}  // namespace graphstep::sim::detail
