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
// line numbers do not change (the output starts with #line 1 "<file>").

#include <stdexcept>
#include <string>
#include <string_view>

namespace graphstep::sim::detail {

/// @brief A source the rewriter cannot parse; what() is "file:line: what is wrong".
class rewrite_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief `source` (named `file_name` in messages and #line) with its launches rewritten, after
/// #include <graphstep/sim/device.hpp>: a .cu file.
/// @throws rewrite_error
std::string rewrite_launches(std::string_view source, std::string_view file_name);

/// @brief A header for the mirrored include folder: rewritten as rewrite_launches does (without
/// the #include of device.hpp, which the .cu file had first) when it holds device code to
/// rewrite, else one line that includes the original `file_name`.
/// @throws rewrite_error
std::string rewrite_header(std::string_view source, std::string_view file_name);

}  // namespace graphstep::sim::detail
